//! Op family: attention. `scaled_dot_product_attention` (training IR; core ATen decomposes it
//! into bmm/_softmax/where, run by other families) and the fused CPU forms a program may still
//! hold: `_scaled_dot_product_flash_attention_for_cpu` (output + logsumexp) and
//! `_scaled_dot_product_attention_math` (output + attention weights).
//!
//! Per (batch, head): scores = scale · Q Kᵀ (GEMM), + float mask / -inf where a bool mask is
//! false or above the causal diagonal, a row softmax where fully masked rows give 0 (as eager
//! and the `_safe_softmax` decomposition do), then P V (GEMM). Batch dims broadcast like
//! matmul; `enable_gqa` repeats each key/value head for its group of query heads.

/// `pt2web.fused_attention`: core ATen's attention made one node by the attention pass.
pub mod fused;
/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

use super::matmul::gemm::{gemm, par_chunks, Mat};
use super::reduce::softmax::exp_shifted;
use super::reduce::{compute_float, typed, with_real, Real};
use super::{OpCtx, OpTable};
use crate::cpu::{broadcast_shapes, Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::RValue;

/// The parameters of scaled_dot_product_attention and its math / flash forms, parsed once
/// for every backend (the GPU kernel is `src/gpu/kernels/attention.rs`; the shape rule,
/// `meta.rs`, reads `gqa`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SdpaParams {
    /// In `[0, 1)`.
    pub dropout_p: f64,
    pub causal: bool,
    /// `enable_gqa`: each key/value head serves a group of query heads.
    pub gqa: bool,
    /// `None`: `1 / sqrt(embedding size)`.
    pub scale: Option<f64>,
}

impl SdpaParams {
    pub fn parse(ctx: &OpCtx) -> Result<SdpaParams> {
        let dropout_p = ctx.float_or("dropout_p", 0.0)?;
        if !(0.0..1.0).contains(&dropout_p) {
            return Err(ctx.err(format!("dropout_p should be in [0, 1), got {dropout_p}")));
        }
        Ok(SdpaParams {
            dropout_p,
            causal: ctx.bool_or("is_causal", false)?,
            gqa: ctx.bool_or("enable_gqa", false)?,
            scale: ctx.opt_float("scale")?,
        })
    }

    /// The softmax scale for an embedding size of `e`.
    pub fn scale_for(scale: Option<f64>, e: usize) -> f64 {
        scale.unwrap_or(1.0 / (e as f64).sqrt())
    }
}

/// Each target once, with its CPU kernel and its shape rule (`meta.rs`).
pub(crate) fn register(r: &mut OpTable) {
    for t in [
        "aten.scaled_dot_product_attention.default",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        "aten._scaled_dot_product_attention_math.default",
    ] {
        r.define(t, sdpa, meta::sdpa);
    }
    fused::register(r);
}

/// What the caller wants besides the output.
#[derive(Clone, Copy, PartialEq)]
enum Extra {
    None,
    LogSumExp,
    Weights,
}

/// The additive mask of one (batch, head): `None` (no mask), or an L×S slice per batch.
enum Mask<R> {
    None,
    /// Additive L×S blocks, one per (batch, head) problem: `blocks[block_of[b]]`. A mask that
    /// broadcasts over heads (`[B, 1, L, S]`) is stored once per distinct block, not per head.
    Add {
        blocks: Vec<R>,
        block_of: Vec<usize>,
    },
}

impl<R> Mask<R> {
    /// A full `[nb, L, S]` mask (tests).
    #[cfg(test)]
    fn full(v: Vec<R>, nb: usize) -> Mask<R> {
        Mask::Add {
            blocks: v,
            block_of: (0..nb).collect(),
        }
    }
}

/// The distinct L×S blocks of `mx` (a mask broadcast to `[batch.., L, S]`, possibly with zero
/// strides) and, per flat batch index, which block it uses.
fn mask_blocks<R: Elem>(
    mx: &Tensor,
    nb: usize,
    conv: impl Fn(&Tensor) -> Vec<R>,
) -> (Vec<R>, Vec<usize>) {
    let r = mx.rank();
    let (l, s) = (mx.sizes[r - 2], mx.sizes[r - 1]);
    let bdims = &mx.sizes[..r - 2];
    let mut seen: Vec<usize> = Vec::new();
    let mut blocks = Vec::new();
    let mut block_of = Vec::with_capacity(nb);
    for b in 0..nb {
        let (mut rem, mut off) = (b, mx.offset);
        for d in (0..bdims.len()).rev() {
            off += (rem % bdims[d]) * mx.strides[d];
            rem /= bdims[d];
        }
        match seen.iter().position(|&o| o == off) {
            Some(i) => block_of.push(i),
            None => {
                seen.push(off);
                block_of.push(seen.len() - 1);
                let v = mx.view_with(vec![l, s], mx.strides[r - 2..].to_vec(), off);
                blocks.extend(conv(&v));
            }
        }
    }
    (blocks, block_of)
}

/// `t` ([..., m, n]) broadcast to [batch..., m, n] as a contiguous vector of `R`.
fn expand_batch<R: Elem>(t: &Tensor, batch: &[usize]) -> Result<Vec<R>> {
    let r = t.rank();
    let mut shape = batch.to_vec();
    shape.extend_from_slice(&t.sizes[r - 2..]);
    Ok(if t.sizes == shape {
        t.to_vec::<R>()
    } else {
        t.expand_to(&shape)?.to_vec::<R>()
    })
}

fn sdpa(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let q = ctx.tensor("query")?;
    let k = ctx.tensor("key")?;
    let v = ctx.tensor("value")?;
    let t = ctx.target();
    let extra = if t.contains("flash_attention_for_cpu") {
        Extra::LogSumExp
    } else if t.contains("attention_math") {
        Extra::Weights
    } else {
        Extra::None
    };
    let mask = ctx.opt_tensor("attn_mask")?;
    let params = SdpaParams::parse(ctx)?;
    if params.causal && mask.is_some() {
        return Err(ctx.err("an explicit attn_mask should not be set when is_causal=True"));
    }
    let opts = Opts {
        params,
        extra,
        safe: true,
    };
    let target = ctx.node.target.clone();
    let (out, extra_t) = attend(
        &target,
        &q,
        &k,
        &v,
        mask.as_ref(),
        &opts,
        &mut ctx.state.rng,
    )?;
    let mut res = vec![out.into()];
    if let Some(x) = extra_t {
        res.push(x.into());
    }
    Ok(res)
}

/// How one attention computes, besides its tensors.
pub(crate) struct Opts {
    pub params: SdpaParams,
    extra: Extra,
    /// A fully masked row gives zeros (eager attention, `_safe_softmax`) rather than NaN
    /// (`_softmax` of a row of -inf).
    pub safe: bool,
}

impl Opts {
    /// A fused attention node's: scale given, no dropout, causality or extra output.
    pub(crate) fn fused(scale: f64, safe: bool) -> Opts {
        Opts {
            params: SdpaParams {
                dropout_p: 0.0,
                causal: false,
                gqa: false,
                scale: Some(scale),
            },
            extra: Extra::None,
            safe,
        }
    }
}

/// Attention of `q` `[.., L, E]` over `k` `[.., S, E]` and `v` `[.., S, Ev]` with an optional
/// mask (bool: attend where true; else added to the scores) broadcast to `[.., L, S]`; the
/// output `[.., L, Ev]` and the extra output `opts` asks for. Errors name `target`.
pub(crate) fn attend(
    target: &str,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    opts: &Opts,
    rng: &mut crate::runtime::Rng,
) -> Result<(Tensor, Option<Tensor>)> {
    let err = |msg: String| crate::error::Error::op(target, msg);
    let extra = opts.extra;
    let SdpaParams {
        dropout_p,
        causal,
        gqa,
        scale,
    } = opts.params;
    if q.rank() < 2 || k.rank() < 2 || v.rank() < 2 {
        return Err(err(format!(
            "query, key and value need at least 2 dims, got {:?}, {:?}, {:?}",
            q.sizes, k.sizes, v.sizes
        )));
    }
    let Some(cf) = compute_float(q.dtype) else {
        return Err(err(format!(
            "expected a floating point query, got {}",
            q.dtype
        )));
    };
    if k.dtype != q.dtype || v.dtype != q.dtype {
        return Err(err(format!(
            "expected query, key and value to have the same dtype, got {}, {} and {}",
            q.dtype, k.dtype, v.dtype
        )));
    }
    let (l, e) = (q.sizes[q.rank() - 2], q.sizes[q.rank() - 1]);
    let (s, ek) = (k.sizes[k.rank() - 2], k.sizes[k.rank() - 1]);
    let (sv, ev) = (v.sizes[v.rank() - 2], v.sizes[v.rank() - 1]);
    if ek != e || sv != s {
        return Err(err(format!(
            "shape mismatch: query {:?}, key {:?}, value {:?}",
            q.sizes, k.sizes, v.sizes
        )));
    }
    // Grouped-query attention reads key / value head h / g for query head h where they lie
    // (no repeated copy): the batch is broadcast with the query's head count, the keys and
    // values expanded to it with their own.
    let heads = if gqa && q.rank() >= 3 && k.rank() >= 3 && v.rank() >= 3 {
        let hq = q.sizes[q.rank() - 3];
        let (hk, hv) = (k.sizes[k.rank() - 3], v.sizes[v.rank() - 3]);
        if hk == 0 || hv == 0 || !hq.is_multiple_of(hk) || !hq.is_multiple_of(hv) {
            return Err(err(format!("enable_gqa: query heads ({hq}) must be a multiple of key ({hk}) and value ({hv}) heads")));
        }
        Some(Heads { hq, hk, hv })
    } else {
        None
    };
    let with_heads = |t: &Tensor, h: usize| {
        let mut b = t.sizes[..t.rank() - 2].to_vec();
        if heads.is_some() {
            let n = b.len();
            b[n - 1] = h;
        }
        b
    };
    let hq = heads.map_or(0, |h| h.hq);
    let bad_batch = || {
        err(format!(
            "batch dims of query {:?}, key {:?} and value {:?} cannot be broadcast",
            q.sizes, k.sizes, v.sizes
        ))
    };
    let batch =
        broadcast_shapes(&q.sizes[..q.rank() - 2], &with_heads(k, hq)).ok_or_else(bad_batch)?;
    let batch = broadcast_shapes(&batch, &with_heads(v, hq)).ok_or_else(bad_batch)?;
    let kv_batch = |h: usize| {
        let mut b = batch.clone();
        if heads.is_some() {
            let n = b.len();
            b[n - 1] = h;
        }
        b
    };
    let (k_batch, v_batch) = match heads {
        Some(h) => (kv_batch(h.hk), kv_batch(h.hv)),
        None => (batch.clone(), batch.clone()),
    };
    let nb: usize = batch.iter().product();
    let scale = SdpaParams::scale_for(scale, e);
    // Dropout keeps each weight with probability 1 - p and rescales (random, as in eager),
    // one draw per weight in [batch, L, S] order, kept when below 1 - p (as `dropout`, so the
    // GPU's dropout kernel draws the same mask).
    let keep: Option<Vec<bool>> = (dropout_p > 0.0).then(|| {
        (0..nb * l * s)
            .map(|_| rng.uniform() < 1.0 - dropout_p)
            .collect()
    });
    let mut out_sizes = batch.clone();
    out_sizes.extend([l, ev]);
    let (out, extra_t) = with_real!(cf, R => {
        let qv = expand_batch::<R>(q, &batch)?;
        let kv = expand_batch::<R>(k, &k_batch)?;
        let vv = expand_batch::<R>(v, &v_batch)?;
        let mask = match mask {
            None => Mask::None,
            Some(m) => {
                let mut shape = batch.clone();
                shape.extend([l, s]);
                let mx = m.expand_to(&shape).map_err(|_| err(format!("attn_mask of shape {:?} cannot be broadcast to {:?}", m.sizes, shape)))?;
                // The math kernel adds its mask as given (a bool mask adds 0/1); the public op
                // turns a bool mask into 0 / -inf first.
                let bool_to_add = m.dtype == DType::Bool && extra != Extra::Weights;
                let (blocks, block_of) = mask_blocks(&mx, nb, |v| if bool_to_add {
                    v.to_vec::<bool>().into_iter().map(|b| if b { R::ZERO } else { R::NEG_INF }).collect()
                } else {
                    v.to_vec::<R>()
                });
                Mask::Add { blocks, block_of }
            }
        };
        let job = Job { l, s, e, ev, scale: R::from_f64(scale), causal, mask: &mask, keep: keep.as_deref(), dropout_p, block: score_block(), keys: KEY_BLOCK, safe: opts.safe, heads };
        let mut out = vec![R::ZERO; nb * l * ev];
        let mut lse = vec![R::ZERO; if extra == Extra::LogSumExp { nb * l } else { 0 }];
        let mut weights = vec![R::ZERO; if extra == Extra::Weights { nb * l * s } else { 0 }];
        let one_batch = nb == 1;
        if extra == Extra::None {
            // (batch, head) problems are independent: spread them over threads.
            let failed = std::sync::Mutex::new(None);
            par_chunks(&mut out, l * ev, l * s * (e + ev), |b, o| {
                if let Err(err) = job.run(b, &qv, &kv, &vv, o, one_batch, None, None) {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
                }
            });
            if let Some(err) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
                return Err(err);
            }
        } else {
            for b in 0..nb {
                let lse_b = (extra == Extra::LogSumExp).then(|| &mut lse[b * l..(b + 1) * l]);
                let w_b = (extra == Extra::Weights).then(|| &mut weights[b * l * s..(b + 1) * l * s]);
                job.run(b, &qv, &kv, &vv, &mut out[b * l * ev..(b + 1) * l * ev], true, lse_b, w_b)?;
            }
        }
        let out = typed(out, &out_sizes, q.dtype)?;
        let extra_t = match extra {
            Extra::None => None,
            // logsumexp stays in the compute type ([batch.., L]).
            Extra::LogSumExp => Some(Tensor::from_vec(lse, &out_sizes[..out_sizes.len() - 1])),
            Extra::Weights => {
                let mut ws = batch.clone();
                ws.extend([l, s]);
                Some(typed(weights, &ws, q.dtype)?)
            }
        };
        (out, extra_t)
    });
    Ok((out, extra_t))
}

/// One attention problem's shapes and options, shared by every (batch, head).
struct Job<'a, R> {
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
    scale: R,
    causal: bool,
    mask: &'a Mask<R>,
    keep: Option<&'a [bool]>,
    dropout_p: f64,
    /// Scratch elements per block of scores (`SCORE_BLOCK`; smaller in tests). `usize::MAX`:
    /// the math form, one full L×S matrix.
    block: usize,
    /// Keys per block of the fused form (`KEY_BLOCK`; smaller in tests).
    keys: usize,
    /// A fully masked row gives zeros, else NaN (see [`Opts::safe`]).
    safe: bool,
    /// Grouped-query attention: the head counts (keys and values indexed by their own).
    heads: Option<Heads>,
}

/// Query, key and value heads of a grouped-query attention.
#[derive(Clone, Copy)]
struct Heads {
    hq: usize,
    hk: usize,
    hv: usize,
}

impl Heads {
    /// The key / value problem (of `h` heads) that query problem `b` reads.
    fn of(self, b: usize, h: usize) -> usize {
        (b / self.hq) * h + (b % self.hq) / (self.hq / h)
    }
}

/// Scratch budget for one block of scores (elements): queries are processed in row blocks so
/// that long sequences never materialize a full L×S matrix per (batch, head).
const SCORE_BLOCK: usize = 1 << 16;

/// Keys per block of the fused form: a block of query rows meets the keys in blocks of this
/// many, with the softmax carried from block to block (its running max and sum).
const KEY_BLOCK: usize = 256;

/// The score block of the chosen implementation ([`crate::backends::attention`]): `Math`
/// takes every query row at once (one full L×S matrix), `Streaming` blocks of `SCORE_BLOCK`.
fn score_block() -> usize {
    match crate::backends::attention() {
        crate::backends::Attention::Math => usize::MAX,
        crate::backends::Attention::Streaming => SCORE_BLOCK,
    }
}

impl<R: Real + super::matmul::gemm::Float> Job<'_, R> {
    /// Attention of batch `b` into `out` (L×Ev). `lse` (L) and `weights` (L×S), when given,
    /// receive each row's logsumexp and the final attention weights.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        b: usize,
        q: &[R],
        k: &[R],
        v: &[R],
        out: &mut [R],
        threads: bool,
        mut lse: Option<&mut [R]>,
        mut weights: Option<&mut [R]>,
    ) -> Result<()> {
        if weights.is_none() && self.block != usize::MAX {
            return self.run_fused(b, q, k, v, out, threads, lse);
        }
        let (l, s, e, ev) = (self.l, self.s, self.e, self.ev);
        let (kb, vb) = self.kv_problems(b);
        let rows = (self.block / s.max(1)).clamp(1, l.max(1));
        let mut p = vec![<R as Real>::ZERO; rows * s];
        let mut r0 = 0;
        while r0 < l {
            let m = rows.min(l - r0);
            let p = &mut p[..m * s];
            // scores = scale * Q Kᵀ; Kᵀ is K read with swapped strides.
            let qa = Mat::new(q, (b * l + r0) * e, e, 1);
            let kt = Mat::new(k, kb * s * e, 1, e);
            gemm(
                m,
                s,
                e,
                qa,
                kt,
                p,
                0,
                s,
                1,
                self.scale,
                <R as Real>::ZERO,
                threads,
            )?;
            if let Mask::Add { blocks, block_of } = self.mask {
                let base = block_of[b] * l * s;
                let mrows = &blocks[base + r0 * s..base + (r0 + m) * s];
                p.iter_mut().zip(mrows).for_each(|(x, &a)| *x += a);
            }
            for (r, row) in p.chunks_exact_mut(s.max(1)).enumerate().take(m) {
                let i = r0 + r;
                if self.causal {
                    // Query i attends to keys j <= i (torch's tril of an L×S matrix).
                    row.iter_mut()
                        .skip(i + 1)
                        .for_each(|x| *x = <R as Real>::NEG_INF);
                }
                let z = softmax_row(row, self.safe);
                if let Some(lse) = lse.as_deref_mut() {
                    lse[i] = z;
                }
                if let Some(keep) = self.keep {
                    let inv = R::from_f64(1.0 / (1.0 - self.dropout_p));
                    let kr = &keep[(b * l + i) * s..(b * l + i + 1) * s];
                    let drop = |(x, &k): (&mut R, &bool)| {
                        *x = if k { *x * inv } else { <R as Real>::ZERO }
                    };
                    row.iter_mut().zip(kr).for_each(drop);
                }
            }
            if let Some(w) = weights.as_deref_mut() {
                w[r0 * s..(r0 + m) * s].copy_from_slice(p);
            }
            let pa = Mat::new(&*p, 0, s, 1);
            let vm = Mat::new(v, vb * s * ev, ev, 1);
            gemm(
                m,
                ev,
                s,
                pa,
                vm,
                out,
                r0 * ev,
                ev,
                1,
                <R as Real>::ONE,
                <R as Real>::ZERO,
                threads,
            )?;
            r0 += m;
        }
        Ok(())
    }

    /// The key and value problems query problem `b` reads.
    fn kv_problems(&self, b: usize) -> (usize, usize) {
        match self.heads {
            Some(h) => (h.of(b, h.hk), h.of(b, h.hv)),
            None => (b, b),
        }
    }

    /// The fused form of [`Job::run`] (no weights asked for): each block of query rows meets
    /// the keys a block at a time (`keys`) — scores, mask, causal cut and softmax on the block
    /// while it is in cache, then its product with the values added into the output — with
    /// each row's running max and sum carried across key blocks and the output rescaled when
    /// the max grows (the online softmax of flash attention). The scratch is one block of
    /// scores; a causal block skips the keys past its last row.
    #[allow(clippy::too_many_arguments)]
    fn run_fused(
        &self,
        b: usize,
        q: &[R],
        k: &[R],
        v: &[R],
        out: &mut [R],
        threads: bool,
        mut lse: Option<&mut [R]>,
    ) -> Result<()> {
        let (l, s, e, ev) = (self.l, self.s, self.e, self.ev);
        let (kb, vb) = self.kv_problems(b);
        let (zero, one, neg_inf) = (<R as Real>::ZERO, <R as Real>::ONE, <R as Real>::NEG_INF);
        let nan = R::from_f64(f64::NAN);
        let bc = s.clamp(1, self.keys.max(1));
        let rows = (self.block / bc).clamp(1, l.max(1));
        let mut p = vec![zero; rows * bc];
        // Per row of the block: running max, running sum, and whether a NaN score was met.
        let mut mx = vec![neg_inf; rows];
        let mut sum = vec![zero; rows];
        let mut nans = vec![false; rows];
        let inv_keep = R::from_f64(1.0 / (1.0 - self.dropout_p));
        let mut r0 = 0;
        while r0 < l {
            let m = rows.min(l - r0);
            mx[..m].fill(neg_inf);
            sum[..m].fill(zero);
            nans[..m].fill(false);
            out[r0 * ev..(r0 + m) * ev].fill(zero);
            // Query i attends to keys j <= i: no row of this block reads past key r0 + m - 1.
            let s_end = if self.causal { s.min(r0 + m) } else { s };
            let mut c0 = 0;
            while c0 < s_end {
                let n = bc.min(s_end - c0);
                let p = &mut p[..m * n];
                // scores = scale * Q Kᵀ over keys c0..c0 + n; Kᵀ is K read with swapped strides.
                let qa = Mat::new(q, (b * l + r0) * e, e, 1);
                let kt = Mat::new(k, (kb * s + c0) * e, 1, e);
                gemm(m, n, e, qa, kt, p, 0, n, 1, self.scale, zero, threads)?;
                if let Mask::Add { blocks, block_of } = self.mask {
                    let base = block_of[b] * l * s + c0;
                    for (r, row) in p.chunks_exact_mut(n).enumerate() {
                        let at = base + (r0 + r) * s;
                        row.iter_mut()
                            .zip(&blocks[at..at + n])
                            .for_each(|(x, &a)| *x += a);
                    }
                }
                for (r, row) in p.chunks_exact_mut(n).enumerate() {
                    let i = r0 + r;
                    if self.causal && i + 1 < c0 + n {
                        row[(i + 1).saturating_sub(c0)..].fill(neg_inf);
                    }
                    let mut bm = neg_inf;
                    for &x in row.iter() {
                        nans[r] |= x.is_nan();
                        if x > bm {
                            bm = x;
                        }
                    }
                    let new_m = if bm > mx[r] { bm } else { mx[r] };
                    if nans[r] || new_m == neg_inf {
                        // Nothing to add: the row ends as NaN, or no key has counted yet.
                        row.fill(zero);
                        continue;
                    }
                    let alpha = (mx[r] - new_m).exp();
                    let bsum = exp_shifted(row, new_m);
                    sum[r] = sum[r] * alpha + bsum;
                    if alpha != one {
                        out[i * ev..(i + 1) * ev]
                            .iter_mut()
                            .for_each(|x| *x *= alpha);
                    }
                    mx[r] = new_m;
                    if let Some(keep) = self.keep {
                        let at = (b * l + i) * s + c0;
                        let drop =
                            |(x, &k): (&mut R, &bool)| *x = if k { *x * inv_keep } else { zero };
                        row.iter_mut().zip(&keep[at..at + n]).for_each(drop);
                    }
                }
                let pa = Mat::new(&*p, 0, n, 1);
                let vm = Mat::new(v, (vb * s + c0) * ev, ev, 1);
                gemm(m, ev, n, pa, vm, out, r0 * ev, ev, 1, one, one, threads)?;
                c0 += n;
            }
            for r in 0..m {
                let row = &mut out[(r0 + r) * ev..(r0 + r + 1) * ev];
                let z = if nans[r] {
                    row.fill(nan);
                    nan
                } else if mx[r] == neg_inf {
                    row.fill(if self.safe { zero } else { nan });
                    neg_inf
                } else {
                    let inv = one / sum[r];
                    row.iter_mut().for_each(|x| *x *= inv);
                    mx[r] + sum[r].ln()
                };
                if let Some(lse) = lse.as_deref_mut() {
                    lse[r0 + r] = z;
                }
            }
            r0 += m;
        }
        Ok(())
    }
}

/// Softmax of one row in place; a row that is entirely -inf becomes zeros when `safe` (eager
/// attention and `_safe_softmax` agree on this), else NaN (`_softmax`). Returns the row's
/// logsumexp.
fn softmax_row<R: Real>(row: &mut [R], safe: bool) -> R {
    let mut m = R::NEG_INF;
    let mut nan = false;
    for &x in row.iter() {
        nan |= x.is_nan();
        if x > m {
            m = x;
        }
    }
    if nan {
        row.iter_mut().for_each(|x| *x = R::from_f64(f64::NAN));
        return R::from_f64(f64::NAN);
    }
    if m == R::NEG_INF {
        let z = if safe { R::ZERO } else { R::from_f64(f64::NAN) };
        row.iter_mut().for_each(|x| *x = z);
        return R::NEG_INF;
    }
    let sum = exp_shifted(row, m);
    let inv = R::ONE / sum;
    row.iter_mut().for_each(|x| *x *= inv);
    m + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row blocking (bounded scratch) must not change any result: causal rows, a mask, the
    /// logsumexp and the weights all index by the absolute query row.
    #[test]
    fn blocked_rows_match_one_block() {
        let (l, s, e, ev, nb) = (7, 5, 3, 2, 2);
        let gen = |n: usize, k: f32| {
            (0..n)
                .map(|i| (i as f32 * 0.37 + k).sin())
                .collect::<Vec<f32>>()
        };
        let (q, k, v) = (
            gen(nb * l * e, 0.1),
            gen(nb * s * e, 0.7),
            gen(nb * s * ev, 1.3),
        );
        let mask = Mask::full(gen(nb * l * s, 2.0), nb);
        let run = |block: usize| {
            let job = Job {
                l,
                s,
                e,
                ev,
                scale: 0.5f32,
                causal: true,
                mask: &mask,
                keep: None,
                dropout_p: 0.0,
                block,
                keys: KEY_BLOCK,
                safe: true,
                heads: None,
            };
            let (mut out, mut lse, mut w) = (
                vec![0f32; nb * l * ev],
                vec![0f32; nb * l],
                vec![0f32; nb * l * s],
            );
            for b in 0..nb {
                let o = &mut out[b * l * ev..(b + 1) * l * ev];
                job.run(
                    b,
                    &q,
                    &k,
                    &v,
                    o,
                    false,
                    Some(&mut lse[b * l..(b + 1) * l]),
                    Some(&mut w[b * l * s..(b + 1) * l * s]),
                )
                .unwrap();
            }
            (out, lse, w)
        };
        assert_eq!(run(SCORE_BLOCK), run(2 * s));
        assert_eq!(run(SCORE_BLOCK), run(1));
    }

    /// The fused form (key blocks, online softmax) gives the math form's output and
    /// logsumexp, whatever the row and key blocks: causal or not, with a mask that hides a
    /// whole row (zeros when safe, NaN when not) and a row with a NaN score.
    #[test]
    fn fused_matches_math() {
        let (l, s, e, ev, nb) = (9, 11, 3, 2, 2);
        let gen = |n: usize, k: f64| {
            (0..n)
                .map(|i| 3.0 * (i as f64 * 0.37 + k).sin())
                .collect::<Vec<f64>>()
        };
        let (q, k, v) = (
            gen(nb * l * e, 0.1),
            gen(nb * s * e, 0.7),
            gen(nb * s * ev, 1.3),
        );
        let mut m = gen(nb * l * s, 2.0);
        m[2 * s..3 * s].fill(f64::NEG_INFINITY);
        m[(l + 4) * s + 5] = f64::NAN;
        let mask = Mask::full(m, nb);
        let none = Mask::None;
        let run = |mask: &Mask<f64>, causal: bool, safe: bool, block: usize, keys: usize| {
            let job = Job {
                l,
                s,
                e,
                ev,
                scale: 0.5,
                causal,
                mask,
                keep: None,
                dropout_p: 0.0,
                block,
                keys,
                safe,
                heads: None,
            };
            let (mut out, mut lse) = (vec![0.0; nb * l * ev], vec![0.0; nb * l]);
            for b in 0..nb {
                let o = &mut out[b * l * ev..(b + 1) * l * ev];
                let z = Some(&mut lse[b * l..(b + 1) * l]);
                job.run(b, &q, &k, &v, o, false, z, None).unwrap();
            }
            (out, lse)
        };
        let close = |a: &[f64], b: &[f64]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| {
                    (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-12 * (1.0 + y.abs())
                })
        };
        for mask in [&mask, &none] {
            for causal in [false, true] {
                for safe in [true, false] {
                    let (mo, ml) = run(mask, causal, safe, usize::MAX, KEY_BLOCK);
                    for (block, keys) in [(SCORE_BLOCK, KEY_BLOCK), (8, 4), (3, 1), (30, 5)] {
                        let (fo, fl) = run(mask, causal, safe, block, keys);
                        let what = format!("causal {causal}, safe {safe}, blocks {block}/{keys}");
                        assert!(close(&fo, &mo), "{what}: {fo:?} vs {mo:?}");
                        assert!(close(&fl, &ml), "{what}: {fl:?} vs {ml:?}");
                    }
                }
            }
        }
        // The hidden row: zeros when safe, NaN when not; the NaN score's row is NaN.
        let (o, _) = run(&mask, false, true, 8, 4);
        assert!(o[2 * ev..3 * ev].iter().all(|&x| x == 0.0));
        assert!(o[(l + 4) * ev..(l + 5) * ev].iter().all(|x| x.is_nan()));
        let (o, _) = run(&mask, false, false, 8, 4);
        assert!(o[2 * ev..3 * ev].iter().all(|x| x.is_nan()));
    }
}
