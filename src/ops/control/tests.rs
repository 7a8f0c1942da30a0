//! Runs control-family fixtures with inputs other than the exported examples: failing runtime
//! asserts, other dynamic sizes, the other branch of a symbolic predicate.

use crate::archive::pt2::LoadOptions;
use crate::cpu::Tensor;
use crate::ops::OpCtx;
use crate::program::{Arg, BoolArg, FloatArg, Graph, IntArg, Node, Pt2Archive};
use crate::runtime::{RValue, RunState, Session};
use crate::Limits;

fn session(program: &str) -> Session {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ops/control.pt2"
    );
    let archive = Pt2Archive::open(
        "control.pt2",
        std::fs::read(path).expect("control fixture"),
        Limits::default(),
    )
    .expect("archive");
    Session::new(
        archive
            .program(Some(program), &LoadOptions::default())
            .expect("program"),
    )
    .expect("session")
}

fn arange(rows: usize, cols: usize) -> Tensor {
    Tensor::from_vec((0..rows * cols).map(|v| v as f32).collect(), &[rows, cols])
}

fn tensor(v: &RValue) -> &Tensor {
    v.as_tensor().expect("a tensor output")
}

#[test]
fn failed_runtime_assert_names_the_expression() {
    for prog in ["item_assert", "item_assert__core"] {
        let mut s = session(prog);
        for bad in [0i64, 9] {
            let err = s
                .run(vec![
                    RValue::Tensor(arange(5, 4)),
                    RValue::Tensor(Tensor::scalar(bad)),
                ])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("_assert_scalar")
                    && err.contains("Runtime assertion failed for expression"),
                "{prog}: {err}"
            );
        }
        let ok = s
            .run(vec![
                RValue::Tensor(arange(5, 4)),
                RValue::Tensor(Tensor::scalar(2i64)),
            ])
            .unwrap();
        assert_eq!(tensor(&ok[0]).sizes, vec![2, 4]);
        assert_eq!(tensor(&ok[1]).sizes, vec![5, 2]);
    }
}

#[test]
fn symbolic_sizes_follow_python_semantics_at_other_sizes() {
    for prog in ["sym_arith", "sym_arith__core"] {
        let mut s = session(prog);
        for n in [6usize, 7, 12, 13] {
            let outs = s.run(vec![RValue::Tensor(arange(n, 2))]).unwrap();
            let rows: Vec<usize> = outs.iter().map(|o| tensor(o).sizes[0]).collect();
            let ni = n as i64;
            let want = [ni / 2 + ni % 3, ni - 4, ni * 2, ni / 3];
            assert_eq!(
                rows,
                want.iter().map(|&w| w as usize).collect::<Vec<_>>(),
                "{prog} n={n}"
            );
            // e = x[-(n // 3):] holds the last rows.
            let e = tensor(&outs[3]).to_vec::<f32>();
            assert_eq!(e[0], ((n - n / 3) * 2) as f32, "{prog} n={n}");
        }
    }
}

#[test]
fn symbolic_predicate_picks_the_branch_at_run_time() {
    let mut s = session("cond_sym_pred");
    // n = 3 is not > 4: the false branch rolls the columns by one.
    let outs = s.run(vec![RValue::Tensor(arange(3, 3))]).unwrap();
    assert_eq!(
        tensor(&outs[0]).to_vec::<f32>(),
        vec![2., 0., 1., 5., 3., 4., 8., 6., 7.]
    );
    // n = 5 > 4: the true branch flips the rows.
    let outs = s.run(vec![RValue::Tensor(arange(5, 3))]).unwrap();
    assert_eq!(
        tensor(&outs[0]).to_vec::<f32>(),
        vec![12., 13., 14., 9., 10., 11., 6., 7., 8., 3., 4., 5., 0., 1., 2.]
    );
}

/// Run one symbolic op on literal operands, declaring its output of `out` kind.
fn sym(target: &str, args: Vec<Arg>, out: Arg) -> crate::error::Result<RValue> {
    let named = args
        .into_iter()
        .enumerate()
        .map(|(i, a)| (format!("a{i}"), a))
        .collect();
    call(target, named, vec![out]).map(|mut v| v.remove(0))
}

fn call(
    target: &str,
    inputs: Vec<(String, Arg)>,
    outputs: Vec<Arg>,
) -> crate::error::Result<Vec<RValue>> {
    let node = Node {
        name: "n".into(),
        target: target.into(),
        inputs,
        outputs,
        metadata: Default::default(),
    };
    let graph = Graph::default();
    let mut state = RunState::default();
    let kernel = crate::ops::table().cpu_kernel(target).expect("registered");
    let mut ctx = OpCtx {
        node: &node,
        graph: &graph,
        env: &[],
        state: &mut state,
    };
    kernel(&mut ctx)
}

fn int_out() -> Arg {
    Arg::SymInt(IntArg::Sym(0))
}
fn float_out() -> Arg {
    Arg::SymFloat(FloatArg::Sym(0))
}
fn bool_out() -> Arg {
    Arg::SymBool(BoolArg::Sym(0))
}

#[test]
fn symbolic_ops_follow_python() {
    use Arg::{Bool as B, Float as F, Int as I};
    let cases: Vec<(&str, Vec<Arg>, Arg, RValue)> = vec![
        (
            "_operator.floordiv",
            vec![I(-7), I(2)],
            int_out(),
            RValue::Int(-4),
        ),
        (
            "_operator.mod",
            vec![I(-7), I(2)],
            int_out(),
            RValue::Int(1),
        ),
        (
            "_operator.mod",
            vec![I(7), I(-2)],
            int_out(),
            RValue::Int(-1),
        ),
        (
            "_operator.mod",
            vec![F(-7.5), F(2.0)],
            float_out(),
            RValue::Float(0.5),
        ),
        (
            "_operator.truediv",
            vec![I(7), I(2)],
            float_out(),
            RValue::Float(3.5),
        ),
        (
            "_operator.pow",
            vec![I(2), I(10)],
            int_out(),
            RValue::Int(1024),
        ),
        (
            "_operator.pow",
            vec![I(2), I(-1)],
            float_out(),
            RValue::Float(0.5),
        ),
        ("_operator.neg", vec![I(5)], int_out(), RValue::Int(-5)),
        (
            "_operator.add",
            vec![B(true), I(2)],
            int_out(),
            RValue::Int(3),
        ),
        (
            "_operator.eq",
            vec![I(3), F(3.0)],
            bool_out(),
            RValue::Bool(true),
        ),
        (
            "_operator.and_",
            vec![B(true), B(false)],
            bool_out(),
            RValue::Bool(false),
        ),
        ("_operator.or_", vec![I(4), I(1)], int_out(), RValue::Int(5)),
        (
            "torch.sym_not",
            vec![B(true)],
            bool_out(),
            RValue::Bool(false),
        ),
        ("torch.sym_max", vec![I(3), I(7)], int_out(), RValue::Int(7)),
        (
            "torch.sym_min",
            vec![I(3), F(7.5)],
            float_out(),
            RValue::Float(3.0),
        ),
        (
            "torch.sym_ite",
            vec![B(false), I(1), I(2)],
            int_out(),
            RValue::Int(2),
        ),
        ("math.trunc", vec![F(-2.5)], int_out(), RValue::Int(-2)),
        ("torch.sym_int", vec![F(3.9)], int_out(), RValue::Int(3)),
        (
            "torch.sym_float",
            vec![I(3)],
            float_out(),
            RValue::Float(3.0),
        ),
        (
            "torch._sym_sqrt",
            vec![I(16)],
            float_out(),
            RValue::Float(4.0),
        ),
    ];
    for (target, args, out, want) in cases {
        let got =
            sym(target, args.clone(), out).unwrap_or_else(|e| panic!("{target} {args:?}: {e}"));
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "{target} {args:?}");
    }
    for (target, args) in [
        ("_operator.floordiv", vec![I(1), I(0)]),
        ("_operator.mul", vec![I(i64::MAX), I(2)]),
        ("_operator.mod", vec![I(1), I(0)]),
    ] {
        assert!(
            sym(target, args, int_out()).is_err(),
            "{target} should fail"
        );
    }
}

#[test]
fn failed_assert_scalar_carries_the_message() {
    let args = |ok: bool| {
        vec![
            ("self".to_string(), Arg::Bool(ok)),
            ("assert_msg".to_string(), Arg::Str("u0 >= 0 failed".into())),
        ]
    };
    let err = call("aten._assert_scalar.default", args(false), vec![])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("_assert_scalar") && err.contains("u0 >= 0 failed"),
        "{err}"
    );
    assert!(call("aten._assert_scalar.default", args(true), vec![])
        .unwrap()
        .is_empty());
}
