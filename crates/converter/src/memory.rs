//! `<memory>`, `<maxMemory>` and `<memoryBacking>` from `spec.domain.memory`
//! (after defaulting, which falls back to `resources.requests.memory`, then
//! `limits.memory`) and the virtiofs filesystems that need shared memory
//! (KubeVirt converter: memory, hugepages and memfd parts).

use api::quantity::{Quantity, QuantityRangeError};
use api::VirtualMachineInstance;
use domain::{
    Hugepages, MaxMemory, MemoryAccess, MemoryBacking, MemoryDevice, MemoryDeviceTarget,
    MemorySource, MemoryValue,
};

use crate::ConvertError;

/// Annotation that keeps hugepages on hugetlbfs files instead of memfd
/// (`kubevirt.io/memfd: "false"`).
pub const MEMFD_ANNOTATION: &str = "kubevirt.io/memfd";

/// The converted memory settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted {
    /// `<memory unit='b'>`: the guest memory at boot.
    pub memory: MemoryValue,
    /// `<maxMemory unit='b' slots='0'>` when `maxGuest` exceeds `guest`.
    pub max_memory: Option<MaxMemory>,
    /// `<memoryBacking>` for hugepages and virtiofs.
    pub backing: Option<MemoryBacking>,
    /// The backing is memfd: libvirt then needs a guest NUMA cell, which the
    /// caller adds when the CPU part made none (one cell with every vCPU).
    pub memfd: bool,
    /// Hugepage size in bytes, when hugepages back the guest.
    pub hugepage_size: Option<u64>,
}

fn bytes(q: &Quantity, path: &str) -> Result<u64, ConvertError> {
    q.to_bytes().map_err(|e| match e {
        QuantityRangeError::Negative(_) => ConvertError::invalid(
            path,
            format!("Memory size '{q}' must be greater than or equal to 0"),
        ),
        QuantityRangeError::TooLarge(_) => ConvertError::invalid(path, e.to_string()),
    })
}

/// Memory of the domain:
/// - `<memory unit='b'>BYTES</memory>` from `memory.guest` (fractional
///   quantities rounded down: `2222222200m` → 2222222);
/// - `maxGuest` above `guest` → `<maxMemory unit='b' slots='0'>` (the
///   virtio-mem device is attached later, at memory hot-plug);
/// - `hugepages` → `<memoryBacking><hugepages/>` (no page size: the pod
///   mounts the right hugetlbfs) plus `<source type='memfd'/>` unless the
///   annotation `kubevirt.io/memfd` is `"false"`;
/// - any virtiofs filesystem → `<access mode='shared'/>` and memfd.
///
/// # Errors
/// [`ConvertError::Invalid`] when no guest memory is set, it is negative or
/// too large, `maxGuest` is below `guest`, or the hugepage size is not a
/// quantity, larger than the guest memory or does not divide it (KubeVirt's
/// admission messages).
pub fn convert(vmi: &VirtualMachineInstance) -> Result<Converted, ConvertError> {
    let path = "spec.domain.memory.guest";
    let mem = vmi.spec.domain.memory.as_ref();
    let guest_q = mem.and_then(|m| m.guest.as_ref()).ok_or_else(|| {
        ConvertError::invalid(
            path,
            "no guest memory: set spec.domain.memory.guest or spec.domain.resources.requests.memory",
        )
    })?;
    let guest = bytes(guest_q, path)?;
    let mut out = Converted {
        memory: MemoryValue {
            unit: "b".into(),
            value: guest,
        },
        max_memory: None,
        backing: None,
        memfd: false,
        hugepage_size: None,
    };
    if let Some(max_q) = mem.and_then(|m| m.max_guest.as_ref()) {
        let mpath = "spec.domain.memory.maxGuest";
        let max = bytes(max_q, mpath)?;
        if max < guest {
            return Err(ConvertError::invalid(
                mpath,
                format!("'{max_q}' must be greater than or equal to the guest memory '{guest_q}'"),
            ));
        }
        if max > guest {
            out.max_memory = Some(MaxMemory {
                unit: "b".into(),
                slots: Some(0),
                value: max,
            });
        }
    }
    let memfd_allowed = vmi
        .metadata
        .annotations
        .get(MEMFD_ANNOTATION)
        .is_none_or(|v| v != "false");
    let mut backing = MemoryBacking::default();
    if let Some(hp) = mem.and_then(|m| m.hugepages.as_ref()) {
        let hpath = "spec.domain.memory.hugepages.pageSize";
        let size_q: Quantity = hp
            .page_size
            .parse()
            .map_err(|e| ConvertError::invalid(hpath, format!("'{}': {e}", hp.page_size)))?;
        let size = bytes(&size_q, hpath)?;
        if size == 0 {
            return Err(ConvertError::invalid(hpath, "must be greater than 0"));
        }
        if size > guest {
            return Err(ConvertError::invalid(
                path,
                format!(
                    "'{guest_q}' must be equal to or larger than page size spec.domain.memory.hugepages.pageSize '{}'",
                    hp.page_size
                ),
            ));
        }
        if guest % size != 0 {
            return Err(ConvertError::invalid(
                path,
                format!(
                    "'{guest_q}' is not a multiple of the page size spec.domain.memory.hugepages.pageSize '{}'",
                    hp.page_size
                ),
            ));
        }
        backing.hugepages = Some(Hugepages::default());
        out.hugepage_size = Some(size);
        if memfd_allowed {
            out.memfd = true;
        }
    }
    if !vmi.spec.domain.devices.filesystems.is_empty() {
        backing.access = Some(MemoryAccess {
            mode: "shared".into(),
        });
        out.memfd = true;
    }
    if out.memfd {
        backing.source = Some(MemorySource {
            source_type: "memfd".into(),
        });
    }
    if backing != MemoryBacking::default() {
        out.backing = Some(backing);
    }
    Ok(out)
}

/// Where the VMI's boot memory is recorded (virt-controller sets it when
/// the VMI starts).
pub const GUEST_AT_BOOT: &str = "status.memory.guestAtBoot";

/// The virtio-mem device of memory hot-plug (KubeVirt
/// `liveupdate/memory.BuildMemoryDevice`, kubevirt-facts §8.4): `size` =
/// `maxGuest` − `status.memory.guestAtBoot`, `requested` = `guest` −
/// `guestAtBoot`, both in bytes, on guest NUMA node 0, in blocks of
/// [`api::cluster::memory_hotplug_block`].
///
/// # Errors
/// [`ConvertError::Invalid`] naming the field: no `guest`, `maxGuest` or
/// `guestAtBoot` (KubeVirt dereferences them), a quantity that is not a
/// size, or a difference below 0 (KubeVirt's `Memory size '<q>' must be
/// greater than or equal to 0`).
pub fn hotplug_device(vmi: &VirtualMachineInstance) -> Result<MemoryDevice, ConvertError> {
    let mem = vmi.spec.domain.memory.clone().unwrap_or_default();
    let need = |q: Option<Quantity>, path: &str| {
        let q = q.ok_or_else(|| ConvertError::invalid(path, "is required for memory hot-plug"))?;
        bytes(&q, path)
    };
    let guest = need(mem.guest.clone(), "spec.domain.memory.guest")?;
    let max = need(mem.max_guest.clone(), "spec.domain.memory.maxGuest")?;
    let at_boot_q = vmi
        .status
        .as_ref()
        .and_then(|s| s.pointer("/memory/guestAtBoot"))
        .and_then(serde_json::Value::as_str)
        .map(|s| {
            Quantity::parse(s)
                .map_err(|e| ConvertError::invalid(GUEST_AT_BOOT, format!("'{s}': {e}")))
        })
        .transpose()?;
    let at_boot = need(at_boot_q, GUEST_AT_BOOT)?;
    let diff = |total: u64, path: &str| {
        total.checked_sub(at_boot).ok_or_else(|| {
            ConvertError::invalid(
                path,
                format!(
                    "Memory size '-{}' must be greater than or equal to 0",
                    Quantity::binary_si(at_boot - total)
                ),
            )
        })
    };
    let b = |value: u64| MemoryValue {
        unit: "b".into(),
        value,
    };
    Ok(MemoryDevice {
        model: "virtio-mem".into(),
        target: MemoryDeviceTarget {
            size: Some(b(diff(max, "spec.domain.memory.maxGuest")?)),
            node: Some("0".into()),
            block: Some(b(api::cluster::memory_hotplug_block(&mem))),
            requested: Some(b(diff(guest, "spec.domain.memory.guest")?)),
            current: None,
        },
        alias: None,
        address: None,
    })
}

#[cfg(test)]
mod tests {
    use api::Arch;

    use crate::{convert, ConvertContext, VirtType};

    fn dom(spec: &str, annotations: &str) -> Result<domain::Domain, crate::ConvertError> {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: m, uid: u1{annotations}}}\nspec:\n  domain:\n{spec}"
        );
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        convert(&v, &ConvertContext::new(Arch::Amd64, VirtType::Kvm))
    }

    fn xml(spec: &str, annotations: &str) -> String {
        dom(spec, annotations).unwrap().to_xml().unwrap()
    }

    #[test]
    fn hugepages_use_memfd_and_one_numa_cell() {
        let spec = "    cpu: {sockets: 2, cores: 1, threads: 1}\n    memory: {guest: 1Gi, hugepages: {pageSize: 2Mi}}\n";
        let x = xml(spec, "");
        assert!(x.contains("<memoryBacking>\n    <hugepages/>\n    <source type=\"memfd\"/>\n  </memoryBacking>"), "{x}");
        assert!(
            x.contains("<cell id=\"0\" cpus=\"0-1\" memory=\"1048576\" unit=\"KiB\"/>"),
            "{x}"
        );
        // High-performance VMIs do not report free pages.
        assert!(x.contains("freePageReporting=\"off\""), "{x}");
        // kubevirt.io/memfd: "false" keeps hugetlbfs files: no memfd, no cell.
        let x = xml(spec, ", annotations: {kubevirt.io/memfd: \"false\"}");
        assert!(x.contains("<hugepages/>"), "{x}");
        assert!(!x.contains("memfd") && !x.contains("<cell"), "{x}");
    }

    #[test]
    fn hugepages_must_fit_and_divide_the_guest_memory() {
        let e = dom("    memory: {guest: 1Gi, hugepages: {pageSize: 2Gi}}\n", "")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "spec.domain.memory.guest: '1Gi' must be equal to or larger than page size spec.domain.memory.hugepages.pageSize '2Gi'");
        let e = dom(
            "    memory: {guest: 1Gi, hugepages: {pageSize: huge}}\n",
            "",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("spec.domain.memory.hugepages.pageSize: 'huge'"),
            "{e}"
        );
    }

    #[test]
    fn max_guest_above_guest_sets_max_memory() {
        let x = xml("    memory: {guest: 1Gi, maxGuest: 4Gi}\n", "");
        assert!(
            x.contains("<maxMemory unit=\"b\" slots=\"0\">4294967296</maxMemory>"),
            "{x}"
        );
        assert!(x.contains("<memory unit=\"b\">1073741824</memory>"), "{x}");
        // Equal: no hot-plug.
        let x = xml("    memory: {guest: 1Gi, maxGuest: 1Gi}\n", "");
        assert!(!x.contains("maxMemory"), "{x}");
        let e = dom("    memory: {guest: 2Gi, maxGuest: 1Gi}\n", "")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "spec.domain.memory.maxGuest: '1Gi' must be greater than or equal to the guest memory '2Gi'"
        );
    }

    #[test]
    fn the_virtio_mem_device_of_a_hot_plug() {
        let doc = |mem: &str, status: &str| {
            let d = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: m}}\nspec:\n  domain:\n    memory: {mem}\n{status}");
            api::load_vmi(d.as_bytes(), Arch::Amd64).unwrap()
        };
        let at_boot = "status: {memory: {guestAtBoot: 1Gi}}\n";
        let d = super::hotplug_device(&doc("{guest: 2Gi, maxGuest: 4Gi}", at_boot)).unwrap();
        let x = d.to_xml().unwrap();
        assert_eq!(
            x,
            "<memory model=\"virtio-mem\"><target><size unit=\"b\">3221225472</size><node>0</node><block unit=\"b\">2097152</block><requested unit=\"b\">1073741824</requested></target></memory>"
        );
        // 1Gi hugepages: 1 GiB blocks.
        let d = super::hotplug_device(&doc(
            "{guest: 2Gi, maxGuest: 4Gi, hugepages: {pageSize: 1Gi}}",
            at_boot,
        ))
        .unwrap();
        assert_eq!(d.target.block.unwrap().value, 1 << 30);
        // Below the boot memory, or without it: refused by field.
        let e = super::hotplug_device(&doc("{guest: 512Mi, maxGuest: 4Gi}", at_boot))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "spec.domain.memory.guest: Memory size '-512Mi' must be greater than or equal to 0"
        );
        let e = super::hotplug_device(&doc("{guest: 2Gi, maxGuest: 4Gi}", ""))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "status.memory.guestAtBoot: is required for memory hot-plug"
        );
        let e = super::hotplug_device(&doc("{guest: 2Gi}", at_boot))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("spec.domain.memory.maxGuest: "), "{e}");
    }
}
