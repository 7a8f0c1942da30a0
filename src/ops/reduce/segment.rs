//! `segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
//! unsafe=False, initial=None)`: consecutive segments of `data` along `axis` (given by
//! their `lengths` or by `offsets`) reduced by sum, prod, mean, max or min. As torch's CPU
//! kernel: each segment starts from `initial` (else the reduction's identity), accumulates in
//! the data's dtype, NaN propagates through max/min, an empty mean is NaN unless `initial`
//! is given, and a mean divides the total (initial included) by the segment's length.

use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::runtime::RValue;
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.segment_reduce.default", segment_reduce, segment_rule);
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Sum,
    Prod,
    Mean,
    Max,
    Min,
}

fn op_of(s: &str) -> std::result::Result<Op, String> {
    Ok(match s {
        "sum" => Op::Sum,
        "prod" => Op::Prod,
        "mean" => Op::Mean,
        "max" => Op::Max,
        "min" => Op::Min,
        other => {
            return Err(format!(
                "reduce must be sum, prod, mean, max or min, got '{other}'"
            ))
        }
    })
}

fn segment_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let data = ctx.tensor("data")?;
    op_of(&ctx.opt_str("reduce")?.unwrap_or_default())?;
    let axis = ctx.wrap_dim(ctx.int_or("axis", 0)?, data.rank())?;
    let segments = match (ctx.opt_tensor("lengths")?, ctx.opt_tensor("offsets")?) {
        (Some(l), _) => l.sizes.last().copied().unwrap_or(1),
        (None, Some(o)) => o.sizes.last().copied().unwrap_or(1).saturating_sub(1),
        (None, None) => return Err("segment_reduce needs 'lengths' or 'offsets'".into()),
    };
    let mut s = data.sizes.clone();
    if !s.is_empty() {
        s[axis] = segments;
    }
    Ok(vec![MValue::Tensor(data.with_sizes(s))])
}

fn segment_reduce(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let data = ctx.tensor("data")?;
    let op = op_of(&ctx.opt_str("reduce")?.unwrap_or_default()).map_err(|m| ctx.err(m))?;
    if data.rank() == 0 {
        return Err(ctx.err("data must have at least one dimension"));
    }
    let axis = crate::ops::util::wrap_dim(ctx, ctx.int_or("axis", 0)?, data.rank())?;
    let initial = ctx.opt_float("initial")?;
    let (outer, n, inner) = super::split_at_dim(&data.sizes, axis);
    // Per outer row: the (start, end) of each segment.
    let (bounds_t, is_offsets) = match (ctx.opt_tensor("lengths")?, ctx.opt_tensor("offsets")?) {
        (Some(l), _) => (l, false),
        (None, Some(o)) => (o, true),
        (None, None) => return Err(ctx.err("segment_reduce needs 'lengths' or 'offsets'")),
    };
    let per = bounds_t.sizes.last().copied().unwrap_or(1);
    let rows = bounds_t.numel() / per.max(1);
    if rows != 1 && rows != outer {
        return Err(ctx.err(format!(
            "the segment tensor {:?} must have the data's dims before axis {axis} ({:?}) as its leading dims",
            bounds_t.sizes,
            &data.sizes[..axis]
        )));
    }
    let b = crate::ops::shape::index_values(ctx, &bounds_t, "lengths")?;
    let segments = if is_offsets {
        per.saturating_sub(1)
    } else {
        per
    };
    let seg = |o: usize, s: usize| -> Result<(usize, usize)> {
        let row = &b[(o % rows) * per..(o % rows + 1) * per];
        let (start, end) = if is_offsets {
            (row[s], row[s + 1])
        } else {
            let start = row[..s].iter().fold(0i64, |a, &l| a.saturating_add(l));
            (start, start.saturating_add(row[s]))
        };
        if start < 0 || end < start || end as usize > n {
            return Err(ctx.err(format!(
                "segment {s} spans [{start}, {end}), outside the {n} elements along axis {axis} (lengths must be non-negative and sum to at most {n})"
            )));
        }
        Ok((start as usize, end as usize))
    };
    let mut sizes = data.sizes.clone();
    sizes[axis] = segments;
    with_dtype!(data.dtype, T => {
        let v = data.to_vec::<T>();
        let r = |x: f64| T::from_f64(x).to_f64();
        let mut out = vec![T::default(); outer * segments * inner];
        for o in 0..outer {
            for s in 0..segments {
                let (start, end) = seg(o, s)?;
                for i in 0..inner {
                    let mut acc = match (initial, op) {
                        (Some(x), _) => r(x),
                        (None, Op::Max) => f64::NEG_INFINITY,
                        (None, Op::Min) => f64::INFINITY,
                        (None, Op::Prod) => 1.0,
                        (None, _) => 0.0,
                    };
                    for k in start..end {
                        let x = v[(o * n + k) * inner + i].to_f64();
                        acc = match op {
                            Op::Sum | Op::Mean => r(acc + x),
                            Op::Prod => r(acc * x),
                            Op::Max if x.is_nan() => x,
                            Op::Min if x.is_nan() => x,
                            Op::Max => acc.max(x),
                            Op::Min => acc.min(x),
                        };
                    }
                    let len = end - start;
                    if op == Op::Mean {
                        if len == 0 && initial.is_none() {
                            acc = f64::NAN;
                        } else if len > 0 && !acc.is_nan() {
                            acc = r(acc / len as f64);
                        }
                    }
                    out[(o * segments + s) * inner + i] = T::from_f64(acc);
                }
            }
        }
        Ok(vec![Tensor::from_vec(out, &sizes).into()])
    }, else Err(ctx.err(format!("dtype {} is not supported", data.dtype))))
}
