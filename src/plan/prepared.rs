//! Weights prepared once: a kernel's derived form of a weight (a GEMM's packed panels) kept
//! between runs, keyed by the node that reads it.
//!
//! Only values that cannot change between runs are prepared: the program graph's
//! parameters, buffers and constants that no output of the graph signature mutates (and
//! that share no storage with one that is mutated). Each entry keeps the weight tensor it
//! was derived from and is used only while the node still reads that very storage (same
//! `Arc`, sizes, strides and offset): a session whose state tensor was replaced derives it
//! again. Writing into a frozen state tensor in place is not supported (it is a parameter
//! of an exported inference program; mutated ones are never frozen).

use crate::cpu::Tensor;
use crate::program::{Graph, InputKind, Program};
use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

struct Entry {
    source: Tensor,
    derived: Arc<dyn Any + Send + Sync>,
    bytes: usize,
}

/// Derived weights of one session (see the module doc).
#[derive(Default)]
pub struct Prepared {
    /// Per graph (`nodes` address and count: the program's, and the producer subgraphs of
    /// its fused epilogue nodes), whether each value id is frozen.
    frozen: HashMap<(usize, usize), Vec<bool>>,
    /// By (node address, value id).
    entries: HashMap<(usize, usize), Entry>,
    /// Derivations made (first runs, or a state tensor replaced).
    pub made: u64,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("entries", &self.entries.len())
            .field("bytes", &self.bytes())
            .field("made", &self.made)
            .finish()
    }
}

impl Prepared {
    /// Mark the frozen values of `program`'s graph, whose state tensors are `state`.
    pub fn freeze(&mut self, program: &Program, state: &BTreeMap<String, Tensor>) {
        let graph = &program.graph;
        let mutated = program.mutated_state();
        let storage = |t: &Tensor| Arc::as_ptr(&t.data) as *const () as usize;
        let mutated_storage: HashSet<usize> = mutated
            .iter()
            .filter_map(|n| state.get(n).map(storage))
            .collect();
        let mut frozen = vec![false; graph.values.len()];
        for (spec, arg) in program.inputs.iter().zip(&graph.inputs) {
            let name = match &spec.kind {
                InputKind::Parameter { name }
                | InputKind::Buffer { name, .. }
                | InputKind::Constant { name } => name,
                _ => continue,
            };
            let Some(t) = state.get(name) else { continue };
            if mutated.contains(name.as_str()) || mutated_storage.contains(&storage(t)) {
                continue;
            }
            let mut ids = Vec::new();
            arg.values(&mut ids);
            for id in ids {
                if let Some(f) = frozen.get_mut(id) {
                    *f = true;
                }
            }
        }
        // A fused epilogue's producer subgraph reads its node's inputs: frozen where they are.
        self.frozen.clear();
        for node in &graph.nodes {
            if node.target != crate::ops::elementwise::epilogue::TARGET {
                continue;
            }
            let Ok(parts) = crate::ops::elementwise::epilogue::Parts::of(node) else {
                continue;
            };
            let sub = parts.producer;
            let mut f = vec![false; sub.values.len()];
            for (arg, &outer) in sub.inputs.iter().zip(parts.producer_inputs()) {
                if frozen.get(outer) == Some(&true) {
                    let mut ids = Vec::new();
                    arg.values(&mut ids);
                    ids.into_iter().for_each(|id| {
                        if let Some(x) = f.get_mut(id) {
                            *x = true;
                        }
                    });
                }
            }
            self.frozen.insert(graph_identity(sub), f);
        }
        self.frozen.insert(graph_identity(graph), frozen);
        self.entries.clear();
    }

    /// Whether value `id` of `graph` is frozen.
    pub fn is_frozen(&self, graph: &Graph, id: usize) -> bool {
        self.frozen
            .get(&graph_identity(graph))
            .is_some_and(|f| f.get(id) == Some(&true))
    }

    /// The form of `weight` (value `id` of `graph`, read by `node`) that `derive` makes,
    /// derived on first use and kept; `None` when the value is not frozen (the caller
    /// derives it per run). `derive` returns the form and the bytes it holds.
    pub fn get_or_derive<T: Any + Send + Sync>(
        &mut self,
        graph: &Graph,
        node: &crate::program::Node,
        id: usize,
        weight: &Tensor,
        derive: impl FnOnce() -> crate::Result<(T, usize)>,
    ) -> crate::Result<Option<Arc<T>>> {
        if !self.is_frozen(graph, id) {
            return Ok(None);
        }
        let key = (node as *const _ as usize, id);
        if let Some(e) = self.entries.get(&key) {
            let s = &e.source;
            if Arc::ptr_eq(&s.data, &weight.data)
                && s.sizes == weight.sizes
                && s.strides == weight.strides
                && s.offset == weight.offset
            {
                if let Ok(d) = e.derived.clone().downcast::<T>() {
                    return Ok(Some(d));
                }
            }
        }
        let (derived, bytes) = derive()?;
        let derived = Arc::new(derived);
        self.made += 1;
        self.entries.insert(
            key,
            Entry {
                source: weight.clone(),
                derived: derived.clone(),
                bytes,
            },
        );
        Ok(Some(derived))
    }

    /// Bytes held by derived weights.
    pub fn bytes(&self) -> usize {
        self.entries.values().map(|e| e.bytes).sum()
    }
    /// Derived weights held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn graph_identity(graph: &Graph) -> (usize, usize) {
    (graph.nodes.as_ptr() as usize, graph.nodes.len())
}
