//! Float math shared by the elementwise and activation kernels: one trait over `f32`/`f64`
//! so each op is written once and monomorphized (torch computes f32 in f32, f64 in f64, and
//! f16/bf16 in f32), plus `erf`/`erfc`/`erfinv`, which Rust's std does not have.
// Polynomial and rational coefficients are quoted exactly as published.
#![allow(clippy::excessive_precision)]

use super::fast;
use crate::cpu::Elem;
use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

/// A float compute type (`f32` or `f64`).
pub(crate) trait Real:
    Elem
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + Rem<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const NAN: Self;
    /// A constant converted to this type.
    fn c(v: f64) -> Self;
    fn exp(self) -> Self;
    fn exp2(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn log2(self) -> Self;
    fn log10(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sqrt(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn atan2(self, o: Self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn tanh(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_ties_even(self) -> Self;
    fn trunc(self) -> Self;
    fn abs(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn hypot(self, o: Self) -> Self;
    fn copysign(self, s: Self) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn erf(self) -> Self;
    fn erfc(self) -> Self;
    fn erfinv(self) -> Self;
    /// `max`/`min` as C++ `std::max`/`std::min` (`a < b ? b : a`): the first operand wins
    /// on NaN comparisons, which is what torch's scalar clamps do.
    #[inline]
    fn std_max(self, b: Self) -> Self {
        if self < b {
            b
        } else {
            self
        }
    }
    #[inline]
    fn std_min(self, b: Self) -> Self {
        if b < self {
            b
        } else {
            self
        }
    }
}

macro_rules! forward {
    ($t:ty; $($f:ident),*) => {
        $(#[inline] fn $f(self) -> Self { <$t>::$f(self) })*
    };
}

macro_rules! real_impl {
    ($t:ty, exp: $exp:expr, tanh: $tanh:expr, erf: $erf:expr) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NAN: Self = <$t>::NAN;
            #[inline]
            fn c(v: f64) -> Self {
                v as $t
            }
            forward!($t; exp2, exp_m1, ln, log2, log10, ln_1p, sqrt, sin, cos, tan, asin, acos, atan,
                sinh, cosh, asinh, acosh, atanh, floor, ceil, round_ties_even, trunc, abs);
            #[inline]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline]
            fn atan2(self, o: Self) -> Self {
                <$t>::atan2(self, o)
            }
            #[inline]
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            #[inline]
            fn hypot(self, o: Self) -> Self {
                <$t>::hypot(self, o)
            }
            #[inline]
            fn copysign(self, s: Self) -> Self {
                <$t>::copysign(self, s)
            }
            #[inline]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline]
            fn is_infinite(self) -> bool {
                <$t>::is_infinite(self)
            }
            #[inline]
            fn erf(self) -> Self {
                $erf(self)
            }
            // erfc/erfinv: computed in f64 (correctly rounded for f32 in practice).
            #[inline]
            fn erfc(self) -> Self {
                erfc(self as f64) as $t
            }
            #[inline]
            fn erfinv(self) -> Self {
                erfinv(self as f64) as $t
            }
        }
    };
}

// f32 uses the vectorizable forms of `fast` (as torch's f32 kernels use SLEEF's); f64 uses
// libm and fdlibm's erf.
real_impl!(f32, exp: fast::exp_f32, tanh: fast::tanh_f32, erf: fast::erf_f32);
real_impl!(f64, exp: f64::exp, tanh: f64::tanh, erf: erf);

// erf/erfc: FreeBSD's s_erf.c (Copyright (C) 1993 by Sun Microsystems, Inc.; "Permission to
// use, copy, modify, and distribute this software is freely granted, provided that this
// notice is preserved."), as ported by the Rust `libm` crate. Error below 1 ulp.
const ERX: f64 = 8.45062911510467529297e-01;
const EFX8: f64 = 1.02703333676410069053e+00;
const PP: [f64; 5] = [
    1.28379167095512558561e-01,
    -3.25042107247001499370e-01,
    -2.84817495755985104766e-02,
    -5.77027029648944159157e-03,
    -2.37630166566501626084e-05,
];
const QQ: [f64; 5] = [
    3.97917223959155352819e-01,
    6.50222499887672944485e-02,
    5.08130628187576562776e-03,
    1.32494738004321644526e-04,
    -3.96022827877536812320e-06,
];
const PA: [f64; 7] = [
    -2.36211856075265944077e-03,
    4.14856118683748331666e-01,
    -3.72207876035701323847e-01,
    3.18346619901161753674e-01,
    -1.10894694282396677476e-01,
    3.54783043256182359371e-02,
    -2.16637559486879084300e-03,
];
const QA: [f64; 6] = [
    1.06420880400844228286e-01,
    5.40397917702171048937e-01,
    7.18286544141962662868e-02,
    1.26171219808761642112e-01,
    1.36370839120290507362e-02,
    1.19844998467991074170e-02,
];
const RA: [f64; 8] = [
    -9.86494403484714822705e-03,
    -6.93858572707181764372e-01,
    -1.05586262253232909814e+01,
    -6.23753324503260060396e+01,
    -1.62396669462573470355e+02,
    -1.84605092906711035994e+02,
    -8.12874355063065934246e+01,
    -9.81432934416914548592e+00,
];
const SA: [f64; 8] = [
    1.96512716674392571292e+01,
    1.37657754143519042600e+02,
    4.34565877475229228821e+02,
    6.45387271733267880336e+02,
    4.29008140027567833386e+02,
    1.08635005541779435134e+02,
    6.57024977031928170135e+00,
    -6.04244152148580987438e-02,
];
const RB: [f64; 7] = [
    -9.86494292470009928597e-03,
    -7.99283237680523006574e-01,
    -1.77579549177547519889e+01,
    -1.60636384855821916062e+02,
    -6.37566443368389627722e+02,
    -1.02509513161107724954e+03,
    -4.83519191608651397019e+02,
];
const SB: [f64; 7] = [
    3.03380607434824582924e+01,
    3.25792512996573918826e+02,
    1.53672958608443695994e+03,
    3.19985821950859553908e+03,
    2.55305040643316442583e+03,
    4.74528541206955367215e+02,
    -2.24409524465858183362e+01,
];

/// Horner evaluation `c[0] + z*(c[1] + z*(...))`.
#[inline]
fn poly(c: &[f64], z: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &k| acc * z + k)
}

fn high_word(x: f64) -> u32 {
    (x.to_bits() >> 32) as u32
}

fn erfc1(x: f64) -> f64 {
    let s = x.abs() - 1.0;
    let p = poly(&PA, s);
    let q = 1.0 + s * poly(&QA, s);
    1.0 - ERX - p / q
}

fn erfc2(ix: u32, x: f64) -> f64 {
    if ix < 0x3ff40000 {
        return erfc1(x);
    }
    let x = x.abs();
    let s = 1.0 / (x * x);
    let (r, big_s) = if ix < 0x4006db6d {
        (poly(&RA, s), 1.0 + s * poly(&SA, s))
    } else {
        (poly(&RB, s), 1.0 + s * poly(&SB, s))
    };
    let z = f64::from_bits(x.to_bits() & 0xffff_ffff_0000_0000);
    (-z * z - 0.5625).exp() * ((z - x) * (z + x) + r / big_s).exp() / x
}

/// The error function (f64).
pub(crate) fn erf(x: f64) -> f64 {
    let hw = high_word(x);
    let sign = hw >> 31 != 0;
    let ix = hw & 0x7fffffff;
    if ix >= 0x7ff00000 {
        return 1.0 - 2.0 * (sign as u8 as f64) + 1.0 / x;
    }
    if ix < 0x3feb0000 {
        if ix < 0x3e300000 {
            return 0.125 * (8.0 * x + EFX8 * x);
        }
        let z = x * x;
        let y = poly(&PP, z) / (1.0 + z * poly(&QQ, z));
        return x + x * y;
    }
    let y = if ix < 0x40180000 {
        1.0 - erfc2(ix, x)
    } else {
        1.0 - f64::from_bits(0x0010000000000000)
    };
    if sign {
        -y
    } else {
        y
    }
}

/// The complementary error function (f64), accurate for large `x` where `1 - erf` is not.
pub(crate) fn erfc(x: f64) -> f64 {
    let hw = high_word(x);
    let sign = hw >> 31 != 0;
    let ix = hw & 0x7fffffff;
    if ix >= 0x7ff00000 {
        return 2.0 * (sign as u8 as f64) + 1.0 / x;
    }
    if ix < 0x3feb0000 {
        if ix < 0x3c700000 {
            return 1.0 - x;
        }
        let z = x * x;
        let y = poly(&PP, z) / (1.0 + z * poly(&QQ, z));
        if sign || ix < 0x3fd00000 {
            return 1.0 - (x + x * y);
        }
        return 0.5 - (x - 0.5 + x * y);
    }
    if ix < 0x403c0000 {
        return if sign {
            2.0 - erfc2(ix, x)
        } else {
            erfc2(ix, x)
        };
    }
    let tiny = f64::from_bits(0x0010000000000000);
    if sign {
        2.0 - tiny
    } else {
        tiny * tiny
    }
}

/// The inverse error function: torch's `calc_erfinv` (a rational first guess refined by two
/// Newton steps).
pub(crate) fn erfinv(y: f64) -> f64 {
    const A: [f64; 4] = [0.886226899, -1.645349621, 0.914624893, -0.140543331];
    const B: [f64; 4] = [-2.118377725, 1.442710462, -0.329097515, 0.012229801];
    const C: [f64; 4] = [-1.970840454, -1.624906493, 3.429567803, 1.641345311];
    const D: [f64; 2] = [3.543889200, 1.637067800];
    let ya = y.abs();
    if ya > 1.0 || y.is_nan() {
        return f64::NAN;
    }
    if ya == 1.0 {
        return f64::INFINITY.copysign(y);
    }
    let mut x = if ya <= 0.7 {
        let z = y * y;
        let num = ((A[3] * z + A[2]) * z + A[1]) * z + A[0];
        let dem = (((B[3] * z + B[2]) * z + B[1]) * z + B[0]) * z + 1.0;
        y * num / dem
    } else {
        let z = (-((1.0 - ya) / 2.0).ln()).sqrt();
        let num = ((C[3] * z + C[2]) * z + C[1]) * z + C[0];
        let dem = (D[1] * z + D[0]) * z + 1.0;
        num.copysign(y) / dem
    };
    let k = 2.0 / std::f64::consts::PI.sqrt();
    for _ in 0..2 {
        x -= (erf(x) - y) / (k * (-x * x).exp());
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_values() {
        // Reference values from mpmath.
        let cases = [
            (0.0, 0.0),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (-2.0, -0.9953222650189527),
            (3.5, 0.9999992569016276),
        ];
        for (x, want) in cases {
            assert!((erf(x) - want).abs() < 1e-15, "erf({x}) = {}", erf(x));
        }
        assert!((erfc(5.0) - 1.5374597944280349e-12).abs() < 1e-25);
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(f64::INFINITY), 1.0);
    }

    #[test]
    fn erfinv_inverts_erf() {
        for &y in &[-0.999, -0.5, -0.1, 0.0, 0.3, 0.7, 0.95] {
            assert!((erf(erfinv(y)) - y).abs() < 1e-12, "erfinv({y})");
        }
        assert_eq!(erfinv(1.0), f64::INFINITY);
        assert!(erfinv(1.5).is_nan());
    }
}
