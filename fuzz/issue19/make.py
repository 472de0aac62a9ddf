#!/usr/bin/env python3
"""Writes issue 19's "input that costs without bound" cases into a
directory (default fuzz/issue19/out, not committed: 2.5 MB in all), in the
layouts of the targets that read them:

  vmi_bytes/alias-bomb.yaml        203 KB: an anchor of 100,000 scalars
                                   referenced 1000 times
  vmi_bytes/alias-bomb-100.yaml    the same referenced 100 times
  vmi_bytes/threads-max.yaml       332 bytes: supplementalPoolThreadCount
                                   4294967295
  vmi_bytes/threads-10m.yaml       supplementalPoolThreadCount 10,000,000
  vmi_bytes/nesting-quote.yaml     a 200 KB nested flow sequence behind
                                   "# it's"
  vmi_bytes/empty-disks-50000.yaml 3.3 MB: 50,000 emptyDisk volumes
  vmi_bytes/empty-disks-20000.yaml 1.3 MB: 20,000, within the decoder's
                                   node budget (50,000 are refused by it)
  grpc_requests/*.json             the JSON ones as a command's VMI (mode
                                   byte 10 + the VMI JSON)

`bench/fuzz.sh --inputs TARGET FILE...` runs a target on them under the
CI's per-input limits and says which the limits turn into failures."""

import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")

HEAD = """apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: issue19
spec:
"""


def write(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def alias_bomb(refs):
    anchor = "[" + ",".join(["1"] * 100_000) + "]"
    return (HEAD + "  domain:\n    devices: {}\n    resources: {requests: {memory: 128Mi}}\n"
            + "  nodeSelector: {a: &a " + anchor + "}\n"
            + "  tolerations: [" + ",".join(["*a"] * refs) + "]\n")


def threads(n):
    return (HEAD + "  domain:\n    ioThreadsPolicy: supplementalPool\n"
            + f"    ioThreads: {{supplementalPoolThreadCount: {n}}}\n"
            + "    devices:\n      disks: [{name: d, disk: {bus: virtio}}]\n"
            + "    resources: {requests: {memory: 128Mi}}\n"
            + "  volumes: [{name: d, emptyDisk: {capacity: 1Gi}}]\n")


def nesting():
    depth = 100_000
    return "# it's\n" + HEAD + "  domain: {devices: {}}\n  x: " + "[" * depth + "]" * depth + "\n"


def empty_disks(n):
    vmi = {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "issue19"},
        "spec": {
            "domain": {"devices": {"disks": [{"name": f"d{i}"} for i in range(n)]},
                       "resources": {"requests": {"memory": "128Mi"}}},
            "volumes": [{"name": f"d{i}", "emptyDisk": {"capacity": "1G"}} for i in range(n)],
        },
    }
    return vmi


write("vmi_bytes", "alias-bomb.yaml", alias_bomb(1000))
write("vmi_bytes", "alias-bomb-100.yaml", alias_bomb(100))
write("vmi_bytes", "threads-max.yaml", threads(4294967295))
write("vmi_bytes", "threads-10m.yaml", threads(10_000_000))
write("vmi_bytes", "nesting-quote.yaml", nesting())
disks = empty_disks(50_000)
text = "\n".join(["apiVersion: kubevirt.io/v1", "kind: VirtualMachineInstance",
                  "metadata: {name: issue19}", "spec: " + json.dumps(disks["spec"], separators=(",", ":"))]) + "\n"
write("vmi_bytes", "empty-disks-50000.yaml", text)
write("grpc_requests", "empty-disks-50000.json", b"\x0a" + json.dumps(disks, separators=(",", ":")).encode())
disks = empty_disks(20_000)
text = "\n".join(["apiVersion: kubevirt.io/v1", "kind: VirtualMachineInstance",
                  "metadata: {name: issue19}", "spec: " + json.dumps(disks["spec"], separators=(",", ":"))]) + "\n"
write("vmi_bytes", "empty-disks-20000.yaml", text)
write("grpc_requests", "empty-disks-20000.json", b"\x0a" + json.dumps(disks, separators=(",", ":")).encode())
for n, name in [(4294967295, "threads-max.json"), (10_000_000, "threads-10m.json")]:
    vmi = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "issue19"},
           "spec": {"domain": {"ioThreadsPolicy": "supplementalPool", "ioThreads": {"supplementalPoolThreadCount": n},
                               "devices": {"disks": [{"name": "d", "disk": {"bus": "virtio"}}]},
                               "resources": {"requests": {"memory": "128Mi"}}},
                    "volumes": [{"name": "d", "emptyDisk": {"capacity": "1Gi"}}]}}
    write("grpc_requests", name, b"\x0a" + json.dumps(vmi).encode())
print(out)
