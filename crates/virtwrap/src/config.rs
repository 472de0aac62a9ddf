//! The libvirt daemons' configuration files, written by the launcher.
//!
//! The launcher owns these files: it writes them into its own configuration
//! directory (bind-mounted on `/etc/libvirt` inside its mount namespace), so
//! nothing depends on, or changes, the host's `/etc/libvirt`. Contents follow
//! KubeVirt's launcher image (`/etc/libvirt/qemu.conf`, `virtqemud.conf`),
//! plus what a container needs: `namespaces = [ ]` and
//! `cgroup_controllers = [ ]` (no mount namespace or cgroups per QEMU).

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// The daemon that runs the QEMU driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonKind {
    /// Modular daemon (`/usr/sbin/virtqemud`, socket `virtqemud-sock`).
    Virtqemud(PathBuf),
    /// Monolithic daemon (`/usr/sbin/libvirtd`, socket `libvirt-sock`).
    Libvirtd(PathBuf),
}

impl DaemonKind {
    /// virtqemud when installed, else libvirtd; `None` when neither is.
    pub fn detect() -> Option<DaemonKind> {
        ["/usr/sbin/virtqemud", "/usr/bin/virtqemud"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .map(DaemonKind::Virtqemud)
            .or_else(|| {
                ["/usr/sbin/libvirtd", "/usr/bin/libvirtd"]
                    .iter()
                    .map(PathBuf::from)
                    .find(|p| p.is_file())
                    .map(DaemonKind::Libvirtd)
            })
    }

    /// Executable path.
    pub fn program(&self) -> &Path {
        match self {
            DaemonKind::Virtqemud(p) | DaemonKind::Libvirtd(p) => p,
        }
    }

    /// Short name for logs (`virtqemud`, `libvirtd`).
    pub fn name(&self) -> &'static str {
        match self {
            DaemonKind::Virtqemud(_) => "virtqemud",
            DaemonKind::Libvirtd(_) => "libvirtd",
        }
    }

    /// Its configuration file name in the configuration directory.
    pub fn config_file(&self) -> &'static str {
        match self {
            DaemonKind::Virtqemud(_) => "virtqemud.conf",
            DaemonKind::Libvirtd(_) => "libvirtd.conf",
        }
    }

    /// Its read-write socket under the run directory (`/run/libvirt`).
    pub fn socket_name(&self) -> &'static str {
        match self {
            DaemonKind::Virtqemud(_) => "virtqemud-sock",
            DaemonKind::Libvirtd(_) => "libvirt-sock",
        }
    }
}

/// Settings that vary between launchers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonConfig {
    /// User QEMU runs as (`root`, or `+107` for KubeVirt's `qemu` user).
    pub qemu_user: String,
    /// Group QEMU runs as.
    pub qemu_group: String,
    /// Let libvirt chown images to the QEMU user (only when it is not root).
    pub dynamic_ownership: bool,
    /// `log_filters` for the daemon (KubeVirt `--libvirt-log-filters`).
    pub log_filters: Option<String>,
    /// `hugetlbfs_mount` when `/dev/hugepages` exists.
    pub hugetlbfs_mount: Option<String>,
    /// `virtiofsd_debug = 1` (KubeVirt: `VIRTIOFSD_DEBUG_LOGS=1`).
    pub virtiofsd_debug: bool,
    /// `shared_filesystems = [ ... ]`: paths libvirt treats as shared
    /// between hosts (KubeVirt: `SHARED_FILESYSTEM_PATHS`, see
    /// [`shared_filesystems_from_env`]); `None` writes no line.
    pub shared_filesystems: Option<Vec<String>>,
    /// `host_uuid`: the daemon's host UUID (libvirt refuses a migration
    /// between two daemons with the same one); `None` writes no line
    /// (libvirt reads the host's SMBIOS UUID, as in KubeVirt's pods).
    pub host_uuid: Option<String>,
}

/// KubeVirt's `EXT_LOG_VERBOSITY_THRESHOLD`: from this launcher verbosity
/// on, libvirt's debug log filters apply.
pub const LOG_VERBOSITY_THRESHOLD: i64 = 5;

/// The daemon's `log_filters`, as KubeVirt v1.6.6 decides them
/// (`libvirt_helper.go`, `getLibvirtLogFilters`): `custom` (the
/// `--libvirt-log-filters` flag) when not empty; else from `verbosity`
/// (the raw `VIRT_LAUNCHER_LOG_VERBOSITY` value, an integer as Go's
/// `strconv.Atoi` reads it, anything else counting as -1): below 5 no
/// filters unless `debug_logs` (`LIBVIRT_DEBUG_LOGS` is set, to any
/// value), which counts as 10; 5 names the most categories at level 3,
/// 6, 7 and 8 (and above) fewer; every list ends with ` 1:*` (everything
/// else at debug level). `None`: no `log_filters` line.
pub fn log_filters(
    custom: Option<&str>,
    verbosity: Option<&str>,
    debug_logs: bool,
) -> Option<String> {
    if let Some(c) = custom.filter(|c| !c.is_empty()) {
        return Some(c.to_owned());
    }
    let mut level = verbosity.and_then(|v| v.parse::<i64>().ok()).unwrap_or(-1);
    if level < LOG_VERBOSITY_THRESHOLD {
        if !debug_logs {
            return None;
        }
        level = LOG_VERBOSITY_THRESHOLD + 5;
    }
    // Each list quiets fewer categories than the one before it.
    const FEWEST: &str = "3:remote 4:event 3:util.json 3:util.object 3:util.dbus \
                          3:util.netlink 3:node_device 3:rpc 3:access";
    let mut quiet = vec![FEWEST];
    if level <= LOG_VERBOSITY_THRESHOLD + 2 {
        quiet.push("3:util.threadjob 3:cpu.cpu");
    }
    if level <= LOG_VERBOSITY_THRESHOLD + 1 {
        quiet.push("3:qemu.qemu_monitor");
    }
    if level <= LOG_VERBOSITY_THRESHOLD {
        quiet.push("3:qemu.qemu_monitor_json 3:conf.domain_addr");
    }
    quiet.push("1:*");
    Some(quiet.join(" "))
}

/// The paths of `SHARED_FILESYSTEM_PATHS` (`value`: `None` when unset):
/// split at `:` as KubeVirt does, empty parts kept (KubeVirt writes them
/// too). virt-controller sets it when the VMI has virtiofs shares.
pub fn shared_filesystems_from_env(value: Option<&str>) -> Option<Vec<String>> {
    value.map(|v| v.split(':').map(str::to_owned).collect())
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            qemu_user: "root".into(),
            qemu_group: "root".into(),
            dynamic_ownership: false,
            log_filters: None,
            hugetlbfs_mount: None,
            virtiofsd_debug: false,
            shared_filesystems: None,
            host_uuid: None,
        }
    }
}

fn quote(s: &str) -> String {
    // libvirt's config parser takes double-quoted strings with no escapes:
    // refuse to emit a value that would end the string early.
    s.chars()
        .filter(|c| *c != '"' && *c != '\n' && *c != '\\')
        .collect()
}

/// Text of `qemu.conf`.
pub fn qemu_conf(cfg: &DaemonConfig) -> String {
    let mut s = String::from("# Written by virt-launcher; do not edit.\n");
    let _ = writeln!(s, "stdio_handler = \"logd\"");
    let _ = writeln!(s, "vnc_listen = \"0.0.0.0\"\nvnc_tls = 0\nvnc_sasl = 0");
    let _ = writeln!(
        s,
        "user = \"{}\"\ngroup = \"{}\"",
        quote(&cfg.qemu_user),
        quote(&cfg.qemu_group)
    );
    let _ = writeln!(s, "dynamic_ownership = {}", u8::from(cfg.dynamic_ownership));
    let _ = writeln!(s, "remember_owner = 0");
    let _ = writeln!(s, "namespaces = [ ]\ncgroup_controllers = [ ]");
    let _ = writeln!(s, "security_driver = \"none\"");
    if let Some(h) = &cfg.hugetlbfs_mount {
        let _ = writeln!(s, "hugetlbfs_mount = \"{}\"", quote(h));
    }
    if cfg.virtiofsd_debug {
        let _ = writeln!(s, "virtiofsd_debug = 1");
    }
    if let Some(paths) = &cfg.shared_filesystems {
        let list: Vec<String> = paths.iter().map(|p| format!("\"{}\"", quote(p))).collect();
        let _ = writeln!(s, "shared_filesystems = [ {} ]", list.join(", "));
    }
    s
}

/// Text of `libvirtd.conf` / `virtqemud.conf`: Unix socket only, no TCP or
/// TLS listener, no polkit, warnings and errors to standard error (which the
/// launcher re-logs).
pub fn daemon_conf(kind: &DaemonKind, cfg: &DaemonConfig) -> String {
    let mut s = String::from("# Written by virt-launcher; do not edit.\n");
    if matches!(kind, DaemonKind::Libvirtd(_)) {
        let _ = writeln!(s, "listen_tls = 0\nlisten_tcp = 0");
    }
    let _ = writeln!(s, "auth_unix_rw = \"none\"\nauth_unix_ro = \"none\"");
    let _ = writeln!(s, "unix_sock_rw_perms = \"0700\"");
    if let Some(u) = &cfg.host_uuid {
        let _ = writeln!(s, "host_uuid = \"{}\"", quote(u));
    }
    match &cfg.log_filters {
        // The filters choose what is logged; the output takes every level.
        Some(f) => {
            let _ = writeln!(
                s,
                "log_filters = \"{}\"\nlog_outputs = \"1:stderr\"",
                quote(f)
            );
        }
        None => {
            let _ = writeln!(s, "log_outputs = \"3:stderr\"");
        }
    }
    s
}

/// Text of `virtlogd.conf`.
pub fn virtlogd_conf() -> String {
    "# Written by virt-launcher; do not edit.\nlog_outputs = \"3:stderr\"\n".into()
}

/// Writes `qemu.conf`, the daemon's file and `virtlogd.conf` into `dir`.
///
/// # Errors
/// The first write error.
pub fn write_all(dir: &Path, kind: &DaemonKind, cfg: &DaemonConfig) -> io::Result<()> {
    write_split(&dir.join("qemu.conf"), dir, kind, cfg)
}

/// Writes `qemu.conf` at `qemu_conf` (a session daemon reads it from
/// `$XDG_CONFIG_HOME/libvirt/`), the daemon's file and `virtlogd.conf`
/// into `dir`; missing directories are created.
///
/// # Errors
/// The first write error.
pub fn write_split(
    qemu_conf_path: &Path,
    dir: &Path,
    kind: &DaemonKind,
    cfg: &DaemonConfig,
) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if let Some(parent) = qemu_conf_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(qemu_conf_path, qemu_conf(cfg))?;
    std::fs::write(dir.join(kind.config_file()), daemon_conf(kind, cfg))?;
    std::fs::write(dir.join("virtlogd.conf"), virtlogd_conf())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_conf_has_the_container_settings() {
        let s = qemu_conf(&DaemonConfig::default());
        assert!(s.contains("namespaces = [ ]\n"));
        assert!(s.contains("cgroup_controllers = [ ]\n"));
        assert!(s.contains("stdio_handler = \"logd\"\n"));
        assert!(s.contains("user = \"root\"\n"));
        let odd = DaemonConfig {
            qemu_user: "a\"b\nc".into(),
            ..DaemonConfig::default()
        };
        assert!(qemu_conf(&odd).contains("user = \"abc\"\n"));
    }

    #[test]
    fn log_filters_follow_kubevirts_verbosity_rules() {
        const L4: &str = "3:remote 4:event 3:util.json 3:util.object 3:util.dbus 3:util.netlink 3:node_device 3:rpc 3:access";
        let l3 = format!("{L4} 3:util.threadjob 3:cpu.cpu");
        let l2 = format!("{l3} 3:qemu.qemu_monitor");
        let l1 = format!("{l2} 3:qemu.qemu_monitor_json 3:conf.domain_addr");
        let all = |l: &str| Some(format!("{l} 1:*"));
        // The flag wins over everything.
        assert_eq!(
            log_filters(Some("1:qemu"), Some("9"), true).as_deref(),
            Some("1:qemu")
        );
        for (v, debug, want) in [
            (None, false, None),
            (Some("4"), false, None),
            (Some("x"), false, None),
            (Some(" 6"), false, None),
            (None, true, all(L4)),
            (Some("2"), true, all(L4)),
            (Some("junk"), true, all(L4)),
            (Some("5"), false, all(&l1)),
            (Some("5"), true, all(&l1)),
            (Some("6"), false, all(&l2)),
            (Some("+7"), false, all(&l3)),
            (Some("8"), false, all(L4)),
            (Some("100"), false, all(L4)),
        ] {
            assert_eq!(log_filters(Some(""), v, debug), want, "{v:?} {debug}");
            assert_eq!(log_filters(None, v, debug), want, "{v:?} {debug}");
        }
        let cfg = DaemonConfig {
            log_filters: log_filters(None, Some("8"), false),
            ..DaemonConfig::default()
        };
        let text = daemon_conf(&DaemonKind::Libvirtd("x".into()), &cfg);
        assert!(
            text.contains(&format!("log_filters = \"{L4} 1:*\"\n")),
            "{text}"
        );
    }

    #[test]
    fn qemu_conf_gets_kubevirts_environment_lines() {
        let plain = qemu_conf(&DaemonConfig::default());
        assert!(!plain.contains("virtiofsd_debug") && !plain.contains("shared_filesystems"));
        let cfg = DaemonConfig {
            virtiofsd_debug: true,
            shared_filesystems: shared_filesystems_from_env(Some("/mnt/a:/mnt/b\"x")),
            ..DaemonConfig::default()
        };
        let s = qemu_conf(&cfg);
        assert!(s.contains("virtiofsd_debug = 1\n"), "{s}");
        assert!(
            s.contains("shared_filesystems = [ \"/mnt/a\", \"/mnt/bx\" ]\n"),
            "{s}"
        );
        assert_eq!(
            shared_filesystems_from_env(Some("/one")),
            Some(vec!["/one".to_owned()])
        );
        assert_eq!(shared_filesystems_from_env(None), None);
    }

    #[test]
    fn daemon_conf_never_listens_on_tcp() {
        let s = daemon_conf(
            &DaemonKind::Libvirtd("/usr/sbin/libvirtd".into()),
            &DaemonConfig::default(),
        );
        assert!(s.contains("listen_tcp = 0") && s.contains("listen_tls = 0"));
        let s = daemon_conf(
            &DaemonKind::Virtqemud("/usr/sbin/virtqemud".into()),
            &DaemonConfig::default(),
        );
        assert!(!s.contains("listen_tcp"));
        assert!(!s.contains("host_uuid"), "KubeVirt writes none: {s}");
        let own = DaemonConfig {
            host_uuid: Some("0b4d52b6-5b0e-4b8e-9a51-0c3c1c0e7a11".into()),
            ..DaemonConfig::default()
        };
        let s = daemon_conf(&DaemonKind::Virtqemud("x".into()), &own);
        assert!(
            s.contains("host_uuid = \"0b4d52b6-5b0e-4b8e-9a51-0c3c1c0e7a11\"\n"),
            "{s}"
        );
        let dir = tempfile::tempdir().unwrap();
        write_all(
            dir.path(),
            &DaemonKind::Virtqemud("x".into()),
            &DaemonConfig::default(),
        )
        .unwrap();
        for f in ["qemu.conf", "virtqemud.conf", "virtlogd.conf"] {
            assert!(dir.path().join(f).is_file(), "{f}");
        }
    }
}
