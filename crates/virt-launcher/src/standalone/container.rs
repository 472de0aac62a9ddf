//! The stand-in's last step for `run --run-as-nonroot`: the launcher proper
//! gets the compute container's credentials, as virt-controller renders
//! them for a non-root VMI (`template.go`, `rendercontainer.go`): uid and
//! gid 107, no supplementary groups, capabilities dropped but
//! `NET_BIND_SERVICE` (ambient, as virt-launcher-monitor passes it on, so
//! the daemons and the DHCP servers have it too), no privilege escalation
//! (`allowPrivilegeEscalation: false` is `no_new_privs`).
//!
//! Everything root had to do (state directory, mount namespace, bind
//! mounts, the pod network) is done before; the rest of the start-up
//! sequence runs exactly as in a non-root pod.

#![allow(unsafe_code)]

use std::path::Path;

use nix::unistd::{Gid, Uid};

use crate::error::LauncherError;
use crate::pod::PodMount;
use crate::user::{NON_ROOT_UID, SESSION_ENV};

/// `CAP_NET_BIND_SERVICE` (linux/capability.h).
const CAP_NET_BIND_SERVICE: u32 = 10;
/// `_LINUX_CAPABILITY_VERSION_3`.
const CAP_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn err(what: &str, e: impl std::fmt::Display) -> LauncherError {
    LauncherError::runtime(format!(
        "cannot enter the non-root compute container ({what}): {e}"
    ))
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// The launcher image's user and group `qemu` (107), for the files of the
/// host that lack them: the host's `/etc/passwd` and `/etc/group` with the
/// entry added, mounted over them in the launcher's mount namespace only
/// (the host's files are never changed). libvirt's session daemon looks
/// its user up. Nothing when the host has both ids already.
///
/// # Errors
/// [`LauncherError`] (runtime) when a file cannot be read.
pub fn identity_files() -> Result<Vec<PodMount>, LauncherError> {
    let id = NON_ROOT_UID;
    let mut out = Vec::new();
    for (file, rel, entry) in [
        (
            "/etc/passwd",
            "passwd",
            format!("qemu:x:{id}:{id}:qemu user:/var/run/kubevirt-private:/usr/sbin/nologin\n"),
        ),
        ("/etc/group", "group", format!("qemu:x:{id}:\n")),
    ] {
        let text = std::fs::read_to_string(file).map_err(|e| err(&format!("read {file}"), e))?;
        if text.len() > 4 << 20 {
            return Err(err(file, "over 4 MiB"));
        }
        let has = text
            .lines()
            .any(|l| l.split(':').nth(2) == Some(id.to_string().as_str()));
        if has {
            continue;
        }
        let mut contents = text;
        if !contents.is_empty() && !contents.ends_with('\n') {
            contents.push('\n');
        }
        contents.push_str(&entry);
        out.push(PodMount::StateFile {
            rel,
            contents,
            target: file.into(),
        });
    }
    Ok(out)
}

/// What uid/gid `id` (no supplementary groups) may do with a file of
/// metadata `m`, by its mode bits: (read, write, search/execute).
pub(crate) fn access(m: &std::fs::Metadata, id: u32) -> (bool, bool, bool) {
    use std::os::unix::fs::MetadataExt;
    let mode = m.mode();
    let bits = if m.uid() == id {
        mode >> 6
    } else if m.gid() == id {
        mode >> 3
    } else {
        mode
    } & 0o7;
    (bits & 4 != 0, bits & 2 != 0, bits & 1 != 0)
}

/// Before anything starts: the user's files a non-root launcher (uid/gid
/// `id`) and its QEMU must open are open to that user. In a pod kubelet's
/// `fsGroup` and virt-handler's non-root set-up give them to 107; the
/// stand-in never changes the ownership of the user's files, so a file or
/// directory 107 cannot use is refused, naming it and where it would be
/// mounted.
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) naming `--run-as-nonroot`.
pub fn check_access(mounts: &[PodMount], id: u32) -> Result<(), LauncherError> {
    let refuse = |path: &Path, target: &Path, need: &str| {
        LauncherError::input_at(
            "--run-as-nonroot",
            format!(
                "uid {id} (KubeVirt's non-root qemu user) cannot {need} {} (for {}); give it to uid {id} (chown {id}:{id}) as virt-handler does in a non-root pod, or run as root",
                path.display(),
                target.display()
            ),
        )
    };
    let meta = |p: &Path| std::fs::metadata(p).ok();
    for m in mounts {
        match m {
            PodMount::File {
                source,
                target,
                read_only,
            } => {
                let Some(md) = meta(source) else { continue };
                let (r, w, _) = access(&md, id);
                if !r || (!read_only && !w) {
                    let need = if *read_only { "read" } else { "read and write" };
                    return Err(refuse(source, target, need));
                }
            }
            PodMount::Dir {
                source,
                target,
                read_only,
            } => {
                let Some(md) = meta(source) else { continue };
                let (r, w, x) = access(&md, id);
                if !r || !x || (!read_only && !w) {
                    return Err(refuse(source, target, "use the directory"));
                }
                let img = source.join("disk.img");
                if let Some(md) = meta(&img) {
                    let (r, w, _) = access(&md, id);
                    if !r || (!read_only && !w) {
                        return Err(refuse(&img, target, "read and write"));
                    }
                }
            }
            PodMount::WritableDir { source, target } => {
                // Created by the stand-in when missing: then its parent counts.
                let existing = if source.exists() {
                    source.clone()
                } else {
                    source.parent().unwrap_or(source).to_path_buf()
                };
                let Some(md) = meta(&existing) else { continue };
                let (r, w, x) = access(&md, id);
                if !r || !w || !x {
                    return Err(refuse(&existing, target, "write to the directory"));
                }
            }
            PodMount::State { .. } | PodMount::StateFile { .. } | PodMount::Devices { .. } => {}
        }
    }
    Ok(())
}

/// Sets the compute container's environment (`template.go`) for the
/// launcher proper: KubeVirt's session variables, and `HOME` as the image's
/// `qemu` user has it. Called before the launcher proper starts threads
/// that read the environment.
fn container_env() {
    for (k, v) in SESSION_ENV {
        std::env::set_var(k, v);
    }
    std::env::set_var("HOME", "/var/run/kubevirt-private");
}

/// Becomes uid/gid `id` with only `CAP_NET_BIND_SERVICE` (effective,
/// permitted, inheritable and ambient; every other capability leaves the
/// bounding set), sets `no_new_privs`, and stays dumpable (so that the
/// daemons, running as the same user, may open `/proc/<launcher>/fd/...`
/// as in a pod). Irreversible. Every thread changes user (glibc applies
/// `setresuid` to all threads); threads started later inherit the
/// capabilities of the calling thread, so this is called from the thread
/// that goes on to start the daemons.
///
/// # Errors
/// [`LauncherError`] (runtime) when a step fails; the process must then
/// not go on.
pub fn enter_non_root(id: u32) -> Result<(), LauncherError> {
    for cap in 0..=last_cap() {
        if cap == CAP_NET_BIND_SERVICE {
            continue;
        }
        // SAFETY: prctl with integer arguments only.
        let r = unsafe {
            libc::prctl(
                libc::PR_CAPBSET_DROP,
                libc::c_ulong::from(cap),
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            // A number the kernel does not know is no capability to drop.
            if e.raw_os_error() != Some(libc::EINVAL) {
                return Err(err("PR_CAPBSET_DROP", e));
            }
        }
    }
    nix::unistd::setgroups(&[]).map_err(|e| err("setgroups", e))?;
    let gid = Gid::from_raw(id);
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| err("setresgid", e))?;
    nix::sys::prctl::set_keepcaps(true).map_err(|e| err("PR_SET_KEEPCAPS", e))?;
    let uid = Uid::from_raw(id);
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| err("setresuid", e))?;
    let bit = 1u32 << CAP_NET_BIND_SERVICE;
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [
        CapData {
            effective: bit,
            permitted: bit,
            inheritable: bit,
        },
        CapData::default(),
    ];
    // SAFETY: capset reads one header and two data structs of the
    // version-3 layout, which both pointers point to.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capset,
            std::ptr::addr_of_mut!(header),
            data.as_ptr(),
        )
    };
    if r != 0 {
        return Err(err("capset", std::io::Error::last_os_error()));
    }
    // SAFETY: prctl with integer arguments only.
    let r = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
            libc::c_ulong::from(CAP_NET_BIND_SERVICE),
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if r != 0 {
        return Err(err("PR_CAP_AMBIENT_RAISE", std::io::Error::last_os_error()));
    }
    nix::sys::prctl::set_keepcaps(false).map_err(|e| err("PR_SET_KEEPCAPS", e))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| err("PR_SET_NO_NEW_PRIVS", e))?;
    // A credential change makes the process undumpable, so its /proc files
    // would belong to root; in a pod it was never anyone else.
    nix::sys::prctl::set_dumpable(true).map_err(|e| err("PR_SET_DUMPABLE", e))?;
    crate::pidns::rearm_after_credential_change()?;
    container_env();
    tracing::info!(
        uid = id,
        gid = id,
        "running as the non-root compute container: only CAP_NET_BIND_SERVICE"
    );
    Ok(())
}

/// Gives the tree below `root` (not crossing into other file systems or
/// following links) to uid/gid `id`: the pod's emptyDirs are writable by
/// the non-root launcher through `fsGroup`, the stand-in's by ownership.
///
/// # Errors
/// [`LauncherError`] (runtime) from a stat or chown.
pub fn give_tree(root: &Path, id: u32) -> Result<(), LauncherError> {
    use std::os::unix::fs::MetadataExt;
    let top =
        std::fs::symlink_metadata(root).map_err(|e| err(&format!("stat {}", root.display()), e))?;
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m =
            std::fs::symlink_metadata(&p).map_err(|e| err(&format!("stat {}", p.display()), e))?;
        if m.dev() != top.dev() {
            continue;
        }
        std::os::unix::fs::lchown(&p, Some(id), Some(id))
            .map_err(|e| err(&format!("chown {}", p.display()), e))?;
        if m.is_dir() {
            for entry in
                std::fs::read_dir(&p).map_err(|e| err(&format!("read {}", p.display()), e))?
            {
                let entry = entry.map_err(|e| err(&format!("read {}", p.display()), e))?;
                stack.push(entry.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    fn file(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, b"x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn the_qemu_user_must_be_able_to_use_what_is_mounted_for_it() {
        let d = tempfile::tempdir().unwrap();
        let target = PathBuf::from("/var/run/kubevirt-private/vmi-disks/v/disk.img");
        let mount = |source: PathBuf, read_only| PodMount::File {
            source,
            target: target.clone(),
            read_only,
        };
        let other = |p: &Path| {
            let m = std::fs::metadata(p).unwrap();
            std::os::unix::fs::MetadataExt::uid(&m) != 107
                && std::os::unix::fs::MetadataExt::gid(&m) != 107
        };
        // World-readable is enough for a read-only image, not for a writable one.
        let ro = file(d.path(), "ro.img", 0o644);
        assert!(other(&ro));
        check_access(&[mount(ro.clone(), true)], 107).unwrap();
        let e = check_access(&[mount(ro.clone(), false)], 107).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("--run-as-nonroot: uid 107"), "{text}");
        assert!(text.contains("cannot read and write"), "{text}");
        assert_eq!(e.exit_code(), 2);
        let private = file(d.path(), "private.img", 0o600);
        assert!(check_access(&[mount(private, true)], 107).is_err());
        // The owner's bits count for the owner.
        let owned = file(d.path(), "owned.img", 0o600);
        std::os::unix::fs::chown(&owned, Some(107), Some(107)).unwrap();
        check_access(&[mount(owned, false)], 107).unwrap();
        // A directory the stand-in would create: its parent must be writable.
        let dir = PodMount::WritableDir {
            source: d.path().join("nvram"),
            target: "/x".into(),
        };
        assert!(check_access(std::slice::from_ref(&dir), 107).is_err());
    }

    #[test]
    fn give_tree_stays_on_its_file_system_and_never_follows_links() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = file(outside.path(), "victim", 0o644);
        std::fs::create_dir(d.path().join("sub")).unwrap();
        file(&d.path().join("sub"), "f", 0o644);
        std::os::unix::fs::symlink(&victim, d.path().join("sub/link")).unwrap();
        give_tree(d.path(), 107).unwrap();
        let uid =
            |p: &Path| std::os::unix::fs::MetadataExt::uid(&std::fs::symlink_metadata(p).unwrap());
        assert_eq!(uid(d.path()), 107);
        assert_eq!(uid(&d.path().join("sub/f")), 107);
        assert_eq!(uid(&d.path().join("sub/link")), 107, "the link itself");
        assert_ne!(uid(&victim), 107, "not what it points to");
    }
}
