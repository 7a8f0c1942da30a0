//! Inference batch norm on the GPU (shaders/norm.wgsl): every form torch exports when it
//! normalizes with the running statistics (`_native_batch_norm_legit_no_training`,
//! `batch_norm` / `native_batch_norm` / `_native_batch_norm_legit` / `_functional` with
//! training=False). Outputs match the CPU kernel's: the saved statistics are empty f32
//! tensors, the functional form returns the running statistics unchanged.

use super::{contiguous, grid, Kc, Out};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use bytemuck::{Pod, Zeroable};

pub const BATCH_NORM: Variant = Variant::new(Shader::Norm, "batch_norm");

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

pub(super) fn batch_norm(k: &mut Kc) -> Out {
    let t = k.target().to_string();
    if t.ends_with(".no_stats") || t.ends_with(".out") {
        return Ok(None);
    }
    let training = !t.contains("no_training") && k.op.bool_or("training", false)?;
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let (Some(rm), Some(rv)) = (k.t("running_mean"), k.t("running_var")) else {
        return Ok(None);
    };
    let (w, b) = (k.t("weight"), k.t("bias"));
    if training
        || (k.is_tensor_arg("weight") && w.is_none())
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
    let eps = k.op.float("eps")? as f32;
    let mut cs = Vec::new();
    for p in per_channel.iter().flatten() {
        let flat = p.view(
            vec![c],
            vec![p.strides.last().copied().unwrap_or(1)],
            p.offset,
        );
        match contiguous(k, &flat)? {
            Some(t) => cs.push(t),
            None => return Ok(None),
        }
    }
    let Some(xc) = contiguous(k, &x)? else {
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
            flags: w.is_some() as u32 | ((b.is_some() as u32) << 1),
            eps,
            _p: [0; 2],
        };
        let (m, v) = (&cs[0], &cs[1]);
        let wt = if w.is_some() { &cs[2] } else { m };
        let bt = match (&w, &b) {
            (Some(_), Some(_)) => &cs[3],
            (None, Some(_)) => &cs[2],
            _ => m,
        };
        k.dispatch(
            &BATCH_NORM,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &xc), (3, m), (4, v), (5, wt), (6, bt)],
            (gx, gy, 1),
        )?;
    }
    if t.starts_with("aten.batch_norm.") || t.starts_with("aten.instance_norm.") {
        return Ok(Some(vec![Slot::T(out)]));
    }
    let save_mean = k.new_out(DType::F32, &[0])?;
    let save_invstd = k.new_out(DType::F32, &[0])?;
    let mut outs = vec![Slot::T(out), Slot::T(save_mean), Slot::T(save_invstd)];
    if t.contains("functional") {
        outs.push(Slot::T(rm));
        outs.push(Slot::T(rv));
    }
    Ok(Some(outs))
}
