//! `virt-launcher ctl backup | backup-abort | redefine-checkpoint`: what
//! virt-handler sends for KubeVirt main's VirtualMachineBackup
//! (BackupVirtualMachine with `backupv1.BackupOptions`) and for a backup
//! tracker's checkpoint after a restart (RedefineCheckpoint).
//!
//! As virt-handler, the request's VMI carries
//! `status.changedBlockTracking.state: Enabled` when every disk of the
//! domain that has changed block tracking shows its `DataStore` (virt-handler's
//! `HandleChangedBlockTracking`, from the domain it is sent); ctl sees the
//! domain only, not the VMI's volume list, so a domain with no tracked disk
//! at all gets no state (and the launcher's refusal).

use cmd::proto::cmd as pb;
use serde_json::{json, Value};

use super::{check, current_domain, err, rpc, CtlArgs};
use crate::error::LauncherError;

/// The request's VMI: identity from the domain, the tracking state as
/// virt-handler derives it.
fn vmi(dom: &Value) -> pb::Vmi {
    let uid = dom["Spec"]["Metadata"]["KubeVirt"]["UID"]
        .as_str()
        .unwrap_or("");
    let tracked = dom["Spec"]["Devices"]["Disks"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|d| !d["Source"]["DataStore"].is_null());
    let mut v = json!({
        "metadata": {"name": dom["ObjectMeta"]["name"], "namespace": dom["ObjectMeta"]["namespace"], "uid": uid}
    });
    if tracked {
        v["status"] = json!({"changedBlockTracking": {"state": "Enabled"}});
    }
    pb::Vmi {
        vmi_json: v.to_string().into_bytes(),
    }
}

fn name_arg(args: &CtlArgs, what: &str) -> Result<String, LauncherError> {
    args.path
        .as_ref()
        .and_then(|p| p.to_str())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| LauncherError::input(format!("{what}: give the name: {what} NAME")))
}

/// `ctl backup NAME --target DIR [--incremental CHECKPOINT] [--pull]
/// [--skip-quiesce] [--start-time T] [--wait S]`, `ctl backup-abort NAME
/// --start-time T`: BackupVirtualMachine; with `--wait` the record
/// (`Spec.Metadata.KubeVirt.Backup`) once it completed (an error when it
/// failed), else the record right after the request.
///
/// # Errors
/// Input, the launcher's refusal, a failed or unfinished backup.
pub(super) async fn backup(
    c: &mut cmd::client::CmdChannel,
    args: &CtlArgs,
    abort: bool,
) -> Result<Value, LauncherError> {
    let name = name_arg(args, if abort { "backup-abort" } else { "backup" })?;
    let start = match &args.start_time {
        Some(t) => t.clone(),
        None if abort => {
            return Err(LauncherError::input(
                "backup-abort: give the backup's --start-time (its record's StartTimestamp)",
            ))
        }
        None => virtwrap::metadata::now_rfc3339(),
    };
    let target = match (&args.target, abort) {
        (Some(t), _) => Some(
            std::path::absolute(t)
                .map_err(|e| LauncherError::input(format!("--target {}: {e}", t.display())))?
                .display()
                .to_string(),
        ),
        (None, true) => None,
        (None, false) => {
            return Err(LauncherError::input(
                "backup: give the directory for the backup files: --target DIR",
            ))
        }
    };
    let options = wire::backup::BackupOptions {
        backup_name: name.clone(),
        cmd: if abort { "Abort" } else { "Start" }.into(),
        mode: if args.pull { "Pull" } else { "Push" }.into(),
        backup_start_time: Some(start.clone()),
        incremental: args.incremental.clone(),
        target_path: target,
        skip_quiesce: args.skip_quiesce,
        ..Default::default()
    };
    let dom = current_domain(c).await?;
    let r = c
        .backup_virtual_machine(pb::BackupRequest {
            vmi: Some(vmi(&dom)),
            options: serde_json::to_vec(&options).map_err(err)?,
        })
        .await
        .map_err(rpc)?
        .into_inner();
    check(Some(r))?;
    if abort {
        return Ok(json!({"ok": true}));
    }
    let deadline = args
        .wait
        .map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s));
    loop {
        let dom = current_domain(c).await?;
        let m = dom["Spec"]["Metadata"]["KubeVirt"]["Backup"].clone();
        if m["Name"] != name.as_str() {
            return Err(LauncherError::runtime(format!(
                "the launcher records no backup {name}"
            )));
        }
        let Some(deadline) = deadline else {
            return Ok(m);
        };
        if m["Completed"] == true {
            if m["Failed"] == true {
                return Err(LauncherError::runtime(format!(
                    "backup {name} failed: {}",
                    m["BackupMsg"].as_str().unwrap_or("")
                )));
            }
            return Ok(m);
        }
        if std::time::Instant::now() >= deadline {
            return Err(LauncherError::runtime(format!(
                "backup {name} did not complete within {} s",
                args.wait.unwrap_or(0)
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// `ctl redefine-checkpoint NAME [--start-time T]`: RedefineCheckpoint
/// with the checkpoint's name (and `creationTime`); prints
/// `checkpointInvalid` with the answer.
///
/// # Errors
/// The launcher's refusal (with `checkpointInvalid` in the message).
pub(super) async fn redefine(
    c: &mut cmd::client::CmdChannel,
    args: &CtlArgs,
) -> Result<Value, LauncherError> {
    let name = name_arg(args, "redefine-checkpoint")?;
    let cp = wire::backup::BackupCheckpoint {
        name,
        creation_time: args.start_time.clone(),
        volumes: Vec::new(),
    };
    let dom = current_domain(c).await?;
    let r = c
        .redefine_checkpoint(pb::RedefineCheckpointRequest {
            vmi: Some(vmi(&dom)),
            checkpoint: serde_json::to_vec(&cp).map_err(err)?,
        })
        .await
        .map_err(rpc)?
        .into_inner();
    let invalid = r.checkpoint_invalid;
    match r.response {
        Some(x) if x.success => Ok(json!({"ok": true, "checkpointInvalid": false})),
        Some(x) => Err(LauncherError::runtime(format!(
            "{} (checkpointInvalid: {invalid})",
            x.message
        ))),
        None => Err(LauncherError::runtime("empty response")),
    }
}
