//! Indexing, concatenation and factories on the GPU (shaders/index.wgsl). These move 32-bit
//! words without looking at them, so one pipeline serves f32, int32/int64 (held as i32) and
//! bool alike.
//!
//! - gathers along one dim: `embedding`, `index_select`, `gather`, `index.Tensor` with one
//!   integer index tensor (leading `None`s allowed). Negative indices count from the end
//!   where torch's do (`index.Tensor`); an index outside the dim reads 0 and is reported
//!   (`gpu::fault`): the run fails with the error the CPU kernel gives.
//! - `cat` / `stack`: one strided copy per input into its slice of the output.
//! - `full`, `zeros`, `ones`, `empty` (zeros), `new_*`, the `*_like` forms of a contiguous
//!   tensor, `scalar_tensor`, and `arange` for integer dtypes, or f32: exact with integer
//!   bounds and step (up to 2^24), else from f32 pairs within an ulp of torch's CPU values
//!   (which it computes in f64; its CUDA and MPS kernels compute in f32).

use super::{grid, norm_dim, pad8, KernelCtx, Out, MAX_RANK};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::fault::IndexText;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{gpu_dtype, GTensor};
use crate::ops::Scalar;
use crate::program::Arg;
use bytemuck::{Pod, Zeroable};

pub const GATHER: Variant = Variant::new(Shader::Index, "gather");
pub const COPY: Variant = Variant::new(Shader::Index, "copy");
pub const FILL: Variant = Variant::new(Shader::Index, "fill");

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct IndexMeta {
    pub numel: u32,
    pub rank: u32,
    pub row: u32,
    pub flags: u32,
    pub shape: [u32; 8],
    pub src_strides: [u32; 8],
    pub idx_strides: [u32; 8],
    /// (source offset, index or destination offset, stride of the indexed dim, its size)
    pub offs: [u32; 4],
    pub value: [u32; 4],
}

fn is_int(d: DType) -> bool {
    matches!(d, DType::I64 | DType::I32)
}

/// How a gather reads its indices: whether negatives count from the end, and the fault site
/// an invalid one reports (`gpu::fault`).
#[derive(Clone, Copy)]
pub(crate) struct Indexing {
    wrap: bool,
    site: u32,
}

impl Indexing {
    /// Indices the backend computed itself (flat offsets, permutations), valid by
    /// construction: negatives wrap, and a fault would name no node.
    pub(crate) const INTERNAL: Indexing = Indexing {
        wrap: true,
        site: 0,
    };
    /// The node's own index argument, checked as its CPU kernel checks it (`text`):
    /// negatives wrap where that kernel wraps them.
    pub(crate) fn of(k: &KernelCtx, text: IndexText) -> Indexing {
        Indexing {
            wrap: matches!(text, IndexText::Range { .. }),
            site: k.fault_site(text),
        }
    }
}

/// out[coords] = src[src_strides . coords + idx[idx_strides . coords] * dim_stride].
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_gather(
    k: &mut KernelCtx,
    src: &GTensor,
    idx: &GTensor,
    shape: &[usize],
    src_strides: &[usize],
    idx_strides: &[usize],
    dim_stride: usize,
    dim_size: usize,
    ix: Indexing,
) -> Out {
    let numel: usize = shape.iter().product();
    if shape.len() > MAX_RANK
        || numel >= u32::MAX as usize
        || !k.fits(src)
        || !k.fits(idx)
        || !gpu_dtype(src.dtype)
        || !is_int(idx.dtype)
        || k.out_dtype(0) != Some(src.dtype)
    {
        return Ok(None);
    }
    let out = k.new_out(src.dtype, shape)?;
    dispatch_gather(
        k,
        &out,
        src,
        idx,
        shape,
        src_strides,
        idx_strides,
        dim_stride,
        dim_size,
        ix,
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// [`encode_gather`]'s dispatch into `out` (contiguous, `shape`).
#[allow(clippy::too_many_arguments)]
fn dispatch_gather(
    k: &mut KernelCtx,
    out: &GTensor,
    src: &GTensor,
    idx: &GTensor,
    shape: &[usize],
    src_strides: &[usize],
    idx_strides: &[usize],
    dim_stride: usize,
    dim_size: usize,
    ix: Indexing,
) -> crate::Result<()> {
    let numel: usize = shape.iter().product();
    k.ensure(src)?;
    k.ensure(idx)?;
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        let meta = IndexMeta {
            numel: numel as u32,
            rank: shape.len() as u32,
            row,
            flags: ix.wrap as u32,
            shape: pad8(shape),
            src_strides: pad8(src_strides),
            idx_strides: pad8(idx_strides),
            offs: [
                src.offset as u32,
                idx.offset as u32,
                dim_stride as u32,
                dim_size as u32,
            ],
            value: [ix.site, 0, 0, 0],
        };
        k.dispatch(
            &GATHER,
            bytemuck::bytes_of(&meta),
            &[(1, out), (2, src), (3, idx)],
            (gx, gy, 1),
        )?;
    }
    Ok(())
}

pub(super) fn embedding(k: &mut KernelCtx) -> Out {
    let (Some(w), Some(idx)) = (k.t("weight"), k.t("indices")) else {
        return Ok(None);
    };
    if w.rank() != 2 || idx.rank() + 1 > MAX_RANK {
        return Ok(None);
    }
    let mut shape = idx.sizes.clone();
    shape.push(w.sizes[1]);
    let mut ss = vec![0; idx.rank()];
    ss.push(w.strides[1]);
    let mut is = idx.strides.clone();
    is.push(0);
    let ix = Indexing::of(k, IndexText::Bounds { dim: 0 });
    if w.dtype == DType::F16 {
        return embedding_f16(k, &w, &idx, shape, is, ix);
    }
    encode_gather(k, &w, &idx, &shape, &ss, &is, w.strides[0], w.sizes[0], ix)
}

/// An f16 embedding (`--dtype f16`): its rows gathered as words, pairs of f16 (the f32 path
/// would convert the whole table each call). None where rows are not whole words.
fn embedding_f16(
    k: &mut KernelCtx,
    w: &GTensor,
    idx: &GTensor,
    mut shape: Vec<usize>,
    is: Vec<usize>,
    ix: Indexing,
) -> Out {
    let Some(ww) = w.as_f16_pairs() else {
        return Ok(None);
    };
    let numel: usize = shape.iter().product();
    if shape.len() > MAX_RANK
        || numel >= u32::MAX as usize
        || !k.fits(w)
        || !k.fits(idx)
        || !is_int(idx.dtype)
        || k.out_dtype(0) != Some(DType::F16)
    {
        return Ok(None);
    }
    let out = k.new_out(DType::F16, &shape)?;
    let Some(ow) = out.as_f16_pairs() else {
        return Ok(None);
    };
    let last = shape.len() - 1;
    shape[last] /= 2;
    let mut ss = vec![0; last];
    ss.push(1);
    dispatch_gather(
        k,
        &ow,
        &ww,
        idx,
        &shape,
        &ss,
        &is,
        ww.strides[0],
        ww.sizes[0],
        ix,
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

pub(super) fn index_select(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(idx)) = (k.t("self"), k.t("index")) else {
        return Ok(None);
    };
    if idx.rank() > 1 {
        return Ok(None);
    }
    if x.rank() == 0 {
        return Ok(None);
    }
    let Some(d) = norm_dim(k.op.int("dim")?, x.rank()) else {
        return Ok(None);
    };
    let n = idx.numel();
    let istride = idx.strides.first().copied().unwrap_or(0);
    let mut shape = x.sizes.clone();
    shape[d] = n;
    let mut ss = x.strides.clone();
    ss[d] = 0;
    let mut is = vec![0; x.rank()];
    is[d] = istride;
    let idx1 = idx.view(vec![n], vec![istride], idx.offset);
    let ix = Indexing::of(k, IndexText::Bounds { dim: d });
    encode_gather(k, &x, &idx1, &shape, &ss, &is, x.strides[d], x.sizes[d], ix)
}

pub(super) fn gather(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(idx)) = (k.t("self"), k.t("index")) else {
        return Ok(None);
    };
    if x.rank() == 0 || idx.rank() != x.rank() {
        return Ok(None);
    }
    let Some(d) = norm_dim(k.op.int("dim")?, x.rank()) else {
        return Ok(None);
    };
    if (0..x.rank()).any(|i| i != d && idx.sizes[i] > x.sizes[i]) {
        return Ok(None);
    }
    let mut ss = x.strides.clone();
    ss[d] = 0;
    let shape = idx.sizes.clone();
    let is = idx.strides.clone();
    let ix = Indexing::of(k, IndexText::Bounds { dim: d });
    encode_gather(k, &x, &idx, &shape, &ss, &is, x.strides[d], x.sizes[d], ix)
}

/// index.Tensor with exactly one integer index tensor (after any number of `None`s).
pub(super) fn index_tensor(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let Some(ids) = super::scatter::index_ids(k) else {
        return Ok(None);
    };
    let present: Vec<(usize, usize)> = ids
        .iter()
        .enumerate()
        .filter_map(|(i, id)| id.map(|id| (i, id)))
        .collect();
    if present.len() > 1 {
        return index_multi(k, &x, &present);
    }
    let [(d, id)] = present[..] else {
        return Ok(None);
    };
    let Some(idx) = k.env_t.get(id).and_then(|t| t.clone()) else {
        return Ok(None);
    };
    if d >= x.rank() || !is_int(idx.dtype) {
        return Ok(None);
    }
    let mut shape = x.sizes[..d].to_vec();
    shape.extend_from_slice(&idx.sizes);
    shape.extend_from_slice(&x.sizes[d + 1..]);
    let mut ss = x.strides[..d].to_vec();
    ss.extend(std::iter::repeat_n(0, idx.rank()));
    ss.extend_from_slice(&x.strides[d + 1..]);
    let mut is = vec![0; d];
    is.extend_from_slice(&idx.strides);
    is.extend(std::iter::repeat_n(0, x.rank() - d - 1));
    let ix = Indexing::of(k, IndexText::Range { dim: d });
    encode_gather(k, &x, &idx, &shape, &ss, &is, x.strides[d], x.sizes[d], ix)
}

/// index.Tensor with several index tensors on adjacent dims (`x[:, i, j]`): the result is
/// [dims before, broadcast index shape, dims after]. One gather per index: step j gathers
/// the j-th indexed dim with index j broadcast over the index shape, from the previous
/// step's result (whose leading dims already hold the index shape).
fn index_multi(k: &mut KernelCtx, x: &GTensor, present: &[(usize, usize)]) -> Out {
    let d0 = present[0].0;
    let n = present.len();
    if present.iter().enumerate().any(|(j, &(d, _))| d != d0 + j) || d0 + n > x.rank() {
        return Ok(None);
    }
    let mut idxs = Vec::with_capacity(n);
    for &(_, id) in present {
        match k.env_t.get(id).and_then(|t| t.clone()) {
            Some(t) if is_int(t.dtype) => idxs.push(t),
            _ => return Ok(None),
        }
    }
    let mut b: Vec<usize> = idxs[0].sizes.clone();
    for t in &idxs[1..] {
        match crate::cpu::broadcast_shapes(&b, &t.sizes) {
            Some(s) => b = s,
            None => return Ok(None),
        }
    }
    let pre = &x.sizes[..d0];
    let post = &x.sizes[d0 + n..];
    if pre.len() + b.len() + (n - 1) + post.len() > MAX_RANK {
        return Ok(None);
    }
    let mut y = x.clone();
    for (j, idx) in idxs.iter().enumerate() {
        let Some(ib) = idx.expand_to(&b) else {
            return Ok(None);
        };
        // y's dims: pre, [B if j > 0], n_j, n_{j+1}.., post. The gathered dim is at `gd`.
        let gd = if j == 0 { d0 } else { d0 + b.len() };
        let mut shape = pre.to_vec();
        shape.extend_from_slice(&b);
        shape.extend_from_slice(&y.sizes[gd + 1..]);
        let mut ss = y.strides[..d0].to_vec();
        if j == 0 {
            ss.extend(std::iter::repeat_n(0, b.len()));
        } else {
            ss.extend_from_slice(&y.strides[d0..gd]);
        }
        ss.extend_from_slice(&y.strides[gd + 1..]);
        let mut is = vec![0; d0];
        is.extend_from_slice(&ib.strides);
        is.extend(std::iter::repeat_n(0, y.rank() - gd - 1));
        let ix = Indexing::of(k, IndexText::Range { dim: d0 + j });
        let (stride, size) = (y.strides[gd], y.sizes[gd]);
        let Some(out) = encode_gather(k, &y, &ib, &shape, &ss, &is, stride, size, ix)? else {
            return Ok(None);
        };
        let [Slot::Tensor(t)] = &out[..] else {
            return Ok(None);
        };
        y = t.clone();
    }
    Ok(Some(vec![Slot::Tensor(y)]))
}

/// A strided copy of `src` into the view `dst` (same sizes), whose GPU copy must be current.
pub(super) fn copy_into(k: &mut KernelCtx, src: &GTensor, dst: &GTensor) -> Result<()> {
    k.ensure(dst)?;
    encode_copy(k, src, dst)
}

/// A strided copy of `src` into the view `dst` (same sizes) of a fresh output.
pub(super) fn encode_copy(k: &mut KernelCtx, src: &GTensor, dst: &GTensor) -> Result<()> {
    // complex64: its f32 pairs.
    if src.dtype == DType::Complex64 && dst.dtype == DType::Complex64 {
        return encode_copy(k, &src.as_pairs(), &dst.as_pairs());
    }
    let numel = src.numel();
    if numel == 0 {
        return Ok(());
    }
    k.ensure(src)?;
    let (gx, gy, row) = grid(numel, 64);
    let (shape, strides) = super::coalesce(&src.sizes, &[&src.strides, &dst.strides]);
    let meta = IndexMeta {
        numel: numel as u32,
        rank: shape.len() as u32,
        row,
        shape: pad8(&shape),
        src_strides: pad8(&strides[0]),
        idx_strides: pad8(&strides[1]),
        offs: [src.offset as u32, dst.offset as u32, 0, 0],
        ..Default::default()
    };
    k.dispatch(
        &COPY,
        bytemuck::bytes_of(&meta),
        &[(1, dst), (2, src)],
        (gx, gy, 1),
    )
}

/// cat and stack (stack = cat of the inputs unsqueezed at `dim`).
pub(super) fn cat(k: &mut KernelCtx) -> Out {
    let stack = k.target().starts_with("aten.stack");
    let Some(Arg::Tensors(ids)) = k.op.arg("tensors") else {
        return Ok(None);
    };
    let mut ts = Vec::new();
    for id in ids {
        match k.env_t.get(*id).and_then(|t| t.clone()) {
            Some(t) => ts.push(t),
            None => return Ok(None),
        }
    }
    let Some(dtype) = k.out_dtype(0) else {
        return Ok(None);
    };
    // complex64 parts are copied as their f32 pairs (`encode_copy`).
    if !(gpu_dtype(dtype) || dtype == DType::Complex64) || ts.is_empty() {
        return Ok(None);
    }
    // Mixed dtypes: each part converted to the promoted (output) dtype first.
    for t in ts.iter_mut() {
        if t.dtype == dtype {
            continue;
        }
        if t.dtype == DType::F16 || dtype == DType::F16 {
            return Ok(None);
        }
        match super::ints::convert(k, t, dtype)?.as_deref() {
            Some([Slot::Tensor(c)]) => *t = c.clone(),
            _ => return Ok(None),
        }
    }
    // hstack / vstack: cat of the parts made at least 1-D / 2-D.
    let op = k.target().rsplit_once('.').map_or("", |(o, _)| o);
    let (ts, dim) = match op {
        "aten.hstack" => {
            let ts: Vec<GTensor> = ts
                .into_iter()
                .map(|t| {
                    if t.rank() == 0 {
                        t.view(vec![1], vec![1], t.offset)
                    } else {
                        t
                    }
                })
                .collect();
            let dim = if ts[0].rank() == 1 { 0 } else { 1 };
            (ts, dim)
        }
        "aten.vstack" => {
            let ts: Vec<GTensor> = ts
                .into_iter()
                .map(|t| match t.rank() {
                    0 => t.view(vec![1, 1], vec![1, 1], t.offset),
                    1 => {
                        let (n, st) = (t.sizes[0], t.strides[0]);
                        t.view(vec![1, n], vec![n.max(1) * st, st], t.offset)
                    }
                    _ => t,
                })
                .collect();
            (ts, 0)
        }
        _ => {
            let dim = k.op.int_or("dim", 0)?;
            (ts, dim)
        }
    };
    let first = ts[0].clone();
    let parts: Vec<GTensor> = if stack {
        if ts.iter().any(|t| t.sizes != first.sizes) {
            return Ok(None);
        }
        let Some(d) = norm_dim(dim, first.rank() + 1) else {
            return Ok(None);
        };
        ts.iter()
            .map(|t| {
                let mut sizes = t.sizes.clone();
                let mut strides = t.strides.clone();
                sizes.insert(d, 1);
                strides.insert(d, 0);
                t.view(sizes, strides, t.offset)
            })
            .collect()
    } else {
        ts.into_iter()
            .filter(|t| !(t.rank() == 1 && t.sizes[0] == 0))
            .collect()
    };
    let Some(first) = parts.first().cloned() else {
        return Ok(None);
    };
    if first.rank() == 0 || first.rank() > MAX_RANK {
        return Ok(None);
    }
    // Stacked parts already carry the new dim.
    let Some(d) = norm_dim(dim, first.rank()) else {
        return Ok(None);
    };
    let mut sizes = first.sizes.clone();
    sizes[d] = 0;
    for t in &parts {
        if t.rank() != first.rank()
            || (0..t.rank()).any(|i| i != d && t.sizes[i] != first.sizes[i])
            || !k.fits(t)
        {
            return Ok(None);
        }
        sizes[d] += t.sizes[d];
    }
    if sizes.iter().product::<usize>() >= u32::MAX as usize {
        return Ok(None);
    }
    let out = k.new_out(dtype, &sizes)?;
    let mut start = 0;
    for t in &parts {
        let dst = out.view(t.sizes.clone(), out.strides.clone(), start * out.strides[d]);
        encode_copy(k, t, &dst)?;
        start += t.sizes[d];
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// The 32-bit word of `v` in `dtype`'s GPU representation (None if it does not fit).
pub(super) fn word(dtype: DType, v: Scalar) -> Option<u32> {
    match dtype {
        DType::F32 => Some((v.as_f64() as f32).to_bits()),
        DType::Bool => Some((v.as_f64() != 0.0) as u32),
        DType::I64 | DType::I32 => {
            let i = match v {
                Scalar::Int(i) => i,
                Scalar::Bool(b) => b as i64,
                // torch truncates a float fill value for an int dtype.
                Scalar::Float(f) if f.is_finite() => f.trunc() as i64,
                Scalar::Float(_) => return None,
            };
            i32::try_from(i).ok().map(|i| i as u32)
        }
        DType::U8 | DType::I8 | DType::I16 => crate::gpu::store::SmallInt::fill_word(dtype, v),
        _ => None,
    }
}

pub(super) fn encode_fill(
    k: &mut KernelCtx,
    dtype: DType,
    sizes: &[usize],
    flags: u32,
    value: [u32; 2],
) -> Out {
    encode_fill4(k, dtype, sizes, flags, [value[0], value[1], 0, 0])
}

/// [`encode_fill`] with all four value words.
fn encode_fill4(
    k: &mut KernelCtx,
    dtype: DType,
    sizes: &[usize],
    flags: u32,
    value: [u32; 4],
) -> Out {
    let numel: usize = sizes.iter().product();
    if numel >= u32::MAX as usize
        || numel as u64 * 4 > k.r.dev.properties.limits.max_storage_buffer_binding_size
    {
        return Ok(None);
    }
    let out = k.new_out(dtype, sizes)?;
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        let meta = IndexMeta {
            numel: numel as u32,
            row,
            flags,
            value,
            ..Default::default()
        };
        k.dispatch(&FILL, bytemuck::bytes_of(&meta), &[(1, &out)], (gx, gy, 1))?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// full / zeros / ones / empty, their `new_` and `_like` forms, scalar_tensor.
pub(super) fn full(k: &mut KernelCtx) -> Out {
    let Some(dtype) = k.out_dtype(0).filter(|d| gpu_dtype(*d)) else {
        return Ok(None);
    };
    let op = k.target().split('.').nth(1).unwrap_or("").to_string();
    let sizes: Vec<usize> = if op == "scalar_tensor" {
        vec![]
    } else if op.ends_with("_like") {
        // A constant fill: torch may keep `self`'s strides, the values are the same.
        let Some(x) = k.t("self") else {
            return Ok(None);
        };
        x.sizes.clone()
    } else {
        let v = k.op.ints("size")?;
        if v.iter().any(|&s| s < 0) {
            return Ok(None);
        }
        v.iter().map(|&s| s as usize).collect()
    };
    let base = op.trim_start_matches("new_").trim_end_matches("_like");
    let value = match base {
        "full" => k.op.scalar("fill_value")?,
        "scalar_tensor" => k.op.scalar("s")?,
        "ones" => Scalar::Int(1),
        "zeros" | "empty" => Scalar::Int(0),
        _ => return Ok(None),
    };
    let Some(w) = word(dtype, value) else {
        return Ok(None);
    };
    encode_fill(k, dtype, &sizes, 0, [w, 0])
}

pub(super) fn arange(k: &mut KernelCtx) -> Out {
    let Some(dtype) = k
        .out_dtype(0)
        .filter(|d| gpu_dtype(*d) && *d != DType::Bool)
    else {
        return Ok(None);
    };
    let end = k.op.scalar("end")?;
    let start = k.op.opt_scalar("start")?.unwrap_or(Scalar::Int(0));
    let step = k.op.opt_scalar("step")?.unwrap_or(Scalar::Int(1));
    let int = |s: Scalar| match s {
        Scalar::Int(i) => Some(i),
        Scalar::Bool(b) => Some(b as i64),
        Scalar::Float(_) => None,
    };
    let (s, e, st) = (start.as_f64(), end.as_f64(), step.as_f64());
    if st == 0.0 || !s.is_finite() || !e.is_finite() || (st > 0.0 && e < s) || (st < 0.0 && e > s) {
        return Ok(None);
    }
    let n = match (int(start), int(end), int(step)) {
        (Some(a), Some(b), Some(c)) if dtype != DType::F32 => {
            (b as i128 - a as i128 + c as i128 - c.signum() as i128) / c as i128
        }
        _ => ((e - s) / st).ceil() as i128,
    }
    .max(0) as usize;
    let last = s + st * n.saturating_sub(1) as f64;
    // Exact on the GPU: integral start and step, every value within range of the dtype
    // (2^24 for f32, where every integer is exact).
    let limit = if dtype == DType::F32 {
        (1u64 << 24) as f64
    } else {
        i32::MAX as f64
    };
    // uint8 / int8 / int16: the fill does not wrap, so only values within the dtype's range
    // (torch wraps the others).
    if let Some(small) = crate::gpu::store::SmallInt::of(dtype) {
        let fits = |v: f64| v.fract() == 0.0 && small.wrap(v as i64) as f64 == v;
        if !fits(s) || !fits(last) {
            return Ok(None);
        }
    }
    // `start + i * step` stays within the exact range at every step, `i * step` included.
    if s.fract() != 0.0
        || st.fract() != 0.0
        || s.abs() + (st * n as f64).abs() > limit
        || last.abs() > limit
    {
        if dtype != DType::F32 || n >= 1 << 24 {
            return Ok(None);
        }
        // Fractional f32: start and step as f32 pairs (hi + lo), `i` exact in f32. torch's
        // CPU kernel computes in f64 and its CUDA/MPS kernels in f32; this lands within an
        // ulp of the f64 value.
        let split = |x: f64| {
            let hi = x as f32;
            [hi.to_bits(), ((x - hi as f64) as f32).to_bits()]
        };
        let ([sh, sl], [th, tl]) = (split(s), split(st));
        return encode_fill4(k, dtype, &[n], 5, [sh, sl, th, tl]);
    }
    let (flags, value) = if dtype == DType::F32 {
        (1, [(s as f32).to_bits(), (st as f32).to_bits()])
    } else {
        (2, [(s as i32) as u32, (st as i32) as u32])
    };
    encode_fill(k, dtype, &[n], flags, value)
}

/// linspace / logspace to f32: torch's two-sided formula in f32 (logspace: base^v, base > 0).
pub(super) fn linspace(k: &mut KernelCtx) -> Out {
    if !k.out_is(DType::F32) {
        return Ok(None);
    }
    let log = k.target().starts_with("aten.logspace");
    let (start, end) = (k.op.scalar("start")?.as_f64(), k.op.scalar("end")?.as_f64());
    let steps = k.op.int("steps")?;
    let base = if log {
        k.op.float_or("base", 10.0)?
    } else {
        2.0
    };
    if !(0..i32::MAX as i64).contains(&steps) || base <= 0.0 || !base.is_finite() {
        return Ok(None);
    }
    let n = steps as usize;
    let (s, e) = (start as f32, end as f32);
    let step = if n > 1 { (e - s) / (n - 1) as f32 } else { 0.0 };
    // One step: the start itself (the formula's end side would give `end`).
    let half = if n == 1 { 1 } else { n / 2 };
    let out = k.new_out(DType::F32, &[n])?;
    if n > 0 {
        let (gx, gy, row) = grid(n, 64);
        let meta = IndexMeta {
            numel: n as u32,
            row,
            flags: if log { 4 } else { 3 },
            offs: [(base as f32).to_bits(), 0, 0, 0],
            value: [s.to_bits(), step.to_bits(), e.to_bits(), half as u32],
            ..Default::default()
        };
        k.dispatch(&FILL, bytemuck::bytes_of(&meta), &[(1, &out)], (gx, gy, 1))?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// eye(n, m): zeros, then ones copied into the diagonal.
pub(super) fn eye(k: &mut KernelCtx) -> Out {
    let Some(dtype) = k.out_dtype(0).filter(|d| gpu_dtype(*d)) else {
        return Ok(None);
    };
    let n = k.op.int("n")?;
    let m = k.op.opt_int("m")?.unwrap_or(n);
    if n < 0 || m < 0 || (n as u64).saturating_mul(m as u64) >= u32::MAX as u64 {
        return Ok(None);
    }
    let (n, m) = (n as usize, m as usize);
    let (Some(zero), Some(one)) = (word(dtype, Scalar::Int(0)), word(dtype, Scalar::Int(1))) else {
        return Ok(None);
    };
    let Some(Some(Slot::Tensor(out))) =
        encode_fill(k, dtype, &[n, m], 0, [zero, 0])?.map(|mut v| v.pop())
    else {
        return Ok(None);
    };
    let d = n.min(m);
    if d > 0 {
        let Some(Some(Slot::Tensor(ones))) =
            encode_fill(k, dtype, &[d], 0, [one, 0])?.map(|mut v| v.pop())
        else {
            return Ok(None);
        };
        let diag = out.view(vec![d], vec![m + 1], 0);
        encode_copy(k, &ones, &diag)?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// empty_strided with contiguous strides: zeros (as the CPU kernel's storage).
pub(super) fn empty_strided(k: &mut KernelCtx) -> Out {
    let Some(dtype) = k.out_dtype(0).filter(|d| gpu_dtype(*d)) else {
        return Ok(None);
    };
    let size = k.op.ints("size")?;
    if size.iter().any(|&s| s < 0) {
        return Ok(None);
    }
    let sizes: Vec<usize> = size.iter().map(|&s| s as usize).collect();
    // empty_strided with other strides, empty_permuted: a contiguous tensor. The contents
    // are uninitialized; later writes and reads go through logical indices (the executor's
    // views follow the GPU tensor's own strides), so only an overlapping layout, whose
    // elements are shared, must stay on the CPU.
    if k.target().starts_with("aten.empty_strided.") {
        let stride = k.op.ints("stride")?;
        if stride.len() != sizes.len() || stride.iter().any(|&s| s < 0) {
            return Ok(None);
        }
        // An overlapping layout (a zero stride over a dim > 1, say) shares elements.
        let mut dims: Vec<(usize, usize)> = sizes
            .iter()
            .zip(&stride)
            .filter(|(&n, _)| n > 1)
            .map(|(&n, &s)| (s as usize, n))
            .collect();
        dims.sort();
        let mut span = 1;
        for (s, n) in dims {
            if s < span {
                return Ok(None);
            }
            span = s * n;
        }
    }
    let Some(w) = word(dtype, Scalar::Int(0)) else {
        return Ok(None);
    };
    encode_fill(k, dtype, &sizes, 0, [w, 0])
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{gpu_outputs, index, same_gpu_dtype, On};
    fn gathers(i: &[DType], o: &[DType]) -> bool {
        i.len() == 2 && gpu_dtype(i[0]) && index(i[1]) && o == [i[0]]
    }
    t.kernel(&["aten.embedding"], On::All, embedding, gathers);
    t.kernel(&["aten.index_select"], On::All, index_select, gathers);
    t.kernel(&["aten.gather"], On::All, gather, gathers);
    t.kernel(
        &["aten.cat", "aten.concat", "aten.concatenate", "aten.stack"],
        On::All,
        cat,
        // One dtype, or parts promoted to an f32 result.
        |i, o| same_gpu_dtype(i, o) || (o == [DType::F32] && i.iter().all(|&d| gpu_dtype(d))),
    );
    t.kernel(
        &["aten.hstack", "aten.vstack"],
        On::Only(&["default"]),
        cat,
        same_gpu_dtype,
    );
    t.kernel(
        &[
            "aten.full",
            "aten.zeros",
            "aten.ones",
            "aten.empty",
            "aten.new_full",
            "aten.new_zeros",
            "aten.new_ones",
            "aten.new_empty",
            "aten.full_like",
            "aten.zeros_like",
            "aten.ones_like",
            "aten.empty_like",
            "aten.scalar_tensor",
        ],
        On::All,
        full,
        gpu_outputs,
    );
    t.kernel(&["aten.arange"], On::All, arange, |_, o| {
        o.iter().all(|&d| gpu_dtype(d) && d != DType::Bool)
    });
    t.kernel(
        &["aten.linspace", "aten.logspace"],
        On::Only(&["default"]),
        linspace,
        |_, o| o == [DType::F32],
    );
    t.kernel(&["aten.eye"], On::Only(&["default", "m"]), eye, gpu_outputs);
    t.kernel(
        &["aten.empty_strided", "aten.empty_permuted"],
        On::Only(&["default"]),
        empty_strided,
        gpu_outputs,
    );
}
