#![allow(clippy::unwrap_used)]
use super::*;

fn vmi(json: &str) -> VirtualMachineInstance {
    serde_json::from_str(json).unwrap()
}

/// virt-handler's JSON (Go field names, the quantity as a string) decodes
/// field by field; Go's decoder is case-insensitive and ignores unknown
/// keys, and so is this one.
#[test]
fn options_decode_as_go_does() {
    let o = MigrationOptions::parse(
        br#"{"Bandwidth":"64Mi","ProgressTimeout":150,"CompletionTimeoutPerGiB":800,
            "UnsafeMigration":false,"AllowAutoConverge":true,"AllowPostCopy":false,
            "ParallelMigrationThreads":4,"AllowWorkloadDisruption":true,"Unknown":1}"#,
    )
    .unwrap();
    assert_eq!(o.bandwidth_mib().unwrap(), 64);
    assert_eq!(o.progress_timeout, 150);
    assert_eq!(o.completion_timeout_per_gib, 800);
    assert!(o.allow_auto_converge && o.allow_workload_disruption && !o.unsafe_migration);
    assert_eq!(o.parallel_connections(), Some(4));
    let lower = MigrationOptions::parse(br#"{"progresstimeout":5,"bandwidth":"0"}"#).unwrap();
    assert_eq!(lower.progress_timeout, 5);
    assert_eq!(lower.bandwidth_mib().unwrap(), 0);
    assert_eq!(
        MigrationOptions::parse(b"{}").unwrap(),
        MigrationOptions::default()
    );
}

#[test]
fn options_errors_are_kubevirts_words() {
    let e = MigrationOptions::parse(b"").unwrap_err();
    assert_eq!(e, MigrationError::NoOptions);
    assert_eq!(e.to_string(), NO_OPTIONS);
    assert_eq!(e.field(), None);
    let e = MigrationOptions::parse(b"{not json").unwrap_err();
    assert!(matches!(e, MigrationError::OptionsSyntax { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!("{BAD_OPTIONS}: ")),
        "{e}"
    );
    let e = MigrationOptions::parse(br#"{"ProgressTimeout":"soon"}"#).unwrap_err();
    assert_eq!(e.field(), Some("ProgressTimeout"));
    assert_eq!(
        e.to_string(),
        format!("{BAD_OPTIONS}: ProgressTimeout: \"soon\" is not an int64")
    );
    let e = MigrationOptions::parse(br#"{"allowPostCopy":1}"#).unwrap_err();
    assert_eq!(e.field(), Some("AllowPostCopy"));
    assert!(
        e.to_string().ends_with("AllowPostCopy: 1 is not a bool"),
        "{e}"
    );
    let e = MigrationOptions::parse(br#"{"Bandwidth":"12XB"}"#).unwrap_err();
    assert_eq!(e.field(), Some("Bandwidth"));
    assert!(
        e.to_string()
            .starts_with(&format!("{BAD_OPTIONS}: Bandwidth: ")),
        "{e}"
    );
    let e = MigrationOptions::parse(br#"{"Bandwidth":[1]}"#).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("Bandwidth: a JSON array is not a quantity"),
        "{e}"
    );
    let e = MigrationOptions::parse(br#"{"ParallelMigrationThreads":-1}"#).unwrap_err();
    assert_eq!(e.field(), Some("ParallelMigrationThreads"));
    assert!(e.to_string().ends_with("-1 is not a uint"), "{e}");
    // A long value is cut in the message.
    let long = format!(r#"{{"ProgressTimeout":"{}"}}"#, "x".repeat(10_000));
    let e = MigrationOptions::parse(long.as_bytes()).unwrap_err();
    assert!(e.to_string().len() < BAD_OPTIONS.len() + 200, "{e}");
    let e = MigrationOptions::parse(b"[1]").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{BAD_OPTIONS}: the options are a JSON array, not an object")
    );
    let neg = MigrationOptions::parse(br#"{"Bandwidth":"-1Mi"}"#).unwrap();
    let e = neg.bandwidth_mib().unwrap_err();
    assert_eq!(e.field(), Some("Bandwidth"));
    assert_eq!(
        e.to_string(),
        "Bandwidth: Memory size '-1Mi' must be greater than or equal to 0"
    );
}

/// KubeVirt's QuantityToMebiByte: 0 stays 0, below 1 MiB is 1, else MiB
/// rounded half up.
#[test]
fn bandwidth_rounds_as_kubevirt() {
    let mib = |s: &str| {
        MigrationOptions::parse(format!(r#"{{"Bandwidth":"{s}"}}"#).as_bytes())
            .unwrap()
            .bandwidth_mib()
            .unwrap()
    };
    assert_eq!(mib("0"), 0);
    assert_eq!(mib("1"), 1);
    assert_eq!(mib("1Mi"), 1);
    assert_eq!(mib("1572863"), 1); // 1.4999 MiB
    assert_eq!(mib("1572864"), 2); // 1.5 MiB
    assert_eq!(mib("1G"), 954);
}

#[test]
fn proxy_paths_are_virt_handlers() {
    assert_eq!(
        proxy_socket("/var/run/kubevirt", "u1", 0),
        "/var/run/kubevirt/migrationproxy/u1-source.sock"
    );
    assert_eq!(
        proxy_socket("/var/run/kubevirt/", "u1", DIRECT_MIGRATION_PORT),
        "/var/run/kubevirt/migrationproxy/u1-49152-source.sock"
    );
    assert_eq!(
        destination_uri("/var/run/kubevirt", "u1", false),
        "qemu+unix:///system?socket=/var/run/kubevirt/migrationproxy/u1-source.sock"
    );
    assert_eq!(
        destination_uri("/var/run/kubevirt", "u1", true),
        "qemu+unix:///session?socket=/var/run/kubevirt/migrationproxy/u1-source.sock"
    );
}

#[test]
fn migration_state_reads_kubevirts_fields() {
    let v = vmi(r#"{"metadata":{"name":"a","uid":"u1"},"status":{}}"#);
    let e = MigrationState::of(&v).unwrap_err();
    assert_eq!(e, MigrationError::NoMigrationState);
    assert_eq!(e.to_string(), NO_MIGRATION_STATE);
    let v = vmi(r#"{"metadata":{"name":"a"}}"#);
    assert_eq!(
        MigrationState::of(&v).unwrap_err(),
        MigrationError::NoMigrationState
    );
    let v = vmi(
        r#"{"metadata":{"name":"a","uid":"u1"},"status":{"migrationMethod":"BlockMigration",
        "migrationTransport":"Unix","migrationState":{"migrationUID":"m1","targetPod":"p2",
        "targetState":{"virtualMachineInstanceUID":"u2","domainName":"b","domainNamespace":"ns2"}}}}"#,
    );
    let s = MigrationState::of(&v).unwrap();
    assert_eq!(s.migration_uid, "m1");
    assert_eq!(s.target_vmi_uid.as_deref(), Some("u2"));
    assert_eq!(s.target_domain, Some(("b".into(), "ns2".into())));
    assert_eq!(s.target_pod.as_deref(), Some("p2"));
    assert!(s.block_migration && s.unix_transport && !s.migrated_volumes);
    // The source state's migration UID wins (decentralized migration).
    let v = vmi(
        r#"{"metadata":{"name":"a"},"status":{"migrationState":{"migrationUID":"m1",
        "sourceState":{"migrationUID":"m0"}}}}"#,
    );
    assert_eq!(MigrationState::of(&v).unwrap().migration_uid, "m0");
    let v = vmi(r#"{"metadata":{"name":"a"},"status":{"migrationState":{"migrationUid":7}}}"#);
    let e = MigrationState::of(&v).unwrap_err();
    assert_eq!(e.field(), Some("status.migrationState.migrationUid"));
    assert_eq!(
        e.to_string(),
        "status.migrationState.migrationUid: a JSON number is not a string"
    );
}

/// virt-handler sends KubeVirt's VMI as Go marshals it: the migration
/// state's UID is `migrationUid` (its JSON tag); Go's decoder also takes
/// another case of it, the exact key first.
#[test]
fn the_migration_uid_is_read_under_kubevirts_json_name() {
    let uid = |ms: &str| {
        let v = vmi(&format!(
            r#"{{"metadata":{{"name":"a"}},"status":{{"migrationState":{ms}}}}}"#
        ));
        MigrationState::of(&v).unwrap().migration_uid
    };
    assert_eq!(uid(r#"{"migrationUid":"m1","targetPod":"p"}"#), "m1");
    assert_eq!(uid(r#"{"migrationUID":"m2"}"#), "m2");
    assert_eq!(uid(r#"{"MIGRATIONUID":"m3"}"#), "m3");
    assert_eq!(uid(r#"{"migrationuid":"x","migrationUid":"m4"}"#), "m4");
    assert_eq!(uid(r#"{"targetPod":"p"}"#), "");
}

const DOMAIN: &str = r#"<domain type='qemu'><name>ns1_a</name><memory unit='b'>134217728</memory><vcpu placement='static'>1</vcpu><os><type arch='x86_64' machine='q35'>hvm</type></os>
<devices>
<disk type='file' device='disk'><source file='/var/run/kubevirt-ephemeral-disks/disk-data/containerdisk/disk.qcow2'/><target dev='vda' bus='virtio'/><alias name='ua-containerdisk'/></disk>
<disk type='file' device='disk'><source file='/var/run/kubevirt-private/vmi-disks/claim/disk.img'/><target dev='vdb' bus='virtio'/><alias name='ua-claim'/></disk>
<disk type='file' device='disk'><source file='/var/run/kubevirt-ephemeral-disks/cloud-init-data/ns1/a/noCloud.iso'/><target dev='vdc' bus='virtio'/><readonly/><alias name='ua-cloudinit'/></disk>
<disk type='file' device='disk'><source file='/var/run/kubevirt-private/secret-disks/ro.iso'/><target dev='vdd' bus='virtio'/><readonly/><alias name='ua-hostro'/></disk>
<disk type='file' device='cdrom'><source file='/x.iso'/><target dev='sda' bus='sata'/><readonly/><alias name='ua-cd'/></disk>
<disk type='file' device='disk'><source file='/var/run/kubevirt-private/empty/disk.qcow2'/><target dev='vde' bus='virtio'/><alias name='ua-scratch'/></disk>
</devices><uuid>u1</uuid><sysinfo type='smbios'><system><entry name='uuid'>u1</entry></system></sysinfo></domain>"#;

/// KubeVirt's getDiskTargetsForMigration: the container disk and the
/// cloud-init disk (generated, even read-only) and a local scratch disk;
/// not the claim (shared), not another read-only disk, not a cdrom.
#[test]
fn disks_to_copy_as_kubevirt() {
    let v = vmi(
        r#"{"metadata":{"name":"a","namespace":"ns1"},"spec":{"domain":{"devices":{}},"volumes":[
        {"name":"containerdisk","containerDisk":{"image":"x"}},
        {"name":"claim","persistentVolumeClaim":{"claimName":"c"}},
        {"name":"cloudinit","cloudInitNoCloud":{"userData":"x"}},
        {"name":"hostro","hostDisk":{"path":"/p","type":"Disk"}},
        {"name":"cd","hostDisk":{"path":"/q","type":"Disk"}},
        {"name":"scratch","emptyDisk":{"capacity":"1Gi"}}]}}"#,
    );
    let dom = domain::Domain::from_xml(DOMAIN).unwrap();
    assert_eq!(disks_to_copy(&v, &dom), ["vda", "vdc", "vde"]);
    let (shared, generated) = classify_volumes(&v);
    assert_eq!(shared.into_iter().collect::<Vec<_>>(), ["claim"]);
    assert_eq!(
        generated.into_iter().collect::<Vec<_>>(),
        ["cloudinit", "containerdisk"]
    );
}

/// The namespace in disk paths (first occurrence, disks only) and then
/// every occurrence of the UID change for the target; nothing else does.
#[test]
fn destination_xml_rewrites_namespace_and_uid() {
    let state = MigrationState {
        target_vmi_uid: Some("u2".into()),
        target_namespace: Some("ns2".into()),
        ..MigrationState::default()
    };
    let out = destination_xml(DOMAIN, "ns1", "u1", &state);
    assert!(out.contains("cloud-init-data/ns2/a/noCloud.iso"), "{out}");
    assert!(
        out.contains("<name>ns1_a</name>"),
        "the name is DestName's: {out}"
    );
    assert!(
        out.contains("<uuid>u2</uuid>") && !out.contains("u1"),
        "{out}"
    );
    // Without a target state the XML is libvirt's, unchanged.
    assert_eq!(
        destination_xml(DOMAIN, "ns1", "u1", &MigrationState::default()),
        DOMAIN
    );
}

#[test]
fn data_size_counts_started_gigabytes() {
    let v = vmi(
        r#"{"metadata":{"name":"a"},"spec":{"domain":{"devices":{},"resources":{"requests":{"memory":"128Mi"}}}}}"#,
    );
    assert_eq!(migration_data_gb(&v, None), 1);
    assert_eq!(migration_data_gb(&v, Some(2_000_000_000)), 3);
    let v = vmi(
        r#"{"metadata":{"name":"a"},"spec":{"domain":{"devices":{},"memory":{"guest":"2G"},"resources":{"requests":{"memory":"128Mi"}}}}}"#,
    );
    assert_eq!(migration_data_gb(&v, None), 2);
}

/// The link refresh finds interfaces by their `ua-` alias and sets their
/// link down, replacing an existing `<link>`.
#[test]
fn link_refresh_rewrites_the_named_interfaces() {
    let xml = "<domain><devices>\n<interface type='ethernet'><mac address='02:00:00:00:00:01'/><alias name='ua-red'/></interface>\n<interface type=\"ethernet\"><link state=\"up\"/><alias name=\"ua-blue\"/></interface>\n<interface type='ethernet'><alias name='ua-green'/></interface></devices></domain>";
    let names: BTreeSet<String> = ["red".to_owned(), "blue".to_owned()].into();
    let found = interfaces_by_alias(xml, &names);
    assert_eq!(
        found.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["red", "blue"]
    );
    assert_eq!(
        link_down(found[0].1),
        "<interface type='ethernet'><mac address='02:00:00:00:00:01'/><alias name='ua-red'/><link state='down'/>\n</interface>"
    );
    assert_eq!(
        link_down(found[1].1),
        "<interface type=\"ethernet\"><link state='down'/><alias name=\"ua-blue\"/></interface>"
    );
    assert!(interfaces_by_alias(xml, &BTreeSet::new()).is_empty());
}

/// KubeVirt's in-flight rules, by the clock: progress resets the stall
/// timer; no progress for longer than the progress timeout aborts as
/// stuck; past the budget it aborts, or, with disruption allowed, switches
/// to post-copy or pauses (doubling the budget) first; post-copy is never
/// aborted.
#[test]
fn monitor_steps_follow_kubevirts_rules() {
    use std::time::{Duration, Instant};
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let opts = MigrationOptions {
        progress_timeout: 5,
        ..MigrationOptions::default()
    };
    // Progressing: remaining goes down every look.
    let mut p = Progress::new(t0, 0);
    for (s, rem) in [(1, 100), (3, 90), (6, 80), (9, 70)] {
        p.remaining = rem;
        assert_eq!(p.step(at(s), "PreCopy", &opts), Step::Wait, "at {s}s");
    }
    // Stalled from 9 s: more than 5 s without progress aborts as stuck.
    p.remaining = 70;
    assert_eq!(p.step(at(14), "PreCopy", &opts), Step::Wait);
    p.remaining = 75;
    assert_eq!(p.step(at(15), "PreCopy", &opts), Step::AbortStuck(6));
    // Post-copy: never aborted.
    assert_eq!(p.step(at(60), "PostCopy", &opts), Step::Wait);

    // A 10 s budget: aborted past it without disruption.
    let budget = MigrationOptions {
        progress_timeout: 0,
        ..MigrationOptions::default()
    };
    let mut p = Progress::new(t0, 10);
    p.remaining = 100;
    assert_eq!(p.step(at(10), "PreCopy", &budget), Step::Wait);
    p.remaining = 99;
    assert_eq!(p.step(at(11), "PreCopy", &budget), Step::AbortTimeout(10));
    // With disruption: post-copy when allowed ...
    let post = MigrationOptions {
        allow_workload_disruption: true,
        allow_post_copy: true,
        ..budget.clone()
    };
    let mut p = Progress::new(t0, 10);
    p.remaining = 100;
    assert_eq!(p.step(at(11), "PreCopy", &post), Step::StartPostCopy);
    // ... else a pause, which doubles the budget; past that, an abort.
    let pause = MigrationOptions {
        allow_workload_disruption: true,
        ..budget
    };
    let mut p = Progress::new(t0, 10);
    p.remaining = 100;
    assert_eq!(p.step(at(11), "PreCopy", &pause), Step::Pause);
    assert_eq!(p.acceptable, 20);
    p.remaining = 50;
    assert_eq!(p.step(at(20), "Paused", &pause), Step::Wait);
    p.remaining = 40;
    assert_eq!(p.step(at(21), "Paused", &pause), Step::AbortTimeout(20));
}

/// What counts as progress is KubeVirt's `processInflightMigration` to the
/// letter: the data remaining lower than at the previous look (not the
/// lowest seen), and a zero remaining (the watermark's "none yet"), as
/// libvirt reports during a block migration's disk copy, always counts.
#[test]
fn progress_is_a_drop_since_the_previous_look_and_zero_counts() {
    use std::time::{Duration, Instant};
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let opts = MigrationOptions {
        progress_timeout: 5,
        ..MigrationOptions::default()
    };
    let mut p = Progress::new(t0, 0);
    // 50 at 1 s, then up to 80 (dirtied memory) and down to 70 at 10 s:
    // above the lowest seen, yet below the previous look: progress.
    for (s, rem) in [(1, 50), (2, 80), (10, 70)] {
        p.remaining = rem;
        assert_eq!(p.step(at(s), "PreCopy", &opts), Step::Wait, "at {s}s");
    }
    assert_eq!(p.last_progress, at(10));
    p.remaining = 70;
    assert_eq!(p.step(at(16), "PreCopy", &opts), Step::AbortStuck(6));
    // Zero remaining for a minute: progress at every look, never stuck.
    let mut p = Progress::new(t0, 0);
    for s in 1..=60 {
        p.remaining = 0;
        assert_eq!(p.step(at(s), "PreCopy", &opts), Step::Wait, "at {s}s");
    }
}

/// virt-handler's `targetCPUSet` and `targetNodeTopology` (dedicated
/// CPUs): read, bounded, and checked as KubeVirt checks them before the
/// destination XML is made.
#[test]
fn target_cpuset_and_topology_are_read_and_checked() {
    let with = |ms: &str| {
        MigrationState::of(&vmi(&format!(
            r#"{{"metadata":{{"name":"a"}},"spec":{{"domain":{{"devices":{{}}}}}},"status":{{"migrationState":{{"migrationUID":"m",{ms}}}}}}}"#
        )))
    };
    let s = with(r#""targetCPUSet":[3,1],"targetNodeTopology":"{\"numa_cells\":[]}""#).unwrap();
    assert_eq!(s.target_cpuset, [3, 1]);
    assert_eq!(target_cpus(&s).unwrap(), [3, 1]);
    // Without a topology: Go's json.Unmarshal of "" (KubeVirt's error).
    let s = with(r#""targetCPUSet":[1]"#).unwrap();
    assert_eq!(
        target_cpus(&s).unwrap_err().to_string(),
        "status.migrationState.targetNodeTopology: unexpected end of JSON input"
    );
    let s = with(r#""targetNodeTopology":"{oops""#).unwrap();
    let e = target_cpus(&s).unwrap_err();
    assert_eq!(e.field(), Some("status.migrationState.targetNodeTopology"));
    assert!(e
        .to_string()
        .starts_with("status.migrationState.targetNodeTopology: "));
    // No CPU set: empty (the converter then finds too few CPUs).
    let s = with(r#""targetNodeTopology":"{}""#).unwrap();
    assert!(target_cpus(&s).unwrap().is_empty());
    let e = with(r#""targetCPUSet":[0,-1]"#).unwrap_err();
    assert_eq!(e.field(), Some("status.migrationState.targetCPUSet[1]"));
    assert_eq!(
        e.to_string(),
        "status.migrationState.targetCPUSet[1]: -1 is not a CPU number"
    );
    assert_eq!(
        with(r#""targetCPUSet":"0-3""#).unwrap_err().to_string(),
        "status.migrationState.targetCPUSet: a JSON string is not an array"
    );
    let many = vec!["0"; MAX_TARGET_CPUS + 1].join(",");
    assert!(with(&format!(r#""targetCPUSet":[{many}]"#))
        .unwrap_err()
        .to_string()
        .contains("more than 50000"));
}

/// The destination's `<cputune>` replaces the source's, and nothing else
/// of libvirt's XML changes.
#[test]
fn cputune_is_swapped_for_the_targets() {
    let tune = domain::CpuTune {
        vcpupin: vec![domain::CpuPin {
            vcpu: 0,
            cpuset: "1".into(),
        }],
        ..domain::CpuTune::default()
    }
    .to_xml()
    .unwrap();
    assert_eq!(tune, r#"<cputune><vcpupin vcpu="0" cpuset="1"/></cputune>"#);
    let xml = "<domain type='qemu'>\n  <vcpu placement='static'>1</vcpu>\n  <cputune>\n    <vcpupin vcpu='0' cpuset='0'/>\n    <emulatorpin cpuset='0'/>\n  </cputune>\n  <cpu/>\n</domain>\n";
    assert_eq!(
        replace_cputune(xml, &tune),
        format!("<domain type='qemu'>\n  <vcpu placement='static'>1</vcpu>\n  {tune}\n  <cpu/>\n</domain>\n")
    );
    assert_eq!(
        replace_cputune("<domain>\n  <cputune/>\n</domain>", &tune),
        format!("<domain>\n  {tune}\n</domain>")
    );
    assert_eq!(
        replace_cputune("<domain>\n</domain>", &tune),
        format!("<domain>\n{tune}\n</domain>")
    );
}
