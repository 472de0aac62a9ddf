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
//!
//! `path` checks `dumpPath` and removes earlier dumps, `private_dir`
//! writes a dump through a private directory; this module runs one dump at
//! a time and keeps the record.

mod path;
mod private_dir;
#[cfg(test)]
mod tests;

pub use path::{
    check_dump_path, kernel_interface_fs, remove_previous_dumps, remove_stale_tmp_dirs,
    DUMP_NAME_MARK,
};
pub use private_dir::TMP_DIR_PREFIX;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use wire::api_domain::MemoryDumpMetadata;

use crate::metadata::MetadataCache;
use path::regular_or_absent;
use private_dir::dump_via_private_dir;

/// KubeVirt's prefix of `FailureReason` (`failedDomainMemoryDump`).
pub const FAILED_DOMAIN_MEMORY_DUMP: &str = "Domain memory dump failed";

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

/// Why the dump itself failed (the launcher's: libvirt's
/// [`crate::manager::ManagerError`]); its text is what virt-handler sees
/// after [`FAILED_DOMAIN_MEMORY_DUMP`].
pub type DumpError = Box<dyn std::error::Error + Send + Sync>;

/// The dump itself: writes the memory of the guest to the path, or says
/// why not ([`DumpError`]).
pub type DumpFn = Box<dyn FnOnce(&Path) -> Result<(), DumpError> + Send>;

/// A memory dump request refused or not started. Its text is the
/// `Response.message` virt-handler gets.
#[derive(Debug, thiserror::Error)]
pub enum MemoryDumpError {
    /// `dumpPath` is empty.
    #[error("dumpPath: is empty; give the absolute path of the dump file")]
    EmptyPath,
    /// `dumpPath` is refused ([`check_dump_path`]'s rules).
    #[error("dumpPath: {dump_path:?} {reason}")]
    Path {
        /// The path as given.
        dump_path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The dump's thread could not be started.
    #[error("cannot start the memory dump: {0}")]
    Spawn(#[source] std::io::Error),
}

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
    /// [`MemoryDumpError::Spawn`]: the thread could not be started.
    pub fn request(&self, path: &Path, dump: DumpFn) -> Result<Request, MemoryDumpError> {
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
                let e = MemoryDumpError::Spawn(e);
                job_failed(&self.metadata, self.clock, &e.to_string());
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
