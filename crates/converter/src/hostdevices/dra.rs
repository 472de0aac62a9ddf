//! `hostDevices` and `gpus` from DRA resource claims, as KubeVirt v1.6.6
//! gives them to the domain (`virtwrap/device/hostdevice/dra`): a device
//! with no `deviceName` and a `claimName`/`requestName` gets the host
//! device DRA allocated for it, which virt-controller and virt-handler
//! record in `status.deviceStatus.{hostDeviceStatuses,gpuStatuses}[]`
//! under the device's name ([`api::device_status`]):
//!
//! - `deviceResourceClaimStatus.attributes.pciAddress` → `<hostdev
//!   type='pci' managed='no'>` (the DRA driver binds it to vfio-pci);
//! - else `mDevUUID` → `<hostdev type='mdev' model='vfio-pci'>`; for GPUs
//!   with the vGPU display rules of the device-plugin path.
//!
//! PCI devices first, then mediated devices, each in the status' order;
//! aliases `ua-dra-hostdevice-<name>` and `ua-dra-gpu-<name>`. KubeVirt
//! checks only that there are as many devices as DRA devices in the spec.

use api::device_status::DeviceStatusInfo;
use api::VirtualMachineInstance;
use domain::HostDevice;

use super::{default_display, gpu_display, mdev_device, pci_device, set_display};
use crate::ConvertError;

/// Whether a device is DRA's (KubeVirt's `IsHostDeviceDRA`/`IsGPUDRA`):
/// no `deviceName`, and its inline `ClaimRequest` present (`claimName` or
/// `requestName` given).
pub(super) fn is_dra(
    device_name: &str,
    claim_name: &Option<String>,
    request_name: &Option<String>,
) -> bool {
    device_name.is_empty() && (claim_name.is_some() || request_name.is_some())
}

/// One list's words: KubeVirt's wrapping message, its "no status" message,
/// its count noun, the alias prefix and the status list.
struct Kind {
    failed: &'static str,
    no_status: &'static str,
    noun: &'static str,
    alias_prefix: &'static str,
    list: &'static str,
}

const GENERIC: Kind = Kind {
    failed: "failed to create dra generic host-devices",
    no_status: "vmi has dra host-devices devices but no device status found",
    noun: "HostDevice/s",
    alias_prefix: "dra-hostdevice-",
    list: "hostDeviceStatuses",
};

const GPU: Kind = Kind {
    failed: "failed to create DRA GPU host-devices",
    no_status: "vmi has dra gpu devices but no device status found",
    noun: "GPU/s",
    alias_prefix: "dra-gpu-",
    list: "gpuStatuses",
};

/// The host devices of the VMI's DRA `hostDevices` (`names`, in spec
/// order; KubeVirt's `CreateDRAHostDevices`).
///
/// # Errors
/// See [`build`].
pub(super) fn generic(
    vmi: &VirtualMachineInstance,
    names: &[&str],
) -> Result<Vec<HostDevice>, ConvertError> {
    build(vmi, names, &GENERIC, |_, _| {})
}

/// The host devices of the VMI's DRA `gpus` (`names`, in spec order;
/// KubeVirt's `CreateDRAGPUHostDevices`): a vGPU's display as its GPU's
/// `virtualGPUOptions.display` sets it, and when no GPU of the VMI sets
/// one (`any_display_set` false), on the first vGPU.
///
/// # Errors
/// See [`build`].
pub(super) fn gpus(
    vmi: &VirtualMachineInstance,
    names: &[&str],
    any_display_set: bool,
) -> Result<Vec<HostDevice>, ConvertError> {
    let mut out = build(vmi, names, &GPU, |d, name| {
        // KubeVirt finds the GPU by the status entry's name.
        let spec = vmi.spec.domain.devices.gpus.iter().find(|g| g.name == name);
        set_display(d, spec.and_then(gpu_display));
    })?;
    let first_mdev = out.iter().position(|d| d.hostdev_type == "mdev");
    if let Some(i) = first_mdev {
        default_display(&mut out[i..], any_display_set);
    }
    Ok(out)
}

/// The PCI, then mediated, devices of `kind`'s status list; `on_mdev`
/// adjusts each mediated device (by its status name).
///
/// # Errors
/// [`ConvertError::Invalid`] for a `status.deviceStatus` of the wrong
/// shape or size (by field); [`ConvertError::Host`] with KubeVirt's
/// messages, the field named: no `status.deviceStatus`, a malformed
/// `pciAddress` or `mDevUUID`, a status name that is not an alias, and a
/// count of devices other than the count of DRA devices in the spec.
fn build(
    vmi: &VirtualMachineInstance,
    names: &[&str],
    kind: &Kind,
    mut on_mdev: impl FnMut(&mut HostDevice, &str),
) -> Result<Vec<HostDevice>, ConvertError> {
    let failed = |e: String| ConvertError::Host(format!("{}: {e}", kind.failed));
    let Some(status) = api::device_status::of(vmi)? else {
        return Err(failed(format!("{} (status.deviceStatus)", kind.no_status)));
    };
    let entries = if kind.list == GPU.list {
        &status.gpu_statuses
    } else {
        &status.host_device_statuses
    };
    let at = |i: usize| format!("status.deviceStatus.{}[{i}]", kind.list);
    let attrs = |e: &DeviceStatusInfo| {
        e.device_resource_claim_status
            .as_ref()
            .and_then(|c| c.attributes.clone())
            .unwrap_or_default()
    };
    let alias = |i: usize, e: &DeviceStatusInfo| {
        crate::user_alias(
            &format!("{}.name", at(i)),
            &format!("{}{}", kind.alias_prefix, e.name),
        )
    };
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if let Some(addr) = attrs(e).pci_address {
            let from = format!("{}.deviceResourceClaimStatus.attributes.pciAddress", at(i));
            let d = pci_device(&addr, &from, alias(i, e)?)
                .map_err(|m| failed(format!("failed to create PCI device for {}: {m}", e.name)))?;
            out.push(d);
        }
    }
    for (i, e) in entries.iter().enumerate() {
        let a = attrs(e);
        if let (None, Some(uuid)) = (a.pci_address, a.mdev_uuid) {
            let from = format!("{}.deviceResourceClaimStatus.attributes.mDevUUID", at(i));
            let mut d = mdev_device(&uuid, &from, alias(i, e)?).map_err(failed)?;
            on_mdev(&mut d, &e.name);
            out.push(d);
        }
    }
    if names.len() != out.len() {
        let aliases: Vec<&str> = out
            .iter()
            .filter_map(|d| d.alias.as_ref().map(|a| a.name.as_str()))
            .collect();
        return Err(failed(format!(
            "the number of DRA {} do not match the number of devices: {} in the spec ({}), {} from status.deviceStatus.{}[].deviceResourceClaimStatus.attributes ({})",
            kind.noun,
            names.len(),
            names.join(", "),
            out.len(),
            kind.list,
            aliases.join(", ")
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::convert;
    use crate::ConvertContext;
    use api::{Arch, VirtualMachineInstance};

    fn vmi(devices: &str, status: &str) -> VirtualMachineInstance {
        let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: h}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n    devices:\n{devices}status: {status}\n");
        api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap()
    }

    fn ctx() -> ConvertContext {
        ConvertContext::new(Arch::Amd64, crate::VirtType::Kvm)
    }

    const UUID: &str = "4b20d080-1b54-4048-85b3-a6a62d165c01";

    #[test]
    fn pci_host_device_and_gpu_from_the_device_status() {
        let v = vmi(
            "      hostDevices: [{name: nic, claimName: c1, requestName: r1}]\n      gpus: [{name: g, claimName: c2, requestName: r2}]\n",
            "{deviceStatus: {hostDeviceStatuses: [{name: nic, deviceResourceClaimStatus: {resourceClaimName: c1, attributes: {pciAddress: '0000:3b:00.1'}}}], gpuStatuses: [{name: g, deviceResourceClaimStatus: {attributes: {pciAddress: '0000:65:00.0'}}}]}}",
        );
        let d = convert(&v, &ctx()).unwrap();
        assert_eq!(d.len(), 2);
        for (dev, alias, bus, func) in [
            (&d[0], "ua-dra-hostdevice-nic", "0x3b", "0x1"),
            (&d[1], "ua-dra-gpu-g", "0x65", "0x0"),
        ] {
            assert_eq!(dev.hostdev_type, "pci");
            assert_eq!(dev.mode.as_deref(), Some("subsystem"));
            assert_eq!(dev.managed.as_deref(), Some("no"));
            assert_eq!(dev.alias.as_ref().unwrap().name, alias);
            let a = dev.source.address.as_ref().unwrap();
            assert_eq!(a.address_type, "");
            assert_eq!(
                (a.domain.as_deref(), a.bus.as_deref(), a.slot.as_deref()),
                (Some("0x0000"), Some(bus), Some("0x00"))
            );
            assert_eq!(a.function.as_deref(), Some(func));
            assert_eq!(dev.display, None);
        }
        // A migration target gets none (KubeVirt's `!isMigrationTarget`),
        // even without a device status.
        let mut c = ctx();
        c.migration_target = true;
        assert!(convert(&v, &c).unwrap().is_empty());
        let bare = vmi(
            "      gpus: [{name: g, claimName: c2, requestName: r2}]\n",
            "{}",
        );
        assert!(convert(&bare, &c).unwrap().is_empty());
    }

    #[test]
    fn mdev_gpus_get_kubevirts_display() {
        let status = format!("{{deviceStatus: {{gpuStatuses: [{{name: a, deviceResourceClaimStatus: {{attributes: {{mDevUUID: {UUID}}}}}}}, {{name: p, deviceResourceClaimStatus: {{attributes: {{pciAddress: '0000:65:00.0'}}}}}}, {{name: b, deviceResourceClaimStatus: {{attributes: {{mDevUUID: {}}}}}}}]}}}}", UUID.replace("c01", "c02"));
        let three = "      gpus:\n      - {name: a, claimName: c, requestName: r}\n      - {name: p, claimName: c, requestName: q}\n      - {name: b, claimName: c, requestName: s}\n";
        let d = convert(&vmi(three, &status), &ctx()).unwrap();
        // PCI first, then the vGPUs in the status' order; the first vGPU
        // gets the default display.
        let kinds: Vec<(&str, &str)> = d
            .iter()
            .map(|d| {
                (
                    d.hostdev_type.as_str(),
                    d.alias.as_ref().unwrap().name.as_str(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("pci", "ua-dra-gpu-p"),
                ("mdev", "ua-dra-gpu-a"),
                ("mdev", "ua-dra-gpu-b")
            ]
        );
        assert_eq!(d[1].model.as_deref(), Some("vfio-pci"));
        assert_eq!(d[1].mode.as_deref(), Some("subsystem"));
        assert_eq!(
            d[1].source.address.as_ref().unwrap().uuid.as_deref(),
            Some(UUID)
        );
        assert_eq!(
            (d[1].display.as_deref(), d[1].ramfb.as_deref()),
            (Some("on"), Some("on"))
        );
        assert_eq!(
            (d[2].display.as_deref(), d[2].ramfb.as_deref()),
            (None, None)
        );
        assert_eq!(d[0].display, None);
        // A GPU's own display options: no default display elsewhere.
        let own = "      gpus:\n      - {name: a, claimName: c, requestName: r}\n      - {name: p, claimName: c, requestName: q}\n      - {name: b, claimName: c, requestName: s, virtualGPUOptions: {display: {ramFB: {enabled: false}}}}\n";
        let d = convert(&vmi(own, &status), &ctx()).unwrap();
        assert_eq!(
            (d[1].display.as_deref(), d[1].ramfb.as_deref()),
            (None, None)
        );
        assert_eq!(
            (d[2].display.as_deref(), d[2].ramfb.as_deref()),
            (Some("on"), None)
        );
    }

    #[test]
    fn missing_status_count_mismatch_and_bad_attributes_are_refused() {
        let gpu = "      gpus: [{name: g, claimName: c, requestName: r}]\n";
        let e = convert(&vmi(gpu, "{}"), &ctx()).unwrap_err().to_string();
        assert_eq!(
            e,
            "failed to create DRA GPU host-devices: vmi has dra gpu devices but no device status found (status.deviceStatus)"
        );
        let hd = "      hostDevices: [{name: h, claimName: c, requestName: r}]\n";
        let e = convert(&vmi(hd, "{phase: Scheduled}"), &ctx())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "failed to create dra generic host-devices: vmi has dra host-devices devices but no device status found (status.deviceStatus)"
        );
        // An entry without attributes: no device for the GPU.
        let e = convert(
            &vmi(gpu, "{deviceStatus: {gpuStatuses: [{name: g}]}}"),
            &ctx(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "failed to create DRA GPU host-devices: the number of DRA GPU/s do not match the number of devices: 1 in the spec (g), 0 from status.deviceStatus.gpuStatuses[].deviceResourceClaimStatus.attributes ()"
        );
        let e = convert(
            &vmi(hd, "{deviceStatus: {hostDeviceStatuses: [{name: h, deviceResourceClaimStatus: {attributes: {pciAddress: '3b:00.1'}}}]}}"),
            &ctx(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "failed to create dra generic host-devices: failed to create PCI device for h: \"3b:00.1\" (from status.deviceStatus.hostDeviceStatuses[0].deviceResourceClaimStatus.attributes.pciAddress) is not a PCI address"
        );
        let e = convert(
            &vmi(hd, "{deviceStatus: {hostDeviceStatuses: [{name: h, deviceResourceClaimStatus: {attributes: {mDevUUID: \"x'/>\"}}}]}}"),
            &ctx(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.ends_with("(from status.deviceStatus.hostDeviceStatuses[0].deviceResourceClaimStatus.attributes.mDevUUID) is not a mediated device UUID"),
            "{e}"
        );
        let e = convert(
            &vmi(hd, "{deviceStatus: {hostDeviceStatuses: [{name: \"h<\", deviceResourceClaimStatus: {attributes: {pciAddress: '0000:3b:00.1'}}}]}}"),
            &ctx(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("status.deviceStatus.hostDeviceStatuses[0].name: \"dra-hostdevice-h<\" contains '<'"),
            "{e}"
        );
        let e = convert(&vmi(hd, "{deviceStatus: {hostDeviceStatuses: 3}}"), &ctx())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("status.deviceStatus.hostDeviceStatuses: "),
            "{e}"
        );
    }
}
