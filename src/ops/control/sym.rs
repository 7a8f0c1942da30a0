//! Symbolic-scalar ops of dynamic-shape graphs: `_operator.add/sub/mul/...`, `math.trunc`,
//! `torch.sym_max/sym_min/sym_int/sym_float/sym_ite/sym_not/_sym_sqrt`, evaluated with
//! Python's semantics (floor division and modulo toward -inf, `/` always a float, ints that
//! never silently overflow). The declared output kind of the node (SymInt, SymFloat,
//! SymBool) decides what is returned.

use crate::error::Result;
use crate::ops::{OpCtx, OpTable};
use crate::program::Arg;
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    for op in [
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs", "eq", "ne",
        "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "lshift", "rshift", "truth",
    ] {
        r.cpu(&format!("_operator.{op}"), sym_op);
    }
    for f in ["trunc", "floor", "ceil", "sqrt"] {
        r.cpu(&format!("math.{f}"), sym_op);
    }
    for f in [
        "sym_max",
        "sym_min",
        "sym_int",
        "sym_float",
        "sym_ite",
        "sym_not",
        "_sym_sqrt",
        "sym_sqrt",
        "sym_sum",
    ] {
        r.cpu(&format!("torch.{f}"), sym_op);
    }
}

/// A Python number.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
            Num::Bool(b) => b as u8 as f64,
        }
    }
    /// The int value when this is an int or a bool (Python's bool is an int).
    fn i(self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(i),
            Num::Bool(b) => Some(b as i64),
            Num::Float(_) => None,
        }
    }
    fn truthy(self) -> bool {
        match self {
            Num::Int(i) => i != 0,
            Num::Float(f) => f != 0.0,
            Num::Bool(b) => b,
        }
    }
}

fn num(ctx: &OpCtx, i: usize) -> Result<Num> {
    let a = ctx
        .arg_at(i)
        .ok_or_else(|| ctx.err(format!("missing operand {i}")))?;
    match ctx.resolve(a)? {
        RValue::Int(v) => Ok(Num::Int(v)),
        RValue::Float(v) => Ok(Num::Float(v)),
        RValue::Bool(v) => Ok(Num::Bool(v)),
        // A 1-element tensor used as a number (e.g. after `item` was folded away).
        RValue::Tensor(t) if t.numel() == 1 => Ok(if t.dtype.is_float() {
            Num::Float(t.item_f64())
        } else if t.dtype == crate::DType::Bool {
            Num::Bool(t.item_f64() != 0.0)
        } else {
            Num::Int(t.to_vec::<i64>()[0])
        }),
        other => Err(ctx.err(format!(
            "operand {i} is a {}, expected a number",
            other.kind()
        ))),
    }
}

fn overflow(ctx: &OpCtx) -> crate::error::Error {
    ctx.err("integer overflow in a symbolic size computation")
}

/// Python's `a // b` and `a % b` for ints.
fn floor_divmod(ctx: &OpCtx, a: i64, b: i64) -> Result<(i64, i64)> {
    if b == 0 {
        return Err(ctx.err("integer division or modulo by zero"));
    }
    let (q, r) = (a.checked_div(b).ok_or_else(|| overflow(ctx))?, a % b);
    Ok(if r != 0 && ((r < 0) != (b < 0)) {
        (q - 1, r + b)
    } else {
        (q, r)
    })
}

/// Python's float `%` (result has the sign of the divisor).
fn py_fmod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r + b
    } else {
        r
    }
}

fn arith(ctx: &OpCtx, op: &str, a: Num, b: Num) -> Result<Num> {
    let ints = a.i().zip(b.i());
    Ok(match (op, ints) {
        ("add", Some((x, y))) => Num::Int(x.checked_add(y).ok_or_else(|| overflow(ctx))?),
        ("sub", Some((x, y))) => Num::Int(x.checked_sub(y).ok_or_else(|| overflow(ctx))?),
        ("mul", Some((x, y))) => Num::Int(x.checked_mul(y).ok_or_else(|| overflow(ctx))?),
        ("floordiv", Some((x, y))) => Num::Int(floor_divmod(ctx, x, y)?.0),
        ("mod", Some((x, y))) => Num::Int(floor_divmod(ctx, x, y)?.1),
        ("pow", Some((x, y))) if y >= 0 => Num::Int(
            x.checked_pow(u32::try_from(y).map_err(|_| overflow(ctx))?)
                .ok_or_else(|| overflow(ctx))?,
        ),
        ("lshift", Some((x, y))) => Num::Int(if (0..64).contains(&y) {
            x.checked_shl(y as u32).ok_or_else(|| overflow(ctx))?
        } else {
            return Err(ctx.err(format!("bad shift count {y}")));
        }),
        ("rshift", Some((x, y))) => Num::Int(if y >= 0 {
            x >> y.min(63)
        } else {
            return Err(ctx.err(format!("negative shift count {y}")));
        }),
        ("and_" | "or_" | "xor", _) => match (a, b) {
            (Num::Bool(x), Num::Bool(y)) => Num::Bool(match op {
                "and_" => x && y,
                "or_" => x || y,
                _ => x ^ y,
            }),
            _ => {
                let (x, y) = ints
                    .ok_or_else(|| ctx.err(format!("unsupported operand types for {op}: float")))?;
                Num::Int(match op {
                    "and_" => x & y,
                    "or_" => x | y,
                    _ => x ^ y,
                })
            }
        },
        ("truediv", _) => {
            if b.f() == 0.0 {
                return Err(ctx.err("division by zero"));
            }
            Num::Float(a.f() / b.f())
        }
        (_, _) => {
            let (x, y) = (a.f(), b.f());
            Num::Float(match op {
                "add" => x + y,
                "sub" => x - y,
                "mul" => x * y,
                "floordiv" | "mod" if y == 0.0 => {
                    return Err(ctx.err("float floor division or modulo by zero"))
                }
                "floordiv" => (x / y).floor(),
                "mod" => py_fmod(x, y),
                "pow" => x.powf(y),
                other => return Err(ctx.err(format!("unsupported symbolic operator '{other}'"))),
            })
        }
    })
}

fn compare(op: &str, a: Num, b: Num) -> bool {
    // Exact for int/int; floats compare as floats (as Python does for these ranges).
    match (a.i(), b.i()) {
        (Some(x), Some(y)) => match op {
            "eq" => x == y,
            "ne" => x != y,
            "lt" => x < y,
            "le" => x <= y,
            "gt" => x > y,
            _ => x >= y,
        },
        _ => {
            let (x, y) = (a.f(), b.f());
            match op {
                "eq" => x == y,
                "ne" => x != y,
                "lt" => x < y,
                "le" => x <= y,
                "gt" => x > y,
                _ => x >= y,
            }
        }
    }
}

fn to_int(ctx: &OpCtx, f: f64) -> Result<i64> {
    if !f.is_finite() || f.abs() >= 9.2e18 {
        return Err(ctx.err(format!("cannot convert {f} to an integer")));
    }
    Ok(f as i64)
}

fn eval(ctx: &OpCtx) -> Result<Num> {
    let target = ctx.target();
    let (module, name) = target.rsplit_once('.').unwrap_or(("", target));
    Ok(match (module, name) {
        ("_operator", "neg") => match num(ctx, 0)? {
            Num::Float(f) => Num::Float(-f),
            n => Num::Int(
                n.i()
                    .unwrap_or(0)
                    .checked_neg()
                    .ok_or_else(|| overflow(ctx))?,
            ),
        },
        ("_operator", "pos") => match num(ctx, 0)? {
            Num::Bool(b) => Num::Int(b as i64),
            n => n,
        },
        ("_operator", "abs") => match num(ctx, 0)? {
            Num::Float(f) => Num::Float(f.abs()),
            n => Num::Int(
                n.i()
                    .unwrap_or(0)
                    .checked_abs()
                    .ok_or_else(|| overflow(ctx))?,
            ),
        },
        ("_operator", "not_") | ("torch", "sym_not") => Num::Bool(!num(ctx, 0)?.truthy()),
        ("_operator", "truth") => Num::Bool(num(ctx, 0)?.truthy()),
        ("_operator", op @ ("eq" | "ne" | "lt" | "le" | "gt" | "ge")) => {
            Num::Bool(compare(op, num(ctx, 0)?, num(ctx, 1)?))
        }
        ("_operator", op) => arith(ctx, op, num(ctx, 0)?, num(ctx, 1)?)?,
        ("math", "trunc") | ("torch", "sym_int") => match num(ctx, 0)? {
            Num::Float(f) => Num::Int(to_int(ctx, f.trunc())?),
            n => Num::Int(n.i().unwrap_or(0)),
        },
        ("math", "floor") => Num::Int(to_int(ctx, num(ctx, 0)?.f().floor())?),
        ("math", "ceil") => Num::Int(to_int(ctx, num(ctx, 0)?.f().ceil())?),
        ("math", "sqrt") | ("torch", "_sym_sqrt" | "sym_sqrt") => {
            let x = num(ctx, 0)?.f();
            if x < 0.0 {
                return Err(ctx.err("math domain error (sqrt of a negative number)"));
            }
            Num::Float(x.sqrt())
        }
        ("torch", "sym_float") => Num::Float(num(ctx, 0)?.f()),
        ("torch", op @ ("sym_max" | "sym_min")) => {
            let (a, b) = (num(ctx, 0)?, num(ctx, 1)?);
            let pick_b = if op == "sym_max" {
                compare("gt", b, a)
            } else {
                compare("lt", b, a)
            };
            let v = if pick_b { b } else { a };
            // An int and a float give a float (torch.sym_max promotes).
            match (a, b) {
                (Num::Float(_), _) | (_, Num::Float(_)) => Num::Float(v.f()),
                _ => v,
            }
        }
        ("torch", "sym_ite") => {
            if num(ctx, 0)?.truthy() {
                num(ctx, 1)?
            } else {
                num(ctx, 2)?
            }
        }
        ("torch", "sym_sum") => {
            let a = ctx.arg_at(0).ok_or_else(|| ctx.err("missing operand"))?;
            let vals = match a {
                Arg::SymInts(_) | Arg::Ints(_) => ctx.ints_of(a, "args")?,
                _ => return Err(ctx.err("sym_sum expects a list of ints")),
            };
            Num::Int(
                vals.iter()
                    .try_fold(0i64, |s, &v| s.checked_add(v))
                    .ok_or_else(|| overflow(ctx))?,
            )
        }
        _ => return Err(ctx.err("unknown symbolic operator")),
    })
}

fn sym_op(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let v = eval(ctx)?;
    // Return what the graph declares the node to produce.
    let out = match (ctx.node.outputs.first(), v) {
        (Some(Arg::SymInt(_) | Arg::Int(_)), Num::Float(f)) if f.fract() == 0.0 => {
            RValue::Int(to_int(ctx, f)?)
        }
        (Some(Arg::SymInt(_) | Arg::Int(_)), Num::Bool(b)) => RValue::Int(b as i64),
        (Some(Arg::SymFloat(_) | Arg::Float(_)), n) => RValue::Float(n.f()),
        (Some(Arg::SymBool(_) | Arg::Bool(_)), n) => RValue::Bool(n.truthy()),
        (_, Num::Int(i)) => RValue::Int(i),
        (_, Num::Float(f)) => RValue::Float(f),
        (_, Num::Bool(b)) => RValue::Bool(b),
    };
    Ok(vec![out])
}
