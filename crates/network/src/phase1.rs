//! A stand-in for virt-handler's network phase 1, for standalone runs and
//! tests (`virt-launcher run VMI.yaml --setup-pod-network`).
//!
//! Run inside a fresh network namespace (the caller unshares it), it
//! builds what virt-handler builds in a pod for the masquerade binding
//! (kubevirt-facts §6.1): a pod link `eth0` (holding
//! [`POD_IP`], one end of a veth pair whose other end `cni0` stands for
//! the CNI's side), the bridge `k6t-eth0` with
//! MAC 02:00:00:00:00:00 and the gateway address, the tap `tap0` enslaved
//! to it, forwarding and NAT (nftables: source NAT of the VM address,
//! DNAT of `ports`). Everything lives in that namespace, so it is gone
//! when the last process in it exits.
//!
//! iproute2 and nft are driven through their command lines: these are
//! the tools the CI installs, and their error messages name the failing
//! object (one line each), which keeps this helper short.

use std::process::Command;

use crate::plan::MasqueradePlan;

/// The address the stand-in pod link gets.
pub const POD_IP: &str = "10.244.0.5/24";
/// [`POD_IP`] without its prefix.
pub const POD_ADDR: &str = "10.244.0.5";
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
    ports: &[Port],
    multi_queue: bool,
) -> Result<(), String> {
    let gw = format!("{}/{}", plan.gateway, plan.network.prefix_len());
    let mtu = POD_MTU.to_string();
    ip(&["link", "set", "lo", "up"])?;
    ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "cni0",
    ])?;
    ip(&["link", "set", "cni0", "mtu", &mtu, "up"])?;
    ip(&["link", "set", "eth0", "mtu", &mtu, "up"])?;
    ip(&["addr", "add", POD_IP, "dev", "eth0"])?;
    ip(&["link", "add", "k6t-eth0", "type", "bridge"])?;
    ip(&["link", "set", "k6t-eth0", "address", "02:00:00:00:00:00"])?;
    ip(&["addr", "add", &gw, "dev", "k6t-eth0"])?;
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
    ] {
        std::fs::write(path, value).map_err(|e| format!("{path}: {e}"))?;
    }
    let vm = plan.vm;
    let mut rules = format!(
        "table ip nat {{\n\
         chain prerouting {{ type nat hook prerouting priority dstnat; }}\n\
         chain output {{ type nat hook output priority -100; }}\n\
         chain postrouting {{ type nat hook postrouting priority srcnat;\n\
         ip saddr {vm} oifname != \"k6t-eth0\" masquerade; }}\n}}\n"
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
             add rule ip nat postrouting ip daddr {vm} {proto} dport {port} snat to {gw_ip}\n",
            gw_ip = plan.gateway
        ));
    }
    run("nft", &["-f", "-"], Some(&rules))
}

/// Reads a link's MAC and MTU in the current network namespace
/// (`ip -j link show`; sysfs would show the namespace it was mounted in).
///
/// # Errors
/// The command's error, or output without a MAC/MTU.
pub fn link_mac_mtu(link: &str) -> Result<([u8; 6], u16), String> {
    let mut cmd = Command::new("ip");
    cmd.args(["-j", "link", "show", "dev", link]);
    let out = process::run(cmd, COMMAND_TIMEOUT, 1 << 20).map_err(|e| match e {
        process::RunError::Spawn { source, .. } => format!("ip: {source} (install iproute2)"),
        process::RunError::Failed { stderr, .. } => format!("ip link show {link}: {stderr}"),
        other => other.to_string(),
    })?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("ip -j link show {link}: {e}"))?;
    let l = &v[0];
    let mac = api::mac::parse_mac(l["address"].as_str().unwrap_or_default())
        .map_err(|e| format!("{link}: {e}"))?;
    let mtu = l["mtu"]
        .as_u64()
        .and_then(|m| u16::try_from(m).ok())
        .ok_or_else(|| format!("{link}: no MTU in `ip -j link show`"))?;
    Ok((mac, mtu))
}
