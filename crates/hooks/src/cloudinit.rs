//! PreCloudInitIso's payloads in KubeVirt's JSON shapes
//! (`pkg/cloud-init`, `pkg/hooks/manager.go`):
//!
//! - `cloudInitData`: Go's `json.Marshal` of `cloudinit.CloudInitData`, a
//!   struct without JSON tags: `{"DataSource":"noCloud"|"configDrive",
//!   "NoCloudMetaData":{..}|null, "ConfigDriveMetaData":{..}|null,
//!   "UserData":"..", "NetworkData":"..", "DevicesData":null,
//!   "VolumeName":".."}`, the meta-data objects with their JSON tags;
//! - `cloudInitNoCloudSource`: a `v1.CloudInitNoCloudSource` with
//!   `userData` and `networkData` (omitted when empty).
//!
//! The answer is read as KubeVirt reads it: when its `cloudInitData` has
//! user data and meta-data it replaces the data; otherwise the answer's
//! `cloudInitNoCloudSource` gives user and network data, and the meta-data
//! is KubeVirt's minimal one (instance id, instance type; no hostname, no
//! keys). Keys match case-insensitively, unknown keys are ignored, wrong
//! JSON types are refused, as Go's `encoding/json` does.

use serde::Serialize;
use serde_json::{Map, Value};
use storage::cloudinit::{go_html_escape, CloudInitData, DataSource};

fn source_name(s: DataSource) -> &'static str {
    match s {
        DataSource::NoCloud => "noCloud",
        DataSource::ConfigDrive => "configDrive",
    }
}

fn json_str(bytes: &[u8]) -> String {
    // Go marshals a string's invalid UTF-8 as U+FFFD, as lossy decoding does.
    serde_json::to_string(&String::from_utf8_lossy(bytes)).unwrap_or_else(|_| "\"\"".into())
}

/// `data` as KubeVirt's (`cloudInitData`, `cloudInitNoCloudSource`) JSON.
pub fn to_json(data: &CloudInitData) -> (Vec<u8>, Vec<u8>) {
    let meta = if serde_json::from_slice::<Value>(&data.meta_data).is_ok() {
        String::from_utf8_lossy(&data.meta_data).into_owned()
    } else {
        "null".to_owned()
    };
    let (nocloud_meta, drive_meta) = match data.source {
        DataSource::NoCloud => (meta.as_str(), "null"),
        DataSource::ConfigDrive => ("null", meta.as_str()),
    };
    let init = format!(
        "{{\"DataSource\":\"{}\",\"NoCloudMetaData\":{nocloud_meta},\"ConfigDriveMetaData\":{drive_meta},\"UserData\":{},\"NetworkData\":{},\"DevicesData\":null,\"VolumeName\":{}}}",
        source_name(data.source),
        json_str(&data.user_data),
        json_str(&data.network_data),
        json_str(data.volume.as_bytes()),
    );
    // CloudInitNoCloudSource's fields in Go's order, empty ones omitted.
    let mut fields = Vec::new();
    if !data.user_data.is_empty() {
        fields.push(format!("\"userData\":{}", json_str(&data.user_data)));
    }
    if !data.network_data.is_empty() {
        fields.push(format!("\"networkData\":{}", json_str(&data.network_data)));
    }
    let nocloud = format!("{{{}}}", fields.join(","));
    (
        go_html_escape(&init).into_bytes(),
        go_html_escape(&nocloud).into_bytes(),
    )
}

/// The value of `key` in `obj`, matched as Go does: exactly, else
/// case-insensitively.
fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

fn string_field(obj: &Map<String, Value>, key: &str, what: &str) -> Result<String, String> {
    match get(obj, key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(format!("{what}.{key}: a string is expected, not {v}")),
    }
}

fn object<'a>(v: &'a Value, what: &str) -> Result<Option<&'a Map<String, Value>>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Object(m) => Ok(Some(m)),
        v => Err(format!("{what}: an object is expected, not {}", kind_of(v))),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn keys(obj: &Map<String, Value>, key: &str, what: &str) -> Result<Vec<(String, String)>, String> {
    match get(obj, key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                v => Err(format!(
                    "{what}.{key}.{k}: a string is expected, not {}",
                    kind_of(v)
                )),
            })
            .collect(),
        Some(v) => Err(format!(
            "{what}.{key}: an object is expected, not {}",
            kind_of(v)
        )),
    }
}

/// A Go map marshals with its keys sorted.
fn sorted_map(v: Vec<(String, String)>) -> std::collections::BTreeMap<String, String> {
    v.into_iter().collect()
}

#[derive(Serialize)]
struct NoCloudMeta {
    #[serde(rename = "instance-type", skip_serializing_if = "String::is_empty")]
    instance_type: String,
    #[serde(rename = "instance-id")]
    instance_id: String,
    #[serde(rename = "local-hostname", skip_serializing_if = "String::is_empty")]
    local_hostname: String,
    #[serde(
        rename = "public-keys",
        skip_serializing_if = "std::collections::BTreeMap::is_empty"
    )]
    public_keys: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize)]
struct ConfigDriveMeta {
    #[serde(skip_serializing_if = "String::is_empty")]
    instance_type: String,
    instance_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    local_hostname: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    hostname: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    uuid: String,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    public_keys: std::collections::BTreeMap<String, String>,
}

/// The meta-data document of `kind` from a returned meta-data object, in
/// Go's field order; the public keys as a map too.
fn render_meta(
    kind: DataSource,
    m: &Map<String, Value>,
) -> Result<(Vec<u8>, std::collections::BTreeMap<String, String>), String> {
    let json = match kind {
        DataSource::NoCloud => {
            let w = "NoCloudMetaData";
            let meta = NoCloudMeta {
                instance_type: string_field(m, "instance-type", w)?,
                instance_id: string_field(m, "instance-id", w)?,
                local_hostname: string_field(m, "local-hostname", w)?,
                public_keys: sorted_map(keys(m, "public-keys", w)?),
            };
            let keys = meta.public_keys.clone();
            (serde_json::to_string(&meta), keys)
        }
        DataSource::ConfigDrive => {
            let w = "ConfigDriveMetaData";
            let meta = ConfigDriveMeta {
                instance_type: string_field(m, "instance_type", w)?,
                instance_id: string_field(m, "instance_id", w)?,
                local_hostname: string_field(m, "local_hostname", w)?,
                hostname: string_field(m, "hostname", w)?,
                uuid: string_field(m, "uuid", w)?,
                public_keys: sorted_map(keys(m, "public_keys", w)?),
            };
            let keys = meta.public_keys.clone();
            (serde_json::to_string(&meta), keys)
        }
    };
    let (s, keys) = json;
    let s = s.map_err(|e| e.to_string())?;
    Ok((go_html_escape(&s).into_bytes(), keys))
}

/// KubeVirt's minimal meta-data (`GenerateLocalData` with none): instance
/// id (and, for a config drive, the UUID) and the instance type.
fn minimal_meta(vmi: &api::VirtualMachineInstance, kind: DataSource) -> Vec<u8> {
    let ann = &vmi.metadata.annotations;
    let instance_type = ann
        .get("kubevirt.io/cluster-instancetype-name")
        .filter(|s| !s.is_empty())
        .or_else(|| ann.get("kubevirt.io/instancetype-name"))
        .cloned()
        .unwrap_or_default();
    let uuid = vmi
        .spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.uuid.clone())
        .unwrap_or_default();
    let s = match kind {
        DataSource::NoCloud => serde_json::to_string(&NoCloudMeta {
            instance_type,
            instance_id: uuid,
            local_hostname: String::new(),
            public_keys: std::collections::BTreeMap::new(),
        }),
        DataSource::ConfigDrive => serde_json::to_string(&ConfigDriveMeta {
            instance_type,
            instance_id: format!("{}.{}", vmi.metadata.name, vmi.namespace()),
            local_hostname: String::new(),
            hostname: String::new(),
            uuid,
            public_keys: std::collections::BTreeMap::new(),
        }),
    };
    go_html_escape(&s.unwrap_or_default()).into_bytes()
}

/// The data a PreCloudInitIso answer gives (module docs), for `vmi` whose
/// data before the hook was `before` (its data source and volume stay).
///
/// # Errors
/// What is wrong with the answer, by JSON path: not JSON, a wrong type, a
/// data source other than the volume's.
pub fn from_result(
    vmi: &api::VirtualMachineInstance,
    before: &CloudInitData,
    cloud_init_data: &[u8],
    no_cloud_source: &[u8],
) -> Result<CloudInitData, String> {
    let parsed: Value = serde_json::from_slice(cloud_init_data)
        .map_err(|e| format!("cloudInitData that is not JSON: {e}"))?;
    let data = object(&parsed, "cloudInitData")?;
    if let Some(d) = data {
        let user = string_field(d, "UserData", "cloudInitData")?;
        let nocloud = get(d, "NoCloudMetaData")
            .map_or(Ok(None), |v| object(v, "cloudInitData.NoCloudMetaData"))?;
        let drive = get(d, "ConfigDriveMetaData")
            .map_or(Ok(None), |v| object(v, "cloudInitData.ConfigDriveMetaData"))?;
        let source = string_field(d, "DataSource", "cloudInitData")?;
        if !user.is_empty() && (nocloud.is_some() || drive.is_some()) {
            if source != source_name(before.source) {
                return Err(format!(
                    "cloudInitData.DataSource {source:?}: the volume {} is {:?}",
                    before.volume,
                    source_name(before.source)
                ));
            }
            let meta = match before.source {
                DataSource::NoCloud => nocloud,
                DataSource::ConfigDrive => drive,
            };
            let (meta_data, public_keys) = match meta {
                Some(m) => render_meta(before.source, m)?,
                None => (minimal_meta(vmi, before.source), Default::default()),
            };
            return Ok(CloudInitData {
                source: before.source,
                volume: before.volume.clone(),
                user_data: user.into_bytes(),
                network_data: string_field(d, "NetworkData", "cloudInitData")?.into_bytes(),
                meta_data,
                public_keys,
            });
        }
    }
    let parsed: Value = serde_json::from_slice(no_cloud_source)
        .map_err(|e| format!("cloudInitNoCloudSource that is not JSON: {e}"))?;
    let Some(src) = object(&parsed, "cloudInitNoCloudSource")? else {
        // KubeVirt dereferences it and panics.
        return Err("neither valid cloudInitData nor a cloudInitNoCloudSource (null)".into());
    };
    Ok(CloudInitData {
        source: before.source,
        volume: before.volume.clone(),
        user_data: string_field(src, "userData", "cloudInitNoCloudSource")?.into_bytes(),
        network_data: string_field(src, "networkData", "cloudInitNoCloudSource")?.into_bytes(),
        meta_data: minimal_meta(vmi, before.source),
        public_keys: Default::default(),
    })
}
