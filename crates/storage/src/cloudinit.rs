//! cloud-init data disks: NoCloud (`cidata`) and OpenStack config drive
//! (`config-2`), as KubeVirt v1.6.6 builds them (`pkg/cloud-init`, facts
//! 5.3).
//!
//! The data comes from the first `cloudInitNoCloud` or
//! `cloudInitConfigDrive` volume: a secret reference (the files `userdata`
//! or `userData`, `networkdata` or `networkData` of the secret mounted for
//! that volume) replaces the inline value; inline text wins over base64
//! (standard alphabet, padded, line breaks ignored, as Go's
//! `base64.StdEncoding`). At least one of user and network data must be
//! non-empty. Inline and base64 data are limited to
//! [`MAX_INLINE_DATA`] bytes each, KubeVirt's admission limit (larger data
//! belongs in a secret).
//!
//! Layout written to `<ephemeral>/cloud-init-data/<ns>/<name>/data/` and
//! turned into `noCloud.iso` / `configdrive.iso` next to it, after which the
//! data files are removed:
//!
//! | source | files | label |
//! |---|---|---|
//! | NoCloud | `meta-data` (JSON `{"instance-type"?, "instance-id", "local-hostname"?, "public-keys"?}`), `user-data`, `network-config` (only with network data) | `cidata` |
//! | config drive | `openstack/latest/meta_data.json` (JSON `{"instance_type"?, "instance_id": "<name>.<ns>", "hostname"?, "uuid"?, "public_keys"?}`), `openstack/latest/user_data`, `openstack/latest/network_data.json` (only with network data) | `config-2` |
//!
//! KubeVirt writes the ISO after defining the domain, because a config
//! drive lists the PCI addresses of tagged NICs and host devices; this
//! launcher has neither yet (both are refused by name), so the ISO is built
//! with the other volumes before the domain is defined, and its `devices`
//! list is always absent. SSH keys of access credentials propagated by
//! `noCloud` / `configDrive` go into `public-keys` / `public_keys`
//! ([`public_keys`]).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use api::vmi::{CloudInitSource, Volume};
use api::VirtualMachineInstance;
use base64::Engine;
use converter::ConvertContext;
use serde::{Deserialize, Serialize};

use crate::staging::Staging;
use crate::{ensure_parent_under, io_err, volume_err, ConfigSources, StorageError};

/// KubeVirt's admission limit for inline or base64 user data and network
/// data, in (decoded) bytes: `cloudInitUserMaxLen` and
/// `cloudInitNetworkMaxLen` (2 KiB; larger data belongs in a secret).
pub const MAX_INLINE_DATA: usize = 2048;

/// Largest secret file read (user or network data). Kubernetes caps a
/// Secret at 1 MiB; a standalone directory is bounded here instead.
pub const MAX_SECRET_DATA: u64 = 64 << 20;

/// Volume id of a NoCloud ISO.
pub const NOCLOUD_LABEL: &str = "cidata";
/// Volume id of a config drive ISO.
pub const CONFIG_DRIVE_LABEL: &str = "config-2";

/// Which cloud-init data source a volume is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataSource {
    /// `cloudInitNoCloud`.
    NoCloud,
    /// `cloudInitConfigDrive`.
    ConfigDrive,
}

impl DataSource {
    /// The VMI field name.
    pub fn field(self) -> &'static str {
        match self {
            DataSource::NoCloud => "cloudInitNoCloud",
            DataSource::ConfigDrive => "cloudInitConfigDrive",
        }
    }
}

/// The resolved data of the VMI's cloud-init volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudInitData {
    /// NoCloud or config drive.
    pub source: DataSource,
    /// The volume's name.
    pub volume: String,
    /// User data, bytes as given (no re-encoding, no line-ending changes).
    pub user_data: Vec<u8>,
    /// Network data; empty = none (no network file is written).
    pub network_data: Vec<u8>,
    /// The meta-data document (JSON), exactly as written.
    pub meta_data: Vec<u8>,
    /// The SSH public keys in the meta-data (see [`public_keys`]).
    pub public_keys: BTreeMap<String, String>,
}

impl CloudInitData {
    /// Re-renders the meta-data with the config drive's `devices` list
    /// (a no-op for NoCloud or an empty list), keeping the other fields of
    /// the meta-data as they are (a hook sidecar's PreCloudInitIso may have
    /// changed them; KubeVirt sets only `devices` at this point).
    pub fn set_devices(&mut self, vmi: &VirtualMachineInstance, devices: &[DeviceData]) {
        if self.source != DataSource::ConfigDrive || devices.is_empty() {
            return;
        }
        self.meta_data = match serde_json::from_slice::<ConfigDriveMetaIn>(&self.meta_data) {
            Ok(m) => {
                let json = serde_json::to_string(&ConfigDriveMetaOut {
                    instance_type: &m.instance_type,
                    instance_id: &m.instance_id,
                    local_hostname: &m.local_hostname,
                    hostname: &m.hostname,
                    uuid: &m.uuid,
                    devices,
                    public_keys: &m.public_keys,
                })
                .unwrap_or_default();
                go_html_escape(&json).into_bytes()
            }
            Err(_) => meta_data_with_devices(vmi, self.source, &self.public_keys, devices),
        };
    }
}

/// The first cloud-init volume of `vmi`: (index, volume, source kind, source).
pub fn find(
    vmi: &VirtualMachineInstance,
) -> Option<(usize, &Volume, DataSource, &CloudInitSource)> {
    vmi.spec.volumes.iter().enumerate().find_map(|(i, v)| {
        if let Some(s) = &v.cloud_init_no_cloud {
            Some((i, v, DataSource::NoCloud, s))
        } else {
            v.cloud_init_config_drive
                .as_ref()
                .map(|s| (i, v, DataSource::ConfigDrive, s))
        }
    })
}

/// Decodes base64 the way Go's `base64.StdEncoding.DecodeString` does:
/// standard alphabet, `=` padding required, `\r` and `\n` ignored,
/// non-zero trailing bits accepted.
///
/// # Errors
/// The decoder's message (invalid byte, bad padding, bad length).
pub fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    const ENGINE: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireCanonical),
    );
    let cleaned: Vec<u8> = s.bytes().filter(|b| *b != b'\r' && *b != b'\n').collect();
    ENGINE.decode(cleaned).map_err(|e| e.to_string())
}

/// Inline (text or base64) data of one kind: text wins when non-empty.
fn inline(
    field: &str,
    what: &str,
    text: Option<&str>,
    b64: Option<&str>,
) -> Result<Vec<u8>, StorageError> {
    let (data, from) = match (
        text.filter(|t| !t.is_empty()),
        b64.filter(|t| !t.is_empty()),
    ) {
        (Some(t), _) => (t.as_bytes().to_vec(), format!("{field}.{what}")),
        (None, Some(b)) => {
            let f = format!("{field}.{what}Base64");
            let d = decode_base64(b)
                .map_err(|e| volume_err(&f, format!("is not valid base64: {e}")))?;
            (d, f)
        }
        (None, None) => return Ok(Vec::new()),
    };
    if data.len() > MAX_INLINE_DATA {
        return Err(volume_err(
            &from,
            format!(
                "{} bytes exceed KubeVirt's {MAX_INLINE_DATA}-byte limit for inline {what}; use {what}SecretRef for larger data",
                data.len()
            ),
        ));
    }
    Ok(data)
}

/// Checks the inline data of the cloud-init volume without touching the
/// host (base64, sizes, that some data is given when no secret is
/// referenced), so bad input is refused before anything starts.
///
/// # Errors
/// [`StorageError::Volume`] naming the field.
pub fn check_inline(vmi: &VirtualMachineInstance) -> Result<(), StorageError> {
    let Some((i, _, kind, src)) = find(vmi) else {
        return Ok(());
    };
    let field = format!("spec.volumes[{i}].{}", kind.field());
    let user = inline(
        &field,
        "userData",
        src.user_data.as_deref(),
        src.user_data_base64.as_deref(),
    )?;
    let net = inline(
        &field,
        "networkData",
        src.network_data.as_deref(),
        src.network_data_base64.as_deref(),
    )?;
    let secret = src.user_data_secret_ref.is_some() || src.network_data_secret_ref.is_some();
    if user.is_empty() && net.is_empty() && !secret {
        return Err(required(&field));
    }
    Ok(())
}

fn required(field: &str) -> StorageError {
    volume_err(
        field,
        "userDataBase64, userData, networkDataBase64 or networkData is required for a cloud-init data source",
    )
}

/// Reads the first of `names` present in the secret directory `dir`
/// (symbolic links followed only within `dir`, as Kubernetes lays
/// secrets out: `userdata -> ..data/userdata`).
fn read_secret_file(
    field: &str,
    dir: &Path,
    names: &[&str],
) -> Result<Option<Vec<u8>>, StorageError> {
    let root = fs::canonicalize(dir).map_err(io_err(field, "open secret directory", dir))?;
    for name in names {
        let p = root.join(name);
        if fs::symlink_metadata(&p).is_err() {
            continue;
        }
        let real = crate::configdisk::resolve_inside(field, &root, &p)?;
        let meta = fs::metadata(&real).map_err(io_err(field, "stat", &real))?;
        if !meta.is_file() {
            return Err(volume_err(
                field,
                format!("{} is not a regular file", p.display()),
            ));
        }
        if meta.len() > MAX_SECRET_DATA {
            return Err(volume_err(
                field,
                format!(
                    "{} has {} bytes, more than the {MAX_SECRET_DATA} accepted",
                    p.display(),
                    meta.len()
                ),
            ));
        }
        return crate::files::read_bounded(field, &real, MAX_SECRET_DATA).map(Some);
    }
    Ok(None)
}

/// Resolves the VMI's cloud-init data (module docs), reading referenced
/// secrets from `sources`.
///
/// # Errors
/// [`StorageError`] naming the field: bad base64, oversize inline data, no
/// data at all, a missing or unreadable secret, a secret in standalone mode
/// without a `--config-volume` directory.
pub fn read(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    sources: &ConfigSources,
) -> Result<Option<CloudInitData>, StorageError> {
    let Some((i, v, kind, src)) = find(vmi) else {
        return Ok(None);
    };
    let field = format!("spec.volumes[{i}].{}", kind.field());
    let mut user = inline(
        &field,
        "userData",
        src.user_data.as_deref(),
        src.user_data_base64.as_deref(),
    )?;
    let mut net = inline(
        &field,
        "networkData",
        src.network_data.as_deref(),
        src.network_data_base64.as_deref(),
    )?;
    if src.user_data_secret_ref.is_some() || src.network_data_secret_ref.is_some() {
        let ref_field = if src.user_data_secret_ref.is_some() {
            format!("{field}.userDataSecretRef")
        } else {
            format!("{field}.networkDataSecretRef")
        };
        let dir = match sources {
            ConfigSources::Pod => PathBuf::from(ctx.paths.secret_dir(&v.name)),
            ConfigSources::Standalone { volumes, .. } => volumes.get(&v.name).cloned().ok_or_else(|| {
                volume_err(
                    &ref_field,
                    format!(
                        "standalone mode has no mounted secrets: pass --config-volume {}=DIR, a directory with the file userdata (or networkdata)",
                        v.name
                    ),
                )
            })?,
        };
        let mut found = false;
        if src.user_data_secret_ref.is_some() {
            if let Some(d) = read_secret_file(&ref_field, &dir, &["userdata", "userData"])? {
                found = true;
                if !d.is_empty() {
                    user = d;
                }
            }
        }
        if src.network_data_secret_ref.is_some() {
            let f = format!("{field}.networkDataSecretRef");
            if let Some(d) = read_secret_file(&f, &dir, &["networkdata", "networkData"])? {
                found = true;
                if !d.is_empty() {
                    net = d;
                }
            }
        }
        if !found {
            return Err(volume_err(
                &ref_field,
                format!(
                    "no cloud-init data-source found at volume: {} (no userdata, userData, networkdata or networkData file in {})",
                    v.name,
                    dir.display()
                ),
            ));
        }
    }
    if user.is_empty() && net.is_empty() {
        return Err(required(&field));
    }
    let keys = public_keys(vmi, kind, ctx, sources)?;
    let meta_data = meta_data(vmi, kind, &keys);
    Ok(Some(CloudInitData {
        source: kind,
        volume: v.name.clone(),
        user_data: user,
        network_data: net,
        meta_data,
        public_keys: keys,
    }))
}

/// [`read`], then the hook sidecars' PreCloudInitIso when `opts` has one
/// (KubeVirt runs it right after reading the data, before the ISO).
///
/// # Errors
/// [`read`]'s; the hook's as [`StorageError::Hook`] naming the volume.
pub fn read_hooked(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    opts: &crate::PrepareOptions,
) -> Result<Option<CloudInitData>, StorageError> {
    let Some(data) = read(vmi, ctx, &opts.config_sources)? else {
        return Ok(None);
    };
    let Some(hook) = &opts.cloud_init_hook else {
        return Ok(Some(data));
    };
    let field = format!(
        "spec.volumes[{}].{}",
        vmi.spec
            .volumes
            .iter()
            .position(|v| v.name == data.volume)
            .unwrap_or(0),
        data.source.field()
    );
    (hook.0)(vmi, data)
        .map(Some)
        .map_err(|e| StorageError::Hook {
            path: field,
            message: e.to_string(),
        })
}

#[derive(Serialize)]
struct NoCloudMeta<'a> {
    #[serde(rename = "instance-type", skip_serializing_if = "str::is_empty")]
    instance_type: &'a str,
    #[serde(rename = "instance-id")]
    instance_id: &'a str,
    #[serde(rename = "local-hostname", skip_serializing_if = "str::is_empty")]
    local_hostname: &'a str,
    #[serde(rename = "public-keys", skip_serializing_if = "BTreeMap::is_empty")]
    public_keys: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
struct ConfigDriveMeta<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    instance_type: &'a str,
    instance_id: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    hostname: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uuid: &'a str,
    #[serde(skip_serializing_if = "<[DeviceData]>::is_empty")]
    devices: &'a [DeviceData],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    public_keys: &'a BTreeMap<String, String>,
}

/// A config drive's meta-data as written (ours, or a hook's).
#[derive(Deserialize)]
struct ConfigDriveMetaIn {
    #[serde(default)]
    instance_type: String,
    #[serde(default)]
    instance_id: String,
    #[serde(default)]
    local_hostname: String,
    #[serde(default)]
    hostname: String,
    #[serde(default)]
    uuid: String,
    #[serde(default)]
    public_keys: BTreeMap<String, String>,
}

/// KubeVirt's `ConfigDriveMetadata` in its field order.
#[derive(Serialize)]
struct ConfigDriveMetaOut<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    instance_type: &'a str,
    instance_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    local_hostname: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    hostname: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uuid: &'a str,
    #[serde(skip_serializing_if = "<[DeviceData]>::is_empty")]
    devices: &'a [DeviceData],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    public_keys: &'a BTreeMap<String, String>,
}

/// One entry of the config drive's `devices` list: a tagged device and the
/// address the hypervisor gave it, as KubeVirt's `cloudinit.DeviceData`
/// (fields in its order; `mac` omitted when empty, `tags` always written).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceData {
    /// `nic` (KubeVirt also writes `hostdev` for GPUs and host devices).
    #[serde(rename = "type")]
    pub device_type: String,
    /// The address type, `pci`.
    pub bus: String,
    /// PCI address `DDDD:BB:SS.F` (e.g. `0000:01:00.0`).
    pub address: String,
    /// The interface's MAC address.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// The device's `tag`.
    pub tags: Vec<String>,
}

/// The `devices` entries for the VMI's tagged interfaces, from the domain
/// libvirt defined (which has the PCI addresses): each `<interface>` whose
/// alias is `ua-<name>` of a VMI interface with a `tag`, in domain order
/// (KubeVirt's `buildDevicesMetadata`), then each SR-IOV `<hostdev>`
/// (`ua-sriov-<name>`) of a tagged interface, as a `nic` without MAC.
/// Devices without a PCI address are skipped.
pub fn tagged_devices(vmi: &VirtualMachineInstance, dom: &domain::Domain) -> Vec<DeviceData> {
    let tags: BTreeMap<&str, &str> = vmi
        .spec
        .domain
        .devices
        .interfaces
        .iter()
        .filter_map(|i| {
            i.tag
                .as_deref()
                .filter(|t| !t.is_empty())
                .map(|t| (i.name.as_str(), t))
        })
        .collect();
    if tags.is_empty() {
        return Vec::new();
    }
    let nic = |name: Option<&str>, addr: Option<&domain::Address>, mac: String| {
        let (Some(tag), Some(addr)) = (tags.get(name?), addr) else {
            return None;
        };
        if addr.address_type != "pci" {
            return None;
        }
        let hex = |s: &Option<String>| {
            s.as_deref()
                .map(|v| v.strip_prefix("0x").unwrap_or(v).to_owned())
                .unwrap_or_default()
        };
        Some(DeviceData {
            device_type: "nic".into(),
            bus: addr.address_type.clone(),
            address: format!(
                "{}:{}:{}.{}",
                hex(&addr.domain),
                hex(&addr.bus),
                hex(&addr.slot),
                hex(&addr.function)
            ),
            mac,
            tags: vec![(*tag).to_owned()],
        })
    };
    let interfaces = dom.devices.interface.iter().filter_map(|n| {
        nic(
            n.alias.as_ref().and_then(|a| a.name.strip_prefix("ua-")),
            n.address.as_ref(),
            n.mac
                .as_ref()
                .map(|m| m.address.clone())
                .unwrap_or_default(),
        )
    });
    // SR-IOV interfaces are host devices (`ua-sriov-<name>`): KubeVirt
    // lists them as `nic` too, with the guest address and no MAC.
    let sriov = dom.devices.hostdev.iter().filter_map(|d| {
        nic(
            d.alias.as_ref().and_then(|a| {
                a.name
                    .strip_prefix("ua-")
                    .and_then(|n| n.strip_prefix(converter::sriov::ALIAS_PREFIX))
            }),
            d.address.as_ref(),
            String::new(),
        )
    });
    interfaces.chain(sriov).collect()
}

/// The SSH public keys of the access credentials propagated to `kind`
/// (KubeVirt `resolveSSHPublicKeys`): for each credential in spec order,
/// every file of its secret directory (`<private>/secret/<secretName>-access-cred/`
/// in a pod) in name order, skipping subdirectories, Kubernetes' `..`
/// entries and empty files; keyed `"0"`, `"1"`, ... (a JSON object, so
/// Go writes the keys sorted as strings, as a `BTreeMap` does).
///
/// # Errors
/// [`StorageError`] naming the credential: an unreadable directory, a
/// link leading outside it, no directory given in standalone mode.
pub fn public_keys(
    vmi: &VirtualMachineInstance,
    kind: DataSource,
    ctx: &ConvertContext,
    sources: &ConfigSources,
) -> Result<BTreeMap<String, String>, StorageError> {
    let mut keys = BTreeMap::new();
    for (i, c) in vmi.spec.access_credentials.iter().enumerate() {
        let Some(k) = &c.ssh_public_key else { continue };
        let wanted = match kind {
            DataSource::NoCloud => k.propagation_method.no_cloud.is_some(),
            DataSource::ConfigDrive => k.propagation_method.config_drive.is_some(),
        };
        let name = k
            .source
            .secret
            .as_ref()
            .map_or("", |s| s.secret_name.as_str());
        if !wanted || name.is_empty() {
            continue;
        }
        let field = format!("spec.accessCredentials[{i}].sshPublicKey.source.secret");
        let dir = match sources {
            ConfigSources::Pod => {
                PathBuf::from(ctx.paths.secret_dir(&format!("{name}-access-cred")))
            }
            ConfigSources::Standalone { secrets, .. } => {
                secrets.get(name).cloned().ok_or_else(|| {
                    volume_err(
                        &field,
                        format!(
                            "standalone mode has no mounted secrets: pass --access-credential {name}=DIR, a directory whose files are public keys"
                        ),
                    )
                })?
            }
        };
        let root = fs::canonicalize(&dir).map_err(io_err(&field, "open secret directory", &dir))?;
        let mut entries: Vec<_> = fs::read_dir(&root)
            .map_err(io_err(&field, "read directory", &root))?
            .collect::<Result<_, _>>()
            .map_err(io_err(&field, "read directory", &root))?;
        entries.sort_by_key(fs::DirEntry::file_name);
        for e in entries {
            let file_name = e.file_name();
            let ft = e.file_type().map_err(io_err(&field, "stat", &e.path()))?;
            if ft.is_dir() || file_name.as_encoded_bytes().starts_with(b"..") {
                continue;
            }
            let real = crate::configdisk::resolve_inside(&field, &root, &e.path())?;
            let meta = fs::metadata(&real).map_err(io_err(&field, "stat", &real))?;
            if !meta.is_file() || meta.len() > MAX_SECRET_DATA {
                return Err(volume_err(
                    &field,
                    format!("{} is not a public key file", e.path().display()),
                ));
            }
            let data = crate::files::read_bounded(&field, &real, MAX_SECRET_DATA)?;
            if data.is_empty() {
                continue;
            }
            keys.insert(
                keys.len().to_string(),
                String::from_utf8_lossy(&data).into_owned(),
            );
        }
    }
    Ok(keys)
}

/// The meta-data document, byte for byte as Go's `json.Marshal` writes
/// KubeVirt's structs: fields in declaration order, empty optional fields
/// omitted, `<`, `>`, `&`, U+2028 and U+2029 escaped as `\uXXXX`.
/// instance-id / uuid is `spec.domain.firmware.uuid` (always set after
/// defaulting); the instance type comes from the annotation
/// `kubevirt.io/cluster-instancetype-name`, else `kubevirt.io/instancetype-name`.
pub fn meta_data(
    vmi: &VirtualMachineInstance,
    kind: DataSource,
    public_keys: &BTreeMap<String, String>,
) -> Vec<u8> {
    meta_data_with_devices(vmi, kind, public_keys, &[])
}

/// [`meta_data`] with the config drive's `devices` list (ignored for
/// NoCloud, whose meta-data has none; omitted when empty, as KubeVirt
/// sets it only when some device is tagged).
pub fn meta_data_with_devices(
    vmi: &VirtualMachineInstance,
    kind: DataSource,
    public_keys: &BTreeMap<String, String>,
    devices: &[DeviceData],
) -> Vec<u8> {
    let ann = &vmi.metadata.annotations;
    let instance_type = ann
        .get("kubevirt.io/cluster-instancetype-name")
        .filter(|s| !s.is_empty())
        .or_else(|| ann.get("kubevirt.io/instancetype-name"))
        .map_or("", String::as_str);
    let uuid = vmi
        .spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.uuid.as_deref())
        .unwrap_or("");
    let host = vmi.hostname();
    let json = match kind {
        DataSource::NoCloud => serde_json::to_string(&NoCloudMeta {
            instance_type,
            instance_id: uuid,
            local_hostname: &host,
            public_keys,
        }),
        DataSource::ConfigDrive => serde_json::to_string(&ConfigDriveMeta {
            instance_type,
            instance_id: format!("{}.{}", vmi.metadata.name, vmi.namespace()),
            hostname: &host,
            uuid,
            devices,
            public_keys,
        }),
    }
    .unwrap_or_default();
    go_html_escape(&json).into_bytes()
}

/// Go's `json.Marshal` HTML-safe escaping; these characters can only occur
/// inside strings of serde_json's output, so a textual replacement is exact.
pub fn go_html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Writes `rel` (relative, plain components) under `dir` with mode 0600,
/// never through an existing file or link.
fn write_new(field: &str, dir: &Path, rel: &str, data: &[u8]) -> Result<(), StorageError> {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).map_err(io_err(field, "mkdir", parent))?;
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&p)
        .map_err(io_err(field, "create", &p))?;
    f.write_all(data).map_err(io_err(field, "write", &p))
}

/// Writes the data files and builds the ISO at
/// [`api::layout::Paths::cloud_init_iso`], both in a private directory
/// ([`crate::staging`]) from which the ISO is renamed into place; the data
/// files are removed with it, whatever happened.
///
/// # Errors
/// [`StorageError`] naming the volume; no half-written ISO is left behind.
pub fn generate(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    data: &CloudInitData,
    owner: Option<(u32, u32)>,
) -> Result<PathBuf, StorageError> {
    let field = format!(
        "spec.volumes[{}].{}",
        vmi.spec
            .volumes
            .iter()
            .position(|v| v.name == data.volume)
            .unwrap_or(0),
        data.source.field()
    );
    let config_drive = data.source == DataSource::ConfigDrive;
    let iso = PathBuf::from(ctx.paths.cloud_init_iso(vmi, config_drive));
    ensure_parent_under(&field, &ctx.paths.ephemeral_disk_dir, &iso)?;
    let staging = Staging::new(&field, Path::new(&ctx.paths.ephemeral_disk_dir), &iso)?;
    let data_dir = staging.dir().join("data");
    fs::create_dir(&data_dir).map_err(io_err(&field, "mkdir", &data_dir))?;
    {
        let (meta, user, net, label) = if config_drive {
            (
                "openstack/latest/meta_data.json",
                "openstack/latest/user_data",
                "openstack/latest/network_data.json",
                CONFIG_DRIVE_LABEL,
            )
        } else {
            ("meta-data", "user-data", "network-config", NOCLOUD_LABEL)
        };
        write_new(&field, &data_dir, user, &data.user_data)?;
        write_new(&field, &data_dir, meta, &data.meta_data)?;
        if !data.network_data.is_empty() {
            write_new(&field, &data_dir, net, &data.network_data)?;
        }
        crate::iso::create(staging.dir(), Path::new("data"), label, staging.name())
            .map_err(|e| volume_err(&field, e.to_string()))?;
    }
    staging.finish(0o640, owner)?;
    Ok(iso)
}
