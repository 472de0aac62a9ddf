//! The command server virt-handler drives (KubeVirt
//! `pkg/virt-launcher/virtwrap/cmd-server/server.go`, v1.6.6).
//!
//! gRPC over the Unix socket `<share>/sockets/launcher-init-sock`, renamed
//! to `launcher-sock` once the launcher is ready ([`mark_ready`]); no TCP.
//! Every method of `kubevirt.cmd.v1.Cmd` calls the [`Handler`]; a part of
//! a feature that is not built answers `success=false` with "not supported
//! yet: <feature>" ([`CommandError::not_supported`]) — never a silent
//! success. Errors travel in
//! the `Response` (gRPC status OK), as KubeVirt's server does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use api::VirtualMachineInstance;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response as TonicResponse, Status};

use crate::proto::cmd::cmd_server::{Cmd, CmdServer};
use crate::proto::cmd::{
    BackupRequest, DirtyRateStatsResponse, DomainResponse, DomainStatsResponse, EmptyRequest,
    ExecRequest, ExecResponse, FreezeRequest, GuestFilesystemsResponse, GuestInfoResponse,
    GuestPingRequest, GuestPingResponse, GuestUserListResponse, InjectLaunchSecretRequest,
    LaunchMeasurementResponse, MemoryDumpRequest, MigrationRequest, QemuVersionResponse,
    RedefineCheckpointRequest, RedefineCheckpointResponse, Response, ScreenshotResponse,
    SevInfoResponse, VmStatsRequest, VmStatsResponse, VmiRequest,
};
use crate::proto::cmd_info::cmd_info_server::{CmdInfo, CmdInfoServer};
use crate::proto::cmd_info::{CmdInfoRequest, CmdInfoResponse};

/// The command protocol versions this server speaks.
pub const SUPPORTED_CMD_VERSIONS: [u32; 1] = [1];
/// Largest request accepted (a VMI JSON is a few KiB; gRPC's default is 4 MiB).
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// Largest image GetScreenshot answers: [`MAX_MESSAGE_BYTES`] less room for
/// the rest of the answer (a larger one is refused by size, not cut).
pub const MAX_SCREENSHOT_BYTES: usize = MAX_MESSAGE_BYTES - 1024;
pub use crate::error::{CommandError, NOT_MIGRATING, NO_VALID_VMI};
pub use crate::handler::{Handler, Screenshot, SyncOptions, AGENT_DATA_COMMANDS};

fn ok() -> Response {
    Response {
        success: true,
        message: String::new(),
    }
}

fn fail(e: &CommandError) -> Response {
    Response {
        success: false,
        message: e.to_string(),
    }
}

/// A handler call's result, or [`CommandError::Internal`] when its task
/// did not finish.
fn joined<T>(
    r: Result<Result<T, CommandError>, tokio::task::JoinError>,
) -> Result<T, CommandError> {
    r.unwrap_or_else(|e| Err(CommandError::Internal(e.to_string())))
}

/// A reply with a payload built by `make` from the [`Response`] and the
/// payload: on failure the failure's response and the payload's zero value
/// (an empty list or string, 0), as KubeVirt's launcher answers.
fn answer<T: Default, P>(res: Result<T, Response>, make: impl FnOnce(Response, T) -> P) -> P {
    match res {
        Ok(v) => make(ok(), v),
        Err(r) => make(r, T::default()),
    }
}

/// The gRPC service implementation.
pub struct CmdService<H: Handler> {
    handler: Arc<H>,
}

impl<H: Handler> CmdService<H> {
    /// A service answering with `handler`.
    pub fn new(handler: Arc<H>) -> Self {
        CmdService { handler }
    }

    /// Decodes the VMI of a request and checks it is this launcher's. The
    /// size is bounded first ([`MAX_MESSAGE_BYTES`], as the whole request
    /// already is), then the JSON is decoded on a blocking thread, never on
    /// the runtime's one thread: a large VMI must not hold up every other
    /// RPC and the notify queue while it decodes (issue 19).
    async fn vmi(&self, json: Option<&[u8]>) -> Result<VirtualMachineInstance, Response> {
        let json = json.ok_or_else(|| fail(&CommandError::NoValidVmi(None)))?;
        if json.len() > MAX_MESSAGE_BYTES {
            return Err(fail(&CommandError::NoValidVmi(Some(format!(
                "the VMI JSON is {} bytes, more than {MAX_MESSAGE_BYTES}",
                json.len()
            )))));
        }
        let bytes = json.to_vec();
        let decoded = tokio::task::spawn_blocking(move || api::load::from_command_json(&bytes))
            .await
            .map_err(|e| {
                fail(&CommandError::NoValidVmi(Some(format!(
                    "decoding failed: {e}"
                ))))
            })?;
        let vmi = decoded.map_err(|e| fail(&CommandError::NoValidVmi(Some(e.to_string()))))?;
        // A VMI naming another UID is refused (KubeVirt's launcher does not
        // check; this one serves one VMI). A VMI without a UID passes:
        // KubeVirt's own virt-freezer sends only the name and namespace.
        let mine = self.handler.vmi_uid();
        if !mine.is_empty() && !vmi.uid().is_empty() && vmi.uid() != mine {
            return Err(fail(&CommandError::OtherUid {
                namespace: vmi.namespace().to_owned(),
                name: vmi.metadata.name.clone(),
                uid: vmi.uid().to_owned(),
                ours: mine,
            }));
        }
        Ok(vmi)
    }

    /// GetDomainStats' answer (also GetVMStats' `domainStats`).
    async fn domain_stats(&self) -> DomainStatsResponse {
        let h = Arc::clone(&self.handler);
        let res = joined(tokio::task::spawn_blocking(move || h.domain_stats_json()).await);
        match res {
            Ok(s) => DomainStatsResponse {
                response: Some(ok()),
                domain_stats: s.unwrap_or_else(|| "null".into()),
            },
            Err(e) => DomainStatsResponse {
                response: Some(fail(&e)),
                domain_stats: String::new(),
            },
        }
    }

    /// GetDomainDirtyRateStats' answer (also GetVMStats' `dirtyRateStats`).
    /// The calculation takes about a second: it runs on the blocking pool,
    /// so the runtime keeps serving other calls meanwhile.
    async fn dirty_rate(&self) -> DirtyRateStatsResponse {
        let res = self
            .blocking(|h| h.dirty_rate_mbs())
            .await
            .map_err(|e| fail(&e));
        answer(res, |r, dirty_rate_mbs| DirtyRateStatsResponse {
            response: Some(r),
            dirty_rate_mbs,
        })
    }

    /// Runs `f` with the handler on the blocking pool (libvirt's calls
    /// block; the runtime's thread keeps serving other calls).
    async fn blocking<T, F>(&self, f: F) -> Result<T, CommandError>
    where
        T: Send + 'static,
        F: FnOnce(&H) -> Result<T, CommandError> + Send + 'static,
    {
        let h = Arc::clone(&self.handler);
        joined(tokio::task::spawn_blocking(move || f(&h)).await)
    }

    /// Decodes and checks the request's VMI ([`CmdService::vmi`]), then runs
    /// `f` with it on the blocking pool; either failure as its response.
    async fn vmi_call<T, F>(
        &self,
        vmi: Option<&crate::proto::cmd::Vmi>,
        f: F,
    ) -> Result<T, Response>
    where
        T: Send + 'static,
        F: FnOnce(&H, &VirtualMachineInstance) -> Result<T, CommandError> + Send + 'static,
    {
        let vmi = self.vmi(vmi.map(|v| v.vmi_json.as_slice())).await?;
        self.blocking(move |h| f(h, &vmi))
            .await
            .map_err(|e| fail(&e))
    }

    /// Runs a blocking handler call for the VMI of `req`.
    async fn with_vmi<F>(&self, req: &VmiRequest, f: F) -> Response
    where
        F: FnOnce(&H, &VirtualMachineInstance) -> Result<(), CommandError> + Send + 'static,
    {
        self.vmi_call(req.vmi.as_ref(), f)
            .await
            .map_or_else(|r| r, |()| ok())
    }
}

fn sync_options(req: &VmiRequest) -> SyncOptions {
    let Some(o) = &req.options else {
        return SyncOptions::default();
    };
    SyncOptions {
        smbios: o.virtual_machine_sm_bios.as_ref().map(|s| {
            [
                s.manufacturer.clone(),
                s.family.clone(),
                s.product.clone(),
                s.sku.clone(),
                s.version.clone(),
            ]
        }),
        mem_balloon_stats_period: o.mem_balloon_stats_period,
        preallocated_volumes: o.preallocated_volumes.clone(),
        free_page_reporting_disabled: o
            .cluster_config
            .as_ref()
            .is_some_and(|c| c.free_page_reporting_disabled),
        serial_console_log_disabled: o
            .cluster_config
            .as_ref()
            .is_some_and(|c| c.serial_console_log_disabled),
        bochs_display_for_efi_guests: o
            .cluster_config
            .as_ref()
            .is_some_and(|c| c.bochs_display_for_efi_guests),
        #[allow(deprecated)]
        expand_disks_enabled: match &o.cluster_config {
            Some(c) => c.expand_disks_enabled,
            None => o.expand_disks_enabled,
        },
        interface_migration: o
            .interface_migration
            .iter()
            .map(|(k, v)| (k.clone(), v.method.clone()))
            .collect(),
    }
}

type R<T> = Result<TonicResponse<T>, Status>;

/// A failure as a gRPC error (status Unknown) carrying the message, as
/// KubeVirt's Exec and GuestPing fail.
fn status(e: &CommandError) -> Status {
    Status::unknown(e.to_string())
}

/// A handler's JSON answer as (Response, payload).
fn split(r: Result<String, CommandError>) -> (Response, String) {
    match r {
        Ok(json) => (ok(), json),
        Err(e) => (fail(&e), String::new()),
    }
}

fn reply<T>(t: T) -> R<T> {
    Ok(TonicResponse::new(t))
}

#[tonic::async_trait]
impl<H: Handler> Cmd for CmdService<H> {
    async fn sync_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        let req = r.into_inner();
        let opts = sync_options(&req);
        reply(self.with_vmi(&req, move |h, v| h.sync(v, &opts)).await)
    }
    async fn pause_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(self.with_vmi(&r.into_inner(), |h, v| h.pause(v)).await)
    }
    async fn unpause_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(self.with_vmi(&r.into_inner(), |h, v| h.unpause(v)).await)
    }
    async fn freeze_virtual_machine(&self, r: Request<FreezeRequest>) -> R<Response> {
        let req = r.into_inner();
        let vmi = match self
            .vmi(req.vmi.as_ref().map(|v| v.vmi_json.as_slice()))
            .await
        {
            Ok(v) => v,
            Err(r) => return reply(r),
        };
        let Ok(secs) = u64::try_from(req.unfreeze_timeout_seconds) else {
            return reply(fail(&CommandError::BadRequest(format!(
                "unfreezeTimeoutSeconds: {} is negative",
                req.unfreeze_timeout_seconds
            ))));
        };
        let h = Arc::clone(&self.handler);
        let res = tokio::task::spawn_blocking(move || {
            h.freeze(&vmi, std::time::Duration::from_secs(secs))
        })
        .await;
        reply(match joined(res) {
            Ok(()) => ok(),
            Err(e) => fail(&e),
        })
    }
    async fn unfreeze_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(self.with_vmi(&r.into_inner(), |h, v| h.unfreeze(v)).await)
    }
    async fn soft_reboot_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(
            self.with_vmi(&r.into_inner(), |h, v| h.soft_reboot(v))
                .await,
        )
    }
    async fn reset_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(self.with_vmi(&r.into_inner(), |h, v| h.reset(v)).await)
    }
    async fn shutdown_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(self.with_vmi(&r.into_inner(), |h, v| h.shutdown(v)).await)
    }
    async fn kill_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(self.with_vmi(&r.into_inner(), |h, v| h.kill(v)).await)
    }
    async fn delete_virtual_machine(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(self.with_vmi(&r.into_inner(), |h, v| h.delete(v)).await)
    }
    async fn migrate_virtual_machine(&self, r: Request<MigrationRequest>) -> R<Response> {
        let req = r.into_inner();
        let vmi = match self
            .vmi(req.vmi.as_ref().map(|v| v.vmi_json.as_slice()))
            .await
        {
            Ok(v) => v,
            Err(r) => return reply(r),
        };
        if req.options.is_empty() {
            return reply(fail(&CommandError::BadRequest(
                "migration options object not present in command server request".into(),
            )));
        }
        let h = Arc::clone(&self.handler);
        let options = req.options;
        let res = tokio::task::spawn_blocking(move || h.migrate(&vmi, &options)).await;
        reply(match joined(res) {
            Ok(()) => ok(),
            Err(e) => fail(&e),
        })
    }
    async fn sync_migration_target(&self, r: Request<VmiRequest>) -> R<Response> {
        let req = r.into_inner();
        let opts = sync_options(&req);
        reply(
            self.with_vmi(&req, move |h, v| h.sync_migration_target(v, &opts))
                .await,
        )
    }
    async fn cancel_virtual_machine_migration(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(
            self.with_vmi(&r.into_inner(), |h, v| h.cancel_migration(v))
                .await,
        )
    }
    async fn signal_target_pod_cleanup(&self, r: Request<VmiRequest>) -> R<Response> {
        // KubeVirt answers success whatever the VMI's migration says.
        reply(
            self.with_vmi(&r.into_inner(), |h, v| {
                h.signal_target_pod_cleanup(v);
                Ok(())
            })
            .await,
        )
    }
    async fn finalize_virtual_machine_migration(&self, r: Request<VmiRequest>) -> R<Response> {
        let req = r.into_inner();
        let opts = sync_options(&req);
        reply(
            self.with_vmi(&req, move |h, v| h.finalize_migration(v, &opts))
                .await,
        )
    }
    async fn hotplug_host_devices(&self, r: Request<VmiRequest>) -> R<Response> {
        reply(
            self.with_vmi(&r.into_inner(), |h, v| h.hotplug_host_devices(v))
                .await,
        )
    }
    async fn get_domain(&self, _r: Request<EmptyRequest>) -> R<DomainResponse> {
        let h = Arc::clone(&self.handler);
        let res = match h.cached_domain_json() {
            Some(d) => Ok(d),
            None => joined(tokio::task::spawn_blocking(move || h.domain_json()).await),
        };
        reply(match res {
            Ok(d) => DomainResponse {
                response: Some(ok()),
                domain: d.unwrap_or_default(),
            },
            Err(e) => DomainResponse {
                response: Some(fail(&e)),
                domain: String::new(),
            },
        })
    }
    async fn get_domain_stats(&self, _r: Request<EmptyRequest>) -> R<DomainStatsResponse> {
        reply(self.domain_stats().await)
    }
    // The guest agent answers come from the poller's memory: no blocking
    // hop, the runtime is never held up by the guest.
    async fn get_guest_info(&self, _r: Request<EmptyRequest>) -> R<GuestInfoResponse> {
        let (response, json) = split(self.handler.guest_info_json());
        reply(GuestInfoResponse {
            response: Some(response),
            guest_info_response: json,
        })
    }
    async fn get_users(&self, _r: Request<EmptyRequest>) -> R<GuestUserListResponse> {
        let (response, json) = split(self.handler.users_json());
        reply(GuestUserListResponse {
            response: Some(response),
            guest_user_list_response: json,
        })
    }
    async fn get_filesystems(&self, _r: Request<EmptyRequest>) -> R<GuestFilesystemsResponse> {
        let (response, json) = split(self.handler.filesystems_json());
        reply(GuestFilesystemsResponse {
            response: Some(response),
            guest_filesystems_response: json,
        })
    }
    async fn ping(&self, _r: Request<EmptyRequest>) -> R<Response> {
        reply(ok())
    }
    /// KubeVirt: a guest exit code (zero or not) is a success carrying it;
    /// any other failure is a gRPC error (status Unknown) with the message,
    /// which virt-handler and virt-probe report with exit code -1.
    async fn exec(&self, r: Request<ExecRequest>) -> R<ExecResponse> {
        let req = r.into_inner();
        let Ok(secs) = u64::try_from(req.timeout_seconds) else {
            return Err(status(&CommandError::BadRequest(format!(
                "timeoutSeconds: {} is negative",
                req.timeout_seconds
            ))));
        };
        if secs == 0 {
            return Err(status(&CommandError::BadRequest(
                "timeoutSeconds: must be at least 1".into(),
            )));
        }
        let h = Arc::clone(&self.handler);
        let res = tokio::task::spawn_blocking(move || {
            h.exec(
                &req.domain_name,
                &req.command,
                &req.args,
                std::time::Duration::from_secs(secs),
            )
        })
        .await;
        match joined(res) {
            Ok((exit_code, std_out)) => reply(ExecResponse {
                response: Some(ok()),
                exit_code,
                std_out,
            }),
            Err(e) => Err(status(&e)),
        }
    }
    /// KubeVirt: success, or a gRPC error (status Unknown) with the message.
    async fn guest_ping(&self, r: Request<GuestPingRequest>) -> R<GuestPingResponse> {
        let req = r.into_inner();
        let secs = u64::try_from(req.timeout_seconds).unwrap_or(0).max(1);
        let h = Arc::clone(&self.handler);
        let res = tokio::task::spawn_blocking(move || {
            h.guest_ping(&req.domain_name, std::time::Duration::from_secs(secs))
        })
        .await;
        match joined(res) {
            Ok(()) => reply(GuestPingResponse {
                response: Some(ok()),
            }),
            Err(e) => Err(status(&e)),
        }
    }
    /// KubeVirt: checks the VMI, starts the dump and answers at once (the
    /// dump's outcome is in the domain's metadata, never in this answer).
    async fn virtual_machine_memory_dump(&self, r: Request<MemoryDumpRequest>) -> R<Response> {
        let req = r.into_inner();
        let path = req.dump_path;
        let res = self
            .vmi_call(req.vmi.as_ref(), move |h, v| h.memory_dump(v, &path))
            .await;
        reply(res.map_or_else(|r| r, |()| ok()))
    }
    async fn get_qemu_version(&self, _r: Request<EmptyRequest>) -> R<QemuVersionResponse> {
        let res = self
            .blocking(|h| h.qemu_version())
            .await
            .map_err(|e| fail(&e));
        reply(answer(res, |r, version| QemuVersionResponse {
            response: Some(r),
            version,
        }))
    }
    async fn sync_virtual_machine_cp_us(&self, r: Request<VmiRequest>) -> R<Response> {
        let req = r.into_inner();
        let opts = sync_options(&req);
        reply(self.with_vmi(&req, move |h, v| h.sync_cpus(v, &opts)).await)
    }
    async fn sync_virtual_machine_memory(&self, r: Request<VmiRequest>) -> R<Response> {
        let req = r.into_inner();
        let opts = sync_options(&req);
        reply(
            self.with_vmi(&req, move |h, v| h.sync_memory(v, &opts))
                .await,
        )
    }
    /// KubeVirt asks libvirt (`virNodeGetSEVInfo`): on a host without SEV
    /// the answer is libvirt's refusal.
    async fn get_sev_info(&self, _r: Request<EmptyRequest>) -> R<SevInfoResponse> {
        let res = self.blocking(|h| h.sev_info()).await.map_err(|e| fail(&e));
        reply(answer(res, |r, sev_info| SevInfoResponse {
            response: Some(r),
            sev_info,
        }))
    }
    async fn get_launch_measurement(&self, r: Request<VmiRequest>) -> R<LaunchMeasurementResponse> {
        let req = r.into_inner();
        let res = self
            .vmi_call(req.vmi.as_ref(), |h, v| h.launch_measurement(v))
            .await;
        reply(answer(res, |r, launch_measurement| {
            LaunchMeasurementResponse {
                response: Some(r),
                launch_measurement,
            }
        }))
    }
    /// KubeVirt: the VMI, then the options (`SEVSecretOptions` JSON), then
    /// `Header is required` / `Secret is required`, then libvirt.
    async fn inject_launch_secret(&self, r: Request<InjectLaunchSecretRequest>) -> R<Response> {
        let req = r.into_inner();
        let vmi = match self
            .vmi(req.vmi.as_ref().map(|v| v.vmi_json.as_slice()))
            .await
        {
            Ok(v) => v,
            Err(response) => return reply(response),
        };
        let (header, secret) = match crate::sev::secret_options(&req.options) {
            Ok(hs) => hs,
            Err(e) => return reply(fail(&e)),
        };
        let res = self
            .blocking(move |h| h.inject_launch_secret(&vmi, &header, &secret))
            .await;
        reply(res.map_or_else(|e| fail(&e), |()| ok()))
    }
    /// Failures travel in the `Response` (success=false) with
    /// `dirtyRateMbs` 0.
    async fn get_domain_dirty_rate_stats(
        &self,
        _r: Request<EmptyRequest>,
    ) -> R<DirtyRateStatsResponse> {
        reply(self.dirty_rate().await)
    }
    /// KubeVirt main: libvirt's screenshot of the primary display.
    async fn get_screenshot(&self, r: Request<VmiRequest>) -> R<ScreenshotResponse> {
        let req = r.into_inner();
        let vmi = match self
            .vmi(req.vmi.as_ref().map(|v| v.vmi_json.as_slice()))
            .await
        {
            Ok(v) => v,
            Err(response) => {
                return reply(ScreenshotResponse {
                    response: Some(response),
                    ..Default::default()
                })
            }
        };
        let h = Arc::clone(&self.handler);
        let res = joined(tokio::task::spawn_blocking(move || h.screenshot(&vmi)).await)
            .and_then(|s| {
                // The answer must fit the gRPC message limit.
                if s.data.len() > MAX_SCREENSHOT_BYTES {
                    return Err(CommandError::Failed(format!(
                        "the screenshot is {} bytes, more than the {MAX_SCREENSHOT_BYTES} bytes an answer may carry",
                        s.data.len()
                    )));
                }
                Ok(s)
            });
        reply(match res {
            Ok(s) => ScreenshotResponse {
                response: Some(ok()),
                mime: s.mime,
                data: s.data,
            },
            Err(e) => ScreenshotResponse {
                response: Some(fail(&e)),
                ..Default::default()
            },
        })
    }
    /// KubeVirt main's BackupVirtualMachine: the VMI, then the handler
    /// (which checks changed block tracking and the options as KubeVirt
    /// does) on the blocking pool.
    async fn backup_virtual_machine(&self, r: Request<BackupRequest>) -> R<Response> {
        let req = r.into_inner();
        let vmi = match self
            .vmi(req.vmi.as_ref().map(|v| v.vmi_json.as_slice()))
            .await
        {
            Ok(v) => v,
            Err(response) => return reply(response),
        };
        let h = Arc::clone(&self.handler);
        let options = req.options;
        let res = tokio::task::spawn_blocking(move || h.backup(&vmi, &options)).await;
        reply(match joined(res) {
            Ok(()) => ok(),
            Err(e) => fail(&e),
        })
    }
    /// KubeVirt main's RedefineCheckpoint: `checkpointInvalid` as the
    /// handler reports it.
    async fn redefine_checkpoint(
        &self,
        r: Request<RedefineCheckpointRequest>,
    ) -> R<RedefineCheckpointResponse> {
        let req = r.into_inner();
        let vmi = match self
            .vmi(req.vmi.as_ref().map(|v| v.vmi_json.as_slice()))
            .await
        {
            Ok(v) => v,
            Err(response) => {
                return reply(RedefineCheckpointResponse {
                    response: Some(response),
                    checkpoint_invalid: false,
                })
            }
        };
        let h = Arc::clone(&self.handler);
        let checkpoint = req.checkpoint;
        let res = tokio::task::spawn_blocking(move || h.redefine_checkpoint(&vmi, &checkpoint))
            .await
            .unwrap_or_else(|e| Err((false, CommandError::Internal(e.to_string()))));
        reply(match res {
            Ok(()) => RedefineCheckpointResponse {
                response: Some(ok()),
                checkpoint_invalid: false,
            },
            Err((invalid, e)) => RedefineCheckpointResponse {
                response: Some(fail(&e)),
                checkpoint_invalid: invalid,
            },
        })
    }
    /// KubeVirt main's GetVMStats ([`crate::vmstats`]): a gRPC error
    /// without `--vm-stats-collector`, else every requested item with a
    /// `Response` of its own. The agent commands run one after the other
    /// on the blocking pool, as KubeVirt runs them.
    async fn get_vm_stats(&self, r: Request<VmStatsRequest>) -> R<VmStatsResponse> {
        if !self.handler.vm_stats_collector() {
            return Err(Status::unknown(crate::vmstats::NOT_ENABLED));
        }
        let req = r.into_inner();
        let mut resp = VmStatsResponse {
            response: Some(ok()),
            ..Default::default()
        };
        let mut errs = Vec::new();
        if req.domain_stats.is_some() {
            let d = self.domain_stats().await;
            if let Some(r) = d.response.as_ref().filter(|r| !r.success) {
                errs.push(format!("domain stats: {}", r.message));
            }
            resp.domain_stats = Some(d);
        }
        if req.dirty_rate.is_some() {
            let d = self.dirty_rate().await;
            if let Some(r) = d.response.as_ref().filter(|r| !r.success) {
                errs.push(format!("dirty rate stats: {}", r.message));
            }
            resp.dirty_rate_stats = Some(d);
        }
        let commands = crate::vmstats::requested_agent_commands(&req);
        if !commands.is_empty() {
            resp.guest_agent_version = Some(Response {
                success: true,
                message: self.handler.guest_agent_version(),
            });
            let h = Arc::clone(&self.handler);
            let res = tokio::task::spawn_blocking(move || {
                let errs = crate::vmstats::agent_items(&mut resp, &commands, |c| {
                    h.agent_data(c).map_err(|e| e.to_string())
                });
                (resp, errs)
            })
            .await;
            match res {
                Ok((r, e)) => {
                    resp = r;
                    errs.extend(e);
                }
                Err(e) => return Err(Status::internal(e.to_string())),
            }
        }
        if !errs.is_empty() {
            resp.response = Some(Response {
                success: false,
                message: errs.join("; "),
            });
        }
        reply(resp)
    }
}

/// `kubevirt.cmd.info.CmdInfo`: the supported versions.
#[derive(Clone, Copy, Debug, Default)]
pub struct InfoService;

#[tonic::async_trait]
impl CmdInfo for InfoService {
    async fn info(&self, _r: Request<CmdInfoRequest>) -> R<CmdInfoResponse> {
        reply(CmdInfoResponse {
            supported_cmd_versions: SUPPORTED_CMD_VERSIONS.to_vec(),
        })
    }
}

/// `<share>/sockets/launcher-init-sock`: where the server listens first.
pub fn init_socket(share_dir: &Path) -> PathBuf {
    share_dir.join("sockets/launcher-init-sock")
}

/// `<share>/sockets/launcher-sock`: the same socket once ready.
pub fn ready_socket(share_dir: &Path) -> PathBuf {
    share_dir.join("sockets/launcher-sock")
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Socket creation failed.
    #[error("command socket {path}: {source}")]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Binds the command socket at [`init_socket`] (replacing a stale one;
/// mode 0755 as Go's listener leaves it under the usual umask) and serves
/// until `shutdown` resolves. Call [`mark_ready`] once the launcher is ready.
///
/// # Errors
/// [`ServerError`] when the socket cannot be created.
/// Every connection is tracked by `spinner`: call its
/// [`crate::spin::Spinner::park`] from the runtime's `on_thread_park` to
/// answer back-to-back requests without a thread wake-up.
pub async fn serve<H: Handler>(
    share_dir: &Path,
    handler: Arc<H>,
    spinner: Arc<crate::spin::Spinner>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<tokio::task::JoinHandle<()>, ServerError> {
    let path = init_socket(share_dir);
    let err = |source| ServerError::Socket {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(err)?;
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(err)?;
    let cmd = CmdServer::new(CmdService::new(handler))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let info = CmdInfoServer::new(InfoService);
    let incoming = tokio_stream::StreamExt::map(UnixListenerStream::new(listener), move |c| {
        c.map(|s| spinner.track(s))
    });
    Ok(tokio::spawn(async move {
        let res = tonic::transport::Server::builder()
            .add_service(info)
            .add_service(cmd)
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await;
        if let Err(e) = res {
            tracing::error!("command server: {e}");
        }
    }))
}

/// Renames `launcher-init-sock` to `launcher-sock`: virt-handler treats
/// the latter's existence as "launcher ready" (KubeVirt markReady).
///
/// # Errors
/// The rename error.
pub fn mark_ready(share_dir: &Path) -> std::io::Result<()> {
    std::fs::rename(init_socket(share_dir), ready_socket(share_dir))
}
