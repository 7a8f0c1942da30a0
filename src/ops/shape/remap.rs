//! The parameters of the ops that move elements along dims (roll, flip / fliplr / flipud,
//! rot90, repeat / tile), parsed once from the node and checked as torch checks them. The
//! CPU kernels (`copy.rs`), the shape rules (`meta_copy.rs`) and the GPU kernels
//! (`src/gpu/kernels/shape.rs`) all take them from here.

use crate::error::Result;
use crate::ops::util::wrap_dim;
use crate::ops::OpCtx;

/// roll's shifts, one per dim of `dims`; with no `dims` a single shift of the flattened
/// tensor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Roll {
    pub shifts: Vec<i64>,
    pub dims: Vec<i64>,
}

impl Roll {
    pub fn parse(ctx: &OpCtx) -> Result<Roll> {
        let shifts = ctx.ints("shifts")?;
        let dims = ctx.opt_ints("dims")?.unwrap_or_default();
        if dims.is_empty() && shifts.len() != 1 {
            return Err(ctx.err(format!(
                "shifts {shifts:?} needs dims when it has more than one entry"
            )));
        }
        if !dims.is_empty() && shifts.len() != dims.len() {
            return Err(ctx.err(format!("shifts {shifts:?} and dims {dims:?} must align")));
        }
        Ok(Roll { shifts, dims })
    }
}

/// `dims` wrapped against `rank`, each at most once (torch's check for flip).
pub(crate) fn dim_set(ctx: &OpCtx, dims: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut seen = vec![false; rank.max(1)];
    let mut v = Vec::with_capacity(dims.len());
    for &d in dims {
        let d = wrap_dim(ctx, d, rank)?;
        if std::mem::replace(&mut seen[d], true) {
            return Err(ctx.err(format!(
                "dim {d} appears multiple times in the list of dims"
            )));
        }
        v.push(d);
    }
    Ok(v)
}

/// The dims flip reverses for an input of `rank`: `dims` for flip, 1 for fliplr (rank >= 2),
/// 0 for flipud (rank >= 1).
pub(crate) fn flip_dims(ctx: &OpCtx, rank: usize) -> Result<Vec<usize>> {
    let dims = match ctx.target().split('.').nth(1) {
        Some("fliplr") if rank < 2 => return Err(ctx.err("fliplr: input must be >= 2-d")),
        Some("fliplr") => vec![1],
        Some("flipud") if rank < 1 => return Err(ctx.err("flipud: input must be >= 1-d")),
        Some("flipud") => vec![0],
        _ => ctx.ints("dims")?,
    };
    dim_set(ctx, &dims, rank)
}

/// rot90: `k` quarter turns (0..4) from dim `a` towards dim `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rot90 {
    pub k: i64,
    pub a: usize,
    pub b: usize,
}

impl Rot90 {
    pub fn parse(ctx: &OpCtx, rank: usize) -> Result<Rot90> {
        let k = ctx.int_or("k", 1)?.rem_euclid(4);
        let dims = ctx.opt_ints("dims")?.unwrap_or_else(|| vec![0, 1]);
        if dims.len() != 2 || rank < 2 {
            return Err(ctx.err(format!(
                "expected total rotation dims == 2 and a tensor of rank >= 2, got dims {dims:?}, rank {rank}"
            )));
        }
        let (a, b) = (wrap_dim(ctx, dims[0], rank)?, wrap_dim(ctx, dims[1], rank)?);
        if a == b {
            return Err(ctx.err(format!(
                "expected rotation dims to be different, got {dims:?}"
            )));
        }
        Ok(Rot90 { k, a, b })
    }
}

/// The argument holding the repeat counts (`dims` for tile, `repeats` for repeat).
pub(crate) fn repeats_arg(target: &str) -> &'static str {
    if target.starts_with("aten.tile") {
        "dims"
    } else {
        "repeats"
    }
}

/// The repeat count of every output dim for an input of `rank` (`reps` already resolved,
/// the shape rule resolves symbolic counts itself): tile pads `reps` with leading 1s, repeat
/// needs at least `rank` counts; none may be negative.
pub(crate) fn repeats_of(ctx: &OpCtx, mut reps: Vec<i64>, rank: usize) -> Result<Vec<i64>> {
    if ctx.target().starts_with("aten.tile") && reps.len() < rank {
        let mut r = vec![1; rank - reps.len()];
        r.extend(reps);
        reps = r;
    }
    if reps.len() < rank {
        return Err(ctx.err(format!("number of dimensions of repeat dims {reps:?} can not be smaller than number of dimensions of tensor ({rank})")));
    }
    if reps.iter().any(|&r| r < 0) {
        return Err(ctx.err(format!("repeats {reps:?} cannot be negative")));
    }
    Ok(reps)
}

/// [`repeats_of`] with the counts read from the node.
pub(crate) fn repeats(ctx: &OpCtx, rank: usize) -> Result<Vec<i64>> {
    repeats_of(ctx, ctx.ints(repeats_arg(ctx.target()))?, rank)
}
