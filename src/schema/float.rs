//! JSON numbers as torch writes them: floats may be "Infinity"/"-Infinity"/"NaN" strings,
//! and range bounds may be integers beyond i64 (treated as unbounded).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An f64 that round-trips torch's JSON encoding of non-finite values.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct JsonF64(pub f64);

impl Serialize for JsonF64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if v.is_nan() {
            s.serialize_str("NaN")
        } else if v == f64::INFINITY {
            s.serialize_str("Infinity")
        } else if v == f64::NEG_INFINITY {
            s.serialize_str("-Infinity")
        } else {
            s.serialize_f64(v)
        }
    }
}

impl<'de> Deserialize<'de> for JsonF64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(v) => Ok(JsonF64(v)),
            Raw::S(s) => match s.as_str() {
                "Infinity" | "inf" => Ok(JsonF64(f64::INFINITY)),
                "-Infinity" | "-inf" => Ok(JsonF64(f64::NEG_INFINITY)),
                "NaN" | "nan" => Ok(JsonF64(f64::NAN)),
                other => Err(serde::de::Error::custom(format!(
                    "'{other}' is not a float"
                ))),
            },
        }
    }
}

/// `Option<i64>` that accepts null and integers outside i64 (both mean "unbounded").
pub mod big_int {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(x) => s.serialize_i64(*x),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        let v = Option::<serde_json::Value>::deserialize(d)?;
        Ok(match v {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Number(n)) => n.as_i64(),
            Some(other) => {
                return Err(serde::de::Error::custom(format!(
                    "range bound {other} is not an integer"
                )))
            }
        })
    }
}
