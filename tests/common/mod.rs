//! Shared by the integration tests: fixture discovery, checks of pt2web's view of a program
//! against the metadata torch wrote (tests/fixgen), and running io cases.
#![allow(dead_code)]

use pt2web::archive::pt2::LoadOptions;
use pt2web::cpu::Tensor;
use pt2web::info::ProgramInfo;
use pt2web::program::{Program, Pt2Archive, StateKind};
use pt2web::runtime::{RValue, Session};
use pt2web::{DType, Limits};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn metas_in(dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".meta.json") {
            out.push((
                stem.to_string(),
                serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap(),
            ));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub fn open_in(dir: &Path, meta: &Value) -> Pt2Archive {
    let file = meta["archive"].as_str().unwrap();
    let bytes = std::fs::read(dir.join(file)).unwrap();
    Pt2Archive::open(file, bytes, Limits::default()).unwrap_or_else(|e| panic!("{file}: {e}"))
}

pub fn dtype_shape(v: &Value) -> (String, Vec<usize>) {
    (
        v["dtype"].as_str().unwrap().to_string(),
        v["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as usize)
            .collect(),
    )
}

pub fn check_state(file: &str, p: &Program, pm: &Value) {
    for (key, kind) in [
        ("parameters", "parameter"),
        ("buffers", "buffer"),
        ("constants", "constant"),
    ] {
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
        assert_eq!(
            got.keys().copied().collect::<BTreeSet<_>>(),
            want.keys().map(String::as_str).collect(),
            "{file}: {key}"
        );
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
                assert_eq!(
                    e.tensor.storage_offset, off as usize,
                    "{file}: {fqn} storage offset"
                );
            }
            if let Some(per) = w.get("persistent").and_then(Value::as_bool) {
                assert_eq!(
                    e.kind,
                    StateKind::Buffer { persistent: per },
                    "{file}: {fqn} persistence"
                );
            }
        }
    }
}

pub fn check_info(file: &str, info: &ProgramInfo, pm: &Value) {
    // torch 2.5's default export is the functional ATen dialect, which pt2web runs as core ATen.
    let want_ir = match pm["ir"].as_str().unwrap() {
        "aten" => "core_aten",
        other => other,
    };
    assert_eq!(info.ir, want_ir, "{file}: IR");
    assert_eq!(
        info.parameters.count as u64,
        pm["num_parameters"].as_u64().unwrap(),
        "{file}: parameter count"
    );
    assert_eq!(
        info.parameters.numel,
        pm["parameter_numel"].as_u64().unwrap(),
        "{file}: parameter elements"
    );
    let mut by_dtype: BTreeMap<String, u64> = BTreeMap::new();
    for s in [&info.parameters, &info.buffers, &info.constants] {
        for (d, b) in &s.bytes_by_dtype {
            *by_dtype.entry(d.clone()).or_default() += b;
        }
    }
    let want: BTreeMap<String, u64> = pm["state_bytes_by_dtype"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(by_dtype, want, "{file}: state bytes by dtype");

    let mut tied: Vec<Vec<String>> = info
        .shared_storage
        .iter()
        .map(|g| {
            let mut g = g.clone();
            g.sort();
            g
        })
        .collect();
    tied.sort();
    let mut want_tied: Vec<Vec<String>> = serde_json::from_value(pm["tied"].clone()).unwrap();
    want_tied.iter_mut().for_each(|g| g.sort());
    want_tied.sort();
    assert_eq!(tied, want_tied, "{file}: tensors sharing storage");

    let ui = pm["user_inputs"].as_array().unwrap();
    assert_eq!(info.inputs.len(), ui.len(), "{file}: user input count");
    for (got, want) in info.inputs.iter().zip(ui) {
        assert_eq!(
            got.name,
            want["name"].as_str().unwrap(),
            "{file}: input name"
        );
        if want["kind"] == "tensor" {
            assert_eq!(
                got.dtype,
                want["dtype"].as_str().unwrap(),
                "{file}: {} dtype",
                got.name
            );
            let shape: Vec<String> = want["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_str().map(str::to_string).unwrap_or(d.to_string()))
                .collect();
            assert_eq!(got.shape, shape, "{file}: {} shape", got.name);
        }
    }
    assert_eq!(
        info.outputs.len() as u64,
        pm["user_outputs"].as_u64().unwrap(),
        "{file}: user output count"
    );
    let strs = |v: &Value| -> Vec<String> { serde_json::from_value(v.clone()).unwrap() };
    assert_eq!(
        info.buffer_mutations,
        strs(&pm["buffer_mutations"]),
        "{file}: buffer mutations"
    );
    assert_eq!(
        info.user_input_mutations,
        strs(&pm["user_input_mutations"]),
        "{file}: user input mutations"
    );

    let rc: BTreeMap<String, (Option<i64>, Option<i64>)> = pm["range_constraints"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), (v[0].as_i64(), v[1].as_i64())))
        .collect();
    assert_eq!(info.range_constraints, rc, "{file}: range constraints");
}

pub fn top_level_ops(p: &Program) -> BTreeMap<String, u64> {
    let mut h = BTreeMap::new();
    for n in &p.graph.nodes {
        *h.entry(n.target.clone()).or_default() += 1;
    }
    h
}

pub fn metas() -> Vec<(String, Value)> {
    let m = metas_in(&fixtures());
    assert!(
        m.len() >= 10,
        "expected the fixture set, found {} metas",
        m.len()
    );
    m
}

pub fn open(meta: &Value) -> Pt2Archive {
    open_in(&fixtures(), meta)
}

pub fn to_tensor(view: &safetensors::tensor::TensorView) -> Tensor {
    let dtype = match view.dtype() {
        safetensors::Dtype::F32 => DType::F32,
        safetensors::Dtype::F64 => DType::F64,
        safetensors::Dtype::F16 => DType::F16,
        safetensors::Dtype::BF16 => DType::BF16,
        safetensors::Dtype::I64 => DType::I64,
        safetensors::Dtype::I32 => DType::I32,
        safetensors::Dtype::I16 => DType::I16,
        safetensors::Dtype::I8 => DType::I8,
        safetensors::Dtype::U8 => DType::U8,
        safetensors::Dtype::BOOL => DType::Bool,
        safetensors::Dtype::C64 => DType::Complex64,
        other => panic!("unsupported safetensors dtype {other:?}"),
    };
    Tensor::from_data(
        pt2web::cpu::Data::from_le_bytes(dtype, view.data()).unwrap(),
        view.shape(),
    )
}

/// Max |a-b| and cosine similarity of two tensors (as f64).
pub fn metrics(got: &Tensor, want: &Tensor) -> (f64, f64) {
    let g = got.to_vec::<f64>();
    let w = want.to_vec::<f64>();
    let (mut max, mut dot, mut ng, mut nw) = (0.0f64, 0.0, 0.0, 0.0);
    for (&a, &b) in g.iter().zip(&w) {
        if a.is_nan() && b.is_nan() {
            continue;
        }
        max = max.max((a - b).abs());
        if a.is_finite() && b.is_finite() {
            dot += a * b;
            ng += a * a;
            nw += b * b;
        }
    }
    let cos = if ng == 0.0 && nw == 0.0 {
        1.0
    } else {
        dot / (ng.sqrt() * nw.sqrt()).max(f64::MIN_POSITIVE)
    };
    (max, cos)
}

/// Result of one io case: per output (name, max abs error, cosine).
pub struct CaseReport {
    pub label: String,
    pub outputs: Vec<(String, f64, f64)>,
}

/// Run every io case of a program from a fresh session (buffers start from the archive
/// state each time) and compare outputs, mutated buffers and mutated inputs with torch's.
/// `check(name, got, want)` decides pass/fail for each compared tensor.
pub fn run_io_cases(
    dir: &Path,
    archive: &Pt2Archive,
    pname: &str,
    pm: &Value,
    check: &dyn Fn(&str, &Tensor, &Tensor) -> Result<(), String>,
) -> Result<Vec<CaseReport>, String> {
    let mut reports = Vec::new();
    let Some(cases) = pm.get("io_cases").and_then(Value::as_array) else {
        return Ok(reports);
    };
    for case in cases {
        let label = case["label"].as_str().unwrap_or("?").to_string();
        let bytes =
            std::fs::read(dir.join(case["file"].as_str().unwrap())).map_err(|e| e.to_string())?;
        let io = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| e.to_string())?;
        let program = archive
            .program(Some(pname), &LoadOptions::default())
            .map_err(|e| e.to_string())?;
        let mut session = Session::new(program).map_err(|e| format!("{label}: {e}"))?;
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| to_tensor(&io.tensor(i["key"].as_str().unwrap()).unwrap()))
            .collect();
        let outs = session
            .run(inputs.iter().cloned().map(RValue::Tensor).collect())
            .map_err(|e| format!("{label}: {e}"))?;
        let mut rep = CaseReport {
            label: label.clone(),
            outputs: Vec::new(),
        };
        let want_outs = case["outputs"].as_array().unwrap();
        if outs.len() != want_outs.len() {
            return Err(format!(
                "{label}: {} outputs, torch gave {}",
                outs.len(),
                want_outs.len()
            ));
        }
        for (o, w) in outs.iter().zip(want_outs) {
            let key = w["key"].as_str().unwrap();
            let want = to_tensor(&io.tensor(key).unwrap());
            let got = o
                .as_tensor()
                .ok_or_else(|| format!("{label}: {key} is a {}", o.kind()))?;
            check(key, got, &want).map_err(|e| format!("{label}: {key}: {e}"))?;
            let (m, c) = metrics(got, &want);
            rep.outputs.push((key.to_string(), m, c));
        }
        for key in case
            .get("buffers_after")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = key.as_str().unwrap();
            let fqn = key.strip_prefix("buffer_after.").unwrap_or(key);
            let want = to_tensor(&io.tensor(key).unwrap());
            let got = session
                .state
                .get(fqn)
                .ok_or_else(|| format!("{label}: no buffer {fqn}"))?;
            check(key, got, &want)
                .map_err(|e| format!("{label}: buffer {fqn} after the call: {e}"))?;
        }
        for (i, key) in case
            .get("inputs_after")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let key = key.as_str().unwrap();
            let want = to_tensor(&io.tensor(key).unwrap());
            let idx: usize = key
                .rsplit('_')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(i);
            check(key, &inputs[idx], &want)
                .map_err(|e| format!("{label}: input {idx} after the call: {e}"))?;
        }
        reports.push(rep);
    }
    Ok(reports)
}

/// The buffers the first io case of fixture `stem` changed, as PyTorch left them:
/// (fully qualified name, value).
pub fn first_io_buffers_after(stem: &str) -> Vec<(String, Tensor)> {
    let (_, meta) = metas()
        .into_iter()
        .find(|(s, _)| s == stem)
        .expect("fixture");
    let case = &meta["programs"]["model"]["io_cases"][0];
    let bytes = std::fs::read(fixtures().join(case["file"].as_str().unwrap())).unwrap();
    let io = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    case["buffers_after"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| {
            let key = k.as_str().unwrap();
            let fqn = key.strip_prefix("buffer_after.").unwrap_or(key);
            (fqn.to_string(), to_tensor(&io.tensor(key).unwrap()))
        })
        .collect()
}

/// A fixture's `model` program with the inputs and expected outputs (from PyTorch) of its
/// first io case.
pub fn first_io_case(stem: &str) -> (Program, Vec<Tensor>, Vec<Tensor>) {
    io_case(stem, None)
}

/// [`first_io_case`], or with `label` the call of that label (`NAME.io.<label>.safetensors`).
pub fn io_case(stem: &str, label: Option<&str>) -> (Program, Vec<Tensor>, Vec<Tensor>) {
    let (_, meta) = metas()
        .into_iter()
        .find(|(s, _)| s == stem)
        .expect("fixture");
    let archive = open(&meta);
    let pm = &meta["programs"]["model"];
    let program = archive
        .program(Some("model"), &LoadOptions::default())
        .unwrap();
    let cases = pm["io_cases"].as_array().expect("io_cases");
    let case = match label {
        None => &cases[0],
        Some(l) => cases
            .iter()
            .find(|c| c["label"] == l)
            .unwrap_or_else(|| panic!("{stem}: no call labelled {l}")),
    };
    let bytes = std::fs::read(fixtures().join(case["file"].as_str().unwrap())).unwrap();
    let io = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let read = |k: &str| to_tensor(&io.tensor(k).unwrap());
    let keys = |what: &str| -> Vec<Tensor> {
        case[what]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| read(i["key"].as_str().unwrap()))
            .collect()
    };
    (program, keys("inputs"), keys("outputs"))
}

/// The GPU device of the GPU tests (`PT2WEB_GPU_BACKEND` picks the backend): None, with a
/// message, when there is no adapter, unless PT2WEB_REQUIRE_GPU=1 (CI), which fails instead.
pub fn gpu_device() -> Option<std::sync::Arc<pt2web::gpu::GpuDevice>> {
    use pt2web::gpu::{BackendChoice, GpuDevice};
    let backend = std::env::var("PT2WEB_GPU_BACKEND")
        .ok()
        .map(|b| BackendChoice::parse(&b).unwrap())
        .unwrap_or_default();
    match GpuDevice::open(backend, None) {
        Ok(d) => Some(std::sync::Arc::new(d)),
        Err(e) if std::env::var("PT2WEB_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("PT2WEB_REQUIRE_GPU=1 but no GPU device: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: no GPU adapter ({e}); set PT2WEB_REQUIRE_GPU=1 to fail instead");
            None
        }
    }
}

/// The directory of the real-model cache (scripts/build_models.sh), or None with a message
/// when it lacks `file`, unless PT2WEB_REQUIRE_MODELS=1 (CI), which fails instead.
pub fn model_cache_with(file: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models");
    if dir.join(file).exists() {
        return Some(dir);
    }
    if std::env::var("PT2WEB_REQUIRE_MODELS").is_ok_and(|v| v == "1") {
        panic!(
            "PT2WEB_REQUIRE_MODELS=1 but {} does not exist: run scripts/build_models.sh",
            dir.join(file).display()
        );
    }
    eprintln!(
        "SKIPPED: no {} (run scripts/build_models.sh)",
        dir.join(file).display()
    );
    None
}

/// (atol, rtol) per named tolerance of the op cases (tests/fixgen/ops/case.py): `exact`
/// compares values exactly (NaN equal to NaN); `opinfo` is OpInfo's samples' (gen_opinfo.py).
pub fn tolerance(name: &str) -> (f64, f64) {
    match name {
        "exact" => (0.0, 0.0),
        "close" => (1e-5, 1e-5),
        "loose" | "opinfo" => (1e-4, 1e-4),
        "half" => (1e-2, 1e-2),
        other => panic!("unknown tolerance '{other}'"),
    }
}

/// Compare `got` with PyTorch's `want` under tolerance `tol` (f16 / bf16 results at least
/// 1e-2); describe the first outlier.
/// The largest |got - want| over the elements (complex results as their real view, as
/// [`compare`] reads them); None where the shapes differ.
pub fn max_abs_diff(got: &Tensor, want: &Tensor) -> Option<f64> {
    let got = match got.dtype.is_complex() && !want.dtype.is_complex() {
        true => got.view_as_real().ok()?,
        false => got.clone(),
    };
    (got.sizes == want.sizes).then(|| {
        let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
        g.iter()
            .zip(&w)
            .filter(|(a, b)| !(a.is_nan() && b.is_nan()))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    })
}

pub fn compare(got: &Tensor, want: &Tensor, tol: &str) -> Result<(), String> {
    // Complex results: PyTorch's are stored as their real view `[..., 2]` (the fixture
    // generators write `torch.view_as_real`), so compare ours the same way.
    if got.dtype.is_complex() && !want.dtype.is_complex() {
        let real = got
            .view_as_real()
            .map_err(|e| format!("complex result: {e}"))?;
        return compare(&real, want, tol);
    }
    if got.sizes != want.sizes {
        return Err(format!("shape {:?}, expected {:?}", got.sizes, want.sizes));
    }
    if got.dtype != want.dtype {
        return Err(format!("dtype {}, expected {}", got.dtype, want.dtype));
    }
    let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
    let (mut atol, mut rtol) = tolerance(tol);
    if matches!(want.dtype, DType::F16 | DType::BF16) && tol != "exact" {
        (atol, rtol) = (atol.max(1e-2), rtol.max(1e-2));
    }
    let mut max_diff = 0.0f64;
    let mut first = None;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            max_diff = max_diff.max((a - b).abs());
            first.get_or_insert((i, a, b));
        }
    }
    match first {
        None => Ok(()),
        Some((i, a, b)) => Err(format!(
            "first outlier at flat index {i}: got {a}, expected {b}; max |diff| {max_diff:e} (tolerance {tol})"
        )),
    }
}

/// For an op case whose eager torch call raised (`error` in its cases.json entry, written by
/// tests/fixgen/gen_op_cases.py): whether the run failed as torch did, naming the invalid
/// index torch names (or, where torch's message names none, saying the index is out of range
/// or bounds). None for a case torch ran.
pub fn raised<T>(case: &Value, run: &Result<T, String>) -> Option<Result<(), String>> {
    let error = case.get("error")?;
    let torch = error["message"].as_str().unwrap_or_default();
    Some(match run {
        Ok(_) => Err(format!("ran, where torch raised: {torch}")),
        Err(e) => {
            let named = match error["index"].as_i64() {
                Some(i) => format!("index {i} is out of"),
                None => "is out of".to_string(),
            };
            match e.contains(&named) {
                true => Ok(()),
                false => Err(format!(
                    "error {e:?} does not say {named:?} (torch: {torch})"
                )),
            }
        }
    })
}

/// An op case's inputs (`<program>/input_<i>` in its io.safetensors), in order.
pub fn case_inputs(io: &safetensors::SafeTensors, case: &Value) -> Vec<RValue> {
    let pname = case["program"].as_str().unwrap();
    let n_in = case["inputs"].as_array().unwrap().len();
    (0..n_in)
        .map(|i| {
            RValue::Tensor(to_tensor(
                &io.tensor(&format!("{pname}/input_{i}")).unwrap(),
            ))
        })
        .collect()
}

/// Compare a run's outputs with an op case's expected ones (torch's, in its io.safetensors)
/// within the case's tolerance; the largest absolute difference met.
pub fn compare_case_outputs(
    io: &safetensors::SafeTensors,
    case: &Value,
    outs: &[RValue],
) -> Result<f64, String> {
    let pname = case["program"].as_str().unwrap();
    let tol = case["tol"].as_str().unwrap();
    let mut diff = 0.0f64;
    let mut k = 0;
    for (i, o) in case["outputs"].as_array().unwrap().iter().enumerate() {
        if !o.is_array() {
            // A None output (one an output_mask turns off) holds its place.
            if matches!(outs.get(k), Some(RValue::None)) {
                k += 1;
            }
            continue;
        }
        let want = to_tensor(&io.tensor(&format!("{pname}/output_{i}")).unwrap());
        let got = match outs.get(k) {
            Some(RValue::Tensor(t)) => t.clone(),
            other => return Err(format!("output {i}: got {:?}", other.map(|v| v.kind()))),
        };
        compare(&got, &want, tol).map_err(|e| format!("output {i}: {e}"))?;
        diff = diff.max(max_abs_diff(&got, &want).unwrap_or(f64::NAN));
        k += 1;
    }
    Ok(diff)
}

/// Call `run` with the verbose kernel log on, then again with it off: both results and the
/// log's lines this thread wrote meanwhile (the other tests of a binary run sessions beside
/// it; the second call checks nothing is logged once the log is off).
pub fn verbose_lines<R>(mut run: impl FnMut() -> R) -> (R, R, Vec<String>) {
    use pt2web::backends;
    use std::sync::{Arc, Mutex};
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (sink, me) = (lines.clone(), std::thread::current().id());
    backends::set_verbose_sink(Some(Box::new(move |l: &str| {
        if std::thread::current().id() == me {
            sink.lock().unwrap().push(l.to_string());
        }
    })));
    backends::set_verbose(1);
    let on = run();
    backends::set_verbose(0);
    let off = run();
    backends::set_verbose_sink(None);
    let lines = lines.lock().unwrap().clone();
    (on, off, lines)
}
