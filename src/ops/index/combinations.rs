//! `combinations(self, r=2, with_replacement=False)` (`torch.combinations`): the r-element
//! combinations of a 1-D tensor's elements as the rows of a `[count, r]` tensor, in torch's
//! lexicographic order of positions (strictly increasing positions, or non-decreasing ones
//! with replacement); `[0]` for `r = 0`. A gather of the input by positions enumerated here.

use super::index_select_t;
use crate::cpu::Tensor;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use crate::tensor::contiguous_strides;

pub(super) fn register(r: &mut OpTable) {
    r.define("aten.combinations.default", combinations, rule);
}

/// The most result elements (rows x r) one call may make.
const MAX_ELEMENTS: u128 = 1 << 28;

/// The result's rows for `n` elements taken `r` at a time, or why not.
fn count(n: usize, r: usize, with_replacement: bool) -> std::result::Result<usize, String> {
    // C(m, r) with m = n (+ r - 1 with replacement), exactly in u128 while it stays small.
    let m = if with_replacement && n > 0 {
        n.saturating_add(r - 1)
    } else {
        n
    };
    let mut c: u128 = 1;
    if r > m {
        return Ok(0);
    }
    for i in 0..r as u128 {
        c = c * (m as u128 - i) / (i + 1);
        if c * r as u128 > MAX_ELEMENTS {
            return Err(format!(
                "{n} elements taken {r} at a time make more than {MAX_ELEMENTS} result elements"
            ));
        }
    }
    Ok(c as usize)
}

fn args(n: usize, r: i64, with_replacement: bool) -> std::result::Result<(usize, usize), String> {
    let r = usize::try_from(r).map_err(|_| format!("r must be non-negative, got {r}"))?;
    Ok((r, count(n, r, with_replacement)?))
}

fn sizes(r: usize, rows: usize) -> Vec<usize> {
    if r == 0 {
        vec![0]
    } else {
        vec![rows, r]
    }
}

fn combinations(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    if x.rank() != 1 {
        return Err(ctx.err(format!("expected a 1-D input, got shape {:?}", x.sizes)));
    }
    let n = x.sizes[0];
    let with_replacement = ctx.bool_or("with_replacement", false)?;
    let (r, rows) = args(n, ctx.int_or("r", 2)?, with_replacement).map_err(|e| ctx.err(e))?;
    let mut positions: Vec<i64> = Vec::with_capacity(rows * r);
    if r > 0 && rows > 0 {
        // The first combination, then the next in lexicographic order until the last.
        let mut idx: Vec<usize> = if with_replacement {
            vec![0; r]
        } else {
            (0..r).collect()
        };
        loop {
            positions.extend(idx.iter().map(|&i| i as i64));
            // The rightmost position that can still grow, and the ones after it reset.
            let limit = |k: usize| if with_replacement { n - 1 } else { n - r + k };
            let Some(k) = (0..r).rev().find(|&k| idx[k] < limit(k)) else {
                break;
            };
            idx[k] += 1;
            for j in k + 1..r {
                idx[j] = if with_replacement {
                    idx[k]
                } else {
                    idx[j - 1] + 1
                };
            }
        }
    }
    let index = Tensor::from_vec(positions, &[rows * r]);
    let flat = index_select_t(ctx, &x, 0, &index)?;
    let shape = sizes(r, rows);
    let strides = contiguous_strides(&shape);
    Ok(vec![RValue::Tensor(
        flat.contiguous().view_with(shape, strides, 0),
    )])
}

fn rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    if x.rank() != 1 {
        return Err(format!("expected a 1-D input, got shape {:?}", x.sizes));
    }
    let (r, rows) = args(
        x.sizes[0],
        ctx.int_or("r", 2)?,
        ctx.bool_or("with_replacement", false)?,
    )?;
    Ok(vec![MValue::Tensor(x.with_sizes(sizes(r, rows)))])
}
