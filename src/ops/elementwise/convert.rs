//! Copies, aliases and dtype conversions: clone, contiguous, copy/copy_, alias/detach,
//! lift_fresh_copy, to/_to_copy/type_as, fill/fill_, zero/zero_.
//!
//! Copies that torch makes with `preserve_format` (clone, _to_copy, copy, fill) keep the
//! source's strides when it is a permuted dense layout, so later `as_strided` nodes, which
//! carry torch's strides, see the same storage layout.

use super::engine::{dense_strides, scalar_full, val, Val};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{OpCtx, OpTable};
use crate::program::Arg;
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    use super::meta::same;
    r.define_op("aten.clone", clone, same);
    r.define_op("aten.lift_fresh_copy", clone, same);
    r.define_op("aten.contiguous", contiguous, same);
    for op in ["alias", "detach", "detach_", "lift_fresh"] {
        r.define_op(&format!("aten.{op}"), alias, same);
    }
    // Their rules are the dtype-keeping unary rule (`meta.rs`).
    for op in ["positive", "resolve_conj", "resolve_neg"] {
        r.cpu_op(&format!("aten.{op}"), alias);
    }
    r.define("aten.copy.default", copy, super::meta::copy);
    r.define("aten.copy_.default", copy_, super::meta::copy);
    r.define("aten.copy_.Tensor", copy_, super::meta::copy);
    r.define_op("aten.to", to, super::meta::to_copy);
    r.define_op("aten._to_copy", to_copy, super::meta::to_copy);
    r.define_op("aten.type_as", type_as, super::meta::to_copy);
    r.cpu_op("aten.fill", fill);
    r.cpu_op("aten.fill_", fill);
    r.cpu_op("aten.zero", fill);
    r.cpu_op("aten.zero_", fill);
}

/// Export schema `MemoryFormat` values.
const CONTIGUOUS: i64 = 1;
const CHANNELS_LAST: i64 = 2;
const CHANNELS_LAST_3D: i64 = 3;

/// The strides torch gives a `preserve_format` copy of `t`: its own when `t` is a permuted
/// dense layout (`x.t()`, NHWC), `None` (contiguous) otherwise.
pub(crate) fn preserved_strides(t: &Tensor) -> Option<Vec<usize>> {
    if t.is_contiguous() {
        None
    } else {
        dense_strides(t)
    }
}

/// Channels-last strides for a rank-4 (NHWC) or rank-5 (NDHWC) shape.
fn channels_last(sizes: &[usize]) -> Option<Vec<usize>> {
    let r = sizes.len();
    if r < 3 {
        return None;
    }
    let c = sizes[1];
    let mut strides = vec![0; r];
    strides[1] = 1;
    let mut acc = c.max(1);
    for d in (2..r).rev() {
        strides[d] = acc;
        acc *= sizes[d].max(1);
    }
    strides[0] = acc;
    Some(strides)
}

/// The layout a copy of `t` gets under the node's `memory_format` argument.
pub(crate) fn layout_for(ctx: &OpCtx, t: &Tensor) -> Option<Vec<usize>> {
    match ctx.arg("memory_format") {
        Some(Arg::MemoryFormat(CONTIGUOUS)) => None,
        Some(Arg::MemoryFormat(CHANNELS_LAST)) if t.rank() == 4 => channels_last(&t.sizes),
        Some(Arg::MemoryFormat(CHANNELS_LAST_3D)) if t.rank() == 5 => channels_last(&t.sizes),
        _ => preserved_strides(t),
    }
}

/// `values` (any layout) copied into a fresh tensor of `dtype` with `strides` (contiguous
/// when `None`).
pub(crate) fn materialize(
    values: &Tensor,
    dtype: DType,
    strides: Option<Vec<usize>>,
) -> Result<Tensor> {
    match strides {
        None => values.to_dtype(dtype),
        Some(st) => {
            let out = Tensor::zeros(dtype, &values.sizes)?.view_with(values.sizes.clone(), st, 0);
            out.copy_from(values)?;
            Ok(out)
        }
    }
}

fn one(t: Tensor) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Tensor(t)])
}

fn clone(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(materialize(&t, t.dtype, layout_for(ctx, &t))?)
}

fn contiguous(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let want = match ctx.arg("memory_format") {
        Some(Arg::MemoryFormat(CHANNELS_LAST | CHANNELS_LAST_3D)) => channels_last(&t.sizes),
        _ => None,
    };
    match want {
        Some(st) if st != t.strides => one(materialize(&t, t.dtype, Some(st))?),
        Some(_) => one(t),
        // An already contiguous tensor is returned as is (an alias), as in torch.
        None => one(t.contiguous()),
    }
}

fn alias(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    one(ctx.tensor("self")?)
}

/// `src` broadcast to `dst`'s shape.
fn broadcast_src(ctx: &OpCtx, dst: &Tensor, src: &Tensor) -> Result<Tensor> {
    if src.sizes == dst.sizes {
        return Ok(src.clone());
    }
    src.expand_to(&dst.sizes).map_err(|_| {
        ctx.err(format!(
            "the source of shape {:?} cannot be broadcast to the destination shape {:?}",
            src.sizes, dst.sizes
        ))
    })
}

fn copy(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, src) = (ctx.tensor("self")?, ctx.tensor("src")?);
    let src = broadcast_src(ctx, &t, &src)?;
    one(materialize(&src, t.dtype, preserved_strides(&t))?)
}

fn copy_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let src = if ctx.has("src") {
        ctx.tensor("src")?
    } else {
        ctx.tensor("other")?
    };
    let src = broadcast_src(ctx, &t, &src)?;
    // Reading `src` fully before writing makes overlapping copies (x.copy_(x.flip(0))) safe.
    let src = if std::sync::Arc::ptr_eq(&src.data, &t.data) {
        src.contiguous().to_dtype(src.dtype)?
    } else {
        src
    };
    t.copy_from(&src)?;
    one(t)
}

/// `to`/`_to_copy` to `dtype`: an alias when nothing changes and no copy is asked for.
fn convert(ctx: &OpCtx, t: Tensor, dtype: Option<DType>, force_copy: bool) -> Result<Vec<RValue>> {
    let dtype = dtype.unwrap_or(t.dtype);
    let format_change = matches!(
        ctx.arg("memory_format"),
        Some(Arg::MemoryFormat(CHANNELS_LAST | CHANNELS_LAST_3D))
    );
    if dtype == t.dtype && !force_copy && !format_change {
        return one(t);
    }
    let strides = layout_for(ctx, &t);
    one(materialize(&t, dtype, strides)?)
}

fn to(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let dtype = match ctx.arg("other") {
        Some(Arg::Tensor(_)) => Some(ctx.tensor("other")?.dtype),
        _ => ctx.opt_dtype("dtype")?,
    };
    let force = ctx.bool_or("copy", false)?;
    convert(ctx, t, dtype, force)
}

fn to_copy(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let dtype = ctx.opt_dtype("dtype")?;
    convert(ctx, t, dtype, true)
}

fn type_as(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, other) = (ctx.tensor("self")?, ctx.tensor("other")?);
    convert(ctx, t, Some(other.dtype), false)
}

/// fill/fill_ (number or 0-d tensor value) and zero/zero_.
fn fill(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let value = if ctx.target().starts_with("aten.zero") {
        scalar_full(t.dtype, &t.sizes, crate::ops::Scalar::Int(0))?
    } else {
        match val(ctx, "value")? {
            Val::S(s) => scalar_full(t.dtype, &t.sizes, s)?,
            Val::T(v) if v.rank() == 0 => v.expand_to(&t.sizes)?,
            Val::T(v) => return Err(ctx.err(format!("fill only supports a 0-dimensional value tensor, but got a tensor with {} dimensions", v.rank()))),
        }
    };
    if super::engine::is_inplace(ctx) {
        t.copy_from(&value)?;
        return one(t);
    }
    one(materialize(&value, t.dtype, preserved_strides(&t))?)
}
