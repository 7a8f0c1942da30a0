use super::*;
use std::io::{Cursor, Write};
use zip::write::SimpleFileOptions;

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in entries {
        w.start_file(
            *name,
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored),
        )
        .unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

#[test]
fn names_are_relative_to_the_root() {
    let z = zip_of(&[("m/archive_format", b"pt2"), ("m/models/model.json", b"{}")]);
    let r = ArchiveReader::new("t", z.clone(), Limits::default()).unwrap();
    assert_eq!(r.root(), "m");
    assert_eq!(r.file_names(), vec!["archive_format", "models/model.json"]);
    assert_eq!(r.read_string("archive_format").unwrap(), "pt2");
    assert!(r.is_pt2());
    assert!(is_pt2_package(&z));
    assert!(!is_pt2_package(b"not a zip"));
    assert!(r
        .read_bytes("nope")
        .unwrap_err()
        .to_string()
        .contains("no entry 'nope'"));
}

#[test]
fn limits_are_enforced() {
    let z = zip_of(&[("m/a", &[0u8; 1000]), ("m/b", &[0u8; 1000])]);
    let small = Limits {
        max_entry_bytes: 500,
        ..Limits::default()
    };
    assert!(matches!(
        ArchiveReader::new("t", z.clone(), small),
        Err(Error::Limit { .. })
    ));
    let total = Limits {
        max_total_bytes: 1500,
        ..Limits::default()
    };
    assert!(matches!(
        ArchiveReader::new("t", z.clone(), total),
        Err(Error::Limit { .. })
    ));
    let entries = Limits {
        max_entries: 1,
        ..Limits::default()
    };
    assert!(matches!(
        ArchiveReader::new("t", z, entries),
        Err(Error::Limit { .. })
    ));
}

#[test]
fn truncated_archives_are_errors() {
    let z = zip_of(&[
        ("m/archive_format", b"pt2"),
        ("m/models/model.json", &[b'x'; 300]),
    ]);
    for cut in (0..z.len()).step_by(7) {
        if let Ok(r) = ArchiveReader::new("t", z[..cut].to_vec(), Limits::default()) {
            for n in r.file_names() {
                let _ = r.read_bytes(&n);
            }
        }
    }
}

/// An archive on disk for the file-source tests (removed when dropped).
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(tag: &str, bytes: &[u8]) -> TempFile {
        let p = std::env::temp_dir().join(format!("pt2web-{tag}-{}.zip", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        TempFile(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_file_source_reads_what_memory_reads() {
    let z = zip_of(&[
        ("m/archive_format", b"pt2"),
        ("m/data/weights/w", &[7u8; 300]),
    ]);
    let f = TempFile::new("file-source", &z);
    let src = Arc::new(source::FileSource::open(&f.0).unwrap());
    let r = ArchiveReader::from_source("f", src, Limits::default()).unwrap();
    assert_eq!(r.file_names(), vec!["archive_format", "data/weights/w"]);
    assert_eq!(r.read_bytes("data/weights/w").unwrap(), vec![7u8; 300]);
    // From a file a stored record is deferred; from memory it is read at once.
    let s = r.storage("data/weights/w").unwrap();
    assert!(s.bytes().is_empty() && s.deferred_entry().is_some() && !s.is_released());
    assert_eq!(&*s.load().unwrap(), &[7u8; 300][..]);
    let m = ArchiveReader::new("m", z, Limits::default()).unwrap();
    let s = m.storage("data/weights/w").unwrap();
    assert!(s.deferred_entry().is_none());
    assert_eq!(s.bytes(), &[7u8; 300][..]);
}

#[test]
fn a_deferred_record_of_a_file_cut_short_is_an_error() {
    let z = zip_of(&[("m/a", b"pt2"), ("m/w", &[1u8; 4000])]);
    let f = TempFile::new("cut", &z);
    let src = Arc::new(source::FileSource::open(&f.0).unwrap());
    let r = ArchiveReader::from_source("f", src, Limits::default()).unwrap();
    let s = r.storage("w").unwrap();
    // The file shrinks after it was opened: the read fails with the entry's name.
    std::fs::write(&f.0, &z[..200]).unwrap();
    let e = s.load().unwrap_err().to_string();
    assert!(e.contains("entry 'w'"), "{e}");
    let entry = s.deferred_entry().unwrap();
    let e = entry.read_at(3990, &mut [0u8; 20]).unwrap_err().to_string();
    assert!(e.contains("past its 4000 bytes"), "{e}");
}

#[test]
fn directory_range_finds_the_central_directory() {
    let z = zip_of(&[("m/a", b"pt2"), ("m/w", &[1u8; 4000])]);
    let total = z.len() as u64;
    let (at, len) = stream::directory_range("t", &z[z.len() - 100..], total).unwrap();
    assert_eq!(at + len, total);
    // What the zip crate found as the first header after the data.
    assert!(at > 4000 && at < total - 22, "{at}");
    for bad in [&b"not a zip at all, nothing here"[..], &[0u8; 10]] {
        let e = stream::directory_range("t", bad, 1000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no end-of-central-directory"), "{e}");
    }
    assert!(stream::directory_range("t", &z, 5).is_err());
}

#[test]
fn a_streaming_load_takes_pieces_in_any_order_and_checks_them() {
    let z = zip_of(&[("m/a", b"pt2"), ("m/w", &[1u8; 4000]), ("m/x", &[2u8; 10])]);
    let total = z.len() as u64;
    let (at, _) = stream::directory_range("t", &z[z.len() - 200..], total).unwrap();
    let mut s =
        stream::StreamingLoad::open("t", z[at as usize..].to_vec(), total, Limits::default())
            .unwrap();
    let need = s.needed_ranges();
    assert_eq!(
        need.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["a", "w", "x"]
    );
    assert_eq!(need[0].offset, 0);
    assert_eq!(need[2].offset + need[2].len, at);
    let piece = |r: &stream::NeededRange, a: u64, b: u64| {
        z[(r.offset + a) as usize..(r.offset + b) as usize].to_vec()
    };
    // Outside its entry, overlapping, unknown: errors, nothing recorded.
    let w = need[1].clone();
    let e = s.push_chunk("a", w.offset, piece(&w, 0, 10)).unwrap_err();
    assert!(e.to_string().contains("outside entry 'a'"), "{e}");
    assert!(s.push_chunk("nope", 0, vec![1]).is_err());
    s.push_chunk("w", w.offset + 100, piece(&w, 100, w.len))
        .unwrap();
    let e = s
        .push_chunk("w", w.offset + 50, piece(&w, 50, 150))
        .unwrap_err();
    assert!(e.to_string().contains("overlaps"), "{e}");
    assert_eq!(s.needed_ranges().len(), 3);
    s.push_chunk("w", w.offset, piece(&w, 0, 100)).unwrap();
    assert_eq!(s.needed_ranges().len(), 2);
    // Not everything pushed: finish names the first missing entry.
    let r = need[0].clone();
    s.push_chunk("a", r.offset, piece(&r, 0, r.len)).unwrap();
    let e =
        match stream::StreamingLoad::open("t", z[at as usize..].to_vec(), total, Limits::default())
        {
            Ok(t) => t.finish().err().unwrap().to_string(),
            Err(e) => panic!("{e}"),
        };
    assert!(e.contains("entry 'a' is incomplete"), "{e}");
    // A directory that is not the file's end, or past it: errors.
    assert!(stream::StreamingLoad::open("t", z.clone(), 10, Limits::default()).is_err());
    assert!(stream::StreamingLoad::open("t", z[..50].to_vec(), total, Limits::default()).is_err());
}
