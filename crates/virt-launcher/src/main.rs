//! `virt-launcher`: KubeVirt's per-VM launcher. This binary parses the
//! command line and dispatches to the library (`virt_launcher`):
//!
//! - `virt-launcher [FLAGS]` — pod mode, KubeVirt's command line: the VMI
//!   comes from virt-handler's SyncVirtualMachine, or from `STANDALONE_VMI`
//!   (as in KubeVirt HEAD).
//! - `virt-launcher run VMI.yaml` — run one VMI without Kubernetes.
//! - `virt-launcher convert VMI.yaml` — print the domain XML.
//! - `virt-launcher ctl ...`, `virt-launcher pod-network-phase1 ...`.
//!
//! Exit codes: 0 done, 1 runtime failure, 2 input refused.

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use virt_launcher::commands::capscache::CapsCacheArgs;
use virt_launcher::commands::convert::ConvertArgs;
use virt_launcher::commands::run::{Phase1Args, RunArgs};
use virt_launcher::flags::LauncherFlags;
use virt_launcher::{commands, ctl, logging, pidns};

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
    Ctl(Box<ctl::CtlArgs>),
    /// Build virt-handler's network phase 1 for a VMI's interfaces (pod
    /// links eth0 and pod<hash>; masquerade: bridge k6t-eth0, tap0,
    /// nftables NAT; bridge with --cache-dir: k6t-<name>, tap<name>, the
    /// dummy and vif-cache-<name>.json) in the current network namespace,
    /// which must not be the host's (run it under `unshare -n` or `ip
    /// netns exec`): the pod a launcher in pod mode expects, for tests and
    /// pods without virt-handler.
    PodNetworkPhase1(Phase1Args),
    /// Make the QEMU capabilities cache the launcher image ships (at image
    /// build, as root): libvirt probes the image's QEMU binaries, and the
    /// files are recorded with the hashes and facts the launcher checks
    /// before it seeds libvirt's cache from them in a pod.
    CapabilitiesCache(CapsCacheArgs),
    /// Play virt-handler's migration proxies for one migration between two
    /// launchers on this host (source's `migrationproxy/<uid>-*source.sock`
    /// to the target's libvirt socket and migration sockets) until SIGTERM;
    /// then `ctl migrate` moves the VMI.
    MigrationProxy(virt_launcher::standalone::migration_proxy::ProxyArgs),
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
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // clap lists what a message ending in ':' is about (the missing
    // arguments) on the indented lines below it: keep them on the line.
    let listed: Vec<&str> = if first.ends_with(':') {
        lines
            .take_while(|l| l.starts_with(' '))
            .map(str::trim)
            .collect()
    } else {
        Vec::new()
    };
    if listed.is_empty() {
        ::logging::stderr_line(&format!("virt-launcher: {first} (see --help)"));
    } else {
        ::logging::stderr_line(&format!(
            "virt-launcher: {first} {} (see --help)",
            listed.join(", ")
        ));
    }
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let started = Instant::now();
    virt_launcher::footprint::configure_allocator();
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
            ::logging::stderr_line(&format!("virt-launcher: {e}"));
            ExitCode::from(e.exit_code())
        });
    }
    let res = match &cli.command {
        Some(Command::Convert(a)) => commands::convert::convert(a),
        Some(Command::Run(a)) => commands::run::run(a, started),
        Some(Command::Ctl(a)) => ctl::run(a),
        Some(Command::PodNetworkPhase1(a)) => commands::run::phase1(a),
        Some(Command::CapabilitiesCache(a)) => commands::capscache::capabilities_cache(a),
        Some(Command::MigrationProxy(a)) => virt_launcher::standalone::migration_proxy::run(a),
        None => commands::run::pod(&cli.flags, started),
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
            ::logging::stderr_line(&format!("virt-launcher: {e}"));
            ExitCode::from(e.exit_code())
        }
    }
}
