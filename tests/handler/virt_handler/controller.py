"""virt-handler's VM controller for one VMI (KubeVirt v1.6.6
pkg/virt-handler/vm.go, controller.go), run as virt-handler runs it: one
work queue key, processed by one worker on every VMI change, every domain
change, and when a step asks to be requeued (AddAfter), with the rate-limited
backoff on errors.

execute(): the VMI from the cluster (or a reference when it is gone), the
domain from the informer (one with a deletionTimestamp does not exist), a
domain whose Spec.Metadata.KubeVirt.UID is not the VMI's is a stale one, a
domain that migrated away (Shutoff/Migrated) is deleted as an orphan, a
migration in progress (the VMI's or the domain's migration started and not
ended, or the domain paused for Migration/StartingUp/Postcopy) leaves the
key alone, and so does a VMI owned by another node (isVMIOwnedByNode).

sync(): domainAlive = exists and not Shutoff/Crashed/""; shouldShutdown on
the graceful-shutdown trigger (GracePeriod.MarkedForGracefulShutdown) of a
Running VMI, on a deleted VMI or a VMI with a deletionTimestamp while the
domain is alive; shouldDelete when it is not, for a final VMI, or for a dead
domain of a VMI not final; shouldUpdate when the VMI's phase is the phase
calculateVmPhaseForStatusReason derives from the domain. Then, in vm.go's
order: processVmShutdown (helperVmShutdown: GetVerifiedLauncherClient; with
the domain's DeletionGracePeriodSeconds != 0, hasGracePeriodExpired counts
the VMI's terminationGracePeriodSeconds, else the domain's, from the
domain's recorded DeletionTimestamp, in whole seconds; not expired:
ShutdownVirtualMachine unless the domain is ShuttingDown, requeued after
min(time left, 5 s) -- 5 s or the grace period when nothing is recorded
yet; expired: KillVirtualMachine), deleteVM (DeleteVirtualMachine through a
verified client when one can be had, then the cleanup that closes the client
and forgets the domain), processVmUpdate (IsLauncherClientUnresponsive,
then GetLauncherClient, the starting-VMI checks, SyncVirtualMachine with the
options virt-handler fills; a running VMI gets its memory dumps asked for).
Finally updateVMIStatus writes what it derives from the domain back to the
cluster (see _update_status).

Not reproduced, as nothing in these tests has them: hotplug of
volumes and SR-IOV interfaces (the tests mount hot-plug volumes themselves),
container-disk and kernel-boot checksums, vCPU/memory hotplug, realtime and
dedicated-CPU housekeeping, device ownership, the IOError retry delay,
downward metrics, the periodic resync (300 s) and the unresponsive-socket
watchdog (30 s).
"""

import copy
import re
import subprocess
import threading
import time

from .cmdclient import CmdError
from .notify import check_domain
from .vmi import condition, marshal, now_rfc3339
from .gotypes import parse_time
from .stubs import pb

SHUTDOWN_RESEND = 5
REQUIRED_AGENT_COMMANDS = ["guest-ping", "guest-get-time", "guest-info", "guest-shutdown",
                           "guest-network-get-interfaces", "guest-get-fsinfo",
                           "guest-get-host-name", "guest-get-users", "guest-get-timezone",
                           "guest-get-osinfo"]
_UNITS = {"b": 1, "bytes": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "k": 1 << 10,
          "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30, "GiB": 1 << 30,
          "T": 1 << 40, "TiB": 1 << 40}


class WorkQueue:
    """A rate-limited work queue holding the one key (client-go's
    workqueue with the default controller rate limiter's per-item
    exponential backoff, 5 ms doubling up to 1000 s)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.due = None
        self.failures = 0
        self.stopped = False

    def add_after(self, delay):
        with self.cond:
            t = time.time() + max(delay, 0)
            if self.due is None or t < self.due:
                self.due = t
            self.cond.notify_all()

    def add(self):
        self.add_after(0)

    def add_rate_limited(self):
        d = min(0.005 * (2 ** self.failures), 1000)
        self.failures += 1
        self.add_after(d)

    def forget(self):
        self.failures = 0

    def get(self):
        """Blocks until the key is due; False once stopped."""
        with self.cond:
            while not self.stopped:
                now = time.time()
                if self.due is not None and self.due <= now:
                    self.due = None
                    return True
                self.cond.wait(None if self.due is None else self.due - now)
            return False

    def stop(self):
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


def _phase_final(p):
    return p in ("Succeeded", "Failed")


def _cond(vmi, ctype):
    return next((c for c in vmi["status"].get("conditions") or [] if c["type"] == ctype), None)


def _remove_cond(vmi, ctype):
    vmi["status"]["conditions"] = [c for c in vmi["status"].get("conditions") or [] if c["type"] != ctype]


class Controller:
    """The controller. `options` holds the cluster configuration that goes
    into VirtualMachineOptions (`expand_disks`)."""

    def __init__(self, cluster, informer, clients, expand_disks=False, violation=print,
                 busy_after_shutoff=0, node=None, image_volume=False, netpod=None):
        self.cluster = cluster
        # handleRunningVMI's network setup of a running VMI (netsetup.py).
        self.netpod = netpod
        # This virt-handler's node: a VMI owned by another is left alone.
        self.node = node
        # The cluster's ImageVolume feature gate: the pod has image volumes and
        # no container-disk-binary init container, so the container disk
        # mounter has nothing to bind-mount (mount.go's needsBindMountFunc).
        self.image_volume = image_volume
        # A virt-handler busy with other VMIs: its worker reaches the
        # stopped domain only this many seconds after the notification.
        self.busy_after_shutoff = busy_after_shutoff
        self.informer = informer
        self.clients = clients
        self.expand_disks = expand_disks
        self.violation = violation
        self.queue = WorkQueue()
        self.recorded = []  # recorder.Event(vmi, type, reason, message)
        self.errors = []  # sync errors, in order
        self.key = None
        self.thread = None
        self.last_guest_info = None
        # Memory dump target file per volume; virt-handler names it
        # <vmi>-<volume>-<local time YYYYMMDD-HHMMSS>.memory.dump.
        self.dump_names = {}
        cluster.watch(lambda _obj: self.queue.add())
        informer.relist = self.relist

    # -- running ----------------------------------------------------------
    def start(self):
        obj = self.cluster.get()
        self.key = f'{obj["metadata"]["namespace"]}/{obj["metadata"]["name"]}'
        self.uid = obj["metadata"]["uid"]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.queue.add()

    def stop(self):
        self.queue.stop()
        if self.thread:
            self.thread.join(30)

    def _run(self):
        while self.queue.get():
            if self.busy_after_shutoff:
                d = self.informer.get(self.key)
                if d is not None and (d.get("Status") or {}).get("Status") == "Shutoff":
                    time.sleep(self.busy_after_shutoff)
                    self.busy_after_shutoff = 0
            try:
                self.execute()
            except Exception as e:  # noqa: BLE001 - any error requeues, as Execute does
                import traceback
                self.errors.append((time.time(), f"{type(e).__name__}: {e}"
                                    + ("" if isinstance(e, CmdError) else "\n" + traceback.format_exc())))
                self.queue.add_rate_limited()
            else:
                self.queue.forget()

    def record(self, etype, reason, message):
        self.recorded.append({"time": time.time(), "type": etype, "reason": reason, "message": message})

    def relist(self):
        """The domain informer's List after a watch error: GetDomain."""
        obj = self.cluster.get()
        if obj is None:
            return
        for _ in range(60):
            try:
                c = self.clients.get(obj)
                d, exists = c.get_domain()
            except (CmdError, ValueError):
                time.sleep(1)
                continue
            m = obj["metadata"]
            if exists:
                for p in check_domain(d, m["namespace"], m["name"], m["uid"]):
                    self.violation(f"GetDomain (relist): {p}")
            self.informer.replace([d] if exists else [])
            return

    # -- execute / sync -------------------------------------------------------
    def _domain(self):
        d = self.informer.get(self.key)
        if d is None:
            return None, False, ""
        uid = ((d.get("Spec") or {}).get("Metadata") or {}).get("KubeVirt", {}).get("UID", "")
        if (d.get("ObjectMeta") or {}).get("deletionTimestamp"):
            return None, False, uid
        return d, True, uid

    def execute(self):
        obj = self.cluster.get()
        exists = obj is not None
        if not exists:
            ns, name = self.key.split("/", 1)
            obj = {"metadata": {"namespace": ns, "name": name, "uid": self.uid}, "spec": {},
                   "status": {}}
        domain, dexists, cached_uid = self._domain()
        if not exists and cached_uid:
            obj["metadata"]["uid"] = cached_uid
        if exists and dexists and cached_uid != obj["metadata"]["uid"]:
            self.violation(f"domain UID {cached_uid!r} is not the VMI's {obj['metadata']['uid']!r}: "
                           "virt-handler would clean it up as a stale domain")
            self.queue.add_after(1)
            return
        if dexists and domain["Status"].get("Status") == "Shutoff" \
                and domain["Status"].get("Reason") == "Migrated":
            # domainMigrated: the domain left for another node, an orphan.
            self.delete_vm(obj)
            return
        if obj["metadata"].get("deletionTimestamp") is None and self._migration_in_progress(obj, domain):
            return
        if exists and self.node and obj["status"].get("nodeName") != self.node:
            return  # isVMIOwnedByNode: the VMI migrated to another node
        self.sync(obj, exists, domain, dexists)

    @staticmethod
    def _migration_in_progress(vmi, domain):
        """isMigrationInProgress: the VMI's migration started and not ended,
        the domain's record started and not ended, or the domain paused
        for a migration."""
        ms = ((vmi or {}).get("status") or {}).get("migrationState") or {}
        if ms.get("startTimestamp") and not ms.get("endTimestamp"):
            return True
        if domain is None:
            return False
        mig = ((domain.get("Spec") or {}).get("Metadata") or {}).get("KubeVirt", {}).get("Migration")
        if mig and mig.get("StartTimestamp") and not mig.get("EndTimestamp"):
            return True
        st = domain["Status"]
        return st.get("Status") == "Paused" and st.get("Reason") in ("Migration", "StartingUp", "Postcopy")

    def sync(self, vmi, vmi_exists, domain, domain_exists):
        old_status = copy.deepcopy(vmi["status"])
        phase = vmi["status"].get("phase", "")
        final = _phase_final(phase)
        alive = domain_exists and domain["Status"].get("Status") not in ("Shutoff", "Crashed", "")
        should_shutdown = should_delete = should_update = False
        grace = ((domain or {}).get("Spec") or {}).get("Metadata", {}).get("KubeVirt", {}).get("GracePeriod")
        if grace and grace.get("MarkedForGracefulShutdown") is True and phase == "Running":
            should_shutdown, should_delete = (True, False) if alive else (False, True)
        if not vmi_exists:
            should_shutdown, should_delete = (should_shutdown or alive), (should_delete or not alive)
        if vmi_exists and vmi["metadata"].get("deletionTimestamp"):
            if alive:
                should_shutdown = True
            else:
                should_delete = True
        if vmi_exists and final:
            should_delete = True
        if not alive and domain_exists and not final:
            should_delete = True
        if vmi_exists and not final:
            new_phase = self.phase_for(domain, vmi)
            if new_phase is not None and phase == new_phase:
                should_update = True
        err = None
        try:
            if should_shutdown:
                self.process_shutdown(vmi, domain)
            elif should_delete:
                self.delete_vm(vmi)
            elif should_update:
                self.process_update(vmi, domain)
        except CmdError as e:
            err = e
        if err is not None and not final:
            self.record("Warning", "SyncFailed", str(err))
        if vmi_exists:
            self._update_status(old_status, vmi, domain, err)
        if err is not None:
            raise err

    # -- shutdown / delete ----------------------------------------------------
    def process_shutdown(self, vmi, domain):
        client = self.clients.get_verified(vmi)
        grace = domain["Spec"]["Metadata"]["KubeVirt"].get("GracePeriod") if domain else None
        if grace and grace.get("DeletionGracePeriodSeconds", 0) != 0:
            expired, left = self.grace_period_expired(vmi["spec"].get("terminationGracePeriodSeconds"), domain)
            if not expired:
                if domain["Status"]["Status"] != "ShuttingDown":
                    self.shutdown_vmi(vmi, client, left)
                return
        self._ignore_disconnect(lambda: client.kill_virtual_machine(marshal(vmi)))
        self.record("Normal", "Deleted", "VirtualMachineInstance stopping")

    @staticmethod
    def grace_period_expired(tgps, domain, now=None):
        """hasGracePeriodExpired: (expired, seconds left or -1 when the
        grace period has not started)."""
        grace = domain["Spec"]["Metadata"]["KubeVirt"].get("GracePeriod") if domain else None
        period = tgps if tgps is not None else (grace or {}).get("DeletionGracePeriodSeconds", 0)
        if period == 0:
            return True, 0
        ts = (grace or {}).get("DeletionTimestamp")
        if not ts:
            return False, -1
        start = int(parse_time(ts).timestamp())
        diff = int(now if now is not None else time.time()) - start
        if diff >= period:
            return True, 0
        return False, max(period - diff, 1)

    def shutdown_vmi(self, vmi, client, left):
        self._ignore_disconnect(lambda: client.shutdown_virtual_machine(marshal(vmi)))
        if left == -1:
            left = SHUTDOWN_RESEND
            tgps = vmi["spec"].get("terminationGracePeriodSeconds")
            if tgps is not None and tgps < left:
                left = tgps
        self.queue.add_after(min(left, SHUTDOWN_RESEND))
        self.record("Normal", "ShuttingDown", "Signaled Graceful Shutdown")

    @staticmethod
    def _ignore_disconnect(fn):
        try:
            fn()
        except CmdError as e:
            if not e.disconnected:
                raise

    def delete_vm(self, vmi):
        try:
            client = self.clients.get_verified(vmi)
        except CmdError:
            client = None  # the pod is gone: so is the VM
        if client is not None:
            self.record("Normal", "Deleted", "Signaled Deletion")
            self._ignore_disconnect(lambda: client.delete_domain(marshal(vmi)))
        self.clients.close(vmi["metadata"]["uid"])
        self.informer.delete(self.key)

    # -- update ---------------------------------------------------------------
    def process_update(self, vmi, domain):
        unresponsive, initialized = self.clients.is_unresponsive(vmi)
        if not initialized:
            self.queue.add_after(1)
            return
        if unresponsive:
            raise CmdError("Can not update a VirtualMachineInstance with unresponsive command server.")
        try:
            client = self.clients.get(vmi)
        except CmdError as e:
            raise CmdError(f"unable to create virt-launcher client connection: {e}") from None
        phase = vmi["status"].get("phase")
        tolerated = None
        if phase == "Running":
            self.get_memory_dumps(vmi, client)
            try:
                pid = self.clients.detect_pid(vmi)
            except (OSError, CmdError) as e:
                raise CmdError(f"failed to detect isolation for launcher pod: {e}") from None
            tolerated = self.setup_network(vmi, pid)
        elif not _phase_final(phase) and not self.starting_vmi_ready(vmi):
            self.queue.add_after(1)
            return
        client.sync_virtual_machine(marshal(vmi), self.options(vmi))
        if domain is None:
            self.record("Normal", "Created", "VirtualMachineInstance defined.")
        if tolerated is not None:
            # After the sync: errors.NewAggregate(errorTolerantFeaturesError).
            raise CmdError(tolerated)

    def setup_network(self, vmi, pid):
        """handleRunningVMI: setupNetwork for FilterNetsForLiveUpdate's
        networks; a failure is a NicHotplug warning and returned: the sync
        goes on, and the update fails after it (errorTolerantFeaturesError)."""
        from . import netsetup
        if self.netpod is None:
            return None
        try:
            self.netpod.setup(vmi, netsetup.filter_nets_for_live_update(vmi), pid)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            self.record("Warning", "NicHotplug", str(e))
            return str(e)
        return None

    def starting_vmi_ready(self, vmi):
        """handleStartingVMI's wait for container disks: each containerDisk
        volume's image is in the pod (the harness mounts it where
        virt-handler's mounter would); with the ImageVolume gate, ready at once
        (ContainerDisksReady: no bind mount needed; the launcher links the
        disks itself)."""
        import os
        from .notify import open_in_root
        n = sum(1 for v in vmi["spec"].get("volumes") or [] if v.get("containerDisk"))
        if n == 0 or self.image_volume:
            return True
        try:
            fd = open_in_root(f"/proc/{self.clients.detect_pid(vmi)}/root",
                              "/var/run/kubevirt/container-disks")
        except OSError:
            return False
        try:
            return all(os.path.lexists(f"/proc/self/fd/{fd}/disk_{i}.img") for i in range(n))
        finally:
            os.close(fd)

    def options(self, vmi):
        """syncVirtualMachine's VirtualMachineOptions: the cluster's default
        SMBIOS, balloon period 10 s, the preallocated claims from
        volumeStatus, the node's NUMA topology, empty DisksInfo, the
        cluster config (Bochs display for EFI, ExpandDisks as configured)
        and `tap` for masquerade/bridge interfaces."""
        from .clients import node_topology
        pre = [vs["name"] for vs in vmi["status"].get("volumeStatus") or []
               if (vs.get("persistentVolumeClaimInfo") or {}).get("preallocated")]
        att = {i["name"]: "tap" for i in (vmi["spec"].get("domain") or {}).get("devices", {}).get("interfaces") or []
               if "masquerade" in i or "bridge" in i or "macvtap" in i}
        return pb.cmd.VirtualMachineOptions(
            VirtualMachineSMBios=pb.cmd.SMBios(family="KubeVirt", manufacturer="KubeVirt", product="None"),
            MemBalloonStatsPeriod=10, PreallocatedVolumes=pre, topology=node_topology(),
            ExpandDisksEnabled=self.expand_disks,
            clusterConfig=pb.cmd.ClusterConfig(ExpandDisksEnabled=self.expand_disks,
                                               BochsDisplayForEFIGuests=True),
            interfaceDomainAttachment=att)

    def get_memory_dumps(self, vmi, client):
        for vs in vmi["status"].get("volumeStatus") or []:
            md = vs.get("memoryDumpVolume")
            if md is None or vs.get("phase") != "MemoryDumpInProgress":
                continue
            path = f"/var/run/kubevirt/hotplug-disks/{vs['name']}/{md.get('targetFileName', '')}"
            try:
                client.virtual_machine_memory_dump(marshal(vmi), path)
            except CmdError as e:
                raise CmdError(f"failed to getting memory dump: {e}") from None

    def dump_target_file(self, vmi, volume):
        """dumpTargetFile, or the name a scenario fixed for `volume`."""
        if volume in self.dump_names:
            return self.dump_names[volume]
        return f'{vmi["metadata"]["name"]}-{volume}-{time.strftime("%Y%m%d-%H%M%S")}.memory.dump'

    # -- phase ----------------------------------------------------------------
    def phase_for(self, domain, vmi):
        """calculateVmPhaseForStatusReason; None when undecided (requeued)."""
        phase = vmi["status"].get("phase", "")
        if domain is None:
            if phase == "Scheduled":
                unresponsive, initialized = self.clients.is_unresponsive(vmi)
                if not initialized:
                    self.queue.add_after(1)
                    return phase
                return "Failed" if unresponsive else "Scheduled"
            if phase != "Running" and not _phase_final(phase):
                return "Scheduled"
            if not _phase_final(phase):
                return "Failed"
            return phase
        st, reason = domain["Status"].get("Status"), domain["Status"].get("Reason")
        if st in ("Shutoff", "Crashed"):
            if reason in ("Crashed", "Panicked"):
                return "Failed"
            if reason == "Destroyed":
                return "Failed" if self._acpi_enabled(vmi, domain) else "Succeeded"
            if reason in ("Shutdown", "Saved", "FromSnapshot"):
                return "Succeeded"
            return phase
        if st == "Paused":
            return "Failed" if reason == "PostcopyFailed" else "Running"
        if st in ("Running", "Blocked", "PMSuspended"):
            return "Running"
        return phase

    @staticmethod
    def _acpi_enabled(vmi, domain):
        tgps = vmi["spec"].get("terminationGracePeriodSeconds")
        grace = domain["Spec"]["Metadata"]["KubeVirt"].get("GracePeriod")
        has_grace = tgps is None or tgps != 0
        dom_grace = grace is not None and grace.get("DeletionGracePeriodSeconds", 0) != 0
        return (has_grace or (tgps is None and dom_grace)) and \
            (domain["Spec"].get("Features") or {}).get("ACPI") is not None

    # -- status ---------------------------------------------------------------
    def _update_status(self, old_status, vmi, domain, err):
        """updateVMIStatus: for a VMI not final, what virt-handler derives
        from the domain, then the update when anything changed."""
        if _phase_final(old_status.get("phase", "")):
            return
        from . import status as st
        st.from_domain(self, vmi, domain)
        new_phase = self.phase_for(domain, vmi)
        if new_phase is not None:
            vmi["status"]["phase"] = new_phase
        st.conditions(self, vmi, domain)
        if err is not None:
            if not any(c["type"] == "Synchronized" and c["status"] == "False"
                       and c.get("reason") == "Synchronizing with the Domain failed."
                       for c in vmi["status"].get("conditions") or []):
                _remove_cond(vmi, "Synchronized")
                vmi["status"].setdefault("conditions", []).append(
                    condition("Synchronized", "False", "Synchronizing with the Domain failed.",
                              str(err), None, now_rfc3339()))
        elif _cond(vmi, "Synchronized"):
            _remove_cond(vmi, "Synchronized")
        if old_status.get("phase") != vmi["status"].get("phase"):
            ts = vmi["status"].setdefault("phaseTransitionTimestamps", [])
            if not any(t["phase"] == vmi["status"]["phase"] for t in ts):
                ts.append({"phase": vmi["status"]["phase"], "phaseTransitionTimestamp": now_rfc3339()})
        if vmi["status"] != old_status:
            self.cluster.update_status(vmi["status"], rv=vmi["metadata"]["resourceVersion"])
        if old_status.get("phase") != vmi["status"].get("phase"):
            p = vmi["status"].get("phase")
            if p == "Running":
                self.record("Normal", "Started", "VirtualMachineInstance started.")
            elif p == "Succeeded":
                self.record("Normal", "Stopped", "The VirtualMachineInstance was shut down.")
            elif p == "Failed":
                self.record("Warning", "Stopped", "The VirtualMachineInstance crashed.")


def libvirt_quantity(value, unit):
    """parseLibvirtQuantity as bytes (None for an unknown unit)."""
    f = _UNITS.get(unit)
    return None if f is None else value * f


def agent_supported(vmi, commands):
    """isGuestAgentSupported: (supported, reason)."""
    avail = {c.get("name"): c.get("enabled", False) for c in commands}
    if not all(avail.get(c) for c in REQUIRED_AGENT_COMMANDS):
        return False, "This guest agent doesn't support required basic commands"
    for ac in vmi["spec"].get("accessCredentials") or []:
        if ((ac.get("sshPublicKey") or {}).get("propagationMethod") or {}).get("qemuGuestAgent") is not None:
            new = ["guest-ssh-get-authorized-keys", "guest-ssh-add-authorized-keys",
                   "guest-ssh-remove-authorized-keys"]
            old = ["guest-exec-status", "guest-exec", "guest-file-open", "guest-file-close",
                   "guest-file-read", "guest-file-write"]
            if not (all(avail.get(c) for c in new) or all(avail.get(c) for c in old)):
                return False, "This guest agent doesn't support required public key commands"
        if ((ac.get("userPassword") or {}).get("propagationMethod") or {}).get("qemuGuestAgent") is not None:
            if not avail.get("guest-set-user-password"):
                return False, "This guest agent doesn't support required password commands"
    return True, "This guest agent is supported"


_GO_REGEX_VERSIONS = [r"2\.*", r"3\.*", r"4\.*", r"5\.*"]


def agent_version_supported(version):
    """The fallback for launchers that report no supported commands: the
    cluster's supported agent versions (KubeVirt's defaults)."""
    return any(re.search(v, version or "") for v in _GO_REGEX_VERSIONS)
