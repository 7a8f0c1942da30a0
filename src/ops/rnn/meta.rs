//! Rules of the recurrent family: `lstm`/`gru`/`rnn_*` give the sequence output
//! `[T, N, D*Hout]` (`[N, T, ...]` with batch_first, `[T, ...]` unbatched) and the final
//! hidden states in the shapes of the initial ones; the cells give the next hidden state(s).

use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};

pub(super) fn rnn(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let lstm = ctx.target().starts_with("aten.lstm");
    let hx = if lstm {
        ctx.tensors("hx")?
    } else {
        vec![ctx.tensor("hx")?]
    };
    if x.rank() < 2 || x.rank() > 3 || hx.len() != if lstm { 2 } else { 1 } {
        return Err(format!(
            "expected a 2-d or 3-d input and {} hidden state(s), got input {:?}",
            if lstm { 2 } else { 1 },
            x.sizes
        ));
    }
    let h0 = &hx[0];
    let hout = *h0.sizes.last().ok_or("the hidden state is 0-d")?;
    let d = if ctx.bool_or("bidirectional", false)? {
        2
    } else {
        1
    };
    let mut out = x.sizes.clone();
    *out.last_mut().unwrap_or(&mut 0) = d * hout;
    let mut res = vec![MValue::Tensor(MetaTensor::new(x.dtype, out))];
    for h in hx {
        res.push(MValue::Tensor(h.with_dtype(x.dtype)));
    }
    Ok(res)
}

pub(super) fn cell(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("input")?;
    let hx = if ctx.target().starts_with("aten.lstm") {
        ctx.tensors("hx")?
    } else {
        vec![ctx.tensor("hx")?]
    };
    if x.rank() == 0 || x.rank() > 2 {
        return Err(format!("expected a 1-d or 2-d input, got {:?}", x.sizes));
    }
    Ok(hx
        .into_iter()
        .map(|h| MValue::Tensor(h.with_dtype(x.dtype)))
        .collect())
}
