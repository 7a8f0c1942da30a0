//! unique on the GPU (shaders/sort.wgsl's `unique_*` passes): `_unique2`, `_unique`,
//! `unique_consecutive`, `unique_dim` and `unique_dim_consecutive`, whose output length
//! depends on the data. [`crate::gpu::dynamic`] runs them as torch.mps does:
//!
//! 1. [`group`]: the units (elements, or the slices along `dim`) put in order, unless
//!    consecutive: the GPU sort's stable argsort ([`super::sort`]); slices lexicographically
//!    by one stable argsort per element of a slice, last element first. Then a flag where a
//!    unit differs from the one before it (NaN from everything), counted by the block scan
//!    of [`select`].
//! 2. The host reads back that count alone: the number of unique units.
//! 3. [`finish`]: the segments' first positions (select's `emit`), then one pass writes the
//!    inverse, the counts and each segment's first unit, and the values are a gather of
//!    those units from the input.
//!
//! Keys: f32, int32 / int64 (held as i32) and bool, as the sort's; other dtypes stay on the
//! CPU, as do inputs longer than the sort's lane ([`super::sort::MAX_LANE`]) and slices longer
//! than [`MAX_SORTED_SLICE`].

use super::sort::{argsort_lane, contig, SortMeta, MAX_LANE};
use super::{grid, select, KernelCtx};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::GTensor;

pub const COLUMN: Variant = Variant::new(Shader::Sort, "unique_column");
pub const FLAG: Variant = Variant::new(Shader::Sort, "unique_flag");
pub const FINISH: Variant = Variant::new(Shader::Sort, "unique_finish");

pub fn variants() -> Vec<Variant> {
    vec![COLUMN, FLAG, FINISH]
}

/// The unique targets (overload `default`), each run by [`crate::gpu::dynamic`] with a
/// readback of the count.
pub const TARGETS: [&str; 5] = [
    "aten._unique2",
    "aten._unique",
    "aten.unique_consecutive",
    "aten.unique_dim",
    "aten.unique_dim_consecutive",
];

/// The longest slice unique_dim sorts on the GPU: its lexicographic order takes one GPU
/// sort per element of a slice.
pub const MAX_SORTED_SLICE: usize = 64;

/// Whether the keys compare as integers (None: no GPU unique for the dtype).
fn int_keys(d: DType) -> Option<bool> {
    match d {
        DType::F32 => Some(false),
        DType::I32 | DType::I64 | DType::Bool => Some(true),
        _ => None,
    }
}

/// Whether the GPU runs unique with keys of `dtype` (the support table's answer).
pub fn serves(dtype: DType) -> bool {
    int_keys(dtype).is_some()
}

/// The input of a unique grouped on the GPU: what [`finish`] needs once the count is read back.
pub(crate) struct Grouped {
    x: GTensor,
    /// The dim whose slices are the units (None: the elements of the flattened input).
    dim: Option<usize>,
    /// The units one after another, [units, unit length], contiguous.
    units: GTensor,
    /// The order the units are visited in (int64, one per unit); None: input order.
    order: Option<GTensor>,
    /// The flags counted (None: no units). Its `total` is the number of unique units.
    pub counted: Option<select::Counted>,
}

/// The parameters and grid of a pass over `rows` unit positions of `units`, visited through
/// `order` where there is one.
fn pass(
    units: &GTensor,
    rows: usize,
    order: Option<&GTensor>,
    start: usize,
) -> (SortMeta, (u32, u32, u32)) {
    let (gx, gy, row) = grid(rows, 64);
    let int = int_keys(units.dtype).unwrap_or(true);
    let meta = SortMeta {
        rows: rows as u32,
        n: units.sizes.get(1).copied().unwrap_or(1) as u32,
        inner: 1,
        row,
        flags: (int as u32) << 1 | (order.is_some() as u32) << 6,
        start: start as u32,
        keep: order.map_or(0, |o| o.offset as u32),
        x_off: units.offset as u32,
        ..Default::default()
    };
    (meta, (gx, gy, 1))
}

/// Element `j` of each unit of `units`, in the order `order` visits them (a fresh [units]
/// tensor of their dtype).
fn column(k: &mut KernelCtx, units: &GTensor, order: &GTensor, j: usize) -> Result<GTensor> {
    let rows = units.sizes[0];
    let out = k.new_out(units.dtype, &[rows])?;
    let (meta, groups) = pass(units, rows, Some(order), j);
    k.dispatch(
        &COLUMN,
        bytemuck::bytes_of(&meta),
        &[(1, &out), (4, units), (6, order)],
        groups,
    )?;
    Ok(out)
}

/// The lexicographic order of the units (rows of the contiguous [units, len] `units`): a
/// stable argsort by each column, last column first, each pass sorting the keys in the
/// order so far. None: a sort the GPU declines.
fn lex_order(k: &mut KernelCtx, units: &GTensor) -> Result<Option<GTensor>> {
    let (rows, len) = (units.sizes[0], units.sizes[1]);
    let mut order: Option<GTensor> = None;
    for j in (0..len).rev() {
        let keys = match &order {
            None => units.view(vec![rows], vec![len], units.offset + j),
            Some(o) => column(k, units, o, j)?,
        };
        let Some(step) = argsort_lane(k, &keys)? else {
            return Ok(None);
        };
        order = Some(match order {
            None => step,
            // The order so far, permuted by this pass's.
            Some(o) => column(k, &o.view(vec![rows, 1], vec![1, 1], o.offset), &step, 0)?,
        });
    }
    Ok(order)
}

/// Encode the grouping of the units of `x` (slices along `dim`, or its elements), sorted
/// unless `consecutive`. None: not on the GPU (dtype, sizes; the CPU kernel runs, and
/// raises torch's errors for a bad `dim`).
pub(crate) fn group(
    k: &mut KernelCtx,
    x: &GTensor,
    dim: Option<i64>,
    consecutive: bool,
) -> Result<Option<Grouped>> {
    if int_keys(x.dtype).is_none() || !k.fits(x) || x.numel() > i32::MAX as usize {
        return Ok(None);
    }
    let dim = match dim {
        None => None,
        Some(d) => {
            let r = x.rank() as i64;
            let d = if d < 0 { d + r } else { d };
            if !(0..r).contains(&d) {
                return Ok(None);
            }
            Some(d as usize)
        }
    };
    let (rows, len) = match dim {
        Some(d) => (x.sizes[d], x.numel().checked_div(x.sizes[d]).unwrap_or(0)),
        None => (x.numel(), 1),
    };
    if rows > 0 && len == 0 {
        // Slices with no elements: left to the CPU kernel.
        return Ok(None);
    }
    if !consecutive && (rows > MAX_LANE || len > MAX_SORTED_SLICE) {
        return Ok(None);
    }
    // `unique_flag` compares two slices in one invocation: past the loop cap of CPU adapters
    // the CPU kernel runs.
    if !super::loops_fit(k, len, 2) {
        return Ok(None);
    }
    // `x` with `dim` first, so that each unit is a contiguous run.
    let first = match dim {
        Some(d) => {
            let mut perm: Vec<usize> = (0..x.rank()).collect();
            perm.remove(d);
            perm.insert(0, d);
            let sizes = perm.iter().map(|&i| x.sizes[i]).collect();
            let strides = perm.iter().map(|&i| x.strides[i]).collect();
            x.view(sizes, strides, x.offset)
        }
        None => x.clone(),
    };
    let mut g = Grouped {
        x: x.clone(),
        dim,
        units: first.clone(),
        order: None,
        counted: None,
    };
    if rows == 0 {
        return Ok(Some(g));
    }
    let c = contig(k, &first)?;
    g.units = c.view(vec![rows, len], vec![len, 1], c.offset);
    if !consecutive {
        let Some(order) = lex_order(k, &g.units)? else {
            return Ok(None);
        };
        g.order = Some(order);
    }
    let flags = k.new_out(DType::I32, &[rows])?;
    let (meta, groups) = pass(&g.units, rows, g.order.as_ref(), 0);
    // Without an order the shader reads no `sorter`: the units stand in for it.
    let order = g.order.as_ref().unwrap_or(&g.units);
    k.dispatch(
        &FLAG,
        bytemuck::bytes_of(&meta),
        &[(2, &flags), (4, &g.units), (6, order)],
        groups,
    )?;
    g.counted = select::count_nonzero(k, &flags)?;
    Ok(g.counted.is_some().then_some(g))
}

/// The outputs of a unique of `segments` unique units (the count read back): the values
/// (the input's sizes with the units' dim, or the flattened input's, of length `segments`),
/// the int64 inverse (the input's sizes, or [units] for slices) and the int64 counts.
/// None: the gather of the values declines.
pub(crate) fn finish(
    k: &mut KernelCtx,
    g: &Grouped,
    segments: usize,
) -> Result<Option<[GTensor; 3]>> {
    let rows = g.units.sizes.first().copied().unwrap_or(0);
    let (source, d, inverse_sizes) = match g.dim {
        Some(d) => (g.x.clone(), d, vec![rows]),
        None => (
            g.units.view(vec![rows], vec![1], g.units.offset),
            0,
            g.x.sizes.clone(),
        ),
    };
    let inverse = k.new_out(DType::I64, &[rows])?;
    let counts = k.new_out(DType::I64, &[segments])?;
    let firsts = k.new_out(DType::I64, &[segments])?;
    if let Some(c) = &g.counted {
        let starts = select::emit(k, c, &[1], segments)?;
        let (meta, groups) = pass(&g.units, rows, g.order.as_ref(), segments);
        // Without an order the shader reads no `sorter`: the starts stand in for it.
        let order = g.order.as_ref().unwrap_or(&starts);
        k.dispatch(
            &FINISH,
            bytemuck::bytes_of(&meta),
            &[
                (1, &counts),
                (2, &inverse),
                (3, &firsts),
                (5, &starts),
                (6, order),
            ],
            groups,
        )?;
    }
    let Some(values) = select::gather_dim(k, &source, d, &firsts)? else {
        return Ok(None);
    };
    let inverse = inverse.view(
        inverse_sizes.clone(),
        crate::gpu::store::contiguous_strides(&inverse_sizes),
        0,
    );
    Ok(Some([values, inverse, counts]))
}
