//! Network interfaces of a running domain (KubeVirt v1.6.6 `syncNetwork`,
//! `virtwrap/nichotplug.go`, kubevirt-facts §6.6), on a SyncVMI of a VMI in
//! phase `Running`, in KubeVirt's order:
//!
//! 1. **Plug** ([`networks_to_plug`]): an interface the VMI's
//!    `status.interfaces` reports with info source `multus-status` (virt-
//!    handler saw the pod interface Multus made), that the live domain lacks
//!    (by alias), whose spec interface is not `absent` and not SR-IOV (a host
//!    device: HotplugHostDevices). Network phase 2 has run for it before
//!    this sync (the launcher's `PodNetwork`, given these names); its
//!    converted `<interface>` is attached with
//!    `virDomainAttachDeviceFlags(LIVE | CONFIG)`. It carries no PCI
//!    address unless the spec gives one: libvirt puts it on a free root
//!    port, which the define's placeholder interfaces left for it
//!    (`converter::pci_ports`).
//! 2. **Unplug** ([`interfaces_to_unplug`]): a spec interface with `state:
//!    absent` whose live interface (by alias) is on the tap KubeVirt names
//!    for it (`tap` + the hashed pod interface name's hash) is detached with
//!    `virDomainDetachDeviceFlags(LIVE | CONFIG)`; the guest releases it.
//! 3. **Link state** ([`link_updates`]): each interface the converted domain
//!    has (matched by alias) whose `<link state>` differs from the live
//!    one's is updated in place with `virDomainUpdateDeviceFlags(LIVE |
//!    CONFIG)`: the live interface with the converted link state
//!    (`spec.domain.devices.interfaces[].state: down` → `down`, else `up`).
//!
//! Deviations: KubeVirt compares the `<link>` elements as they are (none
//! differs from `up`) and, to bring a link up, sends the interface without
//! `<link>`; here no `<link>` counts as `up` and `up` is written out, so a
//! link brought up is not "changed" again on every later sync. KubeVirt
//! lower-cases the whole interface XML it attaches, updates and detaches
//! (v1.6.6 `virtwrap/nichotplug.go`, `strings.ToLower`); here it is sent
//! as converted. What that changes, read from KubeVirt's code: MACs none
//! (libvirt stores and reports them in lower case whatever it is given),
//! the tap, bridge and model names none (lower case already); only the
//! alias of an interface whose name has capitals (virt-api admits
//! `[A-Za-z0-9-_]+`): KubeVirt's live domain then says `ua-blue` for
//! `Blue`, GetDomain and so virt-handler's status report `blue`, which
//! matches no spec interface, and each later sync tries to attach `Blue`
//! again (`networksToHotplugWhoseInterfacesAreNotInTheDomain` looks it up
//! by alias): a KubeVirt defect, not reproduced; the alias keeps the
//! name's case.

use std::collections::BTreeMap;

use api::vmi::InterfaceState;
use api::VirtualMachineInstance;
use converter::interfaces::{pod_iface_name, tap_name, InterfaceHost};
use domain::Interface;
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{LibvirtDomainManager, ManagerError, ACTIVE};

/// KubeVirt's info source of an interface status Multus reported
/// (`vmispec.InfoSourceMultusStatus`).
pub const INFO_SOURCE_MULTUS: &str = "multus-status";

/// The user alias name of a domain interface (`ua-<name>` → `<name>`, as
/// KubeVirt's `Alias.GetName`), `None` without an alias.
fn alias_name(i: &Interface) -> Option<&str> {
    let a = i.alias.as_ref()?.name.as_str();
    Some(a.strip_prefix("ua-").unwrap_or(a))
}

/// The interfaces of `vmi` to hot-plug into a domain whose live interfaces
/// are `live`, by name, in `spec.networks` order (KubeVirt's
/// `networksToHotplugWhoseInterfacesAreNotInTheDomain`; see the module
/// docs): reported in `status.interfaces` with info source `multus-status`
/// (a comma-and-space list, KubeVirt's `ContainsInfoSource`), not in the
/// domain, spec interface not `absent` and not SR-IOV, and with a network.
pub fn networks_to_plug(vmi: &VirtualMachineInstance, live: &[Interface]) -> Vec<String> {
    let statuses = vmi
        .status
        .as_ref()
        .and_then(|s| s.get("interfaces"))
        .and_then(serde_json::Value::as_array);
    let Some(statuses) = statuses else {
        return Vec::new();
    };
    let reported = |name: &str| {
        statuses.iter().any(|st| {
            st.get("name").and_then(serde_json::Value::as_str) == Some(name)
                && st
                    .get("infoSource")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|s| s.split(", ").any(|x| x == INFO_SOURCE_MULTUS))
        })
    };
    let in_domain = |name: &str| live.iter().any(|l| alias_name(l) == Some(name));
    let spec_ok = |name: &str| {
        vmi.spec
            .domain
            .devices
            .interfaces
            .iter()
            .find(|i| i.name == name)
            .is_some_and(|i| !i.is_absent() && i.sriov.is_none())
    };
    let mut out: Vec<String> = Vec::new();
    for net in &vmi.spec.networks {
        let n = net.name.as_str();
        if reported(n) && !in_domain(n) && spec_ok(n) && !out.iter().any(|o| o == n) {
            out.push(n.to_owned());
        }
    }
    out
}

/// The live interfaces to detach for `vmi` (KubeVirt's
/// `interfacesToHotUnplug`): for each spec interface with `state: absent`,
/// the live interface of its alias when its tap is the one KubeVirt names
/// for it (`tap_name(pod<hash>)`, a secondary network's: admission allows
/// `absent` only for the bridge binding and never on the default network).
pub fn interfaces_to_unplug(vmi: &VirtualMachineInstance, live: &[Interface]) -> Vec<Interface> {
    vmi.spec
        .domain
        .devices
        .interfaces
        .iter()
        .filter(|i| i.state == Some(InterfaceState::Absent))
        .filter_map(|i| {
            let cur = live
                .iter()
                .find(|l| alias_name(l) == Some(i.name.as_str()))?;
            let tap = tap_name(&pod_iface_name(&i.name, false));
            cur.target
                .as_ref()
                .is_some_and(|t| t.dev == tap)
                .then(|| cur.clone())
        })
        .collect()
}

/// The live interfaces (with their new link state) whose link state the
/// converted ones (`wanted`) change, matched by alias.
pub fn link_updates(live: &[Interface], wanted: &[Interface]) -> Vec<Interface> {
    let alias = |i: &Interface| i.alias.as_ref().map(|a| a.name.clone());
    wanted
        .iter()
        .filter_map(|w| {
            let name = alias(w)?;
            let cur = live.iter().find(|l| alias(l).as_ref() == Some(&name))?;
            (cur.link_state() != w.link_state()).then(|| {
                let mut u = cur.clone();
                u.link = Some(domain::LinkState {
                    state: w.link_state().to_owned(),
                });
                u
            })
        })
        .collect()
}

/// KubeVirt's `VirtualMachineInstance.IsRunning`: `status.phase` is
/// `Running`.
fn is_running(vmi: &VirtualMachineInstance) -> bool {
    vmi.status
        .as_ref()
        .and_then(|s| s.get("phase"))
        .and_then(serde_json::Value::as_str)
        == Some("Running")
}

impl LibvirtDomainManager {
    /// The interfaces of `vmi` to hot-plug now ([`networks_to_plug`]
    /// against the live domain), for network phase 2 before the sync;
    /// empty when the domain is not active or the VMI not `Running`
    /// (KubeVirt's `syncNetwork` acts only then).
    ///
    /// # Errors
    /// libvirt's, or [`ManagerError::Xml`] when the live XML does not parse.
    pub fn interfaces_to_plug(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> Result<Vec<String>, ManagerError> {
        if !is_running(vmi) {
            return Ok(Vec::new());
        }
        self.with_conn(|conn| {
            let Some(dom) = Self::lookup(conn, vmi)? else {
                return Ok(Vec::new());
            };
            if !ACTIVE.contains(&dom.get_state()?.0) {
                return Ok(Vec::new());
            }
            let live = domain::Domain::from_xml(&dom.get_xml_desc(0)?)?;
            Ok(networks_to_plug(vmi, &live.devices.interface))
        })
    }

    /// KubeVirt's `syncNetwork` for the running domain `dom` whose converted
    /// definition is `spec`, with the host facts network phase 2 found
    /// (`prepared`): plug, unplug, link state (see the module docs).
    ///
    /// # Errors
    /// libvirt's refusal of an attach, detach or update (logged with the
    /// interface, as KubeVirt does); [`ManagerError::Xml`] when the live
    /// XML does not parse; an interface to plug that phase 2 did not
    /// prepare or that the converted domain lacks.
    pub(super) fn sync_network(
        &self,
        vmi: &VirtualMachineInstance,
        dom: &VirtDomain,
        spec: &domain::Domain,
        prepared: &BTreeMap<String, InterfaceHost>,
    ) -> Result<(), ManagerError> {
        if !is_running(vmi) {
            return Ok(());
        }
        let live = domain::Domain::from_xml(&dom.get_xml_desc(0)?)?;
        let name = vmi.domain_name();
        let flags = sys::VIR_DOMAIN_AFFECT_LIVE | sys::VIR_DOMAIN_AFFECT_CONFIG;
        for net in networks_to_plug(vmi, &live.devices.interface) {
            tracing::info!(domain = %name, "will hot plug {net}");
            let iface = spec
                .devices
                .interface
                .iter()
                .find(|i| alias_name(i) == Some(net.as_str()))
                .filter(|_| prepared.contains_key(&net))
                .ok_or_else(|| {
                    ManagerError::Failed(format!(
                        "could not retrieve the api.Interface object from the dummy domain (interface {net})"
                    ))
                })?;
            let mac = iface.mac.as_ref().map_or("", |m| m.address.as_str());
            tracing::info!(domain = %name, "will hot plug {net:?} with MAC {mac:?}");
            dom.attach_device_flags(&iface.to_xml()?, flags)
                .inspect_err(|e| {
                    tracing::error!(domain = %name, "libvirt failed to attach interface {net}: {e}")
                })?;
        }
        for i in interfaces_to_unplug(vmi, &live.devices.interface) {
            let alias = alias_name(&i).unwrap_or_default().to_owned();
            tracing::info!(domain = %name, "preparing to hot-unplug {alias}");
            dom.detach_device_flags(&i.to_xml()?, flags)
                .inspect_err(|e| {
                    tracing::error!(domain = %name, "libvirt failed to detach interface {alias}: {e}")
                })?;
        }
        for i in link_updates(&live.devices.interface, &spec.devices.interface) {
            let alias = i.alias.as_ref().map(|a| a.name.as_str()).unwrap_or("");
            tracing::info!(domain = %name, alias, state = i.link_state(), "preparing to update link state");
            dom.update_device_flags(&i.to_xml()?, flags).inspect_err(
                |e| tracing::error!(domain = %name, alias, "libvirt failed to set link state: {e}"),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(alias: &str, link: Option<&str>) -> Interface {
        Interface {
            interface_type: "ethernet".into(),
            alias: Some(domain::Alias { name: alias.into() }),
            link: link.map(|s| domain::LinkState { state: s.into() }),
            ..Interface::default()
        }
    }

    fn vmi(status: serde_json::Value) -> VirtualMachineInstance {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "a", "namespace": "b"},
            "spec": {
                "domain": {"devices": {"interfaces": [
                    {"name": "default", "bridge": {}},
                    {"name": "blue", "bridge": {}},
                    {"name": "red", "bridge": {}, "state": "absent"},
                    {"name": "vf", "sriov": {}},
                    {"name": "green", "bridge": {}}
                ]}},
                "networks": [
                    {"name": "default", "pod": {}},
                    {"name": "blue", "multus": {"networkName": "blue"}},
                    {"name": "red", "multus": {"networkName": "red"}},
                    {"name": "vf", "multus": {"networkName": "vf"}},
                    {"name": "green", "multus": {"networkName": "green"}}
                ]
            },
            "status": status
        }))
        .unwrap()
    }

    fn tapped(alias: &str, tap: &str) -> Interface {
        let mut i = iface(&format!("ua-{alias}"), None);
        i.target = Some(domain::InterfaceTarget {
            dev: tap.into(),
            managed: Some("no".into()),
        });
        i
    }

    #[test]
    fn plug_follows_kubevirts_rule() {
        let multus = |n: &str, src: &str| serde_json::json!({"name": n, "infoSource": src});
        let v = vmi(serde_json::json!({"phase": "Running", "interfaces": [
            multus("default", "domain, guest-agent"),
            multus("blue", "multus-status"),
            multus("red", "multus-status"),
            multus("vf", "domain, multus-status"),
            multus("green", "guest-agent"),
        ]}));
        let live = [iface("ua-default", None)];
        // blue: reported by Multus, not in the domain. red is absent, vf is
        // SR-IOV, green has no multus-status, default is in the domain.
        assert_eq!(networks_to_plug(&v, &live), ["blue"]);
        // Once in the domain, nothing more to plug.
        let live = [iface("ua-default", None), iface("ua-blue", None)];
        assert!(networks_to_plug(&v, &live).is_empty());
        // "multus-status" inside another word is no info source.
        let v = vmi(serde_json::json!({"interfaces": [multus("blue", "domain,multus-status")]}));
        assert!(networks_to_plug(&v, &[]).is_empty());
        assert!(networks_to_plug(&vmi(serde_json::json!({})), &[]).is_empty());
    }

    #[test]
    fn unplug_only_absent_interfaces_on_kubevirts_tap() {
        let v = vmi(serde_json::json!({"phase": "Running"}));
        let red_tap = tap_name(&pod_iface_name("red", false));
        assert!(
            red_tap.starts_with("tap") && red_tap.len() == 14,
            "{red_tap}"
        );
        let live = [
            tapped("default", "tap0"),
            tapped("blue", &tap_name(&pod_iface_name("blue", false))),
            tapped("red", &red_tap),
        ];
        assert_eq!(interfaces_to_unplug(&v, &live), [live[2].clone()]);
        // A live interface of that alias on another tap is left alone.
        assert!(interfaces_to_unplug(&v, &[tapped("red", "tap0")]).is_empty());
        assert!(interfaces_to_unplug(&v, &[]).is_empty());
    }

    #[test]
    fn link_state_changes_by_alias() {
        let up = iface("ua-default", None);
        let down = iface("ua-default", Some("down"));
        // Down: the live interface gets <link state='down'/>.
        let u = link_updates(std::slice::from_ref(&up), std::slice::from_ref(&down));
        assert_eq!(u, vec![down.clone()]);
        // Up again: written out.
        let u = link_updates(std::slice::from_ref(&down), std::slice::from_ref(&up));
        assert_eq!(u, vec![iface("ua-default", Some("up"))]);
        // No <link> and `up` are the same; an unknown alias is left.
        assert!(link_updates(
            &[iface("ua-default", Some("up"))],
            std::slice::from_ref(&up)
        )
        .is_empty());
        assert!(link_updates(&[up], &[iface("ua-other", Some("down"))]).is_empty());
        let xml = iface("ua-a", Some("down")).to_xml().unwrap();
        assert!(xml.contains("<link state=\"down\"/>"), "{xml}");
    }
}
