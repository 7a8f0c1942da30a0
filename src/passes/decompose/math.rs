//! Decompositions of composite math ops: `cross`, `trace`, `isclose`, `isin`,
//! trapezoid rules, `gradient`, `vander`, `vecdot`, `renorm`, distances and quantiles,
//! following ATen's own implementations (the order of operations included, so results
//! round as torch's do).

use super::shape::broadcast;
use super::{boolean, float, int, opt_float, opt_int, opt_tensor, string, tensor, wrap};
use super::{Builder, DResult};
use crate::dtype::DType;
use crate::program::{Arg, Node};

fn one(v: usize) -> DResult<Vec<Arg>> {
    Ok(vec![Arg::Tensor(v)])
}

/// `x` rotated by `k` along `dim` (length 3): `x[(i + k) % 3]`.
fn roll3(b: &mut Builder, x: usize, dim: i64, k: i64) -> DResult<usize> {
    let hi = b.slice(x, dim, k, 3, 1)?;
    let lo = b.slice(x, dim, 0, k, 1)?;
    b.cat(&[hi, lo], dim)
}

pub(super) fn cross(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let xs = broadcast(b, &[tensor(n, "self")?, tensor(n, "other")?])?;
    let (x, y) = (xs[0], xs[1]);
    let s = b.sizes(x)?;
    let dim = match opt_int(n, "dim")? {
        Some(d) => wrap(d, s.len())?,
        // linalg_cross defaults to -1; cross(dim=None) takes the first dim of size 3.
        None if n.target.starts_with("aten.linalg_cross") => wrap(-1, s.len())?,
        None => s
            .iter()
            .position(|&d| d == 3)
            .ok_or("no dimension of size 3")? as i64,
    };
    if s.get(dim as usize) != Some(&3) {
        return Err(format!("dim {dim} of {s:?} is not of size 3"));
    }
    let (x1, y2) = (roll3(b, x, dim, 1)?, roll3(b, y, dim, 2)?);
    let (x2, y1) = (roll3(b, x, dim, 2)?, roll3(b, y, dim, 1)?);
    let a = b.bin("mul", x1, y2)?;
    let c = b.bin("mul", x2, y1)?;
    one(b.bin("sub", a, c)?)
}

pub(super) fn trace(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    if b.rank(x)? != 2 {
        return Err("trace of a tensor that is not a matrix".into());
    }
    let d = b.diagonal(x, 0, 0, 1)?;
    one(b.sum(d, &[], false)?)
}

fn vector_norm(
    b: &mut Builder,
    x: usize,
    ord: f64,
    dims: Option<&[i64]>,
    keepdim: bool,
) -> DResult<usize> {
    let mut args = vec![("self", Arg::Tensor(x)), ("ord", Arg::Float(ord))];
    if let Some(d) = dims {
        args.push(("dim", Arg::Ints(d.to_vec())));
    }
    args.push(("keepdim", Arg::Bool(keepdim)));
    b.t("aten.linalg_vector_norm.default", args)
}

pub(super) fn isclose(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let y = tensor(n, "other")?;
    let rtol = float(n, "rtol", Some(1e-5))?;
    let atol = float(n, "atol", Some(1e-8))?;
    let equal_nan = boolean(n, "equal_nan", false)?;
    let dtype = b.dtype(x)?;
    if dtype != b.dtype(y)? || dtype.is_complex() {
        return Err("isclose of complex or mixed dtypes".into());
    }
    // torch: x == y | (isfinite(|x - y|) & |x - y| <= atol + rtol * |y|); for integers an
    // equality when both tolerances are 0, and bools compared as float32.
    let eq = b.bin("eq", x, y)?;
    if !dtype.is_float() && rtol == 0.0 && atol == 0.0 {
        return one(eq);
    }
    let (x, y) = match dtype {
        DType::Bool => (b.cast(x, DType::F32)?, b.cast(y, DType::F32)?),
        _ => (x, y),
    };
    let ry = b.bin_s("mul", y, rtol)?;
    let ary = b.un("abs", ry)?;
    let allowed = b.bin_s("add", ary, atol)?;
    let d = b.bin("sub", x, y)?;
    let ad = b.un("abs", d)?;
    let finite = b.un("isfinite", ad)?;
    let le = b.bin("le", ad, allowed)?;
    let close = b.bin("logical_and", finite, le)?;
    let mut out = b.bin("logical_or", eq, close)?;
    if equal_nan && dtype.is_float() {
        let nx = b.un("isnan", x)?;
        let ny = b.un("isnan", y)?;
        let both = b.bin("logical_and", nx, ny)?;
        out = b.bin("logical_or", out, both)?;
    }
    one(out)
}

/// The largest `elements × test_elements` comparison grid `isin` builds.
const ISIN_GRID: usize = 1 << 24;

pub(super) fn isin(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let invert = boolean(n, "invert", false)?;
    let out = match (n.arg("elements"), n.arg("test_elements")) {
        (Some(Arg::Tensor(e)), Some(Arg::Tensor(t))) => {
            let (e, t) = (*e, *t);
            let ne: usize = b.sizes(e)?.iter().product();
            let nt: usize = b.sizes(t)?.iter().product();
            if ne.saturating_mul(nt) > ISIN_GRID {
                return Err("isin: the comparison grid is too large".into());
            }
            let eu = b.unsqueeze(e, -1)?;
            let tf = b.reshape(t, &[-1])?;
            let eq = b.bin("eq", eu, tf)?;
            b.any(eq, -1, false)?
        }
        (Some(Arg::Tensor(e)), Some(s)) => b.cmp_s("eq", *e, s.clone())?,
        _ => return Err("isin of a scalar element".into()),
    };
    if invert {
        return one(b.un("logical_not", out)?);
    }
    one(out)
}

/// The spacing of `trapezoid`-style rules along `dim`: a tensor of differences of `x`, or
/// the scalar `dx`.
enum Spacing {
    Tensor(usize),
    Scalar(f64),
}

/// `(y[1:] + y[:-1]) * dx / 2` along `dim` (ATen's trapezoid terms); `None` when `y` is
/// empty along `dim`.
fn trapezoid_terms(b: &mut Builder, n: &Node) -> DResult<(usize, i64, Option<usize>)> {
    let y = tensor(n, "y")?;
    let s = b.sizes(y)?;
    let dim = wrap(int(n, "dim", Some(-1))?, s.len())?;
    let len = s[dim as usize] as i64;
    let spacing = match opt_tensor(n, "x")? {
        Some(x) => Spacing::Tensor(x),
        None => Spacing::Scalar(float(n, "dx", Some(1.0))?),
    };
    if len == 0 {
        return Ok((y, dim, None));
    }
    let left = b.slice(y, dim, 0, len - 1, 1)?;
    let right = b.slice(y, dim, 1, len, 1)?;
    let sum = b.bin("add", left, right)?;
    let term = match spacing {
        Spacing::Scalar(dx) => {
            // ATen: sum((y[1:] + y[:-1])) * dx / 2 for trapezoid; terms * dx / 2 here.
            let h = b.bin_s("mul", sum, dx)?;
            b.bin_s("div", h, 2.0)?
        }
        Spacing::Tensor(x) => {
            let xs = b.sizes(x)?;
            let dx = if xs.len() == 1 {
                let l = xs[0] as i64;
                let a = b.slice(x, 0, 1, l, 1)?;
                let c = b.slice(x, 0, 0, l - 1, 1)?;
                let d = b.bin("sub", a, c)?;
                let mut shape = vec![1i64; s.len()];
                shape[dim as usize] = -1;
                b.reshape(d, &shape)?
            } else {
                let xd = wrap(int(n, "dim", Some(-1))?, xs.len())?;
                let l = xs[xd as usize] as i64;
                let a = b.slice(x, xd, 1, l, 1)?;
                let c = b.slice(x, xd, 0, l - 1, 1)?;
                b.bin("sub", a, c)?
            };
            let m = b.bin("mul", dx, sum)?;
            b.bin_s("div", m, 2.0)?
        }
    };
    Ok((y, dim, Some(term)))
}

pub(super) fn trapezoid(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let (y, dim, terms) = trapezoid_terms(b, n)?;
    match terms {
        Some(t) => one(b.sum(t, &[dim], false)?),
        None => {
            let z = b.sum(y, &[dim], false)?;
            one(b.bin_s("mul", z, 0.0)?)
        }
    }
}

pub(super) fn cumulative_trapezoid(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let (y, dim, terms) = trapezoid_terms(b, n)?;
    match terms {
        Some(t) => one(b.t(
            "aten.cumsum.default",
            vec![("self", Arg::Tensor(t)), ("dim", Arg::Int(dim))],
        )?),
        None => one(y),
    }
}

pub(super) fn vecdot(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "x")?;
    let y = tensor(n, "y")?;
    if b.dtype(x)?.is_complex() {
        return Err("vecdot of complex tensors".into());
    }
    let dim = int(n, "dim", Some(-1))?;
    let m = b.bin("mul", x, y)?;
    one(b.sum(m, &[dim], false)?)
}

pub(super) fn vander(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "x")?;
    // A 0-d x is taken as [x].
    let x = if b.rank(x)? == 0 {
        b.reshape(x, &[1])?
    } else {
        x
    };
    let s = b.sizes(x)?;
    let len = *s.last().ok_or("vander of a 0-d tensor")? as i64;
    let cols = opt_int(n, "N")?.unwrap_or(len);
    if cols <= 1 {
        return Err(format!("N must be greater than 1 (N = {cols})"));
    }
    // ATen: cumprod(cat([ones, x.unsqueeze(-1).expand(..., N - 1)], -1), -1).
    let dtype = b.dtype(x)?;
    let mut ones_shape: Vec<i64> = s.iter().map(|&d| d as i64).collect();
    ones_shape.push(1);
    let ones = b.full(&ones_shape, 1.0, dtype)?;
    let mut ex = ones_shape.clone();
    *ex.last_mut().ok_or("rank")? = cols - 1;
    let xu = b.unsqueeze(x, -1)?;
    let xe = b.expand(xu, &ex)?;
    let c = b.cat(&[ones, xe], -1)?;
    one(b.t(
        "aten.cumprod.default",
        vec![("self", Arg::Tensor(c)), ("dim", Arg::Int(-1))],
    )?)
}

pub(super) fn renorm(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let p = float(n, "p", None)?;
    let r = b.rank(x)?;
    let dim = wrap(int(n, "dim", None)?, r)?;
    let maxnorm = float(n, "maxnorm", None)?;
    let dims: Vec<i64> = (0..r as i64).filter(|&d| d != dim).collect();
    let norm = vector_norm(b, x, p, Some(&dims), true)?;
    // torch: where(norm > maxnorm, maxnorm / (norm + 1e-7), 1).
    let over = b.cmp_s("gt", norm, Arg::Float(maxnorm))?;
    let ne = b.bin_s("add", norm, 1e-7)?;
    let ndt = b.dtype(norm)?;
    let top = b.full(&[], maxnorm, ndt)?;
    let factor = b.bin("div", top, ne)?;
    let unit = b.scalar(1.0, ndt)?;
    let f = b.where_(over, factor, unit)?;
    one(b.bin("mul", x, f)?)
}

pub(super) fn cosine_similarity(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let xs = broadcast(b, &[tensor(n, "x1")?, tensor(n, "x2")?])?;
    let dim = int(n, "dim", Some(1))?;
    let eps = float(n, "eps", Some(1e-8))?;
    // ATen: ((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps))).sum(dim).
    let mut unit = Vec::new();
    for &x in &xs {
        let norm = vector_norm(b, x, 2.0, Some(&[dim]), true)?;
        let c = b.t(
            "aten.clamp_min.default",
            vec![("self", Arg::Tensor(norm)), ("min", Arg::Float(eps))],
        )?;
        unit.push(b.bin("div", x, c)?);
    }
    let m = b.bin("mul", unit[0], unit[1])?;
    one(b.sum(m, &[dim], false)?)
}

/// ATen's `pairwise_distance`: `norm(x1 - x2 + eps, p, last dim)`.
pub(super) fn pairwise(
    b: &mut Builder,
    x1: usize,
    x2: usize,
    p: f64,
    eps: f64,
    keepdim: bool,
) -> DResult<usize> {
    let rank = b.rank(x1)?.max(b.rank(x2)?);
    let d = b.bin("sub", x1, x2)?;
    let de = b.bin_s("add", d, eps)?;
    let dims = [rank as i64 - 1];
    vector_norm(
        b,
        de,
        p,
        if rank == 0 { None } else { Some(&dims) },
        keepdim,
    )
}

pub(super) fn pairwise_distance(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let p = float(n, "p", Some(2.0))?;
    let eps = float(n, "eps", Some(1e-6))?;
    let keepdim = boolean(n, "keepdim", false)?;
    one(pairwise(
        b,
        tensor(n, "x1")?,
        tensor(n, "x2")?,
        p,
        eps,
        keepdim,
    )?)
}

pub(super) fn quantile(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let q = float(n, "q", None)?;
    if !(0.0..=1.0).contains(&q) {
        return Err(format!("q {q} is not in [0, 1]"));
    }
    let nan_ignoring = n.target.starts_with("aten.nanquantile");
    let keepdim = boolean(n, "keepdim", false)?;
    let mode = string(n, "interpolation")?.unwrap_or_else(|| "linear".into());
    let s = b.sizes(x)?;
    let dtype = b.dtype(x)?;
    if !dtype.is_float() {
        return Err("quantile of a non-float tensor".into());
    }
    let dim = match opt_int(n, "dim")? {
        // A 0-d tensor reduces over its one element whichever dim (0 or -1) is named.
        Some(d) if s.is_empty() && (d == 0 || d == -1) => Some(0),
        Some(d) => Some(wrap(d, s.len())?),
        None => None,
    };
    // The reduced dim moved last.
    let moved = match dim {
        None => b.reshape(x, &[-1])?,
        Some(_) if s.is_empty() => b.reshape(x, &[1])?,
        Some(d) if d as usize == s.len() - 1 => x,
        Some(d) => b.transpose(x, d, -1)?,
    };
    let ms = b.sizes(moved)?;
    let len = *ms.last().ok_or("quantile of an empty shape")? as i64;
    if len == 0 {
        return Err("quantile of an empty dim".into());
    }
    let sorted = b
        .multi(
            "aten.sort.default",
            vec![
                ("self", Arg::Tensor(moved)),
                ("dim", Arg::Int(-1)),
                ("descending", Arg::Bool(false)),
            ],
        )?
        .first()
        .copied()
        .ok_or("sort gave no values")?;
    let nan = b.un("isnan", moved)?;
    // The rank q * (k - 1) of each row, in float64 as torch computes it.
    let ranks = if nan_ignoring {
        let valid = b.un("logical_not", nan)?;
        let k = b.t(
            "aten.sum.dim_IntList",
            vec![
                ("self", Arg::Tensor(valid)),
                ("dim", Arg::Ints(vec![-1])),
                ("keepdim", Arg::Bool(true)),
            ],
        )?;
        let k1 = b.bin_s("sub", k, 1.0)?;
        let k1 = b.cast(k1, DType::F64)?;
        let r = b.bin_s("mul", k1, q)?;
        b.t(
            "aten.clamp_min.default",
            vec![("self", Arg::Tensor(r)), ("min", Arg::Float(0.0))],
        )?
    } else {
        // A row with a NaN answers NaN: its rank points at the sorted row's end (NaNs sort last).
        let mut shape: Vec<i64> = ms.iter().map(|&d| d as i64).collect();
        *shape.last_mut().ok_or("rank")? = 1;
        let r = b.full(&shape, q * (len - 1) as f64, DType::F64)?;
        let any = b.any(nan, -1, true)?;
        let last = b.scalar((len - 1) as f64, DType::F64)?;
        b.where_(any, last, r)?
    };
    let gather = |b: &mut Builder, r: usize| -> DResult<usize> {
        let i = b.cast(r, DType::I64)?;
        b.gather(sorted, -1, i)
    };
    let out = match mode.as_str() {
        "lower" => {
            let r = b.un("floor", ranks)?;
            gather(b, r)?
        }
        "higher" => {
            let r = b.un("ceil", ranks)?;
            gather(b, r)?
        }
        "nearest" => {
            let r = b.un("round", ranks)?;
            gather(b, r)?
        }
        "linear" | "midpoint" => {
            let lo_i = b.cast(ranks, DType::I64)?;
            let below = b.gather(sorted, -1, lo_i)?;
            let hi = b.un("ceil", ranks)?;
            let above = gather(b, hi)?;
            let weights = if mode == "midpoint" {
                let ws = b
                    .sizes(below)?
                    .iter()
                    .map(|&d| d as i64)
                    .collect::<Vec<_>>();
                b.full(&ws, 0.5, dtype)?
            } else {
                let lo = b.cast(lo_i, DType::F64)?;
                let w = b.bin("sub", ranks, lo)?;
                b.cast(w, dtype)?
            };
            b.t(
                "aten.lerp.Tensor",
                vec![
                    ("self", Arg::Tensor(below)),
                    ("end", Arg::Tensor(above)),
                    ("weight", Arg::Tensor(weights)),
                ],
            )?
        }
        other => return Err(format!("interpolation '{other}'")),
    };
    // `out` is the moved shape with a last dim of 1.
    let out = match (dim, keepdim) {
        (None, false) => b.reshape(out, &[])?,
        (None, true) => b.reshape(out, &vec![1; s.len()])?,
        (Some(_), _) if s.is_empty() => b.reshape(out, &[])?,
        (Some(_), false) => b.squeeze(out, &[-1])?,
        (Some(d), true) if d as usize == s.len() - 1 => out,
        (Some(d), true) => b.transpose(out, d, -1)?,
    };
    one(out)
}

pub(super) fn gradient(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let s = b.sizes(x)?;
    let h = opt_float(n, "spacing")?.unwrap_or(1.0);
    let edge = int(n, "edge_order", Some(1))?;
    let dims: Vec<i64> = match opt_int(n, "dim")? {
        Some(d) => vec![wrap(d, s.len())?],
        None => (0..s.len() as i64).collect(),
    };
    let mut out = Vec::new();
    for d in dims {
        let len = s[d as usize] as i64;
        if len < edge + 1 {
            return Err(format!("gradient needs {} points along dim {d}", edge + 1));
        }
        let sl = |b: &mut Builder, a: i64, e: i64| b.slice(x, d, a, e, 1);
        // ATen: center = (x[2:] - x[:-2]) / h / 2; edges one-sided of order edge_order.
        let c2 = sl(b, 2, len)?;
        let c0 = sl(b, 0, len - 2)?;
        let cd = b.bin("sub", c2, c0)?;
        let ch = b.bin_s("div", cd, h)?;
        let center = b.bin_s("div", ch, 2.0)?;
        let (pre, app) = if edge == 1 {
            let (a1, a0) = (sl(b, 1, 2)?, sl(b, 0, 1)?);
            let p = b.bin("sub", a1, a0)?;
            let (z1, z0) = (sl(b, len - 1, len)?, sl(b, len - 2, len - 1)?);
            let a = b.bin("sub", z1, z0)?;
            (b.bin_s("div", p, h)?, b.bin_s("div", a, h)?)
        } else if edge == 2 {
            let (x0, x1, x2) = (sl(b, 0, 1)?, sl(b, 1, 2)?, sl(b, 2, 3)?);
            let t0 = b.bin_s("mul", x0, -1.5)?;
            let t1 = b.bin_s("mul", x1, 2.0)?;
            let t2 = b.bin_s("mul", x2, 0.5)?;
            let p = b.bin("add", t0, t1)?;
            let p = b.bin("sub", p, t2)?;
            let (y0, y1, y2) = (
                sl(b, len - 3, len - 2)?,
                sl(b, len - 2, len - 1)?,
                sl(b, len - 1, len)?,
            );
            let u0 = b.bin_s("mul", y0, 0.5)?;
            let u1 = b.bin_s("mul", y1, 2.0)?;
            let u2 = b.bin_s("mul", y2, 1.5)?;
            let a = b.bin("sub", u0, u1)?;
            let a = b.bin("add", a, u2)?;
            (b.bin_s("div", p, h)?, b.bin_s("div", a, h)?)
        } else {
            return Err(format!("edge_order {edge}"));
        };
        out.push(b.cat(&[pre, center, app], d)?);
    }
    Ok(vec![Arg::Tensors(out)])
}

/// `linalg.matrix_sqrth(A)`: the principal square root of a symmetric positive-definite
/// matrix (its lower triangle), `V diag(sqrt(w)) Vᵀ` from `eigh` (unique: the eigenvectors'
/// signs cancel).
pub(super) fn matrix_sqrth(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let a = tensor(n, "self")?;
    if !b.dtype(a)?.is_float() || b.rank(a)? < 2 {
        return Err("matrix_sqrth of a non-float or non-matrix tensor".into());
    }
    let wv = b.multi(
        "aten.linalg_eigh.default",
        vec![("self", Arg::Tensor(a)), ("UPLO", Arg::Str("L".into()))],
    )?;
    let [w, v] = wv[..] else {
        return Err("eigh gave no eigenvectors".into());
    };
    let s = b.un("sqrt", w)?;
    let su = b.unsqueeze(s, -2)?;
    let vs = b.bin("mul", v, su)?;
    let vt = b.transpose(v, -2, -1)?;
    one(b.t(
        "aten.matmul.default",
        vec![("self", Arg::Tensor(vs)), ("other", Arg::Tensor(vt))],
    )?)
}

/// `linalg_polar(A)` (`torch.linalg.polar`) of real matrices, from the thin SVD
/// `A = W diag(S) Vh` as torch's CPU path computes it: `U = W Vh`, `H = Vhᴴ diag(S) Vh`
/// (unique for a full-rank `A`, whatever signs the SVD picks).
pub(super) fn polar_decomposition(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let a = tensor(n, "A")?;
    if !b.dtype(a)?.is_float() || b.rank(a)? < 2 {
        return Err("linalg_polar of a non-float or non-matrix tensor".into());
    }
    let usv = b.multi(
        "aten._linalg_svd.default",
        vec![
            ("A", Arg::Tensor(a)),
            ("full_matrices", Arg::Bool(false)),
            ("compute_uv", Arg::Bool(true)),
        ],
    )?;
    let [w, s, vh] = usv[..] else {
        return Err("the SVD gave no singular vectors".into());
    };
    let matmul = |b: &mut Builder, x, y| {
        b.t(
            "aten.matmul.default",
            vec![("self", Arg::Tensor(x)), ("other", Arg::Tensor(y))],
        )
    };
    let u = matmul(b, w, vh)?;
    let v = b.transpose(vh, -2, -1)?;
    let su = b.unsqueeze(s, -2)?;
    let vs = b.bin("mul", v, su)?;
    let h = matmul(b, vs, vh)?;
    Ok(vec![Arg::Tensor(u), Arg::Tensor(h)])
}
