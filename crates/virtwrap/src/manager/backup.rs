//! BackupVirtualMachine and RedefineCheckpoint (KubeVirt main's
//! `pkg/virt-launcher/virtwrap/storage/backup.go`): push and pull backups
//! of the disks that have a changed block tracking overlay (a
//! `<dataStore>`), each making a checkpoint; incremental from a named
//! checkpoint; the job's end recorded in the runtime metadata when libvirt
//! reports it (`JOB_COMPLETED`); abort; and the redefinition of a
//! checkpoint whose bitmaps QEMU still holds.
//!
//! The record ([`wire::api_domain::BackupMetadata`]) follows KubeVirt:
//! set when a backup starts (`Name`, `Mode`, `SkipQuiesce`,
//! `StartTimestamp` = the request's `backupStartTime`), then
//! `CheckpointName`, `Volumes` and `QuiesceStatus`; on the job's end
//! `Completed`, `Failed`, `BackupMsg`, `EndTimestamp`. Every change
//! notifies virt-handler through the metadata cache.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::path::{Path, PathBuf};

use api::VirtualMachineInstance;
use domain::{
    BackupDisk, BackupDisks, BackupServer, CheckpointDisk, CheckpointDisks, DomainBackup,
    DomainCheckpoint, FileRef,
};
use virt::domain::Domain as VirtDomain;
use virt::sys;
use wire::api_domain::BackupMetadata;
use wire::backup::{
    BackupCheckpoint, BackupOptions, InstanceBackupVolumeInfo, CMD_ABORT, CMD_EXPORT, CMD_START,
    MODE_PULL, MODE_PUSH,
};

use super::{LibvirtDomainManager, ManagerError};

/// The NBD socket of a pull backup (KubeVirt's `pullBackupSocketDir` and
/// `pullBackupSocketName`).
pub const PULL_SOCKET: &str = "/var/run/kubevirt/sockets/backup-nbd-sock";
/// KubeVirt's `ChangedBlockTrackingNotEnabledMsg`.
pub const CBT_NOT_ENABLED: &str = "Backup failed ChangedBlockTracking is not enabled";
/// RedefineCheckpoint's refusal without changed block tracking.
pub const REDEFINE_CBT_NOT_ENABLED: &str =
    "Redefine checkpoint failed: ChangedBlockTracking is not enabled";
/// QEMU's answer to `query-named-block-nodes` is read up to this size.
const MAX_QMP_REPLY: usize = 16 << 20;

/// Freezing and thawing the guest's file systems around the job's start
/// (KubeVirt's FreezeVMI / UnfreezeVMI through the guest agent).
pub trait Quiesce {
    /// Freeze.
    ///
    /// # Errors
    /// The agent's error text.
    fn freeze(&self) -> Result<(), String>;
    /// Thaw.
    ///
    /// # Errors
    /// The agent's error text.
    fn thaw(&self) -> Result<(), String>;
}

/// A BackupVirtualMachine request refused by [`check_options`]: KubeVirt's
/// words (`getBackupOptionsFromRequest`), virt-handler reads them in
/// `Response.message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackupOptionsError {
    /// `mode` is neither `Push` nor `Pull`.
    #[error("unknown backup mode: only Push and Pull are supported")]
    UnknownMode,
    /// `targetPath` is missing.
    #[error("backup targetPath wasn't provided")]
    NoTargetPath,
    /// `backupName` is empty (not a KubeVirt check: names are built from
    /// it).
    #[error("backup name wasn't provided")]
    NoName,
    /// `backupStartTime` is missing (not a KubeVirt check, as `NoName`).
    #[error("backup start time wasn't provided")]
    NoStartTime,
    /// `cmd: Export`, not built.
    #[error("not supported yet: exporting a pull backup through the backup tunnel (BackupVirtualMachine Export)")]
    Export,
    /// Any other `cmd`.
    #[error("cmd unsupported, backup command only supports start or abort")]
    UnsupportedCmd,
}

/// KubeVirt's checks of the request (`getBackupOptionsFromRequest`), in
/// its words.
///
/// # Errors
/// [`BackupOptionsError`]: the refusal.
pub fn check_options(o: &BackupOptions) -> Result<(), BackupOptionsError> {
    match o.cmd.as_str() {
        CMD_START => {
            if o.mode != MODE_PUSH && o.mode != MODE_PULL {
                return Err(BackupOptionsError::UnknownMode);
            }
            if o.target_path.is_none() {
                return Err(BackupOptionsError::NoTargetPath);
            }
            // Not a KubeVirt check: the checkpoint's name and the files'
            // names are built from these, so they must be there (virt-handler
            // always sends them).
            if o.backup_name.is_empty() {
                return Err(BackupOptionsError::NoName);
            }
            if o.backup_start_time.is_none() {
                return Err(BackupOptionsError::NoStartTime);
            }
            Ok(())
        }
        CMD_ABORT => Ok(()),
        CMD_EXPORT => Err(BackupOptionsError::Export),
        _ => Err(BackupOptionsError::UnsupportedCmd),
    }
}

/// `2006-01-02_15-04-05` of an RFC 3339 UTC time (KubeVirt's
/// `backupTimeXMLFormat`), `None` when it is not one.
pub fn backup_time(rfc3339: &str) -> Option<String> {
    let t = humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z')).ok()?;
    let s = humantime::format_rfc3339_seconds(t).to_string();
    Some(s.get(..19)?.replace('T', "_").replace(':', "-"))
}

/// Seconds since the epoch of an RFC 3339 UTC time.
fn unix_seconds(rfc3339: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z')).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// Two `metav1.Time`s are the same instant.
fn same_time(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            a == b || (unix_seconds(a).is_some() && unix_seconds(a) == unix_seconds(b))
        }
        _ => false,
    }
}

/// The volume a disk belongs to: its alias without KubeVirt's `ua-`.
fn volume_of(d: &domain::Disk) -> String {
    d.alias
        .as_ref()
        .map(|a| {
            a.name
                .strip_prefix(wire::api_domain::USER_ALIAS_PREFIX)
                .unwrap_or(&a.name)
                .to_owned()
        })
        .unwrap_or_default()
}

fn has_data_store(d: &domain::Disk) -> bool {
    d.source.as_ref().is_some_and(|s| s.data_store.is_some())
}

/// The backup and checkpoint XML for the domain's `disks` (KubeVirt's
/// `generateDomainBackup`): disks with a data store are backed up and get
/// a bitmap, the others not; push mode writes `<dir>/<backup>-<volume>.qcow2`,
/// pull mode keeps its scratch files there and exports each disk by its
/// volume's name with the new checkpoint's bitmap. Returns the two XML
/// models, the checkpoint's name and the volumes backed up.
pub fn plan(
    disks: &[domain::Disk],
    o: &BackupOptions,
    dir: Option<&Path>,
) -> (DomainBackup, DomainCheckpoint, Vec<String>) {
    let pull = o.mode == MODE_PULL;
    let checkpoint = format!(
        "{}-{}",
        o.backup_name,
        o.backup_start_time
            .as_deref()
            .and_then(backup_time)
            .unwrap_or_default()
    );
    let mut b = Vec::new();
    let mut c = Vec::new();
    let mut volumes = Vec::new();
    for d in disks.iter().filter(|d| !d.target.dev.is_empty()) {
        let name = d.target.dev.clone();
        if !has_data_store(d) {
            b.push(BackupDisk {
                name: name.clone(),
                backup: "no".into(),
                ..BackupDisk::default()
            });
            c.push(CheckpointDisk {
                name,
                checkpoint: "no".into(),
                bitmap: None,
            });
            continue;
        }
        let volume = volume_of(d);
        let file = dir.map(|dir| FileRef {
            file: dir
                .join(format!("{}-{volume}.qcow2", o.backup_name))
                .display()
                .to_string(),
        });
        b.push(BackupDisk {
            name: name.clone(),
            backup: "yes".into(),
            disk_type: Some("file".into()),
            export_name: pull.then(|| volume.clone()),
            export_bitmap: pull.then(|| checkpoint.clone()),
            target: if pull { None } else { file.clone() },
            scratch: if pull { file } else { None },
            driver: None,
        });
        c.push(CheckpointDisk {
            name,
            checkpoint: "bitmap".into(),
            bitmap: None,
        });
        volumes.push(volume);
    }
    let backup = DomainBackup {
        mode: o.mode.to_lowercase(),
        incremental: o.incremental.clone().filter(|i| !i.is_empty()),
        server: pull.then(|| BackupServer {
            transport: "unix".into(),
            socket: Some(PULL_SOCKET.into()),
        }),
        disks: BackupDisks { disk: b },
    };
    let cp = DomainCheckpoint {
        name: checkpoint.clone(),
        creation_time: None,
        parent: None,
        disks: Some(CheckpointDisks { disk: c }),
    };
    (backup, cp, volumes)
}

/// KubeVirt's `initializeBackupMetadata`: `Ok(true)` when this very backup
/// is already running (nothing to do), `Ok(false)` after recording a new
/// one; the refusals in KubeVirt's words.
pub fn initialize(
    current: Option<&BackupMetadata>,
    o: &BackupOptions,
) -> Result<Option<BackupMetadata>, String> {
    if let Some(m) = current.filter(|m| !m.name.is_empty()) {
        let same = m.name == o.backup_name
            && same_time(m.start_timestamp.as_deref(), o.backup_start_time.as_deref());
        match (same, &m.end_timestamp) {
            (true, None) => return Ok(None),
            (true, Some(end)) => {
                return Err(format!(
                "backup {} that started at {} already executed, finished at {end}, completed: {}",
                o.backup_name,
                m.start_timestamp.as_deref().unwrap_or_default(),
                m.completed
            ))
            }
            (false, None) => {
                return Err(format!(
                    "backup {} already in progress, need to wait for completion",
                    m.name
                ))
            }
            (false, Some(_)) => {}
        }
    }
    Ok(Some(BackupMetadata {
        name: o.backup_name.clone(),
        start_timestamp: o.backup_start_time.clone(),
        skip_quiesce: o.skip_quiesce,
        mode: o.mode.clone(),
        ..BackupMetadata::default()
    }))
}

/// KubeVirt's `checkBackupEligibility` for an abort.
fn check_eligible(current: Option<&BackupMetadata>, o: &BackupOptions) -> Result<(), String> {
    let Some(m) = current.filter(|m| !m.name.is_empty()) else {
        return Err("could not find ongoing backup".into());
    };
    if m.start_timestamp.is_none() {
        return Err("backup did not start yet".into());
    }
    if m.name != o.backup_name
        || !same_time(m.start_timestamp.as_deref(), o.backup_start_time.as_deref())
    {
        return Err("requested backup differs from ongoing one".into());
    }
    if m.completed {
        return Err("backup already completed".into());
    }
    Ok(())
}

/// What ended a backup job: `(failed, message)` as KubeVirt's
/// `HandleBackupJobCompletedEvent` decides from the job's type
/// (`virDomainJobType`), the mode and libvirt's error message.
pub fn completion(job_type: i32, mode: &str, error: Option<&str>) -> (bool, String) {
    let (failed, mut message) = match job_type as u32 {
        sys::VIR_DOMAIN_JOB_COMPLETED => (false, String::new()),
        sys::VIR_DOMAIN_JOB_CANCELLED => {
            let failed = mode == MODE_PUSH;
            (
                failed,
                if failed {
                    "backup aborted".into()
                } else {
                    String::new()
                },
            )
        }
        sys::VIR_DOMAIN_JOB_FAILED => (true, String::new()),
        other => (true, format!("unexpected job completion type: {other}")),
    };
    // A pull backup that was aborted reports libvirt's "Operation
    // canceled", which is no failure.
    if let Some(e) = error.filter(|e| !(mode == MODE_PULL && *e == "Operation canceled")) {
        message = if message.is_empty() {
            e.to_owned()
        } else {
            format!("{message}: {e}")
        };
    }
    if failed && message.is_empty() {
        message = "unknown failure reason".into();
    }
    (failed, message)
}

/// Creates `dir` (below `root`, which must exist) one component at a
/// time, never through a symbolic link; returns the first directory it
/// created (to remove on failure), `None` when all existed.
fn make_dirs_below(root: &Path, rel: &[&str]) -> Result<Option<PathBuf>, String> {
    let meta = std::fs::symlink_metadata(root)
        .map_err(|e| format!("error creating dir for backup: {}: {e}", root.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "error creating dir for backup: {} is not a directory",
            root.display()
        ));
    }
    let mut cur = root.to_path_buf();
    let mut first = None;
    for c in rel {
        cur.push(c);
        match std::fs::create_dir(&cur) {
            Ok(()) => {
                if first.is_none() {
                    first = Some(cur.clone());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let m = std::fs::symlink_metadata(&cur)
                    .map_err(|e| format!("error creating dir for backup: {e}"))?;
                if !m.is_dir() {
                    return Err(format!(
                        "error creating dir for backup: {} exists and is not a directory",
                        cur.display()
                    ));
                }
            }
            Err(e) => {
                return Err(format!(
                    "error creating dir for backup: {}: {e}",
                    cur.display()
                ))
            }
        }
    }
    Ok(first)
}

/// `virDomainBackupBegin`.
fn backup_begin(d: &VirtDomain, backup: &str, checkpoint: &str) -> Result<(), ManagerError> {
    let b = CString::new(backup).map_err(|e| ManagerError::Failed(e.to_string()))?;
    let c = CString::new(checkpoint).map_err(|e| ManagerError::Failed(e.to_string()))?;
    // SAFETY: the domain pointer is live for `d`'s lifetime; both strings
    // are NUL-terminated and outlive the call.
    let ret = unsafe { sys::virDomainBackupBegin(d.as_ptr(), b.as_ptr(), c.as_ptr(), 0) };
    if ret < 0 {
        return Err(virt::error::Error::last_error().into());
    }
    Ok(())
}

/// `virDomainCheckpointCreateXML(REDEFINE|REDEFINE_VALIDATE)`.
fn checkpoint_redefine(d: &VirtDomain, xml: &str) -> Result<(), virt::error::Error> {
    let x = CString::new(xml).map_err(|_| virt::error::Error::last_error())?;
    let flags = sys::VIR_DOMAIN_CHECKPOINT_CREATE_REDEFINE
        | sys::VIR_DOMAIN_CHECKPOINT_CREATE_REDEFINE_VALIDATE;
    // SAFETY: live domain, NUL-terminated XML; the returned checkpoint
    // reference is freed at once.
    unsafe {
        let cp = sys::virDomainCheckpointCreateXML(d.as_ptr(), x.as_ptr(), flags);
        if cp.is_null() {
            return Err(virt::error::Error::last_error());
        }
        sys::virDomainCheckpointFree(cp);
    }
    Ok(())
}

/// The bitmaps QEMU holds, by image file (`query-named-block-nodes`,
/// KubeVirt's `queryBitmaps`: `qemu-img` would not see bitmaps of a
/// running guest); each as (name, inconsistent).
fn query_bitmaps(
    d: &VirtDomain,
) -> Result<std::collections::BTreeMap<String, Vec<(String, bool)>>, ManagerError> {
    let out = d.qemu_monitor_command(r#"{"execute":"query-named-block-nodes"}"#, 0)?;
    if out.len() > MAX_QMP_REPLY {
        return Err(ManagerError::Failed(format!(
            "failed to query bitmaps: QEMU's answer is larger than {MAX_QMP_REPLY} bytes"
        )));
    }
    let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| {
        ManagerError::Failed(format!(
            "failed to query bitmaps: failed to parse QMP response: {e}"
        ))
    })?;
    let mut map: std::collections::BTreeMap<String, Vec<(String, bool)>> = Default::default();
    for node in v["return"].as_array().into_iter().flatten() {
        let (Some(file), Some(bitmaps)) = (node["file"].as_str(), node["dirty-bitmaps"].as_array())
        else {
            continue;
        };
        for b in bitmaps {
            if let Some(name) = b["name"].as_str() {
                map.entry(file.to_owned()).or_default().push((
                    name.to_owned(),
                    b["inconsistent"].as_bool().unwrap_or(false),
                ));
            }
        }
    }
    Ok(map)
}

impl LibvirtDomainManager {
    /// The live domain's disks.
    fn live_disks(d: &VirtDomain) -> Result<Vec<domain::Disk>, ManagerError> {
        let xml = d.get_xml_desc(0)?;
        Ok(domain::Domain::from_xml(&xml)?.devices.disk)
    }

    /// BackupVirtualMachine (KubeVirt main's `LibvirtDomainManager.BackupVirtualMachine`):
    /// `Start` or `Abort` as `o.cmd` says (checked by [`check_options`]).
    ///
    /// # Errors
    /// KubeVirt's refusals ([`ManagerError::Failed`]), libvirt's errors.
    pub fn backup_vmi(
        &self,
        vmi: &VirtualMachineInstance,
        o: &BackupOptions,
        quiesce: &dyn Quiesce,
    ) -> Result<(), ManagerError> {
        match o.cmd.as_str() {
            CMD_START => self.backup_start(vmi, o, quiesce),
            CMD_ABORT => self.backup_abort(vmi, o),
            _ => Err(ManagerError::Failed(
                "recieved unknown backup command".into(),
            )),
        }
    }

    fn backup_start(
        &self,
        vmi: &VirtualMachineInstance,
        o: &BackupOptions,
        quiesce: &dyn Quiesce,
    ) -> Result<(), ManagerError> {
        let snapshot = self.metadata.snapshot();
        if snapshot
            .migration
            .as_ref()
            .is_some_and(|m| m.start_timestamp.is_some() && m.end_timestamp.is_none())
        {
            return Err(ManagerError::Failed(
                "failed to do backup, VMI is currently during migration".into(),
            ));
        }
        let mut outcome = Ok(None);
        self.metadata.update(|m| {
            outcome = initialize(m.backup.as_ref(), o);
            if let Ok(Some(new)) = &outcome {
                m.backup = Some(new.clone());
            }
        });
        match outcome {
            Err(e) => return Err(ManagerError::Failed(e)),
            Ok(None) => {
                tracing::info!(backup = o.backup_name, "backup already in progress");
                return Ok(());
            }
            Ok(Some(_)) => {}
        }
        tracing::info!(backup = o.backup_name, mode = o.mode, "backup begin");
        let r = self.backup_begin_job(vmi, o, quiesce);
        if let Err(e) = &r {
            tracing::error!(backup = o.backup_name, "backup failed to start: {e}");
            // KubeVirt resets the record so that a retry can proceed.
            self.metadata
                .update(|m| m.backup = Some(BackupMetadata::default()));
        }
        r
    }

    fn backup_begin_job(
        &self,
        vmi: &VirtualMachineInstance,
        o: &BackupOptions,
        quiesce: &dyn Quiesce,
    ) -> Result<(), ManagerError> {
        let name = vmi.domain_name();
        self.with_conn(|conn| {
            let d = VirtDomain::lookup_by_name(conn, &name)?;
            let disks = Self::live_disks(&d)?;
            // <targetPath>/<vmi>/<backup>-<time>/ (KubeVirt's getBackupPath).
            let time = o
                .backup_start_time
                .as_deref()
                .and_then(backup_time)
                .unwrap_or_default();
            let sub = format!("{}-{time}", o.backup_name);
            let (dir, made) = match &o.target_path {
                Some(root) => {
                    let rel = [vmi.metadata.name.as_str(), sub.as_str()];
                    if rel
                        .iter()
                        .any(|c| c.is_empty() || c.contains('/') || *c == "." || *c == "..")
                    {
                        return Err(ManagerError::Failed(format!(
                            "error creating dir for backup: bad name {sub:?}"
                        )));
                    }
                    let made =
                        make_dirs_below(Path::new(root), &rel).map_err(ManagerError::Failed)?;
                    (Some(Path::new(root).join(rel[0]).join(rel[1])), made)
                }
                None => (None, None),
            };
            let r = self.begin_with(&d, o, &disks, dir.as_deref(), quiesce);
            if r.is_err() {
                // Only what this request created goes (KubeVirt removes
                // the whole backup directory, even one that was there).
                if let Some(m) = &made {
                    let _ = std::fs::remove_dir_all(m);
                }
            }
            r
        })
    }

    fn begin_with(
        &self,
        d: &VirtDomain,
        o: &BackupOptions,
        disks: &[domain::Disk],
        dir: Option<&Path>,
        quiesce: &dyn Quiesce,
    ) -> Result<(), ManagerError> {
        let (backup, checkpoint, volumes) = plan(disks, o, dir);
        // libvirt would truncate an existing push target; a file that is
        // there is someone's data (not a KubeVirt check: its directory is
        // always new there).
        for t in backup.disks.disk.iter().filter_map(|d| d.target.as_ref()) {
            if std::fs::symlink_metadata(&t.file).is_ok() {
                return Err(ManagerError::Failed(format!(
                    "backup target {} already exists",
                    t.file
                )));
            }
        }
        let backup_xml = backup.to_xml()?;
        let checkpoint_xml = checkpoint.to_xml()?;
        let volumes_json = serde_json::to_string(
            &volumes
                .iter()
                .map(|v| InstanceBackupVolumeInfo {
                    volume_name: v.clone(),
                })
                .collect::<Vec<_>>(),
        )
        .map_err(|e| ManagerError::Failed(e.to_string()))?;
        self.metadata.update(|m| {
            if let Some(b) = m.backup.as_mut() {
                b.checkpoint_name = checkpoint.name.clone();
                b.volumes = if volumes.is_empty() {
                    "null".into()
                } else {
                    volumes_json.clone()
                };
            }
        });
        if o.mode == MODE_PULL {
            if let Some(parent) = Path::new(PULL_SOCKET).parent() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    ManagerError::Failed(format!("cannot create {}: {e}", parent.display()))
                })?;
            }
        }
        let frozen = if o.skip_quiesce {
            self.set_quiesce("Skipped", None);
            false
        } else {
            match quiesce.freeze() {
                Ok(()) => {
                    self.set_quiesce("Succeeded", None);
                    true
                }
                Err(e) => {
                    tracing::warn!("Failed freezing guest filesystem: {e}");
                    self.set_quiesce("Failed", Some(e));
                    // KubeVirt thaws whatever the freeze left.
                    true
                }
            }
        };
        let r = backup_begin(d, &backup_xml, &checkpoint_xml);
        if frozen {
            if let Err(e) = quiesce.thaw() {
                tracing::error!("Failed to unfreeze filesystem after backup completion: {e}");
            }
        }
        r
    }

    fn set_quiesce(&self, status: &str, msg: Option<String>) {
        self.metadata.update(|m| {
            if let Some(b) = m.backup.as_mut() {
                b.quiesce_status = status.into();
                if let Some(msg) = &msg {
                    b.backup_msg = msg.clone();
                }
            }
        });
    }

    fn backup_abort(
        &self,
        vmi: &VirtualMachineInstance,
        o: &BackupOptions,
    ) -> Result<(), ManagerError> {
        check_eligible(self.metadata.snapshot().backup.as_ref(), o)
            .map_err(|e| ManagerError::Failed(format!("failed to abort backup: {e}")))?;
        let name = vmi.domain_name();
        self.with_conn(|conn| {
            let d = VirtDomain::lookup_by_name(conn, &name)?;
            let stats = d.get_job_stats(0)?;
            let op = stats.operation.unwrap_or(0);
            if op as u32 != sys::VIR_DOMAIN_JOB_OPERATION_BACKUP
                || stats.r#type as u32 != sys::VIR_DOMAIN_JOB_UNBOUNDED
            {
                return Err(ManagerError::Failed(format!(
                    "cannot abort backup, wrong operation or type: {op}, {}",
                    stats.r#type
                )));
            }
            // SAFETY: live domain pointer for the call's duration.
            if unsafe { sys::virDomainAbortJob(d.as_ptr()) } < 0 {
                return Err(virt::error::Error::last_error().into());
            }
            tracing::info!("backup job abort initiated successfully");
            Ok(())
        })
    }

    /// A backup job of domain `name` ended (libvirt's `JOB_COMPLETED` event
    /// with `errmsg`): the record gets `Completed`, `Failed`, `BackupMsg`
    /// and `EndTimestamp` (KubeVirt's `HandleBackupJobCompletedEvent`).
    pub fn backup_job_completed(&self, name: &str, error: Option<&str>) {
        let Some(current) = self
            .metadata
            .snapshot()
            .backup
            .filter(|b| !b.name.is_empty())
        else {
            tracing::warn!("Received backup job completed event, but no active backup metadata found in cache. Ignoring event.");
            return;
        };
        let job_type = self
            .with_domain(name, |d| {
                Ok(d.get_job_stats(sys::VIR_DOMAIN_JOB_STATS_COMPLETED)?.r#type)
            })
            .ok()
            .flatten()
            .unwrap_or(0);
        let (failed, message) = completion(job_type, &current.mode, error);
        tracing::info!(backup = current.name, failed, message, "backup job ended");
        let now = crate::metadata::now_rfc3339();
        self.metadata.update(|m| match m.backup.as_mut() {
            Some(b) if b.name == current.name => {
                b.failed = failed;
                b.completed = true;
                b.backup_msg = message.clone();
                b.end_timestamp = Some(now.clone());
            }
            _ => tracing::warn!("Backup metadata changed or was cleared before update could complete. Backup completion may not be properly recorded."),
        });
    }

    /// RedefineCheckpoint (KubeVirt main's `RedefineCheckpoint`): the
    /// checkpoint `cp` is defined again from the bitmaps QEMU holds on the
    /// disks' overlays (after a restart libvirt has no checkpoint
    /// metadata). Returns `Err((checkpoint_invalid, error))`.
    ///
    /// # Errors
    /// `(true, ..)` when no disk has the bitmap or libvirt finds the
    /// checkpoint invalid, inconsistent or missing; `(false, ..)` otherwise.
    pub fn redefine_checkpoint(
        &self,
        vmi: &VirtualMachineInstance,
        cp: &BackupCheckpoint,
    ) -> Result<(), (bool, ManagerError)> {
        let name = vmi.domain_name();
        let d = self
            .with_conn(|conn| Ok(VirtDomain::lookup_by_name(conn, &name)?))
            .map_err(|e| {
                (
                    false,
                    ManagerError::Failed(format!("failed to lookup domain {name}: {e}")),
                )
            })?;
        let disks = Self::live_disks(&d).map_err(|e| {
            (
                false,
                ManagerError::Failed(format!("failed to get domain disks: {e}")),
            )
        })?;
        let bitmaps = query_bitmaps(&d).map_err(|e| (false, e))?;
        let mut with = Vec::new();
        for disk in disks
            .iter()
            .filter(|d| !d.target.dev.is_empty() && has_data_store(d))
        {
            let Some(file) = disk.source.as_ref().and_then(|s| s.file.as_deref()) else {
                continue;
            };
            let found = bitmaps
                .get(file)
                .and_then(|b| b.iter().find(|(n, _)| n == &cp.name));
            match found {
                Some((_, false)) => with.push(CheckpointDisk {
                    name: disk.target.dev.clone(),
                    checkpoint: "bitmap".into(),
                    bitmap: None,
                }),
                Some((_, true)) => tracing::warn!(
                    "Bitmap {} on {file} is inconsistent (possibly from failed migration), treating as absent",
                    cp.name
                ),
                None => {}
            }
        }
        if with.is_empty() {
            return Err((
                true,
                ManagerError::Failed(format!("no disks found with checkpoint bitmap {}", cp.name)),
            ));
        }
        let n = with.len();
        let xml = DomainCheckpoint {
            name: cp.name.clone(),
            creation_time: cp.creation_time.as_deref().and_then(unix_seconds),
            parent: None,
            disks: Some(CheckpointDisks { disk: with }),
        }
        .to_xml()
        .map_err(|e| (false, e.into()))?;
        checkpoint_redefine(&d, &xml).map_err(|e| {
            let code = e.code().to_raw();
            let invalid = [
                sys::VIR_ERR_INVALID_DOMAIN_CHECKPOINT,
                sys::VIR_ERR_NO_DOMAIN_CHECKPOINT,
                sys::VIR_ERR_CHECKPOINT_INCONSISTENT,
            ]
            .contains(&code);
            let e: ManagerError = e.into();
            (
                invalid,
                ManagerError::Failed(format!("failed to redefine checkpoint {}: {e}", cp.name)),
            )
        })?;
        tracing::info!(checkpoint = cp.name, disks = n, "checkpoint redefined");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn opts(cmd: &str, mode: &str) -> BackupOptions {
        BackupOptions {
            backup_name: "b1".into(),
            cmd: cmd.into(),
            mode: mode.into(),
            backup_start_time: Some("2026-12-02T10:11:12Z".into()),
            target_path: Some("/backup".into()),
            ..BackupOptions::default()
        }
    }

    #[test]
    fn options_are_checked_in_kubevirts_words() {
        assert_eq!(check_options(&opts("Start", "Push")), Ok(()));
        assert_eq!(
            check_options(&opts("Start", "Stream"))
                .unwrap_err()
                .to_string(),
            "unknown backup mode: only Push and Pull are supported"
        );
        let mut o = opts("Start", "Pull");
        o.target_path = None;
        assert_eq!(
            check_options(&o).unwrap_err().to_string(),
            "backup targetPath wasn't provided"
        );
        assert_eq!(
            check_options(&opts("Stop", "Push"))
                .unwrap_err()
                .to_string(),
            "cmd unsupported, backup command only supports start or abort"
        );
        assert_eq!(check_options(&opts("Abort", "")), Ok(()));
        assert_eq!(
            check_options(&opts("Export", "Pull")),
            Err(BackupOptionsError::Export)
        );
    }

    fn disk(dev: &str, alias: &str, tracked: bool) -> domain::Disk {
        domain::Disk {
            target: domain::DiskTarget {
                dev: dev.into(),
                ..Default::default()
            },
            alias: Some(domain::Alias { name: alias.into() }),
            source: Some(domain::DiskSource {
                file: Some(format!("/x/{dev}")),
                data_store: tracked.then(|| Box::new(domain::DataStore::default())),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// KubeVirt's generateDomainBackup: names, files, bitmaps, server.
    #[test]
    fn plan_as_kubevirt() {
        let disks = [disk("vda", "ua-boot", false), disk("vdb", "ua-data", true)];
        assert_eq!(
            backup_time("2026-12-02T10:11:12Z").as_deref(),
            Some("2026-12-02_10-11-12")
        );
        let dir = Path::new("/backup/vm/b1-2026-12-02_10-11-12");
        let mut o = opts("Start", "Push");
        o.incremental = Some("b0-2026-12-01_00-00-00".into());
        let (b, c, v) = plan(&disks, &o, Some(dir));
        assert_eq!(v, ["data"]);
        assert_eq!(c.name, "b1-2026-12-02_10-11-12");
        assert_eq!(b.mode, "push");
        assert_eq!(b.incremental.as_deref(), Some("b0-2026-12-01_00-00-00"));
        assert_eq!(b.disks.disk[0].backup, "no");
        assert_eq!(
            b.disks.disk[1].target.as_ref().unwrap().file,
            "/backup/vm/b1-2026-12-02_10-11-12/b1-data.qcow2"
        );
        let cd = &c.disks.as_ref().unwrap().disk;
        assert_eq!(
            (cd[0].checkpoint.as_str(), cd[1].checkpoint.as_str()),
            ("no", "bitmap")
        );
        let (b, _, _) = plan(&disks, &opts("Start", "Pull"), Some(dir));
        assert_eq!(b.mode, "pull");
        assert_eq!(b.server.unwrap().socket.as_deref(), Some(PULL_SOCKET));
        let d = &b.disks.disk[1];
        assert_eq!(d.export_name.as_deref(), Some("data"));
        assert_eq!(d.export_bitmap.as_deref(), Some("b1-2026-12-02_10-11-12"));
        assert!(d.target.is_none() && d.scratch.is_some());
    }

    /// KubeVirt's initializeBackupMetadata and checkBackupEligibility.
    #[test]
    fn one_backup_at_a_time() {
        let o = opts("Start", "Push");
        let m = initialize(None, &o).unwrap().unwrap();
        assert_eq!(m.name, "b1");
        assert_eq!(
            initialize(Some(&m), &o),
            Ok(None),
            "the same one again: nothing"
        );
        let mut other = o.clone();
        other.backup_name = "b2".into();
        assert_eq!(
            initialize(Some(&m), &other).unwrap_err(),
            "backup b1 already in progress, need to wait for completion"
        );
        let mut done = m.clone();
        done.end_timestamp = Some("2026-12-02T10:12:00Z".into());
        done.completed = true;
        assert_eq!(
            initialize(Some(&done), &o).unwrap_err(),
            "backup b1 that started at 2026-12-02T10:11:12Z already executed, finished at 2026-12-02T10:12:00Z, completed: true"
        );
        assert!(initialize(Some(&done), &other).unwrap().is_some());
        assert_eq!(
            check_eligible(None, &o).unwrap_err(),
            "could not find ongoing backup"
        );
        assert_eq!(
            check_eligible(Some(&m), &other).unwrap_err(),
            "requested backup differs from ongoing one"
        );
        assert_eq!(
            check_eligible(Some(&done), &o).unwrap_err(),
            "backup already completed"
        );
        assert_eq!(check_eligible(Some(&m), &o), Ok(()));
    }

    #[test]
    fn completion_as_kubevirt() {
        let done = sys::VIR_DOMAIN_JOB_COMPLETED as i32;
        let cancelled = sys::VIR_DOMAIN_JOB_CANCELLED as i32;
        let failed = sys::VIR_DOMAIN_JOB_FAILED as i32;
        assert_eq!(completion(done, "Push", None), (false, String::new()));
        assert_eq!(
            completion(cancelled, "Push", Some("Operation canceled")),
            (true, "backup aborted: Operation canceled".into())
        );
        assert_eq!(
            completion(cancelled, "Pull", Some("Operation canceled")),
            (false, String::new())
        );
        assert_eq!(
            completion(failed, "Push", None),
            (true, "unknown failure reason".into())
        );
        assert_eq!(
            completion(failed, "Push", Some("No space left")),
            (true, "No space left".into())
        );
        assert_eq!(
            completion(0, "Push", None),
            (true, "unexpected job completion type: 0".into())
        );
    }
}
