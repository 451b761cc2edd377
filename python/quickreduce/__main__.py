"""python -m quickreduce status|gc [qrctl options]: the packaged qrctl (the
same output and exit codes); python -m quickreduce version|config: the
library's version and effective configuration (JSON); python -m quickreduce
doctor [--json]: whether this machine can run quickreduce and what vLLM or
SGLang will get (quickreduce/doctor.py)."""

import json
import os
import sys

USAGE = "usage: python -m quickreduce {status,gc,version,config,doctor} [options]"


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    cmd = argv[0]
    if cmd == "doctor":
        from . import doctor
        return doctor.main(argv[1:])
    if cmd in ("version", "config"):
        import quickreduce as qr
        print(qr.version() if cmd == "version" else json.dumps(qr.config(), indent=2,
                                                               sort_keys=True))
        return 0
    if cmd in ("status", "gc"):
        from . import _lib
        qrctl = os.environ.get("QR_QRCTL_BIN") or _lib.binary("qrctl")
        if not qrctl:
            print("quickreduce: qrctl is not packaged here (set QR_QRCTL_BIN)", file=sys.stderr)
            return 2
        # qrctl's own options (--socket, --timeout-ms) come before the subcommand.
        opts, rest = [], []
        args = argv[1:]
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("--socket", "--timeout-ms") and i + 1 < len(args):
                opts += [a, args[i + 1]]
                i += 2
                continue
            if a.startswith("--socket=") or a.startswith("--timeout-ms="):
                opts.append(a)
            else:
                rest.append(a)
            i += 1
        sys.stdout.flush()
        os.execv(qrctl, [qrctl] + opts + [cmd] + rest)
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
