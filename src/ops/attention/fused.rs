//! `pt2web.fused_attention`: attention as core ATen writes it (`bmm`, a scale, a mask add,
//! `_softmax` or the `_safe_softmax` decomposition, `bmm`, and the views and copies between),
//! recognized by the attention pass (`src/passes/attention.rs`) and made one node. Its
//! arguments:
//!
//! - `inputs`: q `[B, H, L, E]`, k `[B, H, S, E]` (not transposed), v `[B, H, S, Ev]`, then the
//!   additive mask if there is one (broadcast to `[B, H, L, S]`);
//! - `sizes`: the symbolic sizes the body's views read;
//! - `body`: the original nodes as a subgraph over `inputs` then `sizes`; its output is the
//!   attention's `[B, H, L, Ev]`;
//! - `scale`: the product of the scales the body applies (to q, to kᵀ and to the scores);
//! - `safe`: whether a fully masked row gives zeros (the `_safe_softmax` decomposition) or
//!   NaN (`_softmax`).
//!
//! The shape rule runs the body, so the node has exactly the graph's shapes. The CPU kernel
//! runs the fused attention of `scaled_dot_product_attention` ([`super::attend`]: scores,
//! mask and softmax a block of keys at a time) on f32 / f64 q, k, v [B, H, ., .] and a mask of
//! their dtype, and the body otherwise (other dtypes, where the body's per-op rounding is the
//! program's, or `backends::set_attention("math")`). The GPU backend runs the streaming
//! attention kernel on q, k, v and the mask where they lie (one dispatch,
//! `src/gpu/kernels/attention.rs`), or the body where it declines.

use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::{OpCtx, OpTable};
use crate::program::{Arg, Graph, IntArg, Node, ValueId};
use crate::runtime::{run_graph, RValue};

/// The target of a fused attention node.
pub const TARGET: &str = "pt2web.fused_attention.default";

/// A fused attention node's parts.
pub struct Parts<'a> {
    /// q, k, v and the mask (if any).
    pub inputs: &'a [ValueId],
    pub sizes: &'a [IntArg],
    pub body: &'a Graph,
    pub scale: f64,
    pub safe: bool,
}

impl<'a> Parts<'a> {
    pub fn of(node: &'a Node) -> std::result::Result<Parts<'a>, String> {
        let (
            Some(Arg::Tensors(inputs)),
            Some(Arg::SymInts(sizes)),
            Some(Arg::Graph(body)),
            Some(&Arg::Float(scale)),
            Some(&Arg::Bool(safe)),
        ) = (
            node.arg("inputs"),
            node.arg("sizes"),
            node.arg("body"),
            node.arg("scale"),
            node.arg("safe"),
        )
        else {
            return Err(
                "a fused attention node needs its inputs, sizes, body, scale and safe".into(),
            );
        };
        if !(3..=4).contains(&inputs.len()) || body.inputs.len() != inputs.len() + sizes.len() {
            return Err(format!(
                "a fused attention node takes q, k, v and a mask, then its sizes: {} inputs \
                 and {} sizes for a body of {} inputs",
                inputs.len(),
                sizes.len(),
                body.inputs.len()
            ));
        }
        Ok(Parts {
            inputs,
            sizes,
            body,
            scale,
            safe,
        })
    }
}

pub(super) fn register(r: &mut OpTable) {
    r.define(TARGET, run, rule);
}

/// The CPU kernel: the fused attention where it applies, else the body's ops.
fn run(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let parts = Parts::of(ctx.node).map_err(|e| ctx.err(e))?;
    if let Some(out) = fused(ctx, &parts)? {
        return Ok(vec![out.into()]);
    }
    let mut inputs = parts
        .inputs
        .iter()
        .map(|&id| ctx.resolve(&Arg::Tensor(id)))
        .collect::<Result<Vec<_>>>()?;
    for i in parts.sizes {
        inputs.push(ctx.resolve(&Arg::SymInt(i.clone()))?);
    }
    run_graph(parts.body, inputs, ctx.state)
        .map_err(|e| e.within(&ctx.node.target, "in the attention body"))
}

/// The attention of the node's q, k, v and mask in one kernel, or `None` where the body runs.
fn fused(ctx: &mut OpCtx, parts: &Parts) -> Result<Option<Tensor>> {
    if crate::backends::attention() == crate::backends::Attention::Math {
        return Ok(None);
    }
    let ts = parts
        .inputs
        .iter()
        .map(|&id| ctx.resolve(&Arg::Tensor(id)))
        .collect::<Result<Vec<_>>>()?;
    let ts: Vec<&Tensor> = ts.iter().filter_map(|t| t.as_tensor()).collect();
    let [q, k, v, mask @ ..] = ts.as_slice() else {
        return Ok(None);
    };
    if !matches!(q.dtype, DType::F32 | DType::F64)
        || [*k, *v].iter().chain(mask).any(|t| t.dtype != q.dtype)
        || [q, k, v].iter().any(|t| t.rank() != 4)
    {
        return Ok(None);
    }
    let opts = super::Opts::fused(parts.scale, parts.safe);
    let target = ctx.node.target.clone();
    let (out, _) = super::attend(
        &target,
        q,
        k,
        v,
        mask.first().copied(),
        &opts,
        &mut ctx.state.rng,
    )?;
    Ok(Some(out))
}

/// The shape rule: the body's rules.
fn rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let parts = Parts::of(ctx.node)?;
    let mut inputs = parts
        .inputs
        .iter()
        .map(|&id| ctx.resolve(&Arg::Tensor(id)))
        .collect::<RuleResult<Vec<_>>>()?;
    for i in parts.sizes {
        inputs.push(ctx.resolve(&Arg::SymInt(i.clone()))?);
    }
    ctx.run_subgraph(parts.body, inputs)
        .map_err(|e| format!("in the attention body: {e}"))
}
