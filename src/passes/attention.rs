//! Attention recognition: attention as core ATen writes it becomes one
//! `pt2web.fused_attention` node (see `src/ops/attention/fused.rs`), which the GPU runs as
//! one streaming kernel instead of some ten dispatches (two copies, the scores' `bmm`, the
//! scale and mask, the softmax or its safe decomposition, a copy and the second `bmm`).
//!
//! The pattern, from the output back (each `reshape` a `view`, `_unsafe_view` or `reshape`):
//!
//! ```text
//! out [B,H,L,Ev] = reshape(bmm(reshape(W) [BH,L,S], flat(v)))
//! W = _softmax(X, -1)                                          (safe = false)
//!   | where(not(any(not(eq(X, -inf)), -1)), full_like(P, 0), P), P = _softmax(X, -1)   (safe)
//! X = Y [+ mask]              Y = Z [* c | / c]...
//! Z [B,H,L,S] = reshape(bmm(flat(q [* c]), flat(permute(k [* c], [0,1,3,2]) [* c])))
//! flat(t) = reshape([clone]([expand to its own sizes](t))), merging t's first two dims
//! ```
//!
//! q, k and v are rank-4 f32 tensors (any strides: the kernel reads them where they lie), the
//! mask any f32 tensor the scores broadcast it onto, each `c` a number in the graph (their
//! product is the node's `scale`). Every value the matched nodes make, but the output, must
//! be read by matched nodes only, so nothing else needs the scores or the weights. Graphs
//! with an in-place write are left alone, as the other fusion passes leave them.

use super::noop::writes_in_place;
use super::{use_counts, Sub};
use crate::dtype::DType;
use crate::ops::attention::fused::TARGET;
use crate::program::{Arg, Dim, Graph, IntArg, Node, ValueId, ValueKind};
use std::collections::HashMap;

/// Recognize the attentions of `g`; how many nodes fewer the graph has.
pub(super) fn run(g: &mut Graph) -> usize {
    if writes_in_place(g) {
        return 0;
    }
    let uses = use_counts(g);
    let graph_outputs = super::output_values(g);
    let mut def: HashMap<ValueId, usize> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for a in &n.outputs {
            let mut ids = Vec::new();
            super::defined(a, &mut ids);
            for v in ids {
                def.insert(v, i);
            }
        }
    }
    let m = Matcher { g, def: &def };
    let mut gone = vec![false; g.nodes.len()];
    let mut fused_at: HashMap<usize, Node> = HashMap::new();
    for root in 0..g.nodes.len() {
        let Some(mut found) = m.attention(root) else {
            continue;
        };
        absorb_asserts(g, &mut found);
        if found.nodes.iter().any(|&i| gone[i]) || !closed(g, &found, &uses, &graph_outputs) {
            continue;
        }
        for &i in &found.nodes {
            gone[i] = i != root;
        }
        fused_at.insert(root, fused_node(g, &found, root));
    }
    let removed = gone.iter().filter(|&&x| x).count();
    if removed > 0 {
        super::replace_nodes(g, &gone, fused_at);
    }
    removed
}

/// One recognized attention.
struct Found {
    /// The matched nodes (indices in the graph, the root among them).
    nodes: Vec<usize>,
    q: ValueId,
    k: ValueId,
    v: ValueId,
    mask: Option<ValueId>,
    scale: f64,
    safe: bool,
    out: ValueId,
}

struct Matcher<'g> {
    g: &'g Graph,
    def: &'g HashMap<ValueId, usize>,
}

const RESHAPES: &[&str] = &[
    "aten.view.default",
    "aten._unsafe_view.default",
    "aten.reshape.default",
];

impl Matcher<'_> {
    /// The node defining `v`, if its target is one of `targets`.
    fn node(&self, v: ValueId, targets: &[&str]) -> Option<(usize, &Node)> {
        let &i = self.def.get(&v)?;
        let n = &self.g.nodes[i];
        targets.contains(&n.target.as_str()).then_some((i, n))
    }
    fn tensor(n: &Node, name: &str) -> Option<ValueId> {
        match n.arg(name) {
            Some(Arg::Tensor(v)) => Some(*v),
            _ => None,
        }
    }
    fn number(n: &Node, name: &str) -> Option<f64> {
        match n.arg(name) {
            Some(Arg::Float(f)) => Some(*f),
            Some(Arg::Int(i)) => Some(*i as f64),
            _ => None,
        }
    }
    fn int(n: &Node, name: &str) -> Option<i64> {
        match n.arg(name) {
            Some(Arg::Int(i)) => Some(*i),
            _ => None,
        }
    }
    fn sizes(&self, v: ValueId) -> Option<&[Dim]> {
        match &self.g.values.get(v)?.kind {
            ValueKind::Tensor { sizes, .. } => Some(sizes),
            _ => None,
        }
    }
    fn f32(&self, v: ValueId) -> bool {
        matches!(
            self.g.values.get(v).map(|x| &x.kind),
            Some(ValueKind::Tensor {
                dtype: DType::F32,
                ..
            })
        )
    }
    fn rank(&self, v: ValueId) -> Option<usize> {
        self.sizes(v).map(<[Dim]>::len)
    }
    /// Whether `d` names the last of `rank` dims.
    fn last_dim(d: i64, rank: usize) -> bool {
        d == -1 || d == rank as i64 - 1
    }

    /// `v` with the scalar `mul` / `div` nodes that made it peeled off: (the tensor they
    /// scale, the scale, the nodes).
    fn unscale(&self, mut v: ValueId, nodes: &mut Vec<usize>) -> (ValueId, f64) {
        let mut scale = 1.0;
        for _ in 0..4 {
            let Some((i, n)) = self.node(
                v,
                &[
                    "aten.mul.Tensor",
                    "aten.mul.Scalar",
                    "aten.div.Tensor",
                    "aten.div.Scalar",
                ],
            ) else {
                break;
            };
            let (Some(x), Some(c)) = (Self::tensor(n, "self"), Self::number(n, "other")) else {
                break;
            };
            if n.target.starts_with("aten.div") {
                if c == 0.0 {
                    break;
                }
                scale /= c;
            } else {
                scale *= c;
            }
            nodes.push(i);
            v = x;
        }
        (v, scale)
    }

    /// The rank-4 tensor `v3` (rank 3) flattens: `reshape([clone]([expand](t)))` merging
    /// t's first two dims.
    fn unflatten(&self, v3: ValueId, nodes: &mut Vec<usize>) -> Option<ValueId> {
        let (i, n) = self.node(v3, RESHAPES)?;
        let mut t = Self::tensor(n, "self")?;
        nodes.push(i);
        if let Some((i, n)) = self.node(t, &["aten.clone.default"]) {
            nodes.push(i);
            t = Self::tensor(n, "self")?;
        }
        if let Some((i, n)) = self.node(t, &["aten.expand.default"]) {
            let x = Self::tensor(n, "self")?;
            if self.sizes(x)? != self.sizes(t)? {
                return None;
            }
            nodes.push(i);
            t = x;
        }
        let (s3, s4) = (self.sizes(v3)?, self.sizes(t)?);
        (s3.len() == 3 && s4.len() == 4 && s3[1..] == s4[2..]).then_some(t)
    }

    /// The rank-4 result of `reshape(v3)` at node `i`, splitting v3's first dim.
    fn split(&self, n: &Node) -> Option<(ValueId, ValueId)> {
        let v3 = Self::tensor(n, "self")?;
        let [Arg::Tensor(v4)] = n.outputs[..] else {
            return None;
        };
        let (s3, s4) = (self.sizes(v3)?, self.sizes(v4)?);
        (s3.len() == 3 && s4.len() == 4 && s3[1..] == s4[2..]).then_some((v3, v4))
    }

    /// The attention whose output node is `root`.
    fn attention(&self, root: usize) -> Option<Found> {
        let n = &self.g.nodes[root];
        if !RESHAPES.contains(&n.target.as_str()) {
            return None;
        }
        let (o3, out) = self.split(n)?;
        let mut nodes = vec![root];
        // out = reshape(bmm(reshape(W), flat(v)))
        let (i, pv) = self.node(o3, &["aten.bmm.default"])?;
        nodes.push(i);
        let v = self.unflatten(Self::tensor(pv, "mat2")?, &mut nodes)?;
        let (i, rw) = self.node(Self::tensor(pv, "self")?, RESHAPES)?;
        nodes.push(i);
        let w = Self::tensor(rw, "self")?;
        let (s3, s4) = (self.sizes(Self::tensor(pv, "self")?)?, self.sizes(w)?);
        if s3.len() != 3 || s4.len() != 4 || s3[1..] != s4[2..] {
            return None;
        }
        let (x, safe) = self.softmax(w, &mut nodes)?;
        // X = Y [+ mask]
        let (y, mask) = match self.node(x, &["aten.add.Tensor"]) {
            Some((i, add)) if add.arg("alpha").is_none_or(|a| matches!(a, Arg::Int(1))) => {
                let (a, b) = (Self::tensor(add, "self")?, Self::tensor(add, "other")?);
                let (y, m) = if self.scores(a).is_some() {
                    (a, b)
                } else {
                    (b, a)
                };
                if self.sizes(y)? != self.sizes(x)? || !self.f32(m) {
                    return None;
                }
                nodes.push(i);
                (y, Some(m))
            }
            _ => (x, None),
        };
        let (z, mut scale) = self.unscale(y, &mut nodes);
        // Z = reshape(bmm(flat(q), flat(kᵀ)))
        let (i, rz) = self.node(z, RESHAPES)?;
        let (s, _) = self.split(rz)?;
        nodes.push(i);
        let (i, qk) = self.node(s, &["aten.bmm.default"])?;
        nodes.push(i);
        let q = self.unflatten(Self::tensor(qk, "self")?, &mut nodes)?;
        let (q, cq) = self.unscale(q, &mut nodes);
        let kt = self.unflatten(Self::tensor(qk, "mat2")?, &mut nodes)?;
        let (kt, ck) = self.unscale(kt, &mut nodes);
        let k = self.untranspose(kt, &mut nodes)?;
        let (k, ck2) = self.unscale(k, &mut nodes);
        scale *= cq * ck * ck2;
        if [q, k, v, out]
            .iter()
            .any(|&t| !self.f32(t) || self.rank(t) != Some(4))
        {
            return None;
        }
        nodes.sort_unstable();
        nodes.dedup();
        Some(Found {
            nodes,
            q,
            k,
            v,
            mask,
            scale,
            safe,
            out,
        })
    }

    /// Whether `v` is (a scaling of) the reshaped scores' bmm: which operand of the mask add
    /// continues the chain.
    fn scores(&self, v: ValueId) -> Option<()> {
        let mut scratch = Vec::new();
        let (z, _) = self.unscale(v, &mut scratch);
        let (_, rz) = self.node(z, RESHAPES)?;
        let (s, _) = self.split(rz)?;
        self.node(s, &["aten.bmm.default"]).map(|_| ())
    }

    /// `k` where `kt` is `permute(k, [0, 1, 3, 2])` or `transpose(k, -2, -1)`.
    fn untranspose(&self, kt: ValueId, nodes: &mut Vec<usize>) -> Option<ValueId> {
        let (i, n) = self.node(kt, &["aten.permute.default", "aten.transpose.int"])?;
        let k = Self::tensor(n, "self")?;
        let ok = match n.arg("dims") {
            Some(Arg::Ints(d)) => d[..] == [0, 1, 3, 2],
            _ => {
                let (a, b) = (Self::int(n, "dim0")?, Self::int(n, "dim1")?);
                let norm = |d: i64| if d < 0 { d + 4 } else { d };
                let (a, b) = (norm(a), norm(b));
                (a.min(b), a.max(b)) == (2, 3)
            }
        };
        ok.then(|| {
            nodes.push(i);
            k
        })
    }

    /// The scores X that the softmax at `w` normalizes over its last dim, and whether
    /// fully masked rows give zeros (`_safe_softmax`'s decomposition) rather than NaN.
    fn softmax(&self, w: ValueId, nodes: &mut Vec<usize>) -> Option<(ValueId, bool)> {
        let plain = |v: ValueId, nodes: &mut Vec<usize>| -> Option<ValueId> {
            let (i, n) = self.node(v, &["aten._softmax.default"])?;
            let x = Self::tensor(n, "self")?;
            let ok = Self::last_dim(Self::int(n, "dim")?, 4)
                && matches!(n.arg("half_to_float"), Some(Arg::Bool(false)) | None)
                && self.rank(x) == Some(4);
            ok.then(|| {
                nodes.push(i);
                x
            })
        };
        if let Some(x) = plain(w, nodes) {
            return Some((x, false));
        }
        // where(logical_not(any(logical_not(eq(X, -inf)), -1, True)), full_like(P, 0), P)
        let (i, wh) = self.node(w, &["aten.where.self"])?;
        let mut local = vec![i];
        let p = Self::tensor(wh, "other")?;
        let x = plain(p, &mut local)?;
        let (i, fill) = self.node(
            Self::tensor(wh, "self")?,
            &["aten.full_like.default", "aten.zeros_like.default"],
        )?;
        let zero = fill.target.starts_with("aten.zeros_like")
            || Self::number(fill, "fill_value") == Some(0.0);
        if !zero || Self::tensor(fill, "self")? != p {
            return None;
        }
        local.push(i);
        let (i, not1) = self.node(
            Self::tensor(wh, "condition")?,
            &["aten.logical_not.default"],
        )?;
        local.push(i);
        let (i, any) = self.node(Self::tensor(not1, "self")?, &["aten.any.dim"])?;
        let keep = matches!(any.arg("keepdim"), Some(Arg::Bool(true)));
        if !keep || !Self::last_dim(Self::int(any, "dim")?, 4) {
            return None;
        }
        local.push(i);
        let (i, not0) = self.node(Self::tensor(any, "self")?, &["aten.logical_not.default"])?;
        local.push(i);
        let (i, eq) = self.node(Self::tensor(not0, "self")?, &["aten.eq.Scalar"])?;
        let neg_inf = Self::number(eq, "other") == Some(f64::NEG_INFINITY);
        if !neg_inf || Self::tensor(eq, "self")? != x {
            return None;
        }
        local.push(i);
        nodes.extend(local);
        Some((x, true))
    }
}

/// Adds to the matched nodes the metadata assertions (`_assert_tensor_metadata`, which
/// core ATen writes after some ops) that read only values the matched nodes make: they
/// run in the body, as they ran in the graph.
fn absorb_asserts(g: &Graph, f: &mut Found) {
    let mut made = Vec::new();
    for &i in &f.nodes {
        for a in &g.nodes[i].outputs {
            super::defined(a, &mut made);
        }
    }
    for (i, n) in g.nodes.iter().enumerate() {
        if n.target != "aten._assert_tensor_metadata.default" || f.nodes.contains(&i) {
            continue;
        }
        let mut reads = Vec::new();
        n.inputs.iter().for_each(|(_, a)| a.values(&mut reads));
        if !reads.is_empty() && reads.iter().all(|v| made.contains(v) && *v != f.out) {
            f.nodes.push(i);
        }
    }
    f.nodes.sort_unstable();
}

/// Whether every value the matched nodes make, but the output, is read by matched nodes
/// only (and is no graph output).
fn closed(g: &Graph, f: &Found, uses: &[usize], graph_outputs: &[ValueId]) -> bool {
    let mut inside: HashMap<ValueId, usize> = HashMap::new();
    let mut made = Vec::new();
    for &i in &f.nodes {
        let n = &g.nodes[i];
        for (_, a) in &n.inputs {
            let mut ids = Vec::new();
            a.values(&mut ids);
            for v in ids {
                *inside.entry(v).or_default() += 1;
            }
        }
        for a in &n.outputs {
            super::defined(a, &mut made);
        }
    }
    made.iter().all(|&v| {
        v == f.out
            || (!graph_outputs.contains(&v)
                && uses.get(v).copied().unwrap_or(0) == inside.get(&v).copied().unwrap_or(0))
    })
}

/// The fused node of `f`, standing at the root's place.
fn fused_node(g: &Graph, f: &Found, root: usize) -> Node {
    let mut tensors = vec![f.q, f.k, f.v];
    tensors.extend(f.mask);
    // The symbolic sizes the matched nodes read.
    let syms = super::sym_reads(f.nodes.iter().map(|&i| &g.nodes[i]));
    let mut body = Sub::new(g);
    tensors.iter().for_each(|&t| body.input(t));
    syms.iter().for_each(|&s| body.sym_input(s));
    f.nodes.iter().for_each(|&i| body.node(&g.nodes[i]));
    let body = body.output(f.out);
    let r = &g.nodes[root];
    Node {
        name: r.name.clone(),
        target: TARGET.to_string(),
        inputs: vec![
            ("inputs".to_string(), Arg::Tensors(tensors)),
            (
                "sizes".to_string(),
                Arg::SymInts(syms.into_iter().map(IntArg::Sym).collect()),
            ),
            ("body".to_string(), Arg::Graph(Box::new(body))),
            ("scale".to_string(), Arg::Float(f.scale)),
            ("safe".to_string(), Arg::Bool(f.safe)),
        ],
        outputs: r.outputs.clone(),
        metadata: r.metadata.clone(),
    }
}
