//! Seeding libvirt's cache from a shipped one: every hash and fact is
//! checked first (what all files share decides for all, each binary's own
//! facts for its file), then each matching file is written with this file
//! system's times under a name libvirt does not have yet.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::facts::{is_native, HostNow, Layout};
use super::files::{self, set_number};
use super::record::{file_name, libvirt_hashes, module_dir, xml_facts};
use super::{bounds, FileHash, Manifest, FORMAT, MANIFEST};

/// Why the shipped cache was not used (libvirt then probes, as without
/// one).
#[derive(Debug, thiserror::Error)]
pub enum NotUsed {
    /// There is no shipped cache (no manifest in the directory).
    #[error("no shipped capabilities cache at {0}")]
    Absent(PathBuf),
    /// A hash, fact or file does not match, or the cache cannot be read or
    /// written; the text says which.
    #[error("{0}")]
    Refused(String),
}

fn refused(s: impl Into<String>) -> NotUsed {
    NotUsed::Refused(s.into())
}

/// The files [`seed`] wrote, to tell later whether libvirt kept them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeded {
    /// libvirt's capabilities directory.
    pub dir: PathBuf,
    /// (file name, inode, mtime in ns) of each file written.
    pub files: Vec<(String, u64, i128)>,
    /// Files left alone because libvirt's cache already had them.
    pub already_there: Vec<String>,
    /// Why each shipped file not written does not match (libvirt probes
    /// its binary).
    pub skipped: Vec<String>,
}

impl Seeded {
    /// The seeded files libvirt has since removed or rewritten (it found
    /// them outdated, or could not load them, and probed QEMU itself).
    pub fn replaced(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(name, ino, mtime)| {
                std::fs::symlink_metadata(self.dir.join(name))
                    .map(|m| (m.ino(), mtime_ns(&m)) != (*ino, *mtime))
                    .unwrap_or(true)
            })
            .map(|(name, _, _)| name.clone())
            .collect()
    }
}

fn mtime_ns(m: &std::fs::Metadata) -> i128 {
    i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
}

/// Checks `want` (recorded) against `got` (this system), by path.
fn same_files(what: &str, want: &[FileHash], got: &[FileHash]) -> Result<(), NotUsed> {
    let paths = |v: &[FileHash]| v.iter().map(|f| f.path.clone()).collect::<BTreeSet<_>>();
    if paths(want) != paths(got) {
        let (w, g) = (paths(want), paths(got));
        let missing: Vec<_> = w.difference(&g).collect();
        let extra: Vec<_> = g.difference(&w).collect();
        return Err(refused(format!(
            "{what}: other files than at build (missing {missing:?}, new {extra:?})"
        )));
    }
    for w in want {
        if !got.contains(w) {
            return Err(refused(format!(
                "{what}: {} differs from the build's (SHA-256)",
                w.path
            )));
        }
    }
    Ok(())
}

/// The checked manifest of `shipped`.
fn manifest(shipped: &Path) -> Result<Manifest, NotUsed> {
    let path = shipped.join(MANIFEST);
    let bytes = match files::read_bounded(&path, bounds::MANIFEST_BYTES) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(NotUsed::Absent(shipped.to_owned()))
        }
        r => r.map_err(|e| refused(format!("{}: {e}", path.display())))?,
    };
    let m: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| refused(format!("{}: {e}", path.display())))?;
    if m.format != FORMAT {
        return Err(refused(format!(
            "{}: format {}, this launcher reads {FORMAT}",
            path.display(),
            m.format
        )));
    }
    if m.entries.is_empty() || m.entries.len() > bounds::ENTRIES {
        return Err(refused(format!(
            "{}: {} entries (1 to {} allowed)",
            path.display(),
            m.entries.len(),
            bounds::ENTRIES
        )));
    }
    Ok(m)
}

/// What [`plan`] found: the files to write and the ones that do not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// (name, content with this file system's `qemuctime`, `selfctime`
    /// and `qemumoddirmtime`).
    pub files: Vec<(String, String)>,
    /// Why each other file is not used (libvirt probes its binary).
    pub skipped: Vec<String>,
}

/// Checks every hash and fact of the shipped cache in `shipped` against
/// this system (`layout`, `host`). What all files depend on (libvirt's
/// version, daemon, modules and libraries, QEMU's module directory) must
/// match for any file to be used; each file's own facts (its XML, its QEMU
/// binary, KVM and the host) decide for that file alone: libvirt keeps one
/// file per binary and probes a binary whose file is missing.
///
/// # Errors
/// [`NotUsed`]: no shipped cache, a shared mismatch, or no file matches
/// (naming each mismatch).
pub fn plan(shipped: &Path, layout: &Layout, host: &HostNow) -> Result<Plan, NotUsed> {
    let m = manifest(shipped)?;
    if let Some(v) = host.libvirt_version.filter(|v| *v != m.libvirt_version) {
        return Err(refused(format!(
            "libvirt {v} runs here, the cache is libvirt {}'s",
            m.libvirt_version
        )));
    }
    let rec = |e: super::RecordError| refused(e.to_string());
    let (daemon, self_modules, others, self_ctime) = libvirt_hashes(layout).map_err(rec)?;
    same_files(
        "the libvirt daemon",
        std::slice::from_ref(&m.daemon),
        &[daemon],
    )?;
    same_files(
        "libvirt's modules loaded at start",
        &m.self_modules,
        &self_modules,
    )?;
    same_files("libvirt's files", &m.libvirt_files, &others)?;
    let moddir = module_dir(&layout.qemu_module_dir).map_err(rec)?;
    let moddir_mtime = match (&m.qemu_module_dir, &moddir) {
        (None, None) => None,
        (Some(w), Some((g, mtime))) if w.path == g.path => {
            same_files("QEMU's module directory", &w.files, &g.files)?;
            Some(*mtime)
        }
        _ => {
            return Err(refused(format!(
                "QEMU's module directory {} is not as at build",
                layout.qemu_module_dir.display()
            )))
        }
    };
    // The binaries, hashed side by side (the bulk of the time); a link that
    // differs from the build's is not followed.
    let resolved: Vec<Result<PathBuf, String>> = m
        .entries
        .iter()
        .map(|e| match files::emulator_binary(Path::new(&e.emulator)) {
            Ok((link, binary)) if link == e.link => Ok(binary),
            Ok((link, _)) => Err(format!(
                "a symbolic link to {link:?} here, {:?} at build",
                e.link
            )),
            Err(x) => Err(x.to_string()),
        })
        .collect();
    let to_hash: Vec<PathBuf> = resolved.iter().flatten().cloned().collect();
    let mut hashes = files::hash_files(&to_hash).into_iter();
    let shared = Shared {
        shipped,
        manifest: &m,
        host,
        self_ctime,
        moddir_mtime,
    };
    let mut plan = Plan {
        files: Vec::new(),
        skipped: Vec::new(),
    };
    for (e, binary) in m.entries.iter().zip(resolved) {
        let hashed = match binary {
            Ok(_) => hashes
                .next()
                .unwrap_or_else(|| Err(io::Error::other("not hashed"))),
            Err(why) => Err(io::Error::other(why)),
        };
        match shared.entry(e, hashed) {
            Ok(text) => plan.files.push((e.file.clone(), text)),
            Err(why) => plan
                .skipped
                .push(format!("{} ({}): {why}", e.file, e.emulator)),
        }
    }
    if plan.files.is_empty() {
        return Err(refused(plan.skipped.join("; ")));
    }
    Ok(plan)
}

/// What every entry's check needs.
struct Shared<'a> {
    shipped: &'a Path,
    manifest: &'a Manifest,
    host: &'a HostNow,
    self_ctime: i64,
    moddir_mtime: Option<i64>,
}

impl Shared<'_> {
    /// One entry's checks (`hashed`: its binary's hash and ctime); its
    /// file's content with this system's times.
    fn entry(&self, e: &super::Entry, hashed: files::Hashed) -> Result<String, String> {
        if e.file != file_name(&e.emulator) {
            return Err("not libvirt's file name for its emulator".into());
        }
        let path = self.shipped.join(&e.file);
        let bytes = files::read_bounded(&path, bounds::XML_BYTES).map_err(|x| x.to_string())?;
        if files::sha256_hex(&bytes) != e.xml_sha256 {
            return Err(
                "the shipped file differs from the manifest's (corrupt or truncated)".into(),
            );
        }
        let xml = std::str::from_utf8(&bytes).map_err(|_| "not UTF-8".to_owned())?;
        let f = xml_facts(xml)?;
        if f.emulator != e.emulator
            || f.arch != e.arch
            || f.kvm != e.kvm
            || f.self_version != self.manifest.libvirt_version
        {
            return Err("the file's facts differ from the manifest's".into());
        }
        let (sha, stamp) = hashed.map_err(|x| x.to_string())?;
        if sha != e.emulator_sha256 {
            return Err("the QEMU binary differs from the build's (SHA-256)".into());
        }
        if is_native(&self.host.arch, &e.arch) {
            if e.kvm != self.host.kvm_usable {
                return Err(format!(
                    "probed {} KVM, and /dev/kvm is {}usable here",
                    if e.kvm { "with" } else { "without" },
                    if self.host.kvm_usable { "" } else { "not " }
                ));
            }
            if e.kvm && self.host.fingerprint != self.manifest.host {
                return Err("probed with KVM on another kernel or CPU than this host's".into());
            }
        }
        let mut text = set_number(xml, "qemuctime", stamp.ctime)?;
        text = set_number(&text, "selfctime", self.self_ctime)?;
        match (text.contains("<qemumoddirmtime>"), self.moddir_mtime) {
            (true, Some(t)) => text = set_number(&text, "qemumoddirmtime", t)?,
            (false, None) => {}
            _ => return Err("<qemumoddirmtime> does not match the module directory".into()),
        }
        Ok(text)
    }
}

/// Makes `rel` below `base` (a directory of the launcher's runtime),
/// component by component, refusing symbolic links; returns the path.
fn make_below(base: &Path, rel: &Path) -> io::Result<PathBuf> {
    files::dir_meta(base)?;
    let mut p = base.to_owned();
    for c in rel.components() {
        p.push(c);
        match std::fs::create_dir(&p) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            r => r?,
        }
        files::dir_meta(&p)?;
    }
    Ok(p)
}

/// Seeds libvirt's capabilities directory `base`/`rel` (`base` a directory
/// of the launcher's runtime, `rel` created below it without following a
/// link) from the shipped cache `shipped`, when [`plan`] finds that every
/// hash and fact matches. A file libvirt already has is left alone. Each
/// file is written under a temporary name (`O_EXCL`, `O_NOFOLLOW`, 0600)
/// and renamed without replacing.
///
/// # Errors
/// [`NotUsed`]: no shipped cache, a mismatch, or a directory that cannot be
/// written (then files already written are valid ones, left for libvirt).
pub fn seed(
    shipped: &Path,
    base: &Path,
    rel: &Path,
    layout: &Layout,
    host: &HostNow,
) -> Result<Seeded, NotUsed> {
    let Plan { files, skipped } = plan(shipped, layout, host)?;
    let dir =
        make_below(base, rel).map_err(|e| refused(format!("{}: {e}", base.join(rel).display())))?;
    let mut seeded = Seeded {
        dir: dir.clone(),
        files: Vec::new(),
        already_there: Vec::new(),
        skipped,
    };
    for (name, text) in files {
        let final_path = dir.join(&name);
        if std::fs::symlink_metadata(&final_path).is_ok() {
            seeded.already_there.push(name);
            continue;
        }
        let tmp = dir.join(format!(".{name}.seed"));
        let write = || -> io::Result<(u64, i128)> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
                .open(&tmp)?;
            io::Write::write_all(&mut f, text.as_bytes())?;
            let m = f.metadata()?;
            Ok((m.ino(), mtime_ns(&m)))
        };
        let (ino, mtime) = match write() {
            Ok(v) => v,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(refused(format!("{}: {e}", tmp.display())));
            }
        };
        match nix::fcntl::renameat2(
            None,
            &tmp,
            None,
            &final_path,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => seeded.files.push((name, ino, mtime)),
            Err(nix::errno::Errno::EEXIST) => {
                let _ = std::fs::remove_file(&tmp);
                seeded.already_there.push(name);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(refused(format!("{}: {e}", final_path.display())));
            }
        }
    }
    Ok(seeded)
}
