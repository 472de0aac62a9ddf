//! Facts about this host that every conversion of one launcher uses
//! ([`converter::HostFacts`]): the domain type (KVM or TCG), the pod's
//! directory layout from the flags, the pod's CPUs, the host's NUMA nodes
//! and the EFI firmware files. Probed once ([`probe`]), for `run`, pod
//! mode and `convert` alike; the domain manager keeps them.

use std::path::Path;

use api::Arch;
use converter::{HostFacts, VirtType};

use crate::error::LauncherError;
use crate::flags::LauncherFlags;

/// Where the domain of the conversions will run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// On this host (`run`, pod mode): a guest of another architecture
    /// than the host's always runs under TCG (`/dev/kvm` only runs guests
    /// of the host's own), and the firmware directory is read.
    ThisHost,
    /// On some host of the guest's architecture (`convert`): one of another
    /// architecture is assumed to have `/dev/kvm`, and firmware files are a
    /// fact of this host only (not read for another architecture).
    AnyHost,
}

/// How the guest may be emulated (KubeVirt's `--allow-emulation`, and
/// `--use-emulation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emulation {
    /// TCG when `/dev/kvm` is absent.
    pub allow: bool,
    /// TCG always.
    pub always: bool,
}

/// Probes this host for a guest of `arch` whose domain runs on `target`;
/// `layout`: the pod's directories from the launcher's flags (`None`:
/// KubeVirt's defaults).
///
/// # Errors
/// a runtime failure ([`LauncherError`], exit 1) when KVM is missing and emulation not allowed
/// (KubeVirt's `hardware emulation device '/dev/kvm' not present`), or the
/// host's architecture is unknown.
pub fn probe(
    arch: Arch,
    target: Target,
    emulation: Emulation,
    layout: Option<&LauncherFlags>,
) -> Result<HostFacts, LauncherError> {
    let host = Arch::host().map_err(|e| LauncherError::runtime(e.to_string()))?;
    let foreign = arch != host;
    let dev_kvm = Path::new("/dev/kvm").exists();
    let (kvm, allow) = match target {
        Target::ThisHost => (!foreign && dev_kvm, emulation.allow || foreign),
        Target::AnyHost => (foreign || dev_kvm, emulation.allow),
    };
    let virt = converter::choose_virt_type(kvm, allow, emulation.always)
        .map_err(|e| LauncherError::runtime(e.to_string()))?;
    let mut facts = HostFacts::new(arch, virt);
    if let Some(flags) = layout {
        let paths = &mut facts.paths;
        paths
            .container_disk_dir
            .clone_from(&flags.container_disk_dir);
        paths
            .ephemeral_disk_dir
            .clone_from(&flags.ephemeral_disk_dir);
        if let Some(o) = &flags.ovmf_path {
            paths.ovmf_dir.clone_from(o);
        }
    }
    facts.pod_cpuset = pod_cpuset();
    if target == Target::ThisHost || !foreign {
        facts.ovmf_files = Some(dir_files(&facts.paths.ovmf_dir));
    }
    facts.host_numa = host_numa();
    // The device plugins' PCI/MDEV/USB variables (KubeVirt reads them when
    // converting `gpus` and `hostDevices`); also for `convert` and `run`.
    facts.device_plugin_env = std::env::vars()
        .filter(|(k, _)| converter::hostdevices::is_device_plugin_var(k))
        .collect();
    // KubeVirt reads the verbosity from the environment when converting.
    facts.firmware_debug_log = converter::firmware_log::wanted(
        std::env::var("VIRT_LAUNCHER_LOG_VERBOSITY").ok().as_deref(),
    );
    Ok(facts)
}

/// [`probe`] for a launcher running a guest of `arch` here with `flags`.
///
/// # Errors
/// As [`probe`].
pub fn for_launcher(flags: &LauncherFlags, arch: Arch) -> Result<HostFacts, LauncherError> {
    let emulation = Emulation {
        allow: flags.allow_emulation,
        always: flags.use_emulation,
    };
    probe(arch, Target::ThisHost, emulation, Some(flags))
}

/// Says why the guest runs under TCG, if it does (logged once the input
/// is known to be good, so that a refusal is not preceded by it).
pub(crate) fn log_emulation(flags: &LauncherFlags, facts: &HostFacts) {
    let Ok(host) = Arch::host() else { return };
    let foreign = facts.arch != host;
    if foreign {
        tracing::info!(
            "guest architecture {} on a {host} host: software emulation (TCG)",
            facts.arch
        );
    }
    let kvm = !foreign && Path::new("/dev/kvm").exists();
    match (facts.virt_type, kvm || foreign, flags.use_emulation) {
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

/// The CPUs of process `pid`'s cgroup cpuset, as virt-handler's cgroup
/// manager reads a pod's (`GetCpuSet`): `/proc/<pid>/cgroup` names the
/// cgroup (the `cpuset` controller's line on v1, the `0::` line on v2),
/// whose `cpuset.cpus` (v1) or `cpuset.cpus.effective` (v2) lists them.
/// Paths with `..` are refused; reads are bounded (64 KiB).
///
/// # Errors
/// A message naming the file that could not be read or parsed.
pub fn cgroup_cpuset_of(pid: i32) -> Result<Vec<u32>, String> {
    use std::io::Read;
    let read = |path: &str| -> Result<String, String> {
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(64 * 1024).read_to_string(&mut text))
            .map_err(|e| format!("{path}: {e}"))?;
        Ok(text)
    };
    let table = read(&format!("/proc/{pid}/cgroup"))?;
    let mut v1 = None;
    let mut v2 = None;
    for line in table.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if controllers.split(',').any(|c| c == "cpuset") {
            v1 = Some(path.to_owned());
        } else if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_owned());
        }
    }
    let file = match (v1, v2) {
        (Some(p), _) => format!("/sys/fs/cgroup/cpuset{p}/cpuset.cpus"),
        (None, Some(p)) => format!("/sys/fs/cgroup{p}/cpuset.cpus.effective"),
        (None, None) => return Err(format!("/proc/{pid}/cgroup: no cpuset cgroup")),
    };
    if file.split('/').any(|c| c == "..") {
        return Err(format!("{file}: not a cgroup path"));
    }
    converter::cputune::parse_cpu_list(&read(&file)?).map_err(|e| format!("{file}: {e}"))
}

/// This node's NUMA topology as virt-handler sends it in
/// `targetNodeTopology` (JSON of cmd's `Topology` with Go's protobuf
/// field names and `omitempty`: `numa_cells`, each with its `id` and
/// `cpus`, each CPU with its `id` and thread `siblings`), read from sysfs
/// as libvirt's capabilities report it. The cells' memory, pages and
/// distances are left out: no launcher reads them (this one's pinning
/// does not use the topology; see `converter::cputune`).
pub fn node_topology_json() -> String {
    let cells: Vec<serde_json::Value> = host_numa()
        .unwrap_or_default()
        .into_iter()
        .map(|cell| {
            let cpus: Vec<serde_json::Value> = cell
                .cpus
                .iter()
                .map(|&c| {
                    let siblings = std::fs::read_to_string(format!(
                        "/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
                    ))
                    .ok()
                    .and_then(|t| converter::cputune::parse_cpu_list(&t).ok())
                    .unwrap_or_default();
                    let mut cpu = serde_json::Map::new();
                    if c != 0 {
                        cpu.insert("id".into(), c.into());
                    }
                    if !siblings.is_empty() {
                        cpu.insert("siblings".into(), siblings.into());
                    }
                    serde_json::Value::Object(cpu)
                })
                .collect();
            let mut out = serde_json::Map::new();
            if cell.id != 0 {
                out.insert("id".into(), cell.id.into());
            }
            if !cpus.is_empty() {
                out.insert("cpus".into(), cpus.into());
            }
            serde_json::Value::Object(out)
        })
        .collect();
    let mut topo = serde_json::Map::new();
    if !cells.is_empty() {
        topo.insert("numa_cells".into(), cells.into());
    }
    serde_json::Value::Object(topo).to_string()
}
