//! `spec.domain.devices.hostDevices` and `gpus` as KubeVirt v1.6.6 gives
//! them to the domain (`virtwrap/device/hostdevice/{generic,gpu}`): each
//! device takes the next address of its resource from the device plugins'
//! variables of the pod ([`crate::ConvertContext::device_plugin_env`]):
//!
//! - `PCI_RESOURCE_<RESOURCE>`: host PCI addresses → `<hostdev
//!   mode='subsystem' type='pci' managed='no'>` with the source address;
//! - `MDEV_PCI_RESOURCE_<RESOURCE>`: mediated device UUIDs → `<hostdev
//!   mode='subsystem' type='mdev' model='vfio-pci'>`; for GPUs (vGPUs) with
//!   `display='on'` (and `ramfb='on'`) per `virtualGPUOptions.display`,
//!   and, when no GPU sets display options, on the first vGPU;
//! - `USB_RESOURCE_<RESOURCE>` (host devices only): `bus:device` pairs →
//!   `<hostdev mode='subsystem' type='usb'>`.
//!
//! `<RESOURCE>` is the device name upper-cased with `/` and `.` as `_`
//! (KubeVirt's `ResourceNameToEnvVar`: `nvidia.com/GP102GL_Tesla_P40` →
//! `PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40`). An address, once taken, is
//! taken for every resource that lists it. PCI devices come first, then
//! mediated devices, then USB (KubeVirt's order); a device whose resource
//! has no address left of a kind is skipped for that kind, and a VMI whose
//! devices did not all get one is refused with KubeVirt's message. Aliases:
//! `ua-hostdevice-<name>` and `ua-gpu-<name>`; USB `ua-usb-host-<name>`.
//!
//! Devices from DRA resource claims (`claimName`/`requestName`, no
//! `deviceName`) get their address from the VMI's `status.deviceStatus`
//! instead ([`dra`]), with the same PCI and mdev builders.
//!
//! Not supported yet (refused by field): `tag` (the config drive's device
//! metadata).

use std::collections::BTreeMap;

use api::VirtualMachineInstance;
use domain::{Address, HostDevice, HostDeviceSource};

use crate::{ConvertContext, ConvertError};

mod dra;

/// KubeVirt's `v1.PCIResourcePrefix`.
pub const PCI_PREFIX: &str = "PCI_RESOURCE";
/// KubeVirt's `v1.MDevResourcePrefix`.
pub const MDEV_PREFIX: &str = "MDEV_PCI_RESOURCE";
/// KubeVirt's `v1.USBResourcePrefix`.
pub const USB_PREFIX: &str = "USB_RESOURCE";

/// The variable of `resource` under `prefix` (KubeVirt's
/// `ResourceNameToEnvVar`).
pub fn env_name(prefix: &str, resource: &str) -> String {
    format!(
        "{prefix}_{}",
        resource.to_uppercase().replace(['/', '.'], "_")
    )
}

/// Whether the variable `name` is one a device plugin sets for host
/// devices and GPUs (the launcher passes only those to the converter).
pub fn is_device_plugin_var(name: &str) -> bool {
    [PCI_PREFIX, MDEV_PREFIX, USB_PREFIX]
        .iter()
        .any(|p| name.strip_prefix(p).is_some_and(|r| r.starts_with('_')))
}

/// Whether a host device's USB variable is set (KubeVirt's
/// `USBDevicesFound`): the domain then needs its USB controller.
pub fn usb_found(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> bool {
    vmi.spec.domain.devices.host_devices.iter().any(|h| {
        ctx.device_plugin_env
            .contains_key(&env_name(USB_PREFIX, &h.device_name))
    })
}

/// KubeVirt's `AddressPool`: the addresses of each resource, from its
/// variable (a trailing comma dropped); popping one removes it from every
/// resource.
struct Pool(BTreeMap<String, Vec<String>>);

impl Pool {
    fn new(prefix: &str, resources: &[&str], env: &BTreeMap<String, String>) -> Pool {
        let mut m = BTreeMap::new();
        for r in resources {
            if let Some(v) = env.get(&env_name(prefix, r)) {
                let v = v.strip_suffix(',').unwrap_or(v);
                let list = if v.is_empty() {
                    Vec::new()
                } else {
                    v.split(',').map(str::to_owned).collect()
                };
                m.insert((*r).to_owned(), list);
            }
        }
        Pool(m)
    }

    /// The next address of `resource` (best effort: none when there is
    /// none left or the resource has no variable).
    fn pop(&mut self, resource: &str) -> Option<String> {
        let addr = self.0.get(resource)?.first()?.clone();
        for list in self.0.values_mut() {
            list.retain(|a| *a != addr);
        }
        Some(addr)
    }
}

/// One device of the VMI as the shared code sees it.
struct Wanted<'a> {
    name: &'a str,
    resource: &'a str,
    path: String,
    /// `virtualGPUOptions.display`: (display on, ramfb on).
    display: Option<(bool, bool)>,
}

fn alias(path: &str, name: &str) -> Result<domain::Alias, ConvertError> {
    crate::user_alias(&format!("{path}.name"), name)
}

/// `<hostdev mode='subsystem' type='pci' managed='no'>` for the host PCI
/// address `addr` (`dddd:bb:ss.f`); the error is the detail of KubeVirt's
/// "failed to create PCI device for <name>", naming where `addr` came
/// from (`from`: a variable or a status field).
fn pci_device(addr: &str, from: &str, alias: domain::Alias) -> Result<HostDevice, String> {
    // A host's PCI address may be on any PCI domain (segment), as KubeVirt's
    // `ParsePciAddress` reads it; only the guest's own addresses are on 0.
    let source = crate::interfaces::pci_address(from, addr)
        .map_err(|_| format!("{addr:?} (from {from}) is not a PCI address"))?;
    // A host device's source address has no `type` (libvirt's schema).
    let source = Address {
        address_type: String::new(),
        ..source
    };
    Ok(HostDevice {
        mode: Some("subsystem".into()),
        hostdev_type: "pci".into(),
        managed: Some("no".into()),
        source: HostDeviceSource {
            address: Some(source),
        },
        alias: Some(alias),
        ..HostDevice::default()
    })
}

/// `<hostdev mode='subsystem' type='mdev' model='vfio-pci'>` for the
/// mediated device `uuid`; the error names where it came from (`from`).
fn mdev_device(uuid: &str, from: &str, alias: domain::Alias) -> Result<HostDevice, String> {
    if !is_uuid(uuid) {
        return Err(format!(
            "{uuid:?} (from {from}) is not a mediated device UUID"
        ));
    }
    Ok(HostDevice {
        mode: Some("subsystem".into()),
        hostdev_type: "mdev".into(),
        model: Some("vfio-pci".into()),
        source: HostDeviceSource {
            address: Some(Address {
                uuid: Some(uuid.into()),
                ..Address::default()
            }),
        },
        alias: Some(alias),
        ..HostDevice::default()
    })
}

/// Whether `s` is a UUID as libvirt's schema writes one (`UUID` in
/// `basictypes.rng`): 32 hex digits, bare or grouped 8-4-4-4-12. KubeVirt
/// passes a mediated device's UUID on unchecked and libvirt refuses any
/// other shape at define; this refuses it by field first.
fn is_uuid(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    let groups: Vec<&str> = s.split('-').collect();
    match groups.as_slice() {
        [all] => hex(all, 32),
        [a, b, c, d, e] => hex(a, 8) && hex(b, 4) && hex(c, 4) && hex(d, 4) && hex(e, 12),
        _ => false,
    }
}

/// A GPU's `virtualGPUOptions.display` as (display on, ramfb on); `None`
/// when it sets none.
fn gpu_display(g: &api::vmi::Gpu) -> Option<(bool, bool)> {
    g.virtual_gpu_options
        .as_ref()
        .and_then(|o| o.display.as_ref())
        .map(|d| {
            let on = d.enabled != Some(false);
            let ramfb = d.ram_fb.as_ref().is_none_or(|r| r.enabled != Some(false));
            (on, ramfb)
        })
}

/// `display='on'` (and `ramfb='on'`) on a vGPU: `display` is
/// `virtualGPUOptions.display` as (display on, ramfb on).
fn set_display(d: &mut HostDevice, display: Option<(bool, bool)>) {
    if let Some((true, ramfb)) = display {
        d.display = Some("on".into());
        if ramfb {
            d.ramfb = Some("on".into());
        }
    }
}

/// KubeVirt's default vGPU display: on the first vGPU (display and ramfb)
/// when no GPU of the VMI sets `virtualGPUOptions.display`.
fn default_display(mdevs: &mut [HostDevice], any_display_set: bool) {
    if !any_display_set {
        if let Some(first) = mdevs.first_mut() {
            first.display = Some("on".into());
            first.ramfb = Some("on".into());
        }
    }
}

fn pci(w: &Wanted, addr: &str, prefix: &str) -> Result<HostDevice, ConvertError> {
    let alias = alias(&w.path, &format!("{prefix}{}", w.name))?;
    pci_device(addr, &env_name(PCI_PREFIX, w.resource), alias).map_err(|e| {
        ConvertError::Host(format!(
            "failed to create hostdevice for {}: failed to create PCI device for {}: {e}",
            w.name, w.name
        ))
    })
}

fn mdev(w: &Wanted, uuid: &str, prefix: &str) -> Result<HostDevice, ConvertError> {
    let alias = alias(&w.path, &format!("{prefix}{}", w.name))?;
    mdev_device(uuid, &env_name(MDEV_PREFIX, w.resource), alias)
        .map_err(|e| ConvertError::Host(format!("failed to create hostdevice for {}: {e}", w.name)))
}

fn usb(w: &Wanted, addr: &str) -> Result<HostDevice, ConvertError> {
    let parts: Vec<&str> = addr.split(':').collect();
    let [bus, device] = parts[..] else {
        return Err(ConvertError::Host(format!(
            "failed to create hostdevice for {}: Bad value: {addr}",
            w.name
        )));
    };
    let num = |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit());
    if !num(bus) || !num(device) {
        return Err(ConvertError::Host(format!(
            "failed to create hostdevice for {}: Bad value: {addr} (from {}: bus:device, decimal)",
            w.name,
            env_name(USB_PREFIX, w.resource)
        )));
    }
    Ok(HostDevice {
        mode: Some("subsystem".into()),
        hostdev_type: "usb".into(),
        source: HostDeviceSource {
            address: Some(Address {
                bus: Some(bus.into()),
                device: Some(device.into()),
                ..Address::default()
            }),
        },
        alias: Some(alias(&w.path, &format!("usb-host-{}", w.name))?),
        ..HostDevice::default()
    })
}

/// KubeVirt's `CreateHostDevicesFromPools` for one list (`usb`: the
/// generic list's USB pool; `gpu`: the default vGPU display).
fn create(
    wanted: &[Wanted],
    env: &BTreeMap<String, String>,
    alias_prefix: &str,
    with_usb: bool,
    gpu: bool,
    any_display_set: bool,
    what: &str,
) -> Result<Vec<HostDevice>, ConvertError> {
    let resources: Vec<&str> = wanted.iter().map(|w| w.resource).collect();
    let mut out = Vec::new();
    let mut pool = Pool::new(PCI_PREFIX, &resources, env);
    for w in wanted {
        if let Some(a) = pool.pop(w.resource) {
            out.push(pci(w, &a, alias_prefix)?);
        }
    }
    let mut pool = Pool::new(MDEV_PREFIX, &resources, env);
    let mut mdevs = Vec::new();
    for w in wanted {
        if let Some(a) = pool.pop(w.resource) {
            let mut d = mdev(w, &a, alias_prefix)?;
            if gpu {
                set_display(&mut d, w.display);
            }
            mdevs.push(d);
        }
    }
    if gpu {
        default_display(&mut mdevs, any_display_set);
    }
    out.extend(mdevs);
    if with_usb {
        let mut pool = Pool::new(USB_PREFIX, &resources, env);
        for w in wanted {
            if let Some(a) = pool.pop(w.resource) {
                out.push(usb(w, &a)?);
            }
        }
    }
    if !wanted.is_empty() && wanted.len() != out.len() {
        let missing: Vec<String> = wanted
            .iter()
            .filter(|w| {
                let suffix = format!("-{}", w.name);
                !out.iter()
                    .any(|d| d.alias.as_ref().is_some_and(|a| a.name.ends_with(&suffix)))
            })
            .map(|w| {
                format!(
                    "{} ({}: {}, {} or {})",
                    w.name,
                    w.resource,
                    env_name(PCI_PREFIX, w.resource),
                    env_name(MDEV_PREFIX, w.resource),
                    env_name(USB_PREFIX, w.resource)
                )
            })
            .collect();
        return Err(ConvertError::Host(format!(
            "failed to create {what} host-devices: the number of device plugin {} do not match the number of devices: no device for {}",
            if gpu { "GPU/s" } else { "HostDevice/s" },
            missing.join(", ")
        )));
    }
    Ok(out)
}

/// The host devices of `vmi`'s `hostDevices` and `gpus`, in KubeVirt's
/// order: generic from device plugins, generic from DRA, GPUs from device
/// plugins, GPUs from DRA. None on a migration target
/// ([`ConvertContext::migration_target`]): KubeVirt's `Convert` skips
/// them there (`manager.go`, `if !isMigrationTarget`).
///
/// A device is DRA's when it has no `deviceName` and has `claimName` or
/// `requestName` (KubeVirt's `IsHostDeviceDRA`/`IsGPUDRA`); see [`dra`].
///
/// # Errors
/// [`ConvertError::Unsupported`] for tags;
/// [`ConvertError::Invalid`] for a device without `deviceName` or claim,
/// and for a `status.deviceStatus` of the wrong shape or size;
/// [`ConvertError::Host`] when the pod's variables or the VMI's device
/// status do not give every device an address, or give a malformed one
/// (KubeVirt's messages).
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
) -> Result<Vec<HostDevice>, ConvertError> {
    if ctx.migration_target {
        return Ok(Vec::new());
    }
    let dev = &vmi.spec.domain.devices;
    let check = |path: &str, tag: &str, resource: &str, dra: bool| {
        if !tag.is_empty() {
            return Err(ConvertError::unsupported(
                format!("{path}.tag"),
                "device tags (config drive metadata) of host devices and GPUs",
            ));
        }
        if resource.is_empty() && !dra {
            return Err(ConvertError::invalid(
                format!("{path}.deviceName"),
                "is required (the device plugin's resource name), or claimName and requestName for a DRA device",
            ));
        }
        Ok(())
    };
    let mut generic = Vec::new();
    let mut generic_dra = Vec::new();
    for (i, h) in dev.host_devices.iter().enumerate() {
        let path = format!("spec.domain.devices.hostDevices[{i}]");
        let is_dra = dra::is_dra(&h.device_name, &h.claim_name, &h.request_name);
        check(&path, &h.tag, &h.device_name, is_dra)?;
        if is_dra {
            generic_dra.push(h.name.as_str());
            continue;
        }
        generic.push(Wanted {
            name: &h.name,
            resource: &h.device_name,
            path,
            display: None,
        });
    }
    let mut gpus = Vec::new();
    let mut gpu_dra = Vec::new();
    for (i, g) in dev.gpus.iter().enumerate() {
        let path = format!("spec.domain.devices.gpus[{i}]");
        let is_dra = dra::is_dra(&g.device_name, &g.claim_name, &g.request_name);
        check(&path, &g.tag, &g.device_name, is_dra)?;
        let w = Wanted {
            name: &g.name,
            resource: &g.device_name,
            path,
            display: gpu_display(g),
        };
        if is_dra {
            gpu_dra.push(w);
        } else {
            gpus.push(w);
        }
    }
    // KubeVirt looks at every GPU of the VMI for the default display.
    let any_display_set = gpus.iter().chain(&gpu_dra).any(|w| w.display.is_some());
    let env = &ctx.device_plugin_env;
    let mut out = create(&generic, env, "hostdevice-", true, false, false, "generic")?;
    if !generic_dra.is_empty() {
        let dra = dra::generic(vmi, &generic_dra, &out)?;
        out.extend(dra);
    }
    out.extend(create(
        &gpus,
        env,
        "gpu-",
        false,
        true,
        any_display_set,
        "GPU",
    )?);
    if !gpu_dra.is_empty() {
        let names: Vec<&str> = gpu_dra.iter().map(|w| w.name).collect();
        let dra = dra::gpus(vmi, &names, any_display_set, &out)?;
        out.extend(dra);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::Arch;

    fn vmi(devices: &str) -> VirtualMachineInstance {
        let doc = format!("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: h}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n    devices:\n{devices}");
        api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap()
    }

    fn ctx(env: &[(&str, &str)]) -> ConvertContext {
        let mut c = ConvertContext::new(Arch::Amd64, crate::VirtType::Kvm);
        c.device_plugin_env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        c
    }

    #[test]
    fn variables_are_kubevirts() {
        assert_eq!(
            env_name(PCI_PREFIX, "nvidia.com/GP102GL_Tesla_P40"),
            "PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40"
        );
        assert_eq!(
            env_name(USB_PREFIX, "kubevirt.io/storage"),
            "USB_RESOURCE_KUBEVIRT_IO_STORAGE"
        );
        assert!(
            is_device_plugin_var("MDEV_PCI_RESOURCE_X") && is_device_plugin_var("PCI_RESOURCE_X")
        );
        assert!(!is_device_plugin_var("PCIDEVICE_X") && !is_device_plugin_var("PCI_RESOURCEX"));
    }

    #[test]
    fn pci_gpus_and_usb_host_devices_from_the_variables() {
        let v = vmi("      gpus: [{name: gpu1, deviceName: nvidia.com/GP102GL_Tesla_P40}]\n      hostDevices: [{name: stick, deviceName: kubevirt.io/storage}]\n");
        let c = ctx(&[
            ("PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40", "0000:81:00.0,"),
            ("USB_RESOURCE_KUBEVIRT_IO_STORAGE", "1:3"),
        ]);
        let d = convert(&v, &c).unwrap();
        assert!(usb_found(&v, &c) && !usb_found(&v, &ctx(&[])));
        assert_eq!(d.len(), 2);
        // Generic first (USB), then the GPU.
        assert_eq!(d[0].hostdev_type, "usb");
        assert_eq!(d[0].alias.as_ref().unwrap().name, "ua-usb-host-stick");
        let a = d[0].source.address.as_ref().unwrap();
        assert_eq!(
            (a.bus.as_deref(), a.device.as_deref()),
            (Some("1"), Some("3"))
        );
        assert_eq!(d[1].hostdev_type, "pci");
        assert_eq!(d[1].managed.as_deref(), Some("no"));
        assert_eq!(d[1].alias.as_ref().unwrap().name, "ua-gpu-gpu1");
        assert_eq!(
            d[1].source.address.as_ref().unwrap().bus.as_deref(),
            Some("0x81")
        );
    }

    #[test]
    fn vgpus_get_the_default_display_or_their_own() {
        let two = "      gpus:\n      - {name: a, deviceName: nvidia.com/GRID_T4-1Q}\n      - {name: b, deviceName: nvidia.com/GRID_T4-1Q}\n";
        let c = ctx(&[(
            "MDEV_PCI_RESOURCE_NVIDIA_COM_GRID_T4-1Q",
            "4b20d080-1b54-4048-85b3-a6a62d165c01,4b20d080-1b54-4048-85b3-a6a62d165c02",
        )]);
        let d = convert(&vmi(two), &c).unwrap();
        assert_eq!(d[0].hostdev_type, "mdev");
        assert_eq!(d[0].model.as_deref(), Some("vfio-pci"));
        assert_eq!(
            (d[0].display.as_deref(), d[0].ramfb.as_deref()),
            (Some("on"), Some("on"))
        );
        assert_eq!(
            (d[1].display.as_deref(), d[1].ramfb.as_deref()),
            (None, None)
        );
        // An address is taken once.
        let own = "      gpus:\n      - {name: a, deviceName: nvidia.com/GRID_T4-1Q, virtualGPUOptions: {display: {ramFB: {enabled: false}}}}\n      - {name: b, deviceName: nvidia.com/GRID_T4-1Q, virtualGPUOptions: {display: {enabled: false}}}\n";
        let d = convert(&vmi(own), &c).unwrap();
        assert_eq!(
            (d[0].display.as_deref(), d[0].ramfb.as_deref()),
            (Some("on"), None)
        );
        assert_eq!(
            (d[1].display.as_deref(), d[1].ramfb.as_deref()),
            (None, None)
        );
        assert_ne!(d[0].source, d[1].source);
    }

    #[test]
    fn missing_devices_and_unsupported_fields_are_refused_by_name() {
        let v = vmi("      gpus: [{name: gpu1, deviceName: nvidia.com/P40}]\n");
        let e = convert(&v, &ctx(&[])).unwrap_err().to_string();
        assert!(e.contains("failed to create GPU host-devices: the number of device plugin GPU/s do not match the number of devices: no device for gpu1 (nvidia.com/P40: PCI_RESOURCE_NVIDIA_COM_P40"), "{e}");
        let e = convert(&v, &ctx(&[("PCI_RESOURCE_NVIDIA_COM_P40", "81:00.0")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"81:00.0\" (from PCI_RESOURCE_NVIDIA_COM_P40) is not a PCI address"),
            "{e}"
        );
        let v = vmi("      hostDevices: [{name: x, deviceName: a/b, tag: t}]\n");
        let e = convert(&v, &ctx(&[])).unwrap_err().to_string();
        assert!(
            e.starts_with("spec.domain.devices.hostDevices[0].tag"),
            "{e}"
        );
        let v = vmi("      hostDevices: [{name: x}]\n");
        let e = convert(&v, &ctx(&[])).unwrap_err().to_string();
        assert!(
            e.starts_with("spec.domain.devices.hostDevices[0].deviceName: is required"),
            "{e}"
        );
        let v = vmi("      hostDevices: [{name: x, deviceName: a/b}]\n");
        let e = convert(&v, &ctx(&[("USB_RESOURCE_A_B", "1-3")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Bad value: 1-3"), "{e}");
    }
}
