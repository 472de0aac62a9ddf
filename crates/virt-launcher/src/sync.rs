//! The one path a VMI takes to its domain (KubeVirt's SyncVMI), whether it
//! came from the manifest at start-up or from virt-handler's
//! SyncVirtualMachine: the pod's network for it ([`PodNetwork`]: phase 2
//! when the domain is about to start, SR-IOV VFs), then the domain manager
//! with this sync's inputs.

use std::sync::Arc;

use api::VirtualMachineInstance;
use converter::ClusterOptions;
use virtwrap::{DomainManager, LibvirtDomainManager, ManagerError, SyncInputs};

use crate::podnet::PodNetwork;

/// Why a sync failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The pod's network for the VMI could not be prepared (network phase
    /// 2, SR-IOV addresses): one line naming the interface field.
    #[error("{0}")]
    Network(String),
    /// The domain manager failed (preparation, conversion, libvirt).
    #[error(transparent)]
    Manager(#[from] ManagerError),
}

/// Syncs VMIs to this launcher's domain.
pub struct VmiSync {
    manager: Arc<LibvirtDomainManager>,
    network: Arc<PodNetwork>,
}

impl VmiSync {
    /// Syncs through `manager`, with the pod's network `network`.
    pub fn new(manager: Arc<LibvirtDomainManager>, network: Arc<PodNetwork>) -> Self {
        VmiSync { manager, network }
    }

    /// The domain manager.
    pub fn manager(&self) -> &Arc<LibvirtDomainManager> {
        &self.manager
    }

    /// Prepares the pod's network for `vmi` (phase 2 only when its domain
    /// is not running yet: KubeVirt sets the network up before it starts
    /// the domain), then syncs the domain under `cluster`'s settings.
    /// Returns the domain spec.
    ///
    /// # Errors
    /// [`SyncError`].
    pub fn sync(
        &self,
        vmi: &VirtualMachineInstance,
        cluster: &ClusterOptions,
    ) -> Result<domain::Domain, SyncError> {
        let starting = !self.manager.is_active(vmi)?;
        self.with_inputs(vmi, cluster, starting, |inputs| {
            Ok(self.manager.sync_vmi(vmi, inputs)?)
        })
    }

    /// The host PCI address of each of `vmi`'s SR-IOV interfaces (see
    /// [`crate::podnet::PodNetwork::sriov_addresses`]).
    ///
    /// # Errors
    /// [`SyncError::Network`].
    pub fn sriov_addresses(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> Result<std::collections::BTreeMap<String, String>, SyncError> {
        self.network
            .sriov_addresses(vmi)
            .map_err(SyncError::Network)
    }

    /// Runs `f` with this sync's inputs for `vmi`: the pod's interfaces
    /// (phase 2 run first when `starting`) and the SR-IOV addresses, under
    /// `cluster`'s settings.
    fn with_inputs<T>(
        &self,
        vmi: &VirtualMachineInstance,
        cluster: &ClusterOptions,
        starting: bool,
        f: impl FnOnce(&SyncInputs<'_>) -> Result<T, SyncError>,
    ) -> Result<T, SyncError> {
        let interfaces = self
            .network
            .interfaces(vmi, starting)
            .map_err(SyncError::Network)?;
        let sriov_pci = self
            .network
            .sriov_addresses(vmi)
            .map_err(SyncError::Network)?;
        f(&SyncInputs {
            cluster,
            interfaces: &interfaces,
            sriov_pci: &sriov_pci,
        })
    }
}

impl VmiSync {
    /// KubeVirt's PrepareMigrationTarget for `vmi`: the pod's network for
    /// a domain about to start (phase 2 serves it on this side), then the
    /// domain manager's preparation without a define (see
    /// [`LibvirtDomainManager::prepare_migration_target`]); `share_dir` is
    /// where the `migrationproxy` directory goes.
    ///
    /// # Errors
    /// [`SyncError`].
    pub fn prepare_target(
        &self,
        vmi: &VirtualMachineInstance,
        cluster: &ClusterOptions,
        share_dir: &str,
    ) -> Result<(), SyncError> {
        self.with_inputs(vmi, cluster, true, |inputs| {
            Ok(self
                .manager
                .prepare_migration_target(vmi, inputs, share_dir)?)
        })
    }
}
