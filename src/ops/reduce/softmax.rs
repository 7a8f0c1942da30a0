//! softmax / log_softmax in their training-IR (`softmax.int`, with an optional dtype) and core
//! ATen (`_softmax`, with `half_to_float`) forms, and `_safe_softmax` (rows that are entirely
//! -inf give 0 instead of NaN, as scaled_dot_product_attention's decomposition needs).

use super::{compute_float, for_each_lane, split_at_dim, typed, with_real, Real};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::util::wrap_dim;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.softmax.int", softmax, super::meta::softmax);
    r.define("aten._softmax.default", softmax, super::meta::softmax);
    r.define("aten._safe_softmax.default", softmax, super::meta::softmax);
    r.define("aten.log_softmax.int", softmax, super::meta::softmax);
    r.define("aten._log_softmax.default", softmax, super::meta::softmax);
    r.define(
        "aten._softmax_backward_data.default",
        softmax_backward,
        softmax_backward_rule,
    );
    r.define(
        "aten._log_softmax_backward_data.default",
        softmax_backward,
        softmax_backward_rule,
    );
}

/// `_softmax_backward_data(grad_output, output, dim, input_dtype)`: the gradient of softmax
/// from its output `y`, `y * (g - Σ g·y)` per lane (log-softmax: `g - exp(y) * Σ g`),
/// computed in f64, returned in `input_dtype`.
fn softmax_backward(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (g, y) = (ctx.tensor("grad_output")?, ctx.tensor("output")?);
    if g.sizes != y.sizes {
        return Err(ctx.err(format!(
            "grad_output {:?} and output {:?} must have one shape",
            g.sizes, y.sizes
        )));
    }
    let out_dtype = ctx.opt_dtype("input_dtype")?.unwrap_or(g.dtype);
    if !out_dtype.is_float() || !g.dtype.is_float() || !y.dtype.is_float() {
        return Err(ctx.err("grad_output, output and input_dtype must be floating-point"));
    }
    let log = ctx.target().starts_with("aten._log_softmax");
    let dim = wrap_dim(ctx, ctx.int("dim")?, g.rank())?;
    let shape = split_at_dim(&g.sizes, dim);
    let yv = y.to_vec::<f64>();
    // Lanes of (g, y) pairs: the result replaces g.
    let mut pairs: Vec<(f64, f64)> = g.to_vec::<f64>().into_iter().zip(yv).collect();
    for_each_lane(&mut pairs, shape, |lane| {
        if log {
            let s: f64 = lane.iter().map(|p| p.0).sum();
            lane.iter_mut().for_each(|p| p.0 -= p.1.exp() * s);
        } else {
            let s: f64 = lane.iter().map(|p| p.0 * p.1).sum();
            lane.iter_mut().for_each(|p| p.0 = p.1 * (p.0 - s));
        }
    });
    let v: Vec<f64> = pairs.into_iter().map(|p| p.0).collect();
    Ok(vec![typed(v, &g.sizes, out_dtype)?.into()])
}

fn softmax_backward_rule(
    ctx: &mut crate::meta::MetaCtx,
) -> crate::meta::RuleResult<Vec<crate::meta::MValue>> {
    let g = ctx.tensor("grad_output")?;
    ctx.wrap_dim(ctx.int("dim")?, g.rank())?;
    let d = ctx.opt_dtype("input_dtype")?.unwrap_or(g.dtype);
    Ok(vec![crate::meta::MValue::Tensor(g.with_dtype(d))])
}

/// Everything about a softmax call other than its input, parsed once from the node and
/// shared by the CPU kernel, the shape rule (`meta.rs`) and the GPU kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SoftmaxParams {
    /// The dim, wrapped (0 for a 0-d input).
    pub dim: usize,
    /// log_softmax.
    pub log: bool,
    /// `_safe_softmax`: a row that is entirely -inf gives zeros, not NaN.
    pub safe: bool,
    /// The result's dtype: `dtype=`, f32 for `half_to_float` of f16/bf16, else the input's.
    pub out: DType,
}

impl SoftmaxParams {
    pub fn parse(ctx: &OpCtx, rank: usize, input: DType) -> Result<SoftmaxParams> {
        let t = ctx.target();
        let half_to_float = ctx.bool_or("half_to_float", false)?;
        Ok(SoftmaxParams {
            dim: wrap_dim(ctx, ctx.int("dim")?, rank)?,
            log: t.contains("log_softmax"),
            safe: t.starts_with("aten._safe_softmax"),
            out: if half_to_float && matches!(input, DType::F16 | DType::BF16) {
                DType::F32
            } else {
                ctx.opt_dtype("dtype")?.unwrap_or(input)
            },
        })
    }
}

/// `x = exp(x - m)` in place, returning the sum of the results, added in order. The
/// exponentials are a loop of their own so that LLVM vectorizes them (a running sum in the
/// same loop keeps it scalar); on x86-64 that loop is also compiled for AVX2 and picked at
/// run time (eight f32 lanes instead of four, the same operations, so the same values).
pub(crate) fn exp_shifted<R: Real>(x: &mut [R], m: R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<R: Real>(x: &mut [R], m: R) {
            R::exp_shifted_each(x, m)
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { avx2(x, m) }
        } else {
            R::exp_shifted_each(x, m)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    R::exp_shifted_each(x, m);
    let mut sum = R::ZERO;
    for &v in x.iter() {
        sum += v;
    }
    sum
}

/// Softmax (or log-softmax) of one lane in place, numerically stable (max subtracted).
/// `safe`: a lane whose max is -inf (every element masked) becomes all zeros.
fn softmax_lanes<R: Real>(lane: &mut [R], log: bool, safe: bool) {
    let mut m = R::NEG_INF;
    let mut nan = false;
    for &v in lane.iter() {
        if v.is_nan() {
            nan = true;
        } else if v > m {
            m = v;
        }
    }
    if nan {
        lane.iter_mut().for_each(|v| *v = R::from_f64(f64::NAN));
        return;
    }
    if m == R::NEG_INF {
        // exp(-inf - -inf) is NaN in torch's kernels too; only the safe variant zeroes.
        let fill = if safe { R::ZERO } else { R::from_f64(f64::NAN) };
        lane.iter_mut().for_each(|v| *v = fill);
        return;
    }
    let mut sum = R::ZERO;
    if log {
        for &v in lane.iter() {
            sum += (v - m).exp();
        }
        let lse = m + sum.ln();
        lane.iter_mut().for_each(|v| *v = *v - lse);
    } else {
        sum = exp_shifted(lane, m);
        let inv = R::ONE / sum;
        lane.iter_mut().for_each(|v| *v *= inv);
    }
}

fn softmax(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let SoftmaxParams {
        dim,
        log,
        safe,
        out,
    } = SoftmaxParams::parse(ctx, x.rank(), x.dtype)?;
    let Some(cf) = compute_float(out) else {
        return Err(ctx.err(format!("softmax is not implemented for dtype {out}")));
    };
    // With a dtype argument torch converts the input first, then computes in that dtype
    // (half_to_float's widening is exact, so converting first is the same there).
    let src = if out != x.dtype { x.to_dtype(out)? } else { x };
    let shape = split_at_dim(&src.sizes, dim);
    with_real!(cf, R => {
        let mut v = src.to_vec::<R>();
        for_each_lane(&mut v, shape, |l| softmax_lanes(l, log, safe));
        Ok(vec![typed(v, &src.sizes, out)?.into()])
    })
}
