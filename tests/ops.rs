//! The op suite: every case exported by tests/fixgen/gen_op_cases.py (expected values from
//! eager PyTorch) runs on the CPU backend and is compared under a named tolerance.

use pt2web::archive::pt2::LoadOptions;
use pt2web::cpu::Tensor;
use pt2web::program::Pt2Archive;
use pt2web::runtime::{RValue, Session};
use pt2web::{DType, Limits};
use serde_json::Value;
use std::path::Path;

/// (atol, rtol) per named tolerance; `exact` compares bits (NaN equal to NaN).
fn tolerance(name: &str) -> Option<(f64, f64)> {
    match name {
        "exact" => None,
        "close" => Some((1e-5, 1e-5)),
        "loose" => Some((1e-4, 1e-4)),
        "half" => Some((1e-2, 1e-2)),
        other => panic!("unknown tolerance '{other}'"),
    }
}

fn to_tensor(view: &safetensors::tensor::TensorView) -> Tensor {
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
        other => panic!("unsupported safetensors dtype {other:?}"),
    };
    let data = pt2web::cpu::Data::from_le_bytes(dtype, view.data()).unwrap();
    Tensor::from_data(data, view.shape())
}

/// Compare and describe the first outlier.
pub fn compare(got: &Tensor, want: &Tensor, tol: &str) -> Result<(), String> {
    if got.sizes != want.sizes {
        return Err(format!("shape {:?}, expected {:?}", got.sizes, want.sizes));
    }
    if got.dtype != want.dtype {
        return Err(format!("dtype {}, expected {}", got.dtype, want.dtype));
    }
    let g = got.to_vec::<f64>();
    let w = want.to_vec::<f64>();
    let (atol, rtol) = tolerance(tol).unwrap_or((0.0, 0.0));
    let (atol, rtol) = if matches!(want.dtype, DType::F16 | DType::BF16) && tol != "exact" {
        (atol.max(1e-2), rtol.max(1e-2))
    } else {
        (atol, rtol)
    };
    let mut max_diff = 0.0f64;
    let mut first: Option<(usize, f64, f64)> = None;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            max_diff = max_diff.max((a - b).abs());
            first.get_or_insert((i, a, b));
        }
    }
    match first {
        None => Ok(()),
        Some((i, a, b)) => Err(format!("first outlier at flat index {i}: got {a}, expected {b}; max |diff| {max_diff:e} (tolerance {tol})")),
    }
}

fn run_family(fam: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops");
    let cases: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{fam}.cases.json"))).unwrap())
            .unwrap();
    let io_bytes = std::fs::read(dir.join(format!("{fam}.io.safetensors"))).unwrap();
    let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
    let archive = Pt2Archive::open(
        &format!("{fam}.pt2"),
        std::fs::read(dir.join(format!("{fam}.pt2"))).unwrap(),
        Limits::default(),
    )
    .unwrap();
    let mut failures = Vec::new();
    let mut passed = 0;
    for c in cases["cases"].as_array().unwrap() {
        let pname = c["program"].as_str().unwrap();
        let tol = c["tol"].as_str().unwrap();
        let result = (|| -> Result<(), String> {
            let program = archive
                .program(Some(pname), &LoadOptions::default())
                .map_err(|e| e.to_string())?;
            let mut session = Session::new(program).map_err(|e| e.to_string())?;
            let n_in = c["inputs"].as_array().unwrap().len();
            let inputs: Vec<RValue> = (0..n_in)
                .map(|i| {
                    RValue::Tensor(to_tensor(
                        &io.tensor(&format!("{pname}/input_{i}")).unwrap(),
                    ))
                })
                .collect();
            let outs = session.run(inputs).map_err(|e| e.to_string())?;
            let mut k = 0;
            for (i, o) in c["outputs"].as_array().unwrap().iter().enumerate() {
                if !o.is_array() {
                    continue;
                }
                let want = to_tensor(&io.tensor(&format!("{pname}/output_{i}")).unwrap());
                let got = match outs.get(k) {
                    Some(RValue::Tensor(t)) => t.clone(),
                    other => return Err(format!("output {i}: got {:?}", other.map(|v| v.kind()))),
                };
                compare(&got, &want, tol).map_err(|e| format!("output {i}: {e}"))?;
                k += 1;
            }
            Ok(())
        })();
        match result {
            Ok(()) => passed += 1,
            Err(e) => failures.push(format!("  {pname}: {e}")),
        }
    }
    eprintln!("{fam}: {passed} passed, {} failed", failures.len());
    assert!(
        failures.is_empty(),
        "{fam}: {} of {} cases failed:\n{}",
        failures.len(),
        passed + failures.len(),
        failures.join("\n")
    );
}

/// Every family in tests/fixtures/ops (set PT2WEB_OP_FAMILY=name to run one).
#[test]
fn op_suite_cpu() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops");
    let only = std::env::var("PT2WEB_OP_FAMILY").ok();
    let mut fams: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| {
                e.ok()?
                    .file_name()
                    .to_str()?
                    .strip_suffix(".cases.json")
                    .map(str::to_string)
            })
            .collect()
        })
        .unwrap_or_default();
    fams.sort();
    fams.retain(|f| only.as_deref().is_none_or(|o| o == f));
    let mut failed = Vec::new();
    for f in &fams {
        if let Err(e) = std::panic::catch_unwind(|| run_family(f)) {
            failed.push(format!(
                "{f}: {}",
                e.downcast_ref::<String>().cloned().unwrap_or_default()
            ));
        }
    }
    assert!(
        !fams.is_empty() || only.is_some(),
        "no op families found in {}",
        dir.display()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
