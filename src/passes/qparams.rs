//! Dynamic quantization's scales in float32 (`qparams`). torch's
//! `quantized_decomposed.choose_qparams(_symmetric).tensor` computes an activation's scale in
//! f32 and returns it widened to float64, a dtype WGSL lacks, so on the GPU the node and the
//! quantize / dequantize reading its scale would run on the CPU, a readback and an upload per
//! quantized layer and token. Where only `quantize_per_tensor.tensor` and
//! `dequantize_per_tensor.tensor` read the scale (as their `scale`), the node becomes
//! `pt2web.choose_qparams` with a float32 scale: the same value (f32 → f64 is exact), and
//! the readers compute the same from it (`1 / scale` in f64, then f32, on the CPU), so every
//! backend's results stay torch's and the GPU keeps dynamic quantization on the device.

use crate::dtype::DType;
use crate::ops::quantized::CHOOSE_QPARAMS_F32;
use crate::program::{Arg, Graph, ValueId, ValueKind};

/// The ops that may read the scale, as their `scale` argument.
const READERS: [&str; 2] = [
    "quantized_decomposed.quantize_per_tensor.tensor",
    "quantized_decomposed.dequantize_per_tensor.tensor",
];

/// Rewrite the `choose_qparams` nodes of `g` whose scale only [`READERS`] read; how many.
pub(super) fn run(g: &mut Graph) -> usize {
    let outputs = super::output_values(g);
    let mut rewritten = 0;
    for i in 0..g.nodes.len() {
        let symmetric = match g.nodes[i].target.as_str() {
            "quantized_decomposed.choose_qparams.tensor" => false,
            "quantized_decomposed.choose_qparams_symmetric.tensor" => true,
            _ => continue,
        };
        let Some(&Arg::Tensor(scale)) = g.nodes[i].outputs.first() else {
            continue;
        };
        if outputs.contains(&scale) || !read_as_scale_only(g, scale) {
            continue;
        }
        let n = &mut g.nodes[i];
        n.target = CHOOSE_QPARAMS_F32.to_string();
        n.inputs
            .push(("symmetric".to_string(), Arg::Bool(symmetric)));
        if let ValueKind::Tensor { dtype, .. } = &mut g.values[scale].kind {
            *dtype = DType::F32;
        }
        rewritten += 1;
    }
    rewritten
}

/// Whether every read of `v` is the `scale` of a [`READERS`] node.
fn read_as_scale_only(g: &Graph, v: ValueId) -> bool {
    let mut ids = Vec::new();
    g.nodes.iter().all(|n| {
        n.inputs.iter().all(|(name, a)| {
            ids.clear();
            a.values(&mut ids);
            !ids.contains(&v)
                || (READERS.contains(&n.target.as_str()) && name == "scale" && *a == Arg::Tensor(v))
        })
    })
}
