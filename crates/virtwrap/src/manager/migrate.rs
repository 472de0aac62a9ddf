//! Live migration on libvirt, the source's side (KubeVirt v1.6.6
//! `live-migration-source.go`, kubevirt-facts §8.7): MigrateVMI
//! (peer-to-peer `migrateToURI3` over virt-handler's proxy sockets, watched
//! by KubeVirt's 400 ms monitor) and CancelVMIMigration; the target's side
//! is `migrate_target`. The migration's state lives in the runtime
//! metadata (`Spec.Metadata.KubeVirt.Migration`),
//! whose every change reaches virt-handler as a MODIFIED domain.
//!
//! Unsafe: `virDomainAbortJob` and `virDomainMigrateStartPostCopy`, which
//! the `virt` binding does not wrap, called on live domain handles.
#![allow(unsafe_code)]

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::VirtualMachineInstance;
use virt::domain::{Domain as VirtDomain, MigrateParameters};
use virt::sys;
use wire::api_domain::MigrationMetadata;

use super::{LibvirtDomainManager, ManagerError};
use crate::metadata::now_rfc3339;
use crate::migration::{self as plan, MigrationOptions, MigrationState, Progress, Step};

/// KubeVirt's monitor period (`monitorSleepPeriodMS`).
const MONITOR_PERIOD: Duration = Duration::from_millis(400);
/// How often the monitor logs libvirt's job statistics (4 s).
const LOG_EVERY: u32 = 10;

/// Where the migration's sockets are and who runs QEMU (the destination
/// URI's `system` or `session`).
#[derive(Clone, Debug)]
pub struct MigrationSetup {
    /// The launcher's share directory (`/var/run/kubevirt`).
    pub share_dir: String,
    /// Non-root launcher (`qemu+unix:///session`).
    pub non_root: bool,
}

/// KubeVirt's `MigrationAbortStatus` values.
mod abort {
    pub const IN_PROGRESS: &str = "Aborting";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
}

pub(super) fn failed(message: impl Into<String>) -> ManagerError {
    ManagerError::Migration(message.into())
}

/// libvirt's last error as a [`ManagerError`].
fn last_error() -> ManagerError {
    virt::error::Error::last_error().into()
}

impl LibvirtDomainManager {
    /// KubeVirt's MigrateVMI: checks the VMI's `migrationState`, records
    /// the migration in the metadata (`UID`, `StartTimestamp`, `Mode:
    /// PreCopy`) and runs it on a thread of its own; returns at once. A
    /// request for the migration already running is a no-op; for one that
    /// already ended, KubeVirt's "already executed" error.
    ///
    /// # Errors
    /// [`ManagerError::MigrationInput`] for a `migrationState` missing
    /// (KubeVirt's `cannot migrate VMI until migrationState is ready`) or
    /// malformed, or a bandwidth out of range; [`ManagerError::Migration`]
    /// with KubeVirt's message (`migration job <uid> already executed,
    /// ...`), or naming what is not supported yet.
    pub fn migrate_vmi(
        self: &Arc<Self>,
        vmi: &VirtualMachineInstance,
        options: MigrationOptions,
        setup: MigrationSetup,
    ) -> Result<(), ManagerError> {
        let state = MigrationState::of(vmi)?;
        if state.migrated_volumes {
            return Err(failed(
                "status.migratedVolumes: volume migration is not supported yet",
            ));
        }
        if let Some(i) = vmi
            .spec
            .domain
            .devices
            .interfaces
            .iter()
            .position(|i| i.sriov.is_some())
        {
            // KubeVirt detaches SR-IOV host devices first and re-attaches
            // them on failure (kubevirt-facts §8.6).
            return Err(failed(format!(
                "spec.domain.devices.interfaces[{i}].sriov: migrating SR-IOV interfaces (detach and re-attach) is not supported yet"
            )));
        }
        options.bandwidth_mib()?;
        if self.begin_migration(&state.migration_uid)? {
            return Ok(());
        }
        let me = Arc::clone(self);
        let vmi = vmi.clone();
        std::thread::Builder::new()
            .name("migration".into())
            .spawn(move || me.migrate(&vmi, &options, &state, &setup))
            .map_err(|e| failed(format!("cannot start the migration thread: {e}")))?;
        Ok(())
    }

    /// KubeVirt's `initializeMigrationMetadata`: true when migration `uid`
    /// runs already.
    pub(super) fn begin_migration(&self, uid: &str) -> Result<bool, ManagerError> {
        if let Some(m) = self.metadata.snapshot().migration {
            if m.uid == uid {
                return match &m.end_timestamp {
                    None => Ok(true),
                    Some(end) => Err(failed(format!(
                        "migration job {} already executed, finished at {end}, failed: {}, abortStatus: {}",
                        m.uid, m.failed, m.abort_status
                    ))),
                };
            }
        }
        self.metadata.update(|md| {
            md.migration = Some(MigrationMetadata {
                uid: uid.to_owned(),
                start_timestamp: Some(now_rfc3339()),
                mode: "PreCopy".into(),
                ..MigrationMetadata::default()
            });
        });
        Ok(false)
    }

    /// KubeVirt's `setMigrationResultHelper`: records the outcome unless
    /// an abort is in progress (only its own result may end it) or one is
    /// recorded already. Err(()) = an abort is in progress.
    fn set_migration_result(
        &self,
        failed: bool,
        reason: &str,
        abort_status: &str,
    ) -> Result<(), ()> {
        let mut refused = false;
        let mut recorded = false;
        self.metadata.update(|md| {
            let Some(m) = md.migration.as_mut() else {
                return;
            };
            if !abort_status.is_empty()
                && m.abort_status == abort_status
                && abort_status == abort::IN_PROGRESS
            {
                refused = true;
                return;
            }
            if m.abort_status == abort::IN_PROGRESS
                && abort_status != abort::FAILED
                && abort_status != abort::SUCCEEDED
            {
                refused = true;
                return;
            }
            if m.end_timestamp.is_some() {
                return;
            }
            recorded = true;
            if failed {
                m.failed = true;
                m.failure_reason = reason.to_owned();
            }
            m.abort_status = abort_status.to_owned();
            if abort_status.is_empty() || abort_status == abort::SUCCEEDED {
                m.end_timestamp = Some(now_rfc3339());
            }
        });
        if recorded {
            log_result(&self.metadata.snapshot().migration.unwrap_or_default());
        }
        if refused {
            Err(())
        } else {
            Ok(())
        }
    }

    fn set_migration_mode(&self, mode: &str) {
        self.metadata.update(|md| {
            if let Some(m) = md.migration.as_mut() {
                mode.clone_into(&mut m.mode);
            }
        });
    }

    fn migration_mode(&self) -> String {
        self.metadata
            .snapshot()
            .migration
            .map(|m| m.mode)
            .unwrap_or_default()
    }

    /// KubeVirt's `migrate`: the monitor on this thread, `migrateToURI3`
    /// on another; any error of the latter reaches the monitor.
    fn migrate(
        self: &Arc<Self>,
        vmi: &VirtualMachineInstance,
        options: &MigrationOptions,
        state: &MigrationState,
        setup: &MigrationSetup,
    ) {
        if vmi
            .metadata
            .annotations
            .contains_key(plan::FORCE_FAILURE_ANNOTATION)
        {
            tracing::error!("Live migration failed. Failure is forced by functional tests suite.");
            let _ = self.set_migration_result(true, plan::FORCED_FAILURE, "");
            return;
        }
        tracing::info!(migration = %state.migration_uid, "Initiating live migration.");
        if options.unsafe_migration {
            tracing::info!(
                "UNSAFE_MIGRATION flag is set, libvirt's migration checks will be disabled!"
            );
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let me = Arc::clone(self);
        let (v, o, s, st) = (vmi.clone(), options.clone(), state.clone(), setup.clone());
        let worker = std::thread::Builder::new()
            .name("migrate-to-uri3".into())
            .spawn(move || {
                if let Err(e) = me.migrate_helper(&v, &o, &s, &st) {
                    tracing::error!("Live migration failed. {e}");
                    let _ = tx.send(e.to_string());
                } else {
                    tracing::info!("Live migration succeeded.");
                }
            });
        if let Err(e) = worker {
            let _ = self.set_migration_result(
                true,
                &format!("Live migration failed cannot start the migration: {e}"),
                "",
            );
            return;
        }
        self.monitor(vmi, options, state, &rx);
    }

    /// KubeVirt's `migrateHelper`: flags and parameters made under the
    /// modify lock, then `migrateToURI3` (blocks until the migration ends).
    fn migrate_helper(
        &self,
        vmi: &VirtualMachineInstance,
        options: &MigrationOptions,
        state: &MigrationState,
        setup: &MigrationSetup,
    ) -> Result<(), ManagerError> {
        let name = vmi.domain_name();
        let (params, flags) = {
            let _modifying = self.modifying();
            self.with_domain(&name, |dom| {
                let paused = dom.get_state()?.0 == sys::VIR_DOMAIN_PAUSED;
                let flags = plan::migration_flags(state.block_migration, paused, options);
                Ok((
                    self.migration_params(dom, vmi, options, state, setup)?,
                    flags,
                ))
            })?
            .ok_or_else(super::not_found)?
        };
        let uri = plan::destination_uri(&setup.share_dir, vmi.uid(), setup.non_root);
        tracing::info!(uri = %uri, flags, disks = ?params.migrate_disks, "migrateToURI3");
        let res = self.with_domain(&name, |dom| {
            dom.migrate_to_uri3(Some(&uri), params.clone(), flags)?;
            Ok(())
        });
        match res {
            Ok(Some(())) => {
                let _ = self.set_migration_result(false, "", "");
                Ok(())
            }
            Ok(None) => Err(super::not_found()),
            Err(e) => {
                let m = libvirt_message(&e);
                let _ = self.set_migration_result(true, &m, "");
                Err(failed(format!(
                    "error encountered during MigrateToURI3 libvirt api call: {m}"
                )))
            }
        }
    }

    /// KubeVirt's `generateMigrationParams`.
    fn migration_params(
        &self,
        dom: &VirtDomain,
        vmi: &VirtualMachineInstance,
        options: &MigrationOptions,
        state: &MigrationState,
        setup: &MigrationSetup,
    ) -> Result<MigrateParameters, ManagerError> {
        let bandwidth = options.bandwidth_mib()?;
        let xml = dom.get_xml_desc(sys::VIR_DOMAIN_XML_MIGRATABLE)?;
        let mut dest = plan::destination_xml(&xml, vmi.namespace(), vmi.uid(), state);
        let live = domain::Domain::from_xml(&dom.get_xml_desc(0)?)?;
        if let Some(tune) = self.target_pinning(vmi, state, &live)? {
            dest = plan::replace_cputune(&dest, &tune.to_xml()?);
        }
        let copy = plan::disks_to_copy(vmi, &live);
        let dest_name = match &state.target_domain {
            Some((name, namespace)) => format!("{namespace}_{name}"),
            None => vmi.domain_name(),
        };
        let mut p = MigrateParameters {
            uri: Some(format!(
                "unix://{}",
                plan::proxy_socket(&setup.share_dir, vmi.uid(), plan::DIRECT_MIGRATION_PORT)
            )),
            bandwidth: (bandwidth > 0).then_some(bandwidth),
            dest_xml: Some(dest.clone()),
            persist_xml: Some(dest),
            parallel_connections: options
                .parallel_connections()
                .map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
            dest_name: Some(dest_name),
            ..MigrateParameters::default()
        };
        if !copy.is_empty() {
            p.disks_uri = Some(format!(
                "unix://{}",
                plan::proxy_socket(&setup.share_dir, vmi.uid(), plan::BLOCK_MIGRATION_PORT)
            ));
            p.migrate_disks = copy;
        }
        Ok(p)
    }

    /// KubeVirt's `generateDomainForTargetCPUSetAndTopology` for a VMI
    /// with dedicated CPUs: the vCPUs online now (the VMI's sockets ×
    /// cores × threads, as `AdjustDomainForTopologyAndCPUSet` counts the
    /// enabled ones), the emulator and I/O threads pinned on the target
    /// pod's CPUs (`status.migrationState.targetCPUSet`) by the converter's
    /// rule. KubeVirt also rewrites `<vcpu>` and the CPU topology from the
    /// VMI; they are the same on both sides and stay as libvirt wrote them
    /// (KubeVirt's rewrite drops `<vcpu current=…>`), and the guest NUMA
    /// cells stay the source's, as in KubeVirt. `None` without dedicated
    /// CPUs.
    ///
    /// # Errors
    /// KubeVirt's: a `targetNodeTopology` that does not decode (missing:
    /// `unexpected end of JSON input`), too few target CPUs (`not enough
    /// exclusive threads provided, ...`); the migration then fails with it.
    fn target_pinning(
        &self,
        vmi: &VirtualMachineInstance,
        state: &MigrationState,
        live: &domain::Domain,
    ) -> Result<Option<domain::CpuTune>, ManagerError> {
        if !vmi
            .spec
            .domain
            .cpu
            .as_ref()
            .is_some_and(|c| c.dedicated_cpu_placement)
        {
            return Ok(None);
        }
        let cpus = plan::target_cpus(state)?;
        let count = super::vcpus::requested_vcpus(vmi).map_err(|e| {
            ManagerError::Convert(converter::ConvertError::invalid(
                "spec.domain.cpu.sockets",
                e.to_string(),
            ))
        })?;
        let tune = self.dedicated_pinning(vmi, count, live.iothreads, Some(cpus))?;
        if let Some(t) = &tune {
            tracing::info!(target_cpus = ?cpus, vcpupin = t.vcpupin.len(), "dedicated CPUs pinned for the target");
        }
        Ok(tune)
    }

    /// KubeVirt's `startMonitor`: every 400 ms (or at once on an error of
    /// `migrateToURI3`) libvirt's job information (`virDomainGetJobInfo`,
    /// which carries the job type and the data remaining KubeVirt reads
    /// from `GetJobStats`; the binding's `get_job_stats` frees libvirt's
    /// memory with Rust's allocator and is never used), the stall and
    /// completion-budget rules, the outcome into the metadata.
    fn monitor(
        &self,
        vmi: &VirtualMachineInstance,
        options: &MigrationOptions,
        state: &MigrationState,
        errors: &Receiver<String>,
    ) {
        let ephemeral = state
            .block_migration
            .then(|| dir_bytes(std::path::Path::new(&self.host.paths.ephemeral_disk_dir)));
        let mut m = Progress::new(
            Instant::now(),
            options
                .completion_timeout_per_gib
                .saturating_mul(plan::migration_data_gb(vmi, ephemeral)),
        );
        let name = vmi.domain_name();
        let mut error: Option<String> = None;
        let mut completed: Option<i32> = None;
        let mut ticks = 0u32;
        loop {
            match errors.recv_timeout(MONITOR_PERIOD) {
                Ok(e) if error.is_none() => {
                    tracing::error!("Received a live migration error. Will check the latest migration status. {e}");
                    error = Some(e);
                    continue;
                }
                Ok(_) | Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            }
            if let Some(e) = &error {
                let abort_status = if e.contains("canceled by client") {
                    abort::SUCCEEDED
                } else {
                    ""
                };
                let _ = self.set_migration_result(
                    true,
                    &format!("Live migration failed {e}"),
                    abort_status,
                );
                return;
            }
            let stats = match completed {
                Some(t) => (t, None),
                None => match self.with_domain(&name, |d| Ok(d.get_job_info()?)) {
                    Ok(Some(s)) => (s.r#type, s.data_remaining),
                    Ok(None) => {
                        // The domain left this daemon: the migration ended;
                        // migrateToURI3's return records how.
                        if self.migration_ended() {
                            return;
                        }
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!("failed to get domain job info, will retry: {e}");
                        if self.migration_ended() {
                            return;
                        }
                        continue;
                    }
                },
            };
            if let Some(r) = stats.1 {
                m.remaining = r;
            }
            match u32::try_from(stats.0).unwrap_or(u32::MAX) {
                sys::VIR_DOMAIN_JOB_UNBOUNDED => {
                    if let Some((message, status)) = self.in_flight(&name, options, &mut m) {
                        tracing::error!("Live migration abort detected with reason: {message}");
                        let _ = self.set_migration_result(true, &message, status);
                        return;
                    }
                    ticks += 1;
                    if ticks.is_multiple_of(LOG_EVERY) {
                        tracing::info!(
                            migration = %state.migration_uid,
                            remaining = m.remaining,
                            elapsed_ms = u64::try_from(m.start.elapsed().as_millis()).unwrap_or(u64::MAX),
                            "Migration info"
                        );
                    }
                }
                sys::VIR_DOMAIN_JOB_NONE => {
                    if self.migration_ended() {
                        return;
                    }
                    completed = self.non_running_status(&name, &m);
                }
                sys::VIR_DOMAIN_JOB_CANCELLED => {
                    tracing::info!("Migration was canceled");
                    let _ = self.set_migration_result(true, plan::ABORTED, abort::SUCCEEDED);
                    return;
                }
                _ => {}
            }
        }
    }

    /// Whether the metadata records the migration's end.
    fn migration_ended(&self) -> bool {
        self.metadata
            .snapshot()
            .migration
            .is_none_or(|m| m.end_timestamp.is_some())
    }

    /// KubeVirt's `determineNonRunningMigrationStatus`: after progress was
    /// seen, a job that is gone means cancelled (an abort in progress) or
    /// failed (the domain still runs here); else not started yet.
    fn non_running_status(&self, name: &str, m: &Progress) -> Option<i32> {
        if m.last_progress <= m.start {
            return None;
        }
        let aborting = self
            .metadata
            .snapshot()
            .migration
            .is_some_and(|x| x.abort_status == abort::IN_PROGRESS);
        if aborting {
            return Some(sys::VIR_DOMAIN_JOB_CANCELLED as i32);
        }
        match self.with_domain(name, |d| Ok(d.get_state()?.0)) {
            Ok(Some(sys::VIR_DOMAIN_RUNNING)) => Some(sys::VIR_DOMAIN_JOB_FAILED as i32),
            _ => None,
        }
    }

    /// KubeVirt's `processInflightMigration`: [`Progress::step`], then
    /// what it asks of libvirt (post-copy, pause, abort). Some((reason,
    /// abort status)) when it aborted.
    fn in_flight(
        &self,
        name: &str,
        options: &MigrationOptions,
        m: &mut Progress,
    ) -> Option<(String, &'static str)> {
        let step = m.step(Instant::now(), &self.migration_mode(), options);
        let message = match step {
            Step::Wait => return None,
            Step::StartPostCopy | Step::Pause => {
                let r = self.with_domain(name, |d| {
                    if step == Step::StartPostCopy {
                        tracing::info!("Starting post copy mode for migration");
                        // SAFETY: `d` is a live domain handle.
                        if unsafe { sys::virDomainMigrateStartPostCopy(d.as_ptr(), 0) } < 0 {
                            return Err(last_error());
                        }
                    } else {
                        tracing::info!("Pausing the guest to allow migration to complete");
                        d.suspend()?;
                    }
                    Ok(())
                });
                match r {
                    Ok(Some(())) if step == Step::StartPostCopy => {
                        self.set_migration_mode("PostCopy");
                    }
                    Ok(Some(())) => {
                        self.set_user_paused(name, true);
                        self.set_migration_mode("Paused");
                    }
                    Ok(None) => {}
                    Err(e) => tracing::error!("failed to assist the migration: {e}"),
                }
                return None;
            }
            Step::AbortStuck(secs) => {
                tracing::warn!("Live migration stuck for {secs} seconds");
                format!("Live migration stuck for {secs} seconds and has been aborted")
            }
            Step::AbortTimeout(budget) => format!(
                "Live migration is not completed after {budget} seconds and has been aborted"
            ),
        };
        if let Err(e) = self.abort_job(name) {
            tracing::error!("failed to abort migration: {e}");
            return None;
        }
        Some((message, abort::SUCCEEDED))
    }

    /// `virDomainAbortJob` on the domain `name`.
    fn abort_job(&self, name: &str) -> Result<(), ManagerError> {
        self.with_domain(name, |d| {
            // SAFETY: `d` is a live domain handle.
            if unsafe { sys::virDomainAbortJob(d.as_ptr()) } < 0 {
                return Err(last_error());
            }
            Ok(())
        })?
        .ok_or_else(super::not_found)
    }

    /// KubeVirt's CancelVMIMigration: KubeVirt's `failed to cancel
    /// migration - vmi is not migrating` when no migration runs; success
    /// when an abort is already under way; else marks the abort
    /// (`Aborting`) and aborts libvirt's job on a thread of its own.
    ///
    /// # Errors
    /// [`ManagerError::Migration`] with KubeVirt's message.
    pub fn cancel_migration(
        self: &Arc<Self>,
        vmi: &VirtualMachineInstance,
    ) -> Result<(), ManagerError> {
        let m = self.metadata.snapshot().migration.unwrap_or_default();
        if m.end_timestamp.is_some() || m.failed || m.start_timestamp.is_none() {
            return Err(failed(cmd_not_migrating()));
        }
        if self
            .set_migration_result(false, "", abort::IN_PROGRESS)
            .is_err()
        {
            return Ok(());
        }
        let me = Arc::clone(self);
        let name = vmi.domain_name();
        std::thread::Builder::new()
            .name("migration-abort".into())
            .spawn(move || {
                let unbounded = me
                    .with_domain(&name, |d| Ok(d.get_job_info()?.r#type))
                    .ok()
                    .flatten()
                    == Some(sys::VIR_DOMAIN_JOB_UNBOUNDED as i32);
                if !unbounded {
                    return;
                }
                match me.abort_job(&name) {
                    Ok(()) => {
                        let _ = me.set_migration_result(true, plan::ABORTED, abort::SUCCEEDED);
                        tracing::info!("Live migration abort succeeded");
                    }
                    Err(e) => {
                        tracing::error!("failed to cancel migration: {e}");
                        let _ = me.set_migration_result(false, "", abort::FAILED);
                    }
                }
            })
            .map_err(|e| failed(format!("cannot start the abort: {e}")))?;
        Ok(())
    }
}

/// KubeVirt's text for a cancel with nothing migrating.
fn cmd_not_migrating() -> &'static str {
    "failed to cancel migration - vmi is not migrating"
}

/// `e` as KubeVirt's `err.Error()` reads for a libvirt error (the Go
/// binding's `virError(Code=.., Domain=.., Message='..')`), the text KubeVirt
/// records as the failure reason of a failed `MigrateToURI3`; else its text.
pub(super) fn libvirt_message(e: &ManagerError) -> String {
    match e {
        ManagerError::Libvirt {
            code,
            domain,
            message,
        } => format!("virError(Code={code}, Domain={domain}, Message='{message}')"),
        other => other.to_string(),
    }
}

/// Bytes of the regular files below `dir` (KubeVirt's ephemeral disks'
/// size), not following links; 0 when unreadable. Bounded: at most 10,000
/// entries are looked at.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > 10_000 {
                return total;
            }
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                stack.push(e.path());
            } else if md.is_file() {
                total = total.saturating_add(md.len());
            }
        }
    }
    total
}

/// KubeVirt's `set migration result in metadata: <record>` line (the
/// record as GetDomain shows it): at verbosity 2 (info here) for a failure,
/// 4 (debug) otherwise, as `setMigrationResultHelper` logs it.
fn log_result(m: &MigrationMetadata) {
    let record = serde_json::to_string(m).unwrap_or_default();
    if m.failed {
        tracing::info!("set migration result in metadata: {record}");
    } else {
        tracing::debug!("set migration result in metadata: {record}");
    }
}
