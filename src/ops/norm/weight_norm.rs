//! Weight normalization (`nn.utils.weight_norm`, `nn.utils.parametrizations.weight_norm`):
//! `aten._weight_norm(v, g, dim)` = `v * (g / ‖v‖)`, the L2 norm taken over every dim but
//! `dim` (over all of `v` for `dim = -1`), and `aten._weight_norm_interface`, which also
//! returns the norms (shaped as `g`). Written in the op table's one-declaration form:
//! [`WeightNorm`] is parsed and checked once for the CPU kernel and the shape rule alike.

use super::super::reduce::{compute_float, typed, with_real};
use super::super::{OpCtx, OpTable};
use crate::cpu::promote::promote_types;
use crate::cpu::Elem;
use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::runtime::RValue;

pub(crate) fn register(r: &mut OpTable) {
    r.define("aten._weight_norm.default", weight_norm, weight_norm_rule);
    r.define(
        "aten._weight_norm_interface.default",
        weight_norm,
        weight_norm_rule,
    );
}

/// One call: `v` viewed as [outer, size, inner] around the kept dim (size 1 and `v`'s numel
/// as inner for the whole-tensor norm), with one norm (and one `g` value) per kept index.
#[derive(Debug, Clone, PartialEq)]
struct WeightNorm {
    outer: usize,
    size: usize,
    inner: usize,
    /// The dtypes of the result (v's and g's promoted) and of the norms (g's).
    out: DType,
    norm: DType,
}

impl WeightNorm {
    /// `interface`: `_weight_norm_interface`, whose fused kernels take the first or last dim
    /// only (torch asserts the same).
    fn new(
        v: (&[usize], DType),
        g: (&[usize], DType),
        dim: i64,
        interface: bool,
    ) -> std::result::Result<WeightNorm, String> {
        let (vs, gs) = (v.0, g.0);
        for (name, d) in [("v", v.1), ("g", g.1)] {
            if compute_float(d).is_none() {
                return Err(format!("{name} must be a floating point tensor, got {d}"));
            }
        }
        let rank = vs.len();
        let kept = if dim == -1 && !interface {
            None
        } else {
            let wrapped = if dim < 0 { dim + rank as i64 } else { dim };
            if rank == 0 || wrapped < 0 || wrapped >= rank as i64 {
                return Err(format!("dim {dim} is out of range for v of shape {vs:?}"));
            }
            let d = wrapped as usize;
            if interface && d != 0 && d != rank - 1 {
                return Err(format!(
                    "the fused kernel normalizes over the first or last dim only, got dim {dim} for v of shape {vs:?}"
                ));
            }
            Some(d)
        };
        let (outer, size, inner) = match kept {
            None => (1, 1, vs.iter().product()),
            Some(d) => (
                vs[..d].iter().product(),
                vs[d],
                vs[d + 1..].iter().product(),
            ),
        };
        let g_numel: usize = gs.iter().product();
        if g_numel != size {
            return Err(format!(
                "g of shape {gs:?} must have one value per index of the kept dim ({size}) of v {vs:?}"
            ));
        }
        Ok(WeightNorm {
            outer,
            size,
            inner,
            out: promote_types(v.1, g.1),
            norm: g.1,
        })
    }
}

fn interface(target: &str) -> bool {
    target == "aten._weight_norm_interface.default"
}

fn weight_norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let v = ctx.tensor("v")?;
    let g = ctx.tensor("g")?;
    let dim = ctx.int_or("dim", 0)?;
    let p = WeightNorm::new(
        (&v.sizes, v.dtype),
        (&g.sizes, g.dtype),
        dim,
        interface(ctx.target()),
    )
    .map_err(|m| ctx.err(m))?;
    let cf = compute_float(p.out).unwrap_or(DType::F32);
    let (w, norms) = with_real!(cf, R => {
        let mut x = v.to_vec::<R>();
        let gv = g.to_vec::<f64>();
        // Squares summed in f64, in the order of v's elements.
        let mut sums = vec![0f64; p.size];
        for (i, a) in x.iter().enumerate() {
            let a = a.to_f64();
            sums[(i / p.inner) % p.size] += a * a;
        }
        let norms: Vec<f64> = sums.iter().map(|s| s.sqrt()).collect();
        let scale: Vec<R> = (0..p.size).map(|j| R::from_f64(gv[j] / norms[j])).collect();
        for (i, a) in x.iter_mut().enumerate() {
            *a *= scale[(i / p.inner) % p.size];
        }
        (typed(x, &v.sizes, p.out)?, norms)
    });
    debug_assert_eq!(p.outer * p.size * p.inner, v.numel());
    if !interface(ctx.target()) {
        return Ok(vec![w.into()]);
    }
    Ok(vec![w.into(), typed(norms, &g.sizes, p.norm)?.into()])
}

fn weight_norm_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let v = ctx.tensor("v")?;
    let g = ctx.tensor("g")?;
    let dim = ctx.int_or("dim", 0)?;
    let p = WeightNorm::new(
        (&v.sizes, v.dtype),
        (&g.sizes, g.dtype),
        dim,
        interface(ctx.target()),
    )?;
    let mut out = vec![MValue::Tensor(MetaTensor::new(p.out, v.sizes.clone()))];
    if interface(ctx.target()) {
        out.push(MValue::Tensor(MetaTensor::new(p.norm, g.sizes.clone())));
    }
    Ok(out)
}
