//! Bad calls: a missing, extra or misnamed input, a wrong dtype, a wrong rank, a violated
//! static dim, range constraint or equality guard. Each is a typed error that names the input
//! (and the dimension), and the same session then runs a good call and still matches PyTorch.

mod common;

use common::*;
use pt2web::cpu::Tensor;
use pt2web::error::Error;
use pt2web::runtime::{order_named_inputs, RValue, Session};
use pt2web::DType;
use std::collections::BTreeMap;

/// A session on a fixture, its torch-made example inputs and expected outputs.
fn fixture(stem: &str) -> (Session, Vec<Tensor>, Vec<Tensor>) {
    let (program, ins, outs) = first_io_case(stem);
    (Session::new(program).unwrap(), ins, outs)
}

fn tensors(v: &[Tensor]) -> Vec<RValue> {
    v.iter().cloned().map(RValue::Tensor).collect()
}

/// The good call still gives torch's answer.
fn good_call_works(s: &mut Session, ins: &[Tensor], want: &[Tensor], after: &str) {
    let got = s
        .run(tensors(ins))
        .unwrap_or_else(|e| panic!("good call after {after}: {e}"));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let (max, _) = metrics(g.as_tensor().unwrap(), w);
        assert!(max < 1e-5, "after {after}: max abs error {max}");
    }
}

fn expect_input(e: Error, input: &str, words: &[&str]) {
    let msg = e.to_string();
    assert_eq!(e.code(), "INPUT", "{msg}");
    match &e {
        Error::Input { input: i, .. } => assert_eq!(i, input, "{msg}"),
        other => panic!("expected Error::Input, got {other:?}"),
    }
    for w in words {
        assert!(msg.contains(w), "'{msg}' should mention '{w}'");
    }
}

fn expect_guard(e: Error, input: &str, dim: usize, value: i64, words: &[&str]) {
    let msg = e.to_string();
    assert_eq!(e.code(), "GUARD", "{msg}");
    match &e {
        Error::Guard {
            input: i,
            dim: d,
            value: v,
            ..
        } => assert_eq!((i.as_str(), *d, *v), (input, dim, value), "{msg}"),
        other => panic!("expected Error::Guard, got {other:?}"),
    }
    for w in words {
        assert!(msg.contains(w), "'{msg}' should mention '{w}'");
    }
}

#[test]
fn positional_calls_with_the_wrong_count_dtype_or_rank() {
    let (mut s, ins, want) = fixture("pytree_io");
    // Missing: the first input not given is named.
    let e = s.run(tensors(&ins[..3])).unwrap_err();
    expect_input(e, "lst_1", &["11 user inputs", "got 3"]);
    good_call_works(&mut s, &ins, &want, "a missing input");
    // Extra.
    let mut extra = ins.clone();
    extra.push(Tensor::from_vec(vec![1f32], &[1]));
    let e = s.run(tensors(&extra)).unwrap_err();
    expect_input(e, "#11", &["11 user inputs", "got 12"]);
    good_call_works(&mut s, &ins, &want, "an extra input");
    // Wrong dtype (f64 for an f32 input).
    let mut wrong = ins.clone();
    wrong[4] = wrong[4].to_dtype(DType::F64).unwrap();
    let e = s.run(tensors(&wrong)).unwrap_err();
    expect_input(e, "tup_0", &["float32", "float64"]);
    good_call_works(&mut s, &ins, &want, "a wrong dtype");
    // Wrong rank.
    let mut wrong = ins.clone();
    wrong[0] = Tensor::from_vec(vec![0f32; 8], &[2, 2, 2]);
    let e = s.run(tensors(&wrong)).unwrap_err();
    expect_input(e, "d_a", &["rank 2", "[2, 2, 2]"]);
    good_call_works(&mut s, &ins, &want, "a wrong rank");
    // Not a tensor at all.
    let mut wrong = tensors(&ins);
    wrong[10] = RValue::Float(2.0);
    let e = s.run(wrong).unwrap_err();
    expect_input(e, "scale", &["expected a tensor"]);
    good_call_works(&mut s, &ins, &want, "a float for a tensor");
}

#[test]
fn named_calls_with_a_missing_or_misnamed_input() {
    let (mut s, ins, want) = fixture("pytree_io");
    let names: Vec<String> = s
        .program
        .user_inputs()
        .iter()
        .map(|u| u.name.clone())
        .collect();
    let named = |skip: Option<&str>, rename: Option<(&str, &str)>| {
        let mut m = BTreeMap::new();
        for (n, t) in names.iter().zip(&ins) {
            if Some(n.as_str()) == skip {
                continue;
            }
            let key = match rename {
                Some((from, to)) if from == n => to.to_string(),
                _ => n.clone(),
            };
            m.insert(key, RValue::Tensor(t.clone()));
        }
        m
    };
    let e = order_named_inputs(&s.program, named(Some("p_y"), None)).unwrap_err();
    expect_input(e, "p_y", &["missing", "d_a, d_b"]);
    let e = order_named_inputs(&s.program, named(None, Some(("pair_a", "pair_c")))).unwrap_err();
    expect_input(e, "pair_c", &["not an input", "pair_a"]);
    let mut extra = named(None, None);
    extra.insert("bias".into(), RValue::Tensor(Tensor::scalar(1f32)));
    let e = order_named_inputs(&s.program, extra).unwrap_err();
    expect_input(e, "bias", &["not an input"]);
    // The full set, by name, is put into pytree order and runs.
    let ordered = order_named_inputs(&s.program, named(None, None)).unwrap();
    let ordered: Vec<Tensor> = ordered
        .iter()
        .map(|v| v.as_tensor().unwrap().clone())
        .collect();
    good_call_works(&mut s, &ordered, &want, "misnamed inputs");
}

#[test]
fn guard_violations_name_the_input_dim_value_and_constraint() {
    // Static dim: x is [s77, 16].
    let (mut s, ins, want) = fixture("dyn_batch");
    let e = s
        .run(tensors(&[Tensor::from_vec(vec![0f32; 4 * 15], &[4, 15])]))
        .unwrap_err();
    expect_guard(e, "x", 1, 15, &["16"]);
    good_call_works(&mut s, &ins, &want, "a static-dim violation");
    // Range constraint: batch in [1, 64].
    let e = s
        .run(tensors(&[Tensor::from_vec(vec![0f32; 65 * 16], &[65, 16])]))
        .unwrap_err();
    expect_guard(e, "x", 0, 65, &["64"]);
    good_call_works(&mut s, &ins, &want, "a range violation");
    let e = s
        .run(tensors(&[Tensor::from_vec(Vec::<f32>::new(), &[0, 16])]))
        .unwrap_err();
    expect_guard(e, "x", 0, 0, &["1"]);
    good_call_works(&mut s, &ins, &want, "an empty batch");

    // Derived dim: y has x's size + 1.
    let (mut s, ins, want) = fixture("dyn_derived_plus1");
    let e = s
        .run(tensors(&[
            Tensor::from_vec(vec![0f32; 5], &[5]),
            Tensor::from_vec(vec![0f32; 5], &[5]),
        ]))
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("'y'") && msg.contains('5'), "{msg}");
    good_call_works(&mut s, &ins, &want, "a derived-dim violation");

    // Equality between inputs: x and y share both dims.
    let (mut s, ins, want) = fixture("dyn_shared");
    let e = s
        .run(tensors(&[
            Tensor::from_vec(vec![0f32; 15], &[3, 5]),
            Tensor::from_vec(vec![0f32; 18], &[3, 6]),
        ]))
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("'y'") && msg.contains('6'), "{msg}");
    good_call_works(&mut s, &ins, &want, "an equality violation");
}

/// The `while_input_bound` op case (tests/fixgen/ops/control.py: a loop of `n` iterations,
/// `n` an input) loaded under `limits`, with torch's inputs and outputs.
fn loop_case(limits: pt2web::Limits) -> (Session, Vec<Tensor>, Vec<Tensor>) {
    use pt2web::archive::pt2::LoadOptions;
    let dir = fixtures().join("ops");
    let archive = pt2web::program::Pt2Archive::open(
        "control.pt2",
        std::fs::read(dir.join("control.pt2")).unwrap(),
        limits,
    )
    .unwrap();
    let opts = LoadOptions {
        limits,
        ..Default::default()
    };
    let program = archive.program(Some("while_input_bound"), &opts).unwrap();
    let io_bytes = std::fs::read(dir.join("control.io.safetensors")).unwrap();
    let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
    let get = |k: String| to_tensor(&io.tensor(&k).unwrap());
    let ins = (0..2)
        .map(|i| get(format!("while_input_bound/input_{i}")))
        .collect();
    let outs = (0..2)
        .map(|i| get(format!("while_input_bound/output_{i}")))
        .collect();
    (Session::new(program).unwrap(), ins, outs)
}

/// A loop that would run (nearly) forever ends with a typed error: the loop limit
/// (`Limits::max_loop_iterations`), a timeout or a cancel token (`RunOptions`), each naming
/// the node; and the same session then runs a good call and still matches PyTorch.
#[test]
fn runaway_loops_stop_at_the_limit_a_timeout_or_a_cancel() {
    use pt2web::runtime::{CancelToken, RunOptions};
    let limits = pt2web::Limits {
        max_loop_iterations: 1000,
        ..Default::default()
    };
    let (mut s, ins, want) = loop_case(limits);
    let huge = |x: &Tensor| {
        vec![
            RValue::Tensor(Tensor::scalar(i64::MAX)),
            RValue::Tensor(x.clone()),
        ]
    };
    let e = s.run(huge(&ins[1])).unwrap_err();
    assert_eq!(e.code(), "LIMIT", "{e}");
    let msg = e.to_string();
    assert!(msg.contains("while_loop") && msg.contains("1000"), "{msg}");
    good_call_works(&mut s, &ins, &want, "the loop limit");

    // The default limit (10 M iterations) is far away: the timeout stops it first.
    let (mut s, ins, want) = loop_case(pt2web::Limits::default());
    let t = std::time::Instant::now();
    let timeout = RunOptions {
        timeout_ms: Some(100.0),
        ..Default::default()
    };
    let e = s.run_options(huge(&ins[1]), &timeout).unwrap_err();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(e.code(), "CANCELLED", "{e}");
    assert!(e.to_string().contains("timed out after 100 ms"), "{e}");
    assert!(secs < 5.0, "the timeout took {secs} s to stop the run");
    good_call_works(&mut s, &ins, &want, "a timeout");
    // A run that finishes in time is not stopped.
    let got = s.run_options(tensors(&ins), &timeout).unwrap();
    assert_eq!(got.len(), want.len());

    // A cancel token set from another thread stops the run in progress.
    let token = CancelToken::new();
    let cancel = RunOptions {
        cancel: Some(token.clone()),
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        token.cancel();
    });
    let e = s.run_options(huge(&ins[1]), &cancel).unwrap_err();
    stopper.join().unwrap();
    assert_eq!(e.code(), "CANCELLED", "{e}");
    assert!(e.to_string().contains("(cancelled)"), "{e}");
    assert!(t.elapsed().as_secs_f64() < 5.0);
    good_call_works(&mut s, &ins, &want, "a cancel");
    // The token stays cancelled: a run given it stops before its first node.
    let e = s.run_options(tensors(&ins), &cancel).unwrap_err();
    assert_eq!(e.code(), "CANCELLED", "{e}");
}

/// The hostile sizes of `hostile_alloc` (see tests/fixgen/gen_fixtures.py), each a LIMIT
/// error naming the node and op before anything is allocated (the process would abort on
/// a failed 16 GiB allocation otherwise), under the default limits; the session then runs
/// torch's call and matches it.
#[test]
fn huge_allocations_are_refused_before_anything_is_allocated() {
    let (mut s, ins, want) = fixture("hostile_alloc");
    let with = |i: usize, t: Tensor| {
        let mut v = ins.clone();
        v[i] = t;
        tensors(&v)
    };
    let refused = |s: &mut Session, call: Vec<RValue>, words: &[&str]| {
        let e = s.run(call).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.code(), "LIMIT", "{msg}");
        for w in words {
            assert!(msg.contains(w), "'{msg}' should mention '{w}'");
        }
    };
    // zeros(65536, 65536): 16 GiB of float32, refused by the Plan's meta pass.
    let x = Tensor::zeros(DType::F32, &[65536, 3]).unwrap();
    refused(
        &mut s,
        with(0, x),
        &[
            "node 'zeros'",
            "aten.zeros",
            "17179869184",
            "max_tensor_bytes",
        ],
    );
    good_call_works(&mut s, &ins, &want, "zeros(65536, 65536)");
    // expand(2^20, 2^12).contiguous(): a view of 4 MiB made 16 GiB by the copy.
    let y = Tensor::zeros(DType::F32, &[1 << 20, 1]).unwrap();
    refused(
        &mut s,
        with(1, y),
        &["node 'contiguous'", "17179869184", "max_tensor_bytes"],
    );
    good_call_works(&mut s, &ins, &want, "expand().contiguous()");
    // repeat_interleave with counts from tensor data: refused by the kernel once it has
    // summed them, before building anything.
    // 2^31 float32 elements: within the element limit, 8 GiB.
    let r = Tensor::from_vec(vec![1i64 << 31, 0, 0], &[3]);
    refused(
        &mut s,
        with(3, r),
        &["repeat_interleave", "8589934592", "max_tensor_bytes"],
    );
    good_call_works(&mut s, &ins, &want, "repeat_interleave");
}

/// `Limits::max_live_bytes` bounds the peak of a run (the Plan's estimate) before it starts.
#[test]
fn the_live_byte_budget_is_checked_before_a_run() {
    let (program, ins, want) = first_io_case("hostile_alloc");
    // The example call's peak is about 1 MiB (its zeros(4, 65536)).
    let limits = pt2web::Limits {
        max_live_bytes: 2 << 20,
        ..program.limits
    };
    let mut s = Session::new(pt2web::program::Program { limits, ..program }).unwrap();
    good_call_works(&mut s, &ins, &want, "nothing");
    // zeros(16, 65536) is 4 MiB: under the tensor limit, over the live one.
    let mut big = ins.clone();
    big[0] = Tensor::zeros(DType::F32, &[16, 3]).unwrap();
    let e = s.run(tensors(&big)).unwrap_err();
    assert_eq!(e.code(), "LIMIT", "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("max_live_bytes") && msg.contains("2097152"),
        "{msg}"
    );
    good_call_works(&mut s, &ins, &want, "the live budget");
}
