//! Op family: pooling (max, average, adaptive; 1-D to 3-D), upsampling and grid sampling.
//!
//! Pooling views every input as planes (all leading dims) of a 3-D spatial volume, lower
//! ranks with leading size-1 dims, and follows torch's CPU kernels: output sizes from
//! `pooling_output_shape` (ceil mode never starts a window in the right padding), max pooling
//! propagates NaN and reports the flat index within each input plane, average pooling
//! divides by the window clipped to the padded input (or the real input, or a divisor
//! override), adaptive windows span `[floor(i*in/out), ceil((i+1)*in/out))`.

// Kernels are generic over element types, bool included; `v > val` is the generic max rule.
#![allow(clippy::bool_comparison)]

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

mod antialias;
mod grid;
mod unpool;
pub(crate) mod upsample;
pub(crate) mod window;

use super::matmul::gemm::{par_chunks, par_chunks2, with_contiguous};
use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::RValue;
use crate::with_dtype;
pub(crate) use window::{adaptive_sizes, Planes, PoolParams, Window};

/// Each op once (every overload), with its CPU kernel and its shape rule (`meta.rs`).
pub(crate) fn register(r: &mut OpTable) {
    meta::register(r);
    unpool::register(r);
    antialias::register(r);
    for nd in ["1d", "2d", "3d"] {
        r.define_op(&format!("aten.max_pool{nd}"), max_pool, meta::window_pool);
        r.define_op(
            &format!("aten.max_pool{nd}_with_indices"),
            max_pool,
            meta::window_pool,
        );
        r.define_op(&format!("aten.avg_pool{nd}"), avg_pool, meta::window_pool);
    }
    r.define_op(
        "aten.adaptive_avg_pool1d",
        |c| adaptive_avg(c, 1),
        meta::adaptive,
    );
    r.define_op(
        "aten.adaptive_avg_pool2d",
        |c| adaptive_avg(c, 2),
        meta::adaptive,
    );
    r.define_op(
        "aten.adaptive_avg_pool3d",
        |c| adaptive_avg(c, 3),
        meta::adaptive,
    );
    r.define_op(
        "aten._adaptive_avg_pool2d",
        |c| adaptive_avg(c, 2),
        meta::adaptive,
    );
    r.define_op(
        "aten._adaptive_avg_pool3d",
        |c| adaptive_avg(c, 3),
        meta::adaptive,
    );
    r.define_op(
        "aten.adaptive_max_pool1d",
        |c| adaptive_max(c, 1),
        meta::adaptive,
    );
    r.define_op(
        "aten.adaptive_max_pool2d",
        |c| adaptive_max(c, 2),
        meta::adaptive,
    );
    r.define_op(
        "aten.adaptive_max_pool3d",
        |c| adaptive_max(c, 3),
        meta::adaptive,
    );
    upsample::register(r);
    grid::register(r);
}

/// [`Planes`] of `x`, or the node's error.
pub(super) fn planes(ctx: &OpCtx, x: &Tensor, nd: usize, batched_only: bool) -> Result<Planes> {
    Planes::of(&x.sizes, nd, batched_only).map_err(|m| ctx.err(m))
}

/// The node's window parameters and its window over `x` ([`PoolParams`]).
fn windowed(ctx: &OpCtx, x: &Tensor) -> Result<(PoolParams, Planes, Window)> {
    let p = PoolParams::parse(ctx)?;
    let pl = planes(ctx, x, p.nd, false)?;
    let w = p.window(&pl).map_err(|m| ctx.err(m))?;
    Ok((p, pl, w))
}

/// Start and end (exclusive) of the dilated window `o` within `0..len`, first index aligned
/// to the dilation grid (torch's `while (ih0 < 0) ih0 += dilation`).
fn max_span(o: usize, w: &Window, i: usize, len: usize) -> (usize, usize) {
    let start = (o * w.s[i]) as isize - w.p[i] as isize;
    let end = (start + ((w.k[i] - 1) * w.d[i]) as isize + 1).min(len as isize);
    let mut s = start;
    while s < 0 {
        s += w.d[i] as isize;
    }
    (s as usize, end.max(0) as usize)
}

fn is_nan<T: Elem>(v: T) -> bool {
    #[allow(clippy::eq_op)]
    let r = v != v;
    r
}

/// The `i` in `0..count` for which `i * s + off - p` lies in `0..len`.
fn valid_range(count: usize, s: usize, off: usize, p: usize, len: usize) -> (usize, usize) {
    let lo = if p > off { (p - off).div_ceil(s) } else { 0 };
    let hi = if len + p > off {
        ((len - 1 + p - off) / s + 1).min(count)
    } else {
        0
    };
    (lo.min(hi), hi)
}

/// Max pooling, a row of outputs at a time: for each input row of the window and each kernel
/// column, every output of the row compares one element (branch-free, so random data does
/// not stall on mispredictions). Per output, elements are visited in torch's order (rows,
/// then columns), so ties and NaNs pick the same index.
fn max_pool_planes<T: Elem>(x: &[T], pl: &Planes, w: &Window) -> (Vec<T>, Vec<i64>) {
    let [od, oh, ow] = w.outs;
    let [_, ih, iw] = pl.ins;
    let (ip, op) = (pl.in_plane(), od * oh * ow);
    let mut vals = vec![T::default(); pl.count * op];
    let mut idx = vec![0i64; pl.count * op];
    let first_x: Vec<usize> = (0..ow).map(|o| max_span(o, w, 2, iw).0).collect();
    let cols: Vec<(usize, usize)> = (0..w.k[2])
        .map(|kx| valid_range(ow, w.s[2], kx * w.d[2], w.p[2], iw))
        .collect();
    let lowest = T::from_f64(f64::NEG_INFINITY);
    par_chunks2(
        &mut vals,
        &mut idx,
        op,
        op,
        op * w.k.iter().product::<usize>(),
        |plane, dv, di| {
            let xp = &x[plane * ip..(plane + 1) * ip];
            for oz in 0..od {
                let (z0, z1) = max_span(oz, w, 0, pl.ins[0]);
                for oy in 0..oh {
                    let (y0, y1) = max_span(oy, w, 1, ih);
                    let at = (oz * oh + oy) * ow;
                    let vrow = &mut dv[at..at + ow];
                    let irow = &mut di[at..at + ow];
                    vrow.fill(lowest);
                    for (i, &fx) in irow.iter_mut().zip(&first_x) {
                        *i = ((z0 * ih + y0) * iw + fx) as i64;
                    }
                    for z in (z0..z1).step_by(w.d[0]) {
                        for y in (y0..y1).step_by(w.d[1]) {
                            let base = (z * ih + y) * iw;
                            let src = &xp[base..base + iw];
                            for (kx, &(a, b)) in cols.iter().enumerate() {
                                for ox in a..b {
                                    let ix = ox * w.s[2] + kx * w.d[2] - w.p[2];
                                    let v = src[ix];
                                    let m = vrow[ox];
                                    let take = v > m || is_nan(v);
                                    vrow[ox] = if take { v } else { m };
                                    irow[ox] = if take { (base + ix) as i64 } else { irow[ox] };
                                }
                            }
                        }
                    }
                }
            }
        },
    );
    (vals, idx)
}

/// Max pooling's values alone (`max_pool2d` without indices, as in resnet's stem): per output
/// row, the window's input rows are reduced element by element into one row, then the
/// window's columns of that row into `h` (`h[j]` the maximum of the columns from j on), both
/// contiguous and vectorized; each output whose window lies inside the row reads its `h`, the
/// others (at the padding) fold their columns. A NaN in the window gives NaN, as torch; with no
/// index to report, the visiting order cannot show. On x86-64 compiled for AVX2 too.
/// resnet18's max pool: 42 -> 10-12 ms at batch 8, 4.5 -> 1.7 ms at batch 1 (`pt2web run --profile`).
fn max_pool_values<T: Elem>(x: &[T], pl: &Planes, w: &Window) -> Vec<T> {
    let [od, oh, ow] = w.outs;
    let ip = pl.in_plane();
    let op = od * oh * ow;
    let mut vals = vec![T::default(); pl.count * op];
    let spans: Vec<(usize, usize)> = (0..ow).map(|o| max_span(o, w, 2, pl.ins[2])).collect();
    #[cfg(target_arch = "x86_64")]
    let avx2 = std::is_x86_feature_detected!("avx2");
    par_chunks(
        &mut vals,
        op,
        op * w.k.iter().product::<usize>(),
        |plane, dv| {
            let xp = &x[plane * ip..(plane + 1) * ip];
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the CPU has AVX2 (checked above).
                return unsafe { max_values_plane_avx2(xp, dv, pl, w, &spans) };
            }
            max_values_plane(xp, dv, pl, w, &spans)
        },
    );
    vals
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_values_plane_avx2<T: Elem>(
    xp: &[T],
    dv: &mut [T],
    pl: &Planes,
    w: &Window,
    spans: &[(usize, usize)],
) {
    max_values_plane(xp, dv, pl, w, spans)
}

/// `d[i] = b[i]` where `b[i] > a[i]` or is NaN, else `a[i]`, into a third buffer: in place
/// (`a` and `d` one row), LLVM made the select a masked store (`vmaskmovps`, microcoded on
/// AMD), slower than scalar code.
#[inline(always)]
fn max_of<T: Elem>(d: &mut [T], a: &[T], b: &[T]) {
    for ((o, &x), &v) in d.iter_mut().zip(a).zip(b) {
        *o = if v > x || is_nan(v) { v } else { x };
    }
}

/// One plane of [`max_pool_values`].
#[inline(always)]
fn max_values_plane<T: Elem>(
    xp: &[T],
    dv: &mut [T],
    pl: &Planes,
    w: &Window,
    spans: &[(usize, usize)],
) {
    let [od, oh, ow] = w.outs;
    let [_, ih, iw] = pl.ins;
    let lowest = T::from_f64(f64::NEG_INFINITY);
    let pick = |m: T, v: T| if v > m || is_nan(v) { v } else { m };
    let (k2, d2, s2, p2) = (w.k[2], w.d[2], w.s[2], w.p[2]);
    // Columns j whose whole window j, j + d2, ... lies inside the row.
    let hl = (iw + 1).saturating_sub((k2 - 1) * d2 + 1);
    // Ping-pong rows: each reduction step reads one and writes the other.
    let (mut row, mut tmp) = (vec![lowest; iw], vec![lowest; iw]);
    let (mut h, mut th) = (vec![lowest; hl], vec![lowest; hl]);
    for oz in 0..od {
        let (z0, z1) = max_span(oz, w, 0, pl.ins[0]);
        for oy in 0..oh {
            let (y0, y1) = max_span(oy, w, 1, ih);
            row.fill(lowest);
            for z in (z0..z1).step_by(w.d[0]) {
                for y in (y0..y1).step_by(w.d[1]) {
                    let base = (z * ih + y) * iw;
                    max_of(&mut tmp, &row, &xp[base..base + iw]);
                    std::mem::swap(&mut row, &mut tmp);
                }
            }
            h.copy_from_slice(&row[..hl]);
            for t in 1..k2 {
                max_of(&mut th, &h, &row[t * d2..t * d2 + hl]);
                std::mem::swap(&mut h, &mut th);
            }
            let at = (oz * oh + oy) * ow;
            for (o, (dst, &(a, b))) in dv[at..at + ow].iter_mut().zip(spans).enumerate() {
                let start = (o * s2) as isize - p2 as isize;
                *dst = if start >= 0 && (start as usize) < hl {
                    h[start as usize]
                } else {
                    row[a..b]
                        .iter()
                        .step_by(d2)
                        .fold(lowest, |m, &v| pick(m, v))
                };
            }
        }
    }
}

fn max_pool(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let (p, pl, w) = windowed(ctx, &x)?;
    let sizes = pl.out_sizes(&w.outs);
    if x.dtype == DType::Bool {
        return Err(ctx.err("max pooling is not implemented for bool tensors"));
    }
    if !p.with_indices {
        let vals = with_dtype!(x.dtype, T => {
            Tensor::from_vec(with_contiguous::<T, _>(&x, |xv| max_pool_values::<T>(xv, &pl, &w)), &sizes)
        }, else return Err(ctx.err(format!("max pooling is not implemented for dtype {}", x.dtype))));
        return Ok(vec![RValue::Tensor(vals)]);
    }
    let (vals, idx) = with_dtype!(x.dtype, T => {
        let (v, i) = with_contiguous::<T, _>(&x, |xv| max_pool_planes::<T>(xv, &pl, &w));
        (Tensor::from_vec(v, &sizes), i)
    }, else return Err(ctx.err(format!("max pooling is not implemented for dtype {}", x.dtype))));
    let mut out = vec![RValue::Tensor(vals)];
    if p.with_indices {
        out.push(RValue::Tensor(Tensor::from_vec(idx, &sizes)));
    }
    Ok(out)
}

fn avg_pool(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let (p, pl, w) = windowed(ctx, &x)?;
    let (include_pad, divisor) = (p.count_include_pad, p.divisor_override);
    let sizes = pl.out_sizes(&w.outs);
    let [od, oh, ow] = w.outs;
    let (ip, op) = (pl.in_plane(), od * oh * ow);
    // Per output element: the clipped window and its divisor.
    let span = |o: usize, i: usize| -> (usize, usize, usize) {
        let start = (o * w.s[i]) as isize - w.p[i] as isize;
        let end = (start + w.k[i] as isize).min((pl.ins[i] + w.p[i]) as isize);
        let padded = (end - start) as usize;
        (
            start.max(0) as usize,
            end.min(pl.ins[i] as isize).max(0) as usize,
            padded,
        )
    };
    let [_, ih, iw] = pl.ins;
    let float = x.dtype.is_float();
    if !float && matches!(x.dtype, DType::Bool) {
        return Err(ctx.err("average pooling is not implemented for bool tensors"));
    }
    let xv = x.to_vec::<f64>();
    let xi = if float { Vec::new() } else { x.to_vec::<i64>() };
    let mut out = vec![0f64; pl.count * op];
    par_chunks(
        &mut out,
        op,
        op * w.k.iter().product::<usize>(),
        |plane, dst| {
            let mut i = 0;
            for oz in 0..od {
                let (z0, z1, pz) = span(oz, 0);
                for oy in 0..oh {
                    let (y0, y1, py) = span(oy, 1);
                    for ox in 0..ow {
                        let (x0, x1, px) = span(ox, 2);
                        if z0 >= z1 || y0 >= y1 || x0 >= x1 {
                            dst[i] = 0.0;
                            i += 1;
                            continue;
                        }
                        let div = match divisor {
                            Some(d) => d,
                            None if include_pad => (pz * py * px) as i64,
                            None => ((z1 - z0) * (y1 - y0) * (x1 - x0)) as i64,
                        };
                        let base = plane * ip;
                        if float {
                            let mut sum = 0f64;
                            for z in z0..z1 {
                                for y in y0..y1 {
                                    let row = base + (z * ih + y) * iw;
                                    sum += xv[row + x0..row + x1].iter().sum::<f64>();
                                }
                            }
                            dst[i] = sum / div as f64;
                        } else {
                            // Integer inputs: integer sum and C division (truncation toward zero).
                            let mut sum = 0i64;
                            for z in z0..z1 {
                                for y in y0..y1 {
                                    let row = base + (z * ih + y) * iw;
                                    sum = xi[row + x0..row + x1]
                                        .iter()
                                        .fold(sum, |a, &b| a.wrapping_add(b));
                                }
                            }
                            dst[i] = sum.wrapping_div(div) as f64;
                        }
                        i += 1;
                    }
                }
            }
        },
    );
    Ok(vec![RValue::Tensor(
        Tensor::from_vec(out, &sizes).to_dtype(x.dtype)?,
    )])
}

/// Output sizes of an adaptive pool ([`adaptive_sizes`]).
fn adaptive_outs(ctx: &OpCtx, pl: &Planes) -> Result<[usize; 3]> {
    adaptive_sizes(&ctx.ints("output_size")?, pl).map_err(|m| ctx.err(m))
}

/// Adaptive window `o` of `out` over `len`: `[floor(o*len/out), ceil((o+1)*len/out))`.
fn adaptive_span(o: usize, out: usize, len: usize) -> (usize, usize) {
    (
        (o / out) * len + ((o % out) * len) / out,
        1 + ((o + 1) * len - 1) / out,
    )
}

fn adaptive_avg(ctx: &mut OpCtx, nd: usize) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let pl = planes(ctx, &x, nd, false)?;
    let outs = adaptive_outs(ctx, &pl)?;
    let sizes = pl.out_sizes(&outs);
    let op = outs.iter().product::<usize>();
    // f32 (every float model) read in place and written as f32; other dtypes through f64.
    // Both sum each window in f64 and round once.
    if x.dtype == DType::F32 {
        let mut out = vec![0f32; pl.count * op];
        with_contiguous::<f32, _>(&x, |xv| adaptive_avg_planes(&pl, outs, xv, &mut out));
        return Ok(vec![RValue::Tensor(Tensor::from_vec(out, &sizes))]);
    }
    let xv = x.to_vec::<f64>();
    let mut out = vec![0f64; pl.count * op];
    adaptive_avg_planes(&pl, outs, &xv, &mut out);
    Ok(vec![RValue::Tensor(
        Tensor::from_vec(out, &sizes).to_dtype(x.dtype)?,
    )])
}

/// Adaptive average pooling of the planes `xv` into `out` (`outs` per plane), each window
/// summed in f64.
/// The sum of `s` in f64, over eight independent lanes (a chain of dependent adds would
/// wait on each add's latency; eight lanes also vectorize), compiled for AVX2 too on x86-64
/// (twice the lanes of the baseline's f32 -> f64 conversions; the same values).
fn sum_f64<T: Elem>(s: &[T]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Elem>(s: &[T]) -> f64 {
            lanes(s)
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { avx2(s) };
        }
    }
    lanes(s)
}

#[inline(always)]
fn lanes<T: Elem>(s: &[T]) -> f64 {
    let mut acc = [0f64; 8];
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v.to_f64();
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| v.to_f64()).sum();
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

fn adaptive_avg_planes<T: Elem>(pl: &Planes, outs: [usize; 3], xv: &[T], out: &mut [T]) {
    let [od, oh, ow] = outs;
    let [id, ih, iw] = pl.ins;
    let (ip, op) = (pl.in_plane(), od * oh * ow);
    // Each input element costs a conversion and an add, about eight of par_chunks' work
    // units (a GEMM's multiply-adds): a global pool of 576 planes of 7x7 (squeeze-and-
    // excitation) splits over two threads.
    par_chunks(out, op, ip.max(op) * 8, |plane, dst| {
        let xp = &xv[plane * ip..(plane + 1) * ip];
        let mut i = 0;
        for oz in 0..od {
            let (z0, z1) = adaptive_span(oz, od, id);
            for oy in 0..oh {
                let (y0, y1) = adaptive_span(oy, oh, ih);
                for ox in 0..ow {
                    let (x0, x1) = adaptive_span(ox, ow, iw);
                    let mut sum = 0f64;
                    for z in z0..z1 {
                        if x0 == 0 && x1 == iw {
                            // Whole rows (global pooling): one run over the window's rows.
                            sum += sum_f64(&xp[(z * ih + y0) * iw..(z * ih + y1) * iw]);
                            continue;
                        }
                        for y in y0..y1 {
                            let row = (z * ih + y) * iw;
                            sum += sum_f64(&xp[row + x0..row + x1]);
                        }
                    }
                    dst[i] = T::from_f64(sum / ((z1 - z0) * (y1 - y0) * (x1 - x0)) as f64);
                    i += 1;
                }
            }
        }
    });
}

fn adaptive_max(ctx: &mut OpCtx, nd: usize) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let pl = planes(ctx, &x, nd, false)?;
    let outs = adaptive_outs(ctx, &pl)?;
    if outs.contains(&0) && pl.in_plane() > 0 {
        return Err(ctx.err(format!(
            "output_size must be positive, got {:?}",
            &outs[3 - nd..]
        )));
    }
    let sizes = pl.out_sizes(&outs);
    let [od, oh, ow] = outs;
    let [id, ih, iw] = pl.ins;
    let (ip, op) = (pl.in_plane(), od * oh * ow);
    if x.dtype == DType::Bool {
        return Err(ctx.err("adaptive max pooling is not implemented for bool tensors"));
    }
    let (vals, idx) = with_dtype!(x.dtype, T => {
        let xv = x.to_vec::<T>();
        let mut pairs = vec![(T::default(), 0i64); pl.count * op];
        par_chunks(&mut pairs, op, ip.max(op), |plane, dst| {
            let xp = &xv[plane * ip..(plane + 1) * ip];
            let mut i = 0;
            for oz in 0..od {
                let (z0, z1) = adaptive_span(oz, od, id);
                for oy in 0..oh {
                    let (y0, y1) = adaptive_span(oy, oh, ih);
                    for ox in 0..ow {
                        let (x0, x1) = adaptive_span(ox, ow, iw);
                        let mut best = ((z0 * ih + y0) * iw + x0) as i64;
                        let mut val = T::from_f64(f64::NEG_INFINITY);
                        let mut first = true;
                        for z in z0..z1 {
                            for y in y0..y1 {
                                for xx in x0..x1 {
                                    let k = (z * ih + y) * iw + xx;
                                    let v = xp[k];
                                    if first || v > val || is_nan(v) {
                                        first = false;
                                        val = v;
                                        best = k as i64;
                                    }
                                }
                            }
                        }
                        dst[i] = (val, best);
                        i += 1;
                    }
                }
            }
        });
        let (v, i): (Vec<T>, Vec<i64>) = pairs.into_iter().unzip();
        (Tensor::from_vec(v, &sizes), i)
    }, else return Err(ctx.err(format!("adaptive max pooling is not implemented for dtype {}", x.dtype))));
    Ok(vec![
        RValue::Tensor(vals),
        RValue::Tensor(Tensor::from_vec(idx, &sizes)),
    ])
}
