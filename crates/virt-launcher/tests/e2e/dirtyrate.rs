//! GetDomainDirtyRateStats end to end: `virt-launcher ctl dirtyrate` (the
//! gRPC call virt-handler's dirty-rate scraper makes) against the real test
//! guest under TCG, whose QEMU measures by page sampling; and a launcher
//! with no domain yet.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agent::ctl_json;
use crate::harness::{guest_vmi, launcher_bin, Launcher, Opts, BOOT_TIMEOUT};

/// `virt-launcher ctl --socket SOCK -o json dirtyrate`: Ok(MiB/s) or
/// Err(the launcher's message).
fn dirtyrate(sock: &Path) -> Result<i64, String> {
    let out = Command::new(launcher_bin())
        .arg("ctl")
        .arg("--socket")
        .arg(sock)
        .args(["-o", "json", "dirtyrate"])
        .output()
        .expect("run virt-launcher ctl");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    let v: Value = serde_json::from_slice(&out.stdout).expect("ctl dirtyrate JSON");
    Ok(v["dirtyRateMbs"].as_i64().expect("dirtyRateMbs"))
}

/// A result younger than the launcher's 3 s cache would be served again:
/// wait it out before the next measurement.
fn past_the_cache() {
    std::thread::sleep(Duration::from_millis(3100));
}

#[test]
fn dirty_rate_of_the_real_guest_rises_while_it_writes_memory() {
    let mut l = Launcher::start(&guest_vmi("dirtyrate", "virtio"), &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let sock = l.state.join("share/sockets/launcher-sock");

    // The idle guest: a real measurement (libvirt set the rate), small.
    let mut idle = Vec::new();
    for _ in 0..2 {
        let r = dirtyrate(&sock);
        let v = r.unwrap_or_else(|e| panic!("dirtyrate: {e}\n--- launcher ---\n{}", l.log()));
        assert!(v >= 0, "{v}");
        idle.push(v);
        past_the_cache();
    }
    // libvirt's own view of the last calculation: ours, 1 s of page sampling.
    let (ok, stats) = l.virsh(&["domstats", "--dirtyrate", &l.domain]);
    assert!(ok, "{stats}");
    for want in [
        "dirtyrate.calc_status=2",
        "dirtyrate.calc_period=1",
        "dirtyrate.calc_mode=page-sampling",
        "dirtyrate.megabytes_per_second=",
    ] {
        assert!(stats.contains(want), "{want} not in {stats}");
    }

    // Make the guest write changing data to memory: random bytes over and
    // over into a 48 MiB file on its RAM root file system (a third of its
    // 128 MiB), in the background, detached from guest-exec's pipes.
    let r = ctl_json(
        &l,
        &[
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "(while :; do dd if=/dev/urandom of=/dirty bs=1M count=48 2>/dev/null; done) \
             </dev/null >/dev/null 2>&1 & echo started",
        ],
    );
    assert_eq!(
        (r["exitCode"].as_i64(), r["stdOut"].as_str()),
        (Some(0), Some("started\n")),
        "{r}"
    );
    let floor = idle.iter().copied().max().unwrap_or(0);
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        past_the_cache();
        let v = dirtyrate(&sock).unwrap_or_else(|e| panic!("dirtyrate: {e}\n{}", l.log()));
        seen.push(v);
        // Page sampling counts 2 MiB per dirty sample in this guest (512
        // sampled pages per GiB): demand clearly more than idle.
        if v >= floor + 8 {
            eprintln!("dirty rate: idle {idle:?} MiB/s, while writing {seen:?} MiB/s");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "the dirty rate did not rise: idle {idle:?}, while writing {seen:?}\n{}",
            l.log()
        );
    }
}

/// Before virt-handler's first SyncVMI the pod's launcher has no domain:
/// the answer is KubeVirt's not-set message, at once (nothing to measure),
/// as virt-handler's dirty-rate scraper (the stand-in) and `ctl` see it.
#[test]
fn dirty_rate_without_a_domain_is_not_set() {
    let yaml = guest_vmi("dirtyratenone", "virtio");
    let l = Launcher::start_pod_for_handler(&yaml);
    let vmi = crate::protocol::vmi_json_of(&l, &yaml);
    let h = crate::protocol::virt_handler(&l, &vmi, &["--probe-before-sync"]);
    let stdout = crate::protocol::handler_succeeded(h, &l);
    let probe: Value = serde_json::from_str(
        stdout
            .lines()
            .find_map(|s| s.strip_prefix("PROBE "))
            .unwrap_or_else(|| panic!("no PROBE line: {stdout}")),
    )
    .unwrap();
    assert_eq!(probe["getDomainExists"], false, "{probe}");
    assert_eq!(
        probe["dirtyRateError"],
        "server error. command GetDomainDirtyRateStats failed: \"Dirty rate MegabytesPerSecondSet is false\"",
        "{probe}"
    );
    let sock = l.dir.path().join("share/sockets/launcher-sock");
    let start = Instant::now();
    while !sock.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {}\n{}",
            sock.display(),
            l.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        dirtyrate(&sock),
        Err("virt-launcher: Dirty rate MegabytesPerSecondSet is false".to_owned()),
        "{}",
        l.log()
    );
    // `ctl domain` says so in words; an argument no action takes is refused.
    let ctl = |args: &[&str]| {
        Command::new(launcher_bin())
            .arg("ctl")
            .arg("--socket")
            .arg(&sock)
            .args(args)
            .output()
            .expect("run virt-launcher ctl")
    };
    let out = ctl(&["domain"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no domain\n");
    let out = ctl(&["dirtyrate", "extra/arg"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "virt-launcher: ctl dirtyrate takes no argument (got extra/arg)"
    );
}
