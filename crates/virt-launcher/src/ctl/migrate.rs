//! `ctl migrate`: virt-handler's side of a migration between two launchers.

use cmd::proto::cmd::{EmptyRequest, Vmi, VmiRequest};
use std::path::Path;

use serde_json::{json, Value};

use super::{check, err, rpc, CtlArgs};
use crate::error::LauncherError;

/// `ctl migrate`: what virt-handler does for a migration between two
/// launchers, with the VMI's identity from the source's domain and a
/// `status` carrying the migration (`migrationState.migrationUID`,
/// `migrationMethod`, `migrationTransport: Unix`): SyncMigrationTarget on
/// the target (when `--target-socket` is given), then
/// MigrateVirtualMachine on the source; with `--wait`, polls the source's
/// migration record until it ends.
///
/// # Errors
/// A launcher could not be asked or said no; the migration failed (its
/// `FailureReason`) or did not end in time.
pub(super) async fn migrate(
    c: &mut cmd::client::CmdChannel,
    dom: &Value,
    args: &CtlArgs,
) -> Result<Value, LauncherError> {
    if !matches!(
        args.migration_method.as_str(),
        "BlockMigration" | "LiveMigration"
    ) {
        return Err(LauncherError::input_at(
            "--migration-method",
            format!(
                "{}: use BlockMigration or LiveMigration",
                api::text::cut(&args.migration_method, 64)
            ),
        ));
    }
    let uid = args.migration_uid.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        format!("ctl-migration-{}-{}", t.as_secs(), t.subsec_nanos())
    });
    let mut vmi: Value = serde_json::from_slice(&super::vmi_of(dom).vmi_json).map_err(err)?;
    vmi["status"] = json!({
        "migrationMethod": args.migration_method,
        "migrationTransport": "Unix",
        "migrationState": {"migrationUID": uid},
    });
    let vmi = Vmi {
        vmi_json: vmi.to_string().into_bytes(),
    };
    let mut target_channel = None;
    if let Some(target) = &args.target_socket {
        if same_file(target, &args.socket) {
            return Err(LauncherError::input_at(
                "--target-socket",
                format!(
                    "{} is the source launcher's own socket: a launcher cannot migrate to itself",
                    target.display()
                ),
            ));
        }
        refuse_hot_plugged(&args.socket, target)?;
        let t = target_channel.insert(
            cmd::client::Client::connect_with_timeout(target, super::request_timeout(args))
                .await
                .map_err(|e| err(format!("target {}: {e}", target.display())))?
                .cmd,
        );
        let r = t
            .sync_migration_target(VmiRequest {
                vmi: Some(vmi.clone()),
                options: None,
            })
            .await
            .map_err(rpc)?
            .into_inner();
        check(Some(r)).map_err(|e| err(format!("target: {e}")))?;
    }
    let options = args
        .options
        .clone()
        .unwrap_or_else(|| r#"{"ProgressTimeout":150,"CompletionTimeoutPerGiB":150}"#.into());
    let r = c
        .migrate_virtual_machine(cmd::proto::cmd::MigrationRequest {
            vmi: Some(vmi),
            options: options.into_bytes(),
        })
        .await
        .map_err(rpc)?
        .into_inner();
    check(Some(r))?;
    let Some(timeout) = args.wait.map(std::time::Duration::from_secs) else {
        return Ok(json!({"ok": true}));
    };
    let start = std::time::Instant::now();
    // The source launcher exits once the domain has left; the target's
    // record of the same migration then tells the end.
    let mut source_gone = false;
    loop {
        let asked = if source_gone {
            None
        } else {
            c.get_domain(EmptyRequest {}).await.ok()
        };
        let d = match (asked, target_channel.as_mut()) {
            (Some(d), _) => d.into_inner(),
            (None, Some(t)) => {
                source_gone = true;
                t.get_domain(EmptyRequest {})
                    .await
                    .map_err(|e| err(format!("target: {e}")))?
                    .into_inner()
            }
            (None, None) => return Err(err("the source launcher went away during the migration")),
        };
        let dom: Value = serde_json::from_str(&d.domain).unwrap_or(Value::Null);
        let m = &dom["Spec"]["Metadata"]["KubeVirt"]["Migration"];
        if m["UID"] == uid.as_str() && !m["EndTimestamp"].is_null() {
            if m["Failed"] == true {
                return Err(err(m["FailureReason"].as_str().unwrap_or("").to_owned()));
            }
            return Ok(m.clone());
        }
        if start.elapsed() >= timeout {
            return Err(err(format!(
                "migration {uid} did not end within {} s",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Refuses a migration whose source VMI (the stand-in's stored copy) has
/// volumes or networks the target launcher's stored VMI lacks: devices
/// hot-plugged after the target was started. In a cluster the target pod
/// is made from the VMI as it is then (Multus makes the hot-plugged
/// networks' pod links, virt-handler mounts the hot-plugged volumes on
/// the target node); the stand-in does not play that yet, and libvirt
/// would fail half-way (`target managed='no' but specified dev doesn't
/// exist` for a NIC, `Migration without shared storage is unsafe` for a
/// disk). Launchers without a stored VMI (pod mode) are not checked.
///
/// # Errors
/// Input error naming `--target-socket` and each missing device.
fn refuse_hot_plugged(source: &Path, target: &Path) -> Result<(), LauncherError> {
    use crate::standalone::hotplug::{read_store, state_dir_of, STORE};
    let stored = |socket: &Path| -> Result<Option<Value>, LauncherError> {
        let state = state_dir_of(socket)?;
        if !state.join(STORE).exists() {
            return Ok(None);
        }
        read_store(&state).map(Some)
    };
    let (Some(s), Some(t)) = (stored(source)?, stored(target)?) else {
        return Ok(());
    };
    let missing = not_on_target(&s, &t);
    if missing.is_empty() {
        return Ok(());
    }
    Err(LauncherError::input_at(
        "--target-socket",
        format!(
            "the source VMI has {} that the target launcher was not started with (hot-plugged after its start): carrying hot-plugged devices to the target is not built; unplug them first (ctl removevolume, ctl removeinterface)",
            missing.join(", ")
        ),
    ))
}

/// The volumes and networks of `source` (a VMI) that `target` lacks, by
/// name (`volume "x"`, `network "y"`).
fn not_on_target(source: &Value, target: &Value) -> Vec<String> {
    let names = |v: &Value, list: &str| -> Vec<String> {
        v["spec"][list]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|x| x["name"].as_str().map(str::to_owned))
            .collect()
    };
    let mut missing = Vec::new();
    for (list, what) in [("volumes", "volume"), ("networks", "network")] {
        let there = names(target, list);
        for n in names(source, list) {
            if !there.contains(&n) {
                missing.push(format!("{what} {:?}", api::text::cut(&n, 64)));
            }
        }
    }
    missing
}

/// Whether `a` and `b` name the same file (device and inode: also through
/// links and bind mounts).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{not_on_target, same_file};
    use serde_json::json;

    #[test]
    fn hot_plugged_volumes_and_networks_are_named() {
        let target = json!({"spec": {
            "volumes": [{"name": "containerdisk"}],
            "networks": [{"name": "default"}],
        }});
        let mut source = target.clone();
        assert!(not_on_target(&source, &target).is_empty());
        source["spec"]["volumes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "v1"}));
        source["spec"]["networks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "blue"}));
        assert_eq!(
            not_on_target(&source, &target),
            ["volume \"v1\"", "network \"blue\""]
        );
        // What only the target has does not stop a migration.
        assert!(not_on_target(&target, &source).is_empty());
    }

    #[test]
    fn the_same_socket_through_a_link_is_the_same_file() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        std::fs::write(&a, b"").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let b = tmp.path().join("b");
        std::fs::write(&b, b"").unwrap();
        assert!(same_file(&a, &a));
        assert!(same_file(&link, &a));
        assert!(!same_file(&a, &b));
        assert!(!same_file(&a, &tmp.path().join("missing")));
    }
}
