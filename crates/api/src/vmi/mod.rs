//! Serde types for `kubevirt.io/v1` `VirtualMachineInstance` (KubeVirt v1.6.6
//! `staging/src/kubevirt.io/api/core/v1/types.go`, `schema.go`).
//!
//! JSON keys are KubeVirt's (camelCase). Unknown keys are tolerated, because
//! every KubeVirt release adds fields; a known key with the wrong type is an
//! error that names its path (see [`crate::load`]). Fields whose feature the
//! launcher does not implement yet are kept as raw JSON (`Option<Value>`) so the
//! converter can refuse them by name instead of silently dropping them.
//!
//! This module holds the object, its metadata and `spec`/`spec.domain`; the
//! parts below them live in one file per concern and are re-exported here,
//! so every type is `api::vmi::<Type>`: `cpu` (CPU, I/O threads, memory),
//! `firmware` (machine, boot loader, kernel boot), `features` (clock,
//! features, Hyper-V), `devices`, `disks`, `volumes`, `access`
//! (access credentials), `networks` (networks and interfaces), `enums` (the
//! named values of string fields, see `string_enum`). The status is
//! kept verbatim (`Value`); readers of it live with their users (e.g. the
//! storage crate's claim facts).

mod access;
#[macro_use]
mod string_enum;

mod cpu;
mod devices;
mod disks;
mod enums;
mod features;
mod firmware;
mod networks;
mod volumes;

pub use access::*;
pub use cpu::*;
pub use devices::*;
pub use disks::*;
pub use enums::*;
pub use features::*;
pub use firmware::*;
pub use networks::*;
pub use volumes::*;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::quantity::Quantity;

/// A KubeVirt VirtualMachineInstance object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstance {
    /// `kubevirt.io/v1` (also accepted: `kubevirt.io/v1alpha3`).
    #[serde(default)]
    pub api_version: String,
    /// `VirtualMachineInstance`.
    #[serde(default)]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: VmiSpec,
    /// Observed state, kept verbatim (virt-handler fills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub status: Option<Value>,
}

/// Kubernetes `ObjectMeta`, the fields the launcher reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name (DNS-1123 subdomain).
    #[serde(default)]
    pub name: String,
    /// Namespace; `default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Kubernetes UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations (several `kubevirt.io/...` ones change conversion).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `spec` of a VMI.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct VmiSpec {
    /// Virtual hardware.
    #[serde(default)]
    pub domain: DomainSpec,
    /// Volumes the disks refer to by name.
    #[serde(default)]
    pub volumes: Vec<Volume>,
    /// Networks the interfaces refer to by name.
    #[serde(default)]
    pub networks: Vec<Network>,
    /// Seconds between the termination signal and a hard kill; default 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// Guest hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Guest DNS subdomain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    /// CPU architecture: `amd64`, `arm64`, `ppc64le`, `s390x`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// `Paused` starts the domain paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_strategy: Option<StartStrategy>,
    /// Credentials put into the guest (SSH keys through cloud-init).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_credentials: Vec<AccessCredential>,
    /// DRA's resource claims of the pod (Kubernetes' `PodResourceClaim`s,
    /// which virt-controller copies into the launcher pod): the names a
    /// DRA device's `claimName` refers to. The launcher reads only their
    /// names (admission, [`crate::validate`]); the devices' allocations
    /// come from `status.deviceStatus`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<PodResourceClaim>,
}

/// `spec.resourceClaims[]` (Kubernetes core/v1 `PodResourceClaim`, as
/// KubeVirt v1.6.6's `VirtualMachineInstanceSpec.ResourceClaims` has it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaim {
    /// The claim's name inside the pod (what `claimName` refers to).
    #[serde(default)]
    pub name: String,
    /// An existing `ResourceClaim` in the VMI's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_name: Option<String>,
    /// A `ResourceClaimTemplate` from which a claim is made for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_template_name: Option<String>,
}

/// `spec.domain`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct DomainSpec {
    /// Pod resources (`requests`/`limits` of `cpu` and `memory`).
    #[serde(default)]
    pub resources: ResourceRequirements,
    /// CPU topology and model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// Guest memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// Machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// Firmware (UUID, serial, boot loader, kernel boot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    /// Guest clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Clock>,
    /// Machine features (ACPI, APIC, SMM ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    /// Devices.
    #[serde(default)]
    pub devices: Devices,
    /// `shared`, `auto` or `supplementalPool` (see the converter's
    /// `iothreads` module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_threads_policy: Option<IoThreadsPolicy>,
    /// Threads of the `supplementalPool` policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_threads: Option<IoThreads>,
    /// SMBIOS chassis (type 3) fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis: Option<Chassis>,
    /// Not implemented yet; refused when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "arbitrary", arbitrary(with = crate::fuzzing::opt_value))]
    pub launch_security: Option<Value>,
}

/// `spec.domain.chassis`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct Chassis {
    /// Manufacturer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// Version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Serial number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// Asset tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset: Option<String>,
    /// SKU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
}

/// `spec.domain.resources`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Requests by resource name (`cpu`, `memory`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
    /// Limits by resource name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    /// Do not add the VMI overhead to the pod's memory request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overcommit_guest_overhead: bool,
}

impl VirtualMachineInstance {
    /// Namespace, `default` when unset.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The architecture `spec.architecture` names when it is one this
    /// launcher knows, else `default` (an unknown one is refused by
    /// validation).
    pub fn arch_or(&self, default: crate::Arch) -> crate::Arch {
        self.spec
            .architecture
            .as_deref()
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    }

    /// `spec.domain.firmware.uuid` when set and not empty: the SMBIOS
    /// system UUID and the domain's UUID.
    pub fn firmware_uuid(&self) -> Option<&str> {
        self.spec
            .domain
            .firmware
            .as_ref()
            .and_then(|f| f.uuid.as_deref())
            .filter(|u| !u.is_empty())
    }

    /// KubeVirt's `util.IsNonRootVMI`: `status.runtimeUser` is not 0, or
    /// the deprecated `kubevirt.io/nonroot` annotation is present.
    pub fn is_non_root(&self) -> bool {
        self.metadata
            .annotations
            .contains_key("kubevirt.io/nonroot")
            || self
                .status
                .as_ref()
                .and_then(|s| s.get("runtimeUser"))
                .and_then(serde_json::Value::as_u64)
                .is_some_and(|u| u != 0)
    }

    /// virt-api's `markAsNonroot` (the cluster's default, without the
    /// `Root` feature gate): `status.runtimeUser` becomes 107.
    pub fn mark_as_non_root(&mut self) {
        let status = self
            .status
            .get_or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if let Some(map) = status.as_object_mut() {
            map.insert("runtimeUser".into(), serde_json::Value::from(107u32));
        }
    }

    /// UID, empty when unset.
    pub fn uid(&self) -> &str {
        self.metadata.uid.as_deref().unwrap_or("")
    }

    /// libvirt domain name: `<namespace>_<name>` (KubeVirt `VMINamespaceKeyFunc`).
    pub fn domain_name(&self) -> String {
        format!("{}_{}", self.namespace(), self.metadata.name)
    }

    /// The guest's hostname as KubeVirt derives it: `spec.hostname`, else
    /// the name's first dot-separated part cut to 63 bytes
    /// ([`crate::names::hostname`], KubeVirt's `dns.SanitizeHostname`).
    pub fn hostname(&self) -> String {
        crate::names::hostname(&self.metadata.name, self.spec.hostname.as_deref())
    }

    /// Grace period in seconds (`terminationGracePeriodSeconds`, default 30).
    pub fn grace_period_seconds(&self) -> i64 {
        self.spec
            .termination_grace_period_seconds
            .unwrap_or(crate::defaults::DEFAULT_GRACE_PERIOD_SECONDS)
    }
}
