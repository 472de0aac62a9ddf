//! End-to-end tests: the real launcher, real libvirt, real QEMU (TCG), the
//! real test guest. One test binary; tests run in parallel, each with its
//! own launcher, state directory and libvirt daemon.

// Test code: panics are the failure report, and this process never starts
// the launcher's reaper, so std's process waiting is safe here.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    missing_docs
)]

mod access_credentials;
mod agent;
mod backup;
mod bad_input;
mod capscache;
mod define;
mod dirtyrate;
mod faults;
mod firmware;
mod graceful;
mod harness;
mod hooks;
mod hostdevices;
mod hotplug;
#[path = "../support/inputs.rs"]
mod inputs;
mod lifecycle;
mod manager;
mod memory_dump;
mod migration;
mod monitor;
mod names;
mod network;
mod nics;
mod nonroot;
mod parity;
mod podbox;
mod protocol;
#[path = "../support/run.rs"]
mod run;
mod screen_stats;
mod volumes;
