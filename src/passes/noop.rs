//! Removal of copies and views that change nothing: `alias`, `detach`, `lift_fresh_copy`,
//! `clone`, `contiguous`, `_to_copy` / `to`, `view` / `reshape` / `_unsafe_view`,
//! `expand`, `pad` / `constant_pad_nd` by zero on every side, an integer `x + 0` / `x - 0`,
//! and dropouts with
//! `train=False`, when torch's metadata for the result has the input's dtype, sizes and strides.
//! Every later read of the result reads the input instead, and the node goes.
//!
//! A copy only matters where something writes through one of the two names, so a graph
//! with an in-place write anywhere (itself or a subgraph) is left alone, and so is a node
//! whose result is a graph output (the caller may hold it while the input changes) or is
//! read by `as_strided`, which addresses the storage itself.

use super::dce::{has_effects, writes_an_input};
use crate::program::{Arg, Graph, ValueId, ValueKind};

const NO_OPS: [&str; 12] = [
    "aten.alias",
    "aten.detach",
    "aten.lift_fresh_copy",
    "aten.clone",
    "aten.contiguous",
    "aten._to_copy",
    "aten.to",
    "aten.view",
    "aten.reshape",
    "aten._unsafe_view",
    "aten.expand",
    "aten.expand_copy",
];

/// Dropouts, which change nothing with `train=False` (inference).
const DROPOUTS: [&str; 4] = [
    "aten.dropout",
    "aten.feature_dropout",
    "aten.alpha_dropout",
    "aten.feature_alpha_dropout",
];

/// Remove the no-op nodes of `g`; how many went.
pub(super) fn run(g: &mut Graph) -> usize {
    if writes_in_place(g) {
        return 0;
    }
    let outputs = super::output_values(g);
    let mut removed = 0;
    let mut i = 0;
    while i < g.nodes.len() {
        match no_op(g, i, &outputs) {
            Some((from, to)) => {
                g.nodes.remove(i);
                for n in &mut g.nodes[i..] {
                    for (_, a) in &mut n.inputs {
                        rename(a, from, to);
                    }
                }
                removed += 1;
            }
            None => i += 1,
        }
    }
    removed
}

/// `(result, input)` when node `i` of `g` is a no-op to remove.
fn no_op(g: &Graph, i: usize, graph_outputs: &[ValueId]) -> Option<(ValueId, ValueId)> {
    let n = &g.nodes[i];
    let op = n.target.rsplit_once('.').map_or("", |(o, _)| o);
    let eval_dropout = DROPOUTS.contains(&op) && matches!(n.arg("train"), Some(Arg::Bool(false)));
    // torchvision's swin pads windows by zero when the size divides.
    let zero_pad = matches!(op, "aten.pad" | "aten.constant_pad_nd")
        && matches!(n.arg("pad"), Some(Arg::Ints(p)) if p.iter().all(|&k| k == 0));
    // `x + 0` / `x - 0` on integers (GPT-2's `arange(seq) + past_length`); on floats
    // -0.0 + 0 is +0.0, so those stay.
    let add_zero = matches!(n.target.as_str(), "aten.add.Tensor" | "aten.sub.Tensor")
        && matches!(n.arg("other"), Some(Arg::Int(0)))
        && n.arg("alpha").is_none_or(|a| matches!(a, Arg::Int(1)));
    if !NO_OPS.contains(&op) && !eval_dropout && !zero_pad && !add_zero {
        return None;
    }
    let [Arg::Tensor(y)] = n.outputs[..] else {
        return None;
    };
    let Some(Arg::Tensor(x)) = n.arg("self").or(n.arg("input")) else {
        return None;
    };
    let x = *x;
    if graph_outputs.contains(&y) || x == y {
        return None;
    }
    let same = match (&g.values.get(x)?.kind, &g.values.get(y)?.kind) {
        (
            ValueKind::Tensor {
                dtype: dx,
                sizes: sx,
                strides: tx,
                ..
            },
            ValueKind::Tensor {
                dtype: dy,
                sizes: sy,
                strides: ty,
                ..
            },
        ) => {
            dx == dy
                && sx == sy
                && tx == ty
                && tx.len() == sx.len()
                && !(add_zero && (dx.is_float() || dx.is_complex()))
        }
        _ => false,
    };
    if !same {
        return None;
    }
    let mut ids = Vec::new();
    let storage_read = g.nodes[i + 1..].iter().any(|m| {
        m.target.starts_with("aten.as_strided")
            && m.inputs.iter().any(|(_, a)| {
                ids.clear();
                a.values(&mut ids);
                ids.contains(&y)
            })
    });
    (!storage_read).then_some((y, x))
}

/// Whether a node of `g` or of a subgraph writes a tensor in place.
pub(super) fn writes_in_place(g: &Graph) -> bool {
    g.nodes.iter().any(|n| {
        let rest = n.target.strip_prefix("aten.").unwrap_or("");
        let (op, overload) = rest.split_once('.').unwrap_or((rest, ""));
        // Symbolic arithmetic (`_operator.mul`, `math.ceil`, `torch.sym_max`) and pt2web's
        // own nodes write nothing; another library's op may.
        let pure_namespace = [
            "_operator.",
            "math.",
            "torch.sym_",
            "higher_order.",
            "pt2web.",
        ]
        .iter()
        .any(|p| n.target.starts_with(p));
        let in_place = writes_an_input(op, overload)
            || (op.contains("batch_norm") && has_effects(n))
            || (!n.target.starts_with("aten.") && !pure_namespace);
        in_place
            || n.inputs.iter().any(|(_, a)| match a {
                Arg::Graph(sub) => writes_in_place(sub),
                _ => false,
            })
    })
}

/// Every read of `from` in `a` reads `to` instead.
pub(super) fn rename(a: &mut Arg, from: ValueId, to: ValueId) {
    let r = |v: &mut ValueId| {
        if *v == from {
            *v = to;
        }
    };
    match a {
        Arg::Tensor(v) => r(v),
        Arg::Tensors(vs) => vs.iter_mut().for_each(r),
        Arg::OptTensor(Some(v)) => r(v),
        Arg::OptTensors(vs) => vs.iter_mut().flatten().for_each(r),
        Arg::NestedTensors(vv) => vv.iter_mut().flatten().for_each(r),
        Arg::StrMap(m) => m.values_mut().for_each(|a| rename(a, from, to)),
        _ => {}
    }
}
