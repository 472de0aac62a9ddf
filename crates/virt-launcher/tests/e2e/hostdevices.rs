//! GPUs and host devices at start (issue 17): a VMI with a GPU and a USB
//! host device whose addresses come from the device plugins' variables
//! (`PCI_RESOURCE_*`, `USB_RESOURCE_*` in the launcher's environment, as
//! kubelet sets them in the pod) is converted, defined in the launcher's
//! real libvirtd, and its start fails with libvirt's own error (this
//! machine has no such devices), which the launcher reports; nothing is
//! left running. No guest boots.

use std::ffi::OsStr;
use std::time::Duration;

use crate::harness::{guest_vmi, Launcher, Opts};

#[test]
fn a_vmi_with_host_devices_is_defined_and_its_start_fails_with_libvirts_error() {
    let yaml = guest_vmi("hostdevs", "virtio").replace(
        "      rng: {}\n",
        "      rng: {}\n      gpus:\n      - {name: gpu1, deviceName: nvidia.com/GP102GL_Tesla_P40}\n      hostDevices:\n      - {name: stick, deviceName: kubevirt.io/storage}\n",
    );
    assert!(yaml.contains("gpus:"), "{yaml}");
    // Addresses no device of this machine has.
    let env: &[(&str, &OsStr)] = &[
        (
            "PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40",
            OsStr::new("0000:7f:1f.7"),
        ),
        ("USB_RESOURCE_KUBEVIRT_IO_STORAGE", OsStr::new("250:123")),
    ];
    let mut l = Launcher::start(
        &yaml,
        &Opts {
            env,
            ..Opts::default()
        },
    );
    let st = l.wait_exit(Duration::from_secs(180));
    let log = l.log();
    assert!(
        !st.success(),
        "the start cannot succeed without the devices\n{log}"
    );
    // Defined (libvirt accepted the domain with both host devices) ...
    assert!(log.contains("domain defined"), "{log}");
    // ... and refused to start it, in its words.
    assert!(log.contains("LibvirtError(Code="), "{log}");
    assert!(
        log.contains("0000:7f:1f.7") || log.contains("250:123") || log.contains("250.123"),
        "libvirt's error names a missing device:\n{log}"
    );
    if let Some(line) = log.lines().find(|l| l.contains("LibvirtError(")) {
        println!("the launcher reports: {line}");
    }
    l.assert_nothing_left();
}
