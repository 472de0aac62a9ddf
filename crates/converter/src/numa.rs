//! Guest NUMA cells mirroring the host cells of the pinned CPUs
//! (`spec.domain.cpu.numa.guestMappingPassthrough`; KubeVirt v1.6.6
//! converter `vcpu` NUMA mapping, facts section 4.2).

use api::VirtualMachineInstance;
use domain::{
    CpuTune, HugePage, Hugepages, MemNode, MemoryAllocation, MemoryBacking, NumaCell, NumaTune,
    NumaTuneMemory,
};

use crate::{ConvertContext, ConvertError};

/// One host NUMA node: its id and CPUs (`/sys/devices/system/node/node<N>/cpulist`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostNumaCell {
    /// Host node id.
    pub id: u32,
    /// Host CPUs of the node.
    pub cpus: Vec<u32>,
}

/// The NUMA part of the domain.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted {
    /// `<cpu><numa><cell id cpus memory unit='b'/>`.
    pub cells: Vec<NumaCell>,
    /// `<numatune>`: strict memory on the host nodes, one `<memnode>` per cell.
    pub numatune: NumaTune,
}

fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// With `guestMappingPassthrough`: one guest cell per host node that holds
/// pinned vCPUs (in host node order), with those vCPUs; the guest memory
/// split evenly across the cells in whole hugepages (the remainder pages to
/// the first cells); `<numatune>` strict on those host nodes with one
/// `<memnode>` per cell; per-cell `<hugepages><page nodeset=…/>` and
/// `<allocation mode='immediate'/>` in `backing`. `None` without it.
///
/// `tune` is the vCPU pinning ([`crate::cputune`]), `guest` the guest
/// memory and `page` the hugepage size, both in bytes.
///
/// # Errors
/// [`ConvertError::Invalid`] without dedicated CPUs or hugepages (KubeVirt:
/// `passing through a numa topology is restricted to VMIs with hugepages
/// enabled`); [`ConvertError::Host`] when the host's NUMA topology is
/// unknown or a pinned CPU is in no node.
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    tune: Option<&CpuTune>,
    guest: u64,
    page: Option<u64>,
    backing: &mut Option<MemoryBacking>,
) -> Result<Option<Converted>, ConvertError> {
    let path = "spec.domain.cpu.numa.guestMappingPassthrough";
    let wanted = vmi
        .spec
        .domain
        .cpu
        .as_ref()
        .and_then(|c| c.numa.as_ref())
        .is_some_and(|n| n.guest_mapping_passthrough.is_some());
    if !wanted {
        return Ok(None);
    }
    let tune = tune.ok_or_else(|| {
        ConvertError::invalid(path, "needs spec.domain.cpu.dedicatedCpuPlacement")
    })?;
    let page = page.ok_or_else(|| {
        ConvertError::invalid(
            path,
            "passing through a numa topology is restricted to VMIs with hugepages enabled",
        )
    })?;
    let host = ctx.host_numa.as_deref().ok_or_else(|| {
        ConvertError::Host(format!(
            "{path} needs the node's NUMA topology, which this host did not provide"
        ))
    })?;
    let mut by_node: Vec<(u32, Vec<u32>)> = Vec::new();
    for pin in &tune.vcpupin {
        let cpu: u32 = pin.cpuset.parse().map_err(|_| {
            ConvertError::Host(format!(
                "vCPU {} is pinned to {:?}, not one CPU",
                pin.vcpu, pin.cpuset
            ))
        })?;
        let node = host
            .iter()
            .find(|n| n.cpus.contains(&cpu))
            .ok_or_else(|| ConvertError::Host(format!("host CPU {cpu} is in no NUMA node")))?;
        match by_node.iter_mut().find(|(id, _)| *id == node.id) {
            Some((_, v)) => v.push(pin.vcpu),
            None => by_node.push((node.id, vec![pin.vcpu])),
        }
    }
    by_node.sort_by_key(|(id, _)| *id);
    let n = u64::try_from(by_node.len()).unwrap_or(1).max(1);
    let pages = guest / page;
    let (base, extra) = (pages / n, pages % n);
    let mut cells = Vec::with_capacity(by_node.len());
    let mut memnode = Vec::with_capacity(by_node.len());
    let mut hp = Vec::with_capacity(by_node.len());
    for (i, (node, vcpus)) in by_node.iter().enumerate() {
        let idx = u32::try_from(i).unwrap_or(u32::MAX);
        let cell_pages = base + u64::from(u64::try_from(i).unwrap_or(u64::MAX) < extra);
        cells.push(NumaCell {
            id: idx.to_string(),
            cpus: list(vcpus),
            memory: Some(cell_pages * page),
            unit: Some("b".into()),
            mem_access: None,
        });
        memnode.push(MemNode {
            cellid: idx,
            mode: "strict".into(),
            nodeset: node.to_string(),
        });
        hp.push(HugePage {
            size: page,
            unit: Some("b".into()),
            nodeset: Some(idx.to_string()),
        });
    }
    let b = backing.get_or_insert_with(MemoryBacking::default);
    b.hugepages = Some(Hugepages { page: hp });
    b.allocation = Some(MemoryAllocation {
        mode: "immediate".into(),
    });
    if vmi
        .spec
        .domain
        .cpu
        .as_ref()
        .is_some_and(|c| c.realtime.is_some())
    {
        b.nosharepages = Some(domain::Empty {});
    }
    let nodes: Vec<u32> = by_node.iter().map(|(id, _)| *id).collect();
    Ok(Some(Converted {
        cells,
        numatune: NumaTune {
            memory: NumaTuneMemory {
                mode: "strict".into(),
                nodeset: list(&nodes),
            },
            memnode,
        },
    }))
}

#[cfg(test)]
mod tests {
    use api::Arch;

    use super::HostNumaCell;
    use crate::{convert, ConvertContext, ConvertError, VirtType};

    fn conv(cpu: &str, mem: &str, host: bool) -> Result<domain::Domain, ConvertError> {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: n, uid: u1}}\nspec:\n  domain:\n    memory: {mem}\n    cpu: {cpu}\n"
        );
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
        ctx.pod_cpuset = Some(vec![2, 3, 8, 9]);
        ctx.host_numa = host.then(|| {
            vec![
                HostNumaCell {
                    id: 0,
                    cpus: (0..4).collect(),
                },
                HostNumaCell {
                    id: 1,
                    cpus: (4..12).collect(),
                },
            ]
        });
        convert(&v, &ctx)
    }

    const CPU: &str = "{cores: 4, dedicatedCpuPlacement: true, realtime: {}, numa: {guestMappingPassthrough: {}}}";

    #[test]
    fn guest_cells_follow_the_host_nodes_of_the_pinned_cpus() {
        // 1 GiB of 2 MiB pages = 512 pages over 2 cells; 3 GiB + 2 MiB = 1537 pages.
        let d = conv(CPU, "{guest: 3074Mi, hugepages: {pageSize: 2Mi}}", true).unwrap();
        let cells = &d.cpu.as_ref().unwrap().numa.as_ref().unwrap().cell;
        let got: Vec<(&str, &str, Option<u64>)> = cells
            .iter()
            .map(|c| (c.id.as_str(), c.cpus.as_str(), c.memory))
            .collect();
        assert_eq!(
            got,
            [
                ("0", "0,1", Some(769 * (2 << 20))),
                ("1", "2,3", Some(768 * (2 << 20)))
            ]
        );
        let x = d.to_xml().unwrap();
        assert!(x.contains("<numatune>\n    <memory mode=\"strict\" nodeset=\"0,1\"/>\n    <memnode cellid=\"0\" mode=\"strict\" nodeset=\"0\"/>\n    <memnode cellid=\"1\" mode=\"strict\" nodeset=\"1\"/>\n  </numatune>"), "{x}");
        assert!(
            x.contains("<page size=\"2097152\" unit=\"b\" nodeset=\"1\"/>"),
            "{x}"
        );
        assert!(x.contains("<nosharepages/>"), "{x}");
        assert!(x.contains("<allocation mode=\"immediate\"/>"), "{x}");
        // The memfd single cell is not added on top.
        assert_eq!(cells.len(), 2);
    }

    #[test]
    fn passthrough_needs_hugepages_dedicated_cpus_and_the_host_topology() {
        let e = conv(CPU, "{guest: 1Gi}", true).unwrap_err().to_string();
        assert_eq!(e, "spec.domain.cpu.numa.guestMappingPassthrough: passing through a numa topology is restricted to VMIs with hugepages enabled");
        let e = conv(
            "{cores: 2, numa: {guestMappingPassthrough: {}}}",
            "{guest: 1Gi, hugepages: {pageSize: 2Mi}}",
            true,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "spec.domain.cpu.numa.guestMappingPassthrough: needs spec.domain.cpu.dedicatedCpuPlacement");
        let e = conv(CPU, "{guest: 1Gi, hugepages: {pageSize: 2Mi}}", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs the node's NUMA topology"), "{e}");
    }
}
