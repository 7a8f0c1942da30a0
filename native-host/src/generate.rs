//! `pt2web generate`: the token loop over a language model exported with a static KV cache
//! ([`pt2web::generate`], which says which programs it takes and how tokens are chosen).
//! Tokenizers stay with the caller: ids in, ids out.

use crate::progress::Progress;
use crate::run::{check_device, load_with_progress, open_backend, Target};
use clap::Args;
use pt2web::generate::{GenerateOptions, LmSignature, Sampling};
use std::path::PathBuf;

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
    /// Show progress bars (loading, tokens) on stderr even when it is not a terminal.
    #[arg(long)]
    progress: bool,
}

pub fn generate(args: GenerateArgs) -> Result<(), String> {
    check_device(&args.target.device)?;
    if args.prompt_ids.is_empty() {
        return Err("--prompt-ids: give at least one token id".into());
    }
    let sampling = Sampling {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
    };
    sampling.check().map_err(|e| format!("--{e}"))?;
    let model = Some(args.model.clone());
    let (source, p, load_ms) = load_with_progress(
        &model,
        args.target.program.as_deref(),
        args.progress,
        args.target.load_options()?,
    )?;
    LmSignature::of(&p).map_err(|e| format!("{source}: {e}"))?;
    let largest_weight = p
        .state
        .values()
        .map(|e| e.tensor.nbytes())
        .max()
        .unwrap_or(0);
    let mut session = open_backend(
        p,
        &args.target.device,
        &args.target.backend,
        args.target.adapter,
    )?;
    // What pt2web holds on the host once the model is loaded (and, on the GPU, uploaded).
    let heap_after_load = crate::heap::live();
    let opts = GenerateOptions {
        max_new_tokens: args.max_new_tokens,
        sampling,
        eos: args.eos,
    };
    let prompt = &args.prompt_ids;
    let mut bar = Progress::new(
        args.progress,
        "generating",
        opts.max_new_tokens as u64,
        "tokens",
    );
    bar.set(0);
    let mut made = 0u64;
    let out = pollster::block_on(pt2web::generate::generate(
        session.as_mut(),
        prompt,
        &opts,
        &mut |_| {
            made += 1;
            bar.set(made);
            Ok(())
        },
    ));
    bar.finish();
    let out = out.map_err(|e| format!("{source}: {e}"))?;
    if args.json {
        let v = serde_json::json!({
            "model": source,
            "device": session.kind(),
            "prompt_tokens": prompt.len(),
            "tokens": out.tokens,
            "load_ms": load_ms,
            "prefill_ms": out.prefill_ms,
            "decode_tok_s": out.decode_tok_s,
            "readback_bytes_per_token": out.readback_bytes_per_token,
            // The most bytes of pt2web's GPU buffers in use at once (weights, cache, the runs'
            // activations); null on the CPU.
            "gpu_peak_bytes": session.gpu().map(|g| g.device.max_memory_allocated()),
            // pt2web's own host memory (Rust heap; a GPU driver's allocations are not in it):
            // after loading (and uploading), and at most during the whole command.
            "host_heap_after_load_bytes": heap_after_load,
            "host_heap_peak_bytes": crate::heap::peak(),
            "largest_weight_bytes": largest_weight,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "{}",
            out.tokens
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        eprintln!(
            "{source}: {} prompt tokens, {} new on {}; prefill {:.1} ms{}",
            prompt.len(),
            out.tokens.len(),
            session.kind(),
            out.prefill_ms,
            out.decode_tok_s
                .map_or(String::new(), |r| format!(", decode {r:.1} tok/s"))
        );
    }
    Ok(())
}
