//! View kernels: tensors sharing the input's storage (geometry in `geometry.rs`), the ops
//! that split a tensor into views, and the `_copy` variants of functionalized graphs.

use super::geometry::{
    diagonal_t, expand_t, infer_size, narrow_t, permute_t, reshape_t, select_t, slice_t,
    split_pieces, split_sizes_t, squeeze_dims, strided_view, transpose_t, unfold_t, unsqueeze_t,
    view_t,
};
use super::{fresh, one};
use crate::cpu::Tensor;
use crate::error::Result;
use crate::ops::util::wrap_dim;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.view.default", view, super::meta::view);
    r.define("aten._unsafe_view.default", reshape, super::meta::view);
    r.define("aten.reshape.default", reshape, super::meta::view);
    r.define(
        "aten._reshape_alias.default",
        reshape_alias,
        super::meta::view,
    );
    r.define("aten.view_as.default", view_as, super::meta::view_as);
    r.define("aten.reshape_as.default", reshape_as, super::meta::view_as);
    r.define("aten.flatten.using_ints", flatten, super::meta::flatten);
    r.define("aten.unflatten.int", unflatten, super::meta::unflatten);
    r.define_op("aten.squeeze", squeeze, super::meta::squeeze);
    r.define("aten.unsqueeze.default", unsqueeze, super::meta::unsqueeze);
    r.define("aten.permute.default", permute, super::meta::permute);
    r.define("aten.transpose.int", transpose, super::meta::transpose);
    r.define("aten.swapaxes.default", swapaxes, super::meta::transpose);
    r.define("aten.swapdims.default", transpose, super::meta::transpose);
    r.define("aten.t.default", t, super::meta::t_);
    r.define("aten.numpy_T.default", numpy_t, super::meta::numpy_t);
    r.define("aten.mT.default", mt, super::meta::mt);
    r.define("aten.adjoint.default", mt, super::meta::mt);
    r.define_op("aten.movedim", movedim, super::meta::movedim);
    r.define_op("aten.moveaxis", movedim, super::meta::movedim);
    r.define("aten.expand.default", expand, super::meta::expand);
    r.define("aten.expand_as.default", expand_as, super::meta::expand_as);
    r.define(
        "aten.broadcast_to.default",
        broadcast_to,
        super::meta::expand,
    );
    r.define("aten.slice.Tensor", slice, super::meta::slice);
    r.define("aten.select.int", select, super::meta::select);
    r.define_op("aten.narrow", narrow, super::meta::narrow);
    r.define(
        "aten.as_strided.default",
        as_strided,
        super::meta::as_strided,
    );
    r.define("aten.unbind.int", unbind, super::meta::unbind);
    r.define("aten.split.Tensor", split, super::meta::split);
    r.define("aten.unsafe_split.Tensor", split, super::meta::split);
    r.define("aten.split.sizes", split_with_sizes, super::meta::split);
    r.define(
        "aten.split_with_sizes.default",
        split_with_sizes,
        super::meta::split,
    );
    r.define(
        "aten.unsafe_split_with_sizes.default",
        split_with_sizes,
        super::meta::split,
    );
    r.define("aten.chunk.default", chunk, super::meta::chunk);
    r.define("aten.unsafe_chunk.default", chunk, super::meta::chunk);
    r.define_op("aten.tensor_split", tensor_split, super::meta::tensor_split);
    r.define("aten.diagonal.default", diagonal, super::meta::diagonal);
    r.define("aten.unfold.default", unfold, super::meta::unfold);
    // Functionalized graphs (edge dialects) name copying variants of the views.
    r.define("aten.view_copy.default", view_copy, super::meta::view);
    r.define(
        "aten._unsafe_view_copy.default",
        reshape_copy,
        super::meta::view,
    );
    r.define(
        "aten.permute_copy.default",
        permute_copy,
        super::meta::permute,
    );
    r.define(
        "aten.transpose_copy.int",
        transpose_copy,
        super::meta::transpose,
    );
    r.define("aten.t_copy.default", t_copy, super::meta::t_);
    r.define("aten.expand_copy.default", expand_copy, super::meta::expand);
    r.define("aten.slice_copy.Tensor", slice_copy, super::meta::slice);
    r.define("aten.select_copy.int", select_copy, super::meta::select);
    r.define_op("aten.squeeze_copy", squeeze_copy, super::meta::squeeze);
    r.define(
        "aten.unsqueeze_copy.default",
        unsqueeze_copy,
        super::meta::unsqueeze,
    );
    r.define(
        "aten.alias_copy.default",
        alias_copy,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.detach_copy.default",
        alias_copy,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.as_strided_copy.default",
        as_strided_copy,
        super::meta::as_strided,
    );
    r.define(
        "aten.diagonal_copy.default",
        diagonal_copy,
        super::meta::diagonal,
    );
    r.define("aten.unfold_copy.default", unfold_copy, super::meta::unfold);
    r.define_op("aten.narrow_copy", narrow_copy, super::meta::narrow);
    r.define("aten.unbind_copy.int", unbind_copy, super::meta::unbind);
    r.define("aten.split_copy.Tensor", split_copy, super::meta::split);
    r.define(
        "aten.split_with_sizes_copy.default",
        split_with_sizes_copy,
        super::meta::split,
    );
}

fn tensors(v: Vec<Tensor>) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Tensors(v)])
}

// ---------------------------------------------------------------------------------------
// Kernels.

fn view(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(view_t(ctx, &t, &ctx.ints("size")?)?)
}

fn reshape(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let shape = if ctx.has("shape") {
        ctx.ints("shape")?
    } else {
        ctx.ints("size")?
    };
    one(reshape_t(ctx, &t, &shape)?)
}

fn reshape_alias(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let (size, stride) = (ctx.ints("size")?, ctx.ints("stride")?);
    strided_view(ctx, &t, &size, &stride, t.offset as i64).and_then(one)
}

fn view_as(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, o) = (ctx.tensor("self")?, ctx.tensor("other")?);
    let shape: Vec<i64> = o.sizes.iter().map(|&s| s as i64).collect();
    one(view_t(ctx, &t, &shape)?)
}

fn reshape_as(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, o) = (ctx.tensor("self")?, ctx.tensor("other")?);
    let shape: Vec<i64> = o.sizes.iter().map(|&s| s as i64).collect();
    one(reshape_t(ctx, &t, &shape)?)
}

fn flatten(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() == 0 {
        return one(reshape_t(ctx, &t, &[1])?);
    }
    let s = wrap_dim(ctx, ctx.int_or("start_dim", 0)?, t.rank())?;
    let e = wrap_dim(ctx, ctx.int_or("end_dim", -1)?, t.rank())?;
    if s > e {
        return Err(ctx.err(format!(
            "flatten() has invalid args: start_dim {s} cannot come after end_dim {e}"
        )));
    }
    if s == e {
        return one(t);
    }
    let mut shape: Vec<i64> = t.sizes[..s].iter().map(|&x| x as i64).collect();
    shape.push(t.sizes[s..=e].iter().product::<usize>() as i64);
    shape.extend(t.sizes[e + 1..].iter().map(|&x| x as i64));
    one(reshape_t(ctx, &t, &shape)?)
}

fn unflatten(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let d = wrap_dim(ctx, ctx.int("dim")?, t.rank())?;
    let sizes = ctx.ints("sizes")?;
    let inner = infer_size(ctx, &sizes, t.sizes.get(d).copied().unwrap_or(1))?;
    let mut shape: Vec<i64> = t.sizes[..d].iter().map(|&x| x as i64).collect();
    shape.extend(inner.iter().map(|&x| x as i64));
    shape.extend(t.sizes[d + 1..].iter().map(|&x| x as i64));
    one(view_t(ctx, &t, &shape)?)
}

fn squeeze(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let dims = ctx.opt_ints("dim")?;
    one(squeeze_dims(ctx, &t, dims.as_deref())?)
}

fn unsqueeze(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(unsqueeze_t(ctx, &t, ctx.int("dim")?)?)
}

fn permute(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(permute_t(ctx, &t, &ctx.ints("dims")?)?)
}

fn transpose(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(transpose_t(ctx, &t, ctx.int("dim0")?, ctx.int("dim1")?)?)
}

fn swapaxes(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(transpose_t(ctx, &t, ctx.int("axis0")?, ctx.int("axis1")?)?)
}

fn t(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() > 2 {
        return Err(ctx.err(format!(
            "t() expects a tensor with <= 2 dimensions, but self is {}D",
            t.rank()
        )));
    }
    if t.rank() < 2 {
        return one(t);
    }
    one(transpose_t(ctx, &t, 0, 1)?)
}

fn numpy_t(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let dims: Vec<i64> = (0..t.rank() as i64).rev().collect();
    one(permute_t(ctx, &t, &dims)?)
}

fn mt(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() < 2 {
        return Err(ctx.err(format!(
            "expects a tensor with at least 2 dimensions, got {}",
            t.rank()
        )));
    }
    one(transpose_t(ctx, &t, -2, -1)?)
}

fn movedim(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let (src, dst) = (ctx.ints("source")?, ctx.ints("destination")?);
    let r = t.rank();
    if src.len() != dst.len() {
        return Err(ctx.err(format!(
            "source {src:?} and destination {dst:?} must have the same number of dims"
        )));
    }
    let src: Vec<usize> = src
        .iter()
        .map(|&d| wrap_dim(ctx, d, r))
        .collect::<Result<_>>()?;
    let dst: Vec<usize> = dst
        .iter()
        .map(|&d| wrap_dim(ctx, d, r))
        .collect::<Result<_>>()?;
    let mut perm: Vec<Option<usize>> = vec![None; r.max(1)];
    let mut used = vec![false; r.max(1)];
    for (&s, &d) in src.iter().zip(&dst) {
        if perm[d].is_some() || used[s] {
            return Err(ctx.err("repeated dim in source or destination"));
        }
        perm[d] = Some(s);
        used[s] = true;
    }
    let mut rest = (0..r).filter(|d| !used[*d]);
    let perm: Vec<i64> = (0..r)
        .map(|i| perm[i].or_else(|| rest.next()).unwrap_or(i) as i64)
        .collect();
    one(permute_t(ctx, &t, &perm)?)
}

fn expand(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(expand_t(ctx, &t, &ctx.ints("size")?)?)
}

fn expand_as(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, o) = (ctx.tensor("self")?, ctx.tensor("other")?);
    let shape: Vec<i64> = o.sizes.iter().map(|&s| s as i64).collect();
    one(expand_t(ctx, &t, &shape)?)
}

fn broadcast_to(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(expand_t(ctx, &t, &ctx.ints("size")?)?)
}

fn slice(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let v = slice_t(
        ctx,
        &t,
        ctx.int_or("dim", 0)?,
        ctx.opt_int("start")?,
        ctx.opt_int("end")?,
        ctx.int_or("step", 1)?,
    )?;
    one(v)
}

fn select(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(select_t(ctx, &t, ctx.int("dim")?, ctx.int("index")?)?)
}

fn narrow(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let start = match ctx.opt_tensor("start") {
        Ok(Some(s)) => {
            if s.numel() != 1 || s.dtype.is_float() {
                return Err(ctx.err("start must be a 0-dim integral tensor"));
            }
            s.to_vec::<i64>()[0]
        }
        _ => ctx.int("start")?,
    };
    one(narrow_t(
        ctx,
        &t,
        ctx.int("dim")?,
        start,
        ctx.int("length")?,
    )?)
}

fn as_strided(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let off = ctx.opt_int("storage_offset")?.unwrap_or(t.offset as i64);
    one(strided_view(
        ctx,
        &t,
        &ctx.ints("size")?,
        &ctx.ints("stride")?,
        off,
    )?)
}

fn unbind(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() == 0 {
        return Err(ctx.err("dimension specified as 0 but tensor has no dimensions"));
    }
    let d = wrap_dim(ctx, ctx.int_or("dim", 0)?, t.rank())?;
    let v = (0..t.sizes[d])
        .map(|i| select_t(ctx, &t, d as i64, i as i64))
        .collect::<Result<Vec<_>>>()?;
    tensors(v)
}

fn split(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let dim = ctx.int_or("dim", 0)?;
    if t.rank() == 0 {
        return Err(ctx.err("split expects at least a 1-dimensional tensor"));
    }
    let d = wrap_dim(ctx, dim, t.rank())?;
    let pieces = split_pieces(ctx, t.sizes[d], ctx.int("split_size")?)?;
    tensors(split_sizes_t(ctx, &t, &pieces, dim)?)
}

fn split_with_sizes(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let sizes = if ctx.has("split_sizes") {
        ctx.ints("split_sizes")?
    } else {
        ctx.ints("split_size")?
    };
    tensors(split_sizes_t(ctx, &t, &sizes, ctx.int_or("dim", 0)?)?)
}

fn chunk(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let chunks = ctx.int("chunks")?;
    if chunks <= 0 {
        return Err(ctx.err(format!(
            "chunk expects `chunks` to be greater than 0, got: {chunks}"
        )));
    }
    if t.rank() == 0 {
        return Err(ctx.err("chunk expects at least a 1-dimensional tensor"));
    }
    let dim = ctx.int_or("dim", 0)?;
    let d = wrap_dim(ctx, dim, t.rank())?;
    let n = t.sizes[d] as i64;
    let split_size = (n + chunks - 1) / chunks;
    // An empty dimension still gives `chunks` empty pieces (torch calls split_with_sizes here).
    let pieces = if split_size == 0 && n == 0 {
        vec![0; chunks as usize]
    } else {
        split_pieces(ctx, n as usize, split_size)?
    };
    tensors(split_sizes_t(ctx, &t, &pieces, dim)?)
}

fn tensor_split(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() == 0 {
        return Err(ctx.err("tensor_split expects at least a 1-dimensional tensor"));
    }
    let dim = ctx.int_or("dim", 0)?;
    let d = wrap_dim(ctx, dim, t.rank())?;
    let n = t.sizes[d] as i64;
    enum By {
        Sections(i64),
        Indices(Vec<i64>),
    }
    let by = if ctx.has("sections") {
        By::Sections(ctx.int("sections")?)
    } else if ctx.has("indices") {
        By::Indices(ctx.ints("indices")?)
    } else {
        let x = ctx.tensor("tensor_indices_or_sections")?;
        let v = super::index_values(ctx, &x, "tensor_indices_or_sections")?;
        if x.rank() == 0 {
            By::Sections(v[0])
        } else {
            By::Indices(v)
        }
    };
    let bounds: Vec<i64> = match by {
        By::Sections(s) => {
            if s <= 0 {
                return Err(ctx.err(format!("number of sections must be larger than 0, got {s}")));
            }
            let (q, r) = (n / s, n % s);
            let mut acc = 0;
            (0..s - 1)
                .map(|i| {
                    acc += q + (i < r) as i64;
                    acc
                })
                .collect()
        }
        By::Indices(v) => v,
    };
    // Each piece is [prev, next) clamped the way slice clamps.
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut prev = 0i64;
    for &b in bounds.iter().chain(std::iter::once(&n)) {
        out.push(slice_t(ctx, &t, dim, Some(prev), Some(b), 1)?);
        prev = b;
    }
    tensors(out)
}

fn diagonal(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(diagonal_t(
        ctx,
        &t,
        ctx.int_or("offset", 0)?,
        ctx.int_or("dim1", 0)?,
        ctx.int_or("dim2", 1)?,
    )?)
}

fn unfold(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(unfold_t(
        ctx,
        &t,
        ctx.int("dimension")?,
        ctx.int("size")?,
        ctx.int("step")?,
    )?)
}

fn alias(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    one(ctx.tensor("self")?)
}

// `_copy` variants: the view, materialized.
macro_rules! copy_variant {
    ($name:ident, $view:ident) => {
        fn $name(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
            $view(ctx)?
                .into_iter()
                .map(|v| match v {
                    RValue::Tensor(t) => fresh(&t).map(RValue::Tensor),
                    RValue::Tensors(ts) => ts
                        .iter()
                        .map(fresh)
                        .collect::<Result<Vec<_>>>()
                        .map(RValue::Tensors),
                    other => Ok(other),
                })
                .collect()
        }
    };
}
copy_variant!(view_copy, view);
copy_variant!(reshape_copy, reshape);
copy_variant!(permute_copy, permute);
copy_variant!(transpose_copy, transpose);
copy_variant!(t_copy, t);
copy_variant!(expand_copy, expand);
copy_variant!(slice_copy, slice);
copy_variant!(select_copy, select);
copy_variant!(squeeze_copy, squeeze);
copy_variant!(unsqueeze_copy, unsqueeze);
copy_variant!(alias_copy, alias);
copy_variant!(as_strided_copy, as_strided);
copy_variant!(diagonal_copy, diagonal);
copy_variant!(unfold_copy, unfold);
copy_variant!(narrow_copy, narrow);
copy_variant!(unbind_copy, unbind);
copy_variant!(split_copy, split);
copy_variant!(split_with_sizes_copy, split_with_sizes);
