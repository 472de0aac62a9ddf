//! `virt-launcher migration-proxy`: what virt-handler's migration proxies
//! do for one migration (KubeVirt v1.6.6
//! `pkg/virt-handler/migration-proxy/migration-proxy.go`, started by
//! `migration-target.go` `handleTargetMigrationProxy` and
//! `migration-source.go` `handleSourceMigrationProxy`), for two standalone
//! launchers on one host:
//!
//! - the target side (`StartTargetListener`): one listener for each of
//!   the target launcher's Unix files: its libvirt socket, then
//!   `<share>/migrationproxy/<uid>-49152-source.sock` (and `-49153-` for
//!   block migration), where the incoming QEMU and NBD server listen;
//! - the source side (`StartSourceListener`): for each target port, the
//!   Unix socket `<source share>/migrationproxy/<key>-source.sock` (key
//!   `<uid>` for libvirt, `<uid>-49152`, `<uid>-49153`), any old file
//!   removed first, that the source launcher's libvirt and QEMU connect to;
//!   each connection is forwarded to its target listener, and from there to
//!   the target's Unix file, bytes both ways until either side closes.
//!
//! The source sockets (and the `migrationproxy` directory when the proxy
//! makes it) belong to the owner of the source's share directory, so a
//! non-root launcher's QEMU (uid 107) can connect.
//!
//! virt-handler's hop between the nodes is TCP with TLS; here both ends
//! are on one host and the hop is a Unix socket in a directory only the
//! proxy's user can enter (`mkdtemp`, 0700). A TCP port on the loopback
//! address would hand the target's libvirt socket, root's for a root
//! launcher, to every local user (found by a new-user trial: `virsh -c
//! qemu+tcp://127.0.0.1:<port>/system` as `nobody` could suspend the VM).
//! It runs until SIGTERM or SIGINT and then removes the sockets it made.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::error::LauncherError;

/// Connections a listener carries at once (libvirt's migration uses a
/// handful; more is refused).
const MAX_CONNECTIONS: usize = 64;

/// `migration-proxy` arguments.
#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// The VMI's UID (`metadata.uid`; the sockets' key, as virt-handler's).
    #[arg(long)]
    pub uid: String,
    /// The source launcher's share directory (`/var/run/kubevirt` inside
    /// it) as this host sees it: `<state-dir>/share` of its `run`.
    #[arg(long)]
    pub source_share: PathBuf,
    /// The target launcher's share directory as this host sees it.
    #[arg(long)]
    pub target_share: PathBuf,
    /// The target launcher's libvirt socket as this host sees it:
    /// `<state-dir>/libvirt/run/libvirt-sock` (libvirtd) or
    /// `.../virtqemud-sock`.
    #[arg(long)]
    pub target_libvirt_socket: PathBuf,
    /// Also proxy the block migration port (49153), as virt-handler does
    /// when the VMI's `status.migrationMethod` is `BlockMigration` (the
    /// default of `ctl migrate`).
    #[arg(long)]
    pub block_migration: bool,
}

fn err(what: impl std::fmt::Display) -> LauncherError {
    LauncherError::runtime(what.to_string())
}

/// A UID usable as a file name part: letters, digits, `-`, `_`, `.`; not
/// empty, at most 128 bytes (Kubernetes UIDs are 36).
fn check_uid(uid: &str) -> Result<(), LauncherError> {
    let ok = !uid.is_empty()
        && uid.len() <= 128
        && !uid.starts_with('.')
        && uid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(LauncherError::input_at(
            "--uid",
            format!(
                "{} is not a UID (letters, digits, '-', '_', '.')",
                api::text::cut(uid, 64)
            ),
        ))
    }
}

/// `dir` must be a directory, not a symbolic link.
fn check_dir(flag: &str, dir: &Path) -> Result<(), LauncherError> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(LauncherError::input_at(
            flag,
            format!(
                "{} is not a directory (symbolic links are refused)",
                dir.display()
            ),
        )),
        Err(e) => Err(LauncherError::input_at(
            flag,
            format!("{}: {e}", dir.display()),
        )),
    }
}

/// Runs the proxy (see the module docs) until SIGTERM or SIGINT.
///
/// # Errors
/// Bad arguments (exit 2); a listener that cannot be made (exit 1).
pub fn run(args: &ProxyArgs) -> Result<(), LauncherError> {
    check_uid(&args.uid)?;
    check_dir("--source-share", &args.source_share)?;
    check_dir("--target-share", &args.target_share)?;
    let ports: &[u16] = if args.block_migration {
        &[
            virtwrap::migration::DIRECT_MIGRATION_PORT,
            virtwrap::migration::BLOCK_MIGRATION_PORT,
        ]
    } else {
        &[virtwrap::migration::DIRECT_MIGRATION_PORT]
    };
    crate::startup::signals::install_signal_handlers()?;
    // The hop: a private directory for the target side's listeners.
    let hop_dir = nix::unistd::mkdtemp(&std::env::temp_dir().join("virt-launcher-proxy-XXXXXX"))
        .map_err(|e| err(format!("mkdtemp for the proxy's hop: {e}")))?;
    let result = serve(args, ports, &hop_dir);
    let _ = std::fs::remove_dir_all(&hop_dir);
    result
}

/// [`run`] with the hop's private directory `hop_dir`.
fn serve(args: &ProxyArgs, ports: &[u16], hop_dir: &Path) -> Result<(), LauncherError> {
    // Target side: (source key's port, hop socket) for each target file.
    let mut routes: Vec<(u16, PathBuf)> = Vec::new();
    let mut targets = vec![(0u16, args.target_libvirt_socket.clone())];
    for &p in ports {
        targets.push((
            p,
            PathBuf::from(virtwrap::migration::proxy_socket(
                &args.target_share.to_string_lossy(),
                &args.uid,
                p,
            )),
        ));
    }
    for (src_port, file) in targets {
        let hop = hop_dir.join(format!("hop-{src_port}.sock"));
        let l = UnixListener::bind(&hop)
            .map_err(|e| err(format!("target listener for {}: {e}", file.display())))?;
        tracing::info!(target = %file.display(), hop = %hop.display(), "proxy created on target");
        spawn_accept("target", move || {
            let (c, _) = l.accept()?;
            let file = file.clone();
            Ok(Box::new(move || {
                let u = UnixStream::connect(&file)?;
                pump(c, u);
                Ok(())
            }) as Job)
        })?;
        routes.push((src_port, hop));
    }
    // Source side.
    let owner = {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(&args.source_share)
            .map_err(|e| LauncherError::input_at("--source-share", e.to_string()))?;
        (m.uid(), m.gid())
    };
    let mut made = Vec::new();
    let dir = args.source_share.join("migrationproxy");
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(LauncherError::input_at(
                "--source-share",
                format!("{} is not a directory", dir.display()),
            ))
        }
        Err(_) => {
            std::fs::create_dir(&dir).map_err(|e| err(format!("mkdir {}: {e}", dir.display())))?;
            std::os::unix::fs::lchown(&dir, Some(owner.0), Some(owner.1))
                .map_err(|e| err(format!("chown {}: {e}", dir.display())))?;
        }
    }
    for (src_port, hop) in routes {
        let path = PathBuf::from(virtwrap::migration::proxy_socket(
            &args.source_share.to_string_lossy(),
            &args.uid,
            src_port,
        ));
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            if m.is_dir() {
                return Err(err(format!("{} is a directory", path.display())));
            }
            std::fs::remove_file(&path).map_err(|e| err(format!("rm {}: {e}", path.display())))?;
        }
        let l = UnixListener::bind(&path)
            .map_err(|e| err(format!("listen {}: {e}", path.display())))?;
        // A non-root launcher's QEMU (uid 107) must be able to connect: the
        // socket is the share directory's owner's, as virt-handler gives a
        // non-root VMI's sockets to the qemu user.
        std::os::unix::fs::lchown(&path, Some(owner.0), Some(owner.1))
            .map_err(|e| err(format!("chown {}: {e}", path.display())))?;
        tracing::info!(socket = %path.display(), hop = %hop.display(), "proxy created on source");
        made.push(path);
        spawn_accept("source", move || {
            let (c, _) = l.accept()?;
            let hop = hop.clone();
            Ok(Box::new(move || {
                let t = UnixStream::connect(&hop)?;
                pump(t, c);
                Ok(())
            }) as Job)
        })?;
    }
    let _ = logging::stdout_text("ready\n");
    let signals = crate::startup::signals::signals();
    while signals.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(100));
    }
    for p in &made {
        let _ = std::fs::remove_file(p);
    }
    tracing::info!("proxy stopped");
    Ok(())
}

/// A connection's forwarding, run on a thread of its own.
type Job = Box<dyn FnOnce() -> io::Result<()> + Send>;

/// Accepts with `accept` forever on a thread, running each connection's
/// job on a thread of its own (at most [`MAX_CONNECTIONS`] at once).
fn spawn_accept(
    side: &'static str,
    accept: impl Fn() -> io::Result<Job> + Send + 'static,
) -> Result<(), LauncherError> {
    let live = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name(format!("proxy-{side}"))
        .spawn(move || loop {
            let job = match accept() {
                Ok(j) => j,
                Err(e) => {
                    tracing::warn!("proxy {side}: accept: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            if live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                tracing::warn!("proxy {side}: {MAX_CONNECTIONS} connections already: refused");
                continue;
            }
            live.fetch_add(1, Ordering::SeqCst);
            let live = Arc::clone(&live);
            let spawned = std::thread::Builder::new()
                .name(format!("proxy-{side}-conn"))
                .spawn(move || {
                    if let Err(e) = job() {
                        tracing::warn!("proxy {side}: {e}");
                    }
                    live.fetch_sub(1, Ordering::SeqCst);
                });
            if let Err(e) = spawned {
                tracing::warn!("proxy {side}: cannot start a connection thread: {e}");
            }
        })
        .map_err(|e| err(format!("cannot start the {side} proxy: {e}")))?;
    Ok(())
}

/// Copies bytes both ways between `t` and `u` until both directions end;
/// the end of one direction is passed on as a half close.
fn pump(t: UnixStream, u: UnixStream) {
    let (Ok(t2), Ok(u2)) = (t.try_clone(), u.try_clone()) else {
        return;
    };
    let up = std::thread::Builder::new()
        .name("proxy-copy".into())
        .spawn(move || {
            copy(
                t2,
                u2,
                |s| s.0.shutdown(Shutdown::Read),
                |s| s.1.shutdown(Shutdown::Write),
            );
        });
    copy(
        u,
        t,
        |s| s.0.shutdown(Shutdown::Read),
        |s| s.1.shutdown(Shutdown::Write),
    );
    if let Ok(h) = up {
        let _ = h.join();
    }
}

/// Copies `from` to `to` until EOF or an error, then half-closes both.
fn copy<R: Read, W: Write>(
    from: R,
    to: W,
    close_from: impl FnOnce(&(R, W)) -> io::Result<()>,
    close_to: impl FnOnce(&(R, W)) -> io::Result<()>,
) {
    let mut pair = (from, to);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pair.0.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if pair.1.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = close_from(&pair);
    let _ = close_to(&pair);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn uids_are_file_name_parts() {
        check_uid("6b2c4f3e-1a2b-4c5d-8e9f-0a1b2c3d4e5f").unwrap();
        check_uid("e2e-12-0").unwrap();
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            let e = check_uid(bad).unwrap_err().to_string();
            assert!(e.contains("--uid"), "{e}");
        }
    }

    /// Bytes go both ways through the Unix → hop → Unix chain, and a
    /// half close reaches the far end.
    #[test]
    fn forwards_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let far = dir.path().join("far.sock");
        let far_l = UnixListener::bind(&far).unwrap();
        let hop = dir.path().join("hop.sock");
        let hop_l = UnixListener::bind(&hop).unwrap();
        let f = far.clone();
        spawn_accept("target", move || {
            let (c, _) = hop_l.accept()?;
            let f = f.clone();
            Ok(Box::new(move || {
                pump(c, UnixStream::connect(&f)?);
                Ok(())
            }) as Job)
        })
        .unwrap();
        let near = dir.path().join("near.sock");
        let near_l = UnixListener::bind(&near).unwrap();
        spawn_accept("source", move || {
            let (c, _) = near_l.accept()?;
            let hop = hop.clone();
            Ok(Box::new(move || {
                pump(UnixStream::connect(&hop)?, c);
                Ok(())
            }) as Job)
        })
        .unwrap();
        let mut client = UnixStream::connect(&near).unwrap();
        let (mut server, _) = far_l.accept().unwrap();
        client.write_all(b"ping").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"ping");
        server.write_all(b"pong").unwrap();
        drop(server);
        let mut back = Vec::new();
        client.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"pong");
    }
}
