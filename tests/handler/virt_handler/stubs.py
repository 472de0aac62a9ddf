"""gRPC stubs generated at import time from the project's .proto files
(crates/cmd/proto) with grpcio-tools, so the stand-in shares no code with
the launcher. `pb.cmd`, `pb.cmd_grpc`, `pb.info`, ... are the modules."""

import importlib
import subprocess
import sys
import tempfile
import types
from pathlib import Path

PROTO = Path(__file__).resolve().parents[3] / "crates/cmd/proto"
_FILES = ["cmd", "info", "notify", "notify_info"]


def _generate():
    out = tempfile.mkdtemp(prefix="virt-handler-stubs-")
    for f in _FILES:
        r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}",
                            f"--python_out={out}", f"--grpc_python_out={out}", str(PROTO / f"{f}.proto")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"protoc {f}.proto (grpcio-tools: bash .ci/install): {r.stderr}")
    sys.path.insert(0, out)
    ns = types.SimpleNamespace()
    for f in _FILES:
        setattr(ns, f, importlib.import_module(f"{f}_pb2"))
        setattr(ns, f"{f}_grpc", importlib.import_module(f"{f}_pb2_grpc"))
    return ns


pb = _generate()
