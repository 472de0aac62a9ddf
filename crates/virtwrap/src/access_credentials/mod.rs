//! Access credentials through the guest agent (KubeVirt v1.6.6
//! `pkg/virt-launcher/virtwrap/access-credentials`, kubevirt-facts §7.2):
//! `sshPublicKey` credentials with `qemuGuestAgent` propagation put the
//! keys of their secret into each listed user's `~/.ssh/authorized_keys`,
//! `userPassword` credentials set each user's password, for as long as
//! the domain runs, following changes of the secrets.
//!
//! When (KubeVirt's `HandleQemuAgentAccessCredentials`, started by the
//! pre-start step of the first define, once per launcher): a thread checks
//! every [`CHECK_INTERVAL`] (15 s); the first check and any check after a
//! change of a secret's files apply everything ([`guest::apply`]); a round
//! that failed is repeated at the next check, and every
//! [`FORCE_RESYNC`] (5 min) everything is applied again anyway.
//! KubeVirt learns of changes from fsnotify and acts on them only at its
//! 15 s tick; here each check compares a fingerprint of the directories
//! (names, inodes, sizes, times of each entry and of what its link leads
//! to), which gives the same behaviour without a watch descriptor per
//! directory and also sees a file rewritten in place.
//!
//! The result: each report is stored as the runtime metadata's
//! `AccessCredential {Succeeded, Message}` (the domain's
//! `spec.metadata.kubevirt.accessCredential` in every api.Domain sent to
//! virt-handler), from which virt-handler sets the VMI condition
//! `AccessCredentialsSynchronized` (`vm.go`
//! `updateAccessCredentialConditions`).

pub mod collect;
pub mod guest;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use api::VirtualMachineInstance;
use wire::api_domain::AccessCredentialMetadata;

use crate::agent::AgentChannel;
use crate::metadata::MetadataCache;

/// KubeVirt's `resyncCheckIntervalSeconds`.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(15);
/// KubeVirt's forced resync period.
pub const FORCE_RESYNC: Duration = Duration::from_secs(300);

/// The secrets a VMI's guest-agent credentials use (KubeVirt
/// `getSecretDirs`), each once, in spec order.
pub fn secrets(vmi: &VirtualMachineInstance) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &vmi.spec.access_credentials {
        if let Some(s) = c.guest_agent_secret().filter(|s| !s.is_empty()) {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        }
    }
    out
}

/// The propagation thread of one launcher (started at most once).
#[derive(Default)]
pub struct CredentialWatcher {
    running: Mutex<Option<Running>>,
    started: Mutex<bool>,
}

struct Running {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

/// What the thread works with.
pub struct WatchSetup {
    /// Secret name → its directory.
    pub dirs: BTreeMap<String, PathBuf>,
    /// The agent of the VMI's domain.
    pub channel: Arc<dyn AgentChannel>,
    /// Where results go.
    pub metadata: Arc<MetadataCache>,
    /// Time between checks ([`CHECK_INTERVAL`] unless a test shortens it).
    pub check_interval: Duration,
}

impl CredentialWatcher {
    /// Starts propagating `vmi`'s guest-agent credentials, the first time
    /// only; nothing when it has none. Every secret directory must exist
    /// (KubeVirt adds each to its fsnotify watcher here, and fails the
    /// same way).
    ///
    /// # Errors
    /// KubeVirt's `Starting qemu agent access credential propagation
    /// failed: ...` for a missing directory or a thread that cannot start.
    pub fn start_once(
        &self,
        vmi: &VirtualMachineInstance,
        setup: impl FnOnce() -> WatchSetup,
    ) -> Result<(), String> {
        let mut started = self
            .started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *started || secrets(vmi).is_empty() {
            return Ok(());
        }
        let setup = setup();
        let failed =
            |e: String| format!("Starting qemu agent access credential propagation failed: {e}");
        for dir in setup.dirs.values() {
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(failed(format!("{}: not a directory", dir.display()))),
                Err(e) => return Err(failed(format!("{}: {e}", dir.display()))),
            }
        }
        let (stop, stopped) = mpsc::channel();
        let vmi = vmi.clone();
        let thread = std::thread::Builder::new()
            .name("access-creds".into())
            .spawn(move || watch(&vmi, &setup, &stopped))
            .map_err(|e| failed(e.to_string()))?;
        *self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Running { stop, thread });
        *started = true;
        Ok(())
    }

    /// Stops the thread and waits for it (its agent calls are bounded).
    pub fn stop(&self) {
        let r = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(r) = r {
            let _ = r.stop.send(());
            let _ = r.thread.join();
        }
    }
}

impl Drop for CredentialWatcher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// KubeVirt's `watchSecrets` loop (see the module's documentation).
fn watch(vmi: &VirtualMachineInstance, s: &WatchSetup, stopped: &mpsc::Receiver<()>) {
    let mut reload = true;
    let mut fingerprint = fingerprint(&s.dirs);
    let mut last_force = Instant::now();
    let dir_of = |name: &str| s.dirs.get(name).cloned();
    loop {
        match stopped.recv_timeout(s.check_interval) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                tracing::info!("Signalled to stop watching access credential secrets");
                return;
            }
        }
        let now = self::fingerprint(&s.dirs);
        if now != fingerprint {
            fingerprint = now;
            reload = true;
            tracing::info!("Reloading access credentials because secret changed");
        }
        if last_force.elapsed() >= FORCE_RESYNC {
            last_force = Instant::now();
            reload = true;
            tracing::info!("Resyncing access credentials due to recurring resync period");
        }
        if !reload {
            continue;
        }
        let collected = collect::collect(vmi, &dir_of);
        reload = guest::apply(s.channel.as_ref(), &collected, &mut |succeeded, message| {
            tracing::debug!(succeeded, %message, "Access credential set in metadata");
            s.metadata.update(|m| {
                m.access_credential = Some(AccessCredentialMetadata { succeeded, message });
            });
        });
    }
}

/// What identifies the state of the secret directories: for each entry
/// (at most [`storage::secrets::MAX_SECRET_ENTRIES`] + 1 per directory)
/// its name, inode, size and times, and those of what it leads to.
fn fingerprint(dirs: &BTreeMap<String, PathBuf>) -> Vec<(PathBuf, Vec<u64>)> {
    fn stamp(m: &std::fs::Metadata) -> [u64; 5] {
        [
            m.ino(),
            m.size(),
            m.mtime_nsec().unsigned_abs() ^ m.mtime().unsigned_abs().rotate_left(32),
            m.ctime_nsec().unsigned_abs() ^ m.ctime().unsigned_abs().rotate_left(32),
            u64::from(m.mode()),
        ]
    }
    let mut out = Vec::new();
    for dir in dirs.values() {
        let Ok(list) = std::fs::read_dir(dir) else {
            out.push((dir.clone(), vec![]));
            continue;
        };
        let mut entries: Vec<(PathBuf, Vec<u64>)> = list
            .flatten()
            .take(storage::secrets::MAX_SECRET_ENTRIES + 1)
            .map(|e| {
                let p: &Path = &e.path();
                let mut v = Vec::new();
                if let Ok(m) = std::fs::symlink_metadata(p) {
                    v.extend(stamp(&m));
                }
                if let Ok(m) = std::fs::metadata(p) {
                    v.extend(stamp(&m));
                }
                (p.to_path_buf(), v)
            })
            .collect();
        entries.sort();
        out.extend(entries);
    }
    out
}

#[cfg(test)]
mod tests;
