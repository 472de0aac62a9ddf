//! The VMI inputs every conversion test walks, shared by `convert_cli`
//! and the e2e `define` tests.

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every YAML input under tests/data/{examples,corpus,cases}, sorted.
pub fn inputs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in [
        "tests/data/examples",
        "tests/data/corpus",
        "tests/data/cases",
    ] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// `--network-info FILE` for an input with a sibling
/// `<name>.network-info.json` (the SR-IOV host addresses a pod's downward
/// API file would give), else nothing. libvirt defines a `managed='no'` PCI
/// hostdev whose device does not exist on this host: it reads the device
/// only when the domain starts.
pub fn host_facts(file: &Path) -> Vec<String> {
    let info = file.with_extension("network-info.json");
    if info.exists() {
        vec!["--network-info".into(), info.display().to_string()]
    } else {
        Vec::new()
    }
}
