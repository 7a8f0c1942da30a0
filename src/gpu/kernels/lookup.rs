//! Which `aten.*` targets have a GPU kernel ([`lookup`]), and the out-of-place kernel
//! behind an in-place elementwise target.

use super::*;

/// The targets with a GPU path: the families' registrations ([`super::table`]), then the
/// targets of the families not moved there yet.
pub fn lookup(target: &str) -> Option<GpuOp> {
    use GpuOp::*;
    if let Some(e) = super::table::gpu_table().get(target) {
        return Some(e.op);
    }
    let (op, overload) = target.rsplit_once('.').unwrap_or((target, ""));
    Some(match op {
        "aten.view"
        | "aten._unsafe_view"
        | "aten.reshape"
        | "aten.permute"
        | "aten.expand"
        | "aten.slice"
        | "aten.select"
        | "aten.unsqueeze"
        | "aten.squeeze"
        | "aten.t"
        | "aten.transpose"
        | "aten.alias"
        | "aten.detach"
        | "aten.as_strided"
        | "aten.unflatten"
        | "aten.flatten"
        | "aten.split"
        | "aten.split_with_sizes"
        | "aten.chunk"
        | "aten.unbind"
        | "aten.narrow"
        | "aten.movedim"
        | "aten.view_as"
        | "aten.expand_as"
        | "aten.contiguous"
        | "aten.numpy_T"
        | "aten.swapaxes"
        | "aten.detach_"
        | "aten.diagonal"
        | "aten.broadcast_to"
        | "aten.mT"
        | "aten.reshape_as"
        | "aten.tensor_split"
        | "aten.unfold" => View,
        // Metadata checks and symbolic-int arithmetic: the CPU kernel on placeholders, so
        // they neither flush the command buffer nor download anything.
        "aten._assert_tensor_metadata"
        | "aten.sym_size"
        | "aten.sym_stride"
        | "aten.sym_numel"
        | "aten.sym_storage_offset"
        | "aten._assert_scalar"
        | "aten.sym_constrain_range_for_size"
        | "_operator"
        | "math" => View,
        "torch" if overload.starts_with("sym_") || overload.starts_with("_sym_") => View,
        "aten.relu" => Unary(UnaryOp::Relu),
        "aten.sigmoid" => Unary(UnaryOp::Sigmoid),
        "aten.tanh" => Unary(UnaryOp::Tanh),
        "aten.exp" => Unary(UnaryOp::Exp),
        "aten.log" => Unary(UnaryOp::Log),
        "aten.sqrt" => Unary(UnaryOp::Sqrt),
        "aten.rsqrt" => Unary(UnaryOp::Rsqrt),
        "aten.abs" => Unary(UnaryOp::Abs),
        "aten.neg" => Unary(UnaryOp::Neg),
        "aten.silu" => Unary(UnaryOp::Silu),
        "aten.sin" => Unary(UnaryOp::Sin),
        "aten.cos" => Unary(UnaryOp::Cos),
        "aten.reciprocal" => Unary(UnaryOp::Reciprocal),
        "aten.erf" => Unary(UnaryOp::Erf),
        "aten.floor" => Unary(UnaryOp::Floor),
        "aten.ceil" => Unary(UnaryOp::Ceil),
        "aten.hardsigmoid" => Unary(UnaryOp::Hardsigmoid),
        "aten.hardswish" => Unary(UnaryOp::Hardswish),
        "aten.sign" => Unary(UnaryOp::Sign),
        "aten.square" => Unary(UnaryOp::Square),
        "aten.log1p" | "aten.special_log1p" => Unary(UnaryOp::Log1p),
        "aten.expm1" | "aten.special_expm1" => Unary(UnaryOp::Expm1),
        "aten.trunc" | "aten.fix" => Unary(UnaryOp::Trunc),
        "aten.frac" => Unary(UnaryOp::Frac),
        "aten.atan" | "aten.arctan" => Unary(UnaryOp::Atan),
        "aten.tan" => Unary(UnaryOp::Tan),
        "aten.sinh" => Unary(UnaryOp::Sinh),
        "aten.cosh" => Unary(UnaryOp::Cosh),
        "aten.asin" | "aten.arcsin" => Unary(UnaryOp::Asin),
        "aten.acos" | "aten.arccos" => Unary(UnaryOp::Acos),
        "aten.asinh" | "aten.arcsinh" => Unary(UnaryOp::Asinh),
        "aten.acosh" | "aten.arccosh" => Unary(UnaryOp::Acosh),
        "aten.atanh" | "aten.arctanh" => Unary(UnaryOp::Atanh),
        "aten.erfc" | "aten.special_erfc" => Unary(UnaryOp::Erfc),
        "aten.erfinv" | "aten.special_erfinv" => Unary(UnaryOp::Erfinv),
        "aten.log10" => Unary(UnaryOp::Log10),
        "aten.log2" => Unary(UnaryOp::Log2),
        "aten.exp2" => Unary(UnaryOp::Exp2),
        "aten.sgn" => Unary(UnaryOp::Sign),
        "aten.mish" => Unary(UnaryOp::Mish),
        "aten.log_sigmoid" => Unary(UnaryOp::LogSigmoid),
        "aten.round" | "aten.logit" | "aten.nan_to_num" | "aten.threshold" | "aten.hardshrink"
        | "aten.softshrink" | "aten.celu" | "aten.selu" | "aten.clamp_min" | "aten.clamp_max" => {
            Custom(elementwise_args::unary_args)
        }
        "aten.fmod" if overload == "Scalar" => Custom(elementwise_args::unary_args),
        "aten.pow" if overload == "Scalar" => Custom(elementwise_args::pow_scalar),
        "aten.fmod" | "aten.lerp" | "aten.logaddexp" if overload != "out" => {
            Custom(elementwise_args::binary_named)
        }
        "aten.prelu" | "aten._prelu_kernel" => Custom(elementwise_args::prelu),
        "aten.glu" => Custom(elementwise_args::glu),
        "aten.isnan" | "aten.isinf" | "aten.isfinite" | "aten.signbit" => {
            Custom(elementwise_args::predicate)
        }
        "aten.isposinf" | "aten.isneginf" if overload == "default" => {
            Custom(elementwise_args::predicate)
        }
        "aten.rrelu" | "aten.rrelu_with_noise_functional" if overload == "default" => {
            Custom(elementwise_args::rrelu_eval)
        }
        "aten.masked_fill" if overload != "out" => Custom(fill::masked_fill),
        "aten.where" if overload.starts_with("Scalar") => Custom(fill::where_scalar),
        "aten.fill_" if overload == "Scalar" => Custom(fill::fill_),
        "aten.zero_" if overload == "default" => Custom(fill::fill_),
        "aten.copy_" if overload == "default" => Custom(fill::copy_),
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
            if overload == "default" =>
        {
            Custom(shape::pad)
        }
        "aten.roll" => Custom(shape::roll),
        "aten.flip" | "aten.fliplr" | "aten.flipud" => Custom(shape::flip),
        "aten.rot90" => Custom(shape::rot90),
        "aten.repeat" | "aten.tile" => Custom(shape::repeat),
        "aten.repeat_interleave" if overload == "self_int" => Custom(shape::repeat_interleave),
        "aten.tril" | "aten.triu" | "aten.tril_" | "aten.triu_" if overload == "default" => {
            Custom(shape::tri)
        }
        "aten.slice_scatter"
        | "aten.select_scatter"
        | "aten.diagonal_scatter"
        | "aten.as_strided_scatter"
            if overload == "default" =>
        {
            Custom(shape::scatter)
        }
        "aten.diff" if overload == "default" => Custom(shape::diff),
        "aten.var"
        | "aten.std"
        | "aten.var_mean"
        | "aten.std_mean"
        | "aten.logsumexp"
        | "aten.linalg_vector_norm"
            if overload != "out" =>
        {
            Custom(reduce::stats)
        }
        "aten.prod" if overload == "dim_int" || overload == "default" => Custom(reduce::stats),
        "aten.max" | "aten.min" if overload == "default" || overload == "dim" => {
            Custom(reduce::extreme)
        }
        "aten.argmax" | "aten.argmin" | "aten.aminmax" if overload == "default" => {
            Custom(reduce::extreme)
        }
        "aten.count_nonzero" if overload != "out" => Custom(reduce::count_nonzero),
        "aten.group_norm" | "aten.native_group_norm" | "aten.instance_norm"
            if overload == "default" =>
        {
            Custom(reduce::group_norm)
        }
        "aten.rms_norm" | "aten._fused_rms_norm" if overload == "default" => {
            Custom(reduce::rms_norm)
        }
        "aten.cumsum" | "aten.cumprod" | "aten.cummax" | "aten.cummin" | "aten.cumsum_"
        | "aten.cumprod_" | "aten.logcumsumexp"
            if overload == "default" =>
        {
            Custom(reduce::scan)
        }
        "aten.gelu" | "aten.clamp" | "aten.clip" | "aten.hardtanh" | "aten.leaky_relu"
        | "aten.elu" | "aten.softplus" | "aten.relu6" => Custom(unary_with_args),
        "aten.clone"
        | "aten._to_copy"
        | "aten.lift_fresh_copy"
        | "aten.detach_copy"
        | "aten.alias_copy"
        | "aten.copy" => Custom(copy),
        "aten.add" if overload != "out" => Binary(BinaryOp::Add),
        "aten.sub" if overload != "out" => Binary(BinaryOp::Sub),
        "aten.mul" if overload != "out" => Binary(BinaryOp::Mul),
        "aten.div"
            if matches!(
                overload,
                "Tensor" | "Scalar" | "Tensor_mode" | "Scalar_mode"
            ) =>
        {
            Binary(BinaryOp::Div)
        }
        "aten.maximum" => Binary(BinaryOp::Maximum),
        "aten.minimum" => Binary(BinaryOp::Minimum),
        "aten.max" if overload == "other" => Binary(BinaryOp::Maximum),
        "aten.min" if overload == "other" => Binary(BinaryOp::Minimum),
        "aten.fmax" | "aten.fmin" | "aten.atan2" | "aten.arctan2" | "aten.hypot" | "aten.xlogy"
            if overload != "out" =>
        {
            Custom(elementwise_args::binary_named)
        }
        "aten.addcmul" | "aten.addcdiv" if overload == "default" => {
            Custom(elementwise_args::addcmul)
        }
        "aten.pow" if overload != "Scalar" => Binary(BinaryOp::Pow),
        "aten.rsub" => Binary(BinaryOp::Rsub),
        "aten.eq" => Compare(CompareOp::Eq),
        "aten.ne" => Compare(CompareOp::Ne),
        "aten.lt" => Compare(CompareOp::Lt),
        "aten.le" => Compare(CompareOp::Le),
        "aten.gt" => Compare(CompareOp::Gt),
        "aten.ge" => Compare(CompareOp::Ge),
        "aten.where" if overload == "self" => Custom(where_),
        "aten.mm"
        | "aten.bmm"
        | "aten.addmm"
        | "aten.matmul"
        | "aten.mv"
        | "aten.addmv"
        | "aten.addmv_"
        | "aten.dot"
        | "aten.vdot"
        | "aten.outer"
        | "aten.ger"
        | "aten.addr"
        | "aten.addr_"
        | "aten.baddbmm"
        | "aten.baddbmm_"
        | "aten.addbmm"
        | "aten.addbmm_"
        | "aten.addmm_"
        | "aten.linalg_multi_dot"
        | "aten.chain_matmul" => Custom(linalg::product),
        "aten.einsum" if overload == "default" => Custom(linalg::einsum),
        "aten.tensordot" if overload == "default" => Custom(linalg::tensordot),
        "aten.inner" if overload == "default" => Custom(linalg::inner),
        "aten._trilinear" if overload == "default" => Custom(linalg::trilinear),
        "aten.bilinear" if overload == "default" => Custom(linalg::bilinear),
        "aten.linear" => Custom(linear),
        "aten._softmax" | "aten.softmax" | "aten._log_softmax" | "aten.log_softmax" => {
            Custom(softmax)
        }
        "aten._safe_softmax" if overload == "default" => Custom(softmax),
        "aten.sum" | "aten.mean" | "aten.amax" | "aten.amin" | "aten.any" | "aten.all" => {
            Custom(reduce)
        }
        "aten.nansum" | "aten.nanmean" if overload == "default" => Custom(reduce),
        // Seeded random ops: the CPU generator's exact streams (src/gpu/random.rs).
        "aten.rand"
        | "aten.rand_like"
        | "aten.randn"
        | "aten.randn_like"
        | "aten.uniform"
        | "aten.normal_functional" => Custom(crate::gpu::random::rand),
        "aten.uniform_" | "aten.normal_" | "aten.exponential_" if overload == "default" => {
            Custom(rand_inplace)
        }
        "aten.exponential" if overload == "default" => Custom(crate::gpu::random::exponential),
        "aten.randperm" if overload == "default" => Custom(crate::gpu::random::randperm),
        "aten.normal" if overload == "Tensor_float" => Custom(normal_tensor_float),
        "aten.bernoulli" => Custom(crate::gpu::random::bernoulli),
        "aten.randint" if overload == "default" || overload == "low" => {
            Custom(crate::gpu::random::randint)
        }
        "aten.dropout" => Custom(crate::gpu::random::dropout),
        "aten.native_dropout" => Custom(crate::gpu::random::native_dropout),
        "aten.max_pool1d"
        | "aten.max_pool2d"
        | "aten.max_pool3d"
        | "aten.max_pool1d_with_indices"
        | "aten.max_pool2d_with_indices"
        | "aten.max_pool3d_with_indices"
        | "aten.avg_pool1d"
        | "aten.avg_pool2d"
        | "aten.avg_pool3d"
        | "aten.adaptive_avg_pool1d"
        | "aten.adaptive_avg_pool2d"
        | "aten.adaptive_avg_pool3d"
        | "aten._adaptive_avg_pool2d"
        | "aten._adaptive_avg_pool3d"
        | "aten.adaptive_max_pool1d"
        | "aten.adaptive_max_pool2d"
        | "aten.adaptive_max_pool3d" => Custom(pool::pool),
        "aten.upsample_nearest1d"
        | "aten.upsample_nearest2d"
        | "aten.upsample_nearest3d"
        | "aten._upsample_nearest_exact1d"
        | "aten._upsample_nearest_exact2d"
        | "aten._upsample_nearest_exact3d"
        | "aten.upsample_linear1d"
        | "aten.upsample_bilinear2d"
        | "aten.upsample_trilinear3d"
        | "aten.upsample_bicubic2d"
            if overload != "out" =>
        {
            Custom(resample::upsample)
        }
        "aten.grid_sampler" | "aten.grid_sampler_2d" if overload == "default" => {
            Custom(resample::grid_sampler)
        }
        "aten.pixel_shuffle" | "aten.pixel_unshuffle" if overload == "default" => {
            Custom(resample::pixel_shuffle)
        }
        "aten.embedding" => Custom(index::embedding),
        "aten.index_select" => Custom(index::index_select),
        "aten.gather" => Custom(index::gather),
        "aten.index" | "aten._unsafe_index" if overload == "Tensor" => {
            Custom(scatter::index_tensor)
        }
        "aten.scatter"
        | "aten.scatter_"
        | "aten.scatter_add"
        | "aten.scatter_add_"
        | "aten.scatter_reduce"
        | "aten.scatter_reduce_"
            if overload != "out" =>
        {
            Custom(scatter::scatter)
        }
        "aten.index_add" | "aten.index_add_" | "aten.index_copy" | "aten.index_copy_"
            if overload == "default" =>
        {
            Custom(scatter::index_slices)
        }
        "aten.index_fill" | "aten.index_fill_"
            if overload == "int_Scalar" || overload == "int_Tensor" =>
        {
            Custom(scatter::index_slices)
        }
        "aten.index_put" | "aten.index_put_" | "aten._unsafe_index_put"
            if overload == "default" =>
        {
            Custom(scatter::index_put)
        }
        "aten.take" if overload == "default" => Custom(scatter::take),
        "aten.sort" | "aten.argsort" if overload == "default" || overload == "stable" => {
            Custom(sort::sort)
        }
        "aten.msort" if overload == "default" => Custom(sort::sort),
        "aten.topk" if overload == "default" => Custom(sort::topk),
        "aten.kthvalue" if overload == "default" => Custom(sort::kthvalue),
        "aten.median" | "aten.nanmedian" if overload == "default" || overload == "dim" => {
            Custom(sort::median)
        }
        "aten.searchsorted" | "aten.bucketize" if overload == "Tensor" => {
            Custom(sort::searchsorted)
        }
        "aten.cat" | "aten.concat" | "aten.concatenate" | "aten.stack" => Custom(index::cat),
        "aten.hstack" | "aten.vstack" if overload == "default" => Custom(index::cat),
        "aten.type_as" if overload == "default" => Custom(elementwise_args::type_as),
        "aten.full" | "aten.zeros" | "aten.ones" | "aten.empty" | "aten.new_full"
        | "aten.new_zeros" | "aten.new_ones" | "aten.new_empty" | "aten.full_like"
        | "aten.zeros_like" | "aten.ones_like" | "aten.empty_like" | "aten.scalar_tensor" => {
            Custom(index::full)
        }
        "aten.arange" => Custom(index::arange),
        "aten.linspace" | "aten.logspace" if overload == "default" => Custom(index::linspace),
        "aten.eye" if overload == "default" || overload == "m" => Custom(index::eye),
        "aten.empty_strided" | "aten.empty_permuted" if overload == "default" => {
            Custom(index::empty_strided)
        }
        "aten.to" => Custom(ints::to),
        "aten.scaled_dot_product_attention"
        | "aten._scaled_dot_product_attention_math"
        | "aten._scaled_dot_product_flash_attention_for_cpu" => Custom(attention::sdpa),
        "aten.lstm" | "aten.gru" | "aten.rnn_tanh" | "aten.rnn_relu" if overload == "input" => {
            Custom(rnn::rnn)
        }
        "aten.lstm_cell" | "aten.gru_cell" | "aten.rnn_tanh_cell" | "aten.rnn_relu_cell"
            if overload == "default" =>
        {
            Custom(rnn::cell)
        }
        // Eval-mode dropouts are their input (training `aten.dropout` is random::dropout).
        "aten.dropout_"
        | "aten.feature_dropout"
        | "aten.feature_dropout_"
        | "aten.alpha_dropout"
        | "aten.alpha_dropout_" => Custom(dropout),
        o if o.ends_with('_') && inplace_base(target).is_some() => Custom(inplace),
        "aten.__and__"
        | "aten.__or__"
        | "aten.__xor__"
        | "aten.__lshift__"
        | "aten.__rshift__"
        | "aten.bitwise_left_shift"
        | "aten.bitwise_right_shift"
        | "aten.floor_divide"
        | "aten.remainder"
        | "aten.bitwise_and"
        | "aten.bitwise_or"
        | "aten.bitwise_xor"
        | "aten.bitwise_not"
        | "aten.logical_and"
        | "aten.logical_or"
        | "aten.logical_xor"
        | "aten.logical_not"
            if overload != "out" =>
        {
            Custom(ints::int_target)
        }
        _ => return None,
    })
}

/// The out-of-place op of an in-place elementwise target (`aten.relu_.default` ->
/// `aten.relu.default`'s kernel), when it is a plain unary or binary op.
pub(super) fn inplace_base(target: &str) -> Option<GpuOp> {
    let (op, overload) = target.rsplit_once('.')?;
    let base = op.strip_suffix('_')?;
    if base.ends_with('_') || overload == "out" {
        return None;
    }
    // pow_.Scalar is pow.Tensor_Scalar in place (pow.Scalar has a scalar base).
    if base == "aten.pow" && overload == "Scalar" {
        return Some(GpuOp::Binary(BinaryOp::Pow));
    }
    match lookup(&format!("{base}.{overload}"))? {
        g @ (GpuOp::Unary(_) | GpuOp::Binary(_) | GpuOp::Compare(_)) => Some(g),
        // Unary ops with scalar arguments, whose `self` keeps its shape.
        g @ GpuOp::Custom(_) if elementwise_args::INPLACE_CUSTOM.contains(&base) => Some(g),
        _ => None,
    }
}
