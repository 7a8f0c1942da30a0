//! The real models (built by `scripts/build_models.sh` into .cache/models: resnet18,
//! mobilenet_v3_small, vit_b_16, MiniLM with real weights, a small GPT-2; each in the training
//! IR and core ATen) on the CPU backend against eager PyTorch: every output within tolerance,
//! with max abs error and cosine similarity printed. CI sets PT2WEB_REQUIRE_MODELS=1 so a
//! missing cache fails instead of skipping. PT2WEB_RUN_MODELS=0 skips running them (info checks
//! only); PT2WEB_MODEL=resnet18 picks one.

mod common;

use common::*;
use pt2web::cpu::Tensor;
use std::path::Path;

fn check(_name: &str, got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.sizes != want.sizes || got.dtype != want.dtype {
        return Err(format!(
            "got {}{:?}, expected {}{:?}",
            got.dtype, got.sizes, want.dtype, want.sizes
        ));
    }
    let (max, cos) = metrics(got, want);
    let scale = want
        .to_vec::<f64>()
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()));
    if !want.dtype.is_float() {
        return if max == 0.0 {
            Ok(())
        } else {
            Err(format!("integer output differs by {max}"))
        };
    }
    // A constant (or all-zero) expected output cannot tell a right answer from a wrong one.
    let w = want.to_vec::<f64>();
    let spread =
        w.iter().cloned().fold(f64::MIN, f64::max) - w.iter().cloned().fold(f64::MAX, f64::min);
    if w.len() > 1 && spread < 1e-4 {
        return Err(format!(
            "the expected output is degenerate (spread {spread:e}); regenerate the model with scripts/build_models.sh --force"
        ));
    }
    if max > 2e-3 * scale || cos < 0.99999 {
        return Err(format!(
            "max abs error {max:e} (scale {scale:.3}), cosine {cos:.7}"
        ));
    }
    Ok(())
}

#[test]
fn real_models_match_pytorch() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models");
    let required = std::env::var("PT2WEB_REQUIRE_MODELS").is_ok_and(|v| v == "1");
    if !dir.exists() {
        assert!(
            !required,
            "PT2WEB_REQUIRE_MODELS=1 but {} does not exist: run scripts/build_models.sh",
            dir.display()
        );
        eprintln!(
            "skipping: no {} (run scripts/build_models.sh)",
            dir.display()
        );
        return;
    }
    let only = std::env::var("PT2WEB_MODEL").ok();
    let mut failures = Vec::new();
    let mut ran = 0;
    for (stem, meta) in metas_in(&dir) {
        if only.as_deref().is_some_and(|o| !stem.starts_with(o)) {
            continue;
        }
        let archive = open_in(&dir, &meta);
        for (pname, pm) in meta["programs"].as_object().unwrap() {
            // `pt2web info`'s view of the model against what torch recorded.
            let program = archive
                .program(Some(pname), &pt2web::archive::pt2::LoadOptions::default())
                .unwrap();
            check_state(&stem, &program, pm);
            check_info(&stem, &pt2web::info::program_info(&program), pm);
            let mut want_ops: std::collections::BTreeMap<String, u64> =
                serde_json::from_value(pm["op_counts"].clone()).unwrap();
            want_ops.remove("_operator.getitem");
            assert_eq!(top_level_ops(&program), want_ops, "{stem}: op histogram");
            drop(program);
            // PT2WEB_RUN_MODELS=0 keeps only the info checks (a quick loader-only pass).
            if std::env::var("PT2WEB_RUN_MODELS").is_ok_and(|v| v == "0") {
                ran += 1;
                continue;
            }
            let t = std::time::Instant::now();
            match run_io_cases(&dir, &archive, pname, pm, &check) {
                Ok(reports) => {
                    for r in reports {
                        for (key, max, cos) in r.outputs {
                            eprintln!("{stem:<28} {:<10} {key:<10} max_abs_err {max:.3e}  cosine {cos:.8}", r.label);
                        }
                        ran += 1;
                    }
                    eprintln!("{stem:<28} ran in {:.1}s", t.elapsed().as_secs_f64());
                }
                Err(e) => failures.push(format!("{stem}/{pname}: {e}")),
            }
        }
    }
    assert!(
        ran > 0 || only.is_some() || !required,
        "no model io cases ran"
    );
    assert!(
        failures.is_empty(),
        "{} model(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
