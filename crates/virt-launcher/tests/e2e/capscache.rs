//! The shipped QEMU capabilities cache (`virt-launcher capabilities-cache`,
//! `--shipped-capabilities-dir`) on this host's real libvirt and QEMU: made
//! as the image build makes it, then given to two fresh launchers (each
//! with an empty libvirt cache, as a new pod has): one as made, one whose
//! record of the x86_64 QEMU binary does not match the binary. libvirt's
//! own file-cache log (`--libvirt-log-filters 1:util.filecache`) tells
//! which binaries it loaded from the cache and which it probed. Both VMs
//! must start. No guest boots: each test stops once QEMU runs.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::{give_to_qemu_user, guest_vmi, launcher_bin, nonroot, Launcher, Opts};

/// Waits until the launcher logs `needle` (or exits, or `timeout`).
fn wait_log(l: &mut Launcher, needle: &str, timeout: Duration) {
    let start = Instant::now();
    while !l.log().contains(needle) {
        assert!(
            start.elapsed() < timeout,
            "no {needle:?} after {timeout:?}\n{}",
            l.log()
        );
        if let Some(st) = l.try_exit() {
            panic!("launcher exited ({st}) before {needle:?}\n{}", l.log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// (file name, emulator) of every entry of the shipped manifest.
fn entries(shipped: &Path) -> Vec<(String, String)> {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(shipped.join("manifest.json")).unwrap()).unwrap();
    m["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["file"].as_str().unwrap().to_owned(),
                e["emulator"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// libvirt probed the binary of `file` (its cache had no file for it) or
/// loaded the file: from libvirt's `util.filecache` debug lines.
fn libvirt_probed(log: &str, file: &str) -> bool {
    let loaded = log
        .lines()
        .any(|l| l.contains("Loaded cached data") && l.contains(file));
    let missing = log
        .lines()
        .any(|l| l.contains("No cached data") && l.contains(file));
    let outdated = log
        .lines()
        .any(|l| l.contains("Outdated cached capabilities") && l.contains(file));
    assert!(
        loaded != (missing || outdated),
        "libvirt's log says neither or both for {file}\n{log}"
    );
    !loaded
}

fn start(shipped: &Path, cache: &Path, name: &str) -> Launcher {
    // A guest that has not booted ignores the power button: 1 s to kill.
    let yaml = guest_vmi(name, "virtio");
    Launcher::start(
        &yaml,
        &Opts {
            args: &[
                "--libvirt-cache-dir",
                cache.to_str().unwrap(),
                "--shipped-capabilities-dir",
                shipped.to_str().unwrap(),
                "--libvirt-log-filters",
                "1:util.filecache",
                "--grace-period-seconds",
                "1",
            ],
            ..Opts::default()
        },
    )
}

#[test]
fn a_matching_shipped_cache_spares_the_probe_and_a_changed_qemu_is_probed() {
    let tmp = tempfile::tempdir().unwrap();
    let shipped = tmp.path().join("shipped");
    // As the image build runs it (as root).
    let out = crate::run::output_ok(
        std::process::Command::new(launcher_bin())
            .args(["capabilities-cache", "--out"])
            .arg(&shipped),
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("capabilities-cache: "), "{said}");
    let all = entries(&shipped);
    let (x86_file, _) = all
        .iter()
        .find(|(_, emu)| emu.ends_with("/qemu-system-x86_64"))
        .expect("an x86_64 QEMU entry")
        .clone();
    // The same cache, with a record of the x86_64 binary that does not
    // match it (as for an image whose QEMU was replaced after the build).
    let changed = tmp.path().join("changed");
    std::fs::create_dir(&changed).unwrap();
    for e in std::fs::read_dir(&shipped).unwrap().flatten() {
        std::fs::copy(e.path(), changed.join(e.file_name())).unwrap();
    }
    let m = std::fs::read_to_string(changed.join("manifest.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&m).unwrap();
    for e in doc["entries"].as_array_mut().unwrap() {
        if e["file"] == x86_file.as_str() {
            e["emulatorSha256"] = "0".repeat(64).into();
        }
    }
    std::fs::write(changed.join("manifest.json"), doc.to_string()).unwrap();
    let (cache_a, cache_b) = (tmp.path().join("cache-a"), tmp.path().join("cache-b"));
    give_to_qemu_user(tmp.path());

    let mut a = start(&shipped, &cache_a, "caps-shipped");
    let mut b = start(&changed, &cache_b, "caps-changed");
    for l in [&mut a, &mut b] {
        wait_log(l, "domain running", Duration::from_secs(180));
        // The launcher's own check after libvirt's first lookup.
        wait_log(l, "the shipped QEMU capabilities", Duration::from_secs(60));
    }
    a.signal(nix::sys::signal::Signal::SIGTERM);
    b.signal(nix::sys::signal::Signal::SIGTERM);
    a.wait_success_and_check(Duration::from_secs(60));
    b.wait_success_and_check(Duration::from_secs(60));
    // Whole logs: the daemon's lines are re-logged as they come.
    let (log_a, log_b) = (a.log(), b.log());

    // A: every file seeded (non-root, where 107 cannot use /dev/kvm, the
    // files probed with KVM are left to libvirt, and said so) and used.
    assert!(
        log_a.contains("QEMU capabilities seeded from the shipped cache"),
        "{log_a}"
    );
    assert!(
        log_a.contains("libvirt used the shipped QEMU capabilities"),
        "{log_a}"
    );
    for (file, emu) in &all {
        let skipped = log_a
            .lines()
            .any(|l| l.contains("not used for") && l.contains(file.as_str()));
        assert!(
            !skipped || nonroot(),
            "{file} ({emu}) not seeded as root\n{log_a}"
        );
        assert_eq!(
            libvirt_probed(&log_a, file),
            skipped,
            "{file} ({emu}): seeded files are loaded, the others probed\n{log_a}"
        );
    }
    // B: the changed binary's file is refused, said once, and libvirt
    // probes that binary; the other files are used.
    let refusals: Vec<_> = log_b
        .lines()
        .filter(|l| l.contains("shipped QEMU capabilities not used"))
        .collect();
    assert_eq!(refusals.len(), 1, "{log_b}");
    assert!(
        refusals[0].contains(&x86_file)
            && refusals[0].contains("the QEMU binary differs from the build's"),
        "{log_b}"
    );
    assert!(libvirt_probed(&log_b, &x86_file), "{log_b}");
    let written = if nonroot() {
        cache_b.join("uid-107/qemu/capabilities")
    } else {
        cache_b.join("qemu/capabilities")
    };
    assert!(written.join(&x86_file).is_file(), "libvirt saved its probe");
    for (file, emu) in all.iter().filter(|(f, _)| *f != x86_file) {
        let skipped = refusals[0].contains(file.as_str());
        assert_eq!(
            libvirt_probed(&log_b, file),
            skipped,
            "{file} ({emu})\n{log_b}"
        );
    }
}
