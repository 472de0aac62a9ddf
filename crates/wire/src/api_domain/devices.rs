//! `api.Devices`: one encoder per device kind, the common `Alias` and
//! `Address`.

use domain::{
    Address, Alias, BackingStore, Channel, Console, Controller, Devices, Disk, DiskDriver,
    DiskSource, Filesystem, Graphics, HostDevice, Input, Interface, MemBalloon, MemoryDevice,
    MemoryValue, Rng, Serial, Video,
};
use serde_json::{json, Value};

use super::{list, opt, s, USER_ALIAS_PREFIX};

/// `api.Devices`. Device kinds the model does not carry (panic devices,
/// virtio-mem memory) are `null`.
pub(super) fn devices_json(d: &Devices) -> Value {
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
        "Memory": opt(d.memory.first(), memory_device_json),
    })
}

/// `api.MemoryDevice` (a single pointer in Go: the first one):
/// `{Model, Target{Size, Requested, Current, Node, Block, Address}, Alias,
/// Address}`; the sizes are Go values (zero when absent), the target's
/// DIMM address is not in the model (`null`).
fn memory_device_json(m: &MemoryDevice) -> Value {
    let size = |v: &Option<MemoryValue>| {
        let v = v.clone().unwrap_or_default();
        json!({ "Value": v.value, "Unit": v.unit })
    };
    let t = &m.target;
    json!({
        "Model": m.model,
        "Target": {
            "Size": size(&t.size),
            "Requested": size(&t.requested),
            "Current": size(&t.current),
            "Node": s(&t.node),
            "Block": size(&t.block),
            "Address": null,
        },
        "Alias": opt(m.alias.as_ref(), alias_json),
        "Address": opt(m.address.as_ref(), address_json),
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
pub(super) fn alias_json(a: &Alias) -> Value {
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

/// `api.DiskSource` (also the source of a backing store). KubeVirt main
/// adds `DataStore` (`{Type, Format{Type}, Source}`: virt-handler moves
/// changed block tracking to `Enabled` once every tracked disk has one);
/// it is written only on a disk that has one, so every other domain keeps
/// v1.6.6's shape.
fn disk_source_json(src: &DiskSource) -> Value {
    let mut v = disk_source_v1_6(src);
    if let (Some(ds), Some(map)) = (&src.data_store, v.as_object_mut()) {
        map.insert(
            "DataStore".into(),
            json!({
                "Type": ds.store_type,
                "Format": opt(ds.format.as_ref(), |f| json!({ "Type": f.format_type })),
                "Source": opt(ds.source.as_ref(), disk_source_json),
            }),
        );
    }
    v
}

fn disk_source_v1_6(src: &DiskSource) -> Value {
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
