//! libvirt's backup and checkpoint XML (<https://libvirt.org/formatbackup.html>,
//! <https://libvirt.org/formatcheckpoint.html>): what `virDomainBackupBegin`
//! and `virDomainCheckpointCreateXML` take. The shapes follow KubeVirt's
//! `api.DomainBackup` and `api.DomainCheckpoint` (`pkg/virt-launcher/virtwrap/api/schema.go`
//! on KubeVirt main), written with the same serde/quick-xml rules as
//! [`crate::Domain`]; libvirt's schemas (`domainbackup.rng`,
//! `domaincheckpoint.rng`) check them in the tests.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::XmlError;

/// `<domainbackup mode='push|pull'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "domainbackup")]
pub struct DomainBackup {
    /// `push` (libvirt writes each disk to its target) or `pull` (libvirt
    /// serves the disks over NBD). KubeVirt's `Push`/`Pull`, lower-cased.
    #[serde(rename = "@mode")]
    pub mode: String,
    /// `<incremental>`: the checkpoint the backup starts from (absent: full).
    pub incremental: Option<String>,
    /// `<server transport='unix' socket=.../>` of a pull backup.
    pub server: Option<BackupServer>,
    /// `<disks>`.
    pub disks: BackupDisks,
}

/// `<server transport='unix' socket='...'/>`: the NBD server of a pull backup.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupServer {
    /// `unix`.
    #[serde(rename = "@transport")]
    pub transport: String,
    /// The Unix socket's path.
    #[serde(rename = "@socket")]
    pub socket: Option<String>,
}

/// `<disks>` of a backup.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupDisks {
    /// One per disk of the domain.
    #[serde(default)]
    pub disk: Vec<BackupDisk>,
}

/// `<disk name='vdb' backup='yes' type='file' exportname=.. exportbitmap=..>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupDisk {
    /// The disk's target device (`vdb`).
    #[serde(rename = "@name")]
    pub name: String,
    /// `yes` or `no`.
    #[serde(rename = "@backup")]
    pub backup: String,
    /// `file` when a target or scratch file is given.
    #[serde(rename = "@type")]
    pub disk_type: Option<String>,
    /// Pull mode: the NBD export's name.
    #[serde(rename = "@exportname")]
    pub export_name: Option<String>,
    /// Pull mode: the dirty bitmap exported with the disk.
    #[serde(rename = "@exportbitmap")]
    pub export_bitmap: Option<String>,
    /// Push mode: where the backup is written.
    pub target: Option<FileRef>,
    /// Pull mode: the scratch file libvirt keeps the guest's overwritten
    /// blocks in while the backup is read.
    pub scratch: Option<FileRef>,
    /// The target's or scratch file's format (`qcow2`).
    pub driver: Option<BackupDriver>,
}

/// `<target file='...'/>`, `<scratch file='...'/>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// The file's path.
    #[serde(rename = "@file")]
    pub file: String,
}

/// `<driver type='qcow2'/>` of a backup disk.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupDriver {
    /// Image format.
    #[serde(rename = "@type")]
    pub format: String,
}

/// `<domaincheckpoint>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "domaincheckpoint")]
pub struct DomainCheckpoint {
    /// The checkpoint's name (also each disk's bitmap name).
    pub name: String,
    /// `<creationTime>`: seconds since the epoch; only with a redefinition.
    #[serde(rename = "creationTime")]
    pub creation_time: Option<u64>,
    /// `<parent><name>`: only in libvirt's own description.
    pub parent: Option<CheckpointParent>,
    /// `<disks>`.
    pub disks: Option<CheckpointDisks>,
}

/// `<parent><name>..</name></parent>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointParent {
    /// The parent checkpoint's name.
    pub name: String,
}

/// `<disks>` of a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointDisks {
    /// One per disk.
    #[serde(default)]
    pub disk: Vec<CheckpointDisk>,
}

/// `<disk name='vdb' checkpoint='bitmap|no' bitmap=..>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointDisk {
    /// The disk's target device.
    #[serde(rename = "@name")]
    pub name: String,
    /// `bitmap` or `no`.
    #[serde(rename = "@checkpoint")]
    pub checkpoint: String,
    /// The bitmap's name (libvirt: the checkpoint's name when absent).
    #[serde(rename = "@bitmap")]
    pub bitmap: Option<String>,
}

fn write<T: Serialize>(v: &T) -> Result<String, XmlError> {
    let mut out = String::with_capacity(512);
    let mut ser = quick_xml::se::Serializer::new(&mut out);
    ser.indent(' ', 2);
    v.serialize(ser)?;
    out.push('\n');
    Ok(out)
}

impl DomainBackup {
    /// The XML for `virDomainBackupBegin`.
    ///
    /// # Errors
    /// [`XmlError::Write`] (a model bug).
    pub fn to_xml(&self) -> Result<String, XmlError> {
        write(self)
    }

    /// Parses libvirt's `virDomainBackupGetXMLDesc`.
    ///
    /// # Errors
    /// [`XmlError::Read`].
    pub fn from_xml(xml: &str) -> Result<DomainBackup, XmlError> {
        Ok(quick_xml::de::from_str(xml)?)
    }
}

impl DomainCheckpoint {
    /// The XML for `virDomainCheckpointCreateXML` (and `virDomainBackupBegin`).
    ///
    /// # Errors
    /// [`XmlError::Write`] (a model bug).
    pub fn to_xml(&self) -> Result<String, XmlError> {
        write(self)
    }

    /// Parses libvirt's `virDomainCheckpointGetXMLDesc`.
    ///
    /// # Errors
    /// [`XmlError::Read`].
    pub fn from_xml(xml: &str) -> Result<DomainCheckpoint, XmlError> {
        Ok(quick_xml::de::from_str(xml)?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write as _;

    /// `virt-xml-validate FILE TYPE` on `xml`.
    fn validate(xml: &str, schema: &str) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.xml");
        std::fs::File::create(&p)
            .unwrap()
            .write_all(xml.as_bytes())
            .unwrap();
        let mut cmd = std::process::Command::new("virt-xml-validate");
        cmd.arg(&p).arg(schema);
        if let Err(e) = process::run(cmd, std::time::Duration::from_secs(60), 1 << 16) {
            panic!("{schema}: {xml}\n{e}");
        }
    }

    fn push_incremental() -> DomainBackup {
        DomainBackup {
            mode: "push".into(),
            incremental: Some("b1-2026-12-02_10-00-00".into()),
            server: None,
            disks: BackupDisks {
                disk: vec![
                    BackupDisk {
                        name: "vda".into(),
                        backup: "no".into(),
                        ..BackupDisk::default()
                    },
                    BackupDisk {
                        name: "vdb".into(),
                        backup: "yes".into(),
                        disk_type: Some("file".into()),
                        target: Some(FileRef {
                            file: "/backup/vm/b2-x/b2-data&<'.qcow2".into(),
                        }),
                        driver: Some(BackupDriver {
                            format: "qcow2".into(),
                        }),
                        ..BackupDisk::default()
                    },
                ],
            },
        }
    }

    #[test]
    fn push_backup_xml_is_libvirts() {
        let b = push_incremental();
        let xml = b.to_xml().unwrap();
        assert!(xml.starts_with("<domainbackup mode=\"push\">"), "{xml}");
        assert!(
            xml.contains("<incremental>b1-2026-12-02_10-00-00</incremental>"),
            "{xml}"
        );
        assert!(
            xml.contains("file=\"/backup/vm/b2-x/b2-data&amp;&lt;'.qcow2\""),
            "{xml}"
        );
        validate(&xml, "domainbackup");
        assert_eq!(DomainBackup::from_xml(&xml).unwrap(), b);
    }

    #[test]
    fn pull_backup_xml_is_libvirts() {
        let b = DomainBackup {
            mode: "pull".into(),
            incremental: None,
            server: Some(BackupServer {
                transport: "unix".into(),
                socket: Some("/var/run/kubevirt/sockets/backup-nbd-sock".into()),
            }),
            disks: BackupDisks {
                disk: vec![BackupDisk {
                    name: "vdb".into(),
                    backup: "yes".into(),
                    disk_type: Some("file".into()),
                    export_name: Some("data".into()),
                    export_bitmap: Some("b1-2026-12-02_10-00-00".into()),
                    scratch: Some(FileRef {
                        file: "/backup/b1-data.qcow2".into(),
                    }),
                    ..BackupDisk::default()
                }],
            },
        };
        let xml = b.to_xml().unwrap();
        validate(&xml, "domainbackup");
        assert_eq!(DomainBackup::from_xml(&xml).unwrap(), b);
    }

    #[test]
    fn checkpoint_xml_is_libvirts() {
        let c = DomainCheckpoint {
            name: "b1-2026-12-02_10-00-00".into(),
            creation_time: Some(1_796_205_600),
            parent: None,
            disks: Some(CheckpointDisks {
                disk: vec![
                    CheckpointDisk {
                        name: "vda".into(),
                        checkpoint: "no".into(),
                        bitmap: None,
                    },
                    CheckpointDisk {
                        name: "vdb".into(),
                        checkpoint: "bitmap".into(),
                        bitmap: None,
                    },
                ],
            }),
        };
        let xml = c.to_xml().unwrap();
        assert!(
            xml.contains("<creationTime>1796205600</creationTime>"),
            "{xml}"
        );
        validate(&xml, "domaincheckpoint");
        assert_eq!(DomainCheckpoint::from_xml(&xml).unwrap(), c);
        // libvirt's own description carries more; unknown parts are ignored.
        let libvirt = "<domaincheckpoint><name>c2</name><parent><name>c1</name></parent>\
            <creationTime>5</creationTime><disks><disk name='vdb' checkpoint='bitmap' bitmap='c2'/>\
            </disks><domain type='qemu'><name>x</name></domain></domaincheckpoint>";
        let parsed = DomainCheckpoint::from_xml(libvirt).unwrap();
        assert_eq!(parsed.parent.unwrap().name, "c1");
        assert_eq!(parsed.disks.unwrap().disk[0].bitmap.as_deref(), Some("c2"));
    }
}
