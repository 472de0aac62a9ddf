//! `<iothreads>` and the I/O thread of each disk from
//! `spec.domain.ioThreadsPolicy` and `disks[].dedicatedIOThread`
//! (KubeVirt v1.6.6 converter `setIOThreads`; facts section 4.5).

use api::quantity::Quantity;
use api::vmi::{Bus, IoThreadsPolicy};
use api::VirtualMachineInstance;
use domain::{Controller, ControllerDriver, Disk, DriverIoThread, DriverIoThreads};

use crate::ConvertError;

/// The most `supplementalPoolThreadCount` accepts. KubeVirt sets no upper
/// bound (its admitter only requires at least 1) and writes one `<iothread>`
/// per thread into every virtio disk, so the count multiplies the domain's
/// size; QEMU maps a virtio-blk disk's virtqueues over the pool, and a disk
/// has at most `VIRTIO_QUEUE_MAX` (1024) virtqueues, so more threads than
/// that can never all serve a disk. Refused by field before any work
/// (issue 19: 4294967295 allocated 17 GB and aborted).
pub const MAX_SUPPLEMENTAL_POOL_THREADS: u32 = 1024;

/// The CPUs requested for the pod (`requests.cpu`, else `limits.cpu`,
/// rounded up), at least 1.
fn requested_cpus(vmi: &VirtualMachineInstance) -> u32 {
    let res = &vmi.spec.domain.resources;
    res.requests
        .get("cpu")
        .or_else(|| res.limits.get("cpu"))
        .and_then(|q: &Quantity| q.value_ceil().ok())
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(1)
        .max(1)
}

/// Assigns I/O threads; returns the `<iothreads>` count, or `None` when the
/// VMI sets no policy and no disk asks for a dedicated thread.
///
/// - `supplementalPool`: N = `supplementalPoolThreadCount`; every virtio disk
///   gets `<driver><iothreads><iothread id='1'/>…<iothread id='N'/>`.
/// - otherwise the pool limit is 1 (`shared`) or 2 × requested CPUs
///   (`auto`; 1 with dedicated CPUs and an isolated emulator thread).
///   Dedicated = disks with `dedicatedIOThread`, shared = all other disks;
///   when both exceed the limit, shared = max(1, limit − dedicated).
///   `<iothreads>` = shared + dedicated; virtio disks with a dedicated
///   thread take ids shared+1, shared+2 …, the others ids 1..shared round
///   robin in disk order. A dedicated SCSI disk puts the SCSI controller on
///   the next shared id with one queue per vCPU.
///
/// `disks` are the converted disks, in `spec.domain.devices.disks` order.
///
/// # Errors
/// [`ConvertError::Invalid`] for an unknown policy or a `supplementalPool`
/// without a positive thread count.
pub fn apply(
    vmi: &VirtualMachineInstance,
    vcpus: u32,
    disks: &mut [Disk],
    controllers: &mut [Controller],
) -> Result<Option<u32>, ConvertError> {
    let dom = &vmi.spec.domain;
    let spec_disks = &dom.devices.disks;
    let any_dedicated = spec_disks
        .iter()
        .any(|d| d.dedicated_io_thread == Some(true));
    let policy = match &dom.io_threads_policy {
        Some(IoThreadsPolicy::Other(p)) => {
            return Err(ConvertError::invalid(
                "spec.domain.ioThreadsPolicy",
                format!("Invalid IOThreadsPolicy ({p})"),
            ))
        }
        Some(p) => p.clone(),
        None if any_dedicated => IoThreadsPolicy::Shared,
        None => return Ok(None),
    };
    let is_virtio = |d: &Disk| d.target.bus.as_deref() == Some(Bus::Virtio.as_str());
    if policy == IoThreadsPolicy::SupplementalPool {
        let count = dom
            .io_threads
            .as_ref()
            .and_then(|t| t.supplemental_pool_thread_count)
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                ConvertError::invalid(
                    "spec.domain.ioThreads.supplementalPoolThreadCount",
                    "must be a positive number with ioThreadsPolicy supplementalPool",
                )
            })?;
        if count > MAX_SUPPLEMENTAL_POOL_THREADS {
            return Err(ConvertError::invalid(
                "spec.domain.ioThreads.supplementalPoolThreadCount",
                format!(
                    "{count} is more than {MAX_SUPPLEMENTAL_POOL_THREADS} (a virtio disk's most virtqueues, over which QEMU maps the pool)"
                ),
            ));
        }
        for d in disks.iter_mut().filter(|d| is_virtio(d)) {
            if let Some(drv) = d.driver.as_mut() {
                drv.iothreads = Some(DriverIoThreads {
                    iothread: (1..=count).map(|id| DriverIoThread { id }).collect(),
                });
            }
        }
        return Ok(Some(count));
    }
    let cpu = dom.cpu.as_ref();
    let limit = match policy {
        IoThreadsPolicy::Auto
            if cpu.is_some_and(|c| c.dedicated_cpu_placement && c.isolate_emulator_thread) =>
        {
            1
        }
        IoThreadsPolicy::Auto => requested_cpus(vmi).saturating_mul(2),
        _ => 1,
    };
    let dedicated = u32::try_from(
        spec_disks
            .iter()
            .filter(|d| d.dedicated_io_thread == Some(true))
            .count(),
    )
    .unwrap_or(u32::MAX);
    let mut shared = u32::try_from(spec_disks.len())
        .unwrap_or(u32::MAX)
        .saturating_sub(dedicated);
    if shared.saturating_add(dedicated) > limit {
        shared = limit.saturating_sub(dedicated).max(1);
    }
    let shared = shared.max(1);
    let mut next_shared = 1;
    let mut next_dedicated = shared;
    let mut scsi_dedicated = false;
    for (d, spec) in disks.iter_mut().zip(spec_disks) {
        let own = spec.dedicated_io_thread == Some(true);
        if is_virtio(d) {
            let id = if own {
                next_dedicated += 1;
                next_dedicated
            } else {
                let id = next_shared;
                next_shared = next_shared % shared + 1;
                id
            };
            if let Some(drv) = d.driver.as_mut() {
                drv.iothread = Some(id);
            }
        } else if own && d.target.bus.as_deref() == Some(Bus::Scsi.as_str()) {
            scsi_dedicated = true;
        }
    }
    if scsi_dedicated {
        if let Some(c) = controllers.iter_mut().find(|c| c.controller_type == "scsi") {
            c.driver = Some(ControllerDriver {
                iothread: Some(next_shared),
                queues: Some(vcpus.max(1)),
                iommu: None,
            });
        }
    }
    Ok(Some(shared + dedicated))
}

#[cfg(test)]
mod tests {
    // Tests read their fixtures from tests/data; the converter itself stays pure.
    #![allow(clippy::disallowed_methods)]

    use api::Arch;

    use crate::{convert, ConvertContext, ConvertError, VirtType};

    fn conv(doc: &str) -> Result<domain::Domain, ConvertError> {
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        convert(&v, &ConvertContext::new(Arch::Amd64, VirtType::Kvm))
    }

    fn ids(d: &domain::Domain) -> Vec<u32> {
        d.devices
            .disk
            .iter()
            .map(|x| x.driver.as_ref().unwrap().iothread.unwrap())
            .collect()
    }

    #[test]
    fn case_015_policy_table() {
        let p = format!(
            "{}/../../tests/data/cases/015-iothreads-policy-table.yaml",
            env!("CARGO_MANIFEST_DIR")
        );
        let doc = std::fs::read_to_string(p).unwrap();
        for (policy, cpu, n, want) in [
            ("shared", 1, 2, [2, 1, 1, 1, 1, 1, 1]),
            ("shared", 2, 2, [2, 1, 1, 1, 1, 1, 1]),
            ("auto", 1, 2, [2, 1, 1, 1, 1, 1, 1]),
            ("auto", 2, 4, [4, 1, 2, 3, 1, 2, 3]),
            ("auto", 3, 6, [6, 1, 2, 3, 4, 5, 1]),
            ("auto", 4, 7, [7, 1, 2, 3, 4, 5, 6]),
            ("auto", 5, 7, [7, 1, 2, 3, 4, 5, 6]),
        ] {
            let v = doc
                .replace(
                    "ioThreadsPolicy: auto",
                    &format!("ioThreadsPolicy: {policy}"),
                )
                .replace("cpu: \"2\"", &format!("cpu: \"{cpu}\""));
            let d = conv(&v).unwrap();
            assert_eq!(d.iothreads, Some(n), "{policy} {cpu}");
            assert_eq!(ids(&d), want, "{policy} {cpu}");
            let x = d.to_xml().unwrap();
            assert!(x.contains(&format!("<iothreads>{n}</iothreads>")), "{x}");
        }
    }

    const BASE: &str = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: io, uid: u1}\nspec:\n  domain:\n    memory: {guest: 128Mi}\n";

    #[test]
    fn no_policy_and_no_dedicated_disk_means_no_iothreads() {
        let d = conv(&format!("{BASE}    devices:\n      disks:\n      - {{name: a, disk: {{bus: virtio}}}}\n  volumes:\n  - {{name: a, containerDisk: {{image: x}}}}\n")).unwrap();
        assert_eq!(d.iothreads, None);
        assert_eq!(d.devices.disk[0].driver.as_ref().unwrap().iothread, None);
    }

    #[test]
    fn dedicated_disk_alone_uses_the_shared_policy_and_skips_non_virtio() {
        let d = conv(&format!("{BASE}    devices:\n      disks:\n      - {{name: a, dedicatedIOThread: true, disk: {{bus: virtio}}}}\n      - {{name: b, disk: {{bus: sata}}}}\n      - {{name: c, disk: {{bus: virtio}}}}\n  volumes:\n  - {{name: a, containerDisk: {{image: x}}}}\n  - {{name: b, containerDisk: {{image: x}}}}\n  - {{name: c, containerDisk: {{image: x}}}}\n")).unwrap();
        assert_eq!(d.iothreads, Some(2));
        let got: Vec<Option<u32>> = d
            .devices
            .disk
            .iter()
            .map(|x| x.driver.as_ref().unwrap().iothread)
            .collect();
        assert_eq!(got, [Some(2), None, Some(1)]);
    }

    #[test]
    fn dedicated_scsi_disk_puts_the_controller_on_a_thread() {
        let d = conv(&format!("{BASE}    cpu: {{sockets: 2}}\n    ioThreadsPolicy: shared\n    devices:\n      disks:\n      - {{name: a, dedicatedIOThread: true, disk: {{bus: scsi}}}}\n  volumes:\n  - {{name: a, containerDisk: {{image: x}}}}\n")).unwrap();
        let c = d
            .devices
            .controller
            .iter()
            .find(|c| c.controller_type == "scsi")
            .unwrap();
        let drv = c.driver.as_ref().unwrap();
        assert_eq!((drv.iothread, drv.queues), (Some(1), Some(2)));
    }

    #[test]
    fn supplemental_pool_gives_every_virtio_disk_all_threads() {
        let d = conv(&format!("{BASE}    ioThreadsPolicy: supplementalPool\n    ioThreads: {{supplementalPoolThreadCount: 3}}\n    devices:\n      disks:\n      - {{name: a, disk: {{bus: virtio}}}}\n      - {{name: b, disk: {{bus: sata}}}}\n  volumes:\n  - {{name: a, containerDisk: {{image: x}}}}\n  - {{name: b, containerDisk: {{image: x}}}}\n")).unwrap();
        assert_eq!(d.iothreads, Some(3));
        let x = d.to_xml().unwrap();
        assert!(x.contains("<iothreads>\n          <iothread id=\"1\"/>\n          <iothread id=\"2\"/>\n          <iothread id=\"3\"/>\n        </iothreads>"), "{x}");
        assert!(d.devices.disk[1]
            .driver
            .as_ref()
            .unwrap()
            .iothreads
            .is_none());
        let e = conv(&format!("{BASE}    ioThreadsPolicy: supplementalPool\n")).unwrap_err();
        assert_eq!(e.to_string(), "spec.domain.ioThreads.supplementalPoolThreadCount: must be a positive number with ioThreadsPolicy supplementalPool");
        // Issue 19: 4294967295 aborted after a 17 GB allocation, 10,000,000
        // took 4.4 s and wrote 349 MB of XML. Refused by field, at once.
        for n in ["4294967295", "10000000", "1025"] {
            let e = conv(&format!("{BASE}    ioThreadsPolicy: supplementalPool\n    ioThreads: {{supplementalPoolThreadCount: {n}}}\n    devices:\n      disks:\n      - {{name: a, disk: {{bus: virtio}}}}\n  volumes:\n  - {{name: a, containerDisk: {{image: x}}}}\n")).unwrap_err();
            assert_eq!(e.to_string(), format!("spec.domain.ioThreads.supplementalPoolThreadCount: {n} is more than 1024 (a virtio disk's most virtqueues, over which QEMU maps the pool)"));
        }
        let d = conv(&format!("{BASE}    ioThreadsPolicy: supplementalPool\n    ioThreads: {{supplementalPoolThreadCount: 1024}}\n    devices:\n      disks:\n      - {{name: a, disk: {{bus: virtio}}}}\n  volumes:\n  - {{name: a, containerDisk: {{image: x}}}}\n")).unwrap();
        assert_eq!(d.iothreads, Some(1024));
        let e = conv(&format!("{BASE}    ioThreadsPolicy: many\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.domain.ioThreadsPolicy: Invalid IOThreadsPolicy (many)"
        );
    }
}
