//! Volumes in the VMI: virt-api's checks and virt-controller's changes of
//! `addvolume` / `removevolume`, and what virt-handler records once the
//! domain has (or no longer has) the disk.

use serde_json::{json, Value};

use crate::error::LauncherError;

/// The attachment pod name the stand-in records (virt-controller's
/// `hp-volume-<random>`).
const ATTACH_POD: &str = "hp-volume-standalone";

/// A hot-plug bus: KubeVirt hot-plugs disks on scsi and virtio only.
pub fn check_bus(volume: &str, bus: &str) -> Result<(), LauncherError> {
    if bus == "scsi" || bus == "virtio" {
        return Ok(());
    }
    Err(LauncherError::input_at(
        "--bus",
        format!("Hotplug configuration for disk [{volume}] requires bus to be 'scsi' or 'virtio'. [{bus}] is not permitted."),
    ))
}

pub(super) fn array<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Vec<Value> {
    let mut cur = v;
    for key in path {
        if !cur.is_object() {
            *cur = json!({});
        }
        cur = cur
            .as_object_mut()
            .map(|m| m.entry(*key).or_insert(Value::Null))
            .unwrap_or_else(|| unreachable!("made an object above"));
    }
    if !cur.is_array() {
        *cur = json!([]);
    }
    match cur {
        Value::Array(a) => a,
        _ => unreachable!("made an array above"),
    }
}

pub(super) fn named(v: &Value, name: &str) -> bool {
    v.get("name").and_then(Value::as_str) == Some(name)
}

/// virt-api's `addvolume` checks and virt-controller's change: volume
/// `name` (a hot-pluggable claim of the same name) with a disk on `bus`
/// and an optional `serial`, and its `volumeStatus` entry in phase
/// `MountedToPod` (virt-handler mounted it).
///
/// # Errors
/// virt-api's refusals (see the module docs).
pub fn add_volume(
    vmi: &mut Value,
    name: &str,
    bus: &str,
    serial: Option<&str>,
) -> Result<(), LauncherError> {
    let inject = is_cdrom(vmi, name);
    if !inject {
        check_bus(name, bus)?;
    }
    api::names::dns1123_label(name)
        .map_err(|e| LauncherError::input_at("addvolume NAME", e.to_string()))?;
    let volumes = array(vmi, &["spec", "volumes"]);
    if volumes.iter().any(|v| named(v, name)) {
        return Err(LauncherError::input(format!(
            "Unable to add volume [{name}] because volume with that name already exists"
        )));
    }
    volumes.push(
        json!({"name": name, "persistentVolumeClaim": {"claimName": name, "hotpluggable": true}}),
    );
    if !inject {
        let mut disk = json!({"name": name, "disk": {"bus": bus}});
        if let Some(s) = serial {
            disk["serial"] = json!(s);
        }
        array(vmi, &["spec", "domain", "devices", "disks"]).push(disk);
    }
    let statuses = array(vmi, &["status", "volumeStatus"]);
    statuses.retain(|s| !named(s, name));
    statuses.push(json!({
        "name": name,
        "target": "",
        "phase": api::hotplug::PHASE_MOUNTED_TO_POD,
        "reason": "VolumeMountedToPod",
        "message": format!("Volume {name} has been mounted in virt-launcher pod"),
        "hotplugVolume": {"attachPodName": ATTACH_POD},
    }));
    Ok(())
}

/// virt-api's `removevolume` checks and virt-controller's change: volume
/// `name` and its disk leave the spec (its status entry stays until the
/// domain no longer has the disk, [`forget_volume`]).
///
/// # Errors
/// virt-api's refusals: no such volume, or one that is not hot-pluggable.
pub fn remove_volume(vmi: &mut Value, name: &str) -> Result<(), LauncherError> {
    let volumes = array(vmi, &["spec", "volumes"]);
    let Some(i) = volumes.iter().position(|v| named(v, name)) else {
        return Err(LauncherError::input(format!(
            "Unable to remove volume [{name}] because it does not exist"
        )));
    };
    let hotpluggable = ["persistentVolumeClaim", "dataVolume"]
        .iter()
        .any(|k| volumes[i][k]["hotpluggable"] == true);
    if !hotpluggable {
        return Err(LauncherError::input(format!(
            "Unable to remove volume [{name}] because it is not hotpluggable"
        )));
    }
    volumes.remove(i);
    if !is_cdrom(vmi, name) {
        array(vmi, &["spec", "domain", "devices", "disks"]).retain(|d| !named(d, name));
    }
    Ok(())
}

/// Whether the VMI's disk `name` is a CD-ROM drive. With KubeVirt's
/// `DeclarativeHotplugVolumes` a drive may have no volume (an empty tray):
/// adding a hot-pluggable volume of its name inserts a medium, removing
/// the volume ejects it; the drive stays in the spec either way.
pub fn is_cdrom(vmi: &Value, name: &str) -> bool {
    vmi["spec"]["domain"]["devices"]["disks"]
        .as_array()
        .is_some_and(|ds| {
            ds.iter()
                .any(|d| named(d, name) && d.get("cdrom").is_some())
        })
}

/// The domain's disk of volume `name` (KubeVirt's api.Domain JSON): its
/// target name, `None` when the domain has none. A CD-ROM drive counts
/// only with a medium in it (`Source.File` or `Source.Dev`).
pub fn domain_target(domain: &Value, name: &str) -> Option<String> {
    domain["Spec"]["Devices"]["Disks"]
        .as_array()?
        .iter()
        .find(|d| d["Alias"]["Name"] == name)
        .filter(|d| {
            d["Device"] != "cdrom"
                || ["File", "Dev"]
                    .iter()
                    .any(|k| d["Source"][k].as_str().is_some_and(|p| !p.is_empty()))
        })
        .and_then(|d| d["Target"]["Device"].as_str())
        .map(str::to_owned)
}

/// Records what virt-handler reports once the domain has the disk: phase
/// `Ready` and its `target`.
pub fn mark_ready(vmi: &mut Value, name: &str, target: &str) {
    for s in array(vmi, &["status", "volumeStatus"]) {
        if named(s, name) {
            s["phase"] = json!(api::hotplug::PHASE_READY);
            s["reason"] = json!("VolumeReady");
            s["message"] = json!(format!(
                "Successfully attach hotplugged volume {name} to VM"
            ));
            s["target"] = json!(target);
        }
    }
}

/// Drops the status entry of the removed volume `name`.
pub fn forget_volume(vmi: &mut Value, name: &str) {
    array(vmi, &["status", "volumeStatus"]).retain(|s| !named(s, name));
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::standalone::hotplug) fn vmi() -> Value {
        json!({
            "metadata": {"name": "a", "uid": "u"},
            "spec": {"domain": {"devices": {"disks": [{"name": "boot", "disk": {"bus": "virtio"}}]}},
                     "volumes": [{"name": "boot", "containerDisk": {"image": "x"}}]},
            "status": {"volumeStatus": [{"name": "boot", "target": "vda"}]}
        })
    }

    /// The changed VMI is admitted by the launcher's own rule
    /// ([`crate::standalone::hotplug::admit`]): a serial KubeVirt's webhook
    /// refuses is refused, the field named, as input.
    #[test]
    fn a_serial_the_launcher_refuses_is_refused_at_admission() {
        let mut v = vmi();
        add_volume(&mut v, "hp", "virtio", Some("HP-1.a_b+c")).unwrap();
        crate::standalone::hotplug::admit(&v).unwrap();
        let mut v = vmi();
        add_volume(&mut v, "hp", "virtio", Some(&"S".repeat(5000))).unwrap();
        let e = crate::standalone::hotplug::admit(&v).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "spec.domain.devices.disks[1].serial: must have at most 256 characters, not 5000"
        );
        let mut v = vmi();
        add_volume(&mut v, "hp", "virtio", Some("S".repeat(256).as_str())).unwrap();
        crate::standalone::hotplug::admit(&v).unwrap();
        let mut v = vmi();
        add_volume(&mut v, "hp", "virtio", Some("a/b")).unwrap();
        let e = crate::standalone::hotplug::admit(&v).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("spec.domain.devices.disks[1].serial")
        );
    }

    #[test]
    fn add_then_ready_then_remove() {
        let mut v = vmi();
        add_volume(&mut v, "hp", "scsi", Some("S1")).unwrap();
        assert_eq!(
            v["spec"]["volumes"][1],
            json!({"name": "hp", "persistentVolumeClaim": {"claimName": "hp", "hotpluggable": true}})
        );
        assert_eq!(
            v["spec"]["domain"]["devices"]["disks"][1],
            json!({"name": "hp", "disk": {"bus": "scsi"}, "serial": "S1"})
        );
        let st = &v["status"]["volumeStatus"][1];
        assert_eq!(st["phase"], "MountedToPod");
        assert_eq!(st["hotplugVolume"]["attachPodName"], ATTACH_POD);
        // What the launcher reads from it.
        let parsed: api::VirtualMachineInstance = serde_json::from_value(v.clone()).unwrap();
        let s = api::hotplug::VolumeStatuses::of(&parsed);
        assert!(s.is_hotplug("hp") && s.disk_wanted("hp") && s.disk_wanted("boot"));
        mark_ready(&mut v, "hp", "sda");
        assert_eq!(v["status"]["volumeStatus"][1]["phase"], "Ready");
        assert_eq!(v["status"]["volumeStatus"][1]["target"], "sda");
        remove_volume(&mut v, "hp").unwrap();
        assert_eq!(v["spec"]["volumes"].as_array().unwrap().len(), 1);
        assert_eq!(
            v["spec"]["domain"]["devices"]["disks"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        forget_volume(&mut v, "hp");
        assert_eq!(
            v["status"]["volumeStatus"],
            json!([{"name": "boot", "target": "vda"}])
        );
    }

    #[test]
    fn a_cdrom_drive_gets_and_loses_its_medium_and_stays() {
        let mut v = vmi();
        v["spec"]["domain"]["devices"]["disks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "cd", "cdrom": {"bus": "sata"}}));
        let disks = v["spec"]["domain"]["devices"]["disks"].clone();
        add_volume(&mut v, "cd", "scsi", None).unwrap();
        assert_eq!(v["spec"]["domain"]["devices"]["disks"], disks);
        assert_eq!(v["spec"]["volumes"][1]["name"], "cd");
        assert_eq!(v["status"]["volumeStatus"][1]["phase"], "MountedToPod");
        remove_volume(&mut v, "cd").unwrap();
        assert_eq!(v["spec"]["domain"]["devices"]["disks"], disks);
        assert_eq!(v["spec"]["volumes"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn virt_apis_refusals_in_its_words() {
        let mut v = vmi();
        let e = add_volume(&mut v, "hp", "sata", None)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("--bus: Hotplug configuration for disk [hp] requires bus to be 'scsi' or 'virtio'. [sata] is not permitted."), "{e}");
        let e = add_volume(&mut v, "boot", "virtio", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("Unable to add volume [boot] because volume with that name already exists"),
            "{e}"
        );
        let e = add_volume(&mut v, "Bad_Name", "virtio", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("addvolume NAME: "), "{e}");
        let e = remove_volume(&mut v, "boot").unwrap_err().to_string();
        assert!(
            e.ends_with("Unable to remove volume [boot] because it is not hotpluggable"),
            "{e}"
        );
        let e = remove_volume(&mut v, "nope").unwrap_err().to_string();
        assert!(
            e.ends_with("Unable to remove volume [nope] because it does not exist"),
            "{e}"
        );
        assert_eq!(v, vmi(), "a refused request changes nothing");
    }

    #[test]
    fn the_domains_target_of_a_volume() {
        let d = json!({"Spec": {"Devices": {"Disks": [
            {"Alias": {"Name": "boot", "UserDefined": true}, "Target": {"Device": "vda"}},
            {"Alias": {"Name": "hp", "UserDefined": true}, "Target": {"Device": "sda"}}]}}});
        assert_eq!(domain_target(&d, "hp").as_deref(), Some("sda"));
        let cd = |file: &str| {
            json!({"Spec": {"Devices": {"Disks": [
            {"Alias": {"Name": "cd"}, "Device": "cdrom", "Target": {"Device": "sdb"}, "Source": {"File": file, "Dev": ""}}]}}})
        };
        assert_eq!(domain_target(&cd(""), "cd"), None);
        assert_eq!(
            domain_target(&cd("/var/run/kubevirt/hotplug-disks/cd.img"), "cd").as_deref(),
            Some("sdb")
        );
        assert_eq!(domain_target(&d, "x"), None);
    }
}
