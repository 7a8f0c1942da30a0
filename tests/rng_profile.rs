//! Process-wide device state: the default generators of every device (`pt2web::random`:
//! `manual_seed_all`, `seed_all`, `get_rng_state_all`, `set_rng_state_all`), profiler scopes
//! (`pt2web::profiler`) and the GPU's verbose kernel log. These are global, so the tests of
//! this binary take turns ([`LOCK`]). GPU parts skip without an adapter unless
//! PT2WEB_REQUIRE_GPU=1.
//!
//! The random programs are the `factory` op cases (tests/fixgen/ops/factory.py): their
//! outputs are PyTorch's checks of the draws (in range, mean and spread), so two runs draw the
//! same numbers exactly when they start from the same generator state (the draws are a
//! function of it, `src/gpu/random.rs`); the tests compare states and outputs.

mod common;

use pt2web::archive::pt2::LoadOptions;
use pt2web::backends;
use pt2web::gpu::{GpuDevice, GpuSession};
use pt2web::program::{Program, Pt2Archive};
use pt2web::runtime::{RValue, Session};
use pt2web::{profiler, random, Error, Limits};
use std::sync::{Arc, Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `factory` op case's program and the inputs of its call.
fn factory(name: &str) -> (Program, Vec<RValue>) {
    let file = common::fixtures().join("ops/factory.pt2");
    let archive = Pt2Archive::open(
        "factory.pt2",
        std::fs::read(file).unwrap(),
        Limits::default(),
    )
    .unwrap();
    let program = archive
        .program(Some(name), &LoadOptions::default())
        .unwrap();
    let io_bytes = std::fs::read(common::fixtures().join("ops/factory.io.safetensors")).unwrap();
    let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
    let inputs = (0..program.user_inputs().len())
        .map(|i| {
            let t = io.tensor(&format!("{name}/input_{i}")).unwrap();
            RValue::Tensor(common::to_tensor(&t))
        })
        .collect();
    (program, inputs)
}

/// A model as the tests drive it: a CPU or a GPU session.
enum Model {
    Cpu(Box<Session>),
    Gpu(Box<GpuSession>),
}

impl Model {
    fn new(p: &Program, dev: Option<&Arc<GpuDevice>>) -> Model {
        match dev {
            None => Model::Cpu(Box::new(Session::new(p.clone()).unwrap())),
            Some(d) => Model::Gpu(Box::new(GpuSession::new(p.clone(), d.clone()).unwrap())),
        }
    }
    fn run(&mut self, inputs: &[RValue]) -> Vec<Vec<f64>> {
        let outs = match self {
            Model::Cpu(s) => s.run(inputs.to_vec()),
            Model::Gpu(s) => s.run(inputs.to_vec()),
        };
        outs.unwrap()
            .iter()
            .filter_map(|v| v.as_tensor().map(|t| t.to_vec::<f64>()))
            .collect()
    }
    fn rng_state(&self) -> Vec<u8> {
        match self {
            Model::Cpu(s) => s.get_rng_state(),
            Model::Gpu(s) => s.get_rng_state(),
        }
    }
    fn manual_seed(&mut self, seed: u64) {
        match self {
            Model::Cpu(s) => s.manual_seed(seed),
            Model::Gpu(s) => s.manual_seed(seed),
        }
    }
}

/// After `manual_seed_all(s)` two fresh models continue one stream: the first draws what a
/// model seeded with `manual_seed(s)` draws in its first run, the second what it draws in
/// its second. A model given its own seed keeps its own stream.
fn fresh_models_share_the_default_generator(dev: Option<&Arc<GpuDevice>>, what: &str) {
    for name in ["randn", "dropout_train", "bernoulli__core"] {
        let (p, inputs) = factory(name);
        let mut seeded = Model::new(&p, dev);
        seeded.manual_seed(1234);
        let want1 = seeded.run(&inputs);
        let state1 = seeded.rng_state();
        let want2 = seeded.run(&inputs);
        let state2 = seeded.rng_state();
        assert_ne!(state1, state2, "{what} {name}: the program draws");

        random::manual_seed_all(1234);
        let (mut a, mut b) = (Model::new(&p, dev), Model::new(&p, dev));
        // Before any run both read the default generator, seeded now.
        assert_eq!(a.rng_state(), b.rng_state(), "{what} {name}");
        assert_eq!(a.run(&inputs), want1, "{what} {name}: first model");
        assert_eq!(
            a.rng_state(),
            state1,
            "{what} {name}: after the first model"
        );
        assert_eq!(
            b.rng_state(),
            state1,
            "{what} {name}: one generator for both"
        );
        assert_eq!(b.run(&inputs), want2, "{what} {name}: second model");
        assert_eq!(
            b.rng_state(),
            state2,
            "{what} {name}: after the second model"
        );

        // Its own seed: its own stream, the default generator left where it was.
        let mut own = Model::new(&p, dev);
        own.manual_seed(1234);
        assert_eq!(own.run(&inputs), want1, "{what} {name}: own seed");
        assert_eq!(own.rng_state(), state1, "{what} {name}: own stream");
        assert_eq!(
            a.rng_state(),
            state2,
            "{what} {name}: default generator untouched"
        );
    }
}

#[test]
fn manual_seed_all_gives_fresh_models_one_stream_cpu() {
    let _t = turn();
    fresh_models_share_the_default_generator(None, "cpu");
}

#[test]
fn manual_seed_all_gives_fresh_models_one_stream_gpu() {
    let _t = turn();
    let Some(dev) = common::gpu_device() else {
        return;
    };
    fresh_models_share_the_default_generator(Some(&dev), "gpu");
    // The CPU and the GPU have a generator each, both seeded by manual_seed_all.
    let (p, inputs) = factory("randn");
    random::manual_seed_all(99);
    let (mut cpu, mut gpu) = (Model::new(&p, None), Model::new(&p, Some(&dev)));
    assert_eq!(cpu.run(&inputs), gpu.run(&inputs));
    assert_eq!(cpu.rng_state(), gpu.rng_state());
    let states = random::get_rng_state_all();
    assert_eq!(states.len(), 2, "the CPU and the one GPU device open");
    assert_eq!(states[0], cpu.rng_state());
    assert_eq!(states[1], gpu.rng_state());
    drop((cpu, gpu));
    drop(dev);
    assert_eq!(
        random::get_rng_state_all().len(),
        1,
        "a closed device leaves the list"
    );
}

#[test]
fn rng_state_all_round_trip_and_bad_states() {
    let _t = turn();
    let dev = common::gpu_device();
    let (p, inputs) = factory("rand");
    let seed = random::seed_all();
    let states = random::get_rng_state_all();
    assert_eq!(states.len(), 1 + dev.iter().count());
    assert!(states.iter().all(|s| s.len() == 16));
    let seed_of = |s: &[u8]| u64::from_le_bytes(s[8..16].try_into().unwrap());
    assert!(
        states.iter().all(|s| seed_of(s) == seed),
        "seed_all: one seed"
    );
    let run_all = || {
        let mut outs = vec![Model::new(&p, None).run(&inputs)];
        if let Some(d) = &dev {
            outs.push(Model::new(&p, Some(d)).run(&inputs));
        }
        (outs, random::get_rng_state_all())
    };
    let (first, after) = run_all();
    assert_ne!(after, states, "the runs drew");
    random::set_rng_state_all(&states).unwrap();
    assert_eq!(
        run_all(),
        (first, after),
        "restored states draw the same again"
    );

    // Malformed: the wrong count, a state of the wrong length. Nothing is set then.
    let before = random::get_rng_state_all();
    let err = random::set_rng_state_all(&states[..0]).unwrap_err();
    assert!(matches!(err, Error::Input { .. }), "{err}");
    assert!(err.to_string().contains("got 0"), "{err}");
    let mut bad = states.clone();
    let last = bad.len() - 1;
    bad[last] = vec![1, 2, 3];
    let err = random::set_rng_state_all(&bad).unwrap_err();
    assert!(matches!(err, Error::Input { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("rng_states[{last}]")) && msg.contains("got 3"),
        "{msg}"
    );
    assert_eq!(random::get_rng_state_all(), before);
}

/// Two models (one on the GPU where there is one) run in one scope: both in its profile,
/// each with its own nodes; nothing captured outside it.
#[test]
fn profile_scope_captures_every_model() {
    let _t = turn();
    let (mlp, mlp_in, _) = common::first_io_case("mlp_core");
    let (conv, conv_in, _) = common::first_io_case("convnet_core");
    let tensors = |v: Vec<pt2web::cpu::Tensor>| -> Vec<RValue> {
        v.into_iter().map(RValue::Tensor).collect()
    };
    let (mlp_in, conv_in) = (tensors(mlp_in), tensors(conv_in));
    let dev = common::gpu_device();
    let mut a = Model::new(&mlp, None);
    let mut b = Model::new(&conv, dev.as_ref());
    // A model's own profiler keeps working inside a scope.
    if let Model::Cpu(s) = &mut a {
        s.run_state.profiler = Some(Default::default());
    }
    a.run(&mlp_in);
    assert!(!profiler::is_capturing());
    let ((), prof) = profiler::profile(|| {
        assert!(profiler::is_capturing());
        a.run(&mlp_in);
        b.run(&conv_in);
    });
    assert!(!profiler::is_capturing());
    let sessions = prof.sessions();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let device_b = if dev.is_some() { "gpu" } else { "cpu" };
    for (i, (program, device)) in [(&mlp, "cpu"), (&conv, device_b)].into_iter().enumerate() {
        let (session, _) = sessions[i];
        let events: Vec<_> = prof
            .events
            .iter()
            .filter(|e| e.session == session)
            .collect();
        assert!(events
            .iter()
            .all(|e| e.device == device && e.model == program.name));
        assert!(events.iter().all(|e| e.start_ms >= 0.0 && e.dur_ms >= 0.0));
        let nodes: Vec<&str> = program
            .graph
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert!(
            events.iter().all(|e| nodes.contains(&e.node.as_str())),
            "session {session}: {events:?}"
        );
        let ops = |t: &str| events.iter().any(|e| e.op == t);
        assert!(
            ops("aten.addmm.default"),
            "session {session} ran its matmul: {events:?}"
        );
    }
    // The first model's own profiler has both of its runs.
    if let Model::Cpu(s) = &mut a {
        let own = s.run_state.profiler.take().unwrap();
        let scoped = prof.events.iter().filter(|e| e.session == sessions[0].0);
        assert_eq!(own.events.len(), 2 * scoped.count());
    }
    // Runs after the scope are nobody's.
    a.run(&mlp_in);
    let ((), empty) = profiler::profile(|| ());
    assert!(empty.events.is_empty());
}

/// `start(path)` / `stop()`: the Chrome trace file is JSON with `traceEvents` naming the ops
/// and one process per session.
#[test]
fn profiler_start_stop_writes_a_chrome_trace() {
    let _t = turn();
    let (mlp, mlp_in, _) = common::first_io_case("mlp_core");
    let mlp_in: Vec<RValue> = mlp_in.into_iter().map(RValue::Tensor).collect();
    let path = std::env::temp_dir().join(format!("pt2web_trace_{}.json", std::process::id()));
    assert!(profiler::stop().is_err(), "not started");
    profiler::start(&path).unwrap();
    assert!(profiler::start(&path).is_err(), "started twice");
    assert!(profiler::is_capturing());
    let (mut a, mut b) = (Model::new(&mlp, None), Model::new(&mlp, None));
    a.run(&mlp_in);
    b.run(&mlp_in);
    let prof = profiler::stop().unwrap();
    assert!(!profiler::is_capturing());
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).ok();
    let events = trace["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = events.iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "process_name").count(),
        2,
        "two sessions: {names:?}"
    );
    let addmm = names.iter().filter(|n| **n == "aten.addmm.default").count();
    assert_eq!(addmm, 4, "two addmm per run, two runs: {names:?}");
    assert_eq!(events.len(), prof.events.len() + 2);
    // Unwritable: an input error naming the path, and the profiler stopped.
    profiler::start(path.join("no/such/dir")).unwrap();
    let err = profiler::stop().unwrap_err();
    assert!(err.to_string().contains("no/such/dir"), "{err}");
    assert!(!profiler::is_capturing());
}

/// With the verbose log on, a GPU run writes one line per node naming the shader variants
/// its kernel chose: a convolution's from conv.wgsl, a matmul's from a matmul shader.
#[test]
fn gpu_verbose_lines_name_the_kernel_variant() {
    let _t = turn();
    let Some(dev) = common::gpu_device() else {
        return;
    };
    let (conv, conv_in, _) = common::first_io_case("convnet_core");
    let conv_in: Vec<RValue> = conv_in.into_iter().map(RValue::Tensor).collect();
    // Without the graph passes the convolutions stay `aten.convolution` nodes (not fused
    // with their relu).
    let passes = backends::graph_passes();
    backends::set_graph_passes(backends::PassSet::NONE);
    let s = GpuSession::new(conv.clone(), dev.clone());
    backends::set_graph_passes(passes);
    let mut s = s.unwrap();
    s.run(conv_in.clone()).unwrap();
    let (on, off, lines) = common::verbose_lines(|| s.run(conv_in.clone()));
    on.unwrap();
    off.unwrap();
    eprintln!("{}", lines.join("\n"));
    let clock = if dev.has_timestamps() {
        "gpu-timestamp"
    } else {
        "host"
    };
    let fields = |target: &str| -> Vec<Vec<String>> {
        lines
            .iter()
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .filter(|f| f[2] == target)
            .collect()
    };
    let convs = fields("aten.convolution.default");
    let mms = fields("aten.addmm.default");
    assert!(!convs.is_empty() && !mms.is_empty(), "{lines:#?}");
    for f in convs.iter().chain(&mms) {
        assert_eq!(f.len(), 8, "{f:?}");
        assert_eq!(f[..2], ["pt2web_verbose", "gpu"], "{f:?}");
        assert!(f[4].contains("float32["), "input shapes: {f:?}");
        assert!(f[6].ends_with(" ms"), "{f:?}");
        assert_eq!(f[7], clock, "{f:?}");
    }
    let conv_variants = ["conv", "conv_tiled", "im2col", "depthwise", "depthwise2d"];
    for f in &convs {
        let first = f[5].split('+').next().unwrap_or_default();
        let entry = first.strip_prefix("conv.wgsl:").unwrap_or_default();
        assert!(conv_variants.contains(&entry), "a conv variant: {f:?}");
    }
    for f in &mms {
        assert!(
            f[5].split('+').all(|v| v.starts_with("matmul")),
            "a matmul variant: {f:?}"
        );
    }
    // One line per node, in order; views dispatch nothing and keep their host time.
    let names: Vec<&str> = conv.graph.nodes.iter().map(|n| n.name.as_str()).collect();
    let logged: Vec<&str> = lines.iter().filter_map(|l| l.split(',').nth(3)).collect();
    assert_eq!(logged, names);
    for l in lines.iter().filter(|l| l.split(',').nth(5) == Some("gpu")) {
        assert!(l.ends_with(",host"), "{l}");
    }
}
