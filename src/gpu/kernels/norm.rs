//! Inference batch norm on the GPU (shaders/norm.wgsl): every form torch exports when it
//! normalizes with the running statistics (`_native_batch_norm_legit_no_training`,
//! `batch_norm` / `native_batch_norm` / `_native_batch_norm_legit` / `_functional` with
//! training=False). Outputs match the CPU kernel's: the saved statistics are empty f32
//! tensors, the functional form returns the running statistics unchanged.

use super::index::copy_into;
use super::{contiguous, elementwise, grid, reduce, BinaryOp, KernelCtx, Operand, Out, UnaryOp};
use super::{RowForm, RowMeta, LAYER_NORM, LAYER_NORM_ROW};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{contiguous_strides, lock, GTensor};
use crate::ops::norm::NormParams;
use bytemuck::{Pod, Zeroable};

pub const BATCH_NORM: Variant = Variant::new(Shader::Norm, "batch_norm");

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, one_float, On, F16};
    t.variants(&[BATCH_NORM, LAYER_NORM, LAYER_NORM_ROW]);
    t.kernel(
        &[
            "aten._native_batch_norm_legit_no_training",
            "aten._native_batch_norm_legit",
            "aten._native_batch_norm_legit_functional",
            "aten.native_batch_norm",
            "aten.batch_norm",
        ],
        On::NotOut,
        batch_norm,
        all_f32,
    );
    t.kernel(&["aten.layer_norm"], On::NotOut, layer_norm, one_float)
        .f16(F16::Native);
    t.kernel(
        &["aten.native_layer_norm"],
        On::NotOut,
        layer_norm,
        one_float,
    )
    .f16(F16::Mixed);
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct BatchNormMeta {
    pub numel: u32,
    pub channels: u32,
    pub inner: u32,
    pub row: u32,
    pub flags: u32,
    pub eps: f32,
    pub _p: [u32; 2],
}

pub(super) fn batch_norm(k: &mut KernelCtx) -> Out {
    let t = k.target().to_string();
    if t.ends_with(".out") {
        return Ok(None);
    }
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let p = NormParams::parse(&k.op, x.dtype)?;
    let training = p.training;
    let stats = if t.ends_with(".no_stats") {
        None
    } else {
        k.t("running_mean").zip(k.t("running_var"))
    };
    // Batch statistics: training, or no running statistics to normalize with.
    if training || stats.is_none() {
        return batch_norm_train(k, x, training);
    }
    let Some((rm, rv)) = stats else {
        return Ok(None);
    };
    let (w, b) = (k.t("weight"), k.t("bias"));
    if (k.is_tensor_arg("weight") && w.is_none())
        || (k.is_tensor_arg("bias") && b.is_none())
        || x.rank() < 2
        || !k.out_is(DType::F32)
    {
        return Ok(None);
    }
    let c = x.sizes[1];
    let per_channel = [Some(&rm), Some(&rv), w.as_ref(), b.as_ref()];
    if x.dtype != DType::F32
        || per_channel
            .iter()
            .flatten()
            .any(|p| p.dtype != DType::F32 || p.numel() != c || !k.fits(p))
        || !k.fits(&x)
        || x.numel() >= u32::MAX as usize
    {
        return Ok(None);
    }
    let eps = p.eps as f32;
    let mut cs = Vec::new();
    for p in per_channel.iter().flatten() {
        match flat(k, p, c)? {
            Some(t) => cs.push(t),
            None => return Ok(None),
        }
    }
    let out = encode_normalize(k, &x, &cs, w.is_some(), b.is_some(), eps)?;
    let Some(out) = out else {
        return Ok(None);
    };
    if t.starts_with("aten.batch_norm.") || t.starts_with("aten.instance_norm.") {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let save_mean = k.new_out(DType::F32, &[0])?;
    let save_invstd = k.new_out(DType::F32, &[0])?;
    let mut outs = vec![
        Slot::Tensor(out),
        Slot::Tensor(save_mean),
        Slot::Tensor(save_invstd),
    ];
    if t.contains("functional") {
        outs.push(Slot::Tensor(rm));
        outs.push(Slot::Tensor(rv));
    }
    Ok(Some(outs))
}

/// (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c]; `cs` holds the contiguous
/// per-channel mean, var, then the weight and bias that are present.
fn encode_normalize(
    k: &mut KernelCtx,
    x: &GTensor,
    cs: &[GTensor],
    has_w: bool,
    has_b: bool,
    eps: f32,
) -> Result<Option<GTensor>> {
    let c = x.sizes[1];
    let Some(xc) = contiguous(k, x)? else {
        return Ok(None);
    };
    let out = k.new_out(DType::F32, &x.sizes)?;
    let numel = x.numel();
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        let meta = BatchNormMeta {
            numel: numel as u32,
            channels: c as u32,
            inner: x.sizes[2..].iter().product::<usize>() as u32,
            row,
            flags: has_w as u32 | ((has_b as u32) << 1),
            eps,
            _p: [0; 2],
        };
        let (m, v) = (&cs[0], &cs[1]);
        let wt = if has_w { &cs[2] } else { m };
        let bt = match (has_w, has_b) {
            (true, true) => &cs[3],
            (false, true) => &cs[2],
            _ => m,
        };
        k.dispatch(
            &BATCH_NORM,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &xc), (3, m), (4, v), (5, wt), (6, bt)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(out))
}

/// The contiguous [c] form of a per-channel tensor.
fn flat(k: &mut KernelCtx, p: &GTensor, c: usize) -> Result<Option<GTensor>> {
    let f = p.view(
        vec![c],
        vec![p.strides.last().copied().unwrap_or(1)],
        p.offset,
    );
    contiguous(k, &f)
}

/// Batch norm with batch statistics (training, or no running statistics), as the CPU
/// kernel: normalized by the biased per-channel variance; in training the running mean
/// and variance move toward the batch mean and the unbiased variance by `momentum`
/// (`(1 - m) * running + m * batch` as a lerp), in place except in the functional form,
/// which returns them. The saved statistics are the batch mean and 1 / sqrt(var + eps).
fn batch_norm_train(k: &mut KernelCtx, x: GTensor, training: bool) -> Out {
    let t = k.target().to_string();
    let (w, b) = (k.t("weight"), k.t("bias"));
    let stats = if t.ends_with(".no_stats") {
        None
    } else {
        k.t("running_mean").zip(k.t("running_var"))
    };
    if (k.is_tensor_arg("weight") && w.is_none())
        || (k.is_tensor_arg("bias") && b.is_none())
        || (!t.ends_with(".no_stats")
            && (k.is_tensor_arg("running_mean") || k.is_tensor_arg("running_var"))
            && stats.is_none())
        || x.rank() < 2
        || x.dtype != DType::F32
        || !k.out_is(DType::F32)
        || !k.fits(&x)
        || x.numel() >= u32::MAX as usize
    {
        return Ok(None);
    }
    let c = x.sizes[1];
    let n = x.numel() / c.max(1);
    // One value per channel: torch errors in training, the unbiased variance divides by 0.
    if c == 0 || n < 2 {
        return Ok(None);
    }
    let running: Vec<&GTensor> = stats.iter().flat_map(|(m, v)| [m, v]).collect();
    if [w.as_ref(), b.as_ref()]
        .into_iter()
        .flatten()
        .chain(running.iter().copied())
        .any(|p| p.dtype != DType::F32 || p.numel() != c || !k.fits(p))
    {
        return Ok(None);
    }
    let p = NormParams::parse(&k.op, x.dtype)?;
    let (eps, momentum) = (p.eps as f32, p.momentum as f32);
    // Mean and biased variance over every dim but 1.
    let red: Vec<bool> = (0..x.rank()).map(|d| d != 1).collect();
    let mut pl = reduce::plan(&x, &red, false);
    pl.meta.scale = 1.0 / n as f32;
    k.ensure(&x)?;
    let (var, mean) = if reduce::stats_fit(k, &pl, reduce::StatsOp::Var) {
        let var = reduce::encode_stats(k, &x, &pl, reduce::StatsOp::Var)?;
        (
            var,
            reduce::encode_stats(k, &x, &pl, reduce::StatsOp::Mean)?,
        )
    } else {
        match reduce::var_in_parts(k, &x, &red, &pl, false)? {
            Some(vm) => vm,
            None => return Ok(None),
        }
    };
    let mut cs = vec![mean.clone(), var.clone()];
    for p in [w.as_ref(), b.as_ref()].into_iter().flatten() {
        match flat(k, p, c)? {
            Some(f) => cs.push(f),
            None => return Ok(None),
        }
    }
    let Some(out) = encode_normalize(k, &x, &cs, w.is_some(), b.is_some(), eps)? else {
        return Ok(None);
    };
    let ew = |k: &mut KernelCtx, v, a: &GTensor, b: Option<&Operand>, alpha: f32, beta: f32| {
        elementwise(k, v, DType::F32, a, b, None, alpha, beta)
    };
    // The running statistics moved toward the batch's.
    let mut new_stats = None;
    if let (Some((rm, rv)), true) = (&stats, training) {
        let Some(unbiased) = ew(
            k,
            UnaryOp::Affine.variant(),
            &var,
            None,
            n as f32 / (n - 1) as f32,
            0.0,
        )?
        else {
            return Ok(None);
        };
        let (Some(rmf), Some(rvf)) = (flat(k, rm, c)?, flat(k, rv, c)?) else {
            return Ok(None);
        };
        let lerp = BinaryOp::Lerp.variant();
        let (Some(nm), Some(nv)) = (
            ew(
                k,
                lerp,
                &rmf,
                Some(&Operand::T(mean.clone())),
                momentum,
                0.0,
            )?,
            ew(k, lerp, &rvf, Some(&Operand::T(unbiased)), momentum, 0.0)?,
        ) else {
            return Ok(None);
        };
        new_stats = Some((nm, nv));
    }
    let functional = t.contains("functional");
    if let (Some((rm, rv)), Some((nm, nv)), false) = (&stats, &new_stats, functional) {
        // Eager updates the running buffers in place.
        for (dst, src) in [(rm, nm), (rv, nv)] {
            let s = src.view(dst.sizes.clone(), contiguous_strides(&dst.sizes), 0);
            copy_into(k, &s, dst)?;
            lock(&dst.cell).cpu_valid = false;
        }
    }
    if t.starts_with("aten.batch_norm.") {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    // 1 / sqrt(var + eps)
    let Some(ve) = ew(k, UnaryOp::Affine.variant(), &var, None, 1.0, eps)? else {
        return Ok(None);
    };
    let Some(invstd) = ew(k, UnaryOp::Rsqrt.variant(), &ve, None, 1.0, 0.0)? else {
        return Ok(None);
    };
    let mut outs = vec![Slot::Tensor(out), Slot::Tensor(mean), Slot::Tensor(invstd)];
    if functional {
        let (nm, nv) = match (new_stats, stats) {
            (Some((nm, nv)), Some((rm, rv))) => (
                nm.view(rm.sizes.clone(), contiguous_strides(&rm.sizes), 0),
                nv.view(rv.sizes.clone(), contiguous_strides(&rv.sizes), 0),
            ),
            (None, Some((rm, rv))) => (rm, rv),
            _ => return Ok(None),
        };
        outs.push(Slot::Tensor(nm));
        outs.push(Slot::Tensor(nv));
    }
    Ok(Some(outs))
}

/// layer_norm / native_layer_norm over the trailing `normalized_shape` dims.
/// The rows a row norm normalizes (see [`RowMeta`]'s `inner` / `groups`).
pub(super) struct RowNorm {
    pub rows: usize,
    pub cols: usize,
    pub eps: f32,
    pub inner: usize,
    pub groups: usize,
}

/// One dispatch normalizing each row of contiguous `x` into `out` ([out, x]), with the weight
/// and bias if given, writing each row's mean and 1/std into `stats`.
pub(super) fn encode_row_norm(
    k: &mut KernelCtx,
    r: &RowNorm,
    elems: crate::gpu::shaders::Elems,
    [out, xc]: [&GTensor; 2],
    wc: Option<&GTensor>,
    bc: Option<&GTensor>,
    [mean, rstd]: [&GTensor; 2],
) -> Result<()> {
    if r.rows * r.cols == 0 {
        return Ok(());
    }
    let (v, (gx, gy, row)) =
        RowForm::of(k.r.dev, r.cols).variant(LAYER_NORM, LAYER_NORM_ROW.entry, r.rows);
    let meta = RowMeta {
        rows: r.rows as u32,
        cols: r.cols as u32,
        row,
        flags: wc.is_some() as u32 | ((bc.is_some() as u32) << 1),
        eps: r.eps,
        inner: r.inner as u32,
        groups: r.groups as u32,
        _p: 0.0,
    };
    let wref = wc.unwrap_or(xc);
    let bref = bc.unwrap_or(xc);
    k.dispatch(
        &v.typed(elems),
        bytemuck::bytes_of(&meta),
        &[
            (1, out),
            (2, xc),
            (3, wref),
            (4, bref),
            (5, mean),
            (6, rstd),
        ],
        (gx, gy, 1),
    )
}

pub(super) fn layer_norm(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let (w, b) = (k.t("weight"), k.t("bias"));
    let d = x.dtype;
    let Some(elems) = k.elems(d, d) else {
        return Ok(None);
    };
    if !k.out_is(d)
        || w.as_ref().is_some_and(|t| t.dtype != d)
        || b.as_ref().is_some_and(|t| t.dtype != d)
    {
        return Ok(None);
    }
    // The mean and rstd outputs have the input's dtype (the shader writes them as TOut).
    let stats = k.target().starts_with("aten.native_layer_norm");
    if stats && (k.out_dtype(1) != Some(d) || k.out_dtype(2) != Some(d)) {
        return Ok(None);
    }
    let ns = k.op.ints("normalized_shape")?;
    let norm = crate::ops::norm::Normalized::of(&x.sizes, &ns).map_err(|m| k.op.err(m))?;
    if ns.is_empty() {
        return Ok(None);
    }
    let axis = norm.axis;
    let eps = NormParams::parse(&k.op, x.dtype)?.eps as f32;
    let (cols, rows) = (norm.len, norm.rows);
    if !super::rows_fit(k, cols) {
        return Ok(None);
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let wc = match &w {
        Some(w) => match contiguous(k, w)? {
            Some(t) => Some(t),
            None => return Ok(None),
        },
        None => None,
    };
    let bc = match &b {
        Some(b) => match contiguous(k, b)? {
            Some(t) => Some(t),
            None => return Ok(None),
        },
        None => None,
    };
    let out = k.new_out(d, &x.sizes)?;
    let mut stat_sizes: Vec<usize> = x.sizes[..axis].to_vec();
    stat_sizes.extend(std::iter::repeat_n(1, ns.len()));
    let mean = k.new_out(d, &stat_sizes)?;
    let rstd = k.new_out(d, &stat_sizes)?;
    let rows_of = RowNorm {
        rows,
        cols,
        eps,
        inner: 0,
        groups: 0,
    };
    encode_row_norm(
        k,
        &rows_of,
        elems,
        [&out, &xc],
        wc.as_ref(),
        bc.as_ref(),
        [&mean, &rstd],
    )?;
    if stats {
        Ok(Some(vec![
            Slot::Tensor(out),
            Slot::Tensor(mean),
            Slot::Tensor(rstd),
        ]))
    } else {
        Ok(Some(vec![Slot::Tensor(out)]))
    }
}
