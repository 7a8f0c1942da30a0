//! Rules of the shape family's copies: `cat` / `stack` / `hstack` / `vstack`,
//! `repeat` / `tile`, `repeat_interleave`, `pixel_shuffle` / `pixel_unshuffle` and `rot90`
//! (the views are in `meta.rs`). `copy.rs` registers each with its kernel.

use super::meta::swap;
use super::remap;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::one;

fn cat_of(ctx: &MetaCtx, ts: &[MetaTensor], dim: i64) -> RuleResult<MetaTensor> {
    // torch skips legacy empty 1-d tensors ([0]) in cat.
    let real: Vec<&MetaTensor> = ts.iter().filter(|t| t.sizes != [0]).collect();
    let dtype = ts
        .iter()
        .map(|t| t.dtype)
        .reduce(crate::cpu::promote::promote_types)
        .ok_or("cat expects a non-empty list of tensors")?;
    let Some(first) = real.first() else {
        return Ok(MetaTensor::new(dtype, vec![0]));
    };
    let d = ctx.wrap_dim(dim, first.rank())?;
    let mut s = first.sizes.clone();
    if s.is_empty() {
        return Err("zero-dimensional tensors cannot be concatenated".into());
    }
    s[d] = 0;
    for t in &real {
        let ok = t.rank() == first.rank()
            && t.sizes
                .iter()
                .zip(&first.sizes)
                .enumerate()
                .all(|(i, (a, b))| i == d || a == b);
        if !ok {
            return Err(format!(
                "sizes of tensors must match except in dimension {d}: {:?} and {:?}",
                first.sizes, t.sizes
            ));
        }
        s[d] += t.sizes[d];
    }
    Ok(MetaTensor::new(dtype, s))
}

pub(super) fn cat(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let ts = ctx.tensors("tensors")?;
    one(cat_of(ctx, &ts, ctx.int_or("dim", 0)?)?)
}

pub(super) fn stack(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let ts = ctx.tensors("tensors")?;
    let first = ts
        .first()
        .ok_or("stack expects a non-empty list of tensors")?;
    if let Some(t) = ts.iter().find(|t| t.sizes != first.sizes) {
        return Err(format!(
            "stack expects each tensor to be equal size, but got {:?} and {:?}",
            first.sizes, t.sizes
        ));
    }
    let d = ctx.wrap_dim(ctx.int_or("dim", 0)?, first.rank() + 1)?;
    let dtype = ts
        .iter()
        .map(|t| t.dtype)
        .reduce(crate::cpu::promote::promote_types)
        .unwrap_or(first.dtype);
    let mut s = first.sizes.clone();
    s.insert(d, ts.len());
    one(MetaTensor::new(dtype, s))
}

fn at_least(t: &MetaTensor, rank: usize) -> MetaTensor {
    let mut s = t.sizes.clone();
    while s.len() < rank {
        if rank == 2 && s.len() == 1 {
            s.insert(0, 1);
        } else {
            s.push(1);
        }
    }
    t.with_sizes(s)
}

pub(super) fn hstack(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let ts: Vec<MetaTensor> = ctx
        .tensors("tensors")?
        .iter()
        .map(|t| at_least(t, 1))
        .collect();
    let dim = if ts.first().is_some_and(|t| t.rank() == 1) {
        0
    } else {
        1
    };
    one(cat_of(ctx, &ts, dim)?)
}

pub(super) fn vstack(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let ts: Vec<MetaTensor> = ctx
        .tensors("tensors")?
        .iter()
        .map(|t| at_least(t, 2))
        .collect();
    one(cat_of(ctx, &ts, 0)?)
}

pub(super) fn repeat(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let reps = ctx.ints(remap::repeats_arg(ctx.target()))?;
    let reps = ctx.with_op(|c| remap::repeats_of(c, reps, t.rank()))?;
    let lead = reps.len() - t.rank();
    let s = reps
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let have = if i < lead { 1 } else { t.sizes[i - lead] };
            have.saturating_mul(r as usize)
        })
        .collect();
    one(t.with_sizes(s))
}

pub(super) fn repeat_interleave(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let out_size = ctx.opt_int("output_size")?;
    if !ctx.has("self") {
        let r = ctx.tensor("repeats")?;
        let n = out_size.ok_or("repeat_interleave(repeats) has a data-dependent size")?;
        return one(r.with_sizes(vec![n.max(0) as usize]));
    }
    let t = ctx.tensor("self")?;
    let (mut s, d) = match ctx.opt_int("dim")? {
        None => (vec![t.numel()], 0),
        Some(d) => (t.sizes.clone(), ctx.wrap_dim(d, t.rank())?),
    };
    if s.is_empty() {
        return one(t);
    }
    let n = s[d];
    let total = match ctx.arg("repeats") {
        Some(a @ crate::program::Arg::Tensor(_)) => {
            let r = ctx.tensor_of(a, "repeats")?;
            match out_size {
                Some(o) => o.max(0) as usize,
                None if r.numel() == 1 => {
                    return Err("repeat_interleave with a tensor of repeats depends on data".into())
                }
                None => {
                    return Err("repeat_interleave with a tensor of repeats depends on data".into())
                }
            }
        }
        _ => n.saturating_mul(ctx.int("repeats")?.max(0) as usize),
    };
    s[d] = total;
    one(t.with_sizes(s))
}

pub(super) fn pixel_shuffle(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() < 3 {
        return Err(format!(
            "pixel_shuffle expects at least 3 dims, got {:?}",
            t.sizes
        ));
    }
    let r = t.rank();
    let mut s = t.sizes.clone();
    if let Some(f) = ctx.opt_int("upscale_factor")? {
        let f = f.max(1) as usize;
        if s[r - 3] % f.saturating_mul(f) != 0 {
            return Err(format!(
                "pixel_shuffle expects its input's 'channel' dimension ({}) to be divisible by the square of upscale_factor ({f})",
                s[r - 3]
            ));
        }
        s[r - 3] /= f.saturating_mul(f);
        s[r - 2] = s[r - 2].saturating_mul(f);
        s[r - 1] = s[r - 1].saturating_mul(f);
    } else {
        let f = ctx.int("downscale_factor")?.max(1) as usize;
        if s[r - 2] % f != 0 || s[r - 1] % f != 0 {
            return Err(format!(
                "pixel_unshuffle expects height and width ({}, {}) to be divisible by downscale_factor ({f})",
                s[r - 2], s[r - 1]
            ));
        }
        s[r - 3] = s[r - 3].saturating_mul(f.saturating_mul(f));
        s[r - 2] /= f;
        s[r - 1] /= f;
    }
    one(t.with_sizes(s))
}

pub(super) fn rot90(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let r = ctx.with_op(|c| remap::Rot90::parse(c, t.rank()))?;
    if r.k % 2 == 1 {
        one(swap(ctx, &t, r.a as i64, r.b as i64)?)
    } else {
        one(t)
    }
}
