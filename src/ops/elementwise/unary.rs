//! Unary math: float functions (integers promote to float32), type-preserving ops (neg, abs,
//! sign, floor/ceil/round/trunc, frac, square), rounding to decimals, nan_to_num, logit.

use super::engine::{finfo, float_dtype, map, output, run_unary, UnaryOp};
use super::real::Real;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;

/// Float-only unary ops: one zero-sized type per op, so each loop is monomorphized.
macro_rules! float_unary {
    ($($st:ident [$($name:literal),*] |$x:ident| $e:expr;)*) => {
        $(
            struct $st;
            impl UnaryOp for $st {
                #[inline]
                fn float<R: Real>(&self, $x: R) -> R {
                    $e
                }
                fn int(&self, x: i64) -> i64 {
                    x
                }
            }
        )*
        fn register_float(r: &mut OpTable) {
            $(
                $(
                    r.cpu_op(concat!("aten.", $name), |ctx| float_unary(ctx, &$st));
                    r.cpu_op(concat!("aten.", $name, "_"), |ctx| float_unary(ctx, &$st));
                )*
            )*
        }
    };
}

float_unary! {
    Sqrt ["sqrt"] |x| x.sqrt();
    Rsqrt ["rsqrt"] |x| R::ONE / x.sqrt();
    Exp ["exp"] |x| x.exp();
    Exp2 ["exp2"] |x| x.exp2();
    Expm1 ["expm1", "special_expm1"] |x| x.exp_m1();
    Log ["log"] |x| x.ln();
    Log2 ["log2"] |x| x.log2();
    Log10 ["log10"] |x| x.log10();
    Log1p ["log1p", "special_log1p"] |x| x.ln_1p();
    Sin ["sin"] |x| x.sin();
    Cos ["cos"] |x| x.cos();
    Tan ["tan"] |x| x.tan();
    Asin ["asin", "arcsin"] |x| x.asin();
    Acos ["acos", "arccos"] |x| x.acos();
    Atan ["atan", "arctan"] |x| x.atan();
    Sinh ["sinh"] |x| x.sinh();
    Cosh ["cosh"] |x| x.cosh();
    Tanh ["tanh"] |x| x.tanh();
    Asinh ["asinh", "arcsinh"] |x| x.asinh();
    Acosh ["acosh", "arccosh"] |x| x.acosh();
    Atanh ["atanh", "arctanh"] |x| x.atanh();
    Erf ["erf", "special_erf"] |x| x.erf();
    Erfc ["erfc", "special_erfc"] |x| x.erfc();
    Erfinv ["erfinv", "special_erfinv"] |x| x.erfinv();
    Reciprocal ["reciprocal"] |x| R::ONE / x;
    Sigmoid ["sigmoid", "special_expit"] |x| R::ONE / (R::ONE + (-x).exp());
    Sinc ["sinc", "special_sinc"] |x| if x == R::ZERO { R::ONE } else { let p = R::c(std::f64::consts::PI) * x; p.sin() / p };
    Deg2rad ["deg2rad"] |x| x * R::c(std::f64::consts::PI / 180.0);
    Rad2deg ["rad2deg"] |x| x * R::c(180.0 / std::f64::consts::PI);
}

pub(super) fn register(r: &mut OpTable) {
    register_float(r);
    for (name, k) in [
        ("neg", neg as crate::ops::Kernel),
        ("negative", neg),
        ("abs", abs),
        ("absolute", abs),
        ("sign", sign),
        ("sgn", sign),
        ("floor", floor),
        ("ceil", ceil),
        ("trunc", trunc),
        ("fix", trunc),
        ("frac", frac),
        ("square", square),
        ("round", round),
        ("nan_to_num", nan_to_num),
        ("logit", logit),
    ] {
        r.cpu_op(&format!("aten.{name}"), k);
        r.cpu_op(&format!("aten.{name}_"), k);
    }
}

/// Math on floats; integer and bool inputs compute in float32.
fn float_unary<O: UnaryOp>(ctx: &mut OpCtx, op: &O) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let r = run_unary(&t, float_dtype(t.dtype), op)?;
    output(ctx, &t, r)
}

/// Type-preserving ops: a float formula and an integer formula.
macro_rules! preserving {
    ($($st:ident |$x:ident| $f:expr, |$i:ident| $g:expr;)*) => {
        $(
            struct $st;
            impl UnaryOp for $st {
                #[inline]
                fn float<R: Real>(&self, $x: R) -> R {
                    $f
                }
                #[inline]
                fn int(&self, $i: i64) -> i64 {
                    $g
                }
            }
        )*
    };
}

preserving! {
    Neg |x| -x, |i| i.wrapping_neg();
    Abs |x| x.abs(), |i| i.wrapping_abs();
    // (0 < x) - (x < 0): NaN and both zeros give +0.
    Sign |x| if x > R::ZERO { R::ONE } else if x < R::ZERO { -R::ONE } else { R::ZERO }, |i| i.signum();
    Floor |x| x.floor(), |i| i;
    Ceil |x| x.ceil(), |i| i;
    Trunc |x| x.trunc(), |i| i;
    Round |x| x.round_ties_even(), |i| i;
    Frac |x| x - x.trunc(), |i| i;
    Square |x| x * x, |i| i.wrapping_mul(i);
}

fn preserve<O: UnaryOp>(ctx: &mut OpCtx, op: &O, bool_ok: bool) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if t.dtype == DType::Bool && !bool_ok {
        return Err(ctx.err("is not implemented for bool tensors"));
    }
    let r = run_unary(&t, t.dtype, op)?;
    output(ctx, &t, r)
}

fn neg(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    preserve(ctx, &Neg, false)
}
fn abs(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    preserve(ctx, &Abs, false)
}
fn sign(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    preserve(ctx, &Sign, true)
}
fn floor(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    preserve(ctx, &Floor, true)
}
fn ceil(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    preserve(ctx, &Ceil, true)
}
fn trunc(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    preserve(ctx, &Trunc, true)
}
fn frac(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    if !t.dtype.is_float() {
        return Err(ctx.err(format!(
            "frac is only implemented for floating dtypes, got {}",
            t.dtype
        )));
    }
    preserve(ctx, &Frac, false)
}
fn square(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    // torch.square(bool) is pow(bool, 2): int64.
    let d = if t.dtype == DType::Bool {
        DType::I64
    } else {
        t.dtype
    };
    let r = run_unary(&t, d, &Square)?;
    output(ctx, &t, r)
}

/// round's `decimals` (an absent or zero count is a plain round), parsed once for every
/// backend (the GPU kernel, `src/gpu/kernels/elementwise_args.rs`, passes [`Self::scale`] to
/// its shader).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RoundDecimals(pub i64);

impl RoundDecimals {
    /// `None` for a plain round (no `decimals`, or 0).
    pub fn parse(ctx: &OpCtx) -> Result<Option<RoundDecimals>> {
        Ok(match ctx.opt_int("decimals")? {
            None | Some(0) => None,
            Some(d) => Some(RoundDecimals(d)),
        })
    }

    /// torch's scale `10^|decimals|` and whether it divides first (negative decimals).
    pub fn scale(&self) -> (f64, bool) {
        (
            10f64.powi(self.0.unsigned_abs().min(400) as i32),
            self.0 < 0,
        )
    }
}

impl UnaryOp for RoundDecimals {
    #[inline]
    fn float<R: Real>(&self, x: R) -> R {
        // torch: scale by 10^|d|, round half to even, scale back (division for d > 0).
        let (p, divide) = self.scale();
        let p = R::c(p);
        if divide {
            (x / p).round_ties_even() * p
        } else {
            (x * p).round_ties_even() / p
        }
    }
    fn int(&self, x: i64) -> i64 {
        x
    }
}

fn round(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    match RoundDecimals::parse(ctx)? {
        None => preserve(ctx, &Round, true),
        Some(op) => {
            let t = ctx.tensor("self")?;
            if !t.dtype.is_float() {
                return Err(ctx.err(format!(
                    "round with decimals is only implemented for floating dtypes, got {}",
                    t.dtype
                )));
            }
            let r = run_unary(&t, t.dtype, &op)?;
            output(ctx, &t, r)
        }
    }
}

/// nan_to_num's replacements, parsed once from the node for every backend (the GPU kernel,
/// `src/gpu/kernels/elementwise_args.rs`, passes the same values to its shader).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NanToNum {
    pub nan: f64,
    pub pos: f64,
    pub neg: f64,
}

impl NanToNum {
    /// `nan` (0), `posinf` and `neginf`; the infinities default to the finite limits of
    /// `dtype`, the node's own dtype (65504 for f16), not of f32.
    pub fn parse(ctx: &OpCtx, dtype: DType) -> Result<NanToNum> {
        let (max, min) = finfo(dtype);
        Ok(NanToNum {
            nan: ctx.opt_float("nan")?.unwrap_or(0.0),
            pos: ctx.opt_float("posinf")?.unwrap_or(max),
            neg: ctx.opt_float("neginf")?.unwrap_or(min),
        })
    }
}
impl UnaryOp for NanToNum {
    #[inline]
    fn float<R: Real>(&self, x: R) -> R {
        if x.is_nan() {
            R::c(self.nan)
        } else if x.is_infinite() {
            R::c(if x > R::ZERO { self.pos } else { self.neg })
        } else {
            x
        }
    }
    fn int(&self, x: i64) -> i64 {
        x
    }
}

fn nan_to_num(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let op = NanToNum::parse(ctx, t.dtype)?;
    let r = if t.dtype.is_float() {
        run_unary(&t, t.dtype, &op)?
    } else {
        t.contiguous().to_dtype(t.dtype)?
    };
    output(ctx, &t, r)
}

/// logit's `eps` (inputs clamped to `[eps, 1 - eps]` when given), parsed once for every
/// backend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Logit {
    pub eps: Option<f64>,
}

impl Logit {
    pub fn parse(ctx: &OpCtx) -> Result<Logit> {
        Ok(Logit {
            eps: ctx.opt_float("eps")?,
        })
    }

    #[inline]
    fn apply(&self, x: f64) -> f64 {
        let x = match self.eps {
            // torch clamps with NaN passing through.
            Some(e) if x < e => e,
            Some(e) if x > 1.0 - e => 1.0 - e,
            _ => x,
        };
        (x / (1.0 - x)).ln()
    }
}

fn logit(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let op = Logit::parse(ctx)?;
    let d = float_dtype(t.dtype);
    let r = match d {
        DType::F64 => map::<f64, f64>(&t, |x| op.apply(x)),
        _ => super::engine::finish(map::<f32, f32>(&t, |x| op.apply(x as f64) as f32), d)?,
    };
    output(ctx, &t, r)
}
