"""The scenarios the e2e tests run against a pod-mode launcher, and the
command line (`tests/handler/virt-handler --help`).

Each scenario runs the controller (controller.py) as virt-handler would run
it for the test's VMI, acts as the cluster around it (creates the VMI
handed over to the node, deletes it, updates its volumes as
virt-controller would) or as a user (pause, unpause through the client as
virt-handler's REST handlers do), and checks what comes back. A few calls
are probes virt-handler never makes (a command for another UID, bad dump
paths, a sync while the guest is shutting down); they are marked so.

Output (stdout), one line each: markers the test waits for
(READY-FOR-CRASH, READY-FOR-DAEMON-KILL, READY-FOR-SIGTERM, RESYNC-SEEN),
data lines (`EVENTS <types>`, `AFTER-DAEMON-KILL <json>`, `PROBE-SYNC-ERROR <message>`, `MEMORY-DUMP <record>`, `MEMORY-DUMP-FAILED
<record>`, `CALLS <json>`, `GRACE <json>`, `RECORDS <json>`), then `OK`;
or `FAIL: <what>` and exit status 1. Every notify event is also written to
--events as JSON lines ({"type", "domain", "status"} or {"type": "K8S",
"event"}). Anything the launcher sent that virt-handler's Go types would
not take (gotypes) or that virt-handler would trip over (check_domain) is
a failure, even when the scenario otherwise passed.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import uuid

from . import nichotplug
from . import vmi as vmimod
from .netsetup import NetPod
from .clients import LauncherClients
from .cmdclient import CmdError
from .controller import Controller
from .notify import DomainInformer, NotifyServer, check_domain

NODE = "e2e-node"
BOOT = 180


class Failure(Exception):
    """A failed check: the message follows `FAIL: `."""


def out(line):
    print(line, flush=True)


class Handler:
    """virt-handler for one VMI: cluster, notify server, clients, controller."""

    def __init__(self, a):
        self.a = a
        self.violations = []
        manifest = vmimod.load_manifest(a.vmi)
        self.pod_uid = str(uuid.uuid4())
        owner = {"name": manifest["metadata"]["name"], "uid": str(uuid.uuid4())} if a.owner_vm else None
        self.cluster = vmimod.Cluster(manifest, NODE, self.pod_uid, owner_vm=owner,
                                      runtime_user=a.runtime_user)
        m = self.cluster.obj["metadata"]
        self.ns, self.name, self.uid = m["namespace"], m["name"], m["uid"]
        self.dom_name = f"{self.ns}_{self.name}"
        self.dir = tempfile.mkdtemp(prefix="virt-handler-")
        self.informer = DomainInformer(lambda _k: self.ctrl.queue.add())
        self.notify = NotifyServer(self.dir, self.informer, self.cluster, a.events, self.violation)
        self.clients = LauncherClients({self.pod_uid: os.path.join(a.share, "sockets")}, NODE,
                                       self.notify.sock)
        self.ctrl = Controller(self.cluster, self.informer, self.clients,
                               expand_disks=a.expand_disks, violation=self.violation,
                               busy_after_shutoff=a.busy_after_shutoff, node=NODE,
                               image_volume=a.image_volume,
                               netpod=NetPod(a.launcher, a.runtime_user) if a.plug_nic else None)

    def violation(self, msg):
        if msg not in self.violations:
            self.violations.append(msg)
            print(f"VIOLATION: {msg}", file=sys.stderr, flush=True)

    def start(self):
        self.ctrl.start()

    def stop(self):
        self.ctrl.stop()
        for uid in list(self.clients.info):
            self.clients.close(uid)
        self.notify.stop()

    # -- observing -------------------------------------------------------------
    def vmi(self):
        return self.cluster.get()

    def wait_vmi(self, pred, what, timeout=BOOT):
        """Waits for the VMI to satisfy pred; fails early on a sync the
        launcher refused (`FAIL: sync: <virt-handler's error>`)."""
        deadline = time.time() + timeout
        while True:
            v = self.vmi()
            if v is not None and pred(v):
                return v
            if v is not None:
                bad = next((c for c in v["status"].get("conditions") or []
                            if c["type"] == "Synchronized" and c["status"] == "False"
                            and "command SyncVMI failed" in c.get("message", "")), None)
                if bad:
                    raise Failure(f"sync: {bad['message']}")
            if time.time() > deadline:
                raise Failure(f"no {what} within {timeout}s; VMI status {json.dumps(v and v['status'])}; "
                              f"sync errors {self.ctrl.errors[-3:]}")
            time.sleep(0.1)

    def phase(self, p):
        return lambda v: v["status"].get("phase") == p

    def wait_event(self, pred, what, timeout=BOOT, start=0):
        try:
            return self.notify.wait(pred, timeout, what, start)
        except TimeoutError as e:
            raise Failure(str(e)) from None

    def client(self):
        v = self.vmi()
        try:
            return self.clients.get(v)
        except CmdError as e:
            raise Failure(f"no client: {e}") from None

    def get_domain(self, what):
        d, exists = self.client().get_domain()
        if not exists:
            raise Failure(f"GetDomain {what}: no domain")
        for p in check_domain(d, self.ns, self.name, self.uid):
            self.violation(f"GetDomain {what}: {p}")
        return d

    def wait_serial(self, marker, timeout=BOOT):
        deadline = time.time() + timeout
        while marker.encode() not in (open(self.a.serial, "rb").read() if os.path.exists(self.a.serial) else b""):
            if time.time() > deadline:
                raise Failure(f"the guest never printed {marker}")
            time.sleep(0.2)

    def calls(self, method=None):
        return self.clients.calls(method)


def grace(d):
    return (((d or {}).get("Spec") or {}).get("Metadata") or {}).get("KubeVirt", {}).get("GracePeriod") or {}


def status_is(state, reason=None):
    def p(e):
        t, d, _, _ = e
        return (t == "MODIFIED" and d and d["Status"]["Status"] == state
                and (reason is None or d["Status"]["Reason"] == reason)
                and not d["ObjectMeta"].get("deletionTimestamp"))
    return p


def final_event(e):
    return e[0] == "MODIFIED" and e[1] and e[1]["ObjectMeta"].get("deletionTimestamp")


# ---- the steps -----------------------------------------------------------------
def start_and_check(h):
    """The start: the controller syncs the Scheduled VMI, the domain
    appears, virt-handler moves the VMI to Running; then the answers."""
    h.start()
    v = h.wait_vmi(h.phase("Running"), "VMI phase Running")
    h.wait_event(lambda e: e[0] == "ADDED" and e[1]["Spec"]["Name"] == h.dom_name, "ADDED")
    h.wait_event(status_is("Running"), "Running")
    first = h.calls("SyncVirtualMachine")[0]
    if not first["ok"] and "DeadlineExceeded" not in first.get("error", ""):
        raise Failure(f"first sync: {first}")
    if v["status"]["phaseTransitionTimestamps"][-1]["phase"] != "Running":
        raise Failure(f"phase transitions {v['status']['phaseTransitionTimestamps']}")
    c = h.client()
    dom = h.get_domain("after the start")
    tgps = (h.vmi()["spec"].get("terminationGracePeriodSeconds"))
    checks = {
        "Spec.Name": (dom["Spec"]["Name"], h.dom_name),
        "Status.Status": (dom["Status"]["Status"], "Running"),
        "ObjectMeta.uid": (dom["ObjectMeta"].get("uid"), h.uid),
        "Spec.Metadata.KubeVirt.UID": (dom["Spec"]["Metadata"]["KubeVirt"]["UID"], h.uid),
        "GracePeriod.DeletionGracePeriodSeconds": (grace(dom).get("DeletionGracePeriodSeconds"),
                                                   30 if tgps is None else tgps),
        "GracePeriod.DeletionTimestamp": (grace(dom).get("DeletionTimestamp"), None),
        "GracePeriod.MarkedForGracefulShutdown": (grace(dom).get("MarkedForGracefulShutdown"), None),
    }
    for k, (got, want) in checks.items():
        if got != want:
            raise Failure(f"GetDomain {k} = {got!r}, want {want!r}")
    if "Reason" not in dom["Status"]:
        raise Failure("GetDomain Status.Reason missing")
    stats, exists = c.get_domain_stats()
    if not exists or stats.get("Name") != h.dom_name or not (stats.get("Cpu") or {}).get("TimeSet"):
        raise Failure(f"stats: {stats}")
    ver = c.get_qemu_version()
    if not ver.startswith("QEMU "):
        raise Failure(f"version {ver!r}")
    g = c.get_guest_info()
    if "timezone" not in g:
        raise Failure(f"GetGuestInfo: {g}")
    if not isinstance(c.get_users()["items"], list):
        raise Failure("GetUsers: not a list")
    if not isinstance(c.get_filesystems()["items"], list):
        raise Failure("GetFilesystems: not a list")
    # Probe: virt-handler's deleteVM for a domain it saw shut off in the
    # notification of the define, read after the start (its sync races the
    # notifications): the running domain must stay defined, or a later
    # power-off or crash would read as "no such domain". The stop and crash
    # scenarios then see Shutoff with its reason.
    c.delete_domain(vmimod.marshal(h.vmi()))
    if h.get_domain("after a DeleteVirtualMachine of the running domain")["Status"]["Status"] != "Running":
        raise Failure("DeleteVirtualMachine stopped the running domain")
    # Probe: a command for another VMI's UID is refused.
    other = h.vmi()
    other["metadata"]["uid"] = "someone-else"
    try:
        c.kill_virtual_machine(vmimod.marshal(other))
        raise Failure("a kill for another UID succeeded")
    except CmdError:
        pass


def pause_unpause(h):
    """virt-handler's REST pause/unpause: the client's Pause/Unpause."""
    c = h.client()
    n0 = len(h.notify.events)
    c.pause_virtual_machine(vmimod.marshal(h.vmi()))
    h.wait_event(status_is("Paused", "User"), "Paused/User", start=n0)
    h.wait_vmi(lambda v: any(x["type"] == "Paused" and x.get("reason") == "PausedByUser"
                             for x in v["status"].get("conditions") or []), "Paused condition")
    if h.get_domain("after pause")["Status"]["Status"] != "Paused":
        raise Failure("GetDomain after pause")
    n = sum(1 for e in h.notify.events if status_is("Running")(e))
    c.unpause_virtual_machine(vmimod.marshal(h.vmi()))
    h.wait_event(lambda e: sum(1 for x in h.notify.events if status_is("Running")(x)) > n, "Running again")
    h.wait_vmi(lambda v: not any(x["type"] == "Paused" for x in v["status"].get("conditions") or []),
               "Paused condition removed")


def agent_checks(h):
    """virt-handler's AgentConnected comes from the agent channel's state in
    a notified domain; the agent's OS info rides along."""
    def connected(e):
        t, d, _, _ = e
        return (t == "MODIFIED" and d and d["Status"]["OSInfo"].get("Id")
                and any((ch.get("Target") or {}).get("Name") == "org.qemu.guest_agent.0"
                        and (ch.get("Target") or {}).get("State") == "connected"
                        for ch in d["Spec"]["Devices"].get("Channels") or []))
    h.wait_event(connected, "agent connected with OS info", timeout=120)
    v = h.wait_vmi(lambda v: any(c["type"] == "AgentConnected" for c in v["status"].get("conditions") or [])
                   and v["status"].get("guestOSInfo", {}).get("id"), "AgentConnected and guestOSInfo", 60)
    unsupported = [c for c in v["status"]["conditions"] if c["type"] == "AgentVersionNotSupported"]
    if unsupported:
        raise Failure(f"virt-handler finds the guest agent unsupported: {unsupported}")
    g = h.client().get_guest_info()
    if not g.get("guestAgentVersion"):
        raise Failure(f"GetGuestInfo with the agent connected: {g}")


def resync(h):
    """A claim grew: virt-controller writes the new size into the VMI's
    volumeStatus; the controller syncs the VMI with it."""
    grown = vmimod.load_manifest(h.a.resync_vmi)
    sizes = {vs["name"]: vs.get("persistentVolumeClaimInfo")
             for vs in (grown.get("status") or {}).get("volumeStatus") or []}

    def mutate(obj):
        for vs in obj["status"].get("volumeStatus") or []:
            if sizes.get(vs["name"]) is not None:
                vs["persistentVolumeClaimInfo"] = sizes[vs["name"]]
    n = len(h.calls("SyncVirtualMachine"))
    h.cluster.update(mutate)
    deadline = time.time() + 60
    while len(h.calls("SyncVirtualMachine")) <= n:
        if time.time() > deadline:
            raise Failure("no SyncVirtualMachine after the claim grew")
        time.sleep(0.1)
    h.wait_serial(h.a.resync_marker, 120)
    out("RESYNC-SEEN")


def after_daemon_kill(h):
    """The test kills the libvirt daemon under the running domain after
    READY-FOR-DAEMON-KILL. The launcher notifies virt-handler's ERROR
    (Libvirt reconnect) and the Running domain again; then GetDomain
    answers Running, the controller's next SyncVirtualMachine succeeds,
    and a user's pause and unpause reach the notify server as Paused/User
    and Running events. Prints AFTER-DAEMON-KILL <json>."""
    n = len(h.notify.events)
    t_kill = time.time()
    out("READY-FOR-DAEMON-KILL")
    _, i = h.wait_event(lambda e: e[0] == "ERROR" and "Libvirt reconnect" in (e[2] or {}).get("message", ""),
                        "ERROR (Libvirt reconnect)", 120, n)
    h.wait_event(status_is("Running"), "Running after the reconnect", 120, i + 1)
    deadline = time.time() + 60
    while True:
        try:
            if h.get_domain("after the daemon restart")["Status"]["Status"] == "Running":
                break
        except CmdError:
            pass
        if time.time() > deadline:
            raise Failure("GetDomain after the daemon restart")
        time.sleep(1)
    # The controller syncs on every domain event; ask once more so that a
    # sync runs now whatever the events did, and wait for one that
    # succeeded, started after the kill.
    h.ctrl.queue.add()
    deadline = time.time() + 60
    while not [c for c in h.calls("SyncVirtualMachine") if c["start"] > t_kill and c["ok"]]:
        if time.time() > deadline:
            failed = [c for c in h.calls("SyncVirtualMachine") if c["start"] > t_kill]
            raise Failure(f"no successful SyncVirtualMachine after the daemon restart: {failed}")
        time.sleep(0.2)
    syncs = [c for c in h.calls("SyncVirtualMachine") if c["start"] > t_kill]
    before = len(h.notify.events)
    pause_unpause(h)
    kinds = [(t, d and d["Status"]["Status"], d and d["Status"]["Reason"]) for t, d, _, _ in h.notify.events[before:]]
    if h.get_domain("after the pause and unpause")["Status"]["Status"] != "Running":
        raise Failure("GetDomain after the pause and unpause past the daemon restart")
    out("AFTER-DAEMON-KILL " + json.dumps({
        "reconnectEvent": i, "syncs": len(syncs), "syncsOk": sum(1 for c in syncs if c["ok"]),
        "eventsAfterPause": kinds}))


def stop_by_deletion(h):
    """kubectl delete vmi: ShutdownVirtualMachine (repeated while the grace
    period runs), the guest powers off, the VMI Succeeded, DeleteVirtualMachine."""
    n = len(h.notify.events)
    h.cluster.delete()
    h.wait_event(lambda e: e[0] == "MODIFIED" and e[1] and grace(e[1]).get("DeletionTimestamp"),
                 "GracePeriod.DeletionTimestamp recorded", 60, n)
    h.wait_event(status_is("Shutoff", "Shutdown"), "Shutoff/Shutdown", 120, n)
    h.wait_vmi(h.phase("Succeeded"), "VMI phase Succeeded", 60)
    if not h.calls("ShutdownVirtualMachine"):
        raise Failure("no ShutdownVirtualMachine")


def stop_ignored(h):
    """Deletion of a guest that ignores shutdown requests: Shutdown again
    every <= 5 s while the grace period runs from the recorded
    DeletionTimestamp, then KillVirtualMachine; the VMI fails (ACPI and a
    grace period: a destroyed domain is a failure)."""
    h.cluster.delete()
    t0 = time.time()
    while not h.calls("ShutdownVirtualMachine"):
        if time.time() - t0 > 60:
            raise Failure("no ShutdownVirtualMachine after the deletion")
        time.sleep(0.05)
    dom = h.get_domain("after the first Shutdown")
    recorded = grace(dom).get("DeletionTimestamp")
    if not recorded:
        raise Failure(f"GetDomain after the first Shutdown has no DeletionTimestamp: {grace(dom)}")
    h.wait_event(status_is("Shutoff", "Destroyed"), "Shutoff/Destroyed", 120)
    h.wait_vmi(h.phase("Failed"), "VMI phase Failed", 60)
    h.wait_vmi(lambda v: h.calls("DeleteVirtualMachine"), "DeleteVirtualMachine", 60)
    tgps = h.vmi()["spec"].get("terminationGracePeriodSeconds")
    out("GRACE " + json.dumps({"deletionTimestamp": recorded, "terminationGracePeriodSeconds": tgps,
                               "vmiDeletionTimestamp": h.vmi()["metadata"]["deletionTimestamp"]}))


def stop_by_sigterm(h):
    """The pod is deleted: kubelet's SIGTERM to the launcher (sent by the
    test) marks the domain for graceful shutdown; the controller reacts
    with ShutdownVirtualMachine, re-sent every 5 s at most. The guest
    ignores the power button for a while after the first press (the
    test's user-data); meanwhile a probe sync must keep both records; then
    a re-sent Shutdown powers it off."""
    n = len(h.notify.events)
    out("READY-FOR-SIGTERM")
    marked, i = h.wait_event(lambda e: e[0] == "MODIFIED" and e[1]
                             and grace(e[1]).get("MarkedForGracefulShutdown") is True,
                             "MarkedForGracefulShutdown", 60, n)
    t_marked = marked[3]
    d = h.get_domain("after SIGTERM")
    if grace(d).get("MarkedForGracefulShutdown") is not True:
        raise Failure(f"GetDomain after SIGTERM: {grace(d)}")
    deadline = time.time() + 30
    while not [c for c in h.calls("ShutdownVirtualMachine") if c["start"] >= t_marked]:
        if time.time() > deadline:
            raise Failure("the controller sent no ShutdownVirtualMachine on the graceful-shutdown trigger")
        time.sleep(0.05)
    before = grace(h.get_domain("after the graceful-shutdown trigger's Shutdown"))
    if not before.get("DeletionTimestamp") or before.get("MarkedForGracefulShutdown") is not True:
        raise Failure(f"GetDomain after Shutdown: {before}")
    # Probe: a SyncVirtualMachine now keeps both records.
    t_sync = time.time()
    c = h.client()
    c.sync_virtual_machine(vmimod.marshal(h.vmi()), h.ctrl.options(h.vmi()))
    after = grace(h.get_domain("after a later sync"))
    if after != before:
        raise Failure(f"a sync changed the grace-period record: {before} -> {after}")
    h.wait_event(status_is("Shutoff", "Shutdown"), "Shutoff/Shutdown", 120, n)
    h.wait_vmi(h.phase("Succeeded"), "VMI phase Succeeded", 60)
    later = [grace(d) for t, d, _, at in h.notify.events
             if at > t_sync and d and not d["ObjectMeta"].get("deletionTimestamp")]
    if not later or any(g.get("DeletionTimestamp") != before["DeletionTimestamp"]
                        or g.get("MarkedForGracefulShutdown") is not True for g in later):
        raise Failure(f"the records in the events after the sync: {later}")
    shutdowns = [c["start"] for c in h.calls("ShutdownVirtualMachine") if c["start"] >= t_marked]
    out("RECORDS " + json.dumps({"before": before, "after": after, "eventsAfterSync": len(later),
                                 "markedAt": t_marked, "shutdowns": shutdowns}))


def stop_by_sigterm_stalled(h):
    """SIGTERM while the guest's agent takes guest-shutdown and never
    powers off: libvirt's agent shutdown then waits 60 s for the guest.
    The launcher must still notify the mark at once, answer GetDomain,
    and kill the guest when its own grace period ends."""
    n = len(h.notify.events)
    out("READY-FOR-SIGTERM")
    _, i = h.wait_event(lambda e: e[0] == "MODIFIED" and e[1]
                        and grace(e[1]).get("MarkedForGracefulShutdown") is True,
                        "MarkedForGracefulShutdown", 60, n)
    marked_at = h.notify.events[i][3]
    # While the shutdown request waits for the guest.
    time.sleep(2)
    t = time.time()
    d = h.get_domain("while a shutdown request waits")
    latency = time.time() - t
    if d["Status"]["Status"] != "Running":
        raise Failure(f"GetDomain while a shutdown request waits: {d['Status']}")
    e, _ = h.wait_event(status_is("Shutoff", "Destroyed"), "Shutoff/Destroyed", 120, n)
    h.wait_vmi(h.phase("Failed"), "VMI phase Failed", 60)
    out("STALLED " + json.dumps({"markedAt": marked_at, "getDomainAt": t, "getDomainSeconds": latency,
                                 "destroyedAt": e[3]}))


def memory_dumps(h):
    """virt-handler's memory dump (updateMemoryDumpInfo, getMemoryDump):
    once the volume is attached (virt-controller) and mounted, it moves to
    MemoryDumpInProgress with a target file name and every sync asks for
    VirtualMachineMemoryDump until the domain's record names that file."""
    from .dumps import run as run_dumps
    run_dumps(h, out, Failure)


def wait_launcher_socket(h):
    """The launcher's command socket in the pod's share, once it exists."""
    sock = os.path.join(h.a.share, "sockets", "launcher-sock")
    deadline = time.time() + 120
    while not os.path.exists(sock):
        if time.time() > deadline:
            raise Failure(f"no {sock}")
        time.sleep(0.1)
    return sock


def probe_bad_image_path(h, path):
    """A probe virt-handler never makes (a VMI's containerDisk path never
    changes): before the first sync, SyncVirtualMachine of the VMI with its
    first containerDisk's `path` set to `path`, which leads out of the image
    volume; the launcher must refuse it. Prints PROBE-SYNC-ERROR <message>."""
    import copy
    from .cmdclient import LauncherClient
    sock = wait_launcher_socket(h)
    v = copy.deepcopy(h.vmi())
    vol = next((x for x in v["spec"]["volumes"] if "containerDisk" in x), None)
    if vol is None:
        raise Failure("--probe-bad-image-path needs a containerDisk volume")
    vol["containerDisk"]["path"] = path
    c = LauncherClient(sock)
    try:
        c.sync_virtual_machine(vmimod.marshal(v), h.ctrl.options(v))
    except CmdError as e:
        out("PROBE-SYNC-ERROR " + str(e))
        return
    finally:
        c.close()
    raise Failure(f"a sync with containerDisk.path {path} succeeded")


def probe_before_sync(h):
    """Before virt-handler has synced anything: its domain informer's list
    (listAllKnownDomains: a new client, GetDomain) and its dirty-rate
    scraper (a new client per scrape, GetDomainDirtyRateStats), each
    reporting what it would log."""
    from .cmdclient import LauncherClient
    sock = wait_launcher_socket(h)
    res = {}
    c = LauncherClient(sock)
    try:
        d, exists = c.get_domain()
        res["getDomainExists"] = exists
        stats, exists = c.get_domain_stats()
        res["getDomainStats"] = {"exists": exists, "stats": stats}
    finally:
        c.close()
    c = LauncherClient(sock)
    try:
        res["dirtyRateMbs"] = c.get_domain_dirty_rate_stats()
    except CmdError as e:
        res["dirtyRateError"] = str(e)
    finally:
        c.close()
    out("PROBE " + json.dumps(res))


def migrate(h):
    """A live migration to a second node (migration.py): the VMI runs on the
    source node, virt-controller hands the migration over to the target
    pod, both nodes' migration controllers drive it; then the events each
    launcher sent, the VMI's migrationState and the target's answers."""
    from . import migration as mig
    a = h.a
    h.start()
    h.wait_vmi(h.phase("Running"), "VMI phase Running")
    h.wait_event(lambda e: e[0] == "ADDED", "ADDED")
    if a.serial:
        h.wait_serial("GUEST-READY")
    agent_checks(h)
    code, up = h.client().exec(h.dom_name, "cat", ["/proc/uptime"], 10)
    before = float(up.split()[0])
    # Data written to each disk before the move (direct I/O, so it is on
    # the disk, not only in the guest's page cache), and its checksum.
    sums = {}
    for dev in a.checksum_device or []:
        code, o = h.client().exec(h.dom_name, "sh", ["-c", (
            f"dd if=/dev/urandom of={dev} bs=1M count=4 oflag=direct conv=fsync 2>/dev/null && "
            f"dd if={dev} bs=1M count=4 iflag=direct 2>/dev/null | sha256sum")], 60)
        if code != 0 or len(o.split()[0]) != 64:
            raise Failure(f"writing {dev} on the source: exit {code}, {o!r}")
        sums[dev] = o.split()[0]

    target_node, target_pod, target_pod_uid = "e2e-target-node", "target-pod", str(uuid.uuid4())
    tdir = tempfile.mkdtemp(prefix="virt-handler-target-")
    t_informer = DomainInformer(lambda _k: None)
    t_notify = NotifyServer(tdir, t_informer, h.cluster, a.target_events, h.violation)
    t_clients = LauncherClients({target_pod_uid: os.path.join(a.migrate_to, "sockets")}, target_node,
                                t_notify.sock)

    def target_options(vmi, final=False):
        from .stubs import pb
        ifaces = (vmi["spec"].get("domain") or {}).get("devices", {}).get("interfaces") or []
        if final:
            # BindingMigrationByInterfaceName: only plugin bindings have one.
            return pb.cmd.VirtualMachineOptions()
        att = {i["name"]: "tap" for i in ifaces if "masquerade" in i or "bridge" in i}
        o = h.ctrl.options(vmi)
        o.ClearField("VirtualMachineSMBios")
        o.MemBalloonStatsPeriod = 0
        del o.PreallocatedVolumes[:]
        o.interfaceDomainAttachment.clear()
        o.interfaceDomainAttachment.update(att)
        return o

    config = json.loads(a.migration_config) if a.migration_config else {}
    proxy = mig.Proxy(a.launcher, a.share, a.migrate_to, a.migrate_to_libvirt_socket,
                      os.path.join(tdir, "migration-proxy.log"))
    tgt = mig.TargetController(h.cluster, t_informer, t_clients, target_node, target_options, h.violation)
    src = mig.SourceController(h.cluster, h.informer, h.clients, NODE, config, proxy.start, proxy.stop)
    h.informer.on_change = lambda _k: (h.ctrl.queue.add(), src.queue.add())
    try:
        n0 = len(h.notify.events)
        tgt.start()
        src.start()
        mig.hand_over(h.cluster, a.migration_uid, NODE, target_node, target_pod_uid, target_pod, config)
        v = h.wait_vmi(lambda v: (v["status"].get("migrationState") or {}).get("completed")
                       and mig.TARGET_NODE_LABEL not in (v["metadata"].get("labels") or {}),
                       "migration completed and finalized", 300)
        final, _ = h.wait_event(final_event, "the source's final deletion", 120, n0)
        ms = v["status"]["migrationState"]
        out("MIGRATION " + json.dumps(ms))
        s_ev, t_ev = h.notify.events[n0:], list(t_notify.events)
        out("SOURCE-EVENTS " + json.dumps(mig.sequence(s_ev)))
        out("TARGET-EVENTS " + json.dumps(mig.sequence(t_ev)))
        for k in ("startTimestamp", "endTimestamp", "targetNodeDomainReadyTimestamp"):
            if not ms.get(k):
                raise Failure(f"migrationState.{k} missing: {ms}")
        if ms.get("failed") or not ms.get("targetNodeDomainDetected") or ms.get("mode") != "PreCopy":
            raise Failure(f"migrationState {ms}")
        if v["status"]["nodeName"] != target_node or v["metadata"]["labels"].get("kubevirt.io/nodeName") != target_node:
            raise Failure(f"the VMI did not move to the target node: {v['status']['nodeName']}")

        # The source launcher's events after the hand-over, in KubeVirt's order.

        def first(evs, pred, what):
            i = next((i for i, e in enumerate(evs) if pred(e)), None)
            if i is None:
                raise Failure(f"no {what} among {mig.sequence(evs)}")
            return i
        uid = a.migration_uid

        def rec(e):
            return mig._record(e[1]) or {}
        started = first(s_ev, lambda e: e[0] == "MODIFIED" and rec(e).get("UID") == uid
                        and rec(e).get("StartTimestamp") and not rec(e).get("EndTimestamp"),
                        "source MODIFIED with the migration started")
        ended = first(s_ev, lambda e: e[0] == "MODIFIED" and rec(e).get("UID") == uid
                      and rec(e).get("EndTimestamp") and not rec(e).get("Failed"),
                      "source MODIFIED with the migration ended")
        migrated = first(s_ev, status_is("Shutoff", "Migrated"), "source MODIFIED Shutoff/Migrated")
        last = first(s_ev, final_event, "source final event")
        if not (started < ended < last and started < migrated < last and last == len(s_ev) - 1):
            raise Failure(f"source order: started {started}, ended {ended}, migrated {migrated}, final {last}")
        if any(e[0] != "MODIFIED" for e in s_ev):
            raise Failure(f"source event types: {[e[0] for e in s_ev]}")
        if final[1]["Status"]["Status"] != "NoState" or final[1]["Status"]["Reason"] != "NonExistent":
            raise Failure(f"source final status {final[1]['Status']}")

        # The target launcher's events: every one about the incoming
        # domain with the source's migration record (none before libvirt
        # knows it: no deletion), the ADDED of STARTED/MIGRATED, Running,
        # then the end once it runs. (An event of the agent channel while
        # the incoming domain is paused may come before the ADDED, as
        # KubeVirt's notifier sends it too.)
        if not t_ev or any(rec(e).get("UID") != uid for e in t_ev):
            raise Failure(f"target events without the migration record: {mig.sequence(t_ev)}")
        added = first(t_ev, lambda e: e[0] == "ADDED", "target ADDED")
        running = first(t_ev, status_is("Running"), "target MODIFIED Running")
        t_end = first(t_ev, lambda e: e[0] == "MODIFIED" and rec(e).get("EndTimestamp"),
                      "target MODIFIED with the migration's end")
        if any(e[0] not in ("ADDED", "MODIFIED") or final_event(e) for e in t_ev):
            raise Failure(f"target event types: {mig.sequence(t_ev)}")
        if not (added <= t_end and running <= t_end) or t_ev[t_end][1]["Status"]["Status"] != "Running":
            raise Failure(f"target order: added {added}, running {running}, end {t_end}")
        out(f"TARGET-ORDER added={added} running={running} end={t_end}")

        # The calls each virt-handler made.
        tcalls = [(c["method"], c["ok"]) for c in t_clients.calls()]
        # vm.go's deleteVM of the migrated domain races the source
        # launcher's own exit (a disconnect is ignored, as virt-handler does).
        deadline = time.time() + 20
        while not h.calls("DeleteVirtualMachine") and time.time() < deadline:
            time.sleep(0.2)
        scalls = [(c["method"], c["ok"] or "cancel" in c.get("error", "").lower()
                   or "unavailable" in c.get("error", "").lower()) for c in h.calls()]
        out("TARGET-CALLS " + json.dumps(tcalls))
        if ("SyncMigrationTarget", True) not in tcalls or \
                tcalls.count(("FinalizeVirtualMachineMigration", True)) < 2:
            raise Failure(f"target calls {tcalls}")
        if ("MigrateVirtualMachine", True) not in scalls or ("DeleteVirtualMachine", True) not in scalls:
            raise Failure(f"source calls {scalls}")
        out("MIGRATE-OPTIONS " + json.dumps(src.migrate_calls))

        # The target answers: GetDomain, GetGuestInfo, Exec (the guest never restarted).
        vmi = h.vmi()
        c = t_clients.get(vmi)
        d, ok = c.get_domain()
        if not ok or d["Status"]["Status"] != "Running" or rec((0, d)).get("UID") != uid:
            raise Failure(f"target GetDomain: {d and d['Status']}")
        deadline = time.time() + 90
        while True:
            g = c.get_guest_info()
            if g.get("guestAgentVersion"):
                break
            if time.time() > deadline:
                raise Failure(f"target GetGuestInfo: {g}")
            time.sleep(1)
        code, up = c.exec(h.dom_name, "cat", ["/proc/uptime"], 10)
        after = float(up.split()[0])
        if code != 0 or after <= before:
            raise Failure(f"uptime {after} on the target, {before} on the source")
        out(f"UPTIME before={before} after={after}")
        # The disks read on the target, past the guest's page cache.
        for dev, want in sums.items():
            code, o = c.exec(h.dom_name, "sh", ["-c", (
                f"echo 3 > /proc/sys/vm/drop_caches; "
                f"dd if={dev} bs=1M count=4 iflag=direct 2>/dev/null | sha256sum")], 60)
            got = o.split()[0] if o.split() else ""
            if code != 0 or got != want:
                raise Failure(f"{dev} on the target: sha256 {got!r}, on the source {want!r}")
            out(f"CHECKSUM {dev} {got}")
        for p in check_domain(d, h.ns, h.name, h.uid):
            h.violation(f"target GetDomain: {p}")
        t_clients.close(vmi["metadata"]["uid"])
    finally:
        for e in tgt.errors[-5:] + src.errors[-5:]:
            print(f"migration controller error at {e[0]:.3f}: {e[1]}", file=sys.stderr)
        src.stop()
        tgt.stop()
        proxy.stop()
        t_notify.stop()


def run(h):
    a = h.a
    if a.migrate_to:
        migrate(h)
        return
    if a.probe_before_sync:
        probe_before_sync(h)
        return
    if a.probe_bad_image_path:
        probe_bad_image_path(h, a.probe_bad_image_path)
    start_and_check(h)
    pause_unpause(h)
    if a.crash:
        out("READY-FOR-CRASH")
        h.wait_event(lambda e: e[0] == "MODIFIED" and e[1] and e[1]["Status"]["Status"] in ("Shutoff", "Crashed")
                     and e[1]["Status"]["Reason"] in ("Crashed", "Failed", "Unknown"), "crash", 120)
        h.wait_vmi(h.phase("Failed"), "VMI phase Failed", 60)
    else:
        if a.daemon_kill:
            after_daemon_kill(h)
        if a.serial:
            h.wait_serial("GUEST-READY")
            if a.stop in ("delete",):
                agent_checks(h)
        if a.plug_nic:
            nichotplug.plug_unplug(h)
        if a.resync_vmi:
            resync(h)
        if a.memory_dump:
            memory_dumps(h)
        {"delete": stop_by_deletion, "delete-ignored": stop_ignored, "sigterm": stop_by_sigterm,
         "sigterm-stalled": stop_by_sigterm_stalled}[a.stop](h)
    final, _ = h.wait_event(final_event, "final deletion", 120)
    if final[1]["Status"] != {**final[1]["Status"], "Status": "NoState", "Reason": "NonExistent"}:
        raise Failure(f"final status {final[1]['Status']}")
    if final[1]["ObjectMeta"].get("uid") != h.uid:
        raise Failure(f"final ObjectMeta {final[1]['ObjectMeta']}")
    out("EVENTS " + " ".join(t for t, *_ in h.notify.events))
    calls = [{k: r[k] for k in ("method", "start", "end", "ok")} for r in h.calls()
             if r["method"] in ("SyncVirtualMachine", "ShutdownVirtualMachine", "KillVirtualMachine",
                                "DeleteVirtualMachine")]
    out("CALLS " + json.dumps(calls))


def parse(argv):
    ap = argparse.ArgumentParser(prog="virt-handler", description=__doc__.split("\n\n")[0])
    ap.add_argument("--share", required=True, help="the pod's /var/run/kubevirt as the host sees it")
    ap.add_argument("--vmi", required=True, help="the VMI manifest (JSON or YAML) with its uid")
    ap.add_argument("--events", required=True, help="where to write the notify events (JSON lines)")
    ap.add_argument("--serial", help="the guest's serial log: wait for GUEST-READY before the agent "
                    "checks and the stop (a power button pressed before acpid runs is lost)")
    ap.add_argument("--crash", action="store_true", help="instead of stopping, expect a QEMU crash")
    ap.add_argument("--daemon-kill", action="store_true", help="expect the libvirt daemon to be killed: "
                    "an ERROR (Libvirt reconnect) notification, then the running domain again")
    ap.add_argument("--expand-disks", action="store_true", help="the ExpandDisks feature gate")
    ap.add_argument("--resync-vmi", help="once the guest is ready, a VMI whose status.volumeStatus "
                    "has grown claims: written into the VMI as virt-controller would")
    ap.add_argument("--resync-marker", help="the serial marker the resync must produce")
    ap.add_argument("--memory-dump", help="a dump file in a memory dump volume, in the pod's view "
                    "(/var/run/kubevirt/hotplug-disks/<volume>/<file>); it must complete")
    ap.add_argument("--memory-dump-fail", help="then one in another memory dump volume too small for it")
    ap.add_argument("--runtime-user", type=int, default=0,
                    help="the VMI's status.runtimeUser as virt-api sets it: 107 (markAsNonroot) unless "
                    "the cluster enables the Root feature gate (0)")
    ap.add_argument("--busy-after-shutoff", type=float, default=0,
                    help="seconds the controller's worker is busy elsewhere when the domain first "
                    "shows Shutoff (a loaded node): the launcher must wait for DeleteVirtualMachine")
    ap.add_argument("--owner-vm", action="store_true", help="the VMI belongs to a VirtualMachine")
    ap.add_argument("--probe-before-sync", action="store_true",
                    help="only what virt-handler asks before its first sync (the domain list, a "
                    "dirty-rate scrape); prints PROBE <json>")
    ap.add_argument("--image-volume", action="store_true",
                    help="the ImageVolume feature gate: container disks are the pod's image "
                    "volumes, nothing for virt-handler to mount or wait for")
    ap.add_argument("--probe-bad-image-path", metavar="PATH",
                    help="before the first sync, a probe: SyncVirtualMachine with the first "
                    "containerDisk's path set to PATH (leading out of its image volume) must fail; "
                    "prints PROBE-SYNC-ERROR <message>")
    ap.add_argument("--stop", choices=["delete", "delete-ignored", "sigterm", "sigterm-stalled"],
                    default="delete",
                    help="how the VMI ends: deleted (the guest powers off), deleted while the guest "
                    "ignores shutdown requests (killed after the grace period), a SIGTERM to the "
                    "launcher the test sends after READY-FOR-SIGTERM (the guest powers off on a "
                    "re-sent Shutdown), or that SIGTERM while the guest's agent swallows shutdown "
                    "requests (the launcher kills it at the end of its grace period)")
    ap.add_argument("--migrate-to", help="migrate the VMI to the pod whose /var/run/kubevirt is this "
                    "directory (a second node: its own virt-handler, see migration.py)")
    ap.add_argument("--migrate-to-libvirt-socket", help="that pod's libvirt socket as the host sees it")
    ap.add_argument("--launcher", help="the virt-launcher binary (its migration-proxy plays "
                    "virt-handler's migration proxy)")
    ap.add_argument("--target-events", help="where to write the target launcher's notify events")
    ap.add_argument("--migration-uid", default="e2e-migration", help="the migration object's UID")
    ap.add_argument("--checksum-device", action="append", help="a guest disk (/dev/vdX) written "
                    "before the migration and checksummed on both sides (repeatable)")
    ap.add_argument("--plug-nic", metavar="NAME=NAD", help="once the guest is ready, plug a bridge "
                    "interface NAME on the Multus network NAD and unplug it (nichotplug.py; needs "
                    "--launcher); prints NIC-PLUGGED and NIC-UNPLUGGED")
    ap.add_argument("--migration-config", help="the cluster's migrations configuration (JSON, "
                    "KubeVirt's field names), else KubeVirt's defaults")
    return ap.parse_args(argv)


def main(argv=None):
    a = parse(argv)
    h = Handler(a)
    code = 0
    try:
        run(h)
        if h.violations:
            raise Failure("virt-handler would not take what the launcher sent:\n  " + "\n  ".join(h.violations))
        out("OK")
    except (Failure, CmdError, TimeoutError) as e:
        out(f"FAIL: {e}")
        if h.violations and "would not take" not in str(e):
            out("VIOLATIONS: " + "; ".join(h.violations))
        code = 1
        for t, err in h.ctrl.errors[-10:]:
            print(f"controller error at {t:.3f}: {err}", file=sys.stderr)
        import traceback
        traceback.print_exc(file=sys.stderr)
    finally:
        h.stop()
    return code
