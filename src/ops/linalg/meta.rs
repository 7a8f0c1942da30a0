//! Rules of the linalg family: square or rectangular matrices in the last two dims, batch
//! dims broadcast between operands, pivots and `info` int32, ranks int64.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::broadcast;

fn t(dtype: DType, sizes: Vec<usize>) -> MValue {
    MValue::Tensor(MetaTensor::new(dtype, sizes))
}

fn op_name(ctx: &MetaCtx) -> String {
    ctx.target()
        .trim_start_matches("aten.")
        .split('.')
        .next()
        .unwrap_or("")
        .to_string()
}

fn first(ctx: &MetaCtx) -> RuleResult<MetaTensor> {
    ctx.first()
}

/// (batch, rows, cols) of a matrix operand.
fn mat(x: &MetaTensor, what: &str) -> RuleResult<(Vec<usize>, usize, usize)> {
    let r = x.rank();
    if r < 2 {
        return Err(format!(
            "{what} must have at least 2 dimensions, got shape {:?}",
            x.sizes
        ));
    }
    Ok((x.sizes[..r - 2].to_vec(), x.sizes[r - 2], x.sizes[r - 1]))
}

fn square(x: &MetaTensor, what: &str) -> RuleResult<(Vec<usize>, usize)> {
    let (b, m, n) = mat(x, what)?;
    if m != n {
        return Err(format!(
            "{what} must be batches of square matrices, got shape {:?}",
            x.sizes
        ));
    }
    Ok((b, n))
}

fn cat(a: &[usize], b: &[usize]) -> Vec<usize> {
    [a, b].concat()
}

/// The first tensor, unchanged.
pub(super) fn same(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = first(ctx)?;
    mat(&x, "the input")?;
    Ok(vec![MValue::Tensor(x)])
}

pub(super) fn lu_factor(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, m, n) = mat(&a, "A")?;
    let mut out = vec![
        t(a.dtype, a.sizes.clone()),
        t(DType::I32, cat(&b, &[m.min(n)])),
    ];
    if !ctx.target().contains("linalg_lu_factor.") {
        out.push(t(DType::I32, b));
    }
    Ok(out)
}

pub(super) fn ldl_factor(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let (b, n) = square(&a, "A")?;
    let mut out = vec![t(a.dtype, a.sizes.clone()), t(DType::I32, cat(&b, &[n]))];
    if ctx.target().contains("_ex.") {
        out.push(t(DType::I32, b));
    }
    Ok(out)
}

pub(super) fn ldl_solve(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let (ld, b) = (ctx.tensor("LD")?, ctx.tensor("B")?);
    let (lb, n) = square(&ld, "LD")?;
    let (bb, r, c) = mat(&b, "B")?;
    if r != n {
        return Err(format!(
            "incompatible shapes of LD ({:?}) and B ({:?})",
            ld.sizes, b.sizes
        ));
    }
    Ok(vec![t(b.dtype, cat(&broadcast(&lb, &bb)?, &[r, c]))])
}

pub(super) fn linalg_lu(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, m, n) = mat(&a, "A")?;
    let k = m.min(n);
    Ok(vec![
        t(a.dtype, cat(&b, &[m, m])),
        t(a.dtype, cat(&b, &[m, k])),
        t(a.dtype, cat(&b, &[k, n])),
    ])
}

pub(super) fn lu_unpack(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("LU_data")?;
    let (b, m, n) = mat(&a, "LU_data")?;
    let k = m.min(n);
    let data = ctx.bool_or("unpack_data", true)?;
    let piv = ctx.bool_or("unpack_pivots", true)?;
    let or_empty = |keep: bool, s: Vec<usize>| t(a.dtype, if keep { s } else { vec![0] });
    Ok(vec![
        or_empty(piv, cat(&b, &[m, m])),
        or_empty(data, cat(&b, &[m, k])),
        or_empty(data, cat(&b, &[k, n])),
    ])
}

pub(super) fn lu_solve(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let (lu, b) = if op_name(ctx) == "lu_solve" {
        (ctx.tensor("LU_data")?, ctx.tensor("self")?)
    } else {
        (ctx.tensor("LU")?, ctx.tensor("B")?)
    };
    let (lb, n) = square(&lu, "LU")?;
    let (bb, r, c) = mat(&b, "B")?;
    let left = ctx.bool_or("left", true)?;
    if (if left { r } else { c }) != n {
        return Err(format!(
            "incompatible shapes of LU ({:?}) and B ({:?})",
            lu.sizes, b.sizes
        ));
    }
    Ok(vec![t(b.dtype, cat(&broadcast(&lb, &bb)?, &[r, c]))])
}

pub(super) fn det(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, n) = square(&a, "A")?;
    let d = a.dtype;
    Ok(match op_name(ctx).as_str() {
        "linalg_det" | "det" | "logdet" => vec![t(d, b)],
        "_linalg_det" => vec![
            t(d, b.clone()),
            t(d, a.sizes.clone()),
            t(DType::I32, cat(&b, &[n])),
        ],
        "_linalg_slogdet" => vec![
            t(d, b.clone()),
            t(d, b.clone()),
            t(d, a.sizes.clone()),
            t(DType::I32, cat(&b, &[n])),
        ],
        _ => vec![t(d, b.clone()), t(d, b)],
    })
}

pub(super) fn inv(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, _) = square(&a, "A")?;
    let mut out = vec![t(a.dtype, a.sizes.clone())];
    if op_name(ctx) == "linalg_inv_ex" {
        out.push(t(DType::I32, b));
    }
    Ok(out)
}

pub(super) fn solve(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("A")?;
    let bt = ctx.tensor("B")?;
    let (ab, n) = square(&a, "A")?;
    let left = ctx.bool_or("left", true)?;
    let vector =
        bt.rank() == 1 || (bt.rank() + 1 == a.rank() && bt.sizes[..] == a.sizes[..a.rank() - 1]);
    let shape = if vector {
        let bb = &bt.sizes[..bt.rank() - 1];
        if bt.sizes[bt.rank() - 1] != n {
            return Err(format!(
                "incompatible shapes of A ({:?}) and B ({:?})",
                a.sizes, bt.sizes
            ));
        }
        cat(&broadcast(&ab, bb)?, &[n])
    } else {
        let (bb, r, c) = mat(&bt, "B")?;
        if (if left { r } else { c }) != n {
            return Err(format!(
                "incompatible shapes of A ({:?}) and B ({:?})",
                a.sizes, bt.sizes
            ));
        }
        cat(&broadcast(&ab, &bb)?, &[r, c])
    };
    let x = t(a.dtype, shape);
    Ok(match op_name(ctx).as_str() {
        "_linalg_solve_ex" => vec![
            x,
            t(a.dtype, a.sizes.clone()),
            t(DType::I32, cat(&ab, &[n])),
            t(DType::I32, ab),
        ],
        "linalg_solve_ex" => vec![x, t(DType::I32, ab)],
        _ => vec![x],
    })
}

fn wrap(d: i64, rank: usize) -> RuleResult<usize> {
    let w = if d < 0 { d + rank as i64 } else { d };
    if w < 0 || w >= rank as i64 {
        return Err(format!("dimension {d} is out of range for rank {rank}"));
    }
    Ok(w as usize)
}

pub(super) fn tensorsolve(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor("other")?;
    let mut sizes = a.sizes.clone();
    if let Some(dims) = ctx.opt_ints("dims")? {
        let d = dims
            .iter()
            .map(|&d| wrap(d, a.rank()))
            .collect::<RuleResult<Vec<_>>>()?;
        sizes = (0..a.rank())
            .filter(|x| !d.contains(x))
            .map(|x| a.sizes[x])
            .collect();
        sizes.extend(d.iter().map(|&x| a.sizes[x]));
    }
    if b.rank() > sizes.len()
        || sizes[b.rank()..].iter().product::<usize>() != b.sizes.iter().product::<usize>()
    {
        return Err(format!(
            "expected prod(A.shape[B.ndim:]) == prod(B.shape), got A {:?} and B {:?}",
            a.sizes, b.sizes
        ));
    }
    Ok(vec![t(a.dtype, sizes[b.rank()..].to_vec())])
}

pub(super) fn tensorinv(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let ind = ctx.int_or("ind", 2)?;
    if ind <= 0 || ind as usize > a.rank() {
        return Err(format!("ind {ind} is out of range for shape {:?}", a.sizes));
    }
    let i = ind as usize;
    Ok(vec![t(a.dtype, cat(&a.sizes[i..], &a.sizes[..i]))])
}

pub(super) fn triangular_solve(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let b = ctx.tensor("self")?;
    let a = ctx.tensor("A")?;
    let (ab, n) = square(&a, "A")?;
    let (bb, r, c) = mat(&b, "B")?;
    if r != n {
        return Err(format!(
            "incompatible shapes of A ({:?}) and B ({:?})",
            a.sizes, b.sizes
        ));
    }
    let batch = broadcast(&ab, &bb)?;
    Ok(vec![
        t(b.dtype, cat(&batch, &[r, c])),
        t(a.dtype, cat(&batch, &[n, n])),
    ])
}

pub(super) fn solve_triangular(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor("B")?;
    let left = ctx.bool_or("left", true)?;
    let (ab, n) = square(&a, "A")?;
    let (bb, r, c) = mat(&b, "B")?;
    if (if left { r } else { c }) != n {
        return Err(format!(
            "incompatible shapes of A ({:?}) and B ({:?})",
            a.sizes, b.sizes
        ));
    }
    Ok(vec![t(b.dtype, cat(&broadcast(&ab, &bb)?, &[r, c]))])
}

pub(super) fn cholesky(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, _) = square(&a, "A")?;
    let mut out = vec![t(a.dtype, a.sizes.clone())];
    if op_name(ctx) == "linalg_cholesky_ex" {
        out.push(t(DType::I32, b));
    }
    Ok(out)
}

pub(super) fn cholesky_solve(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let b = ctx.tensor("self")?;
    let l = ctx.tensor("input2")?;
    let (lb, n) = square(&l, "the Cholesky factor")?;
    let (bb, r, c) = mat(&b, "B")?;
    if r != n {
        return Err(format!(
            "incompatible shapes of L ({:?}) and B ({:?})",
            l.sizes, b.sizes
        ));
    }
    Ok(vec![t(b.dtype, cat(&broadcast(&lb, &bb)?, &[r, c]))])
}

pub(super) fn qr(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("A")?;
    let (b, m, n) = mat(&a, "A")?;
    let k = m.min(n);
    let mode = ctx.opt_str("mode")?.unwrap_or_else(|| "reduced".into());
    Ok(match mode.as_str() {
        "reduced" => vec![t(a.dtype, cat(&b, &[m, k])), t(a.dtype, cat(&b, &[k, n]))],
        "complete" => vec![t(a.dtype, cat(&b, &[m, m])), t(a.dtype, cat(&b, &[m, n]))],
        "r" => vec![t(a.dtype, vec![0]), t(a.dtype, cat(&b, &[k, n]))],
        o => {
            return Err(format!(
                "mode should be 'reduced', 'complete' or 'r', got '{o}'"
            ))
        }
    })
}

pub(super) fn geqrf(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, m, n) = mat(&a, "A")?;
    Ok(vec![
        t(a.dtype, a.sizes.clone()),
        t(a.dtype, cat(&b, &[m.min(n)])),
    ])
}

pub(super) fn ormqr(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let v = ctx.tensor("self")?;
    let c = ctx.tensor("input3")?;
    let (vb, _, _) = mat(&v, "input")?;
    let (cb, r, cc) = mat(&c, "other")?;
    Ok(vec![t(c.dtype, cat(&broadcast(&vb, &cb)?, &[r, cc]))])
}

pub(super) fn eigh(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, n) = square(&a, "A")?;
    let w = t(a.dtype, cat(&b, &[n]));
    Ok(match op_name(ctx).as_str() {
        "linalg_eigvalsh" => vec![w],
        "_linalg_eigh" if !ctx.bool_or("compute_v", true)? => vec![w, t(a.dtype, vec![0])],
        _ => vec![w, t(a.dtype, a.sizes.clone())],
    })
}

pub(super) fn svd(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, m, n) = mat(&a, "A")?;
    let k = m.min(n);
    let d = a.dtype;
    let s = t(d, cat(&b, &[k]));
    let op = op_name(ctx);
    if op == "linalg_svdvals" {
        return Ok(vec![s]);
    }
    let (full, uv) = match op.as_str() {
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
        return Ok(if op == "svd" {
            vec![t(d, cat(&b, &[m, m])), s, t(d, cat(&b, &[n, n]))]
        } else {
            vec![t(d, vec![0]), s, t(d, vec![0])]
        });
    }
    let (uc, vc) = if full { (m, n) } else { (k, k) };
    let third = if op == "svd" {
        t(d, cat(&b, &[n, vc]))
    } else {
        t(d, cat(&b, &[vc, n]))
    };
    Ok(vec![t(d, cat(&b, &[m, uc])), s, third])
}

pub(super) fn pinv(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let (b, m, n) = mat(&a, "A")?;
    Ok(vec![t(a.dtype, cat(&b, &[n, m]))])
}

pub(super) fn matrix_rank(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = first(ctx)?;
    let (b, _, _) = mat(&a, "A")?;
    Ok(vec![t(DType::I64, b)])
}

pub(super) fn cond(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let a = ctx.tensor("self")?;
    let (b, _, _) = mat(&a, "A")?;
    Ok(vec![t(a.dtype, b)])
}

fn reduced(x: &MetaTensor, dims: &[usize], keepdim: bool) -> Vec<usize> {
    (0..x.rank())
        .filter_map(|d| {
            if dims.contains(&d) {
                keepdim.then_some(1)
            } else {
                Some(x.sizes[d])
            }
        })
        .collect()
}

pub(super) fn matrix_norm(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let nuclear = op_name(ctx) == "nuclear_norm";
    let dims = ctx
        .opt_ints("dim")?
        .unwrap_or(if nuclear { vec![0, 1] } else { vec![-2, -1] });
    if dims.len() != 2 || x.rank() < 2 {
        return Err(format!(
            "expected two dims and an input of rank >= 2, got dims {dims:?} and shape {:?}",
            x.sizes
        ));
    }
    let d = [wrap(dims[0], x.rank())?, wrap(dims[1], x.rank())?];
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(x.dtype);
    let keepdim = ctx.bool_or("keepdim", false)?;
    Ok(vec![t(dtype, reduced(&x, &d, keepdim))])
}

pub(super) fn linalg_norm(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let dims: Vec<usize> = match ctx.opt_ints("dim")? {
        Some(d) => d
            .iter()
            .map(|&d| wrap(d, x.rank().max(1)))
            .collect::<RuleResult<_>>()?,
        None => (0..x.rank()).collect(),
    };
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(x.dtype);
    let keepdim = ctx.bool_or("keepdim", false)?;
    Ok(vec![t(dtype, reduced(&x, &dims, keepdim))])
}
