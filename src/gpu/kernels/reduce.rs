//! More reductions and the scans (shaders/reduce.wgsl): var / std / var_mean / std_mean,
//! prod, logsumexp, linalg_vector_norm, max / min (all, and `.dim` with indices), argmax /
//! argmin, aminmax, count_nonzero, cumsum / cumprod (f32, and int / bool to an int output),
//! cummax / cummin. f32 data (summed in f32 where the CPU kernel sums in f64), and int data
//! for prod, max / min (and `.dim`, argmax / argmin, aminmax), the scans and cummax /
//! cummin (an output of a small int dtype wraps to it on store, see src/gpu/store.rs);
//! indices are int64 (held as i32).

use super::reduce_ops::{over_parts, PART_LEN};
use super::{grid, ints, norm_dim, pad8, KernelCtx, Out, ReduceMeta};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::GTensor;
use crate::ops::norm::NormParams;
use crate::ops::reduce::Reduction;

op_enum!(
    StatsOp,
    Shader::Reduce,
    "stats",
    "OP",
    [
        Prod = 0,
        LogSumExp = 1,
        Var = 2,
        Std = 3,
        Norm = 4,
        Mean = 5
    ]
);
op_enum!(
    ArgOp,
    Shader::Reduce,
    "arg_reduce",
    "OP",
    [Max = 0, Min = 1]
);
op_enum!(
    ScanOp,
    Shader::Reduce,
    "scan",
    "OP",
    [Sum = 0, Prod = 1, Max = 2, Min = 3, LogSumExp = 4]
);
op_enum!(
    ArgIntOp,
    Shader::Reduce,
    "arg_reduce_i",
    "OP",
    [Max = 0, Min = 1]
);
op_enum!(
    ScanIntOp,
    Shader::Reduce,
    "scan_i",
    "OP",
    [Sum = 0, Prod = 1, Max = 2, Min = 3]
);
pub const COUNT_NZ: Variant = Variant::new(Shader::Reduce, "count_nz");
/// prod of int / bool words (an int output); the other `reduce_i` codes are [`ReduceOp`]'s.
pub const PROD_I: Variant = super::ReduceIntOp::Prod.variant();

pub fn variants() -> Vec<Variant> {
    let mut v: Vec<Variant> = Vec::new();
    v.extend(StatsOp::ALL.iter().map(|o| o.variant()));
    v.extend(ArgOp::ALL.iter().map(|o| o.variant()));
    v.extend(ScanOp::ALL.iter().map(|o| o.variant()));
    v.extend(ArgIntOp::ALL.iter().map(|o| o.variant()));
    v.extend(ScanIntOp::ALL.iter().map(|o| o.variant()));
    v.push(COUNT_NZ);
    v.push(PROD_I);
    v
}

/// The reduction geometry of `x` over the dims in `red`.
pub(super) struct Plan {
    pub(super) meta: ReduceMeta,
    pub(super) out_sizes: Vec<usize>,
    pub(super) n_out: usize,
    pub(super) n_red: usize,
}

pub(super) fn plan(x: &GTensor, red: &[bool], keepdim: bool) -> Plan {
    let r = x.rank();
    let kept: Vec<usize> = (0..r).filter(|&d| !red[d]).collect();
    let rd: Vec<usize> = (0..r).filter(|&d| red[d]).collect();
    let n_red: usize = rd.iter().map(|&d| x.sizes[d]).product();
    let n_out: usize = kept.iter().map(|&d| x.sizes[d]).product();
    let out_sizes: Vec<usize> = if keepdim {
        (0..r)
            .map(|d| if red[d] { 1 } else { x.sizes[d] })
            .collect()
    } else {
        kept.iter().map(|&d| x.sizes[d]).collect()
    };
    let sel = |ds: &[usize], v: &[usize]| -> Vec<usize> { ds.iter().map(|&d| v[d]).collect() };
    let (_, _, row) = grid(n_out, 64);
    let meta = ReduceMeta {
        n_out: n_out as u32,
        n_red: n_red as u32,
        kept_rank: kept.len() as u32,
        red_rank: rd.len() as u32,
        kept_shape: pad8(&sel(&kept, &x.sizes)),
        kept_strides: pad8(&sel(&kept, &x.strides)),
        red_shape: pad8(&sel(&rd, &x.sizes)),
        red_strides: pad8(&sel(&rd, &x.strides)),
        offset: x.offset as u32,
        row,
        scale: 1.0,
        p: 0.0,
        ..Default::default()
    };
    Plan {
        meta,
        out_sizes,
        n_out,
        n_red,
    }
}

/// The reduced dims of the node ([`Reduction`]: the CPU kernels' rule and errors).
fn red_mask(k: &KernelCtx, x: &GTensor) -> crate::error::Result<Vec<bool>> {
    Ok(Reduction::parse(&k.op, x.rank())?.mask)
}

fn f32_in(k: &KernelCtx, x: &GTensor) -> bool {
    x.dtype == DType::F32 && k.fits(x) && x.numel() < u32::MAX as usize
}

/// An int or bool tensor the int kernels can read.
fn word_in(k: &KernelCtx, x: &GTensor) -> bool {
    (ints::is_int(x.dtype) || x.dtype == DType::Bool) && k.fits(x) && x.numel() < u32::MAX as usize
}

/// `meta.p` of an int kernel writing `out`: its small int dtype's wrap code.
fn wrap_code(out: DType) -> f32 {
    f32::from_bits(crate::gpu::store::SmallInt::code(out))
}

/// prod (all, or `.dim_int`) of int / bool words: an int output (int64 by default, wrapping
/// in 32 bits as the other int kernels).
fn int_prod(k: &mut KernelCtx, x: GTensor) -> Out {
    let Some(out_dtype) = k.out_dtype(0).filter(|d| ints::is_int(*d)) else {
        return Ok(None);
    };
    if k.op.opt_dtype("dtype")?.is_some_and(|d| d != out_dtype) {
        return Ok(None);
    }
    let red = red_mask(k, &x)?;
    let mut pl = plan(&x, &red, k.op.bool_or("keepdim", false)?);
    if !stats_fit(k, &pl, StatsOp::Prod) {
        return Ok(None);
    }
    pl.meta.p = wrap_code(out_dtype);
    k.ensure(&x)?;
    let out = k.new_out(out_dtype, &pl.out_sizes)?;
    if pl.n_out > 0 {
        let (gx, gy, _) = grid(pl.n_out, 64);
        let meta = bytemuck::bytes_of(&pl.meta);
        k.dispatch(&PROD_I, meta, &[(3, &out), (4, &x)], (gx, gy, 1))?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// Whether `stats` of `op` over `pl` keeps each thread's loops within
/// [`super::LOOP_BUDGET`]: a thread reduces a whole row, once or twice (`var`, `std`,
/// `logsumexp`), and walks the reduced dims for every element. Longer rows decline the node
/// (its CPU kernel runs) rather than answer with a row cut short.
pub(super) fn stats_fit(k: &KernelCtx, pl: &Plan, op: StatsOp) -> bool {
    let passes = match op {
        StatsOp::Var | StatsOp::Std | StatsOp::LogSumExp => 2,
        _ => 1,
    };
    super::loops_fit(k, pl.n_red * passes, 2 + pl.meta.red_rank as usize)
}

/// var (std with `std`) and mean of `x` over `red` (`pl`: its plan, `pl.meta.scale` the
/// variance's 1 / (n - correction)) for rows too long for `stats` ([`stats_fit`]): the same
/// two passes, each a sum reduced in parts (`dispatch_reduce`), the squared deviations from
/// the mean computed elementwise in between (a NaN mean gives a NaN variance, as `stats`).
pub(super) fn var_in_parts(
    k: &mut KernelCtx,
    x: &GTensor,
    red: &[bool],
    pl: &Plan,
    std: bool,
) -> crate::error::Result<Option<(GTensor, GTensor)>> {
    use super::{reduce_ops::dispatch_reduce, BinaryOp, ReduceOp, UnaryOp};
    let mean = k.new_out(DType::F32, &pl.out_sizes)?;
    let to_mean = ReduceMeta {
        scale: 1.0 / pl.n_red as f32,
        ..pl.meta
    };
    dispatch_reduce(k, to_mean, ReduceOp::Sum, x, &mean, false)?;
    // The mean with the reduced dims kept as 1s, to broadcast against x.
    let kept: Vec<usize> = (x.sizes.iter().zip(red))
        .map(|(&n, &r)| if r { 1 } else { n })
        .collect();
    let sub = BinaryOp::Sub.variant();
    let Some(dev) = ew(k, sub, x, Some(reshape(&mean, &kept)), 1.0, 0.0)? else {
        return Ok(None);
    };
    let Some(sq) = ew(k, UnaryOp::Square.variant(), &dev, None, 1.0, 0.0)? else {
        return Ok(None);
    };
    let to_var = ReduceMeta {
        scale: pl.meta.scale,
        ..plan(&sq, red, false).meta
    };
    let var = k.new_out(DType::F32, &pl.out_sizes)?;
    dispatch_reduce(k, to_var, ReduceOp::Sum, &sq, &var, false)?;
    if !std {
        return Ok(Some((var, mean)));
    }
    let sqrt = UnaryOp::Sqrt.variant();
    Ok(ew(k, sqrt, &var, None, 1.0, 0.0)?.map(|s| (s, mean)))
}

pub(super) fn encode_stats(
    k: &mut KernelCtx,
    x: &GTensor,
    pl: &Plan,
    op: StatsOp,
) -> crate::error::Result<GTensor> {
    let out = k.new_out(DType::F32, &pl.out_sizes)?;
    if pl.n_out > 0 {
        let (gx, gy, _) = grid(pl.n_out, 64);
        k.dispatch(
            &op.variant(),
            bytemuck::bytes_of(&pl.meta),
            &[(1, &out), (2, x)],
            (gx, gy, 1),
        )?;
    }
    Ok(out)
}

/// var / std / var_mean / std_mean (every overload), prod, logsumexp, linalg_vector_norm.
pub(super) fn stats(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    // logsumexp of an int tensor: of its f32 conversion (torch's float result).
    let x = if k.target().starts_with("aten.logsumexp.")
        && (ints::is_int(x.dtype) || x.dtype == DType::Bool)
        && k.out_is(DType::F32)
    {
        match ints::convert(k, &x, DType::F32)?.as_deref() {
            Some([Slot::Tensor(f)]) => f.clone(),
            _ => return Ok(None),
        }
    } else {
        x
    };
    if k.target().starts_with("aten.prod.") && word_in(k, &x) {
        return int_prod(k, x);
    }
    if !f32_in(k, &x) || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let op = k.target().split('.').nth(1).unwrap_or("").to_string();
    if k.op.opt_dtype("dtype")?.is_some_and(|d| d != DType::F32) {
        return Ok(None);
    }
    let red = red_mask(k, &x)?;
    let keepdim = k.op.bool_or("keepdim", false)?;
    let mut pl = plan(&x, &red, keepdim);
    k.ensure(&x)?;
    let sop = match op.as_str() {
        "var" | "std" | "var_mean" | "std_mean" => {
            let correction = match k.op.opt_scalar("correction")? {
                Some(c) => c.as_f64(),
                None => {
                    if k.op.bool_or("unbiased", true)? {
                        1.0
                    } else {
                        0.0
                    }
                }
            };
            pl.meta.scale = (1.0 / (pl.n_red as f64 - correction).max(0.0)) as f32;
            if pl.n_red == 0 {
                return Ok(None);
            }
            let sop = if op.starts_with("std") {
                StatsOp::Std
            } else {
                StatsOp::Var
            };
            if !stats_fit(k, &pl, sop) {
                let Some((v, m)) = var_in_parts(k, &x, &red, &pl, sop == StatsOp::Std)? else {
                    return Ok(None);
                };
                let mut outs = vec![Slot::Tensor(v)];
                if op.ends_with("_mean") {
                    outs.push(Slot::Tensor(m));
                }
                return Ok(Some(outs));
            }
            if op.ends_with("_mean") {
                let v = encode_stats(k, &x, &pl, sop)?;
                let m = encode_stats(k, &x, &pl, StatsOp::Mean)?;
                return Ok(Some(vec![Slot::Tensor(v), Slot::Tensor(m)]));
            }
            sop
        }
        "prod" => StatsOp::Prod,
        "logsumexp" => StatsOp::LogSumExp,
        "linalg_vector_norm" => {
            let p = k.op.float_or("ord", 2.0)?;
            if p.is_infinite() && pl.n_red == 0 {
                return Ok(None);
            }
            pl.meta.p = p as f32;
            StatsOp::Norm
        }
        _ => return Ok(None),
    };
    if !stats_fit(k, &pl, sop) {
        return Ok(None);
    }
    let out = encode_stats(k, &x, &pl, sop)?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// max / min with indices: (values of `x`'s dtype, f32 or int, and int64 indices). Rows
/// longer than [`PART_LEN`] in parts: a value and an index per part, then a `join` pass over
/// each output's parts (see reduce.wgsl).
fn encode_arg(
    k: &mut KernelCtx,
    x: &GTensor,
    pl: &Plan,
    min: bool,
) -> crate::error::Result<(GTensor, GTensor)> {
    let vals = k.new_out(x.dtype, &pl.out_sizes)?;
    let idx = k.new_out(DType::I64, &pl.out_sizes)?;
    if pl.n_out == 0 {
        return Ok((vals, idx));
    }
    let none = no_indices(k)?;
    if pl.n_red <= PART_LEN {
        dispatch_arg(k, pl.meta, [x, &vals, &idx, &none], min)?;
        return Ok((vals, idx));
    }
    let chunks = pl.n_red.div_ceil(PART_LEN);
    let part_vals = k.new_out(x.dtype, &[pl.n_out, chunks])?;
    let part_idx = k.new_out(DType::I64, &[pl.n_out, chunks])?;
    let first = ReduceMeta {
        chunks: chunks as u32,
        chunk_len: PART_LEN as u32,
        ..pl.meta
    };
    dispatch_arg(k, first, [x, &part_vals, &part_idx, &none], min)?;
    let join = ReduceMeta {
        join: 1,
        ..over_parts(pl.n_out, chunks)
    };
    dispatch_arg(k, join, [&part_vals, &vals, &idx, &part_idx], min)?;
    Ok((vals, idx))
}

/// The 1-word stand-in for `part_i` (reduce.wgsl) where a pass has no indices to read.
fn no_indices(k: &mut KernelCtx) -> crate::error::Result<GTensor> {
    k.new_out(DType::I64, &[1])
}

/// One `arg_reduce(_i)` pass of `meta` over `[input, values out, indices out, part_i]`.
fn dispatch_arg(
    k: &mut KernelCtx,
    meta: ReduceMeta,
    [x, vals, idx, part_idx]: [&GTensor; 4],
    min: bool,
) -> crate::error::Result<()> {
    let (gx, gy, row) = grid(meta.n_out as usize * meta.chunks.max(1) as usize, 64);
    let meta = ReduceMeta { row, ..meta };
    let (v, bufs) = if ints::is_int(x.dtype) {
        let op = if min { ArgIntOp::Min } else { ArgIntOp::Max };
        (op.variant(), [(3, vals), (4, x), (5, idx), (6, part_idx)])
    } else {
        let op = if min { ArgOp::Min } else { ArgOp::Max };
        (op.variant(), [(1, vals), (2, x), (3, idx), (6, part_idx)])
    };
    k.dispatch(&v, bytemuck::bytes_of(&meta), &bufs, (gx, gy, 1))
}

/// max.dim / min.dim, argmax / argmin, max.default / min.default, aminmax.
pub(super) fn extreme(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let int_in = ints::is_int(x.dtype) && word_in(k, &x);
    if !(f32_in(k, &x) || int_in) || x.numel() == 0 {
        return Ok(None);
    }
    // The values keep the input's dtype.
    let vd = x.dtype;
    let t = k.target().to_string();
    let op = t.split('.').nth(1).unwrap_or("").to_string();
    let overload = t.rsplit('.').next().unwrap_or("").to_string();
    let min = op.contains("min") && op != "aminmax";
    let keepdim = k.op.bool_or("keepdim", false)?;
    let r = x.rank();
    k.ensure(&x)?;
    match (op.as_str(), overload.as_str()) {
        ("max" | "min", "default") => {
            if !k.out_is(vd) {
                return Ok(None);
            }
            let pl = plan(&x, &vec![true; r], false);
            let (v, _) = encode_arg(k, &x, &pl, min)?;
            Ok(Some(vec![Slot::Tensor(v)]))
        }
        ("max" | "min", "dim") => {
            let Some(d) = norm_dim(k.op.int("dim")?, r) else {
                return Ok(None);
            };
            if r == 0 || !k.out_is(vd) || k.out_dtype(1) != Some(DType::I64) {
                return Ok(None);
            }
            let red: Vec<bool> = (0..r).map(|i| i == d).collect();
            let pl = plan(&x, &red, keepdim);
            let (v, i) = encode_arg(k, &x, &pl, min)?;
            Ok(Some(vec![Slot::Tensor(v), Slot::Tensor(i)]))
        }
        ("argmax" | "argmin", _) => {
            if !k.out_is(DType::I64) {
                return Ok(None);
            }
            let (src, red, sizes) = match k.op.opt_int("dim")? {
                Some(d) => {
                    let Some(d) = norm_dim(d, r) else {
                        return Ok(None);
                    };
                    if r == 0 {
                        return Ok(None);
                    }
                    let red: Vec<bool> = (0..r).map(|i| i == d).collect();
                    (x.clone(), red, None)
                }
                None => {
                    // The flattened tensor in row-major order (kept as a strided view).
                    let sizes = if keepdim { vec![1; r] } else { vec![] };
                    (x.clone(), vec![true; r], Some(sizes))
                }
            };
            let pl = plan(&src, &red, keepdim && sizes.is_none());
            let (_, i) = encode_arg(k, &src, &pl, min)?;
            let i = match sizes {
                Some(s) => {
                    let st = super::contiguous_strides(&s);
                    i.view(s, st, 0)
                }
                None => i,
            };
            Ok(Some(vec![Slot::Tensor(i)]))
        }
        ("aminmax", _) => {
            let red = match k.op.opt_int("dim")? {
                Some(d) => {
                    let Some(d) = norm_dim(d, r) else {
                        return Ok(None);
                    };
                    if r == 0 {
                        return Ok(None);
                    }
                    (0..r).map(|i| i == d).collect()
                }
                None => vec![true; r],
            };
            if !k.out_is(vd) {
                return Ok(None);
            }
            let pl = plan(&x, &red, keepdim);
            let (lo, _) = encode_arg(k, &x, &pl, true)?;
            let (hi, _) = encode_arg(k, &x, &pl, false)?;
            Ok(Some(vec![Slot::Tensor(lo), Slot::Tensor(hi)]))
        }
        _ => Ok(None),
    }
}

/// count_nonzero of an f32 tensor (int64 counts).
pub(super) fn count_nonzero(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if !f32_in(k, &x) || !k.out_is(DType::I64) {
        return Ok(None);
    }
    let red = red_mask(k, &x)?;
    let pl = plan(&x, &red, false);
    // One pass over each row, as a product's.
    if !stats_fit(k, &pl, StatsOp::Prod) {
        return Ok(None);
    }
    k.ensure(&x)?;
    let out = k.new_out(DType::I64, &pl.out_sizes)?;
    if pl.n_out > 0 {
        let (gx, gy, _) = grid(pl.n_out, 64);
        k.dispatch(
            &COUNT_NZ,
            bytemuck::bytes_of(&pl.meta),
            &[(3, &out), (2, &x)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// cumsum / cumprod (f32; int / bool to an int output), cummax / cummin (f32, with indices).
pub(super) fn scan(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let op = k.target().split('.').nth(1).unwrap_or("").to_string();
    // cumsum_ / cumprod_: the scan, then a copy into `self`.
    let inplace = op.ends_with('_');
    let op = op.trim_end_matches('_').to_string();
    if x.rank() == 0 || !k.fits(&x) || x.numel() >= u32::MAX as usize {
        return Ok(None);
    }
    if inplace
        && (k.out_dtype(0) != Some(x.dtype)
            || x.sizes
                .iter()
                .zip(&x.strides)
                .any(|(&n, &s)| n > 1 && s == 0))
    {
        return Ok(None);
    }
    let Some(d) = norm_dim(k.op.int("dim")?, x.rank()) else {
        return Ok(None);
    };
    let ext = op == "cummax" || op == "cummin";
    let Some(out_dtype) = k.out_dtype(0) else {
        return Ok(None);
    };
    let int_mode = x.dtype != DType::F32;
    if int_mode {
        // cummax / cummin of ints: values of the input's dtype.
        if (ext && (out_dtype != x.dtype || k.out_dtype(1) != Some(DType::I64)))
            || !(ints::is_int(x.dtype) || x.dtype == DType::Bool)
            || !ints::is_int(out_dtype)
            || k.op.opt_dtype("dtype")?.is_some_and(|t| t != out_dtype)
        {
            return Ok(None);
        }
    } else if out_dtype != DType::F32
        || (ext && k.out_dtype(1) != Some(DType::I64))
        || (!ext && k.op.opt_dtype("dtype")?.is_some_and(|t| t != DType::F32))
    {
        return Ok(None);
    }
    let Some(xc) = super::contiguous(k, &x)? else {
        return Ok(None);
    };
    let red: Vec<bool> = (0..x.rank()).map(|i| i == d).collect();
    let mut pl = plan(&xc, &red, true);
    let out = k.new_out(out_dtype, &x.sizes)?;
    let idx = if ext {
        Some(k.new_out(DType::I64, &x.sizes)?)
    } else {
        None
    };
    if pl.n_out > 0 && pl.n_red > 0 {
        let v = if int_mode {
            pl.meta.p = wrap_code(out_dtype);
            match op.as_str() {
                "cumprod" => ScanIntOp::Prod,
                "cummax" => ScanIntOp::Max,
                "cummin" => ScanIntOp::Min,
                _ => ScanIntOp::Sum,
            }
            .variant()
        } else {
            match op.as_str() {
                "cumsum" => ScanOp::Sum,
                "cumprod" => ScanOp::Prod,
                "cummax" => ScanOp::Max,
                "logcumsumexp" => ScanOp::LogSumExp,
                _ => ScanOp::Min,
            }
            .variant()
        };
        // The scan entry points declare the index output and `part_i`: 1-word stand-ins
        // where a pass has none (distinct buffers: one is written, the other read).
        let none = no_indices(k)?;
        let no_out = match idx {
            Some(_) => None,
            None => Some(no_indices(k)?),
        };
        let Some(ib) = idx.as_ref().or(no_out.as_ref()) else {
            return Ok(None);
        };
        if pl.n_red <= PART_LEN {
            dispatch_scan(k, &v, pl.meta, [&xc, &out, ib, &none])?;
        } else {
            // In parts: each part scanned on its own into `local`, then joined.
            let chunks = pl.n_red.div_ceil(PART_LEN);
            let local = k.new_out(out_dtype, &x.sizes)?;
            let local_idx = match ext {
                true => k.new_out(DType::I64, &x.sizes)?,
                false => no_indices(k)?,
            };
            let first = ReduceMeta {
                chunks: chunks as u32,
                chunk_len: PART_LEN as u32,
                ..pl.meta
            };
            dispatch_scan(k, &v, first, [&xc, &local, &local_idx, &none])?;
            let join = ReduceMeta {
                join: 1,
                chunk_len: PART_LEN as u32,
                offset: 0,
                ..pl.meta
            };
            dispatch_scan(k, &v, join, [&local, &out, ib, &local_idx])?;
        }
    }
    if inplace {
        super::index::copy_into(k, &out, &x)?;
        crate::gpu::store::lock(&x.cell).cpu_valid = false;
        return Ok(Some(vec![Slot::Tensor(x)]));
    }
    let mut outs = vec![Slot::Tensor(out)];
    if let Some(i) = idx {
        outs.push(Slot::Tensor(i));
    }
    Ok(Some(outs))
}

/// One `scan(_i)` pass (variant `v`) of `meta` over `[input, values out, indices out,
/// part_i]`: a thread per line, per part of a line (`chunks`), or per element (`join`).
fn dispatch_scan(
    k: &mut KernelCtx,
    v: &Variant,
    meta: ReduceMeta,
    [x, out, idx, part_idx]: [&GTensor; 4],
) -> crate::error::Result<()> {
    let threads = match meta.join {
        0 => meta.n_out as usize * meta.chunks.max(1) as usize,
        _ => meta.n_out as usize * meta.n_red as usize,
    };
    let (gx, gy, row) = grid(threads, 64);
    let meta = ReduceMeta { row, ..meta };
    let bufs = if v.entry == "scan_i" {
        [(3, out), (4, x), (5, idx), (6, part_idx)]
    } else {
        [(1, out), (2, x), (3, idx), (6, part_idx)]
    };
    k.dispatch(v, bytemuck::bytes_of(&meta), &bufs, (gx, gy, 1))
}

/// One elementwise f32 op (`b` broadcast against `a`).
fn ew(
    k: &mut KernelCtx,
    v: Variant,
    a: &GTensor,
    b: Option<GTensor>,
    alpha: f32,
    beta: f32,
) -> crate::error::Result<Option<GTensor>> {
    let b = b.map(super::Operand::T);
    super::elementwise(k, v, DType::F32, a, b.as_ref(), None, alpha, beta)
}

/// `t` viewed contiguously as `sizes` (same numel).
fn reshape(t: &GTensor, sizes: &[usize]) -> GTensor {
    t.view(sizes.to_vec(), super::contiguous_strides(sizes), t.offset)
}

/// A per-channel parameter [C] viewed as [C, 1] (to broadcast over [N, C, inner]).
fn per_channel(k: &KernelCtx, name: &str, c: usize) -> Option<Option<GTensor>> {
    if !k.is_tensor_arg(name) {
        return Some(None);
    }
    let p = k.t(name)?;
    if p.dtype != DType::F32 || p.rank() != 1 || p.sizes[0] != c {
        return None;
    }
    Some(Some(p.view(vec![c, 1], vec![p.strides[0], 0], p.offset)))
}

/// group_norm / native_group_norm, and instance_norm with input statistics (no running
/// statistics to update): statistics per (sample, group), then the channel affine.
pub(super) fn group_norm(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let t = k.target().to_string();
    let native = t.starts_with("aten.native_group_norm");
    let instance = t.starts_with("aten.instance_norm");
    if !f32_in(k, &x) || x.rank() < 2 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let (n, c) = (x.sizes[0], x.sizes[1]);
    let p = NormParams::parse(&k.op, x.dtype)?;
    // Normalizing with the running statistics: batch norm in eval mode.
    if instance && !p.use_input_stats {
        return super::norm::batch_norm(k);
    }
    let g = if instance {
        if k.is_tensor_arg("running_mean") || k.is_tensor_arg("running_var") {
            return Ok(None);
        }
        c
    } else {
        p.groups.max(0) as usize
    };
    if g == 0 || c % g != 0 {
        return Ok(None);
    }
    let eps = p.eps as f32;
    let (Some(w), Some(b)) = (per_channel(k, "weight", c), per_channel(k, "bias", c)) else {
        return Ok(None);
    };
    let inner: usize = x.sizes[2..].iter().product();
    let len = c / g * inner;
    if len == 0 || n == 0 || !super::rows_fit(k, len) {
        return Ok(None);
    }
    let Some(xc) = super::contiguous(k, &x)? else {
        return Ok(None);
    };
    // per_channel's [c, 1] views: the [c] vectors themselves, contiguous.
    let mut affine = [None, None];
    for (slot, t) in affine.iter_mut().zip([w, b]) {
        if let Some(t) = t {
            let v = t.view(vec![c], vec![t.strides[0]], t.offset);
            match super::contiguous(k, &v)? {
                Some(t) => *slot = Some(t),
                None => return Ok(None),
            }
        }
    }
    let [wc, bc] = affine;
    // One row per (sample, group): a layer norm over the group's channels, with the affine
    // per channel.
    let out = k.new_out(DType::F32, &x.sizes)?;
    let mean = k.new_out(DType::F32, &[n, g])?;
    let rstd = k.new_out(DType::F32, &[n, g])?;
    let rows = super::norm::RowNorm {
        rows: n * g,
        cols: len,
        eps,
        inner,
        groups: g,
    };
    super::norm::encode_row_norm(
        k,
        &rows,
        crate::gpu::shaders::Elems::F32,
        [&out, &xc],
        wc.as_ref(),
        bc.as_ref(),
        [&mean, &rstd],
    )?;
    if native {
        return Ok(Some(vec![
            Slot::Tensor(out),
            Slot::Tensor(mean),
            Slot::Tensor(rstd),
        ]));
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// rms_norm: x * rsqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape`.
pub(super) fn rms_norm(k: &mut KernelCtx) -> Out {
    use super::{BinaryOp, ReduceOp, UnaryOp};
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    if !f32_in(k, &x) || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let ns = k.op.ints("normalized_shape")?;
    let norm = crate::ops::norm::Normalized::of(&x.sizes, &ns).map_err(|m| k.op.err(m))?;
    if ns.is_empty() {
        return Ok(None);
    }
    let axis = norm.axis;
    let (len, rows) = (norm.len, norm.rows);
    if len == 0 || rows == 0 {
        return Ok(None);
    }
    let w = if k.is_tensor_arg("weight") {
        match k.t("weight") {
            Some(w) if w.dtype == DType::F32 && w.sizes == x.sizes[axis..] => Some(w),
            _ => return Ok(None),
        }
    } else {
        None
    };
    let eps = NormParams::parse(&k.op, x.dtype)?.eps as f32;
    let Some(xc) = super::contiguous(k, &x)? else {
        return Ok(None);
    };
    let x2 = reshape(&xc, &[rows, len]);
    let Some(sq) = ew(k, UnaryOp::Square.variant(), &x2, None, 1.0, 0.0)? else {
        return Ok(None);
    };
    let mut pl = plan(&sq, &[false, true], true);
    pl.meta.scale = 1.0 / len as f32;
    let ms = k.new_out(DType::F32, &pl.out_sizes)?;
    super::reduce_ops::dispatch_reduce(k, pl.meta, ReduceOp::Sum, &sq, &ms, false)?;
    let Some(mse) = ew(k, UnaryOp::Affine.variant(), &ms, None, 1.0, eps)? else {
        return Ok(None);
    };
    let Some(rstd) = ew(k, UnaryOp::Rsqrt.variant(), &mse, None, 1.0, 0.0)? else {
        return Ok(None);
    };
    let Some(mut y) = ew(
        k,
        BinaryOp::Mul.variant(),
        &x2,
        Some(rstd.clone()),
        1.0,
        0.0,
    )?
    else {
        return Ok(None);
    };
    if let Some(w) = w {
        let Some(wc) = super::contiguous(k, &w)? else {
            return Ok(None);
        };
        let wv = reshape(&wc, &[len]);
        match ew(k, BinaryOp::Mul.variant(), &y, Some(wv), 1.0, 0.0)? {
            Some(t) => y = t,
            None => return Ok(None),
        }
    }
    let y = reshape(&y, &x.sizes);
    if !k.target().starts_with("aten._fused_rms_norm.") {
        return Ok(Some(vec![Slot::Tensor(y)]));
    }
    // _fused_rms_norm also returns rstd, with the normalized dims kept as 1s.
    let mut stat_sizes = x.sizes[..axis].to_vec();
    stat_sizes.extend(std::iter::repeat_n(1, x.rank() - axis));
    Ok(Some(vec![
        Slot::Tensor(y),
        Slot::Tensor(reshape(&rstd, &stat_sizes)),
    ]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, all_f32, f32, f32_or_ints, int, On};
    /// Values in the input's dtype (f32 or int), int64 indices.
    fn extremes(i: &[DType], o: &[DType]) -> bool {
        i.len() == 1 && (f32(i[0]) || int(i[0])) && all(o, |d| d == i[0] || d == DType::I64)
    }
    t.kernel(
        &[
            "aten.var",
            "aten.std",
            "aten.var_mean",
            "aten.std_mean",
            "aten.linalg_vector_norm",
        ],
        On::NotOut,
        stats,
        all_f32,
    );
    // The logsumexp of ints is f32.
    t.kernel(
        &["aten.logsumexp"],
        On::NotOut,
        stats,
        super::elementwise::to_float,
    );
    t.kernel(
        &["aten.prod"],
        On::Only(&["dim_int", "default"]),
        stats,
        f32_or_ints,
    );
    t.kernel(
        &["aten.max", "aten.min"],
        On::Only(&["default", "dim"]),
        extreme,
        extremes,
    );
    t.kernel(
        &["aten.argmax", "aten.argmin", "aten.aminmax"],
        On::Only(&["default"]),
        extreme,
        extremes,
    );
    t.kernel(
        &["aten.count_nonzero"],
        On::NotOut,
        count_nonzero,
        |i, o| all(i, f32) && o == [DType::I64],
    );
    t.kernel(
        &[
            "aten.group_norm",
            "aten.native_group_norm",
            "aten.instance_norm",
        ],
        On::Only(&["default"]),
        group_norm,
        all_f32,
    );
    t.kernel(
        &["aten.rms_norm", "aten._fused_rms_norm"],
        On::Only(&["default"]),
        rms_norm,
        all_f32,
    );
    let scans = On::Only(&["default"]);
    t.kernel(
        &[
            "aten.cumsum",
            "aten.cumprod",
            "aten.cumsum_",
            "aten.cumprod_",
        ],
        scans,
        scan,
        f32_or_ints,
    );
    t.kernel(&["aten.cummax", "aten.cummin"], scans, scan, extremes);
    t.kernel(&["aten.logcumsumexp"], scans, scan, all_f32);
}
