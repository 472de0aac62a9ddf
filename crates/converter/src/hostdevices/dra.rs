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
//! checks only that there are as many devices as DRA devices in the spec;
//! an entry whose name or device an earlier device has is refused here by
//! field, where KubeVirt's domain fails at define (duplicate alias, host
//! device given twice).

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
    taken: &[HostDevice],
) -> Result<Vec<HostDevice>, ConvertError> {
    build(vmi, names, &GENERIC, taken, |_, _| {})
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
    taken: &[HostDevice],
) -> Result<Vec<HostDevice>, ConvertError> {
    let mut out = build(vmi, names, &GPU, taken, |d, name| {
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
/// adjusts each mediated device (by its status name). `taken` are the
/// host devices the domain already has.
///
/// # Errors
/// [`ConvertError::Invalid`] for a `status.deviceStatus` of the wrong
/// shape or size (by field), and for an entry whose name or device an
/// earlier entry (or, for the device, `taken`) already has: libvirt
/// refuses a duplicate alias and a host device given twice at define,
/// KubeVirt's domain then fails there; [`ConvertError::Host`] with KubeVirt's
/// messages, the field named: no `status.deviceStatus`, a malformed
/// `pciAddress` or `mDevUUID`, a status name that is not an alias, and a
/// count of devices other than the count of DRA devices in the spec.
fn build(
    vmi: &VirtualMachineInstance,
    names: &[&str],
    kind: &Kind,
    taken: &[HostDevice],
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
            unique(&d, taken, &out, &at(i), &from, &addr, &e.name)?;
            out.push(d);
        }
    }
    for (i, e) in entries.iter().enumerate() {
        let a = attrs(e);
        if let (None, Some(uuid)) = (a.pci_address, a.mdev_uuid) {
            let from = format!("{}.deviceResourceClaimStatus.attributes.mDevUUID", at(i));
            let mut d = mdev_device(&uuid, &from, alias(i, e)?).map_err(failed)?;
            unique(&d, taken, &out, &at(i), &from, &uuid, &e.name)?;
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

/// What libvirt compares to find a host device given twice: the PCI
/// address (already canonical from [`pci_device`]) or the mediated
/// device's UUID (libvirt parses it, so case and dashes do not count).
fn source_key(d: &HostDevice) -> Option<String> {
    let a = d.source.address.as_ref()?;
    match &a.uuid {
        Some(u) => Some(format!("mdev {}", u.replace('-', "").to_ascii_lowercase())),
        None => Some(format!(
            "pci {:?} {:?} {:?} {:?}",
            a.domain, a.bus, a.slot, a.function
        )),
    }
}

/// Refuses `d` (from the status entry at `entry`, its attribute at
/// `from` with the value `value`) when an earlier device of this list
/// has its alias, or any earlier device (`taken`, `earlier`) its source.
fn unique(
    d: &HostDevice,
    taken: &[HostDevice],
    earlier: &[HostDevice],
    entry: &str,
    from: &str,
    value: &str,
    name: &str,
) -> Result<(), ConvertError> {
    let alias = |x: &HostDevice| x.alias.as_ref().map(|a| a.name.clone());
    if earlier.iter().any(|o| alias(o) == alias(d)) {
        return Err(ConvertError::invalid(
            format!("{entry}.name"),
            format!(
                "{name:?} is the name of an earlier entry too (libvirt refuses the alias {} twice)",
                alias(d).unwrap_or_default()
            ),
        ));
    }
    let key = source_key(d);
    if let Some(o) = taken.iter().chain(earlier).find(|o| source_key(o) == key) {
        return Err(ConvertError::invalid(
            from,
            format!(
                "{value:?} is the host device of {} already (libvirt refuses a host device twice)",
                alias(o).unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::convert;
    use crate::ConvertContext;
    use api::{Arch, VirtualMachineInstance};

    fn vmi(devices: &str, status: &str) -> VirtualMachineInstance {
        let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: h}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n    devices:\n{devices}  resourceClaims: [{{name: c, resourceClaimTemplateName: t}}]\nstatus: {status}\n");
        api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap()
    }

    fn ctx() -> ConvertContext {
        ConvertContext::new(Arch::Amd64, crate::VirtType::Kvm)
    }

    const UUID: &str = "4b20d080-1b54-4048-85b3-a6a62d165c01";

    #[test]
    fn pci_host_device_and_gpu_from_the_device_status() {
        let v = vmi(
            "      hostDevices: [{name: nic, claimName: c1, requestName: r1}]\n      gpus: [{name: g, claimName: c, requestName: r2}]\n",
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
            "      gpus: [{name: g, claimName: c, requestName: r2}]\n",
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
    fn host_pci_domains_schema_uuids_and_duplicates() {
        // A host PCI address on another PCI domain (segment), as KubeVirt's
        // ParsePciAddress takes it.
        let hd = "      hostDevices: [{name: h, claimName: c, requestName: r}]\n";
        let one = |attrs: &str| {
            format!("{{deviceStatus: {{hostDeviceStatuses: [{{name: h, deviceResourceClaimStatus: {{attributes: {attrs}}}}}]}}}}")
        };
        let d = convert(&vmi(hd, &one("{pciAddress: '0001:3b:00.1'}")), &ctx()).unwrap();
        let a = d[0].source.address.as_ref().unwrap();
        assert_eq!(
            (a.domain.as_deref(), a.bus.as_deref(), a.function.as_deref()),
            (Some("0x0001"), Some("0x3b"), Some("0x1"))
        );
        // Only libvirt's UUID shapes (a digit short failed libvirt's schema).
        let short = &UUID[..35];
        for bad in [
            short,
            "-",
            "4b20d080-1b54-4048-85b3a6a62d165c01-",
            "{4b20d080-1b54-4048-85b3-a6a62d165c01}",
        ] {
            let e = convert(&vmi(hd, &one(&format!("{{mDevUUID: '{bad}'}}"))), &ctx())
                .unwrap_err()
                .to_string();
            assert!(
                e.ends_with("(from status.deviceStatus.hostDeviceStatuses[0].deviceResourceClaimStatus.attributes.mDevUUID) is not a mediated device UUID"),
                "{bad}: {e}"
            );
        }
        let bare = UUID.replace('-', "").to_uppercase();
        let d = convert(&vmi(hd, &one(&format!("{{mDevUUID: {bare}}}"))), &ctx()).unwrap();
        assert_eq!(
            d[0].source.address.as_ref().unwrap().uuid.as_deref(),
            Some(bare.as_str())
        );

        // Two entries of one name: libvirt refuses the alias twice.
        let two = "      gpus:\n      - {name: a, claimName: c, requestName: r}\n      - {name: b, claimName: c, requestName: s}\n";
        let e = convert(&vmi(two, "{deviceStatus: {gpuStatuses: [{name: a, deviceResourceClaimStatus: {attributes: {pciAddress: '0000:65:00.0'}}}, {name: a, deviceResourceClaimStatus: {attributes: {pciAddress: '0000:66:00.0'}}}]}}"), &ctx())
            .unwrap_err()
            .to_string();
        assert_eq!(e, "status.deviceStatus.gpuStatuses[1].name: \"a\" is the name of an earlier entry too (libvirt refuses the alias ua-dra-gpu-a twice)");
        // One device for two entries, within a list (an mdev UUID in
        // another spelling too) and across lists and device plugins.
        let e = convert(&vmi(two, &format!("{{deviceStatus: {{gpuStatuses: [{{name: a, deviceResourceClaimStatus: {{attributes: {{mDevUUID: {UUID}}}}}}}, {{name: b, deviceResourceClaimStatus: {{attributes: {{mDevUUID: {bare}}}}}}}]}}}}")), &ctx())
            .unwrap_err()
            .to_string();
        assert_eq!(e, format!("status.deviceStatus.gpuStatuses[1].deviceResourceClaimStatus.attributes.mDevUUID: \"{bare}\" is the host device of ua-dra-gpu-a already (libvirt refuses a host device twice)"));
        let both = "      hostDevices: [{name: h, claimName: c, requestName: r}]\n      gpus: [{name: g, claimName: c, requestName: s}, {name: p, deviceName: nvidia.com/P40}]\n";
        let status = "{deviceStatus: {hostDeviceStatuses: [{name: h, deviceResourceClaimStatus: {attributes: {pciAddress: '0000:3b:00.1'}}}], gpuStatuses: [{name: g, deviceResourceClaimStatus: {attributes: {pciAddress: '0000:3B:00.1'}}}]}}";
        let mut c = ctx();
        c.device_plugin_env
            .insert("PCI_RESOURCE_NVIDIA_COM_P40".into(), "0000:65:00.0".into());
        let e = convert(&vmi(both, status), &c).unwrap_err().to_string();
        assert_eq!(e, "status.deviceStatus.gpuStatuses[0].deviceResourceClaimStatus.attributes.pciAddress: \"0000:3B:00.1\" is the host device of ua-dra-hostdevice-h already (libvirt refuses a host device twice)");
        let ok = status.replace("3B:00.1", "66:00.0");
        assert_eq!(convert(&vmi(both, &ok), &c).unwrap().len(), 3);
        let e = convert(&vmi(both, &status.replace("3B:00.1", "65:00.0")), &c)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("\"0000:65:00.0\" is the host device of ua-gpu-p already (libvirt refuses a host device twice)"), "{e}");
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
