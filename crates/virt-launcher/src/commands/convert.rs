//! `virt-launcher convert`: the domain XML of a VMI, as `run` would define it.

use std::path::PathBuf;

use api::cluster::{ClusterDefaults, VmRolloutStrategy};
use api::Arch;
use clap::Args;
use converter::{ClusterOptions, ConvertContext};

use crate::error::LauncherError;
use crate::host;

/// `convert`'s command line.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// VMI manifest, YAML or JSON (`-` for standard input).
    pub file: PathBuf,
    /// Target architecture: amd64, arm64, ppc64le, s390x (default: this host's).
    #[arg(long)]
    pub arch: Option<String>,
    /// Use TCG when /dev/kvm is absent.
    #[arg(long)]
    pub allow_emulation: bool,
    /// Always use TCG (`<domain type='qemu'>`).
    #[arg(long)]
    pub use_emulation: bool,
    /// Also check the XML with libvirt's schema (virt-xml-validate).
    #[arg(long)]
    pub validate: bool,
    /// KubeVirt's network-info downward API file (in a pod
    /// /etc/podinfo/network-info): the host PCI address of each SR-IOV
    /// interface's VF, `{"interfaces":[{"network":NAME,"deviceInfo":{"pci":{"pci-address":"dddd:bb:ss.f"}}}]}`.
    #[arg(long)]
    pub network_info: Option<PathBuf>,
    /// KubeVirt's VM rollout strategy of the cluster this VMI would run in
    /// (`vmRolloutStrategy`): LiveUpdate (KubeVirt's default) prepares CPU
    /// and memory hot-plug (maxSockets = 4 × sockets; maxGuest = 4 ×
    /// guest from 1 GiB), Stage does not.
    #[arg(long, default_value = "LiveUpdate", value_parser = super::parse_rollout_strategy)]
    pub vm_rollout_strategy: VmRolloutStrategy,
}

/// Prints the domain XML of the VMI in `args.file` (checked by libvirt's
/// schema with `--validate`).
///
/// # Errors
/// refused input ([`LauncherError`], exit 2) for input `run` would refuse too (naming the
/// field or flag); a runtime failure ([`LauncherError`], exit 1) for host failures.
pub fn convert(args: &ConvertArgs) -> Result<(), LauncherError> {
    let arch = match &args.arch {
        Some(a) => a.parse().map_err(|e: api::arch::UnknownArch| {
            LauncherError::input_at("--arch", e.to_string())
        })?,
        None => Arch::host().map_err(|e| LauncherError::runtime(e.to_string()))?,
    };
    let bytes = crate::input::read_input(&args.file)?;
    let cluster = ClusterDefaults {
        vm_rollout_strategy: args.vm_rollout_strategy,
    };
    let (mut vmi, _) = api::load_standalone(&bytes, arch, &cluster).map_err(LauncherError::from)?;
    api::defaults::fill_missing_uid(&mut vmi);
    let emulation = host::Emulation {
        allow: args.allow_emulation,
        always: args.use_emulation,
    };
    let facts = host::probe(arch, host::Target::AnyHost, emulation, None)?;
    // The claim facts virt-handler reports in the VMI's status: preallocated
    // claims get no discard (as in `run`), block-mode claims are the
    // device virt-handler would give the pod.
    let status = LauncherError::from;
    let cluster = ClusterOptions {
        volumes_discard_ignore: storage::pvc::preallocated_volumes(&vmi).map_err(status)?,
        ..ClusterOptions::default()
    };
    let prepared = converter::Prepared {
        block_volumes: storage::pvc::block_mode_volumes(&vmi).map_err(status)?,
        ..converter::Prepared::default()
    };
    let mut sriov = std::collections::BTreeMap::new();
    if let Some(file) = &args.network_info {
        let info = crate::standalone::network::read_network_info(file)?;
        sriov =
            network::sriov::host_addresses(&vmi, Some(&info), &file.display().to_string(), None)
                .map_err(|e| LauncherError::input(e.to_string()))?;
    }
    let ctx = ConvertContext::from_parts(&facts, &cluster, prepared, sriov);
    // Whatever the reason (the host included), `convert` refuses the input.
    let dom = converter::convert(&vmi, &ctx).map_err(|e| LauncherError::from(e).as_input())?;
    // The inline cloud-init data is refused here as `run` would refuse it.
    storage::cloudinit::check_inline(&vmi)?;
    // So are network values only phase 2 reads (CIDRs, dhcpOptions).
    network::phase2::check_spec(&vmi).map_err(|e| LauncherError::input(e.to_string()))?;
    let xml = dom
        .to_xml()
        .map_err(|e| LauncherError::runtime(e.to_string()))?;
    if args.validate {
        validate_xml(&xml)?;
    }
    logging::stdout_text(&xml)
        .map_err(|e| LauncherError::runtime(format!("cannot write to stdout: {e}")))
}

/// Runs libvirt's `virt-xml-validate FILE domain` and fails with its output.
/// FILE is written in a private directory `mkdtemp` made under `$TMPDIR`
/// (mode 0700, a name nobody can predict), created with `O_EXCL` and
/// `O_NOFOLLOW`: a link another user planted in `$TMPDIR` is never written
/// through (issue 19).
fn validate_xml(xml: &str) -> Result<(), LauncherError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let template = std::env::temp_dir().join("virt-launcher-validate-XXXXXX");
    let dir = nix::unistd::mkdtemp(&template)
        .map_err(|e| LauncherError::runtime(format!("mkdtemp {}: {e}", template.display())))?;
    let file = dir.join("domain.xml");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&file)
        .and_then(|mut f| f.write_all(xml.as_bytes()));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(LauncherError::runtime(format!("{}: {e}", file.display())));
    }
    let mut cmd = std::process::Command::new("virt-xml-validate");
    cmd.arg(&file).arg("domain");
    let res = process::run(cmd, std::time::Duration::from_secs(30), 1 << 20);
    let _ = std::fs::remove_dir_all(&dir);
    match res {
        Ok(_) => Ok(()),
        Err(process::RunError::Failed { stderr, .. }) => Err(LauncherError::input(format!(
            "libvirt's schema rejects the domain XML:\n{stderr}"
        ))),
        Err(e) => Err(LauncherError::runtime(format!("virt-xml-validate: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::validate_xml;

    /// Issue 19: `convert --validate` wrote
    /// `$TMPDIR/virt-launcher-validate-<pid>/domain.xml`, so a link planted
    /// there by another user made root replace the link's target. The name
    /// is random now and the file is created with `O_EXCL`.
    #[test]
    fn issue19_validate_never_writes_through_a_planted_link() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"root's data\n").unwrap();
        let planted =
            std::env::temp_dir().join(format!("virt-launcher-validate-{}", std::process::id()));
        std::fs::create_dir_all(&planted).unwrap();
        let link = planted.join("domain.xml");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let xml = "<domain type='kvm'><name>x</name><memory>1024</memory>\
                   <os><type>hvm</type></os></domain>";
        let r = validate_xml(xml);
        let _ = std::fs::remove_dir_all(&planted);
        r.expect("a valid domain validates");
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's data\n");
        let e = validate_xml("<domain/>").unwrap_err();
        assert!(e.to_string().contains("schema rejects"), "{e}");
    }
}
