//! Golden files of this launcher's own conversion.
//!
//! `tests/data/golden/<arch>/<input>.xml` is the domain XML this launcher
//! makes of every KubeVirt example (`tests/data/examples`), corpus VMI
//! (`tests/data/corpus`) and real-world case (`tests/data/cases`) for each
//! architecture (amd64, arm64, ppc64le, s390x); `<input>.err` is the one-line
//! refusal instead, for an input that architecture refuses. The test
//! converts each input the way `virt-launcher convert --arch <arch>` does
//! (standalone defaults = the cluster's, [`api::load_standalone`], default
//! rollout strategy LiveUpdate), in a fixed context so that the files do not
//! depend on the machine: KVM, pod cpuset 0-1, one host NUMA cell with CPUs
//! 0 and 1, firmware files not probed (KubeVirt's names assumed, as for
//! another host), claim facts from the VMI's status and SR-IOV addresses
//! from the input's sibling `<input>.network-info.json`. The files must match
//! byte for byte; a file without an input, or an input without its file,
//! fails too.
//!
//! A change of output made on purpose is recorded by regenerating the files:
//! `GOLDEN_UPDATE=1 cargo nextest run -p virt-launcher --test golden` (see
//! DEVELOPERS.md), then reviewing `git diff tests/data/golden`. Whether the
//! output is right is tested elsewhere: `convert_cli` (libvirt's schema),
//! `parity` (KubeVirt's own converter), the e2e `define` tests (libvirt).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    missing_docs
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use api::cluster::ClusterDefaults;
use api::Arch;
use converter::{ConvertContext, VirtType};

const ARCHES: [Arch; 4] = [Arch::Amd64, Arch::Arm64, Arch::Ppc64le, Arch::S390x];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_dir(arch: Arch) -> PathBuf {
    repo().join("tests/data/golden").join(arch.to_string())
}

/// Every input VMI by file stem (the golden files' name).
fn inputs() -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for dir in [
        "tests/data/examples",
        "tests/data/corpus",
        "tests/data/cases",
    ] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
                if let Some(other) = out.insert(stem.clone(), p.clone()) {
                    panic!(
                        "{} and {} would share the golden file {stem}",
                        other.display(),
                        p.display()
                    );
                }
            }
        }
    }
    out
}

/// The fixed host facts of the golden files (see the module's header).
fn context(
    vmi: &api::VirtualMachineInstance,
    input: &Path,
    arch: Arch,
) -> Result<ConvertContext, String> {
    let mut ctx = ConvertContext::new(arch, VirtType::Kvm);
    ctx.pod_cpuset = Some(vec![0, 1]);
    ctx.host_numa = Some(vec![converter::numa::HostNumaCell {
        id: 0,
        cpus: vec![0, 1],
    }]);
    ctx.volumes_discard_ignore =
        storage::pvc::preallocated_volumes(vmi).map_err(|e| e.to_string())?;
    ctx.prepared.block_volumes =
        storage::pvc::block_mode_volumes(vmi).map_err(|e| e.to_string())?;
    let info = input.with_extension("network-info.json");
    if info.exists() {
        let pci = network::sriov::read_network_info(&info, false, std::time::Duration::ZERO)
            .map_err(|e| format!("--network-info {e}"))?;
        // The file's name as the test data directory spells it, so that a
        // refusal naming it is the same on every machine.
        let name = info
            .strip_prefix(repo())
            .unwrap_or(&info)
            .display()
            .to_string();
        ctx.sriov_pci = network::sriov::host_addresses(vmi, pci.as_ref(), &name, None)
            .map_err(|e| e.to_string())?;
    }
    Ok(ctx)
}

/// What `convert --arch <arch>` makes of `input` in the golden context:
/// `Ok(xml)` or `Err(refusal)`, with the checks `convert` runs after the
/// converter.
fn convert(input: &Path, arch: Arch) -> Result<String, String> {
    let bytes = std::fs::read(input).unwrap();
    let cluster = ClusterDefaults::default();
    let (mut vmi, _) = api::load_standalone(&bytes, arch, &cluster).map_err(|e| e.to_string())?;
    api::defaults::fill_missing_uid(&mut vmi);
    let ctx = context(&vmi, input, arch)?;
    let dom = converter::convert(&vmi, &ctx).map_err(|e| e.to_string())?;
    storage::cloudinit::check_inline(&vmi).map_err(|e| e.to_string())?;
    network::phase2::check_spec(&vmi).map_err(|e| e.to_string())?;
    Ok(dom.to_xml().unwrap())
}

/// Where two texts part: `, line N: -OLD +NEW`.
fn first_difference(old: &str, new: &str) -> String {
    let mut a = old.lines();
    let mut b = new.lines();
    for n in 1.. {
        match (a.next(), b.next()) {
            (None, None) => break,
            (x, y) if x == y => {}
            (x, y) => {
                return format!(
                    ", line {n}: -{} +{}",
                    x.unwrap_or("(end)").trim(),
                    y.unwrap_or("(end)").trim()
                )
            }
        }
    }
    String::new()
}

#[test]
fn conversion_matches_the_golden_files() {
    let update = std::env::var_os("GOLDEN_UPDATE").is_some_and(|v| v == "1");
    let inputs = inputs();
    assert!(inputs.len() >= 40, "only {} inputs", inputs.len());
    let mut mismatches = Vec::new();
    let mut written = Vec::new();
    let mut converted = 0;
    for arch in ARCHES {
        let dir = golden_dir(arch);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let mut expected = std::collections::BTreeSet::new();
        for (stem, input) in &inputs {
            let (file, text) = match convert(input, arch) {
                Ok(xml) => {
                    converted += 1;
                    (format!("{stem}.xml"), xml)
                }
                Err(e) => (format!("{stem}.err"), format!("{e}\n")),
            };
            let path = dir.join(&file);
            expected.insert(file.clone());
            let old = std::fs::read_to_string(&path).ok();
            if old.as_deref() == Some(text.as_str()) {
                continue;
            }
            if update {
                std::fs::write(&path, &text).unwrap();
                written.push(format!("{arch}/{file}"));
            } else if old.is_none() {
                mismatches.push(format!("{arch}/{file}: missing"));
            } else {
                mismatches.push(format!(
                    "{arch}/{file}: differs{}",
                    first_difference(old.as_deref().unwrap_or_default(), &text)
                ));
            }
        }
        // Files of inputs that no longer exist, or of the other outcome.
        for e in std::fs::read_dir(&dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if !expected.contains(&name) {
                if update {
                    std::fs::remove_file(dir.join(&name)).unwrap();
                    written.push(format!("{arch}/{name} (removed)"));
                } else {
                    mismatches.push(format!("{arch}/{name}: no such output"));
                }
            }
        }
    }
    for w in &written {
        eprintln!("GOLDEN_UPDATE: wrote {w}");
    }
    // The examples, corpus VMIs and cases 008 and 020 convert on amd64 at least.
    assert!(converted >= 30, "only {converted} conversions");
    assert!(
        mismatches.is_empty(),
        "{} golden files differ from this launcher's output (if the change is meant, \
         regenerate them with GOLDEN_UPDATE=1 and review the diff):\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
