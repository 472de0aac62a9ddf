#!/bin/bash
# Installs what is missing, builds virt-launcher and the test guest, then
# runs KubeVirt's own example VMI (tests/data/examples/vmi-sata.yaml) with
# the test guest standing in for its container image: shows the guest's
# serial console until it is up, the domain as libvirt sees it, then shuts
# it down the way Kubernetes would (SIGTERM). DEMO_KEEP=1 keeps it running
# until Ctrl-C. DEMO_KVM=1 uses KVM instead of software emulation (TCG);
# the default is TCG, because nested /dev/kvm on some hosts cannot run guests.
set -euo pipefail
cd "$(dirname "$0")"

bash .ci/install
# The test guest's build is mostly downloading Debian packages: it runs
# beside cargo, whose last step (the link) leaves a core idle anyway. The
# `demo` profile (Cargo.toml) builds in parallel; the image uses `release`.
GUEST_LOG=$(mktemp /tmp/virt-launcher-demo-guest.XXXXXX)
tests/guest/build >"$GUEST_LOG" 2>&1 &
GUEST_BUILD=$!
if ! cargo build --profile demo --locked --bin virt-launcher; then
    wait $GUEST_BUILD || true
    rm -f "$GUEST_LOG"
    exit 1
fi
if ! wait $GUEST_BUILD; then
    cat "$GUEST_LOG"; rm -f "$GUEST_LOG"
    echo "tests/guest/build failed" >&2
    exit 1
fi
cat "$GUEST_LOG"; rm -f "$GUEST_LOG"

VMI=${1:-tests/data/examples/vmi-sata.yaml}
STATE=$(mktemp -d /tmp/virt-launcher-demo.XXXXXX)
UID_=demo-$$
EMU=(--use-emulation)
[ "${DEMO_KVM:-0}" = 1 ] && EMU=()

echo "== virt-launcher run $VMI"
target/demo/virt-launcher run "$VMI" "${EMU[@]}" \
    --container-disk containerdisk="$PWD/target/test-guest/disk.img" \
    --state-dir "$STATE/state" --uid "$UID_" --keep-state >"$STATE/launcher.log" 2>&1 &
LAUNCHER=$!
trap 'kill -TERM $LAUNCHER 2>/dev/null; wait $LAUNCHER 2>/dev/null; rm -rf "$STATE"' EXIT

SERIAL="$STATE/state/private/$UID_/virt-serial0-log"
echo "== serial console ($SERIAL)"
for _ in $(seq 600); do
    if grep -q GUEST-READY "$SERIAL" 2>/dev/null; then break; fi
    if ! kill -0 $LAUNCHER 2>/dev/null; then cat "$STATE/launcher.log"; exit 1; fi
    sleep 0.2
done
tr -d '\r' <"$SERIAL" | grep -v '^$'
grep -q GUEST-READY "$SERIAL" || { echo "the guest did not come up"; cat "$STATE/launcher.log"; exit 1; }

URI="qemu+unix:///system?socket=$STATE/state/libvirt/run/libvirt-sock"
echo "== the domain, through the launcher's own libvirt daemon"
virsh -c "$URI" list --all
virsh -c "$URI" dominfo default_vmi-sata 2>/dev/null | grep -E 'Name|UUID|State|CPU\(s\)|Max memory' || true

if [ "${DEMO_KEEP:-0}" = 1 ]; then
    echo "== running; Ctrl-C to shut it down"
    wait $LAUNCHER || true
else
    echo "== SIGTERM: graceful shutdown"
    kill -TERM $LAUNCHER
    wait $LAUNCHER && echo "launcher exited 0"
    tr -d '\r' <"$SERIAL" | grep -E 'GUEST-SHUTDOWN|Power down' || true
fi
trap 'rm -rf "$STATE"' EXIT
