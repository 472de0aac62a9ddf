//! The downwardMetrics volume's disk: a vhostmd metrics image
//! (kubevirt-facts §5.4; KubeVirt v1.6.6 `pkg/downwardmetrics/vhostmd`).
//!
//! vhostmd's disk format is a 256 KiB file: a 16-byte big-endian header
//! (`mvbd` signature, a lock flag, the byte sum of the body, the body
//! length) followed by an XML `<metrics>` body. The launcher creates it
//! with an empty body; virt-handler rewrites the body with the node's and
//! the VM's metrics, and the guest's `vm-dump-metrics` reads it. The format
//! is four integers and a string, so it is written here directly: no Rust
//! crate implements vhostmd.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::{io_err, StorageError};

/// Size of the image (vhostmd's `262144`).
pub const FILE_SIZE: u64 = 256 << 10;
/// The header's signature.
pub const SIGNATURE: &[u8; 4] = b"mvbd";
/// The body KubeVirt writes for no metrics: Go's `xml.MarshalIndent` of
/// an empty `Metrics`, plus the newline it appends for `vm-dump-metrics`.
pub const EMPTY_BODY: &[u8] = b"<metrics></metrics>\n";

/// The image bytes before the zero padding: header, then `body` (a body
/// longer than `i32::MAX` bytes, which never occurs, gets that length).
pub fn image_prefix(body: &[u8]) -> Vec<u8> {
    // Go sums the bytes into an int32 (wrapping).
    let checksum = body
        .iter()
        .fold(0i32, |acc, b| acc.wrapping_add(i32::from(*b)));
    let length = i32::try_from(body.len()).unwrap_or(i32::MAX);
    let mut out = Vec::with_capacity(16 + body.len());
    out.extend_from_slice(SIGNATURE);
    out.extend_from_slice(&0i32.to_be_bytes()); // unlocked
    out.extend_from_slice(&checksum.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Creates the metrics image at `path` (sparse, [`FILE_SIZE`] bytes, an
/// empty, unlocked body) unless a regular file is already there (virt-handler
/// may have filled it). Written under a temporary name, then renamed, so a
/// half-written image is never left behind.
///
/// # Errors
/// [`StorageError::Io`] naming `field`.
pub fn create(field: &str, path: &Path) -> Result<(), StorageError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => return Ok(()),
        Ok(_) => {
            return Err(crate::volume_err(
                field,
                format!("{} exists and is not a regular file", path.display()),
            ))
        }
        Err(_) => {}
    }
    let tmp = path.with_extension("tmp");
    let _ = fs::remove_file(&tmp);
    let res = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(io_err(field, "create", &tmp))?;
        f.set_len(FILE_SIZE).map_err(io_err(field, "size", &tmp))?;
        f.write_all(&image_prefix(EMPTY_BODY))
            .map_err(io_err(field, "write", &tmp))?;
        f.sync_all().map_err(io_err(field, "sync", &tmp))?;
        fs::rename(&tmp, path).map_err(io_err(field, "rename", &tmp))
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_big_endian_with_the_body_sum_and_length() {
        let p = image_prefix(EMPTY_BODY);
        let sum: i32 = EMPTY_BODY.iter().map(|b| i32::from(*b)).sum();
        assert_eq!(&p[..4], b"mvbd");
        assert_eq!(&p[4..8], &[0, 0, 0, 0]);
        assert_eq!(i32::from_be_bytes([p[8], p[9], p[10], p[11]]), sum);
        assert_eq!(i32::from_be_bytes([p[12], p[13], p[14], p[15]]), 20);
        assert_eq!(&p[16..], EMPTY_BODY);
    }

    #[test]
    fn created_image_is_sparse_256_kib_and_kept_when_present() {
        let d = tempfile::tempdir().unwrap();
        let img = d.path().join("vhostmd0");
        create("spec.volumes[0].downwardMetrics", &img).unwrap();
        let bytes = fs::read(&img).unwrap();
        assert_eq!(bytes.len() as u64, FILE_SIZE);
        assert_eq!(&bytes[..36], &image_prefix(EMPTY_BODY)[..]);
        assert!(bytes[36..].iter().all(|b| *b == 0));
        assert!(!d.path().join("vhostmd0.tmp").exists());
        // An image virt-handler already filled is not reset.
        fs::write(&img, b"filled").unwrap();
        create("f", &img).unwrap();
        assert_eq!(fs::read(&img).unwrap(), b"filled");
        // A link there is refused, never followed.
        let link = d.path().join("link");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        assert!(create("f", &link).is_err());
    }
}
