//! View geometry: the sizes, strides and offset of every view op, computed as torch does
//! (`infer_size`, `computeStride`, slice clamping, expand strides). Each returns a tensor
//! sharing the input's storage; the kernels in `view.rs` and the copy ops build on them.

use super::{fresh, wrap_index};
use crate::cpu::Tensor;
use crate::error::Result;
use crate::ops::util::wrap_dim;
use crate::ops::OpCtx;

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
            if known == 0 || !numel.is_multiple_of(known) {
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
pub(crate) fn split_pieces(ctx: &OpCtx, n: usize, split_size: i64) -> Result<Vec<i64>> {
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
    let len = t.storage_len();
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
