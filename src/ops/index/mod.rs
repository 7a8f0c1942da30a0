//! Op family: index. Advanced indexing (`index.Tensor`, `index_put`), `embedding`,
//! `index_select`, `take`, `masked_select` here; `gather`, `scatter*`, `index_add/copy/fill`
//! in `scatter.rs`. Indices wrap when negative (as torch); an index out of range is an error
//! naming the op, the dimension and the index.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

pub(crate) mod bag;
mod combinations;
mod flat;
pub(crate) mod scatter;
#[cfg(test)]
mod tests;

use super::shape::{
    bounded_index, fresh, gather_runs, gather_storage, index_values, reshape_t, wrap_index,
};
use super::util::wrap_dim;
use super::{OpCtx, OpTable};
use crate::cpu::{broadcast_shapes, Elem, Tensor};
use crate::error::Result;
use crate::runtime::RValue;
use crate::with_dtype;
pub(super) use scatter::Reduce;

pub(crate) fn register(r: &mut OpTable) {
    r.define("aten.embedding.default", embedding, meta::embedding);
    r.define("aten.index.Tensor", index, meta::index);
    r.define("aten._unsafe_index.Tensor", index, meta::index);
    r.define(
        "aten._unsafe_masked_index.default",
        unsafe_masked_index,
        meta::masked_index,
    );
    r.define(
        "aten.index_put.default",
        index_put,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.index_put_.default",
        index_put_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten._index_put_impl_.default",
        index_put_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten._unsafe_index_put.default",
        index_put,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten._unsafe_masked_index_put_accumulate.default",
        unsafe_masked_index_put_accumulate,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.index_select.default",
        index_select,
        meta::index_select,
    );
    r.define("aten.take.default", take, meta::take);
    r.define("aten.one_hot.default", one_hot, meta::one_hot);
    combinations::register(r);
    r.define(
        "aten.masked_select.default",
        masked_select,
        meta::masked_select,
    );
    r.define("aten.nonzero.default", nonzero, meta::nonzero);
    r.define("aten.argwhere.default", nonzero, meta::nonzero);
    scatter::register(r);
    flat::register(r);
    bag::register(r);
}

fn one(t: Tensor) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Tensor(t)])
}

/// One entry of an advanced index after boolean masks became integer indices.
struct Idx {
    sizes: Vec<usize>,
    vals: Vec<i64>,
}

/// Where each element of `t[indices]` lives: the result shape in torch's layout and the
/// storage offset in `t` of every result element (row-major).
pub(super) struct IndexPlan {
    pub sizes: Vec<usize>,
    pub offs: Vec<usize>,
}

/// How out-of-range indices are treated.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Bounds {
    /// An error naming the dimension and the index (torch's checked ops).
    Check,
    /// Clamped into range (`_unsafe_masked_index*`, whose masked-out lanes may point anywhere).
    Clamp,
}

pub(super) fn index_plan(
    ctx: &OpCtx,
    t: &Tensor,
    indices: &[Option<Tensor>],
    bounds: Bounds,
) -> Result<IndexPlan> {
    // 1. Boolean masks become one integer index per masked dimension (their nonzero()).
    let mut entries: Vec<Option<Idx>> = Vec::new();
    let mut dim = 0usize;
    for ix in indices {
        match ix {
            None => {
                entries.push(None);
                dim += 1;
            }
            Some(m) if matches!(m.dtype, crate::DType::Bool | crate::DType::U8) => {
                let k = m.rank();
                if dim + k > t.rank() || t.sizes[dim..dim + k] != m.sizes[..] {
                    return Err(ctx.err(format!(
                        "the shape of the mask {:?} at index {dim} does not match the shape of the indexed tensor {:?}",
                        m.sizes, t.sizes
                    )));
                }
                let flags = m.to_vec::<bool>();
                let hits: Vec<usize> = flags
                    .iter()
                    .enumerate()
                    .filter(|(_, &f)| f)
                    .map(|(i, _)| i)
                    .collect();
                for j in 0..k {
                    let inner: usize = m.sizes[j + 1..].iter().product();
                    let vals = hits
                        .iter()
                        .map(|&h| ((h / inner) % m.sizes[j]) as i64)
                        .collect();
                    entries.push(Some(Idx {
                        sizes: vec![hits.len()],
                        vals,
                    }));
                }
                dim += k;
            }
            Some(ix) => {
                entries.push(Some(Idx {
                    sizes: ix.sizes.clone(),
                    vals: index_values(ctx, ix, "indices")?,
                }));
                dim += 1;
            }
        }
    }
    if entries.len() > t.rank() {
        return Err(ctx.err(format!(
            "too many indices for tensor of dimension {} ({} given)",
            t.rank(),
            entries.len()
        )));
    }
    entries.resize_with(t.rank(), || None);
    // 2. Broadcast the index tensors together.
    let mut bshape: Vec<usize> = Vec::new();
    let mut positions = Vec::new();
    for (d, e) in entries.iter().enumerate() {
        if let Some(e) = e {
            bshape = broadcast_shapes(&bshape, &e.sizes)
                .ok_or_else(|| ctx.err(format!("shape mismatch: indexing tensors could not be broadcast together with shapes {:?} and {:?}", bshape, e.sizes)))?;
            positions.push(d);
        }
    }
    if positions.is_empty() {
        // Only None entries: a plain view of everything.
        let offs = t.offsets();
        return Ok(IndexPlan {
            sizes: t.sizes.clone(),
            offs,
        });
    }
    let bn: usize = bshape.iter().product();
    let mut base = vec![0usize; bn];
    for &d in &positions {
        let e = entries[d].as_ref().expect("indexed position");
        let vals = Tensor::from_vec(e.vals.clone(), &e.sizes)
            .expand_to(&bshape)?
            .to_vec::<i64>();
        let n = t.sizes[d];
        for (b, &v) in base.iter_mut().zip(&vals) {
            let i = match bounds {
                Bounds::Check => wrap_index(ctx, v, n, d)?,
                Bounds::Clamp if n == 0 => {
                    return Err(ctx.err(format!("cannot index dimension {d} of size 0")))
                }
                Bounds::Clamp => {
                    let n = n as i64;
                    (if v < 0 { v + n } else { v }).clamp(0, n - 1) as usize
                }
            };
            *b += i * t.strides[d];
        }
    }
    // 3. Result layout: the broadcast dims replace the indexed ones in place when those are
    // adjacent, else they go first (numpy's rule).
    enum OutDim {
        Src(usize),
        B(usize),
    }
    let adjacent = positions.windows(2).all(|w| w[1] == w[0] + 1);
    let mut layout = Vec::new();
    let rest = (0..t.rank()).filter(|d| entries[*d].is_none());
    if adjacent {
        layout.extend(rest.clone().filter(|&d| d < positions[0]).map(OutDim::Src));
        layout.extend((0..bshape.len()).map(OutDim::B));
        layout.extend(rest.filter(|&d| d > positions[0]).map(OutDim::Src));
    } else {
        layout.extend((0..bshape.len()).map(OutDim::B));
        layout.extend(rest.map(OutDim::Src));
    }
    let sizes: Vec<usize> = layout
        .iter()
        .map(|o| match o {
            OutDim::Src(d) => t.sizes[*d],
            OutDim::B(k) => bshape[*k],
        })
        .collect();
    let bstrides = crate::tensor::contiguous_strides(&bshape);
    let mut offs = Vec::with_capacity(sizes.iter().product());
    super::shape::for_each_index(&sizes, |idx| {
        let (mut b, mut off) = (0usize, t.offset);
        for (o, &i) in layout.iter().zip(idx) {
            match o {
                OutDim::Src(d) => off += i * t.strides[*d],
                OutDim::B(k) => b += i * bstrides[*k],
            }
        }
        offs.push(off + base[b]);
    });
    Ok(IndexPlan { sizes, offs })
}

fn gather_plan(t: &Tensor, p: &IndexPlan) -> Result<Tensor> {
    let offs: Vec<Option<usize>> = p.offs.iter().map(|&o| Some(o)).collect();
    gather_storage(t, &offs, 0.0, &p.sizes)
}

fn index(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let idx = ctx.opt_tensors("indices")?;
    let p = index_plan(ctx, &t, &idx, Bounds::Check)?;
    one(gather_plan(&t, &p)?)
}

fn unsafe_masked_index(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, mask) = (ctx.tensor("self")?, ctx.tensor("mask")?);
    let idx = ctx.opt_tensors("indices")?;
    let fill = ctx.float("fill")?;
    let p = index_plan(ctx, &t, &idx, Bounds::Clamp)?;
    let mask = mask
        .expand_to(&p.sizes)
        .map_err(|e| ctx.err(e))?
        .to_vec::<bool>();
    let offs: Vec<Option<usize>> = p
        .offs
        .iter()
        .zip(&mask)
        .map(|(&o, &m)| m.then_some(o))
        .collect();
    one(gather_storage(&t, &offs, fill, &p.sizes)?)
}

/// Broadcast `values` to the indexed shape (leading size-1 dims of `values` may be dropped,
/// as torch allows).
fn values_for(ctx: &OpCtx, values: &Tensor, sizes: &[usize]) -> Result<Tensor> {
    let mut v = values.clone();
    while v.rank() > sizes.len() && v.sizes[0] == 1 {
        v = v.view_with(v.sizes[1..].to_vec(), v.strides[1..].to_vec(), v.offset);
    }
    v.expand_to(sizes)
        .map_err(|_| ctx.err(format!("shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {sizes:?}", values.sizes)))
}

/// Write `values` (already in `target`'s element order) at `offs` of `target`'s storage,
/// combining with `op` (repeated offsets accumulate one after another, as torch's CPU loop).
pub(super) fn put_at(
    ctx: &OpCtx,
    target: &Tensor,
    offs: &[usize],
    values: &Tensor,
    op: Reduce,
) -> Result<()> {
    with_dtype!(target.dtype, T => {
        let vals = values.to_vec::<T>();
        let mut d = target.write();
        let s = T::slice_mut(&mut d).ok_or_else(|| ctx.err("storage dtype differs from the tensor's"))?;
        for (&o, &v) in offs.iter().zip(&vals) {
            let slot = s.get_mut(o).ok_or_else(|| ctx.err(format!("storage offset {o} out of range")))?;
            *slot = scatter::combine(*slot, v, op);
        }
        Ok(())
    }, else Err(ctx.err(format!("dtype {} is not supported", target.dtype))))
}

fn index_put_impl(ctx: &OpCtx, target: &Tensor, op: Reduce) -> Result<()> {
    let idx = ctx.opt_tensors("indices")?;
    let values = ctx.tensor("values")?;
    let p = index_plan(ctx, target, &idx, Bounds::Check)?;
    let v = values_for(ctx, &values, &p.sizes)?;
    put_at(ctx, target, &p.offs, &v, op)
}

fn index_put(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let out = fresh(&ctx.tensor("self")?)?;
    index_put_impl(ctx, &out, scatter::index_put_reduce(ctx)?)?;
    one(out)
}

fn index_put_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    index_put_impl(ctx, &t, scatter::index_put_reduce(ctx)?)?;
    one(t)
}

fn unsafe_masked_index_put_accumulate(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let out = fresh(&ctx.tensor("self")?)?;
    let (mask, values) = (ctx.tensor("mask")?, ctx.tensor("values")?);
    let idx = ctx.opt_tensors("indices")?;
    let p = index_plan(ctx, &out, &idx, Bounds::Clamp)?;
    let v = values_for(ctx, &values, &p.sizes)?;
    let m = mask
        .expand_to(&p.sizes)
        .map_err(|e| ctx.err(e))?
        .to_vec::<bool>();
    // Masked-out lanes add nothing.
    let (offs, keep): (Vec<usize>, Vec<usize>) = p
        .offs
        .iter()
        .zip(&m)
        .enumerate()
        .filter(|(_, (_, &m))| m)
        .map(|(k, (&o, _))| (o, k))
        .unzip();
    let vals = with_dtype!(v.dtype, T => {
        let all = v.to_vec::<T>();
        Tensor::from_vec(keep.iter().map(|&k| all[k]).collect::<Vec<T>>(), &[keep.len()])
    }, else return Err(ctx.err(format!("dtype {} is not supported", v.dtype))));
    put_at(ctx, &out, &offs, &vals, Reduce::Add)?;
    one(out)
}

pub(super) fn index_select_t(ctx: &OpCtx, t: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    if index.rank() > 1 {
        return Err(ctx.err(format!(
            "index_select(): Index is supposed to be a vector, got shape {:?}",
            index.sizes
        )));
    }
    let vals = index_values(ctx, index, "index")?;
    if t.rank() == 0 {
        // A 0-d self gives a 0-d result: the index holds exactly one value, 0 (as torch).
        if vals.len() != 1 {
            return Err(ctx.err(format!(
                "index_select(): index to a 0-d tensor can have only 1 value, got {}",
                vals.len()
            )));
        }
        bounded_index(ctx, vals[0], 1, 0)?;
        return gather_storage(t, &[Some(t.offset)], 0.0, &[]);
    }
    let d = wrap_dim(ctx, dim, t.rank())?;
    let rows = vals
        .iter()
        .map(|&v| bounded_index(ctx, v, t.sizes[d], d))
        .collect::<Result<Vec<_>>>()?;
    let mut sizes = t.sizes.clone();
    sizes[d] = rows.len();
    if t.is_contiguous() {
        // Whole rows of the dims after `d` (an embedding table's rows), copied as runs.
        let inner: usize = t.sizes[d + 1..].iter().product();
        let outer: usize = t.sizes[..d].iter().product();
        let starts: Vec<usize> = (0..outer)
            .flat_map(|o| {
                rows.iter()
                    .map(move |&r| t.offset + (o * t.sizes[d] + r) * inner)
            })
            .collect();
        return gather_runs(t, &starts, inner, &sizes);
    }
    let mut offs = Vec::with_capacity(sizes.iter().product());
    super::shape::for_each_index(&sizes, |idx| {
        let off: usize = idx
            .iter()
            .enumerate()
            .map(|(k, &i)| if k == d { rows[i] } else { i } * t.strides[k])
            .sum();
        offs.push(Some(t.offset + off));
    });
    gather_storage(t, &offs, 0.0, &sizes)
}

fn index_select(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, index) = (ctx.tensor("self")?, ctx.tensor("index")?);
    one(index_select_t(ctx, &t, ctx.int("dim")?, &index)?)
}

fn embedding(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (w, ids) = (ctx.tensor("weight")?, ctx.tensor("indices")?);
    if w.rank() != 2 {
        return Err(ctx.err(format!("'weight' must be 2-D, got shape {:?}", w.sizes)));
    }
    let flat = reshape_t(ctx, &ids, &[-1])?;
    let rows = index_select_t(ctx, &w, 0, &flat)?;
    let mut shape: Vec<i64> = ids.sizes.iter().map(|&s| s as i64).collect();
    shape.push(w.sizes[1] as i64);
    one(reshape_t(ctx, &rows, &shape)?)
}

fn take(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, index) = (ctx.tensor("self")?, ctx.tensor("index")?);
    let all = t.offsets();
    let vals = index_values(ctx, &index, "index")?;
    let offs = vals
        .iter()
        .map(|&v| wrap_index(ctx, v, all.len(), 0).map(|i| Some(all[i])))
        .collect::<Result<Vec<_>>>()?;
    one(gather_storage(&t, &offs, 0.0, &index.sizes)?)
}

/// `one_hot(self, num_classes=-1)`: int64 `self.shape + [num_classes]` with a 1 at each
/// index; `-1` takes the largest index + 1 (an error for an empty input, as in torch).
fn one_hot(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let vals = index_values(ctx, &t, "self")?;
    let classes = match ctx.int_or("num_classes", -1)? {
        -1 => match vals.iter().max() {
            Some(&m) => m.saturating_add(1),
            None => {
                return Err(ctx.err(
                    "cannot infer the number of classes from an empty tensor: give num_classes",
                ))
            }
        },
        c => c,
    };
    let c = usize::try_from(classes)
        .map_err(|_| ctx.err(format!("num_classes must be >= -1, got {classes}")))?;
    let mut sizes = t.sizes.clone();
    sizes.push(c);
    let mut out = vec![
        0i64;
        vals.len().checked_mul(c).ok_or_else(|| {
            ctx.err(format!("{} indices x {c} classes overflow", vals.len()))
        })?
    ];
    for (i, &v) in vals.iter().enumerate() {
        let k = usize::try_from(v)
            .ok()
            .filter(|&k| k < c)
            .ok_or_else(|| ctx.err(format!("index {v} is out of range for {c} classes")))?;
        out[i * c + k] = 1;
    }
    one(Tensor::from_vec(out, &sizes))
}

/// nonzero / argwhere: the coordinates of the nonzero elements (NaN counts), row-major, as
/// an int64 [n, rank] tensor.
fn nonzero(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let flags = t.to_vec::<bool>();
    let rank = t.rank();
    // The output's size depends on the data: checked once it is known, before allocating.
    let count = flags.iter().filter(|&&f| f).count() as u64;
    crate::ops::factory::check_alloc(ctx, count.saturating_mul(rank as u64), crate::DType::I64)?;
    let mut coords: Vec<i64> = Vec::with_capacity(count as usize * rank);
    let mut c = vec![0usize; rank];
    for &f in &flags {
        if f {
            coords.extend(c.iter().map(|&x| x as i64));
        }
        // The next row-major coordinate.
        for d in (0..rank).rev() {
            c[d] += 1;
            if c[d] < t.sizes[d] {
                break;
            }
            c[d] = 0;
        }
    }
    let n = coords
        .len()
        .checked_div(rank)
        .unwrap_or_else(|| flags.iter().filter(|&&f| f).count());
    one(Tensor::from_vec(coords, &[n, rank]))
}

fn masked_select(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, mask) = (ctx.tensor("self")?, ctx.tensor("mask")?);
    if mask.dtype != crate::DType::Bool {
        return Err(ctx.err(format!(
            "masked_select: expected a bool mask, got {}",
            mask.dtype
        )));
    }
    let shape = broadcast_shapes(&t.sizes, &mask.sizes).ok_or_else(|| {
        ctx.err(format!(
            "shapes {:?} and {:?} cannot be broadcast together",
            t.sizes, mask.sizes
        ))
    })?;
    let tv = t.expand_to(&shape)?;
    let m = mask.expand_to(&shape)?.to_vec::<bool>();
    let offs: Vec<Option<usize>> = tv
        .offsets()
        .into_iter()
        .zip(&m)
        .filter(|(_, &k)| k)
        .map(|(o, _)| Some(o))
        .collect();
    let n = offs.len();
    one(gather_storage(&t, &offs, 0.0, &[n])?)
}
