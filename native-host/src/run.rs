//! `pt2web run` (and the loading helpers `pt2web check` shares).

use crate::read_model;
use crate::tensors_io::{read_npy, read_safetensors, write_safetensors};
use clap::Args;
use pt2web::archive::pt2::LoadOptions;
use pt2web::cpu::Tensor;
use pt2web::pickle::PyValue;
use pt2web::program::{Program, Pt2Archive};
use pt2web::runtime::{RValue, Session};
use pt2web::Limits;
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
    #[arg(long, default_value = "cpu")]
    device: String,
    #[arg(long)]
    program: Option<String>,
    /// Print a JSON summary (inputs, outputs, timings).
    #[arg(long)]
    json: bool,
    /// Run this many times and report the median (the first run is reported separately).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
}

pub(crate) fn check_device(device: &str) -> Result<(), String> {
    match device {
        "cpu" | "auto" => Ok(()),
        "gpu" => Err("--device gpu: the wgpu backend is not built yet; use --device cpu".into()),
        other => Err(format!("--device {other}: expected cpu, gpu or auto")),
    }
}

pub(crate) fn load(
    model: &Option<PathBuf>,
    program: Option<&str>,
) -> Result<(String, Program, f64), String> {
    let t0 = Instant::now();
    let (source, bytes) = read_model(model)?;
    let archive = Pt2Archive::open(&source, bytes, Limits::default()).map_err(|e| e.to_string())?;
    let p = archive
        .program(program, &LoadOptions::default())
        .map_err(|e| e.to_string())?;
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
    let names: Vec<String> = p.user_inputs().iter().map(|u| u.name.clone()).collect();
    let mut given: BTreeMap<String, Tensor> = BTreeMap::new();
    if let Some(f) = &args.inputs {
        given.extend(read_safetensors(f)?);
    }
    for spec in &args.named {
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
            _ => Err(format!("no inputs given; the program takes {} (use --inputs FILE.safetensors or NAME=FILE.npy)", names.join(", "))),
        };
    }
    if let Some(extra) = given.keys().find(|k| !names.contains(k)) {
        return Err(format!(
            "input '{extra}' is not an input of the program (inputs: {})",
            names.join(", ")
        ));
    }
    let mut out = Vec::new();
    for n in &names {
        let t = given
            .remove(n)
            .ok_or_else(|| format!("input '{n}' is missing (inputs: {})", names.join(", ")))?;
        out.push(RValue::Tensor(t));
    }
    Ok((out, "given"))
}

pub fn run(args: RunArgs) -> Result<(), String> {
    check_device(&args.device)?;
    let (source, p, load_ms) = load(&args.model, args.program.as_deref())?;
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
    let t0 = Instant::now();
    let mut session = Session::new(p).map_err(|e| e.to_string())?;
    let prepare_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::new();
    let mut outs = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let t = Instant::now();
        outs = session.run(inputs.clone()).map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
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
    if let Some(path) = &args.out {
        write_safetensors(path, &named)?;
    }
    let summary = serde_json::json!({
        "model": source, "program": session.program.name, "device": "cpu", "inputs_from": origin,
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
            "{source}: program '{}' on cpu ({origin})",
            session.program.name
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
        if let Some(p) = &args.out {
            println!("  wrote {p}");
        }
    }
    Ok(())
}
