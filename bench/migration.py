#!/usr/bin/env python3
"""Live migration between two standalone launchers on this host (issue 16).

For each case, starts a source launcher (`run`, the test guest with
--memory of guest RAM, under TCG) and a target (`run --migration-target`),
waits for the guest, optionally starts a memory-dirtying loop in it (a
shell loop writing 16 MiB of /dev/urandom to /tmp over and over, through
the guest agent), starts `virt-launcher migration-proxy` and runs `ctl
migrate --wait`. Prints per run: the wall time of `ctl migrate` (request to
recorded end), and libvirt's completed job statistics of the incoming
migration on the target (`virsh domjobinfo --completed`: time elapsed, total
downtime, memory processed, iterations, post-copy requests; libvirt 11.3
keeps none after a post-copy migration: those print None) and the mode the
launcher recorded (PreCopy, PostCopy).

Cases: idle and dirtying, each pre-copy (KubeVirt's default options) and
post-copy (AllowPostCopy, AllowWorkloadDisruption and a 1 s/GB completion
budget, so that the launcher switches to post-copy after 1-2 s).

Usage: python3 bench/migration.py [--runs N] [--memory 256Mi] [--bin PATH]
(as root; needs target/test-guest: tests/guest/build). Not a test: nothing
is asserted.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import standalone  # noqa: E402

VMI = """apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: bench-mig
  namespace: bench
spec:
  domain:
    cpu: {{cores: 1}}
    memory: {{guest: {memory}}}
    devices:
      autoattachPodInterface: false
      disks:
      - name: containerdisk
        disk: {{bus: virtio}}
  volumes:
  - name: containerdisk
    containerDisk: {{image: test-guest}}
"""

PRECOPY = '{"ProgressTimeout":150,"CompletionTimeoutPerGiB":150}'
POSTCOPY = ('{"ProgressTimeout":150,"CompletionTimeoutPerGiB":1,'
            '"AllowPostCopy":true,"AllowWorkloadDisruption":true}')
DIRTY = ("nohup sh -c 'while :; do dd if=/dev/urandom of=/tmp/dirty bs=1M count=16 "
         "2>/dev/null; done' >/dev/null 2>&1 &")


def ctl(bin_path, sock, *args, check=True):
    r = standalone.ctl(bin_path, sock, *args, timeout=300)
    if check and r.returncode != 0:
        raise RuntimeError(f"ctl {' '.join(args)}: {r.stderr.strip()}")
    return r


def wait_for(cond, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def run_once(bin_path, memory, dirty, options, n):
    d = Path(tempfile.mkdtemp(prefix="vl-migbench-"))
    (d / "vmi.yaml").write_text(VMI.format(memory=memory))
    uid = f"migbench-{os.getpid()}-{n}"
    procs = []

    def launcher(name, *extra):
        log = open(d / f"{name}.log", "w")
        p = standalone.start(bin_path, d / "vmi.yaml", d / name, "--uid", uid, *extra,
                             stdout=log, stderr=log)
        procs.append(p)
        return p

    try:
        launcher("src")
        launcher("dst", "--migration-target")
        src, dst = d / "src", d / "dst"
        ssock, dsock = standalone.socket(src), standalone.socket(dst)
        serial = src / f"private/{uid}/virt-serial0-log"
        wait_for(lambda: serial.exists() and b"GUEST-READY" in serial.read_bytes(), 240,
                 "the guest")
        wait_for(lambda: ctl(bin_path, dsock, "ping", check=False).returncode == 0, 60,
                 "the target")
        if dirty:
            ctl(bin_path, ssock, "exec", "--", "sh", "-c", DIRTY)
            time.sleep(2)
        proxy = subprocess.Popen(
            [str(bin_path), "migration-proxy", "--uid", uid, "--block-migration",
             "--source-share", str(src / "share"), "--target-share", str(dst / "share"),
             "--target-libvirt-socket", str(dst / "libvirt/run/libvirt-sock")],
            stdout=subprocess.PIPE, stderr=open(d / "proxy.log", "w"),
            start_new_session=True)
        procs.append(proxy)
        proxy.stdout.readline()
        t0 = time.monotonic()
        r = ctl(bin_path, ssock, "migrate", "--target-socket", str(dsock),
                "--options", options, "--wait", "600", check=False)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            return {"error": r.stderr.strip()}
        record = json.loads(r.stdout)
        uri = f"qemu+unix:///system?socket={dst}/libvirt/run/libvirt-sock"
        info = subprocess.run(["virsh", "-c", uri, "domjobinfo", "--completed",
                               "bench_bench-mig"], capture_output=True, text=True).stdout

        def field(name):
            m = re.search(rf"^{re.escape(name)}:\s+([\d.]+)", info, re.M)
            return float(m.group(1)) if m else None

        return {
            "wall_s": round(wall, 2),
            "elapsed_ms": field("Time elapsed"),
            "downtime_ms": field("Total downtime"),
            "memory_processed_mib": field("Memory processed"),
            "iterations": field("Iteration"),
            "postcopy_requests": field("Postcopy requests"),
            "mode": record.get("Mode"),
        }
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--memory", default="256Mi")
    ap.add_argument("--bin")
    a = ap.parse_args()
    bin_path = standalone.binary(a.bin)
    n = 0
    for dirty in (False, True):
        for name, options in (("pre-copy", PRECOPY), ("post-copy", POSTCOPY)):
            results = []
            for _ in range(a.runs):
                n += 1
                res = run_once(bin_path, a.memory, dirty, options, n)
                print(f"{'dirtying' if dirty else 'idle'} {name}: {res}", flush=True)
                if "error" not in res:
                    results.append(res)
            if len(results) > 1:
                for k in ("wall_s", "elapsed_ms", "downtime_ms"):
                    vals = [r[k] for r in results if r[k] is not None]
                    if vals:
                        print(f"  {k}: median {statistics.median(vals)} "
                              f"min {min(vals)} max {max(vals)}")


if __name__ == "__main__":
    main()
