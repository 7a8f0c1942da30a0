//! Rules of the activation family: same shape and dtype as the input, except `glu` (halves a
//! dim) and the multi-output functional forms.

use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::elementwise::meta::one;

/// `glu(self, dim)`: the dim is halved (it must be even).
pub(super) fn glu(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let d = ctx.wrap_dim(ctx.int_or("dim", -1)?, t.rank())?;
    let n = *t.sizes.get(d).ok_or("glu does not take a 0-d tensor")?;
    if n % 2 != 0 {
        return Err(format!(
            "halving dimension must be even, but dimension {d} is size {n}"
        ));
    }
    let mut s = t.sizes.clone();
    s[d] = n / 2;
    one(t.with_sizes(s))
}

/// `rrelu_with_noise_functional` returns (out, noise); `log_sigmoid_forward` (out, buffer).
pub(super) fn two_same(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let second = if ctx.target().starts_with("aten.log_sigmoid_forward") {
        t.with_sizes(vec![0])
    } else {
        ctx.opt_tensor("noise")?.unwrap_or_else(|| t.clone())
    };
    Ok(vec![MValue::Tensor(t), MValue::Tensor(second)])
}
