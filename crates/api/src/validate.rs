//! Semantic checks of a (defaulted) VMI that do not depend on the host:
//! identity, names that become file names, references between disks and
//! volumes, sizes. Each error names its field. KubeVirt's admission webhook
//! rejects the same inputs; the launcher re-checks because in standalone mode
//! nothing else has, and because names end up in paths it writes.

use std::collections::HashSet;

use crate::error::FieldError;
use crate::vmi::VirtualMachineInstance;

/// Most vCPUs accepted: KubeVirt's own ceiling for CPU hot-plug (512);
/// more makes QEMU take minutes to fail, or a TCG guest unusable.
pub const MAX_VCPUS: u64 = 512;

/// Longest VMI name KubeVirt admits (a DNS-1123 subdomain is 253; KubeVirt
/// caps VMI names at 63 because they become pod and host names).
pub const MAX_NAME_LEN: usize = 63;

/// Returns every problem found, in field order (empty = valid).
pub fn validate(vmi: &VirtualMachineInstance) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = &vmi.metadata;
    if meta.name.is_empty() {
        errs.push(FieldError::new("metadata.name", "required"));
    } else if let Err(m) = dns1123_subdomain(&meta.name, MAX_NAME_LEN) {
        errs.push(FieldError::new(
            "metadata.name",
            format!("{:?} {m}", meta.name),
        ));
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
            if let Err(m) = dns1123_subdomain(name, 253) {
                errs.push(FieldError::new(
                    format!("{path}.sshPublicKey.source.secret.secretName"),
                    format!("{name:?} {m}"),
                ));
            }
            let m = &k.propagation_method;
            let n = [&m.no_cloud, &m.config_drive, &m.qemu_guest_agent]
                .iter()
                .filter(|x| x.is_some())
                .count();
            if n != 1 {
                errs.push(FieldError::new(
                    format!("{path}.sshPublicKey.propagationMethod"),
                    "exactly one of noCloud, configDrive and qemuGuestAgent is required",
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
    if let (Some(req), Some(lim)) = (res.requests.get("memory"), res.limits.get("memory")) {
        if let (Ok(r), Ok(l)) = (req.to_bytes(), lim.to_bytes()) {
            if r > l {
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
            match h.disk_type.as_str() {
                "Disk" => {}
                "DiskOrCreate" if h.capacity.is_none() => errs.push(FieldError::new(
                    format!("{path}.capacity"),
                    "required for type DiskOrCreate",
                )),
                "DiskOrCreate" => {}
                other => errs.push(FieldError::new(
                    format!("{path}.type"),
                    format!("{other:?} is not Disk or DiskOrCreate"),
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
        if let Some(serial) = &d.serial {
            if serial.is_empty()
                || !serial
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            {
                errs.push(FieldError::new(
                    format!("{path}.serial"),
                    format!("{serial:?} must be letters, digits, '-', '_' or '.'"),
                ));
            }
        }
    }

    if let Some(mem) = &spec.domain.memory {
        if let Some(g) = &mem.guest {
            match g.to_bytes() {
                Ok(b) if b >= 1 << 20 => {}
                Ok(b) => errs.push(FieldError::new(
                    "spec.domain.memory.guest",
                    format!("{b} bytes is below the 1Mi minimum"),
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
    errs
}

/// RFC 1123 label: 1-63 of `[a-z0-9-]`, alphanumeric at both ends.
fn dns1123_label(s: &str) -> Result<(), &'static str> {
    if s.is_empty() || s.len() > 63 {
        return Err("must be 1-63 characters");
    }
    let b = s.as_bytes();
    let ok = b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-';
    if ok {
        Ok(())
    } else {
        Err("must be lower-case letters, digits and '-', starting and ending alphanumeric")
    }
}

/// RFC 1123 subdomain: dot-separated labels, at most `max` characters.
fn dns1123_subdomain(s: &str, max: usize) -> Result<(), &'static str> {
    if s.len() > max {
        return Err("is too long");
    }
    if s.split('.').all(|l| dns1123_label(l).is_ok()) {
        Ok(())
    } else {
        Err("must be a DNS-1123 name: lower-case letters, digits, '-' and '.'")
    }
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
            e[0].starts_with("metadata.name: \"../etc\" must be a DNS-1123 name"),
            "{e:?}"
        );
        let e = errors(&format!(
            "{H}metadata: {{name: a, namespace: A_B, uid: ../x}}\n"
        ));
        assert!(e[0].starts_with("metadata.namespace: \"A_B\""), "{e:?}");
        assert!(e[1].starts_with("metadata.uid: \"../x\""), "{e:?}");
        let long = "a".repeat(64);
        assert!(errors(&format!("{H}metadata: {{name: {long}}}\n"))[0].contains("too long"));
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
