//! Hot-plug of volumes for a standalone `run` (`ctl addvolume`,
//! `ctl removevolume`): what in a cluster `virtctl addvolume` /
//! `removevolume`, virt-api, virt-controller and virt-handler do before
//! the launcher's SyncVMI, played for a launcher started by `run`.
//!
//! - The VMI object: `run` keeps the VMI it started in its state directory
//!   ([`STORE`], the informer's copy); `ctl` changes it and sends it with
//!   SyncVirtualMachine, then stores what the launcher accepted.
//! - virt-api's checks (`pkg/virt-api/rest/volumes.go` `verifyVolumeOption`,
//!   `vms-admitter.go` `validateHotplugDiskConfiguration`), in its words:
//!   a name in use, a volume that does not exist or is not hot-pluggable
//!   (the boot disk), a disk bus other than scsi or virtio.
//! - virt-controller's spec and status: a `persistentVolumeClaim` volume
//!   with `hotpluggable: true`, its disk, and a `volumeStatus` entry with
//!   `hotplugVolume` in phase `MountedToPod`; `Ready` and the target once
//!   the domain has the disk.
//! - virt-handler's mount: the image (or block device) is bind-mounted onto
//!   `/var/run/kubevirt/hotplug-disks/<volume>.img` (`<volume>` for a
//!   device) inside the launcher's mount namespace — as a mount clone
//!   (`open_tree`) moved in with `move_mount` from a thread that entered
//!   that namespace: the host's own mounts may not propagate into it (a
//!   private `/`), and the launcher's paths are its own. Removal unmounts
//!   it there after the detach.
//!
//! Standalone only: in a pod virt-handler does all of this; there is no
//! [`STORE`] and `ctl` refuses.

mod live;
mod mount;
mod store;
mod volumes;

pub use live::{record_current_memory, set_guest_memory, set_link_state, set_sockets};
pub use mount::{mount, mounted_path, server_pid, unmount, Image};
pub use store::{lock_store, read_store, state_dir_of, write_store, StoreLock, STORE};
pub use volumes::{
    add_volume, check_bus, domain_target, forget_volume, is_cdrom, mark_ready, remove_volume,
};

use crate::error::LauncherError;

/// virt-api's admission of a changed VMI (`ctl addvolume`,
/// `addinterface`), played by the launcher's own check of a synced VMI:
/// `api::load::from_command_json` (the command server's decoding) and
/// [`crate::input::admit_synced`] (KubeVirt's defaults, `api::validate`).
/// One rule: whatever the launcher would refuse at SyncVirtualMachine (a
/// disk serial longer than KubeVirt's 256 characters or with other
/// characters than `[A-Za-z0-9_.+-]`, an interface name or MAC KubeVirt's
/// webhook refuses, ...) is refused before anything is mounted or plugged.
///
/// # Errors
/// Input naming the VMI field (`spec.domain.devices.disks[3].serial`).
pub fn admit(vmi: &serde_json::Value) -> Result<(), LauncherError> {
    let typed = api::load::from_command_json(vmi.to_string().as_bytes())?;
    crate::input::admit_synced(&typed)?;
    Ok(())
}
