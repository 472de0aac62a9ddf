//! A client for the launcher's command socket (and a dialer for Unix
//! sockets that the notify client shares): what `virt-launcher ctl` and the
//! tests use. KubeVirt dials with a 2 s connect deadline.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tower::service_fn;

pub use tonic::Status;

use crate::proto::cmd::cmd_client::CmdClient;
use crate::proto::cmd_info::cmd_info_client::CmdInfoClient;
use crate::proto::cmd_info::CmdInfoRequest;

/// A failed call's status in one readable line: its message and what its
/// code means (`Timeout expired (The operation was cancelled)`), without
/// tonic's debug rendering of the source and metadata.
pub fn status_line(s: &tonic::Status) -> String {
    let what = s.code().description();
    match s.message().trim() {
        "" => what.to_owned(),
        m => format!("{} ({what})", m.lines().next().unwrap_or(m)),
    }
}

/// KubeVirt's connect deadline for the launcher's sockets.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A gRPC channel over the Unix socket at `path` (the URI is a placeholder
/// gRPC requires; nothing listens on TCP).
///
/// # Errors
/// The transport error (no socket, refused, timeout).
pub async fn unix_channel(path: &Path) -> Result<Channel, tonic::transport::Error> {
    unix_channel_tracked(path, crate::spin::Spinner::new()).await
}

/// [`unix_channel`] whose connection `spinner` tracks (see [`crate::spin`]).
///
/// # Errors
/// The transport error (no socket, refused, timeout).
pub async fn unix_channel_tracked(
    path: &Path,
    spinner: std::sync::Arc<crate::spin::Spinner>,
) -> Result<Channel, tonic::transport::Error> {
    unix_channel_with(path, spinner, None).await
}

/// [`unix_channel_tracked`]; with `request_timeout`, every request on the
/// channel fails (tonic's `Cancelled`, `Timeout expired`) when its answer
/// takes longer (a
/// server that accepts but never answers cannot hold the caller).
///
/// # Errors
/// The transport error (no socket, refused, timeout).
pub async fn unix_channel_with(
    path: &Path,
    spinner: std::sync::Arc<crate::spin::Spinner>,
    request_timeout: Option<Duration>,
) -> Result<Channel, tonic::transport::Error> {
    let path: PathBuf = path.to_owned();
    let mut endpoint = Endpoint::from_static("http://localhost").connect_timeout(CONNECT_TIMEOUT);
    if let Some(t) = request_timeout {
        endpoint = endpoint.timeout(t);
    }
    endpoint
        .connect_with_connector(service_fn(move |_: Uri| {
            let path = path.clone();
            let spinner = std::sync::Arc::clone(&spinner);
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(spinner.track(connect_unix(&path).await?)))
            }
        }))
        .await
}

/// Longest Unix socket path `connect(2)` takes (`sun_path` is 108 bytes
/// with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Connects to the Unix socket at `path`, also when the path is longer
/// than [`MAX_SOCKET_PATH`] (a launcher's state directory named after a long
/// `<namespace>_<name>`): the socket's directory is opened and the socket
/// reached as `/proc/self/fd/<fd>/<name>`, which is short.
///
/// # Errors
/// The error of opening the directory or of connecting.
pub async fn connect_unix(path: &Path) -> std::io::Result<UnixStream> {
    use std::os::unix::ffi::OsStrExt;
    if path.as_os_str().as_bytes().len() <= MAX_SOCKET_PATH {
        return UnixStream::connect(path).await;
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return UnixStream::connect(path).await;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    // Held open until the connection is made.
    let handle = std::fs::File::open(dir)?;
    let short = Path::new("/proc/self/fd")
        .join(std::os::fd::AsRawFd::as_raw_fd(&handle).to_string())
        .join(name);
    let stream = UnixStream::connect(&short).await;
    drop(handle);
    stream
}

/// The innermost error of `e`'s source chain, as text: what went wrong at
/// the bottom (tonic's transport errors say only "transport error").
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// A connected command client, its protocol version checked.
pub struct Client {
    /// `kubevirt.cmd.v1.Cmd`.
    pub cmd: CmdChannel,
}

/// The `kubevirt.cmd.v1.Cmd` client on a launcher's socket.
pub type CmdChannel = CmdClient<Channel>;

/// Why a client could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting failed (shown with the underlying cause, e.g. `No such
    /// file or directory`, not tonic's bare "transport error").
    #[error("cannot connect to {}: {}", .0.display(), root_cause(.1))]
    Connect(PathBuf, tonic::transport::Error),
    /// The version negotiation failed.
    #[error("version negotiation with {} failed: {}", .0.display(), status_line(.1))]
    Info(PathBuf, tonic::Status),
    /// No common version.
    #[error("no compatible version found, server: {server:?}, client: [1]")]
    Version {
        /// Versions the server offered.
        server: Vec<u32>,
    },
}

impl Client {
    /// Connects to the command socket at `path` and checks it speaks v1.
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn connect(path: &Path) -> Result<Client, ClientError> {
        Self::connect_tracked(path, crate::spin::Spinner::new()).await
    }

    /// [`Client::connect`] with the connection tracked by `spinner`
    /// (see [`crate::spin`]).
    ///
    /// # Errors
    /// [`ClientError`].
    pub async fn connect_tracked(
        path: &Path,
        spinner: std::sync::Arc<crate::spin::Spinner>,
    ) -> Result<Client, ClientError> {
        Self::connect_with(path, spinner, None).await
    }

    /// [`Client::connect`] whose every request, the version negotiation
    /// included, fails after `request_timeout` (KubeVirt's cmd-client bounds
    /// each call too: 5 s for reads, 20 s for commands).
    ///
    /// # Errors
    /// [`ClientError`]; a request that timed out fails with tonic's
    /// `Cancelled` status, message `Timeout expired`.
    pub async fn connect_with_timeout(
        path: &Path,
        request_timeout: Duration,
    ) -> Result<Client, ClientError> {
        Self::connect_with(path, crate::spin::Spinner::new(), Some(request_timeout)).await
    }

    async fn connect_with(
        path: &Path,
        spinner: std::sync::Arc<crate::spin::Spinner>,
        request_timeout: Option<Duration>,
    ) -> Result<Client, ClientError> {
        let ch = unix_channel_with(path, spinner, request_timeout)
            .await
            .map_err(|e| ClientError::Connect(path.to_owned(), e))?;
        let info = CmdInfoClient::new(ch.clone())
            .info(CmdInfoRequest {})
            .await
            .map_err(|e| ClientError::Info(path.to_owned(), e))?
            .into_inner();
        if !info.supported_cmd_versions.contains(&1) {
            return Err(ClientError::Version {
                server: info.supported_cmd_versions,
            });
        }
        Ok(Client {
            cmd: CmdClient::new(ch),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_in_one_line() {
        let s = tonic::Status::cancelled("Timeout expired");
        assert_eq!(
            status_line(&s),
            "Timeout expired (The operation was cancelled)"
        );
        let s = tonic::Status::unavailable("");
        assert_eq!(status_line(&s), "The service is currently unavailable");
        let s = tonic::Status::unknown("first\nsecond");
        assert_eq!(status_line(&s), "first (Unknown error)");
    }

    /// A socket that accepts connections but never answers (a stuck
    /// launcher, a wrong socket) fails the request instead of holding the
    /// caller forever.
    #[tokio::test]
    async fn a_server_that_never_answers_fails_the_request_after_the_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("mute.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let _accepted = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        let err = Client::connect_with_timeout(&path, Duration::from_millis(300))
            .await
            .err()
            .expect("a mute server must not give a client");
        match err {
            ClientError::Info(_, status) => {
                // tonic's client-side deadline: Cancelled, "Timeout expired".
                assert_eq!(status.code(), tonic::Code::Cancelled, "{status}");
                assert_eq!(status.message(), "Timeout expired", "{status}");
            }
            other => panic!("expected the version negotiation to time out, got {other}"),
        }
    }

    /// A socket whose path is longer than `sun_path` (a state directory
    /// named after a long VMI name) is still reached.
    #[tokio::test]
    async fn a_socket_path_over_107_bytes_is_reached_through_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("d".repeat(120)).join("sockets");
        std::fs::create_dir_all(&deep).unwrap();
        let path = deep.join("launcher-sock");
        assert!(path.as_os_str().len() > MAX_SOCKET_PATH);
        // Bound the same way: through the directory's descriptor.
        let dir = std::fs::File::open(&deep).unwrap();
        let short = format!(
            "/proc/self/fd/{}/launcher-sock",
            std::os::fd::AsRawFd::as_raw_fd(&dir)
        );
        let listener = tokio::net::UnixListener::bind(&short).unwrap();
        drop(dir);
        assert!(UnixStream::connect(&path).await.is_err());
        let (client, server) = tokio::join!(connect_unix(&path), listener.accept());
        client.unwrap();
        server.unwrap();
        // A missing socket is the connect error, not a panic.
        let missing = deep.join("none");
        let e = connect_unix(&missing).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    }
}
