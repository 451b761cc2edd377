"""Tests of the trained-model path: the corpus' prose extraction, the
safetensors writer and reader, the analysis' memory budget (the Jacobian in
chunks gives the unchunked result; over budget the bound checks are skipped,
never an out-of-memory crash), and, end to end on the host backend, a tiny
byte-level model trained for a few seconds here and evaluated on held-out
text at world size 2 (docs/model-quality.md)."""

import csv
import glob
import json
import math
import os
import shutil
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lm_corpus  # noqa: E402
import safetensors_io  # noqa: E402
import tp_bounds  # noqa: E402
import tp_common  # noqa: E402
import tp_decoder  # noqa: E402
import tp_run  # noqa: E402
import train_lm  # noqa: E402

RST = """\
Reading files
=============

The :func:`open` function returns a :term:`file object`, and is most commonly
used with ``open(filename, mode)``. See `the tutorial <tut_>`_ for more.

.. code-block:: python

   with open("x") as f:
       data = f.read()

An example session::

   >>> print("skipped")
   skipped

.. function:: close(fd)

   Close the file descriptor *fd*.

.. note:: Files are closed when their object is collected.

   >>> also_skipped()
"""


def test_stage_keeps_the_prose_and_drops_code_markup_and_directives(tmp_path):
    src = tmp_path / "root" / lm_corpus.SOURCES
    src.mkdir(parents=True)
    (src / "io.rst.txt").write_text(RST)
    info = lm_corpus.stage(str(tmp_path / "root"), str(tmp_path / "corpus"), held_out_mod=1)
    text = (tmp_path / "corpus" / "heldout.txt").read_text()
    assert info["heldout"]["files"] == 1 and info["train"]["files"] == 0
    assert "The open function returns a file object, and is most commonly" in text
    assert "used with open(filename, mode). See the tutorial for more." in text
    assert "Close the file descriptor *fd*." in text
    assert "Files are closed when their object is collected." in text
    assert "An example session:" in text
    for gone in ("data = f.read()", "skipped", ".. ", "=====", ":func:", "``", "close(fd)"):
        assert gone not in text, gone


def test_stage_says_which_package_is_missing(tmp_path):
    with pytest.raises(SystemExit, match="apt-get install python3.11-doc"):
        lm_corpus.stage(str(tmp_path), str(tmp_path / "corpus"))


def test_safetensors_by_hand_round_trips_and_matches_the_module(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {"a.weight": rng.standard_normal((3, 5)).astype(np.float32),
               "b": rng.standard_normal(7).astype(np.float16),
               "c": np.arange(4, dtype=np.int64)}
    path = str(tmp_path / "x.safetensors")
    safetensors_io.write(path, tensors)
    back = safetensors_io.read(path)
    assert sorted(back) == sorted(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v)
    raw = open(path, "rb").read()
    (n,) = np.frombuffer(raw[:8], dtype="<u8")
    assert (8 + int(n)) % 8 == 0 and json.loads(raw[8:8 + int(n)])["__metadata__"]
    try:
        import safetensors.numpy
    except ImportError:
        return  # CI: the format above is the specification's
    theirs = safetensors.numpy.load_file(path)
    assert all(np.array_equal(theirs[k], tensors[k]) for k in tensors)
    safetensors.numpy.save_file(tensors, path)
    assert all(np.array_equal(safetensors_io.read(path)[k], tensors[k]) for k in tensors)


def test_bf16_tensors_are_read_exactly(tmp_path):
    x = torch.randn(6).to(torch.bfloat16)
    path = str(tmp_path / "bf16.safetensors")
    raw = x.view(torch.int16).numpy().tobytes()
    header = json.dumps({"x": {"dtype": "BF16", "shape": [6], "data_offsets": [0, len(raw)]}})
    header += " " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header.encode() + raw)
    assert torch.equal(torch.from_numpy(safetensors_io.read(path)["x"]), x.float())


@pytest.fixture(scope="module")
def tiny_sensitivity():
    config = tp_common.DecoderConfig(**tp_common.PRESETS["tiny"])
    g = torch.Generator().manual_seed(5)
    state = tp_common.random_state(config, lambda *s, std: torch.randn(*s, generator=g) * std)
    modes = [tp_bounds.Mode("float16", "unsharded"), tp_bounds.Mode("float16", "INT4", 2)]
    tokens = [3, 1, 4, 1, 5, 9, 2, 6]
    return tp_bounds.Sensitivity(config, state, tokens, modes), tokens


def test_jacobian_in_chunks_equals_the_whole_and_respects_the_budget(tiny_sensitivity):
    sens, tokens = tiny_sensitivity
    pairs = [(1, 0)]
    p = torch.softmax(torch.randn(len(tokens), 128, generator=torch.Generator().manual_seed(1)),
                      -1).numpy()
    whole = sens.logit_scales(range(len(tokens)), pairs, centers=(None, p),
                              memory_bytes=1 << 34)
    cost = sens.cost(range(len(tokens)), pairs, 2)
    # Room for one Jacobian row at a time (and a vocabulary chunk of a few logits).
    one_row = cost["fixed_bytes"] + cost["row_bytes"]
    assert sens.fits(range(len(tokens)), pairs, 2, memory_bytes=one_row) is None
    chunked = sens.logit_scales(range(len(tokens)), pairs, centers=(None, p),
                                memory_bytes=one_row)
    for (s1, h1), (s2, h2) in zip(whole, chunked):
        np.testing.assert_allclose(s2, s1, rtol=1e-5, atol=1e-12)
        np.testing.assert_array_equal(h2, h1)
    # Below one row it refuses up front, saying why, instead of allocating.
    reason = sens.fits(range(len(tokens)), pairs, 2, memory_bytes=one_row - 1)
    assert reason and "GiB" in reason
    with pytest.raises(MemoryError):
        sens.logit_scales(range(len(tokens)), pairs, memory_bytes=one_row - 1)
    assert "TFLOP" in sens.fits(range(len(tokens)), pairs, 2, max_flops=1.0)


def _common_licenses_root(tmp_path):
    """A stand-in for the package: base-files' license texts (English prose on
    every Debian machine) laid out where `stage` reads the documentation."""
    src = tmp_path / "root" / lm_corpus.SOURCES
    src.mkdir(parents=True)
    seen = set()
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        real = os.path.realpath(path)
        if os.path.isfile(real) and real not in seen:
            seen.add(real)
            shutil.copy(real, src / (os.path.basename(real) + ".rst.txt"))
    if len(seen) < 4:
        pytest.skip("no /usr/share/common-licenses (base-files) here")
    return str(tmp_path / "root")


def test_train_a_tiny_model_and_evaluate_it_on_held_out_text(tmp_path):
    corpus, model = str(tmp_path / "corpus"), str(tmp_path / "model")
    info = lm_corpus.stage(_common_licenses_root(tmp_path), corpus, held_out_mod=4)
    assert info["heldout"]["bytes"] > 4000 and info["train"]["bytes"] > 50000
    train_lm.main(["train", "--corpus", corpus, "--out", model, "--preset", "tiny"])
    summary = json.load(open(os.path.join(model, "train.json")))
    curve = list(csv.DictReader(open(os.path.join(model, "train_log.csv"))))
    # It learned: the held-out loss fell from near uniform (ln 256 = 5.55).
    assert float(curve[-1]["heldout_loss"]) < float(curve[0]["heldout_loss"])
    assert summary["heldout_loss_nats_per_byte"] < 0.75 * math.log(256)
    # The checkpoint is transformers' layout and loads through the example's loader.
    config = tp_decoder.load_config(model)
    state = tp_decoder.load_state_dict(model)
    assert config.num_hidden_layers == 2 and config.vocab_size == 256
    assert "model.layers.1.mlp.down_proj.weight" in state and "lm_head.weight" in state

    out = str(tmp_path / "run")
    rc = tp_run.main(["--model", model, "--heldout", os.path.join(corpus, "heldout.txt"),
                      "--world-size", "2", "--regimes", "FP,INT8,INT4", "--dtypes", "fp16",
                      "--heldout-windows", "4", "--heldout-len", "64", "--prompts", "4",
                      "--prompt-len", "16", "--new-tokens", "16", "--stream-len", "8",
                      "--attribution", "INT4", "--layouts", "fused,vocab", "--out", out])
    res = json.load(open(os.path.join(out, "results.json")))
    assert rc == 0 and res["failed"] == 0, [c for c in res["checks"] if not c["ok"]]
    rows = {r["regime"]: r for r in res["table"]}
    assert rows["FP"]["heldout_dloss_vs_fp"] == 0.0
    assert rows["FP"]["heldout_loss"] == pytest.approx(summary["heldout_loss_nats_per_byte"],
                                                       abs=0.6)
    for r in rows.values():
        assert 0 <= r["heldout_kl_to_unsharded"] < 0.5
        assert 0 <= r["first_divergence_p10"] <= r["first_divergence_median"] <= 16
        assert 0 < r["heldout_accuracy"] < 1
    # INT4 moves the distribution further from the unsharded model than INT8.
    assert rows["INT4"]["heldout_kl_to_unsharded"] > rows["INT8"]["heldout_kl_to_unsharded"]
    layers = [a for a in res["attribution"] if a["regime"] == "INT4"]
    assert [a["layer"] for a in layers] == [0, 1]
    assert all(a["kl_to_fp"] > 0 for a in layers)
    assert "Per layer" in tp_run.format_table(res)
    # The other layouts on the same windows: the vocabulary-parallel head
    # (all-gathered in FP) is the replicated head bit for bit in every
    # regime; the fused boundaries differ from the unfused model only in the
    # RMSNorm's order of operations (and, quantized, in what it rounds).
    lay = {(r["layout"], r["regime"]): r for r in res["layouts"]}
    assert sorted(lay) == sorted((l, g) for l in ("fused", "vocab") for g in ("FP", "INT8", "INT4"))
    assert all(lay[("vocab", g)]["equal_to_unfused"] for g in ("FP", "INT8", "INT4"))
    assert abs(lay[("fused", "FP")]["dloss_vs_unfused"]) < 1e-3
    assert lay[("fused", "FP")]["kl_to_unfused"] < 1e-4
    assert lay[("fused", "INT4")]["kl_to_unfused"] < 0.5
    assert "Other layouts" in tp_run.format_table(res)

    # Over the analysis' budget: the bound checks are skipped, said so, and
    # the per-call and greedy checks still run.
    out2 = str(tmp_path / "run2")
    rc = tp_run.main(["--model", model, "--heldout", os.path.join(corpus, "heldout.txt"),
                      "--world-size", "2", "--regimes", "FP,INT4", "--dtypes", "fp16",
                      "--heldout-windows", "2", "--heldout-len", "32", "--prompts", "2",
                      "--prompt-len", "8", "--new-tokens", "8", "--stream-len", "8",
                      "--analysis-memory-gib", "1e-6", "--out", out2])
    res2 = json.load(open(os.path.join(out2, "results.json")))
    assert rc == 0 and res2["skipped"].startswith("skipped the logit, KL and perplexity")
    names = [c["check"] for c in res2["checks"]]
    assert not any("within k*S" in n for n in names)
    assert any("sampled all-reduces" in n for n in names)
    assert "skipped" in tp_run.format_table(res2)


def test_the_trained_network_is_the_example_decoder():
    """train_lm's network and tp_decoder's model compute the same function
    from the same weights (fp32), so what is trained is what is measured."""
    config = train_lm.model_config("tiny")
    torch.manual_seed(0)
    net = train_lm.build_model(config)
    tokens = torch.randint(0, 256, (1, 24), generator=torch.Generator().manual_seed(2))
    state = {k: v.detach().float() for k, v in net.state_dict().items()}
    dec = tp_decoder.TPDecoder(config, state, dtype=torch.float32, max_len=24)
    with torch.no_grad():
        ours = net(tokens)[0]
    theirs = tp_decoder.stream_logits(dec, tokens[0].tolist())
    assert float((ours - theirs).abs().max()) < 1e-4 * float(theirs.abs().max())
    assert float(ours.std()) > 0.01  # not a degenerate (all-zero) network
