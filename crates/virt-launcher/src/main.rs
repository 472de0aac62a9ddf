//! `virt-launcher`: KubeVirt's per-VM launcher.
//!
//! - `virt-launcher [FLAGS]` — pod mode, KubeVirt's command line. Until the
//!   command server exists, the VMI comes from `STANDALONE_VMI` (as in
//!   KubeVirt HEAD).
//! - `virt-launcher run VMI.yaml` — run one VMI without Kubernetes.
//! - `virt-launcher convert VMI.yaml` — print the domain XML.
//!
//! Exit codes: 0 done, 1 runtime failure, 2 input refused.

mod ctl;
mod flags;
mod isolation;
mod launcher;
mod logging;
mod monitor;
mod pidns;
mod service;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use api::cluster::{ClusterDefaults, VmRolloutStrategy};
use api::Arch;
use clap::{Args, Parser, Subcommand};
use converter::ConvertContext;

use crate::flags::LauncherFlags;
use crate::launcher::{LauncherError, Mode, RuntimeSettings};

#[derive(Parser, Debug)]
#[command(
    name = "virt-launcher",
    version,
    about = "KubeVirt's per-VM launcher, in Rust",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    flags: LauncherFlags,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the libvirt domain XML for a VMI (or a VirtualMachine's template).
    Convert(ConvertArgs),
    /// Run one VMI without Kubernetes until it stops (Ctrl-C shuts it down).
    Run(Box<RunArgs>),
    /// Talk to a running launcher over its command socket.
    Ctl(ctl::CtlArgs),
    /// Build virt-handler's network phase 1 for a VMI's interfaces (pod
    /// links eth0 and pod<hash>; masquerade: bridge k6t-eth0, tap0,
    /// nftables NAT; bridge with --cache-dir: k6t-<name>, tap<name>, the
    /// dummy and vif-cache-<name>.json) in the current network namespace,
    /// which must not be the host's (run it under `unshare -n` or `ip
    /// netns exec`): the pod a launcher in pod mode expects, for tests and
    /// pods without virt-handler.
    PodNetworkPhase1(Phase1Args),
}

#[derive(Args, Debug)]
struct Phase1Args {
    /// VMI manifest, YAML or JSON (`-` for standard input).
    file: PathBuf,
    /// Where to write the bridge binding's DHCP caches
    /// (`vif-cache-<podIface>.json`; virt-handler writes them into the
    /// launcher's private directory, `/var/run/kubevirt-private`). Without
    /// it, only the masquerade binding is built.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct ConvertArgs {
    /// VMI manifest, YAML or JSON (`-` for standard input).
    file: PathBuf,
    /// Target architecture: amd64, arm64, ppc64le, s390x (default: this host's).
    #[arg(long)]
    arch: Option<String>,
    /// Use TCG when /dev/kvm is absent.
    #[arg(long)]
    allow_emulation: bool,
    /// Always use TCG (`<domain type='qemu'>`).
    #[arg(long)]
    use_emulation: bool,
    /// Also check the XML with libvirt's schema (virt-xml-validate).
    #[arg(long)]
    validate: bool,
    /// KubeVirt's network-info downward API file (in a pod
    /// /etc/podinfo/network-info): the host PCI address of each SR-IOV
    /// interface's VF, `{"interfaces":[{"network":NAME,"deviceInfo":{"pci":{"pci-address":"dddd:bb:ss.f"}}}]}`.
    #[arg(long)]
    network_info: Option<PathBuf>,
    /// KubeVirt's VM rollout strategy of the cluster this VMI would run in
    /// (`vmRolloutStrategy`): LiveUpdate (KubeVirt's default) prepares CPU
    /// and memory hot-plug (maxSockets = 4 × sockets; maxGuest = 4 ×
    /// guest from 1 GiB), Stage does not.
    #[arg(long, default_value = "LiveUpdate", value_parser = parse_rollout_strategy)]
    vm_rollout_strategy: VmRolloutStrategy,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// VMI manifest, YAML or JSON (`-` for standard input).
    file: PathBuf,
    /// Image file for a containerDisk volume, as VOLUME=FILE (repeatable).
    #[arg(long = "container-disk", value_parser = parse_container_disk)]
    container_disks: Vec<(String, PathBuf)>,
    /// Directory holding the files of a configMap, secret, downwardAPI or
    /// serviceAccount volume, or the secret of a cloud-init volume's
    /// userDataSecretRef / networkDataSecretRef, as VOLUME=DIR (repeatable).
    #[arg(long = "config-volume", value_parser = parse_config_volume)]
    config_volumes: Vec<(String, PathBuf)>,
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
    #[arg(long = "pvc", value_parser = launcher::PvcArg::parse)]
    pvcs: Vec<launcher::PvcArg>,
    /// KubeVirt's backend storage (the VM's `persistent-state-for-<vm>`
    /// claim): a directory whose `nvram/` and `swtpm/` are mounted where
    /// libvirt keeps EFI variables and TPM state, so VMIs with
    /// `efi.persistent` or `tpm.persistent` keep them across runs.
    #[arg(long = "backend-storage")]
    backend_storage: Option<PathBuf>,
    /// Directory of the Secret of an sshPublicKey access credential with
    /// noCloud or configDrive propagation, as SECRET=DIR (repeatable): its
    /// files are the public keys written into the cloud-init meta-data.
    #[arg(long = "access-credential", value_parser = parse_config_volume)]
    access_credentials: Vec<(String, PathBuf)>,
    /// Architecture of the guest: amd64, arm64, ppc64le or s390x (default:
    /// this host's). Another architecture than the host's always runs under
    /// software emulation (TCG) and needs that architecture's QEMU
    /// (qemu-system-aarch64, -ppc64 or -s390x) and, for arm64, the AAVMF
    /// firmware (`--ovmf-path`, default /usr/share/AAVMF). Standalone only:
    /// in a pod the guest is always of the node's architecture.
    #[arg(long)]
    arch: Option<String>,
    /// Play the pod: a fresh network namespace where a stand-in for
    /// virt-handler's network phase 1 builds the masquerade bridge, tap
    /// and NAT; the VM runs attached inside it, with the launcher's DHCP.
    #[arg(long)]
    setup_pod_network: bool,
    /// KubeVirt's VM rollout strategy of the cluster this VMI would run in
    /// (see `convert --help`): LiveUpdate (default) or Stage.
    #[arg(long, default_value = "LiveUpdate", value_parser = parse_rollout_strategy)]
    vm_rollout_strategy: VmRolloutStrategy,
    /// KubeVirt's network-info downward API file giving the host PCI
    /// address of each SR-IOV interface's VF (see `convert --help`). The
    /// VF must exist on this host, bound to vfio-pci: it is passed through
    /// with managed='no'.
    #[arg(long)]
    network_info: Option<PathBuf>,
    #[command(flatten)]
    flags: LauncherFlags,
}

fn parse_rollout_strategy(s: &str) -> Result<VmRolloutStrategy, String> {
    s.parse()
        .map_err(|e: api::cluster::UnknownRolloutStrategy| e.to_string())
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

/// Largest manifest accepted (a VMI is a few KiB).
const MAX_INPUT: u64 = 16 << 20;

fn read_input(path: &PathBuf) -> Result<Vec<u8>, LauncherError> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT + 1)
            .read_to_end(&mut buf)
            .map_err(|e| LauncherError::Input(format!("reading standard input: {e}")))?;
        if buf.len() as u64 > MAX_INPUT {
            return Err(LauncherError::Input(
                "standard input: larger than 16 MiB".into(),
            ));
        }
        return Ok(buf);
    }
    let err = |e: std::io::Error| LauncherError::Input(format!("{}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(err)?;
    if !meta.is_file() {
        return Err(LauncherError::Input(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT + 1).read_to_end(&mut buf))
        .map_err(err)?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(LauncherError::Input(format!(
            "{}: larger than 16 MiB",
            path.display()
        )));
    }
    Ok(buf)
}

fn convert(args: &ConvertArgs) -> Result<(), LauncherError> {
    let host = Arch::host().map_err(|e| LauncherError::Runtime(e.to_string()))?;
    let arch = match &args.arch {
        Some(a) => a
            .parse()
            .map_err(|e: api::arch::UnknownArch| LauncherError::Input(format!("--arch: {e}")))?,
        None => host,
    };
    let bytes = read_input(&args.file)?;
    let cluster = ClusterDefaults {
        vm_rollout_strategy: args.vm_rollout_strategy,
    };
    let (mut vmi, _) = api::load_standalone(&bytes, arch, &cluster)
        .map_err(|e| LauncherError::Input(e.to_string()))?;
    api::defaults::fill_missing_uid(&mut vmi);
    // The XML is for a host of `arch`; this host's /dev/kvm only tells for its own arch.
    let kvm = arch != host || std::path::Path::new("/dev/kvm").exists();
    let virt = converter::choose_virt_type(kvm, args.allow_emulation, args.use_emulation)
        .map_err(|e| LauncherError::Runtime(e.to_string()))?;
    let mut ctx = ConvertContext::new(arch, virt);
    ctx.pod_cpuset = launcher::pod_cpuset();
    ctx.host_numa = launcher::host_numa();
    if arch == host {
        // Firmware files are a fact of this host only.
        ctx.ovmf_files = Some(launcher::dir_files(&ctx.paths.ovmf_dir));
    }
    // The claim facts virt-handler reports in the VMI's status: preallocated
    // claims get no discard (as in `run`), block-mode claims are the
    // device virt-handler would give the pod.
    let status = |e: storage::StorageError| LauncherError::Input(e.to_string());
    ctx.volumes_discard_ignore = storage::pvc::preallocated_volumes(&vmi).map_err(status)?;
    ctx.prepared.block_volumes = storage::pvc::block_mode_volumes(&vmi).map_err(status)?;
    if let Some(file) = &args.network_info {
        let info = network::sriov::read_network_info(file, false, std::time::Duration::ZERO)
            .map_err(|e| LauncherError::Input(format!("--network-info {e}")))?;
        ctx.sriov_pci =
            network::sriov::host_addresses(&vmi, info.as_ref(), &file.display().to_string(), None)
                .map_err(LauncherError::Input)?;
    }
    let dom = converter::convert(&vmi, &ctx).map_err(|e| LauncherError::Input(e.to_string()))?;
    // The inline cloud-init data is refused here as `run` would refuse it.
    storage::cloudinit::check_inline(&vmi).map_err(|e| LauncherError::Input(e.to_string()))?;
    // So are network values only phase 2 reads (CIDRs, dhcpOptions).
    network::phase2::check_spec(&vmi).map_err(LauncherError::Input)?;
    let xml = dom
        .to_xml()
        .map_err(|e| LauncherError::Runtime(e.to_string()))?;
    if args.validate {
        validate_xml(&xml)?;
    }
    print!("{xml}");
    Ok(())
}

/// Runs libvirt's `virt-xml-validate FILE domain` and fails with its output.
fn validate_xml(xml: &str) -> Result<(), LauncherError> {
    let dir = std::env::temp_dir().join(format!("virt-launcher-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| LauncherError::Runtime(format!("{}: {e}", dir.display())))?;
    let file = dir.join("domain.xml");
    std::fs::write(&file, xml)
        .map_err(|e| LauncherError::Runtime(format!("{}: {e}", file.display())))?;
    let mut cmd = std::process::Command::new("virt-xml-validate");
    cmd.arg(&file).arg("domain");
    let res = process::run(cmd, std::time::Duration::from_secs(30), 1 << 20);
    let _ = std::fs::remove_dir_all(&dir);
    match res {
        Ok(_) => Ok(()),
        Err(process::RunError::Failed { stderr, .. }) => Err(LauncherError::Input(format!(
            "libvirt's schema rejects the domain XML:\n{stderr}"
        ))),
        Err(e) => Err(LauncherError::Runtime(format!("virt-xml-validate: {e}"))),
    }
}

fn run(args: &RunArgs, started: Instant) -> Result<(), LauncherError> {
    pidns::setup_inner()?;
    launcher::install_signal_handlers()?;
    let arch = match &args.arch {
        Some(a) => a
            .parse()
            .map_err(|e: api::arch::UnknownArch| LauncherError::Input(format!("--arch: {e}")))?,
        None => Arch::host().map_err(|e| LauncherError::Runtime(e.to_string()))?,
    };
    let bytes = read_input(&args.file)?;
    let cluster = ClusterDefaults {
        vm_rollout_strategy: args.vm_rollout_strategy,
    };
    let (vmi, applied) = launcher::load(&bytes, &args.flags, arch, Some(&cluster))?;
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
        launcher::refuse_networks_without_pod(&vmi)?;
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
    launcher::run_vmi(&vmi, true, &args.flags, &settings, started)
}

fn phase1(args: &Phase1Args) -> Result<(), LauncherError> {
    let arch = Arch::host().map_err(|e| LauncherError::Runtime(e.to_string()))?;
    let bytes = read_input(&args.file)?;
    let vmi = api::load_vmi(&bytes, arch).map_err(|e| LauncherError::Input(e.to_string()))?;
    launcher::pod_network_phase1(&vmi, args.cache_dir.as_deref())
}

fn state_dir(flags: &LauncherFlags, vmi: &api::VirtualMachineInstance) -> PathBuf {
    flags
        .state_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("/var/run/virt-launcher/{}", vmi.domain_name())))
}

/// Pod mode: KubeVirt's command line. The VMI arrives from virt-handler's
/// SyncVirtualMachine, or (KubeVirt HEAD's standalone mode) from the
/// `STANDALONE_VMI` environment variable, synced right after markReady.
fn pod(flags: &LauncherFlags, started: Instant) -> Result<(), LauncherError> {
    launcher::install_signal_handlers()?;
    let arch = Arch::host().map_err(|e| LauncherError::Runtime(e.to_string()))?;
    let (vmi, sync) = match std::env::var("STANDALONE_VMI") {
        Ok(doc) => (launcher::load(doc.as_bytes(), flags, arch, None)?.0, true),
        Err(_) => (launcher::identity_from_flags(flags)?, false),
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
    launcher::run_vmi(&vmi, sync, flags, &settings, started)
}

/// Prints a command-line error as the launcher's other refusals are
/// printed: one line, `virt-launcher: ...`, exit code 2. Help and version
/// requests are printed by clap as usual.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.use_stderr() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("virt-launcher: {first} (see --help)");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let started = Instant::now();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let verbosity = match &cli.command {
        Some(Command::Run(r)) => r.flags.verbosity,
        _ => cli.flags.verbosity,
    };
    logging::init(verbosity);
    if matches!(cli.command, Some(Command::Run(_))) && pidns::needed() {
        return pidns::run_outer().unwrap_or_else(|e| {
            eprintln!("virt-launcher: {e}");
            ExitCode::from(e.exit_code())
        });
    }
    let res = match &cli.command {
        Some(Command::Convert(a)) => convert(a),
        Some(Command::Run(a)) => run(a, started),
        Some(Command::Ctl(a)) => ctl::run(a),
        Some(Command::PodNetworkPhase1(a)) => phase1(a),
        None => pod(&cli.flags, started),
    };
    match res {
        Ok(()) => {
            if matches!(cli.command, None | Some(Command::Run(_))) {
                tracing::info!("Exiting...");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            // In a pod, a JSON log line for the log collector too; always
            // exactly one plain line for people.
            if cli.command.is_none() && !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                tracing::error!("{e}");
            }
            eprintln!("virt-launcher: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
