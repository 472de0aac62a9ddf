//! GetDomain's JSON (`wire::api_domain`, KubeVirt's `api.Domain`)
//! carries what the converter writes: every converted example and corpus
//! VMI, and the large benchmark VMI, goes XML → parsed back (as the
//! launcher reads libvirt's XML) → JSON, and each element present in the
//! XML has a non-null JSON value under KubeVirt's Go field name
//! (`pkg/virt-launcher/virtwrap/api/schema.go`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::disallowed_types,
    missing_docs
)]

use std::path::Path;

use api::Arch;
use domain::Domain;
use serde_json::Value;
use wire::api_domain::{domain_json, DomainStatus, ObjectMeta};

#[path = "../benches/support/host.rs"]
mod host;

/// XML element (as it opens in the converter's XML) → JSON pointer under
/// `Spec` that must then be non-null (a `*` step: in some element of that
/// array; an empty string counts as null there).
const CARRIED: &[(&str, &str)] = &[
    ("<maxMemory ", "/MaxMemory"),
    ("<memoryBacking>", "/MemoryBacking"),
    ("<hugepages>", "/MemoryBacking/HugePages/HugePage/0/Size"),
    ("<source type=\"memfd\"/>", "/MemoryBacking/Source/Type"),
    ("<allocation ", "/MemoryBacking/Allocation/Mode"),
    ("<vcpus>", "/VCPUs/VCPU/0/Enabled"),
    ("<cputune>", "/CPUTune"),
    ("<vcpupin ", "/CPUTune/VCPUPin/0/CPUSet"),
    ("<iothreadpin ", "/CPUTune/IOThreadPin/0/CPUSet"),
    ("<emulatorpin ", "/CPUTune/EmulatorPin/CPUSet"),
    ("<numatune>", "/NUMATune/MemNodes/0/NodeSet"),
    ("<iothreads>", "/IOThreads/IOThreads"),
    ("<sysinfo ", "/SysInfo"),
    ("<hyperv", "/Features/Hyperv"),
    ("<spinlocks ", "/Features/Hyperv/Spinlocks/State"),
    ("<stimer ", "/Features/Hyperv/SyNICTimer/State"),
    ("<direct ", "/Features/Hyperv/SyNICTimer/Direct/State"),
    ("<vendor_id ", "/Features/Hyperv/VendorID/Value"),
    ("<relaxed ", "/Features/Hyperv/Relaxed/State"),
    ("<hint-dedicated ", "/Features/KVM/HintDedicated/State"),
    ("<hidden ", "/Features/KVM/Hidden/State"),
    ("<pmu ", "/Features/PMU/State"),
    ("<pvspinlock ", "/Features/PVSpinlock/State"),
    ("<clock ", "/Clock"),
    ("<watchdog ", "/Devices/Watchdogs/0/Model"),
    ("<tpm ", "/Devices/TPMs/0/Backend/Type"),
    ("<sound ", "/Devices/SoundCards/0/Model"),
    ("<redirdev ", "/Devices/Redirs/0/Bus"),
    ("<vsock ", "/Devices/VSOCK/CID/Auto"),
    ("<filesystem ", "/Devices/Filesystems/0/Driver/Type"),
    ("<blockio ", "/Devices/Disks"),
    ("<reservations ", "/Devices/Disks"),
    (
        "<interface type=\"ethernet\"",
        "/Devices/Interfaces/*/Target/Device",
    ),
    (
        "<interface type=\"user\"",
        "/Devices/Interfaces/*/Source/Device",
    ),
    (
        "<backend type=\"passt\"",
        "/Devices/Interfaces/*/Backend/LogFile",
    ),
    ("<portForward ", "/Devices/Interfaces/*/PortForward/0/Dev"),
    (
        "<range start=",
        "/Devices/Interfaces/*/PortForward/0/Ranges/0/Start",
    ),
    ("<rng ", "/Devices/Rng/Backend/Source"),
    ("<memballoon ", "/Devices/Ballooning/Model"),
];

fn spec_json(doc: &[u8]) -> Option<(String, Value)> {
    let mut vmi = api::load_vmi(doc, Arch::Amd64).ok()?;
    api::defaults::fill_missing_uid(&mut vmi);
    let dom = converter::convert(&vmi, &host::host()).ok()?;
    let xml = dom.to_xml().unwrap();
    // As GetDomain reads libvirt's XML.
    let back = Domain::from_xml(&xml).unwrap();
    assert_eq!(back, dom, "{xml}");
    let meta = ObjectMeta {
        name: vmi.metadata.name.clone(),
        namespace: vmi.namespace().to_owned(),
        ..ObjectMeta::default()
    };
    let json = domain_json(&meta, Some(&back), &DomainStatus::default());
    Some((xml, json["Spec"].clone()))
}

/// Whether `ptr` (with at most one `*` step, see [`CARRIED`]) has a value.
fn carried(spec: &Value, ptr: &str) -> bool {
    match ptr.split_once("/*") {
        None => !spec.pointer(ptr).unwrap_or(&Value::Null).is_null(),
        Some((list, rest)) => spec
            .pointer(list)
            .and_then(Value::as_array)
            .is_some_and(|a| {
                a.iter().any(|e| {
                    let v = e.pointer(rest).unwrap_or(&Value::Null);
                    !v.is_null() && v != ""
                })
            }),
    }
}

fn check_carried(name: &str, xml: &str, spec: &Value) -> usize {
    let mut n = 0;
    for (elem, ptr) in CARRIED {
        if xml.contains(elem) {
            assert!(
                carried(spec, ptr),
                "{name}: {elem} in the XML but Spec{ptr} is null\n{xml}\n{spec:#}"
            );
            n += 1;
        }
    }
    n
}

#[test]
fn get_domain_json_carries_every_converted_element() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
    let mut files = Vec::new();
    for dir in ["examples", "corpus", "cases"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut checked = 0;
    let mut converted = 0;
    for f in &files {
        let Some((xml, spec)) = spec_json(&std::fs::read(f).unwrap()) else {
            continue;
        };
        converted += 1;
        checked += check_carried(&f.display().to_string(), &xml, &spec);
    }
    let (xml, spec) = spec_json(host::LARGE.as_bytes()).unwrap();
    checked += check_carried("large.json", &xml, &spec);
    assert!(converted >= 30, "only {converted} VMIs converted");
    // Every row of CARRIED but <pmu> and <reservations> appears somewhere.
    assert!(checked >= 150, "only {checked} element checks");
}

#[test]
fn get_domain_json_values_use_kubevirt_shapes() {
    let (_, spec) = spec_json(host::LARGE.as_bytes()).unwrap();
    let at = |p: &str| spec.pointer(p).cloned().unwrap_or(Value::Null);
    // Go string fields stay strings, pointers to uint become numbers.
    assert_eq!(at("/MemoryBacking/HugePages/HugePage/0/Size"), "2097152");
    assert_eq!(at("/MemoryBacking/HugePages/HugePage/1/NodeSet"), "1");
    assert_eq!(at("/CPUTune/VCPUPin").as_array().unwrap().len(), 16);
    assert_eq!(at("/CPUTune/VCPUPin/15/VCPU"), 15);
    assert_eq!(at("/CPUTune/EmulatorPin/CPUSet"), "16");
    assert_eq!(at("/NUMATune/Memory/Mode"), "strict");
    assert_eq!(at("/NUMATune/MemNodes/1/CellID"), 1);
    assert_eq!(at("/Features/Hyperv/Spinlocks/Retries"), 8191);
    assert_eq!(at("/Features/Hyperv/SyNICTimer/Direct/State"), "on");
    assert_eq!(at("/Features/Hyperv/EVMCS"), Value::Null);
    assert_eq!(at("/Devices/Watchdogs/0/Model"), "i6300esb");
    assert_eq!(at("/Devices/Watchdogs/0/Alias/Name"), "w");
    assert_eq!(at("/Devices/TPMs/0/Model"), "tpm-tis");
    assert_eq!(at("/Devices/Interfaces").as_array().unwrap().len(), 8);

    let misc = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpus/devices-misc.yaml"),
    )
    .unwrap();
    let (xml, spec) = spec_json(&misc).unwrap();
    let at = |p: &str| spec.pointer(p).cloned().unwrap_or(Value::Null);
    assert_eq!(at("/Devices/Watchdogs/0/Action"), "poweroff", "{xml}");
    assert_eq!(at("/Devices/SoundCards/0/Model"), "ich9");
    assert_eq!(at("/Devices/VSOCK/CID/Address"), 42);
    assert_eq!(at("/Devices/Redirs/0/Type"), "unix", "{xml}");
    assert_eq!(at("/Devices/Redirs/0/Bus"), "usb");
    assert_eq!(at("/Devices/Redirs/0/Source/Mode"), "bind");
}
