//! A second opinion on our DHCP bytes: Wireshark's dissectors (`tshark
//! -V`, Debian's `tshark` package, installed by `.ci/install`) read the
//! OFFER and the DHCPv6 ADVERTISE the servers build for a VMI with every
//! option, and must name each option with our value and find nothing
//! malformed. The unit tests decode with `dhcproto`, the library that
//! also encodes them; this check does not share its code.
//!
//! `text2pcap` (from the same package) wraps each payload in Ethernet,
//! IP and UDP headers, so no capture format is written here.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
// No reaper runs in this test binary: std's wait is safe here.
#![allow(clippy::disallowed_methods)]

use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

use dhcproto::{v4, v6, Encodable};
use network::dhcpv4::{DhcpV4Config, ExtraOptions, Route, LEASE_SECONDS};
use network::dhcpv6::{duid_ll, eui64_link_local, DhcpV6Config};

const MAC: [u8; 6] = [0x02, 0x54, 0x00, 0x6a, 0x9a, 0x15];

/// `tshark -V` of one UDP payload; `ipv6` picks the IP header
/// text2pcap adds. Fails loudly when the tools are missing.
fn dissect(payload: &[u8], ports: &str, ipv6: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let hex: String = payload
        .chunks(16)
        .enumerate()
        .map(|(i, c)| {
            let bytes: Vec<String> = c.iter().map(|b| format!("{b:02x}")).collect();
            format!("{:06x} {}\n", i * 16, bytes.join(" "))
        })
        .collect();
    let txt = dir.path().join("packet.txt");
    let pcap = dir.path().join("packet.pcap");
    std::fs::write(&txt, hex).unwrap();
    let mut t = Command::new("text2pcap");
    t.arg("-q").args(["-u", ports]);
    if let Some(addrs) = ipv6 {
        t.args(["-6", addrs]);
    }
    let out = t.arg(&txt).arg(&pcap).output().unwrap_or_else(|e| {
        panic!("text2pcap: {e} (install Debian's tshark package: .ci/install)")
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("tshark")
        .args(["-n", "-V", "-r"])
        .arg(&pcap)
        .output()
        .unwrap_or_else(|e| panic!("tshark: {e} (install Debian's tshark package: .ci/install)"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !text.contains("Malformed") && !text.contains("[Expert Info (Error"),
        "Wireshark finds the packet malformed:\n{text}"
    );
    text
}

fn assert_lines(text: &str, expected: &[&str]) {
    for e in expected {
        assert!(
            text.lines().any(|l| l.trim() == *e),
            "Wireshark does not show {e:?}:\n{text}"
        );
    }
}

#[test]
fn wireshark_reads_every_dhcpv4_option_of_an_offer() {
    let cfg = DhcpV4Config {
        client_mac: MAC,
        client_ip: Ipv4Addr::new(10, 0, 2, 2),
        prefix_len: 24,
        server_ip: Ipv4Addr::new(10, 0, 2, 1),
        router: Some(Ipv4Addr::new(10, 0, 2, 1)),
        dns: vec![Ipv4Addr::new(10, 96, 0, 10)],
        search: vec![
            "default.svc.cluster.local".into(),
            "svc.cluster.local".into(),
        ],
        subdomain: String::new(),
        hostname: "testvm1".into(),
        mtu: 1450,
        routes: vec![
            Route {
                dst: Some("192.168.1.0/24".parse().unwrap()),
                gw: Some(Ipv4Addr::new(10, 0, 2, 254)),
            },
            Route {
                dst: None,
                gw: Some(Ipv4Addr::new(10, 0, 2, 1)),
            },
        ],
        lease_seconds: LEASE_SECONDS,
        extra: ExtraOptions {
            boot_file_name: Some("pxelinux.0".into()),
            tftp_server_name: Some("tftp.example.org".into()),
            ntp_servers: vec!["10.0.0.5".into()],
            private_options: vec![(240, "extra.options.kubevirt.io".into())],
        },
    };
    let s = cfg.build().unwrap();
    let mut req = v4::Message::new_with_id(
        0x1234_5678,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        &MAC,
    );
    req.opts_mut()
        .insert(v4::DhcpOption::MessageType(v4::MessageType::Discover));
    let offer = s.reply(&req).unwrap().to_vec().unwrap();
    let text = dissect(&offer, "67,68", None);
    assert_lines(
        &text,
        &[
            "Dynamic Host Configuration Protocol (Offer)",
            "Your (client) IP address: 10.0.2.2",
            "Client MAC address: 02:54:00:6a:9a:15",
            "Subnet Mask: 255.255.255.0",
            "Router: 10.0.2.1",
            "Domain Name Server: 10.96.0.10",
            "Host Name: testvm1",
            "Domain Name: default.svc.cluster.local",
            "Interface MTU: 1450",
            "Network Time Protocol Server: 10.0.0.5",
            "IP Address Lease Time: (86313600s) 999 days",
            "DHCP Server Identifier: 10.0.2.1",
            "TFTP Server Name: tftp.example.org",
            "Bootfile name: pxelinux.0",
            "FQDN: default.svc.cluster.local",
            "FQDN: svc.cluster.local",
            // RFC 3442 order: the default route last.
            "192.168.1.0/24-10.0.2.254",
            "default-10.0.2.1",
            "Option: (240) Private",
            // "extra.options.kubevirt.io" in hex
            "Value: 65787472612e6f7074696f6e732e6b756265766972742e696f",
            "Option: (255) End",
        ],
    );
    let routes = text.find("192.168.1.0/24-10.0.2.254").unwrap();
    assert!(routes < text.find("default-10.0.2.1").unwrap(), "{text}");
}

#[test]
fn wireshark_reads_every_dhcpv6_option_of_a_reply() {
    let cfg = DhcpV6Config {
        client_mac: MAC,
        client_ip: "fd10:0:2::2".parse().unwrap(),
        server_mac: [2, 0, 0, 0, 0, 0],
        dns: vec!["fd00:10:96::a".parse().unwrap()],
        search: vec!["default.svc.cluster.local".into()],
        subdomain: String::new(),
    };
    let s = cfg.build().unwrap();
    let mut req = v6::Message::new(v6::MessageType::Request);
    req.set_xid_num(0x00ab_cdef);
    req.opts_mut()
        .insert(v6::DhcpOption::ClientId(duid_ll(&MAC)));
    req.opts_mut()
        .insert(v6::DhcpOption::ServerId(s.server_id().to_vec()));
    req.opts_mut().insert(v6::DhcpOption::IANA(v6::IANA {
        id: 1,
        t1: 0,
        t2: 0,
        opts: v6::DhcpOptions::new(),
    }));
    let ll: Ipv6Addr = eui64_link_local(&MAC);
    let reply = s.reply(&req, &ll).unwrap().to_vec().unwrap();
    let text = dissect(&reply, "547,546", Some(&format!("fe80::1,{ll}")));
    assert_lines(
        &text,
        &[
            "Message type: Reply (7)",
            "Transaction ID: 0xabcdef",
            "Link-layer address: 02:54:00:6a:9a:15",
            "Link-layer address: 02:00:00:00:00:00",
            "IAID: 00000001",
            "IPv6 address: fd10:0:2::2",
            "Valid lifetime: 86313600",
            "1 DNS server address: fd00:10:96::a",
            "List entry: default.svc.cluster.local.",
        ],
    );
}
