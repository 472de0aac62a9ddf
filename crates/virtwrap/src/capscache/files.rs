//! File access of the capabilities cache: every file is opened without
//! following a symbolic link (`O_NOFOLLOW`, `O_NONBLOCK`), checked to be a
//! regular file by `fstat` and read up to a bound; hashes are SHA-256.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use sha2::{Digest, Sha256};

/// Opens `path` for reading: a regular file, never through a symbolic
/// link as its last component.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

fn libc_flags() -> i32 {
    nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits()
}

/// Reads all of `path` (a regular file, see [`open_regular`]) when it has at
/// most `max` bytes.
pub(crate) fn read_bounded(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = open_regular(path)?;
    let len = f.metadata()?.len();
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{len} bytes, more than the {max} allowed"),
        ));
    }
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    f.take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("grew past the {max} bytes allowed"),
        ));
    }
    Ok(buf)
}

/// SHA-256 of `bytes`, lower-case hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(d: &[u8]) -> String {
    use std::fmt::Write;
    d.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A hashed file and the times libvirt reads from it, taken from the open
/// file before and after hashing (a file changed meanwhile is an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// `st_ctime`, seconds.
    pub ctime: i64,
}

/// SHA-256 of the regular file `path` (at most [`super::bounds::HASHED_BYTES`])
/// and its ctime.
pub(crate) fn hash_file(path: &Path) -> io::Result<(String, Stamp)> {
    let mut f = open_regular(path)?;
    let before = f.metadata()?;
    if before.len() > super::bounds::HASHED_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} bytes, too large to hash", before.len()),
        ));
    }
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > super::bounds::HASHED_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "grew while hashed",
            ));
        }
        h.update(&buf[..n]);
    }
    let after = f.metadata()?;
    if (before.ctime(), before.ctime_nsec(), before.len())
        != (after.ctime(), after.ctime_nsec(), after.len())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "changed while it was hashed",
        ));
    }
    Ok((
        hex(&h.finalize()),
        Stamp {
            ctime: after.ctime(),
        },
    ))
}

/// The regular files directly in `dir`, sorted by name (symbolic links and
/// other kinds are left out), at most [`super::bounds::FILES`].
pub(crate) fn regular_files(dir: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if !e.file_type()?.is_file() {
            continue;
        }
        let Some(name) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        names.push(name);
        if names.len() > super::bounds::FILES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("more than {} files", super::bounds::FILES),
            ));
        }
    }
    names.sort();
    Ok(names)
}

/// `lstat` of a directory that must not be a symbolic link.
pub(crate) fn dir_meta(dir: &Path) -> io::Result<std::fs::Metadata> {
    let m = std::fs::symlink_metadata(dir)?;
    if !m.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a directory (or a symbolic link)",
        ));
    }
    Ok(m)
}

/// The text of the one `<name>...</name>` element of `xml`, which must
/// occur exactly once.
pub(crate) fn element<'a>(xml: &'a str, name: &str) -> Result<&'a str, String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let mut it = xml.match_indices(&open);
    let (at, _) = it.next().ok_or_else(|| format!("no <{name}>"))?;
    if it.next().is_some() {
        return Err(format!("more than one <{name}>"));
    }
    let start = at + open.len();
    let len = xml[start..]
        .find(&close)
        .ok_or_else(|| format!("<{name}> is not closed"))?;
    Ok(&xml[start..start + len])
}

/// The number in the one `<name>` element.
pub(crate) fn number(xml: &str, name: &str) -> Result<i64, String> {
    let t = element(xml, name)?;
    t.trim()
        .parse()
        .map_err(|_| format!("<{name}> is not a number: {:?}", api::text::cut(t, 40)))
}

/// `xml` with the number in its one `<name>` element replaced by `value`.
pub(crate) fn set_number(xml: &str, name: &str, value: i64) -> Result<String, String> {
    number(xml, name)?;
    let open = format!("<{name}>");
    let at = xml.find(&open).unwrap_or(0) + open.len();
    let end = at + xml[at..].find(&format!("</{name}>")).unwrap_or(0);
    Ok(format!("{}{value}{}", &xml[..at], &xml[end..]))
}

/// The QEMU binary `emulator` names: itself, or, when it is a symbolic
/// link, the file its content names (relative to its directory), resolved
/// this one level only: (the link's content, the binary's path).
pub(crate) fn emulator_binary(emulator: &Path) -> io::Result<(Option<String>, std::path::PathBuf)> {
    let m = std::fs::symlink_metadata(emulator)?;
    if !m.file_type().is_symlink() {
        return Ok((None, emulator.to_owned()));
    }
    let target = std::fs::read_link(emulator)?;
    let text = target
        .to_str()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "link is not UTF-8"))?
        .to_owned();
    let dir = emulator.parent().unwrap_or(Path::new("/"));
    Ok((Some(text), dir.join(target)))
}

/// What [`hash_file`] returns.
pub(crate) type Hashed = io::Result<(String, Stamp)>;

/// [`hash_file`] of each of `paths`, on up to as many threads as the host
/// has CPUs (QEMU binaries are tens of MB each); results in order.
pub(crate) fn hash_files(paths: &[std::path::PathBuf]) -> Vec<Hashed> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(paths.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Hashed>>> = Mutex::new(paths.iter().map(|_| None).collect());
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(p) = paths.get(i) else { break };
        let r = hash_file(p);
        results
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(r);
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(io::Error::other("not hashed"))))
        .collect()
}
