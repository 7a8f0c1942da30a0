//! Rules of the index family: advanced indexing (`index.Tensor`: broadcast index shapes
//! placed where torch places them; boolean masks give a data-dependent length bounded by the
//! mask's size), `index_select`, `gather`, `take`, `embedding`, and the ops that write into a
//! copy of `self` (`scatter*`, `index_put`, `index_add/copy/fill`), which keep self's meta.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::{broadcast, one};

/// The result meta of `t[indices]`.
fn indexed(t: &MetaTensor, indices: &[Option<MetaTensor>]) -> RuleResult<MetaTensor> {
    // One entry per indexed dim of `t`: the index's shape, or None for a full slice.
    let mut entries: Vec<Option<Vec<usize>>> = Vec::new();
    let mut data_dependent = false;
    let mut dim = 0usize;
    for ix in indices {
        match ix {
            None => {
                entries.push(None);
                dim += 1;
            }
            Some(m) if matches!(m.dtype, DType::Bool | DType::U8) => {
                let k = m.rank();
                if dim + k > t.rank() || t.sizes[dim..dim + k] != m.sizes[..] {
                    return Err(format!(
                        "the shape of the mask {:?} at index {dim} does not match the shape of the indexed tensor {:?}",
                        m.sizes, t.sizes
                    ));
                }
                // nonzero(mask): at most numel hits, one index per masked dim.
                data_dependent = true;
                for _ in 0..k.max(1) {
                    entries.push(Some(vec![m.numel()]));
                }
                dim += k;
            }
            Some(ix) => {
                if !matches!(ix.dtype, DType::I64 | DType::I32 | DType::I16 | DType::I8) {
                    return Err(format!(
                        "tensors used as indices must be long, int, byte or bool tensors, got {}",
                        ix.dtype
                    ));
                }
                entries.push(Some(ix.sizes.clone()));
                dim += 1;
            }
        }
    }
    if entries.len() > t.rank() {
        return Err(format!(
            "too many indices for tensor of dimension {} ({} given)",
            t.rank(),
            entries.len()
        ));
    }
    entries.resize(t.rank(), None);
    let mut bshape: Vec<usize> = Vec::new();
    let mut positions = Vec::new();
    for (d, e) in entries.iter().enumerate() {
        if let Some(e) = e {
            bshape = broadcast(&bshape, e).map_err(|_| {
                format!(
                    "shape mismatch: indexing tensors could not be broadcast together with shapes {bshape:?} and {e:?}"
                )
            })?;
            positions.push(d);
        }
    }
    let Some((&first, &last)) = positions.first().zip(positions.last()) else {
        return Ok(t.clone());
    };
    let adjacent = last - first + 1 == positions.len();
    let rest = |r: std::ops::Range<usize>| -> Vec<usize> {
        r.filter(|d| !positions.contains(d))
            .map(|d| t.sizes[d])
            .collect()
    };
    let sizes = if adjacent {
        let mut s = t.sizes[..first].to_vec();
        s.extend(&bshape);
        s.extend_from_slice(&t.sizes[last + 1..]);
        s
    } else {
        let mut s = bshape;
        s.extend(rest(0..t.rank()));
        s
    };
    Ok(MetaTensor {
        dtype: t.dtype,
        sizes,
        data_dependent,
    })
}

pub(super) fn index(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let idx = ctx.opt_tensors("indices")?;
    one(indexed(&t, &idx)?)
}

pub(super) fn index_select(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let i = ctx.tensor("index")?;
    if i.rank() > 1 {
        return Err(format!(
            "index_select(): index must be 0-d or 1-d, got {:?}",
            i.sizes
        ));
    }
    let mut s = t.sizes.clone();
    if !s.is_empty() {
        let d = ctx.wrap_dim(ctx.int("dim")?, t.rank())?;
        s[d] = i.numel();
    }
    one(t.with_sizes(s))
}

pub(super) fn gather(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let i = ctx.tensor("index")?;
    ctx.wrap_dim(ctx.int("dim")?, t.rank())?;
    if i.rank() != t.rank() && !(i.rank() <= 1 && t.rank() <= 1) {
        return Err(format!(
            "index {:?} should have the same number of dims as self {:?}",
            i.sizes, t.sizes
        ));
    }
    one(t.with_sizes(i.sizes))
}

pub(super) fn take(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let i = ctx.tensor("index")?;
    one(t.with_sizes(i.sizes))
}

pub(super) fn embedding(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let w = ctx.tensor("weight")?;
    let ids = ctx.tensor("indices")?;
    if w.rank() != 2 {
        return Err(format!("'weight' must be 2-D, got shape {:?}", w.sizes));
    }
    let mut s = ids.sizes.clone();
    s.push(w.sizes[1]);
    one(w.with_sizes(s))
}

/// `one_hot`: int64 `self.shape + [num_classes]`; `-1` (classes from the data) has no shape
/// before the run (torch.export refuses it too).
pub(super) fn one_hot(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let c = ctx.int_or("num_classes", -1)?;
    let c = usize::try_from(c)
        .map_err(|_| format!("num_classes {c}: the number of classes depends on the data"))?;
    let mut s = t.sizes.clone();
    s.push(c);
    one(MetaTensor::new(DType::I64, s))
}

/// `masked_select`: a 1-d result of data-dependent length (at most the broadcast numel).
pub(super) fn masked_select(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let m = ctx.tensor("mask")?;
    let s = broadcast(&t.sizes, &m.sizes)?;
    Ok(vec![MValue::Tensor(MetaTensor {
        dtype: t.dtype,
        sizes: vec![s.iter().product()],
        data_dependent: true,
    })])
}

/// `nonzero`: `[n, rank]` int64 with n data-dependent.
pub(super) fn nonzero(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    Ok(vec![MValue::Tensor(MetaTensor {
        dtype: DType::I64,
        sizes: vec![t.numel(), t.rank()],
        data_dependent: true,
    })])
}

/// `_unsafe_masked_index(self, mask, indices, fill)`: the indexed shape.
pub(super) fn masked_index(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let idx = ctx.opt_tensors("indices")?;
    one(indexed(&t, &idx)?)
}

/// `masked_scatter`: self broadcast with the mask.
pub(super) fn masked_scatter(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let m = ctx.tensor("mask")?;
    one(t.with_sizes(broadcast(&t.sizes, &m.sizes)?))
}

/// `nonzero_static`: int64 `[size, rank]`, a static shape.
pub(super) fn nonzero_static(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let size = ctx.int("size")?;
    let size =
        usize::try_from(size).map_err(|_| format!("'size' must be non-negative, got {size}"))?;
    one(MetaTensor::new(DType::I64, vec![size, t.rank()]))
}
