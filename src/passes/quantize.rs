//! Load-time weight quantization (`LoadOptions::weights`, `pt2web run/generate --weights`,
//! JS `load(url, { weights })`): the f32 weights of linear layers, of `mm`/`addmm` products
//! with a weight as right operand (GPT-2's `Conv1D`, core ATen's `permute` + `addmm`) and of
//! embeddings become int8 (one scale per output row) or int4 (one scale per group of input
//! features), held in that form on every backend and dequantized inside the kernels
//! (`pt2web.linear_q`, `pt2web.embedding_q`: `src/ops/matmul/quant.rs`, which also gives
//! the format).
//!
//! A weight is quantized only when every use of it is one of those (a weight that is also
//! added, returned or mutated stays f32), when it is f32 and 2-D, and when its input
//! features split into whole groups; its f32 entry leaves the program (the state then has
//! `NAME.qweight` and `NAME.scale` instead). Programs are changed before the session's graph
//! passes, so a weight the passes would fold stays f32.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::matmul::quant::{self, QLayout};
use crate::program::{Arg, Dim, Graph, InputKind, Program, ValueId, ValueKind};
use std::collections::{BTreeMap, HashMap};

/// How weights are held after loading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WeightFormat {
    /// As the archive has them.
    #[default]
    Keep,
    /// int8, one scale per output row.
    Int8,
    /// int4, one scale per `group` input features of each row.
    Int4 { group: usize },
}

/// int4's default group (input features per scale).
pub const INT4_GROUP: usize = 32;

impl std::str::FromStr for WeightFormat {
    type Err = String;
    /// `f32` (keep), `int8`, `int4` or `int4:GROUP`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad = || format!("expected f32, int8, int4 or int4:GROUP (e.g. int4:64), got '{s}'");
        match s {
            "f32" | "keep" => Ok(WeightFormat::Keep),
            "int8" => Ok(WeightFormat::Int8),
            "int4" => Ok(WeightFormat::Int4 { group: INT4_GROUP }),
            _ => {
                let g = s.strip_prefix("int4:").ok_or_else(bad)?;
                let group: usize = g.parse().map_err(|_| bad())?;
                if group == 0 || !group.is_multiple_of(8) {
                    return Err(format!(
                        "int4 group must be a positive multiple of 8, got {group}"
                    ));
                }
                Ok(WeightFormat::Int4 { group })
            }
        }
    }
}

/// What [`run`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantReport {
    /// Weights quantized.
    pub weights: usize,
    /// Their bytes as f32, and quantized (words and scales).
    pub f32_bytes: usize,
    pub quantized_bytes: usize,
    /// 2-D f32 weights left as they were, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// How one node uses a weight.
#[derive(Clone, Copy, PartialEq)]
enum Use {
    /// `linear(x, W, b)` / `embedding(W, idx)`: W is `[n, k]` as stored.
    Rows,
    /// `mm(x, W)` / `addmm(b, x, W)`: W is `[k, n]`, quantized transposed.
    Right,
    /// `mm`/`addmm` of `t(W)` / `permute(W, [1, 0])` / `transpose(W, 0, 1)`: the node is the
    /// view; its users are the products.
    View,
}

/// Quantize the program's weights to `fmt` (nothing for [`WeightFormat::Keep`]).
pub fn run(p: &mut Program, fmt: WeightFormat) -> Result<QuantReport> {
    let (bits, group_of): (usize, Box<dyn Fn(usize) -> usize>) = match fmt {
        WeightFormat::Keep => return Ok(QuantReport::default()),
        WeightFormat::Int8 => (8, Box::new(|k| k)),
        WeightFormat::Int4 { group } => (4, Box::new(move |_| group)),
    };
    // Placeholder value → state name, for the weights that may be quantized: f32, 2-D, never
    // mutated (nor sharing storage with state that is).
    let names: HashMap<ValueId, String> = super::const_fold::unmutated_state(p)
        .into_iter()
        .filter(|(_, name)| {
            p.state
                .get(name)
                .is_some_and(|e| e.tensor.dtype == DType::F32 && e.tensor.sizes.len() == 2)
        })
        .collect();
    let mut report = QuantReport::default();
    let mut plan: BTreeMap<String, (ValueId, Vec<(usize, Use)>)> = BTreeMap::new();
    for (&v, name) in &names {
        match weight_uses(&p.graph, v) {
            Err(why) => report.skipped.push((name.clone(), why)),
            Ok(uses) if !uses.is_empty() => {
                plan.insert(name.clone(), (v, uses));
            }
            Ok(_) => {}
        }
    }
    let mut dead_views = Vec::new();
    for (name, (v, uses)) in plan {
        let e = &p.state[&name];
        let t = crate::cpu::Tensor::from_host(&e.tensor)?;
        let (r, c) = (t.sizes[0], t.sizes[1]);
        let transposed = uses.iter().all(|(_, u)| *u == Use::Right);
        let (n, k) = if transposed { (c, r) } else { (r, c) };
        let l = QLayout {
            n,
            k,
            bits,
            group: group_of(k),
        };
        if let Err(why) = l.check() {
            report.skipped.push((name.clone(), why));
            continue;
        }
        let w = if transposed {
            crate::ops::matmul::transpose_last2(&t).contiguous()
        } else {
            t
        };
        let (words, scales) = quant::quantize(&w.to_vec::<f32>(), l);
        let Some((qv, sv)) = add_quantized(p, &mut report, &name, &words, &scales, l)? else {
            continue;
        };
        apply(p, &uses, qv, sv, l, &mut dead_views)?;
        remove_state_input(p, v, &name);
        report.weights += 1;
        report.f32_bytes += n * k * 4;
        report.quantized_bytes += l.bytes();
    }
    // The views of quantized weights read a placeholder that is gone: they go now.
    dead_views.sort_unstable();
    for i in dead_views.into_iter().rev() {
        p.graph.nodes.remove(i);
    }
    Ok(report)
}

/// PT2E's int8 weights (torchao's `convert_pt2e` folds a weight's quantization into an int8
/// constant and dequantizes it in the graph: `dequantize_per_channel` along the output
/// features, or `dequantize_per_tensor`, with zero points 0, as XNNPACK's symmetric
/// config writes them) stay int8 where linear layers and embeddings alone read them: those
/// become `pt2web.linear_q` / `pt2web.embedding_q` over the same integers and scales (the
/// products are torch's, `q * scale`), and the dequantize node and the int8 constant leave
/// the program. Run at load ([`Pt2Archive::program`](crate::program::Pt2Archive)) when a
/// quantized weight format is asked for (`--weights int8|int4`; [`WeightFormat::Keep`] loads
/// the program as saved), before [`run`] quantizes the f32 weights left.
pub fn pt2e(p: &mut Program) -> Result<QuantReport> {
    struct Found {
        node: usize,
        weight: (ValueId, String),
        params: Vec<ValueId>,
        scales: Vec<f32>,
        q: Vec<i32>,
        l: QLayout,
        uses: Vec<(usize, Use)>,
    }
    let state = super::const_fold::unmutated_state(p);
    let mut report = QuantReport::default();
    let mut found = Vec::new();
    for (i, n) in p.graph.nodes.iter().enumerate() {
        let per_channel = match n.target.as_str() {
            "quantized_decomposed.dequantize_per_channel.default" => true,
            "quantized_decomposed.dequantize_per_tensor.default" => false,
            _ => continue,
        };
        let (Some(Arg::Tensor(out)), Some(Arg::Tensor(wv))) = (n.outputs.first(), n.arg("input"))
        else {
            continue;
        };
        let Some(wname) = state.get(wv) else { continue };
        let w = &p.state[wname].tensor;
        if w.dtype != DType::I8
            || w.sizes.len() != 2
            || !matches!(
                n.arg("out_dtype"),
                None | Some(Arg::None) | Some(Arg::ScalarType(DType::F32))
            )
        {
            continue;
        }
        let (rows, k) = (w.sizes[0], w.sizes[1]);
        let host = |v: &ValueId| -> Option<crate::cpu::Tensor> {
            let name = state.get(v)?;
            crate::cpu::Tensor::from_host(&p.state[name].tensor).ok()
        };
        let mut params = Vec::new();
        let scales: Vec<f32> = if per_channel {
            let axis_ok = matches!(n.arg("axis"), Some(Arg::Int(0 | -2)));
            let zeros = match n.arg("zero_points") {
                None | Some(Arg::None) | Some(Arg::OptTensor(None)) => true,
                Some(Arg::Tensor(z)) | Some(Arg::OptTensor(Some(z))) => {
                    params.push(*z);
                    host(z).is_some_and(|t| {
                        !t.dtype.is_float()
                            && t.numel() == rows
                            && t.to_vec::<i64>().iter().all(|&z| z == 0)
                    })
                }
                _ => false,
            };
            let s = match n.arg("scales") {
                Some(Arg::Tensor(s)) => {
                    params.push(*s);
                    host(s).filter(|t| t.dtype == DType::F32 && t.numel() == rows)
                }
                _ => None,
            };
            match s {
                Some(s) if axis_ok && zeros => s.contiguous().to_vec::<f32>(),
                _ => continue,
            }
        } else {
            match (n.arg("scale"), n.arg("zero_point")) {
                (Some(Arg::Float(s)), Some(Arg::Int(0))) => vec![*s as f32; rows],
                _ => continue,
            }
        };
        let l = QLayout {
            n: rows,
            k,
            bits: 8,
            group: k,
        };
        let uses = weight_uses(&p.graph, *out).and_then(|u| {
            if u.iter().any(|(_, u)| *u == Use::Right) {
                Err("used as the right operand of a product: its scales are per input".into())
            } else {
                l.check().map(|_| u)
            }
        });
        match uses {
            Err(why) => report.skipped.push((wname.clone(), why)),
            Ok(uses) if !uses.is_empty() => {
                let q = crate::cpu::Tensor::from_host(w)?
                    .contiguous()
                    .to_vec::<i32>();
                found.push(Found {
                    node: i,
                    weight: (*wv, wname.clone()),
                    params,
                    scales,
                    q,
                    l,
                    uses,
                });
            }
            Ok(_) => {}
        }
    }
    let mut dead = Vec::new();
    let mut freed: Vec<ValueId> = Vec::new();
    for f in found {
        let words = quant::pack(&f.q, f.l);
        let Some((qv, sv)) = add_quantized(p, &mut report, &f.weight.1, &words, &f.scales, f.l)?
        else {
            continue;
        };
        apply(p, &f.uses, qv, sv, f.l, &mut dead)?;
        dead.push(f.node);
        freed.push(f.weight.0);
        freed.extend(f.params);
        report.weights += 1;
        report.f32_bytes += f.l.n * f.l.k * 4;
        report.quantized_bytes += f.l.bytes();
    }
    dead.sort_unstable();
    dead.dedup();
    for i in dead.into_iter().rev() {
        p.graph.nodes.remove(i);
    }
    // The int8 weights, their scales and zero points, where nothing else reads them.
    remove_unread_state(p, &state, &freed);
    Ok(report)
}

/// Rewrite each use of a weight into its quantized form over `qv` / `sv`; the views among
/// them (whose users were the products) go into `dead_views`.
fn apply(
    p: &mut Program,
    uses: &[(usize, Use)],
    qv: ValueId,
    sv: ValueId,
    l: QLayout,
    dead_views: &mut Vec<usize>,
) -> Result<()> {
    for &(i, u) in uses {
        match u {
            Use::Rows | Use::Right => rewrite(&mut p.graph.nodes[i], qv, sv, l)?,
            Use::View => {
                let Some(Arg::Tensor(o)) = p.graph.nodes[i].outputs.first().cloned() else {
                    continue;
                };
                let products: Vec<usize> = p
                    .graph
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.inputs.iter().any(|(_, a)| arg_uses(a, o)))
                    .map(|(j, _)| j)
                    .collect();
                for j in products {
                    rewrite(&mut p.graph.nodes[j], qv, sv, l)?;
                }
                dead_views.push(i);
            }
        }
    }
    Ok(())
}

/// Every use of the weight `v` by node index, when each is one a quantized kernel takes
/// (else why not).
fn weight_uses(g: &Graph, v: ValueId) -> std::result::Result<Vec<(usize, Use)>, String> {
    let users = |v: ValueId| -> Vec<usize> {
        g.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.inputs.iter().any(|(_, a)| arg_uses(a, v)))
            .map(|(i, _)| i)
            .collect()
    };
    let in_outputs = |v: ValueId| g.outputs.iter().any(|a| arg_uses(a, v));
    let mut uses = Vec::new();
    let mut why = None;
    if in_outputs(v) {
        why = Some("the program returns it".to_string());
    }
    for i in users(v) {
        let n = &g.nodes[i];
        // W is argument `arg` and no other.
        let only = |arg: &str| {
            n.inputs.iter().all(|(k, a)| {
                if k == arg {
                    matches!(a, Arg::Tensor(w) if *w == v)
                } else {
                    !arg_uses(a, v)
                }
            })
        };
        let u = match n.target.as_str() {
            "aten.linear.default" if only("weight") => Some(Use::Rows),
            "aten.embedding.default" if only("weight") => Some(Use::Rows),
            "aten.mm.default" | "aten.addmm.default" if only("mat2") && unit(g, n) => {
                Some(Use::Right)
            }
            "aten.t.default" | "aten.permute.default" | "aten.transpose.int"
                if only("self") && swaps(n) =>
            {
                let out = match n.outputs.first() {
                    Some(Arg::Tensor(o)) => Some(*o),
                    _ => None,
                };
                let ok = out.is_some_and(|o| {
                    !in_outputs(o)
                        && users(o).iter().all(|&j| {
                            let m = &g.nodes[j];
                            matches!(m.target.as_str(), "aten.mm.default" | "aten.addmm.default")
                                && matches!(m.arg("mat2"), Some(Arg::Tensor(w)) if *w == o)
                                && !matches!(m.arg("mat1"), Some(Arg::Tensor(w)) if *w == o)
                                && unit(g, m)
                        })
                });
                ok.then_some(Use::View)
            }
            _ => None,
        };
        match u {
            Some(u) => uses.push((i, u)),
            None => {
                why.get_or_insert_with(|| format!("used by {}", n.target));
            }
        }
    }
    let right = uses.iter().filter(|(_, u)| *u == Use::Right).count();
    if right > 0 && right < uses.len() {
        why.get_or_insert_with(|| "used both as [out, in] and as [in, out]".into());
    }
    match why {
        Some(w) => Err(w),
        None => Ok(uses),
    }
}

fn arg_uses(a: &Arg, v: ValueId) -> bool {
    let mut ids = Vec::new();
    a.values(&mut ids);
    ids.contains(&v)
}

/// `addmm`'s alpha and beta are 1 (the quantized linear has no such factors) and its bias
/// (`self`) is one row: `[n]` or `[1, n]`.
fn unit(g: &Graph, n: &crate::program::Node) -> bool {
    let one = |k: &str| match n.arg(k) {
        None => true,
        Some(Arg::Int(1)) => true,
        Some(Arg::Float(f)) => *f == 1.0,
        _ => false,
    };
    let row = match n.arg("self") {
        None => true,
        Some(Arg::Tensor(b)) if n.target == "aten.addmm.default" => match &g.values[*b].kind {
            ValueKind::Tensor { sizes, .. } => {
                sizes.len() <= 1 || (sizes.len() == 2 && sizes[0] == Dim::Static(1))
            }
            _ => false,
        },
        Some(_) => n.target == "aten.mm.default",
    };
    one("alpha") && one("beta") && row
}

/// Whether a `t` / `permute` / `transpose` node swaps the two dims of a 2-D tensor.
fn swaps(n: &crate::program::Node) -> bool {
    match n.target.as_str() {
        "aten.t.default" => true,
        "aten.permute.default" => matches!(n.arg("dims"), Some(Arg::Ints(d)) if d == &[1, 0]),
        "aten.transpose.int" => {
            let d = |k| match n.arg(k) {
                Some(Arg::Int(i)) => Some(i.rem_euclid(2)),
                _ => None,
            };
            matches!((d("dim0"), d("dim1")), (Some(a), Some(b)) if a != b)
        }
        _ => false,
    }
}

/// Make `node` (linear / embedding / mm / addmm) its quantized form over `qv` and `sv`.
fn rewrite(node: &mut crate::program::Node, qv: ValueId, sv: ValueId, l: QLayout) -> Result<()> {
    let tensor = |k: &str| match node.arg(k) {
        Some(Arg::Tensor(t)) => Ok(*t),
        _ => Err(Error::Verify(format!(
            "quantize: {} has no tensor '{k}'",
            node.target
        ))),
    };
    let (target, inputs) = match node.target.as_str() {
        "aten.embedding.default" => (
            quant::EMBEDDING,
            vec![
                ("qweight".to_string(), Arg::Tensor(qv)),
                ("scale".into(), Arg::Tensor(sv)),
                ("indices".into(), Arg::Tensor(tensor("indices")?)),
            ],
        ),
        t => {
            let (x, bias) = match t {
                "aten.linear.default" => (
                    tensor("input")?,
                    match node.arg("bias") {
                        Some(Arg::Tensor(b)) | Some(Arg::OptTensor(Some(b))) => Some(*b),
                        _ => None,
                    },
                ),
                "aten.mm.default" => (tensor("self")?, None),
                _ => (tensor("mat1")?, Some(tensor("self")?)),
            };
            (
                quant::LINEAR,
                vec![
                    ("input".to_string(), Arg::Tensor(x)),
                    ("qweight".into(), Arg::Tensor(qv)),
                    ("scale".into(), Arg::Tensor(sv)),
                    ("bias".into(), Arg::OptTensor(bias)),
                ],
            )
        }
    };
    node.target = target.to_string();
    node.inputs = inputs;
    node.inputs.push(("bits".into(), Arg::Int(l.bits as i64)));
    node.inputs.push(("group".into(), Arg::Int(l.group as i64)));
    Ok(())
}

/// Take state `name` (placeholder `v`) out of the program.
fn remove_state_input(p: &mut Program, v: ValueId, name: &str) {
    if let Some(i) = p
        .graph
        .inputs
        .iter()
        .position(|a| matches!(a, Arg::Tensor(x) if *x == v))
    {
        p.graph.inputs.remove(i);
        p.inputs.remove(i);
    }
    let still = p.inputs.iter().any(|s| {
        matches!(&s.kind, InputKind::Parameter { name: n } | InputKind::Buffer { name: n, .. }
            | InputKind::Constant { name: n } if n == name)
    });
    if !still {
        p.state.remove(name);
    }
}

/// torchao's int8 weight-only layers (`Int8WeightOnlyConfig`) as core ATen writes them:
/// `mm(x, _to_copy(permute(Wq, [1, 0]), float32))` times `view(scale, [n])`, with `Wq` an int8
/// `[n, k]` constant and `scale` its f32 `[n, 1]` per-row scales (symmetric: the zero points are
/// not read). The product and the scaling become one `pt2web.linear_q` over the same integers
/// and scales (the bias add after it stays), and the int8 weight leaves the f32 path: on the
/// GPU a decode step streams int8 words instead of a folded f32 copy. Run at load with
/// [`pt2e`], when a quantized weight format is asked for.
pub fn torchao_int8(p: &mut Program) -> Result<QuantReport> {
    let state = super::const_fold::unmutated_state(p);
    let g = &p.graph;
    let mut report = QuantReport::default();
    // value -> the node defining it, and the nodes reading it.
    let def = super::definers(g);
    let mut readers: HashMap<ValueId, Vec<usize>> = HashMap::new();
    let mut ids = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        ids.clear();
        n.inputs.iter().for_each(|(_, a)| a.values(&mut ids));
        for &v in &ids {
            readers.entry(v).or_default().push(i);
        }
    }
    let returned = |v: ValueId| g.outputs.iter().any(|a| arg_uses(a, v));
    let out = |i: usize| match g.nodes[i].outputs.first() {
        Some(Arg::Tensor(o)) => Some(*o),
        _ => None,
    };
    let tensor = |i: usize, k: &str| match g.nodes[i].arg(k) {
        Some(Arg::Tensor(t)) => Some(*t),
        _ => None,
    };
    // Readers other than assertions (`_assert_tensor_metadata` checks a dtype the constant has).
    let users = |v: ValueId| -> Vec<usize> {
        readers
            .get(&v)
            .map(|r| {
                r.iter()
                    .copied()
                    .filter(|&j| g.nodes[j].target != "aten._assert_tensor_metadata.default")
                    .collect()
            })
            .unwrap_or_default()
    };
    struct Found {
        mul: usize,
        x: ValueId,
        weight: (ValueId, String),
        scale: ValueId,
        q: Vec<i32>,
        scales: Vec<f32>,
        l: QLayout,
    }
    let mut found: Vec<Found> = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if n.target != "aten.mm.default" {
            continue;
        }
        let (Some(x), Some(c), Some(m)) = (tensor(i, "self"), tensor(i, "mat2"), out(i)) else {
            continue;
        };
        // mat2 = _to_copy(permute(Wq, [1, 0]), float32), read by this product alone.
        let Some(&ci) = def.get(&c) else { continue };
        let cn = &g.nodes[ci];
        if cn.target != "aten._to_copy.default"
            || !matches!(cn.arg("dtype"), Some(Arg::ScalarType(DType::F32)))
            || users(c).len() != 1
            || returned(c)
        {
            continue;
        }
        let Some(pv) = tensor(ci, "self") else {
            continue;
        };
        let Some(&pi) = def.get(&pv) else { continue };
        if !swaps(&g.nodes[pi]) || users(pv).len() != 1 || returned(pv) {
            continue;
        }
        let Some(wv) = tensor(pi, "self") else {
            continue;
        };
        let Some(wname) = state.get(&wv) else {
            continue;
        };
        let w = &p.state[wname].tensor;
        if w.dtype != DType::I8 || w.sizes.len() != 2 {
            continue;
        }
        let (rows, k) = (w.sizes[0], w.sizes[1]);
        // The product's one reader: mul(product, view(scale, [n])), scale f32 with n values.
        let mu = users(m);
        let [j] = mu[..] else { continue };
        let mn = &g.nodes[j];
        if mn.target != "aten.mul.Tensor" || returned(m) || tensor(j, "self") != Some(m) {
            continue;
        }
        let Some(sv) = tensor(j, "other") else {
            continue;
        };
        let scale_state = match def.get(&sv) {
            Some(&vi)
                if matches!(
                    g.nodes[vi].target.as_str(),
                    "aten.view.default" | "aten.reshape.default"
                ) =>
            {
                tensor(vi, "self")
            }
            None => Some(sv),
            _ => None,
        };
        let Some(sname) = scale_state.and_then(|s| state.get(&s)) else {
            continue;
        };
        let s = &p.state[sname].tensor;
        let sizes_ok = match &g.values[sv].kind {
            ValueKind::Tensor { sizes, .. } => {
                sizes.len() == 1 && sizes[0] == Dim::Static(rows as i64)
            }
            _ => false,
        };
        if s.dtype != DType::F32 || s.numel() != rows || !sizes_ok {
            continue;
        }
        let l = QLayout {
            n: rows,
            k,
            bits: 8,
            group: k,
        };
        if let Err(why) = l.check() {
            report.skipped.push((wname.clone(), why));
            continue;
        }
        found.push(Found {
            mul: j,
            x,
            weight: (wv, wname.clone()),
            scale: sv,
            q: crate::cpu::Tensor::from_host(w)?
                .contiguous()
                .to_vec::<i32>(),
            scales: crate::cpu::Tensor::from_host(s)?
                .contiguous()
                .to_vec::<f32>(),
            l,
        });
    }
    let mut freed = Vec::new();
    for f in found {
        let words = quant::pack(&f.q, f.l);
        let Some((qv, sv)) = add_quantized(p, &mut report, &f.weight.1, &words, &f.scales, f.l)?
        else {
            continue;
        };
        let node = &mut p.graph.nodes[f.mul];
        node.target = quant::LINEAR.to_string();
        node.inputs = vec![
            ("input".into(), Arg::Tensor(f.x)),
            ("qweight".into(), Arg::Tensor(qv)),
            ("scale".into(), Arg::Tensor(sv)),
            ("bias".into(), Arg::OptTensor(None)),
            ("bits".into(), Arg::Int(8)),
            ("group".into(), Arg::Int(f.l.k as i64)),
        ];
        freed.push(f.weight.0);
        freed.push(f.scale);
        report.weights += 1;
        report.f32_bytes += f.l.n * f.l.k * 4;
        report.quantized_bytes += f.l.bytes();
    }
    if report.weights > 0 {
        // The int8 weights and the scales' placeholders (the scales live on in NAME.scale).
        let placeholders: Vec<ValueId> = freed
            .iter()
            .map(|v| def_of_view(p, *v).unwrap_or(*v))
            .collect();
        freed.extend(placeholders);
        drop_unread(p, &freed);
        remove_unread_state(p, &state, &freed);
    }
    Ok(report)
}

/// Remove what the rewrite left unread: products, casts and views whose results nothing
/// reads, and the assertions on them or on the `freed` state, until none is left.
fn drop_unread(p: &mut Program, freed: &[ValueId]) {
    const PURE: [&str; 9] = [
        "aten.mm.default",
        "aten.sub.Tensor",
        "aten.mul.Tensor",
        "aten._to_copy.default",
        "aten.permute.default",
        "aten.t.default",
        "aten.transpose.int",
        "aten.view.default",
        "aten.reshape.default",
    ];
    const ASSERT: &str = "aten._assert_tensor_metadata.default";
    loop {
        let g = &p.graph;
        let mut read = vec![false; g.values.len()];
        let mut removable = vec![false; g.values.len()];
        freed.iter().for_each(|&v| removable[v] = true);
        let mut ids = Vec::new();
        for n in &g.nodes {
            if PURE.contains(&n.target.as_str()) {
                ids.clear();
                n.outputs.iter().for_each(|a| a.values(&mut ids));
                ids.iter().for_each(|&v| removable[v] = true);
            }
            if n.target == ASSERT {
                continue;
            }
            ids.clear();
            n.inputs.iter().for_each(|(_, a)| a.values(&mut ids));
            ids.iter().for_each(|&v| read[v] = true);
        }
        for a in &g.outputs {
            ids.clear();
            a.values(&mut ids);
            ids.iter().for_each(|&v| read[v] = true);
        }
        let dead = |n: &crate::program::Node| {
            let mut ids = Vec::new();
            if n.target == ASSERT {
                n.inputs.iter().for_each(|(_, a)| a.values(&mut ids));
                return !ids.is_empty() && ids.iter().all(|&v| !read[v] && removable[v]);
            }
            n.outputs.iter().for_each(|a| a.values(&mut ids));
            PURE.contains(&n.target.as_str()) && ids.iter().all(|&v| !read[v])
        };
        let before = p.graph.nodes.len();
        p.graph.nodes.retain(|n| !dead(n));
        if p.graph.nodes.len() == before {
            break;
        }
    }
}

/// The value `v` is a view (`view` / `reshape`) of, if it is one.
fn def_of_view(p: &Program, v: ValueId) -> Option<ValueId> {
    p.graph.nodes.iter().find_map(|n| {
        let defines = matches!(n.outputs.first(), Some(Arg::Tensor(o)) if *o == v);
        let view = matches!(
            n.target.as_str(),
            "aten.view.default" | "aten.reshape.default"
        );
        match (defines && view, n.arg("self")) {
            (true, Some(Arg::Tensor(s))) => Some(*s),
            _ => None,
        }
    })
}

/// Add weight `name`'s quantized form (`words`, and `scales` `[n, groups]`) as the constants
/// `NAME.qweight` and `NAME.scale`: their placeholders, or None (the reason in `report`) when
/// the program already has those names.
fn add_quantized(
    p: &mut Program,
    report: &mut QuantReport,
    name: &str,
    words: &[i32],
    scales: &[f32],
    l: QLayout,
) -> Result<Option<(ValueId, ValueId)>> {
    let (qname, sname) = (format!("{name}.qweight"), format!("{name}.scale"));
    if p.state.contains_key(&qname) || p.state.contains_key(&sname) {
        report
            .skipped
            .push((name.to_string(), "its quantized names are taken".into()));
        return Ok(None);
    }
    let qt = crate::tensor::HostTensor::from_bytes(
        &qname,
        DType::I32,
        vec![l.n, l.words()],
        words.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )?;
    let st = crate::tensor::HostTensor::from_bytes(
        &sname,
        DType::F32,
        vec![l.n, l.groups()],
        scales.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )?;
    let qv = super::add_constant(p, &qname, qt);
    let sv = super::add_constant(p, &sname, st);
    Ok(Some((qv, sv)))
}

/// torchao's int4 weight-only layers (`Int4WeightOnlyConfig`, asymmetric groups) as core ATen
/// writes them: the weight `(float(view(Wq, [n, G, gs])) - float(view(zp, [n, G, 1]))) *
/// view(scale, [n, G, 1])` viewed as `[n, k]`, read by linear layers (`permute` + `addmm`).
/// The integers `Wq - zp` (within -15..15) are kept as int8 with one scale per group of `gs`
/// inputs, so the products are torch's (`(q - zp) * scale` is exact up to the one rounding
/// torch does too), and the dequantization chain leaves the program: 0.31x of the f32 bytes
/// at group 16 (int4 words would need zero points in the kernels). Run at load with [`pt2e`].
pub fn torchao_int4(p: &mut Program) -> Result<QuantReport> {
    let state = super::const_fold::unmutated_state(p);
    let g = &p.graph;
    let mut report = QuantReport::default();
    let def = super::definers(g);
    let tensor = |i: usize, k: &str| match g.nodes[i].arg(k) {
        Some(Arg::Tensor(t)) => Some(*t),
        _ => None,
    };
    // `v` = op(state, ...): the state's placeholder.
    let through = |v: ValueId, ops: &[&str]| -> Option<(usize, ValueId)> {
        let &i = def.get(&v)?;
        ops.contains(&g.nodes[i].target.as_str())
            .then(|| tensor(i, "self").map(|s| (i, s)))?
    };
    let float_of_view = |v: ValueId| -> Option<ValueId> {
        let (ci, x) = through(v, &["aten._to_copy.default"])?;
        if !matches!(g.nodes[ci].arg("dtype"), Some(Arg::ScalarType(DType::F32))) {
            return None;
        }
        through(x, &["aten.view.default", "aten.reshape.default"]).map(|(_, s)| s)
    };
    struct Found {
        weight: (ValueId, String),
        params: Vec<ValueId>,
        q: Vec<i32>,
        scales: Vec<f32>,
        l: QLayout,
        uses: Vec<(usize, Use)>,
    }
    let mut found = Vec::new();
    let views = ["aten.view.default", "aten.reshape.default"];
    for (i, n) in g.nodes.iter().enumerate() {
        if !views.contains(&n.target.as_str()) {
            continue;
        }
        let (Some(Arg::Tensor(w)), Some(m)) = (n.outputs.first(), tensor(i, "self")) else {
            continue;
        };
        let Some((mi, d)) = through(m, &["aten.mul.Tensor"]) else {
            continue;
        };
        let Some(sv) = tensor(mi, "other") else {
            continue;
        };
        let Some((si, a)) = through(d, &["aten.sub.Tensor"]) else {
            continue;
        };
        if !matches!(g.nodes[si].arg("alpha"), None | Some(Arg::Int(1))) {
            continue;
        }
        let (Some(wq), Some(zq)) = (
            float_of_view(a),
            tensor(si, "other").and_then(float_of_view),
        ) else {
            continue;
        };
        let Some((_, sq)) = through(sv, &views) else {
            continue;
        };
        let (Some(wname), Some(zname), Some(sname)) =
            (state.get(&wq), state.get(&zq), state.get(&sq))
        else {
            continue;
        };
        let (wt, zt, st) = (
            &p.state[wname].tensor,
            &p.state[zname].tensor,
            &p.state[sname].tensor,
        );
        if wt.dtype != DType::I8 && wt.dtype != DType::U8 || wt.sizes.len() != 2 {
            continue;
        }
        let (rows, k) = (wt.sizes[0], wt.sizes[1]);
        let groups = st.numel() / rows.max(1);
        if groups == 0
            || st.dtype != DType::F32
            || st.numel() != rows * groups
            || zt.dtype.is_float()
            || zt.numel() != rows * groups
            || !k.is_multiple_of(groups)
        {
            continue;
        }
        let l = QLayout {
            n: rows,
            k,
            bits: 8,
            group: k / groups,
        };
        let uses = weight_uses(g, *w).and_then(|u| {
            if u.iter().any(|(_, u)| *u == Use::Right) {
                Err("used as the right operand of a product: its groups run along its rows".into())
            } else {
                l.check().map(|_| u)
            }
        });
        let uses = match uses {
            Err(why) => {
                report.skipped.push((wname.clone(), why));
                continue;
            }
            Ok(u) if u.is_empty() => continue,
            Ok(u) => u,
        };
        let qw = crate::cpu::Tensor::from_host(wt)?
            .contiguous()
            .to_vec::<i32>();
        let zs = crate::cpu::Tensor::from_host(zt)?
            .contiguous()
            .to_vec::<i32>();
        let q: Vec<i32> = qw
            .iter()
            .enumerate()
            .map(|(e, &q)| q - zs[(e / k) * groups + (e % k) / l.group])
            .collect();
        if q.iter().any(|v| v.abs() > 127) {
            report
                .skipped
                .push((wname.clone(), "weights minus zero points leave int8".into()));
            continue;
        }
        found.push(Found {
            weight: (wq, wname.clone()),
            params: vec![zq, sq],
            q,
            scales: crate::cpu::Tensor::from_host(st)?
                .contiguous()
                .to_vec::<f32>(),
            l,
            uses,
        });
    }
    let mut freed = Vec::new();
    let mut dead_views = Vec::new();
    for f in found {
        let words = quant::pack(&f.q, f.l);
        let Some((qv, sv)) = add_quantized(p, &mut report, &f.weight.1, &words, &f.scales, f.l)?
        else {
            continue;
        };
        apply(p, &f.uses, qv, sv, f.l, &mut dead_views)?;
        freed.push(f.weight.0);
        freed.extend(f.params);
        report.weights += 1;
        report.f32_bytes += f.l.n * f.l.k * 4;
        report.quantized_bytes += f.l.bytes();
    }
    if report.weights > 0 {
        drop_unread(p, &freed);
        remove_unread_state(p, &state, &freed);
    }
    Ok(report)
}

/// Take the state of `freed` placeholders out of the program where nothing reads them.
fn remove_unread_state(p: &mut Program, state: &HashMap<ValueId, String>, freed: &[ValueId]) {
    for &v in freed {
        let used = p
            .graph
            .nodes
            .iter()
            .any(|n| n.inputs.iter().any(|(_, a)| arg_uses(a, v)))
            || p.graph.outputs.iter().any(|a| arg_uses(a, v));
        if let (false, Some(name)) = (used, state.get(&v)) {
            remove_state_input(p, v, name);
        }
    }
}
