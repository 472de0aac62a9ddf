//! The disks and interfaces of a live domain XML that the statistics
//! list, with what libvirt needs to read their counters (`<target dev>`).

use std::collections::HashMap;

use super::mapping::{DiskRef, InterfaceRef};

/// The one part of the live domain XML the statistics need that the
/// `domain` crate does not model: each disk's `<source index>` (libvirt's
/// number of the image, written only in live XML and never by the
/// converter, so the model leaves it out).
mod xml {
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize)]
    pub struct Domain {
        #[serde(default)]
        pub devices: Devices,
    }

    #[derive(Debug, Default, Deserialize)]
    pub struct Devices {
        #[serde(default)]
        pub disk: Vec<Disk>,
    }

    #[derive(Debug, Deserialize)]
    pub struct Disk {
        pub source: Option<Source>,
        pub target: Option<Target>,
    }

    #[derive(Debug, Deserialize)]
    pub struct Source {
        #[serde(rename = "@index")]
        pub index: Option<u32>,
    }

    #[derive(Debug, Deserialize)]
    pub struct Target {
        #[serde(rename = "@dev")]
        pub dev: String,
    }
}

/// Disks and interfaces of a live domain XML, in document order, from the
/// `domain` crate's model (each disk's `<source index>` from the minimal
/// model above). Interfaces without `<target dev>` have no host-side
/// counters and are left out, as libvirt's bulk statistics leave them out.
///
/// # Errors
/// The XML does not parse.
pub fn devices_from_xml(
    xml_text: &str,
) -> Result<(Vec<DiskRef>, Vec<InterfaceRef>), domain::XmlError> {
    let dom = domain::Domain::from_xml(xml_text)?;
    let extra: xml::Domain = quick_xml::de::from_str(xml_text).map_err(domain::XmlError::from)?;
    let index: HashMap<String, u32> = extra
        .devices
        .disk
        .iter()
        .filter_map(|d| {
            let dev = d.target.as_ref()?.dev.clone();
            Some((dev, d.source.as_ref()?.index?))
        })
        .collect();
    let disks = dom
        .devices
        .disk
        .iter()
        .map(|d| DiskRef {
            dev: d.target.dev.clone(),
            alias: d.alias.as_ref().map(|a| a.name.clone()),
            path: d
                .source
                .as_ref()
                .and_then(|s| s.file.clone().or_else(|| s.dev.clone())),
            index: index.get(&d.target.dev).copied(),
        })
        .collect();
    let ifaces = dom
        .devices
        .interface
        .into_iter()
        .filter_map(|i| {
            Some(InterfaceRef {
                dev: i.target?.dev,
                alias: i.alias.map(|a| a.name),
            })
        })
        .collect();
    Ok((disks, ifaces))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn devices_come_from_the_live_xml() {
        let xml = r#"<domain type='qemu' id='1'>
  <name>default_vmi</name>
  <memory unit='KiB'>131072</memory>
  <vcpu placement='static'>1</vcpu>
  <os><type arch='x86_64' machine='pc-q35-10.0'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/run/disk.qcow2' index='1'/>
      <backingStore type='file' index='2'><format type='raw'/><source file='/base.img'/><backingStore/></backingStore>
      <target dev='sda' bus='sata'/>
      <alias name='ua-containerdisk'/>
    </disk>
    <disk type='block' device='disk'>
      <source dev='/dev/pvc'/>
      <target dev='vdb' bus='virtio'/>
      <alias name='ua-pvc'/>
    </disk>
    <disk type='file' device='cdrom'>
      <target dev='sdc' bus='sata'/>
      <alias name='sata0-0-2'/>
    </disk>
    <controller type='usb' index='0' model='none'/>
    <interface type='ethernet'>
      <mac address='02:00:00:00:00:01'/>
      <target dev='tap0' managed='no'/>
      <model type='virtio-non-transitional'/>
      <alias name='ua-default'/>
    </interface>
    <interface type='user'>
      <mac address='02:00:00:00:00:02'/>
      <alias name='ua-slirp'/>
    </interface>
    <serial type='pty'><target port='0'/></serial>
  </devices>
</domain>"#;
        let (disks, ifaces) = devices_from_xml(xml).unwrap();
        assert_eq!(
            disks,
            vec![
                DiskRef {
                    dev: "sda".into(),
                    alias: Some("ua-containerdisk".into()),
                    path: Some("/var/run/disk.qcow2".into()),
                    index: Some(1),
                },
                DiskRef {
                    dev: "vdb".into(),
                    alias: Some("ua-pvc".into()),
                    path: Some("/dev/pvc".into()),
                    index: None,
                },
                DiskRef {
                    dev: "sdc".into(),
                    alias: Some("sata0-0-2".into()),
                    path: None,
                    index: None,
                },
            ]
        );
        assert_eq!(
            ifaces,
            vec![InterfaceRef {
                dev: "tap0".into(),
                alias: Some("ua-default".into()),
            }]
        );
    }

    #[test]
    fn no_devices_no_entries() {
        let xml = r#"<domain type='kvm'><name>x</name><memory unit='KiB'>1024</memory>
<vcpu>1</vcpu><os><type>hvm</type></os><devices/></domain>"#;
        let (d, i) = devices_from_xml(xml).unwrap();
        assert!(d.is_empty() && i.is_empty());
    }
}
