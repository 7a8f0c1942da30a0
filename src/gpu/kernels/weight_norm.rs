//! Weight normalization on the GPU: `_weight_norm(v, g, dim)` and `_weight_norm_interface`
//! (which also returns the norms, shaped as `g`), f32: the L2 norm of `v` over every dim but
//! `dim` (over all of `v` for `_weight_norm`'s `dim = -1`) by the stats reduction of
//! reduce.rs, then `v * (g / norm)` as two broadcast elementwise kernels. The CPU kernel
//! (src/ops/norm/weight_norm.rs) sums the squares in f64; here they are summed in f32.
//! Arguments the CPU kernel refuses decline here, so its error is the one users see.

use super::reduce::{self, StatsOp};
use super::{binary_f32, contiguous, BinaryOp, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::store::contiguous_strides;

fn weight_norm(k: &mut KernelCtx) -> Out {
    let (Some(v), Some(g)) = (k.t("v"), k.t("g")) else {
        return Ok(None);
    };
    let interface = k.target().starts_with("aten._weight_norm_interface");
    let r = v.rank();
    if v.dtype != DType::F32
        || g.dtype != DType::F32
        || r == 0
        || !k.fits(&v)
        || !k.fits(&g)
        || !k.out_is(DType::F32)
        || (interface && k.out_dtype(1) != Some(DType::F32))
    {
        return Ok(None);
    }
    let dim = k.op.int_or("dim", 0)?;
    // The kept dim (None: the norm of the whole tensor).
    let kept = if dim == -1 && !interface {
        None
    } else {
        let d = if dim < 0 { dim + r as i64 } else { dim };
        if d < 0 || d >= r as i64 || (interface && d != 0 && d != r as i64 - 1) {
            return Ok(None);
        }
        Some(d as usize)
    };
    let red: Vec<bool> = (0..r).map(|d| Some(d) != kept).collect();
    let size = kept.map_or(1, |d| v.sizes[d]);
    if g.numel() != size {
        return Ok(None);
    }
    let mut pl = reduce::plan(&v, &red, true);
    pl.meta.p = 2.0;
    if !reduce::stats_fit(k, &pl, StatsOp::Norm) {
        return Ok(None);
    }
    k.ensure(&v)?;
    // Norms in the keepdim shape [1, .., size, .., 1], and g viewed the same way.
    let norm = reduce::encode_stats(k, &v, &pl, StatsOp::Norm)?;
    let Some(gc) = contiguous(k, &g)? else {
        return Ok(None);
    };
    let keep_strides = contiguous_strides(&pl.out_sizes);
    let gv = gc.view(pl.out_sizes.clone(), keep_strides.clone(), gc.offset);
    let Some(scale) = binary_f32(k, BinaryOp::Div, &gv, norm.clone())? else {
        return Ok(None);
    };
    // The scale broadcast over v (stride 0 along the reduced dims).
    let strides = (0..r)
        .map(|d| if red[d] { 0 } else { keep_strides[d] })
        .collect();
    let scale = scale.view(v.sizes.clone(), strides, scale.offset);
    let Some(w) = binary_f32(k, BinaryOp::Mul, &v, scale)? else {
        return Ok(None);
    };
    let mut outs = vec![Slot::Tensor(w)];
    if interface {
        let gs = g.sizes.clone();
        outs.push(Slot::Tensor(norm.view(
            gs.clone(),
            contiguous_strides(&gs),
            norm.offset,
        )));
    }
    Ok(Some(outs))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, On};
    t.kernel(
        &["aten._weight_norm", "aten._weight_norm_interface"],
        On::Only(&["default"]),
        weight_norm,
        all_f32,
    );
}
