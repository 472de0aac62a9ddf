//! The host and file-system facts libvirt's cache validity depends on,
//! read the same way at image build ([`super::record`]) and in the pod
//! ([`super::seed`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::files;
use crate::config::DaemonKind;

/// What libvirt compares for a capabilities file probed with KVM
/// (`virQEMUCapsIsValid`: host CPU signature, microcode version, kernel
/// version, CPUID), as this launcher reads it: `uname`'s release and
/// version (libvirt's `kernelVersion` is the same two joined by a space),
/// and the identity lines of the first processor in `/proc/cpuinfo`
/// (vendor, family, model, name, stepping, microcode, flags; their arm,
/// ppc and s390 counterparts). Stricter than libvirt (the flags stand for
/// CPUID), never looser.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostFingerprint {
    /// `<release> <version>` of the running kernel.
    pub kernel: String,
    /// The first processor's identity lines of `/proc/cpuinfo`, in order,
    /// each `key: value`.
    pub cpu: Vec<String>,
}

/// `/proc/cpuinfo` keys that identify the CPU (x86, arm64, ppc64, s390x).
const CPU_KEYS: [&str; 15] = [
    "vendor_id",
    "cpu family",
    "model",
    "model name",
    "stepping",
    "microcode",
    "flags",
    "CPU implementer",
    "CPU architecture",
    "CPU variant",
    "CPU part",
    "CPU revision",
    "Features",
    "cpu",
    "revision",
];

/// Bytes of `/proc/cpuinfo` read at most (its first processor is well
/// within them).
const CPUINFO_BYTES: u64 = 64 << 10;

impl HostFingerprint {
    /// This host's fingerprint; unreadable parts stay empty (and then
    /// differ from any recorded one).
    pub fn probe() -> HostFingerprint {
        let kernel = nix::sys::utsname::uname()
            .map(|u| {
                format!(
                    "{} {}",
                    u.release().to_string_lossy(),
                    u.version().to_string_lossy()
                )
            })
            .unwrap_or_default();
        let mut text = String::new();
        // /proc files have no size: read up to the bound.
        if let Ok(f) = std::fs::File::open("/proc/cpuinfo") {
            let _ = f.take(CPUINFO_BYTES).read_to_string(&mut text);
        }
        HostFingerprint {
            kernel,
            cpu: cpu_identity(&text),
        }
    }
}

/// The identity lines of the first processor block of `cpuinfo`.
pub(crate) fn cpu_identity(cpuinfo: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in cpuinfo.lines() {
        if line.trim().is_empty() {
            if out.is_empty() {
                continue;
            }
            break;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let k = k.trim();
        if CPU_KEYS.contains(&k) {
            out.push(format!("{k}: {}", v.trim()));
        }
    }
    out
}

/// The host's architecture in libvirt's names (`virArchFromHost`).
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86" => "i686",
        "arm" => "armv7l",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        other => other,
    }
}

/// libvirt's `virQEMUCapsGuestIsNative`: the guest architecture runs on
/// this host's KVM (libvirt names: `x86_64`, `i686`, `aarch64`, `armv7l`,
/// `ppc64`, `ppc64le`, ...).
pub fn is_native(host: &str, guest: &str) -> bool {
    let ppc64 = |a: &str| a == "ppc64" || a == "ppc64le";
    host == guest
        || (host == "x86_64" && guest == "i686")
        || (host == "aarch64" && guest == "armv7l")
        || (ppc64(host) && ppc64(guest))
}

/// `/dev/kvm` is there and readable and writable by this process's user
/// (libvirt asks for the QEMU user: root as root, the launcher's own user
/// in session mode).
pub fn kvm_usable() -> bool {
    use nix::unistd::{access, AccessFlags};
    access("/dev/kvm", AccessFlags::R_OK | AccessFlags::W_OK).is_ok()
}

/// What the launcher knows of the host and of libvirt before the daemon
/// starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostNow {
    /// [`host_arch`].
    pub arch: String,
    /// [`kvm_usable`].
    pub kvm_usable: bool,
    /// [`HostFingerprint::probe`].
    pub fingerprint: HostFingerprint,
    /// The libvirt library's version number (`virGetVersion`), if known.
    pub libvirt_version: Option<u64>,
}

impl HostNow {
    /// This host, now.
    pub fn probe() -> HostNow {
        HostNow {
            arch: host_arch().into(),
            kvm_usable: kvm_usable(),
            fingerprint: HostFingerprint::probe(),
            libvirt_version: virt::connect::Connect::get_version().ok().map(u64::from),
        }
    }
}

/// Where the files behind libvirt's times are (Debian's layout): the
/// daemon, the modules it loads at start (`selfctime`), the rest of
/// libvirt's modules and libraries, and QEMU's module directory
/// (libvirt's `QEMU_MODDIR`, `qemumoddirmtime`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The daemon binary, as the launcher starts it (libvirt takes its
    /// `argv[0]`'s ctime).
    pub daemon: PathBuf,
    /// The modules the daemon loads at start: every connection driver for
    /// libvirtd, the QEMU driver for virqemud.
    pub self_modules: Vec<PathBuf>,
    /// The other files below libvirt's module directory, and libvirt's
    /// shared libraries.
    pub libvirt_files: Vec<PathBuf>,
    /// QEMU's module directory.
    pub qemu_module_dir: PathBuf,
}

/// Debian's multiarch library directory of this build's architecture.
fn lib_dir() -> PathBuf {
    let triplet = match std::env::consts::ARCH {
        "powerpc64" => "powerpc64le-linux-gnu",
        "arm" => "arm-linux-gnueabihf",
        a => return PathBuf::from(format!("/usr/lib/{a}-linux-gnu")),
    };
    PathBuf::from(format!("/usr/lib/{triplet}"))
}

impl Layout {
    /// The layout of `daemon` on this system.
    ///
    /// # Errors
    /// A directory that cannot be listed.
    pub fn for_daemon(daemon: &DaemonKind) -> std::io::Result<Layout> {
        Layout::below(daemon, &lib_dir())
    }

    /// As [`Layout::for_daemon`] with libvirt's and QEMU's libraries in
    /// `lib` instead of Debian's multiarch directory.
    ///
    /// # Errors
    /// A directory that cannot be listed.
    pub fn below(daemon: &DaemonKind, lib: &Path) -> std::io::Result<Layout> {
        let modules = lib.join("libvirt");
        let drivers = modules.join("connection-driver");
        let mut self_modules = Vec::new();
        let mut libvirt_files = Vec::new();
        for name in list_or_empty(&drivers)? {
            let p = drivers.join(&name);
            let loaded_at_start = match daemon {
                DaemonKind::Libvirtd(_) => true,
                DaemonKind::Virtqemud(_) => name == "libvirt_driver_qemu.so",
            };
            if loaded_at_start {
                self_modules.push(p);
            } else {
                libvirt_files.push(p);
            }
        }
        if let Ok(m) = files::dir_meta(&modules) {
            if m.is_dir() {
                let mut subdirs: Vec<_> = std::fs::read_dir(&modules)?
                    .filter_map(Result::ok)
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .filter(|p| *p != drivers)
                    .collect();
                subdirs.sort();
                for d in subdirs {
                    for name in files::regular_files(&d)? {
                        libvirt_files.push(d.join(name));
                    }
                }
            }
        }
        // libvirt's shared libraries (libvirt.so.0.11003.0, ...): the
        // multiarch directory holds thousands of files, only these count.
        let mut libs = Vec::new();
        for e in std::fs::read_dir(lib)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("libvirt") && name.contains(".so.") && e.file_type()?.is_file() {
                libs.push(lib.join(name));
            }
        }
        libs.sort();
        libvirt_files.extend(libs);
        if libvirt_files.len() + self_modules.len() > super::bounds::FILES {
            return Err(std::io::Error::other("too many libvirt files"));
        }
        Ok(Layout {
            daemon: daemon.program().to_owned(),
            self_modules,
            libvirt_files,
            qemu_module_dir: lib.join("qemu"),
        })
    }
}

/// [`files::regular_files`], or none when `dir` does not exist.
fn list_or_empty(dir: &Path) -> std::io::Result<Vec<String>> {
    match files::regular_files(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        r => r,
    }
}
