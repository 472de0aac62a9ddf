//! `<os>` (machine type, boot order, firmware loader and NVRAM, direct
//! kernel boot) and `<sysinfo>` (SMBIOS).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// `<sysinfo type='smbios'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SysInfo {
    /// `smbios`.
    #[serde(rename = "@type")]
    pub sysinfo_type: String,
    /// SMBIOS type 1 (system) entries.
    pub system: Option<SysInfoEntries>,
    /// SMBIOS type 3 (chassis) entries.
    pub chassis: Option<SysInfoEntries>,
}

/// A list of `<entry name='...'>value</entry>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SysInfoEntries {
    /// Entries in order.
    #[serde(default)]
    pub entry: Vec<SysInfoEntry>,
}

/// `<entry name='uuid'>...</entry>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SysInfoEntry {
    /// Field name (`uuid`, `serial`, `manufacturer` ...).
    #[serde(rename = "@name")]
    pub name: String,
    /// Field value.
    #[serde(rename = "$text", default)]
    pub value: String,
}

/// `<os>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Os {
    /// `<type arch=... machine=...>hvm</type>`.
    #[serde(rename = "type")]
    pub os_type: OsType,
    /// Firmware image (EFI).
    pub loader: Option<Loader>,
    /// EFI variable store.
    pub nvram: Option<Nvram>,
    /// Direct-boot kernel path.
    pub kernel: Option<String>,
    /// Direct-boot initrd path.
    pub initrd: Option<String>,
    /// Kernel command line.
    pub cmdline: Option<String>,
    /// Boot menu.
    pub bootmenu: Option<BootMenu>,
    /// `<smbios mode='sysinfo'/>`.
    pub smbios: Option<Smbios>,
    /// SeaBIOS options.
    pub bios: Option<BiosOptions>,
    /// Boot device order (`<boot dev='hd'/>`; libvirt adds one to the live
    /// XML when no device has a per-device boot order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boot: Vec<OsBoot>,
}

/// `<os><boot dev='hd'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OsBoot {
    /// `hd`, `cdrom`, `network`, `fd`.
    #[serde(rename = "@dev")]
    pub dev: String,
}

/// `<os><type>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OsType {
    /// libvirt architecture (`x86_64`).
    #[serde(rename = "@arch")]
    pub arch: Option<String>,
    /// Machine type (`q35`).
    #[serde(rename = "@machine")]
    pub machine: Option<String>,
    /// `hvm`.
    #[serde(rename = "$text")]
    pub os: String,
}

/// `<loader readonly='yes' secure='no' type='pflash'>PATH</loader>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Loader {
    /// `yes`.
    #[serde(rename = "@readonly")]
    pub readonly: Option<String>,
    /// `yes` / `no`.
    #[serde(rename = "@secure")]
    pub secure: Option<String>,
    /// `pflash`.
    #[serde(rename = "@type")]
    pub loader_type: Option<String>,
    /// Firmware code path.
    #[serde(rename = "$text")]
    pub path: String,
}

/// `<nvram template=VARS>PATH</nvram>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Nvram {
    /// Template copied on first start.
    #[serde(rename = "@template")]
    pub template: Option<String>,
    /// Per-VM variable store.
    #[serde(rename = "$text")]
    pub path: String,
}

/// `<bootmenu enable='yes' timeout='10000'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BootMenu {
    /// `yes` / `no`.
    #[serde(rename = "@enable")]
    pub enable: String,
    /// Milliseconds.
    #[serde(rename = "@timeout")]
    pub timeout: Option<u32>,
}

/// `<smbios mode='sysinfo'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Smbios {
    /// `sysinfo`.
    #[serde(rename = "@mode")]
    pub mode: String,
}

/// `<bios useserial='yes'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BiosOptions {
    /// `yes` to mirror SeaBIOS output to the serial port.
    #[serde(rename = "@useserial")]
    pub useserial: Option<String>,
}
