//! Shared by the converter's integration tests.

use std::process::Command;

/// Runs libvirt's `virt-xml-validate` on `xml` (a domain) and fails the
/// test with its output, naming `what`, when libvirt's schema rejects it.
/// Fails loudly when the tool is missing.
pub fn assert_valid_domain(xml: &str, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("domain.xml");
    std::fs::write(&file, xml).unwrap();
    let out = Command::new("virt-xml-validate")
        .arg(&file)
        .arg("domain")
        .output()
        .expect("virt-xml-validate (libvirt-clients) is required: run `bash .ci/install`");
    assert!(
        out.status.success(),
        "virt-xml-validate rejects {what}'s XML:\n{}{}\n{xml}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
