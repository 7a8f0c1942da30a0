//! Rules of the elementwise family: broadcasting over every tensor operand and torch's type
//! promotion (`cpu::promote::result_type`, with 0-d tensors and Python numbers), then the
//! op's dtype rule: kept, made floating (true division, `sin`...), or bool (comparisons).
//! The helpers here are shared with other families.

use crate::cpu::broadcast_shapes;
use crate::cpu::promote::{result_type, Operand};
use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::OpTable;

/// What the op does to the promoted dtype.
#[derive(Clone, Copy)]
pub(crate) enum Out {
    /// The promoted dtype.
    Promote,
    /// Integers and bool become float32 (`div`, `sin`, `atan2`...).
    Float,
    /// Always bool (comparisons, `isnan`, logical ops).
    Bool,
    /// The first tensor's dtype (in-place-like ops: `masked_fill`, `clamp_`...).
    First,
}

/// int/bool → float32, floats kept (torch's default dtype for ops that compute in floating
/// point).
pub(crate) fn float_dtype(d: DType) -> DType {
    if d.is_float() || d.is_complex() {
        d
    } else {
        DType::F32
    }
}

/// Broadcast shapes, naming both on failure.
pub(crate) fn broadcast(a: &[usize], b: &[usize]) -> RuleResult<Vec<usize>> {
    broadcast_shapes(a, b)
        .ok_or_else(|| format!("shapes {a:?} and {b:?} cannot be broadcast together"))
}

/// Broadcast the operands named `names` (tensors and numbers; absent ones skipped) and apply
/// the dtype rule.
pub(crate) fn elementwise(ctx: &MetaCtx, names: &[&str], out: Out) -> RuleResult<MetaTensor> {
    let mut ops: Vec<Operand> = Vec::new();
    let mut shape: Option<Vec<usize>> = None;
    let mut first: Option<DType> = None;
    for n in names {
        let Some((op, t)) = ctx.operand(n)? else {
            continue;
        };
        ops.push(op);
        if let Some(t) = t {
            first.get_or_insert(t.dtype);
            shape = Some(match shape {
                None => t.sizes.clone(),
                Some(s) => broadcast(&s, &t.sizes)?,
            });
        }
    }
    let shape = shape.ok_or("no tensor operand")?;
    let promoted = result_type(&ops);
    let dtype = match out {
        Out::Promote => promoted,
        Out::Float => float_dtype(promoted),
        Out::Bool => DType::Bool,
        Out::First => first.unwrap_or(promoted),
    };
    Ok(MetaTensor::new(dtype, shape))
}

/// All tensor-or-number arguments of the node, in schema order, excluding `skip`.
fn operand_names<'a>(ctx: &'a MetaCtx, skip: &[&str]) -> Vec<&'a str> {
    ctx.node
        .inputs
        .iter()
        .filter(|(n, a)| {
            !skip.contains(&n.as_str())
                && matches!(
                    a,
                    crate::program::Arg::Tensor(_)
                        | crate::program::Arg::OptTensor(Some(_))
                        | crate::program::Arg::Int(_)
                        | crate::program::Arg::Float(_)
                        | crate::program::Arg::Bool(_)
                        | crate::program::Arg::SymInt(_)
                        | crate::program::Arg::SymFloat(_)
                        | crate::program::Arg::SymBool(_)
                )
        })
        .map(|(n, _)| n.as_str())
        .collect()
}

pub(crate) fn one(t: MetaTensor) -> RuleResult<Vec<MValue>> {
    Ok(vec![MValue::Tensor(t)])
}

/// The first tensor argument, unchanged (same shape and dtype).
pub(crate) fn same(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    one(ctx.first()?)
}

/// Same shape, integers and bool made float32.
pub(crate) fn unary_float(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let d = float_dtype(t.dtype);
    one(t.with_dtype(d))
}

/// `polygamma(n, self)`: `self`'s shape, a float dtype (the first argument is the int `n`).
pub(crate) fn polygamma(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    let d = float_dtype(t.dtype);
    one(t.with_dtype(d))
}

/// Same shape, bool result.
pub(super) fn unary_bool(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    one(ctx.first()?.with_dtype(DType::Bool))
}

pub(super) fn promote(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let names = operand_names(ctx, &["alpha"]);
    one(elementwise(ctx, &names, Out::Promote)?)
}
pub(super) fn promote_float(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let names = operand_names(ctx, &[]);
    one(elementwise(ctx, &names, Out::Float)?)
}
fn compare(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let names = operand_names(ctx, &[]);
    one(elementwise(ctx, &names, Out::Bool)?)
}
/// In-place ops keep `self`'s dtype and shape (the other operand must broadcast to it).
pub(super) fn inplace(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let names = operand_names(ctx, &["alpha"]);
    let t = ctx.first()?;
    let r = elementwise(ctx, &names, Out::First)?;
    if r.sizes != t.sizes {
        return Err(format!(
            "an in-place op cannot broadcast {:?} to {:?}",
            t.sizes, r.sizes
        ));
    }
    one(t)
}

/// `div`: true division is floating; `rounding_mode` keeps the promoted dtype.
fn div(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let rounded = ctx.opt_str("rounding_mode")?.is_some();
    let names = operand_names(ctx, &["rounding_mode"]);
    let out = if rounded { Out::Promote } else { Out::Float };
    one(elementwise(ctx, &names, out)?)
}

/// `pow`: the promoted dtype (`pow.Scalar` takes a number base).
fn pow(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let names = operand_names(ctx, &[]);
    one(elementwise(ctx, &names, Out::Promote)?)
}

/// `square` is `pow(x, 2)`: bool becomes int64.
fn square(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let d = result_type(&[
        Operand::Tensor {
            dtype: t.dtype,
            zero_dim: t.rank() == 0,
        },
        Operand::Int,
    ]);
    one(t.with_dtype(d))
}

/// `masked_fill(self, mask, value)`: broadcast with the mask, self's dtype.
fn masked_fill(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let m = ctx.tensor("mask")?;
    one(t.with_sizes(broadcast(&t.sizes, &m.sizes)?))
}

/// `where(condition, self, other)`: broadcast of the three, promotion of self and other.
pub(super) fn where_(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    if !ctx.has("self") {
        // `where(condition)` is `nonzero(condition, as_tuple=True)`: data-dependent.
        return Err("where(condition) has a data-dependent shape".into());
    }
    let c = ctx.tensor("condition")?;
    let mut ops = Vec::new();
    let mut shape = c.sizes.clone();
    for n in ["self", "other"] {
        if let Some((op, t)) = ctx.operand(n)? {
            ops.push(op);
            if let Some(t) = t {
                shape = broadcast(&shape, &t.sizes)?;
            }
        }
    }
    one(MetaTensor::new(result_type(&ops), shape))
}

/// `clamp(self, min, max)`: the promoted dtype of all three.
fn clamp(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let names = operand_names(ctx, &[]);
    one(elementwise(ctx, &names, Out::Promote)?)
}

/// `_to_copy`, `to`, `type_as`, `view_as_real`-free conversions: a new dtype, same shape.
pub(super) fn to_copy(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if let Some(o) = ctx.opt_tensor("other")? {
        return one(t.with_dtype(o.dtype));
    }
    let d = ctx.opt_dtype("dtype")?.unwrap_or(t.dtype);
    one(t.with_dtype(d))
}

/// `copy(self, src)`: self's shape and dtype; `src` must broadcast to it.
pub(super) fn copy(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let s = ctx.tensor("src")?;
    if broadcast(&t.sizes, &s.sizes)? != t.sizes {
        return Err(format!("cannot copy {:?} into {:?}", s.sizes, t.sizes));
    }
    one(t)
}

/// `frexp`: the mantissa in self's dtype and the exponent as int32.
pub(super) fn two_outputs_frexp(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let e = t.clone().with_dtype(DType::I32);
    Ok(vec![MValue::Tensor(t), MValue::Tensor(e)])
}

/// `float_power`: always float64 (complex128 for complex operands).
pub(super) fn float_power(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let names = operand_names(ctx, &[]);
    let t = elementwise(ctx, &names, Out::Promote)?;
    let d = if t.dtype.is_complex() {
        DType::Complex128
    } else {
        DType::F64
    };
    one(t.with_dtype(d))
}

/// `_assert_tensor_metadata` and friends: nothing.
pub(crate) fn nothing(_ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    Ok(vec![MValue::None])
}

pub(crate) fn register(r: &mut OpTable) {
    // Unary ops that compute in floating point.
    let float_unary = [
        "sqrt",
        "rsqrt",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "erf",
        "erfc",
        "erfinv",
        "reciprocal",
        "sigmoid",
        "sinc",
        "deg2rad",
        "rad2deg",
        "arcsin",
        "arccos",
        "arctan",
        "arcsinh",
        "arccosh",
        "arctanh",
        "logit",
        "special_expm1",
        "special_log1p",
        "special_erf",
        "special_erfc",
        "special_erfinv",
        "special_expit",
        "special_sinc",
    ];
    for n in float_unary {
        r.rule_aten(&[n, &format!("{n}_")], unary_float);
    }
    // Unary ops that keep the dtype.
    let keep = [
        "neg",
        "negative",
        "abs",
        "absolute",
        "sign",
        "sgn",
        "floor",
        "ceil",
        "trunc",
        "fix",
        "frac",
        "round",
        "nan_to_num",
        "bitwise_not",
        "positive",
        "conj",
        "resolve_conj",
        "resolve_neg",
        "fill",
        "zero",
    ];
    for n in keep {
        r.rule_aten(&[n, &format!("{n}_")], same);
    }
    r.rule_aten(&["square", "square_"], square);
    r.rule_aten(&["logical_not"], unary_bool);
    r.rule_aten(&["logical_not_"], same);
    // Binary ops with the promoted dtype.
    let promoted = [
        "add",
        "sub",
        "mul",
        "rsub",
        "subtract",
        "multiply",
        "remainder",
        "fmod",
        "floor_divide",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_left_shift",
        "bitwise_right_shift",
        "__and__",
        "__or__",
        "__xor__",
        "__lshift__",
        "__rshift__",
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "gcd",
        "lcm",
    ];
    r.rule_aten(&promoted, promote);
    r.rule_aten(&["div", "divide", "true_divide"], div);
    r.rule_aten(&["pow"], pow);
    r.rule_aten(
        &["atan2", "arctan2", "hypot", "xlogy", "special_xlogy"],
        promote_float,
    );
    r.rule_aten(
        &[
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
            "greater",
            "less",
            "greater_equal",
            "less_equal",
            "not_equal",
            "logical_and",
            "logical_or",
            "logical_xor",
            "isclose",
        ],
        compare,
    );
    // In-place forms keep self.
    for n in [
        "add_",
        "sub_",
        "mul_",
        "div_",
        "pow_",
        "remainder_",
        "fmod_",
        "floor_divide_",
        "bitwise_and_",
        "bitwise_or_",
        "bitwise_xor_",
        "__iand__",
        "__ior__",
        "__ixor__",
        "atan2_",
        "hypot_",
        "xlogy_",
        "lerp_",
        "eq_",
        "ne_",
        "lt_",
        "le_",
        "gt_",
        "ge_",
        "logical_and_",
        "logical_or_",
        "logical_xor_",
        "clamp_",
        "clamp_min_",
        "clamp_max_",
        "clip_",
        "addcmul_",
        "addcdiv_",
        "masked_fill_",
        "arctan2_",
        "bitwise_left_shift_",
        "bitwise_right_shift_",
        "gcd_",
        "lcm_",
        "greater_",
        "greater_equal_",
        "less_",
        "less_equal_",
        "not_equal_",
        "true_divide_",
    ] {
        r.rule_aten(&[n], inplace);
    }
    r.rule_aten(&["clamp", "clamp_min", "clamp_max", "clip"], clamp);
    // `where(condition)`: a clear error (a data-dependent shape) for a target the
    // selecting kernels do not cover.
    r.rule("aten.where.default", where_);
    r.rule_aten(&["masked_fill"], masked_fill);
    r.rule_aten(&["_to_dim_order_copy", "to_dense"], to_copy);
    r.rule_aten(&["_copy_from"], copy);
    r.rule_aten(&["_print", "record_stream"], nothing);
}
