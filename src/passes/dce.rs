//! Dead-code elimination: a node goes when nothing reads what it defines (no later node, no
//! graph output) and running it has no effect beyond its outputs. One backward sweep, so a
//! chain that only fed a dead node goes too.
//!
//! Kept whatever their outputs: in-place and `out=` forms (`relu_`, `copy_`, `add.out`),
//! batch norms that update running statistics in place (the non-functional training forms),
//! random ops (removing one would shift every later draw of the generator), assertions and
//! range constraints, higher-order ops (`cond`, `while_loop`, `map`, `auto_functionalized`)
//! and any target outside `aten.*` and `_operator.getitem` (custom ops may have effects).

use super::{defined, use_counts};
use crate::program::{Arg, Graph, Node};

/// Remove the dead nodes of `g`; how many went.
pub(super) fn run(g: &mut Graph) -> usize {
    let mut uses = use_counts(g);
    let mut keep = vec![true; g.nodes.len()];
    let mut ids = Vec::new();
    for (i, n) in g.nodes.iter().enumerate().rev() {
        ids.clear();
        for a in &n.outputs {
            defined(a, &mut ids);
        }
        let live = ids.iter().any(|&v| uses.get(v).is_some_and(|&u| u > 0));
        // A symbol a node defines (`u0 = item(...)`) may size later values through their
        // metadata without being an argument anywhere: kept.
        if live || has_effects(n) || defines_symbol(n) {
            continue;
        }
        keep[i] = false;
        // What it read loses a use.
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
    if removed > 0 {
        let mut k = keep.into_iter();
        g.nodes.retain(|_| k.next().unwrap_or(true));
    }
    removed
}

fn defines_symbol(n: &Node) -> bool {
    n.outputs
        .iter()
        .any(|a| matches!(a, Arg::SymInt(_) | Arg::SymFloat(_) | Arg::SymBool(_)))
}

/// Whether the aten op `op.overload` writes one of its inputs: the in-place forms (`relu_`,
/// `__iand__`; not `__and__`) and the `out=` overloads.
pub(super) fn writes_an_input(op: &str, overload: &str) -> bool {
    let in_place = if let Some(dunder) = op.strip_prefix("__") {
        dunder.starts_with('i') && !dunder.starts_with("invert")
    } else {
        op.ends_with('_')
    };
    in_place || overload.starts_with("out") || overload.ends_with("_out")
}

/// Whether running `n` may do more than define its outputs.
pub(super) fn has_effects(n: &Node) -> bool {
    let t = n.target.as_str();
    if t == "_operator.getitem" {
        return false;
    }
    let Some(rest) = t.strip_prefix("aten.") else {
        return true;
    };
    let (op, overload) = rest.split_once('.').unwrap_or((rest, ""));
    if writes_an_input(op, overload) {
        return true;
    }
    // A batch norm updates its running statistics in training mode (an inference one, with
    // `training=False` written in the graph, does not).
    if op.contains("batch_norm")
        && !t.contains("functional")
        && !t.contains("no_training")
        && !matches!(n.arg("training"), Some(Arg::Bool(false)))
    {
        return true;
    }
    const RANDOM: [&str; 11] = [
        "rand",
        "dropout",
        "bernoulli",
        "normal",
        "uniform",
        "multinomial",
        "exponential",
        "cauchy",
        "geometric",
        "poisson",
        "rrelu",
    ];
    if RANDOM.iter().any(|r| op.contains(r)) {
        return true;
    }
    op.starts_with("_assert")
        || op.starts_with("sym_constrain_range")
        || op.starts_with("_functional_assert")
        || op.starts_with("_functional_sym_constrain")
        || op == "_print"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(target: &str) -> Node {
        Node {
            name: String::new(),
            target: target.into(),
            inputs: vec![],
            outputs: vec![Arg::Tensor(0)],
            metadata: Default::default(),
        }
    }

    #[test]
    fn effects_are_kept() {
        for t in [
            "aten.relu_.default",
            "aten.copy_.default",
            "aten.add.out",
            "aten.__iand__.Tensor",
            "aten._native_batch_norm_legit.default",
            "aten.batch_norm.default",
            "aten.rand_like.default",
            "aten.native_dropout.default",
            "aten._assert_scalar.default",
            "aten.sym_constrain_range_for_size.default",
            "higher_order.cond",
            "my_lib.custom.default",
        ] {
            assert!(has_effects(&node(t)), "{t}");
        }
        for t in [
            "aten.add.Tensor",
            "_operator.getitem",
            "aten._native_batch_norm_legit_no_training.default",
            "aten._native_batch_norm_legit_functional.default",
            "aten.clone.default",
            "aten.__and__.Tensor",
            "aten.__invert__.default",
        ] {
            assert!(!has_effects(&node(t)), "{t}");
        }
    }
}
