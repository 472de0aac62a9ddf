"""Starting a standalone `virt-launcher run` of the test guest for the
benchmark scripts (scale.py, soak.py, migration.py): the binary, the
command line, the command socket and `ctl`, in one place.

Each launcher runs in a session of its own (so a script can kill its whole
process group), under TCG (`--use-emulation`: the numbers do not depend on
the host's KVM), with the test guest as its container disk.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The test guest (`tests/guest/build`), the containerDisk of every VMI here.
IMAGE = ROOT / "target/test-guest/disk.img"


def default_bin():
    """target/release/virt-launcher when built, else target/debug's."""
    rel = ROOT / "target/release/virt-launcher"
    return rel if rel.exists() else ROOT / "target/debug/virt-launcher"


def binary(arg):
    """The binary given with --bin, else the built one; exits when none is."""
    if arg:
        return Path(arg)
    b = default_bin()
    if not b.exists():
        sys.exit("no target/{release,debug}/virt-launcher: cargo build -p virt-launcher")
    return b


def start(bin_path, vmi_yaml, state_dir, *extra, stdout=subprocess.DEVNULL,
          stderr=None, text=False):
    """Popen of `virt-launcher run VMI --container-disk containerdisk=IMAGE
    --state-dir STATE --use-emulation EXTRA...` in a new session."""
    return subprocess.Popen(
        [str(bin_path), "run", str(vmi_yaml), "--container-disk", f"containerdisk={IMAGE}",
         "--state-dir", str(state_dir), "--use-emulation", *extra],
        stdout=stdout, stderr=stderr, text=text, start_new_session=True)


def socket(state_dir):
    """The command socket of the launcher whose state directory is STATE."""
    return Path(state_dir) / "share/sockets/launcher-sock"


def ctl(bin_path, sock, *args, timeout=60):
    """`virt-launcher ctl --socket SOCK ARGS...`: the CompletedProcess."""
    return subprocess.run([str(bin_path), "ctl", "--socket", str(sock), *args],
                          capture_output=True, text=True, timeout=timeout)
