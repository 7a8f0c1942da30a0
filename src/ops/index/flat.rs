//! Ops that address a tensor as one row-major sequence of elements: `put` (writes at flat
//! indices), `masked_scatter` (the masked positions take the source's elements in order)
//! and `nonzero_static` (nonzero's coordinates, cut or padded to a fixed count).

use super::{one, put_at, Reduce};
use crate::cpu::{broadcast_shapes, Tensor};
use crate::error::Result;
use crate::ops::shape::{fresh, index_values, wrap_index};
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.put.default", put, crate::ops::elementwise::meta::same);
    r.define(
        "aten.put_.default",
        put_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.masked_scatter.default",
        masked_scatter,
        super::meta::masked_scatter,
    );
    r.define(
        "aten.masked_scatter_.default",
        masked_scatter_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.nonzero_static.default",
        nonzero_static,
        super::meta::nonzero_static,
    );
}

/// `put(self, index, source, accumulate=False)`: element `index[i]` of flattened `self`
/// (negative indices wrap) becomes (or, accumulating, adds) element `i` of `source`.
fn put_into(ctx: &OpCtx, out: &Tensor) -> Result<()> {
    let (index, source) = (ctx.tensor("index")?, ctx.tensor("source")?);
    if source.dtype != out.dtype {
        return Err(ctx.err(format!(
            "self ({}) and source ({}) must have the same dtype",
            out.dtype, source.dtype
        )));
    }
    if index.numel() != source.numel() {
        return Err(ctx.err(format!(
            "index has {} elements but source has {}: they must match",
            index.numel(),
            source.numel()
        )));
    }
    let all = out.offsets();
    let offs = index_values(ctx, &index, "index")?
        .into_iter()
        .map(|v| wrap_index(ctx, v, all.len(), 0).map(|i| all[i]))
        .collect::<Result<Vec<_>>>()?;
    let op = if ctx.bool_or("accumulate", false)? {
        Reduce::Add
    } else {
        Reduce::Assign
    };
    put_at(ctx, out, &offs, &source.contiguous(), op)
}

fn put(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let out = fresh(&ctx.tensor("self")?)?;
    put_into(ctx, &out)?;
    one(out)
}

fn put_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    put_into(ctx, &t)?;
    one(t)
}

/// Write the source's leading elements at the positions where `mask` (broadcast to `out`)
/// is true, in row-major order.
fn masked_scatter_into(ctx: &OpCtx, out: &Tensor, mask: &Tensor) -> Result<()> {
    let source = ctx.tensor("source")?;
    if mask.dtype != crate::DType::Bool {
        return Err(ctx.err(format!("mask must be a bool tensor, got {}", mask.dtype)));
    }
    if source.dtype != out.dtype {
        return Err(ctx.err(format!(
            "self ({}) and source ({}) must have the same dtype",
            out.dtype, source.dtype
        )));
    }
    let m = mask
        .expand_to(&out.sizes)
        .map_err(|_| {
            ctx.err(format!(
                "mask of shape {:?} cannot be broadcast to self's shape {:?}",
                mask.sizes, out.sizes
            ))
        })?
        .to_vec::<bool>();
    let offs: Vec<usize> = out
        .offsets()
        .into_iter()
        .zip(&m)
        .filter(|(_, &k)| k)
        .map(|(o, _)| o)
        .collect();
    if offs.len() > source.numel() {
        return Err(ctx.err(format!(
            "the mask selects {} elements but source has only {}",
            offs.len(),
            source.numel()
        )));
    }
    let flat = source.contiguous();
    let head = flat.view_with(vec![offs.len()], vec![1], flat.offset);
    put_at(ctx, out, &offs, &head, Reduce::Assign)
}

fn masked_scatter(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, mask) = (ctx.tensor("self")?, ctx.tensor("mask")?);
    let shape = broadcast_shapes(&t.sizes, &mask.sizes).ok_or_else(|| {
        ctx.err(format!(
            "self {:?} and mask {:?} cannot be broadcast together",
            t.sizes, mask.sizes
        ))
    })?;
    let out = fresh(&t.expand_to(&shape)?)?;
    masked_scatter_into(ctx, &out, &mask)?;
    one(out)
}

fn masked_scatter_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, mask) = (ctx.tensor("self")?, ctx.tensor("mask")?);
    masked_scatter_into(ctx, &t, &mask)?;
    one(t)
}

/// `nonzero_static(self, size, fill_value=-1)`: the first `size` rows of `nonzero(self)`,
/// padded with `fill_value` rows: an int64 `[size, rank]` tensor.
fn nonzero_static(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let size = ctx.int("size")?;
    let fill = ctx.int_or("fill_value", -1)?;
    if size < 0 {
        return Err(ctx.err(format!("'size' must be non-negative, got {size}")));
    }
    let rank = t.rank();
    let size = size as usize;
    crate::ops::factory::check_numel(ctx, (size as u64).saturating_mul(rank.max(1) as u64))?;
    let flags = t.to_vec::<bool>();
    let mut coords: Vec<i64> = Vec::with_capacity(size * rank);
    let mut c = vec![0usize; rank];
    let mut rows = 0;
    for &f in &flags {
        if rows == size {
            break;
        }
        if f {
            coords.extend(c.iter().map(|&x| x as i64));
            rows += 1;
        }
        for d in (0..rank).rev() {
            c[d] += 1;
            if c[d] < t.sizes[d] {
                break;
            }
            c[d] = 0;
        }
    }
    coords.resize(size * rank, fill);
    one(Tensor::from_vec(coords, &[size, rank]))
}
