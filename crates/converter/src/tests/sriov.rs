//! SR-IOV interfaces as PCI host devices (`sriov.rs`).

use super::*;

const SRIOV_VMI: &str = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vf, namespace: ns}
spec:
  domain:
    memory: {guest: 128Mi}
    devices:
      interfaces:
      - {name: default, masquerade: {}}
      - {name: red, sriov: {}, bootOrder: 2, pciAddress: "0000:07:00.0", macAddress: "02:00:00:00:00:aa"}
      - {name: blue, sriov: {}}
  networks:
  - {name: default, pod: {}}
  - {name: red, multus: {networkName: sriov/red-net}}
  - {name: blue, multus: {networkName: blue-net}}
"#;

fn sriov_ctx(pairs: &[(&str, &str)]) -> ConvertContext {
    let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
    ctx.sriov_pci = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    ctx
}

fn sriov_conv(doc: &str, pairs: &[(&str, &str)]) -> Result<Domain, ConvertError> {
    convert(&vmi(doc, Arch::Amd64), &sriov_ctx(pairs))
}

/// KubeVirt's "creates SRIOV hostdev": each SR-IOV interface is a PCI
/// hostdev (managed='no', alias ua-sriov-<name>, host address from the
/// context, guest address and boot order from the interface), not an
/// <interface>; the masquerade NIC stays an interface.
#[test]
fn sriov_interfaces_become_pci_hostdevs() {
    let d = sriov_conv(
        SRIOV_VMI,
        &[("red", "0000:81:11.1"), ("blue", "0000:AF:02.7")],
    )
    .unwrap();
    assert_eq!(d.devices.interface.len(), 1);
    assert_eq!(
        d.devices.interface[0].alias.as_ref().unwrap().name,
        "ua-default"
    );
    let xml = d.to_xml().unwrap();
    let want = r#"<hostdev mode="subsystem" type="pci" managed="no">
      <source>
        <address domain="0x0000" bus="0x81" slot="0x11" function="0x1"/>
      </source>
      <boot order="2"/>
      <alias name="ua-sriov-red"/>
      <address type="pci" domain="0x0000" bus="0x07" slot="0x00" function="0x0"/>
    </hostdev>
    <hostdev mode="subsystem" type="pci" managed="no">
      <source>
        <address domain="0x0000" bus="0xaf" slot="0x02" function="0x7"/>
      </source>
      <alias name="ua-sriov-blue"/>
    </hostdev>"#;
    assert!(xml.contains(want), "{xml}");
    // PCI host devices take a PCIe root port each (KubeVirt counts them).
    let without = conv(
        &SRIOV_VMI
            .replace("      - {name: red, sriov: {}, bootOrder: 2, pciAddress: \"0000:07:00.0\", macAddress: \"02:00:00:00:00:aa\"}\n", "")
            .replace("      - {name: blue, sriov: {}}\n", ""),
        Arch::Amd64,
    )
    .unwrap();
    assert_eq!(
        crate::pci_ports::pci_devices(&d),
        crate::pci_ports::pci_devices(&without) + 2
    );
    // An absent SR-IOV interface gets no device and needs no address.
    let absent = SRIOV_VMI.replace(
        "{name: blue, sriov: {}}",
        "{name: blue, sriov: {}, state: absent}",
    );
    let d = sriov_conv(&absent, &[("red", "0000:81:11.1")]).unwrap();
    assert_eq!(d.devices.hostdev.len(), 1);
}

/// Missing or bad host facts and specs a VF cannot honour are refused with
/// one line naming the interface field; nothing is guessed.
#[test]
fn sriov_bad_input_is_refused_by_field() {
    let ok = [("red", "0000:81:11.1"), ("blue", "0000:81:11.2")];
    type Case<'a> = (String, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            SRIOV_VMI.into(),
            vec![("red", "0000:81:11.1")],
            "spec.domain.devices.interfaces[2].sriov: no host PCI address for SR-IOV interface \"blue\" (the pod's network-info file, or --network-info FILE standalone)",
        ),
        (
            SRIOV_VMI.into(),
            vec![("red", "0000:81:11.1"), ("blue", "81:11.2")],
            "spec.domain.devices.interfaces[2].sriov: host PCI address \"81:11.2\" of SR-IOV interface \"blue\" is not of the form dddd:bb:ss.f",
        ),
        (
            SRIOV_VMI.into(),
            vec![("red", "0000:81:11.1"), ("blue", "0000:81:11.1")],
            "spec.domain.devices.interfaces[2].sriov: SR-IOV interfaces \"red\" and \"blue\" were both given the host device 0000:81:11.1",
        ),
        (
            SRIOV_VMI
                .replace("{name: blue, multus: {networkName: blue-net}}", "{name: blue, pod: {}}")
                .replace("{name: default, pod: {}}", "{name: default, multus: {networkName: d}}")
                .replace("{name: default, masquerade: {}}", "{name: default, bridge: {}}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].sriov: SR-IOV needs a Multus network: spec.networks[name=blue] must have multus",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, state: down}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].state: an SR-IOV interface is a host device and has no link state to set down",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, model: e1000}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].model: \"e1000\": an SR-IOV interface is the host's VF, it has no NIC model",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, acpiIndex: 3}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].acpiIndex: an SR-IOV host device takes no ACPI index",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, bootOrder: 0}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].bootOrder: must be 1 or more",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, pciAddress: \"0000:07:00\"}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].pciAddress: \"0000:07:00\" is not a PCI address of the form dddd:bb:ss.f",
        ),
        (
            SRIOV_VMI.replace("{name: blue, sriov: {}}", "{name: blue, sriov: {}, pciAddress: \"0000:07:00.0\"}"),
            ok.to_vec(),
            "spec.domain.devices.interfaces[2].pciAddress: 0000:07:00.0 is already the address of interface \"red\"",
        ),
    ];
    for (doc, pairs, want) in cases {
        let e = sriov_conv(&doc, &pairs).unwrap_err().to_string();
        assert_eq!(e, want);
        assert_eq!(e.lines().count(), 1);
    }
}
