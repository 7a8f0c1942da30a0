//! Op family: linear algebra (`torch.linalg` and its older aliases), CPU only: LU (getrf's
//! partial pivoting), determinants, inverses and solves, triangular solves, Cholesky,
//! Householder QR (geqrf / orgqr / ormqr), symmetric eigenvalues, singular values and what
//! is unique given them (pinv, matrix rank, condition numbers, nuclear / 2-norms), the
//! matrix exponential and matrix powers.
//!
//! Every kernel reads its matrices as f64 (through their strides, batched over the leading
//! dims), computes in f64 with LAPACK's conventions ([`dense`]) and returns the input dtype;
//! pivots and `info` are int32 as in torch. Where torch raises (a singular matrix for `inv`,
//! a matrix that is not positive definite for `cholesky`) the error names the op and the
//! input; the `*_ex` ops return LAPACK's `info` instead. Eigenvectors and singular vectors
//! are determined up to sign only: they come from Jacobi rotations, not from LAPACK's
//! routines, so their signs may differ from torch's.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

pub(crate) mod dense;
mod distance;

use super::{OpCtx, OpTable};
use crate::cpu::{broadcast_shapes, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::RValue;

pub(crate) fn register(r: &mut OpTable) {
    distance::register(r);
    for t in [
        "aten.linalg_lu_factor.default",
        "aten.linalg_lu_factor_ex.default",
        "aten._lu_with_info.default",
    ] {
        r.define(t, lu_factor, meta::lu_factor);
    }
    r.define("aten.linalg_lu.default", linalg_lu, meta::linalg_lu);
    for t in [
        "aten.linalg_ldl_factor.default",
        "aten.linalg_ldl_factor_ex.default",
    ] {
        r.define(t, ldl_factor, meta::ldl_factor);
    }
    r.define("aten.linalg_ldl_solve.default", ldl_solve, meta::ldl_solve);
    r.define("aten.lu_unpack.default", lu_unpack, meta::lu_unpack);
    r.define("aten.linalg_lu_solve.default", lu_solve, meta::lu_solve);
    r.define("aten.lu_solve.default", lu_solve, meta::lu_solve);
    for t in [
        "aten.linalg_det.default",
        "aten.det.default",
        "aten.logdet.default",
        "aten._linalg_det.default",
        "aten.linalg_slogdet.default",
        "aten._linalg_slogdet.default",
        "aten.slogdet.default",
    ] {
        r.define(t, det, meta::det);
    }
    for t in [
        "aten.linalg_inv.default",
        "aten.linalg_inv_ex.default",
        "aten.inverse.default",
    ] {
        r.define(t, inv, meta::inv);
    }
    for t in [
        "aten.linalg_solve.default",
        "aten.linalg_solve_ex.default",
        "aten._linalg_solve_ex.default",
    ] {
        r.define(t, solve, meta::solve);
    }
    r.define(
        "aten.linalg_tensorsolve.default",
        tensorsolve,
        meta::tensorsolve,
    );
    r.define("aten.linalg_tensorinv.default", tensorinv, meta::tensorinv);
    r.define(
        "aten.triangular_solve.default",
        triangular_solve,
        meta::triangular_solve,
    );
    r.define(
        "aten.linalg_solve_triangular.default",
        solve_triangular,
        meta::solve_triangular,
    );
    r.define("aten.linalg_cholesky.default", cholesky, meta::cholesky);
    r.define("aten.linalg_cholesky_ex.default", cholesky, meta::cholesky);
    r.define(
        "aten.cholesky_solve.default",
        cholesky_solve,
        meta::cholesky_solve,
    );
    r.define(
        "aten.cholesky_inverse.default",
        cholesky_inverse,
        meta::same,
    );
    r.define("aten.linalg_qr.default", qr, meta::qr);
    r.define("aten.geqrf.default", geqrf, meta::geqrf);
    r.define(
        "aten.linalg_householder_product.default",
        householder_product,
        meta::same,
    );
    r.define("aten.orgqr.default", householder_product, meta::same);
    r.define("aten.ormqr.default", ormqr, meta::ormqr);
    for t in [
        "aten.linalg_eigvalsh.default",
        "aten._linalg_eigh.default",
        "aten.linalg_eigh.default",
    ] {
        r.define(t, eigh, meta::eigh);
    }
    for t in [
        "aten.linalg_svdvals.default",
        "aten._linalg_svd.default",
        "aten.linalg_svd.default",
        "aten.svd.default",
    ] {
        r.define(t, svd, meta::svd);
    }
    r.define_op("aten.linalg_pinv", pinv, meta::pinv);
    r.define("aten.pinverse.default", pinv, meta::pinv);
    r.define_op("aten.linalg_matrix_rank", matrix_rank, meta::matrix_rank);
    r.define_op("aten.linalg_cond", cond, meta::cond);
    r.define_op("aten.linalg_matrix_norm", matrix_norm, meta::matrix_norm);
    r.define_op("aten.linalg_norm", linalg_norm, meta::linalg_norm);
    r.define_op("aten.nuclear_norm", matrix_norm, meta::matrix_norm);
    r.define("aten.linalg_matrix_exp.default", matrix_exp, meta::same);
    r.define("aten.matrix_exp.default", matrix_exp, meta::same);
    r.define("aten.linalg_matrix_power.default", matrix_power, meta::same);
    r.define("aten.matrix_power.default", matrix_power, meta::same);
}

/// A batch of matrices read as f64: `batch` dims of `rows`×`cols` matrices, row-major.
struct Mats {
    batch: Vec<usize>,
    rows: usize,
    cols: usize,
    data: Vec<f64>,
    dtype: DType,
}

impl Mats {
    fn count(&self) -> usize {
        self.batch.iter().product()
    }
    fn mat(&self, b: usize) -> &[f64] {
        let s = self.rows * self.cols;
        &self.data[b * s..(b + 1) * s]
    }
    fn sizes(&self, last: &[usize]) -> Vec<usize> {
        [&self.batch[..], last].concat()
    }
}

/// The operation's name as torch spells it in its errors (`linalg.inv`, `cholesky_solve`).
fn api(ctx: &OpCtx) -> String {
    let op = ctx
        .target()
        .trim_start_matches("aten.")
        .split('.')
        .next()
        .unwrap_or("")
        .trim_start_matches('_');
    match op.strip_prefix("linalg_") {
        Some(rest) => format!("linalg.{}", rest.trim_end_matches("_ex")),
        None => op.to_string(),
    }
}

fn need_float(ctx: &OpCtx, t: &Tensor, what: &str) -> Result<()> {
    if !matches!(t.dtype, DType::F32 | DType::F64) {
        return Err(ctx.err(format!(
            "{}: expected {what} to be a float32 or float64 tensor, got {} (shape {:?})",
            api(ctx),
            t.dtype,
            t.sizes
        )));
    }
    Ok(())
}

/// `t` (rank >= 2, float) as matrices, batch dims expanded to `batch` when given.
fn read(ctx: &OpCtx, t: &Tensor, what: &str, batch: Option<&[usize]>) -> Result<Mats> {
    need_float(ctx, t, what)?;
    read_any(ctx, t, what, batch)
}

fn read_any(ctx: &OpCtx, t: &Tensor, what: &str, batch: Option<&[usize]>) -> Result<Mats> {
    if t.rank() < 2 {
        return Err(ctx.err(format!(
            "{}: {what} must have at least 2 dimensions, got shape {:?}",
            api(ctx),
            t.sizes
        )));
    }
    let r = t.rank();
    let (rows, cols) = (t.sizes[r - 2], t.sizes[r - 1]);
    let t = match batch {
        Some(b) if b != &t.sizes[..r - 2] => t.expand_to(&[b, &[rows, cols]].concat())?,
        _ => t.clone(),
    };
    Ok(Mats {
        batch: t.sizes[..r.max(t.rank()) - 2].to_vec(),
        rows,
        cols,
        data: t.to_vec::<f64>(),
        dtype: t.dtype,
    })
}

fn need_square(ctx: &OpCtx, m: &Mats, what: &str) -> Result<()> {
    if m.rows != m.cols {
        return Err(ctx.err(format!(
            "{}: {what} must be batches of square matrices, but they are {} by {} matrices (shape {:?})",
            api(ctx),
            m.rows,
            m.cols,
            m.sizes(&[m.rows, m.cols])
        )));
    }
    Ok(())
}

fn first(ctx: &OpCtx) -> Result<Tensor> {
    let a = ctx
        .arg_at(0)
        .ok_or_else(|| ctx.err("missing the input tensor"))?;
    ctx.tensor_of(a, "A")
}

/// The broadcast of two batch shapes, or an error naming both inputs.
fn batch_of(ctx: &OpCtx, a: &Tensor, b: &Tensor, keep_b: usize) -> Result<Vec<usize>> {
    let ba = &a.sizes[..a.rank().saturating_sub(2)];
    let bb = &b.sizes[..b.rank().saturating_sub(keep_b)];
    broadcast_shapes(ba, bb).ok_or_else(|| {
        ctx.err(format!(
            "{}: the batch dimensions of {:?} and {:?} cannot be broadcast",
            api(ctx),
            a.sizes,
            b.sizes
        ))
    })
}

/// A tensor of `dtype` from f64 values.
fn out(v: Vec<f64>, sizes: &[usize], dtype: DType) -> Result<RValue> {
    let t = Tensor::from_vec(v, sizes);
    Ok(if dtype == DType::F64 {
        t
    } else {
        t.to_dtype(dtype)?
    }
    .into())
}

fn ints(v: Vec<i32>, sizes: &[usize]) -> RValue {
    Tensor::from_vec(v, sizes).into()
}

fn empty(dtype: DType) -> Result<RValue> {
    Ok(Tensor::zeros(dtype, &[0])?.into())
}

/// The value `x` rounded to `dtype` (comparisons made as torch makes them, in that dtype).
fn round(x: f64, dtype: DType) -> f64 {
    if dtype == DType::F32 {
        x as f32 as f64
    } else {
        x
    }
}

fn eps(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        f32::EPSILON as f64
    } else {
        f64::EPSILON
    }
}

// ---------------------------------------------------------------------------------------
// LU

/// LU factors of every matrix: (LU, pivots, info).
fn factor_all(m: &Mats) -> (Vec<f64>, Vec<i32>, Vec<i32>) {
    let (r, c) = (m.rows, m.cols);
    let k = r.min(c);
    let mut lu = m.data.clone();
    let mut piv = Vec::with_capacity(m.count() * k);
    let mut info = Vec::with_capacity(m.count());
    for b in 0..m.count() {
        let (p, i) = dense::getrf(&mut lu[b * r * c..(b + 1) * r * c], r, c);
        piv.extend(p);
        info.push(i);
    }
    (lu, piv, info)
}

fn singular_err(
    ctx: &OpCtx,
    info: &[i32],
    batch: &[usize],
    shape: &[usize],
    what: &str,
) -> Result<()> {
    if let Some((b, &i)) = info.iter().enumerate().find(|(_, &i)| i > 0) {
        let at = if batch.is_empty() {
            String::new()
        } else {
            format!(" (batch element {b})")
        };
        return Err(ctx.err(format!(
            "{}: {what}{at}: the diagonal element {i} is zero, the input of shape {shape:?} is singular",
            api(ctx)
        )));
    }
    Ok(())
}

fn lu_factor(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = first(ctx)?;
    let m = read(ctx, &a, "A", None)?;
    if !ctx.bool_or("pivot", true)? {
        return Err(ctx.err(format!(
            "{}: LU without pivoting is not implemented on the CPU",
            api(ctx)
        )));
    }
    let (lu, piv, info) = factor_all(&m);
    let k = m.rows.min(m.cols);
    let target = ctx.target().to_string();
    let check = if target.contains("linalg_lu_factor_ex") {
        ctx.bool_or("check_errors", false)?
    } else {
        target.contains("linalg_lu_factor.")
    };
    if check {
        singular_err(ctx, &info, &m.batch, &a.sizes, "the factorization found U")?;
    }
    let mut res = vec![out(lu, &a.sizes, m.dtype)?, ints(piv, &m.sizes(&[k]))];
    if !target.contains("linalg_lu_factor.") {
        res.push(ints(info, &m.batch));
    }
    Ok(res)
}

/// A solve's square factors `f` (named `what`) and right-hand sides `b` of the same float
/// dtype, their batch dims broadcast: (batch, factors, right-hand sides).
fn factors_and_rhs(
    ctx: &OpCtx,
    f: &Tensor,
    what: &str,
    b: &Tensor,
) -> Result<(Vec<usize>, Mats, Mats)> {
    need_float(ctx, b, "B")?;
    if f.dtype != b.dtype {
        return Err(ctx.err(format!(
            "{}: {what} and B must have the same dtype, got {} and {}",
            api(ctx),
            f.dtype,
            b.dtype
        )));
    }
    let batch = batch_of(ctx, f, b, 2)?;
    let fm = read(ctx, f, what, Some(&batch))?;
    need_square(ctx, &fm, what)?;
    let bm = read(ctx, b, "B", Some(&batch))?;
    Ok((batch, fm, bm))
}

/// `linalg.ldl_factor(_ex)(A, hermitian, check_errors)`: Bunch-Kaufman LDLᵀ of the lower
/// triangle of each (symmetric) matrix, as LAPACK's `sytrf`: (LD with its strict upper
/// triangle zero, pivots[, info]).
fn ldl_factor(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = ctx.tensor("self")?;
    let m = read(ctx, &a, "A", None)?;
    need_square(ctx, &m, "A")?;
    let n = m.rows;
    let mut ld = m.data.clone();
    let mut piv = Vec::with_capacity(m.count() * n);
    let mut info = Vec::with_capacity(m.count());
    for b in 0..m.count() {
        let mat = &mut ld[b * n * n..(b + 1) * n * n];
        let (p, i) = dense::sytf2_lower(mat, n);
        for r in 0..n {
            mat[r * n + r + 1..(r + 1) * n].fill(0.0);
        }
        piv.extend(p);
        info.push(i);
    }
    let ex = ctx.target().contains("_ex.");
    if !ex || ctx.bool_or("check_errors", false)? {
        singular_err(ctx, &info, &m.batch, &a.sizes, "the factorization found D")?;
    }
    let mut res = vec![out(ld, &a.sizes, m.dtype)?, ints(piv, &m.sizes(&[n]))];
    if ex {
        res.push(ints(info, &m.batch));
    }
    Ok(res)
}

/// `linalg.ldl_solve(LD, pivots, B, hermitian)`: `A X = B` from `ldl_factor`'s results.
fn ldl_solve(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (ld_t, piv_t, b_t) = (ctx.tensor("LD")?, ctx.tensor("pivots")?, ctx.tensor("B")?);
    let (batch, ld, b) = factors_and_rhs(ctx, &ld_t, "LD", &b_t)?;
    let n = ld.rows;
    if b.rows != n {
        return Err(ctx.err(format!(
            "{}: incompatible shapes of LD ({:?}) and B ({:?})",
            api(ctx),
            ld_t.sizes,
            b_t.sizes
        )));
    }
    let piv = pivots_of(ctx, &piv_t, &batch, n)?;
    if piv.iter().any(|&p| p == 0 || p.unsigned_abs() as usize > n) {
        return Err(ctx.err(format!(
            "{}: the pivots hold values outside ±1..={n}",
            api(ctx)
        )));
    }
    let nrhs = b.cols;
    let mut x = b.data.clone();
    for k in 0..b.count() {
        dense::sytrs_lower(
            ld.mat(k),
            &piv[k * n..(k + 1) * n],
            n,
            &mut x[k * n * nrhs..(k + 1) * n * nrhs],
            nrhs,
        );
    }
    Ok(vec![out(x, &b.sizes(&[n, nrhs]), b.dtype)?])
}

/// P, L, U of packed LU factors (`lu_unpack`'s conventions: A = P L U).
fn unpack(lu: &Mats, piv: &[i32], want_lu: bool, want_p: bool) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (m, n) = (lu.rows, lu.cols);
    let k = m.min(n);
    let (mut p, mut l, mut u) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..lu.count() {
        let a = lu.mat(b);
        if want_p {
            let perm = dense::perm_of(&piv[b * k..(b + 1) * k], m);
            let mut pm = vec![0.0; m * m];
            for (i, &pi) in perm.iter().enumerate() {
                pm[pi * m + i] = 1.0;
            }
            p.extend(pm);
        }
        if want_lu {
            for i in 0..m {
                for j in 0..k {
                    l.push(match i.cmp(&j) {
                        std::cmp::Ordering::Greater => a[i * n + j],
                        std::cmp::Ordering::Equal => 1.0,
                        std::cmp::Ordering::Less => 0.0,
                    });
                }
            }
            for i in 0..k {
                for j in 0..n {
                    u.push(if j >= i { a[i * n + j] } else { 0.0 });
                }
            }
        }
    }
    (p, l, u)
}

fn linalg_lu(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = first(ctx)?;
    let mut m = read(ctx, &a, "A", None)?;
    if !ctx.bool_or("pivot", true)? {
        return Err(ctx.err("linalg.lu: LU without pivoting is not implemented on the CPU"));
    }
    let (lu, piv, _) = factor_all(&m);
    m.data = lu;
    let (r, c) = (m.rows, m.cols);
    let k = r.min(c);
    let (p, l, u) = unpack(&m, &piv, true, true);
    Ok(vec![
        out(p, &m.sizes(&[r, r]), m.dtype)?,
        out(l, &m.sizes(&[r, k]), m.dtype)?,
        out(u, &m.sizes(&[k, c]), m.dtype)?,
    ])
}

fn pivots_of(ctx: &OpCtx, t: &Tensor, batch: &[usize], k: usize) -> Result<Vec<i32>> {
    if !matches!(t.dtype, DType::I32 | DType::I64) {
        return Err(ctx.err(format!(
            "{}: the pivots must be an int32 tensor, got {}",
            api(ctx),
            t.dtype
        )));
    }
    let want = [batch, &[k]].concat();
    let t = if t.sizes != want {
        t.expand_to(&want).map_err(|_| {
            ctx.err(format!(
                "{}: pivots of shape {:?} do not match LU factors with batch {batch:?} and {k} pivots",
                api(ctx),
                t.sizes
            ))
        })?
    } else {
        t.clone()
    };
    let v = t.to_vec::<i32>();
    Ok(v)
}

fn lu_unpack(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let lu_t = ctx.tensor("LU_data")?;
    let piv_t = ctx.tensor("LU_pivots")?;
    let want_lu = ctx.bool_or("unpack_data", true)?;
    let want_p = ctx.bool_or("unpack_pivots", true)?;
    let m = read(ctx, &lu_t, "LU_data", None)?;
    let (r, c) = (m.rows, m.cols);
    let k = r.min(c);
    let piv = pivots_of(ctx, &piv_t, &m.batch, k)?;
    for &p in &piv {
        if p < 1 || p as usize > r {
            return Err(ctx.err(format!(
                "lu_unpack: pivot {p} is out of range for {r} rows (LU_data of shape {:?})",
                lu_t.sizes
            )));
        }
    }
    let (p, l, u) = unpack(&m, &piv, want_lu, want_p);
    Ok(vec![
        if want_p {
            out(p, &m.sizes(&[r, r]), m.dtype)?
        } else {
            empty(m.dtype)?
        },
        if want_lu {
            out(l, &m.sizes(&[r, k]), m.dtype)?
        } else {
            empty(m.dtype)?
        },
        if want_lu {
            out(u, &m.sizes(&[k, c]), m.dtype)?
        } else {
            empty(m.dtype)?
        },
    ])
}

/// Solves with packed LU factors: `op(A) X = B` (left) or `X op(A) = B` for every batch.
#[allow(clippy::too_many_arguments)]
fn solve_with_lu(lu: &Mats, piv: &[i32], b: &Mats, left: bool, adjoint: bool) -> Vec<f64> {
    let n = lu.rows;
    let mut res = Vec::with_capacity(b.data.len());
    for i in 0..b.count() {
        let a = lu.mat(i);
        let p = &piv[i * n..(i + 1) * n];
        if left {
            let mut x = b.mat(i).to_vec();
            dense::getrs(a, p, n, &mut x, b.cols, adjoint);
            res.extend(x);
        } else {
            // X op(A) = B  <=>  op(A)ᵀ Xᵀ = Bᵀ.
            let mut x = dense::transpose(b.mat(i), b.rows, b.cols);
            dense::getrs(a, p, n, &mut x, b.rows, !adjoint);
            res.extend(dense::transpose(&x, b.cols, b.rows));
        }
    }
    res
}

fn lu_solve(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let legacy = ctx.target().starts_with("aten.lu_solve");
    let (lu_t, piv_t, b_t) = if legacy {
        (
            ctx.tensor("LU_data")?,
            ctx.tensor("LU_pivots")?,
            ctx.tensor("self")?,
        )
    } else {
        (ctx.tensor("LU")?, ctx.tensor("pivots")?, ctx.tensor("B")?)
    };
    let left = ctx.bool_or("left", true)?;
    let adjoint = ctx.bool_or("adjoint", false)?;
    let (batch, lu, b) = factors_and_rhs(ctx, &lu_t, "LU", &b_t)?;
    let n = lu.rows;
    let inner = if left { b.rows } else { b.cols };
    if inner != n {
        return Err(ctx.err(format!(
            "{}: incompatible shapes of LU ({:?}) and B ({:?})",
            api(ctx),
            lu_t.sizes,
            b_t.sizes
        )));
    }
    let piv_batch = &piv_t.sizes[..piv_t.rank().saturating_sub(1)];
    let piv_full = if piv_batch != batch.as_slice() {
        let pb = broadcast_shapes(piv_batch, &batch).unwrap_or(batch.clone());
        piv_t.expand_to(&[&pb[..], &[n]].concat()).map_err(|_| {
            ctx.err(format!(
                "{}: pivots of shape {:?} do not match LU of shape {:?}",
                api(ctx),
                piv_t.sizes,
                lu_t.sizes
            ))
        })?
    } else {
        piv_t.clone()
    };
    let piv = pivots_of(ctx, &piv_full, &batch, n)?;
    if piv.iter().any(|&p| p < 1 || p as usize > n) {
        return Err(ctx.err(format!(
            "{}: the pivots hold values outside 1..={n}",
            api(ctx)
        )));
    }
    let x = solve_with_lu(&lu, &piv, &b, left, adjoint);
    Ok(vec![out(x, &b.sizes(&[b.rows, b.cols]), b.dtype)?])
}

// ---------------------------------------------------------------------------------------
// Determinants, inverses, solves

/// `A`'s transpose when `A` is contiguous (torch factors Aᵀ then, `_linalg_det`,
/// `_linalg_slogdet` and `_linalg_solve_ex` return those factors).
fn torch_factor_input(a: &Tensor, m: &Mats) -> Mats {
    if !a.is_contiguous() {
        return Mats {
            batch: m.batch.clone(),
            rows: m.rows,
            cols: m.cols,
            data: m.data.clone(),
            dtype: m.dtype,
        };
    }
    let mut data = Vec::with_capacity(m.data.len());
    for b in 0..m.count() {
        data.extend(dense::transpose(m.mat(b), m.rows, m.cols));
    }
    Mats {
        batch: m.batch.clone(),
        rows: m.cols,
        cols: m.rows,
        data,
        dtype: m.dtype,
    }
}

fn det(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = first(ctx)?;
    let m = read(ctx, &a, "A", None)?;
    need_square(ctx, &m, "A")?;
    let f = torch_factor_input(&a, &m);
    let (lu, piv, _) = factor_all(&f);
    let n = m.rows;
    let (mut dets, mut signs, mut logs) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..m.count() {
        let a = &lu[b * n * n..(b + 1) * n * n];
        let p = &piv[b * n..(b + 1) * n];
        let flips = p
            .iter()
            .enumerate()
            .filter(|(i, &q)| q as usize != i + 1)
            .count();
        let mut sign: f64 = if flips % 2 == 1 { -1.0 } else { 1.0 };
        let mut d = sign;
        let mut log = 0.0;
        for i in 0..n {
            let u = a[i * n + i];
            d *= u;
            sign *= u.signum() * if u == 0.0 { 0.0 } else { 1.0 };
            log += u.abs().ln();
        }
        if d.is_nan() || log.is_nan() {
            sign = f64::NAN;
        }
        dets.push(d);
        signs.push(sign);
        logs.push(log);
    }
    let target = ctx.target().to_string();
    let op = target
        .trim_start_matches("aten.")
        .split('.')
        .next()
        .unwrap_or("");
    let bs = m.batch.clone();
    let dt = m.dtype;
    Ok(match op {
        "linalg_det" | "det" => vec![out(dets, &bs, dt)?],
        "logdet" => {
            let v = signs
                .iter()
                .zip(&logs)
                .map(|(&s, &l)| if s < 0.0 || s.is_nan() { f64::NAN } else { l })
                .collect();
            vec![out(v, &bs, dt)?]
        }
        "_linalg_det" => vec![
            out(dets, &bs, dt)?,
            out(lu, &a.sizes, dt)?,
            ints(piv, &m.sizes(&[n])),
        ],
        "_linalg_slogdet" => vec![
            out(signs, &bs, dt)?,
            out(logs, &bs, dt)?,
            out(lu, &a.sizes, dt)?,
            ints(piv, &m.sizes(&[n])),
        ],
        _ => vec![out(signs, &bs, dt)?, out(logs, &bs, dt)?],
    })
}

fn inv(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = first(ctx)?;
    let m = read(ctx, &a, "A", None)?;
    need_square(ctx, &m, "A")?;
    let n = m.rows;
    let (mut x, mut info) = (Vec::with_capacity(m.data.len()), Vec::new());
    for b in 0..m.count() {
        let (xi, i) = dense::inverse(m.mat(b), n);
        x.extend(xi);
        info.push(i);
    }
    let ex = ctx.target().starts_with("aten.linalg_inv_ex");
    if !ex || ctx.bool_or("check_errors", false)? {
        singular_err(
            ctx,
            &info,
            &m.batch,
            &a.sizes,
            "the inversion could not be completed",
        )?;
    }
    let mut res = vec![out(x, &a.sizes, m.dtype)?];
    if ex {
        res.push(ints(info, &m.batch));
    }
    Ok(res)
}

fn solve(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("A")?;
    let b_t = ctx.tensor("B")?;
    let left = ctx.bool_or("left", true)?;
    need_float(ctx, &a_t, "A")?;
    need_float(ctx, &b_t, "B")?;
    if a_t.dtype != b_t.dtype {
        return Err(ctx.err(format!(
            "{}: A and B must have the same dtype, got {} and {}",
            api(ctx),
            a_t.dtype,
            b_t.dtype
        )));
    }
    let am = read(ctx, &a_t, "A", None)?;
    need_square(ctx, &am, "A")?;
    let n = am.rows;
    // A vector B: one dim, or A's shape without its last dim.
    let vector = b_t.rank() == 1
        || (b_t.rank() + 1 == a_t.rank() && b_t.sizes[..] == a_t.sizes[..a_t.rank() - 1]);
    let b2 = if vector {
        let (mut s, mut st) = (b_t.sizes.clone(), b_t.strides.clone());
        let at = if left { s.len() } else { s.len() - 1 };
        s.insert(at, 1);
        st.insert(at, 0);
        b_t.view_with(s, st, b_t.offset)
    } else {
        b_t.clone()
    };
    if b2.rank() < 2 {
        return Err(ctx.err(format!(
            "{}: B must have at least 1 dimension, got shape {:?}",
            api(ctx),
            b_t.sizes
        )));
    }
    let batch = batch_of(ctx, &a_t, &b2, 2)?;
    let b = read(ctx, &b2, "B", Some(&batch))?;
    let inner = if left { b.rows } else { b.cols };
    if inner != n {
        return Err(ctx.err(format!(
            "{}: incompatible shapes of A ({:?}) and B ({:?})",
            api(ctx),
            a_t.sizes,
            b_t.sizes
        )));
    }
    // torch factors Aᵀ (and solves with its adjoint) when A is contiguous.
    let use_t = a_t.is_contiguous();
    let f = torch_factor_input(&a_t, &am);
    let (lu, piv, info) = factor_all(&f);
    let fm = Mats {
        batch: am.batch.clone(),
        rows: n,
        cols: n,
        data: lu.clone(),
        dtype: am.dtype,
    };
    let fb = read(
        ctx,
        &Tensor::from_vec(fm.data.clone(), &fm.sizes(&[n, n])),
        "LU",
        Some(&batch),
    )?;
    let piv_b = {
        let pt = Tensor::from_vec(piv.clone(), &fm.sizes(&[n]));
        pt.expand_to(&[&batch[..], &[n]].concat())?.to_vec::<i32>()
    };
    let x = solve_with_lu(&fb, &piv_b, &b, left, use_t);
    let target = ctx.target().to_string();
    let ex = target.contains("solve_ex");
    if !ex || ctx.bool_or("check_errors", false)? {
        if let Some(&i) = info.iter().find(|&&i| i > 0) {
            return Err(ctx.err(format!(
                "{}: the solver failed because the input A of shape {:?} is singular (the diagonal element {i} of its LU factors is zero)",
                api(ctx),
                a_t.sizes
            )));
        }
    }
    let mut xs = b.sizes(&[b.rows, b.cols]);
    if vector {
        xs.remove(if left { xs.len() - 1 } else { xs.len() - 2 });
    }
    let xv = out(x, &xs, b.dtype)?;
    Ok(if target.starts_with("aten._linalg_solve_ex") {
        vec![
            xv,
            out(lu, &a_t.sizes, am.dtype)?,
            ints(piv, &am.sizes(&[n])),
            ints(info, &am.batch),
        ]
    } else if ex {
        vec![xv, ints(info, &am.batch)]
    } else {
        vec![xv]
    })
}

/// `t`'s dims moved: `dims` to the end (in order), the rest before them.
fn dims_to_end(t: &Tensor, dims: &[usize]) -> Tensor {
    let mut order: Vec<usize> = (0..t.rank()).filter(|d| !dims.contains(d)).collect();
    order.extend_from_slice(dims);
    let sizes = order.iter().map(|&d| t.sizes[d]).collect();
    let strides = order.iter().map(|&d| t.strides[d]).collect();
    t.view_with(sizes, strides, t.offset)
}

fn wrap(ctx: &OpCtx, d: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let w = if d < 0 { d + r } else { d };
    if w < 0 || w >= r.max(1) {
        return Err(ctx.err(format!(
            "{}: dimension {d} is out of range for a tensor of rank {rank}",
            api(ctx)
        )));
    }
    Ok(w as usize)
}

fn square_solve_all(
    ctx: &OpCtx,
    a: &[f64],
    n: usize,
    b: &mut [f64],
    k: usize,
    shape: &[usize],
) -> Result<()> {
    let mut lu = a.to_vec();
    let (piv, info) = dense::getrf(&mut lu, n, n);
    singular_err(ctx, &[info], &[], shape, "the solver failed")?;
    dense::getrs(&lu, &piv, n, b, k, false);
    Ok(())
}

fn tensorsolve(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("self")?;
    let b_t = ctx.tensor("other")?;
    need_float(ctx, &a_t, "A")?;
    need_float(ctx, &b_t, "B")?;
    let a_t = match ctx.opt_ints("dims")? {
        Some(dims) => {
            let d = dims
                .iter()
                .map(|&d| wrap(ctx, d, a_t.rank()))
                .collect::<Result<Vec<_>>>()?;
            dims_to_end(&a_t, &d)
        }
        None => a_t,
    };
    let nb = b_t.rank();
    if nb > a_t.rank() {
        return Err(ctx.err(format!(
            "linalg.tensorsolve: B of shape {:?} has more dims than A of shape {:?}",
            b_t.sizes, a_t.sizes
        )));
    }
    let rows: usize = b_t.sizes.iter().product();
    let out_shape = a_t.sizes[nb..].to_vec();
    let cols: usize = out_shape.iter().product();
    if rows != cols {
        return Err(ctx.err(format!(
            "linalg.tensorsolve: expected prod(A.shape[B.ndim:]) == prod(B.shape), got A {:?} (dims moved) and B {:?}",
            a_t.sizes, b_t.sizes
        )));
    }
    let a = a_t.to_vec::<f64>();
    let mut b = b_t.to_vec::<f64>();
    square_solve_all(ctx, &a, rows, &mut b, 1, &a_t.sizes)?;
    Ok(vec![out(b, &out_shape, a_t.dtype)?])
}

fn tensorinv(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("self")?;
    need_float(ctx, &a_t, "A")?;
    let ind = ctx.int_or("ind", 2)?;
    if ind <= 0 || ind as usize > a_t.rank() {
        return Err(ctx.err(format!(
            "linalg.tensorinv: expected a strictly positive ind of at most A's rank, got {ind} for shape {:?}",
            a_t.sizes
        )));
    }
    let ind = ind as usize;
    let rows: usize = a_t.sizes[..ind].iter().product();
    let cols: usize = a_t.sizes[ind..].iter().product();
    if rows != cols {
        return Err(ctx.err(format!(
            "linalg.tensorinv: expected prod(A.shape[:ind]) == prod(A.shape[ind:]), got A of shape {:?} and ind {ind}",
            a_t.sizes
        )));
    }
    let a = a_t.to_vec::<f64>();
    let mut x = dense::eye(rows);
    square_solve_all(ctx, &a, rows, &mut x, rows, &a_t.sizes)?;
    let shape = [&a_t.sizes[ind..], &a_t.sizes[..ind]].concat();
    Ok(vec![out(x, &shape, a_t.dtype)?])
}

/// Solves `op(T) X = B` (left) or `X op(T) = B` with T triangular, batched.
#[allow(clippy::too_many_arguments)]
fn tri_solve_all(t: &Mats, b: &Mats, upper: bool, trans: bool, unit: bool, left: bool) -> Vec<f64> {
    let n = t.rows;
    let mut res = Vec::with_capacity(b.data.len());
    for i in 0..b.count() {
        if left {
            let mut x = b.mat(i).to_vec();
            dense::trsm(t.mat(i), n, &mut x, b.cols, upper, trans, unit);
            res.extend(x);
        } else {
            let mut x = dense::transpose(b.mat(i), b.rows, b.cols);
            dense::trsm(t.mat(i), n, &mut x, b.rows, upper, !trans, unit);
            res.extend(dense::transpose(&x, b.cols, b.rows));
        }
    }
    res
}

fn check_inner(
    ctx: &OpCtx,
    t: &Mats,
    b: &Mats,
    left: bool,
    ts: &[usize],
    bs: &[usize],
) -> Result<()> {
    let inner = if left { b.rows } else { b.cols };
    if inner != t.rows {
        return Err(ctx.err(format!(
            "{}: incompatible shapes of A ({ts:?}) and B ({bs:?})",
            api(ctx)
        )));
    }
    Ok(())
}

fn triangular_solve(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let b_t = ctx.tensor("self")?;
    let a_t = ctx.tensor("A")?;
    let upper = ctx.bool_or("upper", true)?;
    let trans = ctx.bool_or("transpose", false)?;
    let unit = ctx.bool_or("unitriangular", false)?;
    let batch = batch_of(ctx, &a_t, &b_t, 2)?;
    let t = read(ctx, &a_t, "A", Some(&batch))?;
    need_square(ctx, &t, "A")?;
    let b = read(ctx, &b_t, "B", Some(&batch))?;
    check_inner(ctx, &t, &b, true, &a_t.sizes, &b_t.sizes)?;
    let x = tri_solve_all(&t, &b, upper, trans, unit, true);
    Ok(vec![
        out(x, &b.sizes(&[b.rows, b.cols]), b.dtype)?,
        out(t.data.clone(), &t.sizes(&[t.rows, t.cols]), t.dtype)?,
    ])
}

fn solve_triangular(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("self")?;
    let b_t = ctx.tensor("B")?;
    let upper = ctx.bool_or("upper", false)?;
    let left = ctx.bool_or("left", true)?;
    let unit = ctx.bool_or("unitriangular", false)?;
    let batch = batch_of(ctx, &a_t, &b_t, 2)?;
    let t = read(ctx, &a_t, "A", Some(&batch))?;
    need_square(ctx, &t, "A")?;
    let b = read(ctx, &b_t, "B", Some(&batch))?;
    check_inner(ctx, &t, &b, left, &a_t.sizes, &b_t.sizes)?;
    let x = tri_solve_all(&t, &b, upper, false, unit, left);
    Ok(vec![out(x, &b.sizes(&[b.rows, b.cols]), b.dtype)?])
}

// ---------------------------------------------------------------------------------------
// Cholesky

/// The Cholesky factor (lower, or upper when `upper`: read from and returned as the upper
/// triangle) of each matrix, with LAPACK's info.
fn cholesky_all(m: &Mats, upper: bool) -> (Vec<f64>, Vec<i32>) {
    let n = m.rows;
    let (mut l, mut info) = (Vec::with_capacity(m.data.len()), Vec::new());
    for b in 0..m.count() {
        let a = if upper {
            dense::transpose(m.mat(b), n, n)
        } else {
            m.mat(b).to_vec()
        };
        let (f, i) = dense::potrf(&a, n);
        l.extend(if upper { dense::transpose(&f, n, n) } else { f });
        info.push(i);
    }
    (l, info)
}

fn not_pd(ctx: &OpCtx, info: &[i32], shape: &[usize]) -> Result<()> {
    if let Some(&i) = info.iter().find(|&&i| i > 0) {
        return Err(ctx.err(format!(
            "{}: the factorization could not be completed because the input of shape {shape:?} is not positive-definite (the leading minor of order {i} is not positive-definite)",
            api(ctx)
        )));
    }
    Ok(())
}

fn cholesky(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a = ctx.tensor("self")?;
    let m = read(ctx, &a, "A", None)?;
    need_square(ctx, &m, "A")?;
    let upper = ctx.bool_or("upper", false)?;
    let (l, info) = cholesky_all(&m, upper);
    let ex = ctx.target().starts_with("aten.linalg_cholesky_ex");
    if !ex || ctx.bool_or("check_errors", false)? {
        not_pd(ctx, &info, &a.sizes)?;
    }
    let mut res = vec![out(l, &a.sizes, m.dtype)?];
    if ex {
        res.push(ints(info, &m.batch));
    }
    Ok(res)
}

fn cholesky_solve(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let b_t = ctx.tensor("self")?;
    let l_t = ctx.tensor("input2")?;
    let upper = ctx.bool_or("upper", false)?;
    let batch = batch_of(ctx, &l_t, &b_t, 2)?;
    let l = read(ctx, &l_t, "the Cholesky factor", Some(&batch))?;
    need_square(ctx, &l, "the Cholesky factor")?;
    let b = read(ctx, &b_t, "B", Some(&batch))?;
    check_inner(ctx, &l, &b, true, &l_t.sizes, &b_t.sizes)?;
    let n = l.rows;
    let mut res = Vec::with_capacity(b.data.len());
    for i in 0..b.count() {
        let mut x = b.mat(i).to_vec();
        // A = L Lᵀ (or Uᵀ U): two triangular solves.
        dense::trsm(l.mat(i), n, &mut x, b.cols, upper, upper, false);
        dense::trsm(l.mat(i), n, &mut x, b.cols, upper, !upper, false);
        res.extend(x);
    }
    Ok(vec![out(res, &b.sizes(&[b.rows, b.cols]), b.dtype)?])
}

fn cholesky_inverse(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let l_t = ctx.tensor("self")?;
    let upper = ctx.bool_or("upper", false)?;
    let l = read(ctx, &l_t, "the Cholesky factor", None)?;
    need_square(ctx, &l, "the Cholesky factor")?;
    let n = l.rows;
    let mut res = Vec::with_capacity(l.data.len());
    for i in 0..l.count() {
        let mut x = dense::eye(n);
        dense::trsm(l.mat(i), n, &mut x, n, upper, upper, false);
        dense::trsm(l.mat(i), n, &mut x, n, upper, !upper, false);
        res.extend(x);
    }
    Ok(vec![out(res, &l_t.sizes, l.dtype)?])
}

// ---------------------------------------------------------------------------------------
// QR

fn geqrf_all(m: &Mats) -> (Vec<f64>, Vec<f64>) {
    let (r, c) = (m.rows, m.cols);
    let mut a = m.data.clone();
    let mut tau = Vec::new();
    for b in 0..m.count() {
        tau.extend(dense::geqrf(&mut a[b * r * c..(b + 1) * r * c], r, c));
    }
    (a, tau)
}

fn qr(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("A")?;
    let mode = ctx.opt_str("mode")?.unwrap_or_else(|| "reduced".into());
    let m = read(ctx, &a_t, "A", None)?;
    let (r, c) = (m.rows, m.cols);
    let k = r.min(c);
    let (qcols, rrows) = match mode.as_str() {
        "reduced" => (k, k),
        "complete" => (r, r),
        "r" => (0, k),
        other => {
            return Err(ctx.err(format!(
                "linalg.qr: mode should be 'reduced', 'complete' or 'r', got '{other}'"
            )))
        }
    };
    let (a, tau) = geqrf_all(&m);
    let (mut q, mut rr) = (Vec::new(), Vec::new());
    for b in 0..m.count() {
        let ab = &a[b * r * c..(b + 1) * r * c];
        if mode != "r" {
            q.extend(dense::orgqr(ab, r, c, &tau[b * k..(b + 1) * k], qcols));
        }
        for i in 0..rrows {
            for j in 0..c {
                rr.push(if j >= i && i < r { ab[i * c + j] } else { 0.0 });
            }
        }
    }
    Ok(vec![
        if mode == "r" {
            empty(m.dtype)?
        } else {
            out(q, &m.sizes(&[r, qcols]), m.dtype)?
        },
        out(rr, &m.sizes(&[rrows, c]), m.dtype)?,
    ])
}

fn geqrf(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("self")?;
    let m = read(ctx, &a_t, "A", None)?;
    let (a, tau) = geqrf_all(&m);
    let k = m.rows.min(m.cols);
    Ok(vec![
        out(a, &a_t.sizes, m.dtype)?,
        out(tau, &m.sizes(&[k]), m.dtype)?,
    ])
}

/// `tau` (`[..., k]`) expanded to `batch`, checked against `k <= max_k`.
fn taus(ctx: &OpCtx, t: &Tensor, batch: &[usize], max_k: usize) -> Result<(Vec<f64>, usize)> {
    need_float(ctx, t, "tau")?;
    if t.rank() == 0 {
        return Err(ctx.err(format!("{}: tau must have at least 1 dimension", api(ctx))));
    }
    let k = t.sizes[t.rank() - 1];
    if k > max_k {
        return Err(ctx.err(format!(
            "{}: tau of shape {:?} has more than {max_k} reflectors",
            api(ctx),
            t.sizes
        )));
    }
    let want = [batch, &[k]].concat();
    let e = t.expand_to(&want).map_err(|_| {
        ctx.err(format!(
            "{}: tau of shape {:?} does not match the batch {batch:?}",
            api(ctx),
            t.sizes
        ))
    })?;
    Ok((e.to_vec::<f64>(), k))
}

fn householder_product(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let v_t = first(ctx)?;
    let tau_t = ctx.tensor_of(ctx.arg_at(1).ok_or_else(|| ctx.err("missing tau"))?, "tau")?;
    let m = read(ctx, &v_t, "input", None)?;
    let (r, c) = (m.rows, m.cols);
    if r < c {
        return Err(ctx.err(format!(
            "{}: input must have at least as many rows as columns, got shape {:?}",
            api(ctx),
            v_t.sizes
        )));
    }
    let (tau, k) = taus(ctx, &tau_t, &m.batch, c)?;
    let mut q = Vec::with_capacity(m.data.len());
    for b in 0..m.count() {
        q.extend(dense::orgqr(m.mat(b), r, c, &tau[b * k..(b + 1) * k], c));
    }
    Ok(vec![out(q, &v_t.sizes, m.dtype)?])
}

fn ormqr(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let v_t = ctx.tensor("self")?;
    let tau_t = ctx.tensor("input2")?;
    let c_t = ctx.tensor("input3")?;
    let left = ctx.bool_or("left", true)?;
    let trans = ctx.bool_or("transpose", false)?;
    let batch = batch_of(ctx, &v_t, &c_t, 2)?;
    let v = read(ctx, &v_t, "input", Some(&batch))?;
    let c = read(ctx, &c_t, "other", Some(&batch))?;
    let nq = if left { c.rows } else { c.cols };
    if v.rows != nq {
        return Err(ctx.err(format!(
            "ormqr: input of shape {:?} does not match other of shape {:?} (left={left})",
            v_t.sizes, c_t.sizes
        )));
    }
    let (tau, k) = taus(ctx, &tau_t, &batch, v.cols.min(nq))?;
    let mut res = Vec::with_capacity(c.data.len());
    for b in 0..c.count() {
        let mut x = c.mat(b).to_vec();
        dense::ormqr(
            v.mat(b),
            v.cols,
            &tau[b * k..(b + 1) * k],
            &mut x,
            c.rows,
            c.cols,
            left,
            trans,
        );
        res.extend(x);
    }
    Ok(vec![out(res, &c.sizes(&[c.rows, c.cols]), c.dtype)?])
}

// ---------------------------------------------------------------------------------------
// Eigenvalues and singular values

/// Eigen-decompositions of the symmetric matrices given by one triangle (`upper`).
fn eigh_all(m: &Mats, upper: bool, vectors: bool) -> (Vec<f64>, Vec<f64>) {
    let n = m.rows;
    let (mut w, mut v) = (Vec::new(), Vec::new());
    for b in 0..m.count() {
        let a = m.mat(b);
        let mut s = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                let (p, q) = if (j <= i) != upper { (i, j) } else { (j, i) };
                s[i * n + j] = a[p * n + q];
            }
        }
        let (wi, vi) = dense::eigh(&s, n);
        w.extend(wi);
        if vectors {
            v.extend(vi);
        }
    }
    (w, v)
}

fn uplo(ctx: &OpCtx) -> Result<bool> {
    match ctx.opt_str("UPLO")?.as_deref() {
        None | Some("L") | Some("l") => Ok(false),
        Some("U") | Some("u") => Ok(true),
        Some(o) => Err(ctx.err(format!(
            "{}: UPLO should be 'L' or 'U', got '{o}'",
            api(ctx)
        ))),
    }
}

fn eigh(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = first(ctx)?;
    let m = read(ctx, &a_t, "A", None)?;
    need_square(ctx, &m, "A")?;
    let upper = uplo(ctx)?;
    let target = ctx.target().to_string();
    let vectors = if target.starts_with("aten.linalg_eigvalsh") {
        false
    } else {
        ctx.bool_or("compute_v", true)?
    };
    let (w, v) = eigh_all(&m, upper, vectors);
    let n = m.rows;
    let wv = out(w, &m.sizes(&[n]), m.dtype)?;
    if target.starts_with("aten.linalg_eigvalsh") {
        return Ok(vec![wv]);
    }
    Ok(vec![
        wv,
        if vectors {
            out(v, &a_t.sizes, m.dtype)?
        } else {
            empty(m.dtype)?
        },
    ])
}

/// SVDs of every matrix: U (`m`×`k` or `m`×`m`), S, V (`n`×`k` or `n`×`n`).
fn svd_all(m: &Mats, full: bool) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (r, c) = (m.rows, m.cols);
    let k = r.min(c);
    let (mut us, mut ss, mut vs) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..m.count() {
        let (u, s, v) = dense::svd(m.mat(b), r, c, full);
        // Thin V is n×n from the m >= n path: keep its first k columns.
        let vcols = if full { c } else { k };
        let vn = v.len() / c.max(1);
        let mut vk = Vec::with_capacity(c * vcols);
        for i in 0..c {
            vk.extend_from_slice(&v[i * vn..i * vn + vcols]);
        }
        let ucols = if full { r } else { k };
        let un = u.len() / r.max(1);
        for i in 0..r {
            us.extend_from_slice(&u[i * un..i * un + ucols]);
        }
        ss.extend(s);
        vs.extend(vk);
    }
    (us, ss, vs)
}

fn svals(m: &Mats) -> Vec<f64> {
    let mut s = Vec::new();
    for b in 0..m.count() {
        s.extend(dense::svd(m.mat(b), m.rows, m.cols, false).1);
    }
    s
}

fn svd(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = first(ctx)?;
    let m = read(ctx, &a_t, "A", None)?;
    let (r, c) = (m.rows, m.cols);
    let k = r.min(c);
    let target = ctx.target().to_string();
    let op = target
        .trim_start_matches("aten.")
        .split('.')
        .next()
        .unwrap_or("");
    if op == "linalg_svdvals" {
        return Ok(vec![out(svals(&m), &m.sizes(&[k]), m.dtype)?]);
    }
    let (full, uv) = match op {
        "svd" => (
            !ctx.bool_or("some", true)?,
            ctx.bool_or("compute_uv", true)?,
        ),
        "linalg_svd" => (ctx.bool_or("full_matrices", true)?, true),
        _ => (
            ctx.bool_or("full_matrices", false)?,
            ctx.bool_or("compute_uv", true)?,
        ),
    };
    if !uv {
        let s = out(svals(&m), &m.sizes(&[k]), m.dtype)?;
        return Ok(if op == "svd" {
            vec![
                out(vec![0.0; m.count() * r * r], &m.sizes(&[r, r]), m.dtype)?,
                s,
                out(vec![0.0; m.count() * c * c], &m.sizes(&[c, c]), m.dtype)?,
            ]
        } else {
            vec![empty(m.dtype)?, s, empty(m.dtype)?]
        });
    }
    let (u, s, v) = svd_all(&m, full);
    let (ucols, vcols) = if full { (r, c) } else { (k, k) };
    let third = if op == "svd" {
        out(v, &m.sizes(&[c, vcols]), m.dtype)?
    } else {
        let mut vh = Vec::with_capacity(v.len());
        for b in 0..m.count() {
            vh.extend(dense::transpose(
                &v[b * c * vcols..(b + 1) * c * vcols],
                c,
                vcols,
            ));
        }
        out(vh, &m.sizes(&[vcols, c]), m.dtype)?
    };
    Ok(vec![
        out(u, &m.sizes(&[r, ucols]), m.dtype)?,
        out(s, &m.sizes(&[k]), m.dtype)?,
        third,
    ])
}

/// A tolerance argument (number or tensor) as one value per matrix of `batch`.
fn tol_arg(ctx: &OpCtx, name: &str, batch: &[usize]) -> Result<Option<Vec<f64>>> {
    let Some(a) = ctx.arg(name) else {
        return Ok(None);
    };
    let n: usize = batch.iter().product();
    match a {
        crate::program::Arg::None | crate::program::Arg::OptTensor(None) => Ok(None),
        crate::program::Arg::Tensor(_) | crate::program::Arg::OptTensor(Some(_)) => {
            let t = ctx.tensor_of(a, name)?;
            let e = t.expand_to(batch).map_err(|_| {
                ctx.err(format!(
                    "{}: {name} of shape {:?} does not broadcast to the batch shape {batch:?}",
                    api(ctx),
                    t.sizes
                ))
            })?;
            Ok(Some(e.to_vec::<f64>()))
        }
        other => Ok(Some(vec![ctx.scalar_of(other, name)?.as_f64(); n])),
    }
}

/// Per matrix: (atol, rtol) as torch's `get_atol_rtol` picks them.
fn atol_rtol(ctx: &OpCtx, m: &Mats) -> Result<(Vec<f64>, Vec<f64>)> {
    let n = m.count();
    let default_rtol = eps(m.dtype) * m.rows.max(m.cols) as f64;
    let op = ctx.target().to_string();
    let overload = op.rsplit('.').next().unwrap_or("");
    // (self, float rcond / tol) overloads: atol = 0 and rtol = rcond (pinv) / atol = tol.
    if op.starts_with("aten.pinverse")
        || (op.starts_with("aten.linalg_pinv") && matches!(overload, "default" | "rcond_tensor"))
    {
        let r = tol_arg(ctx, "rcond", &m.batch)?.unwrap_or_else(|| vec![1e-15; n]);
        return Ok((vec![0.0; n], r));
    }
    if op.starts_with("aten.linalg_matrix_rank") && matches!(overload, "default" | "tol_tensor") {
        let t = tol_arg(ctx, "tol", &m.batch)?.unwrap_or_else(|| vec![0.0; n]);
        return Ok((t, vec![0.0; n]));
    }
    let atol = tol_arg(ctx, "atol", &m.batch)?;
    let rtol = tol_arg(ctx, "rtol", &m.batch)?;
    let rt = match (&rtol, &atol) {
        (Some(r), _) => r.clone(),
        (None, Some(a)) => a
            .iter()
            .map(|&x| if x > 0.0 { 0.0 } else { default_rtol })
            .collect(),
        (None, None) => vec![default_rtol; n],
    };
    Ok((atol.unwrap_or_else(|| vec![0.0; n]), rt))
}

fn pinv(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("self")?;
    let m = read(ctx, &a_t, "A", None)?;
    let hermitian = ctx.bool_or("hermitian", false)?;
    let (r, c) = (m.rows, m.cols);
    let (atol, rtol) = atol_rtol(ctx, &m)?;
    let dt = m.dtype;
    let mut res = Vec::with_capacity(m.data.len());
    if hermitian {
        need_square(ctx, &m, "A")?;
        let (w, v) = eigh_all(&m, false, true);
        let n = r;
        for b in 0..m.count() {
            let wb = &w[b * n..(b + 1) * n];
            let vb = &v[b * n * n..(b + 1) * n * n];
            let maxv = wb.iter().map(|x| round(x.abs(), dt)).fold(0.0, f64::max);
            let tol = round(atol[b].max(round(rtol[b] * maxv, dt)), dt);
            let inv: Vec<f64> = wb
                .iter()
                .map(|&x| {
                    if round(x.abs(), dt) > tol {
                        1.0 / x
                    } else {
                        0.0
                    }
                })
                .collect();
            for i in 0..n {
                for j in 0..n {
                    res.push((0..n).map(|k| vb[i * n + k] * inv[k] * vb[j * n + k]).sum());
                }
            }
        }
    } else {
        let k = r.min(c);
        let (u, s, v) = svd_all(&m, false);
        for b in 0..m.count() {
            let sb = &s[b * k..(b + 1) * k];
            let ub = &u[b * r * k..(b + 1) * r * k];
            let vb = &v[b * c * k..(b + 1) * c * k];
            let maxv = round(sb.first().copied().unwrap_or(0.0), dt);
            let tol = round(atol[b].max(round(rtol[b] * maxv, dt)), dt);
            let inv: Vec<f64> = sb
                .iter()
                .map(|&x| if round(x, dt) > tol { 1.0 / x } else { 0.0 })
                .collect();
            // V diag(1/s) Uᵀ: c×r.
            for i in 0..c {
                for j in 0..r {
                    res.push((0..k).map(|q| vb[i * k + q] * inv[q] * ub[j * k + q]).sum());
                }
            }
        }
    }
    Ok(vec![out(res, &m.sizes(&[c, r]), dt)?])
}

fn matrix_rank(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = first(ctx)?;
    let m = read(ctx, &a_t, "A", None)?;
    let hermitian = ctx.bool_or("hermitian", false)?;
    let (atol, rtol) = atol_rtol(ctx, &m)?;
    let dt = m.dtype;
    let vals: Vec<f64> = if hermitian {
        need_square(ctx, &m, "A")?;
        eigh_all(&m, false, false)
            .0
            .iter()
            .map(|x| x.abs())
            .collect()
    } else {
        svals(&m)
    };
    let k = if hermitian {
        m.rows
    } else {
        m.rows.min(m.cols)
    };
    let mut ranks = Vec::with_capacity(m.count());
    for b in 0..m.count() {
        let sb = &vals[b * k..(b + 1) * k];
        let maxv = sb.iter().map(|&x| round(x, dt)).fold(0.0, f64::max);
        let tol = round(atol[b].max(round(rtol[b] * maxv, dt)), dt);
        ranks.push(sb.iter().filter(|&&x| round(x, dt) > tol).count() as i64);
    }
    Ok(vec![Tensor::from_vec(ranks, &m.batch).into()])
}

// ---------------------------------------------------------------------------------------
// Norms, condition numbers

#[derive(Clone, Copy, PartialEq, Debug)]
enum MatOrd {
    Fro,
    Nuc,
    P(f64),
}

fn mat_ord(ctx: &OpCtx, name: &str) -> Result<MatOrd> {
    if let Some(s) = ctx.opt_str(name).ok().flatten() {
        return match s.as_str() {
            "fro" => Ok(MatOrd::Fro),
            "nuc" => Ok(MatOrd::Nuc),
            o => Err(ctx.err(format!(
                "{}: order '{o}' not supported (use 'fro' or 'nuc')",
                api(ctx)
            ))),
        };
    }
    if !ctx.has(name) && ctx.target().ends_with(".str_ord") {
        return Ok(MatOrd::Fro);
    }
    let p = ctx.float(name)?;
    if ![1.0, -1.0, 2.0, -2.0, f64::INFINITY, f64::NEG_INFINITY].contains(&p) {
        return Err(ctx.err(format!(
            "{}: order {p} not supported for a matrix norm (use 1, -1, 2, -2, inf, -inf, 'fro' or 'nuc')",
            api(ctx)
        )));
    }
    Ok(MatOrd::P(p))
}

/// One matrix norm of an `m`×`n` matrix.
fn mat_norm(a: &[f64], m: usize, n: usize, ord: MatOrd) -> f64 {
    match ord {
        MatOrd::Fro => a.iter().map(|x| x * x).sum::<f64>().sqrt(),
        MatOrd::Nuc => dense::svd(a, m, n, false).1.iter().sum(),
        MatOrd::P(p) if p.abs() == 2.0 => {
            let s = dense::svd(a, m, n, false).1;
            if p > 0.0 {
                s.first().copied().unwrap_or(0.0)
            } else {
                s.last().copied().unwrap_or(0.0)
            }
        }
        MatOrd::P(p) => {
            // 1: the largest column sum of |a|; inf: the largest row sum.
            let sums: Vec<f64> = if p.abs() == 1.0 {
                (0..n)
                    .map(|j| (0..m).map(|i| a[i * n + j].abs()).sum())
                    .collect()
            } else {
                (0..m)
                    .map(|i| (0..n).map(|j| a[i * n + j].abs()).sum())
                    .collect()
            };
            if a.iter().any(|x| x.is_nan()) {
                return f64::NAN;
            }
            if p > 0.0 {
                sums.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            } else {
                sums.iter().copied().fold(f64::INFINITY, f64::min)
            }
        }
    }
}

/// `x`'s matrix norm over dims `(d0, d1)`, with torch's output shape.
fn matrix_norm_of(
    ctx: &OpCtx,
    x: &Tensor,
    ord: MatOrd,
    d0: usize,
    d1: usize,
    keepdim: bool,
    dtype: DType,
) -> Result<RValue> {
    if d0 == d1 {
        return Err(ctx.err(format!(
            "{}: dims must be different, got ({d0}, {d1})",
            api(ctx)
        )));
    }
    let v = dims_to_end(x, &[d0, d1]);
    let m = read_any(ctx, &v, "A", None)?;
    let (r, c) = (m.rows, m.cols);
    let needs_nonempty = !matches!(ord, MatOrd::Fro) && (r == 0 || c == 0);
    if needs_nonempty && m.count() > 0 {
        // torch reduces over an empty dim with amax / svd: an error for inf-like orders.
        if !matches!(ord, MatOrd::Nuc) {
            return Err(ctx.err(format!(
                "{}: the norm of order {ord:?} of an empty matrix (shape {:?}) is not defined",
                api(ctx),
                x.sizes
            )));
        }
    }
    let vals: Vec<f64> = (0..m.count())
        .map(|b| mat_norm(m.mat(b), r, c, ord))
        .collect();
    let mut shape = x.sizes.clone();
    if keepdim {
        shape[d0] = 1;
        shape[d1] = 1;
    } else {
        shape = (0..x.rank())
            .filter(|&d| d != d0 && d != d1)
            .map(|d| x.sizes[d])
            .collect();
    }
    out(vals, &shape, dtype)
}

fn norm_input(ctx: &OpCtx, x: &Tensor) -> Result<(Tensor, DType)> {
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(x.dtype);
    need_float(ctx, x, "the input")?;
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(ctx.err(format!("{}: dtype {dtype} is not supported", api(ctx))));
    }
    let x = if dtype != x.dtype {
        x.to_dtype(dtype)?
    } else {
        x.clone()
    };
    Ok((x, dtype))
}

fn matrix_norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let (x, dtype) = norm_input(ctx, &x)?;
    let nuclear = ctx.target().starts_with("aten.nuclear_norm");
    let ord = if nuclear {
        MatOrd::Nuc
    } else {
        mat_ord(ctx, "ord")?
    };
    let dims = ctx
        .opt_ints("dim")?
        .unwrap_or(if nuclear { vec![0, 1] } else { vec![-2, -1] });
    if dims.len() != 2 || x.rank() < 2 {
        return Err(ctx.err(format!(
            "{}: expected two dims and an input of rank >= 2, got dims {dims:?} and shape {:?}",
            api(ctx),
            x.sizes
        )));
    }
    let d0 = wrap(ctx, dims[0], x.rank())?;
    let d1 = wrap(ctx, dims[1], x.rank())?;
    let keepdim = ctx.bool_or("keepdim", false)?;
    Ok(vec![matrix_norm_of(ctx, &x, ord, d0, d1, keepdim, dtype)?])
}

fn vector_norm(v: &[f64], p: f64) -> f64 {
    if v.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    if p == f64::INFINITY {
        v.iter().map(|a| a.abs()).fold(0.0, f64::max)
    } else if p == f64::NEG_INFINITY {
        v.iter().map(|a| a.abs()).fold(f64::INFINITY, f64::min)
    } else if p == 0.0 {
        v.iter().filter(|&&a| a != 0.0).count() as f64
    } else if p == 2.0 {
        v.iter().map(|a| a * a).sum::<f64>().sqrt()
    } else {
        v.iter().map(|a| a.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

fn linalg_norm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let (x, dtype) = norm_input(ctx, &x)?;
    let keepdim = ctx.bool_or("keepdim", false)?;
    let dims = ctx.opt_ints("dim")?;
    let str_ord = ctx.opt_str("ord").ok().flatten();
    let has_ord = str_ord.is_some() || ctx.has("ord");
    if let Some(d) = &dims {
        if d.len() != 1 && d.len() != 2 {
            return Err(ctx.err(format!(
                "linalg.norm: dim must be a 1- or 2-tuple, got {d:?}"
            )));
        }
    } else if has_ord && x.rank() != 1 && x.rank() != 2 {
        return Err(ctx.err(format!(
            "linalg.norm: input must be 1-D or 2-D when dim is None and ord is given, got shape {:?}",
            x.sizes
        )));
    }
    let matrix = str_ord.is_some()
        || (has_ord
            && (dims.as_ref().is_some_and(|d| d.len() == 2) || (dims.is_none() && x.rank() == 2)));
    if matrix {
        let ord = mat_ord(ctx, "ord")?;
        let d = dims.unwrap_or(vec![0, 1]);
        if d.len() != 2 {
            return Err(ctx.err(format!(
                "linalg.norm: a matrix norm needs two dims, got {d:?}"
            )));
        }
        let d0 = wrap(ctx, d[0], x.rank())?;
        let d1 = wrap(ctx, d[1], x.rank())?;
        return Ok(vec![matrix_norm_of(ctx, &x, ord, d0, d1, keepdim, dtype)?]);
    }
    let p = ctx.float_or("ord", 2.0)?;
    let red: Vec<usize> = match dims {
        Some(d) => d
            .iter()
            .map(|&d| wrap(ctx, d, x.rank()))
            .collect::<Result<_>>()?,
        None => (0..x.rank()).collect(),
    };
    let v = dims_to_end(&x, &red);
    let lane: usize = red.iter().map(|&d| x.sizes[d]).product();
    let data = v.to_vec::<f64>();
    let lanes = data.len().checked_div(lane).unwrap_or_else(|| {
        (0..x.rank())
            .filter(|d| !red.contains(d))
            .map(|d| x.sizes[d])
            .product()
    });
    let vals: Vec<f64> = (0..lanes)
        .map(|i| vector_norm(&data[i * lane..(i + 1) * lane], p))
        .collect();
    let shape: Vec<usize> = (0..x.rank())
        .filter_map(|d| {
            if red.contains(&d) {
                keepdim.then_some(1)
            } else {
                Some(x.sizes[d])
            }
        })
        .collect();
    Ok(vec![out(vals, &shape, dtype)?])
}

fn cond(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("self")?;
    let m = read(ctx, &a_t, "A", None)?;
    let ord = if ctx.has("p") {
        mat_ord(ctx, "p")?
    } else {
        MatOrd::P(2.0)
    };
    let (r, c) = (m.rows, m.cols);
    let two = matches!(ord, MatOrd::P(p) if p.abs() == 2.0);
    if !two {
        need_square(ctx, &m, "A")?;
    }
    let mut res = Vec::with_capacity(m.count());
    if r * c == 0 {
        res.resize(m.count(), 0.0);
    } else {
        for b in 0..m.count() {
            let a = m.mat(b);
            res.push(if two {
                let s = dense::svd(a, r, c, false).1;
                let (hi, lo) = (s[0], s[s.len() - 1]);
                if matches!(ord, MatOrd::P(p) if p < 0.0) {
                    lo / hi
                } else {
                    hi / lo
                }
            } else {
                let (inv, info) = dense::inverse(a, r);
                if info > 0 {
                    f64::INFINITY
                } else {
                    mat_norm(a, r, c, ord) * mat_norm(&inv, r, c, ord)
                }
            });
        }
    }
    Ok(vec![out(res, &m.batch, m.dtype)?])
}

// ---------------------------------------------------------------------------------------
// Matrix functions

fn matrix_exp(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("self")?;
    let m = read(ctx, &a_t, "A", None)?;
    need_square(ctx, &m, "A")?;
    let n = m.rows;
    let mut res = Vec::with_capacity(m.data.len());
    for b in 0..m.count() {
        res.extend(dense::expm(m.mat(b), n));
    }
    Ok(vec![out(res, &a_t.sizes, m.dtype)?])
}

fn matrix_power(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let a_t = ctx.tensor("self")?;
    let k = ctx.int("n")?;
    let float = matches!(a_t.dtype, DType::F32 | DType::F64);
    if !float && (k < 0 || !a_t.dtype.is_int()) {
        return Err(ctx.err(format!(
            "{}: expected a float tensor (or an integer one with n >= 0), got {} with n = {k}",
            api(ctx),
            a_t.dtype
        )));
    }
    let m = read_any(ctx, &a_t, "A", None)?;
    need_square(ctx, &m, "A")?;
    let n = m.rows;
    let mut res = Vec::with_capacity(m.data.len());
    for b in 0..m.count() {
        let mut base = m.mat(b).to_vec();
        if k < 0 {
            let (inv, info) = dense::inverse(&base, n);
            singular_err(
                ctx,
                &[info],
                &[],
                &a_t.sizes,
                "the inversion could not be completed",
            )?;
            base = inv;
        }
        let mut e = k.unsigned_abs();
        let mut acc: Option<Vec<f64>> = None;
        while e > 0 {
            if e & 1 == 1 {
                acc = Some(match acc {
                    None => base.clone(),
                    Some(a) => dense::matmul(&a, &base, n, n, n),
                });
            }
            e >>= 1;
            if e > 0 {
                base = dense::matmul(&base, &base, n, n, n);
            }
        }
        res.extend(acc.unwrap_or_else(|| dense::eye(n)));
    }
    let t = Tensor::from_vec(res, &a_t.sizes);
    Ok(vec![if a_t.dtype == DType::F64 {
        t
    } else {
        t.to_dtype(a_t.dtype)?
    }
    .into()])
}
