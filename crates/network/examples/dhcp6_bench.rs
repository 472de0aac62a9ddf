//! DHCPv6 server figures (run as root: it makes its own network
//! namespaces, like the server tests): SOLICIT→ADVERTISE latency over a
//! veth pair, then a 2-second flood of SOLICITs to show replies stay
//! bounded by `MAX_REPLIES_PER_SEC` and the server keeps up.
//!
//! `cargo run --release -p network --example dhcp6_bench`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::{SocketAddrV6, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dhcproto::v6::{DhcpOption, DhcpOptions, Message, MessageType, IANA};
use dhcproto::Encodable;
use network::dhcpv6::{duid_ll, eui64_link_local, DhcpV6Config};
use network::server;

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
    let ll = eui64_link_local(&MAC);
    veth_pair::ip(&["addr", "add", &format!("{ll}/64"), "dev", "guest0", "nodad"]);
    let s = socket2::Socket::new(
        socket2::Domain::IPV6,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .unwrap();
    s.bind(&std::net::SocketAddr::from(SocketAddrV6::new(ll, 1546, 0, index)).into())
        .unwrap();
    s.set_multicast_if_v6(index).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let c: UdpSocket = s.into();
    let to = SocketAddrV6::new(server::ALL_DHCP_SERVERS, 1547, 0, index);
    let mut buf = [0u8; 1536];
    let mut lat = Vec::new();
    for xid in 0..500u32 {
        let t = Instant::now();
        c.send_to(&solicit(xid), to).unwrap();
        loop {
            let n = c.recv(&mut buf).expect("no ADVERTISE");
            if network::dhcpv6::decode_packet(&buf[..n]).unwrap().xid_num() == xid {
                break;
            }
        }
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "SOLICIT->ADVERTISE latency over veth: median {:?}, p99 {:?}, max {:?} (n=500)",
        lat[250], lat[495], lat[499]
    );
    std::thread::sleep(Duration::from_millis(1100));
    c.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let start = Instant::now();
    let (mut sent, mut got) = (0u64, 0u64);
    let pkt = solicit(0xffff);
    while start.elapsed() < Duration::from_secs(2) {
        for _ in 0..64 {
            if c.send_to(&pkt, to).is_ok() {
                sent += 1;
            }
        }
        while c.recv(&mut buf).is_ok() {
            got += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "flood: {sent} SOLICITs in {secs:.1} s ({:.0}/s), {got} ADVERTISEs ({:.0}/s; cap {}/s)",
        sent as f64 / secs,
        got as f64 / secs,
        server::MAX_REPLIES_PER_SEC
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
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let srv = std::thread::spawn(move || server::serve_v6(&sock, &opts, 1546, &stop2));
    guest.run();
    stop.store(true, Ordering::Relaxed);
    let stats = srv.join().unwrap().unwrap();
    println!("server: {stats:?}");
}
