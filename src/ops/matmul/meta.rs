//! Rules of the matmul family: inner dims must agree (the error names both shapes), batch
//! dims broadcast as `torch.matmul` does, 1-d operands gain and lose a dim; `einsum`,
//! `tensordot`, `bilinear`, `_trilinear` and `multi_dot` derive their shapes from their labels
//! and dims.

use crate::cpu::promote::promote_types;
use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::{broadcast, one};

fn dtype_of(ts: &[&MetaTensor]) -> DType {
    ts.iter()
        .map(|t| t.dtype)
        .reduce(promote_types)
        .unwrap_or(DType::F32)
}

fn inner_mismatch(a: &MetaTensor, b: &MetaTensor) -> String {
    format!(
        "inner dimensions do not match: {:?} @ {:?} ({} vs {})",
        a.sizes,
        b.sizes,
        a.sizes.last().copied().unwrap_or(0),
        if b.rank() >= 2 {
            b.sizes[b.rank() - 2]
        } else {
            b.sizes.first().copied().unwrap_or(0)
        }
    )
}

/// `torch.matmul` shapes.
pub(crate) fn matmul_shape(a: &MetaTensor, b: &MetaTensor) -> RuleResult<Vec<usize>> {
    let (ra, rb) = (a.rank(), b.rank());
    if ra == 0 || rb == 0 {
        return Err(format!(
            "both arguments to matmul need to be at least 1D, but they are {ra}D and {rb}D"
        ));
    }
    let k_a = a.sizes[ra - 1];
    let k_b = if rb == 1 { b.sizes[0] } else { b.sizes[rb - 2] };
    if k_a != k_b {
        return Err(inner_mismatch(a, b));
    }
    let batch_a = &a.sizes[..ra.saturating_sub(2)];
    let batch_b = &b.sizes[..rb.saturating_sub(2)];
    let mut out = broadcast(batch_a, batch_b)?;
    if ra >= 2 {
        out.push(a.sizes[ra - 2]);
    }
    if rb >= 2 {
        out.push(b.sizes[rb - 1]);
    }
    Ok(out)
}

fn need_rank(t: &MetaTensor, r: usize, what: &str) -> RuleResult<()> {
    if t.rank() != r {
        return Err(format!(
            "{what} must be a {r}-D tensor, got shape {:?}",
            t.sizes
        ));
    }
    Ok(())
}

pub(super) fn matmul(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor("other")?;
    one(MetaTensor::new(dtype_of(&[&a, &b]), matmul_shape(&a, &b)?))
}

/// `mm`, `bmm`, `mv` (and their `add*` forms, whose `self` must broadcast to the product).
pub(super) fn product(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.target().to_string();
    let op = t
        .trim_start_matches("aten.")
        .split('.')
        .next()
        .unwrap_or("");
    let (a, b, rank_a, rank_b) = match op.trim_end_matches('_') {
        "mm" => (ctx.tensor("self")?, ctx.tensor("mat2")?, 2, 2),
        "bmm" => (ctx.tensor("self")?, ctx.tensor("mat2")?, 3, 3),
        "mv" => (ctx.tensor("self")?, ctx.tensor("vec")?, 2, 1),
        "addmm" | "_addmm_activation" => (ctx.tensor("mat1")?, ctx.tensor("mat2")?, 2, 2),
        "baddbmm" | "addbmm" => (ctx.tensor("batch1")?, ctx.tensor("batch2")?, 3, 3),
        "addmv" => (ctx.tensor("mat")?, ctx.tensor("vec")?, 2, 1),
        other => return Err(format!("unknown product op {other}")),
    };
    need_rank(&a, rank_a, "the first matrix")?;
    need_rank(&b, rank_b, "the second matrix")?;
    if rank_a == 3 && a.sizes[0] != b.sizes[0] {
        return Err(format!(
            "batch sizes do not match: {:?} @ {:?}",
            a.sizes, b.sizes
        ));
    }
    let mut s = matmul_shape(&a, &b)?;
    if op.starts_with("addbmm") {
        s.remove(0);
    }
    let mut dtype = dtype_of(&[&a, &b]);
    if op.starts_with("add") || op.starts_with("badd") || op.starts_with("_addmm") {
        let base = ctx.tensor("self")?;
        if broadcast(&base.sizes, &s)? != s {
            return Err(format!(
                "self of shape {:?} cannot be broadcast to the product's shape {s:?}",
                base.sizes
            ));
        }
        if op.ends_with('_') {
            return one(base);
        }
        dtype = promote_types(dtype, base.dtype);
    }
    one(MetaTensor::new(dtype, s))
}

pub(super) fn dot(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor("other").or_else(|_| ctx.tensor("tensor"))?;
    need_rank(&a, 1, "dot's first argument")?;
    need_rank(&b, 1, "dot's second argument")?;
    if a.sizes != b.sizes {
        return Err(format!(
            "inconsistent tensor size, expected tensor {:?} and src {:?} to have the same number of elements",
            a.sizes, b.sizes
        ));
    }
    one(MetaTensor::new(dtype_of(&[&a, &b]), vec![]))
}

pub(super) fn inner(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor("other")?;
    if a.rank() == 0 || b.rank() == 0 {
        let s = if a.rank() == 0 { &b.sizes } else { &a.sizes };
        return one(MetaTensor::new(dtype_of(&[&a, &b]), s.clone()));
    }
    if a.sizes.last() != b.sizes.last() {
        return Err(inner_mismatch(&a, &b));
    }
    let mut s = a.sizes[..a.rank() - 1].to_vec();
    s.extend_from_slice(&b.sizes[..b.rank() - 1]);
    one(MetaTensor::new(dtype_of(&[&a, &b]), s))
}

pub(super) fn outer(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let (a, b) = if ctx.has("vec1") {
        (ctx.tensor("vec1")?, ctx.tensor("vec2")?)
    } else {
        (ctx.tensor("self")?, ctx.tensor("vec2")?)
    };
    need_rank(&a, 1, "outer's first argument")?;
    need_rank(&b, 1, "outer's second argument")?;
    let s = vec![a.sizes[0], b.sizes[0]];
    if ctx.has("vec1") {
        let base = ctx.tensor("self")?;
        if broadcast(&base.sizes, &s)? != s {
            return Err(format!(
                "self of shape {:?} cannot be broadcast to {s:?}",
                base.sizes
            ));
        }
        if ctx.target().starts_with("aten.addr_") {
            return one(base);
        }
        return one(MetaTensor::new(dtype_of(&[&a, &b, &base]), s));
    }
    one(MetaTensor::new(dtype_of(&[&a, &b]), s))
}

pub(super) fn linear(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    if x.rank() == 0 || w.rank() == 0 || w.rank() > 2 {
        return Err(format!(
            "linear expects an input of at least 1 dim and a 1-d or 2-d weight, got {:?} and {:?}",
            x.sizes, w.sizes
        ));
    }
    let k = w.sizes[w.rank() - 1];
    if x.sizes[x.rank() - 1] != k {
        return Err(format!(
            "mat1 and mat2 shapes cannot be multiplied: input {:?} and weight {:?} (in_features {k})",
            x.sizes, w.sizes
        ));
    }
    let mut s = x.sizes[..x.rank() - 1].to_vec();
    if w.rank() == 2 {
        s.push(w.sizes[0]);
    }
    if let Some(b) = ctx.opt_tensor("bias")? {
        broadcast(&b.sizes, &s)?;
    }
    one(MetaTensor::new(dtype_of(&[&x, &w]), s))
}

pub(super) fn tensordot(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor("other")?;
    let da: Vec<usize> = ctx
        .ints("dims_self")?
        .iter()
        .map(|&d| ctx.wrap_dim(d, a.rank()))
        .collect::<RuleResult<_>>()?;
    let db: Vec<usize> = ctx
        .ints("dims_other")?
        .iter()
        .map(|&d| ctx.wrap_dim(d, b.rank()))
        .collect::<RuleResult<_>>()?;
    if da.len() != db.len() {
        return Err("tensordot expects the same number of dims for both tensors".into());
    }
    for (&x, &y) in da.iter().zip(&db) {
        // torch broadcasts a size-1 contracted dim against the other's.
        if a.sizes[x] != b.sizes[y] && a.sizes[x] != 1 && b.sizes[y] != 1 {
            return Err(format!(
                "contracted dimensions need to match, but first has size {} in dim {x} and second has size {} in dim {y} ({:?} and {:?})",
                a.sizes[x], b.sizes[y], a.sizes, b.sizes
            ));
        }
    }
    let mut s: Vec<usize> = (0..a.rank())
        .filter(|i| !da.contains(i))
        .map(|i| a.sizes[i])
        .collect();
    s.extend(
        (0..b.rank())
            .filter(|i| !db.contains(i))
            .map(|i| b.sizes[i]),
    );
    one(MetaTensor::new(dtype_of(&[&a, &b]), s))
}

pub(super) fn bilinear(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("input1")?;
    let w = ctx.tensor("weight")?;
    if a.rank() == 0 || w.rank() != 3 {
        return Err(format!(
            "bilinear expects an input of at least 1 dim and a 3-d weight, got {:?} and {:?}",
            a.sizes, w.sizes
        ));
    }
    let mut s = a.sizes[..a.rank() - 1].to_vec();
    s.push(w.sizes[0]);
    one(MetaTensor::new(a.dtype, s))
}

pub(super) fn trilinear(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let ts = [ctx.tensor("i1")?, ctx.tensor("i2")?, ctx.tensor("i3")?];
    let mut shape: Option<Vec<usize>> = None;
    for (t, e) in ts.iter().zip(["expand1", "expand2", "expand3"]) {
        let mut ex = ctx.ints(e)?;
        ex.sort();
        let mut s = t.sizes.clone();
        for &d in &ex {
            let d = d.max(0) as usize;
            if d > s.len() {
                return Err(format!("_trilinear: expand dim {d} is out of range"));
            }
            s.insert(d, 1);
        }
        shape = Some(match shape {
            None => s,
            Some(p) => broadcast(&p, &s)?,
        });
    }
    let full = shape.unwrap_or_default();
    let sum: Vec<usize> = ctx
        .ints("sumdim")?
        .iter()
        .map(|&d| ctx.wrap_dim(d, full.len()))
        .collect::<RuleResult<_>>()?;
    let s = (0..full.len())
        .filter(|i| !sum.contains(i))
        .map(|i| full[i])
        .collect();
    one(MetaTensor::new(ts[0].dtype, s))
}

pub(super) fn multi_dot(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let ts = ctx
        .tensors("tensors")
        .or_else(|_| ctx.tensors("matrices"))?;
    let n = ts.len();
    if n < 2 {
        return Err(format!("multi_dot expects at least two tensors, got {n}"));
    }
    let mut acc = ts[0].clone();
    let first_1d = acc.rank() == 1;
    if first_1d {
        acc.sizes.insert(0, 1);
    }
    for (i, t) in ts.iter().enumerate().skip(1) {
        let mut t = t.clone();
        if i == n - 1 && t.rank() == 1 {
            t.sizes.push(1);
        }
        need_rank(&t, 2, "each multi_dot operand")?;
        let s = matmul_shape(&acc, &t)?;
        acc = MetaTensor::new(promote_types(acc.dtype, t.dtype), s);
    }
    if ts[n - 1].rank() == 1 {
        acc.sizes.pop();
    }
    if first_1d {
        acc.sizes.remove(0);
    }
    one(acc)
}

/// `einsum(equation, tensors)`: label sizes (1s broadcast), ellipsis dims broadcast, output as
/// written after `->` or implicit (ellipsis, then labels seen once, in alphabetical order).
pub(super) fn einsum(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let eq: String = ctx
        .opt_str("equation")?
        .ok_or("missing equation")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let ts = ctx.tensors("tensors")?;
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ts.len() {
        return Err(format!(
            "einsum equation '{eq}' has {} operands, but {} tensors were given",
            terms.len(),
            ts.len()
        ));
    }
    let mut size: std::collections::BTreeMap<char, usize> = Default::default();
    let mut count: std::collections::BTreeMap<char, usize> = Default::default();
    let mut ell: Vec<usize> = Vec::new();
    for (term, t) in terms.iter().zip(&ts) {
        let letters: Vec<char> = term.chars().filter(|c| c.is_ascii_alphabetic()).collect();
        let has_ell = term.contains("...");
        let n_ell = if has_ell {
            t.rank().checked_sub(letters.len()).ok_or_else(|| {
                format!(
                    "einsum term '{term}' has more labels than its operand {:?} has dims",
                    t.sizes
                )
            })?
        } else if letters.len() != t.rank() {
            return Err(format!(
                "einsum term '{term}' has {} labels but its operand has shape {:?}",
                letters.len(),
                t.sizes
            ));
        } else {
            0
        };
        let pre = term
            .split("...")
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphabetic())
            .count();
        let mut dim = 0;
        for (i, c) in letters.iter().enumerate() {
            if has_ell && i == pre {
                let e = &t.sizes[dim..dim + n_ell];
                ell = broadcast(&ell, e)?;
                dim += n_ell;
            }
            let s = t.sizes[dim];
            let slot = size.entry(*c).or_insert(s);
            if *slot != s && *slot != 1 && s != 1 {
                return Err(format!(
                    "einsum: label '{c}' has sizes {} and {s} in '{eq}'",
                    *slot
                ));
            }
            *slot = (*slot).max(s);
            *count.entry(*c).or_default() += 1;
            dim += 1;
        }
        if has_ell && pre == letters.len() {
            let e = &t.sizes[dim..dim + n_ell];
            ell = broadcast(&ell, e)?;
        }
    }
    let mut out = Vec::new();
    match rhs {
        Some(r) => {
            let pre: Vec<char> = r.split("...").next().unwrap_or("").chars().collect();
            for c in r.chars().filter(|c| c.is_ascii_alphabetic()) {
                if r.contains("...") && !pre.contains(&c) && out.len() == pre.len() {
                    out.extend_from_slice(&ell);
                }
                out.push(
                    *size.get(&c).ok_or_else(|| {
                        format!("einsum output label '{c}' is not an input label")
                    })?,
                );
            }
            if r.contains("...") && out.len() == pre.len() {
                out.extend_from_slice(&ell);
            }
        }
        None => {
            out.extend_from_slice(&ell);
            // Upper case sorts before lower case, as torch orders implicit output labels.
            for (c, n) in &count {
                if *n == 1 {
                    out.push(size[c]);
                }
            }
        }
    }
    let refs: Vec<&MetaTensor> = ts.iter().collect();
    one(MetaTensor::new(dtype_of(&refs), out))
}
