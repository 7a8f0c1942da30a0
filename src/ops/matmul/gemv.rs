//! Single-row products `c = beta * c + alpha * (x @ B)` where B's columns are contiguous (a
//! `linear` layer's weight read as Wᵀ, or any `[k, n]` view that is a transposed row-major
//! matrix): each output is a dot product of `x` with one contiguous weight row.
//!
//! At batch 1 (a classifier head, a language model decoding one token) the product reads
//! every weight once and does one multiply-add per weight: it is bound by memory, and the
//! `gemm` crate, which packs B into panels on every call, spends more on packing than on the
//! product. Here the weights stream straight through: four rows at a time against the same
//! loads of `x`, eight lanes and two accumulators per row, on AVX2+FMA (checked at run
//! time), threads splitting the rows.
//!
//! Each dot product sums in 16 interleaved partial sums (lane `l` of accumulator `h` takes
//! steps `16 i + 8 h + l`), added pairwise at the end, then the tail in order.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::gemm::SharedOut;

/// Rows of B per pass (each with two accumulators).
const ROWS: usize = 4;

/// Whether this CPU runs [`gemv`].
pub(crate) fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// `c[j * c_cs] = alpha * dot(x, w[j * w_rs .. j * w_rs + k]) + beta * c[j * c_cs]` for j
/// in `0..n` (c not read when beta is 0), on up to `threads` threads.
///
/// # Panics
/// When a slice is shorter than the product reads or writes, or [`available`] is false.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemv(
    n: usize,
    k: usize,
    x: &[f32],
    w: &[f32],
    w_rs: usize,
    c: &mut [f32],
    c_cs: usize,
    alpha: f32,
    beta: f32,
    threads: usize,
) {
    if n == 0 {
        return;
    }
    assert!(available(), "gemv needs AVX2 and FMA");
    assert!(x.len() >= k, "gemv: x shorter than k");
    assert!(
        (n - 1)
            .checked_mul(w_rs)
            .and_then(|v| v.checked_add(k))
            .is_some_and(|v| v <= w.len()),
        "gemv: weights shorter than n rows"
    );
    assert!(
        (n - 1).checked_mul(c_cs).is_some_and(|v| v < c.len()),
        "gemv: output shorter than n"
    );
    let out = SharedOut(c.as_mut_ptr());
    let rows = |j0: usize, j1: usize| {
        let mut j = j0;
        while j < j1 {
            let r = ROWS.min(j1 - j);
            let mut d = [0.0f32; ROWS];
            // SAFETY: rows j..j + r of k steps lie inside `w`, k steps inside `x` (asserted
            // above); AVX2 and FMA were detected.
            unsafe { dots(k, x.as_ptr(), w.as_ptr().add(j * w_rs), w_rs, r, &mut d) };
            for (i, &v) in d.iter().enumerate().take(r) {
                // SAFETY: output j + i < n lies inside `c` (asserted above); the threads'
                // row ranges are disjoint.
                unsafe {
                    let o = out.at((j + i) * c_cs);
                    *o = if beta == 0.0 {
                        alpha * v
                    } else {
                        alpha * v + beta * *o
                    };
                }
            }
            j += r;
        }
    };
    let parts = threads.max(1).min(n.div_ceil(ROWS));
    if parts <= 1 {
        rows(0, n);
        return;
    }
    // Whole passes per part, so every part but the last runs full passes.
    let per = n.div_ceil(ROWS).div_ceil(parts) * ROWS;
    super::gemm::fork_each(0..parts, |t, _| {
        rows((t * per).min(n), ((t + 1) * per).min(n))
    });
}

/// `d[i] = dot(x[..k], w[i * w_rs..][..k])` for i < r (r <= ROWS; rows past r are not read).
///
/// # Safety
/// The rows and `x` must hold k readable floats; AVX2 and FMA must be available.
#[target_feature(enable = "avx2,fma")]
unsafe fn dots(k: usize, x: *const f32, w: *const f32, w_rs: usize, r: usize, d: &mut [f32; ROWS]) {
    // Missing rows read row 0 again (computed, never stored).
    let rp: [*const f32; ROWS] = std::array::from_fn(|i| w.add(if i < r { i * w_rs } else { 0 }));
    let z = _mm256_setzero_ps();
    let mut acc = [[z; 2]; ROWS];
    let mut s = 0;
    while s + 16 <= k {
        let x0 = _mm256_loadu_ps(x.add(s));
        let x1 = _mm256_loadu_ps(x.add(s + 8));
        for (a, p) in acc.iter_mut().zip(&rp) {
            a[0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(p.add(s)), a[0]);
            a[1] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(p.add(s + 8)), a[1]);
        }
        s += 16;
    }
    for ((a, p), o) in acc.iter().zip(&rp).zip(d.iter_mut()) {
        // Pairwise: the two accumulators, then halves down to one lane.
        let v = _mm256_add_ps(a[0], a[1]);
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_movehdup_ps(h));
        let mut t = _mm_cvtss_f32(h);
        for i in s..k {
            t = (*x.add(i)).mul_add(*p.add(i), t);
        }
        *o = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tail (k around the 16-step block, n around the 4-row pass), strided weights and
    /// output, beta 0 (NaN in c ignored) and not, one and several threads, against a float64
    /// reference.
    #[test]
    fn matches_a_reference() {
        if !available() {
            return;
        }
        let mut seed = 3u32;
        let mut rnd = move || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        for &(n, k) in &[
            (1, 1),
            (3, 15),
            (4, 16),
            (5, 17),
            (9, 33),
            (70, 300),
            (1000, 40),
        ] {
            for &(w_rs, c_cs) in &[(k, 1), (k + 3, 2)] {
                for &(alpha, beta) in &[(1.0f32, 0.0f32), (0.5, 2.0)] {
                    for threads in [1, 2, 3] {
                        let x: Vec<f32> = (0..k).map(|_| rnd()).collect();
                        let w: Vec<f32> = (0..n * w_rs).map(|_| rnd()).collect();
                        let c0: Vec<f32> = (0..n * c_cs)
                            .map(|_| if beta == 0.0 { f32::NAN } else { rnd() })
                            .collect();
                        let mut got = c0.clone();
                        gemv(n, k, &x, &w, w_rs, &mut got, c_cs, alpha, beta, threads);
                        for j in 0..n {
                            let dot: f64 =
                                (0..k).map(|i| x[i] as f64 * w[j * w_rs + i] as f64).sum();
                            let old = if beta == 0.0 {
                                0.0
                            } else {
                                beta as f64 * c0[j * c_cs] as f64
                            };
                            let want = alpha as f64 * dot + old;
                            let g = got[j * c_cs] as f64;
                            let tol = 1e-5 * (k as f64).sqrt() * 4.0 + 1e-6;
                            assert!((g - want).abs() <= tol, "n{n} k{k} w_rs{w_rs} c_cs{c_cs} alpha {alpha} beta {beta} threads {threads}: [{j}] {g} vs {want}");
                        }
                        // Outputs between the strided ones are untouched.
                        for (i, (g, o)) in got.iter().zip(&c0).enumerate() {
                            if i % c_cs != 0 {
                                assert!(g.to_bits() == o.to_bits(), "[{i}] written");
                            }
                        }
                    }
                }
            }
        }
    }
}
