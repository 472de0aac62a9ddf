//! virt-handler's shutdown loop against the launcher's grace-period record,
//! end to end: the virt-handler stand-in (`tests/handler/virt-handler`)
//! runs virt-handler's controller for a real guest under TCG in a pod-mode
//! launcher.
//!
//! - A deleted VMI whose guest ignores shutdown requests: virt-handler sends
//!   ShutdownVirtualMachine, again every 5 s at most, counts the grace
//!   period from the DeletionTimestamp the launcher recorded on the first
//!   one, then sends KillVirtualMachine.
//! - A SIGTERM to the launcher (kubelet deleting the pod): the launcher marks
//!   the domain for graceful shutdown, virt-handler reacts with
//!   ShutdownVirtualMachine, and both records survive a later sync.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{guest_vmi, Launcher};
use crate::network::with_user_data;
use crate::protocol::{handler_for, handler_succeeded, wait_for_marker};

/// The JSON of the stand-in's `<prefix> <json>` line.
fn data(stdout: &str, prefix: &str) -> Value {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix}line in:\n{stdout}"));
    serde_json::from_str(line).unwrap()
}

/// Seconds since the epoch of an RFC 3339 timestamp with seconds
/// resolution in UTC (`2026-01-02T03:04:05Z`), as the launcher records it.
fn epoch(ts: &str) -> f64 {
    let days_from_civil = |y: i64, m: i64, d: i64| {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
    };
    let n = |a: usize, b: usize| ts[a..b].parse::<i64>().unwrap();
    assert!(ts.len() == 20 && ts.ends_with('Z'), "{ts}");
    let days = days_from_civil(n(0, 4), n(5, 7), n(8, 10));
    (days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19)) as f64
}

#[test]
fn a_deleted_vmi_whose_guest_ignores_shutdown_is_killed_after_the_recorded_grace_period() {
    // The guest stops its agent (and the loop restarting it) and acpid:
    // libvirt's default shutdown then presses the ACPI button, which
    // nothing in the guest acts on.
    let script = "#!/bin/sh\nkill $(cat /run/qemu-ga.loop.pid)\nsleep 1\nkill $(cat /run/qemu-ga.pid) 2>/dev/null\nkill $(cat /run/acpid.pid)\necho SHUTDOWN-IGNORED\n";
    let yaml = with_user_data(&guest_vmi("ignoring", "virtio"), script).replace(
        "terminationGracePeriodSeconds: 30",
        "terminationGracePeriodSeconds: 5",
    );
    assert!(yaml.contains("terminationGracePeriodSeconds: 5") && yaml.contains("SHUTDOWN-IGNORED"));
    let mut l = Launcher::start_pod_for_handler(&yaml);
    // A VirtualMachine's VMI, deleted as `virtctl stop` deletes it.
    let h = handler_for(&l, &yaml, &["--stop", "delete-ignored", "--owner-vm"]);
    let stdout = handler_succeeded(h, &l);
    let grace = data(&stdout, "GRACE ");
    let calls = data(&stdout, "CALLS ");
    let recorded = epoch(grace["deletionTimestamp"].as_str().unwrap());
    assert_eq!(grace["terminationGracePeriodSeconds"], 5, "{grace}");
    // The launcher recorded the first request: not before the VMI's deletion.
    assert!(
        recorded >= epoch(grace["vmiDeletionTimestamp"].as_str().unwrap()),
        "{grace}"
    );
    let of = |m: &str| -> Vec<(f64, bool)> {
        calls
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["method"] == m)
            .map(|c| (c["start"].as_f64().unwrap(), c["ok"].as_bool().unwrap()))
            .collect()
    };
    let shutdowns = of("ShutdownVirtualMachine");
    assert!(shutdowns.len() >= 2, "Shutdown not sent again: {calls}");
    // After the deletion (the stand-in's early probe, a Kill for another
    // UID, is refused and not part of the shutdown).
    let after = |m: &str| -> Vec<(f64, bool)> {
        of(m)
            .into_iter()
            .filter(|(t, _)| *t > shutdowns[0].0)
            .collect()
    };
    let kills = after("KillVirtualMachine");
    let deletes = after("DeleteVirtualMachine");
    assert!(shutdowns.iter().all(|(_, ok)| *ok), "{calls}");
    let (first_kill, kill_ok) = *kills.first().unwrap_or_else(|| panic!("no Kill: {calls}"));
    assert!(kill_ok, "{calls}");
    // Order: every Shutdown before the Kill, the Delete after it.
    assert!(shutdowns.iter().all(|(t, _)| *t < first_kill), "{calls}");
    assert!(
        deletes.iter().any(|(t, _)| *t > first_kill),
        "no Delete after the Kill: {calls}"
    );
    // Shutdown again at most 5 s after the previous one returned while the
    // grace period runs (a little slack for a loaded machine), and the Kill
    // no earlier than the grace period after the recorded DeletionTimestamp.
    // Measured from the previous call's end: one Shutdown can itself take
    // libvirt's 5 s guest-agent wait when libvirt still counts the killed
    // agent as connected (seen in CI under load: 8.5 s calls, 10 ms apart).
    let ends: Vec<f64> = calls
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["method"] == "ShutdownVirtualMachine")
        .map(|c| c["end"].as_f64().unwrap())
        .collect();
    let mut next_starts: Vec<f64> = shutdowns.iter().skip(1).map(|(t, _)| *t).collect();
    next_starts.push(first_kill);
    for (end, next) in ends.iter().zip(&next_starts) {
        assert!(next - end <= 5.5, "a gap of {:.2} s: {calls}", next - end);
    }
    assert!(
        first_kill >= recorded + 5.0,
        "Kill at {first_kill}, {:.2} s after the recorded {recorded}",
        first_kill - recorded
    );
    assert!(
        first_kill < recorded + 12.0,
        "Kill {:.2} s after the recorded timestamp: {calls}",
        first_kill - recorded
    );
    // The launcher exits cleanly; the guest never powered off by itself,
    // and the launcher's own grace period (20 s, no signal) did not act.
    l.wait_success(Duration::from_secs(60));
    let s = l.serial();
    assert!(s.contains("SHUTDOWN-IGNORED"), "{s}");
    assert!(!s.contains("GUEST-SHUTDOWN"), "{s}");
    assert!(!l.log().contains("grace period of"), "{}", l.log());
    l.assert_nothing_left();
}

#[test]
fn sigterm_marks_the_domain_for_graceful_shutdown_and_virt_handler_shuts_it_down() {
    // The guest stops its agent (libvirt's default shutdown is then the
    // ACPI button) and its power button ignores presses for 15 s after the
    // first one: the launcher's own request and virt-handler's first ones
    // go unanswered while the stand-in checks the records; a Shutdown
    // virt-handler re-sends later powers it off.
    let script = "#!/bin/sh\nkill $(cat /run/qemu-ga.loop.pid)\nsleep 1\nkill $(cat /run/qemu-ga.pid) 2>/dev/null\ncat >/etc/acpi/PWRF/00000080 <<'EOF'\n#!/bin/sh\nnow=$(cut -d. -f1 /proc/uptime)\n[ -f /run/first-press ] || echo \"$now\" >/run/first-press\nif [ $((now - $(cat /run/first-press))) -lt 15 ]; then echo SHUTDOWN-REFUSED >/dev/ttyS0; exit 0; fi\nPATH=/usr/sbin:/usr/bin:/sbin:/bin exec poweroff\nEOF\necho SHUTDOWN-GATED\n";
    let yaml = with_user_data(&guest_vmi("gated", "virtio"), script);
    let mut l = Launcher::start_pod_for_handler(&yaml);
    let mut h = handler_for(&l, &yaml, &["--stop", "sigterm"]);
    let (seen, rest, err, ok, _) = sigterm_when_ready(&mut h, &l);
    assert!(ok, "{seen}{rest}\n{err}\n--- launcher ---\n{}", l.log());
    let records = data(&rest, "RECORDS ");
    let g = &records["before"];
    // The mark and the shutdown request's time, both in GetDomain, and a
    // later SyncVirtualMachine changed neither (nor did the events after it).
    assert_eq!(g["MarkedForGracefulShutdown"], true, "{records}");
    assert_eq!(g["DeletionGracePeriodSeconds"], 30, "{records}");
    epoch(g["DeletionTimestamp"].as_str().unwrap());
    assert_eq!(records["after"], records["before"], "{records}");
    assert!(
        records["eventsAfterSync"].as_u64().unwrap() >= 1,
        "{records}"
    );
    // virt-handler's Shutdown, on the trigger and again every 5 s at most.
    let shutdowns: Vec<f64> = records["shutdowns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    assert!(shutdowns.len() >= 2, "{records}");
    assert!(
        shutdowns.windows(2).all(|w| w[1] - w[0] <= 5.5),
        "{records}"
    );
    // Refused first, then powered off.
    l.wait_success(Duration::from_secs(60));
    let s = l.serial();
    let line = |m: &str| {
        s.lines()
            .position(|l| l.trim_end() == m)
            .unwrap_or_else(|| panic!("no {m} line:\n{s}"))
    };
    assert!(line("SHUTDOWN-REFUSED") < line("GUEST-SHUTDOWN"), "{s}");
    assert!(!l.log().contains("grace period of"), "{}", l.log());
    // The handler's events carried the mark.
    let events = std::fs::read_to_string(l.dir.path().join("events.jsonl")).unwrap();
    assert!(
        events.lines().any(|e| {
            let v: Value = serde_json::from_str(e).unwrap();
            v["domain"]["Spec"]["Metadata"]["KubeVirt"]["GracePeriod"]["MarkedForGracefulShutdown"]
                == true
        }),
        "{events}"
    );
    l.assert_nothing_left();
}

/// A guest agent that takes guest-shutdown and never powers off keeps
/// libvirt's shutdown call waiting 60 s. The launcher (found with the
/// stand-in: it used to hold its one libvirt connection through such a
/// call) still notifies the mark at once, answers GetDomain, and kills the
/// guest when its own grace period (5 + 15 s) ends.
#[test]
fn a_shutdown_request_the_guest_agent_swallows_stalls_neither_notifications_nor_the_kill() {
    let script = "#!/bin/sh\nkill $(cat /run/acpid.pid)\nmv /sbin/shutdown /sbin/shutdown.real\nprintf '#!/bin/sh\\necho SHUTDOWN-SWALLOWED >/dev/ttyS0\\n' >/sbin/shutdown\nchmod 755 /sbin/shutdown\necho SHUTDOWN-SWALLOWING\n";
    let yaml = with_user_data(&guest_vmi("stalled", "virtio"), script).replace(
        "terminationGracePeriodSeconds: 30",
        "terminationGracePeriodSeconds: 5",
    );
    let mut l = Launcher::start_pod_for_handler(&yaml);
    let mut h = handler_for(&l, &yaml, &["--stop", "sigterm-stalled"]);
    let (seen, rest, err, ok, sigterm_at) = sigterm_when_ready(&mut h, &l);
    assert!(ok, "{seen}{rest}\n{err}\n--- launcher ---\n{}", l.log());
    let st = data(&rest, "STALLED ");
    let at = |k: &str| st[k].as_f64().unwrap();
    assert!(at("markedAt") - sigterm_at < 5.0, "{st}");
    assert!(st["getDomainSeconds"].as_f64().unwrap() < 2.0, "{st}");
    let killed = at("destroyedAt") - sigterm_at;
    assert!(
        (20.0..35.0).contains(&killed),
        "killed {killed:.1} s after SIGTERM: {st}"
    );
    l.wait_success(Duration::from_secs(60));
    assert!(
        l.log().contains("grace period of 20 s expired"),
        "{}",
        l.log()
    );
    let s = l.serial();
    assert!(s.contains("SHUTDOWN-SWALLOWED"), "{s}");
    assert!(!s.contains("GUEST-SHUTDOWN"), "{s}");
    l.assert_nothing_left();
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Waits for the stand-in's READY-FOR-SIGTERM, sends the launcher SIGTERM
/// (kubelet deleting the pod), then reads the rest: (before, after,
/// stderr, success with OK, when the signal was sent).
fn sigterm_when_ready(
    h: &mut std::process::Child,
    l: &Launcher,
) -> (String, String, String, bool, f64) {
    let mut stdout = h.stdout.take().unwrap();
    let seen = wait_for_marker(&mut stdout, "READY-FOR-SIGTERM", l);
    let at = now();
    l.signal(nix::sys::signal::Signal::SIGTERM);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(h.stderr.as_mut().unwrap(), &mut err).unwrap();
    let st = h.wait().unwrap();
    let ok = st.success() && rest.contains("OK");
    (seen, rest, err, ok, at)
}
