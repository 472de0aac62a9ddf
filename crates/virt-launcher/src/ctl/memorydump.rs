//! `ctl memorydump --wait`: the dump's record polled until it ends.

use cmd::proto::cmd::EmptyRequest;
use serde_json::{json, Value};

use super::err;
use crate::error::LauncherError;

/// Polls GetDomain until `Spec.Metadata.KubeVirt.MemoryDump` records the
/// file name of `path` as completed; returns that record. Without a
/// `timeout` (no `--wait`), polls once and returns `{"ok": true}`.
///
/// The launcher sets the record of a dump it starts before the request
/// returns; so when the first poll finds another file's dump still running,
/// this request was dropped (one dump at a time, as KubeVirt), and that
/// is said at once instead of waiting for a dump that never comes. (The
/// record has the file name only: the same name in another directory
/// cannot be told apart and is waited for.)
///
/// # Errors
/// The request was dropped while another dump runs, the record was
/// replaced by another dump's, the dump failed (its `FailureReason`), did
/// not end within `timeout`, or the launcher could not be asked.
pub(super) async fn wait_for_dump(
    c: &mut cmd::client::CmdChannel,
    path: &std::path::Path,
    timeout: Option<std::time::Duration>,
) -> Result<Value, LauncherError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let start = std::time::Instant::now();
    let mut first = true;
    loop {
        let d = c
            .get_domain(EmptyRequest {})
            .await
            .map_err(err)?
            .into_inner();
        let dom: Value = serde_json::from_str(&d.domain).unwrap_or(Value::Null);
        let m = &dom["Spec"]["Metadata"]["KubeVirt"]["MemoryDump"];
        if let Some(other) = m["FileName"].as_str().filter(|f| *f != name) {
            return Err(LauncherError::runtime(if first && m["Completed"] != true {
                format!(
                    "the memory dump to {} was dropped: the dump of {other} is running (one at a time, as KubeVirt)",
                    path.display()
                )
            } else {
                format!(
                    "the memory dump record of {} was replaced by the dump of {other}",
                    path.display()
                )
            }));
        }
        let Some(timeout) = timeout else {
            return Ok(json!({"ok": true}));
        };
        first = false;
        if m["FileName"] == name.as_str() && m["Completed"] == true {
            if m["Failed"] == true {
                return Err(LauncherError::runtime(
                    m["FailureReason"].as_str().unwrap_or("").to_owned(),
                ));
            }
            return Ok(m.clone());
        }
        if start.elapsed() >= timeout {
            return Err(LauncherError::runtime(format!(
                "the memory dump to {} did not end within {} s",
                path.display(),
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
