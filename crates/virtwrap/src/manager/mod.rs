//! The DomainManager: what virt-handler's commands do to the domain
//! (KubeVirt `pkg/virt-launcher/virtwrap/manager.go`), implemented on
//! libvirt through the official `virt` binding.
//!
//! - this module: the [`DomainManager`] trait, its errors and the
//!   [`LibvirtDomainManager`] with its connection and state;
//! - `sync`: SyncVMI: prepare the volumes, convert with the inputs of
//!   this sync ([`SyncInputs`]), define KubeVirt's way, start; online
//!   ExpandDisks; the config drive's tagged devices;
//! - `lifecycle`: kill, delete and undefine, the shutdown request,
//!   pause, unpause, reset, soft reboot, listing;
//! - `vcpus`, `memory`: vCPU and memory hot-plug (SyncVirtualMachineCPUs,
//!   SyncVirtualMachineMemory); `hotplug`: volumes and CD-ROM media on a
//!   running domain; `nics`: the link state of its interfaces;
//! - `hostdev_hotplug`: SR-IOV host devices attached to a running domain
//!   (HotplugHostDevices, one at a time);
//! - `dump`: the memory dump, the dirty rate, the QEMU version;
//! - `screen`: GetScreenshot; [`sev`]: KubeVirt's SEV answers;
//! - `time_sync`: the guest's clock set after a resume or a migration;
//! - `migrate`: live migration's source (MigrateVMI, the monitor,
//!   CancelVMIMigration); `migrate_target`: its target
//!   (PrepareMigrationTarget, FinalizeVirtualMachineMigration).
//!
//! The manager holds no conversion settings of its own: the host's facts
//! ([`converter::HostFacts`]) are fixed when it is made, and everything
//! else a conversion needs comes with each sync.

pub mod backup;
mod disk_errors;
mod dump;
pub mod hostdev_hotplug;
pub mod hotplug;
mod lifecycle;
pub mod memory;
mod migrate;
mod migrate_target;
pub mod nics;
mod screen;
pub mod sev;
mod sync;
mod time_sync;
pub mod vcpus;

pub use disk_errors::{DiskError, DiskErrorKind, MAX_DISK_ERRORS};
pub use migrate::MigrationSetup;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use api::VirtualMachineInstance;
use converter::interfaces::InterfaceHost;
use converter::{ClusterOptions, ConvertError, HostFacts};
use storage::{PrepareOptions, StorageError};
use virt::connect::Connect;
use virt::domain::Domain as VirtDomain;
use virt::error::ErrorNumber;
use virt::sys;

/// Why a DomainManager operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The VMI cannot be converted.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// A volume cannot be prepared.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// libvirt refused; shown as KubeVirt shows it to virt-handler.
    #[error("LibvirtError(Code={code}, Domain={domain}, Message='{message}')")]
    Libvirt {
        /// `virErrorNumber`.
        code: i32,
        /// `virErrorDomain`.
        domain: i32,
        /// libvirt's message.
        message: String,
    },
    /// libvirt's XML did not parse, or ours did not serialise.
    #[error(transparent)]
    Xml(#[from] domain::XmlError),
    /// The connection to the daemon could not be opened.
    #[error(transparent)]
    Connect(#[from] crate::connection::ConnectError),
    /// A failure with KubeVirt's prefix of the operation
    /// (`failed to update vCPUs: ...`).
    #[error("{prefix}: {source}")]
    Prefixed {
        /// KubeVirt's prefix.
        prefix: &'static str,
        /// What failed.
        source: Box<ManagerError>,
    },
    /// libvirt would not attach a hot-plug disk (KubeVirt's `syncDisks`
    /// returns libvirt's error as it is): the disk named, and for a
    /// virtio disk without a free PCIe root port (libvirt's `No more
    /// available PCI slots`) what that means.
    #[error("attaching disk {alias} (bus {bus}): {source}{hint}", hint = no_pci_slot_hint(.bus, .source))]
    DiskAttach {
        /// The disk's name (its alias without KubeVirt's `ua-`: the volume's name).
        alias: String,
        /// The disk's bus (`virtio` or `scsi`).
        bus: String,
        /// libvirt's refusal.
        source: Box<ManagerError>,
    },
    /// A hook sidecar's OnDefineDomain failed or answered an unusable
    /// domain (the sidecar named); nothing was left defined.
    #[error(transparent)]
    Hook(#[from] hooks::HookError),
    /// Any other failure, its message as KubeVirt words it.
    #[error("{0}")]
    Failed(String),
    /// A screen dump could not be answered as a PNG.
    #[error(transparent)]
    Screenshot(#[from] crate::screenshot::ScreenshotError),
    /// A migration request or preparation was refused, or the migration
    /// failed: KubeVirt's message (kubevirt-facts §8.7-8.8).
    #[error("{0}")]
    Migration(String),
    /// The migration's inputs (virt-handler's options, the VMI's
    /// `status.migrationState`) were refused, the field named; KubeVirt's
    /// message where it has one.
    #[error(transparent)]
    MigrationInput(#[from] migration::MigrationError),
}

impl From<virt::error::Error> for ManagerError {
    fn from(e: virt::error::Error) -> Self {
        ManagerError::Libvirt {
            code: e.code().to_raw() as i32,
            domain: e.domain().to_raw() as i32,
            message: e.message().to_owned(),
        }
    }
}

/// A domain as listed: identity, KubeVirt state names, and its spec.
#[derive(Clone, Debug, PartialEq)]
pub struct DomainStatus {
    /// Domain name.
    pub name: String,
    /// Domain UUID.
    pub uuid: String,
    /// KubeVirt `LifeCycle` (`Running`, `Paused`, `Shutoff` ...).
    pub state: &'static str,
    /// KubeVirt `StateChangeReason`.
    pub reason: &'static str,
    /// The live domain XML, parsed.
    pub spec: domain::Domain,
}

/// What one sync converts with besides the VMI and the host's facts:
/// the cluster's settings (virt-handler's options of this request, or the
/// standalone defaults), and what network phase 2 and the SR-IOV device
/// lookup found for the VMI's interfaces, by interface name.
#[derive(Clone, Copy, Debug)]
pub struct SyncInputs<'a> {
    /// The cluster's settings.
    pub cluster: &'a ClusterOptions,
    /// Host facts (tap, MAC, MTU) of each live pod interface.
    pub interfaces: &'a BTreeMap<String, InterfaceHost>,
    /// Host PCI address (`dddd:bb:ss.f`) of each live SR-IOV interface.
    pub sriov_pci: &'a BTreeMap<String, String>,
}

/// Operations on the VMI's domain. Implementations are idempotent where
/// KubeVirt's are: syncing a running VMI, killing a stopped one, deleting
/// a missing one all succeed and change nothing.
pub trait DomainManager: Send + Sync {
    /// Prepares volumes, converts with `inputs`, defines and starts the
    /// domain (paused when [`starts_paused`]); for a domain that already
    /// runs, a no-op, except that a paused domain not paused by request
    /// (Pause, `startStrategy: Paused`) is resumed, as KubeVirt's sync
    /// does. Returns the spec.
    ///
    /// # Errors
    /// [`ManagerError`] from preparation, conversion or libvirt; a live pod
    /// interface without host facts in `inputs` is refused by field.
    fn sync_vmi(
        &self,
        vmi: &VirtualMachineInstance,
        inputs: &SyncInputs<'_>,
    ) -> Result<domain::Domain, ManagerError>;
    /// Powers the domain off at once (graceful destroy, then forced).
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`].
    fn kill_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError>;
    /// Undefines the domain, keeping its EFI variable store (KubeVirt's
    /// `UNDEFINE_KEEP_NVRAM`). A domain that is still active (running,
    /// paused, shutting down) is left defined: virt-handler asks for the
    /// deletion of a domain it believes dead, and a request for a live one
    /// comes from a stale view (a Shutoff notification of the define, read
    /// after the start). KubeVirt undefines it anyway, which makes the
    /// running domain transient: it then vanishes when QEMU ends, and a
    /// later power-off or crash reads as "no such domain" (virt-handler
    /// then fails the VMI). virt-handler asks again once the domain is shut
    /// off, and then it is undefined.
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`].
    fn delete_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError>;
    /// Asks the guest to shut down when it runs (libvirt's default
    /// method, as KubeVirt's SignalShutdownVMI: the guest agent when
    /// connected, else the ACPI power button); says whether the request
    /// went out (see [`ShutdownRequest`]).
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`].
    fn signal_shutdown_vmi(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> Result<ShutdownRequest, ManagerError>;
    /// Pauses a running domain.
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`], e.g. `Domain not found.`
    fn pause_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError>;
    /// Resumes a paused domain.
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`].
    fn unpause_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError>;
    /// Every domain of this daemon.
    ///
    /// # Errors
    /// [`ManagerError`] from libvirt or XML parsing.
    fn list_all_domains(&self) -> Result<Vec<DomainStatus>, ManagerError>;
}

/// libvirt paused the domain to write a memory dump (state, reason as
/// `virDomainGetState` gives them); it resumes it when the dump ends.
fn paused_for_dump(state: sys::virDomainState, reason: i32) -> bool {
    state == sys::VIR_DOMAIN_PAUSED && reason == sys::VIR_DOMAIN_PAUSED_DUMP as i32
}

/// What [`DomainManager::signal_shutdown_vmi`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownRequest {
    /// The ACPI power button was pressed (the domain was running).
    Sent,
    /// Not sent: the domain is paused while libvirt writes a memory dump
    /// (`VIR_DOMAIN_PAUSED_DUMP`). libvirt resumes it when the dump ends;
    /// ask again then (a paused guest cannot act on the button, and a
    /// shutdown call would wait for the dump's job lock).
    DeferredForDump,
    /// Not sent: the domain is paused (by the user, or by libvirt for
    /// another reason than a dump). libvirt refuses a shutdown request for
    /// a paused domain ("domain is not running") and the guest could not
    /// act on it; the request counts as made, so that the grace period
    /// runs and ends in a kill.
    Paused,
    /// Nothing to do: no such domain, or it is neither running nor paused
    /// (shut off, shutting down, crashed).
    NotRunning,
}

pub use crate::connection::Connector;

/// [`DomainManager`] on a libvirt connection. When the daemon restarts
/// (the supervisor restarts a dead one), the next call reconnects.
pub struct LibvirtDomainManager {
    /// The launcher's one connection, shared with the event watcher and
    /// the guest agent ([`Self::connection`]): each call takes a reference
    /// of its own.
    conn: std::sync::Arc<crate::connection::Shared>,
    /// KubeVirt's `domainModifyLock`: SyncVMI, Pause, Unpause and the
    /// shutdown request change the domain one at a time. Reads (GetDomain,
    /// the notifications), Kill and Delete do not wait for it, as in
    /// KubeVirt: virt-handler's KillVirtualMachine must get through while a
    /// shutdown request still waits for the guest.
    modify: Mutex<()>,
    /// This host and the pod's layout, the same for every conversion.
    host: HostFacts,
    prepare: PrepareOptions,
    /// Domains paused by request (startStrategy Paused, Pause): a sync
    /// leaves them paused; any other paused domain a sync resumes.
    user_paused: Mutex<BTreeSet<String>>,
    /// The last dirty-rate result (KubeVirt's `domainDirtyRateStatsCache`).
    dirty_rate: crate::dirtyrate::DirtyRateCache,
    /// KubeVirt's runtime metadata: the sync writes the grace period, the
    /// shutdown request its time.
    metadata: std::sync::Arc<crate::metadata::MetadataCache>,
    /// GetQemuVersion's answer, probed once when the manager is made.
    qemu_version: std::sync::Arc<crate::version::QemuVersion>,
    /// How the domain ended (KubeVirt state, reason), read just before it
    /// was undefined: virt-handler deletes a shut-off domain at once, and
    /// the monitor must still tell a crash from a power-off.
    ended: Mutex<Option<(&'static str, &'static str)>>,
    /// HotplugHostDevices runs one at a time (`hostdev_hotplug`).
    hostdev_flight: hostdev_hotplug::SingleFlight,
    /// The collected hook sidecars (none unless `--hook-sidecars`).
    hooks: std::sync::Arc<hooks::Manager>,
    /// KubeVirt's `setTimeOnce`: the guest's clock is set after the first
    /// resume or migration only (`time_sync`).
    set_time_once: std::sync::Once,
    /// A migration target prepared (SyncMigrationTarget): its domain comes
    /// from the incoming stream (see [`Self::awaits_incoming`]).
    incoming: std::sync::atomic::AtomicBool,
    /// What became of that incoming domain ([`IncomingOutcome`] as u8).
    incoming_outcome: std::sync::atomic::AtomicU8,
    /// Access credentials through the guest agent, started by the first
    /// define (KubeVirt's pre-start step).
    credentials: crate::access_credentials::CredentialWatcher,
    /// Time between the credential checks (KubeVirt's 15 s).
    credential_check: std::time::Duration,
}

/// What became of a migration target's incoming domain
/// ([`LibvirtDomainManager::incoming_outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum IncomingOutcome {
    /// No incoming domain seen yet (or no migration target).
    Awaited,
    /// The incoming domain was seen here and has not run yet: it is
    /// still coming in, or it is going away (the migration failed).
    Arrived,
    /// The incoming domain ran here: the migration completed.
    Running,
    /// The incoming domain was seen, then libvirt dropped it before it ran
    /// here: the migration failed or was aborted (KubeVirt's target then
    /// finds its QEMU gone and exits).
    WentAway,
}

/// Whether KubeVirt creates the domain paused (`VIR_DOMAIN_START_PAUSED`):
/// `startStrategy: Paused`, or dedicated CPUs with an isolated emulator
/// thread (virt-handler moves the emulator thread before the vCPUs run;
/// its next sync resumes the domain). kubevirt-facts §8.1 step 5.
pub fn starts_paused(vmi: &VirtualMachineInstance) -> bool {
    let cpu = vmi.spec.domain.cpu.as_ref();
    vmi.spec.start_strategy == Some(api::vmi::StartStrategy::Paused)
        || cpu.is_some_and(|c| c.dedicated_cpu_placement && c.isolate_emulator_thread)
}

/// libvirt states in which a domain is active.
const ACTIVE: [u32; 5] = [
    sys::VIR_DOMAIN_RUNNING,
    sys::VIR_DOMAIN_BLOCKED,
    sys::VIR_DOMAIN_PAUSED,
    sys::VIR_DOMAIN_SHUTDOWN,
    sys::VIR_DOMAIN_PMSUSPENDED,
];

impl LibvirtDomainManager {
    /// A manager converting for `host`, preparing volumes with `prepare`
    /// and keeping the grace-period record in `metadata`.
    ///
    /// # Errors
    /// [`crate::connection::ConnectError`] when the first connection fails.
    pub fn new(
        connector: Connector,
        host: HostFacts,
        prepare: PrepareOptions,
        metadata: std::sync::Arc<crate::metadata::MetadataCache>,
    ) -> Result<Self, crate::connection::ConnectError> {
        let conn = std::sync::Arc::new(crate::connection::Shared::open(connector)?);
        let qemu_version = crate::version::QemuVersion::probe(std::sync::Arc::clone(&conn));
        Ok(LibvirtDomainManager {
            conn,
            modify: Mutex::new(()),
            host,
            prepare,
            user_paused: Mutex::default(),
            dirty_rate: crate::dirtyrate::DirtyRateCache::default(),
            metadata,
            qemu_version,
            ended: Mutex::new(None),
            hostdev_flight: hostdev_hotplug::SingleFlight::default(),
            hooks: std::sync::Arc::new(hooks::Manager::new(hooks::HOOK_SOCKETS_DIR)),
            set_time_once: std::sync::Once::new(),
            incoming: std::sync::atomic::AtomicBool::new(false),
            incoming_outcome: std::sync::atomic::AtomicU8::new(IncomingOutcome::Awaited as u8),
            credentials: crate::access_credentials::CredentialWatcher::default(),
            credential_check: crate::access_credentials::CHECK_INTERVAL,
        })
    }

    /// The launcher's one libvirt connection, for the event watcher
    /// ([`crate::events::watch`]) and the guest agent
    /// ([`crate::agent::LibvirtAgent`]).
    pub fn connection(&self) -> std::sync::Arc<crate::connection::Shared> {
        std::sync::Arc::clone(&self.conn)
    }

    /// Whether this launcher was prepared as a migration target: until
    /// libvirt reports the incoming domain, no domain is no deletion.
    pub fn awaits_incoming(&self) -> bool {
        self.incoming.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// What became of a migration target's incoming domain, as the
    /// target's watch saw it (polled every 100 ms once prepared).
    pub fn incoming_outcome(&self) -> IncomingOutcome {
        match self
            .incoming_outcome
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            x if x == IncomingOutcome::Arrived as u8 => IncomingOutcome::Arrived,
            x if x == IncomingOutcome::Running as u8 => IncomingOutcome::Running,
            x if x == IncomingOutcome::WentAway as u8 => IncomingOutcome::WentAway,
            _ => IncomingOutcome::Awaited,
        }
    }

    fn set_incoming_outcome(&self, o: IncomingOutcome) {
        self.incoming_outcome
            .store(o as u8, std::sync::atomic::Ordering::SeqCst);
    }

    /// The same manager checking the access credentials' secrets every
    /// `interval` instead of KubeVirt's 15 s (the e2e tests shorten it).
    #[must_use]
    pub fn with_credential_check_interval(mut self, interval: std::time::Duration) -> Self {
        self.credential_check = interval;
        self
    }

    /// Starts propagating `vmi`'s guest-agent access credentials (once per
    /// launcher; nothing when it has none): the secrets' directories from
    /// the pod's layout or the standalone `--access-credential` flags.
    ///
    /// # Errors
    /// KubeVirt's `Starting qemu agent access credential propagation
    /// failed: ...`.
    fn start_credentials(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.credentials
            .start_once(vmi, || {
                let dirs = crate::access_credentials::secrets(vmi)
                    .into_iter()
                    .filter_map(|name| {
                        let dir = match &self.prepare.config_sources {
                            storage::ConfigSources::Pod => Some(std::path::PathBuf::from(
                                self.host.paths.secret_dir(&format!("{name}-access-cred")),
                            )),
                            storage::ConfigSources::Standalone { secrets, .. } => {
                                secrets.get(&name).cloned()
                            }
                        };
                        dir.map(|d| (name, d))
                    })
                    .collect();
                crate::access_credentials::WatchSetup {
                    dirs,
                    channel: std::sync::Arc::new(crate::agent::LibvirtAgent::new(
                        std::sync::Arc::clone(&self.conn),
                        vmi.domain_name(),
                    )),
                    metadata: std::sync::Arc::clone(&self.metadata),
                    check_interval: self.credential_check,
                }
            })
            .map_err(ManagerError::Failed)
    }

    /// Stops the access-credential propagation (at teardown).
    pub fn stop_credentials(&self) {
        self.credentials.stop();
    }

    /// The same manager defining through the hook sidecars `hooks`
    /// (KubeVirt's OnDefineDomain on every define, see `sync`).
    #[must_use]
    pub fn with_hooks(mut self, hooks: std::sync::Arc<hooks::Manager>) -> Self {
        self.hooks = hooks;
        self
    }

    /// The host's facts this manager converts with.
    pub fn host(&self) -> &HostFacts {
        &self.host
    }

    /// Whether `vmi`'s domain is active (running, paused, shutting down,
    /// suspended); false when it is shut off or not defined.
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`].
    pub fn is_active(&self, vmi: &VirtualMachineInstance) -> Result<bool, ManagerError> {
        self.with_conn(|conn| {
            Ok(match Self::lookup(conn, vmi)? {
                Some(d) => ACTIVE.contains(&d.get_state()?.0),
                None => false,
            })
        })
    }

    fn is_user_paused(&self, name: &str) -> bool {
        self.user_paused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(name)
    }

    fn set_user_paused(&self, name: &str, paused: bool) {
        let mut set = self
            .user_paused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if paused {
            set.insert(name.to_owned());
        } else {
            set.remove(name);
        }
    }

    /// Holds [`Self::modify`] (KubeVirt's `domainModifyLock`).
    fn modifying(&self) -> MutexGuard<'_, ()> {
        self.modify
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `op` on a reference of its own to the connection
    /// ([`crate::connection::Shared::with`]).
    fn with_conn<T>(
        &self,
        op: impl Fn(&Connect) -> Result<T, ManagerError>,
    ) -> Result<T, ManagerError> {
        self.conn.with(op)
    }

    /// The domain of `vmi`, `None` when libvirt does not know it.
    fn lookup(
        conn: &Connect,
        vmi: &VirtualMachineInstance,
    ) -> Result<Option<VirtDomain>, ManagerError> {
        match VirtDomain::lookup_by_name(conn, &vmi.domain_name()) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.code() == ErrorNumber::NoDomain => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Runs `f` on the live domain called `name`, `None` when absent.
    ///
    /// # Errors
    /// [`ManagerError`] from libvirt or `f`.
    pub fn with_domain<T>(
        &self,
        name: &str,
        f: impl Fn(&VirtDomain) -> Result<T, ManagerError>,
    ) -> Result<Option<T>, ManagerError> {
        self.with_conn(|conn| match VirtDomain::lookup_by_name(conn, name) {
            Ok(d) => f(&d).map(Some),
            Err(e) if e.code() == ErrorNumber::NoDomain => Ok(None),
            Err(e) => Err(e.into()),
        })
    }
}

impl DomainManager for LibvirtDomainManager {
    fn sync_vmi(
        &self,
        vmi: &VirtualMachineInstance,
        inputs: &SyncInputs<'_>,
    ) -> Result<domain::Domain, ManagerError> {
        self.sync(vmi, inputs)
    }

    fn kill_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.kill(vmi)
    }

    fn delete_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.undefine(vmi, false)
    }

    fn signal_shutdown_vmi(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> Result<ShutdownRequest, ManagerError> {
        let _modifying = self.modifying();
        let r = self.request_shutdown(vmi)?;
        if r != ShutdownRequest::NotRunning {
            // The grace period runs from the first request (KubeVirt's
            // DeletionTimestamp), whether or not the guest can act on it yet.
            self.metadata
                .record_shutdown_request(crate::metadata::now_rfc3339);
        }
        Ok(r)
    }

    fn pause_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.pause(vmi)
    }

    fn unpause_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.unpause(vmi)
    }

    fn list_all_domains(&self) -> Result<Vec<DomainStatus>, ManagerError> {
        self.list()
    }
}

/// libvirt's message when a PCI device finds no free slot (no empty PCIe
/// root port on q35), libvirt 11.3 `virDomainPCIAddressGetNextAddr`.
pub const NO_PCI_SLOT: &str = "No more available PCI slots";

/// What [`ManagerError::DiskAttach`] adds to libvirt's `No more available
/// PCI slots` for a virtio disk; nothing otherwise.
fn no_pci_slot_hint(bus: &str, source: &ManagerError) -> &'static str {
    match source {
        ManagerError::Libvirt { message, .. } if bus == "virtio" && message.contains(NO_PCI_SLOT) => {
            ": every PCIe root port left free for hot-plug when the domain was defined is in use (KubeVirt's rule: max(8 - devices on PCI, 3), or max(16 - devices on PCI, 6) above 2 GiB of memory, for a VMI with interfaces, none for one without); a disk on bus scsi needs none"
        }
        _ => "",
    }
}

/// KubeVirt's answer for an operation on a domain libvirt does not know.
fn not_found() -> ManagerError {
    ManagerError::Libvirt {
        code: sys::VIR_ERR_NO_DOMAIN as i32,
        domain: sys::VIR_FROM_DOM as i32,
        message: "Domain not found.".into(),
    }
}
