//! LiveUpdates of a running VMI as they reach it from the VM (virt-api's
//! and virt-controller's part): CPU sockets, guest memory, an interface's
//! link state, and what virt-handler copies back from the domain.

use serde_json::{json, Value};

use super::volumes::{array, named};
use crate::error::LauncherError;

/// The VM's LiveUpdate of its CPU sockets as it reaches the VMI:
/// `spec.domain.cpu.sockets` becomes `sockets`, refused as virt-api
/// refuses more than `maxSockets` (or none).
///
/// # Errors
/// Input error naming `spec.domain.cpu.sockets`.
pub fn set_sockets(vmi: &mut Value, sockets: u32) -> Result<(), LauncherError> {
    let field = "spec.domain.cpu.sockets";
    let max = vmi["spec"]["domain"]["cpu"]["maxSockets"]
        .as_u64()
        .unwrap_or(0);
    if sockets == 0 {
        return Err(LauncherError::input_at(field, "must be at least 1"));
    }
    if max == 0 {
        return Err(LauncherError::input_at(
            field,
            "the VMI has no spec.domain.cpu.maxSockets: its vCPUs cannot be hot-plugged (run it with --vm-rollout-strategy LiveUpdate)",
        ));
    }
    if u64::from(sockets) > max {
        return Err(LauncherError::input_at(
            field,
            "Number of sockets in CPU topology is greater than the maximum sockets allowed",
        ));
    }
    vmi["spec"]["domain"]["cpu"]["sockets"] = json!(sockets);
    Ok(())
}

/// A VM's LiveUpdate of an interface's link state as it reaches the VMI:
/// `spec.domain.devices.interfaces[name].state` becomes `state` (`up` or
/// `down`), and `status.phase` is `Running` (virt-handler syncs the network
/// of running VMIs only, and the domain runs).
///
/// # Errors
/// Input error naming the field: no such interface, another state, or an
/// interface that is `absent`.
pub fn set_link_state(vmi: &mut Value, name: &str, state: &str) -> Result<(), LauncherError> {
    if state != "up" && state != "down" {
        return Err(LauncherError::input_at(
            "--state",
            format!("{state:?} is not one of up, down"),
        ));
    }
    let ifaces = array(vmi, &["spec", "domain", "devices", "interfaces"]);
    let Some((i, iface)) = ifaces.iter_mut().enumerate().find(|(_, i)| named(i, name)) else {
        return Err(LauncherError::input_at(
            "spec.domain.devices.interfaces",
            format!("the VMI has no interface {name:?}"),
        ));
    };
    if iface["state"] == "absent" {
        return Err(LauncherError::input_at(
            format!("spec.domain.devices.interfaces[{i}].state"),
            "the interface is absent",
        ));
    }
    iface["state"] = json!(state);
    vmi["status"]["phase"] = json!("Running");
    Ok(())
}

/// A VM's LiveUpdate of its guest memory as virt-controller hands it to
/// the VMI (`handleMemoryHotplugRequest`, `pkg/virt-controller/watch/vm/
/// vm.go`): `spec.domain.memory.guest` becomes `size`, the memory request
/// grows by the same amount (never below the new guest memory) and
/// `status.memory.guestRequested` follows. Where virt-controller would mark
/// the VM "restart required" instead, the stand-in refuses with its reason.
///
/// # Errors
/// Input error naming `spec.domain.memory.guest`.
pub fn set_guest_memory(vmi: &mut Value, size: &str) -> Result<(), LauncherError> {
    use api::quantity::Quantity;
    let field = "spec.domain.memory.guest";
    let bad = |m: String| LauncherError::input_at(field, m);
    let bytes = |q: &str| -> Option<u64> { Quantity::parse(q).ok()?.to_bytes().ok() };
    let new = Quantity::parse(size)
        .map_err(|e| bad(format!("'{size}': {e}")))
        .and_then(|q| {
            q.to_bytes()
                .map(|b| (q, b))
                .map_err(|e| bad(format!("'{size}': {e}")))
        })?;
    let (new_q, new_b) = new;
    let mem = &vmi["spec"]["domain"]["memory"];
    let Some(max) = mem["maxGuest"].as_str().and_then(bytes) else {
        return Err(bad("memory updated in template spec. Memory-hotplug is not available for this VM configuration (the VMI has no spec.domain.memory.maxGuest: run it with --vm-rollout-strategy LiveUpdate and at least 1Gi of guest memory)".into()));
    };
    let block = serde_json::from_value::<api::vmi::Memory>(mem.clone())
        .map(|m| api::cluster::memory_hotplug_block(&m))
        .map_err(|e| LauncherError::input_at("spec.domain.memory", e.to_string()))?;
    if new_b % block != 0 {
        return Err(bad(format!(
            "memory hotplug not supported, Guest memory must be {} aligned",
            Quantity::binary_si(block)
        )));
    }
    let status = &vmi["status"]["memory"];
    if status["guestAtBoot"]
        .as_str()
        .and_then(bytes)
        .is_some_and(|boot| new_b < boot)
    {
        return Err(bad(
            "memory updated in template spec to a value lower than what the VM started with".into(),
        ));
    }
    if new_b > max {
        return Err(bad(
            "memory updated in template spec to a value higher than what's available".into(),
        ));
    }
    let current = status["guestCurrent"].as_str().and_then(bytes);
    let request = vmi["spec"]["domain"]["resources"]["requests"]["memory"]
        .as_str()
        .and_then(bytes);
    if let (Some(req), Some(cur)) = (request.filter(|r| *r != 0), current) {
        let grown = (i128::from(req) + i128::from(new_b) - i128::from(cur)).max(i128::from(new_b));
        let grown = u64::try_from(grown).unwrap_or(new_b);
        vmi["spec"]["domain"]["resources"]["requests"]["memory"] =
            json!(Quantity::binary_si(grown));
    }
    vmi["spec"]["domain"]["memory"]["guest"] = json!(new_q.as_str());
    vmi["status"]["memory"]["guestRequested"] = json!(new_q.as_str());
    Ok(())
}

/// What virt-handler copies from the domain after a memory hot-plug
/// (`updateMemoryInfo`): `status.memory.guestCurrent` ← the domain's
/// `CurrentMemory` (api.Domain JSON), as a binary quantity. Returns it.
pub fn record_current_memory(vmi: &mut Value, domain: &Value) -> Option<String> {
    let cur = &domain["Spec"]["CurrentMemory"];
    let value = cur["Value"].as_u64()?;
    let unit = cur["Unit"].as_str()?;
    let bytes = domain::MemoryValue {
        unit: unit.to_owned(),
        value,
    }
    .bytes()?;
    let q = api::quantity::Quantity::binary_si(bytes);
    vmi["status"]["memory"]["guestCurrent"] = json!(q);
    Some(q)
}

#[cfg(test)]
mod tests {
    use super::super::volumes::tests::vmi;
    use super::*;

    #[test]
    fn sockets_within_max_sockets() {
        let mut v = vmi();
        let e = set_sockets(&mut v, 2).unwrap_err().to_string();
        assert!(
            e.contains("spec.domain.cpu.sockets: the VMI has no spec.domain.cpu.maxSockets"),
            "{e}"
        );
        v["spec"]["domain"]["cpu"] = json!({"sockets": 1, "maxSockets": 4});
        set_sockets(&mut v, 3).unwrap();
        assert_eq!(v["spec"]["domain"]["cpu"]["sockets"], 3);
        let e = set_sockets(&mut v, 5).unwrap_err().to_string();
        assert!(e.ends_with("spec.domain.cpu.sockets: Number of sockets in CPU topology is greater than the maximum sockets allowed"), "{e}");
        assert!(set_sockets(&mut v, 0).is_err());
        assert_eq!(v["spec"]["domain"]["cpu"]["sockets"], 3);
    }

    #[test]
    fn guest_memory_within_max_guest_as_virt_controller_hands_it_on() {
        let mut v = vmi();
        let e = set_guest_memory(&mut v, "2Gi").unwrap_err().to_string();
        assert!(e.contains("spec.domain.memory.guest: memory updated in template spec. Memory-hotplug is not available for this VM configuration"), "{e}");
        v["spec"]["domain"]["memory"] = json!({"guest": "1Gi", "maxGuest": "4Gi"});
        v["spec"]["domain"]["resources"] = json!({"requests": {"memory": "1Gi"}});
        v["status"]["memory"] =
            json!({"guestAtBoot": "1Gi", "guestCurrent": "1Gi", "guestRequested": "1Gi"});
        for (size, want) in [
            (
                "5Gi",
                "memory updated in template spec to a value higher than what's available",
            ),
            (
                "512Mi",
                "memory updated in template spec to a value lower than what the VM started with",
            ),
            (
                "1025Mi",
                "memory hotplug not supported, Guest memory must be 2Mi aligned",
            ),
            ("lots", "spec.domain.memory.guest: 'lots'"),
        ] {
            let e = set_guest_memory(&mut v, size).unwrap_err().to_string();
            assert!(e.contains(want), "{size}: {e}");
        }
        set_guest_memory(&mut v, "2Gi").unwrap();
        assert_eq!(v["spec"]["domain"]["memory"]["guest"], "2Gi");
        assert_eq!(
            v["spec"]["domain"]["resources"]["requests"]["memory"],
            "2Gi"
        );
        assert_eq!(v["status"]["memory"]["guestRequested"], "2Gi");
        let d = json!({"Spec": {"CurrentMemory": {"Value": 2097152, "Unit": "KiB"}}});
        assert_eq!(record_current_memory(&mut v, &d).as_deref(), Some("2Gi"));
        assert_eq!(v["status"]["memory"]["guestCurrent"], "2Gi");
    }

    #[test]
    fn link_state_of_an_interface() {
        let mut v = vmi();
        v["spec"]["domain"]["devices"]["interfaces"] = json!([{"name": "default", "bridge": {}}]);
        set_link_state(&mut v, "default", "down").unwrap();
        assert_eq!(
            v["spec"]["domain"]["devices"]["interfaces"][0]["state"],
            "down"
        );
        assert_eq!(v["status"]["phase"], "Running");
        let e = set_link_state(&mut v, "default", "absent")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--state: \"absent\" is not one of up, down"),
            "{e}"
        );
        let e = set_link_state(&mut v, "nic9", "up")
            .unwrap_err()
            .to_string();
        assert!(e.contains("the VMI has no interface \"nic9\""), "{e}");
    }
}
