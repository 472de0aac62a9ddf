//! The command server virt-handler drives (KubeVirt
//! `pkg/virt-launcher/virtwrap/cmd-server/server.go`, v1.6.6).
//!
//! gRPC over the Unix socket `<share>/sockets/launcher-init-sock`, renamed
//! to `launcher-sock` once the launcher is ready ([`mark_ready`]); no TCP.
//! Every method of `kubevirt.cmd.v1.Cmd` answers: the ones whose feature
//! exists call the [`Handler`]; the rest answer `success=false` with
//! "not supported yet: <feature>" — never a silent success. Errors travel in
//! the `Response` (gRPC status OK), as KubeVirt's server does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use api::VirtualMachineInstance;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response as TonicResponse, Status};

use crate::proto::cmd::cmd_server::{Cmd, CmdServer};
use crate::proto::cmd::{
    DirtyRateStatsResponse, DomainResponse, DomainStatsResponse, EmptyRequest, ExecRequest,
    ExecResponse, FreezeRequest, GuestFilesystemsResponse, GuestInfoResponse, GuestPingRequest,
    GuestPingResponse, GuestUserListResponse, InjectLaunchSecretRequest, LaunchMeasurementResponse,
    MemoryDumpRequest, MigrationRequest, QemuVersionResponse, Response, SevInfoResponse,
    VmiRequest,
};
use crate::proto::cmd_info::cmd_info_server::{CmdInfo, CmdInfoServer};
use crate::proto::cmd_info::{CmdInfoRequest, CmdInfoResponse};

/// The command protocol versions this server speaks.
pub const SUPPORTED_CMD_VERSIONS: [u32; 1] = [1];
/// Largest request accepted (a VMI JSON is a few KiB; gRPC's default is 4 MiB).
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// KubeVirt's message for a request whose VMI does not decode.
pub const NO_VALID_VMI: &str = "No valid vmi object present in command server request";
/// KubeVirt's exact message virt-handler matches when cancelling a
/// migration that is not running.
pub const NOT_MIGRATING: &str = "failed to cancel migration - vmi is not migrating";

/// Settings virt-handler sends with SyncVirtualMachine
/// (`VirtualMachineOptions`), the parts the launcher uses today.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// SMBIOS system fields (manufacturer, family, product, sku, version).
    pub smbios: Option<[String; 5]>,
    /// Balloon statistics period in seconds.
    pub mem_balloon_stats_period: u32,
    /// Volumes that are preallocated (no discard).
    pub preallocated_volumes: Vec<String>,
    /// Cluster: free page reporting disabled.
    pub free_page_reporting_disabled: bool,
    /// Cluster: serial console log disabled.
    pub serial_console_log_disabled: bool,
}

/// What the server asks of the launcher. Errors are the message virt-handler
/// sees in `Response.message` (libvirt's as `LibvirtError(Code=..,
/// Domain=.., Message='..')`). Methods block; the server calls them on
/// tokio's blocking pool.
pub trait Handler: Send + Sync + 'static {
    /// UID of the VMI this launcher runs (requests for another are refused).
    fn vmi_uid(&self) -> String;
    /// SyncVMI: prepare, convert, define, start (idempotent).
    ///
    /// # Errors
    /// The failure message.
    fn sync(&self, vmi: &VirtualMachineInstance, opts: &SyncOptions) -> Result<(), String>;
    /// Pause.
    ///
    /// # Errors
    /// The failure message.
    fn pause(&self, vmi: &VirtualMachineInstance) -> Result<(), String>;
    /// Unpause.
    ///
    /// # Errors
    /// The failure message.
    fn unpause(&self, vmi: &VirtualMachineInstance) -> Result<(), String>;
    /// Hard reset.
    ///
    /// # Errors
    /// The failure message.
    fn reset(&self, vmi: &VirtualMachineInstance) -> Result<(), String>;
    /// Guest-cooperative reboot (ACPI until the guest agent is used).
    ///
    /// # Errors
    /// The failure message.
    fn soft_reboot(&self, vmi: &VirtualMachineInstance) -> Result<(), String>;
    /// Graceful shutdown request (SignalShutdownVMI).
    ///
    /// # Errors
    /// The failure message.
    fn shutdown(&self, vmi: &VirtualMachineInstance) -> Result<(), String>;
    /// Immediate power-off.
    ///
    /// # Errors
    /// The failure message.
    fn kill(&self, vmi: &VirtualMachineInstance) -> Result<(), String>;
    /// Undefine.
    ///
    /// # Errors
    /// The failure message.
    fn delete(&self, vmi: &VirtualMachineInstance) -> Result<(), String>;
    /// The domain as KubeVirt's api.Domain JSON, `None` when there is none.
    ///
    /// # Errors
    /// The failure message.
    fn domain_json(&self) -> Result<Option<String>, String>;
    /// [`Handler::domain_json`] when it can be answered without blocking
    /// (from memory); `None` sends GetDomain to [`Handler::domain_json`]
    /// on a blocking thread.
    fn cached_domain_json(&self) -> Option<Option<String>> {
        None
    }
    /// KubeVirt's DomainStats JSON, `None` when no domain runs.
    ///
    /// # Errors
    /// The failure message.
    fn domain_stats_json(&self) -> Result<Option<String>, String>;
    /// `QEMU <major>.<minor>.<micro>`.
    ///
    /// # Errors
    /// The failure message.
    fn qemu_version(&self) -> Result<String, String>;
}

fn ok() -> Response {
    Response {
        success: true,
        message: String::new(),
    }
}

fn fail(message: impl Into<String>) -> Response {
    Response {
        success: false,
        message: message.into(),
    }
}

fn unsupported(feature: &str) -> Response {
    fail(format!("not supported yet: {feature}"))
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

    /// Decodes the VMI of a request and checks it is this launcher's.
    fn vmi(&self, json: Option<&[u8]>) -> Result<VirtualMachineInstance, Response> {
        let json = json.ok_or_else(|| fail(NO_VALID_VMI))?;
        let vmi = api::load::from_slice(json).map_err(|e| fail(format!("{NO_VALID_VMI}: {e}")))?;
        let mine = self.handler.vmi_uid();
        if !mine.is_empty() && vmi.uid() != mine {
            return Err(fail(format!(
                "VMI {}/{} with UID {:?} is not the VMI this launcher runs (UID {mine:?})",
                vmi.namespace(),
                vmi.metadata.name,
                vmi.uid()
            )));
        }
        Ok(vmi)
    }

    /// Runs a blocking handler call for the VMI of `req`.
    async fn with_vmi<F>(&self, req: &VmiRequest, f: F) -> Response
    where
        F: FnOnce(&H, &VirtualMachineInstance) -> Result<(), String> + Send + 'static,
    {
        let vmi = match self.vmi(req.vmi.as_ref().map(|v| v.vmi_json.as_slice())) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let h = Arc::clone(&self.handler);
        match tokio::task::spawn_blocking(move || f(&h, &vmi)).await {
            Ok(Ok(())) => ok(),
            Ok(Err(m)) => fail(m),
            Err(e) => fail(format!("internal error: {e}")),
        }
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
    }
}

type R<T> = Result<TonicResponse<T>, Status>;

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
    async fn freeze_virtual_machine(&self, _r: Request<FreezeRequest>) -> R<Response> {
        reply(unsupported("file system freeze (guest agent)"))
    }
    async fn unfreeze_virtual_machine(&self, _r: Request<VmiRequest>) -> R<Response> {
        reply(unsupported("file system thaw (guest agent)"))
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
        if let Err(resp) = self.vmi(req.vmi.as_ref().map(|v| v.vmi_json.as_slice())) {
            return reply(resp);
        }
        if req.options.is_empty() {
            return reply(fail(
                "migration options object not present in command server request",
            ));
        }
        reply(unsupported("live migration"))
    }
    async fn sync_migration_target(&self, _r: Request<VmiRequest>) -> R<Response> {
        reply(unsupported("live migration (target)"))
    }
    async fn cancel_virtual_machine_migration(&self, _r: Request<VmiRequest>) -> R<Response> {
        // Nothing ever migrates yet: the answer KubeVirt gives then.
        reply(fail(NOT_MIGRATING))
    }
    async fn signal_target_pod_cleanup(&self, _r: Request<VmiRequest>) -> R<Response> {
        // KubeVirt always succeeds; this launcher is never a migration target yet.
        reply(ok())
    }
    async fn finalize_virtual_machine_migration(&self, _r: Request<VmiRequest>) -> R<Response> {
        reply(unsupported("live migration (finalize)"))
    }
    async fn hotplug_host_devices(&self, _r: Request<VmiRequest>) -> R<Response> {
        reply(unsupported("host device hot-plug"))
    }
    async fn get_domain(&self, _r: Request<EmptyRequest>) -> R<DomainResponse> {
        let h = Arc::clone(&self.handler);
        let res = match h.cached_domain_json() {
            Some(d) => Ok(Ok(d)),
            None => tokio::task::spawn_blocking(move || h.domain_json()).await,
        };
        reply(match res {
            Ok(Ok(d)) => DomainResponse {
                response: Some(ok()),
                domain: d.unwrap_or_default(),
            },
            Ok(Err(m)) => DomainResponse {
                response: Some(fail(m)),
                domain: String::new(),
            },
            Err(e) => DomainResponse {
                response: Some(fail(format!("internal error: {e}"))),
                domain: String::new(),
            },
        })
    }
    async fn get_domain_stats(&self, _r: Request<EmptyRequest>) -> R<DomainStatsResponse> {
        let h = Arc::clone(&self.handler);
        let res = tokio::task::spawn_blocking(move || h.domain_stats_json()).await;
        reply(match res {
            Ok(Ok(s)) => DomainStatsResponse {
                response: Some(ok()),
                domain_stats: s.unwrap_or_else(|| "null".into()),
            },
            Ok(Err(m)) => DomainStatsResponse {
                response: Some(fail(m)),
                domain_stats: String::new(),
            },
            Err(e) => DomainStatsResponse {
                response: Some(fail(format!("internal error: {e}"))),
                domain_stats: String::new(),
            },
        })
    }
    async fn get_guest_info(&self, _r: Request<EmptyRequest>) -> R<GuestInfoResponse> {
        reply(GuestInfoResponse {
            response: Some(unsupported("guest agent information")),
            guest_info_response: String::new(),
        })
    }
    async fn get_users(&self, _r: Request<EmptyRequest>) -> R<GuestUserListResponse> {
        reply(GuestUserListResponse {
            response: Some(unsupported("guest agent users")),
            guest_user_list_response: String::new(),
        })
    }
    async fn get_filesystems(&self, _r: Request<EmptyRequest>) -> R<GuestFilesystemsResponse> {
        reply(GuestFilesystemsResponse {
            response: Some(unsupported("guest agent file systems")),
            guest_filesystems_response: String::new(),
        })
    }
    async fn ping(&self, _r: Request<EmptyRequest>) -> R<Response> {
        reply(ok())
    }
    async fn exec(&self, _r: Request<ExecRequest>) -> R<ExecResponse> {
        reply(ExecResponse {
            response: Some(unsupported("guest exec (guest agent)")),
            exit_code: -1,
            std_out: String::new(),
        })
    }
    async fn guest_ping(&self, _r: Request<GuestPingRequest>) -> R<GuestPingResponse> {
        reply(GuestPingResponse {
            response: Some(unsupported("guest ping (guest agent)")),
        })
    }
    async fn virtual_machine_memory_dump(&self, _r: Request<MemoryDumpRequest>) -> R<Response> {
        reply(unsupported("memory dump"))
    }
    async fn get_qemu_version(&self, _r: Request<EmptyRequest>) -> R<QemuVersionResponse> {
        let h = Arc::clone(&self.handler);
        let res = tokio::task::spawn_blocking(move || h.qemu_version()).await;
        reply(match res {
            Ok(Ok(v)) => QemuVersionResponse {
                response: Some(ok()),
                version: v,
            },
            Ok(Err(m)) => QemuVersionResponse {
                response: Some(fail(m)),
                version: String::new(),
            },
            Err(e) => QemuVersionResponse {
                response: Some(fail(format!("internal error: {e}"))),
                version: String::new(),
            },
        })
    }
    async fn sync_virtual_machine_cp_us(&self, _r: Request<VmiRequest>) -> R<Response> {
        reply(unsupported("CPU hot-plug"))
    }
    async fn sync_virtual_machine_memory(&self, _r: Request<VmiRequest>) -> R<Response> {
        reply(unsupported("memory hot-plug"))
    }
    async fn get_sev_info(&self, _r: Request<EmptyRequest>) -> R<SevInfoResponse> {
        reply(SevInfoResponse {
            response: Some(unsupported("SEV")),
            sev_info: Vec::new(),
        })
    }
    async fn get_launch_measurement(
        &self,
        _r: Request<VmiRequest>,
    ) -> R<LaunchMeasurementResponse> {
        reply(LaunchMeasurementResponse {
            response: Some(unsupported("SEV launch measurement")),
            launch_measurement: Vec::new(),
        })
    }
    async fn inject_launch_secret(&self, _r: Request<InjectLaunchSecretRequest>) -> R<Response> {
        reply(unsupported("SEV launch secret"))
    }
    async fn get_domain_dirty_rate_stats(
        &self,
        _r: Request<EmptyRequest>,
    ) -> R<DirtyRateStatsResponse> {
        reply(DirtyRateStatsResponse {
            response: Some(unsupported("dirty rate statistics")),
            dirty_rate_mbs: 0,
        })
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
