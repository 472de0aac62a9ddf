//! Facts about this host the conversion needs, probed once.

use std::path::Path;

use api::Arch;
use converter::{ConvertContext, VirtType};

use crate::error::LauncherError;
use crate::flags::LauncherFlags;

/// The conversion context for this host, these flags and a guest of
/// `arch`. A guest of another architecture than the host's always runs
/// under TCG: `/dev/kvm` only runs guests of the host's own.
///
/// # Errors
/// [`LauncherError::Runtime`] when KVM is missing and emulation not allowed.
pub fn context(flags: &LauncherFlags, arch: Arch) -> Result<ConvertContext, LauncherError> {
    let host = Arch::host().map_err(|e| LauncherError::Runtime(e.to_string()))?;
    let foreign = arch != host;
    let kvm = !foreign && Path::new("/dev/kvm").exists();
    let virt =
        converter::choose_virt_type(kvm, flags.allow_emulation || foreign, flags.use_emulation)
            .map_err(|e| LauncherError::Runtime(e.to_string()))?;
    let mut ctx = ConvertContext::new(arch, virt);
    ctx.paths
        .container_disk_dir
        .clone_from(&flags.container_disk_dir);
    ctx.paths
        .ephemeral_disk_dir
        .clone_from(&flags.ephemeral_disk_dir);
    if let Some(o) = &flags.ovmf_path {
        ctx.paths.ovmf_dir.clone_from(o);
    }
    ctx.pod_cpuset = pod_cpuset();
    ctx.ovmf_files = Some(dir_files(&ctx.paths.ovmf_dir));
    ctx.host_numa = host_numa();
    ctx.expand_disks_enabled = flags.expand_disks;
    Ok(ctx)
}

/// Says why the guest runs under TCG, if it does (logged once the input
/// is known to be good, so that a refusal is not preceded by it).
pub(crate) fn log_emulation(flags: &LauncherFlags, ctx: &ConvertContext) {
    let Ok(host) = Arch::host() else { return };
    let foreign = ctx.arch != host;
    if foreign {
        tracing::info!(
            "guest architecture {} on a {host} host: software emulation (TCG)",
            ctx.arch
        );
    }
    let kvm = !foreign && Path::new("/dev/kvm").exists();
    match (ctx.virt_type, kvm || foreign, flags.use_emulation) {
        (VirtType::Qemu, false, _) => {
            tracing::warn!("/dev/kvm is not present: falling back to software emulation (TCG)")
        }
        (VirtType::Qemu, true, true) => {
            tracing::info!("--use-emulation: running the guest under software emulation (TCG)")
        }
        _ => {}
    }
}

/// Where the kernel lists NUMA nodes (`node<N>/cpulist`).
pub const NUMA_NODE_DIR: &str = "/sys/devices/system/node";

/// The host's NUMA nodes with their CPUs; `None` when sysfs does not list
/// them.
pub fn host_numa() -> Option<Vec<converter::numa::HostNumaCell>> {
    let mut cells: Vec<converter::numa::HostNumaCell> = std::fs::read_dir(NUMA_NODE_DIR)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id: u32 = name.strip_prefix("node")?.parse().ok()?;
            let text = std::fs::read_to_string(e.path().join("cpulist")).ok()?;
            let cpus = converter::cputune::parse_cpu_list(&text).ok()?;
            Some(converter::numa::HostNumaCell { id, cpus })
        })
        .collect();
    cells.sort_by_key(|c| c.id);
    (!cells.is_empty()).then_some(cells)
}

/// Names of the regular files in `dir` (the EFI firmware directory);
/// empty when it cannot be read, so EFI VMIs are refused by name.
pub fn dir_files(dir: &str) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.path().is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// cgroup files that list the CPUs this process may run on (v2, then v1).
pub const CPUSET_FILES: [&str; 2] = [
    "/sys/fs/cgroup/cpuset.cpus.effective",
    "/sys/fs/cgroup/cpuset/cpuset.cpus",
];

/// The pod's CPUs from its cgroup cpuset (what KubeVirt pins dedicated
/// vCPUs to); `None` when neither cgroup file is readable or parses.
pub fn pod_cpuset() -> Option<Vec<u32>> {
    CPUSET_FILES.iter().find_map(|f| {
        let text = std::fs::read_to_string(f).ok()?;
        match converter::cputune::parse_cpu_list(&text) {
            Ok(cpus) if !cpus.is_empty() => Some(cpus),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!("{f}: {e}");
                None
            }
        }
    })
}
