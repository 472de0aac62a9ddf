//! `<cpu>` and `<vcpu>` from `spec.domain.cpu` (KubeVirt converter
//! `Convert_v1_VirtualMachineInstance_To_api_Domain`, CPU part).

use api::validate::MAX_VCPUS;
use api::vmi::CpuFeaturePolicy;
use api::{Arch, VirtualMachineInstance};
use domain::{Cpu, CpuFeature, CpuTopology, Vcpu, VcpuState, Vcpus};

use crate::{ConvertContext, ConvertError};

/// The converted CPU: model/topology and the vCPU count.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted {
    /// `<cpu>`.
    pub cpu: Cpu,
    /// `<vcpu placement='static'>sockets×cores×threads</vcpu>`; with CPU
    /// hot-plug the count is for `maxSockets` and `current` for `sockets`.
    pub vcpu: Vcpu,
    /// `<vcpus>` with CPU hot-plug: one entry per possible vCPU, enabled
    /// below the current count, hot-pluggable from the second socket on.
    pub vcpus: Option<Vcpus>,
    /// vCPUs online at boot (sockets × cores × threads).
    pub current: u32,
}

/// Topology: each of sockets, cores and threads at least 1; with
/// `maxSockets` (not on arm64) sockets = maxSockets, `<vcpu current>` and
/// `<vcpus>` (CPU hot-plug). Mode:
/// `host-model`/`host-passthrough` as given (empty → `host-model`; under
/// TCG the nearest mode TCG has, see [`crate::arch::ArchCaps::tcg_cpu_mode`]),
/// any other name → `mode='custom'` with `<model>`. Features keep their policy
/// (default `require`); on amd64 a custom model without an `mpx` entry gets
/// `mpx` disabled, as KubeVirt does for CPUs that dropped MPX.
///
/// # Errors
/// [`ConvertError::Invalid`] for an unknown feature policy, a model other
/// than `host-passthrough` on arm64 (KubeVirt's admission), a model or
/// feature name XML cannot carry, `maxSockets` below `sockets`, or more than
/// 512 vCPUs.
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
) -> Result<Converted, ConvertError> {
    let spec = vmi.spec.domain.cpu.clone().unwrap_or_default();
    let topology = CpuTopology {
        sockets: spec.sockets.max(1),
        cores: spec.cores.max(1),
        threads: spec.threads.max(1),
    };
    let per_socket = topology
        .cores
        .checked_mul(topology.threads)
        .ok_or_else(|| ConvertError::invalid("spec.domain.cpu", "too many vCPUs"))?;
    let current = topology
        .sockets
        .checked_mul(per_socket)
        .filter(|n| u64::from(*n) <= MAX_VCPUS)
        .ok_or_else(|| {
            ConvertError::invalid("spec.domain.cpu", format!("more than {MAX_VCPUS} vCPUs"))
        })?;
    let mut topology = topology;
    let mut count = current;
    let mut vcpus = None;
    // CPU hot-plug: KubeVirt does not apply maxSockets on arm64.
    if spec.max_sockets != 0 && ctx.arch != Arch::Arm64 {
        let path = "spec.domain.cpu.maxSockets";
        if spec.max_sockets < topology.sockets {
            return Err(ConvertError::invalid(
                path,
                format!(
                    "{} must be greater than or equal to spec.domain.cpu.sockets ({})",
                    spec.max_sockets, topology.sockets
                ),
            ));
        }
        count = spec
            .max_sockets
            .checked_mul(per_socket)
            .filter(|n| u64::from(*n) <= MAX_VCPUS)
            .ok_or_else(|| {
                ConvertError::invalid(
                    path,
                    format!(
                        "{} sockets make more than {MAX_VCPUS} vCPUs",
                        spec.max_sockets
                    ),
                )
            })?;
        topology.sockets = spec.max_sockets;
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
        vcpus = Some(Vcpus {
            vcpu: (0..count)
                .map(|id| VcpuState {
                    id,
                    enabled: yes_no(id < current),
                    hotpluggable: yes_no(id >= per_socket),
                })
                .collect(),
        });
    }

    let mut cpu = Cpu {
        topology: Some(topology),
        ..Cpu::default()
    };
    let model = if spec.model.is_empty() {
        "host-model"
    } else {
        spec.model.as_str()
    };
    crate::xml_text("spec.domain.cpu.model", model)?;
    if ctx.arch == Arch::Arm64 && model != "host-passthrough" {
        // KubeVirt's arm64 admission (webhooks `validateCPUModel`); an
        // empty model is host-passthrough there, by the API defaults.
        return Err(ConvertError::invalid(
            "spec.domain.cpu.model",
            format!(
                "currently, host-passthrough is the only model supported on Arm64, not {model:?}"
            ),
        ));
    }
    let custom = !matches!(model, "host-model" | "host-passthrough");
    if custom {
        cpu.mode = Some("custom".into());
        cpu.model = Some(model.to_owned());
    } else if ctx.virt_type == crate::VirtType::Qemu {
        // TCG has no host CPU to pass through or copy; libvirt refuses such
        // a domain at start ("CPU mode 'host-passthrough' for aarch64 qemu
        // domain on x86_64 host is not supported by hypervisor", the same
        // for x86_64 on x86_64 and host-model on aarch64, ppc64, s390x).
        // The e2e firmware test boots the result on aarch64.
        let mode = if model == "host-model" {
            "host-model"
        } else {
            "host-passthrough"
        };
        cpu.mode = crate::arch::caps(ctx.arch)
            .tcg_cpu_mode(mode)
            .map(str::to_owned);
    } else {
        cpu.mode = Some(model.to_owned());
    }
    for (i, f) in spec.features.iter().enumerate() {
        let path = format!("spec.domain.cpu.features[{i}]");
        if f.name.is_empty() {
            return Err(ConvertError::invalid(format!("{path}.name"), "required"));
        }
        crate::xml_text(&format!("{path}.name"), &f.name)?;
        let policy = match &f.policy {
            CpuFeaturePolicy::Unset => CpuFeaturePolicy::Require.as_str(),
            CpuFeaturePolicy::Other(p) => {
                return Err(ConvertError::invalid(
                    format!("{path}.policy"),
                    format!("{p:?} is not one of {}", CpuFeaturePolicy::choices()),
                ))
            }
            p => p.as_str(),
        };
        cpu.feature.push(CpuFeature {
            policy: policy.to_owned(),
            name: f.name.clone(),
        });
    }
    if ctx.arch == Arch::Amd64 && custom && !spec.features.iter().any(|f| f.name == "mpx") {
        cpu.feature.push(CpuFeature {
            policy: "disable".into(),
            name: "mpx".into(),
        });
    }
    Ok(Converted {
        cpu,
        vcpu: Vcpu {
            placement: Some("static".into()),
            current: vcpus.is_some().then_some(current),
            count,
        },
        vcpus,
        current,
    })
}
