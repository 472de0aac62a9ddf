//! The backup messages' JSON (KubeVirt main's `kubevirt.io/api/backup/v1alpha1`):
//! BackupVirtualMachine's `options` ([`BackupOptions`]) and
//! RedefineCheckpoint's `checkpoint` ([`BackupCheckpoint`]), read as Go's
//! `encoding/json` reads them (field names as tagged, unknown fields
//! ignored, `null` as absent), and the metadata the launcher reports
//! ([`super::api_domain::BackupMetadata`]).

use serde::{Deserialize, Serialize};

/// `BackupCmd`.
pub const CMD_START: &str = "Start";
/// `BackupCmd`.
pub const CMD_ABORT: &str = "Abort";
/// `BackupCmd`.
pub const CMD_EXPORT: &str = "Export";
/// `BackupMode`.
pub const MODE_PUSH: &str = "Push";
/// `BackupMode`.
pub const MODE_PULL: &str = "Pull";

/// `backupv1.BackupOptions`: what virt-handler asks of BackupVirtualMachine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupOptions {
    /// `backupName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub backup_name: String,
    /// `cmd`: `Start`, `Abort` or `Export`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cmd: String,
    /// `mode`: `Push` or `Pull`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// `backupStartTime` (`metav1.Time`, RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_start_time: Option<String>,
    /// `incremental`: the checkpoint an incremental backup starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental: Option<String>,
    /// `targetPath`: the directory virt-handler prepared for the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_path: Option<String>,
    /// `skipQuiesce`: do not freeze the guest's file systems.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_quiesce: bool,
    /// `exportServerAddr` (Export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_server_addr: Option<String>,
    /// `exportServerName` (Export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_server_name: Option<String>,
    /// `backupKey` (Export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_key: Option<String>,
    /// `backupCert` (Export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_cert: Option<String>,
    /// `caCert` (Export).
    #[serde(default, rename = "caCert", skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<String>,
}

/// `backupv1.BackupVolumeInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupVolumeInfo {
    /// `volumeName`.
    #[serde(default)]
    pub volume_name: String,
    /// `dataEndpoint`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data_endpoint: String,
    /// `mapEndpoint`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub map_endpoint: String,
}

/// `backupv1.BackupCheckpoint`: RedefineCheckpoint's checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupCheckpoint {
    /// `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `creationTime` (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<String>,
    /// `volumes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<BackupVolumeInfo>,
}

/// `v1.VirtualMachineInstanceBackupVolumeInfo` (`{"volumeName": ..}`), the
/// list KubeVirt stores as JSON text in the metadata's `Volumes`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceBackupVolumeInfo {
    /// `volumeName`.
    pub volume_name: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The JSON virt-handler sends (KubeVirt main's Go tags): every field,
    /// unknown ones ignored, `null` as absent.
    #[test]
    fn options_and_checkpoint_as_go_writes_them() {
        let o: BackupOptions = serde_json::from_str(
            r#"{"backupName":"b1","cmd":"Start","mode":"Push","backupStartTime":"2026-12-02T10:00:00Z",
            "incremental":"b0-2026-12-01_10-00-00","targetPath":"/backup","skipQuiesce":true,
            "exportServerAddr":null,"caCert":"C","future":1}"#,
        )
        .unwrap();
        assert_eq!(o.backup_name, "b1");
        assert_eq!(o.cmd, CMD_START);
        assert_eq!(o.mode, MODE_PUSH);
        assert_eq!(o.backup_start_time.as_deref(), Some("2026-12-02T10:00:00Z"));
        assert_eq!(o.incremental.as_deref(), Some("b0-2026-12-01_10-00-00"));
        assert_eq!(o.target_path.as_deref(), Some("/backup"));
        assert!(o.skip_quiesce);
        assert_eq!(o.export_server_addr, None);
        assert_eq!(o.ca_cert.as_deref(), Some("C"));
        // Go's omitempty: what is unset is not written.
        assert_eq!(
            serde_json::to_value(BackupOptions {
                backup_name: "b".into(),
                cmd: CMD_ABORT.into(),
                ..BackupOptions::default()
            })
            .unwrap(),
            serde_json::json!({"backupName": "b", "cmd": "Abort"})
        );
        let c: BackupCheckpoint = serde_json::from_str(
            r#"{"name":"b1-2026-12-02_10-00-00","creationTime":"2026-12-02T10:00:01Z","volumes":[{"volumeName":"data","dataEndpoint":"x"}]}"#,
        )
        .unwrap();
        assert_eq!(c.name, "b1-2026-12-02_10-00-00");
        assert_eq!(c.volumes[0].volume_name, "data");
        assert_eq!(
            serde_json::to_string(&[InstanceBackupVolumeInfo {
                volume_name: "data".into()
            }])
            .unwrap(),
            r#"[{"volumeName":"data"}]"#
        );
    }
}
