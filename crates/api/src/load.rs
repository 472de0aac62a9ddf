//! Decoding a VMI (or a VirtualMachine's template) from YAML or JSON bytes.
//!
//! The document is first read into a generic JSON value (YAML is a superset
//! of JSON, so one path serves both), then decoded into the typed model with
//! `serde_path_to_error`, so a wrong type is reported with the path of the
//! field: `spec.domain.memory.guest: "12XB" is not a quantity: unknown suffix "XB"`.

use serde_json::Value;

use crate::error::FieldError;
use crate::vmi::VirtualMachineInstance;

/// API versions accepted for `kubevirt.io` objects.
pub const API_VERSIONS: [&str; 2] = ["kubevirt.io/v1", "kubevirt.io/v1alpha3"];

/// Why a document could not be read as a VMI.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoadError {
    /// Not valid YAML/JSON.
    #[error("malformed document: {0}")]
    Syntax(String),
    /// Valid syntax, but a field has the wrong type or value.
    #[error("{0}")]
    Field(FieldError),
}

impl From<FieldError> for LoadError {
    fn from(e: FieldError) -> Self {
        LoadError::Field(e)
    }
}

/// Decodes a `VirtualMachineInstance`, or a `VirtualMachine` whose
/// `spec.template` becomes the VMI (name and namespace from the VM when the
/// template has none), from YAML or JSON.
///
/// # Errors
/// [`LoadError::Syntax`] for unparsable text; [`LoadError::Field`] naming the
/// field for a wrong `apiVersion`/`kind`, a wrong type, or a bad quantity.
/// Defaults and semantic checks are separate steps ([`crate::defaults`],
/// [`crate::validate`]).
pub fn from_slice(bytes: &[u8]) -> Result<VirtualMachineInstance, LoadError> {
    from_slice_with_kind(bytes).map(|(vmi, _)| vmi)
}

/// The kind of object a manifest held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A `VirtualMachineInstance`.
    VirtualMachineInstance,
    /// A `VirtualMachine`, whose template became the VMI (the VM mutator's
    /// defaults apply to it, see [`crate::cluster`]).
    VirtualMachine,
}

/// Like [`from_slice`], and says whether the manifest was a VMI or a
/// VirtualMachine.
///
/// # Errors
/// As [`from_slice`].
pub fn from_slice_with_kind(bytes: &[u8]) -> Result<(VirtualMachineInstance, Kind), LoadError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| LoadError::Syntax(format!("not UTF-8: {e}")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    check_nesting(text)?;
    let value: Value = if text.trim_start().starts_with('{') {
        crate::doc::json(text)?
    } else {
        crate::doc::yaml(text)?
    };
    let kind = if value.get("kind").and_then(Value::as_str) == Some("VirtualMachine") {
        Kind::VirtualMachine
    } else {
        Kind::VirtualMachineInstance
    };
    Ok((from_value(value)?, kind))
}

/// Deepest flow nesting (`[[[`, `{{{`) accepted. The YAML parser's time
/// grows with the square of the depth (100,000 levels take about a minute);
/// a VMI needs fewer than 20.
pub const MAX_NESTING: usize = 256;

/// Refuses documents nested deeper than [`MAX_NESTING`] before parsing
/// them. Counts flow brackets outside quoted scalars, block scalars and
/// comments, lexing as YAML does where it decides what a quote, a block
/// scalar or `#` is (a hand-written scan because the parsers offer no early
/// stop, and the point is to stop before the parser's quadratic work): a
/// quote opens a scalar only at the start of a token (after white space,
/// the start of a line, `[`, `{`, `,`, or the `:` that follows a quoted
/// key); elsewhere (`it's`) it is a plain character. `#` starts a comment
/// at the start of a line or after white space, up to the end of the line.
/// `|` or `>` at the start of a token, with only indicators (`+`, `-`,
/// digits) and a comment after it on its line, starts a block scalar: the
/// lines after it that are blank or indented more than its own line are
/// text (a quote or bracket there means nothing). Block (indented) nesting
/// is bounded by the input size limit instead.
fn check_nesting(text: &str) -> Result<(), LoadError> {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    // The indentation of the line that opened the current block scalar.
    let mut block: Option<usize> = None;
    // The previous character, and whether it closed a quoted scalar.
    let mut prev = '\n';
    let mut after_quote = false;
    let mut colon_after_quote = false;
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let blank = line.trim().is_empty();
        if let Some(parent) = block {
            if blank || indent > parent {
                prev = '\n';
                continue;
            }
            block = None;
        }
        let mut comment = false;
        // A `|` or `>` seen at a token start, with only indicators since.
        let mut block_indicator = false;
        for c in line.chars() {
            if comment {
                break;
            }
            match quote {
                Some(q) => {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' && q == '"' {
                        escaped = true;
                    } else if c == q {
                        quote = None;
                        prev = c;
                        after_quote = true;
                        continue;
                    }
                }
                None => {
                    let token_start = prev.is_whitespace()
                        || matches!(prev, '[' | '{' | ',')
                        || (prev == ':' && colon_after_quote);
                    match c {
                        '"' | '\'' if token_start => quote = Some(c),
                        '#' if prev.is_whitespace() => comment = true,
                        '|' | '>' if token_start && depth == 0 => block_indicator = true,
                        '+' | '-' | '0'..='9' if block_indicator => {}
                        c if c.is_whitespace() => {}
                        '[' | '{' => {
                            block_indicator = false;
                            depth += 1;
                            max = max.max(depth);
                        }
                        ']' | '}' => {
                            block_indicator = false;
                            depth = depth.saturating_sub(1);
                        }
                        _ => block_indicator = false,
                    }
                    colon_after_quote = c == ':' && (after_quote || matches!(prev, ']' | '}'));
                }
            }
            after_quote = false;
            prev = c;
            if max > MAX_NESTING {
                return Err(LoadError::Syntax(format!(
                    "nested deeper than {MAX_NESTING} levels"
                )));
            }
        }
        if comment {
            prev = '\n';
        }
        if block_indicator && quote.is_none() {
            block = Some(indent);
        }
    }
    Ok(())
}

/// Decodes the VMI of a command-socket request (`VMI.vmiJson`) the way
/// KubeVirt's launcher does: the JSON of one VMI object, into the VMI type,
/// whatever its TypeMeta says when it says nothing.
///
/// virt-handler marshals the VMI of its informer, and objects that a watch
/// delivered (every VMI added after the initial list, every update) have an
/// empty TypeMeta, which Go's `json.Marshal` leaves out: `kind` and
/// `apiVersion` are usually absent (kubevirt-facts §11.1). Absent or empty,
/// they default to `kubevirt.io/v1` `VirtualMachineInstance`; present with
/// another value they are refused by field, as [`from_slice`] refuses them
/// (a VirtualMachine is not a command's VMI).
///
/// # Errors
/// [`LoadError::Syntax`] for bytes that are not one JSON object (YAML is
/// not virt-handler's wire); [`LoadError::Field`] naming the field for a
/// wrong `apiVersion`/`kind`, a wrong type, or a bad quantity.
pub fn from_command_json(bytes: &[u8]) -> Result<VirtualMachineInstance, LoadError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| LoadError::Syntax(format!("not UTF-8: {e}")))?;
    check_nesting(text)?;
    let value = crate::doc::json(text)?;
    let Value::Object(obj) = &value else {
        return Err(FieldError::new("", "document is not an object").into());
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !api_version.is_empty() && !API_VERSIONS.contains(&api_version) {
        return Err(FieldError::new(
            "apiVersion",
            format!("{api_version:?} is not kubevirt.io/v1"),
        )
        .into());
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if !kind.is_empty() && kind != "VirtualMachineInstance" {
        return Err(
            FieldError::new("kind", format!("{kind:?} is not VirtualMachineInstance")).into(),
        );
    }
    let mut vmi = decode(value, "")?;
    if vmi.api_version.is_empty() {
        vmi.api_version = "kubevirt.io/v1".into();
    }
    if vmi.kind.is_empty() {
        vmi.kind = "VirtualMachineInstance".into();
    }
    Ok(vmi)
}

/// Like [`from_slice`], from an already parsed JSON value.
///
/// # Errors
/// As [`from_slice`], minus syntax errors.
pub fn from_value(value: Value) -> Result<VirtualMachineInstance, LoadError> {
    let Value::Object(obj) = &value else {
        return Err(FieldError::new("", "document is not an object").into());
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !API_VERSIONS.contains(&api_version) {
        return Err(FieldError::new(
            "apiVersion",
            format!("{api_version:?} is not kubevirt.io/v1"),
        )
        .into());
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    match kind {
        "VirtualMachineInstance" => decode(value, ""),
        "VirtualMachine" => from_vm(value),
        other => Err(FieldError::new(
            "kind",
            format!("{other:?} is not VirtualMachineInstance or VirtualMachine"),
        )
        .into()),
    }
}

fn from_vm(mut vm: Value) -> Result<VirtualMachineInstance, LoadError> {
    let meta = vm.get("metadata").cloned().unwrap_or(Value::Null);
    let template = vm
        .pointer_mut("/spec/template")
        .map(Value::take)
        .filter(|t| t.is_object())
        .ok_or_else(|| FieldError::new("spec.template", "required for a VirtualMachine"))?;
    let mut vmi = decode(template, "spec.template.")?;
    if vmi.metadata.name.is_empty() {
        vmi.metadata.name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
    }
    if vmi.metadata.namespace.is_none() {
        vmi.metadata.namespace = meta
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    vmi.api_version = "kubevirt.io/v1".into();
    vmi.kind = "VirtualMachineInstance".into();
    Ok(vmi)
}

/// Decodes the VMI and bounds its device lists ([`crate::limits`]) before
/// anything else looks at it.
fn decode(value: Value, prefix: &str) -> Result<VirtualMachineInstance, LoadError> {
    let mut lists = Vec::new();
    list_paths(&value, &mut String::new(), &mut String::new(), &mut lists);
    let vmi =
        serde_path_to_error::deserialize::<_, VirtualMachineInstance>(value).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            LoadError::from(FieldError::new(
                format!("{prefix}{path}"),
                e.into_inner().to_string(),
            ))
        })?;
    crate::limits::check_counts(&vmi, prefix)?;
    refuse_lists_read_as_objects(&vmi, &lists, prefix)?;
    Ok(vmi)
}

/// Every list in `value`: its JSON pointer and its field path
/// (`spec.volumes[0].x`), in document order.
fn list_paths(
    value: &Value,
    pointer: &mut String,
    path: &mut String,
    out: &mut Vec<(String, String)>,
) {
    let (pointer_len, path_len) = (pointer.len(), path.len());
    match value {
        Value::Array(items) => {
            out.push((pointer.clone(), path.clone()));
            for (i, item) in items.iter().enumerate() {
                use std::fmt::Write;
                let _ = write!(pointer, "/{i}");
                let _ = write!(path, "[{i}]");
                list_paths(item, pointer, path, out);
                pointer.truncate(pointer_len);
                path.truncate(path_len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                list_paths(item, pointer, path, out);
                pointer.truncate(pointer_len);
                path.truncate(path_len);
            }
        }
        _ => {}
    }
}

/// serde lets a struct be read from a list, field by field in order
/// (`cpu: [3, 2]` would be 3 cores and 2 sockets); KubeVirt's decoder
/// refuses a list where an object belongs ("cannot unmarshal array into Go
/// struct field"). serde has no switch for it, so the decoded VMI is
/// written back and every place where the document had a list and the
/// VMI has an object is refused by field. Lists of the untyped parts
/// (`status`, annotations' values) stay lists and pass.
///
/// # Errors
/// [`LoadError::Field`] naming the first such field.
fn refuse_lists_read_as_objects(
    vmi: &VirtualMachineInstance,
    lists: &[(String, String)],
    prefix: &str,
) -> Result<(), LoadError> {
    if lists.is_empty() {
        return Ok(());
    }
    let Ok(written) = serde_json::to_value(vmi) else {
        return Ok(());
    };
    for (pointer, path) in lists {
        if written.pointer(pointer).is_some_and(Value::is_object) {
            return Err(FieldError::new(
                format!("{prefix}{path}"),
                "is a list where an object belongs",
            )
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(doc: &str) -> String {
        from_slice(doc.as_bytes()).unwrap_err().to_string()
    }

    const HEAD: &str =
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\n";

    /// A list where KubeVirt's types have an object is refused by field
    /// (serde alone would read it by position), as KubeVirt's decoder
    /// refuses it; a list inside a list is found too.
    #[test]
    fn a_list_where_an_object_belongs_is_refused_by_field() {
        let doc = r#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":["jsonname"],"spec":{"domain":{"devices":{}}}}"#;
        assert!(
            err(doc).starts_with("metadata: is a list where an object belongs"),
            "{}",
            err(doc)
        );
        let e = err(&format!(
            "{HEAD}spec:\n  domain:\n    cpu: [3, 2, 1]\n    devices: {{}}\n"
        ));
        assert!(e.starts_with("spec.domain.cpu: is a list"), "{e}");
        let e = err(&format!(
            "{HEAD}spec:\n  domain: {{devices: {{disks: [{{name: d, disk: [virtio]}}]}}}}\n"
        ));
        assert!(
            e.starts_with("spec.domain.devices.disks[0].disk: is a list"),
            "{e}"
        );
        let vm = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: vm}\nspec:\n  template:\n    spec:\n      domain: {devices: {}, memory: [256Mi]}\n";
        let e = err(vm);
        assert!(
            e.starts_with("spec.template.spec.domain.memory: is a list"),
            "{e}"
        );
        // Real lists, and lists in the untyped status, still load.
        let ok = format!("{HEAD}spec:\n  domain: {{devices: {{disks: [{{name: d}}]}}}}\n  volumes: [{{name: d, emptyDisk: {{capacity: 1Gi}}}}]\nstatus: {{volumeStatus: [{{name: d}}], x: [[1]]}}\n");
        from_slice(ok.as_bytes()).unwrap();
    }

    #[test]
    fn bad_quantity_names_the_field() {
        let e = err(&format!(
            "{HEAD}spec:\n  domain:\n    memory:\n      guest: 12XB\n"
        ));
        assert_eq!(
            e,
            r#"spec.domain.memory.guest: "12XB" is not a quantity: unknown suffix "XB""#
        );
        let e = err(&format!(
            "{HEAD}spec:\n  domain:\n    resources:\n      requests:\n        memory: 1x\n"
        ));
        assert!(
            e.starts_with("spec.domain.resources.requests.memory: \"1x\" is not a quantity"),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = err(&format!(
            "{HEAD}spec:\n  domain:\n    cpu:\n      cores: two\n"
        ));
        assert!(e.starts_with("spec.domain.cpu.cores: invalid type"), "{e}");
        let e = err(&format!(
            "{HEAD}spec:\n  domain:\n    devices:\n      disks:\n      - name: d\n        disk: {{bus: floppy}}\n"
        ));
        assert!(
            e.starts_with("spec.domain.devices.disks[0].disk.bus: unknown variant `floppy`"),
            "{e}"
        );
        let e = err(&format!("{HEAD}spec:\n  volumes: {{}}\n"));
        assert!(e.starts_with("spec.volumes: invalid type: map"), "{e}");
    }

    #[test]
    fn unknown_fields_are_tolerated() {
        let vmi = from_slice(
            format!(
                "{HEAD}spec:\n  futureField: 3\n  domain:\n    devices:\n      newDevice: {{}}\n"
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(vmi.metadata.name, "a");
    }

    #[test]
    fn json_and_yaml_agree() {
        let y =
            from_slice(format!("{HEAD}spec:\n  domain:\n    memory: {{guest: 64Mi}}\n").as_bytes())
                .unwrap();
        let j = from_slice(
            br#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"a"},"spec":{"domain":{"memory":{"guest":"64Mi"}}}}"#,
        )
        .unwrap();
        assert_eq!(y, j);
    }

    #[test]
    fn kind_and_version_are_checked() {
        assert_eq!(
            err("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n"),
            r#"apiVersion: "v1" is not kubevirt.io/v1"#
        );
        assert_eq!(
            err("apiVersion: kubevirt.io/v1\nkind: Pod\nmetadata: {name: a}\n"),
            r#"kind: "Pod" is not VirtualMachineInstance or VirtualMachine"#
        );
        assert!(err("- a\n- b\n").contains("document is not an object"));
        assert!(err("a: [b\n").starts_with("malformed document"));
        assert!(err("{\"a\":").starts_with("malformed document"));
        assert!(from_slice(b"\xff\xfe")
            .unwrap_err()
            .to_string()
            .contains("not UTF-8"));
    }

    #[test]
    fn bom_and_deep_nesting() {
        let doc = format!("\u{feff}{HEAD}spec: {{}}\n");
        assert_eq!(from_slice(doc.as_bytes()).unwrap().metadata.name, "a");
        let deep = format!("{HEAD}spec: {}{}\n", "[".repeat(300), "]".repeat(300));
        assert_eq!(
            err(&deep),
            "malformed document: nested deeper than 256 levels"
        );
        let quoted = format!("{HEAD}metadata2: \"{}\"\n", "[".repeat(300));
        assert!(from_slice(quoted.as_bytes()).is_ok());
        let quoted = format!("{HEAD}metadata2: ['{}', \"x\"]\n", "{".repeat(300));
        assert!(from_slice(quoted.as_bytes()).is_ok());
        // Issue 19: an apostrophe in a comment or a plain scalar hid the
        // nesting after it (a 200 KB nested flow sequence took 79 s).
        for prefix in ["# it's\n", "note: it's here\n", "a: x'y\n"] {
            let deep = format!(
                "{HEAD}{prefix}spec: {}{}\n",
                "[".repeat(300),
                "]".repeat(300)
            );
            assert_eq!(
                err(&deep),
                "malformed document: nested deeper than 256 levels",
                "{prefix:?}"
            );
        }
        // Issue 19: a quote inside a block scalar opened a "quoted scalar"
        // that hid the nesting after the block.
        for block in ["|", ">-", "|2+", "| # text"] {
            let deep = format!(
                "{HEAD}note: {block}\n  it's \"a\n\n  x ' y\nspec: {}{}\n",
                "[".repeat(300),
                "]".repeat(300)
            );
            assert_eq!(
                err(&deep),
                "malformed document: nested deeper than 256 levels",
                "{block:?}"
            );
        }
        // A block scalar's brackets are text.
        let text = format!("{HEAD}note: |\n  {}\n  ok\nspec: {{}}\n", "[".repeat(300));
        assert!(from_slice(text.as_bytes()).is_ok());
        // `>` inside a plain scalar starts no block.
        let plain = format!(
            "{HEAD}note: a > b\nspec: {}{}\n",
            "[".repeat(300),
            "]".repeat(300)
        );
        assert_eq!(
            err(&plain),
            "malformed document: nested deeper than 256 levels"
        );
        // A comment's brackets do not count; a '#' inside a word is no comment.
        let commented = format!("{HEAD}# {}\nspec: {{}}\n", "[".repeat(300));
        assert!(from_slice(commented.as_bytes()).is_ok());
        let json = format!(
            "{{\"apiVersion\":\"kubevirt.io/v1\",\"kind\":\"VirtualMachineInstance\",\"metadata\":{{\"name\":\"a\"}},\"x\":\"{}\"}}",
            "[".repeat(300)
        );
        assert!(from_slice(json.as_bytes()).is_ok());
    }

    /// virt-handler's VMIs (informer objects from a watch) carry no
    /// TypeMeta; KubeVirt's launcher never looks at it.
    #[test]
    fn command_json_without_type_meta_is_a_vmi() {
        let bare = br#"{"metadata":{"name":"a","namespace":"ns","uid":"u-1","resourceVersion":"42","generation":1,"finalizers":["foregroundDeleteVirtualMachine"],"managedFields":[{"manager":"virt-handler"}]},"spec":{"domain":{"memory":{"guest":"64Mi"}}},"status":{"phase":"Scheduled","activePods":{"p":"node"}}}"#;
        let vmi = from_command_json(bare).unwrap();
        assert_eq!(vmi.metadata.name, "a");
        assert_eq!(vmi.uid(), "u-1");
        assert_eq!(vmi.api_version, "kubevirt.io/v1");
        assert_eq!(vmi.kind, "VirtualMachineInstance");
        assert_eq!(vmi.status.as_ref().unwrap()["phase"], "Scheduled");
        // The same object from the initial list, with TypeMeta: the same VMI.
        let typed = br#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"a","namespace":"ns","uid":"u-1","resourceVersion":"42","generation":1,"finalizers":["foregroundDeleteVirtualMachine"],"managedFields":[{"manager":"virt-handler"}]},"spec":{"domain":{"memory":{"guest":"64Mi"}}},"status":{"phase":"Scheduled","activePods":{"p":"node"}}}"#;
        assert_eq!(from_command_json(typed).unwrap(), vmi);
        // Empty strings are what Go's omitempty would have dropped.
        let empty = br#"{"apiVersion":"","kind":"","metadata":{"name":"a"}}"#;
        assert_eq!(
            from_command_json(empty).unwrap().kind,
            "VirtualMachineInstance"
        );
    }

    #[test]
    fn command_json_with_wrong_type_meta_is_refused_by_field() {
        let e = |doc: &[u8]| from_command_json(doc).unwrap_err().to_string();
        assert_eq!(
            e(br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}"#),
            r#"apiVersion: "v1" is not kubevirt.io/v1"#
        );
        assert_eq!(
            e(br#"{"metadata":{"name":"a"},"kind":"VirtualMachine"}"#),
            r#"kind: "VirtualMachine" is not VirtualMachineInstance"#
        );
        assert!(
            e(br#"{"metadata":{"name":"a"},"spec":{"domain":{"cpu":{"cores":"x"}}}}"#)
                .starts_with("spec.domain.cpu.cores: invalid type")
        );
        assert!(e(b"metadata: {name: a}\n").starts_with("malformed document"));
        assert!(e(b"[1]").contains("document is not an object"));
    }

    #[test]
    fn virtual_machine_template_is_used() {
        let vm = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: vm1, namespace: ns}\nspec:\n  template:\n    spec:\n      domain:\n        memory: {guest: 64Mi}\n";
        let vmi = from_slice(vm.as_bytes()).unwrap();
        assert_eq!(vmi.domain_name(), "ns_vm1");
        assert_eq!(vmi.kind, "VirtualMachineInstance");
        let e = err(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: vm1}\nspec: {}\n",
        );
        assert_eq!(e, "spec.template: required for a VirtualMachine");
        let e = err("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: vm1}\nspec:\n  template:\n    spec:\n      domain: {cpu: {cores: x}}\n");
        assert!(e.starts_with("spec.template.spec.domain.cpu.cores"), "{e}");
    }
}
