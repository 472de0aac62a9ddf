//! The VMI as it arrives, defaulted and validated once per arrival: from
//! a manifest ([`read_input`], [`load`]: `run`, `STANDALONE_VMI`), from
//! the flags alone ([`identity_from_flags`]: pod mode before virt-handler
//! syncs), or from virt-handler's SyncVirtualMachine ([`admit_synced`]).

use std::io::Read;
use std::path::Path;

use api::{Arch, VirtualMachineInstance};

use crate::error::LauncherError;
use crate::flags::LauncherFlags;

/// Largest manifest accepted (a VMI is a few KiB).
const MAX_INPUT: u64 = 16 << 20;

/// Reads a manifest from `path` (`-`: standard input), at most 16 MiB.
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) naming the file: unreadable, not a regular
/// file, or larger than 16 MiB.
pub fn read_input(path: &Path) -> Result<Vec<u8>, LauncherError> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT + 1)
            .read_to_end(&mut buf)
            .map_err(|e| LauncherError::input(format!("reading standard input: {e}")))?;
        if buf.len() as u64 > MAX_INPUT {
            return Err(LauncherError::input("standard input: larger than 16 MiB"));
        }
        return Ok(buf);
    }
    let err = |e: std::io::Error| LauncherError::input(format!("{}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(err)?;
    if !meta.is_file() {
        return Err(LauncherError::input(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT + 1).read_to_end(&mut buf))
        .map_err(err)?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(LauncherError::input(format!(
            "{}: larger than 16 MiB",
            path.display()
        )));
    }
    Ok(buf)
}

/// Reads, defaults and validates the VMI (once, as [`api::load_vmi`]
/// does), then applies the identity flags (`--uid`; `--name` and
/// `--namespace` must match) and checks the identity they give.
/// `cluster`: standalone (`run`), also the defaults KubeVirt's cluster
/// would have applied ([`api::cluster`]); `None` in a pod, where the VMI
/// arrives defaulted. Returns what those added.
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) naming the field.
pub fn load(
    bytes: &[u8],
    flags: &LauncherFlags,
    arch: Arch,
    cluster: Option<&api::cluster::ClusterDefaults>,
) -> Result<(VirtualMachineInstance, api::cluster::Applied), LauncherError> {
    let input = LauncherError::from;
    let (mut vmi, applied) = match cluster {
        Some(c) => api::load_standalone(bytes, arch, c).map_err(input)?,
        None => (
            api::load_vmi(bytes, arch).map_err(input)?,
            api::cluster::Applied::default(),
        ),
    };
    if !flags.uid.is_empty() {
        vmi.metadata.uid = Some(flags.uid.clone());
    }
    // Standalone plays virt-api: without the Root feature gate it marks
    // every VMI non-root (`markAsNonroot`); `--run-as-nonroot` is that
    // cluster.
    if cluster.is_some() && flags.run_as_nonroot {
        vmi.mark_as_non_root();
    }
    if !flags.name.is_empty() && flags.name != vmi.metadata.name {
        return Err(LauncherError::input(format!(
            "--name {:?} does not match metadata.name {:?}",
            flags.name, vmi.metadata.name
        )));
    }
    if !flags.namespace.is_empty() && flags.namespace != vmi.namespace() {
        return Err(LauncherError::input(format!(
            "--namespace {:?} does not match metadata.namespace {:?}",
            flags.namespace,
            vmi.namespace()
        )));
    }
    api::defaults::fill_missing_uid(&mut vmi);
    // The manifest was validated as loaded; `--uid` is the only value
    // changed since (a derived UID is valid by construction).
    if let Some(e) = api::validate::identity(&vmi).into_iter().next() {
        return Err(e.into());
    }
    Ok((vmi, applied))
}

/// The VMI identity from `--name`, `--namespace` and `--uid` (pod mode,
/// where the full VMI arrives later from virt-handler).
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) when a flag is missing or invalid.
pub fn identity_from_flags(flags: &LauncherFlags) -> Result<VirtualMachineInstance, LauncherError> {
    for (flag, v) in [
        ("--name", &flags.name),
        ("--namespace", &flags.namespace),
        ("--uid", &flags.uid),
    ] {
        if v.is_empty() {
            return Err(LauncherError::input(format!(
                "{flag} is required when no VMI is given (set STANDALONE_VMI, or use `virt-launcher run VMI.yaml`)"
            )));
        }
    }
    let mut vmi = VirtualMachineInstance::default();
    vmi.metadata.name.clone_from(&flags.name);
    vmi.metadata.namespace = Some(flags.namespace.clone());
    vmi.metadata.uid = Some(flags.uid.clone());
    // The identity only: a name libvirt cannot hold is refused by
    // SyncVirtualMachine, where virt-handler reports it on the VMI.
    if let Some(e) = api::validate::identity(&vmi).into_iter().next() {
        return Err(e.into());
    }
    Ok(vmi)
}

/// A VMI virt-handler sent with SyncVirtualMachine: defaulted by the
/// cluster already (KubeVirt's defaults are applied again for this host's
/// architecture, idempotently) and validated here, the one check it gets.
///
/// # Errors
/// The first validation error, naming the field.
pub fn admit_synced(
    vmi: &VirtualMachineInstance,
) -> Result<VirtualMachineInstance, api::FieldError> {
    let mut vmi = vmi.clone();
    let arch = Arch::host().map_err(|e| api::FieldError::new("", e.to_string()))?;
    api::defaults::apply(&mut vmi, arch);
    match api::validate::validate(&vmi).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(vmi),
    }
}
