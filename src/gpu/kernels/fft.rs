//! Discrete Fourier transforms on the GPU (shaders/fft.wgsl): core ATen's `_fft_c2c`,
//! `_fft_r2c` and `_fft_c2r` and the training IR's `fft_*`, of f32 and complex64 inputs,
//! along any dims, any lengths, torch's normalizations. The node's transform is parsed once
//! by the CPU family's [`FftPlan`] (resizing, dims, kind, conjugations, norm); this file
//! runs it: a strided gather into a contiguous complex work tensor (zero-padded or trimmed
//! to the plan's sizes), one 1-D transform per dim over that layout (`outer` lines of `n`
//! elements `inner` apart, no transposes), and a gather into the output (the one-sided crop
//! of r2c, the real part of c2r, the norm's scale, hfft / ihfft's conjugations).
//!
//! A length that is a power of two runs log2(n) radix-2 Stockham passes; any other length
//! Bluestein's chirp-z: a circular convolution of a power-of-two length m >= 2n - 1 through
//! three FFTs of length m (the filter's included). All in f32; twiddles and chirps are
//! computed in the shader from exactly reduced angles (j^2 mod 2n for the chirp).
//! `stft` and `istft` reach these kernels as load-time decompositions
//! (src/passes/decompose/signal.rs); the forms those refuse run the CPU kernels
//! (src/ops/fft/stft.rs).

use super::table::{GpuTable, On};
use super::*;
use crate::ops::fft::{FftPlan, Kind};

pub const GATHER: Variant = Variant::new(Shader::Fft, "gather");
pub const STOCKHAM: Variant = Variant::new(Shader::Fft, "stockham");
pub const CHIRP_PRE: Variant = Variant::new(Shader::Fft, "chirp_pre");
pub const CHIRP_FILTER: Variant = Variant::new(Shader::Fft, "chirp_filter");
pub const CHIRP_MUL: Variant = Variant::new(Shader::Fft, "chirp_mul");
pub const CHIRP_POST: Variant = Variant::new(Shader::Fft, "chirp_post");
pub const HERMITIAN: Variant = Variant::new(Shader::Fft, "hermitian");

/// `Meta` of shaders/fft.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct FftMeta {
    pub count: u32,
    pub row: u32,
    pub n: u32,
    pub inner: u32,
    pub ns: u32,
    pub m: u32,
    pub flags: u32,
    pub rank: u32,
    pub scale: f32,
    pub src_offset: u32,
    pub _p: [u32; 2],
    pub sizes: [u32; 8],
    pub src_sizes: [u32; 8],
    pub src_strides: [u32; 8],
}

const INVERSE: u32 = 1;
const SRC_COMPLEX: u32 = 2;
const DST_COMPLEX: u32 = 4;
const CONJ: u32 = 8;

/// One 1-D transform's geometry over a contiguous work tensor: `outer` lines of `n`
/// elements, `inner` apart.
#[derive(Clone, Copy)]
struct Lines {
    outer: usize,
    n: usize,
    inner: usize,
}

impl Lines {
    fn along(sizes: &[usize], d: usize) -> Lines {
        Lines {
            outer: sizes[..d].iter().product(),
            n: sizes[d],
            inner: sizes[d + 1..].iter().product(),
        }
    }
    fn with_n(self, n: usize) -> Lines {
        Lines { n, ..self }
    }
    fn numel(self) -> usize {
        self.outer * self.n * self.inner
    }
}

/// Encode `v` over `threads` threads with `meta` (count and row filled in).
fn run(
    k: &mut KernelCtx,
    v: &Variant,
    mut meta: FftMeta,
    threads: usize,
    bufs: &[(u32, &GTensor)],
) -> Result<()> {
    if threads == 0 {
        return Ok(());
    }
    let (gx, gy, row) = grid(threads, 64);
    meta.count = threads as u32;
    meta.row = row;
    k.dispatch(v, bytemuck::bytes_of(&meta), bufs, (gx, gy, 1))
}

fn line_meta(l: Lines, m: usize, inverse: bool) -> FftMeta {
    FftMeta {
        n: l.n as u32,
        inner: l.inner as u32,
        m: m as u32,
        flags: inverse as u32 * INVERSE,
        scale: 1.0,
        ..Default::default()
    }
}

/// A contiguous complex64 tensor of `sizes` from `src` (f32 or complex64, any strides;
/// zero past its sizes), conjugated when `conj`, times `scale`; or its real parts into an
/// f32 tensor when `out` is f32.
fn gather(
    k: &mut KernelCtx,
    src: &GTensor,
    sizes: &[usize],
    out: DType,
    conj: bool,
    scale: f32,
) -> Result<GTensor> {
    let complex = src.dtype == DType::Complex64;
    let w = if complex { 2 } else { 1 };
    let strides: Vec<usize> = src.strides.iter().map(|s| s * w).collect();
    k.ensure(src)?;
    let dst = k.new_out(out, sizes)?;
    let meta = FftMeta {
        flags: (complex as u32 * SRC_COMPLEX)
            | ((out == DType::Complex64) as u32 * DST_COMPLEX)
            | (conj as u32 * CONJ),
        rank: sizes.len() as u32,
        scale,
        src_offset: (src.offset * w) as u32,
        sizes: pad8(sizes),
        src_sizes: pad8(&src.sizes),
        src_strides: pad8(&strides),
        ..Default::default()
    };
    run(k, &GATHER, meta, dst.numel(), &[(1, &dst), (2, src)])?;
    Ok(dst)
}

/// A fresh contiguous complex64 work tensor of `numel` elements.
fn work(k: &mut KernelCtx, numel: usize) -> Result<GTensor> {
    k.new_out(DType::Complex64, &[numel])
}

/// The power-of-two transform of the lines of `x` (a fresh work tensor, which the passes
/// overwrite), in its natural order: one radix-2 Stockham pass per factor of two.
fn stockham(k: &mut KernelCtx, x: GTensor, l: Lines, inverse: bool) -> Result<GTensor> {
    let mut a = x;
    let mut b = work(k, l.numel())?;
    let mut ns = 1;
    while ns < l.n {
        let meta = FftMeta {
            ns: ns as u32,
            ..line_meta(l, 0, inverse)
        };
        run(k, &STOCKHAM, meta, l.numel() / 2, &[(1, &b), (2, &a)])?;
        std::mem::swap(&mut a, &mut b);
        ns *= 2;
    }
    Ok(a)
}

/// Bluestein's transform of the lines of `x` for any length (see the module doc).
fn bluestein(k: &mut KernelCtx, x: &GTensor, l: Lines, inverse: bool) -> Result<GTensor> {
    let m = (2 * l.n - 1).next_power_of_two();
    let padded = l.with_n(m);
    let meta = line_meta(l, m, inverse);
    let a = work(k, padded.numel())?;
    run(k, &CHIRP_PRE, meta, padded.numel(), &[(1, &a), (2, x)])?;
    let filter = work(k, m)?;
    let fm = FftMeta {
        scale: 1.0 / m as f32,
        ..meta
    };
    run(k, &CHIRP_FILTER, fm, m, &[(1, &filter)])?;
    let one_line = Lines {
        outer: 1,
        n: m,
        inner: 1,
    };
    let filter = stockham(k, filter, one_line, false)?;
    let a = stockham(k, a, padded, false)?;
    let prod = work(k, padded.numel())?;
    run(
        k,
        &CHIRP_MUL,
        meta,
        padded.numel(),
        &[(1, &prod), (2, &a), (3, &filter)],
    )?;
    let conv = stockham(k, prod, padded, true)?;
    let out = work(k, l.numel())?;
    run(k, &CHIRP_POST, meta, l.numel(), &[(1, &out), (2, &conv)])?;
    Ok(out)
}

/// The unnormalized transform along dim `d` of the contiguous work tensor `x` of `sizes`.
fn along(
    k: &mut KernelCtx,
    x: GTensor,
    sizes: &[usize],
    d: usize,
    inverse: bool,
) -> Result<GTensor> {
    let l = Lines::along(sizes, d);
    match l.n {
        0 | 1 => Ok(x),
        n if n.is_power_of_two() => stockham(k, x, l, inverse),
        _ => bluestein(k, &x, l, inverse),
    }
}

/// Whether every word index the transform's kernels compute fits a u32: the largest tensor
/// is a Bluestein pass's padded lines (m < 4n) of the work tensor (the resized input, or
/// for c2r the output), two words per element.
fn fits(plan: &FftPlan) -> bool {
    let work = plan.resized.iter().product::<usize>();
    let work = work.max(plan.out_sizes.iter().product());
    plan.resized.len() <= MAX_RANK && work.saturating_mul(8) < u32::MAX as usize
}

/// `_fft_c2c`, `_fft_r2c`, `_fft_c2r` and `fft_*` (see the module doc).
fn fft(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if !matches!(x.dtype, DType::F32 | DType::Complex64) || !k.fits(&x) {
        return Ok(None);
    }
    // Invalid arguments: the CPU kernel reports them.
    let Ok(plan) = FftPlan::parse(&k.op, &x.sizes, x.dtype) else {
        return Ok(None);
    };
    if !k.out_is(plan.out_dtype) || !fits(&plan) {
        return Ok(None);
    }
    let mut sizes = plan.resized.clone();
    let mut w = gather(k, &x, &sizes, DType::Complex64, plan.conj_in, 1.0)?;
    let (last, rest) = match plan.dims.split_last() {
        Some((l, r)) => (Some(*l), r),
        None => (None, &[][..]),
    };
    match plan.kind {
        Kind::C2C { forward } => {
            for &d in &plan.dims {
                w = along(k, w, &sizes, d, !forward)?;
            }
        }
        Kind::R2C { .. } => {
            for &d in &plan.dims {
                w = along(k, w, &sizes, d, false)?;
            }
        }
        Kind::C2R { last: n } => {
            for &d in rest {
                w = along(k, w, &sizes, d, true)?;
            }
            let Some(l) = last else {
                return Ok(None);
            };
            let lines = Lines::along(&sizes, l).with_n(n);
            let full = work(k, lines.numel())?;
            let meta = line_meta(lines, sizes[l], true);
            run(k, &HERMITIAN, meta, lines.numel(), &[(1, &full), (2, &w)])?;
            sizes[l] = n;
            w = along(k, full, &sizes, l, true)?;
        }
    }
    let scale = plan.norm.factor(plan.signal_len()) as f32;
    let w = w.view(sizes.clone(), contiguous_strides(&sizes), 0);
    let out = gather(k, &w, &plan.out_sizes, plan.out_dtype, plan.conj_out, scale)?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// f32 or complex64 in, complex64 or f32 out.
fn fft_dtypes(inputs: &[DType], outputs: &[DType]) -> bool {
    let ok = |d: &DType| matches!(d, DType::Complex64 | DType::F32);
    inputs.len() == 1 && inputs.iter().chain(outputs).all(ok)
}

/// The targets of this file (in the complex table: every transform writes or reads a
/// complex tensor).
pub(super) fn register(t: &mut GpuTable) {
    let mut ops: Vec<String> = ["_fft_c2c", "_fft_r2c", "_fft_c2r"]
        .iter()
        .map(|o| format!("aten.{o}"))
        .collect();
    for op in [
        "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
        "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn",
    ] {
        ops.push(format!("aten.fft_{op}"));
    }
    let names: Vec<&str> = ops.iter().map(String::as_str).collect();
    t.kernel(&names, On::Only(&["default"]), fft, fft_dtypes);
    t.variants(&[
        GATHER,
        STOCKHAM,
        CHIRP_PRE,
        CHIRP_FILTER,
        CHIRP_MUL,
        CHIRP_POST,
        HERMITIAN,
    ]);
}
