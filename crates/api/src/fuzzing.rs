//! Structured fuzzing support (cargo feature `arbitrary`, used only by the
//! `fuzz/` crate): `arbitrary::Arbitrary` for [`Quantity`] and generators for
//! the raw-JSON fields of [`crate::vmi`].
//!
//! The VMI types derive `Arbitrary` behind the feature (instead of a mirror
//! of them in the fuzz crate) so every field the converter reads is fuzzed,
//! including fields added later, without a second copy of the API to keep in
//! step. Only what the derive cannot do lives here:
//!
//! - a [`Quantity`] is made from text, so it always holds what
//!   [`Quantity::parse`] would have produced: mostly `number[.fraction]suffix`
//!   with every suffix of the grammar (large, tiny, fractional and negative
//!   values included), sometimes arbitrary text that happens to parse;
//! - `serde_json::Value` has no `Arbitrary`: [`value`] builds small JSON
//!   trees (depth ≤ 3) whose keys come from the names the launcher reads in
//!   raw fields (`port`, `protocol`, `name`, ...) or are arbitrary.

use arbitrary::{Arbitrary, Result, Unstructured};
use serde_json::{Map, Value};

use crate::quantity::Quantity;

/// Every suffix of the quantity grammar, plus exponents.
const SUFFIXES: [&str; 20] = [
    "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3",
    "E-2", "e18", "e-1000",
];

impl<'a> Arbitrary<'a> for Quantity {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        if u.ratio(1, 8)? {
            if let Ok(q) = Quantity::parse(<&str>::arbitrary(u)?) {
                return Ok(q);
            }
        }
        let sign = *u.choose(&["", "", "", "-", "+"])?;
        let int: u64 = match u.int_in_range(0..=3)? {
            0 => u.int_in_range(0..=8)?,
            1 => u.int_in_range(0..=4096)?,
            2 => u64::arbitrary(u)?,
            _ => 1 << u.int_in_range(0..=63)?,
        };
        let frac = if u.ratio(1, 6)? {
            format!(".{}", u.int_in_range(0..=999u32)?)
        } else {
            String::new()
        };
        let suffix = *u.choose(&SUFFIXES)?;
        let text = format!("{sign}{int}{frac}{suffix}");
        // Always parses: digits, at most one point, a suffix of the grammar.
        Quantity::parse(&text)
            .or_else(|_| Quantity::parse("0").map_err(|_| arbitrary::Error::IncorrectFormat))
    }
}

/// Keys the launcher reads inside raw JSON fields (ports, binding plugins,
/// virtiofs, downward metrics, access credential propagation).
const KEYS: [&str; 8] = [
    "name", "port", "protocol", "value", "bus", "type", "size", "enabled",
];

/// A small JSON value (depth ≤ `depth`).
fn value_at(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let max = if depth == 0 { 4 } else { 6 };
    Ok(match u.int_in_range(0..=max)? {
        0 => Value::Object(Map::new()),
        1 => Value::Null,
        2 => Value::Bool(bool::arbitrary(u)?),
        3 => Value::from(i64::arbitrary(u)?),
        4 => Value::String(String::arbitrary(u)?),
        5 => {
            let n = u.int_in_range(0..=3)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(value_at(u, depth - 1)?);
            }
            Value::Array(v)
        }
        _ => {
            let n = u.int_in_range(0..=4)?;
            let mut m = Map::new();
            for _ in 0..n {
                let k = if u.ratio(3, 4)? {
                    (*u.choose(&KEYS)?).to_owned()
                } else {
                    String::arbitrary(u)?
                };
                m.insert(k, value_at(u, depth - 1)?);
            }
            Value::Object(m)
        }
    })
}

/// A small arbitrary JSON value, mostly `{}` or an object.
///
/// # Errors
/// When the fuzzer's data runs out.
pub fn value(u: &mut Unstructured<'_>) -> Result<Value> {
    value_at(u, 3)
}

/// An optional raw-JSON field (`Option<Value>` in [`crate::vmi`]). Never
/// `Some(null)`: decoding reads `field: null` as absent, as KubeVirt's Go
/// pointers do, so no document produces it.
///
/// # Errors
/// When the fuzzer's data runs out.
pub fn opt_value(u: &mut Unstructured<'_>) -> Result<Option<Value>> {
    // Mostly absent: most raw fields are features the converter refuses,
    // and any one of them refuses the whole VMI (with 1 in 32 over about
    // twenty fields, half of the VMIs have none).
    if u.ratio(1, 32)? {
        value(u).map(|v| Some(v).filter(|v| !v.is_null()))
    } else {
        Ok(None)
    }
}

/// A list of raw-JSON items (`Vec<Value>` in [`crate::vmi`]), mostly empty,
/// at most four.
///
/// # Errors
/// When the fuzzer's data runs out.
pub fn vec_value(u: &mut Unstructured<'_>) -> Result<Vec<Value>> {
    let n = if u.ratio(1, 16)? {
        u.int_in_range(1..=4)?
    } else {
        0
    };
    (0..n).map(|_| value(u)).collect()
}
