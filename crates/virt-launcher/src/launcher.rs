//! The start-up sequence, supervision and shutdown of one VMI (KubeVirt
//! `cmd/virt-launcher/virt-launcher.go`, sections 1.4-1.8 of the facts):
//!
//! 1. check the VMI converts (no daemon is started for input that cannot run);
//! 2. private runtime: state directory, mount namespace, bind mounts;
//! 3. KubeVirt's directories; libvirt configuration; virtlogd and the
//!    libvirt daemon under supervision; connection (waiting on the socket);
//! 4. SyncVMI: prepare volumes, convert, define, start;
//! 5. watch QEMU until it exits, shutting the guest down on a signal (ACPI,
//!    then kill after the grace period);
//! 6. stop the daemons, undo the mounts, remove the state, exit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use api::{Arch, VirtualMachineInstance};
use converter::{ConvertContext, ConvertError, VirtType};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use storage::{ConfigSources, PrepareOptions};
use virtwrap::config::{DaemonConfig, DaemonKind};
use virtwrap::manager::Connector;
use virtwrap::supervisor::{DaemonSpec, Supervisor};
use virtwrap::{DomainManager, LibvirtDomainManager, ManagerError};

use crate::flags::LauncherFlags;
use crate::isolation::{enter_private_mount_namespace, IsolationError, Mounts, StateDir};
use crate::service::{DomainCache, DumpPolicy, Identity, LauncherHandler};

/// Exit code for input the launcher refuses (bad or unsupported VMI).
pub const EXIT_INPUT: u8 = 2;
/// Exit code for a runtime failure.
pub const EXIT_FAILURE: u8 = 1;

/// How the launcher failed, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    /// The VMI or the flags are not acceptable (exit 2).
    #[error("{0}")]
    Input(String),
    /// Something failed while running (exit 1).
    #[error("{0}")]
    Runtime(String),
}

impl LauncherError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            LauncherError::Input(_) => EXIT_INPUT,
            LauncherError::Runtime(_) => EXIT_FAILURE,
        }
    }
}

impl From<IsolationError> for LauncherError {
    fn from(e: IsolationError) -> Self {
        match e {
            IsolationError::Busy(_)
            | IsolationError::Foreign(_)
            | IsolationError::NotADirectory(_) => LauncherError::Input(format!("--state-dir: {e}")),
            _ => LauncherError::Runtime(e.to_string()),
        }
    }
}

fn manager_error(e: ManagerError) -> LauncherError {
    match e {
        ManagerError::Convert(ConvertError::Host(m)) => LauncherError::Runtime(m),
        ManagerError::Convert(_) | ManagerError::Storage(storage::StorageError::Volume { .. }) => {
            LauncherError::Input(e.to_string())
        }
        other => LauncherError::Runtime(other.to_string()),
    }
}

/// Which directories the launcher makes private.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `virt-launcher run`: everything, including the share, ephemeral and
    /// container-disk directories, lives in the state directory.
    Standalone,
    /// KubeVirt's pod: the share and disk directories are virt-handler's and
    /// are used in place; only libvirt's and the private directory are made
    /// private.
    Pod,
}

/// The runtime settings of `virt-launcher run` (and of pod mode).
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// Which directories are private.
    pub mode: Mode,
    /// Architecture of the guest: the host's, except for a standalone run
    /// with `--arch` (always TCG then, see [`context`]).
    pub arch: Arch,
    /// Private state directory.
    pub state_dir: PathBuf,
    /// containerDisk volume name → image file on the host.
    pub container_disks: Vec<(String, PathBuf)>,
    /// Standalone: the claims of persistentVolumeClaim, dataVolume and
    /// ephemeral volumes (`--pvc`): image files, directories or block
    /// devices on the host, shown where virt-handler and kubelet put them.
    pub pvcs: Vec<PvcArg>,
    /// Standalone: access credential secret name → directory of its keys
    /// (`--access-credential`).
    pub access_credentials: Vec<(String, PathBuf)>,
    /// Standalone: config volume (or cloud-init secret) name → directory
    /// on the host holding its files (`--config-volume`).
    pub config_volumes: Vec<(String, PathBuf)>,
    /// Keep the state directory after exit.
    pub keep_state: bool,
    /// Shared libvirt capability cache (QEMU probing costs seconds per start).
    pub cache_dir: PathBuf,
    /// Standalone: build the pod network in a fresh network namespace
    /// (`--setup-pod-network`) and run network phase 2 on it.
    pub setup_pod_network: bool,
    /// Standalone: the pod network is built for KubeVirt's default
    /// interface, which the VMI got for naming no network (logged once
    /// the input is known to be good).
    pub default_pod_interface: bool,
    /// Standalone: KubeVirt's backend storage (`--backend-storage`), the
    /// directory that keeps EFI variables and TPM state across runs.
    pub backend_storage: Option<PathBuf>,
    /// Standalone: KubeVirt's network-info downward API file
    /// (`--network-info`), giving each SR-IOV interface's VF.
    pub network_info: Option<PathBuf>,
}

/// Where the kernel lists the host's PCI devices (`<dddd:bb:ss.f>/`).
pub const SYS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// The host PCI address of each live SR-IOV interface, before anything
/// starts: standalone from `--network-info` (and the device must exist on
/// this host: libvirt could not start the domain otherwise), in a pod with
/// the VMI at hand from `/etc/podinfo/network-info` or the device
/// plugin's environment. Empty when the VMI has no SR-IOV interface.
///
/// # Errors
/// [`LauncherError::Input`], one line naming the interface field and the
/// file, variable or device.
pub fn sriov_addresses(
    vmi: &VirtualMachineInstance,
    settings: &RuntimeSettings,
) -> Result<std::collections::BTreeMap<String, String>, LauncherError> {
    let live = converter::sriov::live_interfaces(vmi);
    let Some(&(first, _)) = live.first() else {
        return Ok(std::collections::BTreeMap::new());
    };
    if settings.mode == Mode::Pod {
        return network::sriov::pod_host_addresses(vmi).map_err(LauncherError::Input);
    }
    let Some(file) = &settings.network_info else {
        return Err(LauncherError::Input(format!(
            "spec.domain.devices.interfaces[{first}].sriov: the host address of the SR-IOV VF is needed: pass --network-info FILE (KubeVirt's network-info format)"
        )));
    };
    let info = network::sriov::read_network_info(file, false, std::time::Duration::ZERO)
        .map_err(|e| LauncherError::Input(format!("--network-info {e}")))?;
    let name = file.display().to_string();
    let found = network::sriov::host_addresses(vmi, info.as_ref(), &name, None)
        .map_err(LauncherError::Input)?;
    for (i, iface) in live {
        let addr = &found[&iface.name];
        // libvirt reads the device only when the domain starts, and fails
        // then; a missing device is refused before anything starts.
        let dev = Path::new(SYS_PCI_DEVICES).join(addr.to_ascii_lowercase());
        if !dev.exists() {
            return Err(LauncherError::Input(format!(
                "spec.domain.devices.interfaces[{i}].sriov: host PCI device {addr} (from {name}) does not exist on this host ({}): running needs a real SR-IOV VF bound to vfio-pci",
                dev.display()
            )));
        }
        // managed='no' (KubeVirt's): libvirt neither detaches the device
        // from its host driver nor binds it to vfio-pci; it must be so.
        let driver = std::fs::read_link(dev.join("driver"))
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        if driver.as_deref() != Some("vfio-pci") {
            return Err(LauncherError::Input(format!(
                "spec.domain.devices.interfaces[{i}].sriov: host PCI device {addr} (from {name}) is {}, not bound to vfio-pci: running needs a real SR-IOV VF bound to vfio-pci",
                driver.map_or_else(|| "bound to no driver".to_owned(), |d| format!("bound to {d}"))
            )));
        }
    }
    Ok(found)
}

/// Where KubeVirt mounts the backend storage (the `persistent-state-for-<vm>`
/// claim) in the pod: (subdirectory of the storage, mount point).
/// KubeVirt v1.6.6 `pkg/storage/backend-storage`.
const BACKEND_STORAGE_MOUNTS: [(&str, &str); 2] = [
    ("nvram", "/var/lib/libvirt/qemu/nvram"),
    ("swtpm", "/var/lib/libvirt/swtpm"),
];

/// The field that asks for backend storage (persistent EFI variables or
/// TPM state), if any.
fn backend_storage_field(vmi: &VirtualMachineInstance) -> Option<&'static str> {
    let dom = &vmi.spec.domain;
    let efi = dom
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref())
        .and_then(|b| b.efi.as_ref())
        .is_some_and(|e| e.persistent == Some(true));
    let tpm = dom
        .devices
        .tpm
        .as_ref()
        .is_some_and(|t| t.enabled != Some(false) && t.persistent == Some(true));
    if efi {
        Some("spec.domain.firmware.bootloader.efi.persistent")
    } else if tpm {
        Some("spec.domain.devices.tpm.persistent")
    } else {
        None
    }
}

/// Entries of directory `dir` other than `allowed` (sorted, at most five
/// named): a directory given as a claim or backend storage must hold
/// nothing else, so a typo such as `/etc` is refused, never written into.
fn foreign_entries(dir: &Path, allowed: &[&str]) -> Result<Vec<String>, std::io::Error> {
    let mut out: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !allowed.contains(&n.as_str()))
        .collect();
    out.sort();
    Ok(out)
}

/// `what`: `dir` holds entries it should not (see [`foreign_entries`]).
fn refuse_foreign_entries(what: &str, dir: &Path, allowed: &[&str]) -> Result<(), LauncherError> {
    let extra =
        foreign_entries(dir, allowed).map_err(|e| LauncherError::Input(format!("{what}: {e}")))?;
    if extra.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = extra.iter().take(5).map(String::as_str).collect();
    Err(LauncherError::Input(format!(
        "{what}: {} holds {}{}, but may hold only {}; refusing to use it",
        dir.display(),
        shown.join(", "),
        if extra.len() > 5 { ", ..." } else { "" },
        allowed.join(", ")
    )))
}

/// Standalone: the backend storage directory, checked; a VMI that asks for
/// persistence without one is refused (its state would be lost silently).
fn backend_storage_dir(
    vmi: &VirtualMachineInstance,
    s: &RuntimeSettings,
) -> Result<Option<PathBuf>, LauncherError> {
    let Some(dir) = &s.backend_storage else {
        return match backend_storage_field(vmi) {
            Some(field) => Err(LauncherError::Input(format!(
                "{field}: standalone mode has no backend storage; pass --backend-storage DIR to keep the state across runs"
            ))),
            None => Ok(None),
        };
    };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(m) => {
            let what = if m.file_type().is_symlink() {
                "a symbolic link (give the directory itself)"
            } else {
                "not a directory"
            };
            return Err(LauncherError::Input(format!(
                "--backend-storage {}: {what}",
                dir.display()
            )));
        }
        Err(e) => {
            return Err(LauncherError::Input(format!(
                "--backend-storage {}: {e}",
                dir.display()
            )))
        }
    }
    let abs = std::fs::canonicalize(dir)
        .map_err(|e| LauncherError::Input(format!("--backend-storage {}: {e}", dir.display())))?;
    refuse_foreign_entries(
        &format!("--backend-storage {}", dir.display()),
        &abs,
        &["nvram", "swtpm", "lost+found"],
    )?;
    Ok(Some(abs))
}

/// One `--pvc VOLUME=PATH[,capacity=QUANTITY][,filesystem-overhead=FRACTION][,preallocated]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PvcArg {
    /// The volume's name in `spec.volumes`.
    pub volume: String,
    /// An image file, a directory (filesystem-mode claim) or a block device.
    pub path: PathBuf,
    /// The claim's size (a Kubernetes quantity): its status capacity and
    /// request, what a created disk.img gets.
    pub capacity: Option<api::Quantity>,
    /// The claim's `filesystemOverhead` (0 to 1; CDI's default is 0.055).
    pub filesystem_overhead: Option<f64>,
    /// A preallocated (thick) claim: no `discard='unmap'`, falloc growth.
    pub preallocated: bool,
}

impl PvcArg {
    /// Parses the flag's value. A path containing a comma cannot be given.
    ///
    /// # Errors
    /// A message naming the bad part.
    pub fn parse(s: &str) -> Result<PvcArg, String> {
        let form = "VOLUME=PATH[,capacity=QUANTITY][,filesystem-overhead=FRACTION][,preallocated]";
        let (volume, rest) = s
            .split_once('=')
            .filter(|(v, r)| !v.is_empty() && !r.is_empty())
            .ok_or_else(|| format!("{s:?} is not {form}"))?;
        let mut parts = rest.split(',');
        let path = parts
            .next()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("{s:?} is not {form}"))?;
        let mut arg = PvcArg {
            volume: volume.to_owned(),
            path: PathBuf::from(path),
            capacity: None,
            filesystem_overhead: None,
            preallocated: false,
        };
        for opt in parts {
            match opt.split_once('=') {
                Some(("capacity", q)) => {
                    let q = api::Quantity::parse(q).map_err(|e| format!("capacity={q}: {e}"))?;
                    q.to_bytes().map_err(|e| format!("capacity: {e}"))?;
                    arg.capacity = Some(q);
                }
                Some(("filesystem-overhead", f)) => {
                    let x = f
                        .parse::<f64>()
                        .ok()
                        .filter(|x| (0.0..=1.0).contains(x))
                        .ok_or_else(|| format!("filesystem-overhead={f}: not a fraction from 0 to 1"))?;
                    arg.filesystem_overhead = Some(x);
                }
                None if opt == "preallocated" => arg.preallocated = true,
                _ => return Err(format!("{opt:?} is not capacity=QUANTITY, filesystem-overhead=FRACTION or preallocated (form: {form})")),
            }
        }
        Ok(arg)
    }
}

/// What a `--pvc` path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimSource {
    /// A raw image, bind-mounted at `vmi-disks/<vol>/disk.img`.
    File,
    /// A filesystem-mode claim, bind-mounted at `vmi-disks/<vol>/`.
    Dir,
    /// A block-mode claim, a node `/dev/<vol>` in the launcher's private `/dev`.
    Block,
}

/// A checked `--pvc`: volume, absolute path, kind, read-only.
#[derive(Clone, Debug)]
pub struct Claim {
    /// The volume.
    pub volume: String,
    /// The canonical path on the host.
    pub path: PathBuf,
    /// What it is.
    pub source: ClaimSource,
    /// Ephemeral volume or read-only claim: mounted read-only.
    pub read_only: bool,
}

/// Standalone mode has no pod network unless `--setup-pod-network` makes
/// one: a VMI with interfaces is refused rather than run without network
/// (SR-IOV interfaces excepted: they are host devices, see
/// [`sriov_addresses`]).
///
/// # Errors
/// [`LauncherError::Input`] naming the first interface and the flag.
pub fn refuse_networks_without_pod(vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
    match vmi
        .spec
        .domain
        .devices
        .interfaces
        .iter()
        .position(|i| !i.is_absent() && !converter::sriov::is_sriov(i))
    {
        Some(i) => Err(LauncherError::Input(format!(
            "spec.domain.devices.interfaces[{i}]: standalone mode has no pod network; pass --setup-pod-network to create one"
        ))),
        None => Ok(()),
    }
}

/// What `--setup-pod-network` leaves for phase 2.
enum PodSetup {
    /// Phase 2 done (masquerade only, or no interface).
    Ready(network::phase2::Phase2),
    /// Bridge bindings: phase 1's DHCP caches by pod interface name, to be
    /// written to `<private>/vif-cache-<podIface>.json` once the private
    /// directory is mounted; phase 2 then reads them there, as in a pod.
    BridgeCaches(Vec<(String, network::cache::DhcpConfigCache)>),
}

/// The namespace playing the node (the CNI's ends of the pod links) in a
/// `--setup-pod-network` run: held open until the launcher exits.
static NODE_NAMESPACE: std::sync::OnceLock<network::phase1::NodeNamespace> =
    std::sync::OnceLock::new();

/// `--setup-pod-network`: a new network namespace for this process (and
/// so for libvirt and QEMU) playing the pod's, a second one playing the
/// node's side of its links, phase 1's topology for every interface (for
/// passt only the pod link, in which libvirt starts passt), then phase 2
/// (for bridge bindings, after the private directory is mounted: see
/// [`PodSetup`]). Called while the launcher is single-threaded.
fn setup_pod_network(vmi: &VirtualMachineInstance) -> Result<PodSetup, LauncherError> {
    let rt = |m: String| LauncherError::Runtime(format!("--setup-pod-network: {m}"));
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| rt(format!("new network namespace: {e}")))?;
    let node = network::phase1::NodeNamespace::new().map_err(rt)?;
    let node = NODE_NAMESPACE.get_or_init(|| node);
    let caches = network_phase1(vmi, "--setup-pod-network", Some(node), true)?;
    if !caches.is_empty() {
        return Ok(PodSetup::BridgeCaches(caches));
    }
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    network::phase2::prepare(
        vmi,
        Path::new(PRIVATE_DIR),
        &resolv,
        &network::phase1::pod_link,
        &network::phase1::link_exists,
    )
    .map(PodSetup::Ready)
    .map_err(LauncherError::Input)
}

/// Why the current network namespace is not one phase 1 may build in:
/// the host's (PID 1's, where that can be read), or one that already has
/// links besides `lo` (a fresh `unshare -n` namespace has only `lo`).
fn foreign_network_namespace() -> Option<String> {
    if let (Ok(a), Ok(b)) = (
        std::fs::metadata("/proc/self/ns/net"),
        std::fs::metadata("/proc/1/ns/net"),
    ) {
        if crate::isolation::same_file(&a, &b) {
            return Some("this is the host's network namespace".into());
        }
    }
    // getifaddrs asks the kernel over netlink, so it sees this namespace
    // (sysfs may show another); every link has an AF_PACKET entry.
    let mut links: Vec<String> = match nix::ifaddrs::getifaddrs() {
        Ok(addrs) => addrs
            .map(|a| a.interface_name)
            .filter(|n| n != "lo")
            .collect(),
        Err(e) => return Some(format!("cannot list links: {e}")),
    };
    links.sort();
    links.dedup();
    (!links.is_empty()).then(|| {
        format!(
            "the network namespace already has links ({}), expected only lo",
            links.join(", ")
        )
    })
}

/// `virt-launcher pod-network-phase1 VMI [--cache-dir DIR]`:
/// virt-handler's network phase 1 for the VMI's interfaces, in the current
/// network namespace, which must be a fresh one with only `lo` (it creates
/// the pod links, bridges, taps and NAT rules: never in the host's). The
/// CNI's ends of the pod links stay in that namespace, unaddressed (this
/// process exits, so no node namespace would outlive it). For tests and
/// for pods without virt-handler. The bridge binding needs `cache_dir`,
/// where its DHCP caches (`vif-cache-<podIface>.json`) are written.
///
/// # Errors
/// [`LauncherError::Input`] for a VMI phase 1 cannot build, or when run in
/// the host's network namespace; [`LauncherError::Runtime`] when a command
/// fails or a cache cannot be written.
pub fn pod_network_phase1(
    vmi: &VirtualMachineInstance,
    cache_dir: Option<&Path>,
) -> Result<(), LauncherError> {
    if let Some(why) = foreign_network_namespace() {
        return Err(LauncherError::Input(format!(
            "pod-network-phase1: {why}; run it in a new network namespace of its own (e.g. unshare -n)"
        )));
    }
    let caches = network_phase1(vmi, "pod-network-phase1", None, cache_dir.is_some())?;
    if let Some(dir) = cache_dir {
        // The names are KubeVirt's pod interface names (eth0, pod<hex>).
        for (pod_iface, cache) in &caches {
            network::cache::write_json(&network::cache::vif_cache_path(dir, pod_iface), cache)
                .map_err(|e| LauncherError::Runtime(format!("pod-network-phase1: {e}")))?;
        }
    }
    Ok(())
}

/// The phase-1 stand-in in the current network namespace, for every
/// interface that is not absent: the pod link (`eth0` for the pod network,
/// KubeVirt's hashed `pod<hash>` name for a Multus one; the CNI's end in
/// `node`, or here when `None`), then masquerade (the pod network only),
/// nothing more for passt (libvirt starts passt on the pod link) or,
/// when `bridges` (the caller has somewhere to write the caches), the
/// bridge binding, whose DHCP caches are returned by pod interface name,
/// to be written where phase 2 reads them. `what` prefixes the messages.
fn network_phase1(
    vmi: &VirtualMachineInstance,
    what: &str,
    node: Option<&network::phase1::NodeNamespace>,
    bridges: bool,
) -> Result<Vec<(String, network::cache::DhcpConfigCache)>, LauncherError> {
    use network::phase1::PodAddrs;
    let rt = |m: String| LauncherError::Runtime(format!("{what}: {m}"));
    let mq = vmi.spec.domain.devices.network_interface_multiqueue == Some(true);
    let mut caches = Vec::new();
    let mut secondaries: u8 = 0;
    let mut links_up = false;
    for (index, iface) in vmi.spec.domain.devices.interfaces.iter().enumerate() {
        if iface.is_absent() || converter::sriov::is_sriov(iface) {
            // SR-IOV: a host device, nothing to build in the pod.
            continue;
        }
        let field = format!("spec.domain.devices.interfaces[name={}]", iface.name);
        let net = vmi.spec.networks.iter().find(|n| n.name == iface.name);
        let Some(pod_iface) = network::phase2::pod_iface_candidates(vmi, &iface.name)
            .and_then(|c| c.into_iter().next())
        else {
            return Err(LauncherError::Input(format!(
                "{field}: no spec.networks entry with a pod or multus source"
            )));
        };
        let bridge = iface.bridge.is_some() && bridges;
        let passt = converter::passt::is_passt(iface);
        if !bridge && !passt && iface.masquerade.is_none() {
            let which = if bridges {
                "the masquerade, bridge and passt bindings"
            } else {
                "the masquerade and passt bindings (the bridge binding with --cache-dir)"
            };
            return Err(LauncherError::Input(format!(
                "{field}: {what} builds {which} only"
            )));
        }
        let primary = pod_iface == "eth0";
        let addrs = if primary {
            PodAddrs::primary()
        } else {
            secondaries = secondaries
                .checked_add(1)
                .filter(|k| *k < 255)
                .ok_or_else(|| {
                    LauncherError::Input(format!("{field}: {what} builds at most 254 Multus links"))
                })?;
            PodAddrs::secondary(secondaries)
        };
        if !links_up {
            network::phase1::ip_link_up("lo").map_err(rt)?;
            links_up = true;
        }
        let peer = if primary {
            "cni0".to_owned()
        } else {
            format!("cni{secondaries}")
        };
        network::phase1::add_pod_link(&pod_iface, &peer, &addrs, node).map_err(rt)?;
        if passt {
            // Phase 1 has nothing to do for passt: the pod link, which a
            // CNI makes in a cluster, is all libvirt's passt needs.
            continue;
        }
        if bridge {
            let cache = network::phase1::setup_bridge(&pod_iface, index, &addrs, mq).map_err(rt)?;
            caches.push((pod_iface, cache));
            continue;
        }
        let Some(pod) = net.and_then(|n| n.pod.as_ref()) else {
            return Err(LauncherError::Input(format!(
                "{field}.masquerade: masquerade is only allowed on the pod network"
            )));
        };
        let (plan, plan6) =
            network::plan::masquerade_plans(&iface.name, pod).map_err(LauncherError::Input)?;
        let ports = converter::interfaces::ports(
            iface,
            &format!("spec.domain.devices.interfaces[{index}]"),
        )
        .map_err(|e| LauncherError::Input(e.to_string()))?;
        network::phase1::setup_masquerade(&plan, &plan6, &ports, mq).map_err(rt)?;
    }
    Ok(caches)
}

/// Where the private runtime's directories go in the mount namespace.
struct Layout {
    private_dir: &'static str,
    libvirt: [(&'static str, &'static str); 4],
}

/// KubeVirt's private directory (not a flag in KubeVirt).
pub const PRIVATE_DIR: &str = "/var/run/kubevirt-private";

const LAYOUT: Layout = Layout {
    private_dir: PRIVATE_DIR,
    libvirt: [
        ("libvirt/etc", "/etc/libvirt"),
        ("libvirt/run", "/var/run/libvirt"),
        ("libvirt/lib", "/var/lib/libvirt"),
        ("libvirt/log", "/var/log/libvirt"),
    ],
};

/// Reads, defaults and validates the VMI and applies identity flags.
/// `cluster`: standalone (`run`), also the defaults KubeVirt's cluster
/// would have applied ([`api::cluster`]); `None` in a pod, where the VMI
/// arrives defaulted. Returns what those added.
///
/// # Errors
/// [`LauncherError::Input`] naming the field.
pub fn load(
    bytes: &[u8],
    flags: &LauncherFlags,
    arch: Arch,
    cluster: Option<&api::cluster::ClusterDefaults>,
) -> Result<(VirtualMachineInstance, api::cluster::Applied), LauncherError> {
    let input = |e: api::load::LoadError| LauncherError::Input(e.to_string());
    let (mut vmi, applied) = match cluster {
        Some(c) => api::load_standalone(bytes, arch, c).map_err(input)?,
        None => (
            api::load_vmi(bytes, arch).map_err(input)?,
            api::cluster::Applied::default(),
        ),
    };
    if !flags.uid.is_empty() {
        vmi.metadata.uid = Some(flags.uid.clone());
    }
    if !flags.name.is_empty() && flags.name != vmi.metadata.name {
        return Err(LauncherError::Input(format!(
            "--name {:?} does not match metadata.name {:?}",
            flags.name, vmi.metadata.name
        )));
    }
    if !flags.namespace.is_empty() && flags.namespace != vmi.namespace() {
        return Err(LauncherError::Input(format!(
            "--namespace {:?} does not match metadata.namespace {:?}",
            flags.namespace,
            vmi.namespace()
        )));
    }
    api::defaults::fill_missing_uid(&mut vmi);
    if let Some(e) = api::validate::validate(&vmi).into_iter().next() {
        return Err(LauncherError::Input(e.to_string()));
    }
    Ok((vmi, applied))
}

/// The VMI identity from `--name`, `--namespace` and `--uid` (pod mode,
/// where the full VMI arrives later from virt-handler).
///
/// # Errors
/// [`LauncherError::Input`] when a flag is missing or invalid.
pub fn identity_from_flags(flags: &LauncherFlags) -> Result<VirtualMachineInstance, LauncherError> {
    for (flag, v) in [
        ("--name", &flags.name),
        ("--namespace", &flags.namespace),
        ("--uid", &flags.uid),
    ] {
        if v.is_empty() {
            return Err(LauncherError::Input(format!(
                "{flag} is required when no VMI is given (set STANDALONE_VMI, or use `virt-launcher run VMI.yaml`)"
            )));
        }
    }
    let mut vmi = VirtualMachineInstance::default();
    vmi.metadata.name.clone_from(&flags.name);
    vmi.metadata.namespace = Some(flags.namespace.clone());
    vmi.metadata.uid = Some(flags.uid.clone());
    // The identity only: a name libvirt cannot hold is refused by
    // SyncVirtualMachine, where virt-handler reports it on the VMI.
    if let Some(e) = api::validate::identity(&vmi).into_iter().next() {
        return Err(LauncherError::Input(e.to_string()));
    }
    Ok(vmi)
}

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
fn log_emulation(flags: &LauncherFlags, ctx: &ConvertContext) {
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

fn check_flags(flags: &LauncherFlags) -> Result<(), LauncherError> {
    let refuse = |f: &str| Err(LauncherError::Input(format!("{f} is not supported yet")));
    if flags.run_as_nonroot {
        return refuse("--run-as-nonroot");
    }
    if flags.image_volume {
        return refuse("--image-volume");
    }
    if flags.hook_sidecars > 0 {
        return refuse("--hook-sidecars");
    }
    Ok(())
}

/// Runs `vmi` in a private runtime until the guest stops (see module docs).
/// Must be called before any thread is started.
///
/// # Errors
/// [`LauncherError`]; nothing is left running when it returns.
pub fn run_vmi(
    vmi: &VirtualMachineInstance,
    sync: bool,
    flags: &LauncherFlags,
    settings: &RuntimeSettings,
    started: Instant,
) -> Result<(), LauncherError> {
    check_flags(flags)?;
    let mut ctx = context(flags, settings.arch)?;
    // Standalone claims: checked now; their sizes become the VMI's
    // status.volumeStatus, as virt-handler reports a claim's.
    let claims = match settings.mode {
        Mode::Standalone => pvc_claims(vmi, settings)?,
        Mode::Pod => Vec::new(),
    };
    let with_status;
    let vmi = if settings.pvcs.is_empty() {
        vmi
    } else {
        with_status = with_claim_status(vmi, &settings.pvcs, &claims);
        &with_status
    };
    // virt-handler's PreallocatedVolumes: claims whose status says so
    // (`--pvc ...,preallocated` standalone). Under virt-handler its options
    // replace this at each sync.
    ctx.volumes_discard_ignore =
        storage::pvc::preallocated_volumes(vmi).map_err(|e| LauncherError::Input(e.to_string()))?;
    if sync {
        ctx.sriov_pci = sriov_addresses(vmi, settings)?;
    }
    // Pure conversion first: refuses unsupported or invalid specs up front.
    if sync {
        converter::convert(vmi, &ctx).map_err(|e| match e {
            ConvertError::Host(m) => LauncherError::Runtime(m),
            other => LauncherError::Input(other.to_string()),
        })?;
        storage::cloudinit::check_inline(vmi).map_err(|e| LauncherError::Input(e.to_string()))?;
        network::phase2::check_spec(vmi).map_err(LauncherError::Input)?;
    }
    // Network phase 2 in a pod, once the spec is known to convert (the
    // standalone stand-in of phase 1 comes after the input checks below).
    let mut dhcp = Vec::new();
    let mut dhcp6 = Vec::new();
    let mut bridge_caches = Vec::new();
    if settings.mode == Mode::Pod && sync {
        // In a pod, virt-handler's phase 1 made eth0, k6t-eth0 and tap0.
        let live = vmi
            .spec
            .domain
            .devices
            .interfaces
            .iter()
            .any(|i| !i.is_absent() && !converter::sriov::is_sriov(i));
        if live {
            let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            let phase2 = network::phase2::prepare(
                vmi,
                Path::new(PRIVATE_DIR),
                &resolv,
                &network::phase1::pod_link,
                &network::phase1::link_exists,
            )
            .map_err(LauncherError::Input)?;
            ctx.prepared.interfaces = phase2.hosts;
            dhcp = phase2.dhcp;
            dhcp6 = phase2.dhcp6;
        }
    }
    let backend_storage = match settings.mode {
        Mode::Standalone => backend_storage_dir(vmi, settings)?,
        Mode::Pod => None,
    };
    let (images, host_disk_dirs, config_sources) = match settings.mode {
        Mode::Standalone => (
            container_disk_images(vmi, settings)?,
            host_disk_dirs(vmi)?,
            ConfigSources::Standalone {
                volumes: config_volume_dirs(vmi, settings)?,
                secrets: access_credential_dirs(vmi, settings)?,
            },
        ),
        Mode::Pod => (Vec::new(), Vec::new(), ConfigSources::Pod),
    };
    if sync {
        // Everything read from outside the launcher's directories (cloud-init
        // secrets, keys, config volume trees) is checked now, before libvirt
        // starts, so bad input is refused without starting anything.
        let check = PrepareOptions {
            config_sources: config_sources.clone(),
            config_disk_fs: flags.config_disk_fs.into(),
            ..PrepareOptions::default()
        };
        storage::check_inputs(vmi, &ctx, &check)
            .map_err(|e| LauncherError::Input(e.to_string()))?;
    }
    log_emulation(flags, &ctx);
    // The standalone pod, once the input is known to be good (nothing is
    // built for input that is refused).
    if settings.setup_pod_network {
        if settings.default_pod_interface {
            tracing::info!(
                "the VMI names no network: KubeVirt's default interface (bridge binding on the pod network) gets a pod network stand-in, as with --setup-pod-network (autoattachPodInterface: false runs it without a NIC)"
            );
        }
        match setup_pod_network(vmi)? {
            PodSetup::Ready(phase2) => {
                ctx.prepared.interfaces = phase2.hosts;
                dhcp = phase2.dhcp;
                dhcp6 = phase2.dhcp6;
            }
            PodSetup::BridgeCaches(caches) => bridge_caches = caches,
        }
    }
    let daemon = DaemonKind::detect().ok_or_else(|| {
        LauncherError::Runtime("neither virtqemud nor libvirtd is installed (apt-get install libvirt-daemon-driver-qemu)".into())
    })?;

    let state = StateDir::acquire(&settings.state_dir)?;
    enter_private_mount_namespace()?;
    let mut mounts = Mounts::default();
    let result = (|| {
        for (rel, target) in LAYOUT.libvirt {
            mounts.bind_dir(&state.subdir(rel)?, Path::new(target))?;
        }
        std::fs::create_dir_all(&settings.cache_dir).map_err(|e| {
            LauncherError::Runtime(format!("mkdir {}: {e}", settings.cache_dir.display()))
        })?;
        mounts.bind_dir(&settings.cache_dir, Path::new("/var/cache/libvirt"))?;
        if settings.mode == Mode::Standalone {
            // In a pod this directory is the pod's own, with kubelet's
            // mounts of config volumes, secrets and claims below it: never
            // hide it there.
            mounts.bind_dir(&state.subdir("private")?, Path::new(LAYOUT.private_dir))?;
            if !bridge_caches.is_empty() {
                // The stand-in's phase 1 writes its caches where
                // virt-handler's does; phase 2 reads them as in a pod.
                let dir = Path::new(PRIVATE_DIR);
                for (pod_iface, cache) in bridge_caches.drain(..) {
                    let file = network::cache::vif_cache_path(dir, &pod_iface);
                    network::cache::write_json(&file, &cache)
                        .map_err(|e| LauncherError::Runtime(e.to_string()))?;
                }
                let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
                let phase2 = network::phase2::prepare(
                    vmi,
                    dir,
                    &resolv,
                    &network::phase1::pod_link,
                    &network::phase1::link_exists,
                )
                .map_err(LauncherError::Input)?;
                ctx.prepared.interfaces = phase2.hosts;
                dhcp = phase2.dhcp;
                dhcp6 = phase2.dhcp6;
            }
            mounts.bind_dir(
                &state.subdir("share")?,
                Path::new(&flags.kubevirt_share_dir),
            )?;
            mounts.bind_dir(
                &state.subdir("ephemeral")?,
                Path::new(&flags.ephemeral_disk_dir),
            )?;
            if !Path::new(&flags.container_disk_dir).starts_with(&flags.kubevirt_share_dir) {
                mounts.bind_dir(
                    &state.subdir("container-disks")?,
                    Path::new(&flags.container_disk_dir),
                )?;
            }
        }
        if let Some(dir) = &backend_storage {
            // After /var/lib/libvirt's bind: these sit on top of it.
            for (sub, target) in BACKEND_STORAGE_MOUNTS {
                let source = dir.join(sub);
                match std::fs::symlink_metadata(&source) {
                    Ok(m) if !m.is_dir() => {
                        return Err(LauncherError::Input(format!(
                            "--backend-storage: {} is not a directory",
                            source.display()
                        )))
                    }
                    _ => {}
                }
                mounts.bind_dir(&source, Path::new(target))?;
            }
        }
        for (index, source) in &images {
            let target = PathBuf::from(ctx.paths.container_disk_image(*index));
            mounts.bind_file_read_only(source, &target)?;
        }
        for (dir, target) in &host_disk_dirs {
            mounts.bind_dir(dir, target)?;
        }
        let mut block_claims = Vec::new();
        for c in &claims {
            let dir = PathBuf::from(format!("{PRIVATE_DIR}/vmi-disks/{}", c.volume));
            match c.source {
                ClaimSource::File => {
                    mounts.bind_file(&c.path, &dir.join("disk.img"), c.read_only)?;
                }
                ClaimSource::Dir => mounts.bind_dir_as(&c.path, &dir, c.read_only)?,
                ClaimSource::Block => block_claims.push((c.volume.clone(), c.path.clone())),
            }
        }
        if !block_claims.is_empty() {
            // kubelet puts a block claim's node at /dev/<vol> in the pod;
            // standalone, the launcher's private /dev does (the host's /dev
            // is never written).
            mounts.private_dev(&state.subdir("dev")?, &block_claims)?;
        }
        if process::is_pid1() {
            mounts.mount_proc()?;
        }
        // Threads may start now that the mount namespace is private.
        let servers = network::phase2::DhcpServers::start(
            std::mem::take(&mut dhcp),
            std::mem::take(&mut dhcp6),
        )
        .map_err(LauncherError::Runtime)?;
        // A panic must not skip the clean-up below (daemons, mounts, state).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_in_runtime(
                vmi,
                sync,
                flags,
                &ctx,
                &daemon,
                settings.mode,
                &claims,
                &config_sources,
                started,
            )
        }));
        servers.stop();
        r.unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(LauncherError::Runtime(format!(
                "internal error (panic: {what})"
            )))
        })
    })();
    mounts.unmount_all();
    if settings.keep_state {
        tracing::info!(state_dir = %state.path().display(), "state kept");
    } else if let Err(e) = state.remove() {
        tracing::warn!("cannot remove the state: {e}");
    }
    result
}

/// For each hostDisk volume, the host directory holding its image and where
/// virt-handler would mount it (`<private-dir>/vmi-disks/<vol>`): a hostDisk
/// is a file on the host, so standalone mode shows the launcher that file's
/// directory (created files land at the declared host path).
fn host_disk_dirs(vmi: &VirtualMachineInstance) -> Result<Vec<(PathBuf, PathBuf)>, LauncherError> {
    let mut out = Vec::new();
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let Some(h) = &v.host_disk else { continue };
        let dir = Path::new(&h.path).parent().unwrap_or(Path::new("/"));
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => {}
            _ => {
                return Err(LauncherError::Input(format!(
                    "spec.volumes[{i}].hostDisk.path: directory {} does not exist on this host",
                    dir.display()
                )))
            }
        }
        out.push((
            dir.to_owned(),
            PathBuf::from(format!("{PRIVATE_DIR}/vmi-disks/{}", v.name)),
        ));
    }
    Ok(out)
}

/// Pairs each config volume, and the cloud-init volume whose data is in a
/// secret, with its host directory (`--config-volume`): standalone mode has
/// no kubelet to mount them. Every such volume needs one; every flag must
/// name such a volume.
fn config_volume_dirs(
    vmi: &VirtualMachineInstance,
    s: &RuntimeSettings,
) -> Result<BTreeMap<String, PathBuf>, LauncherError> {
    let mut out = BTreeMap::new();
    for (name, dir) in &s.config_volumes {
        let Some(v) = vmi.spec.volumes.iter().find(|v| &v.name == name) else {
            return Err(LauncherError::Input(format!(
                "--config-volume {name}=...: the VMI has no volume named {name:?}"
            )));
        };
        let takes_dir = api::layout::ConfigKind::of(v).is_some()
            || v.cloud_init_no_cloud.is_some()
            || v.cloud_init_config_drive.is_some();
        if !takes_dir {
            return Err(LauncherError::Input(format!(
                "--config-volume {name}=...: volume {name:?} is not a configMap, secret, downwardAPI, serviceAccount, sysprep or cloud-init volume"
            )));
        }
        let meta = std::fs::metadata(dir).map_err(|e| {
            LauncherError::Input(format!("--config-volume {name}={}: {e}", dir.display()))
        })?;
        if !meta.is_dir() {
            return Err(LauncherError::Input(format!(
                "--config-volume {name}={}: not a directory",
                dir.display()
            )));
        }
        let abs = std::fs::canonicalize(dir)
            .map_err(|e| LauncherError::Input(format!("{}: {e}", dir.display())))?;
        if out.insert(name.clone(), abs).is_some() {
            return Err(LauncherError::Input(format!(
                "--config-volume {name}=... is given twice"
            )));
        }
    }
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        if let Some(kind) = api::layout::ConfigKind::of(v) {
            if !out.contains_key(&v.name) {
                return Err(LauncherError::Input(format!(
                    "spec.volumes[{i}].{}: standalone mode has no mounted {} volumes: pass --config-volume {}=DIR with the directory holding its files",
                    kind.field(),
                    kind.field(),
                    v.name
                )));
            }
        }
    }
    if let Some((i, v, kind, src)) = storage::cloudinit::find(vmi) {
        let field = if src.user_data_secret_ref.is_some() {
            Some("userDataSecretRef")
        } else if src.network_data_secret_ref.is_some() {
            Some("networkDataSecretRef")
        } else {
            None
        };
        if let Some(f) = field {
            if !out.contains_key(&v.name) {
                return Err(LauncherError::Input(format!(
                    "spec.volumes[{i}].{}.{f}: standalone mode has no mounted secrets: pass --config-volume {}=DIR, a directory with the file userdata (or networkdata)",
                    kind.field(),
                    v.name
                )));
            }
        }
    }
    Ok(out)
}

/// Pairs each access credential secret propagated through cloud-init with
/// its host directory (`--access-credential SECRET=DIR`, the files are
/// public keys). Every such secret needs one; every flag must name one.
fn access_credential_dirs(
    vmi: &VirtualMachineInstance,
    s: &RuntimeSettings,
) -> Result<BTreeMap<String, PathBuf>, LauncherError> {
    let used: Vec<(usize, &str)> = vmi
        .spec
        .access_credentials
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let k = c.ssh_public_key.as_ref()?;
            let p = &k.propagation_method;
            (p.no_cloud.is_some() || p.config_drive.is_some())
                .then(|| {
                    k.source
                        .secret
                        .as_ref()
                        .map(|s| (i, s.secret_name.as_str()))
                })
                .flatten()
        })
        .collect();
    let mut out = BTreeMap::new();
    for (name, dir) in &s.access_credentials {
        if !used.iter().any(|(_, n)| n == name) {
            return Err(LauncherError::Input(format!(
                "--access-credential {name}=...: no sshPublicKey access credential with noCloud or configDrive propagation uses secret {name:?}"
            )));
        }
        if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
            return Err(LauncherError::Input(format!(
                "--access-credential {name}={}: not a directory",
                dir.display()
            )));
        }
        let abs = std::fs::canonicalize(dir)
            .map_err(|e| LauncherError::Input(format!("{}: {e}", dir.display())))?;
        if out.insert(name.clone(), abs).is_some() {
            return Err(LauncherError::Input(format!(
                "--access-credential {name}=... is given twice"
            )));
        }
    }
    if let Some((i, name)) = used.iter().find(|(_, n)| !out.contains_key(*n)) {
        return Err(LauncherError::Input(format!(
            "spec.accessCredentials[{i}].sshPublicKey.source.secret: standalone mode has no mounted secrets: pass --access-credential {name}=DIR, a directory whose files are public keys"
        )));
    }
    Ok(out)
}

/// Checks the `--pvc` claims: each names a persistentVolumeClaim,
/// dataVolume or ephemeral volume, once; every such volume has one; the path
/// is a regular file, a directory or a block device. Ephemeral volumes and
/// read-only claims are mounted read-only, so the guest can never write
/// them; a directory without disk.img needs the claim's size.
fn pvc_claims(
    vmi: &VirtualMachineInstance,
    s: &RuntimeSettings,
) -> Result<Vec<Claim>, LauncherError> {
    use std::os::unix::fs::FileTypeExt;
    let mut out: Vec<Claim> = Vec::new();
    // Names first, for every flag, so a duplicate or unknown volume is
    // reported as such rather than through a later flag's path problem.
    let mut seen = std::collections::BTreeSet::new();
    for p in &s.pvcs {
        let name = &p.volume;
        if let Some(q) = &p.capacity {
            // A disk image needs at least 1 MiB (KubeVirt aligns sizes down
            // to it); said here, before anything starts.
            if q.to_bytes().map_or(true, |b| b < (1 << 20)) {
                return Err(LauncherError::Input(format!(
                    "--pvc {name}=...,capacity={q}: the size for volume {name} is too low, must be at least 1MiB"
                )));
            }
        }
        if !vmi.spec.volumes.iter().any(|v| &v.name == name) {
            return Err(LauncherError::Input(format!(
                "--pvc {name}=...: the VMI has no volume named {name:?}"
            )));
        }
        if !seen.insert(name) {
            return Err(LauncherError::Input(format!(
                "--pvc {name}=... is given twice"
            )));
        }
    }
    for p in &s.pvcs {
        let name = &p.volume;
        let Some(v) = vmi.spec.volumes.iter().find(|v| &v.name == name) else {
            return Err(LauncherError::Input(format!(
                "--pvc {name}=...: the VMI has no volume named {name:?}"
            )));
        };
        let read_only = v.ephemeral.is_some()
            || v.persistent_volume_claim
                .as_ref()
                .is_some_and(|p| p.read_only);
        if v.persistent_volume_claim.is_none() && v.data_volume.is_none() && v.ephemeral.is_none() {
            return Err(LauncherError::Input(format!(
                "--pvc {name}=...: volume {name:?} is not a persistentVolumeClaim, dataVolume or ephemeral volume"
            )));
        }
        if out.iter().any(|c| &c.volume == name) {
            return Err(LauncherError::Input(format!(
                "--pvc {name}=... is given twice"
            )));
        }
        let file = &p.path;
        let meta = std::fs::metadata(file)
            .map_err(|e| LauncherError::Input(format!("--pvc {name}={}: {e}", file.display())))?;
        let source = if meta.is_file() {
            ClaimSource::File
        } else if meta.is_dir() {
            ClaimSource::Dir
        } else if meta.file_type().is_block_device() {
            ClaimSource::Block
        } else {
            return Err(LauncherError::Input(format!(
                "--pvc {name}={}: not a raw image file, a claim directory or a block device",
                file.display()
            )));
        };
        let abs = std::fs::canonicalize(file)
            .map_err(|e| LauncherError::Input(format!("{}: {e}", file.display())))?;
        if source == ClaimSource::Block {
            // A device the host uses (a mounted file system, or one held by
            // md/dm) is claimed exclusively by the kernel: O_EXCL fails with
            // EBUSY. Never hand such a device (the host's own disk) to a guest.
            use std::os::unix::fs::OpenOptionsExt;
            if let Err(e) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_EXCL)
                .open(&abs)
            {
                let why = if e.raw_os_error() == Some(libc::EBUSY) {
                    "the block device is in use on this host (mounted or held); refusing to give it to a guest".to_owned()
                } else {
                    e.to_string()
                };
                return Err(LauncherError::Input(format!(
                    "--pvc {name}={}: {why}",
                    file.display()
                )));
            }
        }
        if source == ClaimSource::Dir {
            refuse_foreign_entries(
                &format!("--pvc {name}={}", file.display()),
                &abs,
                &["disk.img", "lost+found"],
            )?;
            let img = abs.join("disk.img");
            let has_image = std::fs::symlink_metadata(&img).is_ok();
            let status_size = storage::pvc::info(vmi, name)
                .map_err(|e| LauncherError::Input(e.to_string()))?
                .is_some_and(|i| i.capacity.is_some() || i.requests.is_some());
            if !has_image && p.capacity.is_none() && !status_size {
                return Err(LauncherError::Input(format!(
                    "--pvc {name}={}: the claim has no disk.img and its size is unknown: give it as --pvc {name}={},capacity=QUANTITY",
                    file.display(),
                    file.display()
                )));
            }
            if read_only && !has_image {
                return Err(LauncherError::Input(format!(
                    "--pvc {name}={}: a read-only claim needs its disk.img (it cannot be created)",
                    file.display()
                )));
            }
        }
        out.push(Claim {
            volume: name.clone(),
            path: abs,
            source,
            read_only,
        });
    }
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        let kind = if v.persistent_volume_claim.is_some() {
            "persistentVolumeClaim"
        } else if v.data_volume.is_some() {
            "dataVolume"
        } else if v.ephemeral.is_some() {
            "ephemeral"
        } else {
            continue;
        };
        if !out.iter().any(|c| c.volume == v.name) {
            return Err(LauncherError::Input(format!(
                "spec.volumes[{i}].{kind}: standalone mode has no mounted claims: pass --pvc {}=PATH, a raw disk image, a claim directory or a block device",
                v.name
            )));
        }
    }
    Ok(out)
}

/// `vmi` with the `--pvc` facts in `status.volumeStatus[].persistentVolumeClaimInfo`,
/// as virt-handler reports a claim (capacity and request both the given
/// size, the file system overhead, the volume mode); facts the flags do not
/// give keep the VMI's own status.
pub fn with_claim_status(
    vmi: &VirtualMachineInstance,
    args: &[PvcArg],
    claims: &[Claim],
) -> VirtualMachineInstance {
    use serde_json::{json, Map, Value};
    let mut out = vmi.clone();
    let mut status = match out.status.take() {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut list = match status.remove("volumeStatus") {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    for a in args {
        let (Some(c), Some(v)) = (
            claims.iter().find(|c| c.volume == a.volume),
            vmi.spec.volumes.iter().find(|v| v.name == a.volume),
        ) else {
            continue;
        };
        let claim_name = v
            .persistent_volume_claim
            .as_ref()
            .map(|p| p.claim_name.clone())
            .or_else(|| v.data_volume.as_ref().map(|d| d.name.clone()))
            .or_else(|| {
                v.ephemeral
                    .as_ref()
                    .and_then(|e| e.persistent_volume_claim.as_ref())
                    .map(|p| p.claim_name.clone())
            })
            .unwrap_or_default();
        let idx = match list
            .iter()
            .position(|s| s.get("name").and_then(Value::as_str) == Some(&a.volume))
        {
            Some(i) => i,
            None => {
                list.push(Value::Null);
                list.len() - 1
            }
        };
        let mut entry = match std::mem::take(&mut list[idx]) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        entry.insert("name".into(), json!(a.volume));
        let mut info = match entry.remove("persistentVolumeClaimInfo") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        info.entry("claimName").or_insert_with(|| json!(claim_name));
        let mode = if c.source == ClaimSource::Block {
            "Block"
        } else {
            "Filesystem"
        };
        info.insert("volumeMode".into(), json!(mode));
        if let Some(q) = &a.capacity {
            info.insert("capacity".into(), json!({ "storage": q.as_str() }));
            info.insert("requests".into(), json!({ "storage": q.as_str() }));
        }
        if let Some(f) = a.filesystem_overhead {
            info.insert("filesystemOverhead".into(), json!(f.to_string()));
        }
        if a.preallocated {
            info.insert("preallocated".into(), json!(true));
        }
        entry.insert("persistentVolumeClaimInfo".into(), Value::Object(info));
        list[idx] = Value::Object(entry);
    }
    status.insert("volumeStatus".into(), Value::Array(list));
    out.status = Some(Value::Object(status));
    out
}

/// Pairs each containerDisk volume with its host image (`--container-disk`).
fn container_disk_images(
    vmi: &VirtualMachineInstance,
    s: &RuntimeSettings,
) -> Result<Vec<(usize, PathBuf)>, LauncherError> {
    let mut out = Vec::new();
    for (n, (name, _)) in s.container_disks.iter().enumerate() {
        if s.container_disks[..n]
            .iter()
            .any(|(other, _)| other == name)
        {
            return Err(LauncherError::Input(format!(
                "--container-disk {name}=... is given twice"
            )));
        }
        if !vmi
            .spec
            .volumes
            .iter()
            .any(|v| &v.name == name && v.container_disk.is_some())
        {
            return Err(LauncherError::Input(format!(
                "--container-disk {name}=...: the VMI has no containerDisk volume named {name:?}"
            )));
        }
    }
    for (i, v) in vmi.spec.volumes.iter().enumerate() {
        if v.container_disk.is_none() {
            continue;
        }
        let Some((_, file)) = s.container_disks.iter().find(|(n, _)| n == &v.name) else {
            return Err(LauncherError::Input(format!(
                "spec.volumes[{i}].containerDisk: no image for volume {:?}: pass --container-disk {}=FILE",
                v.name, v.name
            )));
        };
        let meta = std::fs::metadata(file).map_err(|e| {
            LauncherError::Input(format!(
                "spec.volumes[{i}].containerDisk: image {} for volume {:?}: {e}",
                file.display(),
                v.name
            ))
        })?;
        if !meta.is_file() {
            return Err(LauncherError::Input(format!(
                "spec.volumes[{i}].containerDisk: {} is not a regular file",
                file.display()
            )));
        }
        let abs = std::fs::canonicalize(file)
            .map_err(|e| LauncherError::Input(format!("{}: {e}", file.display())))?;
        out.push((i, abs));
    }
    Ok(out)
}

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
fn run_in_runtime(
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

/// The command server's runtime: one thread driving a current-thread
/// tokio runtime (the server, the notify queue), a handle to reach it.
struct Grpc {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    notifier: cmd::notify::Notifier,
    share: PathBuf,
}

impl Grpc {
    /// Starts the notify queue and the command server on
    /// `<share>/sockets/launcher-init-sock`, then checks it answers (dial,
    /// CmdInfo, Ping: KubeVirt's self-check).
    #[allow(clippy::too_many_arguments)]
    fn start(
        share: &Path,
        manager: Arc<LibvirtDomainManager>,
        id: Identity,
        cache: Arc<DomainCache>,
        agent: Arc<virtwrap::agent::Agent>,
        metadata: Arc<virtwrap::metadata::MetadataCache>,
        dump_policy: DumpPolicy,
        standalone: bool,
    ) -> Result<Grpc, LauncherError> {
        // Poll virt-handler's connection briefly before sleeping, as Go's
        // runtime does (cmd::spin): back-to-back calls skip a wake-up.
        let spinner = cmd::spin::Spinner::new();
        let parked = Arc::clone(&spinner);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(move || {
                parked.park();
            })
            .build()
            .map_err(|e| LauncherError::Runtime(format!("cannot start the gRPC runtime: {e}")))?;
        let handle = rt.handle().clone();
        let notifier = {
            let _guard = rt.enter();
            if standalone {
                cmd::notify::Notifier::start_standalone(share)
            } else {
                cmd::notify::Notifier::start(share)
            }
        };
        let handler = Arc::new(LauncherHandler::new(
            manager,
            id,
            notifier.clone(),
            cache,
            agent,
            metadata,
            dump_policy,
        ));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = rt
            .block_on(cmd::server::serve(share, handler, spinner, async move {
                let _ = stop_rx.await;
            }))
            .map_err(|e| LauncherError::Runtime(e.to_string()))?;
        let thread = std::thread::Builder::new()
            .name("grpc".into())
            .spawn(move || {
                rt.block_on(async move {
                    let _ = server.await;
                });
            })
            .map_err(|e| LauncherError::Runtime(format!("cannot start the gRPC thread: {e}")))?;
        let g = Grpc {
            handle,
            stop: Some(stop_tx),
            thread: Some(thread),
            notifier,
            share: share.to_owned(),
        };
        let sock = cmd::server::init_socket(share);
        g.handle
            .block_on(async {
                let mut c = cmd::client::Client::connect(&sock)
                    .await
                    .map_err(|e| e.to_string())?;
                c.cmd
                    .ping(cmd::proto::cmd::EmptyRequest {})
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            })
            .map_err(|e| LauncherError::Runtime(format!("failed to connect to cmd server: {e}")))?;
        Ok(g)
    }

    /// Waits for queued notifications to reach virt-handler (when its
    /// socket exists at all), then stops the server. The renamed
    /// `launcher-sock` stays, as KubeVirt leaves it; the init path goes.
    fn stop(&mut self) {
        let notify_sock = ["domain-notify-pipe.sock", "domain-notify.sock"]
            .iter()
            .any(|s| self.share.join(s).exists());
        if notify_sock
            && !self
                .handle
                .block_on(self.notifier.flush(FINAL_NOTIFY_TIMEOUT))
        {
            tracing::warn!(
                pending = self.notifier.pending(),
                "virt-handler did not take every notification"
            );
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(cmd::server::init_socket(&self.share));
    }
}

/// How long the final notification may take (KubeVirt waits 15 s).
const FINAL_NOTIFY_TIMEOUT: Duration = Duration::from_secs(15);

#[allow(clippy::too_many_arguments)]
fn run_domain(
    vmi: &VirtualMachineInstance,
    sync: bool,
    flags: &LauncherFlags,
    ctx: &ConvertContext,
    daemon: &DaemonKind,
    sup: &Supervisor,
    block_volumes: Option<std::collections::BTreeSet<String>>,
    config_sources: &ConfigSources,
    started: Instant,
) -> Result<(), LauncherError> {
    // Before any connection: libvirt delivers events through this loop.
    virtwrap::events::start_event_loop();
    let connector = Connector {
        daemon: daemon.name().into(),
        uri: "qemu:///system".into(),
        socket: Path::new("/var/run/libvirt").join(daemon.socket_name()),
    };
    // Libvirt's events, the agent's updates and the events preparing the
    // VMI raises all reach virt-handler through one bridge (below).
    // Senders other than the libvirt watcher's go through `bridge_tx`,
    // emptied at the end so that the bridge sees the channel close.
    let (ev_tx, ev_rx) = std::sync::mpsc::channel();
    let bridge_tx = Arc::new(std::sync::Mutex::new(Some(ev_tx.clone())));
    let to_bridge = {
        let tx = Arc::clone(&bridge_tx);
        move |ev: virtwrap::events::DomainEvent| {
            if let Some(tx) = tx
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
            {
                let _ = tx.send(ev);
            }
        }
    };
    let vmi_events = {
        let to_bridge = to_bridge.clone();
        storage::EventSink(Arc::new(move |e: storage::VmiEvent| {
            to_bridge(virtwrap::events::DomainEvent::Vmi {
                kind: e.kind,
                reason: e.reason,
                message: e.message,
            });
        }))
    };
    let prepare = PrepareOptions {
        disk_memory_limit: flags.disk_memory_limit,
        owner: None,
        block_device_dir: Some(PathBuf::from("/dev")),
        block_volumes,
        space: storage::pvc::SpacePolicy {
            less_pvc_space_toleration: flags.less_pvc_space_toleration,
            minimum_reserve_bytes: flags.minimum_reserve_pvc_bytes,
        },
        config_sources: config_sources.clone(),
        rebuild_media: true,
        config_disk_fs: flags.config_disk_fs.into(),
        events: Some(vmi_events),
    };
    let id = Identity::of(vmi);
    let cache = Arc::new(DomainCache::default());
    // KubeVirt's metadata cache: a change (a memory dump starting or
    // ending, the grace period, a shutdown request) drops the cached domain
    // and reaches virt-handler through the event bridge as a MODIFIED domain.
    let metadata = {
        let (cache, to_bridge, domain) = (Arc::clone(&cache), to_bridge.clone(), id.domain_name());
        Arc::new(virtwrap::metadata::MetadataCache::new(Box::new(
            move || {
                cache.invalidate();
                to_bridge(virtwrap::events::DomainEvent::MetadataUpdated {
                    domain: domain.clone(),
                });
            },
        )))
    };
    let mut manager = LibvirtDomainManager::new(
        connector.clone(),
        ctx.clone(),
        prepare,
        Arc::clone(&metadata),
    )
    .map_err(|e| LauncherError::Runtime(e.to_string()))?;
    // In a pod, the VMI virt-handler syncs brings its interfaces: phase 2
    // (host facts, DHCP) runs then, in the pod's network namespace where
    // virt-handler's phase 1 made the bridge and tap.
    let dhcp_servers: Arc<std::sync::Mutex<Vec<network::phase2::DhcpServers>>> = Arc::default();
    if matches!(config_sources, ConfigSources::Pod) {
        manager = manager.with_sriov(Box::new(network::sriov::pod_host_addresses));
        let servers = Arc::clone(&dhcp_servers);
        manager = manager.with_network_phase2(Box::new(move |vmi: &VirtualMachineInstance| {
            let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            let p = network::phase2::prepare(
                vmi,
                Path::new(PRIVATE_DIR),
                &resolv,
                &network::phase1::pod_link,
                &network::phase1::link_exists,
            )?;
            let started = network::phase2::DhcpServers::start(p.dhcp, p.dhcp6)?;
            servers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(started);
            Ok(p.hosts)
        }));
    }
    let manager = Arc::new(manager);
    tracing::info!(ms = ms(started), "libvirt ready");
    let share = PathBuf::from(&flags.kubevirt_share_dir);
    // The guest agent: its own connection and poller thread; what it learns
    // reaches virt-handler through the event bridge.
    let agent = {
        let domain = id.domain_name();
        let channel = Arc::new(virtwrap::agent::LibvirtAgent::new(
            connector.clone(),
            domain.clone(),
        ));
        Arc::new(
            virtwrap::agent::Agent::start(
                channel,
                Arc::new(move || {
                    to_bridge(virtwrap::events::DomainEvent::AgentUpdated {
                        domain: domain.clone(),
                    });
                }),
            )
            .map_err(|e| LauncherError::Runtime(format!("cannot start the agent poller: {e}")))?,
        )
    };
    let standalone = matches!(config_sources, ConfigSources::Standalone { .. });
    let dump_policy = if standalone {
        DumpPolicy::AnyDirectory
    } else {
        DumpPolicy::HotplugVolumes(PathBuf::from(&flags.hotplug_disk_dir))
    };
    let mut grpc = Grpc::start(
        &share,
        Arc::clone(&manager),
        id.clone(),
        Arc::clone(&cache),
        Arc::clone(&agent),
        Arc::clone(&metadata),
        dump_policy,
        standalone,
    )?;
    let stop_events = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let events = virtwrap::events::watch(connector, ev_tx, Arc::clone(&stop_events))
        .map_err(|e| LauncherError::Runtime(format!("cannot watch domain events: {e}")))?;
    let bridge = {
        let (manager, id, notifier, cache, agent, metadata) = (
            Arc::clone(&manager),
            id.clone(),
            grpc.notifier.clone(),
            Arc::clone(&cache),
            Arc::clone(&agent),
            Arc::clone(&metadata),
        );
        std::thread::Builder::new()
            .name("notify-bridge".into())
            .spawn(move || {
                crate::service::bridge(&ev_rx, &manager, &id, &notifier, &cache, &agent, &metadata);
            })
            .map_err(|e| LauncherError::Runtime(format!("cannot start the notify bridge: {e}")))?
    };

    cmd::server::mark_ready(&share)
        .map_err(|e| LauncherError::Runtime(format!("markReady: {e}")))?;
    tracing::info!(socket = %cmd::server::ready_socket(&share).display(), "command server ready");

    let signals = signals();
    let grace = Duration::from_secs(
        grace_period(flags.grace_period_seconds, vmi)
            .max(0)
            .unsigned_abs(),
    );
    let outcome = if sync {
        match sync_watching_signals(vmi, &manager, &signals, flags.qemu_timeout) {
            Ok(false) => {
                tracing::info!("termination signal during start: domain stopped");
                Ok(())
            }
            Ok(true) => {
                // Created paused for virt-handler to move the emulator
                // thread (isolateEmulatorThread); with no virt-handler here
                // its second sync is ours: it resumes the domain.
                let resumed = if virtwrap::manager::starts_paused(vmi)
                    && vmi.spec.start_strategy != Some(api::vmi::StartStrategy::Paused)
                {
                    manager.sync_vmi(vmi).map(|_| ()).map_err(manager_error)
                } else {
                    Ok(())
                };
                match resumed {
                    Ok(()) => {
                        tracing::info!(ms = ms(started), domain = %vmi.domain_name(), "domain running");
                        crate::monitor::watch(
                            vmi,
                            &manager,
                            sup,
                            &signals,
                            grace,
                            flags.qemu_timeout,
                        )
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(manager_error(e)),
        }
    } else {
        // virt-handler sends SyncVirtualMachine; the monitor waits for QEMU.
        crate::monitor::watch(vmi, &manager, sup, &signals, grace, flags.qemu_timeout)
    };
    // Whatever happened: nothing may keep running.
    if let Err(e) = manager.kill_vmi(vmi) {
        tracing::warn!("final kill: {e}");
    }
    if let Some(pid) = crate::monitor::qemu_pid(vmi) {
        if std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !process::reaper().has_exited(pid)
        {
            let _ = kill(
                Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
                Signal::SIGKILL,
            );
        }
    }
    if let Err(e) = manager.undefine_vmi(vmi) {
        tracing::warn!("undefine: {e}");
    }
    // The undefine event makes the bridge send the final notification;
    // give libvirt a moment to deliver it, then stop watching.
    std::thread::sleep(Duration::from_millis(200));
    stop_events.store(true, std::sync::atomic::Ordering::SeqCst);
    agent.poller().stop();
    bridge_tx
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let _ = events.join();
    let _ = bridge.join();
    if !grpc.notifier.final_sent() {
        grpc.notifier.send(cmd::notify::Event::Domain {
            event_type: cmd::notify::EventType::Modified,
            domain_json: crate::service::deleted_json(&id),
            status_json: String::new(),
            last: true,
        });
    }
    grpc.stop();
    for servers in std::mem::take(
        &mut *dhcp_servers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    ) {
        servers.stop();
    }
    outcome
}

/// SyncVMI in a helper thread, so that a termination signal or
/// `--qemu-timeout` is honoured while libvirt starts QEMU (which can block
/// for minutes): on either, the QEMU being started is killed, which makes
/// libvirt's start fail and return. Ok(true) = running, Ok(false) = stopped
/// by a signal.
fn sync_watching_signals(
    vmi: &VirtualMachineInstance,
    manager: &LibvirtDomainManager,
    signals: &AtomicUsize,
    timeout: Duration,
) -> Result<bool, ManagerError> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let sync = std::thread::Builder::new()
            .name("sync-vmi".into())
            .spawn_scoped(scope, || manager.sync_vmi(vmi));
        let sync = match sync {
            Ok(h) => h,
            Err(e) => {
                return Err(ManagerError::Convert(ConvertError::Host(format!(
                    "cannot start the sync thread: {e}"
                ))))
            }
        };
        let mut stopping: Option<&str> = None;
        while !sync.is_finished() {
            if stopping.is_none() {
                if signals.load(std::sync::atomic::Ordering::SeqCst) != 0 {
                    stopping = Some("termination signal");
                } else if start.elapsed() > timeout {
                    stopping = Some("qemu timeout");
                }
                if let Some(why) = stopping {
                    tracing::warn!("{why} while the domain is starting: stopping QEMU");
                }
            }
            if stopping.is_some() {
                if let Some(pid) = crate::monitor::qemu_pid(vmi) {
                    let _ = kill(
                        Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
                        Signal::SIGKILL,
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let res = sync.join().unwrap_or_else(|_| {
            Err(ManagerError::Convert(ConvertError::Host(
                "the sync thread panicked".into(),
            )))
        });
        match (stopping, res) {
            (Some("qemu timeout"), _) => Err(ManagerError::Convert(ConvertError::Host(format!(
                "timed out after {} s waiting for the domain to start (--qemu-timeout)",
                timeout.as_secs()
            )))),
            (Some(_), _) => Ok(false),
            (None, r) => r.map(|_| true),
        }
    })
}

static SIGNALS: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// The last termination signal received (0: none yet).
fn signals() -> Arc<AtomicUsize> {
    Arc::clone(SIGNALS.get_or_init(|| Arc::new(AtomicUsize::new(0))))
}

/// Records SIGTERM, SIGINT, SIGHUP and SIGQUIT instead of dying on them
/// (KubeVirt's launcher does the same): called first thing, so a signal
/// during start-up is never lost; as PID 1 an unhandled one would be
/// ignored. The domain is then shut down in order.
///
/// # Errors
/// [`LauncherError::Runtime`] when a handler cannot be installed.
pub fn install_signal_handlers() -> Result<(), LauncherError> {
    let flag = signals();
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
    ] {
        signal_hook::flag::register_usize(sig, Arc::clone(&flag), sig as usize)
            .map_err(|e| LauncherError::Runtime(format!("cannot install signal handler: {e}")))?;
    }
    Ok(())
}

fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The grace period: `--grace-period-seconds` when given, else the VMI's
/// `terminationGracePeriodSeconds` + 15, as virt-controller computes the flag.
pub fn grace_period(flag: Option<i64>, vmi: &VirtualMachineInstance) -> i64 {
    flag.unwrap_or_else(|| vmi.grace_period_seconds().saturating_add(15))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pvc_flag_takes_a_path_and_claim_facts() {
        let a = PvcArg::parse("data=/claims/a,capacity=2Gi,filesystem-overhead=0.055,preallocated")
            .unwrap();
        assert_eq!(a.volume, "data");
        assert_eq!(a.path, PathBuf::from("/claims/a"));
        assert_eq!(a.capacity.unwrap().as_str(), "2Gi");
        assert_eq!(a.filesystem_overhead, Some(0.055));
        assert!(a.preallocated);
        let b = PvcArg::parse("v=/x.img").unwrap();
        assert_eq!(
            (b.capacity, b.filesystem_overhead, b.preallocated),
            (None, None, false)
        );
        for (bad, msg) in [
            ("data", "is not VOLUME=PATH"),
            ("=x", "is not VOLUME=PATH"),
            ("v=,capacity=1Gi", "is not VOLUME=PATH"),
            ("v=/x,capacity=12XB", "capacity=12XB: "),
            ("v=/x,capacity=-1Gi", "capacity: -1Gi is negative"),
            ("v=/x,capacity=1e30", "capacity: 1e30 is too large"),
            ("v=/x,filesystem-overhead=1.5", "not a fraction from 0 to 1"),
            ("v=/x,size=3", "\"size=3\" is not capacity=QUANTITY"),
        ] {
            let e = PvcArg::parse(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn pvc_flag_facts_become_the_claims_volume_status() {
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: s}\nspec:\n  domain: {memory: {guest: 64Mi}}\n  volumes:\n  - {name: a, persistentVolumeClaim: {claimName: ca}}\n  - {name: b, dataVolume: {name: db}}\n  - {name: c, ephemeral: {persistentVolumeClaim: {claimName: cc}}}\nstatus:\n  volumeStatus:\n  - {name: b, target: vdb, persistentVolumeClaimInfo: {filesystemOverhead: '0.1', capacity: {storage: 1Gi}}}\n";
        let vmi = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let claim = |v: &str, source| Claim {
            volume: v.into(),
            path: PathBuf::from("/x"),
            source,
            read_only: false,
        };
        let args = [
            PvcArg::parse("a=/x,capacity=64Mi").unwrap(),
            PvcArg::parse("b=/x,capacity=2Gi").unwrap(),
            PvcArg::parse("c=/x,preallocated").unwrap(),
        ];
        let claims = [
            claim("a", ClaimSource::Dir),
            claim("b", ClaimSource::File),
            claim("c", ClaimSource::Block),
        ];
        let out = with_claim_status(&vmi, &args, &claims);
        let a = storage::pvc::info(&out, "a").unwrap().unwrap();
        assert_eq!((a.capacity, a.requests), (Some(64 << 20), Some(64 << 20)));
        assert_eq!(a.volume_mode.as_deref(), Some("Filesystem"));
        let b = storage::pvc::info(&out, "b").unwrap().unwrap();
        assert_eq!(b.capacity, Some(2 << 30), "the flag overrides the status");
        assert_eq!(
            b.filesystem_overhead,
            Some(0.1),
            "the status's own facts stay"
        );
        let st = &out.status.as_ref().unwrap()["volumeStatus"];
        assert_eq!(st[0]["target"], "vdb");
        assert_eq!(st[0]["persistentVolumeClaimInfo"]["claimName"], "db");
        assert!(storage::pvc::info(&out, "c").unwrap().unwrap().is_block());
        assert_eq!(st[2]["persistentVolumeClaimInfo"]["claimName"], "cc");
        assert_eq!(
            storage::pvc::preallocated_volumes(&out)
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            ["c"]
        );
    }
}
