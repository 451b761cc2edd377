"""One rank of the tensor-parallel example: for each regime and dtype of the
driver's plan.json it joins a quickreduce group, runs the sharded model with
its row-parallel partial sums all-reduced by `torch.ops.quickreduce.all_reduce`,
and saves what the driver checks (logits, tokens of every decode variant,
a sample of its all-reduce calls) under the run's directory."""

import functools
import hashlib
import json
import os
import time

import numpy as np
import torch

import tp_decoder
import tp_heldout
import tp_variants

DTYPE_MODES = {  # name -> (torch dtype, cast_bf16_to_fp16)
    "fp16": (torch.float16, False),
    "bf16": (torch.bfloat16, False),
    "bf16cast": (torch.bfloat16, True),
}


def qr_all_reduce(x, group):
    """The row-parallel sum: the torch.library op over the group's communicator."""
    return torch.ops.quickreduce.all_reduce(x, group)


class RecordingAllReduce:
    """`torch.ops.quickreduce.all_reduce` on one group, saving a sample of
    its calls (input and output bits) for the driver to check."""

    def __init__(self, group, out_dir, rank):
        self.group, self.out_dir, self.rank = group, out_dir, rank
        self.calls = 0
        self.sample = lambda index: False
        self.tag = ""
        self.saved = []

    def __call__(self, x):
        y = qr_all_reduce(x, self.group)
        if self.sample(self.calls):
            name = f"{self.tag}-call{self.calls}-r{self.rank}.npz"
            np.savez(os.path.join(self.out_dir, name),
                     input=x.detach().contiguous().view(torch.int16).cpu().numpy(),
                     output=y.detach().contiguous().view(torch.int16).cpu().numpy())
            self.saved.append(name)
        self.calls += 1
        return y


def _select_device(rank, ws, device):
    """(torch device, quickreduce device) of this rank."""
    if device == "host":
        # The ranks share the machine's cores.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // ws))
        return "cpu", None
    ordinal = rank % torch.cuda.device_count()
    torch.cuda.set_device(ordinal)
    # One fp32-accumulated rounding per matmul, as the bounds assume.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_tf32 = False
    return f"cuda:{ordinal}", ordinal


def _run_regime(model, ar, plan, regime, mode, rank, out, device):
    """The stream, the prompts (eager) and the other decode variants on one
    group; returns this rank's result of the regime and dtype."""
    res = {}
    # The stream: every call sampled (one per row-parallel layer).
    ar.tag, ar.sample = f"{regime}-{mode}-stream", (lambda i: True)
    z = tp_decoder.stream_logits(model, plan["stream"])
    res["stream_digest"] = hashlib.sha256(z.cpu().numpy().tobytes()).hexdigest()
    if rank == 0:
        np.save(os.path.join(out, f"{regime}-{mode}-stream-logits.npy"), z.cpu().numpy())
    if plan.get("heldout"):  # teacher-forced windows, no call sampled
        ar.sample = lambda i: False
        z = tp_heldout.run_windows(model, plan["heldout"])
        if rank == 0:
            np.save(os.path.join(out, f"{regime}-{mode}-heldout-logits.npy"), z)
    every = plan["sample_every"]
    gen = []
    for p, prompt in enumerate(plan["prompts"]):
        ar.tag = f"{regime}-{mode}-prompt{p}"
        first = ar.calls
        ar.sample = lambda i, first=first: i == first or (i - first) % every == 0
        tokens, logits = tp_decoder.greedy_generate(model, prompt, plan["new_tokens"])
        gen.append(tokens)
        if rank == 0:
            np.save(os.path.join(out, f"{regime}-{mode}-prompt{p}-logits.npy"),
                    logits.cpu().numpy())
    res["tokens"] = {"eager": gen}
    res["calls"] = ar.calls
    res["samples"] = ar.saved
    # Graphs and compile see the bare op (no Python side effects).
    model.all_reduce = functools.partial(qr_all_reduce, group=ar.group)
    for variant in plan["decode_variants"]:
        if not tp_variants.runs_for(variant, regime, plan["compile_regimes"]):
            continue
        step = tp_variants.make_step(variant, model, device)
        res["tokens"][variant] = [
            tp_decoder.greedy_generate(model, prompt, plan["new_tokens"], step)[0]
            for prompt in plan["prompts"]]
    return res


def worker(args):
    """Rank args.rank of args.world_size; writes worker<rank>.json."""
    import quickreduce as qr  # the package under test; imported only where it runs

    rank, ws = args.rank, args.world_size
    plan = json.load(open(os.path.join(args.out, "plan.json")))
    config = tp_decoder.load_config(args.model)
    state = tp_decoder.load_state_dict(args.model)
    device, qr_device = _select_device(rank, ws, args.device)
    results = {}
    for regime in plan["regimes"]:
        for mode in plan["dtypes"]:
            dtype, cast = DTYPE_MODES[mode]
            group = f"{plan['group_prefix']}-{regime}-{mode}"
            # The op uses the group's configured regime and cast (read at join).
            os.environ["QR_QUANTIZATION"] = regime
            os.environ["QR_CAST_BF16_TO_FP16"] = "1" if cast else "0"
            start = time.time()
            with qr.Communicator(group, rank, ws, device=qr_device) as comm:
                joined = time.time()
                ar = RecordingAllReduce(group, args.out, rank)
                model = tp_decoder.TPDecoder(config, state, rank, ws, dtype=dtype, device=device,
                                             all_reduce=ar, max_len=plan["max_len"])
                res = _run_regime(model, ar, plan, regime, mode, rank, args.out, device)
                comm.check()
                res["seconds"] = {"join": joined - start, "run": time.time() - joined}
            results[f"{regime}/{mode}"] = res
        if plan.get("layouts"):
            tp_heldout.run_layouts(qr, plan, config, state, rank, ws, device, qr_device, dtype,
                                   cast, mode, args.out)
    if plan.get("attribution"):
        dtype, cast = DTYPE_MODES[plan["attribution"]["dtype"]]
        tp_heldout.run_attribution(qr, plan, config, state, rank, ws, device, qr_device, dtype,
                                   cast, args.out)
    with open(os.path.join(args.out, f"worker{rank}.json"), "w") as f:
        json.dump(results, f)
