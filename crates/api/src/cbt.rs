//! Changed block tracking (KubeVirt main's `pkg/storage/cbt`): which VMIs
//! and volumes get a qcow2 overlay whose persistent dirty bitmaps make
//! incremental backups possible, and where that overlay lives.
//!
//! virt-controller decides (the cluster's `IncrementalBackup` feature gate
//! and `changedBlockTrackingLabelSelectors`) and writes the decision into
//! `status.changedBlockTracking.state`; the launcher only reads it.

use crate::vmi::Volume;
use crate::VirtualMachineInstance;

/// `status.changedBlockTracking.state` (KubeVirt's
/// `ChangedBlockTrackingState`), the values the launcher acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// `Initializing`: the VM (re)started with tracking on; the launcher
    /// creates the overlays that do not exist yet.
    Initializing,
    /// `Enabled`: the overlays exist; backups and checkpoints are allowed.
    Enabled,
    /// Anything else (absent, `""`, `PendingRestart`, `Disabled`,
    /// `IncrementalBackupFeatureGateDisabled`): no overlay.
    Off,
}

/// Root: where the overlays are (virt-controller mounts the backend
/// storage's `cbt` subdirectory here; KubeVirt's `PathForCBT`).
pub const ROOT_DIR: &str = "/var/lib/libvirt/qemu/cbt";
/// Non-root: the session daemon's directory below the private directory.
pub const NON_ROOT_DIR: &str = "/var/run/kubevirt-private/libvirt/qemu/cbt";

/// The VMI's tracking state.
pub fn state(vmi: &VirtualMachineInstance) -> State {
    match vmi
        .status
        .as_ref()
        .and_then(|s| s.pointer("/changedBlockTracking/state"))
        .and_then(serde_json::Value::as_str)
    {
        Some("Initializing") => State::Initializing,
        Some("Enabled") => State::Enabled,
        _ => State::Off,
    }
}

/// KubeVirt's `HasCBTStateEnabled`: `Initializing` or `Enabled` (the
/// domain gets overlays).
pub fn has_overlays(vmi: &VirtualMachineInstance) -> bool {
    state(vmi) != State::Off
}

/// KubeVirt's `IsCBTEligibleVolume`: a claim, a DataVolume or a hostDisk.
pub fn is_eligible(v: &Volume) -> bool {
    v.persistent_volume_claim.is_some() || v.data_volume.is_some() || v.host_disk.is_some()
}

/// The directory of the VMI's overlays (KubeVirt's `PathForCBT`).
pub fn dir(vmi: &VirtualMachineInstance) -> &'static str {
    if vmi.is_non_root() {
        NON_ROOT_DIR
    } else {
        ROOT_DIR
    }
}

/// Volume `volume`'s overlay: `<dir>/<volume>.qcow2` (KubeVirt's
/// `GetQCOW2OverlayPath`; the volume name is a validated DNS label).
pub fn overlay_path(vmi: &VirtualMachineInstance, volume: &str) -> String {
    format!("{}/{volume}.qcow2", dir(vmi))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn vmi(status: serde_json::Value) -> VirtualMachineInstance {
        let mut v: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"domain": {"devices": {}}}
        }))
        .unwrap();
        v.status = Some(status);
        v
    }

    #[test]
    fn state_and_paths_as_kubevirt() {
        let v = vmi(serde_json::json!({"changedBlockTracking": {"state": "Enabled"}}));
        assert_eq!(state(&v), State::Enabled);
        assert_eq!(
            overlay_path(&v, "data"),
            "/var/lib/libvirt/qemu/cbt/data.qcow2"
        );
        let v = vmi(
            serde_json::json!({"changedBlockTracking": {"state": "Initializing"}, "runtimeUser": 107}),
        );
        assert_eq!(state(&v), State::Initializing);
        assert!(has_overlays(&v));
        assert_eq!(
            overlay_path(&v, "data"),
            "/var/run/kubevirt-private/libvirt/qemu/cbt/data.qcow2"
        );
        for s in [
            "PendingRestart",
            "Disabled",
            "IncrementalBackupFeatureGateDisabled",
            "",
        ] {
            let v = vmi(serde_json::json!({"changedBlockTracking": {"state": s}}));
            assert_eq!(state(&v), State::Off, "{s}");
        }
        assert_eq!(state(&vmi(serde_json::json!({}))), State::Off);
    }
}
