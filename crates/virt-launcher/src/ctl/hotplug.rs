//! `virt-launcher ctl` commands that change a running VMI (standalone
//! `run` only): `addvolume`, `removevolume` (also a CD-ROM's medium),
//! `cpus`, `memory`, `link`. Each plays virtctl, virt-api,
//! virt-controller and virt-handler (see [`crate::standalone::hotplug`])
//! and talks to the launcher over its command socket as virt-handler does.

use cmd::proto::cmd::{Vmi, VmiRequest};
use serde_json::{json, Value};

use super::{check, current_domain, err, rpc, Action, CtlArgs};
use crate::error::LauncherError;
use crate::standalone::hotplug;

/// What a command that changes one named device of the stored VMI starts
/// with: the device's name (`VERB NAME`, the positional argument), the
/// standalone state directory of `args.socket`, the store's lock (held
/// until the change is done: one change at a time, as virt-handler's one
/// worker per VMI) and the stored VMI.
///
/// # Errors
/// no name (input), or the state directory, lock or store cannot be had.
pub(super) fn named_change(
    args: &CtlArgs,
    verb: &str,
    what: &str,
) -> Result<(String, std::path::PathBuf, hotplug::StoreLock, Value), LauncherError> {
    let name = args
        .path
        .as_deref()
        .and_then(std::path::Path::to_str)
        .ok_or_else(|| {
            LauncherError::input(format!("{verb}: give the {what}'s name: {verb} NAME"))
        })?
        .to_owned();
    let state = hotplug::state_dir_of(&args.socket)?;
    let held = hotplug::lock_store(&state)?;
    let vmi = hotplug::read_store(&state)?;
    Ok((name, state, held, vmi))
}

/// `addvolume` / `removevolume` (see [`crate::standalone::hotplug`]):
/// changes the stored VMI, mounts (or, after the detach, unmounts) the
/// image in the launcher, sends SyncVirtualMachine and checks the domain.
/// Returns `{"target": ...}` of an added volume.
///
/// # Errors
/// virt-api's refusals (input), or the launcher's answer; nothing is left
/// mounted and the stored VMI is unchanged when it fails.
pub(super) async fn volume(
    c: &mut cmd::client::CmdChannel,
    args: &CtlArgs,
) -> Result<Value, LauncherError> {
    let verb = if args.action == Action::Addvolume {
        "addvolume"
    } else {
        "removevolume"
    };
    let (name, state, _held, mut vmi) = named_change(args, verb, "volume")?;
    let sync = |vmi: &Value| VmiRequest {
        vmi: Some(Vmi {
            vmi_json: vmi.to_string().into_bytes(),
        }),
        options: None,
    };
    if args.action == Action::Addvolume {
        let Some(image) = &args.image else {
            return Err(LauncherError::input(
                "addvolume: give the image: --image FILE",
            ));
        };
        hotplug::add_volume(&mut vmi, &name, &args.bus, args.serial.as_deref())?;
        hotplug::admit(&vmi)?;
        let image_path = image;
        let image = hotplug::Image::open(image_path)?;
        let uid = u32::try_from(vmi["status"]["runtimeUser"].as_u64().unwrap_or(0)).unwrap_or(0);
        image.check_user(image_path, &name, uid)?;
        let pid = hotplug::server_pid(&args.socket)?;
        hotplug::mount(pid, &state, &name, &image)?;
        let undo = |e: LauncherError| {
            if let Err(u) = hotplug::unmount(pid, &state, &image.pod_path(&name)) {
                tracing::warn!("{u}");
            }
            e
        };
        let r = c.sync_virtual_machine(sync(&vmi)).await.map_err(rpc);
        check(Some(r.map_err(undo)?.into_inner())).map_err(undo)?;
        let Some(target) = domain_disk(c, &name, true).await.map_err(undo)? else {
            return Err(undo(LauncherError::runtime(format!(
                "volume {name} is not in the domain {} s after the launcher accepted its sync (its disks: {}); the launcher's log may say why",
                DEVICE_WAIT.as_secs(),
                disk_names(c).await
            ))));
        };
        hotplug::mark_ready(&mut vmi, &name, &target);
        hotplug::write_store(&state, &vmi)?;
        Ok(json!({ "target": target }))
    } else {
        hotplug::remove_volume(&mut vmi, &name)?;
        check(Some(
            c.sync_virtual_machine(sync(&vmi))
                .await
                .map_err(rpc)?
                .into_inner(),
        ))?;
        if domain_disk(c, &name, false).await?.is_some() {
            return Err(LauncherError::runtime(format!(
                "volume {name} is still in the domain {} s after the launcher accepted its sync (the guest may not have released it); the launcher's log may say why",
                DEVICE_WAIT.as_secs()
            )));
        }
        if let Some(p) = hotplug::mounted_path(&state, &name) {
            hotplug::unmount(hotplug::server_pid(&args.socket)?, &state, &p)?;
        }
        hotplug::forget_volume(&mut vmi, &name);
        hotplug::write_store(&state, &vmi)?;
        Ok(json!({ "ok": true }))
    }
}

/// Which of the launcher's sync calls carries a change of the VMI: the one
/// virt-handler sends after that kind of LiveUpdate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sync {
    /// SyncVirtualMachine (link state).
    Vmi,
    /// SyncVirtualMachineCPUs.
    Cpus,
    /// SyncVirtualMachineMemory.
    Memory,
}

/// The stand-in's round for a LiveUpdate: reads the stored VMI of the
/// launcher behind `args.socket`, applies `change` to it (virt-api's and
/// virt-controller's part, whose refusals leave everything unchanged) and
/// sends it with `sync`. Returns the state directory, the changed VMI,
/// which the caller stores once the domain shows the change (the stored VMI
/// changes only when the launcher accepted), and the store's lock, held
/// until then (one change of a VMI at a time, see
/// [`crate::standalone::hotplug::lock_store`]).
///
/// For [`Sync::Cpus`] it asks again while libvirt reports a vCPU unplug
/// that timed out, up to [`DEVICE_WAIT`]: virt-handler re-enqueues the VMI
/// after a failed sync and sends it again; libvirt gives up waiting for
/// the guest to eject an unplugged vCPU after 5 s ("vcpu unplug request
/// timed out"), and the next call finds the guest done (or asks again).
///
/// # Errors
/// The refusal of `change` (input), or the launcher's answer.
async fn live_update(
    c: &mut cmd::client::CmdChannel,
    args: &CtlArgs,
    sync: Sync,
    change: impl FnOnce(&mut Value) -> Result<(), LauncherError>,
) -> Result<(std::path::PathBuf, Value, hotplug::StoreLock), LauncherError> {
    let state = hotplug::state_dir_of(&args.socket)?;
    let held = hotplug::lock_store(&state)?;
    let mut vmi = hotplug::read_store(&state)?;
    change(&mut vmi)?;
    let start = std::time::Instant::now();
    loop {
        let req = VmiRequest {
            vmi: Some(Vmi {
                vmi_json: vmi.to_string().into_bytes(),
            }),
            options: None,
        };
        let r = match sync {
            Sync::Vmi => c.sync_virtual_machine(req).await,
            Sync::Cpus => c.sync_virtual_machine_cp_us(req).await,
            Sync::Memory => c.sync_virtual_machine_memory(req).await,
        }
        .map_err(err)?
        .into_inner();
        match check(Some(r)) {
            Err(e)
                if sync == Sync::Cpus
                    && e.to_string().contains("unplug request timed out")
                    && start.elapsed() < DEVICE_WAIT =>
            {
                tracing::info!("{e}; asking again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            other => break other?,
        }
    }
    Ok((state, vmi, held))
}

/// `cpus SOCKETS` (see [`crate::standalone::hotplug::set_sockets`]):
/// changes the stored VMI's sockets and sends SyncVirtualMachineCPUs; the
/// stored VMI changes only when the launcher accepted.
///
/// # Errors
/// virt-api's refusal (input), or the launcher's answer.
pub(super) async fn cpus(
    c: &mut cmd::client::CmdChannel,
    args: &CtlArgs,
) -> Result<Value, LauncherError> {
    let sockets = args
        .path
        .as_deref()
        .and_then(std::path::Path::to_str)
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| LauncherError::input("cpus: give the number of sockets: cpus SOCKETS"))?;
    let (state, vmi, _held) =
        live_update(c, args, Sync::Cpus, |v| hotplug::set_sockets(v, sockets)).await?;
    hotplug::write_store(&state, &vmi)?;
    Ok(json!({ "ok": true }))
}

/// `memory SIZE` (see [`crate::standalone::hotplug::set_guest_memory`]):
/// changes the stored VMI's guest memory, sends SyncVirtualMachineMemory,
/// then waits (up to [`MEMORY_WAIT`]) for the domain's `CurrentMemory` to
/// reach it (the guest plugs the blocks itself) and records it as
/// virt-handler does; the stored VMI changes only when the launcher
/// accepted. Returns `{"guestCurrent": ...}`.
///
/// # Errors
/// virt-controller's refusal (input), or the launcher's answer.
pub(super) async fn memory(
    c: &mut cmd::client::CmdChannel,
    args: &CtlArgs,
) -> Result<Value, LauncherError> {
    let size = args
        .path
        .as_deref()
        .and_then(std::path::Path::to_str)
        .ok_or_else(|| LauncherError::input("memory: give the guest memory: memory SIZE (2Gi)"))?;
    let (state, mut vmi, _held) = live_update(c, args, Sync::Memory, |v| {
        hotplug::set_guest_memory(v, size)
    })
    .await?;
    let want = vmi["spec"]["domain"]["memory"]["guest"].clone();
    let start = std::time::Instant::now();
    let current = loop {
        let dom = current_domain(c).await?;
        let current = hotplug::record_current_memory(&mut vmi, &dom);
        if current.as_ref().is_some_and(|q| *q == want) || start.elapsed() >= MEMORY_WAIT {
            break current;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    hotplug::write_store(&state, &vmi)?;
    Ok(json!({ "guestCurrent": current }))
}

/// `link NAME --state up|down` (see
/// [`crate::standalone::hotplug::set_link_state`]): changes the stored
/// VMI's interface state and sends SyncVirtualMachine; the stored VMI
/// changes only when the launcher accepted.
///
/// # Errors
/// A refused change (input), or the launcher's answer.
pub(super) async fn link(
    c: &mut cmd::client::CmdChannel,
    args: &CtlArgs,
) -> Result<Value, LauncherError> {
    let name = args
        .path
        .as_deref()
        .and_then(std::path::Path::to_str)
        .ok_or_else(|| {
            LauncherError::input("link: give the interface: link NAME --state up|down")
        })?;
    let link_state = args
        .state
        .as_deref()
        .ok_or_else(|| LauncherError::input("link: give the state: --state up|down"))?;
    let (state, vmi, _held) = live_update(c, args, Sync::Vmi, |v| {
        hotplug::set_link_state(v, name, link_state)
    })
    .await?;
    hotplug::write_store(&state, &vmi)?;
    Ok(json!({ "ok": true }))
}

/// How long `memory` waits for the guest to plug what it was given.
const MEMORY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The target of volume `name`'s disk in the domain, polled up to
/// [`DEVICE_WAIT`] until it is `present` (or not): libvirt's device
/// removal ends when the guest has released the device, and the domain
/// the launcher answers with follows libvirt's events.
async fn domain_disk(
    c: &mut cmd::client::CmdChannel,
    name: &str,
    present: bool,
) -> Result<Option<String>, LauncherError> {
    let start = std::time::Instant::now();
    loop {
        let dom = current_domain(c).await?;
        let target = crate::standalone::hotplug::domain_target(&dom, name);
        if target.is_some() == present || start.elapsed() >= DEVICE_WAIT {
            return Ok(target);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The domain's disks by alias, for a message (`?` when it cannot be had).
async fn disk_names(c: &mut cmd::client::CmdChannel) -> String {
    let Ok(dom) = current_domain(c).await else {
        return "?".into();
    };
    let names: Vec<&str> = dom["Spec"]["Devices"]["Disks"]
        .as_array()
        .map(|ds| {
            ds.iter()
                .filter_map(|d| d["Alias"]["Name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    names.join(", ")
}

/// How long a hot-plug or unplug may take to show in the domain.
const DEVICE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
