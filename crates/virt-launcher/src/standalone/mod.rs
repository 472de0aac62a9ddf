//! The standalone stand-in for the pod: everything `virt-launcher run`
//! does that in a cluster kubelet, virt-handler and CSI do before the
//! launcher starts, kept behind this one boundary. It turns `run`'s flags
//! into a [`Pod`] value (what is where, what to mount), so the start-up
//! sequence runs as in a pod:
//!
//! - [`given`]: the one check of a host path the user gives a guest
//!   (`--pvc`, `ctl addvolume --image`);
//! - [`mod@claims`]: `--pvc` claims and the status virt-handler would report
//!   for them;
//! - [`volumes`]: container-disk images (`--container-disk`), hostDisk
//!   directories, config volumes and cloud-init secrets
//!   (`--config-volume`), access credentials (`--access-credential`),
//!   backend storage (`--backend-storage`);
//! - [`container`]: for `--run-as-nonroot`, the compute container's
//!   credentials (uid/gid 107, only `NET_BIND_SERVICE`) for the launcher
//!   proper, once the rest is set up;
//! - [`migration_proxy`]: `virt-launcher migration-proxy`, virt-handler's
//!   migration proxies between two launchers on one host;
//! - [`network`]: the pod network (`--setup-pod-network`, or KubeVirt's
//!   default interface): phase 1 of virt-handler in a network namespace of
//!   the launcher's own, and `virt-launcher pod-network-phase1`.
//!
//! The SR-IOV VFs (`--network-info`) are read where a pod's are:
//! [`crate::podnet`]. The private mount and PID namespaces that give a
//! standalone run a pod's isolation are [`crate::isolation`] and
//! [`crate::pidns`].

pub mod claims;
pub mod container;
pub mod given;
pub mod hotplug;
pub mod migration_proxy;
pub mod network;
pub mod nics;
pub mod volumes;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use api::VirtualMachineInstance;
use clap::Args;
use converter::HostFacts;
use storage::ConfigSources;

use crate::error::LauncherError;
use crate::flags::LauncherFlags;
use crate::pod::{Claims, Mode, Pod, PodMount, PodNetworkSetup};
use crate::startup::PRIVATE_DIR;
use claims::{ClaimSource, PvcArg};

/// `run`'s flags for what a pod would give the launcher.
#[derive(Args, Clone, Debug, Default)]
pub struct StandaloneArgs {
    /// Image file for a containerDisk volume, as VOLUME=FILE (repeatable).
    #[arg(long = "container-disk", value_parser = parse_container_disk)]
    pub container_disks: Vec<(String, PathBuf)>,
    /// Directory holding the files of a configMap, secret, downwardAPI or
    /// serviceAccount volume, or the secret of a cloud-init volume's
    /// userDataSecretRef / networkDataSecretRef, as VOLUME=DIR (repeatable).
    #[arg(long = "config-volume", value_parser = parse_config_volume)]
    pub config_volumes: Vec<(String, PathBuf)>,
    /// The claim of a persistentVolumeClaim, dataVolume or ephemeral
    /// volume, as VOLUME=PATH[,capacity=QUANTITY][,filesystem-overhead=FRACTION][,preallocated]
    /// (repeatable). PATH is a raw image file (shown as
    /// `vmi-disks/<vol>/disk.img`), a directory (a filesystem-mode claim,
    /// shown as `vmi-disks/<vol>/`; its disk.img is created sparse when
    /// absent) or a block device (a block-mode claim, shown as
    /// `/dev/<vol>`). capacity is the claim's size (its status capacity
    /// and request), filesystem-overhead the fraction kept free (for
    /// --expand-disks), preallocated drops discard (KubeVirt's preallocated
    /// volumes). Read-only for ephemeral volumes and read-only claims.
    #[arg(long = "pvc", value_parser = PvcArg::parse)]
    pub pvcs: Vec<PvcArg>,
    /// KubeVirt's backend storage (the VM's `persistent-state-for-<vm>`
    /// claim): a directory whose `nvram/` and `swtpm/` are mounted where
    /// libvirt keeps EFI variables and TPM state, so VMIs with
    /// `efi.persistent` or `tpm.persistent` keep them across runs.
    #[arg(long = "backend-storage")]
    pub backend_storage: Option<PathBuf>,
    /// Directory of the Secret of an access credential, as SECRET=DIR
    /// (repeatable): for sshPublicKey its files are public keys (written
    /// into the cloud-init meta-data, or by the guest agent into the
    /// users' authorized_keys), for userPassword each file is named after
    /// a guest user and holds the password. With the guest agent, a change
    /// of the files while the VM runs reaches the guest.
    #[arg(long = "access-credential", value_parser = parse_config_volume)]
    pub access_credentials: Vec<(String, PathBuf)>,
    /// Play the pod: a fresh network namespace where a stand-in for
    /// virt-handler's network phase 1 builds the masquerade bridge, tap
    /// and NAT; the VM runs attached inside it, with the launcher's DHCP.
    #[arg(long)]
    pub setup_pod_network: bool,
    /// With `--setup-pod-network`: the pod is on stand-in node N, whose
    /// pod subnets are 10.244.N.0/24 and fd00:10:244:N::/64 (the pod
    /// `.5`, the node's end of the pod link `.1`); launchers playing pods
    /// of different nodes, such as a migration's source and target, take
    /// different ones.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        requires = "setup_pod_network"
    )]
    pub pod_subnet: u8,
    /// KubeVirt's network-info downward API file giving the host PCI
    /// address of each SR-IOV interface's VF (see `convert --help`). The
    /// VF must exist on this host, bound to vfio-pci: it is passed through
    /// with managed='no'.
    #[arg(long)]
    pub network_info: Option<PathBuf>,
    /// The hook sidecars' socket directory, as KubeVirt's pod has it at
    /// `/var/run/kubevirt-hooks` (one subdirectory per sidecar, its
    /// socket inside): mounted there, read-only, for `--hook-sidecars N`.
    #[arg(long)]
    pub hook_sidecar_dir: Option<PathBuf>,
}

fn parse_container_disk(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((v, f)) if !v.is_empty() && !f.is_empty() => Ok((v.to_owned(), PathBuf::from(f))),
        _ => Err(format!("{s:?} is not VOLUME=FILE")),
    }
}

fn parse_config_volume(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((v, d)) if !v.is_empty() && !d.is_empty() => Ok((v.to_owned(), PathBuf::from(d))),
        _ => Err(format!("{s:?} is not VOLUME=DIR")),
    }
}

/// Standalone mode has no pod network unless `--setup-pod-network` makes
/// one: a VMI with interfaces is refused rather than run without network
/// (SR-IOV interfaces excepted: they are host devices, see
/// [`crate::podnet::SriovSource`]).
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) naming the first interface and the flag.
pub fn refuse_networks_without_pod(vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
    match vmi.live_pod_interfaces().next() {
        Some((i, _)) => Err(LauncherError::input_at(
            format!("spec.domain.devices.interfaces[{i}]"),
            "standalone mode has no pod network; pass --setup-pod-network to create one",
        )),
        None => Ok(()),
    }
}

/// [`crate::pod::PodSource::claims`] standalone: a VMI whose interfaces
/// need a pod network nobody plays is refused; the `--pvc` claims are
/// checked, and their facts written into the VMI's status as virt-handler
/// reports a claim's.
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) naming the field or flag.
pub fn claims(
    vmi: &mut VirtualMachineInstance,
    args: &StandaloneArgs,
    default_interface: bool,
) -> Result<Claims, LauncherError> {
    if !(args.setup_pod_network || default_interface) {
        refuse_networks_without_pod(vmi)?;
    }
    let found = claims::pvc_claims(vmi, args)?;
    if !args.pvcs.is_empty() {
        *vmi = claims::with_claim_status(vmi, &args.pvcs, &found);
    }
    Ok(Claims(found))
}

/// `--hook-sidecar-dir`: a directory (not a symbolic link), needed for
/// `--hook-sidecars N` > 0 (the host's `/var/run/kubevirt-hooks` is never
/// taken for it), useless without.
///
/// # Errors
/// refused input naming the flag.
fn hook_sidecar_dir(
    args: &StandaloneArgs,
    flags: &LauncherFlags,
) -> Result<Option<PathBuf>, LauncherError> {
    const FLAG: &str = "--hook-sidecar-dir";
    let Some(dir) = &args.hook_sidecar_dir else {
        if flags.hook_sidecars > 0 {
            return Err(LauncherError::input_at(
                "--hook-sidecars",
                format!("{} hook sidecars wanted, but standalone mode has no hook sidecar directory: pass {FLAG} DIR (one subdirectory per sidecar, its socket inside)", flags.hook_sidecars),
            ));
        }
        return Ok(None);
    };
    if flags.hook_sidecars == 0 {
        return Err(LauncherError::input_at(
            FLAG,
            "given without --hook-sidecars N (how many sidecars to wait for)",
        ));
    }
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(Some(dir.clone())),
        Ok(_) => Err(LauncherError::input_at(
            FLAG,
            format!(
                "{} is not a directory (a symbolic link is not followed)",
                dir.display()
            ),
        )),
        Err(e) => Err(LauncherError::input_at(
            FLAG,
            format!("{}: {e}", dir.display()),
        )),
    }
}

/// [`crate::pod::PodSource::prepare`] standalone: every host path the
/// flags give is checked, and the mounts that show each where KubeVirt's
/// pod has it are listed, in the order they are made.
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) naming the field or flag.
pub fn prepare(
    vmi: &VirtualMachineInstance,
    args: &StandaloneArgs,
    claims: Claims,
    flags: &LauncherFlags,
    host: &HostFacts,
    default_interface: bool,
) -> Result<Pod, LauncherError> {
    let backend = volumes::backend_storage_dir(vmi, args)?;
    let hook_dir = hook_sidecar_dir(args, flags)?;
    let images = volumes::container_disk_images(vmi, args)?;
    let host_disks = volumes::host_disk_dirs(vmi)?;
    let config_sources = ConfigSources::Standalone {
        volumes: volumes::config_volume_dirs(vmi, args)?,
        secrets: volumes::access_credential_dirs(vmi, args)?,
    };
    // The private directory, the share and the disk directories are the
    // state directory's: in a pod they are the pod's own, with kubelet's
    // and virt-handler's mounts below them.
    let mut mounts = vec![
        PodMount::State {
            rel: "private",
            target: PathBuf::from(PRIVATE_DIR),
        },
        PodMount::State {
            rel: "share",
            target: PathBuf::from(&flags.kubevirt_share_dir),
        },
        PodMount::State {
            rel: "ephemeral",
            target: PathBuf::from(&flags.ephemeral_disk_dir),
        },
    ];
    if !Path::new(&flags.container_disk_dir).starts_with(&flags.kubevirt_share_dir) {
        mounts.push(PodMount::State {
            rel: "container-disks",
            target: PathBuf::from(&flags.container_disk_dir),
        });
    }
    if let Some(dir) = backend {
        // After /var/lib/libvirt's bind: these sit on top of it.
        for (sub, target) in
            crate::user::RuntimeUser::from_flag(flags.run_as_nonroot).backend_storage_mounts()
        {
            mounts.push(PodMount::WritableDir {
                source: dir.join(sub),
                target: PathBuf::from(target),
            });
        }
    }
    if let Some(source) = hook_dir {
        mounts.push(PodMount::Dir {
            source,
            target: PathBuf::from(hooks::HOOK_SOCKETS_DIR),
            read_only: true,
        });
    }
    let ctx = converter::ConvertContext::from_parts(
        host,
        &converter::ClusterOptions::default(),
        converter::Prepared::default(),
        std::collections::BTreeMap::new(),
    );
    for (index, source) in images {
        mounts.push(PodMount::File {
            source,
            target: PathBuf::from(ctx.paths.container_disk_image(index)),
            read_only: true,
        });
    }
    for (source, target) in host_disks {
        mounts.push(PodMount::WritableDir { source, target });
    }
    let mut block = Vec::new();
    for c in claims.0 {
        let dir = PathBuf::from(format!("{PRIVATE_DIR}/vmi-disks/{}", c.volume));
        match c.source {
            ClaimSource::File => mounts.push(PodMount::File {
                source: c.path,
                target: dir.join("disk.img"),
                read_only: c.read_only,
            }),
            ClaimSource::Dir => mounts.push(PodMount::Dir {
                source: c.path,
                target: dir,
                read_only: c.read_only,
            }),
            ClaimSource::Block => block.push((c.volume, c.path)),
        }
    }
    // Block-mode PVCs are device nodes in the pod's /dev. Standalone, only
    // the `--pvc` block claims are (nodes in the launcher's private /dev,
    // as kubelet gives a pod's): the host's devices are never handed out
    // by volume name, and the host's /dev is never written.
    let block_volumes: BTreeSet<String> = block.iter().map(|(v, _)| v.clone()).collect();
    // Non-root, the private /dev also gives 107 KubeVirt's device-plugin
    // devices (kvm, tun, vhost-net) and the block claims' nodes.
    let owner = flags.run_as_nonroot.then_some(crate::user::NON_ROOT_UID);
    if !block.is_empty() || owner.is_some() {
        mounts.push(PodMount::Devices {
            claims: block,
            owner,
        });
    }
    if flags.run_as_nonroot {
        container::check_access(&mounts, crate::user::NON_ROOT_UID)?;
        mounts.extend(container::identity_files()?);
    }
    let setup_network = args.setup_pod_network || default_interface;
    Ok(Pod {
        mode: Mode::Standalone,
        config_sources,
        block_volumes: Some(block_volumes),
        mounts,
        network: if setup_network {
            PodNetworkSetup::StandIn {
                default_interface,
                node: args.pod_subnet,
            }
        } else {
            PodNetworkSetup::Given
        },
        host_uuid: Some(random_host_uuid()?),
        image_volumes: None,
    })
}

/// A random UUID (version 4 form) for this launcher's libvirt daemon
/// (`host_uuid`, see [`Pod::host_uuid`]), from `/dev/urandom`.
///
/// # Errors
/// [`LauncherError`] when `/dev/urandom` cannot be read.
fn random_host_uuid() -> Result<String, LauncherError> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| LauncherError::runtime(format!("reading /dev/urandom: {e}")))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// Each standalone launcher's libvirt gets a host UUID of its own, in
    /// the form libvirt's `host_uuid` takes.
    #[test]
    fn host_uuids_differ() {
        let (a, b) = (random_host_uuid().unwrap(), random_host_uuid().unwrap());
        assert_ne!(a, b);
        for u in [&a, &b] {
            let parts: Vec<usize> = u.split('-').map(str::len).collect();
            assert_eq!(parts, [8, 4, 4, 4, 12], "{u}");
            assert!(u.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{u}");
            assert_eq!(&u[14..15], "4", "version 4: {u}");
        }
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: LauncherFlags,
    }

    fn vmi() -> VirtualMachineInstance {
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: s, namespace: e2e}\nspec:\n  domain:\n    memory: {guest: 64Mi}\n    devices:\n      disks:\n      - {name: containerdisk}\n      - {name: data}\n      - {name: cfg}\n  volumes:\n  - {name: containerdisk, containerDisk: {image: x}}\n  - {name: data, persistentVolumeClaim: {claimName: c, readOnly: true}}\n  - {name: cfg, configMap: {name: app}}\n";
        let mut v = api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap();
        api::defaults::fill_missing_uid(&mut v);
        v
    }

    /// The stand-in checks every flag's path, writes the claim's status as
    /// virt-handler would, and lists the mounts that show each file where
    /// KubeVirt's pod has it, in order, without mounting anything.
    #[test]
    fn the_prepared_pod_says_what_is_mounted_where() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("disk.img");
        let claim = dir.path().join("claim.img");
        let cfg = dir.path().join("cfg");
        std::fs::write(&image, b"x").unwrap();
        std::fs::write(&claim, b"y").unwrap();
        std::fs::create_dir(&cfg).unwrap();
        let args = StandaloneArgs {
            container_disks: vec![("containerdisk".into(), image.clone())],
            config_volumes: vec![("cfg".into(), cfg.clone())],
            pvcs: vec![PvcArg::parse(&format!("data={},capacity=64Mi", claim.display())).unwrap()],
            ..StandaloneArgs::default()
        };
        let flags = Cli::parse_from(["virt-launcher"]).flags;
        let host = converter::HostFacts::new(api::Arch::Amd64, converter::VirtType::Qemu);
        let mut v = vmi();
        let found = claims(&mut v, &args, false).unwrap();
        let info = storage::pvc::info(&v, "data").unwrap().unwrap();
        assert_eq!(info.capacity, Some(64 << 20), "the claim's status");
        let pod = prepare(&v, &args, found, &flags, &host, false).unwrap();
        assert_eq!(pod.mode, Mode::Standalone);
        assert_eq!(pod.network, PodNetworkSetup::Given);
        assert_eq!(pod.block_volumes, Some(BTreeSet::new()));
        let ConfigSources::Standalone { volumes, secrets } = &pod.config_sources else {
            panic!("{:?}", pod.config_sources);
        };
        assert_eq!(volumes["cfg"], cfg.canonicalize().unwrap());
        assert!(secrets.is_empty());
        let state = |rel: &'static str, target: &str| PodMount::State {
            rel,
            target: PathBuf::from(target),
        };
        assert_eq!(
            pod.mounts,
            [
                state("private", "/var/run/kubevirt-private"),
                state("share", "/var/run/kubevirt"),
                state("ephemeral", "/var/run/kubevirt-ephemeral-disks"),
                PodMount::File {
                    source: image.canonicalize().unwrap(),
                    target: PathBuf::from("/var/run/kubevirt/container-disks/disk_0.img"),
                    read_only: true,
                },
                PodMount::File {
                    source: claim.canonicalize().unwrap(),
                    target: PathBuf::from("/var/run/kubevirt-private/vmi-disks/data/disk.img"),
                    read_only: true,
                },
            ]
        );
    }

    #[test]
    fn a_vmi_that_needs_a_pod_network_nobody_plays_is_refused_by_field() {
        let doc = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: n}\nspec:\n  domain:\n    devices:\n      interfaces:\n      - {name: red, sriov: {}}\n      - {name: default, masquerade: {}}\n    resources: {requests: {memory: 64Mi}}\n  networks:\n  - {name: red, multus: {networkName: red}}\n  - {name: default, pod: {}}\n";
        let mut v = api::load_vmi(doc.as_bytes(), api::Arch::Amd64).unwrap();
        let e = claims(&mut v, &StandaloneArgs::default(), false).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("spec.domain.devices.interfaces[1]")
        );
        assert_eq!(e.exit_code(), 2);
        assert!(e.message.contains("--setup-pod-network"), "{e}");
        // With the stand-in playing it (KubeVirt's default interface too).
        claims(&mut v, &StandaloneArgs::default(), true).unwrap();
    }
}
