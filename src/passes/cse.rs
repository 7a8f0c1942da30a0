//! Common-subexpression elimination: a node computing what an earlier node computed (the
//! same target and the same arguments, after the merges before it) goes, and what read its
//! results reads the earlier node's. Exported programs repeat work this way: GPT-2's
//! mask prologue builds the same `arange(0, seq)` (and its `+ 0`) three times.
//!
//! Only nodes DCE could drop (pure: no in-place write, no random draw, no assertion; see
//! `dce.rs`), not `empty*` (uninitialized memory), not a node defining a symbol, not a
//! higher-order op, and not one whose result is a graph output (the caller gets distinct
//! tensors). A graph with an in-place write is left alone, as by the other passes.

use super::dce::has_effects;
use super::noop::{rename, writes_in_place};
use crate::program::{Arg, Graph, Node};
use std::collections::HashMap;

/// Merge the repeated nodes of `g`; how many went.
pub(super) fn run(g: &mut Graph) -> usize {
    if writes_in_place(g) {
        return 0;
    }
    let graph_outputs = super::output_values(g);
    // The node first computing each (target, arguments).
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut removed = 0;
    let mut i = 0;
    while i < g.nodes.len() {
        let n = &g.nodes[i];
        let mut outs = Vec::new();
        n.outputs.iter().for_each(|a| super::defined(a, &mut outs));
        if !mergeable(n) || outs.is_empty() || outs.iter().any(|v| graph_outputs.contains(v)) {
            i += 1;
            continue;
        }
        let key = format!("{}{:?}", n.target, n.inputs);
        let Some(&j) = seen.get(&key) else {
            seen.insert(key, i);
            i += 1;
            continue;
        };
        // Result by result: each one this node defines, the earlier node defines too.
        let pairs: Option<Vec<_>> = n
            .outputs
            .iter()
            .zip(&g.nodes[j].outputs)
            .filter(|(a, _)| !matches!(a, Arg::None))
            .map(|(a, b)| match (a, b) {
                (Arg::Tensor(from), Arg::Tensor(to)) => Some((*from, *to)),
                _ => None,
            })
            .collect();
        match pairs {
            Some(pairs) if n.outputs.len() == g.nodes[j].outputs.len() => {
                g.nodes.remove(i);
                for (from, to) in pairs {
                    for m in &mut g.nodes[i..] {
                        for (_, a) in &mut m.inputs {
                            rename(a, from, to);
                        }
                    }
                }
                removed += 1;
            }
            _ => i += 1,
        }
    }
    removed
}

fn mergeable(n: &Node) -> bool {
    !has_effects(n)
        && !n.target.starts_with("aten.empty")
        && !n.target.starts_with("aten.new_empty")
        && !n
            .outputs
            .iter()
            .any(|a| matches!(a, Arg::SymInt(_) | Arg::SymFloat(_) | Arg::SymBool(_)))
        && !n.inputs.iter().any(|(_, a)| matches!(a, Arg::Graph(_)))
}
