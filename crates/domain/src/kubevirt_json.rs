//! The domain as virt-handler reads it: KubeVirt's `api.Domain`
//! (`pkg/virt-launcher/virtwrap/api/schema.go`, KubeVirt v1.6.6) encoded the
//! way Go's `encoding/json` encodes it.
//!
//! That struct carries almost no `json` tags, so nearly every key is the
//! **Go field name** (`Spec`, `Devices`, `Disks`, `Target`, `Bus` ...). The
//! exceptions are the embedded Kubernetes types:
//!
//! - `metav1.TypeMeta` → `kind`, `apiVersion` (`omitempty`);
//! - `metav1.ObjectMeta` (under the key `ObjectMeta`) → `name`, `namespace`,
//!   `uid` (`omitempty`: absent when empty), `creationTimestamp` (a struct,
//!   so always present, `null` when zero) and `deletionTimestamp` (pointer
//!   with `omitempty`: present only when set).
//!
//! Go's encoding rules reproduced here for every field we emit:
//!
//! - a nil pointer is `null` (`CurrentMemory`, `Features`, `Disk.Driver`,
//!   `Disk.ReadOnly` ...), a non-nil pointer to an empty struct is `{}`;
//! - a nil slice is `null` — the XML decoder never creates an empty slice, so
//!   an empty list in the model is `null`, never `[]`;
//! - a string is always present, `""` when empty (the `xml:",omitempty"`
//!   tags do not apply to JSON);
//! - a non-pointer struct is always an object, even when zero (`Spec.CPU`,
//!   `Spec.Metadata`, `Disk.Source`, `Disk.Target`, `Status.OSInfo`);
//! - numbers are numbers, booleans are booleans.
//!
//! Fields of `api.DomainSpec` that our XML model ([`crate::Domain`]) does
//! not carry are still emitted, with the value Go gives them when the XML
//! lacks them (`null` for pointers and slices, `""`, `0`, `false`), so the
//! key set of every object matches Go's. JSON object keys are not ordered
//! like Go's struct fields (`serde_json` sorts them); JSON readers, Go's
//! included, do not care.

use serde_json::{json, Map, Value};

use crate::{
    Address, Alias, BackingStore, Channel, Clock, Console, Controller, Cpu, CpuTune, Devices, Disk,
    DiskDriver, DiskSource, Domain, FeatureState, Features, Filesystem, Graphics, HostDevice,
    HyperV, Input, Interface, KubeVirtMetadata, MemBalloon, MemoryBacking, MemoryValue, Os, Rng,
    Serial, SysInfo, SysInfoEntries, Video,
};

/// `TypeMeta.Kind` of every domain virt-launcher sends.
pub const KIND: &str = "Domain";
/// `TypeMeta.APIVersion` of every domain virt-launcher sends.
pub const API_VERSION: &str = "1.2.2";
/// `Spec.XmlNS`: the QEMU namespace, always reported.
pub const QEMU_XMLNS: &str = "http://libvirt.org/schemas/domain/qemu/1.0";
/// Prefix KubeVirt gives user-defined device aliases in the XML
/// (`<alias name='ua-disk0'/>`); stripped in the JSON.
pub const USER_ALIAS_PREFIX: &str = "ua-";

/// What virt-handler's `api.DomainStatus` holds: `{Status, Reason,
/// Interfaces, OSInfo, FSFreezeStatus}` (KubeVirt `api.DomainStatus`, Go
/// field names).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DomainStatus {
    /// `Status`: the LifeCycle string (`NoState`, `Running`, `Blocked`,
    /// `Paused`, `ShuttingDown`, `Shutoff`, `Crashed`, `PMSuspended`).
    pub status: String,
    /// `Reason`: the StateChangeReason string (`Unknown`, `User`,
    /// `Destroyed`, `IOError` ..., or `NonExistent` for a vanished domain).
    pub reason: String,
    /// `Interfaces`: guest-agent interfaces, `None` (or empty) → `null`.
    /// Each element becomes `{Mac, Ip, IPs, InterfaceName}`; the element may
    /// use those Go names or the VMI-status names (`mac`, `ipAddress`,
    /// `ipAddresses`, `interfaceName`). Missing values are `""` / `null`.
    pub interfaces: Option<Vec<Value>>,
    /// `OSInfo`: guest-agent OS information. Always emitted as
    /// `{Name, KernelRelease, Version, PrettyName, VersionId, KernelVersion,
    /// Machine, Id}` (a Go struct, not a pointer), `""` for each unknown
    /// value. The object may use those Go names or the VMI-status names
    /// (`name`, `kernelRelease`, `version`, `prettyName`, `versionId`,
    /// `kernelVersion`, `machine`, `id`).
    pub os_info: Option<Value>,
    /// `FSFreezeStatus.Status`: `frozen`, `thawed` or `""`.
    pub fs_freeze_status: String,
}

/// Identity for `ObjectMeta` (Kubernetes `metav1.ObjectMeta`, lower-case
/// json tags).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// `name`: the VMI name (omitted when empty).
    pub name: String,
    /// `namespace`: the VMI namespace (omitted when empty).
    pub namespace: String,
    /// `uid`: the VMI UID (omitted when empty, as in `GetDomain` replies).
    pub uid: String,
    /// `deletionTimestamp`, RFC 3339 (`2025-01-01T00:00:00Z`); set only on
    /// the final "domain is gone" event, omitted when `None`.
    pub deletion_timestamp: Option<String>,
}

/// The launcher's in-memory metadata that KubeVirt injects into
/// `Spec.Metadata.KubeVirt` of every outgoing domain (KubeVirt
/// `api.KubeVirtMetadata`, Go field names). Each `Some` replaces what the
/// domain XML says; `None` keeps it (`null` for the parts our XML lacks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeMetadata {
    /// `UID`: the VMI UID.
    pub uid: Option<String>,
    /// `GracePeriod`.
    pub grace_period: Option<GracePeriod>,
    /// `Migration`.
    pub migration: Option<MigrationMetadata>,
    /// `AccessCredential`.
    pub access_credential: Option<AccessCredentialMetadata>,
    /// `MemoryDump`.
    pub memory_dump: Option<MemoryDumpMetadata>,
}

/// `api.GracePeriodMetadata`: `{DeletionGracePeriodSeconds,
/// DeletionTimestamp, MarkedForGracefulShutdown}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GracePeriod {
    /// `DeletionGracePeriodSeconds` (VMI `terminationGracePeriodSeconds`).
    pub deletion_grace_period_seconds: i64,
    /// `DeletionTimestamp` (RFC 3339) of the first shutdown request, or `null`.
    pub deletion_timestamp: Option<String>,
    /// `MarkedForGracefulShutdown`, or `null`.
    pub marked_for_graceful_shutdown: Option<bool>,
}

/// `api.MigrationMetadata`: `{UID, StartTimestamp, EndTimestamp, Failed,
/// FailureReason, AbortStatus, Mode}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationMetadata {
    /// `UID` of the migration object.
    pub uid: String,
    /// `StartTimestamp` (RFC 3339) or `null`.
    pub start_timestamp: Option<String>,
    /// `EndTimestamp` (RFC 3339) or `null`.
    pub end_timestamp: Option<String>,
    /// `Failed`.
    pub failed: bool,
    /// `FailureReason`.
    pub failure_reason: String,
    /// `AbortStatus`: `Aborting`, `Succeeded`, `Failed` or `""`.
    pub abort_status: String,
    /// `Mode`: `PreCopy`, `PostCopy`, `Paused` or `""`.
    pub mode: String,
}

/// `api.AccessCredentialMetadata`: `{Succeeded, Message}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessCredentialMetadata {
    /// `Succeeded`.
    pub succeeded: bool,
    /// `Message`.
    pub message: String,
}

/// `api.MemoryDumpMetadata`: `{FileName, StartTimestamp, EndTimestamp,
/// Completed, Failed, FailureReason}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryDumpMetadata {
    /// `FileName`.
    pub file_name: String,
    /// `StartTimestamp` (RFC 3339) or `null`.
    pub start_timestamp: Option<String>,
    /// `EndTimestamp` (RFC 3339) or `null`.
    pub end_timestamp: Option<String>,
    /// `Completed`.
    pub completed: bool,
    /// `Failed`.
    pub failed: bool,
    /// `FailureReason`.
    pub failure_reason: String,
}

/// The `api.Domain` JSON virt-handler decodes:
/// `{"kind":"Domain","apiVersion":"1.2.2","ObjectMeta":{...},"Spec":{...},
/// "Status":{...}}`.
///
/// `spec` is the domain parsed from libvirt's XML; `None` means the domain
/// does not exist, and `Spec` is then Go's zero `api.DomainSpec` (e.g.
/// `"XMLName":{"Space":"","Local":""}`, `"Name":""`,
/// `"Memory":{"Value":0,"Unit":""}`, `"VCPU":null`) except
/// `Spec.Metadata.KubeVirt.UID`, which is `meta.uid`.
///
/// `Spec.Metadata.KubeVirt.UID` is the XML `<uid>` when non-empty, else
/// `meta.uid`. Equivalent to [`domain_json_with_metadata`] with no runtime
/// metadata.
pub fn domain_json(meta: &ObjectMeta, spec: Option<&Domain>, status: &DomainStatus) -> Value {
    domain_json_with_metadata(meta, spec, status, &RuntimeMetadata::default())
}

/// [`domain_json`], with the launcher's metadata cache overlaid on
/// `Spec.Metadata.KubeVirt` (each `Some` in `runtime` wins over the XML).
pub fn domain_json_with_metadata(
    meta: &ObjectMeta,
    spec: Option<&Domain>,
    status: &DomainStatus,
    runtime: &RuntimeMetadata,
) -> Value {
    let spec = match spec {
        Some(d) => spec_json(d, &meta.uid, runtime),
        None => zero_spec_json(&meta.uid, runtime),
    };
    json!({
        "kind": KIND,
        "apiVersion": API_VERSION,
        "ObjectMeta": object_meta_json(meta),
        "Spec": spec,
        "Status": status_json(status),
    })
}

/// `metav1.ObjectMeta` JSON: empty strings omitted, `creationTimestamp`
/// always `null`, `deletionTimestamp` only when set.
fn object_meta_json(meta: &ObjectMeta) -> Value {
    let mut m = Map::new();
    for (key, value) in [
        ("name", &meta.name),
        ("namespace", &meta.namespace),
        ("uid", &meta.uid),
    ] {
        if !value.is_empty() {
            m.insert(key.into(), Value::String(value.clone()));
        }
    }
    m.insert("creationTimestamp".into(), Value::Null);
    if let Some(ts) = &meta.deletion_timestamp {
        m.insert("deletionTimestamp".into(), Value::String(ts.clone()));
    }
    Value::Object(m)
}

/// Go keys of `api.GuestOSInfo` and the VMI-status key accepted for each.
const OS_INFO_KEYS: [(&str, &str); 8] = [
    ("Name", "name"),
    ("KernelRelease", "kernelRelease"),
    ("Version", "version"),
    ("PrettyName", "prettyName"),
    ("VersionId", "versionId"),
    ("KernelVersion", "kernelVersion"),
    ("Machine", "machine"),
    ("Id", "id"),
];

/// `api.DomainStatus` JSON.
fn status_json(status: &DomainStatus) -> Value {
    let interfaces = match &status.interfaces {
        Some(list) if !list.is_empty() => {
            Value::Array(list.iter().map(interface_status_json).collect())
        }
        _ => Value::Null,
    };
    let mut os_info = Map::new();
    for (go, alt) in OS_INFO_KEYS {
        let v = status
            .os_info
            .as_ref()
            .and_then(|o| pick(o, go, alt))
            .and_then(Value::as_str)
            .unwrap_or_default();
        os_info.insert(go.into(), Value::String(v.into()));
    }
    json!({
        "Status": status.status,
        "Reason": status.reason,
        "Interfaces": interfaces,
        "OSInfo": os_info,
        "FSFreezeStatus": { "Status": status.fs_freeze_status },
    })
}

/// `obj[go]`, else `obj[alt]`, when `obj` is an object.
fn pick<'a>(obj: &'a Value, go: &str, alt: &str) -> Option<&'a Value> {
    obj.get(go).or_else(|| obj.get(alt))
}

/// `api.InterfaceStatus`: `{Mac, Ip, IPs, InterfaceName}`.
fn interface_status_json(v: &Value) -> Value {
    let text = |go: &str, alt: &str| {
        pick(v, go, alt)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let ips = match pick(v, "IPs", "ipAddresses").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => Value::Array(
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| Value::String(s.into()))
                .collect(),
        ),
        _ => Value::Null,
    };
    json!({
        "Mac": text("Mac", "mac"),
        "Ip": text("Ip", "ipAddress"),
        "IPs": ips,
        "InterfaceName": text("InterfaceName", "interfaceName"),
    })
}

// ---------------------------------------------------------------------------
// Spec

/// A Go `string` field: the value, or `""`.
fn s(v: &Option<String>) -> Value {
    Value::String(v.clone().unwrap_or_default())
}

/// A Go pointer field: `null`, or the encoded value.
fn opt<T>(v: Option<&T>, f: impl FnOnce(&T) -> Value) -> Value {
    v.map_or(Value::Null, f)
}

/// A Go slice field filled by the XML decoder: `null` when empty.
fn list<T>(v: &[T], f: impl FnMut(&T) -> Value) -> Value {
    if v.is_empty() {
        Value::Null
    } else {
        Value::Array(v.iter().map(f).collect())
    }
}

/// `api.DomainSpec` from the parsed XML (Go field names).
fn spec_json(d: &Domain, fallback_uid: &str, runtime: &RuntimeMetadata) -> Value {
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
fn zero_spec_json(uid: &str, runtime: &RuntimeMetadata) -> Value {
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

/// `api.Metadata`: `{"KubeVirt": {UID, GracePeriod, Migration,
/// AccessCredential, MemoryDump}}` (a struct: always present).
fn metadata_json(
    kv: Option<&KubeVirtMetadata>,
    fallback_uid: &str,
    runtime: &RuntimeMetadata,
) -> Value {
    let uid = runtime
        .uid
        .clone()
        .or_else(|| kv.map(|k| k.uid.clone()).filter(|u| !u.is_empty()))
        .unwrap_or_else(|| fallback_uid.to_owned());
    let grace = match &runtime.grace_period {
        Some(g) => grace_period_json(g),
        None => opt(kv.and_then(|k| k.graceperiod.as_ref()), |g| {
            grace_period_json(&GracePeriod {
                deletion_grace_period_seconds: g.deletion_grace_period_seconds,
                ..GracePeriod::default()
            })
        }),
    };
    json!({
        "KubeVirt": {
            "UID": uid,
            "GracePeriod": grace,
            "Migration": opt(runtime.migration.as_ref(), |m| json!({
                "UID": m.uid,
                "StartTimestamp": m.start_timestamp,
                "EndTimestamp": m.end_timestamp,
                "Failed": m.failed,
                "FailureReason": m.failure_reason,
                "AbortStatus": m.abort_status,
                "Mode": m.mode,
            })),
            "AccessCredential": opt(runtime.access_credential.as_ref(), |a| json!({
                "Succeeded": a.succeeded,
                "Message": a.message,
            })),
            "MemoryDump": opt(runtime.memory_dump.as_ref(), |m| json!({
                "FileName": m.file_name,
                "StartTimestamp": m.start_timestamp,
                "EndTimestamp": m.end_timestamp,
                "Completed": m.completed,
                "Failed": m.failed,
                "FailureReason": m.failure_reason,
            })),
        }
    })
}

/// `api.GracePeriodMetadata`.
fn grace_period_json(g: &GracePeriod) -> Value {
    json!({
        "DeletionGracePeriodSeconds": g.deletion_grace_period_seconds,
        "DeletionTimestamp": g.deletion_timestamp,
        "MarkedForGracefulShutdown": g.marked_for_graceful_shutdown,
    })
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
    let enabled = |e: &Option<crate::Empty>| opt(e.as_ref(), |_| json!({}));
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

/// `api.Devices`. Device kinds the model does not carry (panic devices,
/// virtio-mem memory) are `null`.
fn devices_json(d: &Devices) -> Value {
    json!({
        "Emulator": s(&d.emulator),
        "Interfaces": list(&d.interface, interface_json),
        "Channels": list(&d.channel, channel_json),
        "HostDevices": list(&d.hostdev, hostdev_json),
        "PanicDevices": null,
        "Controllers": list(&d.controller, controller_json),
        "Video": list(&d.video, video_json),
        "Graphics": list(&d.graphics, graphics_json),
        "Ballooning": opt(d.memballoon.as_ref(), memballoon_json),
        "Disks": list(&d.disk, disk_json),
        "Inputs": list(&d.input, input_json),
        "Serials": list(&d.serial, serial_json),
        "Consoles": list(&d.console, console_json),
        "Watchdogs": list(&d.watchdog, |w| json!({
            "Model": w.model,
            "Action": s(&w.action),
            "Alias": opt(w.alias.as_ref(), alias_json),
            "Address": null,
        })),
        // A single pointer in Go: the first (only) generator.
        "Rng": opt(d.rng.first(), rng_json),
        "Filesystems": list(&d.filesystem, filesystem_json),
        "Redirs": list(&d.redirdev, |r| json!({
            "Type": r.redir_type,
            "Bus": r.bus,
            "Source": {
                "Mode": s(&r.source.as_ref().and_then(|x| x.mode.clone())),
                "Path": s(&r.source.as_ref().and_then(|x| x.path.clone())),
            },
        })),
        "SoundCards": list(&d.sound, |x| json!({
            "Alias": opt(x.alias.as_ref(), alias_json),
            "Model": x.model,
        })),
        "TPMs": list(&d.tpm, |t| json!({
            "Model": t.model,
            "Backend": {
                "Type": t.backend.backend_type,
                "Version": s(&t.backend.version),
                "PersistentState": s(&t.backend.persistent_state),
            },
        })),
        "VSOCK": opt(d.vsock.as_ref(), |v| json!({
            "Model": s(&v.model),
            "CID": { "Auto": v.cid.auto, "Address": v.cid.address },
        })),
        "Memory": null,
    })
}

/// `api.FilesystemDevice`: `{Type, AccessMode, Source{Dir, Socket},
/// Target{Dir}, Driver{Type, Queue}, Binary}` (`Queue` is a Go string;
/// `Binary` is not in the model: `null`).
fn filesystem_json(f: &Filesystem) -> Value {
    json!({
        "Type": f.fs_type,
        "AccessMode": s(&f.access_mode),
        "Source": opt(f.source.as_ref(), |x| json!({ "Dir": "", "Socket": s(&x.socket) })),
        "Target": { "Dir": f.target.dir },
        "Driver": opt(f.driver.as_ref(), |x| json!({
            "Type": x.driver_type,
            "Queue": x.queue.map(|q| q.to_string()).unwrap_or_default(),
        })),
        "Binary": null,
    })
}

/// `api.Alias`: `{Name, UserDefined}`, the `ua-` prefix stripped from user
/// aliases (KubeVirt's `Alias.UnmarshalXML` + `MarshalJSON`).
fn alias_json(a: &Alias) -> Value {
    match a.name.strip_prefix(USER_ALIAS_PREFIX) {
        Some(name) => json!({ "Name": name, "UserDefined": true }),
        None => json!({ "Name": a.name, "UserDefined": false }),
    }
}

/// `api.Address`: all thirteen string fields.
fn address_json(a: &Address) -> Value {
    json!({
        "Type": a.address_type,
        "Domain": s(&a.domain),
        "Bus": s(&a.bus),
        "Slot": s(&a.slot),
        "Function": s(&a.function),
        "Controller": s(&a.controller),
        "Target": s(&a.target),
        "Unit": s(&a.unit),
        "UUID": s(&a.uuid),
        "Device": s(&a.device),
        "CSSID": s(&a.cssid),
        "SSID": s(&a.ssid),
        "DevNo": s(&a.devno),
    })
}

/// `api.DiskSource` (also the source of a backing store).
fn disk_source_json(src: &DiskSource) -> Value {
    json!({
        "Dev": s(&src.dev),
        "File": s(&src.file),
        "StartupPolicy": "",
        "Protocol": "",
        "Name": s(&src.name),
        "Host": null,
        "Reservations": opt(src.reservations.as_ref(), |r| json!({
            "Managed": r.managed,
            "SourceReservations": opt(r.source.as_ref(), |x| json!({
                "Type": x.source_type,
                "Path": x.path,
                "Mode": x.mode,
            })),
        })),
        "Slices": null,
    })
}

/// `api.DiskDriver`.
fn disk_driver_json(d: &DiskDriver) -> Value {
    json!({
        "Cache": s(&d.cache),
        "ErrorPolicy": s(&d.error_policy),
        "IO": s(&d.io),
        "Name": d.name,
        "Type": s(&d.format),
        "IOThread": d.iothread,
        "IOThreads": opt(d.iothreads.as_ref(), |t| json!({
            "IOThread": list(&t.iothread, |x| json!({ "Id": x.id })),
        })),
        "Queues": d.queues,
        "Discard": s(&d.discard),
        "IOMMU": s(&d.iommu),
    })
}

/// `api.BackingStore`: `{Type, Format{Type}, Source}`.
fn backing_store_json(b: &BackingStore) -> Value {
    json!({
        "Type": s(&b.store_type),
        "Format": opt(b.format.as_ref(), |f| json!({ "Type": f.format_type })),
        "Source": opt(b.source.as_ref(), disk_source_json),
    })
}

/// `api.Disk`.
fn disk_json(d: &Disk) -> Value {
    let no_source = DiskSource::default();
    json!({
        "Device": d.device,
        "Snapshot": "",
        "Type": d.disk_type,
        "Source": disk_source_json(d.source.as_ref().unwrap_or(&no_source)),
        "Target": {
            "Bus": s(&d.target.bus),
            "Device": d.target.dev,
            "Tray": s(&d.target.tray),
        },
        "Serial": s(&d.serial),
        "Driver": opt(d.driver.as_ref(), disk_driver_json),
        "ReadOnly": opt(d.readonly.as_ref(), |_| json!({})),
        "Auth": null,
        "Alias": opt(d.alias.as_ref(), alias_json),
        "BackingStore": opt(d.backing_store.as_ref(), backing_store_json),
        "BootOrder": opt(d.boot.as_ref(), |b| json!({ "Order": b.order })),
        "Address": opt(d.address.as_ref(), address_json),
        "Model": s(&d.model),
        "BlockIO": opt(d.blockio.as_ref(), |b| json!({
            "LogicalBlockSize": b.logical_block_size.unwrap_or(0),
            "PhysicalBlockSize": b.physical_block_size.unwrap_or(0),
        })),
        "FilesystemOverhead": null,
        "Capacity": null,
        "ExpandDisksEnabled": false,
        "Shareable": opt(d.shareable.as_ref(), |_| json!({})),
    })
}

/// `api.Interface` (Go field names; zero values as Go marshals them).
fn interface_json(i: &Interface) -> Value {
    json!({
        "Address": opt(i.address.as_ref(), address_json),
        "Type": i.interface_type,
        "TrustGuestRxFilters": "",
        "Source": {
            "Network": "",
            "Device": i.source.as_ref().and_then(|x| x.dev.clone()).unwrap_or_default(),
            "Bridge": "",
            "Mode": "",
            "Address": null,
        },
        "Target": opt(i.target.as_ref(), |t| json!({ "Device": t.dev, "Managed": s(&t.managed) })),
        "Model": opt(i.model.as_ref(), |m| json!({ "Type": m.model_type })),
        "MAC": opt(i.mac.as_ref(), |m| json!({ "MAC": m.address })),
        "MTU": opt(i.mtu.as_ref(), |m| json!({ "Size": m.size.to_string() })),
        "BandWidth": null,
        "BootOrder": opt(i.boot.as_ref(), |b| json!({ "Order": b.order })),
        "LinkState": opt(i.link.as_ref(), |l| json!({ "State": l.state })),
        "FilterRef": null,
        "Alias": opt(i.alias.as_ref(), alias_json),
        "Driver": opt(i.driver.as_ref(), |d| json!({ "Name": d.name, "Queues": d.queues, "IOMMU": "" })),
        "Rom": opt(i.rom.as_ref(), |r| json!({ "Enabled": r.enabled })),
        "ACPI": opt(i.acpi.as_ref(), |a| json!({ "Index": a.index })),
        "Backend": opt(i.backend.as_ref(), |b| json!({
            "Type": s(&b.backend_type),
            "LogFile": s(&b.log_file),
        })),
        "PortForward": list(&i.port_forward, |p| json!({
            "Proto": p.proto,
            "Address": s(&p.address),
            "Dev": s(&p.dev),
            "Ranges": list(&p.range, |r| json!({
                "Start": r.start,
                "End": r.end.unwrap_or(0),
                "To": r.to.unwrap_or(0),
                "Exclude": s(&r.exclude),
            })),
        })),
    })
}

/// `api.HostDevice`: `{XMLName, Source{Address}, Type, BootOrder, Managed,
/// Mode, Model, Address, Alias, Display, RamFB}` (Go field names; the XML
/// decoder fills `XMLName` with the element's name).
fn hostdev_json(h: &HostDevice) -> Value {
    json!({
        "XMLName": { "Space": "", "Local": "hostdev" },
        "Source": { "Address": opt(h.source.address.as_ref(), address_json) },
        "Type": h.hostdev_type,
        "BootOrder": opt(h.boot.as_ref(), |b| json!({ "Order": b.order })),
        "Managed": s(&h.managed),
        "Mode": s(&h.mode),
        "Model": s(&h.model),
        "Address": opt(h.address.as_ref(), address_json),
        "Alias": opt(h.alias.as_ref(), alias_json),
        "Display": s(&h.display),
        "RamFB": s(&h.ramfb),
    })
}

/// `api.Controller`.
fn controller_json(c: &Controller) -> Value {
    json!({
        "Type": c.controller_type,
        "Index": c.index,
        "Model": s(&c.model),
        "Driver": opt(c.driver.as_ref(), |d| json!({
            "IOThread": d.iothread,
            "Queues": d.queues,
            "IOMMU": s(&d.iommu),
        })),
        "Alias": opt(c.alias.as_ref(), alias_json),
        "Address": opt(c.address.as_ref(), address_json),
        "PCIHole64": null,
    })
}

/// `api.Channel`: `{Type, Source{Mode,Path}, Target{Name,Type,Address,Port,
/// State}}`. `Target.State` (`connected` in live XML while the guest agent
/// is up) drives virt-handler's AgentConnected condition.
fn channel_json(c: &Channel) -> Value {
    json!({
        "Type": c.channel_type,
        "Source": opt(c.source.as_ref(), |src| json!({
            "Mode": s(&src.mode),
            "Path": s(&src.path),
        })),
        "Target": {
            "Name": s(&c.target.name),
            "Type": c.target.target_type,
            "Address": "",
            "Port": 0,
            "State": s(&c.target.state),
        },
    })
}

/// `api.Console`: `{Type, Target{Type,Port}, Source, Alias}` (`Source` and
/// `Alias` are not in the model: `null`).
fn console_json(c: &Console) -> Value {
    json!({
        "Type": c.console_type,
        "Target": opt(c.target.as_ref(), |t| json!({
            "Type": t.target_type,
            "Port": t.port,
        })),
        "Source": null,
        "Alias": null,
    })
}

/// `api.Serial`: `{Type, Target{Port}, Source{Mode,Path}, Alias, Log{File,
/// Append}}`.
fn serial_json(c: &Serial) -> Value {
    json!({
        "Type": c.serial_type,
        "Target": opt(c.target.as_ref(), |t| json!({ "Port": t.port })),
        "Source": opt(c.source.as_ref(), |src| json!({
            "Mode": s(&src.mode),
            "Path": s(&src.path),
        })),
        "Alias": opt(c.alias.as_ref(), alias_json),
        "Log": opt(c.log.as_ref(), |l| json!({
            "File": l.file,
            "Append": s(&l.append),
        })),
    })
}

/// `api.Input`: `{Type, Bus, Alias, Address, Model}`.
fn input_json(i: &Input) -> Value {
    json!({
        "Type": i.input_type,
        "Bus": s(&i.bus),
        "Alias": opt(i.alias.as_ref(), alias_json),
        "Address": null,
        "Model": s(&i.model),
    })
}

/// `api.Graphics`; `Listen` is a single pointer in Go: the first listener.
fn graphics_json(g: &Graphics) -> Value {
    json!({
        "AutoPort": "",
        "DefaultMode": "",
        "Listen": opt(g.listen.first(), |l| json!({
            "Type": l.listen_type,
            "Address": "",
            "Network": "",
            "Socket": s(&l.socket),
        })),
        "PasswdValidTo": "",
        "Port": 0,
        "TLSPort": 0,
        "Type": g.graphics_type,
    })
}

/// `api.Video`: `{Model{Type,Heads,Ram,VRam,VGAMem}}`.
fn video_json(v: &Video) -> Value {
    json!({
        "Model": {
            "Type": v.model.model_type,
            "Heads": v.model.heads,
            "Ram": null,
            "VRam": v.model.vram,
            "VGAMem": null,
        }
    })
}

/// `api.MemBalloon`: `{Model, Stats{Period}, Address, Driver,
/// FreePageReporting}`.
fn memballoon_json(m: &MemBalloon) -> Value {
    json!({
        "Model": m.model,
        "Stats": opt(m.stats.as_ref(), |st| json!({ "Period": st.period })),
        "Address": null,
        "Driver": null,
        "FreePageReporting": s(&m.free_page_reporting),
    })
}

/// `api.Rng`: `{Model, Backend{Model,Source}, Address, Driver}`.
fn rng_json(r: &Rng) -> Value {
    json!({
        "Model": r.model,
        "Backend": { "Model": r.backend.model, "Source": r.backend.source },
        "Address": null,
        "Driver": null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Live XML in the shape libvirt 11 returns (`virDomainGetXMLDesc(0)`)
    /// for a running KubeVirt domain under TCG.
    const LIVE_XML: &str = r#"<domain type='qemu' id='1'>
  <name>ns1_vm1</name>
  <uuid>5d307ca9-b3ef-428c-8861-06e72d69f223</uuid>
  <metadata>
    <kubevirt xmlns="http://kubevirt.io">
      <uid>0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77</uid>
      <graceperiod>
        <deletionGracePeriodSeconds>30</deletionGracePeriodSeconds>
      </graceperiod>
    </kubevirt>
  </metadata>
  <memory unit='KiB'>131072</memory>
  <currentMemory unit='KiB'>131072</currentMemory>
  <vcpu placement='static'>1</vcpu>
  <iothreads>1</iothreads>
  <resource>
    <partition>/machine</partition>
  </resource>
  <sysinfo type='smbios'>
    <system>
      <entry name='manufacturer'>KubeVirt</entry>
      <entry name='product'>None</entry>
      <entry name='uuid'>5d307ca9-b3ef-428c-8861-06e72d69f223</entry>
      <entry name='family'>KubeVirt</entry>
    </system>
  </sysinfo>
  <os>
    <type arch='x86_64' machine='pc-q35-10.0'>hvm</type>
    <smbios mode='sysinfo'/>
    <boot dev='hd'/>
  </os>
  <features>
    <acpi/>
    <apic/>
    <vmport state='off'/>
  </features>
  <cpu mode='custom' match='exact' check='full'>
    <model fallback='forbid'>qemu64</model>
    <topology sockets='1' dies='1' clusters='1' cores='1' threads='1'/>
    <feature policy='require' name='x2apic'/>
    <feature policy='require' name='hypervisor'/>
    <feature policy='require' name='lahf_lm'/>
  </cpu>
  <clock offset='utc' adjustment='reset'>
    <timer name='rtc' tickpolicy='catchup'/>
    <timer name='pit' tickpolicy='delay'/>
  </clock>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk' model='virtio-non-transitional'>
      <driver name='qemu' type='qcow2' cache='none' error_policy='stop' discard='unmap'/>
      <source file='/var/run/kubevirt-ephemeral-disks/disk-data/containerdisk/disk.qcow2' index='2'/>
      <backingStore type='file' index='3'>
        <format type='raw'/>
        <source file='/var/run/kubevirt/container-disks/disk_0.img'/>
        <backingStore/>
      </backingStore>
      <target dev='vda' bus='virtio'/>
      <alias name='ua-containerdisk'/>
      <address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0'/>
    </disk>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw' cache='none' error_policy='stop'/>
      <source file='/var/run/kubevirt-ephemeral-disks/cloud-init-data/ns1/vm1/noCloud.iso' index='1'/>
      <backingStore/>
      <target dev='sda' bus='sata' tray='closed'/>
      <readonly/>
      <alias name='ua-cloudinitdisk'/>
      <address type='drive' controller='0' bus='0' target='0' unit='0'/>
    </disk>
    <controller type='usb' index='0' model='none'>
      <alias name='usb'/>
    </controller>
    <controller type='scsi' index='0' model='virtio-non-transitional'>
      <alias name='scsi0'/>
      <address type='pci' domain='0x0000' bus='0x02' slot='0x00' function='0x0'/>
    </controller>
    <controller type='virtio-serial' index='0' model='virtio-non-transitional'>
      <alias name='virtio-serial0'/>
      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>
    </controller>
    <controller type='sata' index='0'>
      <alias name='ide'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x1f' function='0x2'/>
    </controller>
    <controller type='pci' index='0' model='pcie-root'>
      <alias name='pcie.0'/>
    </controller>
    <controller type='pci' index='1' model='pcie-root-port'>
      <model name='pcie-root-port'/>
      <target chassis='1' port='0x10'/>
      <alias name='pci.1'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x0' multifunction='on'/>
    </controller>
    <serial type='unix'>
      <source mode='bind' path='/var/run/kubevirt-private/0b9b7b4c/virt-serial0'/>
      <log file='/var/run/kubevirt-private/0b9b7b4c/virt-serial0-log' append='on'/>
      <target type='isa-serial' port='0'>
        <model name='isa-serial'/>
      </target>
      <alias name='serial0'/>
    </serial>
    <console type='unix'>
      <source mode='bind' path='/var/run/kubevirt-private/0b9b7b4c/virt-serial0'/>
      <log file='/var/run/kubevirt-private/0b9b7b4c/virt-serial0-log' append='on'/>
      <target type='serial' port='0'/>
      <alias name='serial0'/>
    </console>
    <channel type='unix'>
      <source mode='bind' path='/var/lib/libvirt/qemu/channel/target/domain-1-ns1_vm1/org.qemu.guest_agent.0'/>
      <target type='virtio' name='org.qemu.guest_agent.0' state='connected'/>
      <alias name='channel0'/>
      <address type='virtio-serial' controller='0' bus='0' port='1'/>
    </channel>
    <input type='mouse' bus='ps2'>
      <alias name='input0'/>
    </input>
    <input type='keyboard' bus='ps2'>
      <alias name='input1'/>
    </input>
    <graphics type='vnc'>
      <listen type='socket' socket='/var/run/kubevirt-private/0b9b7b4c/virt-vnc'/>
    </graphics>
    <audio id='1' type='none'/>
    <video>
      <model type='vga' vram='16384' heads='1' primary='yes'/>
      <alias name='video0'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x01' function='0x0'/>
    </video>
    <memballoon model='virtio-non-transitional' freePageReporting='on'>
      <stats period='10'/>
      <alias name='balloon0'/>
      <address type='pci' domain='0x0000' bus='0x04' slot='0x00' function='0x0'/>
    </memballoon>
  </devices>
  <seclabel type='none' model='none'/>
  <seclabel type='dynamic' model='dac' relabel='yes'>
    <label>+107:+107</label>
    <imagelabel>+107:+107</imagelabel>
  </seclabel>
</domain>
"#;

    fn running() -> DomainStatus {
        DomainStatus {
            status: "Running".into(),
            reason: "Unknown".into(),
            ..DomainStatus::default()
        }
    }

    fn meta() -> ObjectMeta {
        ObjectMeta {
            name: "vm1".into(),
            namespace: "ns1".into(),
            uid: "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77".into(),
            deletion_timestamp: None,
        }
    }

    fn keys(v: &Value) -> Vec<&str> {
        let mut k: Vec<&str> = v
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        k.sort_unstable();
        k
    }

    #[test]
    fn live_xml_gives_the_values_virt_handler_reads() {
        let d = Domain::from_xml(LIVE_XML).unwrap();
        let j = domain_json(&meta(), Some(&d), &running());

        assert_eq!(j["kind"], "Domain");
        assert_eq!(j["apiVersion"], "1.2.2");
        assert_eq!(
            j["ObjectMeta"],
            json!({
                "name": "vm1",
                "namespace": "ns1",
                "uid": "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77",
                "creationTimestamp": null,
            })
        );
        let spec = &j["Spec"];
        assert_eq!(spec["XMLName"], json!({ "Space": "", "Local": "domain" }));
        assert_eq!(spec["Type"], "qemu");
        assert_eq!(spec["XmlNS"], QEMU_XMLNS);
        assert_eq!(spec["Name"], "ns1_vm1");
        assert_eq!(spec["UUID"], "5d307ca9-b3ef-428c-8861-06e72d69f223");
        assert_eq!(spec["Memory"], json!({ "Value": 131072, "Unit": "KiB" }));
        assert_eq!(
            spec["CurrentMemory"],
            json!({ "Value": 131072, "Unit": "KiB" })
        );
        assert_eq!(spec["VCPU"], json!({ "Placement": "static", "CPUs": 1 }));
        assert_eq!(spec["IOThreads"], json!({ "IOThreads": 1 }));
        assert_eq!(
            spec["OS"]["Type"],
            json!({ "OS": "hvm", "Arch": "x86_64", "Machine": "pc-q35-10.0" })
        );
        assert_eq!(spec["OS"]["SMBios"], json!({ "Mode": "sysinfo" }));
        assert_eq!(spec["OS"]["BootOrder"], json!([{ "Dev": "hd" }]));
        assert_eq!(spec["OS"]["BootLoader"], Value::Null);
        assert_eq!(spec["OS"]["Kernel"], "");
        assert_eq!(spec["SysInfo"]["Type"], "smbios");
        assert_eq!(
            spec["SysInfo"]["System"][2],
            json!({ "Name": "uuid", "Value": "5d307ca9-b3ef-428c-8861-06e72d69f223" })
        );
        assert_eq!(spec["SysInfo"]["Chassis"], Value::Null);
        assert_eq!(spec["Features"]["ACPI"], json!({}));
        assert_eq!(spec["Features"]["SMM"], Value::Null);
        assert_eq!(spec["Features"]["VMPort"], json!({ "State": "off" }));
        assert_eq!(spec["CPU"]["Mode"], "custom");
        assert_eq!(spec["CPU"]["Model"], "qemu64");
        assert_eq!(
            spec["CPU"]["Features"][0],
            json!({ "Name": "x2apic", "Policy": "require" })
        );
        assert_eq!(
            spec["CPU"]["Topology"],
            json!({ "Sockets": 1, "Cores": 1, "Threads": 1 })
        );
        assert_eq!(spec["CPU"]["NUMA"], Value::Null);
        assert_eq!(spec["Clock"]["Offset"], "utc");
        assert_eq!(spec["Clock"]["Adjustment"], "reset");
        assert_eq!(
            spec["Clock"]["Timer"][1],
            json!({ "Name": "pit", "TickPolicy": "delay", "Present": "", "Track": "", "Frequency": "" })
        );
        assert_eq!(
            spec["Metadata"],
            json!({ "KubeVirt": {
                "UID": "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77",
                "GracePeriod": {
                    "DeletionGracePeriodSeconds": 30,
                    "DeletionTimestamp": null,
                    "MarkedForGracefulShutdown": null,
                },
                "Migration": null,
                "AccessCredential": null,
                "MemoryDump": null,
            }})
        );

        let dev = &spec["Devices"];
        assert_eq!(dev["Emulator"], "/usr/bin/qemu-system-x86_64");
        assert_eq!(dev["Interfaces"], Value::Null);
        assert_eq!(dev["HostDevices"], Value::Null);
        assert_eq!(dev["Rng"], Value::Null);
        let disk = &dev["Disks"][0];
        assert_eq!(
            disk["Alias"],
            json!({ "Name": "containerdisk", "UserDefined": true })
        );
        assert_eq!(
            disk["Target"],
            json!({ "Bus": "virtio", "Device": "vda", "Tray": "" })
        );
        assert_eq!(disk["Device"], "disk");
        assert_eq!(disk["Type"], "file");
        assert_eq!(disk["Model"], "virtio-non-transitional");
        assert_eq!(
            disk["Source"]["File"],
            "/var/run/kubevirt-ephemeral-disks/disk-data/containerdisk/disk.qcow2"
        );
        assert_eq!(disk["Source"]["Dev"], "");
        assert_eq!(disk["Driver"]["Type"], "qcow2");
        assert_eq!(disk["Driver"]["ErrorPolicy"], "stop");
        assert_eq!(disk["Driver"]["Discard"], "unmap");
        assert_eq!(disk["Driver"]["Queues"], Value::Null);
        assert_eq!(disk["BackingStore"]["Type"], "file");
        assert_eq!(disk["BackingStore"]["Format"], json!({ "Type": "raw" }));
        assert_eq!(
            disk["BackingStore"]["Source"]["File"],
            "/var/run/kubevirt/container-disks/disk_0.img"
        );
        assert_eq!(
            disk["Address"],
            json!({
                "Type": "pci", "Domain": "0x0000", "Bus": "0x03", "Slot": "0x00",
                "Function": "0x0", "Controller": "", "Target": "", "Unit": "",
                "UUID": "", "Device": "", "CSSID": "", "SSID": "", "DevNo": "",
            })
        );
        assert_eq!(disk["ReadOnly"], Value::Null);
        assert_eq!(disk["BootOrder"], Value::Null);
        assert_eq!(disk["Shareable"], Value::Null);
        assert_eq!(disk["ExpandDisksEnabled"], false);
        let cdrom = &dev["Disks"][1];
        assert_eq!(cdrom["ReadOnly"], json!({}));
        assert_eq!(cdrom["Target"]["Tray"], "closed");
        assert_eq!(cdrom["Address"]["Unit"], "0");
        // `<backingStore/>`: a non-nil empty struct, as Go decodes it.
        assert_eq!(
            cdrom["BackingStore"],
            json!({ "Type": "", "Format": null, "Source": null })
        );

        let ctrls = dev["Controllers"].as_array().unwrap();
        assert_eq!(ctrls.len(), 6);
        assert_eq!(
            ctrls[0]["Alias"],
            json!({ "Name": "usb", "UserDefined": false })
        );
        assert_eq!(ctrls[0]["Address"], Value::Null);
        assert_eq!(ctrls[2]["Type"], "virtio-serial");
        assert_eq!(ctrls[2]["Address"]["Bus"], "0x01");
        assert_eq!(ctrls[5]["Model"], "pcie-root-port");
        assert_eq!(ctrls[5]["Index"], "1");

        let chan = &dev["Channels"][0];
        assert_eq!(chan["Target"]["State"], "connected");
        assert_eq!(chan["Target"]["Name"], "org.qemu.guest_agent.0");
        assert_eq!(chan["Target"]["Type"], "virtio");
        assert_eq!(chan["Source"]["Mode"], "bind");

        assert_eq!(dev["Serials"][0]["Target"], json!({ "Port": 0 }));
        assert_eq!(
            dev["Serials"][0]["Alias"],
            json!({ "Name": "serial0", "UserDefined": false })
        );
        assert_eq!(dev["Serials"][0]["Log"]["Append"], "on");
        assert_eq!(
            dev["Consoles"][0]["Target"],
            json!({ "Type": "serial", "Port": 0 })
        );
        assert_eq!(dev["Inputs"][1]["Type"], "keyboard");
        assert_eq!(dev["Inputs"][1]["Bus"], "ps2");
        assert_eq!(
            dev["Graphics"][0]["Listen"]["Socket"],
            "/var/run/kubevirt-private/0b9b7b4c/virt-vnc"
        );
        assert_eq!(dev["Graphics"][0]["Type"], "vnc");
        assert_eq!(
            dev["Video"][0]["Model"],
            json!({ "Type": "vga", "Heads": 1, "Ram": null, "VRam": 16384, "VGAMem": null })
        );
        assert_eq!(dev["Ballooning"]["Stats"], json!({ "Period": 10 }));
        assert_eq!(dev["Ballooning"]["FreePageReporting"], "on");

        assert_eq!(
            j["Status"],
            json!({
                "Status": "Running",
                "Reason": "Unknown",
                "Interfaces": null,
                "OSInfo": {
                    "Name": "", "KernelRelease": "", "Version": "", "PrettyName": "",
                    "VersionId": "", "KernelVersion": "", "Machine": "", "Id": "",
                },
                "FSFreezeStatus": { "Status": "" },
            })
        );
    }

    #[test]
    fn every_spec_object_has_go_s_key_set() {
        let d = Domain::from_xml(LIVE_XML).unwrap();
        let j = domain_json(&meta(), Some(&d), &running());
        let spec = &j["Spec"];
        assert_eq!(
            keys(spec),
            [
                "CPU",
                "CPUTune",
                "Clock",
                "CurrentMemory",
                "Devices",
                "Features",
                "IOThreads",
                "LaunchSecurity",
                "MaxMemory",
                "Memory",
                "MemoryBacking",
                "Metadata",
                "NUMATune",
                "Name",
                "OS",
                "QEMUCmd",
                "Resource",
                "SysInfo",
                "Type",
                "UUID",
                "VCPU",
                "VCPUs",
                "XMLName",
                "XmlNS",
            ]
        );
        assert_eq!(
            keys(&spec["Devices"]),
            [
                "Ballooning",
                "Channels",
                "Consoles",
                "Controllers",
                "Disks",
                "Emulator",
                "Filesystems",
                "Graphics",
                "HostDevices",
                "Inputs",
                "Interfaces",
                "Memory",
                "PanicDevices",
                "Redirs",
                "Rng",
                "Serials",
                "SoundCards",
                "TPMs",
                "VSOCK",
                "Video",
                "Watchdogs",
            ]
        );
        assert_eq!(
            keys(&spec["Devices"]["Disks"][0]),
            [
                "Address",
                "Alias",
                "Auth",
                "BackingStore",
                "BlockIO",
                "BootOrder",
                "Capacity",
                "Device",
                "Driver",
                "ExpandDisksEnabled",
                "FilesystemOverhead",
                "Model",
                "ReadOnly",
                "Serial",
                "Shareable",
                "Snapshot",
                "Source",
                "Target",
                "Type",
            ]
        );
        assert_eq!(
            keys(&spec["Devices"]["Disks"][0]["Driver"]),
            [
                "Cache",
                "Discard",
                "ErrorPolicy",
                "IO",
                "IOMMU",
                "IOThread",
                "IOThreads",
                "Name",
                "Queues",
                "Type",
            ]
        );
        assert_eq!(
            keys(&spec["Devices"]["Channels"][0]["Target"]),
            ["Address", "Name", "Port", "State", "Type"]
        );
        assert_eq!(
            keys(&spec["OS"]),
            [
                "ACPI",
                "BIOS",
                "BootLoader",
                "BootMenu",
                "BootOrder",
                "Initrd",
                "Kernel",
                "KernelArgs",
                "NVRam",
                "SMBios",
                "Type",
            ]
        );
    }

    #[test]
    fn interfaces_have_go_s_key_set() {
        let xml = LIVE_XML.replace(
            "<devices>",
            "<devices><interface type='ethernet'><mac address='02:00:00:00:00:01'/>\
             <target dev='tap0' managed='no'/><model type='virtio-non-transitional'/>\
             <mtu size='1450'/><alias name='ua-default'/><rom enabled='no'/>\
             <link state='down'/></interface>",
        );
        let d = Domain::from_xml(&xml).unwrap();
        let j = domain_json(&meta(), Some(&d), &running());
        let i = &j["Spec"]["Devices"]["Interfaces"][0];
        assert_eq!(
            keys(i),
            [
                "ACPI",
                "Address",
                "Alias",
                "Backend",
                "BandWidth",
                "BootOrder",
                "Driver",
                "FilterRef",
                "LinkState",
                "MAC",
                "MTU",
                "Model",
                "PortForward",
                "Rom",
                "Source",
                "Target",
                "TrustGuestRxFilters",
                "Type",
            ]
        );
        assert_eq!(i["MAC"], json!({ "MAC": "02:00:00:00:00:01" }));
        assert_eq!(i["Target"], json!({ "Device": "tap0", "Managed": "no" }));
        assert_eq!(i["MTU"], json!({ "Size": "1450" }));
        assert_eq!(
            i["Alias"],
            json!({ "Name": "default", "UserDefined": true })
        );
        assert_eq!(i["LinkState"], json!({ "State": "down" }));
        assert_eq!(i["Rom"], json!({ "Enabled": "no" }));
    }

    /// An SR-IOV hostdev as libvirt writes it back (source address without
    /// `type`, `mode` filled in) reads into the model and gives KubeVirt's
    /// `api.HostDevice` keys and values.
    #[test]
    fn sriov_hostdevs_have_go_s_key_set() {
        let xml = LIVE_XML.replace(
            "<devices>",
            "<devices><hostdev mode='subsystem' type='pci' managed='no'>\
             <source><address domain='0x0000' bus='0x81' slot='0x11' function='0x1'/></source>\
             <alias name='ua-sriov-sriov-net'/><boot order='2'/>\
             <address type='pci' domain='0x0000' bus='0x07' slot='0x00' function='0x0'/></hostdev>",
        );
        let d = Domain::from_xml(&xml).unwrap();
        assert_eq!(d.devices.hostdev.len(), 1);
        let j = domain_json(&meta(), Some(&d), &running());
        let h = &j["Spec"]["Devices"]["HostDevices"][0];
        assert_eq!(
            keys(h),
            [
                "Address",
                "Alias",
                "BootOrder",
                "Display",
                "Managed",
                "Mode",
                "Model",
                "RamFB",
                "Source",
                "Type",
                "XMLName",
            ]
        );
        assert_eq!(h["XMLName"], json!({ "Space": "", "Local": "hostdev" }));
        assert_eq!(h["Type"], "pci");
        assert_eq!(h["Managed"], "no");
        assert_eq!(h["Mode"], "subsystem");
        assert_eq!(h["Model"], "");
        assert_eq!(h["Display"], "");
        assert_eq!(h["BootOrder"], json!({ "Order": 2 }));
        assert_eq!(
            h["Alias"],
            json!({ "Name": "sriov-sriov-net", "UserDefined": true })
        );
        let src = &h["Source"]["Address"];
        assert_eq!(src["Type"], "");
        assert_eq!(
            [&src["Domain"], &src["Bus"], &src["Slot"], &src["Function"]],
            ["0x0000", "0x81", "0x11", "0x1"]
        );
        assert_eq!(h["Address"]["Type"], "pci");
        assert_eq!(h["Address"]["Bus"], "0x07");
        // Without host devices the list is Go's nil slice.
        let plain = domain_json(
            &meta(),
            Some(&Domain::from_xml(LIVE_XML).unwrap()),
            &running(),
        );
        assert_eq!(plain["Spec"]["Devices"]["HostDevices"], Value::Null);
    }

    /// The passt binding's interface: `Source.Device`, `Backend` and
    /// `PortForward` in Go's names and zero values.
    #[test]
    fn passt_interface_has_backend_and_port_forwards() {
        let xml = LIVE_XML.replace(
            "<devices>",
            "<devices><interface type='user'><source dev='eth0'/>\
             <mac address='02:00:00:00:00:01'/><model type='virtio-non-transitional'/>\
             <backend type='passt' logFile='/var/run/kubevirt/passt.log'/>\
             <portForward proto='tcp' dev='eth0'><range start='15000' exclude='yes'/>\
             <range start='8080'/></portForward><portForward proto='udp' dev='eth0'/>\
             <alias name='ua-default'/></interface>",
        );
        let d = Domain::from_xml(&xml).unwrap();
        let j = domain_json(&meta(), Some(&d), &running());
        let i = &j["Spec"]["Devices"]["Interfaces"][0];
        assert_eq!(i["Type"], "user");
        assert_eq!(i["Source"]["Device"], "eth0");
        assert_eq!(i["Target"], Value::Null);
        assert_eq!(
            i["Backend"],
            json!({ "Type": "passt", "LogFile": "/var/run/kubevirt/passt.log" })
        );
        assert_eq!(
            i["PortForward"],
            json!([
                { "Proto": "tcp", "Address": "", "Dev": "eth0", "Ranges": [
                    { "Start": 15000, "End": 0, "To": 0, "Exclude": "yes" },
                    { "Start": 8080, "End": 0, "To": 0, "Exclude": "" },
                ] },
                { "Proto": "udp", "Address": "", "Dev": "eth0", "Ranges": null },
            ])
        );
    }

    #[test]
    fn alias_prefix_is_stripped_only_for_user_aliases() {
        let user = alias_json(&Alias::user("root"));
        assert_eq!(user, json!({ "Name": "root", "UserDefined": true }));
        let libvirt = alias_json(&Alias {
            name: "virtio-disk0".into(),
        });
        assert_eq!(
            libvirt,
            json!({ "Name": "virtio-disk0", "UserDefined": false })
        );
    }

    #[test]
    fn final_delete_event_has_the_zero_spec() {
        let m = ObjectMeta {
            deletion_timestamp: Some("2025-01-01T00:00:00Z".into()),
            ..meta()
        };
        let status = DomainStatus {
            status: "NoState".into(),
            reason: "NonExistent".into(),
            ..DomainStatus::default()
        };
        let j = domain_json(&m, None, &status);
        assert_eq!(
            keys(&j),
            ["ObjectMeta", "Spec", "Status", "apiVersion", "kind"]
        );
        assert_eq!(j["kind"], "Domain");
        assert_eq!(j["apiVersion"], "1.2.2");
        assert_eq!(
            j["ObjectMeta"],
            json!({
                "name": "vm1",
                "namespace": "ns1",
                "uid": "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77",
                "creationTimestamp": null,
                "deletionTimestamp": "2025-01-01T00:00:00Z",
            })
        );
        let spec = &j["Spec"];
        assert_eq!(spec["XMLName"], json!({ "Space": "", "Local": "" }));
        assert_eq!(spec["Type"], "");
        assert_eq!(spec["XmlNS"], "");
        assert_eq!(spec["Name"], "");
        assert_eq!(spec["UUID"], "");
        assert_eq!(spec["Memory"], json!({ "Value": 0, "Unit": "" }));
        assert_eq!(spec["CurrentMemory"], Value::Null);
        assert_eq!(spec["VCPU"], Value::Null);
        assert_eq!(spec["Features"], Value::Null);
        assert_eq!(spec["Clock"], Value::Null);
        assert_eq!(spec["SysInfo"], Value::Null);
        assert_eq!(
            spec["CPU"],
            json!({ "Mode": "", "Model": "", "Features": null, "Topology": null, "NUMA": null })
        );
        assert_eq!(
            spec["OS"]["Type"],
            json!({ "OS": "", "Arch": "", "Machine": "" })
        );
        assert_eq!(spec["OS"]["BootOrder"], Value::Null);
        assert_eq!(
            spec["Metadata"],
            json!({ "KubeVirt": {
                "UID": "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77",
                "GracePeriod": null,
                "Migration": null,
                "AccessCredential": null,
                "MemoryDump": null,
            }})
        );
        let dev = &spec["Devices"];
        assert_eq!(dev["Emulator"], "");
        for (k, v) in dev.as_object().unwrap() {
            if k != "Emulator" {
                assert_eq!(v, &Value::Null, "Devices.{k}");
            }
        }
        assert_eq!(j["Status"]["Status"], "NoState");
        assert_eq!(j["Status"]["Reason"], "NonExistent");
        assert_eq!(j["Status"]["Interfaces"], Value::Null);
        assert_eq!(keys(&j["Status"]["OSInfo"]).len(), 8);
        assert_eq!(j["Status"]["FSFreezeStatus"], json!({ "Status": "" }));
    }

    #[test]
    fn empty_identity_fields_are_omitted() {
        // GetDomain: ObjectMeta.uid empty, Spec.Metadata.KubeVirt.UID from the XML.
        let d = Domain::from_xml(LIVE_XML).unwrap();
        let m = ObjectMeta {
            uid: String::new(),
            ..meta()
        };
        let j = domain_json(&m, Some(&d), &running());
        assert_eq!(
            j["ObjectMeta"],
            json!({ "name": "vm1", "namespace": "ns1", "creationTimestamp": null })
        );
        assert_eq!(
            j["Spec"]["Metadata"]["KubeVirt"]["UID"],
            "0b9b7b4c-2f6a-4a53-9c2e-3f1f1d1e2a77"
        );
    }

    #[test]
    fn runtime_metadata_overrides_the_xml() {
        let d = Domain::from_xml(LIVE_XML).unwrap();
        let runtime = RuntimeMetadata {
            uid: Some("cache-uid".into()),
            grace_period: Some(GracePeriod {
                deletion_grace_period_seconds: 5,
                deletion_timestamp: Some("2025-01-01T00:00:00Z".into()),
                marked_for_graceful_shutdown: Some(true),
            }),
            migration: Some(MigrationMetadata {
                uid: "mig".into(),
                start_timestamp: Some("2025-01-01T00:00:01Z".into()),
                mode: "PreCopy".into(),
                ..MigrationMetadata::default()
            }),
            access_credential: Some(AccessCredentialMetadata {
                succeeded: true,
                message: "ok".into(),
            }),
            memory_dump: None,
        };
        let j = domain_json_with_metadata(&meta(), Some(&d), &running(), &runtime);
        assert_eq!(
            j["Spec"]["Metadata"]["KubeVirt"],
            json!({
                "UID": "cache-uid",
                "GracePeriod": {
                    "DeletionGracePeriodSeconds": 5,
                    "DeletionTimestamp": "2025-01-01T00:00:00Z",
                    "MarkedForGracefulShutdown": true,
                },
                "Migration": {
                    "UID": "mig",
                    "StartTimestamp": "2025-01-01T00:00:01Z",
                    "EndTimestamp": null,
                    "Failed": false,
                    "FailureReason": "",
                    "AbortStatus": "",
                    "Mode": "PreCopy",
                },
                "AccessCredential": { "Succeeded": true, "Message": "ok" },
                "MemoryDump": null,
            })
        );
    }

    #[test]
    fn agent_status_is_normalised_to_go_names() {
        let status = DomainStatus {
            interfaces: Some(vec![
                json!({ "Mac": "02:00:00:00:00:01", "Ip": "10.0.2.2", "IPs": ["10.0.2.2", "fd10::2"], "InterfaceName": "eth0" }),
                json!({ "mac": "02:00:00:00:00:02", "ipAddress": "10.1.0.5", "ipAddresses": ["10.1.0.5"], "interfaceName": "eth1" }),
            ]),
            os_info: Some(json!({ "name": "Fedora Linux", "Id": "fedora", "versionId": "41" })),
            fs_freeze_status: "frozen".into(),
            ..running()
        };
        let j = domain_json(&meta(), None, &status);
        assert_eq!(
            j["Status"]["Interfaces"],
            json!([
                { "Mac": "02:00:00:00:00:01", "Ip": "10.0.2.2", "IPs": ["10.0.2.2", "fd10::2"], "InterfaceName": "eth0" },
                { "Mac": "02:00:00:00:00:02", "Ip": "10.1.0.5", "IPs": ["10.1.0.5"], "InterfaceName": "eth1" },
            ])
        );
        assert_eq!(j["Status"]["OSInfo"]["Name"], "Fedora Linux");
        assert_eq!(j["Status"]["OSInfo"]["Id"], "fedora");
        assert_eq!(j["Status"]["OSInfo"]["VersionId"], "41");
        assert_eq!(j["Status"]["OSInfo"]["Machine"], "");
        assert_eq!(j["Status"]["FSFreezeStatus"]["Status"], "frozen");

        let empty = DomainStatus {
            interfaces: Some(Vec::new()),
            ..running()
        };
        assert_eq!(
            domain_json(&meta(), None, &empty)["Status"]["Interfaces"],
            Value::Null
        );
    }

    #[test]
    fn a_full_domain_serialises_to_valid_json() {
        let mut d = Domain::from_xml(LIVE_XML).unwrap();
        // Exercise the optional parts the live XML above lacks.
        d.os.loader = Some(crate::Loader {
            readonly: Some("yes".into()),
            secure: Some("no".into()),
            loader_type: Some("pflash".into()),
            path: "/usr/share/OVMF/OVMF_CODE.fd".into(),
        });
        d.os.nvram = Some(crate::Nvram {
            template: Some("/usr/share/OVMF/OVMF_VARS.fd".into()),
            path: "/var/run/kubevirt-private/libvirt/qemu/nvram/vm1_VARS.fd".into(),
        });
        d.os.cmdline = Some("console=ttyS0 \"quoted\" \\ back".into());
        d.devices.rng.push(crate::Rng {
            model: "virtio-non-transitional".into(),
            backend: crate::RngBackend {
                model: "random".into(),
                source: "/dev/urandom".into(),
            },
        });
        d.devices.disk[0].boot = Some(crate::BootOrder { order: 1 });
        d.devices.disk[0].shareable = Some(crate::Empty {});
        d.name = "ns_\u{1}weird\"name\u{2028}".into();
        let j = domain_json(&meta(), Some(&d), &running());
        let text = serde_json::to_string(&j).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, j);
        assert_eq!(back["Spec"]["Name"], "ns_\u{1}weird\"name\u{2028}");
        assert_eq!(
            back["Spec"]["Devices"]["Rng"]["Backend"]["Source"],
            "/dev/urandom"
        );
        assert_eq!(
            back["Spec"]["Devices"]["Disks"][0]["BootOrder"],
            json!({ "Order": 1 })
        );
        assert_eq!(back["Spec"]["Devices"]["Disks"][0]["Shareable"], json!({}));
        assert_eq!(back["Spec"]["OS"]["BootLoader"]["Type"], "pflash");
        assert_eq!(
            back["Spec"]["OS"]["NVRam"]["Template"],
            "/usr/share/OVMF/OVMF_VARS.fd"
        );
        assert!(serde_json::to_string(&domain_json(&meta(), None, &running())).is_ok());
    }

    #[test]
    fn converter_style_xml_round_trips_unchanged_with_the_new_fields() {
        // The fields added for the live XML are `None`/empty by default and
        // must not appear in generated XML.
        let d = Domain::from_xml(LIVE_XML).unwrap();
        let xml = d.to_xml().unwrap();
        let again = Domain::from_xml(&xml).unwrap();
        assert_eq!(again, d);
        let plain = Domain::default().to_xml().unwrap();
        for absent in [
            "<boot ",
            "<numa",
            "iothread=",
            "iommu=",
            "cssid=",
            "<driver",
        ] {
            assert!(!plain.contains(absent), "{absent} in {plain}");
        }
    }
}
