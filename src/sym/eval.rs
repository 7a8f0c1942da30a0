//! Evaluation with the semantics torch gives these functions (torch/utils/_sympy/functions.py):
//! integers and rationals are exact (checked; overflow is an error, never a wrap), floats
//! follow Python's float rules, booleans stay booleans.

use std::cmp::Ordering;

use super::{sym_err, Expr, Op, MAX_DEPTH};
use crate::error::Result;

/// Value of an evaluated sub-expression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Val {
    /// Exact rational `n/d`, lowest terms, `d > 0`; integers have `d == 1`.
    Q(i64, i64),
    F(f64),
    B(bool),
}

pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<i64>;

fn overflow(op: &str) -> crate::error::Error {
    sym_err(format!(
        "integer overflow in {op} (sizes are evaluated in int64)"
    ))
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Val {
    fn int(n: i64) -> Val {
        Val::Q(n, 1)
    }

    /// Normalize `n/d` (wide intermediate) into a Q that fits in i64.
    pub(crate) fn ratio(n: i128, d: i128) -> Result<Val> {
        if d == 0 {
            return Err(sym_err("division by zero"));
        }
        let g = gcd(n.unsigned_abs(), d.unsigned_abs()).max(1) as i128;
        let (mut n, mut d) = (n / g, d / g);
        if d < 0 {
            n = n.checked_neg().ok_or_else(|| overflow("a rational"))?;
            d = d.checked_neg().ok_or_else(|| overflow("a rational"))?;
        }
        match (i64::try_from(n), i64::try_from(d)) {
            (Ok(n), Ok(d)) => Ok(Val::Q(n, d)),
            _ => Err(overflow("a rational")),
        }
    }

    fn f64(self) -> Result<f64> {
        match self {
            Val::Q(n, d) => Ok(n as f64 / d as f64),
            Val::F(f) => Ok(f),
            Val::B(_) => Err(sym_err("a boolean was used as a number")),
        }
    }

    /// An exact integer (booleans count as 0/1 only where `bools` is set, as bitwise ops do).
    fn int_arg(self, op: Op, bools: bool) -> Result<i64> {
        match self {
            Val::Q(n, 1) => Ok(n),
            Val::B(b) if bools => Ok(b as i64),
            other => Err(sym_err(format!(
                "{} needs integers, got {}",
                op.name(),
                show(other)
            ))),
        }
    }

    fn truthy(self) -> bool {
        match self {
            Val::B(b) => b,
            Val::Q(n, _) => n != 0,
            Val::F(f) => f != 0.0,
        }
    }
}

fn show(v: Val) -> String {
    match v {
        Val::Q(n, 1) => n.to_string(),
        Val::Q(n, d) => format!("{n}/{d}"),
        Val::F(f) => format!("the float {f}"),
        Val::B(b) => format!("the boolean {b}"),
    }
}

/// A float result that names an integer (floor, round...) becomes exact when it fits.
fn float_to_int(f: f64) -> Val {
    if f.is_finite() && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        Val::int(f as i64)
    } else {
        Val::F(f)
    }
}

fn add(a: Val, b: Val) -> Result<Val> {
    match (a, b) {
        (Val::Q(n1, d1), Val::Q(n2, d2)) => Val::ratio(
            n1 as i128 * d2 as i128 + n2 as i128 * d1 as i128,
            d1 as i128 * d2 as i128,
        )
        .map_err(|_| overflow("Add")),
        _ => Ok(Val::F(a.f64()? + b.f64()?)),
    }
}

fn mul(a: Val, b: Val) -> Result<Val> {
    match (a, b) {
        (Val::Q(n1, d1), Val::Q(n2, d2)) => {
            Val::ratio(n1 as i128 * n2 as i128, d1 as i128 * d2 as i128)
                .map_err(|_| overflow("Mul"))
        }
        _ => Ok(Val::F(a.f64()? * b.f64()?)),
    }
}

/// `a / b` exactly (both rational).
fn q_div(n1: i64, d1: i64, n2: i64, d2: i64) -> Result<(i128, i128)> {
    if n2 == 0 {
        return Err(sym_err("division by zero"));
    }
    let (mut n, mut d) = (n1 as i128 * d2 as i128, d1 as i128 * n2 as i128);
    if d < 0 {
        (n, d) = (-n, -d);
    }
    Ok((n, d))
}

fn fit(n: i128, op: &str) -> Result<Val> {
    i64::try_from(n).map(Val::int).map_err(|_| overflow(op))
}

/// Python `a // b`.
fn floor_div(a: Val, b: Val, op: &str) -> Result<Val> {
    match (a, b) {
        (Val::Q(n1, d1), Val::Q(n2, d2)) => {
            let (n, d) = q_div(n1, d1, n2, d2)?;
            fit(n.div_euclid(d), op)
        }
        _ => {
            let (x, y) = (a.f64()?, b.f64()?);
            if y == 0.0 {
                return Err(sym_err("division by zero"));
            }
            Ok(float_to_int((x / y).floor()))
        }
    }
}

/// Python `a % b`: the result takes the divisor's sign.
fn py_mod(a: Val, b: Val) -> Result<Val> {
    match (a, b) {
        (Val::Q(n1, d1), Val::Q(n2, d2)) => {
            let (n, d) = q_div(n1, d1, n2, d2)?;
            let q = n.div_euclid(d);
            // a - b*q over the common denominator d1*d2
            let num = (n1 as i128 * d2 as i128)
                .checked_sub(
                    (n2 as i128)
                        .checked_mul(q)
                        .and_then(|x| x.checked_mul(d1 as i128))
                        .ok_or_else(|| overflow("Mod"))?,
                )
                .ok_or_else(|| overflow("Mod"))?;
            Val::ratio(num, d1 as i128 * d2 as i128)
        }
        _ => {
            let (x, y) = (a.f64()?, b.f64()?);
            if y == 0.0 {
                return Err(sym_err("modulo by zero"));
            }
            let mut r = x % y;
            if r != 0.0 && ((r < 0.0) != (y < 0.0)) {
                r += y;
            }
            Ok(Val::F(if r == 0.0 { 0.0f64.copysign(y) } else { r }))
        }
    }
}

fn checked_pow(base: i64, exp: i64, op: &str) -> Result<i64> {
    match base {
        0 | 1 => return Ok(if exp == 0 { 1 } else { base }),
        -1 => return Ok(if exp % 2 == 0 { 1 } else { -1 }),
        _ => {}
    }
    u32::try_from(exp)
        .ok()
        .and_then(|e| base.checked_pow(e))
        .ok_or_else(|| overflow(op))
}

/// sympy `Pow` / torch `PowByNatural`: exact for a rational base and integer exponent.
fn pow(a: Val, b: Val, natural: bool) -> Result<Val> {
    let op = if natural { "PowByNatural" } else { "Pow" };
    match (a, b) {
        (Val::Q(n, d), Val::Q(e, 1)) => {
            if e >= 0 {
                Ok(Val::Q(checked_pow(n, e, op)?, checked_pow(d, e, op)?))
            } else if natural {
                Err(sym_err(format!("PowByNatural with negative exponent {e}")))
            } else if n == 0 {
                Err(sym_err("zero to a negative power"))
            } else {
                let e = e.checked_neg().ok_or_else(|| overflow(op))?;
                Val::ratio(
                    checked_pow(d, e, op)? as i128,
                    checked_pow(n, e, op)? as i128,
                )
            }
        }
        _ => Ok(Val::F(a.f64()?.powf(b.f64()?))),
    }
}

fn cmp(a: Val, b: Val) -> Result<Option<Ordering>> {
    match (a, b) {
        (Val::Q(n1, d1), Val::Q(n2, d2)) => Ok(Some(
            (n1 as i128 * d2 as i128).cmp(&(n2 as i128 * d1 as i128)),
        )),
        _ => Ok(a.f64()?.partial_cmp(&b.f64()?)),
    }
}

fn equal(a: Val, b: Val) -> Result<bool> {
    match (a, b) {
        (Val::B(x), Val::B(y)) => Ok(x == y),
        (Val::B(_), _) | (_, Val::B(_)) => Ok(false),
        _ => Ok(cmp(a, b)? == Some(Ordering::Equal)),
    }
}

#[derive(Clone, Copy)]
enum Round {
    Floor,
    Ceil,
    Trunc,
    HalfEven,
}

/// Round to an integer value.
fn round(v: Val, mode: Round) -> Result<Val> {
    match v {
        Val::Q(n, d) => {
            let (n, d) = (n as i128, d as i128);
            let fl = n.div_euclid(d);
            let rem = n - fl * d;
            let r = match mode {
                Round::Floor => fl,
                Round::Ceil => fl + (rem != 0) as i128,
                Round::Trunc => n / d,
                Round::HalfEven => match (2 * rem).cmp(&d) {
                    Ordering::Less => fl,
                    Ordering::Greater => fl + 1,
                    Ordering::Equal => fl + (fl % 2 != 0) as i128,
                },
            };
            fit(r, "rounding")
        }
        Val::F(f) => Ok(float_to_int(match mode {
            Round::Floor => f.floor(),
            Round::Ceil => f.ceil(),
            Round::Trunc => f.trunc(),
            Round::HalfEven => f.round_ties_even(),
        })),
        Val::B(_) => Err(sym_err("a boolean was used as a number")),
    }
}

/// torch's `_eval_is_non_overlapping_and_dense(sizes, strides)` as 0/1.
fn non_overlapping_and_dense(args: &[i64]) -> i64 {
    let (sizes, strides) = args.split_at(args.len() / 2);
    if sizes.len() == 1 {
        return (strides[0] == 1 || sizes[0] < 2) as i64;
    }
    let mut pairs: Vec<(i64, i64)> = sizes.iter().copied().zip(strides.iter().copied()).collect();
    pairs.sort_by_key(|&(_, st)| st); // stable, like Python's sorted
    let mut expected: i128 = 1;
    for (len, st) in pairs {
        if len == 1 {
            continue;
        }
        if st as i128 != expected {
            return 0;
        }
        expected = expected.saturating_mul(len as i128);
    }
    1
}

#[cold]
fn too_deep() -> crate::error::Error {
    sym_err(format!("expression nests deeper than {MAX_DEPTH} levels"))
}

#[cold]
fn unbound(s: &str) -> crate::error::Error {
    sym_err(format!("symbol '{s}' has no value"))
}

pub(crate) fn eval(e: &Expr, env: Env, depth: usize) -> Result<Val> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    match e {
        Expr::Int(n) => Ok(Val::int(*n)),
        Expr::Rational(p, q) => Val::ratio(*p as i128, *q as i128),
        Expr::Float(f) => Ok(Val::F(*f)),
        Expr::Bool(b) => Ok(Val::B(*b)),
        Expr::Infinity { negative } => Ok(Val::F(if *negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        })),
        Expr::NaN => Ok(Val::F(f64::NAN)),
        Expr::Symbol(s) => env(s).map(Val::int).ok_or_else(|| unbound(s)),
        Expr::Apply(op, args) => apply(*op, args, env, depth + 1),
    }
}

/// The recursive step. Kept small: in debug builds a function's frame holds every local of
/// every match arm, and this one sits on the stack once per tree level. Only the lazy ops
/// (Where, And, Or) are handled here; the rest evaluate their arguments, then `compute`.
fn apply(op: Op, args: &[Expr], env: Env, depth: usize) -> Result<Val> {
    if !op.accepts(args.len()) {
        // Only a hand-built Expr can get here; the parsers check arity.
        return Err(sym_err(format!(
            "{} cannot take {} argument(s)",
            op.name(),
            args.len()
        )));
    }
    match op {
        Op::Where => {
            let c = eval(&args[0], env, depth)?.truthy();
            eval(&args[if c { 1 } else { 2 }], env, depth)
        }
        Op::And | Op::Or => {
            // Python's short circuit: stop at the first false (And) / true (Or).
            let stop = op == Op::Or;
            for a in args {
                if eval(a, env, depth)?.truthy() == stop {
                    return Ok(Val::B(stop));
                }
            }
            Ok(Val::B(!stop))
        }
        _ => {
            // A plain loop: iterator adapters add several generic frames per level in debug.
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(a, env, depth)?);
            }
            compute(op, &vals)
        }
    }
}

/// Apply `op` to evaluated arguments (their count already fits `op.arity()`).
fn compute(op: Op, v: &[Val]) -> Result<Val> {
    let ev = |i: usize| -> Result<Val> { Ok(v[i]) };
    use Op::*;
    match op {
        Add | Mul => {
            let mut acc = v[0];
            for &x in &v[1..] {
                acc = if op == Add {
                    add(acc, x)?
                } else {
                    mul(acc, x)?
                };
            }
            Ok(acc)
        }
        Min | Max => {
            let mut best = v[0];
            for &x in &v[1..] {
                let ord = cmp(x, best)?
                    .ok_or_else(|| sym_err(format!("{} of incomparable values", op.name())))?;
                if (op == Max && ord == Ordering::Greater) || (op == Min && ord == Ordering::Less) {
                    best = x;
                }
            }
            Ok(best)
        }
        Pow => pow(ev(0)?, ev(1)?, false),
        PowByNatural => pow(ev(0)?, ev(1)?, true),
        FloatPow => Ok(Val::F(ev(0)?.f64()?.powf(ev(1)?.f64()?))),
        FloorDiv | CleanDiv => floor_div(ev(0)?, ev(1)?, "FloorDiv"),
        CeilDiv => {
            let (a, b) = (ev(0)?, ev(1)?);
            match (a, b) {
                (Val::Q(n1, d1), Val::Q(n2, d2)) => {
                    let (n, d) = q_div(n1, d1, n2, d2)?;
                    fit(-(-n).div_euclid(d), "CeilDiv")
                }
                _ => round(Val::F(a.f64()? / nonzero(b.f64()?)?), Round::Ceil),
            }
        }
        Mod | PythonMod => py_mod(ev(0)?, ev(1)?),
        ModularIndexing => py_mod(floor_div(ev(0)?, ev(1)?, "ModularIndexing")?, ev(2)?),
        LShift | RShift => {
            let (a, s) = (ev(0)?.int_arg(op, false)?, ev(1)?.int_arg(op, false)?);
            if s < 0 {
                return Err(sym_err(format!("{} by a negative count {s}", op.name())));
            }
            if op == RShift {
                // Python's >> floors; shifts past the width leave only the sign.
                return Ok(Val::int(if s >= 63 {
                    if a < 0 {
                        -1
                    } else {
                        0
                    }
                } else {
                    a >> s
                }));
            }
            if a == 0 {
                return Ok(Val::int(0));
            }
            let p = checked_pow(2, s, "LShift")?;
            a.checked_mul(p)
                .map(Val::int)
                .ok_or_else(|| overflow("LShift"))
        }
        Abs => match ev(0)? {
            Val::Q(n, d) => Ok(Val::Q(n.checked_abs().ok_or_else(|| overflow("Abs"))?, d)),
            v => Ok(Val::F(v.f64()?.abs())),
        },
        Floor | FloorToInt => round(ev(0)?, Round::Floor),
        Ceiling | CeilToInt => round(ev(0)?, Round::Ceil),
        TruncToInt => round(ev(0)?, Round::Trunc),
        RoundToInt => round(ev(0)?, Round::HalfEven),
        TruncToFloat => Ok(Val::F(ev(0)?.f64()?.trunc())),
        RoundDecimal => {
            // Python's round(x, n) rounds the exact decimal value; scaling is within an ulp of it.
            let (x, n) = (ev(0)?.f64()?, ev(1)?.int_arg(op, false)?);
            let n = n.clamp(-400, 400) as i32;
            let v = if n >= 0 {
                (x * 10f64.powi(n)).round_ties_even() / 10f64.powi(n)
            } else {
                (x / 10f64.powi(-n)).round_ties_even() * 10f64.powi(-n)
            };
            Ok(Val::F(if v.is_finite() { v } else { x }))
        }
        ToFloat => Ok(Val::F(ev(0)?.f64()?)),
        IntTrueDiv | FloatTrueDiv => {
            let (a, b) = (ev(0)?, ev(1)?);
            match (a, b) {
                (Val::Q(n1, d1), Val::Q(n2, d2)) => {
                    let (n, d) = q_div(n1, d1, n2, d2)?;
                    Ok(Val::F(n as f64 / d as f64))
                }
                _ => Ok(Val::F(a.f64()? / nonzero(b.f64()?)?)),
            }
        }
        Math(f) => Ok(Val::F(f.apply(ev(0)?.f64()?))),
        Identity => ev(0),
        Where | And | Or => Err(sym_err("internal: lazy op reached compute")),
        BitAnd | BitOr | BitXor => {
            let (a, b) = (ev(0)?, ev(1)?);
            if let (Val::B(x), Val::B(y)) = (a, b) {
                return Ok(Val::B(match op {
                    BitAnd => x & y,
                    BitOr => x | y,
                    _ => x ^ y,
                }));
            }
            let (x, y) = (a.int_arg(op, true)?, b.int_arg(op, true)?);
            Ok(Val::int(match op {
                BitAnd => x & y,
                BitOr => x | y,
                _ => x ^ y,
            }))
        }
        BitNot => match ev(0)? {
            Val::B(b) => Ok(Val::B(!b)),
            v => Ok(Val::int(!v.int_arg(op, false)?)),
        },
        IsNonOverlappingAndDense => {
            let vals = v
                .iter()
                .map(|x| x.int_arg(op, false))
                .collect::<Result<Vec<_>>>()?;
            Ok(Val::int(non_overlapping_and_dense(&vals)))
        }
        Eq => Ok(Val::B(equal(ev(0)?, ev(1)?)?)),
        Ne => Ok(Val::B(!equal(ev(0)?, ev(1)?)?)),
        Lt | Le | Gt | Ge => {
            let ord = cmp(ev(0)?, ev(1)?)?;
            Ok(Val::B(match ord {
                None => false, // NaN compares false, as in Python
                Some(o) => match op {
                    Lt => o == Ordering::Less,
                    Le => o != Ordering::Greater,
                    Gt => o == Ordering::Greater,
                    _ => o != Ordering::Less,
                },
            }))
        }
        Xor => Ok(Val::B(v.iter().fold(false, |acc, x| acc ^ x.truthy()))),
        Not => Ok(Val::B(!ev(0)?.truthy())),
    }
}

fn nonzero(x: f64) -> Result<f64> {
    if x == 0.0 {
        Err(sym_err("division by zero"))
    } else {
        Ok(x)
    }
}

impl Expr {
    /// Evaluate to an exact integer. Symbols come from `env`; a missing symbol, a
    /// non-integer result, division by zero or int64 overflow is an `Error::Sym`.
    pub fn eval_int(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<i64> {
        match eval(self, env, 0)? {
            Val::Q(n, 1) => Ok(n),
            v => Err(sym_err(format!(
                "`{self}` evaluates to {}, not an integer",
                show(v)
            ))),
        }
    }

    /// Evaluate to a float (exact rationals are rounded once at the end).
    pub fn eval_f64(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<f64> {
        eval(self, env, 0)?
            .f64()
            .map_err(|_| sym_err(format!("`{self}` is a boolean, not a number")))
    }

    /// Evaluate a relation or logic expression (numbers count by Python truthiness).
    pub fn eval_bool(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<bool> {
        Ok(eval(self, env, 0)?.truthy())
    }
}
