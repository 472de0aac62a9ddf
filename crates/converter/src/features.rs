//! `<features>` and `<clock>` from `spec.domain.features` and `spec.domain.clock`.

use api::vmi::TimerSpec;
use api::VirtualMachineInstance;
use domain::{Clock, Empty, FeatureState, Features, KvmFeatures, Timer};

use crate::arch::ArchCaps;
use crate::ConvertError;

/// `<acpi/>` unless disabled (s390x: only when enabled), `<apic/>` and
/// `<smm/>` when set and not disabled, `<kvm><hidden/>`, `<pvspinlock>`, and
/// on amd64 `<vmport state='off'/>`.
pub fn convert(vmi: &VirtualMachineInstance, caps: &ArchCaps) -> Features {
    let f = vmi.spec.domain.features.clone().unwrap_or_default();
    let on = |s: &Option<api::vmi::FeatureState>| s.as_ref().is_some_and(|s| s.is_enabled());
    let acpi = match &f.acpi {
        Some(s) => s.is_enabled(),
        None => caps.acpi_default,
    };
    Features {
        acpi: acpi.then_some(Empty {}),
        apic: on(&f.apic).then_some(Empty {}),
        smm: on(&f.smm).then_some(Empty {}),
        kvm: f.kvm.as_ref().filter(|k| k.hidden).map(|_| KvmFeatures {
            hidden: Some(FeatureState::on_off(true)),
        }),
        pvspinlock: f
            .pvspinlock
            .as_ref()
            .map(|s| FeatureState::on_off(s.is_enabled())),
        vmport: caps.vmport.then(|| FeatureState::on_off(false)),
    }
}

const TICK_POLICIES: [&str; 4] = ["delay", "catchup", "merge", "discard"];

/// `<clock>`: `offset='utc'` with `adjustment` = `offsetSeconds` or `reset`,
/// or `offset='timezone' timezone=...`; timers rtc, pit, kvmclock, hpet,
/// hypervclock with `present` (default yes), `tickpolicy` and (rtc) `track`.
/// No `<clock>` when the VMI has none (libvirt's default is UTC).
///
/// # Errors
/// [`ConvertError::Invalid`] for both `utc` and `timezone`, an unknown tick
/// policy or rtc track, or a time zone name that is not a plain zone path.
pub fn clock(vmi: &VirtualMachineInstance) -> Result<Option<Clock>, ConvertError> {
    let Some(c) = &vmi.spec.domain.clock else {
        return Ok(None);
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
            let tickpolicy = spec.tick_policy.clone().filter(|p| !p.is_empty());
            if let Some(p) = &tickpolicy {
                if !TICK_POLICIES.contains(&p.as_str()) {
                    return Err(ConvertError::invalid(
                        format!("{path}.tickPolicy"),
                        format!("{p:?} is not one of {}", TICK_POLICIES.join(", ")),
                    ));
                }
            }
            let track = spec.track.clone().filter(|t| !t.is_empty());
            if let Some(tr) = &track {
                if field != "rtc" || !["guest", "wall"].contains(&tr.as_str()) {
                    return Err(ConvertError::invalid(
                        format!("{path}.track"),
                        format!("{tr:?} is not valid here (rtc only: guest or wall)"),
                    ));
                }
            }
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
            });
        }
    }
    Ok(Some(clock))
}
