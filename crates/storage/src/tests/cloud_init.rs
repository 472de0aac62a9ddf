//! cloud-init ISOs (NoCloud and config drive), read back from the image.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;

use super::*;

fn case_011() -> (String, Vec<u8>) {
    let root = format!("{}/../../tests/data/cases", env!("CARGO_MANIFEST_DIR"));
    (
        fs::read_to_string(format!("{root}/011-nocloud-userdata-base64-and-utf8.yaml")).unwrap(),
        fs::read(format!(
            "{root}/011-nocloud-userdata-base64-and-utf8.user-data"
        ))
        .unwrap(),
    )
}

#[test]
fn case_011_base64_user_data_with_utf8_is_byte_identical_in_a_cidata_iso() {
    let e = env();
    let (doc, expected) = case_011();
    let v = load(&doc);
    let data = cloudinit::read(&v, &e.ctx, &ConfigSources::Pod)
        .unwrap()
        .unwrap();
    cloudinit::generate(&v, &e.ctx, &data, None).unwrap();
    let iso = nocloud_iso(&e, "default", "b64-test");
    let info = isoinfo(&iso);
    assert_eq!(info.volume_id, "cidata");
    assert!(
        info.joliet && info.rock_ridge,
        "Joliet and Rock Ridge expected"
    );
    assert_eq!(
        joliet_names(&iso),
        ["/meta-data", "/network-config", "/user-data"]
    );
    let (_t, x) = extract(&iso);
    let files = tree(&x);
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["meta-data", "network-config", "user-data"]
    );
    assert_eq!(
        files["user-data"].1, expected,
        "user-data must be byte-identical"
    );
    assert_eq!(
        String::from_utf8(files["meta-data"].1.clone()).unwrap(),
        r#"{"instance-id":"9b0d1c2e-3f40-4a51-8b62-7c83d94ea5f6","local-hostname":"b64-test"}"#
    );
    assert_eq!(
        String::from_utf8(files["network-config"].1.clone()).unwrap(),
        "version: 1\nconfig:\n- type: physical\n  name: eth0\n  subnets:\n  - type: dhcp\n"
    );
    // KubeVirt writes the data files 0600 and removes them after the ISO is built.
    assert_eq!(files["user-data"].0, 0o600);
    assert!(!e
        .root
        .join("ephemeral/cloud-init-data/default/b64-test/data")
        .exists());
    assert!(!iso.with_extension("iso.staging").exists());
}

#[test]
fn case_011_bad_base64_and_missing_data_are_refused_without_an_iso() {
    let e = env();
    let (doc, _) = case_011();
    let good = "I2Nsb3VkLWNvbmZpZwpob3N0bmFtZTogcHLDvGZ1bmctdm0Kd3JpdGVfZmlsZXM6Ci0gcGF0aDogL2V0Yy9tb3RkCiAgY29udGVudDogIkdyw7zDn2Ug4oCTIOaXpeacrOiqniDinJNcbiIK";
    for bad in [
        "I2Nsb3VkLWNvbmZpZwo",           // missing padding
        "\"I2Nsb3VkLWNvbmZpZwo=\\n#!\"", // garbage after the data
        "I2Nsb3VkLWNvbmZpZwo_",          // URL-safe alphabet
    ] {
        let v = load(&doc.replace(good, bad));
        let err = storage_err(&e, &v);
        assert!(
            err.starts_with("spec.volumes[1].cloudInitNoCloud.userDataBase64: is not valid base64"),
            "{bad}: {err}"
        );
        assert!(cloudinit::check_inline(&v).is_err(), "{bad}");
        assert!(!nocloud_iso(&e, "default", "b64-test").exists(), "{bad}");
    }
    let empty = doc
        .replace(good, "\"\"")
        .replace("      networkData: |\n        version: 1\n        config:\n        - type: physical\n          name: eth0\n          subnets:\n          - type: dhcp\n", "      userData: \"\"\n      networkData: \"\"\n");
    let err = storage_err(&e, &load(&empty));
    assert_eq!(
        err,
        "spec.volumes[1].cloudInitNoCloud: userDataBase64, userData, networkDataBase64 or networkData is required for a cloud-init data source"
    );
    assert!(!nocloud_iso(&e, "default", "b64-test").exists());
}

#[test]
fn inline_user_data_wins_over_base64_and_go_base64_rules_hold() {
    let (doc, _) = case_011();
    let v = load(&doc.replace(
        "    cloudInitNoCloud:\n",
        "    cloudInitNoCloud:\n      userData: \"#!/bin/sh\\necho raw\\n\"\n",
    ));
    let e = env();
    let d = cloudinit::read(&v, &e.ctx, &ConfigSources::Pod)
        .unwrap()
        .unwrap();
    assert_eq!(d.user_data, b"#!/bin/sh\necho raw\n");
    // Go's StdEncoding ignores line breaks and accepts non-zero trailing bits.
    assert_eq!(cloudinit::decode_base64("aGVs\r\nbG8=").unwrap(), b"hello");
    assert_eq!(cloudinit::decode_base64("aGVsbG9=").unwrap(), b"hello");
    assert!(cloudinit::decode_base64("aGVsbG8").is_err());
    assert!(cloudinit::decode_base64("aGVs bG8=").is_err());
}

#[test]
fn config_drive_has_the_openstack_layout_and_kubevirts_meta_data() {
    let e = env();
    let v = vmi("  - name: cd\n    cloudInitConfigDrive:\n      userData: \"#!/bin/sh\\necho hi\\n\"\n      networkDataBase64: eyJsaW5rcyI6W119\n");
    let mut v = v;
    v.spec.hostname = Some("myhost".into());
    v.metadata
        .annotations
        .insert("kubevirt.io/instancetype-name".into(), "u1.small<&>".into());
    prepare(&v, &e.ctx, &PrepareOptions::default()).unwrap();
    let iso = e
        .root
        .join("ephemeral/cloud-init-data/default/s/configdrive.iso");
    let info = isoinfo(&iso);
    assert_eq!(info.volume_id, "config-2");
    assert!(info.joliet && info.rock_ridge);
    let (_t, x) = extract(&iso);
    let files = tree(&x);
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        [
            "openstack/",
            "openstack/latest/",
            "openstack/latest/meta_data.json",
            "openstack/latest/network_data.json",
            "openstack/latest/user_data",
        ]
    );
    let uuid = v.firmware_uuid().unwrap().to_owned();
    assert_eq!(
        String::from_utf8(files["openstack/latest/meta_data.json"].1.clone()).unwrap(),
        format!(
            r#"{{"instance_type":"u1.small\u003c\u0026\u003e","instance_id":"s.default","hostname":"myhost","uuid":"{uuid}"}}"#
        )
    );
    assert_eq!(
        files["openstack/latest/user_data"].1,
        b"#!/bin/sh\necho hi\n"
    );
    assert_eq!(
        files["openstack/latest/network_data.json"].1,
        br#"{"links":[]}"#
    );
}

#[test]
fn config_drive_devices_list_tagged_interfaces_from_the_defined_domain() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: t, namespace: ns}\nspec:\n  domain:\n    firmware: {uuid: 11111111-2222-3333-4444-555555555555}\n    devices:\n      interfaces:\n      - {name: a, masquerade: {}, tag: specialNet}\n      - {name: b, bridge: {}}\n      - {name: c, bridge: {}, tag: \"x<y\"}\n  networks:\n  - {name: a, pod: {}}\n  volumes:\n  - name: ci\n    cloudInitConfigDrive: {userData: x}\n";
    let v = load(doc);
    // What libvirt returns for the defined domain: addresses assigned,
    // aliases as the converter wrote them; `c` has no PCI address yet.
    let dom = domain::Domain::from_xml(
        "<domain type='kvm'><name>ns_t</name><memory unit='b'>134217728</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='q35'>hvm</type></os><devices>\
         <interface type='ethernet'><mac address='02:00:00:00:00:0a'/><alias name='ua-a'/>\
         <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></interface>\
         <interface type='ethernet'><mac address='02:00:00:00:00:0b'/><alias name='ua-b'/>\
         <address type='pci' domain='0x0000' bus='0x02' slot='0x00' function='0x0'/></interface>\
         <interface type='ethernet'><alias name='ua-c'/></interface>\
         </devices></domain>",
    )
    .unwrap();
    let devices = cloudinit::tagged_devices(&v, &dom);
    assert_eq!(devices.len(), 1, "{devices:?}");
    let md = String::from_utf8(cloudinit::meta_data_with_devices(
        &v,
        cloudinit::DataSource::ConfigDrive,
        &BTreeMap::new(),
        &devices,
    ))
    .unwrap();
    assert_eq!(
        md,
        r#"{"instance_id":"t.ns","hostname":"t","uuid":"11111111-2222-3333-4444-555555555555","devices":[{"type":"nic","bus":"pci","address":"0000:01:00.0","mac":"02:00:00:00:00:0a","tags":["specialNet"]}]}"#
    );
    // No tagged device: no `devices` key at all (KubeVirt leaves it nil).
    let none = cloudinit::meta_data_with_devices(
        &v,
        cloudinit::DataSource::ConfigDrive,
        &BTreeMap::new(),
        &[],
    );
    assert!(!String::from_utf8(none).unwrap().contains("devices"));
    // NoCloud meta-data never lists devices.
    let nc = cloudinit::meta_data_with_devices(
        &v,
        cloudinit::DataSource::NoCloud,
        &BTreeMap::new(),
        &devices,
    );
    assert!(!String::from_utf8(nc).unwrap().contains("devices"));
}

#[test]
fn hostname_is_spec_hostname_else_the_name_before_its_first_dot() {
    let mut v = vmi("  - name: c\n    cloudInitNoCloud: {userData: x}\n");
    let meta = |v: &api::VirtualMachineInstance, kind| {
        String::from_utf8(cloudinit::meta_data(v, kind, &BTreeMap::new())).unwrap()
    };
    v.metadata.name = "web.example.com".into();
    let md = meta(&v, cloudinit::DataSource::NoCloud);
    assert!(md.ends_with(r#","local-hostname":"web"}"#), "{md}");
    // A name longer than a label (KubeVirt admits up to 253): its first
    // part cut to 63, in both kinds of meta-data.
    v.metadata.name = format!("{}{}.b.c", "h".repeat(63), "x".repeat(87));
    let want = "h".repeat(63);
    let md = meta(&v, cloudinit::DataSource::NoCloud);
    assert!(
        md.ends_with(&format!(r#","local-hostname":"{want}"}}"#)),
        "{md}"
    );
    let md = meta(&v, cloudinit::DataSource::ConfigDrive);
    assert!(md.contains(&format!(r#""hostname":"{want}""#)), "{md}");
    v.spec.hostname = Some("h1".into());
    let md = meta(&v, cloudinit::DataSource::NoCloud);
    assert!(md.ends_with(r#","local-hostname":"h1"}"#), "{md}");
}

#[test]
fn oversize_inline_user_data_is_refused_and_512_kib_come_through_a_secret() {
    let e = env();
    let big = "a".repeat(2049);
    let v = vmi(&format!(
        "  - name: ci\n    cloudInitNoCloud: {{userData: {big}}}\n"
    ));
    let err = cloudinit::check_inline(&v).unwrap_err().to_string();
    assert!(
        err.starts_with("spec.volumes[0].cloudInitNoCloud.userData: 2049 bytes exceed KubeVirt's 2048-byte limit"),
        "{err}"
    );
    let ok = vmi(&format!(
        "  - name: ci\n    cloudInitNoCloud: {{userData: {}}}\n",
        &big[..2048]
    ));
    cloudinit::check_inline(&ok).unwrap();

    // 512 KiB of non-ASCII user data from a secret laid out as Kubernetes does.
    let secret = e.root.join("secret-src");
    let data_dir = secret.join("..2026_11_30_12_00_00.1");
    fs::create_dir_all(&data_dir).unwrap();
    let mut user = b"#cloud-config\n# ".to_vec();
    while user.len() < 512 * 1024 {
        user.extend_from_slice("ünïcödé ✓ 日本語\n".as_bytes());
    }
    fs::write(data_dir.join("userdata"), &user).unwrap();
    symlink("..2026_11_30_12_00_00.1", secret.join("..data")).unwrap();
    symlink("..data/userdata", secret.join("userdata")).unwrap();
    let v =
        vmi("  - name: ci\n    cloudInitNoCloud:\n      userDataSecretRef: {name: my-secret}\n");
    cloudinit::check_inline(&v).unwrap();
    // Standalone without a directory: refused, naming the field and the flag.
    let err = prepare(&v, &e.ctx, &standalone(&[]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "spec.volumes[0].cloudInitNoCloud.userDataSecretRef: standalone mode has no mounted secrets: pass --config-volume ci=DIR, a directory with the file userdata (or networkdata)"
    );
    prepare(&v, &e.ctx, &standalone(&[("ci", &secret)])).unwrap();
    let iso = nocloud_iso(&e, "default", "s");
    assert_eq!(isoinfo(&iso).volume_id, "cidata");
    let (_t, x) = extract(&iso);
    assert_eq!(fs::read(x.join("user-data")).unwrap(), user);

    // A secret file that is a link out of the secret directory is refused.
    let evil = e.root.join("evil-secret");
    fs::create_dir_all(&evil).unwrap();
    symlink("/etc/passwd", evil.join("userData")).unwrap();
    let err = prepare(&v, &e.ctx, &standalone(&[("ci", &evil)]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside the volume's directory"), "{err}");
}

#[test]
fn ssh_keys_of_access_credentials_go_into_the_meta_data_of_their_data_source() {
    let e = env();
    // Secret as kubelet lays it out, with an empty entry (skipped).
    let keys = e.root.join("keys");
    let ts = keys.join("..2026_11_30_12_00_00.1");
    fs::create_dir_all(&ts).unwrap();
    fs::write(ts.join("a-key"), "ssh-ed25519 AAAAC3Nza a@host\n").unwrap();
    fs::write(ts.join("b-key"), "ssh-rsa AAAAB3Nza b@host").unwrap();
    fs::write(ts.join("c-empty"), "").unwrap();
    symlink("..2026_11_30_12_00_00.1", keys.join("..data")).unwrap();
    for k in ["a-key", "b-key", "c-empty"] {
        symlink(format!("..data/{k}"), keys.join(k)).unwrap();
    }
    let other = e.root.join("other");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("k"), "ssh-ed25519 OTHER o@host\n").unwrap();
    let mut v = vmi("  - name: ci\n    cloudInitNoCloud: {userData: x}\n");
    let creds = r#"[
        {"sshPublicKey": {"source": {"secret": {"secretName": "my-keys"}}, "propagationMethod": {"noCloud": {}}}},
        {"sshPublicKey": {"source": {"secret": {"secretName": "drive-keys"}}, "propagationMethod": {"configDrive": {}}}}
    ]"#;
    v.spec.access_credentials = serde_json::from_str(creds).unwrap();
    let sources = ConfigSources::Standalone {
        volumes: BTreeMap::new(),
        secrets: [
            ("my-keys".to_owned(), keys.clone()),
            ("drive-keys".to_owned(), other.clone()),
        ]
        .into(),
    };
    let d = cloudinit::read(&v, &e.ctx, &sources).unwrap().unwrap();
    let uuid = v.firmware_uuid().unwrap().to_owned();
    assert_eq!(
        String::from_utf8(d.meta_data).unwrap(),
        format!(
            r#"{{"instance-id":"{uuid}","local-hostname":"s","public-keys":{{"0":"ssh-ed25519 AAAAC3Nza a@host\n","1":"ssh-rsa AAAAB3Nza b@host"}}}}"#
        )
        .replace('\n', "\\n")
    );
    // The config drive takes only the credential propagated to it.
    let keys_cd =
        cloudinit::public_keys(&v, cloudinit::DataSource::ConfigDrive, &e.ctx, &sources).unwrap();
    assert_eq!(
        keys_cd.into_iter().collect::<Vec<_>>(),
        [("0".to_owned(), "ssh-ed25519 OTHER o@host\n".to_owned())]
    );
    // Standalone without the directory: refused by field and flag.
    let err = cloudinit::read(&v, &e.ctx, &standalone(&[]).config_sources)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "spec.accessCredentials[0].sshPublicKey.source.secret: standalone mode has no mounted secrets: pass --access-credential my-keys=DIR, a directory whose files are public keys"
    );
    // A key file that links out of the secret directory is refused.
    symlink("/etc/passwd", other.join("stolen")).unwrap();
    let err = cloudinit::public_keys(&v, cloudinit::DataSource::ConfigDrive, &e.ctx, &sources)
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside the volume's directory"), "{err}");
}

/// A tagged SR-IOV interface is a `<hostdev>` (`ua-sriov-<name>`): KubeVirt
/// lists it among the config drive's devices as a `nic` with the guest PCI
/// address libvirt gave it and no MAC.
#[test]
fn config_drive_devices_list_tagged_sriov_hostdevs() {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: t, namespace: ns}\nspec:\n  domain:\n    firmware: {uuid: 11111111-2222-3333-4444-555555555555}\n    devices:\n      interfaces:\n      - {name: a, masquerade: {}, tag: podNet}\n      - {name: red, sriov: {}, tag: fast}\n      - {name: blue, sriov: {}}\n  networks:\n  - {name: a, pod: {}}\n  - {name: red, multus: {networkName: red-net}}\n  - {name: blue, multus: {networkName: blue-net}}\n  volumes:\n  - name: ci\n    cloudInitConfigDrive: {userData: x}\n";
    let v = load(doc);
    let dom = domain::Domain::from_xml(
        "<domain type='kvm'><name>ns_t</name><memory unit='b'>134217728</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='q35'>hvm</type></os><devices>\
         <interface type='ethernet'><mac address='02:00:00:00:00:0a'/><alias name='ua-a'/>\
         <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></interface>\
         <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x81' slot='0x11' function='0x1'/></source>\
         <alias name='ua-sriov-red'/><address type='pci' domain='0x0000' bus='0x07' slot='0x00' function='0x0'/></hostdev>\
         <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x81' slot='0x11' function='0x2'/></source>\
         <alias name='ua-sriov-blue'/><address type='pci' domain='0x0000' bus='0x08' slot='0x00' function='0x0'/></hostdev>\
         </devices></domain>",
    )
    .unwrap();
    let devices = cloudinit::tagged_devices(&v, &dom);
    let md = String::from_utf8(cloudinit::meta_data_with_devices(
        &v,
        cloudinit::DataSource::ConfigDrive,
        &BTreeMap::new(),
        &devices,
    ))
    .unwrap();
    assert!(
        md.contains(r#""devices":[{"type":"nic","bus":"pci","address":"0000:01:00.0","mac":"02:00:00:00:00:0a","tags":["podNet"]},{"type":"nic","bus":"pci","address":"0000:07:00.0","tags":["fast"]}]"#),
        "{md}"
    );
}

#[test]
fn config_drive_devices_keep_the_rest_of_the_meta_data() {
    let e = env();
    let v = vmi(
        "  - name: cd\n    cloudInitConfigDrive:\n      userData: \"#!/bin/sh\\necho hi\\n\"\n",
    );
    let dev = cloudinit::DeviceData {
        device_type: "nic".into(),
        bus: "pci".into(),
        address: "0000:01:00.0".into(),
        mac: String::new(),
        tags: vec!["t<1>".into()],
    };
    let mut ours = cloudinit::read(&v, &e.ctx, &ConfigSources::Pod)
        .unwrap()
        .unwrap();
    let before = ours.clone();
    // Our own meta-data: the same as rendering it with the devices afresh.
    ours.set_devices(&v, std::slice::from_ref(&dev));
    assert_eq!(
        ours.meta_data,
        cloudinit::meta_data_with_devices(
            &v,
            cloudinit::DataSource::ConfigDrive,
            &before.public_keys,
            std::slice::from_ref(&dev)
        )
    );
    // A hook's meta-data keeps its fields; devices land in KubeVirt's place.
    let mut hooked = before.clone();
    hooked.meta_data =
        br#"{"instance_id":"custom","local_hostname":"lh","hostname":"h","uuid":"u","public_keys":{"0":"k"}}"#
            .to_vec();
    hooked.set_devices(&v, std::slice::from_ref(&dev));
    assert_eq!(
        String::from_utf8(hooked.meta_data).unwrap(),
        r#"{"instance_id":"custom","local_hostname":"lh","hostname":"h","uuid":"u","devices":[{"type":"nic","bus":"pci","address":"0000:01:00.0","tags":["t\u003c1\u003e"]}],"public_keys":{"0":"k"}}"#
    );
    // No devices: unchanged.
    let mut same = before.clone();
    same.set_devices(&v, &[]);
    assert_eq!(same, before);
}
