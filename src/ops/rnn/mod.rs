//! Op family: recurrent layers as the training IR holds them: `lstm.input`, `gru.input`,
//! `rnn_tanh.input`, `rnn_relu.input` (multi-layer, bidirectional, batch_first, LSTM
//! projections) and the cells `lstm_cell`, `gru_cell`, `rnn_tanh_cell`, `rnn_relu_cell`.
//! Core ATen decomposes all of them into addmm/sigmoid/tanh, run by other families.
//!
//! `params` is torch's flat list: per layer, per direction, `w_ih, w_hh[, b_ih, b_hh][, w_hr]`.
//! Gate order follows torch: LSTM i, f, g, o; GRU r, z, n with n = tanh(x_n + r * (W_hn h +
//! b_hn)). The input projection of a whole sequence is one GEMM; each step is one more.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

use super::matmul::gemm::{gemm, Mat};
use super::reduce::{compute_float, typed, with_real, Real};
use super::{OpCtx, OpTable};
use crate::cpu::{Elem, Tensor};
use crate::error::Result;
use crate::runtime::RValue;

/// Each target once, with its CPU kernel and its shape rule (`meta.rs`).
pub(crate) fn register(r: &mut OpTable) {
    for t in ["lstm", "gru", "rnn_tanh", "rnn_relu"] {
        r.define(&format!("aten.{t}.input"), rnn, meta::rnn);
        r.define(&format!("aten.{t}_cell.default"), cell, meta::cell);
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Lstm,
    Gru,
    Tanh,
    Relu,
}

impl Kind {
    fn of(target: &str) -> Kind {
        if target.starts_with("aten.lstm") {
            Kind::Lstm
        } else if target.starts_with("aten.gru") {
            Kind::Gru
        } else if target.starts_with("aten.rnn_relu") {
            Kind::Relu
        } else {
            Kind::Tanh
        }
    }
    /// Gates stacked in the weight matrices.
    fn gates(self) -> usize {
        match self {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::Tanh | Kind::Relu => 1,
        }
    }
}

/// The weights of one layer and direction, in the compute type.
struct Weights<R> {
    w_ih: Vec<R>,
    w_hh: Vec<R>,
    b_ih: Option<Vec<R>>,
    b_hh: Option<Vec<R>>,
    /// LSTM projection [proj, hidden].
    w_hr: Option<Vec<R>>,
    input: usize,
    hidden: usize,
    /// Size of h: `proj` with a projection, else `hidden`.
    out: usize,
}

/// Checked weights from tensors: w_ih [G*H, input], w_hh [G*H, out], biases [G*H], w_hr [out, H].
fn weights<R: Elem>(
    ctx: &OpCtx,
    kind: Kind,
    w: &[Option<&Tensor>; 5],
    input: usize,
) -> Result<Weights<R>> {
    let (Some(w_ih), Some(w_hh)) = (w[0], w[1]) else {
        return Err(ctx.err("missing input-hidden or hidden-hidden weights"));
    };
    let g = kind.gates();
    if w_ih.rank() != 2
        || w_hh.rank() != 2
        || w_ih.sizes[0] % g != 0
        || w_hh.sizes[0] != w_ih.sizes[0]
    {
        return Err(ctx.err(format!(
            "weights of shapes {:?} and {:?} do not fit a {kind:?} layer",
            w_ih.sizes, w_hh.sizes
        )));
    }
    let hidden = w_ih.sizes[0] / g;
    if w_ih.sizes[1] != input {
        return Err(ctx.err(format!(
            "input-hidden weights {:?} expect {} input features, got {input}",
            w_ih.sizes, w_ih.sizes[1]
        )));
    }
    let out = w_hh.sizes[1];
    let w_hr = match w[4] {
        Some(p) if p.sizes == [out, hidden] => Some(p.to_vec::<R>()),
        Some(p) => {
            return Err(ctx.err(format!(
                "projection weights {:?} should be [{out}, {hidden}]",
                p.sizes
            )))
        }
        None if out != hidden => {
            return Err(ctx.err(format!(
                "hidden-hidden weights {:?} should be [{}, {hidden}]",
                w_hh.sizes,
                g * hidden
            )))
        }
        None => None,
    };
    let bias = |b: Option<&Tensor>| -> Result<Option<Vec<R>>> {
        match b {
            None => Ok(None),
            Some(b) if b.numel() == g * hidden => Ok(Some(b.to_vec::<R>())),
            Some(b) => Err(ctx.err(format!(
                "bias of shape {:?} should have {} elements",
                b.sizes,
                g * hidden
            ))),
        }
    };
    Ok(Weights {
        w_ih: w_ih.to_vec(),
        w_hh: w_hh.to_vec(),
        b_ih: bias(w[2])?,
        b_hh: bias(w[3])?,
        w_hr,
        input,
        hidden,
        out,
    })
}

#[inline]
fn sigmoid<R: Real>(x: R) -> R {
    <R as Real>::ONE / (<R as Real>::ONE + (-x).exp())
}

/// `y[m, n] = x[m, k] @ w[n, k]ᵀ (+ bias[n])`, row-major.
fn linear<R: Real + super::matmul::gemm::Float>(
    x: &[R],
    m: usize,
    k: usize,
    w: &[R],
    n: usize,
    bias: Option<&[R]>,
) -> Result<Vec<R>> {
    let mut y = vec![<R as Real>::ZERO; m * n];
    gemm(
        m,
        n,
        k,
        Mat::new(x, 0, k, 1),
        Mat::new(w, 0, 1, k),
        &mut y,
        0,
        n,
        1,
        <R as Real>::ONE,
        <R as Real>::ZERO,
        true,
    )?;
    if let Some(b) = bias {
        y.chunks_exact_mut(n.max(1))
            .for_each(|r| r.iter_mut().zip(b).for_each(|(a, &b)| *a += b));
    }
    Ok(y)
}

/// One direction of one layer over a time-major sequence `x` ([T, B, input]) from state `h0`
/// ([B, out]) and, for LSTM, `c0` ([B, hidden]). Returns ([T, B, out], h_T, c_T).
#[allow(clippy::too_many_arguments)]
fn run_direction<R: Real + super::matmul::gemm::Float>(
    kind: Kind,
    w: &Weights<R>,
    x: &[R],
    steps: usize,
    batch: usize,
    h0: &[R],
    c0: &[R],
    reverse: bool,
) -> Result<(Vec<R>, Vec<R>, Vec<R>)> {
    let (hd, out) = (w.hidden, w.out);
    let g = kind.gates() * hd;
    let xp = linear(x, steps * batch, w.input, &w.w_ih, g, w.b_ih.as_deref())?;
    let mut h = h0.to_vec();
    let mut c = c0.to_vec();
    let mut ys = vec![<R as Real>::ZERO; steps * batch * out];
    let mut hc = vec![<R as Real>::ZERO; batch * hd];
    for s in 0..steps {
        let t = if reverse { steps - 1 - s } else { s };
        let hp = linear(&h, batch, out, &w.w_hh, g, w.b_hh.as_deref())?;
        for b in 0..batch {
            let xg = &xp[(t * batch + b) * g..(t * batch + b + 1) * g];
            let hg = &hp[b * g..(b + 1) * g];
            let hb = &mut hc[b * hd..(b + 1) * hd];
            match kind {
                Kind::Lstm => {
                    let cb = &mut c[b * hd..(b + 1) * hd];
                    for j in 0..hd {
                        let i = sigmoid(xg[j] + hg[j]);
                        let f = sigmoid(xg[hd + j] + hg[hd + j]);
                        let gg = (xg[2 * hd + j] + hg[2 * hd + j]).tanh();
                        let o = sigmoid(xg[3 * hd + j] + hg[3 * hd + j]);
                        cb[j] = f * cb[j] + i * gg;
                        hb[j] = o * cb[j].tanh();
                    }
                }
                Kind::Gru => {
                    let hprev = &h[b * out..(b + 1) * out];
                    for j in 0..hd {
                        let r = sigmoid(xg[j] + hg[j]);
                        let z = sigmoid(xg[hd + j] + hg[hd + j]);
                        let n = (xg[2 * hd + j] + r * hg[2 * hd + j]).tanh();
                        hb[j] = (<R as Real>::ONE - z) * n + z * hprev[j];
                    }
                }
                Kind::Tanh => (0..hd).for_each(|j| hb[j] = (xg[j] + hg[j]).tanh()),
                Kind::Relu => (0..hd).for_each(|j| {
                    let v = xg[j] + hg[j];
                    // NaN propagates (relu keeps NaN).
                    hb[j] = if v < <R as Real>::ZERO {
                        <R as Real>::ZERO
                    } else {
                        v
                    };
                }),
            }
        }
        h = match &w.w_hr {
            Some(p) => linear(&hc, batch, hd, p, out, None)?,
            None => hc.clone(),
        };
        ys[t * batch * out..(t + 1) * batch * out].copy_from_slice(&h);
    }
    Ok((ys, h, c))
}

/// `[a, b, rest..]` → `[b, a, rest..]` as a contiguous vector (batch_first ↔ time-major).
fn swap01<R: Elem>(t: &Tensor) -> Vec<R> {
    let mut sizes = t.sizes.clone();
    let mut strides = t.strides.clone();
    sizes.swap(0, 1);
    strides.swap(0, 1);
    t.view_with(sizes, strides, t.offset).to_vec::<R>()
}

fn rnn(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let kind = Kind::of(ctx.target());
    let x = ctx.tensor("input")?;
    let hx = if kind == Kind::Lstm {
        ctx.tensors("hx")?
    } else {
        vec![ctx.tensor("hx")?]
    };
    let params = ctx.tensors("params")?;
    let has_bias = ctx.bool_or("has_biases", true)?;
    let layers = ctx.int("num_layers")?.max(0) as usize;
    let dropout = ctx.float_or("dropout", 0.0)?;
    let train = ctx.bool_or("train", false)?;
    let bidi = ctx.bool_or("bidirectional", false)?;
    let batch_first = ctx.bool_or("batch_first", false)?;
    let dirs = if bidi { 2 } else { 1 };
    let Some(cf) = compute_float(x.dtype) else {
        return Err(ctx.err(format!("expected a floating point input, got {}", x.dtype)));
    };
    if x.rank() != 3 {
        return Err(ctx.err(format!(
            "expected a 3-d input ([seq, batch, features] or batch_first), got shape {:?}",
            x.sizes
        )));
    }
    if hx.len() != if kind == Kind::Lstm { 2 } else { 1 } {
        return Err(ctx.err(format!(
            "expected {} hidden state tensors, got {}",
            if kind == Kind::Lstm { 2 } else { 1 },
            hx.len()
        )));
    }
    let per = params.len() / (layers * dirs).max(1);
    let ok_per = if has_bias {
        per == 4 || (kind == Kind::Lstm && per == 5)
    } else {
        per == 2 || (kind == Kind::Lstm && per == 3)
    };
    if layers == 0 || per * layers * dirs != params.len() || !ok_per {
        return Err(ctx.err(format!(
            "{} parameter tensors do not fit {layers} layer(s) x {dirs} direction(s)",
            params.len()
        )));
    }
    let (steps, batch) = if batch_first {
        (x.sizes[1], x.sizes[0])
    } else {
        (x.sizes[0], x.sizes[1])
    };
    let (h0, c0) = (&hx[0], hx.get(1));
    if h0.rank() != 3 || h0.sizes[0] != layers * dirs || h0.sizes[1] != batch {
        return Err(ctx.err(format!(
            "hidden state of shape {:?} should be [{}, {batch}, hidden]",
            h0.sizes,
            layers * dirs
        )));
    }
    let (out, hn, cn) = with_real!(cf, R => {
        let mut seq: Vec<R> = if batch_first { swap01(&x) } else { x.to_vec() };
        let mut feat = x.sizes[2];
        let h0v = h0.to_vec::<R>();
        let c0v = c0.map(|c| c.to_vec::<R>());
        let (mut hn, mut cn) = (Vec::new(), Vec::new());
        for layer in 0..layers {
            let mut outs = Vec::with_capacity(dirs);
            for d in 0..dirs {
                let base = (layer * dirs + d) * per;
                let p = |i: usize| params.get(base + i);
                let w = if has_bias { [p(0), p(1), p(2), p(3), if per == 5 { p(4) } else { None }] } else { [p(0), p(1), None, None, if per == 3 { p(2) } else { None }] };
                let w = weights::<R>(ctx, kind, &w, feat)?;
                let k = layer * dirs + d;
                if h0.sizes[2] != w.out {
                    return Err(ctx.err(format!("hidden state of shape {:?} should have {} features", h0.sizes, w.out)));
                }
                let hs = &h0v[k * batch * w.out..(k + 1) * batch * w.out];
                let cs = match &c0v {
                    Some(c) if c.len() == layers * dirs * batch * w.hidden => c[k * batch * w.hidden..(k + 1) * batch * w.hidden].to_vec(),
                    Some(_) => return Err(ctx.err(format!("cell state should be [{}, {batch}, {}]", layers * dirs, w.hidden))),
                    None => Vec::new(),
                };
                let (ys, h, c) = run_direction(kind, &w, &seq, steps, batch, hs, &cs, d == 1)?;
                hn.extend(h);
                cn.extend(c);
                outs.push((ys, w.out));
            }
            // Concatenate directions on the feature axis: [T, B, dirs * out].
            let width: usize = outs.iter().map(|o| o.1).sum();
            let mut next = vec![<R as Real>::ZERO; steps * batch * width];
            let mut col = 0;
            for (ys, o) in &outs {
                for r in 0..steps * batch {
                    next[r * width + col..r * width + col + o].copy_from_slice(&ys[r * o..(r + 1) * o]);
                }
                col += o;
            }
            if train && dropout > 0.0 && layer + 1 < layers {
                let scale = 1.0 / (1.0 - dropout);
                for v in next.iter_mut() {
                    *v = if ctx.state.rng.uniform() < dropout { <R as Real>::ZERO } else { *v * R::from_f64(scale) };
                }
            }
            seq = next;
            feat = width;
        }
        let out_sizes = if batch_first { [batch, steps, feat] } else { [steps, batch, feat] };
        let out = Tensor::from_vec(seq, &[steps, batch, feat]);
        let out = if batch_first { Tensor::from_vec(swap01::<R>(&out), &out_sizes) } else { out };
        let hn = Tensor::from_vec(hn, &h0.sizes);
        let cn = c0.map(|c| Tensor::from_vec(cn, &c.sizes));
        (out.to_dtype(x.dtype)?, hn.to_dtype(x.dtype)?, cn.map(|c| c.to_dtype(x.dtype)).transpose()?)
    });
    let mut res = vec![out.into(), hn.into()];
    if let Some(c) = cn {
        res.push(c.into());
    }
    Ok(res)
}

/// lstm_cell / gru_cell / rnn_tanh_cell / rnn_relu_cell: one step of a batch ([B, in] or [in]).
fn cell(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let kind = Kind::of(ctx.target());
    let x = ctx.tensor("input")?;
    let hx = if kind == Kind::Lstm {
        ctx.tensors("hx")?
    } else {
        vec![ctx.tensor("hx")?]
    };
    let w_ih = ctx.tensor("w_ih")?;
    let w_hh = ctx.tensor("w_hh")?;
    let b_ih = ctx.opt_tensor("b_ih")?;
    let b_hh = ctx.opt_tensor("b_hh")?;
    let Some(cf) = compute_float(x.dtype) else {
        return Err(ctx.err(format!("expected a floating point input, got {}", x.dtype)));
    };
    if x.rank() == 0 || x.rank() > 2 || hx.len() != if kind == Kind::Lstm { 2 } else { 1 } {
        return Err(ctx.err(format!(
            "expected a 1-d or 2-d input and {} hidden state(s), got shape {:?}",
            if kind == Kind::Lstm { 2 } else { 1 },
            x.sizes
        )));
    }
    let batch = if x.rank() == 2 { x.sizes[0] } else { 1 };
    let feat = x.sizes[x.rank() - 1];
    let res = with_real!(cf, R => {
        let w = weights::<R>(ctx, kind, &[Some(&w_ih), Some(&w_hh), b_ih.as_ref(), b_hh.as_ref(), None], feat)?;
        let h0 = hx[0].to_vec::<R>();
        let c0 = hx.get(1).map(|c| c.to_vec::<R>()).unwrap_or_default();
        if h0.len() != batch * w.out || (kind == Kind::Lstm && c0.len() != batch * w.hidden) {
            return Err(ctx.err(format!("hidden state of shape {:?} does not fit batch {batch} and hidden size {}", hx[0].sizes, w.hidden)));
        }
        let (_, h, c) = run_direction(kind, &w, &x.to_vec::<R>(), 1, batch, &h0, &c0, false)?;
        let mut res: Vec<RValue> = vec![typed(h, &hx[0].sizes, x.dtype)?.into()];
        if kind == Kind::Lstm {
            res.push(typed(c, &hx[1].sizes, x.dtype)?.into());
        }
        res
    });
    Ok(res)
}
