//! torch.cuda.memory's API on the GPU device (`src/gpu/memory.rs`): statistics under torch's
//! keys that move as documented, memory history, and snapshots that account for every live
//! byte. Each test opens its own device, so its numbers start from zero. Without a GPU
//! adapter the tests skip with a message, unless PT2WEB_REQUIRE_GPU=1 (CI).

mod common;

use pt2web::gpu::memory::OUTSIDE_A_NODE;
use pt2web::gpu::{GpuDevice, GpuSession};
use pt2web::runtime::RValue;
use std::collections::{BTreeMap, BTreeSet};

/// The convnet fixture on `dev`, run once; its output checked against PyTorch's.
fn load_and_run(dev: &std::sync::Arc<GpuDevice>) -> (GpuSession, Vec<RValue>) {
    let (program, inputs, outputs) = common::first_io_case("convnet_core");
    let mut s = GpuSession::new(program, dev.clone()).unwrap();
    let inputs: Vec<RValue> = inputs.into_iter().map(RValue::Tensor).collect();
    let got = s.run(inputs.clone()).unwrap();
    match &got[0] {
        RValue::Tensor(t) => common::compare(t, &outputs[0], "loose").unwrap(),
        other => panic!("expected a tensor, got {other:?}"),
    }
    (s, inputs)
}

fn stat(m: &BTreeMap<String, u64>, key: &str) -> u64 {
    *m.get(key)
        .unwrap_or_else(|| panic!("memory_stats has no '{key}'"))
}

#[test]
fn statistics_move_as_documented() {
    let Some(dev) = common::gpu_device() else {
        return;
    };
    let s0 = dev.memory_stats_map();
    assert_eq!(stat(&s0, "allocated_bytes.all.current"), 0);
    assert_eq!(stat(&s0, "reserved_bytes.all.current"), 0);
    let (program, inputs, _) = common::first_io_case("convnet_core");
    let mut s = GpuSession::new(program, dev.clone()).unwrap();
    let loaded = dev.memory_stats_map();
    let weights = stat(&loaded, "allocated_bytes.all.current");
    assert!(weights > 0, "allocated rises after load: {loaded:?}");
    let inputs: Vec<RValue> = inputs.into_iter().map(RValue::Tensor).collect();
    drop(s.run(inputs.clone()).unwrap());
    dev.synchronize().unwrap();
    let ran = dev.memory_stats_map();
    eprintln!("after load and one run: {ran:?}");
    // The run's intermediates came and went; the weights stay.
    assert!(stat(&ran, "allocated_bytes.all.freed") > stat(&loaded, "allocated_bytes.all.freed"));
    assert!(stat(&ran, "allocation.all.allocated") > stat(&loaded, "allocation.all.allocated"));
    assert_eq!(stat(&ran, "allocated_bytes.all.current"), weights);
    assert!(stat(&ran, "allocated_bytes.all.peak") > weights);
    for (k, v) in &ran {
        if let Some(base) = k.strip_suffix(".current") {
            let peak = stat(&ran, &format!("{base}.peak"));
            assert!(peak >= *v, "{base}: peak {peak} < current {v}");
            let (a, f) = (
                stat(&ran, &format!("{base}.allocated")),
                stat(&ran, &format!("{base}.freed")),
            );
            assert_eq!(
                a - f,
                *v,
                "{base}: allocated {a} - freed {f} != current {v}"
            );
        }
    }
    // The pools add up, and agree with the older API.
    for key in ["allocated_bytes", "reserved_bytes", "allocation", "segment"] {
        let all = stat(&ran, &format!("{key}.all.current"));
        let parts = stat(&ran, &format!("{key}.small_pool.current"))
            + stat(&ran, &format!("{key}.large_pool.current"));
        assert_eq!(all, parts, "{key}: all != small + large");
    }
    let old = dev.memory_stats();
    assert_eq!(old.allocated, stat(&ran, "allocated_bytes.all.current"));
    assert_eq!(old.peak, stat(&ran, "allocated_bytes.all.peak"));
    assert_eq!(old.buffers_created, stat(&ran, "num_device_alloc"));
    assert_eq!(
        dev.memory_reserved(),
        stat(&ran, "reserved_bytes.all.current")
    );
    assert!(dev.memory_reserved() >= dev.current_allocated_memory());
    assert!(dev.driver_allocated_memory() >= dev.memory_reserved());
    assert!(dev.max_memory_reserved() >= dev.memory_reserved());
    assert_eq!(stat(&ran, "active_bytes.all.current"), weights);
    assert_eq!(stat(&ran, "num_alloc_retries"), 0);
    let (free, total) = dev.mem_get_info();
    assert_eq!(total, dev.recommended_max_memory());
    assert_eq!(free + dev.driver_allocated_memory(), total);
    // The nested form holds the same numbers.
    let nested = dev.memory_stats_as_nested_dict();
    assert_eq!(
        nested["allocated_bytes"]["all"]["current"].as_u64(),
        Some(weights)
    );
    assert_eq!(
        nested["num_device_alloc"].as_u64(),
        Some(stat(&ran, "num_device_alloc"))
    );

    // reset_accumulated_memory_stats zeroes the totals and counters, not the values.
    dev.reset_accumulated_memory_stats();
    let reset = dev.memory_stats_map();
    for (k, v) in &reset {
        if k.ends_with(".allocated") || k.ends_with(".freed") || k.starts_with("num_") {
            assert_eq!(*v, 0, "{k} after reset_accumulated_memory_stats");
        }
    }
    assert_eq!(stat(&reset, "allocated_bytes.all.current"), weights);
    assert_eq!(
        stat(&reset, "allocated_bytes.all.peak"),
        stat(&ran, "allocated_bytes.all.peak")
    );
    // A warm run frees what it allocates.
    drop(s.run(inputs.clone()).unwrap());
    dev.synchronize().unwrap();
    let warm = dev.memory_stats_map();
    assert!(stat(&warm, "allocated_bytes.all.allocated") > 0);
    assert_eq!(
        stat(&warm, "allocated_bytes.all.allocated"),
        stat(&warm, "allocated_bytes.all.freed")
    );

    // empty_cache hands back every cached buffer: reserved falls to what is allocated.
    let before = dev.max_memory_reserved();
    dev.empty_cache().unwrap();
    let emptied = dev.memory_stats_map();
    assert!(stat(&emptied, "num_device_free") > 0);
    assert_eq!(dev.memory_reserved(), dev.current_allocated_memory());
    assert_eq!(dev.max_memory_reserved(), before);
    dev.reset_peak_memory_stats();
    assert_eq!(dev.max_memory_reserved(), dev.memory_reserved());
    assert_eq!(dev.max_memory_allocated(), dev.current_allocated_memory());

    // An allocation past the memory limit counts as an OOM.
    dev.set_per_process_memory_fraction(1e-12).unwrap();
    assert!(s.run(inputs).is_err());
    assert_eq!(stat(&dev.memory_stats_map(), "num_ooms"), 1);
}

#[test]
fn snapshots_account_for_every_live_byte() {
    let Some(dev) = common::gpu_device() else {
        return;
    };
    dev.record_memory_history(true, 1 << 20);
    assert!(dev.is_recording_memory_history());
    let (mut s, inputs) = load_and_run(&dev);
    let out = s.run(inputs.clone()).unwrap();
    // A recorded history names every node, so runs are not replayed from a tape.
    assert!(!s.last_stats.replayed);
    let snap = dev.memory_snapshot();
    // The outputs are CPU tensors: what is live is the weights (and nothing is pending).
    drop(out);
    let active: u64 = snap
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == "active_allocated")
        .map(|b| b.size)
        .sum();
    let reserved: u64 = snap.segments.iter().map(|s| s.total_size).sum();
    assert_eq!(active, dev.current_allocated_memory());
    assert_eq!(reserved, dev.memory_reserved());
    assert!(active > 0 && reserved >= active);
    for seg in &snap.segments {
        let held: u64 = seg
            .blocks
            .iter()
            .filter(|b| b.state == "active_allocated")
            .map(|b| b.size)
            .sum();
        assert_eq!(seg.allocated_size, held);
        assert_eq!(
            seg.blocks.iter().map(|b| b.size).sum::<u64>(),
            seg.total_size
        );
    }
    // Segments do not overlap.
    for w in snap.segments.windows(2) {
        assert!(w[0].address + w[0].total_size <= w[1].address);
    }

    // The history: every action of this device since it was opened.
    let trace = &snap.device_traces[0];
    let count = |a: &str| trace.iter().filter(|e| e.action == a).count();
    let live_blocks = snap
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == "active_allocated")
        .count();
    assert_eq!(count("alloc") - count("free_completed"), live_blocks);
    assert_eq!(count("free_requested"), count("free_completed"));
    assert_eq!(
        count("segment_alloc") - count("segment_free"),
        snap.segments.len()
    );
    assert!(trace.windows(2).all(|w| w[0].time_us <= w[1].time_us));
    // Frames name real nodes and ops of the program the session runs (after its passes:
    // fused epilogues are nodes of their own).
    let nodes: BTreeSet<(&str, &str)> = s
        .cpu
        .program
        .graph
        .nodes
        .iter()
        .map(|n| (n.target.as_str(), n.name.as_str()))
        .collect();
    let mut by_node = BTreeSet::new();
    for e in trace.iter().filter(|e| e.action == "alloc") {
        assert_eq!(e.frames.len(), 1, "{e:?}");
        let f = &e.frames[0];
        if &*f.name == OUTSIDE_A_NODE {
            assert!(!f.filename.is_empty());
        } else {
            assert!(
                nodes.contains(&(&*f.name, &*f.filename)),
                "{f:?} is no node of the program"
            );
            by_node.insert(f.filename.to_string());
        }
    }
    eprintln!(
        "{} actions, {} segments ({reserved} B), {active} B active; allocations by {} of {} nodes",
        trace.len(),
        snap.segments.len(),
        by_node.len(),
        nodes.len()
    );
    assert!(
        by_node.len() >= 3,
        "allocations named by nodes: {by_node:?}"
    );
    // torch's layout, as JSON.
    let json = serde_json::to_value(&snap).unwrap();
    let e = &json["device_traces"][0][0];
    for key in ["action", "addr", "size", "stream", "time_us", "frames"] {
        assert!(e.get(key).is_some(), "trace entry without '{key}': {e}");
    }
    let seg = &json["segments"][0];
    for key in [
        "device",
        "address",
        "total_size",
        "allocated_size",
        "active_size",
        "segment_type",
        "blocks",
    ] {
        assert!(seg.get(key).is_some(), "segment without '{key}': {seg}");
    }
    assert!(json["device_traces"][0]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["frames"][0]["line"] == 0));

    // A history keeps its latest max_entries actions; stopping keeps it but stops it growing.
    dev.record_memory_history(true, 5);
    drop(s.run(inputs.clone()).unwrap());
    assert_eq!(dev.memory_snapshot().device_traces[0].len(), 5);
    dev.record_memory_history(false, 0);
    assert!(!dev.is_recording_memory_history());
    let kept = dev.memory_snapshot().device_traces[0].clone();
    drop(s.run(inputs).unwrap());
    let after = dev.memory_snapshot().device_traces[0].clone();
    assert_eq!(
        kept.iter().map(|e| e.time_us).collect::<Vec<_>>(),
        after.iter().map(|e| e.time_us).collect::<Vec<_>>()
    );
}
