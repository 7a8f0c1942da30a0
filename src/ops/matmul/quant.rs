//! Weights quantized at load time ([`crate::passes::quantize`], `LoadOptions::weights`):
//! `pt2web.linear_q` and `pt2web.embedding_q`, a linear layer and an embedding lookup whose
//! weight is held as signed 8- or 4-bit integers with one f32 scale per group of `group`
//! consecutive input features (per output row), dequantized inside the kernel.
//!
//! # The format (one for every backend: the GPU binds the same words)
//! - `qweight`: int32 `[n, k * bits / 32]`. Row `j` of the `[n, k]` weight, element `i` at
//!   word `i * bits / 32`, bits `(i * bits) % 32` upwards; the stored field is `q + 2^(bits-1)`
//!   (unsigned), `q` in `[-(2^(bits-1) - 1), 2^(bits-1) - 1]` (symmetric: -127..127, -7..7).
//! - `scale`: f32 `[n, k / group]`; the weight is `q * scale[j, i / group]`.
//! - `group` divides `k` and holds whole words (a multiple of `32 / bits`); int8 defaults to
//!   one group per row (per-channel), int4 to groups of 32.
//!
//! Quantizing (symmetric, round half to even as torch's quantize ops): `scale = max|w| / qmax`
//! over the group, `q = round(w / scale)` (0 for an all-zero group).

use super::gemm::par_chunks;
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;

/// `pt2web.linear_q.default(input, qweight, scale, bias?, bits, group)`: `input @ Wᵀ + bias`.
pub const LINEAR: &str = "pt2web.linear_q.default";
/// `pt2web.embedding_q.default(qweight, scale, indices, bits, group)`: rows of W.
pub const EMBEDDING: &str = "pt2web.embedding_q.default";

/// A quantized weight's layout: `n` rows of `k` values, `bits` per value, `group` values
/// per scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QLayout {
    pub n: usize,
    pub k: usize,
    pub bits: usize,
    pub group: usize,
}

impl QLayout {
    /// Whether the layout is one the kernels take: 8 or 4 bits, groups of whole words that
    /// divide the row.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.bits != 8 && self.bits != 4 {
            return Err(format!("bits must be 8 or 4, got {}", self.bits));
        }
        let per_word = 32 / self.bits;
        if self.group == 0
            || !self.group.is_multiple_of(per_word)
            || !self.k.is_multiple_of(self.group)
        {
            return Err(format!(
                "group {} must be a multiple of {per_word} that divides in_features {}",
                self.group, self.k
            ));
        }
        Ok(())
    }
    /// Words per row.
    pub fn words(&self) -> usize {
        self.k * self.bits / 32
    }
    /// Scales per row.
    pub fn groups(&self) -> usize {
        self.k / self.group
    }
    /// Bytes of the quantized form (words and scales).
    pub fn bytes(&self) -> usize {
        self.n * (self.words() + self.groups()) * 4
    }
    fn qmax(&self) -> i32 {
        (1 << (self.bits - 1)) - 1
    }
    fn offset(&self) -> i32 {
        1 << (self.bits - 1)
    }
}

/// Quantize a row-major `[n, k]` f32 weight: its words and scales (see the module doc).
pub fn quantize(w: &[f32], l: QLayout) -> (Vec<i32>, Vec<f32>) {
    let qmax = l.qmax();
    let mut q = vec![0i32; l.n * l.k];
    let mut scales = vec![0f32; l.n * l.groups()];
    for j in 0..l.n {
        let row = &w[j * l.k..(j + 1) * l.k];
        for g in 0..l.groups() {
            let vals = &row[g * l.group..(g + 1) * l.group];
            let amax = vals.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = amax / qmax as f32;
            scales[j * l.groups() + g] = scale;
            for (t, &v) in vals.iter().enumerate() {
                q[j * l.k + g * l.group + t] = if scale > 0.0 {
                    ((v / scale).round_ties_even() as i32).clamp(-qmax, qmax)
                } else {
                    0
                };
            }
        }
    }
    (pack(&q, l), scales)
}

/// The words of a row-major `[n, k]` weight of integers in `[-2^(bits-1), 2^(bits-1) - 1]`
/// (see the module doc; an already quantized weight, e.g. PT2E's int8, is packed as it is).
pub fn pack(q: &[i32], l: QLayout) -> Vec<i32> {
    let off = l.offset();
    let mask = (1u32 << l.bits) - 1;
    let mut words = vec![0i32; l.n * l.words()];
    for j in 0..l.n {
        for i in 0..l.k {
            let field = ((q[j * l.k + i] + off) as u32 & mask) << ((i * l.bits) % 32);
            let wi = j * l.words() + i * l.bits / 32;
            words[wi] = (words[wi] as u32 | field) as i32;
        }
    }
    words
}

/// Row `j` of the weight, dequantized into `out` (`k` values).
fn dequant_row(words: &[i32], scales: &[f32], l: QLayout, j: usize, out: &mut [f32]) {
    let per_word = 32 / l.bits;
    let mask = (1u32 << l.bits) - 1;
    let off = l.offset() as f32;
    let row = &words[j * l.words()..(j + 1) * l.words()];
    let sc = &scales[j * l.groups()..(j + 1) * l.groups()];
    for (wi, &w) in row.iter().enumerate() {
        let s = sc[wi * per_word / l.group];
        for t in 0..per_word {
            let q = ((w as u32 >> (t * l.bits)) & mask) as f32 - off;
            out[wi * per_word + t] = q * s;
        }
    }
}

/// The whole weight dequantized, row-major `[n, k]`.
pub fn dequantize(words: &[i32], scales: &[f32], l: QLayout) -> Vec<f32> {
    let mut out = vec![0f32; l.n * l.k];
    for j in 0..l.n {
        dequant_row(words, scales, l, j, &mut out[j * l.k..(j + 1) * l.k]);
    }
    out
}

/// The layout of a node's `qweight` and `scale` (`k` from the words), checked.
fn layout_of(
    qw: &[usize],
    sc: &[usize],
    bits: i64,
    group: i64,
) -> std::result::Result<QLayout, String> {
    let (&[n, words], &[sn, groups]) = (qw, sc) else {
        return Err(format!(
            "qweight and scale must be 2-D, got {qw:?} and {sc:?}"
        ));
    };
    if !(bits == 8 || bits == 4) || group <= 0 {
        return Err(format!(
            "bits {bits} / group {group}: expected 8 or 4 and a positive group"
        ));
    }
    let l = QLayout {
        n,
        k: words * 32 / bits as usize,
        bits: bits as usize,
        group: group as usize,
    };
    l.check()?;
    if sn != n || groups != l.groups() {
        return Err(format!(
            "scale {sc:?} does not fit qweight {qw:?} with groups of {group}: expected [{n}, {}]",
            l.groups()
        ));
    }
    Ok(l)
}

fn node_layout(ctx: &OpCtx, qw: &Tensor, sc: &Tensor) -> Result<QLayout> {
    if qw.dtype != DType::I32 || sc.dtype != DType::F32 {
        return Err(ctx.err(format!(
            "qweight must be int32 and scale float32, got {} and {}",
            qw.dtype, sc.dtype
        )));
    }
    layout_of(&qw.sizes, &sc.sizes, ctx.int("bits")?, ctx.int("group")?).map_err(|e| ctx.err(e))
}

/// Most rows a product streams the quantized weight for; more, and the weight is
/// dequantized once for the call and the f32 GEMM runs.
const STREAM_ROWS: usize = 4;

fn linear_q(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let (qw, sc) = (ctx.tensor("qweight")?, ctx.tensor("scale")?);
    let bias = ctx.opt_tensor("bias")?;
    let l = node_layout(ctx, &qw, &sc)?;
    if x.dtype != DType::F32 || x.rank() == 0 || x.sizes[x.rank() - 1] != l.k {
        return Err(ctx.err(format!(
            "input must be float32 [..., {}], got {} {:?}",
            l.k, x.dtype, x.sizes
        )));
    }
    let bias = match &bias {
        Some(b) if b.dtype == DType::F32 && b.numel() == l.n => Some(b.contiguous().to_vec()),
        Some(b) => {
            return Err(ctx.err(format!(
                "bias must be float32 with {} values, got {} {:?}",
                l.n, b.dtype, b.sizes
            )))
        }
        None => None,
    };
    let m: usize = x.sizes[..x.rank() - 1].iter().product();
    let mut sizes = x.sizes[..x.rank() - 1].to_vec();
    sizes.push(l.n);
    let mut out = vec![0f32; m * l.n];
    if m <= STREAM_ROWS {
        // Each output column streams its row of words once for all m rows, read where the
        // words lie (no copy of the weight).
        let xv: Vec<f32> = x.contiguous().to_vec();
        let block = dot_block(l.group);
        // Σx per block of each row: the fields' offset is subtracted once per block.
        let xsum: Vec<f32> = xv.chunks_exact(block).map(|c| c.iter().sum()).collect();
        let blocks = l.k / block;
        let mut cols = vec![0f32; l.n * m];
        super::gemm::with_contiguous::<i32, _>(&qw, |words| {
            super::gemm::with_contiguous::<f32, _>(&sc, |scales| {
                // Little-endian words: element i of a row is byte i (8 bits) or the low / high
                // nibble of byte i / 2 (4 bits).
                let bytes: &[u8] = bytemuck::cast_slice(words);
                let row_bytes = l.words() * 4;
                par_chunks(&mut cols, COLS * m, COLS * l.k * m, |c, o| {
                    for (jj, oc) in o.chunks_mut(m).enumerate() {
                        let j = c * COLS + jj;
                        let w = &bytes[j * row_bytes..(j + 1) * row_bytes];
                        let s = &scales[j * l.groups()..(j + 1) * l.groups()];
                        for (r, v) in oc.iter_mut().enumerate() {
                            let row = Row {
                                x: &xv[r * l.k..(r + 1) * l.k],
                                xsum: &xsum[r * blocks..(r + 1) * blocks],
                                block,
                                group: l.group,
                            };
                            *v = match l.bits {
                                8 => dot_q::<8>(&row, w, s),
                                _ => dot_q::<4>(&row, w, s),
                            };
                        }
                    }
                });
            })
        });
        for r in 0..m {
            for j in 0..l.n {
                out[r * l.n + j] = cols[j * m + r];
            }
        }
    } else {
        let deq = super::gemm::with_contiguous::<i32, _>(&qw, |words| {
            super::gemm::with_contiguous::<f32, _>(&sc, |scales| dequantize(words, scales, l))
        });
        let w = Tensor::from_vec(deq, &[l.n, l.k]);
        let wt = super::transpose_last2(&w);
        let y = super::matmul_impl(ctx, &x, &wt, 1.0, None, DType::F32)?;
        out = y.contiguous().to_vec();
    }
    if let Some(b) = bias {
        for row in out.chunks_mut(l.n) {
            for (v, b) in row.iter_mut().zip(&b) {
                *v += b;
            }
        }
    }
    Ok(vec![RValue::Tensor(Tensor::from_vec(out, &sizes))])
}

/// Output columns per parallel chunk of the streaming product.
const COLS: usize = 16;

/// One row of the input, as the streaming product reads it.
struct Row<'a> {
    x: &'a [f32],
    /// Σx over each block.
    xsum: &'a [f32],
    /// Values per block (within one group).
    block: usize,
    group: usize,
}

/// `x · row` for one quantized row (`bytes`, its `scales`), block by block within a group:
/// Σ field·x in 8 lanes, minus the fields' offset times Σx, scaled once. With AVX2 and FMA
/// (detected at run time) the loop compiles to 8-wide vectors and fused multiply-adds;
/// elsewhere to the target's baseline (SSE2, wasm simd128) with separate multiplies and adds
/// (a scalar `mul_add` there is a libm call).
fn dot_q<const BITS: usize>(row: &Row, bytes: &[u8], scales: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        static FMA: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let fma = *FMA.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        });
        if fma {
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            return unsafe { dot_q_fma::<BITS>(row, bytes, scales) };
        }
    }
    dot_q_body::<BITS, false>(row, bytes, scales)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_q_fma<const BITS: usize>(row: &Row, bytes: &[u8], scales: &[f32]) -> f32 {
    dot_q_body::<BITS, true>(row, bytes, scales)
}

#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

#[inline(always)]
fn dot_q_body<const BITS: usize, const FMA: bool>(row: &Row, bytes: &[u8], scales: &[f32]) -> f32 {
    let off = (1u32 << (BITS - 1)) as f32;
    let block = row.block;
    let block_bytes = block * BITS / 8;
    let mut total = 0f32;
    for (b, xs) in row.x.chunks_exact(block).enumerate() {
        let s = scales[b * block / row.group];
        let bs = &bytes[b * block_bytes..(b + 1) * block_bytes];
        let mut acc = [0f32; 8];
        let mut tail = 0f32;
        if BITS == 8 {
            let (qc, xc) = (bs.chunks_exact(8), xs.chunks_exact(8));
            tail = qc
                .remainder()
                .iter()
                .zip(xc.remainder())
                .map(|(&q, x)| q as f32 * x)
                .sum();
            for (q, xv) in qc.zip(xc) {
                for i in 0..8 {
                    acc[i] = madd::<FMA>(q[i] as f32, xv[i], acc[i]);
                }
            }
        } else {
            // 4 bits: a group is a multiple of 8 values, so whole chunks of 4 bytes.
            for (q, xv) in bs.chunks_exact(4).zip(xs.chunks_exact(8)) {
                for i in 0..4 {
                    acc[2 * i] = madd::<FMA>((q[i] & 15) as f32, xv[2 * i], acc[2 * i]);
                    acc[2 * i + 1] = madd::<FMA>((q[i] >> 4) as f32, xv[2 * i + 1], acc[2 * i + 1]);
                }
            }
        }
        total += s * (acc.iter().sum::<f32>() + tail - off * row.xsum[b]);
    }
    total
}

/// The block `dot_q` unpacks at once: a whole group, or 64 values of a larger group that 64
/// divides.
fn dot_block(group: usize) -> usize {
    if group > 64 && group.is_multiple_of(64) {
        64
    } else {
        group
    }
}

/// The error of an index outside the rows of a quantized embedding (the GPU's faults too).
pub(crate) fn bad_row(index: i64, rows: impl std::fmt::Display) -> String {
    format!("index {index} is out of range for an embedding of {rows} rows")
}

fn embedding_q(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (qw, sc) = (ctx.tensor("qweight")?, ctx.tensor("scale")?);
    let idx = ctx.tensor("indices")?;
    let l = node_layout(ctx, &qw, &sc)?;
    if !matches!(idx.dtype, DType::I64 | DType::I32) {
        return Err(ctx.err(format!("indices must be int64 or int32, got {}", idx.dtype)));
    }
    let ids: Vec<i64> = idx.contiguous().to_vec();
    if let Some(&bad) = ids.iter().find(|&&id| id < 0 || id as usize >= l.n) {
        return Err(ctx.err(bad_row(bad, l.n)));
    }
    let mut out = vec![0f32; ids.len() * l.k];
    super::gemm::with_contiguous::<i32, _>(&qw, |words| {
        super::gemm::with_contiguous::<f32, _>(&sc, |scales| {
            for (i, &id) in ids.iter().enumerate() {
                let o = &mut out[i * l.k..(i + 1) * l.k];
                dequant_row(words, scales, l, id as usize, o);
            }
        })
    });
    let mut sizes = idx.sizes.clone();
    sizes.push(l.k);
    Ok(vec![RValue::Tensor(Tensor::from_vec(out, &sizes))])
}

fn meta_layout(ctx: &mut MetaCtx) -> RuleResult<QLayout> {
    let (qw, sc) = (ctx.tensor("qweight")?, ctx.tensor("scale")?);
    if qw.dtype != DType::I32 || sc.dtype != DType::F32 {
        return Err(format!(
            "qweight must be int32 and scale float32, got {} and {}",
            qw.dtype, sc.dtype
        ));
    }
    let (bits, group) = (ctx.int("bits")?, ctx.int("group")?);
    layout_of(&qw.sizes, &sc.sizes, bits, group)
}

fn linear_q_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let l = meta_layout(ctx)?;
    let x = ctx.tensor("input")?;
    if x.dtype != DType::F32 || x.rank() == 0 || x.sizes[x.rank() - 1] != l.k {
        return Err(format!(
            "input must be float32 [..., {}], got {} {:?}",
            l.k, x.dtype, x.sizes
        ));
    }
    let mut s = x.sizes[..x.rank() - 1].to_vec();
    s.push(l.n);
    Ok(vec![MValue::Tensor(MetaTensor::new(DType::F32, s))])
}

fn embedding_q_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let l = meta_layout(ctx)?;
    let idx = ctx.tensor("indices")?;
    let mut s = idx.sizes.clone();
    s.push(l.k);
    Ok(vec![MValue::Tensor(MetaTensor::new(DType::F32, s))])
}

pub(super) fn register(r: &mut OpTable) {
    r.define(LINEAR, linear_q, linear_q_rule);
    r.define(EMBEDDING, embedding_q, embedding_q_rule);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_round_trips_within_half_a_step() {
        for (bits, group) in [(8, 16), (4, 8), (4, 16)] {
            let l = QLayout {
                n: 3,
                k: 32,
                bits,
                group,
            };
            l.check().unwrap();
            let w: Vec<f32> = (0..l.n * l.k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
                .collect();
            let (words, scales) = quantize(&w, l);
            assert_eq!(words.len(), l.n * l.words());
            let back = dequantize(&words, &scales, l);
            for (i, (a, b)) in w.iter().zip(&back).enumerate() {
                let s = scales[(i / l.k) * l.groups() + (i % l.k) / group];
                assert!(
                    (a - b).abs() <= s * 0.5 + 1e-6,
                    "{bits}-bit {i}: {a} vs {b}"
                );
            }
        }
        // All-zero groups quantize to zeros with a zero scale.
        let l = QLayout {
            n: 1,
            k: 8,
            bits: 4,
            group: 8,
        };
        let (words, scales) = quantize(&[0.0; 8], l);
        assert_eq!(scales, vec![0.0]);
        assert_eq!(dequantize(&words, &scales, l), vec![0.0; 8]);
    }

    #[test]
    fn layouts_that_split_words_are_refused() {
        let l = QLayout {
            n: 1,
            k: 30,
            bits: 4,
            group: 6,
        };
        assert!(l.check().is_err());
    }
}
