//! Parser for infix text: sympy `str()` (range_constraints keys: `s0 + 1`, `2*s0`, `(s0//2)`,
//! `Max(1, s0)`, `Eq(s0, 3)`, `(s0 > 1) & (s0 < 5)`) and the Python torch prints into
//! guards_code (`L['x'].size()[0] // 2 != 1`, `max(...)`, `math.floor(...)`, `and`, `not`).
//!
//! Python precedence, lowest first: `x if c else y`, `or`, `and`, `not`, comparisons
//! (chained: `a < b < c` is `a < b and b < c`), `|`, `^`, `&`, `<< >>`, `+ -`,
//! `* / // %`, unary `- + ~`, `**`, calls and atoms.
//!
//! Where the two dialects differ we take the exact reading: `/` is sympy's rational division
//! (Python's float true division agrees up to rounding), `%` is Python's modulus, and
//! `&`, `|`, `^`, `~` are logical on booleans and bitwise on integers (as torch's
//! BitwiseFn evaluates them).
//!
//! `L['xs'][1].size()[0]` and similar accessor chains become one [`Expr::Symbol`] whose
//! name is the canonical text; [`GuardRef`](super::GuardRef) takes it apart.

use super::lex::{int_literal, Cursor, Tok};
use super::srepr::{atom, context, negate};
use super::{sym_err, Built, Expr, Op, MAX_DEPTH};
use crate::error::{Error, Result};

/// Parse sympy `str()` / Python expression text.
pub fn parse_infix(s: &str) -> Result<Expr> {
    let mut p = Parser {
        c: Cursor::new(s)?,
        depth: 0,
    };
    let e = p.ternary().map_err(|e| context(*e, s))?;
    if !p.c.at_end() {
        return Err(context(p.c.unexpected("an operator or the end"), s));
    }
    Ok(e.e)
}

struct Parser {
    c: Cursor,
    /// Current recursion depth, bounded by MAX_DEPTH. Every nesting (parentheses, calls,
    /// unary chains, right operands) passes through `expr`, which counts it.
    depth: usize,
}

// Binding powers, Python's precedence from loosest to tightest.
const BP_TERNARY: u8 = 1;
const BP_OR: u8 = 2;
const BP_AND: u8 = 3;
const BP_NOT: u8 = 4;
const BP_CMP: u8 = 5;
const BP_BITOR: u8 = 6;
const BP_BITXOR: u8 = 7;
const BP_BITAND: u8 = 8;
const BP_SHIFT: u8 = 9;
const BP_ADD: u8 = 10;
const BP_MUL: u8 = 11;
const BP_UNARY: u8 = 12;
const BP_POW: u8 = 13;

const COMPARISONS: &[(&str, Op)] = &[
    ("<", Op::Lt),
    ("<=", Op::Le),
    (">", Op::Gt),
    (">=", Op::Ge),
    ("==", Op::Eq),
    ("!=", Op::Ne),
];

fn is_kw(t: Option<&Tok>, kw: &str) -> bool {
    matches!(t, Some(Tok::Ident(s)) if s == kw)
}

fn comparison_op(t: Option<&Tok>) -> Option<Op> {
    match t {
        Some(Tok::Punct(p)) => COMPARISONS.iter().find(|(s, _)| s == p).map(|(_, o)| *o),
        _ => None,
    }
}

/// The binary operator at the cursor and its binding power.
fn binary_op(t: Option<&Tok>) -> Option<(&'static str, u8)> {
    if comparison_op(t).is_some() {
        return Some(("cmp", BP_CMP));
    }
    Some(match t? {
        Tok::Ident(k) if k == "if" => ("if", BP_TERNARY),
        Tok::Ident(k) if k == "or" => ("or", BP_OR),
        Tok::Ident(k) if k == "and" => ("and", BP_AND),
        Tok::Punct(p) => match *p {
            "|" => ("|", BP_BITOR),
            "^" => ("^", BP_BITXOR),
            "&" => ("&", BP_BITAND),
            s @ ("<<" | ">>") => (s, BP_SHIFT),
            s @ ("+" | "-") => (s, BP_ADD),
            s @ ("*" | "/" | "//" | "%") => (s, BP_MUL),
            "**" => ("**", BP_POW),
            _ => return None,
        },
        _ => return None,
    })
}

/// Join `lhs op rhs`, flattening into an existing n-ary node of the same op.
fn join(op: Op, lhs: Built, rhs: Built) -> Result<Built> {
    match lhs.e {
        Expr::Apply(o, mut args)
            if o == op && matches!(op, Op::Add | Op::Mul | Op::And | Op::Or) =>
        {
            let depth = lhs.depth.max(rhs.depth + 1);
            if depth > MAX_DEPTH {
                return Err(sym_err(format!(
                    "expression nests deeper than {MAX_DEPTH} levels"
                )));
            }
            args.push(rhs.e);
            Ok(Built {
                e: Expr::Apply(op, args),
                depth,
            })
        }
        e => Built::apply(
            op,
            vec![
                Built {
                    e,
                    depth: lhs.depth,
                },
                rhs,
            ],
        ),
    }
}

/// Parser-internal result: a boxed error keeps every recursive frame small (the shared
/// `Error` is ~100 bytes, and debug builds keep many temporaries of it per frame).
type PResult<T> = std::result::Result<T, Box<Error>>;

#[cold]
fn too_deep() -> Box<Error> {
    Box::new(sym_err(format!(
        "expression nests deeper than {MAX_DEPTH} levels"
    )))
}

impl Parser {
    fn ternary(&mut self) -> PResult<Built> {
        self.expr(0)
    }

    /// Precedence climbing: parse operators binding at least `min_bp`.
    fn expr(&mut self, min_bp: u8) -> PResult<Built> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(too_deep());
        }
        let mut lhs = self.prefix()?;
        while let Some((op, bp)) = binary_op(self.c.peek()) {
            if bp < min_bp {
                break;
            }
            if op == "cmp" {
                lhs = self.comparisons(lhs)?;
                continue;
            }
            self.c.next();
            lhs = match op {
                "if" => {
                    // `x if c else y` (torch prints Piecewise this way); right-associative.
                    let cond = self.expr(BP_TERNARY + 1)?;
                    if !is_kw(self.c.peek(), "else") {
                        return Err(Box::new(self.c.unexpected("'else'")));
                    }
                    self.c.next();
                    let other = self.expr(BP_TERNARY)?;
                    Built::apply(Op::Where, vec![cond, lhs, other])?
                }
                // Right-associative, and the exponent may carry a sign: 2**-1.
                "**" => Built::apply(Op::Pow, vec![lhs, self.expr(BP_UNARY)?])?,
                _ => combine(op, lhs, self.expr(bp + 1)?)?,
            };
        }
        self.depth -= 1;
        Ok(lhs)
    }

    /// Chained comparisons share the middle operand: `a < b < c` is `(a < b) and (b < c)`.
    fn comparisons(&mut self, first: Built) -> PResult<Built> {
        let mut parts: Vec<Built> = Vec::new();
        let mut lhs = first;
        while let Some(op) = comparison_op(self.c.peek()) {
            self.c.next();
            let rhs = self.expr(BP_CMP + 1)?;
            let mid = Built {
                e: rhs.e.clone(),
                depth: rhs.depth,
            };
            parts.push(Built::apply(op, vec![lhs, rhs])?);
            lhs = mid;
        }
        Ok(chain(parts)?)
    }

    /// Prefix operators (`not`, `-`, `+`, `~`) or a primary.
    fn prefix(&mut self) -> PResult<Built> {
        let op = match self.c.peek() {
            Some(Tok::Ident(k)) if k == "not" => "not",
            Some(Tok::Punct(p @ ("-" | "+" | "~"))) => *p,
            _ => return self.primary(),
        };
        self.c.next();
        // `not` binds looser than comparisons; Python's -a**b is -(a**b).
        let x = self.expr(if op == "not" { BP_NOT } else { BP_UNARY })?;
        Ok(unary(op, x)?)
    }

    fn primary(&mut self) -> PResult<Built> {
        if self.c.eat_punct("(") {
            let e = self.ternary()?;
            self.c.expect_punct(")")?;
            return Ok(e);
        }
        let Some(Tok::Ident(first)) = self.c.peek().cloned() else {
            return Ok(self.literal()?);
        };
        self.c.next();
        let name = self.dotted(first);
        if self.c.eat_punct("(") {
            let mut args = Vec::new();
            if !self.c.eat_punct(")") {
                loop {
                    args.push(self.ternary()?);
                    if self.c.eat_punct(")") {
                        break;
                    }
                    self.c.expect_punct(",")?;
                }
            }
            Ok(call(&name, args)?)
        } else if self.c.is_punct("[") {
            Ok(Built::leaf(self.accessor(name)?))
        } else {
            Ok(Built::leaf(name_atom(&name)))
        }
    }

    /// A number literal (anything else here is a syntax error).
    fn literal(&mut self) -> Result<Built> {
        match self.c.next() {
            Some(Tok::Int(d)) => Ok(Built::leaf(Expr::Int(int_literal(&d, false)?))),
            Some(Tok::Float(f)) => Ok(Built::leaf(Expr::Float(f))),
            Some(_) => {
                self.c.pos_back();
                Err(self.c.unexpected("an expression"))
            }
            None => Err(self.c.unexpected("an expression")),
        }
    }

    /// Dotted names: math.floor, torch.sym_float, math.inf.
    fn dotted(&mut self, mut name: String) -> String {
        while self.c.is_punct(".") && matches!(self.c.peek_at(1), Some(Tok::Ident(_))) {
            self.c.next();
            if let Some(Tok::Ident(part)) = self.c.next() {
                name = format!("{name}.{part}");
            }
        }
        name
    }

    /// `L['x'].size()[0]` (and `.stride()[i]`, `.storage_offset()`, nested `[..]` keys) as
    /// one symbol with canonical text: single-quoted keys, `.size(i)` spelled `.size()[i]`.
    fn accessor(&mut self, mut text: String) -> Result<Expr> {
        loop {
            if self.c.eat_punct("[") {
                match self.c.next() {
                    Some(Tok::Str(s)) => text.push_str(&format!(
                        "['{}']",
                        s.replace('\\', "\\\\").replace('\'', "\\'")
                    )),
                    Some(Tok::Int(d)) => text.push_str(&format!("[{}]", int_literal(&d, false)?)),
                    Some(Tok::Punct("-")) => match self.c.next() {
                        Some(Tok::Int(d)) => {
                            text.push_str(&format!("[{}]", int_literal(&d, true)?))
                        }
                        _ => return Err(sym_err("expected an index after '[-'")),
                    },
                    _ => {
                        return Err(sym_err(
                            "expected a string key or an integer index in '[...]'",
                        ))
                    }
                }
                self.c.expect_punct("]")?;
            } else if self.c.is_punct(".") {
                self.c.next();
                let Some(Tok::Ident(method)) = self.c.next() else {
                    return Err(sym_err("expected a method name after '.'"));
                };
                self.c.expect_punct("(")?;
                if let Some(Tok::Int(d)) = self.c.peek().cloned() {
                    self.c.next();
                    text.push_str(&format!(".{method}()[{}]", int_literal(&d, false)?));
                } else {
                    text.push_str(&format!(".{method}()"));
                }
                self.c.expect_punct(")")?;
            } else {
                return Ok(Expr::Symbol(text));
            }
        }
    }
}

fn chain(mut parts: Vec<Built>) -> Result<Built> {
    if parts.len() == 1 {
        return Ok(parts.pop().expect("one comparison"));
    }
    Built::apply(Op::And, parts)
}

fn unary(op: &str, x: Built) -> Result<Built> {
    match op {
        "not" => Built::apply(Op::Not, vec![x]),
        "-" => negate(x),
        "+" => Ok(x),
        _ if x.e.is_boolean() => Built::apply(Op::Not, vec![x]),
        _ => Built::apply(Op::BitNot, vec![x]),
    }
}

fn call(name: &str, args: Vec<Built>) -> Result<Built> {
    // Python's round(x) is RoundToInt, round(x, n) is RoundDecimal.
    let op = match (name, args.len()) {
        ("round", 1) => Some(Op::RoundToInt),
        ("round", 2) => Some(Op::RoundDecimal),
        _ => Op::from_name(name),
    };
    match op {
        Some(op) => Built::apply(op, args),
        None if args.is_empty() => atom(name).map(Built::leaf).map_err(|_| unknown(name)),
        None => Err(unknown(name)),
    }
}

fn unknown(name: &str) -> crate::error::Error {
    sym_err(format!("unknown function '{name}'"))
}

/// Bare names: constants (`oo`, `True`, `math.inf`...) or symbols.
fn name_atom(name: &str) -> Expr {
    match name {
        "math.inf" => Expr::Infinity { negative: false },
        "math.nan" => Expr::NaN,
        _ => atom(name).unwrap_or_else(|_| Expr::Symbol(name.to_string())),
    }
}

/// Build `lhs op rhs` for the operators handled uniformly in the climbing loop.
fn combine(op: &str, lhs: Built, rhs: Built) -> Result<Built> {
    match op {
        "or" => join(Op::Or, lhs, rhs),
        "and" => join(Op::And, lhs, rhs),
        "|" => logical_or_bitwise(Op::Or, Op::BitOr, lhs, rhs),
        "^" => logical_or_bitwise(Op::Xor, Op::BitXor, lhs, rhs),
        "&" => logical_or_bitwise(Op::And, Op::BitAnd, lhs, rhs),
        "<<" => Built::apply(Op::LShift, vec![lhs, rhs]),
        ">>" => Built::apply(Op::RShift, vec![lhs, rhs]),
        "+" => join(Op::Add, lhs, rhs),
        "-" => join(Op::Add, lhs, negate(rhs)?),
        "*" => join(Op::Mul, lhs, rhs),
        "/" => divide(lhs, rhs),
        "//" => Built::apply(Op::FloorDiv, vec![lhs, rhs]),
        "%" => Built::apply(Op::PythonMod, vec![lhs, rhs]),
        _ => Err(sym_err(format!("unsupported operator '{op}'"))),
    }
}

fn logical_or_bitwise(logical: Op, bitwise: Op, lhs: Built, rhs: Built) -> Result<Built> {
    if lhs.e.is_boolean() && rhs.e.is_boolean() {
        join(logical, lhs, rhs)
    } else {
        Built::apply(bitwise, vec![lhs, rhs])
    }
}

/// `a / b`: literal over literal folds to a Rational; otherwise `a * b**-1` as sympy builds it.
fn divide(lhs: Built, rhs: Built) -> Result<Built> {
    if let (Expr::Int(p), Expr::Int(q)) = (&lhs.e, &rhs.e) {
        if *q == 0 {
            return Err(sym_err("division by zero in a literal"));
        }
        return Ok(Built::leaf(Expr::rational(*p, *q)?));
    }
    let inv = Built::apply(Op::Pow, vec![rhs, Built::leaf(Expr::Int(-1))])?;
    join(Op::Mul, lhs, inv)
}
