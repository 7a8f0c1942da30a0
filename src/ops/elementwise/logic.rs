//! Comparisons, logical and bitwise ops, shifts, `where`, `masked_fill`, and the float
//! predicates (isnan, isinf, isfinite, isposinf, isneginf, signbit).

use super::engine::{
    broadcast, compute_of, finish, map, output, promote, scalar_full, val, zip3_map, zip_map,
    Compute, Val,
};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{Kernel, OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    let both = |r: &mut OpTable, name: &str, k: Kernel| {
        r.cpu_op(&format!("aten.{name}"), k);
        r.cpu_op(&format!("aten.{name}_"), k);
    };
    both(r, "eq", eq);
    both(r, "ne", ne);
    both(r, "not_equal", ne);
    both(r, "lt", lt);
    both(r, "less", lt);
    both(r, "le", le);
    both(r, "less_equal", le);
    both(r, "gt", gt);
    both(r, "greater", gt);
    both(r, "ge", ge);
    both(r, "greater_equal", ge);
    both(r, "logical_and", logical_and);
    both(r, "logical_or", logical_or);
    both(r, "logical_xor", logical_xor);
    both(r, "logical_not", logical_not);
    both(r, "bitwise_and", bitwise_and);
    both(r, "bitwise_or", bitwise_or);
    both(r, "bitwise_xor", bitwise_xor);
    both(r, "bitwise_not", bitwise_not);
    both(r, "bitwise_left_shift", left_shift);
    both(r, "bitwise_right_shift", right_shift);
    both(r, "gcd", gcd);
    both(r, "lcm", lcm);
    r.cpu_op("aten.__lshift__", left_shift);
    r.cpu_op("aten.__rshift__", right_shift);
    r.cpu_op("aten.__and__", bitwise_and);
    r.cpu_op("aten.__or__", bitwise_or);
    r.cpu_op("aten.__xor__", bitwise_xor);
    // `where(condition)` (one argument) is nonzero's job; these are the selecting overloads.
    for o in ["self", "ScalarSelf", "ScalarOther", "Scalar"] {
        r.define(&format!("aten.where.{o}"), where_, super::meta::where_);
    }
    both(r, "masked_fill", masked_fill);
    r.define_op(
        "aten.isnan",
        |ctx| predicate(ctx, f64::is_nan, false),
        super::meta::unary_bool,
    );
    r.define_op(
        "aten.isinf",
        |ctx| predicate(ctx, f64::is_infinite, false),
        super::meta::unary_bool,
    );
    r.define_op(
        "aten.isfinite",
        |ctx| predicate(ctx, f64::is_finite, true),
        super::meta::unary_bool,
    );
    r.define_op(
        "aten.isposinf",
        |ctx| predicate(ctx, |x| x == f64::INFINITY, false),
        super::meta::unary_bool,
    );
    r.define_op(
        "aten.isneginf",
        |ctx| predicate(ctx, |x| x == f64::NEG_INFINITY, false),
        super::meta::unary_bool,
    );
    r.define_op("aten.signbit", signbit, super::meta::unary_bool);
}

/// A comparison in the promoted dtype's compute type; the result is bool.
fn compare(
    ctx: &mut OpCtx,
    f32f: impl Fn(f32, f32) -> bool,
    f64f: impl Fn(f64, f64) -> bool,
    intf: impl Fn(i64, i64) -> bool,
) -> Result<Vec<RValue>> {
    let (x, y) = (val(ctx, "self")?, val(ctx, "other")?);
    let d = promote(&[&x, &y]);
    let (a, b) = (x.tensor_for(d), y.tensor_for(d));
    let r = match compute_of(d) {
        Compute::F32 => zip_map::<f32, bool>(ctx, &a, &b, f32f)?,
        Compute::F64 => zip_map::<f64, bool>(ctx, &a, &b, f64f)?,
        Compute::Int => zip_map::<i64, bool>(ctx, &a, &b, intf)?,
    };
    output(ctx, &a, r)
}

macro_rules! comparisons {
    ($($name:ident $op:tt;)*) => {
        $(fn $name(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
            compare(ctx, |a, b| a $op b, |a, b| a $op b, |a, b| a $op b)
        })*
    };
}

comparisons! {
    eq ==;
    ne !=;
    lt <;
    le <=;
    gt >;
    ge >=;
}

/// Logical ops: operands are truthy when nonzero (NaN is truthy); the result is bool.
fn logical(ctx: &mut OpCtx, f: impl Fn(bool, bool) -> bool) -> Result<Vec<RValue>> {
    let (a, b) = (ctx.tensor("self")?, val(ctx, "other")?.tensor());
    let r = zip_map::<bool, bool>(ctx, &a, &b, f)?;
    output(ctx, &a, r)
}

fn logical_and(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    logical(ctx, |a, b| a && b)
}
fn logical_or(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    logical(ctx, |a, b| a || b)
}
fn logical_xor(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    logical(ctx, |a, b| a != b)
}
fn logical_not(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = ctx.tensor("self")?;
    let r = map::<bool, bool>(&a, |x| !x);
    output(ctx, &a, r)
}

/// Bitwise ops on integer and bool tensors, computed in i64 and wrapped to the result dtype.
/// The closure also receives the result dtype's width in bits (for shifts).
fn bitwise(ctx: &mut OpCtx, f: impl Fn(i64, i64, u32) -> i64) -> Result<Vec<RValue>> {
    let (x, y) = (val(ctx, "self")?, val(ctx, "other")?);
    let d = promote(&[&x, &y]);
    if d.is_float() || d.is_complex() {
        return Err(ctx.err(format!(
            "integer ops (bitwise, shifts, gcd, lcm) are only implemented for integer and bool dtypes, got {d}"
        )));
    }
    let bits = if d == DType::Bool {
        8
    } else {
        (d.size() * 8) as u32
    };
    let (a, b) = (x.tensor_for(d), y.tensor_for(d));
    let r = zip_map::<i64, i64>(ctx, &a, &b, |p, q| f(p, q, bits))?;
    let r = finish(r, d)?;
    match &x {
        Val::T(t) => output(ctx, t, r),
        Val::S(_) => Ok(vec![RValue::Tensor(r)]),
    }
}

fn bitwise_and(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    bitwise(ctx, |a, b, _| a & b)
}
fn bitwise_or(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    bitwise(ctx, |a, b, _| a | b)
}
fn bitwise_xor(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    bitwise(ctx, |a, b, _| a ^ b)
}
/// torch: shifting by a negative amount or by at least the width gives 0.
fn left_shift(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    bitwise(ctx, |a, b, bits| {
        if b < 0 || b >= bits as i64 {
            0
        } else {
            ((a as u64) << b) as i64
        }
    })
}
/// torch: an out-of-range shift fills with the sign (values are sign-extended in i64, so
/// shifting by 63 does that for every signed width and gives 0 for unsigned ones).
fn right_shift(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    bitwise(ctx, |a, b, bits| {
        if b < 0 || b >= bits as i64 {
            a >> 63
        } else {
            a >> b
        }
    })
}

/// torch's `calc_gcd`: Euclid's algorithm on the absolute values (the result is never
/// negative; `gcd(0, 0) = 0`).
fn gcd_of(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.wrapping_abs(), b.wrapping_abs());
    while a != 0 {
        (a, b) = (b.wrapping_rem(a), a);
    }
    b
}
fn gcd(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    bitwise(ctx, |a, b, _| gcd_of(a, b))
}
/// `|a / gcd(a, b) * b|`, 0 when both are 0 (torch's `lcm`).
fn lcm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    bitwise(ctx, |a, b, _| match gcd_of(a, b) {
        0 => 0,
        g => (a / g).wrapping_mul(b).wrapping_abs(),
    })
}

fn bitwise_not(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = ctx.tensor("self")?;
    let r = match a.dtype {
        DType::Bool => map::<bool, bool>(&a, |x| !x),
        d if d.is_float() || d.is_complex() => {
            return Err(ctx.err(format!(
                "bitwise_not is only implemented for integer and bool dtypes, got {d}"
            )))
        }
        d => finish(map::<i64, i64>(&a, |x| !x), d)?,
    };
    output(ctx, &a, r)
}

fn condition(ctx: &OpCtx, name: &str) -> Result<Tensor> {
    let c = ctx.tensor(name)?;
    if !matches!(c.dtype, DType::Bool | DType::U8) {
        return Err(ctx.err(format!(
            "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
            c.dtype
        )));
    }
    Ok(c)
}

fn where_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let c = condition(ctx, "condition")?;
    let (x, y) = (val(ctx, "self")?, val(ctx, "other")?);
    let d = promote(&[&x, &y]);
    let (a, b) = (x.tensor(), y.tensor());
    let r = with_dtype!(d, T => zip3_map::<bool, T, T, T>(ctx, &c, &a, &b, |m, p, q| if m { p } else { q })?,
        else return Err(ctx.err(format!("dtype {d} is not supported"))));
    Ok(vec![RValue::Tensor(r)])
}

fn masked_fill(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (t, mask) = (ctx.tensor("self")?, condition(ctx, "mask")?);
    let value = match val(ctx, "value")? {
        Val::S(s) => scalar_full(t.dtype, &[], s)?,
        Val::T(v) if v.rank() == 0 => v.to_dtype(t.dtype)?,
        Val::T(v) => return Err(ctx.err(format!("masked_fill only supports a 0-dimensional value tensor, but got a tensor with {} dimensions", v.rank()))),
    };
    broadcast(ctx, &t.sizes, &mask.sizes)?;
    let d = t.dtype;
    let r = with_dtype!(d, T => zip3_map::<T, bool, T, T>(ctx, &t, &mask, &value, |x, m, v| if m { v } else { x })?,
        else return Err(ctx.err(format!("dtype {d} is not supported"))));
    output(ctx, &t, r)
}

/// A float predicate; integer and bool tensors give `int_answer` everywhere.
fn predicate(ctx: &mut OpCtx, f: fn(f64) -> bool, int_answer: bool) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let r = if t.dtype.is_float() {
        map::<f64, bool>(&t, f)
    } else {
        Tensor::from_vec(vec![int_answer; t.numel()], &t.sizes)
    };
    Ok(vec![RValue::Tensor(r)])
}

fn signbit(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let r = if t.dtype.is_float() {
        map::<f64, bool>(&t, f64::is_sign_negative)
    } else {
        map::<i64, bool>(&t, |x| x < 0)
    };
    Ok(vec![RValue::Tensor(r)])
}
