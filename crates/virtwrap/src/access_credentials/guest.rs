//! One round of propagation to the guest (the body of KubeVirt's
//! `watchSecrets` loop): ping the agent, set each user's authorized keys
//! (libvirt's `AuthorizedSSHKeysSet`, else the file-based way KubeVirt
//! uses with agents that lack `guest-ssh-add-authorized-keys`), set each
//! password, and report each failure, or success, in KubeVirt's words.

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;

use super::collect::Collected;
use crate::agent::{parse, AgentChannel, OP_TIMEOUT};

/// KubeVirt's result when the agent does not answer `guest-ping`.
pub const AGENT_OFFLINE: &str = "Guest agent is offline";
/// How long KubeVirt waits for each guest command of the file-based way
/// (`agent.GuestExec(..., 10)`).
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(10);

/// Applies `c` to the guest through `ch`, calling `report(succeeded,
/// message)` for each failure as it happens and once with `(true, "")`
/// when nothing failed (KubeVirt's `reportAccessCredentialResult`; the
/// last report is what virt-handler sees). Returns whether the round must
/// be retried at the next check (any failure).
pub fn apply(ch: &dyn AgentChannel, c: &Collected, report: &mut dyn FnMut(bool, String)) -> bool {
    if ch
        .command_vir(r#"{"execute":"guest-ping"}"#, OP_TIMEOUT)
        .is_err()
    {
        report(false, AGENT_OFFLINE.into());
        return true;
    }
    let mut failed = false;
    for e in &c.errors {
        tracing::error!("Error encountered: {e}");
        report(false, e.clone());
        failed = true;
    }
    for (user, keys) in &c.keys {
        if let Err(e) = set_authorized_keys(ch, user, keys) {
            tracing::error!("Error encountered writing access credentials using guest agent: {e}");
            report(
                false,
                format!(
                    "Error encountered writing ssh pub key access credentials for user [{user}]: {e}"
                ),
            );
            failed = true;
        }
    }
    for (user, password) in &c.passwords {
        if let Err(e) = ch.set_user_password(user, password) {
            tracing::error!("Error encountered setting password for user [{user}]: {e}");
            report(
                false,
                format!("Error encountered setting password for user [{user}]: {e}"),
            );
            failed = true;
        }
    }
    if !failed {
        report(true, String::new());
    }
    failed
}

/// KubeVirt's `agentSetAuthorizedKeys`: libvirt's call first; when it
/// fails (an agent without the ssh commands, or any other error), the
/// file-based way; both errors when both fail.
fn set_authorized_keys(ch: &dyn AgentChannel, user: &str, keys: &[String]) -> Result<(), String> {
    let first = match ch.set_authorized_keys(user, keys) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    tracing::debug!("Could not set SSH key using guest-ssh-add-authorized-keys: {first}");
    write_authorized_keys_file(ch, user, &keys.join("\n")).map_err(|second| {
        format!(
            "failed to set SSH keys: error from guest-ssh-add-authorized-keys: {first}; error from using guest-file-write: {second}"
        )
    })
}

/// KubeVirt's `agentWriteAuthorizedKeysFile`: the user's home from
/// `getent passwd`, the current `~/.ssh/authorized_keys` read (its first
/// read only, as KubeVirt), and written when it differs, with the
/// directory made `700` and the file `600`, both owned by the user.
fn write_authorized_keys_file(
    ch: &dyn AgentChannel,
    user: &str,
    wanted: &str,
) -> Result<(), String> {
    let (home, uid, gid) = user_info(ch, user)?;
    let path = format!("{home}/.ssh/authorized_keys");
    let (current, exists) = match read_guest_file(ch, &path) {
        Ok(s) => (s, true),
        Err(e) if e.contains("No such file or directory") => (String::new(), false),
        Err(e) => return Err(e),
    };
    if current == wanted {
        return Ok(());
    }
    let owner = format!("{uid}:{gid}");
    let dir = path.rsplit_once('/').map_or("/", |(d, _)| d).to_owned();
    exec(ch, "mkdir", &["-p", &dir])?;
    exec(ch, "chown", &[&owner, &dir])?;
    exec(ch, "chmod", &["700", &dir])?;
    if exists {
        // KubeVirt ignores these two results.
        let _ = exec(ch, "chown", &[&owner, &path]);
        let _ = exec(ch, "chmod", &["600", &path]);
    }
    let handle = open_guest_file(ch, &path, "w")?;
    let data = base64::engine::general_purpose::STANDARD.encode(wanted);
    let written = ch.command_vir(
        &json!({"execute": "guest-file-write", "arguments": {"handle": handle, "buf-b64": data}})
            .to_string(),
        OP_TIMEOUT,
    );
    let closed = close_guest_file(ch, handle);
    written?;
    closed?;
    if !exists {
        let _ = exec(ch, "chown", &[&owner, &path]);
        let _ = exec(ch, "chmod", &["600", &path]);
    }
    Ok(())
}

/// KubeVirt's `agentGetUserInfo`: home, uid and gid from `getent passwd`.
fn user_info(ch: &dyn AgentChannel, user: &str) -> Result<(String, String, String), String> {
    let out = exec(ch, "getent", &["passwd", user])
        .map_err(|e| format!("Unable to detect home directory of user {user}: {e}"))?;
    let fields: Vec<&str> = out.trim().split(':').collect();
    if fields.len() < 6 {
        return Err(format!("Unable to detect home directory of user {user}"));
    }
    tracing::info!("Detected home directory {} for user {user}", fields[5]);
    Ok((
        fields[5].to_owned(),
        fields[2].to_owned(),
        fields[3].to_owned(),
    ))
}

fn open_guest_file(ch: &dyn AgentChannel, path: &str, mode: &str) -> Result<i64, String> {
    let r = ch.command_vir(
        &json!({"execute": "guest-file-open", "arguments": {"path": path, "mode": mode}})
            .to_string(),
        OP_TIMEOUT,
    )?;
    parse::unwrap_return::<i64>(&r).map_err(|e| e.to_string())
}

fn close_guest_file(ch: &dyn AgentChannel, handle: i64) -> Result<(), String> {
    ch.command_vir(
        &json!({"execute": "guest-file-close", "arguments": {"handle": handle}}).to_string(),
        OP_TIMEOUT,
    )
    .map(|_| ())
}

/// KubeVirt's `readGuestFile`: one `guest-file-read` of the agent's
/// default count (4 KiB in qemu-ga).
fn read_guest_file(ch: &dyn AgentChannel, path: &str) -> Result<String, String> {
    #[derive(Deserialize)]
    struct Read {
        count: u64,
        #[serde(rename = "buf-b64", default)]
        buf: String,
    }
    let handle = open_guest_file(ch, path, "r")?;
    let read = ch
        .command_vir(
            &json!({"execute": "guest-file-read", "arguments": {"handle": handle}}).to_string(),
            OP_TIMEOUT,
        )
        .and_then(|r| parse::unwrap_return::<Read>(&r).map_err(|e| e.to_string()));
    let closed = close_guest_file(ch, handle);
    let read = read?;
    closed?;
    if read.count == 0 {
        return Ok(String::new());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(read.buf.as_bytes())
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// KubeVirt's `agent.GuestExec` with its 10 s: `guest-exec` with the
/// output captured, then `guest-exec-status` until the process exits;
/// its standard output, or KubeVirt's errors (`exited with error
/// code:N`, `Timed out waiting for guest pid [N] for command [C] to
/// exit`). Arguments are JSON-escaped (KubeVirt pastes them unescaped).
fn exec(ch: &dyn AgentChannel, command: &str, args: &[&str]) -> Result<String, String> {
    let started = Instant::now();
    let r = ch.command_vir(
        &json!({"execute": "guest-exec", "arguments": {"path": command, "arg": args, "capture-output": true}})
            .to_string(),
        OP_TIMEOUT,
    )?;
    let pid = parse::exec_pid(&r)
        .map_err(|e| format!("{e} returned from qemu agent during access credential injection"))?;
    let status = json!({"execute": "guest-exec-status", "arguments": {"pid": pid}}).to_string();
    let mut step = Duration::from_millis(20);
    loop {
        let s =
            parse::exec_status(&ch.command_vir(&status, OP_TIMEOUT)?).map_err(|e| e.to_string())?;
        if s.exited {
            if s.exit_code != 0 {
                return Err(format!("exited with error code:{}", s.exit_code));
            }
            return Ok(s.stdout);
        }
        if started.elapsed() >= EXEC_TIMEOUT {
            return Err(format!(
                "Timed out waiting for guest pid [{pid}] for command [{command}] to exit"
            ));
        }
        std::thread::sleep(step);
        step = (step * 2).min(Duration::from_secs(1));
    }
}
