//! Copies that change a tensor's element count or layout: `_chunk_cat` (each tensor split
//! into `num_chunks` chunks along `dim`, zero-padded to equal chunks, the chunks of all
//! tensors concatenated chunk by chunk) and `resize_` / `resize_as_` / `resize` (the
//! leading elements of the input in row-major order, the rest zero where torch leaves
//! memory uninitialized).

use super::{fresh, one};
use crate::cpu::Tensor;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten._chunk_cat.default", chunk_cat, chunk_cat_rule);
    r.define("aten.resize_.default", resize, resize_rule);
    r.define("aten.resize.default", resize, resize_rule);
    r.define("aten.resize_as_.default", resize, resize_rule);
    r.define("aten.resize_as.default", resize, resize_rule);
}

/// The output shape of `_chunk_cat`, the wrapped dim, and per tensor its chunk length along
/// `dim` and its elements per index of `dim` (the trailing dims' product).
type ChunkGeometry = (Vec<usize>, usize, Vec<(usize, usize)>);

fn chunk_geometry(
    shapes: &[Vec<usize>],
    dim: i64,
    num_chunks: i64,
) -> std::result::Result<ChunkGeometry, String> {
    let Some(first) = shapes.first() else {
        return Err("_chunk_cat expects a non-empty list of tensors".into());
    };
    if num_chunks < 1 {
        return Err(format!("num_chunks must be at least 1, got {num_chunks}"));
    }
    let rank = first.len() as i64;
    if rank == 0 {
        return Err("_chunk_cat expects tensors of at least one dimension".into());
    }
    if dim < -rank || dim >= rank {
        return Err(format!(
            "dim {dim} is out of range for tensors of {rank} dimensions"
        ));
    }
    let d = if dim < 0 { dim + rank } else { dim } as usize;
    let k = num_chunks as usize;
    let mut per = Vec::with_capacity(shapes.len());
    let mut width = 0usize;
    for s in shapes {
        if s.len() <= d || s[..d] != first[..d] {
            return Err(format!(
                "_chunk_cat expects tensors with the same sizes before dim {d}, got {first:?} and {s:?}"
            ));
        }
        let chunk = s[d].div_ceil(k);
        let trail: usize = s[d + 1..].iter().product();
        width = width.saturating_add(chunk.saturating_mul(trail));
        per.push((chunk, trail));
    }
    let mut out = first[..d].to_vec();
    out.extend([k, width]);
    Ok((out, d, per))
}

fn chunk_cat_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let ts = ctx.tensors("tensors")?;
    let shapes: Vec<Vec<usize>> = ts.iter().map(|t| t.sizes.clone()).collect();
    let (out, _, _) = chunk_geometry(&shapes, ctx.int("dim")?, ctx.int("num_chunks")?)?;
    if ts.iter().any(|t| t.dtype != ts[0].dtype) {
        return Err("_chunk_cat expects all input tensors with the same dtype".into());
    }
    Ok(vec![MValue::Tensor(ts[0].with_sizes(out))])
}

fn chunk_cat(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let ts = ctx.tensors("tensors")?;
    let shapes: Vec<Vec<usize>> = ts.iter().map(|t| t.sizes.clone()).collect();
    let (out_sizes, d, per) =
        chunk_geometry(&shapes, ctx.int("dim")?, ctx.int("num_chunks")?).map_err(|m| ctx.err(m))?;
    if ts.iter().any(|t| t.dtype != ts[0].dtype) {
        return Err(ctx.err("_chunk_cat expects all input tensors with the same dtype"));
    }
    crate::ops::factory::check_numel(ctx, out_sizes.iter().map(|&s| s as u64).product())?;
    let lead: usize = out_sizes[..d].iter().product();
    let k = out_sizes[d];
    with_dtype!(ts[0].dtype, T => {
        let vals: Vec<Vec<T>> = ts.iter().map(|t| t.to_vec::<T>()).collect();
        let mut out: Vec<T> = Vec::with_capacity(lead * k * out_sizes[d + 1]);
        for l in 0..lead {
            for c in 0..k {
                for ((v, &(chunk, trail)), s) in vals.iter().zip(&per).zip(&shapes) {
                    let n = s[d];
                    for row in c * chunk..(c + 1) * chunk {
                        if row < n {
                            let at = (l * n + row) * trail;
                            out.extend_from_slice(&v[at..at + trail]);
                        } else {
                            out.extend(std::iter::repeat_n(T::default(), trail));
                        }
                    }
                }
            }
        }
        one(Tensor::from_vec(out, &out_sizes))
    }, else Err(ctx.err(format!("dtype {} is not supported", ts[0].dtype))))
}

/// The new sizes: `size`, or the template's.
fn resize_sizes_meta(ctx: &MetaCtx) -> RuleResult<Vec<usize>> {
    if ctx.has("the_template") {
        return Ok(ctx.tensor("the_template")?.sizes);
    }
    ctx.ints("size")?
        .into_iter()
        .map(|s| usize::try_from(s).map_err(|_| format!("negative size {s} in 'size'")))
        .collect()
}

fn resize_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.tensor("self")?;
    Ok(vec![MValue::Tensor(t.with_sizes(resize_sizes_meta(ctx)?))])
}

/// `resize_(self, size)` and its forms: a contiguous tensor of the new size holding self's
/// leading elements (row-major); new elements are zero (torch leaves them uninitialized).
fn resize(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let sizes = if ctx.has("the_template") {
        ctx.tensor("the_template")?.sizes
    } else {
        crate::ops::factory::sizes_arg(ctx, "size")?
    };
    let n: usize = sizes.iter().product();
    if n == t.numel() {
        let c = fresh(&t)?;
        let strides = crate::tensor::contiguous_strides(&sizes);
        return one(c.view_with(sizes, strides, c.offset));
    }
    with_dtype!(t.dtype, T => {
        let mut v = t.to_vec::<T>();
        v.resize(n, T::default());
        one(Tensor::from_vec(v, &sizes))
    }, else Err(ctx.err(format!("dtype {} is not supported", t.dtype))))
}
