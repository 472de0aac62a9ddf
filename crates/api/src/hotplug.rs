//! Hot-plugged volumes as the VMI's status tells them apart (KubeVirt
//! v1.6.6 `generateConverterContext` and the converter's disk loop,
//! kubevirt-facts §4.3): a volume whose `status.volumeStatus[]` entry has a
//! `hotplugVolume` is a hot-plug volume, every other entry a permanent one.
//! virt-handler mounts a hot-plug volume's claim into the pod at
//! [`HOTPLUG_DISK_DIR`]`/<volume>.img` (filesystem claim) or as the block
//! device node [`HOTPLUG_DISK_DIR`]`/<volume>` (block claim), and marks its
//! phase `MountedToPod`, later `Ready`; only then does the launcher give
//! the guest its disk.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::VirtualMachineInstance;

/// Where virt-handler mounts hot-plugged volumes into the launcher's pod
/// (KubeVirt's `v1.HotplugDiskDir`, without its trailing `/`).
pub const HOTPLUG_DISK_DIR: &str = "/var/run/kubevirt/hotplug-disks";

/// The image of a filesystem-mode hot-plug claim:
/// `/var/run/kubevirt/hotplug-disks/<volume>.img`
/// (KubeVirt's `GetHotplugFilesystemVolumePath`).
pub fn image_path(volume: &str) -> String {
    format!("{HOTPLUG_DISK_DIR}/{volume}.img")
}

/// The device node of a block-mode hot-plug claim:
/// `/var/run/kubevirt/hotplug-disks/<volume>`
/// (KubeVirt's `GetHotplugBlockDeviceVolumePath`).
pub fn block_path(volume: &str) -> String {
    format!("{HOTPLUG_DISK_DIR}/{volume}")
}

/// Whether `path` (a disk's source file or device) is a hot-plug volume's:
/// it lies under [`HOTPLUG_DISK_DIR`] (KubeVirt's `isHotplugDisk`).
pub fn is_hotplug_source(path: &str) -> bool {
    path.strip_prefix(HOTPLUG_DISK_DIR)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Phase `MountedToPod` (`v1.HotplugVolumeMounted`).
pub const PHASE_MOUNTED_TO_POD: &str = "MountedToPod";
/// Phase `Ready` (`v1.VolumeReady`).
pub const PHASE_READY: &str = "Ready";

/// What `status.volumeStatus` says about the VMI's volumes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeStatuses {
    /// Hot-plug volumes (an entry with `hotplugVolume`) and their phase
    /// (empty when the entry has none).
    pub hotplug: BTreeMap<String, String>,
    /// Volumes with an entry without `hotplugVolume`.
    pub permanent: BTreeSet<String>,
    /// The target (`vda`, `sdb`, ...) an entry records, by volume.
    pub targets: BTreeMap<String, String>,
}

impl VolumeStatuses {
    /// Reads `vmi.status.volumeStatus`; entries without a string `name`,
    /// and a status of another shape, are ignored (virt-handler writes it;
    /// the VMI's own fields are validated elsewhere).
    pub fn of(vmi: &VirtualMachineInstance) -> VolumeStatuses {
        let mut out = VolumeStatuses::default();
        let Some(list) = vmi
            .status
            .as_ref()
            .and_then(|s| s.get("volumeStatus"))
            .and_then(Value::as_array)
        else {
            return out;
        };
        for st in list {
            let Some(name) = st.get("name").and_then(Value::as_str) else {
                continue;
            };
            if st.get("hotplugVolume").is_some_and(|h| !h.is_null()) {
                let phase = st.get("phase").and_then(Value::as_str).unwrap_or("");
                out.hotplug.insert(name.to_owned(), phase.to_owned());
            } else {
                out.permanent.insert(name.to_owned());
            }
            if let Some(t) = st
                .get("target")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                out.targets.insert(name.to_owned(), t.to_owned());
            }
        }
        out
    }

    /// Whether volume `name` is a hot-plug volume.
    pub fn is_hotplug(&self, name: &str) -> bool {
        self.hotplug.contains_key(name)
    }

    /// KubeVirt's rule for which disks the domain has: a hot-plug volume's
    /// once its phase is `MountedToPod` or `Ready`; a permanent one when
    /// the status lists it, or when the status lists no permanent volume
    /// yet (a VMI not started: every disk).
    pub fn disk_wanted(&self, name: &str) -> bool {
        match self.hotplug.get(name) {
            Some(phase) => phase == PHASE_MOUNTED_TO_POD || phase == PHASE_READY,
            None => self.permanent.is_empty() || self.permanent.contains(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(status: &str) -> VirtualMachineInstance {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: m}}\nspec:\n  domain: {{memory: {{guest: 1Gi}}}}\nstatus: {status}\n"
        );
        crate::load::from_slice(doc.as_bytes()).unwrap()
    }

    #[test]
    fn hotplug_and_permanent_volumes_from_the_status() {
        let v = vmi("{volumeStatus: [{name: boot, target: vda}, {name: hp, target: sda, phase: Ready, hotplugVolume: {attachPodName: p}}, {name: wait, phase: Bound, hotplugVolume: {}}, {name: mnt, phase: MountedToPod, hotplugVolume: {}}]}");
        let s = VolumeStatuses::of(&v);
        assert!(s.is_hotplug("hp") && s.is_hotplug("wait") && !s.is_hotplug("boot"));
        assert_eq!(s.targets.get("hp").map(String::as_str), Some("sda"));
        assert_eq!(s.targets.get("wait"), None);
        assert!(s.disk_wanted("boot"));
        assert!(s.disk_wanted("hp"));
        assert!(s.disk_wanted("mnt"));
        assert!(
            !s.disk_wanted("wait"),
            "a volume virt-handler has not made ready"
        );
        assert!(
            !s.disk_wanted("other"),
            "a permanent volume the status does not list"
        );
    }

    #[test]
    fn without_permanent_entries_every_permanent_disk_is_wanted() {
        assert!(VolumeStatuses::of(&vmi("{}")).disk_wanted("boot"));
        let s = VolumeStatuses::of(&vmi("{volumeStatus: [{name: hp, hotplugVolume: {}}]}"));
        assert!(s.disk_wanted("boot"));
        assert!(!s.disk_wanted("hp"));
    }

    #[test]
    fn hotplug_paths() {
        assert_eq!(image_path("v"), "/var/run/kubevirt/hotplug-disks/v.img");
        assert_eq!(block_path("v"), "/var/run/kubevirt/hotplug-disks/v");
        assert!(is_hotplug_source("/var/run/kubevirt/hotplug-disks/v.img"));
        assert!(!is_hotplug_source("/var/run/kubevirt/hotplug-disks-x/v"));
        assert!(!is_hotplug_source(
            "/var/run/kubevirt-private/vmi-disks/v/disk.img"
        ));
    }
}
