//! A packed single-precision GEMM for x86-64 CPUs with AVX-512F, chosen at run time
//! (`is_x86_feature_detected!`); elsewhere [`sgemm`] declines and the `gemm` crate runs.
//!
//! The `gemm` crate's stable build stops at AVX2 (8-wide FMA): on this project's 2-core
//! AVX-512 machine it reached ~25 GFLOP/s in resnet18's convolutions where PyTorch's
//! oneDNN/MKL reaches 120-220 (`bench/cpu_bench.py`). This is the BLIS algorithm:
//! - B is packed per (KC x NC) block into panels of [`NR`] = 32 columns (k-major, zero-padded
//!   past N), A per (MC x KC) block into panels of [`MR`] = 12 rows (k-major, zero-padded
//!   past M);
//! - the microkernel keeps a 12 x 32 block of C in 24 zmm accumulators: per k, two 16-wide
//!   loads of B and 12 broadcasts of A feed 24 FMAs;
//! - C is updated once per KC block: `alpha * AB + beta * C` on the first (C not read when
//!   beta is 0: NaNs in C do not propagate, as BLAS and torch), `+= alpha * AB` after.
//!
//! Threads split the columns of C (or its rows when there are few columns) into contiguous
//! parts, each packed and computed by one thread: no shared state, no barriers.
//! Each output's sum runs over k in order within a KC block, the blocks added in order.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

/// Rows of C per microkernel call.
pub(crate) const MR: usize = 12;
/// Columns of C per microkernel call (two zmm registers).
pub(crate) const NR: usize = 32;
/// Depth of a packed block: a B panel (KC x 32 floats, 48 KiB) stays in L1/L2.
const KC: usize = 384;
/// Rows of A packed at once (a multiple of MR): 240 x 384 floats, 360 KiB, in L2.
const MC: usize = 240;
/// Columns of B packed at once (a multiple of NR).
const NC: usize = 3072;

/// Whether this CPU runs [`sgemm`] (checked once).
pub(crate) fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        std::env::var("PT2WEB_CPU_GEMM").as_deref() != Ok("crate")
            && is_x86_feature_detected!("avx512f")
    })
}

/// A strided f32 matrix: element (i, j) at `p + i * rs + j * cs`.
#[derive(Clone, Copy)]
pub(crate) struct Strided {
    pub p: *const f32,
    pub rs: usize,
    pub cs: usize,
}

/// C's storage: element (i, j) at `p + i * rs + j` (unit column stride).
#[derive(Clone, Copy)]
struct Out {
    p: *mut f32,
    rs: usize,
}

// SAFETY: the pointers are only dereferenced inside the bounds the caller checked, and the
// threads write disjoint parts of C.
unsafe impl Send for Strided {}
unsafe impl Sync for Strided {}
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// `C = alpha * A B + beta * C` for an m x k `a`, a k x n `b` and C (m x n) at `c` with row
/// stride `c_rs` and unit column stride, on `threads` threads.
///
/// # Safety
/// Every element of A, B and C these describe must lie in live allocations, C must not
/// overlap A or B, and [`available`] must be true.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: Strided,
    b: Strided,
    c: *mut f32,
    c_rs: usize,
    alpha: f32,
    beta: f32,
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    let out = Out { p: c, rs: c_rs };
    let threads = threads.max(1);
    let n_panels = n.div_ceil(NR);
    let m_panels = m.div_ceil(MR);
    if threads == 1 || (n_panels < 2 && m_panels < 2) {
        // SAFETY: as the caller promised.
        unsafe { serial(m, n, k, a, b, out, alpha, beta) };
        return;
    }
    // Split the dimension with more panels into `parts` contiguous ranges of whole panels.
    let split_n = n_panels >= threads * 2 || n_panels >= m_panels;
    let panels = if split_n { n_panels } else { m_panels };
    let parts = threads.min(panels);
    let per = panels.div_ceil(parts);
    let part = move |t: usize| {
        // Whole values, so the closure captures the Send wrappers, not their pointer fields.
        let (a, b, out) = (a, b, out);
        let (lo, hi) = (t * per, ((t + 1) * per).min(panels));
        if lo >= hi {
            return;
        }
        // SAFETY: each part is a disjoint block of C's rows or columns inside the checked
        // bounds; A and B are only read.
        unsafe {
            if split_n {
                let (j0, j1) = (lo * NR, (hi * NR).min(n));
                let b = Strided {
                    p: b.p.add(j0 * b.cs),
                    ..b
                };
                let out = Out {
                    p: out.p.add(j0),
                    ..out
                };
                serial(m, j1 - j0, k, a, b, out, alpha, beta);
            } else {
                let (i0, i1) = (lo * MR, (hi * MR).min(m));
                let a = Strided {
                    p: a.p.add(i0 * a.rs),
                    ..a
                };
                let out = Out {
                    p: out.p.add(i0 * out.rs),
                    ..out
                };
                serial(i1 - i0, n, k, a, b, out, alpha, beta);
            }
        }
    };
    // rayon's pool (the `gemm` crate's too): its threads persist, where spawning per call
    // cost more than a small product.
    rayon::scope(|s| {
        for t in 1..parts {
            s.spawn(move |_| part(t));
        }
        part(0);
    });
}

thread_local! {
    /// Packing buffers, kept per thread between calls.
    static PACK: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// One thread's GEMM (see the module doc).
#[allow(clippy::too_many_arguments)]
unsafe fn serial(
    m: usize,
    n: usize,
    k: usize,
    a: Strided,
    b: Strided,
    c: Out,
    alpha: f32,
    beta: f32,
) {
    PACK.with(|bufs| {
        let mut bufs = bufs.borrow_mut();
        let (pa, pb) = &mut *bufs;
        let kc_max = k.clamp(1, KC);
        pa.resize(MC.min(m.div_ceil(MR) * MR) * kc_max, 0.0);
        pb.resize(NC.min(n.div_ceil(NR) * NR) * kc_max, 0.0);
        if k == 0 {
            // C = beta * C (alpha * AB is zero).
            for i in 0..m {
                let row = c.p.add(i * c.rs);
                for j in 0..n {
                    let x = row.add(j);
                    *x = if beta == 0.0 { 0.0 } else { beta * *x };
                }
            }
            return;
        }
        let mut jc = 0;
        while jc < n {
            let nc = NC.min(n - jc);
            let mut pc = 0;
            while pc < k {
                let kc = KC.min(k - pc);
                pack::<NR>(nc, kc, b.p.add(pc * b.rs + jc * b.cs), b.cs, b.rs, pb);
                // The first K block applies beta; later ones add to what it wrote.
                let (first, beta_here) = if pc == 0 { (true, beta) } else { (false, 1.0) };
                let mut ic = 0;
                while ic < m {
                    let mc = MC.min(m - ic);
                    pack::<MR>(mc, kc, a.p.add(ic * a.rs + pc * a.cs), a.rs, a.cs, pa);
                    let mut jr = 0;
                    while jr < nc {
                        let nr = NR.min(nc - jr);
                        let bp = pb.as_ptr().add(jr * kc);
                        let mut ir = 0;
                        while ir < mc {
                            let mr = MR.min(mc - ir);
                            let ap = pa.as_ptr().add(ir * kc);
                            let cp = c.p.add((ic + ir) * c.rs + jc + jr);
                            kernel(
                                kc,
                                ap,
                                bp,
                                cp,
                                c.rs,
                                mr,
                                nr,
                                alpha,
                                beta_here,
                                first && beta == 0.0,
                            );
                            ir += MR;
                        }
                        jr += NR;
                    }
                    ic += MC;
                }
                pc += KC;
            }
            jc += NC;
        }
    });
}

/// Pack `len` lines x `kc` steps of a matrix into panels of `W` lines, k-major: panel p
/// holds, for each k, the `W` values at line p*W + i (zeros past `len`). Line i, step k is
/// at `p + i * along + k * step`. A packs its rows (`along` = rs, `step` = cs), B its columns
/// (`along` = cs, `step` = rs); lines next to each other in memory are copied whole.
unsafe fn pack<const W: usize>(
    len: usize,
    kc: usize,
    p: *const f32,
    along: usize,
    step: usize,
    dst: &mut [f32],
) {
    let mut o = 0;
    let mut l0 = 0;
    while l0 < len {
        let lines = W.min(len - l0);
        if along == 1 && lines == W {
            for kk in 0..kc {
                std::ptr::copy_nonoverlapping(p.add(kk * step + l0), dst.as_mut_ptr().add(o), W);
                o += W;
            }
        } else {
            for kk in 0..kc {
                for i in 0..W {
                    *dst.get_unchecked_mut(o + i) = if i < lines {
                        *p.add((l0 + i) * along + kk * step)
                    } else {
                        0.0
                    };
                }
                o += W;
            }
        }
        l0 += W;
    }
}

/// C[0..mr, 0..nr] = alpha * Ap Bp + beta * C over `kc` packed steps; C is not read when
/// `skip_c` (beta = 0 on the first K block).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn kernel(
    kc: usize,
    mut ap: *const f32,
    mut bp: *const f32,
    c: *mut f32,
    c_rs: usize,
    mr: usize,
    nr: usize,
    alpha: f32,
    beta: f32,
    skip_c: bool,
) {
    let z = _mm512_setzero_ps();
    let mut acc = [[z; 2]; MR];
    for _ in 0..kc {
        let b0 = _mm512_loadu_ps(bp);
        let b1 = _mm512_loadu_ps(bp.add(16));
        for (i, row) in acc.iter_mut().enumerate() {
            let ai = _mm512_set1_ps(*ap.add(i));
            row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
            row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
        }
        ap = ap.add(MR);
        bp = bp.add(NR);
    }
    let va = _mm512_set1_ps(alpha);
    let vb = _mm512_set1_ps(beta);
    let m0: __mmask16 = if nr >= 16 {
        0xffff
    } else {
        ((1u32 << nr) - 1) as u16
    };
    let m1: __mmask16 = if nr >= 32 {
        0xffff
    } else if nr > 16 {
        ((1u32 << (nr - 16)) - 1) as u16
    } else {
        0
    };
    for (i, row) in acc.iter().enumerate().take(mr) {
        let p = c.add(i * c_rs);
        let mut v0 = _mm512_mul_ps(va, row[0]);
        let mut v1 = _mm512_mul_ps(va, row[1]);
        if !skip_c {
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, p), v0);
            v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, p.add(16)), v1);
        }
        _mm512_mask_storeu_ps(p, m0, v0);
        _mm512_mask_storeu_ps(p.add(16), m1, v1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn naive(
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        b: &[f32],
        c: &mut [f32],
        alpha: f32,
        beta: f32,
    ) {
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for kk in 0..k {
                    s += a[i * k + kk] as f64 * b[kk * n + j] as f64;
                }
                let old = if beta == 0.0 {
                    0.0
                } else {
                    beta as f64 * c[i * n + j] as f64
                };
                c[i * n + j] = (alpha as f64 * s + old) as f32;
            }
        }
    }

    /// Every edge (partial panels in M and N, K past one block, beta 0 / not 0, both thread
    /// splits, transposed A) against a float64 reference.
    #[test]
    fn matches_a_reference_at_every_edge() {
        if !available() {
            return;
        }
        let mut seed = 1u32;
        let mut rnd = move || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        for &(m, n, k) in &[
            (1, 1, 1),
            (13, 33, 7),
            (12, 32, 385),
            (37, 100, 800),
            (250, 70, 64),
            (5, 3100, 20),
            (300, 5, 9),
        ] {
            for &(alpha, beta) in &[(1.0f32, 0.0f32), (0.5, 2.0)] {
                for threads in [1, 2, 3] {
                    let a: Vec<f32> = (0..m * k).map(|_| rnd()).collect();
                    let b: Vec<f32> = (0..k * n).map(|_| rnd()).collect();
                    let c0: Vec<f32> = (0..m * n)
                        .map(|_| if beta == 0.0 { f32::NAN } else { rnd() })
                        .collect();
                    let mut want = c0.clone();
                    naive(m, n, k, &a, &b, &mut want, alpha, beta);
                    // A given transposed (column-major storage), to cover the strided packing.
                    let at: Vec<f32> = (0..k * m).map(|x| a[(x % m) * k + x / m]).collect();
                    for (ap, rs, cs) in [(&a, k, 1), (&at, 1, m)] {
                        let mut got = c0.clone();
                        unsafe {
                            sgemm(
                                m,
                                n,
                                k,
                                Strided {
                                    p: ap.as_ptr(),
                                    rs,
                                    cs,
                                },
                                Strided {
                                    p: b.as_ptr(),
                                    rs: n,
                                    cs: 1,
                                },
                                got.as_mut_ptr(),
                                n,
                                alpha,
                                beta,
                                threads,
                            );
                        }
                        for (x, (g, w)) in got.iter().zip(&want).enumerate() {
                            let tol = 1e-5 * (k as f32).sqrt() * 4.0 + 1e-6;
                            assert!((g - w).abs() <= tol, "m{m} n{n} k{k} alpha {alpha} beta {beta} threads {threads} rs {rs}: [{x}] {g} vs {w}");
                        }
                    }
                }
            }
        }
    }
}
