//! Symbolic shape expressions: the sympy expressions torch.export writes into model.json
//! (sizes and strides as `srepr`, range constraint keys as `str`, guards as Python code),
//! their exact evaluation for concrete input shapes, and the input shape guards.
//!
//! - [`parse_srepr`] reads `Add(Symbol('s0', integer=True, positive=True), Integer(1))`.
//! - [`parse_infix`] reads sympy `str()` and Python: `s0 + 1`, `(s0//2)`, `Max(1, s0)`, and
//!   guards_code such as `L['y'].size()[0] == (1 + L['x'].size()[0])`.
//! - [`Expr::eval_int`] evaluates exactly in int64 with Python semantics (floor division,
//!   modulus signed like the divisor); overflow is an error, never a wrap.
//! - [`check_shapes`] binds symbols from concrete shapes and checks every guard;
//!   [`GuardCode`] checks torch's `guards_code` strings.
//!
//! Inputs come from strangers: both parsers bound length ([`MAX_LEN`]) and nesting
//! ([`MAX_DEPTH`]) and never panic.

mod display;
mod eval;
mod guard;
mod infix;
mod lex;
mod ops;
mod srepr;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

pub use guard::{
    check_shapes, Bindings, DimSpec, GuardAttr, GuardCode, GuardRef, InputShapeSpec, PathKey,
    RangeConstraint,
};
pub use infix::parse_infix;
pub use ops::{MathFn, Op};
pub use srepr::parse_srepr;

use crate::error::{Error, Result};

/// Deepest expression tree (and parser nesting) accepted. Real exports stay far below it
/// (a pooling chain adds two levels per layer); it keeps recursion inside small wasm stacks.
pub const MAX_DEPTH: usize = 128;
/// Longest expression string accepted, in bytes.
pub const MAX_LEN: usize = 1 << 20;

/// An integer, float or boolean expression over named integer symbols.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Int(i64),
    /// `p/q` in lowest terms with `q > 1` (build with [`Expr::rational`]).
    Rational(i64, i64),
    Float(f64),
    Bool(bool),
    /// sympy `oo` / torch `int_oo` (and their negatives).
    Infinity {
        negative: bool,
    },
    /// sympy `nan` / `zoo`.
    NaN,
    Symbol(String),
    /// An operator applied to arguments; the argument count always fits [`Op::arity`].
    Apply(Op, Vec<Expr>),
}

pub(crate) fn sym_err(msg: impl Into<String>) -> Error {
    Error::Sym(msg.into())
}

impl Expr {
    /// `p/q` normalized: lowest terms, positive denominator, an [`Expr::Int`] when `q` divides `p`.
    pub fn rational(p: i64, q: i64) -> Result<Expr> {
        match eval::Val::ratio(p as i128, q as i128)? {
            eval::Val::Q(n, 1) => Ok(Expr::Int(n)),
            eval::Val::Q(n, d) => Ok(Expr::Rational(n, d)),
            _ => Err(sym_err("rational construction failed")),
        }
    }

    /// The names of all symbols the expression reads.
    pub fn free_symbols(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.visit(&mut |e| {
            if let Expr::Symbol(s) = e {
                out.insert(s.clone());
            }
        });
        out
    }

    /// Pre-order walk. Iterative so even a hand-built, very deep tree cannot overflow the stack.
    pub fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            f(e);
            if let Expr::Apply(_, args) = e {
                stack.extend(args.iter().rev());
            }
        }
    }

    /// The symbol name if the expression is a bare symbol (also through `Identity`).
    pub fn as_symbol(&self) -> Option<&str> {
        match self {
            Expr::Symbol(s) => Some(s),
            Expr::Apply(Op::Identity, a) if a.len() == 1 => a[0].as_symbol(),
            _ => None,
        }
    }

    /// If the expression is `a*s + b` with integers `a != 0`, `b` and exactly one symbol `s`,
    /// return `(s, a, b)` so a caller can solve `a*s + b = v` for `s`.
    pub fn as_linear(&self) -> Option<(String, i64, i64)> {
        match self.linear(0)? {
            (Some(s), a, b) if a != 0 => Some((s.to_string(), a, b)),
            _ => None,
        }
    }

    /// `(symbol, coefficient, constant)`; symbol None for a constant.
    fn linear(&self, depth: usize) -> Option<(Option<&str>, i64, i64)> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self {
            Expr::Int(n) => Some((None, 0, *n)),
            Expr::Symbol(s) => Some((Some(s), 1, 0)),
            Expr::Apply(Op::Identity, a) if a.len() == 1 => a[0].linear(depth + 1),
            Expr::Apply(Op::Add, args) => {
                let (mut sym, mut a, mut b) = (None, 0i64, 0i64);
                for t in args {
                    let (s, ta, tb) = t.linear(depth + 1)?;
                    sym = merge_symbol(sym, s)?;
                    a = a.checked_add(ta)?;
                    b = b.checked_add(tb)?;
                }
                Some((sym, a, b))
            }
            Expr::Apply(Op::Mul, args) => {
                // At most one factor may carry the symbol; the rest are constants.
                let (mut sym, mut a, mut b) = (None, 0i64, 1i64);
                for f in args {
                    let (s, fa, fb) = f.linear(depth + 1)?;
                    if s.is_some() {
                        if sym.is_some() {
                            return None;
                        }
                        sym = s;
                        a = b.checked_mul(fa)?;
                        b = b.checked_mul(fb)?;
                    } else {
                        a = a.checked_mul(fb)?;
                        b = b.checked_mul(fb)?;
                    }
                }
                Some((sym, a, b))
            }
            _ => None,
        }
    }

    /// Replace symbols for which `f` returns an expression; others stay.
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<Expr>) -> Expr {
        match self {
            Expr::Symbol(s) => f(s).unwrap_or_else(|| self.clone()),
            Expr::Apply(op, args) => {
                Expr::Apply(*op, args.iter().map(|a| a.substitute(f)).collect())
            }
            _ => self.clone(),
        }
    }

    /// True when the value is a boolean (a relation, logic, or a boolean literal).
    pub fn is_boolean(&self) -> bool {
        match self {
            Expr::Bool(_) => true,
            Expr::Apply(op, _) => op.is_boolean(),
            _ => false,
        }
    }
}

fn merge_symbol<'a>(a: Option<&'a str>, b: Option<&'a str>) -> Option<Option<&'a str>> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => None,
        (Some(x), _) | (None, Some(x)) => Some(Some(x)),
        (None, None) => Some(None),
    }
}

/// An expression under construction with its tree depth, so the parsers can refuse trees
/// deeper than [`MAX_DEPTH`] while building them (a left-nested chain like `a//b//c//...`
/// deepens the tree without deepening the parser's recursion).
pub(crate) struct Built {
    pub e: Expr,
    pub depth: usize,
}

impl Built {
    pub(crate) fn leaf(e: Expr) -> Built {
        Built { e, depth: 1 }
    }

    /// Apply `op`, checking arity and depth.
    pub(crate) fn apply(op: Op, args: Vec<Built>) -> Result<Built> {
        let (lo, hi) = op.arity();
        if args.len() < lo || args.len() > hi {
            let want = if lo == hi {
                lo.to_string()
            } else if hi == usize::MAX {
                format!("at least {lo}")
            } else {
                format!("{lo} to {hi}")
            };
            return Err(sym_err(format!(
                "{} takes {want} argument(s), got {}",
                op.name(),
                args.len()
            )));
        }
        if op == Op::IsNonOverlappingAndDense && !args.len().is_multiple_of(2) {
            return Err(sym_err("IsNonOverlappingAndDenseIndicator needs sizes and strides (an even number of arguments)"));
        }
        let depth = 1 + args.iter().map(|a| a.depth).max().unwrap_or(0);
        if depth > MAX_DEPTH {
            return Err(sym_err(format!(
                "expression nests deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(Built {
            e: Expr::Apply(op, args.into_iter().map(|a| a.e).collect()),
            depth,
        })
    }
}
