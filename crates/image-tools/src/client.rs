//! The calls `virt-freezer` and `virt-probe` make on the launcher's command
//! socket, with KubeVirt's cmd-client timeouts and error texts (v1.6.6
//! `pkg/virt-handler/cmd-client/client.go`: 5 s for a short call, 60 s
//! for Freeze, the guest's timeout plus 5 s for Exec and GuestPing;
//! `handleError`'s `server error. command <Name> failed: "<message>"`).

use std::path::Path;
use std::time::Duration;

use cmd::client::CmdChannel;
use cmd::proto::cmd::{
    EmptyRequest, ExecRequest, FreezeRequest, GuestPingRequest, Response, Vmi, VmiRequest,
};
use serde_json::Value;

/// cmd-client's `shortTimeout`.
pub const SHORT_TIMEOUT: Duration = Duration::from_secs(5);
/// cmd-client's `extendedTimeout` (Freeze: Windows VSS takes up to 60 s).
pub const EXTENDED_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a call of `virt-freezer` or `virt-probe` failed; each shows as
/// cmd-client's text for it (the programs print it as it is).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The client could not be made: the runtime, the connection or its
    /// version check (`could not check cmd server version: <socket>`).
    #[error("{0}")]
    Setup(String),
    /// A call's gRPC status, as Go's grpc shows it (`rpc error: code = ...
    /// desc = ...`).
    #[error("{0}")]
    Status(String),
    /// `handleError` for a call that got no answer.
    #[error("unknown error encountered sending command {name}: {cause}")]
    Call {
        /// The command (`GetDomain`).
        name: &'static str,
        /// Why ([`ClientError::Status`]'s text).
        cause: String,
    },
    /// `handleError` for a `Response` that says no.
    #[error("server error. command {name} failed: {message:?}")]
    Refused {
        /// The command.
        name: &'static str,
        /// The launcher's message.
        message: String,
    },
    /// GuestPing's `Response` saying no: its message as it is.
    #[error("{0}")]
    Guest(String),
    /// An answer's JSON does not decode.
    #[error("{0}")]
    Decode(String),
}

/// A connected client and the runtime it runs on (one thread).
pub struct Launcher {
    rt: tokio::runtime::Runtime,
    c: CmdChannel,
}

/// `handleError`: a call that failed, or a `Response` that says so.
fn handle(
    name: &'static str,
    call: Result<Option<Response>, ClientError>,
) -> Result<(), ClientError> {
    match call {
        Err(e) => Err(call_failed(name, e)),
        Ok(Some(r)) if !r.success => Err(ClientError::Refused {
            name,
            message: r.message,
        }),
        Ok(_) => Ok(()),
    }
}

/// `handleError`'s text for a call that got no answer.
fn call_failed(name: &'static str, e: ClientError) -> ClientError {
    ClientError::Call {
        name,
        cause: e.to_string(),
    }
}

/// A request with a deadline, its status as text.
async fn timed<T>(
    d: Duration,
    f: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, ClientError> {
    match tokio::time::timeout(d, f).await {
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(ClientError::Status(format!(
            "rpc error: code = {:?} desc = {}",
            s.code(),
            s.message()
        ))),
        Err(_) => Err(ClientError::Status(
            "rpc error: code = DeadlineExceeded desc = context deadline exceeded".into(),
        )),
    }
}

/// Go's `json.Marshal` of a VMI with only a name and namespace set, as
/// virt-freezer builds it.
pub fn named_vmi_json(name: &str, namespace: &str) -> Vec<u8> {
    serde_json::json!({
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
        "spec": {"domain": {"resources": {}, "devices": {}}},
        "status": {}
    })
    .to_string()
    .into_bytes()
}

impl Launcher {
    /// Connects to the command socket at `socket` and checks its version.
    ///
    /// # Errors
    /// The connection or the version check failed (one line).
    pub fn connect(socket: &Path) -> Result<Launcher, ClientError> {
        let setup = |e: String| ClientError::Setup(e);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| setup(e.to_string()))?;
        let c = rt
            .block_on(async {
                tokio::time::timeout(SHORT_TIMEOUT, cmd::client::Client::connect(socket)).await
            })
            .map_err(|_| {
                setup(format!(
                    "could not check cmd server version: {}",
                    socket.display()
                ))
            })?
            .map_err(|e| setup(e.to_string()))?
            .cmd;
        Ok(Launcher { rt, c })
    }

    /// GetGuestInfo's JSON (`guestAgentVersion`, `os.name`, ...); `{}` when
    /// the launcher sent none.
    ///
    /// # Errors
    /// [`handle`]'s text, or JSON that does not decode.
    pub fn guest_info(&mut self) -> Result<Value, ClientError> {
        let c = &mut self.c;
        let r = self
            .rt
            .block_on(timed(SHORT_TIMEOUT, c.get_guest_info(EmptyRequest {})))
            .map_err(|e| call_failed("GetGuestInfo", e))?;
        handle("GetGuestInfo", Ok(r.response.clone()))?;
        if r.guest_info_response.is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        serde_json::from_str(&r.guest_info_response).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// GetDomain's domain, `None` when there is none.
    ///
    /// # Errors
    /// [`handle`]'s text, or JSON that does not decode.
    pub fn domain(&mut self) -> Result<Option<Value>, ClientError> {
        let c = &mut self.c;
        let r = self
            .rt
            .block_on(timed(SHORT_TIMEOUT, c.get_domain(EmptyRequest {})))
            .map_err(|e| call_failed("GetDomain", e))?;
        handle("GetDomain", Ok(r.response.clone()))?;
        if r.domain.is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&r.domain)
            .map(Some)
            .map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// FreezeVirtualMachine for `vmi_json`.
    ///
    /// # Errors
    /// [`handle`]'s text.
    pub fn freeze(
        &mut self,
        vmi_json: Vec<u8>,
        unfreeze_timeout_seconds: i32,
    ) -> Result<(), ClientError> {
        let c = &mut self.c;
        let r = self.rt.block_on(timed(
            EXTENDED_TIMEOUT,
            c.freeze_virtual_machine(FreezeRequest {
                vmi: Some(Vmi { vmi_json }),
                unfreeze_timeout_seconds,
            }),
        ));
        handle("Freeze", r.map(Some))
    }

    /// UnfreezeVirtualMachine for `vmi_json` (cmd-client's generic VMI
    /// command: 20 s).
    ///
    /// # Errors
    /// [`handle`]'s text.
    pub fn unfreeze(&mut self, vmi_json: Vec<u8>) -> Result<(), ClientError> {
        let c = &mut self.c;
        let r = self.rt.block_on(timed(
            Duration::from_secs(20),
            c.unfreeze_virtual_machine(VmiRequest {
                vmi: Some(Vmi { vmi_json }),
                options: Some(Default::default()),
            }),
        ));
        handle("Unfreeze", r.map(Some))
    }

    /// GuestPing of `domain` with the guest's `timeout_seconds`.
    ///
    /// # Errors
    /// The call's status (cmd-client hands it on as it is).
    pub fn guest_ping(&mut self, domain: &str, timeout_seconds: i32) -> Result<(), ClientError> {
        let c = &mut self.c;
        let d = guest_deadline(timeout_seconds);
        let r = self.rt.block_on(timed(
            d,
            c.guest_ping(GuestPingRequest {
                domain_name: domain.to_owned(),
                timeout_seconds,
            }),
        ))?;
        // The launcher answers a failed ping with an error status; a
        // Response saying no counts the same.
        match r.response {
            Some(resp) if !resp.success => Err(ClientError::Guest(resp.message)),
            _ => Ok(()),
        }
    }

    /// Exec of `command args` in `domain`: the exit code and standard
    /// output, or the call's error (exit code -1, as cmd-client returns
    /// when there is no response).
    pub fn exec(
        &mut self,
        domain: &str,
        command: &str,
        args: &[String],
        timeout_seconds: i32,
    ) -> (i32, String, Option<String>) {
        let c = &mut self.c;
        let r = self.rt.block_on(timed(
            guest_deadline(timeout_seconds),
            c.exec(ExecRequest {
                domain_name: domain.to_owned(),
                command: command.to_owned(),
                args: args.to_vec(),
                timeout_seconds,
            }),
        ));
        match r {
            Ok(r) => {
                let err = r
                    .response
                    .filter(|resp| !resp.success)
                    .map(|resp| resp.message);
                (r.exit_code, r.std_out, err)
            }
            Err(e) => (-1, String::new(), Some(e.to_string())),
        }
    }
}

/// The deadline of a guest call: its timeout plus cmd-client's short one.
fn guest_deadline(timeout_seconds: i32) -> Duration {
    Duration::from_secs(u64::try_from(timeout_seconds).unwrap_or(0)) + SHORT_TIMEOUT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_cmd_clients() {
        let e = handle(
            "Freeze",
            Ok(Some(Response {
                success: false,
                message: "Guest agent not available for now".into(),
            })),
        )
        .unwrap_err();
        assert!(matches!(e, ClientError::Refused { name: "Freeze", .. }));
        assert_eq!(
            e.to_string(),
            "server error. command Freeze failed: \"Guest agent not available for now\""
        );
        let e = handle("GetDomain", Err(ClientError::Status("rpc error".into()))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown error encountered sending command GetDomain: rpc error"
        );
        assert!(handle("GetDomain", Ok(None)).is_ok());
        let v: Value = serde_json::from_slice(&named_vmi_json("v", "n")).unwrap();
        assert_eq!(v["metadata"]["name"], "v");
        assert_eq!(v["metadata"]["namespace"], "n");
        assert!(v["metadata"].get("uid").is_none());
    }
}
