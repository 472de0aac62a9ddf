//! `virt-probe`: the exec probes virt-controller wraps (v1.6.6
//! `cmd/virt-probe/virt-probe.go`; `rendercontainer.go`
//! `wrapExecProbeWithVirtProbe`: `virt-probe --domainName NS_NAME
//! --timeoutSeconds T --command CMD -- ARGS...`; `template.go`
//! `wrapGuestAgentPingWithVirtProbe`: `... --guestAgentPing`).
//!
//! Through the launcher's socket (`--socket`, by default
//! `/var/run/kubevirt/sockets/launcher-sock`): `--guestAgentPing` pings
//! the guest agent (exit 0, or 1 when the ping fails); otherwise Exec runs
//! `--command` with the remaining arguments in the guest, prints its
//! standard output (with a newline, when there is any) and exits with the
//! command's exit code; a call that got no answer exits 255 (Go's
//! `os.Exit(-1)`). No connection: exit 1; a flag pflag would not parse:
//! exit 2. `--memProfile` is accepted; it names a Go heap profile, which
//! this program does not write (it logs that).

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;

use crate::client::Launcher;

/// virt-probe's flags (pflag's names).
#[derive(Parser, Debug)]
#[command(
    name = "virt-probe",
    about = "Probe the guest through the launcher's guest agent"
)]
pub struct Flags {
    /// Socket for connecting to the cmd server
    #[arg(long, default_value = "/var/run/kubevirt/sockets/launcher-sock")]
    pub socket: PathBuf,
    /// Domain Name of the Virtual Machine to connect the agent to. Usually namespace_vmname
    #[arg(long = "domainName", default_value = "")]
    pub domain_name: String,
    /// Command to execute on the guest
    #[arg(long, default_value = "")]
    pub command: String,
    /// Path to store a memory profile. Profiling is skipped if empty
    #[arg(long = "memProfile", default_value = "")]
    pub mem_profile: String,
    /// Duration in seconds the probe will wait for the guest command to return.
    #[arg(
        long = "timeoutSeconds",
        default_value_t = 1,
        allow_hyphen_values = true
    )]
    pub timeout_seconds: i32,
    /// Flag to specify readiness probe based of guest-agent ping
    #[arg(long = "guestAgentPing", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = crate::parse_go_bool, default_value = "false")]
    pub guest_agent_ping: bool,
    /// Log verbosity (klog's -v)
    #[arg(short = 'v', long = "v")]
    pub v: Option<u32>,
    /// The command's arguments (pflag's positional arguments; those
    /// starting with `-` after `--`)
    pub args: Vec<String>,
}

/// Runs the probe; its exit status (see the module docs). The guest's
/// output goes to `out`.
pub fn run(f: &Flags, out: &mut impl Write) -> i32 {
    let mut c = match Launcher::connect(&f.socket) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(reason = %e, "Failed to connect cmd client");
            return 1;
        }
    };
    if f.guest_agent_ping {
        return match c.guest_ping(&f.domain_name, f.timeout_seconds) {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!(reason = %e, "Failed to ping the guest");
                1
            }
        };
    }
    let (code, stdout, err) = c.exec(&f.domain_name, &f.command, &f.args, f.timeout_seconds);
    if !stdout.is_empty() {
        let _ = writeln!(out, "{stdout}");
    }
    if let Some(e) = err {
        tracing::error!(reason = %e, "Failed executing the command");
    }
    if !f.mem_profile.is_empty() {
        tracing::info!(path = %f.mem_profile, "memory profiles are Go's pprof heap profiles: none written");
    }
    // os.Exit's status is the low byte of the code (-1 is 255).
    code & 0xff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(a: &[&str]) -> Result<Flags, clap::Error> {
        Flags::try_parse_from(std::iter::once("virt-probe").chain(a.iter().copied()))
    }

    #[test]
    fn virt_controllers_command_lines_parse() {
        let f = flags(&[
            "--domainName",
            "ns_vm",
            "--timeoutSeconds",
            "3",
            "--command",
            "cat",
            "--",
            "/etc/hostname",
            "-n",
        ])
        .unwrap();
        assert_eq!(f.domain_name, "ns_vm");
        assert_eq!(f.timeout_seconds, 3);
        assert_eq!(f.command, "cat");
        assert_eq!(f.args, ["/etc/hostname", "-n"]);
        assert!(!f.guest_agent_ping);
        assert_eq!(
            f.socket,
            PathBuf::from("/var/run/kubevirt/sockets/launcher-sock")
        );
        let f = flags(&[
            "--domainName",
            "ns_vm",
            "--timeoutSeconds",
            "1",
            "--guestAgentPing",
        ])
        .unwrap();
        assert!(f.guest_agent_ping && f.args.is_empty());
        let f = flags(&["--guestAgentPing=false", "-v", "4", "--socket=/s"]).unwrap();
        assert!(!f.guest_agent_ping);
        assert_eq!(f.v, Some(4));
        assert_eq!(f.socket, PathBuf::from("/s"));
        assert_eq!(flags(&["--nope"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn without_a_launcher_it_exits_1() {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("launcher-sock");
        let f = flags(&["--socket", s.to_str().unwrap(), "--guestAgentPing"]).unwrap();
        assert_eq!(run(&f, &mut Vec::new()), 1);
    }
}
