//! Matrix products beyond mm / bmm / addmm / linear, composed from the matmul, reduce and
//! strided-copy kernels (no CPU round trip):
//!
//! - `matmul` of any ranks (1-D operands, broadcast batch dims), `mv`, `addmv`, `dot`,
//!   `vdot`, `outer` / `ger`, `addr`, `baddbmm`, `addbmm`, `linalg_multi_dot` /
//!   `chain_matmul`, as torch's `matmul_impl`: 1-D operands get a size-1 dim, batch dims are
//!   broadcast and merged into one batch stride (or copied when they cannot be);
//! - the in-place `addmm_`, `baddbmm_`, `addbmm_`, `addmv_`, `addr_`: the product, then a copy
//!   into `self`;
//! - `einsum`, `tensordot`, `bilinear`, `_trilinear`: in `contract.rs`.
//!
//! f32 (and f16 where the matmul kernel has it), and int32 / int64 (held as i32 words, the
//! products wrapping in 32 bits as the other int kernels: `matmul_i` in shaders/linalg.wgsl,
//! the int sum of the reduce kernel). `mm`, `bmm` and `addmm` of floats keep their kernels in
//! src/gpu/kernels/matmul.rs.

use super::contract::tensor_list;
use super::{encode_matmul, index, is_float, mat_strides, same_float, KernelCtx, MatmulMeta, Out};
use crate::cpu::broadcast_shapes;
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{contiguous_strides, lock, GTensor};

/// The integer matmul (shaders/linalg.wgsl).
pub const MATMUL_INT: Variant = Variant::new(Shader::Linalg, "matmul_i");

/// int32 / int64 (i32 words on the GPU).
pub(super) fn is_int(d: DType) -> bool {
    matches!(d, DType::I32 | DType::I64)
}

/// `x` as a contiguous tensor starting at 0: itself, or a strided copy of its 32-bit words
/// (any GPU dtype) or f16 elements.
pub(super) fn contiguous(k: &mut KernelCtx, x: &GTensor) -> Result<Option<GTensor>> {
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
pub(super) fn encode_mm(
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
    // mm / bmm / addmm of floats: their kernels in kernels/matmul.rs.
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

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{On, F16};
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
}

/// f32, or int32 / int64 operands of one dtype (the int matmul).
pub(super) fn products(i: &[DType], o: &[DType]) -> bool {
    use super::table::{all_f32, index};
    all_f32(i, o)
        || (i.first().is_some_and(|&d| index(d)) && i.iter().all(|&d| d == i[0]) && o == [i[0]])
}
