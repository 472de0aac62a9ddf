//! GetVMStats' guest agent items (KubeVirt main `manager.go`
//! `agentDataCommandTTLs` and `GetAgentData`): for each command a cache of
//! the agent's raw JSON reply to `{"execute":"<command>"}`, asked again
//! once its time to live passed (20 s for load and CPU and disk
//! statistics, 1 min for time, vCPUs, memory block info and users, 5 min
//! for OS info, disks, host name, time zone, routes and interfaces, 30 min
//! for memory blocks). A failed call keeps the cached reply for later
//! calls and fails this one with KubeVirt's `failed to get agent data for
//! <command>: <libvirt's error>`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{AgentChannel, POLL_TIMEOUT};

/// KubeVirt's time to live of each command's reply.
pub const TTLS: [(&str, Duration); 14] = [
    ("guest-get-load", Duration::from_secs(20)),
    ("guest-get-cpustats", Duration::from_secs(20)),
    ("guest-get-diskstats", Duration::from_secs(20)),
    ("guest-get-time", Duration::from_secs(60)),
    ("guest-get-vcpus", Duration::from_secs(60)),
    ("guest-get-memory-block-info", Duration::from_secs(60)),
    ("guest-get-users", Duration::from_secs(60)),
    ("guest-get-osinfo", Duration::from_secs(300)),
    ("guest-get-disks", Duration::from_secs(300)),
    ("guest-get-host-name", Duration::from_secs(300)),
    ("guest-get-timezone", Duration::from_secs(300)),
    ("guest-network-get-route", Duration::from_secs(300)),
    ("guest-network-get-interfaces", Duration::from_secs(300)),
    ("guest-get-memory-blocks", Duration::from_secs(1800)),
];

/// Why GetVMStats has no reply for an agent item; KubeVirt's messages,
/// which virt-handler reads in the item's error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgentDataError {
    /// The command is not one of [`TTLS`] (cut to the bound of a string).
    #[error("cache not found for data key: {0}")]
    UnknownCommand(String),
    /// The agent call failed.
    #[error("failed to get agent data for {command}: {message}")]
    Agent {
        /// The command.
        command: String,
        /// libvirt's error as KubeVirt prints it
        /// (`virError(Code=.., Domain=.., Message='..')`).
        message: String,
    },
}

#[derive(Default)]
struct Entry {
    refreshed: Option<Instant>,
    value: String,
}

/// The caches of every command of [`TTLS`].
pub struct DataCaches {
    entries: BTreeMap<&'static str, (Duration, Mutex<Entry>)>,
}

impl Default for DataCaches {
    fn default() -> Self {
        DataCaches {
            entries: TTLS
                .iter()
                .map(|(c, ttl)| (*c, (*ttl, Mutex::new(Entry::default()))))
                .collect(),
        }
    }
}

impl DataCaches {
    /// The reply to `command` through `channel`: the cached one while it
    /// is younger than its time to live, else a fresh one (waiting up to
    /// [`POLL_TIMEOUT`], as libvirt's default agent timeout). Calls for the
    /// same command wait for each other (KubeVirt's value lock).
    ///
    /// # Errors
    /// [`AgentDataError`], KubeVirt's messages: `cache not found for data
    /// key: <command>` for a command not in [`TTLS`]; `failed to get agent
    /// data for <command>: virError(Code=.., Domain=.., Message='..')`.
    pub fn get(&self, command: &str, channel: &dyn AgentChannel) -> Result<String, AgentDataError> {
        let Some((ttl, entry)) = self.entries.get(command) else {
            return Err(AgentDataError::UnknownCommand(super::bounds::cut(command)));
        };
        let mut e = entry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if e.refreshed.is_some_and(|t| t.elapsed() <= *ttl) {
            return Ok(e.value.clone());
        }
        let req = serde_json::json!({ "execute": command }).to_string();
        match channel.command_vir(&req, POLL_TIMEOUT) {
            Ok(v) => {
                e.value = v;
                e.refreshed = Some(Instant::now());
                Ok(e.value.clone())
            }
            Err(message) => Err(AgentDataError::Agent {
                command: command.to_owned(),
                message,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::AgentError;
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting {
        calls: AtomicUsize,
        fail: std::sync::atomic::AtomicBool,
    }

    impl AgentChannel for Counting {
        fn command(&self, cmd: &str, _t: Duration) -> Result<String, AgentError> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(AgentError::Libvirt(
                    "QEMU guest agent is not connected".into(),
                ));
            }
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(format!("{{\"return\":{n},\"cmd\":{cmd}}}"))
        }
        fn fs_freeze(&self) -> Result<u32, AgentError> {
            Ok(0)
        }
        fn fs_thaw(&self) -> Result<u32, AgentError> {
            Ok(0)
        }
        fn reboot(&self) -> Result<(), AgentError> {
            Ok(())
        }
    }

    #[test]
    fn replies_are_cached_for_their_ttl_and_failures_worded_as_kubevirt() {
        let ch = Counting {
            calls: AtomicUsize::new(0),
            fail: false.into(),
        };
        let c = DataCaches::default();
        let first = c.get("guest-get-time", &ch).unwrap();
        assert_eq!(first, r#"{"return":0,"cmd":{"execute":"guest-get-time"}}"#);
        assert_eq!(c.get("guest-get-time", &ch).unwrap(), first, "cached");
        assert_eq!(ch.calls.load(Ordering::SeqCst), 1);
        ch.fail.store(true, Ordering::SeqCst);
        assert_eq!(
            c.get("guest-get-load", &ch).unwrap_err().to_string(),
            "failed to get agent data for guest-get-load: QEMU guest agent is not connected"
        );
        assert_eq!(
            c.get("guest-exec", &ch).unwrap_err().to_string(),
            "cache not found for data key: guest-exec"
        );
        // Every command of GetVMStats has a cache.
        for cmd in TTLS.map(|(c, _)| c) {
            assert!(c.entries.contains_key(cmd));
        }
    }
}
