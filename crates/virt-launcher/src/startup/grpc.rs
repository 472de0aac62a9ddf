//! The command server's runtime: a thread of its own driving a
//! current-thread tokio runtime for the gRPC server and the notify queue.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::LauncherError;
use crate::handler::LauncherHandler;
use crate::pod::Mode;

/// The command server's runtime: one thread driving a current-thread
/// tokio runtime (the server, the notify queue), a handle to reach it.
pub(crate) struct Grpc {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub(crate) notifier: cmd::notify::Notifier,
    share: PathBuf,
}

impl Grpc {
    /// Starts the notify queue (virt-handler's notify socket in a pod;
    /// standalone, its absence is expected) and the command server on
    /// `<share>/sockets/launcher-init-sock` answering with the handler
    /// `handler` makes for that queue, then checks it answers (dial,
    /// CmdInfo, Ping: KubeVirt's self-check).
    pub(crate) fn start(
        share: &Path,
        mode: Mode,
        handler: impl FnOnce(cmd::notify::Notifier) -> LauncherHandler,
    ) -> Result<Grpc, LauncherError> {
        // Poll virt-handler's connection briefly before sleeping, as Go's
        // runtime does (cmd::spin): back-to-back calls skip a wake-up.
        let spinner = cmd::spin::Spinner::new();
        let parked = Arc::clone(&spinner);
        // Named blocking threads (libvirt calls, SyncVMI, decoding: see
        // `cmd::server`); they keep std's 2 MiB stacks: they convert VMIs
        // and decode virt-handler's JSON, recursive work bounded by depth
        // limits, not by a stack measured here. Idle ones end after
        // tokio's 10 s.
        let rt = tokio::runtime::Builder::new_current_thread()
            .thread_name("grpc-blocking")
            .enable_all()
            .on_thread_park(move || {
                // virt-handler's requests just came (the spinner saw
                // traffic): a burst of work whose memory a release takes
                // back once the launcher is quiet (`footprint`).
                if parked.park() != cmd::spin::Spun::Idle {
                    crate::footprint::activity();
                }
            })
            .build()
            .map_err(|e| LauncherError::runtime(format!("cannot start the gRPC runtime: {e}")))?;
        let handle = rt.handle().clone();
        let notifier = {
            let _guard = rt.enter();
            match mode {
                Mode::Standalone => cmd::notify::Notifier::start_standalone(share),
                Mode::Pod => cmd::notify::Notifier::start(share),
            }
        };
        let handler = Arc::new(handler(notifier.clone()));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = rt
            .block_on(cmd::server::serve(share, handler, spinner, async move {
                let _ = stop_rx.await;
            }))
            .map_err(|e| LauncherError::runtime(e.to_string()))?;
        // std's 2 MiB stack limit stays: tokio polls the server's futures
        // (tonic, h2, prost decoding of virt-handler's messages) on this
        // stack, whose size the launcher does not control; 36 KiB of it are
        // resident in a running launcher.
        let thread = std::thread::Builder::new()
            .name("grpc".into())
            .spawn(move || {
                rt.block_on(async move {
                    let _ = server.await;
                });
            })
            .map_err(|e| LauncherError::runtime(format!("cannot start the gRPC thread: {e}")))?;
        let g = Grpc {
            handle,
            stop: Some(stop_tx),
            thread: Some(thread),
            notifier,
            share: share.to_owned(),
        };
        let sock = cmd::server::init_socket(share);
        g.handle
            .block_on(async {
                let mut c = cmd::client::Client::connect(&sock)
                    .await
                    .map_err(|e| e.to_string())?;
                c.cmd
                    .ping(cmd::proto::cmd::EmptyRequest {})
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            })
            .map_err(|e| LauncherError::runtime(format!("failed to connect to cmd server: {e}")))?;
        Ok(g)
    }

    /// Waits for queued notifications to reach virt-handler (when its
    /// socket exists at all), then stops the server. The renamed
    /// `launcher-sock` stays, as KubeVirt leaves it; the init path goes.
    pub(crate) fn stop(&mut self) {
        let notify_sock = ["domain-notify-pipe.sock", "domain-notify.sock"]
            .iter()
            .any(|s| self.share.join(s).exists());
        if notify_sock
            && !self
                .handle
                .block_on(self.notifier.flush(FINAL_NOTIFY_TIMEOUT))
        {
            tracing::warn!(
                pending = self.notifier.pending(),
                "virt-handler did not take every notification"
            );
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(cmd::server::init_socket(&self.share));
    }
}

/// How long the final notification may take (KubeVirt waits 15 s).
const FINAL_NOTIFY_TIMEOUT: Duration = Duration::from_secs(15);
