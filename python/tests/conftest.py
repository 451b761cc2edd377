"""Shared fixtures: a private broker for the whole session (no autostart, so
nothing outlives the tests), unique group names, ranks as processes or threads."""

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _TESTS)
if os.environ.get("QR_TEST_INSTALLED") != "1":  # else: the installed package under test
    sys.path.insert(0, os.path.dirname(_TESTS))

import quickreduce as qr  # noqa: E402
from quickreduce import _lib  # noqa: E402


def _broker_binary():
    b = os.environ.get("QR_BROKER_BIN") or _lib.binary("qr-broker")
    if not b:
        pytest.exit("qr-broker not found: set QR_BROKER_BIN", returncode=2)
    return b


def _wait_for_socket(path, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("qr-broker exited with %d" % proc.returncode)
        if os.path.exists(path):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
                return
            except OSError:
                pass
            finally:
                s.close()
        time.sleep(0.01)
    raise RuntimeError("qr-broker did not listen on %s within %.0f s" % (path, timeout))


@pytest.fixture(scope="session", autouse=True)
def broker():
    """A qr-broker on a socket of its own; clients find it through QR_BROKER_SOCKET."""
    # sun_path is short: $TEST_TMPDIR may be too long, so a fresh dir in /tmp.
    d = tempfile.mkdtemp(prefix="qrpy-", dir="/tmp")
    path = os.path.join(d, "broker.sock")
    log = open(os.path.join(d, "broker.log"), "w")
    proc = subprocess.Popen([_broker_binary(), "--socket", path], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        _wait_for_socket(path, proc)
        os.environ["QR_BROKER_SOCKET"] = path
        os.environ["QR_BROKER_AUTOSTART"] = "0"
        yield path
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        subprocess.run(["rm", "-rf", d])


@pytest.fixture
def group_name(request):
    """A group name no other test uses. Short: the broker cannot yet answer a
    JOIN whose segment name (/quickreduce-<uid>-<group>-<generation>) passes
    the wire's 63 bytes, so groups of more than ~45 characters never form."""
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:24]
    return "%s-%s" % (base, uuid.uuid4().hex[:8])


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CUDA GPUs and torch with CUDA")
