//! `virt-launcher convert`: every KubeVirt example and every corpus VMI, on
//! every architecture, either converts to XML that libvirt's own schema
//! accepts (`virt-xml-validate`, through `--validate`) or is refused with
//! exit code 2 and a one-line error naming a field.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    missing_docs
)]

use std::path::Path;
use std::process::Command;

#[path = "support/inputs.rs"]
mod support;
use support::{host_facts, inputs, repo};

fn convert(file: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
        .arg("convert")
        .arg(file)
        .args(args)
        .args(host_facts(file))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn virt_xml_validate_is_installed() {
    let ok = Command::new("virt-xml-validate")
        .arg("--help")
        .output()
        .is_ok();
    assert!(
        ok,
        "virt-xml-validate (libvirt-clients) is required: run `bash .ci/install`"
    );
}

#[test]
fn every_input_on_every_arch_validates_or_is_refused_by_field() {
    let mut validated = 0;
    let mut refused = Vec::new();
    for file in inputs() {
        for arch in ["amd64", "arm64", "ppc64le", "s390x"] {
            let (code, xml, err) = convert(&file, &["--arch", arch, "--validate"]);
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            match code {
                0 => {
                    assert!(
                        xml.starts_with("<domain type=\"kvm\">"),
                        "{name}/{arch}: {xml}"
                    );
                    validated += 1;
                }
                2 => {
                    let line = err.trim_end();
                    // The corpus exercises built features: it must convert on amd64.
                    let corpus = file.parent().is_some_and(|d| d.ends_with("corpus"));
                    assert!(
                        !(corpus && arch == "amd64"),
                        "corpus VMI {name} is refused on amd64: {line}"
                    );
                    assert_eq!(
                        line.lines().count(),
                        1,
                        "{name}/{arch}: not one line: {line}"
                    );
                    assert!(
                        line.starts_with("virt-launcher: spec.")
                            || line.starts_with("virt-launcher: metadata."),
                        "{name}/{arch}: {line}"
                    );
                    assert!(!line.contains("schema rejects"), "{name}/{arch}: {line}");
                    refused.push(format!("{name}/{arch}"));
                }
                _ => panic!("{name}/{arch}: exit {code}: {err}"),
            }
        }
    }
    // 6 examples + 4 corpus VMIs + cases 008 and 020 convert on amd64 at least.
    assert!(
        validated >= 30,
        "only {validated} conversions validated; refused: {refused:?}"
    );
}

#[test]
fn emulation_flags_choose_the_domain_type() {
    let f = repo().join("tests/data/examples/vmi-ephemeral.yaml");
    let (code, xml, _) = convert(&f, &["--use-emulation"]);
    assert_eq!(code, 0);
    assert!(xml.starts_with("<domain type=\"qemu\">"), "{xml}");
    let (code, xml, _) = convert(&f, &["--arch", "arm64"]);
    assert_eq!(code, 0);
    assert!(xml.contains("arch=\"aarch64\" machine=\"virt\""), "{xml}");
}

#[test]
fn refusals_are_one_line_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("kind: Pod\napiVersion: kubevirt.io/v1\nmetadata: {name: a}\n", "kind: \"Pod\""),
        ("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec: {domain: {memory: {guest: 1x}}}\n", "spec.domain.memory.guest: \"1x\" is not a quantity"),
        ("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec: {domain: {}}\n", "spec.domain.memory.guest: no guest memory"),
        ("\u{0}\u{1}garbage", "malformed document"),
    ];
    for (i, (doc, expect)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("{i}.yaml"));
        std::fs::write(&f, doc).unwrap();
        let (code, out, err) = convert(&f, &[]);
        assert_eq!(code, 2, "{doc}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(expect), "{expect:?} not in {err}");
    }
    let (code, _, err) = convert(Path::new("/nonexistent.yaml"), &[]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = convert(
        &repo().join("tests/data/examples/vmi-sata.yaml"),
        &["--arch", "riscv64"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown architecture \"riscv64\""), "{err}");
}

/// A command-line error is one line naming the flags, exit code 2: a
/// flag that needs another (`--pod-subnet` without
/// `--setup-pod-network`: clap lists the missing ones on lines of their
/// own, kept on the one line), required flags missing, a value out of range.
#[test]
fn command_line_errors_are_one_line_naming_the_flags() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["run", "vmi.yaml", "--pod-subnet", "1"],
            "virt-launcher: the following required arguments were not provided: --setup-pod-network (see --help)",
        ),
        (
            &["migration-proxy", "--uid", "u"],
            "virt-launcher: the following required arguments were not provided: --source-share <SOURCE_SHARE>, --target-share <TARGET_SHARE>, --target-libvirt-socket <TARGET_LIBVIRT_SOCKET> (see --help)",
        ),
        (
            &["run", "vmi.yaml", "--setup-pod-network", "--pod-subnet", "256"],
            "virt-launcher: invalid value '256' for '--pod-subnet <N>': 256 is not in 0..=255 (see --help)",
        ),
        // (uid_t)-1 is no owner to the kernel: the tap would be root's.
        (
            &["pod-network-phase1", "vmi.yaml", "--tap-owner", "4294967295"],
            "virt-launcher: invalid value '4294967295' for '--tap-owner <TAP_OWNER>': 4294967295 is not in 0..=4294967294 (see --help)",
        ),
    ];
    for (args, expect) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end(), expect, "{args:?}");
    }
}

/// `convert --network-info FILE`: each SR-IOV interface of the corpus VMI
/// becomes KubeVirt's PCI hostdev with the VF the file gives its network;
/// without the file, or with a bad one, the refusal is one line naming the
/// interface field, or the file and its field.
#[test]
fn sriov_hostdevs_come_from_the_network_info_file() {
    let vmi = repo().join("tests/data/corpus/sriov-interfaces.yaml");
    let (code, xml, err) = convert(&vmi, &["--validate"]);
    assert_eq!(code, 0, "{err}");
    let hostdevs: Vec<&str> = xml.split("<hostdev ").skip(1).collect();
    assert_eq!(hostdevs.len(), 2, "{xml}");
    for (h, (host, alias)) in hostdevs.iter().zip([
        (
            "bus=\"0x81\" slot=\"0x11\" function=\"0x1\"",
            "ua-sriov-red",
        ),
        (
            "bus=\"0xaf\" slot=\"0x02\" function=\"0x7\"",
            "ua-sriov-blue",
        ),
    ]) {
        assert!(
            h.starts_with("mode=\"subsystem\" type=\"pci\" managed=\"no\">"),
            "{h}"
        );
        assert!(h.contains(host), "{host} not in {h}");
        assert!(h.contains(&format!("<alias name=\"{alias}\"/>")), "{h}");
    }
    assert!(
        hostdevs[0].contains("<boot order=\"2\"/>"),
        "{}",
        hostdevs[0]
    );
    assert!(
        hostdevs[0].contains(
            "<address type=\"pci\" domain=\"0x0000\" bus=\"0x00\" slot=\"0x0b\" function=\"0x0\"/>"
        ),
        "{}",
        hostdevs[0]
    );
    // The SR-IOV interfaces are not <interface>s; the masquerade one is.
    assert_eq!(xml.matches("<interface ").count(), 1, "{xml}");

    let dir = tempfile::tempdir().unwrap();
    let info = |name: &str, text: &str| {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        f
    };
    let red =
        r#"{"network":"red","deviceInfo":{"type":"pci","pci":{"pci-address":"0000:81:11.1"}}}"#;
    let cases = [
        (
            info("malformed", "{\"interfaces\": [}"),
            "malformed: interfaces[0]: expected value at line 1 column 17".to_owned(),
        ),
        (
            info("type", r#"{"interfaces":{"network":"red"}}"#),
            "type: interfaces: invalid type: map, expected a sequence at line 1 column 14".to_owned(),
        ),
        (
            info("missing", &format!(r#"{{"interfaces":[{red}]}}"#)),
            "spec.domain.devices.interfaces[2].sriov: {DIR}/missing: no PCI address for SR-IOV network \"blue\" (no interfaces[].network of that name with deviceInfo.pci.pci-address)".to_owned(),
        ),
        (
            info(
                "bad-pci",
                &format!(
                    r#"{{"interfaces":[{red},{{"network":"blue","deviceInfo":{{"pci":{{"pci-address":"0000:af:02"}}}}}}]}}"#
                ),
            ),
            "bad-pci: interfaces[1].deviceInfo.pci.pci-address: \"0000:af:02\" is not a PCI address of the form dddd:bb:ss.f".to_owned(),
        ),
        (
            info(
                "same-vf",
                &format!(
                    r#"{{"interfaces":[{red},{}]}}"#,
                    red.replace("\"red\"", "\"blue\"")
                ),
            ),
            "spec.domain.devices.interfaces[2].sriov: SR-IOV interfaces \"red\" and \"blue\" were both given the host device 0000:81:11.1".to_owned(),
        ),
        (
            dir.path().join("absent"),
            "absent: No such file or directory (os error 2)".to_owned(),
        ),
    ];
    let d = dir.path().display().to_string();
    // A copy without the sibling network-info file.
    let vmi = dir.path().join("vmi.yaml");
    std::fs::copy(repo().join("tests/data/corpus/sriov-interfaces.yaml"), &vmi).unwrap();
    let mut bad = Vec::new();
    for (file, want) in cases {
        let (code, out, err) = convert(&vmi, &["--network-info", file.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(out.is_empty());
        let line = err.trim_end();
        assert_eq!(line.lines().count(), 1, "{line}");
        let want = want.replace("{DIR}", &d);
        if !line.ends_with(&want) {
            bad.push(format!("{want:?} not at the end of {line}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
    // Without the file: the interface and the flag are named.
    let out = Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
        .arg("convert")
        .arg(&vmi)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "virt-launcher: spec.domain.devices.interfaces[1].sriov: no host PCI address for SR-IOV interface \"red\" (the pod's network-info file, or --network-info FILE standalone)"
    );
}

/// `VIRT_LAUNCHER_LOG_VERBOSITY` above 5 adds KubeVirt's SeaBIOS debug
/// console (`<qemu:commandline>`) on amd64, and libvirt's schema accepts it.
#[test]
fn verbosity_above_five_adds_the_seabios_debug_console_on_amd64() {
    let vmi = repo().join("tests/data/examples/vmi-ephemeral.yaml");
    let run = |verbosity: &str, arch: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
            .env("VIRT_LAUNCHER_LOG_VERBOSITY", verbosity)
            .env("RUST_LOG", "error")
            .arg("convert")
            .arg(&vmi)
            .args(["--arch", arch, "--validate"])
            .args(host_facts(&vmi))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let xml = run("6", "amd64");
    assert!(
        xml.contains("xmlns:qemu=\"http://libvirt.org/schemas/domain/qemu/1.0\""),
        "{xml}"
    );
    let cmdline = xml
        .split("<qemu:commandline>")
        .nth(1)
        .expect("qemu:commandline");
    let args: Vec<&str> = cmdline
        .split("<qemu:arg value=\"")
        .skip(1)
        .map(|a| a.split('"').next().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "-chardev",
            "file,id=firmwarelog,path=/var/run/kubevirt-private/QEMUSeaBiosDebugPipe",
            "-device",
            "isa-debugcon,iobase=0x402,chardev=firmwarelog"
        ]
    );
    for (verbosity, arch) in [("5", "amd64"), ("x", "amd64"), ("9", "arm64")] {
        let xml = run(verbosity, arch);
        assert!(!xml.contains("qemu:"), "{verbosity} {arch}: {xml}");
    }
}

/// KubeVirt's `vmi-gpu` and `vmi-usb` examples: their devices come from the
/// device plugins' variables (a PCI GPU, the same GPU as a vGPU with
/// KubeVirt's default display, a USB device), libvirt's schema accepts the
/// domains; without the variables the conversion is refused with
/// KubeVirt's message naming what is missing.
#[test]
fn gpus_and_host_devices_come_from_the_device_plugin_variables() {
    let dir = repo().join("tests/data/hostdevices");
    let run = |file: &str, env: &[(&str, &str)]| {
        let vmi = dir.join(file);
        let out = Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
            .arg("convert")
            .arg(&vmi)
            .arg("--validate")
            .args(host_facts(&vmi))
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let hostdevs = |xml: &str| -> Vec<String> {
        xml.split("<hostdev ")
            .skip(1)
            .map(|h| h.split("</hostdev>").next().unwrap_or("").to_owned())
            .collect()
    };
    let gpu = "PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40";
    let (code, xml, err) = run("vmi-gpu.yaml", &[(gpu, "0000:81:00.0")]);
    assert_eq!(code, 0, "{err}");
    let h = hostdevs(&xml);
    assert_eq!(h.len(), 1, "{xml}");
    assert!(
        h[0].starts_with("mode=\"subsystem\" type=\"pci\" managed=\"no\">"),
        "{}",
        h[0]
    );
    assert!(
        h[0].contains("domain=\"0x0000\" bus=\"0x81\" slot=\"0x00\" function=\"0x0\""),
        "{}",
        h[0]
    );
    assert!(h[0].contains("<alias name=\"ua-gpu-gpu1\"/>"), "{}", h[0]);
    // The same resource as a vGPU: a mediated device with KubeVirt's
    // default display (display and ramfb on the first vGPU).
    let uuid = "4b20d080-1b54-4048-85b3-a6a62d165c01";
    let (code, xml, err) = run(
        "vmi-gpu.yaml",
        &[("MDEV_PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40", uuid)],
    );
    assert_eq!(code, 0, "{err}");
    let h = hostdevs(&xml);
    assert_eq!(h.len(), 1, "{xml}");
    assert!(
        h[0].starts_with(
            "mode=\"subsystem\" type=\"mdev\" model=\"vfio-pci\" display=\"on\" ramfb=\"on\">"
        ),
        "{}",
        h[0]
    );
    assert!(
        h[0].contains(&format!("<address uuid=\"{uuid}\"/>")),
        "{}",
        h[0]
    );
    let (code, xml, err) = run(
        "vmi-usb.yaml",
        &[("USB_RESOURCE_KUBEVIRT_IO_STORAGE", "3:7")],
    );
    assert_eq!(code, 0, "{err}");
    let h = hostdevs(&xml);
    assert_eq!(h.len(), 1, "{xml}");
    assert!(
        h[0].starts_with("mode=\"subsystem\" type=\"usb\">"),
        "{}",
        h[0]
    );
    assert!(
        h[0].contains("<address bus=\"3\" device=\"7\"/>"),
        "{}",
        h[0]
    );
    assert!(
        h[0].contains("<alias name=\"ua-usb-host-node-usb-to-vmi-storage\"/>"),
        "{}",
        h[0]
    );
    // USB host devices need the USB controller KubeVirt otherwise disables.
    assert!(
        xml.contains("<controller type=\"usb\" index=\"0\" model=\"qemu-xhci\"/>"),
        "{xml}"
    );
    // No variable: refused, naming the device and the variables.
    let (code, _, err) = run("vmi-gpu.yaml", &[]);
    assert_ne!(code, 0);
    assert!(
        err.contains("failed to create GPU host-devices: the number of device plugin GPU/s do not match the number of devices: no device for gpu1 (nvidia.com/GP102GL_Tesla_P40: PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
