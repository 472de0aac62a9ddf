//! `vmi.status.interfaces` from a domain, the way virt-handler computes it
//! (KubeVirt v1.6.6 `pkg/network/netstat`, `NetStat.UpdateStatus`).
//!
//! In v1.6.6 the launcher does not merge: its domain JSON carries the
//! domain's interfaces in `Spec.Devices.Interfaces` (MAC, alias, queues,
//! link state) and the guest agent's report in `Status.Interfaces`
//! (`{Mac, Ip, IPs, InterfaceName}`), and virt-handler joins the two by
//! MAC. (Older launchers merged themselves and left `InterfaceName` empty;
//! virt-handler still recognises that.) This module is that join, for
//! `virt-launcher ctl interfaces` and tests, from the same JSON
//! virt-handler receives. The parts that need virt-handler's own data are
//! left out: pod IPs from its network cache, Multus status, SR-IOV host
//! devices, and the previous status.

use serde_json::{json, Map, Value};

/// `infoSource` of an entry seen only in the domain.
pub const INFO_SOURCE_DOMAIN: &str = "domain";
/// `infoSource` of an entry seen only by the guest agent.
pub const INFO_SOURCE_GUEST_AGENT: &str = "guest-agent";
/// `infoSource` of an entry seen in both.
pub const INFO_SOURCE_DOMAIN_AND_GA: &str = "domain, guest-agent";

/// `vmi.status.interfaces` (JSON, `VirtualMachineInstanceNetworkInterface`:
/// `name`, `mac`, `interfaceName`, `ipAddress`, `ipAddresses`,
/// `infoSource`, `queueCount`, `linkState`; empty values omitted) from an
/// `api.Domain` JSON as `GetDomain` returns it. Rules, in order:
///
/// 1. one entry per domain interface: `name` = its alias without `ua-`,
///    `mac`, `queueCount` = driver queues (default 1), `linkState` (default
///    `up`), `infoSource` `domain`;
/// 2. each guest-agent interface is matched to an entry by MAC (exact
///    string): it adds `interfaceName` and the IPs, IPv4 ones first, the
///    first being `ipAddress`, and makes the source `domain, guest-agent`;
///    an unmatched one becomes its own entry (`guest-agent`);
/// 3. the entry named `primary` (the pod network's interface) moves first.
///
/// Missing or mistyped fields count as empty; never panics.
pub fn vmi_interfaces_status(domain: &Value, primary: Option<&str>) -> Vec<Value> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut out: Vec<Map<String, Value>> = Vec::new();
    let none = Vec::new();
    let dom_ifaces = domain["Spec"]["Devices"]["Interfaces"]
        .as_array()
        .unwrap_or(&none);
    for i in dom_ifaces {
        let mut e = Map::new();
        put(&mut e, "name", text(&i["Alias"]["Name"]));
        put(&mut e, "mac", text(&i["MAC"]["MAC"]));
        e.insert("infoSource".into(), json!(INFO_SOURCE_DOMAIN));
        let queues = i["Driver"]["Queues"].as_u64().unwrap_or(1);
        e.insert("queueCount".into(), json!(queues));
        let link = i["LinkState"]["State"].as_str().unwrap_or("up");
        put(&mut e, "linkState", link.to_owned());
        out.push(e);
    }
    let agent = domain["Status"]["Interfaces"].as_array().unwrap_or(&none);
    for a in agent {
        let mac = text(&a["Mac"]);
        let ips: Vec<String> = a["IPs"]
            .as_array()
            .unwrap_or(&none)
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        let name = text(&a["InterfaceName"]);
        let found = out
            .iter_mut()
            .find(|e| !mac.is_empty() && e.get("mac").and_then(Value::as_str) == Some(&mac));
        match found {
            Some(e) => {
                put(e, "interfaceName", name.clone());
                // IPv4 first, then IPv6 (unparsable entries dropped).
                let (v4, v6): (Vec<&String>, Vec<&String>) = ips
                    .iter()
                    .filter(|s| s.parse::<std::net::IpAddr>().is_ok())
                    .partition(|s| s.parse::<std::net::Ipv4Addr>().is_ok());
                let all: Vec<&String> = v4.into_iter().chain(v6).collect();
                e.remove("ipAddress");
                e.remove("ipAddresses");
                if let Some(first) = all.first() {
                    e.insert("ipAddress".into(), json!(first));
                    e.insert("ipAddresses".into(), json!(all));
                }
                if !name.is_empty() {
                    e.insert("infoSource".into(), json!(INFO_SOURCE_DOMAIN_AND_GA));
                }
            }
            None => {
                let mut e = Map::new();
                put(&mut e, "mac", mac);
                put(&mut e, "ipAddress", text(&a["Ip"]));
                if !ips.is_empty() {
                    e.insert("ipAddresses".into(), json!(ips));
                }
                put(&mut e, "interfaceName", name);
                e.insert("infoSource".into(), json!(INFO_SOURCE_GUEST_AGENT));
                out.push(e);
            }
        }
    }
    if let Some(p) = primary {
        if let Some(at) = out
            .iter()
            .position(|e| e.get("name").and_then(Value::as_str) == Some(p))
        {
            let e = out.remove(at);
            out.insert(0, e);
        }
    }
    out.into_iter().map(Value::Object).collect()
}

fn put(e: &mut Map<String, Value>, key: &str, value: String) {
    if !value.is_empty() {
        e.insert(key.into(), Value::String(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain() -> Value {
        json!({
            "Spec": {"Devices": {"Interfaces": [
                {"MAC": {"MAC": "02:00:00:aa:bb:02"}, "Alias": {"Name": "secondary", "UserDefined": true},
                 "Driver": {"Name": "vhost", "Queues": 4}, "LinkState": {"State": "down"}},
                {"MAC": {"MAC": "02:00:00:aa:bb:01"}, "Alias": {"Name": "default", "UserDefined": true}},
                {"MAC": {"MAC": "02:00:00:aa:bb:09"}, "Alias": {"Name": "absent-in-guest", "UserDefined": true}}
            ]}},
            "Status": {"Interfaces": [
                {"Mac": "02:00:00:aa:bb:01", "Ip": "fd10:0:2::2",
                 "IPs": ["fd10:0:2::2", "10.0.2.2", "fe80::ff:fe00:1"], "InterfaceName": "eth0"},
                {"Mac": "02:00:00:aa:bb:02", "Ip": "", "IPs": null, "InterfaceName": "eth1"},
                {"Mac": "52:54:00:00:00:07", "Ip": "192.0.2.7", "IPs": ["192.0.2.7"], "InterfaceName": "docker0"}
            ]}
        })
    }

    #[test]
    fn domain_and_agent_are_joined_by_mac_like_virt_handler() {
        let got = vmi_interfaces_status(&domain(), Some("default"));
        assert_eq!(
            got,
            vec![
                json!({"name": "default", "mac": "02:00:00:aa:bb:01", "interfaceName": "eth0",
                       "ipAddress": "10.0.2.2", "ipAddresses": ["10.0.2.2", "fd10:0:2::2", "fe80::ff:fe00:1"],
                       "infoSource": "domain, guest-agent", "queueCount": 1, "linkState": "up"}),
                json!({"name": "secondary", "mac": "02:00:00:aa:bb:02", "interfaceName": "eth1",
                       "infoSource": "domain, guest-agent", "queueCount": 4, "linkState": "down"}),
                json!({"name": "absent-in-guest", "mac": "02:00:00:aa:bb:09",
                       "infoSource": "domain", "queueCount": 1, "linkState": "up"}),
                json!({"mac": "52:54:00:00:00:07", "ipAddress": "192.0.2.7", "ipAddresses": ["192.0.2.7"],
                       "interfaceName": "docker0", "infoSource": "guest-agent"}),
            ]
        );
    }

    #[test]
    fn no_agent_and_odd_input() {
        let mut d = domain();
        d["Status"]["Interfaces"] = Value::Null;
        let got = vmi_interfaces_status(&d, None);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|e| e["infoSource"] == "domain"));
        assert_eq!(got[0]["name"], "secondary");
        // An agent entry of an old launcher (no InterfaceName) keeps the
        // domain source, as virt-handler does.
        d["Status"]["Interfaces"] = json!([{"Mac": "02:00:00:aa:bb:01", "IPs": ["10.0.2.2"]}]);
        let got = vmi_interfaces_status(&d, Some("default"));
        assert_eq!(got[0]["infoSource"], "domain");
        assert_eq!(got[0]["ipAddress"], "10.0.2.2");
        for odd in [
            json!(null),
            json!([]),
            json!({"Spec": 3, "Status": {"Interfaces": [7, "x", {}]}}),
        ] {
            let got = vmi_interfaces_status(&odd, Some("default"));
            assert!(
                got.iter().all(|e| e["infoSource"] == "guest-agent"),
                "{got:?}"
            );
        }
    }
}
