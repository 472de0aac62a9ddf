//! Network phase 2, the launcher's part (kubevirt-facts §6.2–6.4): for
//! each interface, the host facts the converter puts into the domain
//! (tap, MAC, MTU) and the DHCP servers that configure the guest.
//!
//! Built for the masquerade binding on the pod network (pod link `eth0`,
//! bridge `k6t-eth0`, tap `tap0`; address plans from the CIDRs, MAC and
//! MTU from the pod link; DHCPv4 when the pod link has an IPv4 address,
//! DHCPv6 when it has an IPv6 one, as KubeVirt's masquerade config
//! generator) and the bridge binding on the pod network or a Multus one
//! (pod link `eth0` or `pod<hash>`/`net<N>`, bridge `k6t-<name>`, tap
//! `tap<name>`: the pod's address, gateway and routes from phase 1's
//! `vif-cache-<podIface>.json`, DHCPv4 only and only when phase 1 found an
//! IPv4 address). Other cases are refused by name rather than started
//! without a working network.

//!
//! - this module: [`prepare`] (every interface's host facts and DHCP
//!   plan) and [`check_spec`] (what needs no host);
//! - `bridge`: the bridge binding's part (phase 1's DHCP cache);
//! - `servers`: running the planned DHCP servers;
//! - `error`: [`Phase2Error`].

mod bridge;
mod error;
mod servers;

use std::collections::BTreeMap;

use api::VirtualMachineInstance;
use converter::interfaces::{bridge_name, tap_name, InterfaceHost};

use crate::dhcpv4::{parse_resolv_conf, DhcpV4Config, ExtraOptions, ServerOptions, LEASE_SECONDS};
use crate::dhcpv6::{DhcpV6Config, ServerV6};
use crate::phase1::{Phase1Error, PodLink};
use crate::plan::masquerade_plans;
use bridge::BridgeIface;
pub use error::Phase2Error;
pub use servers::DhcpServers;

/// Reads a pod link's MAC, MTU and address families by name (see
/// [`crate::phase1::pod_link`]).
pub type LinkReader = dyn Fn(&str) -> Result<PodLink, Phase1Error>;

/// Whether the pod has a link of this name (see
/// [`crate::phase1::link_exists`]).
pub type LinkExists = dyn Fn(&str) -> Result<bool, Phase1Error>;

/// The result of phase 2's preparation.
#[derive(Debug)]
pub struct Phase2 {
    /// Host facts per interface name, for `Prepared::interfaces`.
    pub hosts: BTreeMap<String, InterfaceHost>,
    /// DHCPv4 servers to run: (bridge to bind, what to answer).
    pub dhcp: Vec<(String, ServerOptions)>,
    /// DHCPv6 servers to run (masquerade on a pod with IPv6).
    pub dhcp6: Vec<(String, ServerV6)>,
}

/// The pod interface names KubeVirt may have given a network: the
/// primary network (`pod`, or a Multus network marked `default`) is
/// `eth0`; a secondary Multus network is `pod<hash>` (hashed scheme,
/// [`converter::interfaces::pod_iface_name`]) or, in pods made by older
/// KubeVirt releases, `net<N>` (ordinal scheme: N counts the secondary
/// Multus networks in `spec.networks` order from 1)
/// (`pkg/network/namescheme`). `None` for a network with neither source.
pub fn pod_iface_candidates(vmi: &VirtualMachineInstance, network: &str) -> Option<Vec<String>> {
    let net = vmi.spec.networks.iter().find(|n| n.name == network)?;
    if net.pod.is_some() || net.multus.as_ref().is_some_and(|m| m.default) {
        return Some(vec!["eth0".into()]);
    }
    net.multus.as_ref()?;
    let ordinal = vmi
        .spec
        .networks
        .iter()
        .filter(|n| n.multus.as_ref().is_some_and(|m| !m.default))
        .position(|n| n.name == network)
        .map_or(0, |p| p + 1);
    Some(vec![
        converter::interfaces::pod_iface_name(network, false),
        format!("net{ordinal}"),
    ])
}

/// Prepares phase 2 for every live pod interface of `vmi`
/// ([`api::vmi::Interface::is_live_pod_interface`]: not `absent`, not
/// SR-IOV, which is a host device: [`crate::sriov`]).
/// `link` reads a pod link (see [`crate::phase1::pod_link`]);
/// `link_exists` looks a link up by name (the passt binding's
/// `ovn-udn1`); `resolv_conf` is the pod's `/etc/resolv.conf` text. A
/// secondary network's pod link is the first of [`pod_iface_candidates`]
/// that `link` finds, as KubeVirt looks it up (hashed name, then ordinal).
///
/// The passt binding gets no tap and no DHCP server: libvirt starts
/// passt, which answers the guest itself. Its host fact is only the pod
/// link passt takes addresses from (`ovn-udn1` when the pod has it, else
/// `eth0`, as KubeVirt's passt sidecar chooses).
///
/// # Errors
/// [`Phase2Error`], one line naming the interface field: a binding other
/// than masquerade, bridge or passt, a bad CIDR, a missing pod link or one
/// that cannot be read, a corrupt cache, or a DHCP value that cannot be
/// encoded.
pub fn prepare(
    vmi: &VirtualMachineInstance,
    private_dir: &std::path::Path,
    resolv_conf: &str,
    link: &LinkReader,
    link_exists: &LinkExists,
) -> Result<Phase2, Phase2Error> {
    prepare_for(vmi, &|_| true, private_dir, resolv_conf, link, link_exists)
}

/// [`prepare`] for the live pod interfaces whose name `wanted` accepts
/// only (KubeVirt's `SetupPodNetworkPhase2` for the networks it is given:
/// at start all of them, on a NIC hot-plug the new one). The interface
/// index, which picks the bridge binding's fake server address, stays the
/// interface's index in the whole spec.
///
/// # Errors
/// As [`prepare`], for the interfaces wanted.
pub fn prepare_for(
    vmi: &VirtualMachineInstance,
    wanted: &dyn Fn(&str) -> bool,
    private_dir: &std::path::Path,
    resolv_conf: &str,
    link: &LinkReader,
    link_exists: &LinkExists,
) -> Result<Phase2, Phase2Error> {
    let mut out = Phase2 {
        hosts: BTreeMap::new(),
        dhcp: Vec::new(),
        dhcp6: Vec::new(),
    };
    let rc = parse_resolv_conf(resolv_conf);
    for (i, iface) in vmi.live_pod_interfaces().filter(|(_, x)| wanted(&x.name)) {
        let path = format!("spec.domain.devices.interfaces[{i}]");
        let Some(net) = vmi.spec.networks.iter().find(|n| n.name == iface.name) else {
            return Err(Phase2Error::Refused {
                field: format!("{path}.name"),
                reason: format!("no spec.networks entry named {:?}", iface.name),
            });
        };
        let Some(candidates) = pod_iface_candidates(vmi, &net.name) else {
            return Err(Phase2Error::Refused {
                field: format!("spec.networks[name={}]", net.name),
                reason: "needs a source: pod or multus".into(),
            });
        };
        if converter::passt::is_passt(iface) {
            let udn = converter::passt::OVN_UDN_LINK;
            let source = if link_exists(udn).map_err(|source| Phase2Error::Link {
                field: path.clone(),
                source,
            })? {
                udn
            } else {
                "eth0"
            };
            out.hosts.insert(
                iface.name.clone(),
                InterfaceHost {
                    source_dev: Some(source.into()),
                    ..InterfaceHost::default()
                },
            );
            continue;
        }
        if iface.bridge.is_none() && iface.masquerade.is_none() {
            return Err(Phase2Error::Refused {
                field: path,
                reason: format!(
                    "the {} binding is not wired by the launcher's phase 2 yet (use masquerade, bridge or binding: {{name: passt}})",
                    iface.binding_name().unwrap_or("default")
                ),
            });
        }
        let found = candidates
            .iter()
            .find_map(|name| link(name).ok().map(|l| (name.clone(), l)));
        let Some((pod_iface, pod_link)) = found else {
            // The first candidate's own error says why.
            let why = link(&candidates[0]).map_or_else(|e| e.to_string(), |_| String::new());
            return Err(Phase2Error::LinkMissing {
                field: path,
                candidates: candidates.join(" or "),
                reason: why,
            });
        };
        if iface.bridge.is_some() {
            let ctx = BridgeIface {
                index: i,
                path: &path,
                pod_iface: &pod_iface,
                pod_link: &pod_link,
            };
            bridge::bridge(vmi, iface, &ctx, private_dir, &rc, link, &mut out)?;
            continue;
        }
        let Some(pod) = &net.pod else {
            return Err(Phase2Error::Refused {
                field: format!("{path}.masquerade"),
                reason: "masquerade is only allowed on the pod network".into(),
            });
        };
        let (plan, plan6) = masquerade_plans(&net.name, pod)?;
        let (pod_mac, mtu) = (pod_link.mac, pod_link.mtu);
        let mac = match &iface.mac_address {
            Some(m) => {
                api::mac::parse_guest_mac(m, true).map_err(|source| Phase2Error::MacAddress {
                    field: path.clone(),
                    source,
                })?
            }
            None => pod_mac,
        };
        out.hosts.insert(
            iface.name.clone(),
            InterfaceHost {
                tap: tap_name(&pod_iface),
                mac: Some(api::mac::format_mac(&mac)),
                mtu: Some(u32::from(mtu)),
                source_dev: None,
            },
        );
        let cfg = DhcpV4Config {
            client_mac: mac,
            client_ip: plan.vm,
            prefix_len: plan.network.prefix_len(),
            server_ip: plan.gateway,
            router: Some(plan.gateway),
            dns: rc.nameservers.clone(),
            search: rc.search.clone(),
            subdomain: vmi.spec.subdomain.clone().unwrap_or_default(),
            hostname: vmi.hostname(),
            mtu,
            routes: Vec::new(),
            lease_seconds: LEASE_SECONDS,
            extra: extra(iface),
        };
        // As KubeVirt's masquerade DHCP config: each family is served
        // when the pod link has an address of it.
        if pod_link.ipv4 {
            let opts = cfg.build().map_err(|source| Phase2Error::Dhcp {
                field: path.clone(),
                protocol: "DHCP",
                source,
            })?;
            out.dhcp.push((bridge_name(&pod_iface), opts));
        }
        if pod_link.ipv6 {
            let bridge = bridge_name(&pod_iface);
            let server_mac = link(&bridge)
                .map_err(|source| Phase2Error::Link {
                    field: path.clone(),
                    source,
                })?
                .mac;
            let cfg6 = DhcpV6Config {
                client_mac: mac,
                client_ip: plan6.vm,
                server_mac,
                dns: rc.nameservers6.clone(),
                search: rc.search.clone(),
                subdomain: vmi.spec.subdomain.clone().unwrap_or_default(),
            };
            let opts = cfg6.build().map_err(|source| Phase2Error::Dhcp {
                field: path.clone(),
                protocol: "DHCPv6",
                source,
            })?;
            out.dhcp6.push((bridge, opts));
        }
    }
    Ok(out)
}

/// The checks of [`prepare`] that need no host: each masquerade
/// interface's `vmNetworkCIDR` / `vmIPv6NetworkCIDR`, and every
/// interface's `dhcpOptions` and the hostname the DHCP server would send
/// (built into a DHCP configuration and thrown away). `convert` and
/// `run` call it before anything starts, so both refuse the same input.
///
/// # Errors
/// [`Phase2Error::Plan`] or [`Phase2Error::DhcpOptions`], one line naming
/// the field.
pub fn check_spec(vmi: &VirtualMachineInstance) -> Result<(), Phase2Error> {
    for (i, iface) in vmi.live_pod_interfaces() {
        let path = format!("spec.domain.devices.interfaces[{i}]");
        if converter::passt::is_passt(iface) {
            continue;
        }
        let net = vmi.spec.networks.iter().find(|n| n.name == iface.name);
        if let (Some(pod), Some(_)) = (net.and_then(|n| n.pod.as_ref()), &iface.masquerade) {
            masquerade_plans(&iface.name, pod)?;
        }
        DhcpV4Config {
            client_mac: [2, 0, 0, 0, 0, 1],
            client_ip: std::net::Ipv4Addr::new(10, 0, 2, 2),
            prefix_len: 24,
            server_ip: std::net::Ipv4Addr::new(10, 0, 2, 1),
            router: None,
            dns: Vec::new(),
            search: Vec::new(),
            subdomain: vmi.spec.subdomain.clone().unwrap_or_default(),
            hostname: vmi.hostname(),
            mtu: 1500,
            routes: Vec::new(),
            lease_seconds: LEASE_SECONDS,
            extra: extra(iface),
        }
        .build()
        .map_err(|source| Phase2Error::DhcpOptions {
            field: path,
            source,
        })?;
    }
    Ok(())
}

pub(super) fn extra(iface: &api::vmi::Interface) -> ExtraOptions {
    let d = iface.dhcp_options.clone().unwrap_or_default();
    ExtraOptions {
        boot_file_name: d.boot_file_name,
        tftp_server_name: d.tftp_server_name,
        ntp_servers: d.ntp_servers,
        private_options: d
            .private_options
            .into_iter()
            .map(|p| (p.option, p.value))
            .collect(),
    }
}

#[cfg(test)]
mod tests;
