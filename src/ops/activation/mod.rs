//! Op family: activations (relu, gelu, silu, hardswish, softplus, elu, glu, prelu, ...) and
//! their in-place forms. Formulas are torch's CPU kernels' (f16/bf16 computed in f32), so
//! NaN propagation and the branch points match.

// Polynomial and rational coefficients are quoted exactly as published.
#![allow(clippy::excessive_precision)]

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;
/// The activations' parameters, parsed once for every backend.
pub(crate) mod params;

use super::elementwise::engine::{output, run_unary, zip_map, UnaryOp};
use super::elementwise::real::Real;
use super::elementwise::ternary::clamp_scalars;
use super::util::wrap_dim;
use super::{Kernel, OpCtx, OpTable, Scalar};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::RValue;
pub(crate) use params::{Bounds, ThresholdParams};

/// Each op once (every overload), with its CPU kernel and its shape rule (`meta.rs`): the
/// activations keep their input's shape and dtype, and each has an in-place form `op_`.
pub(crate) fn register(r: &mut OpTable) {
    use crate::ops::elementwise::meta::same;
    let both = |r: &mut OpTable, name: &str, k: Kernel| {
        r.define_op(&format!("aten.{name}"), k, same);
        r.define_op(&format!("aten.{name}_"), k, same);
    };
    both(r, "relu", relu);
    both(r, "relu6", bounded);
    both(r, "hardtanh", bounded);
    both(r, "leaky_relu", leaky_relu);
    both(r, "elu", elu);
    both(r, "selu", elu);
    both(r, "celu", elu);
    both(r, "gelu", gelu);
    both(r, "silu", silu);
    both(r, "mish", mish);
    both(r, "hardswish", hardswish);
    both(r, "hardsigmoid", hardsigmoid);
    both(r, "softplus", softplus);
    both(r, "threshold", threshold);
    both(r, "rrelu", rrelu);
    both(r, "rrelu_with_noise", rrelu);
    r.define_op("aten.rrelu_with_noise_functional", rrelu, meta::two_same);
    r.define_op("aten.hardshrink", hardshrink, same);
    r.define_op("aten.softshrink", softshrink, same);
    r.define_op("aten.log_sigmoid", log_sigmoid, same);
    r.define_op("aten.log_sigmoid_forward", log_sigmoid, meta::two_same);
    r.define_op("aten.glu", glu, meta::glu);
    r.define_op("aten.prelu", prelu, same);
    r.define_op("aten._prelu_kernel", prelu, same);
}

/// Apply `op` to `self` in its own dtype (f16/bf16 computed in f32). `ints`: whether integer
/// tensors are accepted (relu, threshold), as in torch.
fn act<O: UnaryOp>(ctx: &mut OpCtx, op: &O, ints: bool) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if !(t.dtype.is_float() || ints && t.dtype != DType::Bool) {
        return Err(ctx.err(format!("is not implemented for dtype {}", t.dtype)));
    }
    let r = run_unary(&t, t.dtype, op)?;
    output(ctx, &t, r)
}

/// One op per formula; `$p` are its parameters, parsed once from the node (`params.rs`)
/// and read by the GPU kernels too.
macro_rules! unary_op {
    ($st:ident { $($p:ident),* } |$s:ident, $x:ident| $e:expr, |$i:ident| $ie:expr) => {
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub(crate) struct $st {
            $(pub $p: f64,)*
        }
        impl UnaryOp for $st {
            #[inline]
            fn float<R: Real>(&self, $x: R) -> R {
                let $s = self;
                let _ = $s;
                $e
            }
            #[inline]
            fn int(&self, $i: i64) -> i64 {
                $ie
            }
        }
    };
}

unary_op!(Relu {} | _s, x | x.std_max(R::ZERO), |i| i.max(0));
unary_op!(
    LeakyRelu { slope } | s,
    x | if x > R::ZERO { x } else { x * R::c(s.slope) },
    |i| i
);
// torch: x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale.
unary_op!(
    Elu {
        alpha,
        scale,
        input_scale
    } | s,
    x | if x <= R::ZERO {
        (x * R::c(s.input_scale)).exp_m1() * R::c(s.alpha * s.scale)
    } else {
        x * R::c(s.scale)
    },
    |i| i
);
unary_op!(
    GeluErf {} | _s,
    x | x * R::c(0.5) * (R::ONE + (x * R::c(std::f64::consts::FRAC_1_SQRT_2)).erf()),
    |i| i
);
unary_op!(
    GeluTanh {} | _s,
    x | {
        let k = R::c((2.0 / std::f64::consts::PI).sqrt());
        R::c(0.5) * x * (R::ONE + (k * (x + R::c(0.044715) * x * x * x)).tanh())
    },
    |i| i
);
unary_op!(Silu {} | _s, x | x / (R::ONE + (-x).exp()), |i| i);
unary_op!(Mish {} | _s, x | x * x.exp().ln_1p().tanh(), |i| i);
unary_op!(
    Hardswish {} | _s,
    x | x * (x + R::c(3.0)).std_max(R::ZERO).std_min(R::c(6.0)) / R::c(6.0),
    |i| i
);
unary_op!(
    Hardsigmoid {} | _s,
    x | (x + R::c(3.0)).std_max(R::ZERO).std_min(R::c(6.0)) / R::c(6.0),
    |i| i
);
unary_op!(
    Softplus { beta, threshold } | s,
    x | {
        let b = R::c(s.beta);
        if x * b > R::c(s.threshold) {
            x
        } else {
            (x * b).exp().ln_1p() / b
        }
    },
    |i| i
);
unary_op!(
    Threshold { threshold, value } | s,
    x | if x <= R::c(s.threshold) {
        R::c(s.value)
    } else {
        x
    },
    |i| i
);
unary_op!(
    Hardshrink { lambd } | s,
    x | if x >= R::c(-s.lambd) && x <= R::c(s.lambd) {
        R::ZERO
    } else {
        x
    },
    |i| i
);
unary_op!(
    Softshrink { lambd } | s,
    x | {
        let l = R::c(s.lambd);
        if x > l {
            x - l
        } else if x < -l {
            x + l
        } else {
            x * R::ZERO
        }
    },
    |i| i
);
// min(x, 0) - log1p(exp(-|x|)): stable for large |x|.
unary_op!(
    LogSigmoid {} | _s,
    x | x.std_min(R::ZERO) - (-x.abs()).exp().ln_1p(),
    |i| i
);

fn relu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    act(ctx, &Relu {}, true)
}

fn clamp_act(ctx: &mut OpCtx, lo: Scalar, hi: Scalar) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.dtype == DType::Bool {
        return Err(ctx.err("is not implemented for bool tensors"));
    }
    let r = clamp_scalars(&t, t.dtype, Some(lo), Some(hi))?;
    output(ctx, &t, r)
}

/// relu6 and hardtanh: a clamp to [`Bounds`].
fn bounded(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let b = Bounds::parse(ctx)?;
    clamp_act(ctx, b.lo, b.hi)
}

fn leaky_relu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let op = LeakyRelu::parse(ctx)?;
    act(ctx, &op, false)
}

/// elu, selu and celu: one formula, [`Elu::parse`] reads which.
fn elu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let op = Elu::parse(ctx)?;
    act(ctx, &op, false)
}

fn gelu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    match params::gelu_tanh(ctx)? {
        false => act(ctx, &GeluErf {}, false),
        true => act(ctx, &GeluTanh {}, false),
    }
}

fn silu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    act(ctx, &Silu {}, false)
}

fn mish(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    act(ctx, &Mish {}, false)
}

fn hardswish(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    act(ctx, &Hardswish {}, false)
}

fn hardsigmoid(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    act(ctx, &Hardsigmoid {}, false)
}

fn softplus(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let op = Softplus::parse(ctx)?;
    act(ctx, &op, false)
}

fn threshold(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let ThresholdParams {
        threshold: th,
        value,
    } = ThresholdParams::parse(ctx)?;
    let t = ctx.tensor("self")?;
    if t.dtype.is_float() {
        return act(
            ctx,
            &Threshold {
                threshold: th.as_f64(),
                value: value.as_f64(),
            },
            false,
        );
    }
    // Integer tensors compare in i64 (a float threshold is compared exactly, not truncated).
    let v = match value {
        Scalar::Int(i) => i,
        other => other.as_f64() as i64,
    };
    let th = th.as_f64();
    let r = super::elementwise::engine::finish(
        super::elementwise::engine::map::<i64, i64>(&t, |x| if (x as f64) <= th { v } else { x }),
        t.dtype,
    )?;
    output(ctx, &t, r)
}

fn hardshrink(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let op = Hardshrink::parse(ctx)?;
    act(ctx, &op, false)
}

fn softshrink(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let op = Softshrink::parse(ctx)?;
    act(ctx, &op, false)
}

/// log_sigmoid, and log_sigmoid_forward (whose second output, a backward buffer, is empty).
fn log_sigmoid(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let mut out = act(ctx, &LogSigmoid {}, false)?;
    if ctx.target().starts_with("aten.log_sigmoid_forward") {
        let d = ctx.tensor("self")?.dtype;
        out.push(RValue::Tensor(Tensor::zeros(d, &[0])?));
    }
    Ok(out)
}

/// rrelu and rrelu_with_noise (+ `_functional`, in-place): in eval, leaky_relu with the mean
/// slope; in training, a random slope per non-positive element from the run's generator,
/// recorded in `noise` (1 elsewhere), as torch does.
fn rrelu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let lower = ctx.float_or("lower", 0.125)?;
    let upper = ctx.float_or("upper", 1.0 / 3.0)?;
    let noise = ctx.opt_tensor("noise")?;
    let functional = ctx.target().starts_with("aten.rrelu_with_noise_functional");
    let training = ctx.bool_or("training", false)?;
    let mut out = if !training {
        act(
            ctx,
            &LeakyRelu {
                slope: (lower + upper) / 2.0,
            },
            false,
        )?
    } else {
        let t = ctx.tensor("self")?;
        if !t.dtype.is_float() {
            return Err(ctx.err(format!("is not implemented for dtype {}", t.dtype)));
        }
        let x = t.to_vec::<f64>();
        let rng = &mut ctx.state.rng;
        let slopes: Vec<f64> = x
            .iter()
            .map(|&v| {
                if v <= 0.0 {
                    lower + (upper - lower) * rng.uniform()
                } else {
                    1.0
                }
            })
            .collect();
        let y: Vec<f64> = x.iter().zip(&slopes).map(|(&v, &s)| v * s).collect();
        if let Some(n) = &noise {
            if n.numel() != slopes.len() {
                return Err(ctx.err(format!(
                    "noise has {} elements, the input {}",
                    n.numel(),
                    slopes.len()
                )));
            }
            // rrelu_with_noise mutates `noise`; the functional form returns a new one.
            let fresh = Tensor::from_vec(slopes, &t.sizes).to_dtype(n.dtype)?;
            if functional {
                let r = Tensor::from_vec(y, &t.sizes).to_dtype(t.dtype)?;
                return Ok(vec![RValue::Tensor(r), RValue::Tensor(fresh)]);
            }
            n.copy_from(&fresh)?;
        }
        let r = Tensor::from_vec(y, &t.sizes).to_dtype(t.dtype)?;
        output(ctx, &t, r)?
    };
    if functional {
        let n = noise.ok_or_else(|| ctx.err("missing argument 'noise'"))?;
        out.push(RValue::Tensor(n.to_dtype(n.dtype)?));
    }
    Ok(out)
}

/// glu: the first half of `dim` times the sigmoid of the second half.
fn glu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.rank() == 0 {
        return Err(ctx.err("glu does not support scalars because halving size must be even"));
    }
    let d = wrap_dim(ctx, ctx.int_or("dim", -1)?, t.rank())?;
    let n = t.sizes[d];
    if n % 2 != 0 {
        return Err(ctx.err(format!(
            "Halving dimension must be even, but dimension {d} is size {n}"
        )));
    }
    if !t.dtype.is_float() {
        return Err(ctx.err(format!("is not implemented for dtype {}", t.dtype)));
    }
    let mut sizes = t.sizes.clone();
    sizes[d] = n / 2;
    let step = t.strides[d] * (n / 2);
    let a = t.view_with(sizes.clone(), t.strides.clone(), t.offset);
    let b = t.view_with(sizes, t.strides.clone(), t.offset + step);
    let r = match t.dtype {
        DType::F64 => zip_map::<f64, f64>(ctx, &a, &b, |p, q| p * (1.0 / (1.0 + (-q).exp())))?,
        _ => zip_map::<f32, f32>(ctx, &a, &b, |p, q| p * (1.0 / (1.0 + (-q).exp())))?
            .to_dtype(t.dtype)?,
    };
    Ok(vec![RValue::Tensor(r)])
}

/// prelu: `x > 0 ? x : w * x`, `w` per channel (dim 1) or a single weight.
/// `_prelu_kernel` receives the weight already shaped to broadcast.
fn prelu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, w) = (ctx.tensor("self")?, ctx.tensor("weight")?);
    if !t.dtype.is_float() {
        return Err(ctx.err(format!("is not implemented for dtype {}", t.dtype)));
    }
    let w = if ctx.target().starts_with("aten.prelu") && w.numel() != 1 {
        let c = if t.rank() > 1 { t.sizes[1] } else { 1 };
        if w.numel() != c {
            return Err(ctx.err(format!("Mismatch of parameter numbers and input channel size. Found parameter numbers = {} and channel size = {c}.", w.numel())));
        }
        let mut shape = vec![c];
        shape.extend(std::iter::repeat_n(1, t.rank().saturating_sub(2)));
        Tensor::from_vec(w.to_vec::<f64>(), &shape)
    } else if w.numel() == 1 {
        Tensor::from_vec(w.to_vec::<f64>(), &[])
    } else {
        w
    };
    let r = match t.dtype {
        DType::F64 => zip_map::<f64, f64>(ctx, &t, &w, |x, w| if x > 0.0 { x } else { w * x })?,
        _ => zip_map::<f32, f32>(ctx, &t, &w, |x, w| if x > 0.0 { x } else { w * x })?
            .to_dtype(t.dtype)?,
    };
    Ok(vec![RValue::Tensor(r)])
}
