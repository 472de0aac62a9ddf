//! NIC hot-plug for a standalone `run` (`ctl addinterface`, `ctl
//! removeinterface`): what in a cluster the VM's LiveUpdate, virt-api,
//! virt-controller, Multus and virt-handler do before the launcher's
//! SyncVMI, played for a launcher started by `run --setup-pod-network`.
//!
//! - virt-api's admission of the changed VMI (`pkg/network/admitter`,
//!   v1.6.6), in its words: the interface name's format, a network name in
//!   use, a Multus network without `networkName`, masquerade off the pod
//!   network; `state: absent` only for the bridge binding and never on the
//!   default network.
//! - virt-controller (`pkg/network/controllers/vm.go`
//!   `applyDynamicIfaceRequestOnVMI`): only bridge and SR-IOV interfaces
//!   are hot-plugged into a running VMI; another binding never reaches it
//!   (the stand-in says so instead of doing nothing). SR-IOV needs a VF
//!   from the device plugin and HotplugHostDevices, which a standalone
//!   host has not: refused by name. After the unplug, once the pod
//!   interface is gone from the status, the interface and its network
//!   leave the spec (`clearDetachedIfacesFromVMI`).
//! - Multus and virt-handler's network phase 1 for the new network
//!   (`FilterNetsForLiveUpdate`), in the launcher's own pod network
//!   namespace: the pod link `pod<hash>` (its CNI end in the node namespace
//!   the launcher holds), the bridge binding's bridge, tap and dummy
//!   ([`network::phase1::setup_bridge`]) and its DHCP cache in the
//!   launcher's private directory; then the VMI's `status.interfaces` entry
//!   that virt-handler derives from the pod's network-status annotation
//!   (`name`, `infoSource: multus-status`, `podInterfaceName`), which is what
//!   makes the launcher plug the NIC. Removal deletes those links and the
//!   cache after the detach, as the CNI's DEL does.
//!
//! Standalone only, behind the `standalone/` boundary: in a pod virt-handler
//! does all of this.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::LauncherError;
use crate::startup::PRIVATE_DIR;

/// The bindings `--binding` names.
const BINDINGS: &[&str] = &["bridge", "masquerade", "sriov"];

fn interfaces(vmi: &Value) -> &[Value] {
    vmi["spec"]["domain"]["devices"]["interfaces"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

fn named(v: &Value, name: &str) -> bool {
    v.get("name").and_then(Value::as_str) == Some(name)
}

/// The VM's LiveUpdate that adds interface `name` with `binding` on the
/// Multus network `network_name` (`[namespace/]name` of its
/// NetworkAttachmentDefinition), as virt-api admits it and virt-controller
/// hands it to the running VMI: the interface (`bridge: {}`) and the
/// network (`multus: {networkName}`) appended to the spec.
///
/// # Errors
/// virt-api's and virt-controller's refusals (see the module docs), by
/// field.
pub fn add_interface(
    vmi: &mut Value,
    name: &str,
    network_name: Option<&str>,
    binding: &str,
) -> Result<(), LauncherError> {
    let at = interfaces(vmi).len();
    let field = format!("spec.domain.devices.interfaces[{at}]");
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(LauncherError::input_at(
            format!("{field}.name"),
            "Network interface name can only contain alphabetical characters, numbers, dashes (-) or underscores (_)",
        ));
    }
    // The pod interface name and the libvirt alias carry the name: both
    // within KubeVirt's DNS-label budget.
    if name.len() > 63 {
        return Err(LauncherError::input_at(
            format!("{field}.name"),
            format!("{name:?} is longer than 63 characters"),
        ));
    }
    let nets = vmi["spec"]["networks"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if nets.iter().any(|n| named(n, name)) || interfaces(vmi).iter().any(|i| named(i, name)) {
        return Err(LauncherError::input_at(
            format!("spec.networks[{}].name", nets.len()),
            format!(
                "Network with name {name:?} already exists, every network must have a unique name"
            ),
        ));
    }
    let network_name = network_name.unwrap_or_default();
    if network_name.is_empty() {
        return Err(LauncherError::input_at(
            format!("spec.networks[{}]", nets.len()),
            "CNI delegating plugin must have a networkName",
        ));
    }
    // A NetworkAttachmentDefinition reference, `[namespace/]name`: Multus
    // looks the object up by it, so the namespace is a DNS-1123 label and
    // the name a DNS-1123 subdomain (Kubernetes' object names).
    let (ns, nad) = match network_name.split_once('/') {
        Some((ns, nad)) => (Some(ns), nad),
        None => (None, network_name),
    };
    if let Err(why) = ns
        .map_or(Ok(()), api::names::dns1123_label)
        .and_then(|()| api::names::dns1123_subdomain(nad))
    {
        return Err(LauncherError::input_at(
            format!("spec.networks[{}].multus.networkName", nets.len()),
            format!(
                "{:?} is not a NetworkAttachmentDefinition reference ([namespace/]name): {why}",
                api::text::cut(network_name, 80)
            ),
        ));
    }
    match binding {
        "bridge" => {}
        "masquerade" => {
            return Err(LauncherError::input_at(
                format!("{field}.masquerade"),
                "Masquerade interface only implemented with pod network",
            ))
        }
        "sriov" => {
            return Err(LauncherError::input_at(
                format!("{field}.sriov"),
                "an SR-IOV interface is hot-plugged as a host device (a VF from the device plugin, then HotplugHostDevices), which a standalone run has not: only the bridge binding is hot-plugged here",
            ))
        }
        other => {
            return Err(LauncherError::input_at(
                "--binding",
                format!("{other:?} is not one of {}", BINDINGS.join(", ")),
            ))
        }
    }
    let spec = &mut vmi["spec"];
    push(
        &mut spec["domain"]["devices"]["interfaces"],
        json!({"name": name, "bridge": {}}),
    );
    push(
        &mut spec["networks"],
        json!({"name": name, "multus": {"networkName": network_name}}),
    );
    vmi["status"]["phase"] = json!("Running");
    Ok(())
}

fn push(list: &mut Value, item: Value) {
    if !list.is_array() {
        *list = json!([]);
    }
    if let Value::Array(a) = list {
        a.push(item);
    }
}

/// What virt-handler reports once Multus made the pod interface of
/// `name`: its `status.interfaces` entry (`infoSource: multus-status`,
/// `podInterfaceName`).
pub fn report_pod_interface(vmi: &mut Value, name: &str, pod_iface: &str) {
    if !vmi["status"]["interfaces"].is_array() {
        vmi["status"]["interfaces"] = json!([]);
    }
    if let Value::Array(a) = &mut vmi["status"]["interfaces"] {
        a.retain(|s| !named(s, name));
        a.push(json!({
            "name": name,
            "infoSource": wire_multus(),
            "podInterfaceName": pod_iface,
        }));
    }
}

fn wire_multus() -> &'static str {
    virtwrap::manager::nics::INFO_SOURCE_MULTUS
}

/// The VM's LiveUpdate of interface `name` to `state: absent`, as virt-api
/// admits it (the bridge binding only, never the default network).
///
/// # Errors
/// virt-api's refusal, by field; an interface the VMI lacks.
pub fn set_absent(vmi: &mut Value, name: &str) -> Result<(), LauncherError> {
    let Some(i) = interfaces(vmi).iter().position(|x| named(x, name)) else {
        return Err(LauncherError::input_at(
            "spec.domain.devices.interfaces",
            format!("the VMI has no interface {name:?}"),
        ));
    };
    let field = format!("spec.domain.devices.interfaces[{i}].state");
    let iface = &vmi["spec"]["domain"]["devices"]["interfaces"][i];
    if iface.get("bridge").is_none() {
        return Err(LauncherError::input_at(
            field,
            format!("{name:?} interface's state \"absent\" is supported only for bridge binding"),
        ));
    }
    let default = vmi["spec"]["networks"]
        .as_array()
        .and_then(|n| n.iter().find(|n| named(n, name)))
        .is_some_and(|n| n.get("pod").is_some() || n["multus"]["default"] == true);
    if default {
        return Err(LauncherError::input_at(
            field,
            format!("{name:?} interface's state \"absent\" is not supported on default networks"),
        ));
    }
    vmi["spec"]["domain"]["devices"]["interfaces"][i]["state"] = json!("absent");
    vmi["status"]["phase"] = json!("Running");
    Ok(())
}

/// virt-controller's clean-up once the pod interface of the unplugged
/// `name` is gone from the status: the interface, its network and its
/// status entry leave the VMI.
pub fn forget_interface(vmi: &mut Value, name: &str) {
    for path in [
        &["spec", "domain", "devices", "interfaces"][..],
        &["spec", "networks"][..],
        &["status", "interfaces"][..],
    ] {
        let mut cur = &mut *vmi;
        for k in path {
            cur = &mut cur[*k];
        }
        if let Value::Array(a) = cur {
            a.retain(|x| !named(x, name));
        }
    }
}

/// The MAC of interface `name` in the domain (KubeVirt's api.Domain JSON,
/// alias `ua-<name>`), `None` when the domain has no such interface.
pub fn domain_interface(domain: &Value, name: &str) -> Option<String> {
    let alias = format!("ua-{name}");
    domain["Spec"]["Devices"]["Interfaces"]
        .as_array()?
        .iter()
        .find(|i| i["Alias"]["Name"] == name || i["Alias"]["Name"] == alias.as_str())
        .map(|i| i["MAC"]["MAC"].as_str().unwrap_or_default().to_owned())
}

/// The pod interface KubeVirt names for the secondary network `name`
/// (`pod<hash>`).
pub fn pod_iface(name: &str) -> String {
    converter::interfaces::pod_iface_name(name, false)
}

/// Runs `f` on a thread of its own inside the network namespace of the
/// launcher `pid` (the pod's): commands it starts run there too.
fn in_pod_network<T: Send + 'static>(
    pid: i32,
    f: impl FnOnce() -> Result<T, LauncherError> + Send + 'static,
) -> Result<T, LauncherError> {
    let ns = File::open(format!("/proc/{pid}/ns/net"))
        .map_err(|e| LauncherError::runtime(format!("network namespace of {pid}: {e}")))?;
    std::thread::spawn(move || {
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
            LauncherError::runtime(format!("entering the launcher's network namespace: {e}"))
        })?;
        f()
    })
    .join()
    .map_err(|_| LauncherError::runtime("pod network thread panicked"))?
}

/// The node namespace a `--setup-pod-network` launcher `pid` holds open
/// (the `net:[...]` among its descriptors that is not its own namespace),
/// `None` when it holds none (the CNI ends then stay in the pod's).
fn node_namespace(pid: i32) -> Option<network::phase1::NodeNamespace> {
    let own = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    for fd in fds.flatten() {
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue;
        };
        if target.to_string_lossy().starts_with("net:[") && target != own {
            // The descriptor, not a path: reopening it through /proc
            // yields the namespace itself.
            let f = File::open(fd.path()).ok()?;
            return Some(network::phase1::NodeNamespace::from_file(f));
        }
    }
    None
}

/// The directory behind the launcher's private directory
/// (`/var/run/kubevirt-private`, a bind mount of `<state>/private`), seen
/// from here, for the launcher's state directory `state`; never a link.
///
/// # Errors
/// A runtime error when it is not a directory of its own.
fn private_dir(state: &Path) -> Result<PathBuf, LauncherError> {
    let dir = state.join("private");
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(LauncherError::runtime(format!(
            "{} (the launcher's {PRIVATE_DIR}) is not a directory",
            dir.display()
        ))),
        Err(e) => Err(LauncherError::runtime(format!("{}: {e}", dir.display()))),
    }
}

/// Multus's and virt-handler's phase 1 for the hot-plugged interface
/// `name` (index `index` in the spec) of the launcher `pid` whose state
/// directory is `state`: the pod link
/// `pod<hash>` with the next free secondary addresses
/// ([`network::phase1::PodAddrs::secondary`], the first `k` whose CNI end
/// `cni<k>` the node lacks), the bridge binding's links, and its DHCP
/// cache in the launcher's private directory (a new file, never through a
/// link). `tap_owner`: 107 for a non-root launcher; `multi_queue` for
/// `networkInterfaceMultiqueue`. Returns the pod interface name.
///
/// # Errors
/// A runtime error naming the failing command or file; what was built is
/// removed again.
pub fn plug_pod_link(
    pid: i32,
    state: &Path,
    name: &str,
    index: usize,
    tap_owner: Option<u32>,
    multi_queue: bool,
) -> Result<String, LauncherError> {
    let pod = pod_iface(name);
    let file = network::cache::vif_cache_path(&private_dir(state)?, &pod);
    let pod_pid = u32::try_from(pid).map_err(|_| LauncherError::runtime("bad launcher pid"))?;
    let node = node_namespace(pid);
    let p = pod.clone();
    let cache = in_pod_network(pid, move || {
        if network::phase1::link_exists(&p)? {
            return Err(LauncherError::runtime(format!(
                "the pod already has a link {p}"
            )));
        }
        let taken = |k: u8| -> Result<bool, network::phase1::Phase1Error> {
            let cni = format!("cni{k}");
            match &node {
                Some(n) => n.run(|| network::phase1::link_exists(&cni)),
                None => network::phase1::link_exists(&cni),
            }
        };
        let mut k = 1u8;
        while taken(k)? {
            k = k.checked_add(1).filter(|k| *k < 255).ok_or_else(|| {
                LauncherError::runtime("the stand-in builds at most 254 Multus links")
            })?;
        }
        let addrs = network::phase1::PodAddrs::secondary(k);
        let built = network::phase1::add_pod_link_for(
            pod_pid,
            &p,
            &format!("cni{k}"),
            &addrs,
            node.as_ref(),
        )
        .and_then(|()| network::phase1::setup_bridge(&p, index, &addrs, multi_queue, tap_owner));
        built
            .inspect_err(|_| {
                let _ = network::phase1::remove_bridge(&p);
            })
            .map_err(LauncherError::from)
    })
    .map_err(|e| LauncherError::runtime(format!("pod link for interface {name}: {e}")))?;
    // Replaces a cache left by an earlier plug; a link there is
    // replaced, never followed (network::cache::write_json).
    if let Err(e) = network::cache::write_json(&file, &cache) {
        let _ = unplug_pod_link(pid, state, name);
        return Err(LauncherError::runtime(e.to_string()));
    }
    Ok(pod)
}

/// Undoes [`plug_pod_link`] for interface `name` of the launcher `pid`
/// (state directory `state`): its links
/// ([`network::phase1::remove_bridge`]) and its DHCP cache.
///
/// # Errors
/// A runtime error naming the failing command or file.
pub fn unplug_pod_link(pid: i32, state: &Path, name: &str) -> Result<(), LauncherError> {
    let pod = pod_iface(name);
    let p = pod.clone();
    in_pod_network(pid, move || Ok(network::phase1::remove_bridge(&p)?))?;
    let file = network::cache::vif_cache_path(&private_dir(state)?, &pod);
    match std::fs::remove_file(&file) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LauncherError::runtime(format!("{}: {e}", file.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi() -> Value {
        json!({
            "spec": {
                "domain": {"devices": {"interfaces": [{"name": "default", "bridge": {}}]}},
                "networks": [{"name": "default", "pod": {}}]
            },
            "status": {"phase": "Running"}
        })
    }

    #[test]
    fn add_interface_in_kubevirts_words() {
        let mut v = vmi();
        add_interface(&mut v, "blue", Some("ns/blue"), "bridge").unwrap();
        assert_eq!(
            v["spec"]["domain"]["devices"]["interfaces"][1],
            json!({"name": "blue", "bridge": {}})
        );
        assert_eq!(
            v["spec"]["networks"][1],
            json!({"name": "blue", "multus": {"networkName": "ns/blue"}})
        );
        let e = |r: Result<(), LauncherError>| r.unwrap_err().to_string();
        let mut w = vmi();
        assert!(e(add_interface(&mut w, "blue", Some("x"), "masquerade"))
            .contains("spec.domain.devices.interfaces[1].masquerade: Masquerade interface only implemented with pod network"));
        assert!(e(add_interface(&mut w, "blue", None, "bridge"))
            .contains("spec.networks[1]: CNI delegating plugin must have a networkName"));
        assert!(e(add_interface(&mut w, "default", Some("x"), "bridge"))
            .contains("Network with name \"default\" already exists, every network must have a unique name"));
        assert!(e(add_interface(&mut w, "a.b", Some("x"), "bridge"))
            .contains("Network interface name can only contain alphabetical characters"));
        assert!(e(add_interface(&mut w, "b", Some("x"), "sriov")).contains(".sriov: "));
        assert!(e(add_interface(&mut w, "b", Some("x"), "tap")).contains("--binding"));
        // Not `[namespace/]name` of Kubernetes object names.
        for bad in ["a/b/c", "../../etc", "/x", "ns/", "-x", "Blue", "ns/.x"] {
            assert!(
                e(add_interface(&mut w, "b", Some(bad), "bridge")).contains(&format!(
                    "spec.networks[1].multus.networkName: {bad:?} is not a NetworkAttachmentDefinition reference"
                )),
                "{bad}"
            );
        }
        add_interface(&mut vmi(), "b", Some("blue.net"), "bridge").unwrap();
        // Nothing changed by a refusal.
        assert_eq!(w, vmi());
    }

    #[test]
    fn absent_and_forget() {
        let mut v = vmi();
        let e = set_absent(&mut v, "default").unwrap_err().to_string();
        assert!(
            e.contains(
                "\"default\" interface's state \"absent\" is not supported on default networks"
            ),
            "{e}"
        );
        add_interface(&mut v, "blue", Some("ns/blue"), "bridge").unwrap();
        report_pod_interface(&mut v, "blue", &pod_iface("blue"));
        assert_eq!(v["status"]["interfaces"][0]["infoSource"], "multus-status");
        set_absent(&mut v, "blue").unwrap();
        assert_eq!(
            v["spec"]["domain"]["devices"]["interfaces"][1]["state"],
            "absent"
        );
        forget_interface(&mut v, "blue");
        assert_eq!(v["spec"], vmi()["spec"]);
        assert_eq!(v["status"]["interfaces"], json!([]));
        let mut m = vmi();
        m["spec"]["domain"]["devices"]["interfaces"][0] =
            json!({"name": "default", "masquerade": {}});
        m["spec"]["networks"][0] = json!({"name": "default", "multus": {"networkName": "x"}});
        assert!(set_absent(&mut m, "default")
            .unwrap_err()
            .to_string()
            .contains("is supported only for bridge binding"));
    }

    #[test]
    fn domain_interface_by_alias() {
        let d = json!({"Spec": {"Devices": {"Interfaces": [
            {"Alias": {"Name": "blue"}, "MAC": {"MAC": "0a:58:0a:f5:01:05"}}
        ]}}});
        assert_eq!(
            domain_interface(&d, "blue").as_deref(),
            Some("0a:58:0a:f5:01:05")
        );
        assert_eq!(domain_interface(&d, "red"), None);
    }
}
