//! Complex elements of CPU tensors: `complex64` as a pair of f32, `complex128` as a pair of
//! f64, stored interleaved (re, im) as torch stores them. A complex tensor's sizes, strides
//! and offset count complex elements; its storage may be a complex [`Data`] variant or the
//! real one of the matching precision (a `view_as_complex` of a float tensor shares its
//! storage), and a real tensor may view a complex storage (`view_as_real`): [`Elem::slice`]
//! reinterprets either way (both are `repr(C)` pairs of the real type, so the cast is exact).
//!
//! Casting follows torch: real → complex gives (x, 0); complex → real keeps the real part;
//! complex → bool is `re != 0 || im != 0`. Ordering is only there for the [`Elem`] bound:
//! torch refuses to compare complex numbers, and the op table never sends a complex tensor
//! to a kernel that orders elements.

use super::elem::{Data, Elem};
use crate::dtype::DType;
use bytemuck::{Pod, Zeroable};

macro_rules! complex_type {
    ($name:ident, $f:ty, $v:ident, $real:ident, $dt:expr) => {
        #[doc = concat!("One complex number of ", stringify!($f), " parts.")]
        #[repr(C)]
        #[derive(Copy, Clone, Default, Debug, PartialEq, PartialOrd, Pod, Zeroable)]
        pub struct $name {
            pub re: $f,
            pub im: $f,
        }

        impl $name {
            pub const fn new(re: $f, im: $f) -> Self {
                $name { re, im }
            }
        }

        impl Elem for $name {
            const DTYPE: DType = $dt;
            #[inline]
            fn to_f64(self) -> f64 {
                self.re as f64
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                $name::new(v as $f, 0.0)
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self.re as i64
            }
            #[inline]
            fn from_i64(v: i64) -> Self {
                $name::new(v as $f, 0.0)
            }
            #[inline]
            fn to_bool(self) -> bool {
                self.re != 0.0 || self.im != 0.0
            }
            #[inline]
            fn from_bool(b: bool) -> Self {
                $name::new(b as u8 as $f, 0.0)
            }
            #[inline]
            fn to_c128(self) -> C128 {
                C128::new(self.re as f64, self.im as f64)
            }
            #[inline]
            fn from_c128(v: C128) -> Self {
                $name::new(v.re as $f, v.im as $f)
            }
            fn slice(d: &Data) -> Option<&[Self]> {
                match d {
                    Data::$v(v) => Some(v),
                    // A complex view of real storage: whole pairs only.
                    Data::$real(v) => Some(bytemuck::cast_slice(&v[..v.len() / 2 * 2])),
                    _ => None,
                }
            }
            fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
                match d {
                    Data::$v(v) => Some(v),
                    Data::$real(v) => {
                        let n = v.len() / 2 * 2;
                        Some(bytemuck::cast_slice_mut(&mut v[..n]))
                    }
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> Data {
                Data::$v(v)
            }
        }
    };
}

complex_type!(C64, f32, C64, F32, DType::Complex64);
complex_type!(C128, f64, C128, F64, DType::Complex128);

/// Complex arithmetic in f64 (every complex kernel computes in [`C128`] and rounds once).
impl std::ops::Add for C128 {
    type Output = C128;
    #[inline]
    fn add(self, o: C128) -> C128 {
        C128::new(self.re + o.re, self.im + o.im)
    }
}

impl std::ops::Sub for C128 {
    type Output = C128;
    #[inline]
    fn sub(self, o: C128) -> C128 {
        C128::new(self.re - o.re, self.im - o.im)
    }
}

impl std::ops::Mul for C128 {
    type Output = C128;
    #[inline]
    fn mul(self, o: C128) -> C128 {
        C128::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

impl std::ops::Div for C128 {
    type Output = C128;
    /// Smith's division (as C99's and torch's `c10::complex`: no overflow for large parts).
    #[inline]
    fn div(self, o: C128) -> C128 {
        let (a, b, c, d) = (self.re, self.im, o.re, o.im);
        if c.abs() >= d.abs() {
            if c == 0.0 && d == 0.0 {
                return C128::new(a / c.abs(), b / d.abs());
            }
            let r = d / c;
            let den = c + d * r;
            C128::new((a + b * r) / den, (b - a * r) / den)
        } else {
            let r = c / d;
            let den = c * r + d;
            C128::new((a * r + b) / den, (b * r - a) / den)
        }
    }
}

impl C128 {
    #[inline]
    pub fn scale(self, s: f64) -> C128 {
        C128::new(self.re * s, self.im * s)
    }
    #[inline]
    pub fn conj(self) -> C128 {
        C128::new(self.re, -self.im)
    }
    #[inline]
    pub fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }
    #[inline]
    pub fn arg(self) -> f64 {
        self.im.atan2(self.re)
    }
    #[inline]
    pub fn exp(self) -> C128 {
        let e = self.re.exp();
        if self.im == 0.0 {
            return C128::new(e, self.im);
        }
        C128::new(e * self.im.cos(), e * self.im.sin())
    }
    /// `r * e^(i theta)`.
    #[inline]
    pub fn polar(r: f64, theta: f64) -> C128 {
        C128::new(r * theta.cos(), r * theta.sin())
    }
}

/// Whether `dtype` is one the CPU stores (complex32 is not).
pub fn is_cpu_complex(dtype: DType) -> bool {
    matches!(dtype, DType::Complex64 | DType::Complex128)
}

/// The real dtype of a complex dtype's parts (complex64 → float32), or `dtype` itself.
pub fn real_dtype(dtype: DType) -> DType {
    match dtype {
        DType::Complex64 => DType::F32,
        DType::Complex128 => DType::F64,
        DType::ComplexHalf => DType::F16,
        d => d,
    }
}

/// The complex dtype whose parts are `dtype` (float32 → complex64; float64 → complex128;
/// other real dtypes → complex64, as torch's default complex dtype), or `dtype` itself.
pub fn complex_dtype(dtype: DType) -> DType {
    match dtype {
        DType::F64 | DType::Complex128 => DType::Complex128,
        DType::F16 | DType::ComplexHalf => DType::ComplexHalf,
        _ => DType::Complex64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_between_real_and_complex_storage() {
        let d = Data::F32(vec![1.0, 2.0, 3.0, 4.0]);
        let c = C64::slice(&d).unwrap();
        assert_eq!(c, &[C64::new(1.0, 2.0), C64::new(3.0, 4.0)]);
        let d = Data::C128(vec![C128::new(5.0, 6.0)]);
        assert_eq!(f64::slice(&d).unwrap(), &[5.0, 6.0]);
    }

    #[test]
    fn arithmetic() {
        let a = C128::new(1.0, 2.0);
        let b = C128::new(3.0, -1.0);
        assert_eq!(a * b, C128::new(5.0, 5.0));
        let q = a / b;
        assert!((q.re - 0.1).abs() < 1e-15 && (q.im - 0.7).abs() < 1e-15);
        assert_eq!(crate::cpu::cast::<f32, C64>(2.5), C64::new(2.5, 0.0));
        assert_eq!(crate::cpu::cast::<C64, f64>(C64::new(2.5, 1.0)), 2.5);
        assert_eq!(
            crate::cpu::cast::<C64, C128>(C64::new(2.5, 1.0)),
            C128::new(2.5, 1.0)
        );
        assert!(crate::cpu::cast::<C64, bool>(C64::new(0.0, 1.0)));
    }
}
