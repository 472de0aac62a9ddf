//! `spec.volumes[]`: each volume's one source.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::quantity::Quantity;

use super::HostDiskType;

/// A `spec.volumes[]` entry: a name and exactly one source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Volume name (DNS-1123 label), referenced by disks.
    pub name: String,
    /// Disk image shipped in a container image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_disk: Option<ContainerDiskSource>,
    /// Scratch disk created by the launcher, discarded with the VMI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_disk: Option<EmptyDiskSource>,
    /// A PersistentVolumeClaim mounted into the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PvcSource>,
    /// A CDI DataVolume (a PVC underneath).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_volume: Option<DataVolumeSource>,
    /// A disk image on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_disk: Option<HostDiskSource>,
    /// A PVC the guest reads through a qcow2 overlay: its writes are
    /// discarded with the VMI, the PVC is never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<EphemeralSource>,
    /// cloud-init NoCloud data, served to the guest as an ISO labelled `cidata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_no_cloud: Option<CloudInitSource>,
    /// cloud-init OpenStack config drive data, an ISO labelled `config-2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_config_drive: Option<CloudInitSource>,
    /// A ConfigMap's files, served as an ISO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// A Secret's files, served as an ISO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretSource>,
    /// The pod's service account token, CA and namespace, served as an ISO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSource>,
    /// Downward API files (pod labels, annotations, ...), served as an ISO.
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<DownwardApiSource>,
    /// Not implemented yet; refused when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub downward_metrics: Option<Value>,
    /// Windows answer files from a ConfigMap or Secret, served as an ISO
    /// labelled `unattendCD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sysprep: Option<SysprepSource>,
    /// KubeVirt's memory dump volume (`MemoryDumpVolumeSource`: a
    /// hot-plugged claim, `claimName`, `readOnly`, `hotpluggable`): the
    /// target of VirtualMachineMemoryDump, which virt-handler mounts under
    /// `/var/run/kubevirt/hotplug-disks/<name>/`; never a disk of the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_dump: Option<PvcSource>,
}

/// A reference to a Secret in the VMI's namespace (`LocalObjectReference`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Secret name.
    #[serde(default)]
    pub name: String,
}

/// `volumes[].cloudInitNoCloud` and `volumes[].cloudInitConfigDrive` (the
/// two share their fields in KubeVirt). Inline text wins over base64
/// (`readRawOrBase64Data`); a secret reference is read from the secret
/// mounted at `/var/run/kubevirt-private/secret/<volume>/` (files
/// `userdata` or `userData`, `networkdata` or `networkData`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct CloudInitSource {
    /// User data as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// User data, base64 (standard alphabet, padded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_base64: Option<String>,
    /// User data from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_secret_ref: Option<SecretRef>,
    /// Network configuration as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<String>,
    /// Network configuration, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_base64: Option<String>,
    /// Network configuration from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_secret_ref: Option<SecretRef>,
}

/// `volumes[].configMap`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSource {
    /// ConfigMap name.
    #[serde(default)]
    pub name: String,
    /// The pod starts even when the ConfigMap is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// ISO volume label (default `cfgdata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// `volumes[].sysprep`: exactly one of a ConfigMap or a Secret holding
/// `autounattend.xml` or `unattend.xml` (KubeVirt `SysprepSource`).
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SysprepSource {
    /// The ConfigMap (`LocalObjectReference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<LocalRef>,
    /// The Secret (`LocalObjectReference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<LocalRef>,
}

/// `LocalObjectReference`: an object in the VMI's namespace, by name.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalRef {
    /// The object's name.
    #[serde(default)]
    pub name: String,
}

/// `volumes[].secret`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct SecretSource {
    /// Secret name.
    #[serde(default)]
    pub secret_name: String,
    /// The pod starts even when the Secret is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// ISO volume label (default `cfgdata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// `volumes[].serviceAccount`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountSource {
    /// Service account name.
    #[serde(default)]
    pub service_account_name: String,
}

/// `volumes[].downwardAPI`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiSource {
    /// Kubernetes `DownwardAPIVolumeFile`s (kubelet writes them; kept verbatim).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::vec_value))]
    pub fields: Vec<Value>,
    /// ISO volume label (default `cfgdata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// `volumes[].containerDisk`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ContainerDiskSource {
    /// Image reference; the launcher sees the image's disk as a file.
    #[serde(default)]
    pub image: String,
    /// Path of the disk inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Pull policy (virt-handler's concern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
}

/// `volumes[].emptyDisk`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct EmptyDiskSource {
    /// Virtual size of the disk.
    pub capacity: Quantity,
}

/// `volumes[].persistentVolumeClaim`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct PvcSource {
    /// Claim name.
    #[serde(default)]
    pub claim_name: String,
    /// Mount read-only.
    #[serde(default)]
    pub read_only: bool,
    /// Hot-plugged volume; not implemented yet.
    #[serde(default)]
    pub hotpluggable: bool,
}

/// `volumes[].ephemeral`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct EphemeralSource {
    /// The claim whose image backs the overlay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PvcSource>,
}

/// `volumes[].dataVolume`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSource {
    /// DataVolume name.
    #[serde(default)]
    pub name: String,
    /// Hot-plugged volume; not implemented yet.
    #[serde(default)]
    pub hotpluggable: bool,
}

/// `volumes[].hostDisk`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct HostDiskSource {
    /// Path of the image on the host (virt-handler mounts its directory).
    #[serde(default)]
    pub path: String,
    /// `Disk` (must exist) or `DiskOrCreate`.
    #[serde(default, rename = "type")]
    pub disk_type: HostDiskType,
    /// Size when created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Quantity>,
    /// Shared between VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
}

impl Volume {
    /// Names of the sources set on this volume (KubeVirt allows exactly one).
    pub fn source_kinds(&self) -> Vec<&'static str> {
        let mut k = Vec::new();
        let mut add = |set: bool, name: &'static str| {
            if set {
                k.push(name);
            }
        };
        add(self.container_disk.is_some(), "containerDisk");
        add(self.empty_disk.is_some(), "emptyDisk");
        add(
            self.persistent_volume_claim.is_some(),
            "persistentVolumeClaim",
        );
        add(self.data_volume.is_some(), "dataVolume");
        add(self.host_disk.is_some(), "hostDisk");
        add(self.ephemeral.is_some(), "ephemeral");
        add(self.cloud_init_no_cloud.is_some(), "cloudInitNoCloud");
        add(
            self.cloud_init_config_drive.is_some(),
            "cloudInitConfigDrive",
        );
        add(self.config_map.is_some(), "configMap");
        add(self.secret.is_some(), "secret");
        add(self.service_account.is_some(), "serviceAccount");
        add(self.downward_api.is_some(), "downwardAPI");
        add(self.downward_metrics.is_some(), "downwardMetrics");
        add(self.sysprep.is_some(), "sysprep");
        add(self.memory_dump.is_some(), "memoryDump");
        k
    }
}
