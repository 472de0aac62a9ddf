//! The one harness for tests that need the real stack: it builds (or
//! reuses) the test guest, starts `virt-launcher run` in its own state
//! directory, waits for markers on the guest's serial console, talks to the
//! launcher's private libvirt daemon, and makes sure nothing is left
//! running. Tests never skip: without root, libvirt or QEMU they fail and
//! say what is missing.

#![allow(dead_code)]

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// `VIRT_LAUNCHER_E2E_NONROOT=1` runs every launcher of the suites in
/// KubeVirt's non-root mode (`--run-as-nonroot`): `run` sets its pod up
/// as root and then runs as uid/gid 107 with only CAP_NET_BIND_SERVICE;
/// in pod mode the pod stand-in ([`POD_SCRIPT`]) prepares the pod as
/// virt-controller's non-root pod is (emptyDirs for 107, the image's
/// `qemu` user, the device plugins' devices, taps for 107) and starts the
/// launcher with the compute container's credentials and environment.
pub fn nonroot() -> bool {
    std::env::var("VIRT_LAUNCHER_E2E_NONROOT").is_ok_and(|v| v == "1")
}

/// In non-root mode ([`nonroot`]), gives a test's own host file or tree to
/// uid/gid 107, as virt-handler's non-root set-up does for a pod's host
/// disks and kubelet's `fsGroup` for its volumes (the launcher never
/// changes the owner of a user's files: it refuses those 107 cannot use).
pub fn give_to_qemu_user(path: &Path) {
    if !nonroot() {
        return;
    }
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        std::os::unix::fs::lchown(&p, Some(107), Some(107)).expect("chown 107");
        if fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            stack.extend(fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        }
    }
}

/// Longest wait for a guest marker under TCG on a loaded 2-core machine.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(180);

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

pub fn launcher_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_virt-launcher"))
}

/// Fails the test, loudly, when the machine cannot run real guests.
pub fn require_stack() {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root (a private mount namespace needs CAP_SYS_ADMIN)".to_owned());
    }
    if !Path::new("/usr/sbin/libvirtd").exists() && !Path::new("/usr/sbin/virtqemud").exists() {
        missing.push("libvirt's QEMU daemon (libvirtd or virtqemud)".to_owned());
    }
    for bin in [
        "/usr/sbin/virtlogd",
        "/usr/bin/qemu-system-x86_64",
        "/usr/bin/virsh",
        "/usr/bin/qemu-img",
    ] {
        if !Path::new(bin).exists() {
            missing.push(bin.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "end-to-end tests need {}; run `bash .ci/install` (see README)",
        missing.join(", ")
    );
}

/// The test guest disk image, built by `tests/guest/build` once per run
/// (a no-op when its inputs are unchanged).
pub fn guest_image() -> PathBuf {
    static IMAGE: OnceLock<PathBuf> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            if let Ok(p) = std::env::var("TEST_GUEST_IMAGE") {
                return PathBuf::from(p);
            }
            let root = repo_root();
            let out = Command::new(root.join("tests/guest/build"))
                .current_dir(&root)
                .output()
                .expect("run tests/guest/build");
            assert!(
                out.status.success(),
                "tests/guest/build failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let img = root.join("target/test-guest/disk.img");
            assert!(img.is_file(), "{} missing after the build", img.display());
            img
        })
        .clone()
}

/// A running `virt-launcher run`.
pub struct Launcher {
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
    pub uid: String,
    pub domain: String,
    child: Option<Child>,
    log_path: PathBuf,
    exit: Option<ExitStatus>,
    /// When the exit was seen, in clock ticks since boot (see [`Launcher::processes_left`]).
    exit_ticks: Option<u64>,
    wrapped: bool,
    ns: std::cell::OnceCell<Option<String>>,
    /// The host pid of the namespace's PID 1 (the inner launcher).
    ns_init: std::cell::OnceCell<u32>,
}

/// Options for [`Launcher::start`].
pub struct Opts<'a> {
    /// containerDisk volume names that get the test guest image.
    pub container_disks: &'a [&'a str],
    /// Extra launcher arguments.
    pub args: &'a [&'a str],
    /// Pod mode driven by virt-handler (its stand-in): no VMI on the command
    /// line; the share directory is `<dir>/share` on the host.
    pub handler: bool,
    /// Pod mode: KubeVirt's command line (no subcommand) with the VMI in
    /// `STANDALONE_VMI`, inside a mount namespace that plays the pod, with
    /// virt-handler's directories on tmpfs and the container disk mounted
    /// where virt-handler mounts it.
    pub pod: bool,
    /// Pod mode: kubelet's mounts below the pod's private directory, as
    /// (path relative to `/var/run/kubevirt-private`, host directory),
    /// mounted read-only.
    pub pod_mounts: &'a [(&'a str, &'a Path)],
    /// Pod mode: like [`Opts::pod_mounts`], writable (claims).
    pub pod_mounts_rw: &'a [(&'a str, &'a Path)],
    /// Extra environment for the launcher (and so its libvirt daemon and
    /// the helpers libvirt runs by name, e.g. `PATH` for `passt`).
    pub env: &'a [(&'a str, &'a std::ffi::OsStr)],
    /// The VMI's UID (`--uid`), instead of one of its own per launcher:
    /// the two ends of a migration run one VMI.
    pub uid: Option<&'a str>,
}

impl Default for Opts<'_> {
    fn default() -> Self {
        Opts {
            container_disks: &["containerdisk"],
            args: &[],
            pod: false,
            handler: false,
            pod_mounts: &[],
            pod_mounts_rw: &[],
            env: &[],
            uid: None,
        }
    }
}

/// Plays virt-handler and the pod's mounts for pod mode: the launcher's
/// directories exist on tmpfs, and the container disk is where virt-handler
/// mounts it (`<container-disk-dir>/disk_0.img`, read-only).
const POD_SCRIPT: &str = r#"set -e
mount --make-rprivate /
# virt-handler's network phase 1, when the pod has a network namespace of its own.
if [ -n "${POD_PHASE1_VMI:-}" ]; then "$1" pod-network-phase1 "$POD_PHASE1_VMI" --cache-dir "$POD_PRIVATE" ${POD_NONROOT:+--tap-owner 107}; fi
for d in /var/run/kubevirt /var/run/kubevirt-ephemeral-disks; do mkdir -p $d; mount -t tmpfs tmpfs $d; done
# virt-handler's view of the share dir: a host directory the test can reach.
if [ -n "${POD_SHARE:-}" ]; then mount --bind "$POD_SHARE" /var/run/kubevirt; fi
# A volume that fills up at once (1 MiB), e.g. a memory dump volume too small for its dump.
if [ -n "${POD_SMALL_TMPFS:-}" ]; then
    mkdir -p "$POD_SMALL_TMPFS"; mount -t tmpfs -o size=1m tmpfs "$POD_SMALL_TMPFS"
    if [ -n "${POD_NONROOT:-}" ]; then chown 107:107 "$POD_SMALL_TMPFS"; fi
fi
# The pod's private directory (an emptyDir) with kubelet's volume mounts below it.
mkdir -p /var/run/kubevirt-private "$POD_PRIVATE"
mount --bind "$POD_PRIVATE" /var/run/kubevirt-private
for m in ${POD_MOUNTS:-}; do
    mkdir -p "/var/run/kubevirt-private/${m%%=*}"
    mount --bind -o ro "${m#*=}" "/var/run/kubevirt-private/${m%%=*}"
done
for m in ${POD_MOUNTS_RW:-}; do
    mkdir -p "/var/run/kubevirt-private/${m%%=*}"
    mount --bind "${m#*=}" "/var/run/kubevirt-private/${m%%=*}"
done
# The hook sidecars' sockets volume (hook-sidecar-sockets), when the pod has sidecars.
if [ -n "${POD_HOOKS:-}" ]; then mkdir -p /var/run/kubevirt-hooks; mount --bind "$POD_HOOKS" /var/run/kubevirt-hooks; fi
mkdir -p /var/run/kubevirt/container-disks
: > /var/run/kubevirt/container-disks/disk_0.img
mount --bind -o ro "$POD_IMAGE" /var/run/kubevirt/container-disks/disk_0.img
# A node of its own: in a pod libvirt's host UUID is DMI's product_uuid, the
# node's (KubeVirt sets no host_uuid); two pods on one host would share it and
# libvirt refuses to migrate to its own host, where two nodes differ. On a host
# with DMI each pod sees a fresh one (without DMI, libvirt makes one per daemon).
if [ -e /sys/devices/virtual/dmi/id/product_uuid ]; then
    cat /proc/sys/kernel/random/uuid > "${POD_PRIVATE%/*}/product_uuid"
    mount --bind -o ro "${POD_PRIVATE%/*}/product_uuid" /sys/devices/virtual/dmi/id/product_uuid
fi
[ -z "${POD_NONROOT:-}" ] && exec "$@"
# KubeVirt's non-root pod: the emptyDirs belong to 107 (fsGroup), libvirt's
# runtime directory is an emptyDir, the image has user qemu (107), the device
# plugins give kvm, tun and vhost-net; the launcher runs as 107 with only
# NET_BIND_SERVICE and the compute container's environment (template.go).
mkdir -p "$POD_LIBVIRT_RUN" "$POD_ETC" /var/run/libvirt
mount --bind "$POD_LIBVIRT_RUN" /var/run/libvirt
chown 107:107 /var/run/libvirt /var/run/kubevirt /var/run/kubevirt/container-disks \
    /var/run/kubevirt-ephemeral-disks /var/run/kubevirt-private
for m in ${POD_MOUNTS_RW:-}; do chown 107:107 "/var/run/kubevirt-private/${m%%=*}"; done
if ! grep -q '^[^:]*:[^:]*:107:' /etc/passwd; then
    cp /etc/passwd "$POD_ETC/passwd"
    echo 'qemu:x:107:107:qemu user:/var/run/kubevirt-private:/usr/sbin/nologin' >> "$POD_ETC/passwd"
    mount --bind -o ro "$POD_ETC/passwd" /etc/passwd
fi
for d in kvm net/tun vhost-net; do
    [ -c "/dev/$d" ] || continue
    n="$POD_ETC/dev-$(echo $d | tr / -)"
    mknod "$n" c $((0x$(stat -c %t "/dev/$d"))) $((0x$(stat -c %T "/dev/$d")))
    chown 107:107 "$n"; chmod 660 "$n"
    mount --bind "$n" "/dev/$d"
done
exec setpriv --reuid=107 --regid=107 --clear-groups --no-new-privs \
    --inh-caps=-all,+net_bind_service --ambient-caps=-all,+net_bind_service \
    --bounding-set=-all,+net_bind_service \
    env XDG_CACHE_HOME=/var/run/kubevirt-private XDG_CONFIG_HOME=/var/run/kubevirt-private \
    XDG_RUNTIME_DIR=/var/run HOME=/var/run/kubevirt-private "$@"
"#;

/// The wrapper that plays the pod around the launcher (see [`POD_SCRIPT`]).
pub const POD_WRAPPER: &[&str] = &["unshare", "-m", "sh", "-c", POD_SCRIPT, "sh"];

/// [`POD_WRAPPER`] with a network namespace of the pod's own, in which
/// `virt-launcher pod-network-phase1` plays virt-handler's phase 1.
pub const POD_NET_WRAPPER: &[&str] = &["unshare", "-m", "-n", "sh", "-c", POD_SCRIPT, "sh"];

static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Launcher {
    /// Starts `virt-launcher run` for the VMI manifest `yaml` under TCG.
    pub fn start(yaml: &str, opts: &Opts<'_>) -> Launcher {
        Self::start_wrapped(yaml, opts, &[])
    }

    /// [`Launcher::start`] with the default options and `args` added.
    pub fn start_args(yaml: &str, args: &[&str]) -> Launcher {
        Self::start(
            yaml,
            &Opts {
                args,
                ..Opts::default()
            },
        )
    }

    /// [`Launcher::start_args`], then waits for the guest's `GUEST-READY`;
    /// returns the launcher and the serial console so far.
    pub fn boot(yaml: &str, args: &[&str]) -> (Launcher, String) {
        let mut l = Self::start_args(yaml, args);
        let serial = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
        (l, serial)
    }

    /// Like [`Launcher::start`], reusing `dir` (its state directory) from an
    /// earlier launcher.
    pub fn start_in(yaml: &str, opts: &Opts<'_>, dir: &Path) -> Launcher {
        Self::start_wrapped_in(yaml, opts, &[], Some(dir))
    }

    /// Pod mode (see [`Opts::pod`]).
    pub fn start_pod(yaml: &str) -> Launcher {
        Self::start_wrapped(
            yaml,
            &Opts {
                pod: true,
                ..Opts::default()
            },
            POD_WRAPPER,
        )
    }

    /// Pod mode waiting for virt-handler (see [`Opts::handler`]).
    pub fn start_pod_for_handler(yaml: &str) -> Launcher {
        Self::start_pod_handler_wrapped(yaml, POD_WRAPPER)
    }

    /// Pod mode waiting for virt-handler, in a pod network namespace where
    /// phase 1 built the VMI's masquerade interface (see [`POD_NET_WRAPPER`]).
    pub fn start_pod_for_handler_on_network(yaml: &str) -> Launcher {
        Self::start_pod_handler_wrapped(yaml, POD_NET_WRAPPER)
    }

    fn start_pod_handler_wrapped(yaml: &str, wrapper: &[&str]) -> Launcher {
        Self::start_wrapped(
            yaml,
            &Opts {
                pod: true,
                handler: true,
                ..Opts::default()
            },
            wrapper,
        )
    }

    /// Pod-in-a-box: the pod virt-controller renders for the VMI manifest
    /// `yaml`, played by `tests/podbox/pod-in-a-box` in its own mount, PID,
    /// UTS and network namespaces over the launcher image's root file
    /// system (`image/fast-rootfs`, with this build's binaries), its
    /// container command verbatim from virt-controller's template
    /// ([`pod_box_command`]); root, or non-root under
    /// `VIRT_LAUNCHER_E2E_NONROOT=1`. The VMI comes from virt-handler (its
    /// stand-in, through `<dir>/share`); virt-handler's network phase 1 runs
    /// for it first. `hook_sidecars` sidecar sockets are expected in
    /// `hooks` (the `hook-sidecar-sockets` volume). `image_volume`: a
    /// cluster with KubeVirt's ImageVolume feature gate (the command carries
    /// `--image-volume`, the test guest's disk is at `/disk/guest.img` in the
    /// first containerDisk's image volume, `/disk/boot.img` an absolute link
    /// to it inside the image, `/disk/escape.img` a link leading out: see
    /// `tests/podbox/pod-in-a-box`).
    pub fn start_pod_box(
        yaml: &str,
        hook_sidecars: u32,
        hooks: Option<&Path>,
        image_volume: bool,
    ) -> Launcher {
        require_stack();
        let image = guest_image();
        let bin_dir = launcher_bin().parent().expect("bin dir").to_owned();
        let monitor = bin_dir.join("virt-launcher-monitor");
        assert!(
            monitor.is_file(),
            "{} is missing: cargo build -p virt-launcher-monitor",
            monitor.display()
        );
        for tool in ["container-disk", "virt-tail", "virt-freezer", "virt-probe"] {
            assert!(
                bin_dir.join(tool).is_file(),
                "{} is missing (image/fast-rootfs installs it): cargo build -p image-tools",
                bin_dir.join(tool).display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("vl-podbox-")
            .tempdir()
            .expect("tempdir");
        let vmi_path = dir.path().join("vmi.yaml");
        fs::write(&vmi_path, yaml).expect("write vmi");
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let uid = format!("e2e-{}-{n}", std::process::id());
        let doc: serde_json::Value = serde_yaml_ng::from_str(yaml).expect("yaml");
        let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default");
        let name = doc["metadata"]["name"].as_str().unwrap_or("");
        let tgps = doc["spec"]["terminationGracePeriodSeconds"]
            .as_i64()
            .unwrap_or(30);
        let private = dir.path().join("pod-private");
        let share = dir.path().join("share");
        fs::create_dir_all(&private).expect("pod private dir");
        fs::create_dir_all(&share).expect("share dir");
        let log_path = dir.path().join("launcher.log");
        let log = fs::File::create(&log_path).expect("log file");
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--pid", "--uts", "--net", "--fork"])
            .arg(repo_root().join("tests/podbox/pod-in-a-box"))
            .args(pod_box_command(
                name,
                ns,
                &uid,
                tgps,
                hook_sidecars,
                image_volume,
                n,
            ))
            .env("POD_HOSTNAME", name.split('.').next().unwrap_or(name))
            .env("POD_ROOT", dir.path().join("pod-root"))
            .env("POD_PRIVATE", &private)
            .env("POD_SHARE", &share)
            .env("POD_IMAGE", &image)
            .env("POD_PHASE1_VMI", &vmi_path)
            .env("BIN_DIR", &bin_dir);
        if let Some(h) = hooks {
            cmd.env("POD_HOOKS", h);
        }
        if image_volume {
            cmd.env("POD_IMAGE_VOLUME", "1");
        }
        if nonroot() {
            cmd.env("POD_NONROOT", "1");
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().expect("spawn pod-in-a-box");
        Launcher {
            domain: format!("{ns}_{name}"),
            state: dir.path().join("state"),
            dir,
            uid,
            child: Some(child),
            log_path,
            exit: None,
            exit_ticks: None,
            wrapped: true,
            ns: std::cell::OnceCell::new(),
            ns_init: std::cell::OnceCell::new(),
        }
    }

    /// Like [`Launcher::start`], with the launcher run through `wrapper`
    /// (e.g. `unshare --pid --fork` to make it PID 1).
    pub fn start_wrapped(yaml: &str, opts: &Opts<'_>, wrapper: &[&str]) -> Launcher {
        Self::start_wrapped_in(yaml, opts, wrapper, None)
    }

    fn start_wrapped_in(
        yaml: &str,
        opts: &Opts<'_>,
        wrapper: &[&str],
        reuse: Option<&Path>,
    ) -> Launcher {
        require_stack();
        let image = guest_image();
        let dir = tempfile::Builder::new()
            .prefix("vl-e2e-")
            .tempdir()
            .expect("tempdir");
        let vmi_path = dir.path().join("vmi.yaml");
        fs::write(&vmi_path, yaml).expect("write vmi");
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let uid = opts
            .uid
            .map_or_else(|| format!("e2e-{}-{n}", std::process::id()), str::to_owned);
        let state = reuse.unwrap_or(dir.path()).join("state");
        let log_path = dir.path().join("launcher.log");
        let log = fs::File::create(&log_path).expect("log file");
        let mut cmd = match wrapper.split_first() {
            Some((prog, args)) => {
                let mut c = Command::new(prog);
                c.args(args).arg(launcher_bin());
                c
            }
            None => Command::new(launcher_bin()),
        };
        if opts.pod {
            let private = dir.path().join("pod-private");
            fs::create_dir_all(&private).expect("pod private dir");
            let mounts: Vec<String> = opts
                .pod_mounts
                .iter()
                .map(|(rel, host)| format!("{rel}={}", host.display()))
                .collect();
            let rw: Vec<String> = opts
                .pod_mounts_rw
                .iter()
                .map(|(rel, host)| format!("{rel}={}", host.display()))
                .collect();
            cmd.env("POD_PRIVATE", &private)
                .env("POD_MOUNTS", mounts.join(" "))
                .env("POD_MOUNTS_RW", rw.join(" "));
            if wrapper == POD_NET_WRAPPER {
                cmd.env("POD_PHASE1_VMI", &vmi_path);
            }
            if nonroot() {
                cmd.env("POD_NONROOT", "1")
                    .env("POD_LIBVIRT_RUN", state.join("libvirt/run"))
                    .env("POD_ETC", dir.path().join("pod-etc"));
            }
        }
        if opts.pod && opts.handler {
            // virt-handler will send the VMI: only its identity on the command line.
            let doc: serde_json::Value = serde_yaml_ng::from_str(yaml).expect("yaml");
            let share = dir.path().join("share");
            fs::create_dir_all(&share).expect("share dir");
            cmd.env("POD_IMAGE", &image).env("POD_SHARE", &share);
            cmd.arg("--name")
                .arg(doc["metadata"]["name"].as_str().unwrap_or(""));
            cmd.arg("--namespace")
                .arg(doc["metadata"]["namespace"].as_str().unwrap_or("default"));
            // virt-controller passes the VMI's grace period (default 30 s)
            // plus its 15 s kill margin (template.go).
            let tgps = doc["spec"]["terminationGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(30);
            cmd.arg("--grace-period-seconds")
                .arg((tgps + 15).to_string());
        } else if opts.pod {
            cmd.env("STANDALONE_VMI", yaml).env("POD_IMAGE", &image);
        } else {
            cmd.arg("run").arg(&vmi_path);
            for vol in opts.container_disks {
                cmd.arg("--container-disk")
                    .arg(format!("{vol}={}", image.display()));
            }
        }
        if nonroot() {
            cmd.arg("--run-as-nonroot");
        }
        cmd.args(["--use-emulation", "--keep-state", "--uid", &uid])
            .arg("--state-dir")
            .arg(&state);
        cmd.envs(opts.env.iter().copied());
        cmd.args(opts.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().expect("spawn virt-launcher");
        let doc: serde_json::Value = serde_yaml_ng::from_str(yaml).expect("yaml");
        let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default");
        let name = doc["metadata"]["name"].as_str().unwrap_or("");
        Launcher {
            domain: format!("{ns}_{name}"),
            dir,
            state,
            uid,
            child: Some(child),
            log_path,
            exit: None,
            exit_ticks: None,
            wrapped: !wrapper.is_empty(),
            ns: std::cell::OnceCell::new(),
            ns_init: std::cell::OnceCell::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn serial_log_path(&self) -> PathBuf {
        // Pod mode: the pod's private directory, not the state directory.
        let pod = self.dir.path().join("pod-private");
        let private = if pod.is_dir() {
            pod
        } else {
            self.state.join("private")
        };
        private.join(format!("{}/virt-serial0-log", self.uid))
    }

    pub fn serial(&self) -> String {
        fs::read(self.serial_log_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Waits until the serial console has printed `count` complete lines
    /// containing `marker`; returns everything printed so far.
    pub fn wait_serial(&mut self, marker: &str, count: usize, timeout: Duration) -> String {
        let start = Instant::now();
        loop {
            let s = self.serial();
            // Only whole lines count: the guest may be mid-way through the
            // marker's line, and callers read the fields that follow it.
            let complete = &s[..s.rfind('\n').map_or(0, |i| i + 1)];
            if complete.matches(marker).count() >= count {
                return s;
            }
            if let Some(st) = self.try_exit() {
                panic!(
                    "launcher exited ({st}) before {marker:?} appeared\n--- launcher log ---\n{}\n--- serial ---\n{s}",
                    self.log()
                );
            }
            assert!(
                start.elapsed() < timeout,
                "no {marker:?} on the serial console within {timeout:?}\n--- launcher log ---\n{}\n--- serial ---\n{s}",
                self.log()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The command `virt-launcher ctl --socket <launcher-sock> ARGS`, to
    /// run as the caller wants (several at once).
    pub fn ctl_command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(launcher_bin());
        c.arg("ctl")
            .arg("--socket")
            .arg(self.state.join("share/sockets/launcher-sock"))
            .args(args);
        c
    }

    /// `virt-launcher ctl --socket <launcher-sock> ARGS`: (success,
    /// stdout, stderr).
    pub fn ctl<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> (bool, String, String) {
        let out = self
            .ctl_command(args)
            .output()
            .expect("run virt-launcher ctl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The launcher's libvirt URI, reachable from the host through the state directory.
    pub fn uri(&self) -> String {
        let driver = if nonroot() { "session" } else { "system" };
        format!(
            "qemu+unix:///{driver}?socket={}/libvirt/run/libvirt-sock",
            self.state.display()
        )
    }

    /// `sh -c script` in the guest through the guest agent (`ctl exec`,
    /// 20 s): (exit code, stdout); panics when the call itself fails.
    pub fn guest_sh(&self, script: &str) -> (i64, String) {
        let (ok, out, err) = self.ctl(&[
            "-o",
            "json",
            "exec",
            "--timeout",
            "20",
            "--",
            "/bin/sh",
            "-c",
            script,
        ]);
        assert!(ok, "exec {script:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        (
            v["exitCode"].as_i64().unwrap_or(-1),
            v["stdOut"].as_str().unwrap_or("").to_owned(),
        )
    }

    /// Waits up to 60 s until `script` exits 0 in the guest
    /// ([`Launcher::guest_sh`]); its stdout. Panics naming `what`.
    pub fn guest_sh_until(&self, what: &str, script: &str) -> String {
        let start = Instant::now();
        loop {
            let (code, out) = self.guest_sh(script);
            if code == 0 {
                return out;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what}: `{script}` still exits {code}: {out}\n{}",
                self.serial()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `virsh -c <launcher's daemon> ARGS`: (success, stdout + stderr).
    pub fn virsh(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("virsh")
            .arg("-c")
            .arg(self.uri())
            .args(args)
            .output()
            .expect("virsh");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// The running domain's XML as libvirt has it (`virsh dumpxml`);
    /// panics when virsh fails.
    pub fn domain_xml(&self) -> String {
        let (ok, xml) = self.virsh(&["dumpxml", &self.domain]);
        assert!(ok, "virsh dumpxml {}: {xml}", self.domain);
        xml
    }

    pub fn domstate(&self) -> String {
        self.virsh(&["domstate", "--reason", &self.domain])
            .1
            .trim()
            .to_owned()
    }

    /// The QEMU pid from libvirt's pid file.
    /// The process doing the work: `run` re-executes itself as PID 1 of
    /// its own PID namespace, so that is the outer process's child.
    pub fn worker_pid(&self) -> u32 {
        let outer = self.pid();
        let bin = launcher_bin().canonicalize().ok();
        let children =
            fs::read_to_string(format!("/proc/{outer}/task/{outer}/children")).unwrap_or_default();
        children
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .find(|p| fs::read_link(format!("/proc/{p}/exe")).ok() == bin)
            .unwrap_or(outer)
    }

    /// The launcher's own PID namespace (`pid:[inode]`), when it has one;
    /// remembered, so it can be checked after the launcher exited.
    pub fn pid_ns(&self) -> Option<String> {
        self.ns
            .get_or_init(|| {
                let mine = fs::read_link("/proc/self/ns/pid").ok()?;
                // The inner process appears a moment after the outer one.
                for _ in 0..100 {
                    let w = self.worker_pid();
                    if let Ok(ns) = fs::read_link(format!("/proc/{w}/ns/pid")) {
                        if ns != mine {
                            let _ = self.ns_init.set(w);
                            return Some(ns.to_string_lossy().into_owned());
                        }
                    }
                    thread::sleep(Duration::from_millis(20));
                }
                None
            })
            .clone()
    }

    /// The QEMU pid (host view).
    pub fn qemu_pid(&self) -> Option<u32> {
        if self.pid_ns().is_some() {
            return self.qemu_pid_of(&self.domain);
        }
        fs::read_to_string(self.state.join(format!(
            "libvirt/run/qemu/{}{}.pid",
            if nonroot() { "run/" } else { "" },
            self.domain
        )))
        .ok()?
        .trim()
        .parse()
        .ok()
    }

    /// The QEMU pid (host view) of domain `name` in the launcher's namespace.
    pub fn qemu_pid_of(&self, name: &str) -> Option<u32> {
        let ns = self.pid_ns()?;
        processes_in_ns(&ns).into_iter().map(|(p, _)| p).find(|p| {
            fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&format!("guest={name},")))
        })
    }

    /// Pids (host view) of the libvirt daemons.
    pub fn daemon_pids(&self) -> Vec<u32> {
        if let Some(ns) = self.pid_ns() {
            return processes_in_ns(&ns)
                .into_iter()
                .filter(|(_, c)| ["libvirtd", "virtlogd", "virtqemud"].contains(&c.as_str()))
                .map(|(p, _)| p)
                .collect();
        }
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["msg"] == "started" && v.get("daemon").is_some())
            .filter_map(|v| v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
            .collect()
    }

    /// Pid (host view) of the daemon called `name`.
    /// Without a PID namespace of its own (pod mode), the launcher's log
    /// gives it: the last start of that daemon.
    pub fn daemon_pid(&self, name: &str) -> Option<u32> {
        if let Some(ns) = self.pid_ns() {
            return processes_in_ns(&ns)
                .into_iter()
                .find(|(_, c)| c == name)
                .map(|(p, _)| p);
        }
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["msg"] == "started" && v["daemon"] == name)
            .filter_map(|v| v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
            .next_back()
            .filter(|p| alive(*p))
    }

    /// How many libvirt connections the launcher holds to its daemon
    /// `name`: the unix sockets of the daemon's parent (the launcher that
    /// supervises it) whose peer is a socket of the daemon, the peers as
    /// `ss` sees them in the launcher's network namespace.
    pub fn libvirt_connections(&self, name: &str) -> usize {
        let (launcher, daemon) = self.supervisor_of(name);
        let sockets = |pid: u32| -> std::collections::BTreeSet<String> {
            fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
                .filter_map(|t| {
                    let t = t.to_string_lossy().into_owned();
                    Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
                })
                .collect()
        };
        let (ours, theirs) = (sockets(launcher), sockets(daemon));
        let out = Command::new("nsenter")
            .arg("--net")
            .arg("--target")
            .arg(launcher.to_string())
            .args(["ss", "-xnH"])
            .output()
            .expect("run ss");
        assert!(out.status.success(), "ss: {out:?}");
        // `u_str ESTAB 0 0 <local path or *> <inode> <peer path or *> <peer inode>`
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.len() >= 8)
            .filter(|f| ours.contains(f[5]) && theirs.contains(f[7]))
            .count()
    }

    /// `(launcher, daemon)`: the pids (host view) of the daemon `name` and
    /// of its parent, the launcher process that supervises it.
    pub fn supervisor_of(&self, name: &str) -> (u32, u32) {
        let daemon = self
            .daemon_pid(name)
            .unwrap_or_else(|| panic!("no {name} running\n{}", self.log()));
        let status = fs::read_to_string(format!("/proc/{daemon}/status")).unwrap();
        let launcher = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no PPid in {status}"));
        (launcher, daemon)
    }

    /// The names of the threads of the launcher process that supervises
    /// the daemon `daemon` (`/proc/<pid>/task/*/comm`), sorted.
    pub fn launcher_threads(&self, daemon: &str) -> Vec<String> {
        let (launcher, _) = self.supervisor_of(daemon);
        let mut names: Vec<String> = fs::read_dir(format!("/proc/{launcher}/task"))
            .unwrap()
            .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|n| n.trim().to_owned())
            .collect();
        names.sort();
        names
    }

    /// How many times the launcher started a daemon (restarts included).
    pub fn daemon_starts(&self) -> usize {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["msg"] == "started" && v.get("daemon").is_some())
            .count()
    }

    /// Sends `sig` to the launcher (not to a wrapper such as `unshare`).
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let mut pid = self.pid();
        let is_launcher = fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .zip(launcher_bin().canonicalize().ok())
            .is_some_and(|(exe, bin)| exe == bin);
        if self.wrapped && !is_launcher {
            let children =
                fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
            pid = children
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
                .expect("the wrapper's child (the launcher)");
        }
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig)
            .expect("signal launcher");
    }

    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.exit = Some(st);
                    self.exit_ticks = Some(uptime_ticks());
                }
            }
        }
        self.exit
    }

    /// Processes still in the launcher's PID namespace. The kernel reuses
    /// a dead namespace's inode number, so after the launcher exited a
    /// parallel test's new namespace can carry the same `pid:[inode]`:
    /// only processes started before the exit was seen can be ours.
    pub fn processes_left(&self) -> Vec<(u32, String)> {
        let Some(ns) = self.pid_ns() else {
            return Vec::new();
        };
        let limit = self.exit_ticks.unwrap_or(u64::MAX);
        let init = self.ns_init.get().copied();
        processes_in_ns(&ns)
            .into_iter()
            .filter(|(pid, _)| start_ticks(*pid).is_some_and(|t| t <= limit))
            // A namespace that reused the inode has another PID 1.
            .filter(|(pid, _)| init.is_none_or(|i| ns_init_of(*pid, &ns) == Some(i)))
            .collect()
    }

    /// Sends the launcher SIGTERM (kubelet deleting the pod, Ctrl-C) and
    /// waits up to `timeout` for it to exit; the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        self.wait_exit(timeout)
    }

    /// [`Launcher::terminate`], which must end in a successful exit.
    pub fn stop(&mut self, timeout: Duration) {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        self.wait_success(timeout);
    }

    /// Waits up to `timeout` for the launcher to exit, which must be a
    /// success (the log is shown otherwise).
    pub fn wait_success(&mut self, timeout: Duration) {
        let st = self.wait_exit(timeout);
        assert!(st.success(), "launcher exit {st}\n{}", self.log());
    }

    /// [`Launcher::wait_success`], then [`Launcher::assert_nothing_left`].
    pub fn wait_success_and_check(&mut self, timeout: Duration) {
        self.wait_success(timeout);
        self.assert_nothing_left();
    }

    /// After the launcher exited: nothing it started is left, neither in
    /// its PID namespace nor anywhere mentioning its VMI's UID.
    pub fn assert_nothing_left(&self) {
        let left = self.processes_left();
        assert!(
            left.is_empty(),
            "processes left in the launcher's PID namespace: {left:?}"
        );
        let left = processes_mentioning(&self.uid);
        assert!(
            left.is_empty(),
            "processes still mention {}: {left:?}",
            self.uid
        );
    }

    /// [`Launcher::stop`], then [`Launcher::assert_nothing_left`].
    pub fn stop_and_check(&mut self, timeout: Duration) {
        self.stop(timeout);
        self.assert_nothing_left();
    }

    /// Waits for the launcher to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(st) = self.try_exit() {
                return st;
            }
            assert!(
                start.elapsed() < timeout,
                "launcher still running after {timeout:?}\n--- launcher log ---\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Clock ticks since boot, rounded up (`/proc/uptime`; USER_HZ is 100).
fn uptime_ticks() -> u64 {
    fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(u64::MAX, |secs| (secs * 100.0).ceil() as u64 + 1)
}

/// When `pid` started, in clock ticks since boot (`/proc/<pid>/stat`
/// field 22).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Fields after the command: state is field 3, starttime field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// True when `pid` is a live (non-zombie) process.
/// Resident KiB (`Rss`) of the mappings of `pid` named `name` in
/// The `<vcpupin>` elements of `xml` as (vCPU, cpuset), in document order.
pub fn vcpupins(xml: &str) -> Vec<(String, String)> {
    xml.split("<vcpupin ")
        .skip(1)
        .map(|e| {
            let attr = |name: &str| {
                e.split(&format!("{name}='"))
                    .nth(1)
                    .and_then(|v| v.split('\'').next())
                    .unwrap_or_default()
                    .to_owned()
            };
            (attr("vcpu"), attr("cpuset"))
        })
        .collect()
}

/// `/proc/<pid>/smaps` (e.g. `[stack]`, `[heap]`).
pub fn mapping_rss_kib(pid: u32, name: &str) -> u64 {
    let smaps = fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut inside = false;
    let mut kib = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            inside = line.split_whitespace().nth(5) == Some(name);
        } else if let Some(v) = line.strip_prefix("Rss:").filter(|_| inside) {
            kib += v
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap_or(0);
        }
    }
    kib
}

pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .is_none_or(|(_, r)| !r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Live processes (pid, comm) in PID namespace `ns`.
pub fn processes_in_ns(ns: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if fs::read_link(e.path().join("ns/pid")).is_ok_and(|l| l.to_string_lossy() == ns)
            && alive(pid)
        {
            let comm = fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            out.push((pid, comm.trim().to_owned()));
        }
    }
    out
}

/// The PID 1 (host view) of `pid`'s PID namespace `ns`: its topmost
/// ancestor still in `ns`.
fn ns_init_of(pid: u32, ns: &str) -> Option<u32> {
    let mut cur = pid;
    for _ in 0..64 {
        let status = fs::read_to_string(format!("/proc/{cur}/status")).ok()?;
        let ppid: u32 = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))?
            .trim()
            .parse()
            .ok()?;
        let parent_in_ns = ppid != 0
            && fs::read_link(format!("/proc/{ppid}/ns/pid"))
                .is_ok_and(|l| l.to_string_lossy() == ns);
        if !parent_in_ns {
            return Some(cur);
        }
        cur = ppid;
    }
    None
}

/// Pids whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(needle) && alive(pid) {
                out.push(pid);
            }
        }
    }
    out
}

impl Drop for Launcher {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            // A failed test: stop everything the launcher started.
            let pg = nix::unistd::Pid::from_raw(-(self.pid() as i32));
            let _ = nix::sys::signal::kill(pg, nix::sys::signal::Signal::SIGKILL);
            for p in self.daemon_pids().into_iter().chain(self.qemu_pid()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            if let Some(c) = self.child.as_mut() {
                let _ = c.wait();
            }
        }
        if std::env::var_os("E2E_KEEP").is_some() {
            let kept = self.dir.path().to_owned();
            eprintln!("kept {}", kept.display());
            std::mem::forget(std::mem::replace(
                &mut self.dir,
                tempfile::tempdir().expect("tempdir"),
            ));
        }
    }
}

/// The compute container's command as virt-controller v1.6.6 renders it
/// (`template.go`, `rendercontainer.go`) for a VMI `name` in `namespace`
/// with UID `uid`, `terminationGracePeriodSeconds` `tgps` and
/// `hook_sidecars` sidecars: `--qemu-timeout` is 240 s plus a jitter below
/// 120 s (here `seq % 120`), the grace period `tgps + 15`; then
/// `--run-as-nonroot` in non-root mode, `--image-volume` with the
/// ImageVolume gate (`image_volume`) and `--allow-emulation` (a cluster
/// with `useEmulation`). One word is not virt-controller's: the test
/// machines' nested `/dev/kvm` cannot run guests, so `--use-emulation`
/// (this launcher's) makes the launcher choose TCG although `/dev/kvm`
/// exists.
pub fn pod_box_command(
    name: &str,
    namespace: &str,
    uid: &str,
    tgps: i64,
    hook_sidecars: u32,
    image_volume: bool,
    seq: usize,
) -> Vec<String> {
    let mut c: Vec<String> = [
        "/usr/bin/virt-launcher-monitor",
        "--qemu-timeout",
        &format!("{}s", 240 + seq % 120),
        "--name",
        name,
        "--uid",
        uid,
        "--namespace",
        namespace,
        "--kubevirt-share-dir",
        "/var/run/kubevirt",
        "--ephemeral-disk-dir",
        "/var/run/kubevirt-ephemeral-disks",
        "--container-disk-dir",
        "/var/run/kubevirt/container-disks",
        "--grace-period-seconds",
        &(tgps + 15).to_string(),
        "--hook-sidecars",
        &hook_sidecars.to_string(),
        "--ovmf-path",
        "/usr/share/OVMF",
        "--disk-memory-limit",
        "2097152000",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if nonroot() {
        c.push("--run-as-nonroot".into());
    }
    if image_volume {
        c.push("--image-volume".into());
    }
    c.push("--allow-emulation".into());
    c.push("--use-emulation".into());
    c
}

/// A VMI manifest booting the test guest from a containerDisk, without a
/// network (`autoattachPodInterface: false`: no default pod interface).
pub fn guest_vmi(name: &str, bus: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
  namespace: e2e
spec:
  terminationGracePeriodSeconds: 30
  domain:
    cpu: {{cores: 1}}
    memory: {{guest: 128Mi}}
    devices:
      autoattachPodInterface: false
      rng: {{}}
      disks:
      - name: containerdisk
        bootOrder: 1
        disk: {{bus: {bus}}}
      - name: scratch
        disk: {{bus: virtio}}
  volumes:
  - name: containerdisk
    containerDisk: {{image: test-guest}}
  - name: scratch
    emptyDisk: {{capacity: 64Mi}}
"
    )
}

/// A loop device over a file (`losetup --find --show`), detached when
/// dropped, its node given back to root first (a test may have given it to
/// the QEMU user).
pub(crate) struct LoopDevice(pub(crate) String);

impl LoopDevice {
    /// Attaches `file`; panics with losetup's words when it cannot.
    pub(crate) fn on(file: &Path) -> LoopDevice {
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(file)
            .output()
            .expect("losetup (util-linux) is needed");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        LoopDevice(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::os::unix::fs::lchown(&self.0, Some(0), Some(0));
        let _ = Command::new("losetup").args(["--detach", &self.0]).status();
    }
}
