//! Benchmark: what the guest agent costs a running launcher whose guest
//! runs qemu-ga. First, over `SECONDS` (default 60) with no client calls,
//! the CPU time of the launcher process and of its `agent-poller` thread
//! (from `/proc/PID/task/*/schedstat`, nanoseconds on CPU), scaled to one
//! minute: the cost of polling with KubeVirt's default intervals. Then the
//! latency of `CALLS` GetGuestInfo calls (default 1000) on one connection.
//!
//! `cargo run --release -p cmd --example agent_cost -- SOCKET PID [SECONDS] [CALLS]`
//! where PID is the launcher process serving SOCKET (under `run`, the
//! child of the outer `virt-launcher run`: `pgrep -P <outer pid>`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::time::{Duration, Instant};

use cmd::proto::cmd::EmptyRequest;

/// (process CPU ns, agent-poller thread CPU ns, thread count).
fn cpu(pid: u32) -> (u64, u64, usize) {
    let mut total = 0;
    let mut poller = 0;
    let mut n = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("launcher pid") {
        let dir = t.unwrap().path();
        let Ok(stat) = std::fs::read_to_string(dir.join("schedstat")) else {
            continue; // the thread ended
        };
        let ns: u64 = stat
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        total += ns;
        n += 1;
        if std::fs::read_to_string(dir.join("comm")).is_ok_and(|c| c.trim() == "agent-poller") {
            poller += ns;
        }
    }
    (total, poller, n)
}

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let q = |f: f64| v[((v.len() as f64 - 1.0) * f) as usize].as_secs_f64() * 1e6;
    println!(
        "  {name:<12} calls={} median={:.1}µs p90={:.1}µs p99={:.1}µs",
        v.len(),
        q(0.5),
        q(0.9),
        q(0.99)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: agent_cost SOCKET PID [SECONDS] [CALLS]";
    let sock = args.get(1).expect(usage);
    let pid: u32 = args.get(2).expect(usage).parse().expect(usage);
    let secs: u64 = args.get(3).map_or(60, |s| s.parse().expect(usage));
    let calls: usize = args.get(4).map_or(1000, |s| s.parse().expect(usage));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = cmd::client::Client::connect(Path::new(sock))
            .await
            .unwrap()
            .cmd;
        let info = c
            .get_guest_info(EmptyRequest {})
            .await
            .unwrap()
            .into_inner();
        let v: serde_json::Value = serde_json::from_str(&info.guest_info_response).unwrap();
        let version = v["guestAgentVersion"].as_str().unwrap_or("");
        assert!(
            !version.is_empty(),
            "the guest agent is not connected (no version in GetGuestInfo): {v}"
        );
        println!("guest agent {version}; measuring {secs} s without client calls");

        let (t0, p0, _) = cpu(pid);
        let start = Instant::now();
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let (t1, p1, threads) = cpu(pid);
        let per_min = |ns: u64| ns as f64 / 1e6 * 60.0 / start.elapsed().as_secs_f64();
        println!(
            "  launcher CPU: {:.1} ms per minute ({threads} threads), of which the agent-poller thread {:.1} ms per minute",
            per_min(t1.saturating_sub(t0)),
            per_min(p1.saturating_sub(p0))
        );

        for _ in 0..50 {
            c.get_guest_info(EmptyRequest {}).await.unwrap();
        }
        let mut lat = Vec::with_capacity(calls);
        let mut size = 0;
        for _ in 0..calls {
            let t = Instant::now();
            let r = c
                .get_guest_info(EmptyRequest {})
                .await
                .unwrap()
                .into_inner();
            lat.push(t.elapsed());
            size = r.guest_info_response.len();
        }
        summary("GetGuestInfo", lat);
        println!("  GetGuestInfo JSON size: {size} bytes");
    });
}
