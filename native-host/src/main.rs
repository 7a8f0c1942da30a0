//! `pt2web`: inspect and run PyTorch `.pt2` programs on the desktop.

use clap::{Parser, Subcommand};
use pt2web::archive::pt2::LoadOptions;
use pt2web::program::Pt2Archive;
use pt2web::Limits;
use std::path::PathBuf;
use std::process::ExitCode;

mod bench;
mod check;
mod generate;
mod heap;
mod progress;
mod run;
mod tensors_io;

#[global_allocator]
static HEAP: heap::Counting = heap::Counting;

/// The default model: a small program embedded in the binary, so `pt2web info` works out of the box.
const DEFAULT_MODEL: &[u8] = include_bytes!("../../tests/fixtures/mlp_train.pt2");

#[derive(Parser)]
#[command(
    name = "pt2web",
    version,
    about = "Inspect and run PyTorch torch.export (.pt2) programs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Summarize an archive: programs, inputs/outputs, state, dynamic dims, ops, extra files.
    Info {
        /// The .pt2 file (the embedded example model when omitted).
        model: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Only this program of a multi-program archive.
        #[arg(long)]
        program: Option<String>,
        /// Refuse archives larger than this many uncompressed bytes.
        #[arg(long)]
        max_bytes: Option<u64>,
        /// Also print each program's graph as sessions plan it: after the graph passes
        /// (`PT2WEB_PASSES=none` for the graph as exported), one line per node.
        #[arg(long)]
        plan: bool,
    },
    /// Run a program: inputs keyed by the user-input names `pt2web info` shows, outputs written
    /// as output_0, output_1, ... in flattened pytree order.
    Run(run::RunArgs),
    /// Benchmark a program on the CPU and/or the GPU: load time, first run, median and min warm
    /// runs, and the GPU's submits, buffer allocations, pipeline creations and fallbacks per run.
    Bench(bench::BenchArgs),
    /// Generate tokens with a language model exported with a static KV cache (transformers'
    /// `convert_and_export_with_cache`, ExecuTorch's LLM export): prompt ids in, new ids out.
    Generate(generate::GenerateArgs),
    /// Print the ops-and-dtypes support page (Markdown, as docs/ops.md): every op pt2web
    /// knows, with its CPU kernel, shape rule, and what the GPU does with it.
    Ops,
    /// List the GPU adapters wgpu finds: name, backend, type, key limits, features.
    Devices {
        /// auto, vulkan, metal, dx12 or gl.
        #[arg(long, default_value = "auto")]
        backend: String,
        #[arg(long)]
        json: bool,
    },
    /// List every op, dtype or feature of a program that the chosen device cannot run yet, and
    /// estimate its memory (meta pass) for the given, sample or example input shapes.
    Check {
        /// The .pt2 file (the embedded example model when omitted).
        model: Option<PathBuf>,
        #[arg(long)]
        program: Option<String>,
        #[arg(long, default_value = "cpu")]
        device: String,
        #[arg(long)]
        json: bool,
        /// Input shapes for the memory estimate: a safetensors file keyed by user-input name
        /// (default: the archive's sample inputs, else static or upper-bound shapes).
        #[arg(long)]
        inputs: Option<String>,
    },
    /// Load an archive and write it back as a torch ≥ 2.6 `.pt2` (converts torch 2.5 archives),
    /// optionally adding extra files, as `torch.export.save(..., extra_files=)` does.
    Rewrite {
        input: PathBuf,
        output: PathBuf,
        /// Add or replace an extra file: NAME=PATH.
        #[arg(long = "extra", value_name = "NAME=PATH")]
        extra: Vec<String>,
    },
}

/// The archive at `path` (read on demand, never whole: [`Pt2Archive::open_file`]), or the
/// embedded example; with the name it goes by in messages.
pub(crate) fn open_model(
    path: &Option<PathBuf>,
    limits: Limits,
) -> Result<(String, Pt2Archive), String> {
    match path {
        None => {
            let source = "<embedded mlp_train.pt2>";
            Pt2Archive::open(source, DEFAULT_MODEL, limits)
                .map(|a| (source.to_string(), a))
                .map_err(|e| e.to_string())
        }
        Some(p) => Pt2Archive::open_file(p, limits)
            .map(|a| (p.display().to_string(), a))
            .map_err(|e| e.to_string()),
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Info {
            model,
            json,
            program,
            max_bytes,
            plan,
        } => {
            let mut limits = Limits::default();
            if let Some(m) = max_bytes {
                limits.max_total_bytes = m;
                limits.max_entry_bytes = m;
            }
            let opts = LoadOptions {
                limits,
                ..Default::default()
            };
            let (source, archive) = open_model(&model, limits)?;
            let mut info = pt2web::info::archive_info_filtered(&archive, &opts, program.as_deref())
                .map_err(|e| e.to_string())?;
            info.source = source;
            // Each program after the graph passes, for --plan.
            let mut plans = Vec::new();
            if plan {
                for pi in &info.programs {
                    let mut p = archive
                        .program(Some(&pi.name), &opts)
                        .map_err(|e| e.to_string())?;
                    let report = pt2web::passes::run(&mut p, pt2web::backends::graph_passes());
                    plans.push((p, report));
                }
            }
            if json {
                let mut v = serde_json::to_value(&info).map_err(|e| e.to_string())?;
                if plan {
                    v["plans"] = plans
                        .iter()
                        .map(|(p, r)| {
                            serde_json::json!({"program": p.name, "graph_passes": r,
                                "graph": pt2web::passes::render_graph(&p.graph).lines().map(str::trim).collect::<Vec<_>>()})
                        })
                        .collect();
                }
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
                );
            } else {
                print!("{}", pt2web::info::render(&info));
                for (p, r) in &plans {
                    println!("\nprogram '{}' as planned ({r}):", p.name);
                    print!("{}", pt2web::passes::render_graph(&p.graph));
                }
            }
            Ok(())
        }
        Cmd::Run(args) => run::run(args),
        Cmd::Bench(args) => bench::bench(args),
        Cmd::Generate(args) => generate::generate(args),
        Cmd::Ops => {
            print!("{}", pt2web::ops::doc::support_page());
            Ok(())
        }
        Cmd::Devices { backend, json } => run::devices(&backend, json),
        Cmd::Check {
            model,
            program,
            device,
            json,
            inputs,
        } => check::check(model, program, device, json, inputs),
        Cmd::Rewrite {
            input,
            output,
            extra,
        } => {
            let (_, archive) = open_model(&Some(input), Limits::default())?;
            let opts = LoadOptions::default();
            let programs = archive
                .program_names()
                .iter()
                .map(|n| archive.program(Some(n), &opts))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let mut extra_files = archive.extra_files().map_err(|e| e.to_string())?;
            for e in extra {
                let (name, path) = e
                    .split_once('=')
                    .ok_or_else(|| format!("--extra '{e}': expected NAME=PATH"))?;
                let data = std::fs::read(path)
                    .map_err(|err| format!("--extra {name}: cannot read {path}: {err}"))?;
                extra_files.insert(name.to_string(), data);
            }
            let root = output
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("archive")
                .replace(['/', '\\'], "_");
            let refs: Vec<_> = programs.iter().collect();
            let out =
                pt2web::writer::write_pt2(&root, &refs, &extra_files).map_err(|e| e.to_string())?;
            std::fs::write(&output, out)
                .map_err(|e| format!("cannot write {}: {e}", output.display()))?;
            println!(
                "wrote {} ({} program(s), {} extra file(s))",
                output.display(),
                programs.len(),
                extra_files.len()
            );
            Ok(())
        }
    }
}

/// Exit status of a panic (sysexits' EX_SOFTWARE): a pt2web bug, told apart from a user
/// error's 1 and from Rust's own 101.
const INTERNAL_EXIT: u8 = 70;

/// Keep Mesa's Vulkan device-select layer out of adapter enumeration where no Wayland session
/// exists. The layer (an implicit layer every Mesa install registers) connects to Wayland to
/// find the display's GPU, and without `XDG_RUNTIME_DIR` libwayland prints
/// `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` on every enumeration,
/// which reads as a failure. pt2web ranks adapters itself (discrete first) and `--adapter N`
/// picks one, so the layer adds nothing here. `NODEVICE_SELECT` is the layer's documented
/// off switch; a value the user set is kept.
fn quiet_device_select() {
    let wayland = std::env::var_os("XDG_RUNTIME_DIR").is_some()
        && std::env::var_os("WAYLAND_DISPLAY").is_some();
    if !wayland && std::env::var_os("NODEVICE_SELECT").is_none() {
        // Called first thing in `main`, before any thread exists: nothing reads the
        // environment concurrently.
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

fn main() -> ExitCode {
    quiet_device_select();
    let cli = Cli::parse();
    // Where the last panic happened: kept by a silent hook, printed in one line below (a
    // kernel's panic the runtime catches is already an `internal error` naming its node).
    // RUST_BACKTRACE keeps Rust's own report, with its backtrace.
    static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    if std::env::var_os("RUST_BACKTRACE").is_none() {
        std::panic::set_hook(Box::new(|info| {
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()));
            let mut last = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
            *last = Some(at.unwrap_or_default());
        }));
    }
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
        Err(payload) => {
            let at = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
            eprintln!(
                "error: INTERNAL: pt2web panicked{}: {} (a bug in pt2web: please report it with \
                 the program and the command; RUST_BACKTRACE=1 shows the backtrace)",
                at.unwrap_or_default(),
                pt2web::runtime::panic_message(payload.as_ref())
            );
            ExitCode::from(INTERNAL_EXIT)
        }
    }
}
