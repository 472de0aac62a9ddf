#!/bin/bash
# /usr/bin/node-labeller.sh: what virt-handler's node-labeller init container
# runs from the launcher image (KubeVirt v1.6.6
# cmd/virt-launcher/node-labeller/node-labeller.sh, rewritten for this image):
# starts the image's libvirt daemon and writes what libvirt reports about
# this node into /var/lib/kubevirt-node-labeller (a volume virt-handler
# reads): virsh_domcapabilities.xml, supported_features.xml (x86_64 and
# s390x) and capabilities.xml.
#
# The one difference: KubeVirt's image starts virtqemud; Debian 12 ships only
# the monolithic libvirtd, so libvirtd is started when virtqemud is absent
# (both answer virsh's qemu:///system the same way).
set -xeo pipefail

OUT=/var/lib/kubevirt-node-labeller
arch=$(uname -m)
case "$arch" in
    x86_64) machine=q35 ;;
    aarch64) machine=virt ;;
    s390x) machine=s390-ccw-virtio ;;
    *) exit 0 ;;   # no labels for other architectures, as KubeVirt
esac

# KVM when the node has it: the device node (made when only /proc/misc
# knows it) must be usable by the daemon's QEMU probes.
kvm_minor=$(awk '$2 == "kvm" {print $1}' /proc/misc 2>/dev/null || true)
if [ ! -e /dev/kvm ] && [ -n "$kvm_minor" ]; then
    mknod /dev/kvm c 10 "$kvm_minor"
fi
virttype=qemu
if [ -e /dev/kvm ]; then
    chmod o+rw /dev/kvm
    virttype=kvm
fi
# QEMU reads SEV's capabilities through /dev/sev.
if [ -e /dev/sev ]; then
    chmod o+rw /dev/sev
fi

if command -v virtqemud >/dev/null; then
    virtqemud -d
else
    libvirtd -d
fi

caps=(--machine "$machine" --arch "$arch" --virttype "$virttype")
virsh domcapabilities "${caps[@]}" > "$OUT/virsh_domcapabilities.xml"
if [ "$arch" = x86_64 ] || [ "$arch" = s390x ]; then
    # hypervisor-cpu-baseline works on these two only.
    virsh domcapabilities "${caps[@]}" \
        | virsh hypervisor-cpu-baseline --features /dev/stdin "${caps[@]}" \
        > "$OUT/supported_features.xml"
fi
virsh capabilities > "$OUT/capabilities.xml"
