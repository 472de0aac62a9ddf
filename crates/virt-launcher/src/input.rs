//! The VMI as it arrives: read, defaulted, checked once.

use api::{Arch, VirtualMachineInstance};

use crate::error::LauncherError;
use crate::flags::LauncherFlags;

/// Reads, defaults and validates the VMI and applies identity flags.
/// `cluster`: standalone (`run`), also the defaults KubeVirt's cluster
/// would have applied ([`api::cluster`]); `None` in a pod, where the VMI
/// arrives defaulted. Returns what those added.
///
/// # Errors
/// [`LauncherError::Input`] naming the field.
pub fn load(
    bytes: &[u8],
    flags: &LauncherFlags,
    arch: Arch,
    cluster: Option<&api::cluster::ClusterDefaults>,
) -> Result<(VirtualMachineInstance, api::cluster::Applied), LauncherError> {
    let input = |e: api::load::LoadError| LauncherError::Input(e.to_string());
    let (mut vmi, applied) = match cluster {
        Some(c) => api::load_standalone(bytes, arch, c).map_err(input)?,
        None => (
            api::load_vmi(bytes, arch).map_err(input)?,
            api::cluster::Applied::default(),
        ),
    };
    if !flags.uid.is_empty() {
        vmi.metadata.uid = Some(flags.uid.clone());
    }
    if !flags.name.is_empty() && flags.name != vmi.metadata.name {
        return Err(LauncherError::Input(format!(
            "--name {:?} does not match metadata.name {:?}",
            flags.name, vmi.metadata.name
        )));
    }
    if !flags.namespace.is_empty() && flags.namespace != vmi.namespace() {
        return Err(LauncherError::Input(format!(
            "--namespace {:?} does not match metadata.namespace {:?}",
            flags.namespace,
            vmi.namespace()
        )));
    }
    api::defaults::fill_missing_uid(&mut vmi);
    if let Some(e) = api::validate::validate(&vmi).into_iter().next() {
        return Err(LauncherError::Input(e.to_string()));
    }
    Ok((vmi, applied))
}

/// The VMI identity from `--name`, `--namespace` and `--uid` (pod mode,
/// where the full VMI arrives later from virt-handler).
///
/// # Errors
/// [`LauncherError::Input`] when a flag is missing or invalid.
pub fn identity_from_flags(flags: &LauncherFlags) -> Result<VirtualMachineInstance, LauncherError> {
    for (flag, v) in [
        ("--name", &flags.name),
        ("--namespace", &flags.namespace),
        ("--uid", &flags.uid),
    ] {
        if v.is_empty() {
            return Err(LauncherError::Input(format!(
                "{flag} is required when no VMI is given (set STANDALONE_VMI, or use `virt-launcher run VMI.yaml`)"
            )));
        }
    }
    let mut vmi = VirtualMachineInstance::default();
    vmi.metadata.name.clone_from(&flags.name);
    vmi.metadata.namespace = Some(flags.namespace.clone());
    vmi.metadata.uid = Some(flags.uid.clone());
    // The identity only: a name libvirt cannot hold is refused by
    // SyncVirtualMachine, where virt-handler reports it on the VMI.
    if let Some(e) = api::validate::identity(&vmi).into_iter().next() {
        return Err(LauncherError::Input(e.to_string()));
    }
    Ok(vmi)
}
