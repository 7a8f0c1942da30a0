//! The GPU side of the op table: each kernel family registers the targets it serves beside
//! its kernels (`register` in `src/gpu/kernels/<family>.rs`), with the dtypes it serves, so
//! that [`super::lookup`] (what runs) and [`super::support::gpu_supports`] (what `pt2web
//! check --device gpu` reports) read one entry. The op table itself (`crate::ops::table`)
//! has no wgpu dependency; `tests/op_table.rs` checks every GPU entry against it.
//!
//! Families not moved here yet answer from the `match` in `lookup.rs` and the dtype rules of
//! `support.rs`; an entry here wins over them.

use super::{GpuOp, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::shaders::Variant;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Which dtypes a kernel serves: `(tensor inputs, tensor outputs)` in schema order. f16 is
/// answered as on an adapter with `shader-f16` (elsewhere f16 nodes fall back).
pub type Serves = fn(&[DType], &[DType]) -> bool;

/// One GPU entry.
#[derive(Clone, Copy)]
pub struct GpuEntry {
    pub op: GpuOp,
    pub serves: Serves,
}

/// Targets → [`GpuEntry`]s.
#[derive(Default)]
pub struct GpuTable {
    exact: HashMap<String, GpuEntry>,
    any: HashMap<String, GpuEntry>,
    variants: Vec<Variant>,
}

impl GpuTable {
    /// A kernel for one exact target (`aten.im2col.default`).
    pub fn kernel(&mut self, target: &str, k: fn(&mut KernelCtx) -> Out, serves: Serves) {
        let e = GpuEntry {
            op: GpuOp::Custom(k),
            serves,
        };
        self.exact.insert(target.to_string(), e);
    }
    /// A kernel for every overload of an op (`aten.conv2d`) except `out=` ones, which write
    /// into a tensor the caller gives.
    pub fn kernel_op(&mut self, op: &str, k: fn(&mut KernelCtx) -> Out, serves: Serves) {
        let e = GpuEntry {
            op: GpuOp::Custom(k),
            serves,
        };
        self.any.insert(op.to_string(), e);
    }
    /// The shader variants the family's kernels dispatch (f32 forms; the f16 ones follow
    /// from [`super::has_f16_variants`]): what `tests/gpu_shaders.rs` validates with naga.
    pub fn variants(&mut self, vs: &[Variant]) {
        self.variants.extend_from_slice(vs);
    }
    /// Every registered variant.
    pub fn shader_variants(&self) -> &[Variant] {
        &self.variants
    }
    /// The entry that serves `target`: the exact one, else the op-wide one.
    pub fn get(&self, target: &str) -> Option<&GpuEntry> {
        if let Some(e) = self.exact.get(target) {
            return Some(e);
        }
        let (op, overload) = target.rsplit_once('.')?;
        if overload.starts_with("out") {
            return None;
        }
        self.any.get(op)
    }
    /// Every registered name (exact targets and ops), sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.exact.keys().chain(self.any.keys()).cloned().collect();
        v.sort();
        v
    }
}

/// The GPU table, built once from every family's registrations.
pub fn gpu_table() -> &'static GpuTable {
    static TABLE: OnceLock<GpuTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = GpuTable::default();
        super::conv::register(&mut t);
        super::norm::register(&mut t);
        t
    })
}

/// f32 tensors only (f16 ones run on f32 conversions, `kernels::run`).
pub fn all_f32(inputs: &[DType], outputs: &[DType]) -> bool {
    inputs.iter().chain(outputs).all(|&d| d == DType::F32)
}

/// f32 tensors, or f16 ones (computed in f32), all of one dtype.
pub fn one_float(inputs: &[DType], outputs: &[DType]) -> bool {
    let Some(&d) = inputs.first() else {
        return false;
    };
    matches!(d, DType::F32 | DType::F16) && inputs.iter().chain(outputs).all(|&x| x == d)
}
