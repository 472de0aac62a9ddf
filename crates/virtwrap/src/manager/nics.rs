//! Network interfaces of a running domain (KubeVirt v1.6.6 `syncNetwork`,
//! `virtwrap/nichotplug.go`, kubevirt-facts §6.6), on a SyncVMI of a VMI in
//! phase `Running`: the link state. Each interface the converted domain
//! has (matched by alias) whose `<link state>` differs from the live one's
//! is updated in place with `virDomainUpdateDeviceFlags(LIVE | CONFIG)`:
//! the live interface with the converted link state (`spec.domain.devices
//! .interfaces[].state: down` → `down`, else `up`).
//!
//! Deviation: KubeVirt compares the `<link>` elements as they are (none
//! differs from `up`) and, to bring a link up, sends the interface without
//! `<link>`; here no `<link>` counts as `up` and `up` is written out, so a
//! link brought up is not "changed" again on every later sync.
//!
//! Not built yet: NIC plug (phase 2 for a new Multus network, then attach)
//! and unplug (`state: absent`: the converter leaves such an interface out,
//! but it is not detached from a running domain here).

use api::VirtualMachineInstance;
use domain::Interface;
use virt::domain::Domain as VirtDomain;
use virt::sys;

use super::{LibvirtDomainManager, ManagerError};

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
    /// KubeVirt's `syncNetwork` for the running domain `dom` whose converted
    /// definition is `spec` (the link state; see the module docs).
    ///
    /// # Errors
    /// libvirt's refusal of an update; [`ManagerError::Xml`] when the live
    /// XML does not parse.
    pub(super) fn sync_network(
        &self,
        vmi: &VirtualMachineInstance,
        dom: &VirtDomain,
        spec: &domain::Domain,
    ) -> Result<(), ManagerError> {
        if !is_running(vmi) {
            return Ok(());
        }
        let live = domain::Domain::from_xml(&dom.get_xml_desc(0)?)?;
        let name = vmi.domain_name();
        for i in link_updates(&live.devices.interface, &spec.devices.interface) {
            let alias = i.alias.as_ref().map(|a| a.name.as_str()).unwrap_or("");
            tracing::info!(domain = %name, alias, state = i.link_state(), "preparing to update link state");
            dom.update_device_flags(
                &i.to_xml()?,
                sys::VIR_DOMAIN_AFFECT_LIVE | sys::VIR_DOMAIN_AFFECT_CONFIG,
            )
            .inspect_err(
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
