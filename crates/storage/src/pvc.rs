//! Filesystem-mode claims: the raw `disk.img` inside a claim's directory,
//! created when absent, and grown when the claim grew (KubeVirt v1.6.6
//! `pkg/host-disk` and the launcher's offline ExpandDisks step).
//!
//! Sizes come from the VMI's `status.volumeStatus[].persistentVolumeClaimInfo`
//! (virt-handler fills it from the claim; standalone, the launcher's
//! `--pvc VOL=DIR,capacity=...` does):
//!
//! | step | rule |
//! |---|---|
//! | image size | `requests.storage` when it is smaller than `capacity.storage` (or capacity is absent), else `capacity.storage`; aligned down to 1 MiB; 0 → "the size for volume V is too low, must be at least 1MiB" |
//! | room | free bytes of the claim's file system (statvfs, unprivileged) minus the reserve (`minimumReservePVCBytes`, 128 KiB) |
//! | toleration | size > room: accepted when `size × (100 − toleration) / 100 ≤ room` (toleration `--less-pvc-space-toleration`, 10 %), the image then gets the room (aligned down to 1 MiB); else refused naming the volume |
//! | creation | a sparse file written as `disk.img.partial` (a zero byte at the last offset, as KubeVirt writes it, so a full file system fails here), synced, then renamed to `disk.img` without replacing an existing one; any failure removes the partial file |
//! | expansion | with ExpandDisks: `(1 − filesystemOverhead) × min(requests, capacity)` aligned down to 1 MiB; when larger than the image, `qemu-img resize` (falloc for a fully allocated image) |

use std::fs;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use api::quantity::Quantity;
use api::VirtualMachineInstance;
use serde_json::Value;

use crate::{io_err, volume_err, StorageError};

/// KubeVirt's default `pvc-tolerate-less-space-up-to-percent` (percent).
pub const DEFAULT_LESS_PVC_SPACE_TOLERATION: u8 = 10;
/// KubeVirt's default `minimumReservePVCBytes`: bytes left free on a claim.
pub const DEFAULT_MINIMUM_RESERVE_PVC_BYTES: u64 = 131_072;

const MIB: u64 = 1 << 20;

/// A claim's `status.volumeStatus[].persistentVolumeClaimInfo`, the parts
/// the launcher reads (byte counts from Kubernetes quantities).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PvcInfo {
    /// `capacity.storage`: what the bound volume provides, in bytes.
    pub capacity: Option<u64>,
    /// `requests.storage`: what the claim asked for, in bytes.
    pub requests: Option<u64>,
    /// `filesystemOverhead`: the fraction (0 to 1) CDI keeps free for the
    /// file system holding the image.
    pub filesystem_overhead: Option<f64>,
    /// `volumeMode`: `Filesystem` or `Block` (absent: unknown).
    pub volume_mode: Option<String>,
    /// `preallocated`: CDI preallocated (or thick-provisioned) the claim;
    /// virt-handler lists such volumes in `PreallocatedVolumes`.
    pub preallocated: bool,
}

impl PvcInfo {
    /// True for a claim known to be a block device.
    pub fn is_block(&self) -> bool {
        self.volume_mode.as_deref() == Some("Block")
    }
}

/// The claim facts of volume `name` from `vmi.status.volumeStatus`, `None`
/// when the status has no `persistentVolumeClaimInfo` for it.
///
/// # Errors
/// [`StorageError::Volume`] naming the status field for a quantity that
/// does not parse or an overhead that is not a number from 0 to 1.
pub fn info(vmi: &VirtualMachineInstance, name: &str) -> Result<Option<PvcInfo>, StorageError> {
    let Some(list) = vmi
        .status
        .as_ref()
        .and_then(|s| s.get("volumeStatus"))
        .and_then(Value::as_array)
    else {
        return Ok(None);
    };
    let Some((i, st)) = list
        .iter()
        .enumerate()
        .find(|(_, s)| s.get("name").and_then(Value::as_str) == Some(name))
    else {
        return Ok(None);
    };
    let Some(p) = st.get("persistentVolumeClaimInfo") else {
        return Ok(None);
    };
    let field = format!("status.volumeStatus[{i}].persistentVolumeClaimInfo");
    let bytes = |key: &str| -> Result<Option<u64>, StorageError> {
        let Some(v) = p.get(key).and_then(|m| m.get("storage")) else {
            return Ok(None);
        };
        let f = format!("{field}.{key}.storage");
        let q = match v {
            Value::String(s) => Quantity::parse(s).map_err(|e| volume_err(&f, e.to_string()))?,
            Value::Number(n) => {
                Quantity::parse(&n.to_string()).map_err(|e| volume_err(&f, e.to_string()))?
            }
            _ => return Err(volume_err(&f, "is not a quantity")),
        };
        q.to_bytes()
            .map(Some)
            .map_err(|e| volume_err(&f, e.to_string()))
    };
    let overhead = match p.get("filesystemOverhead") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let f = format!("{field}.filesystemOverhead");
            let x = match v {
                Value::String(s) => s.trim().parse::<f64>().ok(),
                Value::Number(n) => n.as_f64(),
                _ => None,
            }
            .filter(|x| (0.0..=1.0).contains(x))
            .ok_or_else(|| volume_err(&f, format!("{v} is not a fraction from 0 to 1")))?;
            Some(x)
        }
    };
    Ok(Some(PvcInfo {
        capacity: bytes("capacity")?,
        requests: bytes("requests")?,
        filesystem_overhead: overhead,
        volume_mode: p
            .get("volumeMode")
            .and_then(Value::as_str)
            .map(str::to_owned),
        preallocated: p.get("preallocated").and_then(Value::as_bool) == Some(true),
    }))
}

/// The volumes whose claim status says `preallocated: true`, as
/// virt-handler computes `VirtualMachineOptions.PreallocatedVolumes`.
///
/// # Errors
/// [`StorageError::Volume`] for a status field that does not parse.
pub fn preallocated_volumes(
    vmi: &VirtualMachineInstance,
) -> Result<std::collections::BTreeSet<String>, StorageError> {
    let mut out = std::collections::BTreeSet::new();
    for v in &vmi.spec.volumes {
        if info(vmi, &v.name)?.is_some_and(|i| i.preallocated) {
            out.insert(v.name.clone());
        }
    }
    Ok(out)
}

/// The volumes whose claim status says `volumeMode: Block`: the claims
/// virt-handler hands a pod as the device `/dev/<volume>` (what `convert`
/// assumes for them, having no pod to look into).
///
/// # Errors
/// [`StorageError::Volume`] for a status field that does not parse.
pub fn block_mode_volumes(
    vmi: &VirtualMachineInstance,
) -> Result<std::collections::BTreeSet<String>, StorageError> {
    let mut out = std::collections::BTreeSet::new();
    for v in &vmi.spec.volumes {
        if info(vmi, &v.name)?.is_some_and(|i| i.volume_mode.as_deref() == Some("Block")) {
            out.insert(v.name.clone());
        }
    }
    Ok(out)
}

/// Why no disk image of a claim's size can be made. KubeVirt's messages
/// (`pkg/host-disk`), naming the volume; the caller prefixes the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClaimSizeError {
    /// The claim's status has neither capacity nor requests.
    #[error("unable to determine the size of volume {volume}: its claim provides no storage capacity or requests")]
    Unknown {
        /// The volume.
        volume: String,
    },
    /// The size, aligned down to 1 MiB, is 0.
    #[error("the size for volume {volume} is too low, must be at least 1MiB")]
    TooLow {
        /// The volume.
        volume: String,
    },
    /// The free room is short of the size by more than the toleration.
    #[error("unable to create the disk image of volume {volume}: not enough space, demanded size {requested} B is bigger than the available space {room} B, also after taking {toleration} % toleration into account")]
    NoSpace {
        /// The volume.
        volume: String,
        /// The size asked for, in bytes.
        requested: u64,
        /// The free bytes.
        room: u64,
        /// `lessPVCSpaceToleration`, percent.
        toleration: u8,
    },
    /// Tolerated, but the room is less than 1 MiB.
    #[error("unable to create the disk image of volume {volume}: only {room} B are available, less than 1MiB")]
    RoomUnderMib {
        /// The volume.
        volume: String,
        /// The free bytes.
        room: u64,
    },
}

/// The size of the image KubeVirt creates for a claim (the requests when
/// smaller than the capacity), aligned down to 1 MiB.
///
/// # Errors
/// [`ClaimSizeError::Unknown`] when the claim has neither capacity nor
/// requests, [`ClaimSizeError::TooLow`] for less than 1 MiB.
pub fn image_size(info: &PvcInfo, volume: &str) -> Result<u64, ClaimSizeError> {
    let size = match (info.capacity, info.requests) {
        (None, None) => {
            return Err(ClaimSizeError::Unknown {
                volume: volume.to_owned(),
            })
        }
        (c, Some(r)) if c.is_none_or(|c| c > r) => r,
        (Some(c), _) => c,
        (None, Some(r)) => r,
    };
    let size = size - size % MIB;
    if size == 0 {
        return Err(ClaimSizeError::TooLow {
            volume: volume.to_owned(),
        });
    }
    Ok(size)
}

/// The size an image of a claim may grow to with ExpandDisks (KubeVirt's
/// `possibleGuestSize`): `(1 − overhead) × min(requests, capacity)`
/// aligned down to 1 MiB. `None` when a fact is missing (KubeVirt then
/// does not expand) or the result is 0.
pub fn usable_size(info: &PvcInfo) -> Option<u64> {
    let preferred = info.capacity?.min(info.requests?);
    let overhead = info.filesystem_overhead?;
    // f64 as KubeVirt computes it; truncation toward zero as Go's int64().
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let size = ((1.0 - overhead) * preferred as f64) as u64;
    let size = size - size % MIB;
    (size > 0).then_some(size)
}

/// How much smaller than requested a claim may be, and how much of it stays
/// free (KubeVirt's `lessPVCSpaceToleration`, `minimumReservePVCBytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpacePolicy {
    /// Percent (0–100) by which the room may fall short of the size.
    pub less_pvc_space_toleration: u8,
    /// Bytes never given to the image.
    pub minimum_reserve_bytes: u64,
}

impl Default for SpacePolicy {
    fn default() -> Self {
        SpacePolicy {
            less_pvc_space_toleration: DEFAULT_LESS_PVC_SPACE_TOLERATION,
            minimum_reserve_bytes: DEFAULT_MINIMUM_RESERVE_PVC_BYTES,
        }
    }
}

/// The size to create for `requested` bytes when `room` bytes are free:
/// `requested` if it fits; else the room, aligned down to 1 MiB, when the
/// shortfall is within the toleration (logged, as KubeVirt's
/// `ToleratedSmallPV` event).
///
/// # Errors
/// [`ClaimSizeError::NoSpace`] / [`ClaimSizeError::RoomUnderMib`], naming
/// `volume`, when the room is too small even with the toleration.
pub fn size_to_create(
    volume: &str,
    requested: u64,
    room: u64,
    toleration: u8,
) -> Result<u64, ClaimSizeError> {
    if requested <= room {
        return Ok(requested);
    }
    let tolerated = u128::from(requested) * u128::from(100 - toleration.min(100)) / 100;
    if tolerated > u128::from(room) {
        return Err(ClaimSizeError::NoSpace {
            volume: volume.to_owned(),
            requested,
            room,
            toleration,
        });
    }
    let size = room - room % MIB;
    if size == 0 {
        return Err(ClaimSizeError::RoomUnderMib {
            volume: volume.to_owned(),
            room,
        });
    }
    tracing::info!(
        volume,
        expected = requested,
        found = room,
        toleration,
        "PV size too small: using it anyway, it is within the toleration (ToleratedSmallPV)"
    );
    Ok(size)
}

/// KubeVirt's `ToleratedSmallPV` event (type `Normal`) when the image
/// was created with `created` bytes instead of the `requested` ones (see
/// [`size_to_create`]); `None` when it got what it asked for. The
/// message has KubeVirt's wording with binary-SI quantities
/// (pkg/storage/hostdisk: "PV size too small: expected 5Gi, found
/// 4939Mi. Using it anyway, it is within 10 % toleration").
pub fn tolerated_small_pv(requested: u64, created: u64, toleration: u8) -> Option<crate::VmiEvent> {
    (created < requested).then(|| crate::VmiEvent {
        kind: "Normal",
        reason: "ToleratedSmallPV",
        message: format!(
            "PV size too small: expected {}, found {}. Using it anyway, it is within {toleration} % toleration",
            api::Quantity::binary_si(requested),
            api::Quantity::binary_si(created),
        ),
    })
}

/// Free bytes for unprivileged users on the file system holding `dir`,
/// minus `reserve` (0 when the reserve is larger).
///
/// # Errors
/// The statvfs error.
pub fn room(dir: &Path, reserve: u64) -> io::Result<u64> {
    let st = nix::sys::statvfs::statvfs(dir).map_err(io::Error::from)?;
    #[allow(clippy::useless_conversion)]
    let free = u64::from(st.blocks_available()).saturating_mul(u64::from(st.fragment_size()));
    Ok(free.saturating_sub(reserve))
}

/// Creates the sparse raw `image` (in `dir`, a real directory) of the size
/// [`size_to_create`] allows, `room_of` giving the free bytes of `dir`.
/// Written as `<image>.partial`, then renamed without replacing an existing
/// file; on any failure the partial file is removed.
///
/// # Errors
/// [`StorageError::Volume`] naming `field` and `volume` when there is not
/// enough room; [`StorageError::Io`] when writing fails (ENOSPC on a full
/// file system included).
pub fn create_image(
    field: &str,
    volume: &str,
    image: &Path,
    requested: u64,
    policy: SpacePolicy,
    room_of: &dyn Fn(&Path) -> io::Result<u64>,
) -> Result<u64, StorageError> {
    let dir = image
        .parent()
        .ok_or_else(|| volume_err(field, format!("{} has no directory", image.display())))?;
    let free = room_of(dir).map_err(io_err(field, "statvfs", dir))?;
    let size = size_to_create(volume, requested, free, policy.less_pvc_space_toleration)
        .map_err(|e| volume_err(field, e.to_string()))?;
    let mut tmp = image.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = std::path::PathBuf::from(tmp);
    // A partial file from an interrupted start is ours: start afresh (a
    // link there is removed, never followed).
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(field, "remove", &tmp)(e)),
    }
    let res = (|| -> io::Result<()> {
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o660)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all_at(&[0], size - 1)?;
        f.sync_all()?;
        drop(f);
        nix::fcntl::renameat2(
            None,
            &tmp,
            None,
            image,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(io::Error::from)
    })();
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(match e.raw_os_error() {
            Some(libc::ENOSPC) => volume_err(
                field,
                format!(
                    "unable to create the disk image of volume {volume}: {} has no space left for {size} B",
                    dir.display()
                ),
            ),
            _ => io_err(field, "create", image)(e),
        });
    }
    tracing::info!(volume, image = %image.display(), bytes = size, "created a sparse raw disk image");
    Ok(size)
}
