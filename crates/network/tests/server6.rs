//! The DHCPv6 server on a real socket: the veth pair of `support/` (pod
//! bridge `k6t-eth0`, guest side `guest0`), a client socket on the guest's
//! link-local address sending to `ff02::1:2`, SOLICIT → ADVERTISE and
//! REQUEST → REPLY decoded by `dhcproto`; a request from another MAC's
//! link-local address and garbage get nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::{Ipv6Addr, SocketAddrV6, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dhcproto::v6::{DhcpOption, DhcpOptions, Message, MessageType, OptionCode, IANA};
use dhcproto::{Decodable, Decoder, Encodable};
use network::dhcpv6::{eui64_link_local, DhcpV6Config};
use network::server;

#[path = "support/veth_pair.rs"]
mod veth_pair;

const MAC: [u8; 6] = [0x02, 0x54, 0x00, 0x00, 0x00, 0x01];
const OTHER: [u8; 6] = [0x02, 0x54, 0x00, 0x00, 0x00, 0x09];

fn request(kind: MessageType, xid: u8) -> Vec<u8> {
    let mut m = Message::new_with_id(kind, [0, 0, xid]);
    m.opts_mut()
        .insert(DhcpOption::ClientId(vec![0, 3, 0, 1, 2, 0x54, 0, 0, 0, 1]));
    m.opts_mut().insert(DhcpOption::IANA(IANA {
        id: 42,
        t1: 0,
        t2: 0,
        opts: DhcpOptions::new(),
    }));
    m.to_vec().unwrap()
}

/// The reply with `xid`, waiting up to `wait`.
fn recv_within(client: &UdpSocket, xid: u8, wait: Duration) -> Option<Message> {
    let mut buf = [0u8; 1536];
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Ok(n) = client.recv(&mut buf) {
            let m = Message::decode(&mut Decoder::new(&buf[..n])).unwrap();
            if m.xid() == [0, 0, xid] {
                return Some(m);
            }
        }
    }
    None
}

/// A reply that must come: generous, a loaded CI machine schedules late.
fn recv(client: &UdpSocket, xid: u8) -> Option<Message> {
    recv_within(client, xid, Duration::from_secs(10))
}

#[test]
fn solicit_advertise_request_reply_over_veth() {
    veth_pair::veth_pair(guest_side, |guest| {
        // The bridge's own link-local address without DAD: the replies'
        // source, usable at once.
        veth_pair::ip(&["addr", "add", "fe80::1/64", "dev", "k6t-eth0", "nodad"]);
        let opts = DhcpV6Config {
            client_mac: MAC,
            client_ip: "fd10:0:2::2".parse().unwrap(),
            server_mac: [2, 0, 0, 0, 0, 0],
            dns: vec!["fd00:10:96::a".parse().unwrap()],
            search: vec!["cluster.local".into()],
            subdomain: String::new(),
        }
        .build()
        .unwrap();
        let sock = server::bind_v6("k6t-eth0", 1547).unwrap();
        let stop = Arc::new(server::Stop::new().unwrap());
        let stop2 = stop.clone();
        let srv = std::thread::spawn(move || server::serve_v6(&sock, &opts, 1546, &stop2));
        guest.run();
        stop.stop();
        let stats = srv.join().unwrap().unwrap();
        assert_eq!(stats.replied, 3, "{stats:?}");
        assert_eq!(stats.malformed, 1, "{stats:?}");
    });
}

fn guest_side() {
    let index = nix::net::if_::if_nametoindex("guest0").unwrap();
    let to = SocketAddrV6::new(server::ALL_DHCP_SERVERS, 1547, 0, index);
    let c = veth_pair::client6(eui64_link_local(&MAC), index, Duration::from_millis(100));

    c.send_to(&request(MessageType::Solicit, 1), to).unwrap();
    let adv = recv(&c, 1).expect("no ADVERTISE");
    assert_eq!(adv.msg_type(), MessageType::Advertise);
    let addr = |m: &Message| match m.opts().get(OptionCode::IANA) {
        Some(DhcpOption::IANA(ia)) => match ia.opts.get(OptionCode::IAAddr) {
            Some(DhcpOption::IAAddr(a)) => (ia.id, a.addr),
            o => panic!("{o:?}"),
        },
        o => panic!("{o:?}"),
    };
    assert_eq!(addr(&adv), (42, "fd10:0:2::2".parse().unwrap()));

    c.send_to(&request(MessageType::Request, 2), to).unwrap();
    let reply = recv(&c, 2).expect("no REPLY");
    assert_eq!(reply.msg_type(), MessageType::Reply);
    assert_eq!(addr(&reply).1, "fd10:0:2::2".parse::<Ipv6Addr>().unwrap());
    assert_eq!(
        reply.opts().get(OptionCode::DomainNameServers),
        Some(&DhcpOption::DomainNameServers(vec!["fd00:10:96::a"
            .parse()
            .unwrap()]))
    );

    // Another MAC's link-local address and garbage: silence, and the
    // server keeps serving.
    let other = veth_pair::client6(eui64_link_local(&OTHER), index, Duration::from_millis(100));
    other
        .send_to(&request(MessageType::Solicit, 3), to)
        .unwrap();
    assert!(
        recv_within(&other, 3, Duration::from_millis(800)).is_none(),
        "answered another MAC"
    );
    c.send_to(&[1, 2], to).unwrap();
    c.send_to(&request(MessageType::Solicit, 4), to).unwrap();
    assert!(recv(&c, 4).is_some(), "server stopped after garbage");
}
