//! A stand-in for virt-handler's network phase 1, for standalone runs and
//! tests (`virt-launcher run VMI.yaml --setup-pod-network`); for the passt
//! binding, which phase 1 does not touch, only the pod's side
//! ([`setup_pod_link`]).
//!
//! Run inside a fresh network namespace (the caller unshares it), it
//! builds what virt-handler builds in a pod for the masquerade binding
//! (kubevirt-facts §6.1): a pod link `eth0` (holding
//! [`POD_IP`], one end of a veth pair whose other end `cni0` stands for
//! the CNI's side), the bridge `k6t-eth0` with
//! MAC 02:00:00:00:00:00 and the gateway address, the tap `tap0` enslaved
//! to it, forwarding and NAT (nftables: source NAT of the VM address,
//! DNAT of `ports`). The same for IPv6 (a dual-stack pod): [`POD_IP6`] on
//! `eth0`, the IPv6 gateway (`fd10:0:2::1/120`) on the bridge, IPv6
//! forwarding and NAT66 in an `ip6 nat` table (ports are forwarded from
//! the pod's IPv6 address, not from `::1`: IPv6 has no `route_localnet`,
//! so a packet from `::1` never leaves the loopback device). Everything lives in that
//! namespace, so it is gone when the last process in it exits.
//!
//! iproute2 and nft are driven through their command lines: these are
//! the tools the CI installs, and their error messages name the failing
//! object (one line each), which keeps this helper short.

use std::process::Command;

use crate::plan::{MasqueradePlan, MasqueradePlanV6};

/// The address the stand-in pod link gets.
pub const POD_IP: &str = "10.244.0.5/24";
/// [`POD_IP`] without its prefix.
pub const POD_ADDR: &str = "10.244.0.5";
/// The IPv6 address the stand-in pod link gets (a dual-stack pod).
pub const POD_IP6: &str = "fd00:10:244::5/64";
/// [`POD_IP6`] without its prefix.
pub const POD_ADDR6: &str = "fd00:10:244::5";
/// MTU of the stand-in pod link.
pub const POD_MTU: u16 = 1500;

/// A port forwarded to the guest (`interfaces[].ports[]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// `tcp` or `udp`.
    pub protocol: String,
    /// Port number.
    pub port: u16,
}

fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Result<(), String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let res = match stdin {
        Some(text) => process::run_with_input(cmd, text.as_bytes(), COMMAND_TIMEOUT, 1 << 20),
        None => process::run(cmd, COMMAND_TIMEOUT, 1 << 20),
    };
    match res {
        Ok(_) => Ok(()),
        Err(process::RunError::Spawn { source, .. }) => Err(format!(
            "{program}: {source} (install iproute2 and nftables)"
        )),
        Err(process::RunError::Failed { stderr, .. }) => Err(format!(
            "{program} {}: {}",
            args.join(" "),
            stderr.split_whitespace().collect::<Vec<_>>().join(" ")
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// How long one `ip` or `nft` call may take.
const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn write_sysctl(path: &str, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("{path}: {e}"))
}

fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args, None)
}

/// Builds the masquerade topology for the primary pod interface in the
/// current network namespace; `multi_queue` makes a multi-queue tap (for
/// `networkInterfaceMultiqueue`).
///
/// # Errors
/// The failing command and its message.
pub fn setup_masquerade(
    plan: &MasqueradePlan,
    plan6: &MasqueradePlanV6,
    ports: &[Port],
    multi_queue: bool,
) -> Result<(), String> {
    let gw = format!("{}/{}", plan.gateway, plan.network.prefix_len());
    let gw6 = format!("{}/{}", plan6.gateway, plan6.network.prefix_len());
    let mtu = POD_MTU.to_string();
    ip(&["link", "set", "lo", "up"])?;
    ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "cni0",
    ])?;
    ip(&["link", "set", "cni0", "mtu", &mtu, "up"])?;
    ip(&["link", "set", "eth0", "mtu", &mtu, "up"])?;
    ip(&["addr", "add", POD_IP, "dev", "eth0"])?;
    ip(&["addr", "add", POD_IP6, "dev", "eth0", "nodad"])?;
    ip(&["link", "add", "k6t-eth0", "type", "bridge"])?;
    ip(&["link", "set", "k6t-eth0", "address", "02:00:00:00:00:00"])?;
    // No duplicate address detection on the bridge: its link-local
    // address, the DHCPv6 replies' source, is usable at once.
    write_sysctl("/proc/sys/net/ipv6/conf/k6t-eth0/accept_dad", "0")?;
    ip(&["addr", "add", &gw, "dev", "k6t-eth0"])?;
    ip(&["addr", "add", &gw6, "dev", "k6t-eth0", "nodad"])?;
    let mut tuntap = vec!["tuntap", "add", "dev", "tap0", "mode", "tap"];
    if multi_queue {
        tuntap.push("multi_queue");
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
        let proto = match p.protocol.as_str() {
            "" | "TCP" | "tcp" => "tcp",
            "UDP" | "udp" => "udp",
            other => {
                return Err(format!(
                    "port {}: protocol {other:?} is not TCP or UDP",
                    p.port
                ))
            }
        };
        let port = p.port;
        rules.push_str(&format!(
            "add rule ip nat prerouting iifname \"eth0\" {proto} dport {port} dnat to {vm}:{port}\n\
             add rule ip nat output ip daddr {{ 127.0.0.1, {POD_ADDR} }} {proto} dport {port} dnat to {vm}:{port}\n\
             add rule ip nat postrouting ip daddr {vm} {proto} dport {port} snat to {gw_ip}\n\
             add rule ip6 nat prerouting iifname \"eth0\" {proto} dport {port} dnat to [{vm6}]:{port}\n\
             add rule ip6 nat output ip6 daddr {POD_ADDR6} {proto} dport {port} dnat to [{vm6}]:{port}\n\
             add rule ip6 nat postrouting ip6 daddr {vm6} {proto} dport {port} snat to {gw6_ip}\n",
            gw_ip = plan.gateway,
            gw6_ip = plan6.gateway
        ));
    }
    run("nft", &["-f", "-"], Some(&rules))
}

/// MAC of the stand-in pod link; with the bridge binding the guest gets
/// it (KubeVirt gives the VM the pod interface's MAC).
pub const POD_MAC: &str = "0a:58:0a:f4:00:05";
/// The pod's default gateway in the bridge-binding stand-in (the address
/// of the CNI's end, `cni0`).
pub const POD_GATEWAY: &str = "10.244.0.1";
/// The address of the bridge in the bridge binding: KubeVirt's
/// `169.254.75.1<interface index>` for the first interface.
pub const BRIDGE_FAKE_IP: &str = "169.254.75.10";

/// Builds the bridge-binding topology for the primary pod interface in
/// the current network namespace, as virt-handler's phase 1 does
/// (kubevirt-facts §6.1): the pod link `eth0` (made here as a veth whose
/// other end `cni0` holds [`POD_GATEWAY`]) loses its address and is
/// renamed `eth0-nic` with another MAC (the guest takes the pod's), the
/// bridge `k6t-eth0` with [`BRIDGE_FAKE_IP`]/32 enslaves it and the tap
/// `tap0`, and a dummy link (an unattached tap where the kernel has no
/// dummy driver) takes the pod's name, MAC and address. Returns
/// the DHCP cache phase 1 writes (`vif-cache-eth0.json`): the pod's
/// address, MAC, MTU, gateway and routes, for the caller to write where
/// phase 2 reads it.
///
/// # Errors
/// The failing command and its message.
pub fn setup_bridge(
    subdomain: &str,
    multi_queue: bool,
) -> Result<crate::cache::DhcpConfigCache, String> {
    use crate::cache::{DhcpConfigCache, GoIpNet, GoRoute};
    use base64::Engine;
    let mtu = POD_MTU.to_string();
    ip(&["link", "set", "lo", "up"])?;
    ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "cni0",
    ])?;
    ip(&["link", "set", "eth0", "address", POD_MAC, "mtu", &mtu])?;
    ip(&["addr", "add", "10.244.0.1/24", "dev", "cni0"])?;
    ip(&["link", "set", "cni0", "mtu", &mtu, "up"])?;
    // What phase 1 found on the pod link, then its takeover.
    ip(&["link", "set", "eth0", "name", "eth0-nic"])?;
    ip(&["link", "set", "eth0-nic", "address", "02:00:00:00:00:01"])?;
    ip(&["link", "add", "k6t-eth0", "type", "bridge"])?;
    ip(&[
        "addr",
        "add",
        &format!("{BRIDGE_FAKE_IP}/32"),
        "dev",
        "k6t-eth0",
    ])?;
    ip(&["link", "set", "eth0-nic", "master", "k6t-eth0", "up"])?;
    let mut tuntap = vec!["tuntap", "add", "dev", "tap0", "mode", "tap"];
    if multi_queue {
        tuntap.push("multi_queue");
    }
    ip(&tuntap)?;
    ip(&[
        "link", "set", "tap0", "master", "k6t-eth0", "mtu", &mtu, "up",
    ])?;
    ip(&["link", "set", "k6t-eth0", "mtu", &mtu, "up"])?;
    // KubeVirt's dummy; kernels without the dummy driver get an
    // unattached tap, which carries no traffic either.
    if ip(&["link", "add", "eth0", "type", "dummy"]).is_err() {
        ip(&["tuntap", "add", "dev", "eth0", "mode", "tap"])?;
    }
    ip(&["link", "set", "eth0", "address", POD_MAC, "mtu", &mtu])?;
    ip(&["addr", "add", POD_IP, "dev", "eth0"])?;
    ip(&["link", "set", "eth0", "up"])?;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mac = api::mac::parse_mac(POD_MAC).map_err(|e| format!("{POD_MAC}: {e}"))?;
    let mask = b64(&[255, 255, 255, 0]);
    Ok(DhcpConfigCache {
        name: "eth0".into(),
        ip: Some(GoIpNet {
            ip: POD_ADDR.into(),
            mask: Some(mask.clone()),
        }),
        mac: Some(b64(&mac)),
        advertising_ip_addr: Some(BRIDGE_FAKE_IP.into()),
        routes: Some(vec![
            GoRoute {
                dst: Some(GoIpNet {
                    ip: "10.244.0.0".into(),
                    mask: Some(mask),
                }),
                gw: Some(String::new()),
                src: Some(POD_ADDR.into()),
            },
            GoRoute {
                dst: None,
                gw: Some(POD_GATEWAY.into()),
                src: Some(String::new()),
            },
        ]),
        mtu: POD_MTU,
        ipam_disabled: false,
        gateway: Some(POD_GATEWAY.into()),
        subdomain: subdomain.into(),
        ..DhcpConfigCache::default()
    })
}

/// The pod's IPv6 default gateway in the passt stand-in.
pub const POD_GATEWAY6: &str = "fd00:10:244::1";

/// Builds the pod side only, for the passt binding (which needs no
/// bridge, tap or NAT: libvirt starts passt in this namespace and passt
/// gives the guest the pod's own addresses): the dual-stack pod link
/// `eth0` with [`POD_MAC`], [`POD_IP`] and [`POD_IP6`] (one end of a veth
/// whose other end `cni0` stands for the CNI's side and has no address),
/// and default routes through [`POD_GATEWAY`] and [`POD_GATEWAY6`] on
/// `eth0`, from which passt takes the gateway it announces. Nothing
/// answers at the gateways: the stand-in pod has no way out.
///
/// # Errors
/// The failing command and its message.
pub fn setup_pod_link() -> Result<(), String> {
    let mtu = POD_MTU.to_string();
    ip(&["link", "set", "lo", "up"])?;
    ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "cni0",
    ])?;
    ip(&["link", "set", "cni0", "mtu", &mtu, "up"])?;
    ip(&["link", "set", "eth0", "address", POD_MAC, "mtu", &mtu, "up"])?;
    ip(&["addr", "add", POD_IP, "dev", "eth0"])?;
    ip(&["addr", "add", POD_IP6, "dev", "eth0", "nodad"])?;
    ip(&["route", "add", "default", "via", POD_GATEWAY, "dev", "eth0"])?;
    ip(&[
        "-6",
        "route",
        "add",
        "default",
        "via",
        POD_GATEWAY6,
        "dev",
        "eth0",
    ])
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
pub fn link_exists(name: &str) -> Result<bool, String> {
    match nix::net::if_::if_nametoindex(name) {
        Ok(_) => Ok(true),
        Err(nix::errno::Errno::ENODEV) => Ok(false),
        Err(e) => Err(format!("looking up link {name}: {e}")),
    }
}

/// Reads a link's MAC, MTU and address families in the current network
/// namespace (`ip -j addr show`; sysfs would show the namespace it was
/// mounted in).
///
/// # Errors
/// The command's error, or output without a MAC/MTU.
pub fn pod_link(link: &str) -> Result<PodLink, String> {
    let mut cmd = Command::new("ip");
    cmd.args(["-j", "addr", "show", "dev", link]);
    let out = process::run(cmd, COMMAND_TIMEOUT, 1 << 20).map_err(|e| match e {
        process::RunError::Spawn { source, .. } => format!("ip: {source} (install iproute2)"),
        process::RunError::Failed { stderr, .. } => format!("ip addr show {link}: {stderr}"),
        other => other.to_string(),
    })?;
    parse_ip_addr_json(link, &out.stdout)
}

/// Parses `ip -j addr show dev LINK` output (see [`pod_link`]).
///
/// # Errors
/// Output that is not JSON or lacks the MAC or MTU.
pub fn parse_ip_addr_json(link: &str, json: &[u8]) -> Result<PodLink, String> {
    let v: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("ip -j addr show {link}: {e}"))?;
    let l = &v[0];
    let mac = api::mac::parse_mac(l["address"].as_str().unwrap_or_default())
        .map_err(|e| format!("{link}: {e}"))?;
    let mtu = l["mtu"]
        .as_u64()
        .and_then(|m| u16::try_from(m).ok())
        .ok_or_else(|| format!("{link}: no MTU in `ip -j addr show`"))?;
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
