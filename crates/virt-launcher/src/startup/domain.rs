//! The domain's life inside the private runtime: the libvirt connection,
//! the domain manager, the guest agent, the command server and the event
//! bridge; the sync at start (with `STANDALONE_VMI` or `run`) or
//! virt-handler's; the monitor; and the teardown that leaves nothing
//! running.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use api::VirtualMachineInstance;
use converter::ClusterOptions;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use storage::PrepareOptions;
use virtwrap::agent::Agent;
use virtwrap::config::DaemonKind;
use virtwrap::events::DomainEvent;
use virtwrap::manager::Connector;
use virtwrap::metadata::MetadataCache;
use virtwrap::supervisor::Supervisor;
use virtwrap::{DomainManager, LibvirtDomainManager};

use super::grpc::Grpc;
use super::signals::{grace_period, ms, signals};
use super::Launch;
use crate::error::LauncherError;
use crate::handler::cache::DomainCache;
use crate::handler::json::Identity;
use crate::handler::{DumpPolicy, LauncherHandler};
use crate::pod::Mode;
use crate::sync::VmiSync;
use crate::user::RuntimeUser;

/// How long virt-handler may take, once QEMU is gone, to delete the domain
/// itself (KubeVirt's launcher waits 15 s for that final notification).
const HANDLER_DELETE_WAIT: Duration = Duration::from_secs(15);

/// Sends to the event bridge while the launcher runs; emptied at the end
/// so that the bridge sees its channel close.
#[derive(Clone)]
struct ToBridge(Arc<Mutex<Option<Sender<DomainEvent>>>>);

impl ToBridge {
    fn send(&self, ev: DomainEvent) {
        if let Some(tx) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            let _ = tx.send(ev);
        }
    }

    fn close(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

/// Time between the checks of the access credentials' secrets: KubeVirt's
/// 15 s, or `VIRT_LAUNCHER_ACCESS_CREDENTIAL_CHECK_SECONDS` (1-15; for the
/// e2e tests, which would otherwise wait 15 s for every change).
fn credential_check_interval() -> Duration {
    std::env::var("VIRT_LAUNCHER_ACCESS_CREDENTIAL_CHECK_SECONDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|s| (1..=15).contains(s))
        .map_or(
            virtwrap::access_credentials::CHECK_INTERVAL,
            Duration::from_secs,
        )
}

/// What runs alongside the domain: made by [`Services::start`], ended by
/// [`Services::stop`].
struct Services {
    id: Identity,
    manager: Arc<LibvirtDomainManager>,
    sync: Arc<VmiSync>,
    agent: Arc<Agent>,
    grpc: Grpc,
    to_bridge: ToBridge,
    events: virtwrap::events::EventWatch,
    bridge: JoinHandle<()>,
}

impl Services {
    /// Connects to the daemon and starts the domain manager, the guest
    /// agent's poller, the command server, the libvirt event watcher and
    /// the bridge from events to virt-handler's notify socket.
    fn start(
        launch: &Launch<'_>,
        daemon: &DaemonKind,
        hooks: &Arc<hooks::Manager>,
    ) -> Result<Services, LauncherError> {
        let flags = launch.flags;
        // Before any connection: libvirt delivers events through this loop.
        virtwrap::events::start_event_loop();
        let connector = Connector {
            daemon: daemon.name().into(),
            uri: launch.user.libvirt_uri(daemon),
            socket: launch.user.daemon_socket(daemon),
        };
        // Libvirt's events, the agent's updates and the events preparing the
        // VMI raises all reach virt-handler through one bridge (below).
        let (ev_tx, ev_rx) = std::sync::mpsc::channel();
        let to_bridge = ToBridge(Arc::new(Mutex::new(Some(ev_tx.clone()))));
        let vmi_events = {
            let to_bridge = to_bridge.clone();
            storage::EventSink(Arc::new(move |e: storage::VmiEvent| {
                to_bridge.send(DomainEvent::Vmi {
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
            block_volumes: launch.pod.block_volumes.clone(),
            space: storage::pvc::SpacePolicy {
                less_pvc_space_toleration: flags.less_pvc_space_toleration,
                minimum_reserve_bytes: flags.minimum_reserve_pvc_bytes,
            },
            config_sources: launch.pod.config_sources.clone(),
            rebuild_media: true,
            empty_media: false,
            config_disk_fs: flags.config_disk_fs.into(),
            events: Some(vmi_events),
            cloud_init_hook: cloud_init_hook(hooks),
        };
        let id = Identity::of(launch.vmi);
        let cache = Arc::new(DomainCache::default());
        // KubeVirt's metadata cache: a change (a memory dump starting or
        // ending, the grace period, a shutdown request) drops the cached
        // domain and reaches virt-handler through the event bridge as a
        // MODIFIED domain.
        let metadata = {
            let (cache, to_bridge, domain) =
                (Arc::clone(&cache), to_bridge.clone(), id.domain_name());
            Arc::new(MetadataCache::new(Box::new(move || {
                cache.invalidate();
                to_bridge.send(DomainEvent::MetadataUpdated {
                    domain: domain.clone(),
                });
            })))
        };
        let manager = Arc::new(
            LibvirtDomainManager::new(
                connector,
                launch.host.clone(),
                prepare,
                Arc::clone(&metadata),
            )
            .map_err(|e| LauncherError::runtime(e.to_string()))?
            .with_hooks(Arc::clone(hooks))
            .with_credential_check_interval(credential_check_interval()),
        );
        let mut sync = VmiSync::new(Arc::clone(&manager), Arc::clone(launch.network));
        if let Some(roots) = &launch.pod.image_volumes {
            sync = sync.with_image_volumes(roots.clone(), launch.host.paths.clone());
        }
        let sync = Arc::new(sync);
        tracing::info!(ms = ms(launch.started), "libvirt ready");
        // The guest agent: its poller thread on the launcher's one libvirt
        // connection; what it learns reaches virt-handler through the
        // event bridge.
        let agent = {
            let domain = id.domain_name();
            let channel = Arc::new(virtwrap::agent::LibvirtAgent::new(
                manager.connection(),
                domain.clone(),
            ));
            let to_bridge = to_bridge.clone();
            Arc::new(
                Agent::start(
                    channel,
                    Arc::new(move || {
                        to_bridge.send(DomainEvent::AgentUpdated {
                            domain: domain.clone(),
                        });
                    }),
                )
                .map_err(|e| {
                    LauncherError::runtime(format!("cannot start the agent poller: {e}"))
                })?,
            )
        };
        let mode = launch.pod.mode;
        let dump_policy = match mode {
            Mode::Standalone => DumpPolicy::AnyDirectory,
            Mode::Pod => DumpPolicy::HotplugVolumes(PathBuf::from(&flags.hotplug_disk_dir)),
        };
        let share = PathBuf::from(&flags.kubevirt_share_dir);
        let grpc = Grpc::start(&share, mode, |notifier| {
            LauncherHandler::new(
                Arc::clone(&sync),
                id.clone(),
                notifier,
                Arc::clone(&cache),
                Arc::clone(&agent),
                Arc::clone(&metadata),
                dump_policy,
            )
            .with_vm_stats_collector(flags.vm_stats_collector)
            .with_migration(virtwrap::manager::MigrationSetup {
                share_dir: flags.kubevirt_share_dir.clone(),
                non_root: launch.user.is_non_root(),
            })
            .with_current(Some(launch.vmi.clone()))
        })?;
        tracing::info!(ms = ms(launch.started), "command socket ready");
        let events = virtwrap::events::watch(manager.connection(), ev_tx)
            .map_err(|e| LauncherError::runtime(format!("cannot watch domain events: {e}")))?;
        let bridge = {
            let (manager, id, notifier, agent) = (
                Arc::clone(&manager),
                id.clone(),
                grpc.notifier.clone(),
                Arc::clone(&agent),
            );
            // std's 2 MiB stack limit stays: the bridge parses libvirt's
            // domain XML and builds virt-handler's JSON (serde, quick-xml:
            // recursion bounded by the XML, not by a measured stack); 48 KiB
            // of it are resident in a running launcher. Folding the event
            // watcher (`domain-events`) into it would save one 8 KiB stack
            // but tie the re-registration after a daemon restart to the
            // bridge's libvirt calls; not done.
            std::thread::Builder::new()
                .name("notify-bridge".into())
                .spawn(move || {
                    crate::bridge::bridge(
                        &ev_rx, &manager, &id, &notifier, &cache, &agent, &metadata,
                    );
                })
                .map_err(|e| {
                    LauncherError::runtime(format!("cannot start the notify bridge: {e}"))
                })?
        };
        cmd::server::mark_ready(&share)
            .map_err(|e| LauncherError::runtime(format!("markReady: {e}")))?;
        tracing::info!(socket = %cmd::server::ready_socket(&share).display(), "command server ready");
        Ok(Services {
            id,
            manager,
            sync,
            agent,
            grpc,
            to_bridge,
            events,
            bridge,
        })
    }

    /// Whatever happened: kills and undefines the domain (nothing may keep
    /// running), lets the bridge send the final notification, stops the
    /// watcher, the poller and the command server.
    ///
    /// `under_handler` (virt-handler drives the VMI): first gives
    /// virt-handler up to [`HANDLER_DELETE_WAIT`] to see the stopped domain
    /// and ask for its deletion (DeleteVirtualMachine, whose undefine sends
    /// the final notification), as KubeVirt's `waitForFinalNotify` does.
    /// Undefining at once would let virt-handler find a Running VMI with no
    /// domain, which it marks Failed (`calculateVmPhaseForStatusReason`)
    /// however cleanly the guest powered off.
    fn stop(mut self, vmi: &VirtualMachineInstance, user: RuntimeUser, under_handler: bool) {
        if under_handler {
            let deadline = Instant::now() + HANDLER_DELETE_WAIT;
            while !self.grpc.notifier.final_sent() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if !self.grpc.notifier.final_sent() {
                tracing::info!(
                    "Timed out waiting for final delete notification. Attempting to kill domain"
                );
            }
        }
        if let Err(e) = self.manager.kill_vmi(vmi) {
            tracing::warn!("final kill: {e}");
        }
        if let Some(pid) = crate::monitor::qemu_pid(vmi, user) {
            if Path::new(&format!("/proc/{pid}")).exists() && !process::reaper().has_exited(pid) {
                let _ = kill(
                    Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
                    Signal::SIGKILL,
                );
            }
        }
        if let Err(e) = self.manager.undefine_vmi(vmi) {
            tracing::warn!("undefine: {e}");
        }
        // The undefine event makes the bridge send the final notification;
        // give libvirt a moment to deliver it, then stop watching.
        std::thread::sleep(Duration::from_millis(200));
        self.events.stop();
        self.agent.poller().stop();
        self.manager.stop_credentials();
        self.to_bridge.close();
        let _ = self.bridge.join();
        let notifier = &self.grpc.notifier;
        if !notifier.final_sent() {
            notifier.send(cmd::notify::Event::Domain {
                event_type: cmd::notify::EventType::Modified,
                domain_json: crate::handler::json::deleted_json(&self.id),
                status_json: String::new(),
                last: true,
            });
        }
        self.grpc.stop();
    }
}

/// Runs the domain (see the module docs) until QEMU exits, a daemon
/// cannot be kept running, or a signal's shutdown is done. `seeded`: the
/// shipped QEMU capabilities written before the daemon started, checked
/// once libvirt has looked them up.
///
/// # Errors
/// [`LauncherError`]; the domain is gone when it returns.
pub(crate) fn run_domain(
    launch: &Launch<'_>,
    daemon: &DaemonKind,
    sup: &Supervisor,
    hooks: &Arc<hooks::Manager>,
    seeded: Option<virtwrap::capscache::Seeded>,
) -> Result<(), LauncherError> {
    let services = Services::start(launch, daemon, hooks)?;
    super::capabilities::check_later(seeded, &services.manager, launch.started);
    let (vmi, flags) = (launch.vmi, launch.flags);
    let signals = signals();
    let grace = Duration::from_secs(
        grace_period(flags.grace_period_seconds, vmi)
            .max(0)
            .unsigned_abs(),
    );
    let manager = &services.manager;
    let watch = || {
        crate::monitor::watch(&crate::monitor::Watch {
            user: launch.user,
            vmi,
            manager,
            sup,
            signals: &signals,
            grace,
            qemu_timeout: flags.qemu_timeout,
        })
    };
    let outcome = if launch.sync {
        match sync_watching_signals(
            vmi,
            &services.sync,
            launch.cluster,
            &signals,
            flags.qemu_timeout,
            launch.user,
        ) {
            Ok(false) => {
                tracing::info!("termination signal during start: domain stopped");
                Ok(())
            }
            Ok(true) => {
                // Created paused for virt-handler to move the emulator
                // thread (isolateEmulatorThread); with no virt-handler here
                // its second sync is ours: it resumes the domain.
                let resume = virtwrap::manager::starts_paused(vmi)
                    && vmi.spec.start_strategy != Some(api::vmi::StartStrategy::Paused);
                let resumed = if resume {
                    services
                        .sync
                        .sync(vmi, launch.cluster)
                        .map(|_| ())
                        .map_err(LauncherError::from)
                } else {
                    Ok(())
                };
                resumed.and_then(|()| {
                    tracing::info!(ms = ms(launch.started), domain = %vmi.domain_name(), "domain running");
                    watch()
                })
            }
            Err(e) => Err(e),
        }
    } else {
        // virt-handler sends SyncVirtualMachine; the monitor waits for QEMU.
        watch()
    };
    // KubeVirt lets the sidecars shut down once QEMU is gone; a failure
    // is logged only.
    if let Err(e) = hooks.shutdown() {
        tracing::error!("Failed to run Shutdown: {e}");
    }
    // Only virt-handler deletes the domain itself (a standalone migration
    // target is not synced at start either, and nobody else will).
    services.stop(
        vmi,
        launch.user,
        !launch.sync && launch.pod.mode == Mode::Pod,
    );
    outcome
}

/// The hook sidecars' PreCloudInitIso for the volume preparation, when one
/// subscribed (KubeVirt's preStartHook runs it on the data it read).
fn cloud_init_hook(hooks: &Arc<hooks::Manager>) -> Option<storage::CloudInitHook> {
    if hooks
        .callbacks(hooks::hook_point::PRE_CLOUD_INIT_ISO)
        .is_empty()
    {
        return None;
    }
    let hooks = Arc::clone(hooks);
    Some(storage::CloudInitHook(Arc::new(move |vmi, data| {
        let vmi_json = serde_json::to_vec(vmi)?;
        hooks
            .pre_cloud_init_iso(vmi, &vmi_json, data)
            .map_err(Into::into)
    })))
}

/// SyncVMI in a helper thread, so that a termination signal or
/// `--qemu-timeout` is honoured while libvirt starts QEMU (which can block
/// for minutes): on either, the QEMU being started is killed, which makes
/// libvirt's start fail and return. Ok(true) = running, Ok(false) = stopped
/// by a signal.
fn sync_watching_signals(
    vmi: &VirtualMachineInstance,
    sync: &VmiSync,
    cluster: &ClusterOptions,
    signals: &AtomicUsize,
    timeout: Duration,
    user: RuntimeUser,
) -> Result<bool, LauncherError> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("sync-vmi".into())
            .spawn_scoped(scope, || sync.sync(vmi, cluster))
            .map_err(|e| LauncherError::runtime(format!("cannot start the sync thread: {e}")))?;
        let mut stopping: Option<&str> = None;
        while !handle.is_finished() {
            if stopping.is_none() {
                if signals.load(Ordering::SeqCst) != 0 {
                    stopping = Some("termination signal");
                } else if start.elapsed() > timeout {
                    stopping = Some("qemu timeout");
                }
                if let Some(why) = stopping {
                    tracing::warn!("{why} while the domain is starting: stopping QEMU");
                }
            }
            if stopping.is_some() {
                if let Some(pid) = crate::monitor::qemu_pid(vmi, user) {
                    let _ = kill(
                        Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
                        Signal::SIGKILL,
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let res = handle
            .join()
            .map_err(|_| LauncherError::runtime("the sync thread panicked"))?;
        match (stopping, res) {
            (Some("qemu timeout"), _) => Err(LauncherError::runtime(format!(
                "timed out after {} s waiting for the domain to start (--qemu-timeout)",
                timeout.as_secs()
            ))),
            (Some(_), _) => Ok(false),
            (None, r) => r.map(|_| true).map_err(LauncherError::from),
        }
    })
}
