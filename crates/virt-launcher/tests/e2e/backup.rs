//! Backups with checkpoints (KubeVirt main's BackupVirtualMachine and
//! RedefineCheckpoint) on one guest with a hostDisk under changed block
//! tracking (`status.changedBlockTracking.state: Initializing`, the
//! overlay on `--backend-storage`'s `cbt/`): refusals first (an
//! incremental from a checkpoint libvirt does not have, a target file that
//! exists), a full push backup, known blocks written in the guest, a
//! pull backup left running (its NBD export read; a second backup is
//! refused in KubeVirt's words; then it is aborted), an incremental push backup that holds exactly the
//! written ranges, full + incremental restored into a fresh image equal to
//! the guest's disk; then a restarted launcher on the same backend storage
//! redefines the last checkpoint from the disk's bitmaps and takes another
//! incremental, again exactly the newly written range; last, a push
//! backup into a target too small fails with libvirt's reason.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{give_to_qemu_user, guest_vmi, Launcher, Opts, BOOT_TIMEOUT};

const MIB: u64 = 1 << 20;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run a host tool");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The data extents of a qcow2 image itself as (offset, length), merged
/// (libvirt names the disk's image as an incremental's backing file; it
/// is not opened).
fn data_extents(image: &Path) -> Vec<(u64, u64)> {
    let out = run(Command::new("qemu-img")
        .args(["map", "--output=json"])
        .arg(format!(
            "json:{}",
            serde_json::json!({"driver": "qcow2", "backing": null,
                "file": {"driver": "file", "filename": image}})
        )));
    let map: Vec<Value> = serde_json::from_str(&out).unwrap();
    let mut v: Vec<(u64, u64)> = Vec::new();
    for e in map.iter().filter(|e| e["data"] == true && e["depth"] == 0) {
        let (s, l) = (e["start"].as_u64().unwrap(), e["length"].as_u64().unwrap());
        match v.last_mut() {
            Some((ps, pl)) if *ps + *pl == s => *pl += l,
            _ => v.push((s, l)),
        }
    }
    v
}

/// `ctl backup ...`: the record printed (pretty JSON).
fn backup(l: &Launcher, args: &[&str]) -> Result<Value, String> {
    let (ok, out, err) = l.ctl(&[&["backup"], args].concat());
    if ok {
        Ok(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
    } else {
        Err(err)
    }
}

/// Writes `len` random bytes at `offset` of the guest's `/dev/vdb` and
/// flushes them (busybox `dd` through the guest agent).
fn write_in_guest(l: &Launcher, offset: u64, len: u64) {
    let bs = 64 << 10;
    let (ok, out, err) = l.ctl(&[
        "exec",
        "--timeout",
        "120",
        "--",
        "dd",
        "if=/dev/urandom",
        "of=/dev/vdb",
        &format!("bs={bs}"),
        &format!("seek={}", offset / bs),
        &format!("count={}", len / bs),
        "conv=fsync",
    ]);
    assert!(ok, "dd in the guest: {out} {err}");
}

fn guest_sha256(l: &Launcher) -> String {
    let (ok, out, err) = l.ctl(&["exec", "--timeout", "120", "--", "sha256sum", "/dev/vdb"]);
    assert!(ok, "sha256sum in the guest: {out} {err}");
    out.split_whitespace().next().unwrap_or_default().to_owned()
}

fn sha256(p: &Path) -> String {
    run(Command::new("sha256sum").arg(p))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// Full + incremental into a fresh raw image: the incremental's backing
/// file is the full backup (`rebase -u`), then the chain is flattened.
fn restore(full: &Path, inc: &Path, out: &Path) {
    let tmp = out.with_extension("chain.qcow2");
    std::fs::copy(inc, &tmp).unwrap();
    let info: Value = serde_json::from_str(&run(Command::new("qemu-img")
        .args(["info", "--output=json"])
        .arg(full)))
    .unwrap();
    let format = info["format"].as_str().unwrap().to_owned();
    run(Command::new("qemu-img")
        .args(["rebase", "-u", "-f", "qcow2", "-F", &format, "-b"])
        .arg(full)
        .arg(&tmp));
    run(Command::new("qemu-img")
        .args(["convert", "-f", "qcow2", "-O", "raw"])
        .arg(&tmp)
        .arg(out));
}

fn start(yaml: &str, backend: &Path) -> Launcher {
    let backend = backend.display().to_string();
    let mut l = Launcher::start(
        yaml,
        &Opts {
            args: &["--backend-storage", &backend],
            ..Opts::default()
        },
    );
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    l
}

#[test]
fn backup_full_incremental_restore_and_redefined_checkpoint() {
    let host = tempfile::tempdir().unwrap();
    let backend = tempfile::tempdir().unwrap();
    let target = tempfile::tempdir().unwrap();
    for d in [host.path(), backend.path(), target.path()] {
        give_to_qemu_user(d);
    }
    let img = host.path().join("data.img");
    let yaml = guest_vmi("backup", "virtio").replace(
        "  - name: scratch\n    emptyDisk: {capacity: 64Mi}\n",
        &format!(
            "  - name: scratch\n    hostDisk: {{path: {}, type: DiskOrCreate, capacity: 32Mi}}\nstatus:\n  changedBlockTracking: {{state: Initializing}}\n",
            img.display()
        ),
    );
    let t = target.path().display().to_string();
    let vmi_dir: PathBuf = target.path().join("backup");
    let mut l = start(&yaml, backend.path());
    let xml = l.domain_xml();
    assert!(xml.contains("<dataStore type='file'>"), "{xml}");
    let overlay = backend.path().join("cbt/scratch.qcow2");
    assert!(overlay.is_file(), "the overlay is on the backend storage");

    // Refusals: an incremental from a checkpoint libvirt does not have
    // (libvirt's words), nothing left in the target, the guest running.
    let e = backup(
        &l,
        &[
            "b0",
            "--target",
            &t,
            "--skip-quiesce",
            "--incremental",
            "nosuch",
            "--wait",
            "300",
        ],
    )
    .unwrap_err();
    assert!(e.contains("nosuch"), "{e}");
    assert!(!vmi_dir.exists(), "what the refused backup made is removed");

    // Full backup, quiesced through the agent.
    let full = backup(
        &l,
        &[
            "b1",
            "--target",
            &t,
            "--start-time",
            "2026-01-01T00:00:01Z",
            "--wait",
            "600",
        ],
    )
    .unwrap();
    assert_eq!(full["CheckpointName"], "b1-2026-01-01_00-00-01", "{full}");
    assert_eq!(full["Completed"], true);
    assert_eq!(full["Failed"], false);
    assert_eq!(full["Volumes"], r#"[{"volumeName":"scratch"}]"#);
    assert_eq!(full["Mode"], "Push");
    assert!(full["EndTimestamp"].is_string(), "{full}");
    let full_file = vmi_dir.join("b1-2026-01-01_00-00-01/b1-scratch.qcow2");
    assert!(full_file.is_file(), "{}", full_file.display());

    // The same backup again: KubeVirt's words.
    let e = backup(
        &l,
        &["b1", "--target", &t, "--start-time", "2026-01-01T00:00:01Z"],
    )
    .unwrap_err();
    assert!(
        e.contains("backup b1 that started at 2026-01-01T00:00:01Z already executed"),
        "{e}"
    );

    // Known blocks (aligned to the overlay's 256 KiB bitmap granularity).
    write_in_guest(&l, MIB, 256 << 10);
    write_in_guest(&l, 20 * MIB, 512 << 10);

    // A pull backup runs until it is aborted; a second backup meanwhile is
    // refused in KubeVirt's words.
    let pull = backup(
        &l,
        &[
            "p1",
            "--pull",
            "--target",
            &t,
            "--skip-quiesce",
            "--start-time",
            "2026-01-01T00:00:02Z",
        ],
    )
    .unwrap();
    assert_eq!(pull["Completed"], false, "{pull}");
    let e = backup(&l, &["b9", "--target", &t, "--skip-quiesce"]).unwrap_err();
    assert!(
        e.contains("backup p1 already in progress, need to wait for completion"),
        "{e}"
    );
    // The pull backup's NBD export is the disk at the backup's start.
    let sock = l.state.join("share/sockets/backup-nbd-sock");
    let pulled = target.path().join("pulled.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw"])
        .arg(format!("nbd+unix:///scratch?socket={}", sock.display()))
        .arg(&pulled));
    assert_eq!(sha256(&pulled), sha256(&img), "the pulled disk is the disk");
    let (ok, _, err) = l.ctl(&["backup-abort", "p1", "--start-time", "2026-01-01T00:00:02Z"]);
    assert!(ok, "{err}");

    // Incremental from b1: exactly the written ranges.
    let inc = wait_incremental(
        &l,
        &t,
        "b2",
        "2026-01-01T00:00:03Z",
        "b1-2026-01-01_00-00-01",
    );
    let inc_file = vmi_dir.join("b2-2026-01-01_00-00-03/b2-scratch.qcow2");
    assert_eq!(inc["CheckpointName"], "b2-2026-01-01_00-00-03");
    assert_eq!(
        data_extents(&inc_file),
        [(MIB, 256 << 10), (20 * MIB, 512 << 10)],
        "the incremental holds the written ranges only"
    );
    let restored = target.path().join("restored.raw");
    restore(&full_file, &inc_file, &restored);
    let guest = guest_sha256(&l);
    assert_eq!(
        sha256(&restored),
        guest,
        "full + incremental = the guest's disk"
    );
    assert_eq!(sha256(&img), guest, "the raw data store is the disk");

    // A target file that exists is refused, and left as it was.
    let dir = vmi_dir.join("b3-2026-01-01_00-00-04");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("b3-scratch.qcow2"), b"mine").unwrap();
    let e = backup(
        &l,
        &[
            "b3",
            "--target",
            &t,
            "--skip-quiesce",
            "--start-time",
            "2026-01-01T00:00:04Z",
        ],
    )
    .unwrap_err();
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(
        std::fs::read(dir.join("b3-scratch.qcow2")).unwrap(),
        b"mine"
    );

    // A restarted launcher: libvirt has no checkpoints; the bitmaps on the
    // overlay redefine the last one, and an incremental from it holds the
    // range written since.
    l.stop(Duration::from_secs(120));
    // A 1 MiB file system, mounted before QEMU starts (QEMU has a mount
    // namespace of its own).
    let small = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(small.path())
        .status()
        .unwrap();
    assert!(mounted.success());
    let _unmount = Unmount(small.path().to_path_buf());
    give_to_qemu_user(small.path());
    let mut l = start(&yaml, backend.path());
    let (ok, _, err) = l.ctl(&["redefine-checkpoint", "nosuch"]);
    assert!(
        !ok && err.contains("no disks found with checkpoint bitmap nosuch")
            && err.contains("checkpointInvalid: true"),
        "{err}"
    );
    let (ok, out, err) = l.ctl(&[
        "redefine-checkpoint",
        "b2-2026-01-01_00-00-03",
        "--start-time",
        "2026-01-01T00:00:03Z",
    ]);
    assert!(ok, "{out} {err}");
    write_in_guest(&l, 8 * MIB, 256 << 10);
    wait_incremental(
        &l,
        &t,
        "b4",
        "2026-01-01T00:00:05Z",
        "b2-2026-01-01_00-00-03",
    );
    let inc4 = vmi_dir.join("b4-2026-01-01_00-00-05/b4-scratch.qcow2");
    assert_eq!(data_extents(&inc4), [(8 * MIB, 256 << 10)]);
    // A target too small for the disk (its data, not zeros, must be
    // copied): the job fails, its record says why.
    let st = small.path().display().to_string();
    let e = backup(
        &l,
        &["bs", "--target", &st, "--skip-quiesce", "--wait", "600"],
    )
    .unwrap_err();
    assert!(e.contains("backup bs failed: "), "{e}");
    assert!(e.to_lowercase().contains("space"), "{e}");

    l.stop_and_check(Duration::from_secs(120));
}

/// An incremental push backup; while an aborted one is still being
/// recorded as ended (libvirt's event), KubeVirt's refusal is retried.
/// Unmounts a test's file system when dropped.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn wait_incremental(l: &Launcher, t: &str, name: &str, start: &str, from: &str) -> Value {
    let args = [
        name,
        "--target",
        t,
        "--skip-quiesce",
        "--start-time",
        start,
        "--incremental",
        from,
        "--wait",
        "600",
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let r = loop {
        match backup(l, &args) {
            Ok(r) => break r,
            Err(e) if e.contains("already in progress") && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(r["Completed"], true, "{r}");
    assert_eq!(r["Failed"], false, "{r}");
    r
}
