#!/usr/bin/env python3
"""Writes the seeds of the fuzz targets agent_replies, dhcpv4, dhcpv6,
network_cache and grpc_requests into fuzz/seeds/<target>/ (the seeds of
vmi_bytes come from tests/data; vmi_structured has none). Deterministic:
re-running it rewrites the same files. Each input is in the layout its
target reads (see the target's doc comment)."""

import base64
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- agent_replies: qemu-ga's replies ---------------------------------------

def agent():
    def ret(v):
        return json.dumps({"return": v}, separators=(",", ":"))

    cmds = [
        "guest-ssh-remove-authorized-keys", "guest-ssh-add-authorized-keys",
        "guest-ssh-get-authorized-keys", "guest-get-load", "guest-get-cpustats",
        "guest-get-diskstats", "guest-get-devices", "guest-get-osinfo",
        "guest-get-timezone", "guest-get-users", "guest-get-host-name",
        "guest-exec", "guest-exec-status", "guest-get-memory-block-info",
        "guest-set-memory-blocks", "guest-get-memory-blocks", "guest-set-user-password",
        "guest-get-fsinfo", "guest-get-disks", "guest-set-vcpus", "guest-get-vcpus",
        "guest-network-get-route", "guest-network-get-interfaces",
        "guest-suspend-hybrid", "guest-suspend-ram", "guest-suspend-disk",
        "guest-fstrim", "guest-fsfreeze-thaw", "guest-fsfreeze-freeze-list",
        "guest-fsfreeze-freeze", "guest-fsfreeze-status", "guest-file-flush",
        "guest-file-seek", "guest-file-write", "guest-file-read", "guest-file-close",
        "guest-file-open", "guest-shutdown", "guest-info", "guest-set-time",
        "guest-get-time", "guest-ping", "guest-sync", "guest-sync-delimited",
    ]
    seeds = {
        # Recorded from the test guest's qemu-ga 10.0.2 (parse.rs tests).
        "osinfo-busybox": ret({"name": "Busybox Guest", "kernel-release": "6.1.0-57-cloud-amd64",
                               "version": "0.1 (Debian 12 bookworm packages)",
                               "pretty-name": "Busybox Guest 0.1 (Debian 12 kernel 6.1.0-57-cloud-amd64)",
                               "version-id": "0.1",
                               "kernel-version": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-26)",
                               "machine": "x86_64", "id": "busybox-guest"}),
        "osinfo-windows": ret({"name": "Microsoft Windows", "kernel-release": "20348",
                               "version": "Microsoft Windows Server 2022",
                               "pretty-name": "Windows Server 2022 Datacenter", "version-id": "2022",
                               "kernel-version": "10.0", "machine": "x86_64", "id": "mswindows",
                               "variant": "server", "variant-id": "server"}),
        "interfaces-lo": ret([{"name": "lo", "ip-addresses": [
            {"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8},
            {"ip-address-type": "ipv6", "ip-address": "::1", "prefix": 128}],
            "statistics": {"tx-packets": 0, "tx-errs": 0, "rx-bytes": 0, "rx-dropped": 0,
                           "rx-packets": 0, "rx-errs": 0, "tx-bytes": 0, "tx-dropped": 0},
            "hardware-address": "00:00:00:00:00:00"}]),
        "interfaces-eth0": ret([{"name": "eth0", "hardware-address": "52:54:00:6a:9a:15",
                                 "ip-addresses": [
                                     {"ip-address-type": "ipv4", "ip-address": "10.0.2.2", "prefix": 24},
                                     {"ip-address-type": "ipv6", "ip-address": "fd10:0:2::2", "prefix": 128},
                                     {"ip-address-type": "ipv6", "ip-address": "fe80::5054:ff:fe6a:9a15", "prefix": 64}]}]),
        "load": '{"return":{"load15m":0.0302734375,"load5m":0.09130859375,"load1m":0.330078125}}',
        "guest-info": ret({"version": "10.0.2", "supported_commands": [
            {"enabled": c != "guest-exec", "name": c, "success-response": c != "guest-shutdown"} for c in cmds]}),
        "host-name": ret({"host-name": "testvm1"}),
        "timezone": ret({"zone": "CET", "offset": 3600}),
        "timezone-none": ret({"offset": 0}),
        "users": ret([{"user": "root", "login-time": 1700000000.25},
                      {"user": "bob", "domain": "CORP", "login-time": 1700000100.5}]),
        "fsinfo": ret([{"name": "vda1", "mountpoint": "/", "type": "ext4", "used-bytes": 1024,
                        "total-bytes": 4096, "disk": [{"serial": "abc", "bus-type": "virtio", "bus": 0,
                                                       "target": 0, "unit": 0, "dev": "/dev/vda1",
                                                       "pci-controller": {"domain": 0, "bus": 0, "slot": 4, "function": 0}}]},
                       {"name": "sr0", "mountpoint": "/mnt", "type": "iso9660", "disk": []}]),
        "fsfreeze-frozen": '{"return":"frozen"}',
        "fsfreeze-thawed": '{"return":"thawed"}',
        "exec-pid": '{"return":{"pid":812}}',
        "exec-status-running": '{"return":{"exited":false}}',
        "exec-status-done": '{"return":{"exited":true,"exitcode":0,"out-data":"aGVsbG8K","out-truncated":false}}',
        "exec-status-signal": '{"return":{"exited":true,"signal":9,"err-data":"a2lsbGVkCg=="}}',
        "ping": '{"return":{}}',
        "error": '{"error":{"class":"GenericError","desc":"Command guest-get-host-name has been disabled"}}',
    }
    with open(os.path.join(ROOT, "tests/data/cases/022-agent-interfaces-parsing.json")) as f:
        seeds["interfaces-case-022"] = f.read()
    for name, text in seeds.items():
        write("agent_replies", name + ".json", text)


# --- dhcpv4: [len u16 LE][packet][configuration] ----------------------------

MAC = bytes([0x02, 0x54, 0x00, 0x6a, 0x9a, 0x15])


def ipv4(s):
    return bytes(int(x) for x in s.split("."))


def dhcp4(kind, xid=0x3903F326, ciaddr="0.0.0.0", opts=b"", flags=0):
    head = struct.pack("!BBBBIHH", 1, 1, 6, 0, xid, 0, flags)
    head += ipv4(ciaddr) + bytes(12)
    head += MAC + bytes(10) + bytes(64) + bytes(128)
    o = bytes([53, 1, kind])
    o += bytes([61, 7, 1]) + MAC
    o += bytes([57, 2, 0x05, 0xDC])
    o += opts
    o += bytes([55, 12, 1, 3, 6, 12, 15, 26, 28, 42, 51, 54, 58, 119])
    o += bytes([255])
    return head + bytes([99, 130, 83, 99]) + o


def framed(packet, config=b""):
    return struct.pack("<H", len(packet)) + packet + config


def dhcpv4():
    vendor = b"dhcpcd-9.4.1:Linux-6.1.0:x86_64:QEMU"
    host = b"testvm1"
    seeds = {
        "discover": dhcp4(1),
        "discover-dhcpcd": dhcp4(1, opts=bytes([60, len(vendor)]) + vendor
                                 + bytes([12, len(host)]) + host + bytes([145, 1, 1])),
        "request-selecting": dhcp4(3, opts=bytes([50, 4]) + ipv4("10.0.2.2")
                                   + bytes([54, 4]) + ipv4("10.0.2.1")),
        "request-renewing": dhcp4(3, ciaddr="10.0.2.2"),
        "request-other-address": dhcp4(3, opts=bytes([50, 4]) + ipv4("10.0.2.9")),
        "discover-broadcast": dhcp4(1, flags=0x8000),
        "inform": dhcp4(8, ciaddr="10.0.2.2"),
        "release": dhcp4(7, ciaddr="10.0.2.2", opts=bytes([54, 4]) + ipv4("10.0.2.1")),
        "decline": dhcp4(4, opts=bytes([50, 4]) + ipv4("10.0.2.2")),
        "discover-overload": dhcp4(1, opts=bytes([52, 1, 3])),
    }
    for name, p in seeds.items():
        write("dhcpv4", name, framed(p))
    # The same DISCOVER with configurations that switch every override on.
    write("dhcpv4", "discover-config-all", framed(seeds["discover"], bytes(range(1, 200, 3)) * 2))
    write("dhcpv4", "discover-config-ff", framed(seeds["discover"], b"\xff" * 64))


# --- dhcpv6: [len u16 LE][packet][source and configuration] ------------------

def opt6(code, body):
    return struct.pack("!HH", code, len(body)) + body


def duid_llt(mac):
    return struct.pack("!HHI", 1, 1, 0x2B1A0C3D) + mac


SERVER_ID = struct.pack("!HH", 3, 1) + bytes([0x02, 0, 0, 0, 0, 1])


def ia_na(iaid, addr=None):
    body = struct.pack("!III", iaid, 0, 0)
    if addr:
        body += opt6(5, bytes(addr) + struct.pack("!II", 0, 0))
    return opt6(3, body)


def dhcp6(kind, opts, xid=0x00A1B2):
    return bytes([kind]) + xid.to_bytes(3, "big") + opts


def dhcpv6():
    client = opt6(1, duid_llt(MAC))
    oro = opt6(6, struct.pack("!HH", 23, 24))
    elapsed = opt6(8, b"\x00\x00")
    addr = bytes.fromhex("fd100000000200000000000000000002")
    seeds = {
        "solicit": dhcp6(1, client + ia_na(0x6A9A15) + elapsed + oro),
        "solicit-rapid": dhcp6(1, client + ia_na(1) + elapsed + oro + opt6(14, b"")),
        "request": dhcp6(3, client + opt6(2, SERVER_ID) + ia_na(0x6A9A15, addr) + elapsed + oro),
        "request-other-server": dhcp6(3, client + opt6(2, b"\x00\x03\x00\x01abcdef") + ia_na(1)),
        "renew": dhcp6(5, client + opt6(2, SERVER_ID) + ia_na(0x6A9A15, addr) + elapsed),
        "rebind": dhcp6(6, client + ia_na(0x6A9A15, addr) + elapsed),
        "confirm": dhcp6(4, client + ia_na(0x6A9A15, addr)),
        "release": dhcp6(8, client + opt6(2, SERVER_ID) + ia_na(0x6A9A15, addr)),
        "information-request": dhcp6(11, client + elapsed + oro),
        "vendor-class": dhcp6(1, client + ia_na(7) + opt6(16, struct.pack("!I", 43793) + b"\x00\x06dhcpcd")),
        "relay-forward": bytes([12, 0]) + bytes(32) + opt6(9, dhcp6(1, client)),
    }
    for name, p in seeds.items():
        write("dhcpv6", name, framed(p))
    write("dhcpv6", "solicit-config-all", framed(seeds["solicit"], bytes(range(1, 250, 7)) * 3))


# --- network_cache: [selector][file] ----------------------------------------

def network_cache():
    vif = {
        "Name": "eth0",
        "IP": {"IP": "10.244.0.5", "Mask": "////AA==", "Label": "eth0", "Flags": 128, "Scope": 0,
               "Peer": None, "Broadcast": "10.244.0.255", "PreferedLft": 0, "ValidLft": 0, "LinkIndex": 0},
        "IPv6": {"IP": "", "Mask": None, "Label": "", "Flags": 0, "Scope": 0, "Peer": None,
                 "Broadcast": None, "PreferedLft": 0, "ValidLft": 0, "LinkIndex": 0},
        "MAC": "qrvM3e7/",
        "AdvertisingIPAddr": "169.254.75.10",
        "AdvertisingIPv6Addr": "",
        "Routes": [
            {"LinkIndex": 3, "ILinkIndex": 0, "Scope": 0, "Dst": None, "Src": "", "Gw": "10.244.0.1",
             "MultiPath": None, "Protocol": 0, "Priority": 0, "Table": 254, "Type": 1, "Tos": 0, "Flags": 0},
        ],
        "Mtu": 1450,
        "IPAMDisabled": False,
        "Gateway": "10.244.0.1",
        "Subdomain": "",
    }
    # KubeVirt v1.6.6 writes it with json.MarshalIndent (two spaces).
    write("network_cache", "vif-kubevirt", b"\x00" + json.dumps(vif, indent=2).encode())
    routes = dict(vif)
    routes["Routes"] = [
        {"Dst": {"IP": "10.244.0.0", "Mask": "////AA=="}, "Src": "10.244.0.5", "Gw": ""},
        {"Dst": None, "Src": "", "Gw": "10.244.0.1"},
        {"Dst": {"IP": "10.96.0.0", "Mask": "//8AAA=="}, "Src": "", "Gw": "10.244.0.1"},
        {"Dst": {"IP": "fd00::", "Mask": base64.b64encode(bytes([255] * 8 + [0] * 8)).decode()}, "Src": "", "Gw": "fd00::1"},
    ]
    write("network_cache", "vif-routes", b"\x00" + json.dumps(routes).encode())
    ipam = dict(vif)
    ipam["IPAMDisabled"] = True
    ipam["IP"] = {"IP": "", "Mask": None}
    write("network_cache", "vif-ipam-disabled", b"\x00" + json.dumps(ipam).encode())
    dual = dict(vif)
    dual["IPv6"] = {"IP": "fd10:244::5", "Mask": base64.b64encode(bytes([255] * 8 + [0] * 8)).decode()}
    dual["AdvertisingIPv6Addr"] = "fe80::1"
    write("network_cache", "vif-dual-stack", b"\x00" + json.dumps(dual).encode())
    iface = {"MAC": {"MAC": "02:54:00:6a:9a:15"}, "Model": None, "Target": {"Device": "tap0"},
             "Alias": {"Name": "ua-default"}}
    write("network_cache", "interface-kubevirt", b"\x01" + json.dumps(iface, indent=2).encode())
    write("network_cache", "interface-dashes", b"\x01" + b'{"MAC":{"MAC":"02-54-00-6A-9A-15"}}')


# --- grpc_requests: [mode][protobuf or VMI JSON] -----------------------------

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def grpc_requests():
    seeds_dir = os.path.join(HERE, "vmi_bytes")
    jsons = sorted(f for f in os.listdir(seeds_dir) if f.endswith(".json"))
    for f in jsons:
        with open(os.path.join(seeds_dir, f), "rb") as fh:
            write("grpc_requests", "json-" + f, b"\x0a" + fh.read())
    with open(os.path.join(seeds_dir, jsons[0]), "rb") as fh:
        vmi = fh.read()
    smbios = field(1, "KubeVirt") + field(2, "None") + field(3, "1.6.6") + field(4, "") + field(5, "KubeVirt")
    cluster = field(1, 1) + field(3, 1)
    disk_info = field(1, "qcow2") + field(3, 1 << 20) + field(4, 1 << 30)
    options = (field(1, smbios) + field(2, 10) + field(3, "rootdisk") + field(6, 1) + field(7, cluster)
               + field(5, field(1, "containerdisk") + field(2, disk_info))
               + field(8, field(1, "default") + field(2, "tap")))
    vmi_msg = field(1, vmi)
    write("grpc_requests", "sync", b"\x00" + field(1, vmi_msg) + field(2, options))
    write("grpc_requests", "migrate", b"\x01" + field(1, vmi_msg) + field(2, b'{"Bandwidth":"64Mi"}'))
    write("grpc_requests", "freeze", b"\x02" + field(1, vmi_msg) + field(2, 300))
    write("grpc_requests", "memory-dump", b"\x03" + field(1, vmi_msg) + field(2, "/var/run/kubevirt/hotplug-disks/dump.memory.dump"))
    write("grpc_requests", "launch-secret", b"\x04" + field(1, vmi_msg) + field(2, b'{"secret":"c2VjcmV0"}'))
    write("grpc_requests", "exec", b"\x05" + field(1, "default_testvm") + field(2, "/bin/cat")
          + field(3, "/etc/hostname") + field(4, 10))
    write("grpc_requests", "guest-ping", b"\x06" + field(1, "default_testvm") + field(2, 1))
    write("grpc_requests", "empty", b"\x07")
    write("grpc_requests", "cmd-info", b"\x08")
    write("grpc_requests", "notify-response", b"\x09" + field(1, 1) + field(2, "ok"))


if __name__ == "__main__":
    agent()
    dhcpv4()
    dhcpv6()
    network_cache()
    grpc_requests()
    sys.exit(0)
