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

// The op codes and uniform structs first: `op_enum!` is used by the families below.
#[macro_use]
mod params;
mod attention;
mod bag;
pub mod complex;
mod contract;
mod conv;
mod distance;
mod draws;
mod elementwise_args;
pub(crate) mod epilogue;
mod fft;
mod fill;
mod fused;
pub(crate) mod histogram;
mod index;
mod ints;
mod linalg;
mod norm;
mod pool;
mod quant;
mod reduce;
mod resample;
mod rnn;
mod scatter;
pub(crate) mod select;
mod shape;
mod sort;
pub mod support;
pub mod table;
pub(crate) mod unique;
mod weight_norm;

pub(crate) use attention::fused_attention;
pub use attention::{
    AttentionMeta, ATTENTION_COMBINE, ATTENTION_ROW, ATTENTION_SPLIT, ATTENTION_TILED,
};
pub use bag::BagMeta;
pub use conv::ConvMeta;
pub use epilogue::{epilogue_sources, producer_variants, EpilogueMeta};
pub use fft::FftMeta;
pub(crate) use fused::fused as fused_kernel;
pub use fused::{fused_source, FusedMeta};
pub use histogram::HistMeta;
pub use index::IndexMeta;
pub use norm::BatchNormMeta;
pub use pool::PoolMeta;
pub use resample::ResampleMeta;
pub use rnn::GateMeta;
pub use scatter::ScatterMeta;
pub use select::SelectMeta;
pub use shape::ShapeMeta;
pub use sort::SortMeta;

mod context;
mod elementwise;
mod lookup;
mod matmul;
mod reduce_ops;
mod views;

pub use context::KernelCtx;
pub(crate) use context::Out;
use elementwise::*;
pub use lookup::lookup;
pub(crate) use lookup::*;
use matmul::*;
pub use params::*;
use reduce_ops::*;
pub(crate) use views::*;

/// The variants of the conv, norm, pool, index and ints shaders.
pub fn nn_variants() -> Vec<Variant> {
    let mut v = vec![
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
        resample::GRID_SAMPLE_3D,
        rnn::GATES,
        linalg::MATMUL_INT,
    ];
    v.extend(reduce::variants());
    v.extend(ints::variants());
    v.extend(scatter::variants());
    v.extend(sort::variants());
    v.extend(select::variants());
    v.extend(unique::variants());
    v
}

/// Every enum of op codes a shader switches on ([`crate::gpu::shaders::OpCodes`]).
pub const OP_CODES: &[crate::gpu::shaders::OpCodes] = &[
    UnaryOp::CODES,
    BinaryOp::CODES,
    CompareOp::CODES,
    ReduceOp::CODES,
    ReduceIntOp::CODES,
    ints::IntBinaryOp::CODES,
    ints::IntCompareOp::CODES,
    ints::IntUnaryOp::CODES,
    ints::LogicalOp::CODES,
    ints::ConvertTo::CODES,
    reduce::StatsOp::CODES,
    reduce::ArgOp::CODES,
    reduce::ArgIntOp::CODES,
    reduce::ScanOp::CODES,
    reduce::ScanIntOp::CODES,
    scatter::ScatterOp::CODES,
    super::store::SmallInt::CODES,
    complex::ComplexOp::CODES,
];

/// Whether a variant's shader comes in f16 forms ([`Elems`]): elementwise ops, matmul,
/// softmax and layer norm, float reductions, resampling, convolutions and the streaming
/// attention.
pub fn has_f16_variants(v: &Variant) -> bool {
    matches!(
        v.shader,
        Shader::Elementwise
            | Shader::Matmul
            | Shader::Attention
            | Shader::Rows
            | Shader::RowsSubgroup
            | Shader::Resample
            | Shader::Conv
    ) || (v.shader == Shader::Reduce && v.entry == "reduce")
}

/// Whether a variant reads an index tensor and reports an invalid index into the run's fault
/// record (`src/gpu/fault.rs`; its module includes `shaders/fault.wgsl`): the dispatch
/// binds the record.
pub fn reports_faults(v: &Variant) -> bool {
    [
        index::GATHER,
        scatter::SCATTER,
        scatter::INDEX_WRITE,
        scatter::PUT_TARGET,
        quant::EMBEDDING_Q,
        bag::POOL,
        sort::SEARCH,
    ]
    .contains(v)
}

/// f32 or f16 (the float dtypes with GPU kernels).
fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16)
}

/// What the GPU does for a target.
#[derive(Debug, Clone, Copy)]
pub enum GpuOp {
    /// Metadata only (see the executor's module doc).
    View,
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CompareOp),
    Custom(fn(&mut KernelCtx) -> Result<Option<Vec<Slot>>>),
}

/// Loop iterations one invocation may run, in all its loops together, on an adapter that
/// caps them. Mesa's lavapipe (llvmpipe, a CPU adapter) ends every loop of an invocation
/// once its loops have taken 65,535 steps in all (each loop's exit test counts as a step),
/// without an error: a kernel whose thread walks a long row silently answers with the row
/// cut short (`sum` over 30,000 elements gave the sum of the first 21,845). Half of it, for
/// the small loops an estimate leaves out (index arithmetic, setup).
pub(crate) const LOOP_BUDGET: usize = 65_535 / 2;

/// Whether a thread taking `steps` loop steps for each of `n` items (its own loop's exit
/// test and the inner loops included) stays within [`LOOP_BUDGET`] on this adapter. GPUs
/// run loops to the end; CPU adapters and SwiftShader are held to the budget. Kernels split
/// longer work in parts (the reductions, arg-reductions and scans of reduce.wgsl) or decline
/// the node, whose CPU kernel then runs.
pub(crate) fn loops_fit(k: &KernelCtx, n: usize, steps: usize) -> bool {
    !crate::gpu::is_software(&k.r.dev.properties) || n.saturating_mul(steps) <= LOOP_BUDGET
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
pub fn run(k: &mut KernelCtx, op: GpuOp) -> Out {
    let res = run_op(k, op)?;
    if res.is_some() || matches!(op, GpuOp::View) || !k.r.dev.f16_enabled() || k.f16_as_f32 {
        return Ok(res);
    }
    via_f32(k, op)
}

fn via_f32(k: &mut KernelCtx, op: GpuOp) -> Out {
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
        let mut k32 = KernelCtx::new(&mut *k.r, &env, op32);
        k32.f16_as_f32 = true;
        run_op(&mut k32, op)?
    };
    let Some(outs) = outs else {
        return Ok(None);
    };
    // Round the f16 outputs (computed as f32) back to f16.
    let back = |k: &mut KernelCtx, t: GTensor, id: Option<usize>| -> Result<Option<GTensor>> {
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
            (Slot::Tensor(t), Some(Arg::Tensor(id))) => match back(k, t, Some(*id))? {
                Some(t) => Slot::Tensor(t),
                None => return Ok(None),
            },
            (Slot::Tensors(ts), Some(Arg::Tensors(ids))) if ts.len() == ids.len() => {
                let mut v = Vec::new();
                for (t, id) in ts.into_iter().zip(ids) {
                    match back(k, t, Some(*id))? {
                        Some(t) => v.push(t),
                        None => return Ok(None),
                    }
                }
                Slot::Tensors(v)
            }
            (slot, _) => slot,
        });
    }
    Ok(Some(res))
}

fn run_op(k: &mut KernelCtx, op: GpuOp) -> Out {
    match op {
        GpuOp::View => view(k),
        GpuOp::Unary(u) => {
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
        GpuOp::Binary(b) => binary(k, b),
        GpuOp::Compare(c) => compare(k, c),
        GpuOp::Custom(f) => f(k),
    }
}

pub(crate) fn one(r: Result<Option<GTensor>>) -> Out {
    Ok(r?.map(|t| vec![Slot::Tensor(t)]))
}
