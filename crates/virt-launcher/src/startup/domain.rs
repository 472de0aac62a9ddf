//! The domain.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::VirtualMachineInstance;
use converter::{ConvertContext, ConvertError};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use storage::{ConfigSources, PrepareOptions};
use virtwrap::config::DaemonKind;
use virtwrap::manager::Connector;
use virtwrap::supervisor::Supervisor;
use virtwrap::{DomainManager, LibvirtDomainManager, ManagerError};

use super::grpc::Grpc;
use super::signals::{grace_period, ms, signals};
use super::PRIVATE_DIR;
use crate::error::{manager_error, LauncherError};
use crate::flags::LauncherFlags;
use crate::handler::cache::DomainCache;
use crate::handler::json::Identity;
use crate::handler::DumpPolicy;

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_domain(
    vmi: &VirtualMachineInstance,
    sync: bool,
    flags: &LauncherFlags,
    ctx: &ConvertContext,
    daemon: &DaemonKind,
    sup: &Supervisor,
    block_volumes: Option<std::collections::BTreeSet<String>>,
    config_sources: &ConfigSources,
    started: Instant,
) -> Result<(), LauncherError> {
    // Before any connection: libvirt delivers events through this loop.
    virtwrap::events::start_event_loop();
    let connector = Connector {
        daemon: daemon.name().into(),
        uri: "qemu:///system".into(),
        socket: Path::new("/var/run/libvirt").join(daemon.socket_name()),
    };
    // Libvirt's events, the agent's updates and the events preparing the
    // VMI raises all reach virt-handler through one bridge (below).
    // Senders other than the libvirt watcher's go through `bridge_tx`,
    // emptied at the end so that the bridge sees the channel close.
    let (ev_tx, ev_rx) = std::sync::mpsc::channel();
    let bridge_tx = Arc::new(std::sync::Mutex::new(Some(ev_tx.clone())));
    let to_bridge = {
        let tx = Arc::clone(&bridge_tx);
        move |ev: virtwrap::events::DomainEvent| {
            if let Some(tx) = tx
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
            {
                let _ = tx.send(ev);
            }
        }
    };
    let vmi_events = {
        let to_bridge = to_bridge.clone();
        storage::EventSink(Arc::new(move |e: storage::VmiEvent| {
            to_bridge(virtwrap::events::DomainEvent::Vmi {
                kind: e.kind,
                reason: e.reason,
                message: e.message,
            });
        }))
    };
    let prepare = PrepareOptions {
        disk_memory_limit: flags.disk_memory_limit,
        owner: None,
        block_device_dir: Some(PathBuf::from("/dev")),
        block_volumes,
        space: storage::pvc::SpacePolicy {
            less_pvc_space_toleration: flags.less_pvc_space_toleration,
            minimum_reserve_bytes: flags.minimum_reserve_pvc_bytes,
        },
        config_sources: config_sources.clone(),
        rebuild_media: true,
        config_disk_fs: flags.config_disk_fs.into(),
        events: Some(vmi_events),
    };
    let id = Identity::of(vmi);
    let cache = Arc::new(DomainCache::default());
    // KubeVirt's metadata cache: a change (a memory dump starting or
    // ending, the grace period, a shutdown request) drops the cached domain
    // and reaches virt-handler through the event bridge as a MODIFIED domain.
    let metadata = {
        let (cache, to_bridge, domain) = (Arc::clone(&cache), to_bridge.clone(), id.domain_name());
        Arc::new(virtwrap::metadata::MetadataCache::new(Box::new(
            move || {
                cache.invalidate();
                to_bridge(virtwrap::events::DomainEvent::MetadataUpdated {
                    domain: domain.clone(),
                });
            },
        )))
    };
    let mut manager = LibvirtDomainManager::new(
        connector.clone(),
        ctx.clone(),
        prepare,
        Arc::clone(&metadata),
    )
    .map_err(|e| LauncherError::Runtime(e.to_string()))?;
    // In a pod, the VMI virt-handler syncs brings its interfaces: phase 2
    // (host facts, DHCP) runs then, in the pod's network namespace where
    // virt-handler's phase 1 made the bridge and tap.
    let dhcp_servers: Arc<std::sync::Mutex<Vec<network::phase2::DhcpServers>>> = Arc::default();
    if matches!(config_sources, ConfigSources::Pod) {
        manager = manager.with_sriov(Box::new(network::sriov::pod_host_addresses));
        let servers = Arc::clone(&dhcp_servers);
        manager = manager.with_network_phase2(Box::new(move |vmi: &VirtualMachineInstance| {
            let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            let p = network::phase2::prepare(
                vmi,
                Path::new(PRIVATE_DIR),
                &resolv,
                &network::phase1::pod_link,
                &network::phase1::link_exists,
            )?;
            let started = network::phase2::DhcpServers::start(p.dhcp, p.dhcp6)?;
            servers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(started);
            Ok(p.hosts)
        }));
    }
    let manager = Arc::new(manager);
    tracing::info!(ms = ms(started), "libvirt ready");
    let share = PathBuf::from(&flags.kubevirt_share_dir);
    // The guest agent: its own connection and poller thread; what it learns
    // reaches virt-handler through the event bridge.
    let agent = {
        let domain = id.domain_name();
        let channel = Arc::new(virtwrap::agent::LibvirtAgent::new(
            connector.clone(),
            domain.clone(),
        ));
        Arc::new(
            virtwrap::agent::Agent::start(
                channel,
                Arc::new(move || {
                    to_bridge(virtwrap::events::DomainEvent::AgentUpdated {
                        domain: domain.clone(),
                    });
                }),
            )
            .map_err(|e| LauncherError::Runtime(format!("cannot start the agent poller: {e}")))?,
        )
    };
    let standalone = matches!(config_sources, ConfigSources::Standalone { .. });
    let dump_policy = if standalone {
        DumpPolicy::AnyDirectory
    } else {
        DumpPolicy::HotplugVolumes(PathBuf::from(&flags.hotplug_disk_dir))
    };
    let mut grpc = Grpc::start(
        &share,
        Arc::clone(&manager),
        id.clone(),
        Arc::clone(&cache),
        Arc::clone(&agent),
        Arc::clone(&metadata),
        dump_policy,
        standalone,
    )?;
    let stop_events = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let events = virtwrap::events::watch(connector, ev_tx, Arc::clone(&stop_events))
        .map_err(|e| LauncherError::Runtime(format!("cannot watch domain events: {e}")))?;
    let bridge = {
        let (manager, id, notifier, cache, agent, metadata) = (
            Arc::clone(&manager),
            id.clone(),
            grpc.notifier.clone(),
            Arc::clone(&cache),
            Arc::clone(&agent),
            Arc::clone(&metadata),
        );
        std::thread::Builder::new()
            .name("notify-bridge".into())
            .spawn(move || {
                crate::bridge::bridge(&ev_rx, &manager, &id, &notifier, &cache, &agent, &metadata);
            })
            .map_err(|e| LauncherError::Runtime(format!("cannot start the notify bridge: {e}")))?
    };

    cmd::server::mark_ready(&share)
        .map_err(|e| LauncherError::Runtime(format!("markReady: {e}")))?;
    tracing::info!(socket = %cmd::server::ready_socket(&share).display(), "command server ready");

    let signals = signals();
    let grace = Duration::from_secs(
        grace_period(flags.grace_period_seconds, vmi)
            .max(0)
            .unsigned_abs(),
    );
    let outcome = if sync {
        match sync_watching_signals(vmi, &manager, &signals, flags.qemu_timeout) {
            Ok(false) => {
                tracing::info!("termination signal during start: domain stopped");
                Ok(())
            }
            Ok(true) => {
                // Created paused for virt-handler to move the emulator
                // thread (isolateEmulatorThread); with no virt-handler here
                // its second sync is ours: it resumes the domain.
                let resumed = if virtwrap::manager::starts_paused(vmi)
                    && vmi.spec.start_strategy.as_deref() != Some("Paused")
                {
                    manager.sync_vmi(vmi).map(|_| ()).map_err(manager_error)
                } else {
                    Ok(())
                };
                match resumed {
                    Ok(()) => {
                        tracing::info!(ms = ms(started), domain = %vmi.domain_name(), "domain running");
                        crate::monitor::watch(
                            vmi,
                            &manager,
                            sup,
                            &signals,
                            grace,
                            flags.qemu_timeout,
                        )
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(manager_error(e)),
        }
    } else {
        // virt-handler sends SyncVirtualMachine; the monitor waits for QEMU.
        crate::monitor::watch(vmi, &manager, sup, &signals, grace, flags.qemu_timeout)
    };
    // Whatever happened: nothing may keep running.
    if let Err(e) = manager.kill_vmi(vmi) {
        tracing::warn!("final kill: {e}");
    }
    if let Some(pid) = crate::monitor::qemu_pid(vmi) {
        if std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !process::reaper().has_exited(pid)
        {
            let _ = kill(
                Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
                Signal::SIGKILL,
            );
        }
    }
    if let Err(e) = manager.undefine_vmi(vmi) {
        tracing::warn!("undefine: {e}");
    }
    // The undefine event makes the bridge send the final notification;
    // give libvirt a moment to deliver it, then stop watching.
    std::thread::sleep(Duration::from_millis(200));
    stop_events.store(true, std::sync::atomic::Ordering::SeqCst);
    agent.poller().stop();
    bridge_tx
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let _ = events.join();
    let _ = bridge.join();
    if !grpc.notifier.final_sent() {
        grpc.notifier.send(cmd::notify::Event::Domain {
            event_type: cmd::notify::EventType::Modified,
            domain_json: crate::handler::json::deleted_json(&id),
            status_json: String::new(),
            last: true,
        });
    }
    grpc.stop();
    for servers in std::mem::take(
        &mut *dhcp_servers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    ) {
        servers.stop();
    }
    outcome
}

/// SyncVMI in a helper thread, so that a termination signal or
/// `--qemu-timeout` is honoured while libvirt starts QEMU (which can block
/// for minutes): on either, the QEMU being started is killed, which makes
/// libvirt's start fail and return. Ok(true) = running, Ok(false) = stopped
/// by a signal.
fn sync_watching_signals(
    vmi: &VirtualMachineInstance,
    manager: &LibvirtDomainManager,
    signals: &AtomicUsize,
    timeout: Duration,
) -> Result<bool, ManagerError> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let sync = std::thread::Builder::new()
            .name("sync-vmi".into())
            .spawn_scoped(scope, || manager.sync_vmi(vmi));
        let sync = match sync {
            Ok(h) => h,
            Err(e) => {
                return Err(ManagerError::Convert(ConvertError::Host(format!(
                    "cannot start the sync thread: {e}"
                ))))
            }
        };
        let mut stopping: Option<&str> = None;
        while !sync.is_finished() {
            if stopping.is_none() {
                if signals.load(std::sync::atomic::Ordering::SeqCst) != 0 {
                    stopping = Some("termination signal");
                } else if start.elapsed() > timeout {
                    stopping = Some("qemu timeout");
                }
                if let Some(why) = stopping {
                    tracing::warn!("{why} while the domain is starting: stopping QEMU");
                }
            }
            if stopping.is_some() {
                if let Some(pid) = crate::monitor::qemu_pid(vmi) {
                    let _ = kill(
                        Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
                        Signal::SIGKILL,
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let res = sync.join().unwrap_or_else(|_| {
            Err(ManagerError::Convert(ConvertError::Host(
                "the sync thread panicked".into(),
            )))
        });
        match (stopping, res) {
            (Some("qemu timeout"), _) => Err(ManagerError::Convert(ConvertError::Host(format!(
                "timed out after {} s waiting for the domain to start (--qemu-timeout)",
                timeout.as_secs()
            )))),
            (Some(_), _) => Ok(false),
            (None, r) => r.map(|_| true),
        }
    })
}
