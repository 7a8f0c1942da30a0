//! `embedding_bag` on the GPU (shaders/bag.wgsl): `embedding_bag` (and its `padding_idx`
//! overload), `_embedding_bag` and `_embedding_bag_forward_only` of an f32 weight, with the
//! four outputs torch's CPU kernel gives (src/ops/index/bag.rs has its rules). One
//! invocation per (bag, column) reduces the bag's rows in index order, as the CPU loop does
//! (the same f32 sums); a second pass writes offset2bag and the bag sizes.
//!
//! Bad indices or offsets: where the host has a current copy of `indices` or `offsets` (a
//! program input, a constant) it checks them, and invalid ones send the node to the CPU
//! kernel, which raises torch's error. Values computed on the GPU: an index outside the
//! weight's rows is skipped and reported (`gpu::fault`: the run fails with the CPU kernel's
//! error); offsets are clamped to the indices.

use super::{grid, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::fault::IndexText;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{lock, GTensor};
use crate::ops::index::bag::{BagParams, MODE_MAX, MODE_SUM};
use bytemuck::{Pod, Zeroable};

pub const POOL: Variant = Variant::new(Shader::Bag, "pool");
pub const BAG_IDS: Variant = Variant::new(Shader::Bag, "bag_ids");

/// Mirrors `Meta` in shaders/bag.wgsl (field docs there).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct BagMeta {
    pub bags: u32,
    pub dim: u32,
    pub n: u32,
    pub n_offsets: u32,
    pub rows: u32,
    pub mode: u32,
    pub flags: u32,
    pub padding: u32,
    pub row: u32,
    pub w_offset: u32,
    pub w_rows: u32,
    pub w_cols: u32,
    pub idx: [u32; 2],
    pub offs: [u32; 2],
    pub psw: [u32; 2],
    pub sizes: u32,
    pub fault_site: u32,
}

/// (offset, stride) of a 1-D tensor.
fn line(t: &GTensor) -> [u32; 2] {
    [
        t.offset as u32,
        t.strides.first().copied().unwrap_or(1) as u32,
    ]
}

/// The offsets where the host has them (a tensor with a current CPU copy), else None.
fn host_offsets(t: &GTensor) -> Option<Vec<i64>> {
    if !lock(&t.cell).cpu_valid {
        return None;
    }
    let v = t.cpu_view().ok()?;
    // A decision from the data: a run that makes it is not replayed (see gpu::tape).
    crate::gpu::tape::note_host_read();
    Some(v.to_vec::<i64>())
}

/// Whether the host can tell the offsets are bad (the first not 0, or one decreasing): a
/// tensor with a current CPU copy is checked, one that only lives on the GPU is not.
fn host_bad_offsets(offsets: Option<&[i64]>) -> bool {
    offsets.is_some_and(|v| v.first().is_some_and(|&o| o != 0) || v.windows(2).any(|w| w[1] < w[0]))
}

/// The most indices one bag may hold: the longest bag where the host has the offsets, else
/// all `n` (`pool` walks a bag in one invocation, under the loop cap of CPU adapters).
fn longest_bag(offsets: Option<&[i64]>, n: usize) -> usize {
    let Some(v) = offsets else {
        return n;
    };
    let ends = v.iter().skip(1).copied().chain([n as i64]);
    v.iter()
        .zip(ends)
        .map(|(&a, b)| b.saturating_sub(a).max(0) as usize)
        .max()
        .unwrap_or(0)
}

fn embedding_bag(k: &mut KernelCtx) -> Out {
    let (Some(w), Some(idx), Some(offs)) = (k.t("weight"), k.t("indices"), k.t("offsets")) else {
        return Ok(None);
    };
    let psw = k.t("per_sample_weights");
    if w.rank() != 2 || idx.rank() != 1 || offs.rank() != 1 || w.dtype != DType::F32 {
        return Ok(None);
    }
    // Bad arguments: the CPU kernel raises torch's error.
    let Ok(p) = BagParams::of(&k.op, w.sizes[0]) else {
        return Ok(None);
    };
    let (rows, dim, n) = (w.sizes[0], w.sizes[1], idx.numel());
    let psw_ok = psw
        .as_ref()
        .is_none_or(|s| p.mode == MODE_SUM && s.numel() == n && s.rank() == 1);
    let too_big = [rows, dim, n, offs.numel()]
        .iter()
        .any(|&x| x >= i32::MAX as usize)
        || rows.saturating_mul(dim) >= u32::MAX as usize;
    let host = host_offsets(&offs);
    if !psw_ok
        || too_big
        || [&w, &idx, &offs].iter().any(|t| !k.fits(t))
        || psw.as_ref().is_some_and(|s| !k.fits(s))
        || !super::scatter::host_in_range(&idx, rows, false)
        || host_bad_offsets(host.as_deref())
        // `pool` counts a bag's padding, then sums it: two walks.
        || !super::loops_fit(k, longest_bag(host.as_deref(), n), 4)
    {
        return Ok(None);
    }
    let bags = offs.numel().saturating_sub(p.include_last_offset as usize);
    let it = offs.dtype;
    let o2b_len = if p.sum_fast_path(w.dtype, w.strides[1]) {
        0
    } else {
        n
    };
    let max_sizes = if p.mode == MODE_MAX {
        vec![bags, dim]
    } else {
        vec![bags]
    };
    let out = k.new_out(DType::F32, &[bags, dim])?;
    let offset2bag = k.new_out(it, &[o2b_len])?;
    let sizes = p.bag_size_len(offs.numel(), bags);
    let bag_size = k.new_out(it, &[sizes])?;
    let max_idx = k.new_out(it, &max_sizes)?;
    for t in [&w, &idx, &offs] {
        k.ensure(t)?;
    }
    if let Some(s) = &psw {
        k.ensure(s)?;
    }
    let flags = psw.is_some() as u32
        | (p.padding_idx.is_some() as u32) << 1
        | ((o2b_len > 0) as u32) << 2
        | (p.by_offsets(w.dtype, w.strides[1]) as u32) << 3;
    let mut meta = BagMeta {
        bags: bags as u32,
        dim: dim as u32,
        n: n as u32,
        n_offsets: offs.numel() as u32,
        rows: rows as u32,
        mode: p.mode as u32,
        flags,
        padding: p.padding_idx.unwrap_or(0) as u32,
        w_offset: w.offset as u32,
        w_rows: w.strides[0] as u32,
        w_cols: w.strides[1] as u32,
        idx: line(&idx),
        offs: line(&offs),
        psw: psw.as_ref().map(line).unwrap_or_default(),
        sizes: sizes as u32,
        fault_site: k.fault_site(IndexText::WeightRows),
        ..Default::default()
    };
    if bags * dim > 0 {
        let (gx, gy, row) = grid(bags * dim, 64);
        meta.row = row;
        // Without per-sample weights the shader never reads binding 4: the weight stands in.
        k.dispatch(
            &POOL,
            bytemuck::bytes_of(&meta),
            &[
                (1, &w),
                (2, &idx),
                (3, &offs),
                (4, psw.as_ref().unwrap_or(&w)),
                (5, &out),
                (6, &max_idx),
            ],
            (gx, gy, 1),
        )?;
    }
    let ids = n.max(sizes);
    if ids > 0 {
        let (gx, gy, row) = grid(ids, 64);
        meta.row = row;
        k.dispatch(
            &BAG_IDS,
            bytemuck::bytes_of(&meta),
            &[(2, &idx), (3, &offs), (7, &offset2bag), (8, &bag_size)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(
        [out, offset2bag, bag_size, max_idx]
            .into_iter()
            .map(Slot::Tensor)
            .collect(),
    ))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{f32, index, On};
    // (weight, indices, offsets[, per_sample_weights]) -> (output, three index tensors).
    fn bags(i: &[DType], o: &[DType]) -> bool {
        i.len() >= 3
            && f32(i[0])
            && index(i[1])
            && index(i[2])
            && i[3..].iter().all(|&d| f32(d))
            && o.len() == 4
            && f32(o[0])
            && o[1..].iter().all(|&d| index(d))
    }
    t.kernel(
        &["aten.embedding_bag"],
        On::Only(&["default", "padding_idx"]),
        embedding_bag,
        bags,
    );
    t.kernel(
        &["aten._embedding_bag", "aten._embedding_bag_forward_only"],
        On::Only(&["default"]),
        embedding_bag,
        bags,
    );
    t.variants(&[POOL, BAG_IDS]);
}
