//! The one path a VMI takes to its domain (KubeVirt's SyncVMI), whether it
//! came from the manifest at start-up or from virt-handler's
//! SyncVirtualMachine: the pod's network for it ([`PodNetwork`]: phase 2
//! when the domain is about to start, SR-IOV VFs), then the domain manager
//! with this sync's inputs. With `--image-volume` every sync (and migration
//! target preparation) first links the container disks and kernel boot
//! artifacts into their image volumes ([`storage::image_volume::link`]), as
//! KubeVirt's SyncVMI and PrepareMigrationTarget do before they convert.

use std::sync::Arc;

use api::layout::Paths;
use api::VirtualMachineInstance;
use converter::ClusterOptions;
use storage::image_volume::ImageVolumeRoots;
use virtwrap::{DomainManager, LibvirtDomainManager, ManagerError, SyncInputs};

use crate::podnet::{Phase2, PodNetwork};

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
    /// `--image-volume`: where the image volumes are mounted and the
    /// pod's paths (the container-disk directory the links go in).
    image_volumes: Option<(ImageVolumeRoots, Paths)>,
}

impl VmiSync {
    /// Syncs through `manager`, with the pod's network `network`.
    pub fn new(manager: Arc<LibvirtDomainManager>, network: Arc<PodNetwork>) -> Self {
        VmiSync {
            manager,
            network,
            image_volumes: None,
        }
    }

    /// Container disks and kernel boot artifacts come from the image
    /// volumes under `roots` (`--image-volume`): each sync links them into
    /// `paths`' container-disk directory first.
    #[must_use]
    pub fn with_image_volumes(mut self, roots: ImageVolumeRoots, paths: Paths) -> Self {
        self.image_volumes = Some((roots, paths));
        self
    }

    /// KubeVirt's `linkImageVolumeFilePaths`, with `--image-volume`; a
    /// failure fails the sync (KubeVirt logs it and returns it).
    fn link_image_volumes(&self, vmi: &VirtualMachineInstance) -> Result<(), SyncError> {
        let Some((roots, paths)) = &self.image_volumes else {
            return Ok(());
        };
        storage::image_volume::link(vmi, paths, roots).map_err(|e| {
            tracing::error!(reason = %e, "failed link ImageVolumeFilePaths");
            SyncError::Manager(ManagerError::Storage(e))
        })
    }

    /// The domain manager.
    pub fn manager(&self) -> &Arc<LibvirtDomainManager> {
        &self.manager
    }

    /// Prepares the pod's network for `vmi` (phase 2 for every interface
    /// when its domain is not running yet: KubeVirt sets the network up
    /// before it starts the domain; on a running domain for the NICs to
    /// hot-plug, [`virtwrap::manager::nics::networks_to_plug`]), then syncs
    /// the domain under `cluster`'s settings; on a running domain the
    /// unplugged interfaces' DHCP servers stop afterwards. Returns the
    /// domain spec.
    ///
    /// # Errors
    /// [`SyncError`].
    pub fn sync(
        &self,
        vmi: &VirtualMachineInstance,
        cluster: &ClusterOptions,
    ) -> Result<domain::Domain, SyncError> {
        self.link_image_volumes(vmi)?;
        let starting = !self.manager.is_active(vmi)?;
        let plug = if starting {
            Vec::new()
        } else {
            self.manager.interfaces_to_plug(vmi)?
        };
        let phase2 = match (starting, plug.is_empty()) {
            (true, _) => Phase2::Start,
            (false, false) => Phase2::Plug(&plug),
            (false, true) => Phase2::Skip,
        };
        let spec = self
            .with_inputs(vmi, cluster, phase2, |inputs| {
                Ok(self.manager.sync_vmi(vmi, inputs)?)
            })
            .inspect_err(|_| {
                // A NIC that phase 2 prepared but the failed sync did not
                // plug is forgotten (its DHCP servers stopped): the next
                // sync runs phase 2 for it afresh.
                if !plug.is_empty() {
                    let still = self.manager.interfaces_to_plug(vmi).unwrap_or_default();
                    self.network.forget(&still);
                }
            })?;
        if !starting {
            self.network.release_unplugged(vmi);
        }
        Ok(spec)
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
    /// (phase 2 run first for those `phase2` names) and the SR-IOV
    /// addresses, under `cluster`'s settings.
    fn with_inputs<T>(
        &self,
        vmi: &VirtualMachineInstance,
        cluster: &ClusterOptions,
        phase2: Phase2<'_>,
        f: impl FnOnce(&SyncInputs<'_>) -> Result<T, SyncError>,
    ) -> Result<T, SyncError> {
        let interfaces = self
            .network
            .interfaces(vmi, phase2)
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
        self.link_image_volumes(vmi)?;
        self.with_inputs(vmi, cluster, Phase2::Start, |inputs| {
            Ok(self
                .manager
                .prepare_migration_target(vmi, inputs, share_dir)?)
        })
    }
}
