//! The DHCPv4 server on a real socket: a network namespace made by the
//! test (a veth pair standing for the pod bridge and the guest's tap), a
//! client socket on the guest side, DISCOVER → OFFER and REQUEST → ACK
//! decoded by `dhcproto`; other MACs and garbage get nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dhcproto::v4::{DhcpOption, Message, MessageType, OptionCode};
use dhcproto::Encodable;
use network::dhcpv4::{decode_packet, DhcpV4Config, ExtraOptions, LEASE_SECONDS};
use network::server;

#[path = "support/veth_pair.rs"]
mod veth_pair;

const MAC: [u8; 6] = [0x02, 0x54, 0x00, 0x00, 0x00, 0x01];

fn request(kind: MessageType, mac: &[u8], xid: u32) -> Vec<u8> {
    let z = Ipv4Addr::UNSPECIFIED;
    let mut m = Message::new_with_id(xid, z, z, z, z, mac);
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    if kind == MessageType::Request {
        m.opts_mut()
            .insert(DhcpOption::RequestedIpAddress(Ipv4Addr::new(10, 0, 2, 2)));
    }
    m.to_vec().unwrap()
}

fn recv(client: &UdpSocket, xid: u32) -> Option<Message> {
    let mut buf = [0u8; 1536];
    let deadline = Instant::now() + Duration::from_millis(800);
    while Instant::now() < deadline {
        if let Ok(n) = client.recv(&mut buf) {
            let m = decode_packet(&buf[..n]).unwrap();
            if m.xid() == xid {
                return Some(m);
            }
        }
    }
    None
}

#[test]
fn discover_offer_request_ack_over_veth() {
    veth_pair::veth_pair(guest_side, |guest| {
        let opts = DhcpV4Config {
            client_mac: MAC,
            client_ip: Ipv4Addr::new(10, 0, 2, 2),
            prefix_len: 24,
            server_ip: Ipv4Addr::new(10, 0, 2, 1),
            router: Some(Ipv4Addr::new(10, 0, 2, 1)),
            dns: vec![Ipv4Addr::new(10, 96, 0, 10)],
            search: vec![],
            subdomain: String::new(),
            hostname: "vm".into(),
            mtu: 1400,
            routes: vec![],
            lease_seconds: LEASE_SECONDS,
            extra: ExtraOptions::default(),
        }
        .build()
        .unwrap();
        // Ports 1067/1068 so a DHCP server or client of the host can never
        // interfere even if the namespace were shared.
        let sock = server::bind("k6t-eth0", 1067).unwrap();
        let stop = Arc::new(server::Stop::new().unwrap());
        let stop2 = stop.clone();
        let srv = std::thread::spawn(move || server::serve(&sock, &opts, 1068, &stop2));
        guest.run();
        stop.stop();
        let stats = srv.join().unwrap().unwrap();
        assert_eq!(stats.replied, 3, "{stats:?}");
        assert_eq!(stats.malformed, 2, "{stats:?}");
    });
}

fn guest_side() {
    {
        let client = veth_pair::client4(Duration::from_millis(100));
        let to = SocketAddrV4::new(Ipv4Addr::BROADCAST, 1067);

        client
            .send_to(&request(MessageType::Discover, &MAC, 1), to)
            .unwrap();
        let offer = recv(&client, 1).expect("no OFFER");
        assert_eq!(offer.opts().msg_type(), Some(MessageType::Offer));
        assert_eq!(offer.yiaddr(), Ipv4Addr::new(10, 0, 2, 2));
        assert_eq!(
            offer.opts().get(OptionCode::InterfaceMtu),
            Some(&DhcpOption::InterfaceMtu(1400))
        );

        client
            .send_to(&request(MessageType::Request, &MAC, 2), to)
            .unwrap();
        let ack = recv(&client, 2).expect("no ACK");
        assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
        assert_eq!(
            ack.opts().get(OptionCode::Router),
            Some(&DhcpOption::Router(vec![Ipv4Addr::new(10, 0, 2, 1)]))
        );

        // Another MAC and garbage: silence, and the server keeps serving.
        client
            .send_to(&request(MessageType::Discover, &[2, 0, 0, 0, 0, 9], 3), to)
            .unwrap();
        assert!(recv(&client, 3).is_none(), "answered another MAC");
        client.send_to(&[0xff; 300], to).unwrap();
        client.send_to(&[1, 2, 3], to).unwrap();
        client
            .send_to(&request(MessageType::Discover, &MAC, 4), to)
            .unwrap();
        assert!(recv(&client, 4).is_some(), "server stopped after garbage");
    }
}
