//! The GEMM under matmul and conv: a bounds-checked wrapper over the `gemm` crate (packed,
//! SIMD; rayon threads on native, simd128 on wasm32), an exact integer GEMM, a batched
//! matmul over strided (possibly broadcast) tensors, and a helper that spreads independent
//! chunks of work over threads on native.

use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Element types the SIMD GEMM computes in.
pub(crate) trait Float:
    Elem
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    /// Whether this is f32 (the type of pt2web's own GEMM, `sgemm.rs`).
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "wasm32")),
        allow(dead_code)
    )]
    const IS_F32: bool;
    fn of(v: f64) -> Self;
    fn floor(self) -> Self;
    fn abs(self) -> Self;
    /// Round half to even (C's nearbyint in the default rounding mode).
    fn round_even(self) -> Self;
    fn to_isize(self) -> isize;
    /// `self * a + b` rounded once: one instruction in code compiled with FMA, a slow
    /// library call elsewhere (call it only from FMA code).
    fn fused_mul_add(self, a: Self, b: Self) -> Self;
}

impl Float for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const IS_F32: bool = true;
    #[inline(always)]
    fn fused_mul_add(self, a: f32, b: f32) -> f32 {
        f32::mul_add(self, a, b)
    }
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn floor(self) -> f32 {
        f32::floor(self)
    }
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    fn round_even(self) -> f32 {
        f32::round_ties_even(self)
    }
    fn to_isize(self) -> isize {
        // Saturating, NaN -> 0: coordinates far outside any tensor stay outside.
        self as isize
    }
}

impl Float for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const IS_F32: bool = false;
    #[inline(always)]
    fn fused_mul_add(self, a: f64, b: f64) -> f64 {
        f64::mul_add(self, a, b)
    }
    fn of(v: f64) -> f64 {
        v
    }
    fn floor(self) -> f64 {
        f64::floor(self)
    }
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    fn round_even(self) -> f64 {
        f64::round_ties_even(self)
    }
    fn to_isize(self) -> isize {
        // Saturating, NaN -> 0: coordinates far outside any tensor stay outside.
        self as isize
    }
}

/// A strided matrix inside a slice: element (i, j) is `data[off + i * rs + j * cs]`.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a, T> {
    pub data: &'a [T],
    pub off: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a, T> Mat<'a, T> {
    pub fn new(data: &'a [T], off: usize, rs: usize, cs: usize) -> Self {
        Mat { data, off, rs, cs }
    }
}

/// True when a rows×cols matrix at `off` with strides (rs, cs) lies inside `len` elements.
fn fits(len: usize, off: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    let last = (rows - 1)
        .checked_mul(rs)
        .and_then(|x| (cols - 1).checked_mul(cs).and_then(|y| x.checked_add(y)))
        .and_then(|x| x.checked_add(off));
    last.is_some_and(|l| l < len)
}

fn oob(what: &str) -> Error {
    Error::op(
        "gemm",
        format!("{what} matrix lies outside its storage (a bug in the caller's strides)"),
    )
}

/// Threads available to kernels: on wasm32, the calling thread and the Web Workers started by
/// the multi-threaded build ([`set_wasm_threads`]), else 1.
pub(crate) fn num_threads() -> usize {
    #[cfg(target_arch = "wasm32")]
    {
        WASM_THREADS
            .load(std::sync::atomic::Ordering::Relaxed)
            .max(1)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        // PT2WEB_NUM_THREADS caps the threads (benchmarks, hosts sharing their cores).
        static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *N.get_or_init(|| {
            let avail = std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1);
            std::env::var("PT2WEB_NUM_THREADS")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|&n| n > 0)
                .unwrap_or(avail)
        })
    }
}

/// The threads kernels split over once the page has started rayon's pool (0: none, run on one
/// thread).
#[cfg(target_arch = "wasm32")]
static WASM_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Record that kernels now split over `n` threads: the calling thread and the `n − 1` of rayon's
/// pool (the multi-threaded wasm build, after `initThreadPool`).
#[cfg(all(target_arch = "wasm32", feature = "threads"))]
pub(crate) fn set_wasm_threads(n: usize) {
    WASM_THREADS.store(n, std::sync::atomic::Ordering::Relaxed);
}

/// From this many multiply-adds on, an f32 GEMM takes pt2web's packed kernel where it runs
/// (below, the `gemm` crate's unpacked small-matrix paths).
#[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
pub(crate) const FAST_GEMM_WORK: usize = 1 << 14;

/// Below this many multiply-adds a GEMM runs on one thread: spawning costs more than it saves.
const PAR_GEMM_WORK: usize = 1 << 18;

/// Threads a GEMM of this size may use (1: run it on the calling thread).
pub(crate) fn gemm_threads(m: usize, n: usize, k: usize, threads: bool) -> usize {
    if threads && num_threads() > 1 && m.saturating_mul(n).saturating_mul(k) >= PAR_GEMM_WORK {
        num_threads()
    } else {
        1
    }
}

/// The `gemm` crate's threads for a product: none on wasm32, where its rayon split would
/// park the calling thread (the page's main thread, which can only spin) next to the workers;
/// f32 products there run on [`super::sgemm`], which splits with [`fork_each`].
fn parallelism(m: usize, n: usize, k: usize, threads: bool) -> gemm::Parallelism {
    #[cfg(not(target_arch = "wasm32"))]
    if gemm_threads(m, n, k, threads) > 1 {
        // rayon's threads need the cores pt2web's idle workers spin on.
        crate::cpu::pool::rest();
        return gemm::Parallelism::Rayon(num_threads());
    }
    let _ = (m, n, k, threads);
    gemm::Parallelism::None
}

/// Whether products of two plain matrices take pt2web's GEMM ([`super::sgemm`]): on AVX-512
/// and simd128. On AVX2 the crate is as fast on them (measured at MiniLM's and 1024^3
/// shapes); pt2web's GEMM wins there only with weights packed once (convolutions, and
/// linear layers: `linear.rs`).
#[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
fn own_plain_gemm() -> bool {
    use super::sgemm::Isa;
    match super::sgemm::isa() {
        #[cfg(target_arch = "x86_64")]
        Some(Isa::Avx512) => true,
        #[cfg(target_arch = "wasm32")]
        Some(Isa::Simd128) => true,
        _ => false,
    }
}

/// `c = beta * c + alpha * (a @ b)` for an m×k `a`, a k×n `b` and an m×n `c` whose element
/// (i, j) is `c[c_off + i * c_rs + j * c_cs]`. With `beta == 0`, `c` is not read, so NaNs in
/// it do not propagate (BLAS and torch `addmm` semantics). `threads`: may use the thread
/// pool (false when the caller already runs on several threads).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<T: Float>(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<T>,
    b: Mat<T>,
    c: &mut [T],
    c_off: usize,
    c_rs: usize,
    c_cs: usize,
    alpha: T,
    beta: T,
    threads: bool,
) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if !fits(c.len(), c_off, m, n, c_rs, c_cs) {
        return Err(oob("output"));
    }
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                let x = &mut c[c_off + i * c_rs + j * c_cs];
                *x = if beta == T::ZERO { T::ZERO } else { beta * *x };
            }
        }
        return Ok(());
    }
    if !fits(a.data.len(), a.off, m, k, a.rs, a.cs) {
        return Err(oob("left"));
    }
    if !fits(b.data.len(), b.off, k, n, b.rs, b.cs) {
        return Err(oob("right"));
    }
    // Dot products streaming the weights, no packing: one row of A against B's contiguous
    // columns (a linear layer at batch 1), or A's contiguous rows against one column of B (a
    // 1x1 convolution on a 1x1 plane, as in a squeeze-excite block). As (outputs, x, the
    // weights, their line stride, C's output stride).
    #[cfg(target_arch = "x86_64")]
    let dots = if !T::IS_F32 || a.cs != 1 || b.rs != 1 || !super::gemv::available() {
        None
    } else if m == 1 && n.saturating_mul(k) >= FAST_GEMM_WORK {
        Some((n, a, b, b.cs, c_cs))
    } else if n == 1 && m.saturating_mul(k) >= FAST_GEMM_WORK {
        Some((m, b, a, a.rs, c_rs))
    } else {
        None
    };
    #[cfg(target_arch = "x86_64")]
    if let Some((outs, xm, wm, w_rs, c_step)) = dots {
        // T is f32 (IS_F32): the casts only rename the type. The slices start at the
        // checked offsets and hold what the product reads.
        let f = |s: &[T], off: usize| {
            // SAFETY: T is f32, same size and alignment; `off` <= len was checked (fits).
            unsafe { std::slice::from_raw_parts(s.as_ptr().add(off) as *const f32, s.len() - off) }
        };
        let (x, w) = (f(xm.data, xm.off), f(wm.data, wm.off));
        // SAFETY: as above, for the mutable output.
        let cv = unsafe {
            std::slice::from_raw_parts_mut(c.as_mut_ptr().add(c_off) as *mut f32, c.len() - c_off)
        };
        let t = gemm_threads(m, n, k, threads);
        let (alpha, beta) = (alpha.to_f64() as f32, beta.to_f64() as f32);
        super::gemv::gemv(outs, k, x, w, w_rs, cv, c_step, alpha, beta, t);
        return Ok(());
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
    if T::IS_F32
        && (c_cs == 1 || c_rs == 1)
        && m.saturating_mul(n).saturating_mul(k) >= FAST_GEMM_WORK
        && own_plain_gemm()
    {
        let threads = gemm_threads(m, n, k, threads);
        // T is f32 (IS_F32), so these casts only rename the type.
        let pa = super::sgemm::Strided {
            p: a.data.as_ptr().wrapping_add(a.off) as *const f32,
            rs: a.rs,
            cs: a.cs,
        };
        let pb = super::sgemm::Strided {
            p: b.data.as_ptr().wrapping_add(b.off) as *const f32,
            rs: b.rs,
            cs: b.cs,
        };
        let (alpha, beta) = (alpha.to_f64() as f32, beta.to_f64() as f32);
        let pc = c.as_mut_ptr().wrapping_add(c_off) as *mut f32;
        // SAFETY: every element the kernel touches was checked to lie inside its slice above;
        // `c` is borrowed mutably, so it cannot alias `a` or `b`; AVX-512F was detected.
        unsafe {
            if c_cs == 1 {
                super::sgemm::sgemm(m, n, k, pa, pb, pc, c_rs, alpha, beta, threads);
            } else {
                // C column-major: C^T = B^T A^T is row-major.
                let t = |x: super::sgemm::Strided| super::sgemm::Strided {
                    rs: x.cs,
                    cs: x.rs,
                    ..x
                };
                super::sgemm::sgemm(n, m, k, t(pb), t(pa), pc, c_cs, alpha, beta, threads);
            }
        }
        return Ok(());
    }
    let read_dst = beta != T::ZERO;
    // SAFETY: every element the kernel touches was checked to lie inside its slice above; `c`
    // is borrowed mutably, so it cannot alias `a` or `b`; all strides are non-negative.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr().add(c_off),
            c_cs as isize,
            c_rs as isize,
            read_dst,
            a.data.as_ptr().add(a.off),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.off),
            b.cs as isize,
            b.rs as isize,
            // The crate computes dst := alpha * dst + beta * lhs @ rhs: its names are swapped.
            beta,
            alpha,
            false,
            false,
            false,
            parallelism(m, n, k, threads),
        );
    }
    Ok(())
}

/// BLAS-style row-major single-precision GEMM: `c = beta * c + alpha * op(a) @ op(b)`, where
/// `op(x)` is `x` or its transpose. `a` is m×k (k×m when `trans_a`) with leading dimension
/// `lda`; likewise `b` (k×n or n×k) and `c` (m×n, leading dimension `ldc`).
#[allow(clippy::too_many_arguments, dead_code)]
pub(crate) fn sgemm(
    trans_a: bool,
    trans_b: bool,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) -> Result<()> {
    let am = if trans_a {
        Mat::new(a, 0, 1, lda)
    } else {
        Mat::new(a, 0, lda, 1)
    };
    let bm = if trans_b {
        Mat::new(b, 0, 1, ldb)
    } else {
        Mat::new(b, 0, ldb, 1)
    };
    gemm(m, n, k, am, bm, c, 0, ldc, 1, alpha, beta, true)
}

/// Exact integer GEMM with wrapping arithmetic (torch's integer matmul wraps on overflow; a
/// result cast to a narrower type afterwards equals the narrow computation, modulo 2^bits).
/// `c` is m×n row-major: `c = beta * c + alpha * a @ b`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn igemm(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<i64>,
    b: Mat<i64>,
    c: &mut [i64],
    alpha: i64,
    beta: i64,
) -> Result<()> {
    if c.len() < m * n {
        return Err(oob("output"));
    }
    if k > 0
        && (!fits(a.data.len(), a.off, m, k, a.rs, a.cs)
            || !fits(b.data.len(), b.off, k, n, b.rs, b.cs))
    {
        return Err(oob("input"));
    }
    let mut row = vec![0i64; n];
    for i in 0..m {
        row.iter_mut().for_each(|x| *x = 0);
        for p in 0..k {
            let x = a.data[a.off + i * a.rs + p * a.cs];
            let boff = b.off + p * b.rs;
            for (j, r) in row.iter_mut().enumerate() {
                *r = r.wrapping_add(x.wrapping_mul(b.data[boff + j * b.cs]));
            }
        }
        for (j, r) in row.iter().enumerate() {
            let o = &mut c[i * n + j];
            *o = if beta == 0 {
                alpha.wrapping_mul(*r)
            } else {
                beta.wrapping_mul(*o).wrapping_add(alpha.wrapping_mul(*r))
            };
        }
    }
    Ok(())
}

/// Run `f(index, chunk)` over `out.chunks_mut(chunk)`, spread over threads on native when the
/// total work (`work` ≈ operations per chunk) is worth it; in order on one thread otherwise.
// Without threads (wasm32's single-threaded build) the threaded tail is compiled out,
// leaving the early `return` last.
#[allow(clippy::needless_return)]
pub(crate) fn par_chunks<T: Send>(
    out: &mut [T],
    chunk: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if chunk == 0 || out.is_empty() {
        return;
    }
    let n = out.len().div_ceil(chunk);
    let threads = num_threads()
        .min(n)
        .min(n.saturating_mul(work) / (PAR_GEMM_WORK / 4))
        .max(1);
    if threads <= 1 {
        for (i, c) in out.chunks_mut(chunk).enumerate() {
            f(i, c);
        }
        return;
    }
    #[cfg(any(not(target_arch = "wasm32"), feature = "threads"))]
    {
        let per = n.div_ceil(threads);
        fork_each(out.chunks_mut(per * chunk), |t, group| {
            for (i, c) in group.chunks_mut(chunk).enumerate() {
                f(t * per + i, c);
            }
        });
    }
}

/// [`par_chunks`] over two outputs split alike (`chunk_a` and `chunk_b` elements per task),
/// e.g. pooled values and their indices.
// Without threads (wasm32's single-threaded build) the threaded tail is compiled out,
// leaving the early `return` last.
#[allow(clippy::needless_return)]
pub(crate) fn par_chunks2<A: Send, B: Send>(
    a: &mut [A],
    b: &mut [B],
    chunk_a: usize,
    chunk_b: usize,
    work: usize,
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    if chunk_a == 0 || chunk_b == 0 || a.is_empty() {
        return;
    }
    let n = (a.len() / chunk_a).min(b.len() / chunk_b);
    let threads = num_threads()
        .min(n)
        .min(n.saturating_mul(work) / (PAR_GEMM_WORK / 4))
        .max(1);
    if threads <= 1 {
        for (i, (x, y)) in a.chunks_mut(chunk_a).zip(b.chunks_mut(chunk_b)).enumerate() {
            f(i, x, y);
        }
        return;
    }
    #[cfg(any(not(target_arch = "wasm32"), feature = "threads"))]
    {
        let per = n.div_ceil(threads);
        let groups = a.chunks_mut(per * chunk_a).zip(b.chunks_mut(per * chunk_b));
        fork_each(groups, |t, (ga, gb)| {
            for (i, (x, y)) in ga
                .chunks_mut(chunk_a)
                .zip(gb.chunks_mut(chunk_b))
                .enumerate()
            {
                f(t * per + i, x, y);
            }
        });
    }
}

/// `f(t, item)` for each item, the first on the calling thread and the others on the
/// workers, returning when all are done (a panic in any is resumed here). Natively the
/// workers are [`crate::cpu::pool`]'s, which spin a while between splits; when that pool is
/// taken (a nested split, or another session running at once) and on wasm32's threaded
/// build, rayon's: its threads persist and spin a little between tasks, and the calling
/// thread takes a share instead of waiting while a pool thread wakes for it (as
/// `rayon::scope` would).
#[cfg(any(not(target_arch = "wasm32"), feature = "threads"))]
pub(crate) fn fork_each<I: Send>(items: impl Iterator<Item = I>, f: impl Fn(usize, I) + Sync) {
    #[cfg(not(target_arch = "wasm32"))]
    let items = match crate::cpu::pool::fork_each(items.collect(), &f) {
        Ok(()) => return,
        Err(items) => items.into_iter(),
    };
    let f = &f;
    rayon::in_place_scope(|s| {
        let mut first = None;
        for (t, item) in items.enumerate() {
            if t == 0 {
                first = Some(item);
            } else {
                s.spawn(move |_| f(t, item));
            }
        }
        if let Some(item) = first {
            f(0, item);
        }
    });
}

/// [`fork_each`] without threads (wasm32's single-threaded build): the items in order.
#[cfg(all(target_arch = "wasm32", not(feature = "threads")))]
pub(crate) fn fork_each<I: Send>(items: impl Iterator<Item = I>, f: impl Fn(usize, I) + Sync) {
    for (t, item) in items.enumerate() {
        f(t, item);
    }
}

/// An output pointer shared by threads that write disjoint elements of it (the x86-64
/// kernels: `conv/direct.rs`, `gemv.rs`).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct SharedOut(pub(crate) *mut f32);
// SAFETY: users only write disjoint elements from different threads.
#[cfg(target_arch = "x86_64")]
unsafe impl Send for SharedOut {}
#[cfg(target_arch = "x86_64")]
unsafe impl Sync for SharedOut {}

#[cfg(target_arch = "x86_64")]
impl SharedOut {
    /// The element at `i` (a method, so closures capture the whole Send wrapper).
    pub(crate) fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}

/// Call `f` with the elements of `t` in row-major order as `T`: the storage itself when `t`
/// is contiguous and already of type `T` (no copy of weights on every run), else a converted copy.
pub(crate) fn with_contiguous<T: Elem, R>(t: &Tensor, f: impl FnOnce(&[T]) -> R) -> R {
    let n = t.numel();
    if t.dtype == T::DTYPE && t.is_contiguous() {
        let g = t.read();
        if let Some(s) = T::slice(&g) {
            if t.offset + n <= s.len() {
                return f(&s[t.offset..t.offset + n]);
            }
        }
    }
    f(&t.to_vec::<T>())
}

/// Storage offsets of every index of `sizes` (row-major) under `strides`, from `base`.
pub(crate) fn index_offsets(sizes: &[usize], strides: &[usize], base: usize) -> Vec<usize> {
    let n: usize = sizes.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; sizes.len()];
    for _ in 0..n {
        out.push(base + idx.iter().zip(strides).map(|(i, s)| i * s).sum::<usize>());
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// The single stride of dims that can be viewed as one (each stride = next stride × next
/// size, size-1 dims ignored), or None.
fn merged_stride(sizes: &[usize], strides: &[usize]) -> Option<usize> {
    let mut cur: Option<(usize, usize)> = None; // (stride, size) of the innermost kept dim
    for (&sz, &st) in sizes.iter().zip(strides).rev() {
        if sz == 1 {
            continue;
        }
        match cur {
            None => cur = Some((st, sz)),
            Some((s, n)) if st == s * n => cur = Some((s, n * sz)),
            _ => return None,
        }
    }
    Some(cur.map_or(0, |(s, _)| s))
}

/// `alpha * a @ b (+ beta * add)` for `a` of shape [batch.., M, K] and `b` of [batch.., K, N]
/// (identical batch shapes; broadcast batch dims may have stride 0 and are never copied). Both
/// in the compute dtype (f32, f64 or i64); `add`, when given, already has the output shape
/// [batch.., M, N] (a broadcast view is fine). Returns a contiguous tensor of the compute dtype.
pub(crate) fn batched_matmul(
    a: &Tensor,
    b: &Tensor,
    alpha: f64,
    add: Option<(&Tensor, f64)>,
) -> Result<Tensor> {
    match a.dtype {
        DType::F32 => batched_float::<f32>(a, b, alpha, add),
        DType::F64 => batched_float::<f64>(a, b, alpha, add),
        DType::I64 => batched_int(a, b, alpha as i64, add),
        d => Err(Error::op("matmul", format!("internal: compute dtype {d}"))),
    }
}

struct Shape {
    batch: Vec<usize>,
    m: usize,
    k: usize,
    n: usize,
}

fn shape_of(a: &Tensor, b: &Tensor) -> Result<Shape> {
    let (ra, rb) = (a.rank(), b.rank());
    if ra < 2
        || ra != rb
        || a.sizes[..ra - 2] != b.sizes[..rb - 2]
        || a.sizes[ra - 1] != b.sizes[rb - 2]
        || a.dtype != b.dtype
    {
        return Err(Error::op(
            "matmul",
            format!(
                "internal: mismatched operands {:?} and {:?}",
                a.sizes, b.sizes
            ),
        ));
    }
    Ok(Shape {
        batch: a.sizes[..ra - 2].to_vec(),
        m: a.sizes[ra - 2],
        k: a.sizes[ra - 1],
        n: b.sizes[rb - 1],
    })
}

fn initial<T: Elem>(out: &[usize], add: Option<(&Tensor, f64)>) -> Result<(Vec<T>, f64)> {
    match add {
        Some((t, beta)) if beta != 0.0 => Ok((t.expand_to(out)?.to_vec::<T>(), beta)),
        _ => Ok((vec![T::default(); out.iter().product()], 0.0)),
    }
}

fn batched_float<T: Float>(
    a: &Tensor,
    b: &Tensor,
    alpha: f64,
    add: Option<(&Tensor, f64)>,
) -> Result<Tensor> {
    let Shape { batch, m, k, n } = shape_of(a, b)?;
    let mut out_sizes = batch.clone();
    out_sizes.extend([m, n]);
    let (mut c, beta) = initial::<T>(&out_sizes, add)?;
    let (ra, rb) = (a.rank(), b.rank());
    let ga = a.read();
    let gb = b.read();
    let sa = T::slice(&ga).ok_or_else(|| oob("left"))?;
    let sb = T::slice(&gb).ok_or_else(|| oob("right"))?;
    let (alpha, beta) = (T::of(alpha), T::of(beta));
    let (a_rs, a_cs, b_rs, b_cs) = (
        a.strides[ra - 2],
        a.strides[ra - 1],
        b.strides[rb - 2],
        b.strides[rb - 1],
    );
    // One batch-broadcast right operand: fold the batch into M for one large GEMM
    // (x @ W for x of [B, S, K]), when a's batch and row dims form a single stride.
    if b.strides[..rb - 2].iter().all(|&s| s == 0) && !batch.is_empty() {
        if let Some(rs) = merged_stride(&a.sizes[..ra - 1], &a.strides[..ra - 1]) {
            let rows = batch.iter().product::<usize>() * m;
            let rs = if rows <= 1 { a_rs } else { rs };
            return {
                gemm(
                    rows,
                    n,
                    k,
                    Mat::new(sa, a.offset, rs, a_cs),
                    Mat::new(sb, b.offset, b_rs, b_cs),
                    &mut c,
                    0,
                    n,
                    1,
                    alpha,
                    beta,
                    true,
                )?;
                Ok(Tensor::from_vec(c, &out_sizes))
            };
        }
    }
    let a_offs = index_offsets(&batch, &a.strides[..ra - 2], a.offset);
    let b_offs = index_offsets(&batch, &b.strides[..rb - 2], b.offset);
    let per = m * n;
    let many = a_offs.len() >= num_threads() && m * n * k < PAR_GEMM_WORK * 4;
    if many {
        // Many small products (attention heads): one thread per group of batches.
        let err = std::sync::Mutex::new(None);
        par_chunks(&mut c, per.max(1), m * n * k, |i, cc| {
            let r = gemm(
                m,
                n,
                k,
                Mat::new(sa, a_offs[i], a_rs, a_cs),
                Mat::new(sb, b_offs[i], b_rs, b_cs),
                cc,
                0,
                n,
                1,
                alpha,
                beta,
                false,
            );
            if let Err(e) = r {
                *err.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
        });
        if let Some(e) = err.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
    } else {
        for (i, (&ao, &bo)) in a_offs.iter().zip(&b_offs).enumerate() {
            gemm(
                m,
                n,
                k,
                Mat::new(sa, ao, a_rs, a_cs),
                Mat::new(sb, bo, b_rs, b_cs),
                &mut c,
                i * per,
                n,
                1,
                alpha,
                beta,
                true,
            )?;
        }
    }
    Ok(Tensor::from_vec(c, &out_sizes))
}

fn batched_int(a: &Tensor, b: &Tensor, alpha: i64, add: Option<(&Tensor, f64)>) -> Result<Tensor> {
    let Shape { batch, m, k, n } = shape_of(a, b)?;
    let mut out_sizes = batch.clone();
    out_sizes.extend([m, n]);
    let (mut c, beta) = initial::<i64>(&out_sizes, add)?;
    let (ra, rb) = (a.rank(), b.rank());
    let ga = a.read();
    let gb = b.read();
    let sa = i64::slice(&ga).ok_or_else(|| oob("left"))?;
    let sb = i64::slice(&gb).ok_or_else(|| oob("right"))?;
    let a_offs = index_offsets(&batch, &a.strides[..ra - 2], a.offset);
    let b_offs = index_offsets(&batch, &b.strides[..rb - 2], b.offset);
    let per = m * n;
    for (i, (&ao, &bo)) in a_offs.iter().zip(&b_offs).enumerate() {
        let am = Mat::new(sa, ao, a.strides[ra - 2], a.strides[ra - 1]);
        let bm = Mat::new(sb, bo, b.strides[rb - 2], b.strides[rb - 1]);
        igemm(
            m,
            n,
            k,
            am,
            bm,
            &mut c[i * per..(i + 1) * per],
            alpha,
            beta as i64,
        )?;
    }
    Ok(Tensor::from_vec(c, &out_sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    #[test]
    fn sgemm_matches_naive_across_shapes() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (3, 5, 7),
            (17, 33, 65),
            (64, 1, 9),
            (1, 70, 130),
            (128, 96, 40),
            // Single row / single column products large enough for the dot-product path.
            (1, 200, 130),
            (200, 1, 130),
        ] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) / 5.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 5 % 11) as f32 - 5.0) / 3.0)
                .collect();
            let want = naive(m, n, k, &a, &b);
            let mut c = vec![f32::NAN; m * n];
            sgemm(false, false, m, n, k, 1.0, &a, k, &b, n, 0.0, &mut c, n).unwrap();
            for (x, y) in c.iter().zip(&want) {
                assert!(
                    (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                    "{m}x{n}x{k}: {x} vs {y}"
                );
            }
            // Transposed storage of both operands gives the same product.
            let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
            let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
            let mut c2 = vec![1.0; m * n];
            sgemm(true, true, m, n, k, 2.0, &at, m, &bt, k, 0.5, &mut c2, n).unwrap();
            for (x, y) in c2.iter().zip(&want) {
                assert!(
                    (x - (0.5 + 2.0 * y)).abs() <= 1e-3 * (1.0 + y.abs()),
                    "{m}x{n}x{k} transposed"
                );
            }
        }
    }

    #[test]
    fn out_of_bounds_is_an_error() {
        let a = vec![1.0f32; 4];
        let mut c = vec![0.0f32; 4];
        assert!(sgemm(false, false, 2, 2, 3, 1.0, &a, 3, &a, 2, 0.0, &mut c, 2).is_err());
    }

    #[test]
    fn integer_gemm_wraps() {
        let a = vec![i64::MAX, 2];
        let b = vec![2, 1];
        let mut c = vec![0i64; 1];
        igemm(
            1,
            1,
            2,
            Mat::new(&a, 0, 2, 1),
            Mat::new(&b, 0, 1, 1),
            &mut c,
            1,
            0,
        )
        .unwrap();
        assert_eq!(c[0], i64::MAX.wrapping_mul(2).wrapping_add(2));
    }
}
