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
//! The training IR writes the products as rank-4 `matmul`s and the softmax as `softmax.int`;
//! both forms are recognized. torchvision's shifted windows add a second mask through a
//! rank-5 view (`view(view(X + bias, [b, w, H, L, S]) + shift_mask, [B, H, L, S])`); the two
//! are first merged into one mask tensor (`merge_masks`; constant folding then computes it
//! once, as both come from state and shapes).
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
use crate::program::{Arg, Dim, Graph, IntArg, Node, Value, ValueId, ValueKind};
use std::collections::HashMap;

/// Recognize the attentions of `g`; how many nodes fewer the graph has.
pub(super) fn run(g: &mut Graph) -> usize {
    let before = g.nodes.len();
    // Safe with in-place writes: it only lets the attention read what the copies read.
    grouped_query(g);
    if writes_in_place(g) {
        return before - g.nodes.len();
    }
    merge_masks(g);
    fuse(g);
    before.saturating_sub(g.nodes.len())
}

/// Grouped-query attention as transformers writes it (`repeat_kv`): each key / value head
/// copied for its group of query heads before `scaled_dot_product_attention`,
///
/// ```text
/// reshape(expand(unsqueeze(x [B,Hkv,S,D], 2), [B,Hkv,g,S,D]), [B,Hkv*g,S,D])
/// ```
///
/// becomes the attention reading `x` itself with `enable_gqa=True` (query head h reads
/// key / value head h / g, which is what the copies held), so no run copies the KV cache.
/// Each `reshape` may be a `view` or `_unsafe_view`, after an optional `clone`. The copies
/// go when nothing else reads them. Returns the attentions rewritten.
fn grouped_query(g: &mut Graph) -> usize {
    let def = super::definers(g);
    let sizes = |v: ValueId| match &g.values[v].kind {
        ValueKind::Tensor { sizes, .. } => Some(sizes.clone()),
        _ => None,
    };
    let int = |d: &Dim| match d {
        Dim::Static(i) => Some(*i),
        _ => None,
    };
    let tensor = |n: &Node, k: &str| match n.arg(k) {
        Some(Arg::Tensor(t)) => Some(*t),
        _ => None,
    };
    // `t` = repeat_kv(x): (x, g, the copies' nodes).
    let repeated = |t: ValueId| -> Option<(ValueId, i64, Vec<usize>)> {
        let r = *def.get(&t)?;
        let rn = &g.nodes[r];
        if !matches!(
            rn.target.as_str(),
            "aten.reshape.default" | "aten.view.default" | "aten._unsafe_view.default"
        ) {
            return None;
        }
        let shape = static_ints(rn.arg("shape").or_else(|| rn.arg("size")))?;
        let mut nodes = vec![r];
        let mut src = tensor(rn, "self")?;
        let mut e = *def.get(&src)?;
        if g.nodes[e].target == "aten.clone.default" {
            nodes.push(e);
            src = tensor(&g.nodes[e], "self")?;
            e = *def.get(&src)?;
        }
        let en = &g.nodes[e];
        if en.target != "aten.expand.default" {
            return None;
        }
        let size = static_ints(en.arg("size"))?;
        nodes.push(e);
        let u = *def.get(&tensor(en, "self")?)?;
        let un = &g.nodes[u];
        if un.target != "aten.unsqueeze.default" || !matches!(un.arg("dim"), Some(Arg::Int(2))) {
            return None;
        }
        nodes.push(u);
        let x = tensor(un, "self")?;
        let xs: Vec<i64> = sizes(x)?.iter().map(int).collect::<Option<_>>()?;
        let [b, hkv, s, d] = xs[..] else { return None };
        let grp = *size.get(2)?;
        let fits = |want: i64, got: i64| got == want || got == -1;
        if size.len() != 5
            || grp < 1
            || !fits(b, size[0])
            || !fits(hkv, size[1])
            || !fits(s, size[3])
            || !fits(d, size[4])
            || shape.len() != 4
            || !fits(b, shape[0])
            || shape[1] != hkv * grp
            || !fits(s, shape[2])
            || !fits(d, shape[3])
        {
            return None;
        }
        Some((x, grp, nodes))
    };
    let mut rewrites = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if n.target != "aten.scaled_dot_product_attention.default"
            || matches!(n.arg("enable_gqa"), Some(Arg::Bool(true)))
        {
            continue;
        }
        let (Some(k), Some(v)) = (tensor(n, "key"), tensor(n, "value")) else {
            continue;
        };
        let (Some(rk), Some(rv)) = (repeated(k), repeated(v)) else {
            continue;
        };
        if rk.1 == rv.1 {
            rewrites.push((i, rk, rv));
        }
    }
    let n = rewrites.len();
    let mut maybe_dead = Vec::new();
    for (i, (k, _, kn), (v, _, vn)) in rewrites {
        let node = &mut g.nodes[i];
        for (name, a) in &mut node.inputs {
            match name.as_str() {
                "key" => *a = Arg::Tensor(k),
                "value" => *a = Arg::Tensor(v),
                _ => {}
            }
        }
        match node
            .inputs
            .iter_mut()
            .find(|(name, _)| name == "enable_gqa")
        {
            Some((_, a)) => *a = Arg::Bool(true),
            None => node.inputs.push(("enable_gqa".into(), Arg::Bool(true))),
        }
        maybe_dead.extend(kn);
        maybe_dead.extend(vn);
    }
    // The copies nothing reads any more, outermost first (each frees the one before it).
    maybe_dead.sort_unstable();
    maybe_dead.dedup();
    let mut gone = std::collections::HashSet::new();
    for &i in maybe_dead.iter().rev() {
        let uses = use_counts(g);
        let mut outs = Vec::new();
        g.nodes[i].outputs.iter().for_each(|a| a.values(&mut outs));
        if outs.iter().all(|&o| uses[o] == 0) {
            g.nodes[i].inputs.clear();
            gone.insert(i);
        }
    }
    let mut idx = 0;
    g.nodes.retain(|_| {
        idx += 1;
        !gone.contains(&(idx - 1))
    });
    n
}

/// A list of ints given as `Ints`, or as `SymInts` that are all plain ints.
fn static_ints(a: Option<&Arg>) -> Option<Vec<i64>> {
    match a? {
        Arg::Ints(s) => Some(s.clone()),
        Arg::SymInts(s) => s
            .iter()
            .map(|a| match a {
                IntArg::Int(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// Replace each attention by its fused node.
fn fuse(g: &mut Graph) {
    let uses = use_counts(g);
    let graph_outputs = super::output_values(g);
    let def = super::definers(g);
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
    if gone.iter().any(|&x| x) {
        super::replace_nodes(g, &gone, fused_at);
    }
}

/// `out = view(add(view(add(y, m1), s5), m2), s4)`, where the views split and merge y's first
/// dim and s4 is y's sizes, becomes `out = add(y, m)` with
/// `m = reshape(add(reshape(expand(m1, s4), s5), m2), s4)`: one mask (the scores get the
/// two in one add rather than two, a rounding apart). f32 and static sizes only; each
/// intermediate must be read once.
fn merge_masks(g: &mut Graph) {
    let uses = use_counts(g);
    let def = super::definers(g);
    let one = |v: ValueId| uses.get(v) == Some(&1);
    let out_of = |n: &Node| match n.outputs[..] {
        [Arg::Tensor(v)] => Some(v),
        _ => None,
    };
    let plain_add = |n: &Node| {
        n.target == "aten.add.Tensor" && n.arg("alpha").is_none_or(|a| matches!(a, Arg::Int(1)))
    };
    let tensor = |n: &Node, name: &str| match n.arg(name) {
        Some(Arg::Tensor(v)) => Some(*v),
        _ => None,
    };
    let f32 = |v: ValueId| {
        matches!(
            g.values.get(v).map(|x| &x.kind),
            Some(ValueKind::Tensor {
                dtype: DType::F32,
                ..
            })
        )
    };
    // (the four nodes, y, m1, m2, s4, s5, out)
    let mut found = Vec::new();
    for (l, n4) in g.nodes.iter().enumerate() {
        let m = (|| {
            if !RESHAPES.contains(&n4.target.as_str()) {
                return None;
            }
            let out = out_of(n4)?;
            let b = tensor(n4, "self")?;
            let &i = def.get(&b)?;
            let add_b = &g.nodes[i];
            let (v5, m2) = (tensor(add_b, "self")?, tensor(add_b, "other")?);
            let &j = def.get(&v5)?;
            let n5 = &g.nodes[j];
            let a = tensor(n5, "self")?;
            let &k = def.get(&a)?;
            let add_a = &g.nodes[k];
            let (y, m1) = (tensor(add_a, "self")?, tensor(add_a, "other")?);
            let (s4, s5) = (super::static_sizes(g, out)?, super::static_sizes(g, v5)?);
            let ok = plain_add(add_b)
                && RESHAPES.contains(&n5.target.as_str())
                && plain_add(add_a)
                && [a, v5, b].into_iter().all(one)
                && [y, m1, m2, out].into_iter().all(f32)
                && s4.len() == 4
                && s5.len() == 5
                && super::static_sizes(g, y)? == s4
                && super::static_sizes(g, a)? == s4
                && super::static_sizes(g, b)? == s5
                && s5[0].checked_mul(s5[1]) == Some(s4[0])
                && s5[2..] == s4[1..];
            ok.then_some(([k, j, i, l], y, m1, m2, s4, s5, out))
        })();
        found.extend(m);
    }
    if found.is_empty() {
        return;
    }
    let mut gone = vec![false; g.nodes.len()];
    let mut at: HashMap<usize, Vec<Node>> = HashMap::new();
    for ([k, j, i, l], y, m1, m2, s4, s5, out) in found {
        if [k, j, i, l].iter().any(|&x| gone[x]) {
            continue;
        }
        let base = g.nodes[k].name.clone();
        let names = ["expand", "split", "add", "merge"].map(|s| format!("{base}_mask_{s}"));
        if names.iter().any(|n| g.by_name.contains_key(n)) {
            continue;
        }
        let meta = g.nodes[l].metadata.clone();
        // expand(m1, s4): stride 0 along broadcast dims.
        let (
            Some(m1_sizes),
            ValueKind::Tensor {
                strides: m1_strides,
                ..
            },
        ) = (super::static_sizes(g, m1), g.value(m1).kind.clone())
        else {
            continue;
        };
        let off = s4.len() - m1_sizes.len().min(4);
        let expand_strides = (0..4usize)
            .map(|d| match d.checked_sub(off) {
                Some(e) if m1_sizes.get(e) == Some(&s4[d]) => {
                    m1_strides.get(e).cloned().unwrap_or(Dim::Static(0))
                }
                _ => Dim::Static(0),
            })
            .collect::<Vec<_>>();
        let kinds = [
            (s4.clone(), expand_strides),
            (s5.clone(), super::contiguous(&s5)),
            (s5.clone(), super::contiguous(&s5)),
            (s4.clone(), super::contiguous(&s4)),
        ];
        let mut ids = [0; 4];
        for (id, (name, (sizes, strides))) in ids.iter_mut().zip(names.iter().zip(kinds)) {
            *id = g.values.len();
            g.values.push(Value {
                name: name.clone(),
                kind: ValueKind::Tensor {
                    dtype: DType::F32,
                    sizes: sizes.into_iter().map(Dim::Static).collect(),
                    strides,
                    requires_grad: false,
                },
            });
            g.by_name.insert(name.clone(), *id);
        }
        let node = |name: &str, target: &str, inputs: Vec<(&str, Arg)>, out: ValueId| Node {
            name: name.to_string(),
            target: target.to_string(),
            inputs: inputs
                .into_iter()
                .map(|(n, a)| (n.to_string(), a))
                .collect(),
            outputs: vec![Arg::Tensor(out)],
            metadata: meta.clone(),
        };
        let add_name = g.nodes[l].name.clone();
        let nodes = vec![
            node(
                &names[0],
                "aten.expand.default",
                vec![("self", Arg::Tensor(m1)), ("size", Arg::Ints(s4.clone()))],
                ids[0],
            ),
            node(
                &names[1],
                "aten.reshape.default",
                vec![("self", Arg::Tensor(ids[0])), ("shape", Arg::Ints(s5))],
                ids[1],
            ),
            node(
                &names[2],
                "aten.add.Tensor",
                vec![("self", Arg::Tensor(ids[1])), ("other", Arg::Tensor(m2))],
                ids[2],
            ),
            node(
                &names[3],
                "aten.reshape.default",
                vec![("self", Arg::Tensor(ids[2])), ("shape", Arg::Ints(s4))],
                ids[3],
            ),
            node(
                &add_name,
                "aten.add.Tensor",
                vec![("self", Arg::Tensor(y)), ("other", Arg::Tensor(ids[3]))],
                out,
            ),
        ];
        for x in [k, j, i] {
            gone[x] = true;
        }
        at.insert(l, nodes);
    }
    let old = std::mem::take(&mut g.nodes);
    for (x, n) in old.into_iter().enumerate() {
        match at.remove(&x) {
            Some(new) => g.nodes.extend(new),
            None if !gone[x] => g.nodes.push(n),
            None => {}
        }
    }
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

    /// The rank-4 operands `(a, b)` of the product that node `i` makes: `reshape(bmm(flat(a),
    /// flat(b)))` (core ATen; node `i` the reshape) or `matmul(a, b)` (the training IR), with
    /// the same batch and head sizes.
    fn product(&self, i: usize, nodes: &mut Vec<usize>) -> Option<(ValueId, ValueId)> {
        let n = &self.g.nodes[i];
        let (a, b) = if n.target == "aten.matmul.default" {
            let [Arg::Tensor(out)] = n.outputs[..] else {
                return None;
            };
            if self.rank(out) != Some(4) {
                return None;
            }
            nodes.push(i);
            (Self::tensor(n, "self")?, Self::tensor(n, "other")?)
        } else if RESHAPES.contains(&n.target.as_str()) {
            let (s3, _) = self.split(n)?;
            nodes.push(i);
            let (j, bmm) = self.node(s3, &["aten.bmm.default"])?;
            nodes.push(j);
            (
                self.unflatten(Self::tensor(bmm, "self")?, nodes)?,
                self.unflatten(Self::tensor(bmm, "mat2")?, nodes)?,
            )
        } else {
            return None;
        };
        let (sa, sb) = (self.sizes(a)?, self.sizes(b)?);
        (sa.len() == 4 && sb.len() == 4 && sa[..2] == sb[..2]).then_some((a, b))
    }

    /// The attention whose output node is `root`.
    fn attention(&self, root: usize) -> Option<Found> {
        let [Arg::Tensor(out)] = self.g.nodes[root].outputs[..] else {
            return None;
        };
        let mut nodes = Vec::new();
        // out = W @ v
        let (w, v) = self.product(root, &mut nodes)?;
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
        // Z = q @ kᵀ
        let (q, kt) = self.product(*self.def.get(&z)?, &mut nodes)?;
        let (q, cq) = self.unscale(q, &mut nodes);
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
        self.product(*self.def.get(&z)?, &mut scratch).map(|_| ())
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
            let (i, n) = self.node(v, &["aten._softmax.default", "aten.softmax.int"])?;
            let x = Self::tensor(n, "self")?;
            let ok = Self::last_dim(Self::int(n, "dim")?, 4)
                && matches!(n.arg("half_to_float"), Some(Arg::Bool(false)) | None)
                && matches!(n.arg("dtype"), Some(Arg::None) | None)
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
