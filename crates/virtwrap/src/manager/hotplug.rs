//! Hot-plug of volumes on a running domain (KubeVirt v1.6.6 `syncDisks`,
//! kubevirt-facts §8.1 step 6): on a SyncVMI of a running domain, the disks
//! of hot-plug volumes that the converted domain has and the live one lacks
//! (by target name) are attached once their image or device opens; those
//! the live domain has and the converted one lacks are detached. Only disks
//! whose source lies under virt-handler's hot-plug directory
//! ([`api::hotplug::HOTPLUG_DISK_DIR`]) on the virtio or scsi bus (or no
//! bus) take part: a permanent disk is never attached or detached here,
//! and a sata disk (which virt-api refuses to hot-plug) is left alone.
//! CD-ROM drives (any bus) get their medium changed instead (KubeVirt's
//! `getUpdatedDisks`): a drive whose source is empty or a hot-plug
//! volume's, and whose converted source differs, is updated in place —
//! inject when a hot-plug volume now backs it, eject when it no longer
//! does. All with `VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG`, as
//! KubeVirt.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use api::VirtualMachineInstance;
use domain::Disk;
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{LibvirtDomainManager, ManagerError};

/// `DEVICE_MODIFY_LIVE | DEVICE_MODIFY_CONFIG` (KubeVirt's
/// `affectDeviceLiveAndConfigLibvirtFlags`).
const LIVE_AND_CONFIG: u32 = sys::VIR_DOMAIN_AFFECT_LIVE | sys::VIR_DOMAIN_AFFECT_CONFIG;

/// The image or device a disk reads: `<source file>` or `<source dev>`
/// (KubeVirt's `getSourceFile`), empty without one.
pub fn source_path(d: &Disk) -> &str {
    d.source
        .as_ref()
        .and_then(|s| s.file.as_deref().or(s.dev.as_deref()))
        .unwrap_or("")
}

/// A disk that hot-plug may attach or detach: its source is a hot-plug
/// volume's and its bus virtio, scsi or unset (KubeVirt's
/// `getAttachedDisks` / `getDetachedDisks` filters).
fn pluggable(d: &Disk) -> bool {
    api::hotplug::is_hotplug_source(source_path(d))
        && matches!(d.target.bus.as_deref(), None | Some("" | "virtio" | "scsi"))
}

/// What a sync changes: the disks to detach (from the live domain, as it
/// has them), to attach (as converted) and the CD-ROM drives whose medium
/// changes (the live drive with its new source).
#[derive(Debug, Default, PartialEq)]
pub struct DiskChanges {
    /// Live hot-plug disks whose target the converted domain no longer has.
    pub detach: Vec<Disk>,
    /// Converted hot-plug disks whose target the live domain lacks.
    pub attach: Vec<Disk>,
    /// Live CD-ROM drives with the medium they get (none: ejected).
    pub update: Vec<Disk>,
}

/// A drive whose medium hot-plug may change: empty or a hot-plug volume.
fn changeable_medium(d: &Disk) -> bool {
    let src = source_path(d);
    src.is_empty() || api::hotplug::is_hotplug_source(src)
}

/// KubeVirt's `getUpdatedDisks`: each live CD-ROM drive whose medium is
/// empty or a hot-plug volume's gets the converted drive's (of the same
/// target; none when the converted domain lacks the drive) when the two
/// differ: the live drive with that source, `type` `file` or `block` and
/// driver format `raw`. Sources are compared by path (libvirt adds an
/// `index` to the live one).
fn cdrom_updates(live: &[Disk], wanted: &[Disk]) -> Vec<Disk> {
    let mut out = Vec::new();
    for old in live.iter().filter(|d| d.device == "cdrom") {
        let new = wanted.iter().find(|d| d.target.dev == old.target.dev);
        if new.is_some_and(|n| n.device != "cdrom" || !changeable_medium(n))
            || !changeable_medium(old)
        {
            continue;
        }
        let new_source = new.and_then(|n| n.source.clone()).filter(|s| {
            s.file
                .as_deref()
                .or(s.dev.as_deref())
                .is_some_and(|p| !p.is_empty())
        });
        let new_path = new_source
            .as_ref()
            .and_then(|s| s.file.as_deref().or(s.dev.as_deref()))
            .unwrap_or("");
        if new_path == source_path(old) {
            continue;
        }
        let mut d = old.clone();
        d.disk_type = if new_source.as_ref().is_some_and(|s| s.file.is_some()) {
            "file"
        } else {
            "block"
        }
        .into();
        d.source = new_source;
        d.driver.get_or_insert_with(Default::default).format = Some("raw".into());
        out.push(d);
    }
    out
}

/// Compares the live domain's disks (`live`) with the converted ones
/// (`wanted`) by target name.
pub fn disk_changes(live: &[Disk], wanted: &[Disk]) -> DiskChanges {
    let live_targets: BTreeSet<&str> = live.iter().map(|d| d.target.dev.as_str()).collect();
    let wanted_targets: BTreeSet<&str> = wanted.iter().map(|d| d.target.dev.as_str()).collect();
    DiskChanges {
        detach: live
            .iter()
            .filter(|d| pluggable(d) && !wanted_targets.contains(d.target.dev.as_str()))
            .cloned()
            .collect(),
        attach: wanted
            .iter()
            .filter(|d| pluggable(d) && !live_targets.contains(d.target.dev.as_str()))
            .cloned()
            .collect(),
        update: cdrom_updates(live, wanted),
    }
}

/// Why a hot-plug image or device cannot be used yet ([`ready_to_use`]);
/// the disk is left for a later sync and this is logged. Each names the
/// path.
#[derive(Debug, thiserror::Error)]
pub enum NotReadyError {
    /// Missing (virt-handler has not mounted it, or it vanished), or its
    /// metadata cannot be read.
    #[error("{path}: {source}")]
    Stat {
        /// The image or device.
        path: String,
        /// The `lstat` error.
        #[source]
        source: std::io::Error,
    },
    /// A symbolic link (never followed: the launcher made none there).
    #[error("{path} is a symbolic link")]
    Link {
        /// The path.
        path: String,
    },
    /// Neither a regular file nor a block device.
    #[error("{path} is neither a file nor a block device")]
    Kind {
        /// The path.
        path: String,
    },
    /// The open failed.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The image or device.
        path: String,
        /// The `open` error.
        #[source]
        source: std::io::Error,
    },
}

/// Whether the hot-plug image or device at `path` can be used now
/// (KubeVirt's `checkIfDiskReadyToUse`: a device node opens read-only, a
/// file read-write).
///
/// # Errors
/// [`NotReadyError`]: missing, a symbolic link, another kind of file, or
/// the open failed.
pub fn ready_to_use(path: &str) -> Result<(), NotReadyError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| NotReadyError::Stat {
        path: path.to_owned(),
        source,
    })?;
    let ft = meta.file_type();
    let mut o = OpenOptions::new();
    o.custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC);
    if ft.is_block_device() {
        o.read(true);
    } else if ft.is_file() {
        o.read(true).write(true);
    } else if ft.is_symlink() {
        return Err(NotReadyError::Link {
            path: path.to_owned(),
        });
    } else {
        return Err(NotReadyError::Kind {
            path: path.to_owned(),
        });
    }
    o.open(path)
        .map(drop)
        .map_err(|source| NotReadyError::Open {
            path: path.to_owned(),
            source,
        })
}

impl LibvirtDomainManager {
    /// KubeVirt's `syncDisks` for the running domain `dom`, whose converted
    /// definition is `spec`: detaches, then attaches (a disk that cannot
    /// be opened yet is left for a later sync and logged).
    ///
    /// # Errors
    /// libvirt's refusal of a detach, as KubeVirt returns it, or of an
    /// attach ([`ManagerError::DiskAttach`]: libvirt's error, the disk named);
    /// [`ManagerError::Xml`] when the live XML does not parse.
    pub(super) fn sync_disks(
        &self,
        vmi: &VirtualMachineInstance,
        dom: &VirtDomain,
        spec: &domain::Domain,
    ) -> Result<(), ManagerError> {
        let live = domain::Domain::from_xml(&dom.get_xml_desc(0)?)?;
        let changes = disk_changes(&live.devices.disk, &spec.devices.disk);
        let name = vmi.domain_name();
        for d in changes.detach {
            let alias = d.alias.as_ref().map(|a| a.name.as_str()).unwrap_or("");
            tracing::info!(domain = %name, alias, target = %d.target.dev, "Detaching disk");
            dom.detach_device_flags(&d.to_xml()?, LIVE_AND_CONFIG)
                .inspect_err(|e| tracing::error!(domain = %name, "detaching device: {e}"))?;
        }
        for d in changes.attach {
            let alias = d.alias.as_ref().map(|a| a.name.as_str()).unwrap_or("");
            if let Err(why) = ready_to_use(source_path(&d)) {
                tracing::info!(domain = %name, alias, "hot-plug disk not ready to use, not attached yet: {why}");
                continue;
            }
            tracing::info!(domain = %name, alias, target = %d.target.dev, "Attaching disk");
            dom.attach_device_flags(&d.to_xml()?, LIVE_AND_CONFIG)
                .map_err(|e| ManagerError::DiskAttach {
                    alias: alias.strip_prefix("ua-").unwrap_or(alias).to_owned(),
                    bus: d.target.bus.clone().unwrap_or_default(),
                    source: Box::new(e.into()),
                })
                .inspect_err(|e| tracing::error!(domain = %name, "attaching device: {e}"))?;
        }
        for d in changes.update {
            let alias = d.alias.as_ref().map(|a| a.name.as_str()).unwrap_or("");
            let src = source_path(&d);
            if !src.is_empty() {
                if let Err(why) = ready_to_use(src) {
                    tracing::info!(domain = %name, alias, "CD-ROM medium not ready to use, not inserted yet: {why}");
                    continue;
                }
            }
            tracing::info!(domain = %name, alias, target = %d.target.dev, source = src, "Updating disk");
            dom.update_device_flags(&d.to_xml()?, LIVE_AND_CONFIG)
                .inspect_err(|e| tracing::error!(domain = %name, "updating device: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::{DiskSource, DiskTarget};

    #[test]
    fn a_refused_attach_names_the_disk_and_a_full_pci_bus_is_explained() {
        let refused = |bus: &str, message: &str| {
            ManagerError::DiskAttach {
                alias: "extra".into(),
                bus: bus.into(),
                source: Box::new(ManagerError::Libvirt {
                    code: 1,
                    domain: 20,
                    message: message.into(),
                }),
            }
            .to_string()
        };
        let full = refused("virtio", "internal error: No more available PCI slots");
        assert!(
            full.starts_with("attaching disk extra (bus virtio): LibvirtError(Code=1, Domain=20, Message='internal error: No more available PCI slots'): every PCIe root port left free for hot-plug")
                && full.ends_with("a disk on bus scsi needs none"),
            "{full}"
        );
        assert_eq!(
            refused("scsi", "internal error: unable to execute QEMU command"),
            "attaching disk extra (bus scsi): LibvirtError(Code=1, Domain=20, Message='internal error: unable to execute QEMU command')"
        );
    }

    fn disk(dev: &str, bus: &str, source: &str) -> Disk {
        Disk {
            disk_type: "file".into(),
            device: "disk".into(),
            source: Some(DiskSource {
                file: Some(source.into()),
                ..DiskSource::default()
            }),
            target: DiskTarget {
                dev: dev.into(),
                bus: Some(bus.into()),
                tray: None,
            },
            ..Disk::default()
        }
    }

    const HP: &str = "/var/run/kubevirt/hotplug-disks/hp.img";
    const BOOT: &str = "/var/run/kubevirt-ephemeral-disks/disk-data/boot/disk.qcow2";

    #[test]
    fn new_hotplug_disks_are_attached_and_gone_ones_detached() {
        let boot = disk("vda", "virtio", BOOT);
        let hp = disk("vdb", "virtio", HP);
        let scsi = disk("sda", "scsi", "/var/run/kubevirt/hotplug-disks/blk");
        let c = disk_changes(
            std::slice::from_ref(&boot),
            &[boot.clone(), hp.clone(), scsi.clone()],
        );
        assert_eq!(c.attach, vec![hp.clone(), scsi.clone()]);
        assert!(c.detach.is_empty());
        let c = disk_changes(
            &[boot.clone(), hp.clone(), scsi.clone()],
            &[boot.clone(), scsi],
        );
        assert_eq!(c.detach, vec![hp]);
        assert!(c.attach.is_empty());
    }

    #[test]
    fn permanent_and_sata_disks_are_never_plugged() {
        let boot = disk("vda", "virtio", BOOT);
        // A permanent disk missing from the converted domain stays.
        assert_eq!(
            disk_changes(std::slice::from_ref(&boot), &[]),
            DiskChanges::default()
        );
        // ... and one the live domain lacks is no hot-plug.
        assert_eq!(disk_changes(&[], &[boot]), DiskChanges::default());
        let sata = disk("sda", "sata", HP);
        assert_eq!(
            disk_changes(&[], std::slice::from_ref(&sata)),
            DiskChanges::default()
        );
        assert_eq!(disk_changes(&[sata], &[]), DiskChanges::default());
        // A source beside the directory is none of its.
        let beside = disk("vdb", "virtio", "/var/run/kubevirt/hotplug-disks-x/a.img");
        assert_eq!(disk_changes(&[], &[beside]), DiskChanges::default());
    }

    fn cdrom(dev: &str, source: Option<&str>) -> Disk {
        let mut d = disk(dev, "sata", source.unwrap_or(""));
        d.device = "cdrom".into();
        if source.is_none() {
            d.source = None;
            d.disk_type = "block".into();
        }
        d
    }

    #[test]
    fn cdrom_media_are_inserted_and_ejected_in_place() {
        let iso = "/var/run/kubevirt/hotplug-disks/cd.img";
        let empty = cdrom("sda", None);
        let full = cdrom("sda", Some(iso));
        // Inject: the live empty drive gets the file, as a raw file disk.
        let c = disk_changes(std::slice::from_ref(&empty), std::slice::from_ref(&full));
        assert!(c.attach.is_empty() && c.detach.is_empty());
        assert_eq!(c.update.len(), 1);
        let u = &c.update[0];
        assert_eq!((u.disk_type.as_str(), source_path(u)), ("file", iso));
        assert_eq!(u.driver.as_ref().unwrap().format.as_deref(), Some("raw"));
        // Same medium: nothing.
        assert!(
            disk_changes(std::slice::from_ref(&full), std::slice::from_ref(&full))
                .update
                .is_empty()
        );
        // Eject: the converted drive is empty (or gone): no source, block.
        for wanted in [vec![empty.clone()], vec![]] {
            let c = disk_changes(std::slice::from_ref(&full), &wanted);
            assert_eq!(c.update.len(), 1);
            assert_eq!(
                (c.update[0].disk_type.as_str(), c.update[0].source.is_none()),
                ("block", true)
            );
        }
        // A drive with a permanent medium (a container disk's ISO) is left.
        let permanent = cdrom("sda", Some(BOOT));
        assert!(disk_changes(
            std::slice::from_ref(&permanent),
            std::slice::from_ref(&empty)
        )
        .update
        .is_empty());
        assert!(disk_changes(&[empty], &[permanent]).update.is_empty());
    }

    #[test]
    fn readiness_of_files_devices_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("a.img");
        std::fs::write(&img, b"x").unwrap();
        ready_to_use(img.to_str().unwrap()).unwrap();
        let link = dir.path().join("l.img");
        std::os::unix::fs::symlink(&img, &link).unwrap();
        assert!(ready_to_use(link.to_str().unwrap())
            .unwrap_err()
            .to_string()
            .ends_with("is a symbolic link"));
        let gone = dir.path().join("gone.img");
        assert!(ready_to_use(gone.to_str().unwrap())
            .unwrap_err()
            .to_string()
            .contains("No such file"));
        assert!(ready_to_use(dir.path().to_str().unwrap())
            .unwrap_err()
            .to_string()
            .ends_with("is neither a file nor a block device"));
    }
}
