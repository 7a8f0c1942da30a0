//! Op family: matrix products (mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, outer, addr,
//! matmul, linear, einsum).
//!
//! Every product runs through [`gemm::batched_matmul`] in a compute dtype: f32 for
//! f32/f16/bf16 (reduced precision is accumulated in f32 and rounded once, as torch's CPU
//! kernels do), f64, and wrapping i64 for integers (exact). Operands are read through their
//! strides, so transposed and broadcast inputs are not copied.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

pub(crate) mod einsum;
pub(crate) mod einsum_path;
pub(crate) mod gemm;
#[cfg(target_arch = "x86_64")]
pub(crate) mod gemv;
mod linear;
/// Weights quantized at load (int8 / int4 with group scales), dequantized in the kernel.
pub mod quant;
#[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
use linear::Weight;
#[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
pub(crate) mod sgemm;

use super::{OpCtx, OpTable};
use crate::cpu::promote::promote_types;
use crate::cpu::{broadcast_shapes, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::RValue;
use crate::tensor::contiguous_strides;

pub(crate) fn register(r: &mut OpTable) {
    quant::register(r);
    r.define_op("aten.mm", mm, meta::product);
    r.define_op("aten.bmm", bmm, meta::product);
    r.define_op("aten.addmm", addmm, meta::product);
    r.define("aten.addmm_.default", addmm_, meta::product);
    r.define_op("aten.baddbmm", baddbmm, meta::product);
    r.define("aten.baddbmm_.default", baddbmm_, meta::product);
    r.define_op("aten.addbmm", addbmm, meta::product);
    r.define("aten.addbmm_.default", addbmm_, meta::product);
    r.define_op("aten.mv", mv, meta::product);
    r.define_op("aten.addmv", addmv, meta::product);
    r.define("aten.addmv_.default", addmv_, meta::product);
    r.define_op("aten.dot", dot, meta::dot);
    r.define_op("aten.vdot", dot, meta::dot);
    r.define_op("aten.inner", inner, meta::inner);
    r.define_op("aten.outer", outer, meta::outer);
    r.define_op("aten.ger", outer, meta::outer);
    r.define_op("aten.addr", addr, meta::outer);
    r.define("aten.addr_.default", addr_, meta::outer);
    r.define_op("aten.matmul", matmul, meta::matmul);
    r.define_op("aten.linear", linear, meta::linear);
    r.define_op("aten.einsum", einsum::einsum, meta::einsum);
    r.define_op("aten._addmm_activation", addmm_activation, meta::product);
    r.define_op("aten.tensordot", tensordot, meta::tensordot);
    r.define_op("aten.bilinear", bilinear, meta::bilinear);
    r.define_op("aten._trilinear", trilinear, meta::trilinear);
    r.define_op("aten.linalg_multi_dot", multi_dot, meta::multi_dot);
    r.define_op("aten.chain_matmul", multi_dot, meta::multi_dot);
}

fn one(t: Tensor) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Tensor(t)])
}

/// The dtype a product of `d` is computed in.
pub(crate) fn compute_dtype(ctx: &OpCtx, d: DType) -> Result<DType> {
    Ok(match d {
        DType::F32 | DType::F16 | DType::BF16 => DType::F32,
        DType::F64 => DType::F64,
        DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8 => DType::I64,
        other => {
            return Err(ctx.err(format!(
                "matrix products are not implemented for dtype {other}"
            )))
        }
    })
}

/// `t` in dtype `d` (no copy when it already is).
pub(crate) fn as_dtype(t: &Tensor, d: DType) -> Result<Tensor> {
    if t.dtype == d {
        Ok(t.clone())
    } else {
        t.to_dtype(d)
    }
}

/// A view of `t` with a size-1 dim inserted at `dim`.
fn unsqueeze(t: &Tensor, dim: usize) -> Tensor {
    let (mut sizes, mut strides) = (t.sizes.clone(), t.strides.clone());
    sizes.insert(dim, 1);
    strides.insert(dim, 0);
    t.view_with(sizes, strides, t.offset)
}

/// A view of `t` with its last two dims swapped.
pub(crate) fn transpose_last2(t: &Tensor) -> Tensor {
    let r = t.rank();
    let (mut sizes, mut strides) = (t.sizes.clone(), t.strides.clone());
    if r >= 2 {
        sizes.swap(r - 1, r - 2);
        strides.swap(r - 1, r - 2);
    }
    t.view_with(sizes, strides, t.offset)
}

fn same_dtype(ctx: &OpCtx, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype != b.dtype {
        return Err(ctx.err(format!(
            "expected both operands to have the same dtype, but got {} and {}",
            a.dtype, b.dtype
        )));
    }
    Ok(())
}

fn need_rank(ctx: &OpCtx, t: &Tensor, rank: usize, what: &str) -> Result<()> {
    if t.rank() != rank {
        return Err(ctx.err(format!(
            "{what} must be a {rank}-D tensor, got shape {:?}",
            t.sizes
        )));
    }
    Ok(())
}

/// torch.matmul of `a` and `b` (any ranks >= 1, batch dims broadcast), `alpha * a @ b (+ beta
/// * add)` where `add` broadcasts to the result shape. Returns the result in `out` dtype.
pub(crate) fn matmul_impl(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    alpha: f64,
    add: Option<(&Tensor, f64)>,
    out: DType,
) -> Result<Tensor> {
    let (ra, rb) = (a.rank(), b.rank());
    if ra == 0 || rb == 0 {
        return Err(ctx.err(format!(
            "both arguments need at least one dimension, got shapes {:?} and {:?}",
            a.sizes, b.sizes
        )));
    }
    let ct = compute_dtype(ctx, a.dtype)?;
    let a2 = as_dtype(a, ct)?;
    let b2 = as_dtype(b, ct)?;
    let a2 = if ra == 1 { unsqueeze(&a2, 0) } else { a2 };
    let b2 = if rb == 1 { unsqueeze(&b2, 1) } else { b2 };
    let (m, k) = (a2.sizes[a2.rank() - 2], a2.sizes[a2.rank() - 1]);
    let (k2, n) = (b2.sizes[b2.rank() - 2], b2.sizes[b2.rank() - 1]);
    if k != k2 {
        return Err(ctx.err(format!(
            "shapes {:?} and {:?} cannot be multiplied ({m}x{k} and {k2}x{n})",
            a.sizes, b.sizes
        )));
    }
    let batch = broadcast_shapes(&a2.sizes[..a2.rank() - 2], &b2.sizes[..b2.rank() - 2])
        .ok_or_else(|| {
            ctx.err(format!(
                "batch dimensions of {:?} and {:?} cannot be broadcast",
                a.sizes, b.sizes
            ))
        })?;
    let mut full = batch.clone();
    full.extend([m, n]);
    let mut result = batch.clone();
    if ra > 1 {
        result.push(m);
    }
    if rb > 1 {
        result.push(n);
    }
    let ae = a2.expand_to(&[&batch[..], &[m, k]].concat())?;
    let be = b2.expand_to(&[&batch[..], &[k, n]].concat())?;
    // The addend broadcasts to the result shape; view it in the internal [batch, M, N] shape.
    let add_view = match add {
        Some((t, beta)) if beta != 0.0 => {
            let e = as_dtype(t, ct)?.expand_to(&result).map_err(|_| {
                ctx.err(format!(
                    "the addend of shape {:?} does not broadcast to the product's shape {result:?}",
                    t.sizes
                ))
            })?;
            let mut st = e.strides.clone();
            if ra == 1 {
                st.insert(batch.len(), 0);
            }
            if rb == 1 {
                st.push(0);
            }
            Some((e.view_with(full.clone(), st, e.offset), beta))
        }
        _ => None,
    };
    let prod = gemm::batched_matmul(&ae, &be, alpha, add_view.as_ref().map(|(t, b)| (t, *b)))?;
    let prod = prod.view_with(result.clone(), contiguous_strides(&result), 0);
    as_dtype(&prod, out)
}

fn mm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, b) = (ctx.tensor("self")?, ctx.tensor("mat2")?);
    need_rank(ctx, &a, 2, "self")?;
    need_rank(ctx, &b, 2, "mat2")?;
    same_dtype(ctx, &a, &b)?;
    let out = ctx.opt_dtype("out_dtype")?.unwrap_or(a.dtype);
    #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
    if out == a.dtype {
        if let Some(r) = linear::packed_linear(ctx, &a, Weight::Right(&b, "mat2"), None)? {
            return one(r);
        }
    }
    one(matmul_impl(ctx, &a, &b, 1.0, None, out)?)
}

fn bmm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, b) = (ctx.tensor("self")?, ctx.tensor("mat2")?);
    need_rank(ctx, &a, 3, "self")?;
    need_rank(ctx, &b, 3, "mat2")?;
    same_dtype(ctx, &a, &b)?;
    if a.sizes[0] != b.sizes[0] {
        return Err(ctx.err(format!(
            "batch sizes differ: {:?} and {:?}",
            a.sizes, b.sizes
        )));
    }
    let out = ctx.opt_dtype("out_dtype")?.unwrap_or(a.dtype);
    one(matmul_impl(ctx, &a, &b, 1.0, None, out)?)
}

fn beta_alpha(ctx: &OpCtx) -> Result<(f64, f64)> {
    Ok((ctx.float_or("beta", 1.0)?, ctx.float_or("alpha", 1.0)?))
}

fn addmm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (s, a, b) = (
        ctx.tensor("self")?,
        ctx.tensor("mat1")?,
        ctx.tensor("mat2")?,
    );
    need_rank(ctx, &a, 2, "mat1")?;
    need_rank(ctx, &b, 2, "mat2")?;
    same_dtype(ctx, &a, &b)?;
    let (beta, alpha) = beta_alpha(ctx)?;
    let out = ctx.opt_dtype("out_dtype")?.unwrap_or(a.dtype);
    // A bias row added to every row of a product with a frozen right operand (GPT-2's
    // `Conv1D`): the packed path.
    #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
    if out == a.dtype && beta == 1.0 && alpha == 1.0 && s.dtype == a.dtype {
        let w = Weight::Right(&b, "mat2");
        if let Some(r) = linear::packed_linear(ctx, &a, w, Some(&s))? {
            return one(r);
        }
    }
    one(matmul_impl(ctx, &a, &b, alpha, Some((&s, beta)), out)?)
}

/// Write `r` into `self` (in-place variants) and return `self`.
fn in_place(ctx: &OpCtx, r: Vec<RValue>) -> Result<Vec<RValue>> {
    let s = ctx.tensor("self")?;
    if let Some(RValue::Tensor(t)) = r.first() {
        if t.sizes != s.sizes {
            return Err(ctx.err(format!(
                "the result of shape {:?} does not fit self of shape {:?}",
                t.sizes, s.sizes
            )));
        }
        s.copy_from(t)?;
    }
    one(s)
}

fn addmm_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let r = addmm(ctx)?;
    in_place(ctx, r)
}

fn addmm_activation(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let r = addmm(ctx)?;
    let Some(RValue::Tensor(t)) = r.into_iter().next() else {
        return Err(ctx.err("addmm returned nothing"));
    };
    let gelu = ctx.bool_or("use_gelu", false)?;
    let v = t.to_vec::<f64>();
    let f = |x: f64| {
        if gelu {
            // torch uses the tanh approximation here.
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        } else if x > 0.0 || x.is_nan() {
            x
        } else {
            0.0
        }
    };
    let out = Tensor::from_vec(v.into_iter().map(f).collect::<Vec<f64>>(), &t.sizes);
    one(out.to_dtype(t.dtype)?)
}

fn baddbmm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (s, a, b) = (
        ctx.tensor("self")?,
        ctx.tensor("batch1")?,
        ctx.tensor("batch2")?,
    );
    need_rank(ctx, &a, 3, "batch1")?;
    need_rank(ctx, &b, 3, "batch2")?;
    same_dtype(ctx, &a, &b)?;
    if a.sizes[0] != b.sizes[0] {
        return Err(ctx.err(format!(
            "batch sizes differ: {:?} and {:?}",
            a.sizes, b.sizes
        )));
    }
    let (beta, alpha) = beta_alpha(ctx)?;
    let out = ctx.opt_dtype("out_dtype")?.unwrap_or(a.dtype);
    one(matmul_impl(ctx, &a, &b, alpha, Some((&s, beta)), out)?)
}

fn baddbmm_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let r = baddbmm(ctx)?;
    in_place(ctx, r)
}

/// `beta * self + alpha * sum_b batch1[b] @ batch2[b]`: one GEMM with the batch folded into K.
fn addbmm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (s, a, b) = (
        ctx.tensor("self")?,
        ctx.tensor("batch1")?,
        ctx.tensor("batch2")?,
    );
    need_rank(ctx, &a, 3, "batch1")?;
    need_rank(ctx, &b, 3, "batch2")?;
    same_dtype(ctx, &a, &b)?;
    let (nb, m, k) = (a.sizes[0], a.sizes[1], a.sizes[2]);
    if b.sizes[0] != nb || b.sizes[1] != k {
        return Err(ctx.err(format!(
            "batch1 {:?} and batch2 {:?} cannot be multiplied",
            a.sizes, b.sizes
        )));
    }
    let n = b.sizes[2];
    let ct = compute_dtype(ctx, a.dtype)?;
    // [B, M, K] -> [M, B*K] and [B, K, N] -> [B*K, N], as contiguous copies.
    let ap = as_dtype(
        &a.view_with(
            vec![m, nb, k],
            vec![a.strides[1], a.strides[0], a.strides[2]],
            a.offset,
        ),
        ct,
    )?
    .contiguous();
    let ap = ap.view_with(vec![m, nb * k], vec![nb * k, 1], ap.offset);
    let bp = as_dtype(&b, ct)?.contiguous();
    let bp = bp.view_with(vec![nb * k, n], vec![n, 1], bp.offset);
    let (beta, alpha) = beta_alpha(ctx)?;
    one(matmul_impl(
        ctx,
        &ap,
        &bp,
        alpha,
        Some((&s, beta)),
        a.dtype,
    )?)
}

fn addbmm_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let r = addbmm(ctx)?;
    in_place(ctx, r)
}

fn mv(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, v) = (ctx.tensor("self")?, ctx.tensor("vec")?);
    need_rank(ctx, &a, 2, "self")?;
    need_rank(ctx, &v, 1, "vec")?;
    same_dtype(ctx, &a, &v)?;
    one(matmul_impl(ctx, &a, &v, 1.0, None, a.dtype)?)
}

fn addmv(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (s, a, v) = (ctx.tensor("self")?, ctx.tensor("mat")?, ctx.tensor("vec")?);
    need_rank(ctx, &a, 2, "mat")?;
    need_rank(ctx, &v, 1, "vec")?;
    same_dtype(ctx, &a, &v)?;
    let (beta, alpha) = beta_alpha(ctx)?;
    one(matmul_impl(ctx, &a, &v, alpha, Some((&s, beta)), a.dtype)?)
}

fn addmv_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let r = addmv(ctx)?;
    in_place(ctx, r)
}

fn dot(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor("other").or_else(|_| ctx.tensor("tensor"))?;
    need_rank(ctx, &a, 1, "self")?;
    need_rank(ctx, &b, 1, "the second operand")?;
    same_dtype(ctx, &a, &b)?;
    if a.sizes != b.sizes {
        return Err(ctx.err(format!(
            "inconsistent tensor size: {} and {} elements",
            a.sizes[0], b.sizes[0]
        )));
    }
    one(matmul_impl(ctx, &a, &b, 1.0, None, a.dtype)?)
}

/// `inner(a, b)`: contraction over the last dims (a scalar times a tensor for 0-d operands).
fn inner(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, b) = (ctx.tensor("self")?, ctx.tensor("other")?);
    same_dtype(ctx, &a, &b)?;
    if a.rank() == 0 || b.rank() == 0 {
        return one(outer_product(ctx, &a, &b, None, 1.0)?);
    }
    if b.rank() == 1 || a.rank() == 1 {
        return one(matmul_impl(ctx, &a, &b, 1.0, None, a.dtype)?);
    }
    // a [.., K] against b [.., K]: a @ b_flat^T with b flattened to [P, K].
    let k = *b.sizes.last().unwrap_or(&1);
    let bc = b.contiguous();
    let p = bc.numel() / k.max(1);
    let bt = bc.view_with(vec![k, p], vec![1, k], bc.offset);
    let r = matmul_impl(ctx, &a, &bt, 1.0, None, a.dtype)?;
    let mut sizes = a.sizes[..a.rank() - 1].to_vec();
    sizes.extend_from_slice(&b.sizes[..b.rank() - 1]);
    one(r.view_with(sizes.clone(), contiguous_strides(&sizes), r.offset))
}

/// `beta * add + alpha * a ⊗ b` with torch's type promotion; for 0-d operands a plain product.
fn outer_product(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    add: Option<(&Tensor, f64)>,
    alpha: f64,
) -> Result<Tensor> {
    let mut dt = promote_types(a.dtype, b.dtype);
    if let Some((s, _)) = add {
        dt = promote_types(dt, s.dtype);
    }
    let shape: Vec<usize> = a.sizes.iter().chain(&b.sizes).copied().collect();
    let (av, bv) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    let ints = !dt.is_float() && dt != DType::Bool;
    let base: Option<(Vec<f64>, Vec<i64>, f64)> = match add {
        Some((s, beta)) if beta != 0.0 => {
            let e = s.expand_to(&shape).map_err(|_| {
                ctx.err(format!(
                    "self of shape {:?} does not broadcast to {shape:?}",
                    s.sizes
                ))
            })?;
            Some((e.to_vec::<f64>(), e.to_vec::<i64>(), beta))
        }
        _ => None,
    };
    let n = bv.len();
    if ints {
        let (ai, bi) = (a.to_vec::<i64>(), b.to_vec::<i64>());
        let alpha = alpha as i64;
        let out: Vec<i64> = (0..ai.len() * n)
            .map(|i| {
                let p = alpha.wrapping_mul(ai[i / n].wrapping_mul(bi[i % n]));
                base.as_ref().map_or(p, |(_, s, beta)| {
                    (*beta as i64).wrapping_mul(s[i]).wrapping_add(p)
                })
            })
            .collect();
        return Tensor::from_vec(out, &shape).to_dtype(dt);
    }
    // A product of two f32 (or f16) values is exact in f64, so rounding it once gives torch's result.
    let out: Vec<f64> = (0..av.len() * n)
        .map(|i| {
            let p = av[i / n] * bv[i % n];
            let p = if alpha == 1.0 { p } else { alpha * p };
            base.as_ref().map_or(p, |(s, _, beta)| beta * s[i] + p)
        })
        .collect();
    if dt == DType::Bool {
        return Tensor::from_vec(
            out.into_iter().map(|x| x != 0.0).collect::<Vec<bool>>(),
            &shape,
        )
        .to_dtype(dt);
    }
    Tensor::from_vec(out, &shape).to_dtype(dt)
}

fn outer(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor("vec2")?;
    need_rank(ctx, &a, 1, "self")?;
    need_rank(ctx, &b, 1, "vec2")?;
    one(outer_product(ctx, &a, &b, None, 1.0)?)
}

fn addr(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (s, a, b) = (
        ctx.tensor("self")?,
        ctx.tensor("vec1")?,
        ctx.tensor("vec2")?,
    );
    need_rank(ctx, &a, 1, "vec1")?;
    need_rank(ctx, &b, 1, "vec2")?;
    let (beta, alpha) = beta_alpha(ctx)?;
    one(outer_product(ctx, &a, &b, Some((&s, beta)), alpha)?)
}

fn addr_(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let r = addr(ctx)?;
    in_place(ctx, r)
}

fn matmul(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, b) = (ctx.tensor("self")?, ctx.tensor("other")?);
    same_dtype(ctx, &a, &b)?;
    #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
    if a.rank() >= 2 && b.rank() == 2 {
        if let Some(r) = linear::packed_linear(ctx, &a, Weight::Right(&b, "other"), None)? {
            return one(r);
        }
    }
    one(matmul_impl(ctx, &a, &b, 1.0, None, a.dtype)?)
}

/// `input @ weight^T + bias` for weight [out, in] (torch.nn.functional.linear).
fn linear(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x, w) = (ctx.tensor("input")?, ctx.tensor("weight")?);
    let bias = ctx.opt_tensor("bias")?;
    same_dtype(ctx, &x, &w)?;
    if w.rank() > 2 || w.rank() == 0 {
        return Err(ctx.err(format!(
            "weight must be 1-D or 2-D, got shape {:?}",
            w.sizes
        )));
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
    if let Some(out) = linear::packed_linear(ctx, &x, Weight::Linear(&w), bias.as_ref())? {
        return one(out);
    }
    let wt = transpose_last2(&w);
    one(matmul_impl(
        ctx,
        &x,
        &wt,
        1.0,
        bias.as_ref().map(|b| (b, 1.0)),
        x.dtype,
    )?)
}

/// `tensordot(self, other, dims_self, dims_other)`: contract the paired dims; the result has
/// self's remaining dims, then other's.
fn tensordot(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (a, b) = (ctx.tensor("self")?, ctx.tensor("other")?);
    let (da, db) = (ctx.ints("dims_self")?, ctx.ints("dims_other")?);
    if da.len() != db.len() {
        return Err(ctx.err(format!(
            "dims_self has {} dims but dims_other has {}",
            da.len(),
            db.len()
        )));
    }
    let la: Vec<u32> = (0..a.rank() as u32).collect();
    let mut lb: Vec<u32> = (0..b.rank() as u32).map(|i| 1000 + i).collect();
    for (&x, &y) in da.iter().zip(&db) {
        let (x, y) = (
            super::util::wrap_dim(ctx, x, a.rank())?,
            super::util::wrap_dim(ctx, y, b.rank())?,
        );
        // torch broadcasts a size-1 contracted dim against the other's.
        if a.sizes[x] != b.sizes[y] && a.sizes[x] != 1 && b.sizes[y] != 1 {
            return Err(ctx.err(format!(
                "contracted dims differ in size: {} (self dim {x}) vs {} (other dim {y})",
                a.sizes[x], b.sizes[y]
            )));
        }
        lb[y] = la[x];
    }
    let out: Vec<u32> = la
        .iter()
        .copied()
        .filter(|l| !lb.contains(l))
        .chain(lb.iter().copied().filter(|l| *l >= 1000))
        .collect();
    same_dtype(ctx, &a, &b)?;
    one(einsum::contract(ctx, &[(a, la), (b, lb)], &out)?)
}

/// `_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`: each input lacks the dims
/// listed in its expand list; the product of all three is summed over `sumdim`.
fn trilinear(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let ts = [ctx.tensor("i1")?, ctx.tensor("i2")?, ctx.tensor("i3")?];
    let ex = [
        ctx.ints("expand1")?,
        ctx.ints("expand2")?,
        ctx.ints("expand3")?,
    ];
    let sumdim = ctx.ints("sumdim")?;
    let total = ts[0].rank() + ex[0].len();
    let mut operands = Vec::new();
    for (t, e) in ts.iter().zip(&ex) {
        let labels: Vec<u32> = (0..total as i64)
            .filter(|d| !e.contains(d))
            .map(|d| d as u32)
            .collect();
        if labels.len() != t.rank() {
            return Err(ctx.err(format!(
                "an input of rank {} does not fit {total} dims with expand list {e:?}",
                t.rank()
            )));
        }
        operands.push((t.clone(), labels));
    }
    let out: Vec<u32> = (0..total as i64)
        .filter(|d| !sumdim.contains(d))
        .map(|d| d as u32)
        .collect();
    one(einsum::contract(ctx, &operands, &out)?)
}

/// `bilinear(x1, x2, weight, bias)`: y[.., o] = x1[.., i] weight[o, i, j] x2[.., j] + bias[o].
fn bilinear(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (x1, x2, w) = (
        ctx.tensor("input1")?,
        ctx.tensor("input2")?,
        ctx.tensor("weight")?,
    );
    let bias = ctx.opt_tensor("bias")?;
    if x1.rank() == 0
        || x1.rank() != x2.rank()
        || w.rank() != 3
        || x1.sizes[..x1.rank() - 1] != x2.sizes[..x2.rank() - 1]
    {
        return Err(ctx.err(format!(
            "inputs {:?} and {:?} with weight {:?} do not fit bilinear",
            x1.sizes, x2.sizes, w.sizes
        )));
    }
    let r = x1.rank() as u32;
    let batch: Vec<u32> = (0..r - 1).collect();
    let (i, j, o) = (100, 101, 102);
    let l1: Vec<u32> = batch.iter().copied().chain([i]).collect();
    let l2: Vec<u32> = batch.iter().copied().chain([j]).collect();
    let out: Vec<u32> = batch.iter().copied().chain([o]).collect();
    let y = einsum::contract(ctx, &[(x1.clone(), l1), (w, vec![o, i, j]), (x2, l2)], &out)?;
    let Some(b) = bias else { return one(y) };
    let bv = b.expand_to(&y.sizes).map_err(|_| {
        ctx.err(format!(
            "bias of shape {:?} does not fit the output {:?}",
            b.sizes, y.sizes
        ))
    })?;
    let sum: Vec<f64> = y
        .to_vec::<f64>()
        .into_iter()
        .zip(bv.to_vec::<f64>())
        .map(|(p, q)| p + q)
        .collect();
    one(Tensor::from_vec(sum, &y.sizes).to_dtype(x1.dtype)?)
}

/// `linalg_multi_dot` / `chain_matmul`: products left to right (first and last may be 1-D).
fn multi_dot(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let ts = ctx
        .tensors("tensors")
        .or_else(|_| ctx.tensors("matrices"))?;
    let mut it = ts.iter();
    let first = it
        .next()
        .ok_or_else(|| ctx.err("needs at least one tensor"))?;
    let mut acc = first.clone();
    for t in it {
        same_dtype(ctx, &acc, t)?;
        acc = matmul_impl(ctx, &acc, t, 1.0, None, first.dtype)?;
    }
    one(acc)
}
