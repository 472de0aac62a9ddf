//! KubeVirt's virt-launcher flags (`cmd/virt-launcher/virt-launcher.go`,
//! v1.6.6), with KubeVirt's names and defaults, plus `--use-emulation`.

use std::time::Duration;

use clap::Args;

/// Flags shared by every mode; names and defaults are KubeVirt's.
#[derive(Args, Clone, Debug)]
pub struct LauncherFlags {
    /// Wait at most this long for the domain to start (Go duration: 3m, 240s).
    #[arg(long, default_value = "3m", value_parser = parse_go_duration)]
    pub qemu_timeout: Duration,
    /// Directory shared with virt-handler (sockets, container disks).
    #[arg(long, default_value = "/var/run/kubevirt")]
    pub kubevirt_share_dir: String,
    /// Base directory of ephemeral disk data (overlays, cloud-init).
    #[arg(long, default_value = "/var/run/kubevirt-ephemeral-disks")]
    pub ephemeral_disk_dir: String,
    /// Where container disk images appear as disk_<N>.img.
    #[arg(long, default_value = "/var/run/kubevirt/container-disks")]
    pub container_disk_dir: String,
    /// Where hot-plugged disks appear.
    #[arg(long, default_value = "/var/run/kubevirt/hotplug-disks/")]
    pub hotplug_disk_dir: String,
    /// VMI name (standalone: taken from the manifest).
    #[arg(long, default_value = "")]
    pub name: String,
    /// VMI namespace (standalone: taken from the manifest).
    #[arg(long, default_value = "")]
    pub namespace: String,
    /// VMI UID (standalone: the manifest's, else derived from namespace and name).
    #[arg(long, default_value = "")]
    pub uid: String,
    /// Seconds between a termination signal and a hard kill of the guest
    /// (default: the VMI's terminationGracePeriodSeconds + 15, as
    /// virt-controller passes it).
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..=31_536_000), allow_hyphen_values = true)]
    pub grace_period_seconds: Option<i64>,
    /// Allow software emulation (TCG) when /dev/kvm is absent.
    #[arg(long)]
    pub allow_emulation: bool,
    /// Always use software emulation (TCG), even when /dev/kvm exists: for
    /// hosts whose /dev/kvm cannot run guests (KubeVirt's `useEmulation`).
    #[arg(long)]
    pub use_emulation: bool,
    /// KubeVirt's non-root mode: the launcher, its session libvirt daemon and
    /// QEMU run as uid/gid 107 with only CAP_NET_BIND_SERVICE (`run`: the
    /// stand-in sets the pod up as root, then the launcher proper becomes 107).
    #[arg(long)]
    pub run_as_nonroot: bool,
    /// Container disks and the kernel boot image come from Kubernetes image
    /// volumes under /var/run/kubevirt-image-volume and
    /// /var/run/kubevirt-kernel-boot (KubeVirt's ImageVolume feature gate):
    /// each sync links them into --container-disk-dir.
    #[arg(long)]
    pub image_volume: bool,
    /// Number of hook sidecars to wait for: before libvirt starts, the
    /// launcher waits (up to `--qemu-timeout`) until this many sockets
    /// below `/var/run/kubevirt-hooks/<sidecar>/` answered KubeVirt's hook
    /// `Info` call (standalone: `run --hook-sidecar-dir DIR` is mounted
    /// there).
    #[arg(long, default_value_t = 0)]
    pub hook_sidecars: u32,
    /// Address-space limit of `qemu-img info`, in bytes.
    #[arg(long, default_value_t = storage::DEFAULT_DISK_MEMORY_LIMIT,
          value_parser = clap::value_parser!(u64).range(64 << 20..))]
    pub disk_memory_limit: u64,
    /// Percent by which a claim's free space may fall short of its size
    /// when the launcher creates its disk.img (KubeVirt's
    /// `--less-pvc-space-toleration`; the default is KubeVirt's cluster
    /// default, `pvc-tolerate-less-space-up-to-percent` 10).
    #[arg(long, default_value_t = storage::pvc::DEFAULT_LESS_PVC_SPACE_TOLERATION,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    pub less_pvc_space_toleration: u8,
    /// Bytes of a claim never given to a created disk.img (KubeVirt's
    /// cluster setting `minimumReservePVCBytes`, default 128 KiB; ours as
    /// a flag).
    #[arg(long, default_value_t = storage::pvc::DEFAULT_MINIMUM_RESERVE_PVC_BYTES)]
    pub minimum_reserve_pvc_bytes: u64,
    /// KubeVirt's ExpandDisks feature gate for `run` and `STANDALONE_VMI`
    /// (ours as a flag): before the domain starts, grow each filesystem-mode
    /// claim's disk.img to the usable size its status gives. Under
    /// virt-handler, SyncVirtualMachine's `ClusterConfig.ExpandDisksEnabled`
    /// decides instead.
    #[arg(long)]
    pub expand_disks: bool,
    /// Directory of the EFI firmware (OVMF/AAVMF).
    #[arg(long)]
    pub ovmf_path: Option<String>,
    /// Guest agent OS/interfaces poll interval.
    #[arg(long, default_value = "120s", value_parser = parse_go_duration)]
    pub qemu_agent_sys_interval: Duration,
    /// Guest agent file system poll interval.
    #[arg(long, default_value = "300s", value_parser = parse_go_duration)]
    pub qemu_agent_file_interval: Duration,
    /// Guest agent users poll interval.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub qemu_agent_user_interval: Duration,
    /// Guest agent version poll interval.
    #[arg(long, default_value = "300s", value_parser = parse_go_duration)]
    pub qemu_agent_version_interval: Duration,
    /// Guest file system freeze status poll interval.
    #[arg(long, default_value = "5s", value_parser = parse_go_duration)]
    pub qemu_fsfreeze_status_interval: Duration,
    /// Serve GetVMStats (KubeVirt main's VMStatsCollector feature gate,
    /// which virt-controller passes as this flag): domain statistics, dirty
    /// rate and cached guest agent replies in one call. Without it
    /// GetVMStats fails with KubeVirt's `VMStatsCollector feature gate is
    /// not enabled`.
    #[arg(long)]
    pub vm_stats_collector: bool,
    /// Fail right after directory initialisation (KubeVirt's test hook).
    #[arg(long)]
    pub simulate_crash: bool,
    /// libvirt `log_filters` for the daemon.
    #[arg(long, default_value = "")]
    pub libvirt_log_filters: String,
    /// Accepted for compatibility with virt-launcher-monitor's command line.
    #[arg(long, hide = true)]
    pub keep_after_failure: bool,
    /// Private runtime directory (ours; default
    /// /run/virt-launcher/<namespace>_<name>): libvirt's configuration,
    /// state and sockets, and KubeVirt's private directory. A non-root
    /// launcher in a pod has none (the pod's emptyDirs are its state).
    #[arg(long)]
    pub state_dir: Option<std::path::PathBuf>,
    /// Keep the state directory (serial log, libvirt logs) after exit (ours).
    #[arg(long)]
    pub keep_state: bool,
    /// libvirt's QEMU capability cache, shared between runs (ours).
    #[arg(long, default_value = "/var/cache/virt-launcher/libvirt")]
    pub libvirt_cache_dir: std::path::PathBuf,
    /// The QEMU capabilities cache shipped in the image (ours; made at
    /// image build by `virt-launcher capabilities-cache`): libvirt's empty
    /// cache is seeded from it at start when every recorded hash and fact
    /// matches this system, else libvirt probes QEMU as without it. An
    /// empty value disables it.
    #[arg(long, default_value = "/usr/share/virt-launcher/capabilities")]
    pub shipped_capabilities_dir: String,
    /// File system of configMap/secret/downwardAPI/serviceAccount disks:
    /// iso9660 (KubeVirt's) or vfat (ours; no Unix modes). The image path is
    /// KubeVirt's `<vol>.iso` either way.
    #[arg(long, value_enum, default_value = "iso9660")]
    pub config_disk_fs: ConfigDiskFsFlag,
    /// Log verbosity (KubeVirt's -v; VIRT_LAUNCHER_LOG_VERBOSITY overrides).
    #[arg(short = 'v', default_value_t = 2)]
    pub verbosity: u32,
}

/// Values of `--config-disk-fs`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigDiskFsFlag {
    /// ISO 9660 with Joliet and Rock Ridge (KubeVirt's format).
    Iso9660,
    /// FAT, written by mkfs.vfat and mcopy.
    Vfat,
}

impl From<ConfigDiskFsFlag> for storage::ConfigDiskFs {
    fn from(f: ConfigDiskFsFlag) -> Self {
        match f {
            ConfigDiskFsFlag::Iso9660 => storage::ConfigDiskFs::Iso9660,
            ConfigDiskFsFlag::Vfat => storage::ConfigDiskFs::Vfat,
        }
    }
}

/// Parses a Go `time.ParseDuration` string: a sequence of decimal numbers
/// with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h` (`3m`, `240s`, `1h30m`,
/// `1.5s`). Hand-rolled because KubeVirt's flags use Go's syntax, which no
/// maintained Rust crate accepts exactly (humantime rejects fractions).
///
/// # Errors
/// A message naming the input.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration (examples: 3m, 240s, 1h30m)");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += value * mult;
    }
    if !total.is_finite() || total > 1e9 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("3m").unwrap(), Duration::from_secs(180));
        assert_eq!(parse_go_duration("240s").unwrap(), Duration::from_secs(240));
        assert_eq!(
            parse_go_duration("1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("1.5s").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            parse_go_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "3", "m", "3x", "-3s", "1..2s", "1e3s", "99999999999h"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }
}
