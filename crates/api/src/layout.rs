//! KubeVirt's file layout in the launcher's pod: where each volume's
//! image, overlay and ISO, and each socket QEMU listens on, lives.
//!
//! This is the one place that decides a path: the converter writes these
//! paths into the domain, the storage crate creates or checks the files
//! behind them, the launcher bind-mounts its directories onto the
//! directories of [`Paths`]. Every path is built from a configured
//! directory ([`Paths`]) and names that validation made safe (DNS-1123
//! volume names, namespace, name and UID of the VMI): nothing here reads
//! the file system.
//!
//! Sources: KubeVirt v1.6.6 `pkg/container-disk` (`disk_<i>.img`),
//! `pkg/ephemeral-disk` (`disk-data/<vol>/disk.qcow2`), `pkg/emptydisk`,
//! `pkg/host-disk` (`vmi-disks/<vol>/disk.img`), `pkg/cloud-init`
//! (`GetIsoFilePath`), `pkg/config` (config volume ISOs),
//! `pkg/downwardmetrics`, the converter's socket paths
//! (kubevirt-facts §5).

use crate::names::xml_text;
use crate::vmi::Volume;
use crate::{FieldError, VirtualMachineInstance};

/// The pr-helper socket KubeVirt's `lun` reservations connect to.
pub const PR_HELPER_SOCKET: &str = "/var/run/kubevirt/daemons/pr/pr-helper.sock";
/// Where KubeVirt's virtiofsd containers put their sockets.
pub const VIRTIOFS_SOCKET_DIR: &str = "/var/run/kubevirt/virtiofs-containers";
/// Where kubelet mounts the pod's service account (the `serviceAccount`
/// volume's source).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The socket of the virtiofsd serving filesystem `name`:
/// `<virtiofs-dir>/<name>.sock`.
pub fn virtiofs_socket(name: &str) -> String {
    format!("{VIRTIOFS_SOCKET_DIR}/{name}.sock")
}

/// The device node of a block-mode claim in the pod: `/dev/<vol>`.
pub fn block_device(volume: &str) -> String {
    format!("/dev/{volume}")
}

/// The directories KubeVirt's paths are built under. Defaults are
/// KubeVirt's in-pod paths; standalone mode maps them onto private
/// directories with bind mounts, so the domain XML is the same. Values are
/// absolute directories; a trailing `/` is ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// `--container-disk-dir` (`/var/run/kubevirt/container-disks`).
    pub container_disk_dir: String,
    /// `--ephemeral-disk-dir` (`/var/run/kubevirt-ephemeral-disks`).
    pub ephemeral_disk_dir: String,
    /// KubeVirt's private dir (`/var/run/kubevirt-private`).
    pub private_dir: String,
    /// Where emptyDisk images live (`/var/run/libvirt/empty-disks`).
    pub empty_disk_dir: String,
    /// `--ovmf-path` (`/usr/share/OVMF`, `/usr/share/AAVMF` on arm64).
    pub ovmf_dir: String,
    /// EFI variable stores (`/var/lib/libvirt/qemu/nvram`).
    pub nvram_dir: String,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            container_disk_dir: "/var/run/kubevirt/container-disks".into(),
            ephemeral_disk_dir: "/var/run/kubevirt-ephemeral-disks".into(),
            private_dir: "/var/run/kubevirt-private".into(),
            empty_disk_dir: "/var/run/libvirt/empty-disks".into(),
            ovmf_dir: "/usr/share/OVMF".into(),
            nvram_dir: "/var/lib/libvirt/qemu/nvram".into(),
        }
    }
}

/// Where a non-root VMI's EFI variables are: the session daemon's
/// `$XDG_CONFIG_HOME/libvirt/qemu/nvram` (KubeVirt's `PathForNVram`).
pub const NON_ROOT_NVRAM_DIR: &str = "/var/run/kubevirt-private/libvirt/qemu/nvram";

fn dir(d: &str) -> &str {
    d.trim_end_matches('/')
}

impl Paths {
    /// The container disk image virt-handler mounts for the `index`-th
    /// volume of `spec.volumes`: `<container-disk-dir>/disk_<index>.img`.
    pub fn container_disk_image(&self, index: usize) -> String {
        format!("{}/disk_{index}.img", dir(&self.container_disk_dir))
    }

    /// Where a kernel boot container's files are:
    /// `<container-disk-dir>/kernel-boot`.
    pub fn kernel_boot_dir(&self) -> String {
        format!("{}/kernel-boot", dir(&self.container_disk_dir))
    }

    /// Where the kernel boot artifact at `artifact` (the image's
    /// `kernelPath` or `initrdPath`) is for QEMU:
    /// `<container-disk-dir>/kernel-boot/<basename>` (KubeVirt keeps only
    /// the base name); `None` when the last component is empty, `.` or `..`.
    pub fn kernel_boot_artifact(&self, artifact: &str) -> Option<String> {
        let name = artifact.rsplit('/').next()?;
        (!name.is_empty() && name != "." && name != "..")
            .then(|| format!("{}/{name}", self.kernel_boot_dir()))
    }

    /// The writable qcow2 overlay of a containerDisk or ephemeral volume:
    /// `<ephemeral-disk-dir>/disk-data/<vol>/disk.qcow2`.
    pub fn overlay(&self, volume: &str) -> String {
        format!(
            "{}/disk-data/{volume}/disk.qcow2",
            dir(&self.ephemeral_disk_dir)
        )
    }

    /// The image of an emptyDisk volume: `<empty-disk-dir>/<vol>.qcow2`.
    pub fn empty_disk_image(&self, volume: &str) -> String {
        format!("{}/{volume}.qcow2", dir(&self.empty_disk_dir))
    }

    /// The directory a filesystem-mode claim (or a hostDisk's directory)
    /// is mounted at: `<private-dir>/vmi-disks/<vol>`.
    pub fn claim_dir(&self, volume: &str) -> String {
        format!("{}/vmi-disks/{volume}", dir(&self.private_dir))
    }

    /// The image of a filesystem-mode PVC or DataVolume:
    /// `<private-dir>/vmi-disks/<vol>/disk.img`.
    pub fn pvc_image(&self, volume: &str) -> String {
        format!("{}/disk.img", self.claim_dir(volume))
    }

    /// The image of a hostDisk volume:
    /// `<private-dir>/vmi-disks/<vol>/<basename(path)>`.
    ///
    /// # Errors
    /// A [`FieldError`] about `field` when `path` is not absolute or has no
    /// usable file name, or when the name has a character XML cannot
    /// carry.
    pub fn host_disk_image(
        &self,
        volume: &str,
        path: &str,
        field: &str,
    ) -> Result<String, FieldError> {
        let name = path.rsplit('/').next().unwrap_or("");
        if name.is_empty() || name == "." || name == ".." || !path.starts_with('/') {
            return Err(FieldError::new(
                field,
                format!("{path:?} is not an absolute path to a file"),
            ));
        }
        xml_text(field, name)?;
        Ok(format!("{}/{name}", self.claim_dir(volume)))
    }

    /// The per-VMI cloud-init directory:
    /// `<ephemeral-disk-dir>/cloud-init-data/<namespace>/<name>`.
    pub fn cloud_init_dir(&self, vmi: &VirtualMachineInstance) -> String {
        format!(
            "{}/cloud-init-data/{}/{}",
            dir(&self.ephemeral_disk_dir),
            vmi.namespace(),
            vmi.metadata.name
        )
    }

    /// The cloud-init ISO of a VMI: `<cloud-init-dir>/noCloud.iso` (NoCloud)
    /// or `<cloud-init-dir>/configdrive.iso` (config drive), KubeVirt's
    /// `cloudinit.GetIsoFilePath`.
    pub fn cloud_init_iso(&self, vmi: &VirtualMachineInstance, config_drive: bool) -> String {
        let file = if config_drive {
            "configdrive.iso"
        } else {
            "noCloud.iso"
        };
        format!("{}/{file}", self.cloud_init_dir(vmi))
    }

    /// The directory of a Secret the pod mounts for volume or credential
    /// `name`: `<private-dir>/secret/<name>` (cloud-init secret
    /// references use the volume's name, access credentials
    /// `<secretName>-access-cred`).
    pub fn secret_dir(&self, name: &str) -> String {
        format!("{}/secret/{name}", dir(&self.private_dir))
    }

    /// The downwardMetrics volume's disk, a vhostmd metrics image the
    /// guest reads: `<private-dir>/downwardapi-disks/vhostmd0`.
    pub fn downward_metrics_disk(&self) -> String {
        format!("{}/downwardapi-disks/vhostmd0", dir(&self.private_dir))
    }

    /// The downward metrics socket QEMU listens on:
    /// `<private-dir>/downwardmetrics-channel/downwardmetrics.sock`.
    pub fn downward_metrics_socket(&self) -> String {
        format!(
            "{}/downwardmetrics-channel/downwardmetrics.sock",
            dir(&self.private_dir)
        )
    }

    /// The per-VMI socket directory: `<private-dir>/<uid>` (keyed by UID
    /// so the paths stay short whatever the name; KubeVirt issue 1222).
    pub fn socket_dir(&self, vmi: &VirtualMachineInstance) -> String {
        format!("{}/{}", dir(&self.private_dir), vmi.uid())
    }

    /// The serial console socket QEMU listens on: `<socket-dir>/virt-serial0`.
    pub fn serial_socket(&self, vmi: &VirtualMachineInstance) -> String {
        format!("{}/virt-serial0", self.socket_dir(vmi))
    }

    /// The serial console log: `<socket-dir>/virt-serial0-log`.
    pub fn serial_log(&self, vmi: &VirtualMachineInstance) -> String {
        format!("{}/virt-serial0-log", self.socket_dir(vmi))
    }

    /// The VNC socket: `<socket-dir>/virt-vnc`.
    pub fn vnc_socket(&self, vmi: &VirtualMachineInstance) -> String {
        format!("{}/virt-vnc", self.socket_dir(vmi))
    }

    /// The `index`-th USB redirection socket:
    /// `<socket-dir>/virt-usbredir-<index>`.
    pub fn usbredir_socket(&self, vmi: &VirtualMachineInstance, index: usize) -> String {
        format!("{}/virt-usbredir-{index}", self.socket_dir(vmi))
    }

    /// An EFI firmware file of [`Paths::ovmf_dir`]: `<ovmf-dir>/<file>`.
    pub fn ovmf_file(&self, file: &str) -> String {
        format!("{}/{file}", dir(&self.ovmf_dir))
    }

    /// The EFI variable store of a VMI: `<nvram-dir>/<name>_VARS.fd`
    /// (KubeVirt names it after the VMI's name alone); for a non-root VMI
    /// ([`VirtualMachineInstance::is_non_root`]) in the session daemon's
    /// [`NON_ROOT_NVRAM_DIR`] (KubeVirt's `services.PathForNVram`).
    pub fn nvram(&self, vmi: &VirtualMachineInstance) -> String {
        let d = if vmi.is_non_root() {
            NON_ROOT_NVRAM_DIR
        } else {
            dir(&self.nvram_dir)
        };
        format!("{d}/{}_VARS.fd", vmi.metadata.name)
    }
}

/// The kinds of config volumes KubeVirt turns into ISO disks
/// (kubevirt-facts §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigKind {
    /// `configMap`: source `<private>/config-map/<vol>/`, disk `<private>/config-map-disks/<vol>.iso`.
    ConfigMap,
    /// `secret`: source `<private>/secret/<vol>/`, disk `<private>/secret-disks/<vol>.iso`.
    Secret,
    /// `downwardAPI`: source `<private>/downwardapi/<vol>/`, disk `<private>/downwardapi-disks/<vol>.iso`.
    DownwardApi,
    /// `serviceAccount`: source [`SERVICE_ACCOUNT_DIR`],
    /// disk `<private>/service-account-disk/service-account.iso`.
    ServiceAccount,
    /// `sysprep`: source `<private>/sysprep/<vol>/`, disk
    /// `<private>/sysprep-disks/<vol>.iso`, label `unattendCD`.
    Sysprep,
}

impl ConfigKind {
    /// The config source of `v`, if it has one.
    pub fn of(v: &Volume) -> Option<ConfigKind> {
        if v.config_map.is_some() {
            Some(ConfigKind::ConfigMap)
        } else if v.secret.is_some() {
            Some(ConfigKind::Secret)
        } else if v.downward_api.is_some() {
            Some(ConfigKind::DownwardApi)
        } else if v.service_account.is_some() {
            Some(ConfigKind::ServiceAccount)
        } else if v.sysprep.is_some() {
            Some(ConfigKind::Sysprep)
        } else {
            None
        }
    }

    /// The VMI field name of the source (`configMap`, ...).
    pub fn field(self) -> &'static str {
        match self {
            ConfigKind::ConfigMap => "configMap",
            ConfigKind::Secret => "secret",
            ConfigKind::DownwardApi => "downwardAPI",
            ConfigKind::ServiceAccount => "serviceAccount",
            ConfigKind::Sysprep => "sysprep",
        }
    }

    /// Where the pod mounts the source directory of volume `volume`.
    pub fn source_dir(self, paths: &Paths, volume: &str) -> String {
        let p = dir(&paths.private_dir);
        match self {
            ConfigKind::ConfigMap => format!("{p}/config-map/{volume}"),
            ConfigKind::Secret => paths.secret_dir(volume),
            ConfigKind::DownwardApi => format!("{p}/downwardapi/{volume}"),
            ConfigKind::ServiceAccount => SERVICE_ACCOUNT_DIR.into(),
            ConfigKind::Sysprep => format!("{p}/sysprep/{volume}"),
        }
    }

    /// The ISO image of volume `volume`.
    pub fn iso(self, paths: &Paths, volume: &str) -> String {
        let p = dir(&paths.private_dir);
        match self {
            ConfigKind::ConfigMap => format!("{p}/config-map-disks/{volume}.iso"),
            ConfigKind::Secret => format!("{p}/secret-disks/{volume}.iso"),
            ConfigKind::DownwardApi => format!("{p}/downwardapi-disks/{volume}.iso"),
            ConfigKind::ServiceAccount => format!("{p}/service-account-disk/service-account.iso"),
            ConfigKind::Sysprep => format!("{p}/sysprep-disks/{volume}.iso"),
        }
    }
}

/// Where a claim's data is: its block device or its image file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimData {
    /// A block-mode claim: [`block_device`].
    Block(String),
    /// A filesystem-mode claim's image ([`Paths::pvc_image`]) or a
    /// hostDisk's file ([`Paths::host_disk_image`]).
    Image(String),
}

impl ClaimData {
    /// The path, whichever kind.
    pub fn path(&self) -> &str {
        match self {
            ClaimData::Block(p) | ClaimData::Image(p) => p,
        }
    }
}

/// The files a volume's disk is made of, by source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeFiles {
    /// cloudInitNoCloud / cloudInitConfigDrive: the VMI's cloud-init ISO
    /// ([`Paths::cloud_init_iso`]; a VMI has one, whichever volume names it).
    CloudInit {
        /// The ISO.
        iso: String,
        /// A config drive (`configdrive.iso`), else NoCloud.
        config_drive: bool,
    },
    /// configMap, secret, downwardAPI, serviceAccount, sysprep: an ISO of
    /// the mounted directory ([`ConfigKind::iso`]).
    Config {
        /// Which source.
        kind: ConfigKind,
        /// The ISO.
        iso: String,
    },
    /// downwardMetrics: the vhostmd image ([`Paths::downward_metrics_disk`]).
    DownwardMetrics(String),
    /// containerDisk: the image virt-handler mounts, read only as the
    /// backing file of the launcher's overlay.
    ContainerDisk {
        /// [`Paths::container_disk_image`].
        image: String,
        /// [`Paths::overlay`].
        overlay: String,
    },
    /// ephemeral: the claim, read only as the backing file of the
    /// launcher's overlay.
    Ephemeral {
        /// The claim's data.
        claim: ClaimData,
        /// [`Paths::overlay`].
        overlay: String,
    },
    /// emptyDisk: [`Paths::empty_disk_image`].
    EmptyDisk(String),
    /// persistentVolumeClaim / dataVolume.
    Claim(ClaimData),
    /// hostDisk: [`Paths::host_disk_image`].
    HostDisk(String),
}

impl VolumeFiles {
    /// Where the volume `v`, the `index`-th of `vmi`'s `spec.volumes`, has
    /// its files; `block`: the claim behind it (persistentVolumeClaim,
    /// dataVolume, ephemeral) is a block device. `None` for a volume that
    /// is no disk of the guest (memoryDump) or a source this layout does
    /// not know. `hotplug`: the status marks the volume hot-plugged
    /// ([`crate::hotplug::VolumeStatuses::is_hotplug`], read once per VMI
    /// by the caller): a persistentVolumeClaim or dataVolume is then at
    /// [`crate::hotplug::image_path`] (or [`crate::hotplug::block_path`]
    /// when `block`).
    ///
    /// # Errors
    /// A [`FieldError`] about `spec.volumes[<index>].hostDisk.path` for a
    /// hostDisk path without a usable file name
    /// ([`Paths::host_disk_image`]).
    pub fn of(
        paths: &Paths,
        vmi: &VirtualMachineInstance,
        index: usize,
        v: &Volume,
        block: bool,
        hotplug: bool,
    ) -> Result<Option<VolumeFiles>, FieldError> {
        // A hot-plug claim is where virt-handler mounts it (crate::hotplug).
        let hotplug = hotplug && (v.persistent_volume_claim.is_some() || v.data_volume.is_some());
        let claim = || {
            if hotplug {
                if block {
                    ClaimData::Block(crate::hotplug::block_path(&v.name))
                } else {
                    ClaimData::Image(crate::hotplug::image_path(&v.name))
                }
            } else if block {
                ClaimData::Block(block_device(&v.name))
            } else {
                ClaimData::Image(paths.pvc_image(&v.name))
            }
        };
        let files = if v.cloud_init_no_cloud.is_some() || v.cloud_init_config_drive.is_some() {
            let config_drive = v.cloud_init_config_drive.is_some();
            VolumeFiles::CloudInit {
                iso: paths.cloud_init_iso(vmi, config_drive),
                config_drive,
            }
        } else if v.downward_metrics.is_some() {
            VolumeFiles::DownwardMetrics(paths.downward_metrics_disk())
        } else if let Some(kind) = ConfigKind::of(v) {
            VolumeFiles::Config {
                kind,
                iso: kind.iso(paths, &v.name),
            }
        } else if v.container_disk.is_some() {
            VolumeFiles::ContainerDisk {
                image: paths.container_disk_image(index),
                overlay: paths.overlay(&v.name),
            }
        } else if v.ephemeral.is_some() {
            VolumeFiles::Ephemeral {
                claim: claim(),
                overlay: paths.overlay(&v.name),
            }
        } else if v.empty_disk.is_some() {
            VolumeFiles::EmptyDisk(paths.empty_disk_image(&v.name))
        } else if v.persistent_volume_claim.is_some() || v.data_volume.is_some() {
            VolumeFiles::Claim(claim())
        } else if let Some(h) = &v.host_disk {
            let field = format!("spec.volumes[{index}].hostDisk.path");
            VolumeFiles::HostDisk(paths.host_disk_image(&v.name, &h.path, &field)?)
        } else {
            return Ok(None);
        };
        Ok(Some(files))
    }

    /// The files the guest's I/O reaches, the one it opens first and its
    /// backing file after it (what the O_DIRECT probe checks).
    pub fn guest_files(&self) -> Vec<&str> {
        match self {
            VolumeFiles::CloudInit { iso, .. } | VolumeFiles::Config { iso, .. } => vec![iso],
            VolumeFiles::DownwardMetrics(p)
            | VolumeFiles::EmptyDisk(p)
            | VolumeFiles::HostDisk(p) => {
                vec![p]
            }
            VolumeFiles::ContainerDisk { image, overlay } => vec![overlay, image],
            VolumeFiles::Ephemeral { claim, overlay } => vec![overlay, claim.path()],
            VolumeFiles::Claim(c) => vec![c.path()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(volumes: &str) -> VirtualMachineInstance {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: m, namespace: ns, uid: u1}}\nspec:\n  domain: {{memory: {{guest: 1Gi}}}}\n  volumes:\n{volumes}"
        );
        crate::load::from_slice(doc.as_bytes()).unwrap()
    }

    #[test]
    fn every_volume_kind_has_kubevirts_paths() {
        let v = vmi("  - {name: cd, containerDisk: {image: x}}\n  - {name: eph, ephemeral: {persistentVolumeClaim: {claimName: c}}}\n  - {name: empty, emptyDisk: {capacity: 1Gi}}\n  - {name: pvc, persistentVolumeClaim: {claimName: c}}\n  - {name: hd, hostDisk: {path: /data/x.img, type: Disk}}\n  - {name: ci, cloudInitConfigDrive: {userData: x}}\n  - {name: cm, configMap: {name: c}}\n  - {name: sa, serviceAccount: {serviceAccountName: s}}\n  - {name: dm, downwardMetrics: {}}\n  - {name: md, memoryDump: {claimName: c}}\n");
        let p = Paths::default();
        let files = |i: usize, block: bool| {
            VolumeFiles::of(&p, &v, i, &v.spec.volumes[i], block, false)
                .unwrap()
                .map(|f| f.guest_files().join(" "))
        };
        let want = [
            "/var/run/kubevirt-ephemeral-disks/disk-data/cd/disk.qcow2 /var/run/kubevirt/container-disks/disk_0.img",
            "/var/run/kubevirt-ephemeral-disks/disk-data/eph/disk.qcow2 /var/run/kubevirt-private/vmi-disks/eph/disk.img",
            "/var/run/libvirt/empty-disks/empty.qcow2",
            "/var/run/kubevirt-private/vmi-disks/pvc/disk.img",
            "/var/run/kubevirt-private/vmi-disks/hd/x.img",
            "/var/run/kubevirt-ephemeral-disks/cloud-init-data/ns/m/configdrive.iso",
            "/var/run/kubevirt-private/config-map-disks/cm.iso",
            "/var/run/kubevirt-private/service-account-disk/service-account.iso",
            "/var/run/kubevirt-private/downwardapi-disks/vhostmd0",
        ];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(files(i, false).as_deref(), Some(*w), "volume {i}");
        }
        assert_eq!(files(9, false), None, "a memory dump is no disk");
        assert_eq!(
            files(1, true).as_deref(),
            Some("/var/run/kubevirt-ephemeral-disks/disk-data/eph/disk.qcow2 /dev/eph")
        );
        assert_eq!(files(3, true).as_deref(), Some("/dev/pvc"));
    }

    #[test]
    fn sockets_and_firmware_files() {
        let v = vmi("    []\n");
        let mut p = Paths::default();
        p.private_dir.push('/');
        assert_eq!(
            p.serial_socket(&v),
            "/var/run/kubevirt-private/u1/virt-serial0"
        );
        assert_eq!(
            p.serial_log(&v),
            "/var/run/kubevirt-private/u1/virt-serial0-log"
        );
        assert_eq!(p.vnc_socket(&v), "/var/run/kubevirt-private/u1/virt-vnc");
        assert_eq!(
            p.usbredir_socket(&v, 3),
            "/var/run/kubevirt-private/u1/virt-usbredir-3"
        );
        assert_eq!(p.nvram(&v), "/var/lib/libvirt/qemu/nvram/m_VARS.fd");
        // A non-root VMI (virt-api's markAsNonroot, or the deprecated
        // annotation) keeps them where the session daemon does.
        let mut nr = v.clone();
        assert!(!nr.is_non_root());
        nr.mark_as_non_root();
        assert!(nr.is_non_root());
        assert_eq!(
            p.nvram(&nr),
            "/var/run/kubevirt-private/libvirt/qemu/nvram/m_VARS.fd"
        );
        let mut annotated = v.clone();
        annotated
            .metadata
            .annotations
            .insert("kubevirt.io/nonroot".into(), "true".into());
        assert!(annotated.is_non_root());
        assert_eq!(p.ovmf_file("OVMF_CODE.fd"), "/usr/share/OVMF/OVMF_CODE.fd");
        assert_eq!(
            virtiofs_socket("share"),
            "/var/run/kubevirt/virtiofs-containers/share.sock"
        );
    }

    #[test]
    fn host_disk_paths_need_a_file_name() {
        let p = Paths::default();
        for bad in ["", "relative.img", "/", "/data/..", "/data/."] {
            let e = p.host_disk_image("hd", bad, "f").unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("f: {bad:?} is not an absolute path to a file")
            );
        }
        let e = p.host_disk_image("hd", "/data/a\u{1}", "f").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f: contains the character U+0001, which XML cannot carry"
        );
    }
}
