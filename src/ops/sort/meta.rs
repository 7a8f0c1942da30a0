//! Rules of the sort family: values keep the input's dtype, indices are int64; `topk` keeps
//! `k` along the dim, `kthvalue`/`median` reduce it, `searchsorted`/`bucketize` have the
//! shape of the values searched for.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::reduce::meta::reduce_shape;

fn pair(v: MetaTensor) -> Vec<MValue> {
    let i = v.with_dtype(DType::I64);
    vec![MValue::Tensor(v), MValue::Tensor(i)]
}

pub(super) fn sort(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let t = ctx.target();
    let dim = if t.starts_with("aten.msort") {
        0
    } else {
        ctx.int_or("dim", -1)?
    };
    ctx.wrap_dim(dim, x.rank())?;
    Ok(if t.starts_with("aten.msort") {
        vec![MValue::Tensor(x)]
    } else if t.starts_with("aten.argsort") {
        vec![MValue::Tensor(x.with_dtype(DType::I64))]
    } else {
        pair(x)
    })
}

pub(super) fn topk(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let k = ctx.int("k")?;
    let dim = ctx.wrap_dim(ctx.int_or("dim", -1)?, x.rank())?;
    let n = x.sizes.get(dim).copied().unwrap_or(1);
    if k < 0 || k as usize > n {
        return Err(format!(
            "selected index k = {k} out of range for a dim of size {n}"
        ));
    }
    let mut s = x.sizes.clone();
    if !s.is_empty() {
        s[dim] = k as usize;
    }
    Ok(pair(x.with_sizes(s)))
}

/// `kthvalue(self, k, dim, keepdim)`, `median.dim`, `nanmedian.dim`; the `.default`
/// medians reduce everything to a 0-d value.
pub(super) fn select_along(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let dim = match ctx.opt_int("dim")? {
        Some(d) => d,
        None if ctx.target().starts_with("aten.kthvalue") => -1,
        None => return Ok(vec![MValue::Tensor(x.with_sizes(vec![]))]),
    };
    let d = ctx.wrap_dim(dim, x.rank())?;
    let keep = ctx.bool_or("keepdim", false)?;
    Ok(pair(x.with_sizes(reduce_shape(&x.sizes, &[d], keep))))
}

pub(super) fn searchsorted(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let sizes = match ctx.arg("self") {
        Some(a) if matches!(a, crate::program::Arg::Tensor(_)) => ctx.tensor_of(a, "self")?.sizes,
        _ => vec![],
    };
    let d = if ctx.bool_or("out_int32", false)? {
        DType::I32
    } else {
        DType::I64
    };
    Ok(vec![MValue::Tensor(MetaTensor::new(d, sizes))])
}
