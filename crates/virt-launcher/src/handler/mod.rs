//! The launcher's side of virt-handler's protocol: the command handler the
//! gRPC server calls ([`LauncherHandler`]), the domain as KubeVirt's
//! api.Domain JSON ([`json`]) and the domain cache GetDomain answers from
//! ([`cache`]). The bridge from libvirt's events to virt-handler's notify
//! socket is [`crate::bridge`].

pub mod cache;
pub mod json;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use api::VirtualMachineInstance;
use cmd::notify::{Event, Notifier};
use cmd::server::{CommandError, Handler, Screenshot, SyncOptions};
use converter::ClusterOptions;
use virtwrap::agent::Agent;
use virtwrap::manager::backup;
use virtwrap::memory_dump::{self, MemoryDumper};
use virtwrap::metadata::MetadataCache;
use virtwrap::{DomainManager, LibvirtDomainManager, ManagerError};

use crate::sync::{SyncError, VmiSync};

use cache::DomainCache;
use json::{domain_json, now_rfc3339, Identity};

/// Where memory dumps may be written: in a pod only into a volume under
/// the hotplug disk directory (where virt-handler mounts the memory dump
/// volume), standalone anywhere the user asks (an absolute path whose
/// directory exists; see [`memory_dump::check_dump_path`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DumpPolicy {
    /// `<hotplug-disk-dir>/<volume>/<file>` only.
    HotplugVolumes(PathBuf),
    /// Any absolute path (`run`: the user's own command socket).
    AnyDirectory,
}

/// The cluster's settings virt-handler sent with a SyncVirtualMachine
/// (KubeVirt builds its converter context from them at every sync: a
/// setting the request leaves out is KubeVirt's default, not the last
/// request's).
pub fn cluster_options(opts: &SyncOptions) -> ClusterOptions {
    let smbios = match &opts.smbios {
        Some([manufacturer, family, product, sku, version]) => converter::SmbiosOptions {
            manufacturer: manufacturer.clone(),
            family: family.clone(),
            product: product.clone(),
            sku: sku.clone(),
            version: version.clone(),
        },
        None => converter::SmbiosOptions::default(),
    };
    ClusterOptions {
        smbios,
        mem_balloon_stats_period: opts.mem_balloon_stats_period,
        free_page_reporting: !opts.free_page_reporting_disabled,
        serial_console_log: !opts.serial_console_log_disabled,
        bochs_for_efi_guests: opts.bochs_display_for_efi_guests,
        volumes_discard_ignore: opts.preallocated_volumes.iter().cloned().collect(),
        expand_disks_enabled: opts.expand_disks_enabled,
    }
}

/// [`Handler`] on the launcher's DomainManager.
pub struct LauncherHandler {
    sync: Arc<VmiSync>,
    manager: Arc<LibvirtDomainManager>,
    id: Identity,
    notifier: Notifier,
    cache: Arc<DomainCache>,
    agent: Arc<Agent>,
    metadata: Arc<MetadataCache>,
    dumper: MemoryDumper,
    dump_policy: DumpPolicy,
    /// `--vm-stats-collector`: GetVMStats is served.
    vm_stats_collector: bool,
    /// The VMI last synced (virt-handler's, with its full spec).
    pub current: Mutex<Option<VirtualMachineInstance>>,
    /// Where the migration proxy's sockets are, and who runs QEMU.
    migration: virtwrap::manager::MigrationSetup,
}

impl LauncherHandler {
    /// A handler for `id`'s domain; `metadata` is the runtime metadata
    /// every domain JSON carries (its changes must reach the event bridge
    /// as [`virtwrap::events::DomainEvent::MetadataUpdated`]).
    pub fn new(
        sync: Arc<VmiSync>,
        id: Identity,
        notifier: Notifier,
        cache: Arc<DomainCache>,
        agent: Arc<Agent>,
        metadata: Arc<MetadataCache>,
        dump_policy: DumpPolicy,
    ) -> Self {
        LauncherHandler {
            manager: Arc::clone(sync.manager()),
            sync,
            id,
            notifier,
            cache,
            agent,
            dumper: MemoryDumper::new(Arc::clone(&metadata), now_rfc3339),
            metadata,
            dump_policy,
            vm_stats_collector: false,
            current: Mutex::new(None),
            migration: virtwrap::manager::MigrationSetup {
                share_dir: "/var/run/kubevirt".into(),
                non_root: false,
            },
        }
    }

    /// The same handler, its migrations through the proxy sockets of
    /// `setup`.
    #[must_use]
    pub fn with_migration(mut self, setup: virtwrap::manager::MigrationSetup) -> Self {
        self.migration = setup;
        self
    }

    /// The same handler, knowing `vmi` as synced (a standalone launcher
    /// synced its manifest itself).
    #[must_use]
    pub fn with_current(self, vmi: Option<VirtualMachineInstance>) -> Self {
        *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = vmi;
        self
    }

    /// The VMI a migration command is about: the request's, or, when it
    /// carries no spec (`ctl migrate` sends identity and status only), the
    /// last synced VMI's spec with the request's metadata and status.
    fn migration_vmi(&self, vmi: &VirtualMachineInstance) -> VirtualMachineInstance {
        if vmi.spec != api::vmi::VmiSpec::default() {
            return vmi.clone();
        }
        let current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match current {
            Some(mut c) => {
                c.status.clone_from(&vmi.status);
                for (k, v) in &vmi.metadata.annotations {
                    c.metadata.annotations.insert(k.clone(), v.clone());
                }
                c
            }
            None => vmi.clone(),
        }
    }

    /// The same handler serving GetVMStats when `enabled`
    /// (`--vm-stats-collector`).
    #[must_use]
    pub fn with_vm_stats_collector(mut self, enabled: bool) -> Self {
        self.vm_stats_collector = enabled;
        self
    }

    /// Refuses a request for a domain other than this launcher's.
    fn check_domain(&self, name: &str) -> Result<(), CommandError> {
        if name == self.id.domain_name() {
            Ok(())
        } else {
            Err(CommandError::NoSuchDomain(name.to_owned()))
        }
    }

    /// The VMI of a call that changes the running domain (vCPUs, memory,
    /// host devices): it must name this launcher's domain, is admitted as
    /// a synced VMI is, and the cached domain JSON is dropped, since the
    /// domain is about to change.
    fn admit_change(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> Result<VirtualMachineInstance, CommandError> {
        self.check_domain(&vmi.domain_name())?;
        let vmi =
            crate::input::admit_synced(vmi).map_err(|e| CommandError::Failed(e.to_string()))?;
        self.cache.invalidate();
        Ok(vmi)
    }
}

/// JSON of a value whose types always serialise.
fn to_json<T: serde::Serialize>(v: &T) -> Result<String, CommandError> {
    serde_json::to_string(v)
        .map_err(|e| CommandError::Failed(format!("encoding the guest agent data: {e}")))
}

/// A domain manager failure as virt-handler reads it: libvirt's in
/// KubeVirt's `LibvirtError(...)` form, the rest as its message.
pub fn command_error(e: ManagerError) -> CommandError {
    match e {
        ManagerError::Libvirt {
            code,
            domain,
            message,
        } => CommandError::Libvirt {
            code,
            domain,
            message,
        },
        other => CommandError::Failed(other.to_string()),
    }
}

/// BackupVirtualMachine's options as KubeVirt reads them
/// (`getBackupOptionsFromRequest`), in its words.
fn decode_backup_options(options: &[u8]) -> Result<wire::backup::BackupOptions, CommandError> {
    if options.is_empty() {
        return Err(CommandError::Failed(
            "backup options object not present in command server request".into(),
        ));
    }
    serde_json::from_slice(options).map_err(|e| {
        CommandError::Failed(format!(
            "no valid backup options object present in command server request: {e}"
        ))
    })
}

/// The guest agent's freeze and thaw for a backup's start.
struct AgentQuiesce<'a>(&'a Agent);

impl backup::Quiesce for AgentQuiesce<'_> {
    fn freeze(&self) -> Result<(), String> {
        self.0
            .freeze(std::time::Duration::ZERO)
            .map_err(|e| e.to_string())
    }
    fn thaw(&self) -> Result<(), String> {
        self.0.unfreeze().map_err(|e| e.to_string())
    }
}

/// A sync failure as virt-handler reads it.
fn sync_command_error(e: SyncError) -> CommandError {
    match e {
        SyncError::Network(m) => CommandError::Failed(m),
        SyncError::Manager(e) => command_error(e),
    }
}

impl Handler for LauncherHandler {
    fn vmi_uid(&self) -> String {
        self.id.uid.clone()
    }

    fn sync(&self, vmi: &VirtualMachineInstance, opts: &SyncOptions) -> Result<(), CommandError> {
        if vmi.metadata.name != self.id.name || vmi.namespace() != self.id.namespace {
            return Err(CommandError::OtherVmi {
                namespace: vmi.namespace().to_owned(),
                name: vmi.metadata.name.clone(),
                ours_namespace: self.id.namespace.clone(),
                ours_name: self.id.name.clone(),
            });
        }
        let vmi =
            crate::input::admit_synced(vmi).map_err(|e| CommandError::Failed(e.to_string()))?;
        self.cache.invalidate();
        match self.sync.sync(&vmi, &cluster_options(opts)) {
            Ok(_) => {
                *self
                    .current
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(vmi);
                Ok(())
            }
            Err(e) => {
                let e = sync_command_error(e);
                let m = e.to_string();
                self.notifier.send(Event::K8s {
                    json: cmd::notify::k8s_event(
                        &self.id.name,
                        &self.id.namespace,
                        &self.id.uid,
                        "Warning",
                        "SyncFailed",
                        &m,
                    ),
                });
                Err(e)
            }
        }
    }

    fn sync_cpus(
        &self,
        vmi: &VirtualMachineInstance,
        _opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        let vmi = self.admit_change(vmi)?;
        self.manager.update_vcpus(&vmi).map_err(command_error)
    }

    fn hotplug_host_devices(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        let vmi = self.admit_change(vmi)?;
        let sriov_pci = self
            .sync
            .sriov_addresses(&vmi)
            .map_err(|e| CommandError::Failed(e.to_string()))?;
        self.manager
            .hotplug_host_devices(vmi, sriov_pci)
            .map_err(command_error)
    }

    fn sync_memory(
        &self,
        vmi: &VirtualMachineInstance,
        _opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        let vmi = self.admit_change(vmi)?;
        self.manager
            .update_guest_memory(&vmi)
            .map_err(command_error)
    }

    fn pause(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.cache.invalidate();
        self.manager.pause_vmi(vmi).map_err(command_error)
    }

    fn unpause(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.cache.invalidate();
        self.manager.unpause_vmi(vmi).map_err(command_error)
    }

    fn reset(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.cache.invalidate();
        self.manager.reset_vmi(vmi).map_err(command_error)
    }

    /// KubeVirt's SoftRebootVMI: through the guest agent when it is
    /// connected, else the ACPI power button (refused when ACPI is off).
    fn soft_reboot(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.cache.invalidate();
        if self.agent.store().connected() {
            tracing::info!(domain = %vmi.domain_name(), "soft reboot through the guest agent");
            return self
                .agent
                .reboot()
                .map_err(|e| CommandError::Failed(e.to_string()));
        }
        let acpi_off = vmi
            .spec
            .domain
            .features
            .as_ref()
            .and_then(|f| f.acpi.as_ref())
            .is_some_and(|a| a.enabled == Some(false));
        if acpi_off {
            return Err(CommandError::NoAgentNoAcpi);
        }
        self.manager.soft_reboot_vmi(vmi).map_err(command_error)
    }

    fn shutdown(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.cache.invalidate();
        // During a memory dump nothing is sent; virt-handler asks again.
        self.manager
            .signal_shutdown_vmi(vmi)
            .map(|_| ())
            .map_err(command_error)
    }

    fn kill(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.cache.invalidate();
        self.manager.kill_vmi(vmi).map_err(command_error)
    }

    fn delete(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.cache.invalidate();
        self.manager.delete_vmi(vmi).map_err(command_error)
    }

    fn migrate(&self, vmi: &VirtualMachineInstance, options: &[u8]) -> Result<(), CommandError> {
        let options = virtwrap::migration::MigrationOptions::parse(options)
            .map_err(|e| CommandError::BadRequest(e.to_string()))?;
        let vmi = self.migration_vmi(vmi);
        self.cache.invalidate();
        self.manager
            .migrate_vmi(&vmi, options, self.migration.clone())
            .map_err(command_error)
    }

    fn sync_migration_target(
        &self,
        vmi: &VirtualMachineInstance,
        opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        let vmi = self.migration_vmi(vmi);
        if vmi.metadata.name != self.id.name || vmi.namespace() != self.id.namespace {
            return Err(CommandError::OtherVmi {
                namespace: vmi.namespace().to_owned(),
                name: vmi.metadata.name.clone(),
                ours_namespace: self.id.namespace.clone(),
                ours_name: self.id.name.clone(),
            });
        }
        let vmi =
            crate::input::admit_synced(&vmi).map_err(|e| CommandError::Failed(e.to_string()))?;
        self.cache.invalidate();
        self.sync
            .prepare_target(&vmi, &cluster_options(opts), &self.migration.share_dir)
            .map_err(sync_command_error)?;
        *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(vmi);
        Ok(())
    }

    fn cancel_migration(&self, vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.cache.invalidate();
        self.manager.cancel_migration(vmi).map_err(command_error)
    }

    fn finalize_migration(
        &self,
        vmi: &VirtualMachineInstance,
        opts: &SyncOptions,
    ) -> Result<(), CommandError> {
        // KubeVirt's interfacesToReconnect: the `link-refresh` ones.
        let refresh = opts
            .interface_migration
            .iter()
            .filter(|(_, method)| method.as_str() == "link-refresh")
            .map(|(name, _)| name.clone())
            .collect();
        self.cache.invalidate();
        self.manager
            .finalize_migration_target(vmi, &refresh)
            .map_err(command_error)
    }

    /// KubeVirt: only the pod named `POD_NAME` (not empty) that is the
    /// migration's `status.migrationState.targetPod` takes the signal; its
    /// monitor then stops waiting for the domain and the launcher exits
    /// (a runtime failure when no domain ever came: `monitor::watch`).
    /// virt-handler's target side sends it once the migration failed
    /// (`finalCleanup`); the answer is success either way.
    fn signal_target_pod_cleanup(&self, vmi: &VirtualMachineInstance) {
        let me = std::env::var("POD_NAME").unwrap_or_default();
        let target = vmi
            .status
            .as_ref()
            .and_then(|s| s["migrationState"]["targetPod"].as_str())
            .unwrap_or_default();
        if !me.is_empty() && me == target {
            crate::monitor::signal_early_exit();
            tracing::info!("Signaled target pod {me} to cleanup");
        }
    }

    fn domain_json(&self) -> Result<Option<String>, CommandError> {
        let generation = match self.cache.get() {
            Ok(cached) => return Ok(cached),
            Err(generation) => generation,
        };
        let fresh = domain_json(&self.manager, &self.id, self.agent.store(), &self.metadata)
            .map_err(command_error)?;
        self.cache.set_if(generation, fresh.clone());
        Ok(fresh)
    }

    fn cached_domain_json(&self) -> Option<Option<String>> {
        self.cache.get().ok()
    }

    fn domain_stats_json(&self) -> Result<Option<String>, CommandError> {
        let stats = self
            .manager
            .with_domain(&self.id.domain_name(), |d| {
                let active = d.is_active().unwrap_or(false);
                if !active {
                    return Ok(None);
                }
                let mut s = virtwrap::stats::collect(d)?;
                s.load = self.agent.store().load().map(Into::into);
                Ok(Some(
                    serde_json::to_string(&s).unwrap_or_else(|_| "null".into()),
                ))
            })
            .map_err(command_error)?;
        Ok(stats.flatten())
    }

    fn qemu_version(&self) -> Result<String, CommandError> {
        self.manager
            .qemu_version()
            .map_err(|e| CommandError::Failed(e.to_string()))
    }

    fn dirty_rate_mbs(&self) -> Result<i64, CommandError> {
        let stat = self
            .manager
            .dirty_rate_stats(&self.id.domain_name(), virtwrap::dirtyrate::CALC_DURATION)
            .map_err(|e| CommandError::Failed(e.to_string()))?;
        virtwrap::dirtyrate::rate_mbs(stat.as_ref())
            .map_err(|e| CommandError::Failed(e.to_string()))
    }

    fn guest_info_json(&self) -> Result<String, CommandError> {
        to_json(&self.agent.store().guest_info())
    }

    fn users_json(&self) -> Result<String, CommandError> {
        to_json(&self.agent.store().users())
    }

    fn filesystems_json(&self) -> Result<String, CommandError> {
        to_json(&self.agent.store().filesystems())
    }

    fn exec(
        &self,
        domain: &str,
        command: &str,
        args: &[String],
        timeout: std::time::Duration,
    ) -> Result<(i32, String), CommandError> {
        self.check_domain(domain)?;
        let r = self
            .agent
            .exec(command, args, timeout)
            .map_err(|e| CommandError::Failed(e.to_string()))?;
        Ok((r.exit_code, r.stdout))
    }

    fn guest_ping(&self, domain: &str, timeout: std::time::Duration) -> Result<(), CommandError> {
        self.check_domain(domain)?;
        self.agent
            .ping(timeout)
            .map_err(|e| CommandError::Failed(e.to_string()))
    }

    fn freeze(
        &self,
        _vmi: &VirtualMachineInstance,
        unfreeze_timeout: std::time::Duration,
    ) -> Result<(), CommandError> {
        self.agent.freeze(unfreeze_timeout).map_err(|e| {
            CommandError::Failed(format!("failed to freeze the guest file systems: {e}"))
        })
    }

    fn unfreeze(&self, _vmi: &VirtualMachineInstance) -> Result<(), CommandError> {
        self.agent.unfreeze().map_err(|e| {
            CommandError::Failed(format!("failed to thaw the guest file systems: {e}"))
        })
    }

    /// KubeVirt's MemoryDump: the path is checked against the
    /// [`DumpPolicy`], then [`MemoryDumper`] runs the core dump on a thread
    /// of its own (on the launcher's libvirt connection) and records it in
    /// the metadata, which every change notifies.
    fn memory_dump(
        &self,
        _vmi: &VirtualMachineInstance,
        dump_path: &str,
    ) -> Result<(), CommandError> {
        let hotplug_dir = match &self.dump_policy {
            DumpPolicy::HotplugVolumes(d) => Some(d.as_path()),
            DumpPolicy::AnyDirectory => None,
        };
        let path = memory_dump::check_dump_path(dump_path, hotplug_dir)
            .map_err(|e| CommandError::Failed(e.to_string()))?;
        let manager = Arc::clone(&self.manager);
        let name = self.id.domain_name();
        let r = self
            .dumper
            .request(
                &path,
                Box::new(move |p: &std::path::Path| {
                    manager.core_dump_memory(&name, p).map_err(Into::into)
                }),
            )
            .map_err(|e| CommandError::Failed(e.to_string()))?;
        tracing::info!(path = %path.display(), request = ?r, "memory dump requested");
        Ok(())
    }

    /// KubeVirt main's BackupVirtualMachine: changed block tracking must
    /// be `Enabled` in the VMI's status, the options decode and pass
    /// KubeVirt's checks; then the manager starts or aborts the job
    /// (quiescing through the guest agent unless `skipQuiesce`).
    fn backup(&self, vmi: &VirtualMachineInstance, options: &[u8]) -> Result<(), CommandError> {
        if api::cbt::state(vmi) != api::cbt::State::Enabled {
            return Err(CommandError::Failed(backup::CBT_NOT_ENABLED.into()));
        }
        let o = decode_backup_options(options)?;
        backup::check_options(&o).map_err(|e| CommandError::Failed(e.to_string()))?;
        self.cache.invalidate();
        self.manager
            .backup_vmi(vmi, &o, &AgentQuiesce(&self.agent))
            .map_err(command_error)
    }

    /// KubeVirt main's RedefineCheckpoint.
    fn redefine_checkpoint(
        &self,
        vmi: &VirtualMachineInstance,
        checkpoint: &[u8],
    ) -> Result<(), (bool, CommandError)> {
        if api::cbt::state(vmi) != api::cbt::State::Enabled {
            return Err((
                false,
                CommandError::Failed(backup::REDEFINE_CBT_NOT_ENABLED.into()),
            ));
        }
        let cp: wire::backup::BackupCheckpoint =
            serde_json::from_slice(checkpoint).map_err(|e| {
                (
                    false,
                    CommandError::Failed(format!(
                        "Redefine checkpoint failed: invalid checkpoint info: {e}"
                    )),
                )
            })?;
        self.manager
            .redefine_checkpoint(vmi, &cp)
            .map_err(|(invalid, e)| (invalid, command_error(e)))
    }

    fn screenshot(&self, vmi: &VirtualMachineInstance) -> Result<Screenshot, CommandError> {
        let png = self
            .manager
            .screenshot(&vmi.domain_name())
            .map_err(command_error)?;
        tracing::debug!(
            width = png.width,
            height = png.height,
            bytes = png.data.len(),
            "screenshot"
        );
        Ok(Screenshot {
            mime: virtwrap::screenshot::MIME_PNG.to_owned(),
            data: png.data,
        })
    }

    fn vm_stats_collector(&self) -> bool {
        self.vm_stats_collector
    }

    fn guest_agent_version(&self) -> String {
        self.agent.store().guest_info().guest_agent_version
    }

    fn agent_data(&self, command: &str) -> Result<String, CommandError> {
        self.agent
            .data(command)
            .map_err(|e| CommandError::Failed(e.to_string()))
    }

    fn sev_info(&self) -> Result<Vec<u8>, CommandError> {
        let info = self.manager.sev_info().map_err(command_error)?;
        serde_json::to_vec(&info).map_err(|e| CommandError::Failed(e.to_string()))
    }

    fn launch_measurement(&self, vmi: &VirtualMachineInstance) -> Result<Vec<u8>, CommandError> {
        let info = self
            .manager
            .launch_measurement(&vmi.domain_name())
            .map_err(command_error)?;
        serde_json::to_vec(&info).map_err(|e| CommandError::Failed(e.to_string()))
    }

    fn inject_launch_secret(
        &self,
        vmi: &VirtualMachineInstance,
        header: &str,
        secret: &str,
    ) -> Result<(), CommandError> {
        self.manager
            .inject_launch_secret(&vmi.domain_name(), header, secret)
            .map_err(command_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each sync's options make its own settings: KubeVirt builds its
    /// converter context from the request, so a setting a request leaves
    /// out is KubeVirt's default, not an earlier request's.
    #[test]
    fn cluster_options_come_from_each_request() {
        let opts = SyncOptions {
            smbios: Some(["M".into(), "F".into(), "P".into(), "S".into(), "V".into()]),
            mem_balloon_stats_period: 0,
            preallocated_volumes: vec!["thick".into()],
            free_page_reporting_disabled: true,
            serial_console_log_disabled: true,
            bochs_display_for_efi_guests: true,
            expand_disks_enabled: true,
            interface_migration: std::collections::BTreeMap::new(),
        };
        let c = cluster_options(&opts);
        assert_eq!(c.smbios.manufacturer, "M");
        assert_eq!(c.smbios.version, "V");
        assert_eq!(c.mem_balloon_stats_period, 0);
        assert!(!c.free_page_reporting && !c.serial_console_log);
        assert!(c.bochs_for_efi_guests && c.expand_disks_enabled);
        assert!(c.volumes_discard_ignore.contains("thick"));
        let c = cluster_options(&SyncOptions::default());
        assert_eq!(c.smbios, converter::SmbiosOptions::default());
        // Without a ClusterConfig, no Bochs display (as KubeVirt reads it).
        assert!(!c.bochs_for_efi_guests);
        assert!(c.volumes_discard_ignore.is_empty());
    }

    #[test]
    fn libvirt_failures_keep_kubevirts_form() {
        let e = command_error(ManagerError::Libvirt {
            code: 42,
            domain: 10,
            message: "Domain not found.".into(),
        });
        assert_eq!(
            e.to_string(),
            "LibvirtError(Code=42, Domain=10, Message='Domain not found.')"
        );
        let e = sync_command_error(SyncError::Network(
            "spec.domain.devices.interfaces[0]: pod link eth0 is missing".into(),
        ));
        assert_eq!(
            e,
            CommandError::Failed(
                "spec.domain.devices.interfaces[0]: pod link eth0 is missing".into()
            )
        );
    }
}
