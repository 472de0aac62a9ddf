//! Prints how long building cloud-init and config disks takes (the
//! launcher does it on every domain start): median of 9 runs each of a
//! NoCloud ISO with 2 KiB and 512 KiB of user data, a config-map ISO and a
//! vFAT config disk of 50 files (4 KiB each), and the image sizes; then a
//! claim's sparse disk.img created at 10 GiB (statvfs, write, fsync,
//! rename) and grown offline by ExpandDisks to 20 GiB (`qemu-img resize`).
//!
//! `cargo run --release -p storage --example media`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use api::Arch;
use converter::{ConvertContext, VirtType};
use storage::{prepare, ConfigDiskFs, ConfigSources, PrepareOptions};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn measure(name: &str, iso: &Path, mut f: impl FnMut()) {
    let runs: Vec<Duration> = (0..9)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    let size = std::fs::metadata(iso).map(|m| m.len()).unwrap_or(0);
    println!(
        "{name:<40} median {:>7.1} ms   image {:>8} KiB",
        median(runs).as_secs_f64() * 1e3,
        size / 1024
    );
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Qemu);
    ctx.paths.ephemeral_disk_dir = root.join("ephemeral").to_string_lossy().into_owned();
    ctx.paths.private_dir = root.join("private").to_string_lossy().into_owned();

    let secret = root.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("userdata"), vec![b'#'; 512 * 1024]).unwrap();
    let cm = root.join("cm");
    std::fs::create_dir_all(&cm).unwrap();
    for i in 0..50 {
        std::fs::write(cm.join(format!("key-{i}.conf")), vec![b'x'; 4096]).unwrap();
    }
    let sources = ConfigSources::Standalone {
        volumes: BTreeMap::from([
            ("ci".to_owned(), secret.clone()),
            ("cm".to_owned(), cm.clone()),
        ]),
        secrets: BTreeMap::new(),
    };
    let opts = PrepareOptions {
        config_sources: sources,
        ..PrepareOptions::default()
    };
    let load = |vols: &str| {
        let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: m}}\nspec:\n  domain: {{memory: {{guest: 64Mi}}}}\n  volumes:\n{vols}");
        api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap()
    };
    let nocloud = root.join("ephemeral/cloud-init-data/default/m/noCloud.iso");
    let small = load(&format!(
        "  - name: ci\n    cloudInitNoCloud: {{userData: \"{}\"}}\n",
        "#".repeat(2048)
    ));
    measure("NoCloud ISO, 2 KiB user data", &nocloud, || {
        prepare(&small, &ctx, &opts).unwrap();
    });
    let big = load("  - name: ci\n    cloudInitNoCloud: {userDataSecretRef: {name: s}}\n");
    measure("NoCloud ISO, 512 KiB user data (secret)", &nocloud, || {
        prepare(&big, &ctx, &opts).unwrap();
    });
    let cmv = load("  - name: cm\n    configMap: {name: c}\n");
    let cm_iso = root.join("private/config-map-disks/cm.iso");
    measure("configMap ISO, 50 files x 4 KiB", &cm_iso, || {
        prepare(&cmv, &ctx, &opts).unwrap();
    });
    let fat = PrepareOptions {
        config_disk_fs: ConfigDiskFs::Vfat,
        ..opts.clone()
    };
    measure("configMap vFAT, 50 files x 4 KiB", &cm_iso, || {
        prepare(&cmv, &ctx, &fat).unwrap();
    });

    let claim = root.join("private/vmi-disks/data");
    std::fs::create_dir_all(&claim).unwrap();
    let image = claim.join("disk.img");
    let claim_vmi = |size: &str| {
        let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: m}}\nspec:\n  domain: {{memory: {{guest: 64Mi}}}}\n  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: c}}\nstatus:\n  volumeStatus:\n  - name: data\n    persistentVolumeClaimInfo: {{capacity: {{storage: {size}}}, requests: {{storage: {size}}}, filesystemOverhead: '0'}}\n");
        api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap()
    };
    let ten = claim_vmi("10Gi");
    measure("claim disk.img created, 10 GiB sparse", &image, || {
        let _ = std::fs::remove_file(&image);
        prepare(&ten, &ctx, &opts).unwrap();
    });
    let twenty = claim_vmi("20Gi");
    let mut expand = ctx.clone();
    expand.expand_disks_enabled = true;
    measure("claim disk.img grown 10 -> 20 GiB", &image, || {
        let _ = std::fs::remove_file(&image);
        prepare(&ten, &ctx, &opts).unwrap();
        prepare(&twenty, &expand, &opts).unwrap();
    });
}
