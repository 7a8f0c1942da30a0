//! Fusion of elementwise chains: nodes that [`ElemStep::parse`] accepts (f32 unary, binary,
//! clamp and `where` ops with number arguments) become one `pt2web.fused_elementwise` node
//! whenever the value one of them makes is read by nothing but the next. The fused node
//! takes the chain's outside tensors and carries the original nodes as its body subgraph
//! (see `src/ops/elementwise/fused.rs`), where it stands at the place of the chain's last
//! node: every input of the chain is defined before it, and nothing outside the chain read
//! the values it no longer names.
//!
//! A chain reads at most [`MAX_INPUTS`] outside tensors (a WebGPU shader binds 8 storage
//! buffers: these and its output) and holds at most [`MAX_NODES`] nodes. Graphs with an
//! in-place write are left alone: a chain reading its inputs at its last node's place could
//! then read them after a write that the original nodes ran before.

use super::noop::writes_in_place;
use super::use_counts;
use crate::ops::elementwise::fused::{ElemStep, Operand, TARGET};
use crate::program::{Arg, Graph, Node, Value, ValueId};
use std::collections::{BTreeMap, HashMap};

/// Most outside tensors one fused node reads.
pub const MAX_INPUTS: usize = 6;
/// Most nodes one fused node holds.
pub const MAX_NODES: usize = 32;

/// Fuse the chains of `g`; how many nodes fewer the graph has.
pub(super) fn run(g: &mut Graph) -> usize {
    if writes_in_place(g) {
        return 0;
    }
    let uses = use_counts(g);
    let graph_outputs = super::output_values(g);
    let steps: Vec<Option<ElemStep>> = g.nodes.iter().map(|n| ElemStep::parse(n, g)).collect();
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        if let Some(s) = s {
            producer.insert(s.out, i);
        }
    }
    // group[i]: the chain node i belongs to (by the index of its last node so far).
    let mut group: Vec<Option<usize>> = vec![None; g.nodes.len()];
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, s) in steps.iter().enumerate() {
        let Some(s) = s else { continue };
        let mut mine = vec![i];
        for op in &s.operands {
            let Operand::Value(v) = *op else { continue };
            let Some(&p) = producer.get(&v) else { continue };
            let Some(root) = group[p] else { continue };
            // The producer's chain joins when this node is the only reader of its value.
            let reads = s
                .operands
                .iter()
                .filter(|o| **o == Operand::Value(v))
                .count();
            if root != p
                || uses.get(v) != Some(&reads)
                || graph_outputs.contains(&v)
                || mine.contains(&p)
            {
                continue;
            }
            let mut joined = mine.clone();
            joined.extend(&members[&root]);
            if joined.len() > MAX_NODES || outside_inputs(&steps, &joined).len() > MAX_INPUTS {
                continue;
            }
            mine = joined;
            members.remove(&root);
        }
        mine.sort_unstable();
        for &m in &mine {
            group[m] = Some(i);
        }
        members.insert(i, mine);
    }
    // Each chain of two or more nodes becomes its fused node at its root's place.
    let mut fused: HashMap<usize, Node> = HashMap::new();
    let mut gone = vec![false; g.nodes.len()];
    let mut removed = 0;
    for (&root, nodes) in &members {
        if nodes.len() < 2 {
            continue;
        }
        fused.insert(root, fused_node(g, &steps, nodes));
        for &m in nodes.iter().filter(|&&m| m != root) {
            gone[m] = true;
        }
        removed += nodes.len() - 1;
    }
    if removed == 0 {
        return 0;
    }
    super::replace_nodes(g, &gone, fused);
    removed
}

/// The tensors a chain reads that no node of it makes, in first-read order.
fn outside_inputs(steps: &[Option<ElemStep>], nodes: &[usize]) -> Vec<ValueId> {
    let mut sorted = nodes.to_vec();
    sorted.sort_unstable();
    let made: Vec<ValueId> = sorted
        .iter()
        .filter_map(|&m| steps[m].as_ref().map(|s| s.out))
        .collect();
    let mut ins = Vec::new();
    for &m in &sorted {
        for op in steps[m].iter().flat_map(|s| &s.operands) {
            if let Operand::Value(v) = *op {
                if !made.contains(&v) && !ins.contains(&v) {
                    ins.push(v);
                }
            }
        }
    }
    ins
}

/// The fused node of the chain `nodes` (indices in `g`, in order; the last is its root).
fn fused_node(g: &Graph, steps: &[Option<ElemStep>], nodes: &[usize]) -> Node {
    let inputs = outside_inputs(steps, nodes);
    let mut body = Graph::default();
    let mut local: HashMap<ValueId, ValueId> = HashMap::new();
    let mut add = |body: &mut Graph, v: ValueId| -> ValueId {
        *local.entry(v).or_insert_with(|| {
            let val: &Value = g.value(v);
            body.values.push(val.clone());
            let id = body.values.len() - 1;
            body.by_name.insert(val.name.clone(), id);
            id
        })
    };
    for &v in &inputs {
        let id = add(&mut body, v);
        body.inputs.push(Arg::Tensor(id));
    }
    for &m in nodes {
        let mut n = g.nodes[m].clone();
        for (_, a) in &mut n.inputs {
            if let Arg::Tensor(v) = a {
                *v = add(&mut body, *v);
            }
        }
        for a in &mut n.outputs {
            if let Arg::Tensor(v) = a {
                *v = add(&mut body, *v);
            }
        }
        body.nodes.push(n);
    }
    let root = &g.nodes[nodes[nodes.len() - 1]];
    let mut outputs = root.outputs.clone();
    for a in &mut outputs {
        if let Arg::Tensor(v) = a {
            *v = add(&mut body, *v);
        }
    }
    body.outputs = outputs;
    Node {
        name: root.name.clone(),
        target: TARGET.to_string(),
        inputs: vec![
            ("inputs".to_string(), Arg::Tensors(inputs)),
            ("body".to_string(), Arg::Graph(Box::new(body))),
        ],
        outputs: root.outputs.clone(),
        metadata: root.metadata.clone(),
    }
}
