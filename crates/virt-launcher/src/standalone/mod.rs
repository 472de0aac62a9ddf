//! The standalone stand-in for the pod.

use api::VirtualMachineInstance;

use crate::error::LauncherError;

pub mod claims;
pub mod network;
pub mod volumes;

/// Standalone mode has no pod network unless `--setup-pod-network` makes
/// one: a VMI with interfaces is refused rather than run without network
/// (SR-IOV interfaces excepted: they are host devices, see
/// [`sriov_addresses`]).
///
/// # Errors
/// [`LauncherError::Input`] naming the first interface and the flag.
pub fn refuse_networks_without_pod(vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
    match vmi
        .spec
        .domain
        .devices
        .interfaces
        .iter()
        .position(|i| i.state.as_deref() != Some("absent") && !converter::sriov::is_sriov(i))
    {
        Some(i) => Err(LauncherError::Input(format!(
            "spec.domain.devices.interfaces[{i}]: standalone mode has no pod network; pass --setup-pod-network to create one"
        ))),
        None => Ok(()),
    }
}
