//! Decompositions: composite ops (`atleast_2d`, `kron`, `cross`, the loss functions...)
//! rewritten at load into the ops every backend already runs, written once here in the
//! spirit of `torch._decomp`. A training-IR program keeps such ops as single nodes (core ATen
//! decomposes them); after this rewrite the CPU, the GPU and the meta device see the same
//! ops a `run_decompositions()` program has, so a composite op needs no kernel of its own
//! anywhere.
//!
//! Not a switchable pass: it runs whenever a program is loaded ([`crate::program::Pt2Archive::program`]),
//! before the load-time and session passes, so they see (and fuse) the decomposed ops.
//!
//! ATen's aliases (`divide`, `arccos`, `clip`...) are renamed to the op they name, whatever
//! the shapes. Each other decomposition is a function of the node (its arguments by schema name) that emits
//! nodes through a [`Builder`]; the builder gives every new value its dtype and sizes from
//! the op table's shape rules, so a decomposition reads like the Python it mirrors. Only
//! nodes whose tensor arguments have static sizes are rewritten (a node with symbolic sizes
//! stays as it is and reports the op as unsupported); a decomposition that refuses its
//! arguments (or whose result disagrees with torch's metadata for the node) also leaves the
//! node, so a wrong rewrite cannot change a result silently.

mod backward;
mod concrete;
mod loss;
mod math;
mod shape;
mod signal;

pub(crate) use concrete::register;

use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor};
use crate::program::{Arg, Dim, Graph, IntArg, Node, Program, Value, ValueId, ValueKind};
use std::collections::BTreeMap;

/// What a decomposition returns: one [`Arg`] per output of the node (`Arg::Tensor`,
/// `Arg::Tensors`), or why it refused.
type DResult<T> = std::result::Result<T, String>;

/// A decomposition: the node's replacement, emitted through the builder.
type Decomp = fn(&mut Builder, &Node) -> DResult<Vec<Arg>>;

/// ATen's aliases (`divide`, `subtract`, `arccos`, `clip`, ...) and the op each names: a
/// node of an alias is renamed in place (same arguments, any shapes, symbolic included).
const ALIASES: &[(&str, &str)] = &[
    ("divide", "div"),
    ("true_divide", "div"),
    ("subtract", "sub"),
    ("multiply", "mul"),
    ("greater", "gt"),
    ("greater_equal", "ge"),
    ("less", "lt"),
    ("less_equal", "le"),
    ("not_equal", "ne"),
    ("absolute", "abs"),
    ("negative", "neg"),
    ("arccos", "acos"),
    ("arcsin", "asin"),
    ("arctan", "atan"),
    ("arccosh", "acosh"),
    ("arcsinh", "asinh"),
    ("arctanh", "atanh"),
    ("arctan2", "atan2"),
    ("clip", "clamp"),
    ("fix", "trunc"),
    ("concat", "cat"),
    ("concatenate", "cat"),
    ("moveaxis", "movedim"),
];

/// The target an alias's node becomes (`aten.divide.Tensor` → `aten.div.Tensor`), when
/// pt2web has a shape rule for it.
fn canonical(target: &str) -> Option<String> {
    let (op, overload) = target.strip_prefix("aten.")?.split_once('.')?;
    let (_, to) = ALIASES.iter().find(|(a, _)| *a == op)?;
    let t = format!("aten.{to}.{overload}");
    crate::ops::table().shape_rule(&t).is_some().then_some(t)
}

/// Every decomposed target (exact targets) and its decomposition.
fn table() -> &'static [(&'static str, Decomp)] {
    &[
        ("aten.atleast_1d.default", shape::atleast_1d),
        ("aten.atleast_2d.default", shape::atleast_2d),
        ("aten.atleast_3d.default", shape::atleast_3d),
        ("aten.ravel.default", shape::ravel),
        ("aten.broadcast_tensors.default", shape::broadcast_tensors),
        ("aten.meshgrid.indexing", shape::meshgrid),
        ("aten.meshgrid.default", shape::meshgrid),
        ("aten.column_stack.default", shape::column_stack),
        ("aten.dstack.default", shape::dstack),
        ("aten.hsplit.int", shape::hsplit),
        ("aten.hsplit.array", shape::hsplit),
        ("aten.vsplit.int", shape::vsplit),
        ("aten.vsplit.array", shape::vsplit),
        ("aten.dsplit.int", shape::dsplit),
        ("aten.dsplit.array", shape::dsplit),
        ("aten.diag.default", shape::diag),
        ("aten.diagflat.default", shape::diagflat),
        ("aten.diag_embed.default", shape::diag_embed),
        ("aten.linalg_diagonal.default", shape::linalg_diagonal),
        ("aten.kron.default", shape::kron),
        ("aten.block_diag.default", shape::block_diag),
        ("aten.cartesian_prod.default", shape::cartesian_prod),
        ("aten.channel_shuffle.default", shape::channel_shuffle),
        ("aten.take_along_dim.default", shape::take_along_dim),
        ("aten.sum_to_size.default", shape::sum_to_size),
        ("aten.mH.default", shape::adjoint),
        ("aten.stft.default", signal::stft),
        ("aten.istft.default", signal::istft),
        (
            "prims.convert_element_type.default",
            shape::convert_element_type,
        ),
        (
            "aten.affine_grid_generator.default",
            shape::affine_grid_generator,
        ),
        ("aten.matrix_H.default", shape::adjoint),
        ("aten.cross.default", math::cross),
        ("aten.linalg_cross.default", math::cross),
        ("aten.trace.default", math::trace),
        ("aten.isclose.default", math::isclose),
        ("aten.isin.Tensor_Tensor", math::isin),
        ("aten.isin.Tensor_Scalar", math::isin),
        ("aten.isin.Scalar_Tensor", math::isin),
        ("aten.trapezoid.x", math::trapezoid),
        ("aten.trapezoid.dx", math::trapezoid),
        ("aten.trapz.x", math::trapezoid),
        ("aten.trapz.dx", math::trapezoid),
        ("aten.cumulative_trapezoid.x", math::cumulative_trapezoid),
        ("aten.cumulative_trapezoid.dx", math::cumulative_trapezoid),
        ("aten.linalg_vecdot.default", math::vecdot),
        ("aten.linalg_vander.default", math::vander),
        ("aten.renorm.default", math::renorm),
        ("aten.cosine_similarity.default", math::cosine_similarity),
        ("aten.pairwise_distance.default", math::pairwise_distance),
        ("aten.quantile.scalar", math::quantile),
        ("aten.nanquantile.scalar", math::quantile),
        ("aten.gradient.scalarint", math::gradient),
        ("aten.linalg_matrix_sqrth.default", math::matrix_sqrth),
        ("aten.linalg_polar.default", math::polar_decomposition),
        ("aten.mse_loss.default", loss::mse),
        ("aten.l1_loss.default", loss::l1),
        ("aten.smooth_l1_loss.default", loss::smooth_l1),
        ("aten.huber_loss.default", loss::huber),
        (
            "aten.binary_cross_entropy.default",
            loss::binary_cross_entropy,
        ),
        (
            "aten.binary_cross_entropy_with_logits.default",
            loss::binary_cross_entropy_with_logits,
        ),
        ("aten.kl_div.default", loss::kl_div),
        ("aten.hinge_embedding_loss.default", loss::hinge_embedding),
        ("aten.margin_ranking_loss.default", loss::margin_ranking),
        ("aten.soft_margin_loss.default", loss::soft_margin),
        ("aten.cosine_embedding_loss.default", loss::cosine_embedding),
        ("aten.poisson_nll_loss.default", loss::poisson_nll),
        ("aten.nll_loss_nd.default", loss::nll_loss_nd),
        ("aten.nll_loss.default", loss::nll_loss_nd),
        ("aten.cross_entropy_loss.default", loss::cross_entropy),
        ("aten.triplet_margin_loss.default", loss::triplet_margin),
        ("aten.multi_margin_loss.default", loss::multi_margin),
        (
            "aten.multilabel_margin_loss.default",
            loss::multilabel_margin,
        ),
        (
            "aten.native_layer_norm_backward.default",
            backward::layer_norm,
        ),
        (
            "aten.native_group_norm_backward.default",
            backward::group_norm,
        ),
        (
            "aten.convolution_backward.default",
            backward::convolution_backward,
        ),
        ("aten.avg_pool2d_backward.default", backward::avg_pool2d),
        (
            "aten._adaptive_avg_pool2d_backward.default",
            backward::adaptive_avg_pool2d,
        ),
        (
            "aten.embedding_dense_backward.default",
            backward::embedding_dense,
        ),
        (
            "aten.max_pool2d_with_indices_backward.default",
            backward::max_pool2d_with_indices,
        ),
    ]
}

/// The node metadata key that holds why a decomposition refused a node.
const REFUSED: &str = "pt2web_decomposition_refused";

/// The error for a node no kernel runs on `device`, with why its decomposition (if it has
/// one) refused it.
pub fn unsupported(node: &Node, device: &str) -> crate::Error {
    let msg = match node.metadata.get(REFUSED) {
        Some(why) => format!(
            "not supported on the {device} device yet (its decomposition does not take these arguments: {why})"
        ),
        None => format!("not supported on the {device} device yet (see `pt2web check`)"),
    };
    crate::Error::op(&node.target, msg)
}

/// Why the decompositions of `g`'s nodes (and its subgraphs') refused them: (target, reason),
/// each pair once (`pt2web check` prints them beside the unsupported ops).
pub fn refusals(g: &Graph) -> Vec<(String, String)> {
    fn visit(g: &Graph, out: &mut Vec<(String, String)>) {
        for n in &g.nodes {
            if let Some(why) = n.metadata.get(REFUSED) {
                let pair = (n.target.clone(), why.clone());
                if !out.contains(&pair) {
                    out.push(pair);
                }
            }
            for (_, a) in &n.inputs {
                if let Arg::Graph(sub) = a {
                    visit(sub, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    visit(g, &mut out);
    out
}

/// The decomposition of `target`, if it has one.
fn lookup(target: &str) -> Option<Decomp> {
    static BY_TARGET: std::sync::OnceLock<std::collections::HashMap<&'static str, Decomp>> =
        std::sync::OnceLock::new();
    BY_TARGET
        .get_or_init(|| table().iter().copied().collect())
        .get(target)
        .copied()
}

/// Every target decomposed at load, and the aliases (`aten.absolute` → `aten.abs`) folded
/// into the ops they name: (target, what it becomes), sorted. For the support page
/// (`crate::ops::doc`).
pub fn decomposed_targets() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = table()
        .iter()
        .map(|(t, _)| (t.to_string(), "its decomposition".to_string()))
        .chain(
            ALIASES
                .iter()
                .map(|(a, to)| (format!("aten.{a}"), format!("`aten.{to}`"))),
        )
        .collect();
    v.sort();
    v
}

/// Whether pt2web decomposes `target` at load (so it needs no kernel or shape rule).
pub fn decomposes(target: &str) -> bool {
    lookup(target).is_some() || canonical(target).is_some()
}

/// Decompose the composite nodes of `p`'s graph and subgraphs; how many were rewritten.
pub fn run(p: &mut Program) -> usize {
    super::on_graphs(&mut p.graph, &mut run_graph)
}

fn run_graph(g: &mut Graph) -> usize {
    let mut done = 0;
    let mut i = 0;
    while i < g.nodes.len() {
        if let Some(t) = canonical(&g.nodes[i].target) {
            g.nodes[i].target = t;
            done += 1;
            i += 1;
            continue;
        }
        let Some(f) = lookup(&g.nodes[i].target) else {
            i += 1;
            continue;
        };
        let node = g.nodes[i].clone();
        let values = g.values.len();
        let by_name = g.by_name.clone();
        match decompose(g, &node, f) {
            Ok(nodes) => {
                let n = nodes.len();
                g.nodes.splice(i..=i, nodes);
                i += n;
                done += 1;
            }
            Err(why) => {
                // Leave the node (and the graph) as it was, with the reason for the error
                // that running it gives.
                g.values.truncate(values);
                g.by_name = by_name;
                g.nodes[i].metadata.insert(REFUSED.to_string(), why);
                i += 1;
            }
        }
    }
    done
}

/// The nodes replacing `node`, their results renamed to the node's own output values.
fn decompose(g: &mut Graph, node: &Node, f: Decomp) -> DResult<Vec<Node>> {
    let mut b = Builder::new(g, node);
    let results = f(&mut b, node)?;
    if results.len() != node.outputs.len() {
        return Err(format!(
            "gave {} results for {} outputs",
            results.len(),
            node.outputs.len()
        ));
    }
    let mut pairs = Vec::new();
    for (out, res) in node.outputs.iter().zip(&results) {
        match (out, res) {
            (Arg::None, _) => {}
            (Arg::Tensor(o), Arg::Tensor(r)) => pairs.push((*o, *r)),
            (Arg::Tensors(os), Arg::Tensors(rs)) if os.len() == rs.len() => {
                pairs.extend(os.iter().copied().zip(rs.iter().copied()))
            }
            (o, r) => return Err(format!("result {r:?} does not fit output {o:?}")),
        }
    }
    for &(o, r) in &pairs {
        b.check_like(o, r)?;
    }
    let mut renamed: BTreeMap<ValueId, ValueId> = BTreeMap::new();
    for (o, r) in pairs {
        let defined_here = b.nodes.iter().position(|n| {
            let mut ids = Vec::new();
            n.outputs.iter().for_each(|a| a.values(&mut ids));
            ids.contains(&r)
        });
        match defined_here {
            Some(_) if !renamed.contains_key(&r) => {
                renamed.insert(r, o);
            }
            _ => {
                // An input passed through (or a result given twice): an alias of it.
                let src = renamed.get(&r).copied().unwrap_or(r);
                b.emit_into("aten.alias.default", vec![("self", Arg::Tensor(src))], o)?;
            }
        }
    }
    let mut nodes = std::mem::take(&mut b.nodes);
    for n in &mut nodes {
        for a in n
            .outputs
            .iter_mut()
            .chain(n.inputs.iter_mut().map(|(_, a)| a))
        {
            rename(a, &renamed);
        }
    }
    Ok(nodes)
}

fn rename(a: &mut Arg, map: &BTreeMap<ValueId, ValueId>) {
    let r = |v: &mut ValueId| {
        if let Some(&n) = map.get(v) {
            *v = n;
        }
    };
    match a {
        Arg::Tensor(v) | Arg::OptTensor(Some(v)) => r(v),
        Arg::Tensors(vs) => vs.iter_mut().for_each(r),
        Arg::OptTensors(vs) => vs.iter_mut().flatten().for_each(r),
        _ => {}
    }
}

/// Emits the nodes of one decomposition, giving each new value its dtype and static sizes
/// from the op table's shape rules.
pub(crate) struct Builder<'g> {
    g: &'g mut Graph,
    env: Vec<Option<MValue>>,
    nodes: Vec<Node>,
    base: String,
    metadata: BTreeMap<String, String>,
    next: usize,
}

impl<'g> Builder<'g> {
    fn new(g: &'g mut Graph, node: &Node) -> Self {
        Builder {
            env: vec![None; g.values.len()],
            g,
            nodes: Vec::new(),
            base: node.name.clone(),
            metadata: node.metadata.clone(),
            next: 0,
        }
    }

    /// The meta of an existing value (static sizes only).
    fn meta_of(&mut self, v: ValueId) -> DResult<MetaTensor> {
        if self.env.len() < self.g.values.len() {
            self.env.resize(self.g.values.len(), None);
        }
        if let Some(Some(MValue::Tensor(t))) = self.env.get(v) {
            return Ok(t.clone());
        }
        let val = self
            .g
            .values
            .get(v)
            .ok_or_else(|| format!("value {v} is out of range"))?;
        let ValueKind::Tensor { dtype, sizes, .. } = &val.kind else {
            return Err(format!("'{}' is not a tensor", val.name));
        };
        let sizes = sizes
            .iter()
            .map(|d| match d {
                Dim::Static(s) => usize::try_from(*s).map_err(|_| format!("size {s}")),
                Dim::Sym(e) => Err(format!("'{}' has the symbolic size {e}", val.name)),
            })
            .collect::<DResult<Vec<usize>>>()?;
        let t = MetaTensor::new(*dtype, sizes);
        self.env[v] = Some(MValue::Tensor(t.clone()));
        Ok(t)
    }

    /// The sizes of a tensor value.
    pub fn sizes(&mut self, v: ValueId) -> DResult<Vec<usize>> {
        Ok(self.meta_of(v)?.sizes)
    }
    pub fn rank(&mut self, v: ValueId) -> DResult<usize> {
        Ok(self.meta_of(v)?.sizes.len())
    }
    pub fn dtype(&mut self, v: ValueId) -> DResult<DType> {
        Ok(self.meta_of(v)?.dtype)
    }

    /// That result `r` has what torch's metadata says of output `o` (dtype; sizes when
    /// static).
    fn check_like(&mut self, o: ValueId, r: ValueId) -> DResult<()> {
        let got = self.meta_of(r)?;
        let ValueKind::Tensor { dtype, sizes, .. } = &self.g.values[o].kind else {
            return Ok(());
        };
        if *dtype != got.dtype {
            return Err(format!("gave {} where torch has {dtype}", got.dtype));
        }
        let want: Option<Vec<usize>> = sizes
            .iter()
            .map(|d| match d {
                Dim::Static(s) => usize::try_from(*s).ok(),
                Dim::Sym(_) => None,
            })
            .collect();
        match want {
            Some(w) if w != got.sizes => {
                Err(format!("gave sizes {:?} where torch has {w:?}", got.sizes))
            }
            _ => Ok(()),
        }
    }

    fn fresh_name(&mut self) -> String {
        loop {
            let name = format!("{}_d{}", self.base, self.next);
            self.next += 1;
            if !self.g.by_name.contains_key(&name) {
                return name;
            }
        }
    }

    fn new_value(&mut self, t: &MetaTensor) -> ValueId {
        let name = self.fresh_name();
        let sizes: Vec<i64> = t.sizes.iter().map(|&s| s as i64).collect();
        self.g.values.push(Value {
            name: name.clone(),
            kind: ValueKind::Tensor {
                dtype: t.dtype,
                sizes: sizes.iter().map(|&s| Dim::Static(s)).collect(),
                strides: super::contiguous(&sizes),
                requires_grad: false,
            },
        });
        let id = self.g.values.len() - 1;
        self.g.by_name.insert(name, id);
        self.env.resize(self.g.values.len(), None);
        self.env[id] = Some(MValue::Tensor(t.clone()));
        id
    }

    /// Run the shape rule of `target` on `inputs`: its results.
    fn infer(&mut self, node: &Node) -> DResult<Vec<MValue>> {
        let mut ids = Vec::new();
        for (_, a) in &node.inputs {
            if let Arg::SymInt(IntArg::Sym(_)) | Arg::SymInts(_) = a {
                if !matches!(a, Arg::SymInts(xs) if xs.iter().all(|x| matches!(x, IntArg::Int(_))))
                {
                    return Err("a symbolic argument".into());
                }
            }
            a.values(&mut ids);
        }
        for v in ids {
            self.meta_of(v)?;
        }
        let rule = crate::ops::table()
            .shape_rule(&node.target)
            .ok_or_else(|| format!("{} has no shape rule", node.target))?;
        let bindings = crate::sym::Bindings::new();
        let mut ctx = MetaCtx::new(node, self.g, &self.env, &bindings);
        rule(&mut ctx).map_err(|e| format!("{}: {e}", node.target))
    }

    fn make_node(&mut self, target: &str, inputs: Vec<(&str, Arg)>) -> Node {
        Node {
            name: self.fresh_name(),
            target: target.to_string(),
            inputs: inputs
                .into_iter()
                .map(|(n, a)| (n.to_string(), a))
                .collect(),
            outputs: Vec::new(),
            metadata: self.metadata.clone(),
        }
    }

    /// Emit `target(inputs)`; its outputs (`Arg::Tensor` or `Arg::Tensors` each).
    pub fn call(&mut self, target: &str, inputs: Vec<(&str, Arg)>) -> DResult<Vec<Arg>> {
        let mut node = self.make_node(target, inputs);
        let outs = self.infer(&node)?;
        for o in outs {
            node.outputs.push(match o {
                MValue::Tensor(t) => {
                    if t.data_dependent {
                        return Err(format!("{target} has a data-dependent size"));
                    }
                    Arg::Tensor(self.new_value(&t))
                }
                MValue::Tensors(ts) => Arg::Tensors(ts.iter().map(|t| self.new_value(t)).collect()),
                other => return Err(format!("{target} gives a {}", other.kind())),
            });
        }
        let outs = node.outputs.clone();
        self.nodes.push(node);
        Ok(outs)
    }

    /// Emit `target(inputs)` writing its one tensor into the existing value `out`.
    fn emit_into(&mut self, target: &str, inputs: Vec<(&str, Arg)>, out: ValueId) -> DResult<()> {
        let mut node = self.make_node(target, inputs);
        self.infer(&node)?;
        node.outputs.push(Arg::Tensor(out));
        self.nodes.push(node);
        Ok(())
    }

    /// Emit an op with one tensor result.
    pub fn t(&mut self, target: &str, inputs: Vec<(&str, Arg)>) -> DResult<ValueId> {
        match self.call(target, inputs)?.first() {
            Some(Arg::Tensor(v)) => Ok(*v),
            _ => Err(format!("{target} gives no tensor")),
        }
    }
    /// Emit an op with a list of tensors as its result.
    pub fn list(&mut self, target: &str, inputs: Vec<(&str, Arg)>) -> DResult<Vec<ValueId>> {
        match self.call(target, inputs)?.into_iter().next() {
            Some(Arg::Tensors(vs)) => Ok(vs),
            _ => Err(format!("{target} gives no tensor list")),
        }
    }
    /// Emit an op with several tensor results.
    pub fn multi(&mut self, target: &str, inputs: Vec<(&str, Arg)>) -> DResult<Vec<ValueId>> {
        self.call(target, inputs)?
            .into_iter()
            .map(|a| match a {
                Arg::Tensor(v) => Ok(v),
                _ => Err(format!("{target}: a result is not a tensor")),
            })
            .collect()
    }

    // Sugar for the ops decompositions use most.

    pub fn reshape(&mut self, x: ValueId, shape: &[i64]) -> DResult<ValueId> {
        self.t(
            "aten.reshape.default",
            vec![
                ("self", Arg::Tensor(x)),
                ("shape", Arg::Ints(shape.to_vec())),
            ],
        )
    }
    pub fn unsqueeze(&mut self, x: ValueId, dim: i64) -> DResult<ValueId> {
        self.t(
            "aten.unsqueeze.default",
            vec![("self", Arg::Tensor(x)), ("dim", Arg::Int(dim))],
        )
    }
    pub fn squeeze(&mut self, x: ValueId, dims: &[i64]) -> DResult<ValueId> {
        self.t(
            "aten.squeeze.dims",
            vec![("self", Arg::Tensor(x)), ("dim", Arg::Ints(dims.to_vec()))],
        )
    }
    pub fn permute(&mut self, x: ValueId, dims: &[i64]) -> DResult<ValueId> {
        self.t(
            "aten.permute.default",
            vec![("self", Arg::Tensor(x)), ("dims", Arg::Ints(dims.to_vec()))],
        )
    }
    pub fn transpose(&mut self, x: ValueId, a: i64, b: i64) -> DResult<ValueId> {
        self.t(
            "aten.transpose.int",
            vec![
                ("self", Arg::Tensor(x)),
                ("dim0", Arg::Int(a)),
                ("dim1", Arg::Int(b)),
            ],
        )
    }
    pub fn expand(&mut self, x: ValueId, sizes: &[i64]) -> DResult<ValueId> {
        self.t(
            "aten.expand.default",
            vec![
                ("self", Arg::Tensor(x)),
                ("size", Arg::Ints(sizes.to_vec())),
            ],
        )
    }
    pub fn slice(
        &mut self,
        x: ValueId,
        dim: i64,
        start: i64,
        end: i64,
        step: i64,
    ) -> DResult<ValueId> {
        self.t(
            "aten.slice.Tensor",
            vec![
                ("self", Arg::Tensor(x)),
                ("dim", Arg::Int(dim)),
                ("start", Arg::Int(start)),
                ("end", Arg::Int(end)),
                ("step", Arg::Int(step)),
            ],
        )
    }
    pub fn diagonal(&mut self, x: ValueId, offset: i64, d1: i64, d2: i64) -> DResult<ValueId> {
        self.t(
            "aten.diagonal.default",
            vec![
                ("self", Arg::Tensor(x)),
                ("offset", Arg::Int(offset)),
                ("dim1", Arg::Int(d1)),
                ("dim2", Arg::Int(d2)),
            ],
        )
    }
    pub fn cat(&mut self, xs: &[ValueId], dim: i64) -> DResult<ValueId> {
        self.t(
            "aten.cat.default",
            vec![
                ("tensors", Arg::Tensors(xs.to_vec())),
                ("dim", Arg::Int(dim)),
            ],
        )
    }
    pub fn stack(&mut self, xs: &[ValueId], dim: i64) -> DResult<ValueId> {
        self.t(
            "aten.stack.default",
            vec![
                ("tensors", Arg::Tensors(xs.to_vec())),
                ("dim", Arg::Int(dim)),
            ],
        )
    }
    /// `aten.<op>.Tensor(x, y)`.
    pub fn bin(&mut self, op: &str, x: ValueId, y: ValueId) -> DResult<ValueId> {
        self.t(
            &format!("aten.{op}.Tensor"),
            vec![("self", Arg::Tensor(x)), ("other", Arg::Tensor(y))],
        )
    }
    /// `aten.<op>.Tensor(x, scalar)` (a Python number as the other operand).
    pub fn bin_s(&mut self, op: &str, x: ValueId, s: f64) -> DResult<ValueId> {
        self.t(
            &format!("aten.{op}.Tensor"),
            vec![("self", Arg::Tensor(x)), ("other", Arg::Float(s))],
        )
    }
    /// `aten.<op>.default(x)`.
    pub fn un(&mut self, op: &str, x: ValueId) -> DResult<ValueId> {
        self.t(
            &format!("aten.{op}.default"),
            vec![("self", Arg::Tensor(x))],
        )
    }
    /// `aten.<op>.Scalar(x, s)` (comparisons with a Python number: `eq`, `ne`, `lt`...).
    pub fn cmp_s(&mut self, op: &str, x: ValueId, s: Arg) -> DResult<ValueId> {
        self.t(
            &format!("aten.{op}.Scalar"),
            vec![("self", Arg::Tensor(x)), ("other", s)],
        )
    }
    pub fn gather(&mut self, x: ValueId, dim: i64, index: ValueId) -> DResult<ValueId> {
        self.t(
            "aten.gather.default",
            vec![
                ("self", Arg::Tensor(x)),
                ("dim", Arg::Int(dim)),
                ("index", Arg::Tensor(index)),
            ],
        )
    }
    pub fn index_select(&mut self, x: ValueId, dim: i64, index: ValueId) -> DResult<ValueId> {
        self.t(
            "aten.index_select.default",
            vec![
                ("self", Arg::Tensor(x)),
                ("dim", Arg::Int(dim)),
                ("index", Arg::Tensor(index)),
            ],
        )
    }
    pub fn any(&mut self, x: ValueId, dim: i64, keepdim: bool) -> DResult<ValueId> {
        self.t(
            "aten.any.dim",
            vec![
                ("self", Arg::Tensor(x)),
                ("dim", Arg::Int(dim)),
                ("keepdim", Arg::Bool(keepdim)),
            ],
        )
    }
    pub fn sum(&mut self, x: ValueId, dims: &[i64], keepdim: bool) -> DResult<ValueId> {
        self.t(
            "aten.sum.dim_IntList",
            vec![
                ("self", Arg::Tensor(x)),
                ("dim", Arg::Ints(dims.to_vec())),
                ("keepdim", Arg::Bool(keepdim)),
            ],
        )
    }
    pub fn where_(&mut self, c: ValueId, x: ValueId, y: ValueId) -> DResult<ValueId> {
        self.t(
            "aten.where.self",
            vec![
                ("condition", Arg::Tensor(c)),
                ("self", Arg::Tensor(x)),
                ("other", Arg::Tensor(y)),
            ],
        )
    }
    /// A 0-d tensor of `dtype` holding `v`.
    pub fn scalar(&mut self, v: f64, dtype: DType) -> DResult<ValueId> {
        self.t(
            "aten.scalar_tensor.default",
            vec![("s", Arg::Float(v)), ("dtype", Arg::ScalarType(dtype))],
        )
    }
    pub fn full(&mut self, sizes: &[i64], v: f64, dtype: DType) -> DResult<ValueId> {
        self.t(
            "aten.full.default",
            vec![
                ("size", Arg::Ints(sizes.to_vec())),
                ("fill_value", Arg::Float(v)),
                ("dtype", Arg::ScalarType(dtype)),
            ],
        )
    }
    pub fn arange(&mut self, start: i64, end: i64, dtype: DType) -> DResult<ValueId> {
        self.t(
            "aten.arange.start_step",
            vec![
                ("start", Arg::Int(start)),
                ("end", Arg::Int(end)),
                ("step", Arg::Int(1)),
                ("dtype", Arg::ScalarType(dtype)),
            ],
        )
    }
    pub fn cast(&mut self, x: ValueId, dtype: DType) -> DResult<ValueId> {
        if self.dtype(x)? == dtype {
            return Ok(x);
        }
        self.t(
            "aten._to_copy.default",
            vec![("self", Arg::Tensor(x)), ("dtype", Arg::ScalarType(dtype))],
        )
    }
    /// `loss` reduced as torch's `reduction` argument says (0 none, 1 mean, 2 sum).
    pub fn reduce(&mut self, loss: ValueId, reduction: i64) -> DResult<ValueId> {
        match reduction {
            0 => Ok(loss),
            1 => self.un("mean", loss),
            2 => self.un("sum", loss),
            r => Err(format!("reduction {r}")),
        }
    }
}

// Argument readers (by schema name, with the schema's default when the export left it out).

pub(crate) fn tensor(n: &Node, name: &str) -> DResult<ValueId> {
    match n.arg(name) {
        Some(Arg::Tensor(v)) => Ok(*v),
        other => Err(format!("argument '{name}' is {other:?}, not a tensor")),
    }
}
pub(crate) fn opt_tensor(n: &Node, name: &str) -> DResult<Option<ValueId>> {
    match n.arg(name) {
        Some(Arg::Tensor(v)) | Some(Arg::OptTensor(Some(v))) => Ok(Some(*v)),
        None | Some(Arg::None) | Some(Arg::OptTensor(None)) => Ok(None),
        other => Err(format!("argument '{name}' is {other:?}")),
    }
}
pub(crate) fn tensors(n: &Node, name: &str) -> DResult<Vec<ValueId>> {
    match n.arg(name) {
        Some(Arg::Tensors(vs)) => Ok(vs.clone()),
        other => Err(format!("argument '{name}' is {other:?}, not a tensor list")),
    }
}
pub(crate) fn int(n: &Node, name: &str, default: Option<i64>) -> DResult<i64> {
    match n.arg(name) {
        Some(Arg::Int(i)) | Some(Arg::SymInt(IntArg::Int(i))) => Ok(*i),
        None | Some(Arg::None) => default.ok_or_else(|| format!("argument '{name}' is missing")),
        other => Err(format!("argument '{name}' is {other:?}, not an int")),
    }
}
pub(crate) fn opt_int(n: &Node, name: &str) -> DResult<Option<i64>> {
    match n.arg(name) {
        None | Some(Arg::None) => Ok(None),
        _ => int(n, name, None).map(Some),
    }
}
pub(crate) fn ints(n: &Node, name: &str) -> DResult<Option<Vec<i64>>> {
    match n.arg(name) {
        Some(Arg::Ints(v)) => Ok(Some(v.clone())),
        Some(Arg::SymInts(v)) => v
            .iter()
            .map(|x| match x {
                IntArg::Int(i) => Ok(*i),
                IntArg::Sym(_) => Err(format!("argument '{name}' is symbolic")),
            })
            .collect::<DResult<Vec<i64>>>()
            .map(Some),
        Some(Arg::Int(i)) => Ok(Some(vec![*i])),
        None | Some(Arg::None) => Ok(None),
        other => Err(format!("argument '{name}' is {other:?}, not an int list")),
    }
}
pub(crate) fn float(n: &Node, name: &str, default: Option<f64>) -> DResult<f64> {
    match n.arg(name) {
        Some(Arg::Float(f)) => Ok(*f),
        Some(Arg::Int(i)) => Ok(*i as f64),
        Some(Arg::Bool(b)) => Ok(*b as u8 as f64),
        None | Some(Arg::None) => default.ok_or_else(|| format!("argument '{name}' is missing")),
        other => Err(format!("argument '{name}' is {other:?}, not a number")),
    }
}
pub(crate) fn opt_float(n: &Node, name: &str) -> DResult<Option<f64>> {
    match n.arg(name) {
        None | Some(Arg::None) => Ok(None),
        _ => float(n, name, None).map(Some),
    }
}
pub(crate) fn boolean(n: &Node, name: &str, default: bool) -> DResult<bool> {
    match n.arg(name) {
        Some(Arg::Bool(b)) => Ok(*b),
        None | Some(Arg::None) => Ok(default),
        other => Err(format!("argument '{name}' is {other:?}, not a bool")),
    }
}
pub(crate) fn string(n: &Node, name: &str) -> DResult<Option<String>> {
    match n.arg(name) {
        Some(Arg::Str(s)) => Ok(Some(s.clone())),
        None | Some(Arg::None) => Ok(None),
        other => Err(format!("argument '{name}' is {other:?}, not a string")),
    }
}
/// Wrap a possibly negative dim of a tensor of rank `rank` (at least 1: a decomposition
/// that indexes dims does not take 0-d tensors).
pub(crate) fn wrap(dim: i64, rank: usize) -> DResult<i64> {
    if rank == 0 {
        return Err(format!("dim {dim} of a 0-d tensor"));
    }
    let r = rank as i64;
    if dim < -r || dim >= r {
        return Err(format!("dim {dim} is out of range for rank {rank}"));
    }
    Ok(if dim < 0 { dim + r } else { dim })
}
