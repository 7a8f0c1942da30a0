//! `_unique2` / `unique_consecutive` / `unique_dim` / `unique_dim_consecutive` (data-dependent
//! output lengths: the shape rules give upper bounds, marked `data_dependent`) and `mode`.
//!
//! torch's CPU `_unique2` always sorts (its `sorted=False` path sorts too), and treats every
//! NaN as distinct; slices (`unique_dim`) sort lexicographically. Outputs that were not asked
//! for (`return_inverse`, `return_counts`) are empty `[0]` tensors, as torch's, except with a
//! dim, where torch always returns both.

use super::{cmp_nan_last, squeeze_dim};
use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::reduce::meta::reduce_shape;
use crate::ops::reduce::split_at_dim;
use crate::ops::util::wrap_dim;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;
use std::cmp::Ordering;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten._unique2.default", unique, unique_rule);
    r.define("aten._unique.default", unique, unique_rule);
    r.define("aten.unique_consecutive.default", unique, unique_rule);
    r.define("aten.unique_dim.default", unique, unique_rule);
    r.define("aten.unique_dim_consecutive.default", unique, unique_rule);
    r.define("aten.mode.default", mode, mode_rule);
}

/// What a unique target asks for (the CPU kernel's, the shape rule's and the GPU's,
/// `crate::gpu::dynamic`).
pub(crate) struct UniqueParams {
    /// Slices along this dim are the units (None: every element of the flattened input).
    pub dim: Option<i64>,
    /// Only runs of equal neighbours merge (no sort).
    pub consecutive: bool,
    pub inverse: bool,
    pub counts: bool,
    /// `_unique` returns (output, inverse) only.
    pub two_outputs: bool,
}

impl UniqueParams {
    /// The parameters of the node `ctx` runs.
    pub(crate) fn of(ctx: &OpCtx) -> Result<UniqueParams> {
        Ok(UniqueParams::parse(
            ctx.target(),
            ctx.opt_int("dim")?,
            ctx.bool_or("return_inverse", false)?,
            ctx.bool_or("return_counts", false)?,
        ))
    }
    fn parse(target: &str, dim: Option<i64>, inverse: bool, counts: bool) -> UniqueParams {
        // With a dim, torch's kernels (and its meta) return the inverse and the counts
        // whatever the flags say.
        UniqueParams {
            dim,
            consecutive: target.contains("consecutive"),
            inverse: inverse || dim.is_some(),
            counts: counts || dim.is_some(),
            two_outputs: target.starts_with("aten._unique."),
        }
    }
}

#[allow(clippy::eq_op)]
fn equal<T: Elem>(a: &[T], b: &[T]) -> bool {
    // NaN != NaN: every NaN is its own value, as torch's `equal_nan=false`.
    a.iter().zip(b).all(|(x, y)| x == y)
}

fn lex<T: Elem>(a: &[T], b: &[T]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| cmp_nan_last(x, y))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

fn unique(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let p = UniqueParams::of(ctx)?;
    // Units: `count` slices of `len` elements; `src` holds them one after another.
    let (src, d) = match p.dim {
        Some(dim) => {
            if x.rank() == 0 {
                return Err(ctx.err("unique with a dim needs a tensor of at least one dimension"));
            }
            let d = wrap_dim(ctx, dim, x.rank())?;
            // Move `dim` first so each slice is contiguous.
            let mut perm: Vec<usize> = (0..x.rank()).collect();
            perm.remove(d);
            perm.insert(0, d);
            let sizes = perm.iter().map(|&k| x.sizes[k]).collect();
            let strides = perm.iter().map(|&k| x.strides[k]).collect();
            (x.view_with(sizes, strides, x.offset).contiguous(), Some(d))
        }
        None => (x.contiguous(), None),
    };
    let count = match d {
        Some(d) => x.sizes[d],
        None => x.numel(),
    };
    let len = src.numel().checked_div(count).unwrap_or(0);
    with_dtype!(x.dtype, T => {
        let v = src.to_vec::<T>();
        let unit = |i: usize| &v[i * len..(i + 1) * len];
        let mut order: Vec<usize> = (0..count).collect();
        if !p.consecutive {
            order.sort_by(|&a, &b| lex(unit(a), unit(b)));
        }
        // Group runs of equal units in `order`.
        let mut reps: Vec<usize> = Vec::new();
        let mut counts: Vec<i64> = Vec::new();
        let mut inverse = vec![0i64; count];
        for (k, &i) in order.iter().enumerate() {
            if k == 0 || !equal(unit(order[k - 1]), unit(i)) {
                reps.push(i);
                counts.push(0);
            }
            *counts.last_mut().expect("a group was just opened") += 1;
            inverse[i] = reps.len() as i64 - 1;
        }
        let k = reps.len();
        let out: Vec<T> = reps.iter().flat_map(|&i| unit(i).iter().copied()).collect();
        let out = match d {
            None => Tensor::from_vec(out, &[k]),
            Some(d) => {
                // Back from dim-first to the input's order of dims.
                let mut first = vec![k];
                first.extend(x.sizes.iter().enumerate().filter(|&(j, _)| j != d).map(|(_, &s)| s));
                let t = Tensor::from_vec(out, &first);
                let mut perm: Vec<usize> = (1..x.rank()).collect();
                perm.insert(d, 0);
                let sizes = perm.iter().map(|&j| t.sizes[j]).collect();
                let strides = perm.iter().map(|&j| t.strides[j]).collect();
                t.view_with(sizes, strides, 0).contiguous()
            }
        };
        let inverse = if !p.inverse {
            Tensor::from_vec(Vec::<i64>::new(), &[0])
        } else if d.is_some() {
            Tensor::from_vec(inverse, &[count])
        } else {
            Tensor::from_vec(inverse, &x.sizes)
        };
        if p.two_outputs {
            return Ok(vec![out.into(), inverse.into()]);
        }
        let counts = if p.counts {
            Tensor::from_vec(counts, &[k])
        } else {
            Tensor::from_vec(Vec::<i64>::new(), &[0])
        };
        Ok(vec![out.into(), inverse.into(), counts.into()])
    }, else Err(ctx.err(format!("dtype {} is not supported", x.dtype))))
}

fn unique_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let p = UniqueParams::parse(
        ctx.target(),
        ctx.opt_int("dim")?,
        ctx.bool_or("return_inverse", false)?,
        ctx.bool_or("return_counts", false)?,
    );
    let dd = |dtype: DType, sizes: Vec<usize>| {
        MValue::Tensor(MetaTensor {
            dtype,
            sizes,
            data_dependent: true,
        })
    };
    let (out, units, inverse) = match p.dim {
        Some(dim) => {
            let d = ctx.wrap_dim(dim, x.rank())?;
            (x.sizes.clone(), x.sizes[d], vec![x.sizes[d]])
        }
        None => (vec![x.numel()], x.numel(), x.sizes.clone()),
    };
    let inverse = if p.inverse { inverse } else { vec![0] };
    let mut v = vec![
        dd(x.dtype, out),
        MValue::Tensor(MetaTensor::new(DType::I64, inverse)),
    ];
    if !p.two_outputs {
        v.push(dd(DType::I64, vec![if p.counts { units } else { 0 }]));
    }
    Ok(v)
}

/// `mode(self, dim=-1, keepdim=False)`: the most frequent value of each lane (the smallest
/// of equally frequent ones) and the index of its last occurrence, as torch's CPU kernel
/// (which walks the lane sorted by value, equal values in input order).
fn mode(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let keepdim = ctx.bool_or("keepdim", false)?;
    let dim = wrap_dim(ctx, ctx.int_or("dim", -1)?, x.rank())?;
    let (outer, n, inner) = split_at_dim(&x.sizes, dim);
    if n == 0 && x.numel() == 0 && x.rank() > 0 && outer * inner > 0 {
        return Err(ctx.err(format!(
            "mode(): expected reduction dim {dim} to have non-zero size"
        )));
    }
    let mut sizes = x.sizes.clone();
    if !sizes.is_empty() {
        sizes[dim] = 1;
    }
    let (vals, idx) = with_dtype!(x.dtype, T => {
        let v = x.to_vec::<T>();
        let mut vals = Vec::with_capacity(outer * inner);
        let mut idx = Vec::with_capacity(outer * inner);
        let mut lane: Vec<(T, usize)> = Vec::with_capacity(n);
        for o in 0..outer {
            for i in 0..inner {
                lane.clear();
                lane.extend((0..n).map(|j| (v[(o * n + j) * inner + i], j)));
                lane.sort_by(|a, b| cmp_nan_last(a.0, b.0));
                let (mut best, mut best_i, mut best_f, mut run) = (T::default(), 0usize, 0usize, 0usize);
                for k in 0..n {
                    run += 1;
                    if k + 1 == n || lane[k].0 != lane[k + 1].0 {
                        if run > best_f {
                            (best, best_i, best_f) = (lane[k].0, lane[k].1, run);
                        }
                        run = 0;
                    }
                }
                vals.push(best);
                idx.push(best_i as i64);
            }
        }
        (Tensor::from_vec(vals, &sizes), Tensor::from_vec(idx, &sizes))
    }, else return Err(ctx.err(format!("dtype {} is not supported", x.dtype))));
    Ok(vec![
        squeeze_dim(vals, dim, keepdim).into(),
        squeeze_dim(idx, dim, keepdim).into(),
    ])
}

fn mode_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let d = ctx.wrap_dim(ctx.int_or("dim", -1)?, x.rank())?;
    let keep = ctx.bool_or("keepdim", false)?;
    let v = x.with_sizes(if x.rank() == 0 {
        vec![]
    } else {
        reduce_shape(&x.sizes, &[d], keep)
    });
    Ok(vec![
        MValue::Tensor(v.clone()),
        MValue::Tensor(v.with_dtype(DType::I64)),
    ])
}
