//! Rules of the attention family: `scaled_dot_product_attention` gives `[..., L, Ev]` from
//! query `[..., L, E]`, key `[..., S, E]` and value `[..., S, Ev]`; the CPU flash form adds the
//! log-sum-exp `[..., L]` and the math form the attention weights `[..., L, S]`.

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::broadcast;

pub(super) fn sdpa(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let q = ctx.tensor("query")?;
    let k = ctx.tensor("key")?;
    let v = ctx.tensor("value")?;
    if q.rank() < 2 || k.rank() < 2 || v.rank() < 2 {
        return Err(format!(
            "query, key and value need at least 2 dims, got {:?}, {:?}, {:?}",
            q.sizes, k.sizes, v.sizes
        ));
    }
    let (e, ek) = (q.sizes[q.rank() - 1], k.sizes[k.rank() - 1]);
    let (s, sv) = (k.sizes[k.rank() - 2], v.sizes[v.rank() - 2]);
    if e != ek || s != sv {
        return Err(format!(
            "query {:?}, key {:?} and value {:?} do not fit: query and key need the same \
             embedding size, key and value the same sequence length",
            q.sizes, k.sizes, v.sizes
        ));
    }
    let l = q.sizes[q.rank() - 2];
    // Batch dims broadcast across query, key and value; with grouped-query attention the
    // query's heads decide.
    let qb = &q.sizes[..q.rank() - 2];
    let batch = if ctx.with_op(super::SdpaParams::parse)?.gqa {
        qb.to_vec()
    } else {
        let kv = broadcast(&k.sizes[..k.rank() - 2], &v.sizes[..v.rank() - 2])?;
        broadcast(qb, &kv)?
    };
    let mut out = batch.clone();
    out.extend([l, v.sizes[v.rank() - 1]]);
    let o = MetaTensor::new(q.dtype, out);
    let t = ctx.target();
    if t.starts_with("aten._scaled_dot_product_flash_attention_for_cpu") {
        let lse_dtype = if q.dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let mut ls = batch.clone();
        ls.push(l);
        let lse = MetaTensor::new(lse_dtype, ls);
        return Ok(vec![MValue::Tensor(o), MValue::Tensor(lse)]);
    }
    if t.starts_with("aten._scaled_dot_product_attention_math") {
        let mut w = batch.clone();
        w.extend([l, s]);
        return Ok(vec![
            MValue::Tensor(o),
            MValue::Tensor(MetaTensor::new(q.dtype, w)),
        ]);
    }
    Ok(vec![MValue::Tensor(o)])
}
