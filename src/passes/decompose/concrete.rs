//! Decompositions of nodes with symbolic sizes, at run time: a composite node the load-time
//! rewrite left (its sizes are only known per call) runs as its decomposition for the
//! concrete shapes of each call, on the CPU kernels (`OpTable` entries registered here, so
//! a GPU session runs it as a CPU fallback) and on the meta device. The decomposition is
//! the same function the load-time rewrite calls; the graph it builds is small and is
//! planned on each call, apart from the session's plans (which are kept by graph address).

use super::{decompose, lookup, DResult};
use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::{OpCtx, OpTable};
use crate::program::{Arg, Dim, Graph, IntArg, Node, Value, ValueId, ValueKind};
use crate::runtime::RValue;

/// Register the run-time decomposition of every decomposed target (CPU kernel and shape
/// rule), except where a family already registered a kernel of its own (it serves symbolic
/// sizes directly: `max_pool2d_with_indices_backward`).
pub(crate) fn register(r: &mut OpTable) {
    for (t, _) in super::table() {
        if r.cpu_kernel(t).is_none() {
            r.define(t, run, rule);
        }
    }
}

/// What a value read by the node is in this call.
enum Known {
    Tensor(DType, Vec<usize>),
    Int(i64),
}

/// The node's decomposition for this call's shapes: a graph whose inputs are the tensors
/// the node reads (ids in the node's graph, in the graph's input order) and whose outputs
/// are the node's.
fn concrete(
    g: &Graph,
    node: &Node,
    known: &dyn Fn(ValueId) -> Option<Known>,
) -> DResult<(Graph, Vec<ValueId>)> {
    let f = lookup(&node.target).ok_or_else(|| format!("{} has no decomposition", node.target))?;
    let mut scratch = Graph::default();
    let mut local = std::collections::HashMap::new();
    let mut feeds = Vec::new();
    let add = |scratch: &mut Graph, name: &str, kind: ValueKind| -> ValueId {
        scratch.values.push(Value {
            name: name.to_string(),
            kind,
        });
        let id = scratch.values.len() - 1;
        scratch.by_name.insert(name.to_string(), id);
        id
    };
    let mut n = node.clone();
    // Symbolic ints become this call's values; tensors become the graph's inputs.
    let int_of = |v: ValueId| match known(v) {
        Some(Known::Int(i)) => Ok(i),
        _ => Err(format!("'{}' is not a known int", g.value(v).name)),
    };
    for (_, a) in &mut n.inputs {
        match a {
            Arg::SymInt(IntArg::Sym(v)) => *a = Arg::Int(int_of(*v)?),
            Arg::SymInts(xs) => {
                let v = xs
                    .iter()
                    .map(|x| match x {
                        IntArg::Int(i) => Ok(*i),
                        IntArg::Sym(v) => int_of(*v),
                    })
                    .collect::<DResult<Vec<i64>>>()?;
                *a = Arg::Ints(v);
            }
            _ => {}
        }
        let mut ids = Vec::new();
        a.values(&mut ids);
        for v in ids {
            if local.contains_key(&v) {
                continue;
            }
            let Some(Known::Tensor(dtype, sizes)) = known(v) else {
                return Err(format!("'{}' is not a tensor", g.value(v).name));
            };
            let s: Vec<i64> = sizes.iter().map(|&d| d as i64).collect();
            let id = add(
                &mut scratch,
                &g.value(v).name,
                ValueKind::Tensor {
                    dtype,
                    sizes: s.iter().map(|&d| Dim::Static(d)).collect(),
                    strides: super::super::contiguous(&s),
                    requires_grad: false,
                },
            );
            local.insert(v, id);
            feeds.push(v);
            scratch.inputs.push(Arg::Tensor(id));
        }
        super::rename(a, &local.iter().map(|(&k, &v)| (k, v)).collect());
    }
    // The outputs keep torch's metadata (dtype; sizes checked where they are static).
    let mut outs = std::collections::BTreeMap::new();
    let mut ids = Vec::new();
    node.outputs.iter().for_each(|a| a.values(&mut ids));
    for v in ids {
        let val = g.value(v).clone();
        let id = add(&mut scratch, &val.name, val.kind);
        outs.insert(v, id);
    }
    for a in &mut n.outputs {
        super::rename(a, &outs);
    }
    let nodes = decompose(&mut scratch, &n, f)?;
    scratch.nodes = nodes;
    scratch.outputs = n.outputs.clone();
    Ok((scratch, feeds))
}

/// The CPU kernel: the decomposition for this call's shapes, run by the interpreter.
fn run(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let known = |v: ValueId| match ctx.env.get(v)?.as_ref()? {
        RValue::Tensor(t) => Some(Known::Tensor(t.dtype, t.sizes.clone())),
        RValue::Int(i) => Some(Known::Int(*i)),
        _ => None,
    };
    let (g, feeds) = concrete(ctx.graph, ctx.node, &known).map_err(|e| {
        ctx.err(format!(
            "its decomposition does not take these arguments: {e}"
        ))
    })?;
    let inputs = feeds
        .iter()
        .map(|&v| ctx.env[v].clone().unwrap_or(RValue::None))
        .collect();
    // Planned apart from the session's plans (kept by graph address; this graph is dropped).
    let plans = std::mem::take(&mut ctx.state.graph_plans);
    let res = crate::runtime::run_graph(&g, inputs, ctx.state);
    ctx.state.graph_plans = plans;
    res
}

/// The shape rule: the decomposition's rules for this call's shapes.
fn rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let known = |v: ValueId| match ctx.env.get(v)?.as_ref()? {
        MValue::Tensor(t) => Some(Known::Tensor(t.dtype, t.sizes.clone())),
        MValue::Int(i) => Some(Known::Int(*i)),
        _ => None,
    };
    let (g, feeds) = concrete(ctx.graph, ctx.node, &known)
        .map_err(|e| format!("its decomposition does not take these arguments: {e}"))?;
    let inputs = feeds
        .iter()
        .map(|&v| ctx.env[v].clone().unwrap_or(MValue::None))
        .collect();
    ctx.run_subgraph(&g, inputs)
}
