//! `embedding_bag` (and its `padding_idx` overload, `_embedding_bag`,
//! `_embedding_bag_forward_only`): the rows of `weight` that `indices` name, reduced per bag
//! (`offsets` start each bag) by sum (optionally weighted per sample), mean or max. Torch's
//! four outputs, as its CPU kernel gives them (measured with torch 2.15; the cases are in
//! tests/fixgen/ops/index.py):
//! - bag b holds indices `offsets[b]..offsets[b + 1]`, the last bag running to the end of
//!   `indices`, with `include_last_offset` too (its trailing indices join the last bag);
//! - except that float weights (f32/f16/bf16, columns at stride 1) summed or averaged
//!   without a padding row take torch's offsets kernel, which reduces `offsets[b]..offsets[b + 1]` only (the trailing
//!   indices are left out, though a mean still divides by the bag size above);
//! - `output [bags, D]`; `offset2bag` one bag id per index, `[0]` on the sum fast path
//!   (the offsets kernel summing); `bag_size` the bag's indices less its padding entries
//!   (zeros for sum): one per bag from `_embedding_bag`, one per offset from the others (as
//!   torch's meta function has it; eager torch gives one per bag there too); `max_indices` the max's rows `[bags, D]` (max), `bag_size`
//!   again (mean) or zeros (sum).

use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::shape::index_values;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.embedding_bag.default", embedding_bag, bag_rule);
    r.define("aten.embedding_bag.padding_idx", embedding_bag, bag_rule);
    r.define("aten._embedding_bag.default", embedding_bag, bag_rule);
    r.define(
        "aten._embedding_bag_forward_only.default",
        embedding_bag,
        bag_rule,
    );
}

pub(crate) const MODE_SUM: i64 = 0;
pub(crate) const MODE_MEAN: i64 = 1;
pub(crate) const MODE_MAX: i64 = 2;

/// The parsed arguments, shared by the kernels (CPU and GPU) and the shape rule.
pub(crate) struct BagParams {
    pub(crate) mode: i64,
    pub(crate) include_last_offset: bool,
    /// The padding row (wrapped), or None.
    pub(crate) padding_idx: Option<i64>,
    /// bag_size has one entry per offset (torch's meta function of `embedding_bag` and
    /// `_embedding_bag_forward_only`, the entries past the bags 0), else one per bag
    /// (`_embedding_bag`).
    pub(crate) size_per_offset: bool,
}

impl BagParams {
    pub(crate) fn parse(
        target: &str,
        mode: i64,
        include_last_offset: bool,
        padding_idx: Option<i64>,
        rows: usize,
    ) -> std::result::Result<BagParams, String> {
        if !(MODE_SUM..=MODE_MAX).contains(&mode) {
            return Err(format!(
                "mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}"
            ));
        }
        let n = rows as i64;
        let padding_idx = match padding_idx {
            // The `padding_idx` overload wraps a negative index; `_embedding_bag` takes -1
            // (any negative) for none.
            Some(p) if target.ends_with(".padding_idx") => {
                if p < -n || p >= n {
                    return Err(format!("padding_idx must be within [-{n}, {n}), got {p}"));
                }
                Some(if p < 0 { p + n } else { p })
            }
            Some(p) if p >= 0 => Some(p),
            _ => None,
        };
        Ok(BagParams {
            mode,
            include_last_offset,
            padding_idx,
            size_per_offset: target != "aten._embedding_bag.default",
        })
    }

    /// The length of bag_size for `offsets` offsets and `bags` bags.
    pub(crate) fn bag_size_len(&self, offsets: usize, bags: usize) -> usize {
        if self.size_per_offset {
            offsets
        } else {
            bags
        }
    }

    /// The node's arguments (`rows`: the weight's).
    pub(crate) fn of(ctx: &OpCtx, rows: usize) -> Result<BagParams> {
        BagParams::parse(
            ctx.target(),
            ctx.int_or("mode", 0)?,
            ctx.bool_or("include_last_offset", false)?,
            ctx.opt_int("padding_idx")?,
            rows,
        )
        .map_err(|m| ctx.err(m))
    }

    /// Whether torch's CPU kernel reduces bags by their offsets alone (float rows summed or
    /// averaged without padding, the weight's columns at stride `col_stride` 1; see the
    /// module doc).
    pub(crate) fn by_offsets(&self, weight: DType, col_stride: usize) -> bool {
        self.mode != MODE_MAX
            && matches!(weight, DType::F32 | DType::F16 | DType::BF16)
            && self.padding_idx.is_none()
            && col_stride == 1
    }

    /// Whether torch's CPU kernel skips offset2bag (the offsets kernel summing).
    pub(crate) fn sum_fast_path(&self, weight: DType, col_stride: usize) -> bool {
        self.mode == MODE_SUM && self.by_offsets(weight, col_stride)
    }
}

fn bag_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let w = ctx.tensor("weight")?;
    let indices = ctx.tensor("indices")?;
    let offsets = ctx.tensor("offsets")?;
    if w.rank() != 2 {
        return Err(format!("'weight' must be 2-D, got shape {:?}", w.sizes));
    }
    if indices.rank() != 1 || offsets.rank() != 1 {
        return Err(format!(
            "'indices' and 'offsets' must be 1-D, got shapes {:?} and {:?}",
            indices.sizes, offsets.sizes
        ));
    }
    let p = BagParams::parse(
        ctx.target(),
        ctx.int_or("mode", 0)?,
        ctx.bool_or("include_last_offset", false)?,
        ctx.opt_int("padding_idx")?,
        w.sizes[0],
    )?;
    let bags = offsets.sizes[0].saturating_sub(p.include_last_offset as usize);
    let it = offsets.dtype;
    // The meta backend has no strides: a weight with unit column stride is assumed.
    let offset2bag = if p.sum_fast_path(w.dtype, 1) {
        0
    } else {
        indices.sizes[0]
    };
    let max_indices = if p.mode == MODE_MAX {
        vec![bags, w.sizes[1]]
    } else {
        vec![bags]
    };
    Ok(vec![
        MValue::Tensor(w.with_sizes(vec![bags, w.sizes[1]])),
        MValue::Tensor(MetaTensor::new(it, vec![offset2bag])),
        MValue::Tensor(MetaTensor::new(
            it,
            vec![p.bag_size_len(offsets.sizes[0], bags)],
        )),
        MValue::Tensor(MetaTensor::new(it, max_indices)),
    ])
}

/// The error of an index outside the weight's rows (the GPU's faults too).
pub(crate) fn bad_row(index: i64, rows: impl std::fmt::Display) -> String {
    format!("index {index} is out of range for a weight of {rows} rows")
}

fn embedding_bag(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let w = ctx.tensor("weight")?;
    let indices = ctx.tensor("indices")?;
    let offsets = ctx.tensor("offsets")?;
    if w.rank() != 2 {
        return Err(ctx.err(format!("'weight' must be 2-D, got shape {:?}", w.sizes)));
    }
    if indices.rank() != 1 || offsets.rank() != 1 {
        return Err(ctx.err(format!(
            "'indices' and 'offsets' must be 1-D, got shapes {:?} and {:?}",
            indices.sizes, offsets.sizes
        )));
    }
    let p = BagParams::of(ctx, w.sizes[0])?;
    let psw = ctx.opt_tensor("per_sample_weights")?;
    let (rows, dim) = (w.sizes[0], w.sizes[1]);
    let ids = index_values(ctx, &indices, "indices")?;
    let offs = index_values(ctx, &offsets, "offsets")?;
    let n = ids.len();
    for &i in &ids {
        if i < 0 || i >= rows as i64 {
            return Err(ctx.err(bad_row(i, rows)));
        }
    }
    if let Some(s) = &psw {
        if p.mode != MODE_SUM {
            return Err(ctx.err("per_sample_weights is only supported for mode='sum'"));
        }
        if s.numel() != n || s.dtype != w.dtype {
            return Err(ctx.err(format!(
                "per_sample_weights must be a {} tensor of {n} elements (one per index), got {} {:?}",
                w.dtype, s.dtype, s.sizes
            )));
        }
    }
    let bags = offs.len().saturating_sub(p.include_last_offset as usize);
    if offs.first().is_some_and(|&o| o != 0) {
        return Err(ctx.err(format!("offsets[0] must be 0, got {}", offs[0])));
    }
    // Bag b holds indices start(b)..last(b); the offsets kernel reduces start(b)..end(b).
    let start = |b: usize| (offs[b].clamp(0, n as i64)) as usize;
    let end = |b: usize| {
        if b + 1 < offs.len() {
            offs[b + 1].clamp(0, n as i64) as usize
        } else {
            n
        }
    };
    let last = |b: usize| if b + 1 < bags { end(b) } else { n };
    for b in 0..bags {
        if end(b) < start(b) {
            return Err(ctx.err(format!(
                "offsets must be non-decreasing, got {} after {}",
                offs[b + 1],
                offs[b]
            )));
        }
    }
    let by_offsets = p.by_offsets(w.dtype, w.strides[1]);
    let mut bag_size = vec![0i64; p.bag_size_len(offs.len(), bags)];
    let mut offset2bag = vec![0i64; n];
    let max_len = if p.mode == MODE_MAX { bags * dim } else { bags };
    let mut max_idx = vec![0i64; max_len];
    let wc = w.contiguous();
    let out = with_dtype!(w.dtype, T => {
        let wv = wc.to_vec::<T>();
        let sw = psw.as_ref().map(|s| s.to_vec::<T>());
        let mut acc = vec![0f64; dim];
        let mut out = vec![T::default(); bags * dim];
        for b in 0..bags {
            acc.iter_mut().for_each(|a| *a = 0.0);
            let mut first = true;
            let mut count = 0i64;
            for (k, &id) in ids.iter().enumerate().take(last(b)).skip(start(b)) {
                offset2bag[k] = b as i64;
                if p.padding_idx == Some(id) {
                    continue;
                }
                count += 1;
                if by_offsets && k >= end(b) {
                    continue;
                }
                let row = &wv[id as usize * dim..(id as usize + 1) * dim];
                for (j, &x) in row.iter().enumerate() {
                    let x = x.to_f64();
                    if p.mode == MODE_MAX {
                        if first || x > acc[j] {
                            acc[j] = x;
                            max_idx[b * dim + j] = id;
                        }
                    } else {
                        // Rounded to the element type per step, as torch's loop.
                        let scaled = match &sw {
                            Some(s) => T::from_f64(s[k].to_f64() * x).to_f64(),
                            None => x,
                        };
                        acc[j] = T::from_f64(acc[j] + scaled).to_f64();
                    }
                }
                first = false;
            }
            if p.mode != MODE_SUM {
                bag_size[b] = count;
            }
            if p.mode == MODE_MEAN {
                max_idx[b] = count;
            }
            for j in 0..dim {
                out[b * dim + j] = T::from_f64(if p.mode == MODE_MEAN && count > 0 {
                    acc[j] / count as f64
                } else {
                    acc[j]
                });
            }
        }
        Tensor::from_vec(out, &[bags, dim])
    }, else return Err(ctx.err(format!("dtype {} is not supported", w.dtype))));
    if p.sum_fast_path(w.dtype, w.strides[1]) {
        offset2bag.clear();
    }
    let it = offsets.dtype;
    let ints = |v: Vec<i64>, sizes: &[usize]| Tensor::from_vec(v, sizes).to_dtype(it);
    let max_sizes = if p.mode == MODE_MAX {
        vec![bags, dim]
    } else {
        vec![bags]
    };
    let o2b_len = offset2bag.len();
    let sizes_len = bag_size.len();
    Ok(vec![
        out.into(),
        ints(offset2bag, &[o2b_len])?.into(),
        ints(bag_size, &[sizes_len])?.into(),
        ints(max_idx, &max_sizes)?.into(),
    ])
}
