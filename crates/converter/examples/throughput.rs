//! Conversion throughput of the benchmark VMIs (the criterion bench's
//! inputs, `benches/support/host.rs`), VMI JSON in → domain XML string
//! out, in conversions per second of wall time and per second of CPU time
//! of the converting thread, with the CPU time split into its stages
//! (decode = `api::load_vmi`: JSON, defaults, validation; convert; XML).
//! The CPU-time figure is the one that holds on a shared, loaded machine,
//! where a wall clock also counts time spent waiting for a core.
//!
//! `cargo run --release -p converter --example throughput [N]` (default
//! 50000 conversions of the small VMI, N/8 of the large one).

// An example may read /proc; the converter itself stays pure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    missing_docs
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use api::Arch;
use converter::{convert, ConvertContext};

#[path = "../benches/support/host.rs"]
mod host;

/// CPU time this (single) thread has run, from the kernel's scheduler
/// statistics (`/proc/thread-self/schedstat`, first field, ns).
fn cpu_time() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns: u64 = text
        .split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("schedstat format");
    Duration::from_nanos(ns)
}

/// Runs `f` `n` times; returns (wall, CPU) time.
fn timed(n: u32, mut f: impl FnMut()) -> (Duration, Duration) {
    let (wall0, cpu0) = (Instant::now(), cpu_time());
    for _ in 0..n {
        f();
    }
    (wall0.elapsed(), cpu_time() - cpu0)
}

fn us(d: Duration, n: u32) -> f64 {
    d.as_secs_f64() * 1e6 / f64::from(n)
}

fn measure(name: &str, doc: &str, n: u32, ctx: &ConvertContext) {
    let full = || {
        let vmi = api::load_vmi(black_box(doc.as_bytes()), Arch::Amd64).unwrap();
        let dom = convert(&vmi, ctx).unwrap();
        black_box(dom.to_xml().unwrap());
    };
    timed(n / 10 + 1, full); // warm-up
    let (wall, cpu) = timed(n, full);
    let (_, decode) = timed(n, || {
        black_box(api::load_vmi(black_box(doc.as_bytes()), Arch::Amd64).unwrap());
    });
    let vmi = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
    let (_, conv) = timed(n, || {
        black_box(convert(black_box(&vmi), ctx).unwrap());
    });
    let dom = convert(&vmi, ctx).unwrap();
    let xml_len = dom.to_xml().unwrap().len();
    let (_, xml) = timed(n, || {
        black_box(black_box(&dom).to_xml().unwrap());
    });
    println!(
        "{name} VMI ({} B JSON → {xml_len} B XML), {n} conversions: {:.0}/s wall ({:.1} µs each), \
         {:.0}/s of CPU time ({:.1} µs each: decode {:.1}, convert {:.1}, XML {:.1})",
        doc.len(),
        f64::from(n) / wall.as_secs_f64(),
        us(wall, n),
        f64::from(n) / cpu.as_secs_f64(),
        us(cpu, n),
        us(decode, n),
        us(conv, n),
        us(xml, n),
    );
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map_or(50_000, |a| a.parse().expect("N"));
    let ctx = host::host();
    measure("small", host::SMALL, n, &ctx);
    measure("large", host::LARGE, (n / 8).max(1), &ctx);
}
