//! SeaBIOS' debug console (KubeVirt v1.6.6 `converter.go`, the
//! `ShouldVerboseLogsBeEnabled` block): with the launcher's verbosity above
//! [`VERBOSITY_THRESHOLD`] an amd64 guest gets an `isa-debugcon` device on
//! I/O port 0x402 whose output goes to the FIFO [`SEABIOS_DEBUG_PIPE`],
//! which the launcher reads and logs line by line (`[SeaBios]: ...`).

use api::Arch;
use domain::{QemuArg, QemuCommandline};

/// KubeVirt's `EXT_LOG_VERBOSITY_THRESHOLD` (virt-controller's
/// `template.go`): the launcher verbosity from which libvirt's debug
/// filters apply; above it the firmware's debug console is added.
pub const VERBOSITY_THRESHOLD: i64 = 5;

/// The FIFO QEMU writes the firmware's debug output into (KubeVirt's
/// `QEMUSeaBiosDebugPipe`, in the pod's private directory).
pub const SEABIOS_DEBUG_PIPE: &str = "/var/run/kubevirt-private/QEMUSeaBiosDebugPipe";

/// Whether the firmware debug console is wanted for the launcher
/// verbosity `env` (the raw `VIRT_LAUNCHER_LOG_VERBOSITY` value): an
/// integer as Go's `strconv.Atoi` reads it (optional sign, no white
/// space) above [`VERBOSITY_THRESHOLD`]. The architecture is checked by
/// [`qemu_args`].
pub fn wanted(env: Option<&str>) -> bool {
    env.and_then(|v| v.parse::<i64>().ok())
        .is_some_and(|v| v > VERBOSITY_THRESHOLD)
}

/// The QEMU arguments of the debug console when `enabled` and the guest is
/// amd64 (KubeVirt's other architectures have no `isa-debugcon`), else
/// `None`.
pub fn qemu_args(arch: Arch, enabled: bool) -> Option<QemuCommandline> {
    if !enabled || arch != Arch::Amd64 {
        return None;
    }
    let args = [
        "-chardev".to_owned(),
        format!("file,id=firmwarelog,path={SEABIOS_DEBUG_PIPE}"),
        "-device".to_owned(),
        "isa-debugcon,iobase=0x402,chardev=firmwarelog".to_owned(),
    ];
    Some(QemuCommandline {
        arg: args.into_iter().map(|value| QemuArg { value }).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wanted_only_above_five_as_atoi_reads_it() {
        for (env, want) in [
            (None, false),
            (Some(""), false),
            (Some("5"), false),
            (Some("6"), true),
            (Some("+9"), true),
            (Some("10"), true),
            (Some(" 6"), false),
            (Some("6x"), false),
            (Some("-7"), false),
            (Some("99999999999999999999"), false),
        ] {
            assert_eq!(wanted(env), want, "{env:?}");
        }
    }

    #[test]
    fn qemu_args_are_kubevirts_on_amd64_only() {
        let args = qemu_args(Arch::Amd64, true).expect("amd64");
        let values: Vec<&str> = args.arg.iter().map(|a| a.value.as_str()).collect();
        assert_eq!(
            values,
            [
                "-chardev",
                "file,id=firmwarelog,path=/var/run/kubevirt-private/QEMUSeaBiosDebugPipe",
                "-device",
                "isa-debugcon,iobase=0x402,chardev=firmwarelog",
            ]
        );
        assert_eq!(qemu_args(Arch::Amd64, false), None);
        for arch in [Arch::Arm64, Arch::Ppc64le, Arch::S390x] {
            assert_eq!(qemu_args(arch, true), None, "{arch}");
        }
    }
}
