"""The package over the C ABI: loading, version, configuration, errors, joins
that must fail, and the communicator's own state."""

import os

import numpy as np
import pytest

import quickreduce as qr
from quickreduce import _lib
from harness import run_processes, run_threads


def test_version_matches_the_package():
    assert qr.version() == qr.__version__
    assert qr.config()["version"] == qr.__version__


def test_library_is_found_where_the_environment_says(tmp_path):
    assert os.path.exists(_lib.path())
    os.environ["QR_LIBRARY"] = str(tmp_path / "nowhere.so")
    try:
        assert str(tmp_path / "nowhere.so") in _lib.candidates()
    finally:
        del os.environ["QR_LIBRARY"]


def test_config_reflects_the_environment(monkeypatch):
    monkeypatch.setenv("QR_QUANTIZATION", "INT4")
    monkeypatch.setenv("QR_QUANTIZATION_MIN_SIZE_KB", "128")
    c = qr.config()
    assert c["regime"] == "INT4"
    assert c["quantization_min_size_bytes"] == 128 * 1024
    assert set(c["one_shot_ceiling_bytes"]) == {"2", "4", "8"}


def test_config_names_an_invalid_variable(monkeypatch):
    monkeypatch.setenv("QR_CAST_BF16_TO_FP16", "maybe")
    with pytest.raises(qr.InvalidArgument, match="QR_CAST_BF16_TO_FP16") as e:
        qr.config()
    assert e.value.status == "QR_INVALID_ARGUMENT"
    assert isinstance(e.value, ValueError)


def test_every_status_has_its_exception():
    lib = _lib.lib()
    for code, cls in [(1, qr.InvalidArgument), (2, qr.Unavailable), (3, qr.Timeout),
                      (4, qr.PeerFailed), (5, qr.Unsupported), (6, qr.AlreadyExists),
                      (7, qr.Internal)]:
        e = qr.errors.error_for_status(code, "text")
        assert type(e) is cls and isinstance(e, qr.QuickReduceError)
        assert e.status == lib.qr_status_name(code).decode()
        assert str(e) == "text"
    assert issubclass(qr.Timeout, TimeoutError)


def test_regime_parsing():
    assert qr.Regime.parse("int4") is qr.Regime.INT4
    assert qr.Regime.parse(2) is qr.Regime.INT6
    assert [r.name for r in qr.Regime] == ["FP", "INT8", "INT6", "INT4", "INT3", "NONE"]
    assert [int(r) for r in qr.Regime] == [0, 1, 2, 3, 4, 5]
    with pytest.raises(qr.InvalidArgument, match="INT5"):
        qr.Regime.parse("INT5")
    with pytest.raises(qr.InvalidArgument):
        qr.Regime.parse(9)


@pytest.mark.parametrize("kwargs, match", [
    (dict(rank=0, world_size=3), "world size"),
    (dict(rank=2, world_size=2), "rank"),
    (dict(rank=-1, world_size=2), "rank"),
    (dict(rank=0, world_size=2, group="bad name!"), "group"),
    (dict(rank=0, world_size=2, device=-3), "device"),
])
def test_bad_join_arguments_are_invalid(group_name, kwargs, match):
    kwargs.setdefault("group", group_name)
    with pytest.raises(qr.InvalidArgument, match=match):
        qr.Communicator(**kwargs)


def test_lone_rank_times_out_naming_the_missing_rank(group_name):
    with pytest.raises(qr.Timeout, match=r"ranks \[1\] never joined"):
        qr.Communicator(group_name, 0, 2, timeout_ms=300)


def test_unreachable_broker_is_unavailable(group_name, tmp_path):
    with pytest.raises(qr.Unavailable):
        qr.Communicator(group_name, 0, 2, broker_socket=str(tmp_path / "none.sock"),
                        timeout_ms=300)


def test_duplicate_rank_already_exists(group_name):
    def body(rank):
        if rank == 0:
            with qr.Communicator(group_name, 0, 2, timeout_ms=3000):
                pass
            return None
        import time
        time.sleep(0.2)  # rank 0 has joined and waits for rank 1
        with pytest.raises(qr.AlreadyExists):
            qr.Communicator(group_name, 0, 2, timeout_ms=1000)
        with qr.Communicator(group_name, 1, 2, timeout_ms=3000):
            pass
        return None
    run_threads(2, body)


def _props(rank, group):
    with qr.Communicator(group, rank, 2) as c:
        assert (c.rank, c.world_size, c.device, c.group, c.name) == (rank, 2, None, group, group)
        assert c.healthy and not c.closed
        assert qr.lookup(group) is c
        c.check()
        cfg = c.config
        assert set(cfg["one_shot_ceiling_bytes"]) == {"2"}
        assert "host" in repr(c)
    assert c.closed and not c.healthy
    assert qr.lookup(group) is None
    c.close()  # idempotent
    with pytest.raises(qr.InvalidArgument, match="closed"):
        c.all_reduce(np.zeros(8, np.float16))
    assert not c.should_all_reduce(np.zeros(8, np.float16))
    return True


def test_properties_and_close(group_name):
    assert run_processes(2, _props, group_name) == [True, True]
