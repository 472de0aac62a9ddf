//! KubeVirt's memory dump end to end: the virt-handler stand-in's
//! controller asks a real launcher in pod mode, with the real test guest
//! under TCG, for VirtualMachineMemoryDump into a memory dump volume where
//! virt-handler mounts it (`/var/run/kubevirt/hotplug-disks/<volume>/`, here
//! the test's share directory) on every sync until the dump's record in the
//! MODIFIED notifications names the file, then dumps into a volume too small
//! for the dump (a 1 MiB tmpfs in the pod), which must fail. The file is checked
//! here: an ELF core whose loadable segments hold the guest's memory.
//! Standalone: `ctl memorydump` anywhere, into a volume the host mounts
//! after the launcher started (mount propagation), and a SIGTERM while
//! libvirt has the guest paused for a dump (shut down once it ends).

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use goblin::container::Ctx;
use goblin::elf::program_header::{ProgramHeader, PT_LOAD};
use goblin::elf::Elf;
use serde_json::Value;

use crate::harness::{guest_vmi, launcher_bin, Launcher, Opts, BOOT_TIMEOUT, POD_WRAPPER};

/// The guest's memory (`guest_vmi`: `memory.guest: 128Mi`).
const GUEST_MEMORY: u64 = 128 << 20;
/// The dump volume that fills up, in the pod's view.
const FULL_VOLUME: &str = "/var/run/kubevirt/hotplug-disks/full";

/// The ELF header and program headers of the core file at `path`: its
/// type and its loadable segments as (guest physical address, size).
fn core_segments(path: &std::path::Path) -> (u16, Vec<(u64, u64)>) {
    // The headers come first (QEMU writes the program headers right after
    // the ELF header); the guest's memory after them is not read.
    let mut head = vec![0u8; 64 << 10];
    let mut f = std::fs::File::open(path).unwrap();
    let n = f.read(&mut head).unwrap();
    head.truncate(n);
    let header = Elf::parse_header(&head).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let ctx = Ctx::new(header.container().unwrap(), header.endianness().unwrap());
    let phdrs = ProgramHeader::parse(
        &head,
        usize::try_from(header.e_phoff).unwrap(),
        usize::from(header.e_phnum),
        ctx,
    )
    .unwrap();
    let file_len = f.metadata().unwrap().len();
    let loads = phdrs
        .iter()
        .filter(|p| p.p_type == PT_LOAD)
        .map(|p| {
            assert!(
                p.p_offset + p.p_filesz <= file_len,
                "segment {p:?} beyond the file's {file_len} bytes"
            );
            (p.p_paddr, p.p_memsz)
        })
        .collect();
    (header.e_type, loads)
}

fn record(line: &str, prefix: &str) -> Value {
    serde_json::from_str(line.strip_prefix(prefix).unwrap()).unwrap()
}

#[test]
fn memory_dump_into_a_hotplug_volume_completes_and_one_into_a_full_volume_fails() {
    // As virt-handler syncs it during `virtctl memory-dump get`: with the
    // memory dump volumes (hot-plugged claims, no disk); `full` is the
    // claim too small for a dump.
    let yaml = guest_vmi("memdump", "virtio")
        + "  - name: memvol\n    memoryDump: {claimName: memvol-pvc, hotpluggable: true}\n"
        + "  - name: full\n    memoryDump: {claimName: full-pvc, hotpluggable: true}\n";
    let mut l = Launcher::start_wrapped(
        &yaml,
        &Opts {
            pod: true,
            handler: true,
            env: &[("POD_SMALL_TMPFS", OsStr::new(FULL_VOLUME))],
            ..Opts::default()
        },
        POD_WRAPPER,
    );
    // virt-handler mounts the memory dump volume's claim there; the
    // launcher's /var/run/kubevirt is this share directory.
    let volume = l.dir.path().join("share/hotplug-disks/memvol");
    std::fs::create_dir_all(&volume).unwrap();
    // The claim's file system is the pod's (fsGroup 107 when non-root).
    crate::harness::give_to_qemu_user(&volume);
    // An earlier dump on the claim (removed first) and a file that is not one.
    std::fs::write(
        volume.join("memdump-memvol-20240101-000000.memory.dump"),
        b"old",
    )
    .unwrap();
    std::fs::write(volume.join("notes.txt"), b"keep").unwrap();
    let file = "memdump-memvol-20250101-000000.memory.dump";
    let h = crate::protocol::handler_for(
        &l,
        &yaml,
        &[
            "--memory-dump",
            &format!("/var/run/kubevirt/hotplug-disks/memvol/{file}"),
            "--memory-dump-fail",
            &format!("{FULL_VOLUME}/memdump-full-20250101-000000.memory.dump"),
        ],
    );
    let stdout = crate::protocol::handler_succeeded(h, &l);

    let done = record(
        stdout
            .lines()
            .find(|s| s.starts_with("MEMORY-DUMP "))
            .unwrap(),
        "MEMORY-DUMP ",
    );
    assert_eq!(done["FileName"], file, "{done}");
    assert_eq!(
        (&done["Completed"], &done["Failed"]),
        (&Value::Bool(true), &Value::Bool(false))
    );
    let failed = record(
        stdout
            .lines()
            .find(|s| s.starts_with("MEMORY-DUMP-FAILED "))
            .unwrap(),
        "MEMORY-DUMP-FAILED ",
    );
    let reason = failed["FailureReason"].as_str().unwrap();
    assert!(
        reason.starts_with("Domain memory dump failed: LibvirtError(")
            && reason.contains("No space left on device"),
        "{failed}"
    );

    // The file: an ELF core of the guest's memory; the earlier dump is gone.
    let path = volume.join(file);
    let (e_type, loads) = core_segments(&path);
    assert_eq!(e_type, goblin::elf::header::ET_CORE);
    // Guest RAM below 4 GiB is the segments inside [0, memory): all of it
    // but the legacy VGA window (0xa0000-0xbffff). The others are device
    // memory QEMU includes (VGA RAM, BIOS).
    let ram: u64 = loads
        .iter()
        .filter(|(addr, size)| addr + size <= GUEST_MEMORY)
        .map(|(_, size)| size)
        .sum();
    assert!(
        (GUEST_MEMORY - (1 << 20)..=GUEST_MEMORY).contains(&ram),
        "RAM segments hold {ram} bytes of {GUEST_MEMORY}: {loads:x?}"
    );
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size >= ram, "{size}");
    eprintln!("memory dump: {size} bytes, segments {loads:x?}");
    assert!(!volume
        .join("memdump-memvol-20240101-000000.memory.dump")
        .exists());
    assert_eq!(std::fs::read(volume.join("notes.txt")).unwrap(), b"keep");

    // The guest ran on after both dumps: it powered off on the handler's
    // shutdown (ACPI), which a stopped guest never does.
    l.wait_success(Duration::from_secs(60));
    assert!(l.serial().contains("GUEST-SHUTDOWN"), "{}", l.serial());
    l.assert_nothing_left();
}

#[test]
fn ctl_memorydump_writes_a_core_anywhere_standalone_and_the_guest_runs_on() {
    let mut l = Launcher::start(&guest_vmi("memdumpctl", "virtio"), &Opts::default());
    l.wait_serial("GUEST-READY", 1, crate::harness::BOOT_TIMEOUT);
    // Standalone, any directory of the user's will do: the test's own.
    let dir = tempfile::tempdir().unwrap();
    crate::harness::give_to_qemu_user(dir.path());
    let path = dir.path().join("guest.memory.dump");
    let (ok, out, err) = l.ctl(&[
        OsStr::new("-o"),
        OsStr::new("json"),
        OsStr::new("memorydump"),
        path.as_os_str(),
        OsStr::new("--wait"),
        OsStr::new("120"),
    ]);
    assert!(ok, "{err}\n--- launcher ---\n{}", l.log());
    let m: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(m["FileName"], "guest.memory.dump", "{m}");
    assert_eq!(m["Completed"], true, "{m}");
    let (e_type, loads) = core_segments(&path);
    assert_eq!(e_type, goblin::elf::header::ET_CORE);
    assert!(loads.iter().map(|(_, s)| s).sum::<u64>() >= GUEST_MEMORY - (1 << 20));
    // The guest runs on: its agent answers.
    let (ok, _, err) = l.ctl(&[OsStr::new("guestping")]);
    assert!(ok, "guest ping after the dump: {err}");
    // A directory that does not exist: refused by name, nothing recorded.
    let missing = dir.path().join("missing/x.memory.dump");
    let (ok, _, err) = l.ctl(&[OsStr::new("memorydump"), missing.as_os_str()]);
    assert!(
        !ok && err.contains("dumpPath: ") && err.contains("No such file or directory"),
        "{err}"
    );
    let (_, out, _) = l.ctl(&[OsStr::new("-o"), OsStr::new("json"), OsStr::new("domain")]);
    let dom: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(dom["Spec"]["Metadata"]["KubeVirt"]["MemoryDump"], m);
    // A kernel interface is no dump file.
    let (ok, _, err) = l.ctl(&["memorydump", "/proc/sys/vm/drop_caches"]);
    assert!(
        !ok && err.contains("dumpPath: ") && err.contains("on procfs"),
        "{err}"
    );
    // A hard link at the destination to a file elsewhere: replaced by the
    // dump, the other file keeps its content.
    let elsewhere = tempfile::tempdir().unwrap();
    let victim = elsewhere.path().join("v2");
    std::fs::write(&victim, b"keep").unwrap();
    let hard = dir.path().join("hard.bin");
    std::fs::hard_link(&victim, &hard).unwrap();
    let (ok, _, err) = l.ctl(&[
        OsStr::new("memorydump"),
        hard.as_os_str(),
        OsStr::new("--wait"),
        OsStr::new("120"),
    ]);
    assert!(ok, "{err}\n--- launcher ---\n{}", l.log());
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert_eq!(core_segments(&hard).0, goblin::elf::header::ET_CORE);
    // Two requests at once: one dumps, the other is dropped (one at a
    // time, as KubeVirt) and says so at once. A dump takes ~0.3 s, so on a
    // loaded machine the second request may come after the first ended
    // and both dump: that pair proves nothing and is tried again.
    let mut dropped_seen = false;
    for attempt in 0..5 {
        let names = [
            format!("a{attempt}.memory.dump"),
            format!("b{attempt}.memory.dump"),
        ];
        let started = std::time::Instant::now();
        let children: Vec<_> = names
            .iter()
            .map(|n| {
                l.ctl_command(&[
                    OsStr::new("memorydump"),
                    dir.path().join(n).as_os_str(),
                    OsStr::new("--wait"),
                    OsStr::new("30"),
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
            })
            .collect();
        let outcomes: Vec<(bool, String, Duration)> = children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr).into_owned();
                (out.status.success(), err, started.elapsed())
            })
            .collect();
        let dropped: Vec<usize> = (0..2).filter(|&i| !outcomes[i].0).collect();
        if dropped.is_empty() {
            continue;
        }
        assert_eq!(dropped.len(), 1, "exactly one dropped: {outcomes:?}");
        let (_, err, took) = &outcomes[dropped[0]];
        assert!(
            err.contains(&format!(
                "was dropped: the dump of {} is running",
                names[1 - dropped[0]]
            )) && err.trim().lines().count() == 1,
            "{err}"
        );
        assert!(*took < Duration::from_secs(10), "dropped after {took:?}");
        dropped_seen = true;
        break;
    }
    assert!(
        dropped_seen,
        "five pairs of simultaneous requests, never one dropped"
    );
    l.stop(Duration::from_secs(90));
}

/// Mounts the test made in the host's mount namespace, detached in
/// reverse order when dropped (also when the test fails half-way).
#[derive(Default)]
struct HostMounts(Vec<PathBuf>);

impl HostMounts {
    fn mount(
        &mut self,
        source: Option<&Path>,
        fstype: Option<&str>,
        target: &Path,
        flags: MsFlags,
    ) {
        mount(source, target, fstype, flags, None::<&str>)
            .unwrap_or_else(|e| panic!("mount {}: {e}", target.display()));
        self.0.push(target.to_owned());
    }

    /// Detaches the last mount made.
    fn pop(&mut self) {
        let t = self.0.pop().expect("a mount");
        umount2(&t, MntFlags::MNT_DETACH).unwrap_or_else(|e| panic!("umount {}: {e}", t.display()));
    }
}

impl Drop for HostMounts {
    fn drop(&mut self) {
        for t in self.0.iter().rev() {
            let _ = umount2(t, MntFlags::MNT_DETACH);
        }
    }
}

/// Mount points (field 5 of `/proc/<pid>/mountinfo`) in `pid`'s mount
/// namespace.
fn mount_points(pid: u32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .unwrap_or_else(|e| panic!("mountinfo of {pid}: {e}"))
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .collect()
}

/// Where the launcher bind-mounts its runtime (KubeVirt's in-pod paths).
fn launcher_mount(p: &str) -> bool {
    [
        "/run/libvirt",
        "/etc/libvirt",
        "/var/lib/libvirt",
        "/run/kubevirt",
    ]
    .iter()
    .any(|t| p == *t || p.starts_with(&format!("{t}/")) || p.starts_with(&format!("{t}-")))
}

#[test]
fn a_volume_the_host_mounts_after_the_start_receives_the_memory_dump() {
    // virt-handler mounts a memory dump (or hot-plug) volume into the pod
    // after the launcher started, through a HostToContainer volume. Here a
    // shared mount point of the test's plays that volume's directory, in a
    // "host" mount namespace where everything is shared (as under systemd):
    // what the host mounts below it must reach the launcher, and nothing
    // the launcher mounts may reach the host.
    let host = tempfile::Builder::new()
        .prefix("vl-e2e-prop-")
        .tempdir()
        .unwrap();
    let shared = host.path().join("hotplug-disks");
    std::fs::create_dir(&shared).unwrap();
    let mut mounts = HostMounts::default();
    mounts.mount(Some(&shared), None, &shared, MsFlags::MS_BIND);
    mounts.mount(None, None, &shared, MsFlags::MS_SHARED);
    let mut l = Launcher::start_wrapped(
        &guest_vmi("memdumpprop", "virtio"),
        &Opts::default(),
        &["unshare", "-m", "--propagation", "shared"],
    );
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);

    // The launcher's own mounts stay in its namespace.
    let inner = mount_points(l.worker_pid());
    assert!(inner.iter().any(|p| p == "/run/libvirt"), "{inner:?}");
    let outer = mount_points(l.pid());
    let leaked: Vec<_> = outer.iter().filter(|p| launcher_mount(p)).collect();
    assert!(leaked.is_empty(), "launcher mounts on the host: {leaked:?}");

    // The volume appears after the start.
    let vol = shared.join("memvol");
    std::fs::create_dir(&vol).unwrap();
    mounts.mount(
        Some(Path::new("tmpfs")),
        Some("tmpfs"),
        &vol,
        MsFlags::empty(),
    );
    let path = vol.join("x.memory.dump");
    let (ok, _, err) = l.ctl(&[
        OsStr::new("memorydump"),
        path.as_os_str(),
        OsStr::new("--wait"),
        OsStr::new("60"),
    ]);
    assert!(ok, "{err}\n--- launcher ---\n{}", l.log());
    assert!(
        path.is_file(),
        "the dump is not on the volume the host mounted (launcher mounts: {:?})",
        mount_points(l.worker_pid())
    );
    let (e_type, loads) = core_segments(&path);
    assert_eq!(e_type, goblin::elf::header::ET_CORE);
    assert!(loads.iter().map(|(_, s)| s).sum::<u64>() >= GUEST_MEMORY - (1 << 20));
    // Nothing went under the volume's mount point instead.
    mounts.pop();
    assert!(!path.exists(), "a dump under the mount point");

    l.stop(Duration::from_secs(90));
}

/// Sends SIGCONT to the stopped QEMU when dropped (also on failure).
struct Stopped(Pid);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}

#[test]
fn sigterm_during_a_memory_dump_shuts_the_guest_down_when_the_dump_ends() {
    use virt::sys;
    let mut l = Launcher::start(
        &guest_vmi("memdumpterm", "virtio"),
        &Opts {
            args: &["--grace-period-seconds", "120"],
            ..Opts::default()
        },
    );
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let qemu = Pid::from_raw(i32::try_from(l.qemu_pid().expect("qemu pid")).unwrap());
    let mut conn =
        virt::connect::Connect::open(Some(&l.uri())).expect("connect to the launcher's libvirt");
    let dom = virt::domain::Domain::lookup_by_name(&conn, &l.domain).unwrap();
    let dir = tempfile::tempdir().unwrap();
    crate::harness::give_to_qemu_user(dir.path());
    let path = dir.path().join("term.memory.dump");
    // Without --wait: the dump goes on after ctl returned.
    let mut ctl = Command::new(launcher_bin())
        .arg("ctl")
        .arg("--socket")
        .arg(l.state.join("share/sockets/launcher-sock"))
        .arg("memorydump")
        .arg(&path)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The dump of 128 MiB takes a few tenths of a second: catch libvirt's
    // pause for it, then stop QEMU so that it cannot end before the signal
    // has been handled.
    let dumping = |d: &virt::domain::Domain| {
        d.get_state().unwrap() == (sys::VIR_DOMAIN_PAUSED, sys::VIR_DOMAIN_PAUSED_DUMP as i32)
    };
    let start = Instant::now();
    while !dumping(&dom) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the guest was never paused for the dump\n{}",
            l.log()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    kill(qemu, Signal::SIGSTOP).unwrap();
    let stopped = Stopped(qemu);
    // While QEMU is stopped libvirt cannot finish the dump nor resume the guest.
    assert!(dumping(&dom), "the dump ended before QEMU was stopped");
    drop(dom);
    let _ = conn.close();
    assert!(ctl.wait().unwrap().success());

    let t = Instant::now();
    l.signal(Signal::SIGTERM);
    let start = Instant::now();
    while !l.log().contains("termination signal") {
        assert!(start.elapsed() < Duration::from_secs(10), "{}", l.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    // A few of the launcher's ticks see the guest paused for the dump.
    std::thread::sleep(Duration::from_millis(500));
    drop(stopped);

    // The dump ends, libvirt resumes the guest, it gets the ACPI request
    // and powers off, long before the 120 s grace period.
    let st = l.wait_exit(Duration::from_secs(60));
    assert!(st.success(), "{st}\n{}", l.log());
    let log = l.log();
    assert!(!log.contains("grace period of"), "{log}");
    assert!(log.contains("Completed memory dump successfully"), "{log}");
    assert!(l.serial().contains("GUEST-SHUTDOWN"), "{}", l.serial());
    eprintln!("exit {:?} after SIGTERM during the dump", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(60));
}
