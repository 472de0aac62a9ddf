//! DHCPv6 server figures (run as root: it makes its own network
//! namespaces, like the server tests): SOLICIT→ADVERTISE latency over a
//! veth pair, then a 2-second flood of SOLICITs to show replies stay
//! bounded by `MAX_REPLIES_PER_SEC` and the server keeps up.
//!
//! `cargo run --release -p network --example dhcp6_bench`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::SocketAddrV6;
use std::sync::Arc;
use std::time::Duration;

use dhcproto::v6::{DhcpOption, DhcpOptions, Message, MessageType, IANA};
use dhcproto::Encodable;
use network::dhcpv6::{duid_ll, eui64_link_local, DhcpV6Config};
use network::server;

#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/support/veth_pair.rs"]
mod veth_pair;

const MAC: [u8; 6] = [0x02, 0x54, 0, 0, 0, 1];

fn solicit(xid: u32) -> Vec<u8> {
    let mut m = Message::new(MessageType::Solicit);
    m.set_xid_num(xid);
    m.opts_mut().insert(DhcpOption::ClientId(duid_ll(&MAC)));
    m.opts_mut().insert(DhcpOption::IANA(IANA {
        id: 1,
        t1: 0,
        t2: 0,
        opts: DhcpOptions::new(),
    }));
    m.to_vec().unwrap()
}

fn main() {
    veth_pair::veth_pair(guest_side, pod_side);
}

fn guest_side() {
    let index = nix::net::if_::if_nametoindex("guest0").unwrap();
    let c = veth_pair::client6(eui64_link_local(&MAC), index, Duration::from_millis(200));
    let to = SocketAddrV6::new(server::ALL_DHCP_SERVERS, 1547, 0, index);
    measure::latency_and_flood(
        &c,
        to.into(),
        solicit,
        |b| network::dhcpv6::decode_packet(b).unwrap().xid_num(),
        "SOLICIT",
        "ADVERTISE",
    );
}

fn pod_side(guest: veth_pair::Guest) {
    veth_pair::ip(&["addr", "add", "fe80::1/64", "dev", "k6t-eth0", "nodad"]);
    let opts = DhcpV6Config {
        client_mac: MAC,
        client_ip: "fd10:0:2::2".parse().unwrap(),
        server_mac: [2, 0, 0, 0, 0, 0],
        dns: vec!["fd00:10:96::a".parse().unwrap()],
        search: vec!["default.svc.cluster.local".into()],
        subdomain: String::new(),
    }
    .build()
    .unwrap();
    let sock = server::bind_v6("k6t-eth0", 1547).unwrap();
    let stop = Arc::new(server::Stop::new().unwrap());
    let stop2 = Arc::clone(&stop);
    let srv = std::thread::spawn(move || server::serve_v6(&sock, &opts, 1546, &stop2));
    guest.run();
    stop.stop();
    let stats = srv.join().unwrap().unwrap();
    println!("server: {stats:?}");
}
