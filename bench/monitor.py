#!/usr/bin/env python3
"""virt-launcher-monitor's own cost: its memory while it supervises, and the
time it adds at the end of a pod.

Runs the monitor binary (a copy, next to a stand-in `virt-launcher` shell
script that sleeps, so only the monitor is measured) in a network namespace
of its own with `lo` down, so its Istio probe fails at once ("network
unreachable" is not retried); in a pod whose network has nothing on
localhost:15021 KubeVirt's retry rule adds 7.8 s, which --host-network shows
(the host's loopback, nothing listening there). Per run: the monitor's RSS and PSS
(/proc/<pid>/smaps_rollup) one second into the launcher's life, and the time
from the launcher's exit (it prints its end time) to the monitor's exit.

Usage: python3 bench/monitor.py [--runs N] [--bin PATH] [--host-network]
(as root for the network namespace; --bin defaults to
target/release/virt-launcher-monitor, else target/debug).
Not a test: nothing is asserted.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAUNCHER = """#!/bin/sh
sleep 2
date +%s.%N > "$(dirname "$0")/ended"
exit 0
"""


def smaps(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in ("Rss:", "Pss:"):
                out[parts[0][:-1]] = int(parts[1])
    return out


def one(binary, host_network):
    d = Path(tempfile.mkdtemp(prefix="bench-monitor-"))
    try:
        mon = d / "virt-launcher-monitor"
        shutil.copy(binary, mon)
        (d / "virt-launcher").write_text(LAUNCHER)
        os.chmod(d / "virt-launcher", 0o755)
        cmd = [str(mon), "--uid", "bench"]
        if not host_network:
            cmd = ["unshare", "--net"] + cmd
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        # unshare execs the monitor: the same pid either way.
        mem = smaps(p.pid)
        p.wait(timeout=60)
        end = time.time()
        ended = float((d / "ended").read_text())
        return mem["Rss"], mem["Pss"], end - ended, p.returncode
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin")
    ap.add_argument("--host-network", action="store_true")
    a = ap.parse_args()
    binary = a.bin
    if not binary:
        for prof in ("release", "debug"):
            cand = ROOT / "target" / prof / "virt-launcher-monitor"
            if cand.is_file():
                binary = str(cand)
                break
    if not binary:
        raise SystemExit("no virt-launcher-monitor: cargo build --release -p virt-launcher-monitor")
    print(f"monitor: {binary}")
    rss, pss, tail = [], [], []
    for i in range(a.runs):
        r, p, t, rc = one(binary, a.host_network)
        print(f"run {i + 1}: RSS {r} KiB, PSS {p} KiB, launcher exit -> monitor exit {t * 1000:.0f} ms, exit {rc}")
        rss.append(r)
        pss.append(p)
        tail.append(t)
    print(
        f"median over {a.runs}: RSS {statistics.median(rss)} KiB, PSS {statistics.median(pss)} KiB, "
        f"exit tail {statistics.median(tail) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
