//! Upsampling (`F.interpolate`): nearest, nearest-exact, (bi/tri)linear and bicubic, in both
//! the `.vec` form (output size or scale factors) and the `.default` form (output size plus
//! optional per-dim scales). Source indices and weights follow torch's CPU kernels
//! (UpSample.h), computed in f32 for f32/f16/bf16 and in f64 for f64, so the picked pixels
//! match exactly; interpolation is separable, innermost dim first, as torch evaluates it.
// `!(a >= b)` is deliberate: it is true for NaN too.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use super::Planes;
use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::matmul::gemm::{par_chunks, Float};
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    Nearest,
    NearestExact,
    Linear,
    Cubic,
}

pub(super) fn register(r: &mut OpTable) {
    r.cpu_op("aten.upsample_nearest1d", |c| upsample(c, 1, Mode::Nearest));
    r.cpu_op("aten.upsample_nearest2d", |c| upsample(c, 2, Mode::Nearest));
    r.cpu_op("aten.upsample_nearest3d", |c| upsample(c, 3, Mode::Nearest));
    r.cpu_op("aten._upsample_nearest_exact1d", |c| {
        upsample(c, 1, Mode::NearestExact)
    });
    r.cpu_op("aten._upsample_nearest_exact2d", |c| {
        upsample(c, 2, Mode::NearestExact)
    });
    r.cpu_op("aten._upsample_nearest_exact3d", |c| {
        upsample(c, 3, Mode::NearestExact)
    });
    r.cpu_op("aten.upsample_linear1d", |c| upsample(c, 1, Mode::Linear));
    r.cpu_op("aten.upsample_bilinear2d", |c| upsample(c, 2, Mode::Linear));
    r.cpu_op("aten.upsample_trilinear3d", |c| {
        upsample(c, 3, Mode::Linear)
    });
    r.cpu_op("aten.upsample_bicubic2d", |c| upsample(c, 2, Mode::Cubic));
}

/// The parameters of an upsampling node, parsed once for every backend (the GPU kernel is
/// `src/gpu/kernels/resample.rs`): the output's spatial sizes and the scales torch computes
/// source indices with, right-aligned in 3 dims as [`Planes::ins`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Resize {
    pub outs: [usize; 3],
    /// The user's scale factors (`scale_factors`, or the `.default` overloads' `scales_*`
    /// next to the sizes); None: in/out.
    pub scales: [Option<f64>; 3],
    pub align_corners: bool,
}

impl Resize {
    /// For an `nd`-D upsampling of spatial sizes `ins` (right-aligned, leading 1s).
    pub fn parse(ctx: &OpCtx, nd: usize, ins: [usize; 3]) -> Result<Resize> {
        let (outs, scales) = sizes_and_scales(ctx, nd, ins)?;
        Ok(Resize {
            outs,
            scales,
            align_corners: ctx.bool_or("align_corners", false)?,
        })
    }
}

/// Output sizes and the user's scale factors (None when sizes were given).
fn sizes_and_scales(
    ctx: &OpCtx,
    nd: usize,
    ins: [usize; 3],
) -> Result<([usize; 3], [Option<f64>; 3])> {
    let mut outs = ins;
    let mut scales = [None; 3];
    let out_size = ctx.opt_ints("output_size")?.filter(|v| !v.is_empty());
    let factors: Option<Vec<f64>> = match ctx.arg("scale_factors") {
        Some(crate::program::Arg::Floats(v)) => Some(v.clone()),
        Some(crate::program::Arg::SymFloats(v)) => Some(
            v.iter()
                .map(|f| {
                    ctx.scalar_of(&crate::program::Arg::SymFloat(f.clone()), "scale_factors")
                        .map(|s| s.as_f64())
                })
                .collect::<Result<_>>()?,
        ),
        Some(crate::program::Arg::None) | None => None,
        Some(other) => {
            return Err(ctx.err(format!(
                "scale_factors is {other:?}, expected a list of floats"
            )))
        }
    };
    match (out_size, factors) {
        (Some(v), _) => {
            if v.len() != nd {
                return Err(ctx.err(format!("output_size must have {nd} values, got {v:?}")));
            }
            for (i, &o) in v.iter().enumerate() {
                if o <= 0 {
                    return Err(ctx.err(format!("output sizes must be positive, got {v:?}")));
                }
                outs[3 - nd + i] = o as usize;
            }
            // The `.default` overloads carry the scales (if any) next to the sizes.
            let names: &[&str] = match nd {
                1 => &["scales"],
                2 => &["scales_h", "scales_w"],
                _ => &["scales_d", "scales_h", "scales_w"],
            };
            for (i, n) in names.iter().enumerate() {
                scales[3 - nd + i] = ctx.opt_float(n)?;
            }
        }
        (None, Some(f)) => {
            if f.len() != nd {
                return Err(ctx.err(format!("scale_factors must have {nd} values, got {f:?}")));
            }
            for (i, &s) in f.iter().enumerate() {
                let o = (ins[3 - nd + i] as f64 * s).floor();
                if !(o >= 1.0) {
                    return Err(ctx.err(format!(
                        "scale factor {s} gives an empty output for input size {}",
                        ins[3 - nd + i]
                    )));
                }
                outs[3 - nd + i] = o as usize;
                scales[3 - nd + i] = Some(s);
            }
        }
        (None, None) => return Err(ctx.err("either output_size or scale_factors must be given")),
    }
    Ok((outs, scales))
}

/// torch's `compute_scales_value`: 1/scale when the user gave one, else in/out.
fn scale_value<T: Float>(scale: Option<f64>, input: usize, output: usize) -> T {
    match scale {
        Some(s) if s > 0.0 => T::of(1.0 / s),
        _ => T::of(input as f64) / T::of(output as f64),
    }
}

/// torch's `area_pixel_compute_scale`.
fn area_scale<T: Float>(input: usize, output: usize, align: bool, scale: Option<f64>) -> T {
    if align {
        if output > 1 {
            T::of((input - 1) as f64) / T::of((output - 1) as f64)
        } else {
            T::ZERO
        }
    } else {
        scale_value(scale, input, output)
    }
}

/// torch's `area_pixel_compute_source_index`.
fn source_index<T: Float>(scale: T, dst: usize, align: bool, cubic: bool) -> T {
    if align {
        scale * T::of(dst as f64)
    } else {
        let s = scale * (T::of(dst as f64) + T::of(0.5)) - T::of(0.5);
        if !cubic && s < T::ZERO {
            T::ZERO
        } else {
            s
        }
    }
}

/// Nearest source index (`nearest_idx` / `nearest_exact_idx`), computed in f32 as torch does.
fn nearest_index(o: usize, input: usize, output: usize, scale: Option<f64>, exact: bool) -> usize {
    if !exact && output == input {
        return o;
    }
    if !exact && output == 2 * input {
        return o >> 1;
    }
    let s: f32 = scale_value(scale, input, output);
    let v = if exact {
        ((o as f64 + 0.5) * s as f64) as f32
    } else {
        o as f32 * s
    };
    (v.floor().max(0.0) as usize).min(input - 1)
}

/// For one dim: per output index, the source taps (index, weight). The GPU kernel
/// (src/gpu/kernels/resample.rs) uploads these tables.
pub(crate) fn taps<T: Float>(
    mode: Mode,
    input: usize,
    output: usize,
    align: bool,
    scale: Option<f64>,
) -> Vec<Vec<(usize, T)>> {
    (0..output)
        .map(|o| match mode {
            Mode::Nearest | Mode::NearestExact => vec![(
                nearest_index(o, input, output, scale, mode == Mode::NearestExact),
                T::ONE,
            )],
            Mode::Linear => {
                if input == output {
                    return vec![(o, T::ONE), (o, T::ZERO)];
                }
                let ratio: T = area_scale(input, output, align, scale);
                let real = source_index(ratio, o, align, false);
                let (i0, l1) = guard(real, input);
                let i0 = i0.max(0) as usize;
                let i1 = if i0 < input - 1 { i0 + 1 } else { i0 };
                vec![(i0, T::ONE - l1), (i1, l1)]
            }
            Mode::Cubic => {
                let ratio: T = area_scale(input, output, align, scale);
                let real = source_index(ratio, o, align, true);
                let (i0, t) = guard(real, input);
                let c = cubic_coefficients(t);
                (0..4)
                    .map(|j| {
                        (
                            (i0 - 1 + j as isize).clamp(0, input as isize - 1) as usize,
                            c[j],
                        )
                    })
                    .collect()
            }
        })
        .collect()
}

/// torch's `guard_index_and_lambda`: floor index (at most size-1) and a weight in [0, 1].
fn guard<T: Float>(real: T, input: usize) -> (isize, T) {
    let i = real.floor().to_isize().min(input as isize - 1);
    let l = real - T::of(i as f64);
    let l = if l < T::ZERO {
        T::ZERO
    } else if l > T::ONE {
        T::ONE
    } else {
        l
    };
    (i, l)
}

/// Keys' cubic convolution weights with A = -0.75 (torch's `get_cubic_upsample_coefficients`).
pub(super) fn cubic_coefficients<T: Float>(t: T) -> [T; 4] {
    let a = T::of(-0.75);
    let one = T::ONE;
    let two = T::of(2.0);
    let c1 = |x: T| ((a + two) * x - (a + T::of(3.0))) * x * x + one;
    let c2 = |x: T| ((a * x - T::of(5.0) * a) * x + T::of(8.0) * a) * x - T::of(4.0) * a;
    let x2 = one - t;
    [c2(t + one), c1(t), c1(x2), c2(x2 + one)]
}

fn upsample(ctx: &mut OpCtx, nd: usize, mode: Mode) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input").or_else(|_| ctx.tensor("self"))?;
    let pl = super::planes(ctx, &x, nd, true)?;
    if pl.in_plane() == 0 {
        return Err(ctx.err(format!(
            "cannot upsample an input with an empty spatial dim: {:?}",
            x.sizes
        )));
    }
    let Resize {
        outs,
        scales,
        align_corners: align,
    } = Resize::parse(ctx, nd, pl.ins)?;
    let sizes = pl.out_sizes(&outs);
    let out = match (mode, x.dtype) {
        (Mode::Nearest | Mode::NearestExact, d) => with_dtype!(d, T => {
            let xv = x.to_vec::<T>();
            let tz = taps::<f32>(mode, pl.ins[0], outs[0], align, scales[0]);
            let ty = taps::<f32>(mode, pl.ins[1], outs[1], align, scales[1]);
            let tx = taps::<f32>(mode, pl.ins[2], outs[2], align, scales[2]);
            Tensor::from_vec(gather(&xv, &pl, &outs, &tz, &ty, &tx), &sizes)
        }, else return Err(ctx.err(format!("upsampling is not implemented for dtype {d}")))),
        (_, DType::F64) => Tensor::from_vec(
            interpolate::<f64>(&x.to_vec::<f64>(), &pl, &outs, mode, align, &scales),
            &sizes,
        ),
        (_, DType::F32 | DType::F16 | DType::BF16) => Tensor::from_vec(
            interpolate::<f32>(&x.to_vec::<f32>(), &pl, &outs, mode, align, &scales),
            &sizes,
        )
        .to_dtype(x.dtype)?,
        (_, d) => {
            return Err(ctx.err(format!(
                "linear and cubic upsampling are not implemented for dtype {d}"
            )))
        }
    };
    Ok(vec![RValue::Tensor(out)])
}

/// Nearest: a pure gather (exact for every dtype).
fn gather<T: Elem>(
    x: &[T],
    pl: &Planes,
    outs: &[usize; 3],
    tz: &[Vec<(usize, f32)>],
    ty: &[Vec<(usize, f32)>],
    tx: &[Vec<(usize, f32)>],
) -> Vec<T> {
    let [_, ih, iw] = pl.ins;
    let (ip, op) = (pl.in_plane(), outs.iter().product::<usize>());
    let mut out = vec![T::default(); pl.count * op];
    par_chunks(&mut out, op, op, |plane, dst| {
        let xp = &x[plane * ip..(plane + 1) * ip];
        let mut i = 0;
        for z in tz {
            for y in ty {
                let row = (z[0].0 * ih + y[0].0) * iw;
                for xx in tx {
                    dst[i] = xp[row + xx[0].0];
                    i += 1;
                }
            }
        }
    });
    out
}

/// Linear or cubic: separable taps, innermost dim summed first (torch's evaluation order).
fn interpolate<T: Float>(
    x: &[T],
    pl: &Planes,
    outs: &[usize; 3],
    mode: Mode,
    align: bool,
    scales: &[Option<f64>; 3],
) -> Vec<T> {
    let [_, ih, iw] = pl.ins;
    // Missing leading dims (1-D, 2-D) are plain copies with a single tap.
    let dim_taps = |i: usize| -> Vec<Vec<(usize, T)>> {
        if i < 3 - pl.nd {
            vec![vec![(0, T::ONE)]]
        } else {
            taps::<T>(mode, pl.ins[i], outs[i], align, scales[i])
        }
    };
    let (tz, ty, tx) = (dim_taps(0), dim_taps(1), dim_taps(2));
    let (ip, op) = (pl.in_plane(), outs.iter().product::<usize>());
    let mut out = vec![T::ZERO; pl.count * op];
    let single_z = pl.nd < 3;
    let single_y = pl.nd < 2;
    par_chunks(&mut out, op, op * 16, |plane, dst| {
        let xp = &x[plane * ip..(plane + 1) * ip];
        let mut i = 0;
        for z in &tz {
            for y in &ty {
                for xx in &tx {
                    let row_val = |zi: usize, yi: usize| -> T {
                        let row = (zi * ih + yi) * iw;
                        let mut acc = xp[row + xx[0].0] * xx[0].1;
                        for &(xi, w) in &xx[1..] {
                            acc = acc + xp[row + xi] * w;
                        }
                        acc
                    };
                    let plane_val = |zi: usize| -> T {
                        if single_y {
                            return row_val(zi, 0);
                        }
                        let mut acc = row_val(zi, y[0].0) * y[0].1;
                        for &(yi, w) in &y[1..] {
                            acc = acc + row_val(zi, yi) * w;
                        }
                        acc
                    };
                    dst[i] = if single_z {
                        plane_val(0)
                    } else {
                        let mut acc = plane_val(z[0].0) * z[0].1;
                        for &(zi, w) in &z[1..] {
                            acc = acc + plane_val(zi) * w;
                        }
                        acc
                    };
                    i += 1;
                }
            }
        }
    });
    out
}
