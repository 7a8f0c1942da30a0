//! `gather`, the `scatter` family (`scatter`, `scatter_add`, `scatter_reduce`) and the
//! per-slice updates `index_add`, `index_copy`, `index_fill`, with their in-place forms.
//! Repeated targets combine one after another in index order, rounding to the element type
//! at every step, as torch's CPU loops do.

use super::{one, put_at};
use crate::cpu::{Elem, Tensor};
use crate::error::Result;
use crate::ops::shape::{bounded_index, fresh, gather_storage, index_values, select_t, wrap_index};
use crate::ops::util::wrap_dim;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.gather.default", gather, super::meta::gather);
    r.define_op("aten.scatter", scatter, crate::ops::elementwise::meta::same);
    r.define_op(
        "aten.scatter_",
        scatter_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.scatter_add.default",
        scatter,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.scatter_add_.default",
        scatter_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.scatter_reduce.two",
        scatter,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.scatter_reduce_.two",
        scatter_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.index_add.default",
        index_add,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.index_add_.default",
        index_add_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.index_copy.default",
        index_copy,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.index_copy_.default",
        index_copy_,
        crate::ops::elementwise::meta::same,
    );
    r.define_op(
        "aten.index_fill",
        index_fill,
        crate::ops::elementwise::meta::same,
    );
    r.define_op(
        "aten.index_fill_",
        index_fill_,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.index_reduce.default",
        index_reduce,
        crate::ops::elementwise::meta::same,
    );
    r.define(
        "aten.index_reduce_.default",
        index_reduce_,
        crate::ops::elementwise::meta::same,
    );
}

/// How a written value combines with the one already there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Reduce {
    Assign,
    Add,
    /// `old + alpha * new` (index_add).
    AddAlpha(f64),
    Mul,
    /// Summed here, divided by the count afterwards.
    Mean,
    Max,
    Min,
}

/// Combine two elements in torch's arithmetic: floats through f64 rounded back once per
/// step (exact for f32 add/mul), integers in i64 wrapping to the element width, bools as
/// 0/1 (add = or, mul = and).
pub(crate) fn combine<T: Elem>(a: T, b: T, op: Reduce) -> T {
    if op == Reduce::Assign {
        return b;
    }
    if T::DTYPE.is_float() {
        let (x, y) = (a.to_f64(), b.to_f64());
        T::from_f64(match op {
            Reduce::Add | Reduce::Mean => x + y,
            Reduce::AddAlpha(al) => x + al * y,
            Reduce::Mul => x * y,
            // NaN wins, as torch's scatter max/min.
            Reduce::Max => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.max(y)
                }
            }
            Reduce::Min => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.min(y)
                }
            }
            Reduce::Assign => y,
        })
    } else {
        let (x, y) = (a.to_i64(), b.to_i64());
        T::from_i64(match op {
            Reduce::Add | Reduce::Mean => x.wrapping_add(y),
            Reduce::AddAlpha(al) => x.wrapping_add((al as i64).wrapping_mul(y)),
            Reduce::Mul => x.wrapping_mul(y),
            Reduce::Max => x.max(y),
            Reduce::Min => x.min(y),
            Reduce::Assign => y,
        })
    }
}

/// Check the index geometry of gather/scatter and return the index values.
fn check_index(
    ctx: &OpCtx,
    t: &Tensor,
    dim: usize,
    index: &Tensor,
    src: Option<&Tensor>,
) -> Result<Vec<i64>> {
    if index.rank() != t.rank() && !(index.rank() <= 1 && t.rank() <= 1) {
        return Err(ctx.err(format!(
            "index tensor must have the same number of dimensions as the input tensor ({} vs {})",
            index.rank(),
            t.rank()
        )));
    }
    for d in 0..index.rank() {
        if d != dim && index.sizes[d] > t.sizes.get(d).copied().unwrap_or(1) {
            return Err(ctx.err(format!(
                "size of index {:?} must not exceed the input size {:?} at dimension {d}",
                index.sizes, t.sizes
            )));
        }
        if let Some(s) = src {
            if s.rank() != index.rank() && !(index.rank() <= 1 && s.rank() <= 1) {
                return Err(ctx.err(format!("index tensor must have the same number of dimensions as the source tensor ({} vs {})", index.rank(), s.rank())));
            }
            if index.sizes[d] > s.sizes.get(d).copied().unwrap_or(1) {
                return Err(ctx.err(format!(
                    "size of index {:?} must not exceed the source size {:?} at dimension {d}",
                    index.sizes, s.sizes
                )));
            }
        }
    }
    index_values(ctx, index, "index")
}

/// Storage offsets in `t` addressed by each index element (row-major over the index shape):
/// the index position with its `dim` coordinate replaced by the index value.
fn addressed(
    ctx: &OpCtx,
    t: &Tensor,
    dim: usize,
    index: &Tensor,
    vals: &[i64],
) -> Result<Vec<usize>> {
    let n = t.sizes.get(dim).copied().unwrap_or(1);
    let mut offs = Vec::with_capacity(vals.len());
    let mut k = 0;
    let mut err = None;
    crate::ops::shape::for_each_index(&index.sizes, |p| {
        if err.is_some() {
            return;
        }
        match bounded_index(ctx, vals[k], n, dim) {
            Ok(i) => {
                let off: usize = p.iter().enumerate().map(|(d, &x)| if d == dim { i } else { x } * t.strides.get(d).copied().unwrap_or(0)).sum();
                offs.push(t.offset + off);
            }
            Err(e) => err = Some(e),
        }
        k += 1;
    });
    match err {
        Some(e) => Err(e),
        None => Ok(offs),
    }
}

fn gather(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, index) = (ctx.tensor("self")?, ctx.tensor("index")?);
    let d = wrap_dim(ctx, ctx.int("dim")?, t.rank())?;
    let vals = check_index(ctx, &t, d, &index, None)?;
    let offs: Vec<Option<usize>> = addressed(ctx, &t, d, &index, &vals)?
        .into_iter()
        .map(Some)
        .collect();
    one(gather_storage(&t, &offs, 0.0, &index.sizes)?)
}

fn reduce_of(ctx: &OpCtx, name: &str) -> Result<Reduce> {
    Ok(match name {
        "add" | "sum" => Reduce::Add,
        "multiply" | "prod" => Reduce::Mul,
        "mean" => Reduce::Mean,
        "amax" => Reduce::Max,
        "amin" => Reduce::Min,
        other => {
            return Err(ctx.err(format!(
            "reduce argument must be add, multiply, sum, prod, mean, amax or amin, got '{other}'"
        )))
        }
    })
}

/// The parameters of every scatter overload (scatter .src / .value / .reduce /
/// .value_reduce, scatter_add, scatter_reduce.two and their in-place forms), parsed once for
/// every backend (the GPU kernel is in `src/gpu/kernels/scatter.rs`). `dim` is wrapped by
/// each kernel against its input's rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ScatterParams {
    pub dim: i64,
    pub reduce: Reduce,
    pub include_self: bool,
}

impl ScatterParams {
    pub fn parse(ctx: &OpCtx) -> Result<ScatterParams> {
        let reduce = if ctx.target().starts_with("aten.scatter_add") {
            Reduce::Add
        } else {
            match ctx.opt_str("reduce")? {
                Some(r) => reduce_of(ctx, &r)?,
                None => Reduce::Assign,
            }
        };
        Ok(ScatterParams {
            dim: ctx.int("dim")?,
            reduce,
            include_self: ctx.bool_or("include_self", true)?,
        })
    }
}

/// How index_put combines its values (`accumulate`: added, else assigned), for every backend.
pub(crate) fn index_put_reduce(ctx: &OpCtx) -> Result<Reduce> {
    Ok(if ctx.bool_or("accumulate", false)? {
        Reduce::Add
    } else {
        Reduce::Assign
    })
}

/// Every scatter overload: `src` tensor or scalar `value`, optional `reduce`, `include_self`.
fn scatter_into(ctx: &OpCtx, out: &Tensor) -> Result<()> {
    let ScatterParams {
        dim,
        reduce: op,
        include_self,
    } = ScatterParams::parse(ctx)?;
    let index = ctx.tensor("index")?;
    let d = wrap_dim(ctx, dim, out.rank())?;
    let src = ctx.opt_tensor("src")?;
    // torch skips the shape checks of an empty index (`scatter_shape_check`): nothing to write.
    if index.numel() == 0 {
        return Ok(());
    }
    let vals = check_index(ctx, out, d, &index, src.as_ref())?;
    let offs = addressed(ctx, out, d, &index, &vals)?;
    // Source elements at the index positions, in the output dtype.
    let srcv = match &src {
        Some(s) => {
            let strides = (0..index.rank())
                .map(|d| s.strides.get(d).copied().unwrap_or(0))
                .collect();
            s.view_with(index.sizes.clone(), strides, s.offset)
                .to_dtype(out.dtype)?
        }
        None => Tensor::full(out.dtype, &index.sizes, ctx.float("value")?)?,
    };
    with_dtype!(out.dtype, T => {
        let v = srcv.to_vec::<T>();
        let mut data = out.write();
        let s = T::slice_mut(&mut data).ok_or_else(|| ctx.err("storage dtype differs from the tensor's"))?;
        // How many values each target received (for include_self=False and mean).
        let mut count = vec![0u32; if include_self && op != Reduce::Mean { 0 } else { s.len() }];
        for (&o, &x) in offs.iter().zip(&v) {
            s[o] = if !include_self && count[o] == 0 { x } else { combine(s[o], x, op) };
            if !count.is_empty() {
                count[o] += 1;
            }
        }
        if op == Reduce::Mean {
            for (o, &c) in count.iter().enumerate() {
                let n = c + include_self as u32;
                if c > 0 {
                    s[o] = if T::DTYPE.is_float() {
                        T::from_f64(s[o].to_f64() / n as f64)
                    } else {
                        T::from_i64(s[o].to_i64().div_euclid(n as i64))
                    };
                }
            }
        }
        Ok(())
    }, else Err(ctx.err(format!("dtype {} is not supported", out.dtype))))
}

fn scatter(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let out = fresh(&ctx.tensor("self")?)?;
    scatter_into(ctx, &out)?;
    one(out)
}

fn scatter_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    scatter_into(ctx, &t)?;
    one(t)
}

/// `index_add/copy/fill`: slice `index[i]` of `out` along `dim` combines with slice `i` of
/// `source` (or with a scalar).
/// Only `index_fill` wraps negative indices.
fn index_slices(
    ctx: &OpCtx,
    out: &Tensor,
    source: Option<&Tensor>,
    value: f64,
    op: Reduce,
) -> Result<()> {
    let index = ctx.tensor("index")?;
    if index.rank() > 1 {
        return Err(ctx.err(format!(
            "index must be a vector, got shape {:?}",
            index.sizes
        )));
    }
    let vals = index_values(ctx, &index, "index")?;
    // A 0-d tensor behaves as a 1-element vector.
    let as1 = |t: &Tensor| {
        if t.rank() == 0 {
            t.view_with(vec![1], vec![1], t.offset)
        } else {
            t.clone()
        }
    };
    let o = as1(out);
    let d = wrap_dim(ctx, ctx.int("dim")?, o.rank())?;
    let src = source.map(as1);
    if let Some(s) = &src {
        let n = s.sizes.get(d).copied().unwrap_or(1);
        if n != vals.len() {
            return Err(ctx.err(format!(
                "source has {n} slices along dimension {d} but index has {} entries",
                vals.len()
            )));
        }
    }
    for (i, &v) in vals.iter().enumerate() {
        let row = if source.is_none() {
            wrap_index(ctx, v, o.sizes[d], d)?
        } else {
            bounded_index(ctx, v, o.sizes[d], d)?
        };
        let target = select_t(ctx, &o, d as i64, row as i64)?;
        let vals = match &src {
            Some(s) => {
                let sl = select_t(ctx, s, d as i64, i as i64)?;
                if sl.sizes != target.sizes {
                    return Err(ctx.err(format!(
                        "source slice shape {:?} does not match destination slice shape {:?}",
                        sl.sizes, target.sizes
                    )));
                }
                sl
            }
            None => Tensor::full(out.dtype, &target.sizes, value)?,
        };
        put_at(ctx, out, &target.offsets(), &vals, op)?;
    }
    Ok(())
}

fn index_add_into(ctx: &OpCtx, out: &Tensor) -> Result<()> {
    let source = ctx.tensor("source")?;
    let alpha = ctx.float_or("alpha", 1.0)?;
    let op = if alpha == 1.0 {
        Reduce::Add
    } else {
        Reduce::AddAlpha(alpha)
    };
    index_slices(ctx, out, Some(&source), 0.0, op)
}

fn index_add(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let out = fresh(&ctx.tensor("self")?)?;
    index_add_into(ctx, &out)?;
    one(out)
}

fn index_add_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    index_add_into(ctx, &t)?;
    one(t)
}

fn index_copy(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let out = fresh(&ctx.tensor("self")?)?;
    index_slices(ctx, &out, Some(&ctx.tensor("source")?), 0.0, Reduce::Assign)?;
    one(out)
}

fn index_copy_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    index_slices(ctx, &t, Some(&ctx.tensor("source")?), 0.0, Reduce::Assign)?;
    one(t)
}

fn fill_value(ctx: &OpCtx) -> Result<f64> {
    match ctx.opt_tensor("value") {
        Ok(Some(v)) if v.numel() == 1 => Ok(v.item_f64()),
        Ok(Some(v)) => Err(ctx.err(format!(
            "index_fill only supports a 0-dimensional value tensor, got shape {:?}",
            v.sizes
        ))),
        _ => ctx.float("value"),
    }
}

fn index_fill(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let out = fresh(&ctx.tensor("self")?)?;
    index_slices(ctx, &out, None, fill_value(ctx)?, Reduce::Assign)?;
    one(out)
}

fn index_fill_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    index_slices(ctx, &t, None, fill_value(ctx)?, Reduce::Assign)?;
    one(t)
}

/// `index_reduce(self, dim, index, source, reduce, include_self=True)`: slice `index[i]` of
/// `self` along `dim` combines with slice `i` of `source` by `prod`, `mean`, `amax` or
/// `amin`. Without `include_self` the addressed slices start from the reduction's identity;
/// `mean` divides by the number of values each slice received (plus one with `self`),
/// flooring for integers, as torch.
fn index_reduce_into(ctx: &OpCtx, out: &Tensor) -> Result<()> {
    let source = ctx.tensor("source")?;
    let reduce = ctx
        .opt_str("reduce")?
        .ok_or_else(|| ctx.err("missing argument 'reduce'"))?;
    let op = match reduce.as_str() {
        "prod" => Reduce::Mul,
        "mean" => Reduce::Mean,
        "amax" => Reduce::Max,
        "amin" => Reduce::Min,
        other => {
            return Err(ctx.err(format!(
                "reduce argument must be prod, mean, amax or amin, got '{other}'"
            )))
        }
    };
    let include_self = ctx.bool_or("include_self", true)?;
    if source.dtype != out.dtype {
        return Err(ctx.err(format!(
            "self ({}) and source ({}) must have the same dtype",
            out.dtype, source.dtype
        )));
    }
    let index = ctx.tensor("index")?;
    let o = if out.rank() == 0 {
        out.view_with(vec![1], vec![1], out.offset)
    } else {
        out.clone()
    };
    let d = wrap_dim(ctx, ctx.int("dim")?, o.rank())?;
    let rows = index_values(ctx, &index, "index")?
        .into_iter()
        .map(|v| bounded_index(ctx, v, o.sizes[d], d))
        .collect::<Result<Vec<_>>>()?;
    let mut count = vec![0usize; o.sizes[d]];
    for &r in &rows {
        count[r] += 1;
    }
    if !include_self {
        let identity = match op {
            Reduce::Mul => 1.0,
            Reduce::Max => f64::NEG_INFINITY,
            Reduce::Min => f64::INFINITY,
            _ => 0.0,
        };
        for (r, _) in count.iter().enumerate().filter(|(_, &c)| c > 0) {
            let target = select_t(ctx, &o, d as i64, r as i64)?;
            let fill = Tensor::full(out.dtype, &target.sizes, identity)?;
            put_at(ctx, out, &target.offsets(), &fill, Reduce::Assign)?;
        }
    }
    index_slices(ctx, out, Some(&source), 0.0, op)?;
    if op == Reduce::Mean {
        for (r, &c) in count.iter().enumerate().filter(|(_, &c)| c > 0) {
            let n = c + include_self as usize;
            let target = select_t(ctx, &o, d as i64, r as i64)?;
            let offs = target.offsets();
            with_dtype!(out.dtype, T => {
                let mut data = out.write();
                let s = T::slice_mut(&mut data).ok_or_else(|| ctx.err("storage dtype differs from the tensor's"))?;
                for &k in &offs {
                    s[k] = if T::DTYPE.is_float() {
                        T::from_f64(s[k].to_f64() / n as f64)
                    } else {
                        T::from_i64(s[k].to_i64().div_euclid(n as i64))
                    };
                }
            }, else return Err(ctx.err(format!("dtype {} is not supported", out.dtype))));
        }
    }
    Ok(())
}

fn index_reduce(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let out = fresh(&ctx.tensor("self")?)?;
    index_reduce_into(ctx, &out)?;
    one(out)
}

fn index_reduce_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    index_reduce_into(ctx, &t)?;
    one(t)
}
