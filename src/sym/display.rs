//! Display close to sympy's `str()`: `s0 + 1`, `2*s0`, `3 - s0`, `s0/2`, `(s0//2)`,
//! `Max(1, s0)`, `s0 < 5`, `Eq(s0, 3)`, `(s0 > 1) & (s0 < 5)`. The output always reads
//! back through [`parse_infix`](super::parse_infix) to an equal-valued expression (tested);
//! term order is not guaranteed to match sympy's.

use std::fmt;

use super::{Expr, Op, MAX_DEPTH};

// sympy's printing precedences (sympy.printing.precedence.PRECEDENCE), plus FUNC for
// function-call forms and a slot for prefix `~` between Mul and Pow as in Python.
const XOR: u16 = 10;
const OR: u16 = 20;
const AND: u16 = 30;
const REL: u16 = 35;
const ADD: u16 = 40;
const MUL: u16 = 50;
const NOT: u16 = 55;
const POW: u16 = 60;
const FUNC: u16 = 70;
const ATOM: u16 = 1000;

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&show(self, 0))
    }
}

/// True for a numeric literal that prints with a leading minus.
fn negative_literal(e: &Expr) -> bool {
    match e {
        Expr::Int(n) => *n < 0,
        Expr::Rational(p, _) => *p < 0,
        Expr::Float(x) => x.is_sign_negative() && *x != 0.0,
        Expr::Infinity { negative } => *negative,
        _ => false,
    }
}

fn is_numeric(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Int(_) | Expr::Rational(..) | Expr::Float(_) | Expr::Infinity { .. }
    )
}

fn prec(e: &Expr) -> u16 {
    match e {
        Expr::Rational(p, _) if *p >= 0 => MUL,
        _ if negative_literal(e) => ADD,
        Expr::Apply(op, args) if !op.accepts(args.len()) => FUNC,
        Expr::Apply(op, args) => match op {
            Op::Add => ADD,
            Op::Mul if negative_literal(&args[0]) => ADD,
            Op::Mul => MUL,
            Op::Pow if matches!(args[1], Expr::Int(n) if n < 0) => MUL,
            Op::Pow => POW,
            Op::FloorDiv | Op::CleanDiv | Op::Identity => ATOM,
            Op::Lt | Op::Le | Op::Gt | Op::Ge => REL,
            Op::And => AND,
            Op::Or => OR,
            Op::Xor => XOR,
            Op::Not | Op::BitNot => NOT,
            _ => FUNC,
        },
        _ => ATOM,
    }
}

/// `e` printed, in parentheses when its precedence is below `min`.
fn wrap(e: &Expr, min: u16, depth: usize) -> String {
    let s = show(e, depth);
    if prec(e) < min {
        format!("({s})")
    } else {
        s
    }
}

/// The negation of a negative-looking term (for printing `a - b`), if it is one.
fn negated(e: &Expr) -> Option<Expr> {
    match e {
        Expr::Int(n) if *n < 0 => n.checked_neg().map(Expr::Int),
        Expr::Rational(p, q) if *p < 0 => p.checked_neg().map(|p| Expr::Rational(p, *q)),
        Expr::Float(x) if negative_literal(e) => Some(Expr::Float(-x)),
        Expr::Infinity { negative: true } => Some(Expr::Infinity { negative: false }),
        Expr::Apply(Op::Mul, args) if args.first().is_some_and(negative_literal) => {
            let c = negated(&args[0])?;
            let mut rest: Vec<Expr> = args[1..].to_vec();
            if c != Expr::Int(1) || rest.is_empty() {
                rest.insert(0, c);
            }
            Some(if rest.len() == 1 {
                rest.pop()?
            } else {
                Expr::Apply(Op::Mul, rest)
            })
        }
        _ => None,
    }
}

fn show(e: &Expr, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return "...".to_string();
    }
    let d = depth + 1;
    match e {
        Expr::Int(n) => n.to_string(),
        Expr::Rational(p, q) => format!("{p}/{q}"),
        Expr::Float(x) if x.is_nan() => "nan".to_string(),
        Expr::Float(x) if x.is_infinite() => (if *x < 0.0 { "-oo" } else { "oo" }).to_string(),
        Expr::Float(x) => format!("{x:?}"),
        Expr::Bool(b) => (if *b { "True" } else { "False" }).to_string(),
        Expr::Infinity { negative } => (if *negative { "-oo" } else { "oo" }).to_string(),
        Expr::NaN => "nan".to_string(),
        Expr::Symbol(s) => s.clone(),
        // A hand-built node with the wrong argument count prints as a plain call.
        Expr::Apply(op, args) if !op.accepts(args.len()) => {
            let parts: Vec<String> = args.iter().map(|a| show(a, d)).collect();
            format!("{}({})", op.name(), parts.join(", "))
        }
        Expr::Apply(op, args) => show_apply(*op, args, d),
    }
}

fn show_apply(op: Op, args: &[Expr], d: usize) -> String {
    let join = |sep: &str, min: u16| {
        args.iter()
            .map(|a| wrap(a, min, d))
            .collect::<Vec<_>>()
            .join(sep)
    };
    match op {
        Op::Add => show_add(args, d),
        Op::Mul => show_mul(args, d),
        Op::Pow => match &args[1] {
            Expr::Int(n) if *n < 0 => show_mul(
                std::slice::from_ref(&Expr::Apply(Op::Pow, args.to_vec())),
                d,
            ),
            exp => format!("{}**{}", wrap(&args[0], FUNC, d), wrap(exp, FUNC, d)),
        },
        Op::FloorDiv | Op::CleanDiv => {
            format!("({}//{})", wrap(&args[0], FUNC, d), wrap(&args[1], FUNC, d))
        }
        Op::Identity => format!("({})", show(&args[0], d)),
        Op::Lt | Op::Le | Op::Gt | Op::Ge => {
            let sym = match op {
                Op::Lt => "<",
                Op::Le => "<=",
                Op::Gt => ">",
                _ => ">=",
            };
            format!(
                "{} {sym} {}",
                wrap(&args[0], ADD, d),
                wrap(&args[1], ADD, d)
            )
        }
        Op::Eq => format!("Eq({}, {})", show(&args[0], d), show(&args[1], d)),
        Op::Ne => format!("Ne({}, {})", show(&args[0], d), show(&args[1], d)),
        // sympy's `(a) & (b)`; FUNC keeps Eq(...) and atoms bare.
        Op::And => join(" & ", FUNC),
        Op::Or => join(" | ", FUNC),
        Op::Xor => join(" ^ ", FUNC),
        Op::Not | Op::BitNot => format!("~{}", wrap(&args[0], FUNC, d)),
        _ => format!(
            "{}({})",
            op.name(),
            args.iter()
                .map(|a| show(a, d))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn show_add(args: &[Expr], d: usize) -> String {
    // sympy puts the constant last (`s0 + 1`) unless that would lead with a minus (`3 - s0`).
    let mut terms: Vec<&Expr> = args.iter().filter(|a| !is_numeric(a)).collect();
    terms.extend(args.iter().filter(|a| is_numeric(a)));
    if negated(terms[0]).is_some() {
        if let Some(i) = terms.iter().position(|t| negated(t).is_none()) {
            let t = terms.remove(i);
            terms.insert(0, t);
        }
    }
    let mut out = wrap(terms[0], ADD, d);
    for t in &terms[1..] {
        match negated(t) {
            Some(pos) => {
                out.push_str(" - ");
                out.push_str(&wrap(&pos, ADD + 1, d));
            }
            None => {
                out.push_str(" + ");
                out.push_str(&wrap(t, ADD, d));
            }
        }
    }
    out
}

fn show_mul(args: &[Expr], d: usize) -> String {
    let mut sign = "";
    let mut numer: Vec<String> = Vec::new();
    let mut denom: Vec<String> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let a = match (i, negated(a)) {
            (0, Some(pos)) if is_numeric(a) => {
                sign = "-";
                pos
            }
            _ => a.clone(),
        };
        match &a {
            Expr::Int(1) if args.len() > 1 => {}
            Expr::Rational(p, q) => {
                if *p != 1 {
                    numer.push(p.to_string());
                }
                denom.push(q.to_string());
            }
            Expr::Apply(Op::Pow, pa) if pa.len() == 2 && matches!(pa[1], Expr::Int(n) if n < 0) => {
                let Expr::Int(n) = pa[1] else {
                    unreachable!("matched above")
                };
                if n == -1 {
                    denom.push(wrap(&pa[0], POW, d));
                } else {
                    let exp = n
                        .checked_neg()
                        .map_or_else(|| format!("({})", -(n as i128)), |e| e.to_string());
                    denom.push(format!("{}**{exp}", wrap(&pa[0], FUNC, d)));
                }
            }
            other => numer.push(wrap(other, MUL, d)),
        }
    }
    let num = if numer.is_empty() {
        "1".to_string()
    } else {
        numer.join("*")
    };
    match denom.len() {
        0 => format!("{sign}{num}"),
        1 => format!("{sign}{num}/{}", denom[0]),
        _ => format!("{sign}{num}/({})", denom.join("*")),
    }
}
