//! The remaining devices: virtiofs `<filesystem>`, `<watchdog>`, `<tpm>`,
//! `<sound>`, USB `<redirdev>`, `<vsock>`, `<memballoon>` and `<rng>`.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::{Alias, CharSource};

/// `<filesystem type='mount' accessmode='passthrough'>` (virtiofs).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Filesystem {
    /// `mount`.
    #[serde(rename = "@type")]
    pub fs_type: String,
    /// `passthrough`.
    #[serde(rename = "@accessmode")]
    pub access_mode: Option<String>,
    /// `<driver type='virtiofs' queue='1024'/>`.
    pub driver: Option<FilesystemDriver>,
    /// `<source socket=.../>` of an external virtiofsd.
    pub source: Option<FilesystemSource>,
    /// `<target dir='TAG'/>`.
    pub target: FilesystemTarget,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<driver type='virtiofs' queue='1024'/>` of a filesystem.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesystemDriver {
    /// `virtiofs`.
    #[serde(rename = "@type")]
    pub driver_type: String,
    /// Queue size.
    #[serde(rename = "@queue")]
    pub queue: Option<u32>,
}

/// `<source socket='...'/>` of a filesystem.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesystemSource {
    /// virtiofsd's socket.
    #[serde(rename = "@socket")]
    pub socket: Option<String>,
}

/// `<target dir='TAG'/>` of a filesystem (the guest mount tag).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesystemTarget {
    /// Mount tag.
    #[serde(rename = "@dir")]
    pub dir: String,
}

/// `<watchdog model='i6300esb' action='reset'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Watchdog {
    /// `i6300esb`, `diag288`.
    #[serde(rename = "@model")]
    pub model: String,
    /// `reset`, `poweroff`, `shutdown` ...
    #[serde(rename = "@action")]
    pub action: Option<String>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<tpm model='tpm-tis'><backend type='emulator' version='2.0'/></tpm>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tpm {
    /// `tpm-tis`, `tpm-crb`.
    #[serde(rename = "@model")]
    pub model: String,
    /// swtpm backend.
    pub backend: TpmBackend,
}

/// `<backend type='emulator' version='2.0' persistent_state='yes'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TpmBackend {
    /// `emulator`.
    #[serde(rename = "@type")]
    pub backend_type: String,
    /// `2.0`.
    #[serde(rename = "@version")]
    pub version: Option<String>,
    /// `yes` to keep the state after the domain is undefined.
    #[serde(rename = "@persistent_state")]
    pub persistent_state: Option<String>,
}

/// `<sound model='ich9'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sound {
    /// `ich9`, `ac97`.
    #[serde(rename = "@model")]
    pub model: String,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<redirdev type='unix' bus='usb'><source mode='bind' path=.../></redirdev>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RedirDev {
    /// `unix`.
    #[serde(rename = "@type")]
    pub redir_type: String,
    /// `usb`.
    #[serde(rename = "@bus")]
    pub bus: String,
    /// Socket QEMU listens on.
    pub source: Option<CharSource>,
}

/// `<vsock model='virtio-non-transitional'><cid auto='no' address='3'/></vsock>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Vsock {
    /// virtio model.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// Context id.
    pub cid: VsockCid,
}

/// `<cid auto='no' address='3'/>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VsockCid {
    /// `no`: the address is fixed.
    #[serde(rename = "@auto")]
    pub auto: String,
    /// Context id (from 3).
    #[serde(rename = "@address")]
    pub address: u32,
}

/// `<memballoon model='virtio-non-transitional' freePageReporting='on'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemBalloon {
    /// Model, or `none` for no balloon.
    #[serde(rename = "@model")]
    pub model: String,
    /// `on` / `off`.
    #[serde(rename = "@freePageReporting")]
    pub free_page_reporting: Option<String>,
    /// Statistics polling.
    pub stats: Option<BalloonStats>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<stats period='10'/>` (seconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BalloonStats {
    /// Seconds between statistics updates.
    #[serde(rename = "@period")]
    pub period: u32,
}

/// `<rng model='virtio-non-transitional'><backend model='random'>/dev/urandom</backend></rng>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rng {
    /// virtio model.
    #[serde(rename = "@model")]
    pub model: String,
    /// Host entropy source.
    pub backend: RngBackend,
}

/// `<backend model='random'>/dev/urandom</backend>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RngBackend {
    /// `random`.
    #[serde(rename = "@model")]
    pub model: String,
    /// Host device.
    #[serde(rename = "$text")]
    pub source: String,
}
