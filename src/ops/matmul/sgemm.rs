//! A packed single-precision GEMM for x86-64 CPUs with AVX-512F or AVX2+FMA, the
//! instruction set chosen at run time ([`isa`]), and for WebAssembly with `simd128`;
//! elsewhere it declines and the `gemm` crate runs.
//!
//! The `gemm` crate's stable build stops at AVX2 and packs both operands on every call; a
//! convolution's weights are the same on every run. This is the BLIS algorithm, with
//! operands that may come packed already ([`Packed`]: weights packed once per session) or
//! be packed from anything that can produce panels ([`Panels`]: a strided matrix, an image
//! unfolded as it is packed):
//! - B is packed per (KC x NC) block into panels of NR columns (k-major, zero-padded past
//!   N), A per (MC x KC) block into panels of MR rows (k-major, zero-padded past M);
//! - the microkernel keeps an MR x NR block of C in registers: AVX-512 12 x 32 in 24 zmm
//!   (per k: two 16-wide loads of B, 12 broadcasts of A, 24 FMAs), AVX2 6 x 16 in 12 ymm,
//!   simd128 4 x 8 in 8 v128 (a multiply and an add each: plain simd128 has no FMA; V8
//!   spills from 10 accumulators on, measured 25 GFLOP/s at 6 x 8 against 44 at 4 x 8);
//! - C is updated once per KC block: `alpha * AB + beta * C` on the first (C not read when
//!   beta is 0: NaNs in C do not propagate, as BLAS and torch), `+= alpha * AB` after.
//!
//! Threads split the columns of C (or its rows when there are few columns) into contiguous
//! parts, each packed and computed by one thread: no shared state, no barriers.
//! Each output's sum runs over k in order within a KC block, the blocks added in order.

#![cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The instruction set a GEMM runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// 12 x 32 microkernel, 512-bit FMA.
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// 6 x 16 microkernel, 256-bit FMA.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// 4 x 8 microkernel, 128-bit multiply and add (WebAssembly).
    #[cfg(target_arch = "wasm32")]
    Simd128,
}

impl Isa {
    /// The instruction sets of this target, the best first.
    pub(crate) const ALL: &'static [Isa] = &[
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2,
        #[cfg(target_arch = "wasm32")]
        Isa::Simd128,
    ];
    /// Whether this CPU runs it.
    pub(crate) fn supported(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            // Chosen when the module is compiled (.cargo/config.toml): an engine without
            // simd128 rejects the whole module.
            #[cfg(target_arch = "wasm32")]
            Isa::Simd128 => cfg!(target_feature = "simd128"),
        }
    }
    /// (MR, NR, KC): panel widths of A and B, and the depth of a K block.
    pub(crate) fn shape(self) -> (usize, usize, usize) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => (Avx512::MR, Avx512::NR, Avx512::KC),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => (Avx2::MR, Avx2::NR, Avx2::KC),
            #[cfg(target_arch = "wasm32")]
            Isa::Simd128 => (Simd128::MR, Simd128::NR, Simd128::KC),
        }
    }
}

/// The best instruction set this CPU has for [`sgemm`], checked once; `None` (the `gemm`
/// crate runs) without AVX2+FMA or with `PT2WEB_CPU_GEMM=crate`. `PT2WEB_CPU_GEMM=avx2`
/// keeps an AVX-512 CPU on the AVX2 kernel.
pub(crate) fn isa() -> Option<Isa> {
    static ISA: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| {
        let choice = std::env::var("PT2WEB_CPU_GEMM").unwrap_or_default();
        let order: &[Isa] = match choice.as_str() {
            "crate" => &[],
            #[cfg(target_arch = "x86_64")]
            "avx2" => &[Isa::Avx2],
            _ => Isa::ALL,
        };
        order.iter().copied().find(|i| i.supported())
    })
}

/// Whether this CPU runs [`sgemm`].
pub(crate) fn available() -> bool {
    isa().is_some()
}

/// A microkernel and the block sizes that suit it.
trait Micro {
    /// Rows and columns of C per call.
    const MR: usize;
    const NR: usize;
    /// Depth of a packed block (a B panel, KC x NR floats, stays in L1/L2).
    const KC: usize;
    /// Rows of A packed at once (a multiple of MR; MC x KC floats in L2).
    const MC: usize;
    /// Columns of B packed at once (a multiple of NR).
    const NC: usize;
    /// C[0..mr, 0..nr] = alpha * Ap Bp + beta * C over `kc` packed steps; C is not read
    /// when `skip_c` (beta = 0 on the first K block).
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel(
        kc: usize,
        ap: *const f32,
        bp: *const f32,
        c: *mut f32,
        c_rs: usize,
        mr: usize,
        nr: usize,
        alpha: f32,
        beta: f32,
        skip_c: bool,
    );
}

/// `impl Micro` for an instruction set: its block sizes (MR, NR, KC, MC, NC) and the free
/// function that computes a block (free, so that it can carry `#[target_feature]`).
macro_rules! micro {
    ($isa:ident, $mr:expr, $nr:expr, $kc:expr, $mc:expr, $nc:expr, $kernel:ident) => {
        impl Micro for $isa {
            const MR: usize = $mr;
            const NR: usize = $nr;
            const KC: usize = $kc;
            const MC: usize = $mc;
            const NC: usize = $nc;
            unsafe fn kernel(
                kc: usize,
                ap: *const f32,
                bp: *const f32,
                c: *mut f32,
                c_rs: usize,
                mr: usize,
                nr: usize,
                alpha: f32,
                beta: f32,
                skip_c: bool,
            ) {
                $kernel(kc, ap, bp, c, c_rs, mr, nr, alpha, beta, skip_c)
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
struct Avx512;
#[cfg(target_arch = "x86_64")]
struct Avx2;
#[cfg(target_arch = "wasm32")]
struct Simd128;

/// A strided f32 matrix: element (i, j) at `p + i * rs + j * cs`.
#[derive(Clone, Copy)]
pub(crate) struct Strided {
    pub p: *const f32,
    pub rs: usize,
    pub cs: usize,
}

/// One side of the product as the kernel reads it: `w`-wide panels of lines (A's rows, B's
/// columns), `kc` steps deep, k-major (see [`pack`]).
pub(crate) trait Panels: Sync {
    /// The panels of lines `l0..l0 + len` (`l0` a multiple of `w`) over steps
    /// `k0..k0 + kc` (`k0` a multiple of the ISA's KC, `kc` = min(KC, k - k0)), packed into
    /// `buf` (at least `len.div_ceil(w) * w * kc` long) or found already packed.
    ///
    /// # Safety
    /// The lines and steps must lie inside the matrix the source describes.
    unsafe fn panels(
        &self,
        w: usize,
        l0: usize,
        len: usize,
        k0: usize,
        kc: usize,
        buf: &mut [f32],
    ) -> *const f32;
}

/// A strided matrix read along lines: line i, step k at `p + i * along + k * step` (A's
/// rows: `along` = rs, `step` = cs; B's columns: `along` = cs, `step` = rs).
#[derive(Clone, Copy)]
pub(crate) struct Lines {
    p: *const f32,
    along: usize,
    step: usize,
}

impl Lines {
    /// The rows of `a` (the left operand).
    pub(crate) fn rows(a: Strided) -> Lines {
        Lines {
            p: a.p,
            along: a.rs,
            step: a.cs,
        }
    }
    /// The columns of `b` (the right operand).
    pub(crate) fn cols(b: Strided) -> Lines {
        Lines {
            p: b.p,
            along: b.cs,
            step: b.rs,
        }
    }
}

impl Panels for Lines {
    unsafe fn panels(
        &self,
        w: usize,
        l0: usize,
        len: usize,
        k0: usize,
        kc: usize,
        buf: &mut [f32],
    ) -> *const f32 {
        pack(
            w,
            len,
            kc,
            self.p.add(l0 * self.along + k0 * self.step),
            self.along,
            self.step,
            buf,
        );
        buf.as_ptr()
    }
}

/// A matrix packed once (a convolution's or linear layer's weights, packed when the session
/// first runs the node): for each K block, all its panels, so any range of whole panels of
/// any K block is a slice of it and no run repacks.
pub(crate) struct Packed {
    data: Vec<f32>,
    /// The panel width and K block of the instruction set and side it was packed for.
    w: usize,
    kb: usize,
    /// Lines (rows of A or columns of B) and steps of the matrix.
    lines: usize,
    k: usize,
}

impl Packed {
    /// Pack `lines` x `k` of `src` as the left operand (A) of [`sgemm_panels`] on `isa`.
    ///
    /// # Safety
    /// Every line and step must lie inside the matrix `src` describes.
    pub(crate) unsafe fn a(isa: Isa, src: &Lines, lines: usize, k: usize) -> Packed {
        let (mr, _, kb) = isa.shape();
        Packed::new(mr, kb, src, lines, k)
    }

    /// Pack `lines` x `k` of `src` as the right operand (B) of a product on `isa`: panels
    /// of NR lines (a linear layer's outputs, a direct convolution's output channels).
    ///
    /// # Safety
    /// Every line and step must lie inside the matrix `src` describes.
    pub(crate) unsafe fn b(isa: Isa, src: &Lines, lines: usize, k: usize) -> Packed {
        let (_, nr, kb) = isa.shape();
        Packed::new(nr, kb, src, lines, k)
    }

    unsafe fn new(w: usize, kb: usize, src: &Lines, lines: usize, k: usize) -> Packed {
        let pad = lines.div_ceil(w) * w;
        let mut data = vec![0.0f32; pad * k];
        let mut k0 = 0;
        while k0 < k {
            let kc = kb.min(k - k0);
            src.panels(w, 0, lines, k0, kc, &mut data[k0 * pad..(k0 + kc) * pad]);
            k0 += kb;
        }
        Packed {
            data,
            w,
            kb,
            lines,
            k,
        }
    }
    /// The panel width it was packed with.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn width(&self) -> usize {
        self.w
    }
    /// The depth of its K blocks.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn depth(&self) -> usize {
        self.kb
    }
    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len() * 4
    }
}

impl Panels for Packed {
    unsafe fn panels(
        &self,
        w: usize,
        l0: usize,
        len: usize,
        k0: usize,
        kc: usize,
        _buf: &mut [f32],
    ) -> *const f32 {
        assert!(
            w == self.w
                && k0.is_multiple_of(self.kb)
                && l0 + len <= self.lines
                && k0 + kc <= self.k,
            "packed operand read outside its layout"
        );
        let pad = self.lines.div_ceil(w) * w;
        self.data.as_ptr().add(k0 * pad + l0 * kc)
    }
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
unsafe impl Send for Lines {}
unsafe impl Sync for Lines {}
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
    let Some(isa) = isa() else { return };
    sgemm_panels(
        isa,
        m,
        n,
        k,
        &Lines::rows(a),
        &Lines::cols(b),
        c,
        c_rs,
        alpha,
        beta,
        threads,
        None,
    )
}

/// Columns of C per call of the epilogue ([`Post`]).
const POST_COLS: usize = 256;

/// An elementwise epilogue applied to each finished block of C, right after its last K block
/// (while the block is in cache): called with the block's first element, C's row stride, the
/// block's first row and column in C, and its rows and columns.
pub(crate) type Post<'a> =
    Option<&'a (dyn Fn(*mut f32, usize, [usize; 2], [usize; 2]) + Sync + 'a)>;

/// [`sgemm`] on `isa` over any panel sources: weights packed for `isa`, an image unfolded
/// as it is packed; `post` is applied to each finished tile of C.
///
/// # Safety
/// As [`sgemm`]: `a` must hold m lines and `b` n lines of k steps; `isa` must be supported.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_panels<A: Panels, B: Panels>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &A,
    b: &B,
    c: *mut f32,
    c_rs: usize,
    alpha: f32,
    beta: f32,
    threads: usize,
    post: Post,
) {
    let c = Out { p: c, rs: c_rs };
    let ab = [alpha, beta];
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => threaded::<Avx512, A, B>(m, n, k, a, b, c, ab, threads, post),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => threaded::<Avx2, A, B>(m, n, k, a, b, c, ab, threads, post),
        #[cfg(target_arch = "wasm32")]
        Isa::Simd128 => threaded::<Simd128, A, B>(m, n, k, a, b, c, ab, threads, post),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn threaded<M: Micro, A: Panels, B: Panels>(
    m: usize,
    n: usize,
    k: usize,
    a: &A,
    b: &B,
    out: Out,
    [alpha, beta]: [f32; 2],
    threads: usize,
    post: Post,
) {
    if m == 0 || n == 0 {
        return;
    }
    let threads = threads.max(1);
    let n_panels = n.div_ceil(M::NR);
    let m_panels = m.div_ceil(M::MR);
    if threads == 1 || (n_panels < 2 && m_panels < 2) {
        // SAFETY: as the caller promised.
        unsafe { serial::<M, A, B>([0, m], [0, n], k, a, b, out, alpha, beta, post) };
        return;
    }
    // Split the dimension with more panels into `parts` contiguous ranges of whole panels.
    let split_n = n_panels >= threads * 2 || n_panels >= m_panels;
    let panels = if split_n { n_panels } else { m_panels };
    let parts = threads.min(panels);
    let per = panels.div_ceil(parts);
    let part = move |t: usize| {
        // The whole value, so the closure captures the Send wrapper, not its pointer field.
        let out = out;
        let (lo, hi) = (t * per, ((t + 1) * per).min(panels));
        if lo >= hi {
            return;
        }
        let (rows, cols) = if split_n {
            ([0, m], [lo * M::NR, (hi * M::NR).min(n)])
        } else {
            ([lo * M::MR, (hi * M::MR).min(m)], [0, n])
        };
        // SAFETY: each part is a disjoint block of C's rows or columns inside the checked
        // bounds; A and B are only read.
        unsafe { serial::<M, A, B>(rows, cols, k, a, b, out, alpha, beta, post) }
    };
    super::gemm::fork_each(0..parts, |t, _| part(t));
}

thread_local! {
    /// Packing buffers, kept per thread between calls.
    static PACK: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// One thread's GEMM over rows `rows[0]..rows[1]` and columns `cols[0]..cols[1]` of C (both
/// starting on a panel boundary; see the module doc).
#[allow(clippy::too_many_arguments)]
unsafe fn serial<M: Micro, A: Panels, B: Panels>(
    rows: [usize; 2],
    cols: [usize; 2],
    k: usize,
    a: &A,
    b: &B,
    c: Out,
    alpha: f32,
    beta: f32,
    post: Post,
) {
    let [i0, i1] = rows;
    let [j0, j1] = cols;
    if k == 0 {
        // C = beta * C (alpha * AB is zero).
        for i in i0..i1 {
            let row = c.p.add(i * c.rs);
            for j in j0..j1 {
                let x = row.add(j);
                *x = if beta == 0.0 { 0.0 } else { beta * *x };
            }
        }
        if let Some(post) = post {
            post(c.p.add(i0 * c.rs + j0), c.rs, [i0, j0], [i1 - i0, j1 - j0]);
        }
        return;
    }
    PACK.with(|bufs| {
        let mut bufs = bufs.borrow_mut();
        let (pa, pb) = &mut *bufs;
        let kc_max = k.min(M::KC);
        // Grown, never shrunk: a shrink and regrow would zero the same memory again on
        // every call of alternating sizes (the panels are always written before read).
        let need_a = M::MC.min((i1 - i0).div_ceil(M::MR) * M::MR) * kc_max;
        let need_b = M::NC.min((j1 - j0).div_ceil(M::NR) * M::NR) * kc_max;
        if pa.len() < need_a {
            pa.resize(need_a, 0.0);
        }
        if pb.len() < need_b {
            pb.resize(need_b, 0.0);
        }
        let mut jc = j0;
        while jc < j1 {
            let nc = M::NC.min(j1 - jc);
            let mut pc = 0;
            while pc < k {
                let kc = M::KC.min(k - pc);
                let bpanels = b.panels(M::NR, jc, nc, pc, kc, pb);
                // The first K block applies beta; later ones add to what it wrote.
                let (first, beta_here) = if pc == 0 { (true, beta) } else { (false, 1.0) };
                let mut ic = i0;
                while ic < i1 {
                    let mc = M::MC.min(i1 - ic);
                    let apanels = a.panels(M::MR, ic, mc, pc, kc, pa);
                    let (mut jr, mut jpost) = (0, 0);
                    while jr < nc {
                        let nr = M::NR.min(nc - jr);
                        let bp = bpanels.add(jr * kc);
                        let mut ir = 0;
                        while ir < mc {
                            let mr = M::MR.min(mc - ir);
                            let ap = apanels.add(ir * kc);
                            let cp = c.p.add((ic + ir) * c.rs + jc + jr);
                            M::kernel(
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
                            ir += M::MR;
                        }
                        jr += M::NR;
                        // The epilogue over the block's finished rows every POST_COLS
                        // columns (still in cache, rows long enough for whole vectors): per
                        // micro tile, its calls cost a fifth of a pointwise convolution.
                        if let (Some(post), true) = (post, pc + kc == k) {
                            let j = jr.min(nc);
                            if j - jpost >= POST_COLS || j == nc {
                                let at = c.p.add(ic * c.rs + jc + jpost);
                                post(at, c.rs, [ic, jc + jpost], [mc, j - jpost]);
                                jpost = j;
                            }
                        }
                    }
                    ic += M::MC;
                }
                pc += M::KC;
            }
            jc += M::NC;
        }
    });
}

/// Write the transpose of the 4 x 4 block at `src` (rows `src_rs` apart) to `dst` (rows
/// `dst_rs` apart).
///
/// # Safety
/// Both blocks lie inside live allocations.
#[inline(always)]
unsafe fn transpose4(src: *const f32, src_rs: usize, dst: *mut f32, dst_rs: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        // SSE is part of x86-64's baseline.
        let (a, b) = (_mm_loadu_ps(src), _mm_loadu_ps(src.add(src_rs)));
        let (c, d) = (
            _mm_loadu_ps(src.add(2 * src_rs)),
            _mm_loadu_ps(src.add(3 * src_rs)),
        );
        let (t0, t1) = (_mm_unpacklo_ps(a, b), _mm_unpacklo_ps(c, d));
        let (t2, t3) = (_mm_unpackhi_ps(a, b), _mm_unpackhi_ps(c, d));
        _mm_storeu_ps(dst, _mm_movelh_ps(t0, t1));
        _mm_storeu_ps(dst.add(dst_rs), _mm_movehl_ps(t1, t0));
        _mm_storeu_ps(dst.add(2 * dst_rs), _mm_movelh_ps(t2, t3));
        _mm_storeu_ps(dst.add(3 * dst_rs), _mm_movehl_ps(t3, t2));
    }
    #[cfg(target_arch = "wasm32")]
    {
        use std::arch::wasm32::*;
        let ld = |r: usize| v128_load(src.add(r * src_rs) as *const v128);
        let (a, b, c, d) = (ld(0), ld(1), ld(2), ld(3));
        let (t0, t1) = (
            i32x4_shuffle::<0, 4, 1, 5>(a, b),
            i32x4_shuffle::<0, 4, 1, 5>(c, d),
        );
        let (t2, t3) = (
            i32x4_shuffle::<2, 6, 3, 7>(a, b),
            i32x4_shuffle::<2, 6, 3, 7>(c, d),
        );
        let st = |r: usize, v: v128| v128_store(dst.add(r * dst_rs) as *mut v128, v);
        st(0, i32x4_shuffle::<0, 1, 4, 5>(t0, t1));
        st(1, i32x4_shuffle::<2, 3, 6, 7>(t0, t1));
        st(2, i32x4_shuffle::<0, 1, 4, 5>(t2, t3));
        st(3, i32x4_shuffle::<2, 3, 6, 7>(t2, t3));
    }
}

/// Pack `len` lines x `kc` steps of a matrix into panels of `w` lines, k-major: panel p
/// holds, for each k, the `w` values at line p*w + i (zeros past `len`). Line i, step k is
/// at `p + i * along + k * step`. A packs its rows (`along` = rs, `step` = cs), B its columns
/// (`along` = cs, `step` = rs); lines next to each other in memory are copied whole.
unsafe fn pack(
    w: usize,
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
        let lines = w.min(len - l0);
        if along == 1 && lines == w {
            for kk in 0..kc {
                std::ptr::copy_nonoverlapping(p.add(kk * step + l0), dst.as_mut_ptr().add(o), w);
                o += w;
            }
        } else if step == 1 && lines == w && w.is_multiple_of(4) {
            // Each line is contiguous along k (B's columns of a transposed weight, A's rows
            // of a row-major matrix): a transpose, by 4 x 4 tiles.
            let d = dst.as_mut_ptr().add(o);
            let full = kc / 4 * 4;
            for k0 in (0..full).step_by(4) {
                for i0 in (0..w).step_by(4) {
                    let src = p.add((l0 + i0) * along + k0);
                    transpose4(src, along, d.add(k0 * w + i0), w);
                }
            }
            for kk in full..kc {
                for i in 0..w {
                    *d.add(kk * w + i) = *p.add((l0 + i) * along + kk);
                }
            }
            o += kc * w;
        } else {
            for kk in 0..kc {
                for i in 0..w {
                    *dst.get_unchecked_mut(o + i) = if i < lines {
                        *p.add((l0 + i) * along + kk * step)
                    } else {
                        0.0
                    };
                }
                o += w;
            }
        }
        l0 += w;
    }
}

#[cfg(target_arch = "x86_64")]
micro!(Avx512, 12, 32, 384, 240, 3072, kernel_avx512);

#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn kernel_avx512(
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
    const MR: usize = Avx512::MR;
    const NR: usize = Avx512::NR;
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

#[cfg(target_arch = "x86_64")]
micro!(Avx2, 6, 16, 256, 144, 4080 / 16 * 16, kernel_avx2);

/// A lane mask of the first `n` (0..=8) of 8 lanes, for `_mm256_mask{load,store}_ps`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lanes(n: usize) -> __m256i {
    const IDX: [i32; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n as i32),
        _mm256_loadu_si256(IDX.as_ptr() as *const __m256i),
    )
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2(
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
    const MR: usize = Avx2::MR;
    const NR: usize = Avx2::NR;
    let z = _mm256_setzero_ps();
    let mut acc = [[z; 2]; MR];
    for _ in 0..kc {
        let b0 = _mm256_loadu_ps(bp);
        let b1 = _mm256_loadu_ps(bp.add(8));
        for (i, row) in acc.iter_mut().enumerate() {
            let ai = _mm256_broadcast_ss(&*ap.add(i));
            row[0] = _mm256_fmadd_ps(ai, b0, row[0]);
            row[1] = _mm256_fmadd_ps(ai, b1, row[1]);
        }
        ap = ap.add(MR);
        bp = bp.add(NR);
    }
    let va = _mm256_set1_ps(alpha);
    let vb = _mm256_set1_ps(beta);
    let full = nr == NR;
    let (m0, m1) = (lanes(nr.min(8)), lanes(nr.saturating_sub(8)));
    for (i, row) in acc.iter().enumerate().take(mr) {
        let p = c.add(i * c_rs);
        let mut v0 = _mm256_mul_ps(va, row[0]);
        let mut v1 = _mm256_mul_ps(va, row[1]);
        if full {
            if !skip_c {
                v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(p), v0);
                v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(p.add(8)), v1);
            }
            _mm256_storeu_ps(p, v0);
            _mm256_storeu_ps(p.add(8), v1);
        } else {
            if !skip_c {
                v0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(p, m0), v0);
                v1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(p.add(8), m1), v1);
            }
            _mm256_maskstore_ps(p, m0, v0);
            _mm256_maskstore_ps(p.add(8), m1, v1);
        }
    }
}

#[cfg(target_arch = "wasm32")]
micro!(
    Simd128,
    pt2web_simd128::MR,
    pt2web_simd128::NR,
    256,
    72,
    4096,
    kernel_simd128
);

/// The 4 x 8 block, in crate `pt2web-simd128` (crates/simd128): its relaxed-SIMD variant
/// (`--cfg pt2web_relaxed_simd`, the builds pkg/relaxed/ and pkg/threads-relaxed/ of
/// `scripts/build_wasm.sh`) must be compiled apart from the rest of pt2web (that crate says why).
#[cfg(target_arch = "wasm32")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn kernel_simd128(
    kc: usize,
    ap: *const f32,
    bp: *const f32,
    c: *mut f32,
    c_rs: usize,
    mr: usize,
    nr: usize,
    alpha: f32,
    beta: f32,
    skip_c: bool,
) {
    #[cfg(not(pt2web_relaxed_simd))]
    use pt2web_simd128::kernel;
    #[cfg(pt2web_relaxed_simd)]
    use pt2web_simd128::kernel_relaxed as kernel;
    kernel(kc, ap, bp, c, c_rs, mr, nr, alpha, beta, skip_c)
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
    /// splits, transposed A, A packed once) against a float64 reference, on every
    /// instruction set this CPU has.
    #[test]
    fn matches_a_reference_at_every_edge() {
        for &isa in Isa::ALL {
            if isa.supported() {
                every_edge(isa);
            }
        }
    }

    fn every_edge(isa: Isa) {
        let mut seed = 1u32;
        let mut rnd = move || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        for &(m, n, k) in &[
            (1, 1, 1),
            (13, 33, 7),
            (12, 32, 385),
            (7, 17, 300),
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
                    // B given transposed too (a linear layer's weight): lines contiguous
                    // along k, packed by transposes.
                    let bt: Vec<f32> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
                    for (ap, rs, cs, prepacked, b_t) in [
                        (&a, k, 1, false, false),
                        (&at, 1, m, false, false),
                        (&a, k, 1, true, false),
                        (&a, k, 1, false, true),
                    ] {
                        let mut got = c0.clone();
                        let a = Lines::rows(Strided {
                            p: ap.as_ptr(),
                            rs,
                            cs,
                        });
                        let b = Lines::cols(if b_t {
                            Strided {
                                p: bt.as_ptr(),
                                rs: 1,
                                cs: k,
                            }
                        } else {
                            Strided {
                                p: b.as_ptr(),
                                rs: n,
                                cs: 1,
                            }
                        });
                        let (c, c_rs) = (got.as_mut_ptr(), n);
                        unsafe {
                            if prepacked {
                                // With an epilogue that negates each finished tile: every
                                // element must be negated exactly once.
                                let a = Packed::a(isa, &a, m, k);
                                let origin = c as usize;
                                let neg =
                                    |p: *mut f32,
                                     rs: usize,
                                     at: [usize; 2],
                                     [rows, cols]: [usize; 2]| {
                                        let want = origin + (at[0] * c_rs + at[1]) * 4;
                                        assert_eq!(p as usize, want, "tile origin");
                                        for r in 0..rows {
                                            for j in 0..cols {
                                                *p.add(r * rs + j) = -*p.add(r * rs + j);
                                            }
                                        }
                                    };
                                sgemm_panels(
                                    isa,
                                    m,
                                    n,
                                    k,
                                    &a,
                                    &b,
                                    c,
                                    c_rs,
                                    alpha,
                                    beta,
                                    threads,
                                    Some(&neg),
                                );
                            } else {
                                sgemm_panels(
                                    isa, m, n, k, &a, &b, c, c_rs, alpha, beta, threads, None,
                                );
                            }
                        }
                        for (x, (g, w)) in got.iter().zip(&want).enumerate() {
                            let w = if prepacked { -*w } else { *w };
                            let tol = 1e-5 * (k as f32).sqrt() * 4.0 + 1e-6;
                            assert!((g - w).abs() <= tol, "{isa:?} m{m} n{n} k{k} alpha {alpha} beta {beta} threads {threads} rs {rs} packed {prepacked} b^T {b_t}: [{x}] {g} vs {w}");
                        }
                    }
                }
            }
        }
    }
}
