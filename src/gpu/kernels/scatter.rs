//! The scatter family on the GPU (shaders/scatter.wgsl): `scatter` (src / value / reduce),
//! `scatter_add`, `scatter_reduce` (sum / prod / mean / amax / amin, include_self),
//! `index_add` / `index_copy` / `index_fill`, `index_put` (integer indices, accumulate or
//! not), their in-place forms, `take`, and `index.Tensor` with index tensors on
//! non-adjacent dims.
//!
//! Deterministic: one invocation per output element starts from `self` and combines every
//! source entry that lands on it in source order, as the CPU loops do (same summation
//! order, the last write wins for plain assignment; no float atomics). The cost is the
//! output size times the entries one output element scans (the index length along `dim`,
//! or the whole broadcast index for an accumulating index_put), so very large products stay
//! on the CPU. A plain index_put is linear: an atomicMax over entry numbers finds the last
//! entry per target, then each output element reads its value.
//!
//! Out-of-range indices: an index tensor with a current CPU copy (a program input, a
//! constant, anything computed on the CPU) is checked on the host, and an invalid one sends
//! the node to the CPU kernel, which raises torch's error. An index computed on the GPU is
//! checked by the kernels: as index.rs's gathers do, they count a negative index from the
//! end where torch does (index_put, index_fill, take, index), skip an entry whose index is
//! still outside the dim (scatter, index_add and index_copy take no negative indices) and
//! report it (`gpu::fault`): the run fails with the CPU kernel's error. Integers combine in 32-bit arithmetic (int64 lives as i32 on the
//! GPU), so an int64 sum or product that leaves the i32 range wraps where the CPU's would
//! not. f32 sums and products round like torch's f32 loops; index_add's alpha multiplies
//! in f32 as torch does. bool only takes plain assignment here (reductions of bools stay on
//! the CPU).

use super::{grid, index, norm_dim, pad8, KernelCtx, Out, MAX_RANK};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::fault::IndexText;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{contiguous_strides, gpu_dtype, lock, GTensor};
use crate::ops::index::scatter::{index_put_reduce, Reduce, ScatterParams};
use crate::ops::Scalar;
use crate::program::Arg;
use bytemuck::{Pod, Zeroable};

pub const SCATTER: Variant = Variant::new(Shader::Scatter, "scatter");
pub const PUT_TARGET: Variant = Variant::new(Shader::Scatter, "put_target");
pub const INDEX_WRITE: Variant = Variant::new(Shader::Scatter, "index_write");
pub const PUT: Variant = Variant::new(Shader::Scatter, "put");
pub const PUT_OWNER: Variant = Variant::new(Shader::Scatter, "put_owner");
pub const PUT_LAST: Variant = Variant::new(Shader::Scatter, "put_last");

pub fn variants() -> Vec<Variant> {
    vec![SCATTER, PUT_TARGET, PUT, PUT_OWNER, PUT_LAST, INDEX_WRITE]
}

/// Mirrors `Meta` in shaders/scatter.wgsl (field docs there).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct ScatterMeta {
    pub numel: u32,
    pub rank: u32,
    pub row: u32,
    pub flags: u32,
    pub shape: [u32; 8],
    pub self_strides: [u32; 8],
    pub src_strides: [u32; 8],
    pub idx_strides: [u32; 8],
    pub lim: [u32; 8],
    pub bshape: [u32; 8],
    pub bstrides: [u32; 8],
    pub offs: [u32; 4],
    pub value: [u32; 4],
    pub fault_site: [u32; 4],
}

code_enum!(
    /// The combine ops of the shader (`ScatterOp_*` there, bits 0-3 of `flags`).
    pub(super) ScatterOp,
    &[Shader::Scatter],
    [
        Assign = 0,
        Add = 1,
        Mul = 2,
        Mean = 3,
        Max = 4,
        Min = 5,
        AddAlpha = 6,
    ]
);

/// Above this many (output element, scanned entry) pairs the CPU kernel runs instead.
const MAX_WORK: u64 = 1 << 31;

fn is_int(d: DType) -> bool {
    matches!(d, DType::I64 | DType::I32)
}

/// The element kind bits of the shader's flags (None: no kernel for the dtype and op).
fn kind(dtype: DType, op: ScatterOp) -> Option<u32> {
    match dtype {
        DType::F32 => Some(0),
        DType::I32 | DType::I64 => Some(1),
        DType::Bool if op == ScatterOp::Assign => Some(2),
        _ => None,
    }
}

/// Whether every index of `t` is in range for a dim of `n` (`-n..n` where negatives wrap,
/// else `0..n`) as far as the host can tell: a tensor with a current CPU copy is checked,
/// one that only lives on the GPU is not (see the module doc).
pub(super) fn host_in_range(t: &GTensor, n: usize, wrap: bool) -> bool {
    if !lock(&t.cell).cpu_valid {
        return true;
    }
    let Ok(v) = t.cpu_view() else {
        return true;
    };
    let n = n as i64;
    let lo = if wrap { -n } else { 0 };
    // A decision from the data: a replayed run repeats it (see gpu::tape).
    crate::gpu::tape::note_range_check(t, lo, n);
    v.to_vec::<i64>().iter().all(|&i| (lo..n).contains(&i))
}

/// How the CPU kernel words an invalid index along `dim` (`gpu::fault`): "out of range"
/// where negatives wrap, "out of bounds" where they are refused.
fn index_text(wrap: bool, dim: usize) -> IndexText {
    match wrap {
        true => IndexText::Range { dim },
        false => IndexText::Bounds { dim },
    }
}

/// A 0-d tensor as the 1-element vector the kernels index.
fn as1(t: &GTensor) -> GTensor {
    if t.rank() == 0 {
        t.view(vec![1], vec![1], t.offset)
    } else {
        t.clone()
    }
}

/// Where the result goes: a fresh output, or (in-place targets) copied back into `self`.
fn finish(k: &mut KernelCtx, x: &GTensor, out: GTensor) -> Out {
    let out = out.view(x.sizes.clone(), contiguous_strides(&x.sizes), 0);
    let inplace = k
        .target()
        .rsplit_once('.')
        .is_some_and(|(op, _)| op.ends_with('_'));
    if !inplace {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    index::copy_into(k, &out, x)?;
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::Tensor(x.clone())]))
}

/// An in-place target's `self` must not overlap itself (an expanded view): torch errors.
fn overlaps(x: &GTensor) -> bool {
    x.sizes
        .iter()
        .zip(&x.strides)
        .any(|(&n, &s)| n > 1 && s == 0)
}

/// The `scatter` dispatch: `x` (rank >= 1) updated along `d` by the entries of `idx`
/// (same rank), with values from `src` (strides per dim of `idx`) or the scalar word.
#[allow(clippy::too_many_arguments)]
fn encode_scatter(
    k: &mut KernelCtx,
    x: &GTensor,
    d: usize,
    idx: &GTensor,
    src: Option<&GTensor>,
    value: u32,
    alpha: u32,
    op: ScatterOp,
    include_self: bool,
    wrap: bool,
) -> Out {
    let Some(kind) = kind(x.dtype, op) else {
        return Ok(None);
    };
    let r = x.rank();
    let numel = x.numel();
    if r == 0 || r > MAX_RANK || idx.rank() != r || d >= r {
        return Ok(None);
    }
    let entries = idx.sizes[d];
    if numel >= u32::MAX as usize
        || (numel as u64).saturating_mul(entries as u64) > MAX_WORK
        // One invocation scans every entry along `dim` (the loop cap of CPU adapters).
        || !super::loops_fit(k, entries, 2)
        || !k.fits(x)
        || !k.fits(idx)
        || !is_int(idx.dtype)
        || src.is_some_and(|s| s.dtype != x.dtype || s.rank() != r || !k.fits(s))
        || k.out_dtype(0) != Some(x.dtype)
        || (0..r).any(|i| i != d && idx.sizes[i] > x.sizes[i])
        || !host_in_range(idx, x.sizes[d], wrap)
    {
        return Ok(None);
    }
    let out = k.new_out(x.dtype, &x.sizes)?;
    if numel > 0 {
        k.ensure(x)?;
        k.ensure(idx)?;
        if let Some(s) = src {
            k.ensure(s)?;
        }
        let (gx, gy, row) = grid(numel, 64);
        let s = src.unwrap_or(x);
        let meta = ScatterMeta {
            numel: numel as u32,
            rank: r as u32,
            row,
            flags: op as u32
                | (include_self as u32) << 4
                | (src.is_none() as u32) << 5
                | kind << 6
                | (wrap as u32) << 9,
            shape: pad8(&x.sizes),
            self_strides: pad8(&x.strides),
            src_strides: pad8(&s.strides),
            idx_strides: pad8(&idx.strides),
            lim: pad8(&idx.sizes),
            offs: [
                x.offset as u32,
                s.offset as u32,
                idx.offset as u32,
                d as u32,
            ],
            value: [value, alpha, 0, 0],
            fault_site: [k.fault_site(index_text(wrap, d)), 0, 0, 0],
            ..Default::default()
        };
        k.dispatch(
            &SCATTER,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, x), (3, s), (4, idx)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// The shader's op for a combine of the op table (`AddAlpha` carries its alpha apart).
fn scatter_op(r: Reduce) -> ScatterOp {
    match r {
        Reduce::Assign => ScatterOp::Assign,
        Reduce::Add => ScatterOp::Add,
        Reduce::AddAlpha(_) => ScatterOp::AddAlpha,
        Reduce::Mul => ScatterOp::Mul,
        Reduce::Mean => ScatterOp::Mean,
        Reduce::Max => ScatterOp::Max,
        Reduce::Min => ScatterOp::Min,
    }
}

/// scatter (.src / .value / .reduce / .value_reduce), scatter_add, scatter_reduce.two, and
/// their in-place forms.
pub(super) fn scatter(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(idx)) = (k.t("self"), k.t("index")) else {
        return Ok(None);
    };
    if overlaps(&x) && k.target().contains("_.") {
        return Ok(None);
    }
    // An unknown `reduce` is the CPU kernel's error.
    let Ok(p) = ScatterParams::parse(&k.op) else {
        return Ok(None);
    };
    let Some(d) = norm_dim(p.dim, x.rank().max(1)) else {
        return Ok(None);
    };
    // Both 0-d or 1-d (torch allows mixing those), else the same rank.
    if x.rank() != idx.rank() && !(x.rank() <= 1 && idx.rank() <= 1) {
        return Ok(None);
    }
    let (op, include_self) = (scatter_op(p.reduce), p.include_self);
    let (x1, idx1) = (as1(&x), as1(&idx));
    let (src, value) = if k.is_tensor_arg("src") {
        let Some(s) = k.t("src") else {
            return Ok(None);
        };
        if s.rank() > 1 && s.rank() != idx.rank() {
            return Ok(None);
        }
        let s1 = as1(&s);
        // Every index position must lie inside `src`.
        if s1.rank() != idx1.rank() || (0..s1.rank()).any(|i| idx1.sizes[i] > s1.sizes[i]) {
            return Ok(None);
        }
        (Some(s1), 0)
    } else {
        let Some(w) = index::word(x.dtype, Scalar::Float(k.op.scalar("value")?.as_f64())) else {
            return Ok(None);
        };
        (None, w)
    };
    let Some(res) = encode_scatter(
        k,
        &x1,
        d,
        &idx1,
        src.as_ref(),
        value,
        0,
        op,
        include_self,
        false,
    )?
    else {
        return Ok(None);
    };
    let [Slot::Tensor(out)] = &res[..] else {
        return Ok(None);
    };
    finish(k, &x, out.clone())
}

/// index_add / index_copy / index_fill (.int_Scalar / .int_Tensor) and their in-place forms: the index
/// vector is a scatter index of stride 0 off `dim`. Negative indices count from the end.
pub(super) fn index_slices(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(idx)) = (k.t("self"), k.t("index")) else {
        return Ok(None);
    };
    if idx.rank() > 1 || (overlaps(&x) && k.target().contains("_.")) {
        return Ok(None);
    }
    let t = k.target().to_string();
    let x1 = as1(&x);
    let r = x1.rank();
    let Some(d) = norm_dim(k.op.int("dim")?, r) else {
        return Ok(None);
    };
    let idx1 = as1(&idx);
    let n = idx1.sizes[0];
    let mut isizes = x1.sizes.clone();
    isizes[d] = n;
    let mut istrides = vec![0; r];
    istrides[d] = idx1.strides[0];
    let iv = idx1.view(isizes.clone(), istrides, idx1.offset);
    // Only index_fill counts negative indices from the end (as torch).
    let fill = t.starts_with("aten.index_fill");
    let (src, value, alpha, op) = if fill && k.is_tensor_arg("value") {
        // index_fill.int_Tensor: the one-element value read through zero strides (another
        // dtype than self's is left to the CPU kernel's conversion).
        let Some(v) = k.t("value") else {
            return Ok(None);
        };
        if v.numel() != 1 || v.dtype != x.dtype {
            return Ok(None);
        }
        (
            Some(v.view(isizes.clone(), vec![0; r], v.offset)),
            0,
            0,
            ScatterOp::Assign,
        )
    } else if fill {
        let Some(w) = index::word(x.dtype, k.op.scalar("value")?) else {
            return Ok(None);
        };
        (None, w, 0, ScatterOp::Assign)
    } else {
        let Some(s) = k.t("source") else {
            return Ok(None);
        };
        let s1 = as1(&s);
        if s1.sizes != isizes {
            return Ok(None);
        }
        if x.dtype == DType::F16 {
            return index_write_f16(k, &x, d, &iv, &s1);
        }
        if t.starts_with("aten.index_copy_") {
            if let Some(out) = index_write(k, &x, d, &iv, &s1)? {
                return Ok(Some(out));
            }
            (Some(s1), 0, 0, ScatterOp::Assign)
        } else if t.starts_with("aten.index_copy") {
            (Some(s1), 0, 0, ScatterOp::Assign)
        } else {
            let alpha = k.op.opt_scalar("alpha")?.unwrap_or(Scalar::Int(1));
            let a = match (x.dtype, alpha) {
                (DType::F32, a) => (a.as_f64() as f32).to_bits(),
                (DType::I32 | DType::I64, Scalar::Int(a)) => match i32::try_from(a) {
                    Ok(a) => a as u32,
                    Err(_) => return Ok(None),
                },
                _ => return Ok(None),
            };
            let one = match alpha {
                Scalar::Int(a) => a == 1,
                Scalar::Float(a) => a == 1.0,
                Scalar::Bool(b) => b,
            };
            (
                Some(s1),
                0,
                a,
                if one {
                    ScatterOp::Add
                } else {
                    ScatterOp::AddAlpha
                },
            )
        }
    };
    let Some(res) = encode_scatter(k, &x1, d, &iv, src.as_ref(), value, alpha, op, true, fill)?
    else {
        return Ok(None);
    };
    let [Slot::Tensor(out)] = &res[..] else {
        return Ok(None);
    };
    finish(k, &x, out.clone())
}

/// `index_copy_` straight into `self` (`x`, a plain in-place target): one invocation per
/// element of `src` writes it at its index along `d` (`iv`: the index vector seen with `x`'s
/// rank, stride 0 off `d`), leaving the rest of `self` untouched (the generic path computes a
/// whole new tensor and copies it back). None where it does not apply (the generic path then
/// runs): a view that overlaps itself, a source or index sharing `self`'s buffer, another
/// dtype, or an index the host knows to be out of range (the generic path's check raises
/// torch's error).
fn index_write(k: &mut KernelCtx, x: &GTensor, d: usize, iv: &GTensor, src: &GTensor) -> Out {
    let r = x.rank();
    let numel = src.numel();
    if r == 0
        || r > MAX_RANK
        || src.rank() != r
        || src.dtype != x.dtype
        || !is_int(iv.dtype)
        || kind(x.dtype, ScatterOp::Assign).is_none()
        || numel >= u32::MAX as usize
        || !k.fits(x)
        || !k.fits(src)
        || !k.fits(iv)
        || overlaps(x)
        // One buffer bound for writing and for reading in the same dispatch is invalid.
        || std::sync::Arc::ptr_eq(&src.cell, &x.cell)
        || std::sync::Arc::ptr_eq(&iv.cell, &x.cell)
        || !host_in_range(iv, x.sizes[d], false)
    {
        return Ok(None);
    }
    if numel > 0 {
        k.ensure(x)?;
        k.ensure(src)?;
        k.ensure(iv)?;
        let (gx, gy, row) = grid(numel, 64);
        let mut idx_strides = vec![0; r];
        idx_strides[d] = iv.strides[d];
        let meta = ScatterMeta {
            numel: numel as u32,
            rank: r as u32,
            row,
            shape: pad8(&src.sizes),
            self_strides: pad8(&x.strides),
            src_strides: pad8(&src.strides),
            idx_strides: pad8(&idx_strides),
            offs: [
                x.offset as u32,
                src.offset as u32,
                iv.offset as u32,
                d as u32,
            ],
            value: [x.sizes[d] as u32, 0, 0, 0],
            fault_site: [k.fault_site(index_text(false, d)), 0, 0, 0],
            ..Default::default()
        };
        k.dispatch(
            &INDEX_WRITE,
            bytemuck::bytes_of(&meta),
            &[(1, x), (3, src), (4, iv)],
            (gx, gy, 1),
        )?;
    }
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::Tensor(x.clone())]))
}

/// `index_copy_` of f16 tensors (a KV cache in f16): the rows it moves are pairs of f16 in
/// 32-bit words, so [`index_write`] copies them as words. None (the CPU kernel runs) where a
/// row is not whole words: the indexed dim is the last, an odd row, an odd stride or offset.
fn index_write_f16(k: &mut KernelCtx, x: &GTensor, d: usize, iv: &GTensor, src: &GTensor) -> Out {
    if !k.target().starts_with("aten.index_copy_") || src.dtype != DType::F16 || d + 1 >= x.rank() {
        return Ok(None);
    }
    let (Some(xw), Some(sw)) = (x.as_f16_pairs(), src.as_f16_pairs()) else {
        return Ok(None);
    };
    Ok(index_write(k, &xw, d, iv, &sw)?.map(|_| vec![Slot::Tensor(x.clone())]))
}

/// The `indices` list of index / index_put: optional tensors, or plain tensors when the
/// program has no `None` entry.
pub(super) fn index_ids(k: &KernelCtx) -> Option<Vec<Option<usize>>> {
    match k.op.arg("indices")? {
        Arg::OptTensors(ids) => Some(ids.clone()),
        Arg::Tensors(ids) => Some(ids.iter().map(|&i| Some(i)).collect()),
        _ => None,
    }
}

/// The integer index tensors of an `indices` list: (dim, tensor) of each present entry.
/// None when an entry is missing on the GPU or is a bool mask (data-dependent sizes: the
/// executor's `dynamic` module runs a single mask; other mixes go to the CPU kernel).
fn int_indices(k: &KernelCtx, rank: usize) -> Option<Vec<(usize, GTensor)>> {
    let ids = index_ids(k)?;
    if ids.len() > rank {
        return None;
    }
    let mut v = Vec::new();
    for (d, id) in ids.iter().enumerate() {
        if let Some(id) = id {
            let t = k.env_t.get(*id)?.clone()?;
            if !is_int(t.dtype) {
                return None;
            }
            v.push((d, t));
        }
    }
    (!v.is_empty()).then_some(v)
}

/// The broadcast shape of the index tensors, each one expanded to it.
fn broadcast(idxs: &[(usize, GTensor)]) -> Option<(Vec<usize>, Vec<GTensor>)> {
    let mut b: Vec<usize> = Vec::new();
    for (_, t) in idxs {
        b = crate::cpu::broadcast_shapes(&b, &t.sizes)?;
    }
    let ex = idxs
        .iter()
        .map(|(_, t)| t.expand_to(&b))
        .collect::<Option<Vec<_>>>()?;
    (b.len() <= MAX_RANK).then_some((b, ex))
}

/// The flat targets `sum_m wrap(index_m[b]) * strides[dim_m]` of every entry b of the
/// broadcast index shape `b` (i32, INVALID where an index is out of range).
fn targets(
    k: &mut KernelCtx,
    b: &[usize],
    idxs: &[(usize, GTensor)],
    ex: &[GTensor],
    sizes: &[usize],
    strides: &[usize],
) -> crate::error::Result<Option<GTensor>> {
    let bn: usize = b.iter().product();
    let lin = k.new_out(DType::I32, b)?;
    if bn == 0 {
        return Ok(Some(lin));
    }
    let (gx, gy, row) = grid(bn, 64);
    for (m, ((d, _), t)) in idxs.iter().zip(ex).enumerate() {
        if !k.fits(t) {
            return Ok(None);
        }
        k.ensure(t)?;
        let meta = ScatterMeta {
            row,
            flags: if m == 0 { 256 } else { 0 },
            bshape: pad8(b),
            bstrides: pad8(&t.strides),
            offs: [0, 0, t.offset as u32, 0],
            value: [
                sizes[*d] as u32,
                strides[*d] as u32,
                b.len() as u32,
                bn as u32,
            ],
            fault_site: [k.fault_site(index_text(true, *d)), 0, 0, 0],
            ..Default::default()
        };
        k.dispatch(
            &PUT_TARGET,
            bytemuck::bytes_of(&meta),
            &[(4, t), (5, &lin)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(lin))
}

/// index_put / index_put_ / _unsafe_index_put with integer indices (masks: CPU).
pub(super) fn index_put(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(vals)) = (k.t("self"), k.t("values")) else {
        return Ok(None);
    };
    let op = scatter_op(index_put_reduce(&k.op)?);
    let accumulate = op == ScatterOp::Add;
    let r = x.rank();
    let Some(kind) = kind(x.dtype, op) else {
        return Ok(None);
    };
    if r == 0
        || vals.dtype != x.dtype
        || k.out_dtype(0) != Some(x.dtype)
        || (overlaps(&x) && k.target().contains("_."))
        || !k.fits(&x)
        || !k.fits(&vals)
    {
        return Ok(None);
    }
    let Some(idxs) = int_indices(k, r) else {
        return Ok(None);
    };
    if idxs
        .iter()
        .any(|(d, t)| !host_in_range(t, x.sizes[*d], true))
    {
        return Ok(None);
    }
    let Some((b, ex)) = broadcast(&idxs) else {
        return Ok(None);
    };
    let positions: Vec<usize> = idxs.iter().map(|(d, _)| *d).collect();
    let adjacent = positions.windows(2).all(|w| w[1] == w[0] + 1);
    // The indexing result's layout (torch's rule): B replaces adjacent indexed dims in
    // place, else goes first. Each entry: Some(output dim) or None (a dim of B).
    let rest: Vec<usize> = (0..r).filter(|d| !positions.contains(d)).collect();
    let mut layout: Vec<Option<usize>> = Vec::new();
    let bdims = std::iter::repeat_n(None, b.len());
    if adjacent {
        layout.extend(rest.iter().filter(|&&d| d < positions[0]).map(|&d| Some(d)));
        layout.extend(bdims);
        layout.extend(rest.iter().filter(|&&d| d > positions[0]).map(|&d| Some(d)));
    } else {
        layout.extend(bdims);
        layout.extend(rest.iter().map(|&d| Some(d)));
    }
    if layout.len() > MAX_RANK {
        return Ok(None);
    }
    let rsizes: Vec<usize> = {
        let mut bi = 0;
        layout
            .iter()
            .map(|o| match o {
                Some(d) => x.sizes[*d],
                None => {
                    bi += 1;
                    b[bi - 1]
                }
            })
            .collect()
    };
    // Values broadcast to the result (leading size-1 dims may be dropped, as torch allows).
    let mut v = vals.clone();
    while v.rank() > rsizes.len() && v.sizes[0] == 1 {
        v = v.view(v.sizes[1..].to_vec(), v.strides[1..].to_vec(), v.offset);
    }
    let Some(v) = v.expand_to(&rsizes) else {
        return Ok(None);
    };
    let mut src_strides = vec![0; r];
    let mut bstrides = Vec::with_capacity(b.len());
    for (o, &s) in layout.iter().zip(&v.strides) {
        match o {
            Some(d) => src_strides[*d] = s,
            None => bstrides.push(s),
        }
    }
    let numel = x.numel();
    let bn: usize = b.iter().product();
    // Accumulation scans every entry per output element; plain assignment is linear.
    if numel >= u32::MAX as usize
        || (accumulate && (numel as u64).saturating_mul(bn as u64) > MAX_WORK)
        // `put` scans every entry, each with a walk over the index dims (the loop cap of
        // CPU adapters).
        || (accumulate && !super::loops_fit(k, bn, 2 + b.len()))
    {
        return Ok(None);
    }
    let cs = contiguous_strides(&x.sizes);
    let Some(lin) = targets(k, &b, &idxs, &ex, &x.sizes, &cs)? else {
        return Ok(None);
    };
    let mut lim = vec![0; r];
    for &d in &positions {
        lim[d] = cs[d];
    }
    let out = k.new_out(x.dtype, &x.sizes)?;
    if numel > 0 {
        k.ensure(&x)?;
        k.ensure(&v)?;
        let (gx, gy, row) = grid(numel, 64);
        let meta = ScatterMeta {
            numel: numel as u32,
            rank: r as u32,
            row,
            flags: op as u32 | kind << 6,
            shape: pad8(&x.sizes),
            self_strides: pad8(&x.strides),
            src_strides: pad8(&src_strides),
            lim: pad8(&lim),
            bshape: pad8(&b),
            bstrides: pad8(&bstrides),
            offs: [x.offset as u32, v.offset as u32, 0, 0],
            value: [0, 0, b.len() as u32, bn as u32],
            ..Default::default()
        };
        if accumulate {
            k.dispatch(
                &PUT,
                bytemuck::bytes_of(&meta),
                &[(1, &out), (2, &x), (3, &v), (4, &lin)],
                (gx, gy, 1),
            )?;
        } else {
            // The last entry per target (-1: none), then one read per output element.
            let Some(Some(Slot::Tensor(owner))) =
                index::encode_fill(k, DType::I32, &[numel], 0, [u32::MAX, 0])?.map(|mut v| v.pop())
            else {
                return Ok(None);
            };
            if bn > 0 {
                let (bx, by, brow) = grid(bn, 64);
                let m = ScatterMeta { row: brow, ..meta };
                k.dispatch(
                    &PUT_OWNER,
                    bytemuck::bytes_of(&m),
                    &[(4, &lin), (6, &owner)],
                    (bx, by, 1),
                )?;
            }
            k.dispatch(
                &PUT_LAST,
                bytemuck::bytes_of(&meta),
                &[(1, &out), (2, &x), (3, &v), (6, &owner)],
                (gx, gy, 1),
            )?;
        }
    }
    finish(k, &x, out)
}

/// take: a gather from the flattened (contiguous) input. Negative indices count from the
/// end; an index outside reads 0 and fails the run (index.rs's gather convention).
pub(super) fn take(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(idx)) = (k.t("self"), k.t("index")) else {
        return Ok(None);
    };
    if !gpu_dtype(x.dtype)
        || !is_int(idx.dtype)
        || x.numel() == 0
        || x.numel() > i32::MAX as usize
        || !host_in_range(&idx, x.numel(), true)
    {
        return Ok(None);
    }
    let Some(c) = super::contiguous(k, &x)? else {
        return Ok(None);
    };
    let flat = c.view(vec![c.numel()], vec![1], c.offset);
    let r = idx.rank();
    let ix = index::Indexing::of(k, IndexText::Range { dim: 0 });
    index::encode_gather(
        k,
        &flat,
        &idx,
        &idx.sizes,
        &vec![0; r],
        &idx.strides,
        1,
        flat.numel(),
        ix,
    )
}

/// index.Tensor: index.rs's kernel, or [`index_nonadjacent`] for indices on non-adjacent
/// dims.
pub(super) fn index_tensor(k: &mut KernelCtx) -> Out {
    // Host-checked indices first: an invalid one goes to the CPU kernel, which raises.
    if let (Some(x), Some(idxs)) = (k.t("self"), int_indices(k, usize::MAX)) {
        if idxs
            .iter()
            .any(|(d, t)| x.sizes.get(*d).is_none_or(|&n| !host_in_range(t, n, true)))
        {
            return Ok(None);
        }
    }
    if let Some(r) = index::index_tensor(k)? {
        return Ok(Some(r));
    }
    index_nonadjacent(k)
}

/// index.Tensor with index tensors on non-adjacent dims (adjacent ones: index.rs): the
/// result is [B, the other dims in order], a gather at the flat targets of the indices.
pub(super) fn index_nonadjacent(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let r = x.rank();
    let Some(idxs) = int_indices(k, r) else {
        return Ok(None);
    };
    let positions: Vec<usize> = idxs.iter().map(|(d, _)| *d).collect();
    if positions.windows(2).all(|w| w[1] == w[0] + 1) || !gpu_dtype(x.dtype) || !k.fits(&x) {
        return Ok(None);
    }
    let Some((b, ex)) = broadcast(&idxs) else {
        return Ok(None);
    };
    if idxs
        .iter()
        .any(|(d, t)| !host_in_range(t, x.sizes[*d], true))
    {
        return Ok(None);
    }
    let rest: Vec<usize> = (0..r).filter(|d| !positions.contains(d)).collect();
    if b.len() + rest.len() > MAX_RANK || x.span() > i32::MAX as usize {
        return Ok(None);
    }
    let Some(lin) = targets(k, &b, &idxs, &ex, &x.sizes, &x.strides)? else {
        return Ok(None);
    };
    let mut shape = b.clone();
    shape.extend(rest.iter().map(|&d| x.sizes[d]));
    let mut ss = vec![0; b.len()];
    ss.extend(rest.iter().map(|&d| x.strides[d]));
    let mut is = lin.strides.clone();
    is.extend(std::iter::repeat_n(0, rest.len()));
    // Flat targets index the storage from x's offset; INVALID (i32::MIN) reads 0 (the
    // targets' kernel reported the index that made it).
    let ix = index::Indexing::INTERNAL;
    index::encode_gather(k, &x, &lin, &shape, &ss, &is, 1, x.span().max(1), ix)
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, index, sortable, On, F16};
    use crate::gpu::store::gpu_dtype;
    // One index tensor, or several on adjacent dims (only a run can tell adjacency).
    t.kernel(
        &["aten.index", "aten._unsafe_index"],
        On::Only(&["Tensor"]),
        index_tensor,
        |i, o| i.len() >= 2 && gpu_dtype(i[0]) && all(&i[1..], index) && o == [i[0]],
    );
    // `self`'s dtype in and out, integer indices (bool masks and reductions of bools stay
    // on the CPU: only a run shows).
    fn scatters(i: &[DType], o: &[DType]) -> bool {
        let first = i.first().copied();
        first.is_some_and(sortable)
            && all(&i[1..], |d| Some(d) == first || index(d))
            && o.first() == first.as_ref()
    }
    t.kernel(
        &[
            "aten.scatter",
            "aten.scatter_",
            "aten.scatter_add",
            "aten.scatter_add_",
            "aten.scatter_reduce",
            "aten.scatter_reduce_",
        ],
        On::NotOut,
        scatter,
        scatters,
    );
    t.kernel(
        &["aten.index_add", "aten.index_add_", "aten.index_copy"],
        On::Only(&["default"]),
        index_slices,
        scatters,
    );
    // In place on f16 too (an f16 KV cache): rows of f16 pairs move as words.
    t.kernel(
        &["aten.index_copy_"],
        On::Only(&["default"]),
        index_slices,
        scatters,
    )
    .f16(F16::Native);
    t.kernel(
        &["aten.index_fill", "aten.index_fill_"],
        On::Only(&["int_Scalar", "int_Tensor"]),
        index_slices,
        scatters,
    );
    t.kernel(
        &[
            "aten.index_put",
            "aten.index_put_",
            "aten._unsafe_index_put",
        ],
        On::Only(&["default"]),
        index_put,
        scatters,
    );
    t.kernel(&["aten.take"], On::Only(&["default"]), take, scatters);
}
