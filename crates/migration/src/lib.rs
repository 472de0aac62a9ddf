//! Live migration's inputs and the pure parts of its plan (KubeVirt v1.6.6
//! `pkg/virt-launcher/virtwrap/live-migration-source.go`, kubevirt-facts
//! §8.7): virt-handler's `MigrationOptions` JSON, the VMI's
//! `status.migrationState`, libvirt's flags and parameters, the disks to
//! copy and the destination XML rewritten for the target. Pure: no
//! libvirt. libvirt's flags (`virtwrap::migration::migration_flags`), the
//! libvirt calls and the progress monitor are in `virtwrap`.

use std::collections::BTreeSet;

mod error;
pub use error::MigrationError;

use api::quantity::Quantity;
use api::VirtualMachineInstance;
use serde_json::Value;

/// virt-handler's migration proxy port for the memory stream
/// (`LibvirtDirectMigrationPort`).
pub const DIRECT_MIGRATION_PORT: u16 = 49152;
/// virt-handler's migration proxy port for block migration
/// (`LibvirtBlockMigrationPort`).
pub const BLOCK_MIGRATION_PORT: u16 = 49153;

/// KubeVirt's failure message when MigrateVirtualMachine carries no
/// options.
pub const NO_OPTIONS: &str = "migration options object not present in command server request";
/// KubeVirt's prefix when the options do not decode.
pub const BAD_OPTIONS: &str = "no valid migration options object present in command server request";
/// KubeVirt's failure when the VMI has no `status.migrationState`.
pub const NO_MIGRATION_STATE: &str = "cannot migrate VMI until migrationState is ready";
/// KubeVirt's failure reason of a migration cancelled through libvirt
/// (trailing space included, as KubeVirt writes it).
pub const ABORTED: &str = "Live migration aborted ";
/// The test annotation that fails a migration at once
/// (`FuncTestForceLauncherMigrationFailureAnnotation`).
pub const FORCE_FAILURE_ANNOTATION: &str = "kubevirt.io/func-test-force-launcher-migration-failure";
/// Its failure reason.
pub const FORCED_FAILURE: &str = "Failed migration to satisfy functional test condition";
/// The test annotation that fails the target's preparation
/// (`FuncTestBlockLauncherPrepareMigrationTargetAnnotation`).
pub const BLOCK_TARGET_ANNOTATION: &str =
    "kubevirt.io/func-test-block-migration-target-preparation";
/// Its error.
pub const BLOCKED_TARGET: &str =
    "Blocking preparation of migration target in order to satisfy a functional test condition";

/// virt-handler's `MigrationOptions` (`pkg/virt-handler/cmd-client`),
/// sent as JSON with Go's field names and no tags; Go's decoder matches
/// keys case-insensitively and ignores unknown ones, as [`Self::parse`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationOptions {
    /// `Bandwidth`: a Kubernetes quantity of bytes per second; 0 = no cap.
    pub bandwidth: Option<Quantity>,
    /// `ProgressTimeout`, seconds without progress before the migration
    /// is aborted (0: never).
    pub progress_timeout: i64,
    /// `CompletionTimeoutPerGiB`, seconds per started GB (10^9 bytes) of
    /// memory (and copied disks) the migration may take (0: unbounded).
    pub completion_timeout_per_gib: i64,
    /// `UnsafeMigration`: libvirt's `VIR_MIGRATE_UNSAFE`.
    pub unsafe_migration: bool,
    /// `AllowAutoConverge`: `VIR_MIGRATE_AUTO_CONVERGE`.
    pub allow_auto_converge: bool,
    /// `AllowPostCopy`: `VIR_MIGRATE_POSTCOPY`, and post-copy when the
    /// completion budget runs out with workload disruption allowed.
    pub allow_post_copy: bool,
    /// `ParallelMigrationThreads` (`*uint`): `VIR_MIGRATE_PARALLEL` with
    /// this many connections, unless post-copy is allowed.
    pub parallel_migration_threads: Option<u32>,
    /// `AllowWorkloadDisruption`: past the completion budget, switch to
    /// post-copy or pause the guest instead of aborting.
    pub allow_workload_disruption: bool,
}

impl MigrationOptions {
    /// Decodes virt-handler's JSON.
    ///
    /// # Errors
    /// [`MigrationError::NoOptions`] for no bytes (KubeVirt's `migration
    /// options object not present in command server request`);
    /// [`MigrationError::OptionsSyntax`] for bytes that are no JSON object
    /// and [`MigrationError::Option`] for an option of the wrong type, the
    /// option named (both KubeVirt's `no valid migration options object
    /// present in command server request: <why>`).
    pub fn parse(bytes: &[u8]) -> Result<Self, MigrationError> {
        if bytes.is_empty() {
            return Err(MigrationError::NoOptions);
        }
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| MigrationError::OptionsSyntax {
                reason: e.to_string(),
            })?;
        let Value::Object(map) = v else {
            return Err(MigrationError::OptionsSyntax {
                reason: format!("the options are a JSON {}, not an object", json_kind(&v)),
            });
        };
        let mut o = MigrationOptions::default();
        for (key, val) in &map {
            if val.is_null() {
                continue;
            }
            let bad = |field: &'static str, what: &str| MigrationError::Option {
                field,
                reason: format!("{} is not {what}", api::text::cut(&val.to_string(), 64)),
            };
            let int = |field| val.as_i64().ok_or_else(|| bad(field, "an int64"));
            let boolean = |field| val.as_bool().ok_or_else(|| bad(field, "a bool"));
            match key.to_ascii_lowercase().as_str() {
                "bandwidth" => {
                    let s = match val {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        other => {
                            return Err(MigrationError::Option {
                                field: "Bandwidth",
                                reason: format!("a JSON {} is not a quantity", json_kind(other)),
                            })
                        }
                    };
                    let q = Quantity::parse(&s).map_err(|e| MigrationError::Option {
                        field: "Bandwidth",
                        reason: e.to_string(),
                    })?;
                    o.bandwidth = Some(q);
                }
                "progresstimeout" => o.progress_timeout = int("ProgressTimeout")?,
                "completiontimeoutpergib" => {
                    o.completion_timeout_per_gib = int("CompletionTimeoutPerGiB")?;
                }
                "unsafemigration" => o.unsafe_migration = boolean("UnsafeMigration")?,
                "allowautoconverge" => o.allow_auto_converge = boolean("AllowAutoConverge")?,
                "allowpostcopy" => o.allow_post_copy = boolean("AllowPostCopy")?,
                "allowworkloaddisruption" => {
                    o.allow_workload_disruption = boolean("AllowWorkloadDisruption")?;
                }
                "parallelmigrationthreads" => {
                    let n = val
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| bad("ParallelMigrationThreads", "a uint"))?;
                    o.parallel_migration_threads = Some(n);
                }
                _ => {}
            }
        }
        Ok(o)
    }

    /// `Bandwidth` in MiB/s as KubeVirt's `QuantityToMebiByte`: 0 for none
    /// or zero, 1 below 1 MiB, else rounded half up.
    ///
    /// # Errors
    /// [`MigrationError::Bandwidth`]: negative (KubeVirt's `Memory size
    /// '<quantity>' must be greater than or equal to 0`) or out of range.
    pub fn bandwidth_mib(&self) -> Result<u64, MigrationError> {
        let Some(q) = &self.bandwidth else {
            return Ok(0);
        };
        if q.is_negative() {
            return Err(MigrationError::Bandwidth {
                reason: format!(
                    "Memory size '{}' must be greater than or equal to 0",
                    q.as_str()
                ),
            });
        }
        let bytes = q.to_bytes().map_err(|e| MigrationError::Bandwidth {
            reason: format!("{}: {e}", q.as_str()),
        })?;
        Ok(match bytes {
            0 => 0,
            b if b < 1 << 20 => 1,
            b => (b + (1 << 19)) >> 20,
        })
    }

    /// Parallel connections to configure (KubeVirt's
    /// `shouldConfigureParallelMigration`): none when post-copy is allowed.
    pub fn parallel_connections(&self) -> Option<u32> {
        if self.allow_post_copy {
            None
        } else {
            self.parallel_migration_threads
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The parts of the VMI's `status.migrationState` (and the two status
/// fields beside it) the launcher reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationState {
    /// The migration's UID: `sourceState.migrationUID` when given, else
    /// `migrationUID` (KubeVirt's choice in `initializeMigrationMetadata`).
    pub migration_uid: String,
    /// `targetState.virtualMachineInstanceUID`: every occurrence of the
    /// VMI's UID in the destination XML becomes this one.
    pub target_vmi_uid: Option<String>,
    /// `targetState.domainName` and `domainNamespace` (both set): the
    /// destination domain's name and namespace.
    pub target_domain: Option<(String, String)>,
    /// `targetState.domainNamespace` alone: the namespace written into
    /// disk paths that carry the VMI's.
    pub target_namespace: Option<String>,
    /// `sourceState.virtualMachineInstanceUID` (decentralized migration):
    /// the key of the target's proxy sockets.
    pub source_vmi_uid: Option<String>,
    /// `targetPod`.
    pub target_pod: Option<String>,
    /// `status.migrationMethod == "BlockMigration"`.
    pub block_migration: bool,
    /// `status.migrationTransport == "Unix"`.
    pub unix_transport: bool,
    /// `status.migratedVolumes` is not empty (volume migration).
    pub migrated_volumes: bool,
    /// `migrationState.targetCPUSet`: the target pod's CPUs, which
    /// virt-handler's target side reads from the target pod's cgroup
    /// cpuset for a VMI with dedicated CPUs (`migration-target.go`,
    /// `reportDedicatedCPUSetForMigratingVMI`); empty when not sent.
    pub target_cpuset: Vec<u32>,
    /// `migrationState.targetNodeTopology`: the target node's NUMA
    /// topology as virt-handler sends it (JSON of cmd's `Topology`);
    /// empty when not sent.
    pub target_node_topology: String,
}

/// The most CPUs `targetCPUSet` may list (virt-handler's own bound when it
/// parses the cgroup's list, `hardware.ParseCPUSetLine(..., 50000)`).
pub const MAX_TARGET_CPUS: usize = 50_000;

/// The longest `targetNodeTopology` read (1 MiB: a node's topology is a
/// few KiB per NUMA cell).
pub const MAX_TOPOLOGY_BYTES: usize = 1 << 20;

/// `targetCPUSet` as CPU numbers, bounded.
fn cpu_numbers(v: &Value) -> Result<Vec<u32>, MigrationError> {
    const FIELD: &str = "status.migrationState.targetCPUSet";
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(a) if a.len() > MAX_TARGET_CPUS => Err(MigrationError::status(
            FIELD,
            format!("{} CPUs, more than {MAX_TARGET_CPUS}", a.len()),
        )),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, c)| {
                c.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        MigrationError::status(
                            format!("{FIELD}[{i}]"),
                            format!("{} is not a CPU number", api::text::cut(&c.to_string(), 64)),
                        )
                    })
            })
            .collect(),
        other => Err(MigrationError::status(
            FIELD,
            format!("a JSON {} is not an array", json_kind(other)),
        )),
    }
}

/// The target's CPUs for the destination XML of a VMI with dedicated CPUs,
/// checked as KubeVirt's `generateDomainForTargetCPUSetAndTopology` checks
/// its inputs: `targetNodeTopology` must decode as JSON first (KubeVirt's
/// `json.Unmarshal`; a missing one gets Go's `unexpected end of JSON
/// input`); a missing or short `targetCPUSet` is then the converter's
/// `not enough exclusive threads provided` when the vCPUs are pinned on it.
///
/// # Errors
/// [`MigrationError::Status`] naming `targetNodeTopology`: the decoding
/// error, or its size.
pub fn target_cpus(state: &MigrationState) -> Result<&[u32], MigrationError> {
    const FIELD: &str = "status.migrationState.targetNodeTopology";
    let t = state.target_node_topology.as_str();
    if t.is_empty() {
        return Err(MigrationError::status(
            FIELD,
            "unexpected end of JSON input",
        ));
    }
    if t.len() > MAX_TOPOLOGY_BYTES {
        return Err(MigrationError::status(
            FIELD,
            format!("longer than {MAX_TOPOLOGY_BYTES} bytes"),
        ));
    }
    match serde_json::from_str::<Value>(t) {
        Ok(Value::Object(_)) => Ok(&state.target_cpuset),
        Ok(other) => Err(MigrationError::status(
            FIELD,
            format!("a JSON {} is not a topology object", json_kind(&other)),
        )),
        Err(e) => Err(MigrationError::status(FIELD, e.to_string())),
    }
}

/// `obj[key]` as Go's `encoding/json` finds a struct field's value: the
/// key exactly, else a key that differs from it only in ASCII case (the
/// migration state's UID is `migrationUid` in KubeVirt's VMI, what
/// virt-handler sends, while its source and target states spell it
/// `migrationUID`; KubeVirt's launcher reads either).
fn go_field<'a>(obj: &'a Value, key: &str) -> &'a Value {
    obj.get(key)
        .or_else(|| {
            obj.as_object()?
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .unwrap_or(&Value::Null)
}

impl MigrationState {
    /// Reads `vmi.status`.
    ///
    /// # Errors
    /// [`MigrationError::NoMigrationState`] when there is none (KubeVirt's
    /// `cannot migrate VMI until migrationState is ready`);
    /// [`MigrationError::Status`] for a field of the wrong JSON type or
    /// size, named.
    pub fn of(vmi: &VirtualMachineInstance) -> Result<Self, MigrationError> {
        let status = vmi.status.as_ref().unwrap_or(&Value::Null);
        let ms = &status["migrationState"];
        if !ms.is_object() {
            return Err(MigrationError::NoMigrationState);
        }
        let s = |v: &Value, path: &str| -> Result<Option<String>, MigrationError> {
            match v {
                Value::Null => Ok(None),
                Value::String(s) if s.is_empty() => Ok(None),
                Value::String(s) => Ok(Some(s.clone())),
                other => Err(MigrationError::status(
                    format!("status.{path}"),
                    format!("a JSON {} is not a string", json_kind(other)),
                )),
            }
        };
        let source = &ms["sourceState"];
        let target = &ms["targetState"];
        let migration_uid = match s(
            &source["migrationUID"],
            "migrationState.sourceState.migrationUID",
        )? {
            Some(u) => u,
            None => {
                s(go_field(ms, "migrationUid"), "migrationState.migrationUid")?.unwrap_or_default()
            }
        };
        let name = s(
            &target["domainName"],
            "migrationState.targetState.domainName",
        )?;
        let namespace = s(
            &target["domainNamespace"],
            "migrationState.targetState.domainNamespace",
        )?;
        Ok(MigrationState {
            migration_uid,
            target_vmi_uid: s(
                &target["virtualMachineInstanceUID"],
                "migrationState.targetState.virtualMachineInstanceUID",
            )?,
            target_domain: name.zip(namespace.clone()),
            target_namespace: namespace,
            source_vmi_uid: s(
                &source["virtualMachineInstanceUID"],
                "migrationState.sourceState.virtualMachineInstanceUID",
            )?,
            target_pod: s(&ms["targetPod"], "migrationState.targetPod")?,
            block_migration: status["migrationMethod"] == "BlockMigration",
            unix_transport: status["migrationTransport"] == "Unix",
            migrated_volumes: status["migratedVolumes"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
            target_cpuset: cpu_numbers(&ms["targetCPUSet"])?,
            target_node_topology: s(
                &ms["targetNodeTopology"],
                "migrationState.targetNodeTopology",
            )?
            .unwrap_or_default(),
        })
    }
}

/// `<share>/migrationproxy/<key>-source.sock` (virt-handler's
/// `SourceUnixFile`); `port` 0 is the libvirt connection's key (the UID
/// alone), else `<uid>-<port>` (`ConstructProxyKey`).
pub fn proxy_socket(share_dir: &str, uid: &str, port: u16) -> String {
    let key = if port == 0 {
        uid.to_owned()
    } else {
        format!("{uid}-{port}")
    };
    format!(
        "{}/migrationproxy/{key}-source.sock",
        share_dir.trim_end_matches('/')
    )
}

/// The destination connection URI: `qemu+unix:///system?socket=...` (root)
/// or `qemu+unix:///session?socket=...` (non-root), on the proxy socket
/// of the VMI's UID.
pub fn destination_uri(share_dir: &str, uid: &str, non_root: bool) -> String {
    let kind = if non_root { "session" } else { "system" };
    format!(
        "qemu+unix:///{kind}?socket={}",
        proxy_socket(share_dir, uid, 0)
    )
}

/// The volumes whose disks are copied (KubeVirt's
/// `classifyVolumesForMigration`): (shared, generated). Claims and data
/// volumes are shared; host disks when `shared: true`; config, cloud-init
/// and container disks are generated (copied even though read-only).
pub fn classify_volumes(vmi: &VirtualMachineInstance) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut shared = BTreeSet::new();
    let mut generated = BTreeSet::new();
    for v in &vmi.spec.volumes {
        if v.persistent_volume_claim.is_some() || v.data_volume.is_some() {
            shared.insert(v.name.clone());
        } else if let Some(h) = &v.host_disk {
            if h.shared == Some(true) {
                shared.insert(v.name.clone());
            }
        } else if v.config_map.is_some()
            || v.secret.is_some()
            || v.downward_api.is_some()
            || v.service_account.is_some()
            || v.cloud_init_no_cloud.is_some()
            || v.cloud_init_config_drive.is_some()
            || v.container_disk.is_some()
        {
            generated.insert(v.name.clone());
        }
    }
    (shared, generated)
}

/// The target devices (`vda`, ...) of the disks to copy (KubeVirt's
/// `getDiskTargetsForMigration`): no cdrom, no read-only disk unless
/// generated, only `file`/`block` disks of volumes that are not shared.
/// A disk's volume is its alias without `ua-`.
pub fn disks_to_copy(vmi: &VirtualMachineInstance, dom: &domain::Domain) -> Vec<String> {
    let (shared, generated) = classify_volumes(vmi);
    let mut out = Vec::new();
    for d in &dom.devices.disk {
        if d.device == "cdrom" {
            continue;
        }
        let name = d
            .alias
            .as_ref()
            .map(|a| a.name.strip_prefix("ua-").unwrap_or(&a.name).to_owned())
            .unwrap_or_default();
        if d.readonly.is_some() && !generated.contains(&name) {
            continue;
        }
        if (d.disk_type != "file" && d.disk_type != "block") || shared.contains(&name) {
            continue;
        }
        out.push(d.target.dev.clone());
    }
    out
}

/// The migratable XML rewritten for the target as KubeVirt's
/// `generateMigrationParams` does where it applies to this launcher: the
/// VMI's namespace in a disk's `<source file=...>` becomes
/// `target_namespace` (first occurrence, `updateFilePathsToNewDomain`),
/// then every occurrence of `uid` becomes `target_uid`. Disk sources are
/// already the launcher's paths (its domain is defined with them), so
/// KubeVirt's `convertDisks` changes nothing here.
pub fn destination_xml(xml: &str, namespace: &str, uid: &str, state: &MigrationState) -> String {
    let mut out = match &state.target_namespace {
        Some(ns) if !namespace.is_empty() => rewrite_disk_files(xml, |path| {
            if path.contains(namespace) {
                Some(path.replacen(namespace, ns, 1))
            } else {
                None
            }
        }),
        _ => xml.to_owned(),
    };
    if let Some(t) = &state.target_vmi_uid {
        if !uid.is_empty() {
            out = out.replace(uid, t);
        }
    }
    out
}

/// `xml` (libvirt's migratable XML) with its `<cputune>` element replaced
/// by `cputune` (one element, e.g. [`domain::CpuTune::to_xml`]'s), or
/// `cputune` added before `</domain>` when there was none: KubeVirt's
/// `convertCPUDedicatedFields` swaps the source's pinning for the
/// target's. libvirt writes `<cputune>` once, without attributes, and
/// nothing inside it nests another `<cputune>`, so the first start tag and
/// the first end tag after it bound the element (scan justified as for
/// [`rewrite_disk_files`]).
pub fn replace_cputune(xml: &str, cputune: &str) -> String {
    let start = xml.find("<cputune>").or_else(|| xml.find("<cputune/>"));
    if let Some(i) = start {
        let rest = &xml[i..];
        let end = if rest.starts_with("<cputune/>") {
            Some("<cputune/>".len())
        } else {
            rest.find("</cputune>").map(|e| e + "</cputune>".len())
        };
        if let Some(e) = end {
            return format!("{}{cputune}{}", &xml[..i], &rest[e..]);
        }
    }
    match xml.rfind("</domain>") {
        Some(i) => format!("{}{cputune}\n{}", &xml[..i], &xml[i..]),
        None => xml.to_owned(),
    }
}

/// `xml` with the `file` attribute of every `<source>` inside a `<disk>`
/// changed by `f` (None keeps it).
///
/// Why a scan of our own rather than a parse: the input is libvirt's own
/// migratable XML of the running domain, and everything in it but these
/// attribute values must reach the target as libvirt wrote it. Our
/// `domain` model does not carry every element libvirt writes, so a round
/// trip through it would drop some. quick-xml's streaming reader and
/// writer would serve as well (unchanged events pass through); the scan
/// is kept because it is small, replaces only quoted values inside
/// `<disk>…</disk>`, runs in one pass bounded by the input's length, and is
/// checked against libvirt's real XML by the migration e2e test.
///
/// Attribute values are matched as libvirt writes them (`file='...'`,
/// escaped); `f` sees the escaped text, which is fine for the plain names
/// it replaces.
fn rewrite_disk_files(xml: &str, f: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    let mut in_disk = false;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest.find('>').map_or(rest.len(), |e| e + 1);
        let tag = &rest[..end];
        if tag.starts_with("<disk ") || tag.starts_with("<disk>") {
            in_disk = true;
        } else if tag.starts_with("</disk") {
            in_disk = false;
        }
        if in_disk && tag.starts_with("<source ") {
            out.push_str(&rewrite_attr(tag, "file", &f));
        } else {
            out.push_str(tag);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn rewrite_attr(tag: &str, attr: &str, f: &impl Fn(&str) -> Option<String>) -> String {
    for q in ['\'', '"'] {
        let pat = format!(" {attr}={q}");
        if let Some(start) = tag.find(&pat) {
            let vstart = start + pat.len();
            if let Some(len) = tag[vstart..].find(q) {
                let value = &tag[vstart..vstart + len];
                if let Some(new) = f(value) {
                    return format!("{}{new}{}", &tag[..vstart], &tag[vstart + len..]);
                }
            }
        }
    }
    tag.to_owned()
}

/// The data a migration moves, in started GB (10^9 bytes, rounded up), for
/// the completion budget (KubeVirt's `getVMIMigrationDataSize`): guest
/// memory (`memory.guest`, else the memory request), plus the ephemeral
/// disks' bytes for block migration (`ephemeral_bytes`).
pub fn migration_data_gb(vmi: &VirtualMachineInstance, ephemeral_bytes: Option<u64>) -> i64 {
    let d = &vmi.spec.domain;
    let guest = d
        .memory
        .as_ref()
        .and_then(|m| m.guest.as_ref())
        .or_else(|| d.resources.requests.get("memory"));
    let mut bytes: u64 = guest.and_then(|q| q.to_bytes().ok()).unwrap_or(0);
    if let Some(e) = ephemeral_bytes {
        bytes = bytes.saturating_add(e);
    }
    i64::try_from(bytes.div_ceil(1_000_000_000)).unwrap_or(i64::MAX)
}

/// The `<interface>` elements of a domain XML whose alias is `ua-<name>`
/// for a name in `names`: (name, element text as libvirt wrote it).
pub fn interfaces_by_alias<'x>(
    xml: &'x str,
    names: &std::collections::BTreeSet<String>,
) -> Vec<(String, &'x str)> {
    let mut out = Vec::new();
    let mut rest = xml;
    let mut offset = 0;
    while let Some(i) = rest.find("<interface ") {
        let start = offset + i;
        let Some(len) = xml[start..].find("</interface>") else {
            break;
        };
        let end = start + len + "</interface>".len();
        let el = &xml[start..end];
        for q in ['\'', '"'] {
            let pat = format!("<alias name={q}ua-");
            if let Some(a) = el.find(&pat) {
                let v = &el[a + pat.len()..];
                if let Some(e) = v.find(q) {
                    if names.contains(&v[..e]) {
                        out.push((v[..e].to_owned(), el));
                    }
                }
            }
        }
        offset = end;
        rest = &xml[end..];
    }
    out
}

/// `iface` (an `<interface>` element) with its link down: an existing
/// `<link .../>` replaced, else one added before `</interface>`.
pub fn link_down(iface: &str) -> String {
    if let Some(i) = iface.find("<link ") {
        if let Some(e) = iface[i..].find("/>") {
            return format!("{}<link state='down'/>{}", &iface[..i], &iface[i + e + 2..]);
        }
    }
    let at = iface.rfind("</interface>").unwrap_or(iface.len());
    format!("{}<link state='down'/>\n{}", &iface[..at], &iface[at..])
}

/// What the monitor does at one look at a running migration (KubeVirt's
/// `processInflightMigration`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing: it progresses, or it is in post-copy (whose abort would
    /// lose the guest).
    Wait,
    /// Past the completion budget with workload disruption allowed and
    /// post-copy allowed: switch to post-copy.
    StartPostCopy,
    /// Likewise without post-copy: pause the guest (the budget doubles).
    Pause,
    /// No progress for longer than the progress timeout: abort, `Live
    /// migration stuck for <seconds> seconds and has been aborted`.
    AbortStuck(u64),
    /// Past the completion budget (no disruption allowed, or already
    /// paused): abort, `Live migration is not completed after <budget>
    /// seconds and has been aborted`.
    AbortTimeout(i64),
}

/// The monitor's record of a migration's progress (KubeVirt's
/// `migrationMonitor`): progress is the data remaining going down.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// When the monitor started.
    pub start: std::time::Instant,
    /// When the remaining data last went down.
    pub last_progress: std::time::Instant,
    /// The remaining data at the previous look (0: none yet).
    pub watermark: u64,
    /// The remaining data now (libvirt's `dataRemaining`, bytes).
    pub remaining: u64,
    /// Seconds the migration may take (0: unbounded).
    pub acceptable: i64,
}

impl Progress {
    /// A record started at `start` with a budget of `acceptable` seconds.
    pub fn new(start: std::time::Instant, acceptable: i64) -> Self {
        Progress {
            start,
            last_progress: start,
            watermark: 0,
            remaining: 0,
            acceptable,
        }
    }

    /// The step at `now` for a migration in `mode` (`PreCopy`,
    /// `PostCopy`, `Paused`), the data remaining already recorded in
    /// [`Progress::remaining`]; a [`Step::Pause`] doubles the budget.
    pub fn step(&mut self, now: std::time::Instant, mode: &str, o: &MigrationOptions) -> Step {
        if self.watermark == 0 || self.remaining < self.watermark {
            self.last_progress = now;
        }
        self.watermark = self.remaining;
        let secs = |d: std::time::Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        let past_budget =
            self.acceptable != 0 && secs(now.duration_since(self.start)) > self.acceptable;
        if mode == "PostCopy" {
            return Step::Wait;
        }
        if past_budget && o.allow_workload_disruption && mode != "Paused" {
            if o.allow_post_copy {
                return Step::StartPostCopy;
            }
            self.acceptable = self.acceptable.saturating_mul(2);
            return Step::Pause;
        }
        let stalled = now.duration_since(self.last_progress);
        if o.progress_timeout != 0 && secs(stalled) > o.progress_timeout {
            return Step::AbortStuck(stalled.as_secs());
        }
        if past_budget {
            return Step::AbortTimeout(self.acceptable);
        }
        Step::Wait
    }
}

#[cfg(test)]
mod tests;
