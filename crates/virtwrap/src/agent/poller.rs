//! The guest agent poller (KubeVirt `virtwrap/agent-poller`): while the
//! agent is connected, one thread runs each group of commands once at
//! once, then again after an interval that starts at
//! `min(10 s, group max)` and doubles up to the group's maximum (KubeVirt's
//! flags: sys 120 s, file 300 s, user 10 s, version 300 s, fsfreeze 5 s;
//! the load joins sys). A command that fails, times out or answers garbage
//! marks only its datum stale (the last good value stays); the others run
//! on. On disconnect polling stops and the store is cleared.
//!
//! The thread never touches the gRPC runtime or libvirt's event loop: it
//! talks to libvirt through the launcher's connection and hands changes
//! to `on_change` (which queues a notification).

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::parse;
use super::store::{AgentData, AgentStore};
use super::{AgentChannel, AgentError, POLL_TIMEOUT};

/// The poll groups (KubeVirt's agent poller workers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// `guest-info` (flag: version, 300 s).
    Version,
    /// `guest-get-fsinfo` (flag: file, 300 s).
    Files,
    /// `guest-fsfreeze-status` (5 s).
    FsFreeze,
    /// interfaces, OS info, host name, time zone (flag: sys, 120 s).
    Sys,
    /// `guest-get-users` (flag: user, 10 s).
    Users,
    /// `guest-get-load` (sys interval).
    Load,
}

/// Every group, in the order a round runs them. `guest-info` comes first:
/// once the OS info reaches virt-handler (the agent-connected condition),
/// its GetGuestInfo must already carry the agent's version.
pub const GROUPS: [Group; 6] = [
    Group::Version,
    Group::Sys,
    Group::FsFreeze,
    Group::Users,
    Group::Files,
    Group::Load,
];

/// Poll intervals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intervals {
    /// First interval after the immediate run (KubeVirt: 10 s), capped by
    /// each group's maximum.
    pub initial: Duration,
    /// Maximum interval per group, indexed like [`GROUPS`].
    pub max: [Duration; 6],
}

impl Intervals {
    /// KubeVirt's defaults (section 7.1 of the facts).
    pub fn kubevirt() -> Self {
        let s = Duration::from_secs;
        Intervals {
            initial: s(10),
            max: [s(300), s(120), s(5), s(10), s(300), s(120)],
        }
    }
}

enum Ctl {
    Connected,
    Disconnected,
    Probe,
    Stop,
}

/// Handle of the poller thread (cheap to clone). Dropping the last handle
/// does not stop it; [`Poller::stop`] does.
#[derive(Clone)]
pub struct Poller {
    tx: Sender<Ctl>,
    store: Arc<AgentStore>,
    on_change: Arc<dyn Fn() + Send + Sync>,
}

impl Poller {
    /// Starts the thread, idle until [`Poller::connected`].
    ///
    /// # Errors
    /// The spawn error.
    pub fn start(
        channel: Arc<dyn AgentChannel>,
        store: Arc<AgentStore>,
        intervals: Intervals,
        on_change: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Poller> {
        let (tx, rx) = mpsc::channel();
        let p = Poller {
            tx,
            store,
            on_change,
        };
        let worker = p.clone();
        // std's 2 MiB stack limit stays: the thread decodes the guest's
        // (untrusted) agent replies with serde, whose recursion is bounded
        // by depth limits, not by a stack size measured here; 16 KiB of it
        // are resident in a running launcher.
        std::thread::Builder::new()
            .name("agent-poller".into())
            .spawn(move || worker.run(&rx, channel.as_ref(), intervals))?;
        Ok(p)
    }

    /// libvirt reported the agent connected: poll everything now.
    pub fn connected(&self) {
        let _ = self.tx.send(Ctl::Connected);
    }

    /// libvirt reported the agent disconnected (or the domain stopped).
    pub fn disconnected(&self) {
        let _ = self.tx.send(Ctl::Disconnected);
    }

    /// Events may have been missed (libvirt reconnect, start-up): ask the
    /// agent whether it is there.
    pub fn probe(&self) {
        let _ = self.tx.send(Ctl::Probe);
    }

    /// Ends the thread.
    pub fn stop(&self) {
        let _ = self.tx.send(Ctl::Stop);
    }

    /// Records a freeze status learnt outside the poll (freeze, thaw).
    pub fn set_fsfreeze_status(&self, s: &str) {
        let changed = self
            .store
            .lock()
            .fsfreeze
            .record("guest-fsfreeze-status", Ok(s.to_owned()));
        if changed {
            (self.on_change)();
        }
    }

    fn set_connected(&self, sched: &mut Option<Schedule>, intervals: &Intervals, up: bool) {
        let mut d = self.store.lock();
        if up {
            if !d.connected {
                d.connected = true;
                drop(d);
                tracing::info!("guest agent connected; polling");
                *sched = Some(Schedule::new(intervals));
            }
        } else {
            *sched = None;
            if *d != AgentData::default() {
                *d = AgentData::default();
                drop(d);
                tracing::info!("guest agent disconnected; polling stopped");
                (self.on_change)();
            }
        }
    }

    /// Applies one control message; false on Stop.
    fn handle(
        &self,
        m: Ctl,
        sched: &mut Option<Schedule>,
        intervals: &Intervals,
        ch: &dyn AgentChannel,
    ) -> bool {
        match m {
            Ctl::Connected => self.set_connected(sched, intervals, true),
            Ctl::Disconnected => self.set_connected(sched, intervals, false),
            Ctl::Probe => match ch.command(r#"{"execute":"guest-ping"}"#, POLL_TIMEOUT) {
                Ok(_) => self.set_connected(sched, intervals, true),
                Err(e) if e.is_not_connected() || e == AgentError::NoDomain => {
                    self.set_connected(sched, intervals, false);
                }
                Err(e) => tracing::debug!("guest agent probe: {e}"),
            },
            Ctl::Stop => return false,
        }
        true
    }

    fn run(&self, rx: &Receiver<Ctl>, ch: &dyn AgentChannel, intervals: Intervals) {
        let mut sched: Option<Schedule> = None;
        loop {
            let wait = sched.as_ref().map_or(Duration::from_secs(3600), |s| {
                s.next_due().saturating_duration_since(Instant::now())
            });
            match rx.recv_timeout(wait) {
                Ok(m) => {
                    if !self.handle(m, &mut sched, &intervals, ch) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            for (i, g) in GROUPS.iter().enumerate() {
                let due = sched.as_ref().is_some_and(|s| s.due(i, Instant::now()));
                if !due {
                    continue;
                }
                let lost = self.poll_group(*g, ch);
                if let Some(s) = sched.as_mut() {
                    s.ran(i, Instant::now(), &intervals);
                }
                if lost {
                    self.set_connected(&mut sched, &intervals, false);
                }
                // Lifecycle news between groups: a disconnect stops the round.
                while let Ok(m) = rx.try_recv() {
                    if !self.handle(m, &mut sched, &intervals, ch) {
                        return;
                    }
                }
            }
        }
    }

    /// Runs one group's commands; true when the agent turned out gone.
    fn poll_group(&self, g: Group, ch: &dyn AgentChannel) -> bool {
        let cmds: &[&str] = match g {
            Group::Version => &["guest-info"],
            Group::Files => &["guest-get-fsinfo"],
            Group::FsFreeze => &["guest-fsfreeze-status"],
            Group::Sys => &[
                "guest-network-get-interfaces",
                "guest-get-osinfo",
                "guest-get-host-name",
                "guest-get-timezone",
            ],
            Group::Users => &["guest-get-users"],
            Group::Load => &["guest-get-load"],
        };
        let mut changed = false;
        for name in cmds {
            let reply = ch.command(&format!(r#"{{"execute":"{name}"}}"#), POLL_TIMEOUT);
            if let Err(e) = &reply {
                if e.is_not_connected() || *e == AgentError::NoDomain {
                    return true;
                }
            }
            let mut d = self.store.lock();
            let r = reply.as_deref().map_err(Clone::clone);
            fn via<T>(
                r: &Result<&str, AgentError>,
                f: fn(&str) -> Result<T, parse::ParseError>,
            ) -> Result<T, AgentError> {
                r.clone().and_then(|s| f(s).map_err(AgentError::from))
            }
            match *name {
                "guest-info" => {
                    d.info.record(name, via(&r, parse::agent_info));
                }
                "guest-get-fsinfo" => {
                    d.filesystems.record(name, via(&r, parse::filesystems));
                }
                "guest-fsfreeze-status" => {
                    changed |= d.fsfreeze.record(name, via(&r, parse::fsfreeze_status));
                }
                "guest-network-get-interfaces" => {
                    changed |= d.interfaces.record(name, via(&r, parse::interfaces));
                }
                "guest-get-osinfo" => {
                    changed |= d.os.record(name, via(&r, parse::os_info));
                }
                "guest-get-host-name" => {
                    d.hostname.record(name, via(&r, parse::host_name));
                }
                "guest-get-timezone" => {
                    d.timezone.record(name, via(&r, parse::timezone));
                }
                "guest-get-users" => {
                    d.users.record(name, via(&r, parse::users));
                }
                _ => {
                    d.load.record(name, via(&r, parse::load));
                }
            }
        }
        if changed {
            (self.on_change)();
        }
        false
    }
}

/// When each group runs next, and its current interval.
struct Schedule {
    next: [Instant; 6],
    interval: [Duration; 6],
}

impl Schedule {
    fn new(iv: &Intervals) -> Self {
        let now = Instant::now();
        Schedule {
            next: [now; 6],
            interval: iv.max.map(|m| iv.initial.min(m)),
        }
    }

    fn next_due(&self) -> Instant {
        self.next.iter().min().copied().unwrap_or_else(Instant::now)
    }

    fn due(&self, i: usize, now: Instant) -> bool {
        self.next[i] <= now
    }

    fn ran(&mut self, i: usize, now: Instant, iv: &Intervals) {
        self.next[i] = now + self.interval[i];
        self.interval[i] = (self.interval[i] * 2).min(iv.max[i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// A scripted agent: replies by command name; counts calls.
    #[derive(Default)]
    struct Fake {
        replies: Mutex<HashMap<String, Result<String, AgentError>>>,
        calls: Mutex<Vec<String>>,
        delay: Mutex<HashMap<String, Duration>>,
    }

    impl Fake {
        fn set(&self, cmd: &str, r: Result<&str, AgentError>) {
            self.replies
                .lock()
                .unwrap()
                .insert(cmd.into(), r.map(str::to_owned));
        }
        fn count(&self, cmd: &str) -> usize {
            self.calls
                .lock()
                .unwrap()
                .iter()
                .filter(|c| *c == cmd)
                .count()
        }
    }

    impl AgentChannel for Fake {
        fn command(&self, cmd: &str, _t: Duration) -> Result<String, AgentError> {
            let v: serde_json::Value = serde_json::from_str(cmd).unwrap();
            let name = v["execute"].as_str().unwrap().to_owned();
            self.calls.lock().unwrap().push(name.clone());
            let d = self.delay.lock().unwrap().get(&name).copied();
            if let Some(d) = d {
                std::thread::sleep(d);
            }
            self.replies
                .lock()
                .unwrap()
                .get(&name)
                .cloned()
                .unwrap_or_else(|| Err(AgentError::Libvirt(format!("no reply for {name}"))))
        }
        fn fs_freeze(&self) -> Result<u32, AgentError> {
            Ok(1)
        }
        fn fs_thaw(&self) -> Result<u32, AgentError> {
            Ok(1)
        }
        fn reboot(&self) -> Result<(), AgentError> {
            Ok(())
        }
    }

    fn good(f: &Fake) {
        f.set("guest-ping", Ok(r#"{"return":{}}"#));
        f.set(
            "guest-info",
            Ok(r#"{"return":{"version":"10.0.2","supported_commands":[{"name":"guest-ping","enabled":true}]}}"#),
        );
        f.set("guest-get-osinfo", Ok(r#"{"return":{"id":"debian"}}"#));
        f.set(
            "guest-get-host-name",
            Ok(r#"{"return":{"host-name":"vm1"}}"#),
        );
        f.set(
            "guest-get-timezone",
            Ok(r#"{"return":{"zone":"UTC","offset":0}}"#),
        );
        f.set("guest-get-users", Ok(r#"{"return":[]}"#));
        f.set("guest-get-fsinfo", Ok(r#"{"return":[]}"#));
        f.set(
            "guest-get-load",
            Ok(r#"{"return":{"load1m":1.5,"load5m":1.0,"load15m":0.5}}"#),
        );
        f.set("guest-fsfreeze-status", Ok(r#"{"return":"thawed"}"#));
        f.set(
            "guest-network-get-interfaces",
            Ok(r#"{"return":[{"name":"lo"},{"name":"eth0","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"10.0.2.2"}]}]}"#),
        );
    }

    fn fast() -> Intervals {
        let ms = Duration::from_millis;
        Intervals {
            initial: ms(20),
            max: [ms(1000), ms(40), ms(20), ms(40), ms(1000), ms(40)],
        }
    }

    fn wait_until(what: &str, f: impl Fn() -> bool) {
        let start = Instant::now();
        while !f() {
            assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn start(f: &Arc<Fake>) -> (Poller, Arc<AgentStore>, Arc<AtomicUsize>) {
        let store = Arc::new(AgentStore::default());
        let changes = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&changes);
        let p = Poller::start(
            Arc::clone(f) as Arc<dyn AgentChannel>,
            Arc::clone(&store),
            fast(),
            Arc::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
        (p, store, changes)
    }

    #[test]
    fn the_version_is_known_before_the_os_info_is_published() {
        let f = Arc::new(Fake::default());
        good(&f);
        let (p, store, _) = start(&f);
        p.connected();
        wait_until("OS info polled", || store.status_parts().0.is_some());
        let calls = f.calls.lock().unwrap().clone();
        let at = |c: &str| calls.iter().position(|x| x == c);
        assert!(
            at("guest-info") < at("guest-get-osinfo"),
            "first round: {calls:?}"
        );
        assert_eq!(store.guest_info().guest_agent_version, "10.0.2");
        p.stop();
    }

    #[test]
    fn polls_only_while_connected_and_clears_on_disconnect() {
        let f = Arc::new(Fake::default());
        good(&f);
        let (p, store, changes) = start(&f);
        std::thread::sleep(Duration::from_millis(100));
        assert!(f.calls.lock().unwrap().is_empty(), "idle before connect");
        p.connected();
        wait_until("guest info polled", || {
            store.guest_info().guest_agent_version == "10.0.2"
        });
        wait_until("interfaces polled", || store.status_parts().1.is_some());
        let info = store.guest_info();
        assert_eq!(info.hostname, "vm1");
        assert_eq!(info.timezone, "UTC, 0");
        assert_eq!(info.os.id, "debian");
        assert_eq!(store.load().unwrap().load1, 1.5);
        let (_, ifs, fz) = store.status_parts();
        assert_eq!(ifs.unwrap()[0].ip, "10.0.2.2");
        assert_eq!(fz, "thawed");
        assert!(changes.load(Ordering::SeqCst) >= 1);
        p.disconnected();
        wait_until("cleared", || !store.connected());
        assert_eq!(store.snapshot(), AgentData::default());
        let n = f.calls.lock().unwrap().len();
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(
            f.calls.lock().unwrap().len(),
            n,
            "no polling after disconnect"
        );
        p.stop();
    }

    #[test]
    fn intervals_double_up_to_each_group_maximum() {
        let f = Arc::new(Fake::default());
        good(&f);
        let (p, _store, _) = start(&f);
        p.connected();
        std::thread::sleep(Duration::from_millis(600));
        p.stop();
        // fsfreeze every 20 ms (~30), sys capped at 40 ms (~15), version
        // at 20, 40, 80, 160, 320 ms (~5-6).
        let fz = f.count("guest-fsfreeze-status");
        let sys = f.count("guest-get-osinfo");
        let ver = f.count("guest-info");
        assert!(
            fz > sys && sys > ver,
            "fsfreeze {fz}, sys {sys}, version {ver}"
        );
        assert!((4..=8).contains(&ver), "version polled {ver} times");
    }

    #[test]
    fn a_failing_or_garbage_command_marks_only_its_datum_stale() {
        let f = Arc::new(Fake::default());
        good(&f);
        let (p, store, _) = start(&f);
        p.connected();
        wait_until("hostname", || store.guest_info().hostname == "vm1");
        f.set("guest-get-host-name", Ok("{\"return\": garbage"));
        f.set(
            "guest-get-osinfo",
            Err(AgentError::Libvirt(
                "Guest agent is not responding: Guest agent not available for now".into(),
            )),
        );
        f.set(
            "guest-get-timezone",
            Ok(r#"{"return":{"zone":"CET","offset":3600}}"#),
        );
        wait_until("timezone updated", || {
            store.guest_info().timezone == "CET, 3600"
        });
        wait_until("stale", || store.snapshot().stale().len() == 2);
        let d = store.snapshot();
        assert_eq!(d.stale(), ["guest-get-osinfo", "guest-get-host-name"]);
        // The last good values stay.
        assert_eq!(d.hostname.value.as_deref(), Some("vm1"));
        assert_eq!(d.os.value.unwrap().id, "debian");
        assert!(d.hostname.error.unwrap().contains("invalid agent reply"));
        p.stop();
    }

    #[test]
    fn a_slow_command_delays_the_others_only_by_its_own_time() {
        let f = Arc::new(Fake::default());
        good(&f);
        f.delay
            .lock()
            .unwrap()
            .insert("guest-get-users".into(), Duration::from_millis(300));
        let (p, store, _) = start(&f);
        p.connected();
        std::thread::sleep(Duration::from_millis(900));
        p.stop();
        assert!(f.count("guest-fsfreeze-status") >= 3);
        assert!(store.snapshot().stale().is_empty());
    }

    #[test]
    fn probe_finds_an_agent_whose_event_was_missed_and_a_lost_one() {
        let f = Arc::new(Fake::default());
        good(&f);
        let (p, store, _) = start(&f);
        p.probe();
        wait_until("connected by probe", || store.connected());
        f.set(
            "guest-ping",
            Err(AgentError::Libvirt(
                "argument unsupported: QEMU guest agent is not connected".into(),
            )),
        );
        p.probe();
        wait_until("disconnected by probe", || !store.connected());
        p.stop();
    }

    #[test]
    fn an_agent_gone_mid_poll_is_treated_as_disconnected() {
        let f = Arc::new(Fake::default());
        good(&f);
        let (p, store, _) = start(&f);
        p.connected();
        wait_until("connected", || store.guest_info().hostname == "vm1");
        f.set(
            "guest-fsfreeze-status",
            Err(AgentError::Libvirt(
                "QEMU guest agent is not connected".into(),
            )),
        );
        wait_until("disconnected", || !store.connected());
        assert_eq!(store.guest_info().hostname, "");
        p.stop();
    }
}
