//! `stft` as torch's own decomposition writes it, so the frames and their FFT run on every
//! backend (the GPU included): frames of the (already centred) signal by `unfold`, times the
//! window zero-padded to `n_fft`, then `_fft_r2c` over the last dim and a transpose to
//! `[..., bins, frames]` (`view_as_real` when `return_complex=False`). Complex signals,
//! `stft.center` (which pads inside the op) and `align_to_window` stay with the CPU kernel
//! (src/ops/fft/stft.rs), which also gives the errors for bad arguments.

use super::{boolean, int, opt_int, opt_tensor, tensor, Builder, DResult};
use crate::program::{Arg, Node};

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
    // The window (ones when absent) centred in n_fft zeros.
    let left = (n_fft - win_length) / 2;
    let pad = [left, n_fft - win_length - left];
    let window = match opt_tensor(n, "window")? {
        Some(w) if b.sizes(w)? == [win_length as usize] && b.dtype(w)? == dtype => Some(w),
        Some(_) => {
            return Err("a window that is not 1-D of win_length in the signal's dtype".into())
        }
        None if win_length == n_fft => None,
        None => Some(b.full(&[win_length], 1.0, dtype)?),
    };
    let frames = match window {
        Some(w) => {
            let w = if pad == [0, 0] {
                w
            } else {
                b.t(
                    "aten.constant_pad_nd.default",
                    vec![
                        ("self", Arg::Tensor(w)),
                        ("pad", Arg::Ints(pad.to_vec())),
                        ("value", Arg::Float(0.0)),
                    ],
                )?
            };
            b.bin("mul", frames, w)?
        }
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
