//! The large benchmark VMI (`benches/large.json`) is what the issue asks
//! for, converts, and libvirt's schema accepts its XML (checked here, not
//! in the benchmark).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::disallowed_types,
    missing_docs
)]

mod support;

use api::Arch;

#[path = "../benches/support/host.rs"]
mod host;

fn count(xml: &str, needle: &str) -> usize {
    xml.matches(needle).count()
}

#[test]
fn large_bench_vmi_has_16_disks_8_nics_numa_hugepages_and_validates() {
    let vmi = api::load_vmi(host::LARGE.as_bytes(), Arch::Amd64).unwrap();
    let dom = converter::convert(&vmi, &host::host()).unwrap();
    let xml = dom.to_xml().unwrap();

    assert_eq!(dom.devices.disk.len(), 16, "{xml}");
    assert_eq!(dom.devices.interface.len(), 8, "{xml}");
    assert_eq!(count(&xml, "<interface type=\"ethernet\">"), 8, "{xml}");
    assert_eq!(
        count(&xml, "<target dev=\"tap0\" managed=\"no\"/>"),
        1,
        "{xml}"
    );
    assert_eq!(
        count(&xml, "<driver name=\"vhost\" queues=\"16\"/>"),
        6,
        "{xml}"
    );
    // Guest NUMA: the 16 pinned vCPUs alternate between the two host
    // nodes, so two cells of 8 vCPUs and 8Gi each, strict on their node,
    // each backed by 2Mi hugepages of that node.
    let cells = &dom.cpu.as_ref().unwrap().numa.as_ref().unwrap().cell;
    assert_eq!(cells.len(), 2, "{xml}");
    assert_eq!(cells[0].cpus, "0,2,4,6,8,10,12,14", "{xml}");
    assert_eq!(cells[1].cpus, "1,3,5,7,9,11,13,15", "{xml}");
    assert_eq!(count(&xml, "memory=\"8589934592\" unit=\"b\""), 2, "{xml}");
    assert_eq!(count(&xml, "<memnode cellid="), 2, "{xml}");
    assert!(
        xml.contains("<page size=\"2097152\" unit=\"b\" nodeset=\"0\"/>"),
        "{xml}"
    );
    assert!(
        xml.contains("<page size=\"2097152\" unit=\"b\" nodeset=\"1\"/>"),
        "{xml}"
    );
    assert_eq!(count(&xml, "<vcpupin "), 16, "{xml}");
    assert!(xml.contains("<emulatorpin "), "{xml}");

    support::assert_valid_domain(&xml, "the large VMI");
}
