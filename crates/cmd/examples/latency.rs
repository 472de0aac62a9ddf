//! Benchmark: latency of Ping and GetDomain on one connection to a running
//! launcher's command socket, over `CALLS` calls each, twice: with a client
//! that sleeps between messages (a plain tokio client) and with one that
//! polls briefly before sleeping, as Go's runtime (virt-handler) does.
//! `cargo run --release -p cmd --example latency -- SOCKET [CALLS]`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cmd::proto::cmd::EmptyRequest;
use cmd::spin::Spinner;

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let q = |f: f64| v[((v.len() as f64 - 1.0) * f) as usize].as_secs_f64() * 1e6;
    println!(
        "  {name:<10} calls={} median={:.1}µs p90={:.1}µs p99={:.1}µs",
        v.len(),
        q(0.5),
        q(0.9),
        q(0.99)
    );
}

fn run(sock: &str, n: usize, spin: bool) {
    let spinner = Spinner::new();
    let parked = Arc::clone(&spinner);
    let mut b = tokio::runtime::Builder::new_current_thread();
    b.enable_all();
    if spin {
        b.on_thread_park(move || {
            parked.park();
        });
    }
    let rt = b.build().unwrap();
    rt.block_on(async {
        let mut c = cmd::client::Client::connect_tracked(std::path::Path::new(sock), spinner)
            .await
            .unwrap()
            .cmd;
        for _ in 0..50 {
            c.ping(EmptyRequest {}).await.unwrap();
            c.get_domain(EmptyRequest {}).await.unwrap();
        }
        let mut ping = Vec::with_capacity(n);
        let mut dom = Vec::with_capacity(n);
        let mut size = 0;
        for _ in 0..n {
            let t = Instant::now();
            c.ping(EmptyRequest {}).await.unwrap();
            ping.push(t.elapsed());
        }
        for _ in 0..n {
            let t = Instant::now();
            let d = c.get_domain(EmptyRequest {}).await.unwrap().into_inner();
            dom.push(t.elapsed());
            size = d.domain.len();
        }
        println!(
            "client {}:",
            if spin {
                "polling before it sleeps (like Go's runtime)"
            } else {
                "sleeping between messages"
            }
        );
        summary("Ping", ping);
        summary("GetDomain", dom);
        println!("  GetDomain JSON size: {size} bytes");
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sock = args.get(1).expect("usage: latency SOCKET [CALLS]");
    let n: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(1000);
    run(sock, n, false);
    run(sock, n, true);
}
