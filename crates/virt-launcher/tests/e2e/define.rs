//! libvirt itself accepts what the converter writes: every KubeVirt example
//! and corpus VMI that converts for x86_64 is defined (and undefined) in a
//! launcher's real libvirtd, which checks it against the QEMU binary's
//! capabilities, not only the schema.

use std::process::Command;

use crate::harness::{guest_vmi, repo_root, Launcher, Opts, BOOT_TIMEOUT};

#[test]
fn libvirt_defines_every_converted_vmi() {
    let mut l = Launcher::start(&guest_vmi("definer", "virtio"), &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let mut defined = Vec::new();
    for dir in [
        "tests/data/examples",
        "tests/data/corpus",
        "tests/data/cases",
    ] {
        for e in std::fs::read_dir(repo_root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_none_or(|x| x != "yaml") {
                continue;
            }
            for emu in [&["--use-emulation"][..], &[][..]] {
                let out = Command::new(crate::harness::launcher_bin())
                    .arg("convert")
                    .arg(&p)
                    .args(emu)
                    .output()
                    .unwrap();
                if out.status.code() == Some(2) {
                    continue; // refused by field; covered by the convert tests
                }
                assert!(
                    out.status.success(),
                    "{}: {}",
                    p.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                let xml = l.dir.path().join("domain.xml");
                std::fs::write(&xml, &out.stdout).unwrap();
                let (ok, msg) = l.virsh(&["define", xml.to_str().unwrap()]);
                assert!(ok, "libvirt refused {} ({emu:?}): {msg}", p.display());
                let name = msg
                    .split('\'')
                    .nth(1)
                    .unwrap_or_else(|| panic!("no domain name in {msg}"))
                    .to_owned();
                let (ok, msg) = l.virsh(&["undefine", "--nvram", &name]);
                assert!(ok, "undefine {name}: {msg}");
                defined.push(format!(
                    "{} {emu:?}",
                    p.file_name().unwrap().to_string_lossy()
                ));
            }
        }
    }
    assert!(
        defined.len() >= 20,
        "only {} defined: {defined:?}",
        defined.len()
    );
    l.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        l.wait_exit(std::time::Duration::from_secs(90)).success(),
        "{}",
        l.log()
    );
}
