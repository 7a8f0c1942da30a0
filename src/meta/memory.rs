//! Memory estimate from the meta pass: the bytes of the state (parameters, buffers, constants)
//! and the peak of live activations, with each value freed after its last use (as the
//! interpreter frees them). Views (`view`, `permute`, `slice`, `expand`...) and in-place ops
//! (`add_`...) share their input's storage, as on the CPU backend: they add no bytes and keep
//! their base alive until their own last use. Everything else is counted as a new tensor.

use super::{Inferred, MValue};
use crate::program::{Arg, InputKind, Program, StateKind};
use serde::Serialize;

/// Bytes a program needs for one call with given input shapes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryEstimate {
    pub parameter_bytes: u64,
    pub buffer_bytes: u64,
    pub constant_bytes: u64,
    /// Constants the graph passes derived from the state (folded batch norms,
    /// `pt2web_folded.*`): not in the program's state as torch saved it.
    pub derived_bytes: u64,
    /// User inputs (live until their last use).
    pub input_bytes: u64,
    /// The most bytes of inputs and intermediate values alive at once.
    pub peak_activation_bytes: u64,
    /// The node at which the peak is reached (its FX name).
    pub peak_node: Option<String>,
    /// State, derived constants and peak activations.
    pub total_bytes: u64,
    /// Whether some sizes depend on tensor data (their upper bound was counted).
    pub data_dependent: bool,
}

fn bytes_of(v: &MValue) -> (u64, bool) {
    match v {
        MValue::Tensor(t) => (t.nbytes(), t.data_dependent),
        MValue::Tensors(ts) => ts.iter().fold((0, false), |(b, d), t| {
            (b.saturating_add(t.nbytes()), d || t.data_dependent)
        }),
        MValue::OptTensors(ts) => ts.iter().flatten().fold((0, false), |(b, d), t| {
            (b.saturating_add(t.nbytes()), d || t.data_dependent)
        }),
        _ => (0, false),
    }
}

/// Estimate from a finished meta pass over `program`'s top-level graph.
pub fn estimate(program: &Program, inferred: &Inferred) -> MemoryEstimate {
    let mut state = [0u64; 4];
    // Tensors sharing one storage (tied weights, views of a buffer) are counted once, with
    // the storage's full size.
    let mut seen = std::collections::BTreeSet::new();
    for (fqn, e) in &program.state {
        if !seen.insert(e.tensor.storage.id()) {
            continue;
        }
        let b = e.tensor.storage.len() as u64;
        let slot = match e.kind {
            _ if fqn.starts_with(crate::passes::FOLDED_PREFIX) => 3,
            StateKind::Parameter => 0,
            StateKind::Buffer { .. } => 1,
            StateKind::Constant => 2,
        };
        state[slot] = state[slot].saturating_add(b);
    }
    let g = &program.graph;
    let n = g.nodes.len();
    // The storage each value lives in: its own, or its base's for views.
    let mut root: Vec<usize> = (0..g.values.len()).collect();
    for node in &g.nodes {
        if !is_view(&node.target) {
            continue;
        }
        let Some(base) = node.inputs.iter().find_map(|(_, a)| match a {
            Arg::Tensor(id) => Some(*id),
            _ => None,
        }) else {
            continue;
        };
        let r = root.get(base).copied().unwrap_or(base);
        let mut outs = Vec::new();
        node.outputs.iter().for_each(|a| a.values(&mut outs));
        for id in outs {
            if let Some(slot) = root.get_mut(id) {
                *slot = r;
            }
        }
    }
    // Last use of each storage (graph outputs live to the end).
    let mut last_use = vec![None::<usize>; g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        let mut ids = Vec::new();
        node.inputs.iter().for_each(|(_, a)| a.values(&mut ids));
        for id in ids {
            let r = root.get(id).copied().unwrap_or(id);
            if let Some(s) = last_use.get_mut(r) {
                *s = Some(i);
            }
        }
    }
    for a in &g.outputs {
        let mut ids = Vec::new();
        a.values(&mut ids);
        for id in ids {
            let r = root.get(id).copied().unwrap_or(id);
            if let Some(s) = last_use.get_mut(r) {
                *s = Some(n);
            }
        }
    }
    let value_bytes = |id: usize| -> (u64, bool) {
        inferred
            .values
            .get(id)
            .and_then(|v| v.as_ref())
            .map(bytes_of)
            .unwrap_or((0, false))
    };
    let mut live = 0u64;
    let mut input_bytes = 0u64;
    let mut data_dependent = false;
    // User inputs are live from the start.
    let user: std::collections::BTreeSet<&str> = program
        .inputs
        .iter()
        .filter(|s| s.kind == InputKind::User)
        .map(|s| s.name.as_str())
        .collect();
    for a in &g.inputs {
        if let Arg::Tensor(id) = a {
            if user.contains(g.value(*id).name.as_str()) {
                let (b, _) = value_bytes(*id);
                input_bytes = input_bytes.saturating_add(b);
                live = live.saturating_add(b);
            }
        }
    }
    let mut free_at: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for a in &g.inputs {
        if let Arg::Tensor(id) = a {
            if user.contains(g.value(*id).name.as_str()) {
                if let Some(Some(u)) = last_use.get(*id) {
                    free_at[*u].push(*id);
                }
            }
        }
    }
    let mut peak = live;
    let mut peak_node = None;
    for (i, node) in g.nodes.iter().enumerate() {
        let mut outs = Vec::new();
        node.outputs.iter().for_each(|a| a.values(&mut outs));
        for id in outs {
            let (b, d) = value_bytes(id);
            data_dependent |= d;
            if root.get(id).is_some_and(|&r| r != id) {
                // A view: no new storage; its base's last use already covers it.
                continue;
            }
            // Saturating: a hostile program's sizes only make the estimate "too much".
            live = live.saturating_add(b);
            match last_use.get(id).copied().flatten() {
                Some(u) => free_at[u].push(id),
                // Never read: freed right after the node.
                None => free_at[i].push(id),
            }
        }
        if live > peak {
            peak = live;
            peak_node = Some(node.name.clone());
        }
        for id in std::mem::take(&mut free_at[i]) {
            live = live.saturating_sub(value_bytes(id).0);
        }
    }
    let state_total = state.iter().fold(0u64, |a, &b| a.saturating_add(b));
    MemoryEstimate {
        parameter_bytes: state[0],
        buffer_bytes: state[1],
        constant_bytes: state[2],
        derived_bytes: state[3],
        input_bytes,
        peak_activation_bytes: peak,
        peak_node,
        total_bytes: state_total.saturating_add(peak),
        data_dependent,
    }
}

/// Ops whose output shares the storage of their first tensor argument on the CPU backend.
pub(crate) fn is_view(target: &str) -> bool {
    let op = target
        .strip_prefix("aten.")
        .and_then(|t| t.split('.').next())
        .unwrap_or("");
    const VIEWS: &[&str] = &[
        "view",
        "_unsafe_view",
        "alias",
        "detach",
        "permute",
        "transpose",
        "swapaxes",
        "swapdims",
        "t",
        "numpy_T",
        "mT",
        "adjoint",
        "expand",
        "expand_as",
        "broadcast_to",
        "slice",
        "select",
        "narrow",
        "squeeze",
        "unsqueeze",
        "unflatten",
        "as_strided",
        "diagonal",
        "unfold",
        "split",
        "split_with_sizes",
        "unbind",
        "chunk",
        "tensor_split",
        "movedim",
        "moveaxis",
        "view_as",
        "_reshape_alias",
    ];
    VIEWS.contains(&op) || (op.ends_with('_') && !op.starts_with('_'))
}
