//! Decompositions of the loss functions (`torch.nn.functional.*_loss`), as ATen and
//! `torch._decomp` compute them; `reduction` is 0 (none), 1 (mean, the default) or 2 (sum).

use super::math::pairwise;
use super::{boolean, float, int, opt_tensor, tensor, Builder, DResult};
use crate::dtype::DType;
use crate::program::{Arg, Node};

fn one(v: usize) -> DResult<Vec<Arg>> {
    Ok(vec![Arg::Tensor(v)])
}

fn reduction(n: &Node) -> DResult<i64> {
    int(n, "reduction", Some(1))
}

/// `s - x` for a Python number `s`.
fn rsub(b: &mut Builder, x: usize, s: f64) -> DResult<usize> {
    let neg = b.un("neg", x)?;
    b.bin_s("add", neg, s)
}

fn clamp_min(b: &mut Builder, x: usize, min: f64) -> DResult<usize> {
    b.t(
        "aten.clamp_min.default",
        vec![("self", Arg::Tensor(x)), ("min", Arg::Float(min))],
    )
}

fn square(b: &mut Builder, x: usize) -> DResult<usize> {
    b.t(
        "aten.pow.Tensor_Scalar",
        vec![("self", Arg::Tensor(x)), ("exponent", Arg::Int(2))],
    )
}

fn zeros_like(b: &mut Builder, x: usize) -> DResult<usize> {
    let dtype = b.dtype(x)?;
    b.scalar(0.0, dtype)
}

pub(super) fn mse(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let d = b.bin("sub", tensor(n, "self")?, tensor(n, "target")?)?;
    let l = square(b, d)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn l1(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let d = b.bin("sub", tensor(n, "self")?, tensor(n, "target")?)?;
    let l = b.un("abs", d)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn smooth_l1(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let beta = float(n, "beta", Some(1.0))?;
    let d = b.bin("sub", tensor(n, "self")?, tensor(n, "target")?)?;
    let ad = b.un("abs", d)?;
    let l = if beta == 0.0 {
        ad
    } else {
        // where(|d| < beta, 0.5 d² / beta, |d| - 0.5 beta)
        let small = b.cmp_s("lt", ad, Arg::Float(beta))?;
        let sq = square(b, ad)?;
        let h = b.bin_s("mul", sq, 0.5)?;
        let q = b.bin_s("div", h, beta)?;
        let lin = b.bin_s("sub", ad, 0.5 * beta)?;
        b.where_(small, q, lin)?
    };
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn huber(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let delta = float(n, "delta", Some(1.0))?;
    let d = b.bin("sub", tensor(n, "self")?, tensor(n, "target")?)?;
    let ad = b.un("abs", d)?;
    // where(|d| < delta, 0.5 d², delta (|d| - 0.5 delta))
    let small = b.cmp_s("lt", ad, Arg::Float(delta))?;
    let sq = square(b, ad)?;
    let q = b.bin_s("mul", sq, 0.5)?;
    let s = b.bin_s("sub", ad, 0.5 * delta)?;
    let lin = b.bin_s("mul", s, delta)?;
    let l = b.where_(small, q, lin)?;
    one(b.reduce(l, reduction(n)?)?)
}

fn weighted(b: &mut Builder, n: &Node, l: usize) -> DResult<usize> {
    match opt_tensor(n, "weight")? {
        Some(w) => b.bin("mul", l, w),
        None => Ok(l),
    }
}

pub(super) fn binary_cross_entropy(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let t = tensor(n, "target")?;
    let dtype = b.dtype(x)?;
    // torch._decomp: (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100)
    let floor = b.scalar(-100.0, dtype)?;
    let nx = b.un("neg", x)?;
    let l1p = b.un("log1p", nx)?;
    let a = b.t(
        "aten.maximum.default",
        vec![("self", Arg::Tensor(l1p)), ("other", Arg::Tensor(floor))],
    )?;
    let lx = b.un("log", x)?;
    let c = b.t(
        "aten.maximum.default",
        vec![("self", Arg::Tensor(lx)), ("other", Arg::Tensor(floor))],
    )?;
    let tm1 = b.bin_s("sub", t, 1.0)?;
    let left = b.bin("mul", tm1, a)?;
    let right = b.bin("mul", t, c)?;
    let l = b.bin("sub", left, right)?;
    let l = weighted(b, n, l)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn binary_cross_entropy_with_logits(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let t = tensor(n, "target")?;
    // torch._decomp: (1 - t) x + w_log (log1p(exp(-|x|)) + relu(-x)),
    // w_log = (pos_weight - 1) t + 1 (1 without pos_weight).
    let one_m_t = rsub(b, t, 1.0)?;
    let a = b.bin("mul", one_m_t, x)?;
    let ax = b.un("abs", x)?;
    let nax = b.un("neg", ax)?;
    let e = b.un("exp", nax)?;
    let soft = b.un("log1p", e)?;
    let nx = b.un("neg", x)?;
    let r = b.un("relu", nx)?;
    let l = match opt_tensor(n, "pos_weight")? {
        Some(pw) => {
            let pw1 = b.bin_s("sub", pw, 1.0)?;
            let m = b.bin("mul", pw1, t)?;
            let lw = b.bin_s("add", m, 1.0)?;
            let s = b.bin("add", soft, r)?;
            let ws = b.bin("mul", lw, s)?;
            b.bin("add", a, ws)?
        }
        None => {
            let s = b.bin("add", a, r)?;
            b.bin("add", s, soft)?
        }
    };
    let l = weighted(b, n, l)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn kl_div(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let t = tensor(n, "target")?;
    let l = if boolean(n, "log_target", false)? {
        // exp(t) (t - x)
        let e = b.un("exp", t)?;
        let d = b.bin("sub", t, x)?;
        b.bin("mul", e, d)?
    } else {
        // xlogy(t, t) - t x
        let xl = b.bin("xlogy", t, t)?;
        let tx = b.bin("mul", t, x)?;
        b.bin("sub", xl, tx)?
    };
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn hinge_embedding(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let t = tensor(n, "target")?;
    let margin = float(n, "margin", Some(1.0))?;
    let zeros = zeros_like(b, x)?;
    let m = rsub(b, x, margin)?;
    let mc = clamp_min(b, m, 0.0)?;
    let not_pos = b.cmp_s("ne", t, Arg::Int(1))?;
    let out_margin = b.where_(not_pos, mc, zeros)?;
    let not_neg = b.cmp_s("ne", t, Arg::Int(-1))?;
    let out_self = b.where_(not_neg, x, zeros)?;
    let l = b.bin("add", out_margin, out_self)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn margin_ranking(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let margin = float(n, "margin", Some(0.0))?;
    // clamp_min(-t (x1 - x2) + margin, 0)
    let d = b.bin("sub", tensor(n, "input1")?, tensor(n, "input2")?)?;
    let nt = b.un("neg", tensor(n, "target")?)?;
    let m = b.bin("mul", nt, d)?;
    let s = b.bin_s("add", m, margin)?;
    let l = clamp_min(b, s, 0.0)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn soft_margin(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    // log1p(exp(-t x))
    let nt = b.un("neg", tensor(n, "target")?)?;
    let m = b.bin("mul", nt, tensor(n, "self")?)?;
    let e = b.un("exp", m)?;
    let l = b.un("log1p", e)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn cosine_embedding(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x1 = tensor(n, "input1")?;
    let x2 = tensor(n, "input2")?;
    let t = tensor(n, "target")?;
    let margin = float(n, "margin", Some(0.0))?;
    const EPSILON: f64 = 1e-12;
    let dim = b.rank(t)? as i64;
    let p = b.bin("mul", x1, x2)?;
    let prod_sum = b.sum(p, &[dim], false)?;
    let s1 = b.bin("mul", x1, x1)?;
    let m1 = b.sum(s1, &[dim], false)?;
    let m1 = b.bin_s("add", m1, EPSILON)?;
    let s2 = b.bin("mul", x2, x2)?;
    let m2 = b.sum(s2, &[dim], false)?;
    let m2 = b.bin_s("add", m2, EPSILON)?;
    let mm = b.bin("mul", m1, m2)?;
    let denom = b.un("sqrt", mm)?;
    let cos = b.bin("div", prod_sum, denom)?;
    let zeros = zeros_like(b, cos)?;
    let pos = rsub(b, cos, 1.0)?;
    let cm = b.bin_s("sub", cos, margin)?;
    let neg = clamp_min(b, cm, 0.0)?;
    let is_pos = b.cmp_s("eq", t, Arg::Int(1))?;
    let is_neg = b.cmp_s("eq", t, Arg::Int(-1))?;
    let op = b.where_(is_pos, pos, zeros)?;
    let on = b.where_(is_neg, neg, zeros)?;
    let l = b.bin("add", op, on)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn poisson_nll(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "input")?;
    let t = tensor(n, "target")?;
    let log_input = boolean(n, "log_input", true)?;
    let full = boolean(n, "full", false)?;
    let eps = float(n, "eps", Some(1e-8))?;
    let mut l = if log_input {
        let e = b.un("exp", x)?;
        let tx = b.bin("mul", t, x)?;
        b.bin("sub", e, tx)?
    } else {
        let xe = b.bin_s("add", x, eps)?;
        let lg = b.un("log", xe)?;
        let tl = b.bin("mul", t, lg)?;
        b.bin("sub", x, tl)?
    };
    if full {
        // Stirling: t log t - t + 0.5 log(2π t), where t > 1.
        let lt = b.un("log", t)?;
        let tlt = b.bin("mul", t, lt)?;
        let a = b.bin("sub", tlt, t)?;
        let tp = b.bin_s("mul", t, 2.0 * std::f64::consts::PI)?;
        let lg = b.un("log", tp)?;
        let h = b.bin_s("mul", lg, 0.5)?;
        let st = b.bin("add", a, h)?;
        let small = b.cmp_s("le", t, Arg::Int(1))?;
        let z = zeros_like(b, st)?;
        let st = b.where_(small, z, st)?;
        l = b.bin("add", l, st)?;
    }
    one(b.reduce(l, reduction(n)?)?)
}

/// `nll_loss` of log-probabilities `x` ([N, C, ...] or [C]) at class indices `t`.
fn nll(
    b: &mut Builder,
    x: usize,
    t: usize,
    weight: Option<usize>,
    reduction: i64,
    ignore: i64,
) -> DResult<usize> {
    let single = b.rank(x)? == 1;
    let (x, t) = if single {
        (b.unsqueeze(x, 0)?, b.unsqueeze(t, 0)?)
    } else {
        (x, t)
    };
    let dtype = b.dtype(x)?;
    let keep = b.cmp_s("ne", t, Arg::Int(ignore))?;
    let tdt = b.dtype(t)?;
    let zero_i = b.scalar(0.0, tdt)?;
    let safe = b.where_(keep, t, zero_i)?;
    let idx = b.unsqueeze(safe, 1)?;
    let g = b.gather(x, 1, idx)?;
    let g = b.squeeze(g, &[1])?;
    let mut loss = b.un("neg", g)?;
    let zero = b.scalar(0.0, dtype)?;
    // The weight of each target (0 where ignored).
    let w = match weight {
        Some(w) => {
            let flat = b.reshape(safe, &[-1])?;
            let wt = b.t(
                "aten.index_select.default",
                vec![
                    ("self", Arg::Tensor(w)),
                    ("dim", Arg::Int(0)),
                    ("index", Arg::Tensor(flat)),
                ],
            )?;
            let shape: Vec<i64> = b.sizes(safe)?.iter().map(|&d| d as i64).collect();
            let wt = b.reshape(wt, &shape)?;
            loss = b.bin("mul", loss, wt)?;
            b.where_(keep, wt, zero)?
        }
        None => b.cast(keep, dtype)?,
    };
    loss = b.where_(keep, loss, zero)?;
    let out = match reduction {
        0 => loss,
        2 => b.un("sum", loss)?,
        1 => {
            let s = b.un("sum", loss)?;
            let ws = b.un("sum", w)?;
            b.bin("div", s, ws)?
        }
        r => return Err(format!("reduction {r}")),
    };
    if single && reduction == 0 {
        return b.squeeze(out, &[0]);
    }
    Ok(out)
}

pub(super) fn nll_loss_nd(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let out = nll(
        b,
        tensor(n, "self")?,
        tensor(n, "target")?,
        opt_tensor(n, "weight")?,
        reduction(n)?,
        int(n, "ignore_index", Some(-100))?,
    )?;
    one(out)
}

pub(super) fn cross_entropy(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let t = tensor(n, "target")?;
    let weight = opt_tensor(n, "weight")?;
    let red = reduction(n)?;
    if float(n, "label_smoothing", Some(0.0))? != 0.0 {
        return Err("cross_entropy with label smoothing".into());
    }
    let rank = b.rank(x)?;
    if rank == 0 {
        return Err("cross_entropy of a 0-d input".into());
    }
    let cdim = if rank == 1 { 0 } else { 1 };
    let logp = b.t(
        "aten._log_softmax.default",
        vec![
            ("self", Arg::Tensor(x)),
            ("dim", Arg::Int(cdim)),
            ("half_to_float", Arg::Bool(false)),
        ],
    )?;
    if b.dtype(t)?.is_float() {
        // Class probabilities: -sum(logp * t [* w], C), mean over the batch elements.
        let mut m = b.bin("mul", logp, t)?;
        if let Some(w) = weight {
            let mut shape = vec![1i64; rank];
            shape[cdim as usize] = -1;
            let wv = b.reshape(w, &shape)?;
            m = b.bin("mul", m, wv)?;
        }
        let s = b.sum(m, &[cdim], false)?;
        let l = b.un("neg", s)?;
        let out = match red {
            0 => l,
            2 => b.un("sum", l)?,
            1 => {
                let total = b.un("sum", l)?;
                let numel: usize = b.sizes(x)?.iter().product();
                let c = b.sizes(x)?[cdim as usize].max(1);
                b.bin_s("div", total, (numel / c) as f64)?
            }
            r => return Err(format!("reduction {r}")),
        };
        return one(out);
    }
    let ignore = int(n, "ignore_index", Some(-100))?;
    one(nll(b, logp, t, weight, red, ignore)?)
}

pub(super) fn triplet_margin(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let a = tensor(n, "anchor")?;
    let pos = tensor(n, "positive")?;
    let neg = tensor(n, "negative")?;
    let margin = float(n, "margin", Some(1.0))?;
    let p = float(n, "p", Some(2.0))?;
    let eps = float(n, "eps", Some(1e-6))?;
    let dp = pairwise(b, a, pos, p, eps, false)?;
    let mut dn = pairwise(b, a, neg, p, eps, false)?;
    if boolean(n, "swap", false)? {
        let ds = pairwise(b, pos, neg, p, eps, false)?;
        dn = b.t(
            "aten.minimum.default",
            vec![("self", Arg::Tensor(dn)), ("other", Arg::Tensor(ds))],
        )?;
    }
    let m = b.bin_s("add", dp, margin)?;
    let d = b.bin("sub", m, dn)?;
    let l = clamp_min(b, d, 0.0)?;
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn multi_margin(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let t = tensor(n, "target")?;
    let p = int(n, "p", Some(1))?;
    let margin = float(n, "margin", Some(1.0))?;
    if p != 1 && p != 2 {
        return Err(format!("p {p}"));
    }
    // A 1-d input is one sample; a 0-d one, one sample of one class.
    let single = b.rank(x)? <= 1;
    let (x, t) = if single {
        (b.reshape(x, &[1, -1])?, b.reshape(t, &[1])?)
    } else {
        (x, t)
    };
    let xs = b.sizes(x)?;
    let [_, c] = xs[..] else {
        return Err(format!("multi_margin_loss of sizes {xs:?}"));
    };
    let dtype = b.dtype(x)?;
    let idx = b.unsqueeze(t, 1)?;
    let xy = b.gather(x, 1, idx)?;
    // max(0, margin - x[y] + x[j])^p (w[y]), j != y, averaged over C.
    let d = b.bin("sub", x, xy)?;
    let d = b.bin_s("add", d, margin)?;
    let mut z = clamp_min(b, d, 0.0)?;
    if p == 2 {
        z = square(b, z)?;
    }
    if let Some(w) = opt_tensor(n, "weight")? {
        let wy = b.index_select(w, 0, t)?;
        let wy = b.unsqueeze(wy, 1)?;
        z = b.bin("mul", z, wy)?;
    }
    let classes = b.arange(0, c as i64, DType::I64)?;
    let is_y = b.bin("eq", classes, idx)?;
    let zero = b.scalar(0.0, dtype)?;
    let z = b.where_(is_y, zero, z)?;
    let s = b.sum(z, &[1], false)?;
    let mut l = b.bin_s("div", s, c as f64)?;
    if single {
        l = b.squeeze(l, &[0])?;
    }
    one(b.reduce(l, reduction(n)?)?)
}

pub(super) fn multilabel_margin(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let t = tensor(n, "target")?;
    // A 1-d input is one sample; a 0-d one, one sample of one class.
    let single = b.rank(x)? <= 1;
    let (x, t) = if single {
        (b.reshape(x, &[1, -1])?, b.reshape(t, &[1, -1])?)
    } else {
        (x, t)
    };
    let xs = b.sizes(x)?;
    let [rows, c] = xs[..] else {
        return Err(format!("multilabel_margin_loss of sizes {xs:?}"));
    };
    if c.saturating_mul(c).saturating_mul(rows) > 1 << 24 {
        return Err("multilabel_margin_loss: too many classes".into());
    }
    let dtype = b.dtype(x)?;
    // The targets of a row are its entries before the first -1.
    let stop = b.cmp_s("eq", t, Arg::Int(-1))?;
    let stop_i = b.cast(stop, DType::I64)?;
    let seen = b.t(
        "aten.cumsum.default",
        vec![("self", Arg::Tensor(stop_i)), ("dim", Arg::Int(1))],
    )?;
    let valid = b.cmp_s("eq", seen, Arg::Int(0))?;
    let tdt = b.dtype(t)?;
    let zero_i = b.scalar(0.0, tdt)?;
    let safe = b.where_(valid, t, zero_i)?;
    // is_target[n, k]: class k is one of row n's targets.
    let classes = b.arange(0, c as i64, DType::I64)?;
    let su = b.unsqueeze(safe, 2)?;
    let hit = b.bin("eq", su, classes)?;
    let vu = b.unsqueeze(valid, 2)?;
    let hit = b.bin("logical_and", hit, vu)?;
    let is_target = b.any(hit, 1, false)?;
    // sum over targets j and non-targets k of max(0, 1 - (x[y_j] - x[k])), over C.
    let xy = b.gather(x, 1, safe)?;
    let xyu = b.unsqueeze(xy, 2)?;
    let xu = b.unsqueeze(x, 1)?;
    let d = b.bin("sub", xyu, xu)?;
    let m = rsub(b, d, 1.0)?;
    let z = clamp_min(b, m, 0.0)?;
    let not_t = b.un("logical_not", is_target)?;
    let ntu = b.unsqueeze(not_t, 1)?;
    let mask = b.bin("logical_and", vu, ntu)?;
    let zero = b.scalar(0.0, dtype)?;
    let z = b.where_(mask, z, zero)?;
    let s = b.sum(z, &[1, 2], false)?;
    let mut l = b.bin_s("div", s, c as f64)?;
    if single {
        l = b.squeeze(l, &[0])?;
    }
    one(b.reduce(l, reduction(n)?)?)
}
