//! CPU architectures KubeVirt supports and their per-architecture facts.

use std::fmt;
use std::str::FromStr;

use crate::vmi::Bus;

/// A guest architecture, named as KubeVirt names it (`spec.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// x86-64 (`amd64`; libvirt `x86_64`).
    Amd64,
    /// 64-bit ARM (`arm64`; libvirt `aarch64`).
    Arm64,
    /// 64-bit little-endian POWER (`ppc64le`).
    Ppc64le,
    /// IBM Z (`s390x`).
    S390x,
}

/// An architecture name that is none of the four KubeVirt supports.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown architecture {0:?} (expected amd64, arm64, ppc64le or s390x)")]
pub struct UnknownArch(pub String);

impl Arch {
    /// All architectures, in KubeVirt's order.
    pub const ALL: [Arch; 4] = [Arch::Amd64, Arch::Arm64, Arch::Ppc64le, Arch::S390x];

    /// The architecture this launcher binary runs on.
    ///
    /// # Errors
    /// [`UnknownArch`] on a host KubeVirt does not support.
    pub fn host() -> Result<Arch, UnknownArch> {
        std::env::consts::ARCH.parse()
    }

    /// KubeVirt's name (`amd64` ...), as in `spec.architecture`.
    pub fn kubevirt_name(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
            Arch::Ppc64le => "ppc64le",
            Arch::S390x => "s390x",
        }
    }

    /// libvirt's name, as in `<os><type arch=...>` (libvirt formatdomain).
    pub fn libvirt_name(self) -> &'static str {
        match self {
            Arch::Amd64 => "x86_64",
            Arch::Arm64 => "aarch64",
            Arch::Ppc64le => "ppc64le",
            Arch::S390x => "s390x",
        }
    }

    /// KubeVirt's default machine type (cluster config `machineType` defaults).
    pub fn default_machine_type(self) -> &'static str {
        match self {
            Arch::Amd64 => "q35",
            Arch::Arm64 => "virt",
            Arch::Ppc64le => "pseries",
            Arch::S390x => "s390-ccw-virtio",
        }
    }

    /// KubeVirt's default disk bus (pkg/defaults: SATA on amd64 and, by the
    /// same default branch, ppc64le; virtio on arm64 and s390x).
    pub fn default_disk_bus(self) -> Bus {
        match self {
            Arch::Amd64 | Arch::Ppc64le => Bus::Sata,
            Arch::Arm64 | Arch::S390x => Bus::Virtio,
        }
    }

    /// KubeVirt's default CPU model (`host-passthrough` on arm64, else `host-model`).
    pub fn default_cpu_model(self) -> &'static str {
        match self {
            Arch::Arm64 => "host-passthrough",
            _ => "host-model",
        }
    }
}

impl FromStr for Arch {
    type Err = UnknownArch;
    /// Accepts KubeVirt's and libvirt's spellings (`amd64` or `x86_64`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "amd64" | "x86_64" => Ok(Arch::Amd64),
            "arm64" | "aarch64" => Ok(Arch::Arm64),
            "ppc64le" => Ok(Arch::Ppc64le),
            "s390x" => Ok(Arch::S390x),
            other => Err(UnknownArch(other.to_owned())),
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kubevirt_name())
    }
}
