//! `scaled_dot_product_attention` on the GPU, composed from the matmul, softmax and
//! elementwise kernels (the math form): per (batch..., head) problem,
//! `softmax(scale * Q K^T + mask) V`, with the scores [B, L, S] materialized once. The
//! mask is a float mask added as is, a bool mask as 0 / -inf (`True` keeps), or the causal
//! lower triangle. `enable_gqa` repeats each key / value head for its group of query heads (a
//! copy). `_scaled_dot_product_attention_math` also returns the attention weights (its bool
//! mask is added as 0 / 1, as the CPU kernel does);
//! `_scaled_dot_product_flash_attention_for_cpu` also returns each row's logsumexp of the
//! scaled, masked scores (the reduce kernel). Dropout (0 < p < 1) masks the weights with the
//! dropout kernel (the CPU kernel's draws: one per weight, in [batch, L, S] order); a given
//! `dropout_mask` (`_math` only) stays on the CPU kernel.

use super::{
    contiguous, elementwise, encode_matmul, reduce, softmax_dispatch, KernelCtx, Operand, Out,
    RowMeta, UnaryOp, SAFE_SOFTMAX, WHERE,
};
use crate::cpu::{broadcast_shapes, Tensor};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Elems, Shader, Variant};
use crate::gpu::store::GTensor;
use crate::ops::attention::SdpaParams;

/// `t` ([batch..., m, n], broadcast to `batch`) as a contiguous [B, m, n] tensor.
fn batched(k: &mut KernelCtx, t: &GTensor, batch: &[usize]) -> crate::Result<Option<GTensor>> {
    let r = t.rank();
    let mut shape = batch.to_vec();
    shape.extend_from_slice(&t.sizes[r - 2..]);
    let Some(e) = t.expand_to(&shape) else {
        return Ok(None);
    };
    let Some(c) = contiguous(k, &e)? else {
        return Ok(None);
    };
    let b: usize = batch.iter().product();
    let (m, n) = (t.sizes[r - 2], t.sizes[r - 1]);
    Ok(Some(c.view(vec![b, m, n], vec![m * n, n, 1], c.offset)))
}

/// `t` with dim -3 (heads) repeated `g` times per head (repeat_interleave), contiguous.
fn repeat_heads(k: &mut KernelCtx, t: &GTensor, g: usize) -> crate::Result<Option<GTensor>> {
    if g == 1 {
        return Ok(Some(t.clone()));
    }
    let r = t.rank();
    let mut sizes = t.sizes[..r - 2].to_vec();
    let mut strides = t.strides[..r - 2].to_vec();
    sizes.insert(r - 2, g);
    strides.insert(r - 2, 0);
    sizes.extend_from_slice(&t.sizes[r - 2..]);
    strides.extend_from_slice(&t.strides[r - 2..]);
    if sizes.len() > 8 {
        return Ok(None);
    }
    let Some(c) = contiguous(k, &t.view(sizes, strides, t.offset))? else {
        return Ok(None);
    };
    let mut out = t.sizes.clone();
    out[r - 3] *= g;
    let st = crate::gpu::store::contiguous_strides(&out);
    Ok(Some(c.view(out, st, c.offset)))
}

pub(super) fn sdpa(k: &mut KernelCtx) -> Out {
    let (math, flash) = match k.op.node.target.as_str() {
        "aten.scaled_dot_product_attention.default" => (false, false),
        "aten._scaled_dot_product_attention_math.default" => (true, false),
        "aten._scaled_dot_product_flash_attention_for_cpu.default" => (false, true),
        _ => return Ok(None),
    };
    let (Some(q), Some(kt), Some(v)) = (k.t("query"), k.t("key"), k.t("value")) else {
        return Ok(None);
    };
    let mask = k.t("attn_mask");
    if k.is_tensor_arg("attn_mask") && mask.is_none()
        || (math || flash) && k.is_tensor_arg("dropout_mask")
    {
        return Ok(None);
    }
    // f16: computed in f32 from converted operands (as torch's CPU kernels accumulate), the
    // outputs rounded to f16 once.
    let outs: Vec<Option<DType>> = (0..1 + (math || flash) as usize)
        .map(|i| k.out_dtype(i))
        .collect();
    let f16 = [Some(&q), Some(&kt), Some(&v), mask.as_ref()]
        .iter()
        .flatten()
        .any(|t| t.dtype == DType::F16);
    if !f16 {
        if outs.iter().any(|d| *d != Some(DType::F32)) {
            return Ok(None);
        }
        return sdpa_f32(k, math, flash, q, kt, v, mask);
    }
    // (flash_attention_for_cpu's logsumexp stays f32.)
    if !k.r.dev.f16_enabled()
        || outs
            .iter()
            .any(|d| !matches!(d, Some(DType::F16 | DType::F32)))
    {
        return Ok(None);
    }
    // q, k and v all f16 with an f16 output: the streaming kernel reads them as they are (an
    // f16 KV cache is not converted each step); a float mask is made f32.
    if !math
        && !flash
        && [&q, &kt, &v].iter().all(|t| t.dtype == DType::F16)
        && outs == [Some(DType::F16)]
    {
        let m = match &mask {
            Some(m) if m.dtype == DType::F16 => to_dtype(k, m, DType::F32)?,
            m => m.clone(),
        };
        if mask.is_none() || m.is_some() {
            if let Some(r) = sdpa_f32(k, false, false, q.clone(), kt.clone(), v.clone(), m)? {
                return Ok(Some(r));
            }
        }
    }
    let mut up = Vec::new();
    for t in [Some(&q), Some(&kt), Some(&v), mask.as_ref()] {
        up.push(match t {
            Some(t) if t.dtype == DType::F16 => match to_dtype(k, t, DType::F32)? {
                Some(c) => Some(c),
                None => return Ok(None),
            },
            t => t.cloned(),
        });
    }
    let mask32 = up.pop().flatten();
    let [Some(q32), Some(k32), Some(v32)] = [up[0].take(), up[1].take(), up[2].take()] else {
        return Ok(None);
    };
    let Some(res) = sdpa_f32(k, math, flash, q32, k32, v32, mask32)? else {
        return Ok(None);
    };
    let mut down = Vec::new();
    for (s, want) in res.into_iter().zip(outs) {
        let (Slot::Tensor(t), Some(want)) = (s, want) else {
            return Ok(None);
        };
        if t.dtype == want {
            down.push(Slot::Tensor(t));
            continue;
        }
        match to_dtype(k, &t, want)? {
            Some(h) => down.push(Slot::Tensor(h)),
            None => return Ok(None),
        }
    }
    Ok(Some(down))
}

/// `t` converted between f16 and f32 (a strided converting copy).
fn to_dtype(k: &mut KernelCtx, t: &GTensor, to: DType) -> crate::Result<Option<GTensor>> {
    elementwise(k, UnaryOp::Copy.variant(), to, t, None, None, 1.0, 0.0)
}

/// The safe softmax along the last dim of `shape` (a fully masked row gives zeros, as
/// torch's attention), as a new tensor of that shape.
fn row_softmax(k: &mut KernelCtx, scores: &GTensor, shape: &[usize]) -> crate::Result<GTensor> {
    let s = shape[shape.len() - 1];
    let rows: usize = shape[..shape.len() - 1].iter().product();
    let weights = k.new_out(DType::F32, shape)?;
    let (v, (gx, gy, row)) = softmax_dispatch(k.r.dev, SAFE_SOFTMAX, rows, s);
    let meta = RowMeta {
        rows: rows as u32,
        cols: s as u32,
        row,
        ..Default::default()
    };
    k.dispatch(
        &v,
        bytemuck::bytes_of(&meta),
        &[(1, &weights), (2, scores)],
        (gx, gy, 1),
    )?;
    Ok(weights)
}

/// The shapes of a grouped-query attention without copies (see `sdpa_f32`).
struct Grouped<'a> {
    /// Batch dims with the query's heads last.
    batch: &'a [usize],
    hk: usize,
    g: usize,
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
    scale: f32,
}

/// `softmax(scale · Q Kᵀ + mask) V` with each key / value head's group of query heads as one
/// problem of g·L rows: Q [.., Hq, L, E] read as [B·Hkv, g·L, E], K and V as they are, the
/// mask (any, made contiguous over [.., Hq, L, S]) as [B·Hkv, g·L, S]; the output
/// [B·Hkv, g·L, Ev] is [.., Hq, L, Ev].
fn grouped(
    k: &mut KernelCtx,
    q: &GTensor,
    kt: &GTensor,
    v: &GTensor,
    add_mask: Option<&GTensor>,
    p: &Grouped,
) -> Out {
    let (l, s, e, ev, g) = (p.l, p.s, p.e, p.ev, p.g);
    let nb: usize = p.batch.iter().product();
    let np = nb / g;
    let mut kv_batch = p.batch.to_vec();
    let last = kv_batch.len() - 1;
    kv_batch[last] = p.hk;
    let (Some(qb), Some(kb), Some(vb)) = (
        batched(k, q, p.batch)?,
        batched(k, kt, &kv_batch)?,
        batched(k, v, &kv_batch)?,
    ) else {
        return Ok(None);
    };
    let qg = qb.view(vec![np, g * l, e], vec![g * l * e, e, 1], qb.offset);
    let mask = match add_mask {
        Some(m) => {
            let Some(c) = contiguous(k, m)? else {
                return Ok(None);
            };
            Some(c.view(vec![np, g * l, s], vec![g * l * s, s, 1], c.offset))
        }
        None => None,
    };
    let ktv = kb.view(vec![np, e, s], vec![s * e, 1, e], kb.offset);
    let beta = if mask.is_some() { 1.0 } else { 0.0 };
    let Some(scores) = encode_matmul(k, &qg, &ktv, mask.as_ref(), np, g * l, s, e, p.scale, beta)?
    else {
        return Ok(None);
    };
    let weights = row_softmax(k, &scores, &[np, g * l, s])?;
    drop(scores);
    let Some(out) = encode_matmul(k, &weights, &vb, None, np, g * l, ev, s, 1.0, 0.0)? else {
        return Ok(None);
    };
    let mut sizes = p.batch.to_vec();
    sizes.extend([l, ev]);
    let st = crate::gpu::store::contiguous_strides(&sizes);
    Ok(Some(vec![Slot::Tensor(out.view(sizes, st, 0))]))
}

/// The f32 computation of [`sdpa`] (outputs f32).
#[allow(clippy::too_many_arguments)]
fn sdpa_f32(
    k: &mut KernelCtx,
    math: bool,
    flash: bool,
    q: GTensor,
    mut kt: GTensor,
    mut v: GTensor,
    mask: Option<GTensor>,
) -> Out {
    // A dropout_p out of range is the CPU kernel's error.
    let Ok(SdpaParams {
        dropout_p,
        causal,
        gqa,
        scale,
    }) = SdpaParams::parse(&k.op)
    else {
        return Ok(None);
    };
    // f32, or f16 throughout for the streaming kernel alone (else None: the caller converts).
    let f16 = q.dtype == DType::F16;
    // The logsumexp is one thread's two passes over a row of keys (`reduce::stats_fit`):
    // past the loop cap of CPU adapters the CPU kernel runs (70,000 keys were wrong on
    // lavapipe: op case attention/flash_long_keys).
    let keys = kt
        .sizes
        .get(kt.rank().wrapping_sub(2))
        .copied()
        .unwrap_or(0);
    if flash && !super::loops_fit(k, keys * 2, 3) {
        return Ok(None);
    }
    if (causal && mask.is_some())
        || [&q, &kt, &v]
            .iter()
            .any(|t| t.dtype != q.dtype || t.rank() < 2)
        || !matches!(q.dtype, DType::F32 | DType::F16)
    {
        return Ok(None);
    }
    // Grouped-query attention: with as many key as value heads, the query heads of one group
    // are consecutive, so [B, Hq, L, E] is [B, Hkv, g·L, E] and each key / value head meets
    // its group as one problem of g·L rows (`group`), with nothing copied; otherwise (a
    // causal flag, whose triangle is per L rows; the weights or logsumexp returned; dropout)
    // the keys and values are repeated.
    let mut group: Option<(usize, usize)> = None;
    if gqa && q.rank() >= 3 && kt.rank() >= 3 && v.rank() >= 3 {
        let hq = q.sizes[q.rank() - 3];
        let (hk, hv) = (kt.sizes[kt.rank() - 3], v.sizes[v.rank() - 3]);
        if hk == 0 || hv == 0 || !hq.is_multiple_of(hk) || !hq.is_multiple_of(hv) {
            return Ok(None);
        }
        if hk == hv && hk < hq && !causal && !math && !flash && dropout_p == 0.0 {
            group = Some((hk, hq / hk));
        } else if f16 {
            return Ok(None);
        } else {
            let (Some(kr), Some(vr)) = (
                repeat_heads(k, &kt, hq / hk)?,
                repeat_heads(k, &v, hq / hv)?,
            ) else {
                return Ok(None);
            };
            kt = kr;
            v = vr;
        }
    }
    // Batch dims with the query's head count (keys and values keep their own).
    let q_heads = |t: &GTensor| {
        let mut b = t.sizes[..t.rank() - 2].to_vec();
        if group.is_some() {
            let n = b.len();
            b[n - 1] = q.sizes[q.rank() - 3];
        }
        b
    };
    let (l, e) = (q.sizes[q.rank() - 2], q.sizes[q.rank() - 1]);
    let (s, ek) = (kt.sizes[kt.rank() - 2], kt.sizes[kt.rank() - 1]);
    let (sv, ev) = (v.sizes[v.rank() - 2], v.sizes[v.rank() - 1]);
    if ek != e || sv != s || l * s * e * ev == 0 {
        return Ok(None);
    }
    let Some(batch) = broadcast_shapes(&q.sizes[..q.rank() - 2], &q_heads(&kt))
        .and_then(|b| broadcast_shapes(&b, &q_heads(&v)))
    else {
        return Ok(None);
    };
    let nb: usize = batch.iter().product();
    if nb * l * s >= u32::MAX as usize
        || nb * l * s * 4 > k.r.dev.properties.limits.max_storage_buffer_binding_size as usize
    {
        return Ok(None);
    }
    let scale = SdpaParams::scale_for(scale, e) as f32;
    if !math && !flash && dropout_p == 0.0 && streaming_chosen() {
        let p = Streaming {
            batch: &batch,
            group: group.map_or(1, |(_, g)| g),
            causal,
            scale,
            safe: true,
        };
        if let Some(out) = streaming(k, &q, &kt, &v, mask.as_ref(), &p)? {
            return Ok(Some(vec![Slot::Tensor(out)]));
        }
    }
    if f16 {
        return Ok(None);
    }
    // The additive mask as a contiguous [B, L, S] f32 tensor.
    let mut full = batch.clone();
    full.extend([l, s]);
    let add_mask: Option<GTensor> = match (&mask, causal) {
        (Some(m), _) => {
            let Some(me) = m.expand_to(&full) else {
                return Ok(None);
            };
            let mf = match m.dtype {
                DType::F32 => me,
                // The math kernel adds a bool mask as given (0 / 1).
                DType::Bool if math => {
                    let one = k.r.wrap(&Tensor::from_vec(vec![1f32], &[]));
                    let Some(t) = elementwise(
                        k,
                        WHERE,
                        DType::F32,
                        &one,
                        Some(&Operand::S(0.0)),
                        Some(&me),
                        1.0,
                        0.0,
                    )?
                    else {
                        return Ok(None);
                    };
                    t
                }
                DType::Bool => {
                    let zero = k.r.wrap(&Tensor::from_vec(vec![0f32], &[]));
                    let Some(t) = elementwise(
                        k,
                        WHERE,
                        DType::F32,
                        &zero,
                        Some(&Operand::S(f32::NEG_INFINITY)),
                        Some(&me),
                        1.0,
                        0.0,
                    )?
                    else {
                        return Ok(None);
                    };
                    t
                }
                _ => return Ok(None),
            };
            batched(k, &mf, &batch)?
        }
        (None, true) => {
            // torch: ones(L, S).tril(0) keeps j <= i.
            let tri: Vec<f32> = (0..l * s)
                .map(|i| {
                    if i % s <= i / s {
                        0.0
                    } else {
                        f32::NEG_INFINITY
                    }
                })
                .collect();
            let t = k.r.wrap(&Tensor::from_vec(tri, &[l, s]));
            Some(t.view(vec![nb, l, s], vec![0, s, 1], t.offset))
        }
        (None, false) => None,
    };
    if (mask.is_some() || causal) && add_mask.is_none() {
        return Ok(None);
    }
    if let Some((hk, g)) = group {
        let p = Grouped {
            batch: &batch,
            hk,
            g,
            l,
            s,
            e,
            ev,
            scale,
        };
        return grouped(k, &q, &kt, &v, add_mask.as_ref(), &p);
    }
    let (Some(qb), Some(kb), Some(vb)) = (
        batched(k, &q, &batch)?,
        batched(k, &kt, &batch)?,
        batched(k, &v, &batch)?,
    ) else {
        return Ok(None);
    };
    // K^T as a view: [B, E, S].
    let ktv = kb.view(vec![nb, e, s], vec![s * e, 1, e], kb.offset);
    let Some(scores) = encode_matmul(k, &qb, &ktv, add_mask.as_ref(), nb, l, s, e, scale, 1.0)?
    else {
        return Ok(None);
    };
    // Softmax over S, row by row (a fully masked row gives zeros, as torch's attention).
    let weights = row_softmax(k, &scores, &[nb, l, s])?;
    // flash_attention_for_cpu: each row's logsumexp of the scores, [batch.., L].
    let lse = if flash {
        let mut pl = reduce::plan(&scores, &[false, false, true], false);
        pl.out_sizes = batch.iter().copied().chain([l]).collect();
        Some(reduce::encode_stats(
            k,
            &scores,
            &pl,
            reduce::StatsOp::LogSumExp,
        )?)
    } else {
        None
    };
    drop(scores);
    let weights = if dropout_p > 0.0 {
        match crate::gpu::random::masked(k, &weights, dropout_p, false)? {
            Some((w, _)) => w,
            None => return Ok(None),
        }
    } else {
        weights
    };
    let Some(out) = encode_matmul(k, &weights, &vb, None, nb, l, ev, s, 1.0, 0.0)? else {
        return Ok(None);
    };
    let mut sizes = batch.clone();
    sizes.extend([l, ev]);
    let st = crate::gpu::store::contiguous_strides(&sizes);
    let mut res = vec![Slot::Tensor(out.view(sizes, st, 0))];
    if math {
        let mut ws = batch;
        ws.extend([l, s]);
        let st = crate::gpu::store::contiguous_strides(&ws);
        res.push(Slot::Tensor(weights.view(ws, st, 0)));
    }
    if let Some(t) = lse {
        res.push(Slot::Tensor(t));
    }
    Ok(Some(res))
}

/// A `pt2web.fused_attention` node's streaming kernel on q, k, v [B, H, ., .] and the
/// additive mask (`ts`), or None (the node runs its body): the math form is chosen
/// (`backends::set_attention`), or the kernel does not apply.
pub(crate) fn fused_attention(
    k: &mut KernelCtx,
    ts: &[GTensor],
    scale: f64,
    safe: bool,
) -> crate::Result<Option<GTensor>> {
    let [q, kt, v, mask @ ..] = ts else {
        return Ok(None);
    };
    if !streaming_chosen()
        || !k.out_is(DType::F32)
        || mask.len() > 1
        || [q, kt, v].iter().any(|t| t.rank() != 4)
    {
        return Ok(None);
    }
    let Some(batch) = broadcast_shapes(&q.sizes[..2], &kt.sizes[..2])
        .and_then(|b| broadcast_shapes(&b, &v.sizes[..2]))
    else {
        return Ok(None);
    };
    let p = Streaming {
        batch: &batch,
        group: 1,
        causal: false,
        scale: scale as f32,
        safe,
    };
    streaming(k, q, kt, v, mask.first(), &p)
}

/// Whether attention runs the streaming kernel (`backends::set_attention`; natively
/// `PT2WEB_ATTENTION=math|streaming` overrides it).
fn streaming_chosen() -> bool {
    use crate::backends::{attention, Attention};
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(a) = std::env::var("PT2WEB_ATTENTION")
        .ok()
        .and_then(|s| Attention::parse(&s))
    {
        return a == Attention::Streaming;
    }
    attention() == Attention::Streaming
}

/// The uniform block of `shaders/attention.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, Default)]
pub struct AttentionMeta {
    pub rows: u32,
    pub row: u32,
    pub heads: u32,
    pub len: u32,
    pub keys: u32,
    pub e: u32,
    pub ev: u32,
    pub flags: u32,
    pub scale: f32,
    /// Flash-decoding: key ranges per row, and keys per range.
    pub splits: u32,
    pub chunk: u32,
    /// Query heads per key / value head.
    pub group: u32,
    /// (batch, head, row, column) element strides of q, k, v and the mask.
    pub q: [u32; 4],
    pub k: [u32; 4],
    pub v: [u32; 4],
    pub m: [u32; 4],
    /// Element offsets of q, k, v and the mask.
    pub offsets: [u32; 4],
}

/// The streaming kernel: one invocation per query row.
pub const ATTENTION_ROW: Variant = Variant::new(Shader::Attention, "attention_row");
/// The streaming kernel for GPUs: 64 query rows per workgroup sharing key / value tiles.
pub const ATTENTION_TILED: Variant = Variant::new(Shader::Attention, "attention_tiled");
/// Flash-decoding's two passes: each row's keys in ranges, then the ranges combined.
pub const ATTENTION_SPLIT: Variant = Variant::new(Shader::Attention, "attention_split");
pub const ATTENTION_COMBINE: Variant = Variant::new(Shader::Attention, "attention_combine");

/// Flash-decoding's key ranges for `l` query rows per problem over `s` keys: Some((ranges,
/// keys per range)) for a decode step's few rows over a long cache, where one invocation per
/// row would leave a GPU idle; ranges of at least 32 keys, at most 64 of them.
fn key_split(l: usize, s: usize) -> Option<(usize, usize)> {
    if l > 4 || s < 128 {
        return None;
    }
    let chunk = s.div_ceil(64).max(32);
    Some((s.div_ceil(chunk), chunk))
}

/// Whether the streaming kernel takes its workgroup-tiled form on this device
/// (`backends::set_attention_kernel`, natively `PT2WEB_ATTENTION_KERNEL`): with `Auto`, on
/// GPUs, not on CPU adapters and SwiftShader (which run barriers as fiber switches).
fn attention_tiled(p: &crate::gpu::DeviceProperties) -> bool {
    use crate::backends::AttentionKernel;
    #[cfg(not(target_arch = "wasm32"))]
    let chosen = std::env::var("PT2WEB_ATTENTION_KERNEL")
        .ok()
        .and_then(|s| AttentionKernel::parse(&s))
        .unwrap_or_else(crate::backends::attention_kernel);
    #[cfg(target_arch = "wasm32")]
    let chosen = crate::backends::attention_kernel();
    match chosen {
        AttentionKernel::Row => false,
        AttentionKernel::Tiled => true,
        AttentionKernel::Auto => !crate::gpu::is_software(p),
    }
}
/// Largest embedding (q / k and v) the streaming kernel holds in registers (`MAX_E`).
const STREAMING_MAX_E: usize = 128;
/// Most keys the streaming kernel takes on a CPU adapter. On lavapipe (Mesa 22-24, LLVM 15)
/// both of its forms return wrong rows from about 480 keys on (every output column but the
/// first zero, for any mask; the same shader is right at 448 and below): not a miscompile but
/// lavapipe's cap of 65,535 loop steps per invocation ([`super::LOOP_BUDGET`]), which a row
/// reaches at about 480 keys of e + ev = 128 steps each. The math form (scores materialized)
/// is right there, so longer key sequences take it on CPU adapters (the test: the op case
/// `sdpa_long_keys`).
const STREAMING_MAX_KEYS_SOFTWARE: usize = 256;

/// What the streaming kernel computes besides q, k, v and the mask.
pub(super) struct Streaming<'a> {
    /// The broadcast batch dims of q, k and v.
    pub batch: &'a [usize],
    /// Query heads per key / value head (grouped-query attention; 1 otherwise): k and v
    /// have `batch`'s last dim / `group` heads, query head h reads key / value head h / group.
    pub group: usize,
    pub causal: bool,
    pub scale: f32,
    /// A fully masked row gives zeros (attention), not NaN (`_softmax`).
    pub safe: bool,
}

/// `softmax(scale * q kᵀ + mask) v` in one dispatch of the streaming kernel
/// (`shaders/attention.wgsl`), reading q [batch.., L, E], k [batch.., S, E], v [batch.., S, Ev]
/// and the mask (f32 added, or bool: false masks) where they lie, broadcast and strided. The
/// output is contiguous [batch.., L, Ev]. None where it does not apply (more than two batch
/// dims, an embedding over [`STREAMING_MAX_E`], a dtype other than f32): the caller composes
/// the math form instead.
pub(super) fn streaming(
    k: &mut KernelCtx,
    q: &GTensor,
    kt: &GTensor,
    v: &GTensor,
    mask: Option<&GTensor>,
    p: &Streaming,
) -> crate::Result<Option<GTensor>> {
    let (l, e) = (q.sizes[q.rank() - 2], q.sizes[q.rank() - 1]);
    let s = kt.sizes[kt.rank() - 2];
    let ev = v.sizes[v.rank() - 1];
    let nb: usize = p.batch.iter().product();
    if p.batch.len() > 2
        || e > STREAMING_MAX_E
        || ev > STREAMING_MAX_E
        || (s > STREAMING_MAX_KEYS_SOFTWARE
            && key_split(l, s).is_none()
            && crate::gpu::is_software(&k.r.dev.properties))
        // Flash-decoding's ranges: a thread walks its keys, each key its e + ev elements.
        || key_split(l, s).is_some_and(|(_, chunk)| !super::loops_fit(k, chunk + 2, e + ev + 3))
        || nb * l >= u32::MAX as usize
        || !matches!(q.dtype, DType::F32 | DType::F16)
        || (q.dtype == DType::F16 && !k.r.dev.f16_enabled())
        || [q, kt, v].iter().any(|t| t.dtype != q.dtype || !k.fits(t))
        || mask.is_some_and(|m| !matches!(m.dtype, DType::F32 | DType::Bool) || !k.fits(m))
    {
        return Ok(None);
    }
    let heads = p.batch.last().copied().unwrap_or(1);
    let g = p.group.max(1);
    if !heads.is_multiple_of(g) {
        return Ok(None);
    }
    // Each operand as [B, H, rows, cols] strides (0 where it broadcasts); k and v with
    // H / group heads.
    let as4 = |t: &GTensor, rows: usize, cols: usize, kv: bool| -> Option<([u32; 4], u32)> {
        let mut full = p.batch.to_vec();
        if let (true, Some(h)) = (kv, full.last_mut()) {
            *h /= g;
        }
        full.extend([rows, cols]);
        let x = t.expand_to(&full)?;
        let mut st = [0u32; 4];
        let r = x.rank();
        for d in 0..r {
            st[4 - r + d] = u32::try_from(x.strides[d]).ok()?;
        }
        Some((st, u32::try_from(x.offset).ok()?))
    };
    let (Some((qs, qo)), Some((ks, ko)), Some((vs, vo))) = (
        as4(q, l, e, false),
        as4(kt, s, e, true),
        as4(v, s, ev, true),
    ) else {
        return Ok(None);
    };
    // A bool mask becomes 0 / -inf (one elementwise dispatch); a float one is read as is.
    let mask = match mask {
        Some(m) if m.dtype == DType::Bool => {
            let zero = k.r.wrap(&Tensor::from_vec(vec![0f32], &[]));
            let add = elementwise(
                k,
                WHERE,
                DType::F32,
                &zero,
                Some(&Operand::S(f32::NEG_INFINITY)),
                Some(m),
                1.0,
                0.0,
            )?;
            match add {
                Some(a) => Some(a),
                None => return Ok(None),
            }
        }
        m => m.cloned(),
    };
    let ms = match &mask {
        Some(m) => match as4(m, l, s, false) {
            Some(x) => Some(x),
            None => return Ok(None),
        },
        None => None,
    };
    for t in [q, kt, v].into_iter().chain(mask.as_ref()) {
        k.ensure(t)?;
    }
    let mut sizes = p.batch.to_vec();
    sizes.extend([l, ev]);
    // The output in the operands' dtype; f16 operands take the shader's f16 forms.
    let dt = q.dtype;
    let typed = |v: Variant, i: DType, o: DType| v.typed(Elems::of(i, o).unwrap_or_default());
    let out = k.new_out(dt, &sizes)?;
    let rows = nb * l;
    if rows * ev == 0 {
        return Ok(Some(out));
    }
    let (ms, mo) = ms.unwrap_or(([0; 4], 0));
    let mut meta = AttentionMeta {
        rows: rows as u32,
        heads: heads as u32,
        len: l as u32,
        keys: s as u32,
        e: e as u32,
        ev: ev as u32,
        flags: mask.is_some() as u32 | (p.causal as u32) << 1 | (p.safe as u32) << 2,
        scale: p.scale,
        group: g as u32,
        q: qs,
        k: ks,
        v: vs,
        m: ms,
        offsets: [qo, ko, vo, mo],
        ..Default::default()
    };
    let m = mask.as_ref().unwrap_or(q);
    if let Some((splits, chunk)) = key_split(l, s) {
        let parts = k.new_out(DType::F32, &[rows, splits, ev + 3])?;
        if !k.fits(&parts) {
            return Ok(None);
        }
        let (gx, gy, row) = super::grid(rows * splits, 64);
        meta.splits = splits as u32;
        meta.chunk = chunk as u32;
        meta.row = row;
        k.dispatch(
            &typed(ATTENTION_SPLIT, dt, DType::F32),
            bytemuck::bytes_of(&meta),
            &[(1, &parts), (2, q), (3, kt), (4, v), (5, m)],
            (gx, gy, 1),
        )?;
        let (gx, gy, row) = super::grid(rows, 64);
        meta.row = row;
        k.dispatch(
            &typed(ATTENTION_COMBINE, DType::F32, dt),
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &parts)],
            (gx, gy, 1),
        )?;
        return Ok(Some(out));
    }
    let maxg =
        k.r.dev
            .properties
            .limits
            .max_compute_workgroups_per_dimension as usize;
    // Tiled: x the blocks of 64 query rows, y + 65535 z the (batch, head) problems; by
    // row: one invocation per row over a 2-D grid (`row` workgroups per grid row).
    let tiled = attention_tiled(&k.r.dev.properties) && l.div_ceil(64) <= maxg && maxg >= 65535;
    let (variant, groups, row) = if tiled {
        let g = (
            l.div_ceil(64) as u32,
            nb.min(65535) as u32,
            nb.div_ceil(65535) as u32,
        );
        (ATTENTION_TILED, g, 0)
    } else {
        let (gx, gy, row) = super::grid(rows, 64);
        (ATTENTION_ROW, (gx, gy, 1), row)
    };
    meta.row = row;
    k.dispatch(
        &typed(variant, dt, dt),
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, q), (3, kt), (4, v), (5, m)],
        groups,
    )?;
    Ok(Some(out))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, On, F16};
    // q, k, v in f32 (f16 computed in f32); the mask f32 or bool.
    fn attends(i: &[DType], o: &[DType]) -> bool {
        i.len() >= 3
            && all(&i[..3], |d| d == DType::F32)
            && all(&i[3..], |d| d == DType::F32 || d == DType::Bool)
            && all(o, |d| d == DType::F32)
    }
    t.kernel(
        &[
            "aten.scaled_dot_product_attention",
            "aten._scaled_dot_product_attention_math",
        ],
        On::All,
        sdpa,
        attends,
    )
    .f16(F16::Native);
    t.kernel(
        &["aten._scaled_dot_product_flash_attention_for_cpu"],
        On::All,
        sdpa,
        attends,
    )
    .f16(F16::Mixed);
}
