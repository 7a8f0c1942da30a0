//! Element types of CPU tensors and the conversions between them (torch's casting rules:
//! float→int truncates toward zero, anything→bool is `!= 0`).

use super::complex::{C128, C64};
use crate::dtype::DType;
use half::{bf16, f16};

/// Typed storage of a CPU tensor.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    I16(Vec<i16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
    /// complex64, interleaved (re, im) pairs of f32 (see [`super::complex`]).
    C64(Vec<C64>),
    /// complex128, pairs of f64.
    C128(Vec<C128>),
}

impl Data {
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::F16(_) => DType::F16,
            Data::BF16(_) => DType::BF16,
            Data::I64(_) => DType::I64,
            Data::I32(_) => DType::I32,
            Data::I16(_) => DType::I16,
            Data::I8(_) => DType::I8,
            Data::U8(_) => DType::U8,
            Data::Bool(_) => DType::Bool,
            Data::C64(_) => DType::Complex64,
            Data::C128(_) => DType::Complex128,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::F16(v) => v.len(),
            Data::BF16(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::I16(v) => v.len(),
            Data::I8(v) => v.len(),
            Data::U8(v) => v.len(),
            Data::Bool(v) => v.len(),
            Data::C64(v) => v.len(),
            Data::C128(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Zero-filled storage of `n` elements.
    pub fn zeros(dtype: DType, n: usize) -> Option<Data> {
        Some(match dtype {
            DType::F32 => Data::F32(vec![0.0; n]),
            DType::F64 => Data::F64(vec![0.0; n]),
            DType::F16 => Data::F16(vec![f16::ZERO; n]),
            DType::BF16 => Data::BF16(vec![bf16::ZERO; n]),
            DType::I64 => Data::I64(vec![0; n]),
            DType::I32 => Data::I32(vec![0; n]),
            DType::I16 => Data::I16(vec![0; n]),
            DType::I8 => Data::I8(vec![0; n]),
            DType::U8 => Data::U8(vec![0; n]),
            DType::Bool => Data::Bool(vec![false; n]),
            DType::Complex64 => Data::C64(vec![C64::default(); n]),
            DType::Complex128 => Data::C128(vec![C128::default(); n]),
            _ => return None,
        })
    }
    /// Decode little-endian bytes.
    pub fn from_le_bytes(dtype: DType, b: &[u8]) -> Option<Data> {
        macro_rules! dec {
            ($t:ty, $v:ident, $n:expr) => {
                Data::$v(
                    b.chunks_exact($n)
                        .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                        .collect(),
                )
            };
        }
        Some(match dtype {
            DType::F32 => dec!(f32, F32, 4),
            DType::F64 => dec!(f64, F64, 8),
            DType::F16 => dec!(f16, F16, 2),
            DType::BF16 => dec!(bf16, BF16, 2),
            DType::I64 => dec!(i64, I64, 8),
            DType::I32 => dec!(i32, I32, 4),
            DType::I16 => dec!(i16, I16, 2),
            DType::I8 => Data::I8(b.iter().map(|&x| x as i8).collect()),
            DType::U8 => Data::U8(b.to_vec()),
            DType::Bool => Data::Bool(b.iter().map(|&x| x != 0).collect()),
            DType::Complex64 => Data::C64(
                b.chunks_exact(8)
                    .map(|c| {
                        let part = |i: usize| f32::from_le_bytes(c[i..i + 4].try_into().unwrap());
                        C64::new(part(0), part(4))
                    })
                    .collect(),
            ),
            DType::Complex128 => Data::C128(
                b.chunks_exact(16)
                    .map(|c| {
                        let part = |i: usize| f64::from_le_bytes(c[i..i + 8].try_into().unwrap());
                        C128::new(part(0), part(8))
                    })
                    .collect(),
            ),
            _ => return None,
        })
    }
    /// Encode as little-endian bytes.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        macro_rules! enc {
            ($v:expr) => {
                $v.iter().flat_map(|x| x.to_le_bytes()).collect()
            };
        }
        match self {
            Data::F32(v) => enc!(v),
            Data::F64(v) => enc!(v),
            Data::F16(v) => enc!(v),
            Data::BF16(v) => enc!(v),
            Data::I64(v) => enc!(v),
            Data::I32(v) => enc!(v),
            Data::I16(v) => enc!(v),
            Data::I8(v) => v.iter().map(|&x| x as u8).collect(),
            Data::U8(v) => v.clone(),
            Data::Bool(v) => v.iter().map(|&x| x as u8).collect(),
            Data::C64(v) => v
                .iter()
                .flat_map(|x| [x.re.to_le_bytes(), x.im.to_le_bytes()])
                .flatten()
                .collect(),
            Data::C128(v) => v
                .iter()
                .flat_map(|x| [x.re.to_le_bytes(), x.im.to_le_bytes()])
                .flatten()
                .collect(),
        }
    }
}

/// A Rust element type of a CPU tensor.
pub trait Elem: Copy + Send + Sync + PartialOrd + Default + std::fmt::Debug + 'static {
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn to_f32(self) -> f32 {
        self.to_f64() as f32
    }
    fn from_f32(v: f32) -> Self {
        Self::from_f64(v as f64)
    }
    fn to_i64(self) -> i64;
    fn from_i64(v: i64) -> Self;
    fn to_bool(self) -> bool;
    fn from_bool(b: bool) -> Self;
    /// As a complex number (real types: imaginary part 0).
    #[inline]
    fn to_c128(self) -> C128 {
        C128::new(self.to_f64(), 0.0)
    }
    /// From a complex number (real types keep the real part, as torch's casts do).
    #[inline]
    fn from_c128(v: C128) -> Self {
        Self::from_f64(v.re)
    }
    fn slice(d: &Data) -> Option<&[Self]>;
    fn slice_mut(d: &mut Data) -> Option<&mut [Self]>;
    fn wrap(v: Vec<Self>) -> Data;
}

macro_rules! float_elem {
    ($t:ty, $v:ident, $dt:expr, $to:expr, $from:expr $(, $cv:ident)?) => {
        impl Elem for $t {
            const DTYPE: DType = $dt;
            #[inline]
            fn to_f64(self) -> f64 {
                #[allow(clippy::redundant_closure_call)]
                ($to)(self)
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                #[allow(clippy::redundant_closure_call)]
                ($from)(v)
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self.to_f64() as i64
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                Self::from_f64(v as f64)
            }
            #[inline]
            fn to_bool(self) -> bool {
                self.to_f64() != 0.0
            }
            #[inline]
            fn from_bool(b: bool) -> Self {
                Self::from_f64(b as u8 as f64)
            }
            fn slice(d: &Data) -> Option<&[Self]> {
                match d {
                    Data::$v(v) => Some(v),
                    // A real view of complex storage (`view_as_real`).
                    $(Data::$cv(v) => Some(bytemuck::cast_slice(v)),)?
                    _ => None,
                }
            }
            fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
                match d {
                    Data::$v(v) => Some(v),
                    $(Data::$cv(v) => Some(bytemuck::cast_slice_mut(v)),)?
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> Data {
                Data::$v(v)
            }
        }
    };
}

float_elem!(
    f32,
    F32,
    DType::F32,
    |x: f32| x as f64,
    |v: f64| v as f32,
    C64
);
float_elem!(f64, F64, DType::F64, |x: f64| x, |v: f64| v, C128);
float_elem!(f16, F16, DType::F16, |x: f16| x.to_f64(), f16::from_f64);
float_elem!(
    bf16,
    BF16,
    DType::BF16,
    |x: bf16| x.to_f64(),
    bf16::from_f64
);

macro_rules! int_elem {
    ($t:ty, $v:ident, $dt:expr) => {
        impl Elem for $t {
            const DTYPE: DType = $dt;
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                v as Self
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                v as Self
            }
            #[inline]
            fn to_bool(self) -> bool {
                self != 0
            }
            #[inline]
            fn from_bool(b: bool) -> Self {
                b as Self
            }
            fn slice(d: &Data) -> Option<&[Self]> {
                if let Data::$v(v) = d {
                    Some(v)
                } else {
                    None
                }
            }
            fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
                if let Data::$v(v) = d {
                    Some(v)
                } else {
                    None
                }
            }
            fn wrap(v: Vec<Self>) -> Data {
                Data::$v(v)
            }
        }
    };
}

int_elem!(i64, I64, DType::I64);
int_elem!(i32, I32, DType::I32);
int_elem!(i16, I16, DType::I16);
int_elem!(i8, I8, DType::I8);
int_elem!(u8, U8, DType::U8);

impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn to_bool(self) -> bool {
        self
    }
    fn from_bool(b: bool) -> Self {
        b
    }
    fn slice(d: &Data) -> Option<&[Self]> {
        if let Data::Bool(v) = d {
            Some(v)
        } else {
            None
        }
    }
    fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
        if let Data::Bool(v) = d {
            Some(v)
        } else {
            None
        }
    }
    fn wrap(v: Vec<Self>) -> Data {
        Data::Bool(v)
    }
}

/// Convert one element between types with torch's semantics.
#[inline]
pub fn cast<S: Elem, D: Elem>(x: S) -> D {
    if D::DTYPE == DType::Bool {
        D::from_bool(x.to_bool())
    } else if D::DTYPE.is_complex() || S::DTYPE.is_complex() {
        D::from_c128(x.to_c128())
    } else if D::DTYPE.is_float() {
        D::from_f64(x.to_f64())
    } else if S::DTYPE.is_float() {
        // float → int: truncate toward zero (as C casts do); out-of-range is UB in torch.
        D::from_i64(x.to_f64() as i64)
    } else {
        D::from_i64(x.to_i64())
    }
}

/// Run `$body` with `$T` bound to the Rust type of `$dtype` (the dtypes CPU tensors support;
/// complex ones included: the op table keeps complex tensors from kernels that compute).
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr, else $err:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::DType::Complex64 => {
                type $T = $crate::cpu::C64;
                $body
            }
            $crate::DType::Complex128 => {
                type $T = $crate::cpu::C128;
                $body
            }
            _ => $err,
        }
    };
}
