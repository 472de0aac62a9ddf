//! `virt-launcher run` (one VMI without Kubernetes), KubeVirt's pod mode
//! (no subcommand) and `virt-launcher pod-network-phase1`.

use std::path::PathBuf;
use std::time::Instant;

use api::cluster::{ClusterDefaults, VmRolloutStrategy};
use api::Arch;
use clap::Args;

use crate::error::LauncherError;
use crate::flags::LauncherFlags;
use crate::pod::PodSource;
use crate::standalone::StandaloneArgs;
use crate::{input, standalone, startup};

/// `run`'s command line.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// VMI manifest, YAML or JSON (`-` for standard input).
    pub file: PathBuf,
    /// Architecture of the guest: amd64, arm64, ppc64le or s390x (default:
    /// this host's). Another architecture than the host's always runs under
    /// software emulation (TCG) and needs that architecture's QEMU
    /// (qemu-system-aarch64, -ppc64 or -s390x) and, for arm64, the AAVMF
    /// firmware (`--ovmf-path`, default /usr/share/AAVMF). Standalone only:
    /// in a pod the guest is always of the node's architecture.
    #[arg(long)]
    pub arch: Option<String>,
    /// KubeVirt's VM rollout strategy of the cluster this VMI would run in
    /// (see `convert --help`): LiveUpdate (default) or Stage.
    #[arg(long, default_value = "LiveUpdate", value_parser = super::parse_rollout_strategy)]
    pub vm_rollout_strategy: VmRolloutStrategy,
    /// Be the target of a live migration: prepare everything but start
    /// nothing, and wait (up to `--qemu-timeout`) for the domain to arrive
    /// from a launcher that `ctl migrate` moves it from (through
    /// `virt-launcher migration-proxy`); then run it as if started here.
    #[arg(long)]
    pub migration_target: bool,
    /// What a pod would give the launcher.
    #[command(flatten)]
    pub standalone: StandaloneArgs,
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
    /// The uid and gid the taps are made for, as virt-handler's
    /// `create-tap --uid --gid` (107 for a launcher run with
    /// `--run-as-nonroot`, whose QEMU then opens them as that user).
    /// 4294967295 is refused: to the kernel it is no owner at all, so the
    /// flag would be dropped without a word.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=4_294_967_294))]
    pub tap_owner: Option<u32>,
    /// Only this interface, in a pod whose other interfaces phase 1 already
    /// built (virt-handler's `FilterNetsForLiveUpdate` on a running VMI): a
    /// network added to the spec gets Multus's pod link and the bridge
    /// binding's links and cache; an interface whose `state` is `absent`
    /// loses them again (and its cache). The namespace must not be the
    /// host's; it need not be fresh.
    #[arg(long, value_name = "NAME")]
    pub interface: Option<String>,
}

/// `virt-launcher run`: runs the VMI in `args.file` until it stops.
///
/// # Errors
/// [`LauncherError`]; nothing is left running when it returns.
pub fn run(args: &RunArgs, started: Instant) -> Result<(), LauncherError> {
    crate::pidns::setup_inner()?;
    startup::signals::install_signal_handlers()?;
    let arch = match &args.arch {
        Some(a) => a.parse().map_err(|e: api::arch::UnknownArch| {
            LauncherError::input_at("--arch", e.to_string())
        })?,
        None => Arch::host().map_err(|e| LauncherError::runtime(e.to_string()))?,
    };
    let bytes = input::read_input(&args.file)?;
    let cluster = ClusterDefaults {
        vm_rollout_strategy: args.vm_rollout_strategy,
    };
    let (vmi, applied) = input::load(&bytes, &args.flags, arch, Some(&cluster))?;
    // Standalone, the guest's architecture is the user's choice: a spec
    // naming another one is input to correct, not a host fault.
    if let Some(want) = vmi.spec.architecture.as_deref() {
        if want != arch.kubevirt_name() {
            return Err(LauncherError::input(format!(
                "spec.architecture is {want} but this run is for {}: pass --arch {want}",
                arch.kubevirt_name()
            )));
        }
    }
    // KubeVirt's default interface, on a VMI that asked for no network:
    // the pod it needs is played without being asked for (see README,
    // Networking). Interfaces the manifest names need --setup-pod-network.
    // `--network-info`: read once, refused (as `convert` refuses it)
    // before anything starts, whether or not an interface needs it.
    let network_info = args
        .standalone
        .network_info
        .as_deref()
        .map(standalone::network::read_network_info)
        .transpose()?;
    let source = PodSource::Standalone {
        args: &args.standalone,
        default_interface: applied.default_pod_interface,
        network_info: network_info.as_ref(),
    };
    startup::run_vmi(
        vmi,
        !args.migration_target,
        &args.flags,
        arch,
        source,
        started,
    )
}

/// `virt-launcher pod-network-phase1`: see
/// [`standalone::network::pod_network_phase1`].
///
/// # Errors
/// [`LauncherError`] from reading the VMI or building the network.
pub fn phase1(args: &Phase1Args) -> Result<(), LauncherError> {
    let arch = Arch::host().map_err(|e| LauncherError::runtime(e.to_string()))?;
    let bytes = input::read_input(&args.file)?;
    let vmi = api::load_vmi(&bytes, arch)?;
    match &args.interface {
        None => {
            standalone::network::pod_network_phase1(&vmi, args.cache_dir.as_deref(), args.tap_owner)
        }
        Some(name) => standalone::network::pod_network_phase1_live(
            &vmi,
            name,
            args.cache_dir.as_deref(),
            args.tap_owner,
        ),
    }
}

/// Pod mode: KubeVirt's command line. The VMI arrives from virt-handler's
/// SyncVirtualMachine, or (KubeVirt HEAD's standalone mode) from the
/// `STANDALONE_VMI` environment variable, synced right after markReady.
///
/// # Errors
/// [`LauncherError`]; nothing is left running when it returns.
pub fn pod(flags: &LauncherFlags, started: Instant) -> Result<(), LauncherError> {
    startup::signals::install_signal_handlers()?;
    let arch = Arch::host().map_err(|e| LauncherError::runtime(e.to_string()))?;
    let (vmi, sync) = match std::env::var("STANDALONE_VMI") {
        Ok(doc) => {
            // The variable is the input's name: a field path stays as it
            // is, a document that does not parse says where it came from.
            let vmi = input::load(doc.as_bytes(), flags, arch, None).map_err(|mut e| {
                e.field = Some(match e.field.take() {
                    Some(f) => format!("STANDALONE_VMI: {f}"),
                    None => "STANDALONE_VMI".to_owned(),
                });
                e
            })?;
            (vmi.0, true)
        }
        Err(_) => (input::identity_from_flags(flags)?, false),
    };
    startup::run_vmi(vmi, sync, flags, arch, PodSource::Kubelet, started)
}
