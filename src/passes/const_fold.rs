//! Constant folding: the nodes whose results depend only on the program's state run once,
//! when the session is made, on the CPU kernels, and what the rest of the graph reads of
//! them becomes a new constant of the program, `pt2web_folded.<node>` (stored contiguous,
//! in the dtype the kernel gives). Typically weights prepared in `forward`: cast to another
//! dtype, scaled, transposed and copied, concatenated.
//!
//! A node is constant when
//! - it is pure and deterministic: an `aten` op (or `_operator.getitem`) with no in-place
//!   write, no `out=`, no random draw, not an assertion, not `empty*` (uninitialized memory);
//! - every tensor it reads is a parameter, a buffer, a tensor constant (none of them in a
//!   buffer or parameter mutation output, nor sharing storage with one) or a constant
//!   node's result, and its other arguments are written in the graph (nothing symbolic);
//!   the `self` of `full_like`, `zeros_like`, `new_zeros` and the like, which read only its
//!   dtype and sizes, counts as read when those are static (so factories and masks built
//!   from an input's shape fold, like torchvision's shifted-window attention masks);
//! - its results are no graph output, have static sizes, at most 64 MiB each, and the CPU
//!   kernel accepts it and agrees with torch's dtype and sizes (otherwise the node is left
//!   as it was, and after 16 such nodes the whole graph: a load never fails here).
//!
//! An assertion that reads a constant node's result (`_assert_tensor_metadata` after a
//! weight's `.half()`) is checked once, here, and goes when it holds.
//!
//! Which results are stored: views (`view`, `reshape`, `permute`, `t`, `expand`, `slice`,
//! `select`...) cost nothing at run time on either backend, and the GPU matmul kernels pick
//! their fastest form from the strides, so a chain of views of a state tensor is left in
//! the graph. A result is stored when a node outside the constant part reads it and some
//! node between it and the state computes (is neither a view nor a copy that keeps dtype
//! and layout): the last node of the constant chain is the one replaced, so for
//! `x @ w.half().float().t()` the new constant holds the transposed weight and the matmul
//! reads it. A view of a stored result stays a view, of the new constant.
//!
//! Memory stays bounded: a result is not stored when it is larger than 64 MiB, or larger
//! than both 4 MiB and twice the bytes of the state it is computed from
//! (`c.expand(4096, 8).contiguous()` of a small buffer; a relative-position bias gathered
//! from its small table is kept); its nodes stay and run as before. The original parameters and buffers
//! stay in the state (the GPU uploads only what the graph reads). In a graph that reads
//! storage through `as_strided`, only results torch lays out contiguously are stored. A
//! graph with an in-place write is left alone, and only the top-level graph is folded (as
//! batch-norm folding).

use super::dce::has_effects;
use super::{add_constant, defined, use_counts, FOLDED_PREFIX};
use crate::cpu::Tensor;
use crate::ops::{table, OpCtx};
use crate::program::{Arg, Dim, Graph, InputKind, Node, Program, ValueId, ValueKind};
use crate::runtime::{RValue, RunState};
use crate::tensor::contiguous_strides;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The largest result computed or stored, in bytes.
const MAX_BYTES: u64 = 64 << 20;
/// A stored result holds at most this many times the bytes of the state it comes from, or
/// [`SMALL_BYTES`] when that is more (a mask or a table built from factories and shapes
/// alone, such as a shifted-window attention mask, or gathered from a small table).
const MAX_GROWTH: u64 = 2;
const SMALL_BYTES: u64 = 4 << 20;
/// Nodes refused by their kernel before the pass gives up on the graph (each refusal runs
/// the evaluation again).
const MAX_REFUSALS: usize = 16;

/// Ops whose result is a view of their input (free at run time: never stored on their own).
const VIEWS: [&str; 29] = [
    "aten.view",
    "aten._unsafe_view",
    "aten.reshape",
    "aten.view_as",
    "aten.permute",
    "aten.t",
    "aten.transpose",
    "aten.swapaxes",
    "aten.swapdims",
    "aten.movedim",
    "aten.numpy_T",
    "aten.mT",
    "aten.expand",
    "aten.expand_as",
    "aten.unsqueeze",
    "aten.squeeze",
    "aten.flatten",
    "aten.unflatten",
    "aten.slice",
    "aten.select",
    "aten.narrow",
    "aten.split",
    "aten.split_with_sizes",
    "aten.unbind",
    "aten.diagonal",
    "aten.alias",
    "aten.detach",
    "aten.as_strided",
    "_operator.getitem",
];

/// Copies: they compute only when they change the dtype or the layout.
const COPIES: [&str; 6] = [
    "aten.clone",
    "aten.contiguous",
    "aten.lift_fresh_copy",
    "aten._to_copy",
    "aten.to",
    "aten.type_as",
];

/// Ops that read their `self`'s dtype and sizes only (see [`shape_only_self`]).
const SHAPE_ONLY: [&str; 6] = [
    "aten.full_like",
    "aten.zeros_like",
    "aten.ones_like",
    "aten.new_zeros",
    "aten.new_ones",
    "aten.new_full",
];

/// Factories of uninitialized memory: their values are not the same twice.
const UNINITIALIZED: [&str; 6] = [
    "aten.empty",
    "aten.empty_like",
    "aten.empty_strided",
    "aten.empty_permuted",
    "aten.new_empty",
    "aten.new_empty_strided",
];

/// What a node is to this pass.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    /// Runs with the graph.
    Live,
    /// Depends only on the state: computed here.
    Const,
    /// An assertion on constants: checked here.
    Check,
}

/// The plan for one graph: each node's role, the results to store (value, constant name)
/// and the nodes to run to get them.
struct Analysis {
    role: Vec<Role>,
    store: Vec<(ValueId, String)>,
    needed: Vec<bool>,
}

/// Fold the constant parts of `p`'s graph; how many nodes went.
pub(super) fn run(p: &mut Program) -> usize {
    if super::noop::writes_in_place(&p.graph) {
        return 0;
    }
    let state_of = unmutated_state(p);
    if state_of.is_empty() {
        return 0;
    }
    // A node whose kernel refuses it (or disagrees with torch's metadata) is left in the
    // graph; the plan is then made again without it.
    let mut failed = HashSet::new();
    let mut cache = HashMap::new();
    let (plan, mut env) = loop {
        let plan = analyze(p, &state_of, &failed);
        match evaluate(&p.graph, &plan, &state_of, p, &mut cache) {
            Ok(env) => break (plan, env),
            Err(_) if failed.len() >= MAX_REFUSALS => return 0,
            Err(i) => {
                failed.insert(i);
            }
        }
    };
    drop(cache);
    let mut stored: HashMap<ValueId, ValueId> = HashMap::new();
    for (v, name) in &plan.store {
        let Some(RValue::Tensor(t)) = env[*v].take() else {
            continue;
        };
        if let Ok(h) = t.to_host(name) {
            stored.insert(*v, add_constant(p, name, h));
        }
    }
    drop(env);
    // Reads of a stored result read its constant.
    let mut ids = Vec::new();
    for n in &mut p.graph.nodes {
        for (_, a) in &mut n.inputs {
            ids.clear();
            a.values(&mut ids);
            for v in &ids {
                if let Some(&c) = stored.get(v) {
                    super::noop::rename(a, *v, c);
                }
            }
        }
    }
    remove_unread(&mut p.graph, &plan.role)
}

/// Placeholders bound to state the program never mutates (nor any tensor sharing its
/// storage): value -> state name.
pub(super) fn unmutated_state(p: &Program) -> HashMap<ValueId, String> {
    let mutated = p.mutated_state();
    // Tensors sharing storage with a mutated one change with it.
    let mutated_storage: BTreeSet<usize> = mutated
        .iter()
        .filter_map(|n| p.state.get(n))
        .map(|e| e.tensor.storage.id())
        .collect();
    let mut out = HashMap::new();
    for (spec, a) in p.inputs.iter().zip(&p.graph.inputs) {
        let name = match &spec.kind {
            InputKind::Parameter { name }
            | InputKind::Buffer { name, .. }
            | InputKind::Constant { name } => name,
            _ => continue,
        };
        let (Arg::Tensor(v), Some(e)) = (a, p.state.get(name)) else {
            continue;
        };
        if !mutated.contains(name.as_str()) && !mutated_storage.contains(&e.tensor.storage.id()) {
            out.insert(*v, name.clone());
        }
    }
    out
}

fn analyze(p: &Program, state_of: &HashMap<ValueId, String>, failed: &HashSet<usize>) -> Analysis {
    let g = &p.graph;
    let nv = g.values.len();
    let reg = table();
    let mut ids = Vec::new();
    for a in &g.outputs {
        a.values(&mut ids);
    }
    let graph_outputs: HashSet<ValueId> = ids.into_iter().collect();
    // Which nodes are constant, in graph order.
    let mut konst = vec![false; nv];
    let mut computed = vec![false; nv];
    for &v in state_of.keys() {
        konst[v] = true;
    }
    let mut role = vec![Role::Live; g.nodes.len()];
    let mut ins = Vec::new();
    let mut outs = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if failed.contains(&i) || !const_inputs(g, n, &konst, &mut ins) {
            continue;
        }
        outs.clear();
        for a in &n.outputs {
            defined(a, &mut outs);
        }
        if is_assertion(n) {
            if outs.is_empty() && ins.iter().any(|&v| computed[v]) {
                role[i] = Role::Check;
            }
            continue;
        }
        let op = op_of(&n.target);
        let tensors_out = !outs.is_empty()
            && n.outputs.iter().all(|a| {
                matches!(
                    a,
                    Arg::None | Arg::Tensor(_) | Arg::Tensors(_) | Arg::OptTensors(_)
                )
            })
            && outs.iter().all(|&v| {
                !graph_outputs.contains(&v) && tensor_bytes(g, v).is_some_and(|b| b <= MAX_BYTES)
            });
        if has_effects(n)
            || UNINITIALIZED.contains(&op)
            || reg.kernel_for(n, g).is_none()
            || !tensors_out
        {
            continue;
        }
        role[i] = Role::Const;
        for &v in &outs {
            konst[v] = true;
            computed[v] = true;
        }
    }

    // Which results to store: computed since the state or the last stored result, and read
    // by a node that runs with the graph.
    let mut live_read = vec![false; nv];
    for (n, r) in g.nodes.iter().zip(&role) {
        if *r == Role::Live {
            for (_, a) in &n.inputs {
                ins.clear();
                a.values(&mut ins);
                for &v in &ins {
                    live_read[v] = true;
                }
            }
        }
    }
    let strided = g
        .nodes
        .iter()
        .any(|n| n.target.starts_with("aten.as_strided"));
    let mut fresh = vec![false; nv];
    let mut roots: HashMap<ValueId, BTreeSet<ValueId>> =
        state_of.keys().map(|&v| (v, BTreeSet::from([v]))).collect();
    let mut store = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if role[i] != Role::Const {
            continue;
        }
        const_inputs(g, n, &konst, &mut ins);
        let mut from = BTreeSet::new();
        for v in &ins {
            if let Some(r) = roots.get(v) {
                from.extend(r.iter().copied());
            }
        }
        let op = op_of(&n.target);
        let view_like = VIEWS.contains(&op) || (COPIES.contains(&op) && keeps_layout(g, n));
        let computes = !view_like;
        let fresh_in = ins.iter().any(|&v| fresh[v]);
        let state_bytes: u64 = from
            .iter()
            .filter_map(|r| p.state.get(state_of.get(r)?))
            .map(|e| e.tensor.nbytes() as u64)
            .sum();
        outs.clear();
        for a in &n.outputs {
            defined(a, &mut outs);
        }
        for (k, &v) in outs.iter().enumerate() {
            fresh[v] = computes || fresh_in;
            let name = if outs.len() == 1 {
                format!("{FOLDED_PREFIX}{}", n.name)
            } else {
                format!("{FOLDED_PREFIX}{}.{k}", n.name)
            };
            let bytes = tensor_bytes(g, v).unwrap_or(u64::MAX);
            if fresh[v]
                && live_read[v]
                && bytes <= MAX_BYTES
                && bytes <= SMALL_BYTES.max(MAX_GROWTH.saturating_mul(state_bytes))
                && (!strided || contiguous_meta(g, v))
                && !n.name.is_empty()
                && !p.state.contains_key(&name)
                && !g.by_name.contains_key(&name)
            {
                store.push((v, name));
                fresh[v] = false;
            }
            roots.insert(v, from.clone());
        }
    }

    // The nodes to run: what the stored results and the assertions need.
    let mut need = vec![false; nv];
    for (v, _) in &store {
        need[*v] = true;
    }
    let mut needed = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate().rev() {
        outs.clear();
        for a in &n.outputs {
            defined(a, &mut outs);
        }
        needed[i] = match role[i] {
            Role::Live => false,
            Role::Check => true,
            Role::Const => outs.iter().any(|&v| need[v]),
        };
        if needed[i] {
            const_inputs(g, n, &konst, &mut ins);
            for &v in &ins {
                need[v] = true;
            }
        }
    }
    Analysis {
        role,
        store,
        needed,
    }
}

/// Run the nodes the plan needs; the values they define, or the index of a node whose kernel
/// refused it or disagreed with torch's metadata.
fn evaluate(
    g: &Graph,
    plan: &Analysis,
    state_of: &HashMap<ValueId, String>,
    p: &Program,
    cache: &mut HashMap<ValueId, Tensor>,
) -> Result<Vec<Option<RValue>>, usize> {
    let reg = table();
    let mut env: Vec<Option<RValue>> = vec![None; g.values.len()];
    let mut st = RunState::default();
    let mut ids = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if !plan.needed[i] {
            continue;
        }
        ids.clear();
        for (_, a) in &n.inputs {
            a.values(&mut ids);
        }
        let shape_only = shape_only_self(g, n);
        for &v in &ids {
            if env[v].is_some() {
                continue;
            }
            if shape_only == Some(v) {
                let (dtype, sizes, _) = static_layout(g, v).ok_or(i)?;
                env[v] = Some(RValue::Tensor(Tensor::zeros(dtype, &sizes).map_err(|_| i)?));
                continue;
            }
            let Some(name) = state_of.get(&v) else {
                return Err(i);
            };
            let t = match cache.get(&v) {
                Some(t) => t.clone(),
                None => {
                    let e = p.state.get(name).ok_or(i)?;
                    let t = Tensor::from_host(&e.tensor).map_err(|_| i)?;
                    cache.insert(v, t.clone());
                    t
                }
            };
            env[v] = Some(RValue::Tensor(t));
        }
        let kernel = reg.kernel_for(n, g).ok_or(i)?;
        let outs = kernel(&mut OpCtx {
            node: n,
            graph: g,
            env: &env,
            state: &mut st,
        })
        .map_err(|_| i)?;
        if outs.len() < n.outputs.len() {
            return Err(i);
        }
        for (a, v) in n.outputs.iter().zip(outs) {
            crate::runtime::bind(g, &mut env, a, v).map_err(|_| i)?;
        }
        ids.clear();
        for a in &n.outputs {
            defined(a, &mut ids);
        }
        for &v in &ids {
            let agrees = match (&env[v], &g.values[v].kind) {
                (Some(RValue::Tensor(t)), ValueKind::Tensor { dtype, sizes, .. }) => {
                    t.dtype == *dtype
                        && t.sizes.len() == sizes.len()
                        && t.sizes
                            .iter()
                            .zip(sizes)
                            .all(|(&a, b)| *b == Dim::Static(a as i64))
                }
                _ => false,
            };
            if !agrees {
                return Err(i);
            }
        }
    }
    Ok(env)
}

/// Remove the constant nodes nothing reads any more and the assertions checked; how many.
fn remove_unread(g: &mut Graph, role: &[Role]) -> usize {
    let mut uses = use_counts(g);
    let mut keep = vec![true; g.nodes.len()];
    let mut ids = Vec::new();
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if role[i] == Role::Live {
            continue;
        }
        ids.clear();
        for a in &n.outputs {
            defined(a, &mut ids);
        }
        if ids.iter().any(|&v| uses.get(v).is_some_and(|&u| u > 0)) {
            continue;
        }
        keep[i] = false;
        for (_, a) in &n.inputs {
            ids.clear();
            a.values(&mut ids);
            for &v in &ids {
                if let Some(u) = uses.get_mut(v) {
                    *u = u.saturating_sub(1);
                }
            }
        }
    }
    let removed = keep.iter().filter(|k| !**k).count();
    let mut k = keep.into_iter();
    g.nodes.retain(|_| k.next().unwrap_or(true));
    removed
}

/// Whether every value `n` reads is constant (collected into `ins`) and it reads no
/// subgraph or object.
fn const_inputs(g: &Graph, n: &Node, konst: &[bool], ins: &mut Vec<ValueId>) -> bool {
    ins.clear();
    let shape_only = shape_only_self(g, n);
    for (name, a) in &n.inputs {
        if matches!(a, Arg::Graph(_) | Arg::CustomObj(_)) {
            return false;
        }
        if name == "self" && shape_only.is_some() {
            continue;
        }
        a.values(ins);
    }
    ins.iter().all(|&v| konst.get(v).copied().unwrap_or(false))
}

/// The `self` of an op that reads only its dtype and static sizes, never its values
/// (`full_like`, `zeros_like`, `new_zeros`...): such a node depends on no tensor at run
/// time, and is evaluated here on a zero tensor of that layout.
fn shape_only_self(g: &Graph, n: &Node) -> Option<ValueId> {
    if !SHAPE_ONLY.contains(&op_of(&n.target)) {
        return None;
    }
    let Some(Arg::Tensor(v)) = n.arg("self") else {
        return None;
    };
    (static_layout(g, *v).is_some() && tensor_bytes(g, *v).is_some_and(|b| b <= MAX_BYTES))
        .then_some(*v)
}

/// `aten.add` of `aten.add.Tensor`.
fn op_of(target: &str) -> &str {
    target.rsplit_once('.').map_or(target, |(op, _)| op)
}

fn is_assertion(n: &Node) -> bool {
    n.target.starts_with("aten._assert_")
}

/// The bytes of tensor value `v` when its sizes are static.
fn tensor_bytes(g: &Graph, v: ValueId) -> Option<u64> {
    let ValueKind::Tensor { dtype, sizes, .. } = &g.values.get(v)?.kind else {
        return None;
    };
    sizes
        .iter()
        .try_fold(dtype.size() as u64, |acc, d| match d {
            Dim::Static(s) if *s >= 0 => acc.checked_mul(*s as u64),
            _ => None,
        })
}

/// Static sizes and strides of tensor value `v`.
fn static_layout(g: &Graph, v: ValueId) -> Option<(crate::DType, Vec<usize>, Vec<usize>)> {
    let ValueKind::Tensor {
        dtype,
        sizes,
        strides,
        ..
    } = &g.values.get(v)?.kind
    else {
        return None;
    };
    let stat = |ds: &[Dim]| -> Option<Vec<usize>> {
        ds.iter()
            .map(|d| match d {
                Dim::Static(s) => usize::try_from(*s).ok(),
                Dim::Sym(_) => None,
            })
            .collect()
    };
    Some((*dtype, stat(sizes)?, stat(strides)?))
}

/// Whether torch lays value `v` out contiguously (strides of size-1 dimensions aside).
fn contiguous_meta(g: &Graph, v: ValueId) -> bool {
    static_layout(g, v).is_some_and(|(_, sizes, strides)| {
        strides.len() == sizes.len()
            && contiguous_strides(&sizes)
                .iter()
                .zip(&strides)
                .zip(&sizes)
                .all(|((c, s), n)| *n <= 1 || c == s)
    })
}

/// Whether copy node `n` gives its result the dtype, sizes and strides of its input.
fn keeps_layout(g: &Graph, n: &Node) -> bool {
    let (Some(Arg::Tensor(x)), Some(Arg::Tensor(y))) = (n.arg("self"), n.outputs.first()) else {
        return false;
    };
    match (static_layout(g, *x), static_layout(g, *y)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}
