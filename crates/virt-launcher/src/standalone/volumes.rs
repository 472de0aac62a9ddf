//! What kubelet and CSI would mount in a pod, from `run`'s flags: backend
//! storage (`--backend-storage`), hostDisk directories, config volumes and
//! cloud-init secrets (`--config-volume`), access-credential keys
//! (`--access-credential`), container-disk images (`--container-disk`),
//! each checked before anything is mounted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use api::VirtualMachineInstance;

use crate::error::LauncherError;
use crate::startup::PRIVATE_DIR;

/// The field that asks for backend storage (persistent EFI variables or
/// TPM state), if any.
fn backend_storage_field(vmi: &VirtualMachineInstance) -> Option<&'static str> {
    let dom = &vmi.spec.domain;
    let efi = dom
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref())
        .and_then(|b| b.efi.as_ref())
        .is_some_and(|e| e.persistent == Some(true));
    let tpm = dom
        .devices
        .tpm
        .as_ref()
        .is_some_and(|t| t.enabled != Some(false) && t.persistent == Some(true));
    if efi {
        Some("spec.domain.firmware.bootloader.efi.persistent")
    } else if tpm {
        Some("spec.domain.devices.tpm.persistent")
    } else {
        None
    }
}

/// Entries of directory `dir` other than `allowed` (sorted, at most five
/// named): a directory given as a claim or backend storage must hold
/// nothing else, so a typo such as `/etc` is refused, never written into.
fn foreign_entries(dir: &Path, allowed: &[&str]) -> Result<Vec<String>, std::io::Error> {
    let mut out: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !allowed.contains(&n.as_str()))
        .collect();
    out.sort();
    Ok(out)
}

/// `what`: `dir` holds entries it should not (see [`foreign_entries`]).
pub(crate) fn refuse_foreign_entries(
    what: &str,
    dir: &Path,
    allowed: &[&str],
) -> Result<(), LauncherError> {
    let extra = foreign_entries(dir, allowed)
        .map_err(|e| LauncherError::input_at(what.to_string(), e.to_string()))?;
    if extra.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = extra.iter().take(5).map(String::as_str).collect();
    Err(LauncherError::input_at(
        what.to_string(),
        format!(
            "{} holds {}{}, but may hold only {}; refusing to use it",
            dir.display(),
            shown.join(", "),
            if extra.len() > 5 { ", ..." } else { "" },
            allowed.join(", ")
        ),
    ))
}

/// Standalone: the backend storage directory, checked; a VMI that asks for
/// persistence without one is refused (its state would be lost silently).
pub(crate) fn backend_storage_dir(
    vmi: &VirtualMachineInstance,
    s: &super::StandaloneArgs,
) -> Result<Option<PathBuf>, LauncherError> {
    let Some(dir) = &s.backend_storage else {
        return match backend_storage_field(vmi) {
            Some(field) => Err(LauncherError::input_at(field.to_string(), "standalone mode has no backend storage; pass --backend-storage DIR to keep the state across runs")),
            None => Ok(None),
        };
    };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(m) => {
            let what = if m.file_type().is_symlink() {
                "a symbolic link (give the directory itself)"
            } else {
                "not a directory"
            };
            return Err(LauncherError::input_at(
                format!("--backend-storage {}", dir.display()),
                what.to_string(),
            ));
        }
        Err(e) => {
            return Err(LauncherError::input_at(
                format!("--backend-storage {}", dir.display()),
                e.to_string(),
            ))
        }
    }
    let abs = std::fs::canonicalize(dir).map_err(|e| {
        LauncherError::input_at(
            format!("--backend-storage {}", dir.display()),
            e.to_string(),
        )
    })?;
    refuse_foreign_entries(
        &format!("--backend-storage {}", dir.display()),
        &abs,
        &["nvram", "swtpm", "cbt", "lost+found"],
    )?;
    for sub in ["nvram", "swtpm", "cbt"] {
        let source = abs.join(sub);
        if std::fs::symlink_metadata(&source).is_ok_and(|m| !m.is_dir()) {
            return Err(LauncherError::input_at(
                "--backend-storage",
                format!("{} is not a directory", source.display()),
            ));
        }
    }
    Ok(Some(abs))
}
/// For each hostDisk volume, the host directory holding its image and where
/// virt-handler would mount it (`<private-dir>/vmi-disks/<vol>`): a hostDisk
/// is a file on the host, so standalone mode shows the launcher that file's
/// directory (created files land at the declared host path).
pub(crate) fn host_disk_dirs(
    vmi: &VirtualMachineInstance,
) -> Result<Vec<(PathBuf, PathBuf)>, LauncherError> {
    let mut out = Vec::new();
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let Some(h) = &v.host_disk else { continue };
        let dir = Path::new(&h.path).parent().unwrap_or(Path::new("/"));
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => {}
            _ => {
                return Err(LauncherError::input_at(
                    format!("spec.volumes[{i}].hostDisk.path"),
                    format!("directory {} does not exist on this host", dir.display()),
                ))
            }
        }
        out.push((
            dir.to_owned(),
            PathBuf::from(format!("{PRIVATE_DIR}/vmi-disks/{}", v.name)),
        ));
    }
    Ok(out)
}

/// Pairs each config volume, and the cloud-init volume whose data is in a
/// secret, with its host directory (`--config-volume`): standalone mode has
/// no kubelet to mount them. Every such volume needs one; every flag must
/// name such a volume.
pub(crate) fn config_volume_dirs(
    vmi: &VirtualMachineInstance,
    s: &super::StandaloneArgs,
) -> Result<BTreeMap<String, PathBuf>, LauncherError> {
    let mut out = BTreeMap::new();
    for (name, dir) in &s.config_volumes {
        let Some(v) = vmi.spec.volumes.iter().find(|v| &v.name == name) else {
            return Err(LauncherError::input_at(
                format!("--config-volume {name}=..."),
                format!("the VMI has no volume named {name:?}"),
            ));
        };
        let takes_dir = api::layout::ConfigKind::of(v).is_some()
            || v.cloud_init_no_cloud.is_some()
            || v.cloud_init_config_drive.is_some();
        if !takes_dir {
            return Err(LauncherError::input_at(format!("--config-volume {name}=..."), format!("volume {name:?} is not a configMap, secret, downwardAPI, serviceAccount, sysprep or cloud-init volume")));
        }
        let meta = std::fs::metadata(dir).map_err(|e| {
            LauncherError::input_at(
                format!("--config-volume {name}={}", dir.display()),
                e.to_string(),
            )
        })?;
        if !meta.is_dir() {
            return Err(LauncherError::input_at(
                format!("--config-volume {name}={}", dir.display()),
                "not a directory",
            ));
        }
        let abs = std::fs::canonicalize(dir)
            .map_err(|e| LauncherError::input(format!("{}: {e}", dir.display())))?;
        if out.insert(name.clone(), abs).is_some() {
            return Err(LauncherError::input(format!(
                "--config-volume {name}=... is given twice"
            )));
        }
    }
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        if let Some(kind) = api::layout::ConfigKind::of(v) {
            if !out.contains_key(&v.name) {
                return Err(LauncherError::input_at(format!("spec.volumes[{i}].{}", kind.field()), format!("standalone mode has no mounted {} volumes: pass --config-volume {}=DIR with the directory holding its files", kind.field(), v.name)));
            }
        }
    }
    if let Some((i, v, kind, src)) = storage::cloudinit::find(vmi) {
        let field = if src.user_data_secret_ref.is_some() {
            Some("userDataSecretRef")
        } else if src.network_data_secret_ref.is_some() {
            Some("networkDataSecretRef")
        } else {
            None
        };
        if let Some(f) = field {
            if !out.contains_key(&v.name) {
                return Err(LauncherError::input_at(format!("spec.volumes[{i}].{}.{f}", kind.field()), format!("standalone mode has no mounted secrets: pass --config-volume {}=DIR, a directory with the file userdata (or networkdata)", v.name)));
            }
        }
    }
    Ok(out)
}

/// Pairs each access credential's secret with its host directory
/// (`--access-credential SECRET=DIR`): the secrets of `sshPublicKey`
/// credentials (any propagation: the files are public keys) and of
/// `userPassword` credentials (each file is named after a guest user and
/// holds the password). Every such secret needs one; every flag must name
/// one.
pub(crate) fn access_credential_dirs(
    vmi: &VirtualMachineInstance,
    s: &super::StandaloneArgs,
) -> Result<BTreeMap<String, PathBuf>, LauncherError> {
    // (index, field of the secret, name, what its files are)
    let used: Vec<(usize, &str, &str, &str)> = vmi
        .spec
        .access_credentials
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            if let Some(k) = &c.ssh_public_key {
                let name = k.source.secret.as_ref()?.secret_name.as_str();
                return Some((i, "sshPublicKey", name, "a directory whose files are public keys"));
            }
            let p = c.user_password.as_ref()?;
            let name = p.source.secret.as_ref()?.secret_name.as_str();
            Some((i, "userPassword", name, "a directory with one file per guest user, named after the user and holding the password"))
        })
        .collect();
    let mut out = BTreeMap::new();
    for (name, dir) in &s.access_credentials {
        if !used.iter().any(|(_, _, n, _)| n == name) {
            return Err(LauncherError::input_at(
                format!("--access-credential {name}=..."),
                format!("no access credential uses secret {name:?}"),
            ));
        }
        if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
            return Err(LauncherError::input_at(
                format!("--access-credential {name}={}", dir.display()),
                "not a directory",
            ));
        }
        let abs = std::fs::canonicalize(dir)
            .map_err(|e| LauncherError::input(format!("{}: {e}", dir.display())))?;
        if out.insert(name.clone(), abs).is_some() {
            return Err(LauncherError::input(format!(
                "--access-credential {name}=... is given twice"
            )));
        }
    }
    if let Some((i, kind, name, what)) = used.iter().find(|(_, _, n, _)| !out.contains_key(*n)) {
        return Err(LauncherError::input_at(format!("spec.accessCredentials[{i}].{kind}.source.secret"), format!("standalone mode has no mounted secrets: pass --access-credential {name}=DIR, {what}")));
    }
    Ok(out)
}

/// Pairs each containerDisk volume with its host image (`--container-disk`).
pub(crate) fn container_disk_images(
    vmi: &VirtualMachineInstance,
    s: &super::StandaloneArgs,
) -> Result<Vec<(usize, PathBuf)>, LauncherError> {
    let mut out = Vec::new();
    for (n, (name, _)) in s.container_disks.iter().enumerate() {
        if s.container_disks[..n]
            .iter()
            .any(|(other, _)| other == name)
        {
            return Err(LauncherError::input(format!(
                "--container-disk {name}=... is given twice"
            )));
        }
        if !vmi
            .spec
            .volumes
            .iter()
            .any(|v| &v.name == name && v.container_disk.is_some())
        {
            return Err(LauncherError::input_at(
                format!("--container-disk {name}=..."),
                format!("the VMI has no containerDisk volume named {name:?}"),
            ));
        }
    }
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        if v.container_disk.is_none() {
            continue;
        }
        let Some((_, file)) = s.container_disks.iter().find(|(n, _)| n == &v.name) else {
            return Err(LauncherError::input_at(
                format!("spec.volumes[{i}].containerDisk"),
                format!(
                    "no image for volume {:?}: pass --container-disk {}=FILE",
                    v.name, v.name
                ),
            ));
        };
        let meta = std::fs::metadata(file).map_err(|e| {
            LauncherError::input_at(
                format!("spec.volumes[{i}].containerDisk"),
                format!("image {} for volume {:?}: {e}", file.display(), v.name),
            )
        })?;
        if !meta.is_file() {
            return Err(LauncherError::input_at(
                format!("spec.volumes[{i}].containerDisk"),
                format!("{} is not a regular file", file.display()),
            ));
        }
        let abs = std::fs::canonicalize(file)
            .map_err(|e| LauncherError::input(format!("{}: {e}", file.display())))?;
        out.push((i, abs));
    }
    Ok(out)
}
