//! The private runtime: libvirt's directories and the pod's mounts in
//! the launcher's own mount namespace, KubeVirt's directories, libvirt's
//! configuration and its daemons under supervision; and what may not
//! outlive the launcher.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use virtwrap::config::{DaemonConfig, DaemonKind};
use virtwrap::supervisor::{DaemonSpec, Supervisor};

use super::domain::run_domain;
use super::{Launch, PRIVATE_DIR};
use crate::error::LauncherError;
use crate::flags::LauncherFlags;
use crate::isolation::{Mounts, StateDir};
use crate::pod::{Pod, PodMount};
use crate::user::RuntimeUser;
use api::VirtualMachineInstance;

/// libvirt's directories, private to the launcher: (below the state
/// directory, mount point).
const LIBVIRT_DIRS: [(&str, &str); 4] = [
    ("libvirt/etc", "/etc/libvirt"),
    ("libvirt/run", "/var/run/libvirt"),
    ("libvirt/lib", "/var/lib/libvirt"),
    ("libvirt/log", "/var/log/libvirt"),
];

/// Mounts the private runtime, in the launcher's own mount namespace:
/// libvirt's directories from the state directory `state`, the shared
/// capability cache (`--libvirt-cache-dir`), then `pod`'s mounts in order,
/// and, as PID 1 of a PID namespace, a `/proc` of its own.
///
/// # Errors
/// [`LauncherError`] from a mkdir or mount.
pub(crate) fn mount(
    mounts: &mut Mounts,
    state: &StateDir,
    flags: &LauncherFlags,
    pod: &Pod,
) -> Result<(), LauncherError> {
    // The state directory's parts are mounted from descriptors opened
    // below the held state directory, never by path.
    for (rel, target) in LIBVIRT_DIRS {
        let (fd, shown) = state.subdir_fd(rel)?;
        mounts.bind_dir_fd(&fd, &shown, Path::new(target))?;
    }
    for m in &pod.mounts {
        match m {
            PodMount::State { rel, target } => {
                let (fd, shown) = state.subdir_fd(rel)?;
                mounts.bind_dir_fd(&fd, &shown, target)?;
            }
            PodMount::WritableDir { source, target } => {
                let existed = source.exists();
                mounts.bind_dir(source, target)?;
                // A directory the stand-in made (backend storage's nvram/,
                // swtpm/) is the non-root launcher's.
                let user = RuntimeUser::from_flag(flags.run_as_nonroot);
                if !existed && user.is_non_root() {
                    std::os::unix::fs::lchown(source, Some(user.id()), Some(user.id())).map_err(
                        |e| LauncherError::runtime(format!("chown {}: {e}", source.display())),
                    )?;
                }
            }
            PodMount::Dir {
                source,
                target,
                read_only,
            } => mounts.bind_dir_as(source, target, *read_only)?,
            PodMount::File {
                source,
                target,
                read_only,
            } => mounts.bind_file(source, target, *read_only)?,
            PodMount::StateFile {
                rel,
                contents,
                target,
            } => {
                let file = state.path().join(rel);
                std::fs::write(&file, contents).map_err(|e| {
                    LauncherError::runtime(format!("write {}: {e}", file.display()))
                })?;
                mounts.bind_file(&file, target, true)?;
            }
            PodMount::Devices { claims, owner } => {
                mounts.private_dev(&state.subdir("dev")?, claims, *owner)?;
            }
        }
    }
    // The shared capability cache, after the pod's mounts (non-root it is
    // below the private directory).
    let user = RuntimeUser::from_flag(flags.run_as_nonroot);
    let (rel, target) = user.capability_cache();
    let cache = flags.libvirt_cache_dir.join(rel);
    std::fs::create_dir_all(&cache)
        .map_err(|e| LauncherError::runtime(format!("mkdir {}: {e}", cache.display())))?;
    if user.is_non_root() {
        for d in [cache.as_path(), cache.parent().unwrap_or(&cache)] {
            std::os::unix::fs::lchown(d, Some(user.id()), Some(user.id()))
                .map_err(|e| LauncherError::runtime(format!("chown {}: {e}", d.display())))?;
        }
    }
    mounts.bind_dir(&cache, Path::new(target))?;
    if process::is_pid1() {
        mounts.mount_proc()?;
    }
    Ok(())
}

/// The standalone stand-in, before the launcher proper runs non-root:
/// the directories behind the pod's emptyDirs (`/var/run/libvirt`, the
/// private, share, ephemeral and container-disk directories) go to `user`,
/// as a pod's `fsGroup` makes them its own. Mount points of the user's
/// files below them are not followed (only the state directory's own
/// tree is changed).
///
/// # Errors
/// [`LauncherError`] from a chown.
pub(crate) fn give_pod_dirs(state: &StateDir, user: RuntimeUser) -> Result<(), LauncherError> {
    for rel in [
        "libvirt/run",
        "private",
        "share",
        "ephemeral",
        "container-disks",
    ] {
        let dir = state.path().join(rel);
        if dir.is_dir() {
            crate::standalone::container::give_tree(&dir, user.id())?;
        }
    }
    Ok(())
}

/// KubeVirt's directory initialisation (facts 1.4 step 3); the serial
/// console's log file is created in root mode only, as KubeVirt does
/// (non-root, QEMU creates it).
fn initialize_dirs(
    vmi: &VirtualMachineInstance,
    flags: &LauncherFlags,
    user: RuntimeUser,
) -> Result<(), LauncherError> {
    let mk = |p: &str| {
        std::fs::create_dir_all(p).map_err(|e| LauncherError::runtime(format!("mkdir {p}: {e}")))
    };
    let uid_dir = format!("{PRIVATE_DIR}/{}", vmi.uid());
    for d in [
        uid_dir.as_str(),
        &format!("{}/cloud-init-data", flags.ephemeral_disk_dir),
        &format!("{}/ignition-data", flags.ephemeral_disk_dir),
        &format!("{}/disk-data", flags.ephemeral_disk_dir),
        &flags.container_disk_dir,
        &flags.hotplug_disk_dir,
        &format!("{PRIVATE_DIR}/vmi-disks"),
        "/var/run/libvirt/empty-disks",
        &format!("{}/sockets", flags.kubevirt_share_dir),
    ] {
        mk(d)?;
    }
    if user.is_non_root() {
        return Ok(());
    }
    let log = format!("{uid_dir}/virt-serial0-log");
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| LauncherError::runtime(format!("create {log}: {e}")))?;
    Ok(())
}

/// Steps 3-6 inside the private runtime: KubeVirt's directories, the
/// daemons under supervision, the domain ([`run_domain`]); then the
/// daemons are stopped and nothing the launcher started is left.
///
/// # Errors
/// [`LauncherError`].
pub(crate) fn run_in_runtime(
    launch: &Launch<'_>,
    daemon: &DaemonKind,
) -> Result<(), LauncherError> {
    let flags = launch.flags;
    let user = launch.user;
    initialize_dirs(launch.vmi, flags, user)?;
    if flags.simulate_crash {
        return Err(LauncherError::runtime("Simulated virt-launcher crash"));
    }
    // KubeVirt's step 6: wait for the hook sidecars before libvirt starts
    // (nothing is running yet when this fails).
    // A termination signal meanwhile ends the wait: the launcher stops in
    // order, with nothing started.
    let mut hooks = hooks::Manager::new(hooks::HOOK_SOCKETS_DIR);
    let signals = super::signals::signals();
    let stop = || signals.load(std::sync::atomic::Ordering::SeqCst) != 0;
    match hooks.collect(flags.hook_sidecars as usize, flags.qemu_timeout, &stop) {
        Ok(()) => {}
        Err(hooks::HookError::Stopped) => {
            tracing::info!("termination signal while waiting for the hook sidecars: stopping");
            return Ok(());
        }
        Err(e) => return Err(LauncherError::runtime(e.to_string())),
    }
    let hooks = std::sync::Arc::new(hooks);
    if let Err(e) = process::become_subreaper() {
        tracing::warn!("cannot become a child subreaper: {e}");
    }

    let mut cfg = DaemonConfig {
        qemu_user: user.qemu_conf_user(),
        qemu_group: user.qemu_conf_user(),
        ..DaemonConfig::default()
    };
    // KubeVirt's SetupLibvirt: the flag, else the verbosity environment.
    let env = |name: &str| std::env::var(name).ok();
    cfg.log_filters = virtwrap::config::log_filters(
        Some(&flags.libvirt_log_filters),
        env("VIRT_LAUNCHER_LOG_VERBOSITY").as_deref(),
        env("LIBVIRT_DEBUG_LOGS").is_some(),
    );
    if let Some(f) = &cfg.log_filters {
        tracing::info!("Enabling libvirt log filters: {f}");
    }
    cfg.virtiofsd_debug = env("VIRTIOFSD_DEBUG_LOGS").as_deref() == Some("1");
    cfg.host_uuid.clone_from(&launch.pod.host_uuid);
    cfg.shared_filesystems =
        virtwrap::config::shared_filesystems_from_env(env("SHARED_FILESYSTEM_PATHS").as_deref());
    if Path::new("/dev/hugepages").is_dir() {
        cfg.hugetlbfs_mount = Some("/dev/hugepages".into());
    }
    let conf_dir = user.daemon_config_dir();
    virtwrap::config::write_split(&user.qemu_conf(), &conf_dir, daemon, &cfg)
        .map_err(|e| LauncherError::runtime(format!("writing libvirt configuration: {e}")))?;
    let conf = |file: &str| conf_dir.join(file).to_string_lossy().into_owned();
    // KubeVirt's StartVirtlog: the firmware's debug FIFO, and its reader
    // when the verbosity gives QEMU the device that writes into it.
    crate::seabios::start(
        Path::new(crate::seabios::SEABIOS_DEBUG_PIPE),
        converter::firmware_log::wanted(env("VIRT_LAUNCHER_LOG_VERBOSITY").as_deref()),
    );

    // The shipped capabilities, hashed and written while the daemons start:
    // libvirt reads its cache at its first lookup, which the connection
    // below makes (a lookup before the files are there would only mean
    // libvirt probes, and its own file is never replaced).
    let seeding = {
        let (shipped, daemon) = (flags.shipped_capabilities_dir.clone(), daemon.clone());
        std::thread::Builder::new()
            .name("caps-seed".into())
            .spawn(move || super::capabilities::seed(&shipped, user, &daemon))
            .map_err(|e| tracing::warn!("cannot seed the shipped QEMU capabilities: {e}"))
            .ok()
    };

    let mut sup = Supervisor::new();
    let spawn_err =
        |name: &str, e: std::io::Error| LauncherError::runtime(format!("cannot start {name}: {e}"));
    sup.start(DaemonSpec {
        name: "virtlogd".into(),
        program: "/usr/sbin/virtlogd".into(),
        // Pid files default to /run/<daemon>.pid, outside the private
        // runtime: keep them in it so launchers never contend for them.
        args: vec![
            "-f".into(),
            conf("virtlogd.conf"),
            "-p".into(),
            "/var/run/libvirt/virtlogd.pid".into(),
        ],
        env: user.daemon_env(),
        // QEMU writes the serial console log through a pipe to virtlogd
        // that libvirt opened when it started the domain; a new virtlogd
        // gets no pipe from a running QEMU (KubeVirt's launcher restarts
        // virtlogd the same way, and loses the same log).
        restart_loses: Some(
            "the running guest's serial console log (virt-serial0-log) ends here: QEMU wrote it through the virtlogd that died, and a restarted virtlogd gets it again only when the domain starts again".into(),
        ),
    })
    .map_err(|e| spawn_err("virtlogd", e))?;
    sup.start(DaemonSpec {
        name: daemon.name().into(),
        program: daemon.program().to_owned(),
        args: vec![
            "-f".into(),
            conf(daemon.config_file()),
            "-p".into(),
            format!("/var/run/libvirt/{}.pid", daemon.name()),
        ],
        env: user.daemon_env(),
        // A restarted daemon finds the running QEMU again.
        restart_loses: None,
    })
    .map_err(|e| spawn_err(daemon.name(), e))?;

    let seeded = seeding.and_then(|t| t.join().ok()).flatten();
    let result = run_domain(launch, daemon, &sup, &hooks, seeded);
    sup.stop(Duration::from_secs(5));
    kill_leftover_children();
    result
}

/// Kills whatever is still a child of the launcher once the daemons have
/// stopped: as the subreaper it inherits every QEMU libvirt started, also
/// for domains someone else defined in its daemon. Nothing may outlive it.
fn kill_leftover_children() {
    let mut pids = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                pids.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    for pid in pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        tracing::warn!(pid, process = comm.trim(), "killing a process left behind");
        let _ = kill(
            Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
            Signal::SIGKILL,
        );
        process::reaper().wait(pid, Some(Duration::from_secs(2)));
    }
}
