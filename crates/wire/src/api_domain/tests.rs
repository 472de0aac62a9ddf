//! The api.Domain encoder against live libvirt XML: Go's key sets, zero
//! values and nulls, the runtime metadata and the agent's status.

use super::devices::alias_json;
use super::*;
use domain::Alias;

/// Live XML in the shape libvirt 11 returns (`virDomainGetXMLDesc(0)`)
/// for a running KubeVirt domain under TCG.
const LIVE_XML: &str = include_str!("../../tests/golden/libvirt-live.xml");

fn running() -> DomainStatus {
    DomainStatus {
        status: "Running".into(),
        reason: "Unknown".into(),
        ..DomainStatus::default()
    }
}

fn meta() -> ObjectMeta {
    ObjectMeta {
        name: "vm1".into(),
        namespace: "ns1".into(),
        uid: "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77".into(),
        deletion_timestamp: None,
    }
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    k.sort_unstable();
    k
}

#[test]
fn live_xml_gives_the_values_virt_handler_reads() {
    let d = Domain::from_xml(LIVE_XML).unwrap();
    let j = domain_json(&meta(), Some(&d), &running());

    assert_eq!(j["kind"], "Domain");
    assert_eq!(j["apiVersion"], "1.2.2");
    assert_eq!(
        j["ObjectMeta"],
        json!({
            "name": "vm1",
            "namespace": "ns1",
            "uid": "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77",
            "creationTimestamp": null,
        })
    );
    let spec = &j["Spec"];
    assert_eq!(spec["XMLName"], json!({ "Space": "", "Local": "domain" }));
    assert_eq!(spec["Type"], "qemu");
    assert_eq!(spec["XmlNS"], QEMU_XMLNS);
    assert_eq!(spec["Name"], "ns1_vm1");
    assert_eq!(spec["UUID"], "5d307ca9-b3ef-428c-8861-06e72d69f223");
    assert_eq!(spec["Memory"], json!({ "Value": 131072, "Unit": "KiB" }));
    assert_eq!(
        spec["CurrentMemory"],
        json!({ "Value": 131072, "Unit": "KiB" })
    );
    assert_eq!(spec["VCPU"], json!({ "Placement": "static", "CPUs": 1 }));
    assert_eq!(spec["IOThreads"], json!({ "IOThreads": 1 }));
    assert_eq!(
        spec["OS"]["Type"],
        json!({ "OS": "hvm", "Arch": "x86_64", "Machine": "pc-q35-10.0" })
    );
    assert_eq!(spec["OS"]["SMBios"], json!({ "Mode": "sysinfo" }));
    assert_eq!(spec["OS"]["BootOrder"], json!([{ "Dev": "hd" }]));
    assert_eq!(spec["OS"]["BootLoader"], Value::Null);
    assert_eq!(spec["OS"]["Kernel"], "");
    assert_eq!(spec["SysInfo"]["Type"], "smbios");
    assert_eq!(
        spec["SysInfo"]["System"][2],
        json!({ "Name": "uuid", "Value": "5d307ca9-b3ef-428c-8861-06e72d69f223" })
    );
    assert_eq!(spec["SysInfo"]["Chassis"], Value::Null);
    assert_eq!(spec["Features"]["ACPI"], json!({}));
    assert_eq!(spec["Features"]["SMM"], Value::Null);
    assert_eq!(spec["Features"]["VMPort"], json!({ "State": "off" }));
    assert_eq!(spec["CPU"]["Mode"], "custom");
    assert_eq!(spec["CPU"]["Model"], "qemu64");
    assert_eq!(
        spec["CPU"]["Features"][0],
        json!({ "Name": "x2apic", "Policy": "require" })
    );
    assert_eq!(
        spec["CPU"]["Topology"],
        json!({ "Sockets": 1, "Cores": 1, "Threads": 1 })
    );
    assert_eq!(spec["CPU"]["NUMA"], Value::Null);
    assert_eq!(spec["Clock"]["Offset"], "utc");
    assert_eq!(spec["Clock"]["Adjustment"], "reset");
    assert_eq!(
        spec["Clock"]["Timer"][1],
        json!({ "Name": "pit", "TickPolicy": "delay", "Present": "", "Track": "", "Frequency": "" })
    );
    assert_eq!(
        spec["Metadata"],
        json!({ "KubeVirt": {
            "UID": "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77",
            "GracePeriod": {
                "DeletionGracePeriodSeconds": 30,
                "DeletionTimestamp": null,
                "MarkedForGracefulShutdown": null,
            },
            "Migration": null,
            "AccessCredential": null,
            "MemoryDump": null,
        }})
    );

    let dev = &spec["Devices"];
    assert_eq!(dev["Emulator"], "/usr/bin/qemu-system-x86_64");
    assert_eq!(dev["Interfaces"], Value::Null);
    assert_eq!(dev["HostDevices"], Value::Null);
    assert_eq!(dev["Rng"], Value::Null);
    let disk = &dev["Disks"][0];
    assert_eq!(
        disk["Alias"],
        json!({ "Name": "containerdisk", "UserDefined": true })
    );
    assert_eq!(
        disk["Target"],
        json!({ "Bus": "virtio", "Device": "vda", "Tray": "" })
    );
    assert_eq!(disk["Device"], "disk");
    assert_eq!(disk["Type"], "file");
    assert_eq!(disk["Model"], "virtio-non-transitional");
    assert_eq!(
        disk["Source"]["File"],
        "/var/run/kubevirt-ephemeral-disks/disk-data/containerdisk/disk.qcow2"
    );
    assert_eq!(disk["Source"]["Dev"], "");
    assert_eq!(disk["Driver"]["Type"], "qcow2");
    assert_eq!(disk["Driver"]["ErrorPolicy"], "stop");
    assert_eq!(disk["Driver"]["Discard"], "unmap");
    assert_eq!(disk["Driver"]["Queues"], Value::Null);
    assert_eq!(disk["BackingStore"]["Type"], "file");
    assert_eq!(disk["BackingStore"]["Format"], json!({ "Type": "raw" }));
    assert_eq!(
        disk["BackingStore"]["Source"]["File"],
        "/var/run/kubevirt/container-disks/disk_0.img"
    );
    assert_eq!(
        disk["Address"],
        json!({
            "Type": "pci", "Domain": "0x0000", "Bus": "0x03", "Slot": "0x00",
            "Function": "0x0", "Controller": "", "Target": "", "Unit": "",
            "UUID": "", "Device": "", "CSSID": "", "SSID": "", "DevNo": "",
        })
    );
    assert_eq!(disk["ReadOnly"], Value::Null);
    assert_eq!(disk["BootOrder"], Value::Null);
    assert_eq!(disk["Shareable"], Value::Null);
    assert_eq!(disk["ExpandDisksEnabled"], false);
    let cdrom = &dev["Disks"][1];
    assert_eq!(cdrom["ReadOnly"], json!({}));
    assert_eq!(cdrom["Target"]["Tray"], "closed");
    assert_eq!(cdrom["Address"]["Unit"], "0");
    // `<backingStore/>`: a non-nil empty struct, as Go decodes it.
    assert_eq!(
        cdrom["BackingStore"],
        json!({ "Type": "", "Format": null, "Source": null })
    );

    let ctrls = dev["Controllers"].as_array().unwrap();
    assert_eq!(ctrls.len(), 6);
    assert_eq!(
        ctrls[0]["Alias"],
        json!({ "Name": "usb", "UserDefined": false })
    );
    assert_eq!(ctrls[0]["Address"], Value::Null);
    assert_eq!(ctrls[2]["Type"], "virtio-serial");
    assert_eq!(ctrls[2]["Address"]["Bus"], "0x01");
    assert_eq!(ctrls[5]["Model"], "pcie-root-port");
    assert_eq!(ctrls[5]["Index"], "1");

    let chan = &dev["Channels"][0];
    assert_eq!(chan["Target"]["State"], "connected");
    assert_eq!(chan["Target"]["Name"], "org.qemu.guest_agent.0");
    assert_eq!(chan["Target"]["Type"], "virtio");
    assert_eq!(chan["Source"]["Mode"], "bind");

    assert_eq!(dev["Serials"][0]["Target"], json!({ "Port": 0 }));
    assert_eq!(
        dev["Serials"][0]["Alias"],
        json!({ "Name": "serial0", "UserDefined": false })
    );
    assert_eq!(dev["Serials"][0]["Log"]["Append"], "on");
    assert_eq!(
        dev["Consoles"][0]["Target"],
        json!({ "Type": "serial", "Port": 0 })
    );
    assert_eq!(dev["Inputs"][1]["Type"], "keyboard");
    assert_eq!(dev["Inputs"][1]["Bus"], "ps2");
    assert_eq!(
        dev["Graphics"][0]["Listen"]["Socket"],
        "/var/run/kubevirt-private/0b9b7b4c/virt-vnc"
    );
    assert_eq!(dev["Graphics"][0]["Type"], "vnc");
    assert_eq!(
        dev["Video"][0]["Model"],
        json!({ "Type": "vga", "Heads": 1, "Ram": null, "VRam": 16384, "VGAMem": null })
    );
    assert_eq!(dev["Ballooning"]["Stats"], json!({ "Period": 10 }));
    assert_eq!(dev["Ballooning"]["FreePageReporting"], "on");

    assert_eq!(
        j["Status"],
        json!({
            "Status": "Running",
            "Reason": "Unknown",
            "Interfaces": null,
            "OSInfo": {
                "Name": "", "KernelRelease": "", "Version": "", "PrettyName": "",
                "VersionId": "", "KernelVersion": "", "Machine": "", "Id": "",
            },
            "FSFreezeStatus": { "Status": "" },
        })
    );
}

#[test]
fn every_spec_object_has_go_s_key_set() {
    let d = Domain::from_xml(LIVE_XML).unwrap();
    let j = domain_json(&meta(), Some(&d), &running());
    let spec = &j["Spec"];
    assert_eq!(
        keys(spec),
        [
            "CPU",
            "CPUTune",
            "Clock",
            "CurrentMemory",
            "Devices",
            "Features",
            "IOThreads",
            "LaunchSecurity",
            "MaxMemory",
            "Memory",
            "MemoryBacking",
            "Metadata",
            "NUMATune",
            "Name",
            "OS",
            "QEMUCmd",
            "Resource",
            "SysInfo",
            "Type",
            "UUID",
            "VCPU",
            "VCPUs",
            "XMLName",
            "XmlNS",
        ]
    );
    assert_eq!(
        keys(&spec["Devices"]),
        [
            "Ballooning",
            "Channels",
            "Consoles",
            "Controllers",
            "Disks",
            "Emulator",
            "Filesystems",
            "Graphics",
            "HostDevices",
            "Inputs",
            "Interfaces",
            "Memory",
            "PanicDevices",
            "Redirs",
            "Rng",
            "Serials",
            "SoundCards",
            "TPMs",
            "VSOCK",
            "Video",
            "Watchdogs",
        ]
    );
    assert_eq!(
        keys(&spec["Devices"]["Disks"][0]),
        [
            "Address",
            "Alias",
            "Auth",
            "BackingStore",
            "BlockIO",
            "BootOrder",
            "Capacity",
            "Device",
            "Driver",
            "ExpandDisksEnabled",
            "FilesystemOverhead",
            "Model",
            "ReadOnly",
            "Serial",
            "Shareable",
            "Snapshot",
            "Source",
            "Target",
            "Type",
        ]
    );
    assert_eq!(
        keys(&spec["Devices"]["Disks"][0]["Driver"]),
        [
            "Cache",
            "Discard",
            "ErrorPolicy",
            "IO",
            "IOMMU",
            "IOThread",
            "IOThreads",
            "Name",
            "Queues",
            "Type",
        ]
    );
    assert_eq!(
        keys(&spec["Devices"]["Channels"][0]["Target"]),
        ["Address", "Name", "Port", "State", "Type"]
    );
    assert_eq!(
        keys(&spec["OS"]),
        [
            "ACPI",
            "BIOS",
            "BootLoader",
            "BootMenu",
            "BootOrder",
            "Initrd",
            "Kernel",
            "KernelArgs",
            "NVRam",
            "SMBios",
            "Type",
        ]
    );
}

#[test]
fn interfaces_have_go_s_key_set() {
    let xml = LIVE_XML.replace(
        "<devices>",
        "<devices><interface type='ethernet'><mac address='02:00:00:00:00:01'/>\
         <target dev='tap0' managed='no'/><model type='virtio-non-transitional'/>\
         <mtu size='1450'/><alias name='ua-default'/><rom enabled='no'/>\
         <link state='down'/></interface>",
    );
    let d = Domain::from_xml(&xml).unwrap();
    let j = domain_json(&meta(), Some(&d), &running());
    let i = &j["Spec"]["Devices"]["Interfaces"][0];
    assert_eq!(
        keys(i),
        [
            "ACPI",
            "Address",
            "Alias",
            "Backend",
            "BandWidth",
            "BootOrder",
            "Driver",
            "FilterRef",
            "LinkState",
            "MAC",
            "MTU",
            "Model",
            "PortForward",
            "Rom",
            "Source",
            "Target",
            "TrustGuestRxFilters",
            "Type",
        ]
    );
    assert_eq!(i["MAC"], json!({ "MAC": "02:00:00:00:00:01" }));
    assert_eq!(i["Target"], json!({ "Device": "tap0", "Managed": "no" }));
    assert_eq!(i["MTU"], json!({ "Size": "1450" }));
    assert_eq!(
        i["Alias"],
        json!({ "Name": "default", "UserDefined": true })
    );
    assert_eq!(i["LinkState"], json!({ "State": "down" }));
    assert_eq!(i["Rom"], json!({ "Enabled": "no" }));
}

/// An SR-IOV hostdev as libvirt writes it back (source address without
/// `type`, `mode` filled in) reads into the model and gives KubeVirt's
/// `api.HostDevice` keys and values.
#[test]
fn sriov_hostdevs_have_go_s_key_set() {
    let xml = LIVE_XML.replace(
        "<devices>",
        "<devices><hostdev mode='subsystem' type='pci' managed='no'>\
         <source><address domain='0x0000' bus='0x81' slot='0x11' function='0x1'/></source>\
         <alias name='ua-sriov-sriov-net'/><boot order='2'/>\
         <address type='pci' domain='0x0000' bus='0x07' slot='0x00' function='0x0'/></hostdev>",
    );
    let d = Domain::from_xml(&xml).unwrap();
    assert_eq!(d.devices.hostdev.len(), 1);
    let j = domain_json(&meta(), Some(&d), &running());
    let h = &j["Spec"]["Devices"]["HostDevices"][0];
    assert_eq!(
        keys(h),
        [
            "Address",
            "Alias",
            "BootOrder",
            "Display",
            "Managed",
            "Mode",
            "Model",
            "RamFB",
            "Source",
            "Type",
            "XMLName",
        ]
    );
    assert_eq!(h["XMLName"], json!({ "Space": "", "Local": "hostdev" }));
    assert_eq!(h["Type"], "pci");
    assert_eq!(h["Managed"], "no");
    assert_eq!(h["Mode"], "subsystem");
    assert_eq!(h["Model"], "");
    assert_eq!(h["Display"], "");
    assert_eq!(h["BootOrder"], json!({ "Order": 2 }));
    assert_eq!(
        h["Alias"],
        json!({ "Name": "sriov-sriov-net", "UserDefined": true })
    );
    let src = &h["Source"]["Address"];
    assert_eq!(src["Type"], "");
    assert_eq!(
        [&src["Domain"], &src["Bus"], &src["Slot"], &src["Function"]],
        ["0x0000", "0x81", "0x11", "0x1"]
    );
    assert_eq!(h["Address"]["Type"], "pci");
    assert_eq!(h["Address"]["Bus"], "0x07");
    // Without host devices the list is Go's nil slice.
    let plain = domain_json(
        &meta(),
        Some(&Domain::from_xml(LIVE_XML).unwrap()),
        &running(),
    );
    assert_eq!(plain["Spec"]["Devices"]["HostDevices"], Value::Null);
}

/// The passt binding's interface: `Source.Device`, `Backend` and
/// `PortForward` in Go's names and zero values.
#[test]
fn passt_interface_has_backend_and_port_forwards() {
    let xml = LIVE_XML.replace(
        "<devices>",
        "<devices><interface type='user'><source dev='eth0'/>\
         <mac address='02:00:00:00:00:01'/><model type='virtio-non-transitional'/>\
         <backend type='passt' logFile='/var/run/kubevirt/passt.log'/>\
         <portForward proto='tcp' dev='eth0'><range start='15000' exclude='yes'/>\
         <range start='8080'/></portForward><portForward proto='udp' dev='eth0'/>\
         <alias name='ua-default'/></interface>",
    );
    let d = Domain::from_xml(&xml).unwrap();
    let j = domain_json(&meta(), Some(&d), &running());
    let i = &j["Spec"]["Devices"]["Interfaces"][0];
    assert_eq!(i["Type"], "user");
    assert_eq!(i["Source"]["Device"], "eth0");
    assert_eq!(i["Target"], Value::Null);
    assert_eq!(
        i["Backend"],
        json!({ "Type": "passt", "LogFile": "/var/run/kubevirt/passt.log" })
    );
    assert_eq!(
        i["PortForward"],
        json!([
            { "Proto": "tcp", "Address": "", "Dev": "eth0", "Ranges": [
                { "Start": 15000, "End": 0, "To": 0, "Exclude": "yes" },
                { "Start": 8080, "End": 0, "To": 0, "Exclude": "" },
            ] },
            { "Proto": "udp", "Address": "", "Dev": "eth0", "Ranges": null },
        ])
    );
}

#[test]
fn alias_prefix_is_stripped_only_for_user_aliases() {
    let user = alias_json(&Alias::user("root"));
    assert_eq!(user, json!({ "Name": "root", "UserDefined": true }));
    let libvirt = alias_json(&Alias {
        name: "virtio-disk0".into(),
    });
    assert_eq!(
        libvirt,
        json!({ "Name": "virtio-disk0", "UserDefined": false })
    );
}

#[test]
fn final_delete_event_has_the_zero_spec() {
    let m = ObjectMeta {
        deletion_timestamp: Some("2025-01-01T00:00:00Z".into()),
        ..meta()
    };
    let status = DomainStatus {
        status: "NoState".into(),
        reason: "NonExistent".into(),
        ..DomainStatus::default()
    };
    let j = domain_json(&m, None, &status);
    assert_eq!(
        keys(&j),
        ["ObjectMeta", "Spec", "Status", "apiVersion", "kind"]
    );
    assert_eq!(j["kind"], "Domain");
    assert_eq!(j["apiVersion"], "1.2.2");
    assert_eq!(
        j["ObjectMeta"],
        json!({
            "name": "vm1",
            "namespace": "ns1",
            "uid": "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77",
            "creationTimestamp": null,
            "deletionTimestamp": "2025-01-01T00:00:00Z",
        })
    );
    let spec = &j["Spec"];
    assert_eq!(spec["XMLName"], json!({ "Space": "", "Local": "" }));
    assert_eq!(spec["Type"], "");
    assert_eq!(spec["XmlNS"], "");
    assert_eq!(spec["Name"], "");
    assert_eq!(spec["UUID"], "");
    assert_eq!(spec["Memory"], json!({ "Value": 0, "Unit": "" }));
    assert_eq!(spec["CurrentMemory"], Value::Null);
    assert_eq!(spec["VCPU"], Value::Null);
    assert_eq!(spec["Features"], Value::Null);
    assert_eq!(spec["Clock"], Value::Null);
    assert_eq!(spec["SysInfo"], Value::Null);
    assert_eq!(
        spec["CPU"],
        json!({ "Mode": "", "Model": "", "Features": null, "Topology": null, "NUMA": null })
    );
    assert_eq!(
        spec["OS"]["Type"],
        json!({ "OS": "", "Arch": "", "Machine": "" })
    );
    assert_eq!(spec["OS"]["BootOrder"], Value::Null);
    assert_eq!(
        spec["Metadata"],
        json!({ "KubeVirt": {
            "UID": "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77",
            "GracePeriod": null,
            "Migration": null,
            "AccessCredential": null,
            "MemoryDump": null,
        }})
    );
    let dev = &spec["Devices"];
    assert_eq!(dev["Emulator"], "");
    for (k, v) in dev.as_object().unwrap() {
        if k != "Emulator" {
            assert_eq!(v, &Value::Null, "Devices.{k}");
        }
    }
    assert_eq!(j["Status"]["Status"], "NoState");
    assert_eq!(j["Status"]["Reason"], "NonExistent");
    assert_eq!(j["Status"]["Interfaces"], Value::Null);
    assert_eq!(keys(&j["Status"]["OSInfo"]).len(), 8);
    assert_eq!(j["Status"]["FSFreezeStatus"], json!({ "Status": "" }));
}

#[test]
fn empty_identity_fields_are_omitted() {
    // GetDomain: ObjectMeta.uid empty, Spec.Metadata.KubeVirt.UID from the XML.
    let d = Domain::from_xml(LIVE_XML).unwrap();
    let m = ObjectMeta {
        uid: String::new(),
        ..meta()
    };
    let j = domain_json(&m, Some(&d), &running());
    assert_eq!(
        j["ObjectMeta"],
        json!({ "name": "vm1", "namespace": "ns1", "creationTimestamp": null })
    );
    assert_eq!(
        j["Spec"]["Metadata"]["KubeVirt"]["UID"],
        "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77"
    );
}

#[test]
fn runtime_metadata_overrides_the_xml() {
    let d = Domain::from_xml(LIVE_XML).unwrap();
    let runtime = RuntimeMetadata {
        uid: Some("cache-uid".into()),
        grace_period: Some(GracePeriod {
            deletion_grace_period_seconds: 5,
            deletion_timestamp: Some("2025-01-01T00:00:00Z".into()),
            marked_for_graceful_shutdown: Some(true),
        }),
        migration: Some(MigrationMetadata {
            uid: "mig".into(),
            start_timestamp: Some("2025-01-01T00:00:01Z".into()),
            mode: "PreCopy".into(),
            ..MigrationMetadata::default()
        }),
        access_credential: Some(AccessCredentialMetadata {
            succeeded: true,
            message: "ok".into(),
        }),
        memory_dump: None,
        backup: None,
    };
    let j = domain_json_with_metadata(&meta(), Some(&d), &running(), &runtime);
    assert_eq!(
        j["Spec"]["Metadata"]["KubeVirt"],
        json!({
            "UID": "cache-uid",
            "GracePeriod": {
                "DeletionGracePeriodSeconds": 5,
                "DeletionTimestamp": "2025-01-01T00:00:00Z",
                "MarkedForGracefulShutdown": true,
            },
            "Migration": {
                "UID": "mig",
                "StartTimestamp": "2025-01-01T00:00:01Z",
                "EndTimestamp": null,
                "Failed": false,
                "FailureReason": "",
                "AbortStatus": "",
                "Mode": "PreCopy",
            },
            "AccessCredential": { "Succeeded": true, "Message": "ok" },
            "MemoryDump": null,
        })
    );
}

/// KubeVirt main's `api.BackupMetadata` under `Backup` (Go field names,
/// `null` times), written once a backup ran; and a tracked disk's
/// `DataStore` (`{Type, Format{Type}, Source}`), which virt-handler reads
/// before it enables changed block tracking.
#[test]
fn backup_metadata_and_data_store_as_kubevirt_main() {
    let runtime = RuntimeMetadata {
        backup: Some(BackupMetadata {
            name: "b1".into(),
            mode: "Push".into(),
            start_timestamp: Some("2025-01-01T00:00:01Z".into()),
            checkpoint_name: "b1-2025-01-01_00-00-01".into(),
            volumes: r#"[{"volumeName":"data"}]"#.into(),
            quiesce_status: "Skipped".into(),
            skip_quiesce: true,
            ..BackupMetadata::default()
        }),
        ..RuntimeMetadata::default()
    };
    let j = domain_json_with_metadata(&meta(), None, &running(), &runtime);
    assert_eq!(
        j["Spec"]["Metadata"]["KubeVirt"]["Backup"],
        json!({
            "Name": "b1", "Mode": "Push", "SkipQuiesce": true,
            "StartTimestamp": "2025-01-01T00:00:01Z", "EndTimestamp": null,
            "Completed": false, "Failed": false, "BackupMsg": "",
            "CheckpointName": "b1-2025-01-01_00-00-01",
            "Volumes": "[{\"volumeName\":\"data\"}]", "QuiesceStatus": "Skipped",
        })
    );
    let j = domain_json_with_metadata(&meta(), None, &running(), &RuntimeMetadata::default());
    assert!(j["Spec"]["Metadata"]["KubeVirt"].get("Backup").is_none());

    let xml = LIVE_XML.replacen(
        "<disk ",
        "<disk type='file' device='disk'>\
        <driver name='qemu' type='qcow2'/><source file='/cbt/data.qcow2'><dataStore type='file'>\
        <format type='raw'/><source file='/d/disk.img'/></dataStore></source>\
        <target dev='vdz' bus='virtio'/><alias name='ua-data'/></disk><disk ",
        1,
    );
    let d = Domain::from_xml(&xml).unwrap();
    let j = domain_json(&meta(), Some(&d), &running());
    let src = &j["Spec"]["Devices"]["Disks"][0]["Source"];
    assert_eq!(src["File"], "/cbt/data.qcow2");
    assert_eq!(src["DataStore"]["Type"], "file");
    assert_eq!(src["DataStore"]["Format"], json!({"Type": "raw"}));
    assert_eq!(src["DataStore"]["Source"]["File"], "/d/disk.img");
    assert!(src["DataStore"]["Source"].get("DataStore").is_none());
}

#[test]
fn agent_status_is_normalised_to_go_names() {
    let status = DomainStatus {
        interfaces: Some(vec![
            json!({ "Mac": "02:00:00:00:00:01", "Ip": "10.0.2.2", "IPs": ["10.0.2.2", "fd10::2"], "InterfaceName": "eth0" }),
            json!({ "mac": "02:00:00:00:00:02", "ipAddress": "10.1.0.5", "ipAddresses": ["10.1.0.5"], "interfaceName": "eth1" }),
        ]),
        os_info: Some(json!({ "name": "Fedora Linux", "Id": "fedora", "versionId": "41" })),
        fs_freeze_status: "frozen".into(),
        ..running()
    };
    let j = domain_json(&meta(), None, &status);
    assert_eq!(
        j["Status"]["Interfaces"],
        json!([
            { "Mac": "02:00:00:00:00:01", "Ip": "10.0.2.2", "IPs": ["10.0.2.2", "fd10::2"], "InterfaceName": "eth0" },
            { "Mac": "02:00:00:00:00:02", "Ip": "10.1.0.5", "IPs": ["10.1.0.5"], "InterfaceName": "eth1" },
        ])
    );
    assert_eq!(j["Status"]["OSInfo"]["Name"], "Fedora Linux");
    assert_eq!(j["Status"]["OSInfo"]["Id"], "fedora");
    assert_eq!(j["Status"]["OSInfo"]["VersionId"], "41");
    assert_eq!(j["Status"]["OSInfo"]["Machine"], "");
    assert_eq!(j["Status"]["FSFreezeStatus"]["Status"], "frozen");

    let empty = DomainStatus {
        interfaces: Some(Vec::new()),
        ..running()
    };
    assert_eq!(
        domain_json(&meta(), None, &empty)["Status"]["Interfaces"],
        Value::Null
    );
}

#[test]
fn a_full_domain_serialises_to_valid_json() {
    let mut d = Domain::from_xml(LIVE_XML).unwrap();
    // Exercise the optional parts the live XML above lacks.
    d.os.loader = Some(domain::Loader {
        readonly: Some("yes".into()),
        secure: Some("no".into()),
        loader_type: Some("pflash".into()),
        path: "/usr/share/OVMF/OVMF_CODE.fd".into(),
    });
    d.os.nvram = Some(domain::Nvram {
        template: Some("/usr/share/OVMF/OVMF_VARS.fd".into()),
        path: "/var/run/kubevirt-private/libvirt/qemu/nvram/vm1_VARS.fd".into(),
    });
    d.os.cmdline = Some("console=ttyS0 \"quoted\" \\ back".into());
    d.devices.rng.push(domain::Rng {
        model: "virtio-non-transitional".into(),
        backend: domain::RngBackend {
            model: "random".into(),
            source: "/dev/urandom".into(),
        },
    });
    d.devices.disk[0].boot = Some(domain::BootOrder { order: 1 });
    d.devices.disk[0].shareable = Some(domain::Empty {});
    d.name = "ns_\u{1}weird\"name\u{2028}".into();
    let j = domain_json(&meta(), Some(&d), &running());
    let text = serde_json::to_string(&j).unwrap();
    let back: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back, j);
    assert_eq!(back["Spec"]["Name"], "ns_\u{1}weird\"name\u{2028}");
    assert_eq!(
        back["Spec"]["Devices"]["Rng"]["Backend"]["Source"],
        "/dev/urandom"
    );
    assert_eq!(
        back["Spec"]["Devices"]["Disks"][0]["BootOrder"],
        json!({ "Order": 1 })
    );
    assert_eq!(back["Spec"]["Devices"]["Disks"][0]["Shareable"], json!({}));
    assert_eq!(back["Spec"]["OS"]["BootLoader"]["Type"], "pflash");
    assert_eq!(
        back["Spec"]["OS"]["NVRam"]["Template"],
        "/usr/share/OVMF/OVMF_VARS.fd"
    );
    assert!(serde_json::to_string(&domain_json(&meta(), None, &running())).is_ok());
}

#[test]
fn converter_style_xml_round_trips_unchanged_with_the_new_fields() {
    // The fields added for the live XML are `None`/empty by default and
    // must not appear in generated XML.
    let d = Domain::from_xml(LIVE_XML).unwrap();
    let xml = d.to_xml().unwrap();
    let again = Domain::from_xml(&xml).unwrap();
    assert_eq!(again, d);
    let plain = Domain::default().to_xml().unwrap();
    for absent in [
        "<boot ",
        "<numa",
        "iothread=",
        "iommu=",
        "cssid=",
        "<driver",
    ] {
        assert!(!plain.contains(absent), "{absent} in {plain}");
    }
}
