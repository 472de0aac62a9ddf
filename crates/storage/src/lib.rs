//! Volume preparation before a domain is defined (KubeVirt
//! `pkg/virt-launcher/virtwrap` pre-start hooks, `pkg/container-disk`,
//! `pkg/emptydisk`, `pkg/host-disk`, `SetDriverCacheMode`).
//!
//! [`prepare`] makes every file a converted domain points at exist, and
//! returns the facts the converter needs ([`converter::Prepared`]):
//!
//! | source | action |
//! |---|---|
//! | containerDisk | (with `--image-volume`: `disk_<i>.img` first linked into the image volume, [`image_volume::link`]) verify `disk_<i>.img` with `qemu-img info` under CPU and memory limits (raw, or qcow2 without a backing file), then create the qcow2 overlay `disk-data/<vol>/disk.qcow2` the guest writes to; the image itself is never written |
//! | emptyDisk | create a sparse qcow2 of the capacity rounded down to 1 MiB, or reuse it |
//! | hostDisk | `Disk`: must exist; `DiskOrCreate`: create a sparse raw file of the capacity, with the claims' room and toleration check ([`pvc::create_image`]) |
//! | persistentVolumeClaim / dataVolume | `/dev/<vol>` block device, else `vmi-disks/<vol>/disk.img`, created sparse in the claim's directory when absent and the VMI's status gives the claim's size ([`pvc`]: KubeVirt's toleration, reserve and 1 MiB rules); with ExpandDisks grown to the claim's usable size before the domain starts |
//! | ephemeral | the claim as for a PVC (never written), plus the qcow2 overlay `disk-data/<vol>/disk.qcow2` (backing format raw) the guest writes to |
//! | cloudInitNoCloud / cloudInitConfigDrive | the `cidata` / `config-2` ISO of the first such volume ([`cloudinit`]) |
//! | configMap / secret / downwardAPI / serviceAccount | an ISO of the mounted directory ([`configdisk`]) |
//!
//! Every path is built from validated volume names under the configured
//! directories; a path component that is a symbolic link is refused, so a
//! planted link cannot redirect a write outside them. Images are written
//! in a fresh private directory beside their path and renamed into place
//! (`staging`: no tool opens a name anyone else could put a link at), so
//! a failure leaves nothing half-written.

mod cache;
pub mod cbt;
pub mod cloudinit;
pub mod configdisk;
pub mod empty_media;
mod expand;
pub mod fat;
mod files;
pub mod image_volume;
pub mod iso;
pub mod pvc;
pub mod qemu_img;
pub mod secrets;
mod staging;
pub mod vhostmd;
mod volumes;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use api::layout::{ClaimData, ConfigKind, VolumeFiles};
use api::VirtualMachineInstance;
use converter::{ConvertContext, Prepared};

pub use expand::{expansion_targets, ExpansionTarget};
pub(crate) use files::ensure_parent_under;
pub use files::{preallocated, supports_direct_io};

/// KubeVirt's default `--disk-memory-limit` for `qemu-img info`: 2000 MiB.
pub const DEFAULT_DISK_MEMORY_LIMIT: u64 = 2_097_152_000;
/// CPU seconds allowed to `qemu-img info` (KubeVirt: `ulimit -t 10`).
pub const QEMU_IMG_CPU_SECONDS: u64 = 10;

/// A volume that cannot be prepared. The message names the volume field.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Input or on-disk state that makes the volume unusable.
    #[error("{path}: {message}")]
    Volume {
        /// Field of the volume (`spec.volumes[0].containerDisk`).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A file system operation failed.
    #[error("{path}: {op} {file}: {source}")]
    Io {
        /// Field of the volume.
        path: String,
        /// What was being done.
        op: &'static str,
        /// The file.
        file: String,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// A hook sidecar's PreCloudInitIso failed (KubeVirt's message
    /// `PreCloudInitIso hook failed: ...`, with the sidecar named).
    #[error("{path}: PreCloudInitIso hook failed: {message}")]
    Hook {
        /// Field of the cloud-init volume.
        path: String,
        /// The hook's error.
        message: String,
    },
    /// `qemu-img` failed.
    #[error("{path}: {source}")]
    QemuImg {
        /// Field of the volume.
        path: String,
        /// Cause.
        #[source]
        source: qemu_img::QemuImgError,
    },
}

/// A volume label (`volumeLabel`) the file system cannot hold
/// ([`fat::check_label`], [`iso::check_label`]). The text names the label;
/// the caller prefixes the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// Empty or longer than the file system allows.
    #[error("{label:?} must have 1 to {max} characters ({what})")]
    Length {
        /// The label as written.
        label: String,
        /// The longest label in characters.
        max: usize,
        /// `a FAT volume label` or `an ISO 9660 volume identifier`.
        what: &'static str,
    },
    /// A character FAT forbids in labels.
    #[error("{label:?} contains {character:?}, which a FAT volume label cannot hold")]
    FatCharacter {
        /// The label as written.
        label: String,
        /// The first forbidden character.
        character: char,
    },
    /// A character outside printable ASCII in an ISO 9660 label.
    #[error("{label:?} contains {character:?}; a volume label is printable ASCII")]
    IsoCharacter {
        /// The label as written.
        label: String,
        /// The first forbidden character.
        character: char,
    },
}

fn volume_err(path: &str, message: impl Into<String>) -> StorageError {
    StorageError::Volume {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn io_err(path: &str, op: &'static str, file: &Path) -> impl FnOnce(io::Error) -> StorageError {
    let (path, file) = (path.to_owned(), file.display().to_string());
    move |source| StorageError::Io {
        path,
        op,
        file,
        source,
    }
}

/// Where the files of config volumes (configMap, secret, downwardAPI,
/// serviceAccount) and the secrets referenced by cloud-init volumes are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ConfigSources {
    /// KubeVirt's pod: mounted at `<private>/config-map/<vol>/`,
    /// `<private>/secret/<vol>/`, `<private>/downwardapi/<vol>/` and
    /// `/var/run/secrets/kubernetes.io/serviceaccount/` (facts 5.1).
    #[default]
    Pod,
    /// Standalone: directories on the host. A volume or secret without an
    /// entry is refused by name.
    Standalone {
        /// `--config-volume VOL=DIR`: volume name → directory.
        volumes: BTreeMap<String, PathBuf>,
        /// `--access-credential SECRET=DIR`: secret name → directory of an
        /// access credential's secret (its files are public keys).
        secrets: BTreeMap<String, PathBuf>,
    },
}

/// The file system of config-volume disks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConfigDiskFs {
    /// ISO 9660 with Joliet and Rock Ridge, as KubeVirt writes them.
    #[default]
    Iso9660,
    /// FAT ([`fat`]), the launcher's `--config-disk-fs vfat`.
    Vfat,
}

/// A Kubernetes event about the VMI that preparing its volumes raised
/// (KubeVirt's launcher records these through virt-handler's notify
/// socket, `HandleK8sEvent`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmiEvent {
    /// core/v1 Event `type`: `Normal` or `Warning`.
    pub kind: &'static str,
    /// `reason`, e.g. `ToleratedSmallPV`.
    pub reason: &'static str,
    /// `message`.
    pub message: String,
}

/// Where [`prepare`] sends [`VmiEvent`]s (the launcher forwards them to
/// virt-handler; standalone they are only logged).
#[derive(Clone)]
pub struct EventSink(pub std::sync::Arc<dyn Fn(VmiEvent) + Send + Sync>);

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventSink")
    }
}

/// KubeVirt's PreCloudInitIso step: given the VMI and its cloud-init data
/// as read, returns the data to write (a hook sidecar's answer), or the
/// error ([`CloudInitHookError`]). Called once per ISO built, right after
/// the data is read.
#[derive(Clone)]
pub struct CloudInitHook(pub std::sync::Arc<CloudInitHookFn>);

/// Why a [`CloudInitHook`] failed: the hook's own error (the launcher's
/// `hooks::HookError`, naming the sidecar), shown in
/// [`StorageError::Hook`].
pub type CloudInitHookError = Box<dyn std::error::Error + Send + Sync>;

/// The function of a [`CloudInitHook`].
pub type CloudInitHookFn = dyn Fn(
        &VirtualMachineInstance,
        cloudinit::CloudInitData,
    ) -> Result<cloudinit::CloudInitData, CloudInitHookError>
    + Send
    + Sync;

impl std::fmt::Debug for CloudInitHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CloudInitHook")
    }
}

/// Options of [`prepare`].
#[derive(Clone, Debug)]
pub struct PrepareOptions {
    /// Address-space limit for `qemu-img info` (`--disk-memory-limit`).
    pub disk_memory_limit: u64,
    /// Owner (uid, gid) given to created files, when QEMU runs unprivileged.
    pub owner: Option<(u32, u32)>,
    /// Where block-mode PVCs appear as device nodes named after their
    /// volume (`/dev` in KubeVirt's pod). `None` (standalone) means no
    /// block PVCs: the host's `/dev` must never be taken for them, or a
    /// volume named `sda` would hand the host's disk to the guest.
    pub block_device_dir: Option<PathBuf>,
    /// `None` (a pod): any device node in [`Self::block_device_dir`] named
    /// after a claim's volume is that claim. `Some` (standalone, the
    /// launcher's private `/dev`): only these volumes are block claims, and
    /// their nodes must be block devices.
    pub block_volumes: Option<BTreeSet<String>>,
    /// Room checks when creating claim and hostDisk images.
    pub space: pvc::SpacePolicy,
    /// Where config volume files and cloud-init secrets come from.
    pub config_sources: ConfigSources,
    /// Rebuild cloud-init and config ISOs (true, when the domain is about
    /// to start); false keeps an existing image (the domain already runs
    /// and QEMU has it open) and builds only missing ones. Offline
    /// ExpandDisks growth also runs only when true (the domain is down).
    pub rebuild_media: bool,
    /// A migration target (KubeVirt's `generateEmptyIsos`): cloud-init and
    /// config-volume disks are made empty, of the size the volume's status
    /// records ([`empty_media`]), not built from their content.
    pub empty_media: bool,
    /// File system of configMap/secret/downwardAPI/serviceAccount disks.
    pub config_disk_fs: ConfigDiskFs,
    /// Receives the events preparing raises (`ToleratedSmallPV`).
    pub events: Option<EventSink>,
    /// The hook sidecars' PreCloudInitIso, when one subscribed.
    pub cloud_init_hook: Option<CloudInitHook>,
}

impl Default for PrepareOptions {
    fn default() -> Self {
        PrepareOptions {
            disk_memory_limit: DEFAULT_DISK_MEMORY_LIMIT,
            owner: None,
            block_device_dir: None,
            block_volumes: None,
            space: pvc::SpacePolicy::default(),
            config_sources: ConfigSources::Pod,
            rebuild_media: true,
            empty_media: false,
            config_disk_fs: ConfigDiskFs::Iso9660,
            events: None,
            cloud_init_hook: None,
        }
    }
}

/// Reads every input [`prepare`] will read from outside the launcher's
/// directories — cloud-init data and its secrets, access-credential keys,
/// config volume directories — and applies the same checks, writing
/// nothing. The launcher calls it before it starts libvirt, so bad input is
/// refused (exit 2) before anything runs.
///
/// # Errors
/// The [`StorageError`] naming the field that [`prepare`] would return.
pub fn check_inputs(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    opts: &PrepareOptions,
) -> Result<(), StorageError> {
    cloudinit::read(vmi, ctx, &opts.config_sources)?;
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        if let Some(kind) = ConfigKind::of(v) {
            let field = format!("spec.volumes[{i}].{}", kind.field());
            let src = configdisk::source_dir(ctx, &opts.config_sources, kind, v, &field)?;
            configdisk::check(vmi, i, &src, opts.config_disk_fs)?;
        }
    }
    Ok(())
}

/// Prepares every volume of `vmi` (see the module docs).
///
/// # Errors
/// [`StorageError`] naming the volume: missing image, bad format or backing
/// chain, no space, a symlink in a path, an explicit `cache: none` on a
/// file system without O_DIRECT.
pub fn prepare(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    opts: &PrepareOptions,
) -> Result<Prepared, StorageError> {
    // Volume facts are probed afresh; facts from elsewhere (network
    // phase 2's interfaces) are kept.
    let mut prepared = Prepared {
        interfaces: ctx.prepared.interfaces.clone(),
        ..Prepared::default()
    };
    let keep = |iso: &str| !opts.rebuild_media && Path::new(iso).is_file();
    if let Some((i, v, kind, _)) = cloudinit::find(vmi) {
        let iso = ctx
            .paths
            .cloud_init_iso(vmi, kind == cloudinit::DataSource::ConfigDrive);
        if !keep(&iso) {
            let field = format!("spec.volumes[{i}].{}", kind.field());
            let made_empty = empty_media::made_empty(
                opts.empty_media,
                vmi,
                &v.name,
                &field,
                &ctx.paths.ephemeral_disk_dir,
                Path::new(&iso),
                opts.owner,
            )?;
            if !made_empty {
                if let Some(data) = cloudinit::read_hooked(vmi, ctx, opts)? {
                    cloudinit::generate(vmi, ctx, &data, opts.owner)?;
                }
            }
        }
    }
    let statuses = api::hotplug::VolumeStatuses::of(vmi);
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        // Validation left each volume exactly one source.
        let Some(source) = v.source_kinds().first().copied() else {
            continue;
        };
        // A hot-plug claim is virt-handler's mount: used as it is, never
        // created or changed here (the domain manager attaches it once it
        // can be opened).
        if (v.persistent_volume_claim.is_some() || v.data_volume.is_some())
            && statuses.is_hotplug(&v.name)
        {
            if volumes::is_hotplug_block_device(&v.name) {
                prepared.block_volumes.insert(v.name.clone());
            }
            continue;
        }
        let field = format!("spec.volumes[{i}].{source}");
        let claim =
            v.ephemeral.is_some() || v.persistent_volume_claim.is_some() || v.data_volume.is_some();
        let block = if claim {
            volumes::block_device(opts, &field, &v.name)?
        } else {
            None
        };
        let Some(files) = VolumeFiles::of(&ctx.paths, vmi, i, v, block.is_some(), false)
            .map_err(|e| volume_err(&field, e.to_string()))?
        else {
            continue;
        };
        if block.is_some() {
            prepared.block_volumes.insert(v.name.clone());
        }
        let step = volumes::Step {
            field: &field,
            ctx,
            opts,
        };
        let tracked = match &files {
            VolumeFiles::Claim(ClaimData::Block(dev)) => Some((dev.clone(), true)),
            VolumeFiles::Claim(ClaimData::Image(image)) | VolumeFiles::HostDisk(image) => {
                Some((image.clone(), false))
            }
            _ => None,
        }
        .filter(|_| api::cbt::is_eligible(v) && api::cbt::has_overlays(vmi));
        match files {
            // The VMI's one cloud-init ISO is built above; a block claim
            // is used as it is.
            VolumeFiles::CloudInit { .. } | VolumeFiles::Claim(ClaimData::Block(_)) => {}
            VolumeFiles::Config { kind, iso } => {
                if !keep(&iso)
                    && !empty_media::made_empty(
                        opts.empty_media,
                        vmi,
                        &v.name,
                        &field,
                        &ctx.paths.private_dir,
                        Path::new(&iso),
                        opts.owner,
                    )?
                {
                    let src = configdisk::source_dir(ctx, &opts.config_sources, kind, v, &field)?;
                    configdisk::generate(vmi, ctx, i, &src, opts.owner, opts.config_disk_fs)?;
                }
            }
            VolumeFiles::ContainerDisk { image, overlay } => {
                let format = step.container_disk(Path::new(&image), Path::new(&overlay))?;
                prepared
                    .container_disk_formats
                    .insert(v.name.clone(), format);
            }
            VolumeFiles::DownwardMetrics(image) => {
                let image = PathBuf::from(image);
                files::ensure_parent_under(&field, &ctx.paths.private_dir, &image)?;
                vhostmd::create(&field, &image)?;
            }
            VolumeFiles::EmptyDisk(image) => {
                if let Some(e) = &v.empty_disk {
                    step.empty_disk(v, e, Path::new(&image))?;
                }
            }
            VolumeFiles::HostDisk(image) => {
                if let Some(h) = &v.host_disk {
                    step.host_disk(v, h, Path::new(&image))?;
                }
            }
            VolumeFiles::Ephemeral { claim, overlay } => {
                step.ephemeral(block, &claim, Path::new(&overlay))?;
            }
            VolumeFiles::Claim(ClaimData::Image(image)) => {
                step.claim_image(vmi, v, Path::new(&image))?;
            }
        }
        if let Some((data, block)) = tracked {
            let overlay = track(vmi, v, &field, Path::new(&data), block, opts)?;
            prepared.cbt_overlays.insert(v.name.clone(), overlay);
        }
    }
    if ctx.expand_disks_enabled && opts.rebuild_media {
        expand::expand_claim_images(vmi, ctx, &prepared)?;
    }
    cache::choose_cache_modes(vmi, ctx, &mut prepared)?;
    Ok(prepared)
}

/// Changed block tracking for volume `v` (KubeVirt main's
/// `ApplyChangedBlockTracking`): `Initializing` makes the overlay over
/// `data` unless it exists; `Enabled` uses the one made then (on the
/// backend storage, so it outlives the pod). Returns the overlay's path.
fn track(
    vmi: &VirtualMachineInstance,
    v: &api::vmi::Volume,
    field: &str,
    data: &Path,
    block: bool,
    opts: &PrepareOptions,
) -> Result<String, StorageError> {
    let overlay = api::cbt::overlay_path(vmi, &v.name);
    let p = Path::new(&overlay);
    if api::cbt::state(vmi) == api::cbt::State::Enabled {
        if !files::exists_regular(field, p)? {
            return Err(volume_err(
                field,
                format!("status.changedBlockTracking.state is Enabled, but the volume's changed block tracking overlay {overlay} does not exist"),
            ));
        }
        return Ok(overlay);
    }
    let size = data_size(field, data)?;
    cbt::ensure_overlay(field, vmi, p, data, block, size, opts.owner)?;
    Ok(overlay)
}

/// Size in bytes of an image file or block device (opened without
/// following a link, seeked to its end).
fn data_size(field: &str, data: &Path) -> Result<u64, StorageError> {
    use std::io::Seek;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(data)
        .map_err(io_err(field, "open", data))?;
    f.seek(std::io::SeekFrom::End(0))
        .map_err(io_err(field, "seek", data))
}

#[cfg(test)]
mod tests;
