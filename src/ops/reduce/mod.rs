//! Op family: reductions (sum, mean, prod, min/max and their indices, var/std, any/all, norms,
//! logsumexp, count_nonzero), softmax/log_softmax and cumulative scans.
//!
//! Every reduction gathers its input so that the elements reduced into one output element are
//! contiguous (kept dims first, reduced dims last); the kernels then work on plain lanes. Float
//! sums accumulate in f64 (torch's CPU accumulation type for float is double for scans and
//! close to it for cascade sums); f16/bf16 inputs compute in f32/f64 and round once at the end.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

mod basic;
pub(crate) mod histogram;
mod scan;
mod segment;
pub(crate) mod softmax;
mod stats;

use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;

pub(crate) fn register(r: &mut OpTable) {
    meta::register(r);
    basic::register(r);
    stats::register(r);
    softmax::register(r);
    scan::register(r);
    histogram::register(r);
    segment::register(r);
}

/// Which dims a reduction folds, from an optional dim list. `None` (and, for most ops, an empty
/// list) means every dim; `empty_is_none` keeps torch's `any.dims`/`all.dims` rule where `[]`
/// reduces nothing.
pub(crate) fn reduce_mask(
    ctx: &OpCtx,
    dims: Option<&[i64]>,
    rank: usize,
    empty_is_none: bool,
) -> Result<Vec<bool>> {
    let Some(dims) = dims else {
        return Ok(vec![true; rank]);
    };
    if dims.is_empty() {
        return Ok(vec![!empty_is_none; rank]);
    }
    let mut mask = vec![false; rank];
    for &d in dims {
        let w = super::util::wrap_dim(ctx, d, rank)?;
        if rank == 0 {
            continue;
        }
        if mask[w] {
            return Err(ctx.err(format!(
                "dim {d} appears multiple times in the list of dims"
            )));
        }
        mask[w] = true;
    }
    Ok(mask)
}

/// The dims a reduction folds and whether they stay as size-1 dims, parsed once from the
/// node (`dim`: absent, an int or a list; `keepdim`) and shared by the CPU kernels, the shape
/// rules and the GPU kernels. An absent or empty `dim` folds every dim, except for `any` and
/// `all`, which fold nothing over `[]` (torch's `any.dims` / `all.dims`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reduction {
    pub mask: Vec<bool>,
    pub keepdim: bool,
}

impl Reduction {
    pub fn parse(ctx: &OpCtx, rank: usize) -> Result<Reduction> {
        let t = ctx.target();
        let empty_is_none = t.starts_with("aten.any.") || t.starts_with("aten.all.");
        let dims = ctx.opt_ints("dim")?;
        Ok(Reduction {
            mask: reduce_mask(ctx, dims.as_deref(), rank, empty_is_none)?,
            keepdim: ctx.bool_or("keepdim", false)?,
        })
    }
    /// The output's sizes for an input of `sizes`.
    pub fn out_sizes(&self, sizes: &[usize]) -> Vec<usize> {
        reduced_sizes(sizes, &self.mask, self.keepdim)
    }
}

/// The output sizes of a reduction over `mask`.
pub(crate) fn reduced_sizes(sizes: &[usize], mask: &[bool], keepdim: bool) -> Vec<usize> {
    sizes
        .iter()
        .zip(mask)
        .filter_map(|(&s, &m)| match (m, keepdim) {
            (false, _) => Some(s),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// The input's elements reordered so that each output element's reduced elements form one
/// contiguous lane: returns (data, number of lanes, lane length).
pub(crate) fn gather_lanes<T: Elem>(t: &Tensor, mask: &[bool]) -> (Vec<T>, usize, usize) {
    let mut sizes = Vec::with_capacity(t.rank());
    let mut strides = Vec::with_capacity(t.rank());
    for pass in [false, true] {
        for ((&s, &st), &m) in t.sizes.iter().zip(&t.strides).zip(mask) {
            if m == pass {
                sizes.push(s);
                strides.push(st);
            }
        }
    }
    let lane: usize = t
        .sizes
        .iter()
        .zip(mask)
        .filter(|(_, &m)| m)
        .map(|(s, _)| *s)
        .product();
    let lanes: usize = t
        .sizes
        .iter()
        .zip(mask)
        .filter(|(_, &m)| !m)
        .map(|(s, _)| *s)
        .product();
    let data = t.view_with(sizes, strides, t.offset).to_vec::<T>();
    (data, lanes, lane)
}

/// A contiguous tensor of `dtype` from values computed in `T` (no copy when `T` is `dtype`).
pub(crate) fn typed<T: Elem>(v: Vec<T>, sizes: &[usize], dtype: DType) -> Result<Tensor> {
    let t = Tensor::from_vec(v, sizes);
    if T::DTYPE == dtype {
        Ok(t)
    } else {
        t.to_dtype(dtype)
    }
}

/// Error when a reduction without an identity (max, min, argmax...) folds an empty dim.
pub(crate) fn check_nonempty(
    ctx: &OpCtx,
    name: &str,
    sizes: &[usize],
    mask: &[bool],
) -> Result<()> {
    for (i, (&s, &m)) in sizes.iter().zip(mask).enumerate() {
        if m && s == 0 {
            return Err(ctx.err(format!(
                "{name}(): Expected reduction dim {i} to have non-zero size."
            )));
        }
    }
    Ok(())
}

/// (outer, n, inner) for an op applied along `dim` of a contiguous tensor of `sizes`.
pub(crate) fn split_at_dim(sizes: &[usize], dim: usize) -> (usize, usize, usize) {
    if sizes.is_empty() {
        return (1, 1, 1);
    }
    (
        sizes[..dim].iter().product(),
        sizes[dim],
        sizes[dim + 1..].iter().product(),
    )
}

/// Apply `f` to every lane along the middle axis of a contiguous (outer, n, inner) buffer.
/// Lanes with `inner == 1` are processed in place; others are gathered into a scratch buffer.
pub(crate) fn for_each_lane<T: Copy>(
    data: &mut [T],
    (outer, n, inner): (usize, usize, usize),
    mut f: impl FnMut(&mut [T]),
) {
    if n == 0 {
        return;
    }
    if inner == 1 {
        data.chunks_exact_mut(n).for_each(f);
        return;
    }
    let mut buf: Vec<T> = Vec::with_capacity(n);
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            buf.clear();
            buf.extend((0..n).map(|j| data[base + j * inner]));
            f(&mut buf);
            for (j, &v) in buf.iter().enumerate() {
                data[base + j * inner] = v;
            }
        }
    }
}

/// The float type a float tensor computes in: f64 for f64, f32 for f32/f16/bf16 (torch's
/// "opmath" type on CPU). `None` for integer and bool tensors.
pub(crate) fn compute_float(d: DType) -> Option<DType> {
    match d {
        DType::F64 => Some(DType::F64),
        DType::F32 | DType::F16 | DType::BF16 => Some(DType::F32),
        _ => None,
    }
}

/// Error unless `d` is a floating dtype (ops like mean/var/norm have no integer kernels).
pub(crate) fn need_float(ctx: &OpCtx, what: &str, d: DType) -> Result<()> {
    if d.is_float() && compute_float(d).is_some() {
        Ok(())
    } else {
        Err(ctx.err(format!("{what}: input dtype should be floating point (float32, float64, float16 or bfloat16), got {d}")))
    }
}

/// Float arithmetic shared by the kernels of this family and of norm/attention/rnn, in the
/// compute type (f32 or f64).
pub(crate) trait Real:
    Elem
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
    + std::ops::MulAssign
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INF: Self;
    fn exp(self) -> Self;
    /// `x = exp(x - m)` over a slice (softmax's exponentials).
    fn exp_shifted_each(x: &mut [Self], m: Self);
    fn ln(self) -> Self;
    fn tanh(self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! real_impl {
    ($t:ty, exp: $exp:path, exp_shifted: $exps:path) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INF: Self = <$t>::NEG_INFINITY;
            #[inline]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn exp_shifted_each(x: &mut [Self], m: Self) {
                $exps(x, m)
            }
            #[inline]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}
// f32 exp is the vectorizable Cephes form (about 1 ulp, as torch's SLEEF-based softmax);
// f64 uses libm.
real_impl!(f32, exp: crate::ops::elementwise::fast::exp_f32,
    exp_shifted: crate::ops::elementwise::fast::exp_shifted_f32);
real_impl!(f64, exp: f64::exp, exp_shifted: exp_shifted_f64);

fn exp_shifted_f64(x: &mut [f64], m: f64) {
    x.iter_mut().for_each(|v| *v = (*v - m).exp());
}

/// Run `$body` with `$R` bound to the compute float type of `$dtype` (f64 or f32).
macro_rules! with_real {
    ($dtype:expr, $R:ident => $body:expr) => {
        if $dtype == $crate::DType::F64 {
            type $R = f64;
            $body
        } else {
            type $R = f32;
            $body
        }
    };
}
pub(crate) use with_real;
