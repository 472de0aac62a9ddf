//! `virt-launcher run` (one VMI without Kubernetes), KubeVirt's pod mode
//! (no subcommand) and `virt-launcher pod-network-phase1`.

use std::path::PathBuf;
use std::time::Instant;

use api::cluster::{ClusterDefaults, VmRolloutStrategy};
use api::Arch;
use clap::Args;

use crate::error::LauncherError;
use crate::flags::LauncherFlags;
use crate::standalone::claims::PvcArg;
use crate::startup::{Mode, RuntimeSettings};
use crate::{input, standalone, startup};

/// `run`'s command line.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// VMI manifest, YAML or JSON (`-` for standard input).
    pub file: PathBuf,
    /// Image file for a containerDisk volume, as VOLUME=FILE (repeatable).
    #[arg(long = "container-disk", value_parser = parse_container_disk)]
    pub container_disks: Vec<(String, PathBuf)>,
    /// Directory holding the files of a configMap, secret, downwardAPI or
    /// serviceAccount volume, or the secret of a cloud-init volume's
    /// userDataSecretRef / networkDataSecretRef, as VOLUME=DIR (repeatable).
    #[arg(long = "config-volume", value_parser = parse_config_volume)]
    pub config_volumes: Vec<(String, PathBuf)>,
    /// The claim of a persistentVolumeClaim, dataVolume or ephemeral
    /// volume, as VOLUME=PATH[,capacity=QUANTITY][,filesystem-overhead=FRACTION][,preallocated]
    /// (repeatable). PATH is a raw image file (shown as
    /// `vmi-disks/<vol>/disk.img`), a directory (a filesystem-mode claim,
    /// shown as `vmi-disks/<vol>/`; its disk.img is created sparse when
    /// absent) or a block device (a block-mode claim, shown as
    /// `/dev/<vol>`). capacity is the claim's size (its status capacity
    /// and request), filesystem-overhead the fraction kept free (for
    /// --expand-disks), preallocated drops discard (KubeVirt's preallocated
    /// volumes). Read-only for ephemeral volumes and read-only claims.
    #[arg(long = "pvc", value_parser = PvcArg::parse)]
    pub pvcs: Vec<PvcArg>,
    /// KubeVirt's backend storage (the VM's `persistent-state-for-<vm>`
    /// claim): a directory whose `nvram/` and `swtpm/` are mounted where
    /// libvirt keeps EFI variables and TPM state, so VMIs with
    /// `efi.persistent` or `tpm.persistent` keep them across runs.
    #[arg(long = "backend-storage")]
    pub backend_storage: Option<PathBuf>,
    /// Directory of the Secret of an sshPublicKey access credential with
    /// noCloud or configDrive propagation, as SECRET=DIR (repeatable): its
    /// files are the public keys written into the cloud-init meta-data.
    #[arg(long = "access-credential", value_parser = parse_config_volume)]
    pub access_credentials: Vec<(String, PathBuf)>,
    /// Architecture of the guest: amd64, arm64, ppc64le or s390x (default:
    /// this host's). Another architecture than the host's always runs under
    /// software emulation (TCG) and needs that architecture's QEMU
    /// (qemu-system-aarch64, -ppc64 or -s390x) and, for arm64, the AAVMF
    /// firmware (`--ovmf-path`, default /usr/share/AAVMF). Standalone only:
    /// in a pod the guest is always of the node's architecture.
    #[arg(long)]
    pub arch: Option<String>,
    /// Play the pod: a fresh network namespace where a stand-in for
    /// virt-handler's network phase 1 builds the masquerade bridge, tap
    /// and NAT; the VM runs attached inside it, with the launcher's DHCP.
    #[arg(long)]
    pub setup_pod_network: bool,
    /// KubeVirt's VM rollout strategy of the cluster this VMI would run in
    /// (see `convert --help`): LiveUpdate (default) or Stage.
    #[arg(long, default_value = "LiveUpdate", value_parser = super::parse_rollout_strategy)]
    pub vm_rollout_strategy: VmRolloutStrategy,
    /// KubeVirt's network-info downward API file giving the host PCI
    /// address of each SR-IOV interface's VF (see `convert --help`). The
    /// VF must exist on this host, bound to vfio-pci: it is passed through
    /// with managed='no'.
    #[arg(long)]
    pub network_info: Option<PathBuf>,
    /// KubeVirt's launcher flags.
    #[command(flatten)]
    pub flags: LauncherFlags,
}

/// `pod-network-phase1`'s command line.
#[derive(Args, Debug)]
pub struct Phase1Args {
    /// VMI manifest, YAML or JSON (`-` for standard input).
    pub file: PathBuf,
    /// Where to write the bridge binding's DHCP caches
    /// (`vif-cache-<podIface>.json`; virt-handler writes them into the
    /// launcher's private directory, `/var/run/kubevirt-private`). Without
    /// it, only the masquerade binding is built.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

fn parse_container_disk(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((v, f)) if !v.is_empty() && !f.is_empty() => Ok((v.to_owned(), PathBuf::from(f))),
        _ => Err(format!("{s:?} is not VOLUME=FILE")),
    }
}

fn parse_config_volume(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((v, d)) if !v.is_empty() && !d.is_empty() => Ok((v.to_owned(), PathBuf::from(d))),
        _ => Err(format!("{s:?} is not VOLUME=DIR")),
    }
}

/// `virt-launcher run`: runs the VMI in `args.file` until it stops.
///
/// # Errors
/// [`LauncherError`]; nothing is left running when it returns.
pub fn run(args: &RunArgs, started: Instant) -> Result<(), LauncherError> {
    crate::pidns::setup_inner()?;
    startup::signals::install_signal_handlers()?;
    let arch = match &args.arch {
        Some(a) => a
            .parse()
            .map_err(|e: api::arch::UnknownArch| LauncherError::Input(format!("--arch: {e}")))?,
        None => Arch::host().map_err(|e| LauncherError::Runtime(e.to_string()))?,
    };
    let bytes = super::read_input(&args.file)?;
    let cluster = ClusterDefaults {
        vm_rollout_strategy: args.vm_rollout_strategy,
    };
    let (vmi, applied) = input::load(&bytes, &args.flags, arch, Some(&cluster))?;
    // Standalone, the guest's architecture is the user's choice: a spec
    // naming another one is input to correct, not a host fault.
    if let Some(want) = vmi.spec.architecture.as_deref() {
        if want != arch.kubevirt_name() {
            return Err(LauncherError::Input(format!(
                "spec.architecture is {want} but this run is for {}: pass --arch {want}",
                arch.kubevirt_name()
            )));
        }
    }
    // KubeVirt's default interface, on a VMI that asked for no network:
    // the pod it needs is played without being asked for (see README,
    // Networking). Interfaces the manifest names need --setup-pod-network.
    let setup_pod_network = args.setup_pod_network || applied.default_pod_interface;
    if !setup_pod_network {
        standalone::refuse_networks_without_pod(&vmi)?;
    }
    let settings = RuntimeSettings {
        mode: Mode::Standalone,
        arch,
        state_dir: state_dir(&args.flags, &vmi),
        container_disks: args.container_disks.clone(),
        config_volumes: args.config_volumes.clone(),
        pvcs: args.pvcs.clone(),
        access_credentials: args.access_credentials.clone(),
        keep_state: args.flags.keep_state,
        cache_dir: args.flags.libvirt_cache_dir.clone(),
        setup_pod_network,
        default_pod_interface: applied.default_pod_interface,
        backend_storage: args.backend_storage.clone(),
        network_info: args.network_info.clone(),
    };
    startup::run_vmi(&vmi, true, &args.flags, &settings, started)
}

/// `virt-launcher pod-network-phase1`: see [`standalone::network::pod_network_phase1`].
///
/// # Errors
/// [`LauncherError`] from reading the VMI or building the network.
pub fn phase1(args: &Phase1Args) -> Result<(), LauncherError> {
    let arch = Arch::host().map_err(|e| LauncherError::Runtime(e.to_string()))?;
    let bytes = super::read_input(&args.file)?;
    let vmi = api::load_vmi(&bytes, arch).map_err(|e| LauncherError::Input(e.to_string()))?;
    standalone::network::pod_network_phase1(&vmi, args.cache_dir.as_deref())
}

/// `--state-dir`, by default `/var/run/virt-launcher/<namespace>_<name>`.
fn state_dir(flags: &LauncherFlags, vmi: &api::VirtualMachineInstance) -> PathBuf {
    flags
        .state_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("/var/run/virt-launcher/{}", vmi.domain_name())))
}

/// Pod mode: KubeVirt's command line. The VMI arrives from virt-handler's
/// SyncVirtualMachine, or (KubeVirt HEAD's standalone mode) from the
/// `STANDALONE_VMI` environment variable, synced right after markReady.
///
/// # Errors
/// [`LauncherError`]; nothing is left running when it returns.
pub fn pod(flags: &LauncherFlags, started: Instant) -> Result<(), LauncherError> {
    startup::signals::install_signal_handlers()?;
    let arch = Arch::host().map_err(|e| LauncherError::Runtime(e.to_string()))?;
    let (vmi, sync) = match std::env::var("STANDALONE_VMI") {
        Ok(doc) => (input::load(doc.as_bytes(), flags, arch, None)?.0, true),
        Err(_) => (input::identity_from_flags(flags)?, false),
    };
    let settings = RuntimeSettings {
        mode: Mode::Pod,
        arch,
        state_dir: state_dir(flags, &vmi),
        container_disks: Vec::new(),
        config_volumes: Vec::new(),
        pvcs: Vec::new(),
        access_credentials: Vec::new(),
        keep_state: flags.keep_state,
        cache_dir: flags.libvirt_cache_dir.clone(),
        setup_pod_network: false,
        default_pod_interface: false,
        backend_storage: None,
        network_info: None,
    };
    startup::run_vmi(&vmi, sync, flags, &settings, started)
}
