//! Rules of the norm family: the output has the input's shape and dtype; the statistics of
//! the `native_*` forms have the shapes torch gives them (per channel for batch norm, per row
//! for layer norm, `[N, groups]` for group norm), in the accumulation dtype.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::one;

/// Statistics are kept in float32 for half inputs (torch's opmath), f64 for f64.
fn stat_dtype(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// Batch norm's saved statistics: in the input's dtype, except for a half input with a float32
/// parameter or running buffer (torch's `param_scalar_type` of a mixed-type call: float32).
pub(super) fn batch_stat_dtype(x: DType, params: &[Option<DType>]) -> DType {
    let mixed = params.iter().flatten().any(|&p| p != x);
    if matches!(x, DType::F16 | DType::BF16) && mixed {
        DType::F32
    } else {
        x
    }
}

fn channels(x: &MetaTensor) -> RuleResult<usize> {
    if x.rank() < 2 {
        return Err(format!(
            "expected an input of at least 2 dims ([N, C, ...]), got shape {:?}",
            x.sizes
        ));
    }
    Ok(x.sizes[1])
}

pub(super) fn batch_norm(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let c = channels(&x)?;
    for name in ["weight", "bias", "running_mean", "running_var"] {
        if let Some(p) = ctx.opt_tensor(name)? {
            if p.numel() != c {
                return Err(format!(
                    "{name} of shape {:?} should have {c} elements (the channels of input {:?})",
                    p.sizes, x.sizes
                ));
            }
        }
    }
    let t = ctx.target();
    if t == "aten.batch_norm.default" {
        return one(x);
    }
    let with_update = t.starts_with("aten._batch_norm_with_update");
    let training = !t.contains("no_training") && (with_update || ctx.bool_or("training", false)?);
    let mut params = Vec::new();
    for name in ["weight", "bias", "running_mean", "running_var"] {
        params.push(ctx.opt_tensor(name)?.map(|p| p.dtype));
    }
    // The empty statistics of eval mode are in the input's dtype.
    let sd = if training {
        batch_stat_dtype(x.dtype, &params)
    } else {
        x.dtype
    };
    let stat = MetaTensor::new(sd, vec![if training { c } else { 0 }]);
    let mut out = vec![
        MValue::Tensor(x.clone()),
        MValue::Tensor(stat.clone()),
        MValue::Tensor(stat),
    ];
    if with_update {
        out.push(MValue::Tensor(MetaTensor::new(DType::U8, vec![0])));
    }
    if t.contains("_functional") {
        for name in ["running_mean", "running_var"] {
            out.push(match ctx.opt_tensor(name)? {
                Some(r) => MValue::Tensor(r),
                None => MValue::None,
            });
        }
    }
    Ok(out)
}

/// Where the normalized dims start, from `normalized_shape` (which must match the tail).
fn norm_axis(x: &MetaTensor, normalized: &[i64]) -> RuleResult<usize> {
    Ok(super::Normalized::of(&x.sizes, normalized)?.axis)
}

/// Statistics shape: the leading dims, then ones.
fn row_stats(x: &MetaTensor, axis: usize, dtype: DType) -> MetaTensor {
    let mut s = x.sizes[..axis].to_vec();
    s.extend(std::iter::repeat_n(1, x.rank() - axis));
    MetaTensor::new(dtype, s)
}

pub(super) fn layer_norm(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let axis = norm_axis(&x, &ctx.ints("normalized_shape")?)?;
    if ctx.target() == "aten.layer_norm.default" {
        return one(x);
    }
    // torch's layer norm keeps mean and rstd in the input's dtype.
    let st = row_stats(&x, axis, x.dtype);
    Ok(vec![
        MValue::Tensor(x),
        MValue::Tensor(st.clone()),
        MValue::Tensor(st),
    ])
}

pub(super) fn rms_norm(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let axis = norm_axis(&x, &ctx.ints("normalized_shape")?)?;
    if ctx.target() == "aten.rms_norm.default" {
        return one(x);
    }
    let st = row_stats(&x, axis, stat_dtype(x.dtype));
    Ok(vec![MValue::Tensor(x), MValue::Tensor(st)])
}

pub(super) fn group_norm(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let c = channels(&x)?;
    if ctx.target() == "aten.group_norm.default" {
        let g = ctx.int("num_groups")?;
        if g <= 0 || c % g as usize != 0 {
            return Err(format!(
                "expected the number of channels {c} to be divisible by num_groups {g}"
            ));
        }
        return one(x);
    }
    let n = ctx.int("N")?.max(0) as usize;
    let g = ctx.int("group")?.max(0) as usize;
    let st = MetaTensor::new(x.dtype, vec![n, g]);
    Ok(vec![
        MValue::Tensor(x),
        MValue::Tensor(st.clone()),
        MValue::Tensor(st),
    ])
}

pub(super) fn instance_norm(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    channels(&x)?;
    one(x)
}
