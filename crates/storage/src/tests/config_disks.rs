//! Config-volume disks (configMap, secret, downwardAPI, serviceAccount,
//! sysprep), ISO and FAT, read back from the image.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use super::*;

/// A ConfigMap directory as kubelet writes it: keys are links into a
/// timestamped directory through `..data`.
fn kubelet_dir(root: &Path, files: &[(&str, &[u8], u32)]) -> PathBuf {
    let d = root.join("cm-src");
    let ts = d.join("..2026_11_30_12_00_00.123");
    fs::create_dir_all(&ts).unwrap();
    for (name, content, mode) in files {
        let p = ts.join(name);
        fs::write(&p, content).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).unwrap();
        symlink(format!("..data/{name}"), d.join(name)).unwrap();
    }
    symlink("..2026_11_30_12_00_00.123", d.join("..data")).unwrap();
    d
}

#[test]
fn config_map_disk_keeps_content_modes_and_label_and_follows_links_inside() {
    let e = env();
    let src = kubelet_dir(
        &e.root,
        &[
            ("app.conf", b"key=value\n", 0o644),
            ("run.sh", b"#!/bin/sh\necho run\n", 0o755),
            ("grüße.txt", "Grüße ✓\n".as_bytes(), 0o600),
        ],
    );
    let v = vmi("  - name: cm\n    configMap: {name: app, volumeLabel: APPCFG}\n");
    prepare(&v, &e.ctx, &standalone(&[("cm", &src)])).unwrap();
    let iso = e.root.join("private/config-map-disks/cm.iso");
    let info = isoinfo(&iso);
    assert_eq!(info.volume_id, "APPCFG");
    assert!(info.joliet && info.rock_ridge);
    assert!(joliet_names(&iso).contains(&"/grüße.txt".to_owned()));
    let (_t, x) = extract(&iso);
    let files = tree(&x);
    for (name, content, mode) in [
        ("app.conf", &b"key=value\n"[..], 0o644),
        ("run.sh", &b"#!/bin/sh\necho run\n"[..], 0o755),
        ("grüße.txt", "Grüße ✓\n".as_bytes(), 0o600),
    ] {
        assert_eq!(files[name], (mode, content.to_vec()), "{name}");
        // KubeVirt grafts every entry, kubelet's ..data included.
        assert_eq!(files[&format!("..data/{name}")].1, content, "{name}");
    }
    assert!(!e.root.join("private/config-map-disks/cm.iso.tree").exists());
}

#[test]
fn sysprep_disk_is_labelled_unattend_cd_and_needs_an_answer_file() {
    let e = env();
    let src = e.root.join("sysprep-src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("Autounattend.XML"), "<unattend/>\n").unwrap();
    let v = vmi("  - name: sp\n    sysprep: {configMap: {name: answers}}\n");
    prepare(&v, &e.ctx, &standalone(&[("sp", &src)])).unwrap();
    let iso = e.root.join("private/sysprep-disks/sp.iso");
    assert_eq!(isoinfo(&iso).volume_id, "unattendCD");
    let (_t, x) = extract(&iso);
    assert_eq!(
        fs::read(x.join("Autounattend.XML")).unwrap(),
        b"<unattend/>\n"
    );

    let empty = e.root.join("no-answers");
    fs::create_dir_all(&empty).unwrap();
    fs::write(empty.join("readme.txt"), "x").unwrap();
    let err = check_inputs(&v, &e.ctx, &standalone(&[("sp", &empty)]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "spec.volumes[0].sysprep: Sysprep drive should contain autounattend.xml or unattend.xml but neither were found."
    );
}

#[test]
fn secret_downward_api_and_service_account_disks_use_their_paths_and_default_label() {
    let e = env();
    let sec = e.root.join("sec");
    let dapi = e.root.join("dapi");
    let sa = e.root.join("sa");
    for (d, f) in [(&sec, "password"), (&dapi, "labels"), (&sa, "token")] {
        fs::create_dir_all(d).unwrap();
        fs::write(d.join(f), f).unwrap();
    }
    let v = vmi("  - name: sec\n    secret: {secretName: s}\n  - name: dapi\n    downwardAPI: {fields: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}\n  - name: sa\n    serviceAccount: {serviceAccountName: default}\n");
    prepare(
        &v,
        &e.ctx,
        &standalone(&[("sec", &sec), ("dapi", &dapi), ("sa", &sa)]),
    )
    .unwrap();
    for (iso, file) in [
        ("private/secret-disks/sec.iso", "password"),
        ("private/downwardapi-disks/dapi.iso", "labels"),
        ("private/service-account-disk/service-account.iso", "token"),
    ] {
        let iso = e.root.join(iso);
        assert_eq!(isoinfo(&iso).volume_id, "cfgdata", "{}", iso.display());
        let (_t, x) = extract(&iso);
        assert_eq!(fs::read(x.join(file)).unwrap(), file.as_bytes());
    }
    // Without a directory in standalone mode: refused by name.
    let err = prepare(&v, &e.ctx, &standalone(&[("sec", &sec)]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "spec.volumes[1].downwardAPI: standalone mode has no mounted downwardAPI volumes: pass --config-volume dapi=DIR with the directory holding its files"
    );
}

/// Every path under `root`, sorted (what a check must leave unchanged).
fn paths_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn config_disk_links_out_of_the_directory_special_files_and_bad_labels_are_refused() {
    let e = env();
    let v = vmi("  - name: cm\n    configMap: {name: app}\n");
    let iso = e.root.join("private/config-map-disks/cm.iso");
    // The launcher's pre-start check and the real preparation refuse the
    // same input with the same error, and the check writes nothing.
    let refused = |v: &api::VirtualMachineInstance, dir: &Path| {
        let before = paths_under(&e.root);
        let checked = check_inputs(v, &e.ctx, &standalone(&[("cm", dir)]))
            .unwrap_err()
            .to_string();
        assert_eq!(paths_under(&e.root), before, "check_inputs wrote something");
        let prepared = prepare(v, &e.ctx, &standalone(&[("cm", dir)]))
            .unwrap_err()
            .to_string();
        assert_eq!(checked, prepared);
        prepared
    };

    let out = e.root.join("out");
    fs::create_dir_all(&out).unwrap();
    symlink("/etc/shadow", out.join("shadow")).unwrap();
    let err = refused(&v, &out);
    assert!(
        err.starts_with("spec.volumes[0].configMap: ")
            && err.contains("/etc/shadow, outside the volume's directory"),
        "{err}"
    );
    assert!(!iso.exists());

    let up = e.root.join("up");
    fs::create_dir_all(up.join("sub")).unwrap();
    symlink("../../out", up.join("sub/escape")).unwrap();
    let err = refused(&v, &up);
    assert!(err.contains("outside the volume's directory"), "{err}");

    let cyc = e.root.join("cyc");
    fs::create_dir_all(&cyc).unwrap();
    symlink(".", cyc.join("loop")).unwrap();
    let err = refused(&v, &cyc);
    assert!(err.contains("(a link cycle?)"), "{err}");

    let fifo = e.root.join("fifo");
    fs::create_dir_all(&fifo).unwrap();
    nix::unistd::mkfifo(
        &fifo.join("p"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let err = refused(&v, &fifo);
    assert!(err.contains("is not a regular file or directory"), "{err}");

    let ok = e.root.join("ok");
    fs::create_dir_all(&ok).unwrap();
    let long = vmi("  - name: cm\n    configMap: {name: app, volumeLabel: ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456}\n");
    let err = refused(&long, &ok);
    assert!(
        err.starts_with("spec.volumes[0].configMap.volumeLabel: \"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456\" must have 1 to 32 characters"),
        "{err}"
    );
    let missing = e.root.join("missing");
    let err = refused(&v, &missing);
    assert!(err.contains("does not exist"), "{err}");
    assert!(!iso.exists());
}

#[test]
fn media_are_rebuilt_on_start_and_kept_while_the_domain_runs() {
    let e = env();
    let src = e.root.join("cm");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("k"), "one").unwrap();
    let v = vmi("  - name: cm\n    configMap: {name: app}\n  - name: ci\n    cloudInitNoCloud: {userData: first}\n");
    let mut opts = standalone(&[("cm", &src)]);
    prepare(&v, &e.ctx, &opts).unwrap();
    let cm_iso = e.root.join("private/config-map-disks/cm.iso");
    let ci_iso = nocloud_iso(&e, "default", "s");
    let read = |iso: &Path, f: &str| {
        let (_t, x) = extract(iso);
        fs::read(x.join(f)).unwrap()
    };
    assert_eq!(read(&cm_iso, "k"), b"one");
    fs::write(src.join("k"), "two").unwrap();
    let v2 = vmi("  - name: cm\n    configMap: {name: app}\n  - name: ci\n    cloudInitNoCloud: {userData: second}\n");
    // Running domain: the images QEMU has open stay as they are.
    opts.rebuild_media = false;
    prepare(&v2, &e.ctx, &opts).unwrap();
    assert_eq!(read(&cm_iso, "k"), b"one");
    assert_eq!(read(&ci_iso, "user-data"), b"first");
    // Next start: rebuilt from the current sources.
    opts.rebuild_media = true;
    prepare(&v2, &e.ctx, &opts).unwrap();
    assert_eq!(read(&cm_iso, "k"), b"two");
    assert_eq!(read(&ci_iso, "user-data"), b"second");
}

#[test]
fn vfat_config_disk_is_a_clean_fat_file_system_with_the_label_and_files() {
    let e = env();
    let src = kubelet_dir(
        &e.root,
        &[
            ("app.conf", b"key=value\n", 0o644),
            ("grüße.txt", "Grüße ✓\n".as_bytes(), 0o600),
        ],
    );
    let v = vmi("  - name: cm\n    configMap: {name: app, volumeLabel: APPCFG}\n");
    let opts = PrepareOptions {
        config_disk_fs: ConfigDiskFs::Vfat,
        ..standalone(&[("cm", &src)])
    };
    prepare(&v, &e.ctx, &opts).unwrap();
    let img = e.root.join("private/config-map-disks/cm.iso");
    let p = img.to_str().unwrap();
    // fsck.fat -n exits non-zero on any inconsistency.
    tool("fsck.fat", &["-n", p]);
    assert_eq!(
        tool("blkid", &["-o", "value", "-s", "TYPE", p]).trim(),
        "vfat"
    );
    assert_eq!(
        tool("blkid", &["-o", "value", "-s", "LABEL", p]).trim(),
        "APPCFG"
    );
    let out = e.root.join("fat-out");
    fs::create_dir_all(&out).unwrap();
    let mut cmd = Command::new("mcopy");
    cmd.env("LC_ALL", "C.UTF-8")
        .env("MTOOLS_SKIP_CHECK", "1")
        .args(["-s", "-n", "-i", p, "::/*"])
        .arg(&out);
    process::run(cmd, std::time::Duration::from_secs(30), 1 << 20).unwrap();
    assert_eq!(fs::read(out.join("app.conf")).unwrap(), b"key=value\n");
    // mtools lowercases a non-ASCII short name differently from Linux; the
    // guest's view of the name is checked end to end
    // (volumes::vfat_config_disk_is_read_by_the_guest). Content by name:
    let mut cmd = Command::new("mtype");
    cmd.env("LC_ALL", "C.UTF-8")
        .env("MTOOLS_SKIP_CHECK", "1")
        .args(["-i", p, "::/grüße.txt"]);
    let typed = process::run(cmd, std::time::Duration::from_secs(30), 1 << 20).unwrap();
    assert_eq!(typed.stdout, "Grüße ✓\n".as_bytes());
    assert_eq!(
        fs::read(out.join("..data/app.conf")).unwrap(),
        b"key=value\n"
    );

    // FAT labels are at most 11 characters.
    let long = vmi("  - name: cm\n    configMap: {name: app, volumeLabel: TWELVECHARSX}\n");
    let err = prepare(&long, &e.ctx, &opts).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "spec.volumes[0].configMap.volumeLabel: \"TWELVECHARSX\" must have 1 to 11 characters"
        ),
        "{err}"
    );
}
