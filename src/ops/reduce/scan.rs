//! Cumulative scans along a dim: cumsum, cumprod (with dtype), cummax/cummin (with indices),
//! logcumsumexp, and diff (n-th forward difference, with prepend/append).

use super::{for_each_lane, need_float, split_at_dim, typed};
use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::util::wrap_dim;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define_op("aten.cumsum", cumsum, super::meta::scan);
    r.define_op("aten.cumprod", cumsum, super::meta::scan);
    r.define_op("aten.cumsum_", cumsum, super::meta::scan_inplace);
    r.define_op("aten.cumprod_", cumsum, super::meta::scan_inplace);
    r.define_op("aten.cummax", cummax, super::meta::cummax);
    r.define_op("aten.cummin", cummax, super::meta::cummax);
    r.define_op("aten.logcumsumexp", logcumsumexp, super::meta::logcumsumexp);
    r.define_op("aten.diff", diff, super::meta::diff);
}

/// diff(self, n=1, dim=-1, prepend=None, append=None): `x[i+1] - x[i]` along `dim`, `n`
/// times, over `cat([prepend, self, append], dim)`; bool tensors use `!=` as torch does.
/// The result keeps the (promoted) input dtype; floats are subtracted in f64 and rounded
/// once, which is the same as subtracting in the narrower type.
fn diff(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return Err(ctx.err("diff expects input to be at least one-dimensional"));
    }
    let n = ctx.int_or("n", 1)?;
    if n < 0 {
        return Err(ctx.err(format!("order must be non-negative but got {n}")));
    }
    let d = ctx.int_or("dim", -1)?;
    let dim = wrap_dim(ctx, d, x.rank())?;
    let mut parts = Vec::new();
    if let Some(p) = ctx.opt_tensor("prepend")? {
        parts.push(p);
    }
    parts.push(x.clone());
    if let Some(a) = ctx.opt_tensor("append")? {
        parts.push(a);
    }
    let x = if parts.len() > 1 {
        crate::ops::shape::copy::cat_t(ctx, &parts, d)?
    } else {
        x
    };
    let dtype = x.dtype;
    let (outer, mut len, inner) = split_at_dim(&x.sizes, dim);
    let rounds = (n as usize).min(len);
    let mut sizes = x.sizes.clone();
    let step = |v: &[f64], len: usize, f: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
        let mut out = Vec::with_capacity(outer * (len - 1) * inner);
        for o in 0..outer {
            let lane = &v[o * len * inner..(o + 1) * len * inner];
            for i in 0..len - 1 {
                for k in 0..inner {
                    out.push(f(lane[(i + 1) * inner + k], lane[i * inner + k]));
                }
            }
        }
        out
    };
    if dtype.is_float() || dtype == DType::Bool {
        let mut v = x.to_vec::<f64>();
        for _ in 0..rounds {
            v = if dtype == DType::Bool {
                step(&v, len, &|a, b| f64::from(u8::from(a != b)))
            } else {
                step(&v, len, &|a, b| a - b)
            };
            len -= 1;
        }
        sizes[dim] = len;
        Ok(vec![typed(v, &sizes, dtype)?.into()])
    } else {
        let mut v = x.to_vec::<i64>();
        for _ in 0..rounds {
            let mut out = Vec::with_capacity(outer * (len - 1) * inner);
            for o in 0..outer {
                let lane = &v[o * len * inner..(o + 1) * len * inner];
                for i in 0..len - 1 {
                    for k in 0..inner {
                        out.push(lane[(i + 1) * inner + k].wrapping_sub(lane[i * inner + k]));
                    }
                }
            }
            v = out;
            len -= 1;
        }
        sizes[dim] = len;
        Ok(vec![typed(v, &sizes, dtype)?.into()])
    }
}

/// cumsum / cumprod, and their in-place forms (which write the result through `self`).
fn cumsum(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let y = cumsum_value(ctx, &x)?;
    if ctx.target().contains("_.") {
        x.copy_from(&y)?;
        return Ok(vec![x.into()]);
    }
    Ok(vec![y.into()])
}

fn cumsum_value(ctx: &OpCtx, x: &Tensor) -> Result<Tensor> {
    let x = x.clone();
    let dim = wrap_dim(ctx, ctx.int("dim")?, x.rank())?;
    let prod = ctx.target().starts_with("aten.cumprod");
    let out = ctx.opt_dtype("dtype")?.unwrap_or(if x.dtype.is_float() {
        x.dtype
    } else {
        DType::I64
    });
    let shape = split_at_dim(&x.sizes, dim);
    if out.is_float() {
        // torch's CPU scans accumulate float in double.
        let mut v = x.to_vec::<f64>();
        for_each_lane(&mut v, shape, |l| {
            let mut acc = if prod { 1.0 } else { 0.0 };
            for a in l.iter_mut() {
                acc = if prod { acc * *a } else { acc + *a };
                *a = acc;
            }
        });
        typed(v, &x.sizes, out)
    } else {
        // Convert first so narrow integer outputs wrap as torch's do.
        let xc = if out != x.dtype && out != DType::Bool {
            x.to_dtype(out)?
        } else {
            x
        };
        let mut v = xc.to_vec::<i64>();
        for_each_lane(&mut v, shape, |l| {
            let mut acc: i64 = if prod { 1 } else { 0 };
            for a in l.iter_mut() {
                acc = if prod {
                    acc.wrapping_mul(*a)
                } else {
                    acc.wrapping_add(*a)
                };
                *a = acc;
            }
        });
        typed(v, &xc.sizes, out)
    }
}

/// torch's rule: a NaN always takes over (and each later NaN moves the index); otherwise
/// `>=` (cummax) or `<=` (cummin), so ties take the later index.
fn cum_extreme<T: Elem>(v: &mut [T], idx: &mut [i64], shape: (usize, usize, usize), min: bool) {
    let (outer, n, inner) = shape;
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let mut best = T::default();
            let mut bi = 0i64;
            for j in 0..n {
                let k = base + j * inner;
                let x = v[k];
                #[allow(clippy::eq_op)]
                let (xn, bn) = (x != x, best != best);
                if j == 0 || xn || (!bn && if min { x <= best } else { x >= best }) {
                    best = x;
                    bi = j as i64;
                }
                v[k] = best;
                idx[k] = bi;
            }
        }
    }
}

fn cummax(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let dim = wrap_dim(ctx, ctx.int("dim")?, x.rank())?;
    let min = ctx.target().starts_with("aten.cummin");
    let shape = split_at_dim(&x.sizes, dim);
    with_dtype!(x.dtype, T => {
        let mut v = x.to_vec::<T>();
        let mut idx = vec![0i64; v.len()];
        cum_extreme(&mut v, &mut idx, shape, min);
        Ok(vec![Tensor::from_vec(v, &x.sizes).into(), Tensor::from_vec(idx, &x.sizes).into()])
    }, else Err(ctx.err(format!("dtype {} is not supported", x.dtype))))
}

fn logcumsumexp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    need_float(ctx, "logcumsumexp", x.dtype)?;
    let dim = wrap_dim(ctx, ctx.int("dim")?, x.rank())?;
    let shape = split_at_dim(&x.sizes, dim);
    let mut v = x.to_vec::<f64>();
    for_each_lane(&mut v, shape, |l| {
        let mut acc = f64::NEG_INFINITY;
        for a in l.iter_mut() {
            let (hi, lo) = if acc >= *a { (acc, *a) } else { (*a, acc) };
            acc = if a.is_nan() || acc.is_nan() {
                f64::NAN
            } else if hi.is_infinite() {
                hi
            } else {
                hi + (lo - hi).exp().ln_1p()
            };
            *a = acc;
        }
    });
    Ok(vec![Tensor::from_vec(v, &x.sizes)
        .to_dtype(x.dtype)?
        .into()])
}
