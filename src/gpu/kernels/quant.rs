//! Weights quantized at load (`pt2web.linear_q`, `pt2web.embedding_q`; the format is in
//! `src/ops/matmul/quant.rs`) on the GPU, shaders/quant.wgsl: the int32 words are bound as
//! they are, and the kernels dequantize as they read. A product of at most
//! [`STREAM_ROWS`] rows (a decode step) streams the words once per output column; a longer
//! one (a prompt) dequantizes the weight into a scratch f32 buffer for the call and runs the
//! f32 matmul kernels on it.

use super::matmul::encode_matmul;
use super::views::contiguous;
use super::*;
use bytemuck::{Pod, Zeroable};

pub const LINEAR_Q: Variant = Variant::new(Shader::Quant, "linear_q");
pub const DEQUANT: Variant = Variant::new(Shader::Quant, "dequant");
pub const EMBEDDING_Q: Variant = Variant::new(Shader::Quant, "embedding_q");

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
    _p: [u32; 3],
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
    if m > STREAM_ROWS {
        // Dequantize once for the call, then the f32 product on Wᵀ.
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
    let (gx, gy, row) = grid(n, 64);
    meta.m = m as u32;
    meta.row = row;
    meta.x_off = xc.offset as u32;
    meta.has_bias = bias.is_some() as u32;
    meta.bias_off = bias.as_ref().map_or(0, |b| b.offset as u32);
    // Without a bias, the scales stand in for its binding (never read).
    let b = bias.unwrap_or_else(|| sc.clone());
    k.dispatch(
        &LINEAR_Q,
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &qw), (3, &sc), (4, &xc), (5, &b)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
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
        k.dispatch(
            &EMBEDDING_Q,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &qw), (3, &sc), (4, &ic)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
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
    t.variants(&[LINEAR_Q, DEQUANT, EMBEDDING_Q]);
}
