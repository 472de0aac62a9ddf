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
    let mut checks: Vec<(bool, String, &str)> = vec![
        (
            spec.access_credentials.is_some(),
            "spec.accessCredentials".into(),
            "access credentials",
        ),
        (
            dom.chassis.is_some(),
            "spec.domain.chassis".into(),
            "SMBIOS chassis",
        ),
        (
            dom.launch_security.is_some(),
            "spec.domain.launchSecurity".into(),
            "launch security (SEV)",
        ),
        (
            dom.io_threads_policy.is_some(),
            "spec.domain.ioThreadsPolicy".into(),
            "I/O threads policy",
        ),
        (
            dev.watchdog.is_some(),
            "spec.domain.devices.watchdog".into(),
            "watchdog",
        ),
        (dev.tpm.is_some(), "spec.domain.devices.tpm".into(), "TPM"),
        (
            dev.sound.is_some(),
            "spec.domain.devices.sound".into(),
            "sound",
        ),
        (
            !dev.gpus.is_empty(),
            "spec.domain.devices.gpus".into(),
            "GPUs",
        ),
        (
            !dev.host_devices.is_empty(),
            "spec.domain.devices.hostDevices".into(),
            "host devices",
        ),
        (
            !dev.filesystems.is_empty(),
            "spec.domain.devices.filesystems".into(),
            "virtiofs filesystems",
        ),
        (
            dev.client_passthrough.is_some(),
            "spec.domain.devices.clientPassthrough".into(),
            "USB redirection",
        ),
        (
            dev.downward_metrics.is_some(),
            "spec.domain.devices.downwardMetrics".into(),
            "downward metrics",
        ),
        (
            dev.video.is_some(),
            "spec.domain.devices.video".into(),
            "video device selection",
        ),
    ];
    if let Some(cpu) = &dom.cpu {
        checks.extend([
            (
                cpu.max_sockets != 0,
                "spec.domain.cpu.maxSockets".into(),
                "CPU hot-plug",
            ),
            (
                cpu.dedicated_cpu_placement,
                "spec.domain.cpu.dedicatedCpuPlacement".into(),
                "dedicated CPU placement",
            ),
            (
                cpu.isolate_emulator_thread,
                "spec.domain.cpu.isolateEmulatorThread".into(),
                "emulator thread isolation",
            ),
            (
                cpu.numa.is_some(),
                "spec.domain.cpu.numa".into(),
                "guest NUMA mapping",
            ),
            (
                cpu.realtime.is_some(),
                "spec.domain.cpu.realtime".into(),
                "realtime CPUs",
            ),
        ]);
    }
    if let Some(mem) = &dom.memory {
        let hotplug = match (&mem.max_guest, &mem.guest) {
            (Some(max), Some(guest)) => max.to_bytes().ok() != guest.to_bytes().ok(),
            (Some(_), None) => true,
            _ => false,
        };
        checks.extend([
            (
                mem.hugepages.is_some(),
                "spec.domain.memory.hugepages".into(),
                "hugepages",
            ),
            (
                hotplug,
                "spec.domain.memory.maxGuest".into(),
                "memory hot-plug",
            ),
        ]);
    }
    if let Some(fw) = &dom.firmware {
        checks.push((
            fw.acpi.is_some(),
            "spec.domain.firmware.acpi".into(),
            "ACPI SLIC/MSDM tables",
        ));
        let persistent = fw
            .bootloader
            .as_ref()
            .and_then(|b| b.efi.as_ref())
            .is_some_and(|e| e.persistent == Some(true));
        checks.push((
            persistent,
            "spec.domain.firmware.bootloader.efi.persistent".into(),
            "persistent EFI variables",
        ));
    }
    if let Some(f) = &dom.features {
        checks.extend([
            (
                f.hyperv.is_some(),
                "spec.domain.features.hyperv".into(),
                "Hyper-V enlightenments",
            ),
            (
                f.hyperv_passthrough.is_some(),
                "spec.domain.features.hypervPassthrough".into(),
                "Hyper-V passthrough",
            ),
        ]);
    }
    for (i, d) in dev.disks.iter().enumerate() {
        let p = format!("spec.domain.devices.disks[{i}]");
        checks.extend([
            (d.lun.is_some(), format!("{p}.lun"), "LUN disks"),
            (
                d.dedicated_io_thread == Some(true),
                format!("{p}.dedicatedIOThread"),
                "dedicated I/O threads",
            ),
            (
                d.block_size.is_some(),
                format!("{p}.blockSize"),
                "custom block sizes",
            ),
            (
                d.disk.as_ref().is_some_and(|t| t.pci_address.is_some()),
                format!("{p}.disk.pciAddress"),
                "disk PCI addresses",
            ),
        ]);
    }
    for (i, iface) in dev.interfaces.iter().enumerate() {
        let p = format!("spec.domain.devices.interfaces[{i}]");
        checks.extend([
            (
                iface.sriov.is_some(),
                format!("{p}.sriov"),
                "SR-IOV interfaces",
            ),
            (
                iface.slirp.is_some(),
                format!("{p}.slirp"),
                "slirp interfaces",
            ),
            (
                iface.passt.is_some(),
                format!("{p}.passt"),
                "passt interfaces",
            ),
            (
                iface.macvtap.is_some(),
                format!("{p}.macvtap"),
                "macvtap interfaces",
            ),
            (
                iface.binding.is_some(),
                format!("{p}.binding"),
                "network binding plugins",
            ),
        ]);
    }
    for (i, v) in spec.volumes.iter().enumerate() {
        let p = format!("spec.volumes[{i}]");
        let hotplug = v
            .persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.hotpluggable)
            || v.data_volume.as_ref().is_some_and(|c| c.hotpluggable);
        checks.push((hotplug, p.clone(), "hot-plugged volumes"));
        for kind in v.source_kinds() {
            let supported = matches!(
                kind,
                "containerDisk" | "emptyDisk" | "persistentVolumeClaim" | "dataVolume" | "hostDisk"
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
        "cloudInitNoCloud" => "cloudInitNoCloud volumes (cloud-init)",
        "cloudInitConfigDrive" => "cloudInitConfigDrive volumes (cloud-init)",
        "configMap" => "configMap volumes",
        "secret" => "secret volumes",
        "serviceAccount" => "serviceAccount volumes",
        "downwardAPI" => "downwardAPI volumes",
        "downwardMetrics" => "downwardMetrics volumes",
        "ephemeral" => "ephemeral volumes",
        "sysprep" => "sysprep volumes",
        "memoryDump" => "memoryDump volumes",
        _ => "this volume source",
    }
}
