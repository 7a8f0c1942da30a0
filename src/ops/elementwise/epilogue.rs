//! `pt2web.fused_epilogue`: a matrix product or convolution (the producer) and the
//! elementwise ops that read its result (the epilogue: bias, activation, residual add,
//! scaling), made one node by the epilogue pass (`src/passes/epilogue.rs`). Its arguments:
//!
//! - `inputs`: the producer's tensors, then the epilogue's tensors from outside (a residual);
//! - `sizes`: the symbolic sizes the producer's reshapes read (often none);
//! - `producer`: a subgraph of the producer node (and the reshapes of its result that core
//!   ATen writes around a batched `linear`) over the first `inputs`, then `sizes`;
//! - `epilogue`: a subgraph over the producer's result and the other `inputs`: one
//!   elementwise op, or one `pt2web.fused_elementwise` node of a chain.
//!
//! Every backend can run the two subgraphs one after the other, and the CPU kernel and the
//! shape rule do. The GPU backend runs the producer's kernel with the epilogue's ops applied
//! to each result before it is stored (`src/gpu/kernels/epilogue.rs`): one dispatch, and the
//! producer's result never goes to memory.

use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::{OpCtx, OpTable};
use crate::program::{Arg, Graph, IntArg, Node, ValueId};
use crate::runtime::{run_graph, RValue};

/// The target of a fused epilogue node.
pub const TARGET: &str = "pt2web.fused_epilogue.default";

/// The targets whose kernels can apply an epilogue (`aten.NAME.default`).
pub const PRODUCERS: &[&str] = &[
    "convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "addmm",
    "mm",
    "bmm",
    "matmul",
    "linear",
];

/// A fused epilogue node's parts.
pub struct Parts<'a> {
    /// All outside tensors: the producer's, then the epilogue's.
    pub inputs: &'a [ValueId],
    /// The symbolic sizes the producer's subgraph takes after its tensors.
    pub sizes: &'a [IntArg],
    pub producer: &'a Graph,
    pub epilogue: &'a Graph,
}

impl<'a> Parts<'a> {
    pub fn of(node: &'a Node) -> std::result::Result<Parts<'a>, String> {
        let (
            Some(Arg::Tensors(inputs)),
            Some(Arg::SymInts(sizes)),
            Some(Arg::Graph(producer)),
            Some(Arg::Graph(epilogue)),
        ) = (
            node.arg("inputs"),
            node.arg("sizes"),
            node.arg("producer"),
            node.arg("epilogue"),
        )
        else {
            return Err(
                "a fused epilogue node needs its inputs, sizes, producer and epilogue".into(),
            );
        };
        let Some(n) = producer.inputs.len().checked_sub(sizes.len()) else {
            return Err("a fused epilogue's producer takes fewer inputs than its sizes".into());
        };
        if n > inputs.len() || epilogue.inputs.len() != inputs.len() - n + 1 {
            return Err(format!(
                "a fused epilogue node's subgraphs take {} and {} inputs, it has {}",
                n,
                epilogue.inputs.len(),
                inputs.len()
            ));
        }
        Ok(Parts {
            inputs,
            sizes,
            producer,
            epilogue,
        })
    }
    /// How many of `inputs` the producer reads.
    fn producer_tensors(&self) -> usize {
        self.producer.inputs.len() - self.sizes.len()
    }
    /// The producer's outside tensors.
    pub fn producer_inputs(&self) -> &'a [ValueId] {
        &self.inputs[..self.producer_tensors()]
    }
    /// The epilogue's outside tensors (after the producer's result).
    pub fn extra_inputs(&self) -> &'a [ValueId] {
        &self.inputs[self.producer_tensors()..]
    }
}

pub(super) fn register(r: &mut OpTable) {
    r.define(TARGET, run, rule);
}

/// The CPU kernel: the producer, then the epilogue.
fn run(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let parts = Parts::of(ctx.node).map_err(|e| ctx.err(e))?;
    let resolve = |ctx: &OpCtx, ids: &[ValueId]| {
        ids.iter()
            .map(|&id| ctx.resolve(&Arg::Tensor(id)))
            .collect::<Result<Vec<_>>>()
    };
    let mut pins = resolve(ctx, parts.producer_inputs())?;
    for i in parts.sizes {
        pins.push(ctx.resolve(&Arg::SymInt(i.clone()))?);
    }
    let mut eins = run_graph(parts.producer, pins, ctx.state)
        .map_err(|e| ctx.err(format!("in the producer: {e}")))?;
    eins.truncate(1);
    eins.extend(resolve(ctx, parts.extra_inputs())?);
    run_graph(parts.epilogue, eins, ctx.state).map_err(|e| ctx.err(format!("in the epilogue: {e}")))
}

/// The shape rule: the producer's rule, then the epilogue's.
fn rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let parts = Parts::of(ctx.node)?;
    let resolve = |ctx: &MetaCtx, ids: &[ValueId]| {
        ids.iter()
            .map(|&id| ctx.resolve(&Arg::Tensor(id)))
            .collect::<RuleResult<Vec<_>>>()
    };
    let mut pins = resolve(ctx, parts.producer_inputs())?;
    for i in parts.sizes {
        pins.push(ctx.resolve(&Arg::SymInt(i.clone()))?);
    }
    let mut eins = ctx
        .run_subgraph(parts.producer, pins)
        .map_err(|e| format!("in the producer: {e}"))?;
    eins.truncate(1);
    eins.extend(resolve(ctx, parts.extra_inputs())?);
    ctx.run_subgraph(parts.epilogue, eins)
        .map_err(|e| format!("in the epilogue: {e}"))
}
