//! `spec.domain.devices` and its devices other than disks and interfaces
//! (watchdog, TPM, sound, filesystems, video, inputs).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Disk, InputBus, InputType, Interface, SoundModel, VideoType, WatchdogAction};

/// `spec.domain.devices`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Devices {
    /// Disks, each naming a volume.
    #[serde(default)]
    pub disks: Vec<Disk>,
    /// Network interfaces, each naming a network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    /// One queue per vCPU on virtio interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interface_multiqueue: Option<bool>,
    /// Add a default pod interface when none is given (virt-api's job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_pod_interface: Option<bool>,
    /// VNC + video; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_graphics_device: Option<bool>,
    /// Serial console; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_serial_console: Option<bool>,
    /// Memory balloon; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_mem_balloon: Option<bool>,
    /// Tablet input; default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_input_device: Option<bool>,
    /// Virtio RNG backed by `/dev/urandom` when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub rng: Option<Value>,
    /// Input devices (tablet on usb or virtio).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<Input>,
    /// Attach a vsock device (its CID comes from `status.vsockCID`).
    #[serde(
        rename = "autoattachVSOCK",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub autoattach_vsock: Option<bool>,
    /// Use `virtio-transitional` models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_virtio_transitional: Option<bool>,
    /// No virtio-scsi controller reserved for hot-plug.
    #[serde(default)]
    pub disable_hotplug: bool,
    /// Log the serial console to a file; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_serial_console: Option<bool>,
    /// Multi-queue virtio-blk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_multi_queue: Option<bool>,
    /// Watchdog device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<Watchdog>,
    /// Emulated TPM 2.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<Tpm>,
    /// Sound card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sound: Option<SoundDevice>,
    /// GPUs a device plugin or DRA gives the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<Gpu>,
    /// Host devices (PCI, mediated, USB) a device plugin or DRA gives the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_devices: Vec<HostDevice>,
    /// Shared directories (virtiofs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<Filesystem>,
    /// USB redirection from the client (`{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub client_passthrough: Option<Value>,
    /// Host metrics channel for vhostmd (`{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub downward_metrics: Option<Value>,
    /// Video adapter model of the autoattached graphics device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<VideoDevice>,
}

/// `devices.watchdog`: a name and one of the models.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Watchdog {
    /// Device name (alias `ua-<name>`).
    #[serde(default)]
    pub name: String,
    /// Intel 6300ESB (amd64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i6300esb: Option<WatchdogModel>,
    /// IBM diag288 (s390x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diag288: Option<WatchdogModel>,
}

/// A watchdog model's settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct WatchdogModel {
    /// `poweroff`, `reset` (default) or `shutdown`.
    #[serde(default)]
    pub action: WatchdogAction,
}

/// `devices.tpm`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Tpm {
    /// No TPM when `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Keep the TPM state across restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
}

/// `devices.sound`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SoundDevice {
    /// Device name (alias `ua-<name>`).
    #[serde(default)]
    pub name: String,
    /// `ich9` (default) or `ac97`.
    #[serde(default)]
    pub model: SoundModel,
}

/// `devices.filesystems[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Filesystem {
    /// Name of the volume shared (also the mount tag).
    pub name: String,
    /// Share through virtiofs (`{}`; the only kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub virtiofs: Option<Value>,
}

/// `devices.video`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct VideoDevice {
    /// libvirt video model (`vga`, `virtio`, `bochs`, `cirrus`, `ramfb`).
    #[serde(rename = "type", default)]
    pub video_type: VideoType,
}

/// A `spec.domain.devices.inputs[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// Device name (alias `ua-<name>`).
    pub name: String,
    /// `usb` (default) or `virtio`.
    #[serde(default)]
    pub bus: InputBus,
    /// `tablet` (the only supported type).
    #[serde(default, rename = "type")]
    pub input_type: InputType,
}

/// `spec.domain.devices.gpus[]` (KubeVirt `v1.GPU`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    /// The device's name in the VMI (alias `ua-gpu-<name>`).
    #[serde(default)]
    pub name: String,
    /// The device plugin's resource (`nvidia.com/GP102GL_Tesla_P40`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub device_name: String,
    /// DRA's claim (`vmi.spec.resourceClaims[].name`; KubeVirt's inline
    /// `ClaimRequest`): with no `deviceName`, the GPU's device comes from
    /// `status.deviceStatus.gpuStatuses` ([`crate::device_status`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// DRA's request name (`resourceClaim.spec.devices.requests[].name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_name: Option<String>,
    /// A vGPU's display options.
    #[serde(
        default,
        rename = "virtualGPUOptions",
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_gpu_options: Option<VgpuOptions>,
    /// Device tag for the config drive's metadata (not supported yet).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tag: String,
}

/// `virtualGPUOptions` (KubeVirt `v1.VGPUOptions`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct VgpuOptions {
    /// The display backed by the vGPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<VgpuDisplayOptions>,
}

/// `virtualGPUOptions.display` (KubeVirt `v1.VGPUDisplayOptions`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct VgpuDisplayOptions {
    /// The display is on (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// A boot framebuffer until the guest's driver loads (default on).
    #[serde(default, rename = "ramFB", skip_serializing_if = "Option::is_none")]
    pub ram_fb: Option<super::FeatureState>,
}

/// `spec.domain.devices.hostDevices[]` (KubeVirt `v1.HostDevice`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct HostDevice {
    /// The device's name in the VMI (alias `ua-hostdevice-<name>`, or
    /// `ua-usb-host-<name>` for USB).
    #[serde(default)]
    pub name: String,
    /// The device plugin's resource (`kubevirt.io/storage`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub device_name: String,
    /// DRA's claim (`vmi.spec.resourceClaims[].name`; KubeVirt's inline
    /// `ClaimRequest`): with no `deviceName`, the device comes from
    /// `status.deviceStatus.hostDeviceStatuses` ([`crate::device_status`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// DRA's request name (`resourceClaim.spec.devices.requests[].name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_name: Option<String>,
    /// Device tag for the config drive's metadata (not supported yet).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tag: String,
}
