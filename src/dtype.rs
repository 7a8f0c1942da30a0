//! Tensor element types, numbered as torch's export schema numbers them (`ScalarType`).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a tensor. The discriminants are the export schema's `ScalarType` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "i64")]
#[repr(u8)]
pub enum DType {
    U8 = 1,
    I8 = 2,
    I16 = 3,
    I32 = 4,
    I64 = 5,
    F16 = 6,
    F32 = 7,
    F64 = 8,
    ComplexHalf = 9,
    Complex64 = 10,
    Complex128 = 11,
    Bool = 12,
    BF16 = 13,
    U16 = 28,
    F8E4M3FN = 29,
    F8E5M2 = 30,
    F8E4M3FNUZ = 31,
    F8E5M2FNUZ = 32,
    F8E8M0FNU = 33,
    U32 = 34,
    U64 = 35,
}

impl DType {
    pub const ALL: [DType; 21] = [
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::ComplexHalf,
        DType::Complex64,
        DType::Complex128,
        DType::Bool,
        DType::BF16,
        DType::U16,
        DType::F8E4M3FN,
        DType::F8E5M2,
        DType::F8E4M3FNUZ,
        DType::F8E5M2FNUZ,
        DType::F8E8M0FNU,
        DType::U32,
        DType::U64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        use DType::*;
        match self {
            U8 | I8 | Bool | F8E4M3FN | F8E5M2 | F8E4M3FNUZ | F8E5M2FNUZ | F8E8M0FNU => 1,
            I16 | F16 | BF16 | U16 => 2,
            I32 | F32 | U32 | ComplexHalf => 4,
            I64 | F64 | U64 | Complex64 => 8,
            Complex128 => 16,
        }
    }

    /// torch's name for the dtype (`torch.float32` prints as `float32`).
    pub fn name(self) -> &'static str {
        use DType::*;
        match self {
            U8 => "uint8",
            I8 => "int8",
            I16 => "int16",
            I32 => "int32",
            I64 => "int64",
            F16 => "float16",
            F32 => "float32",
            F64 => "float64",
            ComplexHalf => "complex32",
            Complex64 => "complex64",
            Complex128 => "complex128",
            Bool => "bool",
            BF16 => "bfloat16",
            U16 => "uint16",
            F8E4M3FN => "float8_e4m3fn",
            F8E5M2 => "float8_e5m2",
            F8E4M3FNUZ => "float8_e4m3fnuz",
            F8E5M2FNUZ => "float8_e5m2fnuz",
            F8E8M0FNU => "float8_e8m0fnu",
            U32 => "uint32",
            U64 => "uint64",
        }
    }

    /// Parse a torch dtype name (`float32`, `torch.float32`, `float`, `long`...).
    pub fn from_name(s: &str) -> Option<DType> {
        let s = s.strip_prefix("torch.").unwrap_or(s);
        let alias = match s {
            "float" => "float32",
            "double" => "float64",
            "half" => "float16",
            "long" => "int64",
            "int" => "int32",
            "short" => "int16",
            "cfloat" => "complex64",
            "cdouble" => "complex128",
            other => other,
        };
        DType::ALL.iter().copied().find(|d| d.name() == alias)
    }

    /// The torch.save storage class name (`FloatStorage`...) of this dtype.
    pub fn storage_class(self) -> &'static str {
        use DType::*;
        match self {
            U8 => "ByteStorage",
            I8 => "CharStorage",
            I16 => "ShortStorage",
            I32 => "IntStorage",
            I64 => "LongStorage",
            F16 => "HalfStorage",
            F32 => "FloatStorage",
            F64 => "DoubleStorage",
            ComplexHalf => "ComplexHalfStorage",
            Complex64 => "ComplexFloatStorage",
            Complex128 => "ComplexDoubleStorage",
            Bool => "BoolStorage",
            BF16 => "BFloat16Storage",
            U16 => "UInt16Storage",
            F8E4M3FN => "Float8_e4m3fnStorage",
            F8E5M2 => "Float8_e5m2Storage",
            F8E4M3FNUZ => "Float8_e4m3fnuzStorage",
            F8E5M2FNUZ => "Float8_e5m2fnuzStorage",
            F8E8M0FNU => "Float8_e8m0fnuStorage",
            U32 => "UInt32Storage",
            U64 => "UInt64Storage",
        }
    }

    pub fn from_storage_class(s: &str) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.storage_class() == s)
    }

    pub fn is_float(self) -> bool {
        use DType::*;
        matches!(
            self,
            F16 | F32 | F64 | BF16 | F8E4M3FN | F8E5M2 | F8E4M3FNUZ | F8E5M2FNUZ | F8E8M0FNU
        )
    }
    pub fn is_complex(self) -> bool {
        matches!(
            self,
            DType::ComplexHalf | DType::Complex64 | DType::Complex128
        )
    }
    pub fn is_int(self) -> bool {
        use DType::*;
        matches!(self, U8 | I8 | I16 | I32 | I64 | U16 | U32 | U64)
    }
}

impl TryFrom<i64> for DType {
    type Error = Error;
    fn try_from(v: i64) -> Result<Self> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| *d as i64 == v)
            .ok_or_else(|| Error::schema("model.json", format!("unknown ScalarType {v}")))
    }
}

impl From<DType> for i64 {
    fn from(d: DType) -> i64 {
        d as i64
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn roundtrip_names_and_codes() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(DType::try_from(d as i64).unwrap(), d);
            assert_eq!(DType::from_storage_class(d.storage_class()), Some(d));
        }
        assert!(DType::try_from(0).is_err());
        assert_eq!(DType::from_name("torch.float"), Some(DType::F32));
    }
}
