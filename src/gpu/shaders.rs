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
    Rows,
    Reduce,
    Random,
    Conv,
    Norm,
    Pool,
    Index,
    Ints,
    Shape,
}

impl Shader {
    pub const ALL: [Shader; 11] = [
        Shader::Elementwise,
        Shader::Matmul,
        Shader::Rows,
        Shader::Reduce,
        Shader::Random,
        Shader::Conv,
        Shader::Norm,
        Shader::Pool,
        Shader::Index,
        Shader::Ints,
        Shader::Shape,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Shader::Elementwise => "elementwise.wgsl",
            Shader::Matmul => "matmul.wgsl",
            Shader::Rows => "rows.wgsl",
            Shader::Reduce => "reduce.wgsl",
            Shader::Random => "random.wgsl",
            Shader::Conv => "conv.wgsl",
            Shader::Norm => "norm.wgsl",
            Shader::Pool => "pool.wgsl",
            Shader::Index => "index.wgsl",
            Shader::Ints => "ints.wgsl",
            Shader::Shape => "shape.wgsl",
        }
    }
    pub fn source(self) -> &'static str {
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
    /// The copy compiled into the crate.
    pub fn compiled_source(self) -> &'static str {
        match self {
            Shader::Elementwise => include_str!("../../shaders/elementwise.wgsl"),
            Shader::Matmul => include_str!("../../shaders/matmul.wgsl"),
            Shader::Rows => include_str!("../../shaders/rows.wgsl"),
            Shader::Reduce => include_str!("../../shaders/reduce.wgsl"),
            Shader::Random => include_str!("../../shaders/random.wgsl"),
            Shader::Conv => include_str!("../../shaders/conv.wgsl"),
            Shader::Norm => include_str!("../../shaders/norm.wgsl"),
            Shader::Pool => include_str!("../../shaders/pool.wgsl"),
            Shader::Index => include_str!("../../shaders/index.wgsl"),
            Shader::Ints => include_str!("../../shaders/ints.wgsl"),
            Shader::Shape => include_str!("../../shaders/shape.wgsl"),
        }
    }
}

/// A pipeline: shader, entry point and the value of its `override` constant (if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    pub shader: Shader,
    pub entry: &'static str,
    /// `(name, value)` of the shader's one override constant.
    pub constant: Option<(&'static str, u32)>,
}

impl Variant {
    pub const fn new(shader: Shader, entry: &'static str) -> Variant {
        Variant {
            shader,
            entry,
            constant: None,
        }
    }
    pub const fn with(shader: Shader, entry: &'static str, name: &'static str, v: u32) -> Variant {
        Variant {
            shader,
            entry,
            constant: Some((name, v)),
        }
    }
    pub fn label(&self) -> String {
        match self.constant {
            Some((n, v)) => format!("{}:{}[{n}={v}]", self.shader.name(), self.entry),
            None => format!("{}:{}", self.shader.name(), self.entry),
        }
    }
}

/// Every variant the kernels can ask for (the naga test validates each one).
pub fn all_variants() -> Vec<Variant> {
    use super::kernels::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
    let mut v = Vec::new();
    v.extend(UnaryOp::ALL.iter().map(|o| o.variant()));
    v.extend(BinaryOp::ALL.iter().map(|o| o.variant()));
    v.extend(CompareOp::ALL.iter().map(|o| o.variant()));
    v.push(super::kernels::WHERE);
    v.push(super::kernels::MATMUL);
    v.push(super::kernels::MATMUL_BIAS);
    v.push(super::kernels::SOFTMAX);
    v.push(super::kernels::LOG_SOFTMAX);
    v.push(super::kernels::LAYER_NORM);
    v.extend(ReduceOp::ALL.iter().map(|o| o.variant()));
    v.extend(super::random::VARIANTS);
    v.extend(ReduceOp::ALL.iter().map(|o| o.int_variant()));
    v.extend(super::kernels::nn_variants());
    v
}
