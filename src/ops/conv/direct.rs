//! Direct (indirect-addressed) convolution on AVX2+FMA: no unfolded input at all.
//!
//! The packed GEMM (`packed.rs`) unfolds the input into B panels as it goes: for a 3x3
//! convolution with 64 output channels, each unfolded value is used by only 64 FMAs, and the
//! unfolding cost as much as a fifth of the product. Here the roles turn around:
//! - the weights are packed once into panels of 16 output channels (two ymm vectors per
//!   step, k-major: the GEMM's B panel layout, [`Packed::b`]);
//! - the input is read where it lies: output position `p` and tap `k` read
//!   `x[pos[p] + tap[k]]` of the (zero-padded, when the convolution pads) input, with `pos`
//!   and `tap` offset tables built per call. The microkernel broadcasts six positions per
//!   step straight from memory against the two weight vectors: 6 x 16 outputs in 12
//!   accumulators, as the GEMM's 6 x 16 kernel, with no packing of the input;
//! - each 16 x 6 tile goes to the output (channels-first) through a small transposing buffer.
//!
//! Each output's sum is the packed GEMM's, in the same order: the taps in order within K
//! blocks of [`KC`], each block summed from zero, the later blocks added in order to the
//! first, then the bias (when there is one). The two paths give the same values.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::kernels::Geometry;
use crate::ops::elementwise::epilogue::TileAct;
use crate::ops::matmul::gemm::{fork_each, SharedOut};
use crate::ops::matmul::sgemm::{Isa, Lines, Packed, Panels, Strided};

/// Output channels per panel (two 8-lane vectors).
const OC: usize = 16;
/// Output positions per tile.
const POS: usize = 6;
/// Depth of a K block: the packed GEMM's on AVX2, so that sums are grouped alike.
pub(super) const KC: usize = 256;

/// Pack `w` ([O, C/groups, kd, kh, kw], contiguous) per group into panels of [`OC`] output
/// channels.
pub(super) fn pack_weights(g: &Geometry, w: &[f32]) -> Vec<Packed> {
    let (og, kf) = (g.o / g.groups, g.c / g.groups * g.taps());
    assert!(w.len() >= g.o * kf, "weight smaller than its geometry");
    (0..g.groups)
        .map(|gi| {
            // Output channel o's taps are row o of the group's og x kf matrix: as B's
            // columns, line o, step k at o * kf + k.
            let b = Lines::cols(Strided {
                p: w[gi * og * kf..].as_ptr(),
                rs: 1,
                cs: kf,
            });
            // SAFETY: lines (channels) gi*og..(gi+1)*og of kf steps lie inside `w`.
            unsafe { Packed::b(Isa::Avx2, &b, og, kf) }
        })
        .collect()
}

/// The input of one (image, group) as the kernel reads it: `cg` planes of `zp x yp x xp`,
/// zero where the convolution pads; the input itself when nothing pads.
struct Source {
    data: Option<Vec<f32>>,
    /// Plane extents.
    zp: usize,
    yp: usize,
    xp: usize,
}

impl Source {
    fn new(g: &Geometry, xg: &[f32]) -> Source {
        let cg = g.c / g.groups;
        // The extent each axis's windows read, counted from the padded start.
        let read = |a: usize| (g.outs[a] - 1) * g.stride[a] + (g.ks[a] - 1) * g.dil[a] + 1;
        let fits = (0..3).all(|a| g.pad_lo[a] == 0 && read(a) <= g.ins[a]);
        if fits {
            let [zp, yp, xp] = g.ins;
            return Source {
                data: None,
                zp,
                yp,
                xp,
            };
        }
        let ext = |a: usize| read(a).max(g.pad_lo[a] + g.ins[a]);
        let (zp, yp, xp) = (ext(0), ext(1), ext(2));
        let [id, ih, iw] = g.ins;
        let [pd, ph, pw] = g.pad_lo;
        let mut data = vec![0.0f32; cg * zp * yp * xp];
        if id * ih * iw > 0 {
            for (c, src) in xg.chunks_exact(id * ih * iw).take(cg).enumerate() {
                for z in 0..id {
                    for y in 0..ih {
                        let at = ((c * zp + z + pd) * yp + y + ph) * xp + pw;
                        let from = (z * ih + y) * iw;
                        data[at..at + iw].copy_from_slice(&src[from..from + iw]);
                    }
                }
            }
        }
        Source {
            data: Some(data),
            zp,
            yp,
            xp,
        }
    }
}

/// One (image, group): `dst` (og x op) = the convolution of `xg` (the group's input planes)
/// with the group's packed weights `w`, plus `bias` (the group's og values), then `act` (a
/// fused activation) when given, on up to `threads` threads. Every output is written (`dst`
/// may start uninitialized).
pub(super) fn forward_group(
    g: &Geometry,
    xg: &[f32],
    w: &Packed,
    bias: Option<&[f32]>,
    act: Option<TileAct>,
    dst: &mut [std::mem::MaybeUninit<f32>],
    threads: usize,
) {
    let (cg, og) = (g.c / g.groups, g.o / g.groups);
    let (kf, op) = (cg * g.taps(), g.out_plane());
    assert!(
        xg.len() >= cg * g.in_plane() && dst.len() >= og * op,
        "convolution operands smaller than their geometry"
    );
    assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
    if op == 0 || og == 0 {
        return;
    }
    let src = Source::new(g, xg);
    let x: &[f32] = src.data.as_deref().unwrap_or(xg);
    let (zp, yp, xp) = (src.zp, src.yp, src.xp);
    let plane = zp * yp * xp;
    let [kd, kh, kw] = g.ks;
    let [_, oh, ow] = g.outs;
    let [sd, sh, sw] = g.stride;
    let [dd, dh, dw] = g.dil;
    // Offsets of each tap (c, kz, ky, kx) from a window's corner, and of each output's
    // window corner: together every read lies inside `x` (the windows fit the planes).
    let tap: Vec<usize> = (0..kf)
        .map(|r| {
            let (kx, ky, kz, c) = (
                r % kw,
                (r / kw) % kh,
                (r / (kw * kh)) % kd,
                r / (kw * kh * kd),
            );
            c * plane + (kz * dd * yp + ky * dh) * xp + kx * dw
        })
        .collect();
    let pos: Vec<usize> = (0..op)
        .map(|p| {
            let (ox, oy, oz) = (p % ow, (p / ow) % oh, p / (ow * oh));
            (oz * sd * yp + oy * sh) * xp + ox * sw
        })
        .collect();
    let last = tap.iter().max().copied().unwrap_or(0) + pos.iter().max().copied().unwrap_or(0);
    assert!(last < x.len(), "a window reads past the input");
    let (panels, tiles) = (og.div_ceil(OC), op.div_ceil(POS));
    let out = SharedOut(dst.as_mut_ptr().cast::<f32>());
    let run = |pr: std::ops::Range<usize>, tr: std::ops::Range<usize>| {
        for pi in pr {
            let (o0, on) = (pi * OC, OC.min(og - pi * OC));
            let mut b = [0.0f32; OC];
            if let Some(bias) = bias {
                b[..on].copy_from_slice(&bias[o0..o0 + on]);
            }
            for ti in tr.clone() {
                let (p0, pn) = (ti * POS, POS.min(op - ti * POS));
                // Positions past the output repeat the last one (read, never stored).
                let mut at = [0usize; POS];
                for (j, a) in at.iter_mut().enumerate() {
                    *a = pos[p0 + j.min(pn - 1)];
                }
                let mut tile = [[0.0f32; OC]; POS];
                let mut k0 = 0;
                while k0 < kf {
                    let kc = KC.min(kf - k0);
                    // SAFETY: the panel block lies inside the packed weights (pi < panels,
                    // k0 + kc <= kf); every read x[at[j] + tap[k]] is below `last`.
                    unsafe {
                        let wp = w.panels(OC, o0, on, k0, kc, &mut []);
                        let init = if k0 == 0 { Init::Zero } else { Init::Tile };
                        tile_avx2(kc, wp, x.as_ptr(), &at, tap[k0..].as_ptr(), init, &mut tile);
                    }
                    k0 += KC;
                }
                // The bias after the sums, then the activation, as the GEMM's tile
                // epilogue applies them.
                if bias.is_some() {
                    for row in tile.iter_mut() {
                        for (v, &bv) in row.iter_mut().zip(&b) {
                            *v += bv;
                        }
                    }
                }
                if act.is_some() {
                    // SAFETY: `tile` is POS rows of OC floats, this call's own.
                    unsafe {
                        TileAct::bias_then(act, None, tile.as_mut_ptr().cast(), OC, [POS, OC])
                    };
                }
                // SAFETY: outputs (o0 + i, p0 + j), i < on, j < pn, lie inside dst
                // (og x op); tiles are disjoint between the threads' ranges.
                unsafe { store_avx2(&tile, out.at(o0 * op + p0), op, on, pn) };
            }
        }
    };
    let threads = threads.max(1).min(panels * tiles);
    if threads == 1 {
        run(0..panels, 0..tiles);
    } else if tiles >= 2 * threads || tiles >= panels {
        let per = tiles.div_ceil(threads);
        fork_each(0..threads, |t, _| {
            run(0..panels, (t * per).min(tiles)..((t + 1) * per).min(tiles))
        });
    } else {
        let per = panels.div_ceil(threads);
        fork_each(0..threads, |t, _| {
            run((t * per).min(panels)..((t + 1) * per).min(panels), 0..tiles)
        });
    }
}

/// What a K block's sums start from in the tile.
enum Init {
    /// The first block: the tile is the block's sums.
    Zero,
    /// A later block: the block's sums are added to the tile.
    Tile,
}

/// One K block of a 16-channel x 6-position tile: for each step k, the panel's 16 weights
/// (`wp`, k-major) times the input at `x + at[j] + tap[k]`, summed from zero over the `kc`
/// steps and then combined into `tile` (`tile[j][i]`: position j, channel i) as `init` says.
///
/// # Safety
/// `wp` must hold `kc * 16` floats, `tap` `kc` offsets, and every `x + at[j] + tap[k]` must
/// be readable; AVX2 and FMA must be available.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2(
    kc: usize,
    mut wp: *const f32,
    x: *const f32,
    at: &[usize; POS],
    tap: *const usize,
    init: Init,
    tile: &mut [[f32; OC]; POS],
) {
    let z = _mm256_setzero_ps();
    let mut acc = [[z; 2]; POS];
    let xs: [*const f32; POS] = std::array::from_fn(|j| x.add(at[j]));
    for k in 0..kc {
        let t = *tap.add(k);
        let w0 = _mm256_loadu_ps(wp);
        let w1 = _mm256_loadu_ps(wp.add(8));
        for (j, a) in acc.iter_mut().enumerate() {
            let v = _mm256_broadcast_ss(&*xs[j].add(t));
            a[0] = _mm256_fmadd_ps(v, w0, a[0]);
            a[1] = _mm256_fmadd_ps(v, w1, a[1]);
        }
        wp = wp.add(OC);
    }
    for (a, row) in acc.iter().zip(tile.iter_mut()) {
        let p = row.as_mut_ptr();
        for (h, &v) in a.iter().enumerate() {
            let r = match init {
                Init::Zero => v,
                Init::Tile => _mm256_add_ps(_mm256_loadu_ps(p.add(8 * h)), v),
            };
            _mm256_storeu_ps(p.add(8 * h), r);
        }
    }
}

/// Write `tile` (`tile[j][i]`: position j, channel i) to channels-first storage: channel
/// i < `on`, position j < `pn` at `d + i * rs + j`. Two 8 x 8 transposes in registers (rows
/// 6 and 7 are zero), then one 6-wide store per channel.
///
/// # Safety
/// Every written element must lie in `d`'s allocation; AVX2 must be available.
#[target_feature(enable = "avx2")]
unsafe fn store_avx2(tile: &[[f32; OC]; POS], d: *mut f32, rs: usize, on: usize, pn: usize) {
    let mask = {
        const IDX: [i32; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(pn as i32),
            _mm256_loadu_si256(IDX.as_ptr() as *const __m256i),
        )
    };
    for h in 0..2 {
        if on <= 8 * h {
            break;
        }
        let z = _mm256_setzero_ps();
        let r: [__m256; 8] = std::array::from_fn(|j| {
            if j < POS {
                _mm256_loadu_ps(tile[j][8 * h..].as_ptr())
            } else {
                z
            }
        });
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        // Column i of the 8 x 8 block: channel 8h + i at positions 0..8.
        let cols = [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ];
        for (i, &c) in cols.iter().enumerate().take(on - 8 * h) {
            let p = d.add((8 * h + i) * rs);
            if pn == POS {
                _mm_storeu_ps(p, _mm256_castps256_ps128(c));
                _mm_storel_epi64(
                    p.add(4) as *mut __m128i,
                    _mm_castps_si128(_mm256_extractf128_ps::<1>(c)),
                );
            } else {
                _mm256_maskstore_ps(p, mask, c);
            }
        }
    }
}
