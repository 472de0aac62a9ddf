//! Live migration, the target's side (KubeVirt v1.6.6
//! `live-migration-target.go`, kubevirt-facts §8.8): PrepareMigrationTarget
//! (everything but the define: libvirt makes the domain from the incoming
//! stream), the incoming job's end in the metadata, and
//! FinalizeVirtualMachineMigration (link refresh, guest time sync).

use std::sync::Arc;
use std::time::Duration;

use api::VirtualMachineInstance;
use virt::sys;

use super::migrate::{failed, libvirt_message};
use super::{LibvirtDomainManager, ManagerError, SyncInputs};
use crate::metadata::now_rfc3339;
use crate::migration::{self as plan, interfaces_by_alias, link_down, MigrationState};

impl LibvirtDomainManager {
    /// KubeVirt's PrepareMigrationTarget: the volumes prepared and the VMI
    /// converted with `inputs` (as for a start, but cloud-init and config
    /// disks empty, of the size `status.volumeStatus` records:
    /// `storage::empty_media`), the metadata's UID, grace
    /// period and migration record (same idempotency as the source), the
    /// `<share>/migrationproxy` directory where the incoming QEMU listens
    /// (Unix transport); no define: libvirt makes the domain from the
    /// incoming migration. A thread then waits for the incoming domain and
    /// records `Migration.EndTimestamp` once its job is over.
    ///
    /// # Errors
    /// [`ManagerError`] from preparation or conversion; KubeVirt's
    /// messages for a missing `migrationState` and the blocking test
    /// annotation; a legacy (TCP) transport is not supported yet.
    pub fn prepare_migration_target(
        self: &Arc<Self>,
        vmi: &VirtualMachineInstance,
        inputs: &SyncInputs<'_>,
        share_dir: &str,
    ) -> Result<(), ManagerError> {
        let state = MigrationState::of(vmi)?;
        self.incoming
            .store(true, std::sync::atomic::Ordering::SeqCst);
        {
            let _modifying = self.modifying();
            // KubeVirt's target makes the cloud-init and config disks
            // empty, of the source's size (`generateEmptyIsos`).
            let mut opts = self.prepare.clone();
            opts.empty_media = true;
            self.convert(vmi, true, inputs, &opts)?;
            // KubeVirt's pre-start step runs on the target too.
            self.start_credentials(vmi)?;
        }
        self.metadata.update(|m| m.uid = Some(vmi.uid().to_owned()));
        self.metadata
            .set_grace_period_seconds(vmi.grace_period_seconds());
        if self.begin_migration(&state.migration_uid)? {
            return Ok(());
        }
        if vmi
            .metadata
            .annotations
            .contains_key(plan::BLOCK_TARGET_ANNOTATION)
        {
            return Err(failed(plan::BLOCKED_TARGET));
        }
        if !state.unix_transport {
            return Err(failed(
                "status.migrationTransport: only \"Unix\" is supported (the legacy TCP proxies are not supported yet)",
            ));
        }
        let dir = format!("{}/migrationproxy", share_dir.trim_end_matches('/'));
        std::fs::create_dir_all(&dir).map_err(|e| {
            failed(format!(
                "failed to create the migration sockets directory {dir}: {e}"
            ))
        })?;
        let me = Arc::clone(self);
        let name = vmi.domain_name();
        std::thread::Builder::new()
            .name("migration-target".into())
            .spawn(move || me.watch_incoming(&name))
            .map_err(|e| failed(format!("cannot start the target's watch: {e}")))?;
        Ok(())
    }

    /// Waits for the incoming domain `name`, then for the end of its
    /// incoming job (KubeVirt polls `GetJobInfo` on the target's resume or
    /// pause event), and sets `Migration.EndTimestamp`; records what became
    /// of it ([`super::IncomingOutcome`]).
    fn watch_incoming(&self, name: &str) {
        let mut seen = false;
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let st = self.with_domain(name, |d| {
                let (state, reason) = d.get_state()?;
                let job = d.get_job_info().map(|j| j.r#type).unwrap_or(0);
                Ok((state, reason, job))
            });
            match st {
                Ok(Some((state, _, _)))
                    if [
                        sys::VIR_DOMAIN_SHUTDOWN,
                        sys::VIR_DOMAIN_SHUTOFF,
                        sys::VIR_DOMAIN_CRASHED,
                    ]
                    .contains(&state) =>
                {
                    // Torn down after a failed or aborted incoming
                    // migration (libvirt stops it, then drops it; it is
                    // listed shutting down meanwhile): it never ran here.
                    self.set_incoming_outcome(super::IncomingOutcome::WentAway);
                    tracing::warn!(domain = %name, "the incoming domain went away");
                    return;
                }
                Ok(Some((state, reason, job))) => {
                    if !seen {
                        seen = true;
                        self.set_incoming_outcome(super::IncomingOutcome::Arrived);
                    }
                    let incoming = state == sys::VIR_DOMAIN_PAUSED
                        && (reason == sys::VIR_DOMAIN_PAUSED_MIGRATION as i32
                            || reason == sys::VIR_DOMAIN_PAUSED_STARTING_UP as i32);
                    if !incoming && job == sys::VIR_DOMAIN_JOB_NONE as i32 {
                        self.metadata.update(|md| {
                            if let Some(m) = md.migration.as_mut() {
                                if m.end_timestamp.is_none() {
                                    m.end_timestamp = Some(now_rfc3339());
                                }
                            }
                        });
                        self.set_incoming_outcome(super::IncomingOutcome::Running);
                        tracing::info!(domain = %name, state, reason, "The target domain is running: migration over");
                        return;
                    }
                }
                Ok(None) if seen => {
                    self.set_incoming_outcome(super::IncomingOutcome::WentAway);
                    tracing::warn!(domain = %name, "the incoming domain went away");
                    return;
                }
                _ => {}
            }
        }
    }
}

impl LibvirtDomainManager {
    /// KubeVirt's FinalizeVirtualMachineMigration on the target: each
    /// interface named in `link_refresh` (binding plugins whose migration
    /// method is `link-refresh`) is set link down, then, 100 ms later,
    /// back as it was (LIVE and CONFIG), so the guest renews its DHCP
    /// lease; then the guest time sync ([`Self::sync_guest_time`]).
    ///
    /// # Errors
    /// [`ManagerError`] naming the interface whose update failed.
    pub fn finalize_migration_target(
        self: &Arc<Self>,
        vmi: &VirtualMachineInstance,
        link_refresh: &std::collections::BTreeSet<String>,
    ) -> Result<(), ManagerError> {
        if !link_refresh.is_empty() {
            let _modifying = self.modifying();
            let name = vmi.domain_name();
            self.with_domain(&name, |d| {
                let xml = d.get_xml_desc(0)?;
                let flags = sys::VIR_DOMAIN_AFFECT_LIVE | sys::VIR_DOMAIN_AFFECT_CONFIG;
                for (iface, el) in interfaces_by_alias(&xml, link_refresh) {
                    d.update_device_flags(&link_down(el), flags).map_err(|e| {
                        failed(format!(
                            "failed to update network {iface}, err: failed to set link down, err: {}",
                            libvirt_message(&e.into())
                        ))
                    })?;
                    std::thread::sleep(Duration::from_millis(100));
                    d.update_device_flags(el, flags).map_err(|e| {
                        failed(format!(
                            "failed to update network {iface}, err: failed to set link up, err: {}",
                            libvirt_message(&e.into())
                        ))
                    })?;
                }
                Ok(())
            })?
            .ok_or_else(super::not_found)?;
        }
        self.sync_guest_time(vmi);
        Ok(())
    }

    /// KubeVirt's `setGuestTime` after a migration: the same once-per-launcher
    /// sync as after a resume (`time_sync`, KubeVirt's `setTimeOnce` is one
    /// guard for both), started on the migrated domain.
    pub fn sync_guest_time(&self, vmi: &VirtualMachineInstance) {
        match self.with_domain(&vmi.domain_name(), |d| {
            self.set_guest_time(d);
            Ok(())
        }) {
            Ok(Some(())) => {}
            Ok(None) => tracing::warn!("failed to sync guest time: no domain"),
            Err(e) => tracing::warn!("failed to sync guest time: {e}"),
        }
    }
}
