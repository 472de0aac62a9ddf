"""virt-handler's network setup of a running VMI (KubeVirt v1.6.6):
handleRunningVMI's `setupNetwork(vmi, FilterNetsForLiveUpdate(vmi))`
(pkg/virt-handler/vm.go), the filters of pkg/network/setup/filters.go and
the part of netpod.Setup (pkg/network/setup/netpod) that decides what to
build or tear down, with its per-VMI state of networks already set up.

- filter_nets_for_live_update: the networks to plug (interface not
  `absent`, its status entry has `multus-status` and not `domain`), then
  those to unplug (interface `absent`, its status entry lacks `domain`).
- NetPod.setup: bridge-bound networks only (the binding KubeVirt
  hot-plugs into a pod; the others are filtered out as netpod's
  filterSupportedBindingNetworks and the admitter leave them); a pending
  network is built once and then remembered as finished (netpod's state
  cache), an `absent` one that was finished is torn down (its bridge, tap
  and dummy: netpod's `IfaceStateAbsent` for the interfaces it owns) and
  its cache cleared (clearCache).
- The build itself runs in the launcher's network namespace, found from
  the command socket's peer (isolation.Detect), and writes the bridge
  binding's DHCP cache into the launcher's private directory resolved
  inside /proc/<pid>/root (links followed within that root, as
  virt-handler's safepath). It is played by
  `virt-launcher pod-network-phase1 --interface NAME` (nmstate is not
  reimplemented here), which also plays Multus's part: it makes the pod
  link `pod<hash>` at plug time (in a cluster Multus made it before the
  status named it) and deletes it at unplug (the CNI's DEL, which in a
  cluster follows virt-controller's pod annotation update).
- Errors are tolerated as virt-handler tolerates them: a `NicHotplug`
  warning event, the error kept, the sync goes on.
"""

import json
import os
import subprocess
import tempfile

from .notify import open_in_root
from .vmi import marshal

MULTUS = "multus-status"
DOMAIN = "domain"


def sources(info_source):
    """vmispec's split of an infoSource list (`a, b`)."""
    return info_source.split(", ") if info_source else []


def add_source(info_source, name):
    """vmispec.AddInfoSource: appended once, `, `-joined."""
    s = sources(info_source)
    return info_source if name in s else ", ".join(s + [name])


def _spec_ifaces(vmi):
    return ((vmi["spec"].get("domain") or {}).get("devices") or {}).get("interfaces") or []


def _statuses(vmi, pred):
    return {s["name"]: s for s in vmi["status"].get("interfaces") or []
            if s.get("name") and pred(sources(s.get("infoSource", "")))}


def filter_nets_for_live_update(vmi):
    """FilterNetsForLiveUpdate: the names of the networks to plug, then of
    those to unplug, in spec.networks order."""
    ifaces = {i["name"]: i for i in _spec_ifaces(vmi)}
    nets = [n["name"] for n in vmi["spec"].get("networks") or [] if n["name"] in ifaces]
    in_pod_not_domain = _statuses(vmi, lambda s: MULTUS in s and DOMAIN not in s)
    not_in_domain = _statuses(vmi, lambda s: DOMAIN not in s)
    plug = [n for n in nets if ifaces[n].get("state") != "absent" and n in in_pod_not_domain]
    unplug = [n for n in nets if ifaces[n].get("state") == "absent" and n in not_in_domain]
    return plug + unplug


class NetPod:
    """netpod.Setup for one VMI, its state kept across calls. `launcher`
    is the virt-launcher binary whose `pod-network-phase1 --interface`
    builds in the pod; `tap_owner` the launcher's user (107 non-root)."""

    def __init__(self, launcher, tap_owner=0):
        self.launcher = launcher
        self.tap_owner = tap_owner
        self.finished = set()
        self.done = []  # ("plug" | "unplug", name), in order

    def setup(self, vmi, nets, pid):
        """Builds the pending networks of `nets`, tears down the absent
        finished ones; raises RuntimeError with the command's words."""
        if not nets:
            return
        if not self.launcher:
            raise RuntimeError("no --launcher: cannot run network phase 1 for "
                               + ", ".join(nets))
        ifaces = {i["name"]: i for i in _spec_ifaces(vmi)}
        for name in nets:
            iface = ifaces[name]
            if "bridge" not in iface:
                continue
            absent = iface.get("state") == "absent"
            if absent and name not in self.finished:
                continue
            if not absent and name in self.finished:
                continue
            self._phase1(vmi, name, pid)
            if absent:
                self.finished.discard(name)
                self.done.append(("unplug", name))
            else:
                self.finished.add(name)
                self.done.append(("plug", name))

    def _phase1(self, vmi, name, pid):
        # The informer's object has no TypeMeta; the command reads a manifest.
        doc = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", **json.loads(marshal(vmi))}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        # The private directory resolved inside the launcher's root as
        # virt-handler's safepath does (its /var/run is a link to /run: a
        # plain /proc/<pid>/root/var/run/... would land in this host's /run).
        dirfd = None
        try:
            dirfd = open_in_root(f"/proc/{pid}/root", "/var/run/kubevirt-private")
            cmd = ["nsenter", "-t", str(pid), "-n", "--", self.launcher, "pod-network-phase1", f.name,
                   "--interface", name, "--cache-dir", f"/proc/self/fd/{dirfd}"]
            if self.tap_owner:
                cmd += ["--tap-owner", str(self.tap_owner)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False,
                               pass_fds=(dirfd,))
        finally:
            os.unlink(f.name)
            if dirfd is not None:
                os.close(dirfd)
        if r.returncode != 0:
            raise RuntimeError(f"network phase 1 for {name}: {r.stderr.strip() or r.stdout.strip()}")
