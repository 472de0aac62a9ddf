//! The launcher's side of virt-handler's protocol: the command handler the
//! gRPC server calls, the domain as KubeVirt's api.Domain JSON (with the
//! runtime metadata, e.g. a memory dump's progress), and the bridge from
//! libvirt's domain events and metadata changes to virt-handler's notify
//! socket.

use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use api::VirtualMachineInstance;
use cmd::notify::{Event, EventType, Notifier};
use cmd::server::{Handler, SyncOptions};
use virtwrap::agent::{Agent, AgentStore};
use virtwrap::events::DomainEvent;
use virtwrap::memory_dump::{self, MemoryDumper};
use virtwrap::metadata::MetadataCache;
use virtwrap::{DomainManager, LibvirtDomainManager, ManagerError};
use wire::api_domain::{self, DomainStatus, ObjectMeta, RuntimeMetadata};

/// Who this launcher runs: from the flags, or the VMI it was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// VMI name.
    pub name: String,
    /// VMI namespace.
    pub namespace: String,
    /// VMI UID.
    pub uid: String,
}

impl Identity {
    /// Identity of `vmi`.
    pub fn of(vmi: &VirtualMachineInstance) -> Identity {
        Identity {
            name: vmi.metadata.name.clone(),
            namespace: vmi.namespace().to_owned(),
            uid: vmi.uid().to_owned(),
        }
    }

    /// libvirt domain name `<namespace>_<name>`.
    pub fn domain_name(&self) -> String {
        format!("{}_{}", self.namespace, self.name)
    }

    fn meta(&self, deletion_timestamp: Option<String>) -> ObjectMeta {
        ObjectMeta {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
            deletion_timestamp,
        }
    }
}

pub use virtwrap::metadata::now_rfc3339;

/// The domain as KubeVirt's api.Domain JSON, `None` when it does not exist;
/// `Spec.Metadata.KubeVirt` carries `metadata` (KubeVirt's metadata cache).
///
/// # Errors
/// [`ManagerError`] from libvirt.
pub fn domain_json(
    manager: &LibvirtDomainManager,
    id: &Identity,
    agent: &AgentStore,
    metadata: &MetadataCache,
) -> Result<Option<String>, ManagerError> {
    Ok(read_domain(manager, id)?
        .map(|d| status_json(id, &d.spec, d.state, d.reason, agent, &metadata.snapshot())))
}

/// The VMI's domain as libvirt reports it now, `None` when it does not exist.
///
/// # Errors
/// [`ManagerError`] from libvirt.
fn read_domain(
    manager: &LibvirtDomainManager,
    id: &Identity,
) -> Result<Option<virtwrap::manager::DomainStatus>, ManagerError> {
    let name = id.domain_name();
    Ok(manager
        .list_all_domains()?
        .into_iter()
        .find(|d| d.name == name))
}

/// KubeVirt's api.Domain JSON of `spec` in `state`/`reason` (KubeVirt's
/// `LifeCycle` and `StateChangeReason` names), with what the guest agent
/// reported: `OSInfo`, `Interfaces` (IPs) and `FSFreezeStatus`, and the
/// runtime metadata in `Spec.Metadata.KubeVirt` (e.g. `MemoryDump`).
fn status_json(
    id: &Identity,
    spec: &domain::Domain,
    state: &str,
    reason: &str,
    agent: &AgentStore,
    metadata: &RuntimeMetadata,
) -> String {
    let spec = &without_placeholders(spec);
    let (os, interfaces, fs_freeze_status) = agent.status_parts();
    let status = DomainStatus {
        status: state.to_owned(),
        reason: reason.to_owned(),
        interfaces: interfaces.map(|l| {
            l.iter()
                .map(|i| serde_json::to_value(i).unwrap_or_default())
                .collect()
        }),
        os_info: os.map(|o| serde_json::to_value(o).unwrap_or_default()),
        fs_freeze_status,
    };
    api_domain::domain_json_with_metadata(&id.meta(None), Some(spec), &status, metadata).to_string()
}

/// `spec` without the placeholder interfaces of the first of the sync's
/// two defines ([`converter::pci_ports::with_placeholders`]): a domain read
/// between the two (a notification of the first define) lists them, and
/// they are no device of the VMI. They have no alias, and virt-handler's
/// netstat reads every interface's alias through its pointer: one in a
/// notification would panic virt-handler (KubeVirt's launcher can send
/// them in that window; found with the virt-handler stand-in).
fn without_placeholders(spec: &domain::Domain) -> std::borrow::Cow<'_, domain::Domain> {
    let placeholder = |i: &domain::Interface| {
        i.target
            .as_ref()
            .is_some_and(|t| t.dev.starts_with(converter::pci_ports::PLACEHOLDER_PREFIX))
    };
    if !spec.devices.interface.iter().any(placeholder) {
        return std::borrow::Cow::Borrowed(spec);
    }
    let mut s = spec.clone();
    s.devices.interface.retain(|i| !placeholder(i));
    std::borrow::Cow::Owned(s)
}

/// The final notification KubeVirt sends when the domain is gone: a
/// MODIFIED event with `deletionTimestamp` set, status NoState/NonExistent.
pub fn deleted_json(id: &Identity) -> String {
    let status = DomainStatus {
        status: "NoState".into(),
        reason: virtwrap::state::NON_EXISTENT.into(),
        interfaces: None,
        os_info: None,
        fs_freeze_status: String::new(),
    };
    api_domain::domain_json(&id.meta(Some(now_rfc3339())), None, &status).to_string()
}

/// The domain JSON as last read, kept fresh by the event bridge (which
/// reads it on every libvirt event anyway) and dropped by every command
/// that changes the domain. GetDomain answers from it instead of asking
/// libvirt (five round trips and an XML parse) on every call. A read that
/// started before a change never overwrites what the change stored (a
/// generation counter, bumped by every store and invalidation).
#[derive(Default)]
pub struct DomainCache {
    /// (generation, value). Value `None`: unknown, read libvirt;
    /// `Some(None)`: no domain.
    inner: Mutex<(u64, Option<Option<String>>)>,
}

impl DomainCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, Option<Option<String>>)> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached value, or the generation to pass to [`DomainCache::set_if`]
    /// after reading libvirt.
    fn get(&self) -> Result<Option<String>, u64> {
        let g = self.lock();
        g.1.clone().ok_or(g.0)
    }

    /// Stores what was just read from libvirt.
    pub fn set(&self, v: Option<String>) {
        let mut g = self.lock();
        g.0 += 1;
        g.1 = Some(v);
    }

    /// Stores `v`, read from libvirt after [`DomainCache::get`] returned
    /// `generation`, unless something was stored or invalidated since.
    fn set_if(&self, generation: u64, v: Option<String>) {
        let mut g = self.lock();
        if g.0 == generation {
            g.0 += 1;
            g.1 = Some(v);
        }
    }

    /// Forgets it (the domain is changing).
    pub fn invalidate(&self) {
        let mut g = self.lock();
        g.0 += 1;
        g.1 = None;
    }
}

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

/// [`Handler`] on the launcher's DomainManager.
pub struct LauncherHandler {
    manager: Arc<LibvirtDomainManager>,
    id: Identity,
    notifier: Notifier,
    cache: Arc<DomainCache>,
    agent: Arc<Agent>,
    metadata: Arc<MetadataCache>,
    dumper: MemoryDumper,
    dump_policy: DumpPolicy,
    /// The VMI last synced (virt-handler's, with its full spec).
    pub current: Mutex<Option<VirtualMachineInstance>>,
}

impl LauncherHandler {
    /// A handler for `id`'s domain; `metadata` is the runtime metadata
    /// every domain JSON carries (its changes must reach the event bridge
    /// as [`DomainEvent::MetadataUpdated`]).
    pub fn new(
        manager: Arc<LibvirtDomainManager>,
        id: Identity,
        notifier: Notifier,
        cache: Arc<DomainCache>,
        agent: Arc<Agent>,
        metadata: Arc<MetadataCache>,
        dump_policy: DumpPolicy,
    ) -> Self {
        LauncherHandler {
            manager,
            id,
            notifier,
            cache,
            agent,
            dumper: MemoryDumper::new(Arc::clone(&metadata), now_rfc3339),
            metadata,
            dump_policy,
            current: Mutex::new(None),
        }
    }

    /// Refuses a request for a domain other than this launcher's.
    fn check_domain(&self, name: &str) -> Result<(), String> {
        if name == self.id.domain_name() {
            Ok(())
        } else {
            Err(format!(
                "Domain not found: no domain with matching name '{name}'"
            ))
        }
    }
}

/// JSON of a value whose types always serialise.
fn to_json<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| format!("encoding the guest agent data: {e}"))
}

fn msg(e: ManagerError) -> String {
    e.to_string()
}

impl Handler for LauncherHandler {
    fn vmi_uid(&self) -> String {
        self.id.uid.clone()
    }

    fn sync(&self, vmi: &VirtualMachineInstance, opts: &SyncOptions) -> Result<(), String> {
        if vmi.metadata.name != self.id.name || vmi.namespace() != self.id.namespace {
            return Err(format!(
                "VMI {}/{} is not the VMI this launcher runs ({}/{})",
                vmi.namespace(),
                vmi.metadata.name,
                self.id.namespace,
                self.id.name
            ));
        }
        // virt-handler's VMI is already defaulted and admitted; the
        // launcher's own defaults and checks are idempotent and cheap.
        let mut vmi = vmi.clone();
        let arch = api::Arch::host().map_err(|e| e.to_string())?;
        api::defaults::apply(&mut vmi, arch);
        if let Some(e) = api::validate::validate(&vmi).into_iter().next() {
            return Err(e.to_string());
        }
        self.manager.update_context(|ctx| {
            if let Some([manufacturer, family, product, sku, version]) = &opts.smbios {
                ctx.smbios = converter::SmbiosOptions {
                    manufacturer: manufacturer.clone(),
                    family: family.clone(),
                    product: product.clone(),
                    sku: sku.clone(),
                    version: version.clone(),
                };
            }
            ctx.mem_balloon_stats_period = opts.mem_balloon_stats_period;
            ctx.free_page_reporting = !opts.free_page_reporting_disabled;
            ctx.serial_console_log = !opts.serial_console_log_disabled;
            ctx.bochs_for_efi_guests = opts.bochs_display_for_efi_guests;
            ctx.volumes_discard_ignore = opts.preallocated_volumes.iter().cloned().collect();
            ctx.expand_disks_enabled = opts.expand_disks_enabled;
        });
        self.cache.invalidate();
        match self.manager.sync_vmi(&vmi) {
            Ok(_) => {
                *self
                    .current
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(vmi);
                Ok(())
            }
            Err(e) => {
                let m = msg(e);
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
                Err(m)
            }
        }
    }

    fn pause(&self, vmi: &VirtualMachineInstance) -> Result<(), String> {
        self.cache.invalidate();
        self.manager.pause_vmi(vmi).map_err(msg)
    }

    fn unpause(&self, vmi: &VirtualMachineInstance) -> Result<(), String> {
        self.cache.invalidate();
        self.manager.unpause_vmi(vmi).map_err(msg)
    }

    fn reset(&self, vmi: &VirtualMachineInstance) -> Result<(), String> {
        self.cache.invalidate();
        self.manager.reset_vmi(vmi).map_err(msg)
    }

    /// KubeVirt's SoftRebootVMI: through the guest agent when it is
    /// connected, else the ACPI power button (refused when ACPI is off).
    fn soft_reboot(&self, vmi: &VirtualMachineInstance) -> Result<(), String> {
        self.cache.invalidate();
        if self.agent.store().connected() {
            tracing::info!(domain = %vmi.domain_name(), "soft reboot through the guest agent");
            return self.agent.reboot().map_err(|e| e.to_string());
        }
        let acpi_off = vmi
            .spec
            .domain
            .features
            .as_ref()
            .and_then(|f| f.acpi.as_ref())
            .is_some_and(|a| a.enabled == Some(false));
        if acpi_off {
            return Err("VMI neither have the agent connected nor the ACPI feature enabled".into());
        }
        self.manager.soft_reboot_vmi(vmi).map_err(msg)
    }

    fn shutdown(&self, vmi: &VirtualMachineInstance) -> Result<(), String> {
        self.cache.invalidate();
        // During a memory dump nothing is sent; virt-handler asks again.
        self.manager
            .signal_shutdown_vmi(vmi)
            .map(|_| ())
            .map_err(msg)
    }

    fn kill(&self, vmi: &VirtualMachineInstance) -> Result<(), String> {
        self.cache.invalidate();
        self.manager.kill_vmi(vmi).map_err(msg)
    }

    fn delete(&self, vmi: &VirtualMachineInstance) -> Result<(), String> {
        self.cache.invalidate();
        self.manager.delete_vmi(vmi).map_err(msg)
    }

    fn domain_json(&self) -> Result<Option<String>, String> {
        let generation = match self.cache.get() {
            Ok(cached) => return Ok(cached),
            Err(generation) => generation,
        };
        let fresh = domain_json(&self.manager, &self.id, self.agent.store(), &self.metadata)
            .map_err(msg)?;
        self.cache.set_if(generation, fresh.clone());
        Ok(fresh)
    }

    fn cached_domain_json(&self) -> Option<Option<String>> {
        self.cache.get().ok()
    }

    fn domain_stats_json(&self) -> Result<Option<String>, String> {
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
            .map_err(msg)?;
        Ok(stats.flatten())
    }

    fn qemu_version(&self) -> Result<String, String> {
        self.manager.qemu_version()
    }

    fn dirty_rate_mbs(&self) -> Result<i64, String> {
        let stat = self
            .manager
            .dirty_rate_stats(&self.id.domain_name(), virtwrap::dirtyrate::CALC_DURATION)?;
        virtwrap::dirtyrate::rate_mbs(stat.as_ref())
    }

    fn guest_info_json(&self) -> Result<String, String> {
        to_json(&self.agent.store().guest_info())
    }

    fn users_json(&self) -> Result<String, String> {
        to_json(&self.agent.store().users())
    }

    fn filesystems_json(&self) -> Result<String, String> {
        to_json(&self.agent.store().filesystems())
    }

    fn exec(
        &self,
        domain: &str,
        command: &str,
        args: &[String],
        timeout: std::time::Duration,
    ) -> Result<(i32, String), String> {
        self.check_domain(domain)?;
        let r = self
            .agent
            .exec(command, args, timeout)
            .map_err(|e| e.to_string())?;
        Ok((r.exit_code, r.stdout))
    }

    fn guest_ping(&self, domain: &str, timeout: std::time::Duration) -> Result<(), String> {
        self.check_domain(domain)?;
        self.agent.ping(timeout).map_err(|e| e.to_string())
    }

    fn freeze(
        &self,
        _vmi: &VirtualMachineInstance,
        unfreeze_timeout: std::time::Duration,
    ) -> Result<(), String> {
        self.agent
            .freeze(unfreeze_timeout)
            .map_err(|e| format!("failed to freeze the guest file systems: {e}"))
    }

    fn unfreeze(&self, _vmi: &VirtualMachineInstance) -> Result<(), String> {
        self.agent
            .unfreeze()
            .map_err(|e| format!("failed to thaw the guest file systems: {e}"))
    }

    /// KubeVirt's MemoryDump: the path is checked against the
    /// [`DumpPolicy`], then [`MemoryDumper`] runs the core dump on a thread
    /// of its own (on a libvirt connection of its own) and records it in
    /// the metadata, which every change notifies.
    fn memory_dump(&self, _vmi: &VirtualMachineInstance, dump_path: &str) -> Result<(), String> {
        let hotplug_dir = match &self.dump_policy {
            DumpPolicy::HotplugVolumes(d) => Some(d.as_path()),
            DumpPolicy::AnyDirectory => None,
        };
        let path = memory_dump::check_dump_path(dump_path, hotplug_dir)?;
        let manager = Arc::clone(&self.manager);
        let name = self.id.domain_name();
        let r = self.dumper.request(
            &path,
            Box::new(move |p: &std::path::Path| manager.core_dump_memory(&name, p).map_err(msg)),
        )?;
        tracing::info!(path = %path.display(), request = ?r, "memory dump requested");
        Ok(())
    }
}

/// libvirt `virDomainEventType` values used below.
const EVENT_DEFINED: i32 = 0;
const EVENT_STARTED: i32 = 2;
const DETAIL_DEFINED_ADDED: i32 = 0;
const DETAIL_STARTED_MIGRATED: i32 = 1;
const EVENT_STOPPED: i32 = 5;
/// `VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED`.
const AGENT_CONNECTED: i32 = 1;
/// `VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_DISCONNECTED`.
const AGENT_DISCONNECTED: i32 = 2;
/// `virDomainState` VIR_DOMAIN_SHUTOFF.
const STATE_SHUTOFF: u32 = 5;

/// Turns libvirt domain events into notifications, KubeVirt's way: on every
/// event the domain is re-read; DEFINED/ADDED and STARTED/MIGRATED also send
/// ADDED first; a domain that no longer exists sends the final MODIFIED
/// with a deletion timestamp (once); a reconnection sends ERROR, then the
/// current state. A domain undefined before its STOPPED event could be
/// re-read still reports Shutoff with the event's reason first (built from
/// the last spec seen), so virt-handler always learns why the VMI stopped.
/// Returns when the channel closes.
///
/// Agent lifecycle events start and stop the agent poller (a stopped
/// domain stops it too; a reconnection makes it probe, as events may have
/// been missed); the poller's changes arrive as
/// [`DomainEvent::AgentUpdated`] and are notified like any other event,
/// as are the runtime metadata's changes ([`DomainEvent::MetadataUpdated`]:
/// a memory dump started or ended). Every domain JSON carries `metadata`.
pub fn bridge(
    rx: &Receiver<DomainEvent>,
    manager: &LibvirtDomainManager,
    id: &Identity,
    notifier: &Notifier,
    cache: &DomainCache,
    agent: &Agent,
    metadata: &MetadataCache,
) {
    let name = id.domain_name();
    let mut first_connect = true;
    let mut gone_sent = false;
    // The last domain read and whether it was already reported Shutoff.
    let mut last: Option<(domain::Domain, bool)> = None;
    for ev in rx {
        let mut added = false;
        let mut stopped_reason = None;
        match &ev {
            DomainEvent::Reconnected => {
                if !first_connect {
                    notifier.send(Event::Domain {
                        event_type: EventType::Error,
                        domain_json: String::new(),
                        status_json: cmd::notify::error_status(&format!(
                            "Libvirt reconnect, domain {name}"
                        )),
                        last: false,
                    });
                }
                first_connect = false;
                agent.poller().probe();
            }
            DomainEvent::Lifecycle {
                domain,
                event,
                detail,
            } => {
                if domain != &name {
                    continue;
                }
                added = (*event == EVENT_DEFINED && *detail == DETAIL_DEFINED_ADDED)
                    || (*event == EVENT_STARTED && *detail == DETAIL_STARTED_MIGRATED);
                if *event == EVENT_STOPPED {
                    agent.poller().disconnected();
                    // virDomainEventStoppedDetailType is virDomainShutoffReason - 1.
                    stopped_reason = Some(virtwrap::state::reason(STATE_SHUTOFF, detail + 1));
                }
                tracing::debug!(event, detail, "domain lifecycle event");
            }
            DomainEvent::AgentLifecycle { domain, state } => {
                if domain != &name {
                    continue;
                }
                match *state {
                    AGENT_CONNECTED => agent.poller().connected(),
                    AGENT_DISCONNECTED => agent.poller().disconnected(),
                    _ => {}
                }
                tracing::info!(state, "guest agent lifecycle event");
            }
            DomainEvent::Vmi {
                kind,
                reason,
                message,
            } => {
                tracing::info!(kind, reason, message, "event");
                notifier.send(Event::K8s {
                    json: cmd::notify::k8s_event(
                        &id.name,
                        &id.namespace,
                        &id.uid,
                        kind,
                        reason,
                        message,
                    ),
                });
                continue;
            }
            DomainEvent::Reboot { domain }
            | DomainEvent::AgentUpdated { domain }
            | DomainEvent::MetadataUpdated { domain }
            | DomainEvent::DeviceRemoved { domain, .. } => {
                if domain != &name {
                    continue;
                }
            }
        }
        cache.invalidate();
        let read = read_domain(manager, id);
        match read {
            Ok(Some(d)) => {
                let json = status_json(
                    id,
                    &d.spec,
                    d.state,
                    d.reason,
                    agent.store(),
                    &metadata.snapshot(),
                );
                cache.set(Some(json.clone()));
                gone_sent = false;
                last = Some((d.spec, d.state == "Shutoff"));
                if added {
                    notifier.domain(EventType::Added, json.clone());
                }
                notifier.domain(EventType::Modified, json);
            }
            Ok(None) => {
                cache.set(None);
                if let (Some(reason), Some((spec, false))) = (stopped_reason, &last) {
                    notifier.domain(
                        EventType::Modified,
                        status_json(
                            id,
                            spec,
                            virtwrap::state::lifecycle(STATE_SHUTOFF),
                            reason,
                            agent.store(),
                            &metadata.snapshot(),
                        ),
                    );
                    last = None;
                }
                if !gone_sent && !first_connect_only(&ev) {
                    notifier.send(Event::Domain {
                        event_type: EventType::Modified,
                        domain_json: deleted_json(id),
                        status_json: String::new(),
                        last: true,
                    });
                    gone_sent = true;
                }
            }
            Err(e) => tracing::warn!("reading the domain for a notification: {e}"),
        }
    }
}

/// A reconnection before any domain exists says nothing about deletion.
fn first_connect_only(ev: &DomainEvent) -> bool {
    matches!(ev, DomainEvent::Reconnected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_older_than_a_change_never_overwrites_it() {
        let c = DomainCache::default();
        let g = c.get().expect_err("empty at first");
        // The event bridge stores a fresher state while a GetDomain reads.
        c.set(Some("new".into()));
        c.set_if(g, Some("old".into()));
        assert_eq!(c.get(), Ok(Some("new".into())));
        // An invalidation in between also wins.
        c.invalidate();
        let g = c.get().expect_err("invalidated");
        c.invalidate();
        c.set_if(g, Some("old".into()));
        assert!(c.get().is_err());
        // An undisturbed read is kept.
        let g = c.get().expect_err("still empty");
        c.set_if(g, None);
        assert_eq!(c.get(), Ok(None));
    }

    #[test]
    fn placeholder_interfaces_of_the_first_define_are_never_reported() {
        let xml = "<domain type='qemu'><name>ns_vm</name><memory unit='b'>1</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>\
            <interface type='ethernet'><mac address='02:00:00:00:00:01'/><target dev='tap0' managed='no'/><model type='virtio-non-transitional'/><alias name='ua-default'/></interface>\
            <interface type='ethernet'><mac address='52:54:00:00:00:02'/><target dev='placeholder-0' managed='no'/><model type='virtio-non-transitional'/></interface>\
            </devices></domain>";
        let spec = domain::Domain::from_xml(xml).unwrap();
        assert_eq!(spec.devices.interface.len(), 2);
        let kept = without_placeholders(&spec);
        assert_eq!(kept.devices.interface.len(), 1);
        assert_eq!(
            kept.devices.interface[0].target.as_ref().unwrap().dev,
            "tap0"
        );
        let id = Identity {
            name: "vm".into(),
            namespace: "ns".into(),
            uid: "u".into(),
        };
        let json: serde_json::Value = serde_json::from_str(&status_json(
            &id,
            &spec,
            "Running",
            "Unknown",
            &AgentStore::default(),
            &RuntimeMetadata::default(),
        ))
        .unwrap();
        let ifaces = json["Spec"]["Devices"]["Interfaces"].as_array().unwrap();
        assert_eq!(ifaces.len(), 1, "{json}");
        assert_eq!(ifaces[0]["Alias"]["Name"], "default", "{json}");
    }
}
