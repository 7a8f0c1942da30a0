//! A static answer to "would this node run on the GPU?" from its target and the dtypes of
//! its tensor inputs and outputs (what `pt2web check --device gpu` reports from the meta
//! backend), read from the entry the kernel's family registered (`table.rs`) with the
//! dtypes it serves; a kernel can still decline a node for its arguments (a transposed convolution, a rank above 8, an int64
//! constant outside int32), which only a run shows (`pt2web run --json` counts fallbacks).
//! f16 nodes are answered for an adapter with `shader-f16` (without it they fall back).

use super::complex::{complex_entry, complex_table};
use super::lookup::entry;
use super::table::{all, int, F16};
use super::GpuOp;
use crate::dtype::DType;
use crate::gpu::store::gpu_dtype;

/// Where a node runs on the GPU backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// A GPU kernel accepts these dtypes.
    Gpu,
    /// Metadata only (a view of its input's GPU buffer).
    View,
    /// No GPU kernel for the target: the CPU kernel runs.
    NoKernel,
    /// A GPU kernel exists but not for these dtypes (the reason).
    Dtype(String),
}

impl Support {
    pub fn on_gpu(&self) -> bool {
        matches!(self, Support::Gpu | Support::View)
    }
}

fn names(ds: &[DType]) -> String {
    let v: Vec<String> = ds.iter().map(|d| d.to_string()).collect();
    v.join(", ")
}

/// Does the GPU backend run `target` with tensor inputs of `inputs` dtypes and outputs of
/// `outputs` dtypes (both in schema order)?
///
/// Nodes with f16 tensors (on an adapter with `shader-f16`; elsewhere they fall back) answer
/// as for f32: the kernels with f16 forms read f16, the others run on f32 conversions
/// (`kernels::run`), except that an op writing into an input needs an f16 form
/// ([`F16`]) whose float tensors share one dtype, or one that mixes them.
pub fn gpu_supports(target: &str, inputs: &[DType], outputs: &[DType]) -> Support {
    // Nodes with complex tensors run the complex table's kernels (the executor decides
    // the same way: `crate::ops::touches_complex`).
    if inputs.iter().chain(outputs).any(|d| d.is_complex()) {
        return complex_support(target, inputs, outputs);
    }
    if let Some(ok) = with_readback(target, inputs, outputs) {
        return verdict(ok, inputs, outputs);
    }
    let Some(e) = entry(target) else {
        return Support::NoKernel;
    };
    if matches!(e.op, GpuOp::View) {
        return Support::View;
    }
    if !inputs.iter().chain(outputs).any(|&d| d == DType::F16) {
        return verdict((e.serves)(inputs, outputs), inputs, outputs);
    }
    let (op, overload) = target.rsplit_once('.').unwrap_or((target, ""));
    let writes_input = op.ends_with('_') || overload.starts_with("out");
    let float = |d: &&DType| matches!(d, DType::F32 | DType::F16 | DType::F64 | DType::BF16);
    let mixed = inputs
        .iter()
        .chain(outputs)
        .filter(float)
        .any(|&d| d != DType::F16);
    if writes_input && (e.f16 == F16::Converted || (mixed && e.f16 == F16::Native)) {
        return Support::Dtype(format!(
            "no f16 GPU kernel for inputs ({}) -> ({})",
            names(inputs),
            names(outputs)
        ));
    }
    let up = |ds: &[DType]| -> Vec<DType> {
        ds.iter()
            .map(|&d| if d == DType::F16 { DType::F32 } else { d })
            .collect()
    };
    verdict((e.serves)(&up(inputs), &up(outputs)), inputs, outputs)
}

/// Whether the GPU backend has a path for `target` at all, for some dtypes: a kernel, a view,
/// a readback (control flow, `item`, data-dependent sizes), or a load-time decomposition
/// into ops that have one (src/passes/decompose/). A decomposed node whose sizes are
/// symbolic is left to the per-call decomposition, which runs on the CPU kernels.
pub fn has_gpu_path(target: &str) -> bool {
    with_readback(target, &[], &[]).is_some()
        || entry(target).is_some()
        || crate::passes::decompose::decomposes(target)
        || complex_table().get(target).is_some()
}

/// [`gpu_supports`] for a node with complex tensors: complex64 through the complex table
/// (`kernels/complex.rs`); complex128 stays on the CPU (WGSL has no f64).
fn complex_support(target: &str, inputs: &[DType], outputs: &[DType]) -> Support {
    let all = || format!("({}) -> ({})", names(inputs), names(outputs));
    if inputs
        .iter()
        .chain(outputs)
        .any(|&d| d != DType::Complex64 && d.is_complex())
    {
        return Support::Dtype(format!(
            "complex128 and complex32 run on the CPU (WGSL has no f64 or complex32 kernels): {}",
            all()
        ));
    }
    match complex_entry(target) {
        Some(e) if matches!(e.op, GpuOp::View) => Support::View,
        Some(e) => verdict((e.serves)(inputs, outputs), inputs, outputs),
        None if entry(target).is_some() => {
            Support::Dtype(format!("no complex64 GPU kernel for {target}: {}", all()))
        }
        None => Support::NoKernel,
    }
}

/// GPU, or the dtypes as the reason why not.
fn verdict(ok: bool, inputs: &[DType], outputs: &[DType]) -> Support {
    if ok {
        Support::Gpu
    } else {
        Support::Dtype(format!(
            "no GPU kernel for inputs ({}) -> ({})",
            names(inputs),
            names(outputs)
        ))
    }
}

/// The nodes the executor runs on the GPU with a readback (src/gpu/dynamic.rs): control
/// flow (its subgraphs' nodes answer for themselves), `item`, and data-dependent sizes.
fn with_readback(target: &str, inputs: &[DType], outputs: &[DType]) -> Option<bool> {
    match target {
        "higher_order.cond" | "higher_order.while_loop" => return Some(true),
        // One generated kernel, or its body's nodes (which answer for themselves).
        crate::ops::elementwise::fused::TARGET => return Some(true),
        // The producer's kernel, or its subgraphs' nodes (which answer for themselves).
        crate::ops::elementwise::epilogue::TARGET => return Some(true),
        // The streaming attention kernel, or its body's nodes.
        crate::ops::attention::fused::TARGET => return Some(true),
        // The results are stacked by the GPU copy.
        "higher_order.map_impl" | "higher_order.scan" => return Some(all(outputs, gpu_dtype)),
        _ => {}
    }
    let (name, overload) = target.rsplit_once('.').unwrap_or((target, ""));
    let same_out = outputs.len() == 1 && Some(&outputs[0]) == inputs.first();
    Some(match (name, overload) {
        ("aten.item" | "aten._local_scalar_dense", "default") => true,
        ("aten._assert_async", "default" | "msg") => true,
        ("aten.nonzero" | "aten.argwhere", "default") => {
            inputs.len() == 1 && gpu_dtype(inputs[0]) && outputs == [DType::I64]
        }
        ("aten.masked_select", "default") => {
            same_out && gpu_dtype(inputs[0]) && inputs[1..] == [DType::Bool]
        }
        ("aten.masked_scatter", "default") => {
            same_out && gpu_dtype(inputs[0]) && inputs[1..] == [DType::Bool, inputs[0]]
        }
        // One boolean mask (integer indices: the gathers of `lookup`).
        ("aten.index" | "aten._unsafe_index", "Tensor") if inputs.get(1) == Some(&DType::Bool) => {
            same_out && gpu_dtype(inputs[0]) && inputs.len() == 2
        }
        ("aten.repeat_interleave", "self_Tensor") => {
            same_out && gpu_dtype(inputs[0]) && inputs.len() == 2 && int(inputs[1])
        }
        ("aten.repeat_interleave", "Tensor") => same_out && inputs.len() == 1 && int(inputs[0]),
        // Unweighted int64 counts, or f32 sums of f32 weights (f64 ones stay on the CPU;
        // an empty input gives int64 zeros, weighted or not).
        ("aten.bincount", "default") => match inputs {
            [x] => int(*x) && outputs == [DType::I64],
            [x, DType::F32] => int(*x) && matches!(outputs, [DType::F32 | DType::I64]),
            _ => false,
        },
        // The GPU sort's key dtypes (src/gpu/kernels/unique.rs): values, int64 inverse and counts.
        (name, "default") if super::unique::TARGETS.contains(&name) => {
            inputs.len() == 1
                && super::unique::serves(inputs[0])
                && outputs.first() == inputs.first()
                && all(&outputs[1..], |d| d == DType::I64)
        }
        _ => return None,
    })
}
