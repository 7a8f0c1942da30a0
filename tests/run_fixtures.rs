//! Runs every committed fixture program on the CPU backend with the inputs the generator
//! stored and compares outputs, mutated buffers and mutated inputs with eager PyTorch.

mod common;

use common::*;
use pt2web::cpu::Tensor;
use pt2web::DType;

fn close(_name: &str, got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.sizes != want.sizes || got.dtype != want.dtype {
        return Err(format!(
            "got {}{:?}, expected {}{:?}",
            got.dtype, got.sizes, want.dtype, want.sizes
        ));
    }
    let (atol, rtol) = match want.dtype {
        DType::F16 | DType::BF16 => (1e-2, 1e-2),
        d if d.is_float() => (1e-5, 1e-4),
        _ => (0.0, 0.0),
    };
    let g = got.to_vec::<f64>();
    let w = want.to_vec::<f64>();
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        if !((a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs()) {
            return Err(format!(
                "first outlier at flat index {i}: got {a}, expected {b}"
            ));
        }
    }
    Ok(())
}

/// Programs that need an op the CPU backend does not have yet (issue 3); each must still fail
/// for exactly that reason, so the list cannot go stale silently.
const KNOWN_GAPS: &[(&str, &str)] = &[];

#[test]
fn fixtures_run_like_pytorch() {
    let dir = fixtures();
    let mut failures = Vec::new();
    let mut passed = 0;
    for (stem, meta) in metas() {
        let archive = open(&meta);
        for (pname, pm) in meta["programs"].as_object().unwrap() {
            let id = format!("{stem}/{pname}");
            match (
                run_io_cases(&dir, &archive, pname, pm, &close),
                KNOWN_GAPS.iter().find(|(p, _)| *p == id),
            ) {
                (Ok(r), None) => passed += r.len(),
                (Err(e), Some((_, op))) if e.contains(op) => eprintln!("known gap: {id}: {e}"),
                (Ok(_), Some((_, op))) => {
                    failures.push(format!("{id} now runs: remove it ({op}) from KNOWN_GAPS"))
                }
                (Err(e), _) => failures.push(format!("{id}: {e}")),
            }
        }
    }
    eprintln!(
        "fixtures: {passed} io cases passed, {} programs failed",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
