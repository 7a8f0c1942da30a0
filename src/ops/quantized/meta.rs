//! Rules of the PT2E quantization family: quantize gives the node's int `dtype`, dequantize
//! `out_dtype` (float32 by default), both in the input's shape; choose_qparams a float64
//! `[1]` scale (float32 for `pt2web.choose_qparams`) and an int64 `[1]` zero point. The checks are the kernels' own
//! ([`super::qrange`], [`super::Params::parse`]), where the arguments are known.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};

fn float_input(x: &MetaTensor) -> RuleResult<()> {
    match x.dtype {
        DType::F32 | DType::F16 | DType::BF16 => Ok(()),
        d => Err(format!(
            "'input' must be float32 (or float16 / bfloat16), got {d}"
        )),
    }
}

pub(super) fn quantize(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    float_input(&x)?;
    let (d, _, _) = ctx.with_op(super::qrange)?;
    Ok(vec![MValue::Tensor(x.with_dtype(d))])
}

pub(super) fn dequantize(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let (d, _, _) = ctx.with_op(super::qrange)?;
    if x.dtype != d {
        return Err(format!(
            "'input' must have the dtype the node names ({d}), got {}",
            x.dtype
        ));
    }
    let out = ctx.opt_dtype("out_dtype")?.unwrap_or(DType::F32);
    if !out.is_float() {
        return Err(format!("out_dtype {out}: expected a float dtype"));
    }
    Ok(vec![MValue::Tensor(x.with_dtype(out))])
}

pub(super) fn choose_qparams(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    float_input(&ctx.tensor("input")?)?;
    ctx.with_op(super::qrange)?;
    let scale = if ctx.target() == super::CHOOSE_QPARAMS_F32 {
        DType::F32
    } else {
        DType::F64
    };
    Ok(vec![
        MValue::Tensor(MetaTensor::new(scale, vec![1])),
        MValue::Tensor(MetaTensor::new(DType::I64, vec![1])),
    ])
}
