//! A datagram from the guest, and what the server was configured with →
//! the DHCPv4 server's request parsing (`network::dhcpv4::decode_packet`)
//! and answer building (`ServerOptions::reply`, then the encoding
//! `network::server::serve` sends).
//!
//! Input: a 2-byte little-endian length, that many bytes of packet, then
//! the configuration: each field of a masquerade interface's configuration
//! kept or replaced (the pod's resolv.conf text, subdomain, hostname, MTU,
//! routes, `dhcpOptions` ...), as `arbitrary` reads it. The client MAC is
//! the packet's `chaddr`, so every request that decodes gets an answer.
//!
//! Property: nothing panics (a panic `decode_packet` catches inside
//! `dhcproto` is the server's safety net, not a finding: this target lets
//! it be caught and prints where it came from, see `catching`); a
//! configuration `build` accepts always gives a reply that encodes (an
//! encoding error would end the server loop), fits a UDP datagram,
//! decodes again with our own decoder, and answers the request: its
//! `xid`, a BOOTREPLY, our address or none (NAK). Seeds:
//! `fuzz/seeds/dhcpv4` (DISCOVER and REQUEST packets, see
//! `fuzz/seeds/README.md`).

#![no_main]

use std::net::Ipv4Addr;

use arbitrary::Unstructured;
use dhcproto::v4::{DhcpOption, MessageType, Opcode, OptionCode};
use dhcproto::Encodable;
use libfuzzer_sys::fuzz_target;
use network::dhcpv4::{
    decode_packet, parse_resolv_conf, DhcpV4Config, ExtraOptions, Route, LEASE_SECONDS,
};
use virt_launcher_fuzz::{catching, split_packet};

/// The largest UDP payload over IPv4.
const MAX_UDP: usize = 65_507;

fn base(mac: [u8; 6]) -> DhcpV4Config {
    DhcpV4Config {
        client_mac: mac,
        client_ip: Ipv4Addr::new(10, 0, 2, 2),
        prefix_len: 24,
        server_ip: Ipv4Addr::new(10, 0, 2, 1),
        router: Some(Ipv4Addr::new(10, 0, 2, 1)),
        dns: vec![Ipv4Addr::new(10, 96, 0, 10)],
        search: vec!["default.svc.cluster.local".into(), "svc.cluster.local".into()],
        subdomain: String::new(),
        hostname: "testvm1".into(),
        mtu: 1450,
        routes: vec![Route {
            dst: None,
            gw: Some(Ipv4Addr::new(10, 0, 2, 1)),
        }],
        lease_seconds: LEASE_SECONDS,
        extra: ExtraOptions::default(),
    }
}

/// `c` with the fields the input replaces.
fn configure(mut c: DhcpV4Config, u: &mut Unstructured<'_>) -> arbitrary::Result<DhcpV4Config> {
    if u.arbitrary()? {
        c.client_ip = Ipv4Addr::from(u.arbitrary::<u32>()?);
        c.prefix_len = u.arbitrary()?;
    }
    if u.arbitrary()? {
        c.server_ip = Ipv4Addr::from(u.arbitrary::<u32>()?);
        c.router = u.arbitrary::<Option<u32>>()?.map(Ipv4Addr::from);
    }
    if u.arbitrary()? {
        let rc = parse_resolv_conf(u.arbitrary()?);
        c.dns = rc.nameservers;
        c.search = rc.search;
    }
    if u.arbitrary()? {
        c.subdomain = u.arbitrary()?;
    }
    if u.arbitrary()? {
        c.hostname = u.arbitrary()?;
    }
    if u.arbitrary()? {
        c.mtu = u.arbitrary()?;
        c.lease_seconds = u.arbitrary()?;
    }
    if u.arbitrary()? {
        let routes: Vec<(u32, u8, Option<u32>)> = u.arbitrary()?;
        c.routes = routes
            .into_iter()
            .map(|(dst, len, gw)| Route {
                dst: ipnet_v4(dst, len),
                gw: gw.map(Ipv4Addr::from),
            })
            .collect();
    }
    if u.arbitrary()? {
        c.extra = ExtraOptions {
            boot_file_name: u.arbitrary()?,
            tftp_server_name: u.arbitrary()?,
            ntp_servers: u.arbitrary()?,
            private_options: u.arbitrary()?,
        };
    }
    Ok(c)
}

fn ipnet_v4(addr: u32, len: u8) -> Option<ipnet::Ipv4Net> {
    ipnet::Ipv4Net::new(Ipv4Addr::from(addr), len % 33).ok()
}

fuzz_target!(|data: &[u8]| {
    let (packet, rest) = split_packet(data);
    let mut mac = [0x02, 0x54, 0x00, 0x6a, 0x9a, 0x15];
    if packet.len() >= 34 {
        mac.copy_from_slice(&packet[28..34]);
    }
    let mut u = Unstructured::new(rest);
    let Ok(config) = configure(base(mac), &mut u) else {
        return;
    };
    let Ok(server) = config.build() else {
        // Refused before any server starts (the launcher's check_spec).
        return;
    };
    let Ok(req) = catching(|| decode_packet(packet)) else {
        return;
    };
    let Some(reply) = server.reply(&req) else {
        return;
    };
    let bytes = match reply.to_vec() {
        Ok(b) => b,
        Err(e) => panic!("the reply to an accepted request does not encode: {e}\n{reply:?}"),
    };
    assert!(bytes.len() <= MAX_UDP, "reply of {} bytes", bytes.len());
    let back = match catching(|| decode_packet(&bytes)) {
        Ok(m) => m,
        Err(e) => panic!("our reply does not decode: {e}\n{reply:?}"),
    };
    assert_eq!(back.xid(), req.xid());
    assert_eq!(back.opcode(), Opcode::BootReply);
    assert_eq!(back.chaddr(), &server.config.client_mac[..]);
    let kind = back.opts().msg_type();
    assert!(
        matches!(
            kind,
            Some(MessageType::Offer | MessageType::Ack | MessageType::Nak)
        ),
        "{kind:?}"
    );
    if kind == Some(MessageType::Nak) {
        assert!(back.yiaddr().is_unspecified());
    } else {
        assert_eq!(back.yiaddr(), server.config.client_ip);
        assert!(matches!(
            back.opts().get(OptionCode::Hostname),
            Some(DhcpOption::Hostname(h)) if *h == server.config.hostname
        ));
    }
});
