//! Masquerade address plan (kubevirt-facts §6.5): in the VM network CIDR
//! (default `10.0.2.0/24`), the gateway is the 2nd address and the VM the
//! 3rd; the CIDR must hold at least 4 addresses. The IPv6 plan is the
//! same in `vmIPv6NetworkCIDR` (default `fd10:0:2::/120`).

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

/// KubeVirt's default `vmNetworkCIDR`.
pub const DEFAULT_VM_NETWORK_CIDR: &str = "10.0.2.0/24";

/// Gateway (bridge) and VM addresses of a masquerade network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MasqueradePlan {
    /// The CIDR, host bits cleared.
    pub network: Ipv4Net,
    /// Address of the bridge `k6t-<pod>` and the guest's router.
    pub gateway: Ipv4Addr,
    /// Address the guest is given.
    pub vm: Ipv4Addr,
}

impl MasqueradePlan {
    /// The plan for `cidr` (`spec.networks[].pod.vmNetworkCIDR`), or the
    /// default when `None`.
    ///
    /// # Errors
    /// A message naming the value when it is not an IPv4 CIDR or holds
    /// fewer than 4 addresses.
    pub fn new(cidr: Option<&str>) -> Result<Self, String> {
        let text = cidr.unwrap_or(DEFAULT_VM_NETWORK_CIDR);
        let net: Ipv4Net = text
            .parse()
            .map_err(|_| format!("vmNetworkCIDR {text:?} is not an IPv4 CIDR"))?;
        if net.prefix_len() > 30 {
            return Err(format!(
                "vmNetworkCIDR {text:?} is too small: it needs at least 4 addresses"
            ));
        }
        let base = u32::from(net.network());
        Ok(MasqueradePlan {
            network: net.trunc(),
            gateway: Ipv4Addr::from(base + 1),
            vm: Ipv4Addr::from(base + 2),
        })
    }
}

/// KubeVirt's default `vmIPv6NetworkCIDR`.
pub const DEFAULT_VM_IPV6_NETWORK_CIDR: &str = "fd10:0:2::/120";

/// IPv6 gateway (bridge) and VM addresses of a masquerade network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MasqueradePlanV6 {
    /// The CIDR, host bits cleared.
    pub network: Ipv6Net,
    /// Address of the bridge `k6t-<pod>` (`fd10:0:2::1`).
    pub gateway: Ipv6Addr,
    /// Address the guest is given over DHCPv6 (`fd10:0:2::2`).
    pub vm: Ipv6Addr,
}

impl MasqueradePlanV6 {
    /// The plan for `cidr` (`spec.networks[].pod.vmIPv6NetworkCIDR`), or
    /// the default when `None`.
    ///
    /// # Errors
    /// A message naming the value when it is not an IPv6 CIDR or holds
    /// fewer than 4 addresses.
    pub fn new(cidr: Option<&str>) -> Result<Self, String> {
        let text = cidr.unwrap_or(DEFAULT_VM_IPV6_NETWORK_CIDR);
        let net: Ipv6Net = text
            .parse()
            .map_err(|_| format!("vmIPv6NetworkCIDR {text:?} is not an IPv6 CIDR"))?;
        if net.prefix_len() > 126 {
            return Err(format!(
                "vmIPv6NetworkCIDR {text:?} is too small: it needs at least 4 addresses"
            ));
        }
        let base = u128::from(net.network());
        Ok(MasqueradePlanV6 {
            network: net.trunc(),
            gateway: Ipv6Addr::from(base + 1),
            vm: Ipv6Addr::from(base + 2),
        })
    }
}

/// Both masquerade plans of the pod network `network` (`pod` is its
/// `spec.networks[].pod`).
///
/// # Errors
/// The plan's message, prefixed with `spec.networks[name=<network>].pod`.
pub fn masquerade_plans(
    network: &str,
    pod: &api::vmi::PodNetwork,
) -> Result<(MasqueradePlan, MasqueradePlanV6), String> {
    let at = |e: String| format!("spec.networks[name={network}].pod: {e}");
    Ok((
        MasqueradePlan::new(pod.vm_network_cidr.as_deref()).map_err(at)?,
        MasqueradePlanV6::new(pod.vm_ipv6_network_cidr.as_deref()).map_err(at)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_custom_plans() {
        let p = MasqueradePlan::new(None).unwrap();
        assert_eq!(p.gateway, Ipv4Addr::new(10, 0, 2, 1));
        assert_eq!(p.vm, Ipv4Addr::new(10, 0, 2, 2));
        assert_eq!(p.network.prefix_len(), 24);
        let p = MasqueradePlan::new(Some("192.168.7.13/30")).unwrap();
        assert_eq!(
            (p.gateway, p.vm),
            (
                Ipv4Addr::new(192, 168, 7, 13),
                Ipv4Addr::new(192, 168, 7, 14)
            )
        );
        assert!(MasqueradePlan::new(Some("10.0.0.0/31"))
            .unwrap_err()
            .contains("at least 4"));
        assert!(MasqueradePlan::new(Some("fd10::/120"))
            .unwrap_err()
            .contains("not an IPv4 CIDR"));
    }

    #[test]
    fn ipv6_plans() {
        let p = MasqueradePlanV6::new(None).unwrap();
        assert_eq!(p.gateway.to_string(), "fd10:0:2::1");
        assert_eq!(p.vm.to_string(), "fd10:0:2::2");
        assert_eq!(p.network.prefix_len(), 120);
        let p = MasqueradePlanV6::new(Some("fd20::77/64")).unwrap();
        assert_eq!(
            (p.gateway.to_string(), p.vm.to_string()),
            ("fd20::1".into(), "fd20::2".into())
        );
        assert!(MasqueradePlanV6::new(Some("fd20::/127"))
            .unwrap_err()
            .contains("at least 4"));
        assert!(MasqueradePlanV6::new(Some("10.0.2.0/24"))
            .unwrap_err()
            .contains("not an IPv6 CIDR"));
    }
}
