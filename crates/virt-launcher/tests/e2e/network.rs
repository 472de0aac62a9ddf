//! Pod networking end to end: `virt-launcher run --setup-pod-network`
//! builds the masquerade bridge, tap and NAT in a network namespace of its
//! own, the real guest runs busybox `udhcpc` against the launcher's DHCP
//! server, and prints the lease it got on the serial console
//! (`GUEST-DHCP ...`, from tests/guest's udhcpc script). Nothing here
//! touches the host's network: the namespace dies with the launcher.

use std::process::Command;

use crate::harness::*;

pub(crate) fn masquerade_vmi(name: &str) -> String {
    guest_vmi(name, "virtio")
        .replace(
            "      rng: {}\n",
            "      rng: {}\n      interfaces:\n      - name: default\n        masquerade: {}\n        macAddress: \"02-54-00-AB-CD-EF\"\n        ports: [{name: http, port: 8080}]\n",
        )
        .replace(
            "  volumes:\n",
            "  networks:\n  - name: default\n    pod: {}\n  volumes:\n",
        )
}

/// The `key=value` fields of the first serial line with `marker`, from
/// the marker on (the guest's console prompt may precede it on its line:
/// getty and the DHCP hooks write to the serial port unsynchronised).
pub(crate) fn fields(serial: &str, marker: &str) -> std::collections::BTreeMap<String, String> {
    let tag = format!("{marker} ");
    let line = serial
        .lines()
        .find_map(|l| l.find(&tag).map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no {marker} line in:\n{serial}"));
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn masquerade_guest_gets_kubevirts_address_plan_over_dhcp() {
    let yaml = masquerade_vmi("netmasq");
    assert!(yaml.contains("masquerade"), "{yaml}");
    let mut l = Launcher::start_args(&yaml, &["--setup-pod-network"]);
    let serial = l.wait_serial("GUEST-DHCP ", 1, BOOT_TIMEOUT);
    let f = fields(&serial, "GUEST-DHCP");
    assert_eq!(f["interface"], "eth0", "{serial}");
    assert_eq!(f["ip"], "10.0.2.2/24", "{serial}");
    assert_eq!(f["router"], "10.0.2.1", "{serial}");
    assert_eq!(f["mtu"], "1500", "{serial}");
    assert_eq!(f["lease"], "86313600", "{serial}");
    assert_eq!(f["hostname"], "netmasq", "{serial}");
    // DNS: the IPv4 nameservers of the resolv.conf the launcher sees (the
    // host's in standalone mode), else KubeVirt's 8.8.8.8.
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let mut want: Vec<String> = resolv
        .lines()
        .filter_map(|l| l.strip_prefix("nameserver"))
        .map(str::trim)
        .filter(|a| a.parse::<std::net::Ipv4Addr>().is_ok())
        .map(str::to_owned)
        .collect();
    if want.is_empty() {
        want.push("8.8.8.8".into());
    }
    assert_eq!(f["dns"], want.join(","), "{serial}");
    // DHCPv6 (the stand-in pod is dual-stack): dhcpcd in the guest gets
    // the third address of fd10:0:2::/120, the pod's IPv6 nameservers (none
    // here unless the host has some) and the search list.
    let serial = l.wait_serial("GUEST-DHCP6 ", 1, BOOT_TIMEOUT);
    let f6 = fields(&serial, "GUEST-DHCP6");
    assert_eq!(f6["interface"], "eth0", "{serial}");
    assert_eq!(f6["ip"], "fd10:0:2::2", "{serial}");
    let (dns6, search) = host_dns6_and_search();
    assert_eq!(f6["dns"], dns6, "{serial}");
    assert_eq!(f6["search"], search, "{serial}");
    let ready = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(ready.contains("ip=10.0.2.2 "), "{ready}");

    // Interface status: GetDomain carries the guest agent's report in
    // Status.Interfaces (KubeVirt's {Mac, Ip, IPs, InterfaceName}) next to
    // the domain's interfaces, and joining them by MAC as virt-handler does
    // (`ctl interfaces`) puts the guest's addresses on the VMI's interface
    // name. qemu-ga reports the addresses the guest has when it is polled
    // (first at connect, before DHCP; again after 10 s, 30 s, ...).
    let start = std::time::Instant::now();
    let (dom, ifaces) = loop {
        let ifaces = crate::agent::ctl_json(&l, &["interfaces"]);
        let has_ip = ifaces[0]["ipAddresses"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "fd10:0:2::2"));
        if has_ip {
            break (crate::agent::ctl_json(&l, &["domain"]), ifaces);
        }
        assert!(
            start.elapsed() < BOOT_TIMEOUT,
            "the guest's addresses never reached the interface status: {ifaces}\n{}",
            l.log()
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    };
    let agent = dom["Status"]["Interfaces"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["InterfaceName"] == "eth0"))
        .unwrap_or_else(|| panic!("no eth0 in Status.Interfaces: {dom}"))
        .clone();
    assert_eq!(agent["Mac"], "02:54:00:ab:cd:ef", "{agent}");
    assert_eq!(agent["Ip"], "10.0.2.2", "{agent}");
    let i = &ifaces[0];
    assert_eq!(i["name"], "default", "{ifaces}");
    assert_eq!(i["interfaceName"], "eth0", "{ifaces}");
    assert_eq!(i["mac"], "02:54:00:ab:cd:ef", "{ifaces}");
    assert_eq!(i["ipAddress"], "10.0.2.2", "{ifaces}");
    assert_eq!(i["infoSource"], "domain, guest-agent", "{ifaces}");

    // Masquerade port forwarding from the pod's side: the guest's httpd
    // (tests/guest) on 8080, reached through the pod IP and through
    // localhost, both DNATed to 10.0.2.2 by phase 1's nftables rules.
    let netns = format!("/proc/{}/ns/net", l.worker_pid());
    for addr in ["10.244.0.5:8080", "127.0.0.1:8080"] {
        let body = http_get_in_netns(&netns, addr);
        assert!(
            body.contains("200 OK") && body.contains("GUEST-HTTP"),
            "{addr}: {body}"
        );
    }

    // And from the node's side of the pod link (phase 1's prerouting
    // DNAT on eth0). Not over IPv6 here: the guest's DHCPv6 address is a
    // /128 and, KubeVirt sending no router advertisements, it has no route
    // back unless its network-config names a gateway6 (see
    // kubevirt_masquerade_example_works_over_ipv4_and_ipv6).
    let node = node_netns(&l);
    let body = http_get_in_netns(&node, "10.244.0.5:8080");
    assert!(
        body.contains("200 OK") && body.contains("GUEST-HTTP"),
        "node -> 10.244.0.5:8080: {body}"
    );

    // The domain has the interface phase 2 decorated: tap0, the spec MAC
    // canonical, the pod link's MTU.
    let xml = l.domain_xml();
    assert!(xml.contains("<mac address='02:54:00:ab:cd:ef'/>"), "{xml}");
    assert!(xml.contains("<target dev='tap0' managed='no'/>"), "{xml}");
    assert!(xml.contains("<mtu size='1500'/>"), "{xml}");
    assert!(xml.contains("<alias name='ua-default'/>"), "{xml}");

    // The host's network is untouched: no k6t-eth0 or tap0 out here.
    let out = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&out.stdout);
    assert!(!links.contains("k6t-eth0"), "{links}");
    l.terminate(BOOT_TIMEOUT);
}

/// What the guest should get over DHCPv6 from the resolv.conf the launcher
/// reads (the host's in standalone mode): the IPv6 nameservers joined by
/// `,` (or `none`), and the search list (KubeVirt's `cluster.local` when
/// there is none), as the guest's hook prints them.
fn host_dns6_and_search() -> (String, String) {
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let mut dns6 = Vec::new();
    let mut search = Vec::new();
    for line in resolv.lines() {
        let mut w = line.split_whitespace();
        match w.next() {
            Some("nameserver") => {
                if let Some(a) = w.next().filter(|a| a.parse::<std::net::Ipv6Addr>().is_ok()) {
                    dns6.push(a.to_owned());
                }
            }
            Some("search" | "domain") => {
                search = w.map(str::to_ascii_lowercase).collect();
            }
            _ => {}
        }
    }
    if search.is_empty() {
        search.push("cluster.local".into());
    }
    let dns6 = if dns6.is_empty() {
        "none".into()
    } else {
        dns6.join(",")
    };
    (dns6, search.join(","))
}

/// KubeVirt's own `vmi-masquerade` example, unmodified (the test guest
/// stands in for its container disk): the guest gets 10.0.2.2 over DHCPv4
/// and fd10:0:2::2 over DHCPv6, takes the example's `gateway6` from its
/// cloud-init network-config, and its HTTP port 80 (the example's `ports`)
/// answers from the pod over IPv4 and IPv6 through phase 1's NAT and NAT66.
#[test]
fn kubevirt_masquerade_example_works_over_ipv4_and_ipv6() {
    let yaml = std::fs::read_to_string(repo_root().join("tests/data/examples/vmi-masquerade.yaml"))
        .unwrap();
    let mut l = Launcher::start_args(&yaml, &["--setup-pod-network"]);
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let serial = l.wait_serial("GUEST-DHCP6 ", 1, BOOT_TIMEOUT);
    let f = fields(&serial, "GUEST-DHCP");
    assert_eq!(f["ip"], "10.0.2.2/24", "{serial}");
    assert_eq!(f["router"], "10.0.2.1", "{serial}");
    let f6 = fields(&serial, "GUEST-DHCP6");
    assert_eq!(f6["ip"], "fd10:0:2::2", "{serial}");

    let netns = format!("/proc/{}/ns/net", l.worker_pid());
    for addr in ["10.244.0.5:80", "127.0.0.1:80", "[fd00:10:244::5]:80"] {
        let body = http_get_in_netns(&netns, addr);
        assert!(
            body.contains("200 OK") && body.contains("GUEST-HTTP"),
            "{addr}: {body}"
        );
    }
    // From the node's side of the pod link too (prerouting DNAT on eth0).
    let node = node_netns(&l);
    for addr in ["10.244.0.5:80", "[fd00:10:244::5]:80"] {
        let body = http_get_in_netns(&node, addr);
        assert!(
            body.contains("200 OK") && body.contains("GUEST-HTTP"),
            "node -> {addr}: {body}"
        );
    }
    l.terminate(BOOT_TIMEOUT);
}

/// `GET /` from a thread that joined the network namespace `netns`.
pub(crate) fn http_get_in_netns(netns: &str, addr: &str) -> String {
    let (netns, addr) = (netns.to_owned(), addr.to_owned());
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let ns = std::fs::File::open(&netns).unwrap();
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let mut last = String::new();
        for _ in 0..50 {
            match std::net::TcpStream::connect_timeout(
                &addr.parse().unwrap(),
                std::time::Duration::from_secs(2),
            ) {
                Ok(mut s) => {
                    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                        .unwrap();
                    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
                    let mut body = String::new();
                    let _ = s.read_to_string(&mut body);
                    return body;
                }
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        format!("no connection to {addr}: {last}")
    })
    .join()
    .unwrap()
}

#[test]
fn pod_network_without_the_flag_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let vmi = dir.path().join("vmi.yaml");
    std::fs::write(&vmi, masquerade_vmi("netrefused")).unwrap();
    let out = Command::new(launcher_bin())
        .arg("run")
        .arg(&vmi)
        .args(["--use-emulation", "--state-dir"])
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        "virt-launcher: spec.domain.devices.interfaces[0]: standalone mode has no pod network; pass --setup-pod-network to create one"
    );
}

/// Adds a NoCloud user-data `#!/bin/sh` script (run by the test guest
/// before GUEST-READY, its output on the serial console) to a VMI made by
/// [`masquerade_vmi`] or [`crate::harness::guest_vmi`].
pub(crate) fn with_user_data(yaml: &str, script: &str) -> String {
    let body: String = script.lines().map(|l| format!("        {l}\n")).collect();
    yaml.replace(
        "      - name: scratch\n        disk: {bus: virtio}\n",
        "      - name: scratch\n        disk: {bus: virtio}\n      - name: cloudinit\n        disk: {bus: virtio}\n",
    )
    .replace(
        "  - name: scratch\n    emptyDisk: {capacity: 64Mi}\n",
        &format!(
            "  - name: scratch\n    emptyDisk: {{capacity: 64Mi}}\n  - name: cloudinit\n    cloudInitNoCloud:\n      userData: |\n{body}"
        ),
    )
}

/// The network namespace playing the node in a `--setup-pod-network` run
/// (the CNI's ends of the pod links): the launcher holds it as an open
/// `net:[...]` file that is not its own namespace.
pub(crate) fn node_netns(l: &Launcher) -> String {
    let pid = l.worker_pid();
    let own = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let path = e.unwrap().path();
        if let Ok(target) = std::fs::read_link(&path) {
            if target.to_string_lossy().starts_with("net:[") && target != own {
                return path.to_string_lossy().into_owned();
            }
        }
    }
    panic!(
        "the launcher (pid {pid}) holds no node network namespace\n{}",
        l.log()
    );
}

/// `ip ARGS` run in the network namespace `netns` (from a thread that
/// joined it); its stdout.
pub(crate) fn ip_in_netns(netns: &str, args: &[&str]) -> String {
    let (netns, args): (String, Vec<String>) = (
        netns.to_owned(),
        args.iter().map(|a| (*a).to_owned()).collect(),
    );
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&netns).unwrap();
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let out = Command::new("ip").args(&args).output().unwrap();
        assert!(out.status.success(), "ip {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .join()
    .unwrap()
}

/// Bridge binding: `--setup-pod-network` plays virt-handler's phase 1 for
/// it (the pod link `eth0` becomes `eth0-nic` on `k6t-eth0`, a dummy
/// `eth0` keeps the pod's MAC and addresses, IPv6 included; the cache is
/// written to `vif-cache-eth0.json` in the private directory), phase 2
/// reads that cache as in a pod, and the guest gets the pod's own address,
/// gateway and MTU over DHCP, with the pod's MAC on its interface. Traffic
/// flows both ways through the pod link: from the node's side (the CNI's
/// end `cni0`, 10.244.0.1, in a namespace of its own) to the guest's HTTP
/// port at the pod's address, and from the guest to the node. IPv6 (the
/// pod is dual-stack): KubeVirt serves no DHCPv6 for this binding, and
/// none is started; the pod's IPv6 address stays on the dummy, and a guest
/// that configures it statically (as cloud-init would) is reached at it.
#[test]
fn bridge_guest_gets_the_pods_address_and_is_reachable_from_the_node() {
    let yaml = masquerade_vmi("netbridge")
        .replace("        masquerade: {}\n", "        bridge: {}\n")
        .replace("        macAddress: \"02-54-00-AB-CD-EF\"\n", "")
        .replace("        ports: [{name: http, port: 8080}]\n", "");
    let yaml = with_user_data(
        &yaml,
        "#!/bin/sh\n\
         if ping -c 2 -W 3 10.244.0.1 >/dev/null; then echo GUEST-PING ok; else echo GUEST-PING failed; fi\n\
         ip -6 addr add fd00:10:244::5/64 dev eth0\n",
    );
    assert!(
        yaml.contains("bridge: {}") && !yaml.contains("macAddress") && yaml.contains("userData"),
        "{yaml}"
    );
    let mut l = Launcher::start_args(&yaml, &["--setup-pod-network"]);
    let serial = l.wait_serial("GUEST-DHCP ", 1, BOOT_TIMEOUT);
    let f = fields(&serial, "GUEST-DHCP");
    assert_eq!(f["interface"], "eth0", "{serial}");
    assert_eq!(f["ip"], "10.244.0.5/24", "{serial}");
    assert_eq!(f["router"], "10.244.0.1", "{serial}");
    assert_eq!(f["mtu"], "1500", "{serial}");
    assert_eq!(f["hostname"], "netbridge", "{serial}");
    // The guest reached the node's end of the pod link.
    let serial = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(serial.contains("GUEST-PING ok"), "{serial}");
    // No DHCPv6 for the bridge binding: no server, no lease.
    assert!(!serial.contains("GUEST-DHCP6"), "{serial}");
    assert!(!l.log().contains("DHCPv6 server started"), "{}", l.log());

    // The node reaches the guest's port 8080 at the pod's addresses, over
    // IPv4 and (the guest having added it) IPv6.
    let node = node_netns(&l);
    for addr in ["10.244.0.5:8080", "[fd00:10:244::5]:8080"] {
        let body = http_get_in_netns(&node, addr);
        assert!(
            body.contains("200 OK") && body.contains("GUEST-HTTP netbridge"),
            "{addr}: {body}"
        );
    }
    // The pod keeps its addresses on the dummy eth0, and the pod link
    // carries no address of its own.
    let pod = format!("/proc/{}/ns/net", l.worker_pid());
    let eth0 = ip_in_netns(&pod, &["-o", "addr", "show", "dev", "eth0"]);
    assert!(
        eth0.contains("10.244.0.5/24") && eth0.contains("fd00:10:244::5/64"),
        "{eth0}"
    );
    let nic = ip_in_netns(&pod, &["-o", "addr", "show", "dev", "eth0-nic"]);
    assert!(!nic.contains("inet"), "{nic}");

    // The cache phase 1 wrote, in KubeVirt's file and shape (no server
    // address: phase 2 derives it from the interface's index).
    let cache = std::fs::read_to_string(l.state.join("private/vif-cache-eth0.json")).unwrap();
    let cache: serde_json::Value = serde_json::from_str(&cache).unwrap();
    assert_eq!(cache["IP"]["IP"], "10.244.0.5", "{cache}");
    assert_eq!(cache["Gateway"], "10.244.0.1", "{cache}");
    assert_eq!(cache["IPAMDisabled"], false, "{cache}");
    // The guest has the pod's MAC (no macAddress in the spec).
    let xml = l.domain_xml();
    assert!(xml.contains("<mac address='0a:58:0a:f4:00:05'/>"), "{xml}");
    assert!(xml.contains("<target dev='tap0' managed='no'/>"), "{xml}");
    l.terminate(BOOT_TIMEOUT);
}

/// Two interfaces: masquerade on the pod network and the bridge binding on
/// a Multus network `blue`. The stand-in makes the second pod link with
/// KubeVirt's hashed name (`pod` + sha256("blue")[..11]), its bridge
/// `k6t-16477688c0e`, tap `tap16477688c0e` and cache; the guest gets
/// 10.0.2.2 on eth0 and the Multus link's address (10.245.1.5/24, no
/// router: a secondary network has no default route) on eth1, from a
/// second DHCP server answering from 169.254.75.11 (index 1), and the
/// node reaches the guest on that network.
#[test]
fn pod_masquerade_and_multus_bridge_interfaces_each_get_their_lease() {
    let yaml = masquerade_vmi("netmulti")
        .replace(
            "        ports: [{name: http, port: 8080}]\n",
            "        ports: [{name: http, port: 8080}]\n      - name: blue\n        bridge: {}\n",
        )
        .replace(
            "  networks:\n  - name: default\n    pod: {}\n",
            "  networks:\n  - name: default\n    pod: {}\n  - name: blue\n    multus: {networkName: e2e/blue}\n",
        );
    assert!(yaml.contains("multus: {networkName: e2e/blue}"), "{yaml}");
    let mut l = Launcher::start_args(&yaml, &["--setup-pod-network"]);
    let serial = l.wait_serial("GUEST-DHCP ", 2, BOOT_TIMEOUT);
    let lease = |ifc: &str| {
        serial
            .lines()
            .find(|s| s.starts_with(&format!("GUEST-DHCP interface={ifc} ")))
            .map(|s| fields(s, "GUEST-DHCP"))
            .unwrap_or_else(|| panic!("no lease on {ifc}:\n{serial}"))
    };
    let (eth0, eth1) = (lease("eth0"), lease("eth1"));
    assert_eq!(eth0["ip"], "10.0.2.2/24", "{serial}");
    assert_eq!(eth0["router"], "10.0.2.1", "{serial}");
    assert_eq!(eth1["ip"], "10.245.1.5/24", "{serial}");
    assert_eq!(eth1["router"], "none", "{serial}");
    assert_eq!(eth1["mtu"], "1500", "{serial}");

    let node = node_netns(&l);
    let body = http_get_in_netns(&node, "10.245.1.5:8080");
    assert!(
        body.contains("200 OK") && body.contains("GUEST-HTTP"),
        "{body}"
    );
    // Through the pod link and masquerade's DNAT of `ports` from the node.
    let body = http_get_in_netns(&node, "10.244.0.5:8080");
    assert!(body.contains("GUEST-HTTP"), "{body}");

    let cache =
        std::fs::read_to_string(l.state.join("private/vif-cache-pod16477688c0e.json")).unwrap();
    let cache: serde_json::Value = serde_json::from_str(&cache).unwrap();
    assert_eq!(cache["IP"]["IP"], "10.245.1.5", "{cache}");
    let xml = l.domain_xml();
    assert!(xml.contains("<target dev='tap0' managed='no'/>"), "{xml}");
    assert!(
        xml.contains("<target dev='tap16477688c0e' managed='no'/>"),
        "{xml}"
    );
    assert!(xml.contains("<mac address='0a:58:0a:f5:01:05'/>"), "{xml}");
    assert!(xml.contains("<alias name='ua-blue'/>"), "{xml}");
    l.terminate(BOOT_TIMEOUT);
}

/// Pod mode (KubeVirt's command line, `STANDALONE_VMI`) with an SR-IOV
/// interface and no network-info file: the VF's address comes from the
/// device plugin's variables (`KUBEVIRT_RESOURCE_NAME_<iface>` →
/// `PCIDEVICE_<RESOURCE>`), the domain is defined with that PCI hostdev,
/// and — this machine has no such VF — starting it fails with libvirt's
/// own error (here: "unsupported configuration: host doesn't support
/// passthrough of host PCI devices"); the launcher exits 1 and leaves
/// nothing.
#[test]
fn pod_mode_sriov_vf_from_the_device_plugin_environment() {
    assert!(
        !std::path::Path::new(network::sriov::NETWORK_INFO_PATH).exists(),
        "this host has {}: the test needs the device plugin fallback",
        network::sriov::NETWORK_INFO_PATH
    );
    let yaml = guest_vmi("sriovpod", "virtio")
        .replace(
            "      rng: {}\n",
            "      rng: {}\n      interfaces:\n      - name: red\n        sriov: {}\n        pciAddress: \"0000:00:0c.0\"\n",
        )
        .replace(
            "  volumes:\n",
            "  networks:\n  - name: red\n    multus: {networkName: red-net}\n  volumes:\n",
        );
    let mut l = Launcher::start_wrapped(
        &yaml,
        &Opts {
            pod: true,
            env: &[
                (
                    "KUBEVIRT_RESOURCE_NAME_red",
                    std::ffi::OsStr::new("example.com/vf"),
                ),
                (
                    "PCIDEVICE_EXAMPLE_COM_VF",
                    std::ffi::OsStr::new("0000:fe:1f.7,"),
                ),
            ],
            ..Opts::default()
        },
        POD_WRAPPER,
    );
    let st = l.wait_exit(std::time::Duration::from_secs(120));
    let log = l.log();
    assert_eq!(st.code(), Some(1), "{log}");
    assert!(log.contains("\"domain defined\""), "{log}");
    // Without VFIO and an IOMMU (this machine) libvirt refuses any PCI
    // passthrough; with them, it names the missing device.
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("virt-launcher: ")
            && (last.contains("host doesn't support passthrough of host PCI devices")
                || last.contains("0000:fe:1f.7")),
        "{log}"
    );
    l.assert_nothing_left();
}

/// The passt binding (`binding: {name: passt}`) on this stack, end to end
/// as far as it goes: `--setup-pod-network` makes only the pod's side
/// (`eth0` with 10.244.0.5/24 and fd00:10:244::5/64, default routes; no
/// bridge, tap, NAT or DHCP server of the launcher's), the domain has
/// KubeVirt's passt interface, and libvirt starts `passt` in the pod's
/// namespace with the command line that interface means. Debian
/// bookworm's passt (0.0~git20230309) then refuses libvirt 11.3's port
/// specifier: libvirt writes `<portForward dev='eth0'>` without an address
/// as `--tcp-ports %eth0/8080` (an interface without an address), which
/// passt parses only from a later release on (and `%eth0/all`, libvirt's
/// form of "every port", which passt's parser, in later sources too,
/// knows only as the bare word `all`), so the domain cannot
/// start and the launcher exits 1 with passt's message. Past that, this
/// passt, started as root by the launcher's root libvirt, switches to
/// `nobody` before it writes libvirt's `--pid` file in the root-owned
/// `/run/libvirt/qemu/passt` ("PID file open: Permission denied"; seen
/// with the port specifier rewritten by hand). Asserted, not skipped:
/// with a passt that accepts it this test fails; then it goes, and
/// [`passt_guest_gets_the_pods_address_and_its_port_is_forwarded`] runs
/// that passt without tests/passt/passt-bookworm-shim.
#[test]
fn passt_binding_starts_passt_which_refuses_libvirts_port_spec() {
    let yaml = masquerade_vmi("netpasst").replace(
        "        masquerade: {}\n",
        "        binding: {name: passt}\n",
    );
    assert!(yaml.contains("binding: {name: passt}"), "{yaml}");
    let mut l = Launcher::start_args(&yaml, &["--setup-pod-network"]);
    let st = l.wait_exit(BOOT_TIMEOUT);
    let log = l.log();
    assert_eq!(st.code(), Some(1), "{log}");
    // libvirt ran passt with the sidecar's interface: the pod link, the
    // log file, the spec's port bound to eth0.
    // libvirt's state directory: /run/libvirt/qemu, or the session
    // daemon's $XDG_RUNTIME_DIR/libvirt/qemu/run.
    let run_dir = if crate::harness::nonroot() {
        "/var/run/libvirt/qemu/run"
    } else {
        "/run/libvirt/qemu"
    };
    assert!(
        log.contains(&format!(
            "passt --one-off --socket {run_dir}/passt/1-e2e_netpasst-ua-default.socket"
        )),
        "{log}"
    );
    assert!(
        log.contains(
            "--interface eth0 --log-file /var/run/kubevirt/passt.log --tcp-ports %eth0/8080)"
        ),
        "{log}"
    );
    assert!(
        log.contains("Invalid port specifier %eth0/8080"),
        "passt accepted libvirt's port specifier: turn this test into the DHCP and port-forwarding one\n{log}"
    );
    // The launcher made no bridge or tap: the domain was defined (so the
    // converter and phase 2 accepted it) before libvirt started passt.
    assert!(log.contains("domain defined"), "{log}");
    assert!(!log.contains("DHCPv4 server started"), "{log}");

    // Without ports the sidecar's XML forwards everything, which libvirt
    // writes as `%eth0/all`: refused too.
    let yaml = yaml
        .replace("netpasst", "netpasstall")
        .replace("        ports: [{name: http, port: 8080}]\n", "");
    let mut l = Launcher::start_args(&yaml, &["--setup-pod-network"]);
    let st = l.wait_exit(BOOT_TIMEOUT);
    let log = l.log();
    assert_eq!(st.code(), Some(1), "{log}");
    assert!(
        log.contains("--tcp-ports %eth0/all --udp-ports %eth0/all)"),
        "{log}"
    );
    assert!(log.contains("Invalid port specifier %eth0/all"), "{log}");
}

/// A directory holding `passt` -> tests/passt/passt-bookworm-shim, and a
/// `PATH` with it first, for one launcher (libvirt runs passt by name).
/// Test-only: see the shim's header for why it exists and exactly what it
/// rewrites.
fn passt_shim_path() -> (tempfile::TempDir, std::ffi::OsString) {
    let shim = repo_root().join("tests/passt/passt-bookworm-shim");
    assert!(
        shim.is_file() && std::path::Path::new("/usr/bin/passt").is_file(),
        "need {} and /usr/bin/passt (apt-get install passt)",
        shim.display()
    );
    let dir = tempfile::Builder::new()
        .prefix("vl-passt-shim-")
        .tempdir()
        .unwrap();
    std::os::unix::fs::symlink(&shim, dir.path().join("passt")).unwrap();
    let mut path = std::ffi::OsString::from(dir.path());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into()));
    (dir, path)
}

/// The passt data path end to end with real libvirt, real passt and the
/// real guest. The launcher emits KubeVirt's passt XML unchanged; only
/// this test's launcher finds bookworm's passt through
/// tests/passt/passt-bookworm-shim (first on its `PATH`), which rewrites
/// the two things that passt cannot take from libvirt 11.3 (see
/// [`passt_binding_starts_passt_which_refuses_libvirts_port_spec`]):
/// `--tcp-ports %eth0/8080` becomes `--tcp-ports 8080`, and `--runas 0:0`
/// keeps passt able to write libvirt's PID file. Then passt's DHCP gives
/// the guest the pod's own address (10.244.0.5/24, router 10.244.0.1) and
/// its DHCPv6 the pod's fd00:10:244::5, and from the pod's network
/// namespace, where nothing but passt reaches the guest (no bridge, no
/// tap, no NAT), a TCP connection to either pod address on the spec's port
/// 8080 gets the guest's httpd, while port 80, which the guest also serves
/// but the spec does not forward, is refused. passt ends with the launcher.
#[test]
fn passt_guest_gets_the_pods_address_and_its_port_is_forwarded() {
    let yaml = masquerade_vmi("netpasstfwd").replace(
        "        masquerade: {}\n",
        "        binding: {name: passt}\n",
    );
    assert!(yaml.contains("binding: {name: passt}"), "{yaml}");
    let (_shim, path) = passt_shim_path();
    let t0 = std::time::Instant::now();
    let mut l = Launcher::start(
        &yaml,
        &Opts {
            args: &["--setup-pod-network"],
            env: &[("PATH", &path)],
            ..Opts::default()
        },
    );
    // libvirt starts passt (through the shim) just before QEMU, both with
    // the socket on their command lines: its first appearance is the
    // domain's start.
    let socket = "e2e_netpasstfwd-ua-default.socket";
    while processes_mentioning(socket).is_empty() {
        if t0.elapsed() > BOOT_TIMEOUT || !alive(l.pid()) {
            panic!("passt never started\n{}", l.log());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let t_passt = t0.elapsed();
    let serial = l.wait_serial("GUEST-DHCP ", 1, BOOT_TIMEOUT);
    let t_lease = t0.elapsed();
    eprintln!(
        "passt started {t_passt:?} after the launcher, the guest's lease {:?} after passt",
        t_lease - t_passt
    );
    let f = fields(&serial, "GUEST-DHCP");
    assert_eq!(f["interface"], "eth0", "{serial}");
    assert_eq!(f["ip"], "10.244.0.5/24", "{serial}");
    assert_eq!(f["router"], "10.244.0.1", "{serial}");
    // passt's DHCPv6 gives the pod's IPv6 address too.
    let serial = l.wait_serial("GUEST-DHCP6 ", 1, BOOT_TIMEOUT);
    let f6 = fields(&serial, "GUEST-DHCP6");
    assert_eq!(f6["interface"], "eth0", "{serial}");
    assert_eq!(f6["ip"], "fd00:10:244::5", "{serial}");

    // The passt that runs (daemonized, re-executed as its CPU's build,
    // e.g. /usr/bin/passt.avx2) is bookworm's, with the shim's rewrite of
    // libvirt's command line (and only that).
    let passts: Vec<u32> = processes_mentioning(socket)
        .into_iter()
        .filter(|p| {
            std::fs::read_link(format!("/proc/{p}/exe"))
                .is_ok_and(|e| e.to_string_lossy().starts_with("/usr/bin/passt"))
        })
        .collect();
    let [passt] = passts[..] else {
        panic!("not one passt for {socket}: {passts:?}\n{}", l.log());
    };
    let cmdline = std::fs::read(format!("/proc/{passt}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let line = args.join(" ");
    let status = std::fs::read_to_string(format!("/proc/{passt}/status")).unwrap_or_default();
    let uid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .unwrap_or_default();
    if crate::harness::nonroot() {
        // The session daemon's passt runs as the launcher's user, 107,
        // with nothing to switch (the shim adds no --runas).
        assert!(
            line.starts_with("/usr/bin/passt --one-off --socket /var/run/libvirt/qemu/run/"),
            "{line}"
        );
        assert_eq!(uid.split_whitespace().nth(1), Some("107"), "{status}");
    } else {
        // (passt splits `0:0` in place: its argv shows `0 0`.)
        assert!(line.starts_with("/usr/bin/passt --runas 0"), "{line}");
        assert!(line.contains(" --one-off --socket /run/libvirt/"), "{line}");
        // It kept root's identity (bookworm's passt would be `nobody`).
        assert_eq!(uid.split_whitespace().nth(1), Some("0"), "{status}");
    }
    assert!(
        line.contains(" --interface eth0 --log-file /var/run/kubevirt/passt.log --tcp-ports 8080"),
        "{line}"
    );

    // Port forwarding from the pod's side, through passt only.
    let ready = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    assert!(ready.contains("ip=10.244.0.5 "), "{ready}");
    let netns = format!("/proc/{}/ns/net", l.worker_pid());
    // (The page names the guest's hostname: `localhost` here, as passt's
    // DHCP sends none, unlike the launcher's for masquerade.)
    for addr in ["10.244.0.5:8080", "[fd00:10:244::5]:8080"] {
        let body = http_get_in_netns(&netns, addr);
        assert!(
            body.contains("200 OK") && body.contains("GUEST-HTTP "),
            "{addr}: {body}"
        );
    }
    let refused = {
        let netns = netns.clone();
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&netns).unwrap();
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            std::net::TcpStream::connect_timeout(
                &"10.244.0.5:80".parse().unwrap(),
                std::time::Duration::from_secs(2),
            )
            .map(|_| ())
            .map_err(|e| e.kind())
        })
        .join()
        .unwrap()
    };
    assert_eq!(
        refused,
        Err(std::io::ErrorKind::ConnectionRefused),
        "port 80 is not in the spec's ports, so passt must not forward it"
    );
    // The launcher ran no DHCP server of its own: the lease was passt's.
    let log = l.log();
    assert!(!log.contains("DHCPv4 server started"), "{log}");
    l.terminate(BOOT_TIMEOUT);
    // passt (`--one-off`, in a session of its own) ends with the domain.
    let t = std::time::Instant::now();
    while alive(passt) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "passt {passt} outlived its launcher"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
