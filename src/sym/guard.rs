//! Input shape guards: bind the program's symbols from concrete input shapes, then check
//! static dims, derived dims, equalities between inputs and range constraints
//! ([`check_shapes`]); and torch's `guards_code` strings ([`GuardCode`]).

use std::collections::BTreeMap;

use super::lex::{int_literal, lex, Tok};
use super::{parse_infix, sym_err, Expr};
use crate::error::{Error, Result};

/// The allowed values of a symbol or derived expression (model.json `range_constraints`;
/// a missing `min_val` is `i64::MIN`, a missing `max_val` is unbounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeConstraint {
    pub min: i64,
    pub max: Option<i64>,
}

/// One dimension of an input as the program declares it.
#[derive(Debug, Clone, PartialEq)]
pub enum DimSpec {
    Static(i64),
    Sym(Expr),
}

/// The declared shape of one input tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct InputShapeSpec {
    pub name: String,
    pub dims: Vec<DimSpec>,
}

/// Symbol name -> value for one call.
pub type Bindings = BTreeMap<String, i64>;

/// Where a symbol got its value (for messages).
#[derive(Clone, Copy)]
struct Origin<'a> {
    input: &'a str,
    dim: usize,
    size: i64,
}

fn guard(input: &str, dim: usize, value: i64, constraint: String) -> Error {
    Error::Guard {
        input: input.to_string(),
        dim,
        value,
        constraint,
    }
}

fn shape_text(dims: &[DimSpec]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            DimSpec::Static(n) => n.to_string(),
            DimSpec::Sym(e) => e.to_string(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Bind every symbol from the concrete shapes (bare symbols first, then linear derived dims
/// such as `2*s0` or `s0 + 1` solved exactly), then check ranks, static dims, every derived
/// dim, equalities between inputs and the range constraints (keys are symbol names or infix
/// expressions; keys over symbols no input binds, such as unbacked `u0`, are skipped).
pub fn check_shapes(
    specs: &[InputShapeSpec],
    actual: &[(&str, &[i64])],
    ranges: &BTreeMap<String, RangeConstraint>,
) -> Result<Bindings> {
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    for (name, _) in actual {
        if !names.contains(name) {
            return Err(Error::Input {
                input: name.to_string(),
                msg: format!(
                    "not an input of this program (its inputs are: {})",
                    names.join(", ")
                ),
            });
        }
    }
    // Pair specs with shapes; ranks and static dims first, they need no symbols.
    let mut pairs: Vec<(&InputShapeSpec, &[i64])> = Vec::with_capacity(specs.len());
    for spec in specs {
        let Some((_, shape)) = actual.iter().find(|(n, _)| *n == spec.name) else {
            return Err(Error::Input {
                input: spec.name.clone(),
                msg: format!(
                    "missing; the program expects a tensor of shape {}",
                    shape_text(&spec.dims)
                ),
            });
        };
        if shape.len() != spec.dims.len() {
            return Err(Error::Input {
                input: spec.name.clone(),
                msg: format!(
                    "expected rank {} (shape {}), got rank {} (shape {:?})",
                    spec.dims.len(),
                    shape_text(&spec.dims),
                    shape.len(),
                    shape
                ),
            });
        }
        for (i, (d, &v)) in spec.dims.iter().zip(shape.iter()).enumerate() {
            if v < 0 {
                return Err(guard(&spec.name, i, v, "sizes cannot be negative".into()));
            }
            if let DimSpec::Static(n) = d {
                if *n != v {
                    return Err(guard(&spec.name, i, v, format!("expected {n} (static)")));
                }
            }
        }
        pairs.push((spec, shape));
    }

    let mut bind = Bindings::new();
    let mut origin: BTreeMap<String, Origin> = BTreeMap::new();
    let sym_dims = || {
        pairs.iter().flat_map(|(spec, shape)| {
            spec.dims
                .iter()
                .zip(shape.iter())
                .enumerate()
                .filter_map(move |(i, (d, &v))| match d {
                    DimSpec::Sym(e) => Some((spec.name.as_str(), i, e, v)),
                    DimSpec::Static(_) => None,
                })
        })
    };

    // Bare symbols: the first occurrence binds, later ones must agree.
    for (input, dim, e, v) in sym_dims() {
        let Some(s) = e.as_symbol() else { continue };
        match bind.get(s) {
            None => {
                bind.insert(s.to_string(), v);
                origin.insert(
                    s.to_string(),
                    Origin {
                        input,
                        dim,
                        size: v,
                    },
                );
            }
            Some(&b) if b != v => {
                let o = origin[s];
                return Err(guard(
                    input,
                    dim,
                    v,
                    format!("must equal input '{}' dim {} ({s} = {b})", o.input, o.dim),
                ));
            }
            Some(_) => {}
        }
    }

    // Linear derived dims bind what is still free: a*s + b = v  =>  s = (v - b) / a.
    loop {
        let mut progress = false;
        for (input, dim, e, v) in sym_dims() {
            let Some((s, a, b)) = e.as_linear() else {
                continue;
            };
            if bind.contains_key(&s) {
                continue;
            }
            let num = v as i128 - b as i128;
            if num % a as i128 != 0 {
                return Err(guard(
                    input,
                    dim,
                    v,
                    format!("must be {e} for an integer {s}, and no integer gives {v}"),
                ));
            }
            let val = i64::try_from(num / a as i128).map_err(|_| {
                guard(
                    input,
                    dim,
                    v,
                    format!("must be {e}, which needs {s} out of int64 range"),
                )
            })?;
            bind.insert(s.clone(), val);
            origin.insert(
                s,
                Origin {
                    input,
                    dim,
                    size: v,
                },
            );
            progress = true;
        }
        if !progress {
            break;
        }
    }

    let env = |s: &str| bind.get(s).copied();
    let whence = |e: &Expr| -> String {
        let parts: Vec<String> = e
            .free_symbols()
            .iter()
            .filter_map(|s| {
                let o = origin.get(s)?;
                Some(format!(
                    "{s} = {} from input '{}' dim {}",
                    bind[s], o.input, o.dim
                ))
            })
            .collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    };

    // Every symbolic dim must now evaluate to the actual size.
    for (input, dim, e, v) in sym_dims() {
        if let Some(s) = e.free_symbols().iter().find(|s| !bind.contains_key(*s)) {
            return Err(Error::Input {
                input: input.to_string(),
                msg: format!(
                    "dimension {dim} is `{e}`, and no input dimension determines {s} (pt2web binds symbols from plain or linear input dims)"
                ),
            });
        }
        let want = e.eval_int(&env)?;
        if want != v {
            let c = match e.as_symbol() {
                Some(s) => {
                    let o = origin[s];
                    format!(
                        "must equal input '{}' dim {} ({s} = {want})",
                        o.input, o.dim
                    )
                }
                None => format!("must be {e} = {want}{}", whence(e)),
            };
            return Err(guard(input, dim, v, c));
        }
    }

    // Range constraints, bare symbols before derived expressions so the message names the
    // input the user set rather than a dim computed from it.
    let mut keyed: Vec<(bool, &String, Expr, &RangeConstraint)> = Vec::new();
    for (key, rc) in ranges {
        let e = parse_infix(key)
            .map_err(|err| sym_err(format!("range constraint key '{key}': {err}")))?;
        keyed.push((e.as_symbol().is_none(), key, e, rc));
    }
    keyed.sort_by_key(|k| k.0);
    for (_, key, e, rc) in keyed {
        if e.free_symbols().iter().any(|s| !bind.contains_key(s)) {
            continue;
        }
        let val = e.eval_int(&env)?;
        let below = val < rc.min;
        let above = rc.max.is_some_and(|m| val > m);
        if !(below || above) {
            continue;
        }
        let range = match (rc.min, rc.max) {
            (i64::MIN, Some(hi)) => format!("<= {hi}"),
            (lo, None) => format!(">= {lo}"),
            (lo, Some(hi)) => format!("in [{lo}, {hi}]"),
        };
        // Report at the dim that is this expression if there is one, else where its symbol came from.
        let lin = e.as_linear();
        let at =
            sym_dims().find(|(_, _, d, _)| **d == e || (lin.is_some() && d.as_linear() == lin));
        let (input, dim, size) = match at {
            Some((input, dim, _, v)) => (input, dim, v),
            None => {
                let first = e.free_symbols().into_iter().next().unwrap_or_default();
                origin
                    .get(&first)
                    .map_or(("?", 0, val), |o| (o.input, o.dim, o.size))
            }
        };
        // Name the value when it is not simply this dim's size (a derived key, or a symbol
        // solved from a derived dim such as 2*s0).
        let c = if e.as_symbol().is_some() && size == val {
            format!("{key} must be {range} (range constraint of the exported program)")
        } else {
            format!("{key} = {val} must be {range}{}", whence(&e))
        };
        return Err(guard(input, dim, size, c));
    }
    Ok(bind)
}

/// One step of the path from `L` to an input in guards_code: `['xs']` or `[1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathKey {
    Key(String),
    Index(i64),
}

/// What a guards_code reference reads from the input it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardAttr {
    /// `.size()[i]` (negative `i` counts from the end, as in Python).
    Size(i64),
    /// `.stride()[i]`
    Stride(i64),
    /// `.storage_offset()`
    StorageOffset,
    /// `.numel()`
    Numel,
    /// `.dim()`
    Dim,
    /// The input itself (an int input), no accessor.
    Value,
}

/// A reference like `L['xs'][1].size()[0]` taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardRef {
    pub path: Vec<PathKey>,
    pub attr: GuardAttr,
}

impl GuardRef {
    /// Parse the canonical symbol text [`parse_infix`] gives an accessor chain.
    pub fn parse(symbol: &str) -> Option<GuardRef> {
        let toks: Vec<Tok> = lex(symbol).ok()?.into_iter().map(|(t, _)| t).collect();
        let mut it = toks.into_iter().peekable();
        if !matches!(it.next(), Some(Tok::Ident(_))) {
            return None;
        }
        let mut path = Vec::new();
        let index = |it: &mut std::iter::Peekable<std::vec::IntoIter<Tok>>| -> Option<i64> {
            let neg = it.next_if_eq(&Tok::Punct("-")).is_some();
            match it.next()? {
                Tok::Int(d) => int_literal(&d, neg).ok(),
                _ => None,
            }
        };
        while it.next_if_eq(&Tok::Punct("[")).is_some() {
            let key = match it.peek()? {
                Tok::Str(s) => {
                    let k = PathKey::Key(s.clone());
                    it.next();
                    k
                }
                _ => PathKey::Index(index(&mut it)?),
            };
            path.push(key);
            if it.next()? != Tok::Punct("]") {
                return None;
            }
        }
        if path.is_empty() {
            return None;
        }
        let attr = match it.next() {
            None => {
                return Some(GuardRef {
                    path,
                    attr: GuardAttr::Value,
                })
            }
            Some(Tok::Punct(".")) => {
                let Some(Tok::Ident(m)) = it.next() else {
                    return None;
                };
                if it.next()? != Tok::Punct("(") || it.next()? != Tok::Punct(")") {
                    return None;
                }
                let mut indexed = |f: fn(i64) -> GuardAttr| -> Option<GuardAttr> {
                    if it.next()? != Tok::Punct("[") {
                        return None;
                    }
                    let i = index(&mut it)?;
                    (it.next()? == Tok::Punct("]")).then_some(f(i))
                };
                match m.as_str() {
                    "size" => indexed(GuardAttr::Size)?,
                    "stride" => indexed(GuardAttr::Stride)?,
                    "storage_offset" => GuardAttr::StorageOffset,
                    "numel" => GuardAttr::Numel,
                    "dim" => GuardAttr::Dim,
                    _ => return None,
                }
            }
            Some(_) => return None,
        };
        it.next().is_none().then_some(GuardRef { path, attr })
    }

    /// The input as a Python path without `L`: `xs[1]`, `d['q']`, `k`.
    pub fn input_path(&self) -> String {
        let mut out = String::new();
        for (i, k) in self.path.iter().enumerate() {
            match k {
                PathKey::Key(s) if i == 0 => out.push_str(s),
                PathKey::Key(s) => out.push_str(&format!("['{s}']")),
                PathKey::Index(n) => out.push_str(&format!("[{n}]")),
            }
        }
        out
    }

    /// The flattened input name torch gives the graph placeholder: `xs_1`, `d_q`, `k`.
    pub fn flat_name(&self) -> String {
        let parts: Vec<String> = self
            .path
            .iter()
            .map(|k| match k {
                PathKey::Key(s) => s.clone(),
                PathKey::Index(n) => n.to_string(),
            })
            .collect();
        parts.join("_")
    }

    /// Read the attribute from a tensor's shape, assuming a contiguous tensor at offset 0
    /// (how pt2web hands inputs to a program). None for an index out of range or `Value`.
    pub fn read(&self, shape: &[i64]) -> Option<i64> {
        let at = |i: i64| -> Option<usize> {
            let r = shape.len() as i64;
            let i = if i < 0 { i + r } else { i };
            (0..r).contains(&i).then_some(i as usize)
        };
        match self.attr {
            GuardAttr::Size(i) => Some(shape[at(i)?]),
            GuardAttr::Stride(i) => shape[at(i)? + 1..]
                .iter()
                .try_fold(1i64, |acc, &d| acc.checked_mul(d.max(1))),
            GuardAttr::StorageOffset => Some(0),
            GuardAttr::Numel => shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d)),
            GuardAttr::Dim => Some(shape.len() as i64),
            GuardAttr::Value => None,
        }
    }
}

/// One `guards_code` string of model.json, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardCode {
    pub source: String,
    pub expr: Expr,
    /// Every input reference, with its symbol name in `expr`.
    pub refs: Vec<(String, GuardRef)>,
}

impl GuardCode {
    pub fn parse(src: &str) -> Result<GuardCode> {
        let expr = parse_infix(src)?;
        let mut refs = Vec::new();
        for s in expr.free_symbols() {
            let r = GuardRef::parse(&s)
                .ok_or_else(|| sym_err(format!("guard `{src}` reads `{s}`, which is not an input reference like L['x'].size()[0]")))?;
            refs.push((s, r));
        }
        Ok(GuardCode {
            source: src.to_string(),
            expr,
            refs,
        })
    }

    fn values(&self, lookup: &dyn Fn(&GuardRef) -> Option<i64>) -> Result<BTreeMap<&str, i64>> {
        let mut vals = BTreeMap::new();
        for (s, r) in &self.refs {
            let v = lookup(r).ok_or_else(|| Error::Input {
                input: r.input_path(),
                msg: format!(
                    "the guard `{}` reads {s}, which this call does not provide",
                    self.source
                ),
            })?;
            vals.insert(s.as_str(), v);
        }
        Ok(vals)
    }

    /// Whether the guard holds; `lookup` resolves each reference (see [`GuardRef::read`]).
    pub fn holds(&self, lookup: &dyn Fn(&GuardRef) -> Option<i64>) -> Result<bool> {
        let vals = self.values(lookup)?;
        self.expr.eval_bool(&|s| vals.get(s).copied())
    }

    /// `Error::Guard` naming the first input the guard reads when it does not hold.
    pub fn check(&self, lookup: &dyn Fn(&GuardRef) -> Option<i64>) -> Result<()> {
        let vals = self.values(lookup)?;
        if self.expr.eval_bool(&|s| vals.get(s).copied())? {
            return Ok(());
        }
        let (input, dim, value) = match self.refs.first() {
            Some((s, r)) => {
                let dim = match r.attr {
                    GuardAttr::Size(i) | GuardAttr::Stride(i) => usize::try_from(i).unwrap_or(0),
                    _ => 0,
                };
                (r.input_path(), dim, vals[s.as_str()])
            }
            None => (String::new(), 0, 0),
        };
        let shown: Vec<String> = self
            .refs
            .iter()
            .take(6)
            .map(|(s, _)| format!("{s} = {}", vals[s.as_str()]))
            .collect();
        Err(Error::Guard {
            input,
            dim,
            value,
            constraint: format!(
                "the exported program requires `{}` (with {})",
                self.source,
                shown.join(", ")
            ),
        })
    }
}
