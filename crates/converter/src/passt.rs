//! KubeVirt's passt network binding (a binding plugin:
//! `interfaces[].binding: {name: passt}` on the pod network).
//!
//! In a cluster, KubeVirt's converter skips such an interface and the
//! plugin's hook sidecar (`cmd/sidecars/network-passt-binding`, KubeVirt
//! v1.6.6) adds it to the domain at define time. This launcher applies the
//! binding itself, with the same result, so no sidecar is needed:
//!
//! - `<interface type='user'>` with alias `ua-<name>`;
//! - `<source dev='eth0'/>`, or `ovn-udn1` when the pod has that link
//!   (OVN-Kubernetes' primary user-defined network; a host fact from
//!   network phase 2, [`crate::interfaces::InterfaceHost::source_dev`]);
//! - `<backend type='passt' logFile='/var/run/kubevirt/passt.log'/>`;
//! - the model (virtio → `virtio-non-transitional`, or
//!   `virtio-transitional` with `useVirtioTransitional`; others as given;
//!   on s390x, whose channel I/O has no such models, plain `virtio` as
//!   for every other interface there), the spec's MAC (canonical form),
//!   PCI address and ACPI index;
//! - `<portForward proto='tcp|udp' dev='eth0'>` with one `<range
//!   start='PORT'/>` per `ports[]` entry of that protocol (no protocol =
//!   TCP); with no ports, one `tcp` and one `udp` element without ranges
//!   (passt forwards every port). With the `sidecar.istio.io/inject:
//!   "true"` annotation the TCP ports Istio's proxy reserves come first,
//!   as excluded ranges.
//!
//! libvirt starts `passt` itself (in its own network namespace, which is
//! the pod's) and passt answers the guest's DHCP, NDP and DHCPv6 with the
//! pod's own address: network phase 2 has nothing to do for it.
//!
//! The sidecar writes no boot order, `<rom>`, link state, MTU or vhost
//! queues and ignores `dhcpOptions` (passt's DHCP server has none of
//! them). Where the spec asks for one of those on a passt interface, it is
//! refused by field rather than dropped; `networkInterfaceMultiqueue`, a
//! VM-wide setting, applies to the tap-based interfaces only, as in
//! KubeVirt.

use api::vmi::{Interface as ApiInterface, InterfaceState};
use api::VirtualMachineInstance;
use domain::{
    AcpiIndex, Interface, InterfaceBackend, InterfaceSource, Mac, Model, PortForward, PortRange,
};

use crate::interfaces::{ports, Port};
use crate::{ConvertContext, ConvertError};

/// The binding plugin's name (`binding: {name: passt}`), as registered in
/// the KubeVirt CR.
pub const PLUGIN_NAME: &str = "passt";

/// Where passt logs (its `--log-file`; virt-launcher's monitor prints it
/// after the VM exits).
pub const LOG_FILE: &str = "/var/run/kubevirt/passt.log";

/// The pod's primary interface, and the link port forwards bind to.
pub const POD_LINK: &str = "eth0";

/// The link OVN-Kubernetes gives a pod on a primary user-defined network;
/// passt uses it instead of `eth0` when it exists.
pub const OVN_UDN_LINK: &str = "ovn-udn1";

/// The annotation that asks for Istio's proxy in the pod.
pub const ISTIO_INJECT_ANNOTATION: &str = "sidecar.istio.io/inject";

/// TCP ports Istio's Envoy proxy uses in the pod (KubeVirt's
/// `istio.ReservedPorts`): admin, outbound, debug, inbound, tunnel,
/// secure network, merged Prometheus telemetry, health check, DNS,
/// Prometheus telemetry.
pub const ISTIO_RESERVED_PORTS: [u16; 10] = [
    15000, 15001, 15004, 15006, 15008, 15009, 15020, 15021, 15053, 15090,
];

/// The `<portForward>` elements (see the module documentation).
pub fn port_forwards(ports: &[Port], istio: bool) -> Vec<PortForward> {
    let range = |start: u16, exclude: bool| PortRange {
        start,
        exclude: exclude.then(|| "yes".into()),
        ..PortRange::default()
    };
    let mut tcp: Vec<PortRange> = Vec::new();
    if istio {
        tcp.extend(ISTIO_RESERVED_PORTS.iter().map(|p| range(*p, true)));
    }
    tcp.extend(
        ports
            .iter()
            .filter(|p| !p.udp)
            .map(|p| range(p.port, false)),
    );
    let udp: Vec<PortRange> = ports
        .iter()
        .filter(|p| p.udp)
        .map(|p| range(p.port, false))
        .collect();
    let forward = |proto: &str, range: Vec<PortRange>| PortForward {
        proto: proto.into(),
        dev: Some(POD_LINK.into()),
        range,
        ..PortForward::default()
    };
    if tcp.is_empty() && udp.is_empty() {
        return vec![forward("tcp", Vec::new()), forward("udp", Vec::new())];
    }
    let mut out = Vec::new();
    if !tcp.is_empty() {
        out.push(forward("tcp", tcp));
    }
    if !udp.is_empty() {
        out.push(forward("udp", udp));
    }
    out
}

/// Whether `iface` asks for the passt binding plugin.
pub fn is_passt(iface: &ApiInterface) -> bool {
    iface.plugin_name() == Some(PLUGIN_NAME)
}

/// Builds the passt `<interface>` for `iface` (at `path`), whose network
/// is the pod network. `model_type` is the libvirt model already chosen
/// for the spec's model.
///
/// # Errors
/// [`ConvertError::Invalid`] naming the field for a bad MAC, PCI address
/// or port, and for `bootOrder`, `state: down` and `dhcpOptions`, which
/// the passt binding does not apply.
pub fn interface(
    vmi: &VirtualMachineInstance,
    iface: &ApiInterface,
    path: &str,
    ctx: &ConvertContext,
    model_type: String,
) -> Result<Interface, ConvertError> {
    let not_applied = |field: &str, what: &str| {
        ConvertError::invalid(
            format!("{path}.{field}"),
            format!(
                "the passt binding does not apply {what} (use the masquerade or bridge binding)"
            ),
        )
    };
    if iface.boot_order.is_some() {
        return Err(not_applied("bootOrder", "a boot order"));
    }
    if iface.state == Some(InterfaceState::Down) {
        return Err(not_applied("state", "link state down"));
    }
    if iface.dhcp_options.is_some() {
        return Err(not_applied(
            "dhcpOptions",
            "DHCP options (passt's DHCP server has none of them)",
        ));
    }
    let mac = iface
        .mac_address
        .as_deref()
        .map(|text| {
            api::mac::parse_guest_mac(text, false)
                .map(|m| Mac {
                    address: api::mac::format_mac(&m),
                })
                .map_err(|e| ConvertError::invalid(format!("{path}.macAddress"), e.to_string()))
        })
        .transpose()?;
    let address = iface
        .pci_address
        .as_deref()
        .map(|a| crate::interfaces::pci_address(&format!("{path}.pciAddress"), a))
        .transpose()?;
    if iface.acpi_index.is_some() && !crate::arch::caps(ctx.arch).acpi {
        return Err(ConvertError::invalid(
            format!("{path}.acpiIndex"),
            format!("ACPI is not available on {}", ctx.arch),
        ));
    }
    let istio = vmi
        .metadata
        .annotations
        .get(ISTIO_INJECT_ANNOTATION)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let source = ctx
        .prepared
        .interfaces
        .get(&iface.name)
        .and_then(|h| h.source_dev.clone())
        .unwrap_or_else(|| POD_LINK.into());
    Ok(Interface {
        interface_type: "user".into(),
        source: Some(InterfaceSource { dev: Some(source) }),
        mac,
        model: Some(Model { model_type }),
        alias: Some(crate::user_alias(&format!("{path}.name"), &iface.name)?),
        address,
        acpi: iface.acpi_index.map(|index| AcpiIndex { index }),
        backend: Some(InterfaceBackend {
            backend_type: Some("passt".into()),
            log_file: Some(LOG_FILE.into()),
        }),
        port_forward: port_forwards(&ports(iface, path)?, istio),
        ..Interface::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(port: u16) -> Port {
        Port { udp: false, port }
    }

    #[test]
    fn no_ports_forward_every_tcp_and_udp_port() {
        let f = port_forwards(&[], false);
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].proto.as_str(), f[1].proto.as_str()), ("tcp", "udp"));
        assert!(f.iter().all(|p| p.range.is_empty()));
        assert!(f.iter().all(|p| p.dev.as_deref() == Some("eth0")));
    }

    #[test]
    fn ports_are_grouped_by_protocol_in_spec_order() {
        let f = port_forwards(
            &[
                tcp(80),
                Port {
                    udp: true,
                    port: 53,
                },
                tcp(8080),
            ],
            false,
        );
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].proto, "tcp");
        let starts: Vec<u16> = f[0].range.iter().map(|r| r.start).collect();
        assert_eq!(starts, [80, 8080]);
        assert_eq!(f[1].proto, "udp");
        assert_eq!(f[1].range[0].start, 53);
        // Only TCP given: no udp element (UDP is then not forwarded).
        let f = port_forwards(&[tcp(22)], false);
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn istio_reserved_ports_are_excluded_first() {
        let f = port_forwards(&[tcp(8080)], true);
        assert_eq!(f.len(), 1);
        let r = &f[0].range;
        assert_eq!(r.len(), 11);
        assert_eq!((r[0].start, r[0].exclude.as_deref()), (15000, Some("yes")));
        assert_eq!((r[10].start, r[10].exclude.as_deref()), (8080, None));
        // No ports: TCP minus Istio's, and no UDP element (as the sidecar).
        let f = port_forwards(&[], true);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].proto, "tcp");
    }
}
