//! `<input>`, `<graphics>` (VNC over a Unix socket) and `<video>`.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::Alias;

/// `<input type='tablet' bus='usb'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// `tablet`, `keyboard`, `mouse`.
    #[serde(rename = "@type")]
    pub input_type: String,
    /// `usb`, `virtio`, `ps2`.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// virtio model.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<graphics type='vnc'>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Graphics {
    /// `vnc`.
    #[serde(rename = "@type")]
    pub graphics_type: String,
    /// Where it listens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<GraphicsListen>,
}

/// `<listen type='socket' socket='...'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphicsListen {
    /// `socket`, `address`.
    #[serde(rename = "@type")]
    pub listen_type: String,
    /// Unix socket path.
    #[serde(rename = "@socket")]
    pub socket: Option<String>,
}

/// `<video><model type='vga' heads='1' vram='16384'/></video>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Video {
    /// Model.
    pub model: VideoModel,
}

/// `<model>` of a video device.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VideoModel {
    /// `vga`, `virtio`, `bochs`.
    #[serde(rename = "@type")]
    pub model_type: String,
    /// Heads.
    #[serde(rename = "@heads")]
    pub heads: Option<u32>,
    /// Video RAM in KiB.
    #[serde(rename = "@vram")]
    pub vram: Option<u32>,
}
