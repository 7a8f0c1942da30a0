//! Tests against tests/fixtures/sym_cases.json, whose expected values come from sympy and
//! torch (tests/fixgen/gen_sym_cases.py), plus guard, error and robustness tests.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use crate::error::Error;

const FIXTURE: &str = include_str!("../../tests/fixtures/sym_cases.json");

fn fixture() -> Value {
    serde_json::from_str(FIXTURE).expect("sym_cases.json parses")
}

fn env_of(v: &Value) -> BTreeMap<String, i64> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, x)| (k.clone(), x.as_i64().unwrap()))
        .collect()
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        v => v.as_f64().unwrap(),
    }
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

/// Check one parsed expression against sympy's value; `what` names the spelling for failures.
fn check_eval(e: &Expr, ev: &Value, what: &str) {
    let env = env_of(&ev["env"]);
    let f = |s: &str| env.get(s).copied();
    let ctx = format!("{what} with {env:?} (parsed as `{e}`)");
    match ev["kind"].as_str().unwrap() {
        "int" => {
            let want = ev["value"].as_i64().unwrap();
            assert_eq!(
                e.eval_int(&f).unwrap_or_else(|err| panic!("{ctx}: {err}")),
                want,
                "{ctx}"
            );
        }
        "rational" => {
            let (p, q) = (
                ev["value"][0].as_f64().unwrap(),
                ev["value"][1].as_f64().unwrap(),
            );
            assert!(
                e.eval_int(&f).is_err(),
                "{ctx}: a non-integer must not eval_int"
            );
            let got = e.eval_f64(&f).unwrap_or_else(|err| panic!("{ctx}: {err}"));
            assert!(close(got, p / q), "{ctx}: got {got}, want {p}/{q}");
        }
        "float" => {
            let want = as_f64(&ev["value"]);
            let got = e.eval_f64(&f).unwrap_or_else(|err| panic!("{ctx}: {err}"));
            assert!(close(got, want), "{ctx}: got {got}, want {want}");
        }
        "bool" => {
            let want = ev["value"].as_bool().unwrap();
            assert_eq!(
                e.eval_bool(&f).unwrap_or_else(|err| panic!("{ctx}: {err}")),
                want,
                "{ctx}"
            );
        }
        "error" => {
            assert!(
                matches!(e.eval_int(&f), Err(Error::Sym(_))),
                "{ctx}: expected an error"
            );
            assert!(e.eval_f64(&f).is_err(), "{ctx}: expected an error");
        }
        k => panic!("unknown kind {k}"),
    }
}

#[test]
fn sympy_cases_all_spellings() {
    let fx = fixture();
    let cases = fx["cases"].as_array().unwrap();
    assert!(cases.len() > 100);
    for c in cases {
        let srepr = c["srepr"].as_str().unwrap();
        let e = parse_srepr(srepr).unwrap_or_else(|err| panic!("srepr {srepr}: {err}"));
        let shown = e.to_string();
        let round =
            parse_infix(&shown).unwrap_or_else(|err| panic!("display `{shown}` of {srepr}: {err}"));
        let mut spellings = vec![("srepr", e), ("display", round)];
        for key in ["str", "py"] {
            if let Some(s) = c[key].as_str() {
                let p = parse_infix(s).unwrap_or_else(|err| panic!("{key} `{s}`: {err}"));
                spellings.push((key, p));
            }
        }
        for (what, e) in &spellings {
            for ev in c["evals"].as_array().unwrap() {
                check_eval(e, ev, &format!("{what} of {srepr}"));
            }
        }
    }
}

#[test]
fn python_dialect_cases() {
    let fx = fixture();
    for c in fx["python_cases"].as_array().unwrap() {
        let src = c["py"].as_str().unwrap();
        let e = parse_infix(src).unwrap_or_else(|err| panic!("`{src}`: {err}"));
        for ev in c["evals"].as_array().unwrap() {
            check_eval(&e, ev, &format!("python `{src}`"));
        }
    }
}

fn export_named(fx: &Value, name: &str) -> Value {
    fx["exports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap()
        .clone()
}

fn ranges_of(ex: &Value) -> BTreeMap<String, RangeConstraint> {
    ex["range_constraints"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let rc = RangeConstraint {
                min: v["min_val"].as_i64().unwrap_or(i64::MIN),
                max: v["max_val"].as_i64(),
            };
            (k.clone(), rc)
        })
        .collect()
}

#[test]
fn real_export_exprs_match_hints() {
    let fx = fixture();
    for ex in fx["exports"].as_array().unwrap() {
        let exprs: Vec<(Expr, Option<i64>)> = ex["exprs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    parse_srepr(x["srepr"].as_str().unwrap()).unwrap(),
                    x["hint"].as_i64(),
                )
            })
            .collect();
        // Bare symbols' hints are the example inputs' sizes; every other hint must follow.
        let env: BTreeMap<String, i64> = exprs
            .iter()
            .filter_map(|(e, h)| Some((e.as_symbol()?.to_string(), (*h)?)))
            .collect();
        for (e, hint) in &exprs {
            let Some(h) = hint else { continue };
            assert_eq!(
                e.eval_int(&|s| env.get(s).copied()).unwrap(),
                *h,
                "{e} in {}",
                ex["name"]
            );
        }
        for key in ex["range_constraints"].as_object().unwrap().keys() {
            parse_infix(key).unwrap_or_else(|err| panic!("range key {key}: {err}"));
        }
    }
    let ex = export_named(&fx, "derived_dims");
    let r = ranges_of(&ex);
    assert_eq!(
        r["s77"],
        RangeConstraint {
            min: 2,
            max: Some(64)
        }
    );
    assert_eq!(r["s6"], RangeConstraint { min: 8, max: None });
    assert_eq!(
        parse_infix("s77 + 1").unwrap().as_linear(),
        Some(("s77".into(), 1, 1))
    );
    assert_eq!(
        parse_infix("2*s77").unwrap().as_linear(),
        Some(("s77".into(), 2, 0))
    );
}

/// Resolve a guard reference against shapes given as the fixture's nested JSON.
fn lookup_in<'a>(shapes: &'a Value) -> impl Fn(&GuardRef) -> Option<i64> + 'a {
    move |r: &GuardRef| {
        let mut v = shapes;
        for k in &r.path {
            v = match k {
                PathKey::Key(s) => v.get(s)?,
                PathKey::Index(i) => v.get(usize::try_from(*i).ok()?)?,
            };
        }
        let shape: Vec<i64> = v
            .as_array()?
            .iter()
            .map(|x| x.as_i64())
            .collect::<Option<_>>()?;
        r.read(&shape)
    }
}

#[test]
fn guards_code_matches_python() {
    let fx = fixture();
    for ex in fx["exports"].as_array().unwrap() {
        let guards: Vec<GuardCode> = ex["guards_code"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| GuardCode::parse(g.as_str().unwrap()).unwrap())
            .collect();
        for chk in ex["guard_checks"].as_array().unwrap() {
            let look = lookup_in(&chk["shapes"]);
            for (g, want) in guards.iter().zip(chk["expect"].as_array().unwrap()) {
                let got = g.holds(&look).unwrap();
                assert_eq!(
                    got,
                    want.as_bool().unwrap(),
                    "{} at {}",
                    g.source,
                    chk["shapes"]
                );
                assert_eq!(g.check(&look).is_ok(), got);
            }
        }
    }
}

#[test]
fn guard_refs() {
    let r = GuardRef::parse("L['xs'][1].size()[0]").unwrap();
    assert_eq!(r.path, vec![PathKey::Key("xs".into()), PathKey::Index(1)]);
    assert_eq!(r.attr, GuardAttr::Size(0));
    assert_eq!(
        (r.input_path(), r.flat_name()),
        ("xs[1]".into(), "xs_1".into())
    );
    let r = GuardRef::parse("L['d']['q'].stride()[-2]").unwrap();
    assert_eq!(
        (r.input_path(), r.flat_name(), r.attr),
        ("d['q']".into(), "d_q".into(), GuardAttr::Stride(-2))
    );
    assert_eq!(r.read(&[2, 3, 4]), Some(4));
    assert_eq!(GuardRef::parse("L['n']").unwrap().attr, GuardAttr::Value);
    for bad in [
        "s0",
        "L",
        "L['x'].size()",
        "L['x'].foo()",
        "L['x'].size()[0] + 1",
        "L[",
        "L['x'][",
    ] {
        assert_eq!(GuardRef::parse(bad), None, "{bad}");
    }
    // Both quote styles and `.size(i)` read as the same reference.
    let a = parse_infix("L[\"x\"].size(0) == 3").unwrap();
    let b = parse_infix("L['x'].size()[0] == 3").unwrap();
    assert_eq!(a, b);
    let g = GuardCode::parse("L['x'].size()[0] == (1 + L['y'].size()[0])").unwrap();
    let err = g
        .check(&|r: &GuardRef| r.read(if r.flat_name() == "x" { &[4, 3] } else { &[4] }))
        .unwrap_err();
    match err {
        Error::Guard {
            input,
            dim,
            value,
            constraint,
        } => {
            assert_eq!((input.as_str(), dim, value), ("x", 0, 4));
            assert!(
                constraint.contains("L['x'].size()[0] == (1 + L['y'].size()[0])"),
                "{constraint}"
            );
        }
        e => panic!("{e}"),
    }
    assert!(matches!(
        g.holds(&|_: &GuardRef| None),
        Err(Error::Input { .. })
    ));
    assert!(GuardCode::parse("s0 == 3").is_err());
}

// ---------------------------------------------------------------------------------------
// check_shapes
// ---------------------------------------------------------------------------------------

fn sym(s: &str) -> DimSpec {
    DimSpec::Sym(parse_infix(s).unwrap())
}

/// The `derived_dims` export: x [s77, 3], y [s77 + 1, 3], z [2*s77, 4], w [1, 3, s6],
/// with its real range_constraints (s77 in [2, 64], s6 >= 8, and the derived keys).
fn derived() -> (Vec<InputShapeSpec>, BTreeMap<String, RangeConstraint>) {
    let st = DimSpec::Static;
    let specs = vec![
        InputShapeSpec {
            name: "x".into(),
            dims: vec![sym("s77"), st(3)],
        },
        InputShapeSpec {
            name: "y".into(),
            dims: vec![
                DimSpec::Sym(
                    parse_srepr("Add(Symbol('s77', positive=True, integer=True), Integer(1))")
                        .unwrap(),
                ),
                st(3),
            ],
        },
        InputShapeSpec {
            name: "z".into(),
            dims: vec![
                DimSpec::Sym(
                    parse_srepr("Mul(Integer(2), Symbol('s77', positive=True, integer=True))")
                        .unwrap(),
                ),
                st(4),
            ],
        },
        InputShapeSpec {
            name: "w".into(),
            dims: vec![st(1), st(3), sym("s6")],
        },
    ];
    (specs, ranges_of(&export_named(&fixture(), "derived_dims")))
}

fn run(x: &[i64], y: &[i64], z: &[i64], w: &[i64]) -> Result<Bindings> {
    let (specs, ranges) = derived();
    check_shapes(&specs, &[("x", x), ("y", y), ("z", z), ("w", w)], &ranges)
}

fn guard_of(r: Result<Bindings>) -> (String, usize, i64, String) {
    match r {
        Err(Error::Guard {
            input,
            dim,
            value,
            constraint,
        }) => (input, dim, value, constraint),
        other => panic!("expected a guard error, got {other:?}"),
    }
}

#[test]
fn shapes_success_returns_bindings() {
    let b = run(&[4, 3], &[5, 3], &[8, 4], &[1, 3, 20]).unwrap();
    assert_eq!(
        b,
        BTreeMap::from([("s6".to_string(), 20), ("s77".to_string(), 4)])
    );
    let b = run(&[64, 3], &[65, 3], &[128, 4], &[1, 3, 8]).unwrap();
    assert_eq!((b["s77"], b["s6"]), (64, 8));
}

#[test]
fn shapes_static_violation() {
    let (input, dim, value, c) = guard_of(run(&[4, 2], &[5, 3], &[8, 4], &[1, 3, 20]));
    assert_eq!(
        (input.as_str(), dim, value, c.as_str()),
        ("x", 1, 2, "expected 3 (static)")
    );
}

#[test]
fn shapes_range_violations() {
    let (input, dim, value, c) = guard_of(run(&[1, 3], &[2, 3], &[2, 4], &[1, 3, 20]));
    assert_eq!((input.as_str(), dim, value), ("x", 0, 1));
    assert!(c.starts_with("s77 must be in [2, 64]"), "{c}");
    let (input, _, value, c) = guard_of(run(&[65, 3], &[66, 3], &[130, 4], &[1, 3, 20]));
    assert_eq!((input.as_str(), value), ("x", 65));
    assert!(c.starts_with("s77 must be in [2, 64]"), "{c}");
    let (input, dim, value, c) = guard_of(run(&[4, 3], &[5, 3], &[8, 4], &[1, 3, 7]));
    assert_eq!((input.as_str(), dim, value), ("w", 2, 7));
    assert!(c.starts_with("s6 must be >= 8"), "{c}");
    // A derived key alone out of range is reported at its own dim.
    let specs = vec![InputShapeSpec {
        name: "a".into(),
        dims: vec![sym("s0"), sym("s0 + 1")],
    }];
    let ranges = BTreeMap::from([(
        "s0 + 1".to_string(),
        RangeConstraint {
            min: 0,
            max: Some(5),
        },
    )]);
    let (input, dim, value, c) = guard_of(check_shapes(&specs, &[("a", &[5, 6])], &ranges));
    assert_eq!((input.as_str(), dim, value), ("a", 1, 6));
    assert_eq!(
        c,
        "s0 + 1 = 6 must be in [0, 5] (s0 = 5 from input 'a' dim 0)"
    );
    // A symbol solved from a derived dim is reported at that dim, with its own value named.
    let specs = vec![InputShapeSpec {
        name: "z".into(),
        dims: vec![sym("2*s0")],
    }];
    let ranges = BTreeMap::from([(
        "s0".to_string(),
        RangeConstraint {
            min: 2,
            max: Some(8),
        },
    )]);
    let (input, dim, value, c) = guard_of(check_shapes(&specs, &[("z", &[18])], &ranges));
    assert_eq!((input.as_str(), dim, value), ("z", 0, 18));
    assert_eq!(c, "s0 = 9 must be in [2, 8] (s0 = 9 from input 'z' dim 0)");
}

#[test]
fn shapes_derived_dims() {
    let (input, dim, value, c) = guard_of(run(&[4, 3], &[6, 3], &[8, 4], &[1, 3, 20]));
    assert_eq!((input.as_str(), dim, value), ("y", 0, 6));
    assert_eq!(c, "must be s77 + 1 = 5 (s77 = 4 from input 'x' dim 0)");
    let (input, _, value, c) = guard_of(run(&[4, 3], &[5, 3], &[6, 4], &[1, 3, 20]));
    assert_eq!((input.as_str(), value), ("z", 6));
    assert_eq!(c, "must be 2*s77 = 8 (s77 = 4 from input 'x' dim 0)");
    // A symbol only a derived dim carries is solved exactly, or refused when no integer fits.
    let specs = vec![InputShapeSpec {
        name: "z".into(),
        dims: vec![sym("2*s0 + 1")],
    }];
    let none = BTreeMap::new();
    assert_eq!(
        check_shapes(&specs, &[("z", &[9])], &none).unwrap()["s0"],
        4
    );
    let (_, _, _, c) = guard_of(check_shapes(&specs, &[("z", &[8])], &none));
    assert!(c.contains("2*s0 + 1") && c.contains("no integer"), "{c}");
    // A dim no plain or linear dim determines is an input error, not a guess.
    let specs = vec![InputShapeSpec {
        name: "p".into(),
        dims: vec![sym("(s0//2)")],
    }];
    assert!(matches!(
        check_shapes(&specs, &[("p", &[3])], &none),
        Err(Error::Input { .. })
    ));
}

#[test]
fn shapes_equality_between_inputs() {
    let specs = vec![
        InputShapeSpec {
            name: "x".into(),
            dims: vec![sym("s0"), DimSpec::Static(3)],
        },
        InputShapeSpec {
            name: "y".into(),
            dims: vec![DimSpec::Static(2), sym("s0")],
        },
    ];
    let none = BTreeMap::new();
    let b = check_shapes(&specs, &[("x", &[4, 3]), ("y", &[2, 4])], &none).unwrap();
    assert_eq!(b["s0"], 4);
    let (input, dim, value, c) = guard_of(check_shapes(
        &specs,
        &[("x", &[4, 3]), ("y", &[2, 5])],
        &none,
    ));
    assert_eq!((input.as_str(), dim, value), ("y", 1, 5));
    assert_eq!(c, "must equal input 'x' dim 0 (s0 = 4)");
}

#[test]
fn shapes_rank_missing_extra() {
    let (specs, ranges) = derived();
    let r = check_shapes(
        &specs,
        &[
            ("x", &[4]),
            ("y", &[5, 3]),
            ("z", &[8, 4]),
            ("w", &[1, 3, 20]),
        ],
        &ranges,
    );
    assert!(
        matches!(&r, Err(Error::Input { input, msg }) if input == "x" && msg.contains("rank 2")),
        "{r:?}"
    );
    let r = check_shapes(&specs, &[("x", &[4, 3])], &ranges);
    assert!(
        matches!(&r, Err(Error::Input { input, msg }) if input == "y" && msg.contains("missing")),
        "{r:?}"
    );
    let r = check_shapes(&specs[..1], &[("x", &[4, 3]), ("q", &[1])], &ranges);
    assert!(
        matches!(&r, Err(Error::Input { input, .. }) if input == "q"),
        "{r:?}"
    );
}

#[test]
fn shapes_agree_with_python_guards() {
    // Where torch's own guards hold, check_shapes must accept; where one fails, refuse.
    let fx = fixture();
    let ex = export_named(&fx, "derived_dims");
    let (specs, ranges) = derived();
    for chk in ex["guard_checks"].as_array().unwrap() {
        let shapes: Vec<(String, Vec<i64>)> = chk["shapes"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_i64().unwrap())
                        .collect(),
                )
            })
            .collect();
        let actual: Vec<(&str, &[i64])> = shapes
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        let all = chk["expect"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b.as_bool().unwrap());
        assert_eq!(
            check_shapes(&specs, &actual, &ranges).is_ok(),
            all,
            "{}",
            chk["shapes"]
        );
    }
}

// ---------------------------------------------------------------------------------------
// parsing, display, errors
// ---------------------------------------------------------------------------------------

#[test]
fn display_reads_like_sympy() {
    let s = |x: &str| parse_srepr(x).unwrap().to_string();
    let s0 = "Symbol('s0', integer=True, positive=True)";
    assert_eq!(s(&format!("Add({s0}, Integer(1))")), "s0 + 1");
    assert_eq!(s(&format!("Mul(Integer(2), {s0})")), "2*s0");
    assert_eq!(s(&format!("FloorDiv({s0}, Integer(2))")), "(s0//2)");
    assert_eq!(
        s(&format!("Add(Integer(3), Mul(Integer(-1), {s0}))")),
        "3 - s0"
    );
    assert_eq!(s(&format!("Mul(Rational(1, 2), {s0})")), "s0/2");
    assert_eq!(s(&format!("Pow({s0}, Integer(-1))")), "1/s0");
    assert_eq!(s(&format!("Max(Integer(1), {s0})")), "Max(1, s0)");
    assert_eq!(
        s(&format!(
            "Add(FloorDiv(Add({s0}, Integer(-3)), Integer(2)), Integer(1))"
        )),
        "((s0 - 3)//2) + 1"
    );
    assert_eq!(s(&format!("StrictLessThan({s0}, Integer(5))")), "s0 < 5");
    assert_eq!(s(&format!("Equality({s0}, Integer(5))")), "Eq(s0, 5)");
    assert_eq!(parse_infix("-s0 + 5").unwrap().to_string(), "5 - s0");
    assert_eq!(parse_infix("-s0 - 1").unwrap().to_string(), "-s0 - 1");
}

#[test]
fn linear_forms() {
    let lin = |s: &str| parse_infix(s).unwrap().as_linear();
    assert_eq!(lin("s0"), Some(("s0".into(), 1, 0)));
    assert_eq!(lin("2*s0 + 1"), Some(("s0".into(), 2, 1)));
    assert_eq!(lin("-s0 + 5"), Some(("s0".into(), -1, 5)));
    assert_eq!(lin("3*(s0 - 1)"), Some(("s0".into(), 3, -3)));
    for s in ["5", "s0*s1", "s0 + s1", "s0//2", "s0/2", "s0**2", "s0 - s0"] {
        assert_eq!(lin(s), None, "{s}");
    }
    assert_eq!(parse_infix("(s0)").unwrap().as_symbol(), Some("s0"));
    let e = parse_infix("Max(s1, s0 + s1)").unwrap();
    assert_eq!(
        e.free_symbols().into_iter().collect::<Vec<_>>(),
        vec!["s0", "s1"]
    );
    let sub = e.substitute(&|s| (s == "s1").then_some(Expr::Int(2)));
    assert_eq!(sub.eval_int(&|_| Some(5)).unwrap(), 7);
}

#[test]
fn errors_name_the_problem() {
    let err = |r: Result<Expr>| match r {
        Err(Error::Sym(m)) => m,
        other => panic!("expected Error::Sym, got {other:?}"),
    };
    assert!(err(parse_srepr("Frobnicate(Integer(1))")).contains("Frobnicate"));
    assert!(err(parse_infix("frob(s0)")).contains("frob"));
    assert!(err(parse_srepr("Integer(99999999999999999999)")).contains("64 bits"));
    assert!(err(parse_srepr("FloorDiv(Integer(1))")).contains("FloorDiv takes 2"));
    assert!(err(parse_srepr("Add(Integer(1)")).contains("end of expression"));
    assert!(parse_srepr("Rational(1, 0)").is_err());
    assert!(parse_infix("s0 +").is_err());
    assert!(parse_infix("s0 = 1").is_err());
    let none = |_: &str| None;
    let max = i64::MAX;
    for s in [
        format!("Mul(Integer({max}), Integer(2))"),
        format!("Add(Integer({max}), Integer(1))"),
        "PowByNatural(Integer(2), Integer(64))".to_string(),
        "FloorDiv(Integer(-9223372036854775808), Integer(-1))".to_string(),
        "Abs(Integer(-9223372036854775808))".to_string(),
        "LShift(Integer(1), Integer(70))".to_string(),
        "FloorDiv(Integer(1), Integer(0))".to_string(),
        "Pow(Integer(0), Integer(-1))".to_string(),
    ] {
        let e = parse_srepr(&s).unwrap();
        assert!(matches!(e.eval_int(&none), Err(Error::Sym(_))), "{s}");
    }
    let e = parse_srepr("Symbol('s9', integer=True)").unwrap();
    assert!(err(e.eval_int(&none).map(Expr::Int)).contains("s9"));
    assert_eq!(
        parse_srepr("Integer(-9223372036854775808)").unwrap(),
        Expr::Int(i64::MIN)
    );
    assert_eq!(
        parse_srepr("-oo").unwrap(),
        Expr::Infinity { negative: true }
    );
    assert_eq!(parse_srepr("Half").unwrap().eval_f64(&none).unwrap(), 0.5);
    // Hand-built nodes with a wrong argument count fail to evaluate and still print.
    for op in [
        Op::Add,
        Op::Mul,
        Op::Pow,
        Op::Identity,
        Op::Where,
        Op::IsNonOverlappingAndDense,
        Op::Not,
    ] {
        let bad = Expr::Apply(op, vec![Expr::Int(-1); if op == Op::Pow { 1 } else { 0 }]);
        assert!(bad.eval_int(&none).is_err(), "{op:?}");
        let _ = (bad.to_string(), bad.as_linear(), bad.as_symbol());
        let neg = Expr::Apply(Op::Add, vec![Expr::Int(1), bad]);
        let _ = neg.to_string();
    }
}

/// A small deterministic generator so the fuzz tests need no extra crate.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Parse `s` both ways; whatever parses must also evaluate and print without panicking.
fn exercise(s: &str) {
    for e in [parse_srepr(s), parse_infix(s)].into_iter().flatten() {
        let env = |name: &str| Some(name.len() as i64 - 3);
        let _ = (e.eval_int(&env), e.eval_f64(&env), e.eval_bool(&env));
        let _ = (e.to_string(), e.as_linear(), e.free_symbols());
        let _ = GuardCode::parse(s);
    }
}

#[test]
fn fuzz_never_panics() {
    let fx = fixture();
    let mut samples: Vec<String> = Vec::new();
    for c in fx["cases"].as_array().unwrap() {
        for k in ["srepr", "str", "py"] {
            if let Some(s) = c[k].as_str() {
                samples.push(s.to_string());
            }
        }
    }
    for ex in fx["exports"].as_array().unwrap() {
        samples.extend(
            ex["guards_code"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g.as_str().unwrap().to_string()),
        );
    }
    // Every truncation of every real string.
    for s in &samples {
        for (i, _) in s.char_indices() {
            exercise(&s[..i]);
            exercise(&s[i..]);
        }
    }
    // Random strings over the characters these grammars use, and random splices.
    const ALPHA: &[u8] = b"()[],.=+-*/%<>&|^~'\" 0123456789sLxAddMulIntegerSymbolFloorDiv_oo";
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for _ in 0..8_000 {
        let len = (rng.next() % 40) as usize;
        let s: String = (0..len)
            .map(|_| ALPHA[(rng.next() % ALPHA.len() as u64) as usize] as char)
            .collect();
        exercise(&s);
        let a = &samples[(rng.next() % samples.len() as u64) as usize];
        let b = &samples[(rng.next() % samples.len() as u64) as usize];
        let (i, j) = (
            (rng.next() as usize) % (a.len() + 1),
            (rng.next() as usize) % (b.len() + 1),
        );
        if a.is_char_boundary(i) && b.is_char_boundary(j) {
            exercise(&format!("{}{}", &a[..i], &b[j..]));
        }
    }
    // Arbitrary bytes (lossily decoded) as well.
    for _ in 0..1_000 {
        let bytes: Vec<u8> = (0..(rng.next() % 64)).map(|_| rng.next() as u8).collect();
        exercise(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn deep_and_long_inputs_are_refused_not_overflowed() {
    let n = 100_000;
    let deep = [
        format!(
            "{}Integer(1){}",
            "Add(Integer(1), ".repeat(n),
            ")".repeat(n)
        ),
        format!("{}1{}", "(".repeat(n), ")".repeat(n)),
        format!("{}1", "-".repeat(n)),
        format!("{}1", "not ".repeat(n)),
        format!("{}2", "2**".repeat(n)),
        format!("{}s0", "s0//".repeat(n)),
        format!("{}s0", "s0 < ".repeat(n)),
        format!("{}1{}", "Max(".repeat(n), ")".repeat(n)),
        format!("L{}", "[0]".repeat(n)),
    ];
    for s in &deep {
        assert!(
            parse_srepr(s).is_err() || parse_infix(s).is_err(),
            "{}",
            &s[..40]
        );
        exercise(s);
    }
    assert!(parse_infix(&"1+".repeat(MAX_LEN)).is_err());
    // Flat but long sums are fine: n-ary nodes do not deepen the tree.
    let wide = vec!["s0"; 10_000].join(" + ");
    assert_eq!(
        parse_infix(&wide).unwrap().eval_int(&|_| Some(3)).unwrap(),
        30_000
    );
    let nested_ok = format!("{}s0{}", "Max(1, ".repeat(100), ")".repeat(100));
    assert_eq!(
        parse_infix(&nested_ok)
            .unwrap()
            .eval_int(&|_| Some(7))
            .unwrap(),
        7
    );
}
