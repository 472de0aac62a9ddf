//! The DomainManager: what virt-handler's commands do to the domain
//! (KubeVirt `pkg/virt-launcher/virtwrap/manager.go`), implemented on
//! libvirt through the official `virt` binding.

use std::sync::{Mutex, MutexGuard};

use api::VirtualMachineInstance;
use converter::{ConvertContext, ConvertError};
use storage::{PrepareOptions, StorageError};
use virt::connect::Connect;
use virt::domain::Domain as VirtDomain;
use virt::error::ErrorNumber;
use virt::sys;

use crate::state;

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
    /// A connection of its own (the memory dump's) could not be opened.
    #[error(transparent)]
    Connect(#[from] crate::connection::ConnectError),
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

/// Operations on the VMI's domain. Implementations are idempotent where
/// KubeVirt's are: syncing a running VMI, killing a stopped one, deleting
/// a missing one all succeed and change nothing.
pub trait DomainManager: Send + Sync {
    /// Prepares volumes, converts, defines and starts the domain (paused
    /// when [`starts_paused`]); for a domain that already runs, a no-op,
    /// except that a paused domain not paused by request (Pause,
    /// `startStrategy: Paused`) is resumed, as KubeVirt's sync does.
    /// Returns the spec.
    ///
    /// # Errors
    /// [`ManagerError`] from preparation, conversion or libvirt.
    fn sync_vmi(&self, vmi: &VirtualMachineInstance) -> Result<domain::Domain, ManagerError>;
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
    /// The connection, shared: each call takes a reference of its own.
    conn: crate::connection::Shared,
    /// KubeVirt's `domainModifyLock`: SyncVMI, Pause, Unpause and the
    /// shutdown request change the domain one at a time. Reads (GetDomain,
    /// the notifications), Kill and Delete do not wait for it, as in
    /// KubeVirt: virt-handler's KillVirtualMachine must get through while a
    /// shutdown request still waits for the guest.
    modify: Mutex<()>,
    connector: Connector,
    ctx: Mutex<ConvertContext>,
    prepare: PrepareOptions,
    /// Network phase 2 for interfaces a VMI brings over SyncVMI (pod mode);
    /// held locked while it runs so two syncs never run it twice.
    phase2: Mutex<Option<Box<NetworkPhase2>>>,
    /// Host PCI addresses of SR-IOV interfaces a VMI brings over SyncVMI
    /// (pod mode: the network-info downward API file, else the device
    /// plugin's environment).
    sriov: Option<Box<SriovAddresses>>,
    /// Domains paused by request (startStrategy Paused, Pause): a sync
    /// leaves them paused; any other paused domain a sync resumes.
    user_paused: Mutex<std::collections::BTreeSet<String>>,
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

/// Network phase 2 run when a synced VMI has interfaces the launcher has
/// not prepared yet (KubeVirt does it in SyncVMI, before the domain is
/// defined): given the VMI, returns the host facts per interface name
/// (tap, MAC, MTU) and has started what serves them (DHCP). Errors are one
/// line naming the interface field.
pub type NetworkPhase2 = dyn Fn(
        &VirtualMachineInstance,
    )
        -> Result<std::collections::BTreeMap<String, converter::interfaces::InterfaceHost>, String>
    + Send
    + Sync;

/// Reads the host PCI address of each live SR-IOV interface of a synced
/// VMI, by interface name, when the context lacks one (KubeVirt reads them
/// at every SyncVMI). Errors are one line naming the interface field and
/// the file or variable looked at.
pub type SriovAddresses = dyn Fn(&VirtualMachineInstance) -> Result<std::collections::BTreeMap<String, String>, String>
    + Send
    + Sync;

const ACTIVE: [u32; 5] = [
    sys::VIR_DOMAIN_RUNNING,
    sys::VIR_DOMAIN_BLOCKED,
    sys::VIR_DOMAIN_PAUSED,
    sys::VIR_DOMAIN_SHUTDOWN,
    sys::VIR_DOMAIN_PMSUSPENDED,
];

impl LibvirtDomainManager {
    /// A manager converting with `ctx` (its `prepared` part is filled on
    /// each sync), preparing volumes with `prepare` and keeping the
    /// grace-period record in `metadata`.
    ///
    /// # Errors
    /// [`crate::connection::ConnectError`] when the first connection fails.
    pub fn new(
        connector: Connector,
        ctx: ConvertContext,
        prepare: PrepareOptions,
        metadata: std::sync::Arc<crate::metadata::MetadataCache>,
    ) -> Result<Self, crate::connection::ConnectError> {
        let conn = connector.connect()?;
        let qemu_version = crate::version::QemuVersion::probe(connector.clone());
        Ok(LibvirtDomainManager {
            conn: crate::connection::Shared::new(conn, connector.clone()),
            modify: Mutex::new(()),
            connector,
            ctx: Mutex::new(ctx),
            prepare,
            phase2: Mutex::new(None),
            sriov: None,
            user_paused: Mutex::default(),
            dirty_rate: crate::dirtyrate::DirtyRateCache::default(),
            metadata,
            qemu_version,
            ended: Mutex::new(None),
        })
    }

    /// KubeVirt writes the config drive after the domain is defined, so its
    /// meta-data can list the tagged interfaces with the PCI addresses
    /// libvirt gave them: when the VMI has a config drive and tagged
    /// interfaces, its ISO is rebuilt here with that `devices` list.
    fn config_drive_devices(
        &self,
        vmi: &VirtualMachineInstance,
        dom: &VirtDomain,
    ) -> Result<(), ManagerError> {
        let config_drive = matches!(
            storage::cloudinit::find(vmi),
            Some((_, _, storage::cloudinit::DataSource::ConfigDrive, _))
        );
        let tagged = vmi
            .spec
            .domain
            .devices
            .interfaces
            .iter()
            .any(|i| i.tag.as_deref().is_some_and(|t| !t.is_empty()));
        if !config_drive || !tagged {
            return Ok(());
        }
        let xml = dom.get_xml_desc(sys::VIR_DOMAIN_XML_INACTIVE)?;
        let defined = domain::Domain::from_xml(&xml)?;
        let devices = storage::cloudinit::tagged_devices(vmi, &defined);
        let ctx = self
            .ctx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(mut data) = storage::cloudinit::read(vmi, &ctx, &self.prepare.config_sources)? {
            data.set_devices(vmi, &devices);
            storage::cloudinit::generate(vmi, &ctx, &data, self.prepare.owner)?;
            tracing::info!(
                devices = devices.len(),
                "config drive rebuilt with the tagged devices"
            );
        }
        Ok(())
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

    /// Sets the network phase 2 run for interfaces not prepared when the
    /// launcher started (see [`NetworkPhase2`]); without it such a VMI is
    /// refused by name.
    #[must_use]
    pub fn with_network_phase2(self, phase2: Box<NetworkPhase2>) -> Self {
        *self
            .phase2
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(phase2);
        self
    }

    /// Sets where SR-IOV host addresses come from for synced VMIs (see
    /// [`SriovAddresses`]); without it a VMI whose SR-IOV interfaces have
    /// no address in the context is refused by the converter, by field.
    #[must_use]
    pub fn with_sriov(mut self, read: Box<SriovAddresses>) -> Self {
        self.sriov = Some(read);
        self
    }

    /// The SR-IOV host addresses to convert `vmi` with: the context's, or
    /// freshly read when one of its live SR-IOV interfaces has none there.
    fn sriov_addresses(
        &self,
        vmi: &VirtualMachineInstance,
        known: &std::collections::BTreeMap<String, String>,
    ) -> Result<std::collections::BTreeMap<String, String>, ManagerError> {
        let missing = converter::sriov::live_interfaces(vmi)
            .iter()
            .any(|(_, x)| !known.contains_key(&x.name));
        match (&self.sriov, missing) {
            (Some(read), true) => {
                let found = read(vmi).map_err(|m| ManagerError::Convert(ConvertError::Host(m)))?;
                tracing::info!(interfaces = ?found, "SR-IOV host devices");
                let mut ctx = self
                    .ctx
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                ctx.sriov_pci.extend(found);
                Ok(ctx.sriov_pci.clone())
            }
            _ => Ok(known.clone()),
        }
    }

    /// Runs network phase 2 for `vmi` if it has live interfaces without
    /// host facts and a phase 2 is set, and keeps the facts for later
    /// syncs. Returns the facts to convert with.
    fn network_phase2(
        &self,
        vmi: &VirtualMachineInstance,
        known: &std::collections::BTreeMap<String, converter::interfaces::InterfaceHost>,
    ) -> Result<
        std::collections::BTreeMap<String, converter::interfaces::InterfaceHost>,
        ManagerError,
    > {
        let missing =
            |k: &std::collections::BTreeMap<String, converter::interfaces::InterfaceHost>| {
                vmi.spec.domain.devices.interfaces.iter().any(|x| {
                    !x.is_absent() && !converter::sriov::is_sriov(x) && !k.contains_key(&x.name)
                })
            };
        if !missing(known) {
            return Ok(known.clone());
        }
        let hook = self
            .phase2
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(run) = hook.as_ref() else {
            return Ok(known.clone());
        };
        // Another sync may have run it while this one waited for the lock.
        let current = self
            .ctx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .prepared
            .interfaces
            .clone();
        if !missing(&current) {
            return Ok(current);
        }
        let hosts = run(vmi).map_err(|m| ManagerError::Convert(ConvertError::Host(m)))?;
        tracing::info!(
            interfaces = ?hosts.keys().collect::<Vec<_>>(),
            "network phase 2 done for the synced VMI"
        );
        let mut ctx = self
            .ctx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ctx.prepared.interfaces.extend(hosts);
        Ok(ctx.prepared.interfaces.clone())
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

    /// Converts `vmi` with freshly prepared volumes.
    ///
    /// # Errors
    /// [`ManagerError::Storage`] or [`ManagerError::Convert`].
    pub fn convert(&self, vmi: &VirtualMachineInstance) -> Result<domain::Domain, ManagerError> {
        self.convert_with(vmi, true)
    }

    /// Like [`Self::convert`]; `start` false (the domain already runs)
    /// keeps existing cloud-init and config ISOs instead of rebuilding them:
    /// KubeVirt builds them only when it starts the domain.
    fn convert_with(
        &self,
        vmi: &VirtualMachineInstance,
        start: bool,
    ) -> Result<domain::Domain, ManagerError> {
        let mut ctx = self
            .ctx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut opts = self.prepare.clone();
        opts.rebuild_media &= start;
        ctx.prepared = storage::prepare(vmi, &ctx, &opts)?;
        if start {
            ctx.prepared.interfaces = self.network_phase2(vmi, &ctx.prepared.interfaces)?;
        }
        ctx.sriov_pci = self.sriov_addresses(vmi, &ctx.sriov_pci)?;
        // An interface still without host facts (no phase 2 here, e.g.
        // standalone) would start without network: refused by name.
        let devs = &vmi.spec.domain.devices.interfaces;
        if let Some(i) = devs.iter().position(|x| {
            !x.is_absent()
                && !converter::sriov::is_sriov(x)
                && !ctx.prepared.interfaces.contains_key(&x.name)
        }) {
            return Err(ConvertError::unsupported(
                format!("spec.domain.devices.interfaces[{i}]"),
                "network phase 2 for interfaces not prepared at launcher start",
            )
            .into());
        }
        Ok(converter::convert(vmi, &ctx)?)
    }

    /// KubeVirt's online ExpandDisks step, on a sync of a running domain:
    /// each claim image whose usable size (from the VMI's claim status)
    /// exceeds what the guest sees is grown with `virDomainBlockResize`
    /// (bytes), and the guest is told. Failures are logged, as in KubeVirt.
    fn expand_online(&self, vmi: &VirtualMachineInstance, dom: &VirtDomain) {
        let ctx = self
            .ctx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if !ctx.expand_disks_enabled {
            return;
        }
        let targets = match storage::expansion_targets(vmi, &ctx, &ctx.prepared.block_volumes) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("not expanding disks: {e}");
                return;
            }
        };
        for t in targets {
            let path = t.image.to_string_lossy();
            let capacity = match dom.get_block_info(&path, 0) {
                Ok(i) => i.capacity,
                Err(e) => {
                    tracing::warn!(volume = %t.volume, "failed to get block info: {e}");
                    continue;
                }
            };
            if t.usable <= capacity {
                continue;
            }
            match dom.block_resize(&path, t.usable, sys::VIR_DOMAIN_BLOCK_RESIZE_BYTES) {
                Ok(_) => {
                    tracing::info!(volume = %t.volume, from = capacity, to = t.usable, "expanded the disk of the running domain")
                }
                Err(e) => {
                    tracing::error!(volume = %t.volume, "libvirt failed to expand the disk: {e}")
                }
            }
        }
    }

    /// Changes the conversion settings used by later syncs (virt-handler's
    /// `VirtualMachineOptions`: SMBIOS, balloon period, cluster flags).
    pub fn update_context(&self, f: impl FnOnce(&mut ConvertContext)) {
        f(&mut self
            .ctx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner));
    }

    /// Resets the domain (a hardware reset, KubeVirt ResetVirtualMachine).
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`], `Domain not found.` when there is none.
    pub fn reset_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.with_conn(|conn| {
            let d = Self::lookup(conn, vmi)?.ok_or_else(not_found)?;
            d.reset()?;
            tracing::info!(domain = %vmi.domain_name(), "domain reset");
            Ok(())
        })
    }

    /// Asks the guest to reboot through ACPI (KubeVirt uses the guest agent
    /// when it is connected; that arrives with the agent support).
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`], `Domain not found.` when there is none.
    pub fn soft_reboot_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.with_conn(|conn| {
            let d = Self::lookup(conn, vmi)?.ok_or_else(not_found)?;
            d.reboot(sys::VIR_DOMAIN_REBOOT_ACPI_POWER_BTN)?;
            tracing::info!(domain = %vmi.domain_name(), "sent ACPI reboot");
            Ok(())
        })
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

    /// KubeVirt's memory dump: `virDomainCoreDumpWithFormat(path,
    /// VIR_DOMAIN_CORE_DUMP_FORMAT_RAW, VIR_DUMP_MEMORY_ONLY)` of the domain
    /// called `name`, an ELF core file of the guest's memory (libvirt
    /// pauses the guest while QEMU writes it, then resumes it). Runs on a
    /// connection of its own, opened and closed here, so the manager's
    /// connection stays free for other commands while the dump takes its
    /// time. `path` is used as given: check it first
    /// ([`crate::memory_dump::check_dump_path`]).
    ///
    /// # Errors
    /// [`ManagerError::Connect`]; [`ManagerError::Libvirt`], `Domain not
    /// found.` when there is no such domain, libvirt's error when the dump
    /// fails (domain not running, file not writable, disk full ...).
    pub fn core_dump_memory(&self, name: &str, path: &std::path::Path) -> Result<(), ManagerError> {
        let Some(to) = path.to_str().filter(|p| !p.contains('\0')) else {
            // The binding panics on NUL; libvirt takes UTF-8 paths only.
            return Err(ManagerError::Libvirt {
                code: sys::VIR_ERR_INVALID_ARG as i32,
                domain: sys::VIR_FROM_NONE as i32,
                message: format!("invalid dump path {}", path.display()),
            });
        };
        let mut conn = self.connector.connect()?;
        let res = match VirtDomain::lookup_by_name(&conn, name) {
            Ok(d) => d
                .core_dump_with_format(
                    to,
                    sys::VIR_DOMAIN_CORE_DUMP_FORMAT_RAW,
                    sys::VIR_DUMP_MEMORY_ONLY,
                )
                .map(|_| ())
                .map_err(ManagerError::from),
            Err(e) if e.code() == ErrorNumber::NoDomain => Err(not_found()),
            Err(e) => Err(e.into()),
        };
        let _ = conn.close();
        res
    }

    /// KubeVirt's `GetDomainDirtyRateStats(calc)` for the domain `name`: a
    /// page-sampling calculation of `calc` (at least 1 s), served from a
    /// 3 s cache; concurrent callers share one calculation (see
    /// [`crate::dirtyrate`]). `Ok(None)` when the domain is not running.
    /// Blocks for the calculation (about `calc`); the connection is held
    /// only for the libvirt calls, never across the wait.
    ///
    /// # Errors
    /// `failed to get domain dirty rate stats: <libvirt error>`.
    pub fn dirty_rate_stats(
        &self,
        name: &str,
        calc: std::time::Duration,
    ) -> crate::dirtyrate::DirtyRateResult {
        self.dirty_rate.get(|| {
            crate::dirtyrate::measure(
                &crate::dirtyrate::LibvirtDirtyRate {
                    manager: self,
                    name,
                },
                calc,
            )
        })
    }

    /// KubeVirt's MarkGracefulShutdownVMI, on the launcher's first
    /// termination signal: `GracePeriod.MarkedForGracefulShutdown` in the
    /// runtime metadata, which virt-handler answers with
    /// ShutdownVirtualMachine (its `hasGracefulShutdownTrigger`).
    pub fn mark_graceful_shutdown(&self) {
        self.metadata.mark_graceful_shutdown();
    }

    /// Undefines the domain whatever its state (the launcher's own last
    /// step, after the final kill: a domain libvirt still reports active
    /// becomes transient and goes with its QEMU), keeping its EFI variable
    /// store as KubeVirt does.
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`].
    pub fn undefine_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.undefine(vmi, true)
    }

    /// [`DomainManager::delete_vmi`] (`even_active` false) and
    /// [`Self::undefine_vmi`].
    fn undefine(
        &self,
        vmi: &VirtualMachineInstance,
        even_active: bool,
    ) -> Result<(), ManagerError> {
        self.with_conn(|conn| {
            let Some(d) = Self::lookup(conn, vmi)? else {
                return Ok(());
            };
            let (st, reason) = d.get_state()?;
            if ACTIVE.contains(&st) {
                if !even_active {
                    tracing::info!(
                        domain = %vmi.domain_name(),
                        state = state::lifecycle(st),
                        "delete of a domain still active: left defined until it is shut off"
                    );
                    return Ok(());
                }
            } else {
                *self
                    .ended
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((state::lifecycle(st), state::reason(st, reason)));
            }
            // KubeVirt keeps the EFI variable store: with persistent EFI it
            // is on the backend storage and must survive the domain.
            match d.undefine_flags(sys::VIR_DOMAIN_UNDEFINE_KEEP_NVRAM) {
                Ok(()) => {
                    tracing::info!(domain = %vmi.domain_name(), "domain undefined");
                    Ok(())
                }
                Err(e) if e.code() == ErrorNumber::NoDomain => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
    }

    /// How the domain had ended (KubeVirt state and reason, e.g.
    /// `("Crashed", "Unknown")` or `("Shutoff", "Crashed")`) when it was
    /// undefined shut off; `None` when it never was.
    pub fn ended(&self) -> Option<(&'static str, &'static str)> {
        *self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The libvirt side of [`DomainManager::signal_shutdown_vmi`].
    fn request_shutdown(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> Result<ShutdownRequest, ManagerError> {
        self.with_conn(|conn| {
            let Some(d) = Self::lookup(conn, vmi)? else {
                return Ok(ShutdownRequest::NotRunning);
            };
            let (st, reason) = d.get_state()?;
            if st == sys::VIR_DOMAIN_RUNNING || st == sys::VIR_DOMAIN_BLOCKED {
                // KubeVirt's flags: libvirt's choice, i.e. the guest agent's
                // guest-shutdown when the agent is connected, else (or when
                // the agent fails) the ACPI power button.
                d.shutdown_flags(sys::VIR_DOMAIN_SHUTDOWN_DEFAULT)?;
                tracing::info!(domain = %vmi.domain_name(), "sent shutdown request (guest agent or ACPI)");
                return Ok(ShutdownRequest::Sent);
            }
            if paused_for_dump(st, reason) {
                return Ok(ShutdownRequest::DeferredForDump);
            }
            if st == sys::VIR_DOMAIN_PAUSED {
                return Ok(ShutdownRequest::Paused);
            }
            Ok(ShutdownRequest::NotRunning)
        })
    }

    /// libvirt's version as KubeVirt's GetQemuVersion reports it (`QEMU
    /// 10.0.2`), from the probe made when the manager was created (see
    /// [`crate::version`]); waits up to [`crate::version::WAIT`] for a
    /// probe still running.
    ///
    /// # Errors
    /// The probe's libvirt error, or the probe is still running.
    pub fn qemu_version(&self) -> Result<String, String> {
        self.qemu_version.get(crate::version::WAIT)
    }
}

impl DomainManager for LibvirtDomainManager {
    fn sync_vmi(&self, vmi: &VirtualMachineInstance) -> Result<domain::Domain, ManagerError> {
        let _modifying = self.modifying();
        let active = self.with_conn(|conn| {
            Ok(match Self::lookup(conn, vmi)? {
                Some(d) => ACTIVE.contains(&d.get_state()?.0),
                None => false,
            })
        })?;
        let spec = self.convert_with(vmi, !active)?;
        let xml = spec.to_xml()?;
        if xml.contains('\0') {
            // The converter refuses such text field by field; never hand
            // libvirt (or the binding, which panics on it) a NUL byte.
            return Err(ManagerError::Convert(ConvertError::invalid(
                "spec",
                "contains a NUL character, which XML cannot carry",
            )));
        }
        let arch = self
            .ctx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .arch;
        let free_ports = converter::pci_ports::free_ports_wanted(vmi, arch, &spec);
        let placeholders = converter::pci_ports::placeholder_count(vmi, arch, &spec)?;
        // KubeVirt's define: with placeholder interfaces, once as
        // converted with them (their root ports stay for NIC hot-plug),
        // then again without them and with the free PCIe root ports
        // appended to libvirt's addressed definition; without, once with
        // the ports appended to the converted spec itself (ports 1..E,
        // which libvirt fills with devices: see converter::pci_ports).
        let first_xml = if placeholders > 0 {
            converter::pci_ports::with_placeholders(vmi, arch, &spec, placeholders).to_xml()?
        } else if free_ports > 0 {
            converter::pci_ports::with_root_ports(&spec, free_ports).to_xml()?
        } else {
            xml.clone()
        };
        let define = |conn: &Connect| -> Result<VirtDomain, ManagerError> {
            if free_ports > 0 || placeholders > 0 {
                tracing::info!(
                    domain = %vmi.domain_name(),
                    "Allocating {placeholders} placeholder interfaces and {free_ports} direct controllers for hotplug (memory={} unit={})",
                    spec.memory.value,
                    spec.memory.unit
                );
            }
            let d = VirtDomain::define_xml(conn, &first_xml)?;
            if placeholders == 0 {
                return Ok(d);
            }
            let inactive = d.get_xml_desc(sys::VIR_DOMAIN_XML_INACTIVE)?;
            let without = if placeholders > 0 {
                converter::pci_ports::remove_placeholders(&inactive)?
            } else {
                inactive
            };
            let with_ports = converter::pci_ports::add_root_ports(&without, free_ports)?;
            Ok(VirtDomain::define_xml(conn, &with_ports)?)
        };
        let flags = if starts_paused(vmi) {
            sys::VIR_DOMAIN_START_PAUSED
        } else {
            0
        };
        let name = vmi.domain_name();
        self.with_conn(|conn| {
            let dom = match Self::lookup(conn, vmi)? {
                Some(d) => {
                    let (st, reason) = d.get_state()?;
                    if paused_for_dump(st, reason) {
                        // A memory dump runs: libvirt resumes the guest
                        // when it ends (KubeVirt would try, and wait for
                        // the dump's job lock).
                        tracing::info!(domain = %name, "domain paused for a memory dump; left to libvirt");
                        return Ok(());
                    }
                    if st == sys::VIR_DOMAIN_PAUSED && !self.is_user_paused(&name) {
                        // Started paused for virt-handler (or paused by an
                        // error): this sync lets it run, as KubeVirt does.
                        d.resume()?;
                        tracing::info!(domain = %name, "domain resumed by sync");
                        return Ok(());
                    }
                    if ACTIVE.contains(&st) {
                        tracing::debug!(domain = %name, "domain already active; nothing to do");
                        self.expand_online(vmi, &d);
                        return Ok(());
                    }
                    // Defined but not running: refresh the definition, then start.
                    define(conn)?
                }
                None => {
                    let d = define(conn)?;
                    tracing::info!(domain = %vmi.domain_name(), "domain defined");
                    d
                }
            };
            self.config_drive_devices(vmi, &dom)?;
            dom.create_with_flags(flags)?;
            if vmi.spec.start_strategy == Some(api::vmi::StartStrategy::Paused) {
                self.set_user_paused(&name, true);
            }
            tracing::info!(domain = %name, paused = flags != 0, "domain started");
            Ok(())
        })?;
        // KubeVirt records the UID and grace period at define and keeps the
        // grace period in step with the VMI on every sync.
        self.metadata.update(|m| m.uid = Some(vmi.uid().to_owned()));
        self.metadata
            .set_grace_period_seconds(vmi.grace_period_seconds());
        Ok(spec)
    }

    fn kill_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        self.with_conn(|conn| {
            let Some(d) = Self::lookup(conn, vmi)? else {
                return Ok(());
            };
            let (st, _) = d.get_state()?;
            if !ACTIVE.contains(&st) {
                return Ok(());
            }
            if let Err(e) = d.destroy_flags(sys::VIR_DOMAIN_DESTROY_GRACEFUL) {
                tracing::warn!(domain = %vmi.domain_name(), "graceful destroy failed ({e}); forcing");
                d.destroy()?;
            }
            tracing::info!(domain = %vmi.domain_name(), "domain killed");
            Ok(())
        })
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
        let _modifying = self.modifying();
        self.with_conn(|conn| {
            let d = Self::lookup(conn, vmi)?.ok_or_else(not_found)?;
            let (st, _) = d.get_state()?;
            if st == sys::VIR_DOMAIN_RUNNING || st == sys::VIR_DOMAIN_BLOCKED {
                d.suspend()?;
                tracing::info!(domain = %vmi.domain_name(), "domain paused");
            }
            self.set_user_paused(&vmi.domain_name(), true);
            Ok(())
        })
    }

    fn unpause_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        let _modifying = self.modifying();
        self.with_conn(|conn| {
            let d = Self::lookup(conn, vmi)?.ok_or_else(not_found)?;
            let (st, _) = d.get_state()?;
            if st == sys::VIR_DOMAIN_PAUSED {
                d.resume()?;
                tracing::info!(domain = %vmi.domain_name(), "domain resumed");
            }
            self.set_user_paused(&vmi.domain_name(), false);
            Ok(())
        })
    }

    fn list_all_domains(&self) -> Result<Vec<DomainStatus>, ManagerError> {
        self.with_conn(|conn| {
            let mut out = Vec::new();
            for d in conn.list_all_domains(0)? {
                let (st, reason) = d.get_state()?;
                let xml = d.get_xml_desc(0)?;
                out.push(DomainStatus {
                    name: d.get_name()?,
                    uuid: d.get_uuid_string()?,
                    state: state::lifecycle(st),
                    reason: state::reason(st, reason),
                    spec: domain::Domain::from_xml(&xml)?,
                });
            }
            Ok(out)
        })
    }
}

fn not_found() -> ManagerError {
    ManagerError::Libvirt {
        code: sys::VIR_ERR_NO_DOMAIN as i32,
        domain: sys::VIR_FROM_DOM as i32,
        message: "Domain not found.".into(),
    }
}
