//! `pt2web generate`: the token loop over a language model exported with a static KV cache.
//!
//! Two signatures are recognised from the program's user inputs:
//! - transformers' static-cache recipe (`TorchExportableModuleWithStaticCache`,
//!   `convert_and_export_with_cache`): `input_ids` `[1, seq]` and `cache_position` `[seq]`,
//!   the positions the tokens take in the cache;
//! - ExecuTorch's LLM recipe: `tokens` `[1, seq]` and `input_pos` `[seq]` (the same
//!   positions) or `[1]` (the first of them).
//!
//! The cache is the program's mutated buffers: the session keeps them between calls, so each
//! call feeds only the new tokens. The prompt goes in one call where the sequence dimension is
//! dynamic (within its range; longer prompts in chunks), one token per call where it is static.
//! Each call's logits (`[1, seq, vocab]` or `[1, vocab]`) give the next token: the largest
//! (the first of equal ones, as `torch.argmax`), or with `--temperature` a draw from the
//! softmax after `--top-k` / `--top-p` filtering, from a generator seeded by `--seed`.
//! Tokenizers stay with the caller: ids in, ids out.

use crate::run::{check_device, load_with_progress, open_backend, Target};
use clap::Args;
use pt2web::backend::Backend;
use pt2web::cpu::Tensor;
use pt2web::program::{Dim, Program, ValueKind};
use pt2web::runtime::RValue;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct GenerateArgs {
    /// The .pt2 file: a language model exported with a static KV cache.
    model: PathBuf,
    /// The prompt's token ids, comma-separated (tokenize with the model's tokenizer).
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        allow_hyphen_values = true
    )]
    prompt_ids: Vec<i64>,
    /// How many tokens to generate at most.
    #[arg(long, default_value_t = 32)]
    max_new_tokens: usize,
    /// Sample with this temperature; 0 (the default) takes the most likely token (greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Sample only among the K most likely tokens.
    #[arg(long)]
    top_k: Option<usize>,
    /// Sample only among the most likely tokens whose probabilities add up to P.
    #[arg(long)]
    top_p: Option<f64>,
    /// Seed of the sampler (the same seed draws the same tokens).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop after this token id.
    #[arg(long)]
    eos: Option<i64>,
    #[command(flatten)]
    target: Target,
    /// Print JSON: the tokens, prefill time, decode speed and bytes read back per token.
    #[arg(long)]
    json: bool,
}

/// Which inputs carry the tokens and their positions, and how many tokens one call takes.
#[derive(Debug)]
struct Signature {
    tokens: String,
    positions: String,
    /// The position input holds only the first position (ExecuTorch's `[1]` `input_pos`).
    start_only: bool,
    /// The most tokens one call takes: the sequence dimension's upper bound, 1 if static 1.
    max_seq: usize,
    /// A static sequence length other than 1: every call must give exactly this many.
    fixed_seq: Option<usize>,
    /// The program takes the positions before the tokens.
    positions_first: bool,
}

fn signature(p: &Program) -> Result<Signature, String> {
    let names: Vec<&str> = p.user_inputs().iter().map(|u| u.name.as_str()).collect();
    let (tokens, positions) = if names.contains(&"input_ids") && names.contains(&"cache_position") {
        ("input_ids", "cache_position")
    } else if names.contains(&"tokens") && names.contains(&"input_pos") {
        ("tokens", "input_pos")
    } else {
        return Err(format!(
            "generate needs a program exported with a static KV cache: inputs (input_ids, \
             cache_position) as transformers' convert_and_export_with_cache writes, or (tokens, \
             input_pos) as ExecuTorch's LLM export does; this one takes ({})",
            names.join(", ")
        ));
    };
    if names.len() != 2 {
        return Err(format!(
            "generate feeds only '{tokens}' and '{positions}'; the program also takes ({})",
            names
                .iter()
                .filter(|n| **n != tokens && **n != positions)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let sizes = |name: &str| -> Result<Vec<Dim>, String> {
        match p.input_value(name).map(|v| &v.kind) {
            Some(ValueKind::Tensor { sizes, .. }) => Ok(sizes.clone()),
            _ => Err(format!("input '{name}' is not a tensor")),
        }
    };
    let ts = sizes(tokens)?;
    let ps = sizes(positions)?;
    if ts.len() != 2 || ts[0] != Dim::Static(1) {
        return Err(format!(
            "input '{tokens}' must be [1, seq] (batch 1), it is [{}]",
            ts.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let (max_seq, fixed_seq) = match &ts[1] {
        Dim::Static(n) if *n >= 1 => (*n as usize, (*n != 1).then_some(*n as usize)),
        Dim::Static(n) => return Err(format!("input '{tokens}' has {n} tokens per call")),
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
        return Err(format!("input '{positions}' must be one-dimensional"));
    }
    let start_only = ps[0] == Dim::Static(1) && max_seq > 1;
    Ok(Signature {
        tokens: tokens.into(),
        positions: positions.into(),
        start_only,
        max_seq,
        fixed_seq,
        positions_first: names[0] == positions,
    })
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

/// How the next token is chosen from the logits.
struct Sampler {
    temperature: f64,
    top_k: Option<usize>,
    top_p: Option<f64>,
    rng: Rng,
}

impl Sampler {
    fn pick(&mut self, logits: &[f32]) -> Result<i64, String> {
        if logits.iter().any(|x| x.is_nan()) {
            return Err("the logits hold NaN".into());
        }
        if self.temperature <= 0.0 {
            // The first of equal maxima, as torch.argmax.
            let mut best = 0;
            for (i, &x) in logits.iter().enumerate() {
                if x > logits[best] {
                    best = i;
                }
            }
            return Ok(best as i64);
        }
        // Candidates by decreasing logit (ties by index), cut to top-k.
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        if let Some(k) = self.top_k {
            order.truncate(k.max(1));
        }
        let m = logits[order[0]] as f64;
        let mut probs: Vec<f64> = order
            .iter()
            .map(|&i| ((logits[i] as f64 - m) / self.temperature).exp())
            .collect();
        let total: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        if let Some(top_p) = self.top_p {
            // The smallest prefix whose mass reaches top_p (at least one token).
            let mut acc = 0.0;
            let mut keep = probs.len();
            for (i, p) in probs.iter().enumerate() {
                acc += p;
                if acc >= top_p {
                    keep = i + 1;
                    break;
                }
            }
            probs.truncate(keep);
            order.truncate(keep);
            let total: f64 = probs.iter().sum();
            probs.iter_mut().for_each(|p| *p /= total);
        }
        let u = self.rng.next_f64();
        let mut acc = 0.0;
        for (&i, p) in order.iter().zip(&probs) {
            acc += p;
            if u < acc {
                return Ok(i as i64);
            }
        }
        Ok(*order.last().expect("at least one candidate") as i64)
    }
}

/// The last position's logits of one call's first output.
fn last_logits(outs: &[RValue]) -> Result<Vec<f32>, String> {
    let Some(RValue::Tensor(t)) = outs.first() else {
        return Err("the program's first output is not a tensor of logits".into());
    };
    let vocab = match t.sizes.last() {
        Some(&v) if v > 0 && t.rank() >= 2 => v,
        _ => {
            return Err(format!(
                "the first output has shape {:?}; logits are [1, seq, vocab] or [1, vocab]",
                t.sizes
            ))
        }
    };
    let all = t.contiguous().to_vec::<f32>();
    let Some(from) = all.len().checked_sub(vocab) else {
        return Err(format!("the logits of shape {:?} are empty", t.sizes));
    };
    Ok(all[from..].to_vec())
}

fn call(
    session: &mut dyn Backend,
    sig: &Signature,
    tokens: &[i64],
    start: usize,
) -> Result<Vec<RValue>, String> {
    let n = tokens.len();
    let ids = Tensor::from_vec(tokens.to_vec(), &[1, n]);
    let pos: Vec<i64> = if sig.start_only {
        vec![start as i64]
    } else {
        (start..start + n).map(|p| p as i64).collect()
    };
    let pos_len = pos.len();
    let pos = Tensor::from_vec(pos, &[pos_len]);
    // The user inputs in the program's order.
    let mut feed = vec![RValue::Tensor(ids), RValue::Tensor(pos)];
    if sig.positions_first {
        feed.reverse();
    }
    session.run(feed).map_err(|e| {
        format!(
            "at position {start} ({n} token(s) in '{}', positions in '{}'): {e}",
            sig.tokens, sig.positions
        )
    })
}

pub fn generate(args: GenerateArgs) -> Result<(), String> {
    check_device(&args.target.device)?;
    if args.prompt_ids.is_empty() {
        return Err("--prompt-ids: give at least one token id".into());
    }
    if !(args.temperature >= 0.0 && args.temperature.is_finite()) {
        return Err(format!(
            "--temperature {}: expected a finite value >= 0",
            args.temperature
        ));
    }
    if let Some(p) = args.top_p {
        if !(p > 0.0 && p <= 1.0) {
            return Err(format!("--top-p {p}: expected a value in (0, 1]"));
        }
    }
    if args.top_k == Some(0) {
        return Err("--top-k 0: expected at least 1".into());
    }
    let model = Some(args.model.clone());
    let (source, p, load_ms) = load_with_progress(&model, args.target.program.as_deref(), false)?;
    let sig = signature(&p).map_err(|e| format!("{source}: {e}"))?;
    let mut session = open_backend(p, &args.target.device, &args.target.backend)?;
    let mut sampler = Sampler {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        rng: Rng(args.seed),
    };

    // Prefill: the prompt in calls of up to max_seq tokens (one where the dimension is static
    // 1); a static length other than 1 takes exactly that many per call.
    let t0 = Instant::now();
    let prompt = &args.prompt_ids;
    let chunk = sig.fixed_seq.unwrap_or(sig.max_seq).max(1);
    if let Some(n) = sig.fixed_seq {
        if !prompt.len().is_multiple_of(n) {
            return Err(format!(
                "{source}: '{}' takes exactly {n} tokens per call; the prompt has {}",
                sig.tokens,
                prompt.len()
            ));
        }
    }
    let mut pos = 0;
    let mut outs = Vec::new();
    for part in prompt.chunks(chunk) {
        outs = call(session.as_mut(), &sig, part, pos)?;
        pos += part.len();
    }
    let mut next = sampler.pick(&last_logits(&outs)?)?;
    let prefill_ms = t0.elapsed().as_secs_f64() * 1e3;

    let mut new = Vec::new();
    let t1 = Instant::now();
    let mut decode_calls = 0usize;
    loop {
        new.push(next);
        if new.len() >= args.max_new_tokens || args.eos == Some(next) {
            break;
        }
        if sig.fixed_seq.is_some() {
            return Err(format!(
                "{source}: '{}' takes a fixed number of tokens per call, so it cannot decode one \
                 token at a time",
                sig.tokens
            ));
        }
        outs = call(session.as_mut(), &sig, &[next], pos)?;
        pos += 1;
        decode_calls += 1;
        next = sampler.pick(&last_logits(&outs)?)?;
    }
    if args.max_new_tokens == 0 {
        new.clear();
    }
    let decode_s = t1.elapsed().as_secs_f64();
    let decode_tok_s = (decode_calls > 0).then(|| decode_calls as f64 / decode_s);
    // What a decode step reads back from the device: nothing on the CPU backend (its outputs
    // are in host memory already). The GPU backend does not count its readback bytes yet
    // (it reads back the logits and every mutated buffer, the whole cache: issue 15), so null.
    let readback: Option<u64> = session.gpu().is_none().then_some(0);
    if args.json {
        let v = serde_json::json!({
            "model": source,
            "device": session.kind(),
            "prompt_tokens": prompt.len(),
            "tokens": new,
            "load_ms": load_ms,
            "prefill_ms": prefill_ms,
            "decode_tok_s": decode_tok_s,
            "readback_bytes_per_token": readback,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "{}",
            new.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        eprintln!(
            "{source}: {} prompt tokens, {} new on {}; prefill {prefill_ms:.1} ms{}",
            prompt.len(),
            new.len(),
            session.kind(),
            decode_tok_s.map_or(String::new(), |r| format!(", decode {r:.1} tok/s"))
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_of_equal_maxima() {
        let mut s = Sampler {
            temperature: 0.0,
            top_k: None,
            top_p: None,
            rng: Rng(1),
        };
        assert_eq!(s.pick(&[0.5, 2.0, 2.0, -1.0]).unwrap(), 1);
        assert!(s.pick(&[0.5, f32::NAN]).is_err());
    }

    #[test]
    fn sampling_is_seeded_and_respects_top_k_and_top_p() {
        let logits: Vec<f32> = (0..50).map(|i| ((i * 7) % 13) as f32 * 0.3).collect();
        let draw = |seed, k, p| {
            let mut s = Sampler {
                temperature: 1.0,
                top_k: k,
                top_p: p,
                rng: Rng(seed),
            };
            (0..200)
                .map(|_| s.pick(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7, None, None), draw(7, None, None));
        assert_ne!(draw(7, None, None), draw(8, None, None));
        // top-k 1 and a tiny top-p are greedy.
        let greedy = Sampler {
            temperature: 0.0,
            top_k: None,
            top_p: None,
            rng: Rng(0),
        }
        .pick(&logits)
        .unwrap();
        assert!(draw(3, Some(1), None).iter().all(|&t| t == greedy));
        assert!(draw(3, None, Some(1e-9)).iter().all(|&t| t == greedy));
        // top-k 3: only the three largest logits (ties by index).
        let mut order: Vec<usize> = (0..50).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        let top3 = &order[..3];
        assert!(draw(5, Some(3), None)
            .iter()
            .all(|&t| top3.contains(&(t as usize))));
    }
}
