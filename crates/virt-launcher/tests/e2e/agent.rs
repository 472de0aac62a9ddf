//! The guest agent end to end: the real qemu-ga 10 in the test guest,
//! reached through the launcher's command socket with `virt-launcher ctl`
//! (the same gRPC calls virt-handler and virt-probe make) and, for the raw
//! replies, through the launcher's libvirt with the launcher's own agent
//! channel; KubeVirt's virt-probe and virt-freezer (`crates/image-tools`)
//! against the same guests.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use virtwrap::agent::{AgentChannel, LibvirtAgent};
use virtwrap::manager::Connector;

use crate::harness::{guest_vmi, launcher_bin, Launcher, Opts, BOOT_TIMEOUT};

/// How long polled data may take to appear: the agent connects after
/// GUEST-READY, and the sys group re-polls at 10 s, then 30 s, 70 s ...
const POLL_WAIT: Duration = Duration::from_secs(90);

/// Boots the guest `name` with GetVMStats enabled (`--vm-stats-collector`).
fn boot(name: &str) -> Launcher {
    let opts = Opts {
        args: &["--vm-stats-collector"],
        ..Opts::default()
    };
    let mut l = Launcher::start(&guest_vmi(name, "virtio"), &opts);
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    l
}

/// `virt-launcher ctl --socket <launcher-sock> -o json ARGS`:
/// (success, stdout, stderr).
fn ctl(l: &Launcher, args: &[&str]) -> (bool, String, String) {
    l.ctl(&[&["-o", "json"], args].concat())
}

/// `ctl ARGS` that must succeed, its JSON output.
pub(crate) fn ctl_json(l: &Launcher, args: &[&str]) -> Value {
    let (ok, out, err) = ctl(l, args);
    assert!(
        ok,
        "ctl {args:?} failed: {err}\n--- launcher ---\n{}",
        l.log()
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("ctl {args:?}: {e}: {out}"))
}

fn wait_for(l: &Launcher, what: &str, timeout: Duration, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < timeout,
            "not within {timeout:?}: {what}\n--- launcher ---\n{}",
            l.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One of KubeVirt's image programs of this build (`crates/image-tools`:
/// virt-probe, virt-freezer), beside the launcher.
fn image_tool(name: &str) -> std::path::PathBuf {
    let p = launcher_bin().with_file_name(name);
    assert!(
        p.is_file(),
        "{} is missing: cargo build -p image-tools",
        p.display()
    );
    p
}

/// Runs `cmd`: (exit code, stdout, stderr).
fn run_tool(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("run the image program");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// virt-probe as virt-controller wraps a probe for VMI `name` in namespace
/// `e2e` (`--domainName e2e_<name> --timeoutSeconds T ...`), on `l`'s socket.
fn virt_probe(l: &Launcher, name: &str, args: &[&str]) -> (i32, String, String) {
    run_tool(
        Command::new(image_tool("virt-probe"))
            .arg("--socket")
            .arg(l.state.join("share/sockets/launcher-sock"))
            .args([
                "--domainName",
                &format!("e2e_{name}"),
                "--timeoutSeconds",
                "5",
            ])
            .args(args),
    )
}

/// virt-freezer as a backup hook runs it in the compute container: in the
/// launcher's mount namespace, where `/run/kubevirt/sockets/launcher-sock`
/// (its fixed socket) is the launcher's.
fn virt_freezer(l: &Launcher, args: &[&str]) -> (i32, String, String) {
    run_tool(
        Command::new("nsenter")
            .arg("--mount")
            .arg("--target")
            .arg(l.worker_pid().to_string())
            .arg(image_tool("virt-freezer"))
            .args(args),
    )
}

fn agent_channel_state(dom: &Value) -> String {
    dom["Spec"]["Devices"]["Channels"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["Target"]["Name"] == "org.qemu.guest_agent.0")
        .and_then(|c| c["Target"]["State"].as_str())
        .unwrap_or("")
        .to_owned()
}

pub(crate) fn raw_agent(l: &Launcher) -> LibvirtAgent {
    let conn = virtwrap::connection::Shared::open(Connector {
        daemon: "libvirtd".into(),
        uri: l.uri(),
        socket: l.state.join("libvirt/run/libvirt-sock"),
    })
    .expect("connect to the launcher's daemon");
    LibvirtAgent::new(std::sync::Arc::new(conn), l.domain.clone())
}

#[test]
fn agent_info_os_hostname_interfaces_exec_and_ping() {
    let l = boot("agentinfo");
    wait_for(&l, "guest info from the agent", POLL_WAIT, || {
        let g = ctl_json(&l, &["guestinfo"]);
        g["guestAgentVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("10."))
            && g["os"]["id"] == "busybox-guest"
            && g["hostname"] == "localhost"
    });
    let g = ctl_json(&l, &["guestinfo"]);
    assert_eq!(g["timezone"], "UTC, 0", "{g}");
    assert_eq!(g["fsFreezeStatus"], "thawed", "{g}");
    assert_eq!(g["os"]["machine"], "x86_64", "{g}");
    let cmds: Vec<&str> = g["supportedCommands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for c in [
        "guest-ping",
        "guest-exec",
        "guest-get-osinfo",
        "guest-fsfreeze-freeze",
    ] {
        assert!(cmds.contains(&c), "{c} missing: {cmds:?}");
    }
    // The guest's load (guest-get-load) rides in the domain statistics.
    let stats = ctl_json(&l, &["stats"]);
    assert_eq!(stats["Load"]["Load1mSet"], true, "{stats}");
    assert!(stats["Load"]["Load15m"].as_f64().unwrap() >= 0.0, "{stats}");
    // The guest has no file systems on block devices and nobody logged in.
    assert_eq!(ctl_json(&l, &["users"]), serde_json::json!([]));
    assert_eq!(ctl_json(&l, &["filesystems"]), serde_json::json!([]));

    // The domain status carries the OS info; the guest has only the
    // loopback, which KubeVirt never reports: no interfaces.
    let dom = ctl_json(&l, &["domain"]);
    assert_eq!(dom["Status"]["OSInfo"]["Id"], "busybox-guest", "{dom}");
    assert_eq!(dom["Status"]["OSInfo"]["Name"], "Busybox Guest", "{dom}");
    assert_eq!(dom["Status"]["Interfaces"], Value::Null, "{dom}");
    assert_eq!(dom["Status"]["FSFreezeStatus"]["Status"], "thawed");
    assert_eq!(agent_channel_state(&dom), "connected", "{dom}");

    // Issue 18 on this guest: screenshot, GetVMStats, the clock after
    // Unpause, the refusals of SEV and backup.
    crate::screen_stats::screenshot_shows_the_text_screen(&l);
    crate::screen_stats::vm_stats_answer_every_item(&l);
    crate::screen_stats::unpause_sets_the_guest_clock(&l);
    crate::screen_stats::sev_and_backup_refusals(&l);

    let raw = raw_agent(&l)
        .command(
            r#"{"execute":"guest-network-get-interfaces"}"#,
            Duration::from_secs(10),
        )
        .unwrap();
    assert!(raw.contains(r#""ip-address":"127.0.0.1""#), "{raw}");
    assert_eq!(virtwrap::agent::parse::interfaces(&raw).unwrap(), vec![]);

    // Exec: stdout and exit code, as virt-probe gets them.
    let r = ctl_json(&l, &["exec", "--", "/bin/echo", "hello", "agent"]);
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["stdOut"], "hello agent\n", "{r}");
    let r = ctl_json(&l, &["exec", "--", "/bin/sh", "-c", "echo out; exit 3"]);
    assert_eq!(
        (r["exitCode"].as_i64(), r["stdOut"].as_str()),
        (Some(3), Some("out\n"))
    );
    // Arguments reach the guest verbatim (JSON-escaped on the way).
    let r = ctl_json(&l, &["exec", "--", "/bin/echo", "a\"b\\c", "$HOME"]);
    assert_eq!(r["stdOut"], "a\"b\\c $HOME\n", "{r}");
    let (ok, _, err) = ctl(&l, &["exec", "--timeout", "2", "--", "/bin/sleep", "30"]);
    assert!(
        !ok && err.contains("Timed out waiting for guest pid"),
        "{err}"
    );
    let (ok, _, err) = ctl(&l, &["exec", "--", "/no/such/program"]);
    assert!(!ok && !err.is_empty(), "a missing program is an error");
    assert_eq!(ctl_json(&l, &["guestping"])["ok"], true);
    // virt-probe (KubeVirt's exec and guest-agent ping probes): the
    // command's exit code is the probe's, its output printed with a
    // newline; the ping exits 0; a call without an answer exits 255.
    let (code, out, err) = virt_probe(
        &l,
        "agentinfo",
        &["--command", "/bin/sh", "--", "-c", "echo probe; exit 4"],
    );
    assert_eq!((code, out.as_str()), (4, "probe\n\n"), "{err}");
    let (code, out, err) = virt_probe(&l, "agentinfo", &["--command", "/bin/true"]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let (code, _, err) = virt_probe(&l, "agentinfo", &["--guestAgentPing"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = virt_probe(&l, "agentinfo", &["--command", "/no/such/program"]);
    assert!(
        code == 255 && err.contains("Failed executing the command"),
        "{code} {err}"
    );
    // A reader that goes away (`ctl ... | head`) is no failure of ctl.
    let mut child = Command::new(launcher_bin())
        .arg("ctl")
        .arg("--socket")
        .arg(l.state.join("share/sockets/launcher-sock"))
        .args(["-o", "json", "domain"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ctl with a closed stdout: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    // Polling goes on: a new host name shows up at a later sys poll.
    let r = ctl_json(&l, &["exec", "--", "/bin/hostname", "agent-e2e"]);
    assert_eq!(r["exitCode"], 0);
    wait_for(&l, "the new host name", POLL_WAIT, || {
        ctl_json(&l, &["guestinfo"])["hostname"] == "agent-e2e"
    });
}

#[test]
fn freeze_thaw_and_thaw_by_itself_after_the_unfreeze_timeout() {
    let l = boot("agentfreeze");
    wait_for(&l, "agent connected", POLL_WAIT, || {
        ctl_json(&l, &["guestinfo"])["fsFreezeStatus"] == "thawed"
    });
    // Something to freeze: an ext2 file system on the scratch disk (the
    // guest's root is an initramfs, which qemu-ga does not freeze).
    let r = ctl_json(
        &l,
        &[
            "exec",
            "--timeout",
            "60",
            "--",
            "/bin/sh",
            "-c",
            "mke2fs -q /dev/vdb && mkdir -p /mnt/scratch && mount -t ext2 /dev/vdb /mnt/scratch",
        ],
    );
    assert_eq!(r["exitCode"], 0, "{r}");
    // The file system and its disk show up at a later poll.
    wait_for(&l, "the scratch file system", POLL_WAIT, || {
        ctl_json(&l, &["filesystems"])
            .as_array()
            .is_some_and(|a| !a.is_empty())
    });
    let fs = ctl_json(&l, &["filesystems"]);
    assert_eq!(fs[0]["diskName"], "vdb", "{fs}");
    assert_eq!(fs[0]["mountPoint"], "/mnt/scratch", "{fs}");
    assert_eq!(fs[0]["fileSystemType"], "ext2", "{fs}");
    assert!(fs[0]["totalBytes"].as_u64().unwrap() > 50 << 20, "{fs}");
    assert!(fs[0]["usedBytes"].as_u64().unwrap() > 0, "{fs}");
    assert_eq!(fs[0]["disk"][0]["busType"], "virtio", "{fs}");
    assert_eq!(ctl_json(&l, &["guestinfo"])["fsInfo"]["disks"], fs);
    let guest_status = || {
        raw_agent(&l)
            .command(
                r#"{"execute":"guest-fsfreeze-status"}"#,
                Duration::from_secs(10),
            )
            .unwrap()
    };
    // virt-freezer, as KubeVirt's backup hooks run it: freeze, then thaw.
    let (code, _, err) = virt_freezer(
        &l,
        &["--freeze", "--name", "agentfreeze", "--namespace", "e2e"],
    );
    assert!(
        code == 0 && err.contains("Operation completed successfully"),
        "{code} {err}\n--- launcher ---\n{}",
        l.log()
    );
    assert!(guest_status().contains("frozen"), "{}", guest_status());
    let (code, _, err) = virt_freezer(
        &l,
        &["--unfreeze", "--name", "agentfreeze", "--namespace", "e2e"],
    );
    assert!(
        code == 0 && err.contains("\"component\":\"freezer\""),
        "{code} {err}"
    );
    assert!(guest_status().contains("thawed"), "{}", guest_status());
    let (code, _, err) = virt_freezer(&l, &["--name", "agentfreeze", "--namespace", "e2e"]);
    assert!(
        code == 1 && err.contains("either --freeze or --unfreeze must be set"),
        "{code} {err}"
    );
    assert_eq!(ctl_json(&l, &["freeze"])["ok"], true);
    assert!(
        guest_status().contains("frozen"),
        "{}\n--- launcher ---\n{}",
        guest_status(),
        l.log()
    );
    assert_eq!(ctl_json(&l, &["guestinfo"])["fsFreezeStatus"], "frozen");
    // A frozen guest refuses exec (qemu-ga allows only a few commands).
    let (ok, _, err) = ctl(&l, &["exec", "--", "/bin/true"]);
    assert!(!ok && err.contains("disabled"), "{err}");
    assert_eq!(
        ctl_json(&l, &["domain"])["Status"]["FSFreezeStatus"]["Status"],
        "frozen"
    );
    // Freezing a frozen guest is a success (KubeVirt's idempotence).
    assert_eq!(ctl_json(&l, &["freeze"])["ok"], true);
    assert_eq!(ctl_json(&l, &["unfreeze"])["ok"], true);
    assert!(guest_status().contains("thawed"), "{}", guest_status());
    assert_eq!(
        ctl_json(&l, &["domain"])["Status"]["FSFreezeStatus"]["Status"],
        "thawed"
    );
    assert_eq!(ctl_json(&l, &["unfreeze"])["ok"], true);

    // With an unfreeze timeout the launcher thaws by itself; the caller
    // (this ctl process) is long gone by then.
    let frozen_at = Instant::now();
    assert_eq!(
        ctl_json(&l, &["freeze", "--unfreeze-timeout", "5"])["ok"],
        true
    );
    assert!(guest_status().contains("frozen"));
    wait_for(
        &l,
        "thawed by the launcher",
        Duration::from_secs(30),
        || guest_status().contains("thawed"),
    );
    assert!(
        frozen_at.elapsed() >= Duration::from_secs(5),
        "thawed before the timeout"
    );
    wait_for(&l, "status thawed", Duration::from_secs(10), || {
        ctl_json(&l, &["domain"])["Status"]["FSFreezeStatus"]["Status"] == "thawed"
    });
    assert!(l.log().contains("unfreeze timeout passed"), "{}", l.log());
    // An explicit thaw cancels the pending automatic one.
    assert_eq!(
        ctl_json(&l, &["freeze", "--unfreeze-timeout", "3"])["ok"],
        true
    );
    assert_eq!(ctl_json(&l, &["unfreeze"])["ok"], true);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(l.log().matches("unfreeze timeout passed").count(), 1);
}

#[test]
fn soft_reboot_goes_through_the_agent_and_the_guest_comes_back() {
    let mut l = boot("agentreboot");
    wait_for(&l, "agent connected", POLL_WAIT, || {
        agent_channel_state(&ctl_json(&l, &["domain"])) == "connected"
            && ctl_json(&l, &["guestinfo"])["guestAgentVersion"].is_string()
    });
    assert_eq!(ctl_json(&l, &["softreboot"])["ok"], true);
    l.wait_serial("GUEST-READY", 2, BOOT_TIMEOUT);
    let serial = l.serial();
    assert!(
        serial.contains("hypervisor initiated shutdown: reboot"),
        "not the agent's reboot:\n{serial}"
    );
    assert!(l.log().contains("soft reboot through the guest agent"));
    // The agent comes back, and so does its data.
    wait_for(&l, "agent back after the reboot", POLL_WAIT, || {
        ctl_json(&l, &["guestinfo"])["os"]["id"] == "busybox-guest"
    });
    assert_eq!(ctl_json(&l, &["guestping"])["ok"], true);
}

/// [`boot`]s the guest `name`, waits for its agent to report the OS, then
/// runs `script` in the guest through the agent (waiting `timeout`
/// seconds; its answer is not read: the script may take the agent down
/// before it answers).
fn boot_then_upset_the_agent(name: &str, timeout: &str, script: &str) -> Launcher {
    let l = boot(name);
    wait_for(&l, "agent connected", POLL_WAIT, || {
        ctl_json(&l, &["guestinfo"])["os"]["id"] == "busybox-guest"
    });
    let _ = ctl(
        &l,
        &["exec", "--timeout", timeout, "--", "/bin/sh", "-c", script],
    );
    l
}

#[test]
fn a_killed_agent_is_reported_disconnected_and_the_launcher_keeps_serving() {
    // Stop the guest's qemu-ga supervisor, which kills qemu-ga (the exec's
    // reply may or may not make it out first).
    let l = boot_then_upset_the_agent("agentkill", "5", "kill $(cat /run/qemu-ga.loop.pid)");
    wait_for(&l, "agent disconnected", Duration::from_secs(60), || {
        agent_channel_state(&ctl_json(&l, &["domain"])) == "disconnected"
    });
    wait_for(&l, "agent data cleared", Duration::from_secs(10), || {
        ctl_json(&l, &["guestinfo"])
            .get("guestAgentVersion")
            .is_none()
    });
    let dom = ctl_json(&l, &["domain"]);
    assert_eq!(dom["Status"]["Status"], "Running");
    assert_eq!(dom["Status"]["OSInfo"]["Id"], "", "{dom}");
    // Agent RPCs fail with libvirt's reason, promptly; the others answer.
    let started = Instant::now();
    let (ok, _, err) = ctl(&l, &["guestping", "--timeout", "2"]);
    assert!(!ok && err.contains("not connected"), "{err}");
    let (ok, _, err) = ctl(&l, &["exec", "--", "/bin/true"]);
    assert!(!ok && err.contains("not connected"), "{err}");
    let (ok, _, err) = ctl(&l, &["freeze"]);
    assert!(!ok && err.contains("not connected"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "agent RPCs hung without an agent"
    );
    assert_eq!(ctl_json(&l, &["ping"])["ok"], true);
    assert!(ctl_json(&l, &["stats"])["Name"].is_string());
    assert!(ctl_json(&l, &["version"])["version"]
        .as_str()
        .unwrap()
        .starts_with("QEMU "));
    assert_eq!(ctl_json(&l, &["users"]), serde_json::json!([]));
    assert!(l
        .log()
        .contains("guest agent disconnected; polling stopped"));
    crate::screen_stats::vm_stats_fail_per_item_without_agent(&l);
}

#[test]
fn a_hung_agent_times_out_marks_data_stale_and_never_stalls_the_launcher() {
    // Stop qemu-ga inside the guest: the channel stays open, nothing answers.
    let l = boot_then_upset_the_agent("agenthung", "3", "kill -STOP $(cat /run/qemu-ga.pid)");
    let started = Instant::now();
    let (ok, _, err) = ctl(&l, &["guestping", "--timeout", "2"]);
    assert!(
        !ok && err.contains("agent"),
        "a stopped agent answered the ping: {err}"
    );
    let (ok, _, err) = ctl(&l, &["exec", "--timeout", "2", "--", "/bin/true"]);
    assert!(
        !ok && err.contains("agent"),
        "a stopped agent ran a command: {err}"
    );
    // Bounded: each agent call waits at most its timeout plus libvirt's
    // wait for the agent job held by a polled command (5 s).
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "agent RPCs took {:?}",
        started.elapsed()
    );
    // What the poller knew stays readable; the domain and the server answer.
    assert_eq!(
        ctl_json(&l, &["guestinfo"])["os"]["id"],
        "busybox-guest",
        "last good values are kept"
    );
    let dom = ctl_json(&l, &["domain"]);
    assert_eq!(dom["Status"]["Status"], "Running");
    assert_eq!(agent_channel_state(&dom), "connected");
    assert_eq!(ctl_json(&l, &["ping"])["ok"], true);
    assert!(ctl_json(&l, &["stats"])["Name"].is_string());
    // The poller's fsfreeze status (polled every 5 s) failed: stale, logged.
    wait_for(&l, "a stale datum logged", Duration::from_secs(60), || {
        l.log().contains("keeping the last value")
    });
}
