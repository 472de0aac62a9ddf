//! virt-handler's side of the launcher: the gRPC protocol KubeVirt speaks
//! over Unix sockets.
//!
//! - [`proto`]: the generated messages and services (`kubevirt.cmd.v1`,
//!   `kubevirt.cmd.info`, `kubevirt.notify.v1`, `kubevirt.notify.info`);
//! - [`server`]: the command server on `<share>/sockets/launcher-init-sock`,
//!   calling the launcher's [`handler::Handler`],
//!   and [`error`]: why a command failed, in KubeVirt's words;
//! - [`notify`]: the client that reports domain events to virt-handler;
//! - [`client`]: a small client on the same protocol (tests, `virt-launcher ctl`).

pub mod client;
pub mod error;
pub mod handler;
pub mod notify;
pub mod server;
pub mod sev;
pub mod spin;
pub mod vmstats;

/// Generated protocol code (the generator writes no documentation).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    /// `kubevirt.cmd.v1`: the commands.
    pub mod cmd {
        include!("generated/kubevirt.cmd.v1.rs");
        include!("generated/kubevirt.cmd.v1.services.rs");
    }
    /// `kubevirt.cmd.info`: command protocol versions.
    pub mod cmd_info {
        include!("generated/kubevirt.cmd.info.rs");
        include!("generated/kubevirt.cmd.info.services.rs");
    }
    /// `kubevirt.notify.v1`: the notifications.
    pub mod notify {
        include!("generated/kubevirt.notify.v1.rs");
        include!("generated/kubevirt.notify.v1.services.rs");
    }
    /// `kubevirt.notify.info`: notify protocol versions.
    pub mod notify_info {
        include!("generated/kubevirt.notify.info.rs");
        include!("generated/kubevirt.notify.info.services.rs");
    }
}
