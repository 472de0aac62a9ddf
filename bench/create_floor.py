#!/usr/bin/env python3
"""libvirt's and QEMU's own floor under the launcher's start (issue 20, item 4).

`bench/launcher.py` measures start -> domain running for the whole launcher.
This script splits off the part that is libvirt's and QEMU's alone: how long
a warm libvirt daemon takes to start a given domain (`virsh start` of a
defined domain: what the launcher's `virDomainCreate` costs), for

  * ours:      the domain this launcher defines for the benchmark VMI
               (KubeVirt's vmi-sata example), read back from its libvirt;
  * kubevirt:  KubeVirt v1.6.6's converter output for the same VMI
               (`tests/data/reference/kubevirt-v1.6.6/liveupdate/vmi-sata.xml`)
               after KubeVirt's define-time steps (placeholder interfaces,
               extra root ports: the procedure `tests/e2e/parity.rs` checks
               the launcher against) and KubeVirt's cache/io rule;
  * ours-threads: ours without `io='native'` (the io mode alone);
  * minimal:   ours reduced to memory, one vCPU, the disk and the serial
               console (no NIC, display, balloon, hot-plug vCPUs or spare
               root ports): QEMU's own floor for this guest.

All in the same warm daemon: a launcher started as `bench/launcher.py` does
(`run`, TCG, vmi-sata, the test guest), whose own guest keeps running; each
copy gets its own name, UUID, qcow2 overlay over the test guest image,
sockets and tap (made in the launcher's pod network namespace), so nothing
is shared with the launcher's domain. The runs are interleaved (ours,
kubevirt, ours-threads, minimal, ours, ...); `virsh start` wall time minus
the median wall time of a `virsh domstate` on the same connection (virsh's
own start-up and connect) is reported, median and spread, and the CPU time
libvirtd and the new QEMU spent meanwhile (every thread's schedstat: a
figure the machine's other load changes much less than the wall time).

Usage: python3 bench/create_floor.py [--runs N] [--bin PATH]   (as root)
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VMI = ROOT / "tests/data/examples/vmi-sata.yaml"
IMAGE = ROOT / "target/test-guest/disk.img"
REFERENCE = ROOT / "tests/data/reference/kubevirt-v1.6.6/liveupdate/vmi-sata.xml"


def virsh(uri, *args, check=True):
    r = subprocess.run(["virsh", "-q", "-c", uri, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"virsh {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


def devices(xml):
    return xml.split("<devices>", 1)[1].split("</devices>", 1)[0]


def elements(section, tag):
    """Top-level `<tag ...>...</tag>` or `<tag .../>` elements of a section."""
    out = []
    for m in re.finditer(rf"<{tag}[\s>/]", section):
        start = m.start()
        head_end = section.index(">", start)
        if section[head_end - 1] == "/":
            out.append(section[start:head_end + 1])
        else:
            end = section.index(f"</{tag}>", start) + len(f"</{tag}>")
            out.append(section[start:end])
    return out


def attr(element, name):
    m = re.search(rf"\s{name}=['\"]([^'\"]*)['\"]", element.split(">", 1)[0])
    return m.group(1) if m else None


def kubevirt_counts(xml):
    """KubeVirt's placeholder interfaces P and extra root ports E for a
    converted domain (v1.6.6 `calculatePlaceholderCount`,
    `calculateExtraControllerCount`; as in tests/e2e/parity.rs)."""
    d = devices(xml)
    ifaces = len(elements(d, "interface"))
    used = ifaces
    used += sum(1 for h in elements(d, "hostdev") if attr(h, "type") == "pci")
    used += sum(1 for c in elements(d, "controller") if attr(c, "model") not in ("pci-root", "pcie-root"))
    used += sum(1 for k in elements(d, "disk") if 'bus="virtio"' in k or "bus='virtio'" in k)
    used += sum(1 for i in elements(d, "input") if attr(i, "bus") == "virtio")
    used += len(elements(d, "watchdog")) + len(elements(d, "rng")) + len(elements(d, "memballoon"))
    memory = int(re.search(r"<memory unit=['\"]b['\"]>(\d+)<", xml).group(1))
    total, floor = (16, 6) if memory > 2 << 30 else (8, 3)
    placeholders = 0 if ifaces == 0 else max(4 - ifaces, 0)
    wanted = max(max(total - used, 0), floor)
    return placeholders, max(wanted - placeholders, 0)


def append_root_ports(xml, count):
    idx = [int(attr(c, "index")) for c in elements(devices(xml), "controller") if attr(c, "type") == "pci"]
    top = max(idx, default=0)
    ports = "".join(f"<controller type='pci' index='{i}' model='pcie-root-port'/>\n"
                    for i in range(top + 1, 32)[:count])
    at = xml.rindex("</devices>")
    return xml[:at] + ports + xml[at:]


def define(uri, work, xml, name):
    f = Path(work) / f"{name}.xml"
    f.write_text(xml)
    virsh(uri, "define", str(f))
    return virsh(uri, "dumpxml", "--inactive", name)


def kubevirt_domain(uri, work, name):
    """KubeVirt's converter output after its define-time steps, as libvirt
    keeps it (inactive XML)."""
    xml = REFERENCE.read_text()
    old = re.search(r"<name>([^<]*)</name>", xml).group(1)
    xml = xml.replace(f"<name>{old}</name>", f"<name>{name}</name>", 1)
    xml = xml.replace('<domain type="kvm"', '<domain type="qemu"', 1)
    # The launcher's own domain has this UUID.
    for old_uuid in set(re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", xml)):
        xml = xml.replace(old_uuid, str(uuid.uuid4()))
    # KubeVirt's cache/io at define: cache none where O_DIRECT works (this
    # file system), io native only for block devices and preallocated
    # images (the overlay is neither).
    xml = xml.replace('<driver name="qemu" type="qcow2"', '<driver name="qemu" type="qcow2" cache="none"', 1)
    p, e = kubevirt_counts(xml)
    if p > 0:
        holders = "".join(f"<interface type='ethernet'><target dev='placeholder-{i}' managed='no'/>"
                          f"<model type='virtio-non-transitional'/></interface>\n" for i in range(p))
        at = xml.rindex("</devices>")
        back = define(uri, work, xml[:at] + holders + xml[at:], name)
        for iface in elements(devices(back), "interface"):
            if "placeholder-" in iface:
                back = back.replace(iface, "", 1)
        define(uri, work, back, name)
        out = define(uri, work, append_root_ports(back, e), name)
    else:
        define(uri, work, xml, name)
        out = define(uri, work, append_root_ports(xml, e), name)
    virsh(uri, "undefine", name)
    return out, (p, e)


def cpu_ms(pid):
    """CPU time of every thread of `pid` so far (schedstat, ns), in ms."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e6


def qemu_of(launcher, name):
    for d in descendants(launcher):
        try:
            if f"guest={name}," in Path(f"/proc/{d}/cmdline").read_text().replace("\0", " "):
                return d
        except OSError:
            pass
    sys.exit(f"no QEMU for {name}")


def native(xml):
    return "yes" if "io='native'" in xml else "no"


def minimal(xml):
    """Ours without the NIC, display, balloon, spare root ports and hot-plug vCPUs."""
    d = devices(xml)
    keep = []
    for tag in ("emulator", "disk", "serial", "console"):
        keep += elements(d, tag)
    keep.append("<controller type='usb' index='0' model='none'/>")
    keep.append("<memballoon model='none'/>")
    body = "\n".join(keep)
    xml = xml.replace(d, "\n" + body + "\n")
    xml = re.sub(r"<vcpu[^>]*>\d+</vcpu>", "<vcpu placement='static'>1</vcpu>", xml)
    xml = re.sub(r"<vcpus>.*?</vcpus>", "", xml, flags=re.S)
    xml = re.sub(r"<topology [^>]*/>", "", xml)
    return xml


def instance(xml, name, work, tap):
    """A copy of domain `xml` that shares nothing with the launcher's own."""
    d = Path(work) / name
    d.mkdir(exist_ok=True)
    overlay = d / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(IMAGE), str(overlay)],
                   check=True)
    new_uuid = str(uuid.uuid4())
    old_uuid = re.search(r"<uuid>([^<]*)</uuid>", xml)
    if old_uuid:
        xml = xml.replace(old_uuid.group(1), new_uuid)
    xml = re.sub(r"<name>[^<]*</name>", f"<name>{name}</name>", xml, count=1)
    xml = re.sub(r"/var/run/kubevirt-ephemeral-disks/disk-data/containerdisk/disk.qcow2", str(overlay), xml)
    xml = re.sub(r"/var/run/kubevirt-private/[^/'\"]+/", f"{d}/", xml)
    xml = re.sub(r"<mac address=[^>]*/>", "", xml)
    xml = re.sub(r"<target dev=['\"]tap0['\"]", f"<target dev='{tap}'", xml)
    return xml


def descendants(pid):
    """Every process below `pid` (from /proc's parent links)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--bin", default=str(ROOT / "target/release/virt-launcher"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("create_floor.py: run as root")
    for f in (a.bin, IMAGE, REFERENCE):
        if not Path(f).exists():
            sys.exit(f"create_floor.py: {f} is missing (cargo build --release; tests/guest/build)")
    work = tempfile.mkdtemp(prefix="vl-floor-")
    uid = f"floor-{os.getpid()}"
    p = subprocess.Popen([a.bin, "run", str(VMI), "--container-disk", f"containerdisk={IMAGE}",
                          "--state-dir", f"{work}/state", "--uid", uid, "--use-emulation"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        for line in p.stderr:
            if '"domain running"' in line:
                break
        else:
            sys.exit("the launcher stopped before its domain ran")
        import threading
        threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
        uri = f"qemu+unix:///system?socket={work}/state/libvirt/run/libvirt-sock"
        dom = virsh(uri, "list", "--name").split()[0]
        ours = virsh(uri, "dumpxml", "--inactive", dom)
        kubevirt, counts = kubevirt_domain(uri, work, "kubevirt-reference")
        variants = {
            "ours": ours,
            "kubevirt": kubevirt,
            "ours-threads": ours.replace(" io='native'", ""),
            "minimal": minimal(ours),
        }
        daemon = [d for d in descendants(p.pid) if Path(f"/proc/{d}/comm").read_text().strip() == "libvirtd"]
        netns = f"/proc/{daemon[0]}/ns/net"
        base = []
        for _ in range(a.runs):
            t = time.monotonic()
            virsh(uri, "domstate", dom)
            base.append((time.monotonic() - t) * 1000)
        baseline = statistics.median(base)
        times = {k: [] for k in variants}
        cpu = {k: [] for k in variants}
        for i in range(a.runs):
            for k, xml in variants.items():
                name = f"{k}-{i}"
                tap = f"tf{i}{list(variants).index(k)}"
                subprocess.run(["nsenter", f"--net={netns}", "ip", "tuntap", "add", tap, "mode", "tap"], check=True)
                subprocess.run(["nsenter", f"--net={netns}", "ip", "link", "set", tap, "up"], check=True)
                define(uri, work, instance(xml, name, work, tap), name)
                before = cpu_ms(daemon[0])
                t = time.monotonic()
                virsh(uri, "start", name)
                times[k].append((time.monotonic() - t) * 1000 - baseline)
                cpu[k].append(cpu_ms(daemon[0]) - before + cpu_ms(qemu_of(p.pid, name)))
                virsh(uri, "destroy", name)
                virsh(uri, "undefine", name)
                subprocess.run(["nsenter", f"--net={netns}", "ip", "link", "del", tap], check=True)
        print(f"virsh start of a defined domain on the launcher's warm libvirtd (TCG), {a.runs} interleaved runs,")
        print(f"minus virsh's own start and connect ({baseline:.0f} ms); load average {os.getloadavg()[0]:.1f}")
        print(f"KubeVirt's define-time steps: {counts[0]} placeholder interfaces, {counts[1]} extra root ports")
        for k, v in times.items():
            ports = len([c for c in elements(devices(variants[k]), "controller")
                         if attr(c, "model") == "pcie-root-port"])
            c = cpu[k]
            print(f"  {k:<13} wall {statistics.median(v):6.0f} ms [{min(v):.0f}-{max(v):.0f}]  "
                  f"CPU {statistics.median(c):5.0f} ms [{min(c):.0f}-{max(c):.0f}]  "
                  f"root ports {ports}, io native {native(variants[k])}")
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
