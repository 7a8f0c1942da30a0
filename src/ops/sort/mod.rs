//! Op family: sorting and order statistics. sort / argsort (stable, descending, any dim),
//! msort, topk, kthvalue, median / nanmedian, searchsorted, bucketize.
//!
//! Order follows torch: NaN compares greater than every number (last ascending, first
//! descending) and sorts are stable, so equal keys keep their input order.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;
pub(crate) mod params;
pub(crate) mod unique;

use params::{Search, SortParams, TopK};

use super::reduce::split_at_dim;
use super::util::wrap_dim;
use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::error::Result;
use crate::runtime::RValue;
use crate::with_dtype;
use std::cmp::Ordering;

pub(crate) fn register(r: &mut OpTable) {
    r.define_op("aten.sort", sort, meta::sort);
    r.define_op("aten.argsort", sort, meta::sort);
    r.define("aten.msort.default", sort, meta::sort);
    r.define("aten.topk.default", topk, meta::topk);
    r.define("aten.kthvalue.default", kthvalue, meta::select_along);
    r.define_op("aten.median", median, meta::select_along);
    r.define_op("aten.nanmedian", median, meta::select_along);
    r.define_op("aten.searchsorted", searchsorted, meta::searchsorted);
    r.define_op("aten.bucketize", searchsorted, meta::searchsorted);
    unique::register(r);
}

/// The error of a searchsorted sorter index outside its row (the GPU's faults too).
pub(crate) fn bad_sorter(index: i64, len: impl std::fmt::Display) -> String {
    format!("sorter index {index} is out of range for a sequence of length {len}")
}

#[inline]
#[allow(clippy::eq_op)]
fn is_nan<T: Elem>(x: T) -> bool {
    x != x
}

/// Total order with NaN above everything (NaNs equal to each other).
#[inline]
fn cmp_nan_last<T: Elem>(a: T, b: T) -> Ordering {
    match (is_nan(a), is_nan(b)) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Indices of `lane` in stable sorted order.
fn order<T: Elem>(lane: &[T], descending: bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..lane.len()).collect();
    if descending {
        idx.sort_by(|&i, &j| cmp_nan_last(lane[j], lane[i]));
    } else {
        idx.sort_by(|&i, &j| cmp_nan_last(lane[i], lane[j]));
    }
    idx
}

/// Sort every lane of `x` along `dim`; returns (values, indices) of shape `x.sizes`, where each
/// lane keeps its first `keep` sorted elements (`keep` = lane length for a full sort).
fn sort_lanes(x: &Tensor, dim: usize, descending: bool, keep: usize) -> Result<(Tensor, Tensor)> {
    let (outer, n, inner) = split_at_dim(&x.sizes, dim);
    let mut sizes = x.sizes.clone();
    if !sizes.is_empty() {
        sizes[dim] = keep;
    }
    with_dtype!(x.dtype, T => {
        let v = x.to_vec::<T>();
        let mut vals = Vec::with_capacity(outer * keep * inner);
        let mut idx = vec![0i64; outer * keep * inner];
        vals.resize(outer * keep * inner, T::default());
        let mut lane = Vec::with_capacity(n);
        for o in 0..outer {
            for i in 0..inner {
                lane.clear();
                lane.extend((0..n).map(|j| v[(o * n + j) * inner + i]));
                for (r, &j) in order(&lane, descending).iter().take(keep).enumerate() {
                    let at = (o * keep + r) * inner + i;
                    vals[at] = lane[j];
                    idx[at] = j as i64;
                }
            }
        }
        Ok((Tensor::from_vec(vals, &sizes), Tensor::from_vec(idx, &sizes)))
    }, else Err(crate::error::Error::op("sort", format!("dtype {} is not supported", x.dtype))))
}

/// sort (.default and .stable), argsort (.default and .stable), msort.
fn sort(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let t = ctx.target();
    let msort = t.starts_with("aten.msort");
    let SortParams { dim, descending } = SortParams::parse(ctx)?;
    let dim = wrap_dim(ctx, dim, x.rank())?;
    let n = x.sizes.get(dim).copied().unwrap_or(1);
    let (vals, idx) = sort_lanes(&x, dim, descending, n)?;
    Ok(if msort {
        vec![vals.into()]
    } else if t.starts_with("aten.argsort") {
        vec![idx.into()]
    } else {
        vec![vals.into(), idx.into()]
    })
}

fn topk(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let TopK { k, dim, largest } = TopK::parse(ctx)?;
    let dim = wrap_dim(ctx, dim, x.rank())?;
    let n = x.sizes.get(dim).copied().unwrap_or(1);
    if k < 0 || k as usize > n {
        return Err(ctx.err(format!(
            "selected index k = {k} out of range for a dim of size {n}"
        )));
    }
    // A 0-d input is its own top-k for k = 0 as for k = 1 (torch returns it either way).
    let k = if x.rank() == 0 { 1 } else { k as usize };
    // `sorted=False` leaves the order unspecified in torch; sorted order is one valid answer.
    let (vals, idx) = sort_lanes(&x, dim, largest, k)?;
    Ok(vec![vals.into(), idx.into()])
}

/// Drop `dim` from a [.., 1, ..] result unless keepdim.
fn squeeze_dim(t: Tensor, dim: usize, keepdim: bool) -> Tensor {
    if keepdim || t.rank() == 0 {
        return t;
    }
    let mut sizes = t.sizes.clone();
    sizes.remove(dim);
    let strides = crate::tensor::contiguous_strides(&sizes);
    t.view_with(sizes, strides, t.offset)
}

fn kthvalue(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let k = ctx.int("k")?;
    let dim = wrap_dim(ctx, ctx.int_or("dim", -1)?, x.rank())?;
    let keepdim = ctx.bool_or("keepdim", false)?;
    let n = x.sizes.get(dim).copied().unwrap_or(1);
    if k < 1 || k as usize > n {
        return Err(ctx.err(format!(
            "selected number k = {k} out of range for a dim of size {n}"
        )));
    }
    let (vals, idx) = sort_lanes(&x, dim, false, k as usize)?;
    // The k-th element is the last one kept: select it along `dim`.
    let pick = |t: Tensor| -> Tensor {
        if t.rank() == 0 {
            return t;
        }
        let mut sizes = t.sizes.clone();
        sizes[dim] = 1;
        let off = t.offset + (k as usize - 1) * t.strides[dim];
        let v = t.view_with(sizes, t.strides.clone(), off).contiguous();
        squeeze_dim(v, dim, keepdim)
    };
    Ok(vec![pick(vals).into(), pick(idx).into()])
}

/// median / nanmedian: the lower median ((n - 1) / 2 in sorted order). median is NaN (at the
/// first NaN's index) when a lane holds a NaN; nanmedian ignores NaNs.
fn median(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let nan_ignore = ctx.target().starts_with("aten.nanmedian");
    let dim = ctx.opt_int("dim")?;
    let dim_given = dim.is_some();
    let keepdim = ctx.bool_or("keepdim", false)?;
    let (src, dim) = match dim {
        Some(d) => (x.clone(), wrap_dim(ctx, d, x.rank())?),
        None => {
            let c = x.contiguous();
            (c.view_with(vec![x.numel()], vec![1], c.offset), 0)
        }
    };
    let n = src.sizes.get(dim).copied().unwrap_or(1);
    if n == 0 && dim_given {
        return Err(ctx.err(format!(
            "median(): Expected reduction dim {dim} to have non-zero size."
        )));
    }
    let (outer, _, inner) = split_at_dim(&src.sizes, dim);
    let mut out_sizes = src.sizes.clone();
    if !out_sizes.is_empty() {
        out_sizes[dim] = 1;
    }
    let (vals, idx) = with_dtype!(src.dtype, T => {
        let v = src.to_vec::<T>();
        let mut vals = Vec::with_capacity(outer * inner);
        let mut idx = Vec::with_capacity(outer * inner);
        let mut lane = Vec::with_capacity(n);
        for o in 0..outer {
            for i in 0..inner {
                lane.clear();
                lane.extend((0..n).map(|j| v[(o * n + j) * inner + i]));
                let ord = order(&lane, false);
                let nans = lane.iter().filter(|&&a| is_nan(a)).count();
                let (val, at) = if n == 0 {
                    (T::from_f64(f64::NAN), 0)
                } else if !nan_ignore && nans > 0 {
                    let first = lane.iter().position(|&a| is_nan(a)).unwrap_or(0);
                    (lane[first], first)
                } else if nans == n {
                    (lane[ord[0]], ord[0])
                } else {
                    let j = ord[(n - nans - 1) / 2];
                    (lane[j], j)
                };
                vals.push(val);
                idx.push(at as i64);
            }
        }
        (Tensor::from_vec(vals, &out_sizes), Tensor::from_vec(idx, &out_sizes))
    }, else return Err(ctx.err(format!("dtype {} is not supported", src.dtype))));
    if !dim_given {
        // The full reduction returns only the value, as a 0-d tensor.
        return Ok(vec![Tensor::from_vec(vals.to_vec::<f64>(), &[])
            .to_dtype(x.dtype)?
            .into()]);
    }
    Ok(vec![
        squeeze_dim(vals, dim, keepdim).into(),
        squeeze_dim(idx, dim, keepdim).into(),
    ])
}

/// torch's binary searches: the first position whose value is >= `v` (lower bound) or > `v`
/// (right / upper bound); a NaN `v` goes past every element, as NaN sorts last.
fn bound(seq: &[f64], v: f64, right: bool) -> usize {
    let (mut lo, mut hi) = (0, seq.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let m = seq[mid];
        // Lower bound moves right past m < v, upper bound also past m == v; an unordered
        // (NaN) comparison moves right, so a NaN value lands after every number.
        let go_right = match m.partial_cmp(&v) {
            Some(Ordering::Less) | None => true,
            Some(Ordering::Equal) => right,
            Some(Ordering::Greater) => false,
        };
        if go_right {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// searchsorted (.Tensor / .Scalar) and bucketize (.Tensor / .Scalar; boundaries are 1-D).
fn searchsorted(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let bucketize = ctx.target().starts_with("aten.bucketize");
    let seq = if bucketize {
        ctx.tensor("boundaries")?
    } else {
        ctx.tensor("sorted_sequence")?
    };
    let values = match ctx.arg("self").map(|a| ctx.tensor_of(a, "self")) {
        Some(Ok(t)) => t,
        _ => Tensor::scalar(ctx.scalar("self")?.as_f64()),
    };
    let sorter = if bucketize {
        None
    } else {
        ctx.opt_tensor("sorter")?
    };
    let Search { right, out_dtype } = Search::parse(ctx)?;
    if seq.rank() == 0 {
        return Err(ctx.err("boundaries tensor should have a positive rank, got a 0-d tensor"));
    }
    let m = seq.sizes[seq.rank() - 1];
    let rows = seq.numel() / m.max(1);
    let one_d = seq.rank() == 1;
    if !one_d
        && (values.rank() != seq.rank()
            || values.sizes[..values.rank() - 1] != seq.sizes[..seq.rank() - 1])
    {
        return Err(ctx.err(format!(
            "boundaries tensor {:?} should be 1 dimensional or its first N-1 dimensions should match the input's {:?}",
            seq.sizes, values.sizes
        )));
    }
    let mut s = seq.to_vec::<f64>();
    if let Some(sorter) = &sorter {
        if sorter.sizes != seq.sizes {
            return Err(ctx.err(format!(
                "sorter {:?} must have the same shape as the sorted sequence {:?}",
                sorter.sizes, seq.sizes
            )));
        }
        // Apply the sorter once: each row becomes its sorted arrangement.
        let order = sorter.to_vec::<i64>();
        let raw = s.clone();
        for r in 0..rows {
            for j in 0..m {
                let o = order[r * m + j];
                if o < 0 || o as usize >= m {
                    return Err(ctx.err(bad_sorter(o, m)));
                }
                s[r * m + j] = raw[r * m + o as usize];
            }
        }
    }
    let v = values.to_vec::<f64>();
    let per_row = if one_d {
        v.len().max(1)
    } else {
        values.sizes.last().copied().unwrap_or(1).max(1)
    };
    let res: Vec<i64> = v
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let r = if one_d { 0 } else { i / per_row };
            bound(&s[r * m..(r + 1) * m], x, right) as i64
        })
        .collect();
    Ok(vec![Tensor::from_vec(res, &values.sizes)
        .to_dtype(out_dtype)?
        .into()])
}
