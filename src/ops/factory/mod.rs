//! Op family: factories. Constant-filled tensors (full, zeros, ones, empty, the `_like` and
//! `new_` forms, scalar_tensor, empty_strided), ranges (arange, linspace, logspace), eye; the
//! random factories and dropout live in `random`.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

pub(crate) mod random;

use super::elementwise::convert::{layout_for, materialize};
use super::elementwise::engine::scalar_full;
use super::{OpCtx, OpTable, Scalar};
use crate::cpu::{cast, Tensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::program::Arg;
use crate::runtime::RValue;
use crate::with_dtype;

pub(crate) fn register(r: &mut OpTable) {
    meta::register(r);
    r.define_op("aten.arange", arange, meta::arange);
    r.define_op("aten.full", full, meta::sized);
    r.define_op("aten.zeros", full, meta::sized);
    r.define_op("aten.ones", full, meta::sized);
    r.define_op("aten.empty", full, meta::sized);
    r.define_op("aten.new_full", full, meta::sized);
    r.define_op("aten.new_zeros", full, meta::sized);
    r.define_op("aten.new_ones", full, meta::sized);
    r.define_op("aten.new_empty", full, meta::sized);
    r.define_op("aten.new_empty_strided", empty_strided, meta::sized);
    r.define_op("aten.full_like", full_like, meta::like);
    r.define_op("aten.zeros_like", full_like, meta::like);
    r.define_op("aten.ones_like", full_like, meta::like);
    r.define_op("aten.empty_like", full_like, meta::like);
    r.define_op("aten.empty_strided", empty_strided, meta::sized);
    r.define_op("aten.empty_permuted", empty_permuted, meta::empty_permuted);
    r.define_op("aten.scalar_tensor", scalar_tensor, meta::scalar_tensor);
    // What core ATen's `where` with a number operand decomposes into.
    r.define_op("prims.scalar_tensor", scalar_tensor, meta::scalar_tensor);
    r.define_op("aten.linspace", linspace, meta::linspace);
    r.define_op("aten.logspace", linspace, meta::linspace);
    r.define_op("aten.eye", eye, meta::eye);
    random::register(r);
}

/// The `size` argument as checked dimensions: non-negative, and no more elements than the
/// runtime is willing to allocate for one tensor.
pub(crate) fn sizes_arg(ctx: &OpCtx, name: &str) -> Result<Vec<usize>> {
    let v = ctx.ints(name)?;
    let mut out = Vec::with_capacity(v.len());
    let mut numel: u64 = 1;
    for &s in &v {
        if s < 0 {
            return Err(ctx.err(format!("negative dimension {s} in '{name}' {v:?}")));
        }
        numel = numel.saturating_mul(s as u64);
        out.push(s as usize);
    }
    check_numel(ctx, numel)?;
    Ok(out)
}

/// Refuse a tensor of `numel` elements before it is allocated: more elements than
/// [`Limits::max_tensor_elements`], or more bytes than [`Limits::max_tensor_bytes`] at one
/// byte per element (every dtype has at least one; [`check_alloc`] counts the dtype's).
pub(crate) fn check_numel(ctx: &OpCtx, numel: u64) -> Result<()> {
    check_bytes(ctx, numel, numel)
}

/// [`check_numel`] for a tensor of `dtype`, its bytes counted exactly.
pub(crate) fn check_alloc(ctx: &OpCtx, numel: u64, dtype: DType) -> Result<()> {
    check_bytes(ctx, numel, numel.saturating_mul(dtype.size() as u64))
}

fn check_bytes(ctx: &OpCtx, numel: u64, bytes: u64) -> Result<()> {
    let Limits {
        max_tensor_elements,
        max_tensor_bytes,
        ..
    } = ctx.state.limits;
    let made_by = |what: &str, limit: &str| {
        format!(
            "the {what} of a tensor made by node '{}' ({}) ({limit})",
            ctx.node.name, ctx.node.target
        )
    };
    if numel > max_tensor_elements {
        return Err(Error::limit(
            made_by("elements", "Limits::max_tensor_elements"),
            numel,
            max_tensor_elements,
        ));
    }
    if bytes > max_tensor_bytes {
        return Err(Error::limit(
            made_by("bytes", "Limits::max_tensor_bytes"),
            bytes,
            max_tensor_bytes,
        ));
    }
    Ok(())
}

/// The dtype torch infers for a fill value: bool, int64, or the default float32.
fn dtype_of(s: Scalar) -> DType {
    match s {
        Scalar::Bool(_) => DType::Bool,
        Scalar::Int(_) => DType::I64,
        Scalar::Float(_) => DType::F32,
    }
}

fn one(t: Tensor) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Tensor(t)])
}

/// The op name without namespace and overload (`aten.new_zeros.default` -> `new_zeros`).
fn op_name<'a>(ctx: &'a OpCtx) -> &'a str {
    ctx.target().split('.').nth(1).unwrap_or("")
}

/// full/zeros/ones/empty and their `new_` forms (which default to `self`'s dtype).
fn full(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let name = op_name(ctx).to_string();
    let sizes = sizes_arg(ctx, "size")?;
    let value = match name.trim_start_matches("new_") {
        "full" => ctx.scalar("fill_value")?,
        "ones" => Scalar::Int(1),
        _ => Scalar::Int(0),
    };
    let default = if name.starts_with("new_") {
        ctx.tensor("self")?.dtype
    } else if name == "full" {
        dtype_of(value)
    } else {
        DType::F32
    };
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(default);
    check_alloc(ctx, sizes.iter().map(|&s| s as u64).product(), dtype)?;
    one(scalar_full(dtype, &sizes, value)?)
}

/// full_like/zeros_like/ones_like/empty_like: `self`'s shape, dtype (unless given) and, as
/// torch's `preserve_format`, its dense layout.
fn full_like(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let value = match op_name(ctx) {
        "full_like" => ctx.scalar("fill_value")?,
        "ones_like" => Scalar::Int(1),
        _ => Scalar::Int(0),
    };
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(t.dtype);
    let values = scalar_full(dtype, &t.sizes, value)?;
    let strides = layout_for(ctx, &t);
    one(if strides.is_some() {
        materialize(&values, dtype, strides)?
    } else {
        values
    })
}

/// empty_strided: zeros laid out with the requested strides (storage covering every
/// addressed element), so `as_strided` views of it see torch's layout.
fn empty_strided(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let sizes = sizes_arg(ctx, "size")?;
    let strides: Vec<i64> = ctx.ints("stride")?;
    if strides.len() != sizes.len() || strides.iter().any(|&s| s < 0) {
        return Err(ctx.err(format!("invalid strides {strides:?} for sizes {sizes:?}")));
    }
    let default = if op_name(ctx).starts_with("new_") {
        ctx.tensor("self")?.dtype
    } else {
        DType::F32
    };
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(default);
    let strides: Vec<usize> = strides.iter().map(|&s| s as usize).collect();
    let storage = if sizes.contains(&0) {
        0
    } else {
        1 + sizes
            .iter()
            .zip(&strides)
            .map(|(&n, &s)| (n as u64 - 1).saturating_mul(s as u64))
            .fold(0u64, |a, b| a.saturating_add(b))
    };
    check_alloc(ctx, storage, dtype)?;
    let base = Tensor::zeros(dtype, &[storage as usize])?;
    one(base.view_with(sizes, strides, 0))
}

/// empty_permuted: zeros whose memory order of dims is `physical_layout` (outermost first).
fn empty_permuted(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let sizes = sizes_arg(ctx, "size")?;
    let perm = ctx.ints("physical_layout")?;
    let mut seen = vec![false; sizes.len()];
    let valid = perm.len() == sizes.len()
        && perm.iter().all(|&p| {
            p >= 0 && (p as usize) < sizes.len() && !std::mem::replace(&mut seen[p as usize], true)
        });
    if !valid {
        return Err(ctx.err(format!(
            "physical_layout {perm:?} is not a permutation of the {} dims",
            sizes.len()
        )));
    }
    let mut strides = vec![0; sizes.len()];
    let mut acc = 1;
    for &p in perm.iter().rev() {
        strides[p as usize] = acc;
        acc *= sizes[p as usize].max(1);
    }
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
    let n: usize = sizes.iter().product();
    one(Tensor::zeros(dtype, &[n])?.view_with(sizes, strides, 0))
}

fn scalar_tensor(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let s = ctx.scalar("s")?;
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
    one(scalar_full(dtype, &[], s)?)
}

/// arange: int64 unless any bound is a float (then float32); values `start + i * step`
/// computed in f64 (torch's accumulate type) for floats and exactly for integers.
fn arange(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let end = ctx.scalar("end")?;
    let start = ctx.opt_scalar("start")?.unwrap_or(Scalar::Int(0));
    let step = ctx.opt_scalar("step")?.unwrap_or(Scalar::Int(1));
    let any_float = [start, end, step]
        .iter()
        .any(|s| matches!(s, Scalar::Float(_)));
    let dtype = ctx
        .opt_dtype("dtype")?
        .unwrap_or(if any_float { DType::F32 } else { DType::I64 });
    let (s, e, st) = (start.as_f64(), end.as_f64(), step.as_f64());
    if st == 0.0 {
        return Err(ctx.err("step must be nonzero"));
    }
    if !s.is_finite() || !e.is_finite() {
        return Err(ctx.err(format!("unsupported range: {s} -> {e}")));
    }
    if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
        return Err(ctx.err("upper bound and larger bound inconsistent with step sign"));
    }
    let int_args = |x: Scalar| match x {
        Scalar::Int(i) => Some(i),
        Scalar::Bool(b) => Some(b as i64),
        Scalar::Float(_) => None,
    };
    let ints = match (int_args(start), int_args(end), int_args(step)) {
        (Some(a), Some(b), Some(c)) if !dtype.is_float() => Some((a, b, c)),
        _ => None,
    };
    let n = match ints {
        // torch: (end - start + step - sign(step)) / step in integer arithmetic.
        Some((a, b, c)) => (b as i128 - a as i128 + c as i128 - c.signum() as i128) / c as i128,
        None => ((e - s) / st).ceil() as i128,
    }
    .max(0) as u64;
    check_numel(ctx, n)?;
    let n = n as usize;
    let t = match ints {
        Some((a, _, c)) => {
            with_dtype!(dtype, T => Tensor::from_vec((0..n).map(|i| cast::<i64, T>(a.wrapping_add(c.wrapping_mul(i as i64)))).collect(), &[n]),
            else return Err(ctx.err(format!("dtype {dtype} is not supported"))))
        }
        None => {
            with_dtype!(dtype, T => Tensor::from_vec((0..n).map(|i| cast::<f64, T>(s + st * i as f64)).collect(), &[n]),
            else return Err(ctx.err(format!("dtype {dtype} is not supported"))))
        }
    };
    one(t)
}

/// A number that may arrive as a 0-d tensor (`linspace.Tensor_Tensor`).
fn number(ctx: &OpCtx, name: &str) -> Result<f64> {
    match ctx.arg(name) {
        Some(Arg::Tensor(_)) => {
            let t = ctx.tensor(name)?;
            if t.numel() != 1 {
                return Err(ctx.err(format!(
                    "'{name}' must be a 0-dimensional tensor, got shape {:?}",
                    t.sizes
                )));
            }
            Ok(t.item_f64())
        }
        _ => ctx.float(name),
    }
}

/// linspace (and logspace = base ** linspace), torch's kernel: the first half counts up
/// from `start`, the second half down from `end`, so both ends are exact. Floats compute
/// in their own precision (f16/bf16 in f32), integers in f64 then truncate.
fn linspace(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (start, end) = (number(ctx, "start")?, number(ctx, "end")?);
    let steps = ctx.int("steps")?;
    if steps < 0 {
        return Err(ctx.err("number of steps must be non-negative"));
    }
    check_numel(ctx, steps as u64)?;
    let log_base = if op_name(ctx) == "logspace" {
        Some(ctx.float_or("base", 10.0)?)
    } else {
        None
    };
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
    let n = steps as usize;
    let half = n / 2;
    let vals: Vec<f64> = if n == 1 {
        vec![start]
    } else if dtype == DType::F64 || !dtype.is_float() {
        let step = if n > 1 {
            (end - start) / (n - 1) as f64
        } else {
            0.0
        };
        (0..n)
            .map(|i| {
                if i < half {
                    start + step * i as f64
                } else {
                    end - step * (n - i - 1) as f64
                }
            })
            .collect()
    } else {
        let (s, e) = (start as f32, end as f32);
        let step = if n > 1 { (e - s) / (n - 1) as f32 } else { 0.0 };
        (0..n).map(|i| if i < half { s + step * i as f32 } else { e - step * (n - i - 1) as f32 } as f64).collect()
    };
    let vals = match log_base {
        Some(b) => vals.into_iter().map(|v| b.powf(v)).collect(),
        None => vals,
    };
    one(Tensor::from_vec(vals, &[n]).to_dtype(dtype)?)
}

fn eye(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let n = ctx.int("n")?;
    let m = ctx.opt_int("m")?.unwrap_or(n);
    if n < 0 || m < 0 {
        return Err(ctx.err(format!("n and m must be non-negative, got {n} and {m}")));
    }
    check_numel(ctx, (n as u64).saturating_mul(m as u64))?;
    let (n, m) = (n as usize, m as usize);
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(DType::F32);
    let t = with_dtype!(dtype, T => {
        let mut v = vec![cast::<i64, T>(0); n * m];
        for i in 0..n.min(m) {
            v[i * m + i] = cast::<i64, T>(1);
        }
        Tensor::from_vec(v, &[n, m])
    }, else return Err(ctx.err(format!("dtype {dtype} is not supported"))));
    one(t)
}
