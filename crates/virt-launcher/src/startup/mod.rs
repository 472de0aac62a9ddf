//! The start-up sequence, supervision and shutdown of one VMI (KubeVirt
//! `cmd/virt-launcher/virt-launcher.go`, sections 1.4-1.8 of the facts),
//! the same steps in a pod and standalone:
//!
//! 1. the pod's claims, then the input checks (the VMI must convert; no
//!    daemon is started for input that cannot run), then the prepared pod
//!    ([`crate::pod`]: kubelet's, or the standalone stand-in's);
//! 2. private runtime ([`runtime`]): state directory, mount namespace, bind
//!    mounts (libvirt's directories and the pod's);
//! 3. KubeVirt's directories; the hook sidecars (`--hook-sidecars`,
//!    collected before libvirt starts, as in KubeVirt); libvirt
//!    configuration; virtlogd and the
//!    libvirt daemon under supervision ([`runtime`]); connection, agent,
//!    command server and event bridge ([`domain`], [`grpc`]);
//! 4. SyncVMI ([`crate::sync`]): network phase 2, volumes, convert,
//!    define, start;
//! 5. watch QEMU until it exits, shutting the guest down on a signal
//!    ([`signals`], [`crate::monitor`]);
//! 6. stop the daemons, undo the mounts, remove the state, exit.

pub mod capabilities;
pub mod domain;
pub mod grpc;
pub mod runtime;
pub mod signals;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use api::{Arch, VirtualMachineInstance};
use converter::{ClusterOptions, ConvertContext, HostFacts};
use storage::PrepareOptions;
use virtwrap::config::DaemonKind;

use crate::error::LauncherError;
use crate::flags::LauncherFlags;
use crate::host::{self, log_emulation};
use crate::isolation::{enter_private_mount_namespace, Mounts, StateDir};
use crate::pod::{Pod, PodSource};
use crate::podnet::PodNetwork;
use crate::user::RuntimeUser;

/// KubeVirt's private directory (not a flag in KubeVirt).
pub const PRIVATE_DIR: &str = "/var/run/kubevirt-private";

/// What the start-up sequence has settled before the runtime starts.
pub(crate) struct Launch<'a> {
    /// The VMI (standalone: with its claims' status).
    pub vmi: &'a VirtualMachineInstance,
    /// Sync it at start (a manifest was given); else virt-handler will.
    pub sync: bool,
    /// The launcher's flags.
    pub flags: &'a LauncherFlags,
    /// This host, probed once.
    pub host: &'a HostFacts,
    /// The cluster's settings for the syncs at start.
    pub cluster: &'a ClusterOptions,
    /// The prepared pod.
    pub pod: &'a Pod,
    /// Who the launcher proper runs as (`--run-as-nonroot`).
    pub user: RuntimeUser,
    /// The pod's network (phase 2, SR-IOV).
    pub network: &'a Arc<PodNetwork>,
    /// When the launcher started (for the log's timings).
    pub started: Instant,
}

/// Flags that do not fit the mode: `--image-volume` says how kubelet
/// mounted the pod's container disks; a standalone run takes them from
/// `--container-disk` instead.
fn check_flags(flags: &LauncherFlags, mode: crate::pod::Mode) -> Result<(), LauncherError> {
    if flags.image_volume && mode == crate::pod::Mode::Standalone {
        return Err(LauncherError::input_at(
            "--image-volume",
            "image volumes are mounted by kubelet in a pod; a standalone run takes its container disks from --container-disk",
        ));
    }
    Ok(())
}

/// `--state-dir`, by default `/run/virt-launcher/<namespace>_<name>`: not
/// `/var/run`, a symbolic link on Debian (and in most images), which the
/// state's bind mounts refuse on the way (they resolve the whole path
/// without links).
fn state_dir(flags: &LauncherFlags, vmi: &VirtualMachineInstance) -> PathBuf {
    flags
        .state_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("/run/virt-launcher/{}", vmi.domain_name())))
}

/// Runs `vmi`, a guest of `arch`, in a private runtime until the guest
/// stops (see module docs), in the pod `source` makes; `sync`: the VMI is
/// the whole VMI, synced at start (else only its identity, and
/// virt-handler syncs it). Must be called before any thread is started.
///
/// # Errors
/// [`LauncherError`]; nothing is left running when it returns.
pub fn run_vmi(
    mut vmi: VirtualMachineInstance,
    sync: bool,
    flags: &LauncherFlags,
    arch: Arch,
    source: PodSource<'_>,
    started: Instant,
) -> Result<(), LauncherError> {
    check_flags(flags, source.mode())?;
    let host = host::for_launcher(flags, arch)?;
    // Standalone claims: checked now; their sizes become the VMI's
    // status.volumeStatus, as virt-handler reports a claim's.
    let claims = source.claims(&mut vmi)?;
    let vmi = vmi;
    // virt-handler's PreallocatedVolumes: claims whose status says so
    // (`--pvc ...,preallocated` standalone); the ExpandDisks gate from
    // `--expand-disks`. Under virt-handler its options replace these at
    // each sync.
    let cluster = ClusterOptions {
        volumes_discard_ignore: storage::pvc::preallocated_volumes(&vmi)
            .map_err(LauncherError::from)?,
        expand_disks_enabled: flags.expand_disks,
        ..ClusterOptions::default()
    };
    let network = Arc::new(PodNetwork::new(source.sriov()));
    // Pure conversion first: refuses unsupported or invalid specs up front.
    let mut ctx = None;
    if sync {
        let sriov = network
            .sriov_addresses(&vmi)
            .map_err(LauncherError::input)?;
        let c = ConvertContext::from_parts(&host, &cluster, converter::Prepared::default(), sriov);
        converter::convert(&vmi, &c)?;
        storage::cloudinit::check_inline(&vmi)?;
        network::phase2::check_spec(&vmi).map_err(|e| LauncherError::input(e.to_string()))?;
        ctx = Some(c);
    }
    let standalone = source.mode() == crate::pod::Mode::Standalone;
    let pod = source.prepare(&vmi, claims, flags, &host)?;
    if let Some(ctx) = &ctx {
        // Everything read from outside the launcher's directories (cloud-init
        // secrets, keys, config volume trees) is checked now, before libvirt
        // starts, so bad input is refused without starting anything.
        let check = PrepareOptions {
            config_sources: pod.config_sources.clone(),
            config_disk_fs: flags.config_disk_fs.into(),
            ..PrepareOptions::default()
        };
        storage::check_inputs(&vmi, ctx, &check)?;
    }
    log_emulation(flags, &host);
    // The standalone pod's network, once the input is known to be good
    // (nothing is built for input that is refused).
    let user = RuntimeUser::from_flag(flags.run_as_nonroot);
    let vif_caches = pod.network.build(&vmi, user)?;
    let daemon = DaemonKind::detect().ok_or_else(|| {
        LauncherError::runtime("neither virtqemud nor libvirtd is installed (apt-get install libvirt-daemon-driver-qemu)")
    })?;

    let plan = pod.runtime_plan(user, crate::pod::may_mount());
    let state = if plan.private_runtime {
        let state = StateDir::acquire(&state_dir(flags, &vmi))?;
        if standalone {
            // The VMI object `ctl addvolume` changes (the informer's copy).
            state.subdir("standalone")?;
            let json = serde_json::to_value(&vmi)
                .map_err(|e| LauncherError::runtime(format!("encoding the VMI: {e}")))?;
            crate::standalone::hotplug::write_store(state.path(), &json)?;
        }
        enter_private_mount_namespace()?;
        Some(state)
    } else {
        None
    };
    let mut mounts = Mounts::default();
    let launch = Launch {
        vmi: &vmi,
        sync,
        flags,
        host: &host,
        cluster: &cluster,
        pod: &pod,
        user,
        network: &network,
        started,
    };
    // Whether the launcher still holds root at the end (to undo its mounts
    // and remove its state): a standalone non-root run is root until it
    // hands its state over and enters uid 107, so a failure before that
    // (a mount, a cache write) still removes the state it made.
    let mut privileged = !user.is_non_root() || plan.enter_as.is_some();
    let result = (|| {
        if let Some(state) = &state {
            runtime::mount(&mut mounts, state, flags, &pod)?;
        }
        // The stand-in's phase 1 writes its caches where virt-handler's
        // does; phase 2 reads them as in a pod.
        for (pod_iface, cache) in &vif_caches {
            let file = network::cache::vif_cache_path(std::path::Path::new(PRIVATE_DIR), pod_iface);
            network::cache::write_json(&file, cache)
                .map_err(|e| LauncherError::runtime(e.to_string()))?;
        }
        if let (Some(as_user), Some(state)) = (plan.enter_as, &state) {
            // The pod's emptyDirs are the launcher's to write; then the
            // launcher proper runs with the compute container's credentials.
            // The state directory goes to the outer process to remove.
            runtime::give_pod_dirs(state, as_user)?;
            if !flags.keep_state && !crate::pidns::hand_over_state(state.path(), state.created()) {
                tracing::warn!(state_dir = %state.path().display(), "no outer process to remove the state once the launcher is no longer root: it stays");
            }
            // From the hand-over on, the outer process removes the state.
            privileged = false;
            crate::standalone::container::enter_non_root(as_user.id())?;
        }
        // Threads may start now that the mount namespace is private. A
        // panic must not skip the clean-up below (daemons, mounts, state).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime::run_in_runtime(&launch, &daemon)
        }));
        network.stop();
        r.unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(LauncherError::runtime(format!(
                "internal error (panic: {what})"
            )))
        })
    })();
    if !privileged {
        // The mounts end with the launcher's mount namespace; the outer
        // process removes the state (see above).
        return result;
    }
    mounts.unmount_all();
    if let Some(state) = state {
        if flags.keep_state {
            tracing::info!(state_dir = %state.path().display(), "state kept");
        } else if let Err(e) = state.remove() {
            tracing::warn!("cannot remove the state: {e}");
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        flags: LauncherFlags,
    }

    #[test]
    fn image_volume_is_a_pods_flag_and_refused_standalone() {
        let f = Cmd::try_parse_from(["virt-launcher", "--image-volume"])
            .unwrap()
            .flags;
        assert!(f.image_volume);
        assert!(check_flags(&f, crate::pod::Mode::Pod).is_ok());
        let e = check_flags(&f, crate::pod::Mode::Standalone).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().starts_with("--image-volume: ")
                && e.to_string().contains("--container-disk"),
            "{e}"
        );
        let pod = crate::pod::Pod::kubelet(true);
        assert_eq!(
            pod.image_volumes,
            Some(storage::image_volume::ImageVolumeRoots::default())
        );
        assert_eq!(crate::pod::Pod::kubelet(false).image_volumes, None);
    }
}
