//! The guest agent's data as virt-handler reads it: `GetGuestInfo`,
//! `GetUsers` and `GetFilesystems` replies, in the shapes of
//! `kubevirt.io/api/core/v1` (`VirtualMachineInstanceGuestAgentInfo` and
//! friends) with KubeVirt's json tags and `omitempty` rules. The parsers
//! of qemu-ga's replies that fill them are `virtwrap::agent::parse`.

use serde::{Deserialize, Serialize};

/// `GuestAgentCommandInfo`: `{name, enabled}` (`enabled` omitted when false).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestAgentCommandInfo {
    /// Command name (`guest-ping`).
    pub name: String,
    /// Whether the agent allows it (a command blocked with `-b` is false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub enabled: bool,
}

/// `VirtualMachineInstanceGuestOSInfo`: every field omitted when empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestOsInfo {
    /// `name` (`Debian GNU/Linux`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `kernelRelease` (`6.1.0-28-amd64`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_release: String,
    /// `version` (`12 (bookworm)`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// `prettyName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pretty_name: String,
    /// `versionId` (`12`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version_id: String,
    /// `kernelVersion` (`#1 SMP PREEMPT_DYNAMIC ...`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_version: String,
    /// `machine` (`x86_64`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine: String,
    /// `id` (`debian`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
}

/// `VirtualMachineInstanceGuestOSUser`: `{userName, domain, loginTime}`;
/// `loginTime` in seconds since the epoch (float), omitted when 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestOsUser {
    /// `userName`.
    pub user_name: String,
    /// `domain` (Windows), omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// `loginTime`, seconds since the epoch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub login_time: f64,
}

/// `VirtualMachineInstanceFileSystemDisk`: `{serial, busType}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemDisk {
    /// `serial`, omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub serial: String,
    /// `busType` (`virtio`, `scsi`, `sata` ...).
    pub bus_type: String,
}

/// `VirtualMachineInstanceFileSystem`: `{diskName, mountPoint,
/// fileSystemType, usedBytes, totalBytes, disk}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSystem {
    /// `diskName` (qemu-ga's `name`: `vda1`, `dm-0`).
    pub disk_name: String,
    /// `mountPoint`.
    pub mount_point: String,
    /// `fileSystemType` (`ext4`).
    pub file_system_type: String,
    /// `usedBytes`.
    pub used_bytes: u64,
    /// `totalBytes`.
    pub total_bytes: u64,
    /// `disk`: the disks under it, omitted when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk: Vec<FileSystemDisk>,
}

/// `VirtualMachineInstanceFileSystemInfo`: `{disks}` (never omitted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSystemInfo {
    /// `disks`.
    pub disks: Vec<FileSystem>,
}

/// `VirtualMachineInstanceGuestAgentInfo`: what GetGuestInfo returns
/// (`kind`/`apiVersion` are empty in KubeVirt's reply, hence omitted).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestAgentInfo {
    /// `guestAgentVersion`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub guest_agent_version: String,
    /// `supportedCommands`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_commands: Vec<GuestAgentCommandInfo>,
    /// `hostname`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// `os` (a struct in KubeVirt: always present, `{}` when unknown).
    #[serde(default)]
    pub os: GuestOsInfo,
    /// `timezone`: `"<zone>, <offset seconds>"`, `", 0"` when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub timezone: String,
    /// `userList` (at most 10 in GetGuestInfo).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_list: Vec<GuestOsUser>,
    /// `fsInfo` (at most 10 file systems in GetGuestInfo).
    #[serde(default)]
    pub fs_info: FileSystemInfo,
    /// `fsFreezeStatus`: `frozen`, `thawed` or omitted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fs_freeze_status: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(f: &f64) -> bool {
    *f == 0.0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn empty_values_are_omitted_but_the_structs() {
        // `os` and `fsInfo` are Go structs, not pointers: always present.
        let json = serde_json::to_string(&GuestAgentInfo::default()).unwrap();
        assert_eq!(json, r#"{"os":{},"fsInfo":{"disks":[]}}"#);
        let cmd = GuestAgentCommandInfo {
            name: "guest-exec".into(),
            enabled: false,
        };
        assert_eq!(
            serde_json::to_string(&cmd).unwrap(),
            r#"{"name":"guest-exec"}"#
        );
        let user = GuestOsUser {
            user_name: "root".into(),
            ..GuestOsUser::default()
        };
        assert_eq!(
            serde_json::to_string(&user).unwrap(),
            r#"{"userName":"root"}"#
        );
    }
}
