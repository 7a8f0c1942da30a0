//! The scalar parameters of every normalization (batch norm in all its exported forms,
//! instance, layer, group and rms norm), parsed once from the node with torch's defaults.
//! The CPU kernels (`mod.rs`), the shape rules (`meta.rs`) and the GPU kernels
//! (`src/gpu/kernels/norm.rs`, `reduce.rs`) all take them from here; the normalized-shape
//! check is [`super::Normalized`].

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::OpCtx;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct NormParams {
    /// Batch norm: normalize with the batch's statistics and update the running ones
    /// (`training`; never for `_native_batch_norm_legit_no_training`).
    pub training: bool,
    /// The running statistics' update weight (0.1).
    pub momentum: f64,
    /// Added to the variance: required by the batch and instance norms, 1e-5 for layer and
    /// group norm, the compute type's machine epsilon for rms norm.
    pub eps: f64,
    /// instance_norm: batch statistics (true) or the running ones.
    pub use_input_stats: bool,
    /// Group norm's groups (`num_groups`, `group` for native_group_norm); 0 for the others.
    pub groups: i64,
}

impl NormParams {
    /// The parameters of the node, whose input has dtype `input` (rms norm's default eps
    /// depends on it).
    pub fn parse(ctx: &OpCtx, input: DType) -> Result<NormParams> {
        let t = ctx.target();
        let op = t.split('.').nth(1).unwrap_or_default();
        let eps = match op {
            "rms_norm" | "_fused_rms_norm" => ctx
                .opt_float("eps")?
                .unwrap_or_else(|| default_rms_eps(input)),
            "layer_norm" | "native_layer_norm" | "group_norm" | "native_group_norm" => {
                ctx.float_or("eps", 1e-5)?
            }
            _ => ctx.float("eps")?,
        };
        let groups = match op {
            "native_group_norm" => ctx.int("group")?,
            "group_norm" => ctx.int("num_groups")?,
            _ => 0,
        };
        Ok(NormParams {
            // `_batch_norm_with_update` always normalizes with the batch's statistics.
            training: op.contains("batch_norm")
                && !t.contains("no_training")
                && (op.starts_with("_batch_norm_with_update") || ctx.bool_or("training", false)?),
            momentum: ctx.float_or("momentum", 0.1)?,
            eps,
            use_input_stats: ctx.bool_or("use_input_stats", true)?,
            groups,
        })
    }
}

/// rms_norm's default epsilon: the machine epsilon of the compute type (f32 for f16/bf16/f32,
/// as torch's `_fused_rms_norm` picks it), not of the input dtype.
fn default_rms_eps(d: DType) -> f64 {
    if d == DType::F64 {
        f64::EPSILON
    } else {
        f32::EPSILON as f64
    }
}
