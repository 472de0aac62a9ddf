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

/// Numbers in `attr='0x..'` / `attr='..'` after each occurrence of `key`.
fn attr_values(xml: &str, elem_prefix: &str, attr: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for chunk in xml.split('<').filter(|c| c.starts_with(elem_prefix)) {
        let tag = chunk.split('>').next().unwrap_or("");
        if let Some(rest) = tag.split(&format!(" {attr}='")).nth(1) {
            let v = rest.split('\'').next().unwrap_or("");
            let n = match v.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16),
                None => v.parse(),
            };
            out.push(n.unwrap_or_else(|_| panic!("{attr}={v:?} in {tag}")));
        }
    }
    out
}

#[test]
fn launcher_reserves_free_pcie_root_ports() {
    let yaml = guest_vmi("ports", "virtio");
    let mut l = Launcher::start(&yaml, &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let (ok, xml) = l.virsh(&["dumpxml", "--inactive", "e2e_ports"]);
    assert!(ok, "{xml}");
    // The converter's count for this VMI (128 MiB: 8 ports in total, at least 3 free).
    let mut vmi = api::load_vmi(yaml.as_bytes(), api::Arch::Amd64).unwrap();
    api::defaults::fill_missing_uid(&mut vmi);
    let ctx = converter::ConvertContext::new(api::Arch::Amd64, converter::VirtType::Qemu);
    let dom = converter::convert(&vmi, &ctx).unwrap();
    let wanted = converter::pci_ports::free_ports_wanted(&vmi, api::Arch::Amd64, &dom);
    assert!(wanted >= 3, "{wanted}");
    let ports: Vec<u32> = xml
        .split('<')
        .filter(|c| c.starts_with("controller type='pci'") && c.contains("model='pcie-root-port'"))
        .map(|c| attr_values(&format!("<{c}"), "controller", "index")[0])
        .collect();
    let used = attr_values(&xml, "address type='pci'", "bus");
    let free: Vec<u32> = ports
        .iter()
        .copied()
        .filter(|p| !used.contains(p))
        .collect();
    // The launcher appends `wanted` empty ports after libvirt's own (the
    // highest indices); libvirt itself leaves at most one spare port when
    // it adds the ports the devices need.
    let appended = &ports[ports.len().saturating_sub(wanted as usize)..];
    let why = format!(
        "free root ports {free:?} of {ports:?} (buses in use {used:?}), U={}, wanted {wanted}:\n{xml}",
        converter::pci_ports::pci_devices(&dom)
    );
    assert_eq!(appended.len(), wanted as usize, "{why}");
    assert!(appended.iter().all(|p| free.contains(p)), "{why}");
    assert!(
        (wanted as usize..=wanted as usize + 1).contains(&free.len()),
        "{why}"
    );
    assert!(ports.iter().all(|p| *p <= 31), "{ports:?}");
    l.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        l.wait_exit(std::time::Duration::from_secs(90)).success(),
        "{}",
        l.log()
    );
}
