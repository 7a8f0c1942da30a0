//! Op family: convolutions. `aten.convolution` (core ATen) and `_convolution`, the training
//! IR's `conv1d/2d/3d` (with int or 'same'/'valid' padding) and `conv_transpose1d/2d/3d`;
//! the sliding windows `im2col` / `col2im` (`unfold.rs`).
//!
//! Every form is parsed into one [`ConvParams`] and checked into one 3-D [`Geometry`]
//! (`geometry.rs`, shared with the shape rule and the GPU kernel; lower-rank convolutions get
//! leading size-1 spatial dims) and computed in f32 (f16/bf16 rounded once at the end, as
//! torch's CPU kernels accumulate in f32) or f64.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

mod depthwise;
mod direct;
pub(crate) mod geometry;
mod kernels;
mod narrow;
mod packed;
pub(crate) mod unfold;

use super::matmul::gemm::{with_contiguous, Float};
use super::{OpCtx, OpTable};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::epilogue::{Bias, TileAct};
use crate::runtime::RValue;
pub(crate) use geometry::{Conv, ConvParams};
pub(crate) use kernels::Geometry;
use kernels::PlanePost;

/// Each op once (every overload), with its CPU kernel and its shape rule (`meta.rs`).
pub(crate) fn register(r: &mut OpTable) {
    unfold::register(r);
    for op in [
        "convolution",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ] {
        r.define_op(&format!("aten.{op}"), convolution, meta::conv);
    }
}

fn convolution(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let p = ConvParams::parse(ctx)?;
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    let bias = ctx.opt_tensor("bias")?;
    let conv = p
        .geometry(&x.sizes, &w.sizes, bias.as_ref().map(|b| b.numel()))
        .map_err(|m| ctx.err(m))?;
    if x.dtype != w.dtype {
        return Err(ctx.err(format!(
            "input type ({}) and weight type ({}) should be the same",
            x.dtype, w.dtype
        )));
    }
    if let Some(b) = &bias {
        if b.dtype != w.dtype {
            return Err(ctx.err(format!(
                "input type ({}) and bias type ({}) should be the same",
                x.dtype, b.dtype
            )));
        }
    }
    let g = &conv.geo;
    let out = match x.dtype {
        #[cfg(target_arch = "x86_64")]
        DType::F32 if !conv.transposed && narrow::applies(g) => {
            let act = ctx.state.tile_act.take();
            let post = act.map(|a| {
                move |s: &mut [f32]| {
                    // SAFETY: `s` is a valid, exclusive slice.
                    unsafe {
                        TileAct::bias_then(Some(a), Bias::None, s.as_mut_ptr(), 0, [1, s.len()])
                    }
                }
            });
            let post = post.as_ref().map(|f| f as &(dyn Fn(&mut [f32]) + Sync));
            // The weights blocked once per session (per run when they are not frozen state).
            let derive = || {
                Ok(with_contiguous::<f32, _>(&w, |wv| {
                    narrow::pack_weights(g, wv)
                }))
            };
            let nw = match ctx.prepared("weight", &w, derive)? {
                Some(nw) => nw,
                None => std::sync::Arc::new(derive()?.0),
            };
            let len = g.n * g.o * g.out_plane();
            let mut out = Vec::<f32>::with_capacity(len);
            let bv = bias.as_ref().map(|b| b.to_vec::<f32>());
            with_contiguous::<f32, _>(&x, |xv| {
                let dst = &mut out.spare_capacity_mut()[..len];
                narrow::narrow(g, xv, &nw, bv.as_deref(), dst, post)
            });
            // SAFETY: `narrow` wrote all `len` outputs.
            unsafe { out.set_len(len) };
            <f32 as crate::cpu::Elem>::wrap(out)
        }
        #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
        DType::F32 | DType::F16 | DType::BF16 if !conv.transposed && packed::applies(g) => {
            // The weights packed once per session (per run when they are not frozen state).
            let isa = super::matmul::sgemm::isa().ok_or_else(|| ctx.err("no packed GEMM"))?;
            let derive = || {
                Ok(with_contiguous::<f32, _>(&w, |wv| {
                    packed::pack_weights(isa, g, wv)
                }))
            };
            let pw = match ctx.prepared("weight", &w, derive)? {
                Some(pw) => pw,
                None => std::sync::Arc::new(derive()?.0),
            };
            let bv = bias.as_ref().map(|b| b.to_vec::<f32>());
            // A fused activation (an f32 result's, as the unfused op would compute it),
            // applied to each tile as the GEMM finishes it.
            let act = if x.dtype == DType::F32 {
                ctx.state.tile_act.take()
            } else {
                None
            };
            let out =
                with_contiguous::<f32, _>(&x, |xv| packed::forward(g, xv, &pw, bv.as_deref(), act));
            <f32 as crate::cpu::Elem>::wrap(out)
        }
        DType::F32 | DType::F16 | DType::BF16 => {
            // A fused activation of an f32 result, applied as the kernel finishes each part.
            let act = if x.dtype == DType::F32 && !conv.transposed {
                ctx.state.tile_act.take()
            } else {
                None
            };
            let post = act.map(|a| {
                move |s: &mut [f32]| {
                    // SAFETY: `s` is a valid, exclusive slice.
                    unsafe {
                        TileAct::bias_then(Some(a), Bias::None, s.as_mut_ptr(), 0, [1, s.len()])
                    }
                }
            });
            let post = post.as_ref().map(|f| f as &(dyn Fn(&mut [f32]) + Sync));
            compute::<f32>(g, &x, &w, bias.as_ref(), conv.transposed, post)?
        }
        DType::F64 => compute::<f64>(g, &x, &w, bias.as_ref(), conv.transposed, None)?,
        d => return Err(ctx.err(format!("convolution is not implemented for dtype {d}"))),
    };
    let t = Tensor::from_data(out, &conv.out_sizes());
    let t = if t.dtype != x.dtype {
        t.to_dtype(x.dtype)?
    } else {
        t
    };
    Ok(vec![RValue::Tensor(t)])
}

fn compute<T: Float>(
    g: &Geometry,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    transposed: bool,
    post: PlanePost<T>,
) -> Result<crate::cpu::Data> {
    let out = with_contiguous::<T, _>(x, |xv| {
        with_contiguous::<T, _>(w, |wv| {
            let bv = bias.map(|b| b.to_vec::<T>());
            if transposed {
                kernels::conv_transposed(g, xv, wv, bv.as_deref())
            } else {
                kernels::conv_forward(g, xv, wv, bv.as_deref(), post)
            }
        })
    })?;
    Ok(T::wrap(out))
}
