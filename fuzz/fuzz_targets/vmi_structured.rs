//! A structured VMI (`Arbitrary` derived on the api types, feature
//! `arbitrary`) and arbitrary host facts → KubeVirt's defaults →
//! validation → converter → domain XML → parsed back (see the crate's
//! `check`). Also: the VMI serialised to JSON decodes back to itself, so
//! what the launcher re-sends (virt-handler's VMI JSON) means the same.
//!
//! Arbitrary values rarely get past validation (a random name is not a
//! DNS-1123 name, a random volume has several sources, a disk rarely names
//! an existing volume), so unless the input asks to keep it raw, the VMI's
//! JSON is tidied first: identity replaced by a valid one, names mapped
//! onto a pool of five, one source per volume, one device type per disk,
//! one binding per interface, annotation keys mapped onto those the
//! converter reads, an unknown architecture dropped, 128Mi of guest memory
//! when none is set. The values inside stay arbitrary.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use api::vmi::CacheMode;
use api::VirtualMachineInstance;
use arbitrary::Arbitrary;
use converter::interfaces::InterfaceHost;
use converter::numa::HostNumaCell;
use converter::{ConvertContext, ImageFormat, VirtType};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use virt_launcher_fuzz::{check, ARCHES};

const POOL: [&str; 5] = ["a", "b", "default", "disk0", "net-1"];

/// Annotations the converter reads.
const ANNOTATIONS: [&str; 5] = [
    "alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity",
    "kubevirt.io/free-page-reporting-disabled",
    "kubevirt.io/memfd",
    "kubevirt.io/pci-interface-slot-count",
    "kubevirt.io/placePCIDevicesOnRootComplex",
];

/// Host facts the launcher probes before conversion.
#[derive(Arbitrary, Debug)]
struct Facts {
    arch: u8,
    kvm: bool,
    pod_cpus: Option<Vec<u8>>,
    host_numa: Option<Vec<Vec<u8>>>,
    /// Bit i: the arch's i-th EFI file is present; `None`: not probed.
    ovmf_files: Option<u8>,
    qcow2: Vec<u8>,
    cache_modes: Vec<(u8, CacheMode)>,
    block_volumes: Vec<u8>,
    native_io: Vec<u8>,
    interfaces: Vec<(u8, String, Option<String>, Option<u32>)>,
    balloon_period: u32,
    serial_console_log: bool,
    free_page_reporting: bool,
    bochs_for_efi_guests: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    vmi: VirtualMachineInstance,
    facts: Facts,
    raw: bool,
}

fn pool(i: usize) -> String {
    POOL[i % POOL.len()].to_owned()
}

/// Maps `obj.name` onto the pool (by its first byte).
fn pooled_name(obj: &mut Map<String, Value>) {
    let i = obj
        .get("name")
        .and_then(Value::as_str)
        .and_then(|n| n.bytes().next())
        .map_or(0, usize::from);
    obj.insert("name".into(), pool(i).into());
}

/// Keeps only the first of `keys` present in `obj` (all of them when `keys`
/// is empty: every key but `name`).
fn one_of(obj: &mut Map<String, Value>, keys: &[&str]) {
    let mut seen = false;
    obj.retain(|k, _| {
        let counted = if keys.is_empty() {
            k != "name"
        } else {
            keys.contains(&k.as_str())
        };
        if !counted {
            return true;
        }
        let keep = !seen;
        seen = true;
        keep
    });
}

fn each(v: Option<&mut Value>, f: impl Fn(&mut Map<String, Value>)) {
    if let Some(Value::Array(items)) = v {
        items
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .for_each(f);
    }
}

fn tidy(doc: &mut Value) {
    let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.insert("name".into(), "vmi-fuzz".into());
    meta.remove("namespace");
    meta.remove("uid");
    if let Some(Value::Object(ann)) = meta.get_mut("annotations") {
        let old = std::mem::take(ann);
        for (k, v) in old {
            let i = k.bytes().next().map_or(0, usize::from) % ANNOTATIONS.len();
            ann.insert(ANNOTATIONS[i].into(), v);
        }
    }
    let Some(spec) = doc.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for k in ["hostname", "subdomain", "accessCredentials"] {
        spec.remove(k);
    }
    let arch_ok = |a: &str| ["amd64", "arm64", "ppc64le", "s390x"].contains(&a);
    if !spec
        .get("architecture")
        .and_then(Value::as_str)
        .is_some_and(arch_ok)
    {
        spec.remove("architecture");
    }
    if let Some(fw) = spec
        .get_mut("domain")
        .and_then(|d| d.get_mut("firmware"))
        .and_then(Value::as_object_mut)
    {
        fw.remove("uuid");
    }
    each(spec.get_mut("volumes"), |v| {
        pooled_name(v);
        one_of(v, &[]);
    });
    each(spec.get_mut("networks"), |n| {
        pooled_name(n);
        one_of(n, &["pod", "multus"]);
    });
    // Without guest memory nothing converts (the raw inputs test that).
    if let Some(dom) = spec.get_mut("domain").and_then(Value::as_object_mut) {
        let has = |k: &str| dom.get(k).is_some();
        let requested = dom
            .get("resources")
            .and_then(|r| r.get("requests"))
            .and_then(|r| r.get("memory"))
            .is_some();
        let guest = has("memory") && dom["memory"].get("guest").is_some();
        if !guest && !requested {
            let mem = dom
                .entry("memory")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(m) = mem.as_object_mut() {
                m.insert("guest".into(), "128Mi".into());
            }
        }
    }
    let Some(dev) = spec
        .get_mut("domain")
        .and_then(|d| d.get_mut("devices"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    each(dev.get_mut("disks"), |d| {
        pooled_name(d);
        one_of(d, &["disk", "lun", "cdrom"]);
    });
    each(dev.get_mut("interfaces"), |i| {
        pooled_name(i);
        one_of(
            i,
            &[
                "bridge",
                "masquerade",
                "sriov",
                "slirp",
                "passt",
                "macvtap",
                "binding",
            ],
        );
    });
    each(dev.get_mut("filesystems"), pooled_name);
}

fn context(f: Facts) -> ConvertContext {
    let arch = ARCHES[usize::from(f.arch) % ARCHES.len()];
    let virt = if f.kvm { VirtType::Kvm } else { VirtType::Qemu };
    let mut ctx = ConvertContext::new(arch, virt);
    ctx.pod_cpuset = f.pod_cpus.map(|c| c.into_iter().map(u32::from).collect());
    ctx.host_numa = f.host_numa.map(|cells| {
        cells
            .into_iter()
            .zip(0u32..)
            .map(|(cpus, id)| HostNumaCell {
                id,
                cpus: cpus.into_iter().map(u32::from).collect(),
            })
            .collect()
    });
    ctx.ovmf_files = f.ovmf_files.map(|bits| {
        converter::arch::caps(arch)
            .efi_files
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, n)| n.to_owned())
            .collect::<BTreeSet<_>>()
    });
    let pool8 = |i: u8| pool(usize::from(i));
    let p = &mut ctx.prepared;
    p.container_disk_formats = f
        .qcow2
        .into_iter()
        .map(|i| (pool8(i), ImageFormat::Qcow2))
        .collect();
    p.cache_modes = f
        .cache_modes
        .into_iter()
        .map(|(i, m)| (pool8(i), m))
        .collect::<BTreeMap<_, _>>();
    p.block_volumes = f.block_volumes.into_iter().map(pool8).collect();
    p.native_io = f.native_io.into_iter().map(pool8).collect();
    p.interfaces = f
        .interfaces
        .into_iter()
        .map(|(i, tap, mac, mtu)| {
            (
                pool8(i),
                InterfaceHost {
                    tap,
                    mac,
                    mtu,
                    ..InterfaceHost::default()
                },
            )
        })
        .collect();
    ctx.mem_balloon_stats_period = f.balloon_period;
    ctx.serial_console_log = f.serial_console_log;
    ctx.free_page_reporting = f.free_page_reporting;
    ctx.bochs_for_efi_guests = f.bochs_for_efi_guests;
    ctx
}

fuzz_target!(|input: Input| {
    virt_launcher_fuzz::count_run();
    let Input {
        mut vmi,
        facts,
        raw,
    } = input;
    "kubevirt.io/v1".clone_into(&mut vmi.api_version);
    "VirtualMachineInstance".clone_into(&mut vmi.kind);
    // Longer device lists are refused by count at decoding (api::limits),
    // by design: keep the round trip to the lists a VMI may have.
    let max = api::limits::MAX_DEVICES;
    vmi.spec.domain.devices.disks.truncate(max);
    vmi.spec.domain.devices.interfaces.truncate(max);
    vmi.spec.volumes.truncate(max);
    vmi.spec.networks.truncate(max);
    // What virt-handler sends is this VMI as JSON: it must decode to itself.
    let mut json = serde_json::to_value(&vmi).expect("a VMI serialises");
    match api::load::from_value(json.clone()) {
        Ok(back) => assert_eq!(back, vmi, "VMI JSON decodes differently: {json}"),
        Err(e) => panic!("serialised VMI does not decode: {e}\n{json}"),
    }
    if !raw {
        tidy(&mut json);
        vmi = match api::load::from_value(json) {
            Ok(v) => v,
            Err(e) => panic!("tidied VMI does not decode: {e}"),
        };
    }
    let ctx = context(facts);
    api::defaults::apply(&mut vmi, ctx.arch);
    api::defaults::fill_missing_uid(&mut vmi);
    if !api::validate::validate(&vmi).is_empty() {
        return;
    }
    check(&vmi, &ctx);
});
