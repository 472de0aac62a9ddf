//! The external tools never write through a link someone else put in the
//! launcher's directories (emptyDirs the pod's other containers can fill).
//! A planter thread plays that container: all through the preparation it
//! keeps a link to a file outside at the names the tools used to write
//! (`<image>.partial`, `<iso>.staging`), and replaces the files it sees
//! being made there with such links. Afterwards the outside file must be
//! unchanged and the image correct. Each of these failed before the tools
//! wrote only inside a private directory (`crate::staging`): the tool
//! followed the link and truncated or formatted the outside file.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::*;
use crate::cbt::{make_overlay, OverlayData};
use crate::staging::STAGING_DIR_PREFIX;

/// A 4 MiB raw data file.
const DATA: OverlayData = OverlayData {
    block: false,
    size: 4 << 20,
};

/// What the planter does at one name.
#[derive(Clone, Copy, PartialEq)]
enum Plant {
    /// Puts a link there whenever the name is free.
    Link,
    /// Replaces a regular file there with a link (by rename, at once).
    OverRegular,
    /// Replaces an empty regular file there with a link.
    OverEmpty,
}

struct Planter {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<u64>,
}

/// Starts the planter: links to `victim` at `names` until stopped.
fn planter(victim: &Path, names: &[(PathBuf, Plant)]) -> Planter {
    let stop = Arc::new(AtomicBool::new(false));
    let (victim, names, flag) = (victim.to_owned(), names.to_vec(), stop.clone());
    let handle = std::thread::spawn(move || {
        let mut planted = 0u64;
        while !flag.load(Ordering::Relaxed) {
            for (name, how) in &names {
                let m = fs::symlink_metadata(name);
                let act = match (how, &m) {
                    (Plant::Link, Err(_)) => true,
                    (Plant::OverRegular, Ok(m)) => m.is_file(),
                    (Plant::OverEmpty, Ok(m)) => m.is_file() && m.len() == 0,
                    _ => false,
                };
                if !act {
                    continue;
                }
                let ok = if *how == Plant::Link {
                    symlink(&victim, name).is_ok()
                } else {
                    let tmp = name.with_extension("planted");
                    let _ = fs::remove_file(&tmp);
                    symlink(&victim, &tmp).is_ok() && fs::rename(&tmp, name).is_ok()
                };
                planted += u64::from(ok);
            }
            std::thread::yield_now();
        }
        planted
    });
    Planter { stop, handle }
}

impl Planter {
    /// Stops it; how many links it put.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// A file outside the launcher's directories, with content to compare.
fn victim(e: &Env) -> (PathBuf, Vec<u8>) {
    let outside = e.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let p = outside.join("precious");
    let data: Vec<u8> = (0..64u32 << 10).map(|i| (i % 253) as u8).collect();
    fs::write(&p, &data).unwrap();
    (p, data)
}

/// No private directory is left in `dir`.
fn no_staging_left(dir: &Path) {
    let left: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(STAGING_DIR_PREFIX))
        .collect();
    assert!(left.is_empty(), "left in {}: {left:?}", dir.display());
}

/// Runs `f` while a planter keeps links to `victim` at `names`; then
/// checks the planter put at least `min_planted` links and `victim` still
/// holds `content` (nothing was written through a link). Returns `f`'s
/// result for the caller's own checks.
fn under_planter<T>(
    victim: &Path,
    content: &[u8],
    names: &[(PathBuf, Plant)],
    min_planted: u64,
    f: impl FnOnce() -> T,
) -> T {
    let p = planter(victim, names);
    let res = f();
    assert!(p.stop() >= min_planted, "the planter put no link");
    assert_eq!(fs::read(victim).unwrap(), content, "written through a link");
    res
}

/// The planter's links are removed; only what the launcher made stays.
fn remove_planted(names: &[(PathBuf, Plant)]) {
    for (n, _) in names {
        if fs::symlink_metadata(n).is_ok_and(|m| m.file_type().is_symlink()) {
            fs::remove_file(n).unwrap();
        }
    }
}

/// qemu-img create: a containerDisk's overlay and an emptyDisk.
#[test]
fn qemu_img_never_writes_through_a_planted_link() {
    let e = env();
    let (victim, content) = victim(&e);
    let img = e.root.join("container-disks/disk_0.img");
    fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    let overlay_dir = e.root.join("ephemeral/disk-data/root");
    fs::create_dir_all(&overlay_dir).unwrap();
    fs::create_dir_all(e.root.join("empty-disks")).unwrap();
    let names = [
        (overlay_dir.join("disk.qcow2.partial"), Plant::Link),
        (
            e.root.join("empty-disks/scratch.qcow2.partial"),
            Plant::Link,
        ),
    ];
    let v = vmi(
        "  - name: root\n    containerDisk: {image: x}\n  - name: scratch\n    emptyDisk: {capacity: 4Mi}\n",
    );
    let res = under_planter(&victim, &content, &names, 1, || {
        prepare(&v, &e.ctx, &PrepareOptions::default())
    });
    res.unwrap();
    let info = qemu_img::info(&overlay_dir.join("disk.qcow2"), DEFAULT_DISK_MEMORY_LIMIT).unwrap();
    assert_eq!(info.format, "qcow2");
    assert_eq!(info.backing_filename.as_deref(), img.to_str());
    let info = qemu_img::info(
        &e.root.join("empty-disks/scratch.qcow2"),
        DEFAULT_DISK_MEMORY_LIMIT,
    )
    .unwrap();
    assert_eq!(
        (info.format.as_str(), info.virtual_size),
        ("qcow2", 4 << 20)
    );
    remove_planted(&names);
    no_staging_left(&overlay_dir);
    no_staging_left(&e.root.join("empty-disks"));
}

/// xorrisofs: the cloud-init ISO, with a link also at the ISO's own name
/// (the rename replaces it).
#[test]
fn xorrisofs_never_writes_through_a_planted_link() {
    let e = env();
    let (victim, content) = victim(&e);
    let dir = e.root.join("ephemeral/cloud-init-data/default/s");
    fs::create_dir_all(&dir).unwrap();
    let iso = dir.join("noCloud.iso");
    let names = [
        (dir.join("noCloud.iso.staging"), Plant::Link),
        (iso.clone(), Plant::Link),
    ];
    let v = vmi("  - name: ci\n    cloudInitNoCloud: {userData: \"#!/bin/sh\\necho hi\\n\"}\n");
    let res = under_planter(&victim, &content, &names, 1, || {
        prepare(&v, &e.ctx, &PrepareOptions::default())
    });
    res.unwrap();
    assert!(
        fs::symlink_metadata(&iso).unwrap().is_file(),
        "the ISO is a file"
    );
    assert_eq!(isoinfo(&iso).volume_id, "cidata");
    let (_t, x) = extract(&iso);
    assert_eq!(tree(&x)["user-data"].1, b"#!/bin/sh\necho hi\n");
    remove_planted(&names);
    no_staging_left(&dir);
}

/// mkfs.vfat and mcopy: a FAT config disk. mcopy opened the image again by
/// path after mkfs.vfat made it; a link put there in between made it copy
/// the files into another FAT image (here the outside one).
#[test]
fn mkfs_vfat_and_mcopy_never_write_through_a_planted_link() {
    let e = env();
    let outside = e.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let victim = outside.join("other.img");
    tool(
        "mkfs.vfat",
        &["-C", "-n", "OTHER", victim.to_str().unwrap(), "1024"],
    );
    let content = fs::read(&victim).unwrap();
    let src = e.root.join("cm-src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("app.conf"), b"key=value\n").unwrap();
    let dir = e.root.join("private/config-map-disks");
    fs::create_dir_all(&dir).unwrap();
    let names = [
        (dir.join("cm.iso.staging"), Plant::OverRegular),
        (dir.join("cm.iso.staging"), Plant::Link),
    ];
    let v = vmi("  - name: cm\n    configMap: {name: app, volumeLabel: APPCFG}\n");
    let opts = PrepareOptions {
        config_disk_fs: ConfigDiskFs::Vfat,
        ..standalone(&[("cm", &src)])
    };
    let res = under_planter(&victim, &content, &names, 1, || prepare(&v, &e.ctx, &opts));
    res.unwrap();
    let img = dir.join("cm.iso");
    let img = img.to_str().unwrap();
    tool("fsck.fat", &["-n", img]);
    assert_eq!(
        tool("blkid", &["-o", "value", "-s", "LABEL", img]).trim(),
        "APPCFG"
    );
    remove_planted(&names);
    no_staging_left(&dir);
}

/// qemu-storage-daemon: a changed block tracking overlay. The launcher
/// made the empty overlay file and the daemon opened it by path later; a
/// link renamed over it in between had the daemon format the outside file.
#[test]
fn qemu_storage_daemon_never_writes_through_a_planted_link() {
    let _r = process::reaper();
    let e = env();
    let (victim, content) = victim(&e);
    let data = e.root.join("disk.img");
    let guest: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    fs::write(&data, &guest).unwrap();
    let root = e.root.join("cbt");
    fs::create_dir_all(&root).unwrap();
    let overlay = root.join("vol.qcow2");
    let names = [(overlay.clone(), Plant::OverEmpty)];
    // No minimum count of links here (this test never asked for one).
    let res = under_planter(&victim, &content, &names, 0, || {
        make_overlay("f", root.to_str().unwrap(), &overlay, &data, DATA, None)
    });
    res.unwrap();
    assert_eq!(fs::read(&data).unwrap(), guest, "data untouched");
    let info = qemu_img::info(&overlay, DEFAULT_DISK_MEMORY_LIMIT).unwrap();
    assert_eq!(
        (info.format.as_str(), info.virtual_size),
        ("qcow2", 4 << 20)
    );
    assert_eq!(info.data_file(), data.to_str(), "the data file's own path");
    no_staging_left(&root);
    // A data file that is a link is refused, naming it; nothing is made.
    let link = e.root.join("link.img");
    symlink(&data, &link).unwrap();
    let other = root.join("other.qcow2");
    let err = make_overlay("f", root.to_str().unwrap(), &other, &link, DATA, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("f: open ") && err.contains("link.img"),
        "{err}"
    );
    assert!(fs::symlink_metadata(&other).is_err());
    no_staging_left(&root);
}
