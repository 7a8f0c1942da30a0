//! A summary of an archive, as `pt2web info` prints it (and the JS `model.info` returns).

use crate::archive::pt2::{Layout, LoadOptions};
use crate::error::Result;
use crate::program::{Dim, OutputKind, Program, Pt2Archive, StateKind, ValueKind};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: String,
    /// Sizes; symbolic dims as their expression (`s0`, `s0 + 1`).
    pub shape: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct StateSummary {
    pub count: usize,
    /// Elements over all tensors of this kind.
    pub numel: u64,
    pub bytes: u64,
    pub bytes_by_dtype: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SymbolInfo {
    pub name: String,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProgramInfo {
    pub name: String,
    pub ir: String,
    pub torch_version: Option<String>,
    pub schema_version: String,
    pub opset_version: BTreeMap<String, i64>,
    pub inputs: Vec<TensorInfo>,
    pub outputs: Vec<TensorInfo>,
    /// The input and output pytree structures (`((*, {'mask': *}), {})`).
    pub in_spec: Option<String>,
    pub out_spec: Option<String>,
    pub input_paths: Vec<String>,
    pub output_paths: Vec<String>,
    pub parameters: StateSummary,
    pub buffers: StateSummary,
    pub constants: StateSummary,
    /// Groups of state tensors that share one storage (tied weights).
    pub shared_storage: Vec<Vec<String>>,
    pub buffer_mutations: Vec<String>,
    pub user_input_mutations: Vec<String>,
    pub dynamic_symbols: Vec<SymbolInfo>,
    pub range_constraints: BTreeMap<String, (Option<i64>, Option<i64>)>,
    pub op_histogram: BTreeMap<String, usize>,
    pub num_nodes: usize,
    pub custom_objects: Vec<String>,
    pub sample_inputs: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ArchiveInfo {
    pub source: String,
    pub layout: String,
    pub programs: Vec<ProgramInfo>,
    /// Extra files and their sizes in bytes.
    pub extra_files: BTreeMap<String, usize>,
}

fn tensor_info(p: &Program, name: &str) -> TensorInfo {
    match p.input_value(name).map(|v| &v.kind) {
        Some(ValueKind::Tensor { dtype, sizes, .. }) => TensorInfo {
            name: name.into(),
            dtype: dtype.name().into(),
            shape: sizes.iter().map(Dim::to_string).collect(),
        },
        Some(ValueKind::SymInt(_)) => TensorInfo {
            name: name.into(),
            dtype: "symint".into(),
            shape: vec![],
        },
        Some(ValueKind::SymFloat(_)) => TensorInfo {
            name: name.into(),
            dtype: "symfloat".into(),
            shape: vec![],
        },
        Some(ValueKind::SymBool(_)) => TensorInfo {
            name: name.into(),
            dtype: "symbool".into(),
            shape: vec![],
        },
        _ => TensorInfo {
            name: name.into(),
            dtype: "?".into(),
            shape: vec![],
        },
    }
}

/// Summarize one program.
pub fn program_info(p: &Program) -> ProgramInfo {
    let inputs = p
        .user_inputs()
        .iter()
        .map(|i| tensor_info(p, &i.name))
        .collect();
    let outputs = p
        .user_outputs()
        .iter()
        .map(|o| match &o.arg {
            crate::program::Arg::Tensor(id) => tensor_info(p, &p.graph.value(*id).name),
            crate::program::Arg::SymInt(crate::program::IntArg::Sym(id)) => {
                tensor_info(p, &p.graph.value(*id).name)
            }
            other => TensorInfo {
                name: format!("{other:?}"),
                dtype: "constant".into(),
                shape: vec![],
            },
        })
        .collect();
    let mut sums: [StateSummary; 3] = Default::default();
    for e in p.state.values() {
        let s = &mut sums[match e.kind {
            StateKind::Parameter => 0,
            StateKind::Buffer { .. } => 1,
            StateKind::Constant => 2,
        }];
        s.count += 1;
        s.numel += e.tensor.numel() as u64;
        s.bytes += e.tensor.nbytes() as u64;
        *s.bytes_by_dtype
            .entry(e.tensor.dtype.name().into())
            .or_default() += e.tensor.nbytes() as u64;
    }
    let [parameters, buffers, constants] = sums;
    let mut groups: Vec<Vec<String>> = Vec::new();
    let entries: Vec<_> = p.state.iter().collect();
    let mut seen = vec![false; entries.len()];
    for i in 0..entries.len() {
        if seen[i] {
            continue;
        }
        let mut g = vec![entries[i].0.clone()];
        for j in i + 1..entries.len() {
            if !seen[j]
                && entries[i]
                    .1
                    .tensor
                    .storage
                    .same(&entries[j].1.tensor.storage)
            {
                seen[j] = true;
                g.push(entries[j].0.clone());
            }
        }
        if g.len() > 1 {
            groups.push(g);
        }
    }
    let range = |s: &str| {
        p.range_constraints
            .get(s)
            .map(|r| (Some(r.min).filter(|m| *m != i64::MIN), r.max))
    };
    let dynamic_symbols = p
        .dynamic_symbols()
        .into_iter()
        .map(|s| {
            let (min, max) = range(&s).unwrap_or((None, None));
            SymbolInfo { name: s, min, max }
        })
        .collect();
    ProgramInfo {
        name: p.name.clone(),
        ir: p.ir.name().into(),
        torch_version: p.torch_version.clone(),
        schema_version: format!("{}.{}", p.schema_version.0, p.schema_version.1),
        opset_version: p.opset_version.clone(),
        inputs,
        outputs,
        in_spec: p.in_spec.as_ref().map(|s| s.to_string()),
        out_spec: p.out_spec.as_ref().map(|s| s.to_string()),
        input_paths: p
            .in_spec
            .as_ref()
            .map(|s| s.leaf_paths())
            .unwrap_or_default(),
        output_paths: p
            .out_spec
            .as_ref()
            .map(|s| s.leaf_paths())
            .unwrap_or_default(),
        parameters,
        buffers,
        constants,
        shared_storage: groups,
        buffer_mutations: p
            .outputs
            .iter()
            .filter_map(|o| {
                if let OutputKind::BufferMutation { buffer } = &o.kind {
                    Some(buffer.clone())
                } else {
                    None
                }
            })
            .collect(),
        user_input_mutations: p
            .outputs
            .iter()
            .filter_map(|o| {
                if let OutputKind::UserInputMutation { input } = &o.kind {
                    Some(input.clone())
                } else {
                    None
                }
            })
            .collect(),
        dynamic_symbols,
        range_constraints: p
            .range_constraints
            .iter()
            .map(|(k, r)| (k.clone(), (Some(r.min).filter(|m| *m != i64::MIN), r.max)))
            .collect(),
        op_histogram: p.graph.op_histogram(),
        num_nodes: p.graph.node_count(),
        custom_objects: p.custom_objects.clone(),
        sample_inputs: match &p.sample_inputs {
            None => "absent".into(),
            Some(Ok(_)) => "present".into(),
            Some(Err(e)) => format!("present but not loadable: {e}"),
        },
    }
}

/// Summarize every program of an archive.
pub fn archive_info(a: &Pt2Archive, opts: &LoadOptions) -> Result<ArchiveInfo> {
    archive_info_filtered(a, opts, None)
}

/// Summarize the programs of an archive (only `only` when given).
pub fn archive_info_filtered(
    a: &Pt2Archive,
    opts: &LoadOptions,
    only: Option<&str>,
) -> Result<ArchiveInfo> {
    let names: Vec<String> = match only {
        Some(n) => vec![n.to_string()],
        None => a.program_names().to_vec(),
    };
    let programs = names
        .iter()
        .map(|n| a.program(Some(n), opts).map(|p| program_info(&p)))
        .collect::<Result<_>>()?;
    Ok(ArchiveInfo {
        source: a.reader().source().to_string(),
        layout: match a.layout() {
            Layout::Pt2 { archive_version } => format!("pt2 (archive_version {archive_version})"),
            Layout::Legacy { version } => format!("legacy torch 2.5 (schema {version})"),
        },
        programs,
        extra_files: a
            .extra_files()?
            .into_iter()
            .map(|(k, v)| (k, v.len()))
            .collect(),
    })
}

/// Human-readable rendering of [`ArchiveInfo`].
pub fn render(info: &ArchiveInfo) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} program(s), layout {}",
        info.source,
        info.programs.len(),
        info.layout
    );
    let mb = |b: u64| match b {
        0..1_000 => format!("{b} B"),
        1_000..1_000_000 => format!("{:.1} KB", b as f64 / 1e3),
        _ => format!("{:.1} MB", b as f64 / 1e6),
    };
    for p in &info.programs {
        let _ = writeln!(
            s,
            "\nprogram '{}'  [{} IR, schema {}, torch {}]",
            p.name,
            p.ir,
            p.schema_version,
            p.torch_version.as_deref().unwrap_or("?")
        );
        let _ = writeln!(s, "  inputs  {}", p.in_spec.as_deref().unwrap_or("?"));
        for t in &p.inputs {
            let _ = writeln!(
                s,
                "    {:<24} {:<9} [{}]",
                t.name,
                t.dtype,
                t.shape.join(", ")
            );
        }
        let _ = writeln!(s, "  outputs {}", p.out_spec.as_deref().unwrap_or("?"));
        for (i, t) in p.outputs.iter().enumerate() {
            let path = p.output_paths.get(i).map(String::as_str).unwrap_or("");
            let _ = writeln!(
                s,
                "    output_{i:<17} {:<9} [{}] {path}",
                t.dtype,
                t.shape.join(", ")
            );
        }
        for (label, st) in [
            ("parameters", &p.parameters),
            ("buffers", &p.buffers),
            ("constants", &p.constants),
        ] {
            let by: Vec<String> = st
                .bytes_by_dtype
                .iter()
                .map(|(d, b)| format!("{d} {}", mb(*b)))
                .collect();
            let _ = writeln!(
                s,
                "  {label:<11} {:>5} tensors, {:>12} elements, {} ({})",
                st.count,
                st.numel,
                mb(st.bytes),
                by.join(", ")
            );
        }
        if !p.shared_storage.is_empty() {
            let _ = writeln!(
                s,
                "  shared storage: {}",
                p.shared_storage
                    .iter()
                    .map(|g| g.join(" = "))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        if !p.buffer_mutations.is_empty() {
            let _ = writeln!(s, "  mutates buffers: {}", p.buffer_mutations.join(", "));
        }
        if !p.user_input_mutations.is_empty() {
            let _ = writeln!(s, "  mutates inputs: {}", p.user_input_mutations.join(", "));
        }
        if !p.dynamic_symbols.is_empty() {
            let _ = writeln!(s, "  dynamic dims:");
            for d in &p.dynamic_symbols {
                let fmt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or("inf".into());
                let _ = writeln!(s, "    {} in [{}, {}]", d.name, fmt(d.min), fmt(d.max));
            }
        }
        let _ = writeln!(s, "  ops ({} nodes):", p.num_nodes);
        let mut ops: Vec<_> = p.op_histogram.iter().collect();
        ops.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (op, n) in ops {
            let _ = writeln!(s, "    {n:>5}  {op}");
        }
        if !p.custom_objects.is_empty() {
            let _ = writeln!(
                s,
                "  custom objects (not loaded): {}",
                p.custom_objects.join(", ")
            );
        }
        let _ = writeln!(s, "  sample inputs: {}", p.sample_inputs);
    }
    if !info.extra_files.is_empty() {
        let _ = writeln!(s, "\nextra files:");
        for (k, v) in &info.extra_files {
            let _ = writeln!(s, "  {k} ({v} bytes)");
        }
    }
    s
}
