//! Archives opened without one buffer of the whole file (src/archive/source.rs, stream.rs):
//! every committed fixture opened from its file (positioned reads; weights read when the
//! session takes them) and from pieces pushed in scrambled order (the browser's range-request
//! flow) holds torch's state bytes and runs torch's io cases (tests/fixgen/gen_fixtures.py);
//! one program also on the GPU. Every expected value comes from PyTorch.

mod common;

use common::*;
use pt2web::archive::pt2::LoadOptions;
use pt2web::archive::stream::{directory_range, StreamingLoad};
use pt2web::cpu::Tensor;
use pt2web::program::Pt2Archive;
use pt2web::runtime::RValue;
use pt2web::Limits;
use serde_json::Value;

fn open_file(meta: &Value) -> Pt2Archive {
    let file = meta["archive"].as_str().unwrap();
    Pt2Archive::open_file(&fixtures().join(file), Limits::default())
        .unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The browser's flow, natively: the file's end, then its directory, then every needed range
/// in pieces of an odd size, last range first and each range's pieces back to front.
fn open_pushed(meta: &Value) -> Pt2Archive {
    let file = meta["archive"].as_str().unwrap();
    let bytes = std::fs::read(fixtures().join(file)).unwrap();
    let total = bytes.len() as u64;
    let tail = &bytes[bytes.len().saturating_sub(64 << 10)..];
    let (at, _) = directory_range(file, tail, total).unwrap_or_else(|e| panic!("{file}: {e}"));
    let dir = bytes[at as usize..].to_vec();
    let mut load = StreamingLoad::open(file, dir, total, Limits::default())
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    for r in load.needed_ranges().into_iter().rev() {
        let starts: Vec<u64> = (r.offset..r.offset + r.len).step_by(997).collect();
        for &s in starts.iter().rev() {
            let end = (s + 997).min(r.offset + r.len);
            load.push_chunk(&r.name, s, bytes[s as usize..end as usize].to_vec())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
    assert!(load.needed_ranges().is_empty(), "{file}: ranges left");
    load.finish().unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn close(_name: &str, got: &Tensor, want: &Tensor) -> Result<(), String> {
    compare(got, want, "close")
}

/// The state bytes torch wrote into NAME.state.safetensors, where it wrote them.
fn check_state_bytes(stem: &str, how: &str, a: &Pt2Archive, pname: &str) {
    let file = match pname {
        "model" => format!("{stem}.state.safetensors"),
        p => format!("{stem}.{p}.state.safetensors"),
    };
    let Ok(bytes) = std::fs::read(fixtures().join(&file)) else {
        return;
    };
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let p = a.program(Some(pname), &LoadOptions::default()).unwrap();
    for (fqn, e) in &p.state {
        if let Ok(want) = st.tensor(fqn) {
            assert_eq!(
                e.tensor.contiguous_bytes(),
                want.data(),
                "{stem} ({how}): state '{fqn}'"
            );
        }
    }
}

#[test]
fn every_fixture_loads_from_its_file_and_from_pushed_pieces() {
    let mut cases = 0;
    for (stem, meta) in metas() {
        for (how, a) in [("file", open_file(&meta)), ("pushed", open_pushed(&meta))] {
            for (pname, pm) in meta["programs"].as_object().unwrap() {
                check_state_bytes(&stem, how, &a, pname);
                let p = a.program(Some(pname), &LoadOptions::default()).unwrap();
                check_state(&format!("{stem}/{pname} ({how})"), &p, pm);
                let r = run_io_cases(&fixtures(), &a, pname, pm, &close)
                    .unwrap_or_else(|e| panic!("{stem}/{pname} ({how}): {e}"));
                cases += r.len();
            }
        }
    }
    eprintln!("stream: {cases} io cases passed from files and from pushed pieces");
    assert!(cases > 50, "only {cases} io cases ran");
}

#[test]
fn a_gpu_session_takes_its_weights_from_the_file() {
    let Some(dev) = gpu_device() else { return };
    let (_, inputs, want) = first_io_case("convnet_core");
    let a = Pt2Archive::open_file(&fixtures().join("convnet_core.pt2"), Limits::default()).unwrap();
    let p = a.program(None, &LoadOptions::default()).unwrap();
    assert!(
        p.state
            .values()
            .any(|e| e.tensor.storage.deferred_entry().is_some()),
        "weights from a file are deferred until the session takes them"
    );
    let mut s = pt2web::gpu::GpuSession::new(p, dev).unwrap();
    let outs = s
        .run(inputs.into_iter().map(RValue::Tensor).collect())
        .unwrap();
    assert_eq!(outs.len(), want.len());
    for (o, w) in outs.iter().zip(&want) {
        compare(o.as_tensor().unwrap(), w, "loose").unwrap();
    }
}

#[test]
fn a_load_that_frees_as_taken_ends_with_the_weights_in_the_session_only() {
    let bytes = std::fs::read(fixtures().join("convnet_core.pt2")).unwrap();
    let total = bytes.len() as u64;
    let (at, _) = directory_range("c", &bytes, total).unwrap();
    let mut load =
        StreamingLoad::open("c", bytes[at as usize..].to_vec(), total, Limits::default()).unwrap();
    load.free_as_taken();
    for r in load.needed_ranges() {
        let (s, e) = (r.offset as usize, (r.offset + r.len) as usize);
        load.push_chunk(&r.name, r.offset, bytes[s..e].to_vec())
            .unwrap();
    }
    assert_eq!(load.held_bytes(), total);
    let a = load.finish().unwrap();
    // The first io case runs; its session took (and freed) the weights' pieces, so a second
    // session from the same archive cannot read them.
    let p = a.program(None, &LoadOptions::default()).unwrap();
    let state_bytes: usize = p.state.values().map(|e| e.tensor.storage.len()).sum();
    assert!(state_bytes > 1000, "{state_bytes}");
    let (_, inputs, want) = first_io_case("convnet_core");
    let mut s = pt2web::runtime::Session::new(p).unwrap();
    let outs = s
        .run(inputs.into_iter().map(RValue::Tensor).collect())
        .unwrap();
    compare(outs[0].as_tensor().unwrap(), &want[0], "close").unwrap();
    let again = a.program(None, &LoadOptions::default()).unwrap();
    let e = pt2web::runtime::Session::new(again)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not pushed"), "{e}");
}
