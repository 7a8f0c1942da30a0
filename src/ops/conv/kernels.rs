//! Convolution kernels over a 3-D geometry (1-D and 2-D convolutions are 3-D ones with
//! leading size-1 dims): im2col + GEMM per (image, group), pointwise (1×1) convolutions as a
//! plain GEMM on the input, a direct kernel for depthwise convolutions (mobilenet), and
//! GEMM + col2im for transposed convolutions. Work is spread over threads on native: across
//! (image, group) tasks when there are enough of them, inside the GEMM and im2col otherwise.

use crate::error::{Error, Result};
use crate::ops::matmul::gemm::{gemm, num_threads, par_chunks, Float, Mat};
use std::sync::Mutex;

/// An elementwise epilogue (a fused activation) applied to parts of a convolution's result
/// as the kernel finishes them.
pub(super) type PlanePost<'a, T> = Option<&'a (dyn Fn(&mut [T]) + Sync)>;

/// Sizes and parameters of one convolution, spatial arrays in (D, H, W) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub n: usize,
    /// Input channels (all groups).
    pub c: usize,
    /// Output channels (all groups).
    pub o: usize,
    pub groups: usize,
    pub ins: [usize; 3],
    pub ks: [usize; 3],
    pub outs: [usize; 3],
    pub stride: [usize; 3],
    pub pad_lo: [usize; 3],
    pub dil: [usize; 3],
}

impl Geometry {
    pub fn in_plane(&self) -> usize {
        self.ins.iter().product()
    }
    pub fn out_plane(&self) -> usize {
        self.outs.iter().product()
    }
    pub fn taps(&self) -> usize {
        self.ks.iter().product()
    }
}

/// `d = 0` for the short runs of padding around rows: 8-wide stores inlined, where
/// `slice::fill` calls memset, whose call costs more than the few elements it writes.
/// Runs shorter than 8 (most often empty: the padding on one side of one tap) are scalar
/// stores, as LLVM otherwise still calls memset for the (empty) 8-wide part.
// Its callers, the packed convolution, are x86-64/wasm32 only (aarch64 macOS checks this).
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "wasm32")),
    allow(dead_code)
)]
#[inline(always)]
pub(super) fn fill_zero<T: Float>(d: &mut [T]) {
    if d.len() < 8 {
        for v in d {
            // Volatile, so that the loop is not turned back into a memset call.
            // SAFETY: `v` is a valid, exclusive reference.
            unsafe { std::ptr::write_volatile(v, T::ZERO) };
        }
        return;
    }
    let mut dc = d.chunks_exact_mut(8);
    for d8 in &mut dc {
        d8.copy_from_slice(&[T::ZERO; 8]);
    }
    for v in dc.into_remainder() {
        // Volatile, so that the loop is not turned back into a memset call.
        // SAFETY: `v` is a valid, exclusive reference.
        unsafe { std::ptr::write_volatile(v, T::ZERO) };
    }
}

/// `d = s` for short runs (rows of a small plane, the runs of a panel): 8-wide copies the
/// compiler inlines as vector moves, where `copy_from_slice` calls memmove, whose call costs
/// more than the few elements it moves.
#[inline(always)]
pub(super) fn copy<T: Copy>(d: &mut [T], s: &[T]) {
    let mut dc = d.chunks_exact_mut(8);
    let mut sc = s.chunks_exact(8);
    for (d8, s8) in (&mut dc).zip(&mut sc) {
        d8.copy_from_slice(s8);
    }
    let (d, s) = (dc.into_remainder(), sc.remainder());
    let n = d.len().min(s.len());
    // SAFETY: both hold at least n (< 8) elements.
    unsafe { copy_short(d.as_mut_ptr(), s.as_ptr(), n) }
}

/// Copy `n < 8` elements in at most three fixed-size moves (a loop of them would be turned
/// into a call of memcpy).
///
/// # Safety
/// `s` and `d` are valid for `n` elements and do not overlap.
#[inline(always)]
pub(super) unsafe fn copy_short<T: Copy>(d: *mut T, s: *const T, n: usize) {
    debug_assert!(n < 8);
    let mut i = 0;
    // SAFETY (each move): i + the move's length <= n, as the caller promised.
    unsafe {
        if n & 4 != 0 {
            std::ptr::copy_nonoverlapping(s, d, 4);
            i = 4;
        }
        if n & 2 != 0 {
            std::ptr::copy_nonoverlapping(s.add(i), d.add(i), 2);
            i += 2;
        }
        if n & 1 != 0 {
            *d.add(i) = *s.add(i);
        }
    }
}

/// The `i` in `0..count` for which `i * s + off - plo` lies in `0..len`, as a range.
pub(super) fn valid_range(
    count: usize,
    s: usize,
    off: usize,
    plo: usize,
    len: usize,
) -> (usize, usize) {
    let lo = if plo > off {
        (plo - off).div_ceil(s)
    } else {
        0
    };
    let hi = if len + plo > off {
        ((len - 1 + plo - off) / s + 1).min(count)
    } else {
        0
    };
    (lo.min(hi), hi)
}

/// `i * s + off - plo` when it lies in `0..len`.
#[inline]
pub(super) fn source(i: usize, s: usize, off: usize, plo: usize, len: usize) -> Option<usize> {
    (i * s + off).checked_sub(plo).filter(|&v| v < len)
}

/// Run `f(index, chunk)` over chunks of `out`, threaded or not.
fn chunks<T: Send>(
    out: &mut [T],
    chunk: usize,
    work: usize,
    threads: bool,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if threads {
        par_chunks(out, chunk, work, f);
    } else if chunk > 0 {
        for (i, c) in out.chunks_mut(chunk).enumerate() {
            f(i, c);
        }
    }
}

/// The most bytes a convolution's column buffer (im2col's, or the transposed convolution's
/// GEMM result) takes: the columns are made and consumed a band of rows at a time, so a
/// large kernel over a large input (a 64×64 kernel over a 1024² image is 45 GB of columns)
/// costs time, never an allocation the process cannot make.
const COL_BYTES: usize = 32 << 20;

/// How many rows of `row_len` values (of `per_row` columns each) fit [`COL_BYTES`]: at least
/// one, at most `rows`.
fn band_rows<T>(per_row: usize, row_len: usize, rows: usize) -> usize {
    let row_bytes = per_row
        .saturating_mul(row_len)
        .saturating_mul(std::mem::size_of::<T>())
        .max(1);
    (COL_BYTES / row_bytes).clamp(1, rows.max(1))
}

/// Unfold one group of one image (`x`: Cg planes) into `col` for the output rows `rows` (of
/// the od·oh rows of ow positions): row (c, kz, ky, kx) of `col` holds the input value under
/// that kernel tap for each of those output positions (zero in the padding).
fn im2col<T: Float>(
    g: &Geometry,
    x: &[T],
    col: &mut [T],
    rows: std::ops::Range<usize>,
    threads: bool,
) {
    let [kd, kh, kw] = g.ks;
    let [_, oh, ow] = g.outs;
    let [id, ih, iw] = g.ins;
    let [sd, sh, sw] = g.stride;
    let [dd, dh, dw] = g.dil;
    let [pd, ph, pw] = g.pad_lo;
    let plane = id * ih * iw;
    let n = rows.len() * ow;
    chunks(col, n, n, threads, |r, dst| {
        let kx = r % kw;
        let ky = (r / kw) % kh;
        let kz = (r / (kw * kh)) % kd;
        let c = r / (kw * kh * kd);
        let xc = &x[c * plane..(c + 1) * plane];
        let (x0, x1) = valid_range(ow, sw, kx * dw, pw, iw);
        for (q, row) in rows.clone().zip(dst.chunks_mut(ow)) {
            let (oz, oy) = (q / oh, q % oh);
            let Some(iz) = source(oz, sd, kz * dd, pd, id) else {
                row.fill(T::ZERO);
                continue;
            };
            let Some(iy) = source(oy, sh, ky * dh, ph, ih) else {
                row.fill(T::ZERO);
                continue;
            };
            let src = &xc[(iz * ih + iy) * iw..(iz * ih + iy + 1) * iw];
            row[..x0].fill(T::ZERO);
            row[x1..].fill(T::ZERO);
            if x0 < x1 {
                let s0 = x0 * sw + kx * dw - pw;
                if sw == 1 {
                    row[x0..x1].copy_from_slice(&src[s0..s0 + (x1 - x0)]);
                } else {
                    for (j, v) in row[x0..x1].iter_mut().enumerate() {
                        *v = src[s0 + j * sw];
                    }
                }
            }
        }
    });
}

fn record(err: &Mutex<Option<Error>>, r: Result<()>) {
    if let Err(e) = r {
        *err.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
    }
}

fn take(err: Mutex<Option<Error>>) -> Result<()> {
    match err.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Forward convolution: `x` [N, C, D, H, W] and `w` [O, C/groups, kd, kh, kw], both
/// contiguous; returns [N, O, OD, OH, OW], with `post` (a fused activation) applied to it:
/// to each plane as it is finished by the depthwise kernel, to the whole result otherwise.
pub(super) fn conv_forward<T: Float>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    post: PlanePost<T>,
) -> Result<Vec<T>> {
    let (cg, og) = (g.c / g.groups, g.o / g.groups);
    let (ip, op, taps) = (g.in_plane(), g.out_plane(), g.taps());
    let len = g.n * g.o * op;
    if cg == 1 && g.groups == g.c {
        // The depthwise kernel writes every output: no zeroing first.
        let mut out = Vec::with_capacity(len);
        super::depthwise::depthwise(g, x, w, bias, &mut out.spare_capacity_mut()[..len], post);
        // SAFETY: `depthwise` wrote all `len` outputs.
        unsafe { out.set_len(len) };
        return Ok(out);
    }
    let mut out = vec![T::ZERO; len];
    if out.is_empty() {
        return Ok(out);
    }
    let kf = cg * taps;
    let pointwise = taps == 1 && g.stride == [1, 1, 1] && g.pad_lo == [0, 0, 0] && g.outs == g.ins;
    let tasks = g.n * g.groups;
    // Enough independent (image, group) products to keep every thread busy: one task per
    // thread, each single-threaded; otherwise one task at a time, threaded inside.
    let across = tasks >= num_threads() && num_threads() > 1;
    let err = Mutex::new(None);
    let task = |t: usize, dst: &mut [T], threads: bool| {
        let (n, gi) = (t / g.groups, t % g.groups);
        let xg = &x[(n * g.c + gi * cg) * ip..(n * g.c + (gi + 1) * cg) * ip];
        let wg = &w[gi * og * kf..(gi + 1) * og * kf];
        let beta = match bias {
            Some(b) => {
                for (o, plane) in dst.chunks_mut(op).enumerate() {
                    plane.fill(b[gi * og + o]);
                }
                T::ONE
            }
            None => T::ZERO,
        };
        let r = if pointwise {
            gemm(
                og,
                op,
                kf,
                Mat::new(wg, 0, kf, 1),
                Mat::new(xg, 0, ip, 1),
                dst,
                0,
                op,
                1,
                T::ONE,
                beta,
                threads,
            )
        } else {
            // A band of output rows at a time (see COL_BYTES).
            let [od, oh, ow] = g.outs;
            let band = band_rows::<T>(kf, ow, od * oh);
            let mut col = vec![T::ZERO; kf * band * ow];
            (0..od * oh).step_by(band).try_for_each(|r0| {
                let rows = r0..(r0 + band).min(od * oh);
                let n = rows.len() * ow;
                im2col(g, xg, &mut col[..kf * n], rows, threads);
                gemm(
                    og,
                    n,
                    kf,
                    Mat::new(wg, 0, kf, 1),
                    Mat::new(&col, 0, n, 1),
                    dst,
                    r0 * ow,
                    op,
                    1,
                    T::ONE,
                    beta,
                    threads,
                )
            })
        };
        record(&err, r);
    };
    if across {
        par_chunks(&mut out, og * op, og * op * kf, |t, dst| {
            task(t, dst, false)
        });
    } else {
        for (t, dst) in out.chunks_mut(og * op).enumerate() {
            task(t, dst, true);
        }
    }
    take(err)?;
    if let Some(post) = post {
        post(&mut out);
    }
    Ok(out)
}

/// Transposed convolution: `x` [N, C, D, H, W], `w` [C, O/groups, kd, kh, kw]; `g.ins` are
/// the input sizes and `g.outs` the (larger) output sizes. Per (image, group): one GEMM
/// `col = w_g^T @ x_g` ([O/groups·taps, D·H·W]), then col2im scatters col into the output.
pub(super) fn conv_transposed<T: Float>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
) -> Result<Vec<T>> {
    let (cg, og) = (g.c / g.groups, g.o / g.groups);
    let (ip, op, taps) = (g.in_plane(), g.out_plane(), g.taps());
    let mut out = vec![T::ZERO; g.n * g.o * op];
    if out.is_empty() {
        return Ok(out);
    }
    let rows = og * taps;
    // A band of input rows (of the id·ih rows of iw positions) at a time (see COL_BYTES).
    let [id, ih, iw] = g.ins;
    let band = band_rows::<T>(rows, iw, id * ih);
    let mut col = vec![T::ZERO; rows * band * iw];
    for t in 0..g.n * g.groups {
        let (n, gi) = (t / g.groups, t % g.groups);
        let xg = &x[(n * g.c + gi * cg) * ip..(n * g.c + (gi + 1) * cg) * ip];
        let wg = &w[gi * cg * rows..(gi + 1) * cg * rows];
        let dst = &mut out[(n * g.o + gi * og) * op..(n * g.o + (gi + 1) * og) * op];
        for (o, plane) in dst.chunks_mut(op).enumerate() {
            plane.fill(bias.map_or(T::ZERO, |b| b[gi * og + o]));
        }
        for r0 in (0..id * ih).step_by(band) {
            let band = r0..(r0 + band).min(id * ih);
            let cols = band.len() * iw;
            let col = &mut col[..rows * cols];
            gemm(
                rows,
                cols,
                cg,
                Mat::new(wg, 0, 1, rows),
                Mat::new(xg, r0 * iw, ip, 1),
                col,
                0,
                cols,
                1,
                T::ONE,
                T::ZERO,
                true,
            )?;
            let col = &*col;
            par_chunks(dst, op, cols * taps, |o, plane| {
                col2im(
                    g,
                    &col[o * taps * cols..(o + 1) * taps * cols],
                    plane,
                    band.clone(),
                );
            });
        }
    }
    Ok(out)
}

/// Scatter-add the `taps` rows of one output channel's columns, for the input rows `band`
/// (of the id·ih rows of iw positions), into its output plane.
fn col2im<T: Float>(g: &Geometry, col: &[T], plane: &mut [T], band: std::ops::Range<usize>) {
    let [kd, kh, kw] = g.ks;
    let [od, oh, ow] = g.outs;
    let [_, ih, iw] = g.ins;
    let [sd, sh, sw] = g.stride;
    let [dd, dh, dw] = g.dil;
    let [pd, ph, pw] = g.pad_lo;
    let n = band.len() * iw;
    for kz in 0..kd {
        for ky in 0..kh {
            for kx in 0..kw {
                let tap = (kz * kh + ky) * kw + kx;
                let row = &col[tap * n..(tap + 1) * n];
                let (x0, x1) = valid_range(iw, sw, kx * dw, pw, ow);
                if x0 >= x1 {
                    continue;
                }
                let o0 = x0 * sw + kx * dw - pw;
                for (i, q) in band.clone().enumerate() {
                    let (iz, iy) = (q / ih, q % ih);
                    let (Some(oz), Some(oy)) = (
                        source(iz, sd, kz * dd, pd, od),
                        source(iy, sh, ky * dh, ph, oh),
                    ) else {
                        continue;
                    };
                    let src = &row[i * iw + x0..i * iw + x1];
                    let dst = &mut plane[(oz * oh + oy) * ow..(oz * oh + oy + 1) * ow];
                    for (j, &v) in src.iter().enumerate() {
                        let d = &mut dst[o0 + j * sw];
                        *d = *d + v;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
/// Direct convolution in f64 (the reference of the kernels' tests).
pub(super) fn naive(g: &Geometry, x: &[f32], w: &[f32], b: Option<&[f32]>) -> Vec<f64> {
    let (cg, og) = (g.c / g.groups, g.o / g.groups);
    let [od, oh, ow] = g.outs;
    let [id, ih, iw] = g.ins;
    let [kd, kh, kw] = g.ks;
    let mut out = vec![0.0; g.n * g.o * od * oh * ow];
    for n in 0..g.n {
        for o in 0..g.o {
            let gi = o / og;
            for (p, v) in out[(n * g.o + o) * od * oh * ow..][..od * oh * ow]
                .iter_mut()
                .enumerate()
            {
                let (oz, oy, ox) = (p / (oh * ow), (p / ow) % oh, p % ow);
                let mut s = b.map_or(0.0, |b| b[o] as f64);
                for c in 0..cg {
                    for kz in 0..kd {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let (Some(iz), Some(iy), Some(ix)) = (
                                    source(oz, g.stride[0], kz * g.dil[0], g.pad_lo[0], id),
                                    source(oy, g.stride[1], ky * g.dil[1], g.pad_lo[1], ih),
                                    source(ox, g.stride[2], kx * g.dil[2], g.pad_lo[2], iw),
                                ) else {
                                    continue;
                                };
                                let xi = (((n * g.c + gi * cg + c) * id + iz) * ih + iy) * iw + ix;
                                let wi = (((o * cg + c) * kd + kz) * kh + ky) * kw + kx;
                                s += x[xi] as f64 * w[wi] as f64;
                            }
                        }
                    }
                }
                *v = s;
            }
        }
    }
    out
}

/// A kernel test's case: (n, c, o, groups, ins, ks, stride, pad, dil).
#[cfg(test)]
pub(super) type Case = (
    usize,
    usize,
    usize,
    usize,
    [usize; 3],
    [usize; 3],
    [usize; 3],
    [usize; 3],
    [usize; 3],
);

/// A seeded generator of values in [-0.5, 0.5) for the kernels' tests.
#[cfg(test)]
pub(super) fn lcg(mut seed: u32) -> impl FnMut() -> f32 {
    move || {
        seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
        (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
    }
}

/// A case's geometry, input, weight and bias (drawn from `rnd` in that order).
#[cfg(test)]
pub(super) fn case_data(
    case: Case,
    rnd: &mut impl FnMut() -> f32,
) -> (Geometry, Vec<f32>, Vec<f32>, Vec<f32>) {
    let (n, c, o, groups, ins, ks, stride, pad, dil) = case;
    let outs: [usize; 3] =
        std::array::from_fn(|i| (ins[i] + 2 * pad[i] - dil[i] * (ks[i] - 1) - 1) / stride[i] + 1);
    let g = Geometry {
        n,
        c,
        o,
        groups,
        ins,
        ks,
        outs,
        stride,
        pad_lo: pad,
        dil,
    };
    let x: Vec<f32> = (0..n * c * g.in_plane()).map(|_| rnd()).collect();
    let w: Vec<f32> = (0..o * c / groups * g.taps()).map(|_| rnd()).collect();
    let b: Vec<f32> = (0..o).map(|_| rnd()).collect();
    (g, x, w, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_range_matches_brute_force() {
        for count in 0..6 {
            for s in 1..4 {
                for off in 0..5 {
                    for plo in 0..4 {
                        for len in 1..6 {
                            let want: Vec<usize> = (0..count)
                                .filter(|&i| source(i, s, off, plo, len).is_some())
                                .collect();
                            let (a, b) = valid_range(count, s, off, plo, len);
                            assert_eq!(
                                (a..b).collect::<Vec<_>>(),
                                want,
                                "count {count} s {s} off {off} plo {plo} len {len}"
                            );
                        }
                    }
                }
            }
        }
    }
}
