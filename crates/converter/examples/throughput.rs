//! Conversion throughput of the small VMI (the criterion bench's input),
//! VMI JSON in → domain XML string out, in conversions per second of wall
//! time and per second of CPU time of the converting thread. The CPU-time figure is
//! the one that holds on a shared, loaded machine, where criterion's wall
//! clock also counts time spent waiting for a core.
//!
//! `cargo run --release -p converter --example throughput [N]` (default 50000).

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
use converter::{convert, ConvertContext, VirtType};

const SMALL: &str = include_str!("../benches/small.json");

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

fn one(ctx: &ConvertContext) -> usize {
    let vmi = api::load_vmi(black_box(SMALL.as_bytes()), Arch::Amd64).unwrap();
    let dom = convert(&vmi, ctx).unwrap();
    black_box(dom.to_xml().unwrap()).len()
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map_or(50_000, |a| a.parse().expect("N"));
    let ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    for _ in 0..n / 10 {
        one(&ctx);
    }
    let (wall0, cpu0) = (Instant::now(), cpu_time());
    for _ in 0..n {
        one(&ctx);
    }
    let (wall, cpu) = (wall0.elapsed(), cpu_time() - cpu0);
    println!(
        "small VMI, {n} conversions: {:.0}/s wall ({:.1} µs each), {:.0}/s of CPU time ({:.1} µs each)",
        f64::from(n) / wall.as_secs_f64(),
        wall.as_secs_f64() * 1e6 / f64::from(n),
        f64::from(n) / cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / f64::from(n),
    );
}
