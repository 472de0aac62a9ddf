//! Recording a shipped capabilities cache at image build: libvirt has just
//! probed the image's QEMU binaries into an empty cache; every file is
//! checked against this launcher's model of libvirt's times (so a model
//! that does not hold on the build system fails the build, not a pod),
//! then copied with the manifest of hashes and facts.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::facts::{HostNow, Layout};
use super::files::{self, element, number};
use super::{bounds, DirHash, Entry, FileHash, Manifest, FORMAT, MANIFEST};

/// Why a cache could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A capabilities file libvirt wrote does not hold what libvirt 11.3
    /// writes, or its times do not follow the rules [`super::seed`]
    /// relies on.
    #[error("{file}: {message}")]
    Capabilities {
        /// The capabilities file's name.
        file: String,
        /// What does not hold.
        message: String,
    },
    /// The output directory or the cache cannot be used.
    #[error("{0}")]
    Other(String),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Hashes `path`, returning its [`FileHash`] and ctime.
fn hashed(path: &Path) -> Result<(FileHash, i64), RecordError> {
    let (sha256, stamp) = files::hash_file(path).map_err(io_at(path))?;
    Ok((
        FileHash {
            path: path.to_string_lossy().into_owned(),
            sha256,
        },
        stamp.ctime,
    ))
}

/// The hashes of `layout`'s libvirt files and the `selfctime` libvirt
/// computes from the daemon and the modules it loads at start: (daemon,
/// self modules, other files, selfctime).
pub(crate) type LibvirtHashes = (FileHash, Vec<FileHash>, Vec<FileHash>, i64);

/// See [`LibvirtHashes`].
pub(crate) fn libvirt_hashes(layout: &Layout) -> Result<LibvirtHashes, RecordError> {
    let (daemon, mut self_ctime) = hashed(&layout.daemon)?;
    let mut self_modules = Vec::new();
    for m in &layout.self_modules {
        let (h, c) = hashed(m)?;
        self_ctime = self_ctime.max(c);
        self_modules.push(h);
    }
    let mut others = Vec::new();
    for f in &layout.libvirt_files {
        others.push(hashed(f)?.0);
    }
    Ok((daemon, self_modules, others, self_ctime))
}

/// QEMU's module directory's hashes and mtime, `None` when it does not
/// exist.
pub(crate) fn module_dir(dir: &Path) -> Result<Option<(DirHash, i64)>, RecordError> {
    let meta = match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        r => r.map_err(io_at(dir))?,
    };
    files::dir_meta(dir).map_err(io_at(dir))?;
    let mut out = Vec::new();
    for name in files::regular_files(dir).map_err(io_at(dir))? {
        let (sha256, _) = files::hash_file(&dir.join(&name)).map_err(io_at(dir))?;
        out.push(FileHash { path: name, sha256 });
    }
    Ok(Some((
        DirHash {
            path: dir.to_string_lossy().into_owned(),
            files: out,
        },
        meta.mtime(),
    )))
}

/// What one capabilities XML says about itself.
pub(crate) struct XmlFacts {
    pub emulator: String,
    pub arch: String,
    pub self_version: u64,
    pub kvm: bool,
    pub qemu_version: u64,
}

/// Reads the facts of a capabilities XML, failing on anything libvirt
/// 11.3 would not have written.
pub(crate) fn xml_facts(xml: &str) -> Result<XmlFacts, String> {
    if !xml.trim_start().starts_with("<qemuCaps>") || !xml.trim_end().ends_with("</qemuCaps>") {
        return Err("not a complete <qemuCaps> document".into());
    }
    let unsigned = |name: &str| {
        number(xml, name).and_then(|n| u64::try_from(n).map_err(|_| format!("<{name}> < 0")))
    };
    for t in ["qemuctime", "selfctime"] {
        number(xml, t)?;
    }
    Ok(XmlFacts {
        emulator: element(xml, "emulator")?.to_owned(),
        arch: element(xml, "arch")?.to_owned(),
        self_version: unsigned("selfvers")?,
        kvm: xml.contains("<flag name='kvm'/>"),
        qemu_version: unsigned("version")?,
    })
}

/// libvirt's name of the cache file of `emulator`.
pub(crate) fn file_name(emulator: &str) -> String {
    format!("{}.xml", files::sha256_hex(emulator.as_bytes()))
}

/// Records the capabilities files libvirt just wrote into `cache` (its
/// `.../qemu/capabilities` directory) for the binaries of `layout`, on the
/// host `host`, into `out` (created; must not exist or be empty): the files
/// as they are, and [`MANIFEST`].
///
/// # Errors
/// [`RecordError`]: an unreadable file, a capabilities file whose times do
/// not follow the model of [`super::seed`] (then nothing could ever be
/// seeded from it), an `out` in use.
pub fn record(
    cache: &Path,
    out: &Path,
    layout: &Layout,
    host: &HostNow,
) -> Result<Manifest, RecordError> {
    let (daemon, self_modules, libvirt_files, self_ctime) = libvirt_hashes(layout)?;
    let moddir = module_dir(&layout.qemu_module_dir)?;
    let mut xmls = BTreeMap::new();
    for name in files::regular_files(cache).map_err(io_at(cache))? {
        if name.ends_with(".xml") {
            let bytes = files::read_bounded(&cache.join(&name), bounds::XML_BYTES)
                .map_err(io_at(&cache.join(&name)))?;
            xmls.insert(name, bytes);
        }
    }
    if xmls.is_empty() || xmls.len() > bounds::ENTRIES {
        return Err(RecordError::Other(format!(
            "{}: {} capabilities files (want 1 to {})",
            cache.display(),
            xmls.len(),
            bounds::ENTRIES
        )));
    }
    let mut entries = Vec::new();
    let mut libvirt_version = None;
    for (name, bytes) in &xmls {
        let bad = |message: String| RecordError::Capabilities {
            file: name.clone(),
            message,
        };
        let xml = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let f = xml_facts(xml).map_err(bad)?;
        if *name != file_name(&f.emulator) {
            return Err(bad(format!("not libvirt's file name for {}", f.emulator)));
        }
        if *libvirt_version.get_or_insert(f.self_version) != f.self_version {
            return Err(bad("another libvirt version than the other files".into()));
        }
        if let Some(v) = host.libvirt_version.filter(|v| *v != f.self_version) {
            return Err(bad(format!(
                "libvirt {v} runs here, not {}",
                f.self_version
            )));
        }
        let emulator = Path::new(&f.emulator);
        let (link, binary) = files::emulator_binary(emulator).map_err(io_at(emulator))?;
        let (emu, emu_ctime) = hashed(&binary)?;
        let model = |what: &str, got: i64, want: i64| {
            if got == want {
                Ok(())
            } else {
                Err(bad(format!(
                    "<{what}> is {got}, not {want} as this launcher computes it: its model of libvirt's cache does not hold here"
                )))
            }
        };
        model(
            "qemuctime",
            number(xml, "qemuctime").map_err(bad)?,
            emu_ctime,
        )?;
        model(
            "selfctime",
            number(xml, "selfctime").map_err(bad)?,
            self_ctime,
        )?;
        match (xml.contains("<qemumoddirmtime>"), &moddir) {
            (true, Some((_, mtime))) => model(
                "qemumoddirmtime",
                number(xml, "qemumoddirmtime").map_err(bad)?,
                *mtime,
            )?,
            (false, None) => {}
            (true, None) => {
                return Err(bad("<qemumoddirmtime> but no QEMU module directory".into()))
            }
            (false, Some(_)) => {
                return Err(bad(
                    "no <qemumoddirmtime> but a QEMU module directory".into()
                ))
            }
        }
        entries.push(Entry {
            file: name.clone(),
            emulator: f.emulator,
            link,
            emulator_sha256: emu.sha256,
            xml_sha256: files::sha256_hex(bytes),
            arch: f.arch,
            kvm: f.kvm,
            qemu_version: f.qemu_version,
        });
    }
    let manifest = Manifest {
        format: FORMAT,
        libvirt_version: libvirt_version.unwrap_or_default(),
        daemon,
        self_modules,
        libvirt_files,
        qemu_module_dir: moddir.map(|(d, _)| d),
        kvm_usable: host.kvm_usable,
        host: host.fingerprint.clone(),
        entries,
    };
    write_out(out, &xmls, &manifest)?;
    Ok(manifest)
}

/// Writes the files and then the manifest into `out`, a new or empty
/// directory that is not a symbolic link.
fn write_out(
    out: &Path,
    xmls: &BTreeMap<String, Vec<u8>>,
    manifest: &Manifest,
) -> Result<(), RecordError> {
    match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(out).map_err(io_at(out))?;
        }
        Err(e) => return Err(io_at(out)(e)),
        Ok(m) if !m.is_dir() => {
            return Err(RecordError::Other(format!(
                "{}: not a directory (or a symbolic link)",
                out.display()
            )))
        }
        Ok(_) => {
            if std::fs::read_dir(out).map_err(io_at(out))?.next().is_some() {
                return Err(RecordError::Other(format!("{}: not empty", out.display())));
            }
        }
    }
    let write = |name: &str, bytes: &[u8]| {
        let p = out.join(name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .map_err(io_at(&p))?;
        io::Write::write_all(&mut f, bytes).map_err(io_at(&p))
    };
    for (name, bytes) in xmls {
        write(name, bytes)?;
    }
    let json = serde_json::to_vec_pretty(manifest)
        .map_err(|e| RecordError::Other(format!("manifest: {e}")))?;
    write(MANIFEST, &json)
}
