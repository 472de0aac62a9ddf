//! virtiofs `<filesystem>` devices from `spec.domain.devices.filesystems`
//! (KubeVirt v1.6.6 converter; the shared memfd memory they need is set by
//! [`crate::memory`]).

use api::layout::virtiofs_socket;
use api::VirtualMachineInstance;
use domain::{Filesystem, FilesystemDriver, FilesystemSource, FilesystemTarget};

use crate::ConvertError;

/// Queue size KubeVirt gives every virtiofs device.
pub const VIRTIOFS_QUEUE: u32 = 1024;

/// One `<filesystem type='mount' accessmode='passthrough'>` per filesystem:
/// `<driver type='virtiofs' queue='1024'/>`, `<source socket=…/>` of the
/// virtiofsd that serves the volume, `<target dir='<name>'/>` (the mount
/// tag in the guest).
///
/// # Errors
/// [`ConvertError::Invalid`] for a filesystem without `virtiofs`, or one
/// that names no volume or a volume a disk also uses.
pub fn convert(vmi: &VirtualMachineInstance) -> Result<Vec<Filesystem>, ConvertError> {
    let spec = &vmi.spec;
    let mut out = Vec::with_capacity(spec.domain.devices.filesystems.len());
    // Looked up per filesystem in sets, not searched (issue 19: counts
    // in the tens of thousands made per-item searches quadratic).
    let volumes: std::collections::BTreeSet<&str> =
        spec.volumes.iter().map(|v| v.name.as_str()).collect();
    let disks: std::collections::BTreeSet<&str> = spec
        .domain
        .devices
        .disks
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    for (i, fs) in spec.domain.devices.filesystems.iter().enumerate() {
        let path = format!("spec.domain.devices.filesystems[{i}]");
        if fs.virtiofs.is_none() {
            return Err(ConvertError::invalid(
                format!("{path}.virtiofs"),
                "required: virtiofs is the only filesystem type",
            ));
        }
        if !volumes.contains(fs.name.as_str()) {
            return Err(ConvertError::invalid(
                format!("{path}.name"),
                format!("volume {:?} not found in spec.volumes", fs.name),
            ));
        }
        if disks.contains(fs.name.as_str()) {
            return Err(ConvertError::invalid(
                format!("{path}.name"),
                format!("volume {:?} is also used by a disk", fs.name),
            ));
        }
        out.push(Filesystem {
            fs_type: "mount".into(),
            access_mode: Some("passthrough".into()),
            driver: Some(FilesystemDriver {
                driver_type: "virtiofs".into(),
                queue: Some(VIRTIOFS_QUEUE),
            }),
            source: Some(FilesystemSource {
                socket: Some(virtiofs_socket(&fs.name)),
            }),
            target: FilesystemTarget {
                dir: fs.name.clone(),
            },
            alias: None,
        });
    }
    Ok(out)
}
