//! `api.DomainSpec` but its devices: memory, vCPUs and tuning, OS and
//! firmware, SMBIOS, clock, features and the CPU.

use domain::{
    Clock, Cpu, CpuTune, Domain, FeatureState, Features, HyperV, MemoryBacking, MemoryValue, Os,
    SysInfo, SysInfoEntries,
};
use serde_json::{json, Value};

use super::devices::devices_json;
use super::metadata::metadata_json;
use super::{list, opt, s, RuntimeMetadata, QEMU_XMLNS};

/// `api.DomainSpec` from the parsed XML (Go field names).
pub(super) fn spec_json(d: &Domain, fallback_uid: &str, runtime: &RuntimeMetadata) -> Value {
    let kubevirt = d.metadata.as_ref().and_then(|m| m.kubevirt.as_ref());
    json!({
        "XMLName": { "Space": "", "Local": "domain" },
        "Type": d.domain_type,
        "XmlNS": QEMU_XMLNS,
        "Name": d.name,
        "UUID": s(&d.uuid),
        "Memory": memory_json(&d.memory),
        "CurrentMemory": opt(d.current_memory.as_ref(), memory_json),
        "MaxMemory": opt(d.max_memory.as_ref(), |m| json!({
            "Value": m.value,
            "Unit": m.unit,
            "Slots": m.slots.unwrap_or(0),
        })),
        "MemoryBacking": opt(d.memory_backing.as_ref(), memory_backing_json),
        "OS": os_json(&d.os),
        "SysInfo": opt(d.sysinfo.as_ref(), sysinfo_json),
        "Devices": devices_json(&d.devices),
        "Clock": opt(d.clock.as_ref(), clock_json),
        "Resource": null,
        "QEMUCmd": null,
        "Metadata": metadata_json(kubevirt, fallback_uid, runtime),
        "Features": opt(d.features.as_ref(), features_json),
        "CPU": cpu_json(d.cpu.as_ref()),
        "VCPU": { "Placement": s(&d.vcpu.placement), "CPUs": d.vcpu.count },
        "VCPUs": opt(d.vcpus.as_ref(), |v| json!({
            "VCPU": list(&v.vcpu, |c| json!({
                "ID": c.id,
                "Enabled": c.enabled,
                "Hotpluggable": c.hotpluggable,
                "Order": 0,
            })),
        })),
        "CPUTune": opt(d.cputune.as_ref(), cputune_json),
        "NUMATune": opt(d.numatune.as_ref(), |n| json!({
            "Memory": { "Mode": n.memory.mode, "NodeSet": n.memory.nodeset },
            "MemNodes": list(&n.memnode, |m| json!({
                "CellID": m.cellid,
                "Mode": m.mode,
                "NodeSet": m.nodeset,
            })),
        })),
        "IOThreads": opt(d.iothreads.as_ref(), |n| json!({ "IOThreads": n })),
        "LaunchSecurity": null,
    })
}

/// Go's zero `api.DomainSpec` for a domain that does not exist, with
/// `Metadata.KubeVirt.UID` = `uid` (or the runtime UID).
pub(super) fn zero_spec_json(uid: &str, runtime: &RuntimeMetadata) -> Value {
    let mut spec = spec_json(&Domain::default(), uid, runtime);
    if let Value::Object(m) = &mut spec {
        // Zero xml.Name, empty XmlNS and a nil *VCPU: the parts where the
        // model's defaults differ from Go's zero values.
        m.insert("XMLName".into(), json!({ "Space": "", "Local": "" }));
        m.insert("XmlNS".into(), json!(""));
        m.insert("VCPU".into(), Value::Null);
    }
    spec
}

/// `api.MemoryBacking`: `{HugePages{HugePage[{Size, Unit, NodeSet}]},
/// Source{Type}, Access{Mode}, Allocation{Mode}, NoSharePages}` (`Size` is a
/// Go string).
fn memory_backing_json(b: &MemoryBacking) -> Value {
    json!({
        "HugePages": opt(b.hugepages.as_ref(), |h| json!({
            "HugePage": list(&h.page, |p| json!({
                "Size": p.size.to_string(),
                "Unit": s(&p.unit),
                "NodeSet": s(&p.nodeset),
            })),
        })),
        "Source": opt(b.source.as_ref(), |x| json!({ "Type": x.source_type })),
        "Access": opt(b.access.as_ref(), |x| json!({ "Mode": x.mode })),
        "Allocation": opt(b.allocation.as_ref(), |x| json!({ "Mode": x.mode })),
        "NoSharePages": opt(b.nosharepages.as_ref(), |_| json!({})),
    })
}

/// `api.CPUTune`: `{VCPUPin[{VCPU, CPUSet}], IOThreadPin[{IOThread,
/// CPUSet}], EmulatorPin{CPUSet}}`.
fn cputune_json(t: &CpuTune) -> Value {
    json!({
        "VCPUPin": list(&t.vcpupin, |p| json!({ "VCPU": p.vcpu, "CPUSet": p.cpuset })),
        "IOThreadPin": list(&t.iothreadpin, |p| json!({
            "IOThread": p.iothread,
            "CPUSet": p.cpuset,
        })),
        "EmulatorPin": opt(t.emulatorpin.as_ref(), |p| json!({ "CPUSet": p.cpuset })),
    })
}

/// `api.Memory`: `{Value, Unit}`.
fn memory_json(m: &MemoryValue) -> Value {
    json!({ "Value": m.value, "Unit": m.unit })
}

/// `api.OS`.
fn os_json(os: &Os) -> Value {
    json!({
        "Type": {
            "OS": os.os_type.os,
            "Arch": s(&os.os_type.arch),
            "Machine": s(&os.os_type.machine),
        },
        "ACPI": null,
        "SMBios": opt(os.smbios.as_ref(), |m| json!({ "Mode": m.mode })),
        "BootOrder": list(&os.boot, |b| json!({ "Dev": b.dev })),
        "BootMenu": opt(os.bootmenu.as_ref(), |b| json!({
            "Enable": b.enable,
            "Timeout": b.timeout,
        })),
        "BIOS": opt(os.bios.as_ref(), |b| json!({ "UseSerial": s(&b.useserial) })),
        "BootLoader": opt(os.loader.as_ref(), |l| json!({
            "ReadOnly": s(&l.readonly),
            "Secure": s(&l.secure),
            "Type": s(&l.loader_type),
            "Path": l.path,
        })),
        "NVRam": opt(os.nvram.as_ref(), |n| json!({
            "Template": s(&n.template),
            "NVRam": n.path,
        })),
        "Kernel": s(&os.kernel),
        "Initrd": s(&os.initrd),
        "KernelArgs": s(&os.cmdline),
    })
}

/// `api.SysInfo`: `{Type, System, BIOS, BaseBoard, Chassis}`, each list of
/// `{Name, Value}` or `null`.
fn sysinfo_json(si: &SysInfo) -> Value {
    let entries = |e: &Option<SysInfoEntries>| {
        list(
            e.as_ref().map_or(&[][..], |e| &e.entry),
            |e| json!({ "Name": e.name, "Value": e.value }),
        )
    };
    json!({
        "Type": si.sysinfo_type,
        "System": entries(&si.system),
        "BIOS": null,
        "BaseBoard": null,
        "Chassis": entries(&si.chassis),
    })
}

/// `api.Clock`: `{Offset, Timezone, Adjustment, Timer}`.
fn clock_json(c: &Clock) -> Value {
    json!({
        "Offset": c.offset,
        "Timezone": s(&c.timezone),
        "Adjustment": s(&c.adjustment),
        "Timer": list(&c.timer, |t| json!({
            "Name": t.name,
            "TickPolicy": s(&t.tickpolicy),
            "Present": s(&t.present),
            "Track": s(&t.track),
            "Frequency": t.frequency.map(|f| f.to_string()).unwrap_or_default(),
        })),
    })
}

/// `api.FeatureState`: `{State}`.
fn state_json(f: &FeatureState) -> Value {
    json!({ "State": f.state })
}

/// `api.Features`.
fn features_json(f: &Features) -> Value {
    let enabled = |e: &Option<domain::Empty>| opt(e.as_ref(), |_| json!({}));
    json!({
        "ACPI": enabled(&f.acpi),
        "APIC": enabled(&f.apic),
        "Hyperv": opt(f.hyperv.as_ref(), hyperv_json),
        "SMM": enabled(&f.smm),
        "KVM": opt(f.kvm.as_ref(), |k| json!({
            "Hidden": opt(k.hidden.as_ref(), state_json),
            "HintDedicated": opt(k.hint_dedicated.as_ref(), state_json),
        })),
        "PVSpinlock": opt(f.pvspinlock.as_ref(), state_json),
        "PMU": opt(f.pmu.as_ref(), state_json),
        "VMPort": opt(f.vmport.as_ref(), state_json),
    })
}

/// `api.FeatureHyperv`: `Mode` and one `{State}` per enlightenment, with
/// `Spinlocks{State, Retries}`, `SyNICTimer{Direct, State}` and
/// `VendorID{State, Value}`.
fn hyperv_json(h: &HyperV) -> Value {
    let st = |f: &Option<FeatureState>| opt(f.as_ref(), state_json);
    json!({
        "Mode": s(&h.mode),
        "Relaxed": st(&h.relaxed),
        "VAPIC": st(&h.vapic),
        "Spinlocks": opt(h.spinlocks.as_ref(), |x| json!({
            "State": x.state,
            "Retries": x.retries,
        })),
        "VPIndex": st(&h.vpindex),
        "Runtime": st(&h.runtime),
        "SyNIC": st(&h.synic),
        "SyNICTimer": opt(h.stimer.as_ref(), |x| json!({
            "Direct": st(&x.direct),
            "State": x.state,
        })),
        "Reset": st(&h.reset),
        "VendorID": opt(h.vendor_id.as_ref(), |x| json!({
            "State": x.state,
            "Value": s(&x.value),
        })),
        "Frequencies": st(&h.frequencies),
        "Reenlightenment": st(&h.reenlightenment),
        "TLBFlush": st(&h.tlbflush),
        "IPI": st(&h.ipi),
        "EVMCS": st(&h.evmcs),
    })
}

/// `api.CPU` (a struct: the zero object when the XML has no `<cpu>`).
fn cpu_json(cpu: Option<&Cpu>) -> Value {
    let default = Cpu::default();
    let c = cpu.unwrap_or(&default);
    json!({
        "Mode": s(&c.mode),
        "Model": s(&c.model),
        "Features": list(&c.feature, |f| json!({ "Name": f.name, "Policy": f.policy })),
        "Topology": opt(c.topology.as_ref(), |t| json!({
            "Sockets": t.sockets,
            "Cores": t.cores,
            "Threads": t.threads,
        })),
        "NUMA": opt(c.numa.as_ref(), |n| json!({
            "Cells": list(&n.cell, |c| json!({
                "ID": c.id,
                "CPUs": c.cpus,
                "Memory": c.memory.unwrap_or_default(),
                "Unit": s(&c.unit),
                "MemoryAccess": s(&c.mem_access),
            })),
        })),
    })
}
