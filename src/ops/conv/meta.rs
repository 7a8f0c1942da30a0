//! Rules of the conv family: `convolution`, `conv{1,2,3}d` and `conv_transpose{1,2,3}d` with
//! stride, padding (ints, 'same', 'valid'), dilation, groups and output_padding; unbatched
//! inputs (no N dim) keep having none.

use super::ConvParams;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::one;

pub(super) fn conv(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let p = ctx.with_op(ConvParams::parse)?;
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    let bias = ctx.opt_tensor("bias")?;
    let conv = p.geometry(&x.sizes, &w.sizes, bias.map(|b| b.numel()))?;
    one(MetaTensor::new(x.dtype, conv.out_sizes()))
}
