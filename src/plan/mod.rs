//! Plans: a program prepared once, run many times.
//!
//! Two levels, as tract's `SimplePlan` and tinygrad's JIT split them:
//! - A [`GraphPlan`] per graph (the program's and each `cond`/`while_loop`/`map` subgraph):
//!   the node order, every node bound to its CPU kernel from the op table, and liveness
//!   (which values die after each step). It depends only on the graph, so it is built once
//!   per session and shared by every input signature and by the CPU and GPU executors.
//! - A [`Plan`] per input [`Signature`] (user-input dtypes and sizes, and the values of
//!   scalar inputs): the dynamic symbols bound and the guards checked once, the meta pass's
//!   dtype and size of every value, and its memory estimate. Sessions keep Plans in a
//!   [`PlanCache`] bounded to [`DEFAULT_PLAN_CAPACITY`] signatures (least recently used
//!   goes first): a new batch size or sequence length makes a new Plan, not a new Program.
//!
//! A warm run with a known signature looks its Plan up (one hash of the signature) and
//! walks the steps: no op-table lookups, no liveness analysis, no guard evaluation. The
//! guards are functions of the input shapes alone (torch.export's guards are), so a
//! signature that passed them once passes them again.

mod bind;
pub mod budget;
mod prepared;
pub use bind::bind_signature;
pub use prepared::Prepared;

use crate::dtype::DType;
use crate::meta::{Inferred, MValue, MemoryEstimate};
use crate::ops::Kernel;
use crate::program::{Graph, Program};
use crate::runtime::RValue;
use crate::sym::Bindings;
use std::collections::HashMap;
use std::sync::Arc;

/// One user input as far as planning cares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum InputSig {
    Tensor {
        dtype: DType,
        sizes: Vec<usize>,
    },
    Int(i64),
    /// A float input, by its bits.
    Float(u64),
    Bool(bool),
    Str(String),
    /// None, a list of tensors or a data-dependent value: planned by its kind.
    Other(&'static str),
}

/// The user inputs of one call, in flattened pytree order.
pub type Signature = Vec<InputSig>;

/// The signature of CPU values.
pub fn signature(inputs: &[RValue]) -> Signature {
    inputs
        .iter()
        .map(|v| match v {
            RValue::Tensor(t) => InputSig::Tensor {
                dtype: t.dtype,
                sizes: t.sizes.clone(),
            },
            RValue::Int(i) => InputSig::Int(*i),
            RValue::Float(f) => InputSig::Float(f.to_bits()),
            RValue::Bool(b) => InputSig::Bool(*b),
            RValue::Str(s) => InputSig::Str(s.clone()),
            other => InputSig::Other(other.kind()),
        })
        .collect()
}

/// The signature of meta values (shapes without data, as `Session::prepare` takes them).
pub fn meta_signature(inputs: &[MValue]) -> Signature {
    inputs
        .iter()
        .map(|v| match v {
            MValue::Tensor(t) => InputSig::Tensor {
                dtype: t.dtype,
                sizes: t.sizes.clone(),
            },
            MValue::Int(i) => InputSig::Int(*i),
            MValue::Float(f) => InputSig::Float(f.to_bits()),
            MValue::Bool(b) => InputSig::Bool(*b),
            MValue::Str(s) => InputSig::Str(s.clone()),
            other => InputSig::Other(other.kind()),
        })
        .collect()
}

/// Dense zero-filled placeholders (a GPU prepare pass binds them as a run binds its
/// inputs), refusing any input of more than `max_bytes` before allocating it.
pub fn dense_placeholders(sig: &[InputSig], max_bytes: u64) -> crate::Result<Vec<RValue>> {
    let mut i = 0;
    placeholders_with(sig, |dtype, sizes| {
        i += 1;
        let bytes = sizes
            .iter()
            .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d as u64))
            .unwrap_or(u64::MAX);
        if bytes > max_bytes {
            return Err(crate::Error::Input {
                input: format!("#{}", i - 1),
                msg: format!(
                    "shape {sizes:?} of {dtype} is {bytes} bytes, more than the device's \
                     {max_bytes}"
                ),
            });
        }
        crate::cpu::Tensor::zeros(dtype, sizes)
    })
}

fn placeholders_with(
    sig: &[InputSig],
    mut tensor: impl FnMut(DType, &[usize]) -> crate::Result<crate::cpu::Tensor>,
) -> crate::Result<Vec<RValue>> {
    sig.iter()
        .map(|s| {
            Ok(match s {
                InputSig::Tensor { dtype, sizes } => RValue::Tensor(tensor(*dtype, sizes)?),
                InputSig::Int(i) => RValue::Int(*i),
                InputSig::Float(f) => RValue::Float(f64::from_bits(*f)),
                InputSig::Bool(b) => RValue::Bool(*b),
                InputSig::Str(s) => RValue::Str(s.clone()),
                InputSig::Other(_) => RValue::None,
            })
        })
        .collect()
}

/// The meta values of a signature.
pub fn metas(sig: &[InputSig]) -> Vec<MValue> {
    sig.iter()
        .map(|s| match s {
            InputSig::Tensor { dtype, sizes } => {
                MValue::Tensor(crate::meta::MetaTensor::new(*dtype, sizes.clone()))
            }
            InputSig::Int(i) => MValue::Int(*i),
            InputSig::Float(f) => MValue::Float(f64::from_bits(*f)),
            InputSig::Bool(b) => MValue::Bool(*b),
            InputSig::Str(s) => MValue::Str(s.clone()),
            InputSig::Other(_) => MValue::None,
        })
        .collect()
}

/// One node of a [`GraphPlan`].
#[derive(Debug, Clone)]
pub struct Step {
    /// Index into `graph.nodes`.
    pub node: usize,
    /// The node's CPU kernel (None: the op table has none; running the step is an error
    /// naming the op, and `pt2web check` lists it before any run).
    pub kernel: Option<Kernel>,
    /// Value ids the node reads (its tensor and symbolic arguments, lists flattened).
    pub reads: Vec<usize>,
    /// Values whose last reader is this node: dropped right after it.
    pub frees: Vec<usize>,
}

/// A graph bound to its kernels, with liveness (see the module doc).
#[derive(Debug)]
pub struct GraphPlan {
    pub steps: Vec<Step>,
    /// The graph this plan was built for (`nodes` address and count), so a plan is never
    /// applied to another graph.
    identity: (usize, usize),
}

impl GraphPlan {
    pub fn build(graph: &Graph) -> GraphPlan {
        let table = crate::ops::table();
        let n = graph.values.len();
        let mut last_use = vec![usize::MAX; n];
        let mut reads_of = Vec::with_capacity(graph.nodes.len());
        for (i, node) in graph.nodes.iter().enumerate() {
            let mut ids = Vec::new();
            node.inputs.iter().for_each(|(_, a)| a.values(&mut ids));
            ids.sort_unstable();
            ids.dedup();
            for &id in &ids {
                if id < n {
                    last_use[id] = i;
                }
            }
            reads_of.push(ids);
        }
        for a in &graph.outputs {
            let mut ids = Vec::new();
            a.values(&mut ids);
            ids.into_iter()
                .filter(|&id| id < n)
                .for_each(|id| last_use[id] = usize::MAX);
        }
        let steps = graph
            .nodes
            .iter()
            .zip(reads_of)
            .enumerate()
            .map(|(i, (node, reads))| Step {
                node: i,
                kernel: table.kernel_for(node, graph),
                frees: reads
                    .iter()
                    .copied()
                    .filter(|&id| last_use[id] == i)
                    .collect(),
                reads,
            })
            .collect();
        GraphPlan {
            steps,
            identity: graph_identity(graph),
        }
    }

    /// Whether this plan was built for `graph`.
    pub fn is_for(&self, graph: &Graph) -> bool {
        self.identity == graph_identity(graph)
    }
}

fn graph_identity(graph: &Graph) -> (usize, usize) {
    (graph.nodes.as_ptr() as usize, graph.nodes.len())
}

/// The [`GraphPlan`]s of one program's graphs, built on first use and kept for the
/// program's life (keyed by the graph's address inside the program, which a session holds
/// in an `Arc` and never mutates).
#[derive(Debug, Default)]
pub struct GraphPlans {
    by_graph: HashMap<(usize, usize), Arc<GraphPlan>>,
}

impl GraphPlans {
    /// The plan of `graph`, built now if it has none yet.
    pub fn get(&mut self, graph: &Graph) -> Arc<GraphPlan> {
        self.by_graph
            .entry(graph_identity(graph))
            .or_insert_with(|| Arc::new(GraphPlan::build(graph)))
            .clone()
    }
    /// Plans built so far (the program's graph and the subgraphs that ran).
    pub fn len(&self) -> usize {
        self.by_graph.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_graph.is_empty()
    }
    /// Steps of every plan built so far.
    pub fn steps(&self) -> usize {
        self.by_graph.values().map(|p| p.steps.len()).sum()
    }
}

/// A program prepared for one input signature (see the module doc).
#[derive(Debug)]
pub struct Plan {
    pub signature: Signature,
    /// The dynamic symbols bound from the signature (guards already checked).
    pub bindings: Bindings,
    /// The meta pass over the signature: every value's dtype and sizes. `Err` holds why it
    /// stopped (an op without a shape rule); the CPU and GPU still run such a program.
    pub meta: std::result::Result<Inferred, String>,
    /// Parameter, buffer and constant bytes, and the peak of live activations, where the
    /// meta pass finished.
    pub memory: Option<MemoryEstimate>,
    /// Nodes of the program's graph.
    pub steps: usize,
    /// Milliseconds spent building this Plan (on the GPU: pipelines and bind groups too).
    pub prepare_ms: f64,
}

impl Plan {
    /// Build the signature-specific part: the meta pass and the memory estimate. The
    /// caller has bound `bindings` by checking the inputs against the program's guards.
    pub fn build(program: &Program, signature: Signature, bindings: Bindings) -> Plan {
        let start = crate::runtime::profile::now_ms();
        let meta = crate::meta::infer(program, &metas(&signature)).map_err(|e| e.to_string());
        let memory = meta
            .as_ref()
            .ok()
            .map(|inf| crate::meta::estimate(program, inf));
        Plan {
            signature,
            bindings,
            meta,
            memory,
            steps: program.graph.nodes.len(),
            prepare_ms: crate::runtime::profile::now_ms() - start,
        }
    }
}

/// How many signatures a session keeps Plans for, unless set with
/// `Session::set_plan_capacity`.
pub const DEFAULT_PLAN_CAPACITY: usize = 8;

/// Plans by signature, least recently used first out.
#[derive(Debug)]
pub struct PlanCache {
    capacity: usize,
    /// Most recently used last.
    plans: Vec<Arc<Plan>>,
    /// Lookups that found a Plan / had to build one.
    pub hits: u64,
    pub misses: u64,
}

impl Default for PlanCache {
    fn default() -> Self {
        PlanCache::new(DEFAULT_PLAN_CAPACITY)
    }
}

impl PlanCache {
    pub fn new(capacity: usize) -> PlanCache {
        PlanCache {
            capacity: capacity.max(1),
            plans: Vec::new(),
            hits: 0,
            misses: 0,
        }
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Keep at most `n` (at least 1) Plans; the least recently used go first.
    pub fn set_capacity(&mut self, n: usize) {
        self.capacity = n.max(1);
        self.evict();
    }
    pub fn len(&self) -> usize {
        self.plans.len()
    }
    pub fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }
    /// The Plan of `sig`, marked most recently used. (A linear scan: the cache holds a
    /// handful of signatures, and the most recent one, checked first, is the usual hit.)
    pub fn get(&mut self, sig: &[InputSig]) -> Option<Arc<Plan>> {
        let i = self.plans.iter().rposition(|p| p.signature == sig)?;
        if i + 1 != self.plans.len() {
            let p = self.plans.remove(i);
            self.plans.push(p);
        }
        self.plans.last().cloned()
    }
    pub fn insert(&mut self, plan: Arc<Plan>) {
        self.plans.retain(|p| p.signature != plan.signature);
        self.plans.push(plan);
        self.evict();
    }
    fn evict(&mut self) {
        while self.plans.len() > self.capacity {
            self.plans.remove(0);
        }
    }
    /// Every cached Plan, least recently used first.
    pub fn plans(&self) -> &[Arc<Plan>] {
        &self.plans
    }
    pub fn clear(&mut self) {
        self.plans.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(n: usize) -> Arc<Plan> {
        Arc::new(Plan {
            signature: vec![InputSig::Int(n as i64)],
            bindings: Bindings::new(),
            meta: Err("test".into()),
            memory: None,
            steps: 0,
            prepare_ms: 0.0,
        })
    }

    #[test]
    fn cache_is_bounded_and_keeps_the_recently_used() {
        let mut c = PlanCache::new(2);
        c.insert(plan(1));
        c.insert(plan(2));
        assert!(c.get(&[InputSig::Int(1)]).is_some()); // 1 is now the most recent
        c.insert(plan(3)); // evicts 2
        assert_eq!(c.len(), 2);
        assert!(c.get(&[InputSig::Int(2)]).is_none());
        assert!(c.get(&[InputSig::Int(1)]).is_some());
        assert!(c.get(&[InputSig::Int(3)]).is_some());
        c.set_capacity(1);
        assert_eq!(c.len(), 1);
        assert!(c.get(&[InputSig::Int(3)]).is_some());
    }
}
