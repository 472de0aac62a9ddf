//! `Spec.Metadata.KubeVirt` (`api.KubeVirtMetadata`): the UID and grace
//! period from the domain XML, overlaid with the launcher's runtime
//! metadata (migration, access credentials, memory dump).
//!
//! The metadata types are KubeVirt's Go structs field for field, so serde
//! writes them (Go field names, `null` for a `None`).

use domain::KubeVirtMetadata;
use serde::Serialize;
use serde_json::{json, Value};

/// The launcher's in-memory metadata that KubeVirt injects into
/// `Spec.Metadata.KubeVirt` of every outgoing domain (KubeVirt
/// `api.KubeVirtMetadata`, Go field names). Each `Some` replaces what the
/// domain XML says; `None` keeps it (`null` for the parts our XML lacks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeMetadata {
    /// `UID`: the VMI UID.
    pub uid: Option<String>,
    /// `GracePeriod`.
    pub grace_period: Option<GracePeriod>,
    /// `Migration`.
    pub migration: Option<MigrationMetadata>,
    /// `AccessCredential`.
    pub access_credential: Option<AccessCredentialMetadata>,
    /// `MemoryDump`.
    pub memory_dump: Option<MemoryDumpMetadata>,
    /// `Backup` (KubeVirt main): the last backup's record.
    pub backup: Option<BackupMetadata>,
}

/// `api.BackupMetadata` (KubeVirt main): `{Name, Mode, SkipQuiesce,
/// StartTimestamp, EndTimestamp, Completed, Failed, BackupMsg,
/// CheckpointName, Volumes, QuiesceStatus}`; virt-handler copies it into
/// `vmi.status.changedBlockTracking.backupStatus` (`updateBackupStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct BackupMetadata {
    /// `Name`: the backup's name.
    pub name: String,
    /// `Mode`: `Push` or `Pull`.
    pub mode: String,
    /// `SkipQuiesce`.
    pub skip_quiesce: bool,
    /// `StartTimestamp` (RFC 3339: the request's `backupStartTime`) or `null`.
    pub start_timestamp: Option<String>,
    /// `EndTimestamp` (RFC 3339) or `null` while the job runs.
    pub end_timestamp: Option<String>,
    /// `Completed`: the job ended (successfully or not).
    pub completed: bool,
    /// `Failed`.
    pub failed: bool,
    /// `BackupMsg`: why it failed, or the quiesce failure.
    pub backup_msg: String,
    /// `CheckpointName`: the checkpoint this backup made.
    pub checkpoint_name: String,
    /// `Volumes`: JSON text of the backed-up volumes (`[{"volumeName":..}]`).
    pub volumes: String,
    /// `QuiesceStatus`: `Succeeded`, `Failed` or `Skipped`.
    pub quiesce_status: String,
}

/// `api.GracePeriodMetadata`: `{DeletionGracePeriodSeconds,
/// DeletionTimestamp, MarkedForGracefulShutdown}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct GracePeriod {
    /// `DeletionGracePeriodSeconds` (VMI `terminationGracePeriodSeconds`).
    pub deletion_grace_period_seconds: i64,
    /// `DeletionTimestamp` (RFC 3339) of the first shutdown request, or `null`.
    pub deletion_timestamp: Option<String>,
    /// `MarkedForGracefulShutdown`, or `null`.
    pub marked_for_graceful_shutdown: Option<bool>,
}

/// `api.MigrationMetadata`: `{UID, StartTimestamp, EndTimestamp, Failed,
/// FailureReason, AbortStatus, Mode}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MigrationMetadata {
    /// `UID` of the migration object.
    #[serde(rename = "UID")]
    pub uid: String,
    /// `StartTimestamp` (RFC 3339) or `null`.
    pub start_timestamp: Option<String>,
    /// `EndTimestamp` (RFC 3339) or `null`.
    pub end_timestamp: Option<String>,
    /// `Failed`.
    pub failed: bool,
    /// `FailureReason`.
    pub failure_reason: String,
    /// `AbortStatus`: `Aborting`, `Succeeded`, `Failed` or `""`.
    pub abort_status: String,
    /// `Mode`: `PreCopy`, `PostCopy`, `Paused` or `""`.
    pub mode: String,
}

/// `api.AccessCredentialMetadata`: `{Succeeded, Message}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AccessCredentialMetadata {
    /// `Succeeded`.
    pub succeeded: bool,
    /// `Message`.
    pub message: String,
}

/// `api.MemoryDumpMetadata`: `{FileName, StartTimestamp, EndTimestamp,
/// Completed, Failed, FailureReason}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MemoryDumpMetadata {
    /// `FileName`.
    pub file_name: String,
    /// `StartTimestamp` (RFC 3339) or `null`.
    pub start_timestamp: Option<String>,
    /// `EndTimestamp` (RFC 3339) or `null`.
    pub end_timestamp: Option<String>,
    /// `Completed`.
    pub completed: bool,
    /// `Failed`.
    pub failed: bool,
    /// `FailureReason`.
    pub failure_reason: String,
}

/// `api.Metadata`: `{"KubeVirt": {UID, GracePeriod, Migration,
/// AccessCredential, MemoryDump}}` (a struct: always present).
pub(super) fn metadata_json(
    kv: Option<&KubeVirtMetadata>,
    fallback_uid: &str,
    runtime: &RuntimeMetadata,
) -> Value {
    let uid = runtime
        .uid
        .clone()
        .or_else(|| kv.map(|k| k.uid.clone()).filter(|u| !u.is_empty()))
        .unwrap_or_else(|| fallback_uid.to_owned());
    let grace = runtime.grace_period.clone().or_else(|| {
        kv.and_then(|k| k.graceperiod.as_ref())
            .map(|g| GracePeriod {
                deletion_grace_period_seconds: g.deletion_grace_period_seconds,
                ..GracePeriod::default()
            })
    });
    let mut kv = json!({
        "UID": uid,
        "GracePeriod": grace,
        "Migration": runtime.migration,
        "AccessCredential": runtime.access_credential,
        "MemoryDump": runtime.memory_dump,
    });
    // KubeVirt main's field, written once a backup ran: v1.6.6's
    // virt-handler has no such field (Go ignores it), so a launcher that
    // never backed up answers v1.6.6's shape exactly.
    if let (Some(b), Some(map)) = (&runtime.backup, kv.as_object_mut()) {
        map.insert("Backup".into(), json!(b));
    }
    json!({ "KubeVirt": kv })
}
