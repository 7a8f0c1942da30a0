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

/// convnet_core's bytes, size and directory offset, and a load of it from its directory that
/// frees each weight as a session takes it.
fn convnet_freeing_load() -> (Vec<u8>, u64, u64, StreamingLoad) {
    let bytes = std::fs::read(fixtures().join("convnet_core.pt2")).unwrap();
    let total = bytes.len() as u64;
    let (at, _) = directory_range("c", &bytes, total).unwrap();
    let mut load =
        StreamingLoad::open("c", bytes[at as usize..].to_vec(), total, Limits::default()).unwrap();
    load.free_as_taken();
    (bytes, total, at, load)
}

#[test]
fn a_load_that_frees_as_taken_ends_with_the_weights_in_the_session_only() {
    let (bytes, total, _, mut load) = convnet_freeing_load();
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

/// A caller's store of held ranges: the archive's bytes, with the reads and releases counted.
struct Held {
    bytes: Vec<u8>,
    read: std::sync::atomic::AtomicU64,
    released: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl pt2web::archive::source::ByteSource for Held {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let released = self.released.lock().unwrap();
        let gone = released
            .iter()
            .any(|&(s, n)| offset < s + n && offset + buf.len() as u64 > s);
        assert!(!gone, "bytes at {offset} read after their release");
        self.read
            .fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
        buf.copy_from_slice(&self.bytes[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn release(&self, offset: u64, len: u64) {
        self.released.lock().unwrap().push((offset, len));
    }
}

#[test]
fn ranges_the_caller_holds_are_read_from_it_and_released_to_it_as_taken() {
    // On the GPU where one is found (the browser's case: weights held in JS memory while
    // wasm memory holds one at a time), else on the CPU.
    let dev = gpu_device();
    let (bytes, total, at, mut load) = convnet_freeing_load();
    let held = std::sync::Arc::new(Held {
        bytes: bytes.clone(),
        read: 0.into(),
        released: Default::default(),
    });
    let needed = load.needed_ranges();
    let e = load
        .push_held(&needed[0].name, needed[0].offset, 1)
        .unwrap_err();
    assert!(e.to_string().contains("before hold_outside"), "{e}");
    load.hold_outside(held.clone());
    // Each range held in two parts, the second first; a third claim of the same bytes and
    // one past the entry's end are refused.
    for r in &needed {
        let half = r.len / 2;
        load.push_held(&r.name, r.offset + half, r.len - half)
            .unwrap();
        load.push_held(&r.name, r.offset, half).unwrap();
    }
    let r = &needed[0];
    let e = load
        .push_held(&r.name, r.offset, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("overlaps"), "{e}");
    let e = load
        .push_held(&r.name, r.offset + r.len - 1, 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("outside entry"), "{e}");
    assert_eq!(
        load.held_bytes(),
        total - at,
        "only the directory is in the load's memory"
    );
    let a = load.finish().unwrap();
    let p = a.program(None, &LoadOptions::default()).unwrap();
    let weights: Vec<String> = p.state.keys().cloned().collect();
    assert!(!weights.is_empty());
    let (_, inputs, want) = first_io_case("convnet_core");
    let inputs: Vec<RValue> = inputs.into_iter().map(RValue::Tensor).collect();
    let outs = match dev {
        Some(dev) => pt2web::gpu::GpuSession::new(p, dev).unwrap().run(inputs),
        None => pt2web::runtime::Session::new(p).unwrap().run(inputs),
    }
    .unwrap();
    compare(outs[0].as_tensor().unwrap(), &want[0], "loose").unwrap();
    // Every weight's entry was read from the holder and then released to it.
    let released = held.released.lock().unwrap().clone();
    assert!(held.read.load(std::sync::atomic::Ordering::Relaxed) > 1000);
    assert!(
        released.len() >= weights.len().min(needed.len() - 2),
        "{} releases for {} weights",
        released.len(),
        weights.len()
    );
}

#[test]
fn an_archive_past_4_gib_streams_from_its_zip64_end_record() {
    // torch.export.save writes a zip64 end record and locator before the plain end record
    // (miniz); past 4 GiB the plain record's directory offset (and size, counts) are all-ones
    // and only the zip64 record has them. Made so here, without writing 4 GiB.
    let mut bytes = std::fs::read(fixtures().join("convnet_core.pt2")).unwrap();
    let total = bytes.len() as u64;
    let eocd = bytes.len() - 22;
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    assert_eq!(
        u32_at(&bytes, eocd),
        0x0605_4b50,
        "an end record without a comment"
    );
    assert_eq!(
        u32_at(&bytes, eocd - 20),
        0x0706_4b50,
        "a zip64 locator before it"
    );
    let (plain_at, _) = directory_range("p", &bytes, total).unwrap();
    bytes[eocd + 8..eocd + 20].fill(0xff);
    let (at, len) = directory_range("z", &bytes[bytes.len() - 200..], total).unwrap();
    assert_eq!((at, len), (plain_at, total - plain_at));
    // A tail that ends before the zip64 record asks for more of the end.
    let e = directory_range("z", &bytes[bytes.len() - 30..], total).unwrap_err();
    assert!(e.to_string().contains("fetch more of the end"), "{e}");
    let mut load =
        StreamingLoad::open("z", bytes[at as usize..].to_vec(), total, Limits::default()).unwrap();
    for r in load.needed_ranges() {
        let (s, e) = (r.offset as usize, (r.offset + r.len) as usize);
        load.push_chunk(&r.name, r.offset, bytes[s..e].to_vec())
            .unwrap();
    }
    let a = load.finish().unwrap();
    let p = a.program(None, &LoadOptions::default()).unwrap();
    let (_, inputs, want) = first_io_case("convnet_core");
    let outs = pt2web::runtime::Session::new(p)
        .unwrap()
        .run(inputs.into_iter().map(RValue::Tensor).collect())
        .unwrap();
    compare(outs[0].as_tensor().unwrap(), &want[0], "close").unwrap();
}

#[test]
fn the_small_records_alone_list_the_programs_and_extra_files() {
    // `openArchive(url)`'s flow: the directory, then only the records that are not weights
    // (the small ones and the extra files); the archive opens on them, complete or not.
    for (stem, programs) in [
        ("multi_program", vec!["decoder", "encoder"]),
        ("extra_files", vec!["model"]),
    ] {
        let meta: Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures().join(format!("{stem}.meta.json"))).unwrap(),
        )
        .unwrap();
        let bytes = std::fs::read(fixtures().join(format!("{stem}.pt2"))).unwrap();
        let total = bytes.len() as u64;
        let (at, _) = directory_range(stem, &bytes, total).unwrap();
        let mut load = StreamingLoad::open(
            stem,
            bytes[at as usize..].to_vec(),
            total,
            Limits::default(),
        )
        .unwrap();
        let mut pushed = 0;
        for r in load.needed_ranges() {
            let listed =
                r.name.starts_with("extra/") || (r.len <= 16384 && !r.name.starts_with("data/"));
            if listed {
                let (s, e) = (r.offset as usize, (r.offset + r.len) as usize);
                load.push_chunk(&r.name, r.offset, bytes[s..e].to_vec())
                    .unwrap();
                pushed += r.len;
            }
        }
        // No weight was pushed: each is still needed.
        let left: Vec<String> = load.needed_ranges().into_iter().map(|r| r.name).collect();
        for w in meta["archive_entries"].as_array().unwrap() {
            let w = w.as_str().unwrap().split_once('/').unwrap().1;
            if w.starts_with("data/weights/weight_") {
                assert!(left.iter().any(|n| n == w), "{stem}: {w} pushed");
            }
        }
        assert!(pushed < total, "{stem}: {pushed} of {total} bytes pushed");
        let a = load.partial().unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert_eq!(a.program_names(), &programs[..], "{stem}");
        let files = a.extra_files().unwrap();
        let want = meta["extra_files"].as_object().unwrap();
        let mut want_names: Vec<&String> = want.keys().collect();
        want_names.sort();
        assert_eq!(files.keys().collect::<Vec<_>>(), want_names, "{stem}");
        for (name, w) in want {
            assert_eq!(
                String::from_utf8_lossy(&files[name]),
                w["content"].as_str().unwrap(),
                "{stem}: {name}"
            );
        }
        // A program's weights were not pushed: loading one is a typed archive error, and the
        // complete-archive open says which entry is missing.
        let e = load.archive().err().expect("an incomplete archive");
        assert_eq!(e.code(), "ARCHIVE", "{e}");
        assert!(e.to_string().contains("incomplete"), "{e}");
    }
}
