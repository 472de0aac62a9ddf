//! virt-handler's MigrateVirtualMachine inputs → the launcher's migration
//! plan (the `migration` crate, issue 16).
//!
//! Input: one selector byte, then the bytes.
//! - selector even: the `MigrationOptions` JSON → `MigrationOptions::parse`,
//!   then the bandwidth in MiB/s and the parallel connections;
//! - selector odd: a VMI JSON → `MigrationState::of` (its
//!   `status.migrationState`), then the destination XML rewrite of a fixed
//!   domain with the namespace and UIDs it names.
//!
//! Property: nothing panics; a refusal is one of KubeVirt's messages (the
//! options' prefix, or `cannot migrate VMI until migrationState is ready`,
//! or a `status.` field named); the rewrite never changes the domain's
//! `<name>` (the destination name is `DestName`'s).

#![no_main]

use libfuzzer_sys::fuzz_target;
use migration::{self, MigrationError, MigrationOptions, MigrationState};

const DOMAIN: &str = "<domain type='qemu'><name>ns1_a</name><uuid>u1</uuid><devices>\
<disk type='file' device='disk'><source file='/var/run/kubevirt-ephemeral-disks/cloud-init-data/ns1/a/noCloud.iso'/>\
<target dev='vdc' bus='virtio'/><alias name='ua-cloudinit'/></disk></devices></domain>";

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    if sel % 2 == 0 {
        match MigrationOptions::parse(rest) {
            Ok(o) => {
                if let Err(e) = o.bandwidth_mib() {
                    assert!(matches!(e, MigrationError::Bandwidth { .. }), "{e:?}");
                    assert!(e.to_string().starts_with("Bandwidth: "), "{e}");
                }
                let _ = o.parallel_connections();
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        MigrationError::NoOptions
                            | MigrationError::OptionsSyntax { .. }
                            | MigrationError::Option { .. }
                    ),
                    "{e:?}"
                );
                let text = e.to_string();
                assert!(
                    text == migration::NO_OPTIONS || text.starts_with(migration::BAD_OPTIONS),
                    "{text}"
                );
            }
        }
        return;
    }
    let Ok(vmi) = serde_json::from_slice::<api::VirtualMachineInstance>(rest) else {
        return;
    };
    match MigrationState::of(&vmi) {
        Ok(state) => {
            let out = migration::destination_xml(DOMAIN, "ns1", "u1", &state);
            assert!(out.starts_with("<domain type='qemu'><name>ns1_a</name>"), "{out}");
        }
        Err(MigrationError::NoMigrationState) => {}
        Err(e @ MigrationError::Status { .. }) => {
            assert!(e.field().is_some_and(|f| f.starts_with("status.")), "{e:?}");
        }
        Err(e) => panic!("not a status refusal: {e:?}"),
    }
});
