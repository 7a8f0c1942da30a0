//! Histograms on the GPU (shaders/histogram.wgsl): `histc` of an f32 tensor over a range the
//! caller gives. The data's own range (`min == max`) and ranges the CPU kernel refuses
//! (not finite, `min > max`) decline to the CPU kernel, which finds the extrema and raises
//! torch's errors (a NaN in the data makes the range NaN: an error only a readback shows).

use super::{contiguous, grid, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use bytemuck::{Pod, Zeroable};

pub const HISTC: Variant = Variant::new(Shader::Histogram, "histc");

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
struct HistMeta {
    numel: u32,
    bins: u32,
    lo: f32,
    hi: f32,
    row: u32,
    _pad: [u32; 3],
}

/// Every bin reads every element: past this many (bins x elements) reads the CPU kernel's
/// single pass is the better choice.
const MAX_READS: u64 = 1 << 32;

fn histc(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let bins = k.op.int_or("bins", 100)?;
    // The range as the CPU kernel rounds it (torch computes in the input's dtype).
    let lo = k.op.float_or("min", 0.0)? as f32;
    let hi = k.op.float_or("max", 0.0)? as f32;
    let numel = x.numel();
    if x.dtype != DType::F32
        || !k.out_is(DType::F32)
        || !k.fits(&x)
        || bins < 1
        || bins as usize >= u32::MAX as usize
        || numel >= u32::MAX as usize
        || (numel as u64).saturating_mul(bins as u64) > MAX_READS
        || !(lo.is_finite() && hi.is_finite() && lo < hi)
    {
        return Ok(None);
    }
    let bins = bins as usize;
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let out = k.new_out(DType::F32, &[bins])?;
    let (gx, gy, row) = grid(bins, 64);
    let meta = HistMeta {
        numel: numel as u32,
        bins: bins as u32,
        lo,
        hi,
        row,
        _pad: [0; 3],
    };
    k.dispatch(
        &HISTC,
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &xc)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, On};
    t.kernel(&["aten.histc"], On::Only(&["default"]), histc, all_f32);
    t.variants(&[HISTC]);
}
