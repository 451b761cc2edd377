#!/usr/bin/env python3
"""Per-call cost of the Python layer against a direct C call.

Two ranks make the same all-reduce N times, timed in each rank, for each
size in --bytes. Size 0 is the call alone (the library returns at once after
its argument checks), so there the differences are the Python layer's own
cost; at real sizes the host backend's waits make the numbers noisy, while a
GPU call is only enqueued.
  c_loop        qr_all_reduce_ex in a C loop (qr_call_loop)
  ctypes        the bare ctypes call with prepared arguments
  all_reduce_ptr, all_reduce(out=), all_reduce (new output)
  op_, op       torch.ops.quickreduce.all_reduce_ / all_reduce (torch only)
On a GPU the calls are enqueued and the loop ends with a synchronize, so the
numbers are per call on the host while the device keeps up (small messages).
Prints rank 0's table.

  overhead.py --device host --c-loop bazel-bin/python/bench/qr_call_loop
  overhead.py --device cuda --gpus 0,1 --c-loop .device/python/qr_call_loop
"""

import argparse
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rank_main(rank, args, group, q):
    import ctypes
    import quickreduce as qr
    torch = None
    try:
        import torch  # noqa: F811
        import quickreduce.ops  # noqa: F401
    except ImportError:
        pass
    dev = None
    if args.device == "cuda":
        dev = int(args.gpus.split(",")[rank])
        torch.cuda.set_device(dev)
    n = args.nbytes // 2
    results = {}
    with qr.Communicator(group, rank, 2, device=dev, name="%s-r%d" % (group, rank)) as c:
        if torch is not None:
            kw = dict(dtype=torch.float16)
            x = torch.zeros(n, device="cuda" if dev is not None else "cpu", **kw)
            y = torch.empty_like(x)
        else:
            import numpy as np
            x = np.zeros(n, np.float16)
            y = np.zeros(n, np.float16)
            if x.ctypes.data % 16 or y.ctypes.data % 16:
                raise SystemExit("unaligned numpy buffers")
        ptr_in = x.data_ptr() if torch is not None else x.ctypes.data
        ptr_out = y.data_ptr() if torch is not None else y.ctypes.data

        def sync():
            if dev is not None:
                torch.cuda.synchronize()

        stream = None
        if dev is not None:
            stream = torch.cuda.current_stream(dev).cuda_stream
        lib = qr._lib.lib()
        handle = c._c
        regime = int(qr.Regime.parse(args.regime))

        loops = {
            "ctypes": lambda: lib.qr_all_reduce_ex(handle, ptr_in, ptr_out, n, 0, regime, 0,
                                                   stream),
            "all_reduce_ptr": lambda: c.all_reduce_ptr(ptr_in, ptr_out, n, "float16",
                                                       regime=args.regime, stream=stream),
            "all_reduce(out=)": lambda: c.all_reduce(x, out=y, regime=args.regime),
            "all_reduce": lambda: c.all_reduce(x, regime=args.regime),
        }
        if torch is not None:
            loops["op_"] = lambda: torch.ops.quickreduce.all_reduce_(x, c.name)
            loops["op"] = lambda: torch.ops.quickreduce.all_reduce(x, c.name)
        for name, fn in loops.items():
            for _ in range(20):
                fn()
            sync()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                fn()
            sync()
            results[name] = (time.perf_counter() - t0) / args.iters * 1e6
    q.put((rank, results))


def c_loop(args, group):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(args.lib or args.c_loop)) + \
        (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    gpus = args.gpus.split(",") if args.device == "cuda" else ["-1", "-1"]
    procs = [subprocess.Popen([args.c_loop, group, str(r), "2", gpus[r], str(args.nbytes),
                               str(int(__import__("quickreduce").Regime.parse(args.regime))),
                               str(args.iters)], env=env, stdout=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("qr_call_loop failed: %s" % outs)
    return float(outs[0].split()[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", choices=["host", "cuda"], default="host")
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--c-loop", required=True, help="the qr_call_loop binary")
    ap.add_argument("--lib", help="libquickreduce.so for qr_call_loop (default: beside it, "
                    "or $QR_LIBRARY)")
    ap.add_argument("--bytes", default="0,16384", help="comma-separated message sizes")
    ap.add_argument("--regime", default="FP")
    ap.add_argument("--iters", type=int, default=2000)
    args = ap.parse_args()
    if args.lib is None and os.environ.get("QR_LIBRARY"):
        args.lib = os.environ["QR_LIBRARY"]
    os.environ.setdefault("QR_QUANTIZATION", args.regime)
    os.environ.setdefault("QR_MIN_SIZE_BYTES_MB", "0")

    import quickreduce as qr
    broker_bin = os.environ.get("QR_BROKER_BIN") or qr._lib.binary("qr-broker")
    d = tempfile.mkdtemp(prefix="qrov-", dir="/tmp")
    sock = os.path.join(d, "broker.sock")
    broker = subprocess.Popen([broker_bin, "--socket", sock], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if os.path.exists(sock):
                try:
                    socket.socket(socket.AF_UNIX).connect(sock)
                    break
                except OSError:
                    pass
            time.sleep(0.01)
        os.environ["QR_BROKER_SOCKET"] = sock
        os.environ["QR_BROKER_AUTOSTART"] = "0"
        for nbytes in [int(b) for b in args.bytes.split(",")]:
            args.nbytes = nbytes
            c_us = c_loop(args, "ovc-" + uuid.uuid4().hex[:8])
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            group = "ovp-" + uuid.uuid4().hex[:8]
            procs = [ctx.Process(target=rank_main, args=(r, args, group, q)) for r in range(2)]
            for p in procs:
                p.start()
            res = dict(q.get(timeout=600) for _ in procs)
            for p in procs:
                p.join()
            print("per-call time, %s, %d bytes fp16, regime %s, world size 2, %d calls (rank 0)"
                  % (args.device, nbytes, args.regime, args.iters))
            print("%-18s %10s %14s" % ("path", "us/call", "over C (us)"))
            print("%-18s %10.2f %14s" % ("c_loop", c_us, "-"))
            for name, us in res[0].items():
                print("%-18s %10.2f %14.2f" % (name, us, us - c_us))
            print()
            sys.stdout.flush()
    finally:
        broker.terminate()
        broker.wait()


if __name__ == "__main__":
    main()
