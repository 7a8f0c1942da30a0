//! Valid programs made hostile: a committed fixture's `model.json` is mutated with structured
//! mutations the fuzz input drives (op targets, arguments, sizes and strides, symbolic
//! expressions and ranges, pytree specs, graph signatures, dtypes, output specs), zipped back
//! with its weights, and taken through load -> info -> meta -> plan -> two CPU runs under small
//! limits (elements, nodes, rank, loop iterations, a per-run timeout). Every step must return
//! Ok or Err: no panic, no abort, no hang.
//!
//! CPU only: a wgpu session on lavapipe costs tens of milliseconds to create and compiles a
//! pipeline per new kernel, which would leave a few executions per second.
//!
//! Runs are bounded by the byte budgets (`Limits::max_tensor_bytes`, `max_live_bytes`, checked
//! on the Plan and by data-dependent kernels): a program that gets past them to a larger
//! allocation is a crash here (libFuzzer's malloc limit).
#![no_main]
use libfuzzer_sys::arbitrary::{Result as ArbResult, Unstructured};
use libfuzzer_sys::fuzz_target;
use pt2web::archive::pt2::LoadOptions;
use pt2web::cpu::Tensor;
use pt2web::meta::MValue;
use pt2web::program::Pt2Archive;
use pt2web::runtime::{RValue, RunOptions, Session};
use pt2web::{DType, Limits};
use serde_json::Value;
use std::io::{Read, Write};
use std::sync::OnceLock;

/// Single-program fixtures that together hold plain graphs, dynamic sizes (derived and
/// shared symbols), `cond` subgraphs, pytree inputs and outputs, buffer and input mutations,
/// convolutions, a KV cache and a data-dependent mask.
const FIXTURES: &[&[u8]] = &[
    include_bytes!("../../tests/fixtures/mlp_core.pt2"),
    include_bytes!("../../tests/fixtures/mlp_train.pt2"),
    include_bytes!("../../tests/fixtures/dyn_batch_core.pt2"),
    include_bytes!("../../tests/fixtures/dyn_derived_plus1.pt2"),
    include_bytes!("../../tests/fixtures/dyn_shared.pt2"),
    include_bytes!("../../tests/fixtures/cond.pt2"),
    include_bytes!("../../tests/fixtures/pytree_io.pt2"),
    include_bytes!("../../tests/fixtures/model_output.pt2"),
    include_bytes!("../../tests/fixtures/mutate_buffer_core.pt2"),
    include_bytes!("../../tests/fixtures/mutate_input.pt2"),
    include_bytes!("../../tests/fixtures/inplace_train.pt2"),
    include_bytes!("../../tests/fixtures/convnet_core.pt2"),
    include_bytes!("../../tests/fixtures/kv_cache_core.pt2"),
    include_bytes!("../../tests/fixtures/shape_mask_core.pt2"),
];

/// The most elements of one synthesized input.
const MAX_INPUT_ELEMENTS: usize = 1 << 16;

/// One fixture, unzipped: its entries and its parsed model.json (node metadata removed:
/// stack traces are large and nothing runs on them).
struct Seed {
    entries: Vec<(String, Vec<u8>)>,
    model: usize,
    json: Value,
}

fn seeds() -> &'static [Seed] {
    static SEEDS: OnceLock<Vec<Seed>> = OnceLock::new();
    SEEDS.get_or_init(|| FIXTURES.iter().map(|b| unzip(b)).collect())
}

/// Every target with a CPU kernel, as model.json spells it.
fn targets() -> &'static [String] {
    static T: OnceLock<Vec<String>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t: Vec<String> = pt2web::ops::table()
            .cpu_names()
            .into_iter()
            .map(|n| match n.matches('.').count() {
                // An op covering every overload (`aten.add`): name one.
                1 => format!("torch.ops.{n}.default"),
                _ if n.starts_with("aten.") || n.starts_with("prims.") => format!("torch.ops.{n}"),
                _ => n,
            })
            .collect();
        t.extend(
            [
                "torch.ops.higher_order.cond",
                "torch.ops.higher_order.while_loop",
                "_operator.getitem",
                "torch.ops.aten.sym_size.int",
            ]
            .map(String::from),
        );
        t
    })
}

fn unzip(bytes: &[u8]) -> Seed {
    // Offset 0, as pt2web's reader: the nested zip of the sample inputs would mislead the
    // search for the end-of-directory record.
    let config = zip::read::Config {
        archive_offset: zip::read::ArchiveOffset::Known(0),
    };
    let mut z =
        zip::ZipArchive::with_config(config, std::io::Cursor::new(bytes)).expect("fixture zip");
    let mut entries = Vec::new();
    let mut model = 0;
    let mut json = Value::Null;
    for i in 0..z.len() {
        let mut f = z.by_index(i).expect("fixture entry");
        let name = f.name().expect("fixture entry name").into_owned();
        let mut data = Vec::new();
        f.read_to_end(&mut data).expect("fixture read");
        if name.ends_with("models/model.json") {
            model = entries.len();
            json = serde_json::from_slice(&data).expect("fixture json");
            strip_metadata(&mut json);
        }
        entries.push((name, data));
    }
    Seed {
        entries,
        model,
        json,
    }
}

fn strip_metadata(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("metadata");
            m.values_mut().for_each(strip_metadata);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_metadata),
        _ => {}
    }
}

/// The seed's archive with `json` as its model.json (entries stored).
fn rezip(seed: &Seed, json: &Value) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (i, (name, data)) in seed.entries.iter().enumerate() {
        w.start_file(name.as_str(), opts).expect("zip entry");
        if i == seed.model {
            w.write_all(&serde_json::to_vec(json).expect("json"))
                .expect("zip write");
        } else {
            w.write_all(data).expect("zip write");
        }
    }
    w.finish().expect("zip finish").into_inner()
}

/// JSON pointers of every value of `v` (leaves and containers), with their key.
fn paths(v: &Value, at: &mut String, out: &mut Vec<(String, String)>, key: &str) {
    out.push((at.clone(), key.to_string()));
    let len = at.len();
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                at.push('/');
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                paths(c, at, out, k);
                at.truncate(len);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                at.push('/');
                at.push_str(&i.to_string());
                paths(c, at, out, key);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

const INTS: &[i64] = &[
    0,
    1,
    -1,
    2,
    3,
    4,
    7,
    8,
    16,
    63,
    64,
    1 << 16,
    1 << 20,
    1 << 31,
    -(1 << 31),
    1 << 32,
    i64::MAX,
    i64::MIN,
    -2,
    5,
];
const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    1e-30,
    1e30,
    f64::MAX,
    f64::MIN_POSITIVE,
    3.0,
];
/// Strings torch writes for non-finite floats, dtype-ish and layout-ish words, and pieces of
/// sympy expressions.
const WORDS: &[&str] = &[
    "NaN",
    "Infinity",
    "-Infinity",
    "",
    "s0",
    "s77",
    "u0",
    "x",
    "cpu",
    "meta",
    "none",
    "tanh",
    "mean",
    "sum",
    "Symbol('s0', positive=True, integer=True)",
    "Integer(0)",
    "Integer(-1)",
    "Integer(9223372036854775807)",
];
/// sympy functions the symbolic parser knows, and a few it does not.
const SYM_FNS: &[&str] = &[
    "Add",
    "Mul",
    "FloorDiv",
    "Mod",
    "Max",
    "Min",
    "Pow",
    "CeilToInt",
    "PythonMod",
    "CleanDiv",
    "Abs",
    "Eq",
    "Ne",
    "Lt",
    "Le",
    "Gt",
    "Ge",
    "And",
    "Or",
    "Not",
    "Unknown",
];

/// A symbolic expression in torch's `srepr` form over the symbols `syms`.
fn sym_expr(u: &mut Unstructured, syms: &[String], depth: u32) -> ArbResult<String> {
    Ok(match u.int_in_range(0..=3)? {
        0 if !syms.is_empty() => {
            format!("Symbol('{}', positive=True, integer=True)", u.choose(syms)?)
        }
        1 | 0 => format!("Integer({})", u.choose(INTS)?),
        _ if depth >= 3 => format!("Integer({})", u.choose(INTS)?),
        _ => {
            let f = u.choose(SYM_FNS)?;
            let n = u.int_in_range(1..=3)?;
            let args = (0..n)
                .map(|_| sym_expr(u, syms, depth + 1))
                .collect::<ArbResult<Vec<_>>>()?;
            format!("{f}({})", args.join(", "))
        }
    })
}

/// A value for a leaf: of its own kind mostly (a nearby or interesting number, another string
/// of the document), sometimes of another kind.
fn new_leaf(
    u: &mut Unstructured,
    old: &Value,
    strings: &[String],
    syms: &[String],
) -> ArbResult<Value> {
    Ok(match (u.int_in_range(0..=9)?, old) {
        (0..=5, Value::Number(n)) if n.is_i64() => {
            let x = n.as_i64().unwrap_or(0);
            match u.int_in_range(0..=2)? {
                0 => Value::from(x.wrapping_add(u.int_in_range(-3..=3)?)),
                1 => Value::from(*u.choose(INTS)?),
                _ => Value::from(x.wrapping_mul(u.int_in_range(-2..=1000)?)),
            }
        }
        (0..=5, Value::Number(_)) => Value::from(*u.choose(FLOATS)?),
        (0..=5, Value::Bool(b)) => Value::Bool(!b),
        (0..=3, Value::String(s)) if s.contains("Symbol(") || s.contains("Integer(") => {
            Value::String(sym_expr(u, syms, 0)?)
        }
        (0..=5, Value::String(_)) if !strings.is_empty() => {
            Value::String(u.choose(strings)?.clone())
        }
        (6, _) => Value::from(*u.choose(INTS)?),
        (7, _) => Value::String(u.choose(WORDS)?.to_string()),
        (8, _) => Value::Null,
        _ => Value::from(*u.choose(FLOATS)?),
    })
}

/// Apply one mutation to `doc`.
fn mutate(doc: &mut Value, u: &mut Unstructured) -> ArbResult<()> {
    let mut all = Vec::new();
    paths(doc, &mut String::new(), &mut all, "");
    let strings: Vec<String> = all
        .iter()
        .filter_map(|(p, _)| doc.pointer(p).and_then(Value::as_str).map(String::from))
        .filter(|s| s.len() < 200)
        .collect();
    let syms: Vec<String> = doc
        .get("range_constraints")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    // Values under keys that matter most, so mutations land there often.
    let keyed = |keys: &[&str]| -> Vec<String> {
        all.iter()
            .filter(|(_, k)| keys.contains(&k.as_str()))
            .map(|(p, _)| p.clone())
            .collect()
    };
    match u.int_in_range(0..=9)? {
        // Another op for a node: its arguments now mean something else to the kernel.
        0 | 1 => {
            let nodes = keyed(&["target"]);
            if let (false, Some(t)) = (
                nodes.is_empty(),
                targets().get(u.choose_index(targets().len().max(1))?),
            ) {
                let p = u.choose(&nodes)?;
                if let Some(v) = doc.pointer_mut(p) {
                    *v = Value::String(t.clone());
                }
            }
        }
        // Sizes, strides, integer arguments, dtypes, layouts, ranges.
        2 | 3 => {
            let ps = keyed(&[
                "as_int",
                "as_ints",
                "sizes",
                "strides",
                "storage_offset",
                "dtype",
                "layout",
                "min_val",
                "max_val",
                "as_float",
                "as_floats",
                "as_bool",
                "as_scalar_type",
                "kind",
                "as_expr",
                "expr_str",
                "hint",
            ]);
            if !ps.is_empty() {
                let p = u.choose(&ps)?.clone();
                mutate_leaves(doc, &p, u, &strings, &syms)?;
            }
        }
        // A pytree spec (a JSON document inside a string): mutated as JSON, written back.
        4 => {
            let ps = keyed(&["in_spec", "out_spec"]);
            if !ps.is_empty() {
                let p = u.choose(&ps)?.clone();
                if let Some(Value::String(s)) = doc.pointer(&p).cloned() {
                    if let Ok(mut spec) = serde_json::from_str::<Value>(&s) {
                        mutate(&mut spec, u)?;
                        if let Some(v) = doc.pointer_mut(&p) {
                            *v = Value::String(spec.to_string());
                        }
                    }
                }
            }
        }
        // Signature entries, graph inputs/outputs and node argument lists: drop, duplicate,
        // swap or move elements of one array.
        5 | 6 => {
            let arrays: Vec<&(String, String)> = all
                .iter()
                .filter(|(p, _)| doc.pointer(p).is_some_and(Value::is_array))
                .collect();
            if !arrays.is_empty() {
                let p = u.choose(&arrays)?.0.clone();
                if let Some(Value::Array(a)) = doc.pointer_mut(&p) {
                    if !a.is_empty() {
                        let i = u.choose_index(a.len())?;
                        match u.int_in_range(0..=2)? {
                            0 => {
                                a.remove(i);
                            }
                            1 => {
                                let e = a[i].clone();
                                a.insert(u.choose_index(a.len() + 1)?, e);
                            }
                            _ => {
                                let j = u.choose_index(a.len())?;
                                a.swap(i, j);
                            }
                        }
                    }
                }
            }
        }
        // Splice: a subtree copied over another one (an argument of one node given to
        // another, an output spec in place of an input spec...).
        7 => {
            let from = u.choose(&all)?.0.clone();
            let to = u.choose(&all)?.0.clone();
            if !to.is_empty() && !to.starts_with(&from) {
                if let Some(src) = doc.pointer(&from).cloned() {
                    if let Some(v) = doc.pointer_mut(&to) {
                        *v = src;
                    }
                }
            }
        }
        // Any leaf at all.
        _ => {
            let p = u.choose(&all)?.0.clone();
            mutate_leaves(doc, &p, u, &strings, &syms)?;
        }
    }
    Ok(())
}

/// Replace one leaf at or under `p`.
fn mutate_leaves(
    doc: &mut Value,
    p: &str,
    u: &mut Unstructured,
    strings: &[String],
    syms: &[String],
) -> ArbResult<()> {
    let mut under = Vec::new();
    if let Some(v) = doc.pointer(p) {
        paths(v, &mut p.to_string(), &mut under, "");
    }
    let leaves: Vec<String> = under
        .into_iter()
        .map(|(q, _)| q)
        .filter(|q| {
            doc.pointer(q)
                .is_some_and(|v| !v.is_array() && !v.is_object())
        })
        .collect();
    if leaves.is_empty() {
        return Ok(());
    }
    let q = u.choose(&leaves)?;
    if let Some(v) = doc.pointer_mut(q) {
        *v = new_leaf(u, v, strings, syms)?;
    }
    Ok(())
}

/// A tensor of `dtype` and `sizes` filled with values from the fuzz input (small integers,
/// signs, zeros, NaN and infinities).
fn tensor(u: &mut Unstructured, dtype: DType, sizes: &[usize]) -> Option<Tensor> {
    let n: usize = sizes.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    if n > MAX_INPUT_ELEMENTS {
        return None;
    }
    let pool = [
        0.0f32,
        1.0,
        -1.0,
        2.0,
        3.0,
        -7.0,
        0.5,
        100.0,
        f32::NAN,
        f32::INFINITY,
        1e6,
        -0.0,
    ];
    let v: Vec<f32> = (0..n).map(|_| *u.choose(&pool).unwrap_or(&0.0)).collect();
    Tensor::from_vec(v, sizes).to_dtype(dtype).ok()
}

fn run(bytes: Vec<u8>, u: &mut Unstructured) {
    let limits = Limits {
        max_total_bytes: 64 << 20,
        max_entry_bytes: 32 << 20,
        max_tensor_elements: 1 << 22,
        max_nodes: 4096,
        max_rank: 8,
        max_loop_iterations: 1000,
        max_tensor_bytes: 16 << 20,
        max_live_bytes: 64 << 20,
        ..Limits::default()
    };
    let Ok(a) = Pt2Archive::open("fuzz", bytes, limits) else {
        return;
    };
    let opts = LoadOptions {
        limits,
        ..Default::default()
    };
    let Ok(p) = a.program(None, &opts) else {
        return;
    };
    let _ = pt2web::info::program_info(&p);
    let _ = pt2web::meta::missing_rules(&p);
    let Ok((metas, _)) = pt2web::meta::example_inputs(&p) else {
        return;
    };
    let Ok(mut session) = Session::new(p) else {
        return;
    };
    if session.prepare(&metas).is_err() {
        return;
    }
    let mut inputs = Vec::new();
    for m in &metas {
        inputs.push(match m {
            MValue::Tensor(t) => match tensor(u, t.dtype, &t.sizes) {
                Some(t) => RValue::Tensor(t),
                None => return,
            },
            MValue::Int(i) => RValue::Int(*i),
            MValue::Float(f) => RValue::Float(*f),
            MValue::Bool(b) => RValue::Bool(*b),
            _ => RValue::None,
        });
    }
    let run = RunOptions {
        timeout_ms: Some(2000.0),
        ..Default::default()
    };
    // Twice: a failed or stopped run must leave the session usable.
    let _ = session.run_options(inputs.clone(), &run);
    let _ = session.run_options(inputs, &run);
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let seeds = seeds();
    let Ok(i) = u.choose_index(seeds.len()) else {
        return;
    };
    let seed = &seeds[i];
    let mut json = seed.json.clone();
    let n = u.int_in_range(1..=6u8).unwrap_or(1);
    for _ in 0..n {
        if mutate(&mut json, &mut u).is_err() {
            break;
        }
    }
    run(rezip(seed, &json), &mut u);
});
