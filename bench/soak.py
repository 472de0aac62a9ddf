#!/usr/bin/env python3
"""Soak: one launcher with the test guest for a long time under a loop of
virt-handler's RPCs and guest-agent churn (issue 19, item 4).

Runs `virt-launcher run` (root mode, TCG) with the test guest and, once the
guest printed GUEST-READY, for `--minutes` (default 30):

  * a loop (one cycle every `--pace` seconds, default 0.5) of the RPCs virt-handler sends, through the stand-in's own client
    (tests/handler/virt_handler/cmdclient.py: client.go's timeouts and error
    handling, answers decoded strictly into KubeVirt's Go types): GetDomain,
    GetDomainStats, GetGuestInfo, Pause, Unpause, Exec (`echo`),
    FreezeVirtualMachine, UnfreezeVirtualMachine;
  * agent churn: every `--churn` seconds (default 60) qemu-ga is killed in
    the guest (an Exec that kills it a second later); the guest's rc.boot
    loop starts it again, so the launcher sees the agent leave and return;
  * a notify listener on the launcher's `domain-notify-pipe.sock` (the
    socket virt-handler's pipe serves in a pod; standalone the launcher
    delivers to it when it exists): every domain event is kept, and at the
    end the states must follow the pauses and unpauses exactly (one Paused
    per Pause, one Running per Unpause, in that order: a lost or reordered
    event fails the run);
  * every `--sample` seconds (default 60) the launcher's PSS
    (/proc/PID/smaps_rollup, the inner launcher and the outer `run`; PSS
    divides shared pages among the processes mapping them, so it moves
    when other launchers start or stop) and RssAnon (its private memory,
    which does not), its malloc heap (the resident part of its `[heap]`
    mapping in /proc/PID/smaps: with one malloc arena, see
    `virt_launcher::footprint`, every thread allocates there, so a leak of
    the launcher's own allocations or libvirt's shows here first), its
    threads, its open descriptors, and the PSS of its libvirt daemon and
    virtlogd.

It prints the series, the RPC counts (answered with success, answered with
an error, by message, and not answered: a transport error or a timeout),
the notify check and a summary (first, last, max of each series; growth
from the first sample after the warm-up to the last; for RssAnon and the
heap the growth of each 10-minute stretch after the warm-up and the
least-squares slope in KiB per hour, over the whole series after the
warm-up and over its second half: a leak keeps its slope, a warm-up or
allocator fragmentation that levels off sees it fall). The launcher is then
stopped with SIGTERM and must exit 0 leaving no QEMU.

Usage: python3 bench/soak.py [--minutes M] [--churn S] [--sample S] [--pace S] [--bin PATH]   (as root)

Finding what survives (how issue 19's heap profile was made; Debian's
`heaptrack` and `gdb`): once the loop runs, attach heaptrack to the inner
launcher (the child of the `run` process), `heaptrack -p PID`; a few
minutes before the end, `kill -9 PID` (the run then fails, as it should)
so that every allocation still live is reported as leaked by
`heaptrack_print -f FILE --print-leaks 1`, and `--print-massif OUT` gives
the live bytes over time (allocations made since the attach: a leak is a
floor that keeps rising). glibc's own count of the heap, without
stopping the run for more than a second or two:
`gdb --readnever /proc/PID/exe -p PID -batch -ex 'call (void)malloc_stats()'`
(printed on the launcher's stderr, the run's launcher.log). heaptrack's
own bookkeeping lives in the process: the RssAnon and heap columns of a
profiled run are not the launcher's.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests/handler"))
sys.path.insert(0, str(ROOT / "bench"))

import grpc  # noqa: E402
import standalone  # noqa: E402
from launcher import pss_kib, status_kib  # noqa: E402
from standalone import default_bin  # noqa: E402
from virt_handler import cmdclient  # noqa: E402
from virt_handler.stubs import pb  # noqa: E402

NAMESPACE, NAME, UID = "soak", "soak", "50a50a50-0000-4000-8000-000000000019"
VMI = f"""apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {{name: {NAME}, namespace: {NAMESPACE}, uid: {UID}}}
spec:
  terminationGracePeriodSeconds: 30
  domain:
    cpu: {{cores: 1}}
    memory: {{guest: 128Mi}}
    devices:
      autoattachPodInterface: false
      disks:
      - name: containerdisk
        disk: {{bus: virtio}}
  volumes:
  - name: containerdisk
    containerDisk: {{image: test-guest}}
"""
VMI_JSON = json.dumps({"metadata": {"name": NAME, "namespace": NAMESPACE, "uid": UID}}).encode()


class Notify:
    """virt-handler's notify server, reduced to recording domain events."""

    def __init__(self, sock):
        self.events = []  # (time, type, Status, Reason)
        self.lock = threading.Condition()
        me = self

        class N(pb.notify_grpc.NotifyServicer):
            def HandleDomainEvent(self, req, ctx):
                st = reason = None
                if req.domainJSON:
                    d = json.loads(req.domainJSON)
                    st = (d.get("Status") or {}).get("Status")
                    reason = (d.get("Status") or {}).get("Reason")
                with me.lock:
                    me.events.append((time.time(), req.eventType, st, reason))
                    me.lock.notify_all()
                return pb.notify.Response(success=True)

            def HandleK8sEvent(self, req, ctx):
                return pb.notify.Response(success=True)

        class I(pb.notify_info_grpc.NotifyInfoServicer):
            def Info(self, req, ctx):
                return pb.notify_info.NotifyInfoResponse(supportedNotifyVersions=[1])

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb.notify_grpc.add_NotifyServicer_to_server(N(), self.server)
        pb.notify_info_grpc.add_NotifyInfoServicer_to_server(I(), self.server)
        self.server.add_insecure_port(f"unix://{sock}")
        self.server.start()

    def wait_state(self, want, since, timeout):
        """Whether an event with state `want` arrived after time `since`
        (within `timeout` seconds)."""
        deadline = time.time() + timeout
        with self.lock:
            while not any(t >= since and st == want for t, _, st, _ in self.events):
                left = deadline - time.time()
                if left <= 0:
                    return False
                self.lock.wait(left)
            return True

    def states_since(self, t0):
        with self.lock:
            return [(t, ty, st) for t, ty, st, _ in self.events if t >= t0 and st is not None]


def pids_of(outer):
    """The inner launcher (PID 1 of `run`'s PID namespace) and its daemons."""
    inner = int(Path(f"/proc/{outer}/task/{outer}/children").read_text().split()[0])
    ns = os.readlink(f"/proc/{inner}/ns/pid")
    daemons = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{d}/ns/pid") != ns:
                continue
            comm = Path(f"/proc/{d}/comm").read_text().strip()
        except OSError:
            continue
        if comm in ("libvirtd", "virtqemud", "virtlogd") or comm.startswith("qemu-system"):
            daemons[comm] = int(d)
    return inner, daemons


def heap_kib(pid):
    """Resident KiB of the `[heap]` mapping (/proc/PID/smaps): the main
    malloc arena, the only one the launcher has (one arena, see
    `virt_launcher::footprint`); 0 when the process has none."""
    rss, in_heap = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(None, 1)[0]
        if "-" in head and not head.endswith(":"):
            in_heap = line.rstrip().endswith("[heap]")
        elif in_heap and head == "Rss:":
            rss += int(line.split()[1])
    return rss


def sample(outer):
    inner, daemons = pids_of(outer)
    s = {"t": time.time(), "launcher_pss": pss_kib(inner), "outer_pss": pss_kib(outer),
         "launcher_anon": status_kib(inner, "RssAnon"), "heap": heap_kib(inner),
         "threads": status_kib(inner, "Threads"),
         "fds": len(os.listdir(f"/proc/{inner}/fd"))}
    for comm in ("libvirtd", "virtqemud", "virtlogd"):
        if comm in daemons:
            s[comm + "_pss"] = pss_kib(daemons[comm])
            s[comm + "_fds"] = len(os.listdir(f"/proc/{daemons[comm]}/fd"))
    return s


class Counter:
    def __init__(self):
        self.ok, self.answered_err, self.failed = {}, {}, {}

    def run(self, name, fn):
        try:
            r = fn()
            self.ok[name] = self.ok.get(name, 0) + 1
            return True, r
        except cmdclient.CmdError as e:
            # An answer that is an error (the launcher spoke) vs no answer.
            text = str(e)
            lost = e.disconnected or "DeadlineExceeded" in text or "deadline" in text \
                or "Unavailable" in text or "failed to connect" in text
            key = f"{name}: {text[:110]}"
            bucket = self.failed if lost else self.answered_err
            bucket[key] = bucket.get(key, 0) + 1
            return False, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--churn", type=float, default=60, help="seconds between qemu-ga restarts")
    ap.add_argument("--sample", type=float, default=60, help="seconds between samples")
    ap.add_argument("--pace", type=float, default=0.5, help="seconds between loop cycles")
    ap.add_argument("--bin", default=str(default_bin()))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("soak.py needs root (the launcher's standalone `run`)")
    state = Path(tempfile.mkdtemp(prefix="vl-soak-"))
    (state / "vmi.yaml").write_text(VMI)
    logf = open(state / "launcher.log", "w")
    print(f"binary {a.bin}; state {state}; {a.minutes} min, churn every {a.churn} s", flush=True)
    p = standalone.start(a.bin, state / "vmi.yaml", state / "state", "--keep-state", stderr=logf)
    try:
        return soak(a, p, state)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def wait_for(pred, timeout, what, p, state):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if p.poll() is not None:
            sys.exit(f"launcher exited ({p.returncode}) before {what}:\n{(state / 'launcher.log').read_text()}")
        if pred():
            return
        time.sleep(0.2)
    sys.exit(f"no {what} within {timeout} s")


def soak(a, p, state):
    share = state / "state/share"
    sock = share / "sockets/launcher-sock"
    wait_for(sock.exists, 300, "command socket", p, state)
    notify = Notify(str(share / "domain-notify-pipe.sock"))
    serial = state / f"state/private/{UID}/virt-serial0-log"
    ready = lambda: serial.exists() and serial.read_bytes().count(b"GUEST-READY") >= 1
    wait_for(ready, 600, "GUEST-READY", p, state)
    client = cmdclient.LauncherClient(str(sock))
    c = Counter()
    domain = f"{NAMESPACE}_{NAME}"
    vmi_req = cmdclient.LauncherClient.vmi_request(VMI_JSON)
    # Wait for the agent before the loop starts (the count measures the loop).
    wait_for(lambda: c.run("warm-up GuestPing", lambda: client.guest_ping(domain, 5))[0], 300,
             "the guest agent", p, state)
    c = Counter()
    t0 = time.time()
    end = t0 + a.minutes * 60
    samples = [sample(p.pid)]
    print(json.dumps(samples[-1]), flush=True)
    next_sample, next_churn = t0 + a.sample, t0 + a.churn
    pauses = cycles = churns = 0
    missed = []
    while time.time() < end:
        if p.poll() is not None:
            sys.exit(f"launcher exited ({p.returncode}) during the soak")
        cycles += 1
        c.run("GetDomain", client.get_domain)
        c.run("GetDomainStats", client.get_domain_stats)
        c.run("GetGuestInfo", client.get_guest_info)
        t = time.time()
        if c.run("Pause", lambda: client.pause_virtual_machine(VMI_JSON))[0]:
            pauses += 1
            # As virt-handler: it unpauses a VMI its informer shows Paused,
            # so the notification comes first (the launcher, as KubeVirt's,
            # sends the domain's state when it reads the event: a pause
            # undone within milliseconds may never be seen as Paused).
            if not notify.wait_state("Paused", t, 30):
                missed.append(f"no Paused notification within 30 s of Pause {pauses}")
            t = time.time()
            if c.run("Unpause", lambda: client.unpause_virtual_machine(VMI_JSON))[0] \
                    and not notify.wait_state("Running", t, 30):
                missed.append(f"no Running notification within 30 s of Unpause {pauses}")
        c.run("Exec", lambda: client.exec(domain, "echo", ["soak"], 10))
        freeze = pb.cmd.FreezeRequest(vmi=vmi_req.vmi, unfreezeTimeoutSeconds=60)
        if c.run("Freeze", lambda: client._call("FreezeVirtualMachine", freeze, cmdclient.LONG, "Freeze"))[0]:
            c.run("Unfreeze", lambda: client._call("UnfreezeVirtualMachine", vmi_req, cmdclient.LONG, "Unfreeze"))
        time.sleep(a.pace)
        now = time.time()
        if now >= next_churn:
            churns += 1
            next_churn += a.churn
            c.run("Exec (agent churn)", lambda: client.exec(
                domain, "/bin/sh", ["-c", "(sleep 1; kill $(cat /run/qemu-ga.pid)) </dev/null >/dev/null 2>&1 &"], 10))
        if now >= next_sample:
            next_sample += a.sample
            samples.append(sample(p.pid))
            print(json.dumps(samples[-1]), flush=True)
    samples.append(sample(p.pid))
    print(json.dumps(samples[-1]), flush=True)
    # Let the last notifications arrive (the queue may trail the RPCs), then check them.
    deadline = time.time() + 60
    while check_events(notify.states_since(t0), c, pauses) and time.time() < deadline:
        time.sleep(1)
    problems = missed[:5] + check_events(notify.states_since(t0), c, pauses)
    with notify.lock:
        (state / "events.json").write_text(json.dumps(notify.events, indent=0))
    (state / "calls.json").write_text(json.dumps(client.calls, indent=0))
    client.close()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=180)
    except subprocess.TimeoutExpired:
        rc = "did not exit within 180 s"
    report(a, samples, c, cycles, pauses, churns, problems, rc)
    if rc != 0 or problems or c.failed:
        print(f"log: {state / 'launcher.log'}")
        return 1
    subprocess.run(["rm", "-rf", str(state)])
    return 0


def check_events(events, c, pauses):
    """The state sequence must be Paused, Running per completed pause and
    unpause, in order, with nothing lost (repeated states collapse: agent
    and stats changes re-send the same state)."""
    seq = []
    for _, _, st in events:
        if not seq or seq[-1] != st:
            seq.append(st)
    if seq and seq[0] == "Running":
        seq = seq[1:]
    unpauses = c.ok.get("Unpause", 0)
    expected = ["Paused", "Running"] * unpauses + (["Paused"] if pauses > unpauses else [])
    problems = []
    if seq != expected:
        first = next((i for i, (x, y) in enumerate(zip(seq, expected)) if x != y), min(len(seq), len(expected)))
        problems.append(f"state sequence differs at {first}: got {seq[first:first + 6]} of {len(seq)}, "
                        f"want {expected[first:first + 6]} of {len(expected)}")
    return problems


def growth(samples, key, stretch=600):
    """The growth of `key` after the warm-up (the first sample after the
    start), as text: per `stretch` seconds (default 10 minutes; the last
    stretch may be shorter; spans in minutes of the run) and the
    least-squares slope in KiB per hour over every sample after the
    warm-up and over the second half of them."""
    after = samples[1:] if len(samples) > 2 else samples
    t0 = after[0]["t"]
    parts, start = [], after[0]
    for s in after[1:]:
        if s["t"] - start["t"] >= stretch - 1 or s is after[-1]:
            # Minutes of the run (from the first sample), as the series.
            span = f"{(start['t'] - samples[0]['t']) / 60:.0f}-{(s['t'] - samples[0]['t']) / 60:.0f} min"
            parts.append(f"{span} {s[key] - start[key]:+} KiB")
            start = s
    if len(after) < 4:
        return "too few samples"
    span = (after[-1]["t"] - t0) / 60
    half = [s for s in after if s["t"] >= t0 + span * 30]
    return (f"{', '.join(parts)}; slope {slope_per_hour(after, key):+.0f} KiB/h over {span:.0f} min, "
            f"{slope_per_hour(half, key):+.0f} KiB/h over its second half (a leak keeps its slope, "
            f"a warm-up's falls)")


def slope_per_hour(samples, key):
    """Least-squares slope of `key` against time, in units per hour."""
    n = len(samples)
    ts = [s["t"] / 3600 for s in samples]
    ys = [s[key] for s in samples]
    mt, my = sum(ts) / n, sum(ys) / n
    var = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var if var else 0.0


def report(a, samples, c, cycles, pauses, churns, problems, rc):
    print(f"\n== soak: {a.minutes} min, {cycles} loop cycles, {pauses} pauses, {churns} agent restarts")
    print(f"{'min':>6} {'launcher PSS':>13} {'RssAnon':>11} {'heap':>10} {'threads':>7} {'outer PSS':>10} {'fds':>5} "
          f"{'daemon PSS':>11} {'daemon fds':>10} {'virtlogd PSS':>12}")
    t0 = samples[0]["t"]
    for s in samples:
        dpss = s.get("libvirtd_pss", s.get("virtqemud_pss"))
        dfds = s.get("libvirtd_fds", s.get("virtqemud_fds"))
        print(f"{(s['t'] - t0) / 60:6.1f} {s['launcher_pss']:10} KiB {s['launcher_anon']:7} KiB {s['heap']:6} KiB "
              f"{s['threads']:7} {s['outer_pss']:6} KiB {s['fds']:5} "
              f"{dpss:7} KiB {dfds:10} {s.get('virtlogd_pss', 0):8} KiB")
    base = samples[1] if len(samples) > 2 else samples[0]
    last = samples[-1]
    print(f"launcher PSS: first {samples[0]['launcher_pss']} KiB, after warm-up {base['launcher_pss']} KiB, "
          f"last {last['launcher_pss']} KiB, max {max(s['launcher_pss'] for s in samples)} KiB "
          f"(growth after warm-up {last['launcher_pss'] - base['launcher_pss']:+} KiB)")
    print(f"launcher RssAnon (private memory, unlike PSS not shared with other processes): first "
          f"{samples[0]['launcher_anon']} KiB, after warm-up {base['launcher_anon']} KiB, last {last['launcher_anon']} KiB, "
          f"max {max(s['launcher_anon'] for s in samples)} KiB")
    for key, what in (("launcher_anon", "RssAnon"), ("heap", "heap")):
        print(f"launcher {what} after warm-up: {growth(samples, key)}")
    print(f"launcher fds: first {samples[0]['fds']}, last {last['fds']}, max {max(s['fds'] for s in samples)}")
    print("RPCs answered with success: " + ", ".join(f"{k} {v}" for k, v in sorted(c.ok.items())))
    print(f"RPCs answered with an error: {sum(c.answered_err.values())}")
    for k, v in sorted(c.answered_err.items()):
        print(f"  {v:5} x {k}")
    print(f"RPCs not answered (transport error or timeout): {sum(c.failed.values())}")
    for k, v in sorted(c.failed.items()):
        print(f"  {v:5} x {k}")
    print("notify events: " + ("in order, none lost" if not problems else "; ".join(problems)))
    print(f"launcher exit after SIGTERM: {rc}")


if __name__ == "__main__":
    sys.exit(main())
