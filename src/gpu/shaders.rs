//! The WGSL sources (`shaders/<family>.wgsl`) and every variant the backend compiles:
//! one (shader, entry point, override constants) triple per pipeline. The naga test at the
//! tests/gpu_shaders.rs parses and validates each variant with naga, so a shader error fails
//! plain `cargo test` without a GPU.
//!
//! `PT2WEB_SHADER_DIR=shaders` makes [`Shader::source`] read the files at run time instead of
//! the copies compiled in (iterate on a shader without rebuilding the crate).

/// One WGSL file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shader {
    Elementwise,
    Matmul,
    Matmul4,
    Matmul4x16,
    Rows,
    Reduce,
    Random,
    Conv,
    Norm,
    Pool,
    Index,
    Ints,
    Shape,
    Scatter,
    Sort,
    Resample,
    Rnn,
    Linalg,
    Select,
    Attention,
    /// rows.wgsl with its group reductions in subgroup operations (`rows_subgroup.wgsl`;
    /// devices with `subgroups` only).
    RowsSubgroup,
    /// Token selection on the device (`sample.rs`).
    Sample,
    /// Weights quantized at load (`kernels/quant.rs`).
    Quant,
    /// PT2E quantize / dequantize (`kernels/quant.rs`).
    Affine,
    /// Pairwise distances (`kernels/distance.rs`).
    Distance,
    /// Histograms (`kernels/histogram.rs`).
    Histogram,
    /// Complex64 elementwise ops (`kernels/complex.rs`).
    Complex,
    /// Discrete Fourier transforms (`kernels/fft.rs`).
    Fft,
    /// embedding_bag (`kernels/bag.rs`).
    Bag,
    /// A module generated at run time (a fused elementwise kernel, `kernels/fused.rs`),
    /// by its number in [`generated`].
    Fused(u32),
}

impl Shader {
    pub const ALL: [Shader; 29] = [
        Shader::Elementwise,
        Shader::Matmul,
        Shader::Matmul4,
        Shader::Matmul4x16,
        Shader::Rows,
        Shader::Reduce,
        Shader::Random,
        Shader::Conv,
        Shader::Norm,
        Shader::Pool,
        Shader::Index,
        Shader::Ints,
        Shader::Shape,
        Shader::Scatter,
        Shader::Sort,
        Shader::Resample,
        Shader::Rnn,
        Shader::Linalg,
        Shader::Select,
        Shader::Attention,
        Shader::RowsSubgroup,
        Shader::Sample,
        Shader::Quant,
        Shader::Affine,
        Shader::Distance,
        Shader::Histogram,
        Shader::Complex,
        Shader::Fft,
        Shader::Bag,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Shader::Elementwise => "elementwise.wgsl",
            Shader::Matmul => "matmul.wgsl",
            Shader::Matmul4 => "matmul4.wgsl",
            Shader::Matmul4x16 => "matmul4_16.wgsl",
            Shader::Rows => "rows.wgsl",
            Shader::Reduce => "reduce.wgsl",
            Shader::Random => "random.wgsl",
            Shader::Conv => "conv.wgsl",
            Shader::Norm => "norm.wgsl",
            Shader::Pool => "pool.wgsl",
            Shader::Index => "index.wgsl",
            Shader::Ints => "ints.wgsl",
            Shader::Shape => "shape.wgsl",
            Shader::Scatter => "scatter.wgsl",
            Shader::Sort => "sort.wgsl",
            Shader::Resample => "resample.wgsl",
            Shader::Rnn => "rnn.wgsl",
            Shader::Linalg => "linalg.wgsl",
            Shader::Select => "select.wgsl",
            Shader::Attention => "attention.wgsl",
            Shader::RowsSubgroup => "rows_subgroup.wgsl",
            Shader::Sample => "sample.wgsl",
            Shader::Quant => "quant.wgsl",
            Shader::Affine => "affine.wgsl",
            Shader::Distance => "distance.wgsl",
            Shader::Histogram => "histogram.wgsl",
            Shader::Complex => "complex.wgsl",
            Shader::Fft => "fft.wgsl",
            Shader::Bag => "bag.wgsl",
            Shader::Fused(_) => "fused.wgsl",
        }
    }
    pub fn source(self) -> &'static str {
        if let Shader::Fused(id) = self {
            return generated(id);
        }
        if let Ok(dir) = std::env::var("PT2WEB_SHADER_DIR") {
            use std::collections::HashMap;
            use std::sync::{Mutex, OnceLock};
            static LOADED: OnceLock<Mutex<HashMap<Shader, &'static str>>> = OnceLock::new();
            let mut m = LOADED
                .get_or_init(Mutex::default)
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(s) = m.get(&self) {
                return s;
            }
            if let Ok(text) = std::fs::read_to_string(std::path::Path::new(&dir).join(self.name()))
            {
                let s: &'static str = Box::leak(text.into_boxed_str());
                m.insert(self, s);
                return s;
            }
        }
        self.compiled_source()
    }
    /// The WGSL module of the file: the constants of every [`OpCodes`] enum the shader
    /// switches on, then the file ([`Shader::source`]). Made once per shader.
    pub fn module(self) -> &'static str {
        if let Shader::Fused(id) = self {
            return generated(id);
        }
        use std::collections::HashMap;
        use std::sync::{Mutex, OnceLock};
        static MODULES: OnceLock<Mutex<HashMap<Shader, &'static str>>> = OnceLock::new();
        let mut m = MODULES
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        m.entry(self).or_insert_with(|| {
            let mut text = String::new();
            for codes in op_codes().iter().filter(|c| c.shaders.contains(&self)) {
                text.push_str(&codes.wgsl());
            }
            if self == Shader::Elementwise {
                text.push_str(MATH);
            }
            // Complex exp / polar and the FFT twiddles need sin and cos to f32 accuracy
            // (WGSL's own promise 2^-11 absolute; SwiftShader keeps to that).
            if matches!(self, Shader::Complex | Shader::Fft) {
                text.push_str(TRIG);
            }
            if self.reads_indices() {
                text.push_str(FAULT);
            }
            if self == Shader::RowsSubgroup {
                text.push_str(&with_group_reductions(Shader::Rows.source(), self.source()));
            } else {
                text.push_str(self.source());
            }
            Box::leak(text.into_boxed_str())
        })
    }
    /// The copy compiled into the crate.
    pub fn compiled_source(self) -> &'static str {
        match self {
            Shader::Elementwise => include_str!("../../shaders/elementwise.wgsl"),
            Shader::Matmul => include_str!("../../shaders/matmul.wgsl"),
            Shader::Matmul4 => include_str!("../../shaders/matmul4.wgsl"),
            Shader::Matmul4x16 => include_str!("../../shaders/matmul4_16.wgsl"),
            Shader::Rows => include_str!("../../shaders/rows.wgsl"),
            Shader::Reduce => include_str!("../../shaders/reduce.wgsl"),
            Shader::Random => include_str!("../../shaders/random.wgsl"),
            Shader::Conv => include_str!("../../shaders/conv.wgsl"),
            Shader::Norm => include_str!("../../shaders/norm.wgsl"),
            Shader::Pool => include_str!("../../shaders/pool.wgsl"),
            Shader::Index => include_str!("../../shaders/index.wgsl"),
            Shader::Ints => include_str!("../../shaders/ints.wgsl"),
            Shader::Shape => include_str!("../../shaders/shape.wgsl"),
            Shader::Scatter => include_str!("../../shaders/scatter.wgsl"),
            Shader::Sort => include_str!("../../shaders/sort.wgsl"),
            Shader::Resample => include_str!("../../shaders/resample.wgsl"),
            Shader::Rnn => include_str!("../../shaders/rnn.wgsl"),
            Shader::Linalg => include_str!("../../shaders/linalg.wgsl"),
            Shader::Select => include_str!("../../shaders/select.wgsl"),
            Shader::Attention => include_str!("../../shaders/attention.wgsl"),
            Shader::RowsSubgroup => include_str!("../../shaders/rows_subgroup.wgsl"),
            Shader::Sample => include_str!("../../shaders/sample.wgsl"),
            Shader::Quant => include_str!("../../shaders/quant.wgsl"),
            Shader::Affine => include_str!("../../shaders/affine.wgsl"),
            Shader::Distance => include_str!("../../shaders/distance.wgsl"),
            Shader::Histogram => include_str!("../../shaders/histogram.wgsl"),
            Shader::Complex => include_str!("../../shaders/complex.wgsl"),
            Shader::Fft => include_str!("../../shaders/fft.wgsl"),
            Shader::Bag => include_str!("../../shaders/bag.wgsl"),
            Shader::Fused(id) => generated(id),
        }
    }
}

/// `rows`'s text with its `<group reductions>` block (the lines from the one holding
/// `// <group reductions>` through the one holding `// </group reductions>`) replaced by
/// `reductions` (`rows_subgroup.wgsl`); `rows` itself where it has no such block.
fn with_group_reductions(rows: &str, reductions: &str) -> String {
    let (Some(a), Some(b)) = (
        rows.find("// <group reductions>"),
        rows.find("// </group reductions>"),
    ) else {
        return rows.to_string();
    };
    let end = rows[b..].find('\n').map_or(rows.len(), |e| b + e + 1);
    format!("{}{reductions}{}", &rows[..a], &rows[end..])
}

impl Shader {
    /// Whether the shader's module calls subgroup operations (the device needs `subgroups`).
    pub fn uses_subgroups(self) -> bool {
        self == Shader::RowsSubgroup
    }
    /// Whether the module has kernels that read index tensors and report invalid indices
    /// (it includes [`FAULT`]; `src/gpu/fault.rs`).
    pub fn reads_indices(self) -> bool {
        matches!(
            self,
            Shader::Index | Shader::Scatter | Shader::Bag | Shader::Quant | Shader::Sort
        )
    }
}

/// The index fault record and `raise_index` (`shaders/fault.wgsl`, `src/gpu/fault.rs`).
pub const FAULT: &str = include_str!("../../shaders/fault.wgsl");

/// NaN / inf helpers and accurate sin / cos (`shaders/trig.wgsl`): the start of [`MATH`],
/// and of the complex and FFT modules.
pub const TRIG: &str = include_str!("../../shaders/trig.wgsl");

/// The scalar math of the elementwise ops by op code (`shaders/math.wgsl`): part of the
/// elementwise module and of every generated one.
pub const MATH: &str = concat!(
    include_str!("../../shaders/trig.wgsl"),
    include_str!("../../shaders/math.wgsl"),
    include_str!("../../shaders/special.wgsl")
);

/// Most generated modules a process keeps (each distinct fused pattern is one; past this a
/// fused node runs its ops one kernel each).
const MAX_GENERATED: usize = 4096;

/// The generated modules: their sources by number, and numbers by source.
#[derive(Default)]
struct Generated {
    sources: Vec<&'static str>,
    ids: std::collections::HashMap<&'static str, u32>,
}

fn generated_sources() -> std::sync::MutexGuard<'static, Generated> {
    use std::sync::{Mutex, OnceLock};
    static G: OnceLock<Mutex<Generated>> = OnceLock::new();
    G.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The shader of a generated module's WGSL, the same one for the same text (so its
/// pipeline, layout and bind groups are cached as a built-in shader's are). None when
/// [`MAX_GENERATED`] modules exist already.
pub fn intern_generated(source: &str) -> Option<Shader> {
    let mut g = generated_sources();
    if let Some(&id) = g.ids.get(source) {
        return Some(Shader::Fused(id));
    }
    if g.sources.len() >= MAX_GENERATED {
        return None;
    }
    let s: &'static str = Box::leak(source.to_string().into_boxed_str());
    let id = g.sources.len() as u32;
    g.sources.push(s);
    g.ids.insert(s, id);
    Some(Shader::Fused(id))
}

/// The WGSL of generated module `id` (empty for a number never handed out).
fn generated(id: u32) -> &'static str {
    generated_sources()
        .sources
        .get(id as usize)
        .copied()
        .unwrap_or("")
}

/// The codes of a Rust enum that a shader switches on (`UnaryOp`, `ScatterOp`...): each
/// `Name::Variant = n` is declared in the shader's module as `const Name_Variant: u32 = nu;`
/// ([`Shader::module`]), so the WGSL says `case UnaryOp_Silu:` and the Rust enum is the one
/// definition of the numbers. Made by the `code_enum!` / `op_enum!` macros.
#[derive(Debug, Clone, Copy)]
pub struct OpCodes {
    /// The shaders that read the codes.
    pub shaders: &'static [Shader],
    /// The Rust enum.
    pub name: &'static str,
    /// `(variant, code)`.
    pub codes: &'static [(&'static str, u32)],
}

impl OpCodes {
    /// The WGSL name of a variant's constant.
    pub fn const_name(&self, variant: &str) -> String {
        format!("{}_{variant}", self.name)
    }
    /// The WGSL declarations.
    pub fn wgsl(&self) -> String {
        let mut s = format!("// {} (generated from the Rust enum)\n", self.name);
        for (v, n) in self.codes {
            s.push_str(&format!("const {}: u32 = {n}u;\n", self.const_name(v)));
        }
        s
    }
}

/// Every code enum of the GPU backend.
pub fn op_codes() -> &'static [OpCodes] {
    super::kernels::OP_CODES
}

/// Storage element types of a variant: what its tensor inputs (`TIn`) and outputs (`TOut`)
/// hold. Arithmetic is f32 in every variant.
///
/// A shader with f16 variants declares `alias TIn = f32;`, `alias TOut = f32;` and
/// `const OUT_F16: bool = false;`, loads through `f32(...)` and stores through `to_out`;
/// [`Variant::source`] rewrites those lines (and puts `enable f16;` first) for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Elems {
    #[default]
    F32,
    /// f16 in, f16 out.
    F16,
    /// f16 in, f32 out (an upcast, or a reduction into f32).
    F16ToF32,
    /// f32 in, f16 out (a downcast).
    F32ToF16,
    /// f16 in and out, accumulating in f16 (matmul under
    /// [`crate::backends::allow_f16_reduced_precision`]; the shader's `alias TAcc`).
    F16Acc,
}

impl Elems {
    /// The variant for input and output storage dtypes (None: not an f16/f32 pair).
    pub fn of(input: crate::DType, output: crate::DType) -> Option<Elems> {
        use crate::DType::{F16, F32};
        Some(match (input, output) {
            (F32, F32) => Elems::F32,
            (F16, F16) => Elems::F16,
            (F16, F32) => Elems::F16ToF32,
            (F32, F16) => Elems::F32ToF16,
            _ => return None,
        })
    }
    pub fn uses_f16(self) -> bool {
        self != Elems::F32
    }
    fn types(self) -> (&'static str, &'static str) {
        match self {
            Elems::F32 => ("f32", "f32"),
            Elems::F16 => ("f16", "f16"),
            Elems::F16ToF32 => ("f16", "f32"),
            Elems::F32ToF16 => ("f32", "f16"),
            Elems::F16Acc => ("f16", "f16"),
        }
    }
}

/// A pipeline: shader, entry point, the value of its `override` constant (if any) and its
/// storage element types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    pub shader: Shader,
    pub entry: &'static str,
    /// `(name, value)` of the shader's one override constant.
    pub constant: Option<(&'static str, u32)>,
    pub elems: Elems,
}

impl Variant {
    pub const fn new(shader: Shader, entry: &'static str) -> Variant {
        Variant {
            shader,
            entry,
            constant: None,
            elems: Elems::F32,
        }
    }
    pub const fn with(shader: Shader, entry: &'static str, name: &'static str, v: u32) -> Variant {
        Variant {
            shader,
            entry,
            constant: Some((name, v)),
            elems: Elems::F32,
        }
    }
    /// This variant with other storage element types.
    pub const fn typed(self, elems: Elems) -> Variant {
        Variant { elems, ..self }
    }
    pub fn label(&self) -> String {
        let e = match self.elems {
            Elems::F32 => String::new(),
            Elems::F16Acc => "<f16 acc f16>".to_string(),
            other => format!("<{}->{}>", other.types().0, other.types().1),
        };
        match self.constant {
            Some((n, v)) => format!("{}:{}{e}[{n}={v}]", self.shader.name(), self.entry),
            None => format!("{}:{}{e}", self.shader.name(), self.entry),
        }
    }
    /// The WGSL of this variant's module (the shader file, specialized for its [`Elems`]).
    pub fn source(&self) -> std::borrow::Cow<'static, str> {
        let src = self.shader.module();
        if self.elems == Elems::F32 {
            return src.into();
        }
        let (tin, tout) = self.elems.types();
        let mut s = String::from("enable f16;\n");
        s.push_str(
            &src.replacen("alias TIn = f32;", &format!("alias TIn = {tin};"), 1)
                .replacen("alias TOut = f32;", &format!("alias TOut = {tout};"), 1)
                .replacen(
                    "alias TAcc = f32;",
                    if self.elems == Elems::F16Acc {
                        "alias TAcc = f16;"
                    } else {
                        "alias TAcc = f32;"
                    },
                    1,
                )
                .replacen(
                    "const OUT_F16: bool = false;",
                    &format!("const OUT_F16: bool = {};", tout == "f16"),
                    1,
                ),
        );
        s.into()
    }
    /// Whether the shader file can be specialized (declares the type aliases).
    pub fn has_elem_aliases(shader: Shader) -> bool {
        let s = shader.module();
        s.contains("alias TIn = f32;")
            && s.contains("alias TOut = f32;")
            && s.contains("const OUT_F16: bool = false;")
    }
}

/// Every variant the kernels can ask for (the naga test validates each one).
pub fn all_variants() -> Vec<Variant> {
    use super::kernels::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
    let mut v = Vec::new();
    v.extend(UnaryOp::ALL.iter().map(|o| o.variant()));
    v.extend(BinaryOp::ALL.iter().map(|o| o.variant()));
    v.extend(CompareOp::ALL.iter().map(|o| o.variant()));
    // The in-place entries (`inplace` in kernels/elementwise.rs).
    for (ops, entries) in [
        (
            UnaryOp::ALL.iter().map(|o| o.variant()).collect::<Vec<_>>(),
            &["unary_ip"][..],
        ),
        (
            BinaryOp::ALL.iter().map(|o| o.variant()).collect(),
            &["binary_ip", "binary_ip_s"][..],
        ),
    ] {
        for base in ops {
            v.extend(entries.iter().map(|&entry| Variant { entry, ..base }));
        }
    }
    v.push(super::kernels::WHERE);
    v.push(super::kernels::LERP3);
    v.push(super::kernels::CLAMP3);
    v.push(super::kernels::MATMUL);
    v.push(super::kernels::MATMUL_BIAS);
    v.push(super::kernels::MATMUL_TILED);
    v.push(super::kernels::MATMUL_TILED_BIAS);
    v.push(super::kernels::GEMV);
    v.push(super::kernels::GEMV_BIAS);
    v.push(super::kernels::GEMV_SPLIT);
    v.push(super::kernels::GEMV_SPLIT_BIAS);
    v.extend(super::kernels::MATMUL4);
    v.extend(super::kernels::MATMUL4_16);
    v.push(super::kernels::SOFTMAX);
    v.push(super::kernels::LOG_SOFTMAX);
    v.push(super::kernels::SAFE_SOFTMAX);
    v.push(super::kernels::ATTENTION_ROW);
    v.push(super::kernels::ATTENTION_TILED);
    v.push(super::kernels::ATTENTION_SPLIT);
    v.push(super::kernels::ATTENTION_COMBINE);
    for base in [
        super::kernels::SOFTMAX,
        super::kernels::LOG_SOFTMAX,
        super::kernels::SAFE_SOFTMAX,
    ] {
        v.push(Variant {
            entry: "softmax_row",
            ..base
        });
    }
    // The subgroup forms of the workgroup-per-row kernels.
    for base in [
        super::kernels::SOFTMAX,
        super::kernels::LOG_SOFTMAX,
        super::kernels::SAFE_SOFTMAX,
        super::kernels::LAYER_NORM,
    ] {
        v.push(Variant {
            shader: Shader::RowsSubgroup,
            ..base
        });
    }
    v.extend_from_slice(super::kernels::table::gpu_table().shader_variants());
    v.extend_from_slice(super::kernels::complex::complex_table().shader_variants());
    v.extend(ReduceOp::ALL.iter().map(|o| o.variant()));
    v.extend(super::random::VARIANTS);
    v.extend(ReduceOp::ALL.iter().map(|o| o.int_variant()));
    v.extend(super::kernels::nn_variants());
    v.push(super::sample::ARGMAX_ROW);
    v.push(super::sample::SAMPLE_ROW);
    let f16: Vec<Variant> = v
        .iter()
        .filter(|x| super::kernels::has_f16_variants(x))
        .flat_map(|x| {
            let acc = (x.shader == Shader::Matmul).then_some(Elems::F16Acc);
            [Elems::F16, Elems::F16ToF32, Elems::F32ToF16]
                .into_iter()
                .chain(acc)
                .map(|e| x.typed(e))
        })
        .collect();
    v.extend(f16);
    v
}
