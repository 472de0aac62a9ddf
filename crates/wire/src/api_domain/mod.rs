//! The domain as virt-handler reads it: KubeVirt's `api.Domain`
//! (`pkg/virt-launcher/virtwrap/api/schema.go`, KubeVirt v1.6.6) encoded the
//! way Go's `encoding/json` encodes it.
//!
//! That struct carries almost no `json` tags, so nearly every key is the
//! **Go field name** (`Spec`, `Devices`, `Disks`, `Target`, `Bus` ...). The
//! exceptions are the embedded Kubernetes types:
//!
//! - `metav1.TypeMeta` → `kind`, `apiVersion` (`omitempty`);
//! - `metav1.ObjectMeta` (under the key `ObjectMeta`) → `name`, `namespace`,
//!   `uid` (`omitempty`: absent when empty), `creationTimestamp` (a struct,
//!   so always present, `null` when zero) and `deletionTimestamp` (pointer
//!   with `omitempty`: present only when set).
//!
//! Go's encoding rules reproduced here for every field we emit:
//!
//! - a nil pointer is `null` (`CurrentMemory`, `Features`, `Disk.Driver`,
//!   `Disk.ReadOnly` ...), a non-nil pointer to an empty struct is `{}`;
//! - a nil slice is `null` — the XML decoder never creates an empty slice, so
//!   an empty list in the model is `null`, never `[]`;
//! - a string is always present, `""` when empty (the `xml:",omitempty"`
//!   tags do not apply to JSON);
//! - a non-pointer struct is always an object, even when zero (`Spec.CPU`,
//!   `Spec.Metadata`, `Disk.Source`, `Disk.Target`, `Status.OSInfo`);
//! - numbers are numbers, booleans are booleans.
//!
//! Fields of `api.DomainSpec` that our XML model ([`domain::Domain`]) does
//! not carry are still emitted, with the value Go gives them when the XML
//! lacks them (`null` for pointers and slices, `""`, `0`, `false`), so the
//! key set of every object matches Go's. JSON object keys are not ordered
//! like Go's struct fields (`serde_json` sorts them); JSON readers, Go's
//! included, do not care.
//!
//! One module per part: `status` (`Status`, with the guest agent's
//! report), `metadata` (`Spec.Metadata.KubeVirt`, the launcher's runtime
//! metadata), `spec` (`Spec` but its devices) and `devices`
//! (`Spec.Devices`, one encoder per device kind).

mod devices;
mod metadata;
mod spec;
mod status;
#[cfg(test)]
mod tests;

pub use metadata::{
    AccessCredentialMetadata, BackupMetadata, GracePeriod, MemoryDumpMetadata, MigrationMetadata,
    RuntimeMetadata,
};
pub use status::{DomainStatus, InterfaceStatus};

use domain::Domain;
use serde_json::{json, Map, Value};

/// `TypeMeta.Kind` of every domain virt-launcher sends.
pub const KIND: &str = "Domain";
/// `TypeMeta.APIVersion` of every domain virt-launcher sends.
pub const API_VERSION: &str = "1.2.2";
/// `Spec.XmlNS`: the QEMU namespace, always reported.
pub const QEMU_XMLNS: &str = "http://libvirt.org/schemas/domain/qemu/1.0";
/// Prefix KubeVirt gives user-defined device aliases in the XML
/// (`<alias name='ua-disk0'/>`); stripped in the JSON.
pub const USER_ALIAS_PREFIX: &str = "ua-";

/// Identity for `ObjectMeta` (Kubernetes `metav1.ObjectMeta`, lower-case
/// json tags).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// `name`: the VMI name (omitted when empty).
    pub name: String,
    /// `namespace`: the VMI namespace (omitted when empty).
    pub namespace: String,
    /// `uid`: the VMI UID (omitted when empty, as in `GetDomain` replies).
    pub uid: String,
    /// `deletionTimestamp`, RFC 3339 (`2025-01-01T00:00:00Z`); set only on
    /// the final "domain is gone" event, omitted when `None`.
    pub deletion_timestamp: Option<String>,
}

/// The `api.Domain` JSON virt-handler decodes:
/// `{"kind":"Domain","apiVersion":"1.2.2","ObjectMeta":{...},"Spec":{...},
/// "Status":{...}}`.
///
/// `spec` is the domain parsed from libvirt's XML; `None` means the domain
/// does not exist, and `Spec` is then Go's zero `api.DomainSpec` (e.g.
/// `"XMLName":{"Space":"","Local":""}`, `"Name":""`,
/// `"Memory":{"Value":0,"Unit":""}`, `"VCPU":null`) except
/// `Spec.Metadata.KubeVirt.UID`, which is `meta.uid`.
///
/// `Spec.Metadata.KubeVirt.UID` is the XML `<uid>` when non-empty, else
/// `meta.uid`. Equivalent to [`domain_json_with_metadata`] with no runtime
/// metadata.
pub fn domain_json(meta: &ObjectMeta, spec: Option<&Domain>, status: &DomainStatus) -> Value {
    domain_json_with_metadata(meta, spec, status, &RuntimeMetadata::default())
}

/// [`domain_json`], with the launcher's metadata cache overlaid on
/// `Spec.Metadata.KubeVirt` (each `Some` in `runtime` wins over the XML).
pub fn domain_json_with_metadata(
    meta: &ObjectMeta,
    spec: Option<&Domain>,
    status: &DomainStatus,
    runtime: &RuntimeMetadata,
) -> Value {
    let spec = match spec {
        Some(d) => spec::spec_json(d, &meta.uid, runtime),
        None => spec::zero_spec_json(&meta.uid, runtime),
    };
    json!({
        "kind": KIND,
        "apiVersion": API_VERSION,
        "ObjectMeta": object_meta_json(meta),
        "Spec": spec,
        "Status": status::status_json(status),
    })
}

/// `metav1.ObjectMeta` JSON: empty strings omitted, `creationTimestamp`
/// always `null`, `deletionTimestamp` only when set.
fn object_meta_json(meta: &ObjectMeta) -> Value {
    let mut m = Map::new();
    for (key, value) in [
        ("name", &meta.name),
        ("namespace", &meta.namespace),
        ("uid", &meta.uid),
    ] {
        if !value.is_empty() {
            m.insert(key.into(), Value::String(value.clone()));
        }
    }
    m.insert("creationTimestamp".into(), Value::Null);
    if let Some(ts) = &meta.deletion_timestamp {
        m.insert("deletionTimestamp".into(), Value::String(ts.clone()));
    }
    Value::Object(m)
}

/// A Go `string` field: the value, or `""`.
fn s(v: &Option<String>) -> Value {
    Value::String(v.clone().unwrap_or_default())
}

/// A Go pointer field: `null`, or the encoded value.
fn opt<T>(v: Option<&T>, f: impl FnOnce(&T) -> Value) -> Value {
    v.map_or(Value::Null, f)
}

/// A Go slice field filled by the XML decoder: `null` when empty.
fn list<T>(v: &[T], f: impl FnMut(&T) -> Value) -> Value {
    if v.is_empty() {
        Value::Null
    } else {
        Value::Array(v.iter().map(f).collect())
    }
}
