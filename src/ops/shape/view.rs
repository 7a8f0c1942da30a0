//! Views: tensors sharing the input's storage with new sizes, strides and offset (torch's
//! view semantics, including when `reshape` may view and when it must copy), the ops that
//! split a tensor into views, and their `_copy` variants.

use super::{fresh, one, wrap_index};
use crate::cpu::Tensor;
use crate::error::Result;
use crate::ops::util::wrap_dim;
use crate::ops::{OpCtx, Registry};
use crate::runtime::RValue;

pub(super) fn register(r: &mut Registry) {
    r.add("aten.view.default", view);
    r.add("aten._unsafe_view.default", reshape);
    r.add("aten.reshape.default", reshape);
    r.add("aten._reshape_alias.default", reshape_alias);
    r.add("aten.view_as.default", view_as);
    r.add("aten.reshape_as.default", reshape_as);
    r.add("aten.flatten.using_ints", flatten);
    r.add("aten.unflatten.int", unflatten);
    r.add_op("aten.squeeze", squeeze);
    r.add("aten.unsqueeze.default", unsqueeze);
    r.add("aten.permute.default", permute);
    r.add("aten.transpose.int", transpose);
    r.add("aten.swapaxes.default", swapaxes);
    r.add("aten.swapdims.default", transpose);
    r.add("aten.t.default", t);
    r.add("aten.numpy_T.default", numpy_t);
    r.add("aten.mT.default", mt);
    r.add("aten.adjoint.default", mt);
    r.add_op("aten.movedim", movedim);
    r.add_op("aten.moveaxis", movedim);
    r.add("aten.expand.default", expand);
    r.add("aten.expand_as.default", expand_as);
    r.add("aten.broadcast_to.default", broadcast_to);
    r.add("aten.slice.Tensor", slice);
    r.add("aten.select.int", select);
    r.add_op("aten.narrow", narrow);
    r.add("aten.as_strided.default", as_strided);
    r.add("aten.unbind.int", unbind);
    r.add("aten.split.Tensor", split);
    r.add("aten.unsafe_split.Tensor", split);
    r.add("aten.split.sizes", split_with_sizes);
    r.add("aten.split_with_sizes.default", split_with_sizes);
    r.add("aten.unsafe_split_with_sizes.default", split_with_sizes);
    r.add("aten.chunk.default", chunk);
    r.add("aten.unsafe_chunk.default", chunk);
    r.add_op("aten.tensor_split", tensor_split);
    r.add("aten.diagonal.default", diagonal);
    r.add("aten.unfold.default", unfold);
    r.add("aten.alias.default", alias);
    r.add("aten.detach.default", alias);
    r.add("aten.detach_.default", alias);
    r.add("aten.contiguous.default", contiguous);
    // Functionalized graphs (edge dialects) name copying variants of the views.
    r.add("aten.view_copy.default", view_copy);
    r.add("aten._unsafe_view_copy.default", reshape_copy);
    r.add("aten.permute_copy.default", permute_copy);
    r.add("aten.transpose_copy.int", transpose_copy);
    r.add("aten.t_copy.default", t_copy);
    r.add("aten.expand_copy.default", expand_copy);
    r.add("aten.slice_copy.Tensor", slice_copy);
    r.add("aten.select_copy.int", select_copy);
    r.add_op("aten.squeeze_copy", squeeze_copy);
    r.add("aten.unsqueeze_copy.default", unsqueeze_copy);
    r.add("aten.alias_copy.default", alias_copy);
    r.add("aten.detach_copy.default", alias_copy);
    r.add("aten.as_strided_copy.default", as_strided_copy);
    r.add("aten.diagonal_copy.default", diagonal_copy);
    r.add("aten.unfold_copy.default", unfold_copy);
    r.add("aten.unbind_copy.int", unbind_copy);
    r.add("aten.split_copy.Tensor", split_copy);
    r.add("aten.split_with_sizes_copy.default", split_with_sizes_copy);
}

// ---------------------------------------------------------------------------------------
// Geometry helpers (usable from the copy ops and the index family).

/// Resolve one `-1` in a requested shape against `numel` (torch's `infer_size`).
pub(crate) fn infer_size(ctx: &OpCtx, shape: &[i64], numel: usize) -> Result<Vec<usize>> {
    let bad = || {
        ctx.err(format!(
            "shape {shape:?} is invalid for input of size {numel}"
        ))
    };
    let mut infer = None;
    let mut known: usize = 1;
    for (i, &s) in shape.iter().enumerate() {
        if s == -1 {
            if infer.replace(i).is_some() {
                return Err(ctx.err(format!(
                    "only one dimension can be inferred in shape {shape:?}"
                )));
            }
        } else if s < 0 {
            return Err(ctx.err(format!("invalid shape dimension {s} in {shape:?}")));
        } else {
            known = known.checked_mul(s as usize).ok_or_else(bad)?;
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&s| s.max(0) as usize).collect();
    match infer {
        Some(i) => {
            // torch refuses to infer against zero known elements (the -1 would be arbitrary).
            if known == 0 || numel % known != 0 {
                return Err(bad());
            }
            out[i] = numel / known;
        }
        None if known != numel => return Err(bad()),
        None => {}
    }
    Ok(out)
}

/// Strides that view `old` (sizes/strides) as `new` without copying, if any exist
/// (ATen's `computeStride`).
pub(crate) fn compute_stride(
    old_sizes: &[usize],
    old_strides: &[usize],
    new: &[usize],
) -> Option<Vec<usize>> {
    if old_sizes.is_empty() {
        return Some(vec![1; new.len()]);
    }
    let numel: usize = old_sizes.iter().product();
    if numel == 0 && old_sizes == new {
        return Some(old_strides.to_vec());
    }
    let mut ns = vec![0usize; new.len()];
    if numel == 0 {
        for d in (0..new.len()).rev() {
            ns[d] = if d + 1 == new.len() {
                1
            } else {
                new[d + 1].max(1) * ns[d + 1]
            };
        }
        return Some(ns);
    }
    let mut view_d = new.len() as isize - 1;
    let mut chunk_base = *old_strides.last()?;
    let (mut tensor_numel, mut view_numel) = (1usize, 1usize);
    for td in (0..old_sizes.len()).rev() {
        tensor_numel *= old_sizes[td];
        if td == 0 || (old_sizes[td - 1] != 1 && old_strides[td - 1] != tensor_numel * chunk_base) {
            while view_d >= 0 && (view_numel < tensor_numel || new[view_d as usize] == 1) {
                ns[view_d as usize] = view_numel * chunk_base;
                view_numel *= new[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if td > 0 {
                chunk_base = old_strides[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(ns)
}

/// `view`: an error when the strides do not allow it (as torch).
pub(crate) fn view_t(ctx: &OpCtx, t: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let sizes = infer_size(ctx, shape, t.numel())?;
    match compute_stride(&t.sizes, &t.strides, &sizes) {
        Some(st) => Ok(t.view_with(sizes, st, t.offset)),
        None => Err(ctx.err(format!(
            "view size {sizes:?} is not compatible with input tensor's size {:?} and stride {:?} \
             (at least one dimension spans across two contiguous subspaces); use reshape instead",
            t.sizes, t.strides
        ))),
    }
}

/// `reshape`: a view when possible, else a contiguous copy.
pub(crate) fn reshape_t(ctx: &OpCtx, t: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let sizes = infer_size(ctx, shape, t.numel())?;
    match compute_stride(&t.sizes, &t.strides, &sizes) {
        Some(st) => Ok(t.view_with(sizes, st, t.offset)),
        None => {
            let c = fresh(t)?;
            let st = crate::tensor::contiguous_strides(&sizes);
            Ok(c.view_with(sizes, st, 0))
        }
    }
}

pub(crate) fn permute_t(ctx: &OpCtx, t: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let r = t.rank();
    if dims.len() != r {
        return Err(ctx.err(format!(
            "number of dims {dims:?} does not match the rank {r} of the input"
        )));
    }
    let mut seen = vec![false; r];
    let (mut sizes, mut strides) = (Vec::with_capacity(r), Vec::with_capacity(r));
    for &d in dims {
        let d = wrap_dim(ctx, d, r)?;
        if std::mem::replace(&mut seen[d], true) {
            return Err(ctx.err(format!("repeated dim {d} in permutation {dims:?}")));
        }
        sizes.push(t.sizes[d]);
        strides.push(t.strides[d]);
    }
    Ok(t.view_with(sizes, strides, t.offset))
}

pub(crate) fn transpose_t(ctx: &OpCtx, t: &Tensor, d0: i64, d1: i64) -> Result<Tensor> {
    let r = t.rank();
    let (a, b) = (wrap_dim(ctx, d0, r)?, wrap_dim(ctx, d1, r)?);
    if r == 0 {
        return Ok(t.clone());
    }
    let (mut sizes, mut strides) = (t.sizes.clone(), t.strides.clone());
    sizes.swap(a, b);
    strides.swap(a, b);
    Ok(t.view_with(sizes, strides, t.offset))
}

pub(crate) fn unsqueeze_t(ctx: &OpCtx, t: &Tensor, dim: i64) -> Result<Tensor> {
    let d = wrap_dim(ctx, dim, t.rank() + 1)?;
    let stride = if d >= t.rank() {
        1
    } else {
        t.sizes[d] * t.strides[d]
    };
    let (mut sizes, mut strides) = (t.sizes.clone(), t.strides.clone());
    sizes.insert(d, 1);
    strides.insert(d, stride);
    Ok(t.view_with(sizes, strides, t.offset))
}

/// `slice` with torch's clamping of start/end (negative wrap once, then clamp to the size).
pub(crate) fn slice_t(
    ctx: &OpCtx,
    t: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    if t.rank() == 0 {
        return Err(ctx.err("slice() cannot be applied to a 0-dim tensor"));
    }
    if step <= 0 {
        return Err(ctx.err(format!("slice step must be positive, got {step}")));
    }
    let d = wrap_dim(ctx, dim, t.rank())?;
    let n = t.sizes[d] as i64;
    let mut s = start.unwrap_or(0);
    let mut e = end.unwrap_or(i64::MAX);
    if s < 0 {
        s += n;
    }
    if e < 0 {
        e += n;
    }
    s = s.clamp(0, n);
    e = e.clamp(s, n);
    let len = ((e - s) + step - 1) / step;
    let (mut sizes, mut strides) = (t.sizes.clone(), t.strides.clone());
    let offset = if len > 0 {
        t.offset + s as usize * t.strides[d]
    } else {
        t.offset
    };
    sizes[d] = len as usize;
    strides[d] *= step as usize;
    Ok(t.view_with(sizes, strides, offset))
}

pub(crate) fn select_t(ctx: &OpCtx, t: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
    if t.rank() == 0 {
        return Err(ctx.err("select() cannot be applied to a 0-dim tensor"));
    }
    let d = wrap_dim(ctx, dim, t.rank())?;
    let i = wrap_index(ctx, index, t.sizes[d], d)?;
    let (mut sizes, mut strides) = (t.sizes.clone(), t.strides.clone());
    let offset = t.offset + i * t.strides[d];
    sizes.remove(d);
    strides.remove(d);
    Ok(t.view_with(sizes, strides, offset))
}

pub(crate) fn narrow_t(
    ctx: &OpCtx,
    t: &Tensor,
    dim: i64,
    start: i64,
    length: i64,
) -> Result<Tensor> {
    if t.rank() == 0 {
        return Err(ctx.err("narrow() cannot be applied to a 0-dim tensor"));
    }
    let d = wrap_dim(ctx, dim, t.rank())?;
    let n = t.sizes[d] as i64;
    if length < 0 {
        return Err(ctx.err(format!(
            "narrow(): length must be non-negative, got {length}"
        )));
    }
    if start < -n || start > n {
        return Err(ctx.err(format!(
            "start out of range (expected to be in range of [{}, {n}], but got {start})",
            -n
        )));
    }
    let s = if start < 0 { start + n } else { start };
    if s > n - length {
        return Err(ctx.err(format!(
            "start ({s}) + length ({length}) exceeds dimension size ({n}) of dimension {d}"
        )));
    }
    slice_t(ctx, t, d as i64, Some(s), Some(s + length), 1)
}

pub(crate) fn diagonal_t(
    ctx: &OpCtx,
    t: &Tensor,
    offset: i64,
    dim1: i64,
    dim2: i64,
) -> Result<Tensor> {
    let r = t.rank();
    let (a, b) = (wrap_dim(ctx, dim1, r)?, wrap_dim(ctx, dim2, r)?);
    if a == b || r < 2 {
        return Err(ctx.err(format!("diagonal dimensions cannot be identical ({dim1}, {dim2}) and need a tensor of rank >= 2")));
    }
    let (sa, sb) = (t.sizes[a] as i64, t.sizes[b] as i64);
    let (len, mut off) = if offset >= 0 {
        (
            (sa.min(sb - offset)).max(0),
            t.offset + offset as usize * t.strides[b],
        )
    } else {
        (
            (sa + offset).min(sb).max(0),
            t.offset + (-offset) as usize * t.strides[a],
        )
    };
    if len == 0 {
        off = t.offset;
    }
    let mut sizes = Vec::with_capacity(r - 1);
    let mut strides = Vec::with_capacity(r - 1);
    for i in 0..r {
        if i != a && i != b {
            sizes.push(t.sizes[i]);
            strides.push(t.strides[i]);
        }
    }
    sizes.push(len as usize);
    strides.push(t.strides[a] + t.strides[b]);
    Ok(t.view_with(sizes, strides, off))
}

pub(crate) fn expand_t(ctx: &OpCtx, t: &Tensor, size: &[i64]) -> Result<Tensor> {
    let n = size.len();
    let r = t.rank();
    if n < r {
        return Err(ctx.err(format!("the number of sizes provided ({n}) must be greater or equal to the number of dimensions in the tensor ({r})")));
    }
    let (mut sizes, mut strides) = (vec![0usize; n], vec![0usize; n]);
    for i in (0..n).rev() {
        let k = i as isize - (n - r) as isize;
        let (mut s, mut st) = if k >= 0 {
            (t.sizes[k as usize], t.strides[k as usize])
        } else {
            (
                1,
                if i + 1 < n {
                    sizes[i + 1] * strides[i + 1]
                } else {
                    1
                },
            )
        };
        let want = size[i];
        let target = if want == -1 {
            if k < 0 {
                return Err(ctx.err(format!(
                    "the expanded size -1 is not allowed in a leading, non-existing dimension {i}"
                )));
            }
            s
        } else if want < 0 {
            return Err(ctx.err(format!("invalid expanded size {want}")));
        } else {
            want as usize
        };
        if s != target {
            if s != 1 {
                return Err(ctx.err(format!(
                    "the expanded size of the tensor ({target}) must match the existing size ({s}) at non-singleton dimension {i}; target sizes {size:?}, tensor sizes {:?}",
                    t.sizes
                )));
            }
            s = target;
            st = 0;
        }
        sizes[i] = s;
        strides[i] = st;
    }
    Ok(t.view_with(sizes, strides, t.offset))
}

pub(crate) fn squeeze_dims(ctx: &OpCtx, t: &Tensor, dims: Option<&[i64]>) -> Result<Tensor> {
    let r = t.rank();
    let mut drop = vec![false; r];
    match dims {
        None => (0..r).for_each(|d| drop[d] = t.sizes[d] == 1),
        Some(ds) => {
            for &d in ds {
                let d = wrap_dim(ctx, d, r)?;
                if r > 0 && t.sizes[d] == 1 {
                    drop[d] = true;
                }
            }
        }
    }
    let (mut sizes, mut strides) = (Vec::new(), Vec::new());
    for (d, &dropped) in drop.iter().enumerate().take(r) {
        if !dropped {
            sizes.push(t.sizes[d]);
            strides.push(t.strides[d]);
        }
    }
    Ok(t.view_with(sizes, strides, t.offset))
}

/// Views of consecutive pieces of `sizes` along `dim`.
pub(crate) fn split_sizes_t(
    ctx: &OpCtx,
    t: &Tensor,
    sizes: &[i64],
    dim: i64,
) -> Result<Vec<Tensor>> {
    if t.rank() == 0 {
        return Err(ctx.err("split expects at least a 1-dimensional tensor"));
    }
    let d = wrap_dim(ctx, dim, t.rank())?;
    let total: i64 = sizes.iter().sum();
    if sizes.iter().any(|&s| s < 0) || total != t.sizes[d] as i64 {
        return Err(ctx.err(format!(
            "split sizes {sizes:?} must be non-negative and sum to the size {} of dimension {d}",
            t.sizes[d]
        )));
    }
    let mut start = 0;
    sizes
        .iter()
        .map(|&s| {
            let v = narrow_t(ctx, t, d as i64, start, s);
            start += s;
            v
        })
        .collect()
}

/// Piece sizes of `split(split_size)`: equal pieces, the last one smaller.
fn split_pieces(ctx: &OpCtx, n: usize, split_size: i64) -> Result<Vec<i64>> {
    if split_size < 0 || (split_size == 0 && n != 0) {
        return Err(ctx.err(format!(
            "split_size can only be 0 if the dimension size is 0, got {split_size} for size {n}"
        )));
    }
    if n == 0 {
        return Ok(vec![0]);
    }
    let s = split_size as usize;
    let count = n.div_ceil(s).max(1);
    Ok((0..count).map(|i| (s.min(n - i * s)) as i64).collect())
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

/// A view with explicit geometry, checked to stay inside the storage.
pub(crate) fn strided_view(
    ctx: &OpCtx,
    t: &Tensor,
    size: &[i64],
    stride: &[i64],
    offset: i64,
) -> Result<Tensor> {
    if size.len() != stride.len() || size.iter().chain(stride).any(|&x| x < 0) || offset < 0 {
        return Err(ctx.err(format!(
            "invalid geometry: size {size:?}, stride {stride:?}, storage offset {offset}"
        )));
    }
    let sizes: Vec<usize> = size.iter().map(|&s| s as usize).collect();
    let strides: Vec<usize> = stride.iter().map(|&s| s as usize).collect();
    let len = t.read().len();
    if !sizes.contains(&0) {
        let last = sizes
            .iter()
            .zip(&strides)
            .try_fold(offset as usize, |acc, (s, st)| {
                (s - 1).checked_mul(*st).and_then(|x| x.checked_add(acc))
            });
        if last.is_none_or(|l| l >= len) {
            return Err(ctx.err(format!(
                "setStorage: sizes {size:?}, strides {stride:?}, storage offset {offset} are out of bounds for a storage of {len} elements"
            )));
        }
    }
    Ok(t.view_with(sizes, strides, offset as usize))
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

pub(crate) fn unfold_t(ctx: &OpCtx, t: &Tensor, dim: i64, size: i64, step: i64) -> Result<Tensor> {
    let d = wrap_dim(ctx, dim, t.rank())?;
    let n = t.sizes.get(d).copied().unwrap_or(1) as i64;
    if size < 0 || size > n || step <= 0 {
        return Err(ctx.err(format!(
            "unfold: size {size} must be in [0, {n}] and step {step} positive (dimension {d})"
        )));
    }
    let (mut sizes, mut strides) = (t.sizes.clone(), t.strides.clone());
    let st = t.strides.get(d).copied().unwrap_or(1);
    if t.rank() > 0 {
        sizes[d] = ((n - size) / step + 1) as usize;
        strides[d] = st * step as usize;
    }
    sizes.push(size as usize);
    strides.push(st);
    Ok(t.view_with(sizes, strides, t.offset))
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

fn contiguous(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    // A contiguous input is returned as is (same storage), as torch does.
    one(if t.is_contiguous() { t } else { fresh(&t)? })
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
copy_variant!(unbind_copy, unbind);
copy_variant!(split_copy, split);
copy_variant!(split_with_sizes_copy, split_with_sizes);
