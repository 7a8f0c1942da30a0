//! Op family: convolutions. `aten.convolution` (core ATen) and `_convolution`, the training
//! IR's `conv1d/2d/3d` (with int or 'same'/'valid' padding) and `conv_transpose1d/2d/3d`.
//!
//! Every form is parsed into one 3-D [`kernels::Geometry`] (lower-rank convolutions get
//! leading size-1 spatial dims) and computed in f32 (f16/bf16 rounded once at the end, as
//! torch's CPU kernels accumulate in f32) or f64.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

mod depthwise;
mod kernels;

use super::matmul::gemm::{with_contiguous, Float};
use super::{OpCtx, OpTable};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::program::Arg;
use crate::runtime::RValue;
use kernels::Geometry;

pub(crate) fn register(r: &mut OpTable) {
    meta::register(r);
    r.cpu_op("aten.convolution", convolution);
    r.cpu_op("aten._convolution", convolution);
    r.cpu_op("aten.conv1d", conv1d);
    r.cpu_op("aten.conv2d", conv2d);
    r.cpu_op("aten.conv3d", conv3d);
    r.cpu_op("aten.conv_transpose1d", conv_transpose1d);
    r.cpu_op("aten.conv_transpose2d", conv_transpose2d);
    r.cpu_op("aten.conv_transpose3d", conv_transpose3d);
}

/// Padding as given: explicit sizes, or torch's 'same' / 'valid'.
enum Padding {
    Explicit(Vec<i64>),
    Same,
    Valid,
}

/// Everything about a convolution call other than its tensors.
struct Params {
    stride: Vec<i64>,
    padding: Padding,
    dilation: Vec<i64>,
    transposed: bool,
    output_padding: Vec<i64>,
    groups: i64,
}

fn ints_or(ctx: &OpCtx, name: &str, default: i64) -> Result<Vec<i64>> {
    Ok(ctx.opt_ints(name)?.unwrap_or_else(|| vec![default]))
}

fn padding_of(ctx: &OpCtx) -> Result<Padding> {
    match ctx.arg("padding") {
        Some(Arg::Str(s)) => match s.as_str() {
            "same" => Ok(Padding::Same),
            "valid" => Ok(Padding::Valid),
            other => Err(ctx.err(format!(
                "padding must be 'same', 'valid' or a list of ints, got '{other}'"
            ))),
        },
        _ => Ok(Padding::Explicit(ints_or(ctx, "padding", 0)?)),
    }
}

fn convolution(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let p = Params {
        stride: ints_or(ctx, "stride", 1)?,
        padding: padding_of(ctx)?,
        dilation: ints_or(ctx, "dilation", 1)?,
        transposed: ctx.bool_or("transposed", false)?,
        output_padding: ints_or(ctx, "output_padding", 0)?,
        groups: ctx.int_or("groups", 1)?,
    };
    let w = ctx.tensor("weight")?;
    let nd = w
        .rank()
        .checked_sub(2)
        .filter(|&n| (1..=3).contains(&n))
        .ok_or_else(|| {
            ctx.err(format!(
                "weight must be 3-D, 4-D or 5-D, got shape {:?}",
                w.sizes
            ))
        })?;
    run(ctx, nd, p)
}

fn conv_nd(ctx: &mut OpCtx, nd: usize) -> Result<Vec<RValue>> {
    let p = Params {
        stride: ints_or(ctx, "stride", 1)?,
        padding: padding_of(ctx)?,
        dilation: ints_or(ctx, "dilation", 1)?,
        transposed: false,
        output_padding: vec![0],
        groups: ctx.int_or("groups", 1)?,
    };
    run(ctx, nd, p)
}

fn conv1d(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    conv_nd(ctx, 1)
}
fn conv2d(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    conv_nd(ctx, 2)
}
fn conv3d(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    conv_nd(ctx, 3)
}

fn conv_transpose_nd(ctx: &mut OpCtx, nd: usize) -> Result<Vec<RValue>> {
    let p = Params {
        stride: ints_or(ctx, "stride", 1)?,
        padding: padding_of(ctx)?,
        dilation: ints_or(ctx, "dilation", 1)?,
        transposed: true,
        output_padding: ints_or(ctx, "output_padding", 0)?,
        groups: ctx.int_or("groups", 1)?,
    };
    run(ctx, nd, p)
}

fn conv_transpose1d(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    conv_transpose_nd(ctx, 1)
}
fn conv_transpose2d(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    conv_transpose_nd(ctx, 2)
}
fn conv_transpose3d(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    conv_transpose_nd(ctx, 3)
}

/// One per-dim parameter list, checked and placed in the last `nd` of three (D, H, W) slots.
fn spatial(
    ctx: &OpCtx,
    name: &str,
    v: &[i64],
    nd: usize,
    fill: usize,
    min: i64,
) -> Result<[usize; 3]> {
    let v: Vec<i64> = if v.len() == 1 {
        vec![v[0]; nd]
    } else {
        v.to_vec()
    };
    if v.len() != nd {
        return Err(ctx.err(format!("{name} must have 1 or {nd} values, got {v:?}")));
    }
    if let Some(bad) = v.iter().find(|&&x| x < min) {
        return Err(ctx.err(format!("{name} must be at least {min}, got {bad}")));
    }
    let mut out = [fill; 3];
    for (i, &x) in v.iter().enumerate() {
        out[3 - nd + i] = x as usize;
    }
    Ok(out)
}

fn run(ctx: &OpCtx, nd: usize, p: Params) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    let bias = ctx.opt_tensor("bias")?;
    if w.rank() != nd + 2 {
        return Err(ctx.err(format!(
            "weight of a {nd}-D convolution must have rank {}, got shape {:?}",
            nd + 2,
            w.sizes
        )));
    }
    // Unbatched input: [C, *spatial].
    let unbatched = x.rank() == nd + 1;
    if !unbatched && x.rank() != nd + 2 {
        return Err(ctx.err(format!(
            "input of a {nd}-D convolution must have rank {} or {}, got shape {:?}",
            nd + 1,
            nd + 2,
            x.sizes
        )));
    }
    let xs: Vec<usize> = if unbatched {
        [&[1][..], &x.sizes].concat()
    } else {
        x.sizes.clone()
    };
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
    if p.groups < 1 {
        return Err(ctx.err(format!("groups must be positive, got {}", p.groups)));
    }
    let groups = p.groups as usize;
    let stride = spatial(ctx, "stride", &p.stride, nd, 1, 1)?;
    let dil = spatial(ctx, "dilation", &p.dilation, nd, 1, 1)?;
    let mut ks = [1usize; 3];
    ks[3 - nd..].copy_from_slice(&w.sizes[2..]);
    let mut ins = [1usize; 3];
    ins[3 - nd..].copy_from_slice(&xs[2..]);
    let (pad_lo, pad_hi) = match &p.padding {
        Padding::Explicit(v) => {
            let v = spatial(ctx, "padding", v, nd, 0, 0)?;
            (v, v)
        }
        Padding::Valid => ([0; 3], [0; 3]),
        Padding::Same => {
            if p.transposed {
                return Err(ctx.err("padding='same' is not supported for transposed convolutions"));
            }
            if stride != [1, 1, 1] {
                return Err(ctx.err("padding='same' is not supported for strided convolutions"));
            }
            // Odd total padding puts the extra element at the end, as torch does.
            let mut lo = [0; 3];
            let mut hi = [0; 3];
            for i in 0..3 {
                let total = dil[i] * (ks[i] - 1);
                lo[i] = total / 2;
                hi[i] = total - lo[i];
            }
            (lo, hi)
        }
    };
    let c = xs[1];
    let (o, outs) = if p.transposed {
        if w.sizes[0] != c {
            return Err(ctx.err(format!(
                "expected input of shape {:?} to have {} channels, but got {c} channels instead",
                x.sizes, w.sizes[0]
            )));
        }
        let op = spatial(ctx, "output_padding", &p.output_padding, nd, 0, 0)?;
        let mut outs = [1usize; 3];
        for i in 0..3 {
            if op[i] >= stride[i] && op[i] >= dil[i] {
                return Err(ctx.err(format!(
                    "output padding must be smaller than either stride or dilation, got {op:?}"
                )));
            }
            let full = (ins[i] - 1) * stride[i] + dil[i] * (ks[i] - 1) + op[i] + 1;
            outs[i] = full
                .checked_sub(pad_lo[i] + pad_hi[i])
                .filter(|&v| v > 0)
                .ok_or_else(|| {
                    ctx.err(format!(
                        "the output of a transposed convolution of input {:?} would be empty",
                        x.sizes
                    ))
                })?;
        }
        (w.sizes[1] * groups, outs)
    } else {
        if w.sizes[1] * groups != c {
            return Err(ctx.err(format!(
                "expected input of shape {:?} to have {} channels, but got {c} channels instead",
                x.sizes,
                w.sizes[1] * groups
            )));
        }
        let mut outs = [1usize; 3];
        for i in 0..3 {
            let span = dil[i] * (ks[i] - 1) + 1;
            let padded = ins[i] + pad_lo[i] + pad_hi[i];
            if padded < span {
                return Err(ctx.err(format!(
                    "kernel size {:?} (dilated) is larger than the padded input {:?}",
                    &w.sizes[2..],
                    &xs[2..]
                )));
            }
            outs[i] = (padded - span) / stride[i] + 1;
        }
        (w.sizes[0], outs)
    };
    if c % groups != 0 || o % groups != 0 {
        return Err(ctx.err(format!("{c} input channels and {o} output channels must both be divisible by groups = {groups}")));
    }
    if let Some(b) = &bias {
        if b.numel() != o {
            return Err(ctx.err(format!(
                "bias must have {o} elements, got shape {:?}",
                b.sizes
            )));
        }
    }
    let g = Geometry {
        n: xs[0],
        c,
        o,
        groups,
        ins,
        ks,
        outs,
        stride,
        pad_lo,
        dil,
    };
    let out = match x.dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            compute::<f32>(&g, &x, &w, bias.as_ref(), p.transposed)?
        }
        DType::F64 => compute::<f64>(&g, &x, &w, bias.as_ref(), p.transposed)?,
        d => return Err(ctx.err(format!("convolution is not implemented for dtype {d}"))),
    };
    let mut sizes = vec![g.n, o];
    sizes.extend_from_slice(&outs[3 - nd..]);
    if unbatched {
        sizes.remove(0);
    }
    let t = Tensor::from_data(out, &sizes);
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
) -> Result<crate::cpu::Data> {
    let out = with_contiguous::<T, _>(x, |xv| {
        with_contiguous::<T, _>(w, |wv| {
            let bv = bias.map(|b| b.to_vec::<T>());
            if transposed {
                kernels::conv_transposed(g, xv, wv, bv.as_deref())
            } else {
                kernels::conv_forward(g, xv, wv, bv.as_deref())
            }
        })
    })?;
    Ok(T::wrap(out))
}
