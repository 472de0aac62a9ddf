//! The bridge binding's phase 2: the guest gets the pod's address from
//! phase 1's DHCP cache.

use converter::interfaces::{bridge_name, tap_name, InterfaceHost};

use super::{extra, LinkReader, Phase2, Phase2Error};
use crate::dhcpv4::{DhcpV4Config, LEASE_SECONDS};
use crate::phase1::PodLink;
use api::VirtualMachineInstance;

/// Where a bridge-bound interface is: its index in
/// `spec.domain.devices.interfaces` (for the fake server address), field
/// path, pod link name and what [`LinkReader`] read of it (the dummy that
/// holds the pod's name, MAC and MTU after phase 1).
pub(super) struct BridgeIface<'a> {
    pub(super) index: usize,
    pub(super) path: &'a str,
    pub(super) pod_iface: &'a str,
    pub(super) pod_link: &'a PodLink,
}

/// Bridge binding (KubeVirt's `BridgeConfigGenerator` and bridge domain
/// decoration): the guest gets the pod's own address, from phase 1's DHCP
/// cache; the domain interface the spec's MAC or the pod link's (the
/// dummy's) and its MTU. The DHCP server answers from KubeVirt's fake
/// bridge address for the interface's index, with the MTU of the
/// `<pod>-nic` link; none when phase 1 says IPAM is disabled (the pod link
/// had no IPv4 address). No DHCPv6 for this binding: KubeVirt serves none.
pub(super) fn bridge(
    vmi: &VirtualMachineInstance,
    iface: &api::vmi::Interface,
    at: &BridgeIface<'_>,
    private_dir: &std::path::Path,
    rc: &crate::dhcpv4::ResolvConf,
    link: &LinkReader,
    out: &mut Phase2,
) -> Result<(), Phase2Error> {
    use crate::cache::{read_dhcp_config, vif_cache_path};
    use crate::dhcpv4::Route;
    let (path, pod_iface) = (at.path, at.pod_iface);
    let cache = read_dhcp_config(private_dir, pod_iface).map_err(|source| Phase2Error::Cache {
        field: path.to_owned(),
        source,
    })?;
    let file = vif_cache_path(private_dir, pod_iface);
    let corrupt = |reason: String| Phase2Error::CacheField {
        field: path.to_owned(),
        file: file.display().to_string(),
        reason,
    };
    let cache_mac = cache.mac_bytes().map_err(corrupt)?;
    let spec_mac = iface
        .mac_address
        .as_ref()
        .map(|m| {
            api::mac::parse_guest_mac(m, false).map_err(|source| Phase2Error::MacAddress {
                field: path.to_owned(),
                source,
            })
        })
        .transpose()?;
    out.hosts.insert(
        iface.name.clone(),
        InterfaceHost {
            tap: tap_name(pod_iface),
            mac: Some(api::mac::format_mac(&spec_mac.unwrap_or(at.pod_link.mac))),
            mtu: Some(u32::from(at.pod_link.mtu)),
            source_dev: None,
        },
    );
    if cache.ipam_disabled {
        return Ok(());
    }
    let (Some((ip, prefix)), Some(mac)) = (cache.ipv4().map_err(corrupt)?, spec_mac.or(cache_mac))
    else {
        return Ok(());
    };
    let v4 = |s: &Option<String>, what: &str| -> Result<Option<std::net::Ipv4Addr>, Phase2Error> {
        match s.as_deref() {
            None | Some("") => Ok(None),
            Some(t) => t
                .parse()
                .map(Some)
                .map_err(|_| corrupt(format!("{what} {t:?} is not an IPv4 address"))),
        }
    };
    let server =
        crate::phase1::bridge_fake_ip(at.index).ok_or_else(|| Phase2Error::NoFakeAddress {
            field: path.to_owned(),
            index: at.index,
        })?;
    let nic = crate::phase1::bridged_nic_name(pod_iface);
    let mtu = link(&nic)
        .map_err(|source| Phase2Error::Link {
            field: path.to_owned(),
            source,
        })?
        .mtu;
    let mut routes = Vec::new();
    for r in cache.routes.clone().unwrap_or_default() {
        // The kernel's route to the pod's own subnet (it has a source
        // address) is the guest's on-link subnet, not a route to send.
        if r.src.as_deref().is_some_and(|s| !s.is_empty()) {
            continue;
        }
        let dst = match &r.dst {
            None => None,
            Some(d) => match (
                d.addr().map_err(&corrupt)?,
                d.prefix_len().map_err(&corrupt)?,
            ) {
                (Some(std::net::IpAddr::V4(a)), Some(p)) => {
                    Some(ipnet::Ipv4Net::new(a, p).map_err(|e| corrupt(e.to_string()))?)
                }
                _ => continue,
            },
        };
        routes.push(Route {
            dst,
            gw: v4(&r.gw, "Routes[].Gw")?,
        });
    }
    let cfg = DhcpV4Config {
        client_mac: mac,
        client_ip: ip,
        prefix_len: prefix,
        server_ip: server,
        router: v4(&cache.gateway, "Gateway")?,
        dns: rc.nameservers.clone(),
        search: rc.search.clone(),
        subdomain: vmi.spec.subdomain.clone().unwrap_or_default(),
        hostname: vmi.hostname(),
        mtu,
        routes,
        lease_seconds: LEASE_SECONDS,
        extra: extra(iface),
    };
    let opts = cfg.build().map_err(|source| Phase2Error::Dhcp {
        field: path.to_owned(),
        protocol: "DHCP",
        source,
    })?;
    out.dhcp.push((bridge_name(pod_iface), opts));
    Ok(())
}
