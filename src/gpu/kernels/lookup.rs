//! Which `aten.*` targets have a GPU kernel ([`lookup`]): the entries the kernel families
//! register (`table.rs`), and the in-place forms of elementwise ops.

use super::table::{gpu_table, GpuEntry};
use super::*;

/// What the GPU does for `target`, if it has a kernel.
pub fn lookup(target: &str) -> Option<GpuOp> {
    entry(target).map(|e| e.op)
}

/// The entry serving `target`: a family's, or for an in-place elementwise target
/// (`aten.relu_.default`) the kernel that runs the out-of-place op's into `self`, with the
/// out-of-place entry's dtypes.
pub(super) fn entry(target: &str) -> Option<GpuEntry> {
    if let Some(e) = gpu_table().get(target) {
        return Some(*e);
    }
    let base = inplace_base_entry(target)?;
    let serves = match base.op {
        GpuOp::Compare(_) => compares_in_place,
        _ => base.serves,
    };
    Some(GpuEntry {
        op: GpuOp::Custom(inplace),
        serves,
        ..base
    })
}

/// The out-of-place op of an in-place elementwise target (`aten.relu_.default` ->
/// `aten.relu.default`'s kernel), when it is a plain unary or binary op.
pub(super) fn inplace_base(target: &str) -> Option<GpuOp> {
    inplace_base_entry(target).map(|e| e.op)
}

fn inplace_base_entry(target: &str) -> Option<GpuEntry> {
    let (op, overload) = target.rsplit_once('.')?;
    let base = op.strip_suffix('_')?;
    if base.ends_with('_') || overload == "out" {
        return None;
    }
    // pow_.Scalar is pow.Tensor_Scalar in place (pow.Scalar has a scalar base).
    let overload = if base == "aten.pow" && overload == "Scalar" {
        "Tensor_Scalar"
    } else {
        overload
    };
    let e = *gpu_table().get(&format!("{base}.{overload}"))?;
    match e.op {
        GpuOp::Unary(_) | GpuOp::Binary(_) | GpuOp::Compare(_) => Some(e),
        // Unary ops with scalar arguments, whose `self` keeps its shape.
        GpuOp::Custom(_) if elementwise_args::INPLACE_CUSTOM.contains(&base) => Some(e),
        _ => None,
    }
}
