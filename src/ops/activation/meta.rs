//! Rules of the activation family: same shape and dtype as the input, except `glu` (halves a
//! dim) and the multi-output functional forms.

use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::elementwise::meta::{one, same};
use crate::ops::OpTable;

/// `glu(self, dim)`: the dim is halved (it must be even).
fn glu(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
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
fn two_same(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let second = if ctx.target().starts_with("aten.log_sigmoid_forward") {
        t.with_sizes(vec![0])
    } else {
        ctx.opt_tensor("noise")?.unwrap_or_else(|| t.clone())
    };
    Ok(vec![MValue::Tensor(t), MValue::Tensor(second)])
}

pub(crate) fn register(r: &mut OpTable) {
    for n in [
        "relu",
        "relu6",
        "hardtanh",
        "leaky_relu",
        "elu",
        "selu",
        "celu",
        "gelu",
        "silu",
        "mish",
        "hardswish",
        "hardsigmoid",
        "softplus",
        "threshold",
        "rrelu",
        "rrelu_with_noise",
    ] {
        r.rule_aten(&[n, &format!("{n}_")], same);
    }
    r.rule_aten(
        &[
            "hardshrink",
            "softshrink",
            "log_sigmoid",
            "prelu",
            "_prelu_kernel",
        ],
        same,
    );
    r.rule_aten(
        &["rrelu_with_noise_functional", "log_sigmoid_forward"],
        two_same,
    );
    r.rule_aten(&["glu"], glu);
}
