"""virt-handler's side of the notify channel (KubeVirt v1.6.6
pkg/virt-handler/notify-server/server.go, cache/domain-watcher.go and the
notify pipe of launcher-clients/launcher-clients.go), and the checks of the
domain fields virt-handler reads.

- `NotifyServer` serves virt-handler's own `domain-notify.sock` (NotifyInfo
  answers [1]). HandleDomainEvent decodes `domainJSON` into api.Domain and
  `statusJSON` into metav1.Status (gotypes, strictly) and answers
  success=false with the decode error when Go's decoder would fail;
  ADDED/MODIFIED/DELETED go to the domain informer, ERROR makes the
  informer list again (the reflector restarts its watch: GetDomain on the
  launcher). HandleK8sEvent decodes a core/v1 Event and records it on the
  VMI when involvedObject's namespace/name/UID are the VMI's, else answers
  "VMI not found".
- `NotifyPipe` is what virt-handler puts into the launcher's pod when it
  first connects to it: a listener at
  /proc/<launcher pid>/root/var/run/kubevirt/domain-notify-pipe.sock
  (reached without following links) whose connections are byte-copied to
  `domain-notify.sock`.
- `check_domain` holds what virt-handler dereferences or keys on in a domain
  (see its docstring); anything else is type-checked by gotypes.
"""

import json
import os
import socket
import stat
import threading
from concurrent import futures

import grpc

from . import gotypes
from .stubs import pb

LIFECYCLES = {"NoState", "Running", "Blocked", "Paused", "ShuttingDown", "Shutoff", "Crashed",
              "PMSuspended"}
REASONS = {"Unknown", "User", "Shutdown", "Destroyed", "Migrated", "Crashed", "Panicked", "Saved",
           "Failed", "FromSnapshot", "NonExistent", "Migration", "Save", "Dump", "IOError",
           "Watchdog", "ShuttingDown", "Snapshot", "StartingUp", "Postcopy", "PostcopyFailed"}


def check_domain(d, namespace, name, uid, final=False):
    """Problems virt-handler would have with domain `d` of VMI
    namespace/name/uid (a list of strings):
    - ObjectMeta name/namespace are the informer key: another key files the
      domain under another VMI;
    - Spec.Metadata.KubeVirt.UID other than the VMI's makes execute() treat
      the domain as a stale one of an earlier VMI and clean it up
      (only for a domain that exists: not the final deletion notice);
    - Status.Status/Reason drive every decision: unknown strings fall
      through calculateVmPhaseForStatusReason;
    - netstat reads Interfaces[].Alias.GetName() and .MAC.MAC through
      pointers, updateVolumeStatusesFromDomain reads Disks[].Alias for disks
      with a source file or device: a null there panics virt-handler."""
    p = []
    meta = d.get("ObjectMeta") or {}
    if meta.get("name") != name or meta.get("namespace") != namespace:
        p.append(f"ObjectMeta {meta.get('namespace')}/{meta.get('name')} is not the VMI's "
                 f"{namespace}/{name}")
    kv_uid = (((d.get("Spec") or {}).get("Metadata") or {}).get("KubeVirt") or {}).get("UID")
    if not final and not meta.get("deletionTimestamp") and kv_uid != uid:
        p.append(f"Spec.Metadata.KubeVirt.UID {kv_uid!r} is not the VMI's {uid!r}: virt-handler "
                 "would take the domain for a stale one")
    st = d.get("Status") or {}
    if st.get("Status") not in LIFECYCLES:
        p.append(f"Status.Status {st.get('Status')!r} is not one of KubeVirt's LifeCycle values")
    if st.get("Reason") not in REASONS:
        p.append(f"Status.Reason {st.get('Reason')!r} is not one of KubeVirt's reasons")
    dev = ((d.get("Spec") or {}).get("Devices") or {})
    for i, ifc in enumerate(dev.get("Interfaces") or []):
        if ifc.get("Alias") is None:
            p.append(f"Spec.Devices.Interfaces[{i}].Alias is null (netstat dereferences it)")
        if ifc.get("MAC") is None:
            p.append(f"Spec.Devices.Interfaces[{i}].MAC is null (netstat dereferences it)")
    for i, disk in enumerate(dev.get("Disks") or []):
        src = disk.get("Source") or {}
        if (src.get("File") or src.get("Dev")) and disk.get("Alias") is None:
            p.append(f"Spec.Devices.Disks[{i}].Alias is null for a disk with a source "
                     "(updateVolumeStatusesFromDomain dereferences it)")
    return p


class DomainInformer:
    """virt-handler's domain cache: the last domain per namespace/name,
    fed by notify events and by lists (GetDomain)."""

    def __init__(self, on_change):
        self._lock = threading.Lock()
        self.store = {}
        self.on_change = on_change
        self.relist = None  # set by the controller: lists domains by GetDomain

    def apply(self, event_type, domain):
        k = f'{domain["ObjectMeta"].get("namespace")}/{domain["ObjectMeta"].get("name")}'
        with self._lock:
            if event_type == "DELETED":
                self.store.pop(k, None)
            else:
                self.store[k] = domain
        self.on_change(k)

    def replace(self, domains):
        with self._lock:
            old = set(self.store)
            self.store = {f'{d["ObjectMeta"].get("namespace")}/{d["ObjectMeta"].get("name")}': d
                          for d in domains}
            keys = old | set(self.store)
        for k in keys:
            self.on_change(k)

    def get(self, k):
        with self._lock:
            return self.store.get(k)

    def delete(self, k):
        with self._lock:
            self.store.pop(k, None)


class NotifyServer:
    """The notify gRPC server on `<handler_dir>/domain-notify.sock`."""

    def __init__(self, handler_dir, informer, cluster, events_log, violation):
        self.sock = os.path.join(handler_dir, "domain-notify.sock")
        self.informer = informer
        self.cluster = cluster
        self.violation = violation
        self.events = []  # (type, domain or None, status or None, time)
        self.recorded = []  # K8s events recorded on the VMI
        self.cond = threading.Condition()
        self.log = open(events_log, "w", encoding="utf-8") if events_log else None
        srv = self

        class Notify(pb.notify_grpc.NotifyServicer):
            def HandleDomainEvent(self, req, ctx):
                return srv._domain_event(req)

            def HandleK8sEvent(self, req, ctx):
                return srv._k8s_event(req)

        class Info(pb.notify_info_grpc.NotifyInfoServicer):
            def Info(self, req, ctx):
                return pb.notify_info.NotifyInfoResponse(supportedNotifyVersions=[1])

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb.notify_grpc.add_NotifyServicer_to_server(Notify(), self.server)
        pb.notify_info_grpc.add_NotifyInfoServicer_to_server(Info(), self.server)
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.server.add_insecure_port(f"unix://{self.sock}")
        self.server.start()

    def stop(self):
        self.server.stop(0)
        if self.log:
            self.log.close()

    def _write(self, rec):
        if self.log:
            self.log.write(json.dumps(rec) + "\n")
            self.log.flush()

    def _decode(self, raw, gotype, what):
        """Go's decode of raw bytes: (value, go error text or None)."""
        try:
            return gotypes.decode(raw, gotype, what), None
        except gotypes.GoDecodeError as e:
            self.violation(str(e))
            return e.value, (str(e) if e.go_fails else None)

    def _domain_event(self, req):
        import time
        dom = st = None
        if req.domainJSON:
            dom, err = self._decode(req.domainJSON, gotypes.DOMAIN, f"{req.eventType} domainJSON")
            if err:
                return pb.notify.Response(success=False, message=err)
        if req.statusJSON:
            st, err = self._decode(req.statusJSON, gotypes.METAV1_STATUS, f"{req.eventType} statusJSON")
            if err:
                return pb.notify.Response(success=False, message=err)
        if req.eventType not in ("ADDED", "MODIFIED", "DELETED", "ERROR"):
            self.violation(f"event type {req.eventType!r}: the notify server ignores it")
        if req.eventType in ("ADDED", "MODIFIED", "DELETED"):
            if dom is None:
                self.violation(f"{req.eventType} without domainJSON")
            else:
                vmi = self.cluster.get()
                if vmi:
                    m = vmi["metadata"]
                    for p in check_domain(dom, m["namespace"], m["name"], m["uid"]):
                        self.violation(f"{req.eventType} event: {p}")
        if req.eventType == "ERROR" and dom:
            self.violation("ERROR event with a domainJSON (virt-handler only reads statusJSON)")
        with self.cond:
            self.events.append((req.eventType, dom, st, time.time()))
            self.cond.notify_all()
        self._write({"type": req.eventType, "domain": dom, "status": st})
        if req.eventType in ("ADDED", "MODIFIED", "DELETED") and dom is not None:
            self.informer.apply(req.eventType, dom)
        elif req.eventType == "ERROR" and self.informer.relist:
            threading.Thread(target=self.informer.relist, daemon=True).start()
        return pb.notify.Response(success=True)

    def _k8s_event(self, req):
        try:
            ev = gotypes.decode(req.eventJSON, gotypes.K8S_EVENT, "K8s eventJSON")
        except gotypes.GoDecodeError as e:
            self.violation(str(e))
            if e.go_fails:
                return pb.notify.Response(success=False, message=f"Error unmarshalling k8s event: {e}")
            ev = e.value
        inv = ev.get("involvedObject") or {}
        vmi = self.cluster.get()
        self._write({"type": "K8S", "event": ev})
        if (vmi is None or inv.get("namespace") != vmi["metadata"]["namespace"]
                or inv.get("name") != vmi["metadata"]["name"] or inv.get("uid") != vmi["metadata"]["uid"]):
            self.violation(f"K8s event for {inv}: VMI not found")
            return pb.notify.Response(success=False, message="VMI not found")
        with self.cond:
            self.recorded.append({"type": ev.get("type"), "reason": ev.get("reason"),
                                  "message": ev.get("message")})
            self.cond.notify_all()
        return pb.notify.Response(success=True)

    def wait(self, pred, timeout, what, start=0):
        """The first event from index `start` on with pred(event) true, and
        its index; TimeoutError naming `what`."""
        import time
        deadline = time.time() + timeout
        with self.cond:
            while True:
                for i in range(start, len(self.events)):
                    if pred(self.events[i]):
                        return self.events[i], i
                left = deadline - time.time()
                if left <= 0:
                    seen = [(t, d and d.get("Status")) for t, d, _, _ in self.events[-12:]]
                    raise TimeoutError(f"no {what} notification within {timeout:.0f}s; last: {seen}")
                self.cond.wait(left)


def open_in_root(root, rel, max_links=40):
    """An O_PATH descriptor of directory `rel` resolved inside `root` as
    KubeVirt's safepath.JoinAndResolveWithRelativeRoot does: links are
    followed, but an absolute target starts again at `root` and `..` never
    climbs above it (the launcher's /var/run is a link to /run)."""
    rootfd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    stack = []  # descriptors of the path so far, below root
    todo = [p for p in rel.split("/") if p]
    links = 0
    try:
        while todo:
            part = todo.pop(0)
            cur = stack[-1] if stack else rootfd
            if part == ".":
                continue
            if part == "..":
                if stack:
                    os.close(stack.pop())
                continue
            st = os.stat(part, dir_fd=cur, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > max_links:
                    raise OSError(f"too many links resolving {rel} in {root}")
                target = os.readlink(part, dir_fd=cur)
                if target.startswith("/"):
                    while stack:
                        os.close(stack.pop())
                todo = [p for p in target.split("/") if p] + todo
                continue
            stack.append(os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=cur))
        if stack:
            fd = stack.pop()
        else:
            fd = os.dup(rootfd)
        return fd
    finally:
        for fd in stack:
            os.close(fd)
        os.close(rootfd)


class NotifyPipe:
    """domain-notify-pipe.sock in the launcher's mount namespace, proxied
    to virt-handler's domain-notify.sock (startDomainNotifyPipe)."""

    NAME = "domain-notify-pipe.sock"

    def __init__(self, launcher_pid, share_dir, handler_sock, non_root=False):
        self.handler_sock = handler_sock
        self.dirfd = open_in_root(f"/proc/{launcher_pid}/root", share_dir)
        self.path = f"/proc/self/fd/{self.dirfd}/{self.NAME}"
        self.ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            os.unlink(self.NAME, dir_fd=self.dirfd)
        except FileNotFoundError:
            pass
        self.ln.bind(self.path)
        if non_root:
            # launcher-clients.go: a non-root launcher (107) must be able to
            # dial it (SetFileOwnership, 107:107).
            os.chown(self.NAME, 107, 107, dir_fd=self.dirfd, follow_symlinks=False)
        self.ln.listen(16)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.ln.accept()
            except OSError:
                return
            threading.Thread(target=self._proxy, args=(c,), daemon=True).start()

    def _proxy(self, c):
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(self.handler_sock)
        except OSError:
            c.close()
            return

        def copy(a, b):
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        t = threading.Thread(target=copy, args=(up, c), daemon=True)
        t.start()
        copy(c, up)
        t.join()
        c.close()
        up.close()

    def close(self):
        """Closes the listener and removes the socket, as Go's listener
        Close does."""
        if self.closed:
            return
        self.closed = True
        try:
            self.ln.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        except OSError:
            pass
        try:
            self.ln.close()
            os.unlink(self.NAME, dir_fd=self.dirfd)
        except OSError:
            pass
        os.close(self.dirfd)
