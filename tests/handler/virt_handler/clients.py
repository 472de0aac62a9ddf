"""virt-handler's launcher clients (KubeVirt v1.6.6
pkg/virt-handler/launcher-clients/launcher-clients.go), the socket lookup of
cmd-client/client.go, the pod isolation detection of
isolation/detector.go, and the VirtualMachineOptions of options.go.

- FindSocket: the VMI's status.activePods (pod UID -> node) on this node,
  each pod's `launcher-sock` in its sockets directory; exactly one must
  exist ("No command socket found for vmi <uid>", "Found multiple sockets").
  Kubelet keeps that directory at /pods/<pod UID>/volumes/
  kubernetes.io~empty-dir/sockets; here the test says where each pod's is.
- IsSocketUnresponsive: no sockets directory, a `launcher-unresponsive`
  marker in it, or no socket file.
- IsLauncherClientUnresponsive: (unresponsive, initialized) with the
  3-minute wait for a pod that has no socket yet.
- GetLauncherClient: NewClient (cmdclient), then the notify pipe in the
  launcher's mount namespace, found as isolation does: the pid of the
  socket's owner from SO_PEERCRED, its root /proc/<pid>/root.
- GetVerifiedLauncherClient: GetLauncherClient + Ping.
- CloseLauncherClient: closes the client and the pipe.
"""

import os
import socket
import stat
import struct
import threading
import time

from .cmdclient import CmdError, LauncherClient
from .notify import NotifyPipe
from .stubs import pb

SOCKET_NAME = "launcher-sock"
UNRESPONSIVE_NAME = "launcher-unresponsive"
SHARE_DIR = "/var/run/kubevirt"


def _exists_no_follow(path):
    """safepath.NewPathNoFollow: the path exists and no component is a link."""
    parts = [p for p in path.split("/") if p]
    cur = "/"
    for p in parts:
        cur = os.path.join(cur, p)
        try:
            if stat.S_ISLNK(os.lstat(cur).st_mode):
                return False
        except OSError:
            return False
    return True


def socket_owner_pid(path):
    """The pid of the process that listens on the unix socket `path`
    (SO_PEERCRED of a connection), as isolation.getPid does."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(path)
        cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    finally:
        s.close()
    pid = struct.unpack("3i", cred)[0]
    if pid == 0:
        raise CmdError("the detected PID is 0. Is the isolation detector running in the host PID namespace?")
    return pid


def is_non_root(vmi):
    """util.IsNonRootVMI: status.runtimeUser not 0, or the deprecated
    kubevirt.io/nonroot annotation."""
    ann = (vmi.get("metadata") or {}).get("annotations") or {}
    return "kubevirt.io/nonroot" in ann or (vmi.get("status") or {}).get("runtimeUser", 0) != 0


class LauncherClients:
    """Clients by VMI UID. `pod_dirs`: pod UID -> that pod's sockets
    directory on the host; `node`: this virt-handler's node;
    `handler_sock`: virt-handler's domain-notify.sock."""

    def __init__(self, pod_dirs, node, handler_sock, on_call=None):
        self.pod_dirs = dict(pod_dirs)
        self.node = node
        self.handler_sock = handler_sock
        self.on_call = on_call
        self.info = {}
        self.lock = threading.RLock()
        self.all_clients = []  # every client made, for the call log

    def _sockets_dir(self, pod_uid):
        return self.pod_dirs.get(pod_uid, f"/pods/{pod_uid}/volumes/kubernetes.io~empty-dir/sockets")

    def find_socket(self, vmi):
        found = []
        for pod_uid, node in ((vmi.get("status") or {}).get("activePods") or {}).items():
            if self.node and node != self.node:
                continue
            sock = os.path.join(self._sockets_dir(pod_uid), SOCKET_NAME)
            if _exists_no_follow(sock):
                found.append(sock)
        m = vmi["metadata"]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise CmdError(f"Found multiple sockets for vmi {m['namespace']}/{m['name']}. "
                           "waiting for only one to exist")
        raise CmdError(f"No command socket found for vmi {m['uid']}")

    def find_pod_dir(self, vmi):
        dirs = []
        for pod_uid in ((vmi.get("status") or {}).get("activePods") or {}):
            d = self._sockets_dir(pod_uid)
            dirs.append(d)
            if _exists_no_follow(d):
                return d
        raise CmdError(f"No pod dir found for vmi {vmi['metadata']['uid']} in paths [{','.join(dirs)}]")

    @staticmethod
    def socket_unresponsive(sock):
        d = os.path.dirname(sock)
        if not _exists_no_follow(d):
            return True
        if os.path.lexists(os.path.join(d, UNRESPONSIVE_NAME)):
            return True
        return not os.path.lexists(sock)

    def is_unresponsive(self, vmi):
        """(unresponsive, initialized)."""
        uid = vmi["metadata"]["uid"]
        with self.lock:
            ci = self.info.get(uid)
            if ci is None:
                ci = {"client": None, "socket": None, "pipe": None,
                      "not_initialized_since": time.time(), "ready": False}
                self.info[uid] = ci
                try:
                    sock = self.find_socket(vmi)
                except CmdError:
                    try:
                        self.find_pod_dir(vmi)
                    except CmdError:
                        return True, True
                    return False, False
                ci["ready"], ci["socket"] = True, sock
            elif not ci["ready"]:
                try:
                    sock = self.find_socket(vmi)
                except CmdError:
                    try:
                        self.find_pod_dir(vmi)
                    except CmdError:
                        return True, True
                    if ci["not_initialized_since"] < time.time() - 180:
                        return True, True
                    return False, False
                ci["ready"], ci["socket"] = True, sock
            return self.socket_unresponsive(ci["socket"]), True

    def get(self, vmi):
        """GetLauncherClient."""
        uid = vmi["metadata"]["uid"]
        with self.lock:
            ci = self.info.get(uid)
            if ci and ci.get("client"):
                return ci["client"]
            sock = self.find_socket(vmi)
            client = LauncherClient(sock, on_call=self.on_call)
            try:
                pid = socket_owner_pid(sock)
                pipe = NotifyPipe(pid, SHARE_DIR, self.handler_sock, non_root=is_non_root(vmi))
            except (OSError, CmdError) as e:
                client.close()
                raise CmdError(f"failed to detect isolation for launcher pod when setting up "
                               f"notify pipe: {e}") from None
            self.all_clients.append(client)
            self.info[uid] = {"client": client, "socket": sock, "pipe": pipe,
                              "not_initialized_since": time.time(), "ready": True}
            return client

    def get_verified(self, vmi):
        """GetVerifiedLauncherClient."""
        c = self.get(vmi)
        c.ping()
        return c

    def client_info(self, vmi):
        with self.lock:
            return self.info.get(vmi["metadata"]["uid"])

    def close(self, uid):
        """CloseLauncherClient."""
        with self.lock:
            ci = self.info.pop(uid, None)
        if ci and ci.get("client"):
            ci["client"].close()
            ci["pipe"].close()

    def detect_pid(self, vmi):
        """isolation.Detect: the launcher's pid."""
        return socket_owner_pid(self.find_socket(vmi))

    def calls(self, method=None):
        """Every call made by any client, in order."""
        out = []
        for c in list(self.all_clients):
            out.extend(c.calls)
        out.sort(key=lambda r: r["start"])
        return [r for r in out if method is None or r["method"] == method]


def node_topology():
    """The node's NUMA topology as virt-handler sends it (options.go
    capabilitiesToTopology), read from sysfs as libvirt's capabilities
    report it: cells with memory (KiB), page counts per size, distances
    and CPUs with their thread siblings."""
    base = "/sys/devices/system/node"
    topo = pb.cmd.Topology()
    try:
        nodes = sorted(int(n[4:]) for n in os.listdir(base) if n.startswith("node") and n[4:].isdigit())
    except OSError:
        return topo
    for n in nodes:
        d = f"{base}/node{n}"
        cell = pb.cmd.Cell(id=n)
        try:
            for line in open(f"{d}/meminfo", encoding="ascii"):
                if "MemTotal:" in line:
                    cell.memory.amount = int(line.split()[-2])
                    cell.memory.unit = "KiB"
        except OSError:
            pass
        pages = [(4, None)]
        try:
            pages += [(int(h.split("-")[1][:-2]), h) for h in sorted(os.listdir(f"{d}/hugepages"))]
        except OSError:
            pass
        for size, h in pages:
            if h is None:
                count = cell.memory.amount // 4 if cell.memory.amount else 0
            else:
                try:
                    count = int(open(f"{d}/hugepages/{h}/nr_hugepages", encoding="ascii").read())
                except OSError:
                    count = 0
            cell.pages.append(pb.cmd.Pages(count=count, unit="KiB", size=size))
        try:
            for i, v in enumerate(open(f"{d}/distance", encoding="ascii").read().split()):
                cell.distances.append(pb.cmd.Sibling(id=nodes[i] if i < len(nodes) else i, value=int(v)))
        except OSError:
            pass
        for c in _cpulist(f"{d}/cpulist"):
            sib = _cpulist(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list")
            cell.cpus.append(pb.cmd.CPU(id=c, siblings=sib))
        topo.numa_cells.append(cell)
    return topo


def _cpulist(path):
    try:
        text = open(path, encoding="ascii").read().strip()
    except OSError:
        return []
    out = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out
