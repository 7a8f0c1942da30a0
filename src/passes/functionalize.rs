//! Functionalization: the training IR keeps in-place ops on intermediates (`relu_`,
//! `hardswish_`, `silu_`, `add_` after a convolution). Each one whose tensor owns its storage
//! becomes the functional op (`relu`, `add.Tensor`), and the nodes after it read its result
//! instead of the tensor it wrote, as torch's functionalization does for core ATen. The other
//! passes leave a graph with an in-place write alone, so this is what lets them apply to
//! training-IR programs.
//!
//! `x = op(...); op_(x, ...)` is rewritten only where:
//! - x is made by a node of this graph (not a parameter, buffer, constant or user input,
//!   whose writes are the program's mutations), by an op that returns new storage (not a
//!   view, and not an op that may return its input itself, like `contiguous` or `to`);
//! - no view or alias of x is taken anywhere (a view read after the write would see it);
//! - the op is one of [`FUNCTIONAL`], every tensor it reads has x's dtype (no type
//!   promotion), and the op table has the functional op (`aten.relu.default` for
//!   `aten.relu_.default`).
//!
//! An in-place dropout with `train=False` writes nothing, so it is always rewritten (and the
//! no-op pass then removes it).

use super::noop::rename;
use crate::program::{Arg, Graph, ValueId, ValueKind};
use std::collections::HashMap;

/// Ops whose result may share its input's storage (views, and ops that may return their
/// input as is). A tensor made by one of these, or read by one, is not rewritten.
const ALIASING: &[&str] = &[
    "view",
    "_unsafe_view",
    "reshape",
    "_reshape_alias",
    "permute",
    "transpose",
    "t",
    "expand",
    "expand_as",
    "squeeze",
    "unsqueeze",
    "slice",
    "select",
    "narrow",
    "split",
    "split_with_sizes",
    "unbind",
    "chunk",
    "tensor_split",
    "alias",
    "detach",
    "detach_",
    "as_strided",
    "diagonal",
    "unfold",
    "view_as",
    "flatten",
    "unflatten",
    "movedim",
    "swapaxes",
    "swapdims",
    "real",
    "imag",
    "view_as_real",
    "view_as_complex",
    "contiguous",
    "to",
    "type_as",
    "lift_fresh",
    "lift_fresh_copy",
    "set_",
    "resize_",
];

/// `aten.NAME` of a target (None for other namespaces).
fn aten_op(target: &str) -> Option<&str> {
    let rest = target.strip_prefix("aten.")?;
    Some(rest.split_once('.').map_or(rest, |(op, _)| op))
}

/// Whether a node with this target may alias one of its inputs.
pub(super) fn aliases(target: &str) -> bool {
    match aten_op(target) {
        Some(op) => ALIASING.contains(&op) || op.ends_with('_'),
        // pt2web's fused nodes and symbolic arithmetic make new values; another library's
        // op, or a control-flow op, may return an input.
        None => !target.starts_with("pt2web.") && !target.starts_with("_operator."),
    }
}

/// The ops whose in-place form computes what the functional form computes, into `self`'s
/// dtype (checked per node: every tensor operand has that dtype). Not the comparisons
/// (`lt_` keeps a float `self`, `lt` returns bool) nor the random fills (`normal_` takes no
/// size, `normal` does).
const FUNCTIONAL: &[&str] = &[
    "relu",
    "relu6",
    "silu",
    "hardswish",
    "hardsigmoid",
    "hardtanh",
    "gelu",
    "sigmoid",
    "tanh",
    "leaky_relu",
    "elu",
    "celu",
    "selu",
    "mish",
    "clamp",
    "clamp_min",
    "clamp_max",
    "threshold",
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "exp",
    "abs",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "square",
    "pow",
    "dropout",
    "feature_dropout",
    "alpha_dropout",
    "feature_alpha_dropout",
];

/// The functional target of an in-place one (`aten.relu_.default` -> `aten.relu.default`)
/// that the op table runs, or None.
fn functional(target: &str) -> Option<String> {
    let rest = target.strip_prefix("aten.")?;
    let (op, overload) = rest.split_once('.')?;
    let base = op.strip_suffix('_')?;
    if !FUNCTIONAL.contains(&base) {
        return None;
    }
    let f = format!("aten.{base}.{overload}");
    crate::ops::table().cpu_kernel(&f).is_some().then_some(f)
}

/// The dtype of tensor value `v`.
fn dtype(g: &Graph, v: ValueId) -> Option<crate::DType> {
    match &g.values.get(v)?.kind {
        ValueKind::Tensor { dtype, .. } => Some(*dtype),
        _ => None,
    }
}

/// Rewrite the in-place ops of `g` that may be; how many it rewrote.
pub(super) fn run(g: &mut Graph) -> usize {
    // The node making each value.
    let mut made_by: HashMap<ValueId, usize> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let mut outs = Vec::new();
        n.outputs.iter().for_each(|a| super::defined(a, &mut outs));
        for v in outs {
            made_by.insert(v, i);
        }
    }
    let mut rewritten = 0;
    for i in 0..g.nodes.len() {
        let Some(f) = functional(&g.nodes[i].target) else {
            continue;
        };
        let (Some(Arg::Tensor(x)), [Arg::Tensor(y)]) =
            (g.nodes[i].arg("self"), &g.nodes[i].outputs[..])
        else {
            continue;
        };
        let (x, y) = (*x, *y);
        // An inference dropout writes nothing: its functional form is the no-op pass's.
        let writes = !(g.nodes[i].target.contains("dropout_")
            && matches!(g.nodes[i].arg("train"), Some(Arg::Bool(false))));
        let fresh = made_by
            .get(&x)
            .is_some_and(|&d| d < i && !aliases(&g.nodes[d].target));
        let other_aliasing = g.nodes.iter().enumerate().any(|(j, n)| {
            j != i && aliases(&n.target) && {
                let mut reads = Vec::new();
                n.inputs.iter().for_each(|(_, a)| a.values(&mut reads));
                reads.contains(&x)
            }
        });
        // Type promotion: the functional op's result would be the promoted dtype.
        let mut operands = Vec::new();
        g.nodes[i]
            .inputs
            .iter()
            .for_each(|(_, a)| a.values(&mut operands));
        let same_dtype = dtype(g, x).is_some_and(|d| {
            dtype(g, y) == Some(d) && operands.iter().all(|&v| dtype(g, v).is_none_or(|o| o == d))
        });
        if writes && (!fresh || other_aliasing) || !same_dtype || x == y {
            continue;
        }
        g.nodes[i].target = f;
        // The value y is new storage now; later reads of x read y.
        for n in &mut g.nodes[i + 1..] {
            for (_, a) in &mut n.inputs {
                rename(a, x, y);
            }
        }
        for a in &mut g.outputs {
            rename(a, x, y);
        }
        made_by.insert(y, i);
        rewritten += 1;
    }
    rewritten
}
