//! `<cputune>` for `spec.domain.cpu.dedicatedCpuPlacement`: vCPU, emulator
//! and I/O thread pinning onto the pod's exclusive CPUs (KubeVirt v1.6.6
//! converter `vcpu` package; facts section 4.2).
//!
//! The host CPUs come from the pod's cgroup cpuset, read by the launcher
//! into [`crate::ConvertContext::pod_cpuset`]. They are used in the order
//! the kernel lists them: KubeVirt additionally fits vCPUs onto whole cores
//! of the node's NUMA topology (sent by virt-handler); this launcher does
//! not receive that topology, so a VMI asking for guest NUMA passthrough is
//! refused (see [`crate::unsupported`]).

use api::vmi::IoThreadsPolicy;
use api::VirtualMachineInstance;
use domain::{CpuPin, CpuTune, EmulatorPin, IoThreadPin};

use crate::{ConvertContext, ConvertError};

/// Annotation that gives an isolated emulator thread a second CPU when the
/// vCPU count is even (so the pod gets whole cores).
pub const EMULATOR_EVEN_PARITY: &str = "alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity";

/// Why a Linux CPU list (`cpuset.cpus`) did not parse: the element named.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// An element that is no CPU number, nor two joined by `-`.
    #[error("{0:?} is not a CPU number or range")]
    NotANumber(String),
    /// A range that runs backwards or spans more than 65,536 CPUs.
    #[error("{0:?} is not a CPU range")]
    BadRange(String),
}

/// Parses a Linux CPU list (`0-3,8,10-11`, as in `cpuset.cpus`) into CPU
/// numbers in the order given.
///
/// # Errors
/// [`CpuListError`] naming the bad element.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, CpuListError> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let num = |x: &str| {
            x.trim()
                .parse::<u32>()
                .map_err(|_| CpuListError::NotANumber(api::text::cut(part, 64)))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a || b - a > 65_535 {
                    return Err(CpuListError::BadRange(api::text::cut(part, 64)));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    Ok(out)
}

fn list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Dedicated CPUs are whole CPUs the pod gets exclusively (Kubernetes'
/// static CPU manager needs the Guaranteed QoS class): a CPU request or
/// limit must be a whole number, and when both are given they must be
/// equal (KubeVirt's admission for `dedicatedCpuPlacement`).
///
/// # Errors
/// [`ConvertError::Invalid`] naming the resource field.
fn check_dedicated_resources(vmi: &VirtualMachineInstance) -> Result<(), ConvertError> {
    let res = &vmi.spec.domain.resources;
    let milli = |k: &str| -> Result<Option<i64>, ConvertError> {
        let map = if k == "requests" {
            &res.requests
        } else {
            &res.limits
        };
        let Some(q) = map.get("cpu") else {
            return Ok(None);
        };
        let field = format!("spec.domain.resources.{k}.cpu");
        let m = q
            .milli_value()
            .map_err(|e| ConvertError::invalid(&field, e.to_string()))?;
        if m % 1000 != 0 {
            return Err(ConvertError::invalid(
                field,
                format!("{q} is not a whole number of CPUs, which spec.domain.cpu.dedicatedCpuPlacement needs"),
            ));
        }
        Ok(Some(m))
    };
    let (req, lim) = (milli("requests")?, milli("limits")?);
    if let (Some(r), Some(l)) = (req, lim) {
        if r != l {
            return Err(ConvertError::invalid(
                "spec.domain.resources.requests.cpu",
                "must equal spec.domain.resources.limits.cpu with spec.domain.cpu.dedicatedCpuPlacement",
            ));
        }
    }
    Ok(())
}

/// Pins `vcpus` vCPUs (those online at boot) and `iothreads` I/O threads
/// for a VMI with `dedicatedCpuPlacement`; `None` without it.
///
/// - vCPU i → the i-th pod CPU (`<vcpupin vcpu=i cpuset=…/>`);
/// - `isolateEmulatorThread` → `<emulatorpin>` on the next CPU (the next
///   two when the VMI has the annotation
///   `alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity` and an even
///   vCPU count);
/// - I/O threads: with `supplementalPool`, thread t on the CPU after the
///   vCPUs (and the emulator's) plus t−1; with an isolated emulator thread,
///   thread 1 only, on the emulator's CPUs; with at least as many threads as vCPUs, thread
///   t on the CPU of vCPU (t−1) mod vCPUs; otherwise each thread on its own
///   contiguous slice of the vCPUs' CPUs.
///
/// # Errors
/// [`ConvertError::Host`] when the pod's cpuset is unknown or holds too few
/// CPUs (KubeVirt: `not enough exclusive threads provided, could not fit N
/// core(s)`); [`ConvertError::Invalid`] for `isolateEmulatorThread` without
/// `dedicatedCpuPlacement` and for realtime without dedicated CPUs.
pub fn convert(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    vcpus: u32,
    iothreads: Option<u32>,
) -> Result<Option<CpuTune>, ConvertError> {
    let Some(cpu) = vmi.spec.domain.cpu.as_ref() else {
        return Ok(None);
    };
    if !cpu.dedicated_cpu_placement {
        if cpu.isolate_emulator_thread {
            return Err(ConvertError::invalid(
                "spec.domain.cpu.isolateEmulatorThread",
                "can only be set together with spec.domain.cpu.dedicatedCpuPlacement",
            ));
        }
        if cpu.realtime.is_some() {
            return Err(ConvertError::invalid(
                "spec.domain.cpu.realtime",
                "needs spec.domain.cpu.dedicatedCpuPlacement",
            ));
        }
        return Ok(None);
    }
    check_dedicated_resources(vmi)?;
    let pool = ctx.pod_cpuset.as_deref().ok_or_else(|| {
        ConvertError::Host(
            "spec.domain.cpu.dedicatedCpuPlacement needs the pod's cpuset, which this host did not provide".into(),
        )
    })?;
    let v = usize::try_from(vcpus).unwrap_or(usize::MAX);
    let emulator = if cpu.isolate_emulator_thread {
        let even =
            vmi.metadata.annotations.contains_key(EMULATOR_EVEN_PARITY) && vcpus.is_multiple_of(2);
        if even {
            2
        } else {
            1
        }
    } else {
        0
    };
    let supplemental = vmi.spec.domain.io_threads_policy == Some(IoThreadsPolicy::SupplementalPool);
    let pool_threads = if supplemental {
        usize::try_from(iothreads.unwrap_or(0)).unwrap_or(usize::MAX)
    } else {
        0
    };
    let needed = v.saturating_add(emulator).saturating_add(pool_threads);
    if pool.len() < needed {
        return Err(ConvertError::Host(format!(
            "not enough exclusive threads provided, could not fit {vcpus} core(s): the pod's cpuset has {} CPU(s), {needed} are needed",
            pool.len()
        )));
    }
    let (vcpu_cpus, rest) = pool.split_at(v);
    let mut tune = CpuTune {
        vcpupin: vcpu_cpus
            .iter()
            .zip(0..)
            .map(|(c, i)| CpuPin {
                vcpu: i,
                cpuset: c.to_string(),
            })
            .collect(),
        ..CpuTune::default()
    };
    let emulator_cpus = &rest[..emulator];
    if emulator > 0 {
        tune.emulatorpin = Some(EmulatorPin {
            cpuset: list(emulator_cpus),
        });
    }
    if let Some(n) = iothreads.filter(|n| *n > 0) {
        let pins: Vec<String> = if supplemental {
            rest[emulator..emulator + pool_threads]
                .iter()
                .map(u32::to_string)
                .collect()
        } else if emulator > 0 {
            // KubeVirt pins I/O thread 1 only, next to the emulator
            // thread; the others float over the pod's CPUs.
            vec![list(emulator_cpus)]
        } else if n >= vcpus {
            (0..n as usize)
                .map(|t| vcpu_cpus[t % v.max(1)].to_string())
                .collect()
        } else {
            let n = n as usize;
            let (base, extra) = (v / n, v % n);
            let mut start = 0;
            (0..n)
                .map(|t| {
                    let len = base + usize::from(t < extra);
                    let s = list(&vcpu_cpus[start..start + len]);
                    start += len;
                    s
                })
                .collect()
        };
        tune.iothreadpin = pins
            .into_iter()
            .zip(1..)
            .map(|(cpuset, iothread)| IoThreadPin { iothread, cpuset })
            .collect();
    }
    Ok(Some(tune))
}

#[cfg(test)]
mod tests {
    use api::Arch;

    use super::parse_cpu_list;
    use crate::{convert, ConvertContext, ConvertError, VirtType};

    fn conv(domain: &str, cpuset: Option<&str>) -> Result<domain::Domain, ConvertError> {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: c, uid: u1, annotations: {{a: b}}}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n{domain}"
        );
        let v = api::load_vmi(doc.as_bytes(), Arch::Amd64).unwrap();
        let mut ctx = ConvertContext::new(Arch::Amd64, VirtType::Kvm);
        ctx.pod_cpuset = cpuset.map(|s| parse_cpu_list(s).unwrap());
        convert(&v, &ctx)
    }

    fn pins(t: &domain::CpuTune) -> Vec<(u32, String)> {
        t.vcpupin
            .iter()
            .map(|p| (p.vcpu, p.cpuset.clone()))
            .collect()
    }

    fn iothread_pins(t: &domain::CpuTune) -> Vec<(u32, String)> {
        t.iothreadpin
            .iter()
            .map(|p| (p.iothread, p.cpuset.clone()))
            .collect()
    }

    #[test]
    fn cpu_lists_parse_like_the_kernel_writes_them() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<u32>::new());
        assert_eq!(
            parse_cpu_list("3-1").unwrap_err(),
            super::CpuListError::BadRange("3-1".into())
        );
        assert_eq!(
            parse_cpu_list("0,a").unwrap_err().to_string(),
            "\"a\" is not a CPU number or range"
        );
    }

    #[test]
    fn dedicated_cpus_need_whole_and_equal_cpu_requests_and_limits() {
        let e = conv(
            "    cpu: {dedicatedCpuPlacement: true}\n    resources: {requests: {cpu: 1500m}}\n",
            Some("0-3"),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "spec.domain.resources.requests.cpu: 1500m is not a whole number of CPUs, which spec.domain.cpu.dedicatedCpuPlacement needs");
        let e = conv(
            "    cpu: {dedicatedCpuPlacement: true}\n    resources: {requests: {cpu: 2}, limits: {cpu: 3}}\n",
            Some("0-3"),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "spec.domain.resources.requests.cpu: must equal spec.domain.resources.limits.cpu with spec.domain.cpu.dedicatedCpuPlacement");
        // Only a limit: the request defaults to it; whole and equal.
        assert!(conv(
            "    cpu: {dedicatedCpuPlacement: true}\n    resources: {limits: {cpu: 2}}\n",
            Some("0-3"),
        )
        .is_ok());
        // Without dedicated CPUs, fractions are fine.
        assert!(conv("    resources: {requests: {cpu: 1500m}}\n", None).is_ok());
    }

    #[test]
    fn dedicated_vcpus_are_pinned_in_cpuset_order_with_hint_dedicated() {
        let d = conv(
            "    cpu: {cores: 2, dedicatedCpuPlacement: true}\n",
            Some("4-5,9"),
        )
        .unwrap();
        let t = d.cputune.as_ref().unwrap();
        assert_eq!(pins(t), [(0, "4".into()), (1, "5".into())]);
        assert!(t.emulatorpin.is_none());
        let x = d.to_xml().unwrap();
        assert!(x.contains("<hint-dedicated state=\"on\"/>"), "{x}");
        assert!(x.contains("freePageReporting=\"off\""), "{x}");
    }

    #[test]
    fn isolated_emulator_thread_takes_the_next_cpu_and_the_iothreads() {
        let d = conv(
            "    ioThreadsPolicy: auto\n    cpu: {cores: 2, dedicatedCpuPlacement: true, isolateEmulatorThread: true}\n    devices:\n      disks:\n      - {name: a, disk: {bus: virtio}}\n      - {name: b, disk: {bus: virtio}}\n  volumes:\n  - {name: a, containerDisk: {image: x}}\n  - {name: b, containerDisk: {image: x}}\n",
            Some("2-4"),
        )
        .unwrap();
        // auto with an isolated emulator thread: a pool of one thread.
        assert_eq!(d.iothreads, Some(1));
        let t = d.cputune.as_ref().unwrap();
        assert_eq!(t.emulatorpin.as_ref().unwrap().cpuset, "4");
        assert_eq!(t.iothreadpin.len(), 1);
        assert_eq!(
            (t.iothreadpin[0].iothread, t.iothreadpin[0].cpuset.as_str()),
            (1, "4")
        );
    }

    /// KubeVirt v1.6.6 `FormatDomainIOThreadPin`: with an isolated
    /// emulator thread only I/O thread 1 is pinned (to the emulator's CPU),
    /// however many threads a dedicated disk adds.
    #[test]
    fn isolated_emulator_thread_pins_only_iothread_1() {
        let d = conv(
            "    ioThreadsPolicy: shared
    cpu: {cores: 2, dedicatedCpuPlacement: true, isolateEmulatorThread: true}
    devices:
      disks:
      - {name: a, dedicatedIOThread: true, disk: {bus: virtio}}
      - {name: b, disk: {bus: virtio}}
  volumes:
  - {name: a, containerDisk: {image: x}}
  - {name: b, containerDisk: {image: x}}
",
            Some("2-4"),
        )
        .unwrap();
        assert_eq!(d.iothreads, Some(2));
        let t = d.cputune.as_ref().unwrap();
        assert_eq!(t.emulatorpin.as_ref().unwrap().cpuset, "4");
        assert_eq!(iothread_pins(t), [(1, "4".to_owned())]);
    }

    #[test]
    fn iothreads_share_the_vcpu_cpus_in_slices() {
        let d = conv(
            "    ioThreadsPolicy: shared\n    cpu: {cores: 4, dedicatedCpuPlacement: true}\n    devices:\n      disks:\n      - {name: a, dedicatedIOThread: true, disk: {bus: virtio}}\n      - {name: b, disk: {bus: virtio}}\n  volumes:\n  - {name: a, containerDisk: {image: x}}\n  - {name: b, containerDisk: {image: x}}\n",
            Some("0-3"),
        )
        .unwrap();
        let got = iothread_pins(&d.cputune.unwrap());
        assert_eq!(got, [(1, "0,1".to_owned()), (2, "2,3".to_owned())]);
    }

    #[test]
    fn supplemental_pool_threads_get_cpus_after_the_vcpus() {
        let d = conv(
            "    ioThreadsPolicy: supplementalPool\n    ioThreads: {supplementalPoolThreadCount: 2}\n    cpu: {cores: 1, dedicatedCpuPlacement: true}\n",
            Some("0-2"),
        )
        .unwrap();
        let got = iothread_pins(&d.cputune.unwrap());
        assert_eq!(got, [(1, "1".to_owned()), (2, "2".to_owned())]);
    }

    #[test]
    fn too_few_or_unknown_cpus_and_contradictions_are_refused() {
        let e = conv(
            "    cpu: {cores: 2, dedicatedCpuPlacement: true}\n",
            Some("0"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("not enough exclusive threads provided, could not fit 2 core(s)"),
            "{e}"
        );
        let e = conv("    cpu: {cores: 2, dedicatedCpuPlacement: true}\n", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs the pod's cpuset"), "{e}");
        let e = conv("    cpu: {isolateEmulatorThread: true}\n", Some("0-3"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "spec.domain.cpu.isolateEmulatorThread: can only be set together with spec.domain.cpu.dedicatedCpuPlacement");
        let e = conv("    cpu: {realtime: {}}\n", Some("0-3"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "spec.domain.cpu.realtime: needs spec.domain.cpu.dedicatedCpuPlacement"
        );
    }

    #[test]
    fn realtime_turns_the_pmu_off() {
        let d = conv(
            "    cpu: {cores: 1, dedicatedCpuPlacement: true, realtime: {mask: \"0\"}}\n",
            Some("0"),
        )
        .unwrap();
        let x = d.to_xml().unwrap();
        assert!(x.contains("<pmu state=\"off\"/>"), "{x}");
    }

    #[test]
    fn max_sockets_makes_hotpluggable_vcpus() {
        let d = conv(
            "    cpu: {sockets: 2, cores: 2, threads: 1, maxSockets: 4}\n",
            None,
        )
        .unwrap();
        assert_eq!((d.vcpu.count, d.vcpu.current), (8, Some(4)));
        let t = d.cpu.as_ref().unwrap().topology.as_ref().unwrap();
        assert_eq!(t.sockets, 4);
        let v = d.vcpus.as_ref().unwrap();
        let flags: Vec<(&str, &str)> = v
            .vcpu
            .iter()
            .map(|c| (c.enabled.as_str(), c.hotpluggable.as_str()))
            .collect();
        assert_eq!(
            flags,
            [
                ("yes", "no"),
                ("yes", "no"),
                ("yes", "yes"),
                ("yes", "yes"),
                ("no", "yes"),
                ("no", "yes"),
                ("no", "yes"),
                ("no", "yes")
            ]
        );
        let x = d.to_xml().unwrap();
        assert!(
            x.contains("<vcpu placement=\"static\" current=\"4\">8</vcpu>"),
            "{x}"
        );
        let e = conv("    cpu: {sockets: 2, maxSockets: 1}\n", None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "spec.domain.cpu.maxSockets: 1 must be greater than or equal to spec.domain.cpu.sockets (2)"
        );
        // arm64: not applied.
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: c, uid: u1}\nspec:\n  domain:\n    memory: {guest: 1Gi}\n    cpu: {sockets: 2, maxSockets: 4}\n";
        let v = api::load_vmi(doc.as_bytes(), Arch::Arm64).unwrap();
        let d = convert(&v, &ConvertContext::new(Arch::Arm64, VirtType::Kvm)).unwrap();
        assert_eq!((d.vcpu.count, d.vcpu.current), (2, None));
        assert!(d.vcpus.is_none());
    }
}
