//! `status.deviceStatus`: the devices DRA gave a VMI's `gpus` and
//! `hostDevices` (KubeVirt v1.6.6 `v1.DeviceStatus`). virt-controller and
//! virt-handler fill it from the pod's resource claims before they send
//! the VMI to the launcher; the launcher reads each device's
//! `deviceResourceClaimStatus.attributes.pciAddress` (a host PCI device) or
//! `mDevUUID` (a mediated device) from it, by the device's name (KubeVirt's
//! `virtwrap/device/hostdevice/dra`).
//!
//! The whole document is already bounded (node budget, nesting) and
//! refused on duplicate keys by [`crate::doc`]; here each list is bounded
//! by [`MAX_DEVICE_STATUSES`] and each string by [`MAX_STATUS_STRING`].

use serde::Deserialize;
use serde_json::Value;

use crate::error::FieldError;
use crate::limits::MAX_DEVICES;
use crate::VirtualMachineInstance;

/// Most entries in `gpuStatuses` and in `hostDeviceStatuses`: each device
/// is a PCI device of the guest and needs a PCI bus of its own, so the
/// bound of the other device lists ([`MAX_DEVICES`]) holds for them too.
pub const MAX_DEVICE_STATUSES: usize = MAX_DEVICES;

/// Longest string of an entry, in bytes (KubeVirt's admitters' `maxStrLen`;
/// a PCI address has 12 characters, an mdev UUID 36).
pub const MAX_STATUS_STRING: usize = 256;

/// `status.deviceStatus` (KubeVirt `v1.DeviceStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceStatus {
    /// The devices of `spec.domain.devices.gpus`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub gpu_statuses: Vec<DeviceStatusInfo>,
    /// The devices of `spec.domain.devices.hostDevices`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub host_device_statuses: Vec<DeviceStatusInfo>,
}

/// One entry of a [`DeviceStatus`] list (KubeVirt `v1.DeviceStatusInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceStatusInfo {
    /// The device's name in `gpus` or `hostDevices`.
    #[serde(default)]
    pub name: String,
    /// What DRA allocated for it.
    #[serde(default)]
    pub device_resource_claim_status: Option<DeviceResourceClaimStatus>,
}

/// KubeVirt `v1.DeviceResourceClaimStatus`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceResourceClaimStatus {
    /// The host device's name as the DRA driver calls it.
    #[serde(default)]
    pub name: Option<String>,
    /// The ResourceClaim object it comes from.
    #[serde(default)]
    pub resource_claim_name: Option<String>,
    /// Its attributes (one of the two is set).
    #[serde(default)]
    pub attributes: Option<DeviceAttribute>,
}

/// KubeVirt `v1.DeviceAttribute`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct DeviceAttribute {
    /// Host PCI address, `dddd:bb:ss.f`.
    #[serde(default, rename = "pciAddress")]
    pub pci_address: Option<String>,
    /// Mediated device UUID.
    #[serde(default, rename = "mDevUUID")]
    pub mdev_uuid: Option<String>,
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// Reads `vmi.status.deviceStatus`: `None` when the status has none (or
/// `null`, as Go's `*DeviceStatus` is then nil).
///
/// # Errors
/// A [`FieldError`] naming the field for a value of the wrong shape, a
/// list longer than [`MAX_DEVICE_STATUSES`] or a string longer than
/// [`MAX_STATUS_STRING`].
pub fn of(vmi: &VirtualMachineInstance) -> Result<Option<DeviceStatus>, FieldError> {
    const PATH: &str = "status.deviceStatus";
    let Some(v) = vmi
        .status
        .as_ref()
        .and_then(|s| s.get("deviceStatus"))
        .filter(|v| !v.is_null())
    else {
        return Ok(None);
    };
    for list in ["gpuStatuses", "hostDeviceStatuses"] {
        if let Some(n) = v.get(list).and_then(Value::as_array).map(Vec::len) {
            if n > MAX_DEVICE_STATUSES {
                return Err(FieldError::new(
                    format!("{PATH}.{list}"),
                    format!(
                        "{n} entries are more than {MAX_DEVICE_STATUSES}, the most a VMI may have"
                    ),
                ));
            }
        }
    }
    let status: DeviceStatus = serde_path_to_error::deserialize(v)
        .map_err(|e| FieldError::new(format!("{PATH}.{}", e.path()), e.inner().to_string()))?;
    for (list, entries) in [
        ("gpuStatuses", &status.gpu_statuses),
        ("hostDeviceStatuses", &status.host_device_statuses),
    ] {
        for (i, e) in entries.iter().enumerate() {
            let at = format!("{PATH}.{list}[{i}]");
            let claim = e.device_resource_claim_status.as_ref();
            let attrs = claim.and_then(|c| c.attributes.as_ref());
            let strings = [
                ("name", Some(&e.name)),
                (
                    "deviceResourceClaimStatus.name",
                    claim.and_then(|c| c.name.as_ref()),
                ),
                (
                    "deviceResourceClaimStatus.resourceClaimName",
                    claim.and_then(|c| c.resource_claim_name.as_ref()),
                ),
                (
                    "deviceResourceClaimStatus.attributes.pciAddress",
                    attrs.and_then(|a| a.pci_address.as_ref()),
                ),
                (
                    "deviceResourceClaimStatus.attributes.mDevUUID",
                    attrs.and_then(|a| a.mdev_uuid.as_ref()),
                ),
            ];
            for (field, s) in strings {
                if let Some(s) = s.filter(|s| s.len() > MAX_STATUS_STRING) {
                    return Err(FieldError::new(
                        format!("{at}.{field}"),
                        format!("{} bytes are more than {MAX_STATUS_STRING}", s.len()),
                    ));
                }
            }
        }
    }
    Ok(Some(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(status: &str) -> VirtualMachineInstance {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: m}}\nspec:\n  domain: {{memory: {{guest: 1Gi}}}}\nstatus: {status}\n"
        );
        crate::load::from_slice(doc.as_bytes()).unwrap()
    }

    #[test]
    fn attributes_by_device_name() {
        assert_eq!(of(&vmi("{}")).unwrap(), None);
        assert_eq!(of(&vmi("{deviceStatus: null}")).unwrap(), None);
        let s = of(&vmi("{deviceStatus: {gpuStatuses: [{name: g, deviceResourceClaimStatus: {name: gpu-0, resourceClaimName: c, attributes: {pciAddress: '0000:65:00.0'}}}], hostDeviceStatuses: [{name: h, deviceResourceClaimStatus: {attributes: {mDevUUID: u}}}, {name: x}]}}")).unwrap().unwrap();
        assert_eq!(s.gpu_statuses[0].name, "g");
        let a = |e: &DeviceStatusInfo| {
            e.device_resource_claim_status
                .as_ref()
                .and_then(|c| c.attributes.clone())
        };
        assert_eq!(
            a(&s.gpu_statuses[0]).unwrap().pci_address.as_deref(),
            Some("0000:65:00.0")
        );
        assert_eq!(
            a(&s.host_device_statuses[0]).unwrap().mdev_uuid.as_deref(),
            Some("u")
        );
        assert_eq!(a(&s.host_device_statuses[1]), None);
        let s = of(&vmi("{deviceStatus: {gpuStatuses: null}}"))
            .unwrap()
            .unwrap();
        assert!(s.gpu_statuses.is_empty() && s.host_device_statuses.is_empty());
    }

    #[test]
    fn bad_shapes_and_sizes_are_refused_by_field() {
        let e = of(&vmi("{deviceStatus: {gpuStatuses: [{name: g, deviceResourceClaimStatus: {attributes: {pciAddress: 7}}}]}}")).unwrap_err();
        assert_eq!(
            e.path,
            "status.deviceStatus.gpuStatuses[0].deviceResourceClaimStatus.attributes.pciAddress"
        );
        let long = "a".repeat(MAX_STATUS_STRING + 1);
        let e = of(&vmi(&format!(
            "{{deviceStatus: {{hostDeviceStatuses: [{{name: h, deviceResourceClaimStatus: {{attributes: {{mDevUUID: {long}}}}}}}]}}}}"
        )))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "status.deviceStatus.hostDeviceStatuses[0].deviceResourceClaimStatus.attributes.mDevUUID: 257 bytes are more than 256"
        );
        let many = vec!["{name: g}"; MAX_DEVICE_STATUSES + 1].join(", ");
        let e = of(&vmi(&format!(
            "{{deviceStatus: {{gpuStatuses: [{many}]}}}}"
        )))
        .unwrap_err();
        assert_eq!(e.path, "status.deviceStatus.gpuStatuses");
    }
}
