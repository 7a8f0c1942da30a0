//! Loads every committed fixture and checks what pt2web reads against the numbers torch
//! wrote into `NAME.meta.json` (tests/fixgen/gen_fixtures.py) and the state tensors torch
//! wrote into `NAME.state.safetensors`. Nothing here is produced by pt2web itself.

use pt2web::archive::pt2::LoadOptions;
use pt2web::info::{program_info, ProgramInfo};
use pt2web::program::{Program, Pt2Archive, StateKind};
use pt2web::Limits;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn metas() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(fixtures()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".meta.json") {
            out.push((stem.to_string(), serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 10, "expected the fixture set, found {} metas", out.len());
    out
}

fn open(meta: &Value) -> Pt2Archive {
    let file = meta["archive"].as_str().unwrap();
    let bytes = std::fs::read(fixtures().join(file)).unwrap();
    Pt2Archive::open(file, bytes, Limits::default()).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn dtype_shape(v: &Value) -> (String, Vec<usize>) {
    (
        v["dtype"].as_str().unwrap().to_string(),
        v["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect(),
    )
}

fn check_state(file: &str, p: &Program, pm: &Value) {
    for (key, kind) in [("parameters", "parameter"), ("buffers", "buffer"), ("constants", "constant")] {
        let want = pm[key].as_object().unwrap();
        let got: BTreeMap<&str, _> = p
            .state
            .iter()
            .filter(|(_, e)| match e.kind {
                StateKind::Parameter => kind == "parameter",
                StateKind::Buffer { .. } => kind == "buffer",
                StateKind::Constant => kind == "constant",
            })
            .map(|(k, e)| (k.as_str(), e))
            .collect();
        assert_eq!(got.keys().copied().collect::<BTreeSet<_>>(), want.keys().map(String::as_str).collect(), "{file}: {key}");
        for (fqn, w) in want {
            let e = got[fqn.as_str()];
            let (dt, shape) = dtype_shape(w);
            assert_eq!(e.tensor.dtype.name(), dt, "{file}: {fqn} dtype");
            assert_eq!(e.tensor.sizes, shape, "{file}: {fqn} shape");
            if let Some(st) = w.get("stride").and_then(Value::as_array) {
                let st: Vec<usize> = st.iter().map(|x| x.as_u64().unwrap() as usize).collect();
                assert_eq!(e.tensor.strides, st, "{file}: {fqn} strides");
            }
            if let Some(off) = w.get("storage_offset").and_then(Value::as_u64) {
                assert_eq!(e.tensor.storage_offset, off as usize, "{file}: {fqn} storage offset");
            }
            if let Some(per) = w.get("persistent").and_then(Value::as_bool) {
                assert_eq!(e.kind, StateKind::Buffer { persistent: per }, "{file}: {fqn} persistence");
            }
        }
    }
}

fn check_info(file: &str, info: &ProgramInfo, pm: &Value) {
    // torch 2.5's default export is the functional ATen dialect, which pt2web runs as core ATen.
    let want_ir = match pm["ir"].as_str().unwrap() {
        "aten" => "core_aten",
        other => other,
    };
    assert_eq!(info.ir, want_ir, "{file}: IR");
    assert_eq!(info.parameters.count as u64, pm["num_parameters"].as_u64().unwrap(), "{file}: parameter count");
    assert_eq!(info.parameters.numel, pm["parameter_numel"].as_u64().unwrap(), "{file}: parameter elements");
    let mut by_dtype: BTreeMap<String, u64> = BTreeMap::new();
    for s in [&info.parameters, &info.buffers, &info.constants] {
        for (d, b) in &s.bytes_by_dtype {
            *by_dtype.entry(d.clone()).or_default() += b;
        }
    }
    let want: BTreeMap<String, u64> =
        pm["state_bytes_by_dtype"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
    assert_eq!(by_dtype, want, "{file}: state bytes by dtype");

    let mut tied: Vec<Vec<String>> = info.shared_storage.iter().map(|g| {
        let mut g = g.clone();
        g.sort();
        g
    }).collect();
    tied.sort();
    let mut want_tied: Vec<Vec<String>> = serde_json::from_value(pm["tied"].clone()).unwrap();
    want_tied.iter_mut().for_each(|g| g.sort());
    want_tied.sort();
    assert_eq!(tied, want_tied, "{file}: tensors sharing storage");

    let ui = pm["user_inputs"].as_array().unwrap();
    assert_eq!(info.inputs.len(), ui.len(), "{file}: user input count");
    for (got, want) in info.inputs.iter().zip(ui) {
        assert_eq!(got.name, want["name"].as_str().unwrap(), "{file}: input name");
        if want["kind"] == "tensor" {
            assert_eq!(got.dtype, want["dtype"].as_str().unwrap(), "{file}: {} dtype", got.name);
            let shape: Vec<String> =
                want["shape"].as_array().unwrap().iter().map(|d| d.as_str().map(str::to_string).unwrap_or(d.to_string())).collect();
            assert_eq!(got.shape, shape, "{file}: {} shape", got.name);
        }
    }
    assert_eq!(info.outputs.len() as u64, pm["user_outputs"].as_u64().unwrap(), "{file}: user output count");
    let strs = |v: &Value| -> Vec<String> { serde_json::from_value(v.clone()).unwrap() };
    assert_eq!(info.buffer_mutations, strs(&pm["buffer_mutations"]), "{file}: buffer mutations");
    assert_eq!(info.user_input_mutations, strs(&pm["user_input_mutations"]), "{file}: user input mutations");

    let rc: BTreeMap<String, (Option<i64>, Option<i64>)> = pm["range_constraints"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), (v[0].as_i64(), v[1].as_i64())))
        .collect();
    assert_eq!(info.range_constraints, rc, "{file}: range constraints");
}

fn top_level_ops(p: &Program) -> BTreeMap<String, u64> {
    let mut h = BTreeMap::new();
    for n in &p.graph.nodes {
        *h.entry(n.target.clone()).or_default() += 1;
    }
    h
}

#[test]
fn every_fixture_matches_torch_metadata() {
    let mut checked = 0;
    for (stem, meta) in metas() {
        let a = open(&meta);
        let want_programs: BTreeSet<String> = meta["programs"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(a.program_names().iter().cloned().collect::<BTreeSet<_>>(), want_programs, "{stem}: program names");
        for (pname, pm) in meta["programs"].as_object().unwrap() {
            let file = format!("{stem}/{pname}");
            let p = a.program(Some(pname), &LoadOptions::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
            check_state(&file, &p, pm);
            check_info(&file, &program_info(&p), pm);
            // torch's FX graph has getitem nodes that the serialized graph folds into outputs.
            let mut want_ops: BTreeMap<String, u64> = serde_json::from_value(pm["op_counts"].clone()).unwrap();
            want_ops.remove("_operator.getitem");
            assert_eq!(top_level_ops(&p), want_ops, "{file}: op histogram");
            checked += 1;
        }
        // extra files: names, sizes and (where torch recorded it) content
        let extra = a.extra_files().unwrap();
        let want = meta["extra_files"].as_object().unwrap();
        assert_eq!(extra.keys().cloned().collect::<BTreeSet<_>>(), want.keys().cloned().collect(), "{stem}: extra files");
        for (k, w) in want {
            assert_eq!(extra[k].len() as u64, w["nbytes"].as_u64().unwrap(), "{stem}: extra file {k} size");
            if let Some(c) = w.get("content").and_then(Value::as_str) {
                assert_eq!(String::from_utf8_lossy(&extra[k]), c, "{stem}: extra file {k}");
            }
        }
    }
    assert!(checked >= 10);
}

/// Every state tensor, element for element, against the values torch saved separately.
#[test]
fn state_values_are_bit_exact() {
    let mut compared = 0;
    for (stem, meta) in metas() {
        let a = open(&meta);
        for (pname, pm) in meta["programs"].as_object().unwrap() {
            let Some(state_file) = pm.get("state").and_then(Value::as_str) else { continue };
            let bytes = std::fs::read(fixtures().join(state_file)).unwrap();
            let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
            let p = a.program(Some(pname), &LoadOptions::default()).unwrap();
            for (fqn, e) in &p.state {
                let want = st.tensor(fqn).unwrap_or_else(|_| panic!("{stem}: {fqn} missing from {state_file}"));
                assert_eq!(e.tensor.contiguous_bytes(), want.data(), "{stem}/{pname}: values of {fqn}");
                compared += 1;
            }
        }
    }
    assert!(compared > 20, "compared only {compared} tensors");
}
