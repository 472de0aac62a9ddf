//! Masquerade address plan (kubevirt-facts §6.5): in the VM network CIDR
//! (default `10.0.2.0/24`), the gateway is the 2nd address and the VM the
//! 3rd; the CIDR must hold at least 4 addresses. The IPv6 plan is the
//! same in `vmIPv6NetworkCIDR` (default `fd10:0:2::/120`).

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

/// Why a masquerade address plan could not be made. The text names the
/// field and the value as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The value is not a CIDR of the field's family.
    #[error("{field} {value:?} is not an {family} CIDR")]
    NotCidr {
        /// `vmNetworkCIDR` or `vmIPv6NetworkCIDR`.
        field: &'static str,
        /// The value as written.
        value: String,
        /// `IPv4` or `IPv6`.
        family: &'static str,
    },
    /// The CIDR holds fewer than 4 addresses (network, gateway, VM,
    /// broadcast).
    #[error("{field} {value:?} is too small: it needs at least 4 addresses")]
    TooSmall {
        /// `vmNetworkCIDR` or `vmIPv6NetworkCIDR`.
        field: &'static str,
        /// The value as written.
        value: String,
    },
    /// A plan of the pod network `network` failed
    /// ([`masquerade_plans`]).
    #[error("spec.networks[name={network}].pod: {source}")]
    Network {
        /// The network's name.
        network: String,
        /// Why its plan failed.
        #[source]
        source: Box<PlanError>,
    },
}

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
    /// [`PlanError::NotCidr`] / [`PlanError::TooSmall`] naming the value
    /// when it is not an IPv4 CIDR or holds fewer than 4 addresses.
    pub fn new(cidr: Option<&str>) -> Result<Self, PlanError> {
        const FIELD: &str = "vmNetworkCIDR";
        let text = cidr.unwrap_or(DEFAULT_VM_NETWORK_CIDR);
        let net: Ipv4Net = text.parse().map_err(|_| PlanError::NotCidr {
            field: FIELD,
            value: text.to_owned(),
            family: "IPv4",
        })?;
        if net.prefix_len() > 30 {
            return Err(PlanError::TooSmall {
                field: FIELD,
                value: text.to_owned(),
            });
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
    /// [`PlanError::NotCidr`] / [`PlanError::TooSmall`] naming the value
    /// when it is not an IPv6 CIDR or holds fewer than 4 addresses.
    pub fn new(cidr: Option<&str>) -> Result<Self, PlanError> {
        const FIELD: &str = "vmIPv6NetworkCIDR";
        let text = cidr.unwrap_or(DEFAULT_VM_IPV6_NETWORK_CIDR);
        let net: Ipv6Net = text.parse().map_err(|_| PlanError::NotCidr {
            field: FIELD,
            value: text.to_owned(),
            family: "IPv6",
        })?;
        if net.prefix_len() > 126 {
            return Err(PlanError::TooSmall {
                field: FIELD,
                value: text.to_owned(),
            });
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
/// [`PlanError::Network`]: the plan's error, under
/// `spec.networks[name=<network>].pod`.
pub fn masquerade_plans(
    network: &str,
    pod: &api::vmi::PodNetwork,
) -> Result<(MasqueradePlan, MasqueradePlanV6), PlanError> {
    let at = |e: PlanError| PlanError::Network {
        network: network.to_owned(),
        source: Box::new(e),
    };
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
        assert_eq!(
            MasqueradePlan::new(Some("10.0.0.0/31")).unwrap_err(),
            PlanError::TooSmall {
                field: "vmNetworkCIDR",
                value: "10.0.0.0/31".into()
            }
        );
        assert_eq!(
            MasqueradePlan::new(Some("10.0.0.0/31"))
                .unwrap_err()
                .to_string(),
            r#"vmNetworkCIDR "10.0.0.0/31" is too small: it needs at least 4 addresses"#
        );
        assert_eq!(
            MasqueradePlan::new(Some("fd10::/120"))
                .unwrap_err()
                .to_string(),
            r#"vmNetworkCIDR "fd10::/120" is not an IPv4 CIDR"#
        );
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
        assert_eq!(
            MasqueradePlanV6::new(Some("fd20::/127"))
                .unwrap_err()
                .to_string(),
            r#"vmIPv6NetworkCIDR "fd20::/127" is too small: it needs at least 4 addresses"#
        );
        assert_eq!(
            MasqueradePlanV6::new(Some("10.0.2.0/24"))
                .unwrap_err()
                .to_string(),
            r#"vmIPv6NetworkCIDR "10.0.2.0/24" is not an IPv6 CIDR"#
        );
    }

    #[test]
    fn plans_of_a_network_name_it() {
        let pod = api::vmi::PodNetwork {
            vm_ipv6_network_cidr: Some("fd20::/127".into()),
            ..Default::default()
        };
        let e = masquerade_plans("default", &pod).unwrap_err();
        assert!(matches!(&e, PlanError::Network { network, .. } if network == "default"));
        assert_eq!(
            e.to_string(),
            r#"spec.networks[name=default].pod: vmIPv6NetworkCIDR "fd20::/127" is too small: it needs at least 4 addresses"#
        );
    }
}
