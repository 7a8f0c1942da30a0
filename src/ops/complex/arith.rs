//! Complex kernels of elementwise and reduction ops other families own for real tensors
//! (bound by the op table where a node reads or writes a complex tensor), and `angle`.
//! Everything computes in complex128 and rounds once to the result dtype.

use super::{check_stored, complex_tensor, one, real_tensor};
use crate::cpu::complex::{is_cpu_complex, real_dtype};
use crate::cpu::{Tensor, C128};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::engine::{promote, val, Val};
use crate::ops::reduce::{gather_lanes, Reduction};
use crate::ops::{OpCtx, OpTable, Scalar};
use crate::runtime::RValue;
use std::ops::{Add, Div, Mul, Sub};

pub(super) fn register(r: &mut OpTable) {
    for op in ["add", "add_", "sub", "sub_", "rsub"] {
        r.complex(&format!("aten.{op}"), add_sub);
    }
    for op in ["mul", "mul_"] {
        r.complex(&format!("aten.{op}"), mul);
    }
    for op in ["div", "div_", "true_divide", "true_divide_"] {
        r.complex(&format!("aten.{op}"), div);
    }
    for (op, k) in [
        ("neg", neg as crate::ops::Kernel),
        ("abs", abs),
        ("exp", exp),
        ("log", log),
        ("sqrt", sqrt),
        ("reciprocal", reciprocal),
        ("sgn", sgn),
    ] {
        r.complex(&format!("aten.{op}"), k);
    }
    r.complex("aten.sum", sum);
    r.complex("aten.mean", mean);
}

/// A scalar argument as a complex number.
fn scalar_c(s: Scalar) -> C128 {
    C128::new(s.as_f64(), 0.0)
}

/// A binary op's operands read as complex128 and broadcast, its result dtype and shape.
struct Operands {
    x: Vec<C128>,
    y: Vec<C128>,
    dtype: DType,
    shape: Vec<usize>,
}

fn binary(ctx: &OpCtx, a: &str, b: &str) -> Result<Operands> {
    let (x, y) = (val(ctx, a)?, val(ctx, b)?);
    let dtype = promote(&[&x, &y]);
    if !is_cpu_complex(dtype) {
        return Err(ctx.err(format!(
            "complex operands give dtype {dtype}, which the CPU backend does not compute in"
        )));
    }
    let shape = match (&x, &y) {
        (Val::T(p), Val::T(q)) => {
            crate::cpu::broadcast_shapes(&p.sizes, &q.sizes).ok_or_else(|| {
                ctx.err(format!(
                    "shapes {:?} and {:?} cannot be broadcast together",
                    p.sizes, q.sizes
                ))
            })?
        }
        (Val::T(p), _) | (_, Val::T(p)) => p.sizes.clone(),
        _ => vec![],
    };
    let read = |v: &Val| -> Result<Vec<C128>> {
        Ok(match v {
            Val::T(t) => {
                check_stored(ctx, t, "an operand")?;
                t.expand_to(&shape)?.to_vec::<C128>()
            }
            Val::S(s) => vec![scalar_c(*s); shape.iter().product()],
        })
    };
    Ok(Operands {
        x: read(&x)?,
        y: read(&y)?,
        dtype,
        shape,
    })
}

/// The result of an in-place op written into `self` (cast to its dtype), else a new tensor.
fn finish(ctx: &OpCtx, v: Vec<C128>, dtype: DType, shape: &[usize]) -> Result<Vec<RValue>> {
    let inplace = ctx
        .target()
        .split('.')
        .nth(1)
        .is_some_and(|op| op.ends_with('_'));
    if inplace {
        let dst = ctx.tensor("self")?;
        if !dst.dtype.is_complex() {
            return Err(ctx.err(format!(
                "result type {dtype} can't be cast to the desired output type {}",
                dst.dtype
            )));
        }
        let t = complex_tensor(dtype, v, shape)?;
        dst.copy_from(&t)?;
        return one(dst);
    }
    one(complex_tensor(dtype, v, shape)?)
}

fn add_sub(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let Operands { x, y, dtype, shape } = binary(ctx, "self", "other")?;
    let alpha = ctx.opt_scalar("alpha")?.map_or(1.0, |s| s.as_f64());
    let op = ctx.target().split('.').nth(1).unwrap_or("");
    // rsub computes other - alpha * self.
    let v = x
        .into_iter()
        .zip(y)
        .map(|(a, b)| match op {
            "rsub" => b.sub(a.scale(alpha)),
            "sub" | "sub_" => a.sub(b.scale(alpha)),
            _ => a.add(b.scale(alpha)),
        })
        .collect();
    finish(ctx, v, dtype, &shape)
}

fn mul(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let Operands { x, y, dtype, shape } = binary(ctx, "self", "other")?;
    finish(
        ctx,
        x.into_iter().zip(y).map(|(a, b)| a.mul(b)).collect(),
        dtype,
        &shape,
    )
}

fn div(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    if let Some(m) = ctx.opt_str("rounding_mode")? {
        return Err(ctx.err(format!(
            "div with rounding_mode='{m}' is not supported for complex tensors (as in torch)"
        )));
    }
    let Operands { x, y, dtype, shape } = binary(ctx, "self", "other")?;
    finish(
        ctx,
        x.into_iter().zip(y).map(|(a, b)| a.div(b)).collect(),
        dtype,
        &shape,
    )
}

/// The complex input of a unary op.
fn input(ctx: &OpCtx) -> Result<Tensor> {
    let t = ctx.tensor("self")?;
    check_stored(ctx, &t, "the input")?;
    Ok(t)
}

fn unary(ctx: &OpCtx, f: impl Fn(C128) -> C128) -> Result<Vec<RValue>> {
    let t = input(ctx)?;
    let v = t.to_vec::<C128>().into_iter().map(f).collect();
    finish(ctx, v, t.dtype, &t.sizes)
}

fn neg(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    unary(ctx, |z| C128::new(-z.re, -z.im))
}

fn exp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    unary(ctx, C128::exp)
}

fn log(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    unary(ctx, |z| C128::new(z.abs().ln(), z.arg()))
}

/// The principal square root (branch cut on the negative real axis, as C's csqrt).
fn sqrt(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    unary(ctx, |z| {
        let r = z.abs();
        let re = ((r + z.re) / 2.0).max(0.0).sqrt();
        let im = ((r - z.re) / 2.0).max(0.0).sqrt().copysign(z.im);
        C128::new(re, im)
    })
}

fn reciprocal(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    unary(ctx, |z| C128::new(1.0, 0.0).div(z))
}

/// `sgn`: `z / |z|` (0 at 0).
fn sgn(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    unary(ctx, |z| {
        let a = z.abs();
        if a == 0.0 {
            C128::default()
        } else {
            z.scale(1.0 / a)
        }
    })
}

/// `abs` of a complex tensor: the modulus, in the real dtype of its parts.
fn abs(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = input(ctx)?;
    let v = t.to_vec::<C128>().into_iter().map(C128::abs).collect();
    one(real_tensor(real_dtype(t.dtype), v, &t.sizes)?)
}

/// `angle`: `atan2(im, re)` of complex tensors; for real ones π where negative, 0 elsewhere,
/// NaN kept (integers give float32, as torch).
pub(super) fn angle(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = input(ctx)?;
    if t.dtype.is_complex() {
        let v = t.to_vec::<C128>().into_iter().map(C128::arg).collect();
        return one(real_tensor(real_dtype(t.dtype), v, &t.sizes)?);
    }
    let out = crate::ops::elementwise::meta::float_dtype(t.dtype);
    let v = t
        .to_vec::<f64>()
        .into_iter()
        .map(|x| {
            if x.is_nan() {
                x
            } else if x < 0.0 {
                std::f64::consts::PI
            } else {
                0.0
            }
        })
        .collect();
    one(real_tensor(out, v, &t.sizes)?)
}

/// `sum` / `mean` of a complex tensor over `dim` (all dims when absent), in complex128.
fn reduce(ctx: &OpCtx, mean: bool) -> Result<Vec<RValue>> {
    let x = input(ctx)?;
    let red = Reduction::parse(ctx, x.rank())?;
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(x.dtype);
    if !is_cpu_complex(dtype) {
        return Err(ctx.err(format!(
            "a complex input reduces to a complex dtype, not {dtype}"
        )));
    }
    let (data, lanes, len) = gather_lanes::<C128>(&x, &red.mask);
    let v = (0..lanes)
        .map(|l| {
            let s = data[l * len..(l + 1) * len]
                .iter()
                .fold(C128::default(), |acc, &z| acc.add(z));
            if mean {
                s.scale(1.0 / len as f64)
            } else {
                s
            }
        })
        .collect();
    one(complex_tensor(dtype, v, &red.out_sizes(&x.sizes))?)
}

fn sum(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    reduce(ctx, false)
}

fn mean(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    reduce(ctx, true)
}
