//! The libvirt side of virt-launcher: the daemons' configuration
//! ([`config`]) and supervision ([`supervisor`]), the connection
//! ([`connection`]), KubeVirt's state names ([`state`]) and the
//! [`manager::DomainManager`] that runs the VMI's domain.

pub mod config;
pub mod connection;
pub mod manager;
pub mod state;
pub mod supervisor;

pub use manager::{DomainManager, DomainStatus, LibvirtDomainManager, ManagerError};
