//! A stand-in for virt-handler's network phase 1, for standalone runs and
//! tests (`virt-launcher run VMI.yaml --setup-pod-network`); for the passt
//! binding, which phase 1 does not touch, only the pod's side
//! ([`add_pod_link`]).
//!
//! Run inside a fresh network namespace (the caller unshares it; it plays
//! the pod's), it first plays the CNI: one pod link per network, a veth
//! whose other end (`cni<N>`) sits either in a second namespace of its own
//! playing the node ([`NodeNamespace`], holding the pod subnet's gateway
//! address, so traffic really enters and leaves the pod through its link)
//! or, without one, unaddressed in the same namespace. The primary link
//! `eth0` gets [`POD_IP`] and [`POD_IP6`] (a dual-stack pod) and the
//! default routes via [`POD_GATEWAY`] and [`POD_GATEWAY6`]; the `k`th
//! secondary (Multus) link, named by KubeVirt's scheme (`pod<hash>`, see
//! [`converter::interfaces::pod_iface_name`]), gets `10.245.<k>.5/24` only
//! and no default route ([`PodAddrs::secondary`]).
//!
//! Then it builds what virt-handler builds (kubevirt-facts §6.1,
//! `pkg/network/setup/netpod`) for each interface:
//! - masquerade (the pod network only): the bridge `k6t-eth0` with MAC
//!   02:00:00:00:00:00 and the gateway addresses (`10.0.2.1/24`,
//!   `fd10:0:2::1/120`), the tap `tap0` enslaved to it, forwarding, and
//!   nftables NAT/NAT66 of the VM addresses and DNAT of `ports` (ports are
//!   forwarded from the pod's IPv6 address, not from `::1`: IPv6 has no
//!   `route_localnet`, so a packet from `::1` never leaves the loopback
//!   device);
//! - bridge: the pod link loses its addresses and is renamed `<name>-nic`
//!   with another MAC, enslaved to `k6t-<name>` (which gets KubeVirt's fake
//!   address `169.254.75.1<interface index>/32`) with the tap; a dummy link
//!   takes the pod link's name, MAC and all its addresses (IPv6 included:
//!   the pod keeps them, KubeVirt serves no DHCPv6 for this binding, the
//!   guest's IPv6 is the pod network's business), and ARP replies for
//!   addresses not on the asking link are off (`arp_ignore=1`), so only the
//!   guest answers for the pod's IPv4 address. The DHCP cache phase 1
//!   writes (`vif-cache-<name>.json`) is returned for the caller to write.
//!
//! Everything lives in those namespaces, so it is gone when the last
//! process (or file) holding them goes.
//!
//! iproute2 and nft are driven through their command lines: these are
//! the tools the CI installs, and their error messages name the failing
//! object (one line each), which keeps this helper short.

use std::fs::File;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

use ipnet::{Ipv4Net, Ipv6Net};

use crate::plan::{MasqueradePlan, MasqueradePlanV6};

mod error;
pub use error::Phase1Error;

/// The address the stand-in primary pod link gets.
pub const POD_IP: &str = "10.244.0.5/24";
/// [`POD_IP`] without its prefix.
pub const POD_ADDR: &str = "10.244.0.5";
/// The IPv6 address the stand-in primary pod link gets (a dual-stack pod).
pub const POD_IP6: &str = "fd00:10:244::5/64";
/// [`POD_IP6`] without its prefix.
pub const POD_ADDR6: &str = "fd00:10:244::5";
/// MTU of the stand-in pod links.
pub const POD_MTU: u16 = 1500;
/// MAC of the stand-in primary pod link; with the bridge binding the guest
/// gets it (KubeVirt gives the VM the pod interface's MAC).
pub const POD_MAC: &str = "0a:58:0a:f4:00:05";
/// The pod's IPv4 default gateway: the address of the CNI's end `cni0`
/// (in the [`NodeNamespace`]).
pub const POD_GATEWAY: &str = "10.244.0.1";
/// The pod's IPv6 default gateway, on `cni0` too.
pub const POD_GATEWAY6: &str = "fd00:10:244::1";
/// The address of the bridge in the bridge binding for the first
/// interface: KubeVirt's `169.254.75.1<interface index>` (see
/// [`bridge_fake_ip`]).
pub const BRIDGE_FAKE_IP: &str = "169.254.75.10";

/// KubeVirt's fake bridge address for the interface at `index` in
/// `spec.domain.devices.interfaces` (`169.254.75.1` followed by the index
/// in decimal, `pkg/network/link`: index 1 gives 169.254.75.11, index 12
/// 169.254.75.112); `None` when that is no IPv4 address (index 100 and
/// above).
pub fn bridge_fake_ip(index: usize) -> Option<Ipv4Addr> {
    format!("169.254.75.1{index}").parse().ok()
}

/// The name the pod link of a bridge-bound interface gets once its
/// addresses moved to the dummy: the name without KubeVirt's `pod` prefix,
/// then `-nic` (`eth0-nic`, `<hash>-nic`).
pub fn bridged_nic_name(pod_iface: &str) -> String {
    format!("{}-nic", pod_iface.strip_prefix("pod").unwrap_or(pod_iface))
}

/// The addresses the stand-in CNI gives one pod link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodAddrs {
    /// The pod link's MAC.
    pub mac: [u8; 6],
    /// The pod link's IPv4 address and prefix.
    pub ip4: Ipv4Net,
    /// The CNI end's IPv4 address (the same subnet).
    pub peer4: Ipv4Net,
    /// The default gateway (the primary link only).
    pub gateway4: Option<Ipv4Addr>,
    /// The pod link's IPv6 address (the primary link only).
    pub ip6: Option<Ipv6Net>,
    /// The CNI end's IPv6 address (with [`PodAddrs::ip6`]).
    pub peer6: Option<Ipv6Net>,
}

impl PodAddrs {
    /// The primary pod link's (`eth0`): [`POD_IP`], [`POD_IP6`],
    /// [`POD_MAC`], gateways [`POD_GATEWAY`] and [`POD_GATEWAY6`] (the
    /// pod subnet of node 0, [`PodAddrs::primary_on`]).
    pub fn primary() -> Self {
        Self::primary_on(0)
    }

    /// The primary pod link's on the node whose pod subnets are
    /// `10.244.<node>.0/24` and `fd00:10:244:<node>::/64` (a pod of another
    /// node has another address, as a migration's target pod has): the
    /// pod `.5`/`::5`, the gateway (the CNI's end) `.1`/`::1`, MAC
    /// `0a:58:0a:f4:<node>:05`.
    pub fn primary_on(node: u8) -> Self {
        let n6 = u16::from(node);
        PodAddrs {
            mac: [0x0a, 0x58, 0x0a, 0xf4, node, 5],
            ip4: Ipv4Net::new(Ipv4Addr::new(10, 244, node, 5), 24).unwrap_or_default(),
            peer4: Ipv4Net::new(Ipv4Addr::new(10, 244, node, 1), 24).unwrap_or_default(),
            gateway4: Some(Ipv4Addr::new(10, 244, node, 1)),
            ip6: Some(
                Ipv6Net::new(Ipv6Addr::new(0xfd00, 0x10, 0x244, n6, 0, 0, 0, 5), 64)
                    .unwrap_or_default(),
            ),
            peer6: Some(
                Ipv6Net::new(Ipv6Addr::new(0xfd00, 0x10, 0x244, n6, 0, 0, 0, 1), 64)
                    .unwrap_or_default(),
            ),
        }
    }

    /// The `k`th secondary (Multus) link's, `k` from 1: `10.245.<k>.5/24`
    /// (CNI end `.1`), MAC `0a:58:0a:f5:<k>:05`, IPv4 only, no gateway (a
    /// secondary network carries no default route).
    pub fn secondary(k: u8) -> Self {
        PodAddrs {
            mac: [0x0a, 0x58, 0x0a, 0xf5, k, 5],
            ip4: Ipv4Net::new(Ipv4Addr::new(10, 245, k, 5), 24).unwrap_or_default(),
            peer4: Ipv4Net::new(Ipv4Addr::new(10, 245, k, 1), 24).unwrap_or_default(),
            gateway4: None,
            ip6: None,
            peer6: None,
        }
    }
}

/// A network namespace of its own playing the node (the CNI's side of the
/// pod links), held open by a file, not a process: it lives as long as
/// this value (or a link inside it) is referenced, and dies with the
/// launcher. Tests find it as the `net:[...]` file among the launcher's
/// open files that is not its own namespace.
#[derive(Debug)]
pub struct NodeNamespace {
    ns: File,
}

impl NodeNamespace {
    /// Creates the namespace (a short-lived thread unshares its network
    /// namespace, which is per thread, and opens it), with `lo` up.
    ///
    /// # Errors
    /// The `unshare` or `open` error (without `CAP_SYS_ADMIN`: EPERM).
    pub fn new() -> Result<Self, Phase1Error> {
        // Named, as every thread of the launcher, so that its threads can
        // be told apart (`/proc/<pid>/task/*/comm`).
        let ns = std::thread::Builder::new().name("netns-node".into());
        let ns = ns
            .spawn(|| -> Result<File, Phase1Error> {
                nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).map_err(|source| {
                    Phase1Error::Sys {
                        what: "node network namespace".into(),
                        source,
                    }
                })?;
                File::open("/proc/thread-self/ns/net").map_err(|source| Phase1Error::File {
                    path: "/proc/thread-self/ns/net".into(),
                    source,
                })
            })
            .map_err(|source| Phase1Error::File {
                path: "a thread for the node network namespace".into(),
                source,
            })?
            .join()
            .map_err(|_| Phase1Error::Panicked {
                what: "node network namespace",
            })??;
        let node = NodeNamespace { ns };
        node.run(|| ip(&["link", "set", "lo", "up"]))?;
        Ok(node)
    }

    /// The namespace `ns` (an open `/proc/.../ns/net` or a descriptor of
    /// one) made by another process: a hot-plug's node side.
    pub fn from_file(ns: File) -> Self {
        NodeNamespace { ns }
    }

    /// Runs `f` on a thread that joined the namespace: commands it starts
    /// run there.
    ///
    /// # Errors
    /// `f`'s error, or the `setns` error.
    pub fn run<T: Send>(
        &self,
        f: impl FnOnce() -> Result<T, Phase1Error> + Send,
    ) -> Result<T, Phase1Error> {
        std::thread::scope(|s| {
            s.spawn(|| {
                nix::sched::setns(&self.ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(
                    |source| Phase1Error::Sys {
                        what: "entering the node network namespace".into(),
                        source,
                    },
                )?;
                f()
            })
            .join()
            .map_err(|_| Phase1Error::Panicked {
                what: "node network namespace",
            })?
        })
    }
}

fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Result<(), Phase1Error> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let res = match stdin {
        Some(text) => process::run_with_input(cmd, text.as_bytes(), COMMAND_TIMEOUT, 1 << 20),
        None => process::run(cmd, COMMAND_TIMEOUT, 1 << 20),
    };
    res.map(|_| ())
        .map_err(|e| Phase1Error::from_run(program, args, e))
}

/// How long one `ip` or `nft` call may take.
const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn write_sysctl(path: &str, value: &str) -> Result<(), Phase1Error> {
    std::fs::write(path, value).map_err(|source| Phase1Error::File {
        path: path.to_owned(),
        source,
    })
}

fn ip(args: &[&str]) -> Result<(), Phase1Error> {
    run("ip", args, None)
}

/// `ip link set LINK up` in the current network namespace (`lo` before
/// the pod links are made).
///
/// # Errors
/// The command's message.
pub fn ip_link_up(link: &str) -> Result<(), Phase1Error> {
    ip(&["link", "set", link, "up"])
}

/// Plays the CNI for one pod link in the current network namespace: the
/// veth `name` with `addrs`' MAC, MTU [`POD_MTU`] and addresses (and the
/// default routes when it has a gateway), its other end `peer` in `node`
/// with the peer addresses, or here without addresses when `node` is
/// `None`.
///
/// # Errors
/// The failing command and its message.
pub fn add_pod_link(
    name: &str,
    peer: &str,
    addrs: &PodAddrs,
    node: Option<&NodeNamespace>,
) -> Result<(), Phase1Error> {
    add_pod_link_for(std::process::id(), name, peer, addrs, node)
}

/// [`add_pod_link`] for a pod whose network namespace is that of process
/// `pod_pid` (in this PID namespace), where the calling thread must be
/// too: a hot-plug's pod link, made by a process other than the launcher
/// (`ctl addinterface`).
///
/// # Errors
/// The failing command and its message.
pub fn add_pod_link_for(
    pod_pid: u32,
    name: &str,
    peer: &str,
    addrs: &PodAddrs,
    node: Option<&NodeNamespace>,
) -> Result<(), Phase1Error> {
    let mtu = POD_MTU.to_string();
    let mac = api::mac::format_mac(&addrs.mac);
    match node {
        Some(node) => {
            // Made from the node's side, the pod's end created straight in
            // the pod's namespace (by PID: `ip` shares our PID namespace).
            let pid = pod_pid.to_string();
            let (peer4, peer6) = (addrs.peer4.to_string(), addrs.peer6.map(|a| a.to_string()));
            node.run(|| {
                ip(&[
                    "link", "add", peer, "type", "veth", "peer", "name", name, "netns", &pid,
                ])?;
                ip(&["addr", "add", &peer4, "dev", peer])?;
                if let Some(p6) = &peer6 {
                    ip(&["addr", "add", p6, "dev", peer, "nodad"])?;
                }
                ip(&["link", "set", peer, "mtu", &mtu, "up"])
            })?;
        }
        None => {
            ip(&["link", "add", name, "type", "veth", "peer", "name", peer])?;
            ip(&["link", "set", peer, "mtu", &mtu, "up"])?;
        }
    }
    ip(&["link", "set", name, "address", &mac, "mtu", &mtu, "up"])?;
    ip(&["addr", "add", &addrs.ip4.to_string(), "dev", name])?;
    if let Some(a6) = addrs.ip6 {
        ip(&["addr", "add", &a6.to_string(), "dev", name, "nodad"])?;
    }
    if let Some(gw) = addrs.gateway4 {
        ip(&[
            "route",
            "add",
            "default",
            "via",
            &gw.to_string(),
            "dev",
            name,
        ])?;
        if let Some(p6) = addrs.peer6 {
            let gw6 = p6.addr().to_string();
            ip(&["-6", "route", "add", "default", "via", &gw6, "dev", name])?;
        }
    }
    Ok(())
}

/// Builds the masquerade topology for the primary pod interface `eth0`
/// (made by [`add_pod_link`] with `pod`'s addresses, which the local
/// port forwarding rules name, as KubeVirt's do the pod interface's IPv4
/// address) in the current network namespace;
/// `multi_queue` makes a multi-queue tap (for
/// `networkInterfaceMultiqueue`); `tap_owner` gives the tap to that
/// uid/gid (107 for a non-root launcher, as virt-handler's `create-tap
/// --uid --gid` does; QEMU opens it without `CAP_NET_ADMIN`).
///
/// # Errors
/// The failing command and its message.
pub fn setup_masquerade(
    pod: &PodAddrs,
    plan: &MasqueradePlan,
    plan6: &MasqueradePlanV6,
    ports: &[converter::interfaces::Port],
    multi_queue: bool,
    tap_owner: Option<u32>,
) -> Result<(), Phase1Error> {
    let gw = format!("{}/{}", plan.gateway, plan.network.prefix_len());
    let gw6 = format!("{}/{}", plan6.gateway, plan6.network.prefix_len());
    let mtu = POD_MTU.to_string();
    ip(&["link", "add", "k6t-eth0", "type", "bridge"])?;
    ip(&["link", "set", "k6t-eth0", "address", "02:00:00:00:00:00"])?;
    // No duplicate address detection on the bridge: its link-local
    // address, the DHCPv6 replies' source, is usable at once.
    write_sysctl("/proc/sys/net/ipv6/conf/k6t-eth0/accept_dad", "0")?;
    ip(&["addr", "add", &gw, "dev", "k6t-eth0"])?;
    ip(&["addr", "add", &gw6, "dev", "k6t-eth0", "nodad"])?;
    let owner = tap_owner.map(|id| id.to_string());
    let mut tuntap = vec!["tuntap", "add", "dev", "tap0", "mode", "tap"];
    if multi_queue {
        tuntap.push("multi_queue");
    }
    if let Some(id) = &owner {
        tuntap.extend(["user", id.as_str(), "group", id.as_str()]);
    }
    ip(&tuntap)?;
    ip(&[
        "link", "set", "tap0", "master", "k6t-eth0", "mtu", &mtu, "up",
    ])?;
    ip(&["link", "set", "k6t-eth0", "mtu", &mtu, "up"])?;
    for (path, value) in [
        ("/proc/sys/net/ipv4/ip_forward", "1"),
        ("/proc/sys/net/ipv4/conf/k6t-eth0/route_localnet", "1"),
        ("/proc/sys/net/ipv6/conf/all/forwarding", "1"),
    ] {
        write_sysctl(path, value)?;
    }
    let vm = plan.vm;
    let vm6 = plan6.vm;
    let pod4 = pod.ip4.addr();
    let mut rules = format!(
        "table ip nat {{\n\
         chain prerouting {{ type nat hook prerouting priority dstnat; }}\n\
         chain output {{ type nat hook output priority -100; }}\n\
         chain postrouting {{ type nat hook postrouting priority srcnat;\n\
         ip saddr {vm} oifname != \"k6t-eth0\" masquerade; }}\n}}\n\
         table ip6 nat {{\n\
         chain prerouting {{ type nat hook prerouting priority dstnat; }}\n\
         chain output {{ type nat hook output priority -100; }}\n\
         chain postrouting {{ type nat hook postrouting priority srcnat;\n\
         ip6 saddr {vm6} oifname != \"k6t-eth0\" masquerade; }}\n}}\n"
    );
    for p in ports {
        let proto = if p.udp { "udp" } else { "tcp" };
        let port = p.port;
        rules.push_str(&format!(
            "add rule ip nat prerouting iifname \"eth0\" {proto} dport {port} dnat to {vm}:{port}\n\
             add rule ip nat output ip daddr {{ 127.0.0.1, {pod4} }} {proto} dport {port} dnat to {vm}:{port}\n\
             add rule ip nat postrouting ip daddr {vm} {proto} dport {port} snat to {gw_ip}\n\
             add rule ip6 nat prerouting iifname \"eth0\" {proto} dport {port} dnat to [{vm6}]:{port}\n\
             add rule ip6 nat postrouting ip6 daddr {vm6} {proto} dport {port} snat to {gw6_ip}\n",
            gw_ip = plan.gateway,
            gw6_ip = plan6.gateway
        ));
        if let Some(pod6) = pod.ip6.map(|a| a.addr()) {
            rules.push_str(&format!(
                "add rule ip6 nat output ip6 daddr {pod6} {proto} dport {port} dnat to [{vm6}]:{port}\n"
            ));
        }
    }
    run("nft", &["-f", "-"], Some(&rules))
}

/// Builds the bridge-binding topology for the pod link `pod_iface` (made
/// by [`add_pod_link`] with `addrs`) of the interface at `index` in
/// `spec.domain.devices.interfaces`, as virt-handler's phase 1 does
/// (`netpod` bridgeBindingSpec): the link is renamed
/// [`bridged_nic_name`] with another MAC (the guest takes the pod's) and
/// no IP, the bridge [`converter::interfaces::bridge_name`] with
/// [`bridge_fake_ip`]`(index)/32` enslaves it (MAC learning off) and the
/// tap [`converter::interfaces::tap_name`], a dummy link (an unattached tap
/// where the kernel has no dummy driver) takes the pod link's name, MAC,
/// MTU and addresses, and ARP is answered only for the asking link's own
/// addresses. Returns the DHCP cache phase 1 writes
/// (`vif-cache-<pod_iface>.json`, as `netpod`'s discovery: the pod's IPv4
/// address, MAC, the first route's next hop as gateway, the routes that
/// are not the local subnet's; nothing of IPv6), for the caller to write
/// where phase 2 reads it.
///
/// # Errors
/// The failing command and its message; an index without a fake address.
pub fn setup_bridge(
    pod_iface: &str,
    index: usize,
    addrs: &PodAddrs,
    multi_queue: bool,
    tap_owner: Option<u32>,
) -> Result<crate::cache::DhcpConfigCache, Phase1Error> {
    use crate::cache::{DhcpConfigCache, GoIpNet, GoRoute};
    use base64::Engine;
    let mtu = POD_MTU.to_string();
    let nic = bridged_nic_name(pod_iface);
    let bridge = converter::interfaces::bridge_name(pod_iface);
    let tap = converter::interfaces::tap_name(pod_iface);
    let fake = bridge_fake_ip(index).ok_or(Phase1Error::NoFakeAddress { index })?;
    // The takeover: the link keeps carrying frames, its addresses go to
    // the dummy below.
    ip(&["link", "set", pod_iface, "down"])?;
    ip(&["addr", "flush", "dev", pod_iface])?;
    ip(&["link", "set", pod_iface, "name", &nic])?;
    let nic_mac = [0x02, 0, 0, 0, u8::try_from(index).unwrap_or(0xff), 1];
    ip(&[
        "link",
        "set",
        &nic,
        "address",
        &api::mac::format_mac(&nic_mac),
    ])?;
    write_sysctl(&format!("/proc/sys/net/ipv6/conf/{nic}/disable_ipv6"), "1")?;
    ip(&["link", "add", &bridge, "type", "bridge"])?;
    ip(&["addr", "add", &format!("{fake}/32"), "dev", &bridge])?;
    ip(&["link", "set", &nic, "master", &bridge, "up"])?;
    ip(&[
        "link",
        "set",
        &nic,
        "type",
        "bridge_slave",
        "learning",
        "off",
    ])?;
    let owner = tap_owner.map(|id| id.to_string());
    let mut tuntap = vec!["tuntap", "add", "dev", tap.as_str(), "mode", "tap"];
    if multi_queue {
        tuntap.push("multi_queue");
    }
    if let Some(id) = &owner {
        tuntap.extend(["user", id.as_str(), "group", id.as_str()]);
    }
    ip(&tuntap)?;
    ip(&["link", "set", &tap, "master", &bridge, "mtu", &mtu, "up"])?;
    ip(&["link", "set", &bridge, "mtu", &mtu, "up"])?;
    // KubeVirt's dummy; kernels without the dummy driver get an
    // unattached tap, which carries no traffic either.
    if ip(&["link", "add", pod_iface, "type", "dummy"]).is_err() {
        ip(&["tuntap", "add", "dev", pod_iface, "mode", "tap"])?;
    }
    let mac = api::mac::format_mac(&addrs.mac);
    ip(&["link", "set", pod_iface, "address", &mac, "mtu", &mtu])?;
    ip(&["addr", "add", &addrs.ip4.to_string(), "dev", pod_iface])?;
    if let Some(a6) = addrs.ip6 {
        ip(&["addr", "add", &a6.to_string(), "dev", pod_iface, "nodad"])?;
    }
    ip(&["link", "set", pod_iface, "up"])?;
    // KubeVirt sets it for any bridge binding with IPv4: the pod's address
    // now sits on the dummy, and the bridge must not answer ARP for it.
    write_sysctl("/proc/sys/net/ipv4/conf/all/arp_ignore", "1")?;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mask = b64(&addrs.ip4.netmask().octets());
    // The pod link's IPv4 routes, as the kernel lists them (the default
    // route first); the local subnet's is left out of the cache.
    let routes: Vec<GoRoute> = addrs
        .gateway4
        .iter()
        .map(|gw| GoRoute {
            dst: None,
            gw: Some(gw.to_string()),
            src: Some(String::new()),
        })
        .collect();
    Ok(DhcpConfigCache {
        ip: Some(GoIpNet {
            ip: addrs.ip4.addr().to_string(),
            mask: Some(mask),
        }),
        mac: Some(b64(&addrs.mac)),
        routes: (!routes.is_empty()).then_some(routes),
        ipam_disabled: false,
        gateway: Some(addrs.gateway4.map(|g| g.to_string()).unwrap_or_default()),
        ..DhcpConfigCache::default()
    })
}

/// Undoes [`setup_bridge`] (and the pod link of [`add_pod_link`]) for
/// `pod_iface` in the current network namespace: the dummy, the tap, the
/// bridge and the renamed pod link (a veth: its CNI end goes with it), as
/// the CNI's DEL and the pod's end of a hot-unplugged network leave
/// nothing behind. Links already gone are skipped.
///
/// # Errors
/// The failing command and its message.
pub fn remove_bridge(pod_iface: &str) -> Result<(), Phase1Error> {
    for link in [
        pod_iface.to_owned(),
        converter::interfaces::tap_name(pod_iface),
        converter::interfaces::bridge_name(pod_iface),
        bridged_nic_name(pod_iface),
    ] {
        if link_exists(&link)? {
            ip(&["link", "del", &link])?;
        }
    }
    Ok(())
}

/// What phase 2 needs to know of a pod link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodLink {
    /// Hardware address.
    pub mac: [u8; 6],
    /// MTU.
    pub mtu: u16,
    /// It holds an IPv4 address of global scope (KubeVirt then serves
    /// DHCPv4 to a masquerade guest).
    pub ipv4: bool,
    /// It holds an IPv6 address of global scope (unique local included,
    /// as Go's `IsGlobalUnicast`; KubeVirt then serves DHCPv6).
    pub ipv6: bool,
}

/// Whether a link named `name` exists in the current network namespace
/// (`if_nametoindex`, answered by the kernel for the calling thread's
/// namespace).
///
/// # Errors
/// Any failure other than "no such device".
pub fn link_exists(name: &str) -> Result<bool, Phase1Error> {
    match nix::net::if_::if_nametoindex(name) {
        Ok(_) => Ok(true),
        Err(nix::errno::Errno::ENODEV) => Ok(false),
        Err(source) => Err(Phase1Error::Sys {
            what: format!("looking up link {name}"),
            source,
        }),
    }
}

/// Reads a link's MAC, MTU and address families in the current network
/// namespace (`ip -j addr show`; sysfs would show the namespace it was
/// mounted in).
///
/// # Errors
/// The command's error, or output without a MAC/MTU.
pub fn pod_link(link: &str) -> Result<PodLink, Phase1Error> {
    let mut cmd = Command::new("ip");
    cmd.args(["-j", "addr", "show", "dev", link]);
    let out = process::run(cmd, COMMAND_TIMEOUT, 1 << 20)
        .map_err(|e| Phase1Error::from_run("ip", &["-j", "addr", "show", "dev", link], e))?;
    parse_ip_addr_json(link, &out.stdout)
}

/// Parses `ip -j addr show dev LINK` output (see [`pod_link`]).
///
/// # Errors
/// Output that is not JSON or lacks the MAC or MTU.
pub fn parse_ip_addr_json(link: &str, json: &[u8]) -> Result<PodLink, Phase1Error> {
    let info = |reason: String| Phase1Error::LinkInfo {
        link: link.to_owned(),
        reason,
    };
    let v: serde_json::Value = serde_json::from_slice(json)
        .map_err(|e| info(format!("`ip -j addr show` is no JSON: {e}")))?;
    let l = &v[0];
    let mac = api::mac::parse_mac(l["address"].as_str().unwrap_or_default())
        .map_err(|e| info(e.to_string()))?;
    let mtu = l["mtu"]
        .as_u64()
        .and_then(|m| u16::try_from(m).ok())
        .ok_or_else(|| info("no MTU in `ip -j addr show`".into()))?;
    let global = |family: &str| {
        l["addr_info"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["family"] == family && x["scope"] == "global")
        })
    };
    Ok(PodLink {
        mac,
        mtu,
        ipv4: global("inet"),
        ipv6: global("inet6"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubevirts_bridge_names_and_fake_addresses() {
        let ip = |i| bridge_fake_ip(i).map(|a| a.to_string());
        assert_eq!(ip(0).as_deref(), Some("169.254.75.10"));
        assert_eq!(ip(1).as_deref(), Some("169.254.75.11"));
        assert_eq!(ip(12).as_deref(), Some("169.254.75.112"));
        assert_eq!(ip(99).as_deref(), Some("169.254.75.199"));
        assert_eq!(ip(100), None);
        assert_eq!(bridged_nic_name("eth0"), "eth0-nic");
        assert_eq!(bridged_nic_name("pod16477688c0e"), "16477688c0e-nic");
        assert_eq!(bridged_nic_name("net1"), "net1-nic");
        // Every name fits the kernel's 15 characters.
        assert!(bridged_nic_name("pod16477688c0e").len() <= 15);
        let p = PodAddrs::primary();
        assert_eq!(
            (p.ip4.to_string(), p.gateway4.map(|g| g.to_string())),
            (POD_IP.to_owned(), Some(POD_GATEWAY.to_owned()))
        );
        assert_eq!(p.ip6.map(|a| a.to_string()).as_deref(), Some(POD_IP6));
        assert_eq!(api::mac::format_mac(&p.mac), POD_MAC);
        // Another node's pod: its own subnets, MAC and gateways.
        let p = PodAddrs::primary_on(2);
        assert_eq!(
            (p.ip4.to_string(), p.peer4.to_string()),
            ("10.244.2.5/24".to_owned(), "10.244.2.1/24".to_owned())
        );
        assert_eq!(
            p.gateway4.map(|g| g.to_string()).as_deref(),
            Some("10.244.2.1")
        );
        assert_eq!(
            (p.ip6.map(|a| a.to_string()), p.peer6.map(|a| a.to_string())),
            (
                Some("fd00:10:244:2::5/64".to_owned()),
                Some("fd00:10:244:2::1/64".to_owned())
            )
        );
        assert_eq!(api::mac::format_mac(&p.mac), "0a:58:0a:f4:02:05");
        let s = PodAddrs::secondary(3);
        assert_eq!(s.ip4.to_string(), "10.245.3.5/24");
        assert_eq!(s.peer4.to_string(), "10.245.3.1/24");
        assert_eq!((s.gateway4, s.ip6), (None, None));
    }

    #[test]
    fn ip_addr_json_gives_mac_mtu_and_families() {
        let json = br#"[{"ifindex":2,"ifname":"eth0","mtu":1450,"address":"0a:58:0a:f4:00:05",
            "addr_info":[{"family":"inet","local":"10.244.0.5","prefixlen":24,"scope":"global"},
                         {"family":"inet6","local":"fd00:10:244::5","prefixlen":64,"scope":"global"},
                         {"family":"inet6","local":"fe80::858:aff:fef4:5","prefixlen":64,"scope":"link"}]}]"#;
        let l = parse_ip_addr_json("eth0", json).unwrap();
        assert_eq!(l.mac, [0x0a, 0x58, 0x0a, 0xf4, 0, 5]);
        assert_eq!((l.mtu, l.ipv4, l.ipv6), (1450, true, true));
        // Link-local IPv6 only: no DHCPv6.
        let v4only = br#"[{"mtu":1500,"address":"02:00:00:00:00:01","addr_info":[
            {"family":"inet","scope":"global"},{"family":"inet6","scope":"link"}]}]"#;
        let l = parse_ip_addr_json("eth0", v4only).unwrap();
        assert_eq!((l.ipv4, l.ipv6), (true, false));
        assert!(parse_ip_addr_json("eth0", b"[{}]").is_err());
        assert!(parse_ip_addr_json("eth0", b"nope").is_err());
    }
}
