//! Special math (`torch.special` and its `aten` relatives): the gamma family (lgamma,
//! digamma, polygamma, mvlgamma, Hurwitz zeta, the incomplete gamma functions), Bessel and
//! Airy functions, the normal distribution's ndtr/ndtri/log_ndtr, erfcx, the orthogonal
//! polynomials, and float bit-level helpers (nextafter, copysign, ldexp, frexp).
//!
//! Every function follows PyTorch's own algorithm (`aten/src/ATen/native/Math.h`), computed
//! in f64: f64 tensors directly, f32/f16/bf16 (and integers, promoted to float32) from
//! their values widened to f64 and the result rounded to the tensor's dtype.

pub(crate) mod bessel;
pub(crate) mod gamma;
mod tables;

use super::engine::{float_dtype, map, output, promote, val, zip_map_shared, BinaryOp, Val};
use super::meta::{
    float_power as float_power_rule, inplace, promote as promote_rule, promote_float,
    two_outputs_frexp, unary_float,
};
use super::real::Real;
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use bessel as b;
use gamma as g;

/// `f` over a float tensor (integers promoted to float32), computed in f64.
fn unary_with(t: &Tensor, f: impl Fn(f64) -> f64 + Sync) -> Result<Tensor> {
    let d = float_dtype(t.dtype);
    if d == DType::F64 {
        return Ok(map::<f64, f64>(t, f));
    }
    let r = map::<f32, f32>(t, |x| f(x as f64) as f32);
    if r.dtype == d {
        Ok(r)
    } else {
        r.to_dtype(d)
    }
}

fn unary(ctx: &mut OpCtx, f: fn(f64) -> f64) -> Result<Vec<RValue>> {
    // The newer special functions name their argument `x`.
    let t = ctx.tensor(if ctx.has("self") { "self" } else { "x" })?;
    let r = unary_with(&t, f)?;
    output(ctx, &t, r)
}

/// Binary float math over two operands (tensors or numbers), broadcast and promoted as
/// torch does (integers to float32), computed in f64. `f32` operands pass through f32 first,
/// as torch casts both to the common dtype.
fn binary_with(
    ctx: &OpCtx,
    a: &str,
    b: &str,
    f: impl Fn(f64, f64) -> f64 + Sync,
) -> Result<(Val, Tensor)> {
    let (x, y) = (val(ctx, a)?, val(ctx, b)?);
    let d = float_dtype(promote(&[&x, &y]));
    let (xt, yt) = (x.tensor(), y.tensor());
    let r = if d == DType::F64 {
        zip_map_shared::<f64, f64>(ctx, &xt, &yt, f)?
    } else {
        let r = zip_map_shared::<f32, f32>(ctx, &xt, &yt, |p, q| f(p as f64, q as f64) as f32)?;
        if r.dtype == d {
            r
        } else {
            r.to_dtype(d)?
        }
    };
    Ok((x, r))
}

fn binary(ctx: &mut OpCtx, a: &str, b: &str, f: fn(f64, f64) -> f64) -> Result<Vec<RValue>> {
    let (x, r) = binary_with(ctx, a, b, f)?;
    match &x {
        Val::T(t) => output(ctx, t, r),
        Val::S(_) => Ok(vec![RValue::Tensor(r)]),
    }
}

/// torch's `static_cast<int64_t>(n)` of a float degree: NaN and out-of-range values give
/// `i64::MIN` as x86's conversion does (a negative degree: the polynomial is 0).
fn degree(n: f64) -> i64 {
    if n.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// The orthogonal polynomials `p(x, n)`: `x` and `n` tensors or numbers. Hermite's
/// degree limit is 128 for float32 and 512 for float64, as torch's.
fn polynomial(ctx: &mut OpCtx, f: fn(f64, i64, i64) -> f64) -> Result<Vec<RValue>> {
    let (x, y) = (val(ctx, "x")?, val(ctx, "n")?);
    let d = float_dtype(promote(&[&x, &y]));
    let limit = if d == DType::F64 { 512 } else { 128 };
    let (_, r) = binary_with(ctx, "x", "n", move |x, n| {
        let n = if n.is_infinite() { -1 } else { degree(n) };
        f(x, n, limit)
    })?;
    Ok(vec![RValue::Tensor(r)])
}

macro_rules! unary_ops {
    ($($f:expr => [$($name:literal),*];)*) => {
        fn register_unary(r: &mut OpTable) {
            $($(
                r.define_op(concat!("aten.", $name), |ctx| unary(ctx, $f), unary_float);
            )*)*
        }
    };
}

unary_ops! {
    g::lgamma => ["lgamma", "lgamma_", "special_gammaln"];
    g::digamma => ["digamma", "digamma_", "special_digamma", "special_psi"];
    g::i0 => ["i0", "i0_", "special_i0"];
    g::i0e => ["special_i0e"];
    g::i1 => ["special_i1"];
    g::i1e => ["special_i1e"];
    g::ndtri => ["special_ndtri"];
    g::ndtr => ["special_ndtr"];
    g::log_ndtr => ["special_log_ndtr"];
    g::erfcx => ["special_erfcx"];
    entr => ["special_entr"];
    b::airy_ai_forward => ["special_airy_ai"];
    b::bessel_j0_forward => ["special_bessel_j0"];
    b::bessel_j1_forward => ["special_bessel_j1"];
    b::bessel_y0_forward => ["special_bessel_y0"];
    b::bessel_y1_forward => ["special_bessel_y1"];
    b::modified_bessel_i0_forward => ["special_modified_bessel_i0"];
    b::modified_bessel_i1_forward => ["special_modified_bessel_i1"];
    b::modified_bessel_k0_forward => ["special_modified_bessel_k0"];
    b::modified_bessel_k1_forward => ["special_modified_bessel_k1"];
    b::scaled_modified_bessel_k0_forward => ["special_scaled_modified_bessel_k0"];
    b::scaled_modified_bessel_k1_forward => ["special_scaled_modified_bessel_k1"];
    b::spherical_bessel_j0_forward => ["special_spherical_bessel_j0"];
}

/// `-x ln x` (0 at 0, -inf below).
fn entr(x: f64) -> f64 {
    if x.is_nan() {
        x
    } else if x > 0.0 {
        -x * x.ln()
    } else if x == 0.0 {
        0.0
    } else {
        f64::NEG_INFINITY
    }
}

fn xlog1py(x: f64, y: f64) -> f64 {
    if y.is_nan() {
        f64::NAN
    } else if x == 0.0 {
        0.0
    } else {
        x * y.ln_1p()
    }
}

fn logaddexp2(a: f64, b: f64) -> f64 {
    if a.is_infinite() && a == b {
        a
    } else {
        let m = if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.std_max(b)
        };
        m + (-(a - b).abs()).exp2().ln_1p() / std::f64::consts::LN_2
    }
}

macro_rules! poly_ops {
    ($($name:literal => $f:expr;)*) => {
        fn register_polynomials(r: &mut OpTable) {
            $(
                r.define_op(concat!("aten.", $name), |ctx| polynomial(ctx, $f), promote_float);
            )*
        }
    };
}

poly_ops! {
    "special_chebyshev_polynomial_t" => |x, n, _| b::chebyshev_polynomial_t_forward(x, n);
    "special_chebyshev_polynomial_u" => |x, n, _| b::chebyshev_polynomial_u_forward(x, n);
    "special_chebyshev_polynomial_v" => |x, n, _| b::chebyshev_polynomial_v_forward(x, n);
    "special_chebyshev_polynomial_w" => |x, n, _| b::chebyshev_polynomial_w_forward(x, n);
    "special_shifted_chebyshev_polynomial_t" => |x, n, _| b::shifted_chebyshev_polynomial_t_forward(x, n);
    "special_shifted_chebyshev_polynomial_u" => |x, n, _| b::shifted_chebyshev_polynomial_u_forward(x, n);
    "special_shifted_chebyshev_polynomial_v" => |x, n, _| b::shifted_chebyshev_polynomial_v_forward(x, n);
    "special_shifted_chebyshev_polynomial_w" => |x, n, _| b::shifted_chebyshev_polynomial_w_forward(x, n);
    "special_hermite_polynomial_h" => b::hermite_polynomial_h_forward;
    "special_hermite_polynomial_he" => b::hermite_polynomial_he_forward;
    "special_laguerre_polynomial_l" => |x, n, _| b::laguerre_polynomial_l_forward(x, n);
    "special_legendre_polynomial_p" => |x, n, _| b::legendre_polynomial_p_forward(x, n);
}

pub(crate) fn register(r: &mut OpTable) {
    register_unary(r);
    register_polynomials(r);
    for op in ["polygamma", "polygamma_", "special_polygamma"] {
        r.define_op(&format!("aten.{op}"), polygamma, super::meta::polygamma);
    }
    for op in ["mvlgamma", "mvlgamma_", "special_multigammaln"] {
        r.define_op(&format!("aten.{op}"), mvlgamma, unary_float);
    }
    r.define_op(
        "aten.special_zeta",
        |ctx| binary(ctx, "self", "other", g::zeta),
        promote_float,
    );
    for op in ["igamma", "igamma_", "special_gammainc"] {
        r.define_op(
            &format!("aten.{op}"),
            |ctx| float_only_binary(ctx, g::igamma),
            promote_float,
        );
    }
    for op in ["igammac", "igammac_", "special_gammaincc"] {
        r.define_op(
            &format!("aten.{op}"),
            |ctx| float_only_binary(ctx, g::igammac),
            promote_float,
        );
    }
    r.define_op(
        "aten.special_xlog1py",
        |ctx| binary(ctx, "self", "other", xlog1py),
        promote_float,
    );
    r.define_op(
        "aten.logaddexp2",
        |ctx| binary(ctx, "self", "other", logaddexp2),
        promote_float,
    );
    for op in ["copysign", "copysign_"] {
        let rule = if op.ends_with('_') {
            inplace
        } else {
            promote_float
        };
        r.define_op(
            &format!("aten.{op}"),
            |ctx| binary(ctx, "self", "other", f64::copysign),
            rule,
        );
    }
    for op in ["ldexp", "ldexp_"] {
        let rule = if op.ends_with('_') {
            inplace
        } else {
            promote_float
        };
        r.define_op(&format!("aten.{op}"), ldexp, rule);
    }
    for op in ["nextafter", "nextafter_"] {
        let rule = if op.ends_with('_') {
            inplace
        } else {
            promote_rule
        };
        r.define_op(&format!("aten.{op}"), nextafter, rule);
    }
    for op in ["heaviside", "heaviside_"] {
        let rule = if op.ends_with('_') {
            inplace
        } else {
            promote_rule
        };
        r.define_op(&format!("aten.{op}"), heaviside, rule);
    }
    r.define_op("aten.frexp", frexp, two_outputs_frexp);
    r.define_op("aten.float_power", float_power, float_power_rule);
    r.define_op("aten.float_power_", float_power, inplace);
}

/// `float_power`: both operands as float64, `pow` there.
fn float_power(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y) = (val(ctx, "self")?, val(ctx, "exponent")?);
    if let Val::T(t) = &x {
        if super::engine::is_inplace(ctx) && t.dtype != DType::F64 {
            return Err(ctx.err(format!(
                "the base given to float_power_ has dtype {} but the operation's result requires dtype float64",
                t.dtype
            )));
        }
    }
    let r = zip_map_shared::<f64, f64>(ctx, &x.tensor(), &y.tensor(), f64::powf)?;
    match &x {
        Val::T(t) => output(ctx, t, r),
        Val::S(_) => Ok(vec![RValue::Tensor(r)]),
    }
}

fn polygamma(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let n = ctx.int("n")?;
    if n < 0 {
        return Err(ctx.err(format!(
            "polygamma(n, x) does not support negative n, got n = {n}"
        )));
    }
    let t = ctx.tensor("self")?;
    // torch's float trigamma computes in float (its poles differ from f64's).
    if n == 1 && float_dtype(t.dtype) != DType::F64 {
        let r = map::<f32, f32>(&t, g::trigamma_f32);
        let r = match float_dtype(t.dtype) {
            DType::F32 => r,
            d => r.to_dtype(d)?,
        };
        return output(ctx, &t, r);
    }
    let r = unary_with(&t, |x| g::polygamma(n, x))?;
    output(ctx, &t, r)
}

fn mvlgamma(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let p = ctx.int("p")?;
    if p < 1 {
        return Err(ctx.err(format!(
            "p has to be greater than or equal to 1, got p = {p}"
        )));
    }
    let t = ctx.tensor("self")?;
    let bound = 0.5 * (p - 1) as f64;
    let xs = super::engine::read_vec::<f64>(&t);
    if xs.iter().any(|&x| x.is_nan() || x <= bound) {
        return Err(ctx.err(format!(
            "all elements of 'self' must be greater than (p-1)/2 = {bound}"
        )));
    }
    let r = unary_with(&t, |x| g::mvlgamma(x, p))?;
    output(ctx, &t, r)
}

/// igamma/igammac: torch supports floating dtypes only.
fn float_only_binary(ctx: &mut OpCtx, f: fn(f64, f64) -> f64) -> Result<Vec<RValue>> {
    let (x, y) = (val(ctx, "self")?, val(ctx, "other")?);
    let d = promote(&[&x, &y]);
    if !d.is_float() {
        return Err(ctx.err(format!(
            "is not implemented for dtype {d} (floating dtypes only)"
        )));
    }
    binary(ctx, "self", "other", f)
}

fn ldexp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    // torch: self * 2 ** other.
    binary(ctx, "self", "other", |x, e| x * 2f64.powf(e))
}

/// The next representable value after `a` towards `b` (C's `nextafter`), per float width.
macro_rules! next_after {
    ($name:ident, $t:ty, $min:expr, $zero:expr) => {
        fn $name(a: $t, b: $t) -> $t {
            if a.is_nan() || b.is_nan() {
                return a + b;
            }
            if a == b {
                return b;
            }
            if a == $zero {
                return <$t>::from_bits($min).copysign(b);
            }
            let bits = a.to_bits();
            let up = (b > a) == (a > $zero);
            <$t>::from_bits(if up { bits + 1 } else { bits - 1 })
        }
    };
}
next_after!(next_after_f32, f32, 1u32, 0.0);
next_after!(next_after_f64, f64, 1u64, 0.0);
next_after!(next_after_f16, half::f16, 1u16, half::f16::ZERO);
next_after!(next_after_bf16, half::bf16, 1u16, half::bf16::ZERO);

fn nextafter(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y) = (val(ctx, "self")?, val(ctx, "other")?);
    let d = promote(&[&x, &y]);
    let (a, b) = (x.tensor(), y.tensor());
    let r = match d {
        DType::F32 => zip_map_shared::<f32, f32>(ctx, &a, &b, next_after_f32)?,
        DType::F64 => zip_map_shared::<f64, f64>(ctx, &a, &b, next_after_f64)?,
        DType::F16 => zip_map_shared::<half::f16, half::f16>(ctx, &a, &b, next_after_f16)?,
        DType::BF16 => zip_map_shared::<half::bf16, half::bf16>(ctx, &a, &b, next_after_bf16)?,
        _ => {
            return Err(ctx.err(format!(
                "is not implemented for dtype {d} (floating point only)"
            )))
        }
    };
    match &x {
        Val::T(t) => output(ctx, t, r),
        Val::S(_) => Ok(vec![RValue::Tensor(r)]),
    }
}

struct Heaviside;
impl BinaryOp for Heaviside {
    fn float<R: Real>(&self, a: R, b: R) -> R {
        if a == R::ZERO {
            b
        } else if a > R::ZERO {
            R::ONE
        } else {
            R::ZERO
        }
    }
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        Some(if a == 0 { b } else { (a > 0) as i64 })
    }
}

fn heaviside(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y) = (val(ctx, "self")?, val(ctx, "values")?);
    if let (Val::T(a), Val::T(b)) = (&x, &y) {
        if a.dtype != b.dtype {
            return Err(ctx.err(format!(
                "heaviside is not yet implemented for tensors with different dtypes ({} and {})",
                a.dtype, b.dtype
            )));
        }
    }
    let d = promote(&[&x, &y]);
    let r = super::engine::run_binary(ctx, &x.tensor_for(d), &y.tensor_for(d), d, d, &Heaviside)?;
    match &x {
        Val::T(t) => output(ctx, t, r),
        Val::S(_) => Ok(vec![RValue::Tensor(r)]),
    }
}

/// C's `frexp`: `x = m * 2^e` with `0.5 <= |m| < 1` (0, inf and NaN give `m = x`, `e = 0`).
pub(crate) fn frexp_f64(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // Subnormal: scale into the normal range first.
        let (m, e) = frexp_f64(x * 2f64.powi(64));
        return (m, e - 64);
    }
    let m = f64::from_bits((bits & !(0x7ff << 52)) | (1022u64 << 52));
    (m, exp - 1022)
}

fn frexp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if !t.dtype.is_float() {
        return Err(ctx.err(format!(
            "torch.frexp() only supports floating-point dtypes, got {}",
            t.dtype
        )));
    }
    // The mantissa in the input's dtype (a power-of-two scaling is exact in every float
    // dtype, including subnormal f16/bf16 values once widened to f64).
    let m = unary_with(&t, |x| frexp_f64(x).0)?;
    let e = map::<f64, i32>(&t, |x| frexp_f64(x).1);
    Ok(vec![RValue::Tensor(m), RValue::Tensor(e)])
}
