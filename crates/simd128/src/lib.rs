//! The 4 x 8 simd128 GEMM micro-kernel of pt2web's CPU backend on wasm32
//! (`src/ops/matmul/sgemm.rs` drives it), plain and relaxed-SIMD.
//!
//! It is a crate of its own for the relaxed variant. LLVM's WebAssembly backend has no
//! per-function target features: it gives every function of a module (a codegen unit) the
//! union of their features. `#[target_feature(enable = "relaxed-simd")]` on a kernel inside
//! pt2web therefore reached whatever shared its codegen unit, and there LLVM lowers the
//! select-based min/max of `clamp`, ReLU or `exp`'s range reduction to `relaxed_min`/
//! `relaxed_max`, whose NaN results are the engine's choice (NaN through sigmoid gave 1,
//! where torch gives NaN). Here the relaxed kernel is the only function of its module.
//! `scripts/build_wasm.sh` checks the relaxed builds for `relaxed_min`/`relaxed_max`.
#![no_std]

/// Rows of the A panel per block.
pub const MR: usize = 4;
/// Columns of the B panel per block.
pub const NR: usize = 8;

#[cfg(target_arch = "wasm32")]
macro_rules! kernel {
    ($(#[$attr:meta])* $name:ident, $madd:path) => {
        /// `C[mr x nr] = alpha * A·B + beta * C` (C not read when `skip_c`) over packed
        /// panels: A is `kc` columns of [`MR`] values, B `kc` rows of [`NR`]. Per k, two
        /// loads of B and four splats of A into 8 accumulators.
        ///
        /// # Safety
        /// `ap` holds `kc * MR` floats and `bp` `kc * NR`; `c` addresses an `mr x nr` block
        /// with row stride `c_rs`, `mr <= MR`, `nr <= NR`; simd128 is enabled.
        #[allow(clippy::too_many_arguments)]
        $(#[$attr])*
        pub unsafe fn $name(
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
            use core::arch::wasm32::*;
            // The accumulators are named, not an array indexed in a loop: a build that does
            // not unroll loops (opt-level "z") would keep an array in memory.
            let z = f32x4_splat(0.0);
            let (mut c00, mut c01, mut c10, mut c11) = (z, z, z, z);
            let (mut c20, mut c21, mut c30, mut c31) = (z, z, z, z);
            for _ in 0..kc {
                let b0 = v128_load(bp as *const v128);
                let b1 = v128_load(bp.add(4) as *const v128);
                macro_rules! row {
                    ($i:literal, $x0:ident, $x1:ident) => {
                        let ai = v128_load32_splat(ap.add($i) as *const u32);
                        $x0 = $madd(ai, b0, $x0);
                        $x1 = $madd(ai, b1, $x1);
                    };
                }
                row!(0, c00, c01);
                row!(1, c10, c11);
                row!(2, c20, c21);
                row!(3, c30, c31);
                ap = ap.add(MR);
                bp = bp.add(NR);
            }
            let acc = [[c00, c01], [c10, c11], [c20, c21], [c30, c31]];
            let va = f32x4_splat(alpha);
            let vb = f32x4_splat(beta);
            for (i, row) in acc.iter().enumerate().take(mr) {
                let p = c.add(i * c_rs);
                let mut v = [f32x4_mul(va, row[0]), f32x4_mul(va, row[1])];
                if nr == NR {
                    if !skip_c {
                        v[0] = f32x4_add(v[0], f32x4_mul(vb, v128_load(p as *const v128)));
                        v[1] = f32x4_add(v[1], f32x4_mul(vb, v128_load(p.add(4) as *const v128)));
                    }
                    v128_store(p as *mut v128, v[0]);
                    v128_store(p.add(4) as *mut v128, v[1]);
                } else {
                    let mut t = [0.0f32; NR];
                    v128_store(t.as_mut_ptr() as *mut v128, v[0]);
                    v128_store(t.as_mut_ptr().add(4) as *mut v128, v[1]);
                    for (j, &x) in t.iter().enumerate().take(nr) {
                        let d = p.add(j);
                        *d = if skip_c { x } else { x + beta * *d };
                    }
                }
            }
        }
    };
}

/// A multiply then an add, each rounded (the `gemm` crate's simd128 kernel rounds alike).
#[cfg(target_arch = "wasm32")]
#[inline(always)]
fn mul_add(
    a: core::arch::wasm32::v128,
    b: core::arch::wasm32::v128,
    c: core::arch::wasm32::v128,
) -> core::arch::wasm32::v128 {
    use core::arch::wasm32::*;
    f32x4_add(c, f32x4_mul(a, b))
}

#[cfg(target_arch = "wasm32")]
kernel!(
    #[inline(always)]
    kernel,
    mul_add
);

// One multiply-add, fused where the CPU has FMA (so the last bit may differ between engines).
// Only for engines that validate relaxed SIMD: pt2web's relaxed builds (pkg/relaxed/,
// pkg/threads-relaxed/), which js/index.js loads there.
#[cfg(target_arch = "wasm32")]
kernel!(
    #[inline(never)]
    #[target_feature(enable = "relaxed-simd")]
    kernel_relaxed,
    core::arch::wasm32::f32x4_relaxed_madd
);
