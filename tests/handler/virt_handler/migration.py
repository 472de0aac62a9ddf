"""Live migration as virt-handler drives it between two nodes (KubeVirt
v1.6.6 pkg/virt-handler/migration-source.go, migration-target.go, the
migration bits of vm.go), with virt-controller's hand-over of the
migration to the VMI (pkg/virt-controller/watch/migration/migration.go,
handleTargetPodHandoff) played by the scenario.

Two virt-handlers, one per node: the source node's is the scenario's
Handler (its VM controller keeps running, its notify server collects the
source launcher's events); the target node's (`TargetNode`) has a notify
server, domain informer and launcher clients of its own, for the target
pod. Each node runs its migration controller as a work queue with one key,
like the VM controller (controller.WorkQueue), on VMI and domain changes:

- MigrationTargetController (target node): execute() skips final or
  deleted VMIs, a dead domain, a VMI without migrationState or whose
  kubevirt.io/migrationTargetNodeName label is another node; sync():
  finalCleanup once EndTimestamp and Completed/Failed are set
  (SignalTargetPodCleanup after a failure, else FinalizeVirtualMachineMigration
  again; then the label is removed); processVMI: migrationNeedsFinalization
  -> FinalizeVirtualMachineMigration and Completed; otherwise the client
  (initialized, responsive), nothing while IsMigrating, else
  SyncMigrationTarget with virtualMachineOptions and the target listener;
  updateStatus: TargetNodeDomainDetected, TargetNodeDomainReadyTimestamp
  (Running, or Paused by the user), ackMigrationCompletion from the domain's
  Migration.EndTimestamp (the VMI's nodeName and label move to this node,
  launcherContainerImageVersion cleared, migrationTransport Unix), then the
  target address and ports once the listener is up (re-queued after 1 s
  until it is).
- MigrationSourceController (source node): execute() skips final or
  deleted VMIs, a stale domain, no migrationState, a finished migration
  (stops the source listener), a VMI of which this node is not the source
  (status.nodeName and migrationState.sourceNode); processVMI only for an
  alive domain: the client (initialized, responsive), CancelVirtualMachineMigration
  when abortRequested, nothing while isMigrationInProgress, the source
  listener once the target published its ports (re-queued after 1 s
  before), then MigrateVirtualMachine with the cluster's migration
  configuration (KubeVirt's defaults: no bandwidth cap, progress timeout
  150 s, 150 s per GiB, eight parallel threads unless post-copy or a CPU
  limit); updateStatus: setMigrationProgressStatus from the domain's
  Migration record (StartTimestamp, Failed, EndTimestamp and FailureReason
  on failure or a succeeded abort, AbortStatus, Mode), and
  hasTargetDetectedReadyDomain's 60 s wait after EndTimestamp before the
  VMI is failed.
- vm.go (controller.py, on the source): a domain that migrated away
  (Shutoff/Migrated) is an orphan: deleteVM; a VMI owned by another node is
  left alone; a migration in progress (VMI or domain record started and not
  ended, or paused for migration) leaves the key alone.
- The VMI is written with optimistic concurrency (a write from an older
  resourceVersion is a conflict, re-queued), as the API server does.

Not reproduced: virt-handler's own TLS proxy between nodes: its two halves
(source listener in the source pod, target listener on the target node)
are one `virt-launcher migration-proxy` process over loopback, started when
the source listener would be (`TargetDirectMigrationNodePorts` names the
target's ports KubeVirt proxies -- 0 for libvirt, 49152, 49153 for block
migration -- under placeholder listener ports); the target's VM controller
(the VMI's life after the move); volume, network and device preparation on
the target (the harness's pod has them); dedicated CPUs, hot-plug after
the move, migration policies, decentralized migrations, passt repair;
virt-controller's migration object and its phases.
"""

import copy
import json
import subprocess
import threading
import time

from .cmdclient import CmdError
from .controller import WorkQueue
from .vmi import Conflict, marshal, now_rfc3339

TARGET_NODE_LABEL = "kubevirt.io/migrationTargetNodeName"
NODE_NAME_LABEL = "kubevirt.io/nodeName"
PARALLEL_THREADS = 8
TARGET_DELAY = 60


def _ms(vmi):
    return (vmi.get("status") or {}).get("migrationState")


def _record(domain):
    return (((domain or {}).get("Spec") or {}).get("Metadata") or {}).get("KubeVirt", {}).get("Migration")


def _alive(domain):
    return domain is not None and (domain.get("Status") or {}).get("Status") not in ("Shutoff", "Crashed", "", None)


def _final(vmi):
    return vmi["status"].get("phase") in ("Succeeded", "Failed")


def is_migrating(vmi):
    """migrations.IsMigrating: started and not ended (timestamps now or past)."""
    ms = _ms(vmi) or {}
    return bool(ms.get("startTimestamp")) and not ms.get("endTimestamp")


def in_progress(vmi, domain):
    """controller.go's isMigrationInProgress."""
    if is_migrating(vmi):
        return True
    rec = _record(domain)
    if rec and rec.get("StartTimestamp") and not rec.get("EndTimestamp"):
        return True
    st = (domain or {}).get("Status") or {}
    return st.get("Status") == "Paused" and st.get("Reason") in ("Migration", "StartingUp", "Postcopy")


class _Loop:
    """One key, one worker, rate-limited retries (controller.go's Execute)."""

    def __init__(self, name, cluster, informer_key):
        self.name = name
        self.cluster = cluster
        self.key = informer_key
        self.queue = WorkQueue()
        self.errors = []
        self.events = []  # recorder.Event
        self.thread = threading.Thread(target=self._run, daemon=True)
        cluster.watch(lambda _o: self.queue.add())

    def start(self):
        self.thread.start()
        self.queue.add()

    def stop(self):
        self.queue.stop()
        self.thread.join(30)

    def _run(self):
        while self.queue.get():
            try:
                self.execute()
            except (CmdError, Conflict, OSError) as e:
                self.errors.append((time.time(), f"{self.name}: {type(e).__name__}: {e}"))
                self.queue.add_rate_limited()
            else:
                self.queue.forget()

    def record(self, etype, reason, message):
        self.events.append({"type": etype, "reason": reason, "message": message})

    def domain(self, informer):
        d = informer.get(self.key)
        if d is None or (d.get("ObjectMeta") or {}).get("deletionTimestamp"):
            return None
        return d

    def write(self, vmi, old_status, old_labels):
        if vmi["status"] != old_status or vmi["metadata"].get("labels") != old_labels:
            self.cluster.update_status(vmi["status"], rv=vmi["metadata"]["resourceVersion"],
                                       labels=vmi["metadata"].get("labels"))


class TargetController(_Loop):
    """migration-target.go for the target node `node`."""

    def __init__(self, cluster, informer, clients, node, options, violation):
        m = cluster.get()["metadata"]
        super().__init__("target", cluster, f'{m["namespace"]}/{m["name"]}')
        self.informer = informer
        self.clients = clients
        self.node = node
        self.options = options
        self.violation = violation
        self.ports = {}  # the target listener's ports (GetTargetListenerPorts)
        informer.on_change = lambda _k: self.queue.add()

    def execute(self):
        vmi = self.cluster.get()
        if vmi is None:
            return
        if _final(vmi) or vmi["metadata"].get("deletionTimestamp"):
            self.clients.close(vmi["metadata"]["uid"])
            return
        domain = self.domain(self.informer)
        if domain is not None:
            uid = domain["Spec"]["Metadata"]["KubeVirt"].get("UID")
            if uid and uid != vmi["metadata"]["uid"]:
                self.violation(f"target domain UID {uid!r} is not the VMI's")
                return
            if not _alive(domain):
                return
        if _ms(vmi) is None:
            return
        if (vmi["metadata"].get("labels") or {}).get(TARGET_NODE_LABEL) != self.node:
            return
        self.sync(vmi, domain)

    def sync(self, vmi, domain):
        old_status, old_labels = copy.deepcopy(vmi["status"]), copy.deepcopy(vmi["metadata"].get("labels"))
        ms = _ms(vmi)
        if ms.get("endTimestamp") and (ms.get("completed") or ms.get("failed")):
            return self.final_cleanup(vmi, old_status, old_labels)
        err = None
        try:
            self.process(vmi)
        except CmdError as e:
            err = e
            self.record("Warning", "SyncFailed", str(e))
        self.update_status(vmi, domain)
        self.write(vmi, old_status, old_labels)
        if err is not None:
            raise err

    def process(self, vmi):
        ms = _ms(vmi)
        if ms.get("startTimestamp") and ms.get("endTimestamp") and not ms.get("completed") \
                and not ms.get("failed"):
            client = self.clients.get_verified(vmi)
            try:
                client.finalize_virtual_machine_migration(marshal(vmi), self.options(vmi, final=True))
            except CmdError as e:
                raise CmdError(f"failed to finalize migration: {e}") from None
            ms["completed"] = True
            return
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
        if is_migrating(vmi):
            return
        try:
            client.sync_migration_target(marshal(vmi), self.options(vmi))
        except CmdError as e:
            raise CmdError(f"syncing migration target failed: {e}") from None
        # StartTargetListener: the target's libvirt socket and migration
        # sockets become reachable (see the module's note on the proxy).
        block = vmi["status"].get("migrationMethod") == "BlockMigration"
        self.ports = {"40000": 0, "40001": 49152}
        if block:
            self.ports["40002"] = 49153
        self.record("Normal", "PreparingTarget", "VirtualMachineInstance Migration Target Prepared.")

    def update_status(self, vmi, domain):
        ms = _ms(vmi)
        if ms.get("failed"):
            return
        if domain is not None and not ms.get("targetNodeDomainDetected"):
            ms["targetNodeDomainDetected"] = True
        st = (domain or {}).get("Status") or {}
        active = st.get("Status") == "Running" or (st.get("Status") == "Paused" and st.get("Reason") == "User")
        if active and not ms.get("targetNodeDomainReadyTimestamp"):
            ms["targetNodeDomainReadyTimestamp"] = now_rfc3339()
        rec = _record(domain)
        if domain is not None and rec and rec.get("EndTimestamp"):
            # ackMigrationCompletion
            if not ms.get("startTimestamp") and rec.get("StartTimestamp"):
                ms["startTimestamp"] = rec["StartTimestamp"]
            ms["endTimestamp"] = rec["EndTimestamp"]
            vmi["metadata"].setdefault("labels", {})[NODE_NAME_LABEL] = self.node
            vmi["status"]["launcherContainerImageVersion"] = ""
            vmi["status"]["nodeName"] = self.node
            vmi["status"].pop("evacuationNodeName", None)
            vmi["status"]["migrationTransport"] = "Unix"
            self.record("Normal", "Migrated", f"The VirtualMachineInstance migrated to node {self.node}.")
        if is_migrating(vmi):
            return
        if not self.ports:
            self.queue.add_after(1)
            return
        if ms.get("targetNodeAddress") != "127.0.0.1":
            ms["targetNodeAddress"] = "127.0.0.1"
            ms["targetDirectMigrationNodePorts"] = dict(self.ports)

    def final_cleanup(self, vmi, old_status, old_labels):
        client = self.clients.get(vmi)
        try:
            if _ms(vmi).get("failed"):
                try:
                    client.signal_target_pod_cleanup(marshal(vmi))
                except CmdError:
                    pass  # logged and ignored
                self.informer.delete(self.key)
            else:
                client.finalize_virtual_machine_migration(marshal(vmi), self.options(vmi, final=True))
        finally:
            self.ports = {}
        vmi["metadata"]["labels"].pop(TARGET_NODE_LABEL, None)
        (vmi["metadata"].get("annotations") or {}).pop("kubevirt.io/create-migration-target", None)
        self.write(vmi, old_status, old_labels)
        self.clients.close(vmi["metadata"]["uid"])


class SourceController(_Loop):
    """migration-source.go for the source node `node`; `proxy(vmi)` starts
    the source listener (the migration proxy), `stop_proxy()` stops it."""

    def __init__(self, cluster, informer, clients, node, config, proxy, stop_proxy):
        m = cluster.get()["metadata"]
        super().__init__("source", cluster, f'{m["namespace"]}/{m["name"]}')
        self.informer = informer
        self.clients = clients
        self.node = node
        self.config = config
        self.proxy = proxy
        self.stop_proxy = stop_proxy
        self.migrate_calls = []

    def execute(self):
        vmi = self.cluster.get()
        if vmi is None or _final(vmi) or vmi["metadata"].get("deletionTimestamp"):
            return
        domain = self.domain(self.informer)
        if domain is not None and domain["Spec"]["Metadata"]["KubeVirt"].get("UID") != vmi["metadata"]["uid"]:
            return
        ms = _ms(vmi)
        if ms is None:
            return
        if ms.get("endTimestamp") and (ms.get("completed") or ms.get("failed")):
            self.stop_proxy()
            return
        if not (vmi["status"].get("nodeName") == self.node and ms.get("sourceNode") == self.node):
            return
        old = copy.deepcopy(vmi["status"])
        err = None
        try:
            if _alive(domain):
                self.migrate(vmi, domain)
        except CmdError as e:
            err = e
            self.record("Warning", "SyncFailed", str(e))
        self.update_status(vmi, domain)
        self.write(vmi, old, vmi["metadata"].get("labels"))
        if err is not None:
            raise err

    def options(self, vmi):
        c = self.config
        o = {"Bandwidth": c.get("bandwidthPerMigration", "0"),
             "ProgressTimeout": c.get("progressTimeout", 150),
             "CompletionTimeoutPerGiB": c.get("completionTimeoutPerGiB", 150),
             "UnsafeMigration": c.get("unsafeMigrationOverride", False),
             "AllowAutoConverge": c.get("allowAutoConverge", False),
             "AllowPostCopy": c.get("allowPostCopy", False),
             "ParallelMigrationThreads": None,
             "AllowWorkloadDisruption": c.get("allowWorkloadDisruption", c.get("allowPostCopy", False))}
        limits = ((vmi["spec"].get("domain") or {}).get("resources") or {}).get("limits") or {}
        if not (limits.get("cpu") not in (None, "0")) and not o["AllowPostCopy"]:
            o["ParallelMigrationThreads"] = PARALLEL_THREADS
        return json.dumps(o, separators=(",", ":")).encode()

    def migrate(self, vmi, domain):
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
        ms = _ms(vmi)
        if ms.get("abortRequested"):
            if ms.get("abortStatus") not in ("Aborting", "Succeeded"):
                client.cancel_virtual_machine_migration(marshal(vmi))
                self.record("Normal", "Migrating", "Aborting Migration.")
            return
        if in_progress(vmi, domain):
            return
        if ms.get("targetDirectMigrationNodePorts") is None:
            self.queue.add_after(1)
            return
        try:
            self.proxy(vmi)
        except OSError as e:
            raise CmdError(f"failed to handle migration proxy: {e}") from None
        opts = self.options(vmi)
        self.migrate_calls.append({"time": time.time(), "options": json.loads(opts)})
        client.migrate_virtual_machine(marshal(vmi), opts)
        self.record("Normal", "Migrating", "VirtualMachineInstance is migrating.")

    def update_status(self, vmi, domain):
        ms = _ms(vmi)
        rec = _record(domain)
        if domain is not None and rec and rec.get("UID") == ms.get("migrationUid"):
            if rec.get("StartTimestamp"):
                ms["startTimestamp"] = rec["StartTimestamp"]
            ms["failed"] = bool(rec.get("Failed"))
            if rec.get("Failed"):
                ms["endTimestamp"] = rec.get("EndTimestamp")
                ms["failureReason"] = rec.get("FailureReason", "")
                self.record("Warning", "Migrated", f"VirtualMachineInstance migration uid {rec['UID']} failed. "
                            f"reason:{rec.get('FailureReason', '')}")
            ms["abortStatus"] = rec.get("AbortStatus", "")
            if rec.get("AbortStatus") == "Succeeded":
                ms["endTimestamp"] = rec.get("EndTimestamp")
            ms["mode"] = rec.get("Mode", "")
        if not ms.get("targetNode"):
            vmi["status"]["phase"] = "Failed"
            ms.update(completed=True, failed=True)
            ms.setdefault("endTimestamp", now_rfc3339())
            return
        if ms.get("endTimestamp"):
            from .gotypes import parse_time
            ts = ms.get("targetState") or {}
            if ts.get("domainDetected") and ts.get("domainReadyTimestamp"):
                return
            left = TARGET_DELAY - (int(time.time()) - int(parse_time(ms["endTimestamp"]).timestamp()))
            if left <= 0:
                vmi["status"]["phase"] = "Failed"
                ms.update(completed=True, failed=True)
            else:
                self.queue.add_after(max(left, 5))


class Proxy:
    """The migration proxy for one VMI: `virt-launcher migration-proxy`
    between the source pod's share directory and the target pod's."""

    def __init__(self, launcher, source_share, target_share, target_libvirt_socket, log):
        self.args = (launcher, source_share, target_share, target_libvirt_socket, log)
        self.proc = None
        self.lock = threading.Lock()

    def start(self, vmi):
        with self.lock:
            if self.proc is not None:
                return
            launcher, src, dst, sock, log = self.args
            cmd = [launcher, "migration-proxy", "--uid", vmi["metadata"]["uid"],
                   "--source-share", src, "--target-share", dst, "--target-libvirt-socket", sock]
            if vmi["status"].get("migrationMethod") == "BlockMigration":
                cmd.append("--block-migration")
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=open(log, "ab"))
            if p.stdout.read(6) != b"ready\n":
                p.kill()
                p.wait()
                raise OSError(f"migration-proxy did not start (see {log})")
            self.proc = p

    def stop(self):
        with self.lock:
            if self.proc is not None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                self.proc = None


def hand_over(cluster, migration_uid, source_node, target_node, target_pod_uid, target_pod, config):
    """virt-controller's handleTargetPodHandoff once the target pod is ready:
    migrationState (migration UID, nodes, target pod, the cluster's
    migration configuration), the target pod among the active pods, and the
    label that hands the VMI to the target node's virt-handler."""
    def mutate(obj):
        st = obj["status"]
        st["migrationState"] = {"targetNode": target_node, "targetPod": target_pod,
                                "sourceNode": source_node, "migrationUid": migration_uid,
                                "migrationConfiguration": dict(config), "sourcePod": "virt-launcher-source"}
        st.setdefault("activePods", {})[target_pod_uid] = target_node
        obj["metadata"].setdefault("labels", {})[TARGET_NODE_LABEL] = target_node
    cluster.update(mutate)


def sequence(events):
    """The notify events as (type, Status/Reason, migration record summary)."""
    out = []
    for t, d, _, _ in events:
        if d is None:
            out.append((t, None, None))
            continue
        rec = _record(d) or {}
        out.append((t, f'{d["Status"]["Status"]}/{d["Status"]["Reason"]}'
                    + (" deleted" if d["ObjectMeta"].get("deletionTimestamp") else ""),
                    {k: rec.get(k) for k in ("UID", "StartTimestamp", "EndTimestamp", "Failed", "Mode")
                     if rec.get(k) not in (None, "", False)}))
    return out
