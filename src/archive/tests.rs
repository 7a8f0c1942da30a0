use super::*;
use std::io::Write;
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
