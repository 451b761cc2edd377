"""The checks of `python -m quickreduce doctor` (quickreduce/doctor.py runs
and reports them). Each returns a list of findings: dicts with
  check    the check's name
  status   "ok", "info" or "problem" (a problem makes doctor exit 1)
  summary  one line
  remedy   what to do (problems only)
  data     what was measured (for --json)
Everything a test needs to fake comes in as an argument (the library's JSON,
statvfs, the environment, the uid), so the failing branches are testable on
any machine."""

import os
import stat


def finding(check, status, summary, remedy=None, data=None):
    return {"check": check, "status": status, "summary": summary, "remedy": remedy,
            "data": data if data is not None else {}}


def mib(n):
    return "%.1f MiB" % (n / float(1 << 20))


def version_text(platform, v):
    """CUDA's 1000 * major + 10 * minor as "13.0"; HIP's number as is."""
    if not v:
        return "none"
    if platform.lower() == "nvidia":
        return "%d.%d" % (v // 1000, (v % 1000) // 10)
    return str(v)


def check_gpus(devices):
    """Visible GPUs and the peer-access matrix by PCI bus id, as the join's
    topology check decides it (qr_devices_json)."""
    ids = [d.get("pci_bus_id") for d in devices.get("devices", [])]
    data = {"devices": ids, "peer_access": devices.get("peer_access", []),
            "peer_access_source": devices.get("peer_access_source", [])}
    if not ids:
        return [finding("gpus", "info", "no GPU visible: GPU groups cannot form here; the host "
                        "backend (device=None) works", data=data)]
    out = [finding("gpus", "ok", "%d GPU(s): %s" % (len(ids), ", ".join(str(i) for i in ids)),
                   data=data)]
    matrix = devices.get("peer_access", [])
    missing, unknown = [], []
    for a, row in enumerate(matrix):
        for b, can in enumerate(row):
            if a == b:
                continue
            if can is False:
                missing.append("%s -> %s" % (ids[a], ids[b]))
            elif can is None:
                unknown.append("%s -> %s" % (ids[a], ids[b]))
    if missing:
        out.append(finding(
            "peer-access", "problem",
            "no peer-to-peer access: " + ", ".join(missing) +
            "; a group holding both GPUs of a pair is refused at join",
            remedy="form groups only of GPUs with peer access (nvidia-smi topo -p2p rw / "
                   "rocm-smi --showtopo), or enable P2P (IOMMU/ACS settings, driver)",
            data={"missing": missing}))
    elif len(ids) > 1:
        out.append(finding("peer-access", "ok" if not unknown else "info",
                           "every pair of visible GPUs has peer access" if not unknown else
                           "peer access unknown for " + ", ".join(unknown) +
                           " (the join then decides by opening the peers' buffers)",
                           data={"unknown": unknown}))
    return out


def check_versions(devices, torch_cuda=None):
    """The driver's CUDA (or HIP) version against the runtime the library was
    built with; torch's CUDA for information."""
    platform = devices.get("platform", "")
    runtime = devices.get("runtime_version", 0)
    driver = devices.get("driver_version", 0)
    data = {"platform": platform, "library_runtime": version_text(platform, runtime),
            "driver_supports": version_text(platform, driver), "torch_cuda": torch_cuda}
    if platform.lower() == "host" or not runtime:
        return [finding("versions", "info", "the library was built without a GPU runtime: "
                        "host backend only", data=data)]
    if not driver:
        return [finding("versions", "info", "no GPU driver: the library's runtime is %s; GPU "
                        "groups need a driver that supports it" % data["library_runtime"],
                        data=data)]
    if driver < runtime:
        return [finding(
            "versions", "problem",
            "the driver supports %s %s, the library needs %s" %
            ("CUDA" if platform.lower() == "nvidia" else "HIP", data["driver_supports"],
             data["library_runtime"]),
            remedy="upgrade the GPU driver to one that supports %s, or install a quickreduce "
                   "wheel built for %s" % (data["library_runtime"], data["driver_supports"]),
            data=data)]
    text = "driver supports %s, library runtime %s" % (data["driver_supports"],
                                                        data["library_runtime"])
    if torch_cuda:
        text += ", torch built with CUDA %s" % torch_cuda
    return [finding("versions", "ok", text, data=data)]


def check_shm(config, gpu, shm_dir="/dev/shm", statvfs=os.statvfs):
    """/dev/shm size and free space against what a group of each world size
    needs there (qr_config_json's shm_bytes: the library's own geometry).
    `gpu` picks the GPU backend's needs, else the host backend's."""
    kind = "gpu" if gpu else "host"
    needs = {int(ws): v[kind] for ws, v in config.get("shm_bytes", {}).items()}
    try:
        st = statvfs(shm_dir)
    except OSError as e:
        return [finding("shm", "problem", "%s: %s" % (shm_dir, e.strerror or e),
                        remedy="mount a tmpfs on %s (containers: --ipc=host or --shm-size)" %
                        shm_dir)]
    total = st.f_blocks * st.f_frsize
    free = st.f_bavail * st.f_frsize
    data = {"dir": shm_dir, "backend": kind, "total_bytes": total, "free_bytes": free,
            "needs_bytes": {str(k): v for k, v in sorted(needs.items())}}
    too_small = [ws for ws, n in sorted(needs.items()) if n > total]
    too_full = [ws for ws, n in sorted(needs.items()) if total >= n > free]
    out = []
    if too_small:
        need = max(needs[ws] for ws in too_small)
        out.append(finding(
            "shm", "problem",
            "%s holds %s; a %s-backend group of world size %s needs %s" %
            (shm_dir, mib(total), kind, "/".join(map(str, too_small)), mib(need)),
            remedy="enlarge %s to at least %s (docker run --shm-size=%dm or --ipc=host; "
                   "Kubernetes: an emptyDir with medium: Memory; else mount -o remount,size=%dm "
                   "%s)" % (shm_dir, mib(need), need // (1 << 20) + 1, need // (1 << 20) + 1,
                            shm_dir),
            data=data))
    if too_full:
        need = max(needs[ws] for ws in too_full)
        out.append(finding(
            "shm", "problem",
            "%s has %s free; a %s-backend group of world size %s needs %s" %
            (shm_dir, mib(free), kind, "/".join(map(str, too_full)), mib(need)),
            remedy="free space in %s: `qrctl gc` removes what dead quickreduce groups left; "
                   "look for other large files there" % shm_dir,
            data=data))
    if not out:
        out.append(finding("shm", "ok", "%s: %s free of %s; the largest %s-backend group "
                           "needs %s" % (shm_dir, mib(free), mib(total), kind,
                                         mib(max(needs.values()) if needs else 0)), data=data))
    return out


def default_socket_path(environ, uid):
    """ipc/names.cc DefaultSocketPath."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime:
        return runtime + "/quickreduce/broker.sock"
    return "/tmp/quickreduce-%d/broker.sock" % uid


def check_socket_dir(environ, euid, uid=None, lstat=os.lstat):
    """The broker socket directory by the rules the broker and clients
    enforce (ipc/names.cc CheckRuntimeDirectory): the default directory must
    be a real directory (no symlink) owned by us, mode 0700. A directory named
    through QR_BROKER_SOCKET is the user's choice; it is a problem only where
    other users could replace the socket (group/world-writable, no sticky bit)."""
    uid = euid if uid is None else uid
    default = default_socket_path(environ, uid)
    path = environ.get("QR_BROKER_SOCKET") or default
    d = os.path.dirname(path) or "."
    is_default = os.path.dirname(default) == d
    data = {"socket": path, "dir": d, "default": is_default}
    try:
        st = lstat(d)
    except FileNotFoundError:
        return [finding("socket-dir", "ok", "%s does not exist yet: the first broker or client "
                        "creates it 0700" % d, data=data)]
    except OSError as e:
        return [finding("socket-dir", "problem", "%s: %s" % (d, e.strerror or e),
                        remedy="set XDG_RUNTIME_DIR to a private directory or QR_BROKER_SOCKET "
                        "to a socket path in a directory only you can write", data=data)]
    mode = stat.S_IMODE(st.st_mode)
    data.update(owner=st.st_uid, mode="%04o" % mode)
    private = ("set XDG_RUNTIME_DIR to a private directory (e.g. /run/user/%d) or "
               "QR_BROKER_SOCKET to a socket path in a directory only you can write" % euid)
    if is_default:
        if stat.S_ISLNK(st.st_mode):
            return [finding("socket-dir", "problem", "%s is a symbolic link; the broker refuses "
                            "to follow it (another user may have planted it)" % d,
                            remedy="remove the link, or " + private, data=data)]
        if not stat.S_ISDIR(st.st_mode):
            return [finding("socket-dir", "problem", "%s is not a directory" % d,
                            remedy="remove it, or " + private, data=data)]
        if st.st_uid != euid:
            return [finding("socket-dir", "problem", "%s belongs to uid %d, not to us (uid %d): "
                            "the broker and clients refuse it (another user may be impersonating "
                            "the broker)" % (d, st.st_uid, euid), remedy=private, data=data)]
        if mode != 0o700:
            return [finding("socket-dir", "problem", "%s has mode %04o; the broker requires 0700 "
                            "(it tightens the mode when it next starts there)" % (d, mode),
                            remedy="chmod 700 %s" % d, data=data)]
        return [finding("socket-dir", "ok", "%s: ours, 0700" % d, data=data)]
    if mode & 0o022 and not mode & stat.S_ISVTX:
        return [finding("socket-dir", "problem", "%s (from QR_BROKER_SOCKET) has mode %04o: other "
                        "users can replace the broker's socket" % (d, mode),
                        remedy="chmod go-w %s, or point QR_BROKER_SOCKET at a private directory"
                        % d, data=data)]
    return [finding("socket-dir", "ok", "%s (from QR_BROKER_SOCKET), mode %04o" % (d, mode),
                    data=data)]
