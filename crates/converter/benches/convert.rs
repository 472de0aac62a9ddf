//! Conversion throughput: VMI JSON in → domain XML string out (decode,
//! default, validate, convert, serialise), for a small VMI (KubeVirt's
//! vmi-ephemeral example) and a large one (16 disks on four buses, custom
//! CPU with features, dedicated CPUs, I/O threads, hugepages, Hyper-V,
//! timers, inputs, TPM, watchdog, EFI).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use api::Arch;
use converter::{convert, ConvertContext, VirtType};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// KubeVirt's vmi-ephemeral example as JSON (shared with `examples/throughput.rs`).
const SMALL: &str = include_str!("small.json");

fn large() -> String {
    let buses = ["virtio", "sata", "scsi", "virtio"];
    let disks: Vec<String> = (0..16)
        .map(|i| {
            format!(
                r#"{{"name":"d{i}","serial":"SER{i:04}","cache":"none","disk":{{"bus":"{}"}}{}}}"#,
                buses[i % 4],
                if i == 0 { r#","bootOrder":1"# } else { "" }
            )
        })
        .collect();
    let volumes: Vec<String> = (0..16)
        .map(|i| match i % 3 {
            0 => format!(r#"{{"name":"d{i}","containerDisk":{{"image":"x"}}}}"#),
            1 => format!(r#"{{"name":"d{i}","emptyDisk":{{"capacity":"10Gi"}}}}"#),
            _ => format!(r#"{{"name":"d{i}","persistentVolumeClaim":{{"claimName":"c{i}"}}}}"#),
        })
        .collect();
    format!(
        r#"{{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{{"name":"big","namespace":"bench","uid":"5c1e0e3f-4e4b-7a9d-1c2a-3b4c5d6e7f80"}},"spec":{{"domain":{{"ioThreadsPolicy":"auto","resources":{{"requests":{{"cpu":"16"}}}},"cpu":{{"sockets":2,"cores":4,"threads":2,"model":"Haswell-noTSX","dedicatedCpuPlacement":true,"isolateEmulatorThread":true,"features":[{{"name":"vmx"}},{{"name":"pcid","policy":"disable"}}]}},"memory":{{"guest":"16Gi","hugepages":{{"pageSize":"2Mi"}}}},"features":{{"acpi":{{}},"apic":{{}},"smm":{{}},"hyperv":{{"relaxed":{{}},"vapic":{{}},"spinlocks":{{"spinlocks":8191}},"synic":{{}},"synictimer":{{"direct":{{}}}},"vpindex":{{}}}}}},"firmware":{{"bootloader":{{"efi":{{"secureBoot":true}}}}}},"clock":{{"utc":{{}},"timer":{{"rtc":{{"tickPolicy":"catchup"}},"pit":{{"tickPolicy":"delay"}},"hpet":{{"present":false}}}}}},"devices":{{"rng":{{}},"tpm":{{}},"watchdog":{{"name":"w","i6300esb":{{}}}},"blockMultiQueue":true,"inputs":[{{"name":"t","bus":"virtio","type":"tablet"}}],"disks":[{}]}}}},"volumes":[{}]}}}}"#,
        disks.join(","),
        volumes.join(",")
    )
}

fn bench(c: &mut Criterion) {
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.pod_cpuset = Some((0..64).collect());
    let mut g = c.benchmark_group("json_to_domain_xml");
    g.throughput(Throughput::Elements(1));
    for (name, doc) in [("small", SMALL.to_owned()), ("large_16_disks", large())] {
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
