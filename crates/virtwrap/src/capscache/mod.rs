//! A QEMU capabilities cache shipped in the launcher image, and the rules
//! under which a fresh pod may hand it to libvirt instead of letting
//! libvirt probe every QEMU binary (seconds, before the first define).
//!
//! libvirt 11.3 keeps one XML file per QEMU binary in
//! `<cache dir>/capabilities/<sha256 of the binary's path>.xml`
//! (`virFileCacheGetFileName`) and accepts it (`virQEMUCapsLoadCache`,
//! `virQEMUCapsIsValid` in `src/qemu/qemu_capabilities.c`) only when:
//! - `selfvers` is libvirt's version and `selfctime` the newest ctime of
//!   the daemon binary and the modules it loaded (`virGetSelfLastChanged`);
//! - `qemuctime` is the binary's ctime and `qemumoddirmtime` the mtime of
//!   QEMU's module directory;
//! - for a guest architecture native to the host, the `kvm` flag says
//!   whether `/dev/kvm` is usable now, and with KVM the host CPU signature,
//!   microcode version, kernel version and CPUID data are the host's.
//!
//! ctimes and mtimes change between the image build and the pod (layers
//! are unpacked on the node), and nothing else of them matters. So
//! [`record`] notes, at image build, the content hash of every file these
//! times stand for (QEMU binaries, QEMU's modules, the daemon, libvirt's
//! modules and libraries) and the host facts; [`seed`] writes a shipped
//! file into libvirt's cache only when every hash and fact matches, with
//! only the three times set to this file system's. Everything else libvirt
//! checks itself is left as recorded, so libvirt still refuses a file for
//! another host; [`Seeded::replaced`] tells afterwards whether it did.
//! A mismatch of what all files share (libvirt's version and files,
//! QEMU's modules) leaves libvirt's cache as it was; a binary's own
//! mismatch leaves out that binary's file: libvirt probes what has no
//! file, as without a shipped cache.

mod facts;
mod files;
mod record;
mod seed;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use facts::{is_native, HostFingerprint, HostNow, Layout};
pub use record::{record, RecordError};
pub use seed::{plan, seed, NotUsed, Plan, Seeded};

/// Version of the manifest's format.
pub const FORMAT: u32 = 1;

/// The manifest's file name in the shipped directory.
pub const MANIFEST: &str = "manifest.json";

/// The directory of capabilities files below libvirt's QEMU cache
/// directory (`/var/cache/libvirt/qemu` as root,
/// `$XDG_CACHE_HOME/libvirt/qemu/cache` in session mode:
/// `qemu_conf.c`'s `cacheDir`; `virQEMUCapsCacheNew` adds this).
pub const CAPABILITIES_SUBDIR: &str = "capabilities";

/// Bounds of every read: the manifest, one capabilities XML (the x86_64
/// one of QEMU 10 is 266 KiB), the number of entries and hashed files, and
/// the size of one hashed file.
pub mod bounds {
    /// Largest manifest read, bytes.
    pub const MANIFEST_BYTES: u64 = 1 << 20;
    /// Largest capabilities XML read, bytes.
    pub const XML_BYTES: u64 = 8 << 20;
    /// Most capabilities files in one manifest.
    pub const ENTRIES: usize = 64;
    /// Most hashed files of libvirt or of QEMU's module directory.
    pub const FILES: usize = 1024;
    /// Largest hashed file (a QEMU binary is about 30 MB), bytes.
    pub const HASHED_BYTES: u64 = 1 << 30;
}

/// A file and the SHA-256 of its content (lower-case hex).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileHash {
    /// Absolute path (in a [`DirHash`]: the name inside the directory).
    pub path: String,
    /// SHA-256 of the content, hex.
    pub sha256: String,
}

/// A directory's regular files (by name, sorted) and their hashes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirHash {
    /// Absolute path of the directory.
    pub path: String,
    /// Its regular files, by name relative to it.
    pub files: Vec<FileHash>,
}

/// One shipped capabilities file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    /// File name: SHA-256 of `emulator` plus `.xml`, as libvirt names it.
    pub file: String,
    /// The QEMU binary it describes (`<emulator>`).
    pub emulator: String,
    /// When `emulator` is a symbolic link (Debian's
    /// `qemu-system-ppc64le`, KubeVirt's `qemu-kvm` name), its content;
    /// the binary hashed is the file it names, resolved one level by the
    /// launcher (libvirt's `stat` follows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// SHA-256 of that binary.
    pub emulator_sha256: String,
    /// SHA-256 of the shipped XML itself.
    pub xml_sha256: String,
    /// libvirt's guest architecture name (`<arch>`).
    pub arch: String,
    /// Probed with KVM (`<flag name='kvm'/>`).
    pub kvm: bool,
    /// QEMU's version number (`<version>`, e.g. 10000002).
    pub qemu_version: u64,
}

/// `manifest.json` of a shipped capabilities cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// libvirt's version number the files were made by (`<selfvers>`).
    pub libvirt_version: u64,
    /// The daemon that probed (`/usr/sbin/libvirtd` or `virtqemud`).
    pub daemon: FileHash,
    /// The libvirt modules the daemon loads at start, whose ctimes with
    /// the daemon's make `selfctime` (absolute paths).
    pub self_modules: Vec<FileHash>,
    /// Every other libvirt file the probe's result depends on: the other
    /// modules and the shared libraries.
    pub libvirt_files: Vec<FileHash>,
    /// QEMU's module directory, when it exists (`qemumoddirmtime`).
    pub qemu_module_dir: Option<DirHash>,
    /// Whether `/dev/kvm` was usable when the files were made.
    pub kvm_usable: bool,
    /// The host the files were made on (compared only for KVM files).
    pub host: HostFingerprint,
    /// The files.
    pub entries: Vec<Entry>,
}
