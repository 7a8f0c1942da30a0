//! Discrete Fourier transforms of any length in f64: mixed-radix Cooley–Tukey (decimation in
//! time over the smallest prime factor), a direct DFT for small primes, and Bluestein's chirp
//! z-transform (through a power-of-two transform) for primes past [`DIRECT_MAX`]. Unnormalized
//! in both directions, as pocketfft (torch's CPU FFT): the caller scales.

use crate::cpu::C128;
use std::f64::consts::PI;
use std::ops::{Add, Mul};

/// Primes up to this length use the direct O(n²) DFT; longer ones Bluestein's algorithm.
const DIRECT_MAX: usize = 64;

/// `e^(sign · 2πi · k / n)` with `k` reduced mod `n` first (exact for large k).
#[inline]
fn twiddle(k: usize, n: usize, sign: f64) -> C128 {
    let a = sign * 2.0 * PI * ((k % n) as f64) / n as f64;
    C128::new(a.cos(), a.sin())
}

fn smallest_factor(n: usize) -> usize {
    if n.is_multiple_of(2) {
        return 2;
    }
    let mut p = 3;
    while p * p <= n {
        if n.is_multiple_of(p) {
            return p;
        }
        p += 2;
    }
    n
}

/// The DFT of `x`: `X[k] = Σ x[j] e^(∓2πi jk/n)` (minus for `forward`).
pub fn dft(x: &[C128], forward: bool) -> Vec<C128> {
    let sign = if forward { -1.0 } else { 1.0 };
    transform(x, sign)
}

fn transform(x: &[C128], sign: f64) -> Vec<C128> {
    let n = x.len();
    if n <= 1 {
        return x.to_vec();
    }
    let p = smallest_factor(n);
    if p == n {
        return if n <= DIRECT_MAX {
            direct(x, sign)
        } else {
            bluestein(x, sign)
        };
    }
    // n = p·m: p interleaved sub-sequences of length m, transformed, then combined.
    let m = n / p;
    let subs: Vec<Vec<C128>> = (0..p)
        .map(|j| {
            let s: Vec<C128> = (0..m).map(|k| x[j + p * k]).collect();
            transform(&s, sign)
        })
        .collect();
    let w: Vec<C128> = (0..n).map(|k| twiddle(k, n, sign)).collect();
    let mut out = vec![C128::default(); n];
    for q in 0..p {
        for k in 0..m {
            let idx = k + m * q;
            let mut acc = subs[0][k];
            for (j, sub) in subs.iter().enumerate().skip(1) {
                acc = acc.add(sub[k].mul(w[(j * idx) % n]));
            }
            out[idx] = acc;
        }
    }
    out
}

fn direct(x: &[C128], sign: f64) -> Vec<C128> {
    let n = x.len();
    let w: Vec<C128> = (0..n).map(|k| twiddle(k, n, sign)).collect();
    (0..n)
        .map(|k| {
            x.iter().enumerate().fold(C128::default(), |acc, (j, &v)| {
                acc.add(v.mul(w[(j * k) % n]))
            })
        })
        .collect()
}

/// Bluestein: `X[k] = c̄[k] Σ (x[j] c̄[j]) c[k-j]` with the chirp `c[j] = e^(-sign·πi j²/n)`,
/// the convolution through power-of-two transforms.
fn bluestein(x: &[C128], sign: f64) -> Vec<C128> {
    let n = x.len();
    let m = (2 * n - 1).next_power_of_two();
    // j² mod 2n keeps the angle exact for large j.
    let chirp: Vec<C128> = (0..n)
        .map(|j| {
            // j² in 64 bits: past 65,535 points it overflows a 32-bit usize (wasm32).
            let a = sign * PI * (((j as u64 * j as u64) % (2 * n as u64)) as f64) / n as f64;
            C128::new(a.cos(), a.sin())
        })
        .collect();
    let mut a = vec![C128::default(); m];
    for j in 0..n {
        a[j] = x[j].mul(chirp[j]);
    }
    let mut b = vec![C128::default(); m];
    b[0] = chirp[0].conj();
    for j in 1..n {
        b[j] = chirp[j].conj();
        b[m - j] = chirp[j].conj();
    }
    let fa = transform(&a, -1.0);
    let fb = transform(&b, -1.0);
    let prod: Vec<C128> = fa.iter().zip(&fb).map(|(p, q)| p.mul(*q)).collect();
    let conv = transform(&prod, 1.0);
    let scale = 1.0 / m as f64;
    (0..n).map(|k| conv[k].scale(scale).mul(chirp[k])).collect()
}

/// Transform `data` (row-major, `sizes`) in place along dimension `dim`.
pub fn along(data: &mut [C128], sizes: &[usize], dim: usize, forward: bool) {
    let n = sizes[dim];
    let inner: usize = sizes[dim + 1..].iter().product();
    let outer: usize = sizes[..dim].iter().product();
    if n <= 1 || inner == 0 || outer == 0 {
        return;
    }
    let mut lane = vec![C128::default(); n];
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for (k, v) in lane.iter_mut().enumerate() {
                *v = data[base + k * inner];
            }
            for (k, v) in dft(&lane, forward).into_iter().enumerate() {
                data[base + k * inner] = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[C128], forward: bool) -> Vec<C128> {
        direct(x, if forward { -1.0 } else { 1.0 })
    }

    #[test]
    fn every_algorithm_matches_the_direct_dft() {
        for n in [1, 2, 3, 4, 6, 8, 12, 15, 16, 67, 97, 128, 134, 210, 257] {
            let x: Vec<C128> = (0..n)
                .map(|j| C128::new((j as f64 * 0.37).sin(), (j as f64 * 0.11).cos() - 0.5))
                .collect();
            for forward in [true, false] {
                let (got, want) = (dft(&x, forward), naive(&x, forward));
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g.re - w.re).abs() < 1e-9 * n as f64
                            && (g.im - w.im).abs() < 1e-9 * n as f64,
                        "n={n}: {g:?} vs {w:?}"
                    );
                }
            }
        }
    }
}
