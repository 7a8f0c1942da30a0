//! Generation with a language model exported with a static KV cache: the token loop behind
//! `pt2web generate` and the JS `model.generate`, on any [`Backend`].
//!
//! Two signatures are recognised from the program's user inputs ([`LmSignature`]):
//! - transformers' static-cache recipe (`TorchExportableModuleWithStaticCache`,
//!   `convert_and_export_with_cache`): `input_ids` `[1, seq]` and `cache_position` `[seq]`,
//!   the positions the tokens take in the cache;
//! - ExecuTorch's LLM recipe: `tokens` `[1, seq]` and `input_pos` `[seq]` (the same
//!   positions) or `[1]` (the first of them).
//!
//! The cache is the program's mutated buffers: the session keeps them between calls (on the
//! GPU they stay on the device), so each call feeds only the new tokens. The prompt goes in
//! one call where the sequence dimension is dynamic (within its range; longer prompts in
//! chunks), one token per call where it is static. Each call's logits (`[1, seq, vocab]` or
//! `[1, vocab]`) give the next token ([`Sampler`]): the largest (the first of equal ones, as
//! `torch.argmax`; on the GPU taken there, so a step reads back 8 bytes instead of the
//! logits), or with a temperature a draw from the softmax after top-k / top-p filtering, from
//! a generator seeded by [`Sampling::seed`]. Tokenizers stay with the caller: ids in, ids out.

use crate::backend::Backend;
use crate::cpu::Tensor;
use crate::error::{Error, Result};
use crate::gpu::{GpuInput, Slot};
use crate::program::{Dim, Program, ValueKind};
use crate::runtime::RValue;

fn bad(msg: String) -> Error {
    Error::op("generate", msg)
}

/// Which inputs carry the tokens and their positions, and how many tokens one call takes.
#[derive(Debug, Clone)]
pub struct LmSignature {
    pub tokens: String,
    pub positions: String,
    /// The position input holds only the first position (ExecuTorch's `[1]` `input_pos`).
    pub start_only: bool,
    /// The most tokens one call takes: the sequence dimension's upper bound, 1 if static 1.
    pub max_seq: usize,
    /// A static sequence length other than 1: every call must give exactly this many.
    pub fixed_seq: Option<usize>,
    /// The program takes the positions before the tokens.
    pub positions_first: bool,
}

impl LmSignature {
    /// The signature of `p`, or an error saying what `generate` needs.
    pub fn of(p: &Program) -> Result<LmSignature> {
        let names: Vec<&str> = p.user_inputs().iter().map(|u| u.name.as_str()).collect();
        let (tokens, positions) = if names.contains(&"input_ids")
            && names.contains(&"cache_position")
        {
            ("input_ids", "cache_position")
        } else if names.contains(&"tokens") && names.contains(&"input_pos") {
            ("tokens", "input_pos")
        } else {
            return Err(bad(format!(
                "generate needs a program exported with a static KV cache: inputs (input_ids, \
                 cache_position) as transformers' convert_and_export_with_cache writes, or (tokens, \
                 input_pos) as ExecuTorch's LLM export does; this one takes ({})",
                names.join(", ")
            )));
        };
        if names.len() != 2 {
            return Err(bad(format!(
                "generate feeds only '{tokens}' and '{positions}'; the program also takes ({})",
                names
                    .iter()
                    .filter(|n| **n != tokens && **n != positions)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let sizes = |name: &str| -> Result<Vec<Dim>> {
            match p.input_value(name).map(|v| &v.kind) {
                Some(ValueKind::Tensor { sizes, .. }) => Ok(sizes.clone()),
                _ => Err(bad(format!("input '{name}' is not a tensor"))),
            }
        };
        let ts = sizes(tokens)?;
        let ps = sizes(positions)?;
        if ts.len() != 2 || ts[0] != Dim::Static(1) {
            return Err(bad(format!(
                "input '{tokens}' must be [1, seq] (batch 1), it is [{}]",
                ts.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let (max_seq, fixed_seq) = match &ts[1] {
            Dim::Static(n) if *n >= 1 => (*n as usize, (*n != 1).then_some(*n as usize)),
            Dim::Static(n) => return Err(bad(format!("input '{tokens}' has {n} tokens per call"))),
            Dim::Sym(e) => {
                // A bare symbol's upper bound (torch's int_oo: unbounded); an expression of one,
                // one token per call.
                let hi = match e.as_symbol() {
                    Some(s) => p
                        .range_constraints
                        .get(s)
                        .and_then(|r| r.max)
                        .map_or(usize::MAX, |m| m.max(1) as usize),
                    None => 1,
                };
                (hi, None)
            }
        };
        if ps.len() != 1 {
            return Err(bad(format!("input '{positions}' must be one-dimensional")));
        }
        let start_only = ps[0] == Dim::Static(1) && max_seq > 1;
        Ok(LmSignature {
            tokens: tokens.into(),
            positions: positions.into(),
            start_only,
            max_seq,
            fixed_seq,
            positions_first: names[0] == positions,
        })
    }
}

/// How the next token is chosen: greedy where `temperature` is 0 (the default).
#[derive(Debug, Clone, Default)]
pub struct Sampling {
    pub temperature: f64,
    /// Only among the K most likely tokens.
    pub top_k: Option<usize>,
    /// Only among the most likely tokens whose probabilities add up to P.
    pub top_p: Option<f64>,
    /// The sampler's seed: the same seed draws the same tokens.
    pub seed: u64,
}

impl Sampling {
    pub fn greedy(&self) -> bool {
        self.temperature <= 0.0
    }
    /// Whether the settings make sense: the message starts with the setting's name
    /// (`temperature`, `top-k`, `top-p`).
    pub fn check(&self) -> std::result::Result<(), String> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(format!(
                "temperature {}: expected a finite value >= 0",
                self.temperature
            ));
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(format!("top-p {p}: expected a value in (0, 1]"));
            }
        }
        if self.top_k == Some(0) {
            return Err("top-k 0: expected at least 1".into());
        }
        Ok(())
    }
}

/// splitmix64: a small seeded generator (the sampler's draws, reproducible by seed).
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Picks tokens from logits, as [`Sampling`] says. The rule is the one the GPU follows
/// (`shaders/sample.wgsl`), so both draw the same token from the same logits and seed:
/// - top-k keeps every logit at least the k-th largest (ties at the cut are all kept, as
///   transformers' `TopKLogitsWarper`);
/// - top-p then keeps every logit at least the largest value `v` whose tokens at or above it
///   hold at least P of the kept probability (ties at the cut are all kept);
/// - the draw walks the kept tokens in index order and takes the first whose cumulative
///   probability passes one uniform number, so it needs no sort.
pub struct Sampler {
    s: Sampling,
    rng: Rng,
}

impl Sampler {
    pub fn new(s: &Sampling) -> Sampler {
        Sampler {
            s: s.clone(),
            rng: Rng(s.seed),
        }
    }
    /// The next uniform number in [0, 1) of the seeded sequence (one per sampled token).
    pub fn uniform(&mut self) -> f64 {
        self.rng.next_f64()
    }
    /// The next token from one position's logits.
    pub fn pick(&mut self, logits: &[f32]) -> Result<i64> {
        let rng = &mut self.rng;
        self.s.pick_with(logits, || rng.next_f64())
    }
}

impl Sampling {
    /// The token these settings pick from one position's logits, `uniform` giving the draw's
    /// number in [0, 1) (asked for only where the pick is not greedy).
    pub fn pick_with(&self, logits: &[f32], uniform: impl FnOnce() -> f64) -> Result<i64> {
        if logits.iter().any(|x| x.is_nan()) {
            return Err(Error::op("generate", "the logits hold NaN"));
        }
        if logits.is_empty() {
            return Err(Error::op("generate", "the logits are empty"));
        }
        if self.greedy() {
            // The first of equal maxima, as torch.argmax.
            let mut best = 0;
            for (i, &x) in logits.iter().enumerate() {
                if x > logits[best] {
                    best = i;
                }
            }
            return Ok(best as i64);
        }
        let mut desc = logits.to_vec();
        desc.sort_by(|a, b| b.total_cmp(a));
        // The cut from top-k: the k-th largest logit.
        let mut cut = match self.top_k {
            // (top-k 0 is refused by `Sampling::check`; taken as 1 here, never an index underflow.)
            Some(k) if k < desc.len() => desc[k.max(1) - 1],
            _ => f32::NEG_INFINITY,
        };
        let m = desc[0] as f64;
        let t = self.temperature;
        let weight = |x: f32| {
            if x >= cut {
                ((x as f64 - m) / t).exp()
            } else {
                0.0
            }
        };
        if let Some(p) = self.top_p.filter(|&p| p < 1.0) {
            let need = p * logits.iter().map(|&x| weight(x)).sum::<f64>();
            // Down the distinct kept values until the mass at or above one reaches P.
            let mut acc = 0.0;
            let mut i = 0;
            while i < desc.len() && desc[i] >= cut {
                let v = desc[i];
                while i < desc.len() && desc[i] == v {
                    acc += weight(v);
                    i += 1;
                }
                if acc >= need {
                    cut = v;
                    break;
                }
            }
        }
        let weight = |x: f32| {
            if x >= cut {
                ((x as f64 - m) / t).exp()
            } else {
                0.0
            }
        };
        let total: f64 = logits.iter().map(|&x| weight(x)).sum();
        let target = uniform() * total;
        let mut acc = 0.0;
        let mut last = 0;
        for (i, &x) in logits.iter().enumerate() {
            if x >= cut {
                acc += weight(x);
                last = i;
                if acc > target {
                    return Ok(i as i64);
                }
            }
        }
        Ok(last as i64)
    }
}

/// What [`generate`] does.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// How many tokens to generate at most.
    pub max_new_tokens: usize,
    pub sampling: Sampling,
    /// Stop after this token id.
    pub eos: Option<i64>,
}

/// What [`generate`] made.
#[derive(Debug, Clone, Default)]
pub struct Generated {
    /// The new tokens (ending with the eos id when it came).
    pub tokens: Vec<i64>,
    /// The prompt's calls and the first token, milliseconds.
    pub prefill_ms: f64,
    /// Tokens per second of the one-token calls (None when there were none).
    pub decode_tok_s: Option<f64>,
    /// What the last call read back from the device: 0 on the CPU; on the GPU 8 bytes (the
    /// token is picked there). The KV cache stays there.
    pub readback_bytes_per_token: u64,
}

/// Generate up to `opts.max_new_tokens` tokens after `prompt` with the program `b` runs,
/// calling `on_token` with each as it comes (an error from it stops the loop). The session's
/// cache continues from where earlier calls left it: a fresh session starts at position 0.
pub async fn generate(
    b: &mut dyn Backend,
    prompt: &[i64],
    opts: &GenerateOptions,
    on_token: &mut dyn FnMut(i64) -> Result<()>,
) -> Result<Generated> {
    let sig = LmSignature::of(&b.session().program)?;
    opts.sampling.check().map_err(|msg| Error::Input {
        input: "sampling".into(),
        msg,
    })?;
    if prompt.is_empty() {
        return Err(bad("the prompt is empty: give at least one token id".into()));
    }
    if let Some(n) = sig.fixed_seq {
        if !prompt.len().is_multiple_of(n) {
            return Err(bad(format!(
                "'{}' takes exactly {n} tokens per call; the prompt has {}",
                sig.tokens,
                prompt.len()
            )));
        }
    }
    let now = crate::runtime::profile::now_ms;
    let mut sampler = Sampler::new(&opts.sampling);
    // Prefill: the prompt in calls of up to max_seq tokens (one where the dimension is static
    // 1); a static length other than 1 takes exactly that many per call.
    let t0 = now();
    let chunk = sig.fixed_seq.unwrap_or(sig.max_seq).max(1);
    let parts: Vec<&[i64]> = prompt.chunks(chunk).collect();
    let mut pos = 0;
    for part in &parts[..parts.len() - 1] {
        call(b, &sig, part, pos).await?;
        pos += part.len();
    }
    let last = parts[parts.len() - 1];
    let mut next = step(b, &sig, last, pos, &mut sampler).await?;
    pos += last.len();
    let prefill_ms = now() - t0;

    let mut out = Generated {
        prefill_ms,
        ..Default::default()
    };
    if opts.max_new_tokens == 0 {
        return Ok(out);
    }
    let t1 = now();
    let mut decode_calls = 0usize;
    loop {
        out.tokens.push(next);
        on_token(next)?;
        if out.tokens.len() >= opts.max_new_tokens || opts.eos == Some(next) {
            break;
        }
        if sig.fixed_seq.is_some() {
            return Err(bad(format!(
                "'{}' takes a fixed number of tokens per call, so it cannot decode one token at \
                 a time",
                sig.tokens
            )));
        }
        // Let a page render the token before the next call (nothing natively).
        crate::gpu::wait::yield_to_page().await;
        next = step(b, &sig, &[next], pos, &mut sampler).await?;
        pos += 1;
        decode_calls += 1;
    }
    let secs = (now() - t1) / 1e3;
    out.decode_tok_s = (decode_calls > 0).then(|| decode_calls as f64 / secs.max(1e-9));
    out.readback_bytes_per_token = b.last_stats().map_or(0, |s| s.download_bytes);
    Ok(out)
}

/// The last position's logits of one call's first output.
fn last_logits(outs: &[Slot]) -> Result<Vec<f32>> {
    let Some(Slot::Value(RValue::Tensor(t))) = outs.first() else {
        return Err(bad(
            "the program's first output is not a tensor of logits".into()
        ));
    };
    let vocab = match t.sizes.last() {
        Some(&v) if v > 0 && t.rank() >= 2 => v,
        _ => return Err(bad(not_logits(&t.sizes))),
    };
    let all = t.contiguous().to_dtype(crate::DType::F32)?.to_vec::<f32>();
    let Some(from) = all.len().checked_sub(vocab) else {
        return Err(bad(format!("the logits of shape {:?} are empty", t.sizes)));
    };
    Ok(all[from..].to_vec())
}

fn not_logits(sizes: &[usize]) -> String {
    format!("the first output has shape {sizes:?}; logits are [1, seq, vocab] or [1, vocab]")
}

/// One call with `tokens` at positions from `start`; the next token from its logits. On the
/// GPU the logits stay there and the token is picked there (`gpu/sample.rs`), so the call
/// reads back 8 bytes (the index and a NaN flag) instead of the logits.
async fn step(
    b: &mut dyn Backend,
    sig: &LmSignature,
    tokens: &[i64],
    start: usize,
    sampler: &mut Sampler,
) -> Result<i64> {
    if b.gpu().is_some() {
        let outs = run(b, sig, tokens, start, true).await?;
        let logits = match outs.first() {
            Some(Slot::Tensor(t)) if t.rank() >= 2 && t.dtype == crate::DType::F32 => t.clone(),
            Some(Slot::Tensor(t)) => return Err(bad(not_logits(&t.sizes))),
            _ => {
                return Err(bad(
                    "the program's first output is not a tensor of logits".into()
                ))
            }
        };
        let g = b
            .gpu_mut()
            .ok_or_else(|| Error::Gpu("internal: no GPU session".into()))?;
        let picked = if sampler.s.greedy() {
            g.argmax_last_async(&logits).await
        } else {
            let u = sampler.uniform();
            g.sample_last_async(&logits, &sampler.s, u).await
        };
        return picked.map_err(|e| at(sig, tokens.len(), start, e));
    }
    let outs = call(b, sig, tokens, start).await?;
    sampler.pick(&last_logits(&outs)?)
}

/// One call, its outputs read back.
async fn call(
    b: &mut dyn Backend,
    sig: &LmSignature,
    tokens: &[i64],
    start: usize,
) -> Result<Vec<Slot>> {
    run(b, sig, tokens, start, false).await
}

async fn run(
    b: &mut dyn Backend,
    sig: &LmSignature,
    tokens: &[i64],
    start: usize,
    keep: bool,
) -> Result<Vec<Slot>> {
    let feed = feed(sig, tokens, start)
        .into_iter()
        .map(GpuInput::Cpu)
        .collect();
    b.run_with(feed, keep)
        .await
        .map_err(|e| at(sig, tokens.len(), start, e))
}

/// An error of the call at `start`, saying where (a stopped call stays `Cancelled`).
fn at(sig: &LmSignature, n: usize, start: usize, e: Error) -> Error {
    if matches!(e, Error::Cancelled { .. }) {
        return e;
    }
    bad(format!(
        "at position {start} ({n} token(s) in '{}', positions in '{}'): {e}",
        sig.tokens, sig.positions
    ))
}

/// The user inputs of a call, in the program's order.
fn feed(sig: &LmSignature, tokens: &[i64], start: usize) -> Vec<RValue> {
    let n = tokens.len();
    let ids = Tensor::from_vec(tokens.to_vec(), &[1, n]);
    let pos: Vec<i64> = if sig.start_only {
        vec![start as i64]
    } else {
        (start..start + n).map(|p| p as i64).collect()
    };
    let pos_len = pos.len();
    let pos = Tensor::from_vec(pos, &[pos_len]);
    let mut feed = vec![RValue::Tensor(ids), RValue::Tensor(pos)];
    if sig.positions_first {
        feed.reverse();
    }
    feed
}
