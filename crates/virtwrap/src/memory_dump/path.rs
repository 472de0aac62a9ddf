//! Where a dump may go and what is removed before one: the checks of
//! `dumpPath` and the removal of earlier dumps and of private directories
//! left by a crashed dump.

use std::path::{Component, Path, PathBuf};

use nix::sys::statfs;

use super::{MemoryDumpError, TMP_DIR_PREFIX};

/// Files whose name contains this are earlier dumps, removed before a new
/// dump (virt-handler names dumps `<vm>-<volume>-<timestamp>.memory.dump`).
pub const DUMP_NAME_MARK: &str = "memory.dump";

/// Longest file name Linux accepts (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// File systems no dump is written into (`statfs` `f_type`): their files
/// are kernel interfaces (`/proc/sys/vm/drop_caches`), not storage.
/// devtmpfs reports tmpfs's magic and cannot be told apart here; its
/// device nodes are refused as not regular files.
const PSEUDO_FILE_SYSTEMS: [(statfs::FsType, &str); 6] = [
    (statfs::PROC_SUPER_MAGIC, "procfs"),
    (statfs::SYSFS_MAGIC, "sysfs"),
    (statfs::CGROUP_SUPER_MAGIC, "cgroup"),
    (statfs::CGROUP2_SUPER_MAGIC, "cgroup2"),
    (statfs::DEBUGFS_MAGIC, "debugfs"),
    (statfs::SECURITYFS_MAGIC, "securityfs"),
];

/// The name of `fs` when it is a file system of kernel interfaces
/// (procfs, sysfs, cgroup, debugfs, securityfs), whose files are no
/// storage: no dump goes there, and no image is taken from there.
#[must_use]
pub fn kernel_interface_fs(fs: &statfs::Statfs) -> Option<&'static str> {
    let t = fs.filesystem_type();
    PSEUDO_FILE_SYSTEMS
        .iter()
        .find(|(m, _)| *m == t)
        .map(|(_, kind)| *kind)
}

/// Checks `dumpPath` of a MemoryDumpRequest and returns it as a path.
///
/// Accepted: an absolute path without `..` components, NUL bytes or a
/// trailing `/`, whose file name has at most 255 bytes, whose directory
/// exists and is a directory (not a symbolic link to one) on a file system
/// that stores files (not procfs, sysfs, cgroup, debugfs or securityfs),
/// and whose file,
/// if it exists, is a regular file (a symbolic link, directory or device
/// there is never written through). When `hotplug_dir` is given (in a
/// pod: `--hotplug-disk-dir`, `/var/run/kubevirt/hotplug-disks`), the path
/// must also be `<hotplug_dir>/<volume>/<file>`, where virt-handler mounts
/// the memory dump volume and builds every `dumpPath` (KubeVirt
/// `memoryDumpPath`: the volume's mount directory joined with its
/// `targetFileName`).
///
/// # Errors
/// [`MemoryDumpError::EmptyPath`] or [`MemoryDumpError::Path`]: one line
/// naming `dumpPath` and the problem.
pub fn check_dump_path(
    dump_path: &str,
    hotplug_dir: Option<&Path>,
) -> Result<PathBuf, MemoryDumpError> {
    let bad = |why: &str| {
        Err(MemoryDumpError::Path {
            dump_path: dump_path.to_owned(),
            reason: why.to_owned(),
        })
    };
    if dump_path.is_empty() {
        return Err(MemoryDumpError::EmptyPath);
    }
    if dump_path.contains('\0') {
        return bad("contains a NUL character");
    }
    let path = Path::new(dump_path);
    if !path.is_absolute() {
        return bad("is relative; give an absolute path");
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return bad("contains a `..` component");
    }
    if dump_path.ends_with('/') {
        return bad("ends with `/`; it must name a file");
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return bad("names no file");
    };
    if name.len() > NAME_MAX {
        return bad(&format!("has a file name longer than {NAME_MAX} bytes"));
    }
    if let Some(base) = hotplug_dir {
        let in_volume = dir.parent() == Some(base)
            && matches!(dir.components().next_back(), Some(Component::Normal(_)));
        if !in_volume {
            return bad(&format!(
                "is not a file of a volume under {} (where virt-handler mounts the memory dump volume)",
                base.display()
            ));
        }
    }
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(m) if m.is_symlink() => {
            return bad(&format!(
                "is in {}, a symbolic link (refused)",
                dir.display()
            ))
        }
        Ok(_) => {
            return bad(&format!(
                "is in {}, which is not a directory",
                dir.display()
            ))
        }
        Err(e) => return bad(&format!("is in {}: {e}", dir.display())),
    }
    match statfs::statfs(dir) {
        Ok(fs) => {
            if let Some(kind) = kernel_interface_fs(&fs) {
                return bad(&format!(
                    "is in {}, on {kind}, a kernel interface (refused)",
                    dir.display()
                ));
            }
        }
        Err(e) => return bad(&format!("is in {}: {e}", dir.display())),
    }
    match regular_or_absent(path) {
        Ok(()) => Ok(path.to_owned()),
        Err(why) => bad(&why),
    }
}

/// `Ok` when nothing is at `path` or a regular file is; else why not.
pub(super) fn regular_or_absent(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) if m.is_symlink() => Err("is a symbolic link (never written through)".into()),
        Ok(_) => Err("exists and is not a regular file".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot be checked: {e}")),
    }
}

/// Removes the earlier dumps in `dir`: the regular files directly in it
/// whose name contains [`DUMP_NAME_MARK`] (KubeVirt's
/// `removePreviousMemoryDump`). Symbolic links, directories and other
/// files are left alone (a link is never followed). Failures are logged
/// and skipped: the dump is tried anyway, as in KubeVirt. Returns the
/// files removed.
pub fn remove_previous_dumps(dir: &Path) -> Vec<PathBuf> {
    remove_entries(dir, "an older memory dump", |name, kind| {
        kind.is_file() && name.contains(DUMP_NAME_MARK)
    })
}

/// Removes the private directories ([`TMP_DIR_PREFIX`]) directly in `dir`
/// that a dump which crashed the launcher left behind, with what is in
/// them. Entries that are not directories (a symbolic link named like one)
/// are left alone and nothing is followed (`remove_dir_all` never follows
/// links). Called only while no dump runs (one at a time). Failures are
/// logged and skipped. Returns the directories removed.
pub fn remove_stale_tmp_dirs(dir: &Path) -> Vec<PathBuf> {
    remove_entries(dir, "a stale memory dump directory", |name, kind| {
        kind.is_dir() && name.starts_with(TMP_DIR_PREFIX)
    })
}

/// Removes the entries directly in `dir` for which `wanted(name, type)`
/// holds, the type as `lstat` gives it (a link is never followed;
/// `remove_dir_all` does not follow links either). Failures are logged as
/// failures to remove `what` and skipped. Returns what was removed.
fn remove_entries(
    dir: &Path,
    what: &str,
    wanted: impl Fn(&str, std::fs::FileType) -> bool,
) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "failed to remove {what}: {e}");
            return Vec::new();
        }
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        // DirEntry::file_type does not follow symbolic links.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !wanted(&entry.file_name().to_string_lossy(), kind) {
            continue;
        }
        let path = entry.path();
        let res = if kind.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match res {
            Ok(()) => removed.push(path),
            Err(e) => {
                tracing::warn!(entry = %path.display(), "failed to remove {what}: {e}");
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn only_regular_dump_files_of_the_directory_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("important.memory.dump");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("link.memory.dump")).unwrap();
        std::fs::create_dir(dir.path().join("sub.memory.dump")).unwrap();
        std::fs::write(dir.path().join("sub.memory.dump/inner.memory.dump"), b"x").unwrap();
        std::fs::write(dir.path().join("old.memory.dump"), b"x").unwrap();
        std::fs::write(dir.path().join("old.memory.dump.partial"), b"x").unwrap();
        std::fs::write(dir.path().join("disk.img"), b"x").unwrap();
        let mut removed = remove_previous_dumps(dir.path());
        removed.sort();
        assert_eq!(
            removed,
            vec![
                dir.path().join("old.memory.dump"),
                dir.path().join("old.memory.dump.partial")
            ]
        );
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(dir.path().join("link.memory.dump").is_symlink());
        assert!(dir
            .path()
            .join("sub.memory.dump/inner.memory.dump")
            .exists());
        assert!(dir.path().join("disk.img").exists());
        // A missing directory: nothing removed, no panic.
        assert!(remove_previous_dumps(&dir.path().join("gone")).is_empty());
    }

    #[test]
    fn dump_paths_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap().to_owned();
        let ok = format!("{d}/vm.memory.dump");
        assert_eq!(check_dump_path(&ok, None).unwrap(), PathBuf::from(&ok));
        std::fs::write(format!("{d}/existing.memory.dump"), b"").unwrap();
        check_dump_path(&format!("{d}/existing.memory.dump"), None).unwrap();
        std::fs::create_dir(format!("{d}/sub")).unwrap();
        std::os::unix::fs::symlink(format!("{d}/sub"), format!("{d}/linkdir")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", format!("{d}/planted.memory.dump")).unwrap();
        let long = "x".repeat(256);
        for (path, want) in [
            (
                String::new(),
                "dumpPath: is empty; give the absolute path of the dump file".to_owned(),
            ),
            (
                "x.memory.dump".into(),
                "dumpPath: \"x.memory.dump\" is relative; give an absolute path".into(),
            ),
            (format!("{d}/../x"), "contains a `..` component".into()),
            (format!("{d}/"), "ends with `/`; it must name a file".into()),
            ("/".into(), "ends with `/`; it must name a file".into()),
            (format!("{d}/a\0b"), "contains a NUL character".into()),
            (
                format!("{d}/{long}"),
                "has a file name longer than 255 bytes".into(),
            ),
            (
                format!("{d}/missing/x.memory.dump"),
                "No such file or directory".into(),
            ),
            (
                format!("{d}/existing.memory.dump/x"),
                "which is not a directory".into(),
            ),
            (
                format!("{d}/linkdir/x.memory.dump"),
                "a symbolic link (refused)".into(),
            ),
            (
                format!("{d}/planted.memory.dump"),
                "is a symbolic link (never written through)".into(),
            ),
            (
                format!("{d}/sub"),
                "exists and is not a regular file".into(),
            ),
            (
                "/proc/sys/vm/drop_caches".into(),
                "is in /proc/sys/vm, on procfs, a kernel interface (refused)".into(),
            ),
            (
                "/sys/kernel/x.memory.dump".into(),
                "on sysfs, a kernel interface (refused)".into(),
            ),
        ] {
            let e = check_dump_path(&path, None).expect_err(&path).to_string();
            assert!(
                e.starts_with("dumpPath: ") && e.contains(&want),
                "{path:?}: {e}"
            );
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }

    #[test]
    fn in_a_pod_only_files_of_a_hotplug_volume_are_accepted() {
        let hotplug = tempfile::tempdir().unwrap();
        let base = hotplug.path();
        std::fs::create_dir(base.join("memvol")).unwrap();
        std::fs::create_dir_all(base.join("memvol/deeper")).unwrap();
        let ok = base.join("memvol/vm-memvol-20250101-000000.memory.dump");
        assert_eq!(
            check_dump_path(ok.to_str().unwrap(), Some(base)).unwrap(),
            ok
        );
        // The flag's default has a trailing slash.
        let with_slash = PathBuf::from(format!("{}/", base.display()));
        check_dump_path(ok.to_str().unwrap(), Some(&with_slash)).unwrap();
        for p in [
            base.join("x.memory.dump"),
            base.join("memvol/deeper/x.memory.dump"),
            PathBuf::from("/tmp/x.memory.dump"),
        ] {
            let e = check_dump_path(p.to_str().unwrap(), Some(base))
                .expect_err("outside")
                .to_string();
            assert!(
                e.contains("is not a file of a volume under"),
                "{}: {e}",
                p.display()
            );
        }
    }
}
