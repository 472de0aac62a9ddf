//! The private directory a dump is written into, next to `dumpPath`, and
//! the rename of the finished file onto `dumpPath`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::path::regular_or_absent;
use super::DumpFn;

/// The prefix of the private directory a dump is written into, made anew
/// in the target directory for each dump (`<prefix><random>`, mode 0700).
///
/// Why: libvirt opens the dump file by name with `O_CREAT|O_TRUNC`,
/// following links, some time after the path was checked. Had it been
/// given `dumpPath` itself, a symbolic link planted there between the
/// check and the open, or a hard link to a file elsewhere already there,
/// would be written through, overwriting that other file. A directory
/// created just now (`mkdtemp`: it did not exist, so nobody can have
/// planted anything in it, and nobody else may enter it) holds only what
/// libvirt writes. The finished file is then `rename`d onto `dumpPath`:
/// within one file system (the same directory) that is atomic and copies
/// nothing, and it replaces whatever entry is at `dumpPath` (a link
/// included) instead of writing into its target. A directory that cannot
/// hold one (procfs, sysfs: `mkdtemp` fails there) gets no dump at all.
/// Such directories left by a crashed dump are removed before the next
/// dump into that directory ([`remove_stale_tmp_dirs`](super::remove_stale_tmp_dirs)).
pub const TMP_DIR_PREFIX: &str = ".virt-launcher-dump.";

/// Dumps with `dump` into a fresh private directory in `path`'s directory
/// and renames the file onto `path` (why: [`TMP_DIR_PREFIX`]). The
/// directory goes in any case, with a partial file in it.
///
/// Both directories are held open from the start and used only through
/// their descriptors: whoever may write `path`'s directory can rename the
/// private directory away and put one of their own, with links in it, under
/// its name. libvirt, which opens the dump file by path, is therefore given
/// the path through this process's descriptor of the private directory
/// (`/proc/<pid>/fd/<n>/<file>`), which no rename can redirect, and the
/// finished file is renamed with `renameat` between the two descriptors.
pub(super) fn dump_via_private_dir(path: &Path, dump: DumpFn) -> Result<(), String> {
    use nix::fcntl::{renameat, AtFlags};
    use nix::sys::stat::{fstat, fstatat, SFlag};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

    let in_path = |why: String| format!("dumpPath: {:?} {why}", path);
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .ok_or_else(|| in_path("names no file".into()))?;
    let open_dir = |p: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags((nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_NOFOLLOW).bits())
            .open(p)
    };
    let dir_fd = open_dir(dir).map_err(|e| in_path(format!("cannot open its directory: {e}")))?;
    let tmp = tempfile::Builder::new()
        .prefix(TMP_DIR_PREFIX)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(dir)
        .map_err(|e| in_path(format!("cannot get a directory to dump into: {e}")))?;
    let tmp_fd = open_dir(tmp.path())
        .map_err(|e| in_path(format!("cannot open the directory to dump into: {e}")))?;
    // What was opened must be the directory just made: ours, 0700, on the
    // same file system as the target (else someone swapped it in between).
    let (st, dst) = (
        fstat(tmp_fd.as_raw_fd()).map_err(|e| in_path(e.to_string()))?,
        fstat(dir_fd.as_raw_fd()).map_err(|e| in_path(e.to_string()))?,
    );
    if st.st_uid != nix::unistd::geteuid().as_raw()
        || st.st_mode & 0o7777 != 0o700
        || st.st_dev != dst.st_dev
    {
        return Err(in_path(
            "private dump directory was replaced before use (refused)".into(),
        ));
    }
    let via = PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        tmp_fd.as_raw_fd()
    ));
    // The path must lead to that very directory (a /proc of another PID
    // namespace would not).
    match std::fs::metadata(&via) {
        Ok(m) if m.ino() == st.st_ino && m.dev() == st.st_dev => {}
        _ => {
            return Err(in_path(format!(
                "cannot reach the private dump directory through {}",
                via.display()
            )))
        }
    }
    dump(&via.join(name)).map_err(|e| e.to_string())?;
    match fstatat(Some(tmp_fd.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(m) if SFlag::from_bits_truncate(m.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG => {}
        Ok(_) => return Err(in_path("dump is not a regular file".into())),
        Err(e) => return Err(in_path(format!("dump is missing: {e}"))),
    }
    // A link planted at `path` meanwhile would only be replaced, never
    // written through; it is refused all the same, as at the request.
    regular_or_absent(path).map_err(in_path)?;
    renameat(
        Some(tmp_fd.as_raw_fd()),
        name,
        Some(dir_fd.as_raw_fd()),
        name,
    )
    .map_err(|e| in_path(format!("cannot be written: {e}")))?;
    drop(tmp_fd);
    if let Err(e) = tmp.close() {
        tracing::warn!("failed to remove the memory dump directory: {e}");
    }
    Ok(())
}
