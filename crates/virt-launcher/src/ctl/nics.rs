//! `virt-launcher ctl addinterface` / `removeinterface` (standalone `run`
//! only): NIC hot-plug and unplug on a running VM. Each plays what the
//! cluster does before the launcher's SyncVMI (see
//! [`crate::standalone::nics`]), through the same stored VMI and command
//! socket as the volume commands ([`crate::standalone::hotplug`]), and
//! talks to the launcher as virt-handler does.

use cmd::proto::cmd::{Vmi, VmiRequest};
use serde_json::{json, Value};

use super::{check, current_domain, err, Action, CtlArgs};
use crate::error::LauncherError;
use crate::standalone::{hotplug, nics};

/// How long a plug or unplug may take to show in the domain (libvirt's
/// detach ends when the guest has released the NIC).
const DEVICE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Sends SyncVirtualMachine with `vmi` (JSON, no options: standalone has
/// KubeVirt's defaults) and checks the answer.
async fn sync(c: &mut cmd::client::CmdChannel, vmi: &Value) -> Result<(), LauncherError> {
    let r = c
        .sync_virtual_machine(VmiRequest {
            vmi: Some(Vmi {
                vmi_json: vmi.to_string().into_bytes(),
            }),
            options: None,
        })
        .await
        .map_err(err)?
        .into_inner();
    check(Some(r))
}

/// The MAC of interface `name` in the domain, polled up to
/// [`DEVICE_WAIT`] until it is `present` (or not).
async fn domain_interface(
    c: &mut cmd::client::CmdChannel,
    name: &str,
    present: bool,
) -> Result<Option<String>, LauncherError> {
    let start = std::time::Instant::now();
    loop {
        let mac = nics::domain_interface(&current_domain(c).await?, name);
        if mac.is_some() == present || start.elapsed() >= DEVICE_WAIT {
            return Ok(mac);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// `addinterface NAME --network-name NAD [--binding bridge]` and
/// `removeinterface NAME`: the stored VMI changed, phase 1 played for the
/// network (or undone after the detach), SyncVirtualMachine sent, the
/// domain checked; the stored VMI changes only when all of it succeeded.
/// Returns `{"interface", "podInterface", "mac"}` of a plugged NIC.
///
/// # Errors
/// virt-api's refusals (input), the pod link that cannot be made, or the
/// launcher's answer; a failed plug leaves no pod link behind.
pub(super) async fn interface(
    c: &mut cmd::client::CmdChannel,
    args: &CtlArgs,
) -> Result<Value, LauncherError> {
    let add = args.action == Action::Addinterface;
    let verb = if add {
        "addinterface"
    } else {
        "removeinterface"
    };
    let (name, state, _held, mut vmi) = super::hotplug::named_change(args, verb, "interface")?;
    let pid = hotplug::server_pid(&args.socket)?;
    if !add {
        nics::set_absent(&mut vmi, &name)?;
        sync(c, &vmi).await?;
        if domain_interface(c, &name, false).await?.is_some() {
            return Err(LauncherError::runtime(format!(
                "interface {name} is still attached (the launcher's log says why)"
            )));
        }
        nics::unplug_pod_link(pid, &state, &name)?;
        // Multus dropped the pod interface, virt-handler its status entry,
        // virt-controller the absent interface: the next sync has none.
        nics::forget_interface(&mut vmi, &name);
        sync(c, &vmi).await?;
        hotplug::write_store(&state, &vmi)?;
        return Ok(json!({ "ok": true }));
    }
    nics::add_interface(&mut vmi, &name, args.network_name.as_deref(), &args.binding)?;
    hotplug::admit(&vmi)?;
    let index = vmi["spec"]["domain"]["devices"]["interfaces"]
        .as_array()
        .map_or(0, |a| a.len().saturating_sub(1));
    let uid = u32::try_from(vmi["status"]["runtimeUser"].as_u64().unwrap_or(0)).unwrap_or(0);
    let multi_queue = vmi["spec"]["domain"]["devices"]["networkInterfaceMultiqueue"] == true;
    let pod = nics::plug_pod_link(
        pid,
        &state,
        &name,
        index,
        (uid != 0).then_some(uid),
        multi_queue,
    )?;
    nics::report_pod_interface(&mut vmi, &name, &pod);
    let undo = |e: LauncherError| {
        if let Err(u) = nics::unplug_pod_link(pid, &state, &name) {
            tracing::warn!("{u}");
        }
        e
    };
    sync(c, &vmi).await.map_err(undo)?;
    let Some(mac) = domain_interface(c, &name, true).await.map_err(undo)? else {
        return Err(undo(LauncherError::runtime(format!(
            "interface {name} was not attached (the launcher's log says why)"
        ))));
    };
    hotplug::write_store(&state, &vmi)?;
    Ok(json!({ "interface": name, "podInterface": pod, "mac": mac }))
}
