#!/usr/bin/env python3
"""A stand-in for virt-handler that shares no code with the launcher.

Its gRPC stubs are generated from the project's .proto files with
grpcio-tools at run time. It serves the notify socket
(<share>/domain-notify-pipe.sock), waits for <share>/sockets/launcher-sock,
then drives the launcher through sync -> stats -> pause -> unpause ->
shutdown, checking the replies and the notifications the way virt-handler
reads them (Spec.Name, Status.Status, Status.Reason, ObjectMeta.uid,
deletionTimestamp on the final event). Exits 0 when every check passed,
1 with the failed check otherwise; writes the events it received to
--events as JSON lines.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "crates/cmd/proto"


def stubs():
    out = tempfile.mkdtemp(prefix="fake-handler-stubs-")
    for f in ["cmd.proto", "info.proto", "notify.proto", "notify_info.proto"]:
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}", f"--python_out={out}",
                        f"--grpc_python_out={out}", str(PROTO / f)], check=True)
    sys.path.insert(0, out)


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--share", required=True)
    ap.add_argument("--vmi", required=True, help="VMI JSON file")
    ap.add_argument("--events", required=True)
    ap.add_argument("--crash", action="store_true", help="instead of shutting down, expect a QEMU crash")
    ap.add_argument("--daemon-kill", action="store_true",
                    help="before shutting down, expect the libvirt daemon to be killed: "
                    "an ERROR (Libvirt reconnect) notification, then the running domain again")
    ap.add_argument("--serial", help="the guest's serial log: wait for GUEST-READY before shutdown "
                    "(a power button pressed before the guest's acpid runs is lost)")
    ap.add_argument("--expand-disks", action="store_true",
                    help="the cluster's ExpandDisks feature gate (ClusterConfig.ExpandDisksEnabled)")
    ap.add_argument("--resync-vmi", help="once the guest is ready (--serial), sync this VMI JSON "
                    "(same UID, e.g. a grown claim in its status) and wait for --resync-marker on the serial")
    ap.add_argument("--resync-marker")
    ap.add_argument("--memory-dump", help="once the guest is ready (--serial), VirtualMachineMemoryDump "
                    "to this path in the pod (/var/run/kubevirt/hotplug-disks/<volume>/<file>, i.e. "
                    "<share>/hotplug-disks/... here); it must complete; prints MEMORY-DUMP <record>")
    ap.add_argument("--memory-dump-fail", help="then a dump to this path in the pod, whose volume "
                    "cannot hold it: it must fail; prints MEMORY-DUMP-FAILED <record>")
    a = ap.parse_args()
    stubs()
    import grpc
    import cmd_pb2, cmd_pb2_grpc, info_pb2, info_pb2_grpc
    import notify_pb2, notify_pb2_grpc, notify_info_pb2, notify_info_pb2_grpc

    vmi_json = Path(a.vmi).read_bytes()
    vmi = json.loads(vmi_json)
    uid = vmi["metadata"]["uid"]
    dom_name = f'{vmi["metadata"]["namespace"]}_{vmi["metadata"]["name"]}'
    events = []
    cond = threading.Condition()
    log = open(a.events, "w")

    class Notify(notify_pb2_grpc.NotifyServicer):
        def HandleDomainEvent(self, req, ctx):
            d = json.loads(req.domainJSON) if req.domainJSON else None
            st = json.loads(req.statusJSON) if req.statusJSON else None
            with cond:
                events.append((req.eventType, d, st))
                cond.notify_all()
            log.write(json.dumps({"type": req.eventType, "domain": d, "status": st}) + "\n")
            log.flush()
            return notify_pb2.Response(success=True)

        def HandleK8sEvent(self, req, ctx):
            ev = json.loads(req.eventJSON)
            with cond:
                events.append(("K8S", ev, None))
                cond.notify_all()
            log.write(json.dumps({"type": "K8S", "event": ev}) + "\n")
            log.flush()
            return notify_pb2.Response(success=True)

    class Info(notify_info_pb2_grpc.NotifyInfoServicer):
        def Info(self, req, ctx):
            return notify_info_pb2.NotifyInfoResponse(supportedNotifyVersions=[1])

    sock = os.path.join(a.share, "domain-notify-pipe.sock")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    notify_pb2_grpc.add_NotifyServicer_to_server(Notify(), server)
    notify_info_pb2_grpc.add_NotifyInfoServicer_to_server(Info(), server)
    server.add_insecure_port(f"unix://{sock}")
    server.start()

    def wait_event(pred, what, timeout=120, start=0):
        """The first event from index `start` on that satisfies `pred`, and its index."""
        deadline = time.time() + timeout
        with cond:
            while True:
                for i, e in enumerate(events[start:], start):
                    if pred(e):
                        return e, i
                left = deadline - time.time()
                if left <= 0:
                    fail(f"no {what} notification within {timeout}s; got {[(t, d and d.get('Status')) for t, d, _ in events]}")
                cond.wait(left)

    def status_is(state, reason=None):
        def p(e):
            t, d, _ = e
            return (t == "MODIFIED" and d and d["Status"]["Status"] == state
                    and (reason is None or d["Status"]["Reason"] == reason)
                    and not d["ObjectMeta"].get("deletionTimestamp"))
        return p

    launcher_sock = os.path.join(a.share, "sockets", "launcher-sock")
    deadline = time.time() + 120
    while not os.path.exists(launcher_sock):
        if time.time() > deadline:
            fail("launcher-sock never appeared")
        time.sleep(0.1)
    # Go's gRPC (virt-handler) sends ":authority: localhost" on unix
    # sockets; Python's default would be the socket path, which is not a
    # valid HTTP/2 authority and is refused by the server's HTTP/2 stack.
    ch = grpc.insecure_channel(f"unix://{launcher_sock}", options=[("grpc.default_authority", "localhost")])
    info = info_pb2_grpc.CmdInfoStub(ch).Info(info_pb2.CmdInfoRequest(), timeout=5)
    if 1 not in info.supportedCmdVersions:
        fail(f"versions {info.supportedCmdVersions}")
    c = cmd_pb2_grpc.CmdStub(ch)
    if not c.Ping(cmd_pb2.EmptyRequest(), timeout=5).success:
        fail("ping")

    req = cmd_pb2.VMIRequest(
        vmi=cmd_pb2.VMI(vmiJson=vmi_json),
        options=cmd_pb2.VirtualMachineOptions(
            VirtualMachineSMBios=cmd_pb2.SMBios(family="KubeVirt", manufacturer="KubeVirt", product="None"),
            MemBalloonStatsPeriod=10,
            clusterConfig=cmd_pb2.ClusterConfig(ExpandDisksEnabled=a.expand_disks),
        ),
    )
    r = c.SyncVirtualMachine(req, timeout=120)
    if not r.success:
        fail(f"sync: {r.message}")
    wait_event(lambda e: e[0] == "ADDED" and e[1]["Spec"]["Name"] == dom_name, "ADDED")
    wait_event(status_is("Running"), "Running")

    d = c.GetDomain(cmd_pb2.EmptyRequest(), timeout=5)
    dom = json.loads(d.domain)
    checks = {
        "Spec.Name": (dom["Spec"]["Name"], dom_name),
        "Status.Status": (dom["Status"]["Status"], "Running"),
        "ObjectMeta.uid": (dom["ObjectMeta"].get("uid"), uid),
        "Spec.Metadata.KubeVirt.UID": (dom["Spec"]["Metadata"]["KubeVirt"]["UID"], uid),
    }
    for k, (got, want) in checks.items():
        if got != want:
            fail(f"GetDomain {k} = {got!r}, want {want!r}")
    if "Reason" not in dom["Status"]:
        fail("GetDomain Status.Reason missing")
    s = c.GetDomainStats(cmd_pb2.EmptyRequest(), timeout=5)
    stats = json.loads(s.domainStats)
    if not s.response.success or stats["Name"] != dom_name or not stats["Cpu"]["TimeSet"]:
        fail(f"stats: {s}")
    v = c.GetQemuVersion(cmd_pb2.EmptyRequest(), timeout=5)
    if not v.version.startswith("QEMU "):
        fail(f"version {v.version!r}")
    # The guest agent's data: always answers (empty until the agent connects).
    g = c.GetGuestInfo(cmd_pb2.EmptyRequest(), timeout=5)
    if not g.response.success or "timezone" not in json.loads(g.guestInfoResponse):
        fail(f"GetGuestInfo: {g}")
    u = c.GetUsers(cmd_pb2.EmptyRequest(), timeout=5)
    if not u.response.success or not isinstance(json.loads(u.guestUserListResponse), list):
        fail(f"GetUsers: {u}")
    # Another VMI's UID is refused.
    other = dict(vmi, metadata=dict(vmi["metadata"], uid="someone-else"))
    r = c.KillVirtualMachine(cmd_pb2.VMIRequest(vmi=cmd_pb2.VMI(vmiJson=json.dumps(other).encode())), timeout=5)
    if r.success:
        fail("a kill for another UID succeeded")

    one = cmd_pb2.VMIRequest(vmi=cmd_pb2.VMI(vmiJson=vmi_json))
    if not c.PauseVirtualMachine(one, timeout=20).success:
        fail("pause")
    wait_event(status_is("Paused", "User"), "Paused/User")
    if json.loads(c.GetDomain(cmd_pb2.EmptyRequest(), timeout=5).domain)["Status"]["Status"] != "Paused":
        fail("GetDomain after pause")
    if not c.UnpauseVirtualMachine(one, timeout=20).success:
        fail("unpause")
    n_running = sum(1 for e in events if status_is("Running")(e))
    wait_event(lambda e: sum(1 for x in events if status_is("Running")(x)) > n_running, "Running again")

    if a.crash:
        print("READY-FOR-CRASH", flush=True)
        wait_event(lambda e: e[0] == "MODIFIED" and e[1] and e[1]["Status"]["Status"] in ("Shutoff", "Crashed")
                   and e[1]["Status"]["Reason"] in ("Crashed", "Failed", "Unknown"), "crash", timeout=120)
    else:
        if a.daemon_kill:
            n_before = len(events)
            print("READY-FOR-DAEMON-KILL", flush=True)
            _, n_err = wait_event(lambda e: e[0] == "ERROR"
                                  and "Libvirt reconnect" in (e[2] or {}).get("message", ""),
                                  "ERROR (Libvirt reconnect)", timeout=120, start=n_before)
            wait_event(status_is("Running"), "Running after the reconnect", timeout=120,
                       start=n_err + 1)
            d = json.loads(c.GetDomain(cmd_pb2.EmptyRequest(), timeout=20).domain)
            if d["Status"]["Status"] != "Running":
                fail(f"GetDomain after the daemon restart: {d['Status']}")
        deadline = time.time() + 180
        while a.serial and b"GUEST-READY" not in (Path(a.serial).read_bytes() if os.path.exists(a.serial) else b""):
            if time.time() > deadline:
                fail("the guest never printed GUEST-READY")
            time.sleep(0.2)
        if a.serial:
            # virt-handler's AgentConnected condition comes from the agent
            # channel's state in a notified domain; the agent's OS info rides along.
            def agent_connected(e):
                t, d, _ = e
                return (t == "MODIFIED" and d and d["Status"]["OSInfo"].get("Id")
                        and any(ch["Target"]["Name"] == "org.qemu.guest_agent.0"
                                and ch["Target"].get("State") == "connected"
                                for ch in d["Spec"]["Devices"].get("Channels") or []))
            wait_event(agent_connected, "agent connected with OS info", timeout=120)
            g = json.loads(c.GetGuestInfo(cmd_pb2.EmptyRequest(), timeout=5).guestInfoResponse)
            if not g.get("guestAgentVersion"):
                fail(f"GetGuestInfo with the agent connected: {g}")
        if a.resync_vmi:
            again = cmd_pb2.VMIRequest(vmi=cmd_pb2.VMI(vmiJson=Path(a.resync_vmi).read_bytes()),
                                       options=req.options)
            r = c.SyncVirtualMachine(again, timeout=120)
            if not r.success:
                fail(f"resync: {r.message}")
            deadline = time.time() + 120
            while a.resync_marker.encode() not in Path(a.serial).read_bytes():
                if time.time() > deadline:
                    fail(f"the guest never printed {a.resync_marker} after the resync")
                time.sleep(0.2)
            print("RESYNC-SEEN", flush=True)
        if a.memory_dump:
            memory_dumps(a, c, vmi_json, vmi, events, wait_event, status_is)
        if not c.ShutdownVirtualMachine(one, timeout=20).success:
            fail("shutdown")
        wait_event(status_is("Shutoff", "Shutdown"), "Shutoff/Shutdown", timeout=120)
    final, _ = wait_event(lambda e: e[0] == "MODIFIED" and e[1] and e[1]["ObjectMeta"].get("deletionTimestamp"),
                       "final deletion", timeout=120)
    if final[1]["Status"] != {**final[1]["Status"], "Status": "NoState", "Reason": "NonExistent"}:
        fail(f"final status {final[1]['Status']}")
    if final[1]["ObjectMeta"].get("uid") != uid:
        fail(f"final ObjectMeta {final[1]['ObjectMeta']}")
    types = [e[0] for e in events]
    print("EVENTS " + " ".join(types), flush=True)
    print("OK", flush=True)
    server.stop(0)


def memory_dumps(a, c, vmi_json, vmi, events, wait_event, status_is):
    """virt-handler's getMemoryDump: VirtualMachineMemoryDump returns at
    once; the dump's record (Spec.Metadata.KubeVirt.MemoryDump) arrives in
    MODIFIED notifications and GetDomain."""
    import cmd_pb2

    def dump(path, body=vmi_json):
        return c.VirtualMachineMemoryDump(
            cmd_pb2.MemoryDumpRequest(vmi=cmd_pb2.VMI(vmiJson=body), dumpPath=path), timeout=20)

    def record(d):
        return ((d or {}).get("Spec") or {}).get("Metadata", {}).get("KubeVirt", {}).get("MemoryDump")

    def done(name):
        return lambda e: (e[0] == "MODIFIED" and (record(e[1]) or {}).get("FileName") == name
                          and record(e[1])["Completed"])

    def get_domain():
        return json.loads(c.GetDomain(cmd_pb2.EmptyRequest(), timeout=5).domain)

    volume_dir = os.path.dirname(a.memory_dump)
    hotplug = os.path.dirname(volume_dir)
    # Refused, in one line naming dumpPath: nothing starts.
    for bad in ["", "relative.memory.dump", "/tmp/outside.memory.dump", f"{volume_dir}/../x.memory.dump",
                f"{hotplug}/missing-volume/x.memory.dump", f"{hotplug}/x.memory.dump"]:
        r = dump(bad)
        if r.success or not r.message.startswith("dumpPath: ") or "\n" in r.message:
            fail(f"dumpPath {bad!r} was not refused by name: {r}")
    other = dict(vmi, metadata=dict(vmi["metadata"], uid="someone-else"))
    if dump(a.memory_dump, json.dumps(other).encode()).success:
        fail("a memory dump for another UID succeeded")
    if record(get_domain()) is not None:
        fail(f"a refused request left a record: {record(get_domain())}")

    name = os.path.basename(a.memory_dump)
    n = len(events)
    for _ in range(2):  # the second: in progress or already done, a no-op either way
        r = dump(a.memory_dump)
        if not r.success:
            fail(f"memory dump: {r.message}")
    e, i = wait_event(done(name), f"memory dump {name} completed", start=n)
    m = record(e[1])
    if m["Failed"] or m["FailureReason"] or not m["StartTimestamp"] or not m["EndTimestamp"]:
        fail(f"memory dump record {m}")
    d = get_domain()
    if record(d) != m:
        fail(f"GetDomain's record {record(d)} is not the notified {m}")
    if d["Status"]["Status"] != "Running":
        fail(f"after the dump the domain is {d['Status']}")
    # The same file again: skipped (KubeVirt's FileName check), nothing rewritten.
    host_file = os.path.join(a.share, os.path.relpath(a.memory_dump, "/var/run/kubevirt"))
    before = os.stat(host_file)
    if not dump(a.memory_dump).success:
        fail("memory dump of the same file again")
    time.sleep(1)
    after = os.stat(host_file)
    if record(get_domain()) != m or (after.st_mtime_ns, after.st_ino) != (before.st_mtime_ns, before.st_ino):
        fail(f"the same file name was dumped again: {record(get_domain())}")
    print("MEMORY-DUMP " + json.dumps(m), flush=True)

    if a.memory_dump_fail:
        name = os.path.basename(a.memory_dump_fail)
        n = len(events)
        if not dump(a.memory_dump_fail).success:
            fail("memory dump to the full volume was not started")
        e, _ = wait_event(done(name), f"memory dump {name} ended", start=n)
        m = record(e[1])
        if not m["Failed"] or not m["FailureReason"].startswith("Domain memory dump failed: "):
            fail(f"a dump into a full volume: {m}")
        d = get_domain()
        if record(d) != m or d["Status"]["Status"] != "Running":
            fail(f"GetDomain after the failed dump: {record(d)} {d['Status']}")
        print("MEMORY-DUMP-FAILED " + json.dumps(m), flush=True)


if __name__ == "__main__":
    main()
