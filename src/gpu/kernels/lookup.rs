//! Which `aten.*` targets have a GPU kernel ([`lookup`]): the entries the kernel families
//! register (`table.rs`), and the in-place forms of elementwise ops.

use super::table::{all_f32, gpu_table, GpuEntry, F16};
use super::*;

/// What the GPU does for `target`, if it has a kernel.
pub fn lookup(target: &str) -> Option<GpuOp> {
    entry(target).map(|e| e.op)
}

/// The entry serving `target`: a family's, or for an in-place elementwise target
/// (`aten.relu_.default`) the kernel that runs the out-of-place one into `self` (f32 only).
pub(super) fn entry(target: &str) -> Option<GpuEntry> {
    if let Some(e) = gpu_table().get(target) {
        return Some(*e);
    }
    let (op, _) = target.rsplit_once('.')?;
    (op.ends_with('_') && inplace_base(target).is_some()).then_some(GpuEntry {
        op: GpuOp::Custom(inplace),
        serves: all_f32,
        f16: F16::Converted,
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
