//! sum, nansum, mean, nanmean, prod; amax/amin, max/min (full and along a dim, with indices),
//! argmax/argmin, aminmax; any/all; count_nonzero.

use super::{check_nonempty, gather_lanes, reduced_sizes, typed, Reduction};
use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::util::wrap_dim;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define_op("aten.sum", sum, super::meta::sum);
    r.define_op("aten.nansum", sum, super::meta::sum);
    r.define_op("aten.mean", mean, super::meta::mean);
    r.define_op("aten.nanmean", mean, super::meta::mean);
    r.define_op("aten.prod", prod, super::meta::sum);
    r.define_op("aten.amax", amax, super::meta::amax);
    r.define_op("aten.amin", amax, super::meta::amax);
    r.define("aten.max.default", max_all, super::meta::max_all);
    r.define("aten.min.default", max_all, super::meta::max_all);
    r.define("aten.max.dim", max_dim, super::meta::max_dim);
    r.define("aten.min.dim", max_dim, super::meta::max_dim);
    r.define_op("aten.argmax", argmax, super::meta::argmax);
    r.define_op("aten.argmin", argmax, super::meta::argmax);
    r.define_op("aten.aminmax", aminmax, super::meta::aminmax);
    r.define_op("aten.any", any_all, super::meta::any_all);
    r.define_op("aten.all", any_all, super::meta::any_all);
    r.define_op(
        "aten.count_nonzero",
        count_nonzero,
        super::meta::count_nonzero,
    );
}

/// Whether the target is the `min`-flavoured twin of a max op (`amin`, `min.dim`, `argmin`).
fn is_min(ctx: &OpCtx) -> bool {
    let t = ctx.target();
    t.starts_with("aten.amin") || t.starts_with("aten.min.") || t.starts_with("aten.argmin")
}

/// A sum or product over `mask` of `x` converted to `out`: i64 wrapping arithmetic for integer
/// and bool outputs, f64 accumulation for floats. `skip_nan` drops NaNs (nansum).
fn accumulate(
    x: &Tensor,
    mask: &[bool],
    out: DType,
    keepdim: bool,
    product: bool,
    skip_nan: bool,
) -> Result<Tensor> {
    let sizes = reduced_sizes(&x.sizes, mask, keepdim);
    if out.is_float() {
        let (v, lanes, lane) = gather_lanes::<f64>(x, mask);
        let res: Vec<f64> = (0..lanes)
            .map(|i| {
                let it = v[i * lane..(i + 1) * lane]
                    .iter()
                    .copied()
                    .filter(|a| !(skip_nan && a.is_nan()));
                if product {
                    it.product()
                } else {
                    it.sum()
                }
            })
            .collect();
        typed(res, &sizes, out)
    } else {
        // Cast to the output type first so that e.g. a uint8 sum wraps as torch's does.
        let xc = if x.dtype == out || out == DType::Bool {
            x.clone()
        } else {
            x.to_dtype(out)?
        };
        let (v, lanes, lane) = gather_lanes::<i64>(&xc, mask);
        let res: Vec<i64> = (0..lanes)
            .map(|i| {
                let l = &v[i * lane..(i + 1) * lane];
                if product {
                    l.iter().fold(1i64, |a, &b| a.wrapping_mul(b))
                } else {
                    l.iter().fold(0i64, |a, &b| a.wrapping_add(b))
                }
            })
            .collect();
        typed(res, &sizes, out)
    }
}

/// Integer and bool inputs sum/multiply into int64 unless a dtype is given.
fn int_promoted(x: DType, dtype: Option<DType>) -> DType {
    dtype.unwrap_or(if x.is_float() { x } else { DType::I64 })
}

fn sum(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let Reduction { mask, keepdim } = Reduction::parse(ctx, x.rank())?;
    let out = int_promoted(x.dtype, ctx.opt_dtype("dtype")?);
    let skip_nan = ctx.target().starts_with("aten.nansum");
    Ok(vec![
        accumulate(&x, &mask, out, keepdim, false, skip_nan)?.into()
    ])
}

fn prod(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    // prod.dim_int takes one int dim; prod.default reduces everything.
    let Reduction { mask, keepdim } = Reduction::parse(ctx, x.rank())?;
    let out = int_promoted(x.dtype, ctx.opt_dtype("dtype")?);
    Ok(vec![
        accumulate(&x, &mask, out, keepdim, true, false)?.into()
    ])
}

fn mean(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let Reduction { mask, keepdim } = Reduction::parse(ctx, x.rank())?;
    let out = ctx.opt_dtype("dtype")?.unwrap_or(x.dtype);
    if !out.is_float() || super::compute_float(out).is_none() {
        return Err(ctx.err(format!(
            "could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
            out
        )));
    }
    let nan = ctx.target().starts_with("aten.nanmean");
    let sizes = reduced_sizes(&x.sizes, &mask, keepdim);
    let (v, lanes, lane) = gather_lanes::<f64>(&x, &mask);
    let res: Vec<f64> = (0..lanes)
        .map(|i| {
            let l = &v[i * lane..(i + 1) * lane];
            if nan {
                let (s, n) = l
                    .iter()
                    .filter(|a| !a.is_nan())
                    .fold((0.0, 0usize), |(s, n), &a| (s + a, n + 1));
                s / n as f64
            } else {
                l.iter().sum::<f64>() / lane as f64
            }
        })
        .collect();
    Ok(vec![typed(res, &sizes, out)?.into()])
}

/// NaN-propagating max (or min) of a lane; `None` for an empty lane.
fn extreme<T: Elem>(l: &[T], min: bool) -> Option<(T, usize)> {
    let mut it = l.iter().copied().enumerate();
    let (mut bi, mut best) = it.next()?;
    #[allow(clippy::eq_op)]
    if best != best {
        return Some((best, bi));
    }
    for (i, v) in it {
        #[allow(clippy::eq_op)]
        let nan = v != v;
        if nan || (if min { v < best } else { v > best }) {
            best = v;
            bi = i;
            if nan {
                break;
            }
        }
    }
    Some((best, bi))
}

/// (values, indices) of the extreme over `mask`, in the input's dtype.
fn extreme_over(
    ctx: &OpCtx,
    x: &Tensor,
    mask: &[bool],
    keepdim: bool,
    min: bool,
    name: &str,
) -> Result<(Tensor, Tensor)> {
    check_nonempty(ctx, name, &x.sizes, mask)?;
    let sizes = reduced_sizes(&x.sizes, mask, keepdim);
    with_dtype!(x.dtype, T => {
        let (v, lanes, lane) = gather_lanes::<T>(x, mask);
        let mut vals = Vec::with_capacity(lanes);
        let mut idx = Vec::with_capacity(lanes);
        for i in 0..lanes {
            let (b, j) = extreme(&v[i * lane..(i + 1) * lane], min).unwrap_or((T::default(), 0));
            vals.push(b);
            idx.push(j as i64);
        }
        Ok((Tensor::from_vec(vals, &sizes), Tensor::from_vec(idx, &sizes)))
    }, else Err(ctx.err(format!("dtype {} is not supported", x.dtype))))
}

fn amax(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let Reduction { mask, keepdim } = Reduction::parse(ctx, x.rank())?;
    let min = is_min(ctx);
    let (v, _) = extreme_over(
        ctx,
        &x,
        &mask,
        keepdim,
        min,
        if min { "amin" } else { "amax" },
    )?;
    Ok(vec![v.into()])
}

fn max_all(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let min = is_min(ctx);
    if x.numel() == 0 {
        return Err(ctx.err(format!(
            "{}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
            if min { "min" } else { "max" }
        )));
    }
    let mask = vec![true; x.rank()];
    let (v, _) = extreme_over(ctx, &x, &mask, false, min, "max")?;
    Ok(vec![v.into()])
}

fn max_dim(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let dim = wrap_dim(ctx, ctx.int("dim")?, x.rank())?;
    let keepdim = ctx.bool_or("keepdim", false)?;
    let min = is_min(ctx);
    let mut mask = vec![false; x.rank()];
    if x.rank() > 0 {
        mask[dim] = true;
    }
    let (v, i) = extreme_over(
        ctx,
        &x,
        &mask,
        keepdim,
        min,
        if min { "min" } else { "max" },
    )?;
    Ok(vec![v.into(), i.into()])
}

fn argmax(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let keepdim = ctx.bool_or("keepdim", false)?;
    let min = is_min(ctx);
    let name = if min { "argmin" } else { "argmax" };
    match ctx.opt_int("dim")? {
        Some(d) => {
            let dim = wrap_dim(ctx, d, x.rank())?;
            let mut mask = vec![false; x.rank()];
            if x.rank() > 0 {
                mask[dim] = true;
            }
            let (_, i) = extreme_over(ctx, &x, &mask, keepdim, min, name)?;
            Ok(vec![i.into()])
        }
        None => {
            // Over the flattened tensor; keepdim gives a shape of all ones.
            let flat = x.contiguous();
            let flat = flat.view_with(vec![x.numel()], vec![1], flat.offset);
            let (_, i) = extreme_over(ctx, &flat, &[true], false, min, name)?;
            let sizes = if keepdim { vec![1; x.rank()] } else { vec![] };
            Ok(vec![Tensor::from_vec(i.to_vec::<i64>(), &sizes).into()])
        }
    }
}

fn aminmax(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let keepdim = ctx.bool_or("keepdim", false)?;
    let mask = match ctx.opt_int("dim")? {
        Some(d) => {
            let dim = wrap_dim(ctx, d, x.rank())?;
            (0..x.rank()).map(|i| i == dim).collect()
        }
        None => vec![true; x.rank()],
    };
    let (lo, _) = extreme_over(ctx, &x, &mask, keepdim, true, "aminmax")?;
    let (hi, _) = extreme_over(ctx, &x, &mask, keepdim, false, "aminmax")?;
    Ok(vec![lo.into(), hi.into()])
}

fn any_all(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    // any.dims/all.dims treat an empty list as "reduce nothing" (Reduction).
    let Reduction { mask, keepdim } = Reduction::parse(ctx, x.rank())?;
    let all = ctx.target().starts_with("aten.all");
    let sizes = reduced_sizes(&x.sizes, &mask, keepdim);
    let (v, lanes, lane) = gather_lanes::<bool>(&x, &mask);
    let res: Vec<bool> = (0..lanes)
        .map(|i| {
            let l = &v[i * lane..(i + 1) * lane];
            if all {
                l.iter().all(|&b| b)
            } else {
                l.iter().any(|&b| b)
            }
        })
        .collect();
    // uint8 inputs keep their dtype (a torch quirk kept for backward compatibility).
    let out = Tensor::from_vec(res, &sizes);
    Ok(vec![if x.dtype == DType::U8 {
        out.to_dtype(DType::U8)?
    } else {
        out
    }
    .into()])
}

fn count_nonzero(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let mask = Reduction::parse(ctx, x.rank())?.mask;
    let sizes = reduced_sizes(&x.sizes, &mask, false);
    let (v, lanes, lane) = gather_lanes::<bool>(&x, &mask);
    let res: Vec<i64> = (0..lanes)
        .map(|i| v[i * lane..(i + 1) * lane].iter().filter(|&&b| b).count() as i64)
        .collect();
    Ok(vec![Tensor::from_vec(res, &sizes).into()])
}
