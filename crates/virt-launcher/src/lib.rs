//! KubeVirt's per-VM launcher as a library: the binary (`main.rs`) parses
//! the command line and calls [`commands`]; everything else lives here, so
//! tests can drive the command handler, the event bridge and the start-up
//! sequence without spawning the binary.
//!
//! - [`commands`]: the subcommands (`convert`, `run`, pod mode,
//!   `pod-network-phase1`);
//! - [`input`]: the VMI as it arrives, validated once; [`host`]: this
//!   host's facts, probed once;
//! - [`pod`]: the one [`pod::Mode`] and the prepared [`pod::Pod`] value,
//!   made for kubelet's pod or by [`standalone`], the stand-in for what
//!   kubelet, virt-handler and CSI do before the launcher starts;
//! - [`startup`]: the start-up sequence, supervision and shutdown, the same
//!   in both modes;
//! - [`sync`]: the one path a VMI takes to its domain; [`podnet`]: network
//!   phase 2 and SR-IOV addresses, in one place;
//! - [`handler`]: the command handler, the domain JSON and its cache;
//!   [`bridge`]: libvirt's events to virt-handler's notify socket;
//! - [`monitor`]: watching QEMU, graceful shutdown on a signal;
//! - [`isolation`], [`pidns`]: the private runtime (mount namespace, bind
//!   mounts, PID namespace);
//! - [`user`]: root or KubeVirt's non-root mode, and every path, daemon
//!   and URI decision that follows from it;
//! - [`error`], [`flags`], [`logging`], [`ctl`].
//!
//! Exit codes: 0 done, 1 runtime failure, 2 input refused
//! ([`error::LauncherError::exit_code`]).

// Standard output and error may be pipes whose reader went away: the
// print macros panic there; `logging::stderr_line`/`stdout_text` do not.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

pub mod bridge;
pub mod commands;
pub mod ctl;
pub mod error;
pub mod flags;
pub mod footprint;
pub mod handler;
pub mod host;
pub mod input;
pub mod isolation;
pub mod logging;
pub mod monitor;
pub mod pidns;
pub mod pod;
pub mod podnet;
pub mod seabios;
pub mod standalone;
pub mod startup;
pub mod sync;
pub mod user;
