//! The event bridge: libvirt's domain events, the guest agent's updates
//! and the runtime metadata's changes, turned into virt-handler's notify
//! calls (KubeVirt's event callback), in order.

use std::sync::mpsc::Receiver;

use cmd::notify::{Event, EventType, Notifier};
use virtwrap::agent::Agent;
use virtwrap::events::DomainEvent;
use virtwrap::metadata::MetadataCache;
use virtwrap::LibvirtDomainManager;

use crate::handler::cache::DomainCache;
use crate::handler::json::{deleted_json, read_domain, status_json, Identity};

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
/// `VIR_DOMAIN_JOB_OPERATION_BACKUP`.
const JOB_OPERATION_BACKUP: i32 = 9;

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
    // KubeVirt's notifier acts on the agent's and the metadata's changes
    // only once a libvirt event about the domain arrived (its domainCache):
    // a migration target's SyncMigrationTarget records the migration before
    // libvirt knows the incoming domain, which is no deletion. (Kept to the
    // migration target: elsewhere a change before any domain, a SIGTERM's
    // mark, still ends in the final notification at once.)
    let mut libvirt_seen = false;
    for ev in rx {
        // Every event read and notified is work whose memory a release
        // takes back once the launcher is quiet again.
        crate::footprint::activity();
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
                libvirt_seen = true;
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
                libvirt_seen = true;
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
            DomainEvent::JobCompleted {
                domain,
                operation,
                error,
            } => {
                if domain != &name {
                    continue;
                }
                libvirt_seen = true;
                // KubeVirt main's processJobCompletedEvent: a backup's end
                // goes into the metadata and the domain is sent as ADDED
                // (then MODIFIED); other jobs are only logged.
                if *operation != JOB_OPERATION_BACKUP {
                    tracing::debug!(operation, "job completed");
                    continue;
                }
                manager.backup_job_completed(&name, error.as_deref());
                added = true;
            }
            DomainEvent::Reboot { domain }
            | DomainEvent::DeviceRemoved { domain, .. }
            | DomainEvent::DeviceAdded { domain, .. }
            | DomainEvent::MemoryDeviceSizeChanged { domain, .. } => {
                if domain != &name {
                    continue;
                }
                libvirt_seen = true;
            }
            DomainEvent::AgentUpdated { domain } | DomainEvent::MetadataUpdated { domain } => {
                if domain != &name || (!libvirt_seen && manager.awaits_incoming()) {
                    continue;
                }
            }
        }
        cache.invalidate();
        // The metadata before the state: a record that says a migration
        // ended (set once the target's domain runs) never goes out with a
        // state read before that.
        let md = metadata.snapshot();
        let read = read_domain(manager, id);
        match read {
            Ok(Some(d)) => {
                if d.state == "Paused" && d.reason == "IOError" {
                    report_io_errors(manager, id, &d.spec, notifier);
                }
                let json = status_json(id, &d.spec, d.state, d.reason, agent.store(), &md);
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
                            &md,
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
        // The JSON just built ran deep: its stack pages go back.
        crate::footprint::release_own_stack();
    }
}

/// A reconnection before any domain exists says nothing about deletion.
fn first_connect_only(ev: &DomainEvent) -> bool {
    matches!(ev, DomainEvent::Reconnected)
}

/// KubeVirt's notifier for a domain paused for an I/O error (v1.6.6
/// `notify-client/client.go`, `ReasonPausedIOError`): a Warning event
/// `IOerror` per disk libvirt reports an error for, naming its volume.
/// KubeVirt then sends the domain once per such disk; here the domain
/// follows once, as for any event (the same state each time).
fn report_io_errors(
    manager: &LibvirtDomainManager,
    id: &Identity,
    spec: &domain::Domain,
    notifier: &Notifier,
) {
    let errors = match manager.disk_errors(&id.domain_name()) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!("Could not get disks with errors: {e}");
            return;
        }
    };
    for e in &errors {
        let message = io_error_message(spec, e);
        tracing::warn!(disk = %e.target, "{message}");
        notifier.send(Event::K8s {
            json: cmd::notify::k8s_event(
                &id.name,
                &id.namespace,
                &id.uid,
                "Warning",
                "IOerror",
                &message,
            ),
        });
    }
}

/// KubeVirt's message for a disk error: the volume is the disk's alias
/// without `ua-` (`GetVolumeNameByTarget`; empty when no disk has that
/// target).
fn io_error_message(spec: &domain::Domain, e: &virtwrap::manager::DiskError) -> String {
    let volume = spec
        .devices
        .disk
        .iter()
        .find(|d| d.target.dev == e.target)
        .and_then(|d| d.alias.as_ref())
        .map_or("", |a| {
            a.name
                .strip_prefix(wire::api_domain::USER_ALIAS_PREFIX)
                .unwrap_or(&a.name)
        });
    match e.kind {
        virtwrap::manager::DiskErrorKind::NoSpace => {
            format!("VM Paused due to not enough space on volume: {volume}")
        }
        virtwrap::manager::DiskErrorKind::Unspecified => {
            format!("VM Paused due to IO error at the volume: {volume}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtwrap::manager::{DiskError, DiskErrorKind};

    fn spec() -> domain::Domain {
        domain::Domain::from_xml(
            "<domain type='qemu'><name>ns_vm</name><memory unit='b'>1</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>\
             <disk type='file' device='disk'><source file='/a'/><target dev='vda' bus='virtio'/><alias name='ua-rootdisk'/></disk>\
             <disk type='file' device='disk'><source file='/b'/><target dev='vdb' bus='virtio'/><alias name='ua-data'/></disk>\
             </devices></domain>",
        )
        .unwrap()
    }

    #[test]
    fn io_error_messages_name_the_volume_as_kubevirt_does() {
        let s = spec();
        let e = |target: &str, kind| DiskError {
            target: target.into(),
            kind,
        };
        assert_eq!(
            io_error_message(&s, &e("vdb", DiskErrorKind::NoSpace)),
            "VM Paused due to not enough space on volume: data"
        );
        assert_eq!(
            io_error_message(&s, &e("vda", DiskErrorKind::Unspecified)),
            "VM Paused due to IO error at the volume: rootdisk"
        );
        assert_eq!(
            io_error_message(&s, &e("sdz", DiskErrorKind::NoSpace)),
            "VM Paused due to not enough space on volume: "
        );
    }
}
