//! Rules of the conv family: `convolution`, `conv{1,2,3}d` and `conv_transpose{1,2,3}d` with
//! stride, padding (ints, 'same', 'valid'), dilation, groups and output_padding; unbatched
//! inputs (no N dim) keep having none.

use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::one;
use crate::ops::OpTable;
use crate::program::Arg;

enum Padding {
    Explicit(Vec<i64>),
    Same,
    Valid,
}

/// A per-dim list: one value repeated, or exactly `nd` values.
fn per_dim(name: &str, v: Vec<i64>, nd: usize, min: i64) -> RuleResult<Vec<i64>> {
    let v = if v.len() == 1 { vec![v[0]; nd] } else { v };
    if v.len() != nd {
        return Err(format!("{name} must have 1 or {nd} values, got {v:?}"));
    }
    if let Some(b) = v.iter().find(|&&x| x < min) {
        return Err(format!("{name} must be at least {min}, got {b}"));
    }
    Ok(v)
}

fn conv(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    let t = ctx.target();
    let nd = w
        .rank()
        .checked_sub(2)
        .filter(|n| (1..=3).contains(n))
        .ok_or_else(|| format!("weight must be 3-D, 4-D or 5-D, got shape {:?}", w.sizes))?;
    let transposed = if t.starts_with("aten.conv_transpose") {
        true
    } else {
        ctx.bool_or("transposed", false)?
    };
    let ints = |name: &str, d: i64| -> RuleResult<Vec<i64>> {
        Ok(ctx.opt_ints(name)?.unwrap_or_else(|| vec![d]))
    };
    let stride = per_dim("stride", ints("stride", 1)?, nd, 1)?;
    let dilation = per_dim("dilation", ints("dilation", 1)?, nd, 1)?;
    let out_pad = per_dim("output_padding", ints("output_padding", 0)?, nd, 0)?;
    let padding = match ctx.arg("padding") {
        Some(Arg::Str(s)) if s == "same" => Padding::Same,
        Some(Arg::Str(s)) if s == "valid" => Padding::Valid,
        Some(Arg::Str(s)) => {
            return Err(format!(
                "padding must be 'same', 'valid' or a list of ints, got '{s}'"
            ))
        }
        _ => Padding::Explicit(per_dim("padding", ints("padding", 0)?, nd, 0)?),
    };
    let groups = ctx.int_or("groups", 1)?;
    if groups <= 0 {
        return Err(format!("groups must be positive, got {groups}"));
    }
    let g = groups as usize;
    let batched = x.rank() == nd + 2;
    if !batched && x.rank() != nd + 1 {
        return Err(format!(
            "expected a {}-D (unbatched) or {}-D (batched) input for a {nd}-D convolution with weight {:?}, got {:?}",
            nd + 1,
            nd + 2,
            w.sizes,
            x.sizes
        ));
    }
    let c_in = x.sizes[x.rank() - nd - 1];
    let (need_c, c_out) = if transposed {
        (w.sizes[0], w.sizes[1] * g)
    } else {
        (w.sizes[1] * g, w.sizes[0])
    };
    if c_in != need_c {
        return Err(format!(
            "input {:?} has {c_in} channels but weight {:?} (groups {groups}) expects {need_c}",
            x.sizes, w.sizes
        ));
    }
    if !transposed && c_out % g != 0 {
        return Err(format!(
            "the {c_out} output channels of weight {:?} are not divisible by groups {groups}",
            w.sizes
        ));
    }
    let mut out = x.sizes[..x.rank() - nd - 1].to_vec();
    out.push(c_out);
    for i in 0..nd {
        let n = x.sizes[x.rank() - nd + i] as i64;
        let k = w.sizes[2 + i] as i64;
        let (s, d) = (stride[i], dilation[i]);
        let eff = d * (k - 1) + 1;
        let o = if transposed {
            let p = match &padding {
                Padding::Explicit(p) => p[i],
                _ => 0,
            };
            (n - 1) * s - 2 * p + eff - 1 + out_pad[i] + 1
        } else {
            match &padding {
                Padding::Same => n,
                Padding::Valid => (n - eff) / s + 1,
                Padding::Explicit(p) => {
                    let span = n + 2 * p[i] - eff;
                    if span < 0 {
                        return Err(format!(
                            "the (padded) input size {} at spatial dim {i} is smaller than the dilated kernel size {eff} (input {:?}, weight {:?})",
                            n + 2 * p[i],
                            x.sizes,
                            w.sizes
                        ));
                    }
                    span / s + 1
                }
            }
        };
        if o < 0 {
            return Err(format!("output size {o} at spatial dim {i} is negative"));
        }
        out.push(o as usize);
    }
    if let Some(b) = ctx.opt_tensor("bias")? {
        if b.numel() != c_out {
            return Err(format!(
                "bias of shape {:?} should have {c_out} elements",
                b.sizes
            ));
        }
    }
    one(MetaTensor::new(x.dtype, out))
}

pub(crate) fn register(r: &mut OpTable) {
    r.rule_aten(
        &[
            "convolution",
            "_convolution",
            "conv1d",
            "conv2d",
            "conv3d",
            "conv_transpose1d",
            "conv_transpose2d",
            "conv_transpose3d",
        ],
        conv,
    );
}
