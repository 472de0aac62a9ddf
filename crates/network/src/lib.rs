//! Pod networking for the launcher, KubeVirt v1.6.6 semantics
//! (`pkg/network`, facts in kubevirt-facts §6).
//!
//! - [`cache`]: the files network phase 1 (virt-handler) leaves in the
//!   launcher's private directory, read with KubeVirt's paths and JSON.
//! - [`plan`]: the masquerade address plan (gateway and VM addresses).
//! - [`dhcpv4`]: what the guest is told, validated once.
//! - [`server`]: the single-client DHCPv4 server loop on the pod bridge.

pub mod cache;
pub mod dhcpv4;
pub mod plan;
pub mod server;
