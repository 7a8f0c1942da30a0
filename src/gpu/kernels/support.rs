//! A static answer to "would this node run on the GPU?" from its target and the dtypes of
//! its tensor inputs and outputs (what `pt2web check --device gpu` reports from the meta
//! backend). Families registered in `table.rs` answer from their entry's dtypes; for the
//! others this file follows the dtype rules of their kernels; a kernel can still
//! decline a node for its arguments (a transposed convolution, a rank above 8, an int64
//! constant outside int32), which only a run shows (`pt2web run --json` counts fallbacks).
//! f16 nodes are answered for an adapter with `shader-f16` (without it they fall back).

use super::{lookup, BinaryOp, GpuOp, UnaryOp};
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

/// The int dtypes held on the GPU (as i32 words; uint8 / int8 / int16 wrap on store).
fn int(d: DType) -> bool {
    matches!(
        d,
        DType::I32 | DType::I64 | DType::U8 | DType::I8 | DType::I16
    )
}
/// The dtypes of index tensors the gathers and scatters take.
fn index(d: DType) -> bool {
    matches!(d, DType::I32 | DType::I64)
}
/// The dtypes the sorting and scatter kernels take as values.
fn sortable(d: DType) -> bool {
    gpu_dtype(d) && !matches!(d, DType::U8 | DType::I8 | DType::I16)
}
fn int_like(d: DType) -> bool {
    int(d) || d == DType::Bool
}
fn all(ds: &[DType], f: impl Fn(DType) -> bool) -> bool {
    ds.iter().all(|&d| f(d))
}
fn names(ds: &[DType]) -> String {
    let v: Vec<String> = ds.iter().map(|d| d.to_string()).collect();
    v.join(", ")
}

/// Does the GPU backend run `target` with tensor inputs of `inputs` dtypes and outputs of
/// `outputs` dtypes (both in schema order)?
pub fn gpu_supports(target: &str, inputs: &[DType], outputs: &[DType]) -> Support {
    if let Some(ok) = with_readback(target, inputs, outputs) {
        return verdict(ok, inputs, outputs);
    }
    if let Some(e) = super::table::gpu_table().get(target) {
        return verdict(
            registered_serves(target, e, inputs, outputs),
            inputs,
            outputs,
        );
    }
    let Some(op) = lookup(target) else {
        return Support::NoKernel;
    };
    if let Some(s) = f16_form(target, op, inputs, outputs) {
        return s;
    }
    let f32 = |d: DType| d == DType::F32;
    let (name, overload) = target.rsplit_once('.').unwrap_or((target, ""));
    let ok = match op {
        GpuOp::View => return Support::View,
        GpuOp::Unary(u) => {
            (all(inputs, f32) && all(outputs, f32))
                || (matches!(
                    u,
                    UnaryOp::Neg
                        | UnaryOp::Abs
                        | UnaryOp::Sign
                        | UnaryOp::Square
                        | UnaryOp::Relu
                        | UnaryOp::Floor
                        | UnaryOp::Ceil
                        | UnaryOp::Trunc
                ) && all(inputs, int)
                    && outputs.first() == inputs.first())
        }
        GpuOp::Binary(b) => {
            let int_op = matches!(
                b,
                BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Maximum
                    | BinaryOp::Minimum
                    | BinaryOp::Rsub
                    | BinaryOp::Pow
            ) || (b == BinaryOp::Div
                && (overload.starts_with("Tensor_mode") || overload.starts_with("Scalar_mode")));
            (all(inputs, f32) && all(outputs, f32))
                // int and bool operands promoted to an f32 result
                || (outputs == [DType::F32] && all(inputs, |d| f32(d) || int_like(d)))
                || (int_op
                    && inputs.first().is_some_and(|&d| int_like(d))
                    && all(inputs, int_like)
                    && all(outputs, int))
        }
        GpuOp::Compare(_) => {
            all(outputs, |d| d == DType::Bool)
                && (all(inputs, f32)
                    || (inputs.first().is_some_and(|&d| int_like(d)) && all(inputs, int_like)))
        }
        GpuOp::Custom(_) => custom(name, inputs, outputs),
    };
    verdict(ok, inputs, outputs)
}

/// A registered entry's answer: its dtypes, or (for an op that writes no input) its f32
/// dtypes on f32 conversions of the f16 tensors, as `kernels::run` retries a kernel that
/// declines f16.
fn registered_serves(
    target: &str,
    e: &super::table::GpuEntry,
    inputs: &[DType],
    outputs: &[DType],
) -> bool {
    if (e.serves)(inputs, outputs) {
        return true;
    }
    let (op, overload) = target.rsplit_once('.').unwrap_or((target, ""));
    let writes_input = op.ends_with('_') || overload.starts_with("out");
    let up = |ds: &[DType]| -> Vec<DType> {
        ds.iter()
            .map(|&d| if d == DType::F16 { DType::F32 } else { d })
            .collect()
    };
    let any_f16 = inputs.iter().chain(outputs).any(|&d| d == DType::F16);
    any_f16 && !writes_input && (e.serves)(&up(inputs), &up(outputs))
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
        // The results are stacked by the GPU copy.
        "higher_order.map_impl" => return Some(all(outputs, gpu_dtype)),
        _ => {}
    }
    let (name, overload) = target.rsplit_once('.').unwrap_or((target, ""));
    let same_out = outputs.len() == 1 && Some(&outputs[0]) == inputs.first();
    Some(match (name, overload) {
        ("aten.item" | "aten._local_scalar_dense", "default") => true,
        ("aten.nonzero" | "aten.argwhere", "default") => {
            inputs.len() == 1 && gpu_dtype(inputs[0]) && outputs == [DType::I64]
        }
        ("aten.masked_select", "default") => {
            same_out && gpu_dtype(inputs[0]) && inputs[1..] == [DType::Bool]
        }
        // One boolean mask (integer indices: the gathers of `lookup`).
        ("aten.index" | "aten._unsafe_index", "Tensor") if inputs.get(1) == Some(&DType::Bool) => {
            same_out && gpu_dtype(inputs[0]) && inputs.len() == 2
        }
        ("aten.repeat_interleave", "self_Tensor") => {
            same_out && gpu_dtype(inputs[0]) && inputs.len() == 2 && int(inputs[1])
        }
        ("aten.repeat_interleave", "Tensor") => same_out && inputs.len() == 1 && int(inputs[0]),
        _ => return None,
    })
}

/// Nodes with f16 tensors (on an adapter with `shader-f16`; elsewhere they fall back)
/// answer as for f32: the kernels with f16 forms read f16, the others run on f32
/// conversions (kernels::run), except that an op writing into an input needs an f16 form
/// whose float tensors share one dtype (or one of the ops that may write f32 from f16).
fn f16_form(target: &str, op: GpuOp, inputs: &[DType], outputs: &[DType]) -> Option<Support> {
    if !inputs.iter().chain(outputs).any(|&d| d == DType::F16) || matches!(op, GpuOp::View) {
        return None;
    }
    let name = target.rsplit_once('.').map_or(target, |(n, _)| n);
    let has_f16 = matches!(op, GpuOp::Unary(_) | GpuOp::Binary(_) | GpuOp::Compare(_))
        || matches!(
            name,
            "aten.where"
                | "aten.clone"
                | "aten._to_copy"
                | "aten.to"
                | "aten.lift_fresh_copy"
                | "aten.mm"
                | "aten.bmm"
                | "aten.matmul"
                | "aten.addmm"
                | "aten.linear"
                | "aten.softmax"
                | "aten._softmax"
                | "aten.log_softmax"
                | "aten._log_softmax"
                | "aten.sum"
                | "aten.mean"
                | "aten.amax"
                | "aten.amin"
                | "aten.layer_norm"
                | "aten.native_layer_norm"
                | "aten.clamp"
                | "aten.gelu"
                | "aten.hardtanh"
                | "aten.leaky_relu"
                | "aten.elu"
                | "aten.softplus"
                | "aten.relu6"
                | "aten.scaled_dot_product_attention"
                | "aten._scaled_dot_product_attention_math"
                | "aten._scaled_dot_product_flash_attention_for_cpu"
        );
    let mixed_ok = matches!(
        name,
        "aten._to_copy"
            | "aten.to"
            | "aten.softmax"
            | "aten._softmax"
            | "aten.log_softmax"
            | "aten._log_softmax"
            | "aten.sum"
            | "aten.mean"
            | "aten.native_layer_norm"
            | "aten._scaled_dot_product_flash_attention_for_cpu"
    );
    let float = |d: &&DType| matches!(d, DType::F32 | DType::F16 | DType::F64 | DType::BF16);
    let mixed = inputs
        .iter()
        .chain(outputs)
        .filter(float)
        .any(|&d| d != DType::F16);
    // Without an f16 form the f32 kernel runs on f32 conversions (kernels::run), except
    // for an op that writes into an input.
    let (op_name, overload) = target.rsplit_once('.').unwrap_or((target, ""));
    let writes_input = op_name.ends_with('_') || overload.starts_with("out");
    if writes_input && (!has_f16 || (mixed && !mixed_ok)) {
        return Some(Support::Dtype(format!(
            "no f16 GPU kernel for inputs ({}) -> ({})",
            names(inputs),
            names(outputs)
        )));
    }
    let up = |ds: &[DType]| -> Vec<DType> {
        ds.iter()
            .map(|&d| if d == DType::F16 { DType::F32 } else { d })
            .collect()
    };
    Some(gpu_supports(target, &up(inputs), &up(outputs)))
}

fn custom(name: &str, inputs: &[DType], outputs: &[DType]) -> bool {
    let f32 = |d: DType| d == DType::F32;
    let first = inputs.first().copied();
    match name {
        "aten.max_pool1d_with_indices"
        | "aten.max_pool2d_with_indices"
        | "aten.max_pool3d_with_indices" => {
            inputs.len() == 1
                && (f32(inputs[0]) || int(inputs[0]))
                && outputs == [inputs[0], DType::I64]
        }
        // Max pooling of every int dtype (torch has no int max_pool1d), int64 average pooling.
        "aten.max_pool2d" | "aten.max_pool3d" => {
            inputs.len() == 1 && (f32(inputs[0]) || int(inputs[0])) && outputs == inputs
        }
        "aten.avg_pool1d" | "aten.avg_pool2d" | "aten.avg_pool3d" => {
            inputs.len() == 1 && matches!(inputs[0], DType::F32 | DType::I64) && outputs == inputs
        }
        // Nearest modes gather the words of any int dtype.
        "aten.upsample_nearest1d"
        | "aten.upsample_nearest2d"
        | "aten.upsample_nearest3d"
        | "aten._upsample_nearest_exact1d"
        | "aten._upsample_nearest_exact2d"
        | "aten._upsample_nearest_exact3d" => {
            first.is_some_and(|d| f32(d) || int(d)) && outputs.first() == first.as_ref()
        }
        "aten.embedding" => {
            inputs.len() == 2 && gpu_dtype(inputs[0]) && index(inputs[1]) && outputs == [inputs[0]]
        }
        "aten.index_select" | "aten.gather" => {
            inputs.len() == 2 && gpu_dtype(inputs[0]) && index(inputs[1]) && outputs == [inputs[0]]
        }
        // One index tensor, or several on adjacent dims (only a run can tell adjacency).
        "aten.index" | "aten._unsafe_index" => {
            inputs.len() >= 2
                && gpu_dtype(inputs[0])
                && all(&inputs[1..], index)
                && outputs == [inputs[0]]
        }
        // The scatter family (kernels/scatter.rs): `self`'s dtype in and out, integer
        // indices (bool masks and reductions of bools stay on the CPU: only a run shows).
        "aten.scatter"
        | "aten.scatter_"
        | "aten.scatter_add"
        | "aten.scatter_add_"
        | "aten.scatter_reduce"
        | "aten.scatter_reduce_"
        | "aten.index_add"
        | "aten.index_add_"
        | "aten.index_copy"
        | "aten.index_copy_"
        | "aten.index_fill"
        | "aten.index_fill_"
        | "aten.index_put"
        | "aten.index_put_"
        | "aten._unsafe_index_put"
        | "aten.take" => {
            first.is_some_and(sortable)
                && all(&inputs[1..], |d| Some(d) == first || index(d))
                && outputs.first() == first.as_ref()
        }
        // Sorting (kernels/sort.rs): values in the input's dtype, int64 indices.
        "aten.sort" | "aten.argsort" | "aten.msort" | "aten.topk" | "aten.kthvalue"
        | "aten.median" | "aten.nanmedian" => {
            inputs.len() == 1
                && first.is_some_and(sortable)
                && all(outputs, |d| Some(d) == first || d == DType::I64)
        }
        // Sequence and values both f32 or both integer; an integer sorter.
        "aten.searchsorted" | "aten.bucketize" => {
            inputs.len() >= 2
                && ((f32(inputs[0]) && f32(inputs[1])) || (index(inputs[0]) && index(inputs[1])))
                && all(&inputs[2..], index)
                && (outputs == [DType::I64] || outputs == [DType::I32])
        }
        "aten.cat" | "aten.concat" | "aten.concatenate" | "aten.stack" => {
            first.is_some_and(gpu_dtype)
                && all(inputs, |d| Some(d) == first)
                && outputs.first() == first.as_ref()
        }
        "aten.arange" => all(outputs, |d| gpu_dtype(d) && d != DType::Bool),
        "aten.linspace" | "aten.logspace" => outputs == [DType::F32],
        "aten.eye" | "aten.empty_strided" => all(outputs, gpu_dtype),
        "aten.full" | "aten.zeros" | "aten.ones" | "aten.empty" | "aten.new_full"
        | "aten.new_zeros" | "aten.new_ones" | "aten.new_empty" | "aten.full_like"
        | "aten.zeros_like" | "aten.ones_like" | "aten.empty_like" | "aten.scalar_tensor" => {
            all(outputs, gpu_dtype)
        }
        "aten.where" => {
            inputs.first() == Some(&DType::Bool)
                && outputs.len() == 1
                && gpu_dtype(outputs[0])
                && all(&inputs[1..], |d| d == outputs[0])
        }
        "aten.masked_fill_" => {
            inputs.len() >= 2
                && f32(inputs[0])
                && inputs[1] == DType::Bool
                && all(&inputs[2..], f32)
                && outputs == [DType::F32]
        }
        "aten.masked_fill" => {
            inputs.len() >= 2
                && gpu_dtype(inputs[0])
                && inputs[1] == DType::Bool
                && all(&inputs[2..], |d| d == inputs[0])
                && outputs == [inputs[0]]
        }
        "aten.isnan" | "aten.isinf" | "aten.isfinite" | "aten.signbit" => {
            (all(inputs, f32) || all(inputs, int)) && outputs == [DType::Bool]
        }
        "aten.pad"
        | "aten.constant_pad_nd"
        | "aten._pad_enum"
        | "aten._pad_circular"
        | "aten.reflection_pad1d"
        | "aten.reflection_pad2d"
        | "aten.reflection_pad3d"
        | "aten.replication_pad1d"
        | "aten.replication_pad2d"
        | "aten.replication_pad3d"
        | "aten.roll"
        | "aten.flip"
        | "aten.fliplr"
        | "aten.flipud"
        | "aten.rot90"
        | "aten.repeat"
        | "aten.tile"
        | "aten.repeat_interleave"
        | "aten.tril"
        | "aten.triu"
        | "aten.tril_"
        | "aten.triu_"
        | "aten.slice_scatter"
        | "aten.select_scatter"
        | "aten.diagonal_scatter"
        | "aten.as_strided_scatter" => {
            first.is_some_and(gpu_dtype)
                && all(inputs, |d| Some(d) == first)
                && outputs.first() == first.as_ref()
        }
        "aten.diff" => {
            first.is_some_and(|d| f32(d) || int(d))
                && all(inputs, |d| Some(d) == first)
                && outputs.first() == first.as_ref()
        }
        // Values in the input's dtype (f32 or int), int64 indices.
        "aten.max" | "aten.min" | "aten.argmax" | "aten.argmin" | "aten.cummax" | "aten.cummin"
        | "aten.aminmax" => {
            inputs.len() == 1
                && (f32(inputs[0]) || int(inputs[0]))
                && all(outputs, |d| d == inputs[0] || d == DType::I64)
        }
        "aten.prod" => {
            (all(inputs, f32) && all(outputs, f32)) || (all(inputs, int_like) && all(outputs, int))
        }
        "aten.count_nonzero" => all(inputs, f32) && outputs == [DType::I64],
        "aten.cumsum" | "aten.cumprod" | "aten.cumsum_" | "aten.cumprod_" => {
            (all(inputs, f32) && all(outputs, f32)) || (all(inputs, int_like) && all(outputs, int))
        }
        "aten.fill_" | "aten.copy_" => all(inputs, gpu_dtype) && all(outputs, gpu_dtype),
        "aten.clamp_min" | "aten.clamp_max" => {
            (all(inputs, f32) && all(outputs, f32))
                || (all(inputs, int) && inputs.len() == 1 && outputs == inputs)
        }
        "aten.clone"
        | "aten._to_copy"
        | "aten.lift_fresh_copy"
        | "aten.detach_copy"
        | "aten.alias_copy"
        | "aten.copy" => all(inputs, gpu_dtype) && all(outputs, gpu_dtype),
        "aten.sum" | "aten.amax" | "aten.amin" => {
            (all(inputs, f32) && all(outputs, f32))
                || (all(inputs, int_like)
                    && all(outputs, int)
                    && (name == "aten.sum" || all(inputs, int)))
        }
        "aten.floor_divide"
        | "aten.remainder"
        | "aten.__lshift__"
        | "aten.__rshift__"
        | "aten.bitwise_left_shift"
        | "aten.bitwise_right_shift" => all(inputs, int_like) && all(outputs, int),
        "aten.fmod" => {
            (all(inputs, f32) && all(outputs, f32)) || (all(inputs, int) && all(outputs, int))
        }
        "aten.clamp" => {
            (all(inputs, f32) && all(outputs, f32))
                || (all(inputs, int) && inputs.len() == 1 && outputs == inputs)
        }
        "aten.to" => all(inputs, gpu_dtype) && all(outputs, gpu_dtype),
        // Seeded int draws (src/gpu/random.rs).
        "aten.randperm" | "aten.randint" => {
            all(inputs, int) && (outputs == [DType::I64] || outputs == [DType::I32])
        }
        "aten.dropout"
        | "aten.dropout_"
        | "aten.feature_dropout"
        | "aten.feature_dropout_"
        | "aten.alpha_dropout"
        | "aten.alpha_dropout_" => true,
        // Of bools, of `x != 0` for f32 and ints; uint8 in, uint8 out (as torch).
        "aten.any" | "aten.all" => {
            (all(inputs, |d| f32(d) || int_like(d)) && outputs == [DType::Bool])
                || (inputs == [DType::U8] && outputs == [DType::U8])
        }
        "aten.bitwise_and" | "aten.bitwise_or" | "aten.bitwise_xor" | "aten.bitwise_not"
        | "aten.__and__" | "aten.__or__" | "aten.__xor__" => {
            (all(inputs, |d| d == DType::Bool) && outputs == [DType::Bool])
                || (all(inputs, int_like) && all(outputs, int))
        }
        "aten.logical_and" | "aten.logical_or" | "aten.logical_xor" | "aten.logical_not" => {
            all(inputs, gpu_dtype) && outputs == [DType::Bool]
        }
        // q, k, v in f32 (f16 computed in f32); the mask f32 or bool.
        "aten.scaled_dot_product_attention"
        | "aten._scaled_dot_product_attention_math"
        | "aten._scaled_dot_product_flash_attention_for_cpu" => {
            inputs.len() >= 3
                && all(&inputs[..3], f32)
                && all(&inputs[3..], |d| d == DType::F32 || d == DType::Bool)
                && all(outputs, f32)
        }
        // Batch norm: f32 data; the saved statistics are f32 too.
        _ => all(inputs, f32) && all(outputs, f32),
    }
}
