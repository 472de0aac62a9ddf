#!/usr/bin/env python3
"""GetQemuVersion latency as virt-handler sees it, on a fresh pod.

Starts a pod-mode launcher (KubeVirt's command line, no VMI: it waits for
virt-handler) in a mount namespace playing the pod, with an EMPTY libvirt
capability cache, as a new pod has: `--libvirt-cache-dir` points at a new
empty directory (the default, /var/cache/virt-launcher/libvirt, is shared by
every run on this host and would be warm). As soon as `launcher-sock`
appears, the virt-handler stand-in's command client (tests/handler:
blocking dial, CmdInfo, client.go's 5 s timeout) calls GetQemuVersion 100
times in a row; the first call is made at once. Prints, per run and over
all runs: the first call's latency, median and max (first call included),
and the time from the launcher's start to its socket.

Usage: python3 bench/qemu_version.py [--runs N] [--calls N] [--bin PATH] [--warm]
(as root; --warm uses the shared default cache instead, for comparison).
Not a test: nothing is asserted.
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests/handler"))

from virt_handler.cmdclient import CmdError, LauncherClient  # noqa: E402

# The pod: virt-handler's directories on tmpfs, the share directory a host
# directory the benchmark can reach, the pod's private directory.
POD = r"""set -e
mount --make-rprivate /
for d in /var/run/kubevirt /var/run/kubevirt-ephemeral-disks; do mkdir -p $d; mount -t tmpfs tmpfs $d; done
mount --bind "$POD_SHARE" /var/run/kubevirt
mkdir -p /var/run/kubevirt-private "$POD_PRIVATE"
mount --bind "$POD_PRIVATE" /var/run/kubevirt-private
exec "$@"
"""


def binary(arg):
    if arg:
        return Path(arg)
    for b in ("release", "debug"):
        p = ROOT / "target" / b / "virt-launcher"
        if p.exists():
            return p
    sys.exit("no target/{release,debug}/virt-launcher: cargo build -p virt-launcher")


def run_once(bin_path, calls, warm):
    d = Path(tempfile.mkdtemp(prefix="vl-qemuver-"))
    share, private, cache = d / "share", d / "private", d / "cache"
    for p in (share, private, cache):
        p.mkdir()
    uid = f"bench-{os.getpid()}-{time.monotonic_ns()}"
    args = ["unshare", "-m", "sh", "-c", POD, "sh", str(bin_path), "--name", "qemuver", "--namespace",
            "bench", "--uid", uid, "--grace-period-seconds", "45", "--use-emulation",
            "--state-dir", str(d / "state")]
    if not warm:
        args += ["--libvirt-cache-dir", str(cache)]
    # The launcher logs how long its probe took at debug level.
    env = dict(os.environ, POD_SHARE=str(share), POD_PRIVATE=str(private),
               RUST_LOG="info,virtwrap::version=debug")
    log = open(d / "launcher.log", "w")
    t0 = time.monotonic()
    p = subprocess.Popen(args, env=env, stdout=log, stderr=log, start_new_session=True)
    sock = share / "sockets" / "launcher-sock"
    try:
        while not sock.exists():
            if p.poll() is not None or time.monotonic() - t0 > 60:
                raise RuntimeError(f"no launcher-sock; see {d}/launcher.log")
            time.sleep(0.001)
        t_sock = time.monotonic() - t0
        c = LauncherClient(str(sock))
        lat, errors = [], []
        try:
            for _ in range(calls):
                s = time.monotonic()
                try:
                    v = c.get_qemu_version()
                except CmdError as e:
                    errors.append(str(e))
                    v = None
                lat.append(time.monotonic() - s)
        finally:
            c.close()
        probe = None
        for line in open(d / "launcher.log", encoding="utf-8", errors="replace"):
            if "QEMU version probed" in line:
                import json
                probe = json.loads(line).get("ms")
        return {"socket_s": t_sock, "lat": lat, "version": v, "errors": errors, "probe_ms": probe,
                "cache_files": sum(len(f) for _, _, f in os.walk(cache))}
    finally:
        # The launcher is PID 1 of nothing here: SIGTERM to the wrapper's
        # session reaches it through unshare's exec'd sh -> launcher.
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


def ms(x):
    return f"{x * 1000:.1f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--bin")
    ap.add_argument("--warm", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (mount namespace, libvirt)")
    b = binary(a.bin)
    print(f"{b}, {'shared warm' if a.warm else 'empty'} libvirt cache, {a.calls} calls per run")
    every, firsts = [], []
    for i in range(a.runs):
        r = run_once(b, a.calls, a.warm)
        lat = r["lat"]
        every += lat
        firsts.append(lat[0])
        print(f"run {i + 1}: socket after {r['socket_s']:.2f} s; first {ms(lat[0])}, "
              f"median {ms(statistics.median(lat))}, max {ms(max(lat))}; {r['version']!r}; "
              f"errors {len(r['errors'])}{': ' + r['errors'][0] if r['errors'] else ''}; "
              f"cache files after: {r['cache_files']}; the launcher's probe took "
              f"{r['probe_ms']} ms")
    print(f"all {len(every)} calls: median {ms(statistics.median(every))}, max {ms(max(every))}; "
          f"first calls: median {ms(statistics.median(firsts))}, max {ms(max(firsts))}")


if __name__ == "__main__":
    main()
