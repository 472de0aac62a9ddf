//! Volume preparation before a domain is defined (KubeVirt
//! `pkg/virt-launcher/virtwrap` pre-start hooks, `pkg/container-disk`,
//! `pkg/emptydisk`, `pkg/host-disk`, `SetDriverCacheMode`).
//!
//! [`prepare`] makes every file a converted domain points at exist, and
//! returns the facts the converter needs ([`converter::Prepared`]):
//!
//! | source | action |
//! |---|---|
//! | containerDisk | verify `disk_<i>.img` with `qemu-img info` under CPU and memory limits (raw, or qcow2 without a backing file), then create the qcow2 overlay `disk-data/<vol>/disk.qcow2` the guest writes to; the image itself is never written |
//! | emptyDisk | create a sparse qcow2 of the capacity rounded down to 1 MiB, or reuse it |
//! | hostDisk | `Disk`: must exist; `DiskOrCreate`: create a sparse raw file of the capacity, with the claims' room and toleration check ([`pvc::create_image`]) |
//! | persistentVolumeClaim / dataVolume | `/dev/<vol>` block device, else `vmi-disks/<vol>/disk.img`, created sparse in the claim's directory when absent and the VMI's status gives the claim's size ([`pvc`]: KubeVirt's toleration, reserve and 1 MiB rules); with ExpandDisks grown to the claim's usable size before the domain starts |
//! | ephemeral | the claim as for a PVC (never written), plus the qcow2 overlay `disk-data/<vol>/disk.qcow2` (backing format raw) the guest writes to |
//! | cloudInitNoCloud / cloudInitConfigDrive | the `cidata` / `config-2` ISO of the first such volume ([`cloudinit`]) |
//! | configMap / secret / downwardAPI / serviceAccount | an ISO of the mounted directory ([`configdisk`]) |
//!
//! Every path is built from validated volume names under the configured
//! directories; a path component that is a symbolic link is refused, so a
//! planted link cannot redirect a write outside them. Images are written to
//! a temporary name and renamed, so a failure leaves nothing half-written.

pub mod cloudinit;
pub mod configdisk;
pub mod fat;
pub mod iso;
pub mod pvc;
pub mod qemu_img;
pub mod vhostmd;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use api::vmi::CacheMode;
use api::VirtualMachineInstance;
use converter::disks::{
    cloud_init_iso, container_disk_image, container_disk_overlay, empty_disk_image,
    host_disk_image, pvc_image, ConfigKind,
};
use converter::{ConvertContext, ImageFormat, Prepared};

use crate::qemu_img::ImageInfo;

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
    /// File system of configMap/secret/downwardAPI/serviceAccount disks.
    pub config_disk_fs: ConfigDiskFs,
    /// Receives the events preparing raises (`ToleratedSmallPV`).
    pub events: Option<EventSink>,
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
            config_disk_fs: ConfigDiskFs::Iso9660,
            events: None,
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
    if let Some((_, _, kind, _)) = cloudinit::find(vmi) {
        let iso = cloud_init_iso(ctx, vmi, kind == cloudinit::DataSource::ConfigDrive);
        if !keep(&iso) {
            if let Some(data) = cloudinit::read(vmi, ctx, &opts.config_sources)? {
                cloudinit::generate(vmi, ctx, &data, opts.owner)?;
            }
        }
    }
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let path = format!("spec.volumes[{i}]");
        if let Some(kind) = ConfigKind::of(v) {
            if !keep(&kind.iso(ctx, &v.name)) {
                let field = format!("{path}.{}", kind.field());
                let src = configdisk::source_dir(ctx, &opts.config_sources, kind, v, &field)?;
                configdisk::generate(vmi, ctx, i, &src, opts.owner, opts.config_disk_fs)?;
            }
        } else if v.container_disk.is_some() {
            let field = format!("{path}.containerDisk");
            let image = PathBuf::from(container_disk_image(ctx, i));
            let info = verify_container_disk(&field, &image, opts)?;
            let format = match info.format.as_str() {
                "qcow2" => ImageFormat::Qcow2,
                _ => ImageFormat::Raw,
            };
            let overlay = PathBuf::from(container_disk_overlay(ctx, &v.name));
            if !exists_regular(&field, &overlay)? {
                ensure_parent_under(&field, &ctx.paths.ephemeral_disk_dir, &overlay)?;
                qemu_img::create_overlay(&image, format, &overlay).map_err(|source| {
                    StorageError::QemuImg {
                        path: field.clone(),
                        source,
                    }
                })?;
                finish_file(&field, &overlay, 0o640, opts.owner)?;
            }
            prepared
                .container_disk_formats
                .insert(v.name.clone(), format);
        } else if v.downward_metrics.is_some() {
            let field = format!("{path}.downwardMetrics");
            let image = PathBuf::from(converter::disks::downward_metrics_disk(ctx));
            ensure_parent_under(&field, &ctx.paths.private_dir, &image)?;
            vhostmd::create(&field, &image)?;
        } else if let Some(e) = &v.empty_disk {
            let field = format!("{path}.emptyDisk");
            let bytes = e
                .capacity
                .to_bytes()
                .map_err(|err| volume_err(&format!("{field}.capacity"), err.to_string()))?;
            let bytes = bytes - bytes % (1 << 20);
            if bytes == 0 {
                return Err(volume_err(
                    &format!("{field}.capacity"),
                    format!("the size for volume {} is too low", v.name),
                ));
            }
            let image = PathBuf::from(empty_disk_image(ctx, &v.name));
            if !exists_regular(&field, &image)? {
                ensure_parent_under(&field, &ctx.paths.empty_disk_dir, &image)?;
                qemu_img::create_empty(&image, bytes).map_err(|source| StorageError::QemuImg {
                    path: field.clone(),
                    source,
                })?;
                finish_file(&field, &image, 0o640, opts.owner)?;
            }
        } else if let Some(h) = &v.host_disk {
            let field = format!("{path}.hostDisk");
            let image = PathBuf::from(
                host_disk_image(ctx, &v.name, &h.path, &format!("{field}.path"))
                    .map_err(|e| volume_err(&field, e.to_string()))?,
            );
            if !exists_regular(&field, &image)? {
                match h.disk_type.as_str() {
                    "DiskOrCreate" => {
                        let cap = h.capacity.as_ref().ok_or_else(|| {
                            volume_err(&format!("{field}.capacity"), "required for DiskOrCreate")
                        })?;
                        let bytes = cap
                            .to_bytes()
                            .map_err(|e| volume_err(&format!("{field}.capacity"), e.to_string()))?;
                        ensure_parent_under(&field, &ctx.paths.private_dir, &image)?;
                        create_claim_image(&field, &v.name, &image, bytes, opts)?;
                        finish_file(&field, &image, 0o660, opts.owner)?;
                    }
                    "Disk" | "" => {
                        return Err(volume_err(
                            &field,
                            format!("disk image {} does not exist", image.display()),
                        ))
                    }
                    other => {
                        return Err(volume_err(
                            &format!("{field}.type"),
                            format!("{other:?} is not Disk or DiskOrCreate"),
                        ))
                    }
                }
            }
        } else if v.ephemeral.is_some() {
            // The claim is only ever read: the guest writes to a qcow2
            // overlay whose backing file is read as raw (`-F raw`), so no
            // header in the PVC can make QEMU open another file.
            let field = format!("{path}.ephemeral");
            let backing = match block_device(opts, &field, &v.name)? {
                Some(d) => {
                    prepared.block_volumes.insert(v.name.clone());
                    d
                }
                None => {
                    let image = PathBuf::from(pvc_image(ctx, &v.name));
                    if !exists_regular(&field, &image)? {
                        return Err(volume_err(
                            &field,
                            format!("the claim's disk image {} does not exist", image.display()),
                        ));
                    }
                    image
                }
            };
            let overlay = PathBuf::from(container_disk_overlay(ctx, &v.name));
            if !exists_regular(&field, &overlay)? {
                ensure_parent_under(&field, &ctx.paths.ephemeral_disk_dir, &overlay)?;
                qemu_img::create_overlay(&backing, ImageFormat::Raw, &overlay).map_err(
                    |source| StorageError::QemuImg {
                        path: field.clone(),
                        source,
                    },
                )?;
                finish_file(&field, &overlay, 0o640, opts.owner)?;
            }
        } else if v.persistent_volume_claim.is_some() || v.data_volume.is_some() {
            let field = if v.data_volume.is_some() {
                format!("{path}.dataVolume")
            } else {
                format!("{path}.persistentVolumeClaim")
            };
            if block_device(opts, &field, &v.name)?.is_some() {
                prepared.block_volumes.insert(v.name.clone());
            } else {
                let image = PathBuf::from(pvc_image(ctx, &v.name));
                if !exists_regular(&field, &image)? {
                    match pvc::info(vmi, &v.name)?.filter(|p| !p.is_block()) {
                        Some(info) => {
                            // KubeVirt (virt-handler's host-disk step):
                            // create the image in the mounted claim.
                            claim_dir_under(&field, &ctx.paths.private_dir, &image)?;
                            let size = pvc::image_size(&info, &v.name)
                                .map_err(|m| volume_err(&field, m))?;
                            create_claim_image(&field, &v.name, &image, size, opts)?;
                            finish_file(&field, &image, 0o660, opts.owner)?;
                        }
                        None => {
                            let block = match &opts.block_device_dir {
                                Some(d) => format!(
                                    "neither block device {} nor ",
                                    d.join(&v.name).display()
                                ),
                                None => "no ".to_owned(),
                            };
                            return Err(volume_err(
                                &field,
                                format!("{block}disk image {} exists, and status.volumeStatus gives no claim size to create it", image.display()),
                            ));
                        }
                    }
                }
            }
        }
    }
    if ctx.expand_disks_enabled && opts.rebuild_media {
        expand_claim_images(vmi, ctx, &prepared)?;
    }
    choose_cache_modes(vmi, ctx, &mut prepared)?;
    Ok(prepared)
}

/// Checks a container disk image: present, a regular file, `qemu-img info`
/// (CPU- and memory-limited) says raw, or qcow2 without a backing file. A
/// backing file could make QEMU read any host file, so it is refused.
fn verify_container_disk(
    field: &str,
    image: &Path,
    opts: &PrepareOptions,
) -> Result<ImageInfo, StorageError> {
    match fs::metadata(image) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(volume_err(
                field,
                format!("{} is not a regular file", image.display()),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(volume_err(
                field,
                format!("container disk image {} not found", image.display()),
            ))
        }
        Err(e) => return Err(io_err(field, "stat", image)(e)),
    }
    let info =
        qemu_img::info(image, opts.disk_memory_limit).map_err(|source| StorageError::QemuImg {
            path: field.to_owned(),
            source,
        })?;
    if let Some(df) = info.data_file() {
        return Err(volume_err(
            field,
            format!("image {} has an external data file ({df:?}); container disks must be self-contained", image.display()),
        ));
    }
    if info.virtual_size == 0 {
        return Err(volume_err(
            field,
            format!("image {} is empty (virtual size 0)", image.display()),
        ));
    }
    match (info.format.as_str(), info.backing_filename.as_deref()) {
        ("raw", _) | ("qcow2", None) => Ok(info),
        ("qcow2", Some(b)) => Err(volume_err(
            field,
            format!(
                "image {} has a backing file ({b:?}); container disks must be self-contained",
                image.display()
            ),
        )),
        (f, _) => Err(volume_err(
            field,
            format!(
                "image {} has format {f:?}; only raw and qcow2 are accepted",
                image.display()
            ),
        )),
    }
}

/// True when `p` is a regular file, false when absent; an error when it is
/// a symlink or anything else.
fn exists_regular(field: &str, p: &Path) -> Result<bool, StorageError> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_file() => Ok(true),
        Ok(m) if m.file_type().is_symlink() => Err(volume_err(
            field,
            format!("{} is a symbolic link; refusing to use it", p.display()),
        )),
        Ok(_) => Err(volume_err(
            field,
            format!("{} exists and is not a regular file", p.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(field, "stat", p)(e)),
    }
}

/// Creates the directories between `root` (a trusted, configured
/// directory, created if missing) and `file`, refusing any existing
/// component below `root` that is not a real directory: a planted symbolic
/// link there could otherwise redirect the write outside `root`.
fn ensure_parent_under(field: &str, root: &str, file: &Path) -> Result<(), StorageError> {
    let root = Path::new(root);
    let dir = file
        .parent()
        .ok_or_else(|| volume_err(field, format!("{} has no directory", file.display())))?;
    fs::create_dir_all(root).map_err(io_err(field, "mkdir", root))?;
    walk_dirs_under(field, root, dir, |cur| {
        fs::create_dir(cur).map_err(io_err(field, "mkdir", cur))?;
        fs::set_permissions(cur, fs::Permissions::from_mode(0o750))
            .map_err(io_err(field, "chmod", cur))
    })
}

/// Walks the components of `dir` below `root`, requiring each existing one
/// to be a real directory (never a symbolic link, which could redirect a
/// write outside `root`); `missing` is called for a component that does not
/// exist (create it, or refuse).
fn walk_dirs_under(
    field: &str,
    root: &Path,
    dir: &Path,
    missing: impl Fn(&Path) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let rel = dir.strip_prefix(root).map_err(|_| {
        volume_err(
            field,
            format!("{} is outside {}", dir.display(), root.display()),
        )
    })?;
    let mut cur = root.to_path_buf();
    for comp in rel.components() {
        let std::path::Component::Normal(c) = comp else {
            return Err(volume_err(
                field,
                format!(
                    "{} is not a plain path below {}",
                    dir.display(),
                    root.display()
                ),
            ));
        };
        cur.push(c);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(volume_err(
                    field,
                    format!(
                        "{} is a symbolic link; refusing to write through it",
                        cur.display()
                    ),
                ))
            }
            Ok(_) => {
                return Err(volume_err(
                    field,
                    format!("{} is not a directory", cur.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing(&cur)?,
            Err(e) => return Err(io_err(field, "stat", &cur)(e)),
        }
    }
    Ok(())
}

/// Removes `dir` (a directory below `root`, or absent) and everything in
/// it, without following links: `dir` itself must not be a link.
fn remove_tree_under(field: &str, root: &Path, dir: &Path) -> Result<(), StorageError> {
    if !dir.starts_with(root) || dir == root {
        return Err(volume_err(
            field,
            format!("{} is not below {}", dir.display(), root.display()),
        ));
    }
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(dir).map_err(io_err(field, "remove", dir)),
        Ok(_) => fs::remove_file(dir).map_err(io_err(field, "remove", dir)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(field, "stat", dir)(e)),
    }
}

/// The block device of claim `name`, if it is one (see
/// [`PrepareOptions::block_volumes`]).
fn block_device(
    opts: &PrepareOptions,
    field: &str,
    name: &str,
) -> Result<Option<PathBuf>, StorageError> {
    let Some(dir) = &opts.block_device_dir else {
        return Ok(None);
    };
    let d = dir.join(name);
    let is_block = fs::metadata(&d).is_ok_and(|m| m.file_type().is_block_device());
    match &opts.block_volumes {
        None => Ok(is_block.then_some(d)),
        Some(set) if set.contains(name) => {
            if is_block {
                Ok(Some(d))
            } else {
                Err(volume_err(
                    field,
                    format!("{} is not a block device", d.display()),
                ))
            }
        }
        Some(_) => Ok(None),
    }
}

/// Checks that the directory of `image`, a mounted claim below `root`, is
/// a real directory reached without symbolic links. Unlike
/// [`ensure_parent_under`] it creates nothing: a missing directory means
/// the claim is not mounted.
fn claim_dir_under(field: &str, root: &str, image: &Path) -> Result<(), StorageError> {
    let dir = image
        .parent()
        .ok_or_else(|| volume_err(field, format!("{} has no directory", image.display())))?;
    walk_dirs_under(field, Path::new(root), dir, |_| {
        Err(volume_err(
            field,
            format!(
                "the claim's directory {} does not exist (is the claim mounted?)",
                dir.display()
            ),
        ))
    })
}

/// Creates a claim's (or DiskOrCreate hostDisk's) sparse raw image of
/// `bytes`, with the room and toleration rules of [`pvc::create_image`].
fn create_claim_image(
    field: &str,
    volume: &str,
    image: &Path,
    bytes: u64,
    opts: &PrepareOptions,
) -> Result<(), StorageError> {
    if bytes == 0 {
        return Err(volume_err(
            field,
            format!("the size for volume {volume} is too low, must be at least 1 byte"),
        ));
    }
    let reserve = opts.space.minimum_reserve_bytes;
    let size = pvc::create_image(field, volume, image, bytes, opts.space, &|d| {
        pvc::room(d, reserve)
    })?;
    if let (Some(sink), Some(event)) = (
        &opts.events,
        pvc::tolerated_small_pv(bytes, size, opts.space.less_pvc_space_toleration),
    ) {
        (sink.0)(event);
    }
    Ok(())
}

/// A claim image ExpandDisks may grow: volume, image path (as the launcher
/// sees it), usable size in bytes ([`pvc::usable_size`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpansionTarget {
    /// The volume.
    pub volume: String,
    /// The raw image (`vmi-disks/<vol>/disk.img`, or a hostDisk's file).
    pub image: PathBuf,
    /// What the claim's status allows, in bytes.
    pub usable: u64,
}

/// The images ExpandDisks considers: filesystem-mode claims (and hostDisks)
/// whose status gives a usable size; block claims (in `block_volumes`, or
/// `volumeMode: Block` in the status) and read-only claims are left out.
///
/// # Errors
/// [`StorageError::Volume`] for a status field that does not parse.
pub fn expansion_targets(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    block_volumes: &BTreeSet<String>,
) -> Result<Vec<ExpansionTarget>, StorageError> {
    let mut out = Vec::new();
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let claim = v.persistent_volume_claim.is_some() || v.data_volume.is_some();
        if !(claim || v.host_disk.is_some()) || block_volumes.contains(&v.name) {
            continue;
        }
        if v.persistent_volume_claim
            .as_ref()
            .is_some_and(|p| p.read_only)
        {
            continue;
        }
        let Some(usable) = pvc::info(vmi, &v.name)?
            .filter(|i| !i.is_block())
            .as_ref()
            .and_then(pvc::usable_size)
        else {
            continue;
        };
        let image = match &v.host_disk {
            Some(h) => {
                match host_disk_image(ctx, &v.name, &h.path, &format!("spec.volumes[{i}]")) {
                    Ok(p) => PathBuf::from(p),
                    Err(_) => continue,
                }
            }
            None => PathBuf::from(pvc_image(ctx, &v.name)),
        };
        out.push(ExpansionTarget {
            volume: v.name.clone(),
            image,
            usable,
        });
    }
    Ok(out)
}

/// KubeVirt's offline ExpandDisks step: each [`expansion_targets`] image
/// smaller than its usable size is grown with `qemu-img resize` (falloc
/// when the image is fully allocated); never shrunk. As in KubeVirt, a
/// failed resize is logged and the domain starts with the image as it is.
fn expand_claim_images(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    prepared: &Prepared,
) -> Result<(), StorageError> {
    for t in expansion_targets(vmi, ctx, &prepared.block_volumes)? {
        let Ok(meta) = fs::symlink_metadata(&t.image) else {
            continue;
        };
        if !meta.is_file() || meta.len() >= t.usable {
            continue;
        }
        match qemu_img::resize(&t.image, t.usable, preallocated(&t.image)) {
            Ok(()) => {
                tracing::info!(volume = %t.volume, from = meta.len(), to = t.usable, "expanded the disk image to the claim's usable size")
            }
            Err(e) => {
                tracing::error!(volume = %t.volume, "failed to expand the disk image at start: {e}")
            }
        }
    }
    Ok(())
}

fn finish_file(
    field: &str,
    p: &Path,
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), StorageError> {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).map_err(io_err(field, "chmod", p))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(p, Some(uid), Some(gid)).map_err(io_err(field, "chown", p))?;
    }
    Ok(())
}

/// Whether `p` can be opened with O_DIRECT (false on tmpfs, for example).
pub fn supports_direct_io(p: &Path) -> io::Result<bool> {
    match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(p)
    {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether the image at `p` is fully allocated (its allocated size is at
/// least its length, as `qemu-img info` actual ≥ virtual size for a raw
/// file); false when it cannot be read.
pub fn preallocated(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.blocks().saturating_mul(512) >= m.len())
}

/// KubeVirt's cache mode rule for disks that set none: `none` when the
/// image (and its backing file) can be opened with O_DIRECT, else
/// `writethrough`. An explicit `none` where O_DIRECT does not work is an
/// error; other explicit modes are kept.
fn choose_cache_modes(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    prepared: &mut Prepared,
) -> Result<(), StorageError> {
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let Some(disk) = vmi
            .spec
            .domain
            .devices
            .disks
            .iter()
            .find(|d| d.name == v.name)
        else {
            continue;
        };
        let field = format!("spec.volumes[{i}]");
        let files: Vec<PathBuf> = if v.container_disk.is_some() {
            vec![
                container_disk_overlay(ctx, &v.name).into(),
                container_disk_image(ctx, i).into(),
            ]
        } else if v.empty_disk.is_some() {
            vec![empty_disk_image(ctx, &v.name).into()]
        } else if v.ephemeral.is_some() {
            let backing = if prepared.block_volumes.contains(&v.name) {
                PathBuf::from(format!("/dev/{}", v.name))
            } else {
                pvc_image(ctx, &v.name).into()
            };
            vec![container_disk_overlay(ctx, &v.name).into(), backing]
        } else if prepared.block_volumes.contains(&v.name) {
            vec![PathBuf::from(format!("/dev/{}", v.name))]
        } else if let Some(h) = &v.host_disk {
            match host_disk_image(ctx, &v.name, &h.path, &field) {
                Ok(p) => vec![p.into()],
                Err(_) => continue,
            }
        } else if v.persistent_volume_claim.is_some() || v.data_volume.is_some() {
            vec![pvc_image(ctx, &v.name).into()]
        } else if v.cloud_init_no_cloud.is_some() || v.cloud_init_config_drive.is_some() {
            vec![cloud_init_iso(ctx, vmi, v.cloud_init_config_drive.is_some()).into()]
        } else if let Some(kind) = ConfigKind::of(v) {
            vec![kind.iso(ctx, &v.name).into()]
        } else {
            continue;
        };
        let mut direct = true;
        for f in &files {
            match supports_direct_io(f) {
                Ok(true) => {}
                Ok(false) => direct = false,
                Err(e) => {
                    tracing::warn!(volume = %v.name, file = %f.display(), "cannot probe O_DIRECT, using writethrough: {e}");
                    direct = false;
                }
            }
        }
        // KubeVirt's io rule: no io given, cache none, and a block device
        // or a fully allocated image → io native.
        let none = match disk.cache {
            Some(c) => c == CacheMode::None,
            None => direct,
        };
        let block = prepared.block_volumes.contains(&v.name);
        if none && disk.io.is_none() && (block || files.first().is_some_and(|f| preallocated(f))) {
            prepared.native_io.insert(v.name.clone());
        }
        match disk.cache {
            Some(CacheMode::None) if !direct => {
                let p = files
                    .first()
                    .map(|f| f.display().to_string())
                    .unwrap_or_default();
                return Err(volume_err(
                    &format!("spec.domain.devices.disks[{}].cache", vmi.spec.domain.devices.disks.iter().position(|d| d.name == v.name).unwrap_or(0)),
                    format!("Unable to use 'none' cache mode, file system where {p} is stored does not support direct I/O"),
                ));
            }
            Some(_) => {}
            None => {
                prepared.cache_modes.insert(
                    v.name.clone(),
                    if direct {
                        CacheMode::None
                    } else {
                        CacheMode::Writethrough
                    },
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod pvc_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod volume_tests;
