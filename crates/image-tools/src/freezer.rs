//! `virt-freezer`: what KubeVirt's backup hooks run in the compute
//! container (v1.6.6 `cmd/virt-freezer/virt-freezer.go`; the pod
//! annotations of `pkg/storage/pod/annotations`:
//! `/usr/bin/virt-freezer --freeze|--unfreeze --name N --namespace NS`).
//!
//! Through the launcher's socket `/run/kubevirt/sockets/launcher-sock`
//! (fixed, as in KubeVirt): GetGuestInfo (no guest agent version: nothing
//! to do, exit 0), GetDomain (not running: nothing to do, exit 0), then
//! FreezeVirtualMachine with `--unfreezeTimeoutSeconds` (default 300) or
//! UnfreezeVirtualMachine, for a VMI that carries only the name and
//! namespace. A freeze refused with `Guest agent not available for now`
//! is followed by an unfreeze. Exit 1 on any failure (flags that do not
//! say what to do, no connection, a failed call), 2 on a flag pflag would
//! not parse, 0 otherwise; KubeVirt's log lines (component `freezer`).

use std::path::Path;

use clap::Parser;

use crate::client::{named_vmi_json, Launcher};

/// The launcher's socket virt-freezer uses (KubeVirt's, not a flag).
pub const SOCKET: &str = "/run/kubevirt/sockets/launcher-sock";
/// The launcher's message when the agent does not answer a freeze.
pub const GA_NOT_AVAILABLE: &str = "Guest agent not available for now";
/// KubeVirt's `snapshot.VSSFreezeLimitReached`.
pub const VSS_FREEZE_LIMIT_REACHED: &str = "fsfreeze is limited";

/// virt-freezer's flags (pflag's names; booleans also as `--freeze=false`).
#[derive(Parser, Debug)]
#[command(
    name = "virt-freezer",
    about = "Freeze or thaw the guest's file systems through the launcher"
)]
pub struct Flags {
    /// Freeze VM
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = crate::parse_go_bool, default_value = "false")]
    pub freeze: bool,
    /// Unfreeze VM
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = crate::parse_go_bool, default_value = "false")]
    pub unfreeze: bool,
    /// Name of the VirtualMachineInstance
    #[arg(long, default_value = "")]
    pub name: String,
    /// Namespace of the VirtualMachineInstance
    #[arg(long, default_value = "")]
    pub namespace: String,
    /// Timeout in seconds to automatically unfreeze the VirtualMachineInstance
    #[arg(
        long = "unfreezeTimeoutSeconds",
        default_value_t = 300,
        allow_hyphen_values = true
    )]
    pub unfreeze_timeout_seconds: i32,
}

/// What the flags say, checked as KubeVirt's `parseFlags` does.
///
/// # Errors
/// KubeVirt's message (exit 1).
pub fn check(f: &Flags) -> Result<(), String> {
    if !f.freeze && !f.unfreeze {
        return Err("either --freeze or --unfreeze must be set".into());
    }
    if f.name.is_empty() || f.namespace.is_empty() {
        return Err("both --name and --namespace must be provided".into());
    }
    Ok(())
}

/// Runs virt-freezer against the launcher at `socket`; its exit status.
pub fn run(f: &Flags, socket: &Path) -> i32 {
    if let Err(e) = check(f) {
        tracing::error!(reason = %e, "Failed to parse flags");
        return 1;
    }
    let mut c = match Launcher::connect(socket) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(reason = %e, "Failed to connect launcher");
            return 1;
        }
    };
    match freeze_or_thaw(f, &mut c) {
        Ok(()) => 0,
        Err(()) => 1,
    }
}

fn freeze_or_thaw(f: &Flags, c: &mut Launcher) -> Result<(), ()> {
    let info = c.guest_info().map_err(|e| {
        tracing::error!(reason = %e, "Failed to get guest info");
    })?;
    let version = info["guestAgentVersion"].as_str().unwrap_or("");
    if version.is_empty() {
        tracing::info!("No guest agent, exiting");
        return Ok(());
    }
    tracing::info!("Guest agent version is {version}");
    let dom = c.domain().map_err(|e| {
        tracing::error!(reason = %e, "Failed to get domain");
    })?;
    let running = dom.is_some_and(|d| d["Status"]["Status"] == "Running");
    if !running {
        tracing::info!("VM domain not running, no need to freeze/unfreeze");
        return Ok(());
    }
    let vmi = named_vmi_json(&f.name, &f.namespace);
    if f.freeze {
        if let Err(e) = c.freeze(vmi.clone(), f.unfreeze_timeout_seconds) {
            if e.to_string().contains(GA_NOT_AVAILABLE) {
                let _ = c.unfreeze(vmi);
                let os = info["os"]["name"].as_str().unwrap_or("").to_lowercase();
                if os.contains("windows") {
                    tracing::error!(reason = %e, "Freezing VMI failed, please make sure guest agent and VSS are running and try again");
                } else {
                    tracing::error!(reason = %e, "Freezing VMI failed, please make sure guest agent is running and try again");
                }
            } else {
                tracing::error!(reason = %e, "Freezing VMI failed");
            }
            return Err(());
        }
    } else if let Err(e) = c.unfreeze(vmi) {
        if e.to_string().contains(VSS_FREEZE_LIMIT_REACHED) {
            tracing::error!(reason = %e, "Unfreezing VMI failed, please try again. If problem continues, stop the VM and backup while down");
        } else {
            tracing::error!(reason = %e, "Unfreezing VMI failed");
        }
        return Err(());
    }
    tracing::info!("Operation completed successfully");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(a: &[&str]) -> Result<Flags, clap::Error> {
        Flags::try_parse_from(std::iter::once("virt-freezer").chain(a.iter().copied()))
    }

    #[test]
    fn flags_read_as_kubevirts() {
        let f = flags(&["--freeze", "--name", "v", "--namespace", "n"]).unwrap();
        assert!(f.freeze && !f.unfreeze && f.unfreeze_timeout_seconds == 300);
        assert_eq!(check(&f), Ok(()));
        let f = flags(&[
            "--unfreeze",
            "--name=v",
            "--namespace=n",
            "--unfreezeTimeoutSeconds",
            "5",
        ])
        .unwrap();
        assert!(f.unfreeze && f.unfreeze_timeout_seconds == 5);
        let f = flags(&["--freeze=false", "--name", "v", "--namespace", "n"]).unwrap();
        assert_eq!(
            check(&f),
            Err("either --freeze or --unfreeze must be set".into())
        );
        let f = flags(&["--freeze", "--name", "v"]).unwrap();
        assert_eq!(
            check(&f),
            Err("both --name and --namespace must be provided".into())
        );
        // pflag's own errors: exit 2.
        assert_eq!(flags(&["--bogus"]).unwrap_err().exit_code(), 2);
        assert_eq!(
            flags(&["--unfreezeTimeoutSeconds", "x"])
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    #[test]
    fn without_a_launcher_it_exits_1() {
        let dir = tempfile::tempdir().unwrap();
        let f = flags(&["--freeze", "--name", "v", "--namespace", "n"]).unwrap();
        assert_eq!(run(&f, &dir.path().join("launcher-sock")), 1);
        let f = flags(&["--name", "v", "--namespace", "n"]).unwrap();
        assert_eq!(run(&f, &dir.path().join("launcher-sock")), 1);
    }
}
