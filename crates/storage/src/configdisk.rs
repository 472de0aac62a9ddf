//! configMap, secret, downwardAPI and serviceAccount volumes as ISO disks
//! (KubeVirt v1.6.6 `pkg/config`, facts 5.2).
//!
//! KubeVirt grafts every entry of the mounted source directory into an ISO
//! 9660 image (Joliet, Rock Ridge) with `xorrisofs -follow-links`, labelled
//! with the volume's `volumeLabel`, default `cfgdata`. Kubernetes lays these
//! directories out with symbolic links (`key -> ..data/key`,
//! `..data -> ..2024_11_30_...`), so links must be followed, but a link
//! leading outside the source directory would put a host file into the
//! guest's disk. So the tree is first copied into a private staging
//! directory: links are resolved and followed only when their target lies
//! inside the source directory, regular files and directories keep their
//! permission bits (Rock Ridge records them), anything else (devices,
//! sockets, fifos) is refused. The image is then written from the copy,
//! with links already resolved, exactly what `-follow-links` would graft.
//! Copies are bounded ([`MAX_DEPTH`], [`MAX_ENTRIES`], [`MAX_BYTES`]) so a
//! link cycle cannot make them grow without end.

use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use api::layout::ConfigKind;
use api::vmi::Volume;
use api::VirtualMachineInstance;
use converter::ConvertContext;

use crate::staging::Staging;
use crate::{ensure_parent_under, io_err, volume_err, ConfigDiskFs, ConfigSources, StorageError};

/// Default volume label of config disks (KubeVirt: `cfgdata`).
pub const DEFAULT_LABEL: &str = "cfgdata";
/// Label of sysprep disks (KubeVirt: `unattendCD`; Windows finds the answer
/// file on any removable drive, whatever its label).
pub const SYSPREP_LABEL: &str = "unattendCD";

/// KubeVirt refuses a sysprep source without an answer file at its top
/// level: `autounattend.xml` or `unattend.xml`, in any letter case.
fn check_unattend(field: &str, root: &Path) -> Result<(), StorageError> {
    let found = fs::read_dir(root)
        .map_err(io_err(field, "read directory", root))?
        .flatten()
        .any(|e| {
            let n = e.file_name().to_string_lossy().to_lowercase();
            n == "autounattend.xml" || n == "unattend.xml"
        });
    if found {
        Ok(())
    } else {
        Err(volume_err(
            field,
            "Sysprep drive should contain autounattend.xml or unattend.xml but neither were found.",
        ))
    }
}
/// Deepest directory nesting copied.
pub const MAX_DEPTH: usize = 16;
/// Most entries (files and directories) copied per volume.
pub const MAX_ENTRIES: usize = 10_000;
/// Most bytes copied per volume (a Kubernetes ConfigMap or Secret holds at
/// most 1 MiB; this bounds standalone directories and link cycles).
pub const MAX_BYTES: u64 = 256 << 20;

/// Resolves `p` (inside `root`, which is canonical) following symbolic
/// links, and requires the result to lie inside `root`.
///
/// # Errors
/// [`StorageError::Volume`] for a link leading outside `root` or a dangling
/// link; [`StorageError::Io`] when resolution fails otherwise.
pub fn resolve_inside(field: &str, root: &Path, p: &Path) -> Result<PathBuf, StorageError> {
    let real = fs::canonicalize(p).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            volume_err(
                field,
                format!("{} is a dangling symbolic link", p.display()),
            )
        } else {
            io_err(field, "resolve", p)(e)
        }
    })?;
    if !real.starts_with(root) {
        return Err(volume_err(
            field,
            format!(
                "{} leads to {}, outside the volume's directory {}; refusing to follow it",
                p.display(),
                real.display(),
                root.display()
            ),
        ));
    }
    Ok(real)
}

struct Budget {
    entries: usize,
    bytes: u64,
}

/// Copies the contents of directory `src` (canonical, inside `root`) into
/// the existing directory `dst` (module docs); with `dst` `None` only walks
/// the tree and applies the same checks, writing nothing.
fn copy_tree(
    field: &str,
    root: &Path,
    src: &Path,
    dst: Option<&Path>,
    depth: usize,
    budget: &mut Budget,
) -> Result<(), StorageError> {
    if depth > MAX_DEPTH {
        return Err(volume_err(
            field,
            format!(
                "{} is nested more than {MAX_DEPTH} directories deep (a link cycle?)",
                src.display()
            ),
        ));
    }
    let mut entries: Vec<_> = fs::read_dir(src)
        .map_err(io_err(field, "read directory", src))?
        .collect::<Result<_, _>>()
        .map_err(io_err(field, "read directory", src))?;
    entries.sort_by_key(fs::DirEntry::file_name);
    for e in entries {
        budget.entries += 1;
        if budget.entries > MAX_ENTRIES {
            return Err(volume_err(
                field,
                format!("more than {MAX_ENTRIES} files (a link cycle?)"),
            ));
        }
        let name = e.file_name();
        let from = src.join(&name);
        let to = dst.map(|d| d.join(&name));
        let lmeta = fs::symlink_metadata(&from).map_err(io_err(field, "stat", &from))?;
        let real = if lmeta.file_type().is_symlink() {
            resolve_inside(field, root, &from)?
        } else {
            from.clone()
        };
        let meta = fs::metadata(&real).map_err(io_err(field, "stat", &real))?;
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_dir() {
            if let Some(to) = &to {
                fs::create_dir(to).map_err(io_err(field, "mkdir", to))?;
            }
            copy_tree(field, root, &real, to.as_deref(), depth + 1, budget)?;
            if let Some(to) = &to {
                fs::set_permissions(to, fs::Permissions::from_mode(mode))
                    .map_err(io_err(field, "chmod", to))?;
            }
        } else if meta.is_file() {
            budget.bytes += meta.len();
            if budget.bytes > MAX_BYTES {
                return Err(volume_err(
                    field,
                    format!("more than {MAX_BYTES} bytes of files"),
                ));
            }
            let Some(to) = &to else { continue };
            // The file as opened is what counts, not what the stat above
            // saw: its type is checked on the descriptor (a FIFO swapped
            // in must not block: O_NONBLOCK), and the copy stops at the
            // budget, however much the file grew since (issue 19).
            let input = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(&real)
                .map_err(io_err(field, "open", &real))?;
            let opened = input.metadata().map_err(io_err(field, "stat", &real))?;
            if !opened.is_file() {
                return Err(volume_err(
                    field,
                    format!("{} is not a regular file", from.display()),
                ));
            }
            let mut out = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(to)
                .map_err(io_err(field, "create", to))?;
            // What the stat above counted is replaced by what is copied.
            budget.bytes -= meta.len();
            let room = MAX_BYTES - budget.bytes;
            let copied = io::copy(&mut io::Read::take(&input, room + 1), &mut out)
                .map_err(io_err(field, "copy", &real))?;
            budget.bytes += copied;
            if budget.bytes > MAX_BYTES {
                return Err(volume_err(
                    field,
                    format!("more than {MAX_BYTES} bytes of files"),
                ));
            }
            out.set_permissions(fs::Permissions::from_mode(
                opened.permissions().mode() & 0o777,
            ))
            .map_err(io_err(field, "chmod", to))?;
        } else {
            return Err(volume_err(
                field,
                format!("{} is not a regular file or directory", from.display()),
            ));
        }
    }
    Ok(())
}

/// The source directory of config volume `v`.
///
/// # Errors
/// In standalone mode, [`StorageError::Volume`] when no `--config-volume`
/// directory was given for it.
pub fn source_dir(
    ctx: &ConvertContext,
    sources: &ConfigSources,
    kind: ConfigKind,
    v: &Volume,
    field: &str,
) -> Result<PathBuf, StorageError> {
    match sources {
        ConfigSources::Pod => Ok(PathBuf::from(kind.source_dir(&ctx.paths, &v.name))),
        ConfigSources::Standalone { volumes, .. } => volumes.get(&v.name).cloned().ok_or_else(|| {
            volume_err(
                field,
                format!(
                    "standalone mode has no mounted {} volumes: pass --config-volume {}=DIR with the directory holding its files",
                    kind.field(),
                    v.name
                ),
            )
        }),
    }
}

/// The ISO label of config volume `v`: its `volumeLabel`, else `cfgdata`.
pub fn label(v: &Volume) -> Option<&str> {
    v.config_map
        .as_ref()
        .and_then(|c| c.volume_label.as_deref())
        .or_else(|| v.secret.as_ref().and_then(|c| c.volume_label.as_deref()))
        .or_else(|| {
            v.downward_api
                .as_ref()
                .and_then(|c| c.volume_label.as_deref())
        })
        .filter(|l| !l.is_empty())
}

/// The volume, its kind, field path, label and canonical source root of
/// config volume `index`, after the label and directory checks.
fn checked_source<'a>(
    vmi: &'a VirtualMachineInstance,
    index: usize,
    src: &Path,
    fs_kind: ConfigDiskFs,
) -> Result<(&'a Volume, ConfigKind, String, &'a str, PathBuf), StorageError> {
    let v = vmi
        .spec
        .volumes
        .get(index)
        .ok_or_else(|| volume_err(&format!("spec.volumes[{index}]"), "no such volume"))?;
    let Some(kind) = ConfigKind::of(v) else {
        return Err(volume_err(
            &format!("spec.volumes[{index}]"),
            "not a config volume",
        ));
    };
    let field = format!("spec.volumes[{index}].{}", kind.field());
    let label = if kind == ConfigKind::Sysprep {
        SYSPREP_LABEL
    } else {
        label(v).unwrap_or(DEFAULT_LABEL)
    };
    match fs_kind {
        ConfigDiskFs::Iso9660 => crate::iso::check_label(label),
        ConfigDiskFs::Vfat => crate::fat::check_label(label),
    }
    .map_err(|e| volume_err(&format!("{field}.volumeLabel"), e.to_string()))?;
    let root = match fs::canonicalize(src) {
        Ok(r) if r.is_dir() => r,
        Ok(_) => {
            return Err(volume_err(
                &field,
                format!("{} is not a directory", src.display()),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(volume_err(
                &field,
                format!("source directory {} does not exist", src.display()),
            ))
        }
        Err(e) => return Err(io_err(&field, "open", src)(e)),
    };
    if kind == ConfigKind::Sysprep {
        check_unattend(&field, &root)?;
    }
    Ok((v, kind, field, label, root))
}

/// Checks config volume `index`'s source directory `src` as [`generate`]
/// would read it (label, directory, links only inside it, no special files,
/// bounds) without writing anything, so bad input is refused before the
/// launcher starts libvirt.
///
/// # Errors
/// The [`StorageError`] [`generate`] would return for the same input.
pub fn check(
    vmi: &VirtualMachineInstance,
    index: usize,
    src: &Path,
    fs_kind: ConfigDiskFs,
) -> Result<(), StorageError> {
    let (_, _, field, _, root) = checked_source(vmi, index, src, fs_kind)?;
    let mut budget = Budget {
        entries: 0,
        bytes: 0,
    };
    copy_tree(&field, &root, &root, None, 0, &mut budget)
}

/// Builds the disk of config volume `v` (the `index`-th) from `src`: an
/// ISO 9660 image, or a FAT one with [`ConfigDiskFs::Vfat`] (same path).
///
/// # Errors
/// [`StorageError`] naming the volume field: missing directory, a link
/// outside it, a special file, a bad label, `xorrisofs` failing. Nothing
/// half-written is left at the ISO path.
pub fn generate(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    index: usize,
    src: &Path,
    owner: Option<(u32, u32)>,
    fs_kind: ConfigDiskFs,
) -> Result<PathBuf, StorageError> {
    let (v, kind, field, label, root) = checked_source(vmi, index, src, fs_kind)?;
    let iso = PathBuf::from(kind.iso(&ctx.paths, &v.name));
    ensure_parent_under(&field, &ctx.paths.private_dir, &iso)?;
    // The copy and the image are made in a private directory (removed
    // with everything in it on every path), the image renamed into place.
    let staging = Staging::new(&field, Path::new(&ctx.paths.private_dir), &iso)?;
    let stage = staging.dir().join("tree");
    fs::create_dir(&stage).map_err(io_err(&field, "mkdir", &stage))?;
    let mut budget = Budget {
        entries: 0,
        bytes: 0,
    };
    copy_tree(&field, &root, &root, Some(&stage), 0, &mut budget)?;
    let (cwd, tree, out) = (staging.dir(), Path::new("tree"), staging.name());
    match fs_kind {
        ConfigDiskFs::Iso9660 => crate::iso::create(cwd, tree, label, out),
        ConfigDiskFs::Vfat => crate::fat::create(cwd, tree, label, out),
    }
    .map_err(|e| volume_err(&field, e.to_string()))?;
    staging.finish(0o640, owner)?;
    Ok(iso)
}
