//! Helpers shared by op families: dimension normalization, broadcasting binary maps,
//! output dtype rules.

use super::OpCtx;
use crate::cpu::{broadcast_shapes, Elem, Tensor};
use crate::error::Result;

/// Normalize a possibly negative dim against `rank` (torch's `maybe_wrap_dim`; a 0-d tensor
/// accepts dims 0 and -1).
pub fn wrap_dim(ctx: &OpCtx, dim: i64, rank: usize) -> Result<usize> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        return Err(ctx.err(format!(
            "dimension {dim} is out of range for a tensor of rank {rank}"
        )));
    }
    Ok(d as usize)
}

/// Broadcast two tensors and apply `f` elementwise in the compute type `T`.
pub fn binary_map<T: Elem, U: Elem>(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<Tensor> {
    let shape = broadcast_shapes(&a.sizes, &b.sizes).ok_or_else(|| {
        ctx.err(format!(
            "shapes {:?} and {:?} cannot be broadcast together",
            a.sizes, b.sizes
        ))
    })?;
    let av = if a.sizes == shape {
        a.to_vec::<T>()
    } else {
        a.expand_to(&shape)?.to_vec::<T>()
    };
    let bv = if b.sizes == shape {
        b.to_vec::<T>()
    } else {
        b.expand_to(&shape)?.to_vec::<T>()
    };
    let out: Vec<U> = av.iter().zip(&bv).map(|(&x, &y)| f(x, y)).collect();
    Ok(Tensor::from_vec(out, &shape))
}

/// Apply `f` elementwise in the compute type `T`, producing `U`.
pub fn unary_map<T: Elem, U: Elem>(a: &Tensor, f: impl Fn(T) -> U) -> Tensor {
    let out: Vec<U> = a.to_vec::<T>().into_iter().map(f).collect();
    Tensor::from_vec(out, &a.sizes)
}

// ---- elementwise family ----
// The elementwise engine (`ops::elementwise::engine`) is usable from any family: `map`,
// `zip_map`, `zip3_map` (broadcasting, contiguous fast paths), `promote`, `output` (in-place
// write-back), `scalar_full`. This is the common float case in one call.

/// `f(a, b)` over broadcast tensors with torch's type promotion of two dimensioned tensors (no
/// 0-d or number rules; use `elementwise::engine::promote` for those), integer and bool inputs
/// promoted to float32. Computes in f32 for f32/f16/bf16 (torch's CPU opmath) and in f64
/// for f64; the result has the promoted dtype.
pub fn elementwise_binary_float(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    f32f: impl Fn(f32, f32) -> f32,
    f64f: impl Fn(f64, f64) -> f64,
) -> Result<Tensor> {
    use super::elementwise::engine::{finish, float_dtype, zip_map};
    let d = float_dtype(crate::cpu::promote::promote_types(a.dtype, b.dtype));
    if d == crate::dtype::DType::F64 {
        zip_map::<f64, f64>(ctx, a, b, f64f)
    } else {
        finish(zip_map::<f32, f32>(ctx, a, b, f32f)?, d)
    }
}

/// One per-dim parameter list (1 value or `nd`), checked and placed in the last `nd` of
/// three (D, H, W) slots (convolution and pooling windows); values past i32::MAX are
/// refused, so the window arithmetic of every backend stays in range.
pub(crate) fn spatial(
    name: &str,
    v: &[i64],
    nd: usize,
    fill: usize,
    min: i64,
) -> std::result::Result<[usize; 3], String> {
    let v: Vec<i64> = if v.len() == 1 {
        vec![v[0]; nd]
    } else {
        v.to_vec()
    };
    if v.len() != nd {
        return Err(format!("{name} must have 1 or {nd} values, got {v:?}"));
    }
    if let Some(bad) = v.iter().find(|&&x| x < min) {
        return Err(format!("{name} must be at least {min}, got {bad}"));
    }
    if let Some(bad) = v.iter().find(|&&x| x > i32::MAX as i64) {
        return Err(format!("{name} {bad} is too large"));
    }
    let mut out = [fill; 3];
    for (i, &x) in v.iter().enumerate() {
        out[3 - nd + i] = x as usize;
    }
    Ok(out)
}
