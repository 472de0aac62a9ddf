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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use api::VirtualMachineInstance;
use converter::interfaces::{bridge_name, tap_name, InterfaceHost};

use crate::dhcpv4::{parse_resolv_conf, DhcpV4Config, ExtraOptions, ServerOptions, LEASE_SECONDS};
use crate::dhcpv6::{DhcpV6Config, ServerV6};
use crate::phase1::PodLink;
use crate::plan::masquerade_plans;

/// Reads a pod link's MAC, MTU and address families by name (see
/// [`crate::phase1::pod_link`]).
pub type LinkReader = dyn Fn(&str) -> Result<PodLink, String>;

/// Whether the pod has a link of this name (see
/// [`crate::phase1::link_exists`]).
pub type LinkExists = dyn Fn(&str) -> Result<bool, String>;

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

/// Prepares phase 2 for every interface of `vmi` that is not `absent` and
/// not SR-IOV (a host device: [`crate::sriov`]).
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
/// A one-line message naming the interface field: a binding other than
/// masquerade, bridge or passt, a bad CIDR, a missing pod link or one that
/// cannot be read, a corrupt cache, or a DHCP value that cannot be encoded.
pub fn prepare(
    vmi: &VirtualMachineInstance,
    private_dir: &std::path::Path,
    resolv_conf: &str,
    link: &LinkReader,
    link_exists: &LinkExists,
) -> Result<Phase2, String> {
    let mut out = Phase2 {
        hosts: BTreeMap::new(),
        dhcp: Vec::new(),
        dhcp6: Vec::new(),
    };
    let rc = parse_resolv_conf(resolv_conf);
    for (i, iface) in vmi.spec.domain.devices.interfaces.iter().enumerate() {
        let path = format!("spec.domain.devices.interfaces[{i}]");
        if iface.is_absent() || converter::sriov::is_sriov(iface) {
            // SR-IOV: a host device, no tap or DHCP (see crate::sriov).
            continue;
        }
        let Some(net) = vmi.spec.networks.iter().find(|n| n.name == iface.name) else {
            return Err(format!(
                "{path}.name: no spec.networks entry named {:?}",
                iface.name
            ));
        };
        let Some(candidates) = pod_iface_candidates(vmi, &net.name) else {
            return Err(format!(
                "spec.networks[name={}]: needs a source: pod or multus",
                net.name
            ));
        };
        if converter::passt::is_passt(iface) {
            let udn = converter::passt::OVN_UDN_LINK;
            let source = if link_exists(udn).map_err(|e| format!("{path}: {e}"))? {
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
            return Err(format!(
                "{path}: the {} binding is not wired by the launcher's phase 2 yet (use masquerade, bridge or binding: {{name: passt}})",
                iface.binding_name().unwrap_or("default")
            ));
        }
        let found = candidates
            .iter()
            .find_map(|name| link(name).ok().map(|l| (name.clone(), l)));
        let Some((pod_iface, pod_link)) = found else {
            // The first candidate's own error says why.
            let why = link(&candidates[0]).err().unwrap_or_default();
            return Err(format!(
                "{path}: pod link {} is missing ({why})",
                candidates.join(" or ")
            ));
        };
        if iface.bridge.is_some() {
            let ctx = BridgeIface {
                index: i,
                path: &path,
                pod_iface: &pod_iface,
                pod_link: &pod_link,
            };
            bridge(vmi, iface, &ctx, private_dir, &rc, link, &mut out)?;
            continue;
        }
        let Some(pod) = &net.pod else {
            return Err(format!(
                "{path}.masquerade: masquerade is only allowed on the pod network"
            ));
        };
        let (plan, plan6) = masquerade_plans(&net.name, pod)?;
        let (pod_mac, mtu) = (pod_link.mac, pod_link.mtu);
        let mac = match &iface.mac_address {
            Some(m) => {
                api::mac::parse_guest_mac(m, true).map_err(|e| format!("{path}.macAddress: {e}"))?
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
            let opts = cfg.build().map_err(|e| format!("{path}: DHCP: {e}"))?;
            out.dhcp.push((bridge_name(&pod_iface), opts));
        }
        if pod_link.ipv6 {
            let bridge = bridge_name(&pod_iface);
            let server_mac = link(&bridge)?.mac;
            let cfg6 = DhcpV6Config {
                client_mac: mac,
                client_ip: plan6.vm,
                server_mac,
                dns: rc.nameservers6.clone(),
                search: rc.search.clone(),
                subdomain: vmi.spec.subdomain.clone().unwrap_or_default(),
            };
            let opts = cfg6.build().map_err(|e| format!("{path}: DHCPv6: {e}"))?;
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
/// A one-line message naming the field.
pub fn check_spec(vmi: &VirtualMachineInstance) -> Result<(), String> {
    for (i, iface) in vmi.spec.domain.devices.interfaces.iter().enumerate() {
        let path = format!("spec.domain.devices.interfaces[{i}]");
        if iface.is_absent()
            || converter::sriov::is_sriov(iface)
            || converter::passt::is_passt(iface)
        {
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
        .map_err(|e| format!("{path}.dhcpOptions: {e}"))?;
    }
    Ok(())
}

fn extra(iface: &api::vmi::Interface) -> ExtraOptions {
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

/// Where a bridge-bound interface is: its index in
/// `spec.domain.devices.interfaces` (for the fake server address), field
/// path, pod link name and what [`LinkReader`] read of it (the dummy that
/// holds the pod's name, MAC and MTU after phase 1).
struct BridgeIface<'a> {
    index: usize,
    path: &'a str,
    pod_iface: &'a str,
    pod_link: &'a PodLink,
}

/// Bridge binding (KubeVirt's `BridgeConfigGenerator` and bridge domain
/// decoration): the guest gets the pod's own address, from phase 1's DHCP
/// cache; the domain interface the spec's MAC or the pod link's (the
/// dummy's) and its MTU. The DHCP server answers from KubeVirt's fake
/// bridge address for the interface's index, with the MTU of the
/// `<pod>-nic` link; none when phase 1 says IPAM is disabled (the pod link
/// had no IPv4 address). No DHCPv6 for this binding: KubeVirt serves none.
fn bridge(
    vmi: &VirtualMachineInstance,
    iface: &api::vmi::Interface,
    at: &BridgeIface<'_>,
    private_dir: &std::path::Path,
    rc: &crate::dhcpv4::ResolvConf,
    link: &LinkReader,
    out: &mut Phase2,
) -> Result<(), String> {
    use crate::cache::{read_dhcp_config, vif_cache_path};
    use crate::dhcpv4::Route;
    let (path, pod_iface) = (at.path, at.pod_iface);
    let cache = read_dhcp_config(private_dir, pod_iface).map_err(|e| format!("{path}: {e}"))?;
    let file = vif_cache_path(private_dir, pod_iface);
    let corrupt = |what: String| format!("{path}: network cache {}: {what}", file.display());
    let cache_mac = cache.mac_bytes().map_err(corrupt)?;
    let spec_mac = iface
        .mac_address
        .as_ref()
        .map(|m| api::mac::parse_guest_mac(m, false).map_err(|e| format!("{path}.macAddress: {e}")))
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
    let v4 = |s: &Option<String>, what: &str| -> Result<Option<std::net::Ipv4Addr>, String> {
        match s.as_deref() {
            None | Some("") => Ok(None),
            Some(t) => t
                .parse()
                .map(Some)
                .map_err(|_| corrupt(format!("{what} {t:?} is not an IPv4 address"))),
        }
    };
    let server = crate::phase1::bridge_fake_ip(at.index).ok_or_else(|| {
        format!(
            "{path}: no fake bridge address for interface index {} (169.254.75.1{} is not an address)",
            at.index, at.index
        )
    })?;
    let nic = crate::phase1::bridged_nic_name(pod_iface);
    let mtu = link(&nic).map_err(|e| format!("{path}: {e}"))?.mtu;
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
    let opts = cfg.build().map_err(|e| format!("{path}: DHCP: {e}"))?;
    out.dhcp.push((bridge_name(pod_iface), opts));
    Ok(())
}

/// Running DHCP servers; [`DhcpServers::stop`] ends them.
#[derive(Debug)]
pub struct DhcpServers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl DhcpServers {
    /// Binds every server (port 67 on its bridge) and starts one thread
    /// each. A server error after start is logged.
    ///
    /// # Errors
    /// The bind error, naming the bridge.
    pub fn start(
        servers: Vec<(String, ServerOptions)>,
        servers6: Vec<(String, ServerV6)>,
    ) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (bridge, opts) in servers6 {
            let sock = crate::server::bind_v6(&bridge, crate::server::SERVER_PORT_V6)
                .map_err(|e| format!("DHCPv6 server on {bridge}: {e}"))?;
            let stop = Arc::clone(&stop);
            let t = std::thread::Builder::new()
                .name(format!("dhcp6-{bridge}"))
                .spawn(move || {
                    tracing::info!(%bridge, "DHCPv6 server started");
                    match crate::server::serve_v6(
                        &sock,
                        &opts,
                        crate::server::CLIENT_PORT_V6,
                        &stop,
                    ) {
                        Ok(stats) => tracing::info!(%bridge, ?stats, "DHCPv6 server stopped"),
                        Err(e) => tracing::error!(%bridge, "DHCPv6 server failed: {e}"),
                    }
                })
                .map_err(|e| format!("DHCPv6 server thread: {e}"))?;
            threads.push(t);
        }
        for (bridge, opts) in servers {
            let sock = crate::server::bind(&bridge, crate::server::SERVER_PORT)
                .map_err(|e| format!("DHCP server on {bridge}: {e}"))?;
            let stop = Arc::clone(&stop);
            let t = std::thread::Builder::new()
                .name(format!("dhcp-{bridge}"))
                .spawn(move || {
                    tracing::info!(%bridge, "DHCPv4 server started");
                    match crate::server::serve(&sock, &opts, crate::server::CLIENT_PORT, &stop) {
                        Ok(stats) => tracing::info!(%bridge, ?stats, "DHCPv4 server stopped"),
                        Err(e) => tracing::error!(%bridge, "DHCPv4 server failed: {e}"),
                    }
                })
                .map_err(|e| format!("DHCP server thread: {e}"))?;
            threads.push(t);
        }
        Ok(DhcpServers { stop, threads })
    }

    /// Stops the servers and waits for them (at most one poll period).
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dhcproto::v4::{DhcpOption, OptionCode};
    use std::path::Path;

    fn vmi(doc: &str) -> VirtualMachineInstance {
        let mut v = api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap();
        api::defaults::fill_missing_uid(&mut v);
        v
    }

    const VMI: &str = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: testvm1.example}
spec:
  subdomain: mysub
  domain:
    devices:
      interfaces:
      - name: default
        masquerade: {}
        dhcpOptions: {ntpServers: [10.0.0.5]}
    resources: {requests: {memory: 64Mi}}
  networks: [{name: default, pod: {vmNetworkCIDR: 10.11.0.0/24}}]
";

    fn link(name: &str) -> Result<PodLink, String> {
        let (mac, mtu) = match name {
            "eth0" => ([0x0a, 0x58, 0, 0, 0, 5], 1450),
            "k6t-eth0" => ([0x02, 0, 0, 0, 0, 0], 1450),
            "eth0-nic" => ([0x02, 0, 0, 0, 0, 1], 1450),
            // The hashed pod link of network "blue" and its `-nic`.
            "pod16477688c0e" => ([0x0a, 0x58, 0, 0, 1, 5], 1400),
            "16477688c0e-nic" => ([0x02, 0, 0, 0, 1, 1], 1400),
            other => return Err(format!("ip addr show {other}: Device does not exist")),
        };
        Ok(PodLink {
            mac,
            mtu,
            ipv4: true,
            ipv6: true,
        })
    }

    fn no_udn(name: &str) -> Result<bool, String> {
        assert_eq!(name, "ovn-udn1");
        Ok(false)
    }

    /// passt: no tap, no DHCP server, no link read; only the link passt
    /// takes its addresses from.
    #[test]
    fn passt_interface_gets_no_tap_and_no_dhcp() {
        let v = vmi(&VMI.replace("masquerade: {}", "binding: {name: passt}"));
        let never = |name: &str| -> Result<PodLink, String> { panic!("read link {name}") };
        let p = prepare(&v, Path::new("/nonexistent"), "", &never, &no_udn).unwrap();
        assert!(p.dhcp.is_empty() && p.dhcp6.is_empty());
        assert_eq!(
            p.hosts["default"],
            InterfaceHost {
                source_dev: Some("eth0".into()),
                ..InterfaceHost::default()
            }
        );
        let udn = |_: &str| -> Result<bool, String> { Ok(true) };
        let p = prepare(&v, Path::new("/nonexistent"), "", &never, &udn).unwrap();
        assert_eq!(p.hosts["default"].source_dev.as_deref(), Some("ovn-udn1"));
        let broken = |_: &str| -> Result<bool, String> { Err("netlink: EPERM".into()) };
        assert_eq!(
            prepare(&v, Path::new("/nonexistent"), "", &never, &broken).unwrap_err(),
            "spec.domain.devices.interfaces[0]: netlink: EPERM"
        );
        // The lookup itself: lo exists everywhere, a 15-character name
        // nobody made does not.
        assert_eq!(crate::phase1::link_exists("lo"), Ok(true));
        assert_eq!(crate::phase1::link_exists("nosuchlink0xyz"), Ok(false));
    }

    #[test]
    fn masquerade_interface_gets_host_facts_and_a_dhcp_plan() {
        let resolv = "nameserver 10.96.0.10\nnameserver fd00:10:96::a\nsearch ns1.svc.cluster.local svc.cluster.local\n";
        let p = prepare(&vmi(VMI), Path::new("/nonexistent"), resolv, &link, &no_udn).unwrap();
        // DHCPv6 too (the pod link has a global IPv6 address): the third
        // address of the default vmIPv6NetworkCIDR, the bridge's MAC as
        // server DUID, the IPv6 nameserver only.
        let (bridge6, v6) = &p.dhcp6[0];
        assert_eq!(bridge6, "k6t-eth0");
        assert_eq!(v6.config.client_ip.to_string(), "fd10:0:2::2");
        assert_eq!(v6.config.client_mac, [0x0a, 0x58, 0, 0, 0, 5]);
        assert_eq!(v6.server_id(), [0, 3, 0, 1, 2, 0, 0, 0, 0, 0]);
        assert_eq!(
            v6.config.dns,
            ["fd00:10:96::a".parse::<std::net::Ipv6Addr>().unwrap()]
        );
        let h = &p.hosts["default"];
        assert_eq!(h.tap, "tap0");
        assert_eq!(h.mac.as_deref(), Some("0a:58:00:00:00:05"));
        assert_eq!(h.mtu, Some(1450));
        let (bridge, opts) = &p.dhcp[0];
        assert_eq!(bridge, "k6t-eth0");
        let c = &opts.config;
        assert_eq!(c.client_ip, std::net::Ipv4Addr::new(10, 11, 0, 2));
        assert_eq!(c.server_ip, std::net::Ipv4Addr::new(10, 11, 0, 1));
        assert_eq!(c.hostname, "testvm1");
        assert_eq!(c.mtu, 1450);
        // A name longer than a label: KubeVirt's hostname, its first part
        // cut to 63, is what the DHCP server sends (and it builds).
        let long = format!("{}{}.example", "h".repeat(63), "x".repeat(87));
        let p2 = prepare(
            &vmi(&VMI.replace("testvm1.example", &long)),
            Path::new("/nonexistent"),
            resolv,
            &link,
            &no_udn,
        )
        .unwrap();
        let long_opts = &p2.dhcp[0].1;
        assert_eq!(long_opts.config.hostname, "h".repeat(63));
        assert_eq!(
            long_opts.options().get(OptionCode::Hostname),
            Some(&DhcpOption::Hostname("h".repeat(63)))
        );
        assert_eq!(c.client_mac, [0x0a, 0x58, 0, 0, 0, 5]);
        assert_eq!(
            opts.options().get(OptionCode::DomainName),
            Some(&DhcpOption::DomainName(
                "mysub.ns1.svc.cluster.local".into()
            ))
        );
    }

    #[test]
    fn other_bindings_and_bad_values_are_refused_by_field() {
        let none = Path::new("/nonexistent");
        let e = prepare(
            &vmi(&VMI.replace("masquerade: {}", "macvtap: {}")),
            none,
            "",
            &link,
            &no_udn,
        )
        .unwrap_err();
        assert!(
            e.contains("interfaces[0]: the macvtap binding is not wired"),
            "{e}"
        );
        // SR-IOV interfaces are host devices: phase 2 leaves them alone.
        let p = prepare(
            &vmi(&VMI.replace("masquerade: {}", "sriov: {}")),
            none,
            "",
            &link,
            &no_udn,
        )
        .unwrap();
        assert!(p.hosts.is_empty() && p.dhcp.is_empty() && p.dhcp6.is_empty());
        let e = prepare(
            &vmi(&VMI.replace("masquerade: {}", "bridge: {}")),
            none,
            "",
            &link,
            &no_udn,
        )
        .unwrap_err();
        assert!(
            e.contains(
                "interfaces[0]: network cache /nonexistent/vif-cache-eth0.json: No such file"
            ),
            "{e}"
        );
        let e = prepare(
            &vmi(&VMI.replace("10.0.0.5", "ntp.example.org")),
            Path::new("/"),
            "",
            &link,
            &no_udn,
        )
        .unwrap_err();
        assert!(
            e.contains("interfaces[0]: DHCP: Could not parse NTP server"),
            "{e}"
        );
        let e = prepare(
            &vmi(&VMI.replace("10.11.0.0/24", "10.11.0.0/31")),
            Path::new("/"),
            "",
            &link,
            &no_udn,
        )
        .unwrap_err();
        assert!(e.contains("at least 4 addresses"), "{e}");
        let fail = |_: &str| -> Result<PodLink, String> { Err("no eth0".into()) };
        assert_eq!(
            prepare(&vmi(VMI), Path::new("/"), "", &fail, &no_udn).unwrap_err(),
            "spec.domain.devices.interfaces[0]: pod link eth0 is missing (no eth0)"
        );
    }

    /// Bridge binding: the pod's address, MAC, MTU, gateway and routes
    /// from what virt-handler wrote (the kernel's subnet route skipped).
    #[test]
    fn bridge_interface_is_served_from_the_vif_cache() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("vif-cache-eth0.json"),
            r#"{"Name":"","IP":{"IP":"10.244.0.5","Mask":"////AA=="},"MAC":"qrvM3e7/",
               "AdvertisingIPAddr":"","Mtu":0,"IPAMDisabled":false,
               "Gateway":"10.244.0.1","Subdomain":"",
               "Routes":[{"Dst":{"IP":"10.244.0.0","Mask":"////AA=="},"Src":"10.244.0.5","Gw":""},
                         {"Dst":null,"Src":"","Gw":"10.244.0.1"},
                         {"Dst":{"IP":"10.96.0.0","Mask":"//8AAA=="},"Src":"","Gw":"10.244.0.1"}]}"#,
        )
        .unwrap();
        let v = vmi(&VMI.replace("masquerade: {}", "bridge: {}"));
        let p = prepare(&v, dir.path(), "nameserver 10.96.0.10\n", &link, &no_udn).unwrap();
        // The domain: the pod link's (the dummy's) MAC and MTU; the DHCP
        // server: the cache's MAC and address, KubeVirt's fake address for
        // index 0 (the cache's AdvertisingIPAddr, empty as phase 1 leaves
        // it, is not read), the MTU of eth0-nic, no DHCPv6.
        let h = &p.hosts["default"];
        assert_eq!(
            (h.tap.as_str(), h.mac.as_deref(), h.mtu),
            ("tap0", Some("0a:58:00:00:00:05"), Some(1450))
        );
        assert!(p.dhcp6.is_empty());
        let c = &p.dhcp[0].1.config;
        assert_eq!(c.mtu, 1450);
        assert_eq!(c.client_ip, std::net::Ipv4Addr::new(10, 244, 0, 5));
        assert_eq!(c.prefix_len, 24);
        assert_eq!(c.server_ip, std::net::Ipv4Addr::new(169, 254, 75, 10));
        assert_eq!(c.router, Some(std::net::Ipv4Addr::new(10, 244, 0, 1)));
        assert_eq!(c.client_mac, [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
        assert_eq!(c.routes.len(), 2, "{:?}", c.routes);
        assert_eq!(
            crate::dhcpv4::classless_routes(&c.routes)[0].0,
            "10.96.0.0/16".parse::<ipnet::Ipv4Net>().unwrap()
        );
        // IPAM disabled: the interface, but no DHCP server.
        let text = std::fs::read_to_string(dir.path().join("vif-cache-eth0.json")).unwrap();
        std::fs::write(
            dir.path().join("vif-cache-eth0.json"),
            text.replace("\"IPAMDisabled\":false", "\"IPAMDisabled\":true"),
        )
        .unwrap();
        let p = prepare(&v, dir.path(), "", &link, &no_udn).unwrap();
        assert!(p.dhcp.is_empty());
        assert!(p.hosts.contains_key("default"));
    }

    /// KubeVirt's names: eth0 for the pod network and a default Multus
    /// network; hashed, then ordinal (counting secondary Multus networks
    /// only) for the others.
    #[test]
    fn pod_iface_names_follow_kubevirts_schemes() {
        let v = vmi("apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: n}
spec:
  domain:
    devices: {}
    resources: {requests: {memory: 64Mi}}
  networks:
  - {name: prim, multus: {networkName: ns/prim, default: true}}
  - {name: red, multus: {networkName: ns/red}}
  - {name: blue, multus: {networkName: ns/blue}}
");
        assert_eq!(pod_iface_candidates(&v, "prim").unwrap(), ["eth0"]);
        assert_eq!(
            pod_iface_candidates(&v, "blue").unwrap(),
            ["pod16477688c0e", "net2"]
        );
        assert_eq!(pod_iface_candidates(&v, "red").unwrap()[1], "net1");
        assert_eq!(pod_iface_candidates(&v, "nope"), None);
    }

    /// A pod masquerade interface and a bridge on a Multus network: each
    /// with its own tap, bridge, cache and DHCP server; the secondary's
    /// server answers from 169.254.75.11 (its index is 1), without a
    /// router when phase 1 found no gateway; the ordinal name `net1` when
    /// the hashed link does not exist.
    #[test]
    fn multus_bridge_interface_gets_its_own_tap_cache_and_dhcp() {
        let two = VMI
            .replace(
                "        dhcpOptions: {ntpServers: [10.0.0.5]}\n",
                "        dhcpOptions: {ntpServers: [10.0.0.5]}\n      - {name: blue, bridge: {}}\n",
            )
            .replace(
                "networks: [{name: default, pod: {vmNetworkCIDR: 10.11.0.0/24}}]",
                "networks: [{name: default, pod: {}}, {name: blue, multus: {networkName: e2e/blue}}]",
            );
        let v = vmi(&two);
        assert_eq!(v.spec.domain.devices.interfaces.len(), 2, "{two}");
        let dir = tempfile::tempdir().unwrap();
        let cache = r#"{"IP":{"IP":"10.245.1.5","Mask":"////AA=="},"MAC":"ClgK9QEF","IPAMDisabled":false,"Gateway":""}"#;
        std::fs::write(dir.path().join("vif-cache-pod16477688c0e.json"), cache).unwrap();
        let p = prepare(&v, dir.path(), "", &link, &no_udn).unwrap();
        assert_eq!(p.hosts["default"].tap, "tap0");
        let h = &p.hosts["blue"];
        assert_eq!(
            (h.tap.as_str(), h.mac.as_deref(), h.mtu),
            ("tap16477688c0e", Some("0a:58:00:00:01:05"), Some(1400))
        );
        assert_eq!(p.dhcp.len(), 2);
        let (bridge, opts) = &p.dhcp[1];
        assert_eq!(bridge, "k6t-16477688c0e");
        let c = &opts.config;
        assert_eq!(c.client_ip, std::net::Ipv4Addr::new(10, 245, 1, 5));
        assert_eq!(c.client_mac, [0x0a, 0x58, 0x0a, 0xf5, 1, 5]);
        assert_eq!(c.server_ip, std::net::Ipv4Addr::new(169, 254, 75, 11));
        assert_eq!((c.router, c.mtu), (None, 1400));
        // Only the pod network's masquerade gets DHCPv6.
        assert_eq!(p.dhcp6.len(), 1);

        // A pod made with the ordinal scheme: net1.
        let ordinal = |name: &str| -> Result<PodLink, String> {
            match name {
                "net1" | "net1-nic" => Ok(PodLink {
                    mac: [0x0a, 0x58, 0, 0, 9, 5],
                    mtu: 1300,
                    ipv4: true,
                    ipv6: false,
                }),
                "pod16477688c0e" => Err("Device does not exist".into()),
                other => link(other),
            }
        };
        std::fs::write(dir.path().join("vif-cache-net1.json"), cache).unwrap();
        let p = prepare(&v, dir.path(), "", &ordinal, &no_udn).unwrap();
        assert_eq!(p.hosts["blue"].tap, "tap1");
        assert_eq!(p.dhcp[1].0, "k6t-net1");
        assert_eq!(p.dhcp[1].1.config.mtu, 1300);

        // Neither link: refused naming both names.
        let none = |name: &str| -> Result<PodLink, String> {
            if name == "pod16477688c0e" || name == "net1" {
                Err(format!("{name}: Device does not exist"))
            } else {
                link(name)
            }
        };
        let e = prepare(&v, dir.path(), "", &none, &no_udn).unwrap_err();
        assert!(
            e.starts_with(
                "spec.domain.devices.interfaces[1]: pod link pod16477688c0e or net1 is missing"
            ),
            "{e}"
        );

        // IPAM disabled (the Multus link had no IPv4 address): the NIC,
        // no DHCP server for it.
        std::fs::write(
            dir.path().join("vif-cache-pod16477688c0e.json"),
            r#"{"IPAMDisabled":true}"#,
        )
        .unwrap();
        let p = prepare(&v, dir.path(), "", &link, &no_udn).unwrap();
        assert!(p.hosts.contains_key("blue"));
        assert_eq!(p.dhcp.len(), 1);
    }
}
