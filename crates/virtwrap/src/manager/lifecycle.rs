//! What virt-handler's lifecycle commands do to the domain: kill, delete
//! (undefine), the shutdown request, pause, unpause, reset, soft reboot,
//! and listing the daemon's domains.

use api::VirtualMachineInstance;
use virt::error::ErrorNumber;
use virt::sys;

use super::{
    not_found, paused_for_dump, DomainStatus, LibvirtDomainManager, ManagerError, ShutdownRequest,
    ACTIVE,
};
use crate::state;

impl LibvirtDomainManager {
    /// [`super::DomainManager::kill_vmi`].
    pub(super) fn kill(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
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

    /// [`super::DomainManager::pause_vmi`].
    pub(super) fn pause(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
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

    /// [`super::DomainManager::unpause_vmi`].
    pub(super) fn unpause(&self, vmi: &VirtualMachineInstance) -> Result<(), ManagerError> {
        let _modifying = self.modifying();
        self.with_conn(|conn| {
            let d = Self::lookup(conn, vmi)?.ok_or_else(not_found)?;
            let (st, _) = d.get_state()?;
            if st == sys::VIR_DOMAIN_PAUSED {
                d.resume()?;
                tracing::info!(domain = %vmi.domain_name(), "domain resumed");
                // KubeVirt: best effort, after the resume, never failing it.
                self.set_guest_time(&d);
            }
            self.set_user_paused(&vmi.domain_name(), false);
            Ok(())
        })
    }

    /// [`super::DomainManager::list_all_domains`].
    pub(super) fn list(&self) -> Result<Vec<DomainStatus>, ManagerError> {
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

    /// [`super::DomainManager::delete_vmi`] (`even_active` false) and
    /// [`Self::undefine_vmi`].
    pub(super) fn undefine(
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

    /// The libvirt side of [`super::DomainManager::signal_shutdown_vmi`].
    pub(super) fn request_shutdown(
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
}
