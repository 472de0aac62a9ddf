//! Who the launcher runs as, and every path, daemon and URI decision that
//! follows from it, in one place (KubeVirt `cmd/virt-launcher/virt-launcher.go`,
//! `pkg/virt-launcher/virtwrap/util/libvirt_helper.go`, facts 1.5).
//!
//! KubeVirt's default is non-root: virt-api sets `status.runtimeUser: 107`,
//! virt-controller renders the compute container as uid/gid 107 with only
//! `NET_BIND_SERVICE` (ambient, from virt-launcher-monitor) and the
//! environment `XDG_CONFIG_HOME=XDG_CACHE_HOME=/var/run/kubevirt-private`,
//! `XDG_RUNTIME_DIR=/var/run`, and passes `--run-as-nonroot`. The launcher
//! then runs its libvirt daemon in session mode as itself. Where KubeVirt
//! runs virtqemud, Debian 12 has only libvirtd: in session mode its socket
//! is `$XDG_RUNTIME_DIR/libvirt/libvirt-sock` (`/var/run/libvirt/libvirt-sock`)
//! where virtqemud's is `virtqemud-sock`; everything else (qemu.conf, pid,
//! log and nvram paths) is the QEMU driver's and the same for both.

use std::path::PathBuf;

use virtwrap::config::DaemonKind;

/// KubeVirt's `qemu` user and group id (`pkg/util/util.go` `NonRootUID`).
pub const NON_ROOT_UID: u32 = 107;

/// The user the launcher, its daemons and QEMU run as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeUser {
    /// uid 0: `qemu:///system`, configuration in `/etc/libvirt`.
    Root,
    /// uid/gid 107 (`--run-as-nonroot`): session libvirt.
    NonRoot,
}

/// KubeVirt's session environment for the compute container
/// (`template.go`): (variable, value).
pub const SESSION_ENV: [(&str, &str); 3] = [
    ("XDG_CACHE_HOME", "/var/run/kubevirt-private"),
    ("XDG_CONFIG_HOME", "/var/run/kubevirt-private"),
    ("XDG_RUNTIME_DIR", "/var/run"),
];

impl RuntimeUser {
    /// From `--run-as-nonroot`.
    pub fn from_flag(run_as_nonroot: bool) -> RuntimeUser {
        if run_as_nonroot {
            RuntimeUser::NonRoot
        } else {
            RuntimeUser::Root
        }
    }

    /// The numeric user and group id.
    pub fn id(self) -> u32 {
        match self {
            RuntimeUser::Root => 0,
            RuntimeUser::NonRoot => NON_ROOT_UID,
        }
    }

    /// True for KubeVirt's unprivileged mode.
    pub fn is_non_root(self) -> bool {
        self == RuntimeUser::NonRoot
    }

    /// The libvirt URI the launcher connects with (`createLibvirtConnection`:
    /// non-root, the session URI naming the daemon's socket, as KubeVirt's
    /// `qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock`).
    /// Naming the socket also keeps libvirt's client from starting a
    /// session daemon of its own when the socket does not answer (the
    /// supervised daemon just died): such a daemon, nobody's child, took
    /// the pid file and every restart of the real one failed (issue 19).
    /// KubeVirt's auth callback answers with user `qemu`; the daemon's Unix
    /// socket here asks for no authentication (`auth_unix_rw = "none"`),
    /// so no callback is called.
    pub fn libvirt_uri(self, daemon: &DaemonKind) -> String {
        match self {
            RuntimeUser::Root => "qemu:///system".into(),
            RuntimeUser::NonRoot => format!(
                "qemu+unix:///session?socket={}",
                self.daemon_socket(daemon).display()
            ),
        }
    }

    /// The daemon's read-write socket: `/var/run/libvirt/<socket>` in both
    /// modes (session: `$XDG_RUNTIME_DIR/libvirt/`).
    pub fn daemon_socket(self, daemon: &DaemonKind) -> PathBuf {
        PathBuf::from("/var/run/libvirt").join(daemon.socket_name())
    }

    /// Where the daemon's own configuration file and `virtlogd.conf` are
    /// written: `/etc/libvirt` as root; non-root `/var/run/libvirt` (the
    /// image's `/etc/libvirt` is not writable by 107; KubeVirt copies
    /// `virtqemud.conf` there in both modes).
    pub fn daemon_config_dir(self) -> PathBuf {
        match self {
            RuntimeUser::Root => "/etc/libvirt".into(),
            RuntimeUser::NonRoot => "/var/run/libvirt".into(),
        }
    }

    /// The QEMU driver's `qemu.conf`: `/etc/libvirt/qemu.conf`, or, in
    /// session mode, `$XDG_CONFIG_HOME/libvirt/qemu.conf`
    /// (`/var/run/kubevirt-private/libvirt/qemu.conf`, KubeVirt's
    /// `qemuNonRootConfPath`).
    pub fn qemu_conf(self) -> PathBuf {
        match self {
            RuntimeUser::Root => "/etc/libvirt/qemu.conf".into(),
            RuntimeUser::NonRoot => "/var/run/kubevirt-private/libvirt/qemu.conf".into(),
        }
    }

    /// The directory of libvirt's QEMU pid files (KubeVirt's `pidDir`):
    /// `/run/libvirt/qemu`, session `/run/libvirt/qemu/run`.
    pub fn qemu_pid_dir(self) -> &'static str {
        match self {
            RuntimeUser::Root => "/var/run/libvirt/qemu",
            RuntimeUser::NonRoot => "/var/run/libvirt/qemu/run",
        }
    }

    /// The directory of QEMU's logs (what KubeVirt's virtlogd tail reads):
    /// `/var/log/libvirt/qemu`, session
    /// `/var/run/kubevirt-private/libvirt/qemu/log`.
    pub fn qemu_log_dir(self) -> &'static str {
        match self {
            RuntimeUser::Root => "/var/log/libvirt/qemu",
            RuntimeUser::NonRoot => "/var/run/kubevirt-private/libvirt/qemu/log",
        }
    }

    /// The user and group `qemu.conf` names: `root` standalone as root;
    /// `+107` non-root (by number: uid 107 need not be in `/etc/passwd`).
    pub fn qemu_conf_user(self) -> String {
        match self {
            RuntimeUser::Root => "root".into(),
            RuntimeUser::NonRoot => format!("+{NON_ROOT_UID}"),
        }
    }

    /// Environment the daemons get: none as root; non-root KubeVirt's
    /// session variables ([`SESSION_ENV`]) for those the launcher's own
    /// environment lacks (a pod has them all), and `HOME` when unset (uid
    /// 107 may have no passwd entry to take it from).
    pub fn daemon_env(self) -> Vec<(String, String)> {
        if self == RuntimeUser::Root {
            return Vec::new();
        }
        let mut env: Vec<(String, String)> = SESSION_ENV
            .iter()
            .map(|(k, v)| {
                let v = std::env::var(k).unwrap_or_else(|_| (*v).to_owned());
                ((*k).to_owned(), v)
            })
            .collect();
        if std::env::var_os("HOME").is_none() {
            env.push(("HOME".into(), "/var/run/kubevirt-private".into()));
        }
        env
    }

    /// Where libvirt keeps persistent EFI variables and TPM state and
    /// where the changed block tracking overlays are, the backend
    /// storage's mount points, as (subdirectory, path): root
    /// `/var/lib/libvirt/qemu/nvram`, `/var/lib/libvirt/swtpm` and
    /// `/var/lib/libvirt/qemu/cbt`; non-root the session daemon's, below
    /// `/var/run/kubevirt-private/libvirt/qemu` (KubeVirt's `PathForNVram`,
    /// `PathForSwtpm`, `PathForCBT`; virt-controller mounts the backend
    /// storage claim's `cbt` subdirectory there).
    pub fn backend_storage_mounts(self) -> [(&'static str, &'static str); 3] {
        match self {
            RuntimeUser::Root => [
                ("nvram", "/var/lib/libvirt/qemu/nvram"),
                ("swtpm", "/var/lib/libvirt/swtpm"),
                ("cbt", api::cbt::ROOT_DIR),
            ],
            RuntimeUser::NonRoot => [
                ("nvram", api::layout::NON_ROOT_NVRAM_DIR),
                ("swtpm", "/var/run/kubevirt-private/libvirt/qemu/swtpm"),
                ("cbt", api::cbt::NON_ROOT_DIR),
            ],
        }
    }

    /// The shared capability cache (`--libvirt-cache-dir DIR`) as (below
    /// DIR, where the daemon looks): root `DIR` on `/var/cache/libvirt`;
    /// non-root `DIR/uid-107/qemu` on the session daemon's
    /// `$XDG_CACHE_HOME/libvirt/qemu/cache` (its own files: the root
    /// daemon's are unreadable to 107).
    pub fn capability_cache(self) -> (&'static str, &'static str) {
        match self {
            RuntimeUser::Root => ("", "/var/cache/libvirt"),
            RuntimeUser::NonRoot => (
                "uid-107/qemu",
                "/var/run/kubevirt-private/libvirt/qemu/cache",
            ),
        }
    }

    /// libvirt's QEMU capabilities directory, as (a directory of the
    /// launcher's runtime, the path below it): root
    /// `/var/cache/libvirt` + `qemu/capabilities`; non-root the session
    /// daemon's `$XDG_CACHE_HOME/libvirt/qemu/cache/capabilities`
    /// (`/var/run/kubevirt-private` + `libvirt/qemu/cache/capabilities`).
    pub fn capabilities_dir(self) -> (&'static str, &'static str) {
        match self {
            RuntimeUser::Root => ("/var/cache/libvirt", "qemu/capabilities"),
            RuntimeUser::NonRoot => (
                "/var/run/kubevirt-private",
                "libvirt/qemu/cache/capabilities",
            ),
        }
    }

    /// The KubeVirt paths the non-root launcher writes to (the pod's
    /// emptyDirs, writable by 107 there through `fsGroup`); the standalone
    /// stand-in gives them to 107 before the launcher proper starts.
    pub fn writable_pod_dirs() -> [&'static str; 2] {
        ["/var/run/libvirt", "/var/run/kubevirt-private"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_non_root_column_of_kubevirts_table() {
        let u = RuntimeUser::from_flag(true);
        assert_eq!(u.id(), 107);
        assert_eq!(u.qemu_pid_dir(), "/var/run/libvirt/qemu/run");
        assert_eq!(
            u.qemu_conf(),
            PathBuf::from("/var/run/kubevirt-private/libvirt/qemu.conf")
        );
        assert_eq!(
            u.qemu_log_dir(),
            "/var/run/kubevirt-private/libvirt/qemu/log"
        );
        assert_eq!(u.qemu_conf_user(), "+107");
        let d = DaemonKind::Virtqemud("/usr/sbin/virtqemud".into());
        assert_eq!(
            u.daemon_socket(&d),
            PathBuf::from("/var/run/libvirt/virtqemud-sock")
        );
        assert_eq!(
            u.libvirt_uri(&d),
            "qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock"
        );
        // Where libvirt's session daemon keeps its QEMU capabilities:
        // $XDG_CACHE_HOME/libvirt/qemu/cache/capabilities.
        assert_eq!(
            u.capabilities_dir(),
            (
                "/var/run/kubevirt-private",
                "libvirt/qemu/cache/capabilities"
            )
        );
        assert!(u.capability_cache().1.starts_with(u.capabilities_dir().0));
        let env = u.daemon_env();
        for (k, _) in SESSION_ENV {
            assert!(env.iter().any(|(e, _)| e == k), "{k}");
        }
        let r = RuntimeUser::from_flag(false);
        assert_eq!(r.id(), 0);
        assert_eq!(
            r.libvirt_uri(&DaemonKind::Virtqemud("/usr/sbin/virtqemud".into())),
            "qemu:///system"
        );
        assert_eq!(r.qemu_pid_dir(), "/var/run/libvirt/qemu");
        assert_eq!(r.qemu_conf(), PathBuf::from("/etc/libvirt/qemu.conf"));
        assert_eq!(
            r.capabilities_dir(),
            ("/var/cache/libvirt", "qemu/capabilities")
        );
        assert!(r.daemon_env().is_empty());
        let l = DaemonKind::Libvirtd("/usr/sbin/libvirtd".into());
        assert_eq!(
            r.daemon_socket(&l),
            PathBuf::from("/var/run/libvirt/libvirt-sock")
        );
    }
}
