//! Matrix products beyond mm / bmm / addmm / linear, composed from the matmul, reduce and
//! strided-copy kernels (no CPU round trip):
//!
//! - `matmul` of any ranks (1-D operands, broadcast batch dims), `mv`, `addmv`, `dot`,
//!   `vdot`, `outer` / `ger`, `addr`, `baddbmm`, `addbmm`, `linalg_multi_dot` /
//!   `chain_matmul`, as torch's `matmul_impl`: 1-D operands get a size-1 dim, batch dims are
//!   broadcast and merged into one batch stride (or copied when they cannot be);
//! - the in-place `addmm_`, `baddbmm_`, `addbmm_`, `addmv_`, `addr_`: the product, then a copy
//!   into `self`;
//! - `einsum` (the CPU kernel's parser), `tensordot`, `bilinear`, `_trilinear`: the CPU
//!   kernel's contraction plan (src/ops/matmul/einsum.rs): diagonals as strided views, labels
//!   used nowhere else summed out (the reduce kernel), operands contracted left to right, each
//!   pair one batched GEMM of contiguous [batch, kept-left, contracted] @ [batch, contracted,
//!   kept-right] copies.
//!
//! f32 (and f16 where the matmul kernel has it), and int32 / int64 (held as i32 words, the
//! products wrapping in 32 bits as the other int kernels: `matmul_i` in shaders/linalg.wgsl,
//! the int sum of the reduce kernel). `mm`, `bmm` and `addmm` of floats keep their kernels in
//! src/gpu/kernels.rs.

use super::elementwise::binary_f32;
use super::{
    encode_matmul, grid, index, is_float, mat_strides, pad8, same_float, BinaryOp, KernelCtx,
    MatmulMeta, Out, ReduceMeta, ReduceOp,
};
use crate::cpu::broadcast_shapes;
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{contiguous_strides, lock, GTensor};
use crate::program::Arg;

/// The integer matmul (shaders/linalg.wgsl).
pub const MATMUL_INT: Variant = Variant::new(Shader::Linalg, "matmul_i");

/// int32 / int64 (i32 words on the GPU).
fn is_int(d: DType) -> bool {
    matches!(d, DType::I32 | DType::I64)
}

/// `x` as a contiguous tensor starting at 0: itself, or a strided copy of its 32-bit words
/// (any GPU dtype) or f16 elements.
fn contiguous(k: &mut KernelCtx, x: &GTensor) -> Result<Option<GTensor>> {
    if x.dtype == DType::F16 {
        return super::contiguous(k, x);
    }
    if x.is_contiguous() && x.offset == 0 {
        k.ensure(x)?;
        return Ok(Some(x.clone()));
    }
    if x.rank() > 8 || !k.fits(x) {
        return Ok(None);
    }
    let out = k.new_out(x.dtype, &x.sizes)?;
    index::encode_copy(k, x, &out)?;
    Ok(Some(out))
}

/// [`encode_matmul`], or the integer kernel for int operands (`alpha`, `beta` integral).
#[allow(clippy::too_many_arguments)]
fn encode_mm(
    k: &mut KernelCtx,
    a: &GTensor,
    bm: &GTensor,
    c: Option<&GTensor>,
    batch: usize,
    m: usize,
    n: usize,
    kk: usize,
    alpha: f32,
    beta: f32,
) -> Result<Option<GTensor>> {
    if !is_int(a.dtype) {
        return encode_matmul(k, a, bm, c, batch, m, n, kk, alpha, beta);
    }
    if bm.dtype != a.dtype
        || c.is_some_and(|c| c.dtype != a.dtype)
        || alpha.fract() != 0.0
        || beta.fract() != 0.0
    {
        return Ok(None);
    }
    let Some(sizes) = super::matmul_operands(k, a, bm, c, batch, m, n, 8)? else {
        return Ok(None);
    };
    let out = k.new_out(a.dtype, &sizes)?;
    if batch * m * n == 0 {
        return Ok(Some(out));
    }
    let meta = MatmulMeta {
        m: m as u32,
        n: n as u32,
        k: kk as u32,
        flags: c.is_some() as u32,
        a: mat_strides(a),
        b: mat_strides(bm),
        c: c.map(mat_strides).unwrap_or_default(),
        alpha: f32::from_bits(alpha as i32 as u32),
        beta: f32::from_bits(beta as i32 as u32),
        _p: [0.0; 2],
    };
    k.dispatch(
        &MATMUL_INT,
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, a), (3, bm), (4, c.unwrap_or(a))],
        (n.div_ceil(8) as u32, m.div_ceil(8) as u32, batch as u32),
    )?;
    Ok(Some(out))
}

/// One stride for the batch dims `sizes` / `strides` (a merged view), if they have one.
fn merged_stride(sizes: &[usize], strides: &[usize]) -> Option<usize> {
    let dims: Vec<(usize, usize)> = sizes
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n != 1)
        .map(|(&n, &s)| (n, s))
        .collect();
    let Some(&(_, last)) = dims.last() else {
        return Some(0);
    };
    dims.windows(2)
        .all(|w| w[0].1 == w[1].1 * w[1].0)
        .then_some(last)
}

/// `t` ([batch..., m, n]) as a [nb, m, n] view, copied when its batch dims do not merge.
fn flat3(k: &mut KernelCtx, t: &GTensor, nb: usize) -> Result<Option<GTensor>> {
    let r = t.rank();
    let (m, n) = (t.sizes[r - 2], t.sizes[r - 1]);
    if let Some(bs) = merged_stride(&t.sizes[..r - 2], &t.strides[..r - 2]) {
        return Ok(Some(t.view(
            vec![nb, m, n],
            vec![bs, t.strides[r - 2], t.strides[r - 1]],
            t.offset,
        )));
    }
    let Some(c) = contiguous(k, t)? else {
        return Ok(None);
    };
    Ok(Some(c.view(vec![nb, m, n], vec![m * n, n, 1], c.offset)))
}

/// torch's `matmul` semantics: `alpha * a @ b (+ beta * add)`, 1-D operands promoted and
/// their dim dropped from the result, batch dims broadcast. `add` broadcasts to the result.
pub(super) fn gmatmul(
    k: &mut KernelCtx,
    a: &GTensor,
    b: &GTensor,
    alpha: f32,
    add: Option<(&GTensor, f32)>,
) -> Result<Option<GTensor>> {
    let (ra, rb) = (a.rank(), b.rank());
    let ints = is_int(a.dtype) && b.dtype == a.dtype;
    if ra == 0
        || rb == 0
        || !(same_float(&[a, b]) || ints)
        || add.is_some_and(|(c, _)| c.dtype != a.dtype)
    {
        return Ok(None);
    }
    let a2 = if ra == 1 {
        a.view(vec![1, a.sizes[0]], vec![0, a.strides[0]], a.offset)
    } else {
        a.clone()
    };
    let b2 = if rb == 1 {
        b.view(vec![b.sizes[0], 1], vec![b.strides[0], 0], b.offset)
    } else {
        b.clone()
    };
    let (ra2, rb2) = (a2.rank(), b2.rank());
    let (m, kk) = (a2.sizes[ra2 - 2], a2.sizes[ra2 - 1]);
    let (k2, n) = (b2.sizes[rb2 - 2], b2.sizes[rb2 - 1]);
    if kk != k2 {
        return Ok(None);
    }
    let Some(batch) = broadcast_shapes(&a2.sizes[..ra2 - 2], &b2.sizes[..rb2 - 2]) else {
        return Ok(None);
    };
    let nb: usize = batch.iter().product();
    let (Some(ae), Some(be)) = (
        a2.expand_to(&[&batch[..], &[m, kk]].concat()),
        b2.expand_to(&[&batch[..], &[kk, n]].concat()),
    ) else {
        return Ok(None);
    };
    let mut result = batch.clone();
    if ra > 1 {
        result.push(m);
    }
    if rb > 1 {
        result.push(n);
    }
    let (Some(a3), Some(b3)) = (flat3(k, &ae, nb)?, flat3(k, &be, nb)?) else {
        return Ok(None);
    };
    let (c3, beta) = match add {
        Some((t, beta)) if beta != 0.0 => {
            let Some(e) = t.expand_to(&result) else {
                return Ok(None);
            };
            let mut st = e.strides.clone();
            if ra == 1 {
                st.insert(batch.len(), 0);
            }
            if rb == 1 {
                st.push(0);
            }
            let full = e.view([&batch[..], &[m, n]].concat(), st, e.offset);
            match flat3(k, &full, nb)? {
                Some(c) => (Some(c), beta),
                None => return Ok(None),
            }
        }
        _ => (None, 0.0),
    };
    let Some(out) = encode_mm(k, &a3, &b3, c3.as_ref(), nb, m, n, kk, alpha, beta)? else {
        return Ok(None);
    };
    let st = contiguous_strides(&result);
    Ok(Some(out.view(result, st, 0)))
}

fn scalars(k: &KernelCtx) -> Result<(f32, f32)> {
    Ok((
        k.op.float_or("beta", 1.0)? as f32,
        k.op.float_or("alpha", 1.0)? as f32,
    ))
}

/// The product ops: matmul, mv, addmv, dot, vdot, outer, addr, baddbmm, addbmm, multi_dot,
/// and their in-place forms.
pub(super) fn product(k: &mut KernelCtx) -> Out {
    let target = k.target().to_string();
    let (op, overload) = target.rsplit_once('.').unwrap_or((&target, ""));
    if overload == "out" {
        return Ok(None);
    }
    let base = op.strip_suffix('_').unwrap_or(op);
    let inplace = base != op;
    // mm / bmm / addmm of floats: their kernels in src/gpu/kernels.rs.
    let first = if base == "aten.addmm" { "mat1" } else { "self" };
    if !inplace
        && matches!(base, "aten.mm" | "aten.bmm" | "aten.addmm")
        && k.t(first).is_some_and(|t| is_float(t.dtype))
    {
        return if base == "aten.addmm" {
            super::addmm(k)
        } else {
            super::matmul(k)
        };
    }
    let t = |k: &KernelCtx, n: &str| k.t(n);
    let res = match base {
        "aten.matmul" | "aten.mm" | "aten.bmm" => {
            let other = if k.op.arg("mat2").is_some() {
                "mat2"
            } else {
                "other"
            };
            let (Some(a), Some(b)) = (t(k, "self"), t(k, other)) else {
                return Ok(None);
            };
            gmatmul(k, &a, &b, 1.0, None)?
        }
        "aten.mv" => {
            let (Some(a), Some(v)) = (t(k, "self"), t(k, "vec")) else {
                return Ok(None);
            };
            if a.rank() != 2 || v.rank() != 1 {
                return Ok(None);
            }
            gmatmul(k, &a, &v, 1.0, None)?
        }
        "aten.dot" | "aten.vdot" => {
            let other = if k.op.arg("tensor").is_some() {
                "tensor"
            } else {
                "other"
            };
            let (Some(a), Some(b)) = (t(k, "self"), t(k, other)) else {
                return Ok(None);
            };
            if a.rank() != 1 || b.sizes != a.sizes {
                return Ok(None);
            }
            gmatmul(k, &a, &b, 1.0, None)?
        }
        "aten.outer" | "aten.ger" | "aten.addr" => {
            let (na, nb) = if base == "aten.addr" {
                ("vec1", "vec2")
            } else {
                ("self", "vec2")
            };
            let (Some(a), Some(b)) = (t(k, na), t(k, nb)) else {
                return Ok(None);
            };
            if a.rank() != 1 || b.rank() != 1 {
                return Ok(None);
            }
            // [m, 1] @ [1, n]: each element is one product, a[i] * b[j].
            let a2 = a.view(vec![a.sizes[0], 1], vec![a.strides[0], 0], a.offset);
            let b2 = b.view(vec![1, b.sizes[0]], vec![0, b.strides[0]], b.offset);
            if base == "aten.addr" {
                let Some(s) = t(k, "self") else {
                    return Ok(None);
                };
                let (beta, alpha) = scalars(k)?;
                gmatmul(k, &a2, &b2, alpha, Some((&s, beta)))?
            } else {
                gmatmul(k, &a2, &b2, 1.0, None)?
            }
        }
        "aten.addmm" | "aten.addmv" | "aten.baddbmm" => {
            let (na, nb) = match base {
                "aten.addmm" => ("mat1", "mat2"),
                "aten.addmv" => ("mat", "vec"),
                _ => ("batch1", "batch2"),
            };
            let (Some(s), Some(a), Some(b)) = (t(k, "self"), t(k, na), t(k, nb)) else {
                return Ok(None);
            };
            let want = match base {
                "aten.addmm" => (2, 2),
                "aten.addmv" => (2, 1),
                _ => (3, 3),
            };
            if (a.rank(), b.rank()) != want || (base == "aten.baddbmm" && a.sizes[0] != b.sizes[0])
            {
                return Ok(None);
            }
            let (beta, alpha) = scalars(k)?;
            gmatmul(k, &a, &b, alpha, Some((&s, beta)))?
        }
        "aten.addbmm" => {
            let (Some(s), Some(a), Some(b)) = (t(k, "self"), t(k, "batch1"), t(k, "batch2")) else {
                return Ok(None);
            };
            if a.rank() != 3 || b.rank() != 3 || !same_float(&[&a, &b]) {
                return Ok(None);
            }
            let (nb, m, kk) = (a.sizes[0], a.sizes[1], a.sizes[2]);
            if b.sizes[0] != nb || b.sizes[1] != kk {
                return Ok(None);
            }
            let n = b.sizes[2];
            // [B, M, K] -> [M, B*K] and [B, K, N] -> [B*K, N]: the batch folded into K.
            let ap = a.view(
                vec![m, nb, kk],
                vec![a.strides[1], a.strides[0], a.strides[2]],
                a.offset,
            );
            let (Some(ap), Some(bp)) = (contiguous(k, &ap)?, contiguous(k, &b)?) else {
                return Ok(None);
            };
            let ap = ap.view(vec![m, nb * kk], vec![nb * kk, 1], ap.offset);
            let bp = bp.view(vec![nb * kk, n], vec![n, 1], bp.offset);
            let (beta, alpha) = scalars(k)?;
            gmatmul(k, &ap, &bp, alpha, Some((&s, beta)))?
        }
        "aten.linalg_multi_dot" | "aten.chain_matmul" => {
            let name = if k.op.arg("tensors").is_some() {
                "tensors"
            } else {
                "matrices"
            };
            let Some(ts) = tensor_list(k, name) else {
                return Ok(None);
            };
            let mut it = ts.into_iter();
            let Some(mut acc) = it.next() else {
                return Ok(None);
            };
            for t in it {
                match gmatmul(k, &acc, &t, 1.0, None)? {
                    Some(r) => acc = r,
                    None => return Ok(None),
                }
            }
            Some(acc)
        }
        _ => return Ok(None),
    };
    let Some(res) = res else {
        return Ok(None);
    };
    if !k.out_is(res.dtype) {
        return Ok(None);
    }
    if !inplace {
        return Ok(Some(vec![Slot::Tensor(res)]));
    }
    // In place: the product copied into `self`'s GPU buffer.
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let overlap = x
        .sizes
        .iter()
        .zip(&x.strides)
        .any(|(&n, &s)| n > 1 && s == 0);
    if x.sizes != res.sizes || x.dtype != res.dtype || overlap {
        return Ok(None);
    }
    index::copy_into(k, &res, &x)?;
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::Tensor(x)]))
}

/// The GPU tensors of a tensor-list argument.
fn tensor_list(k: &KernelCtx, name: &str) -> Option<Vec<GTensor>> {
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
        self.labels
            .iter()
            .position(|&x| x == l)
            .map(|i| self.t.sizes[i])
    }
    /// A view with dims in the order of `labels` (missing ones size 1), each expanded to `sizes`.
    fn arranged(&self, labels: &[u32], sizes: &[usize]) -> GTensor {
        let mut st = Vec::with_capacity(labels.len());
        for (&l, &n) in labels.iter().zip(sizes) {
            let s = match self.labels.iter().position(|&x| x == l) {
                Some(i) if self.t.sizes[i] == n => self.t.strides[i],
                _ => 0,
            };
            st.push(s);
        }
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
        let (gx, gy, row) = grid(n_out, 64);
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
            row,
            scale: 1.0,
            p: 0.0,
        };
        let (v, bufs) = if is_int(d) {
            (ReduceOp::Sum.int_variant(), [(3, &out), (4, &op.t)])
        } else {
            (ReduceOp::Sum.variant(), [(1, &out), (2, &op.t)])
        };
        k.dispatch(&v, bytemuck::bytes_of(&meta), &bufs, (gx, gy, 1))?;
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
            (x, y) => x.unwrap_or(1).max(y.unwrap_or(1)),
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

/// Contract labelled operands (all f32, or all of one int dtype) left to right into the
/// labels `out` (a contiguous result).
fn contract_ops(k: &mut KernelCtx, ops: Vec<Op>, out: &[u32]) -> Result<Option<GTensor>> {
    let Some(d) = ops.first().map(|o| o.t.dtype) else {
        return Ok(None);
    };
    if !(d == DType::F32 || is_int(d)) || ops.iter().any(|o| o.t.dtype != d) {
        return Ok(None);
    }
    let all: Vec<Vec<u32>> = ops.iter().map(|o| o.labels.clone()).collect();
    let needed_after =
        |i: usize, l: u32| out.contains(&l) || all[i + 1..].iter().any(|ls| ls.contains(&l));
    let mut it = ops.into_iter().enumerate();
    let Some((_, first)) = it.next() else {
        return Ok(None);
    };
    let Some(mut acc) = sum_except(k, first, &|l| needed_after(0, l))? else {
        return Ok(None);
    };
    for (i, op) in it {
        match pair(k, acc, op, &|l| needed_after(i, l))? {
            Some(r) => acc = r,
            None => return Ok(None),
        }
    }
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
    use super::table::{all_f32, index, On, F16};
    // f32, or int32/int64 operands of one dtype (the int matmul).
    fn products(i: &[DType], o: &[DType]) -> bool {
        all_f32(i, o)
            || (i.first().is_some_and(|&d| index(d)) && i.iter().all(|&d| d == i[0]) && o == [i[0]])
    }
    t.kernel(
        &["aten.mm", "aten.bmm", "aten.addmm", "aten.matmul"],
        On::All,
        product,
        products,
    )
    .f16(F16::Native);
    t.kernel(
        &[
            "aten.mv",
            "aten.addmv",
            "aten.addmv_",
            "aten.dot",
            "aten.vdot",
            "aten.outer",
            "aten.ger",
            "aten.addr",
            "aten.addr_",
            "aten.baddbmm",
            "aten.baddbmm_",
            "aten.addbmm",
            "aten.addbmm_",
            "aten.addmm_",
            "aten.linalg_multi_dot",
            "aten.chain_matmul",
        ],
        On::All,
        product,
        products,
    );
    let default = On::Only(&["default"]);
    t.kernel(&["aten.einsum"], default, einsum, products);
    t.kernel(&["aten.tensordot"], default, tensordot, all_f32);
    t.kernel(&["aten.inner"], default, inner, all_f32);
    t.kernel(&["aten._trilinear"], default, trilinear, all_f32);
    t.kernel(&["aten.bilinear"], default, bilinear, all_f32);
}
