//! Branch-free f32 `exp`, `tanh` and `erf` that LLVM vectorizes (the libm calls it would use
//! otherwise are scalar). Hot activations (sigmoid, silu, gelu, elu, softplus) spend their
//! time here. `exp`/`tanh` are Cephes' single-precision algorithms (about 1 ulp); `erf` is
//! the Abramowitz–Stegun 7.1.26 form that torch's own vectorized f32 `erf` uses (error
//! about 1e-7), with a Taylor series near 0 for relative accuracy there.
// Polynomial and rational coefficients are quoted exactly as published.
#![allow(clippy::excessive_precision)]

const LOG2E: f32 = std::f32::consts::LOG2_E;
// ln 2 split so that `n * LN2_HI` is exact (Cephes C1, C2).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding and subtracting it rounds to the nearest integer without `roundf`.
const ROUND: f32 = 12_582_912.0;

/// 2^k for k in [-126, 127].
#[inline(always)]
fn pow2i(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `(e, k)` with exp(x) = e * 2^k, e in [0.7, 1.5], for x clamped to [-104, 89] (beyond
/// those the result is 0 or inf): Cephes' range reduction and polynomial.
#[inline(always)]
fn exp_parts(x: f32) -> (f32, i32) {
    let ([e], [k]) = exp_parts_block([x]);
    (e, k)
}

/// [`exp_parts`] of `W` values, one step for all of them before the next: LLVM keeps that
/// order, so a vector loop over blocks runs `W / lanes` independent dependency chains side by
/// side (one chain of ~25 dependent operations per vector leaves the FP units idle waiting
/// on latency).
#[inline(always)]
fn exp_parts_block<const W: usize>(x: [f32; W]) -> ([f32; W], [i32; W]) {
    let (mut n, mut k, mut r) = ([0f32; W], [0i32; W], [0f32; W]);
    for i in 0..W {
        // NaN passes through `clamp` (and gives a NaN `e`).
        let v = x[i].clamp(-104.0, 89.0);
        let t = v * LOG2E + ROUND;
        n[i] = t - ROUND;
        k[i] = t.to_bits() as i32 - ROUND.to_bits() as i32;
        r[i] = v - n[i] * LN2_HI - n[i] * LN2_LO;
    }
    let mut p = [1.987_569_1e-4_f32; W];
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        5.000_000_1e-1,
    ] {
        for i in 0..W {
            p[i] = p[i] * r[i] + c;
        }
    }
    for i in 0..W {
        p[i] = p[i] * r[i] * r[i] + r[i] + 1.0;
    }
    (p, k)
}

/// e * 2^k in two steps, so that subnormal results and 2^128 (x near 88.7) stay in range.
#[inline(always)]
fn scale2(e: f32, k: i32) -> f32 {
    let k1 = k / 2;
    e * pow2i(k1) * pow2i(k - k1)
}

#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    let (e, k) = exp_parts(x);
    scale2(e, k)
}

/// [`exp_f32`]'s values (bit for bit) without subnormal arithmetic: the result's exponent is
/// added as an integer, and a subnormal result is rounded from a normal float by integer
/// means. A float operation that produces a subnormal or underflows costs a microcode assist
/// on many x86 cores (about 3x the whole `exp` on Zen), and softmax over masked scores (-inf,
/// or the dtype's minimum as transformers' masks hold) produces one per masked element.
#[inline(always)]
pub(crate) fn exp_f32_no_assist(x: f32) -> f32 {
    let (e, k) = exp_parts(x);
    scale_no_assist(x, e, k)
}

/// e * 2^k (from [`exp_parts`] of `x`) as [`scale2`] gives it, by integer means.
#[inline(always)]
fn scale_no_assist(x: f32, e: f32, k: i32) -> f32 {
    // e's biased exponent plus k is the result's.
    let eb = e.to_bits() as i32;
    let biased = (eb >> 23) + k;
    let normal = f32::from_bits((eb + (k << 23)) as u32);
    // Subnormal: the result is q * 2^-149 with q = e * 2^(k + 149) < 2^23 rounded to the
    // nearest (even) integer, which adding 2^23 does; q's bits are the result's.
    let f = e * pow2i((k + 149).clamp(-1, 30));
    let sub = f32::from_bits((f + 8_388_608.0).to_bits() - 0x4B00_0000);
    let res = if biased >= 1 { normal } else { sub };
    let res = if biased >= 255 { f32::INFINITY } else { res };
    if x.is_nan() {
        x
    } else {
        res
    }
}

/// `x = exp(x - m)` over a slice, with [`exp_f32`]'s values. When every `x - m` keeps the
/// result normal, one plain loop of `exp_f32`; otherwise (masked scores) by blocks of 16,
/// each block's steps taken for all its values at once ([`exp_parts_block`]), and scaled
/// by [`scale_no_assist`] where the block's smallest value could give a subnormal result.
#[inline(always)]
pub(crate) fn exp_shifted_f32(x: &mut [f32], m: f32) {
    const W: usize = 16;
    let lo = x.iter().fold(f32::INFINITY, |a, &v| a.min(v));
    if lo - m >= -87.0 {
        x.iter_mut().for_each(|v| *v = exp_f32(*v - m));
        return;
    }
    let mut blocks = x.chunks_exact_mut(W);
    for b in &mut blocks {
        let lo = b.iter().fold(f32::INFINITY, |a, &v| a.min(v));
        let v: [f32; W] = std::array::from_fn(|i| b[i] - m);
        let (e, k) = exp_parts_block(v);
        if lo - m >= -87.0 {
            for i in 0..W {
                b[i] = scale2(e[i], k[i]);
            }
        } else {
            for i in 0..W {
                b[i] = scale_no_assist(v[i], e[i], k[i]);
            }
        }
    }
    blocks
        .into_remainder()
        .iter_mut()
        .for_each(|v| *v = exp_f32_no_assist(*v - m));
}

#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    // Small |x|: odd polynomial (no cancellation); large: 1 - 2 / (e^2|x| + 1).
    let z = x * x;
    let mut p = -5.704_988_7e-3_f32;
    p = p * z + 2.063_908_9e-2;
    p = p * z - 5.373_971_6e-2;
    p = p * z + 1.333_144_2e-1;
    p = p * z - 3.333_328_2e-1;
    let small = x + x * z * p;
    let big = (1.0 - 2.0 / (exp_f32(2.0 * a) + 1.0)).copysign(x);
    if a < 0.625 {
        small
    } else {
        big
    }
}

#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_7,
        -1.453_152,
        1.061_405_4,
    ];
    let a = x.abs();
    let t = 1.0 / (P * a + 1.0);
    let r = (((A[4] * t + A[3]) * t + A[2]) * t + A[1]) * t + A[0];
    let big = (1.0 - r * t * exp_f32(-x * x)).copysign(x);
    // Near 0 the form above loses relative accuracy (1 - 0.9...); the Taylor series to x^11
    // is exact to f32 there.
    let z = x * x;
    let mut q = -1.0f32 / 1320.0;
    q = q * z + 1.0 / 216.0;
    q = q * z - 1.0 / 42.0;
    q = q * z + 1.0 / 10.0;
    q = q * z - 1.0 / 3.0;
    let small = std::f32::consts::FRAC_2_SQRT_PI * (x + x * z * q);
    if a < 0.5 {
        small
    } else {
        big
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> f32 {
        ((a - b) / b).abs() / f32::EPSILON
    }

    #[test]
    fn exp_matches_libm() {
        let mut worst = 0.0f32;
        let mut x = -87.0f32;
        while x < 88.7 {
            let want = (x as f64).exp() as f32;
            worst = worst.max(ulps(exp_f32(x), want));
            x += 0.0137;
        }
        assert!(worst <= 2.0, "exp_f32 off by {worst} ulp");
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(100.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(0.0), 1.0);
        assert!(exp_f32(f32::NAN).is_nan());
        assert!(exp_f32(-100.0) > 0.0 && exp_f32(-100.0) < 1e-43);
    }

    /// The assist-free form is `exp_f32` bit for bit: normal, subnormal, overflow, NaN.
    #[test]
    fn no_assist_exp_is_exp_bit_for_bit() {
        let mut x = -110.0f32;
        while x < 90.0 {
            assert_eq!(
                exp_f32_no_assist(x).to_bits(),
                exp_f32(x).to_bits(),
                "x = {x}"
            );
            x += 0.000_731;
        }
        for x in [
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN,
            f32::MAX,
            -87.3365,
            88.72283,
            88.7229,
        ] {
            assert_eq!(
                exp_f32_no_assist(x).to_bits(),
                exp_f32(x).to_bits(),
                "x = {x}"
            );
        }
        assert!(exp_f32_no_assist(f32::NAN).is_nan());
        let mut v: Vec<f32> = (0..37)
            .map(|i| {
                if i % 3 == 0 {
                    f32::NEG_INFINITY
                } else {
                    i as f32 * -3.1
                }
            })
            .collect();
        let want: Vec<f32> = v.iter().map(|&x| exp_f32(x - 0.5)).collect();
        exp_shifted_f32(&mut v, 0.5);
        assert_eq!(v, want);
        // Blocks with and without masked values in one row.
        let mut v: Vec<f32> = (0..70)
            .map(|i| if i >= 40 { f32::MIN } else { i as f32 * -0.7 })
            .collect();
        let want: Vec<f32> = v.iter().map(|&x| exp_f32(x - 0.5)).collect();
        exp_shifted_f32(&mut v, 0.5);
        assert_eq!(v, want);
        let mut v: Vec<f32> = (0..37).map(|i| i as f32 * -0.7).collect();
        let want: Vec<f32> = v.iter().map(|&x| exp_f32(x - 0.5)).collect();
        exp_shifted_f32(&mut v, 0.5);
        assert_eq!(v, want);
    }

    #[test]
    fn tanh_matches_libm() {
        let mut worst = 0.0f32;
        let mut x = -12.0f32;
        while x < 12.0 {
            let want = (x as f64).tanh() as f32;
            if want != 0.0 {
                worst = worst.max(ulps(tanh_f32(x), want));
            }
            x += 0.00731;
        }
        assert!(worst <= 3.0, "tanh_f32 off by {worst} ulp");
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
        assert_eq!(tanh_f32(1e-30), 1e-30);
    }

    #[test]
    fn erf_close_to_exact() {
        let mut x = -5.0f32;
        while x < 5.0 {
            let want = super::super::real::erf(x as f64) as f32;
            assert!(
                (erf_f32(x) - want).abs() < 3e-7,
                "erf_f32({x}) = {}, want {want}",
                erf_f32(x)
            );
            x += 0.0113;
        }
        assert!(erf_f32(f32::NAN).is_nan());
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
    }
}
