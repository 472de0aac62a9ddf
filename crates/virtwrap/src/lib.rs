//! The libvirt side of virt-launcher: the guest agent ([`agent`]), the daemons' configuration
//! ([`config`]) and supervision ([`supervisor`]), the connection
//! ([`connection`]), KubeVirt's state names ([`state`]), the domain
//! statistics ([`stats`]), the dirty rate ([`dirtyrate`]), the runtime
//! metadata ([`metadata`]), the memory dump ([`memory_dump`]), screenshots ([`screenshot`]) and the
//! [`manager::DomainManager`] that runs the VMI's domain.

pub mod access_credentials;
pub mod agent;
pub mod capscache;
pub mod config;
pub mod connection;
pub mod dirtyrate;
pub mod events;
pub mod manager;
pub mod memory_dump;
pub mod metadata;
pub mod migration;
pub mod screenshot;
pub mod state;
pub mod stats;
pub mod supervisor;
pub mod version;

pub use manager::{
    DomainManager, DomainStatus, IncomingOutcome, LibvirtDomainManager, ManagerError,
    ShutdownRequest, SyncInputs,
};
