//! Conversion throughput: VMI JSON in → domain XML string out (decode,
//! default, validate, convert, serialise), for a small VMI (KubeVirt's
//! vmi-ephemeral example) and a large one (16 disks, 8 NICs, dedicated
//! CPUs, guest NUMA, hugepages, EFI, Hyper-V: see `support/host.rs`).
//! `tests/large_vmi.rs` checks the large VMI's XML with libvirt's schema.
//! For a figure that holds on a loaded machine (CPU time instead of wall
//! time): `cargo run --release -p converter --example throughput`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use api::Arch;
use converter::convert;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[path = "support/host.rs"]
mod host;

fn bench(c: &mut Criterion) {
    let ctx = host::host();
    let mut g = c.benchmark_group("json_to_domain_xml");
    g.throughput(Throughput::Elements(1));
    for (name, doc) in [
        ("small", host::SMALL),
        ("large_16_disks_8_nics_numa_hugepages", host::LARGE),
    ] {
        // Sanity: the input converts.
        let vmi = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        convert(&vmi, &ctx).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| {
                let vmi = api::load_vmi(black_box(doc.as_bytes()), Arch::Amd64).unwrap();
                let dom = convert(&vmi, &ctx).unwrap();
                black_box(dom.to_xml().unwrap())
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
