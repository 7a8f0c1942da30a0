//! The op table is the one description of each op: every target the GPU backend has a
//! kernel for also has a CPU kernel (the reference and the fallback) and a shape rule (the
//! Plan's meta pass and `pt2web check`) in it, and every table entry names its family.
//!
//! The targets checked are every target of every committed fixture and op-suite archive
//! (graphs and subgraphs, both IRs) plus every exact target the table registers.

use pt2web::archive::pt2::LoadOptions;
use pt2web::program::Pt2Archive;
use pt2web::Limits;
use std::collections::BTreeSet;
use std::path::Path;

fn archives(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            archives(&p, out);
        } else if p.extension().is_some_and(|x| x == "pt2") {
            out.push(p);
        }
    }
}

/// Every target of every committed archive's programs.
fn fixture_targets() -> BTreeSet<String> {
    let mut files = Vec::new();
    archives(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
        &mut files,
    );
    assert!(files.len() > 20, "fixtures missing: {files:?}");
    let mut targets = BTreeSet::new();
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let Ok(a) = Pt2Archive::open(&f.to_string_lossy(), bytes, Limits::default()) else {
            continue; // malformed-on-purpose fixtures are tested elsewhere
        };
        for name in a.program_names().to_vec() {
            if let Ok(p) = a.program(Some(&name), &LoadOptions::default()) {
                targets.extend(p.graph.op_histogram().into_keys());
            }
        }
    }
    targets
}

#[test]
fn every_gpu_target_has_a_cpu_kernel_and_a_shape_rule() {
    let table = pt2web::ops::table();
    let mut targets = fixture_targets();
    let from_fixtures = targets.len();
    targets.extend(
        table
            .defs()
            .iter()
            .filter(|d| !d.any_overload)
            .map(|d| d.name.clone()),
    );
    let mut gpu = 0;
    let mut missing = Vec::new();
    for t in &targets {
        if pt2web::gpu::kernels::lookup(t).is_none() {
            continue;
        }
        gpu += 1;
        let cpu = table.cpu_kernel(t).is_some();
        let rule = table.shape_rule(t).is_some();
        if !cpu || !rule {
            missing.push(format!(
                "{t}: {}{}",
                if cpu { "" } else { "no CPU kernel " },
                if rule { "" } else { "no shape rule" }
            ));
        }
    }
    eprintln!(
        "{} targets ({from_fixtures} from fixtures), {gpu} with a GPU kernel",
        targets.len()
    );
    assert!(
        gpu > 300,
        "only {gpu} GPU targets found: the lookup changed?"
    );
    assert!(
        missing.is_empty(),
        "GPU targets missing from the op table:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_entry_has_a_family_and_something_to_run() {
    let families = [
        "activation",
        "attention",
        "complex",
        "control",
        "conv",
        "elementwise",
        "factory",
        "fft",
        "index",
        "linalg",
        "matmul",
        "norm",
        "pool",
        "quantized",
        "reduce",
        "rnn",
        "shape",
        "sort",
        // Composite ops with symbolic sizes (src/passes/decompose/concrete.rs).
        "decompose",
    ];
    let table = pt2web::ops::table();
    assert!(table.defs().len() > 400);
    for d in table.defs() {
        assert!(
            families.contains(&d.family),
            "{} has family '{}'",
            d.name,
            d.family
        );
        assert!(d.cpu.is_some() || d.rule.is_some(), "{} is empty", d.name);
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        if d.family == "decompose" {
            // Composite ops with symbolic sizes: their decompositions, run per call.
            assert!(pt2web::passes::decompose::decomposes(&d.name), "{}", d.name);
            assert!(root.join("src/passes/decompose/concrete.rs").is_file());
            continue;
        }
        // The family owns a folder with its shape rules beside its kernels.
        let dir = root.join("src/ops").join(d.family);
        assert!(dir.join("meta.rs").is_file(), "{}", dir.display());
    }
}

/// Every GPU registration names an op the op table knows, with a CPU kernel and a shape rule
/// (a misspelt op in a family's `register` would otherwise never match a node): each listed
/// overload of an `Only` entry exactly, and some overload of the others.
#[test]
fn every_gpu_registration_names_a_known_op() {
    use pt2web::gpu::kernels::table::{gpu_table, On};
    let table = pt2web::ops::table();
    let known = |op: &str| {
        table.defs().iter().any(|d| {
            (d.name == op || d.name.rsplit_once('.').is_some_and(|(o, _)| o == op))
                && d.cpu.is_some()
        })
    };
    let mut bad = Vec::new();
    let regs = gpu_table().registrations();
    for (op, on) in &regs {
        // Metadata-only targets outside aten (`_operator.add`, `torch.sym_float`) are
        // registered by prefix and run their CPU kernel on placeholders.
        if matches!(op.as_str(), "_operator" | "math" | "torch") {
            continue;
        }
        match on {
            On::Only(overloads) => {
                for o in *overloads {
                    let t = format!("{op}.{o}");
                    if table.cpu_kernel(&t).is_none() || table.shape_rule(&t).is_none() {
                        bad.push(format!("{t}: no CPU kernel or no shape rule"));
                    }
                }
            }
            _ if !known(op) => bad.push(format!("{op}: no CPU kernel for any overload")),
            _ => {}
        }
    }
    // The complex64 kernels serve targets whose complex tensors the op table handles too.
    let complex_regs = pt2web::gpu::kernels::complex::complex_table().registrations();
    for (op, on) in &complex_regs {
        let targets: Vec<String> = match on {
            On::Only(overloads) => overloads.iter().map(|o| format!("{op}.{o}")).collect(),
            _ => vec![format!("{op}.default")],
        };
        for t in targets {
            if table.complex_kernel(&t).is_none() || table.shape_rule(&t).is_none() {
                bad.push(format!("{t}: no complex CPU kernel or no shape rule"));
            }
        }
    }
    eprintln!(
        "{} GPU registrations checked (+{} complex64)",
        regs.len(),
        complex_regs.len()
    );
    assert!(regs.len() > 150, "only {} GPU registrations", regs.len());
    assert!(
        bad.is_empty(),
        "GPU registrations the op table lacks:\n{}",
        bad.join("\n")
    );
}

/// Each target is declared once: an entry with a CPU kernel carries its shape rule
/// ([`OpTable::define`]), so no kernel relies on a rule registered somewhere else. Entries
/// with a rule alone are shape rules ahead of their kernels (`pt2web check` sizes programs
/// that use them); none of them resolves to a CPU kernel through another entry.
#[test]
fn every_cpu_kernel_is_declared_with_its_shape_rule() {
    let table = pt2web::ops::table();
    let mut bad = Vec::new();
    for d in table.defs() {
        // A name that resolves as the entry does (an op-wide entry: any of its overloads).
        let probe = match d.any_overload {
            true => format!("{}.some_overload", d.name),
            false => d.name.clone(),
        };
        if d.cpu.is_some() && d.rule.is_none() {
            bad.push(format!("{}: a CPU kernel without its shape rule", d.name));
        }
        if d.cpu.is_none() && table.cpu_kernel(&probe).is_some() {
            bad.push(format!(
                "{}: a shape rule apart from its CPU kernel",
                d.name
            ));
        }
    }
    let alone = table.defs().iter().filter(|d| d.cpu.is_none()).count();
    eprintln!(
        "{} entries, {alone} with a shape rule alone",
        table.defs().len()
    );
    assert!(bad.is_empty(), "split declarations:\n{}", bad.join("\n"));
}

/// The core ATen ops that still lack a CPU kernel or a shape rule, or a GPU path, in
/// torch's list (tests/fixtures/core_aten.json, written by tests/fixgen/gen_core_aten.py).
/// An op leaves this list when it is covered (the test fails while a covered op stays on
/// it); none may join it.
const CORE_ATEN_GAPS: &[&str] = &[];

/// The ops that run on the CPU kernel in a GPU session by design, and why.
const CPU_ONLY: &[(&str, &str)] = &[(
    "aten.atan2.out",
    "an out= overload writes into a tensor the caller passes: the CPU kernel serves it",
)];

/// Every op torch lists as core ATen, the symbolic-shape ops and the higher-order ops of
/// decomposed programs has a shape rule, a CPU kernel and a GPU path (a kernel, a view, a
/// readback: control flow, `item`, data-dependent sizes, or a load-time decomposition into
/// such ops), or is a documented exception.
#[test]
fn core_aten_is_covered() {
    let list: serde_json::Value = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/core_aten.json"))
            .unwrap(),
    )
    .unwrap();
    let table = pt2web::ops::table();
    let mut gaps = Vec::new();
    let mut count = 0;
    for key in ["aten", "symbolic", "higher_order"] {
        for t in list[key].as_array().unwrap() {
            let t = t.as_str().unwrap();
            count += 1;
            let cpu = table.cpu_kernel(t).is_some() && table.shape_rule(t).is_some();
            let gpu = pt2web::gpu::kernels::support::has_gpu_path(t)
                || CPU_ONLY.iter().any(|(o, _)| *o == t);
            let listed = CORE_ATEN_GAPS.contains(&t);
            match (cpu && gpu, listed) {
                (true, true) => {
                    gaps.push(format!("{t}: covered now, remove it from CORE_ATEN_GAPS"))
                }
                (false, false) => gaps.push(format!(
                    "{t}: {}{}",
                    if cpu {
                        ""
                    } else {
                        "no CPU kernel or shape rule; "
                    },
                    if gpu { "" } else { "no GPU path" }
                )),
                _ => {}
            }
        }
    }
    eprintln!(
        "{count} ops on torch {}'s list, {} covered, {} known gaps, {} CPU-only by design",
        list["torch"],
        count - CORE_ATEN_GAPS.len(),
        CORE_ATEN_GAPS.len(),
        CPU_ONLY.len()
    );
    assert!(count > 200, "only {count} ops listed");
    assert!(gaps.is_empty(), "core ATen coverage:\n{}", gaps.join("\n"));
}

/// docs/ops.md is what `pt2web ops` prints today (regenerate it when the op table changes).
#[test]
fn the_support_page_is_up_to_date() {
    let page = pt2web::ops::doc::support_page();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ops.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        page == committed,
        "docs/ops.md is stale: regenerate it with \
         `cargo run --release -p pt2web-native -- ops > docs/ops.md`"
    );
    // The page says what the tables say: a GPU kernel's row names dtypes.
    assert!(page.contains("| `aten.add` | yes"), "aten.add row missing");
    assert!(page
        .lines()
        .filter(|l| l.contains("| kernel"))
        .all(|l| !l.trim_end().ends_with("| |")));
}
