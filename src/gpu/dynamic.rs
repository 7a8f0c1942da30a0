//! Nodes whose work depends on values the GPU computes, run on the GPU as torch.mps runs
//! them: the executor reads back the few words it needs (one submit and one wait each),
//! and everything else stays on the GPU.
//!
//! - `higher_order.cond`: a tensor predicate is read back (a SymBool needs nothing), then the
//!   chosen branch runs on the GPU with its operands as GPU tensors.
//! - `higher_order.while_loop`: `cond_fn` runs on the GPU and its bool is read back once per
//!   iteration; `body_fn` runs on the GPU.
//! - `higher_order.map_impl`: the body runs on the GPU once per slice of the leading dim and
//!   the results are stacked on the GPU.
//! - `item` / `_local_scalar_dense`: a readback of the one element.
//! - `masked_select`, `index.Tensor` with one boolean mask, `repeat_interleave` with a
//!   tensor of repeats: a GPU pass counts the output elements
//!   ([`super::kernels::select`]), the host reads back only the count, then a second pass
//!   writes the output of that size.
//!
//! These nodes count as GPU nodes; a run with any of them has one more submit per readback
//! (counted in [`RunStats::submits`](super::exec::RunStats)).

use super::exec::{run_graph, Env, Runner, Slot};
use super::kernels::{select, Kc};
use super::store::{gpu_dtype, GTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{registry, OpCtx};
use crate::program::{Arg, Graph, Node, ValueKind};
use crate::runtime::{RValue, RunState};

type Out = Result<Option<Vec<Slot>>>;

/// Run `node` here if it is one of this module's ops (None: the executor's other paths).
pub(super) async fn run(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
) -> Out {
    match node.target.as_str() {
        "higher_order.cond" => return cond(r, node, graph, env, st).await,
        "higher_order.while_loop" => return while_loop(r, node, graph, env, st).await,
        "higher_order.map_impl" => return map_impl(r, node, graph, env, st).await,
        _ => {}
    }
    let (op, overload) = node.target.rsplit_once('.').unwrap_or((&node.target, ""));
    match (op, overload) {
        ("aten.item" | "aten._local_scalar_dense", "default") => {
            item(r, node, graph, env, st).await
        }
        ("aten.masked_select", "default") => masked_select(r, node, graph, env, st).await,
        ("aten.index" | "aten._unsafe_index", "Tensor") => {
            index_mask(r, node, graph, env, st).await
        }
        ("aten.repeat_interleave", "self_Tensor" | "Tensor") => {
            repeat_interleave(r, node, graph, env, st).await
        }
        _ => Ok(None),
    }
}

/// A node's positional argument `i`.
fn positional<'g>(node: &'g Node, i: usize, what: &str) -> Result<&'g Arg> {
    node.inputs
        .get(i)
        .map(|(_, a)| a)
        .ok_or_else(|| Error::op(&node.target, format!("missing argument {i} ({what})")))
}

fn subgraph<'g>(node: &'g Node, i: usize, what: &str) -> Result<&'g Graph> {
    match positional(node, i, what)? {
        Arg::Graph(g) => Ok(g),
        other => Err(Error::op(
            &node.target,
            format!("argument {i} ({what}) is {other:?}, expected a subgraph"),
        )),
    }
}

fn tensor(graph: &Graph, env: &Env, id: usize) -> Result<GTensor> {
    env.t[id].clone().ok_or_else(|| {
        Error::Verify(format!(
            "value '{}' has not been computed",
            graph.value(id).name
        ))
    })
}

/// The values of a (list) argument, one slot per element (operands of higher-order ops; the
/// CPU runtime's `flat_values`).
fn flat_slots(
    node: &Node,
    graph: &Graph,
    env: &Env,
    st: &mut RunState,
    a: &Arg,
) -> Result<Vec<Slot>> {
    Ok(match a {
        Arg::Tensor(id) | Arg::OptTensor(Some(id)) => vec![Slot::T(tensor(graph, env, *id)?)],
        Arg::Tensors(ids) => ids
            .iter()
            .map(|id| tensor(graph, env, *id).map(Slot::T))
            .collect::<Result<_>>()?,
        Arg::OptTensors(ids) => ids
            .iter()
            .map(|id| match id {
                Some(id) => tensor(graph, env, *id).map(Slot::T),
                None => Ok(Slot::V(RValue::None)),
            })
            .collect::<Result<_>>()?,
        Arg::None => Vec::new(),
        other => {
            let ctx = OpCtx {
                node,
                graph,
                env: &env.v,
                state: st,
            };
            match other {
                Arg::Ints(_) | Arg::SymInts(_) => ctx
                    .ints_of(other, "operands")?
                    .into_iter()
                    .map(|i| Slot::V(RValue::Int(i)))
                    .collect(),
                _ => vec![Slot::V(ctx.resolve(other)?)],
            }
        }
    })
}

/// The optional positional argument `i` as slots (empty when absent).
fn opt_flat_slots(
    node: &Node,
    graph: &Graph,
    env: &Env,
    st: &mut RunState,
    i: usize,
) -> Result<Vec<Slot>> {
    match node.inputs.get(i) {
        Some((_, a)) => flat_slots(node, graph, env, st, a),
        None => Ok(Vec::new()),
    }
}

/// Truth of a predicate: a one-element GPU tensor (read back), a (sym) bool or a number.
async fn truth(r: &mut Runner<'_>, target: &str, s: &Slot, what: &str) -> Result<bool> {
    match s {
        Slot::T(t) if t.numel() == 1 => Ok(r.to_cpu(t).await?.item_f64() != 0.0),
        Slot::T(t) => Err(Error::op(
            target,
            format!(
                "{what} must be a tensor with one element, got shape {:?}",
                t.sizes
            ),
        )),
        Slot::V(RValue::Bool(b)) => Ok(*b),
        Slot::V(RValue::Int(i)) => Ok(*i != 0),
        Slot::V(RValue::Float(f)) => Ok(*f != 0.0),
        Slot::V(v) => Err(Error::op(
            target,
            format!(
                "{what} is a {}, expected a bool or a one-element tensor",
                v.kind()
            ),
        )),
        _ => Err(Error::op(
            target,
            format!("{what} is a list, expected a bool or a one-element tensor"),
        )),
    }
}

/// Run a subgraph on the GPU (boxed: the executor and this module recurse).
async fn run_sub(
    r: &mut Runner<'_>,
    g: &Graph,
    inputs: Vec<Slot>,
    st: &mut RunState,
    target: &str,
    what: &str,
) -> Result<Vec<Slot>> {
    Box::pin(run_graph(r, g, inputs, st))
        .await
        .map_err(|e| Error::op(target, format!("in {what}: {e}")))
}

/// A subgraph's results as this node's outputs (one slot per output, or one list when the
/// node defines a single `Tensor[]`).
fn node_results(node: &Node, outs: Vec<Slot>) -> Vec<Slot> {
    if node.outputs.len() == 1 && matches!(node.outputs[0], Arg::Tensors(_)) {
        let ts = outs
            .into_iter()
            .filter_map(|s| match s {
                Slot::T(t) => Some(t),
                _ => None,
            })
            .collect();
        return vec![Slot::Ts(ts)];
    }
    outs
}

async fn cond(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
) -> Out {
    let t = &node.target;
    let pred = flat_slots(node, graph, env, st, positional(node, 0, "pred")?)?;
    let [pred] = &pred[..] else {
        return Err(Error::op(t, "the cond predicate must be one value"));
    };
    let branch = if truth(r, t, pred, "the cond predicate").await? {
        subgraph(node, 1, "true_fn")?
    } else {
        subgraph(node, 2, "false_fn")?
    };
    let operands = flat_slots(node, graph, env, st, positional(node, 3, "operands")?)?;
    let outs = run_sub(r, branch, operands, st, t, "branch").await?;
    Ok(Some(node_results(node, outs)))
}

/// Iterations after which a while_loop is taken to be runaway (the CPU runtime's limit).
const MAX_WHILE_ITERATIONS: u64 = 1 << 31;

async fn while_loop(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
) -> Out {
    let t = &node.target;
    let (cond_g, body_g) = (subgraph(node, 0, "cond_fn")?, subgraph(node, 1, "body_fn")?);
    let mut carried = flat_slots(node, graph, env, st, positional(node, 2, "carried_inputs")?)?;
    let extra = opt_flat_slots(node, graph, env, st, 3)?;
    let with_extra = |c: &[Slot]| c.iter().chain(&extra).cloned().collect::<Vec<_>>();
    let mut iterations = 0u64;
    loop {
        let p = run_sub(r, cond_g, with_extra(&carried), st, t, "cond_fn").await?;
        let first = p
            .first()
            .ok_or_else(|| Error::op(t, "cond_fn returned nothing"))?;
        if !truth(r, t, first, "the while_loop condition").await? {
            break;
        }
        iterations += 1;
        if iterations > MAX_WHILE_ITERATIONS {
            return Err(Error::op(
                t,
                format!("while_loop ran more than {MAX_WHILE_ITERATIONS} iterations"),
            ));
        }
        let what = format!("body_fn (iteration {iterations})");
        let next = run_sub(r, body_g, with_extra(&carried), st, t, &what).await?;
        if next.len() != carried.len() {
            return Err(Error::op(
                t,
                format!(
                    "body_fn returned {} values for {} carried inputs",
                    next.len(),
                    carried.len()
                ),
            ));
        }
        carried = next;
    }
    Ok(Some(node_results(node, carried)))
}

/// Whether every tensor output of `node` has a dtype the GPU copy moves.
fn outputs_on_gpu(node: &Node, graph: &Graph) -> bool {
    let mut ids = Vec::new();
    node.outputs.iter().for_each(|a| a.values(&mut ids));
    ids.iter().all(|&id| match &graph.value(id).kind {
        ValueKind::Tensor { dtype, .. } => gpu_dtype(*dtype),
        _ => true,
    })
}

async fn map_impl(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
) -> Out {
    let t = &node.target;
    // Results stack with the GPU copy: other dtypes run on the CPU kernel.
    if !outputs_on_gpu(node, graph) {
        return Ok(None);
    }
    let f = subgraph(node, 0, "f")?;
    let xs = flat_slots(node, graph, env, st, positional(node, 1, "xs")?)?;
    let pos = opt_flat_slots(node, graph, env, st, 2)?;
    let xs: Vec<GTensor> = xs
        .into_iter()
        .map(|s| match s {
            Slot::T(x) if x.rank() > 0 => Ok(x),
            _ => Err(Error::op(t, "map xs must be tensors of rank >= 1")),
        })
        .collect::<Result<_>>()?;
    let n = xs
        .first()
        .map(|x| x.sizes[0])
        .ok_or_else(|| Error::op(t, "map needs at least one mapped tensor"))?;
    if xs.iter().any(|x| x.sizes[0] != n) {
        return Err(Error::op(
            t,
            "mapped tensors must have the same leading dimension",
        ));
    }
    if n == 0 {
        return Err(Error::op(
            t,
            "map over a leading dimension of size 0 is not supported",
        ));
    }
    let mut per_out: Vec<Vec<GTensor>> = Vec::new();
    for i in 0..n {
        let mut inputs: Vec<Slot> = xs
            .iter()
            .map(|x| {
                Slot::T(x.view(
                    x.sizes[1..].to_vec(),
                    x.strides[1..].to_vec(),
                    x.offset + i * x.strides[0],
                ))
            })
            .collect();
        inputs.extend(pos.iter().cloned());
        let outs = run_sub(r, f, inputs, st, t, &format!("map body (slice {i})")).await?;
        if per_out.is_empty() {
            per_out = vec![Vec::with_capacity(n); outs.len()];
        }
        if outs.len() != per_out.len() {
            return Err(Error::op(
                t,
                "map body must return tensors, the same number every time",
            ));
        }
        for (list, o) in per_out.iter_mut().zip(outs) {
            match o {
                Slot::T(o) => list.push(o),
                _ => return Err(Error::op(t, "map body must return tensors")),
            }
        }
    }
    let mut k = Kc {
        r,
        env_t: &env.t,
        op: OpCtx {
            node,
            graph,
            env: &env.v,
            state: st,
        },
    };
    let mut results = Vec::with_capacity(per_out.len());
    for list in per_out {
        if list.iter().any(|o| o.sizes != list[0].sizes) {
            return Err(Error::op(
                t,
                "map body returned tensors of different shapes",
            ));
        }
        match select::stack(&mut k, &list)? {
            Some(s) => results.push(Slot::T(s)),
            None => {
                return Err(Error::op(
                    t,
                    format!(
                        "cannot stack the map body's {} results of shape {:?} on the GPU",
                        list[0].dtype, list[0].sizes
                    ),
                ))
            }
        }
    }
    Ok(Some(node_results(node, results)))
}

/// `item`: the one element read back, converted by the CPU kernel (same Python types and
/// errors).
async fn item(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
) -> Out {
    let Some(Arg::Tensor(id)) = node.arg("self") else {
        return Ok(None);
    };
    let (id, x) = (*id, tensor(graph, env, *id)?);
    let Some(kernel) = registry().lookup(&node.target) else {
        return Ok(None);
    };
    let c = r.to_cpu(&x).await?;
    env.v[id] = Some(RValue::Tensor(c));
    let res = kernel(&mut OpCtx {
        node,
        graph,
        env: &env.v,
        state: st,
    });
    env.v[id] = None;
    Ok(Some(res?.into_iter().map(Slot::V).collect()))
}

/// Read back a count encoded by [`select`] (the one int64 word of `total`).
async fn read_count(r: &mut Runner<'_>, c: &select::Counted) -> Result<i64> {
    let t = r.to_cpu(&c.total).await?;
    Ok(t.to_vec::<i64>().first().copied().unwrap_or(0))
}

fn kc<'k, 'd, 'a>(
    r: &'k mut Runner<'d>,
    node: &'a Node,
    graph: &'a Graph,
    env: &'a Env,
    st: &'a mut RunState,
) -> Kc<'k, 'd, 'a>
where
    'a: 'k,
{
    Kc {
        r,
        env_t: &env.t,
        op: OpCtx {
            node,
            graph,
            env: &env.v,
            state: st,
        },
    }
}

/// Whether `x` can be gathered from at flat offsets (the gather's output dtype is x's).
fn gatherable(node: &Node, graph: &Graph, x: &GTensor) -> bool {
    let out_dtype = match node.outputs.first() {
        Some(Arg::Tensor(id)) => match &graph.value(*id).kind {
            ValueKind::Tensor { dtype, .. } => Some(*dtype),
            _ => None,
        },
        _ => None,
    };
    gpu_dtype(x.dtype) && out_dtype == Some(x.dtype) && x.span() <= i32::MAX as usize
}

/// Select the elements of `x` where `mask` (a bool tensor of x's sizes at dims
/// `d..d + mask.rank()`) is true: [x.sizes[..d], count, x.sizes[d + mask.rank()..]].
#[allow(clippy::too_many_arguments)]
async fn select_rows(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
    x: &GTensor,
    mask: &GTensor,
    d: usize,
) -> Out {
    if !gatherable(node, graph, x) {
        return Ok(None);
    }
    let Some(c) = select::count_nonzero(&mut kc(r, node, graph, env, st), mask)? else {
        return Ok(None);
    };
    let n = read_count(r, &c).await? as usize;
    let k = &mut kc(r, node, graph, env, st);
    let e = d + mask.rank();
    let flat = select::emit(k, &c, &x.strides[d..e], n)?;
    let mut shape = x.sizes[..d].to_vec();
    shape.push(n);
    shape.extend_from_slice(&x.sizes[e..]);
    let mut xs = x.strides[..d].to_vec();
    xs.push(0);
    xs.extend_from_slice(&x.strides[e..]);
    let mut fs = vec![0; shape.len()];
    fs[d] = 1;
    Ok(select::gather_flat(k, x, &flat, &shape, &xs, &fs)?.map(|o| vec![Slot::T(o)]))
}

async fn masked_select(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
) -> Out {
    let (Some(Arg::Tensor(xi)), Some(Arg::Tensor(mi))) = (node.arg("self"), node.arg("mask"))
    else {
        return Ok(None);
    };
    let (x, mask) = (tensor(graph, env, *xi)?, tensor(graph, env, *mi)?);
    // A non-bool mask or shapes that do not broadcast: the CPU kernel raises torch's error.
    let Some(shape) = crate::cpu::broadcast_shapes(&x.sizes, &mask.sizes) else {
        return Ok(None);
    };
    let (Some(xb), Some(mb)) = (x.expand_to(&shape), mask.expand_to(&shape)) else {
        return Ok(None);
    };
    if mask.dtype != DType::Bool {
        return Ok(None);
    }
    select_rows(r, node, graph, env, st, &xb, &mb, 0).await
}

/// `index.Tensor` whose one index is a bool mask (None entries before it; torch's error for
/// a mask of the wrong shape comes from the CPU kernel).
async fn index_mask(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
) -> Out {
    let Some(Arg::Tensor(xi)) = node.arg("self") else {
        return Ok(None);
    };
    let present: Vec<(usize, usize)> = match node.arg("indices") {
        Some(Arg::OptTensors(ids)) => ids
            .iter()
            .enumerate()
            .filter_map(|(d, id)| id.map(|id| (d, id)))
            .collect(),
        Some(Arg::Tensors(ids)) => ids.iter().copied().enumerate().collect(),
        _ => return Ok(None),
    };
    let [(d, mi)] = present[..] else {
        return Ok(None);
    };
    let (x, mask) = (tensor(graph, env, *xi)?, tensor(graph, env, mi)?);
    if mask.dtype != DType::Bool
        || mask.rank() == 0
        || x.sizes.get(d..d + mask.rank()) != Some(&mask.sizes[..])
    {
        return Ok(None);
    }
    select_rows(r, node, graph, env, st, &x, &mask, d).await
}

/// `repeat_interleave.self_Tensor(self, repeats, dim)` (a 1-D repeats of the dim's size)
/// and `repeat_interleave.Tensor(repeats)` (the positions alone).
async fn repeat_interleave(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
) -> Out {
    let t = &node.target;
    let Some(Arg::Tensor(ri)) = node.arg("repeats") else {
        return Ok(None);
    };
    let reps = tensor(graph, env, *ri)?;
    let x = match node.arg("self") {
        Some(Arg::Tensor(xi)) => Some(tensor(graph, env, *xi)?),
        _ => None,
    };
    let (x, d) = match x {
        None => (None, 0),
        Some(x) => {
            let ctx = OpCtx {
                node,
                graph,
                env: &env.v,
                state: st,
            };
            match ctx.opt_int("dim")? {
                // dim=None: the flattened input.
                None if x.is_contiguous() => (Some(x.view(vec![x.numel()], vec![1], x.offset)), 0),
                None => return Ok(None),
                Some(d) => {
                    let rank = x.rank() as i64;
                    let d = if d < 0 { d + rank } else { d };
                    if !(0..rank).contains(&d) {
                        return Ok(None);
                    }
                    (Some(x), d as usize)
                }
            }
        }
    };
    match &x {
        Some(x) if reps.numel() != x.sizes[d] || !gatherable(node, graph, x) => return Ok(None),
        None if node
            .outputs
            .first()
            .and_then(|a| match a {
                Arg::Tensor(id) => Some(&graph.value(*id).kind),
                _ => None,
            })
            .is_none_or(
                |k| !matches!(k, ValueKind::Tensor { dtype, .. } if *dtype == reps.dtype),
            ) =>
        {
            return Ok(None)
        }
        _ => {}
    }
    let Some(c) = select::count_repeats(&mut kc(r, node, graph, env, st), &reps)? else {
        return Ok(None);
    };
    let n = read_count(r, &c).await?;
    if n < 0 {
        return Err(Error::op(t, "repeats can not be negative"));
    }
    let k = &mut kc(r, node, graph, env, st);
    let Some(x) = x else {
        let idx = select::repeat_index(k, &c, n as usize, reps.dtype)?;
        return Ok(Some(vec![Slot::T(idx)]));
    };
    let idx = select::repeat_index(k, &c, n as usize, DType::I64)?;
    Ok(select::gather_dim(k, &x, d, &idx)?.map(|o| vec![Slot::T(o)]))
}
