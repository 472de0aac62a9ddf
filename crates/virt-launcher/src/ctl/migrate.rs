//! `ctl migrate`: virt-handler's side of a migration between two launchers.

use cmd::proto::cmd::{EmptyRequest, Vmi, VmiRequest};
use std::path::Path;

use serde_json::{json, Value};

use super::{check, err, rpc, CtlArgs};
use crate::error::LauncherError;

/// The cluster's default migration options, as `ctl migrate` sends them
/// without `--options`.
const DEFAULT_OPTIONS: &str = r#"{"ProgressTimeout":150,"CompletionTimeoutPerGiB":150}"#;

/// `--options` (or [`DEFAULT_OPTIONS`]) checked by the rule the source
/// launcher applies to MigrateVirtualMachine's options
/// (`migration::MigrationOptions::parse` and the bandwidth's conversion),
/// so that bad options are refused before the target is prepared.
///
/// # Errors
/// Input at `--options`: the launcher's message (KubeVirt's words).
fn checked_options(options: Option<&str>) -> Result<String, LauncherError> {
    let options = options.unwrap_or(DEFAULT_OPTIONS);
    virtwrap::migration::MigrationOptions::parse(options.as_bytes())
        .and_then(|o| o.bandwidth_mib())
        .map_err(|e| LauncherError::input_at("--options", e.to_string()))?;
    Ok(options.to_owned())
}

/// `ctl migrate`: what virt-handler does for a migration between two
/// launchers, with the VMI's identity from the source's domain and a
/// `status` carrying the migration (`migrationState.migrationUid`,
/// `migrationMethod`, `migrationTransport: Unix`): SyncMigrationTarget on
/// the target (when `--target-socket` is given), then
/// MigrateVirtualMachine on the source; with `--wait`, polls the source's
/// migration record until it ends (once the source has exited, the
/// target's, with the source's last outcome and mode as virt-handler
/// reads them); a failed migration then gets what virt-handler's target
/// side sends the target, SignalTargetPodCleanup ([`signal_target_cleanup`];
/// `migrationState.targetPod` is the target's `POD_NAME`, [`target_pod_name`]).
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
    let options = checked_options(args.options.as_deref())?;
    let uid = args.migration_uid.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        format!("ctl-migration-{}-{}", t.as_secs(), t.subsec_nanos())
    });
    let mut vmi_value: Value = serde_json::from_slice(&super::vmi_of(dom).vmi_json).map_err(err)?;
    let volume_status = iso_sizes(dom, &args.socket)?;
    vmi_value["status"] = json!({
        "migrationMethod": args.migration_method,
        "migrationTransport": "Unix",
        "migrationState": {"migrationUid": uid},
        "volumeStatus": volume_status,
    });
    let vmi = Vmi {
        vmi_json: vmi_value.to_string().into_bytes(),
    };
    let mut target_channel = None;
    if let Some(pod) = args.target_socket.as_deref().and_then(target_pod_name) {
        // virt-controller names the target pod in the VMI before
        // virt-handler prepares it.
        vmi_value["status"]["migrationState"]["targetPod"] = Value::String(pod);
    }
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
        if dedicated(dom) {
            report_target_cpus(&mut vmi_value, target)?;
        }
    }
    let vmi = Vmi {
        vmi_json: vmi_value.to_string().into_bytes(),
    };
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
    // record of the same migration then tells the end. As virt-handler,
    // the outcome is the source's (its migration controller copies start,
    // mode, failure and abort status from each of the source's records)
    // and the end of a completed migration the target's (its target
    // controller takes EndTimestamp from the domain that arrived): the
    // target's copy is the record sent at the start, which says PreCopy
    // even after a switch to post-copy.
    let mut source_gone = false;
    let mut last_source: Option<Value> = None;
    loop {
        let asked = if source_gone {
            None
        } else {
            c.get_domain(EmptyRequest {}).await.ok()
        };
        let from_source = asked.is_some();
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
        let mut m = dom["Spec"]["Metadata"]["KubeVirt"]["Migration"].clone();
        if m["UID"] == uid.as_str() {
            if from_source {
                last_source = Some(m.clone());
            } else if let Some(src) = &last_source {
                for k in [
                    "StartTimestamp",
                    "Mode",
                    "Failed",
                    "FailureReason",
                    "AbortStatus",
                ] {
                    if let Some(v) = src.get(k) {
                        m[k] = v.clone();
                    }
                }
            }
        }
        if m["UID"] == uid.as_str() && !m["EndTimestamp"].is_null() {
            if m["Failed"] == true {
                if let Some(t) = target_channel.as_mut() {
                    signal_target_cleanup(t, &mut vmi_value, &m).await;
                }
                return Err(err(m["FailureReason"].as_str().unwrap_or("").to_owned()));
            }
            return Ok(m);
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

/// What virt-handler's target side sends the target launcher once a
/// migration failed (`migration-target.go`, `finalCleanup`: the VMI's
/// migration has an end and `failed`): SignalTargetPodCleanup with the VMI
/// as the source's virt-handler left it, its `migrationState` carrying
/// the source's record (start, end, failed, reason, abort status, mode)
/// and `targetPod`; nothing else goes to the launcher after it. As
/// virt-handler, an error is only reported ("ignoring"): the target may
/// be gone already.
async fn signal_target_cleanup(
    target: &mut cmd::client::CmdChannel,
    vmi: &mut Value,
    record: &Value,
) {
    let state = &mut vmi["status"]["migrationState"];
    for (from, to) in [
        ("StartTimestamp", "startTimestamp"),
        ("EndTimestamp", "endTimestamp"),
        ("FailureReason", "failureReason"),
        ("AbortStatus", "abortStatus"),
        ("Mode", "mode"),
    ] {
        if let Some(v) = record.get(from).filter(|v| !v.is_null() && *v != "") {
            state[to] = v.clone();
        }
    }
    state["failed"] = Value::Bool(true);
    let req = VmiRequest {
        vmi: Some(Vmi {
            vmi_json: vmi.to_string().into_bytes(),
        }),
        options: None,
    };
    let answer = target.signal_target_pod_cleanup(req).await.map_err(rpc);
    if let Err(e) = answer.and_then(|r| check(Some(r.into_inner()))) {
        tracing::warn!("Failed to signal target pod cleanup: {e}, ignoring.");
    }
}

/// The target pod's name as kubelet gives it to the pod (`POD_NAME`, from
/// the downward API), read from the environment of the target launcher
/// (the peer of its command socket), at most 1 MiB of it: what
/// virt-controller, which made the pod, puts in the VMI's
/// `migrationState.targetPod`. `None` when the target has no `POD_NAME`
/// (a standalone launcher without one then ignores SignalTargetPodCleanup,
/// as KubeVirt's does) or cannot be read.
fn target_pod_name(target: &Path) -> Option<String> {
    use std::io::Read;
    let pid = socket_peer(target).ok()?;
    let mut env = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/environ"))
        .ok()?
        .take(1 << 20)
        .read_to_end(&mut env)
        .ok()?;
    pod_name_in(&env)
}

/// `POD_NAME`'s value in a NUL-separated environment block.
fn pod_name_in(environ: &[u8]) -> Option<String> {
    environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(b"POD_NAME="))
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
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

/// `status.volumeStatus` with the size of each cloud-init and
/// config-volume disk as it is in the source's pod, as virt-handler keeps
/// it (`updateIsoSizeStatus`: the file found through the pod's root,
/// never following a link, its size in `volumeStatus[].size`). `ctl` has
/// the source's domain, not its VMI: those disks are the domain's disks
/// whose file is an `.iso` (the layout's name for them, `api::layout`),
/// their volume the disk's alias. The target makes them empty of that
/// size.
fn iso_sizes(dom: &Value, source: &std::path::Path) -> Result<Value, LauncherError> {
    let isos: Vec<(String, String)> = dom["Spec"]["Devices"]["Disks"]
        .as_array()
        .map(|disks| {
            disks
                .iter()
                .filter_map(|d| {
                    let file = d["Source"]["File"].as_str()?;
                    let name = d["Alias"]["Name"].as_str()?;
                    let name = name.strip_prefix("ua-").unwrap_or(name);
                    (file.ends_with(".iso") && !file.contains("/../"))
                        .then(|| (name.to_owned(), file.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut list = Vec::new();
    if isos.is_empty() {
        return Ok(Value::Array(list));
    }
    let root = std::path::PathBuf::from(format!("/proc/{}/root", socket_peer(source)?));
    for (name, iso) in isos {
        // Like virt-handler, a file it cannot see gets no size.
        let size = resolve_in_root(&root, &iso)
            .and_then(|p| std::fs::symlink_metadata(p).ok())
            .filter(std::fs::Metadata::is_file)
            .map_or(0, |m| m.len());
        list.push(json!({"name": name, "size": size}));
    }
    Ok(Value::Array(list))
}

/// `path` (absolute, as the pod sees it) below `root` (a pod's
/// `/proc/<pid>/root`), its directories' links resolved inside `root`
/// (virt-handler's `AppendAndResolveWithRelativeRoot`: through
/// `/proc/<pid>/root` an absolute link such as `/var/run -> /run` would
/// otherwise resolve in the caller's namespace); the last component is
/// not followed. At most 40 links; `None` for `..` or a loop.
fn resolve_in_root(root: &std::path::Path, path: &str) -> Option<std::path::PathBuf> {
    let mut pending: Vec<String> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .rev()
        .map(str::to_owned)
        .collect();
    let mut cur = root.to_path_buf();
    let mut hops = 0;
    while let Some(c) = pending.pop() {
        if c == ".." {
            return None;
        }
        let next = cur.join(&c);
        if pending.is_empty() {
            return Some(next);
        }
        match std::fs::read_link(&next) {
            Ok(target) => {
                hops += 1;
                if hops > 40 {
                    return None;
                }
                let t = target.to_str()?;
                if t.starts_with('/') {
                    cur = root.to_path_buf();
                }
                pending.extend(
                    t.split('/')
                        .filter(|c| !c.is_empty() && *c != ".")
                        .rev()
                        .map(str::to_owned),
                );
            }
            Err(_) => cur = next,
        }
    }
    Some(cur)
}

/// Whether the VMI has dedicated CPUs (`vmi.IsCPUDedicated()`), read from
/// the source's domain (what `ctl` has): the converter pins vCPUs
/// (`CPUTune.VCPUPin`) exactly for `dedicatedCpuPlacement`.
fn dedicated(dom: &Value) -> bool {
    dom["Spec"]["CPUTune"]["VCPUPin"]
        .as_array()
        .is_some_and(|p| !p.is_empty())
}

/// virt-handler's target side for a VMI with dedicated CPUs, once the
/// target is prepared (`migration-target.go`, after it advertised the
/// target's address: `reportDedicatedCPUSetForMigratingVMI` and
/// `reportTargetTopologyForMigratingVMI`): `migrationState.targetCPUSet`
/// from the target pod's cgroup cpuset and `targetNodeTopology`, the
/// node's NUMA topology as JSON. As virt-handler, the pod's process is the
/// peer of the launcher's command socket (`SO_PEERCRED`, its isolation
/// detector), its cgroup read from `/proc/<pid>/cgroup`, and the CPU list
/// from `cpuset.cpus` (cgroup v1) or `cpuset.cpus.effective` (v2).
fn report_target_cpus(vmi: &mut Value, target: &std::path::Path) -> Result<(), LauncherError> {
    let pid = socket_peer(target)?;
    let cpus = crate::host::cgroup_cpuset_of(pid)
        .map_err(|e| err(format!("failed to get target VMI cpuset: {e}")))?;
    vmi["status"]["migrationState"]["targetCPUSet"] = json!(cpus);
    vmi["status"]["migrationState"]["targetNodeTopology"] =
        Value::String(crate::host::node_topology_json());
    Ok(())
}

/// The process on the other end of the Unix socket `path`.
fn socket_peer(path: &std::path::Path) -> Result<i32, LauncherError> {
    let s = std::os::unix::net::UnixStream::connect(path)
        .map_err(|e| err(format!("target {}: {e}", path.display())))?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| err(format!("target {}: SO_PEERCRED: {e}", path.display())))?;
    Ok(cred.pid())
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
    use super::{
        checked_options, not_on_target, pod_name_in, resolve_in_root, same_file, DEFAULT_OPTIONS,
    };
    use serde_json::json;

    #[test]
    fn the_pod_name_comes_from_the_environment_block() {
        assert_eq!(
            pod_name_in(b"A=1\0POD_NAME=virt-launcher-x-abcde\0B=2\0").as_deref(),
            Some("virt-launcher-x-abcde")
        );
        assert_eq!(pod_name_in(b"POD_NAMES=x\0XPOD_NAME=y\0"), None);
        assert_eq!(pod_name_in(b"POD_NAME=\0"), None);
        assert_eq!(pod_name_in(b""), None);
    }

    /// `--options` is refused by the launcher's own rule before any
    /// launcher is asked, the option named.
    #[test]
    fn options_are_checked_by_the_launchers_rule() {
        assert_eq!(checked_options(None).unwrap(), DEFAULT_OPTIONS);
        let given = r#"{"Bandwidth":"64Mi","AllowPostCopy":true}"#;
        assert_eq!(checked_options(Some(given)).unwrap(), given);
        let e = checked_options(Some(r#"{"ProgressTimeout":"soon"}"#)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("--options"));
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message
                .ends_with(r#"ProgressTimeout: "soon" is not an int64"#),
            "{e}"
        );
        let e = checked_options(Some(r#"{"Bandwidth":"-1Mi"}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--options: Bandwidth: Memory size '-1Mi' must be greater than or equal to 0"
        );
        assert!(checked_options(Some("")).is_err());
    }

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
    fn paths_resolve_their_links_inside_the_pods_root() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("run/disks")).unwrap();
        std::fs::create_dir(r.join("var")).unwrap();
        std::os::unix::fs::symlink("/run", r.join("var/run")).unwrap();
        std::os::unix::fs::symlink("../run/disks", r.join("var/rel")).unwrap();
        assert_eq!(
            resolve_in_root(r, "/var/run/disks/a.iso").unwrap(),
            r.join("run/disks/a.iso")
        );
        // A relative link's `..` is refused (it could climb out).
        assert_eq!(resolve_in_root(r, "/var/rel/a.iso"), None);
        assert_eq!(resolve_in_root(r, "/run/../etc/passwd"), None);
        std::os::unix::fs::symlink("/loop", r.join("loop")).unwrap();
        assert_eq!(resolve_in_root(r, "/loop/a.iso"), None);
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
