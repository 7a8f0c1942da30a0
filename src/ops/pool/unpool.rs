//! The inverse scatters of max pooling: `max_unpool2d` / `max_unpool3d` (each input element
//! goes to the flat position its index names within its output plane; the rest is zero) and
//! `max_pool{2,3}d_with_indices_backward` (each output gradient adds into the input position
//! its index names). Planes are all leading dims; indices are flat within one plane, as
//! max pooling returns them. Writes within a plane happen in element order (a repeated
//! unpool index keeps the last value; backward sums in that order, in the element type).

use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define(
        "aten.max_unpool2d.default",
        |c| unpool(c, 2),
        |c| unpool_rule(c, 2),
    );
    r.define(
        "aten.max_unpool3d.default",
        |c| unpool(c, 3),
        |c| unpool_rule(c, 3),
    );
    r.define(
        "aten.max_pool2d_with_indices_backward.default",
        |c| pool_backward(c, 2),
        backward_rule,
    );
    r.define(
        "aten.max_pool3d_with_indices_backward.default",
        |c| pool_backward(c, 3),
        backward_rule,
    );
}

/// `[leading dims..] + output_size`, checked against the input's rank.
fn unpool_sizes(x: &[usize], out: &[i64], nd: usize) -> std::result::Result<Vec<usize>, String> {
    if x.len() != nd + 1 && x.len() != nd + 2 {
        return Err(format!(
            "input must be {}-D or {}-D, got shape {x:?}",
            nd + 1,
            nd + 2
        ));
    }
    if out.len() != nd || out.iter().any(|&o| o < 0) {
        return Err(format!(
            "output_size must hold {nd} non-negative sizes, got {out:?}"
        ));
    }
    let mut s = x[..x.len() - nd].to_vec();
    s.extend(out.iter().map(|&o| o as usize));
    Ok(s)
}

fn unpool_rule(ctx: &mut MetaCtx, nd: usize) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let s = unpool_sizes(&x.sizes, &ctx.ints("output_size")?, nd)?;
    Ok(vec![MValue::Tensor(x.with_sizes(s))])
}

fn backward_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    Ok(vec![MValue::Tensor(ctx.tensor("self")?)])
}

/// Scatter `values` (planes of `per_in` elements) into zeroed planes of `per_out` elements
/// at `indices`; `accumulate` adds (in `T`), else assigns.
fn scatter_planes<T: Elem>(
    ctx: &OpCtx,
    values: &[T],
    indices: &[i64],
    per_in: usize,
    per_out: usize,
    planes: usize,
    accumulate: bool,
) -> Result<Vec<T>> {
    let mut out = vec![T::default(); planes * per_out];
    for p in 0..planes {
        for k in 0..per_in {
            let j = indices[p * per_in + k];
            if j < 0 || j as usize >= per_out {
                return Err(ctx.err(format!(
                    "found an invalid max index {j} (output volumes are of size {per_out})"
                )));
            }
            let at = p * per_out + j as usize;
            let v = values[p * per_in + k];
            out[at] = if accumulate {
                T::from_f64(out[at].to_f64() + v.to_f64())
            } else {
                v
            };
        }
    }
    Ok(out)
}

fn unpool(ctx: &mut OpCtx, nd: usize) -> Result<Vec<RValue>> {
    let (x, idx) = (ctx.tensor("self")?, ctx.tensor("indices")?);
    let sizes = unpool_sizes(&x.sizes, &ctx.ints("output_size")?, nd).map_err(|m| ctx.err(m))?;
    if idx.sizes != x.sizes {
        return Err(ctx.err(format!(
            "indices {:?} must have the shape of the input {:?}",
            idx.sizes, x.sizes
        )));
    }
    crate::ops::factory::check_numel(ctx, sizes.iter().map(|&s| s as u64).product())?;
    let lead = x.rank() - nd;
    let planes: usize = x.sizes[..lead].iter().product();
    let per_in: usize = x.sizes[lead..].iter().product();
    let per_out: usize = sizes[lead..].iter().product();
    let iv = crate::ops::shape::index_values(ctx, &idx, "indices")?;
    with_dtype!(x.dtype, T => {
        let out = scatter_planes(ctx, &x.to_vec::<T>(), &iv, per_in, per_out, planes, false)?;
        Ok(vec![Tensor::from_vec(out, &sizes).into()])
    }, else Err(ctx.err(format!("dtype {} is not supported", x.dtype))))
}

fn pool_backward(ctx: &mut OpCtx, nd: usize) -> Result<Vec<RValue>> {
    let (g, x, idx) = (
        ctx.tensor("grad_output")?,
        ctx.tensor("self")?,
        ctx.tensor("indices")?,
    );
    if x.rank() < nd || g.rank() != x.rank() || idx.sizes != g.sizes {
        return Err(ctx.err(format!(
            "grad_output {:?} and indices {:?} must match, with the rank of the input {:?}",
            g.sizes, idx.sizes, x.sizes
        )));
    }
    let lead = x.rank() - nd;
    if g.sizes[..lead] != x.sizes[..lead] {
        return Err(ctx.err(format!(
            "grad_output {:?} and the input {:?} differ in their leading dims",
            g.sizes, x.sizes
        )));
    }
    let planes: usize = x.sizes[..lead].iter().product();
    let per_in: usize = g.sizes[lead..].iter().product();
    let per_out: usize = x.sizes[lead..].iter().product();
    let iv = crate::ops::shape::index_values(ctx, &idx, "indices")?;
    with_dtype!(x.dtype, T => {
        let gv = g.to_dtype(x.dtype)?.to_vec::<T>();
        let out = scatter_planes(ctx, &gv, &iv, per_in, per_out, planes, true)?;
        Ok(vec![Tensor::from_vec(out, &x.sizes).into()])
    }, else Err(ctx.err(format!("dtype {} is not supported", x.dtype))))
}
