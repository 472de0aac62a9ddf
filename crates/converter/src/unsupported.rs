//! Refusal of VMI features this launcher does not implement yet.
//!
//! KubeVirt maps each of these to domain XML; converting a VMI while
//! dropping one of them would start a different VM than the one asked for
//! (a VM without its NICs, its cloud-init disk, its TPM ...). So the first
//! such field is reported by path and the conversion stops.

use api::VirtualMachineInstance;

use crate::ConvertError;

/// Returns the first field that requests an unimplemented feature.
///
/// # Errors
/// [`ConvertError::Unsupported`] naming the field and the feature.
pub fn check(vmi: &VirtualMachineInstance) -> Result<(), ConvertError> {
    let spec = &vmi.spec;
    let dom = &spec.domain;
    let dev = &dom.devices;
    let plugin_features: Vec<String> = dev
        .interfaces
        .iter()
        .map(|i| {
            format!(
                "the network binding plugin {:?}",
                i.plugin_name().unwrap_or_default()
            )
        })
        .collect();
    let mut checks: Vec<(bool, String, &str)> = vec![(
        dom.launch_security.is_some(),
        "spec.domain.launchSecurity".into(),
        "launch security (SEV)",
    )];
    checks.push((
        vmi.metadata
            .annotations
            .get(crate::pci_ports::PLACE_ON_ROOT_COMPLEX)
            .is_some_and(|v| v == "true"),
        format!(
            "metadata.annotations[{}]",
            crate::pci_ports::PLACE_ON_ROOT_COMPLEX
        ),
        "placing PCI devices on the root complex",
    ));
    if let Some(fw) = &dom.firmware {
        checks.push((
            fw.acpi.is_some(),
            "spec.domain.firmware.acpi".into(),
            "ACPI SLIC/MSDM tables",
        ));
    }
    for (i, d) in dev.disks.iter().enumerate() {
        let p = format!("spec.domain.devices.disks[{i}]");
        checks.extend([(
            d.block_size
                .as_ref()
                .and_then(|b| b.match_volume.as_ref())
                .is_some_and(|m| m.is_enabled()),
            format!("{p}.blockSize.matchVolume"),
            "block sizes probed from the volume",
        )]);
    }
    for (i, iface) in dev.interfaces.iter().enumerate() {
        let p = format!("spec.domain.devices.interfaces[{i}]");
        checks.extend([
            (
                iface.slirp.is_some(),
                format!("{p}.slirp"),
                "slirp interfaces",
            ),
            (
                iface.macvtap.is_some(),
                format!("{p}.macvtap"),
                "macvtap interfaces",
            ),
        ]);
        // The passt plugin is applied by the converter itself
        // (`crate::passt`); every other plugin needs its sidecar.
        if let Some(name) = iface.plugin_name() {
            checks.push((
                name != crate::passt::PLUGIN_NAME,
                format!("{p}.binding"),
                plugin_features[i].as_str(),
            ));
        }
    }
    for (i, v) in spec.volumes.iter().enumerate() {
        let p = format!("spec.volumes[{i}]");
        for kind in v.source_kinds() {
            let supported = matches!(
                kind,
                "containerDisk"
                    | "emptyDisk"
                    | "persistentVolumeClaim"
                    | "dataVolume"
                    | "hostDisk"
                    | "cloudInitNoCloud"
                    | "cloudInitConfigDrive"
                    | "configMap"
                    | "secret"
                    | "serviceAccount"
                    | "downwardAPI"
                    | "sysprep"
                    | "downwardMetrics"
                    | "ephemeral"
                    // A dump target, no disk (crate::disks refuses a disk on it).
                    | "memoryDump"
            );
            if !supported {
                checks.push((true, format!("{p}.{kind}"), kind_feature(kind)));
            }
        }
    }
    match checks.into_iter().find(|(hit, _, _)| *hit) {
        Some((_, path, feature)) => Err(ConvertError::unsupported(path, feature)),
        None => Ok(()),
    }
}

fn kind_feature(kind: &str) -> &'static str {
    match kind {
        "downwardMetrics" => "downwardMetrics volumes",
        "sysprep" => "sysprep volumes",
        _ => "this volume source",
    }
}
