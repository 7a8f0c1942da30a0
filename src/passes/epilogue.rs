//! Epilogue fusion: a matrix product or convolution whose result is read by nothing but one
//! elementwise op, or one fused chain (`pt2web.fused_elementwise`, made by `fuse.rs`), becomes
//! one `pt2web.fused_epilogue` node with the two as subgraphs (see
//! `src/ops/elementwise/epilogue.rs`). The GPU applies the ops to each result in the
//! producer's kernel before it is stored: `relu(conv(x))`, `relu(conv(x) + residual)`,
//! `gelu(linear(x))` and `bmm(q, k) * scale + mask` are one dispatch each.
//!
//! What may fuse:
//! - the producer is one of [`PRODUCERS`] with one f32 result, and reads only tensors (no
//!   symbolic arguments: its subgraph is closed over its tensors), optionally followed by
//!   reshapes of that result ([`RESHAPES`], each the only reader of the value before it, as
//!   core ATen writes `linear` over a batch: `view`, `addmm`, `view`); a reshape of a
//!   kernel's fresh contiguous result keeps each element's flat index, so the epilogue
//!   still sees element `i` of the output as result `i`. The symbolic sizes the reshapes
//!   read become inputs of the producer's subgraph (the node's `sizes`);
//! - the consumer is the only reader of that result (read once or more), which is not a
//!   graph output, and its own f32 result has the producer's sizes (the ops map each result
//!   element to one output element; other operands broadcast onto it);
//! - the consumer reads at most [`MAX_EXTRA`] other tensors (a WebGPU shader binds 8 storage
//!   buffers: the producer's four and these).
//!
//! The fused node stands at the consumer's place. Graphs with an in-place write are left
//! alone, as the fusion pass leaves them.

use super::noop::writes_in_place;
use super::{use_counts, Sub};
use crate::dtype::DType;
use crate::ops::elementwise::epilogue::{PRODUCERS, TARGET};
use crate::ops::elementwise::fused::{self, ElemStep};
use crate::program::{Arg, Graph, IntArg, Node, ValueId, ValueKind};
use std::collections::HashMap;

/// Most tensors from outside an epilogue reads (besides the producer's result).
pub const MAX_EXTRA: usize = 4;

/// Reshapes that may follow a producer in its subgraph.
pub const RESHAPES: &[&str] = &[
    "aten.view.default",
    "aten._unsafe_view.default",
    "aten.reshape.default",
];

/// Fuse the epilogues of `g`; how many nodes fewer the graph has.
pub(super) fn run(g: &mut Graph) -> usize {
    if writes_in_place(g) {
        return 0;
    }
    let uses = use_counts(g);
    let graph_outputs = super::output_values(g);
    // The nodes reading each value.
    let mut readers: HashMap<ValueId, Vec<usize>> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let mut ids = Vec::new();
        n.inputs.iter().for_each(|(_, a)| a.values(&mut ids));
        for v in distinct(ids.into_iter()) {
            readers.entry(v).or_default().push(i);
        }
    }
    // Producers (and the reshapes after them) by the value they end with.
    let mut producer: HashMap<ValueId, Vec<usize>> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let Some(mut v) = producer_result(n, g) else {
            continue;
        };
        let mut chain = vec![i];
        while uses.get(v) == Some(&1) && !graph_outputs.contains(&v) {
            let Some(&[r]) = readers.get(&v).map(Vec::as_slice) else {
                break;
            };
            match reshape_result(&g.nodes[r], v, g) {
                Some(o) => {
                    chain.push(r);
                    v = o;
                }
                None => break,
            }
        }
        producer.insert(v, chain);
    }
    let mut gone = vec![false; g.nodes.len()];
    let mut fused_at: HashMap<usize, Node> = HashMap::new();
    for (c, node) in g.nodes.iter().enumerate() {
        let Some(reads) = consumer_reads(node, g) else {
            continue;
        };
        let Some(out) = single_tensor(node) else {
            continue;
        };
        let chosen = reads.iter().find_map(|&v| {
            let chain = producer.get(&v)?;
            let n_reads = reads.iter().filter(|&&r| r == v).count();
            let extra = distinct(reads.iter().copied().filter(|&r| r != v));
            (chain.iter().all(|&p| !gone[p] && p < c)
                && uses.get(v) == Some(&n_reads)
                && !graph_outputs.contains(&v)
                && same_sizes(g, v, out)
                && extra.len() <= MAX_EXTRA)
                .then_some((chain, v, extra))
        });
        let Some((chain, v, extra)) = chosen else {
            continue;
        };
        chain.iter().for_each(|&p| gone[p] = true);
        let nodes: Vec<&Node> = chain.iter().map(|&p| &g.nodes[p]).collect();
        fused_at.insert(c, fused_node(g, &nodes, v, node, out, &extra));
    }
    let removed = gone.iter().filter(|&&x| x).count();
    if removed == 0 {
        return 0;
    }
    super::replace_nodes(g, &gone, fused_at);
    removed
}

fn dtype_of(g: &Graph, v: ValueId) -> Option<DType> {
    match &g.values.get(v)?.kind {
        ValueKind::Tensor { dtype, .. } => Some(*dtype),
        _ => None,
    }
}

fn single_tensor(n: &Node) -> Option<ValueId> {
    match n.outputs[..] {
        [Arg::Tensor(v)] => Some(v),
        _ => None,
    }
}

/// The f32 result of a producer node whose arguments are tensors and literals.
fn producer_result(n: &Node, g: &Graph) -> Option<ValueId> {
    let (op, overload) = n.target.strip_prefix("aten.")?.rsplit_once('.')?;
    if overload != "default" || !PRODUCERS.contains(&op) {
        return None;
    }
    let v = single_tensor(n)?;
    let closed = n.inputs.iter().all(|(_, a)| match a {
        Arg::Tensor(_) | Arg::OptTensor(_) => true,
        a => {
            let mut ids = Vec::new();
            a.values(&mut ids);
            ids.is_empty() && !matches!(a, Arg::Graph(_))
        }
    });
    (closed && dtype_of(g, v) == Some(DType::F32)).then_some(v)
}

/// The result of `n` where it is a reshape of `v` (and nothing else) to f32.
fn reshape_result(n: &Node, v: ValueId, g: &Graph) -> Option<ValueId> {
    if !RESHAPES.contains(&n.target.as_str()) || n.arg("self") != Some(&Arg::Tensor(v)) {
        return None;
    }
    let sizes_only = n
        .inputs
        .iter()
        .all(|(k, a)| k == "self" || matches!(a, Arg::Ints(_) | Arg::SymInts(_) | Arg::SymInt(_)));
    let o = single_tensor(n)?;
    (sizes_only && dtype_of(g, o) == Some(DType::F32)).then_some(o)
}

/// The tensors an epilogue candidate reads, each read once per listing (None: the node is
/// not one elementwise op or fused chain with an f32 result).
fn consumer_reads(n: &Node, g: &Graph) -> Option<Vec<ValueId>> {
    if n.target == fused::TARGET {
        let out = single_tensor(n)?;
        return match n.arg("inputs") {
            Some(Arg::Tensors(ids)) if dtype_of(g, out) == Some(DType::F32) => Some(ids.clone()),
            _ => None,
        };
    }
    let step = ElemStep::parse(n, g)?;
    Some(
        step.operands
            .iter()
            .filter_map(|o| match o {
                fused::Operand::Value(v) => Some(*v),
                fused::Operand::Number(_) => None,
            })
            .collect(),
    )
}

fn distinct(it: impl Iterator<Item = ValueId>) -> Vec<ValueId> {
    let mut v = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// Whether two tensor values have the same sizes (static or the same symbolic expressions).
fn same_sizes(g: &Graph, a: ValueId, b: ValueId) -> bool {
    let sizes = |v: ValueId| match &g.values.get(v)?.kind {
        ValueKind::Tensor { sizes, .. } => Some(sizes),
        _ => None,
    };
    matches!((sizes(a), sizes(b)), (Some(x), Some(y)) if x == y)
}

/// The fused node of the producer `nodes` (a producer and its reshapes; result `v`) and the
/// consumer `c` (result `out`) reading `extra` besides.
fn fused_node(
    g: &Graph,
    nodes: &[&Node],
    v: ValueId,
    c: &Node,
    out: ValueId,
    extra: &[ValueId],
) -> Node {
    let mut pins = Vec::new();
    for (_, a) in &nodes[0].inputs {
        if let Arg::Tensor(t) | Arg::OptTensor(Some(t)) = a {
            if !pins.contains(t) {
                pins.push(*t);
            }
        }
    }
    // The symbolic sizes the reshapes read.
    let syms = super::sym_reads(nodes[1..].iter().copied());
    let mut prod = Sub::new(g);
    pins.iter().for_each(|&t| prod.input(t));
    syms.iter().for_each(|&s| prod.sym_input(s));
    nodes.iter().for_each(|n| prod.node(n));
    let producer = prod.output(v);

    let mut epi = Sub::new(g);
    epi.input(v);
    extra.iter().for_each(|&t| epi.input(t));
    epi.node(c);
    let epilogue = epi.output(out);

    let mut inputs = pins;
    inputs.extend(extra);
    Node {
        name: c.name.clone(),
        target: TARGET.to_string(),
        inputs: vec![
            ("inputs".to_string(), Arg::Tensors(inputs)),
            (
                "sizes".to_string(),
                Arg::SymInts(syms.into_iter().map(IntArg::Sym).collect()),
            ),
            ("producer".to_string(), Arg::Graph(Box::new(producer))),
            ("epilogue".to_string(), Arg::Graph(Box::new(epilogue))),
        ],
        outputs: c.outputs.clone(),
        metadata: c.metadata.clone(),
    }
}
