//! Semantic checks of a (defaulted) VMI that do not depend on the host:
//! identity, names that become file names, references between disks and
//! volumes, sizes. Each error names its field. KubeVirt's admission webhook
//! rejects the same inputs; the launcher re-checks because in standalone mode
//! nothing else has, and because names end up in paths it writes.

use std::collections::HashSet;

use crate::error::FieldError;
use crate::names::{dns1123_label, dns1123_subdomain, MAX_LABEL_LEN, MAX_SUBDOMAIN_LEN};
use crate::vmi::{HostDiskType, VirtualMachineInstance};

/// Most vCPUs accepted: KubeVirt's own ceiling for CPU hot-plug (512);
/// more makes QEMU take minutes to fail, or a TCG guest unusable.
pub const MAX_VCPUS: u64 = 512;

/// KubeVirt's floor for `resources.requests.memory`, 1M (10^6 bytes), in
/// thousandths of a byte ([`crate::Quantity::milli_value`]).
const MIN_MEMORY_REQUEST_MILLI: i64 = 1_000_000_000;

/// Longest disk serial KubeVirt admits, in characters (`maxStrLen`).
pub const MAX_SERIAL_LEN: usize = 256;

/// Checks the identity alone (`metadata.name`, `namespace`, `uid`), as a
/// pod-mode launcher can before virt-handler sends the VMI: a name libvirt
/// cannot hold is refused later, by SyncVirtualMachine, where virt-handler
/// reports it on the VMI.
pub fn identity(vmi: &VirtualMachineInstance) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = &vmi.metadata;
    if meta.name.is_empty() {
        errs.push(FieldError::new("metadata.name", "required"));
    } else if let Err(m) = dns1123_subdomain(&meta.name) {
        // A name too long is not repeated: the count says enough.
        let msg = if meta.name.len() > MAX_SUBDOMAIN_LEN {
            m.to_string()
        } else {
            format!("{:?} {m}", meta.name)
        };
        errs.push(FieldError::new("metadata.name", msg));
    }
    if let Some(ns) = &meta.namespace {
        if let Err(m) = dns1123_label(ns) {
            errs.push(FieldError::new("metadata.namespace", format!("{ns:?} {m}")));
        }
    }
    if let Some(uid) = &meta.uid {
        let ok = !uid.is_empty()
            && uid.len() <= 64
            && uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            errs.push(FieldError::new(
                "metadata.uid",
                format!("{uid:?} must be 1-64 letters, digits or '-'"),
            ));
        }
    }
    errs
}

/// Returns every problem found, in field order (empty = valid): the
/// identity ([`identity`]), the files libvirt names after it
/// ([`crate::names::check_libvirt_files`]), then the spec.
pub fn validate(vmi: &VirtualMachineInstance) -> Vec<FieldError> {
    // Decoding bounds the lists already; a VMI built otherwise (fuzzing,
    // tests) gets the same bound before the per-device checks below.
    if let Err(e) = crate::limits::check_counts(vmi, "") {
        return vec![e];
    }
    let mut errs = identity(vmi);
    if errs.is_empty() {
        if let Err(e) = crate::names::check_libvirt_files(vmi) {
            errs.push(e);
        }
        let h = vmi.hostname();
        if spec_hostname_unset(vmi) && h.ends_with('-') {
            // KubeVirt admits such a name, but its pod gets this hostname,
            // which Kubernetes refuses: the VMI never starts there.
            errs.push(FieldError::new(
                "metadata.name",
                format!("the guest hostname KubeVirt derives from it (its first dot-separated part cut to {MAX_LABEL_LEN} characters) is {h:?}, which ends with '-' and is not a DNS-1123 label, so Kubernetes refuses KubeVirt's pod: set spec.hostname"),
            ));
        }
    }
    let spec = &vmi.spec;
    if let Some(h) = spec.hostname.as_deref() {
        // KubeVirt: validateHostNameNotConformingToDNSLabelRules. The
        // hostname is written into cloud-init meta-data.
        if let Err(m) = dns1123_label(h) {
            errs.push(FieldError::new("spec.hostname", format!("{h:?} {m}")));
        }
    }
    for (i, c) in spec.access_credentials.iter().enumerate() {
        let path = format!("spec.accessCredentials[{i}]");
        match (&c.ssh_public_key, &c.user_password) {
            (Some(_), Some(_)) | (None, None) => errs.push(FieldError::new(
                path.clone(),
                "exactly one of sshPublicKey and userPassword is required",
            )),
            _ => {}
        }
        if let Some(k) = &c.ssh_public_key {
            // The secret name becomes a directory name (<name>-access-cred).
            let name = k
                .source
                .secret
                .as_ref()
                .map_or("", |s| s.secret_name.as_str());
            if let Err(m) = dns1123_subdomain(name) {
                errs.push(FieldError::new(
                    format!("{path}.sshPublicKey.source.secret.secretName"),
                    format!("{name:?} {m}"),
                ));
            }
            let m = &k.propagation_method;
            let n = [
                m.no_cloud.is_some(),
                m.config_drive.is_some(),
                m.qemu_guest_agent.is_some(),
            ]
            .iter()
            .filter(|x| **x)
            .count();
            if n != 1 {
                errs.push(FieldError::new(
                    format!("{path}.sshPublicKey.propagationMethod"),
                    "exactly one of noCloud, configDrive and qemuGuestAgent is required",
                ));
            }
            if m.qemu_guest_agent
                .as_ref()
                .is_some_and(|q| q.users.is_empty())
            {
                // KubeVirt's validateAccessCredentials, its words.
                errs.push(FieldError::new(
                    format!("{path}.sshPublicKey.propagationMethod.qemuGuestAgent.users"),
                    format!("{path} requires at least one user to be present in the users list"),
                ));
            }
        }
        if let Some(p) = &c.user_password {
            match p.source.secret.as_ref() {
                None => errs.push(FieldError::new(
                    format!("{path}.userPassword.source"),
                    format!("{path} must have exactly one source set"),
                )),
                Some(s) => {
                    // A directory name too (<name>-access-cred).
                    if let Err(m) = dns1123_subdomain(&s.secret_name) {
                        errs.push(FieldError::new(
                            format!("{path}.userPassword.source.secret.secretName"),
                            format!("{:?} {m}", s.secret_name),
                        ));
                    }
                }
            }
            if p.propagation_method.qemu_guest_agent.is_none() {
                errs.push(FieldError::new(
                    format!("{path}.userPassword.propagationMethod"),
                    format!("{path} must have exactly one propagationMethod set"),
                ));
            }
        }
    }
    if let Some(g) = spec.termination_grace_period_seconds {
        if g < 0 {
            errs.push(FieldError::new(
                "spec.terminationGracePeriodSeconds",
                format!("{g} is negative"),
            ));
        }
    }

    let mut volume_names = HashSet::new();
    for (i, v) in spec.volumes.iter().enumerate() {
        let path = format!("spec.volumes[{i}]");
        if let Err(m) = resource_name(&v.name) {
            errs.push(FieldError::new(
                format!("{path}.name"),
                format!("{:?} {m}", v.name),
            ));
        }
        if !volume_names.insert(v.name.as_str()) {
            errs.push(FieldError::new(
                format!("{path}.name"),
                format!("duplicate volume name {:?}", v.name),
            ));
        }
        match v.source_kinds().as_slice() {
            [] => errs.push(FieldError::new(path.clone(), "volume has no source")),
            [_] => {}
            many => errs.push(FieldError::new(
                path.clone(),
                format!("volume has more than one source: {}", many.join(", ")),
            )),
        }
        if let Some(e) = &v.ephemeral {
            if e.persistent_volume_claim
                .as_ref()
                .is_none_or(|c| c.claim_name.is_empty())
            {
                errs.push(FieldError::new(
                    format!("{path}.ephemeral.persistentVolumeClaim.claimName"),
                    "required",
                ));
            }
        }
        if v.memory_dump
            .as_ref()
            .is_some_and(|m| m.claim_name.is_empty())
        {
            errs.push(FieldError::new(
                format!("{path}.memoryDump.claimName"),
                "required",
            ));
        }
        if let Some(e) = &v.empty_disk {
            match e.capacity.to_bytes() {
                Ok(b) if b >= 1 << 20 => {}
                Ok(b) => errs.push(FieldError::new(
                    format!("{path}.emptyDisk.capacity"),
                    format!("{b} bytes is below the 1Mi minimum"),
                )),
                Err(e) => errs.push(FieldError::new(
                    format!("{path}.emptyDisk.capacity"),
                    e.to_string(),
                )),
            }
        }
    }

    if let Some(u) = spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.uuid.as_deref())
    {
        if uuid::Uuid::parse_str(u).is_err() {
            errs.push(FieldError::new(
                "spec.domain.firmware.uuid",
                format!("{u:?} is not a UUID"),
            ));
        }
    }
    let res = &spec.domain.resources;
    // KubeVirt: validateMemoryRequestsNegativeOrNull and
    // validateMemoryLimitsNegativeOrNull (1M is decimal: 10^6 bytes).
    for (kind, q) in [
        ("requests", res.requests.get("memory")),
        ("limits", res.limits.get("memory")),
    ] {
        let Some(q) = q else { continue };
        let field = format!("spec.domain.resources.{kind}.memory");
        if q.is_negative() && !q.is_zero() {
            errs.push(FieldError::new(
                field,
                format!("{q} must be greater than or equal to 0"),
            ));
        } else if kind == "requests"
            && !q.is_zero()
            && q.milli_value().is_ok_and(|m| m < MIN_MEMORY_REQUEST_MILLI)
        {
            errs.push(FieldError::new(
                field,
                format!("{q} must be greater than or equal to 1M"),
            ));
        }
    }
    if let (Some(req), Some(lim)) = (res.requests.get("memory"), res.limits.get("memory")) {
        if let (Ok(r), Ok(l)) = (req.to_bytes(), lim.to_bytes()) {
            // KubeVirt compares only against a limit that is set (> 0).
            if l > 0 && r > l {
                errs.push(FieldError::new(
                    "spec.domain.resources.requests.memory",
                    format!("{req} is greater than spec.domain.resources.limits.memory ({lim})"),
                ));
            }
        }
    }
    for (i, v) in spec.volumes.iter().enumerate() {
        if let Some(h) = &v.host_disk {
            let path = format!("spec.volumes[{i}].hostDisk");
            match &h.disk_type {
                HostDiskType::Disk => {}
                HostDiskType::DiskOrCreate if h.capacity.is_none() => errs.push(FieldError::new(
                    format!("{path}.capacity"),
                    "required for type DiskOrCreate",
                )),
                HostDiskType::DiskOrCreate => {}
                other => errs.push(FieldError::new(
                    format!("{path}.type"),
                    format!("{:?} is not Disk or DiskOrCreate", other.as_str()),
                )),
            }
            if !h.path.starts_with('/') || h.path.split('/').any(|c| c == "..") {
                errs.push(FieldError::new(
                    format!("{path}.path"),
                    format!("{:?} must be an absolute path without '..'", h.path),
                ));
            }
        }
    }

    let mut disk_names = HashSet::new();
    let mut boot_orders = HashSet::new();
    for (i, d) in spec.domain.devices.disks.iter().enumerate() {
        let path = format!("spec.domain.devices.disks[{i}]");
        // KubeVirt: validateDiskNameAsContainerName (a disk's name can
        // become a container's).
        if let Err(m) = dns1123_label(&d.name) {
            errs.push(FieldError::new(
                format!("{path}.name"),
                format!("{:?} {m}", d.name),
            ));
        }
        if !disk_names.insert(d.name.as_str()) {
            errs.push(FieldError::new(
                format!("{path}.name"),
                format!("duplicate disk name {:?}", d.name),
            ));
        }
        let kinds = [d.disk.is_some(), d.lun.is_some(), d.cdrom.is_some()];
        if kinds.iter().filter(|k| **k).count() > 1 {
            errs.push(FieldError::new(
                path.clone(),
                "only one of disk, lun and cdrom may be set",
            ));
        }
        let is_cdrom = d.cdrom.is_some();
        if !volume_names.contains(d.name.as_str()) && !is_cdrom {
            errs.push(FieldError::new(
                format!("{path}.name"),
                format!("volume {:?} not found in spec.volumes", d.name),
            ));
        }
        if let Some(order) = d.boot_order {
            if order == 0 {
                errs.push(FieldError::new(
                    format!("{path}.bootOrder"),
                    "must be 1 or more",
                ));
            } else if !boot_orders.insert(order) {
                errs.push(FieldError::new(
                    format!("{path}.bootOrder"),
                    format!("boot order {order} is used by another device"),
                ));
            }
        }
        if let Some(serial) = d.serial.as_deref().filter(|s| !s.is_empty()) {
            // KubeVirt: validateSerialNumValue and validateSerialNumLength;
            // empty is unset there.
            if !serial
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.+-".contains(&b))
            {
                errs.push(FieldError::new(
                    format!("{path}.serial"),
                    format!("{serial:?} must be made up of the characters [A-Za-z0-9_.+-]"),
                ));
            } else if serial.len() > MAX_SERIAL_LEN {
                errs.push(FieldError::new(
                    format!("{path}.serial"),
                    format!(
                        "must have at most {MAX_SERIAL_LEN} characters, not {}",
                        serial.len()
                    ),
                ));
            }
        }
    }

    // KubeVirt: validateInterfaceBootOrder, one set with the disks' (an
    // order of 0 is the converter's error, as for every interface field).
    for (i, iface) in spec.domain.devices.interfaces.iter().enumerate() {
        let Some(order) = iface.boot_order.filter(|o| *o > 0) else {
            continue;
        };
        let path = format!("spec.domain.devices.interfaces[{i}].bootOrder");
        if !boot_orders.insert(order) {
            errs.push(FieldError::new(
                path,
                format!("boot order {order} is used by another device"),
            ));
        }
    }

    if let Some(mem) = &spec.domain.memory {
        if let Some(g) = &mem.guest {
            match g.to_bytes() {
                // KubeVirt sets no floor here (its 1M is on requests);
                // libvirt refuses a domain without memory.
                Ok(b) if b >= 1 => {}
                Ok(_) => errs.push(FieldError::new(
                    "spec.domain.memory.guest",
                    format!("{g} must be greater than 0"),
                )),
                Err(e) => errs.push(FieldError::new("spec.domain.memory.guest", e.to_string())),
            }
        }
    }
    if let Some(cpu) = &spec.domain.cpu {
        // u128: three u32 factors cannot overflow it (u64 can, and wrapped
        // products would pass the check in a release build).
        let product = u128::from(cpu.sockets.max(1))
            * u128::from(cpu.cores.max(1))
            * u128::from(cpu.threads.max(1));
        if product > u128::from(MAX_VCPUS) {
            errs.push(FieldError::new(
                "spec.domain.cpu",
                format!("sockets × cores × threads = {product} exceeds {MAX_VCPUS} vCPUs"),
            ));
        }
        let name_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.+-".contains(&b))
        };
        if !cpu.model.is_empty() && !name_ok(&cpu.model) {
            errs.push(FieldError::new(
                "spec.domain.cpu.model",
                format!("{:?} is not a CPU model name", cpu.model),
            ));
        }
        for (i, f) in cpu.features.iter().enumerate() {
            if !name_ok(&f.name) {
                errs.push(FieldError::new(
                    format!("spec.domain.cpu.features[{i}].name"),
                    format!("{:?} is not a CPU feature name", f.name),
                ));
            }
        }
    }
    errs.extend(dra_claims(vmi));
    errs
}

/// KubeVirt v1.6.6's DRA admission (`pkg/dra/admitter`,
/// `validateCreationDRA`): every claim a DRA GPU names (`claimName` of a
/// GPU without `deviceName` that has `claimName` or `requestName`) must be
/// one of `spec.resourceClaims[].name`, else KubeVirt's message at
/// `spec.resourceClaims`. As in v1.6.6 only GPUs are checked (KubeVirt's
/// main checks `hostDevices` too). A DRA GPU with `requestName` and no
/// `claimName` is refused by the same rule: v1.6.6's webhook dereferences
/// the missing name there and the request fails without an answer. Not
/// checked here: the `GPUsWithDRA` feature gate (the cluster's; the
/// launcher converts DRA devices as with the gate on).
fn dra_claims(vmi: &VirtualMachineInstance) -> Option<FieldError> {
    let claims: HashSet<&str> = vmi
        .spec
        .resource_claims
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let unlisted = vmi.spec.domain.devices.gpus.iter().any(|g| {
        let dra = g.device_name.is_empty() && (g.claim_name.is_some() || g.request_name.is_some());
        dra && g.claim_name.as_deref().is_none_or(|c| !claims.contains(c))
    });
    unlisted.then(|| {
        FieldError::new(
            "spec.resourceClaims",
            "vmi.spec.resourceClaims must specify all claims used in vmi.spec.domain.devices.gpus",
        )
    })
}

/// Whether the guest's hostname comes from the name (`spec.hostname` unset
/// or empty).
fn spec_hostname_unset(vmi: &VirtualMachineInstance) -> bool {
    vmi.spec.hostname.as_deref().is_none_or(str::is_empty)
}

/// Names that become file names (volumes): letters, digits, `-`, `_`, `.`,
/// starting alphanumeric, at most 63 characters. Never `..` or a `/`.
fn resource_name(s: &str) -> Result<(), &'static str> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err("must be 1-63 letters, digits, '-', '_' or '.', starting alphanumeric")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(doc: &str) -> Vec<String> {
        let mut vmi = crate::load::from_slice(doc.as_bytes()).unwrap();
        crate::defaults::apply(&mut vmi, crate::arch::Arch::Amd64);
        validate(&vmi).iter().map(ToString::to_string).collect()
    }

    const H: &str = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\n";

    /// KubeVirt v1.6.6's DRA rule: a DRA GPU's claim is one of
    /// `spec.resourceClaims`; device-plugin GPUs and host devices are not
    /// checked.
    #[test]
    fn dra_gpu_claims_must_be_resource_claims() {
        let vmi = |gpus: &str, claims: &str| {
            format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    devices:\n      gpus: {gpus}\n      hostDevices: [{{name: h, claimName: nic, requestName: vf}}]\n  resourceClaims: {claims}\n")
        };
        let msg = "spec.resourceClaims: vmi.spec.resourceClaims must specify all claims used in vmi.spec.domain.devices.gpus";
        let listed =
            "[{name: gpu, resourceClaimTemplateName: t}, {name: other, resourceClaimName: c}]";
        assert!(errors(&vmi("[{name: g, claimName: gpu, requestName: r}]", listed)).is_empty());
        assert_eq!(
            errors(&vmi("[{name: g, claimName: gpu, requestName: r}]", "[]")),
            [msg]
        );
        assert_eq!(
            errors(&vmi(
                "[{name: g, claimName: gpu}, {name: g2, claimName: nope}]",
                listed
            )),
            [msg]
        );
        // A request without its claim's name: no claim it could be.
        assert_eq!(errors(&vmi("[{name: g, requestName: r}]", listed)), [msg]);
        // A device plugin's GPU (deviceName) is not DRA's, whatever else
        // it carries; host devices are not checked in v1.6.6.
        assert!(errors(&vmi(
            "[{name: g, deviceName: nvidia.com/P40, claimName: nope}]",
            "[]"
        ))
        .is_empty());
        assert!(errors(&vmi("[]", "[]")).is_empty());
    }

    /// `spec.resourceClaims` keeps Kubernetes' JSON names through a round
    /// trip (what the launcher hands on keeps them).
    #[test]
    fn resource_claims_round_trip_with_kubernetes_names() {
        let doc = r#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"a"},"spec":{"domain":{"devices":{}},"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"},{"name":"x","resourceClaimName":"c"}]}}"#;
        let vmi = crate::load::from_slice(doc.as_bytes()).unwrap();
        let c = &vmi.spec.resource_claims;
        assert_eq!(
            (
                c[0].name.as_str(),
                c[0].resource_claim_template_name.as_deref()
            ),
            ("gpu", Some("t"))
        );
        assert_eq!(
            (c[1].name.as_str(), c[1].resource_claim_name.as_deref()),
            ("x", Some("c"))
        );
        let back = serde_json::to_value(&vmi).unwrap();
        assert_eq!(
            back["spec"]["resourceClaims"],
            serde_json::json!([{"name":"gpu","resourceClaimTemplateName":"t"},{"name":"x","resourceClaimName":"c"}])
        );
    }

    #[test]
    fn valid_example_has_no_errors() {
        let e = errors(&format!("{H}metadata: {{name: a, namespace: ns, uid: 1234-ab}}\nspec:\n  domain: {{memory: {{guest: 64Mi}}}}\n  volumes:\n  - name: root\n    containerDisk: {{image: x}}\n"));
        assert!(e.is_empty(), "{e:?}");
    }

    #[test]
    fn identity_errors() {
        assert_eq!(
            errors(&format!("{H}metadata: {{}}\n")),
            ["metadata.name: required"]
        );
        let e = errors(&format!("{H}metadata: {{name: ../etc}}\n"));
        assert!(
            e[0].starts_with("metadata.name: \"../etc\" must be a DNS-1123 subdomain"),
            "{e:?}"
        );
        let e = errors(&format!(
            "{H}metadata: {{name: a, namespace: A_B, uid: ../x}}\n"
        ));
        assert!(e[0].starts_with("metadata.namespace: \"A_B\""), "{e:?}");
        assert!(e[1].starts_with("metadata.uid: \"../x\""), "{e:?}");
        let long = "a".repeat(254);
        assert_eq!(
            errors(&format!("{H}metadata: {{name: {long}}}\n")),
            ["metadata.name: must be 1-253 characters (a DNS-1123 subdomain), not 254"]
        );
        let e = errors(&format!(
            "{H}metadata: {{name: a, namespace: {}}}\n",
            "n".repeat(64)
        ));
        assert!(e[0].starts_with("metadata.namespace: \"nnn"), "{e:?}");
        assert!(
            e[0].ends_with("must be 1-63 characters (a DNS-1123 label), not 64"),
            "{e:?}"
        );
    }

    /// KubeVirt admits any DNS-1123 subdomain; its parts are not labels of
    /// at most 63 (issue 13: a 72-character name was refused).
    #[test]
    fn names_beyond_63_characters_are_valid() {
        for name in [
            "a".repeat(72),
            "a".repeat(150),
            format!("{}.{}.{}", "a".repeat(100), "b".repeat(70), "c".repeat(60)),
            "a".repeat(239),
        ] {
            let e = errors(&format!("{H}metadata: {{name: {name}}}\n"));
            assert!(e.is_empty(), "{name}: {e:?}");
        }
    }

    /// The longest names libvirt holds, measured with libvirt 11.3: the
    /// domain's definition `<namespace>_<name>.xml.new` (all domains),
    /// swtpm's log `<namespace>_<name>-swtpm.log` (a TPM) and the EFI
    /// variables `<name>_VARS.fd.new` (EFI) must fit in 255 bytes.
    #[test]
    fn names_libvirt_cannot_hold_are_refused_in_one_line() {
        let doc = |ns: &str, n: usize, extra: &str| {
            format!(
                "{H}metadata: {{name: {}, namespace: {ns}}}\nspec:\n  domain:\n    memory: {{guest: 64Mi}}\n{extra}",
                "a".repeat(n)
            )
        };
        // BIOS, namespace "default": 239 fit (domain name 247 bytes), 240 do not.
        assert!(errors(&doc("default", 239, "")).is_empty());
        assert_eq!(
            errors(&doc("default", 240, "")),
            ["metadata.name: 240 characters are too long for libvirt: it stores the domain definition in /etc/libvirt/qemu/<namespace>_<name>.xml.new, whose name would be 256 bytes, of which 8 are the namespace's (\"default\" and '_'), over the file name limit of 255 bytes; at most 239 characters fit in namespace \"default\""]
        );
        // The namespace's share counts: 63 characters leave 183.
        let ns = "n".repeat(63);
        assert!(errors(&doc(&ns, 183, "")).is_empty());
        let e = errors(&doc(&ns, 184, ""));
        assert!(e[0].ends_with("at most 183 characters fit in namespace \"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\""), "{e:?}");
        // A TPM: swtpm's log, 2 bytes more than the definition.
        let tpm = "    devices: {tpm: {}}\n";
        assert!(errors(&doc("a", 243, tpm)).is_empty());
        let e = errors(&doc("a", 244, tpm));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("metadata.name: 244 characters are too long for libvirt: it stores swtpm's log (the VMI has a TPM) in /var/log/swtpm/libvirt/qemu/<namespace>_<name>-swtpm.log, whose name would be 256 bytes"), "{e:?}");
        // A disabled TPM writes no log.
        assert!(errors(&doc("a", 244, "    devices: {tpm: {enabled: false}}\n")).is_empty());
        // EFI: the variables are named after the name alone.
        let efi = "    firmware: {bootloader: {efi: {secureBoot: false}}}\n";
        assert!(errors(&doc("a", 243, efi)).is_empty());
        assert_eq!(
            errors(&doc("a", 244, efi)),
            ["metadata.name: 244 characters are too long for libvirt: it stores the EFI variables (the VMI boots EFI) in /var/lib/libvirt/qemu/nvram/<name>_VARS.fd.new, whose name would be 256 bytes, over the file name limit of 255 bytes; at most 243 characters fit"]
        );
        assert!(errors(&doc("a", 244, "    firmware: {bootloader: {bios: {}}}\n")).is_empty());
    }

    #[test]
    fn arm64_boots_efi_by_default() {
        let doc = format!("{H}metadata: {{name: {}, namespace: a}}\n", "a".repeat(244));
        let mut vmi = crate::load::from_slice(doc.as_bytes()).unwrap();
        crate::defaults::apply(&mut vmi, crate::arch::Arch::Arm64);
        let e = validate(&vmi);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].message.contains("_VARS.fd.new"), "{e:?}");
        let mut amd = crate::load::from_slice(doc.as_bytes()).unwrap();
        crate::defaults::apply(&mut amd, crate::arch::Arch::Amd64);
        assert!(validate(&amd).is_empty());
    }

    /// KubeVirt's hostname is the first part cut to 63; cut there, it may
    /// end with '-', which Kubernetes refuses as KubeVirt's pod's hostname.
    #[test]
    fn a_derived_hostname_ending_with_a_dash_is_refused_unless_spec_hostname_is_set() {
        let name = format!("{}-{}", "a".repeat(62), "b".repeat(20));
        let e = errors(&format!("{H}metadata: {{name: {name}}}\n"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with(&format!("metadata.name: the guest hostname KubeVirt derives from it (its first dot-separated part cut to 63 characters) is \"{}-\"", "a".repeat(62))),
            "{e:?}"
        );
        assert!(e[0].ends_with("set spec.hostname"), "{e:?}");
        let e = errors(&format!(
            "{H}metadata: {{name: {name}}}\nspec: {{hostname: h}}\n"
        ));
        assert!(e.is_empty(), "{e:?}");
    }

    /// The identity alone, as a pod-mode launcher checks its flags: a name
    /// libvirt cannot hold is left to SyncVirtualMachine.
    #[test]
    fn identity_leaves_libvirt_limits_to_the_sync() {
        let mut vmi = VirtualMachineInstance::default();
        vmi.metadata.name = "a".repeat(253);
        assert!(identity(&vmi).is_empty());
        assert!(validate(&vmi)[0].message.contains("too long for libvirt"));
        vmi.metadata.name = "A".into();
        assert_eq!(identity(&vmi).len(), 1);
    }

    #[test]
    fn volume_and_disk_references() {
        let e = errors(&format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    devices:\n      disks:\n      - name: data\n  volumes:\n  - name: root\n    containerDisk: {{image: x}}\n"));
        assert_eq!(
            e,
            [r#"spec.domain.devices.disks[0].name: volume "data" not found in spec.volumes"#]
        );
        let e = errors(&format!("{H}metadata: {{name: a}}\nspec:\n  volumes:\n  - name: ../../etc/shadow\n    containerDisk: {{image: x}}\n  - name: v\n  - name: w\n    containerDisk: {{image: x}}\n    emptyDisk: {{capacity: 1Gi}}\n"));
        assert!(
            e[0].starts_with(r#"spec.volumes[0].name: "../../etc/shadow" must be"#),
            "{e:?}"
        );
        assert_eq!(e[1], "spec.volumes[1]: volume has no source");
        assert_eq!(
            e[2],
            "spec.volumes[2]: volume has more than one source: containerDisk, emptyDisk"
        );
    }

    #[test]
    fn duplicates_and_boot_order() {
        let e = errors(&format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    devices:\n      disks:\n      - {{name: v, bootOrder: 1}}\n      - {{name: v, bootOrder: 1}}\n      - {{name: w, bootOrder: 0, disk: {{}}, cdrom: {{}}}}\n  volumes:\n  - name: v\n    containerDisk: {{image: x}}\n  - name: w\n    emptyDisk: {{capacity: 1k}}\n"));
        assert!(
            e.contains(
                &"spec.volumes[1].emptyDisk.capacity: 1000 bytes is below the 1Mi minimum"
                    .to_string()
            ),
            "{e:?}"
        );
        assert!(e.contains(
            &r#"spec.domain.devices.disks[1].name: duplicate disk name "v""#.to_string()
        ));
        assert!(e.contains(
            &"spec.domain.devices.disks[1].bootOrder: boot order 1 is used by another device"
                .to_string()
        ));
        assert!(e.contains(
            &"spec.domain.devices.disks[2]: only one of disk, lun and cdrom may be set".to_string()
        ));
        assert!(
            e.contains(&"spec.domain.devices.disks[2].bootOrder: must be 1 or more".to_string())
        );
    }

    #[test]
    fn impossible_sizes() {
        let e = errors(&format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    memory: {{guest: -1Gi}}\n    cpu: {{sockets: 100000, cores: 100000}}\n"));
        assert_eq!(e[0], "spec.domain.memory.guest: -1Gi is negative");
        assert!(e[1].starts_with("spec.domain.cpu: sockets × cores × threads = 10000000000"));
        let e = errors(&format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    memory: {{guest: 64Mi}}\n    cpu: {{cores: 513, model: \"</model>\"}}\n    firmware: {{uuid: not-a-uuid}}\n    resources:\n      requests: {{memory: 2Gi}}\n      limits: {{memory: 1Gi}}\n  volumes:\n  - name: h\n    hostDisk: {{path: rel/x.img, type: Banana}}\n"));
        let has = |m: &str| assert!(e.contains(&m.to_string()), "{m} not in {e:?}");
        has("spec.domain.firmware.uuid: \"not-a-uuid\" is not a UUID");
        has("spec.domain.resources.requests.memory: 2Gi is greater than spec.domain.resources.limits.memory (1Gi)");
        has("spec.volumes[0].hostDisk.type: \"Banana\" is not Disk or DiskOrCreate");
        has("spec.volumes[0].hostDisk.path: \"rel/x.img\" must be an absolute path without '..'");
        has("spec.domain.cpu: sockets × cores × threads = 513 exceeds 512 vCPUs");
        has("spec.domain.cpu.model: \"</model>\" is not a CPU model name");
        let e = errors(&format!(
            "{H}metadata: {{name: a}}\nspec:\n  domain:\n    memory: {{guest: \"1e40\"}}\n"
        ));
        assert_eq!(e, ["spec.domain.memory.guest: 1e40 is too large"]);
    }

    /// Limits as KubeVirt v1.6.6's admission sets them
    /// (vmi-create-admitter.go).
    #[test]
    fn disk_names_serials_and_memory_follow_kubevirts_admission() {
        let disk = |name: &str, serial: &str| {
            errors(&format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    devices:\n      disks:\n      - name: {name}\n        serial: \"{serial}\"\n  volumes:\n  - name: {name}\n    containerDisk: {{image: x}}\n"))
        };
        // Disk names are DNS-1123 labels (validateDiskNameAsContainerName).
        assert!(disk("data-1", "").is_empty());
        let e = disk("Data_1", "");
        assert_eq!(
            e,
            [
                r#"spec.domain.devices.disks[0].name: "Data_1" must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending alphanumeric"#
            ]
        );
        let e = disk(&"d".repeat(64), "");
        let e = &e[1..]; // and as a volume name (spec.volumes[0].name)
        assert!(
            e[0].starts_with("spec.domain.devices.disks[0].name: \"ddd"),
            "{e:?}"
        );
        assert!(
            e[0].ends_with("must be 1-63 characters (a DNS-1123 label), not 64"),
            "{e:?}"
        );
        // Serials: [A-Za-z0-9_.+-], at most 256; empty is unset.
        assert!(disk("d", "A+b_c.d-1").is_empty());
        assert!(disk("d", &"s".repeat(256)).is_empty());
        assert_eq!(
            disk("d", &"s".repeat(257)),
            ["spec.domain.devices.disks[0].serial: must have at most 256 characters, not 257"]
        );
        assert_eq!(
            disk("d", "a b"),
            [
                r#"spec.domain.devices.disks[0].serial: "a b" must be made up of the characters [A-Za-z0-9_.+-]"#
            ]
        );
        // Memory: requests at least 1M (decimal), none negative; no floor
        // on guest but zero.
        let mem = |requests: &str, limits: &str, guest: &str| {
            errors(&format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    memory: {{guest: \"{guest}\"}}\n    resources:\n      requests: {{memory: \"{requests}\"}}\n      limits: {{memory: \"{limits}\"}}\n"))
        };
        assert!(mem("1M", "2M", "1M").is_empty());
        assert!(mem("1M", "0", "512Ki").is_empty());
        assert_eq!(
            mem("999999", "2M", "1M"),
            ["spec.domain.resources.requests.memory: 999999 must be greater than or equal to 1M"]
        );
        assert_eq!(
            mem("1M", "-1", "1M"),
            ["spec.domain.resources.limits.memory: -1 must be greater than or equal to 0"]
        );
        assert_eq!(
            mem("1M", "2M", "0"),
            ["spec.domain.memory.guest: 0 must be greater than 0"]
        );
        assert!(mem("1M", "2M", "1").is_empty());
    }

    /// KubeVirt checks boot orders across disks and interfaces together.
    #[test]
    fn interface_boot_orders_share_the_disks_set() {
        let e = errors(&format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    memory: {{guest: 64Mi}}\n    devices:\n      disks:\n      - {{name: v, bootOrder: 1}}\n      interfaces:\n      - {{name: default, masquerade: {{}}, bootOrder: 1}}\n      - {{name: red, bridge: {{}}, bootOrder: 0}}\n  volumes:\n  - name: v\n    containerDisk: {{image: x}}\n"));
        assert_eq!(
            e,
            ["spec.domain.devices.interfaces[0].bootOrder: boot order 1 is used by another device"]
        );
    }

    /// Found by the structured fuzz target: the product of three u32
    /// counts overflowed u64 (a panic in debug builds; a wrapped product
    /// that passes the check in release builds).
    #[test]
    fn fuzz_cpu_topology_product_does_not_overflow() {
        let e = errors(&format!("{H}metadata: {{name: a}}\nspec:\n  domain:\n    cpu: {{sockets: 4294967295, cores: 4294967295, threads: 4294967295, maxSockets: 4294967295}}\n"));
        assert!(
            e.contains(&"spec.domain.cpu: sockets × cores × threads = 79228162458924105385300197375 exceeds 512 vCPUs".to_string()),
            "{e:?}"
        );
    }
}
