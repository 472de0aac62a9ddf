//! `virt-launcher capabilities-cache --out DIR`: the QEMU capabilities
//! cache the launcher image ships (see `virtwrap::capscache`), made at
//! image build for exactly the image's QEMU and libvirt.
//!
//! In a mount namespace of its own, with libvirt's directories on empty
//! temporary ones (the layout of the launcher's private runtime, as root),
//! it starts the image's libvirt daemon with the launcher's configuration,
//! asks for the host capabilities (libvirt then probes every QEMU binary
//! it finds, as in a fresh pod), stops the daemon and records what libvirt
//! wrote, with the hashes and facts the launcher checks before it uses
//! the files in a pod.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use virtwrap::capscache::{self, HostNow, Layout};
use virtwrap::config::{DaemonConfig, DaemonKind};
use virtwrap::connection::Connector;
use virtwrap::supervisor::{DaemonSpec, Supervisor};

use crate::error::LauncherError;
use crate::isolation::{enter_private_mount_namespace, Mounts};

/// `capabilities-cache`'s command line.
#[derive(Args, Debug)]
pub struct CapsCacheArgs {
    /// Where to write the cache (a new or empty directory); the launcher
    /// reads it from `--shipped-capabilities-dir` (default
    /// /usr/share/virt-launcher/capabilities).
    #[arg(long)]
    pub out: PathBuf,
}

/// libvirt's directories on the temporary ones: (below it, mount point).
const DIRS: [(&str, &str); 5] = [
    ("etc", "/etc/libvirt"),
    ("run", "/var/run/libvirt"),
    ("lib", "/var/lib/libvirt"),
    ("log", "/var/log/libvirt"),
    ("cache", "/var/cache/libvirt"),
];

/// Makes the cache (see the module docs). Must run as root, before any
/// thread is started.
///
/// # Errors
/// [`LauncherError`]: not root (input), no daemon, libvirt's probe failed,
/// or what `capscache::record` refuses (runtime).
pub fn capabilities_cache(args: &CapsCacheArgs) -> Result<(), LauncherError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(LauncherError::input(
            "capabilities-cache: run as root (it starts the system libvirt daemon)",
        ));
    }
    let daemon = DaemonKind::detect()
        .ok_or_else(|| LauncherError::runtime("neither virtqemud nor libvirtd is installed"))?;
    let out = std::path::absolute(&args.out)
        .map_err(|e| LauncherError::input_at("--out", e.to_string()))?;
    let tmp = nix::unistd::mkdtemp(&std::env::temp_dir().join("virt-launcher-caps-XXXXXX"))
        .map_err(|e| LauncherError::runtime(format!("temporary directory: {e}")))?;
    let result = make(&daemon, &out, &tmp);
    if let Err(e) = std::fs::remove_dir_all(&tmp) {
        tracing::warn!("cannot remove {}: {e}", tmp.display());
    }
    result
}

/// [`capabilities_cache`] with the temporary directory `tmp`.
fn make(daemon: &DaemonKind, out: &Path, tmp: &Path) -> Result<(), LauncherError> {
    enter_private_mount_namespace()?;
    let mut mounts = Mounts::default();
    let started = Instant::now();
    let result = (|| {
        for (rel, target) in DIRS {
            mounts.bind_dir(&tmp.join(rel), Path::new(target))?;
        }
        probe(daemon)
    })();
    mounts.unmount_all();
    result?;
    let probe_ms = started.elapsed().as_millis();
    let layout = Layout::for_daemon(daemon)
        .map_err(|e| LauncherError::runtime(format!("libvirt's files: {e}")))?;
    let cache = tmp.join("cache/qemu").join(capscache::CAPABILITIES_SUBDIR);
    let m = capscache::record(&cache, out, &layout, &HostNow::probe())
        .map_err(|e| LauncherError::runtime(format!("capabilities-cache: {e}")))?;
    logging::stdout_text(&format!(
        "capabilities-cache: {} files for libvirt {} ({}) in {} (probe {probe_ms} ms): {}\n",
        m.entries.len(),
        m.libvirt_version,
        m.daemon.path,
        out.display(),
        m.entries
            .iter()
            .map(|e| format!("{}{}", e.emulator, if e.kvm { " (KVM)" } else { "" }))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .map_err(|e| LauncherError::runtime(format!("cannot write to stdout: {e}")))
}

/// Starts `daemon` as the root launcher configures it and has it probe
/// every QEMU binary (`virConnectGetCapabilities`), then stops it.
fn probe(daemon: &DaemonKind) -> Result<(), LauncherError> {
    let cfg = DaemonConfig::default();
    virtwrap::config::write_all(Path::new("/etc/libvirt"), daemon, &cfg)
        .map_err(|e| LauncherError::runtime(format!("writing libvirt configuration: {e}")))?;
    let mut sup = Supervisor::new();
    sup.start(DaemonSpec {
        name: daemon.name().into(),
        program: daemon.program().to_owned(),
        args: vec![
            "-f".into(),
            format!("/etc/libvirt/{}", daemon.config_file()),
            "-p".into(),
            format!("/var/run/libvirt/{}.pid", daemon.name()),
        ],
        env: Vec::new(),
        restart_loses: None,
    })
    .map_err(|e| LauncherError::runtime(format!("cannot start {}: {e}", daemon.name())))?;
    let connector = Connector {
        daemon: daemon.name().into(),
        uri: "qemu:///system".into(),
        socket: PathBuf::from("/var/run/libvirt").join(daemon.socket_name()),
    };
    let r = connector
        .connect()
        .map_err(|e| LauncherError::runtime(e.to_string()))
        .and_then(|mut c| {
            let r = c
                .get_capabilities()
                .map(|_| ())
                .map_err(|e| LauncherError::runtime(format!("libvirt's capabilities: {e}")));
            let _ = c.close();
            r
        });
    sup.stop(Duration::from_secs(5));
    r
}
