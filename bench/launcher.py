#!/usr/bin/env python3
"""Launcher start-up time and memory, measured on real libvirt + QEMU.

Runs `virt-launcher run` N times (default 5, after one warm-up run that fills
libvirt's shared QEMU capability cache) on KubeVirt's vmi-sata example
(1 vCPU, 128 MiB) with the test guest, and prints medians of:

  * start -> domain running: from exec of the launcher to its "domain running"
    log line (read from its stderr as it is written), under TCG and, where the
    host's KVM can start QEMU, under KVM;
  * start -> guest marker (GUEST-READY on the serial console), TCG only;
  * after the guest is up and 15 s idle: VmHWM and RssAnon (/proc/PID/status)
    and Pss (/proc/PID/smaps_rollup) of the launcher, its libvirt daemon and
    virtlogd, and their sum;
  * then, over `--cpu-window` seconds (default 60) of idling: the launcher's
    CPU time (utime + stime of /proc/PID/stat, ms per minute) and wake-ups
    (voluntary + nonvoluntary context switches of its threads, per minute,
    by thread name), of the inner launcher and of the outer `run` process.

Each measurement is made in KubeVirt's two modes, side by side: as root,
and non-root (`--run-as-nonroot`: the launcher proper, its session libvirt
daemon, virtlogd and QEMU as uid 107 with only CAP_NET_BIND_SERVICE; its
own capability cache, so one warm-up run per mode).

And with three states of libvirt's QEMU capabilities cache (`--caches`),
the runs interleaved (warm, fresh, shipped, warm, ...):
  * warm: the shared cache every run on this host fills (the default
    `--libvirt-cache-dir`), as before;
  * fresh: a new empty cache per run, as a new pod has (its runtime
    directories are always new): libvirt probes every QEMU binary;
  * shipped: a new empty cache per run, seeded from a shipped cache made
    once by `virt-launcher capabilities-cache` (`--shipped-capabilities-dir`),
    as the launcher image carries it.
For each: start -> command socket, start -> libvirt's QEMU capabilities
known, start -> domain running, start -> GUEST-READY, and the launcher's
phases from its log; medians and spreads (min-max). Memory after the idle
time is measured on the warm runs only.

Usage: python3 bench/launcher.py [--runs N] [--idle SECONDS] [--cpu-window SECONDS] [--modes root,nonroot]
                                 [--caches warm,fresh,shipped] [--bin PATH]   (as root)
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target/release/virt-launcher"
VMI = ROOT / "tests/data/examples/vmi-sata.yaml"
IMAGE = ROOT / "target/test-guest/disk.img"


def status_kib(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def rollup_kib(pid):
    """Pss and private memory (Private_Clean + Private_Dirty) of
    /proc/PID/smaps_rollup, KiB."""
    out = {"pss": 0, "private": 0}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key == "Pss":
            out["pss"] = int(rest.split()[0])
        elif key in ("Private_Clean", "Private_Dirty"):
            out["private"] += int(rest.split()[0])
    return out


def exe_text_kib(pid):
    """Resident KiB of the process' own executable's read-only mappings
    (text and constants; its RELRO, which holds anonymous pages, excluded)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return 0
    total, mine = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        f = line.split()
        if "-" in f[0] and len(f) >= 5 and not f[0].endswith(":"):
            mine = len(f) >= 6 and f[5] == exe and "w" not in f[1]
            rss = 0
        elif mine and f[0] == "Rss:":
            rss = int(f[1])
        elif mine and f[0] == "Anonymous:":
            if int(f[1]) == 0:
                total += rss
    return total


def memory(pid):
    """VmHWM, RssAnon, PSS, private memory and resident text of `pid`, KiB.
    PSS splits shared pages between whoever maps them, so it moves with
    the other processes on the machine; private memory counts the pages
    only this process maps, anonymous ones and file pages no other process
    maps at the moment (a second launcher of the same binary lowers it):
    RssAnon is the figure to compare runs by."""
    r = rollup_kib(pid)
    return {"hwm": status_kib(pid, "VmHWM"), "anon": status_kib(pid, "RssAnon"),
            "pss": r["pss"], "private": r["private"], "text": exe_text_kib(pid)}


def cpu_ticks(pid):
    """utime + stime of the whole process (/proc/PID/stat), in clock ticks."""
    rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def switches(pid):
    """Per thread: (name, voluntary + nonvoluntary context switches)."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            st = Path(f"/proc/{pid}/task/{t}/status").read_text()
            name = Path(f"/proc/{pid}/task/{t}/comm").read_text().strip()
        except OSError:
            continue
        n = sum(int(l.split()[1]) for l in st.splitlines()
                if l.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
        out[t] = (name, n)
    return out


def idle_cpu(pids, window):
    """CPU (ms per minute) and wake-ups (context switches per minute, by
    thread name) of each process in `pids` over `window` seconds of idling."""
    before = {k: (cpu_ticks(p), switches(p)) for k, p in pids.items()}
    time.sleep(window)
    hz = os.sysconf("SC_CLK_TCK")
    res = {}
    for k, p in pids.items():
        c0, s0 = before[k]
        s1 = switches(p)
        wake = {}
        for t, (name, n) in s1.items():
            if t in s0:
                wake[name] = wake.get(name, 0) + (n - s0[t][1]) * 60 / window
        res[k] = {"cpu_ms_min": (cpu_ticks(p) - c0) * 1000 / hz * 60 / window,
                  "wakeups_min": sum(wake.values()), "threads": wake}
    return res


def run_once(kvm, idle, measure_memory, nonroot=False, cache="warm", shipped=None, cpu_window=0):
    """One run (see the module docs); the launcher never outlives it."""
    procs = []
    try:
        return measure_once(kvm, idle, measure_memory, nonroot, cache, shipped, procs, cpu_window)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def measure_once(kvm, idle, measure_memory, nonroot, cache, shipped, procs, cpu_window):
    state = tempfile.mkdtemp(prefix="vl-bench-")
    uid = f"bench-{os.getpid()}-{time.monotonic_ns()}"
    vmi = VMI.read_text()
    if kvm:
        # host-model asks this host's KVM for MSRs nested KVM may lack
        # (ARCH_CAPABILITIES); kvm64 keeps QEMU starting. The guest itself
        # may not run on such a host: only the start-up time is measured.
        vmi = vmi.replace("    memory:\n", "    cpu:\n      model: kvm64\n    memory:\n")
    vmi_path = Path(state) / "vmi.yaml"
    vmi_path.write_text(vmi)
    args = [str(BIN), "run", str(vmi_path), "--container-disk", f"containerdisk={IMAGE}",
            "--state-dir", f"{state}/state", "--uid", uid, "--keep-state"]
    if not kvm:
        args.append("--use-emulation")
    if nonroot:
        args.append("--run-as-nonroot")
    if cache != "warm":
        # A new pod: an empty libvirt cache (the state directory is always new).
        args += ["--libvirt-cache-dir", f"{state}/libvirt-cache"]
    args += ["--shipped-capabilities-dir", shipped if cache == "shipped" else ""]
    t0 = time.monotonic()
    p = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    procs.append(p)
    res = {"running_ms": None, "marker_ms": None, "internal_ms": None, "phase": {}}
    stamps = {}
    daemons = {}
    log = []
    for line in p.stderr:
        log.append(line)
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("msg") in ("libvirt ready", "domain defined", "domain started", "command socket ready",
                             "QEMU capabilities seeded from the shipped cache"):
            stamps[ev["msg"]] = ev
        if ev.get("msg") == "started" and "daemon" in ev:
            daemons[ev["daemon"]] = ev["pid"]
        if ev.get("msg") == "domain running":
            res["running_ms"] = (time.monotonic() - t0) * 1000
            res["internal_ms"] = ev.get("ms")
            ts = lambda e: datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
            ready = stamps["libvirt ready"]
            base = ts(ready) - ready["ms"]
            seed = stamps.get("QEMU capabilities seeded from the shipped cache", {}).get("ms", 0)
            res["socket_ms"] = stamps.get("command socket ready", {}).get("ms")
            res["phase"] = {
                "seed shipped cache": seed,
                "daemons + connect": ready["ms"] - seed,
                "prepare + convert + define": ts(stamps["domain defined"]) - ts(ready),
                "libvirt domain start": ts(stamps["domain started"]) - ts(stamps["domain defined"]),
            }
            break
    if res["running_ms"] is None:
        p.wait()
        sys.exit("launcher failed:\n" + "".join(log))
    # Keep draining stderr so the launcher never blocks on a full pipe.
    import threading
    threading.Thread(target=lambda: [log.append(l) for l in p.stderr], daemon=True).start()
    serial = Path(state) / f"state/private/{uid}/virt-serial0-log"
    if not kvm:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if serial.exists() and b"GUEST-READY" in serial.read_bytes():
                res["marker_ms"] = (time.monotonic() - t0) * 1000
                break
            time.sleep(0.01)
    if measure_memory:
        time.sleep(idle)
        # `run` re-executes itself as PID 1 of its own PID namespace; the
        # daemons' logged pids are that namespace's, so find them by name.
        inner = int(Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()[0])
        ns = os.readlink(f"/proc/{inner}/ns/pid")
        res["mem"] = {"launcher": memory(inner), "launcher-outer": memory(p.pid)}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{d}/ns/pid") != ns:
                    continue
                comm = Path(f"/proc/{d}/comm").read_text().strip()
            except OSError:
                continue
            if comm in ("libvirtd", "virtqemud", "virtlogd"):
                res["mem"][comm] = memory(int(d))
        if cpu_window > 0:
            res["idle"] = idle_cpu({"launcher": inner, "launcher-outer": p.pid}, cpu_window)
    res["caps_ms"] = None
    for line in list(log):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("msg") in ("libvirt's QEMU capabilities ready", "libvirt used the shipped QEMU capabilities"):
            res["caps_ms"] = ev.get("ms")
        if "shipped QEMU capabilities" in ev.get("msg", "") and ev.get("level") == "warning":
            sys.exit("the shipped cache was not used:\n" + line)
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    subprocess.run(["rm", "-rf", state])
    return res


def kvm_usable():
    return os.path.exists("/dev/kvm")


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="measured runs per mode and cache state (after one warm-up run)")
    ap.add_argument("--idle", type=float, default=15.0, help="seconds after GUEST-READY before memory is measured")
    ap.add_argument("--modes", default="root,nonroot",
                    help="comma-separated: root, nonroot (--run-as-nonroot)")
    ap.add_argument("--bin", help="the launcher binary (default: a release build of this checkout)")
    ap.add_argument("--cpu-window", type=float, default=60,
                    help="after the memory sample, seconds over which the idle launcher's CPU time and "
                         "wake-ups (context switches per thread) are counted (warm runs; 0: not measured)")
    ap.add_argument("--caches", default="warm",
                    help="comma-separated: warm (shared cache), fresh (empty, as a new pod), "
                         "shipped (empty, seeded from a shipped cache)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    global BIN
    if a.bin:
        BIN = Path(a.bin).resolve()
    else:
        subprocess.run(["cargo", "build", "--release", "--locked", "--bin", "virt-launcher"], cwd=ROOT, check=True)
    subprocess.run([str(ROOT / "tests/guest/build")], cwd=ROOT, check=True)

    modes = [m for m in a.modes.split(",") if m]
    caches = [c for c in a.caches.split(",") if c]
    shipped = None
    if "shipped" in caches:
        shipped = tempfile.mkdtemp(prefix="vl-bench-shipped-")
        os.rmdir(shipped)
        t = time.monotonic()
        subprocess.run([str(BIN), "capabilities-cache", "--out", shipped], check=True,
                       stderr=subprocess.DEVNULL)
        print(f"shipped cache made in {time.monotonic() - t:.1f} s: {shipped}")
        # Files 0644 in 0755 directories: the non-root launcher (uid 107) reads them.
    results = {}
    for mode in modes:
        nr = mode == "nonroot"
        print(f"{mode}: warm-up run (fills the shared QEMU capability cache) ...", flush=True)
        run_once(kvm=False, idle=0, measure_memory=False, nonroot=nr)
        runs = {c: [] for c in caches}
        for i in range(a.runs):
            for c in caches:
                print(f"{mode}: run {i + 1}/{a.runs}, {c} cache", flush=True)
                runs[c].append(run_once(kvm=False, idle=a.idle, measure_memory=(c == "warm"),
                                        nonroot=nr, cache=c, shipped=shipped,
                                        cpu_window=a.cpu_window if c == "warm" else 0))
        kvm = []
        if kvm_usable() and "warm" in caches:
            try:
                kvm = [run_once(kvm=True, idle=0, measure_memory=False, nonroot=nr) for _ in range(a.runs)]
            except SystemExit as e:
                print(f"KVM runs failed, skipped: {str(e).splitlines()[-1]}")
                kvm = []
        results[mode] = (runs, kvm)
    for mode in modes:
        runs, kvm = results[mode]
        for c in caches:
            report(f"{mode}, {c} cache", a, runs[c], kvm if c == "warm" else [])
    print()
    print("side by side: median [min-max] ms, TCG")
    print(f"  {'mode':<8} {'cache':<8} {'socket':>16} {'capabilities':>18} {'running':>18} {'GUEST-READY':>20}")
    for mode in modes:
        for c in caches:
            rs = results[mode][0][c]
            print(f"  {mode:<8} {c:<8} {spread([r['socket_ms'] for r in rs]):>16} "
                  f"{spread([r['caps_ms'] for r in rs]):>18} {spread([r['running_ms'] for r in rs]):>18} "
                  f"{spread([r['marker_ms'] for r in rs]):>20}")
    if "warm" in caches and len(modes) > 1:
        print()
        print("warm, side by side (medians): start -> domain running (TCG) ms, start -> GUEST-READY ms, PSS sum MiB")
        for mode in modes:
            tcg = results[mode][0]["warm"]
            pss = med([sum(r["mem"][n]["pss"] for n in r["mem"]) for r in tcg]) / 1024
            print(f"  {mode:<8} {med([r['running_ms'] for r in tcg]):>8.0f} {med([r['marker_ms'] for r in tcg]):>8.0f} {pss:>8.1f}")
    if shipped:
        subprocess.run(["rm", "-rf", shipped])


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]"


def report(mode, a, tcg, kvm):
    fmt = lambda v: "n/a" if v is None else f"{v:.0f}"
    print()
    print(f"[{mode}] virt-launcher start-up, median of {a.runs} runs (vmi-sata: 1 vCPU, 128 MiB)")
    print(f"  start -> domain running (TCG): {fmt(med([r['running_ms'] for r in tcg]))} ms"
          f"  (launcher's own clock: {fmt(med([r['internal_ms'] for r in tcg]))} ms)")
    if kvm:
        print(f"  start -> domain running (KVM): {fmt(med([r['running_ms'] for r in kvm]))} ms"
              f"  (launcher's own clock: {fmt(med([r['internal_ms'] for r in kvm]))} ms)")
    print(f"  start -> GUEST-READY   (TCG): {fmt(med([r['marker_ms'] for r in tcg]))} ms")
    print(f"  start -> command socket  (TCG): {spread([r['socket_ms'] for r in tcg])} ms")
    print(f"  start -> capabilities    (TCG): {spread([r['caps_ms'] for r in tcg])} ms")
    print("  where the launcher's time goes (TCG, median [min-max] ms):")
    for k in tcg[0]["phase"]:
        print(f"    {k:<28} {spread([r['phase'][k] for r in tcg])}")
    if "mem" not in tcg[0]:
        return
    print()
    print(f"[{mode}] memory after {a.idle:.0f} s idle with the guest running, median, MiB")
    keys = ("hwm", "anon", "pss", "private", "text")
    print(f"  {'process':<14} {'VmHWM':>8} {'RssAnon':>8} {'PSS':>8} {'Private':>8} {'own text':>9}"
          "   (PSS [min-max], private = Private_Clean + Private_Dirty)")
    names = sorted({n for r in tcg for n in r["mem"]}, key=lambda n: (n != "launcher", n))
    tot = {k: [] for k in keys}
    for r in tcg:
        for k in tot:
            tot[k].append(sum(r["mem"][n].get(k, 0) for n in r["mem"]))
    for n in names:
        row = [med([r["mem"][n].get(k, 0) for r in tcg if n in r["mem"]]) / 1024 for k in keys]
        pss = [r["mem"][n]["pss"] / 1024 for r in tcg if n in r["mem"]]
        print(f"  {n:<14} {row[0]:>8.1f} {row[1]:>8.1f} {row[2]:>8.1f} {row[3]:>8.1f} {row[4]:>9.1f}"
              f"   [{min(pss):.1f}-{max(pss):.1f}]")
    print(f"  {'sum':<14} " + " ".join(f"{med(tot[k])/1024:>8.1f}" for k in keys[:4]))
    if "idle" not in tcg[0]:
        return
    print()
    print(f"[{mode}] idle with the guest running, over {a.cpu_window:.0f} s: CPU ms per minute (utime+stime), "
          "wake-ups per minute (context switches), median [min-max]")
    for who in ("launcher", "launcher-outer"):
        rs = [r["idle"][who] for r in tcg]
        print(f"  {who:<14} CPU {spread([r['cpu_ms_min'] for r in rs]):>12}   wake-ups {spread([r['wakeups_min'] for r in rs]):>14}")
        names = sorted({n for r in rs for n in r["threads"]})
        for n in names:
            v = med([r["threads"].get(n, 0) for r in rs])
            if v:
                print(f"    {n:<18} {v:>8.0f}")

if __name__ == "__main__":
    main()
