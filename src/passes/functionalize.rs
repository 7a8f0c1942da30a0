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
//!
//! A write through a chain of `slice` / `select` views of such a tensor (the training IR's
//! `mask[a:b, c:d] = k`, as `fill_` on a slice of a slice of `new_zeros`) becomes the
//! functional op on the view followed by one `slice_scatter` / `select_scatter` per view,
//! innermost first, and the nodes after it read the last scatter's result instead of the
//! base tensor (what torch's functionalization writes for core ATen). Only where each view
//! of the chain is read by the next link alone, nothing reads the write's result, and every
//! other view of the base taken before the write is gone by then (so none sees the write).

use super::noop::rename;
use crate::program::{Arg, Dim, Graph, Node, Value, ValueId, ValueKind};

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
    // The result has self's dtype whatever the value's or the source's.
    "fill",
    "copy",
];

/// Ops whose result has `self`'s dtype whatever the other operands' dtypes.
const KEEPS_DTYPE: &[&str] = &["aten.fill.Scalar", "aten.fill.Tensor", "aten.copy.default"];

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

/// Whether the functional op `f` on `x` (reading `operands`) gives `y`'s dtype: every
/// operand has x's dtype, or `f` keeps self's dtype.
fn same_dtype(g: &Graph, f: &str, x: ValueId, y: ValueId, operands: &[ValueId]) -> bool {
    dtype(g, x).is_some_and(|d| {
        dtype(g, y) == Some(d)
            && (KEEPS_DTYPE.contains(&f)
                || operands.iter().all(|&v| dtype(g, v).is_none_or(|o| o == d)))
    })
}

/// Rewrite the in-place ops of `g` that may be; how many it rewrote.
pub(super) fn run(g: &mut Graph) -> usize {
    let mut rewritten = 0;
    let mut i = 0;
    while i < g.nodes.len() {
        i += 1 + match through_views(g, i) {
            Some(added) => {
                rewritten += 1;
                added
            }
            None => 0,
        };
    }
    rewritten + on_fresh(g)
}

/// The scatter that writes a value back through the view op `target`.
fn scatter_of(target: &str) -> Option<&'static str> {
    match target {
        "aten.slice.Tensor" => Some("aten.slice_scatter.default"),
        "aten.select.int" => Some("aten.select_scatter.default"),
        _ => None,
    }
}

/// Rewrite the in-place write at node `i` if it goes through `slice`/`select` views of a
/// fresh tensor (see the module's doc); the number of nodes it added after `i`.
fn through_views(g: &mut Graph, i: usize) -> Option<usize> {
    let f = functional(&g.nodes[i].target)?;
    let (Some(Arg::Tensor(x)), [Arg::Tensor(y)]) =
        (g.nodes[i].arg("self"), &g.nodes[i].outputs[..])
    else {
        return None;
    };
    let (x, y) = (*x, *y);
    let uses = super::use_counts(g);
    let reads = |v: ValueId| uses.get(v).copied().unwrap_or(0);
    let made_by = |v: ValueId| {
        g.nodes[..i].iter().rposition(|n| {
            let mut outs = Vec::new();
            n.outputs.iter().for_each(|a| super::defined(a, &mut outs));
            outs.contains(&v)
        })
    };
    // The chain of views from x to the base tensor, innermost first.
    let mut links = Vec::new();
    let mut v = x;
    loop {
        let d = made_by(v)?;
        let n = &g.nodes[d];
        if scatter_of(&n.target).is_none() {
            if aliases(&n.target) {
                return None;
            }
            break;
        }
        // Each view is read by the next link (or the write) alone.
        if reads(v) != 1 {
            return None;
        }
        links.push(d);
        v = match n.arg("self") {
            Some(Arg::Tensor(s)) => *s,
            _ => return None,
        };
    }
    let base = v;
    let mut operands = Vec::new();
    g.nodes[i]
        .inputs
        .iter()
        .for_each(|(_, a)| a.values(&mut operands));
    if links.is_empty() || reads(y) != 0 || !same_dtype(g, &f, x, y, &operands) {
        return None;
    }
    // A view of the base taken before the write (other than the chain) could be read after it.
    let outer = *links.last()?;
    let early_view = g.nodes[..i].iter().enumerate().any(|(j, n)| {
        j != outer && aliases(&n.target) && {
            let mut r = Vec::new();
            n.inputs.iter().for_each(|(_, a)| a.values(&mut r));
            r.contains(&base)
        }
    });
    // The results are new contiguous tensors: static sizes only.
    let contiguous = |g: &Graph, v: ValueId| -> Option<ValueKind> {
        let sizes = super::static_sizes(g, v)?;
        let ValueKind::Tensor {
            dtype,
            requires_grad,
            ..
        } = g.value(v).kind.clone()
        else {
            return None;
        };
        Some(ValueKind::Tensor {
            dtype,
            strides: super::contiguous(&sizes),
            sizes: sizes.into_iter().map(Dim::Static).collect(),
            requires_grad,
        })
    };
    let y_kind = contiguous(g, y)?;
    let kinds = links
        .iter()
        .map(|&d| match g.nodes[d].arg("self") {
            Some(Arg::Tensor(p)) => contiguous(g, *p).map(|k| (*p, k)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let names: Vec<String> = (0..links.len())
        .map(|k| format!("{}_scatter{k}", g.nodes[i].name))
        .collect();
    if early_view || names.iter().any(|n| g.by_name.contains_key(n)) {
        return None;
    }
    g.nodes[i].target = f;
    g.values[y].kind = y_kind;
    // One scatter per view, innermost first, each writing the value into the view's parent.
    let mut src = y;
    let mut added = Vec::new();
    for ((&d, (parent, kind)), name) in links.iter().zip(kinds).zip(names) {
        let out = g.values.len();
        g.values.push(Value {
            name: name.clone(),
            kind,
        });
        g.by_name.insert(name.clone(), out);
        let link = &g.nodes[d];
        let mut inputs = vec![
            ("self".to_string(), Arg::Tensor(parent)),
            ("src".to_string(), Arg::Tensor(src)),
        ];
        inputs.extend(link.inputs.iter().filter(|(n, _)| n != "self").cloned());
        let target = scatter_of(&link.target)?.to_string();
        added.push(Node {
            name,
            target,
            inputs,
            outputs: vec![Arg::Tensor(out)],
            metadata: g.nodes[i].metadata.clone(),
        });
        src = out;
    }
    let n_added = added.len();
    g.nodes.splice(i + 1..i + 1, added);
    // The nodes after the write read the base's new value.
    for n in &mut g.nodes[i + 1 + n_added..] {
        for (_, a) in &mut n.inputs {
            rename(a, base, src);
        }
    }
    for a in &mut g.outputs {
        rename(a, base, src);
    }
    Some(n_added)
}

/// Rewrite the in-place ops of `g` on fresh tensors; how many it rewrote.
fn on_fresh(g: &mut Graph) -> usize {
    // The node making each value.
    let mut made_by = super::definers(g);
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
        let same_dtype = same_dtype(g, &f, x, y, &operands);
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
