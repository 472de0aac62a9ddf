"""The memory dump scenario (scenarios.memory_dumps): refused requests
first (probes), then a dump the controller asks for until it completes, the
same file again (a probe), and a dump into a volume too small for it."""

import json
import os
import time

from . import vmi as vmimod
from .cmdclient import CmdError
from .stubs import pb

HOTPLUG = "/var/run/kubevirt/hotplug-disks"


def record(d):
    return (((d or {}).get("Spec") or {}).get("Metadata") or {}).get("KubeVirt", {}).get("MemoryDump")


def run(h, out, Failure):
    a = h.a
    c = h.client()

    def raw_dump(path, body=None):
        """Probe: the launcher's raw answer to a dump request."""
        req = pb.cmd.MemoryDumpRequest(vmi=pb.cmd.VMI(vmiJson=body or vmimod.marshal(h.vmi())),
                                       dumpPath=path)
        return c.stub.VirtualMachineMemoryDump(req, timeout=20)

    volume_dir = os.path.dirname(a.memory_dump)
    for bad in ["", "relative.memory.dump", "/tmp/outside.memory.dump", f"{volume_dir}/../x.memory.dump",
                f"{HOTPLUG}/missing-volume/x.memory.dump", f"{HOTPLUG}/x.memory.dump"]:
        r = raw_dump(bad)
        if r.success or not r.message.startswith("dumpPath: ") or "\n" in r.message:
            raise Failure(f"dumpPath {bad!r} was not refused by name: {r}")
    other = h.vmi()
    other["metadata"]["uid"] = "someone-else"
    if raw_dump(a.memory_dump, vmimod.marshal(other)).success:
        raise Failure("a memory dump for another UID succeeded")
    if record(h.get_domain("after refused dumps")) is not None:
        raise Failure("a refused request left a record")

    m = dump_through_controller(h, a.memory_dump, "MemoryDumpCompleted", Failure)
    if m["Failed"] or m.get("FailureReason") or not m["StartTimestamp"] or not m["EndTimestamp"]:
        raise Failure(f"memory dump record {m}")
    d = h.get_domain("after the dump")
    if d["Status"]["Status"] != "Running":
        raise Failure(f"after the dump the domain is {d['Status']}")
    # Probe: the same file again is skipped (KubeVirt's FileName check).
    host_file = os.path.join(a.share, os.path.relpath(a.memory_dump, "/var/run/kubevirt"))
    before = os.stat(host_file)
    try:
        c.virtual_machine_memory_dump(vmimod.marshal(h.vmi()), a.memory_dump)
    except CmdError as e:
        raise Failure(f"memory dump of the same file again: {e}") from None
    time.sleep(1)
    after = os.stat(host_file)
    if record(h.get_domain("after the same dump again")) != m or \
            (after.st_mtime_ns, after.st_ino) != (before.st_mtime_ns, before.st_ino):
        raise Failure("the same file name was dumped again")
    out("MEMORY-DUMP " + json.dumps(m))

    if a.memory_dump_fail:
        m = dump_through_controller(h, a.memory_dump_fail, "MemoryDumpFailed", Failure)
        if not m["Failed"] or not m["FailureReason"].startswith("Domain memory dump failed: "):
            raise Failure(f"a dump into a full volume: {m}")
        d = h.get_domain("after the failed dump")
        if record(d) != m or d["Status"]["Status"] != "Running":
            raise Failure(f"GetDomain after the failed dump: {record(d)} {d['Status']}")
        out("MEMORY-DUMP-FAILED " + json.dumps(m))


def dump_through_controller(h, path, want_phase, Failure):
    """virt-controller reports the volume attached; virt-handler's
    controller takes it from there. Returns the domain's record."""
    vol, name = os.path.basename(os.path.dirname(path)), os.path.basename(path)
    if os.path.dirname(os.path.dirname(path)) != HOTPLUG:
        raise Failure(f"{path} is not in a memory dump volume ({HOTPLUG}/<volume>/<file>)")
    h.ctrl.dump_names[vol] = name
    n_calls = len(h.calls("VirtualMachineMemoryDump"))
    n_events = len(h.notify.events)

    def attached(obj):
        for vs in obj["status"].get("volumeStatus") or []:
            if vs["name"] == vol:
                vs.update(phase="AttachedToNode", reason="SuccessfulCreate",
                          message=f"Created hotplug attachment pod hp-volume-{vol}, for volume {vol}")
                vs.setdefault("hotplugVolume", {}).update(attachPodName=f"hp-volume-{vol}",
                                                          attachPodUID=f"hp-{vol}-uid")
                return
        raise Failure(f"the VMI has no volume {vol}")
    h.cluster.update(attached)
    v = h.wait_vmi(lambda v: any(vs["name"] == vol and vs.get("phase") == want_phase
                                 for vs in v["status"].get("volumeStatus") or []),
                   f"volume {vol} {want_phase}", 300)
    calls = h.calls("VirtualMachineMemoryDump")[n_calls:]
    if not calls or not all(c["ok"] for c in calls):
        raise Failure(f"the controller's VirtualMachineMemoryDump calls: {calls}")
    e, _ = h.wait_event(lambda e: e[0] == "MODIFIED" and (record(e[1]) or {}).get("FileName") == name
                        and (record(e[1])["Completed"] or record(e[1])["Failed"]),
                        f"memory dump {name} ended", 60, n_events)
    m = record(e[1])
    if record(h.get_domain(f"after dump {name}")) != m:
        raise Failure(f"GetDomain's record is not the notified {m}")
    vs = next(x for x in v["status"]["volumeStatus"] if x["name"] == vol)
    md = vs["memoryDumpVolume"]
    if md.get("targetFileName") != name or md.get("startTimestamp") != m["StartTimestamp"] or \
            md.get("endTimestamp") != m["EndTimestamp"]:
        raise Failure(f"volumeStatus of {vol}: {vs} for the record {m}")
    return m
