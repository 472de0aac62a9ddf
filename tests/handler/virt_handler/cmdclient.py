"""virt-handler's command client (KubeVirt v1.6.6
pkg/virt-handler/cmd-client/client.go), against the launcher's socket.

As client.go: the dial blocks for at most 2 s with authority `localhost`;
CmdInfo.Info (5 s) picks the highest version both sides support (only 1);
every method has client.go's timeout (5 s short, 20 s long, 60 s Freeze,
timeoutSeconds + 5 s for Exec/GuestPing); errors are handled as
handleError does (a disconnect or Unimplemented is returned as it is,
another transport error becomes "unknown error encountered sending command
<Name>: <err>", success=false becomes `server error. command <Name> failed:
"<message>"`); answers are JSON-decoded into KubeVirt's Go types strictly
(gotypes), with client.go's special cases: GetDomain's empty `domain` means
"no domain", GetDomainStats' `null` decodes to empty stats that exist,
an empty GetQemuVersion is an error.

Each call is recorded in `calls` (name, start and end time, outcome) so that
scenarios can check what was sent and when.
"""

import json
import threading
import time

import grpc

from . import gotypes
from .stubs import pb

SHORT = 5.0
LONG = 20.0
EXTENDED = 60.0
SUPPORTED_CMD_VERSIONS = [1]


class CmdError(Exception):
    """An error as cmd-client returns it; `disconnected` as IsDisconnected."""

    def __init__(self, message, disconnected=False, unimplemented=False, code=None):
        super().__init__(message)
        self.disconnected = disconnected
        self.unimplemented = unimplemented
        self.code = code


def _go_code(code):
    """A grpc.StatusCode as Go's codes.Code prints."""
    return "".join(w.capitalize() for w in code.name.split("_")).replace("Ok", "OK")


def rpc_error_text(e):
    """Go's status error text: `rpc error: code = X desc = Y`."""
    return f"rpc error: code = {_go_code(e.code())} desc = {e.details()}"


def go_quote(s):
    """Go's %q of a string (strconv.Quote) for the printable ASCII and
    common escapes the launcher's messages use."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def handle_error(err, name, response):
    """client.go's handleError: raises CmdError, or returns None."""
    if err is not None:
        code = err.code()
        if code == grpc.StatusCode.CANCELLED:
            raise CmdError(rpc_error_text(err), disconnected=True, code=code)
        if code == grpc.StatusCode.UNIMPLEMENTED:
            raise CmdError(rpc_error_text(err), unimplemented=True, code=code)
        raise CmdError(f"unknown error encountered sending command {name}: {rpc_error_text(err)}",
                       code=code)
    if response is not None and not response.success:
        raise CmdError(f"server error. command {name} failed: {go_quote(response.message)}")


class LauncherClient:
    """One connection to a launcher's command socket (NewClient)."""

    def __init__(self, socket_path, on_call=None):
        self.socket_path = socket_path
        self.calls = []
        self.on_call = on_call
        self._lock = threading.Lock()
        self.channel = grpc.insecure_channel(
            f"unix://{socket_path}", options=[("grpc.default_authority", "localhost")])
        try:
            grpc.channel_ready_future(self.channel).result(timeout=2)
        except grpc.FutureTimeoutError:
            self.channel.close()
            raise CmdError(f"failed to dial cmd socket {socket_path}: context deadline exceeded") from None
        info = pb.info_grpc.CmdInfoStub(self.channel)
        try:
            r = info.Info(pb.info.CmdInfoRequest(), timeout=SHORT)
        except grpc.RpcError as e:
            self.channel.close()
            raise CmdError(f"could not check cmd server version: {rpc_error_text(e)}") from None
        common = [v for v in r.supportedCmdVersions if v in SUPPORTED_CMD_VERSIONS]
        if not common:
            self.channel.close()
            raise CmdError(f"no compatible version found, server: {list(r.supportedCmdVersions)}, "
                           f"client: {SUPPORTED_CMD_VERSIONS}")
        self.version = max(common)
        self.stub = pb.cmd_grpc.CmdStub(self.channel)

    def close(self):
        self.channel.close()

    # -- plumbing ------------------------------------------------------
    def _call(self, method, request, timeout, name, extract=lambda r: r):
        """Runs one RPC, records it, applies handleError to (err, extract(r))."""
        start = time.time()
        rec = {"method": method, "start": start}
        try:
            r = getattr(self.stub, method)(request, timeout=timeout)
            err = None
        except grpc.RpcError as e:
            r, err = None, e
        rec["end"] = time.time()
        try:
            handle_error(err, name, extract(r) if r is not None else None)
            rec["ok"] = True
            return r
        except CmdError as e:
            rec["ok"] = False
            rec["error"] = str(e)
            raise
        finally:
            with self._lock:
                self.calls.append(rec)
            if self.on_call:
                self.on_call(rec)

    @staticmethod
    def vmi_request(vmi_json, options=None):
        """A VMIRequest with the VMI JSON (bytes) and options (or the empty
        VirtualMachineOptions client.go sends with most commands)."""
        return pb.cmd.VMIRequest(vmi=pb.cmd.VMI(vmiJson=vmi_json),
                                 options=options if options is not None else pb.cmd.VirtualMachineOptions())

    def _vmi_cmd(self, method, name, vmi_json, options=None):
        self._call(method, self.vmi_request(vmi_json, options), LONG, name)

    # -- VMI commands (genericSendVMICmd) ---------------------------------
    def sync_virtual_machine(self, vmi_json, options):
        self._vmi_cmd("SyncVirtualMachine", "SyncVMI", vmi_json, options)

    def pause_virtual_machine(self, vmi_json):
        self._vmi_cmd("PauseVirtualMachine", "Pause", vmi_json)

    def unpause_virtual_machine(self, vmi_json):
        self._vmi_cmd("UnpauseVirtualMachine", "Unpause", vmi_json)

    def shutdown_virtual_machine(self, vmi_json):
        self._vmi_cmd("ShutdownVirtualMachine", "Shutdown", vmi_json)

    def kill_virtual_machine(self, vmi_json):
        self._vmi_cmd("KillVirtualMachine", "Kill", vmi_json)

    def delete_domain(self, vmi_json):
        self._vmi_cmd("DeleteVirtualMachine", "Delete", vmi_json)

    def sync_migration_target(self, vmi_json, options):
        self._vmi_cmd("SyncMigrationTarget", "SyncMigrationTarget", vmi_json, options)

    def cancel_virtual_machine_migration(self, vmi_json):
        self._vmi_cmd("CancelVirtualMachineMigration", "CancelMigration", vmi_json)

    def signal_target_pod_cleanup(self, vmi_json):
        self._vmi_cmd("SignalTargetPodCleanup", "SignalTargetPodCleanup", vmi_json)

    def finalize_virtual_machine_migration(self, vmi_json, options):
        self._vmi_cmd("FinalizeVirtualMachineMigration", "FinalizeVirtualMachineMigration", vmi_json,
                      options)

    def migrate_virtual_machine(self, vmi_json, options_json):
        """MigrateVirtualMachine: the VMI and json.Marshal of MigrationOptions."""
        req = pb.cmd.MigrationRequest(vmi=pb.cmd.VMI(vmiJson=vmi_json), options=options_json)
        self._call("MigrateVirtualMachine", req, LONG, "Migrate")

    def virtual_machine_memory_dump(self, vmi_json, dump_path):
        req = pb.cmd.MemoryDumpRequest(vmi=pb.cmd.VMI(vmiJson=vmi_json), dumpPath=dump_path)
        self._call("VirtualMachineMemoryDump", req, LONG, "Memorydump")

    def ping(self):
        self._call("Ping", pb.cmd.EmptyRequest(), SHORT, "Ping")

    # -- answers -------------------------------------------------------
    def get_domain(self):
        """(domain dict or None, exists)."""
        r = self._call("GetDomain", pb.cmd.EmptyRequest(), SHORT, "GetDomain", lambda r: r.response)
        if r.domain == "":
            return None, False
        return gotypes.decode(r.domain, gotypes.DOMAIN, "GetDomain .domain"), True

    def get_domain_stats(self):
        """(stats dict, exists); `null` decodes to {} that exists, as in Go."""
        r = self._call("GetDomainStats", pb.cmd.EmptyRequest(), SHORT, "GetDomainStats",
                       lambda r: r.response)
        if r.domainStats == "":
            return {}, False
        v = gotypes.decode(r.domainStats, gotypes.DOMAIN_STATS, "GetDomainStats .domainStats")
        return (v if v is not None else {}), True

    def get_guest_info(self):
        r = self._call("GetGuestInfo", pb.cmd.EmptyRequest(), SHORT, "GetGuestInfo",
                       lambda r: r.response)
        if r.guestInfoResponse == "":
            return {}
        v = gotypes.decode(r.guestInfoResponse, gotypes.GUEST_AGENT_INFO,
                           "GetGuestInfo .guestInfoResponse")
        return v if v is not None else {}

    def get_users(self):
        r = self._call("GetUsers", pb.cmd.EmptyRequest(), SHORT, "GetUsers", lambda r: r.response)
        if r.guestUserListResponse == "":
            return {"items": None}
        v = gotypes.decode(r.guestUserListResponse, gotypes.GUEST_OS_USER_LIST,
                           "GetUsers .guestUserListResponse")
        return {"items": v}

    def get_filesystems(self):
        r = self._call("GetFilesystems", pb.cmd.EmptyRequest(), SHORT, "GetFilesystems",
                       lambda r: r.response)
        if r.guestFilesystemsResponse == "":
            return {"items": None}
        v = gotypes.decode(r.guestFilesystemsResponse, gotypes.FILESYSTEM_LIST,
                           "GetFilesystems .guestFilesystemsResponse")
        return {"items": v}

    def get_qemu_version(self):
        r = self._call("GetQemuVersion", pb.cmd.EmptyRequest(), SHORT, "GetQemuVersion",
                       lambda r: r.response)
        if not r.version:
            raise CmdError("error getting the qemu version")
        return r.version

    def get_domain_dirty_rate_stats(self):
        r = self._call("GetDomainDirtyRateStats", pb.cmd.EmptyRequest(), LONG,
                       "GetDomainDirtyRateStats", lambda r: r.response)
        return r.dirtyRateMbs

    def exec(self, domain_name, command, args, timeout_seconds):
        """(exit code, stdout); client.go returns -1 and the raw gRPC error
        when the launcher answered with one."""
        req = pb.cmd.ExecRequest(domainName=domain_name, Command=command, Args=args,
                                 timeoutSeconds=timeout_seconds)
        start = time.time()
        try:
            r = self.stub.Exec(req, timeout=timeout_seconds + SHORT)
        except grpc.RpcError as e:
            with self._lock:
                self.calls.append({"method": "Exec", "start": start, "end": time.time(),
                                   "ok": False, "error": rpc_error_text(e)})
            raise CmdError(rpc_error_text(e), code=e.code()) from None
        with self._lock:
            self.calls.append({"method": "Exec", "start": start, "end": time.time(), "ok": True})
        return r.exitCode, r.stdOut

    def guest_ping(self, domain_name, timeout_seconds):
        req = pb.cmd.GuestPingRequest(domainName=domain_name, timeoutSeconds=timeout_seconds)
        try:
            self.stub.GuestPing(req, timeout=timeout_seconds + SHORT)
        except grpc.RpcError as e:
            raise CmdError(rpc_error_text(e), code=e.code()) from None


def dumps_go(v):
    """JSON text of `v` as Go's json.Marshal writes it (compact, HTML-safe
    escapes)."""
    s = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
