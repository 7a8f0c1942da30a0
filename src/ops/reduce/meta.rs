//! Rules of the reduce family: reductions over a dim list (absent or empty: every dim) with
//! `keepdim` and an optional `dtype` (integer sums go to int64), arg-reductions to int64,
//! statistics in floating point, scans and softmax keeping the shape. Dim handling reuses the
//! CPU family's `reduce_mask`/`reduced_sizes`.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::{float_dtype, one};
use crate::ops::reduce::{reduced_sizes, Reduction};
use crate::ops::OpTable;

/// Sizes after reducing `dims` (already wrapped).
pub(crate) fn reduce_shape(sizes: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
    let mask: Vec<bool> = (0..sizes.len()).map(|i| dims.contains(&i)).collect();
    reduced_sizes(sizes, &mask, keepdim)
}

/// The reduced sizes for the node's `dim` and `keepdim` ([`Reduction`], shared with the
/// kernels).
fn reduced(ctx: &MetaCtx, x: &MetaTensor) -> RuleResult<Vec<usize>> {
    Ok(ctx
        .with_op(|c| Reduction::parse(c, x.rank()))?
        .out_sizes(&x.sizes))
}

fn int_promoted(x: DType, dtype: Option<DType>) -> DType {
    dtype.unwrap_or(if x.is_float() || x.is_complex() {
        x
    } else {
        DType::I64
    })
}

pub(super) fn sum(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let d = int_promoted(x.dtype, ctx.opt_dtype("dtype")?);
    one(MetaTensor::new(d, reduced(ctx, &x)?))
}

pub(super) fn mean(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let d = ctx.opt_dtype("dtype")?.unwrap_or(x.dtype);
    if !(d.is_float() || d.is_complex()) {
        return Err(format!(
            "could not infer output dtype. Input dtype must be either a floating point or \
             complex dtype. Got: {d}"
        ));
    }
    one(MetaTensor::new(d, reduced(ctx, &x)?))
}

pub(super) fn amax(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    one(x.with_sizes(reduced(ctx, &x)?))
}

/// `max.default` / `min.default`: 0-d; `max.other` is elementwise.
pub(super) fn max_all(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    if ctx.has("other") {
        let o = ctx.tensor("other")?;
        let s = crate::ops::elementwise::meta::broadcast(&x.sizes, &o.sizes)?;
        let d = crate::cpu::promote::promote_types(x.dtype, o.dtype);
        return one(MetaTensor::new(d, s));
    }
    if x.numel() == 0 {
        return Err("max()/min() of an empty tensor needs a dim".into());
    }
    one(x.with_sizes(vec![]))
}

fn one_dim(ctx: &MetaCtx, x: &MetaTensor) -> RuleResult<Vec<usize>> {
    let d = ctx.wrap_dim(ctx.int("dim")?, x.rank())?;
    Ok(reduce_shape(&x.sizes, &[d], ctx.bool_or("keepdim", false)?))
}

pub(super) fn max_dim(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let s = one_dim(ctx, &x)?;
    Ok(vec![
        MValue::Tensor(x.with_sizes(s.clone())),
        MValue::Tensor(MetaTensor::new(DType::I64, s)),
    ])
}

pub(super) fn argmax(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let s = match ctx.opt_int("dim")? {
        Some(_) => one_dim(ctx, &x)?,
        None if ctx.bool_or("keepdim", false)? => vec![1; x.rank()],
        None => vec![],
    };
    one(MetaTensor::new(DType::I64, s))
}

pub(super) fn aminmax(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let s = match ctx.opt_int("dim")? {
        Some(_) => one_dim(ctx, &x)?,
        None => reduce_shape(
            &x.sizes,
            &(0..x.rank()).collect::<Vec<_>>(),
            ctx.bool_or("keepdim", false)?,
        ),
    };
    let t = x.with_sizes(s);
    Ok(vec![MValue::Tensor(t.clone()), MValue::Tensor(t)])
}

pub(super) fn any_all(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let d = if x.dtype == DType::U8 {
        DType::U8
    } else {
        DType::Bool
    };
    one(MetaTensor::new(d, reduced(ctx, &x)?))
}

pub(super) fn count_nonzero(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let mask = ctx.with_op(|c| Reduction::parse(c, x.rank()))?.mask;
    one(MetaTensor::new(
        DType::I64,
        reduced_sizes(&x.sizes, &mask, false),
    ))
}

fn var_std(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let s = reduced(ctx, &x)?;
    let t = MetaTensor::new(float_dtype(x.dtype), s);
    Ok(if ctx.target().contains("_mean") {
        vec![MValue::Tensor(t.clone()), MValue::Tensor(t)]
    } else {
        vec![MValue::Tensor(t)]
    })
}

pub(super) fn float_reduce(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let d = ctx.opt_dtype("dtype")?.unwrap_or(float_dtype(x.dtype));
    one(MetaTensor::new(d, reduced(ctx, &x)?))
}

pub(super) fn scan(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    ctx.wrap_dim(ctx.int("dim")?, x.rank())?;
    let d = int_promoted(x.dtype, ctx.opt_dtype("dtype")?);
    one(x.with_dtype(d))
}

pub(super) fn scan_inplace(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    one(ctx.tensor("self")?)
}

pub(super) fn cummax(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    ctx.wrap_dim(ctx.int("dim")?, x.rank())?;
    let i = x.with_dtype(DType::I64);
    Ok(vec![MValue::Tensor(x), MValue::Tensor(i)])
}

pub(super) fn logcumsumexp(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    ctx.wrap_dim(ctx.int("dim")?, x.rank())?;
    let d = float_dtype(x.dtype);
    one(x.with_dtype(d))
}

/// `diff(self, n, dim, prepend, append)`: the dim grows by prepend/append, shrinks by n.
pub(super) fn diff(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return Err("diff expects input to be at least one-dimensional".into());
    }
    let n = ctx.int_or("n", 1)?;
    if n < 0 {
        return Err(format!("order must be non-negative but got {n}"));
    }
    let d = ctx.wrap_dim(ctx.int_or("dim", -1)?, x.rank())?;
    let mut len = x.sizes[d];
    let mut dtype = x.dtype;
    for name in ["prepend", "append"] {
        if let Some(p) = ctx.opt_tensor(name)? {
            len += p.sizes.get(d).copied().unwrap_or(1);
            dtype = crate::cpu::promote::promote_types(dtype, p.dtype);
        }
    }
    let mut s = x.sizes.clone();
    s[d] = len.saturating_sub(n as usize);
    // diff of bools is a logical xor (stays bool); other dtypes keep theirs.
    one(MetaTensor::new(dtype, s))
}

pub(super) fn softmax(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let p = ctx.with_op(|c| super::softmax::SoftmaxParams::parse(c, x.rank(), x.dtype))?;
    one(x.with_dtype(p.out))
}

pub(crate) fn register(r: &mut OpTable) {
    r.rule("aten.max.other", max_all);
    r.rule("aten.min.other", max_all);
    r.rule_aten(&["var", "std", "var_mean", "std_mean"], var_std);
}
