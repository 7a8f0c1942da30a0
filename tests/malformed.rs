//! Malformed archives derived from a real fixture: each must give a typed error that names
//! the problem, never a panic, and loading a good archive afterwards still works.

use pt2web::archive::pt2::LoadOptions;
use pt2web::program::Pt2Archive;
use pt2web::{Error, Limits};
use std::io::{Cursor, Read, Write};
use std::path::Path;
use zip::write::SimpleFileOptions;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// All entries of a zip, in order.
fn entries(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut z = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    (0..z.len())
        .map(|i| {
            let mut f = z.by_index(i).unwrap();
            let mut v = Vec::new();
            f.read_to_end(&mut v).unwrap();
            (f.name().map(|n| n.to_string()).unwrap_or_default(), v)
        })
        .collect()
}

fn rezip(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (n, d) in entries {
        w.start_file(
            n.as_str(),
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored),
        )
        .unwrap();
        w.write_all(d).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// The fixture with one entry (matched by suffix) transformed.
fn with_entry(name: &str, suffix: &str, f: impl Fn(Vec<u8>) -> Vec<u8>) -> Vec<u8> {
    let mut es = entries(&fixture(name));
    let e = es
        .iter_mut()
        .find(|(n, _)| n.ends_with(suffix))
        .unwrap_or_else(|| panic!("no entry *{suffix}"));
    e.1 = f(std::mem::take(&mut e.1));
    rezip(&es)
}

fn with_json(name: &str, suffix: &str, f: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    with_entry(name, suffix, |b| {
        let mut v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    })
}

fn load(bytes: Vec<u8>) -> Result<(), Error> {
    load_with(bytes, Limits::default())
}

fn load_with(bytes: Vec<u8>, limits: Limits) -> Result<(), Error> {
    let a = Pt2Archive::open("bad.pt2", bytes, limits)?;
    let opts = LoadOptions {
        limits,
        ..Default::default()
    };
    for n in a.program_names().to_vec() {
        a.program(Some(&n), &opts)?;
    }
    a.extra_files()?;
    Ok(())
}

fn good_still_loads() {
    load(fixture("tied.pt2")).expect("a good archive loads after a bad one");
}

#[test]
fn truncated_archives() {
    let b = fixture("convnet_core.pt2");
    for cut in (0..b.len()).step_by(b.len() / 97 + 1) {
        assert!(
            load(b[..cut].to_vec()).is_err(),
            "truncated at {cut} loaded"
        );
    }
    good_still_loads();
}

#[test]
fn corrupted_bytes_never_panic() {
    let b = fixture("dtypes.pt2");
    let mut state = 0x1234_5678_9abc_def0u64;
    for _ in 0..400 {
        let mut m = b.clone();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let i = (state as usize) % m.len();
            m[i] = (state >> 32) as u8;
        }
        let _ = load(m);
    }
    good_still_loads();
}

#[test]
fn wrong_offsets_and_strides() {
    let b = with_json("tied.pt2", "model_weights_config.json", |v| {
        let cfg = v["config"].as_object_mut().unwrap();
        let (_, e) = cfg.iter_mut().next().unwrap();
        e["tensor_meta"]["storage_offset"] = serde_json::json!({"as_int": 1_000_000});
    });
    let e = load(b).unwrap_err();
    assert!(matches!(e, Error::Tensor { .. }), "{e}");
    assert!(e.to_string().contains("storage has"), "{e}");

    let b = with_json("tied.pt2", "model_weights_config.json", |v| {
        let cfg = v["config"].as_object_mut().unwrap();
        let (_, e) = cfg.iter_mut().next().unwrap();
        e["tensor_meta"]["strides"][0] = serde_json::json!({"as_int": 99});
    });
    assert!(matches!(load(b).unwrap_err(), Error::Tensor { .. }));
    good_still_loads();
}

#[test]
fn huge_declared_sizes() {
    // A size far beyond the bytes present.
    let b = with_json("tied.pt2", "model_weights_config.json", |v| {
        let cfg = v["config"].as_object_mut().unwrap();
        let (_, e) = cfg.iter_mut().next().unwrap();
        e["tensor_meta"]["sizes"][0] = serde_json::json!({"as_int": 1u64 << 40});
    });
    let e = load(b).unwrap_err();
    assert!(matches!(e, Error::Tensor { .. }), "{e}");
    // Sizes whose product overflows.
    let b = with_json("tied.pt2", "model_weights_config.json", |v| {
        let cfg = v["config"].as_object_mut().unwrap();
        let (_, e) = cfg.iter_mut().next().unwrap();
        e["tensor_meta"]["sizes"] =
            serde_json::json!([{"as_int": 1u64 << 40}, {"as_int": 1u64 << 40}]);
        e["tensor_meta"]["strides"] = serde_json::json!([{"as_int": 1}, {"as_int": 1}]);
    });
    assert!(load(b).is_err());
    // A zero-byte record (torch's "fake tensor" form) declaring a huge tensor: bounded by Limits.
    let b = with_entry("tied.pt2", "weights/weight_0", |_| Vec::new());
    let b2 = {
        let mut es = entries(&b);
        for (n, d) in es.iter_mut() {
            if n.ends_with("model_weights_config.json") {
                let mut v: serde_json::Value = serde_json::from_slice(d).unwrap();
                for (_, e) in v["config"].as_object_mut().unwrap().iter_mut() {
                    if e["path_name"] == "weight_0" {
                        e["tensor_meta"]["sizes"] =
                            serde_json::json!([{"as_int": 1u64 << 36}, {"as_int": 4}]);
                    }
                }
                *d = serde_json::to_vec(&v).unwrap();
            }
        }
        rezip(&es)
    };
    let e = load(b2).unwrap_err();
    assert!(matches!(e, Error::Limit { .. }), "{e}");
    // Total size over the configured bound.
    let e = load_with(
        fixture("tied.pt2"),
        Limits {
            max_total_bytes: 1000,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::Limit { .. }), "{e}");
    good_still_loads();
}

#[test]
fn unknown_versions() {
    let b = with_json("mlp_train.pt2", "models/model.json", |v| {
        v["schema_version"]["major"] = 99.into()
    });
    let e = load(b).unwrap_err();
    assert!(
        matches!(e, Error::Version { .. }) && e.to_string().contains("99"),
        "{e}"
    );

    let b = with_json("mlp_train.pt2", "models/model.json", |v| {
        v["opset_version"]["aten"] = 999.into()
    });
    let e = load(b).unwrap_err();
    assert!(e.to_string().contains("opset 'aten'"), "{e}");

    let b = with_entry("mlp_train.pt2", "/archive_version", |_| b"7".to_vec());
    assert!(matches!(load(b).unwrap_err(), Error::Version { .. }));

    let b = with_entry("mlp_train.pt2", "/archive_format", |_| b"onnx".to_vec());
    assert!(matches!(load(b).unwrap_err(), Error::Archive { .. }));

    // The caller's expected opset, as torch.export.load(expected_opset_version=) takes it.
    let a = Pt2Archive::open("m.pt2", fixture("mlp_train.pt2"), Limits::default()).unwrap();
    let opts = LoadOptions {
        expected_opset_version: Some([("aten".to_string(), 3)].into()),
        ..Default::default()
    };
    let e = a.program(None, &opts).unwrap_err();
    assert!(e.to_string().contains("expected by the caller"), "{e}");
    good_still_loads();
}

#[test]
fn unknown_argument_kind_and_bad_graphs() {
    let b = with_json("mlp_train.pt2", "models/model.json", |v| {
        let node = &mut v["graph_module"]["graph"]["nodes"][0];
        node["inputs"][0]["arg"] = serde_json::json!({"as_quantum_state": 1});
    });
    let e = load(b).unwrap_err();
    assert!(
        matches!(e, Error::Schema { .. }) && e.to_string().contains("as_quantum_state"),
        "{e}"
    );

    let b = with_json("mlp_train.pt2", "models/model.json", |v| {
        let node = &mut v["graph_module"]["graph"]["nodes"][0];
        node["inputs"][0]["arg"] = serde_json::json!({"as_tensor": {"name": "nowhere"}});
    });
    let e = load(b).unwrap_err();
    assert!(
        matches!(e, Error::Verify(_)) && e.to_string().contains("nowhere"),
        "{e}"
    );

    // A signature that lifts a parameter the archive does not hold.
    let b = with_json("mlp_train.pt2", "models/model.json", |v| {
        let spec = &mut v["graph_module"]["signature"]["input_specs"][0];
        spec["parameter"]["parameter_name"] = "ghost.weight".into();
    });
    let e = load(b).unwrap_err();
    assert!(e.to_string().contains("ghost.weight"), "{e}");
    good_still_loads();
}

/// A torch.save zip whose pickle imports `posix.system`.
fn evil_torch_save() -> Vec<u8> {
    let pkl = b"\x80\x02cposix\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.".to_vec();
    rezip(&[
        ("archive/data.pkl".into(), pkl),
        ("archive/byteorder".into(), b"little".to_vec()),
        ("archive/version".into(), b"3\n".to_vec()),
    ])
}

#[test]
fn pickles_with_foreign_globals() {
    // A weight stored as a pickle (use_pickle) that imports os.system: refused by name.
    let mut es = entries(&fixture("tied.pt2"));
    for (n, d) in es.iter_mut() {
        if n.ends_with("model_weights_config.json") {
            let mut v: serde_json::Value = serde_json::from_slice(d).unwrap();
            for (_, e) in v["config"].as_object_mut().unwrap().iter_mut() {
                if e["path_name"] == "weight_0" {
                    e["use_pickle"] = true.into();
                }
            }
            *d = serde_json::to_vec(&v).unwrap();
        }
        if n.ends_with("weights/weight_0") {
            *d = evil_torch_save();
        }
    }
    let e = load(rezip(&es)).unwrap_err();
    assert!(
        matches!(e, Error::Pickle { .. }) && e.to_string().contains("posix.system"),
        "{e}"
    );

    // Evil sample inputs do not stop the program from loading, and say why they were not used.
    let b = with_entry("tied.pt2", "sample_inputs/model.pt", |_| evil_torch_save());
    let a = Pt2Archive::open("t.pt2", b, Limits::default()).unwrap();
    let p = a.program(None, &LoadOptions::default()).unwrap();
    match &p.sample_inputs {
        Some(Err(msg)) => assert!(msg.contains("posix.system"), "{msg}"),
        other => panic!("expected refused sample inputs, got {other:?}"),
    }
    good_still_loads();
}
