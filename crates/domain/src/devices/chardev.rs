//! Character devices: `<serial>`, `<console>` and `<channel>` (the guest
//! agent's virtio-serial port).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::Alias;

/// `<serial type='unix'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Serial {
    /// `unix`, `pty`, `file`.
    #[serde(rename = "@type")]
    pub serial_type: String,
    /// Guest port.
    pub target: Option<SerialTarget>,
    /// Host side.
    pub source: Option<CharSource>,
    /// Copy of the output in a file.
    pub log: Option<CharLog>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<target port='0'/>` of a serial port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SerialTarget {
    /// Port number.
    #[serde(rename = "@port")]
    pub port: u32,
}

/// `<source mode='bind' path='...'/>` of a character device.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CharSource {
    /// `bind` (QEMU listens) or `connect`.
    #[serde(rename = "@mode")]
    pub mode: Option<String>,
    /// Unix socket path.
    #[serde(rename = "@path")]
    pub path: Option<String>,
}

/// `<log file='...' append='on'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CharLog {
    /// Log file path.
    #[serde(rename = "@file")]
    pub file: String,
    /// `on` to append across restarts.
    #[serde(rename = "@append")]
    pub append: Option<String>,
}

/// `<console type='pty'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Console {
    /// `pty`.
    #[serde(rename = "@type")]
    pub console_type: String,
    /// Which serial port it shows.
    pub target: Option<ConsoleTarget>,
}

/// `<target type='serial' port='0'/>` of a console.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsoleTarget {
    /// `serial`, `virtio`.
    #[serde(rename = "@type")]
    pub target_type: Option<String>,
    /// Port.
    #[serde(rename = "@port")]
    pub port: Option<u32>,
}

/// `<channel type='unix'>` (the guest agent's virtio-serial port).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    /// `unix`.
    #[serde(rename = "@type")]
    pub channel_type: String,
    /// Host socket; libvirt chooses one when absent.
    pub source: Option<CharSource>,
    /// Guest port name.
    pub target: ChannelTarget,
}

/// `<target type='virtio' name='org.qemu.guest_agent.0' state=.../>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelTarget {
    /// `virtio`.
    #[serde(rename = "@type")]
    pub target_type: String,
    /// Port name.
    #[serde(rename = "@name")]
    pub name: Option<String>,
    /// `connected` / `disconnected` (live XML only).
    #[serde(rename = "@state")]
    pub state: Option<String>,
}
