//! Benchmark: latency of Ping and GetDomain on one connection to a running
//! launcher's command socket. `cargo run --release -p cmd --example latency -- SOCKET [CALLS]`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use cmd::proto::cmd::EmptyRequest;

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let q = |f: f64| v[((v.len() as f64 - 1.0) * f) as usize].as_secs_f64() * 1e6;
    println!(
        "{name:<10} calls={} median={:.1}µs p90={:.1}µs p99={:.1}µs",
        v.len(),
        q(0.5),
        q(0.9),
        q(0.99)
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sock = args.get(1).expect("usage: latency SOCKET [CALLS]");
    let n: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(1000);
    let mut c = cmd::client::Client::connect(std::path::Path::new(sock))
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
        let t = Instant::now();
        let d = c.get_domain(EmptyRequest {}).await.unwrap().into_inner();
        dom.push(t.elapsed());
        size = d.domain.len();
    }
    summary("Ping", ping);
    summary("GetDomain", dom);
    println!("GetDomain JSON size: {size} bytes");
}
