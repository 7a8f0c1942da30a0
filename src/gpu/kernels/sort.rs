//! Sorting and order statistics on the GPU (shaders/sort.wgsl): sort / argsort (default and
//! stable, any dim, descending), msort, topk, kthvalue, median / nanmedian (default and
//! dim), searchsorted and bucketize (.Tensor).
//!
//! Short lanes sort with one invocation each (a stable merge sort), lanes of [`WG_LANE`] or
//! more with a workgroup each (a bitonic sort breaking ties by input index): both give the
//! CPU's order exactly (NaN above every number, equal keys in input order), so results
//! match the CPU kernel, indices included. Lanes longer than [`MAX_LANE`] stay on the CPU. f32, int32/int64 (as i32) and bool keys; other dtypes stay on the CPU.
//!
//! searchsorted's `sorter`: one with a current CPU copy is checked on the host (an index
//! outside the row sends the node to the CPU kernel, which raises); one computed on the GPU
//! is checked by the search kernel, every entry as torch does (an index outside the row is
//! clamped into it and reported: `gpu::fault` fails the run with the CPU kernel's error).

use super::{grid, index, norm_dim, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::GTensor;
use crate::ops::sort::params::{Search, SortParams, TopK};
use bytemuck::{Pod, Zeroable};

pub const SORT: Variant = Variant::new(Shader::Sort, "sort");
pub const SORT_WG: Variant = Variant::new(Shader::Sort, "sort_wg");
pub const SEARCH: Variant = Variant::new(Shader::Sort, "search");

pub fn variants() -> Vec<Variant> {
    vec![SORT, SORT_WG, SEARCH]
}

/// Mirrors `Meta` in shaders/sort.wgsl (field docs there).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct SortMeta {
    pub rows: u32,
    pub n: u32,
    pub inner: u32,
    pub row: u32,
    pub flags: u32,
    pub start: u32,
    pub keep: u32,
    pub x_off: u32,
    /// search: the fault site of a sorter index outside the row (`gpu::fault`).
    pub fault_site: u32,
    pub _pad: [u32; 3],
}

/// The longest lane sorted on the GPU.
pub const MAX_LANE: usize = 1 << 18;
/// Lanes at least this long sort with a workgroup each (`sort_wg`), shorter ones with one
/// invocation each (`sort`).
pub const WG_LANE: usize = 128;

/// Whether the sort of a lane of `n` keeps each thread's loop steps within
/// [`super::LOOP_BUDGET`]: `sort_wg`'s 256 threads take p / 512 + 1 steps (p: `n` to a power
/// of two) in each of its log2(p) (log2(p) + 1) / 2 bitonic passes, and the loads and stores;
/// `sort` (lanes under [`WG_LANE`]) merges n log2(n) at most.
fn sort_fits(k: &KernelCtx, n: usize) -> bool {
    if n < WG_LANE {
        return super::loops_fit(k, n * (WG_LANE.trailing_zeros() as usize + 2), 1);
    }
    let p = n.next_power_of_two();
    let passes = p.trailing_zeros() as usize;
    super::loops_fit(k, passes * (passes + 1) / 2 + 4, p.div_ceil(512) + 1)
}

/// How the sorted lane is reduced to the output.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Sorted positions [start, start + keep).
    Range(usize, usize),
    Median,
    NanMedian,
}

/// The key bits of the shader's flags (None: no kernel for the dtype).
fn key_flags(d: DType) -> Option<u32> {
    match d {
        DType::F32 => Some(0),
        DType::I32 | DType::I64 | DType::Bool => Some(2),
        _ => None,
    }
}

/// `x` contiguous (itself, or a copy into a fresh buffer).
pub(super) fn contig(k: &mut KernelCtx, x: &GTensor) -> crate::error::Result<GTensor> {
    if x.is_contiguous() {
        k.ensure(x)?;
        return Ok(x.clone());
    }
    let c = k.new_out(x.dtype, &x.sizes)?;
    index::encode_copy(k, x, &c)?;
    Ok(c)
}

/// Sort the lanes of `x` along `dim` and write the positions `mode` selects: (values,
/// indices) of `out_sizes` (the input's sizes with `dim` resized to the kept count, or
/// with it dropped). None: not on the GPU.
fn encode_sort(
    k: &mut KernelCtx,
    x: &GTensor,
    dim: usize,
    descending: bool,
    mode: Mode,
    out_sizes: &[usize],
) -> crate::error::Result<Option<(GTensor, GTensor)>> {
    let Some(key) = key_flags(x.dtype) else {
        return Ok(None);
    };
    let (x, dim) = if x.rank() == 0 {
        (x.view(vec![1], vec![1], x.offset), 0)
    } else {
        (x.clone(), dim)
    };
    let n = x.sizes[dim];
    let inner: usize = x.sizes[dim + 1..].iter().product();
    let numel = x.numel();
    let rows = numel.checked_div(n).unwrap_or(0);
    let limit = k.r.dev.properties.limits.max_storage_buffer_binding_size;
    if n > MAX_LANE || !k.fits(&x) || (numel as u64) * 16 > limit || !sort_fits(k, n) {
        return Ok(None);
    }
    let vals = k.new_out(x.dtype, out_sizes)?;
    let inds = k.new_out(DType::I64, out_sizes)?;
    let out_n: usize = out_sizes.iter().product();
    if rows == 0 || out_n == 0 {
        return Ok(Some((vals, inds)));
    }
    let (start, keep, m) = match mode {
        Mode::Range(s, c) => (s, c, 0),
        Mode::Median => (0, 1, 1),
        Mode::NanMedian => (0, 1, 2),
    };
    let c = contig(k, &x)?;
    let scratch = k.new_out(DType::I32, &[numel * 4])?;
    let (v, (gx, gy, row)) = if n >= WG_LANE {
        let (gx, gy, _) = grid(rows, 1);
        (&SORT_WG, (gx, gy, gx))
    } else {
        (&SORT, grid(rows, 64))
    };
    let meta = SortMeta {
        rows: rows as u32,
        n: n as u32,
        inner: inner as u32,
        row,
        flags: descending as u32 | key | m << 2,
        start: start as u32,
        keep: keep as u32,
        x_off: c.offset as u32,
        ..Default::default()
    };
    k.dispatch(
        v,
        bytemuck::bytes_of(&meta),
        &[(1, &vals), (2, &inds), (3, &scratch), (4, &c)],
        (gx, gy, 1),
    )?;
    Ok(Some((vals, inds)))
}

/// The permutation (int64, the same length) that sorts the 1-D `x` ascending, stably, NaN
/// last: the sort step of unique. None: not on the GPU (dtype, length).
pub(super) fn argsort_lane(
    k: &mut KernelCtx,
    x: &GTensor,
) -> crate::error::Result<Option<GTensor>> {
    let n = x.numel();
    let r = encode_sort(k, x, 0, false, Mode::Range(0, n), &[n])?;
    Ok(r.map(|(_, order)| order))
}

fn dim_arg(k: &KernelCtx, x: &GTensor, default: i64) -> crate::error::Result<Option<usize>> {
    let d = k.op.opt_int("dim")?.unwrap_or(default);
    Ok(norm_dim(d, x.rank().max(1)))
}

/// The sizes with `dim` set to `n` (0-d stays 0-d).
fn resized(x: &GTensor, dim: usize, n: usize) -> Vec<usize> {
    let mut s = x.sizes.clone();
    if let Some(v) = s.get_mut(dim) {
        *v = n;
    }
    s
}

/// sort (.default / .stable), argsort (.default / .stable), msort.
pub(super) fn sort(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let t = k.target().to_string();
    let msort = t.starts_with("aten.msort");
    let p = SortParams::parse(&k.op)?;
    let Some(dim) = norm_dim(p.dim, x.rank().max(1)) else {
        return Ok(None);
    };
    let descending = p.descending;
    let argsort = t.starts_with("aten.argsort");
    if k.out_dtype(0) != Some(if argsort { DType::I64 } else { x.dtype }) {
        return Ok(None);
    }
    let n = x.sizes.get(dim).copied().unwrap_or(1);
    let Some((v, i)) = encode_sort(k, &x, dim, descending, Mode::Range(0, n), &x.sizes)? else {
        return Ok(None);
    };
    Ok(Some(if msort {
        vec![Slot::Tensor(v)]
    } else if argsort {
        vec![Slot::Tensor(i)]
    } else {
        vec![Slot::Tensor(v), Slot::Tensor(i)]
    }))
}

pub(super) fn topk(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let TopK {
        k: kk,
        dim,
        largest,
    } = TopK::parse(&k.op)?;
    let Some(dim) = norm_dim(dim, x.rank().max(1)) else {
        return Ok(None);
    };
    let n = x.sizes.get(dim).copied().unwrap_or(1);
    if kk < 0 || kk as usize > n || k.out_dtype(0) != Some(x.dtype) {
        return Ok(None);
    }
    // A 0-d input is its own top-k for k = 0 as for k = 1 (torch returns it either way).
    let kk = if x.rank() == 0 { 1 } else { kk as usize };
    // Sorted order is also a valid answer for sorted=False (the CPU kernel's as well).
    let sizes = resized(&x, dim, kk);
    let Some((v, i)) = encode_sort(k, &x, dim, largest, Mode::Range(0, kk), &sizes)? else {
        return Ok(None);
    };
    Ok(Some(vec![Slot::Tensor(v), Slot::Tensor(i)]))
}

/// The sizes of a reduction over `dim` (kept as 1 or dropped).
fn reduced(x: &GTensor, dim: usize, keepdim: bool) -> Vec<usize> {
    let mut s = x.sizes.clone();
    if dim < s.len() {
        if keepdim {
            s[dim] = 1;
        } else {
            s.remove(dim);
        }
    }
    s
}

pub(super) fn kthvalue(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let Some(dim) = dim_arg(k, &x, -1)? else {
        return Ok(None);
    };
    let kk = k.op.int("k")?;
    let n = x.sizes.get(dim).copied().unwrap_or(1);
    if kk < 1 || kk as usize > n || k.out_dtype(0) != Some(x.dtype) {
        return Ok(None);
    }
    let sizes = reduced(&x, dim, k.op.bool_or("keepdim", false)?);
    let mode = Mode::Range(kk as usize - 1, 1);
    let Some((v, i)) = encode_sort(k, &x, dim, false, mode, &sizes)? else {
        return Ok(None);
    };
    Ok(Some(vec![Slot::Tensor(v), Slot::Tensor(i)]))
}

/// median / nanmedian, .default (the flattened input, the value only) and .dim.
pub(super) fn median(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let mode = if k.target().starts_with("aten.nanmedian") {
        Mode::NanMedian
    } else {
        Mode::Median
    };
    // (Before any copy: a dtype the sort kernels do not key, f64, is not held on the GPU.)
    if k.out_dtype(0) != Some(x.dtype) || key_flags(x.dtype).is_none() {
        return Ok(None);
    }
    match k.op.opt_int("dim")? {
        None => {
            // An empty input's median (NaN) is left to the CPU kernel.
            if x.numel() == 0 {
                return Ok(None);
            }
            let c = contig(k, &x)?;
            let flat = c.view(vec![c.numel()], vec![1], c.offset);
            let Some((v, _)) = encode_sort(k, &flat, 0, false, mode, &[])? else {
                return Ok(None);
            };
            Ok(Some(vec![Slot::Tensor(v)]))
        }
        Some(d) => {
            let Some(dim) = norm_dim(d, x.rank().max(1)) else {
                return Ok(None);
            };
            if x.sizes.get(dim) == Some(&0) {
                return Ok(None);
            }
            let sizes = reduced(&x, dim, k.op.bool_or("keepdim", false)?);
            let Some((v, i)) = encode_sort(k, &x, dim, false, mode, &sizes)? else {
                return Ok(None);
            };
            Ok(Some(vec![Slot::Tensor(v), Slot::Tensor(i)]))
        }
    }
}

/// searchsorted.Tensor and bucketize.Tensor: a binary search per value. The sequence and
/// the values share a key kind (both f32, or both integer), as the comparisons run in it.
pub(super) fn searchsorted(k: &mut KernelCtx) -> Out {
    let bucketize = k.target().starts_with("aten.bucketize");
    let seq_name = if bucketize {
        "boundaries"
    } else {
        "sorted_sequence"
    };
    let (Some(seq), Some(values)) = (k.t(seq_name), k.t("self")) else {
        return Ok(None);
    };
    let (Some(kv), Some(ks)) = (key_flags(values.dtype), key_flags(seq.dtype)) else {
        return Ok(None);
    };
    if kv != ks || values.dtype == DType::Bool || seq.dtype == DType::Bool {
        return Ok(None);
    }
    // A side torch rejects is the CPU kernel's error.
    let Ok(Search { right, out_dtype }) = Search::parse(&k.op) else {
        return Ok(None);
    };
    if k.out_dtype(0) != Some(out_dtype) || seq.rank() == 0 {
        return Ok(None);
    }
    let sorter = if bucketize { None } else { k.t("sorter") };
    let m = seq.sizes[seq.rank() - 1];
    if sorter.as_ref().is_some_and(|s| {
        s.sizes != seq.sizes
            || !matches!(s.dtype, DType::I64 | DType::I32)
            || !super::scatter::host_in_range(s, m, false)
    }) {
        return Ok(None);
    }
    let one_d = seq.rank() == 1;
    if !one_d
        && (values.rank() != seq.rank()
            || values.sizes[..values.rank() - 1] != seq.sizes[..seq.rank() - 1])
    {
        return Ok(None);
    }
    if !k.fits(&seq) || !k.fits(&values) || sorter.as_ref().is_some_and(|s| !k.fits(s)) {
        return Ok(None);
    }
    let out = k.new_out(out_dtype, &values.sizes)?;
    let nv = values.numel();
    if nv == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let per_row = if one_d {
        nv
    } else {
        values.sizes.last().copied().unwrap_or(1).max(1)
    };
    let vc = contig(k, &values)?;
    let sc = contig(k, &seq)?;
    let so = match &sorter {
        Some(s) => Some(contig(k, s)?),
        None => None,
    };
    let (gx, gy, row) = grid(nv, 64);
    let meta = SortMeta {
        rows: nv as u32,
        n: m as u32,
        inner: per_row as u32,
        row,
        flags: right as u32 | kv | (so.is_some() as u32) << 4 | (one_d as u32) << 5,
        start: sc.offset as u32,
        keep: so.as_ref().map_or(0, |s| s.offset as u32),
        x_off: vc.offset as u32,
        fault_site: k.fault_site(crate::gpu::fault::IndexText::Sorter),
        _pad: [0; 3],
    };
    let sorter_buf = so.as_ref().unwrap_or(&sc);
    // `out` holds i32 words for int32 and int64 alike.
    k.dispatch(
        &SEARCH,
        bytemuck::bytes_of(&meta),
        &[(2, &out), (4, &vc), (5, &sc), (6, sorter_buf)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, f32, index, sortable, On};
    // Values in the input's dtype, int64 indices.
    fn sorts(i: &[DType], o: &[DType]) -> bool {
        let first = i.first().copied();
        i.len() == 1
            && first.is_some_and(sortable)
            && all(o, |d| Some(d) == first || d == DType::I64)
    }
    t.kernel(
        &["aten.sort", "aten.argsort"],
        On::Only(&["default", "stable"]),
        sort,
        sorts,
    );
    t.kernel(&["aten.msort"], On::Only(&["default"]), sort, sorts);
    t.kernel(&["aten.topk"], On::Only(&["default"]), topk, sorts);
    t.kernel(&["aten.kthvalue"], On::Only(&["default"]), kthvalue, sorts);
    t.kernel(
        &["aten.median", "aten.nanmedian"],
        On::Only(&["default", "dim"]),
        median,
        sorts,
    );
    // Sequence and values both f32 or both integer; an integer sorter.
    t.kernel(
        &["aten.searchsorted", "aten.bucketize"],
        On::Only(&["Tensor"]),
        searchsorted,
        |i, o| {
            i.len() >= 2
                && ((f32(i[0]) && f32(i[1])) || (index(i[0]) && index(i[1])))
                && all(&i[2..], index)
                && (o == [DType::I64] || o == [DType::I32])
        },
    );
}
