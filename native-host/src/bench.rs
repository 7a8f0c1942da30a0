//! `pt2web bench`: load time, first run, and median/min warm runs on the CPU and/or the GPU,
//! with the GPU's per-run counters (submits, buffer allocations, pipeline creations, GPU
//! nodes and fallbacks). Every timed run returns its outputs on the CPU, so the GPU work is
//! finished inside the timed region.

use crate::progress::Progress;
use crate::run::{gather_inputs_from, load_with_progress, open_backend, prepare_like};
use clap::Args;
use pt2web::cpu::Tensor;
use pt2web::program::{Dim, Program, ValueKind};
use pt2web::runtime::{RValue, Rng};
use pt2web::DType;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct BenchArgs {
    /// The .pt2 file.
    model: PathBuf,
    /// cpu, gpu or both (then the GPU/CPU ratio is printed too).
    #[arg(long, default_value = "both")]
    device: String,
    /// GPU backend: auto, vulkan, metal, dx12, gl.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// The GPU adapter to use, by its number in `pt2web devices` (the best one by default).
    #[arg(long, value_name = "N")]
    adapter: Option<usize>,
    #[arg(long)]
    program: Option<String>,
    /// Timed warm runs.
    #[arg(long, default_value_t = 10)]
    repeat: usize,
    /// Untimed runs after the first one (the first run is always reported on its own).
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Inputs as a safetensors file keyed by user-input name (default: the archive's sample
    /// inputs, else random inputs of the declared shapes).
    #[arg(long)]
    inputs: Option<String>,
    /// Extra or overriding inputs: NAME=FILE.npy (repeatable).
    #[arg(value_name = "NAME=FILE.npy")]
    named: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Show progress bars on stderr even when it is not a terminal.
    #[arg(long)]
    progress: bool,
    /// Skip `prepare`: the first run builds its Plan and creates the pipelines itself (the
    /// cold start of a caller that never prepares).
    #[arg(long)]
    no_prepare: bool,
    /// How einsum contracts 3+ operands (`backends::opt_einsum`): auto, greedy, optimal, or
    /// off (left to right).
    #[arg(long, value_name = "STRATEGY", default_value = "auto")]
    opt_einsum: String,
}

/// Random inputs of the program's declared shapes: floats uniform in [0, 1), integers 1 (a
/// valid token id, mask or index for most models), bools true. A dynamic dim takes its lower
/// bound (at least 2, as torch.export specializes 0 and 1).
pub fn random_inputs(p: &Program) -> Result<Vec<RValue>, String> {
    let mut rng = Rng::new(0);
    let mut out = Vec::new();
    for u in p.user_inputs() {
        let v = p
            .input_value(&u.name)
            .ok_or_else(|| format!("input '{}' has no graph value", u.name))?;
        match &v.kind {
            ValueKind::Tensor { dtype, sizes, .. } => {
                let shape: Vec<usize> = sizes
                    .iter()
                    .map(|d| match d {
                        Dim::Static(s) => *s as usize,
                        Dim::Sym(e) => e
                            .as_symbol()
                            .and_then(|s| p.range_constraints.get(s))
                            .map_or(2, |r| r.min.max(2) as usize),
                    })
                    .collect();
                let n: usize = shape.iter().product();
                let t = if dtype.is_float() {
                    let v: Vec<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
                    Tensor::from_vec(v, &shape)
                        .to_dtype(*dtype)
                        .map_err(|e| e.to_string())?
                } else if *dtype == DType::Bool {
                    Tensor::from_vec(vec![true; n], &shape)
                } else {
                    Tensor::from_vec(vec![1i64; n], &shape)
                        .to_dtype(*dtype)
                        .map_err(|e| e.to_string())?
                };
                out.push(RValue::Tensor(t));
            }
            ValueKind::SymInt(_) => out.push(RValue::Int(2)),
            other => {
                return Err(format!(
                    "input '{}' ({other:?}) cannot be synthesized; pass --inputs",
                    u.name
                ))
            }
        }
    }
    Ok(out)
}

struct DeviceResult {
    device: String,
    /// Session creation: state converted and, on the GPU, weights uploaded.
    session_ms: f64,
    /// `prepare` for the inputs' signature (Plan, meta pass; on the GPU every pipeline).
    prepare_ms: f64,
    prepare: Option<pt2web::gpu::PrepareStats>,
    first_ms: f64,
    median_ms: f64,
    min_ms: f64,
    runs: usize,
    /// GPU counters of the first and of the last (warm) run.
    gpu: Option<(pt2web::gpu::RunStats, pt2web::gpu::RunStats)>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn bench_one(
    p: &Program,
    device: &str,
    args: &BenchArgs,
    inputs: &[RValue],
) -> Result<DeviceResult, String> {
    let t0 = Instant::now();
    let mut e = open_backend(p.clone(), device, &args.backend, args.adapter)?;
    let session_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let prepare = if args.no_prepare {
        None
    } else {
        prepare_like(&mut *e, inputs, args.progress)?
    };
    let prepare_ms = if args.no_prepare {
        0.0
    } else {
        t.elapsed().as_secs_f64() * 1e3
    };
    let label = if device == "gpu" {
        "bench gpu"
    } else {
        "bench cpu"
    };
    let total = 1 + args.warmup + args.repeat;
    let mut bar = Progress::new(args.progress, label, total as u64, "runs");
    let t = Instant::now();
    e.run(inputs.to_vec()).map_err(|x| x.to_string())?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    let first_stats = e.last_stats().cloned();
    bar.set(1);
    for i in 0..args.warmup {
        e.run(inputs.to_vec()).map_err(|x| x.to_string())?;
        bar.set(2 + i as u64);
    }
    let mut times = Vec::new();
    for i in 0..args.repeat {
        let t = Instant::now();
        e.run(inputs.to_vec()).map_err(|x| x.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        bar.set((2 + args.warmup + i) as u64);
    }
    bar.finish();
    let min_ms = times.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(DeviceResult {
        device: e.describe(),
        session_ms,
        prepare_ms,
        prepare,
        first_ms,
        median_ms: median(&mut times),
        min_ms,
        runs: args.repeat,
        gpu: first_stats.zip(e.last_stats().cloned()),
    })
}

fn stats_json(s: &pt2web::gpu::RunStats) -> serde_json::Value {
    serde_json::json!({
        "submits": s.submits, "buffer_allocations": s.buffer_allocations,
        "pipelines_created": s.pipelines_created,
        "bind_groups_created": s.bind_groups_created, "dispatches": s.dispatches,
        "bound_bytes": s.bound_bytes,
        "peak_bytes": s.peak_bytes, "workspace_bytes": s.workspace_bytes,
        "gpu_nodes": s.gpu_nodes,
        "view_nodes": s.view_nodes, "fallback_nodes": s.fallback_nodes(),
        "fallbacks": s.fallbacks, "uploads": s.uploads, "downloads": s.downloads,
        "upload_bytes": s.upload_bytes, "download_bytes": s.download_bytes,
        "plan_steps": s.plan_steps, "host_ms": s.host_us as f64 / 1e3,
        "wait_ms": s.wait_us as f64 / 1e3, "replayed": s.replayed, "tape": s.tape,
    })
}

fn stats_line(s: &pt2web::gpu::RunStats) -> String {
    format!(
        "{}{} plan steps, host {:.2} ms, {} submits, {} dispatches ({:.1} MB bound), {} buffer allocations, {} pipelines created, {} bind groups created, peak {:.1} MB, {} gpu nodes (+{} views), {} fallbacks",
        if s.replayed { "replayed, " } else { "" },
        s.plan_steps,
        s.host_us as f64 / 1e3,
        s.submits,
        s.dispatches,
        s.bound_bytes as f64 / 1e6,
        s.buffer_allocations,
        s.pipelines_created,
        s.bind_groups_created,
        s.peak_bytes as f64 / 1e6,
        s.gpu_nodes,
        s.view_nodes,
        s.fallback_nodes()
    )
}

pub fn bench(args: BenchArgs) -> Result<(), String> {
    let devices: Vec<&str> = match args.device.as_str() {
        "both" => vec!["cpu", "gpu"],
        "cpu" => vec!["cpu"],
        "gpu" => vec!["gpu"],
        other => return Err(format!("--device {other}: expected cpu, gpu or both")),
    };
    {
        use pt2web::backends::opt_einsum;
        match args.opt_einsum.as_str() {
            "off" => opt_einsum::set_enabled(false),
            s => opt_einsum::set_strategy(opt_einsum::Strategy::parse(s).ok_or_else(|| {
                format!("--opt-einsum {s}: expected auto, greedy, optimal or off")
            })?),
        }
    }
    if args.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    let (source, p, load_ms) = load_with_progress(
        &Some(args.model.clone()),
        args.program.as_deref(),
        args.progress,
        Default::default(),
    )?;
    let (inputs, origin) = gather_inputs_from(&p, &args.inputs, &args.named, true)?;
    let mut results = Vec::new();
    for d in &devices {
        results.push(bench_one(&p, d, &args, &inputs)?);
    }
    let ratio = (results.len() == 2).then(|| results[1].median_ms / results[0].median_ms);
    if args.json {
        let devs: Vec<serde_json::Value> = results
            .iter()
            .map(|r| {
                serde_json::json!({
                    "device": r.device, "session_ms": r.session_ms, "prepare_ms": r.prepare_ms,
                    "prepare": r.prepare.as_ref().map(|p| serde_json::json!({
                        "pipelines_created": p.pipelines_created,
                        "pipelines_ms": p.pipelines_ms, "warm_up_ms": p.warm_up_ms,
                        "first_dispatches": p.first_dispatches,
                        "wait_ms": p.wait_ms,
                        "bind_groups_created": p.bind_groups_created,
                        "plan_steps": p.plan_steps, "autotuned": p.autotuned,
                        "stopped": p.stopped,
                    })),
                    "cold_start_ms": r.session_ms + r.prepare_ms + r.first_ms,
                    "first_run_ms": r.first_ms,
                    "median_run_ms": r.median_ms, "min_run_ms": r.min_ms, "runs": r.runs,
                    "gpu_first_run": r.gpu.as_ref().map(|g| stats_json(&g.0)),
                    "gpu_per_run": r.gpu.as_ref().map(|g| stats_json(&g.1)),
                })
            })
            .collect();
        let v = serde_json::json!({
            "model": source, "program": p.name, "inputs_from": origin, "load_ms": load_ms,
            "warmup": args.warmup, "devices": devs, "gpu_over_cpu_median": ratio,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!("{source}: program '{}' (inputs: {origin})", p.name);
    println!("  load {load_ms:.1} ms");
    for r in &results {
        println!(
            "  {}: session {:.1} ms, prepare {:.1} ms, first run {:.1} ms, warm median {:.2} ms, min {:.2} ms ({} runs after {} warmup)",
            r.device, r.session_ms, r.prepare_ms, r.first_ms, r.median_ms, r.min_ms, r.runs, args.warmup
        );
        if let Some(p) = &r.prepare {
            println!(
                "    prepare: {} pipelines ({:.1} ms), {} bind groups created, {} plan steps, {} shapes autotuned, warm-up {:.1} ms ({} first dispatches), {:.1} ms waiting for the device{}",
                p.pipelines_created,
                p.pipelines_ms,
                p.bind_groups_created,
                p.plan_steps,
                p.autotuned,
                p.warm_up_ms,
                p.first_dispatches,
                p.wait_ms,
                p.stopped
                    .as_ref()
                    .map(|s| format!(" (stopped early: {s})"))
                    .unwrap_or_default()
            );
        }
        if let Some((first, warm)) = &r.gpu {
            println!("    first run: {}", stats_line(first));
            println!("    per warm run: {}", stats_line(warm));
            if !warm.fallbacks.is_empty() {
                let mut f: Vec<_> = warm.fallbacks.iter().collect();
                f.sort_by(|a, b| b.1.cmp(a.1));
                let top: Vec<String> = f.iter().take(6).map(|(k, v)| format!("{k} x{v}")).collect();
                println!("    fallbacks: {}", top.join(", "));
            }
        }
    }
    if let Some(r) = ratio {
        println!(
            "  gpu/cpu median: {r:.2}x ({})",
            if r > 1.0 {
                "the gpu is slower"
            } else {
                "the gpu is faster"
            }
        );
    }
    Ok(())
}
