//! `linear`, and `mm`/`addmm` with a frozen right operand (GPT-2's `Conv1D` is
//! `addmm(bias, x, w)`), on pt2web's packed GEMM ([`super::sgemm`]) with the weights packed
//! into B panels once per session (kept by [`crate::plan::Prepared`]): no run repacks them,
//! where the `gemm` crate packs both operands on every call. The bias and a fused activation
//! ([`TileAct`], when the node is a fused epilogue's producer) are applied to each block of
//! the result as the GEMM finishes it, while it is in cache.
//!
//! Taken for f32 products of at least [`FAST_GEMM_WORK`] multiply-adds over two or more rows
//! whose weight is frozen state; a single row is a matrix-vector product (`gemv` streams the
//! weights as they lie), and everything else runs through [`super::matmul_impl`].

#![cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]

use super::gemm::{gemm_threads, with_contiguous, FAST_GEMM_WORK};
use super::sgemm::{self, Lines, Packed, Post, Strided};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::epilogue::{Bias, TileAct};
use crate::ops::OpCtx;

/// Whether linear layers take this path on this CPU: where pt2web's GEMM runs at all
/// (`PT2WEB_CPU_LINEAR=crate` keeps them on the `gemm` crate).
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        sgemm::available() && std::env::var("PT2WEB_CPU_LINEAR").unwrap_or_default() != "crate"
    })
}

/// How a frozen weight holds the product's right operand B (k x n).
#[derive(Clone, Copy)]
pub(super) enum Weight<'a> {
    /// `linear`'s `[n, k]` weight, argument `weight`: B = wᵀ.
    Linear(&'a Tensor),
    /// The `[k, n]` right operand of `mm`/`addmm` (argument `mat2`) or `matmul` (`other`):
    /// B = w.
    Right(&'a Tensor, &'static str),
}

/// `x @ B + bias` on the packed path, or `None` when it does not apply (see the module doc).
/// `bias` holds n values (`[n]` or `[1, n]`), added to every row.
pub(super) fn packed_linear(
    ctx: &mut OpCtx,
    x: &Tensor,
    weight: Weight,
    bias: Option<&Tensor>,
) -> Result<Option<Tensor>> {
    let (w, arg, transposed) = match weight {
        Weight::Linear(w) => (w, "weight", true),
        Weight::Right(w, arg) => (w, arg, false),
    };
    let Some(isa) = sgemm::isa() else {
        return Ok(None);
    };
    if !enabled() || x.dtype != DType::F32 || w.dtype != DType::F32 || w.rank() != 2 {
        return Ok(None);
    }
    let (n, k) = if transposed {
        (w.sizes[0], w.sizes[1])
    } else {
        (w.sizes[1], w.sizes[0])
    };
    if x.rank() == 0 || x.sizes[x.rank() - 1] != k || n == 0 || k == 0 {
        return Ok(None);
    }
    let m: usize = x.sizes[..x.rank() - 1].iter().product();
    if m < 2 || m.saturating_mul(n).saturating_mul(k) < FAST_GEMM_WORK {
        return Ok(None);
    }
    let bias = match bias {
        None => None,
        Some(b) if b.dtype == DType::F32 && (b.sizes == [n] || b.sizes == [1, n]) => {
            Some(b.to_vec::<f32>())
        }
        Some(_) => return Ok(None),
    };
    let derive = || {
        Ok(with_contiguous::<f32, _>(w, |wv| {
            // B = w^T (k x n), its column j w's row j; or B = w, k rows of n.
            let (rs, cs) = if transposed { (1, k) } else { (n, 1) };
            let b = Lines::cols(Strided {
                p: wv.as_ptr(),
                rs,
                cs,
            });
            // SAFETY: n columns of k steps, w's k x n floats, lie inside `wv`.
            let p = unsafe { Packed::b(isa, &b, n, k) };
            let bytes = p.bytes();
            (p, bytes)
        }))
    };
    // Weights that may change between runs stay on the unpacked path.
    let max = crate::limits::Limits::default().max_tensor_elements;
    let len = m
        .checked_mul(n)
        .filter(|&l| l as u64 <= max)
        .ok_or_else(|| {
            ctx.err(format!(
                "the output of input {:?} and weight {:?} has more than {max} elements",
                x.sizes, w.sizes
            ))
        })?;
    let Some(pw) = ctx.prepared(arg, w, derive)? else {
        return Ok(None);
    };
    let act = ctx.state.tile_act.take();
    let threads = gemm_threads(m, n, k, true);
    let bias = bias.as_deref();
    let post = move |p: *mut f32, rs: usize, [_, c0]: [usize; 2], [rows, cols]: [usize; 2]| {
        let bias = bias.map_or(Bias::None, |b| Bias::Cols(&b[c0..c0 + cols]));
        // SAFETY: the GEMM hands each finished block of C to one call: `rows` rows of
        // `cols` floats, `rs` apart.
        unsafe { TileAct::bias_then(act, bias, p, rs, [rows, cols]) }
    };
    let post: Post = (act.is_some() || bias.is_some())
        .then_some(&post as &(dyn Fn(*mut f32, usize, [usize; 2], [usize; 2]) + Sync));
    let mut out = Vec::<f32>::with_capacity(len);
    with_contiguous::<f32, _>(x, |xv| {
        let a = Lines::rows(Strided {
            p: xv.as_ptr(),
            rs: k,
            cs: 1,
        });
        // SAFETY: A is m rows of k floats (`xv`, contiguous), B the n packed columns of k
        // steps; C is `out`'s m x n floats, written before read (beta = 0), and does not
        // overlap either; `isa` is this CPU's.
        unsafe {
            sgemm::sgemm_panels(
                isa,
                m,
                n,
                k,
                &a,
                &*pw,
                out.as_mut_ptr(),
                n,
                1.0,
                0.0,
                threads,
                post,
            )
        };
    });
    // SAFETY: the GEMM wrote all m x n floats.
    unsafe { out.set_len(len) };
    let mut sizes = x.sizes.clone();
    *sizes.last_mut().expect("rank >= 1") = n;
    Ok(Some(Tensor::from_vec(out, &sizes)))
}
