use super::*;

#[test]
fn unknown_argument_kind_is_named() {
    let j = br#"{"as_frobnicator": 1}"#;
    let e = serde_json::from_slice::<Argument>(j)
        .map_err(|e| json_error("m.json", e))
        .unwrap_err();
    let s = e.to_string();
    assert!(s.contains("as_frobnicator") && s.contains("m.json"), "{s}");
}

#[test]
fn floats_accept_torch_spellings() {
    let a: Argument = serde_json::from_str(r#"{"as_float": "-Infinity"}"#).unwrap();
    assert_eq!(a, Argument::AsFloat(JsonF64(f64::NEG_INFINITY)));
    let a: Argument = serde_json::from_str(r#"{"as_floats": [1.5, "NaN"]}"#).unwrap();
    match a {
        Argument::AsFloats(v) => assert!(v[1].0.is_nan() && v[0].0 == 1.5),
        _ => panic!(),
    }
    // and they serialize back the same way
    assert_eq!(
        serde_json::to_string(&JsonF64(f64::INFINITY)).unwrap(),
        "\"Infinity\""
    );
}

#[test]
fn unknown_major_version_is_a_version_error() {
    let j = br#"{"schema_version": {"major": 9, "minor": 0}}"#;
    let e = parse_exported_program("models/model.json", j, None).unwrap_err();
    assert!(matches!(e, Error::Version { .. }), "{e}");
    assert!(e.to_string().contains("9.0") && e.to_string().contains("models/model.json"));
}

#[test]
fn opset_checks() {
    let mut found = BTreeMap::new();
    found.insert("aten".to_string(), 10);
    assert!(check_opsets("f", &found, None).is_ok());
    let mut exp = BTreeMap::new();
    exp.insert("aten".to_string(), 9);
    let e = check_opsets("f", &found, Some(&exp)).unwrap_err();
    assert!(e.to_string().contains("opset 'aten'"), "{e}");
    found.insert("aten".to_string(), 99);
    assert!(check_opsets("f", &found, None).is_err());
}

#[test]
fn range_bounds_beyond_i64_are_unbounded() {
    let r: RangeConstraint =
        serde_json::from_str(r#"{"min_val": 2, "max_val": 99999999999999999999999}"#).unwrap();
    assert_eq!(
        r,
        RangeConstraint {
            min_val: Some(2),
            max_val: None
        }
    );
}
