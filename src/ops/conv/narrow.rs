//! Convolutions with few input channels and taps: an image network's first layer (RGB, 3x3:
//! K = channels x taps = 27; resnet's 7x7: 147), computed directly on x86-64 with AVX2 and FMA.
//!
//! The packed GEMM spends about as long unfolding such an input as multiplying it: each
//! unfolded value feeds only O multiply-adds, and a K of 27 is too short to pay for a tile's
//! loads and stores. Here the output rows go in bands (a few rows each, several bands per
//! thread). A band's input rows are copied into the depthwise kernel's zero-padded,
//! column-phase-split buffer ([`Padded`]), one per input channel, and each run of eight
//! outputs along a row is computed for eight output channels at once: per tap, one load of
//! the input against eight broadcast weights into eight accumulators. Each output is its bias
//! plus the taps' products in (channel, tap) order, each a fused multiply-add.

#![cfg(target_arch = "x86_64")]

use std::mem::MaybeUninit;

use super::depthwise::{runs, Padded, LANES};
use super::kernels::{copy_short, Geometry, PlanePost};
use crate::ops::matmul::gemm::{fork_each, num_threads};

/// Output channels per block (one accumulator each).
const CO: usize = 8;
/// The largest channels x taps computed here.
const MAX_K: usize = 160;
/// A band's padded input, in f32 (48 KB: it stays in the core's cache while its runs read it).
const BAND_FLOATS: usize = 12 * 1024;

/// Whether [`narrow`] takes this convolution: one group, at least two taps, few channels x
/// taps, 1-D or 2-D, on a CPU with AVX2 and FMA.
pub(super) fn applies(g: &Geometry) -> bool {
    g.groups == 1
        && g.taps() > 1
        && g.c * g.taps() <= MAX_K
        && g.ks[0] == 1
        && g.ins[0] == 1
        && g.outs[0] == 1
        && g.out_plane() >= LANES
        && std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
}

/// An output pointer for threads that write disjoint elements.
#[derive(Clone, Copy)]
struct Out(*mut MaybeUninit<f32>);
// SAFETY: the threads write disjoint output rows.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// The weights in [`narrow`]'s layout: per block of CO output channels, [block][k][CO]
/// (zeros past O). Made once per session for frozen weights ([`crate::ops::OpCtx::prepared`]).
pub(super) struct NarrowWeights(Vec<f32>);

/// Block `w` [O, C, kh, kw] for [`narrow`]; also returns the bytes it holds.
pub(super) fn pack_weights(g: &Geometry, w: &[f32]) -> (NarrowWeights, usize) {
    let k = g.c * g.taps();
    assert_eq!(w.len(), g.o * k, "narrow convolution: weight size");
    let mut wp = vec![0.0f32; g.o.div_ceil(CO) * k * CO];
    for o in 0..g.o {
        for kk in 0..k {
            wp[(o / CO * k + kk) * CO + o % CO] = w[o * k + kk];
        }
    }
    let bytes = wp.len() * 4;
    (NarrowWeights(wp), bytes)
}

/// The convolution of `x` [N, C, H, W] (1-D: H = 1) with the weights `w` ([`pack_weights`]
/// of [O, C, kh, kw]) into `out` [N, O, OH, OW] (every element written: it may start
/// uninitialized), then `post` (a fused activation) over each band's rows. [`applies`] must
/// hold.
pub(super) fn narrow(
    g: &Geometry,
    x: &[f32],
    w: &NarrowWeights,
    bias: Option<&[f32]>,
    out: &mut [MaybeUninit<f32>],
    post: PlanePost<f32>,
) {
    assert!(applies(g), "narrow convolution: geometry not supported");
    let k = g.c * g.taps();
    let (ip, op) = (g.in_plane(), g.out_plane());
    assert_eq!(x.len(), g.n * g.c * ip, "narrow convolution: input size");
    let blocks = g.o.div_ceil(CO);
    let wp = &w.0;
    assert_eq!(wp.len(), blocks * k * CO, "narrow convolution: weight size");
    assert_eq!(out.len(), g.n * g.o * op, "narrow convolution: output size");
    let bp: Vec<f32> = (0..blocks * CO)
        .map(|o| bias.filter(|_| o < g.o).map_or(0.0, |b| b[o]))
        .collect();
    let oh = g.outs[1];
    // Output rows per band: its padded input near BAND_FLOATS (at least one row).
    let per_row = g.c * g.stride[2] * (g.stride[1] * (g.ins[2] + 2 * g.pad_lo[2] + g.ks[2]));
    let band = (BAND_FLOATS / per_row.max(1)).clamp(1, oh);
    let bands = oh.div_ceil(band);
    let work = op * g.o * k;
    let threads = num_threads().min(bands).min(work / 200_000 + 1).max(1);
    let optr = Out(out.as_mut_ptr());
    for n in 0..g.n {
        let xn = &x[n * g.c * ip..(n + 1) * g.c * ip];
        let per = bands.div_ceil(threads);
        fork_each(0..threads, |t, _| {
            let mut buf: Vec<f32> = Vec::new();
            let mut layout = None;
            for b in t * per..((t + 1) * per).min(bands) {
                let (r0, r1) = (b * band, ((b + 1) * band).min(oh));
                // SAFETY: band b writes rows r0..r1 of every output plane of image n, which no
                // other band writes; `out` holds N x O planes of `op` elements.
                unsafe {
                    band_rows(
                        g,
                        xn,
                        wp,
                        &bp,
                        k,
                        r0,
                        r1,
                        &mut buf,
                        &mut layout,
                        optr,
                        n,
                        post,
                    )
                };
            }
        });
    }
}

/// Output rows `r0..r1` of image `n`: the band as a convolution of its own (the input rows
/// it reads, with the padding that falls inside it).
///
/// # Safety
/// No other thread writes rows `r0..r1` of image `n`'s planes while this runs.
#[allow(clippy::too_many_arguments)]
unsafe fn band_rows(
    g: &Geometry,
    xn: &[f32],
    wp: &[f32],
    bp: &[f32],
    k: usize,
    r0: usize,
    r1: usize,
    buf: &mut Vec<f32>,
    layout: &mut Option<(usize, usize, usize, usize)>,
    optr: Out,
    n: usize,
    post: PlanePost<f32>,
) {
    let [_, ih, iw] = g.ins;
    let [_, sh, _] = g.stride;
    let [_, ph, _] = g.pad_lo;
    let (kh, dh) = (g.ks[1], g.dil[1]);
    // Input rows the band reads, in padded coordinates, then clipped to the input.
    let lo = (r0 * sh) as isize - ph as isize;
    let hi = ((r1 - 1) * sh + (kh - 1) * dh + 1) as isize - ph as isize;
    let (a, z) = (lo.max(0) as usize, (hi.max(0) as usize).min(ih));
    let gb = Geometry {
        n: 1,
        ins: [1, z.saturating_sub(a), iw],
        outs: [1, r1 - r0, g.outs[2]],
        pad_lo: [0, (a as isize - lo) as usize, g.pad_lo[2]],
        ..g.clone()
    };
    let p = Padded::new(&gb);
    let plen = g.stride[2] * p.phase_len;
    let offs: Vec<usize> = {
        let t = p.tap_offsets(&gb);
        (0..g.c)
            .flat_map(|ci| t.iter().map(move |&o| ci * plen + o))
            .collect()
    };
    let runs = runs(&gb, &p);
    let len = g.c * plen;
    let reach = runs.iter().map(|r| r.src).max().unwrap_or(0)
        + offs.iter().copied().max().unwrap_or(0)
        + LANES;
    assert!(
        reach <= len,
        "narrow convolution reads past its padded band"
    );
    let bop = gb.out_plane();
    assert!(runs.iter().all(|r| r.dst + r.n <= bop));
    // The padding must be zero: the buffer is zeroed when the band's layout differs from the
    // last one (the first and last bands); between bands of one layout the fill rewrites the
    // same cells.
    let this = (len, p.phase_len, gb.ins[1], gb.pad_lo[1]);
    if *layout != Some(this) {
        buf.clear();
        buf.resize(len, 0.0);
        *layout = Some(this);
    }
    for ci in 0..g.c {
        let xc = &xn[(ci * ih + a) * iw..(ci * ih + z) * iw];
        p.fill(&gb, xc, &mut buf[ci * plen..(ci + 1) * plen], &p.rows);
    }
    let op = g.out_plane();
    let first = r0 * g.outs[2];
    for blk in 0..bp.len() / CO {
        let w = &wp[blk * k * CO..(blk + 1) * k * CO];
        let bias: &[f32; CO] = bp[blk * CO..(blk + 1) * CO].try_into().expect("CO biases");
        let live = (g.o - blk * CO).min(CO);
        // Plane of the block's first channel in image n, at the band's first row.
        let base = optr.0.wrapping_add((n * g.o + blk * CO) * op + first);
        // SAFETY: the CPU has AVX2 and FMA (`applies`); reads in bounds (asserted above);
        // writes inside rows r0..r1 of the block's live planes, this band's alone.
        unsafe { block_fma(&runs, buf, &offs, w, bias, base, op, live) };
        if let Some(post) = post {
            for c in 0..live {
                // SAFETY: the runs covered the band's rows of this plane (written above).
                let rows =
                    unsafe { std::slice::from_raw_parts_mut(base.add(c * op).cast::<f32>(), bop) };
                post(rows);
            }
        }
    }
}

/// Every run for one block of output channels: `live` planes `op` apart from `base`.
///
/// # Safety
/// AVX2 and FMA are available; every `run.src + off + LANES` is inside `buf`; `base` +
/// `c * op + run.dst + run.n` is writable for c < live.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn block_fma(
    runs: &[super::depthwise::Run],
    buf: &[f32],
    offs: &[usize],
    w: &[f32],
    bias: &[f32; CO],
    base: *mut MaybeUninit<f32>,
    op: usize,
    live: usize,
) {
    let wk: &[[f32; CO]] = {
        // SAFETY: `w` holds k x CO floats ([k][CO]), f32 arrays have f32 alignment.
        unsafe { std::slice::from_raw_parts(w.as_ptr().cast(), w.len() / CO) }
    };
    for r in runs {
        let mut acc = [[0.0f32; LANES]; CO];
        for (a, &b) in acc.iter_mut().zip(bias) {
            *a = [b; LANES];
        }
        for (&off, wv) in offs.iter().zip(wk) {
            // SAFETY: in bounds as the caller promised.
            let s: &[f32; LANES] =
                unsafe { &*(buf.as_ptr().add(r.src + off) as *const [f32; LANES]) };
            for (a, &wc) in acc.iter_mut().zip(wv) {
                for j in 0..LANES {
                    a[j] = wc.mul_add(s[j], a[j]);
                }
            }
        }
        for (c, a) in acc.iter().enumerate().take(live) {
            // SAFETY: writable as the caller promised.
            unsafe {
                let d = base.add(c * op + r.dst).cast::<f32>();
                if r.n == LANES {
                    d.cast::<[f32; LANES]>().write_unaligned(*a);
                } else {
                    copy_short(d, a.as_ptr(), r.n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernels::{case_data, lcg, naive, Case};
    use super::*;

    /// An image network's first layer (3 channels, 3x3, stride 2, 16 outputs; resnet's 7x7) over several
    /// bands and both threads, 1-D, strides 1 to 3, even and odd padding, dilation, channel
    /// counts that leave a partial block, rows shorter than a run, two images, many bands
    /// per thread; with and
    /// without bias and with a fused activation, against a float64 direct convolution.
    #[test]
    fn matches_a_direct_convolution() {
        if !std::is_x86_feature_detected!("avx2") || !std::is_x86_feature_detected!("fma") {
            return;
        }
        let mut rnd = lcg(5);
        // (n, c, o, groups, ins, ks, stride, pad, dil)
        let cases: &[Case] = &[
            (
                1,
                3,
                16,
                1,
                [1, 61, 58],
                [1, 3, 3],
                [1, 2, 2],
                [0, 1, 1],
                [1, 1, 1],
            ),
            (
                2,
                2,
                5,
                1,
                [1, 9, 30],
                [1, 3, 3],
                [1, 1, 1],
                [0, 1, 1],
                [1, 1, 1],
            ),
            (
                1,
                1,
                9,
                1,
                [1, 1, 40],
                [1, 1, 5],
                [1, 1, 3],
                [0, 0, 2],
                [1, 1, 1],
            ),
            (
                1,
                4,
                8,
                1,
                [1, 17, 19],
                [1, 3, 3],
                [1, 2, 1],
                [0, 2, 0],
                [1, 2, 2],
            ),
            (
                1,
                2,
                3,
                1,
                [1, 5, 6],
                [1, 5, 5],
                [1, 1, 1],
                [0, 2, 2],
                [1, 1, 1],
            ),
            (
                1,
                3,
                20,
                1,
                [1, 41, 38],
                [1, 7, 7],
                [1, 2, 2],
                [0, 3, 3],
                [1, 1, 1],
            ),
            (
                1,
                3,
                24,
                1,
                [1, 400, 9],
                [1, 3, 3],
                [1, 1, 1],
                [0, 1, 1],
                [1, 1, 1],
            ),
        ];
        for &case in cases {
            let (g, x, w, b) = case_data(case, &mut rnd);
            assert!(applies(&g), "{g:?}");
            for bias in [None, Some(&b[..])] {
                let want = naive(&g, &x, &w, bias);
                let tol = 1e-5 * ((g.c * g.taps()) as f64).sqrt() * 4.0;
                let relu = |s: &mut [f32]| s.iter_mut().for_each(|v| *v = v.max(0.0));
                for post in [None, Some(&relu as &(dyn Fn(&mut [f32]) + Sync))] {
                    let mut out = Vec::with_capacity(want.len());
                    narrow(
                        &g,
                        &x,
                        &pack_weights(&g, &w).0,
                        bias,
                        &mut out.spare_capacity_mut()[..want.len()],
                        post,
                    );
                    // SAFETY: `narrow` wrote every output.
                    unsafe { out.set_len(want.len()) };
                    for (i, (a, e)) in out.iter().zip(&want).enumerate() {
                        let e = if post.is_some() { e.max(0.0) } else { *e };
                        assert!(
                            (*a as f64 - e).abs() <= tol,
                            "{g:?} bias {}: [{i}] {a} vs {e}",
                            bias.is_some()
                        );
                    }
                }
            }
        }
    }
}
