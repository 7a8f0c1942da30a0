//! Op family: normalization layers. batch_norm in every form torch exports (training IR
//! `batch_norm`, core `_native_batch_norm_legit_no_training` / `_native_batch_norm_legit`
//! (`.no_stats` for instance_norm) / `_native_batch_norm_legit_functional`, and
//! `native_batch_norm`), layer_norm / native_layer_norm, group_norm / native_group_norm,
//! instance_norm, rms_norm / _fused_rms_norm, and weight normalization (`weight_norm.rs`).
//!
//! Inputs compute in f32 (f32/f16/bf16) or f64; statistics accumulate in f64. Training-mode
//! batch norm updates running statistics in place (as eager does) except in the functional
//! form, which returns them.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;
pub(crate) mod params;
mod weight_norm;

pub(crate) use params::NormParams;

use super::matmul::gemm::par_chunks2;
use super::reduce::{compute_float, typed, with_real, Real};
use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::RValue;

/// Each target once, with its CPU kernel and its shape rule (`meta.rs`).
pub(crate) fn register(r: &mut OpTable) {
    weight_norm::register(r);
    let defs: [(&str, super::Kernel, crate::meta::Rule); 15] = [
        (
            "aten._batch_norm_with_update.default",
            batch_norm,
            meta::batch_norm,
        ),
        (
            "aten._batch_norm_with_update_functional.default",
            batch_norm,
            meta::batch_norm,
        ),
        ("aten.batch_norm.default", batch_norm, meta::batch_norm),
        (
            "aten.native_batch_norm.default",
            batch_norm,
            meta::batch_norm,
        ),
        (
            "aten._native_batch_norm_legit.default",
            batch_norm,
            meta::batch_norm,
        ),
        (
            "aten._native_batch_norm_legit.no_stats",
            batch_norm,
            meta::batch_norm,
        ),
        (
            "aten._native_batch_norm_legit_no_training.default",
            batch_norm,
            meta::batch_norm,
        ),
        (
            "aten._native_batch_norm_legit_functional.default",
            batch_norm,
            meta::batch_norm,
        ),
        (
            "aten.instance_norm.default",
            instance_norm,
            meta::instance_norm,
        ),
        ("aten.layer_norm.default", layer_norm, meta::layer_norm),
        (
            "aten.native_layer_norm.default",
            layer_norm,
            meta::layer_norm,
        ),
        ("aten.group_norm.default", group_norm, meta::group_norm),
        (
            "aten.native_group_norm.default",
            group_norm,
            meta::group_norm,
        ),
        ("aten.rms_norm.default", rms_norm, meta::rms_norm),
        ("aten._fused_rms_norm.default", rms_norm, meta::rms_norm),
    ];
    for (target, cpu, rule) in defs {
        r.define(target, cpu, rule);
    }
}

/// The compute float of a normalization input, or an error naming the op.
fn float_of(ctx: &OpCtx, x: &Tensor) -> Result<DType> {
    compute_float(x.dtype)
        .ok_or_else(|| ctx.err(format!("expected a floating point input, got {}", x.dtype)))
}

/// An optional per-channel parameter (weight or bias) as f64, checked to hold `n` elements.
fn per_channel(ctx: &OpCtx, t: Option<Tensor>, n: usize, what: &str) -> Result<Option<Vec<f64>>> {
    match t {
        None => Ok(None),
        Some(t) if t.numel() == n => Ok(Some(t.to_vec::<f64>())),
        Some(t) => Err(ctx.err(format!(
            "{what} should have {n} elements, got shape {:?}",
            t.sizes
        ))),
    }
}

/// Mean and biased variance of each of the `rows` contiguous rows of `x` (row length `len`;
/// empty rows give NaN, as torch's 0/0 does).
fn row_moments<R: Real>(x: &[R], rows: usize, len: usize) -> Vec<(f64, f64)> {
    if len == 0 {
        return vec![(f64::NAN, f64::NAN); rows];
    }
    x.chunks_exact(len).map(moments).collect()
}

/// Mean and biased variance of one non-empty row, summed in f64 in eight interleaved
/// partial sums ([`sum8`]).
fn moments<R: Real>(r: &[R]) -> (f64, f64) {
    let len = r.len() as f64;
    let mean = sum8(r, |v| v) / len;
    let var = sum8(r, |v| (v - mean) * (v - mean)) / len;
    (mean, var)
}

/// The sum of `f(v)` over `r` in f64: element i goes to partial sum i % 8 (the remainder
/// after the last whole eight to a ninth), and the partial sums are added pairwise. One
/// running sum waited on each addition's latency (MiniLM's layer norms at a fifth of their
/// possible speed); the interleaved sums also round less.
#[inline]
fn sum8<R: Real>(r: &[R], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = r.chunks_exact(8);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += f(v.to_f64());
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|v| f(v.to_f64())).sum();
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// `out[n, c, s] = x[n, c, s] * scale[n, c] + shift[n, c]` over a contiguous [N, C, inner].
fn affine<R: Real>(x: &mut [R], c: usize, inner: usize, coef: impl Fn(usize, usize) -> (f64, f64)) {
    if inner == 0 || c == 0 {
        return;
    }
    for (i, chunk) in x.chunks_exact_mut(inner).enumerate() {
        let (scale, shift) = coef(i / c, i % c);
        let (scale, shift) = (R::from_f64(scale), R::from_f64(shift));
        chunk.iter_mut().for_each(|v| *v = *v * scale + shift);
    }
}

/// Batch-norm-style normalization of `x` ([N, C, *]) with per-channel `mean` and `invstd`.
fn normalize_channels(
    x: &Tensor,
    mean: &[f64],
    invstd: &[f64],
    w: &Option<Vec<f64>>,
    b: &Option<Vec<f64>>,
    per_sample: bool,
) -> Result<Tensor> {
    let c = x.sizes.get(1).copied().unwrap_or(1);
    let inner: usize = x.sizes.iter().skip(2).product();
    let cf = compute_float(x.dtype).unwrap_or(DType::F32);
    with_real!(cf, R => {
        let mut v = x.to_vec::<R>();
        affine(&mut v, c, inner, |n, ch| {
            // per_sample statistics are indexed by (n, c) (instance norm), else by c.
            let k = if per_sample { n * c + ch } else { ch };
            let scale = invstd[k] * w.as_ref().map_or(1.0, |w| w[ch]);
            (scale, b.as_ref().map_or(0.0, |b| b[ch]) - mean[k] * scale)
        });
        typed(v, &x.sizes, x.dtype)
    })
}

/// Per-channel (over N and the spatial dims) mean and biased variance of [N, C, *].
fn channel_moments(x: &Tensor) -> Vec<(f64, f64)> {
    let c = x.sizes[1];
    let inner: usize = x.sizes.iter().skip(2).product();
    let v = x.to_vec::<f64>();
    let count = (x.numel() / c.max(1)) as f64;
    let mut sum = vec![0.0; c];
    for (i, chunk) in v.chunks_exact(inner.max(1)).enumerate() {
        sum[i % c] += chunk.iter().sum::<f64>();
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / count).collect();
    let mut ss = vec![0.0; c];
    for (i, chunk) in v.chunks_exact(inner.max(1)).enumerate() {
        let m = mean[i % c];
        ss[i % c] += chunk.iter().map(|a| (a - m) * (a - m)).sum::<f64>();
    }
    mean.into_iter()
        .zip(ss)
        .map(|(m, s)| (m, s / count))
        .collect()
}

/// `(1 - momentum) * running + momentum * batch`, in the running buffer's dtype.
fn update_running(running: &Tensor, batch: &[f64], momentum: f64) -> Result<Tensor> {
    let old = running.to_vec::<f64>();
    let new: Vec<f64> = old
        .iter()
        .zip(batch)
        .map(|(r, b)| (1.0 - momentum) * r + momentum * b)
        .collect();
    typed(new, &running.sizes, running.dtype)
}

fn batch_norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let t = ctx.target().to_string();
    float_of(ctx, &x)?;
    if x.rank() < 2 {
        return Err(ctx.err(format!(
            "expected an input of at least 2 dims ([N, C, ...]), got shape {:?}",
            x.sizes
        )));
    }
    let c = x.sizes[1];
    let w = per_channel(ctx, ctx.opt_tensor("weight")?, c, "weight")?;
    let b = per_channel(ctx, ctx.opt_tensor("bias")?, c, "bias")?;
    let (rm, rv) = if t.ends_with(".no_stats") {
        (None, None)
    } else {
        (
            ctx.opt_tensor("running_mean")?,
            ctx.opt_tensor("running_var")?,
        )
    };
    for (r, what) in [(&rm, "running_mean"), (&rv, "running_var")] {
        if let Some(r) = r {
            if r.numel() != c {
                return Err(ctx.err(format!(
                    "{what} should have {c} elements, got shape {:?}",
                    r.sizes
                )));
            }
        }
    }
    let NormParams {
        training,
        momentum,
        eps,
        ..
    } = NormParams::parse(ctx, x.dtype)?;
    let functional = t.contains("functional");
    let params = [
        ctx.opt_tensor("weight")?.map(|p| p.dtype),
        ctx.opt_tensor("bias")?.map(|p| p.dtype),
        rm.as_ref().map(|p| p.dtype),
        rv.as_ref().map(|p| p.dtype),
    ];
    let stat_dtype = meta::batch_stat_dtype(x.dtype, &params);
    let (out, save_mean, save_invstd, new_rm, new_rv);
    let eval_stats = if training {
        None
    } else {
        rm.as_ref().zip(rv.as_ref())
    };
    if let Some((rm, rv)) = eval_stats {
        let mean = rm.to_vec::<f64>();
        let invstd: Vec<f64> = rv
            .to_vec::<f64>()
            .iter()
            .map(|v| 1.0 / (v + eps).sqrt())
            .collect();
        out = normalize_channels(&x, &mean, &invstd, &w, &b, false)?;
        // Inference forms return empty saved statistics, in the input's dtype.
        save_mean = Tensor::zeros(x.dtype, &[0])?;
        save_invstd = Tensor::zeros(x.dtype, &[0])?;
        new_rm = Some(rm.clone());
        new_rv = Some(rv.clone());
    } else {
        if x.numel() == 0 && c > 0 {
            return Err(ctx.err("cannot compute batch statistics of an empty input"));
        }
        let mom = channel_moments(&x);
        let mean: Vec<f64> = mom.iter().map(|m| m.0).collect();
        let invstd: Vec<f64> = mom.iter().map(|m| 1.0 / (m.1 + eps).sqrt()).collect();
        out = normalize_channels(&x, &mean, &invstd, &w, &b, false)?;
        let n = (x.numel() / c.max(1)) as f64;
        // The running variance tracks the unbiased batch variance.
        let unbiased: Vec<f64> = mom.iter().map(|m| m.1 * n / (n - 1.0)).collect();
        new_rm = match (&rm, training) {
            (Some(r), true) => Some(update_running(r, &mean, momentum)?),
            (r, _) => r.clone(),
        };
        new_rv = match (&rv, training) {
            (Some(r), true) => Some(update_running(r, &unbiased, momentum)?),
            (r, _) => r.clone(),
        };
        save_mean = typed(mean, &[c], stat_dtype)?;
        save_invstd = typed(invstd, &[c], stat_dtype)?;
    }
    // `_batch_norm_with_update*` also return cuDNN's reserve space: empty on the CPU.
    let with_update = t.starts_with("aten._batch_norm_with_update");
    let reserve = || Tensor::zeros(DType::U8, &[0]);
    if functional {
        let (Some(nm), Some(nv)) = (new_rm, new_rv) else {
            return Err(ctx.err("running_mean and running_var are required"));
        };
        let mut v: Vec<RValue> = vec![out.into(), save_mean.into(), save_invstd.into()];
        if with_update {
            v.push(reserve()?.into());
        }
        v.extend([nm.into(), nv.into()]);
        return Ok(v);
    }
    if training {
        // Eager updates the running buffers in place; the training IR relies on it.
        if let (Some(r), Some(n)) = (&rm, &new_rm) {
            r.copy_from(n)?;
        }
        if let (Some(r), Some(n)) = (&rv, &new_rv) {
            r.copy_from(n)?;
        }
    }
    if t == "aten.batch_norm.default" {
        Ok(vec![out.into()])
    } else if with_update {
        Ok(vec![
            out.into(),
            save_mean.into(),
            save_invstd.into(),
            reserve()?.into(),
        ])
    } else {
        Ok(vec![out.into(), save_mean.into(), save_invstd.into()])
    }
}

/// instance_norm: per-(sample, channel) statistics when `use_input_stats` (then running stats,
/// if given, are updated with the batch average), otherwise batch norm with running stats.
fn instance_norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    float_of(ctx, &x)?;
    if x.rank() < 2 {
        return Err(ctx.err(format!(
            "expected an input of at least 2 dims ([N, C, ...]), got shape {:?}",
            x.sizes
        )));
    }
    let (n, c) = (x.sizes[0], x.sizes[1]);
    let inner: usize = x.sizes.iter().skip(2).product();
    let w = per_channel(ctx, ctx.opt_tensor("weight")?, c, "weight")?;
    let b = per_channel(ctx, ctx.opt_tensor("bias")?, c, "bias")?;
    let rm = ctx.opt_tensor("running_mean")?;
    let rv = ctx.opt_tensor("running_var")?;
    let p = NormParams::parse(ctx, x.dtype)?;
    let (use_input, momentum, eps) = (p.use_input_stats, p.momentum, p.eps);
    for r in [&rm, &rv].into_iter().flatten() {
        if r.numel() != c {
            return Err(ctx.err(format!(
                "running statistics of shape {:?} should have {c} elements",
                r.sizes
            )));
        }
    }
    if !use_input {
        let (Some(rm), Some(rv)) = (rm, rv) else {
            return Err(ctx.err(
                "Expected running_mean and running_var to be defined when use_input_stats is false",
            ));
        };
        let mean = rm.to_vec::<f64>();
        let invstd: Vec<f64> = rv
            .to_vec::<f64>()
            .iter()
            .map(|v| 1.0 / (v + eps).sqrt())
            .collect();
        return Ok(vec![
            normalize_channels(&x, &mean, &invstd, &w, &b, false)?.into()
        ]);
    }
    let mom = row_moments(&x.to_vec::<f64>(), n * c, inner);
    let mean: Vec<f64> = mom.iter().map(|m| m.0).collect();
    let invstd: Vec<f64> = mom.iter().map(|m| 1.0 / (m.1 + eps).sqrt()).collect();
    let out = normalize_channels(&x, &mean, &invstd, &w, &b, true)?;
    // Running stats: the average over the batch of each sample's update.
    let avg = |f: &dyn Fn(usize) -> f64| -> Vec<f64> {
        (0..c)
            .map(|ch| (0..n).map(|s| f(s * c + ch)).sum::<f64>() / n as f64)
            .collect()
    };
    if let Some(r) = &rm {
        r.copy_from(&update_running(r, &avg(&|k| mean[k]), momentum)?)?;
    }
    if let Some(r) = &rv {
        let k1 = inner as f64;
        r.copy_from(&update_running(
            r,
            &avg(&|k| mom[k].1 * k1 / (k1 - 1.0)),
            momentum,
        )?)?;
    }
    Ok(vec![out.into()])
}

/// The trailing dims a layer norm or RMS norm normalizes over (`normalized_shape`), one
/// check for the CPU kernels, the shape rules and the GPU kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Normalized {
    /// The first normalized dim.
    pub axis: usize,
    /// Elements per normalized row, and rows.
    pub len: usize,
    pub rows: usize,
}

impl Normalized {
    /// `shape` (the node's `normalized_shape`) against an input of `sizes`.
    pub fn of(sizes: &[usize], shape: &[i64]) -> std::result::Result<Normalized, String> {
        let k = shape.len();
        let ok = k <= sizes.len()
            && sizes[sizes.len() - k..]
                .iter()
                .zip(shape)
                .all(|(&s, &n)| s as i64 == n);
        if !ok {
            return Err(format!(
                "normalized_shape {shape:?} does not match the trailing dims of input shape {sizes:?}"
            ));
        }
        let axis = sizes.len() - k;
        Ok(Normalized {
            axis,
            len: sizes[axis..].iter().product(),
            rows: sizes[..axis].iter().product(),
        })
    }
}

fn normalized_tail(ctx: &OpCtx, x: &Tensor, shape: &[i64]) -> Result<(usize, usize)> {
    let n = Normalized::of(&x.sizes, shape).map_err(|m| ctx.err(m))?;
    Ok((n.axis, n.len))
}

fn layer_norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let cf = float_of(ctx, &x)?;
    let (axis, len) = normalized_tail(ctx, &x, &ctx.ints("normalized_shape")?)?;
    let w = per_channel(ctx, ctx.opt_tensor("weight")?, len, "weight")?;
    let b = per_channel(ctx, ctx.opt_tensor("bias")?, len, "bias")?;
    let eps = NormParams::parse(ctx, x.dtype)?.eps;
    let rows = x.sizes[..axis].iter().product::<usize>();
    let (out, mean, rstd) = with_real!(cf, R => {
        let mut v = x.to_vec::<R>();
        let to_r = |p: &Option<Vec<f64>>| p.as_ref().map(|p| p.iter().map(|&a| R::from_f64(a)).collect::<Vec<R>>());
        let (wr, br) = (to_r(&w), to_r(&b));
        // Rows are independent: threads take whole rows (each summed in order, as on one).
        // An empty row keeps NaN statistics (torch's 0/0).
        let mut stats = vec![(f64::NAN, f64::NAN); rows];
        par_chunks2(&mut v, &mut stats, len.max(1), 1, 8 * len, |_, r, st| {
            let (m, var) = moments(r);
            let rstd = 1.0 / (var + eps).sqrt();
            st[0] = (m, rstd);
            let (mr, sr) = (R::from_f64(m), R::from_f64(rstd));
            match (&wr, &br) {
                (None, None) => r.iter_mut().for_each(|a| *a = (*a - mr) * sr),
                (Some(w), Some(b)) => {
                    for ((a, &wj), &bj) in r.iter_mut().zip(w).zip(b) {
                        *a = (*a - mr) * sr * wj + bj;
                    }
                }
                _ => {
                    for (j, a) in r.iter_mut().enumerate() {
                        let wj = wr.as_ref().map_or(R::ONE, |w| w[j]);
                        let bj = br.as_ref().map_or(R::ZERO, |b| b[j]);
                        *a = (*a - mr) * sr * wj + bj;
                    }
                }
            }
        });
        let (means, rstds): (Vec<f64>, Vec<f64>) = stats.into_iter().unzip();
        (typed(v, &x.sizes, x.dtype)?, means, rstds)
    });
    if ctx.target() == "aten.layer_norm.default" {
        return Ok(vec![out.into()]);
    }
    // mean/rstd keep the normalized dims as 1s, in the input's dtype.
    let mut stat_sizes = x.sizes[..axis].to_vec();
    stat_sizes.extend(std::iter::repeat_n(1, x.rank() - axis));
    let mean = typed(mean, &stat_sizes, x.dtype)?;
    let rstd = typed(rstd, &stat_sizes, x.dtype)?;
    Ok(vec![out.into(), mean.into(), rstd.into()])
}

fn group_norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    float_of(ctx, &x)?;
    let native = ctx.target() == "aten.native_group_norm.default";
    let NormParams { groups, eps, .. } = NormParams::parse(ctx, x.dtype)?;
    if x.rank() < 2 {
        return Err(ctx.err(format!(
            "expected an input of at least 2 dims ([N, C, ...]), got shape {:?}",
            x.sizes
        )));
    }
    let (n, c) = (x.sizes[0], x.sizes[1]);
    if groups <= 0 || c % groups as usize != 0 {
        return Err(ctx.err(format!(
            "expected the number of channels ({c}) to be divisible by num_groups ({groups})"
        )));
    }
    let g = groups as usize;
    let inner: usize = x.sizes.iter().skip(2).product();
    let w = per_channel(ctx, ctx.opt_tensor("weight")?, c, "weight")?;
    let b = per_channel(ctx, ctx.opt_tensor("bias")?, c, "bias")?;
    let len = c / g * inner;
    let mom = row_moments(&x.to_vec::<f64>(), n * g, len);
    let mean: Vec<f64> = mom.iter().map(|m| m.0).collect();
    let rstd: Vec<f64> = mom.iter().map(|m| 1.0 / (m.1 + eps).sqrt()).collect();
    // Expand group statistics to (n, c) so the channel affine applies directly.
    let per = c / g;
    let mean_nc: Vec<f64> = (0..n * c)
        .map(|k| mean[(k / c) * g + (k % c) / per])
        .collect();
    let rstd_nc: Vec<f64> = (0..n * c)
        .map(|k| rstd[(k / c) * g + (k % c) / per])
        .collect();
    let out = normalize_channels(&x, &mean_nc, &rstd_nc, &w, &b, true)?;
    if !native {
        return Ok(vec![out.into()]);
    }
    let mean = typed(mean, &[n, g], x.dtype)?;
    let rstd = typed(rstd, &[n, g], x.dtype)?;
    Ok(vec![out.into(), mean.into(), rstd.into()])
}

fn rms_norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let cf = float_of(ctx, &x)?;
    let (axis, len) = normalized_tail(ctx, &x, &ctx.ints("normalized_shape")?)?;
    let w = per_channel(ctx, ctx.opt_tensor("weight")?, len, "weight")?;
    let eps = NormParams::parse(ctx, x.dtype)?.eps;
    let rows = x.sizes[..axis].iter().product::<usize>();
    let (out, rstd) = with_real!(cf, R => {
        let mut v = x.to_vec::<R>();
        let wr: Option<Vec<R>> = w.as_ref().map(|p| p.iter().map(|&a| R::from_f64(a)).collect());
        let mut rstds = Vec::with_capacity(rows);
        for r in v.chunks_exact_mut(len.max(1)).take(if len == 0 { 0 } else { rows }) {
            let ms = r.iter().map(|a| a.to_f64() * a.to_f64()).sum::<f64>() / len as f64;
            let rstd = 1.0 / (ms + eps).sqrt();
            let sr = R::from_f64(rstd);
            for (j, a) in r.iter_mut().enumerate() {
                *a = *a * sr * wr.as_ref().map_or(R::ONE, |w| w[j]);
            }
            rstds.push(rstd);
        }
        if len == 0 {
            rstds = vec![f64::INFINITY; rows];
        }
        (typed(v, &x.sizes, x.dtype)?, rstds)
    });
    if ctx.target() == "aten.rms_norm.default" {
        return Ok(vec![out.into()]);
    }
    let mut stat_sizes = x.sizes[..axis].to_vec();
    stat_sizes.extend(std::iter::repeat_n(1, x.rank() - axis));
    let stat_dtype = if cf == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    Ok(vec![
        out.into(),
        Tensor::from_vec(rstd, &stat_sizes)
            .to_dtype(stat_dtype)?
            .into(),
    ])
}
