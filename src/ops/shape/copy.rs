//! Shape ops that build new tensors: concatenation, the `*_scatter` ops, padding, roll, flip,
//! repeat, triangular masks, pixel shuffle.

use super::geometry::{
    diagonal_t, permute_t, reshape_t, select_t, slice_t, strided_view, transpose_t, unsqueeze_t,
};
use super::remap::{flip_dims, repeats, Roll, Rot90};
use super::{for_each_index, fresh, gather_storage, one};
use crate::cpu::promote::promote_types;
use crate::cpu::Tensor;
use crate::error::Result;
use crate::ops::util::wrap_dim;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;

/// Each target once, with its CPU kernel and its shape rule (`meta_copy.rs`).
pub(super) fn register(r: &mut OpTable) {
    use super::meta_copy as mc;
    use crate::ops::elementwise::meta::same;
    r.define("aten.cat.default", cat, mc::cat);
    r.define("aten.concat.default", cat, mc::cat);
    r.define("aten.concatenate.default", cat, mc::cat);
    r.define("aten.stack.default", stack, mc::stack);
    r.define("aten.hstack.default", hstack, mc::hstack);
    r.define("aten.vstack.default", vstack, mc::vstack);
    r.define("aten.slice_scatter.default", slice_scatter, same);
    r.define("aten.select_scatter.default", select_scatter, same);
    r.define("aten.diagonal_scatter.default", diagonal_scatter, same);
    r.define("aten.as_strided_scatter.default", as_strided_scatter, same);
    r.define("aten.roll.default", roll, same);
    r.define("aten.flip.default", flip, same);
    r.define("aten.fliplr.default", flip, same);
    r.define("aten.flipud.default", flip, same);
    r.define("aten.repeat.default", repeat, mc::repeat);
    r.define("aten.tile.default", repeat, mc::repeat);
    r.define_op(
        "aten.repeat_interleave",
        repeat_interleave,
        mc::repeat_interleave,
    );
    r.define("aten.tril.default", tril, same);
    r.define("aten.triu.default", triu, same);
    r.define("aten.tril_.default", tril_, same);
    r.define("aten.triu_.default", triu_, same);
    r.define(
        "aten.pixel_shuffle.default",
        pixel_shuffle,
        mc::pixel_shuffle,
    );
    r.define(
        "aten.pixel_unshuffle.default",
        pixel_unshuffle,
        mc::pixel_shuffle,
    );
    r.define("aten.rot90.default", rot90, mc::rot90);
}

/// For each output dimension, where each output index reads from in the source dimension
/// (`None` = the fill value): flip, roll, pad, repeat are all such per-dimension maps.
pub(super) type DimMap = Vec<Option<usize>>;

/// A new tensor whose element at `[i0, i1, ...]` is `src[map0[i0], map1[i1], ...]`.
pub(super) fn gather_dims(src: &Tensor, maps: &[DimMap], fill: f64) -> Result<Tensor> {
    debug_assert_eq!(maps.len(), src.rank());
    let sizes: Vec<usize> = maps.iter().map(Vec::len).collect();
    // Stride contribution of every output index, per dimension.
    let contrib: Vec<Vec<Option<usize>>> = maps
        .iter()
        .zip(&src.strides)
        .map(|(m, &st)| m.iter().map(|o| o.map(|i| i * st)).collect())
        .collect();
    let mut offs = Vec::with_capacity(sizes.iter().product());
    for_each_index(&sizes, |idx| {
        let mut o = Some(src.offset);
        for (d, &i) in idx.iter().enumerate() {
            o = o.and_then(|o| contrib[d][i].map(|c| o + c));
        }
        offs.push(o);
    });
    gather_storage(src, &offs, fill, &sizes)
}

pub(super) fn identity(n: usize) -> DimMap {
    (0..n).map(Some).collect()
}

fn tensors_arg(ctx: &OpCtx) -> Result<Vec<Tensor>> {
    ctx.tensors("tensors")
}

/// `cat`, with torch's legacy rule that 1-d empty tensors are skipped whatever their shape
/// and every input takes part in the dtype promotion.
pub(crate) fn cat_t(ctx: &OpCtx, ts: &[Tensor], dim: i64) -> Result<Tensor> {
    if ts.is_empty() {
        return Err(ctx.err("expected a non-empty list of Tensors"));
    }
    let dtype = ts
        .iter()
        .skip(1)
        .fold(ts[0].dtype, |a, t| promote_types(a, t.dtype));
    let parts: Vec<&Tensor> = ts
        .iter()
        .filter(|t| !(t.rank() == 1 && t.sizes[0] == 0))
        .collect();
    let Some(first) = parts.first() else {
        return Tensor::zeros(dtype, &ts[0].sizes);
    };
    if let Some(z) = parts.iter().find(|t| t.rank() == 0) {
        return Err(ctx.err(format!(
            "zero-dimensional tensor (of shape {:?}) cannot be concatenated",
            z.sizes
        )));
    }
    let d = wrap_dim(ctx, dim, first.rank())?;
    let mut sizes = first.sizes.clone();
    sizes[d] = 0;
    for (i, t) in parts.iter().enumerate() {
        let same = t.rank() == first.rank()
            && (0..t.rank()).all(|k| k == d || t.sizes[k] == first.sizes[k]);
        if !same {
            return Err(ctx.err(format!("sizes of tensors must match except in dimension {d}: expected {:?}, got {:?} for tensor {i}", first.sizes, t.sizes)));
        }
        sizes[d] += t.sizes[d];
    }
    let out = Tensor::zeros(dtype, &sizes)?;
    let mut start = 0;
    for t in parts {
        let n = t.sizes[d] as i64;
        slice_t(ctx, &out, d as i64, Some(start), Some(start + n), 1)?.copy_from(t)?;
        start += n;
    }
    Ok(out)
}

fn cat(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let ts = tensors_arg(ctx)?;
    one(cat_t(ctx, &ts, ctx.int_or("dim", 0)?)?)
}

fn stack(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let ts = tensors_arg(ctx)?;
    let dim = ctx.int_or("dim", 0)?;
    if let Some((i, t)) = ts.iter().enumerate().find(|(_, t)| t.sizes != ts[0].sizes) {
        return Err(ctx.err(format!("stack expects each tensor to be equal size, but got {:?} at entry 0 and {:?} at entry {i}", ts[0].sizes, t.sizes)));
    }
    let r = ts.first().map_or(0, Tensor::rank);
    let d = wrap_dim(ctx, dim, r + 1)? as i64;
    let us = ts
        .iter()
        .map(|t| unsqueeze_t(ctx, t, d))
        .collect::<Result<Vec<_>>>()?;
    one(cat_t(ctx, &us, d)?)
}

fn atleast(ctx: &OpCtx, t: &Tensor, rank: usize) -> Result<Tensor> {
    let mut shape: Vec<i64> = t.sizes.iter().map(|&s| s as i64).collect();
    while shape.len() < rank {
        shape.insert(0, 1);
    }
    reshape_t(ctx, t, &shape)
}

fn hstack(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let ts = tensors_arg(ctx)?
        .iter()
        .map(|t| atleast(ctx, t, 1))
        .collect::<Result<Vec<_>>>()?;
    let dim = if ts.first().is_some_and(|t| t.rank() == 1) {
        0
    } else {
        1
    };
    one(cat_t(ctx, &ts, dim)?)
}

fn vstack(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let ts = tensors_arg(ctx)?
        .iter()
        .map(|t| atleast(ctx, t, 2))
        .collect::<Result<Vec<_>>>()?;
    one(cat_t(ctx, &ts, 0)?)
}

/// Copy `src` into `view` (a view of a fresh copy of self), requiring equal shapes.
fn scatter_into(ctx: &OpCtx, out: Tensor, view: Tensor, src: &Tensor) -> Result<Vec<RValue>> {
    if view.sizes != src.sizes {
        return Err(ctx.err(format!("expected src to have a size equal to the slice of self: src size {:?}, slice size {:?}", src.sizes, view.sizes)));
    }
    view.copy_from(src)?;
    one(out)
}

fn slice_scatter(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (out, src) = (fresh(&ctx.tensor("self")?)?, ctx.tensor("src")?);
    let v = slice_t(
        ctx,
        &out,
        ctx.int_or("dim", 0)?,
        ctx.opt_int("start")?,
        ctx.opt_int("end")?,
        ctx.int_or("step", 1)?,
    )?;
    scatter_into(ctx, out, v, &src)
}

fn select_scatter(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (out, src) = (fresh(&ctx.tensor("self")?)?, ctx.tensor("src")?);
    let v = select_t(ctx, &out, ctx.int("dim")?, ctx.int("index")?)?;
    scatter_into(ctx, out, v, &src)
}

fn diagonal_scatter(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (out, src) = (fresh(&ctx.tensor("self")?)?, ctx.tensor("src")?);
    let v = diagonal_t(
        ctx,
        &out,
        ctx.int_or("offset", 0)?,
        ctx.int_or("dim1", 0)?,
        ctx.int_or("dim2", 1)?,
    )?;
    scatter_into(ctx, out, v, &src)
}

fn as_strided_scatter(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (out, src) = (fresh(&ctx.tensor("self")?)?, ctx.tensor("src")?);
    // The geometry addresses the (contiguous) copy's storage; torch's clone keeps the input's
    // offset-free layout for the contiguous inputs graphs produce here.
    let off = ctx.opt_int("storage_offset")?.unwrap_or(0);
    let v = strided_view(ctx, &out, &ctx.ints("size")?, &ctx.ints("stride")?, off)?;
    scatter_into(ctx, out, v, &src)
}

// ---------------------------------------------------------------------------------------
// Roll, flip, repeat.

fn roll(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let Roll { shifts, dims } = Roll::parse(ctx)?;
    if dims.is_empty() {
        // Roll the flattened tensor, then restore the shape.
        let flat = reshape_t(ctx, &t, &[-1])?;
        let n = flat.numel() as i64;
        let map: DimMap = (0..n)
            .map(|i| Some((i - shifts[0]).rem_euclid(n.max(1)) as usize))
            .collect();
        let rolled = gather_dims(&flat, &[map], 0.0)?;
        let shape: Vec<i64> = t.sizes.iter().map(|&s| s as i64).collect();
        return one(reshape_t(ctx, &rolled, &shape)?);
    }
    let mut maps: Vec<DimMap> = t.sizes.iter().map(|&n| identity(n)).collect();
    for (&s, &d) in shifts.iter().zip(&dims) {
        let d = wrap_dim(ctx, d, t.rank())?;
        let n = t.sizes[d] as i64;
        // Successive shifts of the same dim compose.
        let prev = maps[d].clone();
        maps[d] = (0..n)
            .map(|i| prev[(i - s).rem_euclid(n.max(1)) as usize])
            .collect();
    }
    one(gather_dims(&t, &maps, 0.0)?)
}

/// flip, fliplr and flipud.
fn flip(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let dims = flip_dims(ctx, t.rank())?;
    one(flip_t(&t, &dims)?)
}

/// `t` reversed along `dims` (distinct and in range).
fn flip_t(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let mut maps: Vec<DimMap> = t.sizes.iter().map(|&n| identity(n)).collect();
    if t.rank() > 0 {
        for &d in dims {
            maps[d].reverse();
        }
    }
    gather_dims(t, &maps, 0.0)
}

/// repeat and tile.
fn repeat(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let reps = repeats(ctx, t.rank())?;
    let lead = reps.len() - t.rank();
    // View the input with leading size-1 dims, then map out index i to i mod size.
    let mut sizes = vec![1; lead];
    sizes.extend(&t.sizes);
    let mut strides = vec![0; lead];
    strides.extend(&t.strides);
    let src = t.view_with(sizes.clone(), strides, t.offset);
    let maps: Vec<DimMap> = sizes
        .iter()
        .zip(&reps)
        .map(|(&n, &r)| (0..n * r as usize).map(|i| Some(i % n.max(1))).collect())
        .collect();
    one(gather_dims(&src, &maps, 0.0)?)
}

fn repeat_interleave(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    // `repeat_interleave.Tensor(repeats)`: the indices 0,0,..,1,1,.. of the repeat counts.
    if !ctx.has("self") {
        let reps = ctx.tensor("repeats")?;
        let counts = super::index_values(ctx, &reps, "repeats")?;
        if reps.rank() > 1 || counts.iter().any(|&c| c < 0) {
            return Err(ctx.err("repeats must be a 1-d tensor of non-negative counts"));
        }
        check_repeats(ctx, &counts, 1, reps.dtype)?;
        let idx: Vec<i64> = counts
            .iter()
            .enumerate()
            .flat_map(|(i, &c)| std::iter::repeat_n(i as i64, c as usize))
            .collect();
        let n = idx.len();
        return one(Tensor::from_vec(idx, &[n]).to_dtype(reps.dtype)?);
    }
    let t = ctx.tensor("self")?;
    let (src, d) = match ctx.opt_int("dim")? {
        None => (reshape_t(ctx, &t, &[-1])?, 0),
        Some(d) => (t.clone(), wrap_dim(ctx, d, t.rank())?),
    };
    let n = src.sizes.get(d).copied().unwrap_or(1);
    let counts: Vec<i64> = match ctx.opt_tensor("repeats") {
        Ok(Some(r)) => {
            let v = super::index_values(ctx, &r, "repeats")?;
            if v.len() == 1 {
                vec![v[0]; n]
            } else if v.len() == n && r.rank() == 1 {
                v
            } else {
                return Err(ctx.err(format!(
                    "repeats must have the same size as input along dim {d}: {} vs {n}",
                    v.len()
                )));
            }
        }
        _ => vec![ctx.int("repeats")?; n],
    };
    if counts.iter().any(|&c| c < 0) {
        return Err(ctx.err("repeats can not be negative"));
    }
    check_repeats(ctx, &counts, src.numel() / n.max(1), src.dtype)?;
    let mut maps: Vec<DimMap> = src.sizes.iter().map(|&s| identity(s)).collect();
    if src.rank() == 0 {
        return one(fresh(&src)?);
    }
    maps[d] = counts
        .iter()
        .enumerate()
        .flat_map(|(i, &c)| std::iter::repeat_n(Some(i), c as usize))
        .collect();
    one(gather_dims(&src, &maps, 0.0)?)
}

/// The output of repeat_interleave (`sum(counts)` rows of `row` elements) within the
/// limits, checked before its index map is built: the counts come from tensor data or
/// from the program.
fn check_repeats(ctx: &OpCtx, counts: &[i64], row: usize, dtype: crate::DType) -> Result<()> {
    let total = counts
        .iter()
        .fold(0u64, |a, &c| a.saturating_add(c.max(0) as u64));
    crate::ops::factory::check_alloc(ctx, total.saturating_mul(row as u64), dtype)
}

// ---------------------------------------------------------------------------------------
// Triangular masks, pixel shuffle, rot90.

/// Zero the elements of the last two dims outside the triangle (`keep(row, col)`).
fn tri_t(ctx: &OpCtx, t: &Tensor, keep: impl Fn(i64, i64) -> bool) -> Result<Tensor> {
    let r = t.rank();
    if r < 2 {
        return Err(ctx.err("tril/triu: input tensor must have at least 2 dimensions"));
    }
    let out = fresh(t)?;
    let (rows, cols) = (t.sizes[r - 2], t.sizes[r - 1]);
    let mask: Vec<bool> = (0..rows * cols)
        .map(|k| keep((k / cols) as i64, (k % cols) as i64))
        .collect();
    {
        let mut d = out.write();
        with_dtype!(out.dtype, T => {
            let s = <T as crate::cpu::Elem>::slice_mut(&mut d).expect("fresh storage has the tensor's dtype");
            for (k, v) in s.iter_mut().enumerate() {
                if !mask[k % (rows * cols).max(1)] {
                    *v = T::default();
                }
            }
        }, else return Err(ctx.err(format!("dtype {} is not supported", out.dtype))));
    }
    Ok(out)
}

fn tril(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, k) = (ctx.tensor("self")?, ctx.int_or("diagonal", 0)?);
    one(tri_t(ctx, &t, |i, j| j - i <= k)?)
}

fn triu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, k) = (ctx.tensor("self")?, ctx.int_or("diagonal", 0)?);
    one(tri_t(ctx, &t, |i, j| j - i >= k)?)
}

fn tril_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, k) = (ctx.tensor("self")?, ctx.int_or("diagonal", 0)?);
    t.copy_from(&tri_t(ctx, &t, |i, j| j - i <= k)?)?;
    one(t)
}

fn triu_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, k) = (ctx.tensor("self")?, ctx.int_or("diagonal", 0)?);
    t.copy_from(&tri_t(ctx, &t, |i, j| j - i >= k)?)?;
    one(t)
}

fn dims_i64(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

fn pixel_shuffle(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let f = ctx.int("upscale_factor")?;
    let r = t.rank();
    if r < 3 || f <= 0 || t.sizes[r - 3] as i64 % (f * f) != 0 {
        return Err(ctx.err(format!("pixel_shuffle expects a tensor of rank >= 3 whose channel count is divisible by upscale_factor^2 ({f}^2), got {:?}", t.sizes)));
    }
    let lead = dims_i64(&t.sizes[..r - 3]);
    let (c, h, w) = (
        t.sizes[r - 3] as i64,
        t.sizes[r - 2] as i64,
        t.sizes[r - 1] as i64,
    );
    let mut shape = lead.clone();
    shape.extend([c / (f * f), f, f, h, w]);
    let v = reshape_t(ctx, &t, &shape)?;
    let n = lead.len() as i64;
    let mut perm: Vec<i64> = (0..n).collect();
    perm.extend([n, n + 3, n + 1, n + 4, n + 2]);
    let p = permute_t(ctx, &v, &perm)?;
    let mut out = lead;
    out.extend([c / (f * f), h * f, w * f]);
    one(fresh(&reshape_t(ctx, &p, &out)?)?)
}

fn pixel_unshuffle(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let f = ctx.int("downscale_factor")?;
    let r = t.rank();
    if r < 3 || f <= 0 || t.sizes[r - 2] as i64 % f != 0 || t.sizes[r - 1] as i64 % f != 0 {
        return Err(ctx.err(format!("pixel_unshuffle expects a tensor of rank >= 3 whose height and width are divisible by downscale_factor {f}, got {:?}", t.sizes)));
    }
    let lead = dims_i64(&t.sizes[..r - 3]);
    let (c, h, w) = (
        t.sizes[r - 3] as i64,
        t.sizes[r - 2] as i64,
        t.sizes[r - 1] as i64,
    );
    let mut shape = lead.clone();
    shape.extend([c, h / f, f, w / f, f]);
    let v = reshape_t(ctx, &t, &shape)?;
    let n = lead.len() as i64;
    let mut perm: Vec<i64> = (0..n).collect();
    perm.extend([n, n + 2, n + 4, n + 1, n + 3]);
    let p = permute_t(ctx, &v, &perm)?;
    let mut out = lead;
    out.extend([c * f * f, h / f, w / f]);
    one(fresh(&reshape_t(ctx, &p, &out)?)?)
}

fn rot90(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let Rot90 { k, a, b } = Rot90::parse(ctx, t.rank())?;
    let (ai, bi) = (a as i64, b as i64);
    one(match k {
        1 => transpose_t(ctx, &flip_t(&t, &[b])?, ai, bi)?,
        2 => flip_t(&t, &[a, b])?,
        3 => transpose_t(ctx, &flip_t(&t, &[a])?, ai, bi)?,
        _ => fresh(&t)?,
    })
}
