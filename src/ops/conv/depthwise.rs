//! Depthwise convolution (one input channel per group: mobilenet's 3×3 and 5×5 layers),
//! computed directly. Each input plane is copied once into a zero-padded buffer split into
//! `stride` column phases, so every kernel tap reads contiguous runs even for strided
//! convolutions. The outputs are then computed in runs of eight (a vector) along each row,
//! eight runs at a time so that eight independent accumulators hide the add latency, over
//! all taps. On x86-64 the kernel is also compiled for AVX2 with FMA (each tap one fused
//! multiply-add, as torch's vectorized depthwise kernels do) and picked at run time.
//!
//! f32 3×3 and 5×5 kernels with row stride 1 or 2 take a row-reuse kernel there instead
//! ([`Strips`]): eight output rows per column block at once, so that each input vector
//! loaded feeds every output row that reads it (the runs above load once per multiply-add
//! and were bound by loads). It keeps its accumulators, weights and rows in registers: best
//! with AVX-512VL's 32 (still 256-bit code), also compiled for plain AVX2.

use super::kernels::{copy, copy_short, Geometry, PlanePost};
use crate::ops::matmul::gemm::{num_threads, par_chunks, Float};
use std::mem::MaybeUninit;

/// Outputs per run (one AVX2 vector of f32).
pub(super) const LANES: usize = 8;

/// The padded, phase-split copy of one input plane.
pub(super) struct Padded {
    /// Padded extents that the output reads (rows, columns per phase).
    yp: usize,
    wq: usize,
    pub(super) phase_len: usize,
    /// The rows that hold input: (the input row's offset in its plane, the padded row's
    /// offset in a phase), computed once per call rather than per plane.
    pub(super) rows: Vec<(usize, usize)>,
}

impl Padded {
    pub(super) fn new(g: &Geometry) -> Padded {
        let [kd, kh, kw] = g.ks;
        let [od, oh, ow] = g.outs;
        let zp = (od - 1) * g.stride[0] + (kd - 1) * g.dil[0] + 1;
        let yp = (oh - 1) * g.stride[1] + (kh - 1) * g.dil[1] + 1;
        let xp = (ow - 1) * g.stride[2] + (kw - 1) * g.dil[2] + 1;
        // Wide enough that the last block of LANES outputs can be computed whole (the
        // extra outputs past the row's end are computed but never stored).
        let wq = xp
            .div_ceil(g.stride[2])
            .max(ow.div_ceil(LANES) * LANES + (kw - 1) * g.dil[2] / g.stride[2] + 1);
        let [id, ih, iw] = g.ins;
        let [pd, ph, _] = g.pad_lo;
        let mut rows = Vec::new();
        for z in 0..zp {
            let Some(iz) = z.checked_sub(pd).filter(|&v| v < id) else {
                continue;
            };
            for y in 0..yp {
                if let Some(iy) = y.checked_sub(ph).filter(|&v| v < ih) {
                    rows.push(((iz * ih + iy) * iw, (z * yp + y) * wq));
                }
            }
        }
        Padded {
            yp,
            wq,
            phase_len: zp * yp * wq,
            rows,
        }
    }

    /// Each tap's offset in the buffer (relative to a run's `src`): its phase, its (depth,
    /// row) and its column within the phase.
    pub(super) fn tap_offsets(&self, g: &Geometry) -> Vec<usize> {
        let [_, kh, kw] = g.ks;
        let [dd, dh, dw] = g.dil;
        let sw = g.stride[2];
        (0..g.taps())
            .map(|t| {
                let (kz, ky, kx) = (t / (kh * kw), (t / kw) % kh, t % kw);
                let off = kx * dw;
                (off % sw) * self.phase_len + (kz * dd * self.yp + ky * dh) * self.wq + off / sw
            })
            .collect()
    }

    /// Copy `rows` (some of [`Padded::rows`]) of the input plane `xc` into `buf` (stride[2] ×
    /// phase_len), which was zeroed when it was allocated: only the elements that hold input
    /// are written, and they are the same for every plane of the geometry, so the padding
    /// stays zero from plane to plane.
    pub(super) fn fill<T: Float>(
        &self,
        g: &Geometry,
        xc: &[T],
        buf: &mut [T],
        rows: &[(usize, usize)],
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            unsafe fn avx2<T: Float>(
                p: &Padded,
                g: &Geometry,
                xc: &[T],
                buf: &mut [T],
                rows: &[(usize, usize)],
            ) {
                p.fill_data(g, xc, buf, rows)
            }
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                return unsafe { avx2(self, g, xc, buf, rows) };
            }
        }
        self.fill_data(g, xc, buf, rows)
    }

    #[inline(always)]
    fn fill_data<T: Float>(&self, g: &Geometry, xc: &[T], buf: &mut [T], rows: &[(usize, usize)]) {
        let iw = g.ins[2];
        let pw = g.pad_lo[2];
        let sw = g.stride[2];
        let xp = self.wq * sw;
        // Padded column c = ix + pw, inside the read extent.
        let last = iw.min(xp.saturating_sub(pw));
        for &(from, row) in rows {
            let src = &xc[from..from + iw];
            if sw == 1 {
                if pw < self.wq {
                    let dst = &mut buf[row + pw..row + self.wq];
                    let n = last.min(dst.len());
                    copy(&mut dst[..n], &src[..n]);
                }
            } else if sw == 2 {
                // Both phases in one pass over the row: input column 2i is padded column
                // 2i + pw (phase pw % 2, column i + pw / 2), input 2i + 1 the other phase's
                // column i + (pw + 1) / 2.
                let wq = self.wq;
                let (qe, qo) = ((pw / 2).min(wq), pw.div_ceil(2).min(wq));
                let (ne, no) = (last.div_ceil(2).min(wq - qe), (last / 2).min(wq - qo));
                let at = self.phase_len + row;
                let (lo, hi) = buf.split_at_mut(at);
                let (p0, p1) = (&mut lo[row..row + wq], &mut hi[..wq]);
                let (ev, od) = if pw.is_multiple_of(2) {
                    (p0, p1)
                } else {
                    (p1, p0)
                };
                let pairs = ne.min(no);
                let (ev, od) = (&mut ev[qe..qe + ne], &mut od[qo..qo + no]);
                let done = if T::IS_F32 {
                    // SAFETY: T is f32 (`IS_F32`): the same memory, the same type.
                    unsafe {
                        let f = |s: &mut [T]| {
                            std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len())
                        };
                        deinterleave(
                            std::slice::from_raw_parts(src.as_ptr().cast(), src.len()),
                            f(&mut ev[..pairs]),
                            f(&mut od[..pairs]),
                        )
                    }
                } else {
                    0
                };
                for i in done..pairs {
                    ev[i] = src[2 * i];
                    od[i] = src[2 * i + 1];
                }
                for i in pairs..ne {
                    ev[i] = src[2 * i];
                }
                for i in pairs..no {
                    od[i] = src[2 * i + 1];
                }
            } else {
                // Phase f holds padded columns q * sw + f, i.e. inputs q * sw + f - pw.
                for f in 0..sw {
                    let dst =
                        &mut buf[f * self.phase_len + row..f * self.phase_len + row + self.wq];
                    // Columns q with 0 <= q * sw + f - pw < last hold inputs.
                    let q0 = pw.saturating_sub(f).div_ceil(sw).min(self.wq);
                    let q1 = (last + pw)
                        .saturating_sub(f)
                        .div_ceil(sw)
                        .clamp(q0, self.wq);
                    if q0 < q1 {
                        let from = q0 * sw + f - pw;
                        for (d, &v) in dst[q0..q1].iter_mut().zip(src[from..].iter().step_by(sw)) {
                            *d = v;
                        }
                    }
                }
            }
        }
    }
}

/// `ev[i] = src[2 i]`, `od[i] = src[2 i + 1]` with vector shuffles, for the leading pairs
/// (eight at a time with AVX2, four with simd128; `ev` and `od` equally long, `src` at least
/// twice as long); returns how many pairs it did, the rest being the caller's.
#[inline(always)]
fn deinterleave(src: &[f32], ev: &mut [f32], od: &mut [f32]) -> usize {
    let n = ev.len().min(od.len()).min(src.len() / 2);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        use std::arch::x86_64::*;
        #[target_feature(enable = "avx2")]
        unsafe fn run(src: &[f32], ev: &mut [f32], od: &mut [f32], n: usize) -> usize {
            let mut i = 0;
            while i + 8 <= n {
                // SAFETY: src[2i..2i + 16], ev[i..i + 8] and od[i..i + 8] are in bounds.
                unsafe {
                    let a = _mm256_loadu_ps(src.as_ptr().add(2 * i));
                    let b = _mm256_loadu_ps(src.as_ptr().add(2 * i + 8));
                    // Per 128-bit half: [a0 a2 b0 b2 | a4 a6 b4 b6]; then the 64-bit pairs
                    // reordered to [a0 a2 a4 a6 b0 b2 b4 b6].
                    let e = _mm256_shuffle_ps::<0b10_00_10_00>(a, b);
                    let o = _mm256_shuffle_ps::<0b11_01_11_01>(a, b);
                    let e = _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(
                        _mm256_castps_pd(e),
                    ));
                    let o = _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(
                        _mm256_castps_pd(o),
                    ));
                    _mm256_storeu_ps(ev.as_mut_ptr().add(i), e);
                    _mm256_storeu_ps(od.as_mut_ptr().add(i), o);
                }
                i += 8;
            }
            i
        }
        // SAFETY: the CPU has AVX2 (checked just above); `n` bounds every access.
        return unsafe { run(src, ev, od, n) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use std::arch::wasm32::*;
        let mut i = 0;
        while i + 4 <= n {
            // SAFETY: src[2i..2i + 8], ev[i..i + 4] and od[i..i + 4] are in bounds.
            unsafe {
                let a = v128_load(src.as_ptr().add(2 * i).cast());
                let b = v128_load(src.as_ptr().add(2 * i + 4).cast());
                v128_store(
                    ev.as_mut_ptr().add(i).cast(),
                    i32x4_shuffle::<0, 2, 4, 6>(a, b),
                );
                v128_store(
                    od.as_mut_ptr().add(i).cast(),
                    i32x4_shuffle::<1, 3, 5, 7>(a, b),
                );
            }
            i += 4;
        }
        return i;
    }
    #[allow(unreachable_code)]
    {
        let _ = (src, ev, od, n);
        0
    }
}

/// A run of up to [`LANES`] outputs along one output row: where its first output's taps
/// start in the padded buffer, where it goes in the output plane, and how many outputs it
/// has (the last run of a row is shorter; the extra lanes are computed and dropped).
#[derive(Clone, Copy)]
pub(super) struct Run {
    pub(super) src: usize,
    pub(super) dst: usize,
    pub(super) n: usize,
}

/// Every run of the output plane, in order.
pub(super) fn runs(g: &Geometry, p: &Padded) -> Vec<Run> {
    let [od, oh, ow] = g.outs;
    let [sd, sh, _] = g.stride;
    let mut out = Vec::with_capacity(od * oh * ow.div_ceil(LANES));
    for oz in 0..od {
        for oy in 0..oh {
            let origin = (oz * sd * p.yp + oy * sh) * p.wq;
            for ox in (0..ow).step_by(LANES) {
                out.push(Run {
                    src: origin + ox,
                    dst: (oz * oh + oy) * ow + ox,
                    n: LANES.min(ow - ox),
                });
            }
        }
    }
    out
}

/// One output plane from its padded input plane; `offs` holds each kernel tap's offset in
/// the buffer (relative to a run's `src`), `ws` its weight. Every output is `b` plus the taps'
/// products in tap order, as before the runs were interleaved.
///
/// # Safety
/// Every `run.src + tap offset + LANES` is at most `buf.len()` and every `run.dst + run.n`
/// at most `dst.len()`.
#[inline(always)]
unsafe fn plane<T: Float, const FMA: bool>(
    runs: &[Run],
    buf: &[T],
    offs: &[usize],
    ws: &[T],
    b: T,
    dst: &mut [MaybeUninit<T>],
) {
    // Eight runs at a time: eight independent multiply-add chains keep both FMA units busy
    // (four waited on the latency); the last one to seven together too.
    let mut eights = runs.chunks_exact(8);
    for q in &mut eights {
        // SAFETY: as the caller promised.
        unsafe { group::<T, 8, FMA>(q, buf, offs, ws, b, dst) };
    }
    // SAFETY (each arm): as the caller promised.
    unsafe {
        match eights.remainder() {
            r @ [_, _, _, _, _, _, _] => group::<T, 7, FMA>(r, buf, offs, ws, b, dst),
            r @ [_, _, _, _, _, _] => group::<T, 6, FMA>(r, buf, offs, ws, b, dst),
            r @ [_, _, _, _, _] => group::<T, 5, FMA>(r, buf, offs, ws, b, dst),
            r @ [_, _, _, _] => group::<T, 4, FMA>(r, buf, offs, ws, b, dst),
            r @ [_, _, _] => group::<T, 3, FMA>(r, buf, offs, ws, b, dst),
            r @ [_, _] => group::<T, 2, FMA>(r, buf, offs, ws, b, dst),
            r @ [_] => group::<T, 1, FMA>(r, buf, offs, ws, b, dst),
            _ => {}
        }
    }
}

/// `N` runs (`runs.len() == N`) over all taps, with `N` independent accumulators; with
/// `FMA`, each tap's product and sum rounded once (code compiled with FMA only).
///
/// # Safety
/// As [`plane`].
#[inline(always)]
unsafe fn group<T: Float, const N: usize, const FMA: bool>(
    runs: &[Run],
    buf: &[T],
    offs: &[usize],
    ws: &[T],
    b: T,
    dst: &mut [MaybeUninit<T>],
) {
    let load = |at: usize| -> &[T; LANES] {
        // SAFETY: in bounds as the caller promised.
        unsafe { &*(buf.as_ptr().add(at) as *const [T; LANES]) }
    };
    let mut acc = [[b; LANES]; N];
    for (&off, &wv) in offs.iter().zip(ws) {
        for (a, r) in acc.iter_mut().zip(runs) {
            let s = load(r.src + off);
            for j in 0..LANES {
                a[j] = if FMA {
                    wv.fused_mul_add(s[j], a[j])
                } else {
                    a[j] + wv * s[j]
                };
            }
        }
    }
    for (a, r) in acc.iter().zip(runs) {
        // SAFETY: in bounds as the caller promised.
        unsafe {
            let d = dst.as_mut_ptr().add(r.dst).cast::<T>();
            if r.n == LANES {
                // A whole run: one vector store.
                d.cast::<[T; LANES]>().write_unaligned(*a);
            } else {
                copy_short(d, a.as_ptr(), r.n);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn plane_fma<T: Float>(
    runs: &[Run],
    buf: &[T],
    offs: &[usize],
    ws: &[T],
    b: T,
    dst: &mut [MaybeUninit<T>],
) {
    // SAFETY: as the caller promised.
    unsafe { plane::<T, true>(runs, buf, offs, ws, b, dst) }
}

/// [`plane`], compiled for AVX2 and FMA where the CPU has them.
///
/// # Safety
/// As [`plane`].
unsafe fn plane_dispatch<T: Float>(
    runs: &[Run],
    buf: &[T],
    offs: &[usize],
    ws: &[T],
    b: T,
    dst: &mut [MaybeUninit<T>],
) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked just above); bounds as the caller
        // promised.
        return unsafe { plane_fma(runs, buf, offs, ws, b, dst) };
    }
    // SAFETY: as the caller promised.
    unsafe { plane::<T, false>(runs, buf, offs, ws, b, dst) }
}

/// Output rows per strip of [`strips`].
const STRIP: usize = 8;
// The rows `strip` writes out: (STRIP - 1) x the largest row stride + the largest kernel height.
const _: () = assert!((STRIP - 1) * 2 + 5 == 19);

/// The row-reuse kernel's geometry, for a 2-D depthwise convolution whose kernel height and
/// row stride have an instance ([`Strips::new`] says which): every input vector it loads
/// feeds all the output rows of the strip that read it (up to kh multiply-adds per load,
/// where [`plane`] loads once per multiply-add).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Strips {
    oh: usize,
    ow: usize,
    /// The padded buffer's row pitch.
    wq: usize,
    kw: usize,
    /// Per kernel column: its offset in the buffer (its phase and its column in the phase).
    cols: Vec<usize>,
    /// The plane kernel for this kernel height and row stride, for this CPU.
    kernel: StripKernel,
}

/// A plane kernel of [`Strips`]: (strips, padded buffer, taps' weights, bias, output plane).
type StripKernel = unsafe fn(&Strips, &[f32], &[f32], f32, &mut [MaybeUninit<f32>]);

impl Strips {
    /// The strips of `g` over `p`, where the kernel has an instance: f32 on x86-64 with
    /// AVX2 and FMA, 2-D, kernel height 3 or 5, row stride 1 or 2, row dilation 1.
    #[allow(unused_variables)]
    fn new<T: Float>(g: &Geometry, p: &Padded) -> Option<Strips> {
        #[cfg(target_arch = "x86_64")]
        {
            if !T::IS_F32
                || g.ks[0] != 1
                || g.outs[0] != 1
                || g.dil[1] != 1
                || !std::is_x86_feature_detected!("avx2")
                || !std::is_x86_feature_detected!("fma")
            {
                return None;
            }
            let wide = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl");
            let kernel: StripKernel = match (g.ks[1], g.stride[1], wide) {
                (3, 1, false) => strips_fma::<3, 1>,
                (3, 2, false) => strips_fma::<3, 2>,
                (5, 1, false) => strips_fma::<5, 1>,
                (5, 2, false) => strips_fma::<5, 2>,
                (3, 1, true) => strips_avx512::<3, 1>,
                (3, 2, true) => strips_avx512::<3, 2>,
                (5, 1, true) => strips_avx512::<5, 1>,
                (5, 2, true) => strips_avx512::<5, 2>,
                _ => return None,
            };
            let (sw, dw) = (g.stride[2], g.dil[2]);
            let cols = (0..g.ks[2])
                .map(|kx| (kx * dw % sw) * p.phase_len + kx * dw / sw)
                .collect();
            Some(Strips {
                oh: g.outs[1],
                ow: g.outs[2],
                wq: p.wq,
                kw: g.ks[2],
                cols,
                kernel,
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        None
    }
}

/// `$name`: [`strips`] compiled with the target features `$features`.
macro_rules! strips_for {
    ($(#[$doc:meta])* $name:ident, $features:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`strips`]; the CPU has these target features.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<const KH: usize, const SH: usize>(
            s: &Strips,
            buf: &[f32],
            ws: &[f32],
            b: f32,
            dst: &mut [MaybeUninit<f32>],
        ) {
            // SAFETY: as the caller promised.
            unsafe { strips::<KH, SH>(s, buf, ws, b, dst) }
        }
    };
}

strips_for!(
    /// [`strips`] compiled for AVX2 and FMA.
    strips_fma,
    "avx2,fma"
);
strips_for!(
    /// [`strips`] compiled with AVX-512VL: the same 256-bit code with 32 vector registers
    /// rather than 16, so that a strip's accumulators, weights and rows all stay in registers.
    strips_avx512,
    "avx2,fma,avx512f,avx512vl"
);

/// One output plane (as [`plane`] computes it) by strips of [`STRIP`] output rows per
/// column block of [`LANES`]: for each kernel column, each input row of the strip is loaded
/// once and multiplied into every output row it reaches. Each output is `b` plus the taps'
/// products in (column, row) order, each a fused multiply-add. A plane of fewer rows is one
/// strip of its height; in a taller one the last strip ends at the last row (its rows
/// overlapping the previous strip's are computed again, to the same values).
///
/// # Safety
/// The buffer holds every element the plane's runs ([`runs`]) read at each tap offset, and
/// `dst` is one whole output plane (oh × ow); the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn strips<const KH: usize, const SH: usize>(
    s: &Strips,
    buf: &[f32],
    ws: &[f32],
    b: f32,
    dst: &mut [MaybeUninit<f32>],
) {
    for ox in (0..s.ow).step_by(LANES) {
        let mut oy = 0;
        while oy < s.oh {
            let left = s.oh - oy;
            // SAFETY (each arm): the strip's rows are inside the plane, as the caller
            // promised.
            unsafe {
                match left {
                    1 => strip::<1, KH, SH>(s, buf, ws, b, dst, oy, ox),
                    2 => strip::<2, KH, SH>(s, buf, ws, b, dst, oy, ox),
                    3 => strip::<3, KH, SH>(s, buf, ws, b, dst, oy, ox),
                    4 => strip::<4, KH, SH>(s, buf, ws, b, dst, oy, ox),
                    5 => strip::<5, KH, SH>(s, buf, ws, b, dst, oy, ox),
                    6 => strip::<6, KH, SH>(s, buf, ws, b, dst, oy, ox),
                    7 => strip::<7, KH, SH>(s, buf, ws, b, dst, oy, ox),
                    _ => strip::<STRIP, KH, SH>(s, buf, ws, b, dst, oy, ox),
                }
            }
            oy += STRIP;
            if oy < s.oh && s.oh - oy < STRIP && s.oh >= STRIP {
                oy = s.oh - STRIP;
            }
        }
    }
}

/// `R` output rows from `oy`, columns `ox..ox + LANES` (the ones inside the row stored).
///
/// # Safety
/// As [`strips`], and `oy + R <= oh`; the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn strip<const R: usize, const KH: usize, const SH: usize>(
    s: &Strips,
    buf: &[f32],
    ws: &[f32],
    b: f32,
    dst: &mut [MaybeUninit<f32>],
    oy: usize,
    ox: usize,
) {
    use std::arch::x86_64::*;
    let at = oy * SH * s.wq + ox;
    // SAFETY: the CPU has AVX2 and FMA (the caller's promise); every load is in bounds as
    // the caller promised (the runs of rows oy..oy + R read exactly these rows at these
    // columns), every store inside the plane (below).
    unsafe {
        let mut acc = [_mm256_set1_ps(b); R];
        for (kx, &col) in s.cols.iter().enumerate() {
            let w: [__m256; KH] = std::array::from_fn(|ky| _mm256_set1_ps(ws[ky * s.kw + kx]));
            let src = buf.as_ptr().add(at + col);
            // Input row y of the strip feeds output row r where y = r * SH + ky. Written out
            // per row (a constant y each), so that every accumulator index is a constant and
            // the accumulators stay in registers (LLVM does not unroll the loop over y).
            macro_rules! rows {
                ($($y:literal)*) => {$(
                    if $y < (R - 1) * SH + KH {
                        let v = _mm256_loadu_ps(src.add($y * s.wq));
                        for (ky, &wk) in w.iter().enumerate() {
                            if $y >= ky && ($y - ky) % SH == 0 && ($y - ky) / SH < R {
                                let a = &mut acc[($y - ky) / SH];
                                *a = _mm256_fmadd_ps(wk, v, *a);
                            }
                        }
                    }
                )*};
            }
            rows!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18);
        }
        let n = LANES.min(s.ow - ox);
        for (r, a) in acc.iter().enumerate() {
            let row = oy + r;
            let d = dst.as_mut_ptr().add(row * s.ow + ox).cast::<f32>();
            // A whole vector where the run is whole, or where the plane's rows are one run
            // each and the lanes past the row's end fall on the next rows' first outputs
            // (stored after these) inside the plane; the exact outputs otherwise. (A plane
            // smaller than a vector must not be written past its end: it may be the
            // tensor's last.)
            let end = row * s.ow + ox + LANES;
            if n == LANES || (s.ow < LANES && row + 1 < s.oh && end <= s.oh * s.ow) {
                _mm256_storeu_ps(d, *a);
            } else {
                let mut lanes = [0.0f32; LANES];
                _mm256_storeu_ps(lanes.as_mut_ptr(), *a);
                copy_short(d, lanes.as_ptr(), n);
            }
        }
    }
}

/// Depthwise convolution: `x` [N, C, D, H, W], `w` [O, 1, kd, kh, kw] with O a multiple of
/// C; writes [N, O, OD, OH, OW] into `out` (every element: it may start uninitialized),
/// applying `post` (a fused activation) to each output plane as it is finished.
pub(super) fn depthwise<T: Float>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    out: &mut [MaybeUninit<T>],
    post: PlanePost<T>,
) {
    let sw = g.stride[2];
    let (ip, op, ntaps) = (g.in_plane(), g.out_plane(), g.taps());
    let mult = g.o / g.groups;
    let p = Padded::new(g);
    let offsets = p.tap_offsets(g);
    let runs = runs(g, &p);
    let len = sw * p.phase_len;
    // Every run's reads end inside the buffer, every write inside its plane (`plane`'s
    // contract), checked once here rather than per load.
    let reach = runs.iter().map(|r| r.src).max().unwrap_or(0)
        + offsets.iter().copied().max().unwrap_or(0)
        + LANES;
    assert!(reach <= len, "depthwise runs read past the padded plane");
    assert!(runs.iter().all(|r| r.dst + r.n <= op));
    let strips = Strips::new::<T>(g, &p);
    // Planes in one contiguous group per thread, sharing one padded buffer.
    let planes = out.len() / op.max(1);
    let per = planes.div_ceil(num_threads()).max(1);
    par_chunks(out, op * per, op * per * ntaps, |gi, group| {
        let mut buf = vec![T::ZERO; len];
        // The fused activation runs over finished planes in batches of at least POST_BATCH
        // elements (still in cache): one call per small plane cost more than the activation.
        let mut posted = 0;
        for pi in 0..group.len() / op {
            let dst = &mut group[pi * op..(pi + 1) * op];
            let plane_idx = gi * per + pi;
            let (n, o) = (plane_idx / g.o, plane_idx % g.o);
            let c = o / mult;
            p.fill(
                g,
                &x[(n * g.c + c) * ip..(n * g.c + c + 1) * ip],
                &mut buf,
                &p.rows,
            );
            let b = bias.map_or(T::ZERO, |b| b[o]);
            let ws = &w[o * ntaps..(o + 1) * ntaps];
            match &strips {
                // SAFETY: reads and writes in bounds (asserted above; `dst` is one whole
                // plane); `Strips` exists for f32 alone, on a CPU with AVX2 and FMA.
                Some(st) => unsafe {
                    let f = |v: &[T]| std::slice::from_raw_parts(v.as_ptr().cast::<f32>(), v.len());
                    (st.kernel)(
                        st,
                        f(&buf),
                        f(ws),
                        f(std::slice::from_ref(&b))[0],
                        std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast(), dst.len()),
                    )
                },
                // SAFETY: reads and writes in bounds (asserted above; `dst` is one whole
                // plane).
                None => unsafe { plane_dispatch(&runs, &buf, &offsets, ws, b, dst) },
            }
            let done = (pi + 1) * op;
            if let Some(post) = post {
                if done - posted >= POST_BATCH || done == group.len() {
                    // SAFETY: the runs cover each plane: `plane` wrote every element of
                    // group[..done].
                    let fin = unsafe {
                        &mut *(&mut group[posted..done] as *mut [MaybeUninit<T>] as *mut [T])
                    };
                    post(fin);
                    posted = done;
                }
            }
        }
    });
}

/// Elements of finished output planes per call of the fused activation (16 KB of f32).
const POST_BATCH: usize = 4096;

#[cfg(test)]
mod tests {
    use super::super::kernels::{case_data, lcg, naive};
    use super::*;

    /// Planes smaller than a vector (2 x 2 outputs: mobilenet's last stages on small
    /// images) are not written past their end: the output is followed by sentinels that
    /// must survive, and matches a direct convolution. (The strip kernel once stored whole
    /// vectors there, corrupting the heap after the tensor's last plane.)
    #[test]
    fn small_planes_stay_inside_the_output() {
        let mut rnd = lcg(5);
        for (ins, stride) in [
            ([1, 4, 4], [1, 2, 2]),
            ([1, 2, 2], [1, 1, 1]),
            ([1, 3, 3], [1, 1, 1]),
        ] {
            let (g, x, w, b) = case_data(
                (1, 8, 8, 8, ins, [1, 3, 3], stride, [0, 1, 1], [1, 1, 1]),
                &mut rnd,
            );
            let want = naive(&g, &x, &w, Some(&b));
            let mut got = vec![MaybeUninit::new(f32::NAN); want.len() + 64];
            got[want.len()..].fill(MaybeUninit::new(-7.0));
            depthwise(&g, &x, &w, Some(&b), &mut got[..want.len()], None);
            // SAFETY: every element started initialized.
            let got: Vec<f32> = got.iter().map(|v| unsafe { v.assume_init() }).collect();
            assert!(
                got[want.len()..].iter().all(|&v| v == -7.0),
                "{g:?}: wrote past the output"
            );
            for (i, (a, e)) in got.iter().zip(&want).enumerate() {
                assert!((*a as f64 - e).abs() <= 2e-5, "{g:?}: [{i}] {a} vs {e}");
            }
        }
    }

    /// Strides 1, 2 and 3 with even and odd padding (each of the fill's paths), dilation,
    /// a channel multiplier, rows shorter and longer than a run, 3-D, with and without bias,
    /// against a float64 direct convolution. The 3x3 and 5x5 cases with row stride 1 or 2
    /// take the strip kernel on AVX2 + FMA: planes shorter than a strip, taller ones whose
    /// last strip overlaps, rows shorter than a run (stored whole, spilling onto the next
    /// row), column dilation.
    #[test]
    fn matches_a_direct_convolution() {
        let mut rnd = lcg(11);
        // (n, c, mult, ins, ks, stride, pad, dil)
        type Dw = (
            usize,
            usize,
            usize,
            [usize; 3],
            [usize; 3],
            [usize; 3],
            [usize; 3],
            [usize; 3],
        );
        let cases: &[Dw] = &[
            (
                1,
                5,
                1,
                [1, 13, 13],
                [1, 3, 3],
                [1, 1, 1],
                [0, 1, 1],
                [1, 1, 1],
            ),
            (
                2,
                3,
                1,
                [1, 20, 37],
                [1, 3, 3],
                [1, 2, 2],
                [0, 1, 1],
                [1, 1, 1],
            ),
            (
                1,
                4,
                1,
                [1, 15, 28],
                [1, 5, 5],
                [1, 2, 2],
                [0, 2, 2],
                [1, 1, 1],
            ),
            (
                1,
                2,
                1,
                [1, 9, 8],
                [1, 3, 3],
                [1, 2, 2],
                [0, 0, 0],
                [1, 1, 1],
            ),
            (
                1,
                3,
                2,
                [1, 11, 17],
                [1, 3, 3],
                [1, 3, 3],
                [0, 2, 1],
                [1, 1, 1],
            ),
            (
                1,
                2,
                1,
                [1, 12, 19],
                [1, 3, 3],
                [1, 1, 2],
                [0, 2, 3],
                [1, 2, 2],
            ),
            (
                1,
                2,
                3,
                [4, 6, 7],
                [3, 3, 3],
                [2, 1, 2],
                [1, 1, 1],
                [1, 1, 1],
            ),
            (
                2,
                6,
                1,
                [1, 7, 7],
                [1, 5, 5],
                [1, 1, 1],
                [0, 2, 2],
                [1, 1, 1],
            ),
            (
                1,
                3,
                1,
                [1, 19, 6],
                [1, 3, 3],
                [1, 1, 1],
                [0, 1, 1],
                [1, 1, 1],
            ),
            (
                1,
                2,
                1,
                [1, 40, 21],
                [1, 5, 3],
                [1, 2, 1],
                [0, 2, 1],
                [1, 1, 2],
            ),
            (
                1,
                1,
                1,
                [1, 7, 7],
                [1, 7, 7],
                [1, 1, 1],
                [0, 3, 3],
                [1, 1, 1],
            ),
        ];
        for &(n, c, mult, ins, ks, stride, pad, dil) in cases {
            let (g, x, w, b) = case_data((n, c, c * mult, c, ins, ks, stride, pad, dil), &mut rnd);
            for bias in [None, Some(&b[..])] {
                let want = naive(&g, &x, &w, bias);
                // Plain, and with a post-op (x -> 2x + 1) applied to each finished plane once.
                for post in [false, true] {
                    let mut got = vec![MaybeUninit::new(f32::NAN); want.len()];
                    let affine = |s: &mut [f32]| s.iter_mut().for_each(|v| *v = 2.0 * *v + 1.0);
                    let p = post.then_some(&affine as &(dyn Fn(&mut [f32]) + Sync));
                    depthwise(&g, &x, &w, bias, &mut got, p);
                    // SAFETY: every element started initialized (NaN, which a missed output
                    // would keep and fail on).
                    let got: Vec<f32> = got.iter().map(|v| unsafe { v.assume_init() }).collect();
                    for (i, (a, e)) in got.iter().zip(&want).enumerate() {
                        let e = if post { 2.0 * e + 1.0 } else { *e };
                        assert!(
                            (*a as f64 - e).abs() <= 2e-5,
                            "{g:?} bias {} post {post}: [{i}] {a} vs {e}",
                            bias.is_some()
                        );
                    }
                }
            }
        }
    }
}
