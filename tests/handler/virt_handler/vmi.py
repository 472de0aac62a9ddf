"""The VMI as virt-handler's informer holds it, and the little of the
cluster around it that the scenarios need (the API server's object store,
virt-api's create-time changes, virt-controller's hand-over to the node).

What goes on the wire is `marshal(obj)`: Go's json.Marshal of the informer
object. Objects delivered by a watch carry an empty TypeMeta, so there is no
`kind` and no `apiVersion`. `metadata` has what the API server and KubeVirt's
controllers put there (KubeVirt v1.6.6):
- resourceVersion (bumped on every write), generation (bumped on spec
  changes), creationTimestamp, uid;
- annotations kubevirt.io/latest-observed-api-version and
  kubevirt.io/storage-observed-api-version (virt-controller), and
  kubevirt.io/pci-topology-version: v3 on amd64/q35 (virt-api's mutator,
  SupportsPCIeHotplug);
- finalizers: foregroundDeleteVirtualMachine (virt-api's mutator), after
  kubevirt.io/virtualMachineControllerFinalize when a VirtualMachine owns the
  VMI (virt-controller's VM controller puts it in the VMI it creates), with
  the VM's ownerReference (controller, blockOwnerDeletion);
- labels: kubevirt.io/nodeName (virt-controller, once the pod is ready);
- managedFields of the writers (the creating client, virt-controller,
  virt-handler);
- once deleted: deletionTimestamp, and deletionGracePeriodSeconds 0 (a custom
  resource with finalizers has no graceful deletion of its own).
`status` is what virt-controller leaves at the hand-over (phase Scheduled,
nodeName, activePods {pod UID: node}, qosClass, launcherContainerImageVersion,
migrationTransport Unix, a Ready=False/GuestNotRunning condition, a
volumeStatus entry per volume, runtimeUser, plus virt-api's create-time
status: phaseTransitionTimestamps, memory, currentCPUTopology), and from then
on what virt-handler's controller writes (controller.py).

The spec is the test's manifest as is: virt-api's spec defaults are NOT
applied (the launcher applies the ones it converts, idempotently), and in
particular not the LiveUpdate rollout's maxSockets/maxGuest nor the default
pod network interface, which the test pods do not have.
"""

import copy
import json
import threading
import time
from datetime import datetime, timezone

from .cmdclient import dumps_go

FOREGROUND_FINALIZER = "foregroundDeleteVirtualMachine"
VM_CONTROLLER_FINALIZER = "kubevirt.io/virtualMachineControllerFinalize"
NODE_NAME_LABEL = "kubevirt.io/nodeName"
LAUNCHER_IMAGE = "quay.io/kubevirt/virt-launcher:v1.6.6"


class Conflict(Exception):
    """The API server's 409 on an Update from a stale resourceVersion."""


def now_rfc3339():
    """metav1.Now() as it marshals: RFC 3339, seconds, UTC."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quantity_value(q):
    """A Kubernetes quantity's value (rounded up), for topology defaults."""
    q = str(q)
    suffixes = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6,
                "G": 10**9, "T": 10**12, "m": 0.001}
    for s, f in sorted(suffixes.items(), key=lambda kv: -len(kv[0])):
        if q.endswith(s):
            v = float(q[:-len(s)]) * f
            return int(-(-v // 1))
    return int(-(-float(q) // 1))


def condition(ctype, status, reason="", message="", probe=None, transition=None):
    """A VirtualMachineInstanceCondition in Go's field order; a zero
    metav1.Time marshals as null (omitempty does not drop structs)."""
    c = {"type": ctype, "status": status, "lastProbeTime": probe, "lastTransitionTime": transition}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


_STATUS_ORDER = ["nodeName", "reason", "conditions", "phase", "phaseTransitionTimestamps",
                 "interfaces", "guestOSInfo", "migrationState", "migrationMethod",
                 "migrationTransport", "qosClass", "launcherContainerImageVersion",
                 "evacuationNodeName", "activePods", "volumeStatus", "kernelBootStatus",
                 "fsFreezeStatus", "topologyHints", "virtualMachineRevisionName", "runtimeUser",
                 "VSOCKCID", "selinuxContext", "machine", "currentCPUTopology", "memory",
                 "migratedVolumes", "deviceStatus"]
_ALWAYS = {"guestOSInfo", "runtimeUser"}
_META_ORDER = ["name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
               "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
               "labels", "annotations", "ownerReferences", "finalizers", "managedFields"]


def _ordered(d, order, always=()):
    """`d` with Go's field order and omitempty: empty values dropped unless
    in `always`; keys not in `order` keep their place at the end."""
    out = {}
    for k in order + [k for k in d if k not in order]:
        if k not in d:
            continue
        v = d[k]
        if k not in always and v in (None, "", 0, [], {}, False):
            continue
        out[k] = dict(sorted(v.items())) if isinstance(v, dict) and k in (
            "labels", "annotations", "activePods") else v
    return out


def marshal(obj):
    """The informer object as Go's json.Marshal writes it (bytes)."""
    m = {k: v for k, v in obj["metadata"].items()
         if not (k == "deletionGracePeriodSeconds" and v is None)}
    # creationTimestamp has omitempty but is a struct: always written; a
    # set *int64 is written even when 0.
    meta = _ordered(m, _META_ORDER, {"creationTimestamp", "deletionGracePeriodSeconds"})
    doc = {"metadata": meta, "spec": obj["spec"],
           "status": _ordered(obj["status"], _STATUS_ORDER, _ALWAYS)}
    return dumps_go(doc).encode()


class Cluster:
    """The API server's copy of one VMI and the watches on it.

    `get()` returns a deep copy (as an informer's cache hands out objects to
    copy); `update_status()` and `update()` write it back with a new
    resourceVersion and notify the watchers (virt-handler's informer);
    `delete()` sets deletionTimestamp (the object stays while finalizers
    remain), `remove()` drops it (finalizers gone)."""

    def __init__(self, manifest, node, pod_uid, owner_vm=None, runtime_user=0,
                 qos_class="Burstable"):
        self._lock = threading.RLock()
        self._rv = 1000
        self._watchers = []
        self.exists = True
        meta_in = manifest.get("metadata") or {}
        spec = copy.deepcopy(manifest.get("spec") or {})
        created = now_rfc3339()
        annotations = dict(meta_in.get("annotations") or {})
        annotations["kubevirt.io/latest-observed-api-version"] = "v1"
        annotations["kubevirt.io/storage-observed-api-version"] = "v1"
        machine = ((spec.get("domain") or {}).get("machine") or {}).get("type", "")
        arch = spec.get("architecture", "")
        if arch in ("", "amd64", "arm64") and (not machine or "q35" in machine or machine.startswith("virt")):
            annotations.setdefault("kubevirt.io/pci-topology-version", "v3")
        labels = dict(meta_in.get("labels") or {})
        labels[NODE_NAME_LABEL] = node
        finalizers = [FOREGROUND_FINALIZER]
        owners = []
        if owner_vm:
            finalizers.insert(0, VM_CONTROLLER_FINALIZER)
            owners.append({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                           "name": owner_vm["name"], "uid": owner_vm["uid"],
                           "controller": True, "blockOwnerDeletion": True})
            labels.setdefault("kubevirt.io/vm", owner_vm["name"])
        creator = "virt-controller" if owner_vm else "kubectl-create"
        self.obj = {
            "metadata": {
                "name": meta_in["name"], "namespace": meta_in.get("namespace", "default"),
                "uid": meta_in["uid"], "resourceVersion": "", "generation": 1,
                "creationTimestamp": created, "labels": labels, "annotations": annotations,
                "ownerReferences": owners, "finalizers": finalizers,
                "managedFields": [
                    {"manager": creator, "operation": "Update", "apiVersion": "kubevirt.io/v1",
                     "time": created, "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:spec": {".": {}}}},
                    {"manager": "virt-controller", "operation": "Update",
                     "apiVersion": "kubevirt.io/v1", "time": created, "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:labels": {f"f:{NODE_NAME_LABEL}": {}}},
                                  "f:status": {".": {}}}},
                ],
            },
            "spec": spec,
            "status": self._handed_over_status(spec, manifest.get("status") or {}, node, pod_uid,
                                               runtime_user, qos_class, created),
        }
        self._bump()

    @staticmethod
    def _handed_over_status(spec, given, node, pod_uid, runtime_user, qos_class, created):
        dom = spec.get("domain") or {}
        cpu = dom.get("cpu") or {}
        res = dom.get("resources") or {}
        st = {
            "nodeName": node,
            "conditions": [condition("Ready", "False", "GuestNotRunning",
                                     "Guest VM is not reported as running", created, created)],
            "phase": "Scheduled",
            "phaseTransitionTimestamps": [
                {"phase": p, "phaseTransitionTimestamp": created}
                for p in ("Pending", "Scheduling", "Scheduled")],
            "guestOSInfo": {},
            "migrationTransport": "Unix",
            "qosClass": qos_class,
            "launcherContainerImageVersion": LAUNCHER_IMAGE,
            "activePods": {pod_uid: node},
            "runtimeUser": runtime_user,
        }
        # virt-controller: one volumeStatus per volume, sorted by name,
        # target "" until virt-handler reads it from the domain.
        vols = []
        given_vs = {v.get("name"): v for v in given.get("volumeStatus") or []}
        for v in spec.get("volumes") or []:
            vs = {"name": v["name"], "target": ""}
            if v.get("memoryDump") or (v.get("persistentVolumeClaim") or {}).get("hotpluggable") \
                    or (v.get("dataVolume") or {}).get("hotpluggable"):
                vs["hotplugVolume"] = {}
            if v.get("memoryDump"):
                vs["memoryDumpVolume"] = {"claimName": v["name"]}
            vs.update({k: x for k, x in given_vs.get(v["name"], {}).items() if k != "name"})
            vols.append(vs)
        st["volumeStatus"] = sorted(vols, key=lambda x: x["name"])
        # virt-api at create time: currentCPUTopology and memory, from the
        # topology SetDefaultGuestCPUTopology picks and memory.guest.
        if not (cpu.get("cores") or cpu.get("sockets") or cpu.get("threads")):
            lim = (res.get("limits") or {}).get("cpu") or (res.get("requests") or {}).get("cpu")
            cpu = {"sockets": _quantity_value(lim) if lim else 1, "cores": 1, "threads": 1}
        st["currentCPUTopology"] = {k: cpu.get(k, 0) for k in ("cores", "sockets", "threads")
                                    if cpu.get(k)}
        guest = (dom.get("memory") or {}).get("guest") or (res.get("requests") or {}).get("memory") \
            or (res.get("limits") or {}).get("memory")
        if guest:
            st["memory"] = {"guestAtBoot": guest, "guestCurrent": guest, "guestRequested": guest}
        for k, v in given.items():
            if k != "volumeStatus":
                st[k] = v
        return st

    # -- the store -----------------------------------------------------
    def _bump(self):
        self._rv += 1
        self.obj["metadata"]["resourceVersion"] = str(self._rv)

    def watch(self, fn):
        """fn(obj or None) on every change (None: the object is gone)."""
        self._watchers.append(fn)

    def _notify(self):
        snap = self.get()
        for fn in self._watchers:
            fn(snap)

    def get(self):
        with self._lock:
            return copy.deepcopy(self.obj) if self.exists else None

    def update_status(self, status, manager="virt-handler", rv=None, labels=None):
        """virt-handler's Update of the VMI with a new status (and labels,
        when given); from an object read at resourceVersion `rv` (when
        given) that is no longer the current one: `Conflict`, as the API
        server answers."""
        with self._lock:
            if not self.exists:
                return
            if rv is not None and rv != self.obj["metadata"]["resourceVersion"]:
                raise Conflict(f'Operation cannot be fulfilled on virtualmachineinstances.kubevirt.io '
                               f'"{self.obj["metadata"]["name"]}": the object has been modified; '
                               "please apply your changes to the latest version and try again")
            self.obj["status"] = copy.deepcopy(status)
            if labels is not None:
                self.obj["metadata"]["labels"] = copy.deepcopy(labels)
            mf = self.obj["metadata"]["managedFields"]
            if not any(m["manager"] == manager for m in mf):
                mf.append({"manager": manager, "operation": "Update", "apiVersion": "kubevirt.io/v1",
                           "time": now_rfc3339(), "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:status": {".": {}}}})
            self._virt_controller_reacts()
            self._bump()
        self._notify()

    def update(self, mutate, spec_changed=False):
        """Another writer (a user, virt-controller) changes the object."""
        with self._lock:
            mutate(self.obj)
            if spec_changed:
                self.obj["metadata"]["generation"] += 1
            self._bump()
        self._notify()

    def _virt_controller_reacts(self):
        """virt-controller's syncReadyConditionFromPod: once the VMI runs
        and the pod is ready, Ready follows the pod's (True)."""
        st = self.obj["status"]
        conds = st.setdefault("conditions", [])
        ready = next((c for c in conds if c["type"] == "Ready"), None)
        if st.get("phase") == "Running" and ready and ready["status"] != "True":
            conds.remove(ready)
            conds.insert(0, condition("Ready", "True", probe=None, transition=now_rfc3339()))

    def delete(self):
        """kubectl delete: deletionTimestamp now, deletionGracePeriodSeconds
        0; the object stays until the finalizers are removed."""
        with self._lock:
            self.obj["metadata"]["deletionTimestamp"] = now_rfc3339()
            self.obj["metadata"]["deletionGracePeriodSeconds"] = 0
            self._bump()
        self._notify()

    def remove(self):
        with self._lock:
            self.exists = False
        for fn in self._watchers:
            fn(None)


def load_manifest(path):
    """A VMI manifest (JSON, or YAML when PyYAML is there) as a dict."""
    text = open(path, encoding="utf-8").read()
    try:
        return json.loads(text)
    except ValueError:
        import yaml  # only for YAML manifests
        return yaml.safe_load(text)


def key(obj):
    return f'{obj["metadata"]["namespace"]}/{obj["metadata"]["name"]}'


def wait_until(pred, timeout, what, interval=0.05):
    """Polls pred() until true; raises TimeoutError naming `what`."""
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() > deadline:
            raise TimeoutError(f"no {what} within {timeout:.0f}s")
        time.sleep(interval)
