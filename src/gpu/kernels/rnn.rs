//! Recurrent layers on the GPU (shaders/rnn.wgsl), f32: `lstm.input`, `gru.input`,
//! `rnn_tanh.input`, `rnn_relu.input` (multi-layer, bidirectional, batch_first, LSTM
//! projections, with or without biases, initial states) and the cells `lstm_cell`,
//! `gru_cell`, `rnn_tanh_cell`, `rnn_relu_cell`, as the CPU kernel (src/ops/rnn.rs) computes
//! them: per layer and direction one GEMM for the input projections of the whole sequence,
//! then per step one GEMM for the hidden projection, one gate dispatch, the LSTM projection
//! GEMM if any, and a strided copy of h into the layer's output. Everything is encoded into
//! the one command buffer (no CPU round trip). Training-mode dropout between layers stays on
//! the CPU (its random stream is the CPU generator's).

use super::{contiguous, encode_matmul, grid, index, KernelCtx, Out};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::GTensor;
use crate::program::Arg;
use bytemuck::{Pod, Zeroable};

pub const GATES: Variant = Variant::new(Shader::Rnn, "gates");

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct GateMeta {
    pub numel: u32,
    pub row: u32,
    pub kind: u32,
    pub hidden: u32,
    pub xoff: u32,
    pub poff: u32,
    pub pstride: u32,
    pub _p: u32,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Lstm = 0,
    Gru = 1,
    Tanh = 2,
    Relu = 3,
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
    fn gates(self) -> usize {
        match self {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::Tanh | Kind::Relu => 1,
        }
    }
}

/// The weights of one layer and direction.
struct Dir {
    w_ih: GTensor,
    w_hh: GTensor,
    b_ih: Option<GTensor>,
    b_hh: Option<GTensor>,
    w_hr: Option<GTensor>,
    hidden: usize,
    /// Size of h: the projection's with one, else `hidden`.
    out: usize,
}

/// Checked weights (None where the CPU kernel would raise or a tensor is not f32).
fn dir(kind: Kind, w: [Option<GTensor>; 5], input: usize) -> Option<Dir> {
    let [w_ih, w_hh, b_ih, b_hh, w_hr] = w;
    let (w_ih, w_hh) = (w_ih?, w_hh?);
    let g = kind.gates();
    let all = [
        Some(&w_ih),
        Some(&w_hh),
        b_ih.as_ref(),
        b_hh.as_ref(),
        w_hr.as_ref(),
    ];
    if all.iter().flatten().any(|t| t.dtype != DType::F32)
        || w_ih.rank() != 2
        || w_hh.rank() != 2
        || w_ih.sizes[0] % g != 0
        || w_hh.sizes[0] != w_ih.sizes[0]
        || w_ih.sizes[1] != input
    {
        return None;
    }
    let hidden = w_ih.sizes[0] / g;
    let out = w_hh.sizes[1];
    match &w_hr {
        Some(p) if p.sizes != [out, hidden] => return None,
        None if out != hidden => return None,
        _ => {}
    }
    if [&b_ih, &b_hh].iter().any(|b| {
        b.as_ref()
            .is_some_and(|b| b.rank() != 1 || b.numel() != g * hidden)
    }) {
        return None;
    }
    Some(Dir {
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        w_hr,
        hidden,
        out,
    })
}

/// `w`ᵀ as a view.
fn wt(w: &GTensor) -> GTensor {
    w.view(
        vec![w.sizes[1], w.sizes[0]],
        vec![w.strides[1], w.strides[0]],
        w.offset,
    )
}

/// A 1-D bias as the [rows, n] addend of a GEMM (stride 0 over rows).
fn bias_rows(b: &GTensor, rows: usize) -> GTensor {
    b.view(vec![rows, b.sizes[0]], vec![0, b.strides[0]], b.offset)
}

/// `t` ([rows, n]) with unit column stride, copied when it has another.
fn unit_cols(k: &mut KernelCtx, t: &GTensor) -> Result<Option<GTensor>> {
    if t.strides[1] == 1 || t.sizes[1] <= 1 {
        k.ensure(t)?;
        return Ok(Some(t.clone()));
    }
    contiguous(k, t)
}

/// One direction of one layer over the time-major sequence `seq` ([T * B, F]) from `h0`
/// ([B, out]) and, for LSTM, `c0` ([B, hidden]); each step's h goes to `ys[t, :, col..]`
/// ([T, B, width], contiguous). Returns the last h and c.
#[allow(clippy::too_many_arguments)]
fn run_direction(
    k: &mut KernelCtx,
    kind: Kind,
    w: &Dir,
    seq: &GTensor,
    steps: usize,
    batch: usize,
    h0: GTensor,
    c0: Option<GTensor>,
    reverse: bool,
    ys: &GTensor,
    col: usize,
) -> Result<Option<(GTensor, Option<GTensor>)>> {
    let (hd, out) = (w.hidden, w.out);
    let gh = kind.gates() * hd;
    let feat = seq.sizes[1];
    let width = ys.sizes[2];
    let bi = w.b_ih.as_ref().map(|b| bias_rows(b, steps * batch));
    let Some(xp) = encode_matmul(
        k,
        seq,
        &wt(&w.w_ih),
        bi.as_ref(),
        1,
        steps * batch,
        gh,
        feat,
        1.0,
        1.0,
    )?
    else {
        return Ok(None);
    };
    let mut h = h0;
    let mut c = c0;
    let numel = batch * hd;
    for s in 0..steps {
        let t = if reverse { steps - 1 - s } else { s };
        let bh = w.b_hh.as_ref().map(|b| bias_rows(b, batch));
        let Some(hp) = encode_matmul(
            k,
            &h,
            &wt(&w.w_hh),
            bh.as_ref(),
            1,
            batch,
            gh,
            out,
            1.0,
            1.0,
        )?
        else {
            return Ok(None);
        };
        let o = k.new_out(
            DType::F32,
            &[if kind == Kind::Lstm { 2 * numel } else { numel }],
        )?;
        let prev = match kind {
            Kind::Lstm => c.clone(),
            Kind::Gru => Some(h.clone()),
            _ => None,
        };
        let prev = match prev {
            Some(p) => match unit_cols(k, &p)? {
                Some(p) => Some(p),
                None => return Ok(None),
            },
            None => None,
        };
        if numel > 0 {
            let (gx, gy, row) = grid(numel, 64);
            let meta = GateMeta {
                numel: numel as u32,
                row,
                kind: kind as u32,
                hidden: hd as u32,
                xoff: (t * batch * gh) as u32,
                poff: prev.as_ref().map_or(0, |p| p.offset as u32),
                pstride: prev.as_ref().map_or(0, |p| p.strides[0] as u32),
                _p: 0,
            };
            k.dispatch(
                &GATES,
                bytemuck::bytes_of(&meta),
                &[
                    (1, &o),
                    (2, &xp),
                    (3, &hp),
                    (4, prev.as_ref().unwrap_or(&hp)),
                ],
                (gx, gy, 1),
            )?;
        }
        let hc = o.view(vec![batch, hd], vec![hd, 1], 0);
        if kind == Kind::Lstm {
            c = Some(o.view(vec![batch, hd], vec![hd, 1], numel));
        }
        h = match &w.w_hr {
            Some(p) => match encode_matmul(k, &hc, &wt(p), None, 1, batch, out, hd, 1.0, 0.0)? {
                Some(r) => r,
                None => return Ok(None),
            },
            None => hc,
        };
        let dst = ys.view(vec![batch, out], vec![width, 1], t * batch * width + col);
        index::encode_copy(k, &h, &dst)?;
    }
    Ok(Some((h, c)))
}

fn tensor_list(k: &KernelCtx, name: &str) -> Option<Vec<GTensor>> {
    let Some(Arg::Tensors(ids)) = k.op.arg(name) else {
        return None;
    };
    ids.iter()
        .map(|id| k.env_t.get(*id).and_then(|t| t.clone()))
        .collect()
}

/// Slice `i` of dim 0 of a 3-D tensor, as a 2-D view.
fn slice0(t: &GTensor, i: usize) -> GTensor {
    t.view(
        vec![t.sizes[1], t.sizes[2]],
        vec![t.strides[1], t.strides[2]],
        t.offset + i * t.strides[0],
    )
}

/// `lstm.input` / `gru.input` / `rnn_tanh.input` / `rnn_relu.input`.
pub(super) fn rnn(k: &mut KernelCtx) -> Out {
    let kind = Kind::of(k.target());
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let hx = if kind == Kind::Lstm {
        match tensor_list(k, "hx") {
            Some(v) if v.len() == 2 => v,
            _ => return Ok(None),
        }
    } else {
        match k.t("hx") {
            Some(h) => vec![h],
            None => return Ok(None),
        }
    };
    let Some(params) = tensor_list(k, "params") else {
        return Ok(None);
    };
    let has_bias = k.op.bool_or("has_biases", true)?;
    let layers = k.op.int("num_layers")?.max(0) as usize;
    let dropout = k.op.float_or("dropout", 0.0)?;
    let train = k.op.bool_or("train", false)?;
    let bidi = k.op.bool_or("bidirectional", false)?;
    let batch_first = k.op.bool_or("batch_first", false)?;
    let dirs = if bidi { 2 } else { 1 };
    if x.dtype != DType::F32
        || x.rank() != 3
        || hx.iter().any(|h| h.dtype != DType::F32 || h.rank() != 3)
        || !k.out_is(DType::F32)
        || (train && dropout > 0.0 && layers > 1)
    {
        return Ok(None);
    }
    let per = params.len() / (layers * dirs).max(1);
    let ok_per = if has_bias {
        per == 4 || (kind == Kind::Lstm && per == 5)
    } else {
        per == 2 || (kind == Kind::Lstm && per == 3)
    };
    if layers == 0 || per * layers * dirs != params.len() || !ok_per {
        return Ok(None);
    }
    let (steps, batch) = if batch_first {
        (x.sizes[1], x.sizes[0])
    } else {
        (x.sizes[0], x.sizes[1])
    };
    let (h0, c0) = (&hx[0], hx.get(1));
    if steps == 0 || batch == 0 || h0.sizes[0] != layers * dirs || h0.sizes[1] != batch {
        return Ok(None);
    }
    // The time-major input, contiguous.
    let xt = if batch_first {
        x.view(
            vec![steps, batch, x.sizes[2]],
            vec![x.strides[1], x.strides[0], x.strides[2]],
            x.offset,
        )
    } else {
        x.clone()
    };
    let Some(xt) = contiguous(k, &xt)? else {
        return Ok(None);
    };
    let mut feat = x.sizes[2];
    let mut seq = xt.view(vec![steps * batch, feat], vec![feat, 1], xt.offset);
    let hn = k.new_out(DType::F32, &h0.sizes)?;
    let cn = match c0 {
        Some(c) => Some(k.new_out(DType::F32, &c.sizes)?),
        None => None,
    };
    let mut ys = None;
    for layer in 0..layers {
        let mut ws = Vec::with_capacity(dirs);
        for d in 0..dirs {
            let base = (layer * dirs + d) * per;
            let p = |i: usize| params.get(base + i).cloned();
            let w = if has_bias {
                [p(0), p(1), p(2), p(3), if per == 5 { p(4) } else { None }]
            } else {
                [p(0), p(1), None, None, if per == 3 { p(2) } else { None }]
            };
            let Some(w) = dir(kind, w, feat) else {
                return Ok(None);
            };
            if h0.sizes[2] != w.out
                || c0.is_some_and(|c| c.sizes != [layers * dirs, batch, w.hidden])
            {
                return Ok(None);
            }
            ws.push(w);
        }
        let width: usize = ws.iter().map(|w| w.out).sum();
        let y = k.new_out(DType::F32, &[steps, batch, width])?;
        let mut col = 0;
        for (d, w) in ws.iter().enumerate() {
            let i = layer * dirs + d;
            let h_init = slice0(h0, i);
            let c_init = c0.map(|c| slice0(c, i));
            let Some((h, c)) = run_direction(
                k,
                kind,
                w,
                &seq,
                steps,
                batch,
                h_init,
                c_init,
                d == 1,
                &y,
                col,
            )?
            else {
                return Ok(None);
            };
            index::encode_copy(k, &h, &slice0(&hn, i))?;
            if let (Some(c), Some(cn)) = (c, &cn) {
                index::encode_copy(k, &c, &slice0(cn, i))?;
            }
            col += w.out;
        }
        seq = y.view(vec![steps * batch, width], vec![width, 1], 0);
        feat = width;
        ys = Some(y);
    }
    let Some(y) = ys else {
        return Ok(None);
    };
    let out = if batch_first {
        let v = y.view(vec![batch, steps, feat], vec![feat, batch * feat, 1], 0);
        match contiguous(k, &v)? {
            Some(t) => t,
            None => return Ok(None),
        }
    } else {
        y
    };
    let mut res = vec![Slot::Tensor(out), Slot::Tensor(hn)];
    if let Some(c) = cn {
        res.push(Slot::Tensor(c));
    }
    Ok(Some(res))
}

/// `lstm_cell` / `gru_cell` / `rnn_tanh_cell` / `rnn_relu_cell`: one step ([B, in] or [in]).
pub(super) fn cell(k: &mut KernelCtx) -> Out {
    let kind = Kind::of(k.target());
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let hx = if kind == Kind::Lstm {
        match tensor_list(k, "hx") {
            Some(v) if v.len() == 2 => v,
            _ => return Ok(None),
        }
    } else {
        match k.t("hx") {
            Some(h) => vec![h],
            None => return Ok(None),
        }
    };
    if k.is_tensor_arg("b_ih") && k.t("b_ih").is_none()
        || k.is_tensor_arg("b_hh") && k.t("b_hh").is_none()
    {
        return Ok(None);
    }
    if x.dtype != DType::F32 || x.rank() == 0 || x.rank() > 2 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let unbatched = x.rank() == 1;
    let batch = if unbatched { 1 } else { x.sizes[0] };
    let feat = x.sizes[x.rank() - 1];
    let w = [k.t("w_ih"), k.t("w_hh"), k.t("b_ih"), k.t("b_hh"), None];
    let Some(w) = dir(kind, w, feat) else {
        return Ok(None);
    };
    let as2 = |t: &GTensor, n: usize| -> Option<GTensor> {
        if t.dtype != DType::F32 {
            return None;
        }
        if unbatched {
            (t.sizes == [n]).then(|| t.view(vec![1, n], vec![0, t.strides[0]], t.offset))
        } else {
            (t.sizes == [batch, n]).then(|| t.clone())
        }
    };
    let seq = if unbatched {
        x.view(vec![1, feat], vec![0, x.strides[0]], x.offset)
    } else {
        x.clone()
    };
    let Some(h0) = as2(&hx[0], w.out) else {
        return Ok(None);
    };
    let c0 = match hx.get(1) {
        Some(c) => match as2(c, w.hidden) {
            Some(c) => Some(c),
            None => return Ok(None),
        },
        None => None,
    };
    let y = k.new_out(DType::F32, &[1, batch, w.out])?;
    let Some((_, c)) = run_direction(k, kind, &w, &seq, 1, batch, h0, c0, false, &y, 0)? else {
        return Ok(None);
    };
    let shape = |n: usize| if unbatched { vec![n] } else { vec![batch, n] };
    let st = |n: usize| if unbatched { vec![1] } else { vec![n, 1] };
    let hy = y.view(shape(w.out), st(w.out), 0);
    let mut res = vec![Slot::Tensor(hy)];
    if let Some(c) = c {
        res.push(Slot::Tensor(c.view(
            shape(w.hidden),
            st(w.hidden),
            c.offset,
        )));
    }
    Ok(Some(res))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, On};
    t.kernel(
        &["aten.lstm", "aten.gru", "aten.rnn_tanh", "aten.rnn_relu"],
        On::Only(&["input"]),
        rnn,
        all_f32,
    );
    t.kernel(
        &[
            "aten.lstm_cell",
            "aten.gru_cell",
            "aten.rnn_tanh_cell",
            "aten.rnn_relu_cell",
        ],
        On::Only(&["default"]),
        cell,
        all_f32,
    );
}
