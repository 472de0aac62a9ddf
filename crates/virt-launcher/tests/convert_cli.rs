//! `virt-launcher convert`: every KubeVirt example and every corpus VMI, on
//! every architecture, either converts to XML that libvirt's own schema
//! accepts (`virt-xml-validate`, through `--validate`) or is refused with
//! exit code 2 and a one-line error naming a field.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    missing_docs
)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn inputs() -> Vec<PathBuf> {
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

fn convert(file: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
        .arg("convert")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn virt_xml_validate_is_installed() {
    let ok = Command::new("virt-xml-validate")
        .arg("--help")
        .output()
        .is_ok();
    assert!(
        ok,
        "virt-xml-validate (libvirt-clients) is required: run `bash .ci/install`"
    );
}

#[test]
fn every_input_on_every_arch_validates_or_is_refused_by_field() {
    let mut validated = 0;
    let mut refused = Vec::new();
    for file in inputs() {
        for arch in ["amd64", "arm64", "ppc64le", "s390x"] {
            let (code, xml, err) = convert(&file, &["--arch", arch, "--validate"]);
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            match code {
                0 => {
                    assert!(
                        xml.starts_with("<domain type=\"kvm\">"),
                        "{name}/{arch}: {xml}"
                    );
                    validated += 1;
                }
                2 => {
                    let line = err.trim_end();
                    // The corpus exercises built features: it must convert on amd64.
                    let corpus = file.parent().is_some_and(|d| d.ends_with("corpus"));
                    assert!(
                        !(corpus && arch == "amd64"),
                        "corpus VMI {name} is refused on amd64: {line}"
                    );
                    assert_eq!(
                        line.lines().count(),
                        1,
                        "{name}/{arch}: not one line: {line}"
                    );
                    assert!(
                        line.starts_with("virt-launcher: spec.")
                            || line.starts_with("virt-launcher: metadata."),
                        "{name}/{arch}: {line}"
                    );
                    assert!(!line.contains("schema rejects"), "{name}/{arch}: {line}");
                    refused.push(format!("{name}/{arch}"));
                }
                _ => panic!("{name}/{arch}: exit {code}: {err}"),
            }
        }
    }
    // 6 examples + 4 corpus VMIs + cases 008 and 020 convert on amd64 at least.
    assert!(
        validated >= 30,
        "only {validated} conversions validated; refused: {refused:?}"
    );
}

#[test]
fn emulation_flags_choose_the_domain_type() {
    let f = repo().join("tests/data/examples/vmi-ephemeral.yaml");
    let (code, xml, _) = convert(&f, &["--use-emulation"]);
    assert_eq!(code, 0);
    assert!(xml.starts_with("<domain type=\"qemu\">"), "{xml}");
    let (code, xml, _) = convert(&f, &["--arch", "arm64"]);
    assert_eq!(code, 0);
    assert!(xml.contains("arch=\"aarch64\" machine=\"virt\""), "{xml}");
}

#[test]
fn refusals_are_one_line_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("kind: Pod\napiVersion: kubevirt.io/v1\nmetadata: {name: a}\n", "kind: \"Pod\""),
        ("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec: {domain: {memory: {guest: 1x}}}\n", "spec.domain.memory.guest: \"1x\" is not a quantity"),
        ("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec: {domain: {}}\n", "spec.domain.memory.guest: no guest memory"),
        ("\u{0}\u{1}garbage", "malformed document"),
    ];
    for (i, (doc, expect)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("{i}.yaml"));
        std::fs::write(&f, doc).unwrap();
        let (code, out, err) = convert(&f, &[]);
        assert_eq!(code, 2, "{doc}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(expect), "{expect:?} not in {err}");
    }
    let (code, _, err) = convert(Path::new("/nonexistent.yaml"), &[]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = convert(
        &repo().join("tests/data/examples/vmi-sata.yaml"),
        &["--arch", "riscv64"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown architecture \"riscv64\""), "{err}");
}
