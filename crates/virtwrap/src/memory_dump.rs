//! KubeVirt's memory dump (`VirtualMachineMemoryDump`; KubeVirt v1.6.6
//! `pkg/virt-launcher/virtwrap/manager.go` `MemoryDump`, kubevirt-facts
//! §8.5): a memory-only core dump of the running guest into a file, run in
//! the background while the command returns at once.
//!
//! The rules, as KubeVirt's:
//! - at most one dump runs at a time; a request while one runs succeeds
//!   and does nothing ([`Request::InProgress`]);
//! - a request for the file the metadata already records (running or
//!   finished, failed or not) succeeds and does nothing
//!   ([`Request::AlreadyDumped`]): virt-handler asks again on every sync
//!   of a VMI whose dump volume is in progress, and each new dump gets a
//!   new, time-stamped file name. KubeVirt compares the file name only;
//!   here the full path of the last dump is compared too (kept in the
//!   dumper: the record carries `FileName` only, as KubeVirt's), so the
//!   same name in another directory dumps again, while virt-handler,
//!   which always sends the same full path, is still skipped;
//! - otherwise the metadata becomes `{FileName, StartTimestamp}` before
//!   the request returns (so a caller reading the record right after can
//!   tell whether its request started or was dropped), every
//!   file whose name contains `memory.dump` in the target directory is
//!   removed (the claim holds the last dump only), the dump runs, and the
//!   metadata gets `Completed`, `EndTimestamp` and, on failure, `Failed`
//!   and `FailureReason` = `Domain memory dump failed: <error>`.
//!
//! Unlike KubeVirt, which writes wherever `dumpPath` points, the path is
//! checked first ([`check_dump_path`]) and a bad one refused by the
//! command, libvirt never writes to `dumpPath` itself but into a private
//! directory next to it, whose file is then renamed onto `dumpPath` (see
//! [`TMP_DIR_PREFIX`]), and a dump that cannot find its domain is recorded
//! as failed (KubeVirt leaves the metadata started for ever then).

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nix::sys::statfs;

use wire::api_domain::MemoryDumpMetadata;

use crate::metadata::MetadataCache;

/// KubeVirt's prefix of `FailureReason` (`failedDomainMemoryDump`).
pub const FAILED_DOMAIN_MEMORY_DUMP: &str = "Domain memory dump failed";

/// Files whose name contains this are earlier dumps, removed before a new
/// dump (virt-handler names dumps `<vm>-<volume>-<timestamp>.memory.dump`).
pub const DUMP_NAME_MARK: &str = "memory.dump";

/// Longest file name Linux accepts (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// The prefix of the private directory a dump is written into, made anew
/// in the target directory for each dump (`<prefix><random>`, mode 0700).
///
/// Why: libvirt opens the dump file by name with `O_CREAT|O_TRUNC`,
/// following links, some time after the path was checked. Had it been
/// given `dumpPath` itself, a symbolic link planted there between the
/// check and the open, or a hard link to a file elsewhere already there,
/// would be written through, overwriting that other file. A directory
/// created just now (`mkdtemp`: it did not exist, so nobody can have
/// planted anything in it, and nobody else may enter it) holds only what
/// libvirt writes. The finished file is then `rename`d onto `dumpPath`:
/// within one file system (the same directory) that is atomic and copies
/// nothing, and it replaces whatever entry is at `dumpPath` (a link
/// included) instead of writing into its target. A directory that cannot
/// hold one (procfs, sysfs: `mkdtemp` fails there) gets no dump at all.
/// Such directories left by a crashed dump are removed before the next
/// dump into that directory ([`remove_stale_tmp_dirs`]).
pub const TMP_DIR_PREFIX: &str = ".virt-launcher-dump.";

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
/// One line naming `dumpPath` and the problem.
pub fn check_dump_path(dump_path: &str, hotplug_dir: Option<&Path>) -> Result<PathBuf, String> {
    let bad = |why: &str| Err(format!("dumpPath: {dump_path:?} {why}"));
    if dump_path.is_empty() {
        return Err("dumpPath: is empty; give the absolute path of the dump file".into());
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
            let t = fs.filesystem_type();
            if let Some((_, kind)) = PSEUDO_FILE_SYSTEMS.iter().find(|(m, _)| *m == t) {
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
fn regular_or_absent(path: &Path) -> Result<(), String> {
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

/// Dumps with `dump` into a fresh private directory in `path`'s directory
/// and renames the file onto `path` (why: [`TMP_DIR_PREFIX`]). The
/// directory goes in any case, with a partial file in it.
///
/// Both directories are held open from the start and used only through
/// their descriptors: whoever may write `path`'s directory can rename the
/// private directory away and put one of their own, with links in it, under
/// its name. libvirt, which opens the dump file by path, is therefore given
/// the path through this process's descriptor of the private directory
/// (`/proc/<pid>/fd/<n>/<file>`), which no rename can redirect, and the
/// finished file is renamed with `renameat` between the two descriptors.
fn dump_via_private_dir(path: &Path, dump: DumpFn) -> Result<(), String> {
    use nix::fcntl::{renameat, AtFlags};
    use nix::sys::stat::{fstat, fstatat, SFlag};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

    let in_path = |why: String| format!("dumpPath: {:?} {why}", path);
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .ok_or_else(|| in_path("names no file".into()))?;
    let open_dir = |p: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags((nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_NOFOLLOW).bits())
            .open(p)
    };
    let dir_fd = open_dir(dir).map_err(|e| in_path(format!("cannot open its directory: {e}")))?;
    let tmp = tempfile::Builder::new()
        .prefix(TMP_DIR_PREFIX)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(dir)
        .map_err(|e| in_path(format!("cannot get a directory to dump into: {e}")))?;
    let tmp_fd = open_dir(tmp.path())
        .map_err(|e| in_path(format!("cannot open the directory to dump into: {e}")))?;
    // What was opened must be the directory just made: ours, 0700, on the
    // same file system as the target (else someone swapped it in between).
    let (st, dst) = (
        fstat(tmp_fd.as_raw_fd()).map_err(|e| in_path(e.to_string()))?,
        fstat(dir_fd.as_raw_fd()).map_err(|e| in_path(e.to_string()))?,
    );
    if st.st_uid != nix::unistd::geteuid().as_raw()
        || st.st_mode & 0o7777 != 0o700
        || st.st_dev != dst.st_dev
    {
        return Err(in_path(
            "private dump directory was replaced before use (refused)".into(),
        ));
    }
    let via = PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        tmp_fd.as_raw_fd()
    ));
    // The path must lead to that very directory (a /proc of another PID
    // namespace would not).
    match std::fs::metadata(&via) {
        Ok(m) if m.ino() == st.st_ino && m.dev() == st.st_dev => {}
        _ => {
            return Err(in_path(format!(
                "cannot reach the private dump directory through {}",
                via.display()
            )))
        }
    }
    dump(&via.join(name))?;
    match fstatat(Some(tmp_fd.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(m) if SFlag::from_bits_truncate(m.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG => {}
        Ok(_) => return Err(in_path("dump is not a regular file".into())),
        Err(e) => return Err(in_path(format!("dump is missing: {e}"))),
    }
    // A link planted at `path` meanwhile would only be replaced, never
    // written through; it is refused all the same, as at the request.
    regular_or_absent(path).map_err(in_path)?;
    renameat(
        Some(tmp_fd.as_raw_fd()),
        name,
        Some(dir_fd.as_raw_fd()),
        name,
    )
    .map_err(|e| in_path(format!("cannot be written: {e}")))?;
    drop(tmp_fd);
    if let Err(e) = tmp.close() {
        tracing::warn!("failed to remove the memory dump directory: {e}");
    }
    Ok(())
}

/// What a memory dump request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// A dump started in the background.
    Started,
    /// Another dump runs: nothing done.
    InProgress,
    /// The metadata already records this file name: nothing done.
    AlreadyDumped,
}

/// The dump itself: writes the memory of the guest to the path, or says
/// why not (the message virt-handler sees after [`FAILED_DOMAIN_MEMORY_DUMP`]).
pub type DumpFn = Box<dyn FnOnce(&Path) -> Result<(), String> + Send>;

/// Runs memory dumps one at a time and records them in the metadata.
pub struct MemoryDumper {
    busy: Arc<AtomicBool>,
    /// The full path of the last dump started (the record has its file
    /// name only).
    last: Mutex<Option<PathBuf>>,
    metadata: Arc<MetadataCache>,
    /// The current time as Kubernetes writes it (RFC 3339, seconds, UTC).
    clock: fn() -> String,
}

/// Holds the one-at-a-time gate; opens it when dropped (also when the
/// dump thread panics).
struct Gate(Arc<AtomicBool>);

impl Drop for Gate {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl MemoryDumper {
    /// A dumper recording in `metadata`, with timestamps from `clock`.
    pub fn new(metadata: Arc<MetadataCache>, clock: fn() -> String) -> Self {
        MemoryDumper {
            busy: Arc::new(AtomicBool::new(false)),
            last: Mutex::new(None),
            metadata,
            clock,
        }
    }

    /// Whether a dump runs now.
    pub fn in_progress(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// Starts dumping to `path` (checked by [`check_dump_path`]) with
    /// `dump` on a thread of its own and returns at once, or does nothing
    /// (see [`Request`]). When it starts, the record
    /// (`{FileName, StartTimestamp}`) is set before this returns. `dump`
    /// is given a path in a private directory next to `path`, never
    /// `path` itself (see [`TMP_DIR_PREFIX`]).
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn request(&self, path: &Path, dump: DumpFn) -> Result<Request, String> {
        if self
            .busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            tracing::info!("memory-dump is in progress");
            return Ok(Request::InProgress);
        }
        let gate = Gate(Arc::clone(&self.busy));
        if self.already_dumped(path) {
            tracing::info!(path = %path.display(), "memory dump of this file already done or running");
            return Ok(Request::AlreadyDumped);
        }
        let job = Job {
            path: path.to_owned(),
            metadata: Arc::clone(&self.metadata),
            clock: self.clock,
        };
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(path.to_owned());
        job.record_start();
        std::thread::Builder::new()
            .name("memory-dump".into())
            .spawn(move || {
                let _gate = gate;
                job.run(dump);
            })
            .map_err(|e| {
                let e = format!("cannot start the memory dump: {e}");
                job_failed(&self.metadata, self.clock, &e);
                e
            })?;
        Ok(Request::Started)
    }

    /// KubeVirt's `shouldSkipMemoryDump` (the metadata's `FileName` is the
    /// file name of `path`), and the last dump's full path is `path`.
    fn already_dumped(&self, path: &Path) -> bool {
        let name = file_name(path);
        let same_path = self
            .last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_deref()
            == Some(path);
        same_path
            && self
                .metadata
                .snapshot()
                .memory_dump
                .is_some_and(|m| m.file_name == name)
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One dump, run on its thread.
struct Job {
    path: PathBuf,
    metadata: Arc<MetadataCache>,
    clock: fn() -> String,
}

/// Records a dump that failed before it ran (`reason` without KubeVirt's
/// prefix).
fn job_failed(metadata: &MetadataCache, clock: fn() -> String, reason: &str) {
    let end = clock();
    metadata.update(|m| {
        if let Some(d) = m.memory_dump.as_mut() {
            d.completed = true;
            d.end_timestamp = Some(end);
            d.failed = true;
            d.failure_reason = format!("{FAILED_DOMAIN_MEMORY_DUMP}: {reason}");
        }
    });
}

impl Job {
    /// The record of a dump just started: `{FileName, StartTimestamp}`.
    fn record_start(&self) {
        let start = (self.clock)();
        self.metadata.update(|m| {
            m.memory_dump = Some(MemoryDumpMetadata {
                file_name: file_name(&self.path),
                start_timestamp: Some(start),
                ..MemoryDumpMetadata::default()
            });
        });
    }

    fn run(&self, dump: DumpFn) {
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        let removed = remove_previous_dumps(dir);
        if !removed.is_empty() {
            tracing::info!(?removed, "removed earlier memory dumps");
        }
        let stale = remove_stale_tmp_dirs(dir);
        if !stale.is_empty() {
            tracing::info!(?stale, "removed directories of crashed memory dumps");
        }
        tracing::info!(path = %self.path.display(), "Starting memory dump");
        let started = std::time::Instant::now();
        // Checked when requested; checked again here, just before the
        // dump, in case a link was planted since.
        let result = regular_or_absent(&self.path)
            .map_err(|why| format!("dumpPath: {:?} {why}", self.path))
            .and_then(|()| dump_via_private_dir(&self.path, dump));
        let end = (self.clock)();
        match &result {
            Ok(()) => {
                tracing::info!(
                    path = %self.path.display(),
                    ms = started.elapsed().as_millis() as u64,
                    bytes = std::fs::symlink_metadata(&self.path).map_or(0, |m| m.len()),
                    "Completed memory dump successfully"
                );
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), "{FAILED_DOMAIN_MEMORY_DUMP}: {e}")
            }
        }
        self.metadata.update(|m| {
            if let Some(d) = m.memory_dump.as_mut() {
                d.completed = true;
                d.end_timestamp = Some(end);
                d.failed = result.is_err();
                d.failure_reason = match &result {
                    Ok(()) => String::new(),
                    Err(e) => format!("{FAILED_DOMAIN_MEMORY_DUMP}: {e}"),
                };
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::mpsc;
    use std::sync::Mutex;
    use std::time::Duration;
    use wire::api_domain::RuntimeMetadata;

    fn clock() -> String {
        "2025-01-01T00:00:00Z".into()
    }

    /// A dumper whose metadata changes are recorded in order.
    fn dumper() -> (
        MemoryDumper,
        Arc<MetadataCache>,
        Arc<Mutex<Vec<RuntimeMetadata>>>,
    ) {
        let seen: Arc<Mutex<Vec<RuntimeMetadata>>> = Arc::default();
        let cache = Arc::new_cyclic(|weak: &std::sync::Weak<MetadataCache>| {
            let weak = weak.clone();
            let seen = Arc::clone(&seen);
            MetadataCache::new(Box::new(move || {
                if let Some(c) = weak.upgrade() {
                    seen.lock().unwrap().push(c.snapshot());
                }
            }))
        });
        (MemoryDumper::new(Arc::clone(&cache), clock), cache, seen)
    }

    fn wait_idle(d: &MemoryDumper) {
        let start = std::time::Instant::now();
        while d.in_progress() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "dump never ended"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_dump_records_start_then_completion_and_removes_earlier_dumps() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("vm-vol-20240101-000000.memory.dump");
        let keep = dir.path().join("notes.txt");
        std::fs::write(&old, b"old").unwrap();
        std::fs::write(&keep, b"keep").unwrap();
        let (d, cache, seen) = dumper();
        let path = dir.path().join("vm-vol-20250101-000000.memory.dump");
        let r = d
            .request(
                &path,
                Box::new(|p: &Path| std::fs::write(p, b"\x7fELF").map_err(|e| e.to_string())),
            )
            .unwrap();
        assert_eq!(r, Request::Started);
        wait_idle(&d);
        assert!(!old.exists(), "the earlier dump is removed");
        assert!(keep.exists(), "other files stay");
        assert_eq!(std::fs::read(&path).unwrap(), b"\x7fELF");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(
            seen[0].memory_dump,
            Some(MemoryDumpMetadata {
                file_name: "vm-vol-20250101-000000.memory.dump".into(),
                start_timestamp: Some(clock()),
                ..MemoryDumpMetadata::default()
            })
        );
        assert_eq!(
            seen[1].memory_dump,
            Some(MemoryDumpMetadata {
                file_name: "vm-vol-20250101-000000.memory.dump".into(),
                start_timestamp: Some(clock()),
                end_timestamp: Some(clock()),
                completed: true,
                failed: false,
                failure_reason: String::new(),
            })
        );
        assert_eq!(cache.snapshot(), seen[1]);
    }

    #[test]
    fn a_failed_dump_is_completed_failed_with_kubevirts_reason() {
        let dir = tempfile::tempdir().unwrap();
        let (d, cache, _) = dumper();
        let path = dir.path().join("x.memory.dump");
        d.request(
            &path,
            Box::new(|_: &Path| Err("LibvirtError(Code=38, Domain=10, Message='boom')".into())),
        )
        .unwrap();
        wait_idle(&d);
        let m = cache.snapshot().memory_dump.unwrap();
        assert!(m.completed && m.failed, "{m:?}");
        assert_eq!(
            m.failure_reason,
            "Domain memory dump failed: LibvirtError(Code=38, Domain=10, Message='boom')"
        );
        assert!(m.end_timestamp.is_some());
    }

    #[test]
    fn one_dump_at_a_time_and_never_the_same_file_twice() {
        let dir = tempfile::tempdir().unwrap();
        let (d, cache, seen) = dumper();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let first = dir.path().join("a.memory.dump");
        let r = d
            .request(
                &first,
                Box::new(move |_: &Path| {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(())
                }),
            )
            .unwrap();
        assert_eq!(r, Request::Started);
        started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        // While it runs, any request (another file or the same) does nothing.
        let called = Arc::new(AtomicBool::new(false));
        for p in ["b.memory.dump", "a.memory.dump"] {
            let c = Arc::clone(&called);
            let r = d
                .request(
                    &dir.path().join(p),
                    Box::new(move |_: &Path| {
                        c.store(true, Ordering::SeqCst);
                        Ok(())
                    }),
                )
                .unwrap();
            assert_eq!(r, Request::InProgress);
        }
        release_tx.send(()).unwrap();
        wait_idle(&d);
        assert!(!called.load(Ordering::SeqCst));
        assert_eq!(seen.lock().unwrap().len(), 2);
        // Done: the same file name again is skipped, its record kept.
        let before = cache.snapshot();
        let c = Arc::clone(&called);
        let r = d
            .request(
                &first,
                Box::new(move |_: &Path| {
                    c.store(true, Ordering::SeqCst);
                    Ok(())
                }),
            )
            .unwrap();
        assert_eq!(r, Request::AlreadyDumped);
        assert!(!d.in_progress(), "a skipped request leaves the gate open");
        assert!(!called.load(Ordering::SeqCst));
        assert_eq!(cache.snapshot(), before);
        // Another file name dumps again.
        let r = d
            .request(
                &dir.path().join("b.memory.dump"),
                Box::new(|_: &Path| Ok(())),
            )
            .unwrap();
        assert_eq!(r, Request::Started);
        wait_idle(&d);
        assert_eq!(
            cache.snapshot().memory_dump.unwrap().file_name,
            "b.memory.dump"
        );
    }

    #[test]
    fn a_panicking_dump_opens_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let (d, _, _) = dumper();
        d.request(
            &dir.path().join("p.memory.dump"),
            Box::new(|_: &Path| panic!("dump panicked")),
        )
        .unwrap();
        wait_idle(&d);
    }

    #[test]
    fn a_link_planted_after_the_check_fails_the_dump_without_writing() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let path = dir.path().join("target.bin");
        check_dump_path(path.to_str().unwrap(), None).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let (d, cache, _) = dumper();
        let called = Arc::new(AtomicBool::new(false));
        let c = Arc::clone(&called);
        d.request(
            &path,
            Box::new(move |_: &Path| {
                c.store(true, Ordering::SeqCst);
                Ok(())
            }),
        )
        .unwrap();
        wait_idle(&d);
        assert!(!called.load(Ordering::SeqCst));
        let m = cache.snapshot().memory_dump.unwrap();
        assert!(m.failed, "{m:?}");
        assert!(
            m.failure_reason
                .starts_with("Domain memory dump failed: dumpPath: ")
                && m.failure_reason
                    .ends_with("is a symbolic link (never written through)"),
            "{}",
            m.failure_reason
        );
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }

    /// A dump that writes `content` through the path it is given, as
    /// libvirt does (`O_CREAT|O_TRUNC`, following links).
    fn writes(content: &'static [u8]) -> DumpFn {
        Box::new(move |p: &Path| std::fs::write(p, content).map_err(|e| e.to_string()))
    }

    /// The entries of `dir` named like a private dump directory.
    fn tmp_dirs(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(TMP_DIR_PREFIX))
            .collect()
    }

    #[test]
    fn a_hard_link_at_the_destination_keeps_the_other_files_content() {
        let root = tempfile::tempdir().unwrap();
        let (dumps, elsewhere) = (root.path().join("dumps"), root.path().join("elsewhere"));
        std::fs::create_dir(&dumps).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        let victim = elsewhere.join("v2");
        std::fs::write(&victim, b"keep").unwrap();
        let path = dumps.join("hard.bin");
        std::fs::hard_link(&victim, &path).unwrap();
        check_dump_path(path.to_str().unwrap(), None).unwrap();
        let (d, cache, _) = dumper();
        d.request(&path, writes(b"\x7fELF")).unwrap();
        wait_idle(&d);
        let m = cache.snapshot().memory_dump.unwrap();
        assert!(m.completed && !m.failed, "{m:?}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(&path).unwrap(), b"\x7fELF");
        assert!(tmp_dirs(&dumps).is_empty(), "{:?}", tmp_dirs(&dumps));
    }

    #[test]
    fn a_private_directory_swapped_for_another_with_a_link_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let path = dir.path().join("swap.memory.dump");
        let (d, cache, _) = dumper();
        let victim_c = victim.clone();
        d.request(
            &path,
            Box::new(move |p: &Path| {
                // Whoever may write the target's directory renames the
                // private directory away and puts one of their own, with
                // a link at the dump's name, in its place.
                let private = std::fs::canonicalize(p.parent().unwrap()).unwrap();
                let mut moved = private.clone().into_os_string();
                moved.push(".moved");
                std::fs::rename(&private, &moved).unwrap();
                std::fs::create_dir(&private).unwrap();
                std::os::unix::fs::symlink(&victim_c, private.join(p.file_name().unwrap()))
                    .unwrap();
                std::fs::write(p, b"\x7fELF").map_err(|e| e.to_string())
            }),
        )
        .unwrap();
        wait_idle(&d);
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let m = cache.snapshot().memory_dump.unwrap();
        assert!(!m.failed, "{m:?}");
        assert_eq!(std::fs::read(&path).unwrap(), b"\x7fELF");
    }

    #[test]
    fn a_link_planted_while_libvirt_dumps_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let path = dir.path().join("target.memory.dump");
        let (d, cache, _) = dumper();
        let (final_path, victim_c, dir_c) = (path.clone(), victim.clone(), dir.path().to_owned());
        d.request(
            &path,
            Box::new(move |p: &Path| {
                // Given a file in a fresh private directory next to the
                // target, reached through this process's descriptor of it.
                assert!(p.starts_with(format!("/proc/{}/fd/", std::process::id())));
                let private = std::fs::read_link(p.parent().unwrap()).unwrap();
                let private = private.as_path();
                assert_eq!(private.parent().unwrap(), dir_c);
                assert!(private
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(TMP_DIR_PREFIX));
                let mode = std::fs::metadata(private).unwrap().permissions().mode();
                assert_eq!(mode & 0o777, 0o700, "{mode:o}");
                assert_eq!(p.file_name(), final_path.file_name());
                // The window: a link planted after every check, then the
                // write, which follows links.
                std::os::unix::fs::symlink(&victim_c, &final_path).unwrap();
                std::fs::write(p, b"\x7fELF").map_err(|e| e.to_string())
            }),
        )
        .unwrap();
        wait_idle(&d);
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let m = cache.snapshot().memory_dump.unwrap();
        assert!(m.failed, "{m:?}");
        assert!(
            m.failure_reason
                .ends_with("is a symbolic link (never written through)"),
            "{}",
            m.failure_reason
        );
        assert!(path.is_symlink());
        assert!(
            tmp_dirs(dir.path()).is_empty(),
            "the partial dump is removed"
        );
    }

    #[test]
    fn stale_private_dirs_are_removed_before_a_dump_and_a_failed_dump_leaves_none() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let stale = dir.path().join(format!("{TMP_DIR_PREFIX}abc123"));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("old.memory.dump"), b"partial").unwrap();
        // A link named like one is not followed into its target.
        std::fs::write(outside.path().join("keep"), b"keep").unwrap();
        let link = dir.path().join(format!("{TMP_DIR_PREFIX}link"));
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        let (d, cache, _) = dumper();
        d.request(
            &dir.path().join("x.memory.dump"),
            Box::new(|p: &Path| {
                std::fs::write(p, b"part").unwrap();
                Err("boom".into())
            }),
        )
        .unwrap();
        wait_idle(&d);
        assert!(cache.snapshot().memory_dump.unwrap().failed);
        assert!(!stale.exists());
        assert!(link.is_symlink());
        assert_eq!(std::fs::read(outside.path().join("keep")).unwrap(), b"keep");
        assert_eq!(tmp_dirs(dir.path()), vec![format!("{TMP_DIR_PREFIX}link")]);
        assert!(!dir.path().join("x.memory.dump").exists());
    }

    #[test]
    fn the_same_file_name_in_another_directory_dumps_again() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (d, _, _) = dumper();
        let first = a.path().join("same.memory.dump");
        assert_eq!(d.request(&first, writes(b"a")).unwrap(), Request::Started);
        wait_idle(&d);
        let other = b.path().join("same.memory.dump");
        assert_eq!(d.request(&other, writes(b"b")).unwrap(), Request::Started);
        wait_idle(&d);
        assert_eq!(std::fs::read(&other).unwrap(), b"b");
        // The path just dumped (virt-handler asks again): skipped.
        assert_eq!(
            d.request(&other, writes(b"c")).unwrap(),
            Request::AlreadyDumped
        );
        assert_eq!(std::fs::read(&other).unwrap(), b"b");
    }

    #[test]
    fn the_record_is_set_when_the_request_returns() {
        let dir = tempfile::tempdir().unwrap();
        let (d, cache, _) = dumper();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        d.request(
            &dir.path().join("a.memory.dump"),
            Box::new(move |_: &Path| {
                // Hold the dump thread before it does anything.
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                Err("released".into())
            }),
        )
        .unwrap();
        let m = cache.snapshot().memory_dump.expect("record set");
        assert_eq!(m.file_name, "a.memory.dump");
        assert!(!m.completed && m.start_timestamp.is_some(), "{m:?}");
        entered_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        release_tx.send(()).unwrap();
        wait_idle(&d);
    }

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
            let e = check_dump_path(&path, None).expect_err(&path);
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
            let e = check_dump_path(p.to_str().unwrap(), Some(base)).expect_err("outside");
            assert!(
                e.contains("is not a file of a volume under"),
                "{}: {e}",
                p.display()
            );
        }
    }
}
