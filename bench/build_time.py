#!/usr/bin/env python3
"""Where a cold build of the launcher spends its time, and what it would take
on an idle machine with N cores (issue 20, item 5).

Builds `--bin virt-launcher` with `cargo build --profile PROFILE --timings`
into a new, empty target directory (cold: every dependency compiles; the
registry's sources must be downloaded already, or the download counts) with
CARGO_BUILD_JOBS=JOBS (default 1, so that each unit's duration is its own
CPU time, not shared with a parallel one), and reports:
- the build's CPU seconds (user + sys of cargo and every rustc, from
  wait4's rusage) and its wall time;
- the critical path and an estimated wall time on 1 and 2 idle cores:
  a list scheduling of the units in the dependency graph that
  `cargo --unit-graph` prints, each unit lasting its duration from the
  timings report scaled so that all durations add up to the measured CPU
  seconds (on a loaded machine a unit's wall time is stretched by the load;
  the scale takes that out only for a steady load: under a changing load
  the estimate is rough), longest remaining path
  first as cargo does, a library's dependents starting at its metadata
  (pipelining) except links and build scripts. rustc's own threads are not
  modelled (one unit, one core), so the estimate is on the slow side for
  profiles with many codegen units;
- the largest units.
`--report HTML --cpu SECONDS` analyses an existing timings report instead
(the unit graph is taken from the current checkout and PROFILE).

Usage: python3 bench/build_time.py [--profile release|demo] [--jobs N]
       [--target-dir DIR] [--keep] [--report HTML --cpu SECONDS]
Not a test: nothing is asserted.
"""

import argparse
import heapq
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def unit_graph(profile):
    """The build's units and their dependencies (cargo --unit-graph, an
    unstable flag: the channel override lets a stable cargo print it)."""
    env = dict(os.environ, __CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS="nightly")
    out = subprocess.run(
        ["cargo", "build", "--profile", profile, "--locked", "--bin", "virt-launcher",
         "--unit-graph", "-Z", "unstable-options"],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["units"]


def timing_units(html):
    """UNIT_DATA of a cargo timings report: name, version, mode, target,
    duration and rmeta_time (seconds) per unit."""
    m = re.search(r"const UNIT_DATA = (\[.*?\]);\n", Path(html).read_text(), re.S)
    if not m:
        sys.exit(f"build_time.py: {html}: no UNIT_DATA (not a cargo timings report?)")
    return json.loads(m.group(1))


def rmeta_time(d):
    """When a unit's metadata was ready (its dependents may start): the end
    of its frontend section, else its end (the report's fields vary with
    cargo's version)."""
    if d.get("rmeta_time") is not None:
        return d["rmeta_time"]
    for name, span in d.get("sections") or []:
        if name == "frontend":
            return span["end"]
    return d["duration"]


def category(kind, mode, bin_name):
    if mode == "run-custom-build":
        return "run"
    if kind in ("build script", "build-script"):
        return "build-script"
    if kind == "bin":
        return "bin:" + bin_name
    return "lib"


def timing_key(d):
    t = d["target"].strip()
    # A binary reads `bin "NAME"` or `NAME "bin"` depending on cargo's version.
    m = re.fullmatch(r'bin "([^"]+)"|(\S+) "bin"', t)
    kind = "bin" if m else t
    name = (m.group(1) or m.group(2)) if m else ""
    return (d["name"].replace("-", "_"), d["version"], category(kind, d["mode"], name))


def graph_key(u):
    pkg = u["pkg_id"]
    m = re.search(r"[#/]([^#/@]+)@([^#@]+)$", pkg)
    if m:
        name, ver = m.groups()
    else:  # path+file:///.../crates/x#0.1.0
        ver = pkg.rsplit("#", 1)[1]
        name = pkg.rsplit("#", 1)[0].rstrip("/").rsplit("/", 1)[1]
    kinds = u["target"]["kind"]
    kind = "build script" if kinds == ["custom-build"] else ("bin" if kinds == ["bin"] else "lib")
    return (name.replace("-", "_"), ver, category(kind, u["mode"], u["target"]["name"]))


def analyse(html, cpu, profile, cores=(1, 2)):
    data = timing_units(html)
    graph = unit_graph(profile)
    by_key = {timing_key(d): d for d in data}
    wall_sum = sum(d["duration"] for d in data)
    scale = cpu / wall_sum if wall_sum else 1.0
    units, missing = [], []
    for u in graph:
        d = by_key.get(graph_key(u))
        if d is None:
            missing.append(graph_key(u))
            dur = rm = 0.0
        else:
            dur = d["duration"] * scale
            rm = min(rmeta_time(d) * scale, dur)
        kinds = u["target"]["kind"]
        lib = u["mode"] == "build" and kinds not in (["bin"], ["custom-build"], ["proc-macro"])
        units.append({"key": graph_key(u), "dur": dur, "rmeta": rm, "lib": lib,
                      "deps": [x["index"] for x in u["dependencies"]]})
    if missing:
        print(f"warning: {len(missing)} units of the graph not in the report: {missing[:5]}")
    n = len(units)
    users = [[] for _ in range(n)]
    for i, u in enumerate(units):
        for j in u["deps"]:
            users[j].append(i)
    # Longest remaining path (the schedule's priority), in reverse
    # topological order.
    order, state = [], [0] * n
    for s in range(n):
        stack = [(s, False)]
        while stack:
            x, leaving = stack.pop()
            if leaving:
                state[x] = 2
                order.append(x)
            elif state[x] == 0:
                state[x] = 1
                stack.append((x, True))
                stack.extend((j, False) for j in units[x]["deps"] if state[j] == 0)
    prio = [0.0] * n
    for i in reversed(order):
        prio[i] = units[i]["dur"] + max((prio[j] for j in users[i]), default=0.0)

    def simulate(ncores):
        finish, rmeta, started = [None] * n, [None] * n, [False] * n
        running, t, done, free = [], 0.0, 0, ncores
        while done < n:
            ready = []
            for i in range(n):
                if started[i]:
                    continue
                ok = True
                for j in units[i]["deps"]:
                    at = rmeta[j] if units[j]["lib"] and units[i]["lib"] else finish[j]
                    if at is None or at > t + 1e-9:
                        ok = False
                        break
                if ok:
                    ready.append(i)
            for i in sorted(ready, key=lambda i: -prio[i])[:free]:
                started[i] = True
                free -= 1
                heapq.heappush(running, (t + units[i]["dur"], i))
                rmeta[i] = t + units[i]["rmeta"]
            t = min([running[0][0]] + [rmeta[i] for _, i in running if rmeta[i] > t + 1e-9])
            while running and running[0][0] <= t + 1e-9:
                _, i = heapq.heappop(running)
                finish[i] = t
                free += 1
                done += 1
        return t

    print(f"units {n}; CPU {cpu:.0f} s (sum of the report's durations {wall_sum:.0f} s, "
          f"scaled by {scale:.2f})")
    print(f"critical path: {simulate(10**6):.0f} s")
    for c in cores:
        print(f"estimated wall on {c} idle core(s): {simulate(c):.0f} s")
    top = sorted(units, key=lambda u: -u["dur"])[:15]
    print("largest units (CPU s): " + ", ".join(
        f"{u['key'][0]}{'' if u['key'][2] == 'lib' else ' (' + u['key'][2] + ')'} {u['dur']:.0f}"
        for u in top))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="release")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--target-dir", help="default: a new directory under target/")
    ap.add_argument("--keep", action="store_true", help="keep the target directory")
    ap.add_argument("--report", help="analyse this timings report instead of building")
    ap.add_argument("--cpu", type=float, help="the CPU seconds of --report's build")
    a = ap.parse_args()
    if a.report:
        if a.cpu is None:
            sys.exit("build_time.py: --report needs --cpu")
        analyse(a.report, a.cpu, a.profile)
        return
    (ROOT / "target").mkdir(exist_ok=True)
    target = Path(a.target_dir) if a.target_dir else Path(
        tempfile.mkdtemp(prefix="build-time.", dir=ROOT / "target"))
    if target.exists() and any(target.iterdir()):
        sys.exit(f"build_time.py: {target} is not empty (a cold build needs an empty one)")
    env = dict(os.environ, CARGO_INCREMENTAL="0", CARGO_BUILD_JOBS=str(a.jobs))
    cmd = ["cargo", "build", "--profile", a.profile, "--locked", "--bin", "virt-launcher",
           "--timings", "--target-dir", str(target)]
    print("$ " + " ".join(cmd) + f"  (CARGO_BUILD_JOBS={a.jobs})", flush=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("build_time.py: the build failed")
    cpu = ru.ru_utime + ru.ru_stime
    binary = target / a.profile / "virt-launcher"
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s (user {ru.ru_utime:.0f}, sys {ru.ru_stime:.0f}), "
          f"max RSS {ru.ru_maxrss / 1024:.0f} MiB, binary {binary.stat().st_size / 1e6:.1f} MB "
          f"(not stripped); load average now {os.getloadavg()[0]:.1f}")
    analyse(target / "cargo-timings" / "cargo-timing.html", cpu, a.profile)
    if not a.keep:
        shutil.rmtree(target)


if __name__ == "__main__":
    main()
