//! Tests against files written by real torch (tests/fixgen/gen_pickles.py writes the
//! fixtures and the expected numbers next to them), hand-made hostile streams, and a
//! mutation sweep that must never panic.

use super::*;
use crate::tensor::HostTensor;
use std::collections::{BTreeMap, HashMap};

fn fixture_path(name: &str) -> String {
    format!(
        "{}/tests/fixtures/pickle/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}
fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name))
        .unwrap_or_else(|e| panic!("{name}: {e} (run tests/fixgen/gen_pickles.py)"))
}
fn expected(json: &str, file: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&fixture(json)).unwrap();
    v[file].clone()
}
fn load(name: &str) -> Result<PyValue> {
    load_torch_save(name, &fixture(name), &Limits::default())
}

/// Every tensor under `v` by the dotted path the generator uses.
fn flatten(v: &PyValue, prefix: &str, out: &mut BTreeMap<String, HostTensor>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        PyValue::Tensor(t) => {
            out.insert(prefix.to_string(), t.clone());
        }
        PyValue::Dict(items) => {
            for (k, v) in items {
                let k = match k {
                    PyValue::Str(s) => s.clone(),
                    PyValue::Int(i) => i.to_string(),
                    other => panic!("unexpected key {other:?}"),
                };
                flatten(v, &join(&k), out);
            }
        }
        PyValue::Tuple(items) | PyValue::List(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(v, &join(&i.to_string()), out);
            }
        }
        _ => {}
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Element values as f64 (exact for every dtype used here), read from row-major bytes.
fn values(t: &HostTensor) -> Vec<f64> {
    let b = t.contiguous_bytes();
    let es = t.dtype.size();
    b.chunks_exact(es)
        .map(|c| match t.dtype {
            DType::F32 => f32::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::F64 => f64::from_le_bytes(c.try_into().unwrap()),
            DType::F16 => half::f16::from_le_bytes(c.try_into().unwrap()).to_f64(),
            DType::BF16 => half::bf16::from_le_bytes(c.try_into().unwrap()).to_f64(),
            DType::I64 => i64::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::I32 => i32::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::U16 => u16::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::U8 | DType::Bool => c[0] as f64,
            d => panic!("no decoder for {d}"),
        })
        .collect()
}

/// Compare every tensor of `v` with what torch recorded for `file` in `json`.
fn check_against_torch(json: &str, file: &str, v: &PyValue) -> BTreeMap<String, HostTensor> {
    let exp = expected(json, file);
    let exp = exp
        .as_object()
        .unwrap_or_else(|| panic!("{file} missing from {json}"));
    let mut got = BTreeMap::new();
    flatten(v, "", &mut got);
    let want_keys: Vec<&String> = exp.keys().collect();
    let got_keys: Vec<&String> = got.keys().collect();
    assert_eq!(got_keys, want_keys, "{file}: tensor paths");
    for (path, e) in exp {
        let t = &got[path];
        let ctx = format!("{file}:{path}");
        assert_eq!(t.dtype.name(), e["dtype"].as_str().unwrap(), "{ctx} dtype");
        let ints = |k: &str| -> Vec<usize> {
            e[k].as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as usize)
                .collect()
        };
        assert_eq!(t.sizes, ints("shape"), "{ctx} shape");
        assert_eq!(t.strides, ints("stride"), "{ctx} stride");
        assert_eq!(
            t.storage_offset as u64,
            e["storage_offset"].as_u64().unwrap(),
            "{ctx} offset"
        );
        assert_eq!(
            t.requires_grad,
            e["requires_grad"].as_bool().unwrap(),
            "{ctx} requires_grad"
        );
        assert_eq!(
            hex(&t.contiguous_bytes()),
            e["hex"].as_str().unwrap(),
            "{ctx} bytes"
        );
        let want: Vec<f64> = e["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                x.as_f64()
                    .or_else(|| x.as_bool().map(|b| b as u8 as f64))
                    .unwrap()
            })
            .collect();
        // The bytes above are the exact check; serde_json (without float_roundtrip) may
        // round the last bit of a decimal, so values compare with a tiny tolerance.
        let got = values(t);
        assert_eq!(got.len(), want.len(), "{ctx} element count");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs(),
                "{ctx}[{i}]: {g} vs torch {w}"
            );
        }
    }
    got
}

#[test]
fn dtypes_match_torch() {
    let v = load("dtypes.pt").unwrap();
    let got = check_against_torch("expected.json", "dtypes.pt", &v);
    assert_eq!(
        got["u16"].dtype,
        DType::U16,
        "uint16 comes through _rebuild_tensor_v3"
    );
    assert_eq!(got["bf16"].dtype, DType::BF16);
    assert_eq!(v.kind(), "dict");
}

#[test]
fn state_dict_with_parameters() {
    let v = load("state_dict.pt").unwrap();
    let got = check_against_torch("expected.json", "state_dict.pt", &v);
    let keys: Vec<&str> = v
        .as_dict()
        .unwrap()
        .iter()
        .map(|(k, _)| k.as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "0.weight",
            "0.bias",
            "1.weight",
            "1.bias",
            "1.running_mean",
            "1.running_var",
            "1.num_batches_tracked"
        ],
        "insertion order is kept"
    );
    assert!(got["0.weight"].requires_grad && !got["1.running_mean"].requires_grad);
    assert_eq!(got["1.num_batches_tracked"].sizes, Vec::<usize>::new());
}

#[test]
fn torch25_state_dict() {
    let v = load("state_dict_torch25.pt").unwrap();
    let got = check_against_torch("expected_torch25.json", "state_dict_torch25.pt", &v);
    assert!(got["0.weight"].requires_grad);
}

#[test]
fn tied_views_share_one_storage() {
    for f in ["tied.pt", "tied_proto4.pt"] {
        let v = load(f).unwrap();
        let got = check_against_torch("expected.json", f, &v);
        let (a, b, c) = (&got["a"], &got["b"], &got["c"]);
        assert!(
            a.storage.same(&b.storage) && a.storage.same(&c.storage),
            "{f}"
        );
        assert_eq!(
            (b.storage_offset, c.strides.clone()),
            (2, vec![1, 4]),
            "{f}"
        );
    }
}

#[test]
fn sample_inputs_args_kwargs() {
    let v = load("sample_inputs.pt").unwrap();
    let got = check_against_torch("expected.json", "sample_inputs.pt", &v);
    let top = v.as_seq().unwrap();
    assert_eq!(top.len(), 2);
    let args = top[0].as_seq().unwrap();
    assert_eq!(args[1], PyValue::Int(3));
    assert_eq!(args[2], PyValue::Float(2.5));
    assert_eq!(args[3].as_str(), Some("hi"));
    assert!(args[4].is_none());
    assert_eq!(args[5].as_bool(), Some(true));
    assert_eq!(args[7].as_int(), Some(-(1i64 << 40)));
    assert!(
        got["0.0"].storage.same(&got["0.6.0"].storage),
        "x saved twice is one object"
    );
    let kw = &top[1];
    assert_eq!(kw.get("scale").and_then(PyValue::as_float), Some(0.5));
    assert_eq!(
        kw.get("dims"),
        Some(&PyValue::Tuple(vec![PyValue::Int(1), PyValue::Int(2)]))
    );
    assert_eq!(kw.get("dt").and_then(PyValue::as_dtype), Some(DType::F16));
    assert_eq!(
        kw.get("size"),
        Some(&PyValue::Tuple(vec![PyValue::Int(2), PyValue::Int(3)])),
        "torch.Size is a tuple"
    );
    assert!(kw.get("missing").is_none());
}

#[test]
fn zero_d_empty_and_strided() {
    let v = load("shapes.pt").unwrap();
    let got = check_against_torch("expected.json", "shapes.pt", &v);
    assert_eq!(got["zero_d"].rank(), 0);
    assert_eq!(got["empty"].numel(), 0);
    assert!(!got["noncontig"].is_contiguous());
    assert_eq!(got["expanded"].strides, vec![0, 1]);
    assert_eq!(got["offset"].storage_offset, 3);
}

#[test]
fn plain_pickles_protocol_2_and_4() {
    let want = PyValue::Dict(vec![
        (
            PyValue::Str("a".into()),
            PyValue::List(vec![
                PyValue::Int(1),
                PyValue::Float(2.5),
                PyValue::None,
                PyValue::Bool(true),
            ]),
        ),
        (
            PyValue::Str("b".into()),
            PyValue::Tuple(vec![
                PyValue::Str("x".into()),
                PyValue::Bytes(vec![0, 1]),
                PyValue::Bytes(vec![]),
            ]),
        ),
        (PyValue::Str("big".into()), PyValue::Int(1 << 62)),
        (PyValue::Str("neg".into()), PyValue::Int(-(1 << 33))),
    ]);
    for f in ["plain_proto2.pkl", "plain_proto4.pkl"] {
        let got = parse_pickle(f, &fixture(f), &Limits::default(), &mut no_storage).unwrap();
        assert_eq!(got, want, "{f}");
    }
}

fn no_storage(key: &str, _: DType, _: usize) -> Result<Storage> {
    Err(Error::pickle("test", format!("no storage {key}")))
}

fn pickle_err(e: Error) -> String {
    match &e {
        Error::Pickle { .. } => e.to_string(),
        other => panic!("expected a pickle error, got {other:?}"),
    }
}

#[test]
fn foreign_globals_are_refused() {
    let e = pickle_err(load("foreign_global.pt").unwrap_err());
    assert!(
        e.contains("refusing to import posix.system") && e.contains("never executes pickle"),
        "{e}"
    );
    let e = pickle_err(load("foreign_device.pt").unwrap_err());
    assert!(e.contains("torch.device"), "{e}");
    let e = parse_pickle(
        "c.pkl",
        &fixture("foreign_class.pkl"),
        &Limits::default(),
        &mut no_storage,
    )
    .unwrap_err();
    assert!(pickle_err(e).contains("collections.Counter"));
    // A tensor subclass (a torchao quantized weight of a training-IR export): the message
    // says how to store plain tensors instead.
    let e = parse_pickle(
        "w.pkl",
        b"\x80\x02ctorch._tensor\n_rebuild_from_type_v2\n.",
        &Limits::default(),
        &mut no_storage,
    )
    .unwrap_err();
    let e = pickle_err(e);
    assert!(
        e.contains("tensor subclass") && e.contains("run_decompositions"),
        "{e}"
    );
}

#[test]
fn broken_archives_are_typed_errors() {
    let e = pickle_err(load("bad_storage_size.pt").unwrap_err());
    assert!(
        e.contains("holds 44 bytes") && e.contains("12 elements of float32 (48 bytes)"),
        "{e}"
    );
    let e = pickle_err(load("missing_storage.pt").unwrap_err());
    assert!(e.contains("has no entry"), "{e}");
    let e = pickle_err(load("big_endian.pt").unwrap_err());
    assert!(e.contains("little-endian"), "{e}");
    let e = pickle_err(load_torch_save("x.pt", b"not a zip", &Limits::default()).unwrap_err());
    assert!(e.contains("not a torch.save zip"), "{e}");
    // Limits apply to entries.
    let small = Limits {
        max_entry_bytes: 16,
        ..Limits::default()
    };
    let e = load_torch_save("tied.pt", &fixture("tied.pt"), &small).unwrap_err();
    assert!(matches!(e, Error::Limit { .. }), "{e:?}");
}

#[test]
fn truncated_files_are_errors() {
    let bytes = fixture("tied.pt");
    for n in 0..bytes.len() {
        assert!(
            load_torch_save("tied.pt", &bytes[..n], &Limits::default()).is_err(),
            "prefix of {n} bytes"
        );
    }
    let (pkl, st) = unzip("tied.pt");
    for n in 0..pkl.len() {
        let e = parse_pickle("p", &pkl[..n], &Limits::default(), &mut resolver(&st)).unwrap_err();
        assert!(matches!(e, Error::Pickle { .. }), "{e:?}");
    }
}

/// data.pkl and the storages of a torch.save zip, read with the zip crate directly.
fn unzip(name: &str) -> (Vec<u8>, HashMap<String, Vec<u8>>) {
    let bytes = fixture(name);
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(&bytes[..])).unwrap();
    let mut pkl = Vec::new();
    let mut st = HashMap::new();
    for i in 0..z.len() {
        let mut f = z.by_index(i).unwrap();
        let n = f.name().unwrap().to_string();
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut buf).unwrap();
        if n.ends_with("/data.pkl") {
            pkl = buf;
        } else if let Some((_, key)) = n.split_once("/data/") {
            st.insert(key.to_string(), buf);
        }
    }
    (pkl, st)
}

fn resolver(
    st: &HashMap<String, Vec<u8>>,
) -> impl FnMut(&str, DType, usize) -> Result<Storage> + '_ {
    move |key, _, _| {
        st.get(key)
            .map(|b| Storage::new(b.clone()))
            .ok_or_else(|| Error::pickle("t", "no such storage"))
    }
}

#[test]
fn storages_resolved_once_per_key() {
    let (pkl, st) = unzip("tied.pt");
    let mut calls = Vec::new();
    let mut r = |key: &str, d: DType, n: usize| {
        calls.push((key.to_string(), d, n));
        Ok(Storage::new(st[key].clone()))
    };
    parse_pickle("tied", &pkl, &Limits::default(), &mut r).unwrap();
    assert_eq!(calls, vec![("0".to_string(), DType::F32, 12)]);
}

/// Deterministic mutations of every real fixture's data.pkl and of whole zips: errors are
/// fine, panics and hangs are not.
#[test]
fn mutations_never_panic() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let limits = Limits::default();
    for name in [
        "dtypes.pt",
        "state_dict.pt",
        "tied.pt",
        "sample_inputs.pt",
        "shapes.pt",
        "state_dict_torch25.pt",
    ] {
        let (pkl, st) = unzip(name);
        let mut r = resolver(&st);
        for i in 0..pkl.len() {
            let b = pkl[i];
            for v in [
                0x00,
                0xff,
                b ^ 0x01,
                b ^ 0x80,
                b'(',
                b'R',
                b'.',
                b'h',
                b'Q',
                b'b',
                0x8a,
                0x95,
            ] {
                let mut m = pkl.clone();
                m[i] = v;
                let _ = parse_pickle(name, &m, &limits, &mut r);
            }
        }
        for _ in 0..3000 {
            let mut m = pkl.clone();
            for _ in 0..1 + rnd() % 4 {
                let i = (rnd() % m.len() as u64) as usize;
                m[i] = rnd() as u8;
            }
            if rnd() % 4 == 0 {
                let i = (rnd() % m.len() as u64) as usize;
                let j = (rnd() % m.len() as u64) as usize;
                let chunk = m[i.min(j)..i.max(j)].to_vec();
                m.splice(i..i, chunk);
            }
            let _ = parse_pickle(name, &m, &limits, &mut r);
        }
    }
    let zip = fixture("tied.pt");
    for i in 0..zip.len() {
        for v in [0x00, 0xff, zip[i] ^ 0x04] {
            let mut m = zip.clone();
            m[i] = v;
            let _ = load_torch_save("tied.pt", &m, &limits);
        }
    }
}

// ---- hand-made streams ------------------------------------------------------------------

fn parse(bytes: &[u8]) -> Result<PyValue> {
    parse_pickle("hand.pkl", bytes, &Limits::default(), &mut no_storage)
}

/// `GLOBAL 'module name'`.
fn global(module: &str, name: &str) -> Vec<u8> {
    format!("c{module}\n{name}\n").into_bytes()
}

#[test]
fn disallowed_opcodes_are_named() {
    let e = pickle_err(parse(b"\x80\x02ios\nsystem\n.").unwrap_err());
    assert!(e.contains("0x69 (INST) at byte 2 is not allowed"), "{e}");
    let e = pickle_err(parse(b"\x80\x02\x82\x01.").unwrap_err());
    assert!(e.contains("EXT1"), "{e}");
    let e = pickle_err(parse(b"\x80\x06N.").unwrap_err());
    assert!(e.contains("protocol 6"), "{e}");
}

#[test]
fn reduce_arguments_are_checked() {
    let mut p = b"\x80\x02".to_vec();
    p.extend(global("torch._utils", "_rebuild_tensor_v2"));
    p.extend(b")R.");
    let e = pickle_err(parse(&p).unwrap_err());
    assert!(e.contains("takes 6 or 7 arguments, got 0"), "{e}");

    let mut p = b"\x80\x02".to_vec();
    p.extend(global("collections", "OrderedDict"));
    p.extend(b"N\x85R."); // OrderedDict(None)
    assert!(parse(&p).is_err());

    let mut p = b"\x80\x02".to_vec();
    p.extend(global("torch", "Size"));
    p.extend(b"X\x01\x00\x00\x00a\x85\x85R."); // torch.Size(("a",))
    assert!(pickle_err(parse(&p).unwrap_err()).contains("must be an int"));

    // Calling something that is not a global, and a global left uncalled.
    assert!(pickle_err(parse(b"\x80\x02K\x01)R.").unwrap_err()).contains("cannot call a int"));
    let mut p = b"\x80\x02".to_vec();
    p.extend(global("torch", "FloatStorage"));
    p.extend(b".");
    assert!(pickle_err(parse(&p).unwrap_err()).contains("never called"));
}

/// `_rebuild_tensor_v2(('storage', FloatStorage, '0', 'cpu', numel), offset, (size,), (1,), False, OrderedDict())`.
fn tensor_pickle(numel: u8, offset: u8, size: u8) -> Vec<u8> {
    let mut p = b"\x80\x02".to_vec();
    p.extend(global("torch._utils", "_rebuild_tensor_v2"));
    p.extend(b"((X\x07\x00\x00\x00storage");
    p.extend(global("torch", "FloatStorage"));
    p.extend(b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK");
    p.push(numel);
    p.extend(b"tQK");
    p.push(offset);
    p.extend(b"K");
    p.push(size);
    p.extend(b"\x85K\x01\x85\x89");
    p.extend(global("collections", "OrderedDict"));
    p.extend(b")RtR.");
    p
}

#[test]
fn tensor_views_are_bounds_checked() {
    let mut r = |_: &str, d: DType, n: usize| Ok(Storage::new(vec![0u8; n * d.size()]));
    let t = parse_pickle("t", &tensor_pickle(4, 1, 3), &Limits::default(), &mut r).unwrap();
    assert_eq!(t.as_tensor().unwrap().sizes, vec![3]);
    let e = parse_pickle("t", &tensor_pickle(4, 2, 3), &Limits::default(), &mut r).unwrap_err();
    assert!(matches!(e, Error::Tensor { .. }), "{e:?}");
    // The resolver returning the wrong length is caught too.
    let mut short = |_: &str, _: DType, _: usize| Ok(Storage::new(vec![0u8; 3]));
    let e = pickle_err(
        parse_pickle("t", &tensor_pickle(4, 0, 1), &Limits::default(), &mut short).unwrap_err(),
    );
    assert!(e.contains("holds 3 bytes"), "{e}");
}

#[test]
fn memo_stack_and_nesting_limits() {
    assert!(pickle_err(parse(b"\x80\x02h\x05.").unwrap_err()).contains("never stored"));
    assert!(pickle_err(parse(b"\x80\x02(0.").unwrap_err()).contains("underflow"));
    assert!(pickle_err(parse(b"\x80\x02.").unwrap_err()).contains("underflow"));
    assert!(pickle_err(parse(b"\x80\x02N").unwrap_err()).contains("without STOP"));
    assert!(pickle_err(parse(b"\x80\x02K\x01a.").unwrap_err()).contains("underflow"));
    assert!(pickle_err(parse(b"\x80\x02NK\x01a.").unwrap_err())
        .contains("append to a list, not a None"));
    assert!(pickle_err(parse(b"\x80\x02X\xff\xff\xff\xffab.").unwrap_err()).contains("truncated"));
    let mut p = b"\x80\x02\x8a\x09".to_vec();
    p.extend([0xff; 8]);
    p.extend(b"\x01.");
    assert!(pickle_err(parse(&p).unwrap_err()).contains("64 bits"));
    // LONG1 of 9 bytes that still fits (sign extension) is fine.
    let mut p = b"\x80\x02\x8a\x09".to_vec();
    p.extend([0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, b'.']);
    assert_eq!(parse(&p).unwrap(), PyValue::Int(-2));

    // Nesting deeper than Limits::max_depth.
    let mut p = b"\x80\x02".to_vec();
    p.extend(std::iter::repeat_n(b']', 100));
    p.extend(std::iter::repeat_n(b'a', 99));
    p.push(b'.');
    assert!(matches!(parse(&p).unwrap_err(), Error::Limit { .. }));
    // A list that contains itself.
    let e = parse(b"\x80\x02]q\x00h\x00a.").unwrap_err();
    assert!(matches!(e, Error::Limit { .. }), "{e:?}");
    // Exponential sharing: each list holds the previous one twice.
    let mut p = b"\x80\x02N".to_vec();
    for _ in 0..40 {
        p.extend(b"q\x00h\x00\x86");
    }
    p.push(b'.');
    let e = parse(&p).unwrap_err();
    assert!(matches!(e, Error::Limit { .. }), "{e:?}");
}

#[test]
fn repeated_dict_keys_replace_in_place() {
    // {'a': 1, 'b': 2, 'a': 3} -> [('a', 3), ('b', 2)], as Python builds it.
    let v =
        parse(b"\x80\x02}(X\x01\x00\x00\x00aK\x01X\x01\x00\x00\x00bK\x02X\x01\x00\x00\x00aK\x03u.")
            .unwrap();
    assert_eq!(v.get("a"), Some(&PyValue::Int(3)));
    assert_eq!(v.as_dict().unwrap().len(), 2);
    assert_eq!(v.as_dict().unwrap()[0].0.as_str(), Some("a"));
}
