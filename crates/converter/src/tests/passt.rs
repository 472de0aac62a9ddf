//! The passt binding plugin's interface (`passt.rs`).

use super::*;

const PASST: &str = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: passt, uid: 0b4c1a4e-0000-4000-8000-000000000002}
spec:
  domain:
    devices:
      interfaces:
      - name: default
        binding: {name: passt}
        macAddress: "02-54-00-AB-CD-EF"
        pciAddress: "0000:00:0a.0"
        acpiIndex: 2
        ports: [{name: http, port: 8080}, {port: 53, protocol: UDP}, {port: 22, protocol: tcp}]
    resources: {requests: {memory: 64Mi}}
  networks: [{name: default, pod: {}}]
"#;

/// The passt binding gives the XML KubeVirt's passt sidecar writes.
#[test]
fn passt_binding_is_the_sidecars_user_interface() {
    let d = conv(PASST, Arch::Amd64).unwrap();
    let xml = d.to_xml().unwrap();
    let start = xml.find("<interface").unwrap();
    let end = xml.find("</interface>").unwrap() + "</interface>".len();
    let one_line: String = xml[start..end].lines().map(str::trim).collect();
    assert_eq!(
        one_line,
        "<interface type=\"user\">\
         <source dev=\"eth0\"/>\
         <mac address=\"02:54:00:ab:cd:ef\"/>\
         <model type=\"virtio-non-transitional\"/>\
         <alias name=\"ua-default\"/>\
         <address type=\"pci\" domain=\"0x0000\" bus=\"0x00\" slot=\"0x0a\" function=\"0x0\"/>\
         <acpi index=\"2\"/>\
         <backend type=\"passt\" logFile=\"/var/run/kubevirt/passt.log\"/>\
         <portForward proto=\"tcp\" dev=\"eth0\"><range start=\"8080\"/><range start=\"22\"/></portForward>\
         <portForward proto=\"udp\" dev=\"eth0\"><range start=\"53\"/></portForward>\
         </interface>"
    );
    // Read back as libvirt would report it.
    assert_eq!(Domain::from_xml(&xml).unwrap(), d);

    // No ports: everything forwarded, TCP and UDP; no MAC, address or
    // index when the spec has none; transitional and other models.
    let plain = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: passt2}
spec:
  domain:
    devices:
      useVirtioTransitional: true
      networkInterfaceMultiqueue: true
      interfaces: [{name: default, binding: {name: passt}}]
    resources: {requests: {memory: 64Mi}}
  networks: [{name: default, pod: {}}]
"#;
    let d = conv(plain, Arch::Amd64).unwrap();
    let a = iface(&d, "default");
    assert_eq!(a.model.as_ref().unwrap().model_type, "virtio-transitional");
    assert!(a.mac.is_none() && a.address.is_none() && a.acpi.is_none());
    assert!(a.driver.is_none() && a.rom.is_none() && a.target.is_none());
    let xml: String = d.to_xml().unwrap().lines().map(str::trim).collect();
    assert!(
        xml.contains(
            "<portForward proto=\"tcp\" dev=\"eth0\"/><portForward proto=\"udp\" dev=\"eth0\"/>"
        ),
        "{xml}"
    );
    // Another model as given (one pod network per VMI: a second VMI).
    let e1000e = plain.replace(
        "binding: {name: passt}}",
        "binding: {name: passt}, model: e1000e}",
    );
    let d = conv(&e1000e, Arch::Amd64).unwrap();
    assert_eq!(
        iface(&d, "default").model.as_ref().unwrap().model_type,
        "e1000e"
    );

    // The pod's ovn-udn1 link, when phase 2 found one.
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.prepared.interfaces.insert(
        "default".into(),
        crate::interfaces::InterfaceHost {
            source_dev: Some("ovn-udn1".into()),
            ..Default::default()
        },
    );
    let d = convert(&vmi(PASST, Arch::Amd64), &ctx).unwrap();
    let a = iface(&d, "default");
    assert_eq!(a.source.as_ref().unwrap().dev.as_deref(), Some("ovn-udn1"));
    assert_eq!(a.port_forward[0].dev.as_deref(), Some("eth0"));

    // Istio's proxy: its ports are excluded first.
    let istio = PASST.replace(
        "metadata: {name: passt,",
        "metadata: {annotations: {sidecar.istio.io/inject: \"True\"}, name: passt,",
    );
    let d = conv(&istio, Arch::Amd64).unwrap();
    let tcp = &iface(&d, "default").port_forward[0];
    assert_eq!(tcp.range.len(), 12);
    assert_eq!(tcp.range[0].start, 15000);
    assert_eq!(tcp.range[0].exclude.as_deref(), Some("yes"));
    assert_eq!(tcp.range[10].exclude, None);
}

#[test]
fn passt_binding_refuses_what_it_does_not_apply() {
    let bad = |from: &str, to: &str, want: &str| {
        let e = conv(&PASST.replace(from, to), Arch::Amd64)
            .unwrap_err()
            .to_string();
        assert_eq!(e, want, "{to}");
    };
    let p = "spec.domain.devices.interfaces[0]";
    bad(
        "acpiIndex: 2",
        "bootOrder: 1",
        &format!("{p}.bootOrder: the passt binding does not apply a boot order (use the masquerade or bridge binding)"),
    );
    bad(
        "acpiIndex: 2",
        "state: down",
        &format!("{p}.state: the passt binding does not apply link state down (use the masquerade or bridge binding)"),
    );
    bad(
        "acpiIndex: 2",
        "dhcpOptions: {ntpServers: [10.0.0.1]}",
        &format!("{p}.dhcpOptions: the passt binding does not apply DHCP options (passt's DHCP server has none of them) (use the masquerade or bridge binding)"),
    );
    bad(
        "port: 8080",
        "port: 70000",
        &format!("{p}.ports[0].port: 70000 is not a port number (1-65535)"),
    );
    bad(
        "{name: http, port: 8080}",
        "{name: http}",
        &format!("{p}.ports[0].port: nothing is not a port number (1-65535)"),
    );
    bad(
        "protocol: UDP",
        "protocol: SCTP",
        &format!("{p}.ports[1].protocol: \"SCTP\" is not TCP or UDP"),
    );
    bad(
        "02-54-00-AB-CD-EF",
        "03-54-00-AB-CD-EF",
        &format!("{p}.macAddress: MAC address \"03-54-00-AB-CD-EF\" is a multicast address"),
    );
    bad(
        "0000:00:0a.0",
        "0000:00:0a",
        &format!("{p}.pciAddress: \"0000:00:0a\" is not a PCI address of the form dddd:bb:ss.f"),
    );
    let e = conv(PASST, Arch::S390x).unwrap_err().to_string();
    assert_eq!(e, format!("{p}.acpiIndex: ACPI is not available on s390x"));
    // `state: absent` leaves it out, as for every binding.
    let d = conv(&PASST.replace("acpiIndex: 2", "state: absent"), Arch::Amd64).unwrap();
    assert!(d.devices.interface.is_empty());
}
