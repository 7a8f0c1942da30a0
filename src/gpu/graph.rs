//! Walking one graph on the GPU: each step of its plan runs its GPU kernel, its control-flow
//! handler or (fallback) its CPU kernel, with the values that die after it freed.

use super::kernels::{self, GpuOp, KernelCtx};
use super::runner::{Runner, Slot, DRY_STOP};
use super::store::{lock, GTensor};
use crate::error::{Error, Result};
use crate::ops::OpCtx;
use crate::program::{Arg, Graph};
use crate::runtime::{RValue, RunState};
use std::collections::HashMap;
use std::sync::Arc;

/// What runs each step of a graph on the GPU, resolved once per graph: the op of
/// [`super::dynamic`] (control flow, readbacks), the GPU kernel, or neither (the CPU kernel).
#[derive(Debug)]
pub(crate) struct GpuGraphPlan {
    pub(super) base: Arc<crate::plan::GraphPlan>,
    pub(super) ops: Vec<(Option<super::dynamic::Dynamic>, Option<GpuOp>)>,
}

/// [`GpuGraphPlan`]s by graph (as [`crate::plan::GraphPlans`]).
#[derive(Debug, Default)]
pub struct GpuPlans {
    by_graph: HashMap<(usize, usize), Arc<GpuGraphPlan>>,
}

impl GpuPlans {
    pub(super) fn get(&mut self, graph: &Graph, st: &mut RunState) -> Arc<GpuGraphPlan> {
        let key = (graph.nodes.as_ptr() as usize, graph.nodes.len());
        self.by_graph
            .entry(key)
            .or_insert_with(|| {
                let base = st.graph_plans.get(graph);
                let ops = base
                    .steps
                    .iter()
                    .map(|s| {
                        let node = &graph.nodes[s.node];
                        let t = &node.target;
                        // Nodes with complex tensors run the complex table's kernels (complex64;
                        // complex128 falls back: no such kernels take it).
                        if crate::ops::touches_complex(node, graph) {
                            return (None, kernels::complex::complex_entry(t).map(|e| e.op));
                        }
                        (super::dynamic::Dynamic::of(t), kernels::lookup(t))
                    })
                    .collect();
                Arc::new(GpuGraphPlan { base, ops })
            })
            .clone()
    }
}

/// The environment of one graph run: tensors as GPU tensors, everything else as values.
pub struct Env {
    pub t: Vec<Option<GTensor>>,
    pub v: Vec<Option<RValue>>,
}

impl Env {
    pub(super) fn bind(&mut self, graph: &Graph, a: &Arg, s: Slot) -> Result<()> {
        match (a, s) {
            (Arg::None, _) => {}
            (Arg::Tensor(id), Slot::Tensor(t)) => self.t[*id] = Some(t),
            (Arg::Tensor(id), Slot::Tensors(mut ts)) if ts.len() == 1 => {
                self.t[*id] = Some(ts.remove(0))
            }
            (Arg::Tensors(ids), Slot::Tensors(ts)) => {
                if ids.len() > ts.len() {
                    return Err(Error::Verify(format!(
                        "expected {} tensors, got {}",
                        ids.len(),
                        ts.len()
                    )));
                }
                for (id, t) in ids.iter().zip(ts) {
                    self.t[*id] = Some(t);
                }
            }
            (Arg::OptTensors(ids), Slot::OptTensors(ts)) => {
                for (id, t) in ids.iter().zip(ts) {
                    if let (Some(id), Some(t)) = (id, t) {
                        self.t[*id] = Some(t);
                    }
                }
            }
            (Arg::OptTensors(ids), Slot::Tensors(ts)) => {
                for (id, t) in ids.iter().zip(ts) {
                    if let Some(id) = id {
                        self.t[*id] = Some(t);
                    }
                }
            }
            (
                Arg::SymInt(crate::program::IntArg::Sym(id)),
                Slot::Value(v @ (RValue::Int(_) | RValue::Float(_))),
            )
            | (Arg::SymFloat(crate::program::FloatArg::Sym(id)), Slot::Value(v))
            | (Arg::SymBool(crate::program::BoolArg::Sym(id)), Slot::Value(v))
            | (Arg::CustomObj(id), Slot::Value(v)) => self.v[*id] = Some(v),
            (
                Arg::Int(_)
                | Arg::Float(_)
                | Arg::Bool(_)
                | Arg::Str(_)
                | Arg::SymInt(crate::program::IntArg::Int(_)),
                _,
            ) => {}
            (a, s) => {
                let mut ids = Vec::new();
                a.values(&mut ids);
                let name = ids
                    .first()
                    .map(|i| graph.value(*i).name.clone())
                    .unwrap_or_default();
                let kind = match s {
                    Slot::Tensor(_) => "Tensor",
                    Slot::Tensors(_) => "Tensor[]",
                    Slot::OptTensors(_) => "Tensor?[]",
                    Slot::Value(v) => v.kind(),
                    Slot::Meta(_) => "meta value",
                };
                return Err(Error::Verify(format!(
                    "cannot bind a {kind} to '{name}' ({a:?})"
                )));
            }
        }
        Ok(())
    }

    pub(super) fn get(&self, graph: &Graph, id: usize) -> Result<Slot> {
        if let Some(t) = &self.t[id] {
            return Ok(Slot::Tensor(t.clone()));
        }
        self.v[id].clone().map(Slot::Value).ok_or_else(|| {
            Error::Verify(format!(
                "output '{}' was never computed",
                graph.value(id).name
            ))
        })
    }
}

/// An op's name without its overload ends in `_` (`add_`, `copy_`), or it is an `out=`
/// overload: the op writes into an input.
fn mutates_inputs(target: &str) -> bool {
    let mut parts = target.rsplitn(2, '.');
    let overload = parts.next().unwrap_or("");
    let op = parts.next().unwrap_or("");
    op.ends_with('_') || overload == "out" || overload.starts_with("out_")
}

/// Run a graph on the GPU with its placeholders bound to `inputs`.
pub async fn run_graph(
    r: &mut Runner<'_>,
    graph: &Graph,
    inputs: Vec<Slot>,
    st: &mut RunState,
) -> Result<Vec<Slot>> {
    if inputs.len() != graph.inputs.len() {
        return Err(Error::Verify(format!(
            "graph takes {} inputs, got {}",
            graph.inputs.len(),
            inputs.len()
        )));
    }
    let n = graph.values.len();
    let mut env = Env {
        t: vec![None; n],
        v: vec![None; n],
    };
    for (a, s) in graph.inputs.iter().zip(inputs) {
        env.bind(graph, a, s)?;
    }
    let plan = r.plans.get(graph, st);
    // A prepare pass in the browser hands the page its event loop every few milliseconds.
    #[cfg(target_arch = "wasm32")]
    let mut last_yield = crate::runtime::profile::now_ms();
    for (step, &(dynamic, gop)) in plan.base.steps.iter().zip(&plan.ops) {
        #[cfg(target_arch = "wasm32")]
        if r.dry && crate::runtime::profile::now_ms() - last_yield > 8.0 {
            super::wait::yield_to_page().await;
            last_yield = crate::runtime::profile::now_ms();
        }
        let node = &graph.nodes[step.node];
        st.stop.check(&node.name)?;
        // Memory history names this node in what it allocates and frees (`memory.rs`).
        let dev = r.dev;
        let _frame = dev.memory_frame(&node.target, &node.name);
        let ids = &step.reads;
        // Profiled runs: host time per node (GPU kernels get GPU timestamps from the
        // timer instead, where the device has them).
        let t0 = st.profiler.as_ref().map(|p| p.elapsed());
        let verbose_t0 = r
            .verbose
            .as_ref()
            .map(|log| (log.start_node(), crate::runtime::profile::now_ms()));
        let mut on_gpu = false;
        // Control flow and data-dependent sizes: GPU work with readbacks (see `dynamic`).
        let mut outs = match dynamic {
            Some(d) => crate::runtime::guarded_async(
                node,
                super::dynamic::run(r, node, graph, &mut env, st, d),
            )
            .await
            .map_err(|e| match e {
                e @ (Error::Op { .. }
                | Error::OutOfMemory { .. }
                | Error::Gpu(_)
                | Error::Limit { .. }
                | Error::Cancelled { .. }
                | Error::Internal { .. }) => e,
                e => Error::op(&node.target, e),
            })?,
            None => None,
        };
        if outs.is_some() {
            on_gpu = true;
            r.stats.gpu_nodes += 1;
        } else if let Some(op) = gop {
            let is_view = matches!(op, GpuOp::View);
            let op_ctx = OpCtx {
                node,
                graph,
                env: &env.v,
                state: st,
            };
            let dispatched = r.stats.dispatches;
            let mut k = KernelCtx::new(r, &env.t, op_ctx);
            outs = crate::runtime::guarded(node, || kernels::run(&mut k, op)).map_err(
                |e| match e {
                    e @ (Error::Op { .. }
                    | Error::OutOfMemory { .. }
                    | Error::Gpu(_)
                    | Error::Internal { .. }) => e,
                    e => Error::op(&node.target, e),
                },
            )?;
            if outs.is_some() {
                on_gpu = true;
                // A view that had to copy (a reshape of strides it cannot view) is a
                // kernel like any other.
                if is_view && r.stats.dispatches == dispatched {
                    r.stats.view_nodes += 1;
                } else {
                    r.stats.gpu_nodes += 1;
                }
            }
        }
        let outs = match outs {
            Some(o) => o,
            None if r.dry => return Err(Error::Gpu(DRY_STOP.into())),
            None => {
                let kernel = step
                    .kernel
                    .ok_or_else(|| crate::passes::decompose::unsupported(node, "gpu"))?;
                let gts: Vec<(usize, GTensor)> = ids
                    .iter()
                    .filter_map(|&id| env.t[id].clone().map(|t| (id, t)))
                    .collect();
                let cpu = r
                    .to_cpu_all(&gts.iter().map(|(_, t)| t).collect::<Vec<_>>())
                    .await?;
                let mut cells = Vec::new();
                for ((id, t), c) in gts.into_iter().zip(cpu) {
                    env.v[id] = Some(RValue::Tensor(c));
                    cells.push(t.cell);
                }
                let res = {
                    let mut ctx = OpCtx {
                        node,
                        graph,
                        env: &env.v,
                        state: st,
                    };
                    crate::runtime::guarded(node, || kernel(&mut ctx))
                };
                for &id in ids {
                    if env.t[id].is_some() {
                        env.v[id] = None;
                    }
                }
                let res = res?;
                if mutates_inputs(&node.target) {
                    cells.iter().for_each(|c| lock(c).gpu_valid = false);
                }
                *r.stats.fallbacks.entry(node.target.clone()).or_default() += 1;
                res.into_iter().map(|v| r.rvalue_to_slot(v)).collect()
            }
        };
        if let (Some((mark, v0)), Some(log)) = (verbose_t0, r.verbose.as_mut()) {
            // Host time to record the node's dispatches (or to run its CPU fallback).
            let ms = crate::runtime::profile::now_ms() - v0;
            let inputs = ids.iter().map(|&id| match (env.t.get(id), env.v.get(id)) {
                (Some(Some(t)), _) => Some((t.dtype, t.sizes.as_slice())),
                (_, Some(Some(RValue::Tensor(t)))) => Some((t.dtype, t.sizes.as_slice())),
                _ => None,
            });
            log.end_node(mark, node, inputs, on_gpu, ms);
        }
        if let (Some(p), Some(t0)) = (st.profiler.as_mut(), t0) {
            let cat = match (on_gpu, r.timer.is_some()) {
                (true, true) => None,
                (true, false) => Some("gpu-host"),
                (false, _) => Some("fallback"),
            };
            if let Some(cat) = cat {
                p.events.push(crate::runtime::OpEvent {
                    node: node.name.clone(),
                    target: node.target.clone(),
                    start_ms: t0,
                    dur_ms: p.elapsed() - t0,
                    depth: p.depth,
                    cat,
                });
            }
        }
        st.nodes_run += 1;
        if outs.len() < node.outputs.len() {
            return Err(Error::op(
                &node.target,
                format!(
                    "kernel returned {} values for {} outputs",
                    outs.len(),
                    node.outputs.len()
                ),
            ));
        }
        for (a, s) in node.outputs.iter().zip(outs) {
            env.bind(graph, a, s)
                .map_err(|e| Error::op(&node.target, e))?;
        }
        for &id in &step.frees {
            env.t[id] = None;
            env.v[id] = None;
        }
    }
    graph
        .outputs
        .iter()
        .map(|a| match a {
            Arg::Tensor(id) | Arg::SymInt(crate::program::IntArg::Sym(id)) => env.get(graph, *id),
            Arg::SymInt(crate::program::IntArg::Int(i)) | Arg::Int(i) => {
                Ok(Slot::Value(RValue::Int(*i)))
            }
            Arg::Tensors(ids) => Ok(Slot::Tensors(
                ids.iter()
                    .map(|id| match env.get(graph, *id)? {
                        Slot::Tensor(t) => Ok(t),
                        _ => Err(Error::Verify("not a tensor".into())),
                    })
                    .collect::<Result<_>>()?,
            )),
            Arg::Float(f) => Ok(Slot::Value(RValue::Float(*f))),
            Arg::Bool(b) => Ok(Slot::Value(RValue::Bool(*b))),
            Arg::None => Ok(Slot::Value(RValue::None)),
            other => Err(Error::Verify(format!("unsupported graph output {other:?}"))),
        })
        .collect()
}
