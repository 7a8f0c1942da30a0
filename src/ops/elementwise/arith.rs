//! Binary arithmetic: add/sub/rsub (alpha), mul, div (rounding modes), remainder, fmod,
//! floor_divide, pow, minimum/maximum, fmin/fmax, atan2, hypot, logaddexp, xlogy, and their
//! in-place forms. Integer semantics follow torch (floor division and Python-style remainder,
//! errors on division by zero, wrapping arithmetic).

use super::engine::{
    compute_of, float_dtype, map, output, promote, run_binary, val, BinaryOp, Compute, Val,
};
use super::real::Real;
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{OpCtx, OpTable, Scalar};
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    for op in ["add", "add_", "sub", "sub_", "rsub"] {
        r.cpu_op(&format!("aten.{op}"), add_sub);
    }
    r.cpu_op("aten.mul", mul);
    r.cpu_op("aten.mul_", mul);
    for op in ["div", "div_", "true_divide", "true_divide_"] {
        r.cpu_op(&format!("aten.{op}"), div);
    }
    for op in ["floor_divide", "floor_divide_"] {
        r.cpu_op(&format!("aten.{op}"), floor_divide);
    }
    for op in ["remainder", "remainder_"] {
        r.cpu_op(&format!("aten.{op}"), remainder);
    }
    for op in ["fmod", "fmod_"] {
        r.cpu_op(&format!("aten.{op}"), fmod);
    }
    for op in ["pow", "pow_"] {
        r.cpu_op(&format!("aten.{op}"), pow);
    }
    r.cpu_op("aten.maximum", maximum);
    r.cpu_op("aten.minimum", minimum);
    // torch.max(a, b) in the training IR.
    r.cpu("aten.max.other", maximum);
    r.cpu("aten.min.other", minimum);
    r.cpu_op("aten.fmax", fmax);
    r.cpu_op("aten.fmin", fmin);
    for op in ["atan2", "atan2_", "arctan2", "arctan2_"] {
        r.cpu_op(&format!("aten.{op}"), atan2);
    }
    for op in ["hypot", "hypot_"] {
        r.cpu_op(&format!("aten.{op}"), hypot);
    }
    r.define_op("aten.logaddexp", logaddexp, super::meta::promote_float);
    for op in ["xlogy", "xlogy_"] {
        r.cpu_op(&format!("aten.{op}"), xlogy);
    }
}

/// `self` and `other` of a binary op, both as tensors, with their promoted dtype.
fn operands(ctx: &OpCtx, a: &str, b: &str) -> Result<(Val, Val, DType)> {
    let (x, y) = (val(ctx, a)?, val(ctx, b)?);
    let d = promote(&[&x, &y]);
    Ok((x, y, d))
}

/// The tensor an in-place op writes to (`self`).
fn dst(ctx: &OpCtx, v: &Val) -> Result<Tensor> {
    match v {
        Val::T(t) => Ok(t.clone()),
        Val::S(_) => Err(ctx.err("expected a tensor for 'self'")),
    }
}

struct AddOp {
    alpha: f64,
    alpha_i: i64,
}
impl BinaryOp for AddOp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        a + R::c(self.alpha) * b
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        Some(a.wrapping_add(self.alpha_i.wrapping_mul(b)))
    }
}

fn add_sub(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    let alpha = ctx.opt_scalar("alpha")?.unwrap_or(Scalar::Int(1));
    if !d.is_float() && matches!(alpha, Scalar::Float(_)) {
        return Err(ctx.err(
            "for integral input tensors, argument alpha must not be a floating point number",
        ));
    }
    let op = ctx.target().split('.').nth(1).unwrap_or("");
    if d == DType::Bool && (op.starts_with("sub") || op == "rsub") {
        return Err(ctx.err("subtraction with two bool tensors is not supported; use logical_xor"));
    }
    let alpha_i = match alpha {
        Scalar::Int(i) => i,
        Scalar::Bool(b) => b as i64,
        Scalar::Float(f) => f as i64,
    };
    let (a, b, sign) = match op {
        "rsub" => (y.tensor_for(d), x.tensor_for(d), -1.0),
        o if o.starts_with("sub") => (x.tensor_for(d), y.tensor_for(d), -1.0),
        _ => (x.tensor_for(d), y.tensor_for(d), 1.0),
    };
    let add = AddOp {
        alpha: sign * alpha.as_f64(),
        alpha_i: if sign < 0.0 {
            alpha_i.wrapping_neg()
        } else {
            alpha_i
        },
    };
    let r = if add.alpha == 1.0 {
        // The hot path: no multiply by alpha.
        run_binary(ctx, &a, &b, d, d, &AddPlain)?
    } else {
        run_binary(ctx, &a, &b, d, d, &add)?
    };
    output(ctx, &x.tensor(), r)
}

struct AddPlain;
impl BinaryOp for AddPlain {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        a + b
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        Some(a.wrapping_add(b))
    }
}

struct MulOp;
impl BinaryOp for MulOp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        a * b
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        Some(a.wrapping_mul(b))
    }
}

fn mul(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    let r = run_binary(ctx, &x.tensor_for(d), &y.tensor_for(d), d, d, &MulOp)?;
    output(ctx, &dst(ctx, &x)?, r)
}

/// torch's `div_floor_floating`: floor division that agrees with `remainder`.
#[inline]
pub(crate) fn div_floor_float<R: Real>(a: R, b: R) -> R {
    if b == R::ZERO {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != R::ZERO && (b < R::ZERO) != (m < R::ZERO) {
        div = div - R::ONE;
    }
    if div != R::ZERO {
        let f = div.floor();
        if div - f > R::c(0.5) {
            f + R::ONE
        } else {
            f
        }
    } else {
        R::ZERO.copysign(a / b)
    }
}

#[inline]
fn div_floor_int(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let (q, r) = (a.wrapping_div(b), a.wrapping_rem(b));
    Some(if r != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

struct DivOp(Option<&'static str>);
impl BinaryOp for DivOp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        match self.0 {
            None => a / b,
            Some("trunc") => (a / b).trunc(),
            _ => div_floor_float(a, b),
        }
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        match self.0 {
            Some("trunc") => (b != 0).then(|| a.wrapping_div(b)),
            _ => div_floor_int(a, b),
        }
    }
}

fn div(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    let mode = match ctx.opt_str("rounding_mode")?.as_deref() {
        None => None,
        Some("trunc") => Some("trunc"),
        Some("floor") => Some("floor"),
        Some(m) => {
            return Err(ctx.err(format!(
                "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"
            )))
        }
    };
    // True division of integers gives the default float dtype.
    let d = if mode.is_none() { float_dtype(d) } else { d };
    let r = run_binary(ctx, &x.tensor_for(d), &y.tensor_for(d), d, d, &DivOp(mode))?;
    output(ctx, &dst(ctx, &x)?, r)
}

fn floor_divide(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    let r = run_binary(
        ctx,
        &x.tensor_for(d),
        &y.tensor_for(d),
        d,
        d,
        &DivOp(Some("floor")),
    )?;
    output(ctx, &dst(ctx, &x)?, r)
}

struct RemOp;
impl BinaryOp for RemOp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        let m = a % b;
        if m != R::ZERO && (b < R::ZERO) != (m < R::ZERO) {
            m + b
        } else {
            m
        }
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        if b == 0 {
            return None;
        }
        let r = a.wrapping_rem(b);
        Some(if r != 0 && (r < 0) != (b < 0) {
            r + b
        } else {
            r
        })
    }
}

fn remainder(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    let r = run_binary(ctx, &x.tensor_for(d), &y.tensor_for(d), d, d, &RemOp)?;
    output(ctx, &x.tensor(), r)
}

struct FmodOp;
impl BinaryOp for FmodOp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        a % b
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        (b != 0).then(|| a.wrapping_rem(b))
    }
}

fn fmod(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    let r = run_binary(ctx, &x.tensor_for(d), &y.tensor_for(d), d, d, &FmodOp)?;
    output(ctx, &dst(ctx, &x)?, r)
}

/// torch's integer power (negative exponents give 0 except for bases 1 and -1).
fn powi(a: i64, b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 => {
                if b % 2 != 0 {
                    -1
                } else {
                    1
                }
            }
            _ => 0,
        };
    }
    let (mut base, mut e, mut acc) = (a, b as u64, 1i64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc
}

struct PowOp;
impl BinaryOp for PowOp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        a.powf(b)
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        Some(powi(a, b))
    }
}

/// `x ** e` for a scalar exponent, with torch's exact special cases (squares as products).
#[inline]
fn pow_scalar<R: Real>(x: R, e: f64) -> R {
    match e {
        2.0 => x * x,
        3.0 => x * x * x,
        0.5 => x.sqrt(),
        -0.5 => R::ONE / x.sqrt(),
        -1.0 => R::ONE / x,
        -2.0 => R::ONE / (x * x),
        _ => x.powf(R::c(e)),
    }
}

fn pow(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "exponent")?;
    if let (Val::T(t), Val::S(e)) = (&x, &y) {
        let r = match (compute_of(d), e) {
            (Compute::F32, e) => finish_to(map::<f32, f32>(t, |v| pow_scalar(v, e.as_f64())), d)?,
            (Compute::F64, e) => map::<f64, f64>(t, |v| pow_scalar(v, e.as_f64())),
            (Compute::Int, e) => {
                let e = match e {
                    Scalar::Int(i) => *i,
                    other => other.as_f64() as i64,
                };
                if e < 0 {
                    return Err(ctx.err("Integers to negative integer powers are not allowed."));
                }
                finish_to(map::<i64, i64>(t, |v| powi(v, e)), d)?
            }
        };
        return output(ctx, t, r);
    }
    let r = run_binary(ctx, &x.tensor_for(d), &y.tensor_for(d), d, d, &PowOp)?;
    match &x {
        Val::T(t) => output(ctx, t, r),
        Val::S(_) => Ok(vec![RValue::Tensor(r)]),
    }
}

fn finish_to(t: Tensor, d: DType) -> Result<Tensor> {
    super::engine::finish(t, d)
}

struct MaxOp(bool);
impl BinaryOp for MaxOp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        // NaN-propagating, as torch's maximum/minimum.
        if a.is_nan() || b.is_nan() {
            R::NAN
        } else if self.0 {
            a.std_max(b)
        } else {
            a.std_min(b)
        }
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        Some(if self.0 { a.max(b) } else { a.min(b) })
    }
}

fn maximum(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    Ok(vec![RValue::Tensor(run_binary(
        ctx,
        &x.tensor_for(d),
        &y.tensor_for(d),
        d,
        d,
        &MaxOp(true),
    )?)])
}

fn minimum(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    Ok(vec![RValue::Tensor(run_binary(
        ctx,
        &x.tensor_for(d),
        &y.tensor_for(d),
        d,
        d,
        &MaxOp(false),
    )?)])
}

struct FMaxOp(bool);
impl BinaryOp for FMaxOp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        // NaN-ignoring (C's fmax/fmin).
        if a.is_nan() {
            b
        } else if b.is_nan() {
            a
        } else if self.0 {
            a.std_max(b)
        } else {
            a.std_min(b)
        }
    }
    #[inline]
    fn int(&self, a: i64, b: i64) -> Option<i64> {
        Some(if self.0 { a.max(b) } else { a.min(b) })
    }
}

fn fmax(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    Ok(vec![RValue::Tensor(run_binary(
        ctx,
        &x.tensor_for(d),
        &y.tensor_for(d),
        d,
        d,
        &FMaxOp(true),
    )?)])
}

fn fmin(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    Ok(vec![RValue::Tensor(run_binary(
        ctx,
        &x.tensor_for(d),
        &y.tensor_for(d),
        d,
        d,
        &FMaxOp(false),
    )?)])
}

struct Atan2;
impl BinaryOp for Atan2 {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        a.atan2(b)
    }
    fn int(&self, _: i64, _: i64) -> Option<i64> {
        Some(0)
    }
}

struct Hypot;
impl BinaryOp for Hypot {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        a.hypot(b)
    }
    fn int(&self, _: i64, _: i64) -> Option<i64> {
        Some(0)
    }
}

struct LogAddExp;
impl BinaryOp for LogAddExp {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        if a.is_infinite() && a == b {
            a
        } else {
            let m = if a.is_nan() || b.is_nan() {
                R::NAN
            } else {
                a.std_max(b)
            };
            m + (-(a - b).abs()).exp().ln_1p()
        }
    }
    fn int(&self, _: i64, _: i64) -> Option<i64> {
        Some(0)
    }
}

struct Xlogy;
impl BinaryOp for Xlogy {
    #[inline]
    fn float<R: Real>(&self, a: R, b: R) -> R {
        if b.is_nan() {
            R::NAN
        } else if a == R::ZERO {
            R::ZERO
        } else {
            a * b.ln()
        }
    }
    fn int(&self, _: i64, _: i64) -> Option<i64> {
        Some(0)
    }
}

/// Run a float-only op: integer/bool operands promote to float32.
fn float_binary<O: BinaryOp + Sync>(ctx: &OpCtx, a: &str, b: &str, op: &O) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, a, b)?;
    let d = float_dtype(d);
    let r = run_binary(ctx, &x.tensor_for(d), &y.tensor_for(d), d, d, op)?;
    match &x {
        Val::T(t) => output(ctx, t, r),
        Val::S(_) => Ok(vec![RValue::Tensor(r)]),
    }
}

fn atan2(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    float_binary(ctx, "self", "other", &Atan2)
}

fn hypot(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, y, d) = operands(ctx, "self", "other")?;
    if !d.is_float() {
        return Err(ctx.err(format!("hypot is not implemented for dtype {d}")));
    }
    let r = run_binary(ctx, &x.tensor_for(d), &y.tensor_for(d), d, d, &Hypot)?;
    output(ctx, &dst(ctx, &x)?, r)
}

fn logaddexp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    float_binary(ctx, "self", "other", &LogAddExp)
}

fn xlogy(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    float_binary(ctx, "self", "other", &Xlogy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_semantics() {
        assert_eq!(div_floor_int(-7, 2), Some(-4));
        assert_eq!(div_floor_int(7, -2), Some(-4));
        assert_eq!(div_floor_int(6, 3), Some(2));
        assert_eq!(div_floor_int(1, 0), None);
        assert_eq!(RemOp.int(-7, 3), Some(2));
        assert_eq!(RemOp.int(7, -3), Some(-2));
        assert_eq!(powi(3, 4), 81);
        assert_eq!(powi(-1, -3), -1);
        assert_eq!(powi(2, -1), 0);
    }

    #[test]
    fn float_floor_division() {
        assert_eq!(div_floor_float(-7.0f32, 2.0), -4.0);
        assert_eq!(div_floor_float(7.5f64, -2.0), -4.0);
        assert!(div_floor_float(0.0f32, -1.0).is_sign_negative());
        assert_eq!(div_floor_float(1.0f32, 0.0), f32::INFINITY);
        assert_eq!(RemOp.float(-7.5f32, 2.0), 0.5);
    }
}
