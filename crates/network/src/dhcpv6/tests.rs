#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::mutate::{mutate, XorShift};
use dhcproto::{Decodable, Decoder, Encodable};

const MAC: [u8; 6] = [0x02, 0x54, 0x00, 0xab, 0xcd, 0xef];
const BRIDGE: [u8; 6] = [0x02, 0, 0, 0, 0, 0];
const CLIENT_DUID: [u8; 10] = [0, 3, 0, 1, 0x02, 0x54, 0x00, 0xab, 0xcd, 0xef];

fn guest_ll() -> Ipv6Addr {
    eui64_link_local(&MAC)
}

fn config() -> DhcpV6Config {
    DhcpV6Config {
        client_mac: MAC,
        client_ip: "fd10:0:2::2".parse().unwrap(),
        server_mac: BRIDGE,
        dns: vec!["fd00:10:96::a".parse().unwrap()],
        search: vec!["ns1.svc.cluster.local".into(), "cluster.local".into()],
        subdomain: String::new(),
    }
}

fn request(kind: MessageType, iaid: u32) -> Message {
    let mut m = Message::new_with_id(kind, [0x12, 0x34, 0x56]);
    let o = m.opts_mut();
    o.insert(DhcpOption::ClientId(CLIENT_DUID.to_vec()));
    o.insert(DhcpOption::IANA(IANA {
        id: iaid,
        t1: 0,
        t2: 0,
        opts: DhcpOptions::new(),
    }));
    o.insert(DhcpOption::ElapsedTime(0));
    m
}

/// Encodes the reply, decodes the bytes again with dhcproto: what the
/// guest receives.
fn wire(s: &ServerV6, req: &Message) -> Option<(Message, Vec<u8>)> {
    let bytes = req.to_vec().unwrap();
    let req = decode_packet(&bytes).unwrap();
    let reply = s.reply(&req, &guest_ll())?;
    let out = reply.to_vec().unwrap();
    Some((Message::decode(&mut Decoder::new(&out)).unwrap(), out))
}

/// The raw payload of the top-level option `code` in an encoded message.
fn raw_option(packet: &[u8], code: u16) -> Option<Vec<u8>> {
    let mut i = 4;
    while i + 4 <= packet.len() {
        let c = u16::from_be_bytes([packet[i], packet[i + 1]]);
        let len = usize::from(u16::from_be_bytes([packet[i + 2], packet[i + 3]]));
        let data = packet.get(i + 4..i + 4 + len)?;
        if c == code {
            return Some(data.to_vec());
        }
        i += 4 + len;
    }
    None
}

fn ia_addr(m: &Message) -> (u32, IAAddr) {
    match m.opts().get(OptionCode::IANA) {
        Some(DhcpOption::IANA(ia)) => match ia.opts.get(OptionCode::IAAddr) {
            Some(DhcpOption::IAAddr(a)) => (ia.id, a.clone()),
            other => panic!("no IAADDR in IA_NA: {other:?}"),
        },
        other => panic!("no IA_NA: {other:?}"),
    }
}

#[test]
fn solicit_gets_advertise_with_the_address_iaid_and_server_duid() {
    let s = config().build().unwrap();
    let (m, bytes) = wire(&s, &request(MessageType::Solicit, 0xcafe)).unwrap();
    assert_eq!(m.msg_type(), MessageType::Advertise);
    assert_eq!(m.xid(), [0x12, 0x34, 0x56]);
    assert_eq!(
        m.opts().get(OptionCode::ClientId),
        Some(&DhcpOption::ClientId(CLIENT_DUID.to_vec()))
    );
    // Server identifier: DUID-LL (3), Ethernet (1), the bridge MAC.
    assert_eq!(
        raw_option(&bytes, 2).unwrap(),
        [0, 3, 0, 1, 0x02, 0, 0, 0, 0, 0]
    );
    let (iaid, a) = ia_addr(&m);
    assert_eq!(iaid, 0xcafe);
    assert_eq!(a.addr, "fd10:0:2::2".parse::<Ipv6Addr>().unwrap());
    assert_eq!((a.preferred_life, a.valid_life), (86_313_600, 86_313_600));
    // IA_NA bytes: IAID, T1 = T2 = 0, then IAADDR (5, 24 bytes).
    let ia = raw_option(&bytes, 3).unwrap();
    assert_eq!(ia.len(), 12 + 4 + 24);
    assert_eq!(ia[..12], [0, 0, 0xca, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(ia[12..16], [0, 5, 0, 24]);
    // As KubeVirt: no DNS in ADVERTISE, no Rapid Commit.
    assert!(m.opts().get(OptionCode::DomainNameServers).is_none());
    assert!(m.opts().get(OptionCode::RapidCommit).is_none());
}

#[test]
fn request_renew_rebind_and_rapid_solicit_get_reply_with_dns_and_search() {
    let s = config().build().unwrap();
    let mut rapid = request(MessageType::Solicit, 7);
    rapid.opts_mut().insert(DhcpOption::RapidCommit);
    let mut req = request(MessageType::Request, 7);
    req.opts_mut()
        .insert(DhcpOption::ServerId(s.server_id().to_vec()));
    for (what, r) in [
        ("rapid solicit", rapid),
        ("request", req),
        ("renew", request(MessageType::Renew, 7)),
        ("rebind", request(MessageType::Rebind, 7)),
    ] {
        let (m, bytes) = wire(&s, &r).unwrap();
        assert_eq!(m.msg_type(), MessageType::Reply, "{what}");
        assert_eq!(ia_addr(&m).0, 7, "{what}");
        assert_eq!(
            m.opts().get(OptionCode::RapidCommit).is_some(),
            what == "rapid solicit",
            "{what}"
        );
        // Option 23: one 16-byte address.
        assert_eq!(
            m.opts().get(OptionCode::DomainNameServers),
            Some(&DhcpOption::DomainNameServers(vec!["fd00:10:96::a"
                .parse()
                .unwrap()])),
            "{what}"
        );
        assert_eq!(raw_option(&bytes, 23).unwrap().len(), 16);
        // Option 24: RFC 1035 labels, uncompressed (RFC 3646 §4), and
        // dhcproto decodes the same names back.
        let raw = raw_option(&bytes, 24).unwrap();
        let mut want = Vec::new();
        for d in ["ns1.svc.cluster.local", "cluster.local"] {
            for l in d.split('.') {
                want.push(l.len() as u8);
                want.extend_from_slice(l.as_bytes());
            }
            want.push(0);
        }
        assert_eq!(raw, want, "{what}");
        match m.opts().get(OptionCode::DomainSearchList) {
            Some(DhcpOption::DomainSearchList(names)) => {
                let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
                assert_eq!(names, ["ns1.svc.cluster.local.", "cluster.local."]);
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn subdomain_default_search_and_no_dns() {
    let mut c = config();
    c.dns.clear();
    c.subdomain = "mysub".into();
    let s = c.build().unwrap();
    let (m, bytes) = wire(&s, &request(MessageType::Request, 1)).unwrap();
    assert!(m.opts().get(OptionCode::DomainNameServers).is_none());
    let raw = raw_option(&bytes, 24).unwrap();
    assert!(raw.starts_with(b"\x05mysub\x03ns1\x03svc\x07cluster\x05local\x00"));
    let mut c = config();
    c.search.clear();
    let (_, bytes) = wire(&c.build().unwrap(), &request(MessageType::Request, 1)).unwrap();
    assert_eq!(raw_option(&bytes, 24).unwrap(), b"\x07cluster\x05local\x00");
    let mut c = config();
    c.search = vec!["bad_domain".into()];
    assert!(matches!(c.build(), Err(DhcpError::SearchDomain(_))));
    let mut c = config();
    c.search = (0..20).map(|i| format!("domain{i}.example.org")).collect();
    assert!(matches!(c.build(), Err(DhcpError::SearchListTooLong(_))));
}

#[test]
fn information_request_confirm_release_and_others() {
    let s = config().build().unwrap();
    let mut info = Message::new_with_id(MessageType::InformationRequest, [1, 2, 3]);
    info.opts_mut()
        .insert(DhcpOption::ClientId(CLIENT_DUID.to_vec()));
    let (m, _) = wire(&s, &info).unwrap();
    assert_eq!(m.msg_type(), MessageType::Reply);
    assert!(m.opts().get(OptionCode::IANA).is_none());
    assert!(m.opts().get(OptionCode::DomainNameServers).is_some());
    for k in [MessageType::Confirm, MessageType::Release] {
        let (m, _) = wire(&s, &request(k, 1)).unwrap();
        assert_eq!(m.msg_type(), MessageType::Reply, "{k:?}");
        assert!(m.opts().get(OptionCode::IANA).is_none(), "{k:?}");
        assert!(m.opts().get(OptionCode::DomainNameServers).is_none());
        assert_eq!(
            m.opts().get(OptionCode::ServerId),
            Some(&DhcpOption::ServerId(s.server_id().to_vec()))
        );
    }
    for k in [
        MessageType::Advertise,
        MessageType::Reply,
        MessageType::Decline,
        MessageType::Reconfigure,
        MessageType::Unknown(99),
    ] {
        assert!(wire(&s, &request(k, 1)).is_none(), "{k:?}");
    }
    // No client identifier, or another server's identifier: nothing.
    let mut anon = request(MessageType::Solicit, 1);
    anon.opts_mut().remove(OptionCode::ClientId);
    assert!(wire(&s, &anon).is_none());
    let mut other = request(MessageType::Request, 1);
    other
        .opts_mut()
        .insert(DhcpOption::ServerId(duid_ll(&[2, 0, 0, 0, 0, 9])));
    assert!(wire(&s, &other).is_none());
}

#[test]
fn only_the_guests_link_local_source_is_answered() {
    let s = config().build().unwrap();
    let req = request(MessageType::Solicit, 1);
    assert_eq!(
        guest_ll(),
        "fe80::54:ff:feab:cdef".parse::<Ipv6Addr>().unwrap()
    );
    assert!(s.reply(&req, &guest_ll()).is_some());
    // Another MAC's EUI-64 link-local, a global or unspecified source.
    let other = eui64_link_local(&[0x52, 0x54, 0, 0, 0, 1]);
    for src in [
        other,
        "fd10:0:2::2".parse().unwrap(),
        Ipv6Addr::UNSPECIFIED,
        Ipv6Addr::LOCALHOST,
    ] {
        assert!(s.reply(&req, &src).is_none(), "{src}");
    }
    // A stable-privacy (random) identifier cannot be attributed: answered.
    let random: Ipv6Addr = "fe80::1c2d:3e4f:5a6b:7c8d".parse().unwrap();
    assert!(s.reply(&req, &random).is_some());
}

#[test]
fn malformed_packets_decode_to_errors_not_panics() {
    let s = config().build().unwrap();
    let mut cases: Vec<Vec<u8>> = vec![
        vec![],
        vec![1, 2, 3],
        // relay-forward and relay-reply are refused outright
        vec![12, 0, 0, 0, 0, 1, 0, 0],
        vec![13; 40],
    ];
    // Options whose length dhcproto subtracts from (status code < 2,
    // vendor class/opts < 4, authentication < 11): overflow in debug.
    for (code, len) in [(13u16, 0u16), (13, 1), (16, 2), (17, 3), (11, 5)] {
        let mut p = vec![1, 0, 0, 1, 0, 1, 0, 4, 0, 3, 0, 1];
        p.extend_from_slice(&code.to_be_bytes());
        p.extend_from_slice(&len.to_be_bytes());
        p.extend(std::iter::repeat_n(0xffu8, 8));
        cases.push(p);
    }
    // An option claiming more bytes than there are.
    cases.push(vec![1, 0, 0, 1, 0, 1, 0xff, 0xff, 1, 2]);
    // The short options are refused by the header walk, before dhcproto
    // (no panic, not even a caught one), also inside an IA_NA.
    let e = decode_packet(&cases[4]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "option 13 has 0 bytes, fewer than its 2-byte header"
    );
    let mut nested = vec![1, 0, 0, 1, 0, 3, 0, 17, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    nested.extend_from_slice(&[0, 13, 0, 1, 0]);
    assert_eq!(
        decode_packet(&nested).unwrap_err().to_string(),
        "option 13 has 1 bytes, fewer than its 2-byte header"
    );
    for p in cases {
        if let Ok(m) = decode_packet(&p) {
            if let Some(r) = s.reply(&m, &guest_ll()) {
                r.to_vec().unwrap();
            }
        }
    }
}

/// Mutation fuzzing of the v6 packet path (decode + reply + encode),
/// deterministic like the v4 one.
#[test]
fn fuzz_packet_path_never_panics_or_answers_others() {
    let s = config().build().unwrap();
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for k in [
        MessageType::Solicit,
        MessageType::Request,
        MessageType::Renew,
        MessageType::InformationRequest,
    ] {
        let mut m = request(k, 3);
        m.opts_mut().insert(DhcpOption::ORO(dhcproto::v6::ORO {
            opts: vec![OptionCode::DomainNameServers, OptionCode::DomainSearchList],
        }));
        m.opts_mut().insert(DhcpOption::RapidCommit);
        seeds.push(m.to_vec().unwrap());
        seeds.push(request(k, 3).to_vec().unwrap());
    }
    let other = eui64_link_local(&[0x52, 0x54, 0, 0, 0, 1]);
    let mut rng = XorShift::new(0x2545_f491_4f6c_dd1d, 0x9e37_79b9_7f4a_7c15);
    let mut answered = 0;
    for _ in 0..200_000 {
        let mut p = seeds[(rng.next() % seeds.len() as u64) as usize].clone();
        // A length byte anywhere: all ones or zero.
        mutate(&mut p, &mut rng, |_, r| {
            Some(if r & 1 == 0 { 0xff } else { 0 })
        });
        let decoded = decode_packet(&p);
        // The header walk refuses what dhcproto would panic on: the
        // catch_unwind net is never needed.
        if let Err(e) = &decoded {
            assert_ne!(*e, PacketError::DecoderPanicked, "{e}: {p:?}");
        }
        if let Ok(m) = decoded {
            assert!(s.reply(&m, &other).is_none());
            if let Some(reply) = s.reply(&m, &guest_ll()) {
                let bytes = reply.to_vec().unwrap();
                let back = Message::decode(&mut Decoder::new(&bytes)).unwrap();
                assert_eq!(back.xid(), m.xid());
                answered += 1;
            }
        }
    }
    assert!(
        answered > 1000,
        "the fuzzer must also reach the reply path: {answered}"
    );
}
