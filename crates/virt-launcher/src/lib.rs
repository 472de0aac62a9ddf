//! KubeVirt's per-VM launcher as a library: the binary (`main.rs`) parses
//! the command line and calls [`commands`]; everything else lives here, so
//! tests can drive the command handler, the event bridge and the start-up
//! sequence without spawning the binary.
//!
//! - [`commands`]: the subcommands (`convert`, `run`, pod mode,
//!   `pod-network-phase1`) and the input they read;
//! - [`launcher`]: the start-up sequence, supervision and shutdown;
//! - [`service`]: the command handler, domain cache and event bridge;
//! - [`monitor`]: watching QEMU, graceful shutdown on a signal;
//! - [`isolation`], [`pidns`]: the private runtime (mount namespace, bind
//!   mounts, PID namespace);
//! - [`flags`], [`logging`], [`ctl`].
//!
//! Exit codes: 0 done, 1 runtime failure, 2 input refused
//! ([`error::LauncherError::exit_code`]).

pub mod bridge;
pub mod commands;
pub mod ctl;
pub mod error;
pub mod flags;
pub mod handler;
pub mod host;
pub mod input;
pub mod isolation;
pub mod logging;
pub mod monitor;
pub mod pidns;
pub mod pod;
pub mod podnet;
pub mod standalone;
pub mod startup;
pub mod sync;
