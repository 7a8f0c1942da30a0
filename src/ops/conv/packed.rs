//! Convolutions on pt2web's packed GEMM (x86-64 with AVX-512 or AVX2+FMA, WebAssembly with
//! simd128): the weights packed once into the
//! GEMM's A panels (per group; kept by the session, see [`crate::plan::Prepared`]) and the
//! input unfolded straight into B panels as the GEMM packs them (implicit GEMM: no im2col
//! buffer, no zeroing pass, no second copy). Pointwise convolutions read the input as B.

#![cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]

use super::kernels::{copy, fill_zero, valid_range, Geometry};
use crate::ops::elementwise::epilogue::{Bias, TileAct};
use crate::ops::matmul::gemm::{gemm_threads, num_threads, par_chunks, FAST_GEMM_WORK};
use crate::ops::matmul::sgemm::{self, Isa, Lines, Packed, Panels, Post, Strided};
use std::mem::MaybeUninit;

/// A convolution's weights as A panels, one matrix per group: rows are the group's output
/// channels, steps its (c, kz, ky, kx) taps.
/// With `direct`, they are B panels of output channels for [`super::direct`] instead.
pub(crate) struct PackedWeights {
    groups: Vec<Packed>,
    #[cfg(target_arch = "x86_64")]
    direct: bool,
    isa: Isa,
}

/// Whether convolutions run on the direct kernel ([`super::direct`]): by default all but
/// the pointwise ones (measured faster than the GEMM on resnet's 3x3 layers, on AVX2 and on
/// AVX-512, for the same values); `PT2WEB_CPU_CONV=gemm` keeps every convolution on the
/// GEMM. x86-64 only.
#[cfg(target_arch = "x86_64")]
fn direct() -> bool {
    static CHOICE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CHOICE.get_or_init(|| std::env::var("PT2WEB_CPU_CONV").unwrap_or_default()) != "gemm"
}

/// Whether convolutions of this geometry run here (depthwise ones have their own kernel;
/// tiny products stay on the portable GEMM; on x86-64 a single output position, as in a
/// squeeze-excite block's 1x1 convolutions, is a matrix-vector product that streams the
/// weights as they lie, see `gemv`).
pub(super) fn applies(g: &Geometry) -> bool {
    let (cg, og) = (g.c / g.groups, g.o / g.groups);
    #[cfg(target_arch = "x86_64")]
    if g.out_plane() == 1 && crate::ops::matmul::gemv::available() {
        return false;
    }
    sgemm::available()
        && !(cg == 1 && g.groups == g.c)
        && og
            .saturating_mul(g.out_plane())
            .saturating_mul(cg * g.taps())
            >= FAST_GEMM_WORK
}

/// Pack `w` ([O, C/groups, kd, kh, kw], contiguous) for [`forward`] on `isa`; also returns
/// the bytes held.
pub(super) fn pack_weights(isa: Isa, g: &Geometry, w: &[f32]) -> (PackedWeights, usize) {
    // Pointwise convolutions read their input as B rows (copies of whole rows, no
    // unfolding) and store C's rows without a transpose: the GEMM suits them better.
    #[cfg(target_arch = "x86_64")]
    let direct = direct() && !pointwise(g);
    #[cfg(not(target_arch = "x86_64"))]
    let direct = false;
    pack_weights_for(isa, direct, g, w)
}

/// Whether the convolution is a product with the input as it lies (1x1, stride 1, no
/// padding).
fn pointwise(g: &Geometry) -> bool {
    g.taps() == 1 && g.stride == [1, 1, 1] && g.pad_lo == [0, 0, 0] && g.outs == g.ins
}

fn pack_weights_for(isa: Isa, direct: bool, g: &Geometry, w: &[f32]) -> (PackedWeights, usize) {
    // The direct kernel is x86-64's.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = direct;
    #[cfg(target_arch = "x86_64")]
    if direct {
        let groups = super::direct::pack_weights(isa, g, w);
        let bytes = groups.iter().map(|p| p.bytes()).sum();
        return (
            PackedWeights {
                groups,
                direct,
                isa,
            },
            bytes,
        );
    }
    let (og, kf) = (g.o / g.groups, g.c / g.groups * g.taps());
    assert!(w.len() >= g.o * kf, "weight smaller than its geometry");
    let per_group = (0..g.groups)
        .map(|gi| {
            let a = Lines::rows(Strided {
                p: w[gi * og * kf..].as_ptr(),
                rs: kf,
                cs: 1,
            });
            // SAFETY: rows gi*og..(gi+1)*og of kf steps lie inside `w` (asserted above).
            unsafe { Packed::a(isa, &a, og, kf) }
        })
        .collect::<Vec<_>>();
    let bytes = per_group.iter().map(|p| p.bytes()).sum();
    (
        PackedWeights {
            groups: per_group,
            #[cfg(target_arch = "x86_64")]
            direct,
            isa,
        },
        bytes,
    )
}

/// One step (kernel tap) of an unfolded input, see [`Unfold`].
struct Tap {
    /// Where the tap's channel and column phase start in [`Unfold::x`].
    plane: usize,
    dz: usize,
    dy: usize,
    /// The output columns whose input column lies inside the input: `x0..x1`.
    x0: usize,
    x1: usize,
    /// Output column `ox` reads source column `ox + shift` of its phase.
    shift: isize,
}

/// The widest B panel of any instruction set.
const MAX_W: usize = 64;

/// One (image, group) input unfolded on the fly: B's column j is output position j, its
/// step r the tap (c, kz, ky, kx) = r in row-major order, its value the input under that tap
/// (zero in the padding).
///
/// With a column stride `sw` > 1 the input is first split into `sw` column phases
/// ([`split_phases`]): input column `ix` goes to phase `ix % sw`, column `ix / sw`. Output
/// column `ox` of tap `kx` reads input column `ox * sw + kx * dw - pw`, which is column
/// `ox + shift` of one phase, so every tap reads contiguous runs as in a stride-1
/// convolution.
struct Unfold<'a> {
    g: &'a Geometry,
    /// The group's Cg input planes of one image, phase-split when `sw` > 1.
    x: &'a [f32],
}

/// The input planes `x` (`planes` planes of `rows` rows of `iw` columns) split into `sw`
/// column phases: plane c's phase f holds the columns f, f + sw, f + 2 sw, ... of each row,
/// rows `iw.div_ceil(sw)` long (zero past the end), at `(c * sw + f) * rows * iwq`.
fn split_phases(x: &[f32], planes: usize, rows: usize, iw: usize, sw: usize) -> Vec<f32> {
    let iwq = iw.div_ceil(sw);
    let len = planes * sw * rows * iwq;
    if rows * iw == 0 {
        // An empty input (only padding is read): nothing to split.
        return vec![0.0f32; len];
    }
    assert!(
        x.len() >= planes * rows * iw,
        "input smaller than its planes"
    );
    // Every element is written below (the zeros past a row's end too): no zeroing first.
    let mut out = Vec::with_capacity(len);
    let dst = &mut out.spare_capacity_mut()[..len];
    for (c, src_plane) in x.chunks_exact(rows * iw).take(planes).enumerate() {
        for (r, src) in src_plane.chunks_exact(iw).enumerate() {
            if sw == 2 {
                // Both phases in one pass over the row (vector shuffles).
                let (at0, at1) = ((2 * c * rows + r) * iwq, ((2 * c + 1) * rows + r) * iwq);
                let (lo, hi) = dst.split_at_mut(at1);
                let (d0, d1) = (&mut lo[at0..at0 + iwq], &mut hi[..iwq]);
                for ((a, b), p) in d0.iter_mut().zip(d1.iter_mut()).zip(src.chunks_exact(2)) {
                    a.write(p[0]);
                    b.write(p[1]);
                }
                if iw % 2 == 1 {
                    d0[iw / 2].write(src[iw - 1]);
                    d1[iw / 2].write(0.0);
                }
                continue;
            }
            for f in 0..sw {
                let d = &mut dst[((c * sw + f) * rows + r) * iwq..][..iwq];
                let mut n = 0;
                for (d, &v) in d.iter_mut().zip(src[f.min(iw)..].iter().step_by(sw)) {
                    d.write(v);
                    n += 1;
                }
                for d in &mut d[n..] {
                    d.write(0.0);
                }
            }
        }
    }
    // SAFETY: `x` holds `planes` planes (asserted), and each of their rows wrote its `sw`
    // phase rows of `iwq` elements whole: every element is written.
    unsafe { out.set_len(len) };
    out
}

impl Unfold<'_> {
    /// Source row length: the input's, or a phase's.
    fn pitch(&self) -> usize {
        self.g.ins[2].div_ceil(self.g.stride[2])
    }
}

impl Panels for Unfold<'_> {
    unsafe fn panels(
        &self,
        w: usize,
        l0: usize,
        len: usize,
        k0: usize,
        kc: usize,
        buf: &mut [f32],
    ) -> *const f32 {
        assert!(w <= MAX_W, "panel of {w} columns");
        let g = self.g;
        let [kd, kh, kw] = g.ks;
        let [_, oh, ow] = g.outs;
        let [id, ih, iw] = g.ins;
        let [sd, sh, sw] = g.stride;
        let [dd, dh, dw] = g.dil;
        let [pd, ph, pw] = g.pad_lo;
        let pitch = self.pitch();
        let phase = id * ih * pitch;
        // Per step of the block: its tap's channel and phase offset, z and y offsets, and
        // the output columns whose x lands inside the input with their shift.
        let taps: Vec<Tap> = (k0..k0 + kc)
            .map(|r| {
                let kx = r % kw;
                let ky = (r / kw) % kh;
                let kz = (r / (kw * kh)) % kd;
                let (x0, x1) = valid_range(ow, sw, kx * dw, pw, iw);
                // Input column ox * sw + t, t = kx * dw - pw: phase t mod sw, column
                // ox + floor(t / sw).
                let t = (kx * dw) as isize - pw as isize;
                let f = t.rem_euclid(sw as isize) as usize;
                Tap {
                    plane: (r / (kw * kh * kd) * sw + f) * phase,
                    dz: kz * dd,
                    dy: ky * dh,
                    x0,
                    x1,
                    shift: t.div_euclid(sw as isize),
                }
            })
            .collect();
        let mut p0 = 0;
        while p0 < len {
            let lines = w.min(len - p0);
            let panel = &mut buf[p0 * kc..(p0 + w) * kc];
            // The panel's output positions, cut at output rows: (column in the panel, oz * sd,
            // oy * sh, first ox, count).
            let mut segs = [(0usize, 0usize, 0usize, 0usize, 0usize); MAX_W];
            let mut ns = 0;
            let mut j = 0;
            while j < lines {
                let pos = l0 + p0 + j;
                let ox = pos % ow;
                let row = pos / ow;
                let n = (ow - ox).min(lines - j);
                segs[ns] = (j, row / oh * sd, row % oh * sh, ox, n);
                ns += 1;
                j += n;
            }
            for (dst, t) in panel.chunks_exact_mut(w).zip(&taps) {
                fill_zero(&mut dst[lines..]);
                for &(col, z, y, ox0, n) in &segs[..ns] {
                    let d = &mut dst[col..col + n];
                    let iz = (z + t.dz).wrapping_sub(pd);
                    let iy = (y + t.dy).wrapping_sub(ph);
                    if iz >= id || iy >= ih {
                        fill_zero(d);
                        continue;
                    }
                    let lo = t.x0.clamp(ox0, ox0 + n);
                    let hi = t.x1.clamp(lo, ox0 + n);
                    fill_zero(&mut d[..lo - ox0]);
                    fill_zero(&mut d[hi - ox0..]);
                    if lo < hi {
                        let src = &self.x[t.plane + (iz * ih + iy) * pitch..][..pitch];
                        // `lo >= x0`: the column is inside the input, so the sum is >= 0.
                        let s0 = (lo as isize + t.shift) as usize;
                        let d = &mut d[lo - ox0..hi - ox0];
                        copy(d, &src[s0..s0 + d.len()]);
                    }
                }
            }
            p0 += w;
        }
        buf.as_ptr()
    }
}

/// Forward convolution of `x` ([N, C, D, H, W], contiguous) with packed weights: returns
/// [N, O, OD, OH, OW]. Threads as the portable kernel: across (image, group) products when
/// there are enough of them, inside the GEMM otherwise.
///
/// The bias and `act` (a fused activation) are added to and applied to each tile of the
/// result as the GEMM or the direct kernel finishes it.
pub(super) fn forward(
    g: &Geometry,
    x: &[f32],
    w: &PackedWeights,
    bias: Option<&[f32]>,
    act: Option<TileAct>,
) -> Vec<f32> {
    let (cg, og) = (g.c / g.groups, g.o / g.groups);
    let (ip, op, kf) = (g.in_plane(), g.out_plane(), cg * g.taps());
    let len = g.n * g.o * op;
    // Every output is written by the GEMM (beta 0: C is not read) or the direct kernel, so
    // the result starts uninitialized rather than zeroed.
    let mut out = Vec::<f32>::with_capacity(len);
    if len == 0 {
        return out;
    }
    assert!(x.len() >= g.n * g.c * ip, "input smaller than its geometry");
    let pointwise = pointwise(g);
    let isa = w.isa;
    let tasks = g.n * g.groups;
    let across = tasks >= num_threads() && num_threads() > 1;
    let task = |t: usize, dst: &mut [MaybeUninit<f32>], threads: bool| {
        let (n, gi) = (t / g.groups, t % g.groups);
        let xg = &x[(n * g.c + gi * cg) * ip..(n * g.c + (gi + 1) * cg) * ip];
        #[cfg(target_arch = "x86_64")]
        if w.direct {
            let threads = gemm_threads(og, op, kf, threads);
            let b = bias.map(|b| &b[gi * og..(gi + 1) * og]);
            super::direct::forward_group(g, xg, &w.groups[gi], b, act, dst, threads);
            return;
        }
        let bias = bias.map(|b| &b[gi * og..(gi + 1) * og]);
        let tile = |p: *mut f32, rs: usize, [i, _]: [usize; 2], size: [usize; 2]| {
            // SAFETY: the GEMM hands each finished tile of its output (rows i.. of this
            // group's og) to this once.
            unsafe {
                TileAct::bias_then(
                    act,
                    bias.map_or(Bias::None, |b| Bias::Rows(&b[i..])),
                    p,
                    rs,
                    size,
                )
            }
        };
        let post: Post = (bias.is_some() || act.is_some()).then_some(&tile);
        let beta = 0.0;
        let threads = gemm_threads(og, op, kf, threads);
        let c = dst.as_mut_ptr().cast::<f32>();
        let a = &w.groups[gi];
        // SAFETY: A is the group's packed og x kf weights; B reads the group's input planes
        // (`xg`, kf = cg * taps steps of op positions, every tap inside the planes or in the
        // padding); C is `dst`, og x op, borrowed mutably; `isa` was detected (`applies`).
        unsafe {
            if pointwise {
                let b = Lines::cols(Strided {
                    p: xg.as_ptr(),
                    rs: ip,
                    cs: 1,
                });
                sgemm::sgemm_panels(isa, og, op, kf, a, &b, c, op, 1.0, beta, threads, post);
            } else if g.stride[2] > 1 {
                let [id, ih, iw] = g.ins;
                let xs = split_phases(xg, cg, id * ih, iw, g.stride[2]);
                let b = Unfold { g, x: &xs };
                sgemm::sgemm_panels(isa, og, op, kf, a, &b, c, op, 1.0, beta, threads, post);
            } else {
                let b = Unfold { g, x: xg };
                sgemm::sgemm_panels(isa, og, op, kf, a, &b, c, op, 1.0, beta, threads, post);
            }
        }
    };
    let dst = &mut out.spare_capacity_mut()[..len];
    if across {
        par_chunks(dst, og * op, og * op * kf, |t, dst| task(t, dst, false));
    } else {
        for (t, dst) in dst.chunks_mut(og * op).enumerate() {
            task(t, dst, true);
        }
    }
    // SAFETY: the tasks wrote all `len` outputs (see above).
    unsafe { out.set_len(len) };
    out
}

#[cfg(test)]
mod tests {
    use super::super::kernels::{case_data, lcg, naive, Case};
    use super::*;

    /// Padding on every side, strides, dilation, groups, 3-D, pointwise, output rows shorter
    /// and longer than a panel, K past one block, one image and several (both thread
    /// splits), with and without bias, against a float64 direct convolution, on every
    /// instruction set this CPU has.
    #[test]
    fn matches_a_direct_convolution() {
        let isas: Vec<Isa> = Isa::ALL.iter().copied().filter(|i| i.supported()).collect();
        let mut rnd = lcg(7);
        let cases: &[Case] = &[
            (
                1,
                3,
                16,
                1,
                [1, 23, 45],
                [1, 7, 7],
                [1, 2, 2],
                [0, 3, 3],
                [1, 1, 1],
            ),
            (
                2,
                16,
                24,
                1,
                [1, 14, 14],
                [1, 3, 3],
                [1, 1, 1],
                [0, 1, 1],
                [1, 1, 1],
            ),
            (
                3,
                8,
                12,
                2,
                [1, 9, 70],
                [1, 3, 3],
                [1, 1, 2],
                [0, 2, 1],
                [1, 2, 1],
            ),
            (
                1,
                48,
                40,
                1,
                [1, 7, 7],
                [1, 3, 3],
                [1, 1, 1],
                [0, 1, 1],
                [1, 1, 1],
            ),
            (
                2,
                32,
                20,
                1,
                [1, 10, 10],
                [1, 1, 1],
                [1, 1, 1],
                [0, 0, 0],
                [1, 1, 1],
            ),
            (
                1,
                32,
                20,
                1,
                [1, 10, 10],
                [1, 1, 1],
                [1, 2, 2],
                [0, 0, 0],
                [1, 1, 1],
            ),
            (
                1,
                4,
                8,
                1,
                [5, 6, 7],
                [3, 3, 3],
                [2, 1, 1],
                [1, 1, 1],
                [1, 1, 1],
            ),
            (
                1,
                50,
                16,
                1,
                [1, 12, 12],
                [1, 3, 3],
                [1, 1, 1],
                [0, 1, 1],
                [1, 1, 1],
            ),
        ];
        for &case in cases {
            let (g, x, w, b) = case_data(case, &mut rnd);
            for (isa, bias) in isas.iter().flat_map(|&i| [(i, None), (i, Some(&b[..]))]) {
                let want = naive(&g, &x, &w, bias);
                let mut results = vec![];
                for direct in [false, true] {
                    let (pw, _) = pack_weights_for(isa, direct, &g, &w);
                    let got = forward(&g, &x, &pw, bias, None);
                    assert_eq!(got.len(), want.len());
                    let tol = 1e-5 * ((g.c / g.groups * g.taps()) as f64).sqrt() * 4.0;
                    for (i, (a, e)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (*a as f64 - e).abs() <= tol,
                            "{isa:?} direct {direct} {g:?} bias {}: [{i}] {a} vs {e}",
                            bias.is_some()
                        );
                    }
                    results.push(got);
                }
                // A fused activation on the GEMM and on the direct kernel: hardswish of
                // each value.
                for direct in [false, true] {
                    let (pw, _) = pack_weights_for(isa, direct, &g, &w);
                    let got = forward(&g, &x, &pw, bias, Some(TileAct::Hardswish));
                    let hs = |v: f64| v * (v + 3.0).clamp(0.0, 6.0) / 6.0;
                    let tol = 1e-5 * ((g.c / g.groups * g.taps()) as f64).sqrt() * 4.0;
                    for (i, (a, e)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (*a as f64 - hs(*e)).abs() <= tol,
                            "{isa:?} direct {direct} hardswish {g:?} bias {}: [{i}] {a} vs {}",
                            bias.is_some(),
                            hs(*e)
                        );
                    }
                }
                // The direct kernel sums in the GEMM's order: the same values.
                #[cfg(target_arch = "x86_64")]
                assert!(
                    results[0] == results[1],
                    "{isa:?} {g:?} bias {}: the direct and GEMM paths differ",
                    bias.is_some()
                );
            }
        }
    }
}
