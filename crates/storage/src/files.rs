//! File system steps every volume preparation shares: paths below a
//! configured root created or walked without following links, images
//! finished with their mode and owner, O_DIRECT and allocation probes.

use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::{io_err, volume_err, StorageError};

/// True when `p` is a regular file, false when absent; an error when it is
/// a symlink or anything else.
pub(crate) fn exists_regular(field: &str, p: &Path) -> Result<bool, StorageError> {
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
pub(crate) fn ensure_parent_under(
    field: &str,
    root: &str,
    file: &Path,
) -> Result<(), StorageError> {
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
pub(crate) fn walk_dirs_under(
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

/// Checks that the directory of `image`, a mounted claim below `root`, is
/// a real directory reached without symbolic links. Unlike
/// [`ensure_parent_under`] it creates nothing: a missing directory means
/// the claim is not mounted.
pub(crate) fn claim_dir_under(field: &str, root: &str, image: &Path) -> Result<(), StorageError> {
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

/// Reads regular file `p` of at most `max` bytes, checked on the opened
/// descriptor, not by an earlier stat of the path: opened with
/// `O_NOFOLLOW|O_NONBLOCK` (a link or FIFO swapped in since is refused, a
/// FIFO never blocks), its type checked with `fstat`, and the read stopped
/// after `max` bytes however much the file grew (issue 19).
///
/// # Errors
/// [`StorageError`] naming `field`: open or read failure, not a regular
/// file, larger than `max`.
pub(crate) fn read_bounded(field: &str, p: &Path, max: u64) -> Result<Vec<u8>, StorageError> {
    match read_limited(p, max).map_err(|(op, e)| io_err(field, op, p)(e))? {
        Limited::Data(data) => Ok(data),
        Limited::NotRegular => Err(volume_err(
            field,
            format!("{} is not a regular file", p.display()),
        )),
        Limited::TooLarge => Err(volume_err(
            field,
            format!("{} has more than the {max} bytes accepted", p.display()),
        )),
    }
}

/// What [`read_limited`] found.
pub(crate) enum Limited {
    /// The whole file, at most the limit.
    Data(Vec<u8>),
    /// Not a regular file (a FIFO, a device, a directory).
    NotRegular,
    /// More bytes than the limit (only limit + 1 were read).
    TooLarge,
}

/// The rule of [`read_bounded`] without a field: opened
/// `O_NOFOLLOW|O_NONBLOCK`, checked with `fstat`, at most `max + 1` bytes
/// read. The error carries the step that failed.
pub(crate) fn read_limited(p: &Path, max: u64) -> Result<Limited, (&'static str, io::Error)> {
    use std::io::Read;
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| ("open", e))?;
    let meta = f.metadata().map_err(|e| ("stat", e))?;
    if !meta.is_file() {
        return Ok(Limited::NotRegular);
    }
    let mut data = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| ("read", e))?;
    if data.len() as u64 > max {
        return Ok(Limited::TooLarge);
    }
    Ok(Limited::Data(data))
}

/// Gives a file the launcher created its `mode` and, when QEMU runs
/// unprivileged, its owner, on a descriptor opened without following a
/// link: whoever else can write the directory (a shared claim's other
/// pods) cannot swap in a link between the file's creation and this step
/// and have the launcher chmod or chown what it names.
///
/// # Errors
/// [`StorageError`] at `field` naming the file: a link or no regular file
/// at `p`, or the I/O error.
pub(crate) fn finish_file(
    field: &str,
    p: &Path,
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), StorageError> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)
        .map_err(io_err(field, "open", p))?;
    let meta = f.metadata().map_err(io_err(field, "stat", p))?;
    if !meta.is_file() {
        return Err(volume_err(
            field,
            format!("{} is not a regular file", p.display()),
        ));
    }
    f.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io_err(field, "chmod", p))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::fchown(&f, Some(uid), Some(gid)).map_err(io_err(field, "chown", p))?;
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

/// Whether the image at `p` is fully allocated: KubeVirt's
/// `IsPreAllocated` (v1.6.6 `converter.go`), `qemu-img info`'s virtual size
/// at most its actual size, i.e. the guest-visible size of the image (a
/// qcow2 image's virtual size, a raw file's length) at most the bytes
/// allocated to the file (`st_blocks` × 512). A fresh qcow2 overlay is a
/// small, fully allocated file standing for a much larger disk: not
/// preallocated. False when `p` cannot be read, is a link or is not a
/// regular file.
pub fn preallocated(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(f) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)
    else {
        return false;
    };
    let Ok(m) = f.metadata() else {
        return false;
    };
    m.is_file()
        && virtual_size(&f, m.len()).is_some_and(|size| m.blocks().saturating_mul(512) >= size)
}

/// The guest-visible size of the image open as `f` (`len` bytes long): a
/// qcow2 image's virtual size, else (raw) its length; `None` when the
/// header cannot be read. Reads the one qcow2 header field it needs (magic
/// `QFI\xfb` at 0, big-endian u64 size at 24: QEMU's `docs/interop/qcow2.txt`)
/// rather than running `qemu-img info` for every disk at every sync, as
/// KubeVirt does; the formats KubeVirt's disks take are raw and qcow2.
fn virtual_size(f: &fs::File, len: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut header = [0u8; 32];
    match f.read_exact_at(&mut header, 0) {
        Ok(()) if header[..4] == *b"QFI\xfb" => {
            Some(u64::from_be_bytes(header[24..32].try_into().ok()?))
        }
        Ok(()) => Some(len),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Some(len),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{finish_file, read_bounded};
    use std::os::unix::fs::PermissionsExt;

    /// A link swapped in for an image before its mode and owner are set
    /// (another pod writing a shared claim's directory) is refused: the
    /// file it names keeps its mode (a chmod by path followed it).
    #[test]
    fn finish_file_never_follows_a_link() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"x").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let image = d.path().join("disk.img");
        std::os::unix::fs::symlink(&victim, &image).unwrap();
        let e = finish_file("spec.volumes[0]", &image, 0o666, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("disk.img"), "{e}");
        let mode = std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the link's target was changed");
        // A directory is no image either; a regular file gets its mode.
        let dir = d.path().join("dir");
        std::fs::create_dir(&dir).unwrap();
        let e = finish_file("v", &dir, 0o640, None).unwrap_err().to_string();
        assert!(e.ends_with("dir is not a regular file"), "{e}");
        let f = d.path().join("real.img");
        std::fs::write(&f, b"").unwrap();
        finish_file("v", &f, 0o640, None).unwrap();
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    /// Issue 19: files were read by path after a stat (a FIFO or link
    /// swapped in between hangs or redirects the read, a file that grew is
    /// read whole). The check is on the opened descriptor.
    #[test]
    fn issue19_reads_are_checked_on_the_descriptor_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("data");
        std::fs::write(&f, b"12345678").unwrap();
        assert_eq!(read_bounded("f", &f, 8).unwrap(), b"12345678");
        let e = read_bounded("f", &f, 7).unwrap_err().to_string();
        assert!(
            e.ends_with("data has more than the 7 bytes accepted"),
            "{e}"
        );
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_bounded("f", &p, 8).map_err(|e| e.to_string()));
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a FIFO must not block the read")
            .unwrap_err();
        assert!(e.ends_with("fifo is not a regular file"), "{e}");
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert!(
            read_bounded("f", &link, 8).is_err(),
            "a link is not followed"
        );
    }
}
