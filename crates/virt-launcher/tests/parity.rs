//! Parity with KubeVirt v1.6.6's own converter.
//!
//! `tests/data/reference/kubevirt-v1.6.6/` holds, for every KubeVirt
//! example and corpus VMI of this project (inputs hashed in `INPUTS.sha256`),
//! the domain XML KubeVirt's `Convert_v1_VirtualMachineInstance_To_api_Domain`
//! made of it after KubeVirt's defaulting, under both VM rollout strategies
//! (`stage/`, `liveupdate/`); its README states the context used. This test
//! converts each input the way `virt-launcher convert --vm-rollout-strategy`
//! does (standalone defaults = the cluster's, [`api::load_standalone`]) in
//! that context, and compares the two domains after the normalisation the
//! README describes: attributes as sets, repeated elements matched by
//! identity, order compared within each device kind (libvirt gives PCI
//! addresses in document order, so it is guest-visible). What remains must
//! be one of [`DEVIATIONS`], each with its reason; anything else fails.
//!
//! An input whose bytes no longer match `INPUTS.sha256` fails the test by
//! name: its reference describes another VMI (regenerate it with KubeVirt's
//! code, or restore the input).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    missing_docs
)]

#[path = "parity/xmltree.rs"]
mod xmltree;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/run.rs"]
mod run;

use api::cluster::{ClusterDefaults, VmRolloutStrategy};
use api::Arch;
use converter::{ConvertContext, VirtType};
use sha2::{Digest, Sha256};
use xmltree::{Diff, Node};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn reference_dir() -> PathBuf {
    repo().join("tests/data/reference/kubevirt-v1.6.6")
}

/// A difference that remains on purpose, with its reason.
struct Deviation {
    /// Reference (input file stem) it applies to, in both strategies.
    input: &'static str,
    /// The differences' paths (see [`Diff::path`]): each exactly, or an
    /// element and everything below it.
    paths: &'static [&'static str],
    /// Why this launcher's domain differs from KubeVirt's there.
    reason: &'static str,
}

impl Deviation {
    fn explains(&self, name: &str, d: &Diff) -> bool {
        self.input == name
            && self
                .paths
                .iter()
                .any(|p| d.path == *p || d.path.starts_with(&format!("{p}/")))
    }
}

/// Every difference left between this launcher's conversion and KubeVirt's,
/// and why (also in the references' README). A difference not listed here
/// fails the test; a listed one that no longer occurs fails too.
const DEVIATIONS: &[Deviation] = &[
    Deviation {
        input: "ephemeral-pvc",
        paths: &["/domain/devices/disk[alias=ua-golden]/readonly"],
        reason:
            "a claim with persistentVolumeClaim.readOnly is mounted read-only (kubelet's mount \
                 of a read-only claim; `run` bind-mounts it read-only): KubeVirt's writable disk \
                 on it cannot start (QEMU: \"Could not open ...: Read-only file system\"), so \
                 this launcher gives the guest a read-only disk instead",
    },
    Deviation {
        input: "network-passt",
        paths: &["/domain/devices/interface[alias=ua-default]"],
        reason: "KubeVirt's converter leaves a binding plugin's interface to the plugin's hook \
                 sidecar, which adds it at define time (after the converter, where the \
                 references stop); this launcher runs no sidecars and writes the interface \
                 KubeVirt's passt sidecar writes",
    },
    Deviation {
        input: "sriov-interfaces",
        paths: &[
            "/domain/devices/hostdev[alias=ua-sriov-red]/source/address@type",
            "/domain/devices/hostdev[alias=ua-sriov-blue]/source/address@type",
        ],
        reason: "spelling: libvirt's schema has no type on a host device's source address \
                 (virt-xml-validate refuses KubeVirt's type='pci'; libvirt's parser ignores it)",
    },
    Deviation {
        input: "claims-with-status",
        paths: &["/domain/devices/disk[alias=ua-raw-block]/source@name"],
        reason: "spelling: libvirt's schema has a source name only for network disks \
                 (virt-xml-validate refuses KubeVirt's name='<volume>' on a block device; \
                 libvirt's parser ignores it)",
    },
    Deviation {
        input: "virtiofs",
        paths: &[
            "/domain/devices/filesystem@accessMode",
            "/domain/devices/filesystem@accessmode",
            "/domain/devices/filesystem/source@dir",
        ],
        reason: "spelling: libvirt reads accessmode, not KubeVirt's accessMode, so KubeVirt's \
                 value is dropped and libvirt's default, passthrough, applies, which is what \
                 this launcher writes in libvirt's spelling; the empty source dir KubeVirt adds \
                 means nothing for a virtiofs share served over a socket",
    },
];

/// The input files of the references, by name (file stem), with their
/// recorded hashes (first 16 hex digits of SHA-256).
fn recorded_inputs() -> BTreeMap<String, (PathBuf, String)> {
    let text = std::fs::read_to_string(reference_dir().join("INPUTS.sha256")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (hash, rel) = line.split_once("  ").expect("`HASH  PATH` lines");
        let path = repo().join(rel.trim());
        let name = rel
            .trim()
            .rsplit('/')
            .next()
            .unwrap()
            .trim_end_matches(".yaml")
            .to_owned();
        out.insert(name, (path, hash.to_owned()));
    }
    out
}

fn short_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reference names (the `.xml` files of one strategy directory).
fn references(strategy: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(reference_dir().join(strategy))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".xml").map(str::to_owned)
        })
        .collect();
    v.sort();
    v
}

/// The launcher-side context the references were made in (their README):
/// amd64 on KVM, pod cpuset 0-1, one host NUMA cell with CPUs 0 and 1,
/// KubeVirt's OVMF file names, container disks raw, no cache/io probing,
/// preallocated and block-mode claims from the claim status, SR-IOV
/// addresses from the input's network-info file.
fn context(vmi: &api::VirtualMachineInstance, input: &Path) -> ConvertContext {
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.pod_cpuset = Some(vec![0, 1]);
    ctx.host_numa = Some(vec![converter::numa::HostNumaCell {
        id: 0,
        cpus: vec![0, 1],
    }]);
    ctx.ovmf_files = Some(
        [
            "OVMF_CODE.fd",
            "OVMF_VARS.fd",
            "OVMF_CODE.secboot.fd",
            "OVMF_VARS.secboot.fd",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect(),
    );
    ctx.volumes_discard_ignore = storage::pvc::preallocated_volumes(vmi).unwrap();
    ctx.prepared.block_volumes = storage::pvc::block_mode_volumes(vmi).unwrap();
    let info = input.with_extension("network-info.json");
    if info.exists() {
        let pci =
            network::sriov::read_network_info(&info, false, std::time::Duration::ZERO).unwrap();
        ctx.sriov_pci =
            network::sriov::host_addresses(vmi, pci.as_ref(), &info.display().to_string(), None)
                .unwrap();
    }
    ctx
}

/// This launcher's domain XML for `input` under `strategy`.
fn ours(input: &Path, strategy: VmRolloutStrategy) -> String {
    let bytes = std::fs::read(input).unwrap();
    let cluster = ClusterDefaults {
        vm_rollout_strategy: strategy,
    };
    let (mut vmi, _) = api::load_standalone(&bytes, Arch::Amd64, &cluster)
        .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
    api::defaults::fill_missing_uid(&mut vmi);
    let ctx = context(&vmi, input);
    let dom = converter::convert(&vmi, &ctx).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
    dom.to_xml().unwrap()
}

fn strategy_dir(s: VmRolloutStrategy) -> &'static str {
    match s {
        VmRolloutStrategy::Stage => "stage",
        VmRolloutStrategy::LiveUpdate => "liveupdate",
    }
}

/// The differences of `input` under `strategy` that no deviation explains.
fn unexplained(name: &str, input: &Path, strategy: VmRolloutStrategy) -> Vec<Diff> {
    let theirs = std::fs::read_to_string(
        reference_dir()
            .join(strategy_dir(strategy))
            .join(format!("{name}.xml")),
    )
    .unwrap();
    compare(name, &ours(input, strategy), &theirs)
}

fn compare(name: &str, ours: &str, theirs: &str) -> Vec<Diff> {
    let a = xmltree::normalise(Node::parse(ours).unwrap());
    let b = xmltree::normalise(Node::parse(theirs).unwrap());
    xmltree::diff(&a, &b)
        .into_iter()
        .filter(|d| !DEVIATIONS.iter().any(|x| x.explains(name, d)))
        .collect()
}

/// Recorded inputs that are no VMI of a reference: checked for nothing
/// (changing them changes no conversion).
const NOT_CONVERTED: &[&str] = &["tests/data/corpus/README.md"];

#[test]
fn every_reference_input_is_unchanged() {
    let recorded = recorded_inputs();
    let refs = references("stage");
    let mut changed = Vec::new();
    let mut checked = 0;
    for (name, (path, hash)) in &recorded {
        let rel = path
            .strip_prefix(repo())
            .unwrap_or(path)
            .display()
            .to_string();
        // A reference's VMI, or a host fact it was converted with
        // (`<vmi>.network-info.json`).
        let used = refs.contains(name)
            || name
                .strip_suffix(".network-info.json")
                .is_some_and(|vmi| refs.iter().any(|r| r == vmi));
        if !used {
            assert!(
                NOT_CONVERTED.contains(&rel.as_str()),
                "{rel} is recorded in INPUTS.sha256 but belongs to no reference"
            );
            continue;
        }
        checked += 1;
        match std::fs::read(path) {
            Ok(bytes) if short_sha256(&bytes) == *hash => {}
            Ok(bytes) => changed.push(format!(
                "{rel} (sha256 {}…, the reference was made of {hash}…)",
                short_sha256(&bytes)
            )),
            Err(e) => changed.push(format!("{rel}: {e}")),
        }
    }
    assert!(
        changed.is_empty(),
        "inputs changed since KubeVirt's references were made; their references no longer \
         apply (regenerate them with KubeVirt v1.6.6's code, or restore the inputs):\n{}",
        changed.join("\n")
    );
    assert_eq!(checked, 38, "37 VMIs and one network-info file");
    // Every reference belongs to a recorded input, in both strategies.
    for s in ["stage", "liveupdate"] {
        let refs = references(s);
        assert_eq!(refs.len(), 37, "{s}: {refs:?}");
        for r in refs {
            assert!(
                recorded.contains_key(&r),
                "{s}/{r}.xml has no recorded input"
            );
        }
    }
    // VMIs added after the references were made are not compared: say so.
    for dir in ["tests/data/examples", "tests/data/corpus"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.extension().is_some_and(|x| x == "yaml") && !recorded.contains_key(&stem) {
                eprintln!(
                    "note: {} has no KubeVirt reference (added after they were made): not compared",
                    p.display()
                );
            }
        }
    }
}

#[test]
fn conversion_matches_kubevirts_for_every_reference_and_strategy() {
    let recorded = recorded_inputs();
    let mut report = Vec::new();
    let mut compared = 0;
    for strategy in [VmRolloutStrategy::Stage, VmRolloutStrategy::LiveUpdate] {
        for name in references(strategy_dir(strategy)) {
            let (input, _) = &recorded[&name];
            compared += 1;
            for d in unexplained(&name, input, strategy) {
                report.push(format!("{}/{name}: {d}", strategy_dir(strategy)));
            }
        }
    }
    assert!(compared >= 74, "only {compared} references compared");
    assert!(
        report.is_empty(),
        "{} differences from KubeVirt v1.6.6's converter (not in DEVIATIONS):\n{}",
        report.len(),
        report.join("\n")
    );
}

/// Every deviation still occurs: a listed difference that went away is
/// taken off the list, so the list stays the truth.
#[test]
fn every_deviation_still_occurs() {
    let recorded = recorded_inputs();
    let mut seen = BTreeSet::new();
    for strategy in [VmRolloutStrategy::Stage, VmRolloutStrategy::LiveUpdate] {
        for name in references(strategy_dir(strategy)) {
            let (input, _) = &recorded[&name];
            let theirs = std::fs::read_to_string(
                reference_dir()
                    .join(strategy_dir(strategy))
                    .join(format!("{name}.xml")),
            )
            .unwrap();
            let a = xmltree::normalise(Node::parse(&ours(input, strategy)).unwrap());
            let b = xmltree::normalise(Node::parse(&theirs).unwrap());
            for d in xmltree::diff(&a, &b) {
                for (i, x) in DEVIATIONS.iter().enumerate() {
                    if x.explains(&name, &d) {
                        seen.insert(i);
                    }
                }
            }
        }
    }
    for (i, x) in DEVIATIONS.iter().enumerate() {
        assert!(
            seen.contains(&i),
            "deviation of {} at {:?} no longer occurs: remove it ({})",
            x.input,
            x.paths,
            x.reason
        );
    }
}

/// The comparison itself finds what it must: a swapped controller order,
/// a changed attribute, a missing device; and ignores what the references'
/// README lists as spelling.
#[test]
fn the_comparison_sees_order_values_and_devices_and_ignores_spelling() {
    let base = "<domain type='kvm'><name>n</name><uuid>u-1</uuid><metadata><x/></metadata><sysinfo type='smbios'><system><entry name='uuid'>u-1</entry><entry name='sku'></entry></system><bios></bios></sysinfo><devices><controller type='usb' index='0' model='none'/><controller type='scsi' index='0'/><controller type='virtio-serial' index='0'/><disk device='disk'><alias name='ua-a'/><target dev='vda'/><driver name='qemu'/><source/></disk><video><model type='virtio' heads='1' vram='16384'/></video></devices><cpu><feature name='x' policy='require'/></cpu></domain>";
    let same = "<domain type='kvm'><name>n</name><sysinfo type='smbios'><system><entry name='uuid'>u-1</entry></system></sysinfo><cpu><feature name='x'/></cpu><devices><disk device='disk'><driver name='qemu'/><target dev='vda'/><alias name='ua-a'/></disk><controller index='0' type='usb' model='none'/><video><model type='virtio' heads='1'/></video><controller type='scsi' index='0'/><controller type='virtio-serial' index='0'/></devices></domain>";
    assert_eq!(compare("t", base, same), vec![]);
    let swapped = base.replace(
        "<controller type='scsi' index='0'/><controller type='virtio-serial' index='0'/>",
        "<controller type='virtio-serial' index='0'/><controller type='scsi' index='0'/>",
    );
    let d = compare("t", &swapped, base);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].path.starts_with("/domain/devices/controller"), "{d:?}");
    let changed = base.replace(
        "<driver name='qemu'/>",
        "<driver name='qemu' discard='unmap'/>",
    );
    let d = compare("t", &changed, base);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].path, "/domain/devices/disk[alias=ua-a]/driver@discard");
    let missing = base.replace(
        "<video><model type='virtio' heads='1' vram='16384'/></video>",
        "",
    );
    let d = compare("t", &missing, base);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].path, "/domain/devices/video");
    assert!(d[0].what.starts_with("only KubeVirt's: <video>"), "{d:?}");
}

/// `virt-launcher convert` itself (the CLI, both strategies) agrees with
/// the references for every input whose conversion reads no host fact
/// (dedicated CPUs and guest NUMA read the host's cgroup and nodes, EFI the
/// firmware files of /usr/share/OVMF: those are compared above, in the
/// references' context).
#[test]
fn the_convert_command_agrees_with_the_references() {
    let recorded = recorded_inputs();
    let host_dependent = |doc: &str| {
        doc.contains("dedicatedCpuPlacement")
            || doc.contains("guestMappingPassthrough")
            || doc.contains("efi:")
    };
    let mut compared = 0;
    let mut report = Vec::new();
    for (flag, strategy) in [
        (None, VmRolloutStrategy::LiveUpdate),
        (Some("Stage"), VmRolloutStrategy::Stage),
        (Some("LiveUpdate"), VmRolloutStrategy::LiveUpdate),
    ] {
        for name in references(strategy_dir(strategy)) {
            let (input, _) = &recorded[&name];
            if host_dependent(&std::fs::read_to_string(input).unwrap()) {
                continue;
            }
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_virt-launcher"));
            cmd.arg("convert")
                .arg(input)
                .args(["--arch", "amd64", "--allow-emulation"]);
            if let Some(f) = flag {
                cmd.args(["--vm-rollout-strategy", f]);
            }
            let info = input.with_extension("network-info.json");
            if info.exists() {
                cmd.arg("--network-info").arg(&info);
            }
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The domain type follows this host's /dev/kvm; the references
            // are for KVM.
            let xml = String::from_utf8(out.stdout).unwrap().replacen(
                "<domain type=\"qemu\"",
                "<domain type=\"kvm\"",
                1,
            );
            let theirs = std::fs::read_to_string(
                reference_dir()
                    .join(strategy_dir(strategy))
                    .join(format!("{name}.xml")),
            )
            .unwrap();
            compared += 1;
            for d in compare(&name, &xml, &theirs) {
                report.push(format!("convert {flag:?} {name}: {d}"));
            }
        }
    }
    assert!(compared >= 3 * 30, "only {compared} conversions compared");
    assert!(report.is_empty(), "{}", report.join("\n"));
    // A misspelt strategy is refused by name.
    let out = Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
        .arg("convert")
        .arg(repo().join("tests/data/examples/vmi-sata.yaml"))
        .args(["--vm-rollout-strategy", "liveUpdate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"liveUpdate\" is not a VM rollout strategy (Stage or LiveUpdate)"),
        "{err}"
    );
}

/// `v` without what Go's `omitempty` leaves out (null, false, 0, "", at
/// any depth): absent and empty are the same to the converter.
fn omit_empty(v: &serde_json::Value) -> Option<serde_json::Value> {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(false) => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::String(s) if s.is_empty() => None,
        Value::Object(m) => Some(Value::Object(
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), omit_empty(v)?)))
                .collect(),
        )),
        Value::Array(a) => Some(Value::Array(
            a.iter()
                .map(|v| omit_empty(v).unwrap_or(Value::Null))
                .collect(),
        )),
        v => Some(v.clone()),
    }
}

/// The standalone defaults are KubeVirt's: the VMI `convert` converts
/// has the fields KubeVirt's defaulting gave the reference's VMI
/// (`<name>.vmi.json`), for the fields conversion reads that defaulting
/// sets: architecture, machine type, CPU topology, model and maximum,
/// guest memory and its maximum, firmware UUID and serial, UID,
/// interfaces and networks.
#[test]
fn standalone_defaults_match_kubevirts_defaulted_vmi() {
    let recorded = recorded_inputs();
    let pointers = [
        "/metadata/uid",
        "/spec/architecture",
        "/spec/domain/machine/type",
        "/spec/domain/cpu/sockets",
        "/spec/domain/cpu/cores",
        "/spec/domain/cpu/threads",
        "/spec/domain/cpu/maxSockets",
        "/spec/domain/cpu/model",
        "/spec/domain/memory/guest",
        "/spec/domain/memory/maxGuest",
        "/spec/domain/firmware/uuid",
        "/spec/domain/firmware/serial",
        "/spec/domain/devices/interfaces",
        "/spec/networks",
    ];
    let mut report = Vec::new();
    let mut compared = 0;
    for strategy in [VmRolloutStrategy::Stage, VmRolloutStrategy::LiveUpdate] {
        for name in references(strategy_dir(strategy)) {
            let (input, _) = &recorded[&name];
            let theirs: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(
                    reference_dir()
                        .join(strategy_dir(strategy))
                        .join(format!("{name}.vmi.json")),
                )
                .unwrap(),
            )
            .unwrap();
            let cluster = ClusterDefaults {
                vm_rollout_strategy: strategy,
            };
            let (mut vmi, _) =
                api::load_standalone(&std::fs::read(input).unwrap(), Arch::Amd64, &cluster)
                    .unwrap();
            api::defaults::fill_missing_uid(&mut vmi);
            let ours = serde_json::to_value(&vmi).unwrap();
            for p in pointers {
                let (a, b) = (
                    ours.pointer(p).and_then(omit_empty),
                    theirs.pointer(p).and_then(omit_empty),
                );
                compared += 1;
                if a != b {
                    report.push(format!(
                        "{}/{name} {p}: ours {a:?}, KubeVirt's {b:?}",
                        strategy_dir(strategy)
                    ));
                }
            }
        }
    }
    assert!(compared >= 74 * 14, "only {compared} fields compared");
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// A VirtualMachine gets the VM mutator's firmware serial (derived, so a
/// re-run keeps it), written as KubeVirt writes `firmware.serial`: the
/// SMBIOS system serial; a VMI gets none.
#[test]
fn a_virtual_machine_gets_a_stable_firmware_serial() {
    let dir = tempfile::tempdir().unwrap();
    let vm = dir.path().join("vm.yaml");
    std::fs::write(
        &vm,
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: vm1, namespace: ns}\nspec:\n  template:\n    spec:\n      domain:\n        memory: {guest: 64Mi}\n",
    )
    .unwrap();
    let serial = || {
        let out = run::output_ok(
            Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
                .arg("convert")
                .arg(&vm)
                .args(["--arch", "amd64", "--allow-emulation"]),
        );
        let xml = String::from_utf8(out.stdout).unwrap();
        xml.split("<entry name=\"serial\">")
            .nth(1)
            .and_then(|s| s.split('<').next())
            .unwrap_or_else(|| panic!("no SMBIOS serial in {xml}"))
            .to_owned()
    };
    let first = serial();
    assert!(uuid_like(&first), "{first}");
    assert_eq!(serial(), first);
    let vmi = repo().join("tests/data/examples/vmi-sata.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
        .arg("convert")
        .arg(&vmi)
        .args(["--arch", "amd64", "--allow-emulation"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("<entry name=\"serial\">"));
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}
