//! KubeVirt's hook sidecar protocol, the launcher's side (KubeVirt v1.6.6
//! `pkg/hooks`; kubevirt-facts §1.4 step 6, §1.8, §8.1).
//!
//! A VMI with the annotation `hooks.kubevirt.io/hookSidecars` (or a network
//! binding plugin with a sidecar) gets one sidecar container per entry;
//! virt-controller passes `--hook-sidecars N` and mounts one subdirectory
//! per sidecar below [`HOOK_SOCKETS_DIR`], where each sidecar serves gRPC on
//! a Unix socket:
//!
//! - [`Manager::collect`]: every second, every socket in a subdirectory of
//!   the hook directory not yet answered is dialled (1 s) and asked `Info`
//!   (1 s) until N sockets answered; the highest version both sides speak is
//!   chosen (v1alpha3 > v1alpha2 > v1alpha1); past the timeout
//!   (`--qemu-timeout`) [`HookError::CollectTimeout`] carries KubeVirt's
//!   message;
//! - [`Manager::on_define_domain`]: the domain XML and the VMI (JSON) go
//!   through every `OnDefineDomain` subscriber in order, 1 min each, each
//!   getting the previous one's XML;
//! - [`Manager::pre_cloud_init_iso`]: the cloud-init data (KubeVirt's JSON
//!   shapes, [`cloudinit`]) goes to the first `PreCloudInitIso` subscriber
//!   of v1alpha2 or v1alpha3, 1 min, and its answer replaces the data;
//! - [`Manager::shutdown`]: `Shutdown` to each v1alpha3 subscriber, 1 min
//!   each, when the launcher exits.
//!
//! The sidecars' order is KubeVirt's: the order in which they answered
//! `Info` (scan rounds, then directory name, then socket name). KubeVirt
//! sorts each sidecar's own hook-point list by priority but never the
//! sidecars, so a hook point's priority does not change the order; neither
//! does it here.
//!
//! The blocking methods run their calls on a runtime of their own, so they
//! may be called from any thread, also one of the launcher's blocking pool.

pub mod cloudinit;
mod conn;
mod manager;

#[cfg(test)]
mod tests;

pub use manager::{Callback, CheckError, Manager, Timeouts, Version};

/// The generated gRPC code of the protocol.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    /// `kubevirt.hooks.info`.
    pub mod info {
        include!("generated/kubevirt.hooks.info.rs");
        include!("generated/kubevirt.hooks.info.services.rs");
    }
    /// `kubevirt.hooks.v1alpha1`.
    pub mod v1alpha1 {
        include!("generated/kubevirt.hooks.v1alpha1.rs");
        include!("generated/kubevirt.hooks.v1alpha1.services.rs");
    }
    /// `kubevirt.hooks.v1alpha2`.
    pub mod v1alpha2 {
        include!("generated/kubevirt.hooks.v1alpha2.rs");
        include!("generated/kubevirt.hooks.v1alpha2.services.rs");
    }
    /// `kubevirt.hooks.v1alpha3`.
    pub mod v1alpha3 {
        include!("generated/kubevirt.hooks.v1alpha3.rs");
        include!("generated/kubevirt.hooks.v1alpha3.services.rs");
    }
}

/// Where the hook sidecars' sockets appear in KubeVirt's pod (one
/// subdirectory per sidecar container, `hook-sidecar-<i>`).
pub const HOOK_SOCKETS_DIR: &str = "/var/run/kubevirt-hooks";

/// The VMI annotation listing the hook sidecars (virt-controller reads it).
pub const HOOK_SIDECARS_ANNOTATION: &str = "hooks.kubevirt.io/hookSidecars";

/// Hook point names (KubeVirt `pkg/hooks/info`).
pub mod hook_point {
    /// Before the domain is defined.
    pub const ON_DEFINE_DOMAIN: &str = "OnDefineDomain";
    /// Before the cloud-init ISO is written.
    pub const PRE_CLOUD_INIT_ISO: &str = "PreCloudInitIso";
    /// When the launcher exits.
    pub const SHUTDOWN: &str = "Shutdown";
}

/// Why a hook call failed. Every variant names the sidecar's socket.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// Not all requested sidecars answered `Info` in time; KubeVirt's
    /// message, with what was found.
    #[error("Failed to collect all expected sidecar hook sockets within given timeout ({found} of {wanted} hook sidecars answered Info in {dir} within {timeout_secs} s)")]
    CollectTimeout {
        /// Sockets that answered.
        found: usize,
        /// `--hook-sidecars`.
        wanted: usize,
        /// The hook directory.
        dir: String,
        /// The timeout, in seconds.
        timeout_secs: u64,
    },
    /// The hook directory (or a sidecar's subdirectory) cannot be read.
    #[error("hook sidecars: cannot read {path}: {source}")]
    Dir {
        /// The directory.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A sidecar spoke gRPC but its `Info` call failed.
    #[error("hook sidecar {socket}: Info failed: {message}")]
    Info {
        /// The socket.
        socket: String,
        /// gRPC's status.
        message: String,
    },
    /// A sidecar offers no version this launcher speaks (KubeVirt's
    /// message).
    #[error("hook sidecar {socket}: Hook sidecar does not expose a supported version. Exposed versions: {exposed:?}, supported versions: [v1alpha3 v1alpha2 v1alpha1]")]
    Version {
        /// The socket.
        socket: String,
        /// The versions it listed.
        exposed: Vec<String>,
    },
    /// A callback could not be dialled.
    #[error("hook sidecar {socket}: Failed to Dial hook socket: {message}")]
    Dial {
        /// The socket.
        socket: String,
        /// The error.
        message: String,
    },
    /// A callback failed (an error status, a crash, the 1 min timeout).
    #[error("hook sidecar {socket}: {call} failed: {message}")]
    Call {
        /// The socket.
        socket: String,
        /// `OnDefineDomain`, `PreCloudInitIso` or `Shutdown`.
        call: &'static str,
        /// gRPC's status.
        message: String,
    },
    /// A callback answered something unusable (not JSON of the expected
    /// shape, not UTF-8 XML, an empty domain).
    #[error("hook sidecar {socket}: {call} returned {what}")]
    Garbage {
        /// The socket.
        socket: String,
        /// The call.
        call: &'static str,
        /// What is wrong with it.
        what: String,
    },
    /// A termination signal ended the wait for the sidecars.
    #[error("stopped by a termination signal while waiting for the hook sidecars")]
    Stopped,
    /// No thread or runtime could be made for a call (never expected).
    #[error("hook sidecars: {0}")]
    Runtime(String),
    /// The launcher's own data could not be encoded (never expected).
    #[error("hook sidecars: {0}")]
    Encode(String),
}
