//! More elementwise kernels on the shaders of kernels/elementwise.rs: unary ops with scalar
//! arguments (threshold, shrinks, logit, nan_to_num, celu/selu, round with decimals,
//! clamp_min/max, fmod by a scalar), a scalar base `pow`, fmod/lerp/logaddexp, prelu, glu,
//! the predicates isnan/isinf/isfinite/signbit (masked_fill, the scalar forms of `where` and
//! the in-place fill_ / copy_ are in `fill.rs`).

use super::elementwise::binary_f32;
use super::index::word;
use super::ints::{self, WOperand};
use super::{
    elementwise, elementwise_p, norm_dim, one, BinaryOp, CompareOp, KernelCtx, Operand, Out,
    UnaryOp,
};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::store::gpu_dtype;
use crate::ops::activation as act;
use crate::ops::elementwise::ternary::ClampBounds;
use crate::ops::elementwise::unary::{Logit, NanToNum, RoundDecimals};
use crate::ops::Scalar;

/// Out-of-place ops whose in-place form (`op_`) runs through `inplace` in elementwise.rs.
pub(super) const INPLACE_CUSTOM: &[&str] = &[
    "aten.elu",
    "aten.leaky_relu",
    "aten.hardtanh",
    "aten.relu6",
    "aten.gelu",
    "aten.clamp",
    "aten.clip",
    "aten.softplus",
    "aten.celu",
    "aten.selu",
    "aten.threshold",
    "aten.hardshrink",
    "aten.softshrink",
    "aten.logit",
    "aten.nan_to_num",
    "aten.round",
    "aten.clamp_min",
    "aten.clamp_max",
    "aten.masked_fill",
    "aten.fmod",
    "aten.lerp",
];

fn base_name(k: &KernelCtx) -> String {
    k.target()
        .rsplit_once('.')
        .map_or("", |(o, _)| o)
        .trim_end_matches('_')
        .to_string()
}

/// Unary f32 ops with scalar arguments.
pub(super) fn unary_args(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let op = base_name(k);
    if ints::is_int(x.dtype) && op == "aten.threshold" {
        return ints::threshold(k);
    }
    // round of an int tensor is a copy.
    if ints::is_int(x.dtype) && op == "aten.round" && RoundDecimals::parse(&k.op)?.is_none() {
        return ints::unary_f32_op(k, UnaryOp::Round);
    }
    if ints::is_int(x.dtype) && op == "aten.fmod" {
        return ints::int_binary(k, ints::IntBinaryOp::Fmod, "other");
    }
    if ints::is_int(x.dtype) && matches!(op.as_str(), "aten.clamp_min" | "aten.clamp_max") {
        return ints::clamp(k);
    }
    if x.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let f = |s: Option<Scalar>, d: f64| s.map_or(d, Scalar::as_f64) as f32;
    let (u, p) = match op.as_str() {
        "aten.round" => match RoundDecimals::parse(&k.op)? {
            None => (UnaryOp::Round, [0.0; 3]),
            Some(r) => {
                let (p, divide) = r.scale();
                let p = p as f32;
                if !p.is_finite() {
                    return Ok(None);
                }
                (UnaryOp::RoundDecimals, [p, divide as u32 as f32, 0.0])
            }
        },
        "aten.logit" => match Logit::parse(&k.op)?.eps {
            Some(e) => (UnaryOp::Logit, [e as f32, 1.0, 0.0]),
            None => (UnaryOp::Logit, [0.0; 3]),
        },
        "aten.nan_to_num" => {
            // The default bounds are the finite range of the node's own dtype (f16 when an
            // f16 node runs this f32 kernel).
            let node = if k.f16_as_f32 { DType::F16 } else { DType::F32 };
            let p = NanToNum::parse(&k.op, node)?;
            (
                UnaryOp::NanToNum,
                [p.nan as f32, p.pos as f32, p.neg as f32],
            )
        }
        "aten.threshold" => {
            let p = act::ThresholdParams::parse(&k.op)?;
            (
                UnaryOp::Threshold,
                [p.threshold.as_f64() as f32, p.value.as_f64() as f32, 0.0],
            )
        }
        "aten.hardshrink" => {
            let l = act::Hardshrink::parse(&k.op)?.lambd as f32;
            (UnaryOp::Hardshrink, [l, 0.0, 0.0])
        }
        "aten.softshrink" => {
            let l = act::Softshrink::parse(&k.op)?.lambd as f32;
            (UnaryOp::Softshrink, [l, 0.0, 0.0])
        }
        // The elu formula with celu's and selu's parameters.
        "aten.celu" | "aten.selu" => (
            UnaryOp::Elu,
            super::elementwise::elu_params(&act::Elu::parse(&k.op)?),
        ),
        "aten.clamp_min" | "aten.clamp_max" => match ClampBounds::parse(&k.op)? {
            ClampBounds::Numbers { lo, hi } => (
                UnaryOp::Clamp,
                [f(lo, f64::NEG_INFINITY), f(hi, f64::INFINITY), 0.0],
            ),
            ClampBounds::Tensors => return Ok(None),
        },
        "aten.fmod" => (
            UnaryOp::FmodScalar,
            [k.op.scalar("other")?.as_f64() as f32, 0.0, 0.0],
        ),
        _ => return Ok(None),
    };
    one(elementwise_p(
        k,
        u.variant(),
        DType::F32,
        &x,
        None,
        None,
        p,
        0,
    ))
}

/// pow.Scalar: a scalar base raised to a tensor.
pub(super) fn pow_scalar(k: &mut KernelCtx) -> Out {
    let Some(e) = k.t("exponent") else {
        return Ok(None);
    };
    if e.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let base = k.op.scalar("self")?.as_f64() as f32;
    one(elementwise(
        k,
        UnaryOp::PowScalarBase.variant(),
        DType::F32,
        &e,
        None,
        None,
        base,
        0.0,
    ))
}

/// fmod.Tensor, lerp.Scalar, logaddexp on f32 tensors.
pub(super) fn binary_named(k: &mut KernelCtx) -> Out {
    let op = base_name(k);
    if op == "aten.lerp" && k.is_tensor_arg("weight") {
        return lerp_tensor(k);
    }
    let (bop, bname, alpha) = match op.as_str() {
        "aten.fmod" => (BinaryOp::Fmod, "other", 0.0),
        "aten.logaddexp" => (BinaryOp::LogAddExp, "other", 0.0),
        "aten.fmax" => (BinaryOp::Fmax, "other", 0.0),
        "aten.fmin" => (BinaryOp::Fmin, "other", 0.0),
        "aten.atan2" | "aten.arctan2" => (BinaryOp::Atan2, "other", 0.0),
        "aten.hypot" => (BinaryOp::Hypot, "other", 0.0),
        "aten.xlogy" => (BinaryOp::Xlogy, "other", 0.0),
        "aten.special_xlog1py" => (BinaryOp::Xlog1py, "other", 0.0),
        "aten.lerp" => (
            BinaryOp::Lerp,
            "end",
            k.op.scalar("weight")?.as_f64() as f32,
        ),
        _ => return Ok(None),
    };
    let xlogy = matches!(bop, BinaryOp::Xlogy | BinaryOp::Xlog1py);
    // xlogy.Scalar_Self: a Python number as `self` (the operands swapped in the shader).
    if !k.is_tensor_arg("self") {
        if !xlogy {
            return Ok(None);
        }
        let (Some(b), Some(s)) = (k.t(bname), k.op.opt_scalar("self")?) else {
            return Ok(None);
        };
        if b.dtype != DType::F32 || !k.out_is(DType::F32) {
            return Ok(None);
        }
        return one(elementwise_p(
            k,
            bop.variant(),
            DType::F32,
            &b,
            Some(&Operand::S(s.as_f64() as f32)),
            None,
            [alpha, 0.0, 0.0],
            4,
        ));
    }
    let Some(a) = k.t("self") else {
        return Ok(None);
    };
    if bop == BinaryOp::Fmod && ints::is_int(a.dtype) {
        return ints::int_binary(k, ints::IntBinaryOp::Fmod, "other");
    }
    let b = if k.is_tensor_arg(bname) {
        match k.t(bname) {
            Some(b) if b.dtype == DType::F32 => Operand::T(b),
            _ => return Ok(None),
        }
    } else if xlogy {
        match k.op.opt_scalar(bname)? {
            Some(s) => Operand::S(s.as_f64() as f32),
            None => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    if a.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    one(elementwise(
        k,
        bop.variant(),
        DType::F32,
        &a,
        Some(&b),
        None,
        alpha,
        0.0,
    ))
}

/// lerp.Tensor: a tensor weight, all three operands of one float dtype.
fn lerp_tensor(k: &mut KernelCtx) -> Out {
    let (Some(a), Some(e), Some(w)) = (k.t("self"), k.t("end"), k.t("weight")) else {
        return Ok(None);
    };
    let d = a.dtype;
    if !matches!(d, DType::F32 | DType::F16) || e.dtype != d || w.dtype != d || !k.out_is(d) {
        return Ok(None);
    }
    one(elementwise_p(
        k,
        super::LERP3,
        d,
        &a,
        Some(&Operand::T(e)),
        Some(&w),
        [0.0; 3],
        0,
    ))
}

/// floor_divide / remainder of float tensors (torch's div_floor_floating and Python's
/// modulo); remainder.Scalar_Tensor swaps the operands in the shader.
pub(super) fn float_div_rem(k: &mut KernelCtx, bop: BinaryOp) -> Out {
    if !k.is_tensor_arg("self") {
        let (Some(b), Some(s)) = (k.t("other"), k.op.opt_scalar("self")?) else {
            return Ok(None);
        };
        if b.dtype != DType::F32 || !k.out_is(DType::F32) {
            return Ok(None);
        }
        return one(elementwise_p(
            k,
            bop.variant(),
            DType::F32,
            &b,
            Some(&Operand::S(s.as_f64() as f32)),
            None,
            [1.0, 0.0, 0.0],
            4,
        ));
    }
    let Some(a) = k.t("self") else {
        return Ok(None);
    };
    let b = if k.is_tensor_arg("other") {
        match k.t("other") {
            Some(b) if b.dtype == a.dtype => Operand::T(b),
            _ => return Ok(None),
        }
    } else {
        match k.op.opt_scalar("other")? {
            Some(s) => Operand::S(s.as_f64() as f32),
            None => return Ok(None),
        }
    };
    let d = a.dtype;
    if !matches!(d, DType::F32 | DType::F16) || !k.out_is(d) {
        return Ok(None);
    }
    one(elementwise(
        k,
        bop.variant(),
        d,
        &a,
        Some(&b),
        None,
        1.0,
        0.0,
    ))
}

/// prelu: x > 0 ? x : w * x, the weight per channel (dim 1) or single.
pub(super) fn prelu(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(w)) = (k.t("self"), k.t("weight")) else {
        return Ok(None);
    };
    if x.dtype != DType::F32 || w.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let wv = if k.target().starts_with("aten.prelu") || w.numel() == 1 {
        if w.numel() == 1 {
            w.view(vec![], vec![], w.offset)
        } else {
            let c = if x.rank() > 1 { x.sizes[1] } else { 1 };
            if w.numel() != c || w.rank() != 1 {
                return Ok(None);
            }
            let mut sizes = vec![c];
            let mut strides = vec![w.strides[0]];
            for _ in 2..x.rank() {
                sizes.push(1);
                strides.push(0);
            }
            w.view(sizes, strides, w.offset)
        }
    } else {
        w
    };
    one(binary_f32(k, BinaryOp::Prelu, &x, wv))
}

/// glu: the first half of `dim` times the sigmoid of the second half.
pub(super) fn glu(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if x.dtype != DType::F32 || !k.out_is(DType::F32) || x.rank() == 0 {
        return Ok(None);
    }
    let Some(d) = norm_dim(k.op.int_or("dim", -1)?, x.rank()) else {
        return Ok(None);
    };
    let n = x.sizes[d];
    if n % 2 != 0 {
        return Ok(None);
    }
    let mut sizes = x.sizes.clone();
    sizes[d] = n / 2;
    let a = x.view(sizes.clone(), x.strides.clone(), x.offset);
    let b = x.view(sizes, x.strides.clone(), x.offset + x.strides[d] * (n / 2));
    one(binary_f32(k, BinaryOp::Glu, &a, b))
}

/// isnan / isinf / isfinite / signbit of an f32 tensor (a bool output).
pub(super) fn predicate(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if ints::is_int(x.dtype) {
        let op = k.target().split('.').nth(1).unwrap_or("").to_string();
        return ints::predicate(k, &op);
    }
    if x.dtype != DType::F32 || !k.out_is(DType::Bool) {
        return Ok(None);
    }
    // isposinf / isneginf: equality with the infinity (NaN compares unequal).
    let inf = match k.target().split('.').nth(1) {
        Some("isposinf") => Some(f32::INFINITY),
        Some("isneginf") => Some(f32::NEG_INFINITY),
        _ => None,
    };
    if let Some(v) = inf {
        return one(elementwise(
            k,
            CompareOp::Eq.variant(),
            DType::Bool,
            &x,
            Some(&Operand::S(v)),
            None,
            1.0,
            0.0,
        ));
    }
    let op = match k.target().split('.').nth(1) {
        Some("isnan") => CompareOp::IsNan,
        Some("isinf") => CompareOp::IsInf,
        Some("isfinite") => CompareOp::IsFinite,
        Some("signbit") => CompareOp::SignBit,
        _ => return Ok(None),
    };
    one(elementwise(
        k,
        op.variant(),
        DType::Bool,
        &x,
        Some(&Operand::S(0.0)),
        None,
        1.0,
        0.0,
    ))
}

/// add / sub / mul with a Python number as `self` (decompositions write `1 - x`).
pub(super) fn scalar_self(k: &mut KernelCtx, op: BinaryOp) -> Out {
    let Some(t) = k.t("other") else {
        return Ok(None);
    };
    let Some(s) = k.op.opt_scalar("self")? else {
        return Ok(None);
    };
    let alpha = k.op.opt_scalar("alpha")?.unwrap_or(Scalar::Int(1));
    if t.dtype == DType::F32 {
        if !k.out_is(DType::F32) {
            return Ok(None);
        }
        let (sv, al) = (s.as_f64() as f32, alpha.as_f64() as f32);
        return one(match op {
            // s + alpha * t
            BinaryOp::Add => elementwise(
                k,
                UnaryOp::Affine.variant(),
                DType::F32,
                &t,
                None,
                None,
                al,
                sv,
            ),
            // s - alpha * t
            BinaryOp::Sub => elementwise(
                k,
                BinaryOp::Rsub.variant(),
                DType::F32,
                &t,
                Some(&Operand::S(sv)),
                None,
                al,
                0.0,
            ),
            BinaryOp::Mul => elementwise(
                k,
                BinaryOp::Mul.variant(),
                DType::F32,
                &t,
                Some(&Operand::S(sv)),
                None,
                1.0,
                0.0,
            ),
            _ => return Ok(None),
        });
    }
    // Integer tensors with integer numbers (an int output of the tensor's dtype).
    let int_num = |v: Scalar| matches!(v, Scalar::Int(_) | Scalar::Bool(_));
    if !ints::is_int(t.dtype) || !k.out_is(t.dtype) || !int_num(s) || !int_num(alpha) {
        return Ok(None);
    }
    let (Some(sw), Some(aw)) = (word(t.dtype, s), word(t.dtype, alpha)) else {
        return Ok(None);
    };
    let iop = match op {
        BinaryOp::Sub => ints::IntBinaryOp::Rsub,
        BinaryOp::Mul => ints::IntBinaryOp::Mul,
        _ => return Ok(None),
    };
    if op == BinaryOp::Mul && aw != 1 {
        return Ok(None);
    }
    one(ints::encode(
        k,
        iop.variant(),
        t.dtype,
        &t,
        Some(&WOperand::W(sw)),
        None,
        0,
        aw,
    ))
}

/// addcmul / addcdiv(self, tensor1, tensor2, value): self + value * (t1 * t2 or t1 / t2).
pub(super) fn addcmul(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(t1), Some(t2)) = (k.t("self"), k.t("tensor1"), k.t("tensor2")) else {
        return Ok(None);
    };
    // addcmul of one int dtype with an int value: self + value * t1 * t2 in int words.
    let d = x.dtype;
    if ints::is_int(d)
        && k.target().starts_with("aten.addcmul.")
        && [&t1, &t2].iter().all(|t| t.dtype == d)
        && k.out_is(d)
    {
        let value = k.op.opt_scalar("value")?.unwrap_or(Scalar::Int(1));
        let Some(vw) = (match value {
            Scalar::Int(_) | Scalar::Bool(_) => word(d, value),
            Scalar::Float(_) => None,
        }) else {
            return Ok(None);
        };
        let mul = ints::IntBinaryOp::Mul.variant();
        let Some(p) = ints::encode(k, mul, d, &t1, Some(&WOperand::T(t2)), None, 0, 1)? else {
            return Ok(None);
        };
        let add = ints::IntBinaryOp::Add.variant();
        return one(ints::encode(
            k,
            add,
            d,
            &x,
            Some(&WOperand::T(p)),
            None,
            0,
            vw,
        ));
    }
    if [&x, &t1, &t2].iter().any(|t| t.dtype != DType::F32) || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let value = k.op.opt_scalar("value")?.map_or(1.0, |s| s.as_f64()) as f32;
    let op = if k.target().starts_with("aten.addcdiv") {
        BinaryOp::Div
    } else {
        BinaryOp::Mul
    };
    let Some(p) = binary_f32(k, op, &t1, t2)? else {
        return Ok(None);
    };
    one(elementwise(
        k,
        BinaryOp::Add.variant(),
        DType::F32,
        &x,
        Some(&Operand::T(p)),
        None,
        value,
        0.0,
    ))
}

/// type_as: `self` itself for the same dtype (as the CPU kernel), else a conversion.
pub(super) fn type_as(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(o)) = (k.t("self"), k.t("other")) else {
        return Ok(None);
    };
    if x.dtype == o.dtype {
        return Ok(Some(vec![Slot::Tensor(x)]));
    }
    // (`convert` wraps a narrowing int conversion on store.)
    if x.dtype == DType::F16 || o.dtype == DType::F16 || !k.out_is(o.dtype) {
        return Ok(None);
    }
    ints::convert(k, &x, o.dtype)
}

/// clamp / clip with tensor bounds on f32 (an absent bound unbounded, a number bound read
/// from the parameters): NaN in any operand gives NaN, as the CPU kernel.
pub(super) fn clamp_tensor(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if x.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let bound = |k: &KernelCtx, name: &str, none: f32| -> crate::error::Result<Option<Operand>> {
        if k.is_tensor_arg(name) {
            return Ok(k.t(name).filter(|t| t.dtype == DType::F32).map(Operand::T));
        }
        Ok(Some(Operand::S(
            k.op.opt_scalar(name)?.map_or(none, |s| s.as_f64() as f32),
        )))
    };
    let (Some(lo), Some(hi)) = (
        bound(k, "min", f32::NEG_INFINITY)?,
        bound(k, "max", f32::INFINITY)?,
    ) else {
        return Ok(None);
    };
    let (c, p1, flags) = match hi {
        Operand::T(h) => (h, 0.0, 0),
        Operand::S(h) => (x.clone(), h, 8),
    };
    one(elementwise_p(
        k,
        super::CLAMP3,
        DType::F32,
        &x,
        Some(&lo),
        Some(&c),
        [0.0, 0.0, p1],
        flags,
    ))
}

/// rrelu in eval mode: leaky_relu with the mean slope (lower + upper) / 2.
pub(super) fn rrelu_eval(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if k.op.bool_or("training", false)? || x.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let lower = k.op.float_or("lower", 0.125)?;
    let upper = k.op.float_or("upper", 1.0 / 3.0)?;
    let functional = k.target().starts_with("aten.rrelu_with_noise_functional.");
    let noise = if functional {
        // The functional form also returns (a copy of) the unchanged noise.
        let Some(n) = k.t("noise") else {
            return Ok(None);
        };
        if !gpu_dtype(n.dtype) {
            return Ok(None);
        }
        Some(n)
    } else {
        None
    };
    let Some(y) = elementwise(
        k,
        UnaryOp::LeakyRelu.variant(),
        DType::F32,
        &x,
        None,
        None,
        ((lower + upper) / 2.0) as f32,
        0.0,
    )?
    else {
        return Ok(None);
    };
    let mut outs = vec![Slot::Tensor(y)];
    if let Some(n) = noise {
        match ints::convert(k, &n, n.dtype)?.as_deref() {
            Some([Slot::Tensor(c)]) => outs.push(Slot::Tensor(c.clone())),
            _ => return Ok(None),
        }
    }
    Ok(Some(outs))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, all_f32, f32, f32_or_same_int, int, On};
    use crate::dtype::DType;
    fn fmod(i: &[DType], o: &[DType]) -> bool {
        (all(i, f32) && all(o, f32)) || (all(i, int) && all(o, int))
    }
    t.kernel(
        &[
            "aten.logit",
            "aten.nan_to_num",
            "aten.hardshrink",
            "aten.softshrink",
            "aten.celu",
            "aten.selu",
        ],
        On::All,
        unary_args,
        all_f32,
    );
    t.kernel(
        &[
            "aten.clamp_min",
            "aten.clamp_max",
            "aten.round",
            "aten.threshold",
        ],
        On::All,
        unary_args,
        f32_or_same_int,
    );
    t.kernel(&["aten.fmod"], On::Only(&["Scalar"]), unary_args, fmod);
    t.kernel(&["aten.pow"], On::Only(&["Scalar"]), pow_scalar, all_f32);
    t.kernel(&["aten.fmod"], On::NotOut, binary_named, fmod);
    t.kernel(
        &["aten.lerp", "aten.logaddexp"],
        On::NotOut,
        binary_named,
        all_f32,
    );
    t.kernel(
        &[
            "aten.fmax",
            "aten.fmin",
            "aten.atan2",
            "aten.arctan2",
            "aten.hypot",
            "aten.xlogy",
            "aten.special_xlog1py",
        ],
        On::NotOut,
        binary_named,
        all_f32,
    );
    t.kernel(
        &["aten.prelu", "aten._prelu_kernel"],
        On::All,
        prelu,
        all_f32,
    );
    t.kernel(&["aten.glu"], On::All, glu, all_f32);
    fn predicates(i: &[DType], o: &[DType]) -> bool {
        (all(i, f32) || all(i, int)) && o == [DType::Bool]
    }
    t.kernel(
        &["aten.isnan", "aten.isinf", "aten.isfinite", "aten.signbit"],
        On::All,
        predicate,
        predicates,
    );
    t.kernel(
        &["aten.isposinf", "aten.isneginf"],
        On::Only(&["default"]),
        predicate,
        predicates,
    );
    t.kernel(
        &["aten.rrelu", "aten.rrelu_with_noise_functional"],
        On::Only(&["default"]),
        rrelu_eval,
        all_f32,
    );
    t.kernel(&["aten.addcdiv"], On::Only(&["default"]), addcmul, all_f32);
    // addcmul of one int dtype too (with an int value: only a run shows).
    t.kernel(
        &["aten.addcmul"],
        On::Only(&["default"]),
        addcmul,
        |i, o| {
            all_f32(i, o)
                || (i.first().is_some_and(|&d| int(d)) && all(i, |d| d == i[0]) && o == [i[0]])
        },
    );
    t.kernel(
        &["aten.type_as"],
        On::Only(&["default"]),
        type_as,
        super::table::gpu_dtypes,
    );
}
