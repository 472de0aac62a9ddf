#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shipped cache's rules on a file system of its own: a fake daemon,
//! libvirt modules and libraries, a QEMU module directory and a QEMU
//! binary in a temporary directory, a capabilities XML with the times
//! libvirt would write for them.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::files::{element, number, set_number, sha256_hex};
use super::*;
use crate::config::DaemonKind;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    layout: Layout,
    emulator: PathBuf,
    cache: PathBuf,
    host: HostNow,
}

const VERSION: u64 = 11_003_000;

fn ctime(p: &Path) -> i64 {
    std::fs::metadata(p).unwrap().ctime()
}

/// A capabilities XML as libvirt 11.3 writes it (the parts that matter).
fn caps_xml(emulator: &str, qemuctime: i64, moddir: i64, selfctime: i64, kvm: bool) -> String {
    format!(
        "<qemuCaps>\n  <emulator>{emulator}</emulator>\n  <qemuctime>{qemuctime}</qemuctime>\n  \
         <qemumoddirmtime>{moddir}</qemumoddirmtime>\n  <selfctime>{selfctime}</selfctime>\n  \
         <selfvers>{VERSION}</selfvers>\n{}  <flag name='vnc'/>\n  <version>10000002</version>\n  \
         <microcodeVersion>0</microcodeVersion>\n  <arch>x86_64</arch>\n</qemuCaps>\n",
        if kvm { "  <flag name='kvm'/>\n" } else { "" }
    )
}

impl Fixture {
    fn new(kvm: bool) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let lib = root.join("lib");
        std::fs::create_dir_all(lib.join("libvirt/connection-driver")).unwrap();
        std::fs::create_dir_all(lib.join("qemu")).unwrap();
        std::fs::write(
            lib.join("libvirt/connection-driver/libvirt_driver_qemu.so"),
            b"qemu driver",
        )
        .unwrap();
        std::fs::write(lib.join("libvirt.so.0.11003.0"), b"libvirt library").unwrap();
        std::fs::write(lib.join("unrelated.so.1"), b"not libvirt's").unwrap();
        std::fs::write(lib.join("qemu/ui-gtk.so"), b"qemu module").unwrap();
        let daemon = root.join("libvirtd");
        std::fs::write(&daemon, b"daemon").unwrap();
        let emulator = root.join("qemu-system-x86_64");
        std::fs::write(&emulator, vec![7u8; 3 << 20]).unwrap();
        let layout = Layout::below(&DaemonKind::Libvirtd(daemon.clone()), &lib).unwrap();
        let selfctime = ctime(&daemon).max(ctime(&layout.self_modules[0]));
        let moddir = std::fs::metadata(lib.join("qemu")).unwrap().mtime();
        let cache = root.join("cache");
        std::fs::create_dir(&cache).unwrap();
        let e = emulator.to_str().unwrap();
        std::fs::write(
            cache.join(record::file_name(e)),
            caps_xml(e, ctime(&emulator), moddir, selfctime, kvm),
        )
        .unwrap();
        let host = HostNow {
            arch: "x86_64".into(),
            kvm_usable: kvm,
            fingerprint: HostFingerprint {
                kernel: "6.1.0 #1 SMP".into(),
                cpu: vec!["vendor_id: GenuineIntel".into()],
            },
            libvirt_version: Some(VERSION),
        };
        Fixture {
            _tmp: tmp,
            root,
            layout,
            emulator,
            cache,
            host,
        }
    }

    /// The shipped directory, recorded.
    fn shipped(&self) -> PathBuf {
        let out = self.root.join("shipped");
        record(&self.cache, &out, &self.layout, &self.host).unwrap();
        out
    }

    fn plan(&self, shipped: &Path) -> Result<Vec<(String, String)>, NotUsed> {
        plan(shipped, &self.layout, &self.host).map(|p| {
            assert!(p.skipped.is_empty(), "{:?}", p.skipped);
            p.files
        })
    }

    fn entry_file(&self) -> String {
        record::file_name(self.emulator.to_str().unwrap())
    }
}

fn refusal(r: Result<Vec<(String, String)>, NotUsed>) -> String {
    match r {
        Err(NotUsed::Refused(s)) => s,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn edit_manifest(shipped: &Path, f: impl FnOnce(&mut Manifest)) {
    let p = shipped.join(MANIFEST);
    let mut m: Manifest = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    f(&mut m);
    std::fs::write(&p, serde_json::to_vec(&m).unwrap()).unwrap();
}

#[test]
fn a_matching_cache_is_planned_with_this_file_systems_times_and_nothing_else_changed() {
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    // As after unpacking on a node: the shipped file carries the build's
    // times, which differ from this file system's.
    let name = fx.entry_file();
    let built = std::fs::read_to_string(shipped.join(&name)).unwrap();
    let mut old = set_number(&built, "qemuctime", 1).unwrap();
    old = set_number(&old, "selfctime", 2).unwrap();
    old = set_number(&old, "qemumoddirmtime", 3).unwrap();
    std::fs::write(shipped.join(&name), &old).unwrap();
    edit_manifest(&shipped, |m| {
        m.entries[0].xml_sha256 = sha256_hex(old.as_bytes())
    });

    let files = fx.plan(&shipped).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].0, name);
    // Exactly the build's file again: the three times are this system's.
    assert_eq!(files[0].1, built);
    assert_eq!(
        number(&files[0].1, "qemuctime").unwrap(),
        ctime(&fx.emulator)
    );
}

#[test]
fn seeding_writes_the_file_where_libvirt_looks_and_tells_whether_libvirt_kept_it() {
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    let base = fx.root.join("var-cache-libvirt");
    std::fs::create_dir(&base).unwrap();
    let s = seed(
        &shipped,
        &base,
        Path::new("qemu/capabilities"),
        &fx.layout,
        &fx.host,
    )
    .unwrap();
    let written = base.join("qemu/capabilities").join(fx.entry_file());
    assert_eq!(s.files.len(), 1);
    assert_eq!(std::fs::metadata(&written).unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::read(&written).unwrap(),
        std::fs::read(shipped.join(fx.entry_file())).unwrap()
    );
    assert!(s.replaced().is_empty());
    // libvirt found it outdated: removed, then wrote its own probe's.
    std::fs::remove_file(&written).unwrap();
    std::fs::write(&written, b"<qemuCaps/>").unwrap();
    assert_eq!(s.replaced(), vec![fx.entry_file()]);

    // A second seeding leaves libvirt's file alone.
    let again = seed(
        &shipped,
        &base,
        Path::new("qemu/capabilities"),
        &fx.layout,
        &fx.host,
    )
    .unwrap();
    assert!(again.files.is_empty());
    assert_eq!(again.already_there, vec![fx.entry_file()]);
    assert_eq!(std::fs::read(&written).unwrap(), b"<qemuCaps/>");
}

#[test]
fn a_changed_qemu_binary_is_refused() {
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    let mut bytes = std::fs::read(&fx.emulator).unwrap();
    bytes[1000] ^= 1;
    std::fs::write(&fx.emulator, bytes).unwrap();
    let e = refusal(fx.plan(&shipped));
    assert!(
        e.contains("the QEMU binary differs from the build's"),
        "{e}"
    );
}

#[test]
fn each_binarys_file_is_decided_alone() {
    // A second QEMU binary (another architecture) with its own file.
    let fx = Fixture::new(false);
    let arm = fx.root.join("qemu-system-aarch64");
    std::fs::write(&arm, b"arm qemu").unwrap();
    let a = arm.to_str().unwrap();
    let x86 = std::fs::read_to_string(fx.cache.join(fx.entry_file())).unwrap();
    let arm_xml = x86
        .replace(fx.emulator.to_str().unwrap(), a)
        .replace("<arch>x86_64</arch>", "<arch>aarch64</arch>");
    let arm_xml = set_number(&arm_xml, "qemuctime", ctime(&arm)).unwrap();
    std::fs::write(fx.cache.join(record::file_name(a)), arm_xml).unwrap();
    let shipped = fx.shipped();
    assert_eq!(fx.plan(&shipped).unwrap().len(), 2);
    // The x86_64 binary changes: only its file is left to libvirt's probe.
    std::fs::write(&fx.emulator, b"another qemu").unwrap();
    let p = plan(&shipped, &fx.layout, &fx.host).unwrap();
    assert_eq!(p.files.len(), 1);
    assert_eq!(p.files[0].0, record::file_name(a));
    assert_eq!(p.skipped.len(), 1);
    assert!(
        p.skipped[0].contains(&fx.entry_file()) && p.skipped[0].contains("QEMU binary differs"),
        "{:?}",
        p.skipped
    );
}

#[test]
fn an_emulator_link_is_resolved_one_level_and_recorded() {
    // Debian's qemu-system-amd64 -> qemu-system-x86_64: libvirt's stat
    // follows it; the launcher records the link and hashes its target.
    let fx = Fixture::new(false);
    let link = fx.root.join("qemu-system-amd64");
    std::os::unix::fs::symlink("qemu-system-x86_64", &link).unwrap();
    let l = link.to_str().unwrap();
    let x86 = std::fs::read_to_string(fx.cache.join(fx.entry_file())).unwrap();
    std::fs::write(
        fx.cache.join(record::file_name(l)),
        x86.replace(fx.emulator.to_str().unwrap(), l),
    )
    .unwrap();
    let shipped = fx.shipped();
    let m: Manifest =
        serde_json::from_slice(&std::fs::read(shipped.join(MANIFEST)).unwrap()).unwrap();
    let e = m.entries.iter().find(|e| e.emulator == l).unwrap();
    assert_eq!(e.link.as_deref(), Some("qemu-system-x86_64"));
    assert_eq!(fx.plan(&shipped).unwrap().len(), 2);
    // The link now names another file: that entry is left to the probe,
    // the other is used.
    std::fs::write(fx.root.join("other-qemu"), vec![7u8; 3 << 20]).unwrap();
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("other-qemu", &link).unwrap();
    let p = plan(&shipped, &fx.layout, &fx.host).unwrap();
    assert_eq!(p.files.len(), 1);
    assert!(
        p.skipped[0].contains("a symbolic link to"),
        "{:?}",
        p.skipped
    );
}

#[test]
fn a_mismatching_recorded_hash_is_refused() {
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    edit_manifest(&shipped, |m| m.entries[0].emulator_sha256 = "0".repeat(64));
    let e = refusal(fx.plan(&shipped));
    assert!(e.contains("the QEMU binary differs"), "{e}");
}

#[test]
fn a_changed_libvirt_daemon_module_library_or_qemu_module_is_refused() {
    for (rel, what) in [
        ("libvirtd", "the libvirt daemon"),
        (
            "lib/libvirt/connection-driver/libvirt_driver_qemu.so",
            "loaded at start",
        ),
        ("lib/libvirt.so.0.11003.0", "libvirt's files"),
        ("lib/qemu/ui-gtk.so", "QEMU's module directory"),
    ] {
        let fx = Fixture::new(false);
        let shipped = fx.shipped();
        std::fs::write(fx.root.join(rel), b"another build").unwrap();
        let e = refusal(fx.plan(&shipped));
        assert!(e.contains(what) && e.contains("differs"), "{rel}: {e}");
    }
    // A new QEMU module (another set of modules) too.
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    std::fs::write(fx.root.join("lib/qemu/block-rbd.so"), b"new").unwrap();
    let e = refusal(fx.plan(&shipped));
    assert!(e.contains("other files than at build"), "{e}");
}

#[test]
fn another_libvirt_version_is_refused() {
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    let mut fx2 = fx;
    fx2.host.libvirt_version = Some(11_004_000);
    let e = refusal(fx2.plan(&shipped));
    assert!(e.contains("libvirt 11004000 runs here"), "{e}");
    // A manifest that says another version than its files.
    fx2.host.libvirt_version = Some(11_002_000);
    edit_manifest(&shipped, |m| m.libvirt_version = 11_002_000);
    let e = refusal(fx2.plan(&shipped));
    assert!(e.contains("facts differ from the manifest's"), "{e}");
}

#[test]
fn corrupt_or_truncated_files_are_refused() {
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    let xml = shipped.join(fx.entry_file());
    let good = std::fs::read(&xml).unwrap();
    // Truncated.
    std::fs::write(&xml, &good[..good.len() / 2]).unwrap();
    let e = refusal(fx.plan(&shipped));
    assert!(e.contains("corrupt or truncated"), "{e}");
    // Same length, one byte changed.
    let mut bad = good.clone();
    bad[20] ^= 0x20;
    std::fs::write(&xml, &bad).unwrap();
    let e = refusal(fx.plan(&shipped));
    assert!(e.contains("corrupt or truncated"), "{e}");
    std::fs::write(&xml, &good).unwrap();
    assert!(fx.plan(&shipped).is_ok());
    // A truncated or corrupt manifest.
    let m = std::fs::read(shipped.join(MANIFEST)).unwrap();
    std::fs::write(shipped.join(MANIFEST), &m[..m.len() - 10]).unwrap();
    let e = refusal(fx.plan(&shipped));
    assert!(e.contains("manifest.json"), "{e}");
    std::fs::write(shipped.join(MANIFEST), b"{\"format\": 1, \"extra\": true}").unwrap();
    let e = refusal(fx.plan(&shipped));
    assert!(e.contains("manifest.json"), "{e}");
    // An oversized manifest is not read.
    std::fs::write(
        shipped.join(MANIFEST),
        vec![b' '; (bounds::MANIFEST_BYTES + 1) as usize],
    )
    .unwrap();
    let e = refusal(fx.plan(&shipped));
    assert!(e.contains("more than"), "{e}");
}

#[test]
fn kvm_facts_must_match_for_native_files() {
    // Probed with KVM: /dev/kvm must be usable here, on the same host.
    let fx = Fixture::new(true);
    let shipped = fx.shipped();
    assert!(fx.plan(&shipped).is_ok());
    let mut other = Fixture {
        host: fx.host.clone(),
        ..fx
    };
    other.host.kvm_usable = false;
    let e = refusal(other.plan(&shipped));
    assert!(
        e.contains("probed with KVM, and /dev/kvm is not usable here"),
        "{e}"
    );
    other.host.kvm_usable = true;
    other.host.fingerprint.kernel = "6.12.0 #1 SMP".into();
    let e = refusal(other.plan(&shipped));
    assert!(e.contains("another kernel or CPU"), "{e}");
    // Not native: KVM facts do not apply (libvirt skips them too).
    other.host.arch = "aarch64".into();
    assert!(other.plan(&shipped).is_ok());

    // Probed without KVM while KVM is usable now: libvirt would re-probe.
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    let mut other = Fixture {
        host: fx.host.clone(),
        ..fx
    };
    other.host.kvm_usable = true;
    let e = refusal(other.plan(&shipped));
    assert!(
        e.contains("probed without KVM, and /dev/kvm is usable here"),
        "{e}"
    );
}

#[test]
fn links_and_unwritable_targets_are_refused_and_nothing_is_followed() {
    let fx = Fixture::new(false);
    let shipped = fx.shipped();
    // A symbolic link in the path below the base is never followed.
    let base = fx.root.join("base");
    let elsewhere = fx.root.join("elsewhere");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, base.join("qemu")).unwrap();
    let r = seed(
        &shipped,
        &base,
        Path::new("qemu/capabilities"),
        &fx.layout,
        &fx.host,
    );
    assert!(matches!(r, Err(NotUsed::Refused(_))), "{r:?}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // A file where the directory should be.
    let base2 = fx.root.join("base2");
    std::fs::create_dir_all(&base2).unwrap();
    std::fs::write(base2.join("qemu"), b"").unwrap();
    let r = seed(
        &shipped,
        &base2,
        Path::new("qemu/capabilities"),
        &fx.layout,
        &fx.host,
    );
    assert!(matches!(r, Err(NotUsed::Refused(_))), "{r:?}");
    // A directory that cannot take the file (here its temporary name is
    // taken; a read-only file system fails the same way): refused, with
    // nothing left behind for libvirt.
    let base3 = fx.root.join("base3");
    let caps = base3.join("qemu/capabilities");
    std::fs::create_dir_all(caps.join(format!(".{}.seed", fx.entry_file()))).unwrap();
    let r = seed(
        &shipped,
        &base3,
        Path::new("qemu/capabilities"),
        &fx.layout,
        &fx.host,
    );
    assert!(matches!(r, Err(NotUsed::Refused(_))), "{r:?}");
    assert!(!caps.join(fx.entry_file()).exists());
    // A shipped file that is a symbolic link is not read.
    let xml = shipped.join(fx.entry_file());
    let moved = fx.root.join("moved.xml");
    std::fs::rename(&xml, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &xml).unwrap();
    let e = refusal(fx.plan(&shipped));
    assert!(e.contains(&fx.entry_file()), "{e}");
}

#[test]
fn no_manifest_means_no_shipped_cache() {
    let fx = Fixture::new(false);
    let r = fx.plan(&fx.root.join("nothing-here"));
    assert!(matches!(r, Err(NotUsed::Absent(_))), "{r:?}");
}

#[test]
fn recording_refuses_files_whose_times_do_not_follow_the_model() {
    let fx = Fixture::new(false);
    let name = fx.entry_file();
    let xml = std::fs::read_to_string(fx.cache.join(&name)).unwrap();
    let t = number(&xml, "selfctime").unwrap();
    std::fs::write(
        fx.cache.join(&name),
        set_number(&xml, "selfctime", t - 100).unwrap(),
    )
    .unwrap();
    let e = record(&fx.cache, &fx.root.join("out"), &fx.layout, &fx.host).unwrap_err();
    assert!(e.to_string().contains("<selfctime>"), "{e}");
    assert!(!fx.root.join("out").exists());
    // A non-empty output directory is refused.
    std::fs::write(fx.cache.join(&name), &xml).unwrap();
    std::fs::create_dir(fx.root.join("out")).unwrap();
    std::fs::write(fx.root.join("out/x"), b"").unwrap();
    let e = record(&fx.cache, &fx.root.join("out"), &fx.layout, &fx.host).unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
}

#[test]
fn xml_numbers_are_read_and_set_in_their_one_element() {
    let x = "<a>\n<qemuctime>12</qemuctime><b>x</b></a>";
    assert_eq!(number(x, "qemuctime").unwrap(), 12);
    assert_eq!(
        set_number(x, "qemuctime", 345).unwrap(),
        "<a>\n<qemuctime>345</qemuctime><b>x</b></a>"
    );
    assert!(element("<q>1</q><q>2</q>", "q")
        .unwrap_err()
        .contains("more than one"));
    assert!(element("<q>1", "q").unwrap_err().contains("not closed"));
    assert!(number("<q>x1</q>", "q")
        .unwrap_err()
        .contains("not a number"));
}

#[test]
fn the_cpu_identity_is_the_first_processors() {
    let info = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\ncpu MHz\t\t: 2000.1\nmicrocode\t: 0x1\n\nprocessor\t: 1\nvendor_id\t: Other\n";
    assert_eq!(
        facts_cpu(info),
        vec!["vendor_id: GenuineIntel", "cpu family: 6", "microcode: 0x1"]
    );
    assert!(is_native("x86_64", "i686") && is_native("ppc64le", "ppc64"));
    assert!(!is_native("x86_64", "aarch64"));
}

fn facts_cpu(info: &str) -> Vec<String> {
    super::facts::cpu_identity(info)
}
