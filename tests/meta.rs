//! The meta backend against torch: every `.pt2` graph records, for every node output, the
//! dtype and (symbolic) sizes torch's fake tensors had (`tensor_values`). For every program of
//! the op suite (`X` and `X__core`), of tests/fixtures and of the real-model cache (when
//! built), `meta::infer` runs with the concrete input shapes of the io cases, and every node
//! output is compared with torch's metadata evaluated under the input bindings (bound by
//! `Session::check_inputs`, independently of the meta pass). Nothing here is produced by
//! pt2web itself.

mod common;

use pt2web::archive::pt2::LoadOptions;
use pt2web::cpu::Tensor;
use pt2web::meta::{self, MValue, MetaTensor};
use pt2web::program::{Dim, Program, Pt2Archive, ValueKind};
use pt2web::runtime::{RValue, Session};
use pt2web::{DType, Limits};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Op targets that have a CPU kernel but deliberately no meta rule (target, reason).
const NO_META_RULE: &[(&str, &str)] = &[];

/// Node outputs whose meta is known to differ from torch's (target, reason).
const KNOWN_MISMATCHES: &[(&str, &str)] = &[];

/// Ops whose output shape depends on tensor values the meta device does not have, and for
/// which no upper bound is known: the meta pass stops there with a typed error (target, reason).
const DATA_DEPENDENT: &[(&str, &str)] = &[
    (
        "aten.repeat_interleave.self_Tensor",
        "the output length is the sum of the repeats tensor's values",
    ),
    (
        "aten.bincount.default",
        "the output length is the largest value plus one (at least minlength)",
    ),
];

#[derive(Default)]
struct Tally {
    programs: usize,
    nodes: usize,
    outputs: usize,
    mismatches: Vec<String>,
    missing: BTreeSet<String>,
    errors: Vec<String>,
}

/// One program run with one set of input shapes.
struct Run<'a> {
    family: String,
    label: String,
    program: &'a Program,
    inputs: Vec<(DType, Vec<usize>)>,
}

fn eval_dim(d: &Dim, b: &BTreeMap<String, i64>) -> Option<i64> {
    match d {
        Dim::Static(v) => Some(*v),
        Dim::Sym(e) => e.eval_int(&|s| b.get(s).copied()).ok(),
    }
}

/// Compare one value's meta with what torch recorded; `None` when equal (or not comparable).
fn compare(
    declared: &ValueKind,
    got: Option<&MValue>,
    b: &BTreeMap<String, i64>,
) -> Option<String> {
    match declared {
        ValueKind::Tensor { dtype, sizes, .. } => {
            let Some(MValue::Tensor(t)) = got else {
                return Some(format!(
                    "expected a tensor, got {:?}",
                    got.map(MValue::kind)
                ));
            };
            let want: Vec<Option<i64>> = sizes.iter().map(|d| eval_dim(d, b)).collect();
            let sizes_ok = want.len() == t.sizes.len()
                && want.iter().zip(&t.sizes).all(|(w, g)| match w {
                    Some(w) => *w == *g as i64 || t.data_dependent,
                    // An unbacked symbol (data-dependent size): not comparable.
                    None => true,
                });
            if *dtype != t.dtype || !sizes_ok {
                let want_s: Vec<String> = want
                    .iter()
                    .map(|w| w.map_or("?".into(), |v| v.to_string()))
                    .collect();
                return Some(format!("got {t}, torch has {dtype}[{}]", want_s.join(", ")));
            }
            None
        }
        ValueKind::SymInt(d) => match (eval_dim(d, b), got) {
            (Some(w), Some(MValue::Int(g))) if w != *g => {
                Some(format!("got the int {g}, torch has {w}"))
            }
            (Some(_), Some(MValue::Int(_)) | Some(MValue::Unknown(_))) | (None, _) => None,
            (Some(w), other) => Some(format!(
                "expected the int {w}, got {:?}",
                other.map(MValue::kind)
            )),
        },
        _ => None,
    }
}

fn check_run(run: &Run, t: &mut Tally) {
    let p = run.program;
    let where_ = format!("{}:{} ({})", run.family, p.name, run.label);
    let missing = meta::missing_rules(p);
    if !missing.is_empty() {
        t.missing.extend(missing);
        return;
    }
    // The oracle's bindings: the interpreter's own input check.
    let rvals: Vec<RValue> = run
        .inputs
        .iter()
        .map(|(d, s)| RValue::Tensor(Tensor::zeros(*d, s).unwrap()))
        .collect();
    let bindings = match Session::new(p.clone()).and_then(|s| s.check_inputs(&rvals)) {
        Ok(b) => b,
        Err(e) => {
            t.errors.push(format!("{where_}: binding inputs: {e}"));
            return;
        }
    };
    let metas: Vec<MValue> = run
        .inputs
        .iter()
        .map(|(d, s)| MValue::Tensor(MetaTensor::new(*d, s.clone())))
        .collect();
    let inferred = match meta::infer(p, &metas) {
        Ok(i) => i,
        Err(e) => {
            let expected = matches!(&e, meta::MetaError::Invalid { target, .. }
                if DATA_DEPENDENT.iter().any(|(d, _)| d == target));
            if !expected {
                t.errors.push(format!("{where_}: {e}"));
            }
            return;
        }
    };
    assert_eq!(
        inferred.bindings, bindings,
        "{where_}: the meta pass bound the symbols differently from Session::check_inputs"
    );
    t.programs += 1;
    let g = &p.graph;
    for (i, node) in g.nodes.iter().enumerate() {
        t.nodes += 1;
        for (id, got) in inferred.node_outputs(g, i) {
            t.outputs += 1;
            if let Some(msg) = compare(&g.value(id).kind, got, &bindings) {
                if KNOWN_MISMATCHES.iter().any(|(k, _)| *k == node.target) {
                    continue;
                }
                t.mismatches.push(format!(
                    "{where_}: node '{}' ({}) output '{}': {msg}",
                    node.name,
                    node.target,
                    g.value(id).name
                ));
            }
        }
    }
}

fn shapes_of(list: &Value) -> Vec<(DType, Vec<usize>)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let (d, s) = if i.is_array() {
                (&i[0], &i[1])
            } else {
                (&i["dtype"], &i["shape"])
            };
            (
                DType::from_name(d.as_str().unwrap()).unwrap(),
                s.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as usize)
                    .collect(),
            )
        })
        .collect()
}

fn open(path: &Path) -> Pt2Archive {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    Pt2Archive::open(&name, std::fs::read(path).unwrap(), Limits::default()).unwrap()
}

/// Every (family, archive, program, label, input shapes) the fixtures describe.
fn for_each_run(mut f: impl FnMut(Run)) {
    let fx = common::fixtures();
    // The op suite: both the training-IR and the core-ATen program of each case.
    let ops = fx.join("ops");
    let mut fams: Vec<String> = std::fs::read_dir(&ops)
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".cases.json")
                .map(str::to_string)
        })
        .collect();
    fams.sort();
    for fam in &fams {
        let cases: Value =
            serde_json::from_slice(&std::fs::read(ops.join(format!("{fam}.cases.json"))).unwrap())
                .unwrap();
        let archive = open(&ops.join(format!("{fam}.pt2")));
        let names = archive.program_names().to_vec();
        for c in cases["cases"].as_array().unwrap() {
            let base = c["program"].as_str().unwrap();
            let inputs = shapes_of(&c["inputs"]);
            for pname in [base.to_string(), format!("{base}__core")] {
                if !names.contains(&pname) {
                    continue;
                }
                let p = archive
                    .program(Some(&pname), &LoadOptions::default())
                    .unwrap();
                f(Run {
                    family: fam.clone(),
                    label: c["case"].as_str().unwrap_or("").to_string(),
                    program: &p,
                    inputs: inputs.clone(),
                });
            }
        }
    }
    // Program fixtures and real models: their io cases.
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models");
    for (family, dir) in [("fixtures", fx), ("models", cache)] {
        if !dir.is_dir() {
            eprintln!("{}: not built, skipped", dir.display());
            continue;
        }
        for (stem, m) in common::metas_in(&dir) {
            let archive = open(&dir.join(m["archive"].as_str().unwrap()));
            for (pname, pm) in m["programs"].as_object().unwrap() {
                let Ok(p) = archive.program(Some(pname), &LoadOptions::default()) else {
                    continue;
                };
                for case in pm
                    .get("io_cases")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    f(Run {
                        family: format!("{family}/{stem}"),
                        label: case["label"].as_str().unwrap_or("").to_string(),
                        program: &p,
                        inputs: shapes_of(&case["inputs"]),
                    });
                }
            }
        }
    }
}

#[test]
fn meta_matches_torch_metadata() {
    let mut per_family: BTreeMap<String, Tally> = BTreeMap::new();
    let mut targets: BTreeSet<String> = BTreeSet::new();
    for_each_run(|run| {
        targets.extend(run.program.graph.op_histogram().into_keys());
        // Per op family for the op suite; one line per fixture group otherwise.
        let key = run
            .family
            .split('/')
            .next()
            .unwrap_or(&run.family)
            .to_string();
        check_run(&run, per_family.entry(key).or_default());
    });
    eprintln!(
        "{:<14} {:>8} {:>7} {:>8} {:>10} {:>8} {:>7}",
        "family", "programs", "nodes", "outputs", "mismatches", "missing", "errors"
    );
    let mut all = Tally::default();
    for (fam, t) in &per_family {
        eprintln!(
            "{fam:<14} {:>8} {:>7} {:>8} {:>10} {:>8} {:>7}",
            t.programs,
            t.nodes,
            t.outputs,
            t.mismatches.len(),
            t.missing.len(),
            t.errors.len()
        );
        all.programs += t.programs;
        all.nodes += t.nodes;
        all.outputs += t.outputs;
        all.mismatches.extend(t.mismatches.iter().cloned());
        all.missing.extend(t.missing.iter().cloned());
        all.errors.extend(t.errors.iter().cloned());
    }
    eprintln!(
        "{:<14} {:>8} {:>7} {:>8} {:>10} {:>8} {:>7}",
        "total",
        all.programs,
        all.nodes,
        all.outputs,
        all.mismatches.len(),
        all.missing.len(),
        all.errors.len()
    );
    let table = pt2web::ops::table();
    let with_rule = targets
        .iter()
        .filter(|t| table.shape_rule(t).is_some())
        .count();
    eprintln!(
        "rule coverage: {with_rule} of {} op targets in the fixtures have a meta rule",
        targets.len()
    );
    // Informational: CPU registrations (beyond these fixtures) without a meta rule.
    let beyond: Vec<String> = table
        .cpu_names()
        .into_iter()
        .filter(|n| table.shape_rule(n).is_none())
        .collect();
    eprintln!(
        "{} of {} CPU kernel registrations have no meta rule: {beyond:?}",
        beyond.len(),
        table.cpu_names().len()
    );
    // Every target with a CPU kernel has a meta rule, unless listed with a reason.
    let uncovered: Vec<&String> = targets
        .iter()
        .filter(|t| table.cpu_kernel(t).is_some() && table.shape_rule(t).is_none())
        .filter(|t| !NO_META_RULE.iter().any(|(n, _)| n == t))
        .collect();
    let mut report = String::new();
    for (what, list) in [
        (
            "missing rules",
            all.missing.iter().cloned().collect::<Vec<_>>(),
        ),
        ("errors", all.errors.clone()),
        ("mismatches", all.mismatches.clone()),
    ] {
        if !list.is_empty() {
            report += &format!("{} {what}:\n  {}\n", list.len(), list.join("\n  "));
        }
    }
    if !uncovered.is_empty() {
        report += &format!(
            "{} targets with a CPU kernel but no meta rule: {uncovered:?}\n",
            uncovered.len()
        );
    }
    assert!(report.is_empty(), "{report}");
}

fn fixture_program(file: &str) -> Program {
    open(&common::fixtures().join(file))
        .program(None, &LoadOptions::default())
        .unwrap()
}

fn user_metas(p: &Program) -> Vec<MValue> {
    meta::input_meta(p)
        .into_iter()
        .map(|(n, v)| v.unwrap_or_else(|| panic!("input {n} has no static meta")))
        .collect()
}

/// A weight that no longer fits: the error names the node, the op and both shapes.
#[test]
fn shape_errors_name_node_op_and_shapes() {
    let mut p = fixture_program("mlp_core.pt2");
    p.state.get_mut("fc2.weight").unwrap().tensor.sizes = vec![8, 31];
    let e = meta::infer(&p, &user_metas(&p)).unwrap_err();
    let meta::MetaError::Invalid { node, target, msg } = &e else {
        panic!("expected a rule error, got {e}");
    };
    assert!(!node.is_empty(), "{e}");
    assert!(target.starts_with("aten."), "{e}");
    assert!(msg.contains("31") && msg.contains("32"), "{e}");
}

#[test]
fn missing_rule_is_a_typed_error() {
    let mut p = fixture_program("mlp_core.pt2");
    p.graph.nodes[0].target = "aten.no_such_op.default".into();
    assert_eq!(meta::missing_rules(&p), vec!["aten.no_such_op.default"]);
    match meta::infer(&p, &user_metas(&p)) {
        Err(meta::MetaError::MissingRule { target, .. }) => {
            assert_eq!(target, "aten.no_such_op.default")
        }
        other => panic!("expected MissingRule, got {other:?}"),
    }
}

#[test]
fn bad_inputs_are_refused() {
    let p = fixture_program("mlp_core.pt2");
    let mut m = user_metas(&p);
    if let MValue::Tensor(t) = &mut m[0] {
        t.sizes.push(3);
    }
    assert!(matches!(
        meta::infer(&p, &m),
        Err(meta::MetaError::Input(_))
    ));
    assert!(matches!(
        meta::infer(&p, &[]),
        Err(meta::MetaError::Input(_))
    ));
}

/// The memory estimate of a static MLP: state bytes from torch's metadata (meta.json), and a
/// peak that includes at least the input and the output.
#[test]
fn memory_estimate_of_an_mlp() {
    let p = fixture_program("mlp_core.pt2");
    let m: Value = serde_json::from_slice(
        &std::fs::read(common::fixtures().join("mlp_core.meta.json")).unwrap(),
    )
    .unwrap();
    let inputs = user_metas(&p);
    let inf = meta::infer(&p, &inputs).unwrap();
    let est = meta::estimate(&p, &inf);
    assert_eq!(
        est.parameter_bytes,
        m["programs"]["model"]["state_storage_bytes"]
            .as_u64()
            .unwrap()
    );
    let case = &m["programs"]["model"]["io_cases"][0];
    let bytes = |v: &Value| -> u64 {
        shapes_of(v)
            .iter()
            .map(|(d, s)| (s.iter().product::<usize>() * d.size()) as u64)
            .sum()
    };
    let (inp, out) = (bytes(&case["inputs"]), bytes(&case["outputs"]));
    assert_eq!(est.input_bytes, inp);
    assert!(est.peak_activation_bytes >= inp + out, "{est:?}");
    assert_eq!(
        est.total_bytes,
        est.parameter_bytes + est.peak_activation_bytes
    );
}

/// A dynamic program without inputs: example shapes from the ranges, or the dims to give.
#[test]
fn example_inputs_of_a_dynamic_program() {
    let p = fixture_program("dyn_batch.pt2");
    match meta::example_inputs(&p) {
        Ok((ins, origin)) => {
            assert_eq!(origin, meta::ExampleOrigin::UpperBound);
            meta::infer(&p, &ins).unwrap();
        }
        Err(needs) => assert!(!needs.is_empty()),
    }
    let s = fixture_program("mlp_core.pt2");
    assert_eq!(
        meta::example_inputs(&s).unwrap().1,
        meta::ExampleOrigin::Static
    );
}

/// The meta backend (`MetaSession`, `pt2web run --device meta`), driven through the
/// `Backend` seam with the real inputs of every io case of the program fixtures and the real
/// models (when built): each output has the dtype and shape of the tensor PyTorch computed
/// for the same inputs, and no value is computed.
#[test]
fn meta_backend_outputs_match_pytorch_outputs() {
    use pt2web::backend::{Backend, MetaSession};
    use pt2web::gpu::{GpuInput, Slot};
    use std::task::{Context, Poll, Waker};
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models");
    let (mut checked, mut failures) = (0, Vec::new());
    for dir in [common::fixtures(), cache] {
        if !dir.is_dir() {
            continue;
        }
        for (stem, m) in common::metas_in(&dir) {
            let archive = common::open_in(&dir, &m);
            for (pname, pm) in m["programs"].as_object().unwrap() {
                let Ok(p) = archive.program(Some(pname), &LoadOptions::default()) else {
                    continue;
                };
                let data_dependent = p
                    .graph
                    .op_histogram()
                    .into_keys()
                    .any(|t| DATA_DEPENDENT.iter().any(|(d, _)| *d == t));
                let mut s = MetaSession::new(p).unwrap();
                for case in pm
                    .get("io_cases")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let at = format!("{stem}/{pname} ({})", case["label"]);
                    let bytes = std::fs::read(dir.join(case["file"].as_str().unwrap())).unwrap();
                    let io = safetensors::SafeTensors::deserialize(&bytes).unwrap();
                    let tensor =
                        |key: &Value| common::to_tensor(&io.tensor(key.as_str().unwrap()).unwrap());
                    let inputs: Vec<GpuInput> = case["inputs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|i| GpuInput::Cpu(RValue::Tensor(tensor(&i["key"]))))
                        .collect();
                    // The meta backend's future is ready at once: nothing to wait for.
                    let mut run = s.run_with(inputs, false);
                    let Poll::Ready(outs) =
                        run.as_mut().poll(&mut Context::from_waker(Waker::noop()))
                    else {
                        panic!("{at}: the meta run did not finish at once");
                    };
                    drop(run);
                    let outs = match outs {
                        Ok(o) => o,
                        Err(e) if data_dependent => {
                            eprintln!("{at}: data-dependent size: {e}");
                            continue;
                        }
                        Err(e) => {
                            failures.push(format!("{at}: {e}"));
                            continue;
                        }
                    };
                    let want = case["outputs"].as_array().unwrap();
                    if outs.len() != want.len() {
                        failures.push(format!(
                            "{at}: {} outputs, torch gave {}",
                            outs.len(),
                            want.len()
                        ));
                        continue;
                    }
                    for (o, w) in outs.iter().zip(want) {
                        let want = tensor(&w["key"]);
                        match o {
                            Slot::Meta(MValue::Tensor(t))
                                if t.dtype == want.dtype && t.sizes == want.sizes =>
                            {
                                checked += 1
                            }
                            other => failures.push(format!(
                                "{at}: {}: got {other:?}, torch gave {}{:?}",
                                w["key"], want.dtype, want.sizes
                            )),
                        }
                    }
                }
            }
        }
    }
    eprintln!("meta backend: {checked} outputs match torch's dtype and shape");
    assert!(checked > 0, "no io case was checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
