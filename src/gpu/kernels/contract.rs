//! Contractions on the GPU: `einsum` (the CPU kernel's parser), `tensordot`, `inner`,
//! `bilinear`, `_trilinear`, following the CPU kernel's contraction plan
//! (src/ops/matmul/einsum.rs): diagonals as strided views, labels used nowhere else summed
//! out (the reduce kernel), operands contracted pairwise along the CPU's path
//! (src/ops/matmul/einsum_path.rs), each pair one batched GEMM of
//! contiguous [batch, kept-left, contracted] @ [batch, contracted, kept-right] copies
//! (the integer or float matmul). f32, or int32 / int64 operands of one dtype.

use super::elementwise::binary_f32;
use super::linalg::{contiguous, encode_mm, is_int};
use super::{pad8, BinaryOp, KernelCtx, Out, ReduceMeta, ReduceOp};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::store::{contiguous_strides, GTensor};
use crate::ops::matmul::einsum::{arranged_strides, label_size};
use crate::ops::matmul::einsum_path::{contract_along, labelled};
use crate::program::Arg;

/// The GPU tensors of a tensor-list argument.
pub(super) fn tensor_list(k: &KernelCtx, name: &str) -> Option<Vec<GTensor>> {
    let Some(Arg::Tensors(ids)) = k.op.arg(name) else {
        return None;
    };
    ids.iter()
        .map(|id| k.env_t.get(*id).and_then(|t| t.clone()))
        .collect()
}

/// An operand of a contraction: one distinct label per dim.
struct Op {
    t: GTensor,
    labels: Vec<u32>,
}

impl Op {
    fn size(&self, l: u32) -> Option<usize> {
        label_size(&self.labels, &self.t.sizes, l)
    }
    /// A view with dims in the order of `labels` (missing ones size 1), each expanded to `sizes`.
    fn arranged(&self, labels: &[u32], sizes: &[usize]) -> GTensor {
        let st = arranged_strides(&self.labels, &self.t.sizes, &self.t.strides, labels, sizes);
        self.t.view(sizes.to_vec(), st, self.t.offset)
    }
}

/// Sum out the dims of `op` whose labels are not in `keep`.
fn sum_except(k: &mut KernelCtx, op: Op, keep: &dyn Fn(u32) -> bool) -> Result<Option<Op>> {
    if op.labels.iter().all(|&l| keep(l)) {
        return Ok(Some(op));
    }
    let kept: Vec<u32> = op.labels.iter().copied().filter(|&l| keep(l)).collect();
    let gone: Vec<u32> = op.labels.iter().copied().filter(|&l| !keep(l)).collect();
    let sizes_of =
        |ls: &[u32]| -> Vec<usize> { ls.iter().map(|&l| op.size(l).unwrap_or(1)).collect() };
    let (ks, gs) = (sizes_of(&kept), sizes_of(&gone));
    let kv = op.arranged(&kept, &ks);
    let gv = op.arranged(&gone, &gs);
    let (n_out, n_red) = (ks.iter().product::<usize>(), gs.iter().product::<usize>());
    let d = op.t.dtype;
    if kept.len() > 8 || gone.len() > 8 || !k.fits(&op.t) || !(d == DType::F32 || is_int(d)) {
        return Ok(None);
    }
    k.ensure(&op.t)?;
    let out = k.new_out(d, &ks)?;
    if n_out > 0 {
        let meta = ReduceMeta {
            n_out: n_out as u32,
            n_red: n_red as u32,
            kept_rank: kept.len() as u32,
            red_rank: gone.len() as u32,
            kept_shape: pad8(&ks),
            kept_strides: pad8(&kv.strides),
            red_shape: pad8(&gs),
            red_strides: pad8(&gv.strides),
            offset: op.t.offset as u32,
            scale: 1.0,
            ..Default::default()
        };
        super::reduce_ops::dispatch_reduce(k, meta, ReduceOp::Sum, &op.t, &out, is_int(d))?;
    }
    Ok(Some(Op {
        t: out,
        labels: kept,
    }))
}

/// Contract `a` and `b`, keeping the labels for which `keep` holds.
fn pair(k: &mut KernelCtx, a: Op, b: Op, keep: &dyn Fn(u32) -> bool) -> Result<Option<Op>> {
    let bl = b.labels.clone();
    let Some(a) = sum_except(k, a, &|l| keep(l) || bl.contains(&l))? else {
        return Ok(None);
    };
    let al = a.labels.clone();
    let Some(b) = sum_except(k, b, &|l| keep(l) || al.contains(&l))? else {
        return Ok(None);
    };
    let both = |l: &u32| a.labels.contains(l) && b.labels.contains(l);
    let sel = |ls: &[u32], f: &dyn Fn(&u32) -> bool| -> Vec<u32> {
        ls.iter().copied().filter(|l| f(l)).collect()
    };
    let batch = sel(&a.labels, &|l| both(l) && keep(*l));
    let contract = sel(&a.labels, &|l| both(l) && !keep(*l));
    let a_only = sel(&a.labels, &|l| !b.labels.contains(l));
    let b_only = sel(&b.labels, &|l| !a.labels.contains(l));
    let mut bad = false;
    let mut size = |l: u32| -> usize {
        match (a.size(l), b.size(l)) {
            (Some(x), Some(y)) if x != y && x != 1 && y != 1 => {
                bad = true;
                0
            }
            // Broadcasting: a size-1 (or absent) dim takes the other's size, 0 included.
            (Some(1) | None, y) => y.unwrap_or(1),
            (Some(x), _) => x,
        }
    };
    let mut sizes_of = |ls: &[u32]| -> Vec<usize> { ls.iter().map(|&l| size(l)).collect() };
    let (bs, ms, ks, ns) = (
        sizes_of(&batch),
        sizes_of(&a_only),
        sizes_of(&contract),
        sizes_of(&b_only),
    );
    if bad {
        return Ok(None);
    }
    let p = |v: &[usize]| v.iter().product::<usize>();
    let (nb, m, kk, n) = (p(&bs), p(&ms), p(&ks), p(&ns));
    let a_order: Vec<u32> = [&batch[..], &a_only, &contract].concat();
    let b_order: Vec<u32> = [&batch[..], &contract, &b_only].concat();
    let av = a.arranged(&a_order, &[&bs[..], &ms, &ks].concat());
    let bv = b.arranged(&b_order, &[&bs[..], &ks, &ns].concat());
    if av.rank() > 8 || bv.rank() > 8 {
        return Ok(None);
    }
    let (Some(av), Some(bv)) = (contiguous(k, &av)?, contiguous(k, &bv)?) else {
        return Ok(None);
    };
    let av = av.view(vec![nb, m, kk], vec![m * kk, kk, 1], av.offset);
    let bv = bv.view(vec![nb, kk, n], vec![kk * n, n, 1], bv.offset);
    let Some(r) = encode_mm(k, &av, &bv, None, nb, m, n, kk, 1.0, 0.0)? else {
        return Ok(None);
    };
    let out_sizes = [&bs[..], &ms, &ns].concat();
    let st = contiguous_strides(&out_sizes);
    Ok(Some(Op {
        t: r.view(out_sizes, st, 0),
        labels: [batch, a_only, b_only].concat(),
    }))
}

/// Contract labelled operands (all f32, or all of one int dtype) along the CPU kernel's path
/// (`einsum_path::contract_along`) into the labels `out` (a contiguous result).
fn contract_ops(k: &mut KernelCtx, ops: Vec<Op>, out: &[u32]) -> Result<Option<GTensor>> {
    let Some(d) = ops.first().map(|o| o.t.dtype) else {
        return Ok(None);
    };
    if !(d == DType::F32 || is_int(d)) || ops.iter().any(|o| o.t.dtype != d) {
        return Ok(None);
    }
    let described = |o: &Op| labelled(&o.labels, &o.t.sizes);
    let Some(acc) = contract_along(ops, out, described, |a, b, keep| pair(k, a, b, keep))? else {
        return Ok(None);
    };
    let Some(acc) = sum_except(k, acc, &|l| out.contains(&l))? else {
        return Ok(None);
    };
    let sizes: Vec<usize> = out.iter().map(|&l| acc.size(l).unwrap_or(1)).collect();
    let v = acc.arranged(out, &sizes);
    if v.rank() > 8 {
        return Ok(None);
    }
    contiguous(k, &v)
}

/// Operands with one label per dim (distinct within an operand).
fn contract(k: &mut KernelCtx, operands: Vec<(GTensor, Vec<u32>)>, out: &[u32]) -> Out {
    let Some(d) = operands.first().map(|(t, _)| t.dtype) else {
        return Ok(None);
    };
    if operands.iter().any(|(t, l)| l.len() != t.rank()) || !k.out_is(d) {
        return Ok(None);
    }
    let ops = operands
        .into_iter()
        .map(|(t, labels)| Op { t, labels })
        .collect();
    super::one(contract_ops(k, ops, out))
}

/// `einsum(equation, tensors, path)`.
pub(super) fn einsum(k: &mut KernelCtx) -> Out {
    let Some(eq) = k.op.opt_str("equation")? else {
        return Ok(None);
    };
    let Some(ts) = tensor_list(k, "tensors") else {
        return Ok(None);
    };
    let Some(d) = ts.first().map(|t| t.dtype) else {
        return Ok(None);
    };
    if !(d == DType::F32 || is_int(d)) || ts.iter().any(|t| t.dtype != d) || !k.out_is(d) {
        return Ok(None);
    }
    let ranks: Vec<usize> = ts.iter().map(|t| t.rank()).collect();
    // Equations the CPU kernel rejects decline, so it reports the error.
    let Ok((terms, out)) = crate::ops::matmul::einsum::parse(&k.op, &eq, &ranks) else {
        return Ok(None);
    };
    // Repeated labels within an operand: its diagonal (strides added).
    let mut ops = Vec::new();
    for (term, t) in terms.iter().zip(&ts) {
        let mut labels: Vec<u32> = Vec::new();
        let (mut sizes, mut strides) = (Vec::new(), Vec::new());
        for (i, &l) in term.labels.iter().enumerate() {
            match labels.iter().position(|&x| x == l) {
                Some(j) => {
                    if sizes[j] != t.sizes[i] {
                        return Ok(None);
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
        ops.push(Op {
            t: t.view(sizes, strides, t.offset),
            labels,
        });
    }
    super::one(contract_ops(k, ops, &out))
}

fn wrap_dim(d: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let d = if d < 0 { d + r } else { d };
    (0..r).contains(&d).then_some(d as usize)
}

/// `tensordot(self, other, dims_self, dims_other)`.
pub(super) fn tensordot(k: &mut KernelCtx) -> Out {
    let (Some(a), Some(b)) = (k.t("self"), k.t("other")) else {
        return Ok(None);
    };
    let (da, db) = (k.op.ints("dims_self")?, k.op.ints("dims_other")?);
    if da.len() != db.len() {
        return Ok(None);
    }
    let la: Vec<u32> = (0..a.rank() as u32).collect();
    let mut lb: Vec<u32> = (0..b.rank() as u32).map(|i| 1000 + i).collect();
    for (&x, &y) in da.iter().zip(&db) {
        let (Some(x), Some(y)) = (wrap_dim(x, a.rank()), wrap_dim(y, b.rank())) else {
            return Ok(None);
        };
        if a.sizes[x] != b.sizes[y] {
            return Ok(None);
        }
        lb[y] = la[x];
    }
    let out: Vec<u32> = la
        .iter()
        .copied()
        .filter(|l| !lb.contains(l))
        .chain(lb.iter().copied().filter(|l| *l >= 1000))
        .collect();
    contract(k, vec![(a, la), (b, lb)], &out)
}

/// `inner(self, other)`: contraction over the last dims.
pub(super) fn inner(k: &mut KernelCtx) -> Out {
    let (Some(a), Some(b)) = (k.t("self"), k.t("other")) else {
        return Ok(None);
    };
    if a.rank() == 0 || b.rank() == 0 {
        return Ok(None);
    }
    let kl = 10_000;
    let mut la: Vec<u32> = (0..a.rank() as u32 - 1).collect();
    la.push(kl);
    let mut lb: Vec<u32> = (0..b.rank() as u32 - 1).map(|i| 1000 + i).collect();
    lb.push(kl);
    let out: Vec<u32> = [&la[..la.len() - 1], &lb[..lb.len() - 1]].concat();
    if a.sizes[a.rank() - 1] != b.sizes[b.rank() - 1] {
        return Ok(None);
    }
    contract(k, vec![(a, la), (b, lb)], &out)
}

/// `_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`.
pub(super) fn trilinear(k: &mut KernelCtx) -> Out {
    let (Some(t1), Some(t2), Some(t3)) = (k.t("i1"), k.t("i2"), k.t("i3")) else {
        return Ok(None);
    };
    let ex = [
        k.op.ints("expand1")?,
        k.op.ints("expand2")?,
        k.op.ints("expand3")?,
    ];
    let sumdim = k.op.ints("sumdim")?;
    let total = t1.rank() + ex[0].len();
    let mut operands = Vec::new();
    for (t, e) in [t1, t2, t3].into_iter().zip(&ex) {
        let labels: Vec<u32> = (0..total as i64)
            .filter(|d| !e.contains(d))
            .map(|d| d as u32)
            .collect();
        if labels.len() != t.rank() {
            return Ok(None);
        }
        operands.push((t, labels));
    }
    let out: Vec<u32> = (0..total as i64)
        .filter(|d| !sumdim.contains(d))
        .map(|d| d as u32)
        .collect();
    contract(k, operands, &out)
}

/// `bilinear(input1, input2, weight, bias)`: x1[.., i] weight[o, i, j] x2[.., j] + bias[o].
pub(super) fn bilinear(k: &mut KernelCtx) -> Out {
    let (Some(x1), Some(x2), Some(w)) = (k.t("input1"), k.t("input2"), k.t("weight")) else {
        return Ok(None);
    };
    let bias = k.t("bias");
    if k.is_tensor_arg("bias") && bias.is_none() {
        return Ok(None);
    }
    if x1.rank() == 0
        || x1.rank() != x2.rank()
        || w.rank() != 3
        || x1.sizes[..x1.rank() - 1] != x2.sizes[..x2.rank() - 1]
        || !k.out_is(DType::F32)
    {
        return Ok(None);
    }
    let r = x1.rank() as u32;
    let batch: Vec<u32> = (0..r - 1).collect();
    let (i, j, o) = (100, 101, 102);
    let l1: Vec<u32> = batch.iter().copied().chain([i]).collect();
    let l2: Vec<u32> = batch.iter().copied().chain([j]).collect();
    let out: Vec<u32> = batch.iter().copied().chain([o]).collect();
    let ops = vec![
        Op { t: x1, labels: l1 },
        Op {
            t: w,
            labels: vec![o, i, j],
        },
        Op { t: x2, labels: l2 },
    ];
    let Some(y) = contract_ops(k, ops, &out)? else {
        return Ok(None);
    };
    let Some(b) = bias else {
        return Ok(Some(vec![Slot::Tensor(y)]));
    };
    if b.dtype != DType::F32 || b.expand_to(&y.sizes).is_none() {
        return Ok(None);
    }
    super::one(binary_f32(k, BinaryOp::Add, &y, b))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, On};
    let default = On::Only(&["default"]);
    t.kernel(&["aten.einsum"], default, einsum, super::linalg::products);
    t.kernel(&["aten.tensordot"], default, tensordot, all_f32);
    t.kernel(&["aten.inner"], default, inner, all_f32);
    t.kernel(&["aten._trilinear"], default, trilinear, all_f32);
    t.kernel(&["aten.bilinear"], default, bilinear, all_f32);
}
