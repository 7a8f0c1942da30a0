//! Loads every committed fixture and checks what pt2web reads against the numbers torch
//! wrote into `NAME.meta.json` (tests/fixgen/gen_fixtures.py) and the state tensors torch
//! wrote into `NAME.state.safetensors`. Nothing here is produced by pt2web itself.

mod common;

use common::*;
use pt2web::archive::pt2::LoadOptions;
use pt2web::info::program_info;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn every_fixture_matches_torch_metadata() {
    let mut checked = 0;
    for (stem, meta) in metas() {
        let a = open(&meta);
        let want_programs: BTreeSet<String> = meta["programs"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            a.program_names().iter().cloned().collect::<BTreeSet<_>>(),
            want_programs,
            "{stem}: program names"
        );
        for (pname, pm) in meta["programs"].as_object().unwrap() {
            let file = format!("{stem}/{pname}");
            let p = a
                .program(Some(pname), &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            check_state(&file, &p, pm);
            check_info(&file, &program_info(&p), pm);
            // torch's FX graph has getitem nodes that the serialized graph folds into outputs.
            let mut want_ops: BTreeMap<String, u64> =
                serde_json::from_value(pm["op_counts"].clone()).unwrap();
            want_ops.remove("_operator.getitem");
            assert_eq!(top_level_ops(&p), want_ops, "{file}: op histogram");
            checked += 1;
        }
        // extra files: names, sizes and (where torch recorded it) content
        let extra = a.extra_files().unwrap();
        let want = meta["extra_files"].as_object().unwrap();
        assert_eq!(
            extra.keys().cloned().collect::<BTreeSet<_>>(),
            want.keys().cloned().collect(),
            "{stem}: extra files"
        );
        for (k, w) in want {
            assert_eq!(
                extra[k].len() as u64,
                w["nbytes"].as_u64().unwrap(),
                "{stem}: extra file {k} size"
            );
            if let Some(c) = w.get("content").and_then(Value::as_str) {
                assert_eq!(
                    String::from_utf8_lossy(&extra[k]),
                    c,
                    "{stem}: extra file {k}"
                );
            }
        }
    }
    assert!(checked >= 10);
}

/// Every state tensor, element for element, against the values torch saved separately.
#[test]
fn state_values_are_bit_exact() {
    let mut compared = 0;
    for (stem, meta) in metas() {
        let a = open(&meta);
        for (pname, pm) in meta["programs"].as_object().unwrap() {
            let Some(state_file) = pm.get("state").and_then(Value::as_str) else {
                continue;
            };
            let bytes = std::fs::read(fixtures().join(state_file)).unwrap();
            let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
            let p = a.program(Some(pname), &LoadOptions::default()).unwrap();
            for (fqn, e) in &p.state {
                let want = st
                    .tensor(fqn)
                    .unwrap_or_else(|_| panic!("{stem}: {fqn} missing from {state_file}"));
                assert_eq!(
                    e.tensor.contiguous_bytes(),
                    want.data(),
                    "{stem}/{pname}: values of {fqn}"
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 20, "compared only {compared} tensors");
}
