//! vCPU hot-plug on a running domain (KubeVirt v1.6.6 `UpdateVCPUs`, the
//! launcher's SyncVirtualMachineCPUs, kubevirt-facts §8.3): the domain's
//! vCPU count becomes the VMI's sockets × cores × threads
//! (`virDomainSetVcpusFlags` with `VIR_DOMAIN_VCPU_LIVE | _CONFIG`; the
//! domain was defined with `maxSockets` × cores × threads vCPUs, those of
//! the sockets after the first hot-pluggable). With dedicated CPUs the
//! vCPUs (and an isolated emulator thread) are then pinned again, live and
//! in the definition, as the converter pins them for the new count on the
//! pod's cpuset (`virDomainPinVcpuFlags`, `virDomainPinEmulator`; KubeVirt
//! re-computes the pinning with `AdjustDomainForTopologyAndCPUSet`).
//! Errors carry KubeVirt's prefix `failed to update vCPUs: `.
//!
//! Deviation: KubeVirt reads the pod's cpuset again at each call; this
//! launcher read it at start (`converter::HostFacts::pod_cpuset`). The set
//! of a running pod's exclusive CPUs does not change (Kubernetes' static
//! CPU manager assigns it when the container starts; a vCPU hot-plug that
//! needs more CPUs moves the VM to a new pod by live migration, whose
//! launcher reads its own).

use api::VirtualMachineInstance;
use converter::ConvertError;
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{LibvirtDomainManager, ManagerError};

/// KubeVirt's error prefix.
pub const ERROR_PREFIX: &str = "failed to update vCPUs";

/// A CPU topology whose vCPUs cannot be counted ([`requested_vcpus`]);
/// the callers name the field `spec.domain.cpu.sockets`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VcpuCountError {
    /// `sockets` over `maxSockets` (virt-api's words).
    #[error("Number of sockets in CPU topology is greater than the maximum sockets allowed")]
    OverMaxSockets,
    /// sockets × cores × threads overflows 32 bits.
    #[error("too many vCPUs")]
    Overflow,
}

/// The vCPUs the VMI asks for: sockets × cores × threads (each at least
/// 1, KubeVirt's `CalculateRequestedVCPUs`).
///
/// # Errors
/// [`VcpuCountError::OverMaxSockets`]: virt-api's refusal of more sockets
/// than `maxSockets`, in its words; [`VcpuCountError::Overflow`].
pub fn requested_vcpus(vmi: &VirtualMachineInstance) -> Result<u32, VcpuCountError> {
    let cpu = vmi.spec.domain.cpu.clone().unwrap_or_default();
    if cpu.max_sockets != 0 && cpu.sockets > cpu.max_sockets {
        return Err(VcpuCountError::OverMaxSockets);
    }
    cpu.sockets
        .max(1)
        .checked_mul(cpu.cores.max(1))
        .and_then(|n| n.checked_mul(cpu.threads.max(1)))
        .ok_or(VcpuCountError::Overflow)
}

/// libvirt's CPU map for a CPU list (`2`, `4,5`): bit n of byte n / 8 set
/// for CPU n.
///
/// # Errors
/// [`ManagerError::Convert`] for a list that does not parse (the
/// converter's own output, so a bug).
fn cpu_map(cpuset: &str) -> Result<Vec<u8>, ManagerError> {
    let cpus = converter::cputune::parse_cpu_list(cpuset)
        .map_err(|e| ManagerError::Convert(ConvertError::Host(e.to_string())))?;
    let top = cpus.iter().copied().max().unwrap_or(0) as usize;
    let mut map = vec![0u8; top / 8 + 1];
    for c in cpus {
        map[c as usize / 8] |= 1 << (c % 8);
    }
    Ok(map)
}

impl LibvirtDomainManager {
    /// The `<cputune>` of `vmi`'s dedicated CPUs for `vcpus` online vCPUs
    /// and the domain's `iothreads`, on `cpus` (a migration target's CPU
    /// set) or else this pod's cpuset: the converter's pinning, the one
    /// decision made at start, at a vCPU hot-plug and for a migration's
    /// destination. `None` without dedicated CPUs.
    ///
    /// # Errors
    /// [`ManagerError::Convert`] in the converter's words (too few CPUs:
    /// `not enough exclusive threads provided, could not fit N core(s)`).
    pub(super) fn dedicated_pinning(
        &self,
        vmi: &VirtualMachineInstance,
        vcpus: u32,
        iothreads: Option<u32>,
        cpus: Option<&[u32]>,
    ) -> Result<Option<domain::CpuTune>, ManagerError> {
        let mut ctx = converter::ConvertContext::from_parts(
            &self.host,
            &converter::ClusterOptions::default(),
            converter::Prepared::default(),
            std::collections::BTreeMap::new(),
        );
        if let Some(c) = cpus {
            ctx.pod_cpuset = Some(c.to_vec());
        }
        Ok(converter::cputune::convert(vmi, &ctx, vcpus, iothreads)?)
    }

    /// KubeVirt's `UpdateVCPUs` for `vmi`'s domain: the vCPU count, then,
    /// with dedicated CPUs, their pinning (see the module docs).
    ///
    /// # Errors
    /// [`ManagerError::Prefixed`] with [`ERROR_PREFIX`]: no domain, a
    /// topology virt-api refuses, libvirt's refusal (e.g. more vCPUs than
    /// the domain's maximum), a pod cpuset too small for the new count
    /// (the converter's words).
    pub fn update_vcpus(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        let _modifying = self.modifying();
        let prefixed = |e: ManagerError| ManagerError::Prefixed {
            prefix: ERROR_PREFIX,
            source: Box::new(e),
        };
        let count = requested_vcpus(vmi).map_err(|e| {
            prefixed(ManagerError::Convert(converter::ConvertError::invalid(
                "spec.domain.cpu.sockets",
                e.to_string(),
            )))
        })?;
        let name = vmi.domain_name();
        self.with_conn(|conn| {
            let dom = VirtDomain::lookup_by_name(conn, &name)?;
            dom.set_vcpus_flags(
                count,
                sys::VIR_DOMAIN_VCPU_LIVE | sys::VIR_DOMAIN_VCPU_CONFIG,
            )?;
            let live = domain::Domain::from_xml(&dom.get_xml_desc(0)?)?;
            let Some(tune) = self.dedicated_pinning(vmi, count, live.iothreads, None)? else {
                return Ok(());
            };
            let flags = sys::VIR_DOMAIN_AFFECT_LIVE | sys::VIR_DOMAIN_AFFECT_CONFIG;
            for pin in &tune.vcpupin {
                dom.pin_vcpu_flags(pin.vcpu, &cpu_map(&pin.cpuset)?, flags)?;
            }
            if let Some(emulator) = &tune.emulatorpin {
                dom.pin_emulator(&cpu_map(&emulator.cpuset)?, flags)?;
            }
            tracing::info!(domain = %name, vcpupin = tune.vcpupin.len(), "dedicated vCPUs pinned again");
            Ok(())
        })
        .map_err(prefixed)?;
        tracing::info!(domain = %name, vcpus = count, "vCPUs updated");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(cpu: &str) -> VirtualMachineInstance {
        let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: a}}\nspec:\n  domain:\n    cpu: {cpu}\n    memory: {{guest: 1Gi}}\n");
        api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap()
    }

    #[test]
    fn cpu_maps_set_one_bit_per_cpu() {
        assert_eq!(cpu_map("0").unwrap(), vec![0b1]);
        assert_eq!(cpu_map("1").unwrap(), vec![0b10]);
        assert_eq!(cpu_map("4,5").unwrap(), vec![0b11_0000]);
        assert_eq!(cpu_map("9").unwrap(), vec![0, 0b10]);
        assert!(cpu_map("x").is_err());
    }

    #[test]
    fn requested_vcpus_are_the_topologys_product_within_max_sockets() {
        assert_eq!(requested_vcpus(&vmi("{sockets: 3, maxSockets: 4}")), Ok(3));
        assert_eq!(
            requested_vcpus(&vmi("{sockets: 2, cores: 2, threads: 2, maxSockets: 4}")),
            Ok(8)
        );
        assert_eq!(
            requested_vcpus(&vmi("{sockets: 5, maxSockets: 4}"))
                .unwrap_err()
                .to_string(),
            "Number of sockets in CPU topology is greater than the maximum sockets allowed"
        );
    }
}
