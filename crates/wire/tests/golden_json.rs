//! The api.Domain JSON of every golden domain is exactly the committed one
//! (`tests/golden/README.md`): the encoder may be restructured, its output
//! may not change unnoticed.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

use domain::Domain;
use serde_json::{json, Value};
use wire::api_domain::{
    domain_json, domain_json_with_metadata, AccessCredentialMetadata, DomainStatus, GracePeriod,
    MemoryDumpMetadata, MigrationMetadata, ObjectMeta, RuntimeMetadata,
};

/// `ObjectMeta.uid` of the per-domain golden files.
const GOLDEN_UID: &str = "a2e4b1c6-golden";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn xml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            xml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "xml") {
            out.push(p);
        }
    }
}

fn domain_of(xml: &Path) -> Domain {
    Domain::from_xml(&std::fs::read_to_string(xml).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", xml.display()))
}

/// Compares `json` with the golden file `path`, or rewrites the file when
/// `WIRE_GOLDEN_UPDATE` is set; returns whether it was rewritten.
fn check(path: &Path, json: &Value) -> bool {
    let got = serde_json::to_string_pretty(json).unwrap() + "\n";
    if std::env::var_os("WIRE_GOLDEN_UPDATE").is_some() {
        std::fs::write(path, &got).unwrap();
        return true;
    }
    let want = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (WIRE_GOLDEN_UPDATE=1 writes it)", path.display()));
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
        let show = |s: &str| {
            s.lines()
                .skip(line.saturating_sub(3))
                .take(7)
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "{}: differs from line {}\n--- golden\n{}\n--- now\n{}",
            path.display(),
            line + 1,
            show(&want),
            show(&got)
        );
    }
    false
}

#[test]
fn every_golden_domain_encodes_to_its_committed_json() {
    let mut files = Vec::new();
    xml_files(&golden_dir(), &mut files);
    files.sort();
    // 45 converted example, corpus and case VMIs, the large one and
    // libvirt's live XML.
    assert!(files.len() >= 47, "only {} golden domains", files.len());
    let mut rewritten = 0;
    for xml in &files {
        let dom = domain_of(xml);
        let (namespace, name) = dom
            .name
            .split_once('_')
            .unwrap_or_else(|| panic!("{}: domain name {:?}", xml.display(), dom.name));
        let meta = ObjectMeta {
            name: name.into(),
            namespace: namespace.into(),
            uid: GOLDEN_UID.into(),
            deletion_timestamp: None,
        };
        let status = DomainStatus {
            status: "Running".into(),
            reason: "Unknown".into(),
            ..DomainStatus::default()
        };
        let json = domain_json(&meta, Some(&dom), &status);
        rewritten += usize::from(check(&xml.with_extension("json"), &json));
    }
    assert_eq!(
        rewritten, 0,
        "WIRE_GOLDEN_UPDATE: rewrote {rewritten} files; review and commit them"
    );
}

fn identity() -> ObjectMeta {
    ObjectMeta {
        name: "vmi".into(),
        namespace: "ns".into(),
        uid: "u-1".into(),
        deletion_timestamp: Some("2025-01-01T00:00:00Z".into()),
    }
}

#[test]
fn the_gone_domain_encodes_to_its_committed_json() {
    let status = DomainStatus {
        status: "NoState".into(),
        reason: "NonExistent".into(),
        ..DomainStatus::default()
    };
    let json = domain_json(&identity(), None, &status);
    assert!(
        !check(&golden_dir().join("deleted.json"), &json),
        "rewritten"
    );
}

#[test]
fn agent_status_and_runtime_metadata_encode_to_their_committed_json() {
    let runtime = RuntimeMetadata {
        uid: Some("u-2".into()),
        grace_period: Some(GracePeriod {
            deletion_grace_period_seconds: 30,
            deletion_timestamp: Some("2025-01-01T00:00:01Z".into()),
            marked_for_graceful_shutdown: Some(true),
        }),
        migration: Some(MigrationMetadata {
            uid: "m".into(),
            start_timestamp: Some("2025-01-01T00:00:02Z".into()),
            end_timestamp: None,
            failed: true,
            failure_reason: "r".into(),
            abort_status: "Aborting".into(),
            mode: "PreCopy".into(),
        }),
        access_credential: Some(AccessCredentialMetadata {
            succeeded: true,
            message: "ok".into(),
        }),
        memory_dump: Some(MemoryDumpMetadata {
            file_name: "f.memory.dump".into(),
            start_timestamp: Some("2025-01-01T00:00:03Z".into()),
            end_timestamp: Some("2025-01-01T00:00:04Z".into()),
            completed: true,
            failed: false,
            failure_reason: String::new(),
        }),
        backup: None,
    };
    // Both spellings of the agent's values, and values of the wrong type
    // (a number where a string belongs), which count as empty.
    let status = DomainStatus {
        status: "Running".into(),
        reason: "Unknown".into(),
        interfaces: Some(vec![
            json!({"Mac": "02:00:00:00:00:01", "Ip": "10.0.2.2",
                   "IPs": ["10.0.2.2", "fd10::2"], "InterfaceName": "eth0"}),
            json!({"mac": "02:00:00:00:00:02", "ipAddress": "", "ipAddresses": [],
                   "interfaceName": "eth1"}),
            json!({"Mac": 7}),
        ]),
        os_info: Some(json!({"name": "Debian GNU/Linux", "KernelRelease": "6.1",
                             "id": "debian", "Machine": 5})),
        fs_freeze_status: "frozen".into(),
    };
    let dom = domain_of(&golden_dir().join("large.xml"));
    let json = domain_json_with_metadata(&identity(), Some(&dom), &status, &runtime);
    assert!(
        !check(&golden_dir().join("large-status-metadata.json"), &json),
        "rewritten"
    );
}
