//! `aten.einsum`: a general contraction. Repeated labels within an operand take a diagonal (a
//! strided view), labels used nowhere else are summed out first, and operands are contracted
//! pairwise along the path `backends::opt_einsum` chooses (einsum_path.rs; disabled, left to
//! right), each pair as one batched GEMM ([batch, kept-left, contracted] @ [batch,
//! contracted, kept-right]). Size-1 dims broadcast, as in torch.

use super::einsum_path::{contract_along, labelled};
use super::{as_dtype, compute_dtype, gemm::batched_matmul};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::OpCtx;
use crate::runtime::RValue;

/// Labels: A-Z are 0..26, a-z 26..52 (torch's order for the implicit output), ellipsis dims
/// 52.. (right-aligned across operands).
const ELLIPSIS_BASE: u32 = 52;

pub(crate) struct Term {
    pub(crate) labels: Vec<u32>,
}

fn parse_term(
    ctx: &OpCtx,
    s: &str,
    rank: Option<usize>,
    ell_total: usize,
) -> Result<(Vec<Option<u32>>, usize)> {
    // Letters become Some(label); the ellipsis becomes None markers counted by the caller.
    let mut out = Vec::new();
    let mut ell = 0;
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            c @ b'A'..=b'Z' => out.push(Some((c - b'A') as u32)),
            c @ b'a'..=b'z' => out.push(Some((c - b'a') as u32 + 26)),
            b'.' if s[i..].starts_with("...") => {
                if ell > 0 {
                    return Err(ctx.err(format!("einsum term '{s}' has more than one ellipsis")));
                }
                ell = 1;
                let letters = s.chars().filter(|c| c.is_ascii_alphabetic()).count();
                let n = match rank {
                    Some(r) => r.checked_sub(letters).ok_or_else(|| {
                        ctx.err(format!(
                            "einsum term '{s}' has more labels than its operand has dims ({r})"
                        ))
                    })?,
                    None => ell_total,
                };
                let first = ell_total.saturating_sub(n);
                out.extend((first..first + n).map(|j| Some(ELLIPSIS_BASE + j as u32)));
                i += 3;
                continue;
            }
            other => {
                return Err(ctx.err(format!(
                    "invalid character '{}' in einsum equation",
                    other as char
                )))
            }
        }
        i += 1;
    }
    Ok((out, ell))
}

/// The operands' labels and the output's, for operands of ranks `ranks` (the GPU kernel,
/// src/gpu/kernels/linalg.rs, parses with this too).
pub(crate) fn parse(ctx: &OpCtx, eq: &str, ranks: &[usize]) -> Result<(Vec<Term>, Vec<u32>)> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let parts: Vec<&str> = lhs.split(',').collect();
    if parts.len() != ranks.len() {
        return Err(ctx.err(format!(
            "einsum equation '{eq}' has {} operands, but {} tensors were given",
            parts.len(),
            ranks.len()
        )));
    }
    // Ellipsis dims: the most any operand has.
    let mut ell_total = 0;
    for (p, &r) in parts.iter().zip(ranks) {
        if p.contains("...") {
            let letters = p.chars().filter(|c| c.is_ascii_alphabetic()).count();
            ell_total = ell_total.max(r.saturating_sub(letters));
        }
    }
    let mut terms = Vec::new();
    let mut counts = [0usize; ELLIPSIS_BASE as usize];
    for (p, &r) in parts.iter().zip(ranks) {
        let (labels, _) = parse_term(ctx, p, Some(r), ell_total)?;
        if labels.len() != r {
            return Err(ctx.err(format!(
                "einsum term '{p}' has {} labels for an operand of rank {r}",
                labels.len()
            )));
        }
        let labels: Vec<u32> = labels.into_iter().flatten().collect();
        for &l in &labels {
            if l < ELLIPSIS_BASE {
                counts[l as usize] += 1;
            }
        }
        terms.push(Term { labels });
    }
    let out = match rhs {
        Some(r) => {
            let (labels, _) = parse_term(ctx, r, None, ell_total)?;
            let labels: Vec<u32> = labels.into_iter().flatten().collect();
            for (i, l) in labels.iter().enumerate() {
                if labels[..i].contains(l) {
                    return Err(ctx.err(format!("output label repeated in einsum equation '{eq}'")));
                }
                if !terms.iter().any(|t| t.labels.contains(l)) && *l < ELLIPSIS_BASE {
                    return Err(ctx.err(format!(
                        "output label of '{eq}' does not appear in any input"
                    )));
                }
            }
            labels
        }
        None => {
            let mut v: Vec<u32> = (0..ell_total as u32).map(|j| ELLIPSIS_BASE + j).collect();
            v.extend((0..ELLIPSIS_BASE).filter(|&l| counts[l as usize] == 1));
            v
        }
    };
    Ok((terms, out))
}

/// The size of the dim labelled `l` of an operand with these `labels` and `sizes`.
pub(crate) fn label_size(labels: &[u32], sizes: &[usize], l: u32) -> Option<usize> {
    labels.iter().position(|&x| x == l).map(|i| sizes[i])
}

/// The strides of a view of an operand (`labels`, `sizes`, `strides`) with its dims in the
/// order of `want` (missing ones size 1), each expanded to `want_sizes` (stride 0).
pub(crate) fn arranged_strides(
    labels: &[u32],
    sizes: &[usize],
    strides: &[usize],
    want: &[u32],
    want_sizes: &[usize],
) -> Vec<usize> {
    want.iter()
        .zip(want_sizes)
        .map(|(&l, &n)| match labels.iter().position(|&x| x == l) {
            Some(i) if sizes[i] == n => strides[i],
            _ => 0,
        })
        .collect()
}

/// An operand: a tensor in the compute dtype with one distinct label per dim.
struct Op {
    t: Tensor,
    labels: Vec<u32>,
}

impl Op {
    fn size(&self, l: u32) -> Option<usize> {
        label_size(&self.labels, &self.t.sizes, l)
    }
    /// A view with dims in the order of `labels` (missing ones size 1), each expanded to `sizes`.
    fn arranged(&self, labels: &[u32], sizes: &[usize]) -> Tensor {
        let st = arranged_strides(&self.labels, &self.t.sizes, &self.t.strides, labels, sizes);
        self.t.view_with(sizes.to_vec(), st, self.t.offset)
    }
    /// Sum out the dims whose labels are not in `keep`.
    fn sum_except(self, keep: &dyn Fn(u32) -> bool) -> Result<Op> {
        if self.labels.iter().all(|&l| keep(l)) {
            return Ok(self);
        }
        let kept: Vec<u32> = self.labels.iter().copied().filter(|&l| keep(l)).collect();
        let gone: Vec<u32> = self.labels.iter().copied().filter(|&l| !keep(l)).collect();
        let order: Vec<u32> = kept.iter().chain(&gone).copied().collect();
        let sizes: Vec<usize> = order.iter().map(|&l| self.size(l).unwrap_or(1)).collect();
        let v = self.arranged(&order, &sizes);
        let ksizes = sizes[..kept.len()].to_vec();
        let nk: usize = ksizes.iter().product();
        let inner: usize = sizes[kept.len()..].iter().product();
        let t = if self.t.dtype == DType::I64 {
            let x = v.to_vec::<i64>();
            let s: Vec<i64> = (0..nk)
                .map(|i| {
                    x[i * inner..(i + 1) * inner]
                        .iter()
                        .fold(0i64, |a, &b| a.wrapping_add(b))
                })
                .collect();
            Tensor::from_vec(s, &ksizes)
        } else {
            let x = v.to_vec::<f64>();
            let s: Vec<f64> = (0..nk)
                .map(|i| x[i * inner..(i + 1) * inner].iter().sum())
                .collect();
            Tensor::from_vec(s, &ksizes).to_dtype(self.t.dtype)?
        };
        Ok(Op { t, labels: kept })
    }
}

/// Contract `a` and `b`, keeping the labels for which `keep` holds.
fn pair(ctx: &OpCtx, a: Op, b: Op, keep: &dyn Fn(u32) -> bool) -> Result<Op> {
    let a = a.sum_except(&|l| keep(l) || b.labels.contains(&l))?;
    let b = b.sum_except(&|l| keep(l) || a.labels.contains(&l))?;
    let both = |l: &u32| a.labels.contains(l) && b.labels.contains(l);
    let batch: Vec<u32> = a
        .labels
        .iter()
        .copied()
        .filter(|l| both(l) && keep(*l))
        .collect();
    let contract: Vec<u32> = a
        .labels
        .iter()
        .copied()
        .filter(|l| both(l) && !keep(*l))
        .collect();
    let a_only: Vec<u32> = a
        .labels
        .iter()
        .copied()
        .filter(|l| !b.labels.contains(l))
        .collect();
    let b_only: Vec<u32> = b
        .labels
        .iter()
        .copied()
        .filter(|l| !a.labels.contains(l))
        .collect();
    let size = |l: u32| -> Result<usize> {
        match (a.size(l), b.size(l)) {
            (Some(x), Some(y)) if x != y && x != 1 && y != 1 => Err(ctx.err(format!(
                "einsum operands disagree on a dimension: {x} vs {y}"
            ))),
            // Broadcasting: a size-1 (or absent) dim takes the other's size, 0 included.
            (Some(1) | None, y) => Ok(y.unwrap_or(1)),
            (Some(x), _) => Ok(x),
        }
    };
    let sizes_of = |ls: &[u32]| ls.iter().map(|&l| size(l)).collect::<Result<Vec<usize>>>();
    let (bs, ms, ks, ns) = (
        sizes_of(&batch)?,
        sizes_of(&a_only)?,
        sizes_of(&contract)?,
        sizes_of(&b_only)?,
    );
    let (nb, m, k, n) = (
        bs.iter().product::<usize>(),
        ms.iter().product::<usize>(),
        ks.iter().product::<usize>(),
        ns.iter().product::<usize>(),
    );
    let a_order: Vec<u32> = batch
        .iter()
        .chain(&a_only)
        .chain(&contract)
        .copied()
        .collect();
    let b_order: Vec<u32> = batch
        .iter()
        .chain(&contract)
        .chain(&b_only)
        .copied()
        .collect();
    let av = a
        .arranged(&a_order, &[&bs[..], &ms, &ks].concat())
        .contiguous();
    let bv = b
        .arranged(&b_order, &[&bs[..], &ks, &ns].concat())
        .contiguous();
    let av = av.view_with(vec![nb, m, k], vec![m * k, k, 1], av.offset);
    let bv = bv.view_with(vec![nb, k, n], vec![k * n, n, 1], bv.offset);
    let r = batched_matmul(&av, &bv, 1.0, None)?;
    let out_sizes = [&bs[..], &ms, &ns].concat();
    let r = r.view_with(
        out_sizes.clone(),
        crate::tensor::contiguous_strides(&out_sizes),
        0,
    );
    Ok(Op {
        t: r,
        labels: batch.into_iter().chain(a_only).chain(b_only).collect(),
    })
}

pub(super) fn einsum(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let eq = ctx
        .opt_str("equation")?
        .ok_or_else(|| ctx.err("missing equation"))?;
    let tensors = ctx.tensors("tensors")?;
    if tensors.is_empty() {
        return Err(ctx.err("einsum needs at least one operand"));
    }
    let dt = tensors[0].dtype;
    if let Some(t) = tensors.iter().find(|t| t.dtype != dt) {
        return Err(ctx.err(format!(
            "einsum operands must have the same dtype, got {dt} and {}",
            t.dtype
        )));
    }
    let ct = compute_dtype(ctx, dt)?;
    let ranks: Vec<usize> = tensors.iter().map(|t| t.rank()).collect();
    let (terms, out) = parse(ctx, &eq, &ranks)?;
    // Diagonals for repeated labels, then the compute dtype.
    let mut ops = Vec::new();
    for (term, t) in terms.iter().zip(&tensors) {
        let mut labels: Vec<u32> = Vec::new();
        let (mut sizes, mut strides) = (Vec::new(), Vec::new());
        for (i, &l) in term.labels.iter().enumerate() {
            match labels.iter().position(|&x| x == l) {
                Some(j) => {
                    if sizes[j] != t.sizes[i] {
                        return Err(ctx.err(format!(
                            "einsum label repeated with sizes {} and {}",
                            sizes[j], t.sizes[i]
                        )));
                    }
                    strides[j] += t.strides[i];
                }
                None => {
                    labels.push(l);
                    sizes.push(t.sizes[i]);
                    strides.push(t.strides[i]);
                }
            }
        }
        let v = t.view_with(sizes, strides, t.offset);
        ops.push(Op {
            t: as_dtype(&v, ct)?,
            labels,
        });
    }
    let out_t = contract_ops(ctx, ops, &out)?;
    Ok(vec![RValue::Tensor(as_dtype(&out_t, dt)?)])
}

/// Contract labelled operands (distinct labels per operand, compute dtype) along the
/// `backends::opt_einsum` path (einsum_path.rs) into the labels `out`; the result is in the
/// compute dtype.
fn contract_ops(ctx: &OpCtx, ops: Vec<Op>, out: &[u32]) -> Result<Tensor> {
    let described = |o: &Op| labelled(&o.labels, &o.t.sizes);
    let acc = contract_along(ops, out, described, |a, b, keep| {
        pair(ctx, a, b, keep).map(Some)
    })?
    .ok_or_else(|| ctx.err("a contraction needs at least one operand"))?;
    let acc = acc.sum_except(&|l| out.contains(&l))?;
    // Output order; a label no operand had (an ellipsis broadcast) has size 1.
    let sizes: Vec<usize> = out.iter().map(|&l| acc.size(l).unwrap_or(1)).collect();
    Ok(acc.arranged(out, &sizes).contiguous())
}

/// A general contraction for other ops (tensordot, bilinear, _trilinear): each operand with
/// one label per dim (distinct within an operand), all of one dtype; the result has the
/// labels `out` and the operands' dtype.
pub(super) fn contract(
    ctx: &OpCtx,
    operands: &[(Tensor, Vec<u32>)],
    out: &[u32],
) -> Result<Tensor> {
    let dt = operands
        .first()
        .map(|(t, _)| t.dtype)
        .ok_or_else(|| ctx.err("a contraction needs at least one operand"))?;
    let ct = compute_dtype(ctx, dt)?;
    let mut ops = Vec::new();
    for (t, labels) in operands {
        if t.dtype != dt {
            return Err(ctx.err(format!(
                "operands must have the same dtype, got {dt} and {}",
                t.dtype
            )));
        }
        if labels.len() != t.rank() {
            return Err(ctx.err(format!(
                "internal: {} labels for a tensor of rank {}",
                labels.len(),
                t.rank()
            )));
        }
        ops.push(Op {
            t: as_dtype(t, ct)?,
            labels: labels.clone(),
        });
    }
    as_dtype(&contract_ops(ctx, ops, out)?, dt)
}
