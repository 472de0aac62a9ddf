//! vCPU hot-plug on a running domain (KubeVirt v1.6.6 `UpdateVCPUs`, the
//! launcher's SyncVirtualMachineCPUs, kubevirt-facts §8.3): the domain's
//! vCPU count becomes the VMI's sockets × cores × threads
//! (`virDomainSetVcpusFlags` with `VIR_DOMAIN_VCPU_LIVE | _CONFIG`; the
//! domain was defined with `maxSockets` × cores × threads vCPUs, those of
//! the sockets after the first hot-pluggable). Errors carry KubeVirt's
//! prefix `failed to update vCPUs: `.

use api::VirtualMachineInstance;
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{LibvirtDomainManager, ManagerError};

/// KubeVirt's error prefix.
pub const ERROR_PREFIX: &str = "failed to update vCPUs";

/// The vCPUs the VMI asks for: sockets × cores × threads (each at least
/// 1, KubeVirt's `CalculateRequestedVCPUs`).
///
/// # Errors
/// virt-api's refusal of more sockets than `maxSockets`, in its words.
pub fn requested_vcpus(vmi: &VirtualMachineInstance) -> Result<u32, String> {
    let cpu = vmi.spec.domain.cpu.clone().unwrap_or_default();
    if cpu.max_sockets != 0 && cpu.sockets > cpu.max_sockets {
        return Err(
            "Number of sockets in CPU topology is greater than the maximum sockets allowed".into(),
        );
    }
    cpu.sockets
        .max(1)
        .checked_mul(cpu.cores.max(1))
        .and_then(|n| n.checked_mul(cpu.threads.max(1)))
        .ok_or_else(|| "too many vCPUs".to_owned())
}

impl LibvirtDomainManager {
    /// KubeVirt's `UpdateVCPUs` for `vmi`'s domain. Dedicated CPUs (which
    /// KubeVirt re-pins after the change) are refused by name.
    ///
    /// # Errors
    /// [`ManagerError::Prefixed`] with [`ERROR_PREFIX`]: no domain, a
    /// topology virt-api refuses, libvirt's refusal (e.g. more vCPUs than
    /// the domain's maximum).
    pub fn update_vcpus(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        let _modifying = self.modifying();
        let prefixed = |e: ManagerError| ManagerError::Prefixed {
            prefix: ERROR_PREFIX,
            source: Box::new(e),
        };
        let dedicated = vmi
            .spec
            .domain
            .cpu
            .as_ref()
            .is_some_and(|c| c.dedicated_cpu_placement);
        if dedicated {
            return Err(prefixed(ManagerError::Convert(
                converter::ConvertError::unsupported(
                    "spec.domain.cpu.dedicatedCpuPlacement",
                    "re-pinning dedicated CPUs after a vCPU hot-plug",
                ),
            )));
        }
        let count = requested_vcpus(vmi).map_err(|m| {
            prefixed(ManagerError::Convert(converter::ConvertError::invalid(
                "spec.domain.cpu.sockets",
                m,
            )))
        })?;
        let name = vmi.domain_name();
        self.with_conn(|conn| {
            let dom = VirtDomain::lookup_by_name(conn, &name)?;
            dom.set_vcpus_flags(
                count,
                sys::VIR_DOMAIN_VCPU_LIVE | sys::VIR_DOMAIN_VCPU_CONFIG,
            )?;
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
    fn requested_vcpus_are_the_topologys_product_within_max_sockets() {
        assert_eq!(requested_vcpus(&vmi("{sockets: 3, maxSockets: 4}")), Ok(3));
        assert_eq!(
            requested_vcpus(&vmi("{sockets: 2, cores: 2, threads: 2, maxSockets: 4}")),
            Ok(8)
        );
        assert_eq!(
            requested_vcpus(&vmi("{sockets: 5, maxSockets: 4}")).unwrap_err(),
            "Number of sockets in CPU topology is greater than the maximum sockets allowed"
        );
    }
}
