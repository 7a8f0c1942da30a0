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
        return Err(ctx.err(format!("dimension {dim} is out of range for a tensor of rank {rank}")));
    }
    Ok(d as usize)
}

/// Broadcast two tensors and apply `f` elementwise in the compute type `T`.
pub fn binary_map<T: Elem, U: Elem>(ctx: &OpCtx, a: &Tensor, b: &Tensor, f: impl Fn(T, T) -> U + Sync) -> Result<Tensor> {
    let shape = broadcast_shapes(&a.sizes, &b.sizes)
        .ok_or_else(|| ctx.err(format!("shapes {:?} and {:?} cannot be broadcast together", a.sizes, b.sizes)))?;
    let av = if a.sizes == shape { a.to_vec::<T>() } else { a.expand_to(&shape)?.to_vec::<T>() };
    let bv = if b.sizes == shape { b.to_vec::<T>() } else { b.expand_to(&shape)?.to_vec::<T>() };
    let out: Vec<U> = av.iter().zip(&bv).map(|(&x, &y)| f(x, y)).collect();
    Ok(Tensor::from_vec(out, &shape))
}

/// Apply `f` elementwise in the compute type `T`, producing `U`.
pub fn unary_map<T: Elem, U: Elem>(a: &Tensor, f: impl Fn(T) -> U) -> Tensor {
    let out: Vec<U> = a.to_vec::<T>().into_iter().map(f).collect();
    Tensor::from_vec(out, &a.sizes)
}
