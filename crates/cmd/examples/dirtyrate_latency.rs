//! Benchmark: latency of GetDomainDirtyRateStats on a running launcher's
//! command socket: cold (a new 1 s calculation: the launcher's 3 s cache
//! has expired), cached (`CALLS` calls right after), `CONCURRENT` callers
//! arriving together on an expired cache (they share one calculation), and
//! Ping while a calculation runs (the runtime is not held up).
//! `cargo run --release -p cmd --example dirtyrate_latency -- SOCKET [CALLS] [CONCURRENT]`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use cmd::proto::cmd::EmptyRequest;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let q = |f: f64| ms(v[((v.len() as f64 - 1.0) * f) as usize]);
    println!(
        "  {name:<22} calls={:<4} min={:.2}ms median={:.2}ms max={:.2}ms",
        v.len(),
        ms(v[0]),
        q(0.5),
        q(1.0)
    );
}

/// Waits out the launcher's 3 s cache.
async fn expire() {
    tokio::time::sleep(Duration::from_millis(3200)).await;
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sock = std::path::PathBuf::from(args.get(1).expect("SOCKET"));
    let calls: usize = args.get(2).map_or(200, |s| s.parse().unwrap());
    let concurrent: usize = args.get(3).map_or(8, |s| s.parse().unwrap());
    let mut c = cmd::client::Client::connect(&sock).await.unwrap().cmd;
    let call = |mut c: cmd::proto::cmd::cmd_client::CmdClient<tonic::transport::Channel>| async move {
        let t = Instant::now();
        let r = c
            .get_domain_dirty_rate_stats(EmptyRequest {})
            .await
            .unwrap()
            .into_inner();
        let resp = r.response.unwrap();
        assert!(resp.success, "{}", resp.message);
        (t.elapsed(), r.dirty_rate_mbs)
    };

    println!("GetDomainDirtyRateStats on {}", sock.display());
    let mut cold = Vec::new();
    let mut cached = Vec::new();
    let mut rates = Vec::new();
    for _ in 0..3 {
        expire().await;
        let (d, v) = call(c.clone()).await;
        cold.push(d);
        rates.push(v);
        for _ in 0..calls / 3 {
            cached.push(call(c.clone()).await.0);
        }
    }
    summary("cold (calculation)", cold);
    summary("cached (< 3 s old)", cached);

    expire().await;
    let t = Instant::now();
    let all = futures_join(
        (0..concurrent)
            .map(|_| tokio::spawn(call(c.clone())))
            .collect(),
    )
    .await;
    let wall = t.elapsed();
    let vals: Vec<i64> = all.iter().map(|(_, v)| *v).collect();
    summary(
        &format!("{concurrent} concurrent, cold"),
        all.iter().map(|(d, _)| *d).collect(),
    );
    println!(
        "  {concurrent} concurrent callers: wall {:.0}ms, rates {:?} (one shared calculation when all equal)",
        ms(wall),
        vals
    );

    expire().await;
    let pending = tokio::spawn(call(c.clone()));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut ping = Vec::new();
    while !pending.is_finished() {
        let t = Instant::now();
        c.ping(EmptyRequest {}).await.unwrap();
        ping.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    summary("ping during a calc", ping);
    println!("  rates seen (MiB/s): {rates:?}");
}

async fn futures_join<T>(handles: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
