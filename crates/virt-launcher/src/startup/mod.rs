//! The start-up sequence.

use std::path::{Path, PathBuf};
use std::time::Instant;

use api::{Arch, VirtualMachineInstance};
use converter::ConvertError;
use storage::{ConfigSources, PrepareOptions};
use virtwrap::config::DaemonKind;

use crate::error::LauncherError;
use crate::flags::LauncherFlags;
use crate::host::{context, log_emulation};
use crate::isolation::{enter_private_mount_namespace, Mounts, StateDir};
use crate::podnet::sriov_addresses;
use crate::standalone::claims::{pvc_claims, with_claim_status, ClaimSource, PvcArg};
use crate::standalone::network::{setup_pod_network, PodSetup};
use crate::standalone::volumes::{
    access_credential_dirs, backend_storage_dir, config_volume_dirs, container_disk_images,
    host_disk_dirs, BACKEND_STORAGE_MOUNTS,
};
use runtime::run_in_runtime;

pub mod domain;
pub mod grpc;
pub mod runtime;
pub mod signals;

/// Which directories the launcher makes private.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `virt-launcher run`: everything, including the share, ephemeral and
    /// container-disk directories, lives in the state directory.
    Standalone,
    /// KubeVirt's pod: the share and disk directories are virt-handler's and
    /// are used in place; only libvirt's and the private directory are made
    /// private.
    Pod,
}

/// The runtime settings of `virt-launcher run` (and of pod mode).
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// Which directories are private.
    pub mode: Mode,
    /// Architecture of the guest: the host's, except for a standalone run
    /// with `--arch` (always TCG then, see [`context`]).
    pub arch: Arch,
    /// Private state directory.
    pub state_dir: PathBuf,
    /// containerDisk volume name → image file on the host.
    pub container_disks: Vec<(String, PathBuf)>,
    /// Standalone: the claims of persistentVolumeClaim, dataVolume and
    /// ephemeral volumes (`--pvc`): image files, directories or block
    /// devices on the host, shown where virt-handler and kubelet put them.
    pub pvcs: Vec<PvcArg>,
    /// Standalone: access credential secret name → directory of its keys
    /// (`--access-credential`).
    pub access_credentials: Vec<(String, PathBuf)>,
    /// Standalone: config volume (or cloud-init secret) name → directory
    /// on the host holding its files (`--config-volume`).
    pub config_volumes: Vec<(String, PathBuf)>,
    /// Keep the state directory after exit.
    pub keep_state: bool,
    /// Shared libvirt capability cache (QEMU probing costs seconds per start).
    pub cache_dir: PathBuf,
    /// Standalone: build the pod network in a fresh network namespace
    /// (`--setup-pod-network`) and run network phase 2 on it.
    pub setup_pod_network: bool,
    /// Standalone: the pod network is built for KubeVirt's default
    /// interface, which the VMI got for naming no network (logged once
    /// the input is known to be good).
    pub default_pod_interface: bool,
    /// Standalone: KubeVirt's backend storage (`--backend-storage`), the
    /// directory that keeps EFI variables and TPM state across runs.
    pub backend_storage: Option<PathBuf>,
    /// Standalone: KubeVirt's network-info downward API file
    /// (`--network-info`), giving each SR-IOV interface's VF.
    pub network_info: Option<PathBuf>,
}

/// Where the private runtime's directories go in the mount namespace.
struct Layout {
    private_dir: &'static str,
    libvirt: [(&'static str, &'static str); 4],
}

/// KubeVirt's private directory (not a flag in KubeVirt).
pub const PRIVATE_DIR: &str = "/var/run/kubevirt-private";

const LAYOUT: Layout = Layout {
    private_dir: PRIVATE_DIR,
    libvirt: [
        ("libvirt/etc", "/etc/libvirt"),
        ("libvirt/run", "/var/run/libvirt"),
        ("libvirt/lib", "/var/lib/libvirt"),
        ("libvirt/log", "/var/log/libvirt"),
    ],
};

fn check_flags(flags: &LauncherFlags) -> Result<(), LauncherError> {
    let refuse = |f: &str| Err(LauncherError::Input(format!("{f} is not supported yet")));
    if flags.run_as_nonroot {
        return refuse("--run-as-nonroot");
    }
    if flags.image_volume {
        return refuse("--image-volume");
    }
    if flags.hook_sidecars > 0 {
        return refuse("--hook-sidecars");
    }
    Ok(())
}

/// Runs `vmi` in a private runtime until the guest stops (see module docs).
/// Must be called before any thread is started.
///
/// # Errors
/// [`LauncherError`]; nothing is left running when it returns.
pub fn run_vmi(
    vmi: &VirtualMachineInstance,
    sync: bool,
    flags: &LauncherFlags,
    settings: &RuntimeSettings,
    started: Instant,
) -> Result<(), LauncherError> {
    check_flags(flags)?;
    let mut ctx = context(flags, settings.arch)?;
    // Standalone claims: checked now; their sizes become the VMI's
    // status.volumeStatus, as virt-handler reports a claim's.
    let claims = match settings.mode {
        Mode::Standalone => pvc_claims(vmi, settings)?,
        Mode::Pod => Vec::new(),
    };
    let with_status;
    let vmi = if settings.pvcs.is_empty() {
        vmi
    } else {
        with_status = with_claim_status(vmi, &settings.pvcs, &claims);
        &with_status
    };
    // virt-handler's PreallocatedVolumes: claims whose status says so
    // (`--pvc ...,preallocated` standalone). Under virt-handler its options
    // replace this at each sync.
    ctx.volumes_discard_ignore =
        storage::pvc::preallocated_volumes(vmi).map_err(|e| LauncherError::Input(e.to_string()))?;
    if sync {
        ctx.sriov_pci = sriov_addresses(vmi, settings)?;
    }
    // Pure conversion first: refuses unsupported or invalid specs up front.
    if sync {
        converter::convert(vmi, &ctx).map_err(|e| match e {
            ConvertError::Host(m) => LauncherError::Runtime(m),
            other => LauncherError::Input(other.to_string()),
        })?;
        storage::cloudinit::check_inline(vmi).map_err(|e| LauncherError::Input(e.to_string()))?;
        network::phase2::check_spec(vmi).map_err(LauncherError::Input)?;
    }
    // Network phase 2 in a pod, once the spec is known to convert (the
    // standalone stand-in of phase 1 comes after the input checks below).
    let mut dhcp = Vec::new();
    let mut dhcp6 = Vec::new();
    let mut bridge_caches = Vec::new();
    if settings.mode == Mode::Pod && sync {
        // In a pod, virt-handler's phase 1 made eth0, k6t-eth0 and tap0.
        let live = vmi
            .spec
            .domain
            .devices
            .interfaces
            .iter()
            .any(|i| i.state.as_deref() != Some("absent") && !converter::sriov::is_sriov(i));
        if live {
            let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            let phase2 = network::phase2::prepare(
                vmi,
                Path::new(PRIVATE_DIR),
                &resolv,
                &network::phase1::pod_link,
                &network::phase1::link_exists,
            )
            .map_err(LauncherError::Input)?;
            ctx.prepared.interfaces = phase2.hosts;
            dhcp = phase2.dhcp;
            dhcp6 = phase2.dhcp6;
        }
    }
    let backend_storage = match settings.mode {
        Mode::Standalone => backend_storage_dir(vmi, settings)?,
        Mode::Pod => None,
    };
    let (images, host_disk_dirs, config_sources) = match settings.mode {
        Mode::Standalone => (
            container_disk_images(vmi, settings)?,
            host_disk_dirs(vmi)?,
            ConfigSources::Standalone {
                volumes: config_volume_dirs(vmi, settings)?,
                secrets: access_credential_dirs(vmi, settings)?,
            },
        ),
        Mode::Pod => (Vec::new(), Vec::new(), ConfigSources::Pod),
    };
    if sync {
        // Everything read from outside the launcher's directories (cloud-init
        // secrets, keys, config volume trees) is checked now, before libvirt
        // starts, so bad input is refused without starting anything.
        let check = PrepareOptions {
            config_sources: config_sources.clone(),
            config_disk_fs: flags.config_disk_fs.into(),
            ..PrepareOptions::default()
        };
        storage::check_inputs(vmi, &ctx, &check)
            .map_err(|e| LauncherError::Input(e.to_string()))?;
    }
    log_emulation(flags, &ctx);
    // The standalone pod, once the input is known to be good (nothing is
    // built for input that is refused).
    if settings.setup_pod_network {
        if settings.default_pod_interface {
            tracing::info!(
                "the VMI names no network: KubeVirt's default interface (bridge binding on the pod network) gets a pod network stand-in, as with --setup-pod-network (autoattachPodInterface: false runs it without a NIC)"
            );
        }
        match setup_pod_network(vmi)? {
            PodSetup::Ready(phase2) => {
                ctx.prepared.interfaces = phase2.hosts;
                dhcp = phase2.dhcp;
                dhcp6 = phase2.dhcp6;
            }
            PodSetup::BridgeCaches(caches) => bridge_caches = caches,
        }
    }
    let daemon = DaemonKind::detect().ok_or_else(|| {
        LauncherError::Runtime("neither virtqemud nor libvirtd is installed (apt-get install libvirt-daemon-driver-qemu)".into())
    })?;

    let state = StateDir::acquire(&settings.state_dir)?;
    enter_private_mount_namespace()?;
    let mut mounts = Mounts::default();
    let result = (|| {
        for (rel, target) in LAYOUT.libvirt {
            mounts.bind_dir(&state.subdir(rel)?, Path::new(target))?;
        }
        std::fs::create_dir_all(&settings.cache_dir).map_err(|e| {
            LauncherError::Runtime(format!("mkdir {}: {e}", settings.cache_dir.display()))
        })?;
        mounts.bind_dir(&settings.cache_dir, Path::new("/var/cache/libvirt"))?;
        if settings.mode == Mode::Standalone {
            // In a pod this directory is the pod's own, with kubelet's
            // mounts of config volumes, secrets and claims below it: never
            // hide it there.
            mounts.bind_dir(&state.subdir("private")?, Path::new(LAYOUT.private_dir))?;
            if !bridge_caches.is_empty() {
                // The stand-in's phase 1 writes its caches where
                // virt-handler's does; phase 2 reads them as in a pod.
                let dir = Path::new(PRIVATE_DIR);
                for (pod_iface, cache) in bridge_caches.drain(..) {
                    let file = network::cache::vif_cache_path(dir, &pod_iface);
                    network::cache::write_json(&file, &cache)
                        .map_err(|e| LauncherError::Runtime(e.to_string()))?;
                }
                let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
                let phase2 = network::phase2::prepare(
                    vmi,
                    dir,
                    &resolv,
                    &network::phase1::pod_link,
                    &network::phase1::link_exists,
                )
                .map_err(LauncherError::Input)?;
                ctx.prepared.interfaces = phase2.hosts;
                dhcp = phase2.dhcp;
                dhcp6 = phase2.dhcp6;
            }
            mounts.bind_dir(
                &state.subdir("share")?,
                Path::new(&flags.kubevirt_share_dir),
            )?;
            mounts.bind_dir(
                &state.subdir("ephemeral")?,
                Path::new(&flags.ephemeral_disk_dir),
            )?;
            if !Path::new(&flags.container_disk_dir).starts_with(&flags.kubevirt_share_dir) {
                mounts.bind_dir(
                    &state.subdir("container-disks")?,
                    Path::new(&flags.container_disk_dir),
                )?;
            }
        }
        if let Some(dir) = &backend_storage {
            // After /var/lib/libvirt's bind: these sit on top of it.
            for (sub, target) in BACKEND_STORAGE_MOUNTS {
                let source = dir.join(sub);
                match std::fs::symlink_metadata(&source) {
                    Ok(m) if !m.is_dir() => {
                        return Err(LauncherError::Input(format!(
                            "--backend-storage: {} is not a directory",
                            source.display()
                        )))
                    }
                    _ => {}
                }
                mounts.bind_dir(&source, Path::new(target))?;
            }
        }
        for (index, source) in &images {
            let target = PathBuf::from(converter::disks::container_disk_image(&ctx, *index));
            mounts.bind_file_read_only(source, &target)?;
        }
        for (dir, target) in &host_disk_dirs {
            mounts.bind_dir(dir, target)?;
        }
        let mut block_claims = Vec::new();
        for c in &claims {
            let dir = PathBuf::from(format!("{PRIVATE_DIR}/vmi-disks/{}", c.volume));
            match c.source {
                ClaimSource::File => {
                    mounts.bind_file(&c.path, &dir.join("disk.img"), c.read_only)?;
                }
                ClaimSource::Dir => mounts.bind_dir_as(&c.path, &dir, c.read_only)?,
                ClaimSource::Block => block_claims.push((c.volume.clone(), c.path.clone())),
            }
        }
        if !block_claims.is_empty() {
            // kubelet puts a block claim's node at /dev/<vol> in the pod;
            // standalone, the launcher's private /dev does (the host's /dev
            // is never written).
            mounts.private_dev(&state.subdir("dev")?, &block_claims)?;
        }
        if process::is_pid1() {
            mounts.mount_proc()?;
        }
        // Threads may start now that the mount namespace is private.
        let servers = network::phase2::DhcpServers::start(
            std::mem::take(&mut dhcp),
            std::mem::take(&mut dhcp6),
        )
        .map_err(LauncherError::Runtime)?;
        // A panic must not skip the clean-up below (daemons, mounts, state).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_in_runtime(
                vmi,
                sync,
                flags,
                &ctx,
                &daemon,
                settings.mode,
                &claims,
                &config_sources,
                started,
            )
        }));
        servers.stop();
        r.unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(LauncherError::Runtime(format!(
                "internal error (panic: {what})"
            )))
        })
    })();
    mounts.unmount_all();
    if settings.keep_state {
        tracing::info!(state_dir = %state.path().display(), "state kept");
    } else if let Err(e) = state.remove() {
        tracing::warn!("cannot remove the state: {e}");
    }
    result
}
