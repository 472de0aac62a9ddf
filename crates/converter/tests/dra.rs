//! A KubeVirt-shaped VMI whose `gpus` and `hostDevices` come from DRA
//! resource claims (`tests/data/hostdevices/vmi-dra.yaml`, with the
//! `status.deviceStatus` virt-controller writes) converts to KubeVirt's
//! host devices, and libvirt's schema accepts the XML.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::disallowed_types,
    missing_docs
)]

mod support;

use api::Arch;

const VMI: &str = include_str!("../../../tests/data/hostdevices/vmi-dra.yaml");

#[test]
fn dra_vmi_converts_to_kubevirts_host_devices_and_validates() {
    let vmi = api::load_vmi(VMI.as_bytes(), Arch::Amd64).unwrap();
    let ctx = converter::ConvertContext::new(Arch::Amd64, converter::VirtType::Kvm);
    let dom = converter::convert(&vmi, &ctx).unwrap();
    let xml = dom.to_xml().unwrap();

    let hd = &dom.devices.hostdev;
    let seen: Vec<(&str, &str)> = hd
        .iter()
        .map(|d| {
            (
                d.hostdev_type.as_str(),
                d.alias.as_ref().unwrap().name.as_str(),
            )
        })
        .collect();
    // KubeVirt's order: generic DRA devices, then GPUs (PCI, then vGPUs).
    assert_eq!(
        seen,
        [
            ("pci", "ua-dra-hostdevice-example-nic"),
            ("pci", "ua-dra-gpu-example-gpu"),
            ("mdev", "ua-dra-gpu-example-vgpu"),
        ],
        "{xml}"
    );
    assert!(
        xml.contains("<address domain=\"0x0000\" bus=\"0x3b\" slot=\"0x02\" function=\"0x3\"/>"),
        "{xml}"
    );
    assert!(
        xml.contains("<address domain=\"0x0000\" bus=\"0x65\" slot=\"0x00\" function=\"0x0\"/>"),
        "{xml}"
    );
    assert!(
        xml.contains("<address uuid=\"4b20d080-1b54-4048-85b3-a6a62d165c01\"/>"),
        "{xml}"
    );
    assert_eq!(hd[0].managed.as_deref(), Some("no"));
    assert_eq!(hd[1].managed.as_deref(), Some("no"));
    // The only vGPU gets the default display.
    assert_eq!(
        (hd[2].display.as_deref(), hd[2].ramfb.as_deref()),
        (Some("on"), Some("on"))
    );

    support::assert_valid_domain(&xml, "the DRA VMI");
}

/// KubeVirt v1.6.6's admission of the same VMI: each DRA GPU's
/// `claimName` must be one of `spec.resourceClaims[].name`. With the
/// vGPU's claim left out of `resourceClaims` the VMI is refused before
/// conversion, with KubeVirt's message at `spec.resourceClaims`; the host
/// device's claim is not checked in v1.6.6.
#[test]
fn a_dra_gpu_whose_claim_is_not_a_resource_claim_is_refused() {
    let listed =
        "  - name: vgpu-resource-claim\n    resourceClaimTemplateName: vgpu-resource-claim-tmpl\n";
    assert!(VMI.contains(listed));
    let e = api::load_vmi(VMI.replace(listed, "").as_bytes(), Arch::Amd64).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.resourceClaims: vmi.spec.resourceClaims must specify all claims used in vmi.spec.domain.devices.gpus"
    );
    let nic =
        "  - name: nic-resource-claim\n    resourceClaimTemplateName: nic-resource-claim-tmpl\n";
    assert!(VMI.contains(nic));
    let vmi = api::load_vmi(VMI.replace(nic, "").as_bytes(), Arch::Amd64).unwrap();
    assert_eq!(vmi.spec.resource_claims.len(), 2);
    let ctx = converter::ConvertContext::new(Arch::Amd64, converter::VirtType::Kvm);
    assert_eq!(
        converter::convert(&vmi, &ctx)
            .unwrap()
            .devices
            .hostdev
            .len(),
        3
    );
}
