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
        let wq = xp.div_ceil(g.stride[2]);
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
                    for (ix, &v) in src[..last].iter().enumerate() {
                        let c = ix + pw;
                        buf[(c % sw) * self.phase_len + row + c / sw] = v;
                    }
                }
            }
        }
    }
}

/// One output plane from its padded input plane.
#[inline(always)]
fn plane<T: Float>(g: &Geometry, p: &Padded, buf: &[T], w: &[T], b: T, dst: &mut [T]) {
    let [kd, kh, kw] = g.ks;
    let [od, oh, ow] = g.outs;
    let [sd, sh, sw] = g.stride;
    let [dd, dh, dw] = g.dil;
    for oz in 0..od {
        for oy in 0..oh {
            let drow = &mut dst[(oz * oh + oy) * ow..(oz * oh + oy + 1) * ow];
            let mut ox = 0;
            while ox + LANES <= ow {
                let mut acc = [b; LANES];
                for kz in 0..kd {
                    for ky in 0..kh {
                        let row = ((oz * sd + kz * dd) * p.yp + oy * sh + ky * dh) * p.wq;
                        for kx in 0..kw {
                            let off = kx * dw;
                            let base = (off % sw) * p.phase_len + row + off / sw + ox;
                            let wv = w[(kz * kh + ky) * kw + kx];
                            let s = &buf[base..base + LANES];
                            for j in 0..LANES {
                                acc[j] = acc[j] + wv * s[j];
                            }
                        }
                    }
                }
                drow[ox..ox + LANES].copy_from_slice(&acc);
                ox += LANES;
            }
            for (o, d) in drow.iter_mut().enumerate().skip(ox) {
                let mut acc = b;
                for kz in 0..kd {
                    for ky in 0..kh {
                        let row = ((oz * sd + kz * dd) * p.yp + oy * sh + ky * dh) * p.wq;
                        for kx in 0..kw {
                            let off = kx * dw;
                            acc = acc
                                + w[(kz * kh + ky) * kw + kx]
                                    * buf[(off % sw) * p.phase_len + row + off / sw + o];
                        }
                    }
                }
                *d = acc;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn plane_avx2<T: Float>(g: &Geometry, p: &Padded, buf: &[T], w: &[T], b: T, dst: &mut [T]) {
    plane(g, p, buf, w, b, dst)
}

fn plane_dispatch<T: Float>(g: &Geometry, p: &Padded, buf: &[T], w: &[T], b: T, dst: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { plane_avx2(g, p, buf, w, b, dst) };
    }
    plane(g, p, buf, w, b, dst)
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
    let (ip, op, taps) = (g.in_plane(), g.out_plane(), g.taps());
    let mult = g.o / g.groups;
    let p = Padded::new(g);
    par_chunks(out, op, op * taps, |plane_idx, dst| {
        let (n, o) = (plane_idx / g.o, plane_idx % g.o);
        let c = o / mult;
        let mut buf = vec![T::ZERO; g.stride[2] * p.phase_len];
        p.fill(g, &x[(n * g.c + c) * ip..(n * g.c + c + 1) * ip], &mut buf);
        let b = bias.map_or(T::ZERO, |b| b[o]);
        plane_dispatch(g, &p, &buf, &w[o * taps..(o + 1) * taps], b, dst);
    });
}
