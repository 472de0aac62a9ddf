//! The files of an access credential's Secret, as KubeVirt's launcher reads
//! them for the guest agent (`access_credentials.go`
//! `addAccessCredential`): every entry of the mounted directory
//! (`/var/run/kubevirt-private/secret/<secretName>-access-cred/` in a pod,
//! the `--access-credential` directory standalone) except directories and
//! Kubernetes' `..` entries (`..data` and the timestamped directory of its
//! atomic writer), in name order.
//!
//! Bounds KubeVirt does not have: a file larger than [`MAX_SECRET_FILE`]
//! (a Kubernetes Secret holds at most 1 MiB in all) and a directory of more
//! than [`MAX_SECRET_ENTRIES`] entries are refused with KubeVirt's words
//! for a failed read. The atomic writer's entries are symbolic links into
//! `..data`; a link is followed only when it stays inside the directory,
//! and the file is then opened without following links.

use std::fs;
use std::path::{Path, PathBuf};

use crate::files::{read_limited, Limited};

/// Largest file read from a credential's secret (Kubernetes' limit of a
/// whole Secret, `MaxSecretSize`).
pub const MAX_SECRET_FILE: u64 = 1 << 20;
/// Most directory entries looked at in a credential's secret directory.
pub const MAX_SECRET_ENTRIES: usize = 1024;

/// One file of a secret: its name (a key of the Secret) and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretFile {
    /// The entry's name.
    pub name: String,
    /// Its contents, at most [`MAX_SECRET_FILE`] bytes.
    pub data: Vec<u8>,
}

/// Why a secret directory could not be read, in KubeVirt's words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The directory could not be listed.
    #[error("error occurred while reading the list of secrets files from the base directory {dir}: {reason}")]
    List {
        /// The secret's directory.
        dir: String,
        /// Why.
        reason: String,
    },
    /// A file could not be read (or is beyond a bound).
    #[error("error occurred while reading the access credential secret file [{file}]: {reason}")]
    File {
        /// The file's path in the directory.
        file: String,
        /// Why.
        reason: String,
    },
}

/// The files of the secret directory `dir` (see the module's
/// documentation).
///
/// # Errors
/// [`SecretError`]: the directory cannot be listed or has too many
/// entries; a file cannot be read, leads outside the directory, is not a
/// regular file or is larger than [`MAX_SECRET_FILE`].
pub fn read_secret_dir(dir: &Path) -> Result<Vec<SecretFile>, SecretError> {
    let list_err = |reason: String| SecretError::List {
        dir: dir.display().to_string(),
        reason,
    };
    let root = fs::canonicalize(dir).map_err(|e| list_err(e.to_string()))?;
    let mut entries = Vec::new();
    for e in fs::read_dir(&root).map_err(|e| list_err(e.to_string()))? {
        let e = e.map_err(|e| list_err(e.to_string()))?;
        if entries.len() == MAX_SECRET_ENTRIES {
            return Err(list_err(format!("more than {MAX_SECRET_ENTRIES} entries")));
        }
        entries.push(e);
    }
    entries.sort_by_key(fs::DirEntry::file_name);
    let mut out = Vec::new();
    for e in entries {
        let name = e.file_name();
        if name.as_encoded_bytes().starts_with(b"..") {
            continue;
        }
        let path = dir.join(&name);
        let file_err = |reason: String| SecretError::File {
            file: path.display().to_string(),
            reason,
        };
        let ft = e.file_type().map_err(|e| file_err(e.to_string()))?;
        if ft.is_dir() {
            continue;
        }
        let real = inside(&root, &e.path()).map_err(file_err)?;
        let data = match read_limited(&real, MAX_SECRET_FILE) {
            Ok(Limited::Data(d)) => d,
            Ok(Limited::NotRegular) => return Err(file_err("not a regular file".into())),
            Ok(Limited::TooLarge) => {
                return Err(file_err(format!(
                    "larger than {MAX_SECRET_FILE} bytes, the most a Kubernetes Secret holds"
                )))
            }
            Err((op, e)) => return Err(file_err(format!("{op}: {e}"))),
        };
        out.push(SecretFile {
            name: name.to_string_lossy().into_owned(),
            data,
        });
    }
    Ok(out)
}

/// `p` with its links resolved, required to stay inside `root`
/// (canonical).
fn inside(root: &Path, p: &Path) -> Result<PathBuf, String> {
    let real = fs::canonicalize(p).map_err(|e| e.to_string())?;
    if real.starts_with(root) && real != root {
        Ok(real)
    } else {
        Err(format!(
            "leads to {}, outside the secret's directory; refusing to follow it",
            real.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    /// Kubernetes' atomic-writer layout: `..<stamp>/` holds the files,
    /// `..data` links to it, and each key links to `..data/<key>`.
    fn atomic_writer(dir: &Path, files: &[(&str, &[u8])]) {
        let stamp = dir.join("..2026_12_02_11_00_00.1");
        fs::create_dir(&stamp).unwrap();
        for (k, v) in files {
            fs::write(stamp.join(k), v).unwrap();
            symlink(format!("..data/{k}"), dir.join(k)).unwrap();
        }
        symlink("..2026_12_02_11_00_00.1", dir.join("..data")).unwrap();
    }

    #[test]
    fn reads_keys_in_name_order_through_the_atomic_writer_links() {
        let t = tempfile::tempdir().unwrap();
        atomic_writer(t.path(), &[("b", b"two"), ("a", b"one")]);
        fs::create_dir(t.path().join("sub")).unwrap();
        let files = read_secret_dir(t.path()).unwrap();
        assert_eq!(
            files,
            vec![
                SecretFile {
                    name: "a".into(),
                    data: b"one".to_vec()
                },
                SecretFile {
                    name: "b".into(),
                    data: b"two".to_vec()
                },
            ]
        );
        // An empty secret is no error.
        let e = tempfile::tempdir().unwrap();
        assert_eq!(read_secret_dir(e.path()).unwrap(), vec![]);
    }

    #[test]
    fn refuses_links_out_large_files_and_fifos_in_kubevirts_words() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("shadow"), b"x").unwrap();
        symlink(outside.path().join("shadow"), t.path().join("k")).unwrap();
        let e = read_secret_dir(t.path()).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "error occurred while reading the access credential secret file [{}/k]: leads to ",
                t.path().display()
            )),
            "{e}"
        );
        fs::remove_file(t.path().join("k")).unwrap();
        fs::write(t.path().join("big"), vec![b'a'; 10 << 20]).unwrap();
        assert_eq!(
            read_secret_dir(t.path()).unwrap_err().to_string(),
            format!("error occurred while reading the access credential secret file [{}/big]: larger than 1048576 bytes, the most a Kubernetes Secret holds", t.path().display())
        );
        fs::remove_file(t.path().join("big")).unwrap();
        nix::unistd::mkfifo(&t.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_secret_dir(t.path())
            .unwrap_err()
            .to_string()
            .ends_with("/fifo]: not a regular file"));
        let gone = t.path().join("gone");
        assert!(read_secret_dir(&gone)
            .unwrap_err()
            .to_string()
            .starts_with(&format!(
            "error occurred while reading the list of secrets files from the base directory {}: ",
            gone.display()
        )));
    }
}
