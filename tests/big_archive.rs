//! The streaming load at scale: the ~2.7 GB archive of tests/fixgen/gen_big_archive.py (40
//! embedding tables of 64 MiB, summed at 4 rows; expected output from eager PyTorch) opened
//! from its file and run on the CPU and on the GPU, each in a process of its own that prints
//! its host peak (VmHWM) next to the archive size.
//!
//! What a session must hold is not overhead: the CPU session's state tensors, and on a CPU
//! adapter (lavapipe, whose "device memory" is this process's memory) the GPU buffers. The
//! test asserts that the host peak beyond that stays under 0.6x the archive: loading the
//! whole archive into memory first (the old path) costs at least 1x more.
//!
//! Ignored by default (it writes 2.7 GB and takes about a minute):
//! `scripts/big_archive.sh` generates the archive and runs it;
//! `PT2WEB_BIG_ARCHIVE_BASELINE=1` also prints the peak of a load from the whole file in memory.

mod common;

use common::*;
use pt2web::archive::pt2::LoadOptions;
use pt2web::program::Pt2Archive;
use pt2web::runtime::{RValue, Session};
use pt2web::Limits;
use std::path::PathBuf;
use std::time::Instant;

const MODE_VAR: &str = "PT2WEB_BIG_ARCHIVE_MODE";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/big")
}

/// A `/proc/self/status` field in bytes (Linux).
fn status_bytes(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with(field)).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// One load and run, in the process the parent test started: prints a `BIG` line.
#[test]
#[ignore]
fn big_archive_child() {
    let Ok(mode) = std::env::var(MODE_VAR) else {
        return;
    };
    let path = dir().join("big.pt2");
    let archive_bytes = std::fs::metadata(&path).unwrap().len();
    let limits = Limits {
        max_total_bytes: 8 << 30,
        max_entry_bytes: 1 << 30,
        ..Limits::default()
    };
    let io_bytes = std::fs::read(dir().join("big.io.safetensors")).unwrap();
    let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
    let input = to_tensor(&io.tensor("input_0").unwrap());
    let want = to_tensor(&io.tensor("output_0").unwrap());
    let t0 = Instant::now();
    let a = match mode.as_str() {
        // The path of a caller that holds the whole file (the comparison, not asserted).
        "cpu-bytes" => Pt2Archive::open("big.pt2", std::fs::read(&path).unwrap(), limits),
        _ => Pt2Archive::open_file(&path, limits),
    }
    .unwrap();
    let p = a
        .program(
            None,
            &LoadOptions {
                limits,
                ..Default::default()
            },
        )
        .unwrap();
    let state_bytes: u64 = p
        .state
        .values()
        .map(|e| e.tensor.storage.len() as u64)
        .sum();
    let inputs = vec![RValue::Tensor(input)];
    let (outs, held, load_s) = match mode.as_str() {
        "cpu" | "cpu-bytes" => {
            let mut s = Session::new(p).unwrap();
            let load_s = t0.elapsed().as_secs_f64();
            (s.run(inputs).unwrap(), state_bytes, load_s)
        }
        _ => {
            let dev = gpu_device().expect("a GPU adapter");
            let mut s = pt2web::gpu::GpuSession::new(p, dev.clone()).unwrap();
            let load_s = t0.elapsed().as_secs_f64();
            // lavapipe's buffers are this process's memory; a real GPU's are not.
            let held = match dev.properties.device_type.as_str() {
                "cpu" => dev.memory_stats().driver_allocated,
                _ => 0,
            };
            (s.run(inputs).unwrap(), held, load_s)
        }
    };
    let run_s = t0.elapsed().as_secs_f64() - load_s;
    compare(outs[0].as_tensor().unwrap(), &want, "exact").unwrap();
    println!(
        "BIG mode={mode} archive={archive_bytes} peak={} held={held} load_s={load_s:.1} run_s={run_s:.1}",
        status_bytes("VmHWM:")
    );
}

fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in '{line}'"))
}

#[test]
#[ignore]
fn big_archive_loads_without_a_second_copy() {
    assert!(
        dir().join("big.pt2").exists(),
        "no .cache/big/big.pt2: run scripts/big_archive.sh (or tests/fixgen/gen_big_archive.py)"
    );
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    // PT2WEB_BIG_ARCHIVE_BASELINE=1 also loads from the whole file in memory, for comparison
    // (about 3x the archive at its peak).
    let baseline = std::env::var("PT2WEB_BIG_ARCHIVE_BASELINE").is_ok_and(|v| v == "1");
    let modes: &[&str] = match baseline {
        true => &["cpu", "gpu", "cpu-bytes"],
        false => &["cpu", "gpu"],
    };
    for &mode in modes {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "big_archive_child", "--nocapture"])
            .env(MODE_VAR, mode)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find(|l| l.starts_with("BIG "))
            .unwrap_or_else(|| panic!("{mode}: no BIG line in {stdout}"));
        let (archive, peak, held) = (
            field(line, "archive"),
            field(line, "peak"),
            field(line, "held"),
        );
        let overhead = peak.saturating_sub(held);
        eprintln!(
            "{line}\n  {mode}: archive {:.2} GiB, host peak {:.2} GiB, held by the session {:.2} GiB, \
             peak beyond that {:.2} GiB = {:.2}x the archive",
            gib(archive),
            gib(peak),
            gib(held),
            gib(overhead),
            overhead as f64 / archive as f64
        );
        assert!(
            mode == "cpu-bytes" || (overhead as f64) < 0.6 * archive as f64,
            "{mode}: host peak beyond the session's own memory is {overhead} bytes, not under \
             0.6x the {archive}-byte archive"
        );
    }
}
