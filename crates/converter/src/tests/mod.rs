//! Whole-domain tests: real KubeVirt examples and real-world cases in,
//! domain model assertions out, one file per concern; the helpers they
//! share are here.

// Tests read their fixtures from tests/data; the converter itself stays pure.
#![allow(clippy::disallowed_methods)]

mod disks;
mod firmware;
mod interfaces;
mod passt;
mod sriov;
mod whole;

use api::{Arch, VirtualMachineInstance};
use domain::Domain;

use crate::{choose_virt_type, convert, ConvertContext, ConvertError, VirtType};

pub(super) fn data(rel: &str) -> String {
    let p = format!("{}/../../tests/data/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

pub(super) fn vmi(doc: &str, arch: Arch) -> VirtualMachineInstance {
    let mut v = api::load_vmi(doc.as_bytes(), arch).unwrap();
    api::defaults::fill_missing_uid(&mut v);
    v
}

pub(super) fn conv(doc: &str, arch: Arch) -> Result<Domain, ConvertError> {
    convert(&vmi(doc, arch), &ConvertContext::new(arch, VirtType::Kvm))
}

pub(super) fn disk<'a>(d: &'a Domain, name: &str) -> &'a domain::Disk {
    let alias = format!("ua-{name}");
    d.devices
        .disk
        .iter()
        .find(|x| x.alias.as_ref().is_some_and(|a| a.name == alias))
        .unwrap_or_else(|| panic!("no disk {name}"))
}

pub(super) fn iface<'a>(d: &'a Domain, name: &str) -> &'a domain::Interface {
    let alias = format!("ua-{name}");
    d.devices
        .interface
        .iter()
        .find(|x| x.alias.as_ref().is_some_and(|a| a.name == alias))
        .unwrap_or_else(|| panic!("no interface {name}"))
}
