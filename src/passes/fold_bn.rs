//! Batch-norm folding: an inference batch norm (`_native_batch_norm_legit_no_training`, or
//! `batch_norm` with `training=False`) right after a convolution whose weights are state is
//! folded into that convolution's weight and bias, computed once when the session is made:
//!
//! ```text
//! s  = gamma / sqrt(running_var + eps)          (per output channel)
//! W' = W * s                                    b' = (b - running_mean) * s + beta
//! ```
//!
//! (`torch.nn.utils.fusion.fuse_conv_bn_weights`' formula, in f64 then rounded once to the
//! weight's dtype, f32 or f16: an f16 model's convolutions and batch norms fold too). The
//! folded tensors are new constants of the program (`pt2web_folded.<conv node>.weight` /
//! `.bias`); the original parameters and buffers stay in its state, unread by the graph.
//!
//! It folds only what it can prove the same: f32 (or all f16) state tensors the program
//! never mutates, a
//! convolution (not transposed) read by nothing but the batch norm, whose other outputs
//! nothing reads (its result may be the graph's output: the convolution's then is). The result differs from the
//! unfolded graph by float rounding only.

use super::{use_counts, FOLDED_PREFIX};
use crate::dtype::DType;
use crate::program::{Arg, InputKind, Program, ValueId};
use crate::tensor::HostTensor;
use std::collections::{BTreeSet, HashMap};

/// Fold the batch norms of `p`'s graph; how many nodes went.
pub(super) fn run(p: &mut Program) -> usize {
    if super::noop::writes_in_place(&p.graph) {
        return 0;
    }
    // Placeholders bound to state: value -> state name.
    let mut state_of: HashMap<ValueId, String> = HashMap::new();
    for (spec, a) in p.inputs.iter().zip(&p.graph.inputs) {
        let name = match &spec.kind {
            InputKind::Parameter { name }
            | InputKind::Buffer { name, .. }
            | InputKind::Constant { name } => name,
            _ => continue,
        };
        if let Arg::Tensor(v) = a {
            state_of.insert(*v, name.clone());
        }
    }
    let mutated = p.mutated_state();
    let graph_outputs = super::output_values(&p.graph);
    let uses = use_counts(&p.graph);
    let mut folded = 0;
    let mut i = 0;
    while i < p.graph.nodes.len() {
        match fold_at(p, i, &state_of, &mutated, &graph_outputs, &uses) {
            Some(()) => folded += 1,
            None => i += 1,
        }
    }
    folded
}

/// The state tensor a placeholder argument names, with its values as f32 (None: not f32 or
/// f16 state the program leaves alone).
fn state_values(
    p: &Program,
    a: Option<&Arg>,
    state_of: &HashMap<ValueId, String>,
    mutated: &BTreeSet<String>,
) -> Option<(String, HostTensor, Vec<f32>)> {
    let Some(Arg::Tensor(v)) = a else {
        return None;
    };
    let name = state_of.get(v)?;
    if mutated.contains(name) {
        return None;
    }
    let e = p.state.get(name)?;
    if !matches!(e.tensor.dtype, DType::F32 | DType::F16) {
        return None;
    }
    let t = crate::cpu::Tensor::from_host(&e.tensor).ok()?;
    Some((
        name.clone(),
        e.tensor.clone(),
        t.contiguous().to_vec::<f32>(),
    ))
}

/// Fold the batch norm at node `i` into the convolution before it, if it is one to fold.
fn fold_at(
    p: &mut Program,
    i: usize,
    state_of: &HashMap<ValueId, String>,
    mutated: &BTreeSet<String>,
    graph_outputs: &[ValueId],
    uses: &[usize],
) -> Option<()> {
    let g = &p.graph;
    let bn = &g.nodes[i];
    let (eps, train) = match bn.target.as_str() {
        "aten._native_batch_norm_legit_no_training.default" => (number(bn.arg("eps")?)?, false),
        "aten.batch_norm.default" => (
            number(bn.arg("eps")?)?,
            !matches!(bn.arg("training"), Some(Arg::Bool(false))),
        ),
        _ => return None,
    };
    if train {
        return None;
    }
    let Some(Arg::Tensor(x)) = bn.arg("input") else {
        return None;
    };
    let x = *x;
    // The batch norm's other results (mean, rstd) must be unread.
    let Some(Arg::Tensor(y)) = bn.outputs.first() else {
        return None;
    };
    let y = *y;
    for o in &bn.outputs[1..] {
        let mut ids = Vec::new();
        o.values(&mut ids);
        if ids
            .iter()
            .any(|&v| uses.get(v).copied().unwrap_or(0) > 0 || graph_outputs.contains(&v))
        {
            return None;
        }
    }
    if uses.get(x) != Some(&1) || graph_outputs.contains(&x) {
        return None;
    }
    let c = g.nodes[..i]
        .iter()
        .rposition(|n| n.outputs.first() == Some(&Arg::Tensor(x)))?;
    let conv = &g.nodes[c];
    // (`convolution` always has the argument; the training IR's `conv2d` leaves out a bias
    // that is `None`.)
    match conv.target.as_str() {
        "aten.convolution.default" => {
            if !matches!(conv.arg("transposed"), Some(Arg::Bool(false))) {
                return None;
            }
        }
        "aten.conv1d.default" | "aten.conv2d.default" | "aten.conv3d.default" => {}
        _ => return None,
    }
    let (_, w_host, w) = state_values(p, conv.arg("weight"), state_of, mutated)?;
    // Every tensor in the weight's dtype (an f16 model folds into f16 tensors).
    let dtype = w_host.dtype;
    let out_ch = *w_host.sizes.first()?;
    if out_ch == 0 || w.len() % out_ch != 0 {
        return None;
    }
    let per = |a: Option<&Arg>| -> Option<Vec<f32>> {
        let (_, h, v) = state_values(p, a, state_of, mutated)?;
        (h.sizes == [out_ch] && h.dtype == dtype).then_some(v)
    };
    let (gamma, beta, mean, var) = (
        per(bn.arg("weight"))?,
        per(bn.arg("bias"))?,
        per(bn.arg("running_mean"))?,
        per(bn.arg("running_var"))?,
    );
    let bias = match conv.arg("bias") {
        None | Some(Arg::None) | Some(Arg::OptTensor(None)) => vec![0.0; out_ch],
        a => per(a)?,
    };
    // The folded tensors, in f64 then rounded once to the weight's dtype.
    let scale: Vec<f64> = (0..out_ch)
        .map(|o| gamma[o] as f64 / (var[o] as f64 + eps).sqrt())
        .collect();
    let k = w.len() / out_ch;
    let w2: Vec<f64> = w
        .iter()
        .enumerate()
        .map(|(j, &v)| v as f64 * scale[j / k])
        .collect();
    let b2: Vec<f64> = (0..out_ch)
        .map(|o| (bias[o] as f64 - mean[o] as f64) * scale[o] + beta[o] as f64)
        .collect();
    let base = format!("{FOLDED_PREFIX}{}", conv.name);
    let w_name = format!("{base}.weight");
    let b_name = format!("{base}.bias");
    if p.state.contains_key(&w_name) || p.state.contains_key(&b_name) {
        return None;
    }
    let host = |name: &str, sizes: Vec<usize>, v: &[f64]| -> Option<HostTensor> {
        let bytes: Vec<u8> = match dtype {
            DType::F16 => v
                .iter()
                .flat_map(|&x| half::f16::from_f64(x).to_le_bytes())
                .collect(),
            _ => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
        };
        HostTensor::from_bytes(name, dtype, sizes, bytes).ok()
    };
    let w_t = host(&w_name, w_host.sizes.clone(), &w2)?;
    let b_t = host(&b_name, vec![out_ch], &b2)?;
    // New placeholders for the folded constants.
    let wv = super::add_constant(p, &w_name, w_t);
    let bv = super::add_constant(p, &b_name, b_t);
    let conv = &mut p.graph.nodes[c];
    if conv.arg("bias").is_none() {
        let at = conv.inputs.iter().position(|(n, _)| n == "weight")? + 1;
        conv.inputs
            .insert(at, ("bias".to_string(), Arg::OptTensor(Some(bv))));
    }
    for (n, a) in &mut conv.inputs {
        match n.as_str() {
            "weight" => *a = Arg::Tensor(wv),
            "bias" => *a = Arg::OptTensor(Some(bv)),
            _ => {}
        }
    }
    // Reads of the batch norm's result (and the graph's output, if it is one) read the
    // convolution's.
    p.graph.nodes.remove(i);
    for n in &mut p.graph.nodes[i..] {
        for (_, a) in &mut n.inputs {
            super::noop::rename(a, y, x);
        }
    }
    for a in &mut p.graph.outputs {
        super::noop::rename(a, y, x);
    }
    Some(())
}

fn number(a: &Arg) -> Option<f64> {
    match a {
        Arg::Float(f) => Some(*f),
        Arg::Int(i) => Some(*i as f64),
        _ => None,
    }
}
