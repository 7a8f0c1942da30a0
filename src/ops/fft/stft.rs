//! `stft` (both overloads: `center` with its `pad_mode`, or the already padded signal of the
//! training IR) and `istft` (overlap-add with the window envelope), as torch computes them:
//! frames of `n_fft` samples every `hop_length`, multiplied by the window (zero-padded to
//! `n_fft`, centered), one DFT each; `normalized` scales by `1/√n_fft`.

use super::engine;
use crate::cpu::complex::{complex_dtype, real_dtype};
use crate::cpu::{Tensor, C128};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::complex::{complex_tensor, real_tensor};
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;
use std::ops::{Add, Mul};

pub(super) fn register(r: &mut OpTable) {
    r.define_complex("aten.stft.default", stft, super::meta::stft);
    r.define_complex("aten.stft.center", stft, super::meta::stft);
    r.define_complex("aten.istft.default", istft, super::meta::istft);
}

/// Framing shared by `stft` and `istft`.
#[derive(Debug, Clone, PartialEq)]
struct Frames {
    n_fft: usize,
    hop: usize,
    win_length: usize,
    center: bool,
    normalized: bool,
    onesided: bool,
}

impl Frames {
    fn parse(
        ctx: &OpCtx,
        op: &str,
        center_default: bool,
        onesided_default: bool,
    ) -> Result<Frames> {
        let n_fft = ctx.int("n_fft")?;
        if n_fft <= 0 {
            return Err(ctx.err(format!("{op}: expected 0 < n_fft, but got n_fft={n_fft}")));
        }
        let hop = ctx.opt_int("hop_length")?.unwrap_or(n_fft / 4);
        if hop <= 0 {
            return Err(ctx.err(format!(
                "{op}: expected hop_length > 0, but got hop_length={hop}"
            )));
        }
        let win_length = ctx.opt_int("win_length")?.unwrap_or(n_fft);
        if win_length <= 0 || win_length > n_fft {
            return Err(ctx.err(format!(
                "{op}: expected 0 < win_length <= n_fft, but got win_length={win_length}"
            )));
        }
        Ok(Frames {
            n_fft: n_fft as usize,
            hop: hop as usize,
            win_length: win_length as usize,
            center: ctx.bool_or("center", center_default)?,
            normalized: ctx.bool_or("normalized", false)?,
            onesided: ctx.bool_or("onesided", onesided_default)?,
        })
    }

    /// The window zero-padded to `n_fft`, centered (ones when absent).
    fn window(&self, ctx: &OpCtx, op: &str) -> Result<Vec<C128>> {
        let mut w = vec![C128::default(); self.n_fft];
        let left = (self.n_fft - self.win_length) / 2;
        match ctx.opt_tensor("window")? {
            Some(t) => {
                if t.sizes != [self.win_length] {
                    return Err(ctx.err(format!(
                        "{op}: expected a 1D window tensor of size equal to win_length={}, but got window with size {:?}",
                        self.win_length, t.sizes
                    )));
                }
                for (i, v) in t.to_vec::<C128>().into_iter().enumerate() {
                    w[left + i] = v;
                }
            }
            None => w[left..left + self.win_length].fill(C128::new(1.0, 0.0)),
        }
        Ok(w)
    }
}

/// One `stft`, parsed once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StftPlan {
    frames: Frames,
    reflect: bool,
    batch: Option<usize>,
    len: usize,
    return_complex: bool,
    pub out_dtype: DType,
}

impl StftPlan {
    pub(crate) fn parse(ctx: &OpCtx, sizes: &[usize], dtype: DType) -> Result<StftPlan> {
        let complex_in = dtype.is_complex();
        let frames = Frames::parse(ctx, "stft", false, !complex_in)?;
        if complex_in && frames.onesided {
            return Err(ctx.err("stft: Cannot have onesided output if window or input is complex"));
        }
        let (batch, len) = match sizes {
            [l] => (None, *l),
            [b, l] => (Some(*b), *l),
            _ => {
                return Err(ctx.err(format!(
                    "stft: expected a 1D or 2D tensor, got shape {sizes:?}"
                )))
            }
        };
        let reflect = match ctx.opt_str("pad_mode")?.as_deref() {
            None | Some("reflect") => true,
            Some("constant") => false,
            Some(other) => {
                return Err(ctx.err(format!(
                    "stft: pad_mode '{other}' is not supported (reflect or constant)"
                )))
            }
        };
        let return_complex = match ctx.opt_int("return_complex")? {
            Some(b) => b != 0,
            None if complex_in => true,
            None => {
                return Err(
                    ctx.err("stft requires the return_complex parameter be given for real inputs")
                )
            }
        };
        let plan = StftPlan {
            frames,
            reflect,
            batch,
            len,
            return_complex,
            out_dtype: if return_complex {
                complex_dtype(float_of(dtype))
            } else {
                real_dtype(float_of(dtype))
            },
        };
        let padded = plan.padded_len();
        if padded < plan.frames.n_fft {
            return Err(ctx.err(format!(
                "stft: expected 0 < n_fft <= {padded}, but got n_fft={}",
                plan.frames.n_fft
            )));
        }
        if plan.frames.center && plan.reflect && plan.frames.n_fft / 2 >= len.max(1) {
            return Err(ctx.err(format!(
                "stft: reflect padding of {} needs a signal longer than that (length {len})",
                plan.frames.n_fft / 2
            )));
        }
        Ok(plan)
    }

    fn padded_len(&self) -> usize {
        if self.frames.center {
            self.len + 2 * (self.frames.n_fft / 2)
        } else {
            self.len
        }
    }
    fn n_frames(&self) -> usize {
        1 + (self.padded_len() - self.frames.n_fft) / self.frames.hop
    }
    fn bins(&self) -> usize {
        if self.frames.onesided {
            self.frames.n_fft / 2 + 1
        } else {
            self.frames.n_fft
        }
    }
    pub(crate) fn out_sizes(&self) -> Vec<usize> {
        let mut s: Vec<usize> = self.batch.into_iter().collect();
        s.extend([self.bins(), self.n_frames()]);
        if !self.return_complex {
            s.push(2);
        }
        s
    }

    fn run(&self, ctx: &OpCtx, x: &Tensor) -> Result<Tensor> {
        let f = &self.frames;
        let window = f.window(ctx, "stft")?;
        let signal = x.to_vec::<C128>();
        let (nb, nf, bins) = (self.batch.unwrap_or(1), self.n_frames(), self.bins());
        let pad = if f.center { f.n_fft / 2 } else { 0 };
        let scale = if f.normalized {
            1.0 / (f.n_fft as f64).sqrt()
        } else {
            1.0
        };
        // out[b][k][t]
        let mut out = vec![C128::default(); nb * bins * nf];
        let mut frame = vec![C128::default(); f.n_fft];
        for b in 0..nb {
            let sig = &signal[b * self.len..(b + 1) * self.len];
            let sample = |i: usize| -> C128 {
                // Index i of the padded signal.
                let j = i as i64 - pad as i64;
                let n = self.len as i64;
                let j = if (0..n).contains(&j) {
                    j
                } else if self.reflect {
                    if j < 0 {
                        -j
                    } else {
                        2 * (n - 1) - j
                    }
                } else {
                    return C128::default();
                };
                sig[j as usize]
            };
            for t in 0..nf {
                for (i, v) in frame.iter_mut().enumerate() {
                    *v = sample(t * f.hop + i).mul(window[i]);
                }
                let spec = engine::dft(&frame, true);
                for k in 0..bins {
                    out[(b * bins + k) * nf + t] = spec[k].scale(scale);
                }
            }
        }
        let mut sizes: Vec<usize> = self.batch.into_iter().collect();
        sizes.extend([bins, nf]);
        let dtype = complex_dtype(self.out_dtype);
        let c = complex_tensor(dtype, out, &sizes)?;
        if self.return_complex {
            Ok(c)
        } else {
            c.view_as_real()
        }
    }
}

fn float_of(d: DType) -> DType {
    if d.is_float() || d.is_complex() {
        d
    } else {
        DType::F32
    }
}

fn stft(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let plan = StftPlan::parse(ctx, &x.sizes, x.dtype)?;
    Ok(vec![RValue::Tensor(plan.run(ctx, &x)?)])
}

/// One `istft`, parsed once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IstftPlan {
    frames: Frames,
    batch: Option<usize>,
    bins: usize,
    n_frames: usize,
    length: Option<usize>,
    return_complex: bool,
    pub out_dtype: DType,
}

impl IstftPlan {
    pub(crate) fn parse(ctx: &OpCtx, sizes: &[usize], dtype: DType) -> Result<IstftPlan> {
        if !dtype.is_complex() {
            return Err(ctx.err(format!(
                "istft requires a complex-valued input tensor, got {dtype}"
            )));
        }
        let (batch, bins, n_frames) = match sizes {
            [k, t] => (None, *k, *t),
            [b, k, t] => (Some(*b), *k, *t),
            _ => {
                return Err(ctx.err(format!(
                    "istft: expected a 2D or 3D complex tensor, got shape {sizes:?}"
                )))
            }
        };
        let n_fft = ctx.int("n_fft")?.max(1) as usize;
        let frames = Frames::parse(ctx, "istft", true, bins != n_fft)?;
        if frames.hop > frames.win_length {
            return Err(ctx.err(format!(
                "istft: expected 0 < hop_length <= win_length, but got hop_length={} and win_length={}",
                frames.hop, frames.win_length
            )));
        }
        let want = if frames.onesided {
            n_fft / 2 + 1
        } else {
            n_fft
        };
        if bins != want {
            return Err(ctx.err(format!(
                "istft: expected the frequency dimension (size {bins}) to be {want} (n_fft={n_fft}, onesided={})",
                frames.onesided
            )));
        }
        if n_frames == 0 {
            return Err(ctx.err("istft: expected at least one frame"));
        }
        let return_complex = ctx.bool_or("return_complex", false)?;
        if return_complex && frames.onesided {
            return Err(ctx.err(
                "istft: cannot have onesided output if window or input is complex (return_complex=True)",
            ));
        }
        let length = ctx.opt_int("length")?.map(|l| l.max(0) as usize);
        Ok(IstftPlan {
            frames,
            batch,
            bins,
            n_frames,
            length,
            return_complex,
            out_dtype: if return_complex {
                dtype
            } else {
                real_dtype(dtype)
            },
        })
    }

    fn expected_len(&self) -> usize {
        let f = &self.frames;
        let full = f.n_fft + f.hop * (self.n_frames - 1);
        match self.length {
            Some(l) => l,
            None if f.center => full - 2 * (f.n_fft / 2),
            None => full,
        }
    }

    pub(crate) fn out_sizes(&self) -> Vec<usize> {
        let mut s: Vec<usize> = self.batch.into_iter().collect();
        s.push(self.expected_len());
        s
    }

    fn run(&self, ctx: &OpCtx, x: &Tensor) -> Result<Tensor> {
        let f = &self.frames;
        let window = f.window(ctx, "istft")?;
        let spec = x.to_vec::<C128>();
        let (nb, nf, bins, n) = (self.batch.unwrap_or(1), self.n_frames, self.bins, f.n_fft);
        let full = n + f.hop * (nf - 1);
        let start = if f.center { n / 2 } else { 0 };
        let len = self.expected_len();
        let scale = if f.normalized { (n as f64).sqrt() } else { 1.0 };
        // The window envelope: Σ w² over the frames covering each sample.
        let mut env = vec![0.0f64; full];
        for t in 0..nf {
            for (i, w) in window.iter().enumerate() {
                env[t * f.hop + i] += w.mul(*w).re;
            }
        }
        let mut out = Vec::with_capacity(nb * len);
        let mut frame = vec![C128::default(); n];
        for b in 0..nb {
            let mut y = vec![C128::default(); full];
            for t in 0..nf {
                // The frame's full spectrum (Hermitian from the one-sided half).
                for (k, v) in frame.iter_mut().enumerate() {
                    *v = if k < bins {
                        spec[(b * bins + k) * nf + t]
                    } else if f.onesided {
                        spec[(b * bins + (n - k)) * nf + t].conj()
                    } else {
                        C128::default()
                    };
                }
                if f.onesided {
                    // c2r ignores the imaginary parts of the DC (and Nyquist) bins.
                    frame[0].im = 0.0;
                    if n % 2 == 0 {
                        frame[n / 2].im = 0.0;
                    }
                }
                let sig = engine::dft(&frame, false);
                for (i, s) in sig.iter().enumerate() {
                    let v = s.scale(scale / n as f64).mul(window[i]);
                    y[t * f.hop + i] = y[t * f.hop + i].add(v);
                }
            }
            for i in 0..len {
                let j = start + i;
                if j >= full {
                    out.push(C128::default());
                    continue;
                }
                if env[j].abs() < 1e-11 {
                    return Err(ctx.err(super::ISTFT_NOLA));
                }
                out.push(y[j].scale(1.0 / env[j]));
            }
        }
        let sizes = self.out_sizes();
        if self.return_complex {
            complex_tensor(self.out_dtype, out, &sizes)
        } else {
            real_tensor(
                self.out_dtype,
                out.into_iter().map(|z| z.re).collect(),
                &sizes,
            )
        }
    }
}

fn istft(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    let plan = IstftPlan::parse(ctx, &x.sizes, x.dtype)?;
    Ok(vec![RValue::Tensor(plan.run(ctx, &x)?)])
}
