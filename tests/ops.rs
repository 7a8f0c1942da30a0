//! The op suite: every case exported by tests/fixgen/gen_op_cases.py (expected values from
//! eager PyTorch) runs on the CPU backend and is compared under a named tolerance.

mod common;

use pt2web::archive::pt2::LoadOptions;
use pt2web::program::Pt2Archive;
use pt2web::runtime::{RValue, Session};
use pt2web::Limits;
use serde_json::Value;
use std::path::Path;

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
        // A panic (in a kernel the runtime did not catch, or in the comparison of a
        // malformed result) is this case's failure, named, not the end of the family.
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<(), String> {
                let program = archive
                    .program(Some(pname), &LoadOptions::default())
                    .map_err(|e| e.to_string())?;
                let mut session = Session::new(program).map_err(|e| e.to_string())?;
                let outs = session
                    .run(common::case_inputs(&io, c))
                    .map_err(|e| e.to_string());
                if let Some(raised) = common::raised(c, &outs) {
                    return raised;
                }
                let outs = outs?;
                common::compare_case_outputs(&io, c, &outs)?;
                Ok(())
            }))
            .unwrap_or_else(|p| {
                Err(format!(
                    "panicked: {}",
                    pt2web::runtime::panic_message(p.as_ref())
                ))
            });
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

/// A kernel that panics (a panic injected into `relu`'s) ends its run with `Error::Internal`
/// naming the node and its op, and the same session's next run gives PyTorch's answer.
#[test]
fn a_panicking_kernel_is_an_internal_error() {
    let (program, inputs, want) = common::first_io_case("mlp_core");
    let inputs: Vec<RValue> = inputs.into_iter().map(RValue::Tensor).collect();
    let mut session = Session::new(program).unwrap();
    pt2web::runtime::inject_kernel_panic(Some("aten.relu.default"));
    let err = session.run(inputs.clone());
    pt2web::runtime::inject_kernel_panic(None);
    match err {
        Err(e @ pt2web::Error::Internal { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("node 'relu' (aten.relu.default)") && text.contains("injected panic"),
                "{text}"
            );
            assert_eq!(e.code(), "INTERNAL");
        }
        other => panic!("expected an internal error, got {other:?}"),
    }
    let outs = session.run(inputs).unwrap();
    let Some(RValue::Tensor(got)) = outs.first() else {
        panic!("no tensor output")
    };
    common::compare(got, &want[0], "close").unwrap();
}

/// The matmul family (einsum with 3 to 5 operands among it) under every
/// `backends::opt_einsum` strategy and left to right (disabled): each path gives PyTorch's
/// answer.
#[test]
fn einsum_paths_match_pytorch() {
    use pt2web::backends::opt_einsum::{self, Strategy};
    for s in Strategy::ALL {
        opt_einsum::set_strategy(s);
        run_family("matmul");
    }
    opt_einsum::set_strategy(Strategy::Auto);
    opt_einsum::set_enabled(false);
    let r = std::panic::catch_unwind(|| run_family("matmul"));
    opt_einsum::set_enabled(true);
    assert!(r.is_ok(), "left to right failed");
}

/// The verbose kernel log (`backends::set_verbose`): one line per node the interpreter runs,
/// naming its op and node, with the input shapes and a time; nothing once it is off.
#[test]
fn verbose_log_has_one_line_per_node() {
    use pt2web::backends;
    let (program, inputs, _) = common::first_io_case("mlp_core");
    let nodes: Vec<(String, String)> = program
        .graph
        .nodes
        .iter()
        .map(|n| (n.target.clone(), n.name.clone()))
        .collect();
    let inputs: Vec<RValue> = inputs.into_iter().map(RValue::Tensor).collect();
    let mut session = Session::with_passes(program, backends::PassSet::NONE).unwrap();
    let (on, off, lines) = common::verbose_lines(|| session.run(inputs.clone()));
    on.unwrap();
    off.unwrap();
    assert_eq!(lines.len(), nodes.len(), "{lines:#?}");
    for (line, (target, name)) in lines.iter().zip(&nodes) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(&f[..4], ["pt2web_verbose", "cpu", target, name], "{line}");
        assert!(f[6].ends_with(" ms"), "{line}");
    }
    assert!(
        lines.iter().any(|l| l.contains("float32[32x16]")),
        "input shapes are listed: {lines:#?}"
    );
}
