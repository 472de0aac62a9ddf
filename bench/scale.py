#!/usr/bin/env python3
"""Scale: N launchers side by side in standalone mode (issue 19, item 3).

Starts N `virt-launcher run` processes at once (root mode, TCG), each with
the test guest (1 vCPU, `--memory` MiB, default 128) from a VMI of its own,
and for each one:

  * start -> domain running: from the exec of the launcher to its
    "domain running" log line;
  * start -> guest marker: to GUEST-READY on its serial console;
  * that its command socket answers (`ctl ping` and `ctl domain`, which
    must say Running);
  * once every guest is up: the per-VM overhead, the PSS
    (/proc/PID/smaps_rollup) of the launcher (inner and outer `run`
    processes), its libvirt daemon and virtlogd, QEMU excluded; the QEMU
    PSS is printed apart;
  * then all are stopped with SIGTERM at once and each must exit 0 within
    `--stop-timeout` seconds (default 300), leaving no process of its PID
    namespace.

Prints the distribution (median, p90, max) of each time and of the
overhead, and the machine's load average at the start and the end (other
work on the machine shows there).

Usage: python3 bench/scale.py [--n 10,20] [--memory 128] [--bin PATH]   (as root)
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from launcher import pss_kib  # noqa: E402
import standalone  # noqa: E402
from standalone import default_bin  # noqa: E402



def vmi(i, mem):
    return f"""apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {{name: scale-{i}, namespace: scale}}
spec:
  terminationGracePeriodSeconds: 60
  domain:
    cpu: {{cores: 1}}
    memory: {{guest: {mem}Mi}}
    devices:
      autoattachPodInterface: false
      disks:
      - name: containerdisk
        disk: {{bus: virtio}}
  volumes:
  - name: containerdisk
    containerDisk: {{image: test-guest}}
"""


class One:
    def __init__(self, i, base, a):
        self.i, self.dir = i, base / f"vm{i}"
        self.dir.mkdir()
        self.uid = f"scale-{os.getpid()}-{i}"
        (self.dir / "vmi.yaml").write_text(vmi(i, a.memory))
        self.log = []
        self.running = self.marker = None
        self.t0 = time.monotonic()
        self.p = standalone.start(a.bin, self.dir / "vmi.yaml", self.dir / "state", "--uid", self.uid,
                                  "--qemu-timeout", "10m", stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stderr:
            self.log.append(line)
            if self.running is None and '"domain running"' in line:
                self.running = time.monotonic() - self.t0

    def poll_marker(self):
        if self.marker is None:
            s = self.dir / f"state/private/{self.uid}/virt-serial0-log"
            try:
                if b"GUEST-READY" in s.read_bytes():
                    self.marker = time.monotonic() - self.t0
            except OSError:
                pass

    def ns_procs(self):
        """{comm: pid} of the launcher's PID namespace (the inner launcher first)."""
        inner = int(Path(f"/proc/{self.p.pid}/task/{self.p.pid}/children").read_text().split()[0])
        ns = os.readlink(f"/proc/{inner}/ns/pid")
        out = {"launcher": inner}
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == inner:
                continue
            try:
                if os.readlink(f"/proc/{d}/ns/pid") == ns:
                    out[Path(f"/proc/{d}/comm").read_text().strip()] = int(d)
            except OSError:
                continue
        return ns, out

    def ctl(self, *args):
        r = standalone.ctl(A.bin, standalone.socket(self.dir / "state"), *args)
        return r.returncode, r.stdout + r.stderr


def dist(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return "none"
    p90 = v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]
    return f"median {statistics.median(v):8.1f}  p90 {p90:8.1f}  max {v[-1]:8.1f}  (n={len(v)})"


def run(n, a):
    base = Path(tempfile.mkdtemp(prefix=f"vl-scale{n}-"))
    load0 = os.getloadavg()
    vms = [One(i, base, a) for i in range(n)]
    failures = []
    try:
        deadline = time.monotonic() + a.boot_timeout
        while time.monotonic() < deadline:
            for v in vms:
                v.poll_marker()
                if v.p.poll() is not None and v.marker is None:
                    failures.append(f"vm{v.i} exited {v.p.returncode} before its marker:\n" + "".join(v.log[-5:]))
            if failures or all(v.marker is not None for v in vms):
                break
            time.sleep(0.2)
        if failures:
            return failures
        late = [v.i for v in vms if v.marker is None]
        if late:
            return [f"no GUEST-READY within {a.boot_timeout} s: vm{late}"]
        answers = []
        for v in vms:
            rc, out = v.ctl("ping")
            rc2, dom = v.ctl("-o", "json", "domain")
            state = json.loads(dom).get("Status", {}).get("Status") if rc2 == 0 else None
            if rc != 0 or state != "Running":
                failures.append(f"vm{v.i}: ping {rc} {out.strip()}, domain {rc2} {state}")
            answers.append(rc == 0 and state == "Running")
        mem = []
        for v in vms:
            _, procs = v.ns_procs()
            over = {k: pss_kib(pid) for k, pid in procs.items() if not k.startswith("qemu")}
            over["outer"] = pss_kib(v.p.pid)
            qemu = sum(pss_kib(pid) for k, pid in procs.items() if k.startswith("qemu"))
            mem.append((sum(over.values()), over, qemu))
        nss = [v.ns_procs()[0] for v in vms]
        t_stop = time.monotonic()
        for v in vms:
            v.p.send_signal(signal.SIGTERM)
        # Each launcher's own exit time (polled together, not one after another).
        stops = {}
        while len(stops) < n and time.monotonic() - t_stop < a.stop_timeout:
            for v in vms:
                if v.i not in stops and v.p.poll() is not None:
                    stops[v.i] = time.monotonic() - t_stop
            time.sleep(0.05)
        for v in vms:
            rc = v.p.poll()
            if rc != 0:
                rc = "still running" if rc is None else rc
                failures.append(f"vm{v.i} exit after SIGTERM: {rc}\n" + "".join(v.log[-5:]))
        stops = list(stops.values())
        left = []
        for ns in nss:
            for d in os.listdir("/proc"):
                try:
                    if d.isdigit() and os.readlink(f"/proc/{d}/ns/pid") == ns:
                        left.append(d)
                except OSError:
                    pass
        if left:
            failures.append(f"processes left after the stop: {left}")
        load1 = os.getloadavg()
        print(f"\n== N = {n} launchers side by side ({a.memory} MiB guests, TCG); "
              f"load average {load0[0]:.1f} at start, {load1[0]:.1f} at end, {os.cpu_count()} CPUs")
        print(f"start -> domain running (s):  {dist([v.running for v in vms])}")
        print(f"start -> GUEST-READY (s):     {dist([v.marker for v in vms])}")
        print(f"command socket answered:      {sum(answers)}/{n} (ping, domain Running)")
        print(f"per-VM overhead PSS (MiB):    {dist([m[0] / 1024 for m in mem])}")
        for k in ("launcher", "outer", "libvirtd", "virtqemud", "virtlogd"):
            vals = [m[1][k] / 1024 for m in mem if k in m[1]]
            if vals:
                print(f"  {k:10} (MiB):            {dist(vals)}")
        print(f"QEMU PSS (MiB, not counted):  {dist([m[2] / 1024 for m in mem])}")
        print(f"SIGTERM -> exit (s):          {dist(stops)}")
        print(f"stopped cleanly (exit 0):     {n - sum(1 for f in failures if 'exit after' in f)}/{n}")
        return failures
    finally:
        for v in vms:
            if v.p.poll() is None:
                os.killpg(v.p.pid, signal.SIGKILL)
                v.p.wait()
        if not failures:
            subprocess.run(["rm", "-rf", str(base)])


def main():
    global A
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="10,20", help="launcher counts, comma-separated")
    ap.add_argument("--memory", type=int, default=128, help="guest memory, MiB (64-128)")
    ap.add_argument("--boot-timeout", type=float, default=1200)
    ap.add_argument("--stop-timeout", type=float, default=300)
    ap.add_argument("--bin", default=str(default_bin()))
    A = a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("scale.py needs root (the launcher's standalone `run`)")
    print(f"binary {a.bin}", flush=True)
    bad = []
    for n in (int(x) for x in a.n.split(",")):
        f = run(n, a)
        for x in f:
            print("FAIL:", x)
        bad += f
    return 1 if bad else 0


A = None

if __name__ == "__main__":
    sys.exit(main())
