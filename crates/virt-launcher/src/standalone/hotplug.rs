//! Hot-plug of volumes for a standalone `run` (`ctl addvolume`,
//! `ctl removevolume`): what in a cluster `virtctl addvolume` /
//! `removevolume`, virt-api, virt-controller and virt-handler do before
//! the launcher's SyncVMI, played for a launcher started by `run`.
//!
//! - The VMI object: `run` keeps the VMI it started in its state directory
//!   ([`STORE`], the informer's copy); `ctl` changes it and sends it with
//!   SyncVirtualMachine, then stores what the launcher accepted.
//! - virt-api's checks (`pkg/virt-api/rest/volumes.go` `verifyVolumeOption`,
//!   `vms-admitter.go` `validateHotplugDiskConfiguration`), in its words:
//!   a name in use, a volume that does not exist or is not hot-pluggable
//!   (the boot disk), a disk bus other than scsi or virtio.
//! - virt-controller's spec and status: a `persistentVolumeClaim` volume
//!   with `hotpluggable: true`, its disk, and a `volumeStatus` entry with
//!   `hotplugVolume` in phase `MountedToPod`; `Ready` and the target once
//!   the domain has the disk.
//! - virt-handler's mount: the image (or block device) is bind-mounted onto
//!   `/var/run/kubevirt/hotplug-disks/<volume>.img` (`<volume>` for a
//!   device) inside the launcher's mount namespace — as a mount clone
//!   (`open_tree`) moved in with `move_mount` from a thread that entered
//!   that namespace: the host's own mounts may not propagate into it (a
//!   private `/`), and the launcher's paths are its own. Removal unmounts
//!   it there after the detach.
//!
//! Standalone only: in a pod virt-handler does all of this; there is no
//! [`STORE`] and `ctl` refuses.

// open_tree(2) and move_mount(2) have no safe wrapper (nix, std).
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::LauncherError;

/// Where `run` keeps the VMI it runs, relative to its state directory.
pub const STORE: &str = "standalone/vmi.json";
/// The largest stored VMI read back (bytes).
const STORE_MAX: u64 = 16 << 20;
/// The attachment pod name the stand-in records (virt-controller's
/// `hp-volume-<random>`).
const ATTACH_POD: &str = "hp-volume-standalone";

/// A hot-plug bus: KubeVirt hot-plugs disks on scsi and virtio only.
pub fn check_bus(volume: &str, bus: &str) -> Result<(), LauncherError> {
    if bus == "scsi" || bus == "virtio" {
        return Ok(());
    }
    Err(LauncherError::input_at(
        "--bus",
        format!("Hotplug configuration for disk [{volume}] requires bus to be 'scsi' or 'virtio'. [{bus}] is not permitted."),
    ))
}

/// The state directory of the launcher whose command socket is `socket`
/// (`<state>/share/sockets/launcher-sock`).
pub fn state_dir_of(socket: &Path) -> Result<PathBuf, LauncherError> {
    socket
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            LauncherError::input_at("--socket", "is not <state-dir>/share/sockets/launcher-sock")
        })
}

/// Writes `vmi` (JSON) as the stored VMI of the state directory `state`
/// (mode 0600, written under a temporary name and renamed).
///
/// # Errors
/// A runtime error naming the file.
pub fn write_store(state: &Path, vmi: &Value) -> Result<(), LauncherError> {
    let file = state.join(STORE);
    let dir = file.parent().unwrap_or(state);
    let io = |e: std::io::Error| LauncherError::runtime(format!("{}: {e}", file.display()));
    let tmp = dir.join(".vmi.json.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io)?;
    std::io::Write::write_all(&mut f, vmi.to_string().as_bytes()).map_err(io)?;
    std::fs::rename(&tmp, &file).map_err(io)
}

/// Reads the stored VMI of the state directory `state`.
///
/// # Errors
/// Input error when there is none (the launcher is no standalone `run`'s),
/// runtime error when it cannot be read.
pub fn read_store(state: &Path) -> Result<Value, LauncherError> {
    let file = state.join(STORE);
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&file)
        .map_err(|e| {
            LauncherError::input_at(
                "--socket",
                format!(
                    "no VMI of a standalone run at {} ({e}): volumes are hot-plugged this way only for a launcher started by `virt-launcher run`; in a pod virt-handler does it",
                    file.display()
                ),
            )
        })?;
    let meta = f
        .metadata()
        .map_err(|e| LauncherError::runtime(format!("{}: {e}", file.display())))?;
    if !meta.is_file() || meta.len() > STORE_MAX {
        return Err(LauncherError::runtime(format!(
            "{} is not a VMI file of at most {STORE_MAX} bytes",
            file.display()
        )));
    }
    let mut s = String::new();
    f.take(STORE_MAX)
        .read_to_string(&mut s)
        .map_err(|e| LauncherError::runtime(format!("{}: {e}", file.display())))?;
    serde_json::from_str(&s).map_err(|e| LauncherError::runtime(format!("{}: {e}", file.display())))
}

fn array<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Vec<Value> {
    let mut cur = v;
    for key in path {
        if !cur.is_object() {
            *cur = json!({});
        }
        cur = cur
            .as_object_mut()
            .map(|m| m.entry(*key).or_insert(Value::Null))
            .unwrap_or_else(|| unreachable!("made an object above"));
    }
    if !cur.is_array() {
        *cur = json!([]);
    }
    match cur {
        Value::Array(a) => a,
        _ => unreachable!("made an array above"),
    }
}

fn named(v: &Value, name: &str) -> bool {
    v.get("name").and_then(Value::as_str) == Some(name)
}

/// virt-api's `addvolume` checks and virt-controller's change: volume
/// `name` (a hot-pluggable claim of the same name) with a disk on `bus`
/// and an optional `serial`, and its `volumeStatus` entry in phase
/// `MountedToPod` (virt-handler mounted it).
///
/// # Errors
/// virt-api's refusals (see the module docs).
pub fn add_volume(
    vmi: &mut Value,
    name: &str,
    bus: &str,
    serial: Option<&str>,
) -> Result<(), LauncherError> {
    let inject = is_cdrom(vmi, name);
    if !inject {
        check_bus(name, bus)?;
    }
    api::names::dns1123_label(name).map_err(|e| LauncherError::input_at("addvolume NAME", e))?;
    let volumes = array(vmi, &["spec", "volumes"]);
    if volumes.iter().any(|v| named(v, name)) {
        return Err(LauncherError::input(format!(
            "Unable to add volume [{name}] because volume with that name already exists"
        )));
    }
    volumes.push(
        json!({"name": name, "persistentVolumeClaim": {"claimName": name, "hotpluggable": true}}),
    );
    if !inject {
        let mut disk = json!({"name": name, "disk": {"bus": bus}});
        if let Some(s) = serial {
            disk["serial"] = json!(s);
        }
        array(vmi, &["spec", "domain", "devices", "disks"]).push(disk);
    }
    let statuses = array(vmi, &["status", "volumeStatus"]);
    statuses.retain(|s| !named(s, name));
    statuses.push(json!({
        "name": name,
        "target": "",
        "phase": api::hotplug::PHASE_MOUNTED_TO_POD,
        "reason": "VolumeMountedToPod",
        "message": format!("Volume {name} has been mounted in virt-launcher pod"),
        "hotplugVolume": {"attachPodName": ATTACH_POD},
    }));
    Ok(())
}

/// virt-api's `removevolume` checks and virt-controller's change: volume
/// `name` and its disk leave the spec (its status entry stays until the
/// domain no longer has the disk, [`forget_volume`]).
///
/// # Errors
/// virt-api's refusals: no such volume, or one that is not hot-pluggable.
pub fn remove_volume(vmi: &mut Value, name: &str) -> Result<(), LauncherError> {
    let volumes = array(vmi, &["spec", "volumes"]);
    let Some(i) = volumes.iter().position(|v| named(v, name)) else {
        return Err(LauncherError::input(format!(
            "Unable to remove volume [{name}] because it does not exist"
        )));
    };
    let hotpluggable = ["persistentVolumeClaim", "dataVolume"]
        .iter()
        .any(|k| volumes[i][k]["hotpluggable"] == true);
    if !hotpluggable {
        return Err(LauncherError::input(format!(
            "Unable to remove volume [{name}] because it is not hotpluggable"
        )));
    }
    volumes.remove(i);
    if !is_cdrom(vmi, name) {
        array(vmi, &["spec", "domain", "devices", "disks"]).retain(|d| !named(d, name));
    }
    Ok(())
}

/// Whether the VMI's disk `name` is a CD-ROM drive. With KubeVirt's
/// `DeclarativeHotplugVolumes` a drive may have no volume (an empty tray):
/// adding a hot-pluggable volume of its name inserts a medium, removing
/// the volume ejects it; the drive stays in the spec either way.
pub fn is_cdrom(vmi: &Value, name: &str) -> bool {
    vmi["spec"]["domain"]["devices"]["disks"]
        .as_array()
        .is_some_and(|ds| {
            ds.iter()
                .any(|d| named(d, name) && d.get("cdrom").is_some())
        })
}

/// The VM's LiveUpdate of its CPU sockets as it reaches the VMI:
/// `spec.domain.cpu.sockets` becomes `sockets`, refused as virt-api
/// refuses more than `maxSockets` (or none).
///
/// # Errors
/// Input error naming `spec.domain.cpu.sockets`.
pub fn set_sockets(vmi: &mut Value, sockets: u32) -> Result<(), LauncherError> {
    let field = "spec.domain.cpu.sockets";
    let max = vmi["spec"]["domain"]["cpu"]["maxSockets"]
        .as_u64()
        .unwrap_or(0);
    if sockets == 0 {
        return Err(LauncherError::input_at(field, "must be at least 1"));
    }
    if max == 0 {
        return Err(LauncherError::input_at(
            field,
            "the VMI has no spec.domain.cpu.maxSockets: its vCPUs cannot be hot-plugged (run it with --vm-rollout-strategy LiveUpdate)",
        ));
    }
    if u64::from(sockets) > max {
        return Err(LauncherError::input_at(
            field,
            "Number of sockets in CPU topology is greater than the maximum sockets allowed",
        ));
    }
    vmi["spec"]["domain"]["cpu"]["sockets"] = json!(sockets);
    Ok(())
}

/// A VM's LiveUpdate of an interface's link state as it reaches the VMI:
/// `spec.domain.devices.interfaces[name].state` becomes `state` (`up` or
/// `down`), and `status.phase` is `Running` (virt-handler syncs the network
/// of running VMIs only, and the domain runs).
///
/// # Errors
/// Input error naming the field: no such interface, another state, or an
/// interface that is `absent`.
pub fn set_link_state(vmi: &mut Value, name: &str, state: &str) -> Result<(), LauncherError> {
    if state != "up" && state != "down" {
        return Err(LauncherError::input_at(
            "--state",
            format!("{state:?} is not one of up, down"),
        ));
    }
    let ifaces = array(vmi, &["spec", "domain", "devices", "interfaces"]);
    let Some((i, iface)) = ifaces.iter_mut().enumerate().find(|(_, i)| named(i, name)) else {
        return Err(LauncherError::input_at(
            "spec.domain.devices.interfaces",
            format!("the VMI has no interface {name:?}"),
        ));
    };
    if iface["state"] == "absent" {
        return Err(LauncherError::input_at(
            format!("spec.domain.devices.interfaces[{i}].state"),
            "the interface is absent",
        ));
    }
    iface["state"] = json!(state);
    vmi["status"]["phase"] = json!("Running");
    Ok(())
}

/// A VM's LiveUpdate of its guest memory as virt-controller hands it to
/// the VMI (`handleMemoryHotplugRequest`, `pkg/virt-controller/watch/vm/
/// vm.go`): `spec.domain.memory.guest` becomes `size`, the memory request
/// grows by the same amount (never below the new guest memory) and
/// `status.memory.guestRequested` follows. Where virt-controller would mark
/// the VM "restart required" instead, the stand-in refuses with its reason.
///
/// # Errors
/// Input error naming `spec.domain.memory.guest`.
pub fn set_guest_memory(vmi: &mut Value, size: &str) -> Result<(), LauncherError> {
    use api::quantity::Quantity;
    let field = "spec.domain.memory.guest";
    let bad = |m: String| LauncherError::input_at(field, m);
    let bytes = |q: &str| -> Option<u64> { Quantity::parse(q).ok()?.to_bytes().ok() };
    let new = Quantity::parse(size)
        .map_err(|e| bad(format!("'{size}': {e}")))
        .and_then(|q| {
            q.to_bytes()
                .map(|b| (q, b))
                .map_err(|e| bad(format!("'{size}': {e}")))
        })?;
    let (new_q, new_b) = new;
    let mem = &vmi["spec"]["domain"]["memory"];
    let Some(max) = mem["maxGuest"].as_str().and_then(bytes) else {
        return Err(bad("memory updated in template spec. Memory-hotplug is not available for this VM configuration (the VMI has no spec.domain.memory.maxGuest: run it with --vm-rollout-strategy LiveUpdate and at least 1Gi of guest memory)".into()));
    };
    let block = serde_json::from_value::<api::vmi::Memory>(mem.clone())
        .map(|m| api::cluster::memory_hotplug_block(&m))
        .map_err(|e| LauncherError::input_at("spec.domain.memory", e.to_string()))?;
    if new_b % block != 0 {
        return Err(bad(format!(
            "memory hotplug not supported, Guest memory must be {} aligned",
            Quantity::binary_si(block)
        )));
    }
    let status = &vmi["status"]["memory"];
    if status["guestAtBoot"]
        .as_str()
        .and_then(bytes)
        .is_some_and(|boot| new_b < boot)
    {
        return Err(bad(
            "memory updated in template spec to a value lower than what the VM started with".into(),
        ));
    }
    if new_b > max {
        return Err(bad(
            "memory updated in template spec to a value higher than what's available".into(),
        ));
    }
    let current = status["guestCurrent"].as_str().and_then(bytes);
    let request = vmi["spec"]["domain"]["resources"]["requests"]["memory"]
        .as_str()
        .and_then(bytes);
    if let (Some(req), Some(cur)) = (request.filter(|r| *r != 0), current) {
        let grown = (i128::from(req) + i128::from(new_b) - i128::from(cur)).max(i128::from(new_b));
        let grown = u64::try_from(grown).unwrap_or(new_b);
        vmi["spec"]["domain"]["resources"]["requests"]["memory"] =
            json!(Quantity::binary_si(grown));
    }
    vmi["spec"]["domain"]["memory"]["guest"] = json!(new_q.as_str());
    vmi["status"]["memory"]["guestRequested"] = json!(new_q.as_str());
    Ok(())
}

/// What virt-handler copies from the domain after a memory hot-plug
/// (`updateMemoryInfo`): `status.memory.guestCurrent` ← the domain's
/// `CurrentMemory` (api.Domain JSON), as a binary quantity. Returns it.
pub fn record_current_memory(vmi: &mut Value, domain: &Value) -> Option<String> {
    let cur = &domain["Spec"]["CurrentMemory"];
    let value = cur["Value"].as_u64()?;
    let unit = cur["Unit"].as_str()?;
    let bytes = domain::MemoryValue {
        unit: unit.to_owned(),
        value,
    }
    .bytes()?;
    let q = api::quantity::Quantity::binary_si(bytes);
    vmi["status"]["memory"]["guestCurrent"] = json!(q);
    Some(q)
}

/// The domain's disk of volume `name` (KubeVirt's api.Domain JSON): its
/// target name, `None` when the domain has none. A CD-ROM drive counts
/// only with a medium in it (`Source.File` or `Source.Dev`).
pub fn domain_target(domain: &Value, name: &str) -> Option<String> {
    domain["Spec"]["Devices"]["Disks"]
        .as_array()?
        .iter()
        .find(|d| d["Alias"]["Name"] == name)
        .filter(|d| {
            d["Device"] != "cdrom"
                || ["File", "Dev"]
                    .iter()
                    .any(|k| d["Source"][k].as_str().is_some_and(|p| !p.is_empty()))
        })
        .and_then(|d| d["Target"]["Device"].as_str())
        .map(str::to_owned)
}

/// Records what virt-handler reports once the domain has the disk: phase
/// `Ready` and its `target`.
pub fn mark_ready(vmi: &mut Value, name: &str, target: &str) {
    for s in array(vmi, &["status", "volumeStatus"]) {
        if named(s, name) {
            s["phase"] = json!(api::hotplug::PHASE_READY);
            s["reason"] = json!("VolumeReady");
            s["message"] = json!(format!(
                "Successfully attach hotplugged volume {name} to VM"
            ));
            s["target"] = json!(target);
        }
    }
}

/// Drops the status entry of the removed volume `name`.
pub fn forget_volume(vmi: &mut Value, name: &str) {
    array(vmi, &["status", "volumeStatus"]).retain(|s| !named(s, name));
}

/// The image a volume is hot-plugged from: a regular file or a block
/// device, never through a symbolic link; a block device is mounted at
/// `<volume>`, a file at `<volume>.img`.
pub struct Image {
    file: File,
    /// The image is a block device.
    pub block: bool,
}

impl Image {
    /// Opens `path` (`O_PATH`, not followed when it is a link).
    ///
    /// # Errors
    /// Input error naming `--image`.
    pub fn open(path: &Path) -> Result<Image, LauncherError> {
        let bad = |m: String| LauncherError::input_at("--image", m);
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
        let ft = file
            .metadata()
            .map_err(|e| bad(format!("{}: {e}", path.display())))?
            .file_type();
        if !(ft.is_file() || ft.is_block_device()) {
            return Err(bad(format!(
                "{} is neither a regular file nor a block device (symbolic links are not followed)",
                path.display()
            )));
        }
        Ok(Image {
            file,
            block: ft.is_block_device(),
        })
    }

    /// For a non-root launcher (the VMI's `status.runtimeUser` `uid`, not
    /// 0): QEMU, running as `uid`, must read and write the image. In a
    /// non-root pod virt-handler gives a hot-plugged image to 107; the
    /// stand-in never changes the owner of the user's files, so one `uid`
    /// cannot use is refused, as `run --run-as-nonroot` refuses its other
    /// files.
    ///
    /// # Errors
    /// Input error naming `--image`.
    pub fn check_user(&self, path: &Path, name: &str, uid: u32) -> Result<(), LauncherError> {
        if uid == 0 {
            return Ok(());
        }
        let meta = self
            .file
            .metadata()
            .map_err(|e| LauncherError::input_at("--image", format!("{}: {e}", path.display())))?;
        match super::container::access(&meta, uid) {
            (true, true, _) => Ok(()),
            _ => Err(LauncherError::input_at(
                "--image",
                format!(
                    "uid {uid} (KubeVirt's non-root qemu user) cannot read and write {} (for {}); give it to uid {uid} (chown {uid}:{uid}) as virt-handler does in a non-root pod, or run as root",
                    path.display(),
                    self.pod_path(name)
                ),
            )),
        }
    }

    /// Where virt-handler would mount it for volume `name`, in the pod.
    pub fn pod_path(&self, name: &str) -> String {
        if self.block {
            api::hotplug::block_path(name)
        } else {
            api::hotplug::image_path(name)
        }
    }
}

/// The pid of the process serving the command socket `socket` (the
/// launcher, `SO_PEERCRED`).
///
/// # Errors
/// Runtime error when it cannot be reached.
pub fn server_pid(socket: &Path) -> Result<i32, LauncherError> {
    let s = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| LauncherError::runtime(format!("{}: {e}", socket.display())))?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| LauncherError::runtime(format!("SO_PEERCRED on {}: {e}", socket.display())))?;
    Ok(cred.pid())
}

/// The placeholder file (or device mount point) in the state directory
/// where the launcher sees `pod_path`: `<state>/share/hotplug-disks/<name>`.
fn placeholder(state: &Path, pod_path: &str) -> Option<PathBuf> {
    let rel = pod_path.strip_prefix("/var/run/kubevirt/")?;
    Some(state.join("share").join(rel))
}

/// Runs `f` on a thread of its own that entered the mount namespace of
/// `pid` (a thread may, after `unshare(CLONE_FS)`, while the process keeps
/// its own).
fn in_mount_namespace<T: Send + 'static>(
    pid: i32,
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, LauncherError> {
    let ns = File::open(format!("/proc/{pid}/ns/mnt"))
        .map_err(|e| LauncherError::runtime(format!("mount namespace of {pid}: {e}")))?;
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)
            .map_err(|e| format!("unshare(CLONE_FS): {e}"))?;
        nix::sched::setns(ns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNS)
            .map_err(|e| format!("entering the launcher's mount namespace: {e}"))?;
        f()
    })
    .join()
    .map_err(|_| LauncherError::runtime("the mount thread panicked"))?
    .map_err(LauncherError::runtime)
}

/// Bind-mounts `image` at its pod path for volume `name` inside the mount
/// namespace of the launcher `pid` whose state directory is `state`.
///
/// # Errors
/// Runtime error naming the step; nothing is left mounted.
pub fn mount(pid: i32, state: &Path, name: &str, image: &Image) -> Result<(), LauncherError> {
    let pod_path = image.pod_path(name);
    let place = placeholder(state, &pod_path)
        .ok_or_else(|| LauncherError::runtime(format!("{pod_path} is outside the share")))?;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&place)
        .map_err(|e| LauncherError::runtime(format!("{}: {e}", place.display())))?;
    // A detached clone of the image's mount, made here (the image is the
    // caller's path), attached there.
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
    // SAFETY: open_tree with a valid fd, an empty NUL-terminated path and
    // flags; the result is checked.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            image.file.as_raw_fd(),
            c"".as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint,
        )
    };
    if tree < 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_file(&place);
        return Err(LauncherError::runtime(format!(
            "open_tree of the image: {e}"
        )));
    }
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as i32) };
    let target = std::ffi::CString::new(pod_path.clone())
        .map_err(|_| LauncherError::runtime("a NUL in the path"))?;
    let r = in_mount_namespace(pid, move || {
        // SAFETY: move_mount with a valid fd and NUL-terminated paths.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                tree.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        };
        if rc < 0 {
            return Err(format!(
                "mounting the image at {}: {}",
                target.to_string_lossy(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&place);
    }
    r
}

/// Unmounts volume `name`'s image (at `pod_path`) in the launcher `pid`'s
/// mount namespace and removes its placeholder from `state`.
///
/// # Errors
/// Runtime error naming the step.
pub fn unmount(pid: i32, state: &Path, pod_path: &str) -> Result<(), LauncherError> {
    let target = pod_path.to_owned();
    in_mount_namespace(pid, move || {
        nix::mount::umount2(target.as_str(), nix::mount::MntFlags::MNT_DETACH)
            .map_err(|e| format!("unmounting {target}: {e}"))
    })?;
    if let Some(place) = placeholder(state, pod_path) {
        std::fs::remove_file(&place)
            .map_err(|e| LauncherError::runtime(format!("{}: {e}", place.display())))?;
    }
    Ok(())
}

/// Which pod path volume `name` is mounted at: the block node or the image
/// (whichever placeholder exists in `state`).
pub fn mounted_path(state: &Path, name: &str) -> Option<String> {
    [
        api::hotplug::block_path(name),
        api::hotplug::image_path(name),
    ]
    .into_iter()
    .find(|p| placeholder(state, p).is_some_and(|f| f.symlink_metadata().is_ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi() -> Value {
        json!({
            "metadata": {"name": "a", "uid": "u"},
            "spec": {"domain": {"devices": {"disks": [{"name": "boot", "disk": {"bus": "virtio"}}]}},
                     "volumes": [{"name": "boot", "containerDisk": {"image": "x"}}]},
            "status": {"volumeStatus": [{"name": "boot", "target": "vda"}]}
        })
    }

    #[test]
    fn add_then_ready_then_remove() {
        let mut v = vmi();
        add_volume(&mut v, "hp", "scsi", Some("S1")).unwrap();
        assert_eq!(
            v["spec"]["volumes"][1],
            json!({"name": "hp", "persistentVolumeClaim": {"claimName": "hp", "hotpluggable": true}})
        );
        assert_eq!(
            v["spec"]["domain"]["devices"]["disks"][1],
            json!({"name": "hp", "disk": {"bus": "scsi"}, "serial": "S1"})
        );
        let st = &v["status"]["volumeStatus"][1];
        assert_eq!(st["phase"], "MountedToPod");
        assert_eq!(st["hotplugVolume"]["attachPodName"], ATTACH_POD);
        // What the launcher reads from it.
        let parsed: api::VirtualMachineInstance = serde_json::from_value(v.clone()).unwrap();
        let s = api::hotplug::VolumeStatuses::of(&parsed);
        assert!(s.is_hotplug("hp") && s.disk_wanted("hp") && s.disk_wanted("boot"));
        mark_ready(&mut v, "hp", "sda");
        assert_eq!(v["status"]["volumeStatus"][1]["phase"], "Ready");
        assert_eq!(v["status"]["volumeStatus"][1]["target"], "sda");
        remove_volume(&mut v, "hp").unwrap();
        assert_eq!(v["spec"]["volumes"].as_array().unwrap().len(), 1);
        assert_eq!(
            v["spec"]["domain"]["devices"]["disks"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        forget_volume(&mut v, "hp");
        assert_eq!(
            v["status"]["volumeStatus"],
            json!([{"name": "boot", "target": "vda"}])
        );
    }

    #[test]
    fn a_cdrom_drive_gets_and_loses_its_medium_and_stays() {
        let mut v = vmi();
        v["spec"]["domain"]["devices"]["disks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "cd", "cdrom": {"bus": "sata"}}));
        let disks = v["spec"]["domain"]["devices"]["disks"].clone();
        add_volume(&mut v, "cd", "scsi", None).unwrap();
        assert_eq!(v["spec"]["domain"]["devices"]["disks"], disks);
        assert_eq!(v["spec"]["volumes"][1]["name"], "cd");
        assert_eq!(v["status"]["volumeStatus"][1]["phase"], "MountedToPod");
        remove_volume(&mut v, "cd").unwrap();
        assert_eq!(v["spec"]["domain"]["devices"]["disks"], disks);
        assert_eq!(v["spec"]["volumes"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn virt_apis_refusals_in_its_words() {
        let mut v = vmi();
        let e = add_volume(&mut v, "hp", "sata", None)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("--bus: Hotplug configuration for disk [hp] requires bus to be 'scsi' or 'virtio'. [sata] is not permitted."), "{e}");
        let e = add_volume(&mut v, "boot", "virtio", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("Unable to add volume [boot] because volume with that name already exists"),
            "{e}"
        );
        let e = add_volume(&mut v, "Bad_Name", "virtio", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("addvolume NAME: "), "{e}");
        let e = remove_volume(&mut v, "boot").unwrap_err().to_string();
        assert!(
            e.ends_with("Unable to remove volume [boot] because it is not hotpluggable"),
            "{e}"
        );
        let e = remove_volume(&mut v, "nope").unwrap_err().to_string();
        assert!(
            e.ends_with("Unable to remove volume [nope] because it does not exist"),
            "{e}"
        );
        assert_eq!(v, vmi(), "a refused request changes nothing");
    }

    #[test]
    fn a_non_root_launcher_needs_an_image_its_user_can_write() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.img");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let img = Image::open(&f).unwrap();
        assert!(!img.block);
        img.check_user(&f, "hp", 0).unwrap();
        let e = img.check_user(&f, "hp", 107).unwrap_err().to_string();
        assert!(
            e.contains("--image: uid 107 (KubeVirt's non-root qemu user) cannot read and write")
                && e.contains("(for /var/run/kubevirt/hotplug-disks/hp.img)"),
            "{e}"
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        Image::open(&f).unwrap().check_user(&f, "hp", 107).unwrap();
        // Never through a link.
        let l = dir.path().join("l.img");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert!(Image::open(&l).is_err());
    }

    #[test]
    fn sockets_within_max_sockets() {
        let mut v = vmi();
        let e = set_sockets(&mut v, 2).unwrap_err().to_string();
        assert!(
            e.contains("spec.domain.cpu.sockets: the VMI has no spec.domain.cpu.maxSockets"),
            "{e}"
        );
        v["spec"]["domain"]["cpu"] = json!({"sockets": 1, "maxSockets": 4});
        set_sockets(&mut v, 3).unwrap();
        assert_eq!(v["spec"]["domain"]["cpu"]["sockets"], 3);
        let e = set_sockets(&mut v, 5).unwrap_err().to_string();
        assert!(e.ends_with("spec.domain.cpu.sockets: Number of sockets in CPU topology is greater than the maximum sockets allowed"), "{e}");
        assert!(set_sockets(&mut v, 0).is_err());
        assert_eq!(v["spec"]["domain"]["cpu"]["sockets"], 3);
    }

    #[test]
    fn guest_memory_within_max_guest_as_virt_controller_hands_it_on() {
        let mut v = vmi();
        let e = set_guest_memory(&mut v, "2Gi").unwrap_err().to_string();
        assert!(e.contains("spec.domain.memory.guest: memory updated in template spec. Memory-hotplug is not available for this VM configuration"), "{e}");
        v["spec"]["domain"]["memory"] = json!({"guest": "1Gi", "maxGuest": "4Gi"});
        v["spec"]["domain"]["resources"] = json!({"requests": {"memory": "1Gi"}});
        v["status"]["memory"] =
            json!({"guestAtBoot": "1Gi", "guestCurrent": "1Gi", "guestRequested": "1Gi"});
        for (size, want) in [
            (
                "5Gi",
                "memory updated in template spec to a value higher than what's available",
            ),
            (
                "512Mi",
                "memory updated in template spec to a value lower than what the VM started with",
            ),
            (
                "1025Mi",
                "memory hotplug not supported, Guest memory must be 2Mi aligned",
            ),
            ("lots", "spec.domain.memory.guest: 'lots'"),
        ] {
            let e = set_guest_memory(&mut v, size).unwrap_err().to_string();
            assert!(e.contains(want), "{size}: {e}");
        }
        set_guest_memory(&mut v, "2Gi").unwrap();
        assert_eq!(v["spec"]["domain"]["memory"]["guest"], "2Gi");
        assert_eq!(
            v["spec"]["domain"]["resources"]["requests"]["memory"],
            "2Gi"
        );
        assert_eq!(v["status"]["memory"]["guestRequested"], "2Gi");
        let d = json!({"Spec": {"CurrentMemory": {"Value": 2097152, "Unit": "KiB"}}});
        assert_eq!(record_current_memory(&mut v, &d).as_deref(), Some("2Gi"));
        assert_eq!(v["status"]["memory"]["guestCurrent"], "2Gi");
    }

    #[test]
    fn link_state_of_an_interface() {
        let mut v = vmi();
        v["spec"]["domain"]["devices"]["interfaces"] = json!([{"name": "default", "bridge": {}}]);
        set_link_state(&mut v, "default", "down").unwrap();
        assert_eq!(
            v["spec"]["domain"]["devices"]["interfaces"][0]["state"],
            "down"
        );
        assert_eq!(v["status"]["phase"], "Running");
        let e = set_link_state(&mut v, "default", "absent")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--state: \"absent\" is not one of up, down"),
            "{e}"
        );
        let e = set_link_state(&mut v, "nic9", "up")
            .unwrap_err()
            .to_string();
        assert!(e.contains("the VMI has no interface \"nic9\""), "{e}");
    }

    #[test]
    fn the_domains_target_of_a_volume() {
        let d = json!({"Spec": {"Devices": {"Disks": [
            {"Alias": {"Name": "boot", "UserDefined": true}, "Target": {"Device": "vda"}},
            {"Alias": {"Name": "hp", "UserDefined": true}, "Target": {"Device": "sda"}}]}}});
        assert_eq!(domain_target(&d, "hp").as_deref(), Some("sda"));
        let cd = |file: &str| {
            json!({"Spec": {"Devices": {"Disks": [
            {"Alias": {"Name": "cd"}, "Device": "cdrom", "Target": {"Device": "sdb"}, "Source": {"File": file, "Dev": ""}}]}}})
        };
        assert_eq!(domain_target(&cd(""), "cd"), None);
        assert_eq!(
            domain_target(&cd("/var/run/kubevirt/hotplug-disks/cd.img"), "cd").as_deref(),
            Some("sdb")
        );
        assert_eq!(domain_target(&d, "x"), None);
        assert_eq!(
            state_dir_of(Path::new("/s/share/sockets/launcher-sock")).unwrap(),
            Path::new("/s")
        );
        assert_eq!(
            placeholder(Path::new("/s"), "/var/run/kubevirt/hotplug-disks/hp.img").unwrap(),
            Path::new("/s/share/hotplug-disks/hp.img")
        );
    }
}
