//! The parameters of the activations, parsed once from the node with torch's defaults and
//! checked as torch checks them. The CPU kernels (`mod.rs`) compute with them; the GPU
//! kernels (`src/gpu/kernels/elementwise.rs`, `elementwise_args.rs`) pass the same values to
//! their shaders.

use super::{Elu, Hardshrink, LeakyRelu, Softplus, Softshrink};
use crate::error::Result;
use crate::ops::{OpCtx, Scalar};

/// The op of a target, without its overload and in-place suffix (`aten.celu_.default` →
/// `aten.celu`).
fn op_of<'a>(ctx: &'a OpCtx) -> &'a str {
    let t = ctx.target();
    t.rsplit_once('.')
        .map_or(t, |(o, _)| o)
        .trim_end_matches('_')
}

/// The clamp of relu6 (0 and 6) and hardtanh (`min_val`, `max_val`: -1 and 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bounds {
    pub lo: Scalar,
    pub hi: Scalar,
}

impl Bounds {
    pub fn parse(ctx: &OpCtx) -> Result<Bounds> {
        Ok(match op_of(ctx) {
            "aten.relu6" => Bounds {
                lo: Scalar::Int(0),
                hi: Scalar::Int(6),
            },
            _ => Bounds {
                lo: ctx.opt_scalar("min_val")?.unwrap_or(Scalar::Int(-1)),
                hi: ctx.opt_scalar("max_val")?.unwrap_or(Scalar::Int(1)),
            },
        })
    }
}

impl LeakyRelu {
    pub fn parse(ctx: &OpCtx) -> Result<LeakyRelu> {
        Ok(LeakyRelu {
            slope: ctx.float_or("negative_slope", 0.01)?,
        })
    }
}

impl Elu {
    /// elu (`alpha`, `scale`, `input_scale`), selu (torch's constants) and celu (`alpha`,
    /// not 0): `x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale`.
    pub fn parse(ctx: &OpCtx) -> Result<Elu> {
        Ok(match op_of(ctx) {
            "aten.selu" => Elu {
                alpha: 1.673_263_242_354_377_284_817_042_991_671_7,
                scale: 1.050_700_987_355_480_493_419_334_985_294_6,
                input_scale: 1.0,
            },
            "aten.celu" => {
                let alpha = ctx.float_or("alpha", 1.0)?;
                if alpha == 0.0 {
                    return Err(ctx.err("ZeroDivisionError: celu's alpha must not be 0"));
                }
                Elu {
                    alpha,
                    scale: 1.0,
                    input_scale: 1.0 / alpha,
                }
            }
            _ => Elu {
                alpha: ctx.float_or("alpha", 1.0)?,
                scale: ctx.float_or("scale", 1.0)?,
                input_scale: ctx.float_or("input_scale", 1.0)?,
            },
        })
    }
}

impl Softplus {
    pub fn parse(ctx: &OpCtx) -> Result<Softplus> {
        Ok(Softplus {
            beta: ctx.float_or("beta", 1.0)?,
            threshold: ctx.float_or("threshold", 20.0)?,
        })
    }
}

impl Hardshrink {
    pub fn parse(ctx: &OpCtx) -> Result<Hardshrink> {
        Ok(Hardshrink {
            lambd: ctx.float_or("lambd", 0.5)?,
        })
    }
}

impl Softshrink {
    pub fn parse(ctx: &OpCtx) -> Result<Softshrink> {
        let lambd = ctx.float_or("lambd", 0.5)?;
        if lambd < 0.0 {
            return Err(ctx.err(format!(
                "lambda must be greater or equal to 0, but found to be {lambd}"
            )));
        }
        Ok(Softshrink { lambd })
    }
}

/// threshold's `threshold` and `value` (`x <= threshold ? value : x`), as numbers: an int
/// tensor compares them exactly and takes `value` in its own dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ThresholdParams {
    pub threshold: Scalar,
    pub value: Scalar,
}

impl ThresholdParams {
    pub fn parse(ctx: &OpCtx) -> Result<ThresholdParams> {
        Ok(ThresholdParams {
            threshold: ctx.scalar("threshold")?,
            value: ctx.scalar("value")?,
        })
    }
}

/// gelu's `approximate`: false for 'none' (erf), true for 'tanh'.
pub(crate) fn gelu_tanh(ctx: &OpCtx) -> Result<bool> {
    match ctx.opt_str("approximate")?.as_deref() {
        None | Some("none") => Ok(false),
        Some("tanh") => Ok(true),
        Some(other) => Err(ctx.err(format!(
            "approximate must be 'none' or 'tanh', got '{other}'"
        ))),
    }
}
