//! Reading a YAML or JSON document into a JSON value at a bounded cost.
//!
//! The parsers (`serde_json`, `serde_yaml_ng`) hand their events to
//! [`BoundedValue`], a `serde` seed that builds the `serde_json::Value`
//! itself (instead of `Value`'s own `Deserialize`) so that it can:
//! - count the nodes it builds and the bytes of their strings, and stop at
//!   [`MAX_NODES`] / [`MAX_EXPANDED_BYTES`]: a YAML alias is replayed by the
//!   parser every time it is referenced, so a 200 KB document whose anchor
//!   holds 100,000 scalars and is referenced 1,000 times would otherwise
//!   expand to 100 million nodes (gigabytes; the parser's own limit counts
//!   alias jumps, not their size);
//! - refuse a key that appears twice in one mapping, naming its path (JSON
//!   parsers keep the last one silently, and Kubernetes' strict decoding
//!   refuses it).
//!
//! Nesting depth is bounded by the parsers (128 levels each) and, before
//! parsing, by [`crate::load`]'s bracket count.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::error::FieldError;
use crate::load::LoadError;

/// Most nodes (scalars, sequences, mappings, keys) a document may hold
/// once its aliases are expanded. A VMI has a few thousand; Kubernetes
/// stores objects of at most 1.5 MiB, which is about 250,000 of the
/// smallest JSON nodes.
pub const MAX_NODES: usize = 250_000;

/// Most bytes of strings (keys and values) a document may hold once its
/// aliases are expanded: twice the largest input the launcher reads.
pub const MAX_EXPANDED_BYTES: usize = 32 << 20;

/// What is left of a document's budget.
#[derive(Debug)]
pub struct Budget {
    nodes: Cell<usize>,
    bytes: Cell<usize>,
    /// A duplicate key found, with its path (serde's errors are text).
    duplicate: RefCell<Option<FieldError>>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            nodes: Cell::new(MAX_NODES),
            bytes: Cell::new(MAX_EXPANDED_BYTES),
            duplicate: RefCell::new(None),
        }
    }
}

impl Budget {
    fn node<E: serde::de::Error>(&self) -> Result<(), E> {
        let n = self.nodes.get();
        if n == 0 {
            return Err(E::custom(format!(
                "document expands to more than {MAX_NODES} nodes (YAML aliases included)"
            )));
        }
        self.nodes.set(n - 1);
        Ok(())
    }

    fn bytes<E: serde::de::Error>(&self, len: usize) -> Result<(), E> {
        let left = self.bytes.get();
        if len > left {
            return Err(E::custom(format!(
                "document expands to more than {MAX_EXPANDED_BYTES} bytes of text (YAML aliases included)"
            )));
        }
        self.bytes.set(left - len);
        Ok(())
    }
}

/// One step of the path from the root to a node, for error messages
/// (`spec.domain.devices.disks[2].name`).
#[derive(Clone, Copy)]
enum Step<'a> {
    Root,
    Key(&'a Step<'a>, &'a str),
    Index(&'a Step<'a>, usize),
}

impl fmt::Display for Step<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Root => Ok(()),
            Step::Key(parent, k) => {
                if matches!(parent, Step::Root) {
                    write!(f, "{k}")
                } else {
                    write!(f, "{parent}.{k}")
                }
            }
            Step::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// The seed: a `serde_json::Value` built within `budget`.
pub struct BoundedValue<'a> {
    budget: &'a Budget,
    at: Step<'a>,
}

impl<'a> BoundedValue<'a> {
    /// A seed for a whole document.
    pub fn new(budget: &'a Budget) -> Self {
        BoundedValue {
            budget,
            at: Step::Root,
        }
    }
}

impl<'de> DeserializeSeed<'de> for BoundedValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.budget.node()?;
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BoundedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.budget.bytes(v.len())?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.budget.bytes(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(BoundedValue {
            budget: self.budget,
            at: Step::Index(&self.at, out.len()),
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key(self.budget))? {
            let value = map.next_value_seed(BoundedValue {
                budget: self.budget,
                at: Step::Key(&self.at, &key),
            })?;
            if out.contains_key(&key) {
                let e = FieldError::new(self.at.to_string(), format!("duplicate key {key:?}"));
                let text = e.to_string();
                *self.budget.duplicate.borrow_mut() = Some(e);
                return Err(A::Error::custom(text));
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key: a string (YAML's other scalar keys are read as text, as
/// Kubernetes' YAML-to-JSON conversion does), counted in the budget.
struct Key<'a>(&'a Budget);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        self.0.node()?;
        d.deserialize_string(self)
    }
}

impl Visitor<'_> for Key<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
        self.0.bytes(v.len())?;
        Ok(v.to_owned())
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }
}

/// The error of a failed parse: a duplicate key by field, anything else
/// (syntax, budget) as a malformed document.
fn error(budget: &Budget, message: String) -> LoadError {
    match budget.duplicate.borrow_mut().take() {
        Some(e) => LoadError::Field(e),
        None => LoadError::Syntax(message),
    }
}

/// Parses JSON text within the budget.
///
/// # Errors
/// [`LoadError::Field`] for a duplicate key (naming its path),
/// [`LoadError::Syntax`] for bad syntax or an exhausted budget.
pub fn json(text: &str) -> Result<Value, LoadError> {
    let budget = Budget::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let v = BoundedValue::new(&budget)
        .deserialize(&mut de)
        .map_err(|e| error(&budget, e.to_string()))?;
    de.end().map_err(|e| LoadError::Syntax(e.to_string()))?;
    Ok(v)
}

/// Parses YAML text (one document) within the budget.
///
/// # Errors
/// As [`json`].
pub fn yaml(text: &str) -> Result<Value, LoadError> {
    let budget = Budget::default();
    BoundedValue::new(&budget)
        .deserialize(serde_yaml_ng::Deserializer::from_str(text))
        .map_err(|e| error(&budget, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_value_as_serde() {
        let y = "a: 1\nb: [x, 2.5, null, true]\nc: {d: -3}\n";
        assert_eq!(
            yaml(y).unwrap(),
            serde_yaml_ng::from_str::<Value>(y).unwrap()
        );
        let j = r#"{"a":1,"b":["x",2.5,null,true],"c":{"d":-3},"e":18446744073709551615}"#;
        assert_eq!(json(j).unwrap(), serde_json::from_str::<Value>(j).unwrap());
    }

    #[test]
    fn duplicate_keys_are_refused_by_path() {
        let e =
            yaml("spec:\n  domain:\n    devices:\n      disks: []\n      disks: []\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"spec.domain.devices: duplicate key "disks""#
        );
        let e = json(r#"{"spec":{"volumes":[{"name":"a","name":"b"}]}}"#).unwrap_err();
        assert_eq!(e.to_string(), r#"spec.volumes[0]: duplicate key "name""#);
        let e = json(r#"{"a":1,"a":2}"#).unwrap_err();
        assert!(matches!(e, LoadError::Field(_)), "{e}");
        assert!(e.to_string().ends_with(r#"duplicate key "a""#), "{e}");
    }

    /// Issue 19's reproduction: an anchor of 100,000 scalars referenced
    /// 1,000 times (203 KB) took 22 s and 3.4 GB before SIGABRT.
    #[test]
    fn an_alias_bomb_stops_at_the_node_budget() {
        let mut doc = String::from("a: &x [");
        doc.push_str(&"1,".repeat(100_000));
        doc.push_str("1]\nb: [");
        doc.push_str(&"*x,".repeat(1000));
        doc.push_str("*x]\n");
        let e = yaml(&doc).unwrap_err().to_string();
        assert!(e.contains("more than 250000 nodes"), "{e}");
        // Bytes: a long string referenced many times.
        let mut doc = format!("a: &x \"{}\"\nb: [", "y".repeat(1 << 20));
        doc.push_str(&"*x,".repeat(40));
        doc.push_str("*x]\n");
        let e = yaml(&doc).unwrap_err().to_string();
        assert!(e.contains("more than 33554432 bytes"), "{e}");
    }

    #[test]
    fn non_string_yaml_keys_are_text() {
        assert_eq!(
            yaml("1: a\ntrue: b\n").unwrap(),
            serde_json::json!({"1": "a", "true": "b"})
        );
    }
}
