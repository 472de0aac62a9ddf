//! The pod the VMI runs in, whoever made it: in a cluster kubelet,
//! virt-handler (phase 1 of the network, the claims' status) and CSI; in a
//! standalone run the stand-in in [`crate::standalone`]. Either way the
//! start-up sequence gets a [`Pod`], a value saying what is where, and
//! runs the same steps with it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use api::VirtualMachineInstance;
use converter::HostFacts;
use storage::image_volume::ImageVolumeRoots;
use storage::ConfigSources;

use crate::error::LauncherError;
use crate::flags::LauncherFlags;
use crate::podnet::SriovSource;
use crate::standalone::{self, StandaloneArgs};
use crate::user::RuntimeUser;

/// Who made the pod: the one mode switch of the launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `virt-launcher run`: no cluster; the standalone stand-in plays the
    /// pod, and everything, including the share, ephemeral and
    /// container-disk directories, lives in the state directory.
    Standalone,
    /// KubeVirt's pod: the share and disk directories are virt-handler's and
    /// are used in place; only libvirt's and the private directory are made
    /// private.
    Pod,
}

/// Where the pod comes from, before it is prepared.
#[derive(Clone, Copy, Debug)]
pub enum PodSource<'a> {
    /// A KubeVirt pod: kubelet and virt-handler made it.
    Kubelet,
    /// `virt-launcher run`: the stand-in makes it from the flags.
    Standalone {
        /// `run`'s flags for what a pod would give.
        args: &'a StandaloneArgs,
        /// The VMI got KubeVirt's default interface for naming no network:
        /// its pod network is played without `--setup-pod-network`.
        default_interface: bool,
        /// `--network-info`, read and checked once before anything starts
        /// ([`crate::standalone::network::read_network_info`]).
        network_info: Option<&'a network::sriov::NetworkInfoPci>,
    },
}

impl PodSource<'_> {
    /// The launcher's mode.
    pub fn mode(&self) -> Mode {
        match self {
            PodSource::Kubelet => Mode::Pod,
            PodSource::Standalone { .. } => Mode::Standalone,
        }
    }

    /// Where the host PCI addresses of SR-IOV VFs come from.
    pub fn sriov(&self) -> SriovSource {
        match self {
            PodSource::Kubelet => SriovSource::Pod,
            PodSource::Standalone { network_info, .. } => {
                SriovSource::NetworkInfo(network_info.cloned())
            }
        }
    }

    /// First step, before the VMI's spec is checked: what virt-handler
    /// writes into the VMI's status about its claims (standalone: from
    /// `--pvc`), and which claims the pod has. Standalone, a VMI whose
    /// interfaces need a pod network is refused here without one.
    ///
    /// # Errors
    /// refused input ([`LauncherError`], exit 2) naming the field or flag.
    pub fn claims(&self, vmi: &mut VirtualMachineInstance) -> Result<Claims, LauncherError> {
        match self {
            PodSource::Kubelet => Ok(Claims::default()),
            PodSource::Standalone {
                args,
                default_interface,
                ..
            } => standalone::claims(vmi, args, *default_interface),
        }
    }

    /// Second step, once the spec is known to convert: the pod itself.
    /// Standalone, every host path a flag gives is checked here, before
    /// anything is mounted.
    ///
    /// # Errors
    /// refused input ([`LauncherError`], exit 2) naming the field or flag.
    pub fn prepare(
        &self,
        vmi: &VirtualMachineInstance,
        claims: Claims,
        flags: &LauncherFlags,
        host: &HostFacts,
    ) -> Result<Pod, LauncherError> {
        match self {
            PodSource::Kubelet => {
                check_kubelet_pod(flags)?;
                Ok(Pod::kubelet(flags.image_volume))
            }
            PodSource::Standalone {
                args,
                default_interface,
                ..
            } => standalone::prepare(vmi, args, claims, flags, host, *default_interface),
        }
    }
}

/// The claims of a standalone run (`--pvc`), checked: kubelet mounts a
/// pod's own.
#[derive(Clone, Debug, Default)]
pub struct Claims(pub Vec<standalone::claims::Claim>);

/// A prepared pod: what the launcher finds where, and what it mounts into
/// its private runtime so that KubeVirt's paths hold it.
#[derive(Clone, Debug)]
pub struct Pod {
    /// Who made it.
    pub mode: Mode,
    /// Where config volume files and cloud-init secrets are.
    pub config_sources: ConfigSources,
    /// `Some`: only these volumes are block claims (nodes in the
    /// launcher's private `/dev`); `None` (a pod): any device node named
    /// after a claim's volume in `/dev` is that claim.
    pub block_volumes: Option<BTreeSet<String>>,
    /// Bind mounts into the private runtime, in order (empty in a pod).
    pub mounts: Vec<PodMount>,
    /// How the pod's network comes about.
    pub network: PodNetworkSetup,
    /// libvirt's `host_uuid` (libvirtd.conf / virtqemud.conf). `None` in
    /// a pod: as in KubeVirt, libvirt takes the node's (SMBIOS) UUID, which
    /// differs between the nodes a migration goes between. Standalone
    /// launchers share one host, and libvirt refuses to migrate a domain
    /// to a daemon with its own host UUID ("Attempt to migrate guest to
    /// the same host"): each gets a random one.
    pub host_uuid: Option<String>,
    /// `Some` with `--image-volume`: where the image volumes of the
    /// container disks and the kernel boot image are mounted (KubeVirt's
    /// `/var/run/kubevirt-image-volume/disk_<i>`,
    /// `/var/run/kubevirt-kernel-boot`); every sync links the files the
    /// domain uses to them ([`crate::sync::VmiSync`]). `None`: the
    /// container disks are where virt-handler (or the stand-in) mounts them.
    pub image_volumes: Option<ImageVolumeRoots>,
}

impl Pod {
    /// A pod kubelet and virt-handler made: everything is where KubeVirt
    /// puts it; `image_volume`: virt-controller mounted the container
    /// disks as image volumes (`--image-volume`).
    pub fn kubelet(image_volume: bool) -> Pod {
        Pod {
            mode: Mode::Pod,
            config_sources: ConfigSources::Pod,
            block_volumes: None,
            mounts: Vec::new(),
            network: PodNetworkSetup::Given,
            host_uuid: None,
            image_volumes: image_volume.then(ImageVolumeRoots::default),
        }
    }
}

/// What the start-up sequence does itself before the launcher proper runs,
/// by who made the pod and who the launcher runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimePlan {
    /// A state directory, a mount namespace of its own and the bind mounts
    /// of libvirt's directories and the pod's (needs root).
    pub private_runtime: bool,
    /// Become this user (with the compute container's capabilities) once
    /// the private runtime is set up: the standalone stand-in's switch to
    /// the non-root launcher proper.
    pub enter_as: Option<RuntimeUser>,
}

impl Pod {
    /// The plan for `user`, where `may_mount` says whether this process may
    /// make a mount namespace (`CAP_SYS_ADMIN` effective, see
    /// [`may_mount`]):
    /// - standalone as root: the private runtime (it keeps the host's
    ///   libvirt directories untouched);
    /// - kubelet's pod as root: the private runtime only where it may
    ///   mount. KubeVirt v1.6.6 renders a root compute container with the
    ///   runtime's default capabilities plus `NET_BIND_SERVICE` and
    ///   `SYS_NICE` (`rendercontainer.go`), no `SYS_ADMIN`: there the
    ///   container's own file system is the runtime, written in place as
    ///   KubeVirt's launcher writes it. With `SYS_ADMIN` (our e2e pods on a
    ///   shared host) the launcher keeps its private runtime;
    /// - kubelet's pod non-root: none (it could not; the pod already holds
    ///   its emptyDirs at KubeVirt's paths);
    /// - standalone non-root: the stand-in makes it as root and then
    ///   becomes uid 107.
    pub fn runtime_plan(&self, user: RuntimeUser, may_mount: bool) -> RuntimePlan {
        match (self.mode, user) {
            (Mode::Standalone, RuntimeUser::Root) => RuntimePlan {
                private_runtime: true,
                enter_as: None,
            },
            (Mode::Pod, RuntimeUser::Root) => RuntimePlan {
                private_runtime: may_mount,
                enter_as: None,
            },
            (Mode::Pod, RuntimeUser::NonRoot) => RuntimePlan {
                private_runtime: false,
                enter_as: None,
            },
            (Mode::Standalone, RuntimeUser::NonRoot) => RuntimePlan {
                private_runtime: true,
                enter_as: Some(RuntimeUser::NonRoot),
            },
        }
    }
}

/// `CAP_SYS_ADMIN` (capability 21) is in this process's effective set,
/// read from the `CapEff:` line of `/proc/self/status` (one hexadecimal
/// mask, proc(5); no capability crate is needed for one bit). `false`
/// when the line cannot be read.
pub fn may_mount() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|mask| mask & (1 << CAP_SYS_ADMIN) != 0)
}

/// The pod volumes pod mode writes in place, as kubelet mounts them into
/// the compute container (virt-controller's emptyDirs `private`, `public`
/// and `ephemeral-disks`, `rendervolumes.go` v1.6.6): the flag that moves
/// each (or its path) and the directory.
fn pod_volume_dirs(flags: &LauncherFlags) -> [(&'static str, PathBuf); 3] {
    [
        (
            "/var/run/kubevirt-private",
            PathBuf::from("/var/run/kubevirt-private"),
        ),
        (
            "--kubevirt-share-dir",
            PathBuf::from(&flags.kubevirt_share_dir),
        ),
        (
            "--ephemeral-disk-dir",
            PathBuf::from(&flags.ephemeral_disk_dir),
        ),
    ]
}

/// Pod mode only in a pod. KubeVirt's launcher assumes its pod and writes
/// its sockets, overlays and private files at KubeVirt's paths in place;
/// started by hand on a host it would write them into the host's `/run`.
/// So pod mode refuses to start (exit 2, before anything is written) when
/// - it runs in the host's mount namespace: the one of `/proc/1` while
///   `/proc/1` is the host's init (its PID namespace is the initial one),
///   or
/// - one of the pod's volume directories ([`pod_volume_dirs`]) is not a
///   mount point: kubelet mounts each as an emptyDir, the e2e stand-ins
///   (`tests/podbox/pod-in-a-box`, the harness's pod) mount them too.
///
/// Outside a pod `virt-launcher run` is the way (everything in its state
/// directory). KubeVirt's launcher has no such check (v1.6.6
/// `cmd/virt-launcher/virt-launcher.go` assumes the pod).
///
/// # Errors
/// Input error naming the directory's flag (or path).
pub fn check_kubelet_pod(flags: &LauncherFlags) -> Result<(), LauncherError> {
    if in_host_mount_namespace() {
        return Err(LauncherError::input_at(
            "pod mode",
            "the launcher runs in the host's mount namespace, not in a pod: pod mode writes in the pod's volumes at KubeVirt's paths (/var/run/kubevirt, ...) and would write into the host's; outside a pod use `virt-launcher run VMI.yaml`",
        ));
    }
    check_mount_points(&pod_volume_dirs(flags))
}

/// Whether this process runs in the host's mount namespace: see
/// [`host_mount_namespace`], from `/proc/self/ns/mnt` and `/proc/1/ns/*`
/// (which a sandboxed or non-root process may not read).
fn in_host_mount_namespace() -> bool {
    use std::os::unix::fs::MetadataExt;
    let ns = |p: &str| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    ns("/proc/self/ns/mnt").is_some_and(|mine| {
        host_mount_namespace(
            mine,
            ns("/proc/1/ns/pid").map(|(_, ino)| ino),
            ns("/proc/1/ns/mnt"),
        )
    })
}

/// Whether the mount namespace `mine` (nsfs device and inode) is the
/// host's: newer kernels give the initial mount namespace the fixed inode
/// number `PROC_MNT_INIT_INO` (0xEFFFFFF8, `include/linux/proc_ns.h`),
/// older ones number every mount namespace from `PROC_DYNAMIC_FIRST`
/// (0xF0000000), so that number is never another's; else it is the one
/// of `/proc/1` (`init_mnt`) while `/proc/1` is the host's init, its PID
/// namespace the initial one (`init_pid_ino` = `PROC_PID_INIT_INO`,
/// 0xEFFFFFFC). `false` when it cannot tell (`/proc/1` unreadable on an
/// older kernel; the mount-point check still applies).
fn host_mount_namespace(
    mine: (u64, u64),
    init_pid_ino: Option<u64>,
    init_mnt: Option<(u64, u64)>,
) -> bool {
    const PROC_MNT_INIT_INO: u64 = 0xEFFF_FFF8;
    const PROC_PID_INIT_INO: u64 = 0xEFFF_FFFC;
    mine.1 == PROC_MNT_INIT_INO
        || (init_pid_ino == Some(PROC_PID_INIT_INO) && init_mnt == Some(mine))
}

/// Each directory of `dirs` (named by its flag) is a mount point: the root
/// of a mount (`STATX_ATTR_MOUNT_ROOT`, Linux 5.8; before it, another
/// device than its parent's).
///
/// # Errors
/// Input error naming the first that is not (or cannot be examined).
fn check_mount_points(dirs: &[(&'static str, PathBuf)]) -> Result<(), LauncherError> {
    use rustix::fs::{statx, AtFlags, StatxAttributes, StatxFlags, CWD};
    for (flag, dir) in dirs {
        let refuse = |why: String| {
            LauncherError::input_at(
                *flag,
                format!("{} {why}: pod mode writes in the pod's volumes, which kubelet mounts there; outside a pod use `virt-launcher run VMI.yaml`", dir.display()),
            )
        };
        let st = statx(CWD, dir, AtFlags::empty(), StatxFlags::BASIC_STATS)
            .map_err(|e| refuse(format!("cannot be examined ({e})")))?;
        let root = if st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
            st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)
        } else {
            let parent = dir.parent().unwrap_or(dir);
            let p = statx(CWD, parent, AtFlags::empty(), StatxFlags::BASIC_STATS)
                .map_err(|e| refuse(format!("cannot be examined ({e})")))?;
            (p.stx_dev_major, p.stx_dev_minor) != (st.stx_dev_major, st.stx_dev_minor)
        };
        if !root {
            return Err(refuse("is not a mount point".into()));
        }
    }
    Ok(())
}

/// How the pod's network comes about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodNetworkSetup {
    /// virt-handler's phase 1 made it (or there is none).
    Given,
    /// The standalone stand-in builds it (`--setup-pod-network`, or
    /// KubeVirt's default interface) in a network namespace of its own.
    StandIn {
        /// It is for KubeVirt's default interface (said in the log).
        default_interface: bool,
        /// The stand-in node's index (`--pod-subnet`): the pod's
        /// addresses ([`network::phase1::PodAddrs::primary_on`]).
        node: u8,
    },
}

impl PodNetworkSetup {
    /// Builds the pod's network when the stand-in plays it (see
    /// [`standalone::network::setup_pod_network`]; must be called while
    /// the launcher is single-threaded). Returns phase 1's DHCP caches of
    /// bridge bindings, by pod interface name, to be written into the
    /// private directory once it is mounted. The taps are made for `user`.
    ///
    /// # Errors
    /// [`LauncherError`] when the network cannot be built.
    pub fn build(
        self,
        vmi: &VirtualMachineInstance,
        user: RuntimeUser,
    ) -> Result<Vec<(String, network::cache::DhcpConfigCache)>, LauncherError> {
        match self {
            PodNetworkSetup::Given => Ok(Vec::new()),
            PodNetworkSetup::StandIn {
                default_interface,
                node,
            } => {
                if default_interface {
                    tracing::info!(
                        "the VMI names no network: KubeVirt's default interface (bridge binding on the pod network) gets a pod network stand-in, as with --setup-pod-network (autoattachPodInterface: false runs it without a NIC)"
                    );
                }
                standalone::network::setup_pod_network(
                    vmi,
                    user.is_non_root().then(|| user.id()),
                    node,
                )
            }
        }
    }
}

/// One bind mount of a prepared pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodMount {
    /// A directory of the launcher's state directory (created) over
    /// `target`.
    State {
        /// Below the state directory.
        rel: &'static str,
        /// Where it appears.
        target: PathBuf,
    },
    /// Host directory `source` (created when missing) over `target`,
    /// writable: a hostDisk's directory, a backend storage directory.
    WritableDir {
        /// On the host.
        source: PathBuf,
        /// Where it appears.
        target: PathBuf,
    },
    /// Host directory `source`, which must exist (a claim's directory is
    /// never created), over `target`.
    Dir {
        /// On the host.
        source: PathBuf,
        /// Where it appears.
        target: PathBuf,
        /// Mounted read-only.
        read_only: bool,
    },
    /// Host file `source` over `target`.
    File {
        /// On the host.
        source: PathBuf,
        /// Where it appears.
        target: PathBuf,
        /// Mounted read-only.
        read_only: bool,
    },
    /// A file the stand-in writes into the state directory (as `rel`) and
    /// mounts read-only over `target`: the launcher image's `/etc/passwd`
    /// and `/etc/group` entries for uid/gid 107 when the host has none.
    StateFile {
        /// Below the state directory.
        rel: &'static str,
        /// Its contents.
        contents: String,
        /// Where it appears.
        target: PathBuf,
    },
    /// A private `/dev` built in the state directory's `dev`, with block
    /// devices as `/dev/<volume>` nodes (kubelet's block claims) and, for
    /// a non-root launcher, the device-plugin devices made for its user.
    Devices {
        /// (volume, host block device).
        claims: Vec<(String, PathBuf)>,
        /// The non-root launcher's uid/gid.
        owner: Option<u32>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_mount_namespace() {
        let init_mnt = (4, 0xEFFF_FFF8);
        assert!(host_mount_namespace(init_mnt, None, None));
        // An older kernel: the namespace of the host's init.
        let old = (4, 0xF000_0010);
        assert!(host_mount_namespace(old, Some(0xEFFF_FFFC), Some(old)));
        // A pod: its own namespace, or /proc/1 is the pod's own PID 1.
        assert!(!host_mount_namespace(
            old,
            Some(0xEFFF_FFFC),
            Some((4, 0xF000_0001))
        ));
        assert!(!host_mount_namespace(old, Some(0xF000_0002), Some(old)));
        assert!(!host_mount_namespace(old, None, None));
    }

    #[test]
    fn pod_volumes_must_be_mount_points() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_mount_points(&[
            ("/proc", PathBuf::from("/proc")),
            ("--kubevirt-share-dir", dir.path().to_path_buf()),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!(
                "--kubevirt-share-dir: {} is not a mount point: pod mode writes in the pod's volumes",
                dir.path().display()
            )),
            "{e}"
        );
        let e = check_mount_points(&[("--ephemeral-disk-dir", dir.path().join("absent"))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("absent cannot be examined"), "{e}");
        check_mount_points(&[
            ("/proc", PathBuf::from("/proc")),
            ("/sys", PathBuf::from("/sys")),
        ])
        .unwrap();
    }

    #[test]
    fn the_runtime_plan_is_decided_by_mode_user_and_mount_capability() {
        let mut pod = Pod::kubelet(false);
        let root = pod.runtime_plan(RuntimeUser::Root, true);
        assert!(root.private_runtime && root.enter_as.is_none());
        // KubeVirt's root compute container has no CAP_SYS_ADMIN: the
        // container's own file system is the runtime.
        let kubevirt_root = pod.runtime_plan(RuntimeUser::Root, false);
        assert!(!kubevirt_root.private_runtime && kubevirt_root.enter_as.is_none());
        for may_mount in [true, false] {
            let nr = pod.runtime_plan(RuntimeUser::NonRoot, may_mount);
            assert!(
                !nr.private_runtime && nr.enter_as.is_none(),
                "the pod made it"
            );
        }
        pod.mode = Mode::Standalone;
        assert_eq!(pod.runtime_plan(RuntimeUser::Root, true), root);
        let nr = pod.runtime_plan(RuntimeUser::NonRoot, true);
        assert!(nr.private_runtime);
        assert_eq!(nr.enter_as, Some(RuntimeUser::NonRoot));
    }

    #[test]
    fn root_in_tests_may_mount() {
        // The unit tests run as root with every capability (CI); the
        // bit is read from this process's own status.
        assert_eq!(may_mount(), nix::unistd::geteuid().is_root());
    }
}
