//! Data-dependent sizes on the GPU (shaders/select.wgsl): the encoding half of
//! `masked_select`, `index.Tensor` with a boolean mask and `repeat_interleave` with a tensor
//! of repeats. The executor's [`crate::gpu::dynamic`] drives them: these functions encode a
//! count (nonzero mask elements, or the sum of the repeats) into a one-element GPU tensor,
//! the executor reads back only that word, and then encodes the output of that size: the
//! flat source offsets of the selected elements (`emit`) or the repeated positions
//! (`repeat_index`), gathered from the source with the index shader's `gather`.
//! `masked_scatter` reads its count back only to raise torch's error for a short source;
//! its output (of `self`'s broadcast shape) is one more pass over the counted mask
//! (`scatter_ranked`). `nonzero_static` needs no readback: its size is static, the count
//! and emit passes write the first `size` coordinates into columns filled beforehand.

use super::{coalesce, grid, pad8, KernelCtx, Out, MAX_RANK};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{gpu_dtype, GTensor};
use bytemuck::{Pod, Zeroable};

pub const COUNT: Variant = Variant::new(Shader::Select, "count");
pub const SCAN: Variant = Variant::new(Shader::Select, "scan");
pub const EMIT: Variant = Variant::new(Shader::Select, "emit");
pub const REPEAT_INDEX: Variant = Variant::new(Shader::Select, "repeat_index");
pub const SCATTER_RANKED: Variant = Variant::new(Shader::Select, "scatter_ranked");

pub fn variants() -> Vec<Variant> {
    vec![COUNT, SCAN, EMIT, REPEAT_INDEX, SCATTER_RANKED]
}

/// Elements per block of `count` / `emit` (the shader's workgroup size).
const BLOCK: usize = 256;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct SelectMeta {
    pub numel: u32,
    pub rank: u32,
    pub row: u32,
    pub flags: u32,
    pub shape: [u32; 8],
    pub strides: [u32; 8],
    pub weights: [u32; 8],
    /// (source offset, source stride (scan) or scattered source offset, blocks or offsets,
    /// output length (emit) or base offset (scatter_ranked))
    pub offs: [u32; 4],
}

/// A count encoded on the GPU: `total` (one int64 word, -1 for a negative repeat) is what
/// the host reads back; `offsets` are the exclusive prefix sums the second pass needs.
pub struct Counted {
    mask: GTensor,
    offsets: GTensor,
    pub total: GTensor,
}

/// Encode the exclusive prefix sums of `counts` (a 1-D int tensor, any stride) into a fresh
/// `offsets` tensor and their sum into `total`.
fn encode_scan(k: &mut KernelCtx, counts: &GTensor) -> Result<(GTensor, GTensor)> {
    let n = counts.numel();
    let offsets = k.new_out(DType::I32, &[n])?;
    let total = k.new_out(DType::I64, &[1])?;
    let meta = SelectMeta {
        numel: n as u32,
        offs: [
            counts.offset as u32,
            counts.strides.first().copied().unwrap_or(1) as u32,
            0,
            0,
        ],
        ..Default::default()
    };
    k.dispatch(
        &SCAN,
        bytemuck::bytes_of(&meta),
        &[(1, counts), (2, &offsets), (3, &total)],
        (1, 1, 1),
    )?;
    Ok((offsets, total))
}

/// Whether the 32-bit words of `t` can be tested for zero by the select shader.
fn usable(k: &KernelCtx, t: &GTensor) -> bool {
    gpu_dtype(t.dtype) && k.fits(t) && t.numel() < u32::MAX as usize
}

/// The parameters and grid of a pass over every element of the mask `m` in blocks (`count`,
/// `emit`), with the flat-offset weights per dim of `emit`.
fn mask_pass(m: &GTensor, weights: &[usize]) -> (SelectMeta, (u32, u32, u32)) {
    let numel = m.numel();
    let (shape, st) = coalesce(&m.sizes, &[&m.strides, weights]);
    let (gx, gy, row) = grid(numel, BLOCK);
    let meta = SelectMeta {
        numel: numel as u32,
        rank: shape.len() as u32,
        row,
        flags: (m.dtype == DType::F32) as u32,
        shape: pad8(&shape),
        strides: pad8(&st[0]),
        weights: pad8(&st[1]),
        offs: [m.offset as u32, 0, numel.div_ceil(BLOCK) as u32, 0],
    };
    (meta, (gx, gy, 1))
}

/// Encode the count of the nonzero elements of `mask` (row-major order): None when the
/// shader cannot read it (dtype, rank, size).
pub(crate) fn count_nonzero(k: &mut KernelCtx, mask: &GTensor) -> Result<Option<Counted>> {
    if !usable(k, mask) {
        return Ok(None);
    }
    k.ensure(mask)?;
    let counts = k.new_out(DType::I32, &[mask.numel().div_ceil(BLOCK)])?;
    let (meta, groups) = mask_pass(mask, &vec![0; mask.rank()]);
    k.dispatch(
        &COUNT,
        bytemuck::bytes_of(&meta),
        &[(1, mask), (2, &counts)],
        groups,
    )?;
    let (offsets, total) = encode_scan(k, &counts)?;
    Ok(Some(Counted {
        mask: mask.clone(),
        offsets,
        total,
    }))
}

/// Encode the `n` (the count read back) flat offsets Σ coord[d] * weights[d] of the nonzero
/// elements of the counted mask, in row-major order, as an int64 tensor of shape [n].
pub(crate) fn emit(k: &mut KernelCtx, c: &Counted, weights: &[usize], n: usize) -> Result<GTensor> {
    let out = k.new_out(DType::I64, &[n])?;
    emit_into(k, c, weights, &out)?;
    Ok(out)
}

/// [`emit`] into `out` (a fresh contiguous int64 tensor): the first `out.numel()` offsets.
fn emit_into(k: &mut KernelCtx, c: &Counted, weights: &[usize], out: &GTensor) -> Result<()> {
    if out.numel() == 0 {
        return Ok(());
    }
    let (mut meta, groups) = mask_pass(&c.mask, weights);
    meta.offs[3] = out.numel() as u32;
    k.dispatch(
        &EMIT,
        bytemuck::bytes_of(&meta),
        &[(1, &c.mask), (2, out), (3, &c.offsets)],
        groups,
    )
}

/// Encode nonzero's [rows, rank] int64 coordinates of the counted mask (rank >= 1): one emit
/// pass per dim (unit weights give that dim's coordinate), copied into its column. With
/// `fill` (nonzero_static's word), `rows` need not be the count: the first `rows`
/// coordinates, the rows past the count holding `fill`.
pub(crate) fn coords(
    k: &mut KernelCtx,
    c: &Counted,
    rows: usize,
    fill: Option<u32>,
) -> Result<Option<GTensor>> {
    let rank = c.mask.rank();
    let out = k.new_out(DType::I64, &[rows, rank])?;
    if rows == 0 {
        return Ok(Some(out));
    }
    for d in 0..rank {
        let mut unit = vec![0; rank];
        unit[d] = 1;
        let col = match fill {
            None => k.new_out(DType::I64, &[rows])?,
            Some(w) => {
                let filled = super::index::encode_fill(k, DType::I64, &[rows], 0, [w, 0])?;
                let Some(col) = super::one_t(filled) else {
                    return Ok(None);
                };
                col
            }
        };
        emit_into(k, c, &unit, &col)?;
        let dst = out.view(vec![rows], vec![rank], d);
        super::index::copy_into(k, &col, &dst)?;
    }
    Ok(Some(out))
}

/// `nonzero_static(self, size, fill_value=-1)`: the first `size` coordinates of the nonzero
/// elements, `fill_value` rows after them; no readback (the count stays on the GPU). A
/// fill value outside int32 (the GPU's int64 word) declines to the CPU kernel.
fn nonzero_static(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let (size, fill) = (k.op.int("size")?, k.op.int_or("fill_value", -1)?);
    let (Ok(size), Ok(fill)) = (usize::try_from(size), i32::try_from(fill)) else {
        return Ok(None);
    };
    if x.rank() == 0 || !k.out_is(DType::I64) || size.saturating_mul(x.rank()) >= u32::MAX as usize
    {
        return Ok(None);
    }
    let Some(c) = count_nonzero(k, &x)? else {
        return Ok(None);
    };
    Ok(coords(k, &c, size, Some(fill as u32))?.map(|o| vec![super::Slot::Tensor(o)]))
}

/// The targets of this file run by the op table (the others by [`crate::gpu::dynamic`]).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::On;
    t.kernel(
        &["aten.nonzero_static"],
        On::Only(&["default"]),
        nonzero_static,
        |ins, outs| ins.len() == 1 && gpu_dtype(ins[0]) && outs == [DType::I64],
    );
}

/// Encode masked_scatter's output: `base` (the counted mask's shape) where the mask is
/// false, and at the masked positions the elements of `source` (at least as many as the
/// count, which the caller checked) in row-major order. None for a dtype or size the
/// shader does not move.
pub(crate) fn scatter_ranked(
    k: &mut KernelCtx,
    c: &Counted,
    base: &GTensor,
    source: &GTensor,
) -> Result<Option<GTensor>> {
    if [base, source].iter().any(|t| !usable(k, t))
        || source.dtype != base.dtype
        || base.sizes != c.mask.sizes
    {
        return Ok(None);
    }
    let out = k.new_out(base.dtype, &base.sizes)?;
    if out.numel() == 0 {
        return Ok(Some(out));
    }
    let source = if source.is_contiguous() {
        k.ensure(source)?;
        source.clone()
    } else {
        let flat = k.new_out(source.dtype, &source.sizes)?;
        super::index::encode_copy(k, source, &flat)?;
        flat
    };
    k.ensure(base)?;
    let (mut meta, groups) = mask_pass(&c.mask, &base.strides);
    meta.offs[1] = source.offset as u32;
    meta.offs[3] = base.offset as u32;
    k.dispatch(
        &SCATTER_RANKED,
        bytemuck::bytes_of(&meta),
        &[
            (1, &c.mask),
            (2, &out),
            (3, &c.offsets),
            (4, base),
            (5, &source),
        ],
        groups,
    )?;
    Ok(Some(out))
}

/// Encode the sum of `repeats` (a 1-D int tensor): None when the shader cannot read it.
pub(crate) fn count_repeats(k: &mut KernelCtx, repeats: &GTensor) -> Result<Option<Counted>> {
    if !usable(k, repeats) || repeats.rank() != 1 || !super::ints::is_int(repeats.dtype) {
        return Ok(None);
    }
    k.ensure(repeats)?;
    let (offsets, total) = encode_scan(k, repeats)?;
    Ok(Some(Counted {
        mask: repeats.clone(),
        offsets,
        total,
    }))
}

/// Encode the `n` (the sum read back) positions 0,0,..,1,1,.. of the counted repeats (an
/// int tensor of shape [n]).
pub(crate) fn repeat_index(
    k: &mut KernelCtx,
    c: &Counted,
    n: usize,
    dtype: DType,
) -> Result<GTensor> {
    let out = k.new_out(dtype, &[n])?;
    if n == 0 {
        return Ok(out);
    }
    let (gx, gy, row) = grid(n, BLOCK);
    let meta = SelectMeta {
        numel: n as u32,
        row,
        offs: [0, 0, c.mask.numel() as u32, 0],
        ..Default::default()
    };
    k.dispatch(
        &REPEAT_INDEX,
        bytemuck::bytes_of(&meta),
        &[(1, &c.offsets), (2, &out)],
        (gx, gy, 1),
    )?;
    Ok(out)
}

/// Gather `x` at the flat offsets `flat` (from its storage offset) into `shape`, the
/// flat index walking the output dims where `flat_strides` is nonzero and `x` the dims where
/// `x_strides` is (the index shader's gather). None when the gather declines.
pub(crate) fn gather_flat(
    k: &mut KernelCtx,
    x: &GTensor,
    flat: &GTensor,
    shape: &[usize],
    x_strides: &[usize],
    flat_strides: &[usize],
) -> Result<Option<GTensor>> {
    if shape.len() > MAX_RANK || x.span() > i32::MAX as usize {
        return Ok(None);
    }
    let r = super::index::encode_gather(
        k,
        x,
        flat,
        shape,
        x_strides,
        flat_strides,
        1,
        x.span().max(1),
        super::index::Indexing::INTERNAL,
    )?;
    Ok(super::one_t(r))
}

/// Gather `x` along `dim` at the int64 positions `idx` (index_select).
pub(crate) fn gather_dim(
    k: &mut KernelCtx,
    x: &GTensor,
    dim: usize,
    idx: &GTensor,
) -> Result<Option<GTensor>> {
    let mut shape = x.sizes.clone();
    shape[dim] = idx.numel();
    let mut ss = x.strides.clone();
    ss[dim] = 0;
    let mut is = vec![0; x.rank()];
    is[dim] = 1;
    let (stride, size) = (x.strides[dim], x.sizes[dim]);
    let ix = super::index::Indexing::INTERNAL;
    let r = super::index::encode_gather(k, x, idx, &shape, &ss, &is, stride, size, ix)?;
    Ok(super::one_t(r))
}

/// A fresh tensor stacking `parts` (same sizes and dtype) along a new leading dim: one
/// strided copy per part. None for a dtype the copy shader does not move.
pub(crate) fn stack(k: &mut KernelCtx, parts: &[GTensor]) -> Result<Option<GTensor>> {
    let Some(first) = parts.first() else {
        return Ok(None);
    };
    if !gpu_dtype(first.dtype)
        || parts
            .iter()
            .any(|p| p.sizes != first.sizes || p.dtype != first.dtype || !k.fits(p))
    {
        return Ok(None);
    }
    let mut sizes = vec![parts.len()];
    sizes.extend_from_slice(&first.sizes);
    let out = k.new_out(first.dtype, &sizes)?;
    let step = first.numel();
    for (i, p) in parts.iter().enumerate() {
        let dst = out.view(
            first.sizes.clone(),
            crate::gpu::store::contiguous_strides(&first.sizes),
            i * step,
        );
        super::index::encode_copy(k, p, &dst)?;
    }
    Ok(Some(out))
}
