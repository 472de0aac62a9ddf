//! Kubernetes resource quantities (`128Mi`, `1G`, `500m`, `1e3`, `0.5Gi`).
//!
//! Grammar (k8s.io/apimachinery `resource.Quantity`):
//!
//! ```text
//! quantity     ::= signedNumber suffix
//! signedNumber ::= [+-] number
//! number       ::= digits | digits "." [digits] | "." digits
//! suffix       ::= binarySI | decimalSI | decimalExponent
//! binarySI     ::= Ki | Mi | Gi | Ti | Pi | Ei          (powers of 1024)
//! decimalSI    ::= n | u | m | "" | k | M | G | T | P | E (powers of 1000)
//! decimalExponent ::= (e | E) signedInteger
//! ```
//!
//! Hand-rolled on purpose: the only maintained Rust parsers (`kube_quantity`,
//! `k8s_quantity_parser`) pull in `k8s-openapi` (tens of MiB of generated code)
//! and convert through floating point or `rust_decimal` without the integer
//! rounding rules KubeVirt relies on. This parser keeps the value exact as
//! `mantissa × 10^exp10 × 2^exp2` and rounds only when asked to.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Largest number of significant mantissa digits accepted. Kubernetes itself
/// caps the precision of a canonical quantity far below this; anything longer
/// is a typo or an attack, and refusing it keeps arithmetic in `i128`.
const MAX_DIGITS: usize = 30;

/// A parsed, exact Kubernetes quantity. Keeps the original text for display
/// and round-tripping (serialises back to the string it came from).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    text: String,
    negative: bool,
    /// Significant digits without the decimal point.
    mantissa: u128,
    /// Power of ten applied to `mantissa` (decimal point shift and SI suffix).
    exp10: i32,
    /// Power of two applied (binary SI suffix: Ki = 10, Mi = 20 ...).
    exp2: u32,
}

/// Why a string is not a quantity. The text names the offending input, e.g.
/// `"12XB" is not a quantity: unknown suffix "XB"`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a quantity: {reason}")]
pub struct QuantityError {
    /// The rejected input.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Why a quantity cannot be expressed as the integer asked for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityRangeError {
    /// The quantity is below zero where only non-negative values make sense.
    #[error("{0} is negative")]
    Negative(String),
    /// The quantity does not fit in the target integer type.
    #[error("{0} is too large")]
    TooLarge(String),
}

impl Quantity {
    /// Parses `s` following the Kubernetes grammar (see module docs).
    ///
    /// # Errors
    /// [`QuantityError`] naming the input and the first problem found: empty
    /// string, no digits, unknown suffix, bad exponent, too many digits.
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let err = |reason: &str| QuantityError {
            input: s.to_owned(),
            reason: reason.to_owned(),
        };
        // Kubernetes accepts no surrounding white space.
        let t = s;
        if t.is_empty() {
            return Err(err("empty string"));
        }
        let bytes = t.as_bytes();
        let mut i = 0;
        let mut negative = false;
        if bytes[0] == b'+' || bytes[0] == b'-' {
            negative = bytes[0] == b'-';
            i = 1;
        }
        let num_start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let number = &t[num_start..i];
        let suffix = &t[i..];
        if number.matches('.').count() > 1 {
            return Err(err("more than one decimal point"));
        }
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("no digits"));
        }
        // Build the mantissa from significant digits only.
        let digits: String = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        let mut exp10 = -i32::try_from(frac_part.len()).map_err(|_| err("too many digits"))?;
        let digits_trimmed = digits.trim_end_matches('0');
        exp10 += i32::try_from(digits.len() - digits_trimmed.len())
            .map_err(|_| err("too many digits"))?;
        if digits_trimmed.len() > MAX_DIGITS {
            return Err(err("too many significant digits"));
        }
        let mantissa: u128 = if digits_trimmed.is_empty() {
            0
        } else {
            digits_trimmed
                .parse()
                .map_err(|_| err("digits out of range"))?
        };
        let (s10, exp2) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            _ if suffix.starts_with(['e', 'E']) => {
                let e = &suffix[1..];
                let body = e.strip_prefix(['+', '-']).unwrap_or(e);
                let ok = !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit());
                if !ok {
                    return Err(err(&format!("bad exponent {suffix:?}")));
                }
                let v: i32 = e
                    .parse()
                    .map_err(|_| err(&format!("exponent {suffix:?} out of range")))?;
                if !(-1000..=1000).contains(&v) {
                    return Err(err(&format!("exponent {suffix:?} out of range")));
                }
                (v, 0)
            }
            _ => return Err(err(&format!("unknown suffix {suffix:?}"))),
        };
        Ok(Quantity {
            text: s.to_owned(),
            negative: negative && mantissa != 0,
            mantissa,
            exp10: exp10 + s10,
            exp2,
        })
    }

    /// `bytes` as Kubernetes prints a binary-SI quantity (`resource.NewQuantity(n,
    /// BinarySI).String()`): the largest of `Ki`, `Mi`, `Gi`, `Ti`, `Pi`,
    /// `Ei` that divides it exactly, else the plain number (`5Gi`,
    /// `4939Mi`, `1536`, `0`).
    pub fn binary_si(bytes: u64) -> String {
        const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        if bytes == 0 {
            return "0".into();
        }
        let (mut n, mut suffix) = (bytes, "");
        for s in SUFFIXES {
            if n % 1024 != 0 {
                break;
            }
            n /= 1024;
            suffix = s;
        }
        format!("{n}{suffix}")
    }

    /// The text this quantity was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True when the value is exactly zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// True when the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The value as an integer, rounded towards +∞ (Go `Quantity.Value()`;
    /// `0.5` → 1, `1500m` → 2). Used for CPU counts.
    ///
    /// # Errors
    /// [`QuantityRangeError::TooLarge`] when the value exceeds `i64`.
    pub fn value_ceil(&self) -> Result<i64, QuantityRangeError> {
        self.rounded(true)
    }

    /// The value as an integer, rounded towards −∞ (`2222222200m` → 2222222,
    /// the byte count KubeVirt's converter writes for fractional memory).
    ///
    /// # Errors
    /// [`QuantityRangeError::TooLarge`] when the value exceeds `i64`.
    pub fn value_floor(&self) -> Result<i64, QuantityRangeError> {
        self.rounded(false)
    }

    /// Non-negative byte count, rounded down (see [`Self::value_floor`]).
    ///
    /// # Errors
    /// [`QuantityRangeError::Negative`] below zero, `TooLarge` above `u64`.
    pub fn to_bytes(&self) -> Result<u64, QuantityRangeError> {
        if self.negative {
            return Err(QuantityRangeError::Negative(self.text.clone()));
        }
        let v = self.value_floor()?;
        u64::try_from(v).map_err(|_| QuantityRangeError::TooLarge(self.text.clone()))
    }

    /// The value in thousandths (`500m` → 500, `2` → 2000), rounded up.
    ///
    /// # Errors
    /// [`QuantityRangeError::TooLarge`] when the value exceeds `i64`.
    pub fn milli_value(&self) -> Result<i64, QuantityRangeError> {
        let mut q = self.clone();
        q.exp10 += 3;
        q.rounded(true)
    }

    fn rounded(&self, ceil: bool) -> Result<i64, QuantityRangeError> {
        let too_large = || QuantityRangeError::TooLarge(self.text.clone());
        if self.mantissa == 0 {
            return Ok(0);
        }
        // numerator / denominator, both exact in i128 while in range.
        let mut num: i128 = i128::try_from(self.mantissa).map_err(|_| too_large())?;
        let mut den: i128 = 1;
        let pow10 = |e: u32| -> Option<i128> { 10i128.checked_pow(e) };
        if self.exp10 >= 0 {
            let p = pow10(self.exp10.unsigned_abs()).ok_or_else(too_large)?;
            num = num.checked_mul(p).ok_or_else(too_large)?;
        } else {
            let e = self.exp10.unsigned_abs();
            // A value below 10^-38 rounds to 0 or 1 without needing the exact denominator.
            match pow10(e) {
                Some(p) => den = p,
                None => {
                    return Ok(match (ceil, self.negative) {
                        (true, false) => 1,
                        (false, true) => -1,
                        _ => 0,
                    })
                }
            }
        }
        num = num
            .checked_mul(1i128.checked_shl(self.exp2).ok_or_else(too_large)?)
            .ok_or_else(too_large)?;
        if self.negative {
            num = -num;
        }
        let q = num.div_euclid(den);
        let r = num.rem_euclid(den);
        let v = if ceil && r != 0 { q + 1 } else { q };
        i64::try_from(v).map_err(|_| too_large())
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    /// Accepts a string (`"128Mi"`) or a JSON/YAML number (`134217728`), as
    /// Kubernetes' own unmarshaller does.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity such as \"128Mi\" or 134217728")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                Quantity::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
                if !v.is_finite() {
                    return Err(E::custom(format!("{v} is not a quantity")));
                }
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(s: &str) -> u64 {
        Quantity::parse(s).unwrap().to_bytes().unwrap()
    }

    #[test]
    fn binary_si_prints_like_kubernetes() {
        for (n, text) in [
            (0, "0"),
            (1, "1"),
            (1023, "1023"),
            (1024, "1Ki"),
            (1536, "1536"),
            (5 << 30, "5Gi"),
            (4939 << 20, "4939Mi"),
            (1 << 60, "1Ei"),
            (1 << 62, "4Ei"),
        ] {
            assert_eq!(Quantity::binary_si(n), text);
            assert_eq!(bytes(&Quantity::binary_si(n)), n, "{text} round trip");
        }
        assert_eq!(Quantity::binary_si(u64::MAX), "18446744073709551615");
    }

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(bytes("128Mi"), 134_217_728);
        assert_eq!(bytes("1Gi"), 1 << 30);
        assert_eq!(bytes("2780Gi"), 2780 * (1 << 30));
        assert_eq!(bytes("64M"), 64_000_000);
        assert_eq!(bytes("3G"), 3_000_000_000);
        assert_eq!(bytes("1k"), 1000);
        assert_eq!(bytes("1Ki"), 1024);
        assert_eq!(bytes("1Ei"), 1 << 60);
        assert_eq!(bytes("451231"), 451_231);
        assert_eq!(bytes("1024M"), 1_024_000_000);
    }

    #[test]
    fn exponents_and_fractions() {
        assert_eq!(bytes("1e3"), 1000);
        assert_eq!(bytes("1E6"), 1_000_000);
        assert_eq!(bytes("12e+2"), 1200);
        assert_eq!(bytes("1.5Gi"), 1_610_612_736);
        assert_eq!(bytes("0.5Ki"), 512);
        assert_eq!(bytes(".5Ki"), 512);
        assert_eq!(bytes("5.Ki"), 5120);
        assert_eq!(bytes("+1Mi"), 1 << 20);
        assert_eq!(bytes("1500e-3"), 1);
        // KubeVirt's converter test: fractional bytes round down.
        assert_eq!(bytes("2222222200m"), 2_222_222);
    }

    #[test]
    fn rounding() {
        let q = Quantity::parse("1500m").unwrap();
        assert_eq!(q.value_ceil().unwrap(), 2);
        assert_eq!(q.value_floor().unwrap(), 1);
        assert_eq!(q.milli_value().unwrap(), 1500);
        assert_eq!(Quantity::parse("2").unwrap().milli_value().unwrap(), 2000);
        assert_eq!(Quantity::parse("100n").unwrap().value_ceil().unwrap(), 1);
        assert_eq!(Quantity::parse("-1500m").unwrap().value_ceil().unwrap(), -1);
        assert_eq!(
            Quantity::parse("-1500m").unwrap().value_floor().unwrap(),
            -2
        );
        assert_eq!(Quantity::parse("1e-100").unwrap().value_ceil().unwrap(), 1);
        assert_eq!(Quantity::parse("1e-100").unwrap().value_floor().unwrap(), 0);
    }

    #[test]
    fn zero_and_sign() {
        assert!(Quantity::parse("0").unwrap().is_zero());
        assert!(Quantity::parse("0Mi").unwrap().is_zero());
        assert!(!Quantity::parse("-0").unwrap().is_negative());
        assert!(Quantity::parse("-45Gi").unwrap().is_negative());
        assert_eq!(
            Quantity::parse("-45Gi").unwrap().to_bytes(),
            Err(QuantityRangeError::Negative("-45Gi".into()))
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", " ", " 1Gi", "1Gi ", "12XB", "Mi", "1.2.3", "1e", "1e+", "1ee3", "1Mi3", "--1",
            "1 Mi", "1mi", "1KI", "0x10", "1e99999", "∞", "1,5",
        ] {
            let e = Quantity::parse(bad);
            assert!(e.is_err(), "{bad:?} must be rejected, got {e:?}");
        }
        let e = Quantity::parse("12XB").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#""12XB" is not a quantity: unknown suffix "XB""#
        );
    }

    #[test]
    fn overflow_is_an_error_not_a_panic() {
        let q = Quantity::parse("1e30").unwrap();
        assert!(matches!(q.to_bytes(), Err(QuantityRangeError::TooLarge(_))));
        let q = Quantity::parse("99999999999Ei").unwrap();
        assert!(matches!(
            q.value_ceil(),
            Err(QuantityRangeError::TooLarge(_))
        ));
        assert!(Quantity::parse(&"9".repeat(40)).is_err());
        // Many leading/trailing zeros are fine: they carry no precision.
        assert_eq!(
            bytes(&format!("{}1{}", "0".repeat(50), "0".repeat(3))),
            1000
        );
    }

    #[test]
    fn serde_accepts_strings_and_numbers() {
        let q: Quantity = serde_json::from_str("\"64Mi\"").unwrap();
        assert_eq!(q.to_bytes().unwrap(), 64 << 20);
        let q: Quantity = serde_json::from_str("1024").unwrap();
        assert_eq!(q.to_bytes().unwrap(), 1024);
        assert_eq!(serde_json::to_string(&q).unwrap(), "\"1024\"");
        assert!(serde_json::from_str::<Quantity>("true").is_err());
    }
}
