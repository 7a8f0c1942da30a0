//! Op family: shape. Views (`view`, `permute`, `slice`, `expand`...) return tensors that share
//! the input's storage, exactly where torch makes no copy, so in-place ops of the training IR
//! write through; copies (`cat`, `pad`, `flip`, `repeat`...) build fresh contiguous tensors.
//!
//! `geometry.rs` computes view sizes/strides as torch does; `view.rs` holds the view kernels
//! and the ops that split a tensor into views; `copy.rs` the ops that build new tensors
//! (`pad.rs` the paddings, with the one [`pad::PadParams`] every backend reads); the
//! helpers here gather elements by storage offset and are shared with the index family.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;
mod meta_copy;

pub(crate) mod copy;
pub(crate) mod geometry;
pub(crate) mod pad;
pub(crate) mod remap;
mod resize;
mod view;

pub(super) use copy::cat_t;
pub(super) use geometry::{reshape_t, select_t};

use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::error::Result;
use crate::runtime::RValue;
use crate::with_dtype;

pub(crate) fn register(r: &mut OpTable) {
    view::register(r);
    copy::register(r);
    pad::register(r);
    resize::register(r);
}

pub(super) fn one(t: Tensor) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Tensor(t)])
}

/// Row-major iteration over every multi-index of `sizes` (nothing for an empty shape with a
/// zero dimension; once for a 0-d shape).
pub(super) fn for_each_index(sizes: &[usize], mut f: impl FnMut(&[usize])) {
    if sizes.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; sizes.len()];
    loop {
        f(&idx);
        let mut d = sizes.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// A new contiguous tensor of `src`'s dtype and shape `sizes` whose elements are read from
/// `src`'s storage at `offs` (`None` = `fill`, converted to the dtype). Offsets come from
/// validated views, so they lie inside the storage; a bad one is still an error, not a panic.
pub(super) fn gather_storage(
    src: &Tensor,
    offs: &[Option<usize>],
    fill: f64,
    sizes: &[usize],
) -> Result<Tensor> {
    let d = src.read();
    with_dtype!(src.dtype, T => {
        let s = T::slice(&d).ok_or_else(|| crate::error::Error::op("cpu", "storage dtype differs from the tensor's"))?;
        // In the tensor's elements (a real view of complex storage has twice as many).
        let len = s.len();
        let fill_v = crate::cpu::cast::<f64, T>(fill);
        let mut out = Vec::with_capacity(offs.len());
        for o in offs {
            out.push(match o {
                Some(o) if *o < len => s[*o],
                Some(o) => return Err(crate::error::Error::op("cpu", format!("storage offset {o} is outside a storage of {len} elements"))),
                None => fill_v,
            });
        }
        Ok(Tensor::from_vec(out, sizes))
    }, else Err(crate::error::Error::op("cpu", format!("dtype {} is not supported", src.dtype))))
}

/// A tensor of `sizes` made of `run` consecutive storage elements of `src` from each of
/// `starts` in turn ([`gather_storage`] for rows that are contiguous, copied whole).
pub(super) fn gather_runs(
    src: &Tensor,
    starts: &[usize],
    run: usize,
    sizes: &[usize],
) -> Result<Tensor> {
    let d = src.read();
    with_dtype!(src.dtype, T => {
        let s = T::slice(&d).ok_or_else(|| crate::error::Error::op("cpu", "storage dtype differs from the tensor's"))?;
        // In the tensor's elements (a real view of complex storage has twice as many).
        let len = s.len();
        let mut out = Vec::with_capacity(starts.len() * run);
        for &o in starts {
            match s.get(o..o.saturating_add(run)) {
                Some(r) => out.extend_from_slice(r),
                None => return Err(crate::error::Error::op("cpu", format!("storage run {o}+{run} is outside a storage of {len} elements"))),
            }
        }
        Ok(Tensor::from_vec(out, sizes))
    }, else Err(crate::error::Error::op("cpu", format!("dtype {} is not supported", src.dtype))))
}

/// A fresh contiguous copy (never shares storage with `t`).
pub(super) fn fresh(t: &Tensor) -> Result<Tensor> {
    t.to_dtype(t.dtype)
}

/// The error of an index outside `-size..size` ([`wrap_index`]; the GPU's faults too).
pub(crate) fn out_of_range(index: i64, dim: usize, size: impl std::fmt::Display) -> String {
    format!("index {index} is out of range for dimension {dim} with size {size}")
}

/// The error of an index outside `0..size` ([`bounded_index`]; the GPU's faults too).
pub(crate) fn out_of_bounds(index: i64, dim: usize, size: impl std::fmt::Display) -> String {
    format!("index {index} is out of bounds for dimension {dim} with size {size}")
}

/// Wrap a possibly negative index into `0..size`, or an error naming the dimension.
pub(super) fn wrap_index(ctx: &OpCtx, index: i64, size: usize, dim: usize) -> Result<usize> {
    let n = size as i64;
    if index < -n || index >= n {
        return Err(ctx.err(out_of_range(index, dim, size)));
    }
    Ok(if index < 0 {
        (index + n) as usize
    } else {
        index as usize
    })
}

/// Check an index against `0..size` without wrapping (gather, scatter, index_select,
/// index_add, index_copy and embedding refuse negative indices in torch).
pub(super) fn bounded_index(ctx: &OpCtx, index: i64, size: usize, dim: usize) -> Result<usize> {
    if index < 0 || index >= size as i64 {
        return Err(ctx.err(out_of_bounds(index, dim, size)));
    }
    Ok(index as usize)
}

/// Every element of an index tensor as i64 (any integer dtype).
pub(super) fn index_values(ctx: &OpCtx, t: &Tensor, name: &str) -> Result<Vec<i64>> {
    if t.dtype.is_float() || t.dtype == crate::DType::Bool {
        return Err(ctx.err(format!(
            "'{name}' must be an integer tensor, got {}",
            t.dtype
        )));
    }
    Ok(t.to_vec::<i64>())
}
