//! `pt2web run` (and the loading helpers `pt2web check` shares).

use crate::open_model;
use crate::tensors_io::{read_npy, read_safetensors, write_safetensors};
use clap::Args;
use pt2web::archive::pt2::LoadOptions;
use pt2web::backend::Backend;
use pt2web::cpu::Tensor;
use pt2web::gpu::{GpuInput, Slot};
use pt2web::meta::MValue;
use pt2web::pickle::PyValue;
use pt2web::program::{Program, Pt2Archive};
use pt2web::runtime::{RValue, Session};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct RunArgs {
    /// The .pt2 file (the embedded example model when omitted).
    model: Option<PathBuf>,
    /// Inputs as a safetensors file keyed by user-input name (nested inputs flattened, e.g. batch_feat).
    #[arg(long)]
    inputs: Option<String>,
    /// Extra or overriding inputs: NAME=FILE.npy (repeatable).
    #[arg(value_name = "NAME=FILE.npy")]
    named: Vec<String>,
    /// Where to write the outputs (safetensors, keys output_0, output_1, ...).
    #[arg(long)]
    out: Option<String>,
    /// Where to write the state after the runs (safetensors keyed by FQN: parameters,
    /// buffers with the runs' mutations, constants). On the GPU the state the runs update
    /// stays there; this reads it back once, at the end.
    #[arg(long, value_name = "FILE.safetensors")]
    out_state: Option<String>,
    #[command(flatten)]
    target: Target,
    /// Print a JSON summary (inputs, outputs, timings).
    #[arg(long)]
    json: bool,
    /// Run this many times and report the median (the first run is reported separately).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Profile the last run: write a Chrome trace (chrome://tracing, Perfetto) here and print
    /// the ops that took the most time (on the GPU: GPU time per kernel from timestamps).
    #[arg(long, value_name = "TRACE.json")]
    profile: Option<PathBuf>,
    /// GPU only: record every allocation and free of the GPU memory pool from the load on
    /// (with the op and node that caused it) and write a snapshot in the layout of
    /// torch.cuda.memory._snapshot() here, as JSON (torch.cuda._memory_viz reads it once
    /// loaded with json.load).
    #[arg(long, value_name = "FILE.json")]
    memory_snapshot: Option<PathBuf>,
    /// Show progress bars on stderr even when it is not a terminal.
    #[arg(long)]
    progress: bool,
    /// Stop a run that takes longer than this many seconds (an error naming the node it
    /// stopped before; with --repeat, each run has this long).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
}

/// Where a program runs: `--device`, `--backend`, `--program` (`pt2web run`, `generate`).
#[derive(Args)]
pub struct Target {
    /// cpu, gpu (wgpu) or auto (the GPU when an adapter is present); `pt2web run` also takes
    /// meta (each output's dtype and shape from the shape rules, computing no values, like
    /// torch's meta device).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// GPU backend for --device gpu/auto: auto, vulkan, metal, dx12, gl.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// The GPU adapter to use, by its number in `pt2web devices` (the first, best one by
    /// default).
    #[arg(long, value_name = "N")]
    pub adapter: Option<usize>,
    /// Only this program of a multi-program archive.
    #[arg(long)]
    pub program: Option<String>,
    /// Quantize the weights of linear layers and embeddings at load: f32 (keep them),
    /// int8 (a scale per output row), int4 or int4:GROUP (a scale per GROUP input
    /// features, 32 by default); dequantized inside the kernels.
    #[arg(long, default_value = "f32")]
    pub weights: String,
    /// Compute in this dtype: f32 (as exported) or f16 (the float32 work in float16, weights
    /// converted at load, inputs and outputs staying float32; on the GPU the adapter needs
    /// shader-f16).
    #[arg(long, default_value = "f32")]
    pub dtype: String,
}

impl Target {
    /// `--weights` and `--dtype`, parsed.
    pub fn load_options(&self) -> Result<LoadOptions, String> {
        Ok(LoadOptions {
            weights: self
                .weights
                .parse()
                .map_err(|e| format!("--weights: {e}"))?,
            dtype: self.dtype.parse().map_err(|e| format!("--dtype: {e}"))?,
            ..Default::default()
        })
    }
}

pub(crate) fn check_device(device: &str) -> Result<(), String> {
    match device {
        "cpu" | "auto" | "gpu" => Ok(()),
        other => Err(format!("--device {other}: expected cpu, gpu or auto")),
    }
}

/// The backend for `--device` (`cpu`, `gpu`, or `auto`: the GPU where wgpu finds an adapter
/// of `--backend`, else the CPU); `adapter` is `--adapter N`, a number in `pt2web devices`.
pub(crate) fn open_backend(
    p: Program,
    device: &str,
    backend: &str,
    adapter: Option<usize>,
) -> Result<Box<dyn Backend>, String> {
    let cpu = |p: Program| -> Result<Box<dyn Backend>, String> {
        if p.precision == pt2web::archive::pt2::Precision::F16 {
            eprintln!(
                "note: --dtype f16 on the CPU computes each op in f32 and rounds it to f16 (as \
                 torch's CPU kernels do): slower than f32; f16 pays off on GPUs with shader-f16"
            );
        }
        Ok(Box::new(Session::new(p).map_err(|e| e.to_string())?))
    };
    match device {
        "cpu" => cpu(p),
        "meta" => Ok(Box::new(
            pt2web::backend::MetaSession::new(p).map_err(|e| e.to_string())?,
        )),
        "gpu" | "auto" => {
            let b = pt2web::gpu::BackendChoice::parse(backend).map_err(|e| e.to_string())?;
            if let Some(n) = adapter {
                let count = pt2web::gpu::adapters(b).len();
                if n >= count {
                    return Err(format!(
                        "--adapter {n}: wgpu finds {count} adapter(s) for --backend {backend}, \
                         numbered from 0 (see `pt2web devices`)"
                    ));
                }
            }
            // With every backend, `--adapter N` is device N of `pt2web devices`: it becomes
            // the current device, which the session opens (as torch.cuda.set_device).
            let opened = if b == pt2web::gpu::BackendChoice::Auto {
                adapter
                    .map_or(Ok(()), pt2web::gpu::set_device)
                    .and_then(|()| pt2web::gpu::current_gpu_device())
            } else {
                pt2web::gpu::GpuDevice::open(b, adapter).map(std::sync::Arc::new)
            };
            match opened {
                Ok(d) => Ok(Box::new(
                    pt2web::gpu::GpuSession::new(p, d).map_err(|e| e.to_string())?,
                )),
                Err(_) if device == "auto" => cpu(p),
                Err(e) => Err(format!("--device gpu: {e}")),
            }
        }
        other => Err(format!("--device {other}: expected cpu, gpu, auto or meta")),
    }
}

/// The actions `--memory-snapshot` keeps at most (the latest ones).
const MEMORY_HISTORY_ENTRIES: usize = 1 << 22;

/// `--memory-snapshot FILE.json`: the GPU pool and its history after the runs.
fn write_memory_snapshot(b: &dyn Backend, path: &std::path::Path) -> Result<(), String> {
    let g = b.gpu().ok_or_else(|| {
        format!(
            "--memory-snapshot: the program runs on the {} backend, which has no GPU memory \
             pool; use --device gpu",
            b.kind()
        )
    })?;
    let snap = g.device.memory_snapshot();
    let json = serde_json::to_string(&snap).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!(
        "memory snapshot written to {}: {} segments, {} B live, {} actions",
        path.display(),
        snap.segments.len(),
        g.device.current_allocated_memory(),
        snap.device_traces.iter().map(Vec::len).sum::<usize>()
    );
    Ok(())
}

/// Prepare for inputs shaped like `inputs` ([`Backend::prepare`]): on the GPU, what the
/// prepare pass did.
/// A bar with the elapsed time stands for the pass while it works (a terminal, or `--progress`).
pub(crate) fn prepare_like(
    b: &mut dyn Backend,
    inputs: &[RValue],
    progress: bool,
) -> Result<Option<pt2web::gpu::PrepareStats>, String> {
    let metas = pt2web::plan::metas(&pt2web::plan::signature(inputs));
    let mut bar = crate::progress::Progress::new(progress, "preparing", 1, "pass");
    bar.set(0);
    let stats = b.prepare(&metas).map_err(|e| e.to_string());
    bar.finish();
    let stats = stats?;
    Ok(b.gpu().map(|_| stats))
}

/// The `gpu` object of `pt2web run --json` (null on the CPU).
fn gpu_json(b: &dyn Backend) -> serde_json::Value {
    let Some(s) = b.gpu() else {
        return serde_json::Value::Null;
    };
    let st = &s.last_stats;
    serde_json::json!({
        "adapter": s.device.properties.name,
        "backend": s.device.properties.backend,
        "submits": st.submits,
        "buffer_allocations": st.buffer_allocations,
        "pipelines_created": st.pipelines_created,
        "bind_groups_created": st.bind_groups_created,
        "dispatches": st.dispatches,
        "bound_bytes": st.bound_bytes,
        "peak_bytes": st.peak_bytes,
        "gpu_nodes": st.gpu_nodes,
        "view_nodes": st.view_nodes,
        "fallback_nodes": st.fallback_nodes(),
        "fallbacks": st.fallbacks,
        "uploads": st.uploads,
        "downloads": st.downloads,
        "upload_bytes": st.upload_bytes,
        "download_bytes": st.download_bytes,
        "plan_steps": st.plan_steps,
        "host_ms": st.host_us as f64 / 1e3,
        "wait_ms": st.wait_us as f64 / 1e3,
        "replayed": st.replayed,
        "memory_allocated": s.device.current_allocated_memory(),
        "max_memory_allocated": s.device.max_memory_allocated(),
    })
}

pub(crate) fn load(
    model: &Option<PathBuf>,
    program: Option<&str>,
) -> Result<(String, Program, f64), String> {
    load_with_progress(model, program, false, LoadOptions::default())
}

/// [`load`] with a progress bar while reading a large archive (always on a terminal, or
/// with `force`).
pub(crate) fn load_with_progress(
    model: &Option<PathBuf>,
    program: Option<&str>,
    force: bool,
    opts: LoadOptions,
) -> Result<(String, Program, f64), String> {
    let t0 = Instant::now();
    let (source, archive) = match model {
        // Read on demand: the weights go from the file to the session one at a time.
        Some(p) => {
            let src = crate::progress::ProgressFile::open(p, force)?;
            let source = p.display().to_string();
            let archive = Pt2Archive::open_source(&source, std::sync::Arc::new(src), opts.limits)
                .map_err(|e| e.to_string())?;
            (source, archive)
        }
        None => open_model(model, opts.limits)?,
    };
    let p = archive.program(program, &opts).map_err(|e| e.to_string())?;
    Ok((source, p, t0.elapsed().as_secs_f64() * 1e3))
}

/// Flatten pickled sample inputs `(args, kwargs)` into leaves in pytree order.
pub(crate) fn flatten_sample(v: &PyValue, out: &mut Vec<RValue>) -> Result<(), String> {
    match v {
        PyValue::Tensor(t) => out.push(RValue::Tensor(
            Tensor::from_host(t).map_err(|e| e.to_string())?,
        )),
        PyValue::Tuple(xs) | PyValue::List(xs) => {
            xs.iter().try_for_each(|x| flatten_sample(x, out))?
        }
        PyValue::Dict(kv) => kv.iter().try_for_each(|(_, x)| flatten_sample(x, out))?,
        PyValue::Int(i) => out.push(RValue::Int(*i)),
        PyValue::Float(f) => out.push(RValue::Float(*f)),
        PyValue::Bool(b) => out.push(RValue::Bool(*b)),
        PyValue::None => {}
        other => {
            return Err(format!(
                "sample inputs hold a {}, which pt2web cannot pass",
                other.kind()
            ))
        }
    }
    Ok(())
}

fn gather_inputs(p: &Program, args: &RunArgs) -> Result<(Vec<RValue>, &'static str), String> {
    gather_inputs_from(p, &args.inputs, &args.named, false)
}

/// The user inputs: `--inputs` and NAME=FILE.npy, else the archive's sample inputs, else (with
/// `synthesize`) random ones from the declared shapes. Returns where they came from.
pub(crate) fn gather_inputs_from(
    p: &Program,
    inputs: &Option<String>,
    named: &[String],
    synthesize: bool,
) -> Result<(Vec<RValue>, &'static str), String> {
    let names: Vec<String> = p.user_inputs().iter().map(|u| u.name.clone()).collect();
    let mut given: BTreeMap<String, Tensor> = BTreeMap::new();
    if let Some(f) = inputs {
        given.extend(read_safetensors(f)?);
    }
    for spec in named {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| format!("'{spec}': expected NAME=FILE.npy"))?;
        given.insert(name.to_string(), read_npy(file)?);
    }
    if given.is_empty() {
        return match &p.sample_inputs {
            Some(Ok(v)) => {
                let mut out = Vec::new();
                flatten_sample(v, &mut out)?;
                Ok((out, "sample inputs stored in the archive"))
            }
            _ if synthesize => Ok((crate::bench::random_inputs(p)?, "random")),
            _ => Err(format!("no inputs given; the program takes {} (use --inputs FILE.safetensors or NAME=FILE.npy)", names.join(", "))),
        };
    }
    let given = given
        .into_iter()
        .map(|(k, t)| (k, RValue::Tensor(t)))
        .collect();
    let out = pt2web::runtime::order_named_inputs(p, given).map_err(|e| e.to_string())?;
    Ok((out, "given"))
}

pub fn run(args: RunArgs) -> Result<(), String> {
    let (source, p, load_ms) = load_with_progress(
        &args.model,
        args.target.program.as_deref(),
        args.progress,
        args.target.load_options()?,
    )?;
    let (inputs, origin) = gather_inputs(&p, &args)?;
    let input_desc: Vec<serde_json::Value> = p
        .user_inputs()
        .iter()
        .zip(&inputs)
        .map(|(u, v)| match v {
            RValue::Tensor(t) => {
                serde_json::json!({"name": u.name, "dtype": t.dtype.name(), "shape": t.sizes})
            }
            other => serde_json::json!({"name": u.name, "value": format!("{other:?}")}),
        })
        .collect();
    if args.memory_snapshot.is_some() {
        pt2web::gpu::memory::record_memory_history(true, MEMORY_HISTORY_ENTRIES);
    }
    let t0 = Instant::now();
    let mut session = open_backend(
        p,
        &args.target.device,
        &args.target.backend,
        args.target.adapter,
    )?;
    let prepare_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::new();
    let mut outs = Vec::new();
    let mut metas = Vec::new();
    if session.kind() == "meta" && (args.out.is_some() || args.out_state.is_some()) {
        return Err(
            "--out/--out-state: the meta device computes no values (it gives each output's \
                    dtype and shape); use --device cpu or gpu"
                .into(),
        );
    }
    let runs = args.repeat.max(1);
    for i in 0..runs {
        if i + 1 == runs && args.profile.is_some() {
            if let Some(g) = session.gpu().filter(|g| !g.device.has_timestamps()) {
                return Err(format!(
                    "--profile: the adapter {} has no timestamp-query, so GPU kernels \
                     cannot be timed; use --device cpu",
                    g.device.properties.name
                ));
            }
            session.session_mut().run_state.profiler = Some(Default::default());
        }
        let t = Instant::now();
        if session.kind() == "meta" {
            let feed = inputs.iter().cloned().map(GpuInput::Cpu).collect();
            metas = pollster::block_on(session.run_with(feed, false))
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter_map(|s| match s {
                    Slot::Meta(m) => Some(m),
                    _ => None,
                })
                .collect();
        } else {
            let options = pt2web::runtime::RunOptions {
                timeout_ms: args.timeout.map(|s| s * 1e3),
                ..Default::default()
            };
            outs = session
                .run_options(inputs.clone(), &options)
                .map_err(|e| e.to_string())?;
        }
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    if let Some(path) = &args.profile {
        let dev = match session.gpu() {
            Some(g) => session_describe(g),
            None => "cpu".to_string(),
        };
        let prof = session.session_mut().run_state.profiler.take();
        if let Some(p) = prof {
            let trace = serde_json::to_string(&p.chrome_trace(&dev)).map_err(|e| e.to_string())?;
            std::fs::write(path, trace).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!(
                "profile of the last run ({} kernels), written to {}:",
                p.events.len(),
                path.display()
            );
            for o in p.summary().iter().take(12) {
                eprintln!("  {:>9.3} ms  {:>5}x  {}", o.total_ms, o.count, o.target);
            }
        }
    }
    if let Some(path) = &args.memory_snapshot {
        write_memory_snapshot(session.as_ref(), path)?;
    }
    let first_ms = times[0];
    let mut rest = times[1..].to_vec();
    rest.sort_by(f64::total_cmp);
    let median_ms = if rest.is_empty() {
        first_ms
    } else {
        rest[rest.len() / 2]
    };
    let mut named = Vec::new();
    let mut out_desc = Vec::new();
    for (i, v) in outs.iter().enumerate() {
        let name = format!("output_{i}");
        match v {
            RValue::Tensor(t) => {
                out_desc.push(
                    serde_json::json!({"name": name, "dtype": t.dtype.name(), "shape": t.sizes}),
                );
                named.push((name, t.clone()));
            }
            other => {
                out_desc.push(serde_json::json!({"name": name, "value": format!("{other:?}")}))
            }
        }
    }
    for (i, m) in metas.iter().enumerate() {
        let name = format!("output_{i}");
        out_desc.push(match m {
            MValue::Tensor(t) => {
                serde_json::json!({"name": name, "dtype": t.dtype.name(), "shape": t.sizes})
            }
            MValue::Tensors(ts) => serde_json::json!({"name": name, "tensors": ts
                .iter()
                .map(|t| serde_json::json!({"dtype": t.dtype.name(), "shape": t.sizes}))
                .collect::<Vec<_>>()}),
            other => serde_json::json!({"name": name, "value": format!("{other:?}")}),
        });
    }
    if let Some(path) = &args.out {
        write_safetensors(path, &named)?;
    }
    if let Some(path) = &args.out_state {
        pollster::block_on(session.sync_state()).map_err(|e| format!("--out-state: {e}"))?;
        let state: Vec<(String, pt2web::cpu::Tensor)> = session
            .session()
            .state
            .iter()
            .filter(|(k, _)| !k.starts_with(pt2web::passes::FOLDED_PREFIX))
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        write_safetensors(path, &state)?;
    }
    let summary = serde_json::json!({
        "model": source, "program": session.session().program.name, "device": session.describe(), "inputs_from": origin,
        "gpu": gpu_json(&*session),
        "inputs": input_desc, "outputs": out_desc, "out": args.out,
        "timings_ms": {"load": load_ms, "prepare": prepare_ms, "first_run": first_ms, "median_run": median_ms, "runs": times.len()},
    });
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "{source}: program '{}' on {} ({origin})",
            session.session().program.name,
            session.describe()
        );
        for d in &out_desc {
            println!(
                "  {}  {}  {}",
                d["name"].as_str().unwrap_or(""),
                d["dtype"].as_str().unwrap_or(""),
                d["shape"]
            );
        }
        for (name, t) in named.iter().take(4) {
            let v = t.to_vec::<f64>();
            let head: Vec<String> = v.iter().take(6).map(|x| format!("{x:.5}")).collect();
            println!(
                "  {name}[:6] = [{}{}]",
                head.join(", "),
                if v.len() > 6 { ", ..." } else { "" }
            );
        }
        println!("  load {load_ms:.1} ms, prepare {prepare_ms:.1} ms, first run {first_ms:.1} ms, median run {median_ms:.1} ms");
        if let Some(st) = session.last_stats() {
            println!(
                "  gpu: {} nodes on the gpu (+{} views), {} fell back to the cpu, {} submits, {} buffer allocations, {} pipelines created, {} bind groups created, peak {:.1} MB",
                st.gpu_nodes, st.view_nodes, st.fallback_nodes(), st.submits, st.buffer_allocations, st.pipelines_created, st.bind_groups_created, st.peak_bytes as f64 / 1e6
            );
        }
        if let Some(p) = &args.out {
            println!("  wrote {p}");
        }
    }
    Ok(())
}

fn session_describe(s: &pt2web::gpu::GpuSession) -> String {
    format!(
        "gpu ({}, {}; GPU kernel time, CPU fallbacks not shown)",
        s.device.properties.name, s.device.properties.backend
    )
}

/// `pt2web devices`: the CPU capability (`backends::cpu::get_cpu_capability`) and every
/// adapter wgpu finds, with its key limits and features (`--json`: `{cpu_capability,
/// adapters: [...]}`).
pub fn devices(backend: &str, json: bool) -> Result<(), String> {
    let b = pt2web::gpu::BackendChoice::parse(backend).map_err(|e| e.to_string())?;
    let list: Vec<_> = pt2web::gpu::adapters(b)
        .iter()
        .map(pt2web::gpu::device::properties_of)
        .collect();
    if json {
        let v: Vec<serde_json::Value> = list
            .iter()
            .enumerate()
            .map(|(i, p)| {
                serde_json::json!({
                    "index": i, "name": p.name, "backend": p.backend, "type": p.device_type,
                    "driver": p.driver, "driver_info": p.driver_info,
                    "features": p.features, "recommended_max_memory": p.recommended_max_memory,
                    "limits": {
                        "max_buffer_size": p.limits.max_buffer_size,
                        "max_storage_buffer_binding_size": p.limits.max_storage_buffer_binding_size,
                        "max_storage_buffers_per_shader_stage": p.limits.max_storage_buffers_per_shader_stage,
                        "max_compute_workgroup_storage_size": p.limits.max_compute_workgroup_storage_size,
                        "max_compute_invocations_per_workgroup": p.limits.max_compute_invocations_per_workgroup,
                        "max_compute_workgroups_per_dimension": p.limits.max_compute_workgroups_per_dimension,
                    },
                })
            })
            .collect();
        let all = serde_json::json!({
            "cpu_capability": pt2web::backends::cpu::get_cpu_capability(),
            "adapters": v,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "cpu: capability {}",
        pt2web::backends::cpu::get_cpu_capability()
    );
    if list.is_empty() {
        println!("no GPU adapters (on Linux without a GPU: apt-get install mesa-vulkan-drivers)");
    }
    for (i, p) in list.iter().enumerate() {
        println!(
            "{i}: {} ({}, {}; driver {} {})",
            p.name, p.backend, p.device_type, p.driver, p.driver_info
        );
        println!(
            "   max buffer {} B, max storage binding {} B, {} storage buffers/stage, workgroup storage {} B, {} invocations/workgroup, {} workgroups/dim",
            p.limits.max_buffer_size,
            p.limits.max_storage_buffer_binding_size,
            p.limits.max_storage_buffers_per_shader_stage,
            p.limits.max_compute_workgroup_storage_size,
            p.limits.max_compute_invocations_per_workgroup,
            p.limits.max_compute_workgroups_per_dimension
        );
        println!(
            "   features: {}; memory budget {} B",
            if p.features.is_empty() {
                "none".to_string()
            } else {
                p.features.join(", ")
            },
            p.recommended_max_memory
        );
    }
    Ok(())
}
