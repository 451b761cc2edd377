"""One rank of `quickreduce doctor`'s real all-reduce:
    python -m quickreduce.doctor_probe <group> <rank> <world size> <device|host>
joins, all-reduces 64 KiB of ones (FP, twice: one-shot and a forced two-shot
size) and prints one JSON line: {"ok": true} or {"ok": false, "error": ...}."""

import json
import sys


def run(group, rank, world_size, device):
    import numpy as np

    import quickreduce as qr
    if device is None:
        x = np.ones(32768, np.float16)
        big = np.ones(4 << 20, np.float16)  # 8 MiB: above every one-shot ceiling
        with qr.Communicator(group, rank, world_size, device=None, timeout_ms=20000) as c:
            for a in (x, big):
                y = c.all_reduce(a, regime="FP")
                if not (y == world_size).all():
                    return {"ok": False, "error": "wrong sum: %r" % float(y.max())}
        return {"ok": True}
    import torch
    torch.cuda.set_device(device)
    with qr.Communicator(group, rank, world_size, device=device, timeout_ms=20000) as c:
        for n in (32768, 4 << 20):
            x = torch.ones(n, dtype=torch.float16, device="cuda:%d" % device)
            y = c.all_reduce(x, regime="FP")
            torch.cuda.synchronize(device)
            if not bool((y == world_size).all()):
                return {"ok": False, "error": "wrong sum: %r" % float(y.max())}
    return {"ok": True}


def main(argv):
    group, rank, ws, dev = argv[0], int(argv[1]), int(argv[2]), argv[3]
    try:
        result = run(group, rank, ws, None if dev == "host" else int(dev))
    except Exception as e:  # reported to the parent, which says what to do
        result = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(result))
    sys.stdout.flush()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
