//! Rules of the pool family: windowed pooling (`pooling_output_shape` with ceil_mode and
//! dilation; `*_with_indices` and adaptive max pooling also return int64 indices), adaptive
//! pooling to an output size, upsampling (`interpolate`: output sizes or scale factors) and
//! `grid_sampler`.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::one;
use crate::ops::OpTable;

/// The input's trailing `nd` spatial dims, checking the rank (`nd+1` unbatched or `nd+2`).
fn spatial_dims(x: &MetaTensor, nd: usize) -> RuleResult<(Vec<usize>, Vec<usize>)> {
    if x.rank() != nd + 1 && x.rank() != nd + 2 {
        return Err(format!(
            "expected a {}-D or {}-D input for a {nd}-D op, got shape {:?}",
            nd + 1,
            nd + 2,
            x.sizes
        ));
    }
    let r = x.rank();
    Ok((x.sizes[..r - nd].to_vec(), x.sizes[r - nd..].to_vec()))
}

fn per_dim(name: &str, v: Vec<i64>, nd: usize, min: i64) -> RuleResult<Vec<usize>> {
    let v = if v.len() == 1 { vec![v[0]; nd] } else { v };
    if v.len() != nd {
        return Err(format!("{name} must have 1 or {nd} values, got {v:?}"));
    }
    if let Some(b) = v.iter().find(|&&x| x < min) {
        return Err(format!("{name} must be at least {min}, got {b}"));
    }
    Ok(v.into_iter().map(|x| x as usize).collect())
}

/// torch's `pooling_output_shape`.
fn pooled(input: usize, k: usize, p: usize, s: usize, d: usize, ceil: bool) -> RuleResult<usize> {
    let num =
        (input + 2 * p) as i64 - (d * (k - 1)) as i64 - 1 + if ceil { s as i64 - 1 } else { 0 };
    let mut out = num.div_euclid(s as i64) + 1;
    if ceil && (out - 1) * s as i64 >= (input + p) as i64 {
        out -= 1;
    }
    if out < 1 {
        return Err(format!(
            "the output size is too small ({out}) for input size {input}, kernel {k}, padding {p}, stride {s}, dilation {d}"
        ));
    }
    Ok(out as usize)
}

fn nd_of(target: &str) -> usize {
    if target.contains("1d") {
        1
    } else if target.contains("3d") {
        3
    } else {
        2
    }
}

fn window_pool(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let t = ctx.target().to_string();
    let nd = nd_of(&t);
    let (lead, ins) = spatial_dims(&x, nd)?;
    let k = per_dim("kernel_size", ctx.ints("kernel_size")?, nd, 1)?;
    let s = match ctx.opt_ints("stride")? {
        Some(v) if !v.is_empty() => per_dim("stride", v, nd, 1)?,
        _ => k.clone(),
    };
    let p = per_dim(
        "padding",
        ctx.opt_ints("padding")?.unwrap_or(vec![0]),
        nd,
        0,
    )?;
    let max = t.starts_with("aten.max_pool");
    let d = if max {
        per_dim(
            "dilation",
            ctx.opt_ints("dilation")?.unwrap_or(vec![1]),
            nd,
            1,
        )?
    } else {
        vec![1; nd]
    };
    let ceil = ctx.bool_or("ceil_mode", false)?;
    let mut out = lead;
    for i in 0..nd {
        let limit = if max {
            ((k[i] - 1) * d[i]).div_ceil(2)
        } else {
            k[i] / 2
        };
        if p[i] > limit {
            return Err(format!(
                "pad should be at most half of effective kernel size, but got pad={}, kernel_size={} and dilation={}",
                p[i], k[i], d[i]
            ));
        }
        out.push(pooled(ins[i], k[i], p[i], s[i], d[i], ceil)?);
    }
    let o = x.with_sizes(out);
    if t.contains("with_indices") {
        let i = o.with_dtype(DType::I64);
        return Ok(vec![MValue::Tensor(o), MValue::Tensor(i)]);
    }
    one(o)
}

fn adaptive(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let t = ctx.target().to_string();
    let nd = nd_of(&t);
    let (mut out, _) = spatial_dims(&x, nd)?;
    let os = ctx.ints("output_size")?;
    let os = per_dim("output_size", os, nd, 0)?;
    out.extend(os);
    let o = x.with_sizes(out);
    if t.starts_with("aten.adaptive_max_pool") {
        let i = o.with_dtype(DType::I64);
        return Ok(vec![MValue::Tensor(o), MValue::Tensor(i)]);
    }
    one(o)
}

fn upsample(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    let nd = nd_of(ctx.target());
    let (mut out, ins) = spatial_dims(&x, nd)?;
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
                &format!("max_pool{k}"),
                &format!("max_pool{k}_with_indices"),
                &format!("avg_pool{k}"),
            ],
            window_pool,
        );
        r.rule_aten(
            &[
                &format!("adaptive_avg_pool{k}"),
                &format!("_adaptive_avg_pool{k}"),
                &format!("adaptive_max_pool{k}"),
            ],
            adaptive,
        );
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
        ],
        upsample,
    );
    r.rule_aten(&["grid_sampler", "grid_sampler_2d"], grid_sampler);
}
