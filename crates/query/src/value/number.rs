//! Numbers: 64-bit integers where a value is whole and fits, floats otherwise, as Couchbase keeps them.

use std::cmp::Ordering;

/// A JSON number.
#[derive(Clone, Copy, Debug)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn to_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    /// The number as an integer when it has no fractional part and fits in 64 bits.
    pub fn to_exact_i64(self) -> Option<i64> {
        match self {
            Number::Int(i) => Some(i),
            Number::Float(f) if f.fract() == 0.0 && f >= -9.223_372_036_854_776e18 && f < 9.223_372_036_854_776e18 => {
                Some(f as i64)
            }
            Number::Float(_) => None,
        }
    }

    /// A float with an integral value becomes an integer (for results that Couchbase reports as whole numbers).
    pub fn normalized(self) -> Number {
        match self.to_exact_i64() {
            Some(i) if matches!(self, Number::Float(_)) => Number::Int(i),
            _ => self,
        }
    }

    pub(crate) fn from_json(n: &serde_json::Number) -> Number {
        if let Some(i) = n.as_i64() {
            Number::Int(i)
        } else {
            Number::Float(n.as_f64().unwrap_or(f64::NAN))
        }
    }

    /// Numeric order: exact between integers, by value otherwise; NaN sorts below every other number.
    pub fn compare(self, other: Number) -> Ordering {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => a.cmp(&b),
            (a, b) => {
                let (x, y) = (a.to_f64(), b.to_f64());
                match (x.is_nan(), y.is_nan()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    // Neither is NaN, so partial_cmp is total here.
                    (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
                }
            }
        }
    }

    /// What equal numbers hash to, whatever their representation.
    pub(crate) fn hash_key(self) -> u64 {
        match self.to_exact_i64() {
            Some(i) => i as u64,
            None => self.to_f64().to_bits(),
        }
    }

    pub fn add(self, other: Number) -> Number {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => {
                a.checked_add(b).map_or(Number::Float(a as f64 + b as f64), Number::Int)
            }
            (a, b) => Number::Float(a.to_f64() + b.to_f64()),
        }
    }

    pub fn sub(self, other: Number) -> Number {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => {
                a.checked_sub(b).map_or(Number::Float(a as f64 - b as f64), Number::Int)
            }
            (a, b) => Number::Float(a.to_f64() - b.to_f64()),
        }
    }

    pub fn mul(self, other: Number) -> Number {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => {
                a.checked_mul(b).map_or(Number::Float(a as f64 * b as f64), Number::Int)
            }
            (a, b) => Number::Float(a.to_f64() * b.to_f64()),
        }
    }

    /// Division is always by value (`7 / 2` is 3.5); `None` when dividing by zero (SQL++ gives NULL).
    pub fn div(self, other: Number) -> Option<Number> {
        let d = other.to_f64();
        if d == 0.0 {
            return None;
        }
        Some(Number::Float(self.to_f64() / d))
    }

    /// Remainder, integral when both are integers; `None` for a zero divisor.
    pub fn rem(self, other: Number) -> Option<Number> {
        match (self, other) {
            (_, b) if b.to_f64() == 0.0 => None,
            (Number::Int(a), Number::Int(b)) => Some(a.checked_rem(b).map_or(Number::Int(0), Number::Int)),
            (a, b) => Some(Number::Float(a.to_f64() % b.to_f64())),
        }
    }

    pub fn neg(self) -> Number {
        match self {
            Number::Int(i) => i.checked_neg().map_or(Number::Float(-(i as f64)), Number::Int),
            Number::Float(f) => Number::Float(-f),
        }
    }

    /// The number as JSON text, written as Couchbase writes it: integers as they are, floats in plain decimal
    /// notation with the shortest digits that read back the same (Go's 'f' format, precision -1: `3`, `0.1`,
    /// `0.0000001`, never an exponent), and NaN and the infinities as the strings `"NaN"`, `"+Infinity"` and
    /// `"-Infinity"`.
    pub fn write(self, out: &mut Vec<u8>) {
        match self {
            Number::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
            Number::Float(f) if f.is_nan() => out.extend_from_slice(b"\"NaN\""),
            Number::Float(f) if f.is_infinite() => {
                out.extend_from_slice(if f > 0.0 { b"\"+Infinity\"" } else { b"\"-Infinity\"" })
            }
            Number::Float(f) => {
                // Display writes the shortest round-trip digits in plain decimal notation.
                let text = format!("{f}");
                out.extend_from_slice(if text == "-0" { b"0" } else { text.as_bytes() });
            }
        }
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = Vec::new();
        self.write(&mut out);
        f.write_str(&String::from_utf8_lossy(&out))
    }
}
