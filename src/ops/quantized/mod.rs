//! Op family: PT2E quantization (`quantized_decomposed.*`, what torchao's `convert_pt2e`
//! leaves in a graph, static or dynamic): quantize / dequantize per tensor (a float and an
//! int, or one-element tensors) and per channel, and `choose_qparams` (dynamic
//! quantization's scale and zero point from an activation's range).
//!
//! The arithmetic is torch's own (`torch/ao/quantization/fx/_decomposed.py`), in its dtypes,
//! so quantized values are bit-equal to PyTorch's:
//! - quantize: `clamp(round(x * (1 / scale)) + zero_point, quant_min, quant_max)` in f32
//!   (`1 / scale` computed in f64 for a float scale, in the scales' dtype per channel; f64
//!   scales make the per-channel product f64), rounding half to even, then the int dtype;
//! - dequantize: `(q - zero_point) * scale` in f32 (f64 for f64 per-channel scales), then
//!   `out_dtype` (float32 by default);
//! - choose_qparams: the f32 range of the input (widened to hold 0), `scale = max(range /
//!   (quant_max - quant_min), eps)` and `zero_point = quant_min - round(min / scale)` clamped
//!   (affine), or `scale = max(|x|max / ((quant_max - quant_min) / 2), eps)` and zero point
//!   0 (128 for uint8; symmetric); returned as float64 `[1]` and int64 `[1]`.
//!
//! With the graph passes on, a dequantized weight (an int8 constant and its scales) is folded
//! at load into f32; the activations' quantize / dequantize pairs run as ops (on the GPU,
//! `src/gpu/kernels/quant.rs`).

pub(crate) mod meta;

use super::{OpCtx, OpTable};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::RValue;

pub(crate) fn register(r: &mut OpTable) {
    for t in [
        "quantized_decomposed.quantize_per_tensor.default",
        "quantized_decomposed.quantize_per_tensor.tensor",
        "quantized_decomposed.quantize_per_channel.default",
    ] {
        r.define(t, quantize, meta::quantize);
    }
    for t in [
        "quantized_decomposed.dequantize_per_tensor.default",
        "quantized_decomposed.dequantize_per_tensor.tensor",
        "quantized_decomposed.dequantize_per_channel.default",
    ] {
        r.define(t, dequantize, meta::dequantize);
    }
    r.define(
        "quantized_decomposed.choose_qparams.tensor",
        choose_qparams,
        meta::choose_qparams,
    );
    r.define(
        "quantized_decomposed.choose_qparams_symmetric.tensor",
        choose_qparams,
        meta::choose_qparams,
    );
    r.define(CHOOSE_QPARAMS_F32, choose_qparams, meta::choose_qparams);
}

/// `pt2web.choose_qparams.default(input, quant_min, quant_max, eps, dtype, symmetric)`:
/// `choose_qparams(_symmetric).tensor` with the scale as float32 `[1]` (the value torch
/// computes in f32 before widening it to float64; the `qparams` pass writes it where only
/// `quantize/dequantize_per_tensor.tensor` read the scale, so the GPU, without f64, runs it).
pub const CHOOSE_QPARAMS_F32: &str = "pt2web.choose_qparams.default";

/// The range of values of a quantized dtype.
pub(crate) fn bounds(d: DType) -> Option<(i64, i64)> {
    Some(match d {
        DType::I8 => (-128, 127),
        DType::U8 => (0, 255),
        DType::I16 => (-32768, 32767),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        _ => return None,
    })
}

/// The quantized dtype and range of a node (`dtype`, `quant_min`, `quant_max`), checked as
/// torch checks them.
pub(crate) fn qrange(ctx: &OpCtx) -> Result<(DType, i64, i64)> {
    let d = ctx
        .opt_dtype("dtype")?
        .ok_or_else(|| ctx.err("'dtype' is required"))?;
    let (lo, hi) = bounds(d)
        .ok_or_else(|| ctx.err(format!("dtype {d}: expected int8, uint8, int16 or int32")))?;
    let (qmin, qmax) = (ctx.int("quant_min")?, ctx.int("quant_max")?);
    if qmin < lo || qmax > hi || qmin > qmax {
        return Err(ctx.err(format!(
            "quant_min {qmin} / quant_max {qmax}: expected {lo} <= quant_min <= quant_max <= {hi} for {d}"
        )));
    }
    Ok((d, qmin, qmax))
}

/// How a node's scale and zero point reach each element.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Params {
    /// One scale (as torch holds it: an f64) and zero point for the whole tensor.
    Tensor { scale: f64, zero_point: i64 },
    /// One per index along `axis` (wrapped), `zero_points` absent meaning 0; the scales'
    /// dtype decides the precision (f32, or f64).
    Channel {
        axis: usize,
        scales: Vec<f64>,
        f64_scales: bool,
        zero_points: Vec<i64>,
    },
}

impl Params {
    /// The parameters of a quantize / dequantize node over `x`.
    pub(crate) fn parse(ctx: &OpCtx, x_sizes: &[usize]) -> Result<Params> {
        let target = ctx.target();
        let one = |name: &str| -> Result<Tensor> {
            let t = ctx.tensor(name)?;
            if t.numel() != 1 {
                return Err(ctx.err(format!(
                    "'{name}' must hold one element, got shape {:?}",
                    t.sizes
                )));
            }
            Ok(t)
        };
        if target.contains("per_channel") {
            if x_sizes.is_empty() {
                return Err(ctx.err("'input' is 0-d: per-channel parameters need an axis"));
            }
            let axis = super::util::wrap_dim(ctx, ctx.int("axis")?, x_sizes.len())?;
            let c = x_sizes[axis];
            let s = ctx.tensor("scales")?;
            if s.numel() != c || !s.dtype.is_float() {
                return Err(ctx.err(format!(
                    "'scales' must be {c} floats (the size of axis {axis}), got {} {:?}",
                    s.dtype, s.sizes
                )));
            }
            let zero_points = match ctx.opt_tensor("zero_points")? {
                Some(z) if z.numel() == c && !z.dtype.is_float() => z.contiguous().to_vec::<i64>(),
                Some(z) => {
                    return Err(ctx.err(format!(
                        "'zero_points' must be {c} integers, got {} {:?}",
                        z.dtype, z.sizes
                    )))
                }
                None => vec![0; c],
            };
            Ok(Params::Channel {
                axis,
                f64_scales: s.dtype == DType::F64,
                scales: s.contiguous().to_vec::<f64>(),
                zero_points,
            })
        } else if target.ends_with(".tensor") {
            let (s, z) = (one("scale")?, one("zero_point")?);
            Ok(Params::Tensor {
                scale: s.to_vec::<f64>()[0],
                zero_point: z.to_vec::<i64>()[0],
            })
        } else {
            Ok(Params::Tensor {
                scale: ctx.float("scale")?,
                zero_point: ctx.int("zero_point")?,
            })
        }
    }

    /// Elements per channel step (the product of the sizes after the axis) and channels.
    pub(crate) fn inner_and_channels(&self, sizes: &[usize]) -> (usize, usize) {
        match self {
            Params::Tensor { .. } => (1, 1),
            Params::Channel { axis, .. } => (sizes[axis + 1..].iter().product(), sizes[*axis]),
        }
    }
}

/// `x` as contiguous f32 values (f16 / bf16 widened, as torch does); other dtypes refused.
fn float_input(ctx: &OpCtx, x: &Tensor) -> Result<Vec<f32>> {
    match x.dtype {
        DType::F32 | DType::F16 | DType::BF16 => Ok(x.contiguous().to_vec::<f32>()),
        d => Err(ctx.err(format!(
            "'input' must be float32 (or float16 / bfloat16), got {d}"
        ))),
    }
}

fn quantize(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let (dtype, qmin, qmax) = qrange(ctx)?;
    let p = Params::parse(ctx, &x.sizes)?;
    let v = float_input(ctx, &x)?;
    let (lo, hi) = (qmin as f64, qmax as f64);
    let q: Vec<i64> = match &p {
        Params::Tensor { scale, zero_point } => {
            let inv = (1.0 / scale) as f32;
            let (zp, lo, hi) = (*zero_point as f32, lo as f32, hi as f32);
            v.iter()
                .map(|&x| ((x * inv).round_ties_even() + zp).clamp(lo, hi) as i64)
                .collect()
        }
        Params::Channel {
            scales,
            f64_scales,
            zero_points,
            ..
        } => {
            let (inner, c) = p.inner_and_channels(&x.sizes);
            v.iter()
                .enumerate()
                .map(|(i, &x)| {
                    let ch = (i / inner.max(1)) % c;
                    let zp = zero_points[ch];
                    if *f64_scales {
                        let inv = 1.0 / scales[ch];
                        ((x as f64 * inv).round_ties_even() + zp as f64).clamp(lo, hi) as i64
                    } else {
                        let inv = 1.0f32 / scales[ch] as f32;
                        ((x * inv).round_ties_even() + zp as f32).clamp(lo as f32, hi as f32) as i64
                    }
                })
                .collect()
        }
    };
    let t = Tensor::from_vec(q, &x.sizes).to_dtype(dtype)?;
    Ok(vec![RValue::Tensor(t)])
}

fn dequantize(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let (dtype, _, _) = qrange(ctx)?;
    if x.dtype != dtype {
        return Err(ctx.err(format!(
            "'input' must have the dtype the node names ({dtype}), got {}",
            x.dtype
        )));
    }
    let out_dtype = ctx.opt_dtype("out_dtype")?.unwrap_or(DType::F32);
    if !out_dtype.is_float() {
        return Err(ctx.err(format!("out_dtype {out_dtype}: expected a float dtype")));
    }
    let p = Params::parse(ctx, &x.sizes)?;
    let q = x.contiguous().to_vec::<i64>();
    let t = match &p {
        Params::Tensor { scale, zero_point } => {
            let s = *scale as f32;
            let out: Vec<f32> = q.iter().map(|&q| (q - zero_point) as f32 * s).collect();
            Tensor::from_vec(out, &x.sizes)
        }
        Params::Channel {
            scales,
            f64_scales,
            zero_points,
            ..
        } => {
            let (inner, c) = p.inner_and_channels(&x.sizes);
            let ch = |i: usize| (i / inner.max(1)) % c;
            if *f64_scales {
                let out: Vec<f64> = q
                    .iter()
                    .enumerate()
                    .map(|(i, &q)| (q - zero_points[ch(i)]) as f64 * scales[ch(i)])
                    .collect();
                Tensor::from_vec(out, &x.sizes)
            } else {
                let out: Vec<f32> = q
                    .iter()
                    .enumerate()
                    .map(|(i, &q)| (q - zero_points[ch(i)]) as f32 * scales[ch(i)] as f32)
                    .collect();
                Tensor::from_vec(out, &x.sizes)
            }
        }
    };
    Ok(vec![RValue::Tensor(t.to_dtype(out_dtype)?)])
}

/// Dynamic quantization's per-tensor scale and zero point from the input's range.
fn choose_qparams(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let (dtype, qmin, qmax) = qrange(ctx)?;
    let eps = ctx.float("eps")? as f32;
    let v = float_input(ctx, &x)?;
    if v.is_empty() {
        return Err(ctx.err("'input' is empty: its range is undefined"));
    }
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for &x in &v {
        if x.is_nan() {
            return Err(ctx.err("'input' holds NaN"));
        }
        lo = lo.min(x);
        hi = hi.max(x);
    }
    let (min_neg, max_pos) = (lo.min(0.0), hi.max(0.0));
    let f32_scale = ctx.target() == CHOOSE_QPARAMS_F32;
    let symmetric = if f32_scale {
        ctx.bool_or("symmetric", false)?
    } else {
        ctx.target().contains("symmetric")
    };
    let (scale, zp) = if symmetric {
        let m = (-min_neg).max(max_pos);
        let scale = (m / ((qmax - qmin) as f64 / 2.0) as f32).max(eps);
        (scale, if dtype == DType::U8 { 128 } else { 0 })
    } else {
        let scale = ((max_pos - min_neg) / (qmax - qmin) as f32).max(eps);
        let zp = qmin - (min_neg / scale).round_ties_even() as i32 as i64;
        (scale, zp.clamp(qmin, qmax))
    };
    let scale = if f32_scale {
        Tensor::from_vec(vec![scale], &[1])
    } else {
        Tensor::from_vec(vec![scale as f64], &[1])
    };
    Ok(vec![
        RValue::Tensor(scale),
        RValue::Tensor(Tensor::from_vec(vec![zp], &[1])),
    ])
}
