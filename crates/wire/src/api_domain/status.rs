//! `api.DomainStatus`: the domain's state and what the guest agent
//! reported about the guest (interfaces, OS, file-system freeze).

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// What virt-handler's `api.DomainStatus` holds: `{Status, Reason,
/// Interfaces, OSInfo, FSFreezeStatus}` (KubeVirt `api.DomainStatus`, Go
/// field names).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DomainStatus {
    /// `Status`: the LifeCycle string (`NoState`, `Running`, `Blocked`,
    /// `Paused`, `ShuttingDown`, `Shutoff`, `Crashed`, `PMSuspended`).
    pub status: String,
    /// `Reason`: the StateChangeReason string (`Unknown`, `User`,
    /// `Destroyed`, `IOError` ..., or `NonExistent` for a vanished domain).
    pub reason: String,
    /// `Interfaces`: guest-agent interfaces, `None` (or empty) → `null`.
    /// Each element becomes `{Mac, Ip, IPs, InterfaceName}`; the element may
    /// use those Go names or the VMI-status names (`mac`, `ipAddress`,
    /// `ipAddresses`, `interfaceName`). Missing values are `""` / `null`.
    pub interfaces: Option<Vec<Value>>,
    /// `OSInfo`: guest-agent OS information. Always emitted as
    /// `{Name, KernelRelease, Version, PrettyName, VersionId, KernelVersion,
    /// Machine, Id}` (a Go struct, not a pointer), `""` for each unknown
    /// value. The object may use those Go names or the VMI-status names
    /// (`name`, `kernelRelease`, `version`, `prettyName`, `versionId`,
    /// `kernelVersion`, `machine`, `id`).
    pub os_info: Option<Value>,
    /// `FSFreezeStatus.Status`: `frozen`, `thawed` or `""`.
    pub fs_freeze_status: String,
}

/// Go keys of `api.GuestOSInfo` and the VMI-status key accepted for each.
const OS_INFO_KEYS: [(&str, &str); 8] = [
    ("Name", "name"),
    ("KernelRelease", "kernelRelease"),
    ("Version", "version"),
    ("PrettyName", "prettyName"),
    ("VersionId", "versionId"),
    ("KernelVersion", "kernelVersion"),
    ("Machine", "machine"),
    ("Id", "id"),
];

/// `api.DomainStatus` JSON.
pub(super) fn status_json(status: &DomainStatus) -> Value {
    let interfaces = match &status.interfaces {
        Some(list) if !list.is_empty() => {
            Value::Array(list.iter().map(interface_status_json).collect())
        }
        _ => Value::Null,
    };
    let mut os_info = Map::new();
    for (go, alt) in OS_INFO_KEYS {
        let v = status
            .os_info
            .as_ref()
            .and_then(|o| pick(o, go, alt))
            .and_then(Value::as_str)
            .unwrap_or_default();
        os_info.insert(go.into(), Value::String(v.into()));
    }
    json!({
        "Status": status.status,
        "Reason": status.reason,
        "Interfaces": interfaces,
        "OSInfo": os_info,
        "FSFreezeStatus": { "Status": status.fs_freeze_status },
    })
}

/// `obj[go]`, else `obj[alt]`, when `obj` is an object.
fn pick<'a>(obj: &'a Value, go: &str, alt: &str) -> Option<&'a Value> {
    obj.get(go).or_else(|| obj.get(alt))
}

/// `api.InterfaceStatus`: `{Mac, Ip, IPs, InterfaceName}`.
fn interface_status_json(v: &Value) -> Value {
    let text = |go: &str, alt: &str| {
        pick(v, go, alt)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let ips = match pick(v, "IPs", "ipAddresses").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => Value::Array(
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| Value::String(s.into()))
                .collect(),
        ),
        _ => Value::Null,
    };
    json!({
        "Mac": text("Mac", "mac"),
        "Ip": text("Ip", "ipAddress"),
        "IPs": ips,
        "InterfaceName": text("InterfaceName", "interfaceName"),
    })
}

/// One guest interface as the domain status reports it (KubeVirt
/// `api.InterfaceStatus`, serialised in `Status.Interfaces` as
/// `{Mac, Ip, IPs, InterfaceName}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceStatus {
    /// `Mac`: the hardware address, `""` when the agent gave none.
    #[serde(rename = "Mac")]
    pub mac: String,
    /// `Ip`: the first IPv4 address, else the first address, else `""`.
    #[serde(rename = "Ip")]
    pub ip: String,
    /// `IPs`: every address in the agent's order.
    #[serde(rename = "IPs")]
    pub ips: Vec<String>,
    /// `InterfaceName` as the guest names it (any UTF-8).
    #[serde(rename = "InterfaceName")]
    pub interface_name: String,
}
