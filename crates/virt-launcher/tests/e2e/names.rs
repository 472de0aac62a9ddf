//! Names KubeVirt admits beyond 63 characters (issue 13): a VMI whose name
//! is any DNS-1123 subdomain runs, standalone and under virt-handler, with
//! the hostname KubeVirt derives (the first dot-separated part cut to 63);
//! a name whose files libvirt cannot hold is refused in one line before
//! anything starts.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::bad_input::refuse;
use crate::harness::{guest_vmi, launcher_bin, Launcher, Opts, BOOT_TIMEOUT};
use crate::network::fields;
use crate::protocol::{virt_handler, vmi_json_of};

/// `n` characters cycling through `a`..`j`: where a cut falls shows.
fn part(n: usize) -> String {
    (0..n).map(|i| char::from(b'a' + (i % 10) as u8)).collect()
}

/// The test guest's VMI named `name`, with a NoCloud volume (the guest
/// takes its hostname from the meta-data's `local-hostname`).
fn named_vmi(name: &str) -> String {
    guest_vmi(name, "virtio")
        .replace(
            "      - name: scratch\n",
            "      - name: cloudinit\n        disk: {bus: virtio}\n      - name: scratch\n",
        )
        .replace(
            "  - name: scratch\n    emptyDisk",
            "  - name: cloudinit\n    cloudInitNoCloud:\n      userData: \"#cloud-config\\n\"\n  - name: scratch\n    emptyDisk",
        )
}

/// `virsh` on the launcher's own daemon through `/proc/<pid>/root/run`, a
/// path that stays short whatever the state directory is called (its own,
/// `<state>/libvirt/run/libvirt-sock`, is over the 107 bytes of a Unix
/// socket path here). Not `/var/run`: that is a symbolic link to `/run`,
/// which would be the caller's.
fn virsh(l: &Launcher, args: &[&str]) -> String {
    let pid = ["libvirtd", "virtqemud"]
        .iter()
        .find_map(|d| l.daemon_pid(d))
        .expect("the launcher's libvirt daemon");
    let uri = format!("qemu+unix:///system?socket=/proc/{pid}/root/run/libvirt/libvirt-sock");
    let out = Command::new("virsh")
        .arg("-c")
        .arg(&uri)
        .args(args)
        .output()
        .expect("virsh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "virsh {args:?}: {text}");
    text
}

/// Every Unix socket path in the running domain's XML (`path=`/`socket=`
/// ending in a socket's name, libvirt's guest agent channel included) is at
/// most 107 bytes and free of the VMI's name.
fn assert_socket_paths_short(xml: &str, name: &str) {
    let kinds = ["virt-serial0", "virt-vnc", "org.qemu.guest_agent.0"];
    let mut seen = std::collections::BTreeSet::new();
    for attr in ["path='", "socket='"] {
        for rest in xml.split(attr).skip(1) {
            let value = &rest[..rest.find('\'').unwrap()];
            if let Some(kind) = kinds.iter().find(|k| value.ends_with(*k)) {
                seen.insert(*kind);
                assert!(value.len() <= 107, "{value} ({} bytes)", value.len());
                assert!(!value.contains(name), "{value}");
            }
        }
    }
    assert_eq!(seen.len(), kinds.len(), "sockets {seen:?} in:\n{xml}");
}

/// Runs `named_vmi(name)` standalone to `GUEST-READY`, checks the hostname
/// and what libvirt and QEMU were given, then shuts it down with SIGTERM;
/// returns the running domain's XML.
fn runs_standalone(yaml: &str, name: &str, state_parent: &Path) -> String {
    let want = part(63);
    assert!(name.starts_with(&want), "{name}");
    let mut l = Launcher::start_in(yaml, &Opts::default(), state_parent);
    let serial = l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let f = fields(&serial, "GUEST-READY");
    assert_eq!(f["hostname"], want, "{serial}");
    let domain = format!("e2e_{name}");
    assert_eq!(l.domain, domain);
    let list = virsh(&l, &["list", "--name"]);
    assert!(list.lines().any(|d| d == domain), "{list}");
    let xml = virsh(&l, &["dumpxml", &domain]);
    assert_socket_paths_short(&xml, name);
    let qemu = l.qemu_pid().expect("QEMU runs");
    let cmdline = std::fs::read(format!("/proc/{qemu}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains(&format!("guest={domain},")),
        "QEMU's -name"
    );
    // The command socket, reached by `ctl` through the state directory
    // however long its path.
    let (ok, out, err) = l.ctl(&["ping"]);
    assert!(ok, "ctl ping: {out}{err}");
    l.stop(Duration::from_secs(90));
    assert!(l.serial().contains("GUEST-SHUTDOWN"), "{}", l.serial());
    l.assert_nothing_left();
    xml
}

/// (a) One 150-character part: the guest's hostname is its first 63. The
/// state directory sits below a directory called as the default one is
/// (`<namespace>_<name>`), so the command socket's path from the host is
/// over 107 bytes.
#[test]
fn a_vmi_named_with_one_150_character_part_runs_with_its_hostname_cut_to_63() {
    let name = part(150);
    let yaml = named_vmi(&name);
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().join(format!("e2e_{name}"));
    std::fs::create_dir(&parent).unwrap();
    assert!(
        parent
            .join("state/share/sockets/launcher-sock")
            .as_os_str()
            .len()
            > 107
    );
    runs_standalone(&yaml, &name, &parent);
}

/// (b) Dots, and the longest name libvirt holds for a VMI booting EFI with
/// a TPM in namespace "e2e": 241 characters, a 245-byte domain name, so
/// swtpm's log `<domain>-swtpm.log` has exactly 255 bytes and the EFI
/// variables `<name>_VARS.fd.new` 253.
#[test]
fn a_dotted_name_at_libvirts_limit_runs_efi_with_a_tpm() {
    let name = format!("{}.{}.{}", part(100), "b".repeat(90), "c".repeat(49));
    assert_eq!(name.len(), 241);
    let yaml = named_vmi(&name)
        .replace(
            "    memory: {guest: 128Mi}\n",
            "    memory: {guest: 256Mi}\n    firmware: {bootloader: {efi: {secureBoot: false}}}\n",
        )
        .replace("      rng: {}\n", "      rng: {}\n      tpm: {}\n");
    assert!(yaml.contains("tpm: {}") && yaml.contains("efi:"), "{yaml}");
    let tmp = tempfile::tempdir().unwrap();
    let xml = runs_standalone(&yaml, &name, tmp.path());
    assert!(xml.contains("<tpm model="), "{xml}");
    assert!(
        xml.contains(&format!(
            "/var/lib/libvirt/qemu/nvram/{name}_VARS.fd</nvram>"
        )),
        "{xml}"
    );
    // One more character is one too many (see refusals below).
    let one_more =
        named_vmi(&format!("{name}c")).replace("      rng: {}\n", "      rng: {}\n      tpm: {}\n");
    let (code, line) = refuse(&one_more, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(line.contains("swtpm's log"), "{line}");
}

/// (c) Pod mode: virt-handler (the Python stand-in) syncs the long-named
/// VMI; the pod network's DHCP server and the cloud-init meta-data both
/// give the guest KubeVirt's hostname.
#[test]
fn pod_mode_runs_a_long_named_vmi_synced_by_virt_handler() {
    let name = part(150);
    let yaml = crate::network::masquerade_vmi(&name)
        .replace(
            "      - name: scratch\n",
            "      - name: cloudinit\n        disk: {bus: virtio}\n      - name: scratch\n",
        )
        .replace(
            "  - name: scratch\n    emptyDisk",
            "  - name: cloudinit\n    cloudInitNoCloud:\n      userData: \"#cloud-config\\n\"\n  - name: scratch\n    emptyDisk",
        );
    assert!(yaml.contains("cloudInitNoCloud"), "{yaml}");
    let (mut l, serial) = crate::protocol::run_under_handler_on_network(&yaml);
    assert_eq!(
        fields(&serial, "GUEST-DHCP")["hostname"],
        part(63),
        "{serial}"
    );
    assert_eq!(
        fields(&serial, "GUEST-READY")["hostname"],
        part(63),
        "{serial}"
    );
    l.wait_success_and_check(Duration::from_secs(60));
}

/// `virt-launcher convert [--validate] FILE`: (exit code, stdout, stderr).
fn convert(file: &Path, validate: bool) -> (i32, String, String) {
    let mut c = Command::new(launcher_bin());
    c.arg("convert").arg(file);
    if validate {
        c.arg("--validate");
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// (d) A name KubeVirt admits but libvirt cannot hold is refused in one
/// line by `convert` (with `--validate` too) and `run` (exit 2, nothing
/// started, nothing written): in namespace "e2e", 243 characters make a
/// 247-byte domain name, whose `<domain>.xml.new` has 255 bytes (it
/// converts and validates); 244 characters make 256.
#[test]
fn a_name_too_long_for_libvirt_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let fits = tmp.path().join("fits.yaml");
    std::fs::write(&fits, named_vmi(&part(243))).unwrap();
    let (code, xml, err) = convert(&fits, true);
    assert_eq!(code, 0, "{err}");
    assert!(
        xml.contains(&format!("<name>e2e_{}</name>", part(243))),
        "{xml}"
    );
    let long = tmp.path().join("long.yaml");
    let yaml = named_vmi(&part(244));
    std::fs::write(&long, &yaml).unwrap();
    let want = "virt-launcher: metadata.name: 244 characters are too long for libvirt: it stores the domain definition in /etc/libvirt/qemu/<namespace>_<name>.xml.new, whose name would be 256 bytes, of which 4 are the namespace's (\"e2e\" and '_'), over the file name limit of 255 bytes; at most 243 characters fit in namespace \"e2e\"";
    for validate in [false, true] {
        let (code, out, err) = convert(&long, validate);
        assert_eq!((code, out.as_str()), (2, ""), "{err}");
        assert_eq!(err.trim_end(), want, "--validate {validate}");
    }
    let (code, line) = refuse(&yaml, &[]);
    assert_eq!((code, line.as_str()), (2, want));
    // Beyond a DNS-1123 subdomain (253): KubeVirt's own limit.
    let (code, line) = refuse(&named_vmi(&part(254)), &[]);
    assert_eq!(code, 2, "{line}");
    assert_eq!(
        line,
        "virt-launcher: metadata.name: must be 1-253 characters (a DNS-1123 subdomain), not 254"
    );
}

/// (d) Pod mode: the identity flags are accepted, and SyncVirtualMachine
/// answers with the same line (virt-handler reports it on the VMI); the
/// launcher starts no domain and stays up until told to stop.
#[test]
fn pod_mode_refuses_the_sync_of_a_name_too_long_for_libvirt() {
    let yaml = named_vmi(&part(244));
    let mut l = Launcher::start_pod_for_handler(&yaml);
    let vmi = vmi_json_of(&l, &yaml);
    let out = virt_handler(&l, &vmi, &[]).wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}\n{}", l.log());
    assert!(
        // virt-handler's cmd-client wraps the launcher's message (Go-quoted).
        stdout.contains(
            "FAIL: sync: server error. command SyncVMI failed: \"metadata.name: 244 characters are too long for libvirt"
        ),
        "{stdout}\n{}",
        l.log()
    );
    assert!(!l.log().contains("domain defined"), "{}", l.log());
    l.stop_and_check(Duration::from_secs(60));
}
