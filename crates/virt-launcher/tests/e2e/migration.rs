//! Live migration between two launchers on this host (issue 16), each in
//! its own private runtime (mount and PID namespaces, its own libvirt
//! daemon with a host UUID of its own), through `virt-launcher
//! migration-proxy` (virt-handler's proxies) and `ctl migrate`.
//!
//! One guest for everything: the cheap refusals first (the guest must keep
//! running on the source after each), a migration cancelled mid-way, one
//! whose target launcher is killed mid-way, one aborted past its
//! completion budget, one stalled (the proxy stopped once memory flows)
//! and aborted as stuck, one that fails before it reaches its prepared
//! target (which `ctl migrate --wait` then signals to clean up, as
//! virt-handler does: the target ends as KubeVirt's, "received early exit
//! signal"), one whose target's libvirt refuses the incoming domain and
//! one with no target behind the proxy (each with a target launcher of its
//! own, which must then end cleanly, or leave nothing behind when
//! killed), then the migration itself and a second hop from the target
//! that switches to post-copy. While the source boots, a target nobody
//! migrates to ends after its short `--qemu-timeout`.
//!
//! The guest has a masquerade interface on the pod network, and every
//! launcher is in a pod network of its own on a "node" of its own (the
//! phase-1 stand-in, `--setup-pod-network`; the targets' pods on node 1,
//! `--pod-subnet 1`, with another pod address than the source's): after
//! the first migration the guest keeps its addresses and reaches out, and
//! is reached, through the target pod only
//! (`pod_network_moved_with_the_guest`). The proxies need nothing of the
//! pods' networks: they run on the node and meet the launchers at Unix
//! sockets in their share directories, as virt-handler's do.
//!
//! Cost: one guest boot (the targets' QEMUs are incoming guests), nine
//! target launchers without a boot (one of them during the boot), ~6 s of migration under TCG, ~7 s of
//! pod network checks and ~0.2 s of phase 1 per launcher: 85-160 s of test
//! time here (loaded 2-core host).

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::harness::{
    guest_vmi, launcher_bin, vcpupins, Launcher, Opts, BOOT_TIMEOUT, POD_WRAPPER,
};
use crate::network::{http_get_in_netns, ip_in_netns, masquerade_vmi, node_netns};
use crate::protocol::handler_for;

/// The guest's uptime in seconds, read through the guest agent.
fn uptime(l: &Launcher) -> f64 {
    let (ok, out, err) = l.ctl(&["exec", "--", "cat", "/proc/uptime"]);
    assert!(ok, "exec cat /proc/uptime: {err}\n{}", l.log());
    out.split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("uptime: {out:?}"))
}

/// A request sent straight to the launcher's command server: (success,
/// message) of MigrateVirtualMachine with `vmi_json` and `options`.
fn migrate_raw(l: &Launcher, vmi_json: &str, options: &[u8]) -> (bool, String) {
    let socket = l.state.join("share/sockets/launcher-sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = cmd::client::Client::connect(&socket).await.unwrap().cmd;
        let r = c
            .migrate_virtual_machine(cmd::proto::cmd::MigrationRequest {
                vmi: Some(cmd::proto::cmd::Vmi {
                    vmi_json: vmi_json.as_bytes().to_vec(),
                }),
                options: options.to_vec(),
            })
            .await
            .unwrap()
            .into_inner();
        (r.success, r.message)
    })
}

/// A VMIRequest command sent straight to the launcher: (success, message)
/// of FinalizeVirtualMachineMigration (`finalize`) or SignalTargetPodCleanup
/// (`cleanup`) for `vmi_json`.
fn vmi_command(l: &Launcher, command: &str, vmi_json: &str) -> (bool, String) {
    let socket = l.state.join("share/sockets/launcher-sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = cmd::client::Client::connect(&socket).await.unwrap().cmd;
        let req = cmd::proto::cmd::VmiRequest {
            vmi: Some(cmd::proto::cmd::Vmi {
                vmi_json: vmi_json.as_bytes().to_vec(),
            }),
            options: None,
        };
        let r = match command {
            "finalize" => c.finalize_virtual_machine_migration(req).await,
            "cleanup" => c.signal_target_pod_cleanup(req).await,
            other => panic!("no command {other}"),
        }
        .unwrap()
        .into_inner();
        (r.success, r.message)
    })
}

/// A target launcher for `yaml` (`run --migration-target`) in a pod
/// network of its own on another node (`--setup-pod-network --pod-subnet
/// 1`: the phase-1 stand-in builds the target pod's link, with the target
/// node's pod address, and its masquerade bridge, tap and NAT, as
/// virt-handler does on the target node before SyncMigrationTarget), its
/// command server answering.
fn start_target(yaml: &str, uid: &str) -> Launcher {
    start_target_in(yaml, uid, None)
}

/// [`start_target`], in the pod cpuset `cpus` when given.
fn start_target_in(yaml: &str, uid: &str, cpus: Option<&PodCpuset>) -> Launcher {
    // The pod name SignalTargetPodCleanup compares; verbosity 4, where
    // KubeVirt logs a succeeded migration's record (a target is the source
    // of the next hop).
    let mut env = vec![
        ("POD_NAME", std::ffi::OsStr::new("target-pod")),
        ("VIRT_LAUNCHER_LOG_VERBOSITY", std::ffi::OsStr::new("4")),
    ];
    if let Some(c) = cpus {
        env.extend(c.env());
    }
    let opts = Opts {
        uid: Some(uid),
        // The masquerade guests' targets sit on node 1; the dedicated-CPU
        // guest has no pod network.
        args: if cpus.is_some() {
            &["--migration-target"]
        } else {
            &[
                "--migration-target",
                "--setup-pod-network",
                "--pod-subnet",
                "1",
            ]
        },
        env: &env,
        ..Opts::default()
    };
    let mut t = match cpus {
        Some(_) => Launcher::start_wrapped(yaml, &opts, CPUSET_WRAPPER),
        None => Launcher::start(yaml, &opts),
    };
    let start = std::time::Instant::now();
    while !t.ctl(&["ping"]).0 {
        if let Some(st) = t.try_exit() {
            panic!("target exited ({st})\n{}", t.log());
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "target not ready\n{}",
            t.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t
}

/// `ctl migrate` from `source` to `target` with `options`: (success,
/// stdout, stderr); `wait` seconds for the end, or none.
fn ctl_migrate(
    source: &Launcher,
    target: &Launcher,
    migration_uid: &str,
    options: &str,
    wait: Option<&str>,
) -> (bool, String, String) {
    let socket = target.state.join("share/sockets/launcher-sock");
    let mut args = vec![
        "migrate",
        "--migration-uid",
        migration_uid,
        "--options",
        options,
        "--target-socket",
        socket.to_str().unwrap(),
    ];
    if let Some(w) = wait {
        args.extend(["--wait", w]);
    }
    source.ctl(&args)
}

/// The source's migration record (`Spec.Metadata.KubeVirt.Migration`)
/// once it has an end, within 60 s.
fn ended_record(source: &Launcher, migration_uid: &str) -> serde_json::Value {
    let start = std::time::Instant::now();
    loop {
        let (ok, out, err) = source.ctl(&["-o", "json", "domain"]);
        assert!(ok, "{err}");
        let dom: serde_json::Value = serde_json::from_str(&out).unwrap();
        let m = dom["Spec"]["Metadata"]["KubeVirt"]["Migration"].clone();
        if m["UID"] == migration_uid && m["EndTimestamp"].is_string() {
            return m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "migration {migration_uid} did not end: {m}\n{}",
            source.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits (60 s) until `source`'s libvirt job has sent guest memory
/// (`virsh domjobinfo`: `Memory processed` above zero): the disks are
/// copied and the memory transfer has begun.
fn wait_memory_sent(source: &Launcher) {
    let start = std::time::Instant::now();
    loop {
        let (_, info) = source.virsh(&["domjobinfo", &source.domain]);
        let sent = info.lines().any(|l| {
            l.strip_prefix("Memory processed:")
                .is_some_and(|v| v.trim() != "0.000 B")
        });
        if sent {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no memory sent: {info}\n{}",
            source.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The first log line of `l` past its first `from` bytes whose `msg`
/// starts with `prefix`, within `secs` seconds: the rest of that `msg`.
fn wait_log_msg(l: &Launcher, from: usize, prefix: &str, secs: u64) -> String {
    let start = std::time::Instant::now();
    loop {
        let log = l.log();
        let found = log.get(from..).unwrap_or("").lines().find_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            Some(v["msg"].as_str()?.strip_prefix(prefix)?.to_owned())
        });
        if let Some(rest) = found {
            return rest;
        }
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "no log line {prefix:?} in {secs} s\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The source pod's IPv4 address (node 0's, `network::phase1::POD_ADDR`).
const SOURCE_POD_IP: &str = "10.244.0.5";
/// A target pod's addresses (node 1's, `network::phase1::PodAddrs::primary_on`).
const TARGET_POD_IP: &str = "10.244.1.5";
/// A target pod's IPv6 address.
const TARGET_POD_IP6: &str = "fd00:10:244:1::5";

/// The guest's `wget` of `http://<addr>:9090/`, answered by a listener on
/// `[addr]:9090` in the node network namespace `node` (the far side of
/// the pod's link): checks that the guest got the listener's answer, and
/// returns the address the connection came from (masquerade's SNAT makes
/// it the pod's IP).
fn guest_reaches_node(l: &Launcher, node: &str, addr: &str) -> String {
    use std::io::{Read, Write};
    let (node, listen) = (node.to_owned(), addr.to_owned());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || -> Result<String, String> {
        let ns = std::fs::File::open(&node).map_err(|e| format!("{node}: {e}"))?;
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| format!("setns {node}: {e}"))?;
        let ip: IpAddr = listen.parse().map_err(|e| format!("{listen}: {e}"))?;
        let listener = std::net::TcpListener::bind((ip, 9090))
            .map_err(|e| format!("bind [{listen}]:9090 in the node: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let _ = ready_tx.send(());
        let start = std::time::Instant::now();
        let (mut conn, peer) = loop {
            match listener.accept() {
                Ok(c) => break c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if start.elapsed() > Duration::from_secs(60) {
                        return Err("no connection from the guest in 60 s".into());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(format!("accept: {e}")),
            }
        };
        conn.set_nonblocking(false).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let mut buf = [0u8; 1024];
        let _ = conn.read(&mut buf);
        conn.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nNODE-OK\n")
            .map_err(|e| format!("answer: {e}"))?;
        Ok(peer.ip().to_string())
    });
    if ready_rx.recv_timeout(Duration::from_secs(30)).is_err() {
        panic!("node listener: {:?}", server.join());
    }
    let url = if addr.contains(':') {
        format!("http://[{addr}]:9090/")
    } else {
        format!("http://{addr}:9090/")
    };
    // No `-T`: the guest's busybox 1.35 (Debian's static build) crashes
    // with it; `timeout` bounds the wait instead.
    let (code, out) = l.guest_sh(&format!("timeout 15 wget -q -O - {url}"));
    let peer = server.join().unwrap();
    assert!(
        code == 0 && out.contains("NODE-OK"),
        "guest wget {url}: exit {code}: {out:?}; listener: {peer:?}"
    );
    peer.unwrap_or_else(|e| panic!("node listener: {e}"))
}

/// After the switch-over (issue 16's "the masquerade address kept on the
/// target"), what KubeVirt gives a masquerade guest: it keeps 10.0.2.2,
/// fd10:0:2::2 and its default route (the target pod has the same gateway
/// side; this binding gets no link refresh), its traffic leaves through
/// the target pod (a listener on the target's node sees it come from the
/// target pod's address, over IPv4 and, with the `gateway6` route
/// KubeVirt's example sets, over IPv6), its forwarded port answers at the
/// target pod's addresses (the target's own NAT), the target's DHCP server
/// gives the same lease to a new request, and the source pod's network is
/// gone (`source_node`: the source's node namespace, held open by the
/// test, has lost the pod link's end).
fn pod_network_moved_with_the_guest(target: &Launcher, source_node: &str) {
    let (code, out) = target.guest_sh("ip -o addr show dev eth0; ip route");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("inet 10.0.2.2/24")
            && out.contains("inet6 fd10:0:2::2/128")
            && out.contains("default via 10.0.2.1 dev eth0"),
        "the guest's addresses on the target:\n{out}"
    );
    let links = ip_in_netns(source_node, &["-o", "link"]);
    assert!(
        !links.contains("cni0"),
        "the source pod's link is still there: {links}"
    );
    let target_node = node_netns(target);
    let peer = guest_reaches_node(target, &target_node, "10.244.1.1");
    assert_eq!(peer, TARGET_POD_IP, "the target pod's IP");
    // From the target's node, and inside the target pod (the local
    // forwarding rules name the target pod's own address).
    let target_pod = format!("/proc/{}/ns/net", target.worker_pid());
    for netns in [&target_node, &target_pod] {
        let body = http_get_in_netns(netns, &format!("{TARGET_POD_IP}:8080"));
        assert!(
            body.contains("200 OK") && body.contains("GUEST-HTTP"),
            "{netns} -> {TARGET_POD_IP}:8080: {body}"
        );
    }
    // A new DHCPv4 request (busybox udhcpc, one shot, its hook only
    // printing the lease): the target's server gives the same lease.
    let (code, out) = target.guest_sh(
        "printf '#!/bin/sh\\n[ \"$1\" = bound ] && echo \"LEASE ip=$ip router=$router serverid=$serverid\"\\nexit 0\\n' >/tmp/lease.sh; \
         chmod +x /tmp/lease.sh; udhcpc -i eth0 -n -q -t 5 -T 1 -s /tmp/lease.sh",
    );
    assert!(
        code == 0 && out.contains("LEASE ip=10.0.2.2 router=10.0.2.1 serverid=10.0.2.1"),
        "a new lease on the target: exit {code}: {out}"
    );
    // IPv6: the route KubeVirt's example gives through its network-config
    // `gateway6` (DHCPv6 gives none), then out and in through the target
    // pod.
    let (code, out) = target.guest_sh(
        "ip -6 route replace fd10:0:2::1 dev eth0 && ip -6 route replace default via fd10:0:2::1 dev eth0",
    );
    assert_eq!(code, 0, "{out}");
    let peer = guest_reaches_node(target, &target_node, "fd00:10:244:1::1");
    assert_eq!(peer, TARGET_POD_IP6, "the target pod's IPv6 address");
    for netns in [&target_node, &target_pod] {
        let body = http_get_in_netns(netns, &format!("[{TARGET_POD_IP6}]:8080"));
        assert!(
            body.contains("200 OK") && body.contains("GUEST-HTTP"),
            "{netns} -> [{TARGET_POD_IP6}]:8080: {body}"
        );
    }
}

/// The proxy process; stopped (SIGTERM) when dropped.
struct Proxy(Child);

impl Proxy {
    fn start(uid: &str, source: &Launcher, target: &Launcher, log: &Path) -> Proxy {
        Self::to(
            uid,
            source,
            &target.state.join("share"),
            &target.state.join("libvirt/run/libvirt-sock"),
            log,
        )
    }

    /// A proxy from `source` to the share directory `target_share` and
    /// libvirt socket `target_libvirt` of a target, whether one listens
    /// there or not.
    fn to(
        uid: &str,
        source: &Launcher,
        target_share: &Path,
        target_libvirt: &Path,
        log: &Path,
    ) -> Proxy {
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new(launcher_bin())
            .arg("migration-proxy")
            .args(["--uid", uid, "--block-migration"])
            .arg("--source-share")
            .arg(source.state.join("share"))
            .arg("--target-share")
            .arg(target_share)
            .arg("--target-libvirt-socket")
            .arg(target_libvirt)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn migration-proxy");
        let mut p = Proxy(child);
        // It prints "ready" once every socket listens.
        let mut out = p.0.stdout.take().unwrap();
        let mut buf = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut buf).expect("proxy ready");
        assert_eq!(&buf, b"ready\n");
        p
    }

    /// Sends the proxy `sig` (SIGSTOP: the network between the pods
    /// stalls, every byte held; SIGCONT: it flows again).
    fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0.id()).unwrap());
        nix::sys::signal::kill(pid, sig).unwrap();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        // A stopped proxy gets the SIGTERM once it runs again.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGCONT,
        );
        let _ = self.0.wait();
    }
}

#[test]
fn migrates_between_two_launchers() {
    let uid = format!("mig-{}", std::process::id());
    // A masquerade interface on the pod network (port 8080 forwarded):
    // every launcher below, source and targets, is in a pod network of its
    // own, with a node of its own (the phase-1 stand-in).
    let yaml = masquerade_vmi("migrating");
    let mut source = Launcher::start(
        &yaml,
        &Opts {
            uid: Some(&uid),
            args: &["--setup-pod-network"],
            ..Opts::default()
        },
    );
    // A target nobody migrates to (never prepared) with a short
    // --qemu-timeout: KubeVirt's waitForDomainUUID gives up with its
    // words, a runtime failure (exit 1). It waits while the source boots.
    let mut never = Launcher::start(
        &guest_vmi("never-migrated", "virtio"),
        &Opts {
            args: &["--migration-target", "--qemu-timeout", "5s"],
            ..Opts::default()
        },
    );
    source.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let st = never.wait_exit(Duration::from_secs(120));
    assert_eq!(st.code(), Some(1), "{}", never.log());
    assert!(
        never
            .log()
            .contains("timed out waiting for domain to be defined (--qemu-timeout 5 s)"),
        "{}",
        never.log()
    );
    never.assert_nothing_left();
    // The source pod's node, held open past the source's end; the guest's
    // traffic leaves through the source pod (seen there from its pod IP).
    let source_node_file = std::fs::File::open(node_netns(&source)).unwrap();
    let source_node = format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        source_node_file.as_raw_fd()
    );
    let peer = guest_reaches_node(&source, &source_node, "10.244.0.1");
    assert_eq!(peer, SOURCE_POD_IP, "the source pod's IP");
    let identity =
        format!(r#"{{"metadata":{{"name":"migrating","namespace":"e2e","uid":"{uid}"}}"#);
    let with_state = format!(
        r#"{identity},"status":{{"migrationMethod":"BlockMigration","migrationTransport":"Unix","migrationState":{{"migrationUID":"m-bad"}}}}}}"#
    );

    // Bad input, in KubeVirt's words; nothing starts.
    let (ok, msg) = migrate_raw(&source, &with_state, b"{\"ProgressTimeout\": soon}");
    assert!(!ok);
    assert!(
        msg.starts_with("no valid migration options object present in command server request: "),
        "{msg}"
    );
    let (ok, msg) = migrate_raw(&source, &with_state, b"");
    assert_eq!(
        (ok, msg.as_str()),
        (
            false,
            "migration options object not present in command server request"
        )
    );
    let (ok, msg) = migrate_raw(&source, &format!("{identity}}}"), b"{}");
    assert_eq!(
        (ok, msg.as_str()),
        (false, "cannot migrate VMI until migrationState is ready")
    );
    let (ok, _, err) = source.ctl(&["migrate-cancel"]);
    assert!(!ok);
    assert!(
        err.contains("failed to cancel migration - vmi is not migrating"),
        "{err}"
    );
    // No proxy yet: the source's libvirt finds no socket to the target;
    // the migration fails with libvirt's reason, the guest runs on.
    let (ok, _, err) = source.ctl(&["migrate", "--migration-uid", "m-bad", "--wait", "60"]);
    assert!(!ok, "a migration without a proxy succeeded");
    // KubeVirt records libvirt's error as its Go binding prints it.
    assert!(
        err.contains("virError(Code=")
            && err.contains(&format!(
                "Failed to connect socket to '/var/run/kubevirt/migrationproxy/{uid}-source.sock'"
            )),
        "{err}"
    );
    // The same migration again: KubeVirt's "already executed".
    let (ok, msg) = migrate_raw(&source, &with_state, b"{}");
    assert!(!ok);
    assert!(
        msg.starts_with("migration job m-bad already executed, finished at ")
            && msg.contains("failed: true, abortStatus: "),
        "{msg}"
    );
    // The guest still runs on the source (the agent answers).
    uptime(&source);

    // Cancelled mid-way (1 MiB/s: minutes to go): KubeVirt's abort; the
    // guest runs on at the source, the target's launcher ends cleanly.
    let slow = r#"{"Bandwidth":"1Mi","ProgressTimeout":150,"CompletionTimeoutPerGiB":150}"#;
    let defaults = r#"{"ProgressTimeout":150,"CompletionTimeoutPerGiB":150}"#;
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let (ok, _, err) = ctl_migrate(&source, &target, "m-cancel", slow, None);
    assert!(ok, "{err}");
    let start = std::time::Instant::now();
    while !source
        .virsh(&["domjobinfo", &source.domain])
        .1
        .contains("Unbounded")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no migration job\n{}",
            source.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The same migration again while it runs: a no-op success (KubeVirt).
    let (ok, msg) = migrate_raw(&source, &with_state.replace("m-bad", "m-cancel"), b"{}");
    assert!(ok, "{msg}");
    let (ok, _, err) = source.ctl(&["migrate-cancel"]);
    assert!(ok, "{err}");
    // Cancelling again while the abort is under way: success too.
    let (ok, _, err) = source.ctl(&["migrate-cancel"]);
    assert!(
        ok || err.contains("failed to cancel migration - vmi is not migrating"),
        "{err}"
    );
    let m = ended_record(&source, "m-cancel");
    assert_eq!(
        (&m["Failed"], &m["AbortStatus"]),
        (&true.into(), &"Succeeded".into()),
        "{m}"
    );
    let reason = m["FailureReason"].as_str().unwrap_or("");
    // Whichever of the abort and libvirt's answer lands first (as in KubeVirt).
    assert!(
        reason == "Live migration aborted " || reason.contains("canceled by client"),
        "{m}"
    );
    // The target's libvirt dropped the incoming domain: the target says
    // why it is done and exits 0, as KubeVirt's target does once its QEMU
    // is gone (not after --qemu-timeout).
    target.wait_success(Duration::from_secs(60));
    assert!(
        target.log().contains("the incoming migration failed or was aborted: the domain went away from this migration target before it ran here"),
        "{}",
        target.log()
    );
    assert!(target.processes_left().is_empty(), "{}", target.log());
    drop(proxy);
    uptime(&source);

    // The target's launcher killed mid-way: the source records the failure
    // and the guest runs on there.
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let (ok, _, err) = ctl_migrate(&source, &target, "m-kill", slow, None);
    assert!(ok, "{err}");
    let start = std::time::Instant::now();
    while !source
        .virsh(&["domjobinfo", &source.domain])
        .1
        .contains("Unbounded")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no migration job\n{}",
            source.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    target.signal(nix::sys::signal::Signal::SIGKILL);
    let st = target.wait_exit(Duration::from_secs(30));
    assert!(!st.success());
    let m = ended_record(&source, "m-kill");
    assert_eq!(m["Failed"], true, "{m}");
    assert!(
        m["FailureReason"].as_str().is_some_and(|r| !r.is_empty()),
        "{m}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        target.processes_left().is_empty(),
        "left by the killed target"
    );
    drop(proxy);
    uptime(&source);
    let (ok, out, err) = source.ctl(&["domain"]);
    assert!(ok && out.contains("Running"), "{out}{err}");

    // Past the completion budget (1 s per GB, 1 MiB/s): KubeVirt's abort.
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let budget = r#"{"Bandwidth":"1Mi","ProgressTimeout":150,"CompletionTimeoutPerGiB":1}"#;
    let (ok, _, err) = ctl_migrate(&source, &target, "m-slow", budget, Some("60"));
    assert!(!ok, "a 1 MiB/s migration kept its 1 s budget");
    assert!(
        err.contains("Live migration is not completed after 1 seconds and has been aborted"),
        "{err}"
    );
    let m = ended_record(&source, "m-slow");
    assert_eq!(m["AbortStatus"], "Succeeded", "{m}");
    target.wait_success(Duration::from_secs(60));
    assert!(
        target
            .log()
            .contains("the incoming migration failed or was aborted"),
        "{}",
        target.log()
    );
    assert!(target.processes_left().is_empty(), "{}", target.log());
    drop(proxy);

    // Stalled once the memory transfer has begun (the proxy stopped: the
    // network between the pods holds every byte), a 3 s progress timeout:
    // libvirt's data remaining stops going down, and after more than 3 s
    // KubeVirt's abort, while the stream is still held. (Stopped during
    // the disk copy instead, libvirt reports zero remaining, which counts
    // as progress in KubeVirt's rule: only the budget would end that.)
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let stall = r#"{"Bandwidth":"1Mi","ProgressTimeout":3,"CompletionTimeoutPerGiB":150}"#;
    let from = source.log().len();
    let (ok, _, err) = ctl_migrate(&source, &target, "m-stuck", stall, None);
    assert!(ok, "{err}");
    wait_memory_sent(&source);
    proxy.signal(nix::sys::signal::Signal::SIGSTOP);
    let reason = wait_log_msg(
        &source,
        from,
        "Live migration abort detected with reason: ",
        60,
    );
    let secs: u64 = reason
        .strip_prefix("Live migration stuck for ")
        .and_then(|r| r.strip_suffix(" seconds and has been aborted"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not KubeVirt's stall message: {reason:?}"));
    assert!((4..=10).contains(&secs), "stuck for {secs} s: {reason}");
    // The network back: libvirt's job ends (its NBD mirrors and its
    // connection to the target go through the proxy too), the record holds
    // the stall, the target's incoming QEMU sees the end of its stream.
    proxy.signal(nix::sys::signal::Signal::SIGCONT);
    let m = ended_record(&source, "m-stuck");
    assert_eq!(
        (&m["Failed"], &m["AbortStatus"], &m["FailureReason"]),
        (&true.into(), &"Succeeded".into(), &reason.as_str().into()),
        "{m}"
    );
    target.wait_success(Duration::from_secs(60));
    assert!(target.processes_left().is_empty(), "{}", target.log());
    drop(proxy);
    uptime(&source);

    // A failed migration to a prepared target (no proxy: the source's
    // libvirt finds no socket). `ctl migrate --wait` then sends the target
    // what virt-handler's target side sends after a failure,
    // SignalTargetPodCleanup for its pod (`targetPod`, its POD_NAME); no
    // domain ever came there, so the launcher ends as KubeVirt's does
    // there: a failed container with "received early exit signal".
    let mut target = start_target(&yaml, &uid);
    let (ok, _, err) = ctl_migrate(&source, &target, "m-prepare", defaults, Some("60"));
    assert!(!ok && err.contains("Failed to connect socket"), "{err}");
    let st = target.wait_exit(Duration::from_secs(60));
    assert_eq!(st.code(), Some(1), "{}", target.log());
    assert!(
        target.log().contains("received early exit signal: virt-handler's SignalTargetPodCleanup for this pod (POD_NAME) came before any domain was defined here (the migration this target was prepared for failed before it reached it)"),
        "{}",
        target.log()
    );
    assert!(target.processes_left().is_empty(), "{}", target.log());

    // A target whose libvirt refuses the incoming domain: the target is
    // prepared (SyncMigrationTarget; the migration itself finds no proxy
    // yet, and `ctl migrate` without --wait sends nothing after it), then
    // the container disk's overlay it made is removed, so the incoming
    // domain names an image the target does not have. The source records
    // libvirt's refusal in KubeVirt's words; the guest runs on.
    let mut target = start_target(&yaml, &uid);
    let (ok, _, err) = ctl_migrate(&source, &target, "m-prepared", defaults, None);
    assert!(ok, "{err}");
    let m = ended_record(&source, "m-prepared");
    assert!(
        m["FailureReason"]
            .as_str()
            .is_some_and(|r| r.contains("Failed to connect socket")),
        "{m}"
    );
    let daemon = target
        .processes_left()
        .into_iter()
        .find(|(_, name)| name.contains("libvirtd") || name.contains("virtqemud"))
        .unwrap_or_else(|| panic!("no libvirt daemon in the target\n{}", target.log()));
    // /var/run is a link to /run, which would resolve in this namespace.
    let overlay = format!(
        "/proc/{}/root/run/kubevirt-ephemeral-disks/disk-data/containerdisk/disk.qcow2",
        daemon.0
    );
    std::fs::remove_file(&overlay).unwrap_or_else(|e| panic!("{overlay}: {e}"));
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    // ctl migrate without --target-socket: MigrateVirtualMachine only.
    let (ok, _, err) = source.ctl(&[
        "migrate",
        "--migration-uid",
        "m-refused",
        "--options",
        defaults,
        "--wait",
        "60",
    ]);
    assert!(
        !ok,
        "a migration to a target without the disk's image succeeded"
    );
    let m = ended_record(&source, "m-refused");
    let reason = m["FailureReason"].as_str().unwrap_or("");
    // migrateToURI3's error as KubeVirt records it (the Go binding's
    // text): the target's libvirt will not make the missing image.
    assert!(
        reason.contains("virError(Code=")
            && reason.contains("pre-creation of storage target for incremental storage migration of disk 'vda' is not supported"),
        "{m}\n{err}"
    );
    assert_eq!(m["Failed"], true, "{m}");
    uptime(&source);
    // No domain arrives: the target pod is deleted (SIGTERM) and its
    // launcher ends cleanly.
    target.signal(nix::sys::signal::Signal::SIGTERM);
    target.wait_success(Duration::from_secs(60));
    assert!(target.processes_left().is_empty(), "{}", target.log());
    drop(proxy);

    // A target that never became ready: the proxy runs, nothing listens
    // behind it (no target launcher). The source's libvirt loses the
    // connection at once; the record holds libvirt's error as KubeVirt
    // records it; the guest runs on.
    let nowhere = tempfile::tempdir().unwrap();
    let proxy = Proxy::to(
        &uid,
        &source,
        nowhere.path(),
        &nowhere.path().join("libvirt-sock"),
        &nowhere.path().join("proxy.log"),
    );
    let (ok, _, err) = source.ctl(&[
        "migrate",
        "--migration-uid",
        "m-nowhere",
        "--options",
        defaults,
        "--wait",
        "60",
    ]);
    assert!(!ok, "a migration to no target succeeded");
    let m = ended_record(&source, "m-nowhere");
    assert!(
        m["FailureReason"]
            .as_str()
            .is_some_and(|r| r.contains("virError(Code=")),
        "{m}\n{err}"
    );
    drop(proxy);
    let (ok, out, err) = source.ctl(&["domain"]);
    assert!(ok && out.contains("Running"), "{out}{err}");
    let before = uptime(&source);

    // The migration: data written to the emptyDisk before it, read back on
    // the target after it (block migration of the local disks).
    let (ok, _, err) = source.ctl(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo migrated-scratch-data > /dev/vdb && sync",
    ]);
    assert!(ok, "{err}");
    let mut target = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let (ok, out, err) = ctl_migrate(&source, &target, "m-1", defaults, Some("180"));
    assert!(
        ok,
        "migration failed: {err}\n--- source ---\n{}\n--- target ---\n{}",
        source.log(),
        target.log()
    );
    let record: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(record["UID"], "m-1");
    assert_eq!(record["Failed"], false);
    assert_eq!(record["Mode"], "PreCopy");
    assert!(record["StartTimestamp"].is_string() && record["EndTimestamp"].is_string());

    // The source is done: its QEMU left with the Migrated reason.
    source.wait_success(Duration::from_secs(60));
    let log = source.log();
    assert!(
        log.contains(r#""reason":"Migrated""#) && log.contains("the domain migrated away"),
        "{log}"
    );
    let left = source.processes_left();
    assert!(left.is_empty(), "left by the source: {left:?}");

    // The guest runs on the target, never restarted.
    let after = uptime(&target);
    assert!(
        after > before,
        "uptime {after} on the target, {before} on the source: the guest restarted"
    );
    let (ok, out, err) = target.ctl(&["exec", "--", "head", "-c", "21", "/dev/vdb"]);
    assert!(ok, "{err}");
    assert_eq!(out, "migrated-scratch-data");
    let (ok, out, err) = target.ctl(&["-o", "json", "domain"]);
    assert!(ok, "{err}");
    let dom: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(dom["Status"]["Status"], "Running", "{dom}");
    let m = &dom["Spec"]["Metadata"]["KubeVirt"]["Migration"];
    assert_eq!(m["UID"], "m-1", "{dom}");
    assert!(m["EndTimestamp"].is_string(), "{dom}");
    let (ok, out, err) = target.ctl(&["-o", "json", "guestinfo"]);
    assert!(ok, "{err}");
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(info["guestAgentVersion"].is_string(), "{info}");

    // FinalizeVirtualMachineMigration: the guest's clock set from the host
    // through the agent (KubeVirt's setGuestTime, in the background).
    let m1 = format!(
        r#"{identity},"status":{{"migrationState":{{"migrationUID":"m-1","targetPod":"target-pod"}}}}}}"#
    );
    let (ok, msg) = vmi_command(&target, "finalize", &m1);
    assert!(ok, "{msg}");
    let start = std::time::Instant::now();
    while !target
        .log()
        .contains("guest VM time sync finished successfully")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no guest time sync\n{}",
            target.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    pod_network_moved_with_the_guest(&target, &source_node);
    drop(source_node_file);
    drop(proxy);

    // Post-copy, on the next hop (the target is now the source, as a
    // migrated VMI's pod is): 1 MiB/s with a 1 s per GiB budget cannot
    // converge; with post-copy and workload disruption allowed the monitor
    // switches to post-copy past the budget (KubeVirt's
    // MigrateStartPostCopy), which completes: the guest runs on the next
    // target, never restarted.
    let before = uptime(&target);
    let mut next = start_target(&yaml, &uid);
    let proxy = Proxy::start(&uid, &target, &next, &next.dir.path().join("proxy.log"));
    let post = r#"{"Bandwidth":"1Mi","ProgressTimeout":150,"CompletionTimeoutPerGiB":1,"AllowPostCopy":true,"AllowWorkloadDisruption":true}"#;
    let (ok, out, err) = ctl_migrate(&target, &next, "m-2", post, Some("180"));
    let (mut target, m1) = if crate::harness::nonroot() {
        // QEMU as uid 107 gets no userfaultfd on this host
        // (vm.unprivileged_userfaultfd 0, /dev/userfaultfd root's 0600):
        // post-copy is refused as the migration starts, the guest runs on.
        assert!(
            !ok && err.contains("Postcopy is not supported: Userfaultfd not available"),
            "{err}"
        );
        uptime(&target);
        // The next target got virt-handler's SignalTargetPodCleanup from
        // `ctl migrate --wait` and ended by itself: exit 1 when no incoming
        // domain was seen there, else 0 (libvirt made and dropped it).
        let st = next.wait_exit(Duration::from_secs(60));
        let log = next.log();
        assert!(
            log.contains("received early exit signal")
                || log.contains("the incoming migration failed or was aborted"),
            "{st}\n{log}"
        );
        assert!(next.processes_left().is_empty(), "{log}");
        drop(proxy);
        (target, m1)
    } else {
        assert!(
            ok,
            "post-copy migration failed: {err}\n--- source ---\n{}\n--- target ---\n{}",
            target.log(),
            next.log()
        );
        // ctl reports what virt-handler concludes: the mode from the
        // source's records (post-copy), though the source is gone by now
        // and the target's copy, sent at the start, says PreCopy.
        let record: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (&record["UID"], &record["Failed"], &record["Mode"]),
            (&"m-2".into(), &false.into(), &"PostCopy".into()),
            "{record}"
        );
        assert!(record["EndTimestamp"].is_string(), "{record}");
        // The source's own record says post-copy too.
        let logged = wait_log_msg(&target, 0, "set migration result in metadata: ", 10);
        let source_record: serde_json::Value = serde_json::from_str(&logged).unwrap();
        assert_eq!(
            (
                &source_record["UID"],
                &source_record["Failed"],
                &source_record["Mode"]
            ),
            (&"m-2".into(), &false.into(), &"PostCopy".into()),
            "{source_record}"
        );
        assert!(source_record["EndTimestamp"].is_string(), "{source_record}");
        assert!(
            target
                .log()
                .contains("Starting post copy mode for migration"),
            "{}",
            target.log()
        );
        target.wait_success(Duration::from_secs(60));
        assert!(target.log().contains("the domain migrated away"));
        let left = target.processes_left();
        assert!(left.is_empty(), "left by the post-copy source: {left:?}");
        let after = uptime(&next);
        assert!(
            after > before,
            "uptime {after} after post-copy, {before} before"
        );
        let (ok, out, err) = next.ctl(&["exec", "--", "head", "-c", "21", "/dev/vdb"]);
        assert!(ok, "{err}");
        assert_eq!(out, "migrated-scratch-data");
        drop(proxy);
        (next, m1.replace("\"m-1\"", "\"m-2\""))
    };

    // SignalTargetPodCleanup: another pod's name changes nothing; this
    // pod's (POD_NAME) ends the target's wait: the launcher stops.
    let other = m1.replace("target-pod", "another-pod");
    let (ok, msg) = vmi_command(&target, "cleanup", &other);
    assert!(ok, "{msg}");
    std::thread::sleep(Duration::from_millis(500));
    uptime(&target);
    let (ok, msg) = vmi_command(&target, "cleanup", &m1);
    assert!(ok, "{msg}");
    target.wait_success(Duration::from_secs(90));
    assert!(
        target
            .log()
            .contains("received early exit signal - stop waiting for e2e_migrating"),
        "{}",
        target.log()
    );
    target.assert_nothing_left();
}

/// A pod-mode launcher waiting for virt-handler (the stand-in), for the
/// migrating VMI `uid`, in a pod named `pod` (`POD_NAME`), with the
/// filesystem claim `data` mounted from `claim`.
fn pod_for_handler(yaml: &str, uid: &str, pod: &str, claim: &Path) -> Launcher {
    Launcher::start_wrapped(
        yaml,
        &Opts {
            pod: true,
            handler: true,
            uid: Some(uid),
            env: &[("POD_NAME", std::ffi::OsStr::new(pod))],
            pod_mounts_rw: &[("vmi-disks/data", claim)],
            ..Opts::default()
        },
        POD_WRAPPER,
    )
}

/// The migration as virt-handler drives it (issue 16): two pod-mode
/// launchers, each on its "node" with its own virt-handler (the stand-in's
/// two migration controllers, `tests/handler/virt_handler/migration.py`),
/// virt-controller's hand-over played by the stand-in. It checks, in
/// KubeVirt's order, the source launcher's events (MODIFIED with the
/// migration started, with it ended, Shutoff/Migrated, the final deletion)
/// and the target's (ADDED with the source's migration record, Running, the
/// end), the VMI's migrationState (detected, ready, completed, PreCopy,
/// moved to the target node), the calls (SyncMigrationTarget, Migrate,
/// Finalize twice, the source's DeleteVirtualMachine), and the target's
/// answers (GetDomain, GetGuestInfo, Exec: the uptime grew). The source
/// launcher then exits 0; the target runs on until its pod is deleted.
/// Cost: one guest boot, ~5 s of migration under TCG.
#[test]
fn migrates_under_virt_handler() {
    let uid = format!("migh-{}", std::process::id());
    // A filesystem claim both pods mount from one directory (shared
    // storage, as a ReadWriteMany claim): its disk.img is not copied; on
    // this host's local file system libvirt calls that unsafe, hence the
    // cluster's unsafeMigrationOverride.
    let yaml = guest_vmi("hmigrating", "virtio")
        .replace(
            "      - name: scratch\n        disk: {bus: virtio}\n",
            "      - name: scratch\n        disk: {bus: virtio}\n      - name: data\n        disk: {bus: virtio}\n",
        )
        .replace(
            "    emptyDisk: {capacity: 64Mi}\n",
            "    emptyDisk: {capacity: 64Mi}\n  - name: data\n    persistentVolumeClaim: {claimName: shared-claim}\nstatus:\n  volumeStatus:\n  - name: data\n    target: vdc\n    persistentVolumeClaimInfo: {claimName: shared-claim, volumeMode: Filesystem, accessModes: [ReadWriteMany], capacity: {storage: 64Mi}, requests: {storage: 64Mi}, filesystemOverhead: '0'}\n",
        );
    assert!(yaml.contains("shared-claim") && yaml.contains("name: data\n        disk"));
    let claim = tempfile::tempdir().unwrap();
    crate::harness::give_to_qemu_user(claim.path());
    let mut source = pod_for_handler(&yaml, &uid, "virt-launcher-source", claim.path());
    let mut target = pod_for_handler(&yaml, &uid, "target-pod", claim.path());
    let target_share = target.dir.path().join("share");
    let target_libvirt = target.state.join("libvirt/run/libvirt-sock");
    let target_events = target.dir.path().join("events.jsonl");
    let bin = launcher_bin();
    let h = handler_for(
        &source,
        &yaml,
        &[
            "--migrate-to",
            target_share.to_str().unwrap(),
            "--migrate-to-libvirt-socket",
            target_libvirt.to_str().unwrap(),
            "--launcher",
            bin.to_str().unwrap(),
            "--target-events",
            target_events.to_str().unwrap(),
            "--migration-config",
            r#"{"unsafeMigrationOverride": true}"#,
            "--checksum-device",
            "/dev/vdb",
            "--checksum-device",
            "/dev/vdc",
        ],
    );
    let out = h.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("\nOK"),
        "virt-handler stand-in:\n{stdout}\n{}\n--- source ---\n{}\n--- target ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        source.log(),
        target.log()
    );
    eprintln!("virt-handler stand-in:\n{stdout}");
    // The source launcher is done once its domain left.
    source.wait_success(Duration::from_secs(60));
    assert!(
        source.log().contains("the domain migrated away"),
        "{}",
        source.log()
    );
    let left = source.processes_left();
    assert!(left.is_empty(), "left by the source: {left:?}");
    // The target pod deleted: its launcher ends, nothing left.
    target.signal(nix::sys::signal::Signal::SIGTERM);
    target.wait_exit(Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(500));
    let left = target.processes_left();
    assert!(left.is_empty(), "left by the target: {left:?}");
}

/// A pod's cpuset cgroup, as the kubelet's static CPU manager gives a
/// Guaranteed pod its exclusive CPUs: a child of this host's cpuset
/// hierarchy (cgroup v1 `cpuset`, or v2 with the cpuset controller) with
/// `cpuset.cpus` set; removed when dropped (after its processes ended).
struct PodCpuset {
    dir: std::path::PathBuf,
    /// The file the launcher reads as its pod's CPUs (`host::CPUSET_FILES`).
    root_file: &'static str,
    /// The same file of this cgroup.
    file: std::path::PathBuf,
}

impl PodCpuset {
    /// A cgroup `name` holding `cpus` (e.g. `1`); panics with the reason
    /// when the host cannot make one.
    fn new(name: &str, cpus: &str) -> PodCpuset {
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let (base, root_file, list) = if v2 {
            (
                "/sys/fs/cgroup",
                "/sys/fs/cgroup/cpuset.cpus.effective",
                "cpuset.cpus.effective",
            )
        } else {
            (
                "/sys/fs/cgroup/cpuset",
                "/sys/fs/cgroup/cpuset/cpuset.cpus",
                "cpuset.cpus",
            )
        };
        let dir = Path::new(base).join(name);
        let write = |f: &str, v: &str| {
            std::fs::write(dir.join(f), v)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()));
        };
        if v2 {
            std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+cpuset")
                .expect("enable the cpuset controller (cgroup v2)");
        }
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mems = std::fs::read_to_string(Path::new(base).join(if v2 {
            "cpuset.mems.effective"
        } else {
            "cpuset.mems"
        }))
        .expect("cpuset.mems");
        write("cpuset.mems", mems.trim());
        write("cpuset.cpus", cpus);
        PodCpuset {
            file: dir.join(list),
            dir,
            root_file,
        }
    }

    /// The environment [`CPUSET_WRAPPER`] reads.
    fn env(&self) -> [(&'static str, &std::ffi::OsStr); 3] {
        [
            ("POD_CPUSET_CGROUP", self.dir.as_os_str()),
            ("POD_CPUSET_FILE", self.file.as_os_str()),
            ("POD_CPUSET_ROOT_FILE", std::ffi::OsStr::new(self.root_file)),
        ]
    }
}

impl Drop for PodCpuset {
    fn drop(&mut self) {
        // libvirt's own cgroups below it go with their domains; a moment
        // for the last processes to leave.
        for _ in 0..50 {
            let mut dirs: Vec<std::path::PathBuf> = Vec::new();
            let mut stack = vec![self.dir.clone()];
            while let Some(d) = stack.pop() {
                if let Ok(rd) = std::fs::read_dir(&d) {
                    for e in rd.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            stack.push(e.path());
                        }
                    }
                }
                dirs.push(d);
            }
            for d in dirs.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
            if !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("cgroup {} left behind", self.dir.display());
    }
}

/// Plays the container runtime for a pod with exclusive CPUs: the
/// launcher runs in the pod's cpuset cgroup ([`PodCpuset`]), and in the
/// pod's mount namespace the cpuset file it reads at the cgroup root is
/// the pod cgroup's (a container sees its own cgroup there). Everything
/// else, libvirt's cgroup placement included, is the host's view.
const CPUSET_WRAPPER: &[&str] = &[
    "sh",
    "-c",
    r#"set -e
echo $$ > "$POD_CPUSET_CGROUP/cgroup.procs"
exec unshare -m sh -c 'mount --make-rslave / && mount --bind -o ro "$POD_CPUSET_FILE" "$POD_CPUSET_ROOT_FILE" && exec "$@"' sh "$@""#,
    "sh",
];

/// The size of the launcher's cloud-init ISO for the VMI `e2e/pinmig`,
/// read in its libvirt daemon's mount namespace.
fn iso_size(l: &Launcher) -> u64 {
    let daemon = l
        .processes_left()
        .into_iter()
        .find(|(_, name)| name.contains("libvirtd") || name.contains("virtqemud"))
        .unwrap_or_else(|| panic!("no libvirt daemon\n{}", l.log()));
    // /var/run is a link to /run, which would resolve in this namespace.
    let iso = format!(
        "/proc/{}/root/run/kubevirt-ephemeral-disks/cloud-init-data/e2e/pinmig/noCloud.iso",
        daemon.0
    );
    std::fs::metadata(&iso)
        .unwrap_or_else(|e| panic!("{iso}: {e}"))
        .len()
}

/// Dedicated CPUs across a migration (KubeVirt's
/// `generateDomainForTargetCPUSetAndTopology`): the source pod holds the
/// host's first CPU, the target pod its second. `ctl migrate` plays
/// virt-handler's target side: once the target is prepared it reports the
/// target pod's cgroup cpuset in `migrationState.targetCPUSet` and the
/// node's topology in `targetNodeTopology`; the source pins the
/// destination's vCPU on the target's CPU. Before that, KubeVirt's
/// refusals without them (the migration fails, the guest runs on). The
/// guest's cloud-init disk is made empty on the target, of the size
/// `ctl migrate` records from the source's pod, and the guest reads its
/// data after the move. Cost: one guest boot and one migration under TCG.
#[test]
fn migrates_dedicated_cpus_to_the_targets_cpuset() {
    let host: Vec<u32> = converter::cputune::parse_cpu_list(
        &std::fs::read_to_string(
            [
                "/sys/fs/cgroup/cpuset.cpus.effective",
                "/sys/fs/cgroup/cpuset/cpuset.cpus",
            ]
            .iter()
            .find(|f| Path::new(f).exists())
            .expect("a cgroup cpuset file"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(host.len() >= 2, "this test needs 2 CPUs: {host:?}");
    let uid = format!("migc-{}", std::process::id());
    let src_cpus = PodCpuset::new(&format!("vl-e2e-{uid}-src"), &host[0].to_string());
    let dst_cpus = PodCpuset::new(&format!("vl-e2e-{uid}-dst"), &host[1].to_string());
    let yaml = guest_vmi("pinmig", "virtio")
        .replace(
            "    cpu: {cores: 1}\n",
            "    cpu: {cores: 1, dedicatedCpuPlacement: true}\n",
        )
        .replace(
            "      - name: scratch\n        disk: {bus: virtio}\n",
            "      - name: scratch\n        disk: {bus: virtio}\n      - name: cloudinit\n        disk: {bus: virtio}\n",
        )
        .replace(
            "    emptyDisk: {capacity: 64Mi}\n",
            "    emptyDisk: {capacity: 64Mi}\n  - name: cloudinit\n    cloudInitNoCloud:\n      userData: \"#cloud-config\\n# migrated-cloud-init-marker\\n\"\n",
        );
    assert!(
        yaml.contains("dedicatedCpuPlacement") && yaml.contains("name: cloudinit\n        disk"),
        "{yaml}"
    );
    let mut source = Launcher::start_wrapped(
        &yaml,
        &Opts {
            uid: Some(&uid),
            env: &src_cpus.env(),
            ..Opts::default()
        },
        CPUSET_WRAPPER,
    );
    source.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let on_source = vec![("0".to_owned(), host[0].to_string())];
    assert_eq!(vcpupins(&source.domain_xml()), on_source);

    // No targetNodeTopology (no virt-handler target side: no
    // --target-socket): KubeVirt's decoding error ends the migration.
    let (ok, _, err) = source.ctl(&["migrate", "--migration-uid", "m-notopo", "--wait", "60"]);
    assert!(!ok);
    assert!(
        err.contains("Live migration failed status.migrationState.targetNodeTopology: unexpected end of JSON input"),
        "{err}"
    );
    // A target CPU set too small for the vCPU: the converter's words.
    let identity = format!(
        r#"{{"metadata":{{"name":"pinmig","namespace":"e2e","uid":"{uid}"}},"spec":{{"domain":{{"cpu":{{"cores":1,"dedicatedCpuPlacement":true}},"memory":{{"guest":"128Mi"}},"devices":{{}}}}}}"#
    );
    let (ok, msg) = migrate_raw(
        &source,
        &format!(
            r#"{identity},"status":{{"migrationState":{{"migrationUID":"m-nocpus","targetCPUSet":[],"targetNodeTopology":"{{}}"}}}}}}"#
        ),
        b"{}",
    );
    assert!(ok, "{msg}");
    let m = ended_record(&source, "m-nocpus");
    assert!(
        m["FailureReason"].as_str().is_some_and(
            |r| r.contains("not enough exclusive threads provided, could not fit 1 core(s)")
        ),
        "{m}"
    );
    let before = uptime(&source);

    let source_iso = iso_size(&source);
    let mut target = start_target_in(&yaml, &uid, Some(&dst_cpus));
    let proxy = Proxy::start(&uid, &source, &target, &target.dir.path().join("proxy.log"));
    let defaults = r#"{"ProgressTimeout":150,"CompletionTimeoutPerGiB":150}"#;
    let (ok, _, err) = ctl_migrate(&source, &target, "m-pinned", defaults, Some("180"));
    assert!(
        ok,
        "migration failed: {err}\n--- source ---\n{}\n--- target ---\n{}",
        source.log(),
        target.log()
    );
    source.wait_success(Duration::from_secs(60));
    assert!(source
        .log()
        .contains("dedicated CPUs pinned for the target"));
    // On the target: the live XML and libvirt's affinity name the target
    // pod's CPU; the guest ran on (uptime grew).
    let on_target = vec![("0".to_owned(), host[1].to_string())];
    assert_eq!(vcpupins(&target.domain_xml()), on_target);
    let (ok, affinity) = target.virsh(&["vcpupin", &target.domain, "--vcpu", "0", "--live"]);
    assert!(ok, "{affinity}");
    assert!(
        affinity
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["0", &host[1].to_string()]),
        "{affinity}"
    );
    let after = uptime(&target);
    assert!(after > before, "uptime {after} after, {before} before");
    // The cloud-init disk: made empty on the target, of the source's size
    // (virt-handler's volumeStatus size), then filled by the block copy:
    // the guest reads its data from the disk (page cache dropped).
    assert!(
        target
            .log()
            .contains("empty disk made for the incoming migration"),
        "{}",
        target.log()
    );
    assert_eq!(iso_size(&target), source_iso);
    let (code, out) = target
        .guest_sh("echo 3 > /proc/sys/vm/drop_caches; grep -c migrated-cloud-init-marker /dev/vdc");
    assert_eq!((code, out.trim()), (0, "1"), "the guest's cloud-init disk");
    drop(proxy);
    target.stop(Duration::from_secs(90));
    target.assert_nothing_left();
}
