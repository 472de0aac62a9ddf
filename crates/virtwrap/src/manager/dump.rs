//! Long-running and cached reads of the running domain: the memory dump
//! (on the launcher's connection), the dirty rate (a shared 3 s cache) and
//! the QEMU version (probed once).

use virt::domain::Domain as VirtDomain;
use virt::error::ErrorNumber;
use virt::sys;

use super::{not_found, LibvirtDomainManager, ManagerError};

impl LibvirtDomainManager {
    /// KubeVirt's memory dump: `virDomainCoreDumpWithFormat(path,
    /// VIR_DOMAIN_CORE_DUMP_FORMAT_RAW, VIR_DUMP_MEMORY_ONLY)` of the domain
    /// called `name`, an ELF core file of the guest's memory (libvirt
    /// pauses the guest while QEMU writes it, then resumes it). Runs on the
    /// launcher's one connection, as KubeVirt's does: libvirt serves other
    /// calls on it while the dump takes its time (the daemon runs up to
    /// `max_client_requests`, 5, calls of a connection at once). `path` is used as given: check it first
    /// ([`crate::memory_dump::check_dump_path`]).
    ///
    /// # Errors
    /// [`ManagerError::Libvirt`], `Domain not
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
        // On the shared connection, as every call: libvirt runs the dump
        // while other calls and events go on over the same socket.
        self.with_conn(|conn| match VirtDomain::lookup_by_name(conn, name) {
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
        })
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

    /// libvirt's version as KubeVirt's GetQemuVersion reports it (`QEMU
    /// 10.0.2`), from the probe made when the manager was created (see
    /// [`crate::version`]); waits up to [`crate::version::WAIT`] for a
    /// probe still running.
    ///
    /// # Errors
    /// The probe's libvirt error, or the probe is still running.
    pub fn qemu_version(&self) -> Result<String, crate::version::QemuVersionError> {
        self.qemu_version.get(crate::version::WAIT)
    }

    /// As [`LibvirtDomainManager::qemu_version`], waiting up to `wait`: the
    /// probe's end is the end of libvirt's first capabilities lookup.
    ///
    /// # Errors
    /// As [`LibvirtDomainManager::qemu_version`].
    pub fn qemu_version_within(
        &self,
        wait: std::time::Duration,
    ) -> Result<String, crate::version::QemuVersionError> {
        self.qemu_version.get(wait)
    }

    /// Runs `f` with the version probe's result once it is known, on the
    /// probe's thread ([`crate::version::QemuVersion::then`]); the probe's
    /// end is the end of libvirt's first capabilities lookup.
    pub fn after_qemu_version(
        &self,
        f: impl FnOnce(&Result<String, crate::version::QemuVersionError>) + Send + 'static,
    ) {
        self.qemu_version.then(f);
    }
}
