//! `stft` as torch's own decomposition writes it, so the frames and their FFT run on every
//! backend (the GPU included): frames of the (already centred) signal by `unfold`, times the
//! window zero-padded to `n_fft`, then `_fft_r2c` over the last dim and a transpose to
//! `[..., bins, frames]` (`view_as_real` when `return_complex=False`). Complex signals,
//! `stft.center` (which pads inside the op) and `align_to_window` stay with the CPU kernel
//! (src/ops/fft/stft.rs), which also gives the errors for bad arguments.

use super::{boolean, int, opt_int, opt_tensor, tensor, Builder, DResult};
use crate::dtype::DType;
use crate::program::{Arg, Node, ValueId};

pub(super) fn stft(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let dtype = b.dtype(x)?;
    if !dtype.is_float() {
        return Err(format!("stft of a {dtype} signal"));
    }
    if matches!(n.arg("align_to_window"), Some(Arg::Bool(true))) {
        return Err("align_to_window=True".into());
    }
    let return_complex = match n.arg("return_complex") {
        Some(Arg::Bool(r)) => *r,
        _ => return Err("return_complex is not given".into()),
    };
    let sizes = b.sizes(x)?;
    let len = match sizes[..] {
        [l] | [_, l] => l as i64,
        _ => return Err(format!("stft of a signal of shape {sizes:?}")),
    };
    let n_fft = int(n, "n_fft", None)?;
    let hop = opt_int(n, "hop_length")?.unwrap_or(n_fft / 4);
    let win_length = opt_int(n, "win_length")?.unwrap_or(n_fft);
    if n_fft <= 0 || hop <= 0 || win_length <= 0 || win_length > n_fft || n_fft > len {
        return Err(format!(
            "n_fft {n_fft}, hop_length {hop}, win_length {win_length} for {len} samples"
        ));
    }
    let normalized = boolean(n, "normalized", false)?;
    let onesided = boolean(n, "onesided", true)?;
    let frames = b.t(
        "aten.unfold.default",
        vec![
            ("self", Arg::Tensor(x)),
            ("dimension", Arg::Int(-1)),
            ("size", Arg::Int(n_fft)),
            ("step", Arg::Int(hop)),
        ],
    )?;
    let frames = match padded_window(b, n, n_fft, win_length, dtype)? {
        Some(w) => b.bin("mul", frames, w)?,
        None => frames,
    };
    let last = b.rank(frames)? as i64 - 1;
    let spectrum = b.t(
        "aten._fft_r2c.default",
        vec![
            ("self", Arg::Tensor(frames)),
            ("dim", Arg::Ints(vec![last])),
            // 1: scaled by 1 / sqrt(n) (torch's `normalized`), 0: not scaled.
            ("normalization", Arg::Int(normalized as i64)),
            ("onesided", Arg::Bool(onesided)),
        ],
    )?;
    let out = b.transpose(spectrum, -1, -2)?;
    if return_complex {
        return Ok(vec![Arg::Tensor(out)]);
    }
    Ok(vec![Arg::Tensor(b.un("view_as_real", out)?)])
}

/// The window (ones when absent) centred in `n_fft` zeros; None for no window at all
/// (`win_length == n_fft`).
fn padded_window(
    b: &mut Builder,
    n: &Node,
    n_fft: i64,
    win_length: i64,
    dtype: DType,
) -> DResult<Option<ValueId>> {
    let left = (n_fft - win_length) / 2;
    let pad = [left, n_fft - win_length - left];
    let window = match opt_tensor(n, "window")? {
        Some(w) if b.sizes(w)? == [win_length as usize] && b.dtype(w)? == dtype => w,
        Some(_) => {
            return Err("a window that is not 1-D of win_length in the signal's dtype".into())
        }
        None if win_length == n_fft => return Ok(None),
        None => b.full(&[win_length], 1.0, dtype)?,
    };
    if pad == [0, 0] {
        return Ok(Some(window));
    }
    b.t(
        "aten.constant_pad_nd.default",
        vec![
            ("self", Arg::Tensor(window)),
            ("pad", Arg::Ints(pad.to_vec())),
            ("value", Arg::Float(0.0)),
        ],
    )
    .map(Some)
}

/// Overlap-add of `frames` (`[batch, n_frames, n_fft]`, one every `hop` samples) into
/// `[batch, len]`: `col2im` of the `[batch, n_fft, n_frames]` columns into a one-row image.
fn overlap_add(
    b: &mut Builder,
    frames: ValueId,
    n_fft: i64,
    hop: i64,
    len: i64,
) -> DResult<ValueId> {
    let batch = b.sizes(frames)?[0] as i64;
    let cols = b.transpose(frames, 1, 2)?;
    let image = b.t(
        "aten.col2im.default",
        vec![
            ("self", Arg::Tensor(cols)),
            ("output_size", Arg::Ints(vec![1, len])),
            ("kernel_size", Arg::Ints(vec![1, n_fft])),
            ("dilation", Arg::Ints(vec![1, 1])),
            ("padding", Arg::Ints(vec![0, 0])),
            ("stride", Arg::Ints(vec![1, hop])),
        ],
    )?;
    b.reshape(image, &[batch, len])
}

/// `istft` as torch computes it (aten/src/ATen/native/SpectralOps.cpp), so it runs on every
/// backend: the frames' inverse real FFT (`_fft_c2r`; a two-sided spectrum is cut to its
/// first `n_fft / 2 + 1` bins first, as torch does), times the window, overlap-added
/// (`col2im`), the centre trimmed, divided by the overlap-added squared window (the
/// envelope), zero-padded to `length`. An envelope below 1e-11 in the kept range is torch's
/// "window overlap add min" error: for a window the graph computes, an
/// `_assert_async.msg` on the envelope's minimum (the GPU reads that one bool back); with
/// no window the envelope is known here, and a gap leaves the node to the CPU kernel, which
/// raises the error. `return_complex=True` (and bad arguments) stay with the CPU kernel
/// (src/ops/fft/stft.rs).
pub(super) fn istft(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let real = match b.dtype(x)? {
        DType::Complex64 => DType::F32,
        DType::Complex128 => DType::F64,
        d => return Err(format!("istft of a {d} spectrum")),
    };
    if boolean(n, "return_complex", false)? {
        return Err("return_complex=True".into());
    }
    let sizes = b.sizes(x)?;
    let (batched, bins, n_frames) = match sizes[..] {
        [k, t] => (false, k as i64, t as i64),
        [_, k, t] => (true, k as i64, t as i64),
        _ => return Err(format!("istft of a spectrum of shape {sizes:?}")),
    };
    let n_fft = int(n, "n_fft", None)?;
    let hop = opt_int(n, "hop_length")?.unwrap_or(n_fft / 4);
    let win_length = opt_int(n, "win_length")?.unwrap_or(n_fft);
    let onesided = boolean(n, "onesided", bins != n_fft)?;
    let half = n_fft / 2 + 1;
    if n_fft <= 0
        || hop <= 0
        || hop > win_length
        || win_length <= 0
        || win_length > n_fft
        || n_frames == 0
        || bins != if onesided { half } else { n_fft }
    {
        return Err(format!(
            "n_fft {n_fft}, hop_length {hop}, win_length {win_length}, onesided {onesided} for {bins} bins x {n_frames} frames"
        ));
    }
    let center = boolean(n, "center", true)?;
    let full = n_fft + hop * (n_frames - 1);
    let start = if center { n_fft / 2 } else { 0 };
    let end = match opt_int(n, "length")? {
        Some(l) if l >= 0 => start.saturating_add(l),
        Some(l) => return Err(format!("length {l}")),
        None if center => full - n_fft / 2,
        None => full,
    };
    let kept = end.min(full);
    let has_window = opt_tensor(n, "window")?.is_some();
    if !has_window && no_window_has_gap(n_fft, hop, win_length, n_frames, start, kept) {
        return Err("the window envelope has a gap (the CPU kernel raises torch's error)".into());
    }
    let window = match padded_window(b, n, n_fft, win_length, real)? {
        Some(w) => w,
        None => b.full(&[n_fft], 1.0, real)?,
    };

    let x = if batched { x } else { b.unsqueeze(x, 0)? };
    let spectra = b.transpose(x, 1, 2)?;
    let spectra = if onesided {
        spectra
    } else {
        b.slice(spectra, 2, 0, half, 1)?
    };
    let frames = b.t(
        "aten._fft_c2r.default",
        vec![
            ("self", Arg::Tensor(spectra)),
            ("dim", Arg::Ints(vec![2])),
            // 1: 1 / sqrt(n) (`normalized`), 2: 1 / n (the inverse's default).
            (
                "normalization",
                Arg::Int(if boolean(n, "normalized", false)? {
                    1
                } else {
                    2
                }),
            ),
            ("last_dim_size", Arg::Int(n_fft)),
        ],
    )?;
    let frames = b.bin("mul", frames, window)?;
    let y = overlap_add(b, frames, n_fft, hop, full)?;
    let y = b.slice(y, 1, start, kept, 1)?;

    let squared = b.bin("mul", window, window)?;
    let squared = b.reshape(squared, &[1, 1, n_fft])?;
    let squared = b.expand(squared, &[1, n_frames, n_fft])?;
    let envelope = overlap_add(b, squared, n_fft, hop, full)?;
    let envelope = b.slice(envelope, 1, start, kept, 1)?;
    if has_window {
        let lowest = b.t("aten.min.default", vec![("self", Arg::Tensor(envelope))])?;
        let lowest = b.un("abs", lowest)?;
        let ok = b.cmp_s("ge", lowest, Arg::Float(1e-11))?;
        b.call(
            "aten._assert_async.msg",
            vec![
                ("self", Arg::Tensor(ok)),
                ("assert_msg", Arg::Str(crate::ops::fft::ISTFT_NOLA.into())),
            ],
        )?;
    }
    let y = b.bin("div", y, envelope)?;
    let y = if end > full {
        b.t(
            "aten.constant_pad_nd.default",
            vec![
                ("self", Arg::Tensor(y)),
                ("pad", Arg::Ints(vec![0, end - full])),
                ("value", Arg::Float(0.0)),
            ],
        )?
    } else {
        y
    };
    let y = if batched { y } else { b.squeeze(y, &[0])? };
    Ok(vec![Arg::Tensor(y)])
}

/// Whether the envelope of the all-ones window (`win_length` ones centred in `n_fft`) is 0
/// somewhere in `start..end` of the overlap-added signal: the frames' intervals in order,
/// looking for an uncovered sample.
fn no_window_has_gap(
    n_fft: i64,
    hop: i64,
    win_length: i64,
    n_frames: i64,
    start: i64,
    end: i64,
) -> bool {
    let left = (n_fft - win_length) / 2;
    let mut covered = start;
    for t in 0..n_frames {
        let lo = t * hop + left;
        if lo > covered && covered < end {
            return true;
        }
        covered = covered.max(lo + win_length);
    }
    covered < end
}
