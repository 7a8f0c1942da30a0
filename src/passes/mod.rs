//! Graph passes: rewrites of a [`Program`]'s graph after it is loaded and before it is
//! planned, so every backend (CPU, GPU, meta) plans and runs the rewritten graph.
//!
//! Each pass is a small file here, keeps every result the same, and counts what it changed:
//! - [`Pass::Functionalize`] (`functionalize.rs`): in-place ops on intermediates (the
//!   training IR's `relu_`, `silu_`, `add_`) made functional, so the passes below apply.
//! - [`Pass::DeadCode`] (`dce.rs`): nodes whose outputs nothing reads, when running them has
//!   no other effect (no in-place writes, no random draws, no assertions).
//! - [`Pass::NoOps`] (`noop.rs`): `alias`, `detach`, `clone`, same-dtype `_to_copy`,
//!   `contiguous`, and `view` / `reshape` / `expand` to the shape they already have, when
//!   torch's own metadata says the result has the input's dtype, sizes and strides: uses of
//!   the result read the input instead.
//! - [`Pass::Cse`] (`cse.rs`, after attention recognition): a node computing what an earlier
//!   one computed (same target, same arguments) goes; its readers read the earlier results.
//! - [`Pass::QParams`] (`qparams.rs`): dynamic quantization's `choose_qparams` with its
//!   scale in float32 (the value torch computes, before it widens it to float64) where only
//!   the per-tensor quantize / dequantize read it, so the GPU runs it.
//! - [`Pass::ConstFold`] (`const_fold.rs`): what depends only on parameters, buffers the
//!   program never mutates and constants (dtype casts, arithmetic, copies and concatenations
//!   of weights) computed once at load by the CPU kernels; each result the rest of the graph
//!   reads becomes a new constant (`pt2web_folded.<node>`). Chains of views alone stay.
//! - [`Pass::FoldBatchNorm`] (`fold_bn.rs`): an inference batch norm after a convolution
//!   folded into the convolution's weight and bias (new constants, computed at load).
//! - [`Pass::Attention`] (`attention.rs`, before constant folding): attention as core ATen writes it (`bmm`, scale,
//!   mask add, softmax, `bmm`, with the views and copies between) becomes one
//!   `pt2web.fused_attention` node (the GPU runs one streaming kernel; see
//!   `src/ops/attention/fused.rs`).
//! - [`Pass::Fuse`] (`fuse.rs`): chains of f32 elementwise ops become one
//!   `pt2web.fused_elementwise` node (one generated GPU kernel; see `src/ops/elementwise/fused.rs`).
//! - [`Pass::Epilogue`] (`epilogue.rs`): a matrix product or convolution and the elementwise
//!   op or fused chain that reads its result become one `pt2web.fused_epilogue` node (the
//!   GPU applies the ops in the producer's kernel; see `src/ops/elementwise/epilogue.rs`).
//! - [`Pass::Reinplace`] (`reinplace.rs`, last): a functional buffer update returned as the
//!   buffer's mutation (`index_copy`, `index_put`, `slice_scatter`, `copy`) writes into the
//!   buffer's storage in place.
//!
//! Which passes run is a process-wide switch, [`crate::backends::set_graph_passes`]
//! (natively also `PT2WEB_PASSES=none|all|functionalize,noop,dce,attention,cse,qparams,const_fold,fold_bn,fuse,epilogue,reinplace`); a
//! session applies them once when it is created ([`crate::runtime::Session::new`]) and keeps the [`PassReport`]. `pt2web info
//! --plan` prints the report and the graph after the passes.

mod attention;
mod const_fold;
mod cse;
mod dce;
/// Load-time decompositions of composite ops (not a session pass: every load runs it).
pub mod decompose;
mod epilogue;
mod fold_bn;
mod functionalize;
mod fuse;
/// Load-time f16 execution of float32 programs (not a session pass: `LoadOptions::dtype`
/// asks for it).
pub mod half;
mod noop;
mod qparams;
/// Load-time weight quantization (not a session pass: `LoadOptions::weights` asks for it).
pub mod quantize;
mod reinplace;

use crate::program::{Arg, Graph, IntArg, Node, Program, ValueId};
use std::collections::HashMap;
use std::fmt;

/// The prefix of the constants the passes add (computed at load from the program's state;
/// `pt2web check` counts them as derived bytes).
pub const FOLDED_PREFIX: &str = "pt2web_folded.";

/// One graph pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Dead-code elimination.
    DeadCode,
    /// Removal of copies and views that change nothing.
    NoOps,
    /// Elementwise chains as one node.
    Fuse,
    /// Inference batch norms folded into the convolution before them.
    FoldBatchNorm,
    /// What depends only on the program's state, computed once at load.
    ConstFold,
    /// Elementwise ops applied in the kernel of the product or convolution before them.
    Epilogue,
    /// Core ATen's attention (bmm, scale, mask, softmax, bmm) as one node.
    Attention,
    /// In-place ops on intermediates made functional (training IR).
    Functionalize,
    /// Functional buffer updates written back as mutations made in place.
    Reinplace,
    /// Repeated computations merged.
    Cse,
    /// Dynamic quantization's scales computed in float32.
    QParams,
}

impl Pass {
    /// Every pass, in the order they run.
    pub const ALL: [Pass; 11] = [
        Pass::Functionalize,
        Pass::NoOps,
        Pass::DeadCode,
        // Before constant folding, which would fold the safe softmax's `full_like(P, 0)`
        // (it reads only P's shape) and hide the pattern.
        Pass::Attention,
        // After attention recognition, whose patterns want each intermediate read once.
        Pass::Cse,
        Pass::QParams,
        Pass::ConstFold,
        Pass::FoldBatchNorm,
        Pass::Fuse,
        Pass::Epilogue,
        Pass::Reinplace,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pass::DeadCode => "dce",
            Pass::NoOps => "noop",
            Pass::Fuse => "fuse",
            Pass::FoldBatchNorm => "fold_bn",
            Pass::ConstFold => "const_fold",
            Pass::Epilogue => "epilogue",
            Pass::Attention => "attention",
            Pass::Functionalize => "functionalize",
            Pass::Reinplace => "reinplace",
            Pass::Cse => "cse",
            Pass::QParams => "qparams",
        }
    }

    /// A pass by [`Pass::name`] or an alias (`dead_code`, `no_ops`, `fusion`, `bn`,
    /// `constfold`, `fold_constants`...).
    pub fn parse(s: &str) -> Option<Pass> {
        match s.trim().to_ascii_lowercase().as_str() {
            "dce" | "dead_code" | "deadcode" => Some(Pass::DeadCode),
            "noop" | "noops" | "no_ops" => Some(Pass::NoOps),
            "fuse" | "fusion" => Some(Pass::Fuse),
            "fold_bn" | "bn" | "foldbn" | "fold_batch_norm" => Some(Pass::FoldBatchNorm),
            "const_fold" | "constfold" | "fold_constants" => Some(Pass::ConstFold),
            "epilogue" | "epilogues" => Some(Pass::Epilogue),
            "attention" | "sdpa" => Some(Pass::Attention),
            "functionalize" | "functionalization" => Some(Pass::Functionalize),
            "reinplace" | "reinplacing" | "inplace" => Some(Pass::Reinplace),
            "cse" | "common_subexpressions" => Some(Pass::Cse),
            "qparams" | "choose_qparams" => Some(Pass::QParams),
            _ => None,
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A set of passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassSet(u32);

impl PassSet {
    pub const NONE: PassSet = PassSet(0);
    pub const ALL: PassSet = PassSet((1 << Pass::ALL.len()) - 1);

    pub fn of(passes: &[Pass]) -> PassSet {
        PassSet(passes.iter().fold(0, |m, p| m | p.bit()))
    }
    pub fn contains(self, p: Pass) -> bool {
        self.0 & p.bit() != 0
    }
    pub fn passes(self) -> Vec<Pass> {
        Pass::ALL
            .into_iter()
            .filter(|p| self.contains(*p))
            .collect()
    }
    /// `none`, `all`, or a comma-separated list of pass names.
    pub fn parse(s: &str) -> Result<PassSet, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "all" | "default" => return Ok(PassSet::ALL),
            "none" | "off" | "0" => return Ok(PassSet::NONE),
            _ => {}
        }
        let mut v = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            v.push(Pass::parse(part).ok_or_else(|| {
                format!(
                    "unknown graph pass '{}' (known: none, all, {})",
                    part.trim(),
                    Pass::ALL.map(Pass::name).join(", ")
                )
            })?);
        }
        Ok(PassSet::of(&v))
    }
    pub(crate) fn bits(self) -> u32 {
        self.0
    }
    pub(crate) fn from_bits(b: u32) -> PassSet {
        PassSet(b & PassSet::ALL.0)
    }
}

impl fmt::Display for PassSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.passes().into_iter().map(Pass::name).collect();
        if names.is_empty() {
            write!(f, "none")
        } else {
            write!(f, "{}", names.join(","))
        }
    }
}

/// What the passes did to a program (its subgraphs included).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PassReport {
    /// The passes that ran, by name.
    pub passes: Vec<String>,
    pub nodes_before: usize,
    pub nodes_after: usize,
    /// Nodes removed by each pass.
    pub removed: Vec<(String, usize)>,
}

impl fmt::Display for PassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.passes.is_empty() {
            return write!(f, "graph passes: none ({} nodes)", self.nodes_before);
        }
        let parts: Vec<String> = self
            .removed
            .iter()
            .map(|(p, n)| format!("{p} -{n}"))
            .collect();
        write!(
            f,
            "graph passes: {} nodes -> {} ({})",
            self.nodes_before,
            self.nodes_after,
            parts.join(", ")
        )
    }
}

/// Apply `passes` to the program's graph and its subgraphs.
pub fn run(p: &mut Program, passes: PassSet) -> PassReport {
    let mut report = PassReport {
        passes: passes
            .passes()
            .into_iter()
            .map(|p| p.name().to_string())
            .collect(),
        nodes_before: steps(&p.graph),
        ..Default::default()
    };
    for pass in passes.passes() {
        let n = match pass {
            // Read and add program state: the top-level graph only.
            Pass::FoldBatchNorm => fold_bn::run(p),
            Pass::ConstFold => const_fold::run(p),
            Pass::Reinplace => reinplace::run(p),
            _ => on_graphs(&mut p.graph, &mut |g| match pass {
                Pass::DeadCode => dce::run(g),
                Pass::NoOps => noop::run(g),
                Pass::Fuse => fuse::run(g),
                Pass::Epilogue => epilogue::run(g),
                Pass::Attention => attention::run(g),
                Pass::Functionalize => functionalize::run(g),
                Pass::Cse => cse::run(g),
                Pass::QParams => qparams::run(g),
                Pass::FoldBatchNorm | Pass::ConstFold | Pass::Reinplace => 0,
            }),
        };
        report.removed.push((pass.name().to_string(), n));
    }
    report.nodes_after = steps(&p.graph);
    report
}

/// Add `t` to the program as a new tensor constant `name` (state, input spec and
/// placeholder, appended after the other inputs so user inputs keep their order); its
/// placeholder value.
fn add_constant(p: &mut Program, name: &str, t: crate::tensor::HostTensor) -> ValueId {
    use crate::program::{Dim, InputKind, InputSpec, StateEntry, StateKind, Value, ValueKind};
    let dims = |v: &[usize]| v.iter().map(|&s| Dim::Static(s as i64)).collect();
    let id = p.graph.values.len();
    p.graph.values.push(Value {
        name: name.to_string(),
        kind: ValueKind::Tensor {
            dtype: t.dtype,
            sizes: dims(&t.sizes),
            strides: dims(&t.strides),
            requires_grad: false,
        },
    });
    p.graph.by_name.insert(name.to_string(), id);
    p.graph.inputs.push(Arg::Tensor(id));
    p.inputs.push(InputSpec {
        name: name.to_string(),
        kind: InputKind::Constant {
            name: name.to_string(),
        },
    });
    p.state.insert(
        name.to_string(),
        StateEntry {
            kind: StateKind::Constant,
            tensor: t,
            path_name: String::new(),
        },
    );
    id
}

/// The nodes a backend steps through in `g` and its control-flow subgraphs: a fused node
/// counts as one (its body runs only where its kernel declines).
pub fn steps(g: &Graph) -> usize {
    g.nodes
        .iter()
        .map(|n| {
            1 + if n.target == crate::ops::elementwise::fused::TARGET
                || n.target == crate::ops::elementwise::epilogue::TARGET
                || n.target == crate::ops::attention::fused::TARGET
            {
                0
            } else {
                n.inputs
                    .iter()
                    .map(|(_, a)| match a {
                        Arg::Graph(sub) => steps(sub),
                        _ => 0,
                    })
                    .sum::<usize>()
            }
        })
        .sum()
}

/// `f` on `g` and every subgraph inside it (subgraphs first); the sum of what it returned.
fn on_graphs(g: &mut Graph, f: &mut dyn FnMut(&mut Graph) -> usize) -> usize {
    let mut n = 0;
    for node in &mut g.nodes {
        for (_, a) in &mut node.inputs {
            if let Arg::Graph(sub) = a {
                n += on_graphs(sub, f);
            }
        }
    }
    n + f(g)
}

/// `g`'s nodes without those marked `gone`, each node at an index of `replacements`
/// replaced by the node given there (a fused node at its chain's place).
fn replace_nodes(
    g: &mut Graph,
    gone: &[bool],
    mut replacements: std::collections::HashMap<usize, crate::program::Node>,
) {
    let old = std::mem::take(&mut g.nodes);
    g.nodes = old
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !gone[*i])
        .map(|(i, n)| replacements.remove(&i).unwrap_or(n))
        .collect();
}

/// A subgraph over copies of `g`'s values.
pub(super) struct Sub<'g> {
    g: &'g Graph,
    graph: Graph,
    local: HashMap<ValueId, ValueId>,
}

impl<'g> Sub<'g> {
    pub(super) fn new(g: &'g Graph) -> Self {
        Sub {
            g,
            graph: Graph::default(),
            local: HashMap::new(),
        }
    }
    pub(super) fn value(&mut self, v: ValueId) -> ValueId {
        *self.local.entry(v).or_insert_with(|| {
            let val = self.g.value(v).clone();
            self.graph.values.push(val.clone());
            let id = self.graph.values.len() - 1;
            self.graph.by_name.insert(val.name, id);
            id
        })
    }
    pub(super) fn input(&mut self, v: ValueId) {
        let id = self.value(v);
        self.graph.inputs.push(Arg::Tensor(id));
    }
    pub(super) fn sym_input(&mut self, v: ValueId) {
        let id = self.value(v);
        self.graph.inputs.push(Arg::SymInt(IntArg::Sym(id)));
    }
    /// `n` with its tensor arguments and results renamed into the subgraph.
    pub(super) fn node(&mut self, n: &Node) {
        let mut n = n.clone();
        for (_, a) in &mut n.inputs {
            match a {
                Arg::Tensor(v) | Arg::OptTensor(Some(v)) => *v = self.value(*v),
                Arg::Tensors(vs) => vs.iter_mut().for_each(|v| *v = self.value(*v)),
                Arg::SymInt(IntArg::Sym(v)) => *v = self.value(*v),
                Arg::SymInts(is) => {
                    for i in is {
                        if let IntArg::Sym(v) = i {
                            *v = self.value(*v);
                        }
                    }
                }
                _ => {}
            }
        }
        for a in &mut n.outputs {
            if let Arg::Tensor(v) = a {
                *v = self.value(*v);
            }
        }
        self.graph.nodes.push(n);
    }
    pub(super) fn output(mut self, v: ValueId) -> Graph {
        let id = self.value(v);
        self.graph.outputs = vec![Arg::Tensor(id)];
        self.graph
    }
}

/// The symbolic ints `nodes` read (as `SymInt` / `SymInts` arguments), each once, in
/// first-read order: the sizes a subgraph of them takes as inputs.
fn sym_reads<'n>(nodes: impl Iterator<Item = &'n Node>) -> Vec<ValueId> {
    let mut syms = Vec::new();
    for n in nodes {
        for (_, a) in &n.inputs {
            let ints: &[IntArg] = match a {
                Arg::SymInts(is) => is,
                Arg::SymInt(i) => std::slice::from_ref(i),
                _ => &[],
            };
            for i in ints {
                if let IntArg::Sym(s) = i {
                    if !syms.contains(s) {
                        syms.push(*s);
                    }
                }
            }
        }
    }
    syms
}

/// The values a graph's nodes define, per node output.
fn defined(a: &Arg, out: &mut Vec<ValueId>) {
    match a {
        Arg::Tensor(v) => out.push(*v),
        Arg::Tensors(vs) => out.extend(vs),
        Arg::OptTensors(vs) => out.extend(vs.iter().flatten()),
        Arg::SymInt(crate::program::IntArg::Sym(v))
        | Arg::SymFloat(crate::program::FloatArg::Sym(v))
        | Arg::SymBool(crate::program::BoolArg::Sym(v)) => out.push(*v),
        other => other.values(out),
    }
}

/// Static sizes of tensor value `v`.
pub(super) fn static_sizes(g: &Graph, v: ValueId) -> Option<Vec<i64>> {
    match &g.values.get(v)?.kind {
        crate::program::ValueKind::Tensor { sizes, .. } => sizes
            .iter()
            .map(|d| match d {
                crate::program::Dim::Static(s) => Some(*s),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// Contiguous strides of `sizes`.
pub(super) fn contiguous(sizes: &[i64]) -> Vec<crate::program::Dim> {
    use crate::program::Dim;
    let mut strides = vec![Dim::Static(1); sizes.len()];
    let mut step = 1i64;
    for (k, s) in sizes.iter().enumerate().rev() {
        strides[k] = Dim::Static(step);
        step = step.saturating_mul((*s).max(1));
    }
    strides
}

/// The node defining each value of `g` (by index; the last one if several do).
fn definers(g: &Graph) -> HashMap<ValueId, usize> {
    let mut def = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let mut ids = Vec::new();
        n.outputs.iter().for_each(|a| defined(a, &mut ids));
        for v in ids {
            def.insert(v, i);
        }
    }
    def
}

/// The values `g` returns.
fn output_values(g: &Graph) -> Vec<ValueId> {
    let mut out = Vec::new();
    for a in &g.outputs {
        a.values(&mut out);
    }
    out
}

/// How many times each value is read: by a node's inputs or as a graph output.
/// Whether the graph reads the state tensor `fqn` (a parameter, buffer or constant whose
/// placeholder has a use): after batch-norm folding or dead-code elimination some no longer
/// are (what `model.state.set` in JS checks before writing one).
pub fn graph_reads_state(p: &Program, fqn: &str) -> bool {
    use crate::program::InputKind;
    let uses = use_counts(&p.graph);
    p.inputs.iter().any(|i| match &i.kind {
        InputKind::Parameter { name }
        | InputKind::Buffer { name, .. }
        | InputKind::Constant { name } => {
            name == fqn
                && p.graph
                    .id(&i.name)
                    .is_some_and(|id| uses.get(id).is_some_and(|&u| u > 0))
        }
        _ => false,
    })
}

fn use_counts(g: &Graph) -> Vec<usize> {
    let mut uses = vec![0usize; g.values.len()];
    let mut ids = Vec::new();
    for n in &g.nodes {
        for (_, a) in &n.inputs {
            ids.clear();
            a.values(&mut ids);
            for &i in &ids {
                if let Some(u) = uses.get_mut(i) {
                    *u += 1;
                }
            }
        }
    }
    for a in &g.outputs {
        ids.clear();
        a.values(&mut ids);
        for &i in &ids {
            if let Some(u) = uses.get_mut(i) {
                *u += 1;
            }
        }
    }
    uses
}

/// One line per node, `outputs = target(args)`, for `pt2web info --plan`.
pub fn render_graph(g: &Graph) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    render_into(g, 1, &mut s);
    let outs: Vec<String> = g.outputs.iter().map(|a| arg_str(g, a)).collect();
    let _ = writeln!(s, "  return ({})", outs.join(", "));
    s
}

fn render_into(g: &Graph, depth: usize, s: &mut String) {
    use std::fmt::Write;
    let pad = "  ".repeat(depth);
    for n in &g.nodes {
        let outs: Vec<String> = n.outputs.iter().map(|a| arg_str(g, a)).collect();
        let args: Vec<String> = n
            .inputs
            .iter()
            .map(|(k, a)| match a {
                Arg::Graph(sub) => format!("{k}=<graph of {} nodes>", sub.node_count()),
                _ => format!("{k}={}", arg_str(g, a)),
            })
            .collect();
        let _ = writeln!(
            s,
            "{pad}{} = {}({})",
            outs.join(", "),
            n.target,
            args.join(", ")
        );
        for (k, a) in &n.inputs {
            if let Arg::Graph(sub) = a {
                let _ = writeln!(s, "{pad}  {k}:");
                render_into(sub, depth + 2, s);
            }
        }
    }
}

fn arg_str(g: &Graph, a: &Arg) -> String {
    let name = |v: &ValueId| {
        g.values
            .get(*v)
            .map_or_else(|| format!("%{v}"), |x| x.name.clone())
    };
    let int_str = |i: &crate::program::IntArg| match i {
        crate::program::IntArg::Int(i) => i.to_string(),
        crate::program::IntArg::Sym(v) => name(v),
    };
    match a {
        Arg::Tensor(v) => name(v),
        Arg::Tensors(vs) => format!("[{}]", vs.iter().map(name).collect::<Vec<_>>().join(", ")),
        Arg::OptTensor(None) => "None".into(),
        Arg::OptTensor(Some(v)) => name(v),
        Arg::None => "None".into(),
        Arg::Int(i) => i.to_string(),
        Arg::Float(f) => f.to_string(),
        Arg::Bool(b) => b.to_string(),
        Arg::Ints(v) => format!("{v:?}"),
        Arg::Str(s) => format!("'{s}'"),
        Arg::ScalarType(d) => d.name().to_string(),
        Arg::SymInt(i) => int_str(i),
        Arg::SymInts(v) => format!("[{}]", v.iter().map(int_str).collect::<Vec<_>>().join(", ")),
        other => {
            let mut ids = Vec::new();
            other.values(&mut ids);
            if ids.is_empty() {
                let s = format!("{other:?}");
                if s.chars().count() > 60 {
                    format!("{}...", s.chars().take(57).collect::<String>())
                } else {
                    s
                }
            } else {
                format!("[{}]", ids.iter().map(name).collect::<Vec<_>>().join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_sets_parse() {
        assert_eq!(PassSet::parse("none").unwrap(), PassSet::NONE);
        assert_eq!(PassSet::parse("all").unwrap(), PassSet::ALL);
        assert_eq!(
            PassSet::parse("dce").unwrap(),
            PassSet::of(&[Pass::DeadCode])
        );
        assert_eq!(
            PassSet::parse(
                "noop, dce, fuse, fold_bn, const_fold, attention, epilogue, functionalize, reinplace, cse, qparams"
            )
            .unwrap(),
            PassSet::ALL
        );
        for alias in ["constfold", "fold_constants", "CONST_FOLD"] {
            assert_eq!(
                PassSet::parse(alias).unwrap(),
                PassSet::of(&[Pass::ConstFold])
            );
        }
        let e = PassSet::parse("dce,fold").unwrap_err();
        assert!(e.contains("'fold'"), "{e}");
        assert_eq!(
            PassSet::ALL.to_string(),
            "functionalize,noop,dce,attention,cse,qparams,const_fold,fold_bn,fuse,epilogue,reinplace"
        );
        assert_eq!(PassSet::NONE.to_string(), "none");
    }
}
