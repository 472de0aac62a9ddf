//! The QEMU guest agent: commands through libvirt's agent passthrough
//! (`virDomainQemuAgentCommand`, libvirt-qemu), the poller that asks the
//! guest ([`poller`]) and the store that keeps what it said ([`store`]), the
//! parsers of its replies ([`parse`]), and
//! the operations virt-handler asks for: exec, ping, file system freeze and
//! thaw with the automatic thaw, reboot through the agent ([`Agent`]).
//!
//! The agent has its own libvirt connection: a command waits for the guest
//! (up to its timeout) without holding the DomainManager's connection, so a
//! hung agent never delays GetDomain or a lifecycle command. libvirt runs
//! one agent command per domain at a time; every command here has a
//! timeout, so a stuck one delays the next by at most that.

#![allow(unsafe_code)]

pub use guest_agent::{bounds, parse};
pub mod data;
pub mod poller;
pub mod store;
mod thaw;

#[cfg(test)]
mod bounds_tests;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use virt::domain::Domain as VirtDomain;
use virt::error::ErrorNumber;
use virt::sys;

use crate::connection::Shared;
pub use parse::ParseError;
pub use poller::Poller;
pub use store::AgentStore;

/// Timeout of each polled command (KubeVirt waits for libvirt's default,
/// which blocks; a bound keeps a hung agent from stalling the others).
pub const POLL_TIMEOUT: Duration = Duration::from_secs(5);
/// Timeout of freeze, thaw and status commands issued by RPCs.
pub const OP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an agent operation failed. The text is what virt-handler sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// libvirt refused or the agent did not answer (its message: "QEMU
    /// guest agent is not connected", "Guest agent is not responding ...").
    #[error("{0}")]
    Libvirt(String),
    /// The agent answered, but not usably.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The domain does not exist.
    #[error("Domain not found.")]
    NoDomain,
    /// A guest command did not end in time.
    #[error("{0}")]
    Timeout(String),
}

impl AgentError {
    /// The agent channel is closed (qemu-ga not running in the guest).
    pub fn is_not_connected(&self) -> bool {
        matches!(self, AgentError::Libvirt(m) if m.contains("not connected"))
    }
}

/// libvirt's error, its text cut: libvirt quotes the agent's own error
/// description, which the guest writes.
fn libvirt(e: &virt::error::Error) -> AgentError {
    AgentError::Libvirt(bounds::cut(e.message()))
}

/// Where agent commands go. [`LibvirtAgent`] in the launcher; a fake in
/// unit tests of the poller.
pub trait AgentChannel: Send + Sync {
    /// Sends one QGA command (JSON text) and returns the raw reply text.
    ///
    /// # Errors
    /// [`AgentError`].
    fn command(&self, cmd: &str, timeout: Duration) -> Result<String, AgentError>;
    /// [`AgentChannel::command`] whose failure is worded as KubeVirt's Go
    /// code prints a libvirt error (`virError(Code=86, Domain=10,
    /// Message='...')`), for GetVMStats' items. By default the error's text.
    ///
    /// # Errors
    /// The failure's text.
    fn command_vir(&self, cmd: &str, timeout: Duration) -> Result<String, String> {
        self.command(cmd, timeout).map_err(|e| e.to_string())
    }
    /// libvirt's `virDomainFSFreeze` of every file system; the count frozen.
    ///
    /// # Errors
    /// [`AgentError`].
    fn fs_freeze(&self) -> Result<u32, AgentError>;
    /// libvirt's `virDomainFSThaw`; the count thawed.
    ///
    /// # Errors
    /// [`AgentError`].
    fn fs_thaw(&self) -> Result<u32, AgentError>;
    /// `virDomainReboot(VIR_DOMAIN_REBOOT_GUEST_AGENT)`.
    ///
    /// # Errors
    /// [`AgentError`].
    fn reboot(&self) -> Result<(), AgentError>;
    /// `virDomainAuthorizedSSHKeysSet(user, keys, 0)`: `user`'s
    /// `~/.ssh/authorized_keys` becomes exactly `keys` (libvirt's
    /// `guest-ssh-add-authorized-keys` with `reset: true`), as KubeVirt's
    /// `agentSetAuthorizedKeys` calls it. By default unsupported.
    ///
    /// # Errors
    /// The failure worded as Go prints a libvirt error.
    fn set_authorized_keys(&self, _user: &str, _keys: &[String]) -> Result<(), String> {
        Err("setting authorized keys is not supported by this agent channel".into())
    }
    /// `virDomainSetUserPassword(user, password, 0)` (libvirt's
    /// `guest-set-user-password` with the password in clear, `crypted:
    /// false`). By default unsupported.
    ///
    /// # Errors
    /// The failure worded as Go prints a libvirt error.
    fn set_user_password(&self, _user: &str, _password: &str) -> Result<(), String> {
        Err("setting passwords is not supported by this agent channel".into())
    }
}

/// A libvirt error as KubeVirt's Go code prints it (`virError(Code=1,
/// Domain=10, Message='...')`), the message cut (the guest writes part of
/// it).
pub fn go_vir_error(e: &virt::error::Error) -> String {
    format!(
        "virError(Code={}, Domain={}, Message='{}')",
        e.code().to_raw(),
        e.domain().to_raw(),
        bounds::cut(e.message())
    )
}

/// Text that cannot go to libvirt through the binding (which panics on a
/// NUL byte): the refusal naming `what`.
fn refuse_nul(what: &str, text: &str) -> Result<(), String> {
    if text.contains('\0') {
        Err(format!("{what} contains a NUL character"))
    } else {
        Ok(())
    }
}

/// [`AgentChannel`] to the VMI's domain on the launcher's libvirt
/// connection ([`Shared`], reconnected after the daemon restarted).
///
/// The domain handle is looked up once and kept while the connection it
/// came from is the current one: the poller's commands (a freeze status
/// every 5 s, the users every 10 s, ...) then cost one libvirt call each
/// instead of two. A failed command drops it, so the next one looks the
/// domain up again (a domain gone or redefined is found afresh).
pub struct LibvirtAgent {
    conn: Arc<Shared>,
    domain: String,
    cached: Mutex<Option<VirtDomain>>,
}

impl LibvirtAgent {
    /// An agent channel to domain `domain` on `conn`.
    pub fn new(conn: Arc<Shared>, domain: String) -> Self {
        LibvirtAgent {
            conn,
            domain,
            cached: Mutex::new(None),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Option<VirtDomain>> {
        self.cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The domain handle (it keeps the connection it was found on).
    fn dom(&self) -> Result<VirtDomain, AgentError> {
        let mut conn = self.conn.reference();
        let mut cached = self.cache();
        if let Some(d) = cached.as_ref() {
            // SAFETY: `d` is a live domain handle; the call only reads its
            // connection pointer (no reference is taken or dropped).
            let on = unsafe { sys::virDomainGetConnect(d.as_ptr()) };
            // The cached handle holds its connection, so a new connection
            // can never reuse the old one's address while it is cached.
            if on == conn.as_ptr() {
                let d = d.clone();
                let _ = conn.close();
                return Ok(d);
            }
        }
        *cached = None;
        let found = VirtDomain::lookup_by_name(&conn, &self.domain);
        let _ = conn.close();
        match found {
            Ok(d) => {
                *cached = Some(d.clone());
                Ok(d)
            }
            Err(e) if e.code() == ErrorNumber::NoDomain => Err(AgentError::NoDomain),
            Err(e) => Err(libvirt(&e)),
        }
    }

    /// `r`, dropping the cached domain handle when it is an error.
    fn forget_on_error<T, E>(&self, r: Result<T, E>) -> Result<T, E> {
        if r.is_err() {
            *self.cache() = None;
        }
        r
    }
}

impl AgentChannel for LibvirtAgent {
    fn command(&self, cmd: &str, timeout: Duration) -> Result<String, AgentError> {
        if cmd.contains('\0') {
            // The binding panics on NUL; serde_json never writes one raw.
            return Err(AgentError::Libvirt("agent command contains NUL".into()));
        }
        let secs = i32::try_from(timeout.as_secs().max(1)).unwrap_or(i32::MAX);
        let r = self.dom()?.qemu_agent_command(cmd, secs, 0);
        self.forget_on_error(r).map_err(|e| libvirt(&e))
    }

    fn command_vir(&self, cmd: &str, timeout: Duration) -> Result<String, String> {
        if cmd.contains('\0') {
            return Err("agent command contains NUL".into());
        }
        let d = match self.dom() {
            Ok(d) => d,
            Err(AgentError::NoDomain) => {
                return Err(format!(
                    "virError(Code={}, Domain={}, Message='Domain not found: no domain with matching name '{}'')",
                    sys::VIR_ERR_NO_DOMAIN,
                    sys::VIR_FROM_QEMU,
                    self.domain
                ))
            }
            Err(e) => return Err(e.to_string()),
        };
        let secs = i32::try_from(timeout.as_secs().max(1)).unwrap_or(i32::MAX);
        let r = d.qemu_agent_command(cmd, secs, 0);
        self.forget_on_error(r).map_err(|e| go_vir_error(&e))
    }

    fn fs_freeze(&self) -> Result<u32, AgentError> {
        let d = self.dom()?;
        // SAFETY: `d` is a live domain handle; a NULL mountpoint list with
        // count 0 means every file system (libvirt's documented form).
        let n = unsafe { sys::virDomainFSFreeze(d.as_ptr(), std::ptr::null_mut(), 0, 0) };
        if n < 0 {
            return self.forget_on_error(Err(libvirt(&virt::error::Error::last_error())));
        }
        Ok(n.unsigned_abs())
    }

    fn fs_thaw(&self) -> Result<u32, AgentError> {
        let d = self.dom()?;
        // SAFETY: as in fs_freeze.
        let n = unsafe { sys::virDomainFSThaw(d.as_ptr(), std::ptr::null_mut(), 0, 0) };
        if n < 0 {
            return self.forget_on_error(Err(libvirt(&virt::error::Error::last_error())));
        }
        Ok(n.unsigned_abs())
    }

    fn reboot(&self) -> Result<(), AgentError> {
        let r = self.dom()?.reboot(sys::VIR_DOMAIN_REBOOT_GUEST_AGENT);
        self.forget_on_error(r).map_err(|e| libvirt(&e))
    }

    fn set_authorized_keys(&self, user: &str, keys: &[String]) -> Result<(), String> {
        refuse_nul("the user name", user)?;
        for k in keys {
            refuse_nul("a key", k)?;
        }
        let d = self.dom().map_err(|e| e.to_string())?;
        let user = std::ffi::CString::new(user).map_err(|e| e.to_string())?;
        let keys: Vec<std::ffi::CString> = keys
            .iter()
            .map(|k| std::ffi::CString::new(k.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let mut ptrs: Vec<*const std::os::raw::c_char> = keys.iter().map(|k| k.as_ptr()).collect();
        let n = u32::try_from(ptrs.len()).map_err(|_| "too many keys".to_owned())?;
        // An empty list goes as NULL with count 0 (libvirt's form of "no
        // keys"; KubeVirt's binding crashed here, kubevirt/kubevirt#12562).
        let list = if ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            ptrs.as_mut_ptr()
        };
        // SAFETY: `d` is a live domain handle; `user` and every key are
        // NUL-terminated strings that outlive the call; `list` points to
        // `n` of them (or is NULL with n = 0).
        let r =
            unsafe { sys::virDomainAuthorizedSSHKeysSet(d.as_ptr(), user.as_ptr(), list, n, 0) };
        if r < 0 {
            return self.forget_on_error(Err(go_vir_error(&virt::error::Error::last_error())));
        }
        Ok(())
    }

    fn set_user_password(&self, user: &str, password: &str) -> Result<(), String> {
        refuse_nul("the user name", user)?;
        refuse_nul("the password", password)?;
        let r = self
            .dom()
            .map_err(|e| format!("domain lookup failed: {e}"))?
            .set_user_password(user, password, 0);
        self.forget_on_error(r)
            .map(|_| ())
            .map_err(|e| go_vir_error(&e))
    }
}

/// The result of a guest exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecResult {
    /// The process' exit code.
    pub exit_code: i32,
    /// Its standard output, at most [`bounds::MAX_EXEC_OUTPUT`] bytes.
    pub stdout: String,
}

/// Everything the launcher does with the guest agent: the poller's data
/// ([`Agent::store`]) and the operations of virt-handler's RPCs.
pub struct Agent {
    channel: Arc<dyn AgentChannel>,
    store: Arc<AgentStore>,
    poller: Poller,
    /// Bumped by every freeze and thaw: a pending automatic thaw runs only
    /// if nothing happened since it was scheduled.
    thaw_generation: Arc<AtomicU64>,
    /// Serialises freeze and thaw (KubeVirt holds a lock around both).
    freeze_lock: Mutex<()>,
    /// GetVMStats' cached agent replies.
    data: data::DataCaches,
    /// The pending automatic thaw (one thread per agent, not per freeze).
    thaw_timer: thaw::ThawTimer,
}

impl Agent {
    /// An agent on `channel`, with a poller calling `on_change` whenever
    /// the OS info, the interfaces or the freeze status change (the
    /// launcher then notifies virt-handler).
    ///
    /// # Errors
    /// The poller thread's spawn error.
    pub fn start(
        channel: Arc<dyn AgentChannel>,
        on_change: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Agent> {
        let store = Arc::new(AgentStore::default());
        let poller = Poller::start(
            Arc::clone(&channel),
            Arc::clone(&store),
            poller::Intervals::kubevirt(),
            on_change,
        )?;
        let thaw_generation = Arc::new(AtomicU64::new(0));
        let thaw_timer = {
            let channel = Arc::clone(&channel);
            let gen = Arc::clone(&thaw_generation);
            let poller = poller.clone();
            thaw::ThawTimer::new(Box::new(move |generation| {
                if gen.load(Ordering::SeqCst) != generation {
                    return;
                }
                match channel.fs_thaw() {
                    Ok(n) => {
                        tracing::warn!(
                            filesystems = n,
                            "unfreeze timeout passed: guest file systems thawed"
                        );
                        poller.set_fsfreeze_status("thawed");
                    }
                    Err(e) => tracing::error!("automatic thaw failed: {e}"),
                }
            }))
        };
        Ok(Agent {
            channel,
            store,
            poller,
            thaw_generation,
            freeze_lock: Mutex::new(()),
            data: data::DataCaches::default(),
            thaw_timer,
        })
    }

    /// What the poller knows.
    pub fn store(&self) -> &Arc<AgentStore> {
        &self.store
    }

    /// GetVMStats' item `command`: the agent's raw reply, cached for its
    /// time to live ([`data::DataCaches::get`]).
    ///
    /// # Errors
    /// [`data::AgentDataError`]: KubeVirt's `failed to get agent data for
    /// <command>: ...`.
    pub fn data(&self, command: &str) -> Result<String, data::AgentDataError> {
        self.data.get(command, self.channel.as_ref())
    }

    /// The poller (to tell it about agent lifecycle events).
    pub fn poller(&self) -> &Poller {
        &self.poller
    }

    /// `guest-exec` of `command` with `args`, then `guest-exec-status`
    /// until the process exits or `timeout` passes (KubeVirt polls every
    /// `timeout × 100 ms`; here the first polls come sooner, so a quick
    /// command answers quickly). Arguments are JSON-escaped.
    ///
    /// # Errors
    /// [`AgentError`]; a deadline gives KubeVirt's "Timed out waiting for
    /// guest pid \[N\] for command \[C\] to exit".
    pub fn exec(
        &self,
        command: &str,
        args: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, AgentError> {
        let started = Instant::now();
        let req = json!({
            "execute": "guest-exec",
            "arguments": {"path": command, "arg": args, "capture-output": true}
        });
        let pid = parse::exec_pid(&self.channel.command(&req.to_string(), OP_TIMEOUT)?)?;
        let status_req =
            json!({"execute": "guest-exec-status", "arguments": {"pid": pid}}).to_string();
        let max_step = (timeout / 10).max(Duration::from_millis(100));
        let mut step = Duration::from_millis(20);
        loop {
            let s = parse::exec_status(&self.channel.command(&status_req, OP_TIMEOUT)?)?;
            if s.exited {
                return Ok(ExecResult {
                    exit_code: s.exit_code,
                    stdout: s.stdout,
                });
            }
            if started.elapsed() >= timeout {
                return Err(AgentError::Timeout(format!(
                    "Timed out waiting for guest pid [{pid}] for command [{}] to exit",
                    bounds::cut(command)
                )));
            }
            std::thread::sleep(step.min(timeout.saturating_sub(started.elapsed())));
            step = (step * 2).min(max_step);
        }
    }

    /// `guest-ping` with `timeout`.
    ///
    /// # Errors
    /// [`AgentError`].
    pub fn ping(&self, timeout: Duration) -> Result<(), AgentError> {
        let r = self
            .channel
            .command(r#"{"execute":"guest-ping"}"#, timeout)?;
        parse::unwrap_return::<serde_json::Value>(&r)?;
        Ok(())
    }

    /// `guest-fsfreeze-status`, also stored for the domain status.
    ///
    /// # Errors
    /// [`AgentError`].
    pub fn fsfreeze_status(&self) -> Result<String, AgentError> {
        let s = parse::fsfreeze_status(
            &self
                .channel
                .command(r#"{"execute":"guest-fsfreeze-status"}"#, OP_TIMEOUT)?,
        )?;
        self.poller.set_fsfreeze_status(&s);
        Ok(s)
    }

    /// Freezes the guest's file systems (KubeVirt FreezeVMI): nothing to do
    /// when already frozen; otherwise libvirt's FSFreeze. A non-zero
    /// `unfreeze_timeout` schedules a thaw after it that runs whatever the
    /// caller does next (unless a thaw or another freeze comes first).
    ///
    /// # Errors
    /// [`AgentError`].
    pub fn freeze(&self, unfreeze_timeout: Duration) -> Result<(), AgentError> {
        let _g = self
            .freeze_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.fsfreeze_status()? == "frozen" {
            return Ok(());
        }
        let generation = self.thaw_generation.fetch_add(1, Ordering::SeqCst) + 1;
        let n = self.channel.fs_freeze()?;
        tracing::info!(filesystems = n, "guest file systems frozen");
        // What the guest says now: qemu-ga stays "thawed" when it found
        // nothing to freeze.
        if self.fsfreeze_status().is_err() {
            self.poller.set_fsfreeze_status("frozen");
        }
        if unfreeze_timeout.is_zero() {
            self.thaw_timer.cancel();
        } else {
            self.thaw_timer
                .schedule(unfreeze_timeout, generation)
                .map_err(|e| AgentError::Libvirt(format!("cannot schedule the thaw: {e}")))?;
        }
        Ok(())
    }

    /// Thaws the guest's file systems (KubeVirt UnfreezeVMI): cancels a
    /// pending automatic thaw; nothing to do when already thawed.
    ///
    /// # Errors
    /// [`AgentError`].
    pub fn unfreeze(&self) -> Result<(), AgentError> {
        let _g = self
            .freeze_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.thaw_generation.fetch_add(1, Ordering::SeqCst);
        self.thaw_timer.cancel();
        if self.fsfreeze_status()? == "thawed" {
            return Ok(());
        }
        let n = self.channel.fs_thaw()?;
        tracing::info!(filesystems = n, "guest file systems thawed");
        self.poller.set_fsfreeze_status("thawed");
        Ok(())
    }

    /// Reboots through the agent (`guest-shutdown` mode reboot).
    /// libvirt's "agent unresponsive" is not an error (KubeVirt swallows it:
    /// the guest may be rebooting already).
    ///
    /// # Errors
    /// [`AgentError`].
    pub fn reboot(&self) -> Result<(), AgentError> {
        match self.channel.reboot() {
            Err(AgentError::Libvirt(m)) if m.contains("not responding") => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A guest whose exec'd process runs for `runs` status polls, and
    /// whose file systems freeze and thaw; counts thaws.
    struct Guest {
        runs: AtomicUsize,
        frozen: Mutex<bool>,
        thaws: AtomicUsize,
        last_exec: Mutex<String>,
    }

    impl Guest {
        fn new(runs: usize) -> Arc<Guest> {
            Arc::new(Guest {
                runs: AtomicUsize::new(runs),
                frozen: Mutex::new(false),
                thaws: AtomicUsize::new(0),
                last_exec: Mutex::new(String::new()),
            })
        }
    }

    impl AgentChannel for Guest {
        fn command(&self, cmd: &str, _t: Duration) -> Result<String, AgentError> {
            let v: serde_json::Value = serde_json::from_str(cmd).unwrap();
            Ok(match v["execute"].as_str().unwrap() {
                "guest-exec" => {
                    *self.last_exec.lock().unwrap() = cmd.to_owned();
                    r#"{"return":{"pid":42}}"#.into()
                }
                "guest-exec-status" => {
                    assert_eq!(v["arguments"]["pid"], 42);
                    if self.runs.load(Ordering::SeqCst) == 0 {
                        r#"{"return":{"exited":true,"exitcode":7,"out-data":"b3V0Cg=="}}"#.into()
                    } else {
                        self.runs.fetch_sub(1, Ordering::SeqCst);
                        r#"{"return":{"exited":false}}"#.into()
                    }
                }
                "guest-fsfreeze-status" => {
                    if *self.frozen.lock().unwrap() {
                        r#"{"return":"frozen"}"#.into()
                    } else {
                        r#"{"return":"thawed"}"#.into()
                    }
                }
                other => return Err(AgentError::Libvirt(format!("unexpected {other}"))),
            })
        }
        fn fs_freeze(&self) -> Result<u32, AgentError> {
            *self.frozen.lock().unwrap() = true;
            Ok(1)
        }
        fn fs_thaw(&self) -> Result<u32, AgentError> {
            *self.frozen.lock().unwrap() = false;
            self.thaws.fetch_add(1, Ordering::SeqCst);
            Ok(1)
        }
        fn reboot(&self) -> Result<(), AgentError> {
            Err(AgentError::Libvirt(
                "Guest agent is not responding: Guest agent not available for now".into(),
            ))
        }
    }

    fn agent(g: &Arc<Guest>) -> Agent {
        Agent::start(Arc::clone(g) as Arc<dyn AgentChannel>, Arc::new(|| {})).unwrap()
    }

    #[test]
    fn exec_polls_until_exit_and_escapes_arguments() {
        let g = Guest::new(3);
        let a = agent(&g);
        let r = a
            .exec(
                "/bin/echo",
                &["a\"b".into(), "c\\d".into()],
                Duration::from_secs(5),
            )
            .unwrap();
        assert_eq!(
            r,
            ExecResult {
                exit_code: 7,
                stdout: "out\n".into()
            }
        );
        let sent: serde_json::Value = serde_json::from_str(&g.last_exec.lock().unwrap()).unwrap();
        assert_eq!(
            sent["arguments"]["arg"],
            serde_json::json!(["a\"b", "c\\d"])
        );
        assert_eq!(sent["arguments"]["capture-output"], true);
    }

    #[test]
    fn exec_times_out_with_kubevirts_message() {
        let g = Guest::new(usize::MAX);
        let a = agent(&g);
        let e = a
            .exec("/bin/sleep", &["9".into()], Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Timed out waiting for guest pid [42] for command [/bin/sleep] to exit"
        );
    }

    #[test]
    fn freeze_thaws_by_itself_unless_thawed_or_refrozen_first() {
        let g = Guest::new(0);
        let a = agent(&g);
        a.freeze(Duration::from_millis(300)).unwrap();
        assert_eq!(
            a.store().snapshot().fsfreeze.value.as_deref(),
            Some("frozen")
        );
        // Idempotent: already frozen, nothing more happens.
        a.freeze(Duration::ZERO).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(g.thaws.load(Ordering::SeqCst), 1, "thawed by the timer");
        assert!(!*g.frozen.lock().unwrap());
        assert_eq!(
            a.store().snapshot().fsfreeze.value.as_deref(),
            Some("thawed")
        );

        // A thaw before the timeout cancels the timer.
        a.freeze(Duration::from_millis(300)).unwrap();
        a.unfreeze().unwrap();
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(g.thaws.load(Ordering::SeqCst), 2, "one explicit thaw only");
        // Thawing a thawed guest does nothing.
        a.unfreeze().unwrap();
        assert_eq!(g.thaws.load(Ordering::SeqCst), 2);
    }

    /// Threads of this process named `name`.
    fn threads_named(name: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|c| c.trim_end() == name)
            .count()
    }

    /// Issue 19: every freeze started a thread that slept for the whole
    /// `unfreezeTimeoutSeconds` (up to 2^31 - 1 s), even after a thaw.
    /// 200 freeze and thaw cycles with KubeVirt's largest timeout leave one
    /// timer thread, and the last timer still works.
    #[test]
    fn issue19_freezes_share_one_timer_thread() {
        let g = Guest::new(0);
        let a = agent(&g);
        let before = threads_named("auto-thaw");
        for _ in 0..200 {
            a.freeze(Duration::from_secs(2_147_483_647)).unwrap();
            a.unfreeze().unwrap();
        }
        // Other tests' agents may hold a timer thread of their own.
        assert!(
            threads_named("auto-thaw") <= before + 1,
            "{} timer threads",
            threads_named("auto-thaw")
        );
        a.freeze(Duration::from_millis(100)).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while g.thaws.load(Ordering::SeqCst) < 201 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(g.thaws.load(Ordering::SeqCst), 201, "thawed by the timer");
    }

    #[test]
    fn reboot_ignores_an_unresponsive_agent() {
        let g = Guest::new(0);
        assert_eq!(agent(&g).reboot(), Ok(()));
    }
}
