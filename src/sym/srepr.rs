//! Parser for sympy `srepr` strings, the form model.json stores sizes and strides in:
//! `Add(Mul(Integer(2), Symbol('s77', positive=True, integer=True)), Integer(1))`.

use super::lex::{int_literal, Cursor, Tok};
use super::{sym_err, Built, Expr, Op, MAX_DEPTH};
use crate::error::{Error, Result};

/// Parse a sympy `srepr` string.
pub fn parse_srepr(s: &str) -> Result<Expr> {
    let mut p = Parser { c: Cursor::new(s)? };
    let e = p.term(0).map_err(|e| context(e, s))?;
    if !p.c.at_end() {
        return Err(context(p.c.unexpected("end of expression"), s));
    }
    Ok(e.e)
}

/// Prefix the input (shortened) so a bad size in a big model.json can be found.
pub(crate) fn context(e: Error, src: &str) -> Error {
    match e {
        Error::Sym(msg) => {
            let shown: String = src.chars().take(120).collect();
            let more = if shown.len() < src.len() { "..." } else { "" };
            Error::Sym(format!("{msg} (in `{shown}{more}`)"))
        }
        other => other,
    }
}

/// One call argument: an expression, a string, or a keyword (`integer=True`) we ignore.
enum Arg {
    E(Built),
    Str(String),
    Kw,
}

struct Parser {
    c: Cursor,
}

impl Parser {
    fn term(&mut self, depth: usize) -> Result<Built> {
        if depth > MAX_DEPTH {
            return Err(sym_err(format!(
                "expression nests deeper than {MAX_DEPTH} levels"
            )));
        }
        match self.c.next() {
            Some(Tok::Punct("-")) => {
                if let Some(Tok::Int(d)) = self.c.peek().cloned() {
                    self.c.next();
                    return Ok(Built::leaf(Expr::Int(int_literal(&d, true)?)));
                }
                let t = self.term(depth + 1)?;
                negate(t)
            }
            Some(Tok::Int(d)) => Ok(Built::leaf(Expr::Int(int_literal(&d, false)?))),
            Some(Tok::Float(f)) => Ok(Built::leaf(Expr::Float(f))),
            Some(Tok::Ident(name)) => {
                if self.c.eat_punct("(") {
                    let args = self.args(depth + 1)?;
                    call(&name, args)
                } else {
                    atom(&name).map(Built::leaf)
                }
            }
            Some(_) => {
                self.c.pos_back();
                Err(self.c.unexpected("an expression"))
            }
            None => Err(self.c.unexpected("an expression")),
        }
    }

    /// Arguments after `(` up to and including `)`.
    fn args(&mut self, depth: usize) -> Result<Vec<Arg>> {
        let mut out = Vec::new();
        if self.c.eat_punct(")") {
            return Ok(out);
        }
        loop {
            let kw = matches!(self.c.peek(), Some(Tok::Ident(_)))
                && matches!(self.c.peek_at(1), Some(Tok::Punct("=")));
            if kw {
                self.c.next();
                self.c.next();
                match self.c.peek() {
                    Some(Tok::Str(_)) => {
                        self.c.next();
                    }
                    _ => {
                        self.term(depth)?;
                    }
                }
                out.push(Arg::Kw);
            } else if let Some(Tok::Str(s)) = self.c.peek().cloned() {
                self.c.next();
                out.push(Arg::Str(s));
            } else {
                out.push(Arg::E(self.term(depth)?));
            }
            if self.c.eat_punct(")") {
                return Ok(out);
            }
            self.c.expect_punct(",")?;
        }
    }
}

/// Names sympy prints without arguments, and the zero-argument class forms.
pub(crate) fn atom(name: &str) -> Result<Expr> {
    Ok(match name {
        "oo" | "int_oo" | "Infinity" | "IntInfinity" => Expr::Infinity { negative: false },
        "NegativeInfinity" | "NegativeIntInfinity" => Expr::Infinity { negative: true },
        "nan" | "zoo" | "NaN" | "ComplexInfinity" => Expr::NaN,
        "true" | "True" | "BooleanTrue" => Expr::Bool(true),
        "false" | "False" | "BooleanFalse" => Expr::Bool(false),
        "Zero" => Expr::Int(0),
        "One" => Expr::Int(1),
        "NegativeOne" => Expr::Int(-1),
        "Half" => Expr::Rational(1, 2),
        "pi" => Expr::Float(std::f64::consts::PI),
        "E" => Expr::Float(std::f64::consts::E),
        _ => return Err(sym_err(format!("unknown name '{name}'"))),
    })
}

fn call(name: &str, args: Vec<Arg>) -> Result<Built> {
    let mut exprs = Vec::new();
    let mut strs = Vec::new();
    for a in args {
        match a {
            Arg::E(e) => exprs.push(e),
            Arg::Str(s) => strs.push(s),
            Arg::Kw => {}
        }
    }
    let leaf = |e| Ok(Built::leaf(e));
    match name {
        "Symbol" | "Dummy" => match (strs.as_slice(), exprs.is_empty()) {
            ([s], true) if !s.is_empty() => leaf(Expr::Symbol(s.clone())),
            _ => Err(sym_err(format!("{name} takes one name string"))),
        },
        "Integer" => match (exprs.as_slice(), strs.is_empty()) {
            (
                [Built {
                    e: Expr::Int(n), ..
                }],
                true,
            ) => leaf(Expr::Int(*n)),
            _ => Err(sym_err("Integer takes one integer literal")),
        },
        "Rational" => match (exprs.as_slice(), strs.is_empty()) {
            (
                [Built {
                    e: Expr::Int(p), ..
                }, Built {
                    e: Expr::Int(q), ..
                }],
                true,
            ) => {
                if *q == 0 {
                    return Err(sym_err("Rational with denominator 0"));
                }
                leaf(Expr::rational(*p, *q)?)
            }
            _ => Err(sym_err("Rational takes two integer literals")),
        },
        "Float" => {
            let v = match (strs.as_slice(), exprs.as_slice()) {
                ([s], []) => s
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| sym_err(format!("bad Float literal '{s}'")))?,
                (
                    [],
                    [Built {
                        e: Expr::Float(f), ..
                    }],
                ) => *f,
                (
                    [],
                    [Built {
                        e: Expr::Int(n), ..
                    }],
                ) => *n as f64,
                _ => return Err(sym_err("Float takes one number or number string")),
            };
            leaf(Expr::Float(v))
        }
        // sympy's Piecewise((e1, c1), (e2, c2), ...) as nested Where(c, e, rest); a pair is
        // kept as Where(c, e, nan) until its Piecewise folds it.
        "ExprCondPair" => match <[Built; 2]>::try_from(exprs) {
            Ok([e, c]) => Built::apply(Op::Where, vec![c, e, Built::leaf(Expr::NaN)]),
            Err(_) => Err(sym_err("ExprCondPair takes an expression and a condition")),
        },
        "Piecewise" => {
            let mut acc = Built::leaf(Expr::NaN);
            for pair in exprs.into_iter().rev() {
                match pair.e {
                    Expr::Apply(Op::Where, mut a) if a.len() == 3 => {
                        a.truncate(2);
                        let depth = pair.depth.max(acc.depth) + 1;
                        a.push(acc.e);
                        acc = Built {
                            e: Expr::Apply(Op::Where, a),
                            depth,
                        };
                    }
                    _ => return Err(sym_err("Piecewise takes ExprCondPair arguments")),
                }
            }
            if acc.depth > MAX_DEPTH {
                return Err(sym_err(format!(
                    "expression nests deeper than {MAX_DEPTH} levels"
                )));
            }
            Ok(acc)
        }
        _ => {
            if !strs.is_empty() {
                return Err(sym_err(format!("{name} does not take string arguments")));
            }
            match Op::from_name(name) {
                Some(op) => Built::apply(op, exprs),
                None if exprs.is_empty() => atom(name).map(Built::leaf).map_err(|_| unknown(name)),
                None => Err(unknown(name)),
            }
        }
    }
}

fn unknown(name: &str) -> Error {
    sym_err(format!("unknown function '{name}' (pt2web knows sympy's arithmetic, relations and logic and torch.utils._sympy.functions)"))
}

/// `-x`: fold into numeric literals, otherwise `Mul(-1, x)` as sympy does.
pub(crate) fn negate(t: Built) -> Result<Built> {
    let e = match t.e {
        Expr::Int(n) => Expr::Int(
            n.checked_neg()
                .ok_or_else(|| sym_err("integer overflow negating a literal"))?,
        ),
        Expr::Rational(p, q) => Expr::rational(
            p.checked_neg()
                .ok_or_else(|| sym_err("integer overflow negating a literal"))?,
            q,
        )?,
        Expr::Float(f) => Expr::Float(-f),
        Expr::Infinity { negative } => Expr::Infinity {
            negative: !negative,
        },
        other => {
            return Built::apply(
                Op::Mul,
                vec![
                    Built::leaf(Expr::Int(-1)),
                    Built {
                        e: other,
                        depth: t.depth,
                    },
                ],
            )
        }
    };
    Ok(Built::leaf(e))
}
