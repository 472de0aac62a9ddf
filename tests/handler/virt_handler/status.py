"""The parts of virt-handler's updateVMIStatus that read the domain
(KubeVirt v1.6.6 pkg/virt-handler/vm.go, pkg/network/setup/netstat.go):

- updateIsoSizeStatus: the size of each config-volume ISO in the pod
  (cloud-init, configMap, secret, downwardAPI, serviceAccount, sysprep),
  read through /proc/<launcher pid>/root, for a Running VMI;
- selinuxContext: "none" on a node without SELinux;
- updateGuestInfoFromDomain: status.guestOSInfo from Status.OSInfo when
  its Name is set and differs;
- updateVolumeStatusesFromDomain: each volume's target from the disks with
  a source (Disks[].Alias name -> Target.Device); hot-plugged volumes in
  MountedToPod/AttachedToNode/Bound/Pending with a target become Ready;
  memory dump volumes move MountedToPod -> MemoryDumpInProgress (with a
  target file name) and, once Spec.Metadata.KubeVirt.MemoryDump names
  that file, take its timestamps and become MemoryDumpCompleted or
  MemoryDumpFailed; a volume still in progress requeues in 1 s;
- updateFSFreezeStatus: Status.FSFreezeStatus.Status ("thawed" clears it);
- updateMachineType: status.machine from Spec.OS.Type.Machine;
- updateMemoryInfo: status.memory.guestCurrent from Spec.CurrentMemory;
- netstat: status.interfaces from Spec.Devices.Interfaces (alias name, MAC,
  queues from Driver.Queues, link state) and SR-IOV host devices
  (alias `sriov-<name>`), joined by MAC with the agent's Status.Interfaces
  (link-local IPv6 dropped for masquerade), the pod network's first (kept
  as a bare entry when the domain lost it), then virt-controller's
  `multus-status` entries merged in (ifacesStatusFromMultus) and each
  named entry's podInterfaceName restored (restorePodIfaceNames);
- conditions: LiveMigratable/StorageLiveMigratable and migrationMethod,
  AgentConnected from the org.qemu.guest_agent.0 channel's
  Target.State == "connected" (then GetGuestInfo on every sync and
  AgentVersionNotSupported from its supportedCommands), Paused from a
  Paused domain (User: PausedByUser, IOError: PausedIOError),
  AccessCredentialsSynchronized from Spec.Metadata.KubeVirt.AccessCredential.
The pod interface cache virt-handler's phase 1 writes is not read (phase 1
runs as another process here): interfaces carry no pod IPs of their own.
"""

import ipaddress
import os

from . import netsetup
from .cmdclient import CmdError
from .vmi import condition, now_rfc3339

ISO_PATHS = {
    "cloudInitNoCloud": "/var/run/kubevirt-ephemeral-disks/cloud-init-data/{ns}/{name}/noCloud.iso",
    "cloudInitConfigDrive": "/var/run/kubevirt-ephemeral-disks/cloud-init-data/{ns}/{name}/configdrive.iso",
    "configMap": "/var/run/kubevirt-private/config-map-disks/{vol}.iso",
    "secret": "/var/run/kubevirt-private/secret-disks/{vol}.iso",
    "downwardAPI": "/var/run/kubevirt-private/downwardapi-disks/{vol}.iso",
    "serviceAccount": "/var/run/kubevirt-private/service-account-disk/service-account.iso",
    "sysprep": "/var/run/kubevirt-private/sysprep-disks/{vol}.iso",
}


def _stat_in_root(root, path):
    """lstat of `path` resolved inside `root` (safepath)."""
    from .notify import open_in_root
    d, name = os.path.split(path)
    fd = open_in_root(root, d)
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def iso_sizes(ctrl, vmi):
    st = vmi["status"]
    if st.get("phase") != "Running":
        return
    if not any(n == st.get("nodeName") for n in (st.get("activePods") or {}).values()):
        return
    m = vmi["metadata"]
    vols = {v["name"]: v for v in vmi["spec"].get("volumes") or []}
    for disk in ((vmi["spec"].get("domain") or {}).get("devices") or {}).get("disks") or []:
        vol = vols.get(disk["name"])
        if vol is None:
            continue
        tmpl = next((p for k, p in ISO_PATHS.items() if k in vol), None)
        if tmpl is None:
            continue
        try:
            root = f"/proc/{ctrl.clients.detect_pid(vmi)}/root"
            size = _stat_in_root(root, tmpl.format(ns=m["namespace"], name=m["name"], vol=vol["name"])).st_size
        except (OSError, CmdError):
            continue
        for vs in st.get("volumeStatus") or []:
            if vs["name"] == vol["name"]:
                vs["size"] = size


def volumes(ctrl, vmi, domain):
    st = vmi["status"]
    if not st.get("volumeStatus"):
        return
    targets = {}
    for disk in (((domain or {}).get("Spec") or {}).get("Devices") or {}).get("Disks") or []:
        src = disk.get("Source") or {}
        if src.get("File") or src.get("Dev"):
            targets[(disk.get("Alias") or {}).get("Name", "")] = (disk.get("Target") or {}).get("Device", "")
    in_spec = {v["name"] for v in vmi["spec"].get("volumes") or []}
    refresh = False
    out = []
    for vs in st["volumeStatus"]:
        vs = dict(vs)
        vs["target"] = targets.get(vs["name"], "")
        if vs.get("hotplugVolume") is not None:
            if vs["target"] == "":
                refresh = True
                # The tests mount hot-plug volumes themselves: mounted.
                if vs["name"] in in_spec and vs.get("phase") in ("Bound", "Pending", "AttachedToNode"):
                    vs.update(phase="MountedToPod", reason="VolumeMountedToPod",
                              message=f"Volume {vs['name']} has been mounted in virt-launcher pod")
            else:
                vs.update(phase="Ready", reason="VolumeReady",
                          message=f"Successfully attach hotplugged volume {vs['name']} to VM")
        if vs.get("memoryDumpVolume") is not None:
            refresh |= memory_dump(ctrl, vmi, vs, domain)
        out.append(vs)
    st["volumeStatus"] = sorted(out, key=lambda v: v["name"])
    if refresh:
        ctrl.queue.add_after(1)


def memory_dump(ctrl, vmi, vs, domain):
    """updateMemoryDumpInfo; True when it needs a refresh."""
    md = vs["memoryDumpVolume"]
    if vs.get("phase") == "MountedToPod":
        vs.update(phase="MemoryDumpInProgress", reason="VolumeMountedToPod",
                  message=f"Memory dump Volume {vs['name']} is attached, getting memory dump")
        md["targetFileName"] = ctrl.dump_target_file(vmi, vs["name"])
        return True
    if vs.get("phase") != "MemoryDumpInProgress":
        return False
    rec = ((((domain or {}).get("Spec") or {}).get("Metadata") or {}).get("KubeVirt") or {}).get("MemoryDump")
    if rec is None or rec.get("FileName") != md.get("targetFileName"):
        return False
    if rec.get("StartTimestamp"):
        md["startTimestamp"] = rec["StartTimestamp"]
    if rec.get("EndTimestamp") and rec.get("Failed"):
        vs.update(phase="MemoryDumpFailed",
                  message=f"Memory dump to pvc {vs['name']} failed: {rec.get('FailureReason', '')}")
        md["endTimestamp"] = rec["EndTimestamp"]
    elif rec.get("Completed"):
        vs.update(phase="MemoryDumpCompleted", reason="VolumeReady",
                  message=f"Memory dump to Volume {vs['name']} has completed successfully")
        md["endTimestamp"] = rec.get("EndTimestamp")
    return True


def interfaces(vmi, domain):
    if domain is None:
        return
    spec_ifaces = {i["name"]: i for i in ((vmi["spec"].get("domain") or {}).get("devices") or {}).get("interfaces") or []}
    dev = (domain.get("Spec") or {}).get("Devices") or {}
    out = []
    for ifc in dev.get("Interfaces") or []:
        queues = ((ifc.get("Driver") or {}).get("Queues"))
        out.append({"mac": (ifc.get("MAC") or {}).get("MAC", ""),
                    "name": (ifc.get("Alias") or {}).get("Name", ""), "infoSource": "domain",
                    "queueCount": queues if queues is not None else 1,
                    "linkState": (ifc.get("LinkState") or {}).get("State", "up")})
    for hd in dev.get("HostDevices") or []:
        alias = (hd.get("Alias") or {}).get("Name", "")
        if hd.get("Alias") is not None and alias.startswith("sriov-"):
            name = alias[len("sriov-"):]
            out.append({"mac": (spec_ifaces.get(name) or {}).get("macAddress", ""), "name": name,
                        "infoSource": "domain"})
    for ga in (domain.get("Status") or {}).get("Interfaces") or []:
        cur = next((i for i in out if i.get("mac") and i["mac"].lower() == (ga.get("Mac") or "").lower()), None)
        ips = list(ga.get("IPs") or [])
        if cur is not None:
            if "masquerade" in (spec_ifaces.get(cur["name"]) or {}):
                ips = [ip for ip in ips if not _link_local(ip)]
            cur["interfaceName"] = ga.get("InterfaceName", "")
            v4 = [ip for ip in ips if _family(ip) == 4]
            v6 = [ip for ip in ips if _family(ip) == 6]
            cur["ipAddresses"] = v4 + v6
            if cur["ipAddresses"]:
                cur["ipAddress"] = cur["ipAddresses"][0]
            if ga.get("InterfaceName"):
                cur["infoSource"] = "domain, guest-agent"
        else:
            out.append({"ipAddress": ga.get("Ip", ""), "mac": ga.get("Mac", ""), "ipAddresses": ips,
                        "interfaceName": ga.get("InterfaceName", ""), "infoSource": "guest-agent"})
    prev = vmi["status"].get("interfaces") or []
    pod = next((n["name"] for n in vmi["spec"].get("networks") or [] if "pod" in n), None)
    if pod:
        # restorePrimaryIfaceStatus, movePrimaryIfaceStatusToFront
        if not any(i.get("name") == pod for i in out) and any(i.get("name") == pod for i in prev):
            out.insert(0, {"name": pod})
        out.sort(key=lambda i: i.get("name") != pod)
    # ifacesStatusFromMultus: virt-controller's multus-status entries (from
    # the pod's network-status annotation) kept for interfaces in the spec,
    # or the source added to the domain's entry.
    for m in prev:
        if not m.get("name") or netsetup.MULTUS not in netsetup.sources(m.get("infoSource", "")):
            continue
        cur = next((i for i in out if i.get("name") == m["name"]), None)
        if cur is None and m["name"] in spec_ifaces:
            out.append({"name": m["name"], "infoSource": netsetup.MULTUS})
        elif cur is not None:
            cur["infoSource"] = netsetup.add_source(cur.get("infoSource", ""), netsetup.MULTUS)
    # restorePodIfaceNames: podInterfaceName as virt-controller last reported it.
    named = {i["name"]: i for i in prev if i.get("name")}
    for i in out:
        if i.get("name"):
            i.pop("podInterfaceName", None)
            if (named.get(i["name"]) or {}).get("podInterfaceName"):
                i["podInterfaceName"] = named[i["name"]]["podInterfaceName"]
    vmi["status"]["interfaces"] = out


def _family(ip):
    try:
        return ipaddress.ip_address(ip).version
    except ValueError:
        return 0


def _link_local(ip):
    try:
        return ipaddress.ip_address(ip).is_link_local
    except ValueError:
        return True


def from_domain(ctrl, vmi, domain):
    """updateVMIStatusFromDomain."""
    st = vmi["status"]
    iso_sizes(ctrl, vmi)
    st["selinuxContext"] = "none" if not os.path.exists("/sys/fs/selinux/enforce") else st.get("selinuxContext", "")
    osinfo = ((domain or {}).get("Status") or {}).get("OSInfo") or {}
    if domain is not None and osinfo.get("Name") and (st.get("guestOSInfo") or {}).get("name") != osinfo["Name"]:
        st["guestOSInfo"] = {k: v for k, v in {
            "name": osinfo.get("Name"), "kernelRelease": osinfo.get("KernelRelease"),
            "version": osinfo.get("Version"), "prettyName": osinfo.get("PrettyName"),
            "versionId": osinfo.get("VersionId"), "kernelVersion": osinfo.get("KernelVersion"),
            "machine": osinfo.get("Machine"), "id": osinfo.get("Id")}.items() if v}
    volumes(ctrl, vmi, domain)
    if domain is not None:
        fs = ((domain.get("Status") or {}).get("FSFreezeStatus") or {}).get("Status", "")
        if fs:
            st["fsFreezeStatus"] = "" if fs == "thawed" else fs
        machine = ((domain.get("Spec") or {}).get("OS") or {}).get("Type", {}).get("Machine", "")
        if machine:
            st["machine"] = {"type": machine}
        cur = (domain.get("Spec") or {}).get("CurrentMemory")
        if cur is not None:
            from .controller import libvirt_quantity
            b = libvirt_quantity(cur.get("Value", 0), cur.get("Unit", ""))
            st.setdefault("memory", {})["guestCurrent"] = _quantity(b) if b is not None else None
    interfaces(vmi, domain)


def _quantity(b):
    """A byte count as a BinarySI resource.Quantity string."""
    for suf, f in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if b and b % f == 0:
            return f"{b // f}{suf}"
    return str(b)


def _set_cond(vmi, c):
    vmi["status"]["conditions"] = [x for x in vmi["status"].get("conditions") or [] if x["type"] != c["type"]]
    vmi["status"]["conditions"].append(c)


def _has(vmi, ctype):
    return any(c["type"] == ctype for c in vmi["status"].get("conditions") or [])


def conditions(ctrl, vmi, domain):
    """updateVMIConditions."""
    from .controller import agent_supported, agent_version_supported
    st = vmi["status"]
    # access credentials
    ac = (((domain or {}).get("Spec") or {}).get("Metadata") or {}).get("KubeVirt", {}).get("AccessCredential")
    if domain is not None and ac is not None:
        status = "True" if ac.get("Succeeded") else "False"
        cur = next((c for c in st.get("conditions") or [] if c["type"] == "AccessCredentialsSynchronized"), None)
        if cur is None or cur["status"] != status or cur.get("message", "") != ac.get("Message", ""):
            _set_cond(vmi, condition("AccessCredentialsSynchronized", status, message=ac.get("Message", ""),
                                     transition=now_rfc3339()))
    # live migration
    block, why = _volumes_for_migration(vmi)
    net = _net_migratable(vmi)
    if net:
        live = condition("LiveMigratable", "False", "InterfaceNotLiveMigratable", net)
    elif why:
        live = condition("LiveMigratable", "False", "DisksNotLiveMigratable", why)
    else:
        live = condition("LiveMigratable", "True")
    if not _has(vmi, "LiveMigratable") or next(c for c in st["conditions"] if c["type"] == "LiveMigratable") != live:
        _set_cond(vmi, live)
    st["migrationMethod"] = "BlockMigration" if block else "LiveMigration"
    storage = condition("StorageLiveMigratable", "False", "NotMigratable",
                        f"InterfaceNotLiveMigratable: {net}") if net else condition("StorageLiveMigratable", "True")
    cur = next((c for c in st.get("conditions") or [] if c["type"] == "StorageLiveMigratable"), None)
    if cur is None or (cur["status"], cur.get("reason"), cur.get("message")) != \
            (storage["status"], storage.get("reason"), storage.get("message")):
        _set_cond(vmi, storage)
    # guest agent
    connected = any((ch.get("Target") or {}).get("Name") == "org.qemu.guest_agent.0"
                    and (ch.get("Target") or {}).get("State") == "connected"
                    for ch in (((domain or {}).get("Spec") or {}).get("Devices") or {}).get("Channels") or [])
    if connected and not _has(vmi, "AgentConnected"):
        st.setdefault("conditions", []).append(condition("AgentConnected", "True", probe=now_rfc3339()))
    elif not connected:
        st["conditions"] = [c for c in st.get("conditions") or [] if c["type"] != "AgentConnected"]
    if _has(vmi, "AgentConnected"):
        info = ctrl.clients.get(vmi).get_guest_info()
        cmds = info.get("supportedCommands") or []
        if cmds:
            ok, reason = agent_supported(vmi, cmds)
        else:
            ok = agent_version_supported(info.get("guestAgentVersion", ""))
            reason = f"Guest agent version '{info.get('guestAgentVersion', '')}' is not supported"
        ctrl.last_guest_info = info
        if not ok and not _has(vmi, "AgentVersionNotSupported"):
            st["conditions"].append(condition("AgentVersionNotSupported", "True", reason, probe=now_rfc3339()))
        elif ok:
            st["conditions"] = [c for c in st["conditions"] if c["type"] != "AgentVersionNotSupported"]
    # paused
    dst = (domain or {}).get("Status") or {}
    if domain is not None and dst.get("Status") == "Paused":
        reasons = {"User": ("PausedByUser", "VMI was paused by user"),
                   "IOError": ("PausedIOError", "VMI was paused, low-level IO error detected")}
        if not _has(vmi, "Paused") and dst.get("Reason") in reasons:
            r, msg = reasons[dst["Reason"]]
            now = now_rfc3339()
            st.setdefault("conditions", []).append(condition("Paused", "True", r, msg, now, now))
    elif _has(vmi, "Paused"):
        st["conditions"] = [c for c in st["conditions"] if c["type"] != "Paused"]


def _volumes_for_migration(vmi):
    """checkVolumesForMigration: (block migration, reason it cannot migrate)."""
    vs = {v["name"]: v for v in vmi["status"].get("volumeStatus") or []}
    block = False
    readonly = {d["name"] for d in ((vmi["spec"].get("domain") or {}).get("devices") or {}).get("disks") or []
                if "cdrom" in d and (d["cdrom"] or {}).get("readonly", True) is not False}
    for v in vmi["spec"].get("volumes") or []:
        if "persistentVolumeClaim" in v or "dataVolume" in v:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName") or (v.get("dataVolume") or {}).get("name")
            info = (vs.get(v["name"]) or {}).get("persistentVolumeClaimInfo")
            if info is None:
                return True, (f"cannot migrate VMI: Unable to determine if PVC {claim} is shared, live migration "
                              "requires that all PVCs must be shared (using ReadWriteMany access mode)")
            if "ReadWriteMany" not in (info.get("accessModes") or []):
                return True, (f"cannot migrate VMI: PVC {claim} is not shared, live migration requires that all "
                              "PVCs must be shared (using ReadWriteMany access mode)")
        elif "hostDisk" in v:
            if not (v["hostDisk"] or {}).get("shared"):
                return True, "cannot migrate VMI with non-shared HostDisk"
        elif v["name"] not in readonly:
            block = True
    return block, None


def _net_migratable(vmi):
    """VerifyVMIMigratable: the reason the pod network binding cannot
    migrate, or None."""
    ifaces = ((vmi["spec"].get("domain") or {}).get("devices") or {}).get("interfaces") or []
    if not ifaces:
        return None
    pod = next((n["name"] for n in vmi["spec"].get("networks") or [] if "pod" in n), None)
    ifc = next((i for i in ifaces if i["name"] == pod), None)
    if ifc is not None and "bridge" in ifc and \
            "kubevirt.io/allow-pod-bridge-network-live-migration" in (vmi["metadata"].get("annotations") or {}):
        return None
    if ifc is not None and "masquerade" in ifc:
        return None
    return ("cannot migrate VMI which does not use masquerade, bridge with "
            "kubevirt.io/allow-pod-bridge-network-live-migration VM annotation or a migratable plugin "
            "to connect to the pod network")
