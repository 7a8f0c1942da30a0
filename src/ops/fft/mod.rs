//! Op family: discrete Fourier transforms on the CPU: core ATen's `_fft_c2c`, `_fft_r2c` and
//! `_fft_c2r`, the training IR's `fft_*` (`fft`, `ifft`, `rfft`, `irfft`, `hfft`, `ihfft` and
//! their `2`/`n` forms, `fftshift`, `ifftshift`), `stft` and `istft` ([`stft`]).
//!
//! Every transform is described once by an [`FftPlan`], parsed from the node's arguments and
//! the input's sizes: the kernel runs it and the shape rule reads its output sizes and dtype.
//! Transforms compute in complex128 with any length ([`engine`]) and round once to the
//! result dtype; normalization follows torch (`norm` "backward" / "forward" / "ortho", or
//! core ATen's mode 0 = none, 1 = 1/√n, 2 = 1/n, n the product of the signal lengths).

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

pub(crate) mod engine;
mod stft;

/// `istft`'s error for a window envelope below 1e-11 somewhere (the NOLA condition fails):
/// the CPU kernel's, and the GPU's through the decomposition's assertion.
pub(crate) const ISTFT_NOLA: &str = "istft: window overlap add min: the window envelope is zero somewhere (check the window and hop_length: NOLA)";

use super::{OpCtx, OpTable};
use crate::cpu::complex::{complex_dtype, real_dtype};
use crate::cpu::{Tensor, C128};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::complex::{complex_tensor, real_tensor};
use crate::ops::util::wrap_dim;
use crate::runtime::RValue;

pub(crate) fn register(r: &mut OpTable) {
    for t in [
        "aten._fft_c2c.default",
        "aten._fft_r2c.default",
        "aten._fft_c2r.default",
    ] {
        r.define_complex(t, fft, meta::fft);
    }
    for op in [
        "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
        "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn",
    ] {
        r.define_complex(&format!("aten.fft_{op}.default"), fft, meta::fft);
    }
    r.define_complex(
        "aten.fft_fftshift.default",
        shift,
        crate::ops::elementwise::meta::same,
    );
    r.define_complex(
        "aten.fft_ifftshift.default",
        shift,
        crate::ops::elementwise::meta::same,
    );
    stft::register(r);
}

/// The normalization of a transform.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Norm {
    None,
    /// 1/√n.
    RootN,
    /// 1/n.
    N,
}

impl Norm {
    /// Core ATen's `normalization` int.
    fn from_mode(ctx: &OpCtx, m: i64) -> Result<Norm> {
        match m {
            0 => Ok(Norm::None),
            1 => Ok(Norm::RootN),
            2 => Ok(Norm::N),
            other => Err(ctx.err(format!("invalid normalization mode {other} (0, 1 or 2)"))),
        }
    }
    /// torch.fft's `norm` string for a transform in direction `forward`.
    fn from_str(ctx: &OpCtx, s: Option<&str>, forward: bool) -> Result<Norm> {
        Ok(match (s.unwrap_or("backward"), forward) {
            ("backward", true) | ("forward", false) => Norm::None,
            ("backward", false) | ("forward", true) => Norm::N,
            ("ortho", _) => Norm::RootN,
            (other, _) => {
                return Err(ctx.err(format!(
                    "Invalid normalization mode: \"{other}\" (expected \"backward\", \"forward\" or \"ortho\")"
                )))
            }
        })
    }
    pub(crate) fn factor(self, n: usize) -> f64 {
        match self {
            Norm::None => 1.0,
            Norm::RootN => 1.0 / (n as f64).sqrt(),
            Norm::N => 1.0 / n as f64,
        }
    }
}

/// What runs over the transformed dims.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    /// Complex to complex over every dim.
    C2C { forward: bool },
    /// Real to complex (forward); the last dim keeps `n/2 + 1` bins when `onesided`.
    R2C { onesided: bool },
    /// Complex (a one-sided last dim) to real (inverse) of `last` samples in the last dim.
    C2R { last: usize },
}

/// One transform, parsed once: what the kernel runs and the rule reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FftPlan {
    /// The input's sizes after torch's resizing to `s` / `n` (zero-padded or trimmed).
    pub resized: Vec<usize>,
    /// Transformed dims in order (the one-sided dim of r2c / c2r last).
    pub dims: Vec<usize>,
    pub kind: Kind,
    /// hfft: conjugate the input; ihfft: conjugate the result.
    pub conj_in: bool,
    pub conj_out: bool,
    pub norm: Norm,
    pub out_sizes: Vec<usize>,
    pub out_dtype: DType,
}

/// The dtype an input is computed as: integers and bool as float32.
fn float_of(d: DType) -> DType {
    if d.is_float() || d.is_complex() {
        d
    } else {
        DType::F32
    }
}

impl FftPlan {
    /// The plan of the node's transform for an input of `sizes` and `dtype`.
    pub(crate) fn parse(ctx: &OpCtx, sizes: &[usize], dtype: DType) -> Result<FftPlan> {
        let op = ctx
            .target()
            .trim_start_matches("aten.")
            .split('.')
            .next()
            .unwrap_or("")
            .to_string();
        let rank = sizes.len();
        let dtype = float_of(dtype);
        if matches!(dtype, DType::F16 | DType::BF16 | DType::ComplexHalf) {
            return Err(ctx.err(format!(
                "{op}: {dtype} inputs are not supported on the CPU (torch's CPU FFT refuses them too); convert to float32"
            )));
        }
        let dims_of = |list: &[i64]| -> Result<Vec<usize>> {
            let d = list
                .iter()
                .map(|&d| wrap_dim(ctx, d, rank))
                .collect::<Result<Vec<_>>>()?;
            let mut seen = d.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != d.len() {
                return Err(ctx.err(format!("{op}: dims must be unique, got {list:?}")));
            }
            Ok(d)
        };
        // Core ATen.
        if let Some(kind) = op.strip_prefix("_fft_") {
            let dims = dims_of(&ctx.ints("dim")?)?;
            let norm = Norm::from_mode(ctx, ctx.int("normalization")?)?;
            let (kind, out_dtype) = match kind {
                "c2c" => (
                    Kind::C2C {
                        forward: ctx.bool_or("forward", true)?,
                    },
                    complex_dtype(dtype),
                ),
                "r2c" => (
                    Kind::R2C {
                        onesided: ctx.bool_or("onesided", true)?,
                    },
                    complex_dtype(dtype),
                ),
                _ => (
                    Kind::C2R {
                        last: ctx.int("last_dim_size")?.max(0) as usize,
                    },
                    real_dtype(dtype),
                ),
            };
            return FftPlan::new(
                ctx,
                &op,
                sizes.to_vec(),
                dims,
                kind,
                norm,
                false,
                false,
                out_dtype,
            );
        }
        let name = op.trim_start_matches("fft_");
        let base = name.trim_end_matches(['2', 'n']);
        let forward = matches!(base, "fft" | "rfft" | "hfft");
        let norm = Norm::from_str(ctx, ctx.opt_str("norm")?.as_deref(), forward)?;
        // Dims and signal sizes: one dim (`n`, `dim`), two (`s`, dim [-2, -1]) or n.
        let (dims, s): (Vec<usize>, Option<Vec<i64>>) = if name == base {
            let d = dims_of(&[ctx.int_or("dim", -1)?])?;
            (d, ctx.opt_int("n")?.map(|n| vec![n]))
        } else {
            let s = ctx.opt_ints("s")?;
            let dim = ctx.opt_ints("dim")?;
            let dims = match (&dim, &s) {
                (Some(d), _) => dims_of(d)?,
                (None, _) if name.ends_with('2') => dims_of(&[-2, -1])?,
                (None, Some(s)) => {
                    let k = s.len().min(rank);
                    (rank - k..rank).collect()
                }
                (None, None) => (0..rank).collect(),
            };
            if let Some(s) = &s {
                if s.len() != dims.len() {
                    return Err(ctx.err(format!(
                        "{op}: When given, dim and shape arguments must have the same length (s {s:?}, dims {dims:?})"
                    )));
                }
            }
            (dims, s)
        };
        if dims.is_empty() && base != "fft" && base != "ifft" {
            return Err(ctx.err(format!("{op}: must transform at least one axis")));
        }
        let real_in = !dtype.is_complex();
        let c2r = matches!(base, "irfft" | "hfft");
        let r2c = matches!(base, "rfft" | "ihfft");
        if r2c && !real_in {
            return Err(ctx.err(format!("{op} expects a real input tensor, but got {dtype}")));
        }
        // Resize the input along the dims (the one-sided dim of c2r to n/2 + 1).
        let mut resized = sizes.to_vec();
        let mut last = 0;
        for (i, &d) in dims.iter().enumerate() {
            let want = s.as_ref().map(|s| s[i]).filter(|&n| n != -1);
            let is_last = i + 1 == dims.len();
            if c2r && is_last {
                last = match want {
                    Some(n) => n,
                    None => 2 * (sizes[d] as i64 - 1),
                };
                if last < 1 {
                    return Err(ctx.err(format!(
                        "{op}: Invalid number of data points ({last}) specified"
                    )));
                }
                resized[d] = last as usize / 2 + 1;
            } else if let Some(n) = want {
                if n < 1 {
                    return Err(ctx.err(format!(
                        "{op}: Invalid number of data points ({n}) specified"
                    )));
                }
                resized[d] = n as usize;
            }
        }
        let (kind, out_dtype) = if c2r {
            (
                Kind::C2R {
                    last: last as usize,
                },
                real_dtype(dtype),
            )
        } else if r2c {
            (Kind::R2C { onesided: true }, complex_dtype(dtype))
        } else {
            (Kind::C2C { forward }, complex_dtype(dtype))
        };
        let (conj_in, conj_out) = (base == "hfft", base == "ihfft");
        FftPlan::new(
            ctx, &op, resized, dims, kind, norm, conj_in, conj_out, out_dtype,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        ctx: &OpCtx,
        op: &str,
        resized: Vec<usize>,
        dims: Vec<usize>,
        kind: Kind,
        norm: Norm,
        conj_in: bool,
        conj_out: bool,
        out_dtype: DType,
    ) -> Result<FftPlan> {
        let mut out_sizes = resized.clone();
        if let Some(&d) = dims.last() {
            match kind {
                Kind::R2C { onesided: true } => out_sizes[d] = resized[d] / 2 + 1,
                Kind::C2R { last } => out_sizes[d] = last,
                _ => {}
            }
        }
        if matches!(kind, Kind::C2R { last: 0 }) || dims.iter().any(|&d| resized[d] == 0) {
            return Err(ctx.err(format!(
                "{op}: Invalid number of data points (0) specified (sizes {resized:?}, dims {dims:?})"
            )));
        }
        Ok(FftPlan {
            resized,
            dims,
            kind,
            conj_in,
            conj_out,
            norm,
            out_sizes,
            out_dtype,
        })
    }

    /// The product of the signal lengths (the `n` of the normalization).
    pub(crate) fn signal_len(&self) -> usize {
        let sig = match self.kind {
            Kind::C2R { .. } => &self.out_sizes,
            _ => &self.resized,
        };
        self.dims.iter().map(|&d| sig[d]).product()
    }

    /// Run the plan on `x`.
    pub(crate) fn run(&self, x: &Tensor) -> Result<Tensor> {
        let x = resize(x, &self.resized)?;
        let mut data = x.to_vec::<C128>();
        if self.conj_in {
            data.iter_mut().for_each(|z| *z = z.conj());
        }
        let sizes = self.resized.clone();
        let (last, rest) = match self.dims.split_last() {
            Some((l, r)) => (Some(*l), r),
            None => (None, &[][..]),
        };
        let (mut data, sizes) = match self.kind {
            Kind::C2C { forward } => {
                for &d in &self.dims {
                    engine::along(&mut data, &sizes, d, forward);
                }
                (data, sizes)
            }
            Kind::R2C { onesided } => {
                // The full transform, then the one-sided bins of the last dim.
                for &d in &self.dims {
                    engine::along(&mut data, &sizes, d, true);
                }
                match (onesided, last) {
                    (true, Some(l)) => (
                        take_prefix(&data, &sizes, l, sizes[l] / 2 + 1),
                        self.out_sizes.clone(),
                    ),
                    _ => (data, sizes),
                }
            }
            Kind::C2R { last: n } => {
                for &d in rest {
                    engine::along(&mut data, &sizes, d, false);
                }
                let l = last.expect("c2r has a last dim");
                let (full, full_sizes) = hermitian(&data, &sizes, l, n);
                let mut full = full;
                engine::along(&mut full, &full_sizes, l, false);
                (full, full_sizes)
            }
        };
        let f = self.norm.factor(self.signal_len());
        if f != 1.0 {
            data.iter_mut().for_each(|z| *z = z.scale(f));
        }
        if self.conj_out {
            data.iter_mut().for_each(|z| *z = z.conj());
        }
        if self.out_dtype.is_complex() {
            complex_tensor(self.out_dtype, data, &sizes)
        } else {
            real_tensor(
                self.out_dtype,
                data.into_iter().map(|z| z.re).collect(),
                &sizes,
            )
        }
    }
}

/// `x` zero-padded or trimmed at the end of each dim to `sizes` (torch's FFT resizing).
fn resize(x: &Tensor, sizes: &[usize]) -> Result<Tensor> {
    if x.sizes == sizes {
        return Ok(x.clone());
    }
    // Trim by a view, then pad by copying into zeros.
    let trimmed: Vec<usize> = x.sizes.iter().zip(sizes).map(|(&a, &b)| a.min(b)).collect();
    let view = x.view_with(trimmed.clone(), x.strides.clone(), x.offset);
    if trimmed == sizes {
        return Ok(view);
    }
    let out = Tensor::zeros(x.dtype, sizes)?;
    let dst = out.view_with(trimmed, out.strides.clone(), 0);
    dst.copy_from(&view)?;
    Ok(out)
}

/// The first `keep` entries of dim `d` of row-major `data`.
fn take_prefix(data: &[C128], sizes: &[usize], d: usize, keep: usize) -> Vec<C128> {
    let n = sizes[d];
    let inner: usize = sizes[d + 1..].iter().product();
    let outer: usize = sizes[..d].iter().product();
    let mut out = Vec::with_capacity(outer * keep * inner);
    for o in 0..outer {
        let base = o * n * inner;
        out.extend_from_slice(&data[base..base + keep * inner]);
    }
    out
}

/// The full Hermitian spectrum of `n` bins along dim `d` from its one-sided half
/// (`X[n-k] = conj(X[k])`; bins past the half that the input lacks are zero).
fn hermitian(data: &[C128], sizes: &[usize], d: usize, n: usize) -> (Vec<C128>, Vec<usize>) {
    let h = sizes[d];
    let inner: usize = sizes[d + 1..].iter().product();
    let outer: usize = sizes[..d].iter().product();
    let mut out_sizes = sizes.to_vec();
    out_sizes[d] = n;
    let mut out = vec![C128::default(); outer * n * inner];
    let half = n / 2 + 1;
    for o in 0..outer {
        for i in 0..inner {
            let src = |k: usize| data[o * h * inner + k * inner + i];
            let dst = |k: usize| o * n * inner + k * inner + i;
            for k in 0..half.min(h) {
                out[dst(k)] = src(k);
            }
            for k in half..n {
                let m = n - k;
                if m < h {
                    out[dst(k)] = src(m).conj();
                }
            }
        }
    }
    (out, out_sizes)
}

fn fft(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    crate::ops::complex::check_stored(ctx, &x, "the input")?;
    let plan = FftPlan::parse(ctx, &x.sizes, x.dtype)?;
    Ok(vec![RValue::Tensor(plan.run(&x)?)])
}

/// `fftshift` / `ifftshift`: a roll by half of each dim in `dim` (all when absent).
fn shift(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let dims: Vec<usize> = match ctx.opt_ints("dim")? {
        Some(d) => d
            .iter()
            .map(|&d| wrap_dim(ctx, d, x.rank()))
            .collect::<Result<_>>()?,
        None => (0..x.rank()).collect(),
    };
    let inverse = ctx.target().contains("ifftshift");
    // Storage offsets of the output's elements in the input: index i reads (i - shift) mod n.
    let mut src = x.clone();
    for &d in &dims {
        let n = src.sizes[d];
        if n == 0 {
            continue;
        }
        let k = if inverse { n - n / 2 } else { n / 2 };
        src = roll(&src, d, k)?;
    }
    Ok(vec![RValue::Tensor(src)])
}

/// `x` rolled by `k` along `d` (element i of the result is element (i - k) mod n of `x`),
/// as the concatenation of two slices, copied.
fn roll(x: &Tensor, d: usize, k: usize) -> Result<Tensor> {
    let n = x.sizes[d];
    let k = k % n.max(1);
    if k == 0 {
        return Ok(x.contiguous());
    }
    let out = Tensor::zeros(x.dtype, &x.sizes)?;
    let part = |t: &Tensor, start: usize, len: usize, st: &[usize]| {
        let mut sizes = t.sizes.clone();
        sizes[d] = len;
        t.view_with(sizes, st.to_vec(), t.offset + start * st[d])
    };
    // out[k..] = x[..n-k]; out[..k] = x[n-k..].
    part(&out, k, n - k, &out.strides).copy_from(&part(x, 0, n - k, &x.strides))?;
    part(&out, 0, k, &out.strides).copy_from(&part(x, n - k, k, &x.strides))?;
    Ok(out)
}
