"""Tests of the tensor-parallel example: the loader, the sharding, the bounds,
and the whole run on the host backend (world sizes 2, 4 and 8)."""

import json
import os
import sys
import threading

import numpy as np
import pytest

try:
    import torch
except ImportError:  # CI's fresh Debian: tp_numpy_test covers the path there
    torch = None
pytestmark = pytest.mark.skipif(torch is None, reason="the tensor-parallel example needs PyTorch")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tp_common  # noqa: E402
import tp_numpy  # noqa: E402

if torch is not None:
    import tp_bounds
    import tp_decoder
    import tp_run

REGIMES = ("FP", "INT8", "INT6", "INT4", "INT3")
TINY = tp_common.DecoderConfig(**tp_common.PRESETS["tiny"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tp_decoder.write_random_model(str(tmp_path_factory.mktemp("tiny")), TINY, seed=3)
    return tp_decoder.load_config(path), tp_decoder.load_state_dict(path)


def _threaded_tp(config, state, world_size, dtype, run, reduce_fn):
    """Runs `run(model)` on every rank of a group made of threads whose
    all-reduce is reduce_fn(list of the ranks' partials) -> sum."""
    barrier = threading.Barrier(world_size)
    partials, results, errors = [None] * world_size, [None] * world_size, []

    def make_all_reduce(rank):
        def all_reduce(x):
            partials[rank] = x
            barrier.wait()
            out = reduce_fn(list(partials))
            barrier.wait()
            return out.reshape(x.shape)
        return all_reduce

    def body(rank):
        try:
            model = tp_decoder.TPDecoder(config, state, rank, world_size, dtype=dtype, max_len=96,
                                         all_reduce=make_all_reduce(rank))
            results[rank] = run(model)
        except BaseException as e:  # surfaced below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _exact_sum(parts):
    """The sum in fp32, rank order, rounded once: what FP computes."""
    acc = parts[0].float()
    for p in parts[1:]:
        acc = acc + p.float()
    return acc.to(parts[0].dtype)


# ---------------------------------------------------------------- loading


def test_config_round_trips_through_hf_keys(tiny):
    config, _ = tiny
    assert config == TINY
    hf = TINY.to_hf()
    assert tp_decoder.DecoderConfig.from_hf(hf) == TINY
    assert hf["architectures"] == ["Qwen2ForCausalLM"]


def test_config_refuses_what_the_model_lacks():
    hf = TINY.to_hf()
    for key, value, word in (("model_type", "mistral", "model_type"),
                             ("hidden_act", "gelu", "hidden_act"),
                             ("rope_scaling", {"rope_type": "yarn", "factor": 4.0}, "rope"),
                             ("rope_parameters", {"rope_type": "llama3", "rope_theta": 5e5},
                              "rope")):
        bad = dict(hf, **{key: value})
        with pytest.raises(ValueError, match=word):
            tp_decoder.DecoderConfig.from_hf(bad)


def test_config_reads_rope_parameters_and_legacy_keys():
    hf = TINY.to_hf()
    hf["rope_parameters"] = {"rope_type": "default", "rope_theta": 123.0}
    assert tp_decoder.DecoderConfig.from_hf(hf).rope_theta == 123.0
    del hf["rope_parameters"]
    assert tp_decoder.DecoderConfig.from_hf(hf).rope_theta == TINY.rope_theta


def test_loader_reads_a_sharded_checkpoint_with_an_index(tiny, tmp_path):
    """The layout big HF checkpoints use: several files and a weight_map."""
    config, state = tiny
    names = sorted(state)
    halves = {"pytorch_model-00001-of-00002.bin": names[::2],
              "pytorch_model-00002-of-00002.bin": names[1::2]}
    weight_map = {}
    for file, part in halves.items():
        torch.save({n: state[n] for n in part}, tmp_path / file)
        weight_map.update({n: file for n in part})
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps(config.to_hf()))
    loaded = tp_decoder.load_state_dict(str(tmp_path))
    assert sorted(loaded) == names
    assert all(torch.equal(loaded[n], state[n]) for n in names)


def test_loader_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.safetensors or pytorch_model.bin"):
        tp_decoder.load_state_dict(str(tmp_path))


def test_random_model_separates_the_top_tokens(tiny):
    config, state = tiny
    model = tp_decoder.TPDecoder(config, state, dtype=torch.float32, max_len=96)
    _, logits = tp_decoder.greedy_generate(model, [1, 2, 3], 32)
    top2 = logits.topk(2).values
    assert 4.0 < float(logits.std()) < 9.0
    assert float((top2[:, 0] - top2[:, 1]).median()) > 0.5


# ---------------------------------------------------------------- sharding


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_shards_partition_the_weights(tiny, world_size):
    """Column slices of q/k/v/gate/up and row slices of o/down cover every
    weight once (kv heads: replicated when there are fewer than ranks)."""
    config, state = tiny
    shards = [tp_decoder.shard_state_dict(config, state, r, world_size)
              for r in range(world_size)]
    for name in state:
        if ".o_proj." in name or ".down_proj." in name:
            assert torch.equal(torch.cat([s[name] for s in shards], dim=1), state[name])
        elif ".q_proj." in name or ".gate_proj." in name or ".up_proj." in name:
            assert torch.equal(torch.cat([s[name] for s in shards], dim=0), state[name])
        elif ".k_proj." in name or ".v_proj." in name:
            nkv = config.num_key_value_heads
            if world_size <= nkv:
                assert torch.equal(torch.cat([s[name] for s in shards], dim=0), state[name])
            else:  # each kv head on world_size / nkv consecutive ranks
                per = world_size // nkv
                assert torch.equal(torch.cat([shards[r][name] for r in range(0, world_size, per)],
                                             dim=0), state[name])
        else:
            assert all(torch.equal(s[name], state[name]) for s in shards)


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_tensor_parallel_fp32_equals_unsharded(tiny, world_size):
    """In fp32 the sharded model is the unsharded one up to summation order."""
    config, state = tiny
    full = tp_decoder.TPDecoder(config, state, dtype=torch.float32, max_len=96)
    stream = list(range(5, 37))
    ref = tp_decoder.stream_logits(full, stream)
    outs = _threaded_tp(config, state, world_size, torch.float32,
                        lambda m: tp_decoder.stream_logits(m, stream), _exact_sum)
    for z in outs:
        assert torch.equal(z, outs[0])
        assert float((z - ref).abs().max()) < 1e-3


@pytest.mark.parametrize("world_size", [1, 2])
def test_numpy_decoder_is_the_same_model(world_size):
    """tp_numpy (the fallback without torch) computes what TPDecoder does."""
    config = tp_common.DecoderConfig(**tp_numpy.TINY)
    state = tp_numpy.random_state(config, seed=5)
    torch_state = {k: torch.from_numpy(v) for k, v in state.items()}
    stream = list(range(7, 27))
    ref = tp_decoder.stream_logits(
        tp_decoder.TPDecoder(config, torch_state, dtype=torch.float32, max_len=32), stream)
    outs = _threaded_tp(config, torch_state, world_size, torch.float32,
                        lambda m: tp_decoder.stream_logits(m, stream), _exact_sum)
    np_model = tp_numpy.NumpyTPDecoder(config, state, dtype=np.float32, max_len=32)
    z = tp_numpy.stream_logits(np_model, stream)
    assert float(np.abs(z - ref.numpy()).max()) < 1e-3
    assert float(np.abs(z - outs[0].numpy()).max()) < 1e-3


def test_a_dropped_partial_sum_is_caught(tiny):
    """The same comparison fails when one rank's partial is left out."""
    config, state = tiny
    full = tp_decoder.TPDecoder(config, state, dtype=torch.float32, max_len=96)
    stream = list(range(5, 21))
    ref = tp_decoder.stream_logits(full, stream)
    outs = _threaded_tp(config, state, 2, torch.float32,
                        lambda m: tp_decoder.stream_logits(m, stream), lambda parts: parts[0])
    assert float((outs[0] - ref).abs().max()) > 1.0


# ---------------------------------------------------------------- the bounds


def test_causal_mask_drops_only_zero_gradients(tiny):
    config, state = tiny
    modes = [tp_bounds.Mode("float16", "unsharded"), tp_bounds.Mode("float16", "FP", 2)]
    sens = tp_bounds.Sensitivity(config, state, list(range(3, 15)), modes)
    pos = torch.cat(sens.probe.positions)
    for t in (0, 5, 10):
        jac = sens._hidden_jacobian(t, list(range(config.hidden_size)))
        assert float(jac[:, pos > t].abs().max()) == 0.0
        assert float(jac[:, pos <= t].abs().max()) > 0.0


def test_scales_grow_with_the_codec_step(tiny):
    """S scales with the codec's step 1/(2Q-1), and TP FP vs unsharded is a
    few roundings: the ordering the derivation predicts."""
    config, state = tiny
    modes = [tp_bounds.Mode("float16", "unsharded")] + [tp_bounds.Mode("float16", r, 2)
                                                       for r in tp_bounds.REGIMES]
    pairs = [(1, 0)] + [(i, 1) for i in range(2, 6)]
    sens = tp_bounds.Sensitivity(config, state, list(range(3, 11)), modes)
    [(scales, head)] = sens.logit_scales(range(8), pairs)
    means = scales.mean(axis=(0, 1))
    assert all(a < b for a, b in zip(means, means[1:]))
    # INT8 -> INT4 is 255/15 = 17x in step; FP's own roundings add a little.
    assert 8 < means[3] / means[1] < 20
    assert head.max() < 0.05 * means[0]


def test_hoeffding_bound_holds_for_injected_worst_magnitude_errors(tiny):
    """Errors of the largest size the model allows (+-b, random signs) at
    every rounding point move the logits by less than k S."""
    config, state = tiny
    tokens = list(range(3, 15))
    modes = [tp_bounds.Mode("bfloat16", "INT4", 2)]
    sens = tp_bounds.Sensitivity(config, state, tokens, modes)
    [(scales, head)] = sens.logit_scales(range(len(tokens)), [(0, 0)])
    # (b_a + b_b) with a == b is 2b: halve to get one run's scale.
    bound = tp_bounds.K_SIGMA * scales[:, :, 0] / 2 + head
    g = torch.Generator().manual_seed(7)
    signs = [torch.randint(0, 2, d.shape, generator=g).float() * 2 - 1 for d in sens.deltas]

    class Inject(tp_bounds.BoundProbe):
        def _add(self, value, bounds, position_dim=1):
            i = len(self.sites)
            self.sites.append(None)
            return value + signs[i] * bounds[0]

    probe = Inject(modes)
    model = tp_decoder.TPDecoder(config, state, dtype=torch.float32, max_len=len(tokens),
                                 probe=probe)
    with torch.no_grad():
        z = model(torch.tensor([tokens]), torch.arange(len(tokens)))[0].numpy()
        clean = tp_decoder.TPDecoder(config, state, dtype=torch.float32, max_len=len(tokens))
        z0 = clean(torch.tensor([tokens]), torch.arange(len(tokens)))[0].numpy()
    ratio = np.abs(z - z0) / bound
    assert ratio.max() < 1.0
    assert ratio.max() > 0.02  # the bound is not astronomically loose


def test_distribution_bounds_hold_for_any_shift_within_c():
    """KL <= sum p (e^c - 1 - c) and |Δ log p(y)| <= c_y + log sum p e^c
    whenever |Δz_j - m| <= c_j for one shift m (adversarial and random Δ)."""
    rng = np.random.default_rng(0)
    for trial in range(300):
        z = rng.normal(size=(3, 12)) * 5
        c = rng.uniform(0, 2, size=(3, 12)) * (0.01 if trial % 2 else 1)
        m = rng.normal(size=(3, 1)) * 3
        d = m + c * rng.choice([-1.0, 1.0], size=c.shape) * rng.uniform(0.5, 1, size=c.shape)
        stream = rng.integers(0, 12, size=3).tolist()
        p = np.exp(tp_bounds.log_softmax(z))
        limits = tp_bounds.distribution_thresholds(c / tp_bounds.K_SIGMA, np.zeros_like(c), p,
                                                   stream)
        kl = tp_bounds.kl_per_position(z, z + d).mean()
        dppl = abs(tp_bounds.log_perplexity(z + d, stream) - tp_bounds.log_perplexity(z, stream))
        assert kl <= limits["kl_mean"] * (1 + 1e-12)
        assert dppl <= limits["log_ppl"] * (1 + 1e-12)


def test_centering_shrinks_the_distribution_bounds(tiny):
    """Centered scales are what KL sees; they are smaller than the plain ones."""
    config, state = tiny
    tokens = list(range(3, 11))
    modes = [tp_bounds.Mode("float16", "FP", 2), tp_bounds.Mode("float16", "INT4", 2)]
    sens = tp_bounds.Sensitivity(config, state, tokens, modes)
    p = np.full((len(tokens), config.vocab_size), 1.0 / config.vocab_size)
    (plain, _), (centered, _) = sens.logit_scales(range(len(tokens)), [(1, 0)], centers=(None, p))
    assert centered.mean() < plain.mean()


# ---------------------------------------------------------------- with quickreduce


def _qr():
    return pytest.importorskip("quickreduce")


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_models_bound_is_the_one_the_library_checks(regime, dtype, monkeypatch):
    """tp_bounds.two_shot_error_bound (qr.error_bounds) is the bound
    qr.check_bound applies: outputs just inside it pass, just outside fail."""
    qr = _qr()
    monkeypatch.setenv("QR_ONE_SHOT_MAX_KB", "0")
    tdtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(11)
    scale = torch.logspace(-3, 2, 4096)
    inputs = [(torch.randn(4096, generator=g) * scale).to(tdtype) for _ in range(2)]
    bound = tp_bounds.two_shot_error_bound(regime, False, inputs)
    exact = (inputs[0].double() + inputs[1].double()).numpy()
    for factor in (0.97, 1.03):
        out = torch.from_numpy(exact + factor * bound).to(tdtype)
        err = np.abs(out.double().numpy() - exact)  # after the output's own rounding
        ratio, violations = qr.check_bound(inputs, out, regime=regime, cast_bf16_to_fp16=False)
        assert violations == int((err > bound).sum())
        assert ratio == pytest.approx(float((err / bound).max()), rel=1e-9)
    assert violations > len(exact) // 2


def _run(tmp_path, *extra):
    _qr()
    out = tmp_path / "run"
    code = tp_run.main(["--out", str(out), *extra])
    results = json.load(open(out / "results.json"))
    failed = [c for c in results["checks"] if not c["ok"]]
    assert code == 0, failed
    return results


def test_host_backend_world_size_2_every_regime(tmp_path):
    """The CI run: every regime, fp16 and bf16, 3 prompts x 64 tokens."""
    r = _run(tmp_path)
    rows = {(t["regime"], t["dtype"]): t for t in r["table"]}
    assert len(rows) == 10
    assert all(t["bit_exact"] == t["calls_checked"] > 0 for t in rows.values())
    # FP is exact up to rounding; every codec coarser than the last costs more.
    for dtype in ("fp16", "bf16"):
        errs = [rows[(reg, dtype)]["max_abs_logit_error"] for reg in ("INT8", "INT6", "INT4", "INT3")]
        assert errs == sorted(errs)
        assert rows[("FP", dtype)]["greedy_agreement"] >= rows[("INT3", dtype)]["greedy_agreement"]


@pytest.mark.parametrize("world_size,regimes", [(4, "FP,INT8,INT4"), (8, "FP,INT6")])
def test_host_backend_larger_groups(tmp_path, world_size, regimes):
    """World sizes 4 and 8 (INT3 is world size 2 only): fewer regimes and
    tokens, since 8 processes share CI's 2 cores."""
    r = _run(tmp_path, "--world-size", str(world_size), "--regimes", regimes,
             "--dtypes", "bf16", "--prompts", "1", "--new-tokens", "16")
    assert {t["regime"] for t in r["table"]} == set(regimes.split(","))
    assert r["world_size"] == world_size
