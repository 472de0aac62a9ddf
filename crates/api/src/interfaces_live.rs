//! Which interfaces of a VMI need something from the pod's network
//! namespace: the one predicate the launcher's network phase 2, its
//! standalone stand-in of phase 1 and the domain manager share.
//!
//! KubeVirt: an interface with `state: absent` is being unplugged and gets
//! no device (`pkg/network/vmispec`); an SR-IOV interface is a PCI host
//! device (a VF) whose network lives outside the pod: neither has a pod
//! link, tap or DHCP server.

use crate::vmi::Interface;
use crate::VirtualMachineInstance;

impl Interface {
    /// A live interface on the pod network: not absent and not SR-IOV
    /// (which is a host device instead).
    pub fn is_live_pod_interface(&self) -> bool {
        !self.is_absent() && self.sriov.is_none()
    }
}

impl VirtualMachineInstance {
    /// The live pod interfaces ([`Interface::is_live_pod_interface`]) with
    /// their index in `spec.domain.devices.interfaces`, in spec order.
    pub fn live_pod_interfaces(&self) -> impl Iterator<Item = (usize, &Interface)> {
        self.spec
            .domain
            .devices
            .interfaces
            .iter()
            .enumerate()
            .filter(|(_, i)| i.is_live_pod_interface())
    }
}

#[cfg(test)]
mod tests {
    use crate::Arch;

    #[test]
    fn absent_and_sriov_interfaces_are_not_live_pod_interfaces() {
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: n}\nspec:\n  domain:\n    devices:\n      interfaces:\n      - {name: a, masquerade: {}}\n      - {name: b, bridge: {}, state: absent}\n      - {name: c, sriov: {}}\n      - {name: d, binding: {name: passt}, state: up}\n    resources: {requests: {memory: 64Mi}}\n  networks:\n  - {name: a, pod: {}}\n  - {name: b, multus: {networkName: b}}\n  - {name: c, multus: {networkName: c}}\n  - {name: d, multus: {networkName: d}}\n";
        let vmi = crate::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let ifaces = &vmi.spec.domain.devices.interfaces;
        assert_eq!(
            ifaces.iter().map(|i| i.is_absent()).collect::<Vec<_>>(),
            [false, true, false, false]
        );
        let live: Vec<(usize, &str)> = vmi
            .live_pod_interfaces()
            .map(|(i, x)| (i, x.name.as_str()))
            .collect();
        assert_eq!(live, [(0, "a"), (3, "d")]);
    }
}
