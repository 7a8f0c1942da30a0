//! Rules of the fft family: the [`FftPlan`](super::FftPlan) / [`StftPlan`](super::stft)
//! the kernel runs gives the output's sizes and dtype.

use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};

pub(super) fn fft(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    let p = ctx.with_op(|c| super::FftPlan::parse(c, &x.sizes, x.dtype))?;
    Ok(vec![MValue::Tensor(MetaTensor::new(
        p.out_dtype,
        p.out_sizes,
    ))])
}

pub(super) fn stft(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    let p = ctx.with_op(|c| super::stft::StftPlan::parse(c, &x.sizes, x.dtype))?;
    Ok(vec![MValue::Tensor(MetaTensor::new(
        p.out_dtype,
        p.out_sizes(),
    ))])
}

pub(super) fn istft(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    let p = ctx.with_op(|c| super::stft::IstftPlan::parse(c, &x.sizes, x.dtype))?;
    Ok(vec![MValue::Tensor(MetaTensor::new(
        p.out_dtype,
        p.out_sizes(),
    ))])
}
