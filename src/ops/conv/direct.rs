//! Direct (indirect-addressed) convolution on AVX2+FMA or AVX-512: no unfolded input at all.
//!
//! The packed GEMM (`packed.rs`) unfolds the input into B panels as it goes: for a 3x3
//! convolution with 64 output channels, each unfolded value is used by only 64 FMAs, and the
//! unfolding cost as much as a fifth of the product. Here the roles turn around:
//! - the weights are packed once into panels of output channels, k-major: the GEMM's B
//!   panel layout ([`Packed::b`]), 16 channels (two ymm vectors per step) on AVX2, 32 (two
//!   zmm vectors) on AVX-512;
//! - the input is read where it lies: output position `p` and tap `k` read
//!   `x[pos[p] + tap[k]]` of the (zero-padded, when the convolution pads) input, with `pos`
//!   and `tap` offset tables built per call. The microkernel broadcasts six positions per
//!   step straight from memory against the two weight vectors: 6 x 16 (or 6 x 32) outputs
//!   in 12 accumulators, with no packing of the input;
//! - each tile goes to the output (channels-first) through a small transposing buffer.
//!
//! Each output's sum is the packed GEMM's on the same instruction set, in the same order:
//! the taps in order within K blocks of the GEMM's depth, each block summed from zero, the
//! later blocks added in order to the first, then the bias (when there is one), then the
//! fused activation (when there is one). The two paths give the same values.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::kernels::Geometry;
use crate::ops::elementwise::epilogue::{Bias, TileAct};
use crate::ops::matmul::gemm::{fork_each, par_chunks, SharedOut};
use crate::ops::matmul::sgemm::{Isa, Lines, Packed, Panels, Strided};
use std::mem::MaybeUninit;

/// Output channels per panel on AVX2 (two 8-lane vectors) and on AVX-512 (two 16-lane
/// vectors): the B panel width of the packed GEMM's kernel on each.
const OC: usize = 16;
const OC_WIDE: usize = 32;
/// Output positions per tile.
const POS: usize = 6;
/// Pack `w` ([O, C/groups, kd, kh, kw], contiguous) per group into the packed GEMM's B panels
/// on `isa`: [`OC`] output channels per panel on AVX2, [`OC_WIDE`] on AVX-512, in K blocks of
/// the GEMM's depth on `isa` (so that sums are grouped alike).
pub(super) fn pack_weights(isa: Isa, g: &Geometry, w: &[f32]) -> Vec<Packed> {
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
            unsafe { Packed::b(isa, &b, og, kf) }
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
        let (plane, len) = (zp * yp * xp, cg * zp * yp * xp);
        assert!(
            xg.len() >= cg * id * ih * iw,
            "input smaller than its planes"
        );
        // Each plane's rows in one pass, the planes split over the threads: the padding
        // zeroed and the input copied, every element written once (no zeroing first).
        let mut data = Vec::<f32>::with_capacity(len);
        par_chunks(
            &mut data.spare_capacity_mut()[..len],
            plane,
            plane,
            |c, dst| {
                for (r, row) in dst.chunks_exact_mut(xp).enumerate() {
                    let (z, y) = (r / yp, r % yp);
                    let (iz, iy) = (z.wrapping_sub(pd), y.wrapping_sub(ph));
                    if iz >= id || iy >= ih {
                        row.fill(MaybeUninit::new(0.0));
                        continue;
                    }
                    let src = &xg[((c * id + iz) * ih + iy) * iw..][..iw];
                    let (lo, rest) = row.split_at_mut(pw);
                    let (mid, hi) = rest.split_at_mut(iw);
                    lo.fill(MaybeUninit::new(0.0));
                    for (d, &v) in mid.iter_mut().zip(src) {
                        d.write(v);
                    }
                    hi.fill(MaybeUninit::new(0.0));
                }
            },
        );
        // SAFETY: every plane's rows were written whole above.
        unsafe { data.set_len(len) };
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
    // The panel width says which kernel: AVX-512's 32 channels, or AVX2's 16.
    let wide = w.width() == OC_WIDE;
    assert!(if wide {
        is_x86_feature_detected!("avx512f")
    } else {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    });
    let (oc, kb) = (w.width(), w.depth());
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
    let (panels, tiles) = (og.div_ceil(oc), op.div_ceil(POS));
    let out = SharedOut(dst.as_mut_ptr().cast::<f32>());
    let run = |pr: std::ops::Range<usize>, tr: std::ops::Range<usize>| {
        for pi in pr {
            let (o0, on) = (pi * oc, oc.min(og - pi * oc));
            let mut b = [0.0f32; OC_WIDE];
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
                let mut tile: Tile = [[0.0f32; OC_WIDE]; POS];
                let mut k0 = 0;
                while k0 < kf {
                    let kc = kb.min(kf - k0);
                    // SAFETY: the panel block lies inside the packed weights (pi < panels,
                    // k0 + kc <= kf); every read x[at[j] + tap[k]] is below `last`; the CPU
                    // has the kernel's features (asserted above).
                    unsafe {
                        let wp = w.panels(oc, o0, on, k0, kc, &mut []);
                        let init = if k0 == 0 { Init::Zero } else { Init::Tile };
                        let (xp, tp) = (x.as_ptr(), tap[k0..].as_ptr());
                        if wide {
                            tile_avx512(kc, wp, xp, &at, tp, init, &mut tile);
                        } else {
                            tile_avx2(kc, wp, xp, &at, tp, init, &mut tile);
                        }
                    }
                    k0 += kb;
                }
                // The bias after the sums (then the activation, below), as the GEMM's tile
                // epilogue applies them.
                if bias.is_some() {
                    for row in tile.iter_mut() {
                        for (v, &bv) in row.iter_mut().zip(&b) {
                            *v += bv;
                        }
                    }
                }
                for c0 in (0..on).step_by(OC) {
                    let d = out.at((o0 + c0) * op + p0);
                    // SAFETY: outputs (o0 + c0 + i, p0 + j), i < min(on - c0, OC), j < pn,
                    // lie inside dst (og x op); tiles are disjoint between the threads'
                    // ranges.
                    unsafe { store_avx2(&tile, c0, d, op, (on - c0).min(OC), pn) };
                }
            }
            // The activation over the panel's outputs of this range at once (per tile, its
            // dispatch cost as much as a tenth of the convolution).
            let (q0, q1) = ((tr.start * POS).min(op), (tr.end * POS).min(op));
            if act.is_some() && q0 < q1 {
                // SAFETY: outputs (o0 + i, q0..q1), i < on, lie inside dst and are this
                // range's, written above.
                unsafe {
                    TileAct::bias_then(act, Bias::None, out.at(o0 * op + q0), op, [on, q1 - q0])
                };
            }
        }
    };
    let threads = threads.max(1).min(panels * tiles);
    if threads == 1 {
        run(0..panels, 0..tiles);
    } else if panels < 2 * threads && tiles >= panels {
        // Too few panels to share evenly: each thread takes a range of positions.
        let per = tiles.div_ceil(threads);
        fork_each(0..threads, |t, _| {
            run(0..panels, (t * per).min(tiles)..((t + 1) * per).min(tiles))
        });
    } else {
        // Each thread takes whole output channels: no cache line of the output is written
        // by two threads (in small planes, a range of positions shares its lines with the
        // next range's in every channel).
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

/// A tile's sums: `tile[j][i]` is position j, channel i (the first [`OC`] on AVX2).
type Tile = [[f32; OC_WIDE]; POS];

/// One K block of a 16-channel x 6-position tile: for each step k, the panel's 16 weights
/// (`wp`, k-major) times the input at `x + at[j] + tap[k]`, summed from zero over the `kc`
/// steps and then combined into `tile` (channels 0..16) as `init` says.
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
    tile: &mut Tile,
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

/// [`tile_avx2`] on AVX-512: a 32-channel x 6-position tile in 12 zmm accumulators, the
/// panel's 32 weights per step in two vectors. Each output's sum is [`tile_avx2`]'s.
///
/// # Safety
/// `wp` must hold `kc * 32` floats, `tap` `kc` offsets, and every `x + at[j] + tap[k]` must
/// be readable; AVX-512F must be available.
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512(
    kc: usize,
    mut wp: *const f32,
    x: *const f32,
    at: &[usize; POS],
    tap: *const usize,
    init: Init,
    tile: &mut Tile,
) {
    let z = _mm512_setzero_ps();
    let mut acc = [[z; 2]; POS];
    let xs: [*const f32; POS] = std::array::from_fn(|j| x.add(at[j]));
    for k in 0..kc {
        let t = *tap.add(k);
        let w0 = _mm512_loadu_ps(wp);
        let w1 = _mm512_loadu_ps(wp.add(16));
        for (j, a) in acc.iter_mut().enumerate() {
            let v = _mm512_set1_ps(*xs[j].add(t));
            a[0] = _mm512_fmadd_ps(v, w0, a[0]);
            a[1] = _mm512_fmadd_ps(v, w1, a[1]);
        }
        wp = wp.add(OC_WIDE);
    }
    for (a, row) in acc.iter().zip(tile.iter_mut()) {
        let p = row.as_mut_ptr();
        for (h, &v) in a.iter().enumerate() {
            let r = match init {
                Init::Zero => v,
                Init::Tile => _mm512_add_ps(_mm512_loadu_ps(p.add(16 * h)), v),
            };
            _mm512_storeu_ps(p.add(16 * h), r);
        }
    }
}

/// Write channels `c0..c0 + on` (`on` <= 16) of `tile` to channels-first storage: channel
/// c0 + i, position j < `pn` at `d + i * rs + j`. Two 8 x 8 transposes in registers (rows
/// 6 and 7 are zero), then one 6-wide store per channel.
///
/// # Safety
/// Every written element must lie in `d`'s allocation; AVX2 must be available.
#[target_feature(enable = "avx2")]
unsafe fn store_avx2(tile: &Tile, c0: usize, d: *mut f32, rs: usize, on: usize, pn: usize) {
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
                _mm256_loadu_ps(tile[j][c0 + 8 * h..].as_ptr())
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
