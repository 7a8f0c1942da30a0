//! Rules of the pool family: windowed pooling (`pooling_output_shape` with ceil_mode and
//! dilation; `*_with_indices` and adaptive max pooling also return int64 indices), adaptive
//! pooling to an output size, upsampling (`interpolate`: output sizes or scale factors) and
//! `grid_sampler`.

use super::window::{adaptive_sizes, nd_of as nd_of_name, Planes, PoolParams};
use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::elementwise::meta::one;
use crate::ops::OpTable;

fn nd_of(target: &str) -> RuleResult<usize> {
    let op = target.rsplit_once('.').map_or(target, |(o, _)| o);
    nd_of_name(op).ok_or_else(|| format!("no spatial rank in {target}"))
}

/// `max_pool*`, `avg_pool*`: the window of [`PoolParams`] (shared with both kernels).
pub(super) fn window_pool(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let p = ctx.with_op(PoolParams::parse)?;
    let pl = Planes::of(&x.sizes, p.nd, false)?;
    let w = p.window(&pl)?;
    let o = x.with_sizes(pl.out_sizes(&w.outs));
    if p.with_indices {
        let i = o.with_dtype(DType::I64);
        return Ok(vec![MValue::Tensor(o), MValue::Tensor(i)]);
    }
    one(o)
}

pub(super) fn adaptive(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let t = ctx.target().to_string();
    let pl = Planes::of(&x.sizes, nd_of(&t)?, false)?;
    let outs = adaptive_sizes(&ctx.ints("output_size")?, &pl)?;
    let o = x.with_sizes(pl.out_sizes(&outs));
    if t.starts_with("aten.adaptive_max_pool") {
        let i = o.with_dtype(DType::I64);
        return Ok(vec![MValue::Tensor(o), MValue::Tensor(i)]);
    }
    one(o)
}

fn upsample(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    let nd = nd_of(ctx.target())?;
    let pl = Planes::of(&x.sizes, nd, false)?;
    let (mut out, ins) = (pl.lead.clone(), &pl.ins[3 - nd..]);
    let sizes = ctx.opt_ints("output_size")?.filter(|v| !v.is_empty());
    match (sizes, ctx.opt_floats("scale_factors")?) {
        (Some(v), _) => {
            if v.len() != nd || v.iter().any(|&o| o <= 0) {
                return Err(format!(
                    "output_size must have {nd} positive values, got {v:?}"
                ));
            }
            out.extend(v.iter().map(|&o| o as usize));
        }
        (None, Some(f)) => {
            if f.len() != nd {
                return Err(format!("scale_factors must have {nd} values, got {f:?}"));
            }
            for (i, s) in f.iter().enumerate() {
                let o = (ins[i] as f64 * s).floor();
                if o.is_nan() || o < 1.0 {
                    return Err(format!(
                        "scale factor {s} gives an empty output for input size {}",
                        ins[i]
                    ));
                }
                out.push(o as usize);
            }
        }
        (None, None) => return Err("either output_size or scale_factors must be given".into()),
    }
    one(x.with_sizes(out))
}

fn grid_sampler(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let g = ctx.tensor("grid")?;
    if x.rank() < 3 || g.rank() != x.rank() || g.sizes[0] != x.sizes[0] {
        return Err(format!(
            "grid_sampler expects input [N, C, ...] and grid [N, ..., {}] with the same N, got {:?} and {:?}",
            x.rank() - 2,
            x.sizes,
            g.sizes
        ));
    }
    let mut s = vec![x.sizes[0], x.sizes[1]];
    s.extend_from_slice(&g.sizes[1..g.rank() - 1]);
    one(x.with_sizes(s))
}

pub(crate) fn register(r: &mut OpTable) {
    for k in ["1d", "2d", "3d"] {
        r.rule_aten(
            &[
                &format!("upsample_nearest{k}"),
                &format!("_upsample_nearest_exact{k}"),
            ],
            upsample,
        );
    }
    r.rule_aten(
        &[
            "upsample_linear1d",
            "upsample_bilinear2d",
            "upsample_trilinear3d",
            "upsample_bicubic2d",
            "_upsample_bilinear2d_aa",
            "_upsample_bicubic2d_aa",
        ],
        upsample,
    );
    r.rule_aten(
        &["grid_sampler", "grid_sampler_2d", "grid_sampler_3d"],
        grid_sampler,
    );
}
