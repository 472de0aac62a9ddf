//! Pod networking for the launcher, KubeVirt v1.6.6 semantics
//! (`pkg/network`, facts in kubevirt-facts §6).
//!
//! - [`cache`]: the files network phase 1 (virt-handler) leaves in the
//!   launcher's private directory, read with KubeVirt's paths and JSON.
//! - [`plan`]: the masquerade address plan (gateway and VM addresses).
//! - [`dhcpv4`]: what the guest is told, validated once.
//! - [`dhcpv6`]: what the guest is told over DHCPv6 (masquerade).
//! - [`server`]: the single-client DHCPv4 and DHCPv6 server loops on the
//!   pod bridge.
//! - [`phase2`]: the launcher's part: host facts for the converter and the
//!   DHCP configuration of each masquerade interface.
//! - [`sriov`]: the host PCI address of each SR-IOV interface's VF (the
//!   pod's network-info downward API file, else the device plugin's
//!   environment).
//! - [`phase1`]: a stand-in for virt-handler's part (bridge, tap, NAT),
//!   for standalone runs and tests; kept apart from everything else.

pub mod cache;
pub mod dhcpv4;
pub mod dhcpv6;
pub mod phase1;
pub mod phase2;
pub mod plan;
pub mod server;
pub mod sriov;

#[cfg(test)]
mod mutate;
