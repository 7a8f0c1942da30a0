//! Ops with bounds or three operands: clamp (number and tensor bounds), clamp_min/max, clip,
//! lerp, addcmul, addcdiv.

use super::engine::{
    compute_of, finish, map, opt_val, output, promote, val, zip3_map, Compute, Val,
};
use super::real::Real;
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{OpCtx, OpTable, Scalar};
use crate::program::Arg;
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    for op in [
        "clamp",
        "clamp_",
        "clip",
        "clip_",
        "clamp_min",
        "clamp_min_",
        "clamp_max",
        "clamp_max_",
    ] {
        r.cpu_op(&format!("aten.{op}"), clamp);
    }
    r.define_op("aten.lerp", lerp, super::meta::promote_float);
    r.cpu_op("aten.lerp_", lerp);
    r.define_op("aten.addcmul", addcmul, super::meta::promote);
    r.cpu_op("aten.addcmul_", addcmul);
    r.define_op("aten.addcdiv", addcdiv, super::meta::promote);
    r.cpu_op("aten.addcdiv_", addcdiv);
}

/// `clamp` with number bounds: `min(max(x, lo), hi)` as C++'s std::max/std::min, so NaN
/// inputs stay NaN and `lo > hi` gives `hi`, as in torch.
#[inline]
fn clamp_num<R: Real>(x: R, lo: Option<R>, hi: Option<R>) -> R {
    let v = match lo {
        Some(l) => x.std_max(l),
        None => x,
    };
    match hi {
        Some(h) => v.std_min(h),
        None => v,
    }
}

/// `clamp` with tensor bounds: NaN in any operand gives NaN (torch's maximum/minimum).
#[inline]
fn clamp_tensor<R: Real>(x: R, lo: R, hi: R) -> R {
    if x.is_nan() || lo.is_nan() || hi.is_nan() {
        R::NAN
    } else {
        x.std_max(lo).std_min(hi)
    }
}

/// Clamp `t` to number bounds, computing in `d`'s compute type; the result has dtype `d`.
pub(crate) fn clamp_scalars(
    t: &Tensor,
    d: DType,
    lo: Option<Scalar>,
    hi: Option<Scalar>,
) -> Result<Tensor> {
    let r = match compute_of(d) {
        Compute::F32 => {
            let (l, h) = (lo.map(|s| s.as_f64() as f32), hi.map(|s| s.as_f64() as f32));
            map::<f32, f32>(t, |x| clamp_num(x, l, h))
        }
        Compute::F64 => {
            let (l, h) = (lo.map(Scalar::as_f64), hi.map(Scalar::as_f64));
            map::<f64, f64>(t, |x| clamp_num(x, l, h))
        }
        Compute::Int => {
            let int = |s: Scalar| match s {
                Scalar::Int(i) => i,
                other => other.as_f64() as i64,
            };
            let (l, h) = (lo.map(int), hi.map(int));
            map::<i64, i64>(t, |x| {
                let v = l.map_or(x, |l| x.max(l));
                h.map_or(v, |h| v.min(h))
            })
        }
    };
    finish(r, d)
}

/// The bounds of clamp, clip, clamp_min and clamp_max (and their in-place forms), read once
/// from the node for every backend: numbers (either may be absent, not both), or tensors
/// when either bound is a tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ClampBounds {
    Numbers {
        lo: Option<Scalar>,
        hi: Option<Scalar>,
    },
    Tensors,
}

impl ClampBounds {
    pub fn parse(ctx: &OpCtx) -> Result<ClampBounds> {
        let tensor = |n: &str| matches!(ctx.arg(n), Some(Arg::Tensor(_) | Arg::OptTensor(Some(_))));
        if tensor("min") || tensor("max") {
            return Ok(ClampBounds::Tensors);
        }
        let (lo, hi) = (ctx.opt_scalar("min")?, ctx.opt_scalar("max")?);
        if lo.is_none() && hi.is_none() {
            return Err(ctx.err("At least one of 'min' or 'max' must not be None"));
        }
        Ok(ClampBounds::Numbers { lo, hi })
    }
}

fn clamp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let bounds = ClampBounds::parse(ctx)?;
    let x = val(ctx, "self")?;
    let Val::T(t) = &x else {
        return Err(ctx.err("expected a tensor for 'self'"));
    };
    let (lo, hi) = (opt_val(ctx, "min")?, opt_val(ctx, "max")?);
    let mut all = vec![&x];
    all.extend(lo.iter());
    all.extend(hi.iter());
    let d = promote(&all);
    let r = match bounds {
        ClampBounds::Numbers { lo, hi } => clamp_scalars(t, d, lo, hi)?,
        ClampBounds::Tensors => {
            // Tensor bounds; an absent bound is unbounded.
            let (neg, pos) = match compute_of(d) {
                Compute::Int => (Tensor::scalar(i64::MIN), Tensor::scalar(i64::MAX)),
                _ => (
                    Tensor::scalar(f64::NEG_INFINITY),
                    Tensor::scalar(f64::INFINITY),
                ),
            };
            let l = lo.map_or(neg, |v| v.tensor_for(d));
            let h = hi.map_or(pos, |v| v.tensor_for(d));
            let r = match compute_of(d) {
                Compute::F32 => zip3_map::<f32, f32, f32, f32>(ctx, t, &l, &h, clamp_tensor)?,
                Compute::F64 => zip3_map::<f64, f64, f64, f64>(ctx, t, &l, &h, clamp_tensor)?,
                Compute::Int => {
                    zip3_map::<i64, i64, i64, i64>(ctx, t, &l, &h, |x, l, h| x.max(l).min(h))?
                }
            };
            finish(r, d)?
        }
    };
    output(ctx, t, r)
}

/// Run a three-operand float/int formula over broadcast tensors in `d`'s compute type.
fn ternary<FF, FD, FI>(
    ctx: &OpCtx,
    [a, b, c]: [&Tensor; 3],
    d: DType,
    ff: FF,
    fd: FD,
    fi: FI,
) -> Result<Tensor>
where
    FF: Fn(f32, f32, f32) -> f32,
    FD: Fn(f64, f64, f64) -> f64,
    FI: Fn(i64, i64, i64) -> i64,
{
    let r = match compute_of(d) {
        Compute::F32 => zip3_map::<f32, f32, f32, f32>(ctx, a, b, c, ff)?,
        Compute::F64 => zip3_map::<f64, f64, f64, f64>(ctx, a, b, c, fd)?,
        Compute::Int => zip3_map::<i64, i64, i64, i64>(ctx, a, b, c, fi)?,
    };
    finish(r, d)
}

/// torch's lerp: the formula is picked by |weight| so both ends are exact.
#[inline]
fn lerp_f<R: Real>(a: R, b: R, w: R) -> R {
    if w.abs() < R::c(0.5) {
        a + w * (b - a)
    } else {
        b - (b - a) * (R::ONE - w)
    }
}

fn lerp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, b, w) = (ctx.tensor("self")?, ctx.tensor("end")?, val(ctx, "weight")?);
    let d = promote(&[&Val::T(a.clone()), &Val::T(b.clone())]);
    if !d.is_float() {
        return Err(ctx.err(format!(
            "lerp is only implemented for floating dtypes, got {d}"
        )));
    }
    let r = ternary(ctx, [&a, &b, &w.tensor()], d, lerp_f, lerp_f, |x, _, _| x)?;
    output(ctx, &a, r)
}

/// `self + value * t1 (op) t2` for addcmul (`div` false) and addcdiv.
fn addc(ctx: &mut OpCtx, div: bool) -> Result<Vec<RValue>> {
    let (s, t1, t2) = (
        ctx.tensor("self")?,
        ctx.tensor("tensor1")?,
        ctx.tensor("tensor2")?,
    );
    let value = ctx.opt_scalar("value")?.unwrap_or(Scalar::Int(1));
    let d = promote(&[&Val::T(s.clone()), &Val::T(t1.clone()), &Val::T(t2.clone())]);
    if div && !t1.dtype.is_float() && !t2.dtype.is_float() {
        return Err(ctx.err(
            "integer division with addcdiv is no longer supported; use true_divide or floor_divide",
        ));
    }
    if !d.is_float() && matches!(value, Scalar::Float(_)) {
        return Err(ctx.err(
            "for integral input tensors, argument value must not be a floating point number",
        ));
    }
    let v = value.as_f64();
    let vi = match value {
        Scalar::Int(i) => i,
        other => other.as_f64() as i64,
    };
    let r = if div {
        ternary(
            ctx,
            [&s, &t1, &t2],
            d,
            move |a, b, c| a + (v as f32) * b / c,
            move |a, b, c| a + v * b / c,
            |a, _, _| a,
        )?
    } else {
        ternary(
            ctx,
            [&s, &t1, &t2],
            d,
            move |a, b, c| a + (v as f32) * b * c,
            move |a, b, c| a + v * b * c,
            move |a, b, c| a.wrapping_add(vi.wrapping_mul(b).wrapping_mul(c)),
        )?
    };
    output(ctx, &s, r)
}

fn addcmul(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    addc(ctx, false)
}

fn addcdiv(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    addc(ctx, true)
}
