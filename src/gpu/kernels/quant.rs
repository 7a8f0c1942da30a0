//! Weights quantized at load (`pt2web.linear_q`, `pt2web.embedding_q`; the format is in
//! `src/ops/matmul/quant.rs`) on the GPU, shaders/quant.wgsl: the int32 words are bound as
//! they are, and the kernels dequantize as they read. A product of at most
//! [`STREAM_ROWS`] rows (a decode step) streams the words once per output column; a longer
//! one (a prompt) dequantizes the weight into a scratch f32 buffer for the call and runs the
//! f32 matmul kernels on it.
//!
//! Also PT2E's quantize / dequantize (`quantized_decomposed.*`, src/ops/quantized/) per
//! tensor with a float scale and per channel with f32 scales, shaders/affine.wgsl: one
//! invocation per element, torch's arithmetic; and dynamic quantization as the `qparams`
//! pass leaves it (`pt2web.choose_qparams`, one workgroup reducing the activation's range,
//! and the `.tensor` overloads reading its float32 scale). Float64 scales (the `.tensor`
//! overloads as exported, `choose_qparams` whose scale something else reads) run on the CPU.

use super::matmul::encode_matmul;
use super::views::contiguous;
use super::*;
use crate::gpu::fault::IndexText;
use bytemuck::{Pod, Zeroable};

pub const LINEAR_Q: Variant = Variant::new(Shader::Quant, "linear_q");
/// `linear_q` with a workgroup per 4 output columns splitting K (GPUs; see `GemvForm`).
pub const LINEAR_Q_SPLIT: Variant = Variant::new(Shader::Quant, "linear_q_split");
pub const DEQUANT: Variant = Variant::new(Shader::Quant, "dequant");
pub const EMBEDDING_Q: Variant = Variant::new(Shader::Quant, "embedding_q");
pub const QUANTIZE: Variant = Variant::new(Shader::Affine, "quantize");
pub const DEQUANTIZE: Variant = Variant::new(Shader::Affine, "dequantize");
pub const CHOOSE_QPARAMS: Variant = Variant::new(Shader::Affine, "choose_qparams");

/// Most rows `linear_q` computes in one pass (its accumulators are a vec4).
const STREAM_ROWS: usize = 4;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
struct QuantMeta {
    m: u32,
    n: u32,
    k: u32,
    bits: u32,
    group: u32,
    has_bias: u32,
    x_off: u32,
    bias_off: u32,
    row: u32,
    /// embedding_q: the fault site of an index outside the rows (`gpu::fault`).
    fault_site: u32,
    _p: [u32; 2],
}

fn is_int(d: DType) -> bool {
    matches!(d, DType::I64 | DType::I32)
}

/// The layout of a node's `qweight` / `scale` (checked as the CPU kernel checks it; None:
/// not one this kernel takes, the CPU kernel reports why).
fn layout(k: &KernelCtx, qw: &GTensor, sc: &GTensor) -> Result<Option<QuantMeta>> {
    let (bits, group) = (k.op.int("bits")?, k.op.int("group")?);
    if qw.dtype != DType::I32
        || sc.dtype != DType::F32
        || qw.rank() != 2
        || sc.rank() != 2
        || !qw.is_contiguous()
        || !sc.is_contiguous()
        || qw.offset != 0
        || sc.offset != 0
        || !(bits == 8 || bits == 4)
        || group <= 0
    {
        return Ok(None);
    }
    let (n, words) = (qw.sizes[0], qw.sizes[1]);
    let kk = words * 32 / bits as usize;
    let group = group as usize;
    if !group.is_multiple_of(32 / bits as usize)
        || !kk.is_multiple_of(group)
        || sc.sizes != [n, kk / group]
    {
        return Ok(None);
    }
    Ok(Some(QuantMeta {
        n: n as u32,
        k: kk as u32,
        bits: bits as u32,
        group: group as u32,
        ..Default::default()
    }))
}

fn linear_q(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(qw), Some(sc)) = (k.t("input"), k.t("qweight"), k.t("scale")) else {
        return Ok(None);
    };
    let Some(mut meta) = layout(k, &qw, &sc)? else {
        return Ok(None);
    };
    let bias = k.t("bias");
    let (n, kk) = (meta.n as usize, meta.k as usize);
    if x.dtype != DType::F32
        || !k.out_is(DType::F32)
        || x.rank() == 0
        || x.sizes[x.rank() - 1] != kk
        || bias
            .as_ref()
            .is_some_and(|b| b.dtype != DType::F32 || b.numel() != n || !b.is_contiguous())
        || !k.fits(&x)
        || !k.fits(&qw)
    {
        return Ok(None);
    }
    let lead: Vec<usize> = x.sizes[..x.rank() - 1].to_vec();
    let m: usize = lead.iter().product();
    let mut sizes = lead;
    sizes.push(n);
    let form = GemvForm::of(k.r.dev, kk);
    if m > STREAM_ROWS || !stream_fits(k, form, meta, m) {
        // Dequantize once for the call, then the f32 product on Wᵀ (whose K splits in parts
        // past the loop cap of CPU adapters).
        let Some(w) = dequantized(k, &qw, &sc, meta)? else {
            return Ok(None);
        };
        let Some(xc) = contiguous(k, &x)? else {
            return Ok(None);
        };
        let a = xc.view(vec![m, kk], vec![kk, 1], xc.offset);
        let wt = w.view(vec![kk, n], vec![1, kk], 0);
        let c = bias.map(|b| b.view(vec![m, n], vec![0, 1], b.offset));
        let Some(out) = encode_matmul(k, &a, &wt, c.as_ref(), 1, m, n, kk, 1.0, 1.0)? else {
            return Ok(None);
        };
        let st = contiguous_strides(&sizes);
        return Ok(Some(vec![Slot::Tensor(out.view(sizes, st, 0))]));
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    for t in [&xc, &qw, &sc] {
        k.ensure(t)?;
    }
    if let Some(b) = &bias {
        k.ensure(b)?;
    }
    let out = k.new_out(DType::F32, &sizes)?;
    if m * n == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    // One invocation, or one workgroup splitting K, per 4 output columns (shaders/quant.wgsl).
    let (variant, per_group) = match form {
        GemvForm::Thread => (&LINEAR_Q, 64),
        GemvForm::Split => (&LINEAR_Q_SPLIT, 1),
    };
    let (gx, gy, row) = grid(n.div_ceil(4), per_group);
    meta.m = m as u32;
    meta.row = row;
    meta.x_off = xc.offset as u32;
    meta.has_bias = bias.is_some() as u32;
    meta.bias_off = bias.as_ref().map_or(0, |b| b.offset as u32);
    // Without a bias, the scales stand in for its binding (never read).
    let b = bias.unwrap_or_else(|| sc.clone());
    k.dispatch(
        variant,
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &qw), (3, &sc), (4, &xc), (5, &b)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// Whether the streamed kernel's invocations stay within the loop steps of CPU adapters
/// ([`super::loops_fit`]): per word of a weight row (all of them in `linear_q`, one in 64 in
/// `linear_q_split`) the word loop's test, 4 columns unpacked and the `m` rows of x; per
/// group of words its 4 scales. A longer row (K past about 13,000 at 8 bits) is dequantized.
fn stream_fits(k: &KernelCtx, form: GemvForm, meta: QuantMeta, m: usize) -> bool {
    let words = meta.k as usize * meta.bits as usize / 32;
    let per_group = (meta.group as usize * meta.bits as usize / 32).max(1);
    let walked = match form {
        GemvForm::Thread => words,
        GemvForm::Split => words.div_ceil(64),
    };
    super::loops_fit(k, walked, 8 + m + 6usize.div_ceil(per_group))
}

/// The whole weight as a fresh f32 `[n, k]` tensor.
fn dequantized(
    k: &mut KernelCtx,
    qw: &GTensor,
    sc: &GTensor,
    mut meta: QuantMeta,
) -> Result<Option<GTensor>> {
    let (n, kk) = (meta.n as usize, meta.k as usize);
    let w = k.new_out(DType::F32, &[n, kk])?;
    if !k.fits(&w) {
        return Ok(None);
    }
    k.ensure(qw)?;
    k.ensure(sc)?;
    let words = n * kk * meta.bits as usize / 32;
    if words > 0 {
        let (gx, gy, row) = grid(words, 64);
        meta.row = row;
        k.dispatch(
            &DEQUANT,
            bytemuck::bytes_of(&meta),
            &[(1, &w), (2, qw), (3, sc)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(w))
}

fn embedding_q(k: &mut KernelCtx) -> Out {
    let (Some(qw), Some(sc), Some(idx)) = (k.t("qweight"), k.t("scale"), k.t("indices")) else {
        return Ok(None);
    };
    let Some(mut meta) = layout(k, &qw, &sc)? else {
        return Ok(None);
    };
    if !is_int(idx.dtype) || !k.out_is(DType::F32) || !k.fits(&qw) || !k.fits(&idx) {
        return Ok(None);
    }
    let Some(ic) = contiguous(k, &idx)? else {
        return Ok(None);
    };
    k.ensure(&qw)?;
    k.ensure(&sc)?;
    k.ensure(&ic)?;
    let t = ic.numel();
    let mut sizes = ic.sizes.clone();
    sizes.push(meta.k as usize);
    let out = k.new_out(DType::F32, &sizes)?;
    let words = t * meta.k as usize * meta.bits as usize / 32;
    if words > 0 {
        let (gx, gy, row) = grid(words, 64);
        meta.m = t as u32;
        meta.row = row;
        meta.x_off = ic.offset as u32;
        meta.fault_site = k.fault_site(IndexText::EmbeddingRows);
        k.dispatch(
            &EMBEDDING_Q,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &qw), (3, &sc), (4, &ic)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// Mirrors `Meta` in shaders/affine.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
struct AffineMeta {
    n: u32,
    inner: u32,
    channels: u32,
    per_channel: u32,
    qmin: i32,
    qmax: i32,
    zero_point: i32,
    x_off: u32,
    inv_scale: f32,
    scale: f32,
    row: u32,
    no_zero_points: u32,
    eps: f32,
    symmetric: u32,
    half_range: f32,
    _p: u32,
}

/// quantize_per_tensor / quantize_per_channel / dequantize_* (`.default`, and the per-tensor
/// `.tensor` forms with a float32 scale, as the `qparams` pass leaves them): None where the
/// CPU kernel is to run or to report the error (int32 values, f64 scales, bad arguments).
fn affine(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let quantize = k.target().starts_with("quantized_decomposed.quantize_");
    let Ok((dtype, qmin, qmax)) = crate::ops::quantized::qrange(&k.op) else {
        return Ok(None);
    };
    let out_dtype = if quantize {
        dtype
    } else {
        match k.op.opt_dtype("out_dtype") {
            Ok(None | Some(DType::F32)) => DType::F32,
            _ => return Ok(None),
        }
    };
    let input_ok = if quantize {
        x.dtype == DType::F32
    } else {
        x.dtype == dtype
    };
    // int32 values would wrap in the shader's i32 arithmetic (torch subtracts in int64).
    if !matches!(dtype, DType::I8 | DType::U8 | DType::I16)
        || !input_ok
        || !k.out_is(out_dtype)
        || !k.fits(&x)
    {
        return Ok(None);
    }
    let mut meta = AffineMeta {
        n: x.numel() as u32,
        inner: 1,
        channels: 1,
        qmin: qmin as i32,
        qmax: qmax as i32,
        ..Default::default()
    };
    let mut params: Vec<GTensor> = Vec::new();
    if k.target().contains("per_channel") {
        let rank = x.rank() as i64;
        let axis = k.op.int("axis")?;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&axis) {
            return Ok(None);
        }
        let axis = axis as usize;
        let c = x.sizes[axis];
        let Some(s) = k.t("scales") else {
            return Ok(None);
        };
        let z = k.t("zero_points");
        if s.dtype != DType::F32
            || s.numel() != c
            || z.as_ref()
                .is_some_and(|z| !super::ints::is_int(z.dtype) || z.numel() != c)
        {
            return Ok(None);
        }
        meta.per_channel = 1;
        meta.channels = c.max(1) as u32;
        meta.inner = x.sizes[axis + 1..].iter().product::<usize>().max(1) as u32;
        meta.no_zero_points = z.is_none() as u32;
        for t in std::iter::once(s).chain(z) {
            let Some(t) = contiguous(k, &t)? else {
                return Ok(None);
            };
            params.push(t);
        }
    } else if k.target().ends_with(".tensor") {
        // One scale and zero point from tensors: the per-channel path with one channel.
        let (Some(s), Some(z)) = (k.t("scale"), k.t("zero_point")) else {
            return Ok(None);
        };
        if s.dtype != DType::F32 || s.numel() != 1 || !is_int(z.dtype) || z.numel() != 1 {
            return Ok(None);
        }
        meta.per_channel = 1;
        meta.inner = x.numel().max(1) as u32;
        for t in [s, z] {
            let Some(t) = contiguous(k, &t)? else {
                return Ok(None);
            };
            params.push(t);
        }
    } else if k.target().ends_with(".default") {
        let (scale, zp) = (k.op.float("scale")?, k.op.int("zero_point")?);
        let Ok(zp) = i32::try_from(zp) else {
            return Ok(None);
        };
        meta.inv_scale = (1.0 / scale) as f32;
        meta.scale = scale as f32;
        meta.zero_point = zp;
    } else {
        return Ok(None);
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    k.ensure(&xc)?;
    for t in &params {
        k.ensure(t)?;
    }
    let out = k.new_out(out_dtype, &x.sizes)?;
    if x.numel() == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let (gx, gy, row) = grid(x.numel(), 64);
    meta.row = row;
    meta.x_off = xc.offset as u32;
    // Absent scales / zero points: the input stands in for their bindings (never read).
    let sc = params.first().unwrap_or(&xc).clone();
    let zp = params.get(1).unwrap_or(&xc).clone();
    let v = if quantize { &QUANTIZE } else { &DEQUANTIZE };
    k.dispatch(
        v,
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &xc), (3, &sc), (4, &zp)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// `pt2web.choose_qparams` (dynamic quantization's scale and zero point): one workgroup
/// reduces the input's range (shaders/affine.wgsl). None where the CPU kernel is to run or
/// to report the error (an empty input, an int32 range, bad arguments).
fn choose_qparams(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let Ok((dtype, qmin, qmax)) = crate::ops::quantized::qrange(&k.op) else {
        return Ok(None);
    };
    if x.dtype != DType::F32
        || x.numel() == 0
        || !matches!(dtype, DType::I8 | DType::U8 | DType::I16)
        || !k.fits(&x)
    {
        return Ok(None);
    }
    let symmetric = k.op.bool_or("symmetric", false)?;
    let mut meta = AffineMeta {
        n: x.numel() as u32,
        qmin: qmin as i32,
        qmax: qmax as i32,
        // The symmetric form's zero point (torch: 128 for uint8, else 0).
        zero_point: if dtype == DType::U8 { 128 } else { 0 },
        eps: k.op.float("eps")? as f32,
        symmetric: symmetric as u32,
        half_range: ((qmax - qmin) as f64 / 2.0) as f32,
        ..Default::default()
    };
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    k.ensure(&xc)?;
    meta.x_off = xc.offset as u32;
    let scale = k.new_out(DType::F32, &[1])?;
    let zp = k.new_out(DType::I64, &[1])?;
    k.dispatch(
        &CHOOSE_QPARAMS,
        bytemuck::bytes_of(&meta),
        &[(1, &scale), (2, &xc), (5, &zp)],
        (1, 1, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(scale), Slot::Tensor(zp)]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::On;
    fn linear(i: &[DType], o: &[DType]) -> bool {
        i.len() >= 3
            && i[0] == DType::F32
            && i[1] == DType::I32
            && i[2..].iter().all(|&d| d == DType::F32)
            && o == [DType::F32]
    }
    fn embedding(i: &[DType], o: &[DType]) -> bool {
        i.len() == 3
            && i[0] == DType::I32
            && i[1] == DType::F32
            && is_int(i[2])
            && o == [DType::F32]
    }
    t.kernel(&["pt2web.linear_q"], On::All, linear_q, linear);
    t.kernel(&["pt2web.embedding_q"], On::All, embedding_q, embedding);
    fn affine_dtypes(i: &[DType], o: &[DType]) -> bool {
        i.iter().chain(o).all(|&d| crate::gpu::store::gpu_dtype(d))
    }
    t.kernel(
        &[
            "quantized_decomposed.quantize_per_tensor",
            "quantized_decomposed.dequantize_per_tensor",
        ],
        On::Only(&["default", "tensor"]),
        affine,
        affine_dtypes,
    );
    t.kernel(
        &[
            "quantized_decomposed.quantize_per_channel",
            "quantized_decomposed.dequantize_per_channel",
        ],
        On::Only(&["default"]),
        affine,
        affine_dtypes,
    );
    fn qparams_dtypes(i: &[DType], o: &[DType]) -> bool {
        i == [DType::F32] && o == [DType::F32, DType::I64]
    }
    t.kernel(
        &["pt2web.choose_qparams"],
        On::All,
        choose_qparams,
        qparams_dtypes,
    );
    t.variants(&[
        LINEAR_Q,
        LINEAR_Q_SPLIT,
        DEQUANT,
        EMBEDDING_Q,
        QUANTIZE,
        DEQUANTIZE,
        CHOOSE_QPARAMS,
    ]);
}
