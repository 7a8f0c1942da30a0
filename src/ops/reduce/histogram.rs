//! Histograms: `histc`, `histogram` (bin count or bin edges), `histogramdd` (and the core
//! ATen pieces it decomposes into: `_histogramdd_bin_edges`, `_histogramdd_from_bin_cts`,
//! `_histogramdd_from_bin_tensors`) and `bincount`.
//!
//! One counting loop serves them all, in torch's arithmetic (its `HistogramKernel.cpp`): the
//! bin of an element comes from linear interpolation between the outer edges, computed in the
//! input's dtype (rounded at every step), then, for `histogram`/`histogramdd` with a bin
//! count, corrected by a search among the neighbouring edges; with edge tensors it is a binary
//! search. The last bin includes its right edge; elements outside the edges (and NaN) are
//! skipped. Counts accumulate in the input's dtype.

use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.histc.default", histc, histc_rule);
    r.define("aten.histogram.bin_ct", histogram, histogram_rule);
    r.define("aten.histogram.bins_tensor", histogram, histogram_rule);
    r.define("aten.histogramdd.default", histogramdd, histogramdd_rule);
    r.define("aten.histogramdd.int_bins", histogramdd, histogramdd_rule);
    r.define(
        "aten.histogramdd.TensorList_bins",
        histogramdd,
        histogramdd_rule,
    );
    r.define(
        "aten._histogramdd_bin_edges.default",
        histogramdd,
        histogramdd_rule,
    );
    r.define(
        "aten._histogramdd_from_bin_cts.default",
        histogramdd,
        histogramdd_rule,
    );
    r.define(
        "aten._histogramdd_from_bin_tensors.default",
        histogramdd,
        histogramdd_rule,
    );
    r.define("aten.bincount.default", bincount, bincount_rule);
}

/// How an element finds its bin.
#[derive(Clone, Copy, PartialEq)]
enum Algo {
    /// `std::upper_bound` over all edges (edges given as tensors).
    BinarySearch,
    /// Interpolation between the outer edges (histc).
    Linear,
    /// Interpolation, then a search among the three neighbouring edges (bin counts).
    LinearLocalSearch,
}

/// Round `v` to the element type (torch computes in the input's dtype).
#[inline]
fn r<T: Elem>(v: f64) -> f64 {
    T::from_f64(v).to_f64()
}

/// `torch.linspace(start, end, steps)` in dtype `T` (CPU kernel arithmetic).
fn linspace<T: Elem>(start: f64, end: f64, steps: usize) -> Vec<f64> {
    let (s, e) = (r::<T>(start), r::<T>(end));
    if steps == 1 {
        return vec![s];
    }
    let step = r::<T>((e - s) / (steps - 1) as f64);
    let half = steps / 2;
    (0..steps)
        .map(|i| {
            if i < half {
                r::<T>(s + r::<T>(step * i as f64))
            } else {
                r::<T>(e - r::<T>(step * (steps - i - 1) as f64))
            }
        })
        .collect()
}

/// C++'s `std::upper_bound` over `e[lo..hi]`: the first position whose edge is greater than
/// `x`, probing as it does (so that edges out of order bin as in torch).
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn upper_bound(e: &[f64], lo: usize, hi: usize, x: f64) -> usize {
    let (mut first, mut count) = (lo, hi.saturating_sub(lo));
    while count > 0 {
        let step = count / 2;
        let it = first + step;
        if !(x < e[it]) {
            first = it + 1;
            count -= step + 1;
        } else {
            count = step;
        }
    }
    first
}

/// Count the rows of `data` (`m` rows of `edges.len()` coordinates) into the bins the
/// `edges` of each dimension make; returns the row-major histogram.
fn count<T: Elem>(
    data: &[T],
    edges: &[Vec<f64>],
    algo: Algo,
    weight: Option<&[T]>,
    density: bool,
) -> Vec<T> {
    let n = edges.len();
    let bins: Vec<usize> = edges.iter().map(|e| e.len().saturating_sub(1)).collect();
    let mut strides = vec![1usize; n];
    for d in (0..n.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * bins[d + 1];
    }
    let total: usize = bins.iter().product();
    let mut hist = vec![0f64; total];
    if total == 0 {
        return vec![];
    }
    let rows = data.len().checked_div(n).unwrap_or(0);
    'rows: for i in 0..rows {
        let mut at = 0;
        for (d, e) in edges.iter().enumerate() {
            let x = data[i * n + d].to_f64();
            let (left, right) = (e[0], e[e.len() - 1]);
            if !(x >= left && x <= right) {
                continue 'rows;
            }
            let last = e.len() - 1;
            let upper = |lo: usize, hi: usize| upper_bound(e, lo, hi, x);
            let mut pos = match algo {
                Algo::BinarySearch => upper(0, e.len()) as i64 - 1,
                Algo::Linear | Algo::LinearLocalSearch => {
                    let p = r::<T>(r::<T>(r::<T>(x - left) * last as f64) / r::<T>(right - left))
                        as i64;
                    if algo == Algo::LinearLocalSearch {
                        let lo = (p - 1).max(0) as usize;
                        let hi = ((p + 2).max(0) as usize).min(e.len());
                        upper(lo.min(hi), hi) as i64 - 1
                    } else {
                        p
                    }
                }
            };
            if pos == last as i64 {
                pos -= 1;
            }
            let pos = pos.clamp(0, bins[d] as i64 - 1) as usize;
            at += pos * strides[d];
        }
        let w = weight.map_or(1.0, |w| w[i].to_f64());
        hist[at] = r::<T>(hist[at] + w);
    }
    if density {
        let sum: f64 = hist.iter().sum();
        let sum = r::<T>(sum);
        for h in hist.iter_mut() {
            *h = r::<T>(*h / sum);
        }
        for (d, e) in edges.iter().enumerate() {
            for (k, h) in hist.iter_mut().enumerate() {
                let b = (k / strides[d]) % bins[d];
                *h = r::<T>(*h / r::<T>(e[b + 1] - e[b]));
            }
        }
    }
    hist.into_iter().map(T::from_f64).collect()
}

/// The outer edges of each dimension: `range` (pairs), else the data's extrema, widened by
/// 0.5 either side when empty (numpy's rule, which torch follows).
fn outer_edges<T: Elem>(
    ctx: &OpCtx,
    data: &[T],
    n: usize,
    range: Option<&[f64]>,
) -> Result<Vec<(f64, f64)>> {
    let mut out = vec![(0.0, 0.0); n];
    if let Some(r) = range {
        if r.len() != 2 * n {
            return Err(ctx.err(format!(
                "'range' must hold {} numbers (a min and a max for each of the {n} dimensions), got {}",
                2 * n,
                r.len()
            )));
        }
        for (d, o) in out.iter_mut().enumerate() {
            *o = (r[2 * d], r[2 * d + 1]);
        }
    } else if !data.is_empty() {
        for (d, o) in out.iter_mut().enumerate() {
            let col = data.iter().skip(d).step_by(n).map(|x| x.to_f64());
            let (lo, hi) = col.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                if x.is_nan() || lo.is_nan() {
                    (f64::NAN, f64::NAN)
                } else {
                    (lo.min(x), hi.max(x))
                }
            });
            *o = (lo, hi);
        }
    }
    for (d, o) in out.iter_mut().enumerate() {
        if !(o.0.is_finite() && o.1.is_finite()) {
            return Err(ctx.err(format!(
                "range of [{}, {}] in dimension {d} is not finite",
                o.0, o.1
            )));
        }
        if o.0 > o.1 {
            return Err(ctx.err(format!(
                "min {} must be at most max {} in dimension {d}",
                o.0, o.1
            )));
        }
        if o.0 == o.1 {
            *o = (o.0 - 0.5, o.1 + 0.5);
        }
    }
    Ok(out)
}

fn float_input(ctx: &OpCtx, t: &Tensor) -> Result<()> {
    if !t.dtype.is_float() {
        return Err(ctx.err(format!(
            "the input must be a floating-point tensor, got {}",
            t.dtype
        )));
    }
    Ok(())
}

fn check_bins(ctx: &OpCtx, bins: &[i64]) -> Result<Vec<usize>> {
    let mut total: u64 = 1;
    let out = bins
        .iter()
        .map(|&b| {
            if b <= 0 {
                return Err(ctx.err(format!("bins must be positive, got {b}")));
            }
            total = total.saturating_mul(b as u64);
            Ok(b as usize)
        })
        .collect::<Result<Vec<_>>>()?;
    crate::ops::factory::check_numel(ctx, total)?;
    Ok(out)
}

/// `histc(self, bins=100, min=0, max=0)`: equal bins over [min, max] (the data's extrema
/// when min == max), elements outside ignored; the result has self's dtype.
fn histc(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    float_input(ctx, &t)?;
    let bins = check_bins(ctx, &[ctx.int_or("bins", 100)?])?[0];
    let (mut lo, mut hi) = (ctx.float_or("min", 0.0)?, ctx.float_or("max", 0.0)?);
    with_dtype!(t.dtype, T => {
        let data = t.to_vec::<T>();
        if lo == hi && !data.is_empty() {
            // The data's extrema (NaN when it holds a NaN: refused below, as torch).
            (lo, hi) = data.iter().map(|x| x.to_f64()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                if x.is_nan() || a.is_nan() { (f64::NAN, f64::NAN) } else { (a.min(x), b.max(x)) }
            });
        }
        let (lo, hi) = histc_range(lo, hi).map_err(|e| ctx.err(e))?;
        let edges = linspace::<T>(lo, hi, bins + 1);
        let h = count(&data, &[edges], Algo::Linear, None, false);
        Ok(vec![Tensor::from_vec(h, &[bins]).into()])
    }, else Err(ctx.err(format!("dtype {} is not supported", t.dtype))))
}

/// histc's outer edges from [min, max] (the data's extrema when the caller's were equal):
/// widened by 1 each way when equal, torch's errors for a range not finite (a NaN or an
/// infinity in the data) or reversed. The GPU path (`src/gpu/dynamic.rs`) shares it.
pub(crate) fn histc_range(lo: f64, hi: f64) -> std::result::Result<(f64, f64), String> {
    let (lo, hi) = if lo == hi {
        (lo - 1.0, hi + 1.0)
    } else {
        (lo, hi)
    };
    if !(lo.is_finite() && hi.is_finite()) {
        return Err(format!("range of [{lo}, {hi}] is not finite"));
    }
    if lo >= hi {
        return Err("max must be larger than min".into());
    }
    Ok((lo, hi))
}

fn histc_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let bins = ctx.int_or("bins", 100)?;
    let bins = usize::try_from(bins).map_err(|_| format!("bins must be positive, got {bins}"))?;
    Ok(vec![MValue::Tensor(t.with_sizes(vec![bins]))])
}

/// The data as `[rows, n]` and the per-row weights, for histogram (n = 1) and histogramdd
/// (n = the last dim).
fn rows_of(ctx: &OpCtx, t: &Tensor, dd: bool) -> Result<(usize, Option<Tensor>)> {
    let n = if dd {
        if t.rank() < 2 {
            return Err(ctx.err(format!(
                "the input must have at least 2 dimensions, got shape {:?}",
                t.sizes
            )));
        }
        t.sizes[t.rank() - 1]
    } else {
        1
    };
    let w = ctx.opt_tensor("weight")?;
    if let Some(w) = &w {
        let expect: Vec<usize> = if dd {
            t.sizes[..t.rank() - 1].to_vec()
        } else {
            t.sizes.clone()
        };
        if w.sizes != expect || w.dtype != t.dtype {
            return Err(ctx.err(format!(
                "weight must be a {} tensor of shape {expect:?}, got {} {:?}",
                t.dtype, w.dtype, w.sizes
            )));
        }
    }
    Ok((n, w))
}

/// Edges from a bin count per dimension, or from edge tensors.
fn edges_of<T: Elem>(
    ctx: &OpCtx,
    data: &[T],
    n: usize,
    bins: &Bins,
) -> Result<(Vec<Vec<f64>>, Algo)> {
    match bins {
        Bins::Counts(c) => {
            if c.len() != n {
                return Err(ctx.err(format!("{} bin counts given for {n} dimensions", c.len())));
            }
            let range = ctx.opt_floats("range")?;
            let outer = outer_edges(ctx, data, n, range.as_deref())?;
            let edges = outer
                .iter()
                .zip(c)
                .map(|(&(lo, hi), &k)| linspace::<T>(lo, hi, k + 1))
                .collect();
            Ok((edges, Algo::LinearLocalSearch))
        }
        Bins::Edges(ts) => {
            if ts.len() != n {
                return Err(ctx.err(format!(
                    "{} bin-edge tensors given for {n} dimensions",
                    ts.len()
                )));
            }
            let edges = ts
                .iter()
                .map(|e| {
                    if e.rank() != 1 || e.numel() < 1 || e.dtype != T::DTYPE {
                        return Err(ctx.err(format!(
                            "bin edges must be 1-D {} tensors with at least one element, got {} {:?}",
                            T::DTYPE, e.dtype, e.sizes
                        )));
                    }
                    // Not checked for order, as torch: unordered edges bin by the same
                    // binary search.
                    Ok(e.to_vec::<T>().iter().map(|x| x.to_f64()).collect())
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((edges, Algo::BinarySearch))
        }
    }
}

enum Bins {
    Counts(Vec<usize>),
    Edges(Vec<Tensor>),
}

fn bins_arg(ctx: &OpCtx, n: usize) -> Result<Bins> {
    match ctx.arg("bins") {
        Some(crate::program::Arg::Tensor(_)) => Ok(Bins::Edges(vec![ctx.tensor("bins")?])),
        Some(crate::program::Arg::Tensors(_)) => Ok(Bins::Edges(ctx.tensors("bins")?)),
        Some(_) => {
            let mut c = ctx.ints("bins")?;
            if c.len() == 1 && n > 1 && ctx.target().ends_with(".int_bins") {
                c = vec![c[0]; n];
            }
            Ok(Bins::Counts(check_bins(ctx, &c)?))
        }
        None => Ok(Bins::Counts(check_bins(ctx, &[100])?)),
    }
}

/// `histogram` and every `histogramdd` form; which outputs come back depends on the target.
fn histogramdd_impl(ctx: &OpCtx, dd: bool) -> Result<(Tensor, Vec<Tensor>)> {
    let t = ctx.tensor("self")?;
    float_input(ctx, &t)?;
    let (n, w) = rows_of(ctx, &t, dd)?;
    let bins = bins_arg(ctx, n)?;
    let density = ctx.bool_or("density", false)?;
    with_dtype!(t.dtype, T => {
        let data = t.to_vec::<T>();
        let (edges, algo) = edges_of::<T>(ctx, &data, n, &bins)?;
        let wv = w.map(|w| w.to_vec::<T>());
        let h = count(&data, &edges, algo, wv.as_deref(), density);
        let shape: Vec<usize> = edges.iter().map(|e| e.len() - 1).collect();
        let edge_ts = edges
            .into_iter()
            .map(|e| {
                let k = e.len();
                Tensor::from_vec(e.into_iter().map(T::from_f64).collect::<Vec<T>>(), &[k])
            })
            .collect();
        Ok((Tensor::from_vec(h, &shape), edge_ts))
    }, else Err(ctx.err(format!("dtype {} is not supported", t.dtype))))
}

fn histogram(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (h, mut e) = histogramdd_impl(ctx, false)?;
    Ok(vec![h.into(), e.remove(0).into()])
}

fn histogramdd(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (h, e) = histogramdd_impl(ctx, true)?;
    let t = ctx.target();
    Ok(if t.starts_with("aten._histogramdd_bin_edges") {
        vec![RValue::Tensors(e)]
    } else if t.starts_with("aten._histogramdd_from") {
        vec![h.into()]
    } else {
        vec![h.into(), RValue::Tensors(e)]
    })
}

/// The histogram's shape and the edges' lengths of either form.
fn bins_meta(ctx: &MetaCtx, n: usize) -> RuleResult<Vec<usize>> {
    match ctx.arg("bins") {
        Some(crate::program::Arg::Tensor(_)) => {
            Ok(vec![ctx.tensor("bins")?.numel().saturating_sub(1)])
        }
        Some(crate::program::Arg::Tensors(_)) => Ok(ctx
            .tensors("bins")?
            .iter()
            .map(|e| e.numel().saturating_sub(1))
            .collect()),
        Some(_) => {
            let mut c = ctx.ints("bins")?;
            if c.len() == 1 && n > 1 && ctx.target().ends_with(".int_bins") {
                c = vec![c[0]; n];
            }
            c.into_iter()
                .map(|b| usize::try_from(b).map_err(|_| format!("bins must be positive, got {b}")))
                .collect()
        }
        None => Ok(vec![100]),
    }
}

fn histogram_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let b = bins_meta(ctx, 1)?;
    Ok(vec![
        MValue::Tensor(t.with_sizes(b.clone())),
        MValue::Tensor(t.with_sizes(vec![b[0] + 1])),
    ])
}

fn histogramdd_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let n = t.sizes.last().copied().unwrap_or(1);
    let b = bins_meta(ctx, n)?;
    let hist = MValue::Tensor(t.with_sizes(b.clone()));
    let edges = MValue::Tensors(b.iter().map(|&k| t.with_sizes(vec![k + 1])).collect());
    let target = ctx.target();
    Ok(if target.starts_with("aten._histogramdd_bin_edges") {
        vec![edges]
    } else if target.starts_with("aten._histogramdd_from") {
        vec![hist]
    } else {
        vec![hist, edges]
    })
}

/// `bincount(self, weights=None, minlength=0)`: how often each value of a 1-D non-negative
/// integer tensor occurs (or the sum of its weights), over `max(max + 1, minlength)` bins.
/// Weighted counts are float32 for float32 weights and float64 otherwise, as torch.
fn bincount(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let minlength = ctx.int_or("minlength", 0)?;
    if t.rank() != 1 || t.dtype.is_float() || t.dtype == DType::Bool {
        return Err(ctx.err(format!(
            "self must be a 1-D integer tensor, got {} {:?}",
            t.dtype, t.sizes
        )));
    }
    if minlength < 0 {
        return Err(ctx.err(format!("minlength must be non-negative, got {minlength}")));
    }
    let v = t.to_vec::<i64>();
    if let Some(&neg) = v.iter().find(|&&x| x < 0) {
        return Err(ctx.err(bincount_negative(neg)));
    }
    let len = bincount_len(ctx, v.iter().copied().max(), minlength)?;
    let w = ctx.opt_tensor("weights")?;
    Ok(vec![match w {
        // torch: an empty input gives int64 zeros, weighted or not.
        _ if v.is_empty() => Tensor::from_vec(vec![0i64; len], &[len]).into(),
        None => {
            let mut c = vec![0i64; len];
            for &x in &v {
                c[x as usize] += 1;
            }
            Tensor::from_vec(c, &[len]).into()
        }
        Some(w) => {
            if w.sizes != t.sizes {
                return Err(ctx.err(format!(
                    "weights must have the shape of self {:?}, got {:?}",
                    t.sizes, w.sizes
                )));
            }
            let wv = w.to_vec::<f64>();
            let mut c = vec![0f64; len];
            let f32_out = w.dtype == DType::F32;
            for (&x, &wt) in v.iter().zip(&wv) {
                let s = c[x as usize] + wt;
                c[x as usize] = if f32_out { s as f32 as f64 } else { s };
            }
            let out = Tensor::from_vec(c, &[len]);
            if f32_out {
                out.to_dtype(DType::F32)?
            } else {
                out
            }
            .into()
        }
    }])
}

/// bincount's error for a negative input (the first one, in element order).
pub(crate) fn bincount_negative(first: i64) -> String {
    format!("self must hold non-negative values, got {first}")
}

/// bincount's number of bins: `max(self) + 1` (0 for an empty input), at least `minlength`,
/// within the tensor size limit.
pub(crate) fn bincount_len(ctx: &OpCtx, max: Option<i64>, minlength: i64) -> Result<usize> {
    let len = max.map_or(0, |m| m.saturating_add(1)).max(minlength);
    crate::ops::factory::check_numel(ctx, len as u64)?;
    Ok(len as usize)
}

/// bincount's length is `max(self) + 1` (at least `minlength`): it depends on the data with
/// no bound the meta device knows, so the meta pass stops here (as for
/// `repeat_interleave` with a tensor of repeats).
fn bincount_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() != 1 || t.dtype.is_float() || t.dtype == DType::Bool {
        return Err(format!(
            "self must be a 1-D integer tensor, got {} {:?}",
            t.dtype, t.sizes
        ));
    }
    Err("bincount's length is max(self) + 1 (at least minlength): it depends on the data".into())
}
