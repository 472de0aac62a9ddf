//! Each option: built by us, encoded into a packet by `dhcproto`, decoded
//! again by `dhcproto`, compared with the expected value or bytes.

use dhcproto::{Decodable, Decoder, Encodable, Name};

use super::*;
use crate::mutate::{mutate, XorShift};

const MAC: [u8; 6] = [0x02, 0x54, 0x00, 0x6a, 0x9a, 0x15];

fn masquerade() -> DhcpV4Config {
    DhcpV4Config {
        client_mac: MAC,
        client_ip: Ipv4Addr::new(10, 0, 2, 2),
        prefix_len: 24,
        server_ip: Ipv4Addr::new(10, 0, 2, 1),
        router: Some(Ipv4Addr::new(10, 0, 2, 1)),
        dns: vec![Ipv4Addr::new(10, 96, 0, 10)],
        search: vec!["default.svc.cluster.local".into()],
        subdomain: String::new(),
        hostname: "testvm1".into(),
        mtu: 1450,
        routes: vec![],
        lease_seconds: LEASE_SECONDS,
        extra: ExtraOptions::default(),
    }
}

fn request(kind: MessageType, mac: &[u8]) -> Message {
    let mut m = Message::new_with_id(
        0x1234_5678,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        mac,
    );
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    m
}

/// Encodes the reply to `req` to bytes and decodes it with the library.
fn wire_reply(s: &ServerOptions, req: &Message) -> Option<Message> {
    let bytes = s.reply(req)?.to_vec().unwrap();
    Some(Message::decode(&mut Decoder::new(&bytes)).unwrap())
}

/// The raw payload of option `code` in an encoded packet (options start
/// after the 236-byte header and the 4-byte magic cookie).
fn raw_option(packet: &[u8], code: u8) -> Option<Vec<u8>> {
    let mut i = 240;
    while i < packet.len() {
        match packet[i] {
            0 => i += 1,
            255 => return None,
            c => {
                let len = packet[i + 1] as usize;
                if c == code {
                    return Some(packet[i + 2..i + 2 + len].to_vec());
                }
                i += 2 + len;
            }
        }
    }
    None
}

#[test]
fn discover_gets_offer_with_every_option() {
    let s = masquerade().build().unwrap();
    let r = wire_reply(&s, &request(MessageType::Discover, &MAC)).unwrap();
    assert_eq!(r.opcode(), Opcode::BootReply);
    assert_eq!(r.xid(), 0x1234_5678);
    assert_eq!(r.yiaddr(), Ipv4Addr::new(10, 0, 2, 2));
    assert_eq!(r.siaddr(), Ipv4Addr::new(10, 0, 2, 1));
    assert_eq!(r.chaddr(), MAC);
    let o = r.opts();
    assert_eq!(o.msg_type(), Some(MessageType::Offer));
    assert_eq!(
        o.get(OptionCode::ServerIdentifier),
        Some(&DhcpOption::ServerIdentifier(Ipv4Addr::new(10, 0, 2, 1)))
    );
    assert_eq!(
        o.get(OptionCode::SubnetMask),
        Some(&DhcpOption::SubnetMask(Ipv4Addr::new(255, 255, 255, 0)))
    );
    assert_eq!(
        o.get(OptionCode::Router),
        Some(&DhcpOption::Router(vec![Ipv4Addr::new(10, 0, 2, 1)]))
    );
    assert_eq!(
        o.get(OptionCode::DomainNameServer),
        Some(&DhcpOption::DomainNameServer(vec![Ipv4Addr::new(
            10, 96, 0, 10
        )]))
    );
    assert_eq!(
        o.get(OptionCode::Hostname),
        Some(&DhcpOption::Hostname("testvm1".into()))
    );
    assert_eq!(
        o.get(OptionCode::InterfaceMtu),
        Some(&DhcpOption::InterfaceMtu(1450))
    );
    assert_eq!(
        o.get(OptionCode::AddressLeaseTime),
        Some(&DhcpOption::AddressLeaseTime(86_313_600))
    );
    assert_eq!(
        o.get(OptionCode::DomainName),
        Some(&DhcpOption::DomainName("default.svc.cluster.local".into()))
    );
    assert_eq!(
        o.get(OptionCode::DomainSearch),
        Some(&DhcpOption::DomainSearch(vec![Name::from_ascii(
            "default.svc.cluster.local."
        )
        .unwrap()]))
    );
    assert!(o.get(OptionCode::ClasslessStaticRoute).is_none());
}

#[test]
fn mtu_is_two_bytes_big_endian() {
    let s = masquerade().build().unwrap();
    let bytes = s
        .reply(&request(MessageType::Discover, &MAC))
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!(raw_option(&bytes, 26), Some(vec![0x05, 0xaa]));
    assert_eq!(
        raw_option(&bytes, 51),
        Some(86_313_600u32.to_be_bytes().to_vec())
    );
    assert_eq!(raw_option(&bytes, 53), Some(vec![2]));
}

#[test]
fn request_gets_ack_and_wrong_address_gets_nak() {
    let s = masquerade().build().unwrap();
    let mut req = request(MessageType::Request, &MAC);
    req.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(Ipv4Addr::new(10, 0, 2, 2)));
    let r = wire_reply(&s, &req).unwrap();
    assert_eq!(r.opts().msg_type(), Some(MessageType::Ack));
    assert_eq!(r.yiaddr(), Ipv4Addr::new(10, 0, 2, 2));
    req.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(Ipv4Addr::new(10, 0, 2, 9)));
    let r = wire_reply(&s, &req).unwrap();
    assert_eq!(r.opts().msg_type(), Some(MessageType::Nak));
    assert_eq!(r.yiaddr(), Ipv4Addr::UNSPECIFIED);
    assert!(r.opts().get(OptionCode::SubnetMask).is_none());
}

#[test]
fn other_macs_and_other_messages_get_nothing() {
    let s = masquerade().build().unwrap();
    assert!(s
        .reply(&request(MessageType::Discover, &[2, 0, 0, 0, 0, 9]))
        .is_none());
    assert!(s
        .reply(&request(MessageType::Discover, &MAC[..5]))
        .is_none());
    for kind in [
        MessageType::Release,
        MessageType::Decline,
        MessageType::Inform,
        MessageType::Offer,
    ] {
        assert!(s.reply(&request(kind, &MAC)).is_none(), "{kind:?}");
    }
    let mut reply = request(MessageType::Discover, &MAC);
    reply.set_opcode(Opcode::BootReply);
    assert!(s.reply(&reply).is_none());
    assert!(s.reply(&Message::default()).is_none());
}

/// Case 001: upper-case search entries are lower-cased, encoded without
/// compression (73 bytes), domain name = longest entry, DNS from the file.
#[test]
fn case_001_search_domain_uppercase() {
    let text =
        include_str!("../../../../tests/data/cases/001-dhcp-search-domain-uppercase.resolv.conf");
    let rc = parse_resolv_conf(text);
    assert_eq!(
        rc.search,
        [
            "default.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
            "dhcp",
            "home"
        ]
    );
    assert_eq!(rc.nameservers, [Ipv4Addr::new(10, 96, 0, 10)]);
    let cfg = DhcpV4Config {
        search: rc.search.clone(),
        dns: rc.nameservers.clone(),
        ..masquerade()
    };
    let s = cfg.build().unwrap();
    let bytes = s
        .reply(&request(MessageType::Discover, &MAC))
        .unwrap()
        .to_vec()
        .unwrap();
    let search = raw_option(&bytes, 119).unwrap();
    assert_eq!(search.len(), 73);
    assert!(search.ends_with(b"\x04dhcp\x00\x04home\x00"));
    assert_eq!(
        raw_option(&bytes, 15).unwrap(),
        b"default.svc.cluster.local"
    );
    assert_eq!(raw_option(&bytes, 6).unwrap(), [0x0a, 0x60, 0x00, 0x0a]);
    // The library decodes the same five names.
    let r = Message::decode(&mut Decoder::new(&bytes)).unwrap();
    let Some(DhcpOption::DomainSearch(names)) = r.opts().get(OptionCode::DomainSearch) else {
        panic!("no option 119");
    };
    let names: Vec<String> = names.iter().map(|n| n.to_ascii()).collect();
    assert_eq!(
        names,
        [
            "default.svc.cluster.local.",
            "svc.cluster.local.",
            "cluster.local.",
            "dhcp.",
            "home."
        ]
    );
    for bad in ["bad_domain-.", &format!("{}.com", "a".repeat(250))] {
        let e = encode_search_domains(&[bad.to_string()]).unwrap_err();
        assert!(e.to_string().contains("Search domain is not valid"), "{e}");
        let cfg = DhcpV4Config {
            search: vec![bad.to_string()],
            ..masquerade()
        };
        assert!(cfg.build().is_err());
    }
}

#[test]
fn search_defaults_subdomain_and_overflow() {
    assert_eq!(search_list(&[], ""), ["cluster.local"]);
    let s = vec![
        "ns.svc.cluster.local".to_string(),
        "svc.cluster.local".into(),
    ];
    assert_eq!(
        search_list(&s, "Sub"),
        [
            "sub.ns.svc.cluster.local",
            "ns.svc.cluster.local",
            "svc.cluster.local"
        ]
    );
    assert_eq!(search_list(&["home".into()], "sub"), ["home"]);
    let many: Vec<String> = (0..20).map(|i| format!("domain{i}.example.org")).collect();
    assert_eq!(
        encode_search_domains(&many),
        Err(DhcpError::SearchListTooLong(430))
    );
    assert_eq!(encode_search_domains(&["a.".into()]).unwrap(), b"\x01a\x00");
    for bad in ["", ".", "a..b", "-a", "a-", "é.com", "a b", &"x".repeat(64)] {
        assert!(
            encode_search_domains(&[bad.to_string()]).is_err(),
            "{bad:?}"
        );
    }
}

/// Case 003: option 121 bytes and order, default route last, router
/// still sent; no routes → no option.
#[test]
fn case_003_classless_routes() {
    let text = include_str!("../../../../tests/data/cases/003-dhcp-classless-routes.routes.json");
    let json: serde_json::Value = serde_json::from_str(text).unwrap();
    let routes: Vec<Route> = json["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Route {
            dst: r["dst"].as_str().map(|d| d.parse().unwrap()),
            gw: r["gw"].as_str().map(|g| g.parse().unwrap()),
        })
        .collect();
    let cfg = DhcpV4Config {
        routes,
        ..masquerade()
    };
    let s = cfg.build().unwrap();
    let bytes = s
        .reply(&request(MessageType::Discover, &MAC))
        .unwrap()
        .to_vec()
        .unwrap();
    let expected: Vec<u8> = [
        &[0x18, 0x0a, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00][..],
        &[0x18, 0xc0, 0xa8, 0x01, 0x0a, 0x00, 0x02, 0xfe],
        &[0x0c, 0xac, 0x10, 0x0a, 0x00, 0x02, 0xfd],
        &[0x20, 0x0a, 0x01, 0x02, 0x03, 0x0a, 0x00, 0x02, 0x01],
        &[0x00, 0x0a, 0x00, 0x02, 0x01],
    ]
    .concat();
    assert_eq!(expected.len(), 37);
    assert_eq!(raw_option(&bytes, 121), Some(expected));
    assert_eq!(raw_option(&bytes, 3), Some(vec![0x0a, 0x00, 0x02, 0x01]));
    let r = Message::decode(&mut Decoder::new(&bytes)).unwrap();
    let Some(DhcpOption::ClasslessStaticRoute(decoded)) =
        r.opts().get(OptionCode::ClasslessStaticRoute)
    else {
        panic!("no option 121");
    };
    assert_eq!(decoded.len(), 5);
    assert_eq!(decoded[4].0, Ipv4Net::default());
    // Empty route list: no option at all.
    let bytes = masquerade()
        .build()
        .unwrap()
        .reply(&request(MessageType::Discover, &MAC))
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!(raw_option(&bytes, 121), None);
}

#[test]
fn dhcp_options_boot_tftp_ntp_private() {
    let cfg = DhcpV4Config {
        extra: ExtraOptions {
            boot_file_name: Some("pxelinux.0".into()),
            tftp_server_name: Some("tftp.example.org".into()),
            ntp_servers: vec!["10.0.0.5".into(), "10.0.0.6".into()],
            private_options: vec![(240, "extra.options.kubevirt.io".into()), (254, "x".into())],
        },
        ..masquerade()
    };
    let s = cfg.build().unwrap();
    let r = wire_reply(&s, &request(MessageType::Discover, &MAC)).unwrap();
    let o = r.opts();
    assert_eq!(
        o.get(OptionCode::BootfileName),
        Some(&DhcpOption::BootfileName(b"pxelinux.0".to_vec()))
    );
    assert_eq!(
        o.get(OptionCode::TFTPServerName),
        Some(&DhcpOption::TFTPServerName(b"tftp.example.org".to_vec()))
    );
    assert_eq!(
        o.get(OptionCode::NtpServers),
        Some(&DhcpOption::NtpServers(vec![
            Ipv4Addr::new(10, 0, 0, 5),
            Ipv4Addr::new(10, 0, 0, 6)
        ]))
    );
    let Some(DhcpOption::Unknown(p)) = o.get(OptionCode::from(240)) else {
        panic!("no option 240")
    };
    assert_eq!(p.data(), b"extra.options.kubevirt.io");
    let Some(DhcpOption::Unknown(p)) = o.get(OptionCode::from(254)) else {
        panic!("no option 254")
    };
    assert_eq!(p.data(), b"x");
}

#[test]
fn bad_dhcp_options_are_refused_before_serving() {
    let with = |extra: ExtraOptions| DhcpV4Config {
        extra,
        ..masquerade()
    };
    let e = with(ExtraOptions {
        ntp_servers: vec!["ntp.example.org".into()],
        ..Default::default()
    })
    .build()
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Could not parse NTP server as IPv4 address: \"ntp.example.org\""
    );
    let e = with(ExtraOptions {
        private_options: vec![(223, "x".into())],
        ..Default::default()
    })
    .build()
    .unwrap_err();
    assert!(
        e.to_string().contains("privateOptions[0].option: 223"),
        "{e}"
    );
    let e = with(ExtraOptions {
        boot_file_name: Some("a".repeat(256)),
        ..Default::default()
    })
    .build()
    .unwrap_err();
    assert!(e.to_string().contains("bootFileName: is longer"), "{e}");
    let e = with(ExtraOptions {
        tftp_server_name: Some("a\0b".into()),
        ..Default::default()
    })
    .build()
    .unwrap_err();
    assert!(e.to_string().contains("NUL"), "{e}");
}

#[test]
fn hostname_is_validated() {
    // Derived by api::names::hostname (tested there); the server refuses
    // any value that is not a DNS label rather than send it.
    for bad in ["", "bad_host", "-x", &"a".repeat(64), "hé"] {
        let cfg = DhcpV4Config {
            hostname: bad.into(),
            ..masquerade()
        };
        assert!(
            matches!(cfg.build(), Err(DhcpError::Hostname(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn malformed_packets_decode_to_errors_not_panics() {
    let good = request(MessageType::Discover, &MAC).to_vec().unwrap();
    let s = masquerade().build().unwrap();
    // Truncations at every length, a wrong magic cookie, an option that
    // runs past the end, huge hostnames: never a panic, never a reply to
    // a packet that did not decode.
    for n in 0..good.len() {
        if let Ok(m) = decode_packet(&good[..n]) {
            let _ = s.reply(&m);
        }
    }
    // Found by the fuzz test below: hlen over 16, and option 94 with a
    // length other than 3, panic inside dhcproto; both are refused.
    let mut long_hlen = good.clone();
    long_hlen[2] = 17;
    assert_eq!(
        decode_packet(&long_hlen).unwrap_err().to_string(),
        "hardware address length 17 is over 16"
    );
    let mut opt94 = good[..240].to_vec();
    opt94.extend_from_slice(&[53, 1, 1, 94, 1, 0, 255]);
    // Refused by the pre-decode check, not by a caught panic.
    assert_eq!(
        decode_packet(&opt94).unwrap_err().to_string(),
        "option 94 has length 1, not 3"
    );
    let mut bad_cookie = good.clone();
    bad_cookie[236] = 0;
    assert_eq!(
        decode_packet(&bad_cookie).unwrap_err(),
        PacketError::MagicCookie
    );
    assert_eq!(
        decode_packet(&good[..239]).unwrap_err().to_string(),
        "239 bytes is shorter than a DHCP header"
    );
    let mut overflow = good[..240].to_vec();
    overflow.extend_from_slice(&[12, 200, b'a', b'b']);
    if let Ok(m) = decode_packet(&overflow) {
        assert!(s.reply(&m).is_none() || m.opts().msg_type().is_some());
    }
    let mut huge = request(MessageType::Discover, &MAC);
    huge.opts_mut()
        .insert(DhcpOption::Hostname("h".repeat(1000)));
    let bytes = huge.to_vec().unwrap();
    let m = decode_packet(&bytes).unwrap();
    assert!(s.reply(&m).is_some());
}

/// Mutation fuzzing of the packet path (decode + reply), deterministic:
/// 200,000 packets derived from valid requests by random byte flips,
/// truncations, extensions and option-length corruption. Nothing may
/// panic, and nothing but the guest's MAC is ever answered.
#[test]
fn fuzz_packet_path_never_panics_or_answers_others() {
    let s = masquerade().build().unwrap();
    let seeds: Vec<Vec<u8>> = [MessageType::Discover, MessageType::Request]
        .into_iter()
        .flat_map(|k| {
            let mut m = request(k, &MAC);
            m.opts_mut().insert(DhcpOption::Hostname("guest".into()));
            m.opts_mut().insert(DhcpOption::ParameterRequestList(vec![
                OptionCode::SubnetMask,
                OptionCode::Router,
                OptionCode::DomainSearch,
            ]));
            [
                m.to_vec().unwrap(),
                request(k, &[2, 0, 0, 0, 0, 9]).to_vec().unwrap(),
            ]
        })
        .collect();
    // xorshift64*: a fixed sequence, so a failure reproduces.
    let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15, 0x2545_f491_4f6c_dd1d);
    let mut answered = 0;
    for _ in 0..200_000 {
        let mut p = seeds[(rng.next() % seeds.len() as u64) as usize].clone();
        // An option length byte, in the options only.
        mutate(&mut p, &mut rng, |at, _| (at >= 240).then_some(0xff));
        if let Ok(m) = decode_packet(&p) {
            if let Some(reply) = s.reply(&m) {
                assert_eq!(m.chaddr(), MAC);
                assert_eq!(reply.chaddr(), MAC);
                reply.to_vec().unwrap();
                answered += 1;
            }
        }
    }
    assert!(
        answered > 1000,
        "the fuzzer must also reach the reply path: {answered}"
    );
}
