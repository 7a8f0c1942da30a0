//! The GPU executor: runs a program's graph with the CPU [`Session`]'s semantics (same input
//! checks and guards, buffer mutations written back, user-input mutations applied), with
//! every node that has a GPU kernel for its dtypes encoded into one command buffer and every
//! other node run by its CPU kernel (inputs downloaded, the op run, results kept on the CPU
//! until a GPU kernel needs them). A fallback flushes the command buffer (one more submit).
//! Control flow (`cond`, `while_loop`, `map`), `item` and the ops with data-dependent output
//! sizes run on the GPU with a readback of the words the host needs (see [`super::dynamic`]):
//! one more submit each, not a fallback.
//!
//! Views (`view`, `permute`, `slice`, `expand`...) are metadata only: the CPU view kernel
//! runs on a placeholder tensor with the same sizes and strides (zero-filled storage the OS
//! allocates lazily), and when its result shares the placeholder's storage the GPU tensor
//! becomes the same view of its GPU buffer. When the CPU kernel had to copy (a `reshape`
//! of a non-contiguous tensor), the node runs as a fallback.

use super::device::GpuDevice;
use super::kernels::{self, GpuOp, KernelCtx};
use super::store::{cpu_store, from_gpu_bytes, gpu_bytes, lock, to_gpu_bytes, Cell, GTensor};
use crate::cpu::Tensor;
use crate::error::{Error, Result};
use crate::ops::OpCtx;
use crate::program::{Arg, Graph, InputKind, OutputKind, Program};
use crate::runtime::{Inputs, RValue, RunState, Session};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, Weak};

/// Counters of one run (`pt2web run --json` prints them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Command buffers submitted.
    pub submits: u64,
    /// Buffers created from the driver (pool misses).
    pub buffer_allocations: u64,
    /// Compute pipelines created (cache misses).
    pub pipelines_created: u64,
    /// Bind groups created (cache misses; see the device module's doc).
    pub bind_groups_created: u64,
    /// Dispatches encoded.
    pub dispatches: u64,
    /// Most bytes of pt2web's buffers in use at once during the run (weights included). A
    /// replayed run reports its recording's: the same buffers hold the same tensors at the
    /// same points (the device's own peak, `max_memory_allocated`, counts every buffer of
    /// the tape as taken for the whole replay).
    pub peak_bytes: u64,
    /// The largest kernel scratch buffer of the run (a convolution's `im2col` columns): memory
    /// the graph's liveness does not see.
    pub workspace_bytes: u64,
    /// Nodes run by a GPU kernel.
    pub gpu_nodes: u64,
    /// View nodes handled as GPU metadata (no data moved).
    pub view_nodes: u64,
    /// Nodes run by their CPU kernel, by target.
    pub fallbacks: BTreeMap<String, u64>,
    /// Stores uploaded to / downloaded from the GPU.
    pub uploads: u64,
    pub downloads: u64,
    /// Steps of the Plan the run walked (nodes of the program's graph).
    pub plan_steps: u64,
    /// Host time of the run outside waits for the GPU, microseconds: input checks,
    /// encoding every node, uploads, submits and copying outputs out.
    pub host_us: u64,
    /// Time spent waiting for the GPU (readbacks), microseconds.
    pub wait_us: u64,
    /// Whether the run replayed a recorded tape of dispatches (see `gpu::tape`).
    pub replayed: bool,
}

impl RunStats {
    pub fn fallback_nodes(&self) -> u64 {
        self.fallbacks.values().sum()
    }
    pub fn add(&mut self, o: &RunStats) {
        self.submits += o.submits;
        self.buffer_allocations += o.buffer_allocations;
        self.pipelines_created += o.pipelines_created;
        self.bind_groups_created += o.bind_groups_created;
        self.dispatches += o.dispatches;
        self.peak_bytes = self.peak_bytes.max(o.peak_bytes);
        self.workspace_bytes = self.workspace_bytes.max(o.workspace_bytes);
        self.gpu_nodes += o.gpu_nodes;
        self.view_nodes += o.view_nodes;
        self.uploads += o.uploads;
        self.downloads += o.downloads;
        self.plan_steps += o.plan_steps;
        self.host_us += o.host_us;
        self.wait_us += o.wait_us;
        for (k, v) in &o.fallbacks {
            *self.fallbacks.entry(k.clone()).or_default() += v;
        }
    }
}

/// A value of the GPU executor's environment.
#[derive(Clone, Debug)]
pub enum Slot {
    Tensor(GTensor),
    Tensors(Vec<GTensor>),
    OptTensors(Vec<Option<GTensor>>),
    Value(RValue),
}

/// Per-run encoder state: the open command encoder and what it holds on to.
pub struct Runner<'d> {
    pub dev: &'d GpuDevice,
    enc: Option<wgpu::CommandEncoder>,
    held: Vec<super::device::GpuBuffer>,
    pub stats: RunStats,
    /// GPU timestamps per dispatch while the run is profiled (see [`super::timing`]).
    pub(crate) timer: Option<super::timing::GpuTimer>,
    /// CPU storage address -> store, so CPU views map back to the store they view.
    ident: &'d mut HashMap<usize, Weak<std::sync::Mutex<super::store::Store>>>,
    /// The GPU side of each graph's plan (see [`GpuGraphPlan`]).
    plans: &'d mut GpuPlans,
    /// A prepare pass ([`GpuSession::prepare`]): pipelines and bind groups are created and
    /// buffers taken from the pool as a run would, but nothing is encoded or submitted, and
    /// the pass stops where a run would read anything back.
    pub(crate) dry: bool,
    /// What the run encodes and uploads, while it is recorded for a [`super::tape::Tape`].
    pub(crate) rec: Option<super::tape::Recording>,
}

/// Why a prepare pass stopped early (at a readback or a CPU fallback).
const DRY_STOP: &str = "prepare stops here: the node needs values the GPU computes";

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
    fn get(&mut self, graph: &Graph, st: &mut RunState) -> Arc<GpuGraphPlan> {
        let key = (graph.nodes.as_ptr() as usize, graph.nodes.len());
        self.by_graph
            .entry(key)
            .or_insert_with(|| {
                let base = st.graph_plans.get(graph);
                let ops = base
                    .steps
                    .iter()
                    .map(|s| {
                        let t = &graph.nodes[s.node].target;
                        (super::dynamic::Dynamic::of(t), kernels::lookup(t))
                    })
                    .collect();
                Arc::new(GpuGraphPlan { base, ops })
            })
            .clone()
    }
}

fn addr(d: &Arc<RwLock<crate::cpu::Data>>) -> usize {
    Arc::as_ptr(d) as usize
}

/// Start mapping a whole buffer for reading; the future resolves when it is mapped.
pub(super) fn map_read(buf: &wgpu::Buffer) -> impl std::future::Future<Output = Result<()>> {
    let (tx, rx) = super::wait::channel();
    buf.slice(..)
        .map_async(wgpu::MapMode::Read, move |r| tx.send(r));
    async move {
        rx.await
            .map_err(|e| Error::Gpu(format!("mapping a readback buffer: {e}")))
    }
}

impl<'d> Runner<'d> {
    pub fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        self.enc.get_or_insert_with(|| {
            self.dev
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        })
    }

    /// Keep a buffer alive until the next submit (kernel parameters).
    pub fn hold(&mut self, b: super::device::GpuBuffer) {
        self.held.push(b);
    }

    /// Submit what is encoded.
    pub fn flush(&mut self) -> Result<()> {
        if self.dry {
            // Nothing of a prepare pass runs; freed buffers become free as after a submit.
            self.enc = None;
            self.held.clear();
            self.dev.recycle();
            return Ok(());
        }
        if let Some(enc) = self.enc.take() {
            self.dev.queue.submit([enc.finish()]);
            self.stats.submits += 1;
            self.held.clear();
            self.dev.recycle();
            self.dev.take_error()?;
        }
        Ok(())
    }

    /// The GPU tensor for a CPU tensor (the same store when its storage is already known).
    pub fn wrap(&mut self, t: &Tensor) -> GTensor {
        let key = addr(&t.data);
        let cell = match self.ident.get(&key).and_then(Weak::upgrade) {
            Some(c)
                if lock(&c)
                    .cpu
                    .as_ref()
                    .is_some_and(|d| Arc::ptr_eq(d, &t.data)) =>
            {
                c
            }
            _ => {
                let c = cpu_store(t);
                self.ident.insert(key, Arc::downgrade(&c));
                c
            }
        };
        GTensor {
            cell,
            dtype: t.dtype,
            sizes: t.sizes.clone(),
            strides: t.strides.clone(),
            offset: t.offset,
        }
    }

    /// Make the store's GPU copy current. `what` names the tensor in errors.
    pub fn upload(&mut self, cell: &Cell, what: &str) -> Result<()> {
        if lock(cell).gpu_valid {
            return Ok(());
        }
        // A re-upload must not overtake encoded work that still reads the old contents.
        if lock(cell).gpu.is_some() {
            self.flush()?;
        }
        let mut s = lock(cell);
        let data = s
            .cpu
            .clone()
            .filter(|_| s.cpu_valid)
            .ok_or_else(|| Error::Gpu(format!("internal: {what} has no current copy")))?;
        let bytes = to_gpu_bytes(&data.read().unwrap_or_else(|e| e.into_inner()), what)?;
        if s.gpu.is_none() {
            s.gpu = Some(self.dev.alloc(gpu_bytes(s.dtype, s.len), what)?);
        }
        if !bytes.is_empty() {
            let buf = s.gpu.as_ref().map(|b| b.buffer().clone());
            if let Some(b) = buf {
                self.dev.queue.write_buffer(&b, 0, &bytes);
            }
        }
        s.gpu_valid = true;
        self.stats.uploads += 1;
        if let (Some(rec), Some(b)) = (&mut self.rec, s.gpu.as_ref()) {
            rec.uploads.push(super::tape::Upload {
                store: Arc::downgrade(cell),
                buffer: b.buffer().clone(),
                class: b.size(),
                dtype: s.dtype,
                len: s.len,
                bytes,
            });
        }
        Ok(())
    }

    /// Make the CPU copies of `cells` current: one copy per stale store into a staging
    /// buffer, encoded after the pending work, one submit, then one wait for all of them
    /// (natively a blocking poll; in the browser the future yields to the event loop).
    pub async fn download(&mut self, cells: &[Cell]) -> Result<()> {
        if self.dry {
            return Err(Error::Gpu(DRY_STOP.into()));
        }
        let mut pending: Vec<(Cell, super::device::GpuBuffer, usize, crate::DType)> = Vec::new();
        for cell in cells {
            if pending.iter().any(|(c, ..)| Arc::ptr_eq(c, cell)) {
                continue;
            }
            let (buf, len, dtype) = {
                let s = lock(cell);
                if s.cpu_valid {
                    continue;
                }
                let b = s
                    .gpu
                    .as_ref()
                    .filter(|_| s.gpu_valid)
                    .map(|b| b.buffer().clone())
                    .ok_or_else(|| Error::Gpu("internal: a tensor has no current copy".into()))?;
                (b, s.len, s.dtype)
            };
            let bytes = gpu_bytes(dtype, len);
            let staging = self.dev.alloc_readback(bytes)?;
            self.encoder()
                .copy_buffer_to_buffer(&buf, 0, staging.buffer(), 0, bytes);
            pending.push((cell.clone(), staging, len, dtype));
        }
        if pending.is_empty() {
            return Ok(());
        }
        self.flush()?;
        let waits: Vec<_> = pending
            .iter()
            .map(|(_, st, ..)| map_read(st.buffer()))
            .collect();
        let wait_start = crate::runtime::profile::now_ms();
        #[cfg(not(target_arch = "wasm32"))]
        self.dev
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("waiting for a readback: {e}")))?;
        for w in waits {
            w.await?;
        }
        self.stats.wait_us += ((crate::runtime::profile::now_ms() - wait_start) * 1e3) as u64;
        for (cell, staging, len, dtype) in pending {
            let data = {
                let view = staging
                    .buffer()
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| Error::Gpu(format!("reading a readback buffer: {e}")))?;
                from_gpu_bytes(dtype, &view, len)?
            };
            staging.buffer().unmap();
            let mut s = lock(&cell);
            match &s.cpu {
                Some(d) => *d.write().unwrap_or_else(|e| e.into_inner()) = data,
                None => {
                    let d = Arc::new(RwLock::new(data));
                    self.ident.insert(addr(&d), Arc::downgrade(&cell));
                    s.cpu = Some(d);
                }
            }
            s.cpu_valid = true;
            self.stats.downloads += 1;
        }
        Ok(())
    }

    /// CPU tensors with the current contents of `ts` (one readback for all of them).
    pub async fn to_cpu_all(&mut self, ts: &[&GTensor]) -> Result<Vec<Tensor>> {
        let cells: Vec<Cell> = ts.iter().map(|t| t.cell.clone()).collect();
        self.download(&cells).await?;
        ts.iter().map(|t| t.cpu_view()).collect()
    }

    /// A CPU tensor with the current contents of `t`.
    pub async fn to_cpu(&mut self, t: &GTensor) -> Result<Tensor> {
        self.download(std::slice::from_ref(&t.cell)).await?;
        t.cpu_view()
    }

    /// The GPU tensors a slot holds.
    fn slot_tensors<'s>(s: &'s Slot, out: &mut Vec<&'s GTensor>) {
        match s {
            Slot::Tensor(t) => out.push(t),
            Slot::Tensors(ts) => out.extend(ts.iter()),
            Slot::OptTensors(ts) => out.extend(ts.iter().flatten()),
            Slot::Value(_) => {}
        }
    }

    /// Slots as CPU values; every tensor among them read back in one submit.
    async fn slots_to_rvalues(&mut self, slots: &[Slot]) -> Result<Vec<RValue>> {
        let mut ts = Vec::new();
        slots.iter().for_each(|s| Self::slot_tensors(s, &mut ts));
        let cells: Vec<Cell> = ts.iter().map(|t| t.cell.clone()).collect();
        self.download(&cells).await?;
        slots
            .iter()
            .map(|s| {
                Ok(match s {
                    Slot::Tensor(t) => RValue::Tensor(t.cpu_view()?),
                    Slot::Tensors(ts) => {
                        RValue::Tensors(ts.iter().map(|t| t.cpu_view()).collect::<Result<_>>()?)
                    }
                    Slot::OptTensors(ts) => RValue::OptTensors(
                        ts.iter()
                            .map(|t| t.as_ref().map(|t| t.cpu_view()).transpose())
                            .collect::<Result<_>>()?,
                    ),
                    Slot::Value(v) => v.clone(),
                })
            })
            .collect()
    }

    fn rvalue_to_slot(&mut self, v: RValue) -> Slot {
        match v {
            RValue::Tensor(t) => Slot::Tensor(self.wrap(&t)),
            RValue::Tensors(ts) => Slot::Tensors(ts.iter().map(|t| self.wrap(t)).collect()),
            RValue::OptTensors(ts) => Slot::OptTensors(
                ts.iter()
                    .map(|t| t.as_ref().map(|t| self.wrap(t)))
                    .collect(),
            ),
            other => Slot::Value(other),
        }
    }
}

/// The environment of one graph run: tensors as GPU tensors, everything else as values.
pub struct Env {
    pub t: Vec<Option<GTensor>>,
    pub v: Vec<Option<RValue>>,
}

impl Env {
    fn bind(&mut self, graph: &Graph, a: &Arg, s: Slot) -> Result<()> {
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
                };
                return Err(Error::Verify(format!(
                    "cannot bind a {kind} to '{name}' ({a:?})"
                )));
            }
        }
        Ok(())
    }

    fn get(&self, graph: &Graph, id: usize) -> Result<Slot> {
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
    for (step, &(dynamic, gop)) in plan.base.steps.iter().zip(&plan.ops) {
        let node = &graph.nodes[step.node];
        let ids = &step.reads;
        // Profiled runs: host time per node (GPU kernels get GPU timestamps from the
        // timer instead, where the device has them).
        let t0 = st.profiler.as_ref().map(|p| p.elapsed());
        let mut on_gpu = false;
        // Control flow and data-dependent sizes: GPU work with readbacks (see `dynamic`).
        let mut outs = match dynamic {
            Some(d) => super::dynamic::run(r, node, graph, &mut env, st, d)
                .await
                .map_err(|e| match e {
                    e @ (Error::Op { .. } | Error::OutOfMemory { .. } | Error::Gpu(_)) => e,
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
            let mut k = KernelCtx::new(r, &env.t, op_ctx);
            outs = kernels::run(&mut k, op).map_err(|e| match e {
                e @ (Error::Op { .. } | Error::OutOfMemory { .. } | Error::Gpu(_)) => e,
                e => Error::op(&node.target, e),
            })?;
            if outs.is_some() {
                on_gpu = true;
                if is_view {
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
                let kernel = step.kernel.ok_or_else(|| {
                    Error::op(
                        &node.target,
                        "not supported on the gpu device yet (see `pt2web check`)",
                    )
                })?;
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
                    kernel(&mut ctx)
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

/// What [`GpuSession::prepare`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrepareStats {
    /// Wall time of the prepare call (Plan, meta pass, pipeline and bind-group creation).
    pub prepare_ms: f64,
    /// Compute pipelines and bind groups it created.
    pub pipelines_created: u64,
    pub bind_groups_created: u64,
    /// Steps of the program's Plan.
    pub plan_steps: u64,
    /// Where the prepare pass stopped before the end of the graph, if it did.
    pub stopped: Option<String>,
}

/// A user input of [`GpuSession::run_with`].
#[derive(Debug, Clone)]
pub enum GpuInput {
    /// A CPU value (uploaded when a GPU kernel needs it).
    Cpu(RValue),
    /// A tensor already on this session's device (e.g. a kept output).
    Gpu(GTensor),
}

/// The plan signature of GPU-session inputs.
fn gpu_signature(inputs: &[GpuInput]) -> crate::plan::Signature {
    inputs
        .iter()
        .map(|i| match i {
            GpuInput::Cpu(v) => crate::plan::signature(std::slice::from_ref(v)).remove(0),
            GpuInput::Gpu(t) => crate::plan::InputSig::Tensor {
                dtype: t.dtype,
                sizes: t.sizes.clone(),
            },
        })
        .collect()
}

/// Read one GPU tensor back to the CPU (e.g. a kept output).
pub async fn read_tensor(dev: &GpuDevice, t: &GTensor) -> Result<Tensor> {
    let mut ident = HashMap::new();
    let mut plans = GpuPlans::default();
    let mut r = Runner {
        dev,
        enc: None,
        held: Vec::new(),
        stats: RunStats::default(),
        ident: &mut ident,
        plans: &mut plans,
        dry: false,
        rec: None,
        timer: None,
    };
    let c = r.to_cpu(t).await?;
    Ok(c.contiguous())
}

/// The outputs a run reads back: user outputs and the mutations written back to state.
fn read_back(k: &OutputKind) -> bool {
    matches!(
        k,
        OutputKind::User
            | OutputKind::BufferMutation { .. }
            | OutputKind::ParameterMutation { .. }
            | OutputKind::UserInputMutation { .. }
    )
}

/// A loaded program ready to run on a GPU device. Holds the CPU [`Session`] (program, state
/// as the CPU reference copy, guards) and GPU views of the state, uploaded once.
pub struct GpuSession {
    pub cpu: Session,
    pub device: Arc<GpuDevice>,
    state: BTreeMap<String, GTensor>,
    ident: HashMap<usize, Weak<std::sync::Mutex<super::store::Store>>>,
    plans: GpuPlans,
    /// Counters of the last run.
    pub last_stats: RunStats,
    /// Counters summed over every run (and the weight upload).
    pub total_stats: RunStats,
    /// What the last [`GpuSession::prepare`] did.
    pub last_prepare: Option<PrepareStats>,
    /// Warm runs replayed from a recording (see [`super::tape`]).
    tapes: super::tape::Tapes,
}

impl GpuSession {
    pub fn new(program: Program, device: Arc<GpuDevice>) -> Result<GpuSession> {
        let cpu = Session::new(program)?;
        let mut s = GpuSession {
            cpu,
            device,
            state: BTreeMap::new(),
            ident: HashMap::new(),
            plans: GpuPlans::default(),
            last_stats: RunStats::default(),
            total_stats: RunStats::default(),
            last_prepare: None,
            tapes: Default::default(),
        };
        let dev = s.device.clone();
        let before = dev.memory_stats().buffers_created;
        let mut r = Runner {
            dev: &dev,
            enc: None,
            held: Vec::new(),
            stats: RunStats::default(),
            timer: None,
            ident: &mut s.ident,
            plans: &mut s.plans,
            dry: false,
            rec: None,
        };
        // Weights go up once; tensors sharing a storage share one GPU buffer.
        for (fqn, t) in &s.cpu.state {
            let g = r.wrap(t);
            if g.dtype == crate::DType::F32 {
                r.upload(&g.cell, &format!("parameter '{fqn}'"))?;
            }
            s.state.insert(fqn.clone(), g);
        }
        r.flush()?;
        r.stats.buffer_allocations = dev.memory_stats().buffers_created - before;
        let stats = r.stats;
        s.total_stats.add(&stats);
        Ok(s)
    }

    /// A parameter, buffer or constant as it is now: read back from the GPU when the GPU
    /// copy is the current one (in-place updates of a training-IR program), else the CPU's.
    pub async fn state_tensor_async(&self, name: &str) -> Result<Tensor> {
        let t = self.state.get(name).ok_or_else(|| Error::Input {
            input: name.to_string(),
            msg: "no parameter, buffer or constant of that name".into(),
        })?;
        read_tensor(&self.device, t).await
    }

    /// [`GpuSession::state_tensor_async`], blocking (native).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn state_tensor(&self, name: &str) -> Result<Tensor> {
        pollster::block_on(self.state_tensor_async(name))
    }

    /// Seed the random ops' generator (shared with the CPU session: same seed, same streams).
    pub fn manual_seed(&mut self, seed: u64) {
        self.cpu.manual_seed(seed)
    }
    /// Seed from the clock; returns the seed.
    pub fn seed(&mut self) -> u64 {
        self.cpu.seed()
    }
    /// The seed the generator started from.
    pub fn initial_seed(&self) -> u64 {
        self.cpu.initial_seed()
    }
    /// The generator state (see [`Session::get_rng_state`]).
    pub fn get_rng_state(&self) -> Vec<u8> {
        self.cpu.get_rng_state()
    }
    /// Restore a generator state.
    pub fn set_rng_state(&mut self, bytes: &[u8]) -> Result<()> {
        self.cpu.set_rng_state(bytes)
    }

    /// Run with flattened user inputs (pytree order); returns flattened user outputs (CPU).
    /// Blocks until the GPU is done (native; in the browser use [`GpuSession::run_async`]).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run(&mut self, inputs: Inputs) -> Result<Vec<RValue>> {
        pollster::block_on(self.run_async(inputs))
    }

    /// [`GpuSession::run`] as a future: with no CPU fallback in the program, the whole run
    /// (kernels and the readback of outputs and mutated buffers) is one submit and one wait.
    pub async fn run_async(&mut self, inputs: Inputs) -> Result<Vec<RValue>> {
        let inputs = inputs.into_iter().map(GpuInput::Cpu).collect();
        let outs = self.run_with(inputs, false).await?;
        outs.into_iter()
            .map(|s| match s {
                Slot::Value(v) => Ok(v),
                _ => Err(Error::Gpu("internal: an output was not read back".into())),
            })
            .collect()
    }

    /// Run with user inputs that may already be on the GPU (kept outputs of an earlier run).
    /// `keep`: user outputs stay on the GPU (`Slot::Tensor`, nothing read back for them; buffer
    /// mutations are still written back to the state); otherwise they come back as
    /// `Slot::Value` CPU values.
    pub async fn run_with(&mut self, inputs: Vec<GpuInput>, keep: bool) -> Result<Vec<Slot>> {
        self.run_inner(inputs, keep, false).await
    }

    /// Prepare the program for user inputs of these dtypes and shapes without running it:
    /// the CPU session's Plan (guards checked, meta pass; see [`Session::prepare`]), then a
    /// prepare pass over the GPU steps that creates every compute pipeline and bind group
    /// a run with this signature uses and leaves the buffer pool as that run will find it,
    /// so the first run creates no pipelines. Nothing is submitted: the pass costs host time
    /// only. It stops early where a run needs values the GPU computes (a CPU fallback, a
    /// readback for control flow or a data-dependent size); the rest is created by the
    /// first run ([`PrepareStats::stopped`] says where).
    pub async fn prepare_async(&mut self, inputs: &[crate::meta::MValue]) -> Result<PrepareStats> {
        let start = crate::runtime::profile::now_ms();
        let sig = crate::plan::meta_signature(inputs);
        self.cpu.plan_for(sig.clone(), None)?;
        let dev = self.device.clone();
        let pipes_before = dev.pipelines_created();
        let groups_before = dev.bind_groups_created();
        // A prepare pass draws no random numbers and records no profile.
        let rng = self.cpu.run_state.rng.clone();
        let profiler = self.cpu.run_state.profiler.take();
        let nodes_run = self.cpu.run_state.nodes_run;
        let (last, total) = (self.last_stats.clone(), self.total_stats.clone());
        let mut stopped = None;
        // Twice when the first pass had to create buffers: the second starts from the pool a
        // run will start from, so its bind groups are the ones that run binds.
        for _ in 0..2 {
            let created = dev.memory_stats().buffers_created;
            let placeholders: Vec<GpuInput> = crate::plan::placeholders(&sig)?
                .into_iter()
                .map(GpuInput::Cpu)
                .collect();
            stopped = self
                .run_inner(placeholders, false, true)
                .await
                .err()
                .map(|e| e.to_string());
            dev.recycle();
            if dev.memory_stats().buffers_created == created {
                break;
            }
        }
        self.cpu.run_state.rng = rng;
        self.cpu.run_state.profiler = profiler;
        self.cpu.run_state.nodes_run = nodes_run;
        self.last_stats = last;
        self.total_stats = total;
        let stats = PrepareStats {
            prepare_ms: crate::runtime::profile::now_ms() - start,
            pipelines_created: dev.pipelines_created() - pipes_before,
            bind_groups_created: dev.bind_groups_created() - groups_before,
            plan_steps: self.cpu.program.graph.nodes.len() as u64,
            stopped,
        };
        self.last_prepare = Some(stats.clone());
        Ok(stats)
    }

    /// [`GpuSession::prepare_async`], blocking (native).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn prepare(&mut self, inputs: &[crate::meta::MValue]) -> Result<PrepareStats> {
        pollster::block_on(self.prepare_async(inputs))
    }

    /// Run the session's tape for `sig`, if it has one that can run now (see
    /// [`super::tape`]); the user outputs as CPU values.
    async fn replay(
        &mut self,
        sig: &crate::plan::Signature,
        inputs: &[RValue],
        run_start: f64,
    ) -> Result<Option<Vec<Slot>>> {
        let Some(tape) = self.tapes.get(sig, inputs) else {
            return Ok(None);
        };
        let dev = self.device.clone();
        let before = dev.memory_stats().buffers_created;
        let Some(done) = super::tape::replay(&dev, &tape, inputs).await? else {
            // Its buffers are in use elsewhere (or were released): run the executor.
            self.tapes.drop_tape();
            return Ok(None);
        };
        self.cpu.run_state.nodes_run += tape.nodes_run;
        let host_us = (((crate::runtime::profile::now_ms() - run_start) * 1e3) as u64)
            .saturating_sub(done.wait_us);
        let stats = RunStats {
            submits: 1,
            buffer_allocations: dev.memory_stats().buffers_created - before,
            dispatches: tape.dispatches.len() as u64,
            peak_bytes: tape.peak_bytes,
            workspace_bytes: tape.workspace_bytes,
            gpu_nodes: tape.gpu_nodes,
            view_nodes: tape.view_nodes,
            uploads: done.uploads,
            downloads: done.downloads,
            plan_steps: self.cpu.program.graph.nodes.len() as u64,
            host_us,
            wait_us: done.wait_us,
            replayed: true,
            ..Default::default()
        };
        self.total_stats.add(&stats);
        self.last_stats = stats;
        Ok(Some(done.outputs.into_iter().map(Slot::Value).collect()))
    }

    async fn run_inner(
        &mut self,
        inputs: Vec<GpuInput>,
        keep: bool,
        dry: bool,
    ) -> Result<Vec<Slot>> {
        let run_start = crate::runtime::profile::now_ms();
        // In the browser, validation errors arrive asynchronously: catch this run's in a
        // scope so they fail this run, not a later one (natively the uncaptured-error
        // handler is checked after every submit).
        #[cfg(target_arch = "wasm32")]
        let scope = self
            .device
            .device
            .push_error_scope(wgpu::ErrorFilter::Validation);
        // The Plan of this signature (a GPU input counts as a tensor of its dtype and sizes):
        // inputs checked against the guards once per signature.
        let sig = gpu_signature(&inputs);
        let plan = self.cpu.plan_for(sig.clone(), None)?;
        self.cpu.run_state.bindings = plan.bindings.clone();
        let p = self.cpu.program.clone();
        let dev = self.device.clone();
        let cpu_inputs: Option<Vec<RValue>> = inputs
            .iter()
            .map(|i| match i {
                GpuInput::Cpu(v) => Some(v.clone()),
                GpuInput::Gpu(_) => None,
            })
            .collect();
        let replayable = !dry
            && !keep
            && self.cpu.run_state.profiler.is_none()
            && !crate::backends::deterministic()
            && !super::tape::writes_state(&p);
        if let (true, Some(values)) = (replayable, &cpu_inputs) {
            if let Some(outs) = self.replay(&sig, values, run_start).await? {
                return Ok(outs);
            }
        }
        let record = replayable && cpu_inputs.is_some() && self.tapes.may_record(&sig);
        let before = dev.memory_stats().buffers_created;
        let pipes_before = dev.pipelines_created();
        let groups_before = dev.bind_groups_created();
        dev.start_peak_window();
        let mut r = Runner {
            dev: &dev,
            enc: None,
            held: Vec::new(),
            stats: RunStats::default(),
            timer: self
                .cpu
                .run_state
                .profiler
                .as_ref()
                .and_then(|p| super::timing::GpuTimer::new(&dev, p.elapsed())),
            ident: &mut self.ident,
            plans: &mut self.plans,
            dry,
            rec: record.then(super::tape::Recording::default),
        };
        let mut user = inputs.iter();
        let mut graph_inputs = Vec::with_capacity(p.inputs.len());
        for spec in &p.inputs {
            graph_inputs.push(match &spec.kind {
                InputKind::User => match user.next() {
                    Some(GpuInput::Cpu(v)) => r.rvalue_to_slot(v.clone()),
                    Some(GpuInput::Gpu(t)) => Slot::Tensor(t.clone()),
                    None => Slot::Value(RValue::None),
                },
                InputKind::Parameter { name }
                | InputKind::Buffer { name, .. }
                | InputKind::Constant { name } => Slot::Tensor(
                    self.state
                        .get(name)
                        .cloned()
                        .ok_or_else(|| Error::Verify(format!("state '{name}' missing")))?,
                ),
                InputKind::ConstantValue { value } => Slot::Value(match value {
                    crate::schema::ConstantValue::AsInt(i) => RValue::Int(*i),
                    crate::schema::ConstantValue::AsFloat(f) => RValue::Float(f.0),
                    crate::schema::ConstantValue::AsBool(b) => RValue::Bool(*b),
                    crate::schema::ConstantValue::AsString(s) => RValue::Str(s.clone()),
                    crate::schema::ConstantValue::AsNone(_) => RValue::None,
                }),
                InputKind::Token => Slot::Value(RValue::None),
                InputKind::CustomObj { name } => {
                    return Err(Error::op(
                        "custom object",
                        format!("'{name}' (torchbind objects are not supported)"),
                    ))
                }
            });
        }
        // A recorded run names its user inputs' stores (weakly: it must not change when
        // they are freed) to find the buffers they were uploaded to.
        let held_inputs: Vec<Option<Weak<std::sync::Mutex<super::store::Store>>>> = if record {
            p.inputs
                .iter()
                .zip(&graph_inputs)
                .filter(|(spec, _)| spec.kind == InputKind::User)
                .map(|(_, s)| match s {
                    Slot::Tensor(t) => Some(Arc::downgrade(&t.cell)),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        let (reads_before, nodes_before) =
            (super::tape::host_reads(), self.cpu.run_state.nodes_run);
        let outs = run_graph(&mut r, &p.graph, graph_inputs, &mut self.cpu.run_state).await?;
        if dry {
            // The prepare pass walked the whole graph: what is left (reading outputs back,
            // writing mutations to the state) creates no pipelines.
            return Ok(Vec::new());
        }
        let user_names: Vec<String> = p.user_inputs().iter().map(|u| u.name.clone()).collect();
        // Outputs and mutations come back together: one copy each, one submit, one wait.
        let wanted: Vec<Slot> = p
            .outputs
            .iter()
            .zip(&outs)
            .filter(|(spec, _)| read_back(&spec.kind) && !(keep && spec.kind == OutputKind::User))
            .map(|(_, s)| s.clone())
            .collect();
        let mut values = r.slots_to_rvalues(&wanted).await?.into_iter();
        let mut result = Vec::new();
        for (spec, out) in p.outputs.iter().zip(&outs) {
            if !read_back(&spec.kind) {
                continue;
            }
            if keep && spec.kind == OutputKind::User {
                result.push(out.clone());
                continue;
            }
            let v = values.next().unwrap_or(RValue::None);
            match &spec.kind {
                OutputKind::User => result.push(Slot::Value(v)),
                OutputKind::BufferMutation { buffer }
                | OutputKind::ParameterMutation { parameter: buffer } => {
                    let RValue::Tensor(t) = v else { continue };
                    match self.cpu.state.get(buffer) {
                        Some(old) if old.sizes == t.sizes => {
                            old.copy_from(&t)?;
                            // The CPU copy is now the current one for every view of it.
                            if let Some(sg) = self.state.get(buffer) {
                                lock(&sg.cell).gpu_valid = false;
                            }
                        }
                        _ => {
                            let g = r.wrap(&t);
                            self.cpu.state.insert(buffer.clone(), t);
                            self.state.insert(buffer.clone(), g);
                        }
                    }
                }
                OutputKind::UserInputMutation { input } => {
                    let RValue::Tensor(t) = v else { continue };
                    if let Some(i) = user_names.iter().position(|n| n == input) {
                        if let GpuInput::Gpu(_) = &inputs[i] {
                            return Err(Error::Input {
                                input: input.clone(),
                                msg: "the program mutates this input in place, which a \
                                      GPU-resident input does not support: pass a CPU tensor"
                                    .into(),
                            });
                        }
                        if let GpuInput::Cpu(RValue::Tensor(dst)) = &inputs[i] {
                            dst.copy_from(&t)?;
                            // The caller's tensor may be a store of this run: invalidate it.
                            if let Some(c) = r.ident.get(&addr(&dst.data)).and_then(Weak::upgrade) {
                                lock(&c).gpu_valid = false;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        r.flush()?;
        if let (Some(t), Some(p)) = (r.timer.take(), self.cpu.run_state.profiler.as_mut()) {
            t.finish(&dev, p).await?;
        }
        r.stats.buffer_allocations = dev.memory_stats().buffers_created - before;
        r.stats.pipelines_created = dev.pipelines_created() - pipes_before;
        r.stats.bind_groups_created = dev.bind_groups_created() - groups_before;
        r.stats.peak_bytes = dev.peak_window();
        r.stats.plan_steps = plan.steps as u64;
        r.stats.host_us = (((crate::runtime::profile::now_ms() - run_start) * 1e3) as u64)
            .saturating_sub(r.stats.wait_us);
        let stats = std::mem::take(&mut r.stats);
        if let Some(rec) = r.rec.take() {
            let user_outs: Vec<&Slot> = p
                .outputs
                .iter()
                .zip(&outs)
                .filter(|(spec, _)| spec.kind == OutputKind::User)
                .map(|(_, s)| s)
                .collect();
            let clean = stats.fallbacks.is_empty()
                && stats.submits == 1
                && super::tape::host_reads() == reads_before;
            let recorded = clean
                .then(|| {
                    super::tape::Tape::from_run(
                        sig,
                        rec,
                        &held_inputs,
                        &user_outs,
                        &self.state,
                        &stats,
                        self.cpu.run_state.nodes_run - nodes_before,
                    )
                })
                .flatten();
            self.tapes.recorded(recorded);
        }
        drop(held_inputs);
        self.ident.retain(|_, w| w.strong_count() > 0);
        self.total_stats.add(&stats);
        self.last_stats = stats;
        #[cfg(target_arch = "wasm32")]
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu(e.to_string()));
        }
        Ok(result)
    }
}
