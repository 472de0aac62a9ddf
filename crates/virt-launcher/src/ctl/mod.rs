//! `virt-launcher ctl`: a small client for people on the launcher's
//! command socket (KubeVirt has none; virt-handler speaks the same protocol).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use cmd::proto::cmd::{EmptyRequest, Vmi, VmiRequest};
use serde_json::{json, Value};

use crate::error::LauncherError;

mod backup;
mod hotplug;
mod memorydump;
mod migrate;
mod nics;
mod vmstats;

/// What to ask the launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Action {
    /// Is the server up?
    Ping,
    /// The domain (KubeVirt's api.Domain JSON).
    Domain,
    /// The VMI's `status.interfaces` as virt-handler derives them from
    /// the domain: its interfaces joined with the guest agent's by MAC.
    Interfaces,
    /// Domain statistics.
    Stats,
    /// The guest's memory dirty rate in MiB/s (a 1 s page-sampling
    /// calculation, cached 3 s by the launcher).
    Dirtyrate,
    /// QEMU version.
    Version,
    /// Pause the guest.
    Pause,
    /// Resume the guest.
    Unpause,
    /// Ask the guest to shut down (ACPI).
    Shutdown,
    /// Power the guest off at once.
    Kill,
    /// Reboot the guest (through the guest agent when connected, else ACPI).
    Softreboot,
    /// What the guest agent reports (KubeVirt's guest agent info JSON).
    Guestinfo,
    /// The guest's logged-in users.
    Users,
    /// The guest's file systems.
    Filesystems,
    /// Ping the guest agent.
    Guestping,
    /// Run a command in the guest: `exec -- CMD ARGS...` (exit code and stdout).
    Exec,
    /// Freeze the guest's file systems (`--unfreeze-timeout` thaws them by itself).
    Freeze,
    /// Thaw the guest's file systems.
    Unfreeze,
    /// Dump the guest's memory into a file: `memorydump PATH` (an ELF
    /// core; `--wait SECONDS` waits for it to end and prints its record).
    Memorydump,
    /// A PNG of the guest's display: `screenshot -f FILE.png` (`-f -`:
    /// stdout), as virtctl's `vnc screenshot --file`.
    Screenshot,
    /// KubeVirt's GetVMStats (the launcher needs `--vm-stats-collector`):
    /// the items of `--item` (default: all), each with its own answer.
    Vmstats,
    /// Standalone `run` only: hot-plug a volume, `addvolume NAME --image
    /// FILE [--bus scsi|virtio] [--serial S]`: what `virtctl addvolume`,
    /// virt-api, virt-controller and virt-handler do (the image, a file
    /// or a block device, mounted where virt-handler mounts a hot-plugged
    /// claim); prints the guest's target name (`sda`, `vdb`).
    Addvolume,
    /// Standalone `run` only: unplug a hot-plugged volume, `removevolume NAME`.
    Removevolume,
    /// Standalone `run` only: `cpus SOCKETS`, the VMI's CPU sockets
    /// changed (at most `maxSockets`) and the vCPUs of the running domain
    /// hot-plugged or unplugged to match (SyncVirtualMachineCPUs, as
    /// virt-handler sends it after a LiveUpdate of the VM's CPU).
    Cpus,
    /// Standalone `run` only: `memory SIZE` (a quantity, `2Gi`), the VMI's
    /// guest memory changed (within `maxGuest`, from at least the boot
    /// memory) and the running domain's virtio-mem device asked for the
    /// difference (SyncVirtualMachineMemory, as virt-handler sends it after
    /// a LiveUpdate of the VM's memory); prints the domain's current
    /// memory once the guest has taken it (or after 60 s).
    Memory,
    /// Standalone `run` only: `link NAME --state up|down`, the link state
    /// of interface NAME changed in the VMI and in the running domain
    /// (SyncVirtualMachine, as virt-handler sends it after a LiveUpdate of
    /// the VM's interface state).
    Link,
    /// Standalone `run` with a played pod network only (`--setup-pod-network`,
    /// or KubeVirt's default interface): `addinterface NAME --network-name
    /// [NS/]NAD`, a bridge interface on a secondary (Multus)
    /// network hot-plugged into the running VM: the VM's LiveUpdate as
    /// virt-api and virt-controller hand it on, the pod link Multus and
    /// virt-handler's phase 1 would make, then SyncVirtualMachine; prints
    /// the interface's pod link and MAC.
    Addinterface,
    /// Standalone `run` only: `removeinterface NAME`, a hot-plugged bridge
    /// interface unplugged (`state: absent`), its pod link removed.
    Removeinterface,
    /// Live-migrate the guest to the launcher of `--target-socket` (started
    /// with `run --migration-target`), through `virt-launcher
    /// migration-proxy`: SyncMigrationTarget there, then
    /// MigrateVirtualMachine here, as virt-handler does (`--wait SECONDS`
    /// waits for the end and prints the migration record). Volumes and
    /// interfaces hot-plugged after the target started are refused: unplug
    /// them first.
    Migrate,
    /// Cancel the running migration (CancelVirtualMachineMigration).
    MigrateCancel,
    /// Back up the disks with changed block tracking: `backup NAME
    /// --target DIR [--incremental CHECKPOINT] [--pull] [--skip-quiesce]
    /// [--wait SECONDS]` (BackupVirtualMachine, KubeVirt main); prints the
    /// backup's record (its `CheckpointName` is the next incremental's base).
    Backup,
    /// Abort a running backup: `backup-abort NAME --start-time T`.
    BackupAbort,
    /// Define a checkpoint again after a restart from the bitmaps on the
    /// disks: `redefine-checkpoint NAME [--start-time CREATION]`.
    RedefineCheckpoint,
}

/// `ctl` arguments.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The command socket (`<share>/sockets/launcher-sock`).
    #[arg(long)]
    pub socket: PathBuf,
    /// Output format: `text` (default) or `json`.
    #[arg(short = 'o', long = "output", default_value = "text")]
    pub output: String,
    /// What to do.
    pub action: Action,
    /// Memorydump: the dump file (a relative path is taken from the
    /// current directory). Standalone any directory; in a pod
    /// virt-handler's `/var/run/kubevirt/hotplug-disks/<volume>/<file>`.
    /// Other files in its directory whose name contains `memory.dump` are
    /// removed first, as KubeVirt does. Addvolume and removevolume: the
    /// volume's name (a DNS-1123 label).
    pub path: Option<PathBuf>,
    /// Addvolume: the image, a raw image file or a block device (never
    /// through a symbolic link).
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// Addvolume: the disk's bus, `scsi` (virtctl's default) or `virtio`.
    #[arg(long, default_value = "scsi")]
    pub bus: String,
    /// Addvolume: the disk's serial.
    #[arg(long)]
    pub serial: Option<String>,
    /// Addinterface: the Multus network, `[namespace/]name` of its
    /// NetworkAttachmentDefinition.
    #[arg(long)]
    pub network_name: Option<String>,
    /// Addinterface: the interface's binding; KubeVirt hot-plugs only
    /// `bridge` (the default) and SR-IOV.
    #[arg(long, default_value = "bridge")]
    pub binding: String,
    /// Link: the interface's new link state, `up` or `down`.
    #[arg(long)]
    pub state: Option<String>,
    /// Memorydump: wait up to this many seconds for the dump to end, print
    /// its record (`Spec.Metadata.KubeVirt.MemoryDump`) and fail when the
    /// dump failed. Without it the command returns once the dump started
    /// (watching it for a second: a dump that fails at once fails the command).
    /// Either way it fails at once when the request was dropped because
    /// another dump runs (one at a time, as KubeVirt). Migrate: likewise
    /// for the migration (`Spec.Metadata.KubeVirt.Migration`).
    #[arg(long)]
    pub wait: Option<u64>,
    /// Migrate: the target launcher's command socket.
    #[arg(long)]
    pub target_socket: Option<PathBuf>,
    /// Migrate: the migration's UID (`status.migrationState.migrationUid`;
    /// default: one made from the time).
    #[arg(long)]
    pub migration_uid: Option<String>,
    /// Migrate: KubeVirt's `MigrationOptions` JSON (Go field names), by
    /// default the cluster's defaults:
    /// `{"ProgressTimeout":150,"CompletionTimeoutPerGiB":150}`.
    #[arg(long)]
    pub options: Option<String>,
    /// Migrate: `status.migrationMethod`, `BlockMigration` (default: the
    /// local disks are copied, as standalone launchers share no storage)
    /// or `LiveMigration`.
    #[arg(long, default_value = "BlockMigration")]
    pub migration_method: String,
    /// Exec and guestping: seconds to wait for the guest.
    #[arg(long, default_value_t = 10)]
    pub timeout: i32,
    /// Freeze: seconds after which the launcher thaws by itself (0: never).
    #[arg(long = "unfreeze-timeout", default_value_t = 0)]
    pub unfreeze_timeout: i32,
    /// Screenshot: the PNG file to write (`-` for stdout; virtctl's flag).
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// Vmstats: an item to ask for (repeatable): `domainStats`,
    /// `dirtyRate` or a guest agent command (`guest-get-load`,
    /// `guest-get-time`, ...; KubeVirt's list). Default: all of them.
    #[arg(long = "item")]
    pub items: Vec<String>,
    /// Backup: the directory for the backup files (KubeVirt's
    /// `targetPath`; the files go to `<DIR>/<vmi>/<NAME>-<time>/`).
    #[arg(long)]
    pub target: Option<PathBuf>,
    /// Backup: the checkpoint an incremental backup starts from (an
    /// earlier backup's `CheckpointName`).
    #[arg(long)]
    pub incremental: Option<String>,
    /// Backup: pull mode (libvirt serves the disks over NBD on
    /// `/var/run/kubevirt/sockets/backup-nbd-sock` until `backup-abort`).
    #[arg(long)]
    pub pull: bool,
    /// Backup: do not freeze the guest's file systems.
    #[arg(long)]
    pub skip_quiesce: bool,
    /// Backup: the backup's start time (RFC 3339, default now), part of
    /// its checkpoint's name; backup-abort: the backup's; redefine-checkpoint:
    /// the checkpoint's creation time.
    #[arg(long)]
    pub start_time: Option<String>,
    /// Exec: the command and its arguments (after `--`).
    #[arg(last = true)]
    pub command: Vec<String>,
}

pub(crate) fn err(e: impl std::fmt::Display) -> LauncherError {
    LauncherError::runtime(e.to_string())
}

/// A failed call on the command socket: one line, named by the socket
/// (`run` puts its path in place of [`SOCKET_FIELD`]).
pub(crate) fn rpc(s: cmd::client::Status) -> LauncherError {
    LauncherError::runtime_at(SOCKET_FIELD, cmd::client::status_line(&s))
}

/// The field of a failed call until [`run`] names the socket.
const SOCKET_FIELD: &str = "--socket";

/// How long one request may wait for its answer: a minute (a standalone
/// launcher under TCG on a loaded machine can take tens of seconds to
/// define or attach; KubeVirt's virt-handler allows 5 s for reads and 20 s
/// for commands), plus the guest's own `--timeout` for exec and guestping.
/// A socket that accepts but never answers then fails instead of hanging.
pub(crate) fn request_timeout(args: &CtlArgs) -> std::time::Duration {
    std::time::Duration::from_secs(60 + u64::try_from(args.timeout.max(0)).unwrap_or(0))
}

/// A command's `Response`: `Ok` on success, else its message.
pub(crate) fn check(r: Option<cmd::proto::cmd::Response>) -> Result<(), LauncherError> {
    match r {
        Some(r) if r.success => Ok(()),
        Some(r) => Err(LauncherError::runtime(r.message)),
        None => Err(LauncherError::runtime("empty response")),
    }
}

/// GetDomain's domain (KubeVirt's JSON), for the commands that carry the
/// VMI or name the domain.
///
/// # Errors
/// The launcher could not be asked, said no, or has no domain.
pub(crate) async fn current_domain(
    c: &mut cmd::client::CmdChannel,
) -> Result<Value, LauncherError> {
    let d = c
        .get_domain(EmptyRequest {})
        .await
        .map_err(rpc)?
        .into_inner();
    check(d.response)?;
    serde_json::from_str(&d.domain).map_err(|_| err("the launcher has no domain"))
}

/// Runs one `ctl` action and prints the result.
///
/// # Errors
/// a runtime failure ([`LauncherError`], exit 1) when the launcher cannot be reached or says no.
pub fn run(args: &CtlArgs) -> Result<(), LauncherError> {
    let json_out = match args.output.as_str() {
        "json" => true,
        "text" => false,
        other => {
            return Err(LauncherError::input(format!(
                "-o {other:?}: use text or json"
            )))
        }
    };
    let takes_path = matches!(
        args.action,
        Action::Memorydump
            | Action::Addvolume
            | Action::Removevolume
            | Action::Cpus
            | Action::Backup
            | Action::BackupAbort
            | Action::RedefineCheckpoint
            | Action::Memory
            | Action::Link
            | Action::Addinterface
            | Action::Removeinterface
    );
    if let (Some(p), false) = (&args.path, takes_path) {
        let name = args
            .action
            .to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default();
        return Err(LauncherError::input(format!(
            "ctl {name} takes no argument (got {})",
            p.display()
        )));
    }
    check_local(args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(err)?;
    let out: Value = rt
        .block_on(async {
            let mut c =
                cmd::client::Client::connect_with_timeout(&args.socket, request_timeout(args))
                    .await
                    .map_err(err)?
                    .cmd;
            Ok::<Value, LauncherError>(match args.action {
                Action::Ping => {
                    check(Some(
                        c.ping(EmptyRequest {}).await.map_err(rpc)?.into_inner(),
                    ))?;
                    json!({"ok": true})
                }
                Action::Version => {
                    let r = c
                        .get_qemu_version(EmptyRequest {})
                        .await
                        .map_err(rpc)?
                        .into_inner();
                    check(r.response)?;
                    json!({"version": r.version})
                }
                Action::Domain | Action::Interfaces => {
                    let r = c
                        .get_domain(EmptyRequest {})
                        .await
                        .map_err(rpc)?
                        .into_inner();
                    check(r.response)?;
                    let dom = serde_json::from_str(&r.domain).unwrap_or(Value::Null);
                    if args.action == Action::Interfaces {
                        // The launcher does not know which network is the pod's:
                        // no primary reordering (domain order).
                        Value::Array(wire::interfaces_status::vmi_interfaces_status(&dom, None))
                    } else {
                        dom
                    }
                }
                Action::Stats => {
                    let r = c
                        .get_domain_stats(EmptyRequest {})
                        .await
                        .map_err(rpc)?
                        .into_inner();
                    check(r.response)?;
                    serde_json::from_str(&r.domain_stats).unwrap_or(Value::Null)
                }
                Action::Dirtyrate => {
                    let r = c
                        .get_domain_dirty_rate_stats(EmptyRequest {})
                        .await
                        .map_err(rpc)?
                        .into_inner();
                    check(r.response)?;
                    json!({"dirtyRateMbs": r.dirty_rate_mbs})
                }
                Action::Guestinfo | Action::Users | Action::Filesystems => {
                    let (r, j) = match args.action {
                        Action::Guestinfo => {
                            let r = c
                                .get_guest_info(EmptyRequest {})
                                .await
                                .map_err(rpc)?
                                .into_inner();
                            (r.response, r.guest_info_response)
                        }
                        Action::Users => {
                            let r = c
                                .get_users(EmptyRequest {})
                                .await
                                .map_err(rpc)?
                                .into_inner();
                            (r.response, r.guest_user_list_response)
                        }
                        _ => {
                            let r = c
                                .get_filesystems(EmptyRequest {})
                                .await
                                .map_err(rpc)?
                                .into_inner();
                            (r.response, r.guest_filesystems_response)
                        }
                    };
                    check(r)?;
                    serde_json::from_str(&j).map_err(err)?
                }
                Action::Guestping | Action::Exec => {
                    let dom = current_domain(&mut c).await?;
                    let domain_name = dom["Spec"]["Name"].as_str().unwrap_or("").to_owned();
                    if args.action == Action::Guestping {
                        let r = c
                            .guest_ping(cmd::proto::cmd::GuestPingRequest {
                                domain_name,
                                timeout_seconds: args.timeout,
                            })
                            .await
                            .map_err(rpc)?
                            .into_inner();
                        check(r.response)?;
                        json!({"ok": true})
                    } else {
                        let Some((command, rest)) = args.command.split_first() else {
                            return Err(LauncherError::input("exec: give the command after --"));
                        };
                        let r = c
                            .exec(cmd::proto::cmd::ExecRequest {
                                domain_name,
                                command: command.clone(),
                                args: rest.to_vec(),
                                timeout_seconds: args.timeout,
                            })
                            .await
                            .map_err(rpc)?
                            .into_inner();
                        check(r.response)?;
                        json!({"exitCode": r.exit_code, "stdOut": r.std_out})
                    }
                }
                Action::Memorydump => {
                    let Some(path) = &args.path else {
                        return Err(LauncherError::input(
                            "memorydump: give the dump file: memorydump PATH",
                        ));
                    };
                    let path = std::path::absolute(path).map_err(|e| {
                        LauncherError::input(format!("memorydump: {}: {e}", path.display()))
                    })?;
                    let Some(dump_path) = path.to_str() else {
                        return Err(LauncherError::input(format!(
                            "memorydump: {} is not UTF-8",
                            path.display()
                        )));
                    };
                    let dom = current_domain(&mut c).await?;
                    let r = c
                        .virtual_machine_memory_dump(cmd::proto::cmd::MemoryDumpRequest {
                            vmi: Some(vmi_of(&dom)),
                            dump_path: dump_path.to_owned(),
                        })
                        .await
                        .map_err(rpc)?
                        .into_inner();
                    check(Some(r))?;
                    let wait = args.wait.map(std::time::Duration::from_secs);
                    memorydump::wait_for_dump(&mut c, &path, wait).await?
                }
                Action::Screenshot => {
                    let Some(file) = &args.file else {
                        return Err(LauncherError::input(
                            "screenshot: give the PNG file: screenshot -f FILE.png (- for stdout)",
                        ));
                    };
                    let dom = current_domain(&mut c).await?;
                    let r = c
                        .get_screenshot(VmiRequest {
                            vmi: Some(vmi_of(&dom)),
                            options: None,
                        })
                        .await
                        .map_err(rpc)?
                        .into_inner();
                    check(r.response)?;
                    write_file_or_stdout(file, &r.data)?;
                    json!({"mime": r.mime, "bytes": r.data.len(), "file": file})
                }
                Action::Vmstats => vmstats::ask(&mut c, &args.items).await?,
                Action::Backup => backup::backup(&mut c, args, false).await?,
                Action::BackupAbort => backup::backup(&mut c, args, true).await?,
                Action::RedefineCheckpoint => backup::redefine(&mut c, args).await?,
                Action::Addvolume | Action::Removevolume => hotplug::volume(&mut c, args).await?,
                Action::Addinterface | Action::Removeinterface => {
                    nics::interface(&mut c, args).await?
                }
                Action::Cpus => hotplug::cpus(&mut c, args).await?,
                Action::Memory => hotplug::memory(&mut c, args).await?,
                Action::Link => hotplug::link(&mut c, args).await?,
                Action::Migrate | Action::MigrateCancel => {
                    let dom = current_domain(&mut c).await?;
                    if args.action == Action::MigrateCancel {
                        let r = c
                            .cancel_virtual_machine_migration(VmiRequest {
                                vmi: Some(vmi_of(&dom)),
                                options: None,
                            })
                            .await
                            .map_err(rpc)?
                            .into_inner();
                        check(Some(r))?;
                        return Ok(json!({"ok": true}));
                    }
                    migrate::migrate(&mut c, &dom, args).await?
                }
                Action::Pause
                | Action::Unpause
                | Action::Shutdown
                | Action::Kill
                | Action::Softreboot
                | Action::Freeze
                | Action::Unfreeze => {
                    // The commands carry the VMI; its identity comes from the domain.
                    let dom = current_domain(&mut c).await?;
                    let req = VmiRequest {
                        vmi: Some(vmi_of(&dom)),
                        options: None,
                    };
                    let r = match args.action {
                        Action::Pause => c.pause_virtual_machine(req).await,
                        Action::Unpause => c.unpause_virtual_machine(req).await,
                        Action::Shutdown => c.shutdown_virtual_machine(req).await,
                        Action::Softreboot => c.soft_reboot_virtual_machine(req).await,
                        Action::Unfreeze => c.unfreeze_virtual_machine(req).await,
                        Action::Freeze => {
                            c.freeze_virtual_machine(cmd::proto::cmd::FreezeRequest {
                                vmi: req.vmi,
                                unfreeze_timeout_seconds: args.unfreeze_timeout,
                            })
                            .await
                        }
                        _ => c.kill_virtual_machine(req).await,
                    }
                    .map_err(err)?
                    .into_inner();
                    check(Some(r))?;
                    json!({"ok": true})
                }
            })
        })
        .map_err(|mut e| {
            if e.field.as_deref() == Some(SOCKET_FIELD) {
                e.field = Some(format!("the launcher at {}", args.socket.display()));
            }
            e
        })?;
    let pretty = || serde_json::to_string_pretty(&out).unwrap_or_default() + "\n";
    let png_on_stdout = args.action == Action::Screenshot
        && args.file.as_deref() == Some(std::path::Path::new("-"));
    let text = if png_on_stdout {
        // Stdout carries the PNG alone.
        String::new()
    } else if json_out {
        format!("{out}\n")
    } else {
        match args.action {
            Action::Ping
            | Action::Pause
            | Action::Unpause
            | Action::Shutdown
            | Action::Kill
            | Action::Softreboot
            | Action::Guestping
            | Action::Freeze
            | Action::Unfreeze
            | Action::MigrateCancel
            | Action::BackupAbort
            | Action::RedefineCheckpoint => "ok\n".to_owned(),
            Action::Backup => pretty(),
            Action::Migrate if args.wait.is_none() => "ok\n".to_owned(),
            Action::Migrate => pretty(),
            Action::Exec => out["stdOut"].as_str().unwrap_or("").to_owned(),
            Action::Memorydump if args.wait.is_none() => "ok\n".to_owned(),
            Action::Screenshot => format!(
                "{} bytes of {} written to {}\n",
                out["bytes"],
                out["mime"].as_str().unwrap_or(""),
                out["file"].as_str().unwrap_or("")
            ),
            Action::Vmstats => pretty(),
            Action::Addvolume => format!("{}\n", out["target"].as_str().unwrap_or("")),
            Action::Removevolume | Action::Cpus | Action::Link | Action::Removeinterface => {
                "ok\n".to_owned()
            }
            Action::Addinterface => format!(
                "{}\t{}\n",
                out["podInterface"].as_str().unwrap_or(""),
                out["mac"].as_str().unwrap_or("")
            ),
            Action::Memory => format!("{}\n", out["guestCurrent"].as_str().unwrap_or("")),
            Action::Memorydump => pretty(),
            Action::Guestinfo
            | Action::Users
            | Action::Filesystems
            | Action::Stats
            | Action::Interfaces => pretty(),
            Action::Version => format!("{}\n", out["version"].as_str().unwrap_or("")),
            Action::Dirtyrate => format!("{} MiB/s\n", out["dirtyRateMbs"]),
            Action::Domain if out.is_null() => "no domain\n".to_owned(),
            Action::Domain => format!(
                "{}\t{}\t{} ({})\n",
                out["Spec"]["Name"].as_str().unwrap_or(""),
                out["Spec"]["UUID"].as_str().unwrap_or(""),
                out["Status"]["Status"].as_str().unwrap_or(""),
                out["Status"]["Reason"].as_str().unwrap_or("")
            ),
        }
    };
    write_stdout(&text)?;
    if args.action == Action::Vmstats && out["response"]["success"] != true {
        return Err(LauncherError::runtime(
            out["response"]["message"].as_str().unwrap_or("").to_owned(),
        ));
    }
    if !json_out && matches!(args.action, Action::Exec) {
        let code = out["exitCode"].as_i64().unwrap_or(-1);
        if code != 0 {
            return Err(LauncherError::runtime(format!("exit code {code}")));
        }
    }
    Ok(())
}

/// What `ctl` can judge of its own input before asking: the values the
/// launcher would refuse as a bad request (`timeoutSeconds: -1 is
/// negative`) are refused here as input (exit 2, as the launcher refuses
/// its own input), since the launcher's answer carries no class.
///
/// # Errors
/// Input error naming the flag.
fn check_local(args: &CtlArgs) -> Result<(), LauncherError> {
    if args.timeout < 0 && matches!(args.action, Action::Exec | Action::Guestping) {
        return Err(LauncherError::input_at(
            "--timeout",
            format!("{} is negative", args.timeout),
        ));
    }
    if args.unfreeze_timeout < 0 && args.action == Action::Freeze {
        return Err(LauncherError::input_at(
            "--unfreeze-timeout",
            format!("{} is negative", args.unfreeze_timeout),
        ));
    }
    Ok(())
}

/// The VMI a command carries, from the domain: its name, namespace and
/// UID (the launcher checks the UID). Without `kind` and `apiVersion`, as
/// virt-handler sends the VMIs of its informer (kubevirt-facts §11.1).
fn vmi_of(dom: &Value) -> Vmi {
    let uid = dom["Spec"]["Metadata"]["KubeVirt"]["UID"]
        .as_str()
        .unwrap_or("");
    let vmi = json!({
        "metadata": {"name": dom["ObjectMeta"]["name"], "namespace": dom["ObjectMeta"]["namespace"], "uid": uid}
    });
    Vmi {
        vmi_json: vmi.to_string().into_bytes(),
    }
}

/// Writes `data` to `file` (created or truncated; `-`: stdout).
fn write_file_or_stdout(file: &std::path::Path, data: &[u8]) -> Result<(), LauncherError> {
    use std::io::Write;
    if file == std::path::Path::new("-") {
        let mut out = std::io::stdout().lock();
        return match out.write_all(data).and_then(|()| out.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(LauncherError::runtime(
                format!("cannot write to stdout: {e}"),
            )),
            _ => Ok(()),
        };
    }
    std::fs::write(file, data)
        .map_err(|e| LauncherError::runtime(format!("cannot write {}: {e}", file.display())))
}

/// Writes `text` to stdout. A reader that went away (`| head`) is not an
/// error: what it wanted has been written; `println!` would panic there.
fn write_stdout(text: &str) -> Result<(), LauncherError> {
    logging::stdout_text(text)
        .map_err(|e| LauncherError::runtime(format!("cannot write to stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(argv: &[&str]) -> CtlArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            ctl: CtlArgs,
        }
        let all = [&["ctl", "--socket", "/s"], argv].concat();
        <Cli as clap::Parser>::try_parse_from(all).unwrap().ctl
    }

    #[test]
    fn negative_timeouts_are_input_errors_before_asking() {
        let e = check_local(&args(&["exec", "--timeout=-1"])).unwrap_err();
        assert_eq!(e.class, crate::error::ErrorClass::Input);
        assert_eq!(e.to_string(), "--timeout: -1 is negative");
        let e = check_local(&args(&["freeze", "--unfreeze-timeout=-5"])).unwrap_err();
        assert_eq!(e.to_string(), "--unfreeze-timeout: -5 is negative");
        check_local(&args(&["exec", "--timeout=3"])).unwrap();
        check_local(&args(&["ping"])).unwrap();
    }
}
