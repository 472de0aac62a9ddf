//! `ctl memorydump`: the dump's record polled until it ends (`--wait`),
//! or for a moment, to report a dump that fails at once.

use cmd::proto::cmd::EmptyRequest;
use serde_json::{json, Value};

use super::rpc;
use crate::error::LauncherError;

/// How long `memorydump` without `--wait` watches the record for a dump
/// that fails at once (a directory it cannot write, a full disk): such a
/// failure is reported instead of "ok".
const IMMEDIATE: std::time::Duration = std::time::Duration::from_secs(1);

/// Polls GetDomain until `Spec.Metadata.KubeVirt.MemoryDump` records the
/// file name of `path` as completed; returns that record. Without a
/// `timeout` (no `--wait`), polls for [`IMMEDIATE`] only and returns
/// `{"ok": true}` unless the dump failed by then.
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
            .map_err(rpc)?
            .into_inner();
        let dom: Value = serde_json::from_str(&d.domain).unwrap_or(Value::Null);
        let m = &dom["Spec"]["Metadata"]["KubeVirt"]["MemoryDump"];
        if let Some(done) = judge(m, &name, path, first) {
            return done.map(|r| {
                if timeout.is_some() {
                    r
                } else {
                    json!({"ok": true})
                }
            });
        }
        first = false;
        match timeout {
            None if start.elapsed() >= IMMEDIATE => return Ok(json!({"ok": true})),
            Some(t) if start.elapsed() >= t => {
                return Err(LauncherError::runtime(format!(
                    "the memory dump to {} did not end within {} s",
                    path.display(),
                    t.as_secs()
                )))
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
}

/// What the dump record `m` says of the dump of `path` (file name `name`);
/// `first`: the first look after the request. `None` while it runs (or
/// is not recorded yet), else its record or the failure.
fn judge(
    m: &Value,
    name: &str,
    path: &std::path::Path,
    first: bool,
) -> Option<Result<Value, LauncherError>> {
    if let Some(other) = m["FileName"].as_str().filter(|f| *f != name) {
        return Some(Err(LauncherError::runtime(
            if first && m["Completed"] != true {
                format!(
                    "the memory dump to {} was dropped: the dump of {other} is running (one at a time, as KubeVirt)",
                    path.display()
                )
            } else {
                format!(
                    "the memory dump record of {} was replaced by the dump of {other}",
                    path.display()
                )
            },
        )));
    }
    if m["FileName"] == name && m["Completed"] == true {
        if m["Failed"] == true {
            return Some(Err(LauncherError::runtime(
                m["FailureReason"].as_str().unwrap_or("").to_owned(),
            )));
        }
        return Some(Ok(m.clone()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_record_judged() {
        let p = std::path::Path::new("/d/a.memory.dump");
        let n = "a.memory.dump";
        let running = json!({"FileName": n, "Completed": false});
        assert!(judge(&running, n, p, true).is_none());
        assert!(judge(&Value::Null, n, p, true).is_none());
        let failed = json!({"FileName": n, "Completed": true, "Failed": true, "FailureReason": "Permission denied"});
        let e = judge(&failed, n, p, true).unwrap().unwrap_err().to_string();
        assert_eq!(e, "Permission denied");
        let ok = json!({"FileName": n, "Completed": true});
        assert_eq!(judge(&ok, n, p, false).unwrap().unwrap(), ok);
        let other = json!({"FileName": "b.memory.dump", "Completed": false});
        let e = judge(&other, n, p, true).unwrap().unwrap_err().to_string();
        assert!(
            e.contains("was dropped: the dump of b.memory.dump is running"),
            "{e}"
        );
        let e = judge(&other, n, p, false).unwrap().unwrap_err().to_string();
        assert!(
            e.contains("was replaced by the dump of b.memory.dump"),
            "{e}"
        );
    }
}
