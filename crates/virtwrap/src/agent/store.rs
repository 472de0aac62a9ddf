//! What the poller learnt from the guest agent, shared with the RPCs that
//! read it: each datum's last good value and whether it went stale, and
//! the replies built from them (GetGuestInfo, GetUsers, GetFilesystems,
//! the domain status's agent parts).

use std::sync::{Mutex, MutexGuard};

use wire::api_domain::InterfaceStatus;
use wire::guest_info::{FileSystem, FileSystemInfo, GuestAgentInfo, GuestOsInfo, GuestOsUser};

use super::parse::{AgentInfo, GuestLoad, Timezone};
use super::AgentError;

/// KubeVirt caps the users and file systems of GetGuestInfo at 10.
pub const GUEST_INFO_LIST_CAP: usize = 10;

/// One polled value: the last good one, and whether the latest attempt
/// failed (then `error` says why).
#[derive(Clone, Debug, PartialEq)]
pub struct Datum<T> {
    /// The last value the agent gave, `None` before the first success.
    pub value: Option<T>,
    /// The latest attempt failed.
    pub stale: bool,
    /// Why it failed.
    pub error: Option<String>,
}

impl<T> Default for Datum<T> {
    fn default() -> Self {
        Datum {
            value: None,
            stale: false,
            error: None,
        }
    }
}

impl<T: PartialEq> Datum<T> {
    /// Records an attempt; true when the value changed.
    pub(super) fn record(&mut self, name: &str, r: Result<T, AgentError>) -> bool {
        match r {
            Ok(v) => {
                self.stale = false;
                self.error = None;
                let changed = self.value.as_ref() != Some(&v);
                self.value = Some(v);
                changed
            }
            Err(e) => {
                if !self.stale {
                    tracing::warn!(datum = name, "guest agent: {e}; keeping the last value");
                }
                self.stale = true;
                self.error = Some(e.to_string());
                false
            }
        }
    }
}

impl<T: Clone> Datum<Vec<T>> {
    /// The first `n` entries of the last value (none before the first).
    fn first(&self, n: usize) -> Vec<T> {
        self.value.iter().flatten().take(n).cloned().collect()
    }
}

/// Everything polled from the agent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentData {
    /// The agent channel is connected (libvirt's agent lifecycle).
    pub connected: bool,
    /// `guest-info`.
    pub info: Datum<AgentInfo>,
    /// `guest-get-osinfo`.
    pub os: Datum<GuestOsInfo>,
    /// `guest-get-host-name`.
    pub hostname: Datum<String>,
    /// `guest-get-timezone`.
    pub timezone: Datum<Timezone>,
    /// `guest-get-users`.
    pub users: Datum<Vec<GuestOsUser>>,
    /// `guest-get-fsinfo`.
    pub filesystems: Datum<Vec<FileSystem>>,
    /// `guest-get-load`.
    pub load: Datum<GuestLoad>,
    /// `guest-network-get-interfaces`.
    pub interfaces: Datum<Vec<InterfaceStatus>>,
    /// `guest-fsfreeze-status`.
    pub fsfreeze: Datum<String>,
}

impl AgentData {
    /// Names of the data whose latest attempt failed.
    pub fn stale(&self) -> Vec<&'static str> {
        [
            ("guest-info", self.info.stale),
            ("guest-get-osinfo", self.os.stale),
            ("guest-get-host-name", self.hostname.stale),
            ("guest-get-timezone", self.timezone.stale),
            ("guest-get-users", self.users.stale),
            ("guest-get-fsinfo", self.filesystems.stale),
            ("guest-get-load", self.load.stale),
            ("guest-network-get-interfaces", self.interfaces.stale),
            ("guest-fsfreeze-status", self.fsfreeze.stale),
        ]
        .into_iter()
        .filter(|(_, s)| *s)
        .map(|(n, _)| n)
        .collect()
    }

    /// KubeVirt's GetGuestInfo reply (users and file systems capped at 10).
    pub fn guest_info(&self) -> GuestAgentInfo {
        let info = self.info.value.clone().unwrap_or_default();
        GuestAgentInfo {
            guest_agent_version: info.version,
            supported_commands: info.supported_commands,
            hostname: self.hostname.value.clone().unwrap_or_default(),
            os: self.os.value.clone().unwrap_or_default(),
            timezone: self.timezone.value.clone().unwrap_or_default().kubevirt(),
            user_list: self.users.first(GUEST_INFO_LIST_CAP),
            fs_info: FileSystemInfo {
                disks: self.filesystems.first(GUEST_INFO_LIST_CAP),
            },
            fs_freeze_status: self.fsfreeze.value.clone().unwrap_or_default(),
        }
    }

    /// What the domain status carries: (OS info, interfaces, fsfreeze).
    fn status_parts(&self) -> (Option<GuestOsInfo>, Option<Vec<InterfaceStatus>>, String) {
        (
            self.os.value.clone(),
            self.interfaces.value.clone(),
            self.fsfreeze.value.clone().unwrap_or_default(),
        )
    }
}

/// The poller's data, shared with the RPCs that read it.
#[derive(Debug, Default)]
pub struct AgentStore {
    data: Mutex<AgentData>,
}

impl AgentStore {
    pub(super) fn lock(&self) -> MutexGuard<'_, AgentData> {
        self.data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of everything.
    pub fn snapshot(&self) -> AgentData {
        self.lock().clone()
    }

    /// The agent is connected.
    pub fn connected(&self) -> bool {
        self.lock().connected
    }

    /// KubeVirt's GetGuestInfo reply.
    pub fn guest_info(&self) -> GuestAgentInfo {
        self.lock().guest_info()
    }

    /// Every user (GetUsers).
    pub fn users(&self) -> Vec<GuestOsUser> {
        self.lock().users.value.clone().unwrap_or_default()
    }

    /// Every file system (GetFilesystems).
    pub fn filesystems(&self) -> Vec<FileSystem> {
        self.lock().filesystems.value.clone().unwrap_or_default()
    }

    /// The guest's load averages, when known.
    pub fn load(&self) -> Option<GuestLoad> {
        self.lock().load.value
    }

    /// (OS info, interfaces, fsfreeze status) for the domain status JSON.
    pub fn status_parts(&self) -> (Option<GuestOsInfo>, Option<Vec<InterfaceStatus>>, String) {
        self.lock().status_parts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_info_caps_users_and_filesystems_at_ten() {
        let mut d = AgentData::default();
        d.users.value = Some(
            (0..25)
                .map(|i| GuestOsUser {
                    user_name: format!("u{i}"),
                    ..GuestOsUser::default()
                })
                .collect(),
        );
        d.filesystems.value = Some(vec![FileSystem::default(); 12]);
        let g = d.guest_info();
        assert_eq!(g.user_list.len(), 10);
        assert_eq!(g.fs_info.disks.len(), 10);
        assert_eq!(g.timezone, ", 0");
        let j = serde_json::to_value(&g).unwrap();
        assert_eq!(j["os"], serde_json::json!({}));
        assert!(j.get("hostname").is_none());
    }
}
