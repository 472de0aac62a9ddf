//! A migration target's cloud-init and config-volume disks (KubeVirt
//! v1.6.6: `generateCloudInitEmptyISO` for cloud-init, `findIsoSize` and
//! `createEmptyISOImage` for configMap, secret, downwardAPI,
//! serviceAccount and sysprep disks, all with `generateEmptyIsos` on the
//! target): not built from their content but made as files of zeros of
//! the source's size, which the migration's block copy then fills (these
//! volumes are "generated": copied although read-only). The size is the
//! volume's `vmi.status.volumeStatus[].size`, which virt-handler records
//! from the file in the source's pod (`updateIsoSizeStatus`); a volume
//! without a status entry is KubeVirt's error `failed to find the status
//! of volume <name>`; a size of 0 (not recorded yet) builds the disk with
//! its content, as at a start.

use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use api::VirtualMachineInstance;
use serde_json::Value;

use crate::{io_err, volume_err, StorageError};

/// The largest size taken from a volume status (4 GiB: a config or
/// cloud-init disk is a few MiB; the file is sparse anyway).
pub const MAX_EMPTY_MEDIA_BYTES: u64 = 4 << 30;

/// The size the target's empty disk of volume `name` must have: `Some`
/// for a recorded size, `None` when the status says 0 (build the disk with
/// its content).
///
/// # Errors
/// At `field`: KubeVirt's `failed to find the status of volume <name>`;
/// a size that is negative, not an integer or above
/// [`MAX_EMPTY_MEDIA_BYTES`].
pub fn size(
    vmi: &VirtualMachineInstance,
    name: &str,
    field: &str,
) -> Result<Option<u64>, StorageError> {
    let entry = vmi
        .status
        .as_ref()
        .and_then(|s| s.get("volumeStatus"))
        .and_then(Value::as_array)
        .and_then(|l| l.iter().find(|e| e["name"] == name))
        .ok_or_else(|| {
            volume_err(
                field,
                format!(
                    "failed to find the status of volume {}",
                    api::text::cut(name, 64)
                ),
            )
        })?;
    match &entry["size"] {
        Value::Null => Ok(None),
        v => match v.as_u64() {
            Some(0) => Ok(None),
            Some(n) if n <= MAX_EMPTY_MEDIA_BYTES => Ok(Some(n)),
            _ => Err(volume_err(
                field,
                format!(
                    "status.volumeStatus size {} of volume {} is not a size up to {MAX_EMPTY_MEDIA_BYTES} bytes",
                    api::text::cut(&v.to_string(), 32),
                    api::text::cut(name, 64)
                ),
            )),
        },
    }
}

/// A migration target's config or cloud-init disk of volume `name`
/// (`empty` true only there, [`crate::PrepareOptions::empty_media`]): made
/// empty at `iso` below `root`, of the size the volume status records, as
/// KubeVirt's target does. `Ok(false)` when the disk is to be built with
/// its content instead (not a target, or the status says 0).
///
/// # Errors
/// Those of [`size`] and [`create`].
pub fn made_empty(
    empty: bool,
    vmi: &VirtualMachineInstance,
    name: &str,
    field: &str,
    root: &str,
    iso: &Path,
    owner: Option<(u32, u32)>,
) -> Result<bool, StorageError> {
    if !empty {
        return Ok(false);
    }
    let Some(bytes) = size(vmi, name, field)? else {
        return Ok(false);
    };
    create(field, root, iso, bytes, owner)?;
    Ok(true)
}

/// Makes `iso` (below the configured directory `root`) a file of `size`
/// zero bytes (sparse), with mode 0640 and `owner`, written in a private
/// directory and renamed into place ([`crate::staging`]).
///
/// # Errors
/// [`StorageError`] at `field` naming the file; a link on the way below
/// `root`.
pub fn create(
    field: &str,
    root: &str,
    iso: &Path,
    size: u64,
    owner: Option<(u32, u32)>,
) -> Result<(), StorageError> {
    crate::ensure_parent_under(field, root, iso)?;
    let staging = crate::staging::Staging::new(field, Path::new(root), iso)?;
    let out = staging.file();
    let f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&out)
        .map_err(io_err(field, "create", iso))?;
    f.set_len(size).map_err(io_err(field, "truncate", iso))?;
    drop(f);
    staging.finish(0o640, owner)?;
    tracing::info!(volume = %field, iso = %iso.display(), size, "empty disk made for the incoming migration");
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn vmi(status: &str) -> VirtualMachineInstance {
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"a"}},"spec":{{"domain":{{"devices":{{}}}}}},"status":{status}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn the_size_is_the_volume_statuss_and_a_missing_status_is_kubevirts_error() {
        let f = "spec.volumes[1].configMap";
        let v = vmi(
            r#"{"volumeStatus":[{"name":"cfg","size":374784},{"name":"zero","size":0},{"name":"none"}]}"#,
        );
        assert_eq!(size(&v, "cfg", f).unwrap(), Some(374_784));
        assert_eq!(size(&v, "zero", f).unwrap(), None);
        assert_eq!(size(&v, "none", f).unwrap(), None);
        assert_eq!(
            size(&v, "other", f).unwrap_err().to_string(),
            "spec.volumes[1].configMap: failed to find the status of volume other"
        );
        assert_eq!(
            size(&vmi("{}"), "cfg", f).unwrap_err().to_string(),
            "spec.volumes[1].configMap: failed to find the status of volume cfg"
        );
        for bad in ["-1", "1.5", "\"1\"", "4294967297"] {
            let v = vmi(&format!(
                r#"{{"volumeStatus":[{{"name":"cfg","size":{bad}}}]}}"#
            ));
            assert!(
                size(&v, "cfg", f)
                    .unwrap_err()
                    .to_string()
                    .contains("is not a size up to"),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_empty_disk_is_zeros_of_the_size_and_never_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_str().unwrap();
        let iso = tmp.path().join("cloud-init-data/ns/a/noCloud.iso");
        create("f", root, &iso, 374_784, None).unwrap();
        let data = fs::read(&iso).unwrap();
        assert_eq!(data.len(), 374_784);
        assert!(data.iter().all(|b| *b == 0));
        // Again (a second SyncMigrationTarget): replaced, same size.
        create("f", root, &iso, 4096, None).unwrap();
        assert_eq!(fs::metadata(&iso).unwrap().len(), 4096);
        // A planted link on the way is refused, nothing written behind it.
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), tmp.path().join("config-map-disks")).unwrap();
        let e = create(
            "f",
            root,
            &tmp.path().join("config-map-disks/c.iso"),
            10,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("f: "), "{e}");
        assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }
}
