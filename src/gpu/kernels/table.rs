//! The GPU side of the op table: each kernel family registers the targets it serves beside
//! its kernels (`register` in `src/gpu/kernels/<family>.rs`), with the dtypes it serves, so
//! that [`super::lookup`] (what runs) and [`super::support::gpu_supports`] (what `pt2web
//! check --device gpu` reports) read one entry. The op table itself (`crate::ops::table`)
//! has no wgpu dependency; `tests/op_table.rs` checks every GPU entry against it.
//!
//! An entry names ops (`aten.relu`) and the overloads of them it serves ([`On`]); the
//! entries of one op are tried in registration order. The one target not registered is an
//! in-place elementwise op (`aten.relu_`), which runs its out-of-place entry's kernel
//! ([`super::lookup::inplace_base`]).

use super::{GpuOp, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::shaders::Variant;
use crate::gpu::store::gpu_dtype;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Which dtypes a kernel serves: `(tensor inputs, tensor outputs)` in schema order. f16
/// tensors are asked about as f32 (see [`F16`]).
pub type Serves = fn(&[DType], &[DType]) -> bool;

/// The overloads of an op an entry serves.
#[derive(Clone, Copy, Debug)]
pub enum On {
    /// Every overload, `out=` ones included.
    All,
    /// Every overload but the `out=` ones (`out`, `out_mode`), which write into a tensor
    /// the caller gives.
    NotOut,
    /// These overloads.
    Only(&'static [&'static str]),
    /// Every overload but these.
    Except(&'static [&'static str]),
    /// The overloads starting with one of these (`torch.sym_*`).
    Prefix(&'static [&'static str]),
}

impl On {
    fn serves(self, overload: &str) -> bool {
        match self {
            On::All => true,
            On::NotOut => !overload.starts_with("out"),
            On::Only(os) => os.contains(&overload),
            On::Except(os) => !os.contains(&overload),
            On::Prefix(ps) => ps.iter().any(|p| overload.starts_with(p)),
        }
    }
}

/// How a kernel meets f16 tensors (on an adapter with `shader-f16`; elsewhere f16 nodes fall
/// back). It matters only for a target that writes into an input (`x_`, `out=`): every other
/// f16 node runs the kernel, or on f32 conversions of its f16 tensors (`kernels::run`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F16 {
    /// f32 only: a target writing into an f16 input falls back.
    Converted,
    /// An f16 form, for nodes whose float tensors are all f16.
    Native,
    /// An f16 form that also takes f16 and f32 tensors together.
    Mixed,
}

/// One GPU entry.
#[derive(Clone, Copy)]
pub struct GpuEntry {
    pub op: GpuOp,
    pub serves: Serves,
    pub f16: F16,
}

/// Targets → [`GpuEntry`]s.
#[derive(Default)]
pub struct GpuTable {
    ops: HashMap<String, Vec<(On, GpuEntry)>>,
    variants: Vec<Variant>,
}

/// The entries one [`GpuTable::add`] made, to qualify.
pub struct Added<'a> {
    table: &'a mut GpuTable,
    ops: Vec<String>,
}

impl Added<'_> {
    /// The kernel has an f16 form ([`F16`]).
    pub fn f16(self, f16: F16) {
        for op in &self.ops {
            if let Some((_, e)) = self.table.ops.get_mut(op).and_then(|v| v.last_mut()) {
                e.f16 = f16;
            }
        }
    }
}

impl GpuTable {
    /// One entry for each of `ops` (`aten.relu`) on the overloads `on`. Unary, binary and
    /// comparison ops have f16 forms ([`F16::Native`]); others are [`F16::Converted`]
    /// unless [`Added::f16`] says otherwise.
    pub fn add(&mut self, ops: &[&str], on: On, op: GpuOp, serves: Serves) -> Added<'_> {
        let f16 = match op {
            GpuOp::Unary(_) | GpuOp::Binary(_) | GpuOp::Compare(_) => F16::Native,
            GpuOp::View | GpuOp::Custom(_) => F16::Converted,
        };
        let e = GpuEntry { op, serves, f16 };
        for name in ops {
            self.ops.entry(name.to_string()).or_default().push((on, e));
        }
        Added {
            table: self,
            ops: ops.iter().map(|s| s.to_string()).collect(),
        }
    }
    /// [`Self::add`] for a kernel function.
    pub fn kernel(
        &mut self,
        ops: &[&str],
        on: On,
        k: fn(&mut KernelCtx) -> Out,
        serves: Serves,
    ) -> Added<'_> {
        self.add(ops, on, GpuOp::Custom(k), serves)
    }
    /// Ops that are metadata only: a view of their input's GPU buffer, or a CPU kernel on
    /// placeholders that neither flushes the command buffer nor downloads anything.
    pub fn views(&mut self, ops: &[&str], on: On) {
        self.add(ops, on, GpuOp::View, |_, _| true);
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
    /// The entry that serves `target` (`aten.add.Tensor`): the first of its op's entries
    /// whose overloads include the target's.
    pub fn get(&self, target: &str) -> Option<&GpuEntry> {
        let (op, overload) = target.rsplit_once('.').unwrap_or((target, ""));
        let entries = self.ops.get(op)?;
        entries
            .iter()
            .find(|(on, _)| on.serves(overload))
            .map(|(_, e)| e)
    }
    /// Every registration: the op and the overloads it serves, in registration order per op.
    pub fn registrations(&self) -> Vec<(String, On)> {
        let mut v: Vec<(String, On)> = self
            .ops
            .iter()
            .flat_map(|(op, es)| es.iter().map(move |(on, _)| (op.clone(), *on)))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
    /// Every registered op, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.ops.keys().cloned().collect();
        v.sort();
        v
    }
}

/// The GPU table, built once from every family's registrations.
pub fn gpu_table() -> &'static GpuTable {
    static TABLE: OnceLock<GpuTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = GpuTable::default();
        super::views::register(&mut t);
        super::elementwise_args::register(&mut t);
        super::fill::register(&mut t);
        super::shape::register(&mut t);
        super::reduce::register(&mut t);
        super::elementwise::register(&mut t);
        super::draws::register(&mut t);
        super::linalg::register(&mut t);
        super::distance::register(&mut t);
        super::histogram::register(&mut t);
        super::select::register(&mut t);
        super::contract::register(&mut t);
        super::matmul::register(&mut t);
        super::reduce_ops::register(&mut t);
        crate::gpu::random::register(&mut t);
        super::pool::register(&mut t);
        super::resample::register(&mut t);
        super::index::register(&mut t);
        super::bag::register(&mut t);
        super::scatter::register(&mut t);
        super::sort::register(&mut t);
        super::ints::register(&mut t);
        super::attention::register(&mut t);
        super::rnn::register(&mut t);
        super::conv::register(&mut t);
        super::norm::register(&mut t);
        super::quant::register(&mut t);
        super::weight_norm::register(&mut t);
        t
    })
}

// The dtype rules the families' entries are written with.

/// f32 tensors only.
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

/// Every tensor in and out of one GPU dtype (`cat`, `pad`, `flip`...).
pub fn same_gpu_dtype(inputs: &[DType], outputs: &[DType]) -> bool {
    let first = inputs.first().copied();
    first.is_some_and(gpu_dtype)
        && all(inputs, |d| Some(d) == first)
        && outputs.first() == first.as_ref()
}

/// Any GPU dtypes in and out (copies and conversions).
pub fn gpu_dtypes(inputs: &[DType], outputs: &[DType]) -> bool {
    all(inputs, gpu_dtype) && all(outputs, gpu_dtype)
}

/// Outputs of any GPU dtype (factories).
pub fn gpu_outputs(_: &[DType], outputs: &[DType]) -> bool {
    all(outputs, gpu_dtype)
}

/// f32 in and out, or ints (and bools) in and ints out.
pub fn f32_or_ints(inputs: &[DType], outputs: &[DType]) -> bool {
    (all(inputs, f32) && all(outputs, f32)) || (all(inputs, int_like) && all(outputs, int))
}

/// f32 in and out, or one int tensor kept in its dtype.
pub fn f32_or_same_int(inputs: &[DType], outputs: &[DType]) -> bool {
    (all(inputs, f32) && all(outputs, f32))
        || (all(inputs, int) && inputs.len() == 1 && outputs == inputs)
}

/// Ints (and bools) in, ints out.
pub fn ints(inputs: &[DType], outputs: &[DType]) -> bool {
    all(inputs, int_like) && all(outputs, int)
}

pub fn f32(d: DType) -> bool {
    d == DType::F32
}
/// The int dtypes held on the GPU (as i32 words; uint8 / int8 / int16 wrap on store).
pub fn int(d: DType) -> bool {
    matches!(
        d,
        DType::I32 | DType::I64 | DType::U8 | DType::I8 | DType::I16
    )
}
/// The dtypes of index tensors the gathers and scatters take.
pub fn index(d: DType) -> bool {
    matches!(d, DType::I32 | DType::I64)
}
/// The dtypes the sorting and scatter kernels take as values.
pub fn sortable(d: DType) -> bool {
    gpu_dtype(d) && !matches!(d, DType::U8 | DType::I8 | DType::I16)
}
pub fn int_like(d: DType) -> bool {
    int(d) || d == DType::Bool
}
pub fn all(ds: &[DType], f: impl Fn(DType) -> bool) -> bool {
    ds.iter().all(|&d| f(d))
}
