//! Reinplacing: core ATen writes a buffer update as a functional op whose result the graph
//! returns as a buffer mutation (`index_copy`, `index_put`, `slice_scatter`, `copy` of a
//! static-cache language model's keys and values, a counter, a running statistic). Run as
//! written, each update copies the whole buffer into a new tensor that then replaces the
//! buffer's contents. Reinplaced, the update writes into the buffer's own storage:
//!
//! ```text
//! y = index_copy(b_cache, 1, pos, k)      ->  y = index_copy_(b_cache, 1, pos, k)
//! y = index_put(b_hits, [i], v)           ->  y = index_put_(b_hits, [i], v)
//! y = copy(b_last, x)                     ->  y = copy_(b_last, x)
//! y = slice_scatter(b_v, x, 1, 2, 4)      ->  s = slice(b_v, 1, 2, 4); y = copy_(s, x)
//! ```
//!
//! and every later read of `y`, the mutation output included, reads `b_cache` itself, so the
//! runtimes find the buffer already updated where it lives (no write-back copy; on the GPU
//! no read-back: the state stays on the device).
//!
//! A node is rewritten only where:
//! - its `self` is the placeholder of the buffer (or parameter) its result is the mutation
//!   output of, that result is returned only as that mutation;
//! - no node after it reads the buffer or any view of it (they would see the update), and no
//!   view of the buffer is a graph output;
//! - for `slice_scatter`, the buffer's strides along the sliced dimension are static.
//!
//! Runs last: the other passes leave a graph with in-place writes alone.

use super::functionalize::aliases;
use super::noop::rename;
use crate::program::{
    Arg, Dim, Graph, InputKind, Node, OutputKind, Program, Value, ValueId, ValueKind,
};
use std::collections::HashSet;

/// The functional updates reinplaced, with their in-place forms.
const UPDATES: &[(&str, &str)] = &[
    ("aten.index_copy.default", "aten.index_copy_.default"),
    ("aten.index_put.default", "aten.index_put_.default"),
    ("aten.copy.default", "aten.copy_.default"),
    ("aten.slice_scatter.default", ""),
];

/// Reinplace the buffer updates of `p`'s top-level graph; how many nodes were rewritten.
pub(super) fn run(p: &mut Program) -> usize {
    // (placeholder of the state, mutation output position) for each mutated buffer/parameter.
    let mut targets = Vec::new();
    for (i, spec) in p.outputs.iter().enumerate() {
        let name = match &spec.kind {
            OutputKind::BufferMutation { buffer } => buffer,
            OutputKind::ParameterMutation { parameter } => parameter,
            _ => continue,
        };
        let placeholder = p.inputs.iter().zip(&p.graph.inputs).find_map(|(s, a)| {
            let state = match &s.kind {
                InputKind::Buffer { name, .. } | InputKind::Parameter { name } => name,
                _ => return None,
            };
            match a {
                Arg::Tensor(v) if state == name => Some(*v),
                _ => None,
            }
        });
        if let Some(b) = placeholder {
            targets.push((b, i));
        }
    }
    targets
        .into_iter()
        .filter(|&(b, out)| reinplace(&mut p.graph, b, out))
        .count()
}

/// Reinplace the update whose result is graph output `out`, the new value of placeholder `b`.
fn reinplace(g: &mut Graph, b: ValueId, out: usize) -> bool {
    let Some(Arg::Tensor(y)) = g.outputs.get(out).cloned() else {
        return false;
    };
    let Some(at) = g
        .nodes
        .iter()
        .position(|n| n.outputs.first() == Some(&Arg::Tensor(y)))
    else {
        return false;
    };
    let Some(&(_, in_place)) = UPDATES.iter().find(|(f, _)| *f == g.nodes[at].target) else {
        return false;
    };
    if g.nodes[at].arg("self") != Some(&Arg::Tensor(b)) || !safe(g, b, y, at, out) {
        return false;
    }
    if in_place.is_empty() {
        if !slice_then_copy(g, at, b, y) {
            return false;
        }
    } else {
        g.nodes[at].target = in_place.to_string();
    }
    // Later reads of the update (the mutation output among them) read the buffer itself.
    for n in &mut g.nodes[at + 1..] {
        for (_, a) in &mut n.inputs {
            rename(a, y, b);
        }
    }
    for a in &mut g.outputs {
        rename(a, y, b);
    }
    true
}

/// Whether writing `b` in place at node `at` changes nothing another node or output sees:
/// `y` (the update) is returned only as mutation `out`, and after `at` nothing reads `b` or a
/// view of it, and no view of it is returned.
fn safe(g: &Graph, b: ValueId, y: ValueId, at: usize, out: usize) -> bool {
    let returned = |v: ValueId, out: &mut Vec<usize>| {
        for (i, a) in g.outputs.iter().enumerate() {
            let mut ids = Vec::new();
            a.values(&mut ids);
            if ids.contains(&v) {
                out.push(i);
            }
        }
    };
    let mut y_at = Vec::new();
    returned(y, &mut y_at);
    if y_at != [out] {
        return false;
    }
    // b and every view of it (transitively), in node order.
    let mut aliased: HashSet<ValueId> = HashSet::from([b]);
    let mut ids = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        ids.clear();
        for (_, a) in &n.inputs {
            a.values(&mut ids);
        }
        let reads = ids.iter().any(|v| aliased.contains(v));
        if reads && i > at {
            return false;
        }
        // The update's other operands must not be views of what it writes.
        if i == at {
            ids.clear();
            for (_, a) in n.inputs.iter().filter(|(name, _)| name != "self") {
                a.values(&mut ids);
            }
            if ids.iter().any(|v| aliased.contains(v)) {
                return false;
            }
        }
        if reads && i != at && aliases(&n.target) {
            ids.clear();
            for a in &n.outputs {
                a.values(&mut ids);
            }
            aliased.extend(ids.iter().copied());
        }
    }
    let mut views_returned = Vec::new();
    for &v in &aliased {
        returned(v, &mut views_returned);
    }
    views_returned.is_empty()
}

/// Replace `y = slice_scatter(b, src, dim, start, end, step)` at `at` by
/// `y_view = slice(b, dim, start, end, step); y = copy_(y_view, src)`.
fn slice_then_copy(g: &mut Graph, at: usize, b: ValueId, y: ValueId) -> bool {
    let n = &g.nodes[at];
    let (Some(Arg::Tensor(src)), Some(ValueKind::Tensor { strides, .. })) =
        (n.arg("src").cloned(), Some(g.value(b).kind.clone()))
    else {
        return false;
    };
    let rank = strides.len() as i64;
    let dim = match n.arg("dim") {
        None => 0,
        Some(Arg::Int(d)) => *d,
        Some(_) => return false,
    };
    let step = match n.arg("step") {
        None => 1,
        Some(Arg::Int(s)) if *s > 0 => *s,
        Some(_) => return false,
    };
    let d = if dim < 0 { dim + rank } else { dim };
    let ValueKind::Tensor {
        dtype,
        sizes: src_sizes,
        requires_grad,
        ..
    } = g.value(src).kind.clone()
    else {
        return false;
    };
    let mut view_strides = strides.clone();
    match usize::try_from(d)
        .ok()
        .and_then(|d| view_strides.get_mut(d))
    {
        Some(Dim::Static(s)) => *s *= step,
        _ => return false,
    }
    let view_kind = ValueKind::Tensor {
        dtype,
        sizes: src_sizes,
        strides: view_strides,
        requires_grad,
    };
    let view_name = format!("{}_view", g.value(y).name);
    if g.by_name.contains_key(&view_name) {
        return false;
    }
    let view = g.values.len();
    g.values.push(Value {
        name: view_name.clone(),
        kind: view_kind.clone(),
    });
    g.by_name.insert(view_name.clone(), view);
    // The copy's result is the view it wrote.
    g.values[y].kind = view_kind;
    let old = &g.nodes[at];
    let mut slice_inputs = vec![("self".to_string(), Arg::Tensor(b))];
    for name in ["dim", "start", "end", "step"] {
        if let Some(a) = old.arg(name) {
            slice_inputs.push((name.to_string(), a.clone()));
        }
    }
    let slice = Node {
        name: view_name,
        target: "aten.slice.Tensor".into(),
        inputs: slice_inputs,
        outputs: vec![Arg::Tensor(view)],
        metadata: old.metadata.clone(),
    };
    let copy = Node {
        name: old.name.clone(),
        target: "aten.copy_.default".into(),
        inputs: vec![
            ("self".to_string(), Arg::Tensor(view)),
            ("src".to_string(), Arg::Tensor(src)),
        ],
        outputs: vec![Arg::Tensor(y)],
        metadata: old.metadata.clone(),
    };
    g.nodes.splice(at..=at, [slice, copy]);
    true
}
