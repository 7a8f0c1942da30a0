//! `pt2web check`: before running anything, what the CPU device cannot run yet (ops without a
//! kernel, ops without a shape rule, dtypes the kernels refuse, custom objects), and the
//! memory estimate of the meta pass for the given, sample or example inputs. With
//! `--device gpu`, also per op target how many nodes the GPU backend runs with a GPU kernel
//! (from the dtypes torch recorded for each node) and how many fall back to the CPU, and why.

use crate::run::{check_device, flatten_sample, load};
use crate::tensors_io::read_safetensors;
use pt2web::meta::{self, ExampleOrigin, MValue, MemoryEstimate, MetaTensor};
use pt2web::program::{Arg, Graph, InputKind, Program, ValueKind};
use pt2web::runtime::{RValue, Session};
use pt2web::DType;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Meta values of the inputs to estimate memory for, and where they came from; `Err` says
/// which dims need a value.
fn input_metas(p: &Program, inputs: Option<&str>) -> Result<(Vec<MValue>, String), String> {
    let names: Vec<String> = p.user_inputs().iter().map(|u| u.name.clone()).collect();
    if let Some(f) = inputs {
        let mut given = read_safetensors(f)?;
        if let Some(extra) = given.keys().find(|k| !names.contains(k)) {
            return Err(format!(
                "input '{extra}' in {f} is not an input of the program (inputs: {})",
                names.join(", ")
            ));
        }
        let metas = names
            .iter()
            .map(|n| {
                given
                    .remove(n)
                    .map(|t| MValue::Tensor(MetaTensor::new(t.dtype, t.sizes.clone())))
                    .ok_or_else(|| {
                        format!(
                            "input '{n}' is missing from {f} (inputs: {})",
                            names.join(", ")
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Ok((metas, format!("the shapes in {f}")));
    }
    if let Some(Ok(v)) = &p.sample_inputs {
        let mut vals = Vec::new();
        if flatten_sample(v, &mut vals).is_ok() && vals.len() == names.len() {
            let metas = vals
                .into_iter()
                .map(|v| match v {
                    RValue::Tensor(t) => MValue::Tensor(MetaTensor::new(t.dtype, t.sizes.clone())),
                    RValue::Int(i) => MValue::Int(i),
                    RValue::Float(f) => MValue::Float(f),
                    RValue::Bool(b) => MValue::Bool(b),
                    _ => MValue::None,
                })
                .collect();
            return Ok((metas, "the sample inputs stored in the archive".into()));
        }
    }
    match meta::example_inputs(p) {
        Ok((m, ExampleOrigin::Static)) => Ok((m, "the program's static input shapes".into())),
        Ok((m, ExampleOrigin::UpperBound)) => Ok((
            m,
            "the upper end of each dynamic dim's range".into(),
        )),
        Err(needs) => Err(format!(
            "the program has dynamic dims without a usable upper bound; give shapes with --inputs FILE.safetensors. Dims that need a value: {}",
            needs.join("; ")
        )),
    }
}

/// Per op target on the GPU backend: nodes with a GPU kernel, views, CPU fallbacks (with
/// the reasons).
#[derive(Default)]
struct GpuOp {
    gpu: usize,
    view: usize,
    cpu: usize,
    reasons: std::collections::BTreeSet<String>,
}

fn gpu_report(p: &Program) -> BTreeMap<String, GpuOp> {
    let mut ops: BTreeMap<String, GpuOp> = BTreeMap::new();
    gpu_walk(&p.graph, &mut ops);
    ops
}

/// Count `g`'s nodes into `ops`, and those of its subgraphs (`cond` branches, `while_loop`
/// and `map` bodies run on the GPU too).
fn gpu_walk(g: &Graph, ops: &mut BTreeMap<String, GpuOp>) {
    use pt2web::gpu::kernels::support::{gpu_supports, Support};
    let dtype = |id: usize| match &g.value(id).kind {
        ValueKind::Tensor { dtype, .. } => Some(*dtype),
        _ => None,
    };
    for node in &g.nodes {
        let mut ins = Vec::new();
        node.inputs.iter().for_each(|(_, a)| a.values(&mut ins));
        let mut outs = Vec::new();
        node.outputs.iter().for_each(|a| a.values(&mut outs));
        let ins: Vec<DType> = ins.into_iter().filter_map(dtype).collect();
        let outs: Vec<DType> = outs.into_iter().filter_map(dtype).collect();
        let e = ops.entry(node.target.clone()).or_default();
        match gpu_supports(&node.target, &ins, &outs) {
            Support::Gpu => e.gpu += 1,
            Support::View => e.view += 1,
            Support::NoKernel => {
                e.cpu += 1;
                e.reasons.insert("no GPU kernel".into());
            }
            Support::Dtype(why) => {
                e.cpu += 1;
                e.reasons.insert(why);
            }
        }
        for (_, a) in &node.inputs {
            if let Arg::Graph(sub) = a {
                gpu_walk(sub, ops);
            }
        }
    }
}

fn gpu_json(ops: &BTreeMap<String, GpuOp>) -> serde_json::Value {
    let sum = |f: fn(&GpuOp) -> usize| ops.values().map(f).sum::<usize>();
    serde_json::json!({
        "gpu_nodes": sum(|o| o.gpu), "view_nodes": sum(|o| o.view), "fallback_nodes": sum(|o| o.cpu),
        "ops": ops.iter().map(|(k, o)| serde_json::json!({"op": k, "gpu": o.gpu, "view": o.view,
            "cpu": o.cpu, "reasons": o.reasons})).collect::<Vec<_>>(),
    })
}

fn print_gpu(ops: &BTreeMap<String, GpuOp>) {
    let (g, v, c) = ops
        .values()
        .fold((0, 0, 0), |(g, v, c), o| (g + o.gpu, v + o.view, c + o.cpu));
    println!(
        "  on the gpu device: {g} node(s) run a GPU kernel, {v} are views, {c} fall back to the cpu kernel"
    );
    let mut fb: Vec<(&String, &GpuOp)> = ops.iter().filter(|(_, o)| o.cpu > 0).collect();
    fb.sort_by(|a, b| b.1.cpu.cmp(&a.1.cpu).then(a.0.cmp(b.0)));
    for (k, o) in fb {
        let reasons: Vec<&str> = o.reasons.iter().map(String::as_str).collect();
        println!(
            "    cpu {k} (x{}{}): {}",
            o.cpu,
            if o.gpu + o.view > 0 {
                format!(", {} on the gpu", o.gpu + o.view)
            } else {
                String::new()
            },
            reasons.join("; ")
        );
    }
    for (k, o) in ops.iter().filter(|(_, o)| o.cpu == 0) {
        let how = if o.view > 0 { "view" } else { "gpu" };
        println!("    {how} {k} (x{})", o.gpu + o.view);
    }
}

fn mib(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

fn memory_json(m: &MemoryEstimate) -> serde_json::Value {
    serde_json::json!({
        "parameter_bytes": m.parameter_bytes, "buffer_bytes": m.buffer_bytes,
        "constant_bytes": m.constant_bytes, "derived_bytes": m.derived_bytes,
        "input_bytes": m.input_bytes,
        "peak_activation_bytes": m.peak_activation_bytes, "peak_node": m.peak_node,
        "total_bytes": m.total_bytes, "data_dependent": m.data_dependent,
    })
}

pub fn check(
    model: Option<PathBuf>,
    program: Option<String>,
    device: String,
    json: bool,
    inputs: Option<String>,
) -> Result<(), String> {
    check_device(&device)?;
    let (source, mut p, _) = load(&model, program.as_deref())?;
    // The graph every session runs: after the graph passes.
    let passes = pt2web::passes::run(&mut p, pt2web::backends::graph_passes());
    let gpu = (device == "gpu").then(|| gpu_report(&p));
    let missing = Session::unsupported_ops(&p);
    let hist = p.graph.op_histogram();
    let no_rule = meta::missing_rules(&p);
    // Dtypes the CPU tensors cannot hold (the kernels' own constructor decides).
    let bad_dtypes: BTreeMap<DType, usize> = meta::dtypes(&p)
        .into_iter()
        .filter(|(d, _)| pt2web::cpu::Tensor::zeros(*d, &[0]).is_err())
        .collect();
    let mut custom: Vec<String> = p.custom_objects.clone();
    for i in &p.inputs {
        if let InputKind::CustomObj { name } = &i.kind {
            custom.push(format!("input '{}' ({name})", i.name));
        }
    }
    for v in &p.graph.values {
        if let ValueKind::CustomObj { class_fqn } = &v.kind {
            custom.push(format!("value '{}' ({class_fqn})", v.name));
        }
    }
    custom.sort();
    custom.dedup();
    // The memory estimate: a failure is reported; it is fatal only for shapes the user gave.
    let estimate = input_metas(&p, inputs.as_deref()).and_then(|(metas, origin)| {
        meta::infer(&p, &metas)
            .map(|inf| (meta::estimate(&p, &inf), origin))
            .map_err(|e| format!("the meta pass failed: {e}"))
    });
    if inputs.is_some() {
        if let Err(e) = &estimate {
            if !e.starts_with("the meta pass") {
                return Err(e.clone());
            }
        }
    }
    if json {
        let (memory, memory_error, inputs_from) = match &estimate {
            Ok((m, o)) => (memory_json(m), None, Some(o.clone())),
            Err(e) => (serde_json::Value::Null, Some(e.clone()), None),
        };
        let v = serde_json::json!({"model": source, "program": p.name, "device": device, "ops": hist.len(),
            "unsupported": missing.iter().map(|m| serde_json::json!({"op": m, "count": hist.get(m)})).collect::<Vec<_>>(),
            "no_shape_rule": no_rule.iter().map(|m| serde_json::json!({"op": m, "count": hist.get(m)})).collect::<Vec<_>>(),
            "unsupported_dtypes": bad_dtypes.iter().map(|(d, n)| serde_json::json!({"dtype": d.name(), "values": n})).collect::<Vec<_>>(),
            "custom_objects": custom, "graph_passes": passes,
            "memory": memory, "memory_error": memory_error, "memory_inputs_from": inputs_from,
            "gpu": gpu.as_ref().map(gpu_json)});
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        if missing.is_empty() {
            println!(
                "{source}: program '{}': all {} ops run on {}",
                p.name,
                hist.len(),
                if device == "gpu" {
                    "gpu (the GPU kernel or the CPU fallback, below)"
                } else {
                    &device
                }
            );
        } else {
            println!(
                "{source}: program '{}': {} of {} ops cannot run on {device} yet:",
                p.name,
                missing.len(),
                hist.len()
            );
            let refused = pt2web::passes::decompose::refusals(&p.graph);
            for m in &missing {
                println!("  {m} (x{})", hist.get(m).copied().unwrap_or(0));
                for (_, why) in refused.iter().filter(|(t, _)| t == m) {
                    println!("    its decomposition does not take these arguments: {why}");
                }
            }
        }
        println!("  {passes}");
        if !no_rule.is_empty() {
            println!(
                "  {} op(s) have no shape rule (meta device):",
                no_rule.len()
            );
            for m in &no_rule {
                println!("    {m} (x{})", hist.get(m).copied().unwrap_or(0));
            }
        }
        for (d, n) in &bad_dtypes {
            println!("  dtype {d} ({n} values) is not supported by the cpu kernels");
        }
        for c in &custom {
            println!("  custom object (torchbind) {c}: not supported");
        }
        if let Some(ops) = &gpu {
            print_gpu(ops);
        }
        match &estimate {
            Ok((m, origin)) => {
                println!("  memory estimate for {origin}:");
                println!(
                    "    parameters {}, buffers {}, constants {}{}",
                    mib(m.parameter_bytes),
                    mib(m.buffer_bytes),
                    mib(m.constant_bytes),
                    if m.derived_bytes > 0 {
                        format!(", folded by the graph passes {}", mib(m.derived_bytes))
                    } else {
                        String::new()
                    }
                );
                println!(
                    "    peak activations {} (inputs {}){}{}",
                    mib(m.peak_activation_bytes),
                    mib(m.input_bytes),
                    m.peak_node
                        .as_ref()
                        .map(|n| format!(", reached at node '{n}'"))
                        .unwrap_or_default(),
                    if m.data_dependent {
                        " (some sizes depend on data: upper bounds)"
                    } else {
                        ""
                    }
                );
                println!("    total {}", mib(m.total_bytes));
            }
            Err(e) => println!("  memory estimate: {e}"),
        }
    }
    if !missing.is_empty() {
        return Err(format!("{} unsupported op(s)", missing.len()));
    }
    match (&inputs, &estimate) {
        (Some(f), Err(e)) => Err(format!("{f}: {e}")),
        _ => Ok(()),
    }
}
