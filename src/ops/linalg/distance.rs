//! Distances: `dist` (the p-norm of `self - other`, broadcast), `cdist` / `_cdist_forward` (`x1 [B.., P, M]`, `x2 [B.., R, M]` →
//! `[B.., P, R]`, batch dims broadcast) and `pdist` / `_pdist_forward` (`[N, M]` → the
//! `N (N - 1) / 2` distances of rows `i < j`, row-major). p = 0 counts differing
//! coordinates, p = ∞ takes the largest difference, else `(Σ |d|^p)^(1/p)`. Sums accumulate
//! in f64 and round once to the input dtype.
//!
//! Euclidean `cdist` follows torch's `compute_mode`: with `use_mm_for_euclid_dist` (1), or by
//! default when P or R exceeds 25, torch computes `sqrt(max(|x|² + |y|² - 2 x·y, 0))`, whose
//! rounding differs from the direct sum (a zero distance may come out slightly positive);
//! that formula is used then, in the input's dtype for the norms, as torch.

use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::elementwise::meta::broadcast;
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.cdist.default", cdist, cdist_rule);
    r.define("aten._cdist_forward.default", cdist, cdist_rule);
    r.define("aten.pdist.default", pdist, pdist_rule);
    r.define("aten._pdist_forward.default", pdist, pdist_rule);
    r.define("aten.dist.default", dist_op, dist_rule);
}

fn dist_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let (a, b) = (ctx.tensor("self")?, ctx.tensor("other")?);
    broadcast(&a.sizes, &b.sizes)?;
    if a.dtype != b.dtype || !a.dtype.is_float() {
        return Err(format!(
            "self and other must be floating-point tensors of one dtype, got {} and {}",
            a.dtype, b.dtype
        ));
    }
    Ok(vec![MValue::Tensor(a.with_sizes(vec![]))])
}

/// `dist(self, other, p=2)`: `‖self - other‖_p` over the broadcast elements, a 0-d tensor.
fn dist_op(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, b) = (ctx.tensor("self")?, ctx.tensor("other")?);
    let p = ctx.float_or("p", 2.0)?;
    check_p(ctx, p)?;
    if a.dtype != b.dtype || !a.dtype.is_float() {
        return Err(ctx.err(format!(
            "self and other must be floating-point tensors of one dtype, got {} and {}",
            a.dtype, b.dtype
        )));
    }
    let shape = broadcast(&a.sizes, &b.sizes).map_err(|e| ctx.err(e))?;
    // The difference rounds to the element type first, as torch's `self - other`.
    let (av, bv) = (a.expand_to(&shape)?, b.expand_to(&shape)?);
    let diff: Vec<f64> = with_dtype!(a.dtype, T => {
        av.to_vec::<T>()
            .iter()
            .zip(bv.to_vec::<T>())
            .map(|(x, y)| T::from_f64(x.to_f64() - y.to_f64()).to_f64())
            .collect()
    }, else return Err(ctx.err(format!("dtype {} is not supported", a.dtype))));
    let zeros = vec![0.0; diff.len()];
    let d = dist(&diff, &zeros, p);
    Ok(vec![Tensor::from_vec(vec![d], &[])
        .to_dtype(a.dtype)?
        .into()])
}

fn cdist_shapes(
    a: &[usize],
    b: &[usize],
) -> std::result::Result<(Vec<usize>, usize, usize, usize), String> {
    if a.len() < 2 || b.len() < 2 {
        return Err(format!(
            "x1 and x2 must have at least 2 dimensions, got shapes {a:?} and {b:?}"
        ));
    }
    let (m1, m2) = (a[a.len() - 1], b[b.len() - 1]);
    if m1 != m2 {
        return Err(format!(
            "x1 and x2 must have the same number of columns: {m1} vs {m2}"
        ));
    }
    let batch = broadcast(&a[..a.len() - 2], &b[..b.len() - 2])?;
    Ok((batch, a[a.len() - 2], b[b.len() - 2], m1))
}

fn cdist_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let (a, b) = (ctx.tensor("x1")?, ctx.tensor("x2")?);
    if a.dtype != b.dtype || !a.dtype.is_float() {
        return Err(format!(
            "x1 and x2 must be floating-point tensors of one dtype, got {} and {}",
            a.dtype, b.dtype
        ));
    }
    let (mut s, p, r, _) = cdist_shapes(&a.sizes, &b.sizes)?;
    s.extend([p, r]);
    Ok(vec![MValue::Tensor(a.with_sizes(s))])
}

fn pdist_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    if x.rank() != 2 {
        return Err(format!("pdist needs a 2-D input, got shape {:?}", x.sizes));
    }
    let n = x.sizes[0];
    Ok(vec![MValue::Tensor(
        x.with_sizes(vec![n * n.saturating_sub(1) / 2]),
    )])
}

/// The p-norm of the differences of two rows, in f64.
fn dist(a: &[f64], b: &[f64], p: f64) -> f64 {
    let d = a.iter().zip(b).map(|(x, y)| (x - y).abs());
    if p == 0.0 {
        d.filter(|&v| v != 0.0).count() as f64
    } else if p == f64::INFINITY {
        d.fold(0.0, |m, v| if v.is_nan() || v > m { v } else { m })
    } else if p == 1.0 {
        d.sum()
    } else if p == 2.0 {
        d.map(|v| v * v).sum::<f64>().sqrt()
    } else {
        d.map(|v| v.powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

fn check_p(ctx: &OpCtx, p: f64) -> Result<()> {
    if p.is_nan() || p < 0.0 {
        return Err(ctx.err(format!("p must be a non-negative number, got {p}")));
    }
    Ok(())
}

fn cdist(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, b) = (ctx.tensor("x1")?, ctx.tensor("x2")?);
    let p = ctx.float_or("p", 2.0)?;
    check_p(ctx, p)?;
    if a.dtype != b.dtype || !a.dtype.is_float() {
        return Err(ctx.err(format!(
            "x1 and x2 must be floating-point tensors of one dtype, got {} and {}",
            a.dtype, b.dtype
        )));
    }
    let (batch, pr, rr, m) = cdist_shapes(&a.sizes, &b.sizes).map_err(|e| ctx.err(e))?;
    let mode = ctx.opt_int("compute_mode")?.unwrap_or(0);
    let use_mm = p == 2.0 && (mode == 1 || (mode == 0 && (pr > 25 || rr > 25)));
    let mut sa = batch.clone();
    sa.extend([pr, m]);
    let mut sb = batch.clone();
    sb.extend([rr, m]);
    let mut out_sizes = batch.clone();
    out_sizes.extend([pr, rr]);
    crate::ops::factory::check_numel(ctx, out_sizes.iter().map(|&s| s as u64).product())?;
    let av = a.expand_to(&sa)?.to_vec::<f64>();
    let bv = b.expand_to(&sb)?.to_vec::<f64>();
    let nb: usize = batch.iter().product();
    with_dtype!(a.dtype, T => {
        let mut out: Vec<T> = Vec::with_capacity(nb * pr * rr);
        let rd = |v: f64| T::from_f64(v).to_f64();
        for k in 0..nb {
            let xa = &av[k * pr * m..(k + 1) * pr * m];
            let xb = &bv[k * rr * m..(k + 1) * rr * m];
            if use_mm {
                // torch's _euclidean_dist: norms in the input dtype, one matmul, clamp, sqrt.
                let norm = |row: &[f64]| rd(row.iter().map(|v| v * v).sum());
                let na: Vec<f64> = (0..pr).map(|i| norm(&xa[i * m..(i + 1) * m])).collect();
                let nbv: Vec<f64> = (0..rr).map(|j| norm(&xb[j * m..(j + 1) * m])).collect();
                for i in 0..pr {
                    for j in 0..rr {
                        let dot: f64 = (0..m).map(|c| -2.0 * xa[i * m + c] * xb[j * m + c]).sum();
                        out.push(T::from_f64(rd(dot + na[i] + nbv[j]).max(0.0).sqrt()));
                    }
                }
            } else {
                for i in 0..pr {
                    for j in 0..rr {
                        out.push(T::from_f64(dist(&xa[i * m..(i + 1) * m], &xb[j * m..(j + 1) * m], p)));
                    }
                }
            }
        }
        Ok(vec![Tensor::from_vec(out, &out_sizes).into()])
    }, else Err(ctx.err(format!("dtype {} is not supported", a.dtype))))
}

fn pdist(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let p = ctx.float_or("p", 2.0)?;
    check_p(ctx, p)?;
    if x.rank() != 2 || !x.dtype.is_float() {
        return Err(ctx.err(format!(
            "pdist needs a 2-D floating-point input, got {} {:?}",
            x.dtype, x.sizes
        )));
    }
    let (n, m) = (x.sizes[0], x.sizes[1]);
    let len = n * n.saturating_sub(1) / 2;
    crate::ops::factory::check_numel(ctx, len as u64)?;
    let v = x.to_vec::<f64>();
    let mut out = Vec::with_capacity(len);
    for i in 0..n {
        for j in i + 1..n {
            out.push(dist(&v[i * m..(i + 1) * m], &v[j * m..(j + 1) * m], p));
        }
    }
    Ok(vec![Tensor::from_vec(out, &[len])
        .to_dtype(x.dtype)?
        .into()])
}
