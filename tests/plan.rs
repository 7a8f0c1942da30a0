//! Plans: `prepare` checks the guards and runs the meta pass once per input signature, the
//! cache is bounded, a prepared run gives the same results as an unprepared one, and on the
//! GPU the first run after `prepare` creates no pipelines. Expected outputs come from PyTorch
//! (the fixtures' io cases); the GPU tests skip without an adapter unless
//! PT2WEB_REQUIRE_GPU=1 (CI).

mod common;

use common::*;
use pt2web::cpu::Tensor;
use pt2web::gpu::{BackendChoice, GpuDevice, GpuSession};
use pt2web::meta::{MValue, MetaTensor};
use pt2web::program::Program;
use pt2web::runtime::{RValue, Session};
use pt2web::DType;
use std::sync::Arc;

/// A fixture's program, its torch-made inputs and expected outputs (first io case).
fn fixture(stem: &str) -> (Program, Vec<RValue>, Vec<Tensor>) {
    let (program, ins, outs) = first_io_case(stem);
    (program, ins.into_iter().map(RValue::Tensor).collect(), outs)
}

fn metas_of(inputs: &[RValue]) -> Vec<MValue> {
    pt2web::plan::metas(&pt2web::plan::signature(inputs))
}

fn assert_matches_torch(got: &[RValue], want: &[Tensor], what: &str) {
    assert_matches_torch_within(got, want, 1e-5, what);
}

#[test]
fn prepare_plans_a_signature_once_and_the_run_reuses_it() {
    let (p, ins, want) = fixture("dyn_batch");
    let mut s = Session::new(p).unwrap();
    let plan = s.prepare(&metas_of(&ins)).unwrap();
    let inferred = plan
        .meta
        .as_ref()
        .expect("the meta pass finishes on dyn_batch");
    assert!(plan.steps > 0 && plan.memory.is_some());
    assert!(inferred.values.iter().flatten().count() > plan.steps);
    assert_eq!((s.plans.hits, s.plans.misses), (0, 1));
    let got = s.run(ins.clone()).unwrap();
    assert_matches_torch(&got, &want, "the prepared signature");
    assert_eq!(
        (s.plans.hits, s.plans.misses),
        (1, 1),
        "the run used the Plan"
    );
    s.run(ins).unwrap();
    assert_eq!(s.plans.hits, 2);
    assert_eq!(s.plans.len(), 1);
}

#[test]
fn the_plan_cache_is_bounded_by_signature() {
    let (p, _, _) = fixture("dyn_batch");
    let mut s = Session::new(p).unwrap();
    s.set_plan_capacity(2);
    for batch in [2usize, 3, 4, 2] {
        let x = Tensor::from_vec(vec![0.25f32; batch * 16], &[batch, 16]);
        let out = s.run(vec![RValue::Tensor(x)]).unwrap();
        assert_eq!(out[0].as_tensor().unwrap().sizes[0], batch);
    }
    // 2, 3, then 4 evicts 2, then 2 is planned again (and evicts 3).
    assert_eq!(s.plans.len(), 2);
    assert_eq!((s.plans.hits, s.plans.misses), (0, 4));
    let batches: Vec<usize> = s
        .plans
        .plans()
        .iter()
        .map(|p| match &p.signature[0] {
            pt2web::plan::InputSig::Tensor { sizes, .. } => sizes[0],
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(batches, vec![4, 2], "least recently used first");
}

#[test]
fn prepare_checks_the_guards_like_a_run() {
    let (p, ins, want) = fixture("dyn_batch");
    let mut s = Session::new(p).unwrap();
    // batch in [1, 64]: 65 violates the range, as a run with that shape would.
    let bad = [MValue::Tensor(MetaTensor::new(DType::F32, vec![65, 16]))];
    let e = s.prepare(&bad).unwrap_err().to_string();
    let run_e = s
        .run(vec![RValue::Tensor(Tensor::from_vec(
            vec![0f32; 65 * 16],
            &[65, 16],
        ))])
        .unwrap_err()
        .to_string();
    assert_eq!(e, run_e);
    assert!(e.contains("'x'") && e.contains("65"), "{e}");
    assert!(s.plans.is_empty(), "a failed signature is not cached");
    let got = s.run(ins).unwrap();
    assert_matches_torch(&got, &want, "after a refused prepare");
}

fn device() -> Option<Arc<GpuDevice>> {
    match GpuDevice::open(BackendChoice::default(), None) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) if std::env::var("PT2WEB_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("PT2WEB_REQUIRE_GPU=1 but no GPU device: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: no GPU adapter ({e}); set PT2WEB_REQUIRE_GPU=1 to fail instead");
            None
        }
    }
}

#[test]
fn gpu_prepare_creates_the_pipelines_of_the_first_run() {
    let Some(dev) = device() else { return };
    for stem in ["convnet_core", "tiny_gpt2", "mutate_buffer"] {
        let (p, ins, want) = fixture(stem);
        // Each fixture on a fresh device, so no other program's pipelines are cached.
        let dev = Arc::new(GpuDevice::open(BackendChoice::default(), None).unwrap());
        let mut g = GpuSession::new(p.clone(), dev.clone()).unwrap();
        let before = g.get_rng_state();
        let st = g.prepare(&metas_of(&ins)).unwrap();
        assert!(st.pipelines_created > 0, "{stem}: {st:?}");
        assert_eq!(st.stopped, None, "{stem}: the pass reaches the end");
        assert_eq!(
            g.get_rng_state(),
            before,
            "{stem}: prepare draws no random numbers"
        );
        let got = g.run(ins.clone()).unwrap();
        let first = g.last_stats.clone();
        assert_eq!(
            first.pipelines_created, 0,
            "{stem}: first run after prepare {first:?}"
        );
        // One step per node of the graph as planned (after the graph passes).
        assert_eq!(
            first.plan_steps as usize,
            g.cpu.program.graph.nodes.len(),
            "{stem}"
        );
        // The warm-up dispatched each new pipeline once where the graph has no in-place op
        // (mutate_buffer updates running statistics in place: none), and the first run
        // found the pool and the bind groups as a warm run does.
        let warmed = if stem == "mutate_buffer" {
            0
        } else {
            st.pipelines_created
        };
        assert_eq!(st.first_dispatches, warmed, "{stem}: {st:?}");
        assert_eq!(
            (first.buffer_allocations, first.bind_groups_created),
            (0, 0),
            "{stem}: first run after prepare {first:?}"
        );
        assert_matches_torch(&got, &want, stem);
        // Same outputs as a session that never prepared, bit for bit, and the same state.
        let mut plain = GpuSession::new(p, dev).unwrap();
        let plain_out = plain.run(ins.clone()).unwrap();
        for (a, b) in got.iter().zip(&plain_out) {
            let (a, b) = (a.as_tensor().unwrap(), b.as_tensor().unwrap());
            assert_eq!(a.to_vec::<f64>(), b.to_vec::<f64>(), "{stem}");
        }
        // The host copy of the state is current after a sync (weights are dropped from the
        // host once uploaded, buffers the runs updated live on the GPU).
        g.sync_state().unwrap();
        plain.sync_state().unwrap();
        for (name, t) in &g.cpu.state {
            let other = &plain.cpu.state[name];
            assert_eq!(
                t.to_vec::<f64>(),
                other.to_vec::<f64>(),
                "{stem}: state '{name}' after one run"
            );
        }
    }
    drop(dev);
}

/// A tensor of `like`'s dtype and shape with other (deterministic) values.
fn other_values(like: &RValue, salt: f32) -> RValue {
    let t = like.as_tensor().unwrap();
    if t.dtype.is_float() {
        let v: Vec<f32> = (0..t.numel())
            .map(|i| ((i as f32) * 0.37 + salt).sin())
            .collect();
        RValue::Tensor(Tensor::from_vec(v, &t.sizes).to_dtype(t.dtype).unwrap())
    } else {
        // Token ids and masks: keep them valid (the same ids, shifted where they can be).
        like.clone()
    }
}

fn bits(v: &[RValue]) -> Vec<Vec<u64>> {
    v.iter()
        .map(|x| {
            x.as_tensor()
                .unwrap()
                .to_vec::<f64>()
                .iter()
                .map(|f| f.to_bits())
                .collect()
        })
        .collect()
}

#[test]
fn warm_gpu_runs_replay_their_recording_with_the_same_results() {
    let Some(_) = device() else { return };
    for stem in ["convnet_core", "tiny_gpt2"] {
        let (p, ins, want) = fixture(stem);
        let dev = Arc::new(GpuDevice::open(BackendChoice::default(), None).unwrap());
        let mut g = GpuSession::new(p.clone(), dev.clone()).unwrap();
        let mut replayed = 0;
        for run in 0..5 {
            let got = g.run(ins.clone()).unwrap();
            assert_matches_torch(&got, &want, &format!("{stem} run {run}"));
            replayed += g.last_stats.replayed as u32;
        }
        // Runs 2 and 3 encode the same dispatches, so 4 and 5 replay them.
        assert_eq!(replayed, 2, "{stem}: {:?}", g.last_stats);
        let st = g.last_stats.clone();
        assert_eq!(
            (st.submits, st.pipelines_created, st.bind_groups_created),
            (1, 0, 0)
        );
        assert!(st.dispatches > 0 && st.gpu_nodes > 0, "{st:?}");
        // New data through the replayed path: the same bits as a session that never replays.
        let new: Vec<RValue> = ins.iter().map(|x| other_values(x, 0.5)).collect();
        let got = g.run(new.clone()).unwrap();
        assert!(g.last_stats.replayed, "{stem}: same signature, new data");
        let mut fresh = GpuSession::new(p.clone(), dev.clone()).unwrap();
        let plain = fresh.run(new.clone()).unwrap();
        assert!(!fresh.last_stats.replayed);
        assert_eq!(bits(&got), bits(&plain), "{stem}: replay vs executor");
        // Another session used the device meanwhile, and the pool gave its buffers back.
        let again = g.run(new.clone()).unwrap();
        assert_eq!(bits(&again), bits(&plain), "{stem}: after another session");
        // Released buffers: the run falls back to the executor, still right.
        dev.empty_cache().unwrap();
        let after = g.run(new).unwrap();
        assert!(!g.last_stats.replayed, "{stem}: empty_cache drops the tape");
        assert_eq!(bits(&after), bits(&plain), "{stem}: after empty_cache");
    }
}

#[test]
fn state_written_in_place_is_replayed_and_declared_mutations_are_not() {
    let Some(dev) = device() else { return };
    // mutate_buffer: training IR, running statistics updated in place by the graph's nodes;
    // mutate_buffer_core: the same module in core ATen, mutations as outputs written back.
    for (stem, replays) in [("mutate_buffer", true), ("mutate_buffer_core", false)] {
        let (p, ins, _) = fixture(stem);
        let mut g = GpuSession::new(p.clone(), dev.clone()).unwrap();
        let mut cpu = Session::new(p).unwrap();
        let mut replayed = 0;
        for run in 0..6 {
            let a = g.run(ins.clone()).unwrap();
            let b = cpu.run(ins.clone()).unwrap();
            replayed += g.last_stats.replayed as u32;
            for (x, y) in a.iter().zip(&b) {
                let (max, _) = metrics(x.as_tensor().unwrap(), y.as_tensor().unwrap());
                assert!(max < 1e-5, "{stem} run {run}: GPU vs CPU {max}");
            }
        }
        assert_eq!(replayed > 0, replays, "{stem}: {replayed} replays");
        // The state after six runs, read from wherever it is current, is the CPU session's.
        for (name, want) in &cpu.state {
            let got = g.state_tensor(name).unwrap();
            let (max, _) = metrics(&got, want);
            assert!(max < 1e-5, "{stem}: state '{name}' differs by {max}");
        }
    }
}

/// The training IR's shifted-window attention (tests/passes.rs
/// `swin_training_ir_attention_fuses`) runs on the GPU with every pass: no node falls back,
/// the attention is one kernel, and the output is PyTorch's.
#[test]
fn swin_training_ir_runs_fused_on_the_gpu() {
    let Some(dev) = device() else { return };
    let (p, ins, want) = fixture("swin_block_train");
    let mut g = GpuSession::new(p, dev).unwrap();
    for run in 0..2 {
        let got = g.run(ins.clone()).unwrap();
        assert_matches_torch_within(&got, &want, 1e-4, &format!("run {run}"));
        assert!(
            g.last_stats.fallbacks.is_empty(),
            "{:?}",
            g.last_stats.fallbacks
        );
    }
}

fn assert_matches_torch_within(got: &[RValue], want: &[Tensor], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        let (max, _) = metrics(g.as_tensor().unwrap(), w);
        assert!(max < tol, "{what}: max abs error {max}");
    }
}

/// Reinplaced buffer updates (tests/passes.rs `buffer_updates_are_reinplaced`) stay on the
/// GPU: a run reads back its user output only, warm runs replay, and six runs give the
/// outputs and buffers of a CPU session with no passes (functional updates written back).
#[test]
fn reinplaced_state_stays_on_the_gpu() {
    use pt2web::backends::PassSet;
    let Some(dev) = device() else { return };
    let (p, ins, _) = fixture("kv_cache_core");
    let mut plain = p.clone();
    pt2web::passes::run(&mut plain, PassSet::ALL);
    assert!((0..3).all(|i| plain.mutation_in_place(i)));
    let mut g = GpuSession::new(plain, dev.clone()).unwrap();
    let mut cpu = Session::with_passes(p, PassSet::NONE).unwrap();
    assert!((0..3).all(|i| !cpu.program.mutation_in_place(i)));
    let mut replayed = 0;
    for run in 0..6 {
        let a = g.run(ins.clone()).unwrap();
        let b = cpu.run(ins.clone()).unwrap();
        replayed += g.last_stats.replayed as u32;
        assert_eq!(
            g.last_stats.downloads, 1,
            "run {run}: only the user output comes back"
        );
        for (x, y) in a.iter().zip(&b) {
            let (max, _) = metrics(x.as_tensor().unwrap(), y.as_tensor().unwrap());
            assert!(max < 1e-4, "run {run}: GPU vs CPU {max}");
        }
    }
    assert!(replayed > 0, "no replays");
    // The tape repeats the index range checks: an out-of-range position is torch's error,
    // not a replay that writes nowhere, and the session runs on.
    let mut bad = ins.clone();
    bad[1] = RValue::Tensor(Tensor::from_vec(vec![9i64, 3], &[2]));
    let e = g.run(bad.clone()).unwrap_err().to_string();
    let ec = cpu.run(bad).unwrap_err().to_string();
    assert!(e.contains("index"), "{e}");
    eprintln!("out of range: GPU: {e}; CPU: {ec}");
    let a = g.run(ins.clone()).unwrap();
    let b = cpu.run(ins.clone()).unwrap();
    let (max, _) = metrics(a[0].as_tensor().unwrap(), b[0].as_tensor().unwrap());
    assert!(max < 1e-4, "after the error: GPU vs CPU {max}");
    for name in ["k", "v", "hits"] {
        let got = g.state_tensor(name).unwrap();
        let (max, _) = metrics(&got, &cpu.state[name]);
        assert!(max < 1e-4, "state '{name}' differs by {max}");
    }
}

/// Weights in the form the CPU kernels read them (packed GEMM panels) are derived on the
/// first run and reused by the next; a state tensor replaced between runs is derived again,
/// so the run computes with the new weights (as a fresh session given them does).
#[test]
fn prepared_weights_are_made_once_and_follow_a_replaced_state_tensor() {
    let (p, ins, want) = fixture("convnet_core");
    let mut s = Session::new(p.clone()).unwrap();
    let first = s.run(ins.clone()).unwrap();
    assert_matches_torch(&first, &want, "first run");
    let made = s.run_state.prepared.made;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        assert!(made > 0, "the convolutions' weights were packed");
    }
    let again = s.run(ins.clone()).unwrap();
    assert_eq!(bits(&again), bits(&first));
    assert_eq!(
        s.run_state.prepared.made, made,
        "a second run derives nothing"
    );

    // Replace every 4-d weight (new storages) with other values.
    let names: Vec<String> = s
        .state
        .iter()
        .filter(|(_, t)| t.sizes.len() == 4)
        .map(|(n, _)| n.clone())
        .collect();
    assert!(!names.is_empty(), "convnet_core has convolution weights");
    let mut fresh = Session::new(p).unwrap();
    for n in &names {
        let RValue::Tensor(t) = other_values(&RValue::Tensor(s.state[n].clone()), 0.5) else {
            unreachable!()
        };
        s.state.insert(n.clone(), t.clone());
        fresh.state.insert(n.clone(), t);
    }
    let replaced = s.run(ins.clone()).unwrap();
    assert_ne!(
        bits(&replaced),
        bits(&first),
        "the new weights changed the result"
    );
    assert_eq!(bits(&replaced), bits(&fresh.run(ins).unwrap()));
}
