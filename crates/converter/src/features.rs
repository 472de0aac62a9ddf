//! `<features>` and `<clock>` from `spec.domain.features` and `spec.domain.clock`.

use api::vmi::{CpuFeaturePolicy, TickPolicy, TimerSpec, TimerTrack};
use api::{Arch, VirtualMachineInstance};
use domain::{
    Clock, Empty, FeatureState, Features, HyperV, HyperVSpinlocks, HyperVStimer, HyperVVendorId,
    KvmFeatures, Timer,
};

use crate::arch::ArchCaps;
use crate::ConvertError;

/// Default Hyper-V spinlock retries (KubeVirt's API default).
pub const DEFAULT_SPINLOCK_RETRIES: u32 = 4096;
/// Fewest spinlock retries libvirt and KubeVirt accept.
pub const MIN_SPINLOCK_RETRIES: u32 = 4095;
/// Longest Hyper-V vendor id (12 characters, a CPUID leaf of 3 registers).
pub const MAX_VENDOR_ID_LEN: usize = 12;

/// `<acpi/>` unless disabled (never on ppc64le and s390x, whose machines
/// have no ACPI), `<apic/>` and
/// `<smm/>` when set and not disabled, `<hyperv>` (each enlightenment
/// `state='on|off'`, on when `enabled` is absent; `spinlocks` with
/// `retries`, `vendor_id` with `value`, `stimer` with `<direct>`) or
/// `<hyperv mode='passthrough'/>` when only `hypervPassthrough` is enabled,
/// `<kvm>` with `<hidden/>` and, for dedicated CPUs on amd64,
/// `<hint-dedicated state='on'/>`, `<pvspinlock>`, `<pmu state='off'/>` for
/// realtime, and on amd64 `<vmport state='off'/>`.
///
/// # Errors
/// [`ConvertError::Invalid`] for ACPI enabled on ppc64le or s390x,
/// realtime on ppc64le (its PMU cannot be turned off), Hyper-V on an
/// architecture other than amd64, spinlock retries under 4095, or a vendor id longer than 12
/// characters or with characters XML cannot carry.
pub fn convert(vmi: &VirtualMachineInstance, caps: &ArchCaps) -> Result<Features, ConvertError> {
    let f = vmi.spec.domain.features.clone().unwrap_or_default();
    let on = |s: &Option<api::vmi::FeatureState>| s.as_ref().is_some_and(|s| s.is_enabled());
    let acpi = match &f.acpi {
        Some(s) if s.is_enabled() && !caps.acpi => {
            return Err(ConvertError::invalid(
                "spec.domain.features.acpi",
                format!(
                    "ACPI is not available on {} (its machine type has none): remove it or set enabled: false",
                    caps.arch
                ),
            ))
        }
        Some(s) => s.is_enabled(),
        None => caps.acpi,
    };
    let cpu = vmi.spec.domain.cpu.as_ref();
    let realtime = cpu.is_some_and(|c| c.realtime.is_some());
    if realtime && !caps.pmu_off {
        return Err(ConvertError::invalid(
            "spec.domain.cpu.realtime",
            format!(
                "realtime turns the PMU off, which {} cannot do (its PMU is always enabled)",
                caps.arch
            ),
        ));
    }
    let dedicated = cpu.is_some_and(|c| c.dedicated_cpu_placement) && caps.arch == Arch::Amd64;
    let hidden = f.kvm.as_ref().is_some_and(|k| k.hidden);
    let kvm = (hidden || dedicated).then(|| KvmFeatures {
        hidden: hidden.then(|| FeatureState::on_off(true)),
        hint_dedicated: dedicated.then(|| FeatureState::on_off(true)),
    });
    let mut hyperv = match &f.hyperv {
        Some(h) => Some(hyperv(h)?),
        None => f
            .hyperv_passthrough
            .as_ref()
            .filter(|p| p.is_enabled())
            .map(|_| HyperV {
                mode: Some("passthrough".into()),
                ..HyperV::default()
            }),
    };
    if hyperv.is_some() && caps.arch != Arch::Amd64 {
        let field = if f.hyperv.is_some() {
            "spec.domain.features.hyperv"
        } else {
            "spec.domain.features.hypervPassthrough"
        };
        return Err(ConvertError::invalid(
            field,
            format!("Hyper-V enlightenments are not available on {}", caps.arch),
        ));
    }
    if hyperv.as_ref().is_some_and(|h| *h == HyperV::default()) {
        hyperv = None;
    }
    Ok(Features {
        acpi: acpi.then_some(Empty {}),
        apic: on(&f.apic).then_some(Empty {}),
        smm: on(&f.smm).then_some(Empty {}),
        hyperv,
        kvm,
        pvspinlock: f
            .pvspinlock
            .as_ref()
            .map(|s| FeatureState::on_off(s.is_enabled())),
        pmu: realtime.then(|| FeatureState::on_off(false)),
        vmport: caps.vmport.then(|| FeatureState::on_off(false)),
    })
}

fn hyperv(h: &api::vmi::FeatureHyperv) -> Result<HyperV, ConvertError> {
    let base = "spec.domain.features.hyperv";
    // KubeVirt's admission (IsRequirementFulfilled): defaulting enabled
    // every requirement not mentioned, so one still off was disabled.
    for (feature, requires) in api::defaults::HYPERV_DEPENDENCIES {
        if api::defaults::hyperv_state(h, feature) == Some(true)
            && api::defaults::hyperv_state(h, requires) != Some(true)
        {
            return Err(ConvertError::invalid(
                format!("{base}.{feature}"),
                format!("'{base}.{feature}' requires '{base}.{requires}', which was disabled."),
            ));
        }
    }
    let st = |s: &Option<api::vmi::FeatureState>| {
        s.as_ref().map(|s| FeatureState::on_off(s.is_enabled()))
    };
    let spinlocks = match &h.spinlocks {
        None => None,
        Some(s) if s.enabled == Some(false) => Some(HyperVSpinlocks {
            state: "off".into(),
            retries: None,
        }),
        Some(s) => {
            let retries = s.spinlocks.unwrap_or(DEFAULT_SPINLOCK_RETRIES);
            if retries < MIN_SPINLOCK_RETRIES {
                return Err(ConvertError::invalid(
                    format!("{base}.spinlocks.spinlocks"),
                    format!("{retries} must be greater than or equal to {MIN_SPINLOCK_RETRIES}"),
                ));
            }
            Some(HyperVSpinlocks {
                state: "on".into(),
                retries: Some(retries),
            })
        }
    };
    let vendor_id = match &h.vendorid {
        None => None,
        Some(v) if v.enabled == Some(false) => Some(HyperVVendorId {
            state: "off".into(),
            value: None,
        }),
        Some(v) => {
            let path = format!("{base}.vendorid.vendorid");
            if v.vendorid.is_empty() || v.vendorid.chars().count() > MAX_VENDOR_ID_LEN {
                return Err(ConvertError::invalid(
                    path,
                    format!(
                        "{:?} must be 1 to {MAX_VENDOR_ID_LEN} characters long",
                        v.vendorid
                    ),
                ));
            }
            crate::xml_text(&path, &v.vendorid)?;
            Some(HyperVVendorId {
                state: "on".into(),
                value: Some(v.vendorid.clone()),
            })
        }
    };
    let stimer = h.synictimer.as_ref().map(|t| {
        let enabled = t.enabled != Some(false);
        HyperVStimer {
            state: if enabled { "on" } else { "off" }.into(),
            direct: t
                .direct
                .as_ref()
                .filter(|_| enabled)
                .map(|d| FeatureState::on_off(d.is_enabled())),
        }
    });
    Ok(HyperV {
        mode: None,
        relaxed: st(&h.relaxed),
        vapic: st(&h.vapic),
        spinlocks,
        vpindex: st(&h.vpindex),
        runtime: st(&h.runtime),
        synic: st(&h.synic),
        stimer,
        reset: st(&h.reset),
        vendor_id,
        frequencies: st(&h.frequencies),
        reenlightenment: st(&h.reenlightenment),
        tlbflush: st(&h.tlbflush),
        ipi: st(&h.ipi),
        evmcs: st(&h.evmcs),
    })
}

/// `<clock>`: `offset='utc'` with `adjustment` = `offsetSeconds` or `reset`,
/// or `offset='timezone' timezone=...`; timers rtc, pit, kvmclock, hpet,
/// hypervclock with `present` (default yes), `tickpolicy` and (rtc) `track`.
/// No `<clock>` when the VMI has none (libvirt's default is UTC).
///
/// # Errors
/// [`ConvertError::Invalid`] for both `utc` and `timezone`, an unknown tick
/// policy or rtc track, or a time zone name that is not a plain zone path.
pub fn clock(vmi: &VirtualMachineInstance) -> Result<Option<Clock>, ConvertError> {
    let tsc = tsc_frequency(vmi)?;
    let Some(c) = &vmi.spec.domain.clock else {
        return Ok(tsc.map(|hz| Clock {
            offset: "utc".into(),
            timer: vec![tsc_timer(hz)],
            ..Clock::default()
        }));
    };
    let base = "spec.domain.clock";
    let mut clock = match (&c.utc, &c.timezone) {
        (Some(_), Some(_)) => {
            return Err(ConvertError::invalid(
                base,
                "only one of utc and timezone may be set",
            ))
        }
        (Some(utc), None) => Clock {
            offset: "utc".into(),
            adjustment: Some(match utc.offset_seconds {
                Some(s) => s.to_string(),
                None => "reset".into(),
            }),
            ..Clock::default()
        },
        (None, Some(tz)) => {
            let ok = !tz.is_empty()
                && !tz.starts_with('/')
                && !tz.split('/').any(|p| p == ".." || p == ".")
                && tz
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/_-+".contains(&b));
            if !ok {
                return Err(ConvertError::invalid(
                    format!("{base}.timezone"),
                    format!("{tz:?} is not a time zone name"),
                ));
            }
            Clock {
                offset: "timezone".into(),
                timezone: Some(tz.clone()),
                ..Clock::default()
            }
        }
        (None, None) => Clock {
            offset: "utc".into(),
            ..Clock::default()
        },
    };
    if let Some(t) = &c.timer {
        let timers: [(&str, &str, &Option<TimerSpec>); 5] = [
            ("rtc", "rtc", &t.rtc),
            ("pit", "pit", &t.pit),
            ("kvm", "kvmclock", &t.kvm),
            ("hpet", "hpet", &t.hpet),
            ("hyperv", "hypervclock", &t.hyperv),
        ];
        for (field, name, spec) in timers {
            let Some(spec) = spec else { continue };
            let path = format!("{base}.timer.{field}");
            let tickpolicy = spec
                .tick_policy
                .as_ref()
                .filter(|p| **p != TickPolicy::Unset);
            if let Some(TickPolicy::Other(p)) = tickpolicy {
                return Err(ConvertError::invalid(
                    format!("{path}.tickPolicy"),
                    format!("{p:?} is not one of {}", TickPolicy::choices()),
                ));
            }
            // KubeVirt's KVMTimer and HypervTimer carry `present` only, and
            // libvirt's schema allows no tickpolicy on kvmclock or
            // hypervclock (found by the vmi_structured fuzz target's
            // virt-xml-validate replay).
            if let (Some(p), "kvm" | "hyperv") = (tickpolicy, field) {
                return Err(ConvertError::invalid(
                    format!("{path}.tickPolicy"),
                    format!(
                        "{:?} is not valid here (the {field} timer has only present)",
                        p.as_str()
                    ),
                ));
            }
            let track = spec.track.as_ref().filter(|t| **t != TimerTrack::Unset);
            if let Some(tr) = track {
                if field != "rtc" || matches!(tr, TimerTrack::Other(_)) {
                    return Err(ConvertError::invalid(
                        format!("{path}.track"),
                        format!(
                            "{:?} is not valid here (rtc only: guest or wall)",
                            tr.as_str()
                        ),
                    ));
                }
            }
            let tickpolicy = tickpolicy.map(|p| p.as_str().to_owned());
            let track = track.map(|t| t.as_str().to_owned());
            clock.timer.push(Timer {
                name: name.into(),
                tickpolicy,
                present: Some(
                    if spec.present == Some(false) {
                        "no"
                    } else {
                        "yes"
                    }
                    .into(),
                ),
                track,
                frequency: None,
            });
        }
    }
    if let Some(hz) = tsc {
        clock.timer.push(tsc_timer(hz));
    }
    Ok(Some(clock))
}

fn tsc_timer(hz: u64) -> Timer {
    Timer {
        name: "tsc".into(),
        frequency: Some(hz),
        ..Timer::default()
    }
}

/// The TSC frequency to pin (`<timer name='tsc' frequency=Hz/>`):
/// `status.topologyHints.tscFrequency`, when the guest needs a stable TSC:
/// the CPU feature `invtsc` with policy `require` or `force`, or Hyper-V
/// re-enlightenment.
///
/// # Errors
/// [`ConvertError::Invalid`] for a frequency that is not a positive integer.
pub fn tsc_frequency(vmi: &VirtualMachineInstance) -> Result<Option<u64>, ConvertError> {
    let dom = &vmi.spec.domain;
    let invtsc = dom.cpu.as_ref().is_some_and(|c| {
        c.features.iter().any(|f| {
            f.name == "invtsc"
                && matches!(
                    f.policy,
                    CpuFeaturePolicy::Unset | CpuFeaturePolicy::Require | CpuFeaturePolicy::Force
                )
        })
    });
    let reenlightenment = dom
        .features
        .as_ref()
        .and_then(|f| f.hyperv.as_ref())
        .and_then(|h| h.reenlightenment.as_ref())
        .is_some_and(|s| s.is_enabled());
    if !invtsc && !reenlightenment {
        return Ok(None);
    }
    let Some(v) = vmi
        .status
        .as_ref()
        .and_then(|s| s.get("topologyHints"))
        .and_then(|t| t.get("tscFrequency"))
    else {
        return Ok(None);
    };
    v.as_u64().filter(|hz| *hz > 0).map(Some).ok_or_else(|| {
        ConvertError::invalid(
            "status.topologyHints.tscFrequency",
            format!("{v} is not a frequency in Hz"),
        )
    })
}

#[cfg(test)]
mod tests {
    use api::Arch;

    use crate::{convert, ConvertContext, VirtType};

    fn conv(features: &str, arch: Arch) -> Result<domain::Domain, crate::ConvertError> {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: h, uid: u1}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n    features:\n{features}"
        );
        let v = api::load_vmi(doc.as_bytes(), arch).unwrap();
        convert(&v, &ConvertContext::new(arch, VirtType::Kvm))
    }

    /// Found by defining in libvirt 11.3 with qemu-system-ppc64/s390x 10.0
    /// (e2e `define`): "machine type 'pseries-10.0' does not support ACPI",
    /// the same for 's390-ccw-virtio-10.0', and "PMU is always enabled for
    /// architecture 'ppc64le'".
    #[test]
    fn acpi_and_pmu_only_where_the_machine_has_them() {
        for (arch, default) in [
            (Arch::Amd64, true),
            (Arch::Arm64, true),
            (Arch::Ppc64le, false),
            (Arch::S390x, false),
        ] {
            let d = conv("      apic: {}\n", arch).unwrap();
            assert_eq!(d.features.unwrap().acpi.is_some(), default, "{arch}");
            let off = conv("      acpi: {enabled: false}\n", arch).unwrap();
            assert!(off.features.unwrap().acpi.is_none(), "{arch}");
            let on = conv("      acpi: {}\n", arch);
            if default {
                assert!(on.unwrap().features.unwrap().acpi.is_some(), "{arch}");
            } else {
                assert_eq!(
                    on.unwrap_err().to_string(),
                    format!("spec.domain.features.acpi: ACPI is not available on {arch} (its machine type has none): remove it or set enabled: false")
                );
            }
        }
        let rt = |arch: Arch| {
            let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: h, uid: u1}\nspec:\n  domain:\n    memory: {guest: 1Gi}\n    cpu: {cores: 1, dedicatedCpuPlacement: true, realtime: {}}\n";
            let v = api::load_vmi(doc.as_bytes(), arch).unwrap();
            let mut ctx = ConvertContext::new(arch, VirtType::Kvm);
            ctx.pod_cpuset = Some(vec![0, 1]);
            convert(&v, &ctx)
        };
        for arch in [Arch::Amd64, Arch::Arm64, Arch::S390x] {
            let f = rt(arch).unwrap().features.unwrap();
            assert_eq!(f.pmu.unwrap().state, "off", "{arch}");
        }
        assert_eq!(
            rt(Arch::Ppc64le).unwrap_err().to_string(),
            "spec.domain.cpu.realtime: realtime turns the PMU off, which ppc64le cannot do (its PMU is always enabled)"
        );
    }

    #[test]
    fn hyperv_dependencies_are_enabled_by_default_and_a_disabled_one_is_refused() {
        // synictimer needs synic needs vpindex; evmcs needs vapic and vmx.
        let d = conv(
            "      hyperv:\n        synictimer: {}\n        evmcs: {}\n",
            Arch::Amd64,
        )
        .unwrap();
        let xml = d.to_xml().unwrap();
        for want in [
            "<synic state=\"on\"/>",
            "<vpindex state=\"on\"/>",
            "<vapic state=\"on\"/>",
            "<evmcs state=\"on\"/>",
            "<feature policy=\"require\" name=\"vmx\"/>",
        ] {
            assert!(xml.contains(want), "{want} missing:\n{xml}");
        }
        let e = conv(
            "      hyperv:\n        ipi: {}\n        vpindex: {enabled: false}\n",
            Arch::Amd64,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "spec.domain.features.hyperv.ipi: 'spec.domain.features.hyperv.ipi' requires 'spec.domain.features.hyperv.vpindex', which was disabled."
        );
        // A disabled feature needs nothing.
        assert!(conv("      hyperv:\n        tlbflush: {enabled: false}\n        vpindex: {enabled: false}\n", Arch::Amd64)
        .is_ok());
    }

    #[test]
    fn hyperv_enlightenments_map_to_states() {
        let d = conv(
            "      hyperv:\n        relaxed: {}\n        vapic: {enabled: false}\n        spinlocks: {}\n        synictimer: {direct: {}}\n        vendorid: {vendorid: KVMKVMKVM}\n",
            Arch::Amd64,
        )
        .unwrap();
        let h = d.features.unwrap().hyperv.unwrap();
        assert_eq!(h.mode, None);
        assert_eq!(h.relaxed.unwrap().state, "on");
        assert_eq!(h.vapic.unwrap().state, "off");
        let s = h.spinlocks.unwrap();
        assert_eq!((s.state.as_str(), s.retries), ("on", Some(4096)));
        let st = h.stimer.unwrap();
        assert_eq!(
            (st.state.as_str(), st.direct.unwrap().state.as_str()),
            ("on", "on")
        );
        assert_eq!(h.vendor_id.unwrap().value.as_deref(), Some("KVMKVMKVM"));
        // synictimer brings synic, which brings vpindex (KubeVirt's defaults).
        assert_eq!(h.synic.unwrap().state, "on");
        assert_eq!(h.vpindex.unwrap().state, "on");
        assert!(h.evmcs.is_none());
    }

    #[test]
    fn hyperv_passthrough_only_without_hyperv() {
        let d = conv("      hypervPassthrough: {enabled: true}\n", Arch::Amd64).unwrap();
        let h = d.features.unwrap().hyperv.unwrap();
        assert_eq!(h.mode.as_deref(), Some("passthrough"));
        assert!(h.relaxed.is_none());
        let x = conv("      hypervPassthrough: {enabled: true}\n", Arch::Amd64)
            .unwrap()
            .to_xml()
            .unwrap();
        assert!(x.contains("<hyperv mode=\"passthrough\"/>"), "{x}");
        let d = conv(
            "      hypervPassthrough: {enabled: true}\n      hyperv: {relaxed: {}}\n",
            Arch::Amd64,
        )
        .unwrap();
        assert_eq!(d.features.unwrap().hyperv.unwrap().mode, None);
        let d = conv("      hypervPassthrough: {enabled: false}\n", Arch::Amd64).unwrap();
        assert!(d.features.unwrap().hyperv.is_none());
    }

    #[test]
    fn hyperv_bad_input_is_refused_by_field() {
        let e = conv("      hyperv: {spinlocks: {spinlocks: 100}}\n", Arch::Amd64)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "spec.domain.features.hyperv.spinlocks.spinlocks: 100 must be greater than or equal to 4095"
        );
        let e = conv(
            "      hyperv: {vendorid: {vendorid: thirteen-char}}\n",
            Arch::Amd64,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "spec.domain.features.hyperv.vendorid.vendorid: \"thirteen-char\" must be 1 to 12"
            ),
            "{e}"
        );
        let e = conv("      hyperv: {relaxed: {}}\n", Arch::Arm64)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "spec.domain.features.hyperv: Hyper-V enlightenments are not available on arm64"
        );
    }
}

#[cfg(test)]
mod clock_tests {
    use api::Arch;

    use crate::{convert, ConvertContext, VirtType};

    fn conv(domain: &str, status: &str, arch: Arch) -> Result<domain::Domain, crate::ConvertError> {
        let doc = format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: t, uid: u1}}\nspec:\n  domain:\n    memory: {{guest: 1Gi}}\n{domain}{status}"
        );
        let v = api::load_vmi(doc.as_bytes(), arch).unwrap();
        convert(&v, &ConvertContext::new(arch, VirtType::Kvm))
    }

    const HINT: &str = "status: {topologyHints: {tscFrequency: 2400000000}}\n";

    #[test]
    fn tsc_frequency_is_pinned_for_invtsc_or_reenlightenment() {
        let d = conv(
            "    cpu: {features: [{name: invtsc, policy: require}]}\n",
            HINT,
            Arch::Amd64,
        )
        .unwrap();
        let x = d.to_xml().unwrap();
        assert!(
            x.contains(
                "<clock offset=\"utc\">\n    <timer name=\"tsc\" frequency=\"2400000000\"/>"
            ),
            "{x}"
        );
        let d = conv(
            "    features: {hyperv: {reenlightenment: {}}}\n    clock: {utc: {}}\n",
            HINT,
            Arch::Amd64,
        )
        .unwrap();
        let c = d.clock.unwrap();
        assert_eq!(c.timer.last().unwrap().frequency, Some(2_400_000_000));
        // optional invtsc, or no hint: no TSC timer.
        let d = conv(
            "    cpu: {features: [{name: invtsc, policy: optional}]}\n",
            HINT,
            Arch::Amd64,
        )
        .unwrap();
        assert!(d.clock.is_none());
        let d = conv("    cpu: {features: [{name: invtsc}]}\n", "", Arch::Amd64).unwrap();
        assert!(d.clock.is_none());
        let e = conv(
            "    cpu: {features: [{name: invtsc}]}\n",
            "status: {topologyHints: {tscFrequency: -1}}\n",
            Arch::Amd64,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "status.topologyHints.tscFrequency: -1 is not a frequency in Hz"
        );
    }

    #[test]
    fn chassis_entries_in_sysinfo() {
        let d = conv(
            "    chassis: {manufacturer: M, serial: S, asset: \"\"}\n",
            "",
            Arch::Amd64,
        )
        .unwrap();
        let ch = d.sysinfo.unwrap().chassis.unwrap();
        let got: Vec<(&str, &str)> = ch
            .entry
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(got, [("manufacturer", "M"), ("serial", "S")]);
        let e = conv("    chassis: {manufacturer: M}\n", "", Arch::S390x).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.domain.chassis: SMBIOS is not available on s390x"
        );
    }
}
