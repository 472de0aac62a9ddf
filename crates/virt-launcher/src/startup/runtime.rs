//! The private runtime.

use std::path::Path;
use std::time::{Duration, Instant};

use api::VirtualMachineInstance;
use converter::ConvertContext;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use storage::ConfigSources;
use virtwrap::config::{DaemonConfig, DaemonKind};
use virtwrap::supervisor::{DaemonSpec, Supervisor};

use super::domain::run_domain;
use super::{Mode, PRIVATE_DIR};
use crate::error::LauncherError;
use crate::flags::LauncherFlags;
use crate::standalone::claims::{Claim, ClaimSource};

/// KubeVirt's directory initialisation (facts 1.4 step 3).
fn initialize_dirs(
    vmi: &VirtualMachineInstance,
    flags: &LauncherFlags,
) -> Result<(), LauncherError> {
    let mk = |p: &str| {
        std::fs::create_dir_all(p).map_err(|e| LauncherError::Runtime(format!("mkdir {p}: {e}")))
    };
    let uid_dir = format!("{PRIVATE_DIR}/{}", vmi.uid());
    for d in [
        uid_dir.as_str(),
        &format!("{}/cloud-init-data", flags.ephemeral_disk_dir),
        &format!("{}/ignition-data", flags.ephemeral_disk_dir),
        &format!("{}/disk-data", flags.ephemeral_disk_dir),
        &flags.container_disk_dir,
        &flags.hotplug_disk_dir,
        &format!("{PRIVATE_DIR}/vmi-disks"),
        "/var/run/libvirt/empty-disks",
        &format!("{}/sockets", flags.kubevirt_share_dir),
    ] {
        mk(d)?;
    }
    let log = format!("{uid_dir}/virt-serial0-log");
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| LauncherError::Runtime(format!("create {log}: {e}")))?;
    Ok(())
}

/// Steps 3-6 inside the private runtime.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_in_runtime(
    vmi: &VirtualMachineInstance,
    sync: bool,
    flags: &LauncherFlags,
    ctx: &ConvertContext,
    daemon: &DaemonKind,
    mode: Mode,
    claims: &[Claim],
    config_sources: &ConfigSources,
    started: Instant,
) -> Result<(), LauncherError> {
    initialize_dirs(vmi, flags)?;
    if flags.simulate_crash {
        return Err(LauncherError::Runtime(
            "Simulated virt-launcher crash".into(),
        ));
    }
    if let Err(e) = process::become_subreaper() {
        tracing::warn!("cannot become a child subreaper: {e}");
    }

    let mut cfg = DaemonConfig::default();
    if !flags.libvirt_log_filters.is_empty() {
        cfg.log_filters = Some(flags.libvirt_log_filters.clone());
    }
    if Path::new("/dev/hugepages").is_dir() {
        cfg.hugetlbfs_mount = Some("/dev/hugepages".into());
    }
    virtwrap::config::write_all(Path::new("/etc/libvirt"), daemon, &cfg)
        .map_err(|e| LauncherError::Runtime(format!("writing libvirt configuration: {e}")))?;

    let mut sup = Supervisor::new();
    let spawn_err =
        |name: &str, e: std::io::Error| LauncherError::Runtime(format!("cannot start {name}: {e}"));
    sup.start(DaemonSpec {
        name: "virtlogd".into(),
        program: "/usr/sbin/virtlogd".into(),
        // Pid files default to /run/<daemon>.pid, outside the private
        // runtime: keep them in it so launchers never contend for them.
        args: vec![
            "-f".into(),
            "/etc/libvirt/virtlogd.conf".into(),
            "-p".into(),
            "/var/run/libvirt/virtlogd.pid".into(),
        ],
    })
    .map_err(|e| spawn_err("virtlogd", e))?;
    sup.start(DaemonSpec {
        name: daemon.name().into(),
        program: daemon.program().to_owned(),
        args: vec![
            "-f".into(),
            format!("/etc/libvirt/{}", daemon.config_file()),
            "-p".into(),
            format!("/var/run/libvirt/{}.pid", daemon.name()),
        ],
    })
    .map_err(|e| spawn_err(daemon.name(), e))?;

    // Block-mode PVCs are device nodes in the pod's /dev. Standalone, only
    // the `--pvc` block claims are (nodes in the launcher's private /dev):
    // the host's devices are never handed out by volume name.
    let block_volumes = (mode == Mode::Standalone).then(|| {
        claims
            .iter()
            .filter(|c| c.source == ClaimSource::Block)
            .map(|c| c.volume.clone())
            .collect()
    });
    let result = run_domain(
        vmi,
        sync,
        flags,
        ctx,
        daemon,
        &sup,
        block_volumes,
        config_sources,
        started,
    );
    sup.stop(Duration::from_secs(5));
    kill_leftover_children();
    result
}

/// Kills whatever is still a child of the launcher once the daemons have
/// stopped: as the subreaper it inherits every QEMU libvirt started, also
/// for domains someone else defined in its daemon. Nothing may outlive it.
fn kill_leftover_children() {
    let mut pids = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                pids.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    for pid in pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        tracing::warn!(pid, process = comm.trim(), "killing a process left behind");
        let _ = kill(
            Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
            Signal::SIGKILL,
        );
        process::reaper().wait(pid, Some(Duration::from_secs(2)));
    }
}
