//! Histograms on the GPU (shaders/histogram.wgsl): `histc` of an f32 tensor over a range, and
//! `bincount`. A range the caller gives runs here directly; ranges the CPU kernel refuses
//! (not finite, `min > max`) decline to the CPU kernel. The data's own range (`min == max`)
//! and bincount's length depend on the data: the executor ([`crate::gpu::dynamic`]) encodes
//! [`extrema`], reads its four words back ([`Extrema::of`]), raises the CPU kernel's errors
//! (a NaN or infinity in histc's data, a negative bincount input), then encodes
//! [`encode_histc`] or [`encode_bincount`] with the size it now knows.

use super::{contiguous, grid, KernelCtx, Out};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::GTensor;
use bytemuck::{Pod, Zeroable};

pub const HISTC: Variant = Variant::new(Shader::Histogram, "histc");
pub const EXTREMA: Variant = Variant::new(Shader::Histogram, "extrema");
pub const BINCOUNT: Variant = Variant::new(Shader::Histogram, "bincount");

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct HistMeta {
    numel: u32,
    bins: u32,
    lo: f32,
    hi: f32,
    row: u32,
    /// Bit 0: f32 words (`extrema`); bit 1: weighted (`bincount`).
    flags: u32,
    /// (offset, stride) of the 1-D words `extrema` and `bincount` read, and of the weights.
    x: [u32; 2],
    w: [u32; 2],
    _pad: [u32; 2],
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
    encode_histc(k, &x, bins, lo, hi)
}

/// Encode `histc(x, bins)` over [lo, hi] (None where the kernel declines: a dtype, a size,
/// a range the CPU kernel refuses).
pub(crate) fn encode_histc(k: &mut KernelCtx, x: &GTensor, bins: i64, lo: f32, hi: f32) -> Out {
    let numel = x.numel();
    if x.dtype != DType::F32
        || !k.out_is(DType::F32)
        || !k.fits(x)
        || bins < 1
        || bins as usize >= u32::MAX as usize
        || numel >= u32::MAX as usize
        || (numel as u64).saturating_mul(bins as u64) > MAX_READS
        // Each bin's thread walks every element (see `super::LOOP_BUDGET`).
        || !super::loops_fit(k, numel, 1)
        || !(lo.is_finite() && hi.is_finite() && lo < hi)
    {
        return Ok(None);
    }
    let bins = bins as usize;
    let Some(xc) = contiguous(k, x)? else {
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
        ..Default::default()
    };
    k.dispatch(
        &HISTC,
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &xc)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// `x` as a 1-D contiguous f32 tensor (a copy where it is strided): what histc's passes read.
/// None where the copy declines.
pub(crate) fn flat(k: &mut KernelCtx, x: &GTensor) -> Result<Option<GTensor>> {
    if x.dtype != DType::F32 || !k.fits(x) {
        return Ok(None);
    }
    let Some(xc) = contiguous(k, x)? else {
        return Ok(None);
    };
    Ok(Some(xc.view(vec![xc.numel()], vec![1], xc.offset)))
}

/// Whether `x` is a 1-D view of 32-bit words the strided passes (`extrema`, `bincount`) read.
fn words_1d(k: &KernelCtx, x: &GTensor) -> bool {
    x.rank() == 1 && k.fits(x) && x.numel() < u32::MAX as usize
}

/// The (offset, stride) of a 1-D view.
fn strided(x: &GTensor) -> [u32; 2] {
    [
        x.offset as u32,
        x.strides.first().copied().unwrap_or(1) as u32,
    ]
}

/// Encode the extrema of a non-empty f32 or int 1-D tensor into a fresh int32 tensor of four
/// words ([`Extrema::of`] reads them back). None for other dtypes or sizes.
pub(crate) fn extrema(k: &mut KernelCtx, x: &GTensor) -> Result<Option<GTensor>> {
    let float = x.dtype == DType::F32;
    if !(float || super::table::int(x.dtype)) || !words_1d(k, x) || x.numel() == 0 {
        return Ok(None);
    }
    k.ensure(x)?;
    let out = k.new_out(DType::I32, &[4])?;
    let meta = HistMeta {
        numel: x.numel() as u32,
        flags: float as u32,
        x: strided(x),
        ..Default::default()
    };
    k.dispatch(
        &EXTREMA,
        bytemuck::bytes_of(&meta),
        &[(3, x), (5, &out)],
        (1, 1, 1),
    )?;
    Ok(Some(out))
}

/// What [`extrema`] found, read back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Extrema {
    /// The smallest and largest value (floats and ints alike as f64, exact for both).
    Range(f64, f64),
    /// A NaN among floats.
    NaN,
    /// The first negative int, in element order.
    Negative(i64),
}

impl Extrema {
    /// Decode the four words of [`extrema`] for data of `dtype`.
    pub(crate) fn of(words: &[i32], dtype: DType) -> Extrema {
        let w = |i: usize| words.get(i).copied().unwrap_or(0) as u32;
        let float = dtype == DType::F32;
        if w(2) != 0 {
            return if float {
                Extrema::NaN
            } else {
                Extrema::Negative(w(3) as i32 as i64)
            };
        }
        // The shader's order-preserving keys back to values.
        let value = |key: u32| {
            if !float {
                return ((key ^ 0x8000_0000) as i32) as f64;
            }
            let bits = if key & 0x8000_0000 != 0 {
                key & 0x7fff_ffff
            } else {
                !key
            };
            f32::from_bits(bits) as f64
        };
        Extrema::Range(value(w(0)), value(w(1)))
    }
}

/// Encode `bincount(x, weights)` into `len` bins (the caller read the largest value back and
/// checked there is no negative one): int64 counts, or f32 sums of f32 weights of x's shape.
/// None for other dtypes or sizes.
pub(crate) fn encode_bincount(
    k: &mut KernelCtx,
    x: &GTensor,
    weights: Option<&GTensor>,
    len: usize,
) -> Out {
    let dtype = if weights.is_some() {
        DType::F32
    } else {
        DType::I64
    };
    if !super::table::int(x.dtype)
        || !words_1d(k, x)
        || weights.is_some_and(|w| w.dtype != DType::F32 || w.sizes != x.sizes || !words_1d(k, w))
        || len >= u32::MAX as usize
    {
        return Ok(None);
    }
    // Zeroed bins (0 is also f32 0.0).
    let Some(bins) = super::one_t(super::index::encode_fill(k, dtype, &[len], 0, [0, 0])?) else {
        return Ok(None);
    };
    let numel = x.numel();
    if numel == 0 || len == 0 {
        return Ok(Some(vec![Slot::Tensor(bins)]));
    }
    k.ensure(x)?;
    let w = weights.unwrap_or(x);
    k.ensure(w)?;
    let (gx, gy, row) = grid(numel, 256);
    let meta = HistMeta {
        numel: numel as u32,
        bins: len as u32,
        row,
        flags: (weights.is_some() as u32) << 1,
        x: strided(x),
        w: strided(w),
        ..Default::default()
    };
    // The weights' binding is bound unweighted too (the pass's layout has it): to x.
    k.dispatch(
        &BINCOUNT,
        bytemuck::bytes_of(&meta),
        &[(3, x), (4, w), (6, &bins)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(bins)]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, On};
    t.kernel(&["aten.histc"], On::Only(&["default"]), histc, all_f32);
    t.variants(&[HISTC, EXTREMA, BINCOUNT]);
}
