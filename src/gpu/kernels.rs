//! GPU kernels by op family: which `aten.*` targets have one, how their arguments map to a
//! shader variant and its parameters. A kernel returns `Ok(None)` to decline (a dtype or an
//! argument it does not handle) before it has encoded anything; the executor then runs the
//! CPU kernel. Every output is a fresh contiguous tensor (as torch's default strides).

use super::exec::{Runner, Slot};
use super::shaders::{Elems, Shader, Variant};
use super::store::{contiguous_strides, gpu_bytes, gpu_store, lock, GTensor};
use crate::cpu::{broadcast_shapes, Data, Tensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{table, OpCtx, Scalar};
use crate::program::Arg;
use crate::runtime::RValue;
use bytemuck::{Pod, Zeroable};
use std::sync::{Arc, RwLock};

/// Largest rank the strided shaders index (two vec4s of sizes and strides).
const MAX_RANK: usize = 8;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct ElemMeta {
    pub numel: u32,
    pub rank: u32,
    pub row: u32,
    pub flags: u32,
    pub shape: [u32; 8],
    pub a_strides: [u32; 8],
    pub b_strides: [u32; 8],
    pub c_strides: [u32; 8],
    pub offsets: [u32; 4],
    pub alpha: f32,
    pub beta: f32,
    pub p0: f32,
    pub p1: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct MatmulMeta {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub flags: u32,
    /// (batch, row, col) strides and offset of A, B and C.
    pub a: [u32; 4],
    pub b: [u32; 4],
    pub c: [u32; 4],
    pub alpha: f32,
    pub beta: f32,
    pub _p: [f32; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct RowMeta {
    pub rows: u32,
    pub cols: u32,
    pub row: u32,
    pub flags: u32,
    pub eps: f32,
    pub _p: [f32; 3],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct ReduceMeta {
    pub n_out: u32,
    pub n_red: u32,
    pub kept_rank: u32,
    pub red_rank: u32,
    pub kept_shape: [u32; 8],
    pub kept_strides: [u32; 8],
    pub red_shape: [u32; 8],
    pub red_strides: [u32; 8],
    pub offset: u32,
    pub row: u32,
    pub scale: f32,
    /// `stats` norm: the order p.
    pub p: f32,
}

macro_rules! op_enum {
    ($name:ident, $shader:expr, $entry:expr, $const:expr, [$($v:ident = $n:expr),* $(,)?]) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $($v = $n),* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            pub fn variant(self) -> Variant {
                Variant::with($shader, $entry, $const, self as u32)
            }
        }
    };
}

// Codes match the `switch OP` arms of shaders/elementwise.wgsl.
op_enum!(
    UnaryOp,
    Shader::Elementwise,
    "unary",
    "OP",
    [
        Copy = 0,
        Neg = 1,
        Relu = 2,
        Sigmoid = 3,
        Tanh = 4,
        Exp = 5,
        Log = 6,
        Sqrt = 7,
        Rsqrt = 8,
        Abs = 9,
        Gelu = 10,
        GeluTanh = 11,
        Silu = 12,
        Sin = 13,
        Cos = 14,
        Reciprocal = 15,
        Affine = 16,
        PowScalar = 17,
        Clamp = 18,
        LeakyRelu = 19,
        Erf = 20,
        Floor = 21,
        Ceil = 22,
        Hardsigmoid = 23,
        Hardswish = 24,
        Sign = 25,
        Elu = 26,
        Softplus = 27,
        Square = 28,
        Log1p = 29,
        Expm1 = 30,
        Round = 31,
        Trunc = 32,
        Frac = 33,
        Atan = 34,
        Tan = 35,
        Sinh = 36,
        Cosh = 37,
        Asin = 38,
        Acos = 39,
        Asinh = 40,
        Acosh = 41,
        Atanh = 42,
        Erfc = 43,
        Log10 = 44,
        Log2 = 45,
        Exp2 = 46,
        Logit = 47,
        NanToNum = 48,
        Threshold = 49,
        Hardshrink = 50,
        Softshrink = 51,
        LogSigmoid = 52,
        Mish = 53,
        RoundDecimals = 54,
        Erfinv = 55,
        PowScalarBase = 56,
        FmodScalar = 57,
    ]
);
op_enum!(
    BinaryOp,
    Shader::Elementwise,
    "binary",
    "OP",
    [
        Add = 0,
        Sub = 1,
        Mul = 2,
        Div = 3,
        Maximum = 4,
        Minimum = 5,
        Pow = 6,
        Rsub = 7,
        Fmod = 8,
        Lerp = 9,
        LogAddExp = 10,
        Prelu = 11,
        Glu = 12,
        Fmax = 13,
        Fmin = 14,
        Atan2 = 15,
        Hypot = 16,
        Xlogy = 17,
        Remainder = 18,
        FloorDiv = 19,
        DivTrunc = 20,
    ]
);
op_enum!(
    CompareOp,
    Shader::Elementwise,
    "compare",
    "OP",
    [
        Eq = 0,
        Ne = 1,
        Lt = 2,
        Le = 3,
        Gt = 4,
        Ge = 5,
        IsNan = 6,
        IsInf = 7,
        IsFinite = 8,
        SignBit = 9,
    ]
);
op_enum!(
    ReduceOp,
    Shader::Reduce,
    "reduce",
    "OP",
    [Sum = 0, Max = 1, Min = 2]
);

mod attention;
mod conv;
mod extra;
mod index;
mod ints;
mod linalg;
mod norm;
mod pool;
mod red;
mod resample;
mod rnn;
mod scatter;
pub(crate) mod select;
mod shape;
mod sort;
pub mod support;

pub use conv::ConvMeta;
pub use index::IndexMeta;
pub use norm::BatchNormMeta;
pub use pool::PoolMeta;
pub use resample::ResampleMeta;
pub use rnn::GateMeta;
pub use scatter::ScatterMeta;
pub use select::SelectMeta;
pub use shape::ShapeMeta;
pub use sort::SortMeta;

impl ReduceOp {
    /// The int / bool variant (`reduce_i`, an int output).
    pub fn int_variant(self) -> Variant {
        Variant::with(Shader::Reduce, "reduce_i", "OP", self as u32)
    }
}

/// The variants of the conv, norm, pool, index and ints shaders.
pub fn nn_variants() -> Vec<Variant> {
    let mut v = vec![
        conv::CONV,
        conv::CONV_TILED,
        conv::IM2COL,
        conv::DEPTHWISE,
        conv::CONV_TRANSPOSE,
        norm::BATCH_NORM,
        pool::MAX_POOL,
        pool::MAX_POOL_INDICES,
        pool::AVG_POOL,
        pool::ADAPTIVE_AVG,
        pool::ADAPTIVE_MAX,
        pool::INT_POOLS[0],
        pool::INT_POOLS[1],
        pool::INT_POOLS[2],
        index::GATHER,
        index::COPY,
        index::FILL,
        shape::MAP,
        shape::TRI,
        resample::UPSAMPLE,
        resample::GRID_SAMPLE,
        rnn::GATES,
        linalg::MATMUL_INT,
    ];
    v.extend(red::variants());
    v.extend(ints::variants());
    v.extend(scatter::variants());
    v.extend(sort::variants());
    v.extend(select::variants());
    v
}

/// Whether a variant's shader comes in f16 forms ([`Elems`]): elementwise ops, matmul,
/// softmax and layer norm, float reductions, resampling and convolutions.
pub fn has_f16_variants(v: &Variant) -> bool {
    matches!(
        v.shader,
        Shader::Elementwise | Shader::Matmul | Shader::Rows | Shader::Resample | Shader::Conv
    ) || (v.shader == Shader::Reduce && v.entry == "reduce")
}

/// f32 or f16 (the float dtypes with GPU kernels).
fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16)
}

pub const WHERE: Variant = Variant::new(Shader::Elementwise, "where_");
/// lerp with a tensor weight (bound as `c`, read through `c_strides`).
pub const LERP3: Variant = Variant::new(Shader::Elementwise, "lerp3");
/// clamp with tensor bounds (the upper one bound as `c`).
pub const CLAMP3: Variant = Variant::new(Shader::Elementwise, "clamp3");
pub const MATMUL: Variant = Variant::new(Shader::Matmul, "matmul");
pub const MATMUL_BIAS: Variant = Variant::new(Shader::Matmul, "matmul_bias");
/// shaders/matmul4.wgsl (f32 with vec4 loads): B contiguous along K (`FORM` 0) or along N
/// (`FORM` 1).
pub const MATMUL4: [Variant; 2] = [
    Variant::with(Shader::Matmul4, "mm4", "FORM", 0),
    Variant::with(Shader::Matmul4, "mm4", "FORM", 1),
];
/// Whether the vec4 matmul forms are used (`PT2WEB_MATMUL4=0` turns them off natively, to
/// compare).
fn matmul4_enabled() -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if std::env::var("PT2WEB_MATMUL4").as_deref() == Ok("0") {
        return false;
    }
    true
}

/// Rows and columns of one invocation's block in matmul4.wgsl (an 8x8 workgroup).
const MM4_ROWS: usize = 8;
const MM4_COLS: usize = 4;
pub const SOFTMAX: Variant = Variant::with(Shader::Rows, "softmax", "LOG", 0);
pub const LOG_SOFTMAX: Variant = Variant::with(Shader::Rows, "softmax", "LOG", 1);
/// Softmax whose fully masked (all -inf) rows are zeros (attention).
pub const SAFE_SOFTMAX: Variant = Variant::with(Shader::Rows, "softmax", "LOG", 2);
/// Rows up to this long run one invocation per row (`softmax_row`, no barriers).
pub const SHORT_ROW: usize = 1024;

/// The softmax variant for rows of `cols` (`v` is one of the `softmax` variants) and its
/// grid: a 64-thread workgroup per row for long rows, one invocation per row for short.
pub(crate) fn softmax_dispatch(v: Variant, rows: usize, cols: usize) -> (Variant, (u32, u32, u32)) {
    if cols <= SHORT_ROW {
        let (gx, gy, row) = grid(rows, 64);
        (
            Variant {
                entry: "softmax_row",
                ..v
            },
            (gx, gy, row),
        )
    } else {
        let (gx, gy, _) = grid(rows, 1);
        (v, (gx, gy, gx))
    }
}
pub const LAYER_NORM: Variant = Variant::new(Shader::Rows, "layer_norm");
/// Layer norm with one invocation per row (rows up to [`SHORT_ROW`] long).
pub const LAYER_NORM_ROW: Variant = Variant::new(Shader::Rows, "layer_norm_row");

/// What the GPU does for a target.
#[derive(Debug, Clone, Copy)]
pub enum GOp {
    /// Metadata only (see the executor's module doc).
    View,
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CompareOp),
    Custom(fn(&mut Kc) -> Result<Option<Vec<Slot>>>),
}

/// The targets with a GPU path.
pub fn lookup(target: &str) -> Option<GOp> {
    use GOp::*;
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
            Custom(extra::unary_args)
        }
        "aten.fmod" if overload == "Scalar" => Custom(extra::unary_args),
        "aten.pow" if overload == "Scalar" => Custom(extra::pow_scalar),
        "aten.fmod" | "aten.lerp" | "aten.logaddexp" if overload != "out" => {
            Custom(extra::binary_named)
        }
        "aten.prelu" | "aten._prelu_kernel" => Custom(extra::prelu),
        "aten.glu" => Custom(extra::glu),
        "aten.isnan" | "aten.isinf" | "aten.isfinite" | "aten.signbit" => Custom(extra::predicate),
        "aten.isposinf" | "aten.isneginf" if overload == "default" => Custom(extra::predicate),
        "aten.rrelu" | "aten.rrelu_with_noise_functional" if overload == "default" => {
            Custom(extra::rrelu_eval)
        }
        "aten.masked_fill" if overload != "out" => Custom(extra::masked_fill),
        "aten.where" if overload.starts_with("Scalar") => Custom(extra::where_scalar),
        "aten.fill_" if overload == "Scalar" => Custom(extra::fill_),
        "aten.zero_" if overload == "default" => Custom(extra::fill_),
        "aten.copy_" if overload == "default" => Custom(extra::copy_),
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
            Custom(red::stats)
        }
        "aten.prod" if overload == "dim_int" || overload == "default" => Custom(red::stats),
        "aten.max" | "aten.min" if overload == "default" || overload == "dim" => {
            Custom(red::extreme)
        }
        "aten.argmax" | "aten.argmin" | "aten.aminmax" if overload == "default" => {
            Custom(red::extreme)
        }
        "aten.count_nonzero" if overload != "out" => Custom(red::count_nonzero),
        "aten.group_norm" | "aten.native_group_norm" | "aten.instance_norm"
            if overload == "default" =>
        {
            Custom(red::group_norm)
        }
        "aten.rms_norm" | "aten._fused_rms_norm" if overload == "default" => Custom(red::rms_norm),
        "aten.cumsum" | "aten.cumprod" | "aten.cummax" | "aten.cummin" | "aten.cumsum_"
        | "aten.cumprod_" | "aten.logcumsumexp"
            if overload == "default" =>
        {
            Custom(red::scan)
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
            Custom(extra::binary_named)
        }
        "aten.addcmul" | "aten.addcdiv" if overload == "default" => Custom(extra::addcmul),
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
        "aten.native_layer_norm" | "aten.layer_norm" => Custom(layer_norm),
        // Seeded random ops: the CPU generator's exact streams (src/gpu/random.rs).
        "aten.rand"
        | "aten.rand_like"
        | "aten.randn"
        | "aten.randn_like"
        | "aten.uniform"
        | "aten.normal_functional" => Custom(super::random::rand),
        "aten.uniform_" | "aten.normal_" | "aten.exponential_" if overload == "default" => {
            Custom(rand_inplace)
        }
        "aten.exponential" if overload == "default" => Custom(super::random::exponential),
        "aten.randperm" if overload == "default" => Custom(super::random::randperm),
        "aten.normal" if overload == "Tensor_float" => Custom(normal_tensor_float),
        "aten.bernoulli" => Custom(super::random::bernoulli),
        "aten.randint" if overload == "default" || overload == "low" => {
            Custom(super::random::randint)
        }
        "aten.dropout" => Custom(super::random::dropout),
        "aten.native_dropout" => Custom(super::random::native_dropout),
        "aten.convolution" | "aten._convolution" | "aten.conv1d" | "aten.conv2d"
        | "aten.conv3d" => Custom(conv::conv),
        "aten.conv_transpose1d" | "aten.conv_transpose2d" | "aten.conv_transpose3d"
            if overload != "out" =>
        {
            Custom(conv::conv_transpose)
        }
        "aten._native_batch_norm_legit_no_training"
        | "aten._native_batch_norm_legit"
        | "aten._native_batch_norm_legit_functional"
        | "aten.native_batch_norm"
        | "aten.batch_norm" => Custom(norm::batch_norm),
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
        "aten.type_as" if overload == "default" => Custom(extra::type_as),
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
fn inplace_base(target: &str) -> Option<GOp> {
    let (op, overload) = target.rsplit_once('.')?;
    let base = op.strip_suffix('_')?;
    if base.ends_with('_') || overload == "out" {
        return None;
    }
    // pow_.Scalar is pow.Tensor_Scalar in place (pow.Scalar has a scalar base).
    if base == "aten.pow" && overload == "Scalar" {
        return Some(GOp::Binary(BinaryOp::Pow));
    }
    match lookup(&format!("{base}.{overload}"))? {
        g @ (GOp::Unary(_) | GOp::Binary(_) | GOp::Compare(_)) => Some(g),
        // Unary ops with scalar arguments, whose `self` keeps its shape.
        g @ GOp::Custom(_) if extra::INPLACE_CUSTOM.contains(&base) => Some(g),
        _ => None,
    }
}

/// relu_, add_, hardswish_...: the elementwise kernels write into `self` directly (their
/// `_ip` entries read and write each element through the output binding); otherwise the
/// out-of-place kernel runs and its result is copied into `self`'s GPU buffer (a shader
/// cannot read and write one buffer through two bindings: `x.add_(x)`, other kernels).
/// Every view of `self`'s store sees the new values; its CPU copy becomes stale.
fn inplace(k: &mut Kc) -> Out {
    let Some(base) = inplace_base(k.target()) else {
        return Ok(None);
    };
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    // An expanded `self` (internal overlap) is an error in torch: leave it to the CPU kernel.
    let overlap = x
        .sizes
        .iter()
        .zip(&x.strides)
        .any(|(&n, &s)| n > 1 && s == 0);
    // f32, or int tensors (num_batches_tracked += 1); comparisons write 0 / 1 in x's dtype.
    let word_ok = ints::is_int(x.dtype);
    // f16 only through the elementwise kernels' in-place entries (no f16 copy into self).
    let f16 = x.dtype == DType::F16 && k.r.dev.f16_enabled();
    if (x.dtype != DType::F32 && !word_ok && !f16) || !k.out_is(x.dtype) || overlap || !k.fits(&x) {
        return Ok(None);
    }
    let other = if k.op.arg("exponent").is_some() {
        "exponent"
    } else {
        "other"
    };
    if let Some(o) = k.t(other) {
        if broadcast_shapes(&x.sizes, &o.sizes).as_deref() != Some(&x.sizes[..]) {
            return Ok(None);
        }
    }
    k.into = Some(x.clone());
    let res = run(k, base);
    k.into = None;
    let Some(res) = res? else {
        return Ok(None);
    };
    let [Slot::T(t)] = &res[..] else {
        return Ok(None);
    };
    if t.sizes != x.sizes {
        return Ok(None);
    }
    if Arc::ptr_eq(&t.cell, &x.cell) {
        // Written in place (the `_ip` entries).
        lock(&x.cell).cpu_valid = false;
        return Ok(Some(vec![Slot::T(x)]));
    }
    if f16 {
        return Ok(None);
    }
    let t = if t.dtype == x.dtype {
        t.clone()
    } else if t.dtype == DType::Bool && matches!(base, GOp::Compare(_)) {
        match ints::convert(k, t, x.dtype)?.as_deref() {
            Some([Slot::T(c)]) => c.clone(),
            _ => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    let t = &t;
    index::copy_into(k, t, &x)?;
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::T(x)]))
}

/// uniform_ / normal_: the out-of-place draw (the CPU generator's stream, row-major as the
/// CPU kernel fills), copied into `self`.
fn rand_inplace(k: &mut Kc) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let overlap = x
        .sizes
        .iter()
        .zip(&x.strides)
        .any(|(&n, &s)| n > 1 && s == 0);
    if x.dtype != DType::F32 || overlap || !k.fits(&x) {
        return Ok(None);
    }
    let res = if k.target().starts_with("aten.exponential_") {
        super::random::exponential(k)?
    } else {
        super::random::rand(k)?
    };
    let Some(res) = res else {
        return Ok(None);
    };
    let [Slot::T(t)] = &res[..] else {
        return Ok(None);
    };
    index::copy_into(k, t, &x)?;
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::T(x)]))
}

/// normal.Tensor_float(mean, std): mean + std * z, z from the randn stream in the mean's
/// row-major order (as the CPU kernel draws).
fn normal_tensor_float(k: &mut Kc) -> Out {
    let Some(mean) = k.t("mean") else {
        return Ok(None);
    };
    let std = k.op.float_or("std", 1.0)?;
    if mean.dtype != DType::F32 || !k.out_is(DType::F32) || std < 0.0 || !k.fits(&mean) {
        return Ok(None);
    }
    let Some(z) = super::random::standard_normal(k, &mean.sizes)? else {
        return Ok(None);
    };
    one(elementwise(
        k,
        BinaryOp::Add.variant(),
        DType::F32,
        &mean,
        Some(&Operand::T(z)),
        None,
        std as f32,
        0.0,
    ))
}

/// dropout in eval mode (or p = 0): the input itself, as the CPU kernel returns it.
fn dropout(k: &mut Kc) -> Out {
    let name = if k.op.arg("input").is_some() {
        "input"
    } else {
        "self"
    };
    let Some(x) = k.t(name) else {
        return Ok(None);
    };
    if k.op.bool_or("train", true)? && k.op.float("p")? != 0.0 {
        if k.target() == "aten.feature_dropout.default" {
            return super::random::feature_dropout(k);
        }
        return Ok(None);
    }
    Ok(Some(vec![Slot::T(x)]))
}

/// What a GPU kernel sees: the runner (device, encoder, counters), the node's GPU tensors,
/// and an [`OpCtx`] for its non-tensor arguments.
pub struct Kc<'k, 'd, 'a> {
    pub r: &'k mut Runner<'d>,
    pub env_t: &'k [Option<GTensor>],
    pub op: OpCtx<'a>,
    /// Declared f16 outputs read as f32 ([`out_dtype`](Kc::out_dtype)): set while an f16
    /// node runs its f32 kernel on converted operands (see [`run`]).
    pub f16_as_f32: bool,
    /// Set by [`inplace`]: an elementwise kernel whose `self` is this tensor writes into it
    /// (the `_ip` entries) instead of a new output, where its other operands allow.
    pub into: Option<GTensor>,
}

pub(crate) type Out = Result<Option<Vec<Slot>>>;

impl<'k, 'd, 'a> Kc<'k, 'd, 'a> {
    pub fn new(r: &'k mut Runner<'d>, env_t: &'k [Option<GTensor>], op: OpCtx<'a>) -> Self {
        Kc {
            r,
            env_t,
            op,
            f16_as_f32: false,
            into: None,
        }
    }
}

impl Kc<'_, '_, '_> {
    fn target(&self) -> &str {
        &self.op.node.target
    }
    /// The GPU tensor passed as argument `name` (None if absent or not a tensor).
    pub(crate) fn t(&self, name: &str) -> Option<GTensor> {
        match self.op.arg(name)? {
            Arg::Tensor(id) | Arg::OptTensor(Some(id)) => self.env_t.get(*id)?.clone(),
            _ => None,
        }
    }
    fn is_tensor_arg(&self, name: &str) -> bool {
        matches!(
            self.op.arg(name),
            Some(Arg::Tensor(_) | Arg::OptTensor(Some(_)))
        )
    }
    /// The declared dtype of output `i`.
    pub(crate) fn out_dtype(&self, i: usize) -> Option<DType> {
        match self.op.node.outputs.get(i)? {
            Arg::Tensor(id) => self.value_dtype(*id),
            _ => None,
        }
    }
    /// The declared dtype of graph value `id` (f16 read as f32 under `f16_as_f32`).
    fn value_dtype(&self, id: usize) -> Option<DType> {
        match &self.op.graph.value(id).kind {
            crate::program::ValueKind::Tensor { dtype, .. } => Some(match *dtype {
                DType::F16 if self.f16_as_f32 => DType::F32,
                d => d,
            }),
            _ => None,
        }
    }
    fn out_is(&self, dtype: DType) -> bool {
        self.out_dtype(0) == Some(dtype)
    }
    pub(crate) fn name(&self) -> String {
        format!("{} ({})", self.target(), self.op.node.name)
    }
    pub(crate) fn ensure(&mut self, t: &GTensor) -> Result<()> {
        let what = format!("an input of {}", self.name());
        self.r.upload(&t.cell, &what)
    }
    pub(crate) fn new_out(&mut self, dtype: DType, sizes: &[usize]) -> Result<GTensor> {
        let n: usize = sizes.iter().product();
        let cell = gpu_store(
            self.r.dev,
            dtype,
            n,
            &format!("the output of {}", self.name()),
        )?;
        Ok(GTensor {
            cell,
            dtype,
            sizes: sizes.to_vec(),
            strides: contiguous_strides(sizes),
            offset: 0,
        })
    }
    /// The [`Elems`] of a float kernel reading `input` and writing `output` storage: f32,
    /// or an f16 form when the device has `shader-f16` (None: no kernel for the pair).
    pub(crate) fn elems(&self, input: DType, output: DType) -> Option<Elems> {
        let e = Elems::of(input, output)?;
        (!e.uses_f16() || self.r.dev.f16_enabled()).then_some(e)
    }
    pub(crate) fn fits(&self, t: &GTensor) -> bool {
        let limit = self.r.dev.properties.limits.max_storage_buffer_binding_size;
        t.rank() <= MAX_RANK
            && {
                let s = lock(&t.cell);
                gpu_bytes(s.dtype, s.len) <= limit
            }
            && t.span() < u32::MAX as usize
    }

    /// Encode one dispatch. `bufs`: (binding, tensor) for every storage binding.
    pub(crate) fn dispatch(
        &mut self,
        v: &Variant,
        meta: &[u8],
        bufs: &[(u32, &GTensor)],
        groups: (u32, u32, u32),
    ) -> Result<()> {
        let pipeline = self.r.dev.pipeline(v)?;
        let mut bound: Vec<(u32, wgpu::Buffer, u64)> = Vec::with_capacity(bufs.len());
        let mut classes = Vec::new();
        for (b, t) in bufs {
            let s = lock(&t.cell);
            let buf = s.gpu.as_ref().ok_or_else(|| {
                Error::Gpu(format!("internal: {} input not on the GPU", v.label()))
            })?;
            bound.push((*b, buf.buffer().clone(), gpu_bytes(s.dtype, s.len)));
            if self.r.rec.is_some() {
                classes.push((buf.buffer().clone(), buf.size()));
            }
        }
        let recorded = self.r.rec.is_some().then(|| bound.clone());
        let bg = self.r.dev.bind_group(v, &pipeline, meta, bound)?;
        if let (Some(rec), Some(bufs)) = (self.r.rec.as_mut(), recorded) {
            rec.dispatches.push(super::tape::Dispatch {
                pipeline: pipeline.clone(),
                bind_group: bg.clone(),
                groups,
                variant: *v,
                meta: meta.to_vec(),
                bufs,
                classes,
            });
        }
        if self.r.dry {
            // A prepare pass: the pipeline and bind group exist now; nothing is encoded.
            return Ok(());
        }
        // While profiling: GPU timestamps at the pass's start and end (src/gpu/timing.rs).
        let dev = self.r.dev;
        let times = self
            .r
            .timer
            .as_mut()
            .map(|t| t.writes(dev, &self.op.node.name, &self.op.node.target));
        {
            let enc = self.r.encoder();
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: times.as_ref().map(|(qs, b, e)| {
                    wgpu::ComputePassTimestampWrites {
                        query_set: qs,
                        beginning_of_pass_write_index: Some(*b),
                        end_of_pass_write_index: Some(*e),
                    }
                }),
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        }
        self.r.stats.dispatches += 1;
        Ok(())
    }
}

/// A 2-D grid of 64-thread workgroups covering `n` threads: (x, y, threads per row).
pub(crate) fn grid(n: usize, per_group: usize) -> (u32, u32, u32) {
    let groups = n.div_ceil(per_group).max(1);
    let x = groups.min(65535);
    let y = groups.div_ceil(x);
    (x as u32, y as u32, (x * per_group) as u32)
}

/// Merges the dimensions of `shape` that every operand walks as one (the outer stride is the
/// inner stride times the inner size) and drops size-1 dims, as torch's TensorIterator does:
/// a contiguous operation becomes rank 1, and the shaders' index arithmetic (one division
/// per dim and element, slow on software adapters) shrinks with the rank.
pub(super) fn coalesce(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut sh: Vec<usize> = Vec::with_capacity(shape.len());
    let mut st: Vec<Vec<usize>> = vec![Vec::with_capacity(shape.len()); strides.len()];
    for (d, &n) in shape.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let merge = sh.last().is_some_and(|_| {
            strides.iter().zip(&st).all(|(s, o)| {
                let prev = *o.last().unwrap();
                prev == s[d] * n
            })
        });
        if merge {
            *sh.last_mut().unwrap() *= n;
            for (o, s) in st.iter_mut().zip(strides) {
                *o.last_mut().unwrap() = s[d];
            }
        } else {
            sh.push(n);
            for (o, s) in st.iter_mut().zip(strides) {
                o.push(s[d]);
            }
        }
    }
    (sh, st)
}

fn pad8(v: &[usize]) -> [u32; 8] {
    let mut o = [0u32; 8];
    for (i, x) in v.iter().enumerate().take(8) {
        o[i] = *x as u32;
    }
    o
}

/// Run `op`'s GPU kernel for the node. An f16 node whose kernel has no f16 form runs the
/// f32 kernel on f32 conversions of its f16 tensors, its f16 outputs rounded back once:
/// what torch's CPU kernels compute for f16 (f32 math, one rounding per op), exact for
/// data movement. Not for ops that write into an input (the write would land in the copy).
pub fn run(k: &mut Kc, op: GOp) -> Out {
    let res = run_op(k, op)?;
    if res.is_some() || matches!(op, GOp::View) || !k.r.dev.f16_enabled() || k.f16_as_f32 {
        return Ok(res);
    }
    via_f32(k, op)
}

fn via_f32(k: &mut Kc, op: GOp) -> Out {
    let target = k.target();
    let (name, overload) = target.rsplit_once('.').unwrap_or((target, ""));
    if name.ends_with('_') || overload.starts_with("out") {
        return Ok(None);
    }
    let mut out_ids = Vec::new();
    k.op.node
        .outputs
        .iter()
        .for_each(|a| a.values(&mut out_ids));
    let f16_out = out_ids
        .iter()
        .any(|&id| k.value_dtype(id) == Some(DType::F16));
    let mut ids = Vec::new();
    k.op.node
        .inputs
        .iter()
        .for_each(|(_, a)| a.values(&mut ids));
    let mut env: Option<Vec<Option<GTensor>>> = None;
    for id in ids {
        let Some(Some(t)) = k.env_t.get(id) else {
            continue;
        };
        if t.dtype != DType::F16
            || env
                .as_ref()
                .is_some_and(|e| e[id].as_ref().is_some_and(|c| c.dtype == DType::F32))
        {
            continue;
        }
        let t = t.clone();
        let Some(c) = elementwise(
            k,
            UnaryOp::Copy.variant(),
            DType::F32,
            &t,
            None,
            None,
            1.0,
            0.0,
        )?
        else {
            return Ok(None);
        };
        env.get_or_insert_with(|| k.env_t.to_vec())[id] = Some(c);
    }
    if env.is_none() && !f16_out {
        return Ok(None);
    }
    let env = env.unwrap_or_else(|| k.env_t.to_vec());
    let outs = {
        let op32 = OpCtx {
            node: k.op.node,
            graph: k.op.graph,
            env: k.op.env,
            state: &mut *k.op.state,
        };
        let mut k32 = Kc::new(&mut *k.r, &env, op32);
        k32.f16_as_f32 = true;
        run_op(&mut k32, op)?
    };
    let Some(outs) = outs else {
        return Ok(None);
    };
    // Round the f16 outputs (computed as f32) back to f16.
    let back = |k: &mut Kc, t: GTensor, id: Option<usize>| -> Result<Option<GTensor>> {
        if t.dtype != DType::F32 || id.and_then(|id| k.value_dtype(id)) != Some(DType::F16) {
            return Ok(Some(t));
        }
        elementwise(
            k,
            UnaryOp::Copy.variant(),
            DType::F16,
            &t,
            None,
            None,
            1.0,
            0.0,
        )
    };
    let mut res = Vec::new();
    for (i, slot) in outs.into_iter().enumerate() {
        let arg = k.op.node.outputs.get(i);
        res.push(match (slot, arg) {
            (Slot::T(t), Some(Arg::Tensor(id))) => match back(k, t, Some(*id))? {
                Some(t) => Slot::T(t),
                None => return Ok(None),
            },
            (Slot::Ts(ts), Some(Arg::Tensors(ids))) if ts.len() == ids.len() => {
                let mut v = Vec::new();
                for (t, id) in ts.into_iter().zip(ids) {
                    match back(k, t, Some(*id))? {
                        Some(t) => v.push(t),
                        None => return Ok(None),
                    }
                }
                Slot::Ts(v)
            }
            (slot, _) => slot,
        });
    }
    Ok(Some(res))
}

fn run_op(k: &mut Kc, op: GOp) -> Out {
    match op {
        GOp::View => view(k),
        GOp::Unary(u) => {
            let Some(x) = k.t("self") else {
                return Ok(None);
            };
            // An int or bool tensor into a float op (exp, sin, sqrt...): torch computes on
            // its f32 conversion.
            if !is_float(x.dtype)
                && k.out_is(DType::F32)
                && (x.dtype == DType::Bool || ints::is_int(x.dtype))
            {
                let Some(xf) = to_f32(k, &x)? else {
                    return Ok(None);
                };
                return one(elementwise(
                    k,
                    u.variant(),
                    DType::F32,
                    &xf,
                    None,
                    None,
                    1.0,
                    0.0,
                ));
            }
            if !is_float(x.dtype) {
                return ints::unary_f32_op(k, u);
            }
            if !k.out_is(x.dtype) {
                return Ok(None);
            }
            let d = x.dtype;
            one(elementwise(k, u.variant(), d, &x, None, None, 1.0, 0.0))
        }
        GOp::Binary(b) => binary(k, b),
        GOp::Compare(c) => compare(k, c),
        GOp::Custom(f) => f(k),
    }
}

pub(crate) fn one(r: Result<Option<GTensor>>) -> Out {
    Ok(r?.map(|t| vec![Slot::T(t)]))
}

/// The `b` operand: a tensor or a Python number.
enum Operand {
    T(GTensor),
    S(f32),
}

fn operand(k: &Kc, name: &str) -> Result<Option<Operand>> {
    if k.is_tensor_arg(name) {
        return Ok(k.t(name).map(Operand::T));
    }
    match k.op.opt_scalar(name)? {
        Some(s) => Ok(Some(Operand::S(s.as_f64() as f32))),
        None => Ok(None),
    }
}

/// Encode an elementwise kernel: `a` (and `b`, `cond`) broadcast to the output shape.
#[allow(clippy::too_many_arguments)]
fn elementwise(
    k: &mut Kc,
    v: Variant,
    out_dtype: DType,
    a: &GTensor,
    b: Option<&Operand>,
    cond: Option<&GTensor>,
    alpha: f32,
    beta: f32,
) -> Result<Option<GTensor>> {
    elementwise_p(k, v, out_dtype, a, b, cond, [alpha, beta, 0.0], 0)
}

/// [`elementwise`] with the third parameter `p1` and extra `flags` bits.
#[allow(clippy::too_many_arguments)]
fn elementwise_p(
    k: &mut Kc,
    v: Variant,
    out_dtype: DType,
    a: &GTensor,
    b: Option<&Operand>,
    cond: Option<&GTensor>,
    params: [f32; 3],
    flags: u32,
) -> Result<Option<GTensor>> {
    let [alpha, beta, p1] = params;
    let mut shape = a.sizes.clone();
    if let Some(Operand::T(b)) = b {
        let Some(s) = broadcast_shapes(&shape, &b.sizes) else {
            return Ok(None);
        };
        shape = s;
    }
    if let Some(c) = cond {
        let Some(s) = broadcast_shapes(&shape, &c.sizes) else {
            return Ok(None);
        };
        shape = s;
    }
    let a = a.expand_to(&shape);
    let bt = match b {
        Some(Operand::T(b)) => Some(b.expand_to(&shape)),
        _ => None,
    };
    let c = cond.map(|c| c.expand_to(&shape));
    let (Some(a), Some(bt), Some(c)) = (
        a,
        bt.map_or(Some(None), |x| x.map(Some)),
        c.map_or(Some(None), |x| x.map(Some)),
    ) else {
        return Ok(None);
    };
    // f16 forms for float tensors: the float operands share `a`'s dtype; a comparison
    // writes bool words. Other dtypes move as 32-bit words (the f32 form).
    let v = if a.dtype == DType::F16 || out_dtype == DType::F16 {
        let out_d = if out_dtype == DType::Bool {
            a.dtype
        } else {
            out_dtype
        };
        let Some(e) = k.elems(a.dtype, out_d) else {
            return Ok(None);
        };
        if bt.as_ref().is_some_and(|b| b.dtype != a.dtype) {
            return Ok(None);
        }
        v.typed(e)
    } else {
        v
    };
    let numel: usize = shape.iter().product();
    if shape.len() > MAX_RANK
        || numel >= u32::MAX as usize
        || !k.fits(&a)
        || bt.as_ref().is_some_and(|b| !k.fits(b))
        || c.as_ref().is_some_and(|c| !k.fits(c))
    {
        return Ok(None);
    }
    k.ensure(&a)?;
    if let Some(b) = &bt {
        k.ensure(b)?;
    }
    if let Some(c) = &c {
        k.ensure(c)?;
    }
    // In place: `a` is the target itself and no other operand shares its buffer.
    let into = k.into.take().filter(|x| {
        matches!(v.entry, "unary" | "binary")
            && flags & 4 == 0
            && c.is_none()
            && x.dtype == out_dtype
            && x.sizes == shape
            && Arc::ptr_eq(&x.cell, &a.cell)
            && x.strides == a.strides
            && x.offset == a.offset
            && bt.as_ref().is_none_or(|b| !Arc::ptr_eq(&b.cell, &x.cell))
    });
    let out = match &into {
        Some(x) => x.clone(),
        None => k.new_out(out_dtype, &shape)?,
    };
    if numel == 0 {
        return Ok(Some(out));
    }
    let (gx, gy, row) = grid(numel, 64);
    let mut strides: Vec<&[usize]> = vec![&a.strides];
    strides.extend(bt.iter().map(|b| &b.strides[..]));
    strides.extend(c.iter().map(|c| &c.strides[..]));
    let (cshape, cstrides) = coalesce(&shape, &strides);
    let mut m = ElemMeta {
        numel: numel as u32,
        rank: cshape.len() as u32,
        row,
        shape: pad8(&cshape),
        a_strides: pad8(&cstrides[0]),
        alpha,
        beta,
        p1,
        flags,
        ..Default::default()
    };
    m.offsets[0] = a.offset as u32;
    match (&bt, b) {
        (Some(b), _) => {
            m.b_strides = pad8(&cstrides[1]);
            m.offsets[1] = b.offset as u32;
        }
        (None, Some(Operand::S(s))) => {
            m.flags |= 1;
            m.p0 = *s;
        }
        _ => {}
    }
    if let Some(c) = &c {
        m.c_strides = pad8(cstrides.last().unwrap());
        m.offsets[2] = c.offset as u32;
    }
    if into.is_some() {
        let entry = match (v.entry, &bt) {
            ("unary", _) => "unary_ip",
            (_, Some(_)) => "binary_ip",
            (_, None) => "binary_ip_s",
        };
        let vi = Variant { entry, ..v };
        let mut bufs: Vec<(u32, &GTensor)> = vec![(1, &out)];
        bufs.extend(bt.iter().map(|b| (3, b)));
        k.dispatch(&vi, bytemuck::bytes_of(&m), &bufs, (gx, gy, 1))?;
        return Ok(Some(out));
    }
    let out_binding = if v.entry == "compare" { 5 } else { 1 };
    let mut bufs: Vec<(u32, &GTensor)> = vec![(out_binding, &out), (2, &a)];
    if v.entry != "unary" {
        // A scalar `b` still needs a bound buffer: the shader reads it only when flagged.
        bufs.push((3, bt.as_ref().unwrap_or(&a)));
    }
    if let Some(c) = &c {
        let binding = if matches!(v.entry, "lerp3" | "clamp3") {
            4
        } else {
            6
        };
        bufs.push((binding, c));
    }
    k.dispatch(&v, bytemuck::bytes_of(&m), &bufs, (gx, gy, 1))?;
    Ok(Some(out))
}

fn binary(k: &mut Kc, op: BinaryOp) -> Out {
    let exp_name = if k.op.arg("exponent").is_some() {
        "exponent"
    } else {
        "other"
    };
    let Some(mut a) = k.t("self") else {
        return extra::scalar_self(k, op);
    };
    let Some(mut b) = operand(k, exp_name)? else {
        return Ok(None);
    };
    // torch's promotion to an f32 result: int and bool tensor operands (int / int true
    // division, int tensor times a float scalar, f32 minus int64...) are converted first.
    let b_dtype = match &b {
        Operand::T(t) => Some(t.dtype),
        Operand::S(_) => None,
    };
    let word = |d: DType| d == DType::Bool || ints::is_int(d);
    if k.out_is(DType::F32)
        && (word(a.dtype) || b_dtype.is_some_and(word))
        && [Some(a.dtype), b_dtype]
            .iter()
            .flatten()
            .all(|&d| d == DType::F32 || word(d))
        && k.op.opt_str("rounding_mode")?.is_none()
    {
        let Some(fa) = to_f32(k, &a)? else {
            return Ok(None);
        };
        a = fa;
        if let Operand::T(t) = &b {
            let Some(fb) = to_f32(k, t)? else {
                return Ok(None);
            };
            b = Operand::T(fb);
        }
    }
    // bool + bool is `or`, bool * bool is `and` (torch's bool arithmetic).
    if a.dtype == DType::Bool
        && matches!(&b, Operand::T(t) if t.dtype == DType::Bool)
        && k.out_is(DType::Bool)
        && k.op.opt_scalar("alpha")?.is_none_or(|s| s.as_f64() == 1.0)
    {
        match op {
            BinaryOp::Add => return ints::logical(k, ints::LogicalOp::Or),
            BinaryOp::Mul => return ints::logical(k, ints::LogicalOp::And),
            _ => {}
        }
    }
    if !is_float(a.dtype) {
        return ints::binary(k, op);
    }
    let d = a.dtype;
    if !k.out_is(d) {
        return Ok(None);
    }
    if let Operand::T(b) = &b {
        if b.dtype != d {
            return Ok(None);
        }
    }
    let alpha = match k.op.opt_scalar("alpha")? {
        Some(s) => s.as_f64() as f32,
        None => 1.0,
    };
    let op = match k.op.opt_str("rounding_mode")?.as_deref() {
        None => op,
        Some("floor") if op == BinaryOp::Div => BinaryOp::FloorDiv,
        Some("trunc") if op == BinaryOp::Div => BinaryOp::DivTrunc,
        Some(_) => return Ok(None),
    };
    one(elementwise(
        k,
        op.variant(),
        d,
        &a,
        Some(&b),
        None,
        alpha,
        0.0,
    ))
}

/// `t` as f32 (itself when it already is), converted on the GPU.
fn to_f32(k: &mut Kc, t: &GTensor) -> Result<Option<GTensor>> {
    if t.dtype == DType::F32 {
        return Ok(Some(t.clone()));
    }
    Ok(match ints::convert(k, t, DType::F32)?.as_deref() {
        Some([Slot::T(x)]) => Some(x.clone()),
        _ => None,
    })
}

fn compare(k: &mut Kc, op: CompareOp) -> Out {
    let Some(a) = k.t("self") else {
        return Ok(None);
    };
    // An int tensor against a float number: torch compares in f32 (the promoted dtype).
    let a = if ints::is_int(a.dtype)
        && !k.is_tensor_arg("other")
        && matches!(k.op.opt_scalar("other")?, Some(Scalar::Float(_)))
    {
        match to_f32(k, &a)? {
            Some(af) => af,
            None => return Ok(None),
        }
    } else {
        a
    };
    if !is_float(a.dtype) {
        return ints::compare(k, op);
    }
    let Some(b) = operand(k, "other")? else {
        return Ok(None);
    };
    // lt_ and the other in-place comparisons (through `inplace`) declare self's dtype.
    let inplace = k
        .target()
        .split('.')
        .nth(1)
        .is_some_and(|o| o.ends_with('_'));
    if !k.out_is(DType::Bool) && !inplace {
        return Ok(None);
    }
    if let Operand::T(b) = &b {
        if b.dtype != a.dtype {
            return Ok(None);
        }
    }
    one(elementwise(
        k,
        op.variant(),
        DType::Bool,
        &a,
        Some(&b),
        None,
        1.0,
        0.0,
    ))
}

fn where_(k: &mut Kc) -> Out {
    let (Some(c), Some(a)) = (k.t("condition"), k.t("self")) else {
        return Ok(None);
    };
    if !is_float(a.dtype) {
        return ints::where_(k);
    }
    let Some(b) = operand(k, "other")? else {
        return Ok(None);
    };
    let d = a.dtype;
    if c.dtype != DType::Bool || !k.out_is(d) {
        return Ok(None);
    }
    if matches!(&b, Operand::T(b) if b.dtype != d) {
        return Ok(None);
    }
    one(elementwise(k, WHERE, d, &a, Some(&b), Some(&c), 1.0, 0.0))
}

fn unary_with_args(k: &mut Kc) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    // The in-place forms (relu6_, elu_...) come here through `inplace`; clip is clamp.
    let op = k
        .target()
        .rsplit_once('.')
        .map_or("", |(o, _)| o)
        .trim_end_matches('_')
        .replace("aten.clip", "aten.clamp");
    if op == "aten.clamp" && (k.is_tensor_arg("min") || k.is_tensor_arg("max")) {
        return extra::clamp_tensor(k);
    }
    // relu6 / hardtanh of ints: a clamp with int bounds.
    if ints::is_int(x.dtype) && k.out_is(x.dtype) {
        let int = |v: i64| Some(Scalar::Int(v));
        match op.as_str() {
            "aten.relu6" => return ints::clamp_to(k, [int(0), int(6)]),
            "aten.hardtanh" => {
                let lo = k.op.opt_scalar("min_val")?.or(int(-1));
                let hi = k.op.opt_scalar("max_val")?.or(int(1));
                return ints::clamp_to(k, [lo, hi]);
            }
            _ => {}
        }
    }
    // An int tensor clamped to float bounds: torch clamps its f32 conversion.
    let x = if op == "aten.clamp"
        && (ints::is_int(x.dtype) || x.dtype == DType::Bool)
        && k.out_is(DType::F32)
    {
        match to_f32(k, &x)? {
            Some(xf) => xf,
            None => return Ok(None),
        }
    } else {
        x
    };
    let int_clamp = ints::is_int(x.dtype) && op == "aten.clamp";
    if (!is_float(x.dtype) || !k.out_is(x.dtype)) && !int_clamp {
        return Ok(None);
    }
    let d = x.dtype;
    let f = |s: Option<Scalar>, d: f64| s.map_or(d, Scalar::as_f64) as f32;
    let (u, alpha, beta) = match op.as_str() {
        "aten.gelu" => match k.op.opt_str("approximate")?.as_deref() {
            None | Some("none") => (UnaryOp::Gelu, 1.0, 0.0),
            Some("tanh") => (UnaryOp::GeluTanh, 1.0, 0.0),
            Some(_) => return Ok(None),
        },
        "aten.clamp" if !is_float(x.dtype) => return ints::clamp(k),
        "aten.clamp" => {
            if k.is_tensor_arg("min") || k.is_tensor_arg("max") {
                return Ok(None);
            }
            (
                UnaryOp::Clamp,
                f(k.op.opt_scalar("min")?, f64::NEG_INFINITY),
                f(k.op.opt_scalar("max")?, f64::INFINITY),
            )
        }
        "aten.hardtanh" => (
            UnaryOp::Clamp,
            f(k.op.opt_scalar("min_val")?, -1.0),
            f(k.op.opt_scalar("max_val")?, 1.0),
        ),
        "aten.relu6" => (UnaryOp::Clamp, 0.0, 6.0),
        "aten.leaky_relu" => (
            UnaryOp::LeakyRelu,
            f(k.op.opt_scalar("negative_slope")?, 0.01),
            0.0,
        ),
        "aten.elu" => {
            let scale = f(k.op.opt_scalar("scale")?, 1.0);
            let input_scale = f(k.op.opt_scalar("input_scale")?, 1.0);
            let alpha = f(k.op.opt_scalar("alpha")?, 1.0);
            return one(elementwise_p(
                k,
                UnaryOp::Elu.variant(),
                d,
                &x,
                None,
                None,
                [alpha * scale, input_scale, scale],
                0,
            ));
        }
        "aten.softplus" => (
            UnaryOp::Softplus,
            f(k.op.opt_scalar("beta")?, 1.0),
            f(k.op.opt_scalar("threshold")?, 20.0),
        ),
        _ => return Ok(None),
    };
    one(elementwise(k, u.variant(), d, &x, None, None, alpha, beta))
}

/// clone, _to_copy (f32 to f32), copy(self, src), lift_fresh_copy: a strided copy.
fn copy(k: &mut Kc) -> Out {
    // Between f16 and f32 (or f16 to f16): a converting strided copy.
    if let (Some(x), Some(od)) = (k.t("self"), k.out_dtype(0)) {
        let op = k.target().rsplit_once('.').map_or("", |(o, _)| o);
        if op != "aten.copy"
            && (x.dtype == DType::F16 || od == DType::F16)
            && is_float(x.dtype)
            && is_float(od)
        {
            return one(elementwise(
                k,
                UnaryOp::Copy.variant(),
                od,
                &x,
                None,
                None,
                1.0,
                0.0,
            ));
        }
    }
    if !k.out_is(DType::F32)
        || k.t("self").is_some_and(|x| x.dtype != DType::F32)
        || k.t("src").is_some_and(|x| x.dtype != DType::F32)
    {
        return ints::copy_any(k);
    }
    let op = k
        .target()
        .rsplit_once('.')
        .map_or("", |(o, _)| o)
        .to_string();
    let src = if op == "aten.copy" {
        let (Some(dst), Some(src)) = (k.t("self"), k.t("src")) else {
            return Ok(None);
        };
        if dst.dtype != DType::F32 {
            return Ok(None);
        }
        match src.expand_to(&dst.sizes) {
            Some(s) => s,
            None => return Ok(None),
        }
    } else {
        let Some(x) = k.t("self") else {
            return Ok(None);
        };
        if let Some(d) = k.op.opt_dtype("dtype")? {
            if d != x.dtype {
                return Ok(None);
            }
        }
        x
    };
    if src.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    one(elementwise(
        k,
        UnaryOp::Copy.variant(),
        DType::F32,
        &src,
        None,
        None,
        1.0,
        0.0,
    ))
}

/// A contiguous copy of `x` (or `x` itself when it already is one starting at 0).
pub(crate) fn contiguous(k: &mut Kc, x: &GTensor) -> Result<Option<GTensor>> {
    if x.is_contiguous() && x.offset == 0 {
        k.ensure(x)?;
        return Ok(Some(x.clone()));
    }
    elementwise(k, UnaryOp::Copy.variant(), x.dtype, x, None, None, 1.0, 0.0)
}

/// Metadata-only views through the CPU kernel on a placeholder (see the executor doc).
fn view(k: &mut Kc) -> Out {
    let Some(kernel) = table().cpu_kernel(k.target()) else {
        return Ok(None);
    };
    let mut ids = Vec::new();
    k.op.node
        .inputs
        .iter()
        .for_each(|(_, a)| a.values(&mut ids));
    let mut env: Vec<Option<RValue>> = k.op.env.to_vec();
    let mut placeholders: Vec<(Arc<RwLock<Data>>, GTensor)> = Vec::new();
    for id in ids {
        let Some(t) = k.env_t.get(id).and_then(|t| t.clone()) else {
            continue;
        };
        let Some(data) = Data::zeros(t.dtype, t.span()) else {
            return Ok(None);
        };
        let data = Arc::new(RwLock::new(data));
        env[id] = Some(RValue::Tensor(Tensor {
            dtype: t.dtype,
            sizes: t.sizes.clone(),
            strides: t.strides.clone(),
            offset: t.offset,
            data: data.clone(),
        }));
        placeholders.push((data, t));
    }
    let outs = {
        let mut ctx = OpCtx {
            node: k.op.node,
            graph: k.op.graph,
            env: &env,
            state: &mut *k.op.state,
        };
        match kernel(&mut ctx) {
            Ok(o) => o,
            // The CPU kernel will report the same error with real data.
            Err(_) => return Ok(None),
        }
    };
    let map = |t: &Tensor| -> Option<GTensor> {
        placeholders
            .iter()
            .find(|(d, _)| Arc::ptr_eq(d, &t.data))
            .map(|(_, g)| g.view(t.sizes.clone(), t.strides.clone(), t.offset))
    };
    // The CPU kernel copied (a reshape of a tensor whose strides cannot be merged): the
    // result is the input's elements in row-major order, so a contiguous GPU copy of the
    // input, viewed in the new shape, is it.
    let op = k.target().rsplit_once('.').map_or("", |(o, _)| o);
    let row_major_copy = matches!(
        op,
        "aten.reshape"
            | "aten.reshape_as"
            | "aten._unsafe_view"
            | "aten.flatten"
            | "aten.unflatten"
            | "aten.contiguous"
    ) && (placeholders.len() == 1 || op == "aten.reshape_as");
    let mut copied: Option<(Vec<usize>, GTensor)> = None;
    let mut slots = Vec::new();
    for o in outs {
        slots.push(match o {
            RValue::Tensor(t) => match map(&t) {
                Some(g) => Slot::T(g),
                None if row_major_copy
                    && t.is_contiguous()
                    && t.numel() == placeholders[0].1.numel()
                    && copied.is_none() =>
                {
                    copied = Some((t.sizes.clone(), placeholders[0].1.clone()));
                    Slot::V(RValue::None)
                }
                None => return Ok(None),
            },
            RValue::Tensors(ts) => {
                let mut v = Vec::new();
                for t in &ts {
                    match map(t) {
                        Some(g) => v.push(g),
                        None => return Ok(None),
                    }
                }
                Slot::Ts(v)
            }
            other => Slot::V(other),
        });
    }
    if let Some((sizes, x)) = copied {
        if slots.len() != 1 {
            return Ok(None);
        }
        let Some(xc) = contiguous(k, &x)? else {
            return Ok(None);
        };
        let st = contiguous_strides(&sizes);
        slots = vec![Slot::T(xc.view(sizes, st, xc.offset))];
    }
    Ok(Some(slots))
}

/// (batch, row, col) strides and offset of a rank-2 or rank-3 view (batch stride 0 for 2-D).
fn mat_strides(t: &GTensor) -> [u32; 4] {
    let r = t.rank();
    let b = if r == 3 { t.strides[0] } else { 0 };
    [
        b as u32,
        t.strides[r - 2] as u32,
        t.strides[r - 1] as u32,
        t.offset as u32,
    ]
}

/// The checks and uploads every matrix-multiply dispatch shares: A, B and C within a binding,
/// a grid of `tile` x `tile` outputs per workgroup within the device's limits, and the
/// operands on the GPU. Returns the output sizes ([B, M, N], or [M, N] for a 2-D A).
#[allow(clippy::too_many_arguments)]
pub(super) fn matmul_operands(
    k: &mut Kc,
    a: &GTensor,
    bm: &GTensor,
    c: Option<&GTensor>,
    batch: usize,
    m: usize,
    n: usize,
    tile: usize,
) -> Result<Option<Vec<usize>>> {
    let maxg =
        k.r.dev
            .properties
            .limits
            .max_compute_workgroups_per_dimension as usize;
    if !k.fits(a)
        || !k.fits(bm)
        || c.is_some_and(|c| !k.fits(c))
        || batch > maxg
        || m.div_ceil(tile) > maxg
        || n.div_ceil(tile) > maxg
    {
        return Ok(None);
    }
    k.ensure(a)?;
    k.ensure(bm)?;
    if let Some(c) = c {
        k.ensure(c)?;
    }
    Ok(Some(if a.rank() == 3 {
        vec![batch, m, n]
    } else {
        vec![m, n]
    }))
}

/// out[b] = alpha * a[b] @ bm[b] (+ beta * c[b]); a is [B?, M, K], bm is [B?, K, N].
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_matmul(
    k: &mut Kc,
    a: &GTensor,
    bm: &GTensor,
    c: Option<&GTensor>,
    batch: usize,
    m: usize,
    n: usize,
    kk: usize,
    alpha: f32,
    beta: f32,
) -> Result<Option<GTensor>> {
    let Some(sizes) = matmul_operands(k, a, bm, c, batch, m, n, 32)? else {
        return Ok(None);
    };
    let Some(mut elems) = k.elems(a.dtype, a.dtype) else {
        return Ok(None);
    };
    if bm.dtype != a.dtype || c.is_some_and(|c| c.dtype != a.dtype) {
        return Ok(None);
    }
    if elems == Elems::F16 && crate::backends::allow_f16_reduced_precision() {
        elems = Elems::F16Acc;
    }
    let out = k.new_out(a.dtype, &sizes)?;
    if batch * m * n == 0 {
        return Ok(Some(out));
    }
    let meta = MatmulMeta {
        m: m as u32,
        n: n as u32,
        k: kk as u32,
        flags: c.is_some() as u32,
        a: mat_strides(a),
        b: mat_strides(bm),
        c: c.map(mat_strides).unwrap_or_default(),
        alpha,
        beta,
        _p: [0.0; 2],
    };
    // The vec4 forms (matmul4.wgsl): f32, K contiguous in A and in B (`mm_kk`) or N
    // contiguous in B (`mm_kn`), every stride, offset, K (and N for `mm_kn`) a multiple of 4.
    if elems == Elems::F32 && kk % 4 == 0 && meta.a[2] == 1 && matmul4_enabled() {
        let (av, bv) = (meta.a, meta.b);
        let a4 = [av[0], av[1], av[3]].iter().all(|s| s % 4 == 0);
        let kk_form = bv[1] == 1 && [bv[0], bv[2], bv[3]].iter().all(|s| s % 4 == 0);
        let kn_form = bv[2] == 1 && n % 4 == 0 && [bv[0], bv[1], bv[3]].iter().all(|s| s % 4 == 0);
        if a4 && (kk_form || kn_form) {
            let v = MATMUL4[usize::from(!kk_form)];
            let groups = (
                n.div_ceil(8 * MM4_COLS) as u32,
                m.div_ceil(8 * MM4_ROWS) as u32,
                batch as u32,
            );
            let bufs = [(1, &out), (2, a), (3, bm), (4, c.unwrap_or(a))];
            k.dispatch(&v, bytemuck::bytes_of(&meta), &bufs, groups)?;
            return Ok(Some(out));
        }
    }
    // 8x8 invocations of 4x4 outputs each (shaders/matmul.wgsl).
    let groups = (n.div_ceil(32) as u32, m.div_ceil(32) as u32, batch as u32);
    match c {
        Some(c) => k.dispatch(
            &MATMUL_BIAS.typed(elems),
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, a), (3, bm), (4, c)],
            groups,
        )?,
        None => k.dispatch(
            &MATMUL.typed(elems),
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, a), (3, bm)],
            groups,
        )?,
    }
    Ok(Some(out))
}

/// All f32, or all f16 (matmul operands; the output has their dtype).
fn same_float(ts: &[&GTensor]) -> bool {
    ts.first()
        .is_some_and(|f| is_float(f.dtype) && ts.iter().all(|t| t.dtype == f.dtype))
}

/// mm, bmm, and matmul of 2-D/3-D operands with matching batch.
fn matmul(k: &mut Kc) -> Out {
    let other = if k.op.arg("mat2").is_some() {
        "mat2"
    } else {
        "other"
    };
    let (Some(a), Some(b)) = (k.t("self"), k.t(other)) else {
        return Ok(None);
    };
    if !same_float(&[&a, &b]) || !k.out_is(a.dtype) {
        return Ok(None);
    }
    match (a.rank(), b.rank()) {
        (2, 2) if a.sizes[1] == b.sizes[0] => one(encode_matmul(
            k, &a, &b, None, 1, a.sizes[0], b.sizes[1], a.sizes[1], 1.0, 0.0,
        )),
        (3, 3) if a.sizes[0] == b.sizes[0] && a.sizes[2] == b.sizes[1] => one(encode_matmul(
            k, &a, &b, None, a.sizes[0], a.sizes[1], b.sizes[2], a.sizes[2], 1.0, 0.0,
        )),
        // [B, M, K] @ [K, N]: the 2-D operand broadcast over the batch (batch stride 0).
        (3, 2) if a.sizes[2] == b.sizes[0] => {
            let bb = b.view(
                vec![a.sizes[0], b.sizes[0], b.sizes[1]],
                vec![0, b.strides[0], b.strides[1]],
                b.offset,
            );
            one(encode_matmul(
                k, &a, &bb, None, a.sizes[0], a.sizes[1], b.sizes[1], a.sizes[2], 1.0, 0.0,
            ))
        }
        _ => Ok(None),
    }
}

/// addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * mat1 @ mat2.
fn addmm(k: &mut Kc) -> Out {
    let (Some(c), Some(a), Some(b)) = (k.t("self"), k.t("mat1"), k.t("mat2")) else {
        return Ok(None);
    };
    if !same_float(&[&a, &b, &c]) || !k.out_is(a.dtype) || a.rank() != 2 || b.rank() != 2 {
        return Ok(None);
    }
    let (m, kk, n) = (a.sizes[0], a.sizes[1], b.sizes[1]);
    if b.sizes[0] != kk {
        return Ok(None);
    }
    let Some(cb) = c.expand_to(&[m, n]) else {
        return Ok(None);
    };
    let beta = k.op.float_or("beta", 1.0)? as f32;
    let alpha = k.op.float_or("alpha", 1.0)? as f32;
    one(encode_matmul(
        k,
        &a,
        &b,
        Some(&cb),
        1,
        m,
        n,
        kk,
        alpha,
        beta,
    ))
}

/// linear(input [..., K], weight [N, K], bias [N]?) = input @ weight^T + bias.
fn linear(k: &mut Kc) -> Out {
    let (Some(x), Some(w)) = (k.t("input"), k.t("weight")) else {
        return Ok(None);
    };
    let bias = k.t("bias");
    if !same_float(&[&x, &w]) || bias.as_ref().is_some_and(|b| b.dtype != x.dtype) {
        return Ok(None);
    }
    if !k.out_is(x.dtype) || x.rank() == 0 || w.rank() != 2 {
        return Ok(None);
    }
    let kk = x.sizes[x.rank() - 1];
    let n = w.sizes[0];
    if w.sizes[1] != kk
        || bias
            .as_ref()
            .is_some_and(|b| b.rank() != 1 || b.sizes[0] != n)
    {
        return Ok(None);
    }
    let lead: Vec<usize> = x.sizes[..x.rank() - 1].to_vec();
    let m: usize = lead.iter().product();
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let a = xc.view(vec![m, kk], vec![kk, 1], xc.offset);
    let wt = w.view(vec![kk, n], vec![w.strides[1], w.strides[0]], w.offset);
    let c = bias.map(|b| b.view(vec![m, n], vec![0, b.strides[0]], b.offset));
    let Some(out) = encode_matmul(k, &a, &wt, c.as_ref(), 1, m, n, kk, 1.0, 1.0)? else {
        return Ok(None);
    };
    let mut sizes = lead;
    sizes.push(n);
    let st = contiguous_strides(&sizes);
    Ok(Some(vec![Slot::T(out.view(sizes, st, 0))]))
}

fn norm_dim(d: i64, rank: usize) -> Option<usize> {
    let r = rank.max(1) as i64;
    let d = if d < 0 { d + r } else { d };
    (0..r).contains(&d).then_some(d as usize)
}

/// softmax / log_softmax along `dim`.
fn softmax(k: &mut Kc) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    // f32, f16, or f16 in and f32 out (`_softmax(half_to_float=True)`, softmax(dtype=)).
    let Some(od) = k.out_dtype(0) else {
        return Ok(None);
    };
    let Some(elems) = k.elems(x.dtype, od) else {
        return Ok(None);
    };
    let log = k.target().contains("log_softmax");
    // _safe_softmax: fully masked (all -inf) rows give zeros.
    let safe = k.target().starts_with("aten._safe_softmax.");
    // A 0-d tensor is one row of one element.
    let zero_d = x.rank() == 0;
    let x = if zero_d {
        x.view(vec![1], vec![1], x.offset)
    } else {
        x
    };
    let Some(dim) = norm_dim(k.op.int("dim")?, x.rank()) else {
        return Ok(None);
    };
    // Move `dim` last (a view), make it contiguous, run rows, move it back with a copy.
    let r = x.rank();
    let mut perm: Vec<usize> = (0..r).filter(|&d| d != dim).collect();
    perm.push(dim);
    let pv = x.view(
        perm.iter().map(|&d| x.sizes[d]).collect(),
        perm.iter().map(|&d| x.strides[d]).collect(),
        x.offset,
    );
    let Some(xc) = contiguous(k, &pv)? else {
        return Ok(None);
    };
    let cols = x.sizes[dim];
    let rows = x.numel() / cols.max(1);
    let out = k.new_out(od, &pv.sizes)?;
    if rows * cols > 0 {
        let base = if safe {
            SAFE_SOFTMAX
        } else if log {
            LOG_SOFTMAX
        } else {
            SOFTMAX
        }
        .typed(elems);
        let (v, (gx, gy, row)) = softmax_dispatch(base, rows, cols);
        let meta = RowMeta {
            rows: rows as u32,
            cols: cols as u32,
            row,
            ..Default::default()
        };
        k.dispatch(
            &v,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &xc)],
            (gx, gy, 1),
        )?;
    }
    if zero_d {
        return Ok(Some(vec![Slot::T(out.view(vec![], vec![], 0))]));
    }
    if dim == r - 1 {
        return Ok(Some(vec![Slot::T(out)]));
    }
    // out is laid out in `perm` order; view it in the original order and copy.
    let mut strides = vec![0; r];
    for (i, &d) in perm.iter().enumerate() {
        strides[d] = out.strides[i];
    }
    let back = out.view(x.sizes.clone(), strides, 0);
    one(elementwise(
        k,
        UnaryOp::Copy.variant(),
        od,
        &back,
        None,
        None,
        1.0,
        0.0,
    ))
}

/// sum / mean (dim list or all), amax / amin.
fn reduce(k: &mut Kc) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let op = k
        .target()
        .rsplit_once('.')
        .map_or("", |(o, _)| o)
        .to_string();
    if matches!(op.as_str(), "aten.nansum" | "aten.nanmean") {
        return nan_reduce(k, x, &op);
    }
    let word = x.dtype == DType::Bool || ints::is_int(x.dtype);
    // mean of an int tensor with dtype=float32: the mean of its f32 conversion.
    if op == "aten.mean" && word && k.out_is(DType::F32) {
        let Some(xf) = to_f32(k, &x)? else {
            return Ok(None);
        };
        return reduce_with(k, xf, &op);
    }
    // any / all of an int tensor: of `x != 0` (a uint8 result for uint8, as torch).
    if matches!(op.as_str(), "aten.any" | "aten.all") && ints::is_int(x.dtype) {
        if !(k.out_is(DType::Bool) || (x.dtype == DType::U8 && k.out_is(DType::U8))) {
            return Ok(None);
        }
        let ne = ints::IntCompareOp::Ne.variant();
        let w0 = ints::WOperand::W(0);
        let Some(nz) = ints::encode(k, ne, DType::Bool, &x, Some(&w0), None, 0, 0)? else {
            return Ok(None);
        };
        return reduce_with(k, nz, &op);
    }
    // any / all of a float tensor: of `x != 0` (NaN counts as true).
    if matches!(op.as_str(), "aten.any" | "aten.all") && x.dtype == DType::F32 {
        if !k.out_is(DType::Bool) {
            return Ok(None);
        }
        let Some(nz) = elementwise(
            k,
            CompareOp::Ne.variant(),
            DType::Bool,
            &x,
            Some(&Operand::S(0.0)),
            None,
            1.0,
            0.0,
        )?
        else {
            return Ok(None);
        };
        return reduce_with(k, nz, &op);
    }
    reduce_with(k, x, &op)
}

/// nansum / nanmean of f32: the sum of `x` with NaNs as zeros (over the count of the
/// non-NaN elements for nanmean), as torch's decompositions.
fn nan_reduce(k: &mut Kc, x: GTensor, op: &str) -> Out {
    if x.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let Some(nan) = elementwise(
        k,
        CompareOp::IsNan.variant(),
        DType::Bool,
        &x,
        Some(&Operand::S(0.0)),
        None,
        1.0,
        0.0,
    )?
    else {
        return Ok(None);
    };
    // where_ computes cond ? a : b; flags bit 1 negates the condition: !isnan ? x : 0.
    let Some(zeroed) = elementwise_p(
        k,
        WHERE,
        DType::F32,
        &x,
        Some(&Operand::S(0.0)),
        Some(&nan),
        [1.0, 0.0, 0.0],
        2,
    )?
    else {
        return Ok(None);
    };
    let Some(sum) = one_t(reduce_with(k, zeroed, "aten.sum")?) else {
        return Ok(None);
    };
    if op == "aten.nansum" {
        return Ok(Some(vec![Slot::T(sum)]));
    }
    // The count of non-NaN elements: 1 - isnan as f32, summed.
    let Some(isnan_f) = to_f32(k, &nan)? else {
        return Ok(None);
    };
    let Some(keep) = elementwise(
        k,
        UnaryOp::Affine.variant(),
        DType::F32,
        &isnan_f,
        None,
        None,
        -1.0,
        1.0,
    )?
    else {
        return Ok(None);
    };
    let Some(count) = one_t(reduce_with(k, keep, "aten.sum")?) else {
        return Ok(None);
    };
    one(elementwise(
        k,
        BinaryOp::Div.variant(),
        DType::F32,
        &sum,
        Some(&Operand::T(count)),
        None,
        1.0,
        0.0,
    ))
}

/// The one tensor of a kernel's result.
fn one_t(r: Option<Vec<Slot>>) -> Option<GTensor> {
    match r.as_deref() {
        Some([Slot::T(t)]) => Some(t.clone()),
        _ => None,
    }
}

/// sum / mean / amax / amin / any / all (`op`) of `x` over the node's dims.
fn reduce_with(k: &mut Kc, x: GTensor, op: &str) -> Out {
    // int / bool inputs: an int output (sum), or the input's int dtype (amax, amin).
    let int_mode = !is_float(x.dtype);
    // amax / amin of bools are any / all.
    let logical = matches!(op, "aten.any" | "aten.all")
        || (x.dtype == DType::Bool && matches!(op, "aten.amax" | "aten.amin"));
    let out_dtype = if logical {
        // any / all of bools: max / min of the 0/1 words (as bool, or uint8 for uint8).
        match k.out_dtype(0) {
            Some(d @ (DType::Bool | DType::U8)) if x.dtype == DType::Bool => d,
            _ => return Ok(None),
        }
    } else if int_mode {
        match k.out_dtype(0) {
            Some(d) if ints::is_int(d) && (ints::is_int(x.dtype) || x.dtype == DType::Bool) => d,
            _ => return Ok(None),
        }
    } else {
        // f32, or f16 in (sum/mean/amax/amin of f16 give f16, or f32 with dtype=).
        match k.out_dtype(0) {
            Some(d) if k.elems(x.dtype, d).is_some() => d,
            _ => return Ok(None),
        }
    };
    if !k.out_is(out_dtype) || !k.fits(&x) {
        return Ok(None);
    }
    if let Some(d) = k.op.opt_dtype("dtype")? {
        if d != out_dtype {
            return Ok(None);
        }
    }
    let r = x.rank();
    let dims: Vec<i64> = match k.op.arg("dim") {
        None | Some(Arg::None) => vec![],
        Some(_) => k.op.ints("dim")?,
    };
    let mut red = vec![false; r];
    if dims.is_empty() {
        red.iter_mut().for_each(|x| *x = true);
    } else {
        for d in dims {
            match norm_dim(d, r) {
                Some(d) if d < r => red[d] = true,
                _ if r == 0 => {}
                _ => return Ok(None),
            }
        }
    }
    let keepdim = k.op.bool_or("keepdim", false)?;
    let kept: Vec<usize> = (0..r).filter(|&d| !red[d]).collect();
    let rd: Vec<usize> = (0..r).filter(|&d| red[d]).collect();
    let n_red: usize = rd.iter().map(|&d| x.sizes[d]).product();
    let n_out: usize = kept.iter().map(|&d| x.sizes[d]).product();
    let (rop, scale) = match op {
        "aten.sum" => (ReduceOp::Sum, 1.0),
        "aten.mean" => (ReduceOp::Sum, 1.0 / n_red as f32),
        "aten.amax" => (ReduceOp::Max, 1.0),
        "aten.amin" => (ReduceOp::Min, 1.0),
        "aten.any" => (ReduceOp::Max, 1.0),
        "aten.all" => (ReduceOp::Min, 1.0),
        _ => return Ok(None),
    };
    if n_red == 0 && rop != ReduceOp::Sum && !(logical && matches!(op, "aten.any" | "aten.all")) {
        return Ok(None);
    }
    if int_mode
        && !logical
        && (op == "aten.mean" || (rop != ReduceOp::Sum && x.dtype == DType::Bool))
    {
        return Ok(None);
    }
    let out_sizes: Vec<usize> = if keepdim {
        (0..r)
            .map(|d| if red[d] { 1 } else { x.sizes[d] })
            .collect()
    } else {
        kept.iter().map(|&d| x.sizes[d]).collect()
    };
    // any / all over no elements: false / true.
    if n_red == 0 && logical {
        let w = (op == "aten.all") as u32;
        return index::encode_fill(k, out_dtype, &out_sizes, 0, [w, 0]);
    }
    k.ensure(&x)?;
    let out = k.new_out(out_dtype, &out_sizes)?;
    if n_out == 0 {
        return Ok(Some(vec![Slot::T(out)]));
    }
    let sel = |ds: &[usize], v: &[usize]| -> Vec<usize> { ds.iter().map(|&d| v[d]).collect() };
    let (gx, gy, row) = grid(n_out, 64);
    let meta = ReduceMeta {
        n_out: n_out as u32,
        n_red: n_red as u32,
        kept_rank: kept.len() as u32,
        red_rank: rd.len() as u32,
        kept_shape: pad8(&sel(&kept, &x.sizes)),
        kept_strides: pad8(&sel(&kept, &x.strides)),
        red_shape: pad8(&sel(&rd, &x.sizes)),
        red_strides: pad8(&sel(&rd, &x.strides)),
        offset: x.offset as u32,
        row,
        scale,
        // reduce_i: a small int output wraps to its dtype (sum(dtype=torch.uint8)).
        p: f32::from_bits(super::store::SmallInt::code(out_dtype)),
    };
    let (v, bufs) = match k.elems(x.dtype, out_dtype) {
        Some(e) if !int_mode => (rop.variant().typed(e), [(1, &out), (2, &x)]),
        _ => (rop.int_variant(), [(3, &out), (4, &x)]),
    };
    k.dispatch(&v, bytemuck::bytes_of(&meta), &bufs, (gx, gy, 1))?;
    Ok(Some(vec![Slot::T(out)]))
}

/// layer_norm / native_layer_norm over the trailing `normalized_shape` dims.
fn layer_norm(k: &mut Kc) -> Out {
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let (w, b) = (k.t("weight"), k.t("bias"));
    let d = x.dtype;
    let Some(elems) = k.elems(d, d) else {
        return Ok(None);
    };
    if !k.out_is(d)
        || w.as_ref().is_some_and(|t| t.dtype != d)
        || b.as_ref().is_some_and(|t| t.dtype != d)
    {
        return Ok(None);
    }
    // The mean and rstd outputs have the input's dtype (the shader writes them as TOut).
    let stats = k.target().starts_with("aten.native_layer_norm");
    if stats && (k.out_dtype(1) != Some(d) || k.out_dtype(2) != Some(d)) {
        return Ok(None);
    }
    let ns = k.op.ints("normalized_shape")?;
    let r = x.rank();
    if ns.is_empty() || ns.len() > r {
        return Ok(None);
    }
    let axis = r - ns.len();
    if x.sizes[axis..]
        .iter()
        .zip(&ns)
        .any(|(&a, &b)| a as i64 != b)
    {
        return Ok(None);
    }
    let eps = k.op.float_or("eps", 1e-5)? as f32;
    let cols: usize = x.sizes[axis..].iter().product();
    let rows: usize = x.sizes[..axis].iter().product();
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let wc = match &w {
        Some(w) => match contiguous(k, w)? {
            Some(t) => Some(t),
            None => return Ok(None),
        },
        None => None,
    };
    let bc = match &b {
        Some(b) => match contiguous(k, b)? {
            Some(t) => Some(t),
            None => return Ok(None),
        },
        None => None,
    };
    let out = k.new_out(d, &x.sizes)?;
    let mut stat_sizes: Vec<usize> = x.sizes[..axis].to_vec();
    stat_sizes.extend(std::iter::repeat_n(1, ns.len()));
    let mean = k.new_out(d, &stat_sizes)?;
    let rstd = k.new_out(d, &stat_sizes)?;
    if rows * cols > 0 {
        // One invocation per short row (no barriers), else a 64-thread group per row.
        let (v, (gx, gy, row)) = if cols <= SHORT_ROW {
            (LAYER_NORM_ROW, grid(rows, 64))
        } else {
            let (gx, gy, _) = grid(rows, 1);
            (LAYER_NORM, (gx, gy, gx))
        };
        let meta = RowMeta {
            rows: rows as u32,
            cols: cols as u32,
            row,
            flags: wc.is_some() as u32 | ((bc.is_some() as u32) << 1),
            eps,
            _p: [0.0; 3],
        };
        let wref = wc.as_ref().unwrap_or(&xc);
        let bref = bc.as_ref().unwrap_or(&xc);
        k.dispatch(
            &v.typed(elems),
            bytemuck::bytes_of(&meta),
            &[
                (1, &out),
                (2, &xc),
                (3, wref),
                (4, bref),
                (5, &mean),
                (6, &rstd),
            ],
            (gx, gy, 1),
        )?;
    }
    if stats {
        Ok(Some(vec![Slot::T(out), Slot::T(mean), Slot::T(rstd)]))
    } else {
        Ok(Some(vec![Slot::T(out)]))
    }
}
