//! Process-wide backend switches, in the spirit of `torch.backends`: plain atomics, read by the
//! kernels when they run (so a change takes effect on the next op, in every session).
//!
//! | switch | default | what it changes |
//! |---|---|---|
//! | [`set_allow_f16_reduced_precision`] | `false` | f16 matrix products on the GPU (`mm`, `bmm`, `matmul`, `addmm`, `linear`) accumulate in f16 instead of f32 (torch's `allow_fp16_reduced_precision_reduction`): faster on GPUs with fast f16 math, about 1e-3 relative error per product instead of 1e-7. Other f16 kernels always compute in f32. Takes effect at the next run |
//! | [`set_attention`] | [`Attention::Streaming`] | how `scaled_dot_product_attention` (and its `_math` / `_flash_attention_for_cpu` forms) computes: [`Attention::Math`] materializes the whole L×S score matrix per (batch, head); [`Attention::Streaming`] processes query rows in blocks of at most 64 Ki scores, so long sequences never hold a full L×S matrix |
//! | [`set_attention_kernel`] | [`AttentionKernel::Auto`] | the streaming attention kernel's form: [`AttentionKernel::Row`] one invocation per query row reading keys and values from memory (no workgroup memory, no barriers), [`AttentionKernel::Tiled`] 64 query rows per workgroup sharing each tile of keys and values through workgroup memory (flash-attention style); `Auto` takes `Row` on CPU adapters and SwiftShader and `Tiled` on GPUs (the tests run both on lavapipe); `PT2WEB_ATTENTION_KERNEL=row\|tiled\|auto` overrides natively |
//! | [`set_conv_algorithm`] | [`ConvAlgorithm::Auto`] | the GPU convolution kernel (cuDNN's algorithm choice, for pt2web): `Auto` takes `im2col` + GEMM on CPU adapters and SwiftShader and the tiled workgroup-memory kernel on GPUs; the others force one (the tests run every one on lavapipe); `PT2WEB_CONV_KERNEL` overrides natively |
//! | [`set_matmul_algorithm`] | [`MatmulAlgorithm::Auto`] | the GPU matrix-multiply kernel (`mm`, `bmm`, `matmul`, `addmm`, `linear` and their fused epilogues): `Auto` takes the barrier-free register-blocked and vec4 kernels on CPU adapters and SwiftShader and the workgroup-tiled kernel on GPUs; the others force one (the tests run both on lavapipe); `PT2WEB_MATMUL_KERNEL` overrides natively |
//! | [`set_row_algorithm`] | [`RowAlgorithm::Auto`] | the GPU kernel of row reductions (softmax, log_softmax, layer norm, group norm; also the form of matrix products of at most 4 rows, whose dot products are rows: `Thread` one invocation per 4 outputs, the others a 64-invocation workgroup per 4 outputs splitting K, `Auto` the first on software adapters and the second on GPUs): `Auto` takes one invocation per row for rows up to 1024 long and a 64-invocation workgroup per longer row on CPU adapters and SwiftShader, and on GPUs a workgroup per row whose reductions use subgroup operations where the device has `subgroups` (natively; wgpu's browser backend does not pass the feature through), else workgroup memory; the others force one (`Subgroup` without the feature takes `Workgroup`; the tests run each on lavapipe); `PT2WEB_ROW_KERNEL=thread\|workgroup\|subgroup\|auto` overrides natively |
//! | [`set_autotune`] | [`Autotune::Auto`] | whether GPU kernels with several forms (the matrix multiply's tiled and blocked kernels, where [`set_matmul_algorithm`] leaves the choice to `Auto`) time them per shape and keep the fastest (`src/gpu/tune.rs`; cached per adapter in memory and natively in `autotune-v1.json` under `PT2WEB_CACHE_DIR` or `~/.cache/pt2web`): `Auto` tunes on hardware adapters only, `On` everywhere, `Off` nowhere (the heuristic choice); `PT2WEB_AUTOTUNE=0\|1` overrides natively |
//! | [`set_graph_passes`] | [`PassSet::ALL`] | the graph passes a session applies when it is created (`src/passes/`: dead-code elimination, removal of no-op copies and views, functionalization of in-place ops, constant folding, batch-norm folding, attention recognition, float32 scales of dynamic quantization, elementwise and epilogue fusion, reinplacing of buffer updates); [`PassSet::NONE`] plans the graph exactly as exported. `PT2WEB_PASSES=none\|all\|functionalize,noop,dce,attention,cse,qparams,const_fold,fold_bn,fuse,epilogue,reinplace` sets it natively when the program has not set it |
//! | [`opt_einsum::set_enabled`], [`opt_einsum::set_strategy`] | `true`, [`opt_einsum::Strategy::Auto`] | the order in which `einsum` (and `bilinear`, `_trilinear`) contracts three or more operands, on CPU and GPU (torch's `torch.backends.opt_einsum`): enabled, the pairwise order of fewest multiply-adds (`src/ops/matmul/einsum_path.rs`: `Optimal` searches every order, `Greedy` takes the cheapest pair first, `Auto` searches up to 5 operands and is greedy beyond); disabled, left to right |
//! | [`set_deterministic`] | `false` | GPU buffers are zero-filled when taken from the pool (torch's `fill_uninitialized_memory`: memory a kernel does not write reads the same on every run, not whatever the previous tensor left there); costs one queue write of zeros per buffer taken |
//!
//! Every pt2web kernel is already deterministic in its arithmetic: there are no atomics in the
//! WGSL kernels, and CPU kernels split work by output blocks, so the summation order never
//! depends on the thread count. The random ops are seeded (`manual_seed`).
//!
//! [`set_verbose`] (`PT2WEB_VERBOSE=1`) logs one line per kernel run, with its inputs, the
//! kernel variant and its time.
//!
//! [`is_built`] / [`is_available`] say which backends this build holds and which have an
//! adapter on this machine; [`cpu::get_cpu_capability`] says which vector instructions the CPU
//! kernels can use here.

pub use crate::passes::{Pass, PassSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

static ALLOW_F16_REDUCED: AtomicBool = AtomicBool::new(false);
static ATTENTION: AtomicU8 = AtomicU8::new(Attention::Streaming as u8);
static DETERMINISTIC: AtomicBool = AtomicBool::new(false);
static CONV_ALGORITHM: AtomicU8 = AtomicU8::new(ConvAlgorithm::Auto as u8);
static MATMUL_ALGORITHM: AtomicU8 = AtomicU8::new(MatmulAlgorithm::Auto as u8);
static ATTENTION_KERNEL: AtomicU8 = AtomicU8::new(AttentionKernel::Auto as u8);
static ROW_ALGORITHM: AtomicU8 = AtomicU8::new(RowAlgorithm::Auto as u8);
static AUTOTUNE: AtomicU8 = AtomicU8::new(Autotune::Auto as u8);

/// Whether f16/bf16 work may use reduced-precision accumulation (see the module table).
pub fn allow_f16_reduced_precision() -> bool {
    ALLOW_F16_REDUCED.load(Ordering::Relaxed)
}

/// Allow (or forbid, the default) reduced-precision f16/bf16 accumulation.
pub fn set_allow_f16_reduced_precision(on: bool) {
    ALLOW_F16_REDUCED.store(on, Ordering::Relaxed)
}

/// The attention implementation (`torch.backends.cuda.sdp_kernel`'s choice, for pt2web).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Attention {
    /// One full L×S score matrix per (batch, head): the textbook form, most memory.
    Math = 0,
    /// Query rows in blocks of at most 64 Ki scores (the default): bounded scratch memory.
    Streaming = 1,
}

impl Attention {
    /// `math` or `streaming` (also accepted: `flash`, `fused`).
    pub fn parse(s: &str) -> Option<Attention> {
        match s.to_ascii_lowercase().as_str() {
            "math" => Some(Attention::Math),
            "streaming" | "flash" | "fused" => Some(Attention::Streaming),
            _ => None,
        }
    }
}

/// The current attention implementation.
pub fn attention() -> Attention {
    match ATTENTION.load(Ordering::Relaxed) {
        0 => Attention::Math,
        _ => Attention::Streaming,
    }
}

/// Choose the attention implementation for every session.
pub fn set_attention(a: Attention) {
    ATTENTION.store(a as u8, Ordering::Relaxed)
}

/// The form of the GPU's streaming attention kernel (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AttentionKernel {
    /// `Row` on CPU adapters and SwiftShader, `Tiled` on GPUs (the default).
    Auto = 0,
    /// One invocation per query row, no workgroup memory.
    Row = 1,
    /// Query rows in workgroups of 64 sharing key / value tiles in workgroup memory.
    Tiled = 2,
}

impl AttentionKernel {
    pub const ALL: [AttentionKernel; 3] = [
        AttentionKernel::Auto,
        AttentionKernel::Row,
        AttentionKernel::Tiled,
    ];
    /// `auto`, `row` or `tiled`.
    pub fn parse(s: &str) -> Option<AttentionKernel> {
        AttentionKernel::ALL
            .into_iter()
            .find(|a| a.name() == s.to_ascii_lowercase())
    }
    pub fn name(self) -> &'static str {
        match self {
            AttentionKernel::Auto => "auto",
            AttentionKernel::Row => "row",
            AttentionKernel::Tiled => "tiled",
        }
    }
}

/// The current streaming attention kernel form.
pub fn attention_kernel() -> AttentionKernel {
    let v = ATTENTION_KERNEL.load(Ordering::Relaxed);
    AttentionKernel::ALL
        .into_iter()
        .find(|a| *a as u8 == v)
        .unwrap_or(AttentionKernel::Auto)
}

/// Choose the streaming attention kernel's form for every session (takes effect at the
/// next op).
pub fn set_attention_kernel(a: AttentionKernel) {
    ATTENTION_KERNEL.store(a as u8, Ordering::Relaxed)
}

/// The GPU convolution kernel (non-grouped, non-depthwise convolutions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConvAlgorithm {
    /// `Gemm` on CPU adapters and SwiftShader, `Tiled` on GPUs (the default).
    Auto = 0,
    /// Output tiles with the input patch in workgroup memory.
    Tiled = 1,
    /// Register-blocked direct convolution, no workgroup memory.
    Blocked = 2,
    /// `im2col` columns and the vec4 matrix multiply (falls back to `Blocked` past 256 MiB
    /// of columns).
    Gemm = 3,
}

impl ConvAlgorithm {
    pub const ALL: [ConvAlgorithm; 4] = [
        ConvAlgorithm::Auto,
        ConvAlgorithm::Tiled,
        ConvAlgorithm::Blocked,
        ConvAlgorithm::Gemm,
    ];
    /// `auto`, `tiled`, `blocked` or `gemm`.
    pub fn parse(s: &str) -> Option<ConvAlgorithm> {
        ConvAlgorithm::ALL
            .into_iter()
            .find(|a| a.name() == s.to_ascii_lowercase())
    }
    pub fn name(self) -> &'static str {
        match self {
            ConvAlgorithm::Auto => "auto",
            ConvAlgorithm::Tiled => "tiled",
            ConvAlgorithm::Blocked => "blocked",
            ConvAlgorithm::Gemm => "gemm",
        }
    }
}

/// The current convolution algorithm.
pub fn conv_algorithm() -> ConvAlgorithm {
    let v = CONV_ALGORITHM.load(Ordering::Relaxed);
    ConvAlgorithm::ALL
        .into_iter()
        .find(|a| *a as u8 == v)
        .unwrap_or(ConvAlgorithm::Auto)
}

/// Choose the GPU convolution kernel for every session (takes effect at the next op).
pub fn set_conv_algorithm(a: ConvAlgorithm) {
    CONV_ALGORITHM.store(a as u8, Ordering::Relaxed)
}

/// The GPU matrix-multiply kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MatmulAlgorithm {
    /// `Blocked` on CPU adapters and SwiftShader, `Tiled` on GPUs (the default).
    Auto = 0,
    /// 64x64 output tiles with the operands staged through workgroup memory.
    Tiled = 1,
    /// Register-blocked direct loads (vec4 where the operands allow), no workgroup memory
    /// and no barriers.
    Blocked = 2,
}

impl MatmulAlgorithm {
    pub const ALL: [MatmulAlgorithm; 3] = [
        MatmulAlgorithm::Auto,
        MatmulAlgorithm::Tiled,
        MatmulAlgorithm::Blocked,
    ];
    /// `auto`, `tiled` or `blocked`.
    pub fn parse(s: &str) -> Option<MatmulAlgorithm> {
        MatmulAlgorithm::ALL
            .into_iter()
            .find(|a| a.name() == s.to_ascii_lowercase())
    }
    pub fn name(self) -> &'static str {
        match self {
            MatmulAlgorithm::Auto => "auto",
            MatmulAlgorithm::Tiled => "tiled",
            MatmulAlgorithm::Blocked => "blocked",
        }
    }
}

/// The current matrix-multiply algorithm.
pub fn matmul_algorithm() -> MatmulAlgorithm {
    let v = MATMUL_ALGORITHM.load(Ordering::Relaxed);
    MatmulAlgorithm::ALL
        .into_iter()
        .find(|a| *a as u8 == v)
        .unwrap_or(MatmulAlgorithm::Auto)
}

/// Choose the GPU matrix-multiply kernel for every session (takes effect at the next op).
pub fn set_matmul_algorithm(a: MatmulAlgorithm) {
    MATMUL_ALGORITHM.store(a as u8, Ordering::Relaxed)
}

/// The GPU kernel of row reductions (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RowAlgorithm {
    /// By adapter and row length (the default).
    Auto = 0,
    /// One invocation per row: no workgroup memory, no barriers.
    Thread = 1,
    /// A 64-invocation workgroup per row, partial results combined in workgroup memory.
    Workgroup = 2,
    /// A workgroup per row combining partial results with subgroup operations (devices
    /// with `subgroups`; elsewhere `Workgroup`).
    Subgroup = 3,
}

impl RowAlgorithm {
    pub const ALL: [RowAlgorithm; 4] = [
        RowAlgorithm::Auto,
        RowAlgorithm::Thread,
        RowAlgorithm::Workgroup,
        RowAlgorithm::Subgroup,
    ];
    /// `auto`, `thread`, `workgroup` or `subgroup`.
    pub fn parse(s: &str) -> Option<RowAlgorithm> {
        RowAlgorithm::ALL
            .into_iter()
            .find(|a| a.name() == s.to_ascii_lowercase())
    }
    pub fn name(self) -> &'static str {
        match self {
            RowAlgorithm::Auto => "auto",
            RowAlgorithm::Thread => "thread",
            RowAlgorithm::Workgroup => "workgroup",
            RowAlgorithm::Subgroup => "subgroup",
        }
    }
}

/// The current row-reduction algorithm.
pub fn row_algorithm() -> RowAlgorithm {
    let v = ROW_ALGORITHM.load(Ordering::Relaxed);
    RowAlgorithm::ALL
        .into_iter()
        .find(|a| *a as u8 == v)
        .unwrap_or(RowAlgorithm::Auto)
}

/// Choose the GPU row-reduction kernel for every session (takes effect at the next op).
pub fn set_row_algorithm(a: RowAlgorithm) {
    ROW_ALGORITHM.store(a as u8, Ordering::Relaxed)
}

/// Whether GPU kernel forms are timed per shape (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Autotune {
    /// On hardware adapters, not on software ones (the default).
    Auto = 0,
    On = 1,
    Off = 2,
}

/// The current autotuning switch.
pub fn autotune() -> Autotune {
    match AUTOTUNE.load(Ordering::Relaxed) {
        1 => Autotune::On,
        2 => Autotune::Off,
        _ => Autotune::Auto,
    }
}

/// Turn autotuning on, off, or back to hardware adapters only (takes effect at the next op).
pub fn set_autotune(a: Autotune) {
    AUTOTUNE.store(a as u8, Ordering::Relaxed)
}

/// Whether deterministic mode is on (see the module table).
pub fn deterministic() -> bool {
    DETERMINISTIC.load(Ordering::Relaxed)
}

/// Turn deterministic mode on or off (`torch.use_deterministic_algorithms`).
pub fn set_deterministic(on: bool) {
    DETERMINISTIC.store(on, Ordering::Relaxed)
}

/// [`GRAPH_PASSES`] before [`set_graph_passes`] was called.
const PASSES_UNSET: u32 = u32::MAX;
static GRAPH_PASSES: AtomicU32 = AtomicU32::new(PASSES_UNSET);

/// The graph passes new sessions apply: the ones [`set_graph_passes`] chose, else (natively)
/// `PT2WEB_PASSES`, else all of them.
pub fn graph_passes() -> PassSet {
    session_graph_passes().unwrap_or(PassSet::ALL)
}

/// Choose the graph passes sessions created from now on apply (see the module table).
pub fn set_graph_passes(p: PassSet) {
    GRAPH_PASSES.store(p.bits(), Ordering::Relaxed)
}

/// [`graph_passes`], with a `PT2WEB_PASSES` that names no pass an error (a session refuses
/// to start rather than plan a graph other than the one asked for).
pub(crate) fn session_graph_passes() -> Result<PassSet, String> {
    match GRAPH_PASSES.load(Ordering::Relaxed) {
        PASSES_UNSET => {}
        b => return Ok(PassSet::from_bits(b)),
    }
    #[cfg(not(target_arch = "wasm32"))]
    if let Ok(v) = std::env::var("PT2WEB_PASSES") {
        return PassSet::parse(&v).map_err(|e| format!("PT2WEB_PASSES={v}: {e}"));
    }
    Ok(PassSet::ALL)
}

/// A compute backend pt2web can be built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The reference CPU backend (always built).
    Cpu,
    Vulkan,
    Metal,
    Dx12,
    /// OpenGL (ES) through wgpu.
    Gl,
    /// The browser's WebGPU (wasm32 builds).
    WebGpu,
}

impl Backend {
    pub const ALL: [Backend; 6] = [
        Backend::Cpu,
        Backend::Vulkan,
        Backend::Metal,
        Backend::Dx12,
        Backend::Gl,
        Backend::WebGpu,
    ];
    /// `cpu`, `vulkan`, `metal`, `dx12`, `gl`, `webgpu`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Vulkan => "vulkan",
            Backend::Metal => "metal",
            Backend::Dx12 => "dx12",
            Backend::Gl => "gl",
            Backend::WebGpu => "webgpu",
        }
    }
}

/// Whether this build of pt2web holds `b` (compiled in; says nothing about the machine).
pub fn is_built(b: Backend) -> bool {
    match b {
        Backend::Cpu => true,
        #[cfg(not(target_arch = "wasm32"))]
        Backend::WebGpu => false,
        #[cfg(not(target_arch = "wasm32"))]
        other => {
            let built = wgpu::Instance::enabled_backend_features();
            built.contains(match other {
                Backend::Vulkan => wgpu::Backends::VULKAN,
                Backend::Metal => wgpu::Backends::METAL,
                Backend::Dx12 => wgpu::Backends::DX12,
                _ => wgpu::Backends::GL,
            })
        }
        // The wasm32 build always has wgpu's WebGPU backend (Cargo.toml).
        #[cfg(target_arch = "wasm32")]
        Backend::WebGpu => true,
        #[cfg(target_arch = "wasm32")]
        _ => false,
    }
}

/// Whether `b` is built and has at least one adapter here (enumerates adapters: not free).
pub fn is_available(b: Backend) -> bool {
    if !is_built(b) {
        return false;
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use crate::gpu::BackendChoice;
        let choice = match b {
            Backend::Cpu => return true,
            Backend::Vulkan => BackendChoice::Vulkan,
            Backend::Metal => BackendChoice::Metal,
            Backend::Dx12 => BackendChoice::Dx12,
            Backend::Gl => BackendChoice::Gl,
            Backend::WebGpu => return false,
        };
        !crate::gpu::adapters(choice).is_empty()
    }
    #[cfg(target_arch = "wasm32")]
    {
        b == Backend::Cpu
    }
}

/// `torch.backends.opt_einsum`: how contractions of three or more operands choose their
/// pairwise order (see the module table and `src/ops/matmul/einsum_path.rs`).
pub mod opt_einsum {
    use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

    static ENABLED: AtomicBool = AtomicBool::new(true);
    static STRATEGY: AtomicU8 = AtomicU8::new(Strategy::Auto as u8);

    /// The path search (torch's `torch.backends.opt_einsum.strategy`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[repr(u8)]
    pub enum Strategy {
        /// `Optimal` up to 5 operands, `Greedy` beyond (the default).
        Auto = 0,
        /// The cheapest pair first, repeatedly.
        Greedy = 1,
        /// Every contraction tree (dynamic programming over operand subsets); past 8
        /// operands it is `Greedy`, as the search grows as 3^n.
        Optimal = 2,
    }

    impl Strategy {
        pub const ALL: [Strategy; 3] = [Strategy::Auto, Strategy::Greedy, Strategy::Optimal];
        /// `auto`, `greedy` or `optimal`.
        pub fn parse(s: &str) -> Option<Strategy> {
            Strategy::ALL
                .into_iter()
                .find(|a| a.name() == s.to_ascii_lowercase())
        }
        pub fn name(self) -> &'static str {
            match self {
                Strategy::Auto => "auto",
                Strategy::Greedy => "greedy",
                Strategy::Optimal => "optimal",
            }
        }
    }

    /// Always true: the path optimizer is part of pt2web (torch needs the `opt_einsum`
    /// package).
    pub fn is_available() -> bool {
        true
    }

    /// Whether contractions follow an optimized path (else left to right).
    pub fn enabled() -> bool {
        ENABLED.load(Ordering::Relaxed)
    }

    /// Optimize contraction paths (the default) or contract left to right.
    pub fn set_enabled(on: bool) {
        ENABLED.store(on, Ordering::Relaxed)
    }

    /// The current path search.
    pub fn strategy() -> Strategy {
        let v = STRATEGY.load(Ordering::Relaxed);
        Strategy::ALL
            .into_iter()
            .find(|a| *a as u8 == v)
            .unwrap_or(Strategy::Auto)
    }

    /// Choose the path search for every session (takes effect at the next op).
    pub fn set_strategy(s: Strategy) {
        STRATEGY.store(s as u8, Ordering::Relaxed)
    }
}

/// `torch.backends.cpu`: what the CPU backend runs on.
pub mod cpu {
    /// The widest vector instruction set of this CPU (natively, detected at run time) or of
    /// this build (wasm32, fixed when it was compiled), with torch's names: `"AVX512"`
    /// (avx512f, bw, vl and dq, as torch asks), `"AVX2"` (avx2 and fma), `"DEFAULT"` (other
    /// x86, and every aarch64: NEON is always there, so torch names nothing more);
    /// `"WASM_RELAXED_SIMD"` (the relaxed-SIMD builds of scripts/build_wasm.sh,
    /// `--cfg pt2web_relaxed_simd`), `"WASM_SIMD128"` (the plain build, `+simd128`).
    pub fn get_cpu_capability() -> &'static str {
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        {
            let avx512 = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512dq");
            let avx2 =
                std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
            if avx512 {
                "AVX512"
            } else if avx2 {
                "AVX2"
            } else {
                "DEFAULT"
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            if cfg!(pt2web_relaxed_simd) {
                "WASM_RELAXED_SIMD"
            } else if cfg!(target_feature = "simd128") {
                "WASM_SIMD128"
            } else {
                "DEFAULT"
            }
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "x86", target_arch = "wasm32")))]
        {
            "DEFAULT"
        }
    }

    #[cfg(all(
        test,
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "x86")
    ))]
    mod tests {
        /// What /proc/cpuinfo's flags say, by torch's rule.
        #[test]
        fn capability_matches_proc_cpuinfo() {
            let info = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
            let flags: Vec<&str> = info
                .lines()
                .find_map(|l| l.strip_prefix("flags"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, f)| f.split_whitespace().collect())
                .expect("a flags line in /proc/cpuinfo");
            let has = |f: &str| flags.contains(&f);
            let want = if ["avx512f", "avx512bw", "avx512vl", "avx512dq"]
                .iter()
                .all(|f| has(f))
            {
                "AVX512"
            } else if has("avx2") && has("fma") {
                "AVX2"
            } else {
                "DEFAULT"
            };
            assert_eq!(super::get_cpu_capability(), want, "flags: {flags:?}");
        }
    }
}

/// [`VERBOSE`] before [`set_verbose`] was called or `PT2WEB_VERBOSE` was read.
const VERBOSE_UNSET: u32 = u32::MAX;
static VERBOSE: AtomicU32 = AtomicU32::new(VERBOSE_UNSET);

/// A receiver of the verbose kernel log's lines (see [`set_verbose_sink`]).
pub type VerboseSink = Box<dyn Fn(&str) + Send + Sync>;
static VERBOSE_SINK: std::sync::RwLock<Option<VerboseSink>> = std::sync::RwLock::new(None);

/// The verbose kernel log's level (`mkldnn.verbose`'s, for pt2web): 0 off, 1 and above one
/// line per kernel run. Set by [`set_verbose`], else natively by `PT2WEB_VERBOSE` (read
/// once), else 0. One relaxed atomic load once known: the interpreters read it per node.
pub fn verbose() -> u32 {
    match VERBOSE.load(Ordering::Relaxed) {
        VERBOSE_UNSET => {
            #[cfg(not(target_arch = "wasm32"))]
            let level = std::env::var("PT2WEB_VERBOSE")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            #[cfg(target_arch = "wasm32")]
            let level = 0;
            // A set_verbose racing this read wins.
            let _ = VERBOSE.compare_exchange(
                VERBOSE_UNSET,
                level,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            VERBOSE.load(Ordering::Relaxed).min(VERBOSE_UNSET - 1)
        }
        v => v,
    }
}

/// Turn the verbose kernel log on (`level` ≥ 1) or off (0), for every session; overrides
/// `PT2WEB_VERBOSE`. Each kernel run writes one line: `pt2web_verbose,<device>,<op>,
/// <node>,<inputs>,<kernel variant>,<time> ms` with inputs as `float32[2x3];int64[4]` (CPU:
/// measured around the kernel; GPU: the shader variants dispatched and a last field saying
/// whether the time is the GPU's timestamps or the host's, see `gpu/verbose.rs`).
pub fn set_verbose(level: u32) {
    VERBOSE.store(level.min(VERBOSE_UNSET - 1), Ordering::Relaxed)
}

/// Send the verbose log's lines to `sink` instead of stderr (natively) or the console
/// (wasm32); `None` restores those.
pub fn set_verbose_sink(sink: Option<VerboseSink>) {
    *VERBOSE_SINK.write().unwrap_or_else(|e| e.into_inner()) = sink;
}

/// Write one verbose log line to the sink, stderr or the console.
pub(crate) fn verbose_line(line: &str) {
    let sink = VERBOSE_SINK.read().unwrap_or_else(|e| e.into_inner());
    match sink.as_ref() {
        Some(f) => f(line),
        #[cfg(not(target_arch = "wasm32"))]
        None => eprintln!("{line}"),
        #[cfg(target_arch = "wasm32")]
        None => web_sys::console::log_1(&line.into()),
    }
}
