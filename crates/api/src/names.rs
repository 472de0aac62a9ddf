//! Names: the syntax Kubernetes gives a VMI's identity, and the names
//! KubeVirt derives from it (the guest's hostname).
//!
//! Kubernetes validates a custom resource's `metadata.name` as a DNS-1123
//! subdomain (`NameIsDNSSubdomain`: at most 253 characters of
//! `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`; the
//! dot-separated parts are not capped at 63 each), and a namespace as a
//! DNS-1123 label (at most 63 characters of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`).
//! KubeVirt's admission adds no limit of its own to the name; what it
//! derives from it is cut to fit, as [`hostname`] does.
//!
//! libvirt is the tighter bound: it names files after the domain
//! (`<namespace>_<name>`) and the EFI variables after the name, and a file
//! name has at most 255 bytes ([`check_libvirt_files`]).

use crate::error::FieldError;
use crate::vmi::VirtualMachineInstance;

/// Longest DNS-1123 subdomain, and so the longest `metadata.name`
/// (Kubernetes' `DNS1123SubdomainMaxLength`).
pub const MAX_SUBDOMAIN_LEN: usize = 253;

/// Longest DNS-1123 label: a namespace, `spec.hostname`, a disk name, and
/// the hostname derived from the VMI's name (`DNS1123LabelMaxLength`).
pub const MAX_LABEL_LEN: usize = 63;

/// Whether `b` may appear inside a DNS-1123 label.
fn label_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
}

/// Whether `s` is one label's characters: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`,
/// of any length.
fn label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && b.iter().all(|c| label_byte(*c)) && b[0] != b'-' && b[b.len() - 1] != b'-'
}

/// Why a name is not a DNS-1123 label or subdomain: the rule broken, to
/// follow the quoted value in a field error (`"My_VM" must be a DNS-1123
/// subdomain: ...`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A label of 0 or more than [`MAX_LABEL_LEN`] characters (the length).
    #[error("must be 1-{MAX_LABEL_LEN} characters (a DNS-1123 label), not {0}")]
    LabelLength(usize),
    /// A label with a character or an end it may not have.
    #[error("must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending alphanumeric")]
    LabelSyntax,
    /// A subdomain of 0 or more than [`MAX_SUBDOMAIN_LEN`] characters (the
    /// length).
    #[error("must be 1-{MAX_SUBDOMAIN_LEN} characters (a DNS-1123 subdomain), not {0}")]
    SubdomainLength(usize),
    /// A subdomain with a character or a part it may not have.
    #[error("must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', each dot-separated part starting and ending alphanumeric")]
    SubdomainSyntax,
}

/// Checks a DNS-1123 label (Kubernetes' `IsDNS1123Label`): 1 to 63
/// lower-case letters, digits and `-`, starting and ending alphanumeric.
///
/// # Errors
/// [`NameError::LabelLength`] or [`NameError::LabelSyntax`].
pub fn dns1123_label(s: &str) -> Result<(), NameError> {
    if s.is_empty() || s.len() > MAX_LABEL_LEN {
        return Err(NameError::LabelLength(s.len()));
    }
    if label_chars(s) {
        Ok(())
    } else {
        Err(NameError::LabelSyntax)
    }
}

/// Checks a DNS-1123 subdomain (Kubernetes' `IsDNS1123Subdomain`): 1 to 253
/// characters, dot-separated parts of lower-case letters, digits and `-`,
/// each starting and ending alphanumeric. The parts have no length limit of
/// their own.
///
/// # Errors
/// [`NameError::SubdomainLength`] or [`NameError::SubdomainSyntax`].
pub fn dns1123_subdomain(s: &str) -> Result<(), NameError> {
    if s.is_empty() || s.len() > MAX_SUBDOMAIN_LEN {
        return Err(NameError::SubdomainLength(s.len()));
    }
    if s.split('.').all(label_chars) {
        Ok(())
    } else {
        Err(NameError::SubdomainSyntax)
    }
}

/// The guest's hostname as KubeVirt derives it (`dns.SanitizeHostname`,
/// used for the cloud-init meta-data and for the pod's hostname, which the
/// DHCP server sends): `spec.hostname` when set, else the VMI name's first
/// dot-separated part, cut to 63 bytes.
///
/// The name is ASCII once validated; a cut that would split a character of
/// an unvalidated name stops before it.
pub fn hostname(name: &str, spec_hostname: Option<&str>) -> String {
    if let Some(h) = spec_hostname.filter(|h| !h.is_empty()) {
        return h.to_owned();
    }
    let first = name.split('.').next().unwrap_or_default();
    let mut end = first.len().min(MAX_LABEL_LEN);
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    first[..end].to_owned()
}

/// Rejects text that XML 1.0 cannot carry (control characters other than
/// tab, newline and carriage return, U+FFFE and U+FFFF). Everything else is
/// escaped by the XML serialiser, so this is the only text check free-form
/// fields that reach the domain need.
///
/// # Errors
/// A [`FieldError`] about `path` naming the first bad character.
pub fn xml_text(path: &str, s: &str) -> Result<(), FieldError> {
    match s.chars().find(|c| {
        (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || *c == '\u{fffe}' || *c == '\u{ffff}'
    }) {
        Some(c) => Err(FieldError::new(
            path,
            format!(
                "contains the character U+{:04X}, which XML cannot carry",
                u32::from(c)
            ),
        )),
        None => Ok(()),
    }
}

/// Longest file name on the file systems libvirt writes to (Linux's
/// `NAME_MAX`, bytes).
pub const NAME_MAX: usize = 255;

/// A file libvirt names after the VMI, measured with libvirt 11.3: the
/// first of a VMI's files whose name passes [`NAME_MAX`] makes the define
/// (or the start) fail with `File name too long`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LibvirtFile {
    /// `/etc/libvirt/qemu/<domain>.xml`, written as `<domain>.xml.new` and
    /// renamed (`virFileRewrite`; the status file in `/run/libvirt/qemu`
    /// likewise), for every domain: the domain name `<namespace>_<name>`
    /// may have at most 247 bytes.
    Definition,
    /// `/var/log/swtpm/libvirt/qemu/<domain>-swtpm.log`, swtpm's log, for a
    /// VMI with a TPM: at most 245 bytes of domain name.
    SwtpmLog,
    /// `/var/lib/libvirt/qemu/nvram/<name>_VARS.fd`, the EFI variables
    /// (KubeVirt names them after the VMI name alone), written as
    /// `<name>_VARS.fd.new`, for a VMI booting EFI: at most 243 bytes of
    /// name.
    Nvram,
}

impl LibvirtFile {
    /// The file name libvirt creates, for domain name `domain` and VMI
    /// name `name`.
    pub fn file_name(self, domain: &str, name: &str) -> String {
        match self {
            LibvirtFile::Definition => format!("{domain}.xml.new"),
            LibvirtFile::SwtpmLog => format!("{domain}-swtpm.log"),
            LibvirtFile::Nvram => format!("{name}_VARS.fd.new"),
        }
    }

    /// The directory it is created in.
    pub fn dir(self) -> &'static str {
        match self {
            LibvirtFile::Definition => "/etc/libvirt/qemu",
            LibvirtFile::SwtpmLog => "/var/log/swtpm/libvirt/qemu",
            LibvirtFile::Nvram => "/var/lib/libvirt/qemu/nvram",
        }
    }

    /// The file name as a pattern, for messages.
    fn pattern(self) -> &'static str {
        match self {
            LibvirtFile::Definition => "<namespace>_<name>.xml.new",
            LibvirtFile::SwtpmLog => "<namespace>_<name>-swtpm.log",
            LibvirtFile::Nvram => "<name>_VARS.fd.new",
        }
    }

    /// What makes libvirt write it, for messages.
    fn why(self) -> &'static str {
        match self {
            LibvirtFile::Definition => "the domain definition",
            LibvirtFile::SwtpmLog => "swtpm's log (the VMI has a TPM)",
            LibvirtFile::Nvram => "the EFI variables (the VMI boots EFI)",
        }
    }

    /// Bytes the file name adds to what it is built from.
    fn overhead(self) -> usize {
        self.file_name("", "").len()
    }

    /// Whether the file name holds the namespace too.
    fn has_namespace(self) -> bool {
        self != LibvirtFile::Nvram
    }
}

/// The files libvirt will name after a (defaulted) VMI: its definition,
/// swtpm's log when it has an enabled TPM, its EFI variables when it boots
/// EFI (`bootloader.efi`, or no boot loader named on arm64, where EFI is
/// the default).
pub fn libvirt_files(vmi: &VirtualMachineInstance) -> Vec<LibvirtFile> {
    let mut out = vec![LibvirtFile::Definition];
    let spec = &vmi.spec;
    if spec
        .domain
        .devices
        .tpm
        .as_ref()
        .is_some_and(|t| t.enabled != Some(false))
    {
        out.push(LibvirtFile::SwtpmLog);
    }
    let bootloader = spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref());
    let efi = match bootloader {
        Some(b) if b.efi.is_some() => true,
        Some(b) if b.bios.is_some() => false,
        _ => spec.architecture.as_deref() == Some("arm64"),
    };
    if efi {
        out.push(LibvirtFile::Nvram);
    }
    out
}

/// Checks that every file libvirt names after the VMI fits in
/// [`NAME_MAX`] bytes, so a name KubeVirt admits but libvirt cannot hold
/// is refused before anything starts, in one line naming the limit.
///
/// # Errors
/// A `metadata.name` error for the first file whose name is too long: its
/// length, the namespace's share of it, and the longest name that fits.
pub fn check_libvirt_files(vmi: &VirtualMachineInstance) -> Result<(), FieldError> {
    let name = &vmi.metadata.name;
    let ns = vmi.namespace();
    let domain = vmi.domain_name();
    for f in libvirt_files(vmi) {
        let file = f.file_name(&domain, name);
        if file.len() <= NAME_MAX {
            continue;
        }
        let (share, room) = if f.has_namespace() {
            let share = ns.len() + 1;
            (
                format!(", of which {share} are the namespace's ({ns:?} and '_')"),
                NAME_MAX.saturating_sub(f.overhead() + share),
            )
        } else {
            (String::new(), NAME_MAX.saturating_sub(f.overhead()))
        };
        return Err(FieldError::new(
            "metadata.name",
            format!(
                "{} characters are too long for libvirt: it stores {} in {}/{}, whose name would be {} bytes{share}, over the file name limit of {NAME_MAX} bytes; at most {room} characters fit{}",
                name.len(),
                f.why(),
                f.dir(),
                f.pattern(),
                file.len(),
                if f.has_namespace() { format!(" in namespace {ns:?}") } else { String::new() },
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_parts_are_not_capped_at_63() {
        // Kubernetes' IsDNS1123Subdomain checks the whole name against one
        // regular expression and 253 characters; no part is a label of 63.
        let long = "a".repeat(150);
        assert_eq!(dns1123_subdomain(&long), Ok(()));
        assert_eq!(dns1123_subdomain(&format!("{long}.b.c")), Ok(()));
        assert_eq!(dns1123_subdomain(&"a".repeat(253)), Ok(()));
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            Err(NameError::SubdomainLength(254))
        );
        assert!(dns1123_subdomain(&"a".repeat(254))
            .unwrap_err()
            .to_string()
            .contains("1-253 characters"));
        for bad in [
            "", "-a", "a-", "a..b", ".a", "a.", "A", "a_b", "a/b", "a.-b",
        ] {
            assert!(dns1123_subdomain(bad).is_err(), "{bad:?}");
        }
        for good in ["a", "0", "a-b.c-d", "1.2.3", "a--b"] {
            assert_eq!(dns1123_subdomain(good), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn labels_are_capped_at_63() {
        assert_eq!(dns1123_label(&"a".repeat(63)), Ok(()));
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            Err(NameError::LabelLength(64))
        );
        assert!(dns1123_label(&"a".repeat(64))
            .unwrap_err()
            .to_string()
            .contains("1-63 characters"));
        assert_eq!(dns1123_label("a_b"), Err(NameError::LabelSyntax));
        for bad in ["", "a.b", "-a", "a-", "Ab", "a_b"] {
            assert!(dns1123_label(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hostname_is_the_first_part_cut_to_63() {
        assert_eq!(hostname("testvm1", None), "testvm1");
        assert_eq!(hostname("web.example.com", None), "web");
        let long = format!("{}{}", "a".repeat(63), "b".repeat(87));
        assert_eq!(hostname(&long, None), "a".repeat(63));
        assert_eq!(hostname(&format!("{long}.x.y"), None), "a".repeat(63));
        assert_eq!(hostname(&long, Some("h1")), "h1");
        // An empty spec.hostname is unset, as in Go.
        assert_eq!(hostname("vm", Some("")), "vm");
        // Never a panic on an unvalidated name.
        assert_eq!(hostname(&"é".repeat(40), None), "é".repeat(31));
    }
}
