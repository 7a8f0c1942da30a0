//! Kernel parameter structs (the uniform blocks the shaders read), the op codes of the
//! elementwise and reduction shaders, and the shader variants the kernels of this module
//! dispatch.

use super::*;

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
    /// Norms: 0 when the weight and bias run along the row (layer norm); else the row is
    /// `groups`' share of channels times `inner` elements each, and the weight and bias are
    /// per channel (group norm).
    pub inner: u32,
    pub groups: u32,
    pub _p: f32,
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
    /// `reduce` / `reduce_i` in parts: each output's reduced elements split into `chunks`
    /// runs of `chunk_len` (0: one run), a partial result per (output, run), row-major.
    pub chunks: u32,
    pub chunk_len: u32,
    /// 1: the second pass of `arg_reduce(_i)` / `scan(_i)` in parts (reduce.wgsl).
    pub join: u32,
    pub _pad: u32,
}

/// An enum of op codes and the WGSL `const`s the shader switches on: `Name::Variant = n`
/// becomes `const Name_Variant: u32 = nu;` at the top of the shader's module
/// ([`crate::gpu::shaders::Shader::module`]), so the WGSL names each code (`case
/// UnaryOp_Silu:`) and a renumbered or missing one fails naga's validation, not a result.
macro_rules! code_enum {
    ($(#[$m:meta])* $vis:vis $name:ident, $shaders:expr, [$($v:ident = $n:expr),* $(,)?]) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name { $($v = $n),* }
        impl $name {
            /// The shader's constants for the codes.
            pub const CODES: crate::gpu::shaders::OpCodes = crate::gpu::shaders::OpCodes {
                shaders: $shaders,
                name: stringify!($name),
                codes: &[$((stringify!($v), $n)),*],
            };
        }
    };
}

/// A [`code_enum!`] whose codes are the value of the shader's override constant `$const`
/// for entry point `$entry` (one pipeline per code).
macro_rules! op_enum {
    ($name:ident, $shader:expr, $entry:expr, $const:expr, [$($v:ident = $n:expr),* $(,)?]) => {
        code_enum!(pub $name, &[$shader], [$($v = $n),*]);
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            pub const fn variant(self) -> Variant {
                Variant::with($shader, $entry, $const, self as u32)
            }
        }
    };
}

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
        Lgamma = 58,
        Digamma = 59,
        I0 = 60,
        I0e = 61,
        I1 = 62,
        I1e = 63,
        Ndtri = 64,
        Ndtr = 65,
        LogNdtr = 66,
        Erfcx = 67,
        Entr = 68,
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
        Xlog1py = 21,
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

// The reductions of int / bool words into an int output (`reduce_i`).
op_enum!(
    ReduceIntOp,
    Shader::Reduce,
    "reduce_i",
    "OP",
    [Sum = 0, Max = 1, Min = 2, Prod = 3]
);

impl ReduceOp {
    /// The int / bool variant (`reduce_i`, an int output).
    pub fn int_variant(self) -> Variant {
        match self {
            ReduceOp::Sum => ReduceIntOp::Sum,
            ReduceOp::Max => ReduceIntOp::Max,
            ReduceOp::Min => ReduceIntOp::Min,
        }
        .variant()
    }
}

pub const WHERE: Variant = Variant::new(Shader::Elementwise, "where_");
/// lerp with a tensor weight (bound as `c`, read through `c_strides`).
pub const LERP3: Variant = Variant::new(Shader::Elementwise, "lerp3");
/// clamp with tensor bounds (the upper one bound as `c`).
pub const CLAMP3: Variant = Variant::new(Shader::Elementwise, "clamp3");
pub const MATMUL: Variant = Variant::new(Shader::Matmul, "matmul");
pub const MATMUL_BIAS: Variant = Variant::new(Shader::Matmul, "matmul_bias");
/// Few rows (decode): 4 outputs of one row per invocation (shaders/matmul.wgsl).
pub const GEMV: Variant = Variant::new(Shader::Matmul, "gemv");
pub const GEMV_BIAS: Variant = Variant::new(Shader::Matmul, "gemv_bias");
/// Few rows on GPUs: a 64-invocation workgroup per 4 outputs, splitting K (see [`GemvForm`]).
pub const GEMV_SPLIT: Variant = Variant::new(Shader::Matmul, "gemv_split");
pub const GEMV_SPLIT_BIAS: Variant = Variant::new(Shader::Matmul, "gemv_split_bias");
/// The workgroup-tiled forms (64x64 tiles through workgroup memory; GPUs).
pub const MATMUL_TILED: Variant = Variant::new(Shader::Matmul, "matmul_tiled");
pub const MATMUL_TILED_BIAS: Variant = Variant::new(Shader::Matmul, "matmul_tiled_bias");
/// shaders/matmul4.wgsl (f32 with vec4 loads, written by scripts/gen_matmul4.py): B
/// contiguous along K (`_kk`) or along N (`_kn`); 8x8 outputs per invocation.
pub const MATMUL4: [Variant; 2] = [
    Variant::new(Shader::Matmul4, "mm4_kk"),
    Variant::new(Shader::Matmul4, "mm4_kn"),
];
/// The same with 16x16 outputs per invocation (large products; shaders/matmul4_16.wgsl).
pub const MATMUL4_16: [Variant; 2] = [
    Variant::new(Shader::Matmul4x16, "mm4_16_kk"),
    Variant::new(Shader::Matmul4x16, "mm4_16_kn"),
];
/// Whether the vec4 matmul forms are used (`PT2WEB_MATMUL4=0` turns them off natively, to
/// compare).
pub(super) fn matmul4_enabled() -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if std::env::var("PT2WEB_MATMUL4").as_deref() == Ok("0") {
        return false;
    }
    true
}

/// The square block (rows = columns) one invocation of a matmul4.wgsl variant computes, in an
/// 8x8 workgroup, for an M x N x K product: 16x16 where `big` allows it and it pays
/// (bench/shader_micro.mjs on SwiftShader: M >= 16 without many padded rows, N >= 64 so no
/// SIMD lane idles, K >= 32 so the loads saved outweigh the rows loaded for nothing), else 8x8.
pub(super) fn matmul4_block(m: usize, n: usize, k: usize, big: bool) -> (usize, [Variant; 2]) {
    if big && (m.is_multiple_of(16) || m >= 64) && m >= 16 && n >= 64 && k >= 32 {
        (16, MATMUL4_16)
    } else {
        (8, MATMUL4)
    }
}

/// Whether matmul4's 16x16 block may run on this device: in the browser, whose software
/// adapter (SwiftShader) gathers every load lane by lane and compiles the block in its fast
/// JIT; not natively, where lavapipe runs it slower (warm resnet18 1.40 -> 1.95 s, MiniLM
/// 1.10 -> 1.88 s) and its LLVM compiles it slowly (the MiniLM GPU test with no shader
/// cache: 7 s with the 8x8 block, 24 s with 16x16). `PT2WEB_MATMUL4=16` allows it natively
/// (to test it on lavapipe).
pub(super) fn matmul4_big_blocks(p: &crate::gpu::DeviceProperties) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if std::env::var("PT2WEB_MATMUL4").as_deref() == Ok("16") {
        return true;
    }
    p.backend == "webgpu"
}

pub const SOFTMAX: Variant = Variant::with(Shader::Rows, "softmax", "LOG", 0);
pub const LOG_SOFTMAX: Variant = Variant::with(Shader::Rows, "softmax", "LOG", 1);
/// Softmax whose fully masked (all -inf) rows are zeros (attention).
pub const SAFE_SOFTMAX: Variant = Variant::with(Shader::Rows, "softmax", "LOG", 2);
/// Rows up to this long run one invocation per row (`softmax_row`, no barriers).
pub const SHORT_ROW: usize = 1024;

/// How a row kernel (softmax, log_softmax, layer and group norm) covers its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowForm {
    /// One invocation per row (the `*_row` entries): no workgroup memory, no barriers.
    Thread,
    /// A 64-invocation workgroup per row, reducing through workgroup memory.
    Workgroup,
    /// A workgroup per row, reducing with subgroup operations (`Shader::RowsSubgroup`).
    Subgroup,
}

impl RowForm {
    /// The form for rows of `cols` on `dev` ([`crate::backends::set_row_algorithm`], or
    /// natively `PT2WEB_ROW_KERNEL`): with `Auto`, on CPU adapters and SwiftShader (which
    /// switch fibers at every barrier) a thread per row up to [`SHORT_ROW`] and a workgroup
    /// past it; on GPUs a workgroup per row (subgroup reductions where the device has them)
    /// unless rows are shorter than half a workgroup.
    pub(crate) fn of(dev: &crate::gpu::GpuDevice, cols: usize) -> RowForm {
        use crate::backends::RowAlgorithm;
        let chosen = row_algorithm();
        let group = if dev.subgroups_enabled() {
            RowForm::Subgroup
        } else {
            RowForm::Workgroup
        };
        // A thread per row walks it four times (softmax_row): on an adapter that caps loops
        // (`super::LOOP_BUDGET`) long rows take a workgroup whatever was asked.
        let thread = if cols * 4 <= super::LOOP_BUDGET || !crate::gpu::is_software(&dev.properties)
        {
            RowForm::Thread
        } else {
            RowForm::Workgroup
        };
        match chosen {
            RowAlgorithm::Thread => thread,
            RowAlgorithm::Workgroup => RowForm::Workgroup,
            RowAlgorithm::Subgroup => group,
            RowAlgorithm::Auto if crate::gpu::is_software(&dev.properties) => {
                if cols <= SHORT_ROW {
                    RowForm::Thread
                } else {
                    RowForm::Workgroup
                }
            }
            RowAlgorithm::Auto => {
                if cols <= 32 {
                    RowForm::Thread
                } else {
                    group
                }
            }
        }
    }

    /// `v` (a workgroup-per-row entry of rows.wgsl, `thread_entry` its one-invocation-per-row
    /// twin) in this form, and the grid over `rows` (its third number is the workgroups per
    /// row of the grid, `RowMeta::row`).
    pub(crate) fn variant(
        self,
        v: Variant,
        thread_entry: &'static str,
        rows: usize,
    ) -> (Variant, (u32, u32, u32)) {
        match self {
            RowForm::Thread => (
                Variant {
                    entry: thread_entry,
                    ..v
                },
                grid(rows, 64),
            ),
            RowForm::Workgroup | RowForm::Subgroup => {
                let (gx, gy, _) = grid(rows, 1);
                let shader = if self == RowForm::Subgroup {
                    Shader::RowsSubgroup
                } else {
                    v.shader
                };
                (Variant { shader, ..v }, (gx, gy, gx))
            }
        }
    }
}

/// How the few-row products (`gemv*` in matmul.wgsl, `linear_q*` in quant.wgsl: a decode
/// step's linear layers) cover their outputs; a dot product of length K per output is a row
/// reduction, so [`crate::backends::set_row_algorithm`] (natively `PT2WEB_ROW_KERNEL`) picks:
/// `Thread` one invocation per 4 outputs, `Workgroup` and `Subgroup` a 64-invocation workgroup
/// per 4 outputs splitting K, combined in workgroup memory. `Auto` takes `Thread` on CPU
/// adapters and SwiftShader (barriers cost a fiber switch there) and where K is under a
/// workgroup, the split form on GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GemvForm {
    Thread,
    Split,
}

impl GemvForm {
    pub(crate) fn of(dev: &crate::gpu::GpuDevice, k: usize) -> GemvForm {
        use crate::backends::RowAlgorithm;
        match row_algorithm() {
            RowAlgorithm::Thread => GemvForm::Thread,
            RowAlgorithm::Workgroup | RowAlgorithm::Subgroup => GemvForm::Split,
            RowAlgorithm::Auto if crate::gpu::is_software(&dev.properties) || k < 64 => {
                GemvForm::Thread
            }
            RowAlgorithm::Auto => GemvForm::Split,
        }
    }
}

/// The row algorithm asked for: `backends::set_row_algorithm`, or natively `PT2WEB_ROW_KERNEL`.
fn row_algorithm() -> crate::backends::RowAlgorithm {
    #[cfg(not(target_arch = "wasm32"))]
    let chosen = std::env::var("PT2WEB_ROW_KERNEL")
        .ok()
        .and_then(|s| crate::backends::RowAlgorithm::parse(&s))
        .unwrap_or_else(crate::backends::row_algorithm);
    #[cfg(target_arch = "wasm32")]
    let chosen = crate::backends::row_algorithm();
    chosen
}

/// Whether a row kernel's workgroup per row (each of its 64 threads walking every 64th
/// element of the row, up to four times) keeps its loops within [`super::LOOP_BUDGET`];
/// kernels decline longer rows (the CPU kernel runs).
pub(crate) fn rows_fit(k: &super::KernelCtx, cols: usize) -> bool {
    super::loops_fit(k, cols.div_ceil(64) + 1, 4)
}

/// The softmax variant for rows of `cols` on `dev` (`v` is one of the `softmax` variants)
/// and its grid ([`RowForm::of`]).
pub(crate) fn softmax_dispatch(
    dev: &crate::gpu::GpuDevice,
    v: Variant,
    rows: usize,
    cols: usize,
) -> (Variant, (u32, u32, u32)) {
    RowForm::of(dev, cols).variant(v, "softmax_row", rows)
}
pub const LAYER_NORM: Variant = Variant::new(Shader::Rows, "layer_norm");
/// Layer norm with one invocation per row (rows up to [`SHORT_ROW`] long).
pub const LAYER_NORM_ROW: Variant = Variant::new(Shader::Rows, "layer_norm_row");
