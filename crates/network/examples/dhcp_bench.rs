//! DHCPv4 server figures (run as root: it makes its own network
//! namespaces, like the server test): DISCOVER→OFFER latency over a veth
//! pair, then a 2-second flood of DISCOVERs to show replies stay bounded
//! by `MAX_REPLIES_PER_SEC` and the server keeps up.
//!
//! `cargo run --release -p network --example dhcp_bench`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use dhcproto::v4::{DhcpOption, Message, MessageType};
use dhcproto::Encodable;
use network::dhcpv4::{DhcpV4Config, ExtraOptions, LEASE_SECONDS};
use network::server;

#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/support/veth_pair.rs"]
mod veth_pair;

const MAC: [u8; 6] = [0x02, 0x54, 0, 0, 0, 1];

fn discover(xid: u32) -> Vec<u8> {
    let z = Ipv4Addr::UNSPECIFIED;
    let mut m = Message::new_with_id(xid, z, z, z, z, &MAC);
    m.opts_mut()
        .insert(DhcpOption::MessageType(MessageType::Discover));
    m.to_vec().unwrap()
}

fn main() {
    veth_pair::veth_pair(guest_side, pod_side);
}

fn guest_side() {
    let c = veth_pair::client4(Duration::from_millis(200));
    let to = SocketAddrV4::new(Ipv4Addr::BROADCAST, 1067);
    measure::latency_and_flood(
        &c,
        to.into(),
        discover,
        |b| network::dhcpv4::decode_packet(b).unwrap().xid(),
        "DISCOVER",
        "OFFER",
    );
}

fn pod_side(guest: veth_pair::Guest) {
    let opts = DhcpV4Config {
        client_mac: MAC,
        client_ip: Ipv4Addr::new(10, 0, 2, 2),
        prefix_len: 24,
        server_ip: Ipv4Addr::new(10, 0, 2, 1),
        router: Some(Ipv4Addr::new(10, 0, 2, 1)),
        dns: vec![Ipv4Addr::new(10, 96, 0, 10)],
        search: vec!["default.svc.cluster.local".into()],
        subdomain: String::new(),
        hostname: "vm".into(),
        mtu: 1500,
        routes: vec![],
        lease_seconds: LEASE_SECONDS,
        extra: ExtraOptions::default(),
    }
    .build()
    .unwrap();
    let sock = server::bind("k6t-eth0", 1067).unwrap();
    let stop = Arc::new(server::Stop::new().unwrap());
    let stop2 = Arc::clone(&stop);
    let srv = std::thread::spawn(move || server::serve(&sock, &opts, 1068, &stop2));
    guest.run();
    stop.stop();
    let stats = srv.join().unwrap().unwrap();
    println!("server: {stats:?}");
}
