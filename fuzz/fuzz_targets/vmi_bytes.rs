//! Arbitrary bytes → the launcher's standalone decoder (`api::load_standalone`,
//! as `convert` and `run` use it: YAML or JSON, VMI or VirtualMachine,
//! defaults, KubeVirt's default cluster's defaults, validation) for each of the four
//! architectures → converter → domain XML → parsed back (see the crate's
//! `check`). Seeds: `fuzz/seeds/vmi_bytes` (the VMIs of tests/data as YAML
//! and JSON).

#![no_main]

use api::Arch;
use converter::VirtType;
use libfuzzer_sys::fuzz_target;
use virt_launcher_fuzz::{check, host_context, ARCHES};

fuzz_target!(|data: &[u8]| {
    virt_launcher_fuzz::count_run();
    // The launcher refuses files above 16 MiB before decoding; libFuzzer's
    // inputs stay far below.
    for arch in ARCHES {
        let cluster = api::cluster::ClusterDefaults::default();
        let Ok((mut vmi, _)) = api::load_standalone(data, arch, &cluster) else {
            continue;
        };
        api::defaults::fill_missing_uid(&mut vmi);
        let virt = if arch == Arch::Amd64 {
            VirtType::Kvm
        } else {
            VirtType::Qemu
        };
        check(&vmi, &host_context(arch, virt));
    }
});
