"""The NIC plug and unplug scenario (`--plug-nic NAME=NAD`, issue 17): the
cluster around virt-handler drives a bridge interface on a Multus network
into a running VMI and out again, virt-handler (controller.py with
netsetup.py) does its part, and what it reads back is checked.

Plug, as KubeVirt v1.6.6 does it:
1. virt-controller hands the VM's LiveUpdate to the VMI
   (pkg/network/controllers/vm.go applyDynamicIfaceRequestOnVMI): the
   interface (`bridge: {}`) and its network (`multus: {networkName}`)
   appended to the spec.
2. Multus adds the pod interface; virt-controller turns the pod's
   network-status annotation into the VMI's status entry (`name`,
   `infoSource: multus-status`, `podInterfaceName: pod<hash>`).
3. virt-handler's sync of the running VMI: phase 1 for
   FilterNetsForLiveUpdate's network in the pod, then SyncVirtualMachine
   with the VMI; the launcher runs phase 2 and attaches the NIC.
4. From the domain notification virt-handler's status entry becomes
   `domain, multus-status`, then `domain, guest-agent, multus-status` with
   the guest's address once the agent reports it: the plug is done when the
   domain's interface is in the status (there is no other completion mark).
Prints `NIC-PLUGGED {"domain": <GetDomain's interface>, "status": <the
VMI's status entry>}`.

Unplug: the VM's LiveUpdate sets the interface's `state: absent`; the sync
detaches it; the status entry loses `domain`; virt-handler's phase 1 tears
the bridge binding down and clears its cache; Multus removes the pod
interface, virt-controller drops the status entry and then the interface
and network from the spec (clearDetachedIfacesFromVMI). Prints
`NIC-UNPLUGGED {"domain": <GetDomain's interface aliases>, "cache": <whether
the DHCP cache is left>}`.
"""

import hashlib
import json
import os
import time

from . import netsetup


def _entry(v, name):
    return next((i for i in v["status"].get("interfaces") or [] if i.get("name") == name), None)


def _has(v, name, *want):
    e = _entry(v, name)
    return e is not None and all(w in netsetup.sources(e.get("infoSource", "")) for w in want)


def _wait_done(h, step, timeout=120):
    from .scenarios import Failure
    deadline = time.time() + timeout
    while step not in h.ctrl.netpod.done:
        if time.time() > deadline:
            raise Failure(f"virt-handler's phase 1 never did {step}; events {h.ctrl.recorded[-5:]}")
        time.sleep(0.1)


def plug_unplug(h):
    from .scenarios import Failure, out
    name, _, nad = h.a.plug_nic.partition("=")
    pod_iface = "pod" + hashlib.sha256(name.encode()).hexdigest()[:11]

    def add(obj):
        obj["spec"]["domain"]["devices"].setdefault("interfaces", []).append({"name": name, "bridge": {}})
        obj["spec"].setdefault("networks", []).append({"name": name, "multus": {"networkName": nad}})
    h.cluster.update(add, spec_changed=True)

    def multus(obj):
        obj["status"].setdefault("interfaces", []).append(
            {"name": name, "infoSource": netsetup.MULTUS, "podInterfaceName": pod_iface})
    h.cluster.update(multus)
    _wait_done(h, ("plug", name))
    h.wait_vmi(lambda v: _has(v, name, netsetup.DOMAIN, netsetup.MULTUS), f"{name} in the domain's status")
    v = h.wait_vmi(lambda v: _has(v, name, netsetup.DOMAIN, "guest-agent", netsetup.MULTUS)
                   and _entry(v, name).get("ipAddress"), f"the guest's address on {name}", 180)
    dom = h.get_domain("after the plug")
    ifc = next((i for i in dom["Spec"]["Devices"].get("Interfaces") or []
                if (i.get("Alias") or {}).get("Name") == name), None)
    if ifc is None:
        raise Failure(f"GetDomain after the plug has no interface {name}")
    out("NIC-PLUGGED " + json.dumps({"domain": ifc, "status": _entry(v, name)}, sort_keys=True))

    def absent(obj):
        for i in obj["spec"]["domain"]["devices"]["interfaces"]:
            if i["name"] == name:
                i["state"] = "absent"
    h.cluster.update(absent, spec_changed=True)
    h.wait_vmi(lambda v: _entry(v, name) is not None and not _has(v, name, netsetup.DOMAIN),
               f"{name} gone from the domain's status")
    _wait_done(h, ("unplug", name))
    pid = h.clients.detect_pid(h.vmi())
    cache = f"/proc/{pid}/root/var/run/kubevirt-private/vif-cache-{pod_iface}.json"

    def forget(obj):
        for path in (("spec", "domain", "devices", "interfaces"), ("spec", "networks"), ("status", "interfaces")):
            cur = obj
            for k in path:
                cur = cur[k]
            cur[:] = [x for x in cur if x.get("name") != name]
    h.cluster.update(forget, spec_changed=True)
    h.wait_vmi(lambda v: _entry(v, name) is None, f"{name} gone from the status")
    dom = h.get_domain("after the unplug")
    aliases = [(i.get("Alias") or {}).get("Name") for i in dom["Spec"]["Devices"].get("Interfaces") or []]
    out("NIC-UNPLUGGED " + json.dumps({"domain": aliases, "cache": os.path.lexists(cache)}))
