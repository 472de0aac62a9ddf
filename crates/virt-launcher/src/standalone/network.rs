//! The standalone stand-in for the pod's network: virt-handler's network
//! phase 1 (pod links, masquerade bridge, tap and NAT, the bridge
//! binding's dummy and DHCP cache; for passt only the pod link) built with
//! `ip` and `nft` in a network namespace of the launcher's own
//! (`--setup-pod-network`, KubeVirt's default interface), or in the current
//! one for `virt-launcher pod-network-phase1`. Phase 2 then runs as in a
//! pod ([`crate::podnet`]).

use std::path::Path;

use api::VirtualMachineInstance;

use crate::error::LauncherError;

/// Reads the `--network-info` FILE of `run` and `convert`: the one check of
/// the flag, made whether or not the VMI has an SR-IOV interface (a file
/// that is missing or malformed is refused either way, before anything
/// starts). [`network::sriov::read_network_info`] bounds and parses it.
///
/// # Errors
/// Input error naming `--network-info` and the file.
pub fn read_network_info(file: &Path) -> Result<network::sriov::NetworkInfoPci, LauncherError> {
    network::sriov::read_network_info(file, false, std::time::Duration::ZERO)
        .map(Option::unwrap_or_default)
        .map_err(|e| LauncherError::input(format!("--network-info {e}")))
}

/// The namespace playing the node (the CNI's ends of the pod links) in a
/// `--setup-pod-network` run: held open until the launcher exits.
static NODE_NAMESPACE: std::sync::OnceLock<network::phase1::NodeNamespace> =
    std::sync::OnceLock::new();

/// `--setup-pod-network`: a new network namespace for this process (and
/// so for libvirt and QEMU) playing the pod's, a second one playing the
/// node's side of its links, and phase 1's topology for every interface
/// (for passt only the pod link, in which libvirt starts passt). Phase 2
/// then runs as in a pod, when the VMI is synced ([`crate::podnet`]).
/// Returns phase 1's DHCP caches of bridge bindings by pod interface name,
/// which virt-handler writes into the private directory: the start-up
/// sequence writes them there once it is mounted. Called while the
/// launcher is single-threaded. `tap_owner`: the uid/gid the taps are
/// made for (107 for `--run-as-nonroot`).
///
/// # Errors
/// a runtime failure ([`LauncherError`], exit 1) when the namespaces or links cannot be made;
/// refused input ([`LauncherError`], exit 2) for an interface phase 1 cannot build.
pub fn setup_pod_network(
    vmi: &VirtualMachineInstance,
    tap_owner: Option<u32>,
    node: u8,
) -> Result<Vec<(String, network::cache::DhcpConfigCache)>, LauncherError> {
    let rt = |m: String| LauncherError::runtime_at("--setup-pod-network", m.to_string());
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| rt(format!("new network namespace: {e}")))?;
    let node_index = node;
    let node = network::phase1::NodeNamespace::new().map_err(|e| rt(e.to_string()))?;
    let node = NODE_NAMESPACE.get_or_init(|| node);
    network_phase1(
        vmi,
        "--setup-pod-network",
        Some((node, node_index)),
        true,
        tap_owner,
        None,
    )
}

/// Why the current network namespace is not one phase 1 may build in:
/// the host's (PID 1's, where that can be read), or one that already has
/// links besides `lo` (a fresh `unshare -n` namespace has only `lo`).
fn foreign_network_namespace() -> Option<String> {
    if let Some(why) = host_network_namespace() {
        return Some(why);
    }
    // getifaddrs asks the kernel over netlink, so it sees this namespace
    // (sysfs may show another); every link has an AF_PACKET entry.
    let mut links: Vec<String> = match nix::ifaddrs::getifaddrs() {
        Ok(addrs) => addrs
            .map(|a| a.interface_name)
            .filter(|n| n != "lo")
            .collect(),
        Err(e) => return Some(format!("cannot list links: {e}")),
    };
    links.sort();
    links.dedup();
    (!links.is_empty()).then(|| {
        format!(
            "the network namespace already has links ({}), expected only lo",
            links.join(", ")
        )
    })
}

/// Says so when the current network namespace is the host's (PID 1's).
/// When that cannot be told (PID 1's namespace file unreadable, as in some
/// sandboxes), a warning says so, once, and the check of the links alone
/// applies: the stand-in is not refused for it (KubeVirt has no such
/// check: virt-handler enters the pod's namespace through the launcher's
/// PID and never builds in its own).
fn host_network_namespace() -> Option<String> {
    match same_namespace(Path::new("/proc/self/ns/net"), Path::new("/proc/1/ns/net")) {
        Ok(true) => Some("this is the host's network namespace".into()),
        Ok(false) => None,
        Err(why) => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "cannot tell whether this is the host's network namespace ({why}); only its links are checked"
                );
            });
            None
        }
    }
}

/// Whether the namespace files `ours` and `init`'s are one namespace.
///
/// # Errors
/// Why one of them cannot be read, the file named.
fn same_namespace(ours: &Path, init: &Path) -> Result<bool, String> {
    let meta = |p: &Path| std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()));
    Ok(crate::isolation::same_file(&meta(ours)?, &meta(init)?))
}

/// `virt-launcher pod-network-phase1 VMI [--cache-dir DIR]`:
/// virt-handler's network phase 1 for the VMI's interfaces, in the current
/// network namespace, which must be a fresh one with only `lo` (it creates
/// the pod links, bridges, taps and NAT rules: never in the host's). The
/// CNI's ends of the pod links stay in that namespace, unaddressed (this
/// process exits, so no node namespace would outlive it). For tests and
/// for pods without virt-handler. The bridge binding needs `cache_dir`,
/// where its DHCP caches (`vif-cache-<podIface>.json`) are written;
/// `tap_owner` is virt-handler's owner of the taps (107 for a non-root
/// launcher, `--tap-owner`).
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) for a VMI phase 1 cannot build, or when run in
/// the host's network namespace; a runtime failure ([`LauncherError`], exit 1) when a command
/// fails or a cache cannot be written.
pub fn pod_network_phase1(
    vmi: &VirtualMachineInstance,
    cache_dir: Option<&Path>,
    tap_owner: Option<u32>,
) -> Result<(), LauncherError> {
    if let Some(why) = foreign_network_namespace() {
        return Err(LauncherError::input(format!(
            "pod-network-phase1: {why}; run it in a new network namespace of its own (e.g. unshare -n)"
        )));
    }
    let caches = network_phase1(
        vmi,
        "pod-network-phase1",
        None,
        cache_dir.is_some(),
        tap_owner,
        None,
    )?;
    if let Some(dir) = cache_dir {
        // The names are KubeVirt's pod interface names (eth0, pod<hex>).
        for (pod_iface, cache) in &caches {
            network::cache::write_json(&network::cache::vif_cache_path(dir, pod_iface), cache)
                .map_err(|e| LauncherError::runtime(format!("pod-network-phase1: {e}")))?;
        }
    }
    Ok(())
}

/// `virt-launcher pod-network-phase1 VMI --interface NAME --cache-dir DIR`:
/// virt-handler's phase 1 for one network of a running VMI
/// (`FilterNetsForLiveUpdate`, KubeVirt v1.6.6 `pkg/network/setup`), in
/// the current network namespace, the pod's, whose other interfaces phase
/// 1 built before (one of their bridges, `k6t-...`, must be there: that
/// and the host check keep it out of any other namespace). For an interface in use: Multus's pod link
/// (`pod<hash>`, the secondary addresses of its place among the VMI's
/// secondary networks, the CNI's end left in the pod unaddressed) and the
/// bridge binding's bridge, tap and dummy, its DHCP cache written to
/// `cache_dir`; for one whose `state` is `absent` (netpod's unplug):
/// those links removed (the pod link too, as the CNI's DEL that follows in
/// a cluster) and the cache deleted (never through a link).
///
/// # Errors
/// refused input ([`LauncherError`], exit 2): a namespace not the pod's, no
/// `--cache-dir`, an interface the VMI lacks, a binding other than bridge
/// on a Multus network, a pod link that already exists; a runtime failure
/// (exit 1) when a command fails or the cache cannot be written or
/// removed.
pub fn pod_network_phase1_live(
    vmi: &VirtualMachineInstance,
    name: &str,
    cache_dir: Option<&Path>,
    tap_owner: Option<u32>,
) -> Result<(), LauncherError> {
    let Some(dir) = cache_dir else {
        return Err(LauncherError::input_at(
            "--cache-dir",
            "--interface needs the directory of the bridge binding's DHCP caches",
        ));
    };
    let devices = &vmi.spec.domain.devices.interfaces;
    let Some(at) = devices.iter().position(|i| i.name == name) else {
        return Err(LauncherError::input_at(
            "--interface",
            format!("the VMI has no interface {name:?} in spec.domain.devices.interfaces"),
        ));
    };
    let field = format!("spec.domain.devices.interfaces[{at}]");
    let multus = vmi
        .spec
        .networks
        .iter()
        .find(|n| n.name == name)
        .and_then(|n| n.multus.as_ref())
        .is_some_and(|m| !m.default);
    if !multus || devices[at].bridge.is_none() {
        return Err(LauncherError::input_at(
            field,
            "pod-network-phase1 --interface builds the bridge binding on a secondary (Multus) network only, the one KubeVirt hot-plugs into a pod",
        ));
    }
    let pod_iface = network::phase2::pod_iface_candidates(vmi, name)
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| LauncherError::input_at(field.clone(), "no spec.networks entry"))?;
    // The pod's namespace: not the host's (where PID 1's can be read), and
    // holding phase 1's bridge (`k6t-...`, a name only KubeVirt makes) of
    // another interface of this VMI.
    let why = host_network_namespace().or_else(|| {
        let built = vmi.live_pod_interfaces().any(|(_, i)| {
            i.name != name
                && network::phase2::pod_iface_candidates(vmi, &i.name)
                    .and_then(|c| c.into_iter().next())
                    .is_some_and(|p| {
                        network::phase1::link_exists(&converter::interfaces::bridge_name(&p))
                            .unwrap_or(false)
                    })
        });
        (!built).then(|| {
            "no other interface of the VMI has its phase 1 bridge (k6t-...) here".to_owned()
        })
    });
    if let Some(why) = why {
        return Err(LauncherError::input(format!(
            "pod-network-phase1 --interface: {why}; run it in the pod's network namespace (e.g. nsenter -n -t <launcher pid>)"
        )));
    }
    let cache = network::cache::vif_cache_path(dir, &pod_iface);
    let rt = |m: String| LauncherError::runtime(format!("pod-network-phase1: {m}"));
    if devices[at].is_absent() {
        network::phase1::remove_bridge(&pod_iface).map_err(|e| rt(e.to_string()))?;
        return match std::fs::remove_file(&cache) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(rt(format!("{}: {e}", cache.display()))),
        };
    }
    if network::phase1::link_exists(&pod_iface).map_err(|e| rt(e.to_string()))? {
        return Err(LauncherError::input_at(
            field,
            format!("the pod already has a link {pod_iface}"),
        ));
    }
    let built = network_phase1(vmi, "pod-network-phase1", None, true, tap_owner, Some(name))
        .and_then(|caches| {
            for (pod_iface, c) in &caches {
                network::cache::write_json(&network::cache::vif_cache_path(dir, pod_iface), c)
                    .map_err(|e| rt(e.to_string()))?;
            }
            Ok(())
        });
    if built.is_err() {
        // Nothing half-built stays in the pod.
        let _ = network::phase1::remove_bridge(&pod_iface);
    }
    built
}

/// The phase-1 stand-in in the current network namespace, for every
/// interface that is not absent: the pod link (`eth0` for the pod network,
/// KubeVirt's hashed `pod<hash>` name for a Multus one; the CNI's end in
/// `node`'s namespace, or here when `None`; the primary link's addresses
/// from `node`'s index, [`network::phase1::PodAddrs::primary_on`], node 0's
/// without one), then masquerade (the pod network only),
/// nothing more for passt (libvirt starts passt on the pod link) or,
/// when `bridges` (the caller has somewhere to write the caches), the
/// bridge binding, whose DHCP caches are returned by pod interface name,
/// to be written where phase 2 reads them. `what` prefixes the messages;
/// `tap_owner`: the uid/gid the taps are made for (a non-root launcher's);
/// `only`: build that interface alone (the others keep their addresses'
/// places: a secondary network's addresses follow its place among all).
fn network_phase1(
    vmi: &VirtualMachineInstance,
    what: &str,
    node: Option<(&network::phase1::NodeNamespace, u8)>,
    bridges: bool,
    tap_owner: Option<u32>,
    only: Option<&str>,
) -> Result<Vec<(String, network::cache::DhcpConfigCache)>, LauncherError> {
    use network::phase1::PodAddrs;
    let rt = |m: String| LauncherError::runtime(format!("{what}: {m}"));
    let mq = vmi.spec.domain.devices.network_interface_multiqueue == Some(true);
    let mut caches = Vec::new();
    let mut secondaries: u8 = 0;
    let mut links_up = false;
    // SR-IOV interfaces are host devices: nothing to build in the pod.
    for (index, iface) in vmi.live_pod_interfaces() {
        let field = format!("spec.domain.devices.interfaces[name={}]", iface.name);
        let net = vmi.spec.networks.iter().find(|n| n.name == iface.name);
        let Some(pod_iface) = network::phase2::pod_iface_candidates(vmi, &iface.name)
            .and_then(|c| c.into_iter().next())
        else {
            return Err(LauncherError::input_at(
                field.to_string(),
                "no spec.networks entry with a pod or multus source",
            ));
        };
        let bridge = iface.bridge.is_some() && bridges;
        let passt = converter::passt::is_passt(iface);
        if !bridge && !passt && iface.masquerade.is_none() {
            let which = if bridges {
                "the masquerade, bridge and passt bindings"
            } else {
                "the masquerade and passt bindings (the bridge binding with --cache-dir)"
            };
            return Err(LauncherError::input_at(
                field.to_string(),
                format!("{what} builds {which} only"),
            ));
        }
        let primary = pod_iface == "eth0";
        let addrs = if primary {
            PodAddrs::primary_on(node.map_or(0, |(_, i)| i))
        } else {
            secondaries = secondaries
                .checked_add(1)
                .filter(|k| *k < 255)
                .ok_or_else(|| {
                    LauncherError::input_at(
                        field.to_string(),
                        format!("{what} builds at most 254 Multus links"),
                    )
                })?;
            PodAddrs::secondary(secondaries)
        };
        if only.is_some_and(|o| o != iface.name) {
            continue;
        }
        if !links_up {
            network::phase1::ip_link_up("lo").map_err(|e| rt(e.to_string()))?;
            links_up = true;
        }
        let peer = if primary {
            "cni0".to_owned()
        } else {
            format!("cni{secondaries}")
        };
        network::phase1::add_pod_link(&pod_iface, &peer, &addrs, node.map(|(ns, _)| ns))
            .map_err(|e| rt(e.to_string()))?;
        if passt {
            // Phase 1 has nothing to do for passt: the pod link, which a
            // CNI makes in a cluster, is all libvirt's passt needs.
            continue;
        }
        if bridge {
            let cache = network::phase1::setup_bridge(&pod_iface, index, &addrs, mq, tap_owner)
                .map_err(|e| rt(e.to_string()))?;
            caches.push((pod_iface, cache));
            continue;
        }
        let Some(pod) = net.and_then(|n| n.pod.as_ref()) else {
            return Err(LauncherError::input_at(
                format!("{field}.masquerade"),
                "masquerade is only allowed on the pod network",
            ));
        };
        let (plan, plan6) = network::plan::masquerade_plans(&iface.name, pod)
            .map_err(|e| LauncherError::input(e.to_string()))?;
        let ports = converter::interfaces::ports(
            iface,
            &format!("spec.domain.devices.interfaces[{index}]"),
        )
        .map_err(LauncherError::from)?;
        network::phase1::setup_masquerade(&addrs, &plan, &plan6, &ports, mq, tap_owner)
            .map_err(|e| rt(e.to_string()))?;
    }
    Ok(caches)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PID 1's namespace file unreadable (sandboxes): not the host's, and
    /// the reason names the file, for the warning.
    #[test]
    fn a_namespace_that_cannot_be_compared_is_named() {
        let ours = Path::new("/proc/self/ns/net");
        assert_eq!(same_namespace(ours, ours), Ok(true));
        let e = same_namespace(ours, Path::new("/nonexistent/1/ns/net")).unwrap_err();
        assert!(
            e.starts_with("/nonexistent/1/ns/net: ") && e.contains("No such file"),
            "{e}"
        );
        if let Ok(init) = same_namespace(ours, Path::new("/proc/1/ns/net")) {
            assert_eq!(init, host_network_namespace().is_some());
        }
    }

    fn vmi(green: &str) -> VirtualMachineInstance {
        let doc = format!(
            r#"{{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {{"name": "v", "namespace": "ns", "uid": "u"}},
                "spec": {{"domain": {{"devices": {{"interfaces": [
                    {{"name": "default", "masquerade": {{}}}}, {green}]}}}},
                  "networks": [{{"name": "default", "pod": {{}}}},
                               {{"name": "green", "multus": {{"networkName": "ns/green"}}}}]}}}}"#
        );
        api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap()
    }

    /// The refusals of `--interface`, by field, before anything is built
    /// (so also here, in the host's namespace).
    #[test]
    fn live_phase1_refusals_name_the_field() {
        let bridge = vmi(r#"{"name": "green", "bridge": {}}"#);
        let err = |v: &VirtualMachineInstance, name: &str, dir: Option<&Path>| {
            pod_network_phase1_live(v, name, dir, None)
                .unwrap_err()
                .to_string()
        };
        let dir = Path::new("/nonexistent");
        assert!(err(&bridge, "green", None).contains("--cache-dir"));
        assert!(err(&bridge, "red", Some(dir))
            .contains("--interface: the VMI has no interface \"red\""));
        let e = err(&bridge, "default", Some(dir));
        assert!(
            e.contains("spec.domain.devices.interfaces[0]: ")
                && e.contains("bridge binding on a secondary"),
            "{e}"
        );
        let masq = vmi(r#"{"name": "green", "masquerade": {}}"#);
        assert!(err(&masq, "green", Some(dir)).contains("spec.domain.devices.interfaces[1]: "));
        // A valid request outside the pod (here: the host's namespace,
        // without k6t-eth0): refused, nothing built.
        let e = err(&bridge, "green", Some(dir));
        assert!(
            e.contains("pod-network-phase1 --interface: ")
                && e.contains("run it in the pod's network namespace"),
            "{e}"
        );
    }
}
