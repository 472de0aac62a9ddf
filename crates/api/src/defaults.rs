//! KubeVirt's defaulting of a VMI, for the fields the launcher converts.
//!
//! In a cluster, virt-api's mutating webhook applies these before the VMI
//! reaches the launcher; in standalone mode nobody has, so the launcher does.
//! Applying them twice changes nothing. Rules from KubeVirt v1.6.6
//! `pkg/defaults` (`SetDefaultVirtualMachineInstanceSpec`, per-arch
//! `Set*Defaults`) and `kubevirt.io/api/core/v1` `SetDefaults_*`.

use crate::arch::Arch;
use crate::quantity::Quantity;
use crate::vmi::{
    CdromTarget, Cpu, CpuFeature, CpuFeaturePolicy, Disk, DiskTarget, FeatureHyperv, FeatureState,
    InputBus, InputType, Machine, Memory, Tray, VirtualMachineInstance,
};

/// `terminationGracePeriodSeconds` when unset.
pub const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// UUID namespace for firmware UUIDs derived in standalone mode.
const FIRMWARE_UUID_NAMESPACE: uuid::Uuid = uuid::Uuid::NAMESPACE_URL;

/// Applies KubeVirt's defaults in place, for `arch` when the VMI names no
/// architecture. Idempotent.
///
/// - `spec.architecture` ← `arch`; `machine.type` ← the arch's default;
/// - `requests.cpu` ← `limits.cpu` when only the limit is set;
/// - `memory.guest` ← `requests.memory`, else `limits.memory`;
/// - CPU topology: when cores, sockets and threads are all 0, sockets ←
///   `limits.cpu` (else `requests.cpu`, else 1, rounded up), cores = threads = 1;
///   CPU model ← `host-model` (`host-passthrough` on arm64);
/// - a disk for every volume no disk names (`SetDefaultVolumeDisk`);
/// - disk device `disk` when none is chosen, bus per architecture, CD-ROM
///   read-only with its tray closed; input bus `usb` and type `tablet`;
/// - `firmware.uuid` ← a UUID derived from namespace and name (virt-api would
///   pick a random one; deriving it keeps re-runs of one VMI on one domain);
/// - `terminationGracePeriodSeconds` ← 30;
/// - Hyper-V enlightenment dependencies ([`HYPERV_DEPENDENCIES`]).
pub fn apply(vmi: &mut VirtualMachineInstance, arch: Arch) {
    let arch = vmi.arch_or(arch);
    if vmi.spec.architecture.is_none() {
        vmi.spec.architecture = Some(arch.kubevirt_name().to_owned());
    }
    let spec = &mut vmi.spec;
    let dom = &mut spec.domain;

    let machine = dom.machine.get_or_insert_with(Machine::default);
    if machine.machine_type.is_empty() {
        machine.machine_type = arch.default_machine_type().to_owned();
    }

    let res = &mut dom.resources;
    if let Some(limit) = res.limits.get("cpu").cloned() {
        res.requests.entry("cpu".into()).or_insert(limit);
    }

    let memory = dom.memory.get_or_insert_with(Memory::default);
    if memory.guest.is_none() {
        let nonzero = |q: Option<&Quantity>| q.filter(|q| !q.is_zero()).cloned();
        memory.guest =
            nonzero(res.requests.get("memory")).or_else(|| nonzero(res.limits.get("memory")));
    }

    let cpu = dom.cpu.get_or_insert_with(Cpu::default);
    if cpu.cores == 0 && cpu.sockets == 0 && cpu.threads == 0 {
        let from = res.limits.get("cpu").or_else(|| res.requests.get("cpu"));
        let sockets = from
            .and_then(|q| q.value_ceil().ok())
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(1);
        cpu.sockets = sockets;
        cpu.cores = 1;
        cpu.threads = 1;
    }
    if cpu.model.is_empty() {
        cpu.model = arch.default_cpu_model().to_owned();
    }

    // The names that already have a disk or a filesystem, looked up once
    // per volume (a set, not a search of the disks per volume: 50,000
    // volumes were quadratic, issue 19).
    let mut named: std::collections::BTreeSet<String> = dom
        .devices
        .disks
        .iter()
        .map(|d| d.name.clone())
        .chain(dom.devices.filesystems.iter().map(|f| f.name.clone()))
        .collect();
    for volume in &spec.volumes {
        // KubeVirt defaults a VMI when it is created; a memory dump volume
        // is added to the running VMI later, so it never gets a disk (and
        // the launcher, which defaults every synced VMI again, must not
        // give it one).
        if volume.memory_dump.is_some() {
            continue;
        }
        if named.insert(volume.name.clone()) {
            dom.devices.disks.push(Disk {
                name: volume.name.clone(),
                ..Disk::default()
            });
        }
    }
    let bus = arch.default_disk_bus();
    for disk in &mut dom.devices.disks {
        if disk.disk.is_none() && disk.lun.is_none() && disk.cdrom.is_none() {
            disk.disk = Some(DiskTarget::default());
        }
        for target in [disk.disk.as_mut(), disk.lun.as_mut()]
            .into_iter()
            .flatten()
        {
            target.bus.get_or_insert(bus);
        }
        if let Some(CdromTarget {
            bus: b,
            readonly,
            tray,
        }) = disk.cdrom.as_mut()
        {
            b.get_or_insert(bus);
            readonly.get_or_insert(true);
            tray.get_or_insert(Tray::Closed);
        }
    }
    for input in &mut dom.devices.inputs {
        if input.bus == InputBus::Unset {
            input.bus = InputBus::Usb;
        }
        if input.input_type == InputType::Unset {
            input.input_type = InputType::Tablet;
        }
    }

    let ns = vmi.metadata.namespace.as_deref().unwrap_or("default");
    let name = &vmi.metadata.name;
    let firmware = vmi
        .spec
        .domain
        .firmware
        .get_or_insert_with(Default::default);
    if firmware.uuid.as_deref().is_none_or(str::is_empty) {
        let key = format!("kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}");
        firmware.uuid = Some(derived_uuid(&key));
    }
    vmi.spec
        .termination_grace_period_seconds
        .get_or_insert(DEFAULT_GRACE_PERIOD_SECONDS);
    apply_hyperv_dependencies(&mut vmi.spec.domain);
}

/// A Hyper-V enlightenment that needs another one enabled: (feature,
/// required feature), by their `spec.domain.features.hyperv` field names.
/// KubeVirt v1.6.6 `pkg/defaults` (`getHypervFeatureDependencies`), leaves
/// first so that a requirement filled in here is itself checked later.
pub const HYPERV_DEPENDENCIES: [(&str, &str); 5] = [
    ("evmcs", "vapic"),
    ("ipi", "vpindex"),
    ("tlbflush", "vpindex"),
    ("synictimer", "synic"),
    ("synic", "vpindex"),
];

/// State of one enlightenment by field name: `None` absent, else whether
/// it is enabled (`{}` counts as enabled, as API defaulting makes it).
pub fn hyperv_state(h: &FeatureHyperv, name: &str) -> Option<bool> {
    let st = |s: &Option<FeatureState>| s.as_ref().map(FeatureState::is_enabled);
    match name {
        "evmcs" => st(&h.evmcs),
        "vapic" => st(&h.vapic),
        "ipi" => st(&h.ipi),
        "tlbflush" => st(&h.tlbflush),
        "vpindex" => st(&h.vpindex),
        "synic" => st(&h.synic),
        "synictimer" => h.synictimer.as_ref().map(|t| t.enabled != Some(false)),
        _ => None,
    }
}

fn hyperv_state_mut<'a>(
    h: &'a mut FeatureHyperv,
    name: &str,
) -> Option<&'a mut Option<FeatureState>> {
    match name {
        "vapic" => Some(&mut h.vapic),
        "vpindex" => Some(&mut h.vpindex),
        "synic" => Some(&mut h.synic),
        _ => None,
    }
}

/// KubeVirt's `SetHypervFeatureDependencies`: an enabled enlightenment
/// whose requirement is not mentioned gets it enabled (a requirement the
/// user disabled is left for validation to refuse); an enabled `evmcs`
/// needs the `vmx` CPU feature with policy `require` (added, or its policy
/// changed).
fn apply_hyperv_dependencies(dom: &mut crate::vmi::DomainSpec) {
    let Some(h) = dom.features.as_mut().and_then(|f| f.hyperv.as_mut()) else {
        return;
    };
    for (feature, requires) in HYPERV_DEPENDENCIES {
        if hyperv_state(h, feature) == Some(true) && hyperv_state(h, requires).is_none() {
            if let Some(slot) = hyperv_state_mut(h, requires) {
                *slot = Some(FeatureState {
                    enabled: Some(true),
                });
            }
        }
    }
    if hyperv_state(h, "evmcs") == Some(true) {
        let cpu = dom.cpu.get_or_insert_with(Cpu::default);
        match cpu.features.iter_mut().find(|f| f.name == "vmx") {
            Some(f) => f.policy = CpuFeaturePolicy::Require,
            None => cpu.features.push(CpuFeature {
                name: "vmx".into(),
                policy: CpuFeaturePolicy::Require,
            }),
        }
    }
}

/// Gives a VMI that has no `metadata.uid` (a hand-written manifest run
/// without Kubernetes) a UID derived from its namespace and name, so its
/// socket directory and metadata are stable across runs.
pub fn fill_missing_uid(vmi: &mut VirtualMachineInstance) {
    if vmi.metadata.uid.as_deref().is_none_or(str::is_empty) {
        let key = format!(
            "kubevirt.io/v1/namespaces/{}/virtualmachineinstances/{}/uid",
            vmi.namespace(),
            vmi.metadata.name
        );
        vmi.metadata.uid = Some(derived_uuid(&key));
    }
}

/// The UUID (version 5, URL namespace) standalone mode derives from `key`
/// where KubeVirt would pick a random one: firmware UUIDs, UIDs, a VM's
/// firmware serial. Keys are `kubevirt.io/v1/namespaces/<ns>/<resource>/<name>[/<what>]`.
pub fn derived_uuid(key: &str) -> String {
    uuid::Uuid::new_v5(&FIRMWARE_UUID_NAMESPACE, key.as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmi::Bus;

    fn load(doc: &str) -> VirtualMachineInstance {
        crate::load::from_slice(doc.as_bytes()).unwrap()
    }

    const SATA: &str = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: vmi-sata}\nspec:\n  domain:\n    devices: {}\n    memory: {guest: 128Mi}\n    resources: {}\n  volumes:\n  - containerDisk: {image: x}\n    name: containerdisk\n";

    #[test]
    fn volume_without_disk_gets_a_default_disk_on_the_arch_bus() {
        let mut vmi = load(SATA);
        apply(&mut vmi, Arch::Amd64);
        let disks = &vmi.spec.domain.devices.disks;
        assert_eq!(disks.len(), 1);
        assert_eq!(disks[0].name, "containerdisk");
        assert_eq!(disks[0].disk.as_ref().unwrap().bus, Some(Bus::Sata));
        let mut vmi = load(SATA);
        apply(&mut vmi, Arch::Arm64);
        assert_eq!(
            vmi.spec.domain.devices.disks[0].disk.as_ref().unwrap().bus,
            Some(Bus::Virtio)
        );
        assert_eq!(
            vmi.spec.domain.cpu.as_ref().unwrap().model,
            "host-passthrough"
        );
        assert_eq!(
            vmi.spec.domain.machine.as_ref().unwrap().machine_type,
            "virt"
        );
    }

    #[test]
    fn a_volume_shared_through_virtiofs_gets_no_default_disk() {
        let mut vmi = load(&SATA.replace(
            "    devices: {}\n",
            "    devices:\n      filesystems: [{name: containerdisk, virtiofs: {}}]\n",
        ));
        apply(&mut vmi, Arch::Amd64);
        assert!(vmi.spec.domain.devices.disks.is_empty());
        assert_eq!(vmi.spec.domain.devices.filesystems.len(), 1);
    }

    #[test]
    fn idempotent() {
        let mut a = load(SATA);
        apply(&mut a, Arch::Amd64);
        let mut b = a.clone();
        apply(&mut b, Arch::Amd64);
        assert_eq!(a, b);
        // An architecture named by the VMI wins over the host's.
        let mut c = load(&SATA.replace("spec:\n", "spec:\n  architecture: s390x\n"));
        apply(&mut c, Arch::Amd64);
        assert_eq!(
            c.spec.domain.machine.unwrap().machine_type,
            "s390-ccw-virtio"
        );
    }

    #[test]
    fn memory_and_cpu_from_resources() {
        let mut vmi = load("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec:\n  domain:\n    resources:\n      requests: {memory: 64M}\n      limits: {cpu: 1500m, memory: 1Gi}\n");
        apply(&mut vmi, Arch::Amd64);
        let d = &vmi.spec.domain;
        assert_eq!(
            d.memory.as_ref().unwrap().guest.as_ref().unwrap().as_str(),
            "64M"
        );
        let cpu = d.cpu.as_ref().unwrap();
        assert_eq!((cpu.sockets, cpu.cores, cpu.threads), (2, 1, 1));
        assert_eq!(d.resources.requests["cpu"].as_str(), "1500m");
        assert_eq!(cpu.model, "host-model");
    }

    #[test]
    fn explicit_topology_is_kept_and_firmware_uuid_is_stable() {
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a, namespace: n}\nspec:\n  domain:\n    cpu: {cores: 2}\n    devices:\n      disks:\n      - name: c\n        cdrom: {}\n";
        let mut vmi = load(doc);
        apply(&mut vmi, Arch::Amd64);
        let cpu = vmi.spec.domain.cpu.as_ref().unwrap();
        assert_eq!((cpu.sockets, cpu.cores, cpu.threads), (0, 2, 0));
        let cd = vmi.spec.domain.devices.disks[0].cdrom.as_ref().unwrap();
        assert_eq!(
            (cd.bus, cd.readonly, cd.tray.as_ref().map(Tray::as_str)),
            (Some(Bus::Sata), Some(true), Some("closed"))
        );
        let mut again = load(doc);
        apply(&mut again, Arch::Amd64);
        let uuid = vmi.firmware_uuid().unwrap().to_owned();
        assert_eq!(uuid, again.spec.domain.firmware.unwrap().uuid.unwrap());
        assert!(uuid::Uuid::parse_str(&uuid).is_ok());
        assert_eq!(vmi.spec.termination_grace_period_seconds, Some(30));
    }
}
