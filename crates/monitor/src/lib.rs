//! `virt-launcher-monitor`: the first process of KubeVirt's compute
//! container (virt-controller renders `/usr/bin/virt-launcher-monitor` plus
//! the launcher's flags as its command), after KubeVirt v1.6.6's
//! `cmd/virt-launcher-monitor`.
//!
//! What it does, in order:
//! 1. reads `--container-disk-dir`, `--keep-after-failure`, `--uid` and `-v`
//!    and ignores other flags ([`flags`]); `VIRT_LAUNCHER_LOG_VERBOSITY`
//!    overrides `-v` when it is an integer;
//! 2. becomes a child subreaper (so orphans of the launcher, such as QEMU,
//!    come back to it when it is not PID 1) and starts `virt-launcher` with
//!    the same arguments minus `--keep-after-failure`, with
//!    `CAP_NET_BIND_SERVICE` ambient when the monitor has it permitted
//!    ([`run::Monitor::start`]; where the launcher is: [`run::launcher_path`]);
//! 3. forwards SIGINT, SIGTERM and SIGQUIT to the launcher as SIGTERM and
//!    reaps every child ([`run::Monitor`]);
//! 4. once the launcher is reaped: logs passt's log and QEMU's non-root logs
//!    ([`files::dump_logs`]), sends a leftover QEMU (one that descends from
//!    the monitor, [`procs`]) SIGTERM and gives it 10 s
//!    ([`run::stop_leftover_qemu`]), asks an Istio proxy to quit ([`envoy`])
//!    and removes the `*.sock` files of the container-disk directory
//!    ([`files::remove_sockets`]);
//! 5. with `--keep-after-failure` and a failure, stays (handling signals)
//!    until killed; else exits with the launcher's exit code (255 when a
//!    signal ended it, as Go's `os.Exit(-1)`), or 1 when it could not start
//!    the launcher or a QEMU survived.
//!
//! Outside a pod (not PID 1) it finally kills what is left below it, as the
//! kernel does to a pod when its PID 1 exits ([`run::kill_descendants`]).
//! Log lines are KubeVirt's JSON lines, component `virt-launcher-monitor`.

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

pub mod envoy;
pub mod files;
pub mod flags;
pub mod procs;
pub mod run;
