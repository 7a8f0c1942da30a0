//! Depthwise convolution (one input channel per group: mobilenet's 3×3 and 5×5 layers),
//! computed directly. Each input plane is copied once into a zero-padded buffer split into
//! `stride` column phases, so every kernel tap reads contiguous runs even for strided
//! convolutions; output rows are then produced eight at a time in register accumulators
//! over all taps. On x86-64 the kernel is also compiled for AVX2 and picked at run time.

use super::kernels::Geometry;
use crate::ops::matmul::gemm::{par_chunks, Float};

const LANES: usize = 8;

/// The padded, phase-split copy of one input plane.
struct Padded {
    /// Padded extents that the output reads (depth, rows, columns per phase).
    zp: usize,
    yp: usize,
    wq: usize,
    phase_len: usize,
}

impl Padded {
    fn new(g: &Geometry) -> Padded {
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
        Padded {
            zp,
            yp,
            wq,
            phase_len: zp * yp * wq,
        }
    }

    /// Fill `buf` (stride[2] × phase_len) from the input plane `xc`.
    fn fill<T: Float>(&self, g: &Geometry, xc: &[T], buf: &mut [T]) {
        let [id, ih, iw] = g.ins;
        let [pd, ph, pw] = g.pad_lo;
        let sw = g.stride[2];
        let xp = self.wq * sw;
        buf.fill(T::ZERO);
        for z in 0..self.zp {
            let Some(iz) = z.checked_sub(pd).filter(|&v| v < id) else {
                continue;
            };
            for y in 0..self.yp {
                let Some(iy) = y.checked_sub(ph).filter(|&v| v < ih) else {
                    continue;
                };
                let src = &xc[(iz * ih + iy) * iw..(iz * ih + iy + 1) * iw];
                let row = (z * self.yp + y) * self.wq;
                // Padded column c = ix + pw, inside the read extent.
                let last = iw.min(xp.saturating_sub(pw));
                if sw == 1 {
                    buf[row + pw..row + pw + last].copy_from_slice(&src[..last]);
                } else {
                    // Phase f holds padded columns q * sw + f, i.e. inputs q * sw + f - pw.
                    for f in 0..sw {
                        let dst =
                            &mut buf[f * self.phase_len + row..f * self.phase_len + row + self.wq];
                        let q0 = if pw > f { (pw - f).div_ceil(sw) } else { 0 };
                        let mut ix = q0 * sw + f - pw;
                        for d in dst.iter_mut().skip(q0) {
                            if ix >= last {
                                break;
                            }
                            *d = src[ix];
                            ix += sw;
                        }
                    }
                }
            }
        }
    }
}

/// One output plane from its padded input plane; `taps` holds each kernel tap's offset in
/// the buffer (relative to the output position's origin) and its weight.
#[inline(always)]
fn plane<T: Float>(g: &Geometry, p: &Padded, buf: &[T], taps: &[(usize, T)], b: T, dst: &mut [T]) {
    let [od, oh, ow] = g.outs;
    let [sd, sh, _] = g.stride;
    for oz in 0..od {
        for oy in 0..oh {
            let origin = (oz * sd * p.yp + oy * sh) * p.wq;
            let drow = &mut dst[(oz * oh + oy) * ow..(oz * oh + oy + 1) * ow];
            let mut ox = 0;
            while ox < ow {
                let mut acc = [b; LANES];
                for &(off, wv) in taps {
                    let at = origin + off + ox;
                    let s: &[T; LANES] = buf[at..at + LANES].try_into().expect("LANES elements");
                    for j in 0..LANES {
                        acc[j] = acc[j] + wv * s[j];
                    }
                }
                let n = LANES.min(ow - ox);
                drow[ox..ox + n].copy_from_slice(&acc[..n]);
                ox += LANES;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn plane_avx2<T: Float>(
    g: &Geometry,
    p: &Padded,
    buf: &[T],
    taps: &[(usize, T)],
    b: T,
    dst: &mut [T],
) {
    plane(g, p, buf, taps, b, dst)
}

fn plane_dispatch<T: Float>(
    g: &Geometry,
    p: &Padded,
    buf: &[T],
    taps: &[(usize, T)],
    b: T,
    dst: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { plane_avx2(g, p, buf, taps, b, dst) };
    }
    plane(g, p, buf, taps, b, dst)
}

/// Depthwise convolution: `x` [N, C, D, H, W], `w` [O, 1, kd, kh, kw] with O a multiple of
/// C; writes [N, O, OD, OH, OW] into `out`.
pub(super) fn depthwise<T: Float>(
    g: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    out: &mut [T],
) {
    let [_, kh, kw] = g.ks;
    let [dd, dh, dw] = g.dil;
    let sw = g.stride[2];
    let (ip, op, ntaps) = (g.in_plane(), g.out_plane(), g.taps());
    let mult = g.o / g.groups;
    let p = Padded::new(g);
    // Buffer offset of each tap: its phase, its (depth, row) and its column within the phase.
    let offsets: Vec<usize> = (0..ntaps)
        .map(|t| {
            let (kz, ky, kx) = (t / (kh * kw), (t / kw) % kh, t % kw);
            let off = kx * dw;
            (off % sw) * p.phase_len + (kz * dd * p.yp + ky * dh) * p.wq + off / sw
        })
        .collect();
    par_chunks(out, op, op * ntaps, |plane_idx, dst| {
        let (n, o) = (plane_idx / g.o, plane_idx % g.o);
        let c = o / mult;
        let mut buf = vec![T::ZERO; sw * p.phase_len];
        p.fill(g, &x[(n * g.c + c) * ip..(n * g.c + c + 1) * ip], &mut buf);
        let taps: Vec<(usize, T)> = offsets
            .iter()
            .copied()
            .zip(w[o * ntaps..(o + 1) * ntaps].iter().copied())
            .collect();
        let b = bias.map_or(T::ZERO, |b| b[o]);
        plane_dispatch(g, &p, &buf, &taps, b, dst);
    });
}
