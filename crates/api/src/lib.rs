//! KubeVirt API types for virt-launcher: the `kubevirt.io/v1`
//! VirtualMachineInstance ([`vmi`]), Kubernetes quantities ([`quantity`]),
//! names and what KubeVirt derives from them ([`names`]), KubeVirt's file
//! layout in the pod ([`layout`]),
//! architectures ([`arch`]), decoding with field paths in errors ([`load`]),
//! KubeVirt's defaulting ([`defaults`]) and semantic validation ([`validate`]).

pub mod arch;
pub mod cbt;
pub mod cluster;
pub mod defaults;
pub mod device_status;
pub mod doc;
pub mod error;
#[cfg(feature = "arbitrary")]
pub mod fuzzing;
pub mod hotplug;
pub mod interfaces_live;
pub mod layout;
pub mod limits;
pub mod load;
pub mod mac;
pub mod names;
pub mod quantity;
pub mod text;
pub mod validate;
pub mod vmi;

pub use arch::Arch;
pub use error::FieldError;
pub use quantity::Quantity;
pub use vmi::VirtualMachineInstance;

/// Reads, defaults (for `arch` unless the VMI names one) and validates a VMI
/// from YAML or JSON bytes: the one call front ends need.
///
/// # Errors
/// The first decoding error, or every validation error joined by `; `.
pub fn load_vmi(bytes: &[u8], arch: Arch) -> Result<VirtualMachineInstance, load::LoadError> {
    let mut vmi = load::from_slice(bytes)?;
    defaults::apply(&mut vmi, arch);
    check(vmi)
}

/// Like [`load_vmi`], for a VMI run without a cluster (`convert`, `run`):
/// also applies what KubeVirt's cluster would have added before the
/// launcher sees the VMI ([`cluster::apply`]) under `cluster`'s settings,
/// and says what it added.
///
/// # Errors
/// As [`load_vmi`].
pub fn load_standalone(
    bytes: &[u8],
    arch: Arch,
    cluster: &cluster::ClusterDefaults,
) -> Result<(VirtualMachineInstance, cluster::Applied), load::LoadError> {
    let (mut vmi, kind) = load::from_slice_with_kind(bytes)?;
    defaults::apply(&mut vmi, arch);
    let applied = cluster::apply(&mut vmi, arch, kind == load::Kind::VirtualMachine, cluster);
    Ok((check(vmi)?, applied))
}

/// Validates a defaulted VMI, joining every error.
fn check(vmi: VirtualMachineInstance) -> Result<VirtualMachineInstance, load::LoadError> {
    let errs = validate::validate(&vmi);
    if errs.is_empty() {
        Ok(vmi)
    } else {
        let msg = errs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        Err(load::LoadError::Field(FieldError::new("", msg)))
    }
}
