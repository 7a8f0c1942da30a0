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
//! - `higher_order.scan`: the same, with the carry passed from step to step on the GPU.
//! - `item` / `_local_scalar_dense`: a readback of the one element; `_assert_async` the same,
//!   then its CPU kernel raises the message when the element is false.
//! - `masked_select`, `index.Tensor` with one boolean mask, `repeat_interleave` with a
//!   tensor of repeats: a GPU pass counts the output elements
//!   ([`super::kernels::select`]), the host reads back only the count, then a second pass
//!   writes the output of that size.
//! - `masked_scatter`: the same count of the mask, read back to raise torch's error for a
//!   source shorter than it, then a pass writes each masked position's source element.
//! - `bincount`: a GPU pass finds the largest input and the first negative one
//!   ([`super::kernels::histogram`]), the host reads back four words (the CPU kernel's error
//!   for a negative input) and sizes the bins, then a pass counts with atomics.
//! - `histc` over the data's range (`min == max`): the same pass finds the extrema and
//!   whether a NaN is there, read back for torch's range and errors, then the histogram pass
//!   of a given range. A given range needs no readback (the op table's kernel).
//! - `_unique2`, `_unique`, `unique_consecutive`, `unique_dim`(`_consecutive`): the GPU sorts
//!   and flags the units ([`super::kernels::unique`]), the host reads back only the number of
//!   unique ones, then passes write the values, inverse and counts of that size.
//!
//! - `pt2web.fused_elementwise`: one generated kernel ([`super::kernels::fused_kernel`]), no
//!   readback; where it declines, its body's nodes one by one.
//! - `pt2web.fused_epilogue`: the producer's kernel with the epilogue applied
//!   ([`super::kernels::epilogue`]), no readback; where it cannot apply it, the epilogue's
//!   graph after the producer's result.
//!
//! - `pt2web.fused_attention`: the streaming attention kernel
//!   ([`super::kernels::fused_attention`]), no readback; where it declines, the body's nodes.
//!
//! These nodes count as GPU nodes; a run with any of them has one more submit per readback
//! (counted in [`RunStats::submits`](super::exec::RunStats)).

use super::exec::{run_graph, Env, Runner, Slot};
use super::kernels::{histogram, select, KernelCtx};
use super::store::{gpu_dtype, GTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{table, OpCtx};
use crate::program::{Arg, Graph, Node, ValueKind};
use crate::runtime::{RValue, RunState};

type Out = Result<Option<Vec<Slot>>>;

/// The node being run and the executor state it runs in.
struct At<'x, 'd> {
    r: &'x mut Runner<'d>,
    node: &'x Node,
    graph: &'x Graph,
    env: &'x mut Env,
    st: &'x mut RunState,
}

impl<'d> At<'_, 'd> {
    fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::op(&self.node.target, msg)
    }
    /// The node's argument context (non-tensor arguments).
    fn ctx(&mut self) -> OpCtx<'_> {
        OpCtx {
            node: self.node,
            graph: self.graph,
            env: &self.env.v,
            state: self.st,
        }
    }
    /// A kernel context for the encoding passes.
    fn kc(&mut self) -> KernelCtx<'_, 'd, '_> {
        let op = OpCtx {
            node: self.node,
            graph: self.graph,
            env: &self.env.v,
            state: self.st,
        };
        KernelCtx::new(self.r, &self.env.t, op)
    }
    fn tensor(&self, id: usize) -> Result<GTensor> {
        self.env.t[id].clone().ok_or_else(|| {
            Error::Verify(format!(
                "value '{}' has not been computed",
                self.graph.value(id).name
            ))
        })
    }
    /// The tensor passed as argument `name` (None if absent or not a tensor).
    fn arg_tensor(&self, name: &str) -> Result<Option<GTensor>> {
        match self.node.arg(name) {
            Some(Arg::Tensor(id)) => self.tensor(*id).map(Some),
            _ => Ok(None),
        }
    }
    /// The declared dtype of output 0.
    fn out_dtype(&self) -> Option<DType> {
        match self.node.outputs.first() {
            Some(Arg::Tensor(id)) => match &self.graph.value(*id).kind {
                ValueKind::Tensor { dtype, .. } => Some(*dtype),
                _ => None,
            },
            _ => None,
        }
    }
    /// Run a subgraph on the GPU (boxed: the executor and this module recurse).
    async fn run_sub(&mut self, g: &Graph, inputs: Vec<Slot>, what: &str) -> Result<Vec<Slot>> {
        Box::pin(run_graph(self.r, g, inputs, self.st))
            .await
            .map_err(|e| e.within(&self.node.target, format!("in {what}")))
    }
    /// Truth of a predicate: a one-element GPU tensor (read back), a (sym) bool or a number.
    async fn truth(&mut self, s: &Slot, what: &str) -> Result<bool> {
        match s {
            Slot::Tensor(t) if t.numel() == 1 => Ok(self.r.to_cpu(t).await?.item_f64() != 0.0),
            Slot::Tensor(t) => Err(self.err(format!(
                "{what} must be a tensor with one element, got shape {:?}",
                t.sizes
            ))),
            Slot::Value(RValue::Bool(b)) => Ok(*b),
            Slot::Value(RValue::Int(i)) => Ok(*i != 0),
            Slot::Value(RValue::Float(f)) => Ok(*f != 0.0),
            Slot::Value(v) => Err(self.err(format!(
                "{what} is a {}, expected a bool or a one-element tensor",
                v.kind()
            ))),
            _ => Err(self.err(format!(
                "{what} is a list, expected a bool or a one-element tensor"
            ))),
        }
    }
    /// Read back what [`histogram::extrema`] encoded for `x` (None where it declines).
    async fn extrema(&mut self, x: &GTensor) -> Result<Option<histogram::Extrema>> {
        let Some(words) = histogram::extrema(&mut self.kc(), x)? else {
            return Ok(None);
        };
        let t = self.r.to_cpu(&words).await?;
        Ok(Some(histogram::Extrema::of(&t.to_vec::<i32>(), x.dtype)))
    }
    /// Read back a count encoded by [`select`] (the one int64 word of `total`).
    async fn read_count(&mut self, c: &select::Counted) -> Result<i64> {
        let t = self.r.to_cpu(&c.total).await?;
        Ok(t.to_vec::<i64>().first().copied().unwrap_or(0))
    }
}

/// The ops of this module, resolved once per node when its graph is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dynamic {
    Cond,
    WhileLoop,
    Map,
    Scan,
    Item,
    MaskedSelect,
    MaskedScatter,
    Nonzero,
    IndexMask,
    RepeatInterleave,
    Bincount,
    Histc,
    Unique,
    Fused,
    Epilogue,
    Attention,
}

impl Dynamic {
    /// The op of this module that runs `target`, if any.
    pub(super) fn of(target: &str) -> Option<Dynamic> {
        match target {
            "higher_order.cond" => return Some(Dynamic::Cond),
            "higher_order.while_loop" => return Some(Dynamic::WhileLoop),
            "higher_order.map_impl" => return Some(Dynamic::Map),
            "higher_order.scan" => return Some(Dynamic::Scan),
            crate::ops::elementwise::fused::TARGET => return Some(Dynamic::Fused),
            crate::ops::elementwise::epilogue::TARGET => return Some(Dynamic::Epilogue),
            crate::ops::attention::fused::TARGET => return Some(Dynamic::Attention),
            _ => {}
        }
        let (op, overload) = target.rsplit_once('.').unwrap_or((target, ""));
        Some(match (op, overload) {
            ("aten.item" | "aten._local_scalar_dense", "default") => Dynamic::Item,
            // The one bool read back, then the CPU kernel raises the message (istft's NOLA
            // check from src/passes/decompose/signal.rs).
            ("aten._assert_async", "default" | "msg") => Dynamic::Item,
            ("aten.masked_select", "default") => Dynamic::MaskedSelect,
            ("aten.masked_scatter", "default") => Dynamic::MaskedScatter,
            ("aten.nonzero" | "aten.argwhere", "default") => Dynamic::Nonzero,
            ("aten.index" | "aten._unsafe_index", "Tensor") => Dynamic::IndexMask,
            ("aten.repeat_interleave", "self_Tensor" | "Tensor") => Dynamic::RepeatInterleave,
            ("aten.bincount", "default") => Dynamic::Bincount,
            ("aten.histc", "default") => Dynamic::Histc,
            (op, "default") if super::kernels::unique::TARGETS.contains(&op) => Dynamic::Unique,
            _ => return None,
        })
    }
}

/// Run `node` as `op` (None: this node's arguments are for the executor's other paths,
/// e.g. an `index.Tensor` without a boolean mask).
pub(super) async fn run(
    r: &mut Runner<'_>,
    node: &Node,
    graph: &Graph,
    env: &mut Env,
    st: &mut RunState,
    op: Dynamic,
) -> Out {
    let a = &mut At {
        r,
        node,
        graph,
        env,
        st,
    };
    match op {
        Dynamic::Cond => cond(a).await,
        Dynamic::WhileLoop => while_loop(a).await,
        Dynamic::Map => map_impl(a).await,
        Dynamic::Scan => scan(a).await,
        Dynamic::Item => item(a).await,
        Dynamic::MaskedSelect => masked_select(a).await,
        Dynamic::MaskedScatter => masked_scatter(a).await,
        Dynamic::Nonzero => nonzero(a).await,
        Dynamic::IndexMask => index_mask(a).await,
        Dynamic::RepeatInterleave => repeat_interleave(a).await,
        Dynamic::Bincount => bincount(a).await,
        Dynamic::Histc => histc(a).await,
        Dynamic::Unique => unique(a).await,
        Dynamic::Fused => fused(a).await,
        Dynamic::Epilogue => epilogue(a).await,
        Dynamic::Attention => attention(a).await,
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

/// The values of positional argument `i` (a list or one value), one slot per element: the
/// operands of higher-order ops (the CPU runtime's `flat_values`). Absent: none.
fn flat_slots(a: &mut At, i: usize) -> Result<Vec<Slot>> {
    let Some((_, arg)) = a.node.inputs.get(i) else {
        return Ok(Vec::new());
    };
    Ok(match arg {
        Arg::Tensor(id) | Arg::OptTensor(Some(id)) => vec![Slot::Tensor(a.tensor(*id)?)],
        Arg::Tensors(ids) => ids
            .iter()
            .map(|id| a.tensor(*id).map(Slot::Tensor))
            .collect::<Result<_>>()?,
        Arg::OptTensors(ids) => ids
            .iter()
            .map(|id| match id {
                Some(id) => a.tensor(*id).map(Slot::Tensor),
                None => Ok(Slot::Value(RValue::None)),
            })
            .collect::<Result<_>>()?,
        Arg::None => Vec::new(),
        Arg::Ints(_) | Arg::SymInts(_) => a
            .ctx()
            .ints_of(arg, "operands")?
            .into_iter()
            .map(|i| Slot::Value(RValue::Int(i)))
            .collect(),
        other => vec![Slot::Value(a.ctx().resolve(other)?)],
    })
}

/// A subgraph's results as this node's outputs (one slot per output, or one list when the
/// node defines a single `Tensor[]`).
fn node_results(node: &Node, outs: Vec<Slot>) -> Vec<Slot> {
    if node.outputs.len() == 1 && matches!(node.outputs[0], Arg::Tensors(_)) {
        let ts = outs
            .into_iter()
            .filter_map(|s| match s {
                Slot::Tensor(t) => Some(t),
                _ => None,
            })
            .collect();
        return vec![Slot::Tensors(ts)];
    }
    outs
}

/// A fused elementwise chain: its generated kernel, or where that declines (a dtype, a
/// shape it cannot bind) the body's nodes one by one, each with its own kernel.
async fn fused(a: &mut At<'_, '_>) -> Out {
    if let Some(outs) = super::kernels::fused_kernel(&mut a.kc())? {
        return Ok(Some(outs));
    }
    let Some(Arg::Graph(body)) = a.node.arg("body") else {
        return Err(a.err("a fused node needs its body subgraph"));
    };
    let inputs = flat_slots(a, 0)?;
    let outs = a.run_sub(body, inputs, "the fused body").await?;
    Ok(Some(node_results(a.node, outs)))
}

/// A matrix product or convolution with its epilogue: the producer's kernel applying it,
/// or the producer's result then the epilogue's graph (one fused kernel or op), or where
/// the producer has no GPU kernel both graphs node by node.
async fn epilogue(a: &mut At<'_, '_>) -> Out {
    use crate::ops::elementwise::epilogue::Parts;
    let node = a.node;
    let parts = Parts::of(node).map_err(|e| a.err(e))?;
    let ins = flat_slots(a, 0)?;
    let sizes = flat_slots(a, 1)?;
    let (pins, extras) = ins.split_at(parts.producer_inputs().len());
    let tensors = |s: &[Slot]| {
        s.iter()
            .map(|s| match s {
                Slot::Tensor(t) => Some(t.clone()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
    };
    let ints = sizes
        .iter()
        .map(|s| match s {
            Slot::Value(RValue::Int(i)) => Some(*i),
            _ => None,
        })
        .collect::<Option<Vec<_>>>();
    let fused = match (tensors(pins), ints, tensors(extras)) {
        (Some(p), Some(i), Some(e)) => {
            super::kernels::epilogue::run_producer(a.r, a.st, &parts, &p, &i, &e).map_err(|e| {
                match e {
                    e @ (Error::Op { .. } | Error::OutOfMemory { .. } | Error::Gpu(_)) => e,
                    e => Error::op(&parts.producer.nodes[0].target, e),
                }
            })?
        }
        _ => None,
    };
    let produced = match fused {
        Some((outs, true)) => return Ok(Some(node_results(node, outs))),
        Some((outs, false)) => outs,
        None => {
            let mut pins = pins.to_vec();
            pins.extend(sizes);
            a.run_sub(parts.producer, pins, "the producer").await?
        }
    };
    let mut eins: Vec<Slot> = produced.into_iter().take(1).collect();
    eins.extend(extras.iter().cloned());
    let outs = a.run_sub(parts.epilogue, eins, "the epilogue").await?;
    Ok(Some(node_results(node, outs)))
}

/// Core ATen's attention made one node: the streaming kernel on q, k, v and the mask, or
/// where it declines (a dtype, an embedding too large, `Attention::Math`) the body's nodes.
async fn attention(a: &mut At<'_, '_>) -> Out {
    use crate::ops::attention::fused::Parts;
    let node = a.node;
    let parts = Parts::of(node).map_err(|e| a.err(e))?;
    let mut ins = flat_slots(a, 0)?;
    let tensors = ins
        .iter()
        .map(|s| match s {
            Slot::Tensor(t) => Some(t.clone()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>();
    if let Some(ts) = tensors {
        if let Some(out) =
            super::kernels::fused_attention(&mut a.kc(), &ts, parts.scale, parts.safe)?
        {
            return Ok(Some(vec![Slot::Tensor(out)]));
        }
    }
    ins.extend(flat_slots(a, 1)?);
    let outs = a.run_sub(parts.body, ins, "the attention body").await?;
    Ok(Some(node_results(node, outs)))
}

async fn cond(a: &mut At<'_, '_>) -> Out {
    let node = a.node;
    let pred = flat_slots(a, 0)?;
    let [pred] = &pred[..] else {
        return Err(a.err("the cond predicate must be one value"));
    };
    let branch = if a.truth(pred, "the cond predicate").await? {
        subgraph(node, 1, "true_fn")?
    } else {
        subgraph(node, 2, "false_fn")?
    };
    positional(node, 3, "operands")?;
    let operands = flat_slots(a, 3)?;
    let outs = a.run_sub(branch, operands, "branch").await?;
    Ok(Some(node_results(node, outs)))
}

/// `while_loop` on the GPU, bounded as the CPU's (`Limits::max_loop_iterations`, the run's
/// cancel token and timeout before each iteration).
async fn while_loop(a: &mut At<'_, '_>) -> Out {
    let node = a.node;
    let (cond_g, body_g) = (subgraph(node, 0, "cond_fn")?, subgraph(node, 1, "body_fn")?);
    positional(node, 2, "carried_inputs")?;
    let mut carried = flat_slots(a, 2)?;
    let extra = flat_slots(a, 3)?;
    let with_extra = |c: &[Slot]| c.iter().chain(&extra).cloned().collect::<Vec<_>>();
    let mut iterations = 0u64;
    loop {
        let p = a.run_sub(cond_g, with_extra(&carried), "cond_fn").await?;
        let first = p.first().ok_or_else(|| a.err("cond_fn returned nothing"))?;
        if !a.truth(first, "the while_loop condition").await? {
            break;
        }
        iterations += 1;
        a.st.stop.check(&node.name)?;
        let limit = a.st.loop_limit();
        if iterations > limit {
            return Err(Error::limit(
                format!("the iterations of while_loop '{}'", node.name),
                iterations,
                limit,
            ));
        }
        let what = format!("body_fn (iteration {iterations})");
        let next = a.run_sub(body_g, with_extra(&carried), &what).await?;
        if next.len() != carried.len() {
            return Err(a.err(format!(
                "body_fn returned {} values for {} carried inputs",
                next.len(),
                carried.len()
            )));
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

async fn map_impl(a: &mut At<'_, '_>) -> Out {
    let node = a.node;
    // Results stack with the GPU copy: other dtypes run on the CPU kernel.
    if !outputs_on_gpu(node, a.graph) {
        return Ok(None);
    }
    let f = subgraph(node, 0, "f")?;
    positional(node, 1, "xs")?;
    let xs = flat_slots(a, 1)?;
    let pos = flat_slots(a, 2)?;
    let xs: Vec<GTensor> = xs
        .into_iter()
        .map(|s| match s {
            Slot::Tensor(x) if x.rank() > 0 => Ok(x),
            _ => Err(a.err("map xs must be tensors of rank >= 1")),
        })
        .collect::<Result<_>>()?;
    let n = crate::ops::control::sliced_len(
        crate::ops::control::Sliced::Map,
        xs.iter().map(|x| x.sizes[0]),
    )
    .map_err(|e| a.err(e))?;
    let mut per_out: Vec<Vec<GTensor>> = Vec::new();
    for i in 0..n {
        let mut inputs: Vec<Slot> = xs
            .iter()
            .map(|x| {
                Slot::Tensor(x.view(
                    x.sizes[1..].to_vec(),
                    x.strides[1..].to_vec(),
                    x.offset + i * x.strides[0],
                ))
            })
            .collect();
        inputs.extend(pos.iter().cloned());
        let outs = a
            .run_sub(f, inputs, &format!("map body (slice {i})"))
            .await?;
        if per_out.is_empty() {
            per_out = vec![Vec::with_capacity(n); outs.len()];
        }
        if outs.len() != per_out.len() {
            return Err(a.err("map body must return tensors, the same number every time"));
        }
        for (list, o) in per_out.iter_mut().zip(outs) {
            match o {
                Slot::Tensor(o) => list.push(o),
                _ => return Err(a.err("map body must return tensors")),
            }
        }
    }
    let mut results = Vec::with_capacity(per_out.len());
    for list in per_out {
        if list.iter().any(|o| o.sizes != list[0].sizes) {
            return Err(a.err("map body returned tensors of different shapes"));
        }
        let Some(s) = select::stack(&mut a.kc(), &list)? else {
            return Err(a.err(format!(
                "cannot stack the map body's {} results of shape {:?} on the GPU",
                list[0].dtype, list[0].sizes
            )));
        };
        results.push(Slot::Tensor(s));
    }
    Ok(Some(node_results(node, results)))
}

/// `scan`: the combine graph on the GPU once per slice of `xs`, the carry passed from step
/// to step as GPU tensors, each step's outputs stacked by the GPU copy.
async fn scan(a: &mut At<'_, '_>) -> Out {
    let node = a.node;
    if !outputs_on_gpu(node, a.graph) {
        return Ok(None);
    }
    let f = subgraph(node, 0, "combine_fn")?;
    positional(node, 2, "xs")?;
    let mut carry = flat_slots(a, 1)?;
    let xs = flat_slots(a, 2)?;
    let extra = flat_slots(a, 3)?;
    let xs: Vec<GTensor> = xs
        .into_iter()
        .map(|s| match s {
            Slot::Tensor(x) if x.rank() > 0 => Ok(x),
            _ => Err(a.err("scan xs must be tensors of rank >= 1")),
        })
        .collect::<Result<_>>()?;
    let n = crate::ops::control::sliced_len(
        crate::ops::control::Sliced::Scan,
        xs.iter().map(|x| x.sizes[0]),
    )
    .map_err(|e| a.err(e))?;
    let k = carry.len();
    let mut per_out: Vec<Vec<GTensor>> = Vec::new();
    for i in 0..n {
        let mut inputs = std::mem::take(&mut carry);
        inputs.extend(xs.iter().map(|x| {
            Slot::Tensor(x.view(
                x.sizes[1..].to_vec(),
                x.strides[1..].to_vec(),
                x.offset + i * x.strides[0],
            ))
        }));
        inputs.extend(extra.iter().cloned());
        let mut outs = a
            .run_sub(f, inputs, &format!("combine_fn (step {i})"))
            .await?;
        if outs.len() < k {
            return Err(a.err(format!(
                "combine_fn returned {} values for {k} carried values",
                outs.len()
            )));
        }
        let ys = outs.split_off(k);
        carry = outs;
        if per_out.is_empty() {
            per_out = vec![Vec::with_capacity(n); ys.len()];
        }
        if ys.len() != per_out.len() {
            return Err(a.err("combine_fn must return the same number of values every step"));
        }
        for (list, y) in per_out.iter_mut().zip(ys) {
            match y {
                Slot::Tensor(y) => list.push(y),
                _ => return Err(a.err("combine_fn must return tensors")),
            }
        }
    }
    for list in per_out {
        if list.iter().any(|o| o.sizes != list[0].sizes) {
            return Err(a.err("combine_fn returned tensors of different shapes"));
        }
        let Some(s) = select::stack(&mut a.kc(), &list)? else {
            return Err(a.err(format!(
                "cannot stack combine_fn's {} results of shape {:?} on the GPU",
                list[0].dtype, list[0].sizes
            )));
        };
        carry.push(Slot::Tensor(s));
    }
    Ok(Some(node_results(node, carry)))
}

/// `item`: the one element read back, converted by the CPU kernel (same Python types and
/// errors).
async fn item(a: &mut At<'_, '_>) -> Out {
    let (Some(Arg::Tensor(id)), Some(kernel)) =
        (a.node.arg("self"), table().cpu_kernel(&a.node.target))
    else {
        return Ok(None);
    };
    let x = a.tensor(*id)?;
    let c = a.r.to_cpu(&x).await?;
    a.env.v[*id] = Some(RValue::Tensor(c));
    let res = kernel(&mut a.ctx());
    a.env.v[*id] = None;
    Ok(Some(res?.into_iter().map(Slot::Value).collect()))
}

/// Whether `x` can be gathered from at flat offsets (the gather's output dtype is x's).
fn gatherable(a: &At, x: &GTensor) -> bool {
    gpu_dtype(x.dtype) && a.out_dtype() == Some(x.dtype) && x.span() <= i32::MAX as usize
}

/// Select the elements of `x` where `mask` (a bool tensor of x's sizes at dims
/// `d..d + mask.rank()`) is true: [x.sizes[..d], count, x.sizes[d + mask.rank()..]].
async fn select_rows(a: &mut At<'_, '_>, x: &GTensor, mask: &GTensor, d: usize) -> Out {
    if !gatherable(a, x) {
        return Ok(None);
    }
    let Some(c) = select::count_nonzero(&mut a.kc(), mask)? else {
        return Ok(None);
    };
    let n = a.read_count(&c).await?;
    let n = usize::try_from(n).map_err(|_| {
        a.err(format!(
            "the GPU counted {n} selected elements (a kernel fault)"
        ))
    })?;
    let k = &mut a.kc();
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
    Ok(select::gather_flat(k, x, &flat, &shape, &xs, &fs)?.map(|o| vec![Slot::Tensor(o)]))
}

/// nonzero / argwhere: count, read the count back, then one emit pass per dim.
async fn nonzero(a: &mut At<'_, '_>) -> Out {
    let Some(x) = a.arg_tensor("self")? else {
        return Ok(None);
    };
    if x.rank() == 0 || a.out_dtype() != Some(DType::I64) {
        return Ok(None);
    }
    let Some(c) = select::count_nonzero(&mut a.kc(), &x)? else {
        return Ok(None);
    };
    let n = a.read_count(&c).await?;
    let n = usize::try_from(n).map_err(|_| {
        a.err(format!(
            "the GPU counted {n} nonzero elements (a kernel fault)"
        ))
    })?;
    Ok(select::coords(&mut a.kc(), &c, n, None)?.map(|o| vec![Slot::Tensor(o)]))
}

/// `self` and its bool `mask` broadcast to one shape (None: a non-bool mask or shapes
/// that do not broadcast, for which the CPU kernel raises torch's error).
fn with_mask(a: &At) -> Result<Option<(GTensor, GTensor)>> {
    let (Some(x), Some(mask)) = (a.arg_tensor("self")?, a.arg_tensor("mask")?) else {
        return Ok(None);
    };
    let Some(shape) = crate::cpu::broadcast_shapes(&x.sizes, &mask.sizes) else {
        return Ok(None);
    };
    if mask.dtype != DType::Bool {
        return Ok(None);
    }
    Ok(x.expand_to(&shape).zip(mask.expand_to(&shape)))
}

async fn masked_select(a: &mut At<'_, '_>) -> Out {
    let Some((xb, mb)) = with_mask(a)? else {
        return Ok(None);
    };
    select_rows(a, &xb, &mb, 0).await
}

/// masked_scatter: the mask's count read back (torch's error for a short source), then
/// `self` with each masked position taking the source element of its rank.
async fn masked_scatter(a: &mut At<'_, '_>) -> Out {
    let (Some((xb, mb)), Some(src)) = (with_mask(a)?, a.arg_tensor("source")?) else {
        return Ok(None);
    };
    if !gatherable(a, &xb) || src.dtype != xb.dtype {
        return Ok(None);
    }
    let Some(c) = select::count_nonzero(&mut a.kc(), &mb)? else {
        return Ok(None);
    };
    let n = a.read_count(&c).await?;
    if n < 0 || n as usize > src.numel() {
        return Err(a.err(format!(
            "the mask selects {n} elements but source has only {}",
            src.numel()
        )));
    }
    let out = select::scatter_ranked(&mut a.kc(), &c, &xb, &src)?;
    Ok(out.map(|o| vec![Slot::Tensor(o)]))
}

/// `index.Tensor` whose one index is a bool mask (None entries before it; torch's error for
/// a mask of the wrong shape comes from the CPU kernel).
async fn index_mask(a: &mut At<'_, '_>) -> Out {
    let present: Vec<(usize, usize)> = match a.node.arg("indices") {
        Some(Arg::OptTensors(ids)) => ids
            .iter()
            .enumerate()
            .filter_map(|(d, id)| id.map(|id| (d, id)))
            .collect(),
        Some(Arg::Tensors(ids)) => ids.iter().copied().enumerate().collect(),
        _ => return Ok(None),
    };
    let ([(d, mi)], Some(x)) = (&present[..], a.arg_tensor("self")?) else {
        return Ok(None);
    };
    let (d, mask) = (*d, a.tensor(*mi)?);
    if mask.dtype != DType::Bool
        || mask.rank() == 0
        || x.sizes.get(d..d + mask.rank()) != Some(&mask.sizes[..])
    {
        return Ok(None);
    }
    select_rows(a, &x, &mask, d).await
}

/// `repeat_interleave.self_Tensor(self, repeats, dim)` (a 1-D repeats of the dim's size)
/// and `repeat_interleave.Tensor(repeats)` (the positions alone).
async fn repeat_interleave(a: &mut At<'_, '_>) -> Out {
    let Some(reps) = a.arg_tensor("repeats")? else {
        return Ok(None);
    };
    let (x, d) = match a.arg_tensor("self")? {
        None if a.out_dtype() == Some(reps.dtype) => (None, 0),
        None => return Ok(None),
        Some(x) => match a.ctx().opt_int("dim")? {
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
        },
    };
    if x.as_ref()
        .is_some_and(|x| reps.numel() != x.sizes[d] || !gatherable(a, x))
    {
        return Ok(None);
    }
    // The counts are summed in 32 bits here: a sum that could pass i32 declines to the CPU
    // kernel (which sums in 64 bits and checks the size against the limits). Counts with a
    // current CPU copy are summed on the host; others are bounded by their largest, read
    // back first.
    if super::store::lock(&reps.cell).cpu_valid {
        crate::gpu::tape::note_host_read();
        let counts = reps.cpu_view()?.to_vec::<i64>();
        if counts.iter().map(|&c| c.max(0)).sum::<i64>() > i32::MAX as i64 {
            return Ok(None);
        }
    } else if reps.numel() > 1 {
        match a.extrema(&reps).await? {
            Some(histogram::Extrema::Range(_, hi))
                if hi * reps.numel() as f64 <= i32::MAX as f64 => {}
            Some(histogram::Extrema::Negative(_)) => {
                return Err(a.err("repeats can not be negative"))
            }
            _ => return Ok(None),
        }
    }
    let Some(c) = select::count_repeats(&mut a.kc(), &reps)? else {
        return Ok(None);
    };
    let n = a.read_count(&c).await?;
    if n < 0 {
        return Err(a.err("repeats can not be negative"));
    }
    let row = x.as_ref().map_or(1, |x| x.numel() / x.sizes[d].max(1));
    let dtype = x.as_ref().map_or(reps.dtype, |x| x.dtype);
    crate::ops::factory::check_alloc(&a.ctx(), (n as u64).saturating_mul(row as u64), dtype)?;
    let k = &mut a.kc();
    let Some(x) = x else {
        let idx = select::repeat_index(k, &c, n as usize, reps.dtype)?;
        return Ok(Some(vec![Slot::Tensor(idx)]));
    };
    let idx = select::repeat_index(k, &c, n as usize, DType::I64)?;
    Ok(select::gather_dim(k, &x, d, &idx)?.map(|o| vec![Slot::Tensor(o)]))
}

/// `bincount(self, weights=None, minlength=0)` of a 1-D int tensor, unweighted or with f32
/// weights: the largest value and the first negative one read back (the CPU kernel's
/// error), then the counts. Other dtypes and arguments the CPU kernel refuses decline to it.
async fn bincount(a: &mut At<'_, '_>) -> Out {
    use crate::ops::reduce::histogram::{bincount_len, bincount_negative};
    let Some(x) = a.arg_tensor("self")? else {
        return Ok(None);
    };
    let weights = a.arg_tensor("weights")?;
    let minlength = a.ctx().int_or("minlength", 0)?;
    if x.rank() != 1
        || minlength < 0
        || !super::kernels::table::int(x.dtype)
        || weights.as_ref().is_some_and(|w| w.dtype != DType::F32)
    {
        return Ok(None);
    }
    // torch: int64 zeros for an empty input, weighted or not.
    let weights = weights.filter(|_| x.numel() > 0);
    let max = if x.numel() == 0 {
        None
    } else {
        match a.extrema(&x).await? {
            None => return Ok(None),
            Some(histogram::Extrema::Negative(first)) => {
                return Err(a.err(bincount_negative(first)))
            }
            Some(histogram::Extrema::Range(_, hi)) => Some(hi as i64),
            Some(histogram::Extrema::NaN) => return Ok(None),
        }
    };
    let len = bincount_len(&a.ctx(), max, minlength)?;
    histogram::encode_bincount(&mut a.kc(), &x, weights.as_ref(), len)
}

/// `histc` over the data's range (`min == max`) of an f32 tensor: its extrema read back,
/// torch's range (widened when all equal) and errors (a NaN or an infinity in the data),
/// then the histogram over that range. A given range: the op table's kernel.
async fn histc(a: &mut At<'_, '_>) -> Out {
    let Some(x) = a.arg_tensor("self")? else {
        return Ok(None);
    };
    let ctx = a.ctx();
    let (lo, hi) = (ctx.float_or("min", 0.0)?, ctx.float_or("max", 0.0)?);
    let bins = ctx.int_or("bins", 100)?;
    if lo != hi || x.dtype != DType::F32 || bins < 1 {
        return Ok(None);
    }
    let Some(flat) = histogram::flat(&mut a.kc(), &x)? else {
        return Ok(None);
    };
    let (lo, hi) = if x.numel() == 0 {
        (lo, hi)
    } else {
        match a.extrema(&flat).await? {
            Some(histogram::Extrema::Range(lo, hi)) => (lo, hi),
            Some(histogram::Extrema::NaN) => (f64::NAN, f64::NAN),
            _ => return Ok(None),
        }
    };
    let (lo, hi) = crate::ops::reduce::histogram::histc_range(lo, hi).map_err(|e| a.err(e))?;
    histogram::encode_histc(&mut a.kc(), &flat, bins, lo as f32, hi as f32)
}

/// unique: the units grouped on the GPU, the number of unique ones read back, then the
/// outputs of that length; the ones not asked for are empty `[0]` tensors, as torch's.
async fn unique(a: &mut At<'_, '_>) -> Out {
    use super::kernels::unique;
    let Some(x) = a.arg_tensor("self")? else {
        return Ok(None);
    };
    let p = crate::ops::sort::unique::UniqueParams::of(&a.ctx())?;
    if !gatherable(a, &x) {
        return Ok(None);
    }
    let Some(g) = unique::group(&mut a.kc(), &x, p.dim, p.consecutive)? else {
        return Ok(None);
    };
    let n = match &g.counted {
        Some(c) => a.read_count(c).await?,
        None => 0,
    };
    let n = usize::try_from(n).map_err(|_| {
        a.err(format!(
            "the GPU counted {n} unique values (a kernel fault)"
        ))
    })?;
    let k = &mut a.kc();
    let Some([values, inverse, counts]) = unique::finish(k, &g, n)? else {
        return Ok(None);
    };
    let inverse = if p.inverse {
        inverse
    } else {
        k.new_out(DType::I64, &[0])?
    };
    let mut outs = vec![Slot::Tensor(values), Slot::Tensor(inverse)];
    if !p.two_outputs {
        let counts = if p.counts {
            counts
        } else {
            k.new_out(DType::I64, &[0])?
        };
        outs.push(Slot::Tensor(counts));
    }
    Ok(Some(outs))
}
