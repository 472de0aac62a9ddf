//! Filesystem-mode claims: image creation with KubeVirt's size, room and
//! toleration rules, on real (and really full) file systems; expansion
//! with the real qemu-img; links and missing claims refused.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;

use super::*;
use crate::pvc::{self, PvcInfo, SpacePolicy};

const MIB: u64 = 1 << 20;

/// A VMI with one claim volume `data` (and its disk) whose status carries
/// `pvc_info` (YAML flow mapping), as virt-handler sends it.
fn claim_vmi(source: &str, pvc_info: &str) -> VirtualMachineInstance {
    let doc = format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: s}}\nspec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices:\n      disks:\n      - {{name: data, disk: {{bus: virtio}}}}\n  volumes:\n  - name: data\n    {source}\nstatus:\n  volumeStatus:\n  - name: data\n    target: vda\n    persistentVolumeClaimInfo: {pvc_info}\n"
    );
    api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap()
}

fn claim_dir(e: &Env) -> std::path::PathBuf {
    let d = e.root.join("private/vmi-disks/data");
    fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `f` on a tmpfs of `size` bytes mounted at `dir` in a private mount
/// namespace of a thread of its own (it vanishes with the thread; the
/// host's mount table is never touched). Needs root, as the suite does.
fn on_small_fs<T: Send>(dir: &Path, size: u64, f: impl FnOnce() -> T + Send) -> T {
    use nix::mount::{mount, MsFlags};
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
                .expect("unshare(CLONE_NEWNS) needs root (CAP_SYS_ADMIN)");
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .expect("make / private");
            mount(
                Some("tmpfs"),
                dir,
                Some("tmpfs"),
                MsFlags::empty(),
                Some(format!("size={size},mode=0755").as_str()),
            )
            .expect("mount a small tmpfs");
            f()
        })
        .join()
        .unwrap()
    })
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn image_size_is_the_smaller_of_request_and_capacity_aligned_down_to_1_mib() {
    let info = |c: Option<u64>, r: Option<u64>| PvcInfo {
        capacity: c,
        requests: r,
        ..PvcInfo::default()
    };
    assert_eq!(
        pvc::image_size(&info(Some(10 * MIB), Some(8 * MIB)), "v"),
        Ok(8 * MIB)
    );
    assert_eq!(
        pvc::image_size(&info(Some(8 * MIB), Some(10 * MIB)), "v"),
        Ok(8 * MIB)
    );
    assert_eq!(
        pvc::image_size(&info(None, Some(3 * MIB + 5)), "v"),
        Ok(3 * MIB)
    );
    assert_eq!(pvc::image_size(&info(Some(MIB + 1), None), "v"), Ok(MIB));
    assert_eq!(
        pvc::image_size(&info(Some(MIB - 1), None), "small")
            .unwrap_err()
            .to_string(),
        "the size for volume small is too low, must be at least 1MiB"
    );
    assert_eq!(
        pvc::image_size(&info(None, None), "none")
            .unwrap_err()
            .to_string(),
        "unable to determine the size of volume none: its claim provides no storage capacity or requests"
    );
}

#[test]
fn toleration_accepts_a_claim_up_to_10_percent_smaller_and_refuses_more() {
    // Fits: the requested size.
    assert_eq!(
        pvc::size_to_create("v", 100 * MIB, 200 * MIB, 10),
        Ok(100 * MIB)
    );
    // 95 MiB free of 100 requested: within 10 %, the room aligned down.
    assert_eq!(
        pvc::size_to_create("v", 100 * MIB, 95 * MIB + 7, 10),
        Ok(95 * MIB)
    );
    // Exactly 90 %: still tolerated.
    assert_eq!(
        pvc::size_to_create("v", 100 * MIB, 90 * MIB, 10),
        Ok(90 * MIB)
    );
    let e = pvc::size_to_create("pvc-a", 100 * MIB, 90 * MIB - 1, 10)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "unable to create the disk image of volume pvc-a: not enough space, demanded size 104857600 B is bigger than the available space 94371839 B, also after taking 10 % toleration into account");
    // Toleration 0: any shortfall is refused.
    assert!(matches!(
        pvc::size_to_create("v", 100 * MIB, 100 * MIB - 1, 0),
        Err(pvc::ClaimSizeError::NoSpace { toleration: 0, .. })
    ));
    assert_eq!(
        pvc::size_to_create("v", 100 * MIB, MIB - 1, 100)
            .unwrap_err()
            .to_string(),
        "unable to create the disk image of volume v: only 1048575 B are available, less than 1MiB"
    );
    // KubeVirt's event for a tolerated shortfall; none when it fits.
    assert_eq!(pvc::tolerated_small_pv(100 * MIB, 100 * MIB, 10), None);
    let ev = pvc::tolerated_small_pv(5 << 30, 4939 * MIB, 10).unwrap();
    assert_eq!((ev.kind, ev.reason), ("Normal", "ToleratedSmallPV"));
    assert_eq!(
        ev.message,
        "PV size too small: expected 5Gi, found 4939Mi. Using it anyway, it is within 10 % toleration"
    );
}

#[test]
fn usable_size_takes_off_the_file_system_overhead() {
    let info = PvcInfo {
        capacity: Some(1 << 30),
        requests: Some(2 << 30),
        filesystem_overhead: Some(0.055),
        volume_mode: Some("Filesystem".into()),
        preallocated: false,
    };
    // (1 − 0.055) × 1 GiB = 1014686023.68 → aligned down to 967 MiB.
    assert_eq!(pvc::usable_size(&info), Some(967 * MIB));
    assert_eq!(
        pvc::usable_size(&PvcInfo {
            filesystem_overhead: None,
            ..info.clone()
        }),
        None
    );
    assert_eq!(
        pvc::usable_size(&PvcInfo {
            requests: None,
            ..info
        }),
        None
    );
}

#[test]
fn claim_status_is_read_and_bad_fields_are_named() {
    let v = claim_vmi(
        "persistentVolumeClaim: {claimName: c}",
        "{capacity: {storage: 2Gi}, requests: {storage: 1500Mi}, filesystemOverhead: '0.055', volumeMode: Filesystem, preallocated: true}",
    );
    let i = pvc::info(&v, "data").unwrap().unwrap();
    assert!(i.preallocated);
    assert_eq!(
        pvc::preallocated_volumes(&v)
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        ["data"]
    );
    assert_eq!(i.capacity, Some(2 << 30));
    assert_eq!(i.requests, Some(1500 * MIB));
    assert_eq!(i.filesystem_overhead, Some(0.055));
    assert!(!i.is_block());
    assert_eq!(pvc::info(&v, "other").unwrap(), None);
    let bad = claim_vmi(
        "persistentVolumeClaim: {claimName: c}",
        "{capacity: {storage: 2XB}}",
    );
    assert!(pvc::info(&bad, "data")
        .unwrap_err()
        .to_string()
        .starts_with("status.volumeStatus[0].persistentVolumeClaimInfo.capacity.storage: "));
    let bad = claim_vmi(
        "persistentVolumeClaim: {claimName: c}",
        "{capacity: {storage: 2Gi}, filesystemOverhead: '1.5'}",
    );
    assert_eq!(
        pvc::info(&bad, "data").unwrap_err().to_string(),
        "status.volumeStatus[0].persistentVolumeClaimInfo.filesystemOverhead: \"1.5\" is not a fraction from 0 to 1"
    );
}

#[test]
fn filesystem_claim_without_an_image_gets_a_sparse_disk_img_of_the_claim_size() {
    let e = env();
    let dir = claim_dir(&e);
    for (source, vol) in [
        ("persistentVolumeClaim: {claimName: c}", "pvc"),
        ("dataVolume: {name: dv}", "dv"),
    ] {
        let _ = fs::remove_file(dir.join("disk.img"));
        let v = claim_vmi(
            source,
            "{capacity: {storage: 64Mi}, requests: {storage: 48Mi}, volumeMode: Filesystem}",
        );
        prepare(&v, &e.ctx, &PrepareOptions::default()).unwrap();
        let m = fs::metadata(dir.join("disk.img")).unwrap();
        assert_eq!(m.len(), 48 * MIB, "{vol}");
        assert!(
            m.blocks() * 512 <= 64 * 1024,
            "{vol}: not sparse ({} blocks)",
            m.blocks()
        );
        assert_eq!(m.permissions().mode() & 0o777, 0o660);
        assert_eq!(entries(&dir), ["disk.img"]);
    }
    // An existing image is used as it is, never recreated or resized.
    fs::write(dir.join("disk.img"), b"user data").unwrap();
    let v = claim_vmi(
        "persistentVolumeClaim: {claimName: c}",
        "{capacity: {storage: 64Mi}}",
    );
    prepare(&v, &e.ctx, &PrepareOptions::default()).unwrap();
    assert_eq!(fs::read(dir.join("disk.img")).unwrap(), b"user data");
}

#[test]
fn claim_too_small_for_the_requested_disk_is_refused_naming_the_volume() {
    let e = env();
    let dir = claim_dir(&e);
    let v = claim_vmi(
        "persistentVolumeClaim: {claimName: c}",
        "{capacity: {storage: 64Mi}, volumeMode: Filesystem}",
    );
    on_small_fs(&dir, 16 * MIB, || {
        let err = storage_err(&e, &v);
        assert!(
            err.starts_with("spec.volumes[0].persistentVolumeClaim: unable to create the disk image of volume data: not enough space, demanded size 67108864 B is bigger than the available space"),
            "{err}"
        );
        assert!(
            err.ends_with("also after taking 10 % toleration into account"),
            "{err}"
        );
        assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
        // 60 MiB requested on 64 MiB with the reserve: within 10 %, the image
        // gets what is free (aligned down to 1 MiB).
    });
    on_small_fs(&dir, 64 * MIB, || {
        prepare(&v, &e.ctx, &PrepareOptions::default()).unwrap();
        let len = fs::metadata(dir.join("disk.img")).unwrap().len();
        assert_eq!(
            len,
            63 * MIB,
            "room minus the 128 KiB reserve, aligned down"
        );
        assert_eq!(entries(&dir), ["disk.img"]);
    });
    // With toleration 0 the same claim is refused.
    let strict = PrepareOptions {
        space: SpacePolicy {
            less_pvc_space_toleration: 0,
            ..SpacePolicy::default()
        },
        ..PrepareOptions::default()
    };
    on_small_fs(&dir, 64 * MIB, || {
        let err = prepare(&v, &e.ctx, &strict).unwrap_err().to_string();
        assert!(err.contains("after taking 0 % toleration"), "{err}");
        assert!(entries(&dir).is_empty());
    });
}

#[test]
fn full_file_system_while_writing_the_image_leaves_no_partial_file() {
    let e = env();
    let dir = claim_dir(&e);
    let image = dir.join("disk.img");
    on_small_fs(&dir, 4 * MIB, || {
        // Fill the file system to the last block.
        let filler = dir.join("filler");
        let mut f = fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5u8; 64 * 1024];
        while std::io::Write::write_all(&mut f, &chunk).is_ok() {}
        drop(f);
        let before = entries(&dir);
        // A probe that believes there is room (the file system filled up
        // between the check and the write): the write itself fails.
        let err = pvc::create_image(
            "spec.volumes[0].persistentVolumeClaim",
            "data",
            &image,
            8 * MIB,
            SpacePolicy::default(),
            &|_| Ok(1 << 40),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("spec.volumes[0].persistentVolumeClaim: unable to create the disk image of volume data: "),
            "{err}"
        );
        assert!(err.contains("has no space left"), "{err}");
        assert_eq!(entries(&dir), before, "a partial image was left behind");
        // Through prepare (the real probe): refused before writing.
        let v = claim_vmi(
            "persistentVolumeClaim: {claimName: c}",
            "{capacity: {storage: 8Mi}}",
        );
        let err = storage_err(&e, &v);
        assert!(err.contains("volume data: not enough space"), "{err}");
        assert_eq!(entries(&dir), before);
    });
}

#[test]
fn disk_img_link_out_of_the_claim_and_missing_claims_are_refused() {
    let e = env();
    let dir = claim_dir(&e);
    let outside = e.root.join("outside.img");
    fs::write(&outside, b"host file").unwrap();
    symlink(&outside, dir.join("disk.img")).unwrap();
    let v = claim_vmi(
        "persistentVolumeClaim: {claimName: c}",
        "{capacity: {storage: 8Mi}}",
    );
    let err = storage_err(&e, &v);
    assert!(
        err.starts_with("spec.volumes[0].persistentVolumeClaim: ")
            && err.ends_with("vmi-disks/data/disk.img is a symbolic link; refusing to use it"),
        "{err}"
    );
    assert_eq!(fs::read(&outside).unwrap(), b"host file");
    // A dangling link (to where an image would be created) is refused too,
    // and nothing is created at its target.
    fs::remove_file(dir.join("disk.img")).unwrap();
    let target = e.root.join("planted.img");
    symlink(&target, dir.join("disk.img")).unwrap();
    assert!(prepare(&v, &e.ctx, &PrepareOptions::default()).is_err());
    assert!(!target.exists());
    // The claim directory itself a link: refused, nothing created.
    fs::remove_dir_all(&dir).unwrap();
    let elsewhere = e.root.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, &dir).unwrap();
    let err = storage_err(&e, &v);
    assert!(
        err.ends_with("vmi-disks/data is a symbolic link; refusing to write through it"),
        "{err}"
    );
    assert!(entries(&elsewhere).is_empty());
    // No claim directory (not mounted): refused, not created.
    fs::remove_file(&dir).unwrap();
    let err = storage_err(&e, &v);
    assert!(
        err.contains("does not exist (is the claim mounted?)"),
        "{err}"
    );
    assert!(!dir.exists());
    // No status: nothing says how large the image should be.
    fs::create_dir(&dir).unwrap();
    let bare = load_bare();
    let err = storage_err(&e, &bare);
    assert!(
        err.contains("status.volumeStatus gives no claim size to create it"),
        "{err}"
    );
    assert!(entries(&dir).is_empty());
}

fn load_bare() -> VirtualMachineInstance {
    let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: s}\nspec:\n  domain: {memory: {guest: 64Mi}}\n  volumes:\n  - name: data\n    persistentVolumeClaim: {claimName: c}\n";
    api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap()
}

#[test]
fn expand_disks_grows_the_image_to_the_usable_size_only_when_enabled() {
    let mut e = env();
    let dir = claim_dir(&e);
    let image = dir.join("disk.img");
    // A sparse image with data at its start.
    fs::write(&image, b"GUEST-DATA").unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(&image)
        .unwrap()
        .set_len(16 * MIB)
        .unwrap();
    let v = claim_vmi(
        "persistentVolumeClaim: {claimName: c}",
        "{capacity: {storage: 64Mi}, requests: {storage: 64Mi}, filesystemOverhead: '0.25', volumeMode: Filesystem}",
    );
    // Feature gate off: untouched.
    prepare(&v, &e.ctx, &PrepareOptions::default()).unwrap();
    assert_eq!(fs::metadata(&image).unwrap().len(), 16 * MIB);
    // Domain already running (no offline step): untouched.
    e.ctx.expand_disks_enabled = true;
    let running = PrepareOptions {
        rebuild_media: false,
        ..PrepareOptions::default()
    };
    prepare(&v, &e.ctx, &running).unwrap();
    assert_eq!(fs::metadata(&image).unwrap().len(), 16 * MIB);
    // Before start: (1 − 0.25) × 64 MiB = 48 MiB, data kept, still sparse.
    prepare(&v, &e.ctx, &PrepareOptions::default()).unwrap();
    let m = fs::metadata(&image).unwrap();
    assert_eq!(m.len(), 48 * MIB);
    assert!(m.blocks() * 512 < 32 * MIB, "grown part allocated");
    assert_eq!(&fs::read(&image).unwrap()[..10], b"GUEST-DATA");
    // Never shrunk.
    let smaller = claim_vmi(
        "persistentVolumeClaim: {claimName: c}",
        "{capacity: {storage: 8Mi}, requests: {storage: 8Mi}, filesystemOverhead: '0'}",
    );
    prepare(&smaller, &e.ctx, &PrepareOptions::default()).unwrap();
    assert_eq!(fs::metadata(&image).unwrap().len(), 48 * MIB);
    // A fully allocated image grows fully allocated (falloc).
    fs::remove_file(&image).unwrap();
    let mut c = std::process::Command::new("qemu-img");
    c.args(["create", "-f", "raw", "-o", "preallocation=full"])
        .arg(&image)
        .arg("8M");
    process::run(c, std::time::Duration::from_secs(30), 4096).unwrap();
    prepare(&v, &e.ctx, &PrepareOptions::default()).unwrap();
    let m = fs::metadata(&image).unwrap();
    assert_eq!(m.len(), 48 * MIB);
    assert!(
        preallocated(&image),
        "{} of {} bytes allocated",
        m.blocks() * 512,
        m.len()
    );
}
