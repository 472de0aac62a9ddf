#!/usr/bin/env python3
"""Threads of the launcher and their resident stacks (issue 20 item 3).

usage: bench/threads.py [BINARY] [RUNS]     (as root; default target/release
or target/debug virt-launcher, 1 run)

Runs KubeVirt's vmi-sata example with the test guest (`run --use-emulation`,
warm libvirt cache, no shipped cache) and, 15 s after GUEST-READY, prints for
the inner launcher (PID 1 of its namespace): RssAnon, each live thread (tid,
name, the mapping its stack pointer is in: `/proc/PID/task/TID/syscall`, that
mapping's virtual size and Rss from `/proc/PID/smaps`), the threads that came
and went during start-up (sampled every 5 ms, so very short ones can be
missed; a thread's first name is its creator's until it names itself), and
the stacks glibc keeps cached from exited threads (anonymous rw mappings of
at least 16 KiB right above a guard page that no live thread uses). The
JSON of each run goes to stderr."""
import json, os, re, signal, subprocess, sys, tempfile, time
from pathlib import Path

from launcher import status_kib  # bench/launcher.py, beside this script

REPO = Path(__file__).resolve().parents[1]
VMI = REPO / "tests/data/examples/vmi-sata.yaml"
IMAGE = REPO / "target/test-guest/disk.img"


def maps(pid):
    out = []
    cur = None
    for line in open(f"/proc/{pid}/smaps"):
        m = re.match(r'^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$', line)
        if m:
            cur = {"lo": int(m[1], 16), "hi": int(m[2], 16), "perm": m[3], "name": m[4].strip(), "rss": 0}
            out.append(cur)
        elif line.startswith("Rss:"):
            cur["rss"] = int(line.split()[1])
    return out


def snapshot(pid):
    ms = maps(pid)
    threads = []
    used = set()
    for t in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        comm = Path(f"/proc/{pid}/task/{t}/comm").read_text().strip()
        try:
            sc = Path(f"/proc/{pid}/task/{t}/syscall").read_text().split()
            sp = int(sc[-2], 16)
        except (OSError, ValueError, IndexError):
            sp = None
        hit = None
        for i, m in enumerate(ms):
            if sp is not None and m["lo"] <= sp < m["hi"]:
                hit = i
        if hit is not None:
            used.add(hit)
        m = ms[hit] if hit is not None else None
        threads.append({"tid": int(t), "comm": comm,
                        "map": m["name"] or "[anon]" if m else "?",
                        "vsize_kib": (m["hi"] - m["lo"]) // 1024 if m else None,
                        "rss_kib": m["rss"] if m else None})
    cached = []
    for i, m in enumerate(ms):
        if i in used or i == 0 or m["name"] or m["perm"] != "rw-p":
            continue
        g = ms[i - 1]
        if g["perm"] == "---p" and g["hi"] == m["lo"] and (g["hi"] - g["lo"]) <= 64 * 1024 \
                and m["hi"] - m["lo"] >= 16 * 1024:
            cached.append({"vsize_kib": (m["hi"] - m["lo"]) // 1024, "rss_kib": m["rss"]})
    return {"anon_kib": status_kib(pid, "RssAnon"), "threads": threads, "cached_stacks": cached}


def run(binary, idle=15):
    state = tempfile.mkdtemp(prefix="vl-h4-")
    uid = f"h4-{os.getpid()}-{time.monotonic_ns()}"
    args = [binary, "run", str(VMI), "--container-disk", f"containerdisk={IMAGE}",
            "--state-dir", f"{state}/state", "--uid", uid, "--keep-state", "--use-emulation",
            "--shipped-capabilities-dir", ""]
    log = open(f"{state}.log", "w")
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        serial = Path(state) / f"state/private/{uid}/virt-serial0-log"
        deadline = time.monotonic() + 300
        seen = {}
        inner = None
        t0 = time.monotonic()
        def sample():
            nonlocal inner
            if inner is None:
                try:
                    inner = int(Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()[0])
                except (OSError, IndexError, ValueError):
                    return
            try:
                for t in os.listdir(f"/proc/{inner}/task"):
                    try:
                        comm = Path(f"/proc/{inner}/task/{t}/comm").read_text().strip()
                    except OSError:
                        continue
                    now = time.monotonic() - t0
                    e = seen.setdefault(int(t), {"comms": [], "first": now})
                    if not e["comms"] or e["comms"][-1] != comm:
                        e["comms"].append(comm)
                    e["last"] = now
            except OSError:
                pass
        while time.monotonic() < deadline:
            sample()
            if serial.exists() and b"GUEST-READY" in serial.read_bytes():
                break
            if p.poll() is not None:
                sys.exit(f"launcher exited {p.returncode}; see {state}.log")
            time.sleep(0.005)
        else:
            sys.exit("no GUEST-READY")
        end = time.monotonic() + idle
        while time.monotonic() < end:
            sample()
            time.sleep(0.05)
        inner = int(Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()[0])
        res = snapshot(inner)
        res["history"] = seen
        res["outer_anon_kib"] = status_kib(p.pid, "RssAnon")
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=180)
        res["exit"] = p.returncode
        os.remove(f"{state}.log")
        return res
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        subprocess.run(["rm", "-rf", state])


def main():
    if len(sys.argv) > 1:
        binary = sys.argv[1]
    else:
        found = [REPO / f"target/{p}/virt-launcher" for p in ("release", "debug")]
        found = [b for b in found if b.exists()]
        if not found:
            sys.exit("no target/{release,debug}/virt-launcher: cargo build -p virt-launcher")
        binary = str(found[0])
    if not IMAGE.exists():
        sys.exit(f"no {IMAGE}: tests/guest/build")
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    for n in range(runs):
        r = run(binary)
        stack_sum = sum(t["rss_kib"] or 0 for t in r["threads"] if t["map"] == "[anon]")
        cached_sum = sum(c["rss_kib"] for c in r["cached_stacks"])
        print(f"run {n + 1}: RssAnon {r['anon_kib']} KiB, {len(r['threads'])} threads, "
              f"live thread stacks (excl. main) {stack_sum} KiB, {len(r['cached_stacks'])} cached stacks "
              f"{cached_sum} KiB, outer RssAnon {r['outer_anon_kib']} KiB, exit {r['exit']}")
        for t in r["threads"]:
            print(f"    {t['tid']:>6} {t['comm']:<16} {t['map']:<8} vsize {t['vsize_kib']} KiB rss {t['rss_kib']} KiB")
        live = {t["tid"] for t in r["threads"]}
        for tid, e in sorted(r["history"].items()):
            if tid not in live:
                print(f"    exited {tid:>6} {'/'.join(e['comms']):<32} seen {e['first']:.2f}-{e['last']:.2f} s")
        for c in r["cached_stacks"]:
            print(f"    cached stack vsize {c['vsize_kib']} KiB rss {c['rss_kib']} KiB")
        print(json.dumps(r), file=sys.stderr)


if __name__ == "__main__":
    main()
