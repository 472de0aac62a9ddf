//! Phase 2's preparation against fake pod links and real cache files.

use super::*;
use dhcproto::v4::{DhcpOption, OptionCode};
use std::path::Path;

use crate::phase1::Phase1Error;

fn vmi(doc: &str) -> VirtualMachineInstance {
    let mut v = api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap();
    api::defaults::fill_missing_uid(&mut v);
    v
}

const VMI: &str = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: testvm1.example}
spec:
  subdomain: mysub
  domain:
    devices:
      interfaces:
      - name: default
        masquerade: {}
        dhcpOptions: {ntpServers: [10.0.0.5]}
    resources: {requests: {memory: 64Mi}}
  networks: [{name: default, pod: {vmNetworkCIDR: 10.11.0.0/24}}]
";

fn link(name: &str) -> Result<PodLink, Phase1Error> {
    let (mac, mtu) = match name {
        "eth0" => ([0x0a, 0x58, 0, 0, 0, 5], 1450),
        "k6t-eth0" => ([0x02, 0, 0, 0, 0, 0], 1450),
        "eth0-nic" => ([0x02, 0, 0, 0, 0, 1], 1450),
        // The hashed pod link of network "blue" and its `-nic`.
        "pod16477688c0e" => ([0x0a, 0x58, 0, 0, 1, 5], 1400),
        "16477688c0e-nic" => ([0x02, 0, 0, 0, 1, 1], 1400),
        other => return Err(gone(other)),
    };
    Ok(PodLink {
        mac,
        mtu,
        ipv4: true,
        ipv6: true,
    })
}

/// What `ip addr show` says of a link the pod has not.
fn gone(name: &str) -> Phase1Error {
    Phase1Error::Command {
        command: format!("ip -j addr show dev {name}"),
        message: "Device \"{name}\" does not exist.".replace("{name}", name),
    }
}

fn no_udn(name: &str) -> Result<bool, Phase1Error> {
    assert_eq!(name, "ovn-udn1");
    Ok(false)
}

/// passt: no tap, no DHCP server, no link read; only the link passt
/// takes its addresses from.
#[test]
fn passt_interface_gets_no_tap_and_no_dhcp() {
    let v = vmi(&VMI.replace("masquerade: {}", "binding: {name: passt}"));
    let never = |name: &str| -> Result<PodLink, Phase1Error> { panic!("read link {name}") };
    let p = prepare(&v, Path::new("/nonexistent"), "", &never, &no_udn).unwrap();
    assert!(p.dhcp.is_empty() && p.dhcp6.is_empty());
    assert_eq!(
        p.hosts["default"],
        InterfaceHost {
            source_dev: Some("eth0".into()),
            ..InterfaceHost::default()
        }
    );
    let udn = |_: &str| -> Result<bool, Phase1Error> { Ok(true) };
    let p = prepare(&v, Path::new("/nonexistent"), "", &never, &udn).unwrap();
    assert_eq!(p.hosts["default"].source_dev.as_deref(), Some("ovn-udn1"));
    let broken = |_: &str| -> Result<bool, Phase1Error> {
        Err(Phase1Error::Sys {
            what: "looking up link ovn-udn1".into(),
            source: nix::errno::Errno::EPERM,
        })
    };
    assert_eq!(
        prepare(&v, Path::new("/nonexistent"), "", &never, &broken).unwrap_err().to_string(),
        "spec.domain.devices.interfaces[0]: looking up link ovn-udn1: EPERM: Operation not permitted"
    );
    // The lookup itself: lo exists everywhere, a 15-character name
    // nobody made does not.
    assert!(matches!(crate::phase1::link_exists("lo"), Ok(true)));
    assert!(matches!(
        crate::phase1::link_exists("nosuchlink0xyz"),
        Ok(false)
    ));
}

#[test]
fn masquerade_interface_gets_host_facts_and_a_dhcp_plan() {
    let resolv = "nameserver 10.96.0.10\nnameserver fd00:10:96::a\nsearch ns1.svc.cluster.local svc.cluster.local\n";
    let p = prepare(&vmi(VMI), Path::new("/nonexistent"), resolv, &link, &no_udn).unwrap();
    // DHCPv6 too (the pod link has a global IPv6 address): the third
    // address of the default vmIPv6NetworkCIDR, the bridge's MAC as
    // server DUID, the IPv6 nameserver only.
    let (bridge6, v6) = &p.dhcp6[0];
    assert_eq!(bridge6, "k6t-eth0");
    assert_eq!(v6.config.client_ip.to_string(), "fd10:0:2::2");
    assert_eq!(v6.config.client_mac, [0x0a, 0x58, 0, 0, 0, 5]);
    assert_eq!(v6.server_id(), [0, 3, 0, 1, 2, 0, 0, 0, 0, 0]);
    assert_eq!(
        v6.config.dns,
        ["fd00:10:96::a".parse::<std::net::Ipv6Addr>().unwrap()]
    );
    let h = &p.hosts["default"];
    assert_eq!(h.tap, "tap0");
    assert_eq!(h.mac.as_deref(), Some("0a:58:00:00:00:05"));
    assert_eq!(h.mtu, Some(1450));
    let (bridge, opts) = &p.dhcp[0];
    assert_eq!(bridge, "k6t-eth0");
    let c = &opts.config;
    assert_eq!(c.client_ip, std::net::Ipv4Addr::new(10, 11, 0, 2));
    assert_eq!(c.server_ip, std::net::Ipv4Addr::new(10, 11, 0, 1));
    assert_eq!(c.hostname, "testvm1");
    assert_eq!(c.mtu, 1450);
    // A name longer than a label: KubeVirt's hostname, its first part
    // cut to 63, is what the DHCP server sends (and it builds).
    let long = format!("{}{}.example", "h".repeat(63), "x".repeat(87));
    let p2 = prepare(
        &vmi(&VMI.replace("testvm1.example", &long)),
        Path::new("/nonexistent"),
        resolv,
        &link,
        &no_udn,
    )
    .unwrap();
    let long_opts = &p2.dhcp[0].1;
    assert_eq!(long_opts.config.hostname, "h".repeat(63));
    assert_eq!(
        long_opts.options().get(OptionCode::Hostname),
        Some(&DhcpOption::Hostname("h".repeat(63)))
    );
    assert_eq!(c.client_mac, [0x0a, 0x58, 0, 0, 0, 5]);
    assert_eq!(
        opts.options().get(OptionCode::DomainName),
        Some(&DhcpOption::DomainName(
            "mysub.ns1.svc.cluster.local".into()
        ))
    );
}

#[test]
fn other_bindings_and_bad_values_are_refused_by_field() {
    let none = Path::new("/nonexistent");
    let e = prepare(
        &vmi(&VMI.replace("masquerade: {}", "macvtap: {}")),
        none,
        "",
        &link,
        &no_udn,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("interfaces[0]: the macvtap binding is not wired"),
        "{e}"
    );
    // SR-IOV interfaces are host devices: phase 2 leaves them alone.
    let p = prepare(
        &vmi(&VMI.replace("masquerade: {}", "sriov: {}")),
        none,
        "",
        &link,
        &no_udn,
    )
    .unwrap();
    assert!(p.hosts.is_empty() && p.dhcp.is_empty() && p.dhcp6.is_empty());
    let e = prepare(
        &vmi(&VMI.replace("masquerade: {}", "bridge: {}")),
        none,
        "",
        &link,
        &no_udn,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("interfaces[0]: network cache /nonexistent/vif-cache-eth0.json: No such file"),
        "{e}"
    );
    let e = prepare(
        &vmi(&VMI.replace("10.0.0.5", "ntp.example.org")),
        Path::new("/"),
        "",
        &link,
        &no_udn,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("interfaces[0]: DHCP: Could not parse NTP server"),
        "{e}"
    );
    let e = prepare(
        &vmi(&VMI.replace("10.11.0.0/24", "10.11.0.0/31")),
        Path::new("/"),
        "",
        &link,
        &no_udn,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("at least 4 addresses"), "{e}");
    let fail = |_: &str| -> Result<PodLink, Phase1Error> { Err(gone("eth0")) };
    assert_eq!(
        prepare(&vmi(VMI), Path::new("/"), "", &fail, &no_udn).unwrap_err().to_string(),
        "spec.domain.devices.interfaces[0]: pod link eth0 is missing (ip -j addr show dev eth0: Device \"eth0\" does not exist.)"
    );
}

/// Bridge binding: the pod's address, MAC, MTU, gateway and routes
/// from what virt-handler wrote (the kernel's subnet route skipped).
#[test]
fn bridge_interface_is_served_from_the_vif_cache() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
            dir.path().join("vif-cache-eth0.json"),
            r#"{"Name":"","IP":{"IP":"10.244.0.5","Mask":"////AA=="},"MAC":"qrvM3e7/",
               "AdvertisingIPAddr":"","Mtu":0,"IPAMDisabled":false,
               "Gateway":"10.244.0.1","Subdomain":"",
               "Routes":[{"Dst":{"IP":"10.244.0.0","Mask":"////AA=="},"Src":"10.244.0.5","Gw":""},
                         {"Dst":null,"Src":"","Gw":"10.244.0.1"},
                         {"Dst":{"IP":"10.96.0.0","Mask":"//8AAA=="},"Src":"","Gw":"10.244.0.1"}]}"#,
        )
        .unwrap();
    let v = vmi(&VMI.replace("masquerade: {}", "bridge: {}"));
    let p = prepare(&v, dir.path(), "nameserver 10.96.0.10\n", &link, &no_udn).unwrap();
    // The domain: the pod link's (the dummy's) MAC and MTU; the DHCP
    // server: the cache's MAC and address, KubeVirt's fake address for
    // index 0 (the cache's AdvertisingIPAddr, empty as phase 1 leaves
    // it, is not read), the MTU of eth0-nic, no DHCPv6.
    let h = &p.hosts["default"];
    assert_eq!(
        (h.tap.as_str(), h.mac.as_deref(), h.mtu),
        ("tap0", Some("0a:58:00:00:00:05"), Some(1450))
    );
    assert!(p.dhcp6.is_empty());
    let c = &p.dhcp[0].1.config;
    assert_eq!(c.mtu, 1450);
    assert_eq!(c.client_ip, std::net::Ipv4Addr::new(10, 244, 0, 5));
    assert_eq!(c.prefix_len, 24);
    assert_eq!(c.server_ip, std::net::Ipv4Addr::new(169, 254, 75, 10));
    assert_eq!(c.router, Some(std::net::Ipv4Addr::new(10, 244, 0, 1)));
    assert_eq!(c.client_mac, [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    assert_eq!(c.routes.len(), 2, "{:?}", c.routes);
    assert_eq!(
        crate::dhcpv4::classless_routes(&c.routes)[0].0,
        "10.96.0.0/16".parse::<ipnet::Ipv4Net>().unwrap()
    );
    // IPAM disabled: the interface, but no DHCP server.
    let text = std::fs::read_to_string(dir.path().join("vif-cache-eth0.json")).unwrap();
    std::fs::write(
        dir.path().join("vif-cache-eth0.json"),
        text.replace("\"IPAMDisabled\":false", "\"IPAMDisabled\":true"),
    )
    .unwrap();
    let p = prepare(&v, dir.path(), "", &link, &no_udn).unwrap();
    assert!(p.dhcp.is_empty());
    assert!(p.hosts.contains_key("default"));
}

/// KubeVirt's names: eth0 for the pod network and a default Multus
/// network; hashed, then ordinal (counting secondary Multus networks
/// only) for the others.
#[test]
fn pod_iface_names_follow_kubevirts_schemes() {
    let v = vmi("apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: n}
spec:
  domain:
    devices: {}
    resources: {requests: {memory: 64Mi}}
  networks:
  - {name: prim, multus: {networkName: ns/prim, default: true}}
  - {name: red, multus: {networkName: ns/red}}
  - {name: blue, multus: {networkName: ns/blue}}
");
    assert_eq!(pod_iface_candidates(&v, "prim").unwrap(), ["eth0"]);
    assert_eq!(
        pod_iface_candidates(&v, "blue").unwrap(),
        ["pod16477688c0e", "net2"]
    );
    assert_eq!(pod_iface_candidates(&v, "red").unwrap()[1], "net1");
    assert_eq!(pod_iface_candidates(&v, "nope"), None);
}

/// A pod masquerade interface and a bridge on a Multus network: each
/// with its own tap, bridge, cache and DHCP server; the secondary's
/// server answers from 169.254.75.11 (its index is 1), without a
/// router when phase 1 found no gateway; the ordinal name `net1` when
/// the hashed link does not exist.
#[test]
fn multus_bridge_interface_gets_its_own_tap_cache_and_dhcp() {
    let two = VMI
        .replace(
            "        dhcpOptions: {ntpServers: [10.0.0.5]}\n",
            "        dhcpOptions: {ntpServers: [10.0.0.5]}\n      - {name: blue, bridge: {}}\n",
        )
        .replace(
            "networks: [{name: default, pod: {vmNetworkCIDR: 10.11.0.0/24}}]",
            "networks: [{name: default, pod: {}}, {name: blue, multus: {networkName: e2e/blue}}]",
        );
    let v = vmi(&two);
    assert_eq!(v.spec.domain.devices.interfaces.len(), 2, "{two}");
    let dir = tempfile::tempdir().unwrap();
    let cache = r#"{"IP":{"IP":"10.245.1.5","Mask":"////AA=="},"MAC":"ClgK9QEF","IPAMDisabled":false,"Gateway":""}"#;
    std::fs::write(dir.path().join("vif-cache-pod16477688c0e.json"), cache).unwrap();
    let p = prepare(&v, dir.path(), "", &link, &no_udn).unwrap();
    assert_eq!(p.hosts["default"].tap, "tap0");
    let h = &p.hosts["blue"];
    assert_eq!(
        (h.tap.as_str(), h.mac.as_deref(), h.mtu),
        ("tap16477688c0e", Some("0a:58:00:00:01:05"), Some(1400))
    );
    assert_eq!(p.dhcp.len(), 2);
    let (bridge, opts) = &p.dhcp[1];
    assert_eq!(bridge, "k6t-16477688c0e");
    let c = &opts.config;
    assert_eq!(c.client_ip, std::net::Ipv4Addr::new(10, 245, 1, 5));
    assert_eq!(c.client_mac, [0x0a, 0x58, 0x0a, 0xf5, 1, 5]);
    assert_eq!(c.server_ip, std::net::Ipv4Addr::new(169, 254, 75, 11));
    assert_eq!((c.router, c.mtu), (None, 1400));
    // Only the pod network's masquerade gets DHCPv6.
    assert_eq!(p.dhcp6.len(), 1);

    // A pod made with the ordinal scheme: net1.
    let ordinal = |name: &str| -> Result<PodLink, Phase1Error> {
        match name {
            "net1" | "net1-nic" => Ok(PodLink {
                mac: [0x0a, 0x58, 0, 0, 9, 5],
                mtu: 1300,
                ipv4: true,
                ipv6: false,
            }),
            "pod16477688c0e" => Err(gone(name)),
            other => link(other),
        }
    };
    std::fs::write(dir.path().join("vif-cache-net1.json"), cache).unwrap();
    let p = prepare(&v, dir.path(), "", &ordinal, &no_udn).unwrap();
    assert_eq!(p.hosts["blue"].tap, "tap1");
    assert_eq!(p.dhcp[1].0, "k6t-net1");
    assert_eq!(p.dhcp[1].1.config.mtu, 1300);

    // Neither link: refused naming both names.
    let none = |name: &str| -> Result<PodLink, Phase1Error> {
        if name == "pod16477688c0e" || name == "net1" {
            Err(gone(name))
        } else {
            link(name)
        }
    };
    let e = prepare(&v, dir.path(), "", &none, &no_udn)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "spec.domain.devices.interfaces[1]: pod link pod16477688c0e or net1 is missing"
        ),
        "{e}"
    );

    // IPAM disabled (the Multus link had no IPv4 address): the NIC,
    // no DHCP server for it.
    std::fs::write(
        dir.path().join("vif-cache-pod16477688c0e.json"),
        r#"{"IPAMDisabled":true}"#,
    )
    .unwrap();
    let p = prepare(&v, dir.path(), "", &link, &no_udn).unwrap();
    assert!(p.hosts.contains_key("blue"));
    assert_eq!(p.dhcp.len(), 1);
}
