//! The measuring loop both DHCP bench examples share: request→reply
//! latency one at a time, then a 2-second flood against the server's
//! reply cap.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Sends 500 requests one at a time (under the rate cap) and prints the
/// latency to the matching reply; after a fresh rate window, floods for
/// 2 s and prints requests and replies per second. `request(xid)` builds
/// a request, `xid_of(reply)` reads a reply's transaction id; `ask` and
/// `answer` name the message types in the output (e.g. "DISCOVER",
/// "OFFER"). `c` must have a read timeout set.
pub fn latency_and_flood(
    c: &UdpSocket,
    to: SocketAddr,
    request: impl Fn(u32) -> Vec<u8>,
    xid_of: impl Fn(&[u8]) -> u32,
    ask: &str,
    answer: &str,
) {
    let mut buf = [0u8; 1536];
    let mut lat = Vec::new();
    for xid in 0..500u32 {
        let t = Instant::now();
        c.send_to(&request(xid), to).unwrap();
        loop {
            let n = c
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("no {answer}: {e}"));
            if xid_of(&buf[..n]) == xid {
                break;
            }
        }
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "{ask}->{answer} latency over veth: median {:?}, p99 {:?}, max {:?} (n=500)",
        lat[250], lat[495], lat[499]
    );
    std::thread::sleep(Duration::from_millis(1100));
    c.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let start = Instant::now();
    let (mut sent, mut got) = (0u64, 0u64);
    let pkt = request(0xffff);
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
        "flood: {sent} {ask}s in {secs:.1} s ({:.0}/s), {got} {answer}s ({:.0}/s; cap {}/s)",
        sent as f64 / secs,
        got as f64 / secs,
        network::server::MAX_REPLIES_PER_SEC
    );
}
