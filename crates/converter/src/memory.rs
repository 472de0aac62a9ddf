//! `<memory>`, `<maxMemory>` and `<memoryBacking>` from `spec.domain.memory`
//! (after defaulting, which falls back to `resources.requests.memory`, then
//! `limits.memory`) and the virtiofs filesystems that need shared memory
//! (KubeVirt converter: memory, hugepages and memfd parts).

use api::quantity::{Quantity, QuantityRangeError};
use api::VirtualMachineInstance;
use domain::{Hugepages, MaxMemory, MemoryAccess, MemoryBacking, MemorySource, MemoryValue};

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
}
