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
        let to_bytes_i = words.iter().flat_map(|x| x.to_le_bytes()).collect();
        let to_bytes_f = scales.iter().flat_map(|x| x.to_le_bytes()).collect();
        let qname = format!("{name}.qweight");
        let sname = format!("{name}.scale");
        if p.state.contains_key(&qname) || p.state.contains_key(&sname) {
            report
                .skipped
                .push((name.clone(), "its quantized names are taken".into()));
            continue;
        }
        let qt = crate::tensor::HostTensor::from_bytes(
            &qname,
            DType::I32,
            vec![n, l.words()],
            to_bytes_i,
        )?;
        let st = crate::tensor::HostTensor::from_bytes(
            &sname,
            DType::F32,
            vec![n, l.groups()],
            to_bytes_f,
        )?;
        let qv = super::add_constant(p, &qname, qt);
        let sv = super::add_constant(p, &sname, st);
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
        let name = &f.weight.1;
        let (qname, sname) = (format!("{name}.qweight"), format!("{name}.scale"));
        if p.state.contains_key(&qname) || p.state.contains_key(&sname) {
            report
                .skipped
                .push((name.clone(), "its quantized names are taken".into()));
            continue;
        }
        let words = quant::pack(&f.q, f.l);
        let qt = crate::tensor::HostTensor::from_bytes(
            &qname,
            DType::I32,
            vec![f.l.n, f.l.words()],
            words.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )?;
        let st = crate::tensor::HostTensor::from_bytes(
            &sname,
            DType::F32,
            vec![f.l.n, 1],
            f.scales.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )?;
        let qv = super::add_constant(p, &qname, qt);
        let sv = super::add_constant(p, &sname, st);
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
    for v in freed {
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
