//! The DomainManager operations against a live domain in a launcher's
//! private daemon, through the same `virt` binding the launcher uses.

use std::time::Duration;

use api::Arch;
use converter::{HostFacts, VirtType};
use virtwrap::manager::Connector;
use virtwrap::{DomainManager, LibvirtDomainManager};

use crate::harness::{alive, guest_vmi, Launcher, Opts, BOOT_TIMEOUT};

#[test]
fn pause_unpause_list_and_kill() {
    let yaml = guest_vmi("manager", "virtio");
    let mut l = Launcher::start(&yaml, &Opts::default());
    l.wait_serial("GUEST-READY", 1, BOOT_TIMEOUT);
    let qemu = l.qemu_pid().expect("qemu pid");
    let vmi = api::load_vmi(yaml.as_bytes(), Arch::Amd64).unwrap();
    let metadata = std::sync::Arc::new(virtwrap::metadata::MetadataCache::new(Box::new(|| {})));
    let m = LibvirtDomainManager::new(
        Connector {
            daemon: "libvirtd".into(),
            uri: l.uri(),
            socket: l.state.join("libvirt/run/libvirt-sock"),
        },
        HostFacts::new(Arch::Amd64, VirtType::Qemu),
        storage::PrepareOptions::default(),
        std::sync::Arc::clone(&metadata),
    )
    .expect("connect to the launcher's daemon");

    let list = m.list_all_domains().unwrap();
    assert_eq!(list.len(), 1);
    let d = &list[0];
    assert_eq!(
        (d.name.as_str(), d.state, d.reason),
        ("e2e_manager", "Running", "Unknown")
    );
    assert_eq!(Some(d.uuid.as_str()), d.spec.uuid.as_deref());
    assert_eq!(
        d.spec
            .metadata
            .as_ref()
            .unwrap()
            .kubevirt
            .as_ref()
            .unwrap()
            .uid,
        l.uid
    );

    m.pause_vmi(&vmi).unwrap();
    assert_eq!(l.domstate(), "paused (user)");
    let d = &m.list_all_domains().unwrap()[0];
    assert_eq!((d.state, d.reason), ("Paused", "User"));
    m.pause_vmi(&vmi).unwrap(); // idempotent
                                // A shutdown request for a paused guest is not sent (libvirt refuses
                                // it, the guest could not act on it) but starts the grace period.
    assert_eq!(
        m.signal_shutdown_vmi(&vmi).unwrap(),
        virtwrap::ShutdownRequest::Paused
    );
    let recorded = metadata.snapshot().grace_period.unwrap();
    assert!(recorded.deletion_timestamp.is_some(), "{recorded:?}");
    std::thread::sleep(Duration::from_millis(1100));
    m.signal_shutdown_vmi(&vmi).unwrap();
    assert_eq!(
        metadata.snapshot().grace_period.unwrap(),
        recorded,
        "only the first request is recorded"
    );
    assert_eq!(l.domstate(), "paused (user)");
    m.unpause_vmi(&vmi).unwrap();
    assert!(l.domstate().starts_with("running"), "{}", l.domstate());

    // A VMI this daemon does not know: kill, delete and shutdown are no-ops,
    // pause is KubeVirt's "Domain not found." error.
    let other = api::load_vmi(guest_vmi("other", "virtio").as_bytes(), Arch::Amd64).unwrap();
    m.kill_vmi(&other).unwrap();
    m.delete_vmi(&other).unwrap();
    assert_eq!(
        m.signal_shutdown_vmi(&other).unwrap(),
        virtwrap::ShutdownRequest::NotRunning
    );
    let e = m.pause_vmi(&other).unwrap_err().to_string();
    assert!(e.contains("Message='Domain not found.'"), "{e}");

    m.kill_vmi(&vmi).unwrap();
    let st = l.wait_exit(Duration::from_secs(60));
    assert!(st.success(), "{st}\n{}", l.log());
    assert!(!alive(qemu));
    assert!(l.log().contains("\"reason\":\"Destroyed\""), "{}", l.log());
}
