"""The NumPy tensor-parallel run (no PyTorch needed): every regime on the
host backend, every sampled all-reduce bit-exact and within its bound."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tp_numpy  # noqa: E402


def test_numpy_tensor_parallel_run_every_regime(tmp_path, capsys):
    pytest.importorskip("quickreduce")
    assert tp_numpy.main(["--out", str(tmp_path), "--prompts", "2"]) == 0
    table = capsys.readouterr().out
    assert "5 regimes passed, 0 failed" in table
    for regime in ("FP", "INT8", "INT6", "INT4", "INT3"):
        assert f"| {regime} | " in table


def test_numpy_tensor_parallel_run_world_size_4(tmp_path, capsys):
    pytest.importorskip("quickreduce")
    assert tp_numpy.main(["--out", str(tmp_path), "--world-size", "4", "--regimes", "FP,INT4",
                          "--prompts", "1", "--new-tokens", "16"]) == 0
    assert "2 regimes passed, 0 failed" in capsys.readouterr().out
