//! var/std (and var_mean/std_mean) with torch's `correction`, logsumexp, and vector norms
//! (`norm`, `linalg_vector_norm`, `frobenius_norm`).

use super::{gather_lanes, need_float, reduced_sizes, typed, Reduction};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    for op in ["aten.var", "aten.std", "aten.var_mean", "aten.std_mean"] {
        r.cpu_op(op, var_std);
    }
    r.define_op("aten.logsumexp", logsumexp, super::meta::float_reduce);
    r.define_op("aten.norm", norm, super::meta::float_reduce);
    r.define_op("aten.linalg_vector_norm", norm, super::meta::float_reduce);
    r.define_op("aten.frobenius_norm", norm, super::meta::float_reduce);
}

/// var, std, var_mean, std_mean: every overload (`default` with `unbiased`, `dim`, and
/// `correction`). The divisor is max(0, N - correction), as in torch (so N <= correction
/// gives inf or NaN rather than an error).
fn var_std(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let t = ctx.target();
    let is_std = t.starts_with("aten.std");
    let with_mean = t.contains("_mean");
    need_float(ctx, t.split('.').nth(1).unwrap_or("var"), x.dtype)?;
    let correction = match ctx.opt_scalar("correction")? {
        Some(c) => c.as_f64(),
        None => {
            if ctx.bool_or("unbiased", true)? {
                1.0
            } else {
                0.0
            }
        }
    };
    let Reduction { mask, keepdim } = Reduction::parse(ctx, x.rank())?;
    let sizes = reduced_sizes(&x.sizes, &mask, keepdim);
    let (v, lanes, lane) = gather_lanes::<f64>(&x, &mask);
    let mut vars = Vec::with_capacity(lanes);
    let mut means = Vec::with_capacity(lanes);
    let n = lane as f64;
    let div = (n - correction).max(0.0);
    for i in 0..lanes {
        let l = &v[i * lane..(i + 1) * lane];
        // Two passes in f64: exact enough to match torch's Welford to the last f32 bit.
        let mean = l.iter().sum::<f64>() / n;
        let ss: f64 = l.iter().map(|&a| (a - mean) * (a - mean)).sum();
        let var = ss / div;
        vars.push(if is_std { var.sqrt() } else { var });
        means.push(mean);
    }
    let mut out = vec![typed(vars, &sizes, x.dtype)?.into()];
    if with_mean {
        out.push(typed(means, &sizes, x.dtype)?.into());
    }
    Ok(out)
}

fn logsumexp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let Reduction { mask, keepdim } = Reduction::parse(ctx, x.rank())?;
    // Integer inputs produce the default float dtype.
    let out = if x.dtype.is_float() {
        x.dtype
    } else {
        DType::F32
    };
    let sizes = reduced_sizes(&x.sizes, &mask, keepdim);
    let (v, lanes, lane) = gather_lanes::<f64>(&x, &mask);
    let res: Vec<f64> = (0..lanes)
        .map(|i| {
            let l = &v[i * lane..(i + 1) * lane];
            let m = l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            // An infinite max is not subtracted (torch masks it to 0) so that all -inf gives
            // -inf and any +inf gives +inf instead of NaN.
            let m = if m.is_infinite() { 0.0 } else { m };
            l.iter().map(|&a| (a - m).exp()).sum::<f64>().ln() + m
        })
        .collect();
    // A NaN anywhere in the lane makes the result NaN (f64::max skips NaN above).
    let res: Vec<f64> = res
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            if v[i * lane..(i + 1) * lane].iter().any(|a| a.is_nan()) {
                f64::NAN
            } else {
                r
            }
        })
        .collect();
    Ok(vec![typed(res, &sizes, out)?.into()])
}

/// The p-norm of one lane.
fn lane_norm(l: &[f64], p: f64) -> f64 {
    if l.iter().any(|a| a.is_nan()) {
        return f64::NAN;
    }
    if p == f64::INFINITY {
        l.iter().map(|a| a.abs()).fold(0.0, f64::max)
    } else if p == f64::NEG_INFINITY {
        l.iter().map(|a| a.abs()).fold(f64::INFINITY, f64::min)
    } else if p == 0.0 {
        l.iter().filter(|&&a| a != 0.0).count() as f64
    } else if p == 1.0 {
        l.iter().map(|a| a.abs()).sum()
    } else if p == 2.0 {
        l.iter().map(|a| a * a).sum::<f64>().sqrt()
    } else {
        l.iter().map(|a| a.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

/// norm.Scalar / norm.ScalarOpt_dim(_dtype) (`p`), linalg_vector_norm (`ord`), frobenius_norm.
fn norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let p = if ctx.target().starts_with("aten.linalg_vector_norm") {
        ctx.float_or("ord", 2.0)?
    } else {
        ctx.float_or("p", 2.0)?
    };
    let out = ctx.opt_dtype("dtype")?.unwrap_or(x.dtype);
    need_float(ctx, "norm", x.dtype)?;
    need_float(ctx, "norm", out)?;
    let Reduction { mask, keepdim } = Reduction::parse(ctx, x.rank())?;
    if p.is_infinite() {
        super::check_nonempty(ctx, "linalg.vector_norm", &x.sizes, &mask)?;
    }
    let sizes = reduced_sizes(&x.sizes, &mask, keepdim);
    // A dtype argument computes in that dtype: round the input first.
    let xc = if out != x.dtype { x.to_dtype(out)? } else { x };
    let (v, lanes, lane) = gather_lanes::<f64>(&xc, &mask);
    let res: Vec<f64> = (0..lanes)
        .map(|i| lane_norm(&v[i * lane..(i + 1) * lane], p))
        .collect();
    Ok(vec![typed(res, &sizes, out)?.into()])
}
