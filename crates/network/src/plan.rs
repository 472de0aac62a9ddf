//! Masquerade address plan (kubevirt-facts §6.5): in the VM network CIDR
//! (default `10.0.2.0/24`), the gateway is the 2nd address and the VM the
//! 3rd; the CIDR must hold at least 4 addresses.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

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
}
