//! Antialiased resizing: `_upsample_bilinear2d_aa` and `_upsample_bicubic2d_aa`
//! (`F.interpolate(..., antialias=True)`), as torch's CPU kernel (UpSampleKernel.cpp, the
//! separable "aa" path): per output pixel a window of the input of half-width `support`
//! (the filter's radius, stretched by the scale when downsampling), weights from the
//! triangle (bilinear) or Keys cubic (a = -0.5) filter normalized to sum 1, all in the
//! element type (f32 for f32/f16/bf16). Width is resampled first, then height; a dim whose
//! size does not change is copied, not filtered.

use super::upsample::Resize;
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::matmul::gemm::Float;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    r.cpu_op("aten._upsample_bilinear2d_aa", |c| resize_aa(c, false));
    r.cpu_op("aten._upsample_bicubic2d_aa", |c| resize_aa(c, true));
}

/// The filters' values at distance `x` (in input pixels, already scaled).
fn filter<T: Float>(x: T, cubic: bool) -> T {
    let x = x.abs();
    if cubic {
        let a = T::of(-0.5);
        if x < T::ONE {
            ((a + T::of(2.0)) * x - (a + T::of(3.0))) * x * x + T::ONE
        } else if x < T::of(2.0) {
            ((a * x - T::of(5.0) * a) * x + T::of(8.0) * a) * x - T::of(4.0) * a
        } else {
            T::ZERO
        }
    } else if x < T::ONE {
        T::ONE - x
    } else {
        T::ZERO
    }
}

/// Per output index: the first input index and the normalized weights of its window.
fn windows<T: Float>(
    input: usize,
    output: usize,
    align: bool,
    scale: Option<f64>,
    cubic: bool,
) -> Vec<(usize, Vec<T>)> {
    // torch's area_pixel_compute_scale.
    let scale = if align {
        if output > 1 {
            T::of((input - 1) as f64) / T::of((output - 1) as f64)
        } else {
            T::ZERO
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => T::of(1.0 / s),
            _ => T::of(input as f64) / T::of(output as f64),
        }
    };
    let interp = if cubic { 4.0 } else { 2.0 };
    // Downsampling stretches the filter by the scale; upsampling keeps its own width.
    let down = scale >= T::ONE;
    let support = if down {
        T::of(interp * 0.5) * scale
    } else {
        T::of(interp * 0.5)
    };
    let max_size = (support.to_f64().ceil() as i64) * 2 + 1;
    let invscale = if down { T::ONE / scale } else { T::ONE };
    (0..output)
        .map(|i| {
            let center = scale * T::of(i as f64 + 0.5);
            let xmin = ((center - support + T::of(0.5)).to_f64() as i64).max(0);
            let xmax = ((center + support + T::of(0.5)).to_f64() as i64).min(input as i64);
            let size = (xmax - xmin).clamp(0, max_size);
            let mut w: Vec<T> = (0..size)
                .map(|j| {
                    filter(
                        (T::of((j + xmin) as f64) - center + T::of(0.5)) * invscale,
                        cubic,
                    )
                })
                .collect();
            let total = w.iter().fold(T::ZERO, |a, &b| a + b);
            if total != T::ZERO {
                w.iter_mut().for_each(|v| *v = *v / total);
            }
            (xmin as usize, w)
        })
        .collect()
}

/// Resample `planes` planes of `[rows, cols]` along `cols` (`inner` = 1) or along `rows`
/// (`inner` = cols): out[.., o, ..] = Σ_j w[j] * in[.., xmin + j, ..] in order.
fn resample<T: Float>(
    x: &[T],
    outer: usize,
    len: usize,
    inner: usize,
    win: &[(usize, Vec<T>)],
) -> Vec<T> {
    let out_len = win.len();
    let mut out = vec![T::ZERO; outer * out_len * inner];
    for o in 0..outer {
        for (k, (xmin, w)) in win.iter().enumerate() {
            for i in 0..inner {
                let at = |j: usize| x[(o * len + xmin + j) * inner + i];
                let mut acc = match w.first() {
                    Some(&w0) => at(0) * w0,
                    None => T::ZERO,
                };
                for (j, &wj) in w.iter().enumerate().skip(1) {
                    acc = acc + at(j) * wj;
                }
                out[(o * out_len + k) * inner + i] = acc;
            }
        }
    }
    out
}

fn aa_planes<T: Float>(
    x: &[T],
    count: usize,
    (ih, iw): (usize, usize),
    (oh, ow): (usize, usize),
    align: bool,
    scales: (Option<f64>, Option<f64>),
    cubic: bool,
) -> Vec<T> {
    let mut cur = x.to_vec();
    if ow != iw {
        let win = windows::<T>(iw, ow, align, scales.1, cubic);
        cur = resample(&cur, count * ih, iw, 1, &win);
    }
    if oh != ih {
        let win = windows::<T>(ih, oh, align, scales.0, cubic);
        cur = resample(&cur, count, ih, ow, &win);
    }
    cur
}

fn resize_aa(ctx: &mut OpCtx, cubic: bool) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input").or_else(|_| ctx.tensor("self"))?;
    let pl = super::planes(ctx, &x, 2, true)?;
    if pl.in_plane() == 0 {
        return Err(ctx.err(format!(
            "cannot resize an input with an empty spatial dim: {:?}",
            x.sizes
        )));
    }
    let r = Resize::parse(ctx, 2, pl.ins)?;
    let [_, ih, iw] = pl.ins;
    let [_, oh, ow] = r.outs;
    crate::ops::factory::check_numel(ctx, (pl.count * oh * ow) as u64)?;
    let sizes = pl.out_sizes(&r.outs);
    let args = (
        pl.count,
        (ih, iw),
        (oh, ow),
        r.align_corners,
        (r.scales[1], r.scales[2]),
        cubic,
    );
    let out = match x.dtype {
        DType::F64 => {
            let v = aa_planes::<f64>(
                &x.to_vec::<f64>(),
                args.0,
                args.1,
                args.2,
                args.3,
                args.4,
                args.5,
            );
            Tensor::from_vec(v, &sizes)
        }
        DType::F32 | DType::F16 | DType::BF16 => {
            let v = aa_planes::<f32>(
                &x.to_vec::<f32>(),
                args.0,
                args.1,
                args.2,
                args.3,
                args.4,
                args.5,
            );
            Tensor::from_vec(v, &sizes).to_dtype(x.dtype)?
        }
        d => {
            return Err(ctx.err(format!(
                "antialiased resizing is not implemented for dtype {d}"
            )))
        }
    };
    Ok(vec![RValue::Tensor(out)])
}
