//! KubeVirt's api.Domain JSON of this launcher's domain (with the guest
//! agent's data and the runtime metadata), as GetDomain and the
//! notifications carry it.

use api::VirtualMachineInstance;
use virtwrap::agent::AgentStore;
use virtwrap::metadata::MetadataCache;
use virtwrap::{DomainManager, LibvirtDomainManager, ManagerError};
use wire::api_domain::{self, DomainStatus, ObjectMeta, RuntimeMetadata};

/// Who this launcher runs: from the flags, or the VMI it was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// VMI name.
    pub name: String,
    /// VMI namespace.
    pub namespace: String,
    /// VMI UID.
    pub uid: String,
}

impl Identity {
    /// Identity of `vmi`.
    pub fn of(vmi: &VirtualMachineInstance) -> Identity {
        Identity {
            name: vmi.metadata.name.clone(),
            namespace: vmi.namespace().to_owned(),
            uid: vmi.uid().to_owned(),
        }
    }

    /// libvirt domain name `<namespace>_<name>`.
    pub fn domain_name(&self) -> String {
        format!("{}_{}", self.namespace, self.name)
    }

    fn meta(&self, deletion_timestamp: Option<String>) -> ObjectMeta {
        ObjectMeta {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
            deletion_timestamp,
        }
    }
}

pub use virtwrap::metadata::now_rfc3339;

/// The domain as KubeVirt's api.Domain JSON, `None` when it does not exist;
/// `Spec.Metadata.KubeVirt` carries `metadata` (KubeVirt's metadata cache).
///
/// # Errors
/// [`ManagerError`] from libvirt.
pub fn domain_json(
    manager: &LibvirtDomainManager,
    id: &Identity,
    agent: &AgentStore,
    metadata: &MetadataCache,
) -> Result<Option<String>, ManagerError> {
    Ok(read_domain(manager, id)?
        .map(|d| status_json(id, &d.spec, d.state, d.reason, agent, &metadata.snapshot())))
}

/// The VMI's domain as libvirt reports it now, `None` when it does not exist.
///
/// # Errors
/// [`ManagerError`] from libvirt.
pub(crate) fn read_domain(
    manager: &LibvirtDomainManager,
    id: &Identity,
) -> Result<Option<virtwrap::manager::DomainStatus>, ManagerError> {
    let name = id.domain_name();
    Ok(manager
        .list_all_domains()?
        .into_iter()
        .find(|d| d.name == name))
}

/// KubeVirt's api.Domain JSON of `spec` in `state`/`reason` (KubeVirt's
/// `LifeCycle` and `StateChangeReason` names), with what the guest agent
/// reported: `OSInfo`, `Interfaces` (IPs) and `FSFreezeStatus`, and the
/// runtime metadata in `Spec.Metadata.KubeVirt` (e.g. `MemoryDump`).
pub(crate) fn status_json(
    id: &Identity,
    spec: &domain::Domain,
    state: &str,
    reason: &str,
    agent: &AgentStore,
    metadata: &RuntimeMetadata,
) -> String {
    let spec = &without_placeholders(spec);
    let (os, interfaces, fs_freeze_status) = agent.status_parts();
    let status = DomainStatus {
        status: state.to_owned(),
        reason: reason.to_owned(),
        interfaces: interfaces.map(|l| {
            l.iter()
                .map(|i| serde_json::to_value(i).unwrap_or_default())
                .collect()
        }),
        os_info: os.map(|o| serde_json::to_value(o).unwrap_or_default()),
        fs_freeze_status,
    };
    api_domain::domain_json_with_metadata(&id.meta(None), Some(spec), &status, metadata).to_string()
}

/// `spec` without the placeholder interfaces of the first of the sync's
/// two defines ([`converter::pci_ports::with_placeholders`]): a domain read
/// between the two (a notification of the first define) lists them, and
/// they are no device of the VMI. They have no alias, and virt-handler's
/// netstat reads every interface's alias through its pointer: one in a
/// notification would panic virt-handler (KubeVirt's launcher can send
/// them in that window; found with the virt-handler stand-in).
fn without_placeholders(spec: &domain::Domain) -> std::borrow::Cow<'_, domain::Domain> {
    let placeholder = |i: &domain::Interface| {
        i.target
            .as_ref()
            .is_some_and(|t| t.dev.starts_with(converter::pci_ports::PLACEHOLDER_PREFIX))
    };
    if !spec.devices.interface.iter().any(placeholder) {
        return std::borrow::Cow::Borrowed(spec);
    }
    let mut s = spec.clone();
    s.devices.interface.retain(|i| !placeholder(i));
    std::borrow::Cow::Owned(s)
}

/// The final notification KubeVirt sends when the domain is gone: a
/// MODIFIED event with `deletionTimestamp` set, status NoState/NonExistent.
pub fn deleted_json(id: &Identity) -> String {
    let status = DomainStatus {
        status: "NoState".into(),
        reason: virtwrap::state::NON_EXISTENT.into(),
        interfaces: None,
        os_info: None,
        fs_freeze_status: String::new(),
    };
    api_domain::domain_json(&id.meta(Some(now_rfc3339())), None, &status).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_interfaces_of_the_first_define_are_never_reported() {
        let xml = "<domain type='qemu'><name>ns_vm</name><memory unit='b'>1</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>\
            <interface type='ethernet'><mac address='02:00:00:00:00:01'/><target dev='tap0' managed='no'/><model type='virtio-non-transitional'/><alias name='ua-default'/></interface>\
            <interface type='ethernet'><mac address='52:54:00:00:00:02'/><target dev='placeholder-0' managed='no'/><model type='virtio-non-transitional'/></interface>\
            </devices></domain>";
        let spec = domain::Domain::from_xml(xml).unwrap();
        assert_eq!(spec.devices.interface.len(), 2);
        let kept = without_placeholders(&spec);
        assert_eq!(kept.devices.interface.len(), 1);
        assert_eq!(
            kept.devices.interface[0].target.as_ref().unwrap().dev,
            "tap0"
        );
        let id = Identity {
            name: "vm".into(),
            namespace: "ns".into(),
            uid: "u".into(),
        };
        let json: serde_json::Value = serde_json::from_str(&status_json(
            &id,
            &spec,
            "Running",
            "Unknown",
            &AgentStore::default(),
            &RuntimeMetadata::default(),
        ))
        .unwrap();
        let ifaces = json["Spec"]["Devices"]["Interfaces"].as_array().unwrap();
        assert_eq!(ifaces.len(), 1, "{json}");
        assert_eq!(ifaces[0]["Alias"]["Name"], "default", "{json}");
    }
}
