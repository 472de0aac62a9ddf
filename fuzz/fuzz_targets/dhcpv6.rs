//! A datagram from the guest, its source address, and what the server was
//! configured with → the DHCPv6 server's request parsing
//! (`network::dhcpv6::decode_packet`) and answer building
//! (`ServerV6::reply`, then the encoding `network::server::serve_v6`
//! sends).
//!
//! Input: a 2-byte little-endian length, that many bytes of packet, then
//! the rest, as `arbitrary` reads it: whether the request comes from the
//! guest's own link-local address (else any 16 bytes), and each field of
//! a masquerade interface's DHCPv6 configuration kept or replaced (the
//! guest's and the bridge's MAC, the address given, the pod's resolv.conf
//! text, subdomain).
//!
//! Property: nothing panics (panics `decode_packet` catches inside
//! `dhcproto` are let through, see `catching`); a configuration `build`
//! accepts always gives replies that encode, fit a UDP datagram, decode
//! again with our own decoder (our server's replies are client messages
//! to it) and carry the request's transaction id and client id, our
//! server id, and in an IA_NA only our address; only the guest (by its
//! source address) is answered. Seeds: `fuzz/seeds/dhcpv6`.

#![no_main]

use std::net::Ipv6Addr;

use arbitrary::Unstructured;
use dhcproto::v6::{DhcpOption, MessageType, OptionCode};
use dhcproto::Encodable;
use libfuzzer_sys::fuzz_target;
use network::dhcpv4::parse_resolv_conf;
use network::dhcpv6::{
    decode_packet, eui64_link_local, source_is_guest, DhcpV6Config, ServerV6,
};
use virt_launcher_fuzz::{catching, split_packet};

/// The largest UDP payload over IPv6 without jumbograms.
const MAX_UDP: usize = 65_527;

fn base() -> DhcpV6Config {
    DhcpV6Config {
        client_mac: [0x02, 0x54, 0x00, 0x6a, 0x9a, 0x15],
        client_ip: "fd10:0:2::2".parse().unwrap(),
        server_mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x01],
        dns: vec!["fd00:10:96::a".parse().unwrap()],
        search: vec!["default.svc.cluster.local".into()],
        subdomain: String::new(),
    }
}

fn configure(u: &mut Unstructured<'_>) -> arbitrary::Result<(DhcpV6Config, Ipv6Addr)> {
    let mut c = base();
    if u.arbitrary()? {
        c.client_mac = u.arbitrary()?;
        c.server_mac = u.arbitrary()?;
        c.client_ip = Ipv6Addr::from(u.arbitrary::<u128>()?);
    }
    if u.arbitrary()? {
        let rc = parse_resolv_conf(u.arbitrary()?);
        c.dns = rc.nameservers6;
        c.search = rc.search;
    }
    if u.arbitrary()? {
        c.subdomain = u.arbitrary()?;
    }
    let source = if u.arbitrary()? {
        Ipv6Addr::from(u.arbitrary::<u128>()?)
    } else {
        eui64_link_local(&c.client_mac)
    };
    Ok((c, source))
}

fn check(server: &ServerV6, req: &dhcproto::v6::Message, source: &Ipv6Addr) {
    let Some(reply) = server.reply(req, source) else {
        return;
    };
    assert!(
        source_is_guest(source, &server.config.client_mac),
        "answered {source}"
    );
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
    assert!(
        matches!(back.msg_type(), MessageType::Advertise | MessageType::Reply),
        "{:?}",
        back.msg_type()
    );
    match (
        back.opts().get(OptionCode::ClientId),
        req.opts().get(OptionCode::ClientId),
    ) {
        (Some(DhcpOption::ClientId(a)), Some(DhcpOption::ClientId(b))) => assert_eq!(a, b),
        other => panic!("client id: {other:?}"),
    }
    assert!(matches!(
        back.opts().get(OptionCode::ServerId),
        Some(DhcpOption::ServerId(id)) if id == server.server_id()
    ));
    if let Some(DhcpOption::IANA(ia)) = back.opts().get(OptionCode::IANA) {
        for o in ia.opts.iter() {
            if let DhcpOption::IAAddr(a) = o {
                assert_eq!(a.addr, server.config.client_ip);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (packet, rest) = split_packet(data);
    let mut u = Unstructured::new(rest);
    let Ok((config, source)) = configure(&mut u) else {
        return;
    };
    let Ok(server) = config.build() else {
        return;
    };
    let Ok(req) = catching(|| decode_packet(packet)) else {
        return;
    };
    check(&server, &req, &source);
});
