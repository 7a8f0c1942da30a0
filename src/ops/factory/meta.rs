//! Rules of the factory family: `arange`/`linspace`/`eye` sizes from their arguments, `full`
//! and friends from `size` (dtype from the argument, the fill value's kind, or float32),
//! `*_like`/`new_*` from `self`, random ops and dropout keeping their input's shape.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult, ScalarKind};
use crate::ops::elementwise::meta::{one, same};
use crate::ops::OpTable;

/// A number argument: its value (when known) and whether it is a float.
fn number(ctx: &MetaCtx, name: &str) -> RuleResult<Option<(Option<f64>, ScalarKind)>> {
    let Some(a) = ctx.arg(name) else {
        return Ok(None);
    };
    Ok(match ctx.resolve(a)? {
        MValue::None => None,
        MValue::Int(i) => Some((Some(i as f64), ScalarKind::Int)),
        MValue::Float(f) => Some((Some(f), ScalarKind::Float)),
        MValue::Bool(b) => Some((Some(b as u8 as f64), ScalarKind::Bool)),
        MValue::Unknown(k) => Some((None, k)),
        MValue::Tensor(t) if t.numel() == 1 => Some((
            None,
            if t.dtype.is_float() {
                ScalarKind::Float
            } else {
                ScalarKind::Int
            },
        )),
        other => {
            return Err(format!(
                "argument '{name}' is a {}, expected a number",
                other.kind()
            ))
        }
    })
}

pub(super) fn arange(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let end = number(ctx, "end")?.ok_or("missing argument 'end'")?;
    let start = number(ctx, "start")?.unwrap_or((Some(0.0), ScalarKind::Int));
    let step = number(ctx, "step")?.unwrap_or((Some(1.0), ScalarKind::Int));
    let any_float = [start.1, end.1, step.1].contains(&ScalarKind::Float);
    let dtype = ctx
        .opt_dtype("dtype")?
        .unwrap_or(if any_float { DType::F32 } else { DType::I64 });
    let (Some(s), Some(e), Some(st)) = (start.0, end.0, step.0) else {
        return Err("arange bounds depend on tensor data".into());
    };
    if st == 0.0 {
        return Err("step must be nonzero".into());
    }
    if !s.is_finite() || !e.is_finite() {
        return Err(format!("unsupported range: {s} -> {e}"));
    }
    if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
        return Err("upper bound and larger bound inconsistent with step sign".into());
    }
    let n = if !any_float && !dtype.is_float() {
        let (a, b, c) = (s as i128, e as i128, st as i128);
        (b - a + c - c.signum()) / c
    } else {
        ((e - s) / st).ceil() as i128
    }
    .max(0);
    one(MetaTensor::new(dtype, vec![n as usize]))
}

/// The dtype of `full(size, fill_value)` without a dtype argument.
fn fill_dtype(ctx: &MetaCtx) -> RuleResult<DType> {
    Ok(match number(ctx, "fill_value")? {
        Some((_, ScalarKind::Bool)) => DType::Bool,
        Some((_, ScalarKind::Int)) => DType::I64,
        _ => DType::F32,
    })
}

/// `full`, `zeros`, `ones`, `empty`, `new_*`, `empty_strided`, `rand`, `randn`...: from `size`.
pub(super) fn sized(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let size = ctx.sizes("size")?;
    let base = ctx.opt_tensor("self")?;
    let dtype = match ctx.opt_dtype("dtype")? {
        Some(d) => d,
        None => match &base {
            Some(b) => b.dtype,
            None if ctx.has("fill_value") => fill_dtype(ctx)?,
            None if ctx.target().starts_with("aten.randint") => DType::I64,
            None => DType::F32,
        },
    };
    one(MetaTensor::new(dtype, size))
}

/// `*_like(self)`, in-place random fills, `randint_like`: self's shape, optional dtype.
pub(super) fn like(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let d = ctx.opt_dtype("dtype")?.unwrap_or(t.dtype);
    one(t.with_dtype(d))
}

pub(super) fn empty_permuted(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let d = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
    one(MetaTensor::new(d, ctx.sizes("size")?))
}

pub(super) fn scalar_tensor(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let d = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
    one(MetaTensor::new(d, vec![]))
}

pub(super) fn linspace(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let steps = ctx.int("steps")?;
    if steps < 0 {
        return Err("number of steps must be non-negative".into());
    }
    let d = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
    one(MetaTensor::new(d, vec![steps as usize]))
}

pub(super) fn eye(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let n = ctx.int("n")?;
    let m = ctx.opt_int("m")?.unwrap_or(n);
    if n < 0 || m < 0 {
        return Err(format!("n and m must be non-negative, got {n} and {m}"));
    }
    let d = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
    one(MetaTensor::new(d, vec![n as usize, m as usize]))
}

pub(super) fn randperm(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let n = ctx.int("n")?;
    if n < 0 {
        return Err(format!("n must be non-negative, got {n}"));
    }
    let d = ctx.opt_dtype("dtype")?.unwrap_or(DType::I64);
    one(MetaTensor::new(d, vec![n as usize]))
}

/// `multinomial(self, num_samples, replacement)`: int64 `[num_samples]` or
/// `[rows, num_samples]`, with torch's argument errors.
pub(super) fn multinomial(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let replacement = ctx.bool_or("replacement", false)?;
    let m =
        super::random::Multinomial::parse(&t.sizes, t.dtype, ctx.int("num_samples")?, replacement)?;
    one(MetaTensor::new(DType::I64, m.out_sizes(t.sizes.len())))
}

/// `randint(high, size)`, `randint(low, high, size)` or `randint_like(self, ...)`.
pub(super) fn randint(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    if ctx.has("size") {
        return sized(ctx);
    }
    like(ctx)
}

/// `normal`: from mean/std tensors (broadcast) or from `size`.
pub(super) fn normal(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let tensor = |name: &str| -> RuleResult<Option<MetaTensor>> {
        match ctx.arg(name) {
            Some(crate::program::Arg::Tensor(_)) => ctx.tensor(name).map(Some),
            _ => Ok(None),
        }
    };
    let (m, s) = (tensor("mean")?, tensor("std")?);
    let r = match (m, s) {
        (None, None) => {
            let d = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
            MetaTensor::new(d, ctx.sizes("size")?)
        }
        (Some(m), None) => m,
        (None, Some(s)) => s,
        (Some(m), Some(s)) => {
            let sz = crate::ops::elementwise::meta::broadcast(&m.sizes, &s.sizes)?;
            MetaTensor::new(m.dtype, sz)
        }
    };
    one(r)
}

fn native_dropout(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("input")?;
    let m = t.with_dtype(DType::Bool);
    Ok(vec![MValue::Tensor(t), MValue::Tensor(m)])
}

pub(crate) fn register(r: &mut OpTable) {
    for op in [
        "dropout",
        "feature_dropout",
        "alpha_dropout",
        "feature_alpha_dropout",
    ] {
        r.rule_aten(&[op, &format!("{op}_")], same);
    }
    r.rule_aten(&["native_dropout"], native_dropout);
}
