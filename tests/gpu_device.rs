//! The device API beyond memory statistics: events, the GPU profiler, seeded random ops with
//! the CPU's streams, user shaders, backend switches and a no-leak run of resnet18. Without a
//! GPU adapter the tests skip with a message, unless PT2WEB_REQUIRE_GPU=1 (CI).

mod common;

use pt2web::archive::pt2::LoadOptions;
use pt2web::cpu::Tensor;
use pt2web::gpu::{BackendChoice, Event, GpuDevice, GpuSession, Timing};
use pt2web::program::{Program, Pt2Archive};
use pt2web::runtime::{RValue, Session};
use pt2web::{DType, Limits};
use std::path::Path;
use std::sync::Arc;

fn device() -> Option<Arc<GpuDevice>> {
    let backend = std::env::var("PT2WEB_GPU_BACKEND")
        .ok()
        .map(|b| BackendChoice::parse(&b).unwrap())
        .unwrap_or_default();
    match GpuDevice::open(backend, None) {
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

/// A kernel that does real work: `iters` multiply-adds per element of `out`.
const BUSY: &str = r#"
@group(0) @binding(0) var<storage, read> iters: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn busy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * 65535u * 64u;
    if i >= arrayLength(&out) {
        return;
    }
    var x = f32(i) * 1e-6;
    for (var k = 0u; k < iters[0]; k = k + 1u) {
        x = x * 0.999 + 0.001;
    }
    out[i] = x;
}
"#;

#[test]
fn events_time_real_work() {
    let Some(dev) = device() else { return };
    let sh = dev.compile_shader(BUSY).unwrap();
    let n = 1 << 16;
    let iters = Tensor::from_data(pt2web::cpu::Data::I32(vec![2000]), &[1]);
    let out = Tensor::from_vec(vec![0f32; n], &[n]);
    let (start, end) = (Event::new(), Event::new());
    assert!(end.query(), "an unrecorded event counts as done");
    start.record(&dev).unwrap();
    sh.call(&dev, "busy", &[&iters, &out], ((n / 64) as u32, 1, 1))
        .unwrap();
    end.record(&dev).unwrap();
    end.synchronize().unwrap();
    assert!(end.query());
    let ms = start.elapsed_time(&end).unwrap();
    eprintln!(
        "events: {:.3} ms around {n} x 2000 multiply-adds ({:?})",
        ms,
        end.timing().unwrap()
    );
    assert!(ms > 0.0, "elapsed {ms} ms");
    if dev.has_timestamps() {
        assert_eq!(start.timing(), Some(Timing::GpuTimestamp));
    }
    // A second pair with no work between them: small but not negative.
    let (a, b) = (Event::new(), Event::new());
    a.record(&dev).unwrap();
    b.record(&dev).unwrap();
    let idle = a.elapsed_time(&b).unwrap();
    eprintln!("events: {idle:.4} ms with nothing between them");
    assert!(idle >= 0.0 && idle < ms, "idle {idle} ms vs busy {ms} ms");
}

fn fixture_program(file: &str, name: Option<&str>) -> Program {
    let path = common::fixtures().join(file);
    let archive = Pt2Archive::open(file, std::fs::read(path).unwrap(), Limits::default()).unwrap();
    archive.program(name, &LoadOptions::default()).unwrap()
}

fn io_inputs(file: &str, prefix: &str, n: usize) -> Vec<RValue> {
    let bytes = std::fs::read(common::fixtures().join(file)).unwrap();
    let io = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    (0..n)
        .map(|i| {
            RValue::Tensor(common::to_tensor(
                &io.tensor(&format!("{prefix}input_{i}")).unwrap(),
            ))
        })
        .collect()
}

#[test]
fn profiler_times_gpu_kernels() {
    let Some(dev) = device() else { return };
    if !dev.has_timestamps() {
        eprintln!("SKIPPED: the adapter has no timestamp-query");
        return;
    }
    let p = fixture_program("tiny_gpt2.pt2", None);
    let n = p.user_inputs().len();
    let inputs = io_inputs("tiny_gpt2.io.safetensors", "", n);
    let mut s = GpuSession::new(p, dev).unwrap();
    s.run(inputs.clone()).unwrap();
    s.cpu.run_state.profiler = Some(Default::default());
    s.run(inputs).unwrap();
    let prof = s.cpu.run_state.profiler.take().unwrap();
    let trace = prof.chrome_trace("gpu");
    let text = serde_json::to_string(&trace).unwrap();
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = back["traceEvents"].as_array().unwrap();
    assert!(!events.is_empty(), "no GPU events in the trace");
    let positive = events
        .iter()
        .filter(|e| e["dur"].as_f64().unwrap() > 0.0)
        .count();
    let summary = prof.summary();
    eprintln!(
        "profiler: {} GPU events ({} with positive duration), {} GPU nodes; top: {:?}",
        events.len(),
        positive,
        s.last_stats.gpu_nodes,
        summary
            .iter()
            .take(3)
            .map(|o| format!("{} {}x {:.3} ms", o.target, o.count, o.total_ms))
            .collect::<Vec<_>>()
    );
    assert!(positive > 0 && positive * 2 >= events.len());
    // GPU kernels carry GPU timestamps; CPU-fallback nodes are host-timed events of their own.
    let count = |cat: &str| events.iter().filter(|e| e["cat"] == cat).count() as u64;
    assert!(count("gpu") > 0 && count("gpu") <= s.last_stats.gpu_nodes);
    assert_eq!(count("fallback"), s.last_stats.fallback_nodes());
    assert_eq!(count("gpu") + count("fallback"), events.len() as u64);
    assert!(events
        .iter()
        .all(|e| (e["cat"] == "gpu") == (e["args"]["clock"] == "gpu-timestamp")));
    assert_eq!(back["otherData"]["gpuTiming"], "timestamp");
    assert!(summary.iter().all(|o| o.total_ms >= 0.0));
}

/// The same seeded programs on the CPU and the GPU: same numbers, same generator state after.
#[test]
fn seeded_random_ops_match_cpu() {
    let Some(dev) = device() else { return };
    let archive = Pt2Archive::open(
        "factory.pt2",
        std::fs::read(common::fixtures().join("ops/factory.pt2")).unwrap(),
        Limits::default(),
    )
    .unwrap();
    let io_bytes = std::fs::read(common::fixtures().join("ops/factory.io.safetensors")).unwrap();
    let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
    let random_ops = [
        "aten.rand.default",
        "aten.randn.default",
        "aten.rand_like.default",
        "aten.uniform.default",
        "aten.normal_functional.default",
        "aten.bernoulli.default",
        "aten.bernoulli.p",
        "aten.dropout.default",
        "aten.native_dropout.default",
        "aten.uniform_.default",
        "aten.normal_.default",
        "aten.randint.default",
        "aten.randint.low",
        "aten.normal.Tensor_float",
        "aten.feature_dropout.default",
        "aten.exponential.default",
        "aten.exponential_.default",
        "aten.randperm.default",
        "aten.multinomial.default",
        "aten._scaled_dot_product_attention_math.default",
        "aten.scaled_dot_product_attention.default",
    ];
    let mut on_gpu = 0;
    for pname in [
        "rand",
        "rand__core",
        "randn",
        "randn__core",
        "rand_like",
        "bernoulli",
        "bernoulli__core",
        "dropout_train",
        "dropout_train__core",
        "feature_dropout_train",
        "feature_dropout_train__core",
        "randint",
        "randint__core",
        "normal_tensor_mean",
        "normal_tensor_mean__core",
        "randperm_exponential",
        "randperm_exponential__core",
        "multinomial_replacement",
        "multinomial_replacement__core",
        "multinomial_no_replacement",
        "multinomial_no_replacement__core",
        "sdpa_dropout",
    ] {
        let program = archive
            .program(Some(pname), &LoadOptions::default())
            .unwrap();
        let n_in = program.user_inputs().len();
        let inputs: Vec<RValue> = (0..n_in)
            .map(|i| {
                RValue::Tensor(common::to_tensor(
                    &io.tensor(&format!("{pname}/input_{i}")).unwrap(),
                ))
            })
            .collect();
        let mut cpu = Session::new(program.clone()).unwrap();
        let mut gpu = GpuSession::new(program, dev.clone()).unwrap();
        cpu.manual_seed(1234);
        gpu.manual_seed(1234);
        assert_eq!(gpu.initial_seed(), 1234);
        // Two runs: the second starts from the state the first left.
        for run in 0..2 {
            let want = cpu.run(inputs.clone()).unwrap();
            let got = gpu.run(inputs.clone()).unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (RValue::Tensor(g), RValue::Tensor(w)) = (g, w) else {
                    continue;
                };
                assert_eq!(g.sizes, w.sizes, "{pname} output {i}");
                let (gv, wv) = (g.to_vec::<f64>(), w.to_vec::<f64>());
                let tol = if pname.starts_with("randn") {
                    1e-4
                } else {
                    1e-5
                };
                for (j, (a, b)) in gv.iter().zip(&wv).enumerate() {
                    assert!(
                        (a - b).abs() <= tol * (1.0 + b.abs()),
                        "{pname} run {run} output {i}[{j}]: gpu {a}, cpu {b}"
                    );
                }
            }
            assert_eq!(
                gpu.get_rng_state(),
                cpu.get_rng_state(),
                "{pname} run {run}: generator state"
            );
        }
        let fell_back: Vec<&String> = gpu
            .last_stats
            .fallbacks
            .keys()
            .filter(|k| random_ops.contains(&k.as_str()))
            .collect();
        let ran: Vec<&str> = random_ops
            .iter()
            .filter(|op| {
                gpu.cpu.program.graph.op_histogram().contains_key(**op)
                    && !fell_back.contains(&&op.to_string())
            })
            .copied()
            .collect();
        eprintln!("{pname}: random ops on the gpu {ran:?}, on the cpu {fell_back:?}");
        on_gpu += ran.len();
    }
    assert!(on_gpu >= 26, "only {on_gpu} random ops ran on the GPU");
    // get/set_rng_state round trip.
    let mut s = Session::new(fixture_program("ops/factory.pt2", Some("rand"))).unwrap();
    s.manual_seed(7);
    let st = s.get_rng_state();
    assert_eq!(st.len(), 16);
    s.set_rng_state(&st).unwrap();
    assert_eq!(s.initial_seed(), 7);
    assert!(s.set_rng_state(&[1, 2, 3]).is_err());
}

const MULADD: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn muladd(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i < arrayLength(&out) {
        out[i] = a[i] * b[i] + 1.0;
    }
}

@compute @workgroup_size(8, 8)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[0] = 3.0;
}
"#;

/// The futures the browser uses (`compile_shader_async`, `call_async`,
/// `synchronize_async`, `elapsed_time_async`) give what the blocking calls give.
#[test]
fn async_variants_match_blocking_calls() {
    let Some(dev) = device() else { return };
    let sh = pollster::block_on(dev.compile_shader_async(MULADD)).unwrap();
    let n = 300;
    let a = Tensor::from_vec((0..n).map(|i| i as f32).collect::<Vec<_>>(), &[n]);
    let b = Tensor::from_vec(vec![2f32; n], &[n]);
    let out = Tensor::zeros(DType::F32, &[n]).unwrap();
    let (start, end) = (Event::new(), Event::new());
    start.record(&dev).unwrap();
    let res =
        pollster::block_on(sh.call_async(&dev, "muladd", &[&a, &b, &out], (5, 1, 1))).unwrap();
    end.record(&dev).unwrap();
    pollster::block_on(end.synchronize_async()).unwrap();
    assert!(end.query());
    let ms = pollster::block_on(start.elapsed_time_async(&end)).unwrap();
    eprintln!("async events: {ms:.4} ms ({:?})", end.timing().unwrap());
    assert!(ms >= 0.0);
    let want: Vec<f32> = (0..n).map(|i| i as f32 * 2.0 + 1.0).collect();
    assert_eq!(res[2].to_vec::<f32>(), want);
    let e = pollster::block_on(dev.compile_shader_async("fn main( {"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("parse error at line 1"), "{e}");
}

#[test]
fn user_shader_runs_and_reports_errors() {
    let Some(dev) = device() else { return };
    let sh = dev.compile_shader(MULADD).unwrap();
    let names: Vec<&str> = sh.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["muladd", "fill"]);
    let muladd = &sh.entries()[0];
    assert_eq!(muladd.workgroup_size, [64, 1, 1]);
    let bind: Vec<(u32, &str, &str, bool)> = muladd
        .bindings
        .iter()
        .map(|b| (b.binding, b.name.as_str(), b.elem.as_str(), b.writable()))
        .collect();
    assert_eq!(
        bind,
        [
            (0, "a", "f32", false),
            (1, "b", "f32", false),
            (2, "out", "f32", true)
        ]
    );
    assert_eq!(sh.entries()[1].bindings.len(), 1, "fill uses only `out`");
    let n = 1000;
    let a = Tensor::from_vec((0..n).map(|i| i as f32).collect::<Vec<_>>(), &[n]);
    let b = Tensor::from_vec((0..n).map(|i| 0.5 * i as f32).collect::<Vec<_>>(), &[n]);
    let out = Tensor::zeros(DType::F32, &[n]).unwrap();
    let res = sh
        .call(&dev, "muladd", &[&a, &b, &out], (16, 1, 1))
        .unwrap();
    let want: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 * i as f32 + 1.0).collect();
    assert_eq!(out.to_vec::<f32>(), want, "written back into `out`");
    assert_eq!(res[2].to_vec::<f32>(), want);
    assert_eq!(res[0].to_vec::<f32>(), a.to_vec::<f32>());
    // Wrong arguments: named errors.
    let e = sh.call(&dev, "muladd", &[&a, &b], (1, 1, 1)).unwrap_err();
    assert!(e.to_string().contains("takes 3 tensors (a, b, out)"), "{e}");
    let e = sh.call(&dev, "nope", &[&a], (1, 1, 1)).unwrap_err();
    assert!(e.to_string().contains("muladd, fill"), "{e}");
    let ints = Tensor::from_data(pt2web::cpu::Data::I32(vec![1; n]), &[n]);
    let e = sh
        .call(&dev, "muladd", &[&ints, &b, &out], (1, 1, 1))
        .unwrap_err();
    assert!(e.to_string().contains("array<f32>, got a int32"), "{e}");
    // A broken shader: naga's message with the line.
    let broken = "@compute @workgroup_size(1)\nfn main() {\n    let x: f32 = 1u;\n}\n";
    let e = dev.compile_shader(broken).unwrap_err().to_string();
    eprintln!("{e}");
    assert!(e.contains("line 3"), "{e}");
    let e = dev.compile_shader("fn main( {").unwrap_err().to_string();
    assert!(e.contains("parse error at line 1"), "{e}");
    // The device is still usable.
    let out2 = Tensor::zeros(DType::F32, &[n]).unwrap();
    sh.call(&dev, "muladd", &[&a, &b, &out2], (16, 1, 1))
        .unwrap();
    assert_eq!(out2.to_vec::<f32>(), want);
}

/// Held by the tests that read or set the process-wide backend switches (tests run in
/// parallel threads of one process).
static SWITCHES: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn backend_switches() {
    use pt2web::backends::{self, Attention, Backend};
    let _switches = SWITCHES.lock().unwrap_or_else(|e| e.into_inner());
    assert!(backends::is_built(Backend::Cpu) && backends::is_available(Backend::Cpu));
    assert!(!backends::is_built(Backend::WebGpu), "native build");
    for b in Backend::ALL {
        eprintln!("backend {:<7} built {:<5}", b.name(), backends::is_built(b));
    }
    if let Some(dev) = device() {
        let b = match dev.properties.backend.as_str() {
            "vulkan" => Backend::Vulkan,
            "metal" => Backend::Metal,
            "dx12" => Backend::Dx12,
            _ => Backend::Gl,
        };
        assert!(backends::is_built(b) && backends::is_available(b));
    }
    assert_eq!(Attention::parse("math"), Some(Attention::Math));
    assert_eq!(Attention::parse("flash"), Some(Attention::Streaming));
    assert_eq!(backends::attention(), Attention::Streaming);
    assert!(!backends::deterministic() && !backends::allow_f16_reduced_precision());
}

/// Both attention implementations on the attention op family: same results as PyTorch.
/// (Process-wide switch: this is the only test of the binary that runs attention.)
#[test]
fn attention_math_and_streaming_agree() {
    use pt2web::backends::{self, Attention};
    let _switches = SWITCHES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::fixtures().join("ops");
    let archive = Pt2Archive::open(
        "attention.pt2",
        std::fs::read(dir.join("attention.pt2")).unwrap(),
        Limits::default(),
    )
    .unwrap();
    let cases: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("attention.cases.json")).unwrap()).unwrap();
    let io_bytes = std::fs::read(dir.join("attention.io.safetensors")).unwrap();
    let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
    let mut compared = 0;
    for c in cases["cases"].as_array().unwrap() {
        let pname = c["program"].as_str().unwrap();
        let inputs = common::case_inputs(&io, c);
        let program = archive
            .program(Some(pname), &LoadOptions::default())
            .unwrap();
        let mut outs = Vec::new();
        for a in [Attention::Math, Attention::Streaming] {
            backends::set_attention(a);
            let mut s = Session::new(program.clone()).unwrap();
            outs.push(s.run(inputs.clone()));
        }
        backends::set_attention(Attention::Streaming);
        let (Ok(m), Ok(st)) = (&outs[0], &outs[1]) else {
            assert_eq!(outs[0].is_err(), outs[1].is_err(), "{pname}");
            continue;
        };
        for (x, y) in m.iter().zip(st) {
            if let (RValue::Tensor(x), RValue::Tensor(y)) = (x, y) {
                // The two forms round differently in the f32 they compute in (the streaming
                // one normalizes once, at the end): within 1e-5 (and 1e-5 of the value: a
                // logsumexp over 70,000 keys is near 11), or one step of a half output's
                // rounding.
                let (d, _) = common::metrics(x, y);
                let tol = match x.dtype {
                    pt2web::DType::F16 => 1e-3,
                    pt2web::DType::BF16 => 8e-3,
                    _ => {
                        let close = common::compare(x, y, "close");
                        assert!(close.is_ok(), "{pname}: math vs streaming: {close:?}");
                        continue;
                    }
                };
                assert!(d <= tol, "{pname}: math vs streaming differ by {d}");
            }
        }
        compared += 1;
    }
    assert!(compared > 3);
}

/// 200 runs of resnet18 (its core ATen export on 64x64 images, batch 1: `resnet18_64.core`, the
/// same weights as resnet18 with 1/12 of the work, so that 200 runs fit in CI on a CPU driver)
/// leave the allocated memory where the first run left it, and the last run still matches
/// PyTorch.
#[test]
fn resnet18_runs_do_not_leak() {
    let Some(dev) = device() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models");
    let file = dir.join("resnet18_64.core.pt2");
    if !file.exists() {
        assert!(
            std::env::var("PT2WEB_REQUIRE_MODELS").as_deref() != Ok("1"),
            "PT2WEB_REQUIRE_MODELS=1 but {} is missing (scripts/build_models.sh)",
            file.display()
        );
        eprintln!("SKIPPED: no {} (scripts/build_models.sh)", file.display());
        return;
    }
    let archive = Pt2Archive::open(
        "resnet18_64.core.pt2",
        std::fs::read(&file).unwrap(),
        Limits::default(),
    )
    .unwrap();
    let program = archive.program(None, &LoadOptions::default()).unwrap();
    let io_bytes = std::fs::read(dir.join("resnet18_64.core.io.b1.safetensors")).unwrap();
    let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
    let x = common::to_tensor(&io.tensor("input_0").unwrap());
    let want = common::to_tensor(&io.tensor("output_0").unwrap());
    assert_eq!(x.sizes, [1, 3, 64, 64]);
    // The memory plan's yardstick: state plus the meta pass's liveness peak (the most bytes
    // of inputs and intermediates alive at once).
    let inferred = pt2web::meta::infer(
        &program,
        &[pt2web::meta::MValue::Tensor(pt2web::meta::MetaTensor::new(
            DType::F32,
            x.sizes.clone(),
        ))],
    )
    .unwrap();
    let est = pt2web::meta::estimate(&program, &inferred);
    let mut s = GpuSession::new(program, dev.clone()).unwrap();
    // 200 runs; PT2WEB_LEAK_RUNS=N runs N.
    let n_runs: usize = std::env::var("PT2WEB_LEAK_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let t = std::time::Instant::now();
    s.run(vec![RValue::Tensor(x.clone())]).unwrap();
    dev.synchronize().unwrap();
    let after_first = dev.current_allocated_memory();
    let driver_first = dev.driver_allocated_memory();
    let mut runs = 1;
    let mut last = Vec::new();
    while runs < n_runs {
        last = s.run(vec![RValue::Tensor(x.clone())]).unwrap();
        runs += 1;
    }
    if let Some(RValue::Tensor(got)) = last.first() {
        let (d, cos) = common::metrics(got, &want);
        eprintln!("run {runs} vs PyTorch: max abs err {d:e}, cosine {cos}");
        assert!(d <= 1e-4, "run {runs} differs from PyTorch by {d}");
    }
    drop(last);
    dev.synchronize().unwrap();
    let after = dev.current_allocated_memory();
    eprintln!(
        "resnet18_64 x{runs} on the gpu in {:.1} s: allocated {after_first} B after the first run, \
         {after} B after the last; driver {driver_first} -> {} B; last run {} submits, {} \
         buffer allocations",
        t.elapsed().as_secs_f64(),
        dev.driver_allocated_memory(),
        s.last_stats.submits,
        s.last_stats.buffer_allocations
    );
    assert_eq!(after, after_first, "allocated memory grew over {runs} runs");
    assert_eq!(
        s.last_stats.buffer_allocations, 0,
        "warm runs allocate nothing"
    );
    let st = &s.last_stats;
    assert_eq!(st.pipelines_created, 0, "warm runs create no pipeline");
    assert_eq!(
        st.bind_groups_created, 0,
        "warm runs reuse every bind group ({} dispatches)",
        st.dispatches
    );
    // Buffers freed during the run are reused within it: above what stays resident
    // (weights), the run's peak is within twice the liveness estimate of the meta pass (the
    // pool rounds sizes up to a power of two, or to whole MiB past 1 MiB), where keeping
    // every intermediate until the submit would hold them all at once.
    // Kernel scratch (a convolution's im2col columns, on CPU adapters) comes on top of the
    // graph's liveness.
    let state = est.parameter_bytes + est.buffer_bytes + est.constant_bytes;
    let transient = st.peak_bytes.saturating_sub(after_first);
    eprintln!(
        "peak {} B in a run: {after_first} B resident + {transient} B transient; meta \
         estimate: state {state} B + live peak {} B; largest kernel scratch {} B; {} dispatches",
        st.peak_bytes, est.peak_activation_bytes, st.workspace_bytes, st.dispatches
    );
    assert!(
        transient <= (est.peak_activation_bytes + st.workspace_bytes) * 2,
        "transient peak {transient} B vs liveness estimate {} B + scratch {} B",
        est.peak_activation_bytes,
        st.workspace_bytes
    );
}

/// Control flow, `item` and data-dependent sizes run on the GPU (no fallback), match the CPU
/// session, and each readback the host needs is one counted submit (plus the outputs' one).
#[test]
fn control_flow_and_selection_run_on_the_gpu() {
    let Some(dev) = device() else { return };
    // (fixture, program, user inputs, submits: one per readback the host needs, plus the
    // outputs' one)
    let cases = [
        ("ops/control", "cond_true", 2, 2),
        ("ops/control", "cond_false__core", 2, 2),
        // A SymBool predicate: nothing to read back.
        ("ops/control", "cond_sym_pred", 1, 1),
        // i < 3 read back for i = 0, 1, 2, 3.
        ("ops/control", "while_loop", 1, 5),
        ("ops/control", "map", 2, 1),
        // item of a CPU input, outputs that are views of another: no GPU work at all.
        ("ops/control", "item_assert", 2, 0),
        ("ops/index", "masked_select_big", 2, 5),
        ("ops/index", "index_mask", 3, 3),
        ("ops/shape", "repeat_interleave_tensor_big", 4, 3),
    ];
    for (file, name, n, submits) in cases {
        let p = fixture_program(&format!("{file}.pt2"), Some(name));
        let inputs = io_inputs(&format!("{file}.io.safetensors"), &format!("{name}/"), n);
        let want = Session::new(p.clone())
            .unwrap()
            .run(inputs.clone())
            .unwrap();
        let mut s = GpuSession::new(p, dev.clone()).unwrap();
        let got = s.run(inputs).unwrap();
        let st = &s.last_stats;
        assert_eq!(st.fallback_nodes(), 0, "{name}: {:?}", st.fallbacks);
        assert_eq!(st.submits, submits, "{name}: submits");
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(&want) {
            let (RValue::Tensor(g), RValue::Tensor(w)) = (g, w) else {
                panic!("{name}: {g:?} vs {w:?}")
            };
            assert_eq!(g.sizes, w.sizes, "{name}");
            assert_eq!(g.to_vec::<f64>(), w.to_vec::<f64>(), "{name}");
        }
    }
    // A negative repeat (counted on the GPU) is torch's error, not a wrong size.
    let (file, name) = ("ops/shape", "repeat_interleave_tensor_big");
    let p = fixture_program(&format!("{file}.pt2"), Some(name));
    let mut inputs = io_inputs(&format!("{file}.io.safetensors"), &format!("{name}/"), 4);
    let RValue::Tensor(r) = &inputs[1] else {
        panic!()
    };
    let mut v = r.to_vec::<i64>();
    v[7] = -1;
    inputs[1] = RValue::Tensor(Tensor::from_vec(v, &r.sizes));
    let mut s = GpuSession::new(p, dev).unwrap();
    let e = s.run(inputs).unwrap_err().to_string();
    assert!(e.contains("repeats can not be negative"), "{e}");
}

/// State a run updates stays on the GPU (issue 15): every committed fixture whose program
/// mutates buffers runs on the GPU; the buffers read with `state_tensor` (the current copy,
/// read back on demand) match PyTorch's after the call; a run without CPU fallbacks reads
/// back its user outputs and nothing else (the updates written on the device, in place or
/// by a copy into the buffer's own GPU copy); after a second run, `sync_state` makes the
/// host copy agree with a CPU session run twice.
#[test]
fn mutated_state_stays_on_the_gpu() {
    let Some(dev) = device() else { return };
    let (mut cases, mut copied) = (0, 0);
    for (stem, meta) in common::metas() {
        let archive = common::open(&meta);
        for (pname, pm) in meta["programs"].as_object().unwrap() {
            for case in pm["io_cases"].as_array().into_iter().flatten() {
                let buffers: Vec<&str> = case["buffers_after"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|k| k.as_str())
                    .collect();
                if buffers.is_empty() {
                    continue;
                }
                let what = format!("{stem}/{pname} {}", case["label"]);
                let bytes =
                    std::fs::read(common::fixtures().join(case["file"].as_str().unwrap())).unwrap();
                let io = safetensors::SafeTensors::deserialize(&bytes).unwrap();
                let inputs: Vec<RValue> = case["inputs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| {
                        RValue::Tensor(common::to_tensor(
                            &io.tensor(i["key"].as_str().unwrap()).unwrap(),
                        ))
                    })
                    .collect();
                let program = archive
                    .program(Some(pname), &LoadOptions::default())
                    .unwrap();
                let mut g = GpuSession::new(program.clone(), dev.clone()).unwrap();
                let outs = g.run(inputs.clone()).unwrap();
                let st = g.last_stats.clone();
                let close = |name: &str, got: &Tensor, want: &Tensor| {
                    let (max, _) = common::metrics(got, want);
                    let scale = want
                        .to_dtype(DType::F64)
                        .unwrap()
                        .to_vec::<f64>()
                        .iter()
                        .fold(1.0f64, |m, v| m.max(v.abs()));
                    assert!(
                        max <= 1e-4 * scale,
                        "{what}: {name}: {max} from the expected"
                    );
                };
                for key in &buffers {
                    let fqn = key.strip_prefix("buffer_after.").unwrap_or(key);
                    let want = common::to_tensor(&io.tensor(key).unwrap());
                    close(fqn, &g.state_tensor(fqn).unwrap(), &want);
                }
                if st.fallbacks.is_empty() {
                    let out_bytes: u64 = outs
                        .iter()
                        .filter_map(|o| o.as_tensor())
                        .map(|t| pt2web::gpu::store::gpu_bytes(t.dtype, t.numel()))
                        .sum();
                    assert_eq!(
                        st.download_bytes, out_bytes,
                        "{what}: a run reads back its outputs only: {st:?}"
                    );
                }
                copied += st.device_copies;
                // A second run from the state the first left, against the CPU.
                let mut c = Session::new(program).unwrap();
                c.run(inputs.clone()).unwrap();
                c.run(inputs.clone()).unwrap();
                g.run(inputs).unwrap();
                g.sync_state().unwrap();
                for key in &buffers {
                    let fqn = key.strip_prefix("buffer_after.").unwrap_or(key);
                    close(
                        &format!("{fqn} after two runs"),
                        &g.cpu.state[fqn],
                        &c.state[fqn],
                    );
                }
                cases += 1;
            }
        }
    }
    assert!(cases >= 3, "{cases} fixture cases mutate buffers");
    assert!(copied > 0, "no update was written by a copy on the device");
    eprintln!("{cases} cases; {copied} updates copied on the device");
}

/// The device argmax `generate` uses for greedy decoding: the first of equal maxima (as
/// `torch.argmax`) of the last row of a kept output, 8 bytes read back, NaN refused.
#[test]
fn argmax_on_the_device_matches_the_host() {
    let Some(dev) = device() else { return };
    let p = fixture_program("ops/elementwise.pt2", Some("neg_abs_sign"));
    let mut g = GpuSession::new(p.clone(), dev).unwrap();
    let first_max = |row: &[f32]| {
        let mut best = 0;
        for (i, &x) in row.iter().enumerate() {
            if x > row[best] {
                best = i;
            }
        }
        best as i64
    };
    // Ties across the row (|3| == |-3|), and a second row that decides.
    let x = Tensor::from_vec(
        vec![
            9.0f32, 9.0, 9.0, 9.0, 9.0, 9.0, 1.0, -3.0, 3.0, 2.0, -1.0, 0.0,
        ],
        &[2, 6],
    );
    let want: Vec<RValue> = Session::new(p)
        .unwrap()
        .run(vec![RValue::Tensor(x.clone())])
        .unwrap();
    let kept =
        pollster::block_on(g.run_with(vec![pt2web::gpu::GpuInput::Cpu(RValue::Tensor(x))], true))
            .unwrap();
    let mut checked = 0;
    for (k, w) in kept.iter().zip(&want) {
        let (pt2web::gpu::Slot::Tensor(t), RValue::Tensor(w)) = (k, w) else {
            continue;
        };
        if t.dtype != DType::F32 {
            continue;
        }
        let row = w.contiguous().to_vec::<f32>()[6..].to_vec();
        let before = g.last_stats.download_bytes;
        assert_eq!(g.argmax_last(t).unwrap(), first_max(&row), "{row:?}");
        assert_eq!(g.last_stats.download_bytes - before, 8);
        checked += 1;
    }
    assert!(checked >= 2, "{checked} f32 outputs");
    let nan = Tensor::from_vec(
        vec![
            0.0f32,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            1.0,
            f32::NAN,
            3.0,
            2.0,
            -1.0,
            0.0,
        ],
        &[2, 6],
    );
    let kept =
        pollster::block_on(g.run_with(vec![pt2web::gpu::GpuInput::Cpu(RValue::Tensor(nan))], true))
            .unwrap();
    let pt2web::gpu::Slot::Tensor(t) = &kept[0] else {
        panic!("a kept output")
    };
    let e = g.argmax_last(t).unwrap_err().to_string();
    assert!(e.contains("NaN"), "{e}");
}

/// `n` logits of a linear congruential sequence from `seed`: `levels` values `step` apart
/// from `low` (repeated values: ties at the cuts).
fn lcg_logits(n: usize, seed: u64, levels: u64, step: f32, low: f32) -> Vec<f32> {
    let mut z = seed;
    (0..n)
        .map(|_| {
            z = z
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((z >> 40) % levels) as f32 * step + low
        })
        .collect()
}

/// Sampling settings: temperature, top-k, top-p.
type Settings = (f64, Option<usize>, Option<f64>);

/// For each of `cases` (seeded with `seed`), `count` tokens picked on the device from `t`
/// (which holds `logits`; greedy: `argmax_last`) equal the host sampler's; `bytes`: what each
/// pick must read back, where known.
fn device_picks_match_host(
    g: &mut GpuSession,
    (t, logits): (&pt2web::gpu::GTensor, &[f32]),
    cases: &[Settings],
    seed: u64,
    (count, bytes): (usize, Option<u64>),
) {
    for &(temperature, top_k, top_p) in cases {
        let s = pt2web::generate::Sampling {
            temperature,
            top_k,
            top_p,
            seed,
        };
        picks_match(g, t, logits, &s, count, bytes);
    }
}

/// One case of [`device_picks_match_host`]: the tokens equal, the bytes read back printed.
fn picks_match(
    g: &mut GpuSession,
    t: &pt2web::gpu::GTensor,
    logits: &[f32],
    s: &pt2web::generate::Sampling,
    count: usize,
    bytes: Option<u64>,
) {
    use pt2web::generate::Sampler;
    let mut host = Sampler::new(s);
    let want: Vec<i64> = (0..count).map(|_| host.pick(logits).unwrap()).collect();
    let mut draws = Sampler::new(s);
    let before = g.last_stats.download_bytes;
    let got: Vec<i64> = (0..count)
        .map(|_| {
            let start = g.last_stats.download_bytes;
            let id = match s.greedy() {
                true => g.argmax_last(t).unwrap(),
                false => g.sample_last(t, s, draws.uniform()).unwrap(),
            };
            if let Some(b) = bytes {
                assert_eq!(g.last_stats.download_bytes - start, b);
            }
            id
        })
        .collect();
    assert_eq!(got, want, "{s:?}");
    eprintln!(
        "{s:?}: {} distinct tokens in {count} draws, {} bytes read back",
        want.iter().collect::<std::collections::BTreeSet<_>>().len(),
        g.last_stats.download_bytes - before
    );
}

/// Sampling on the device (`GpuSession::sample_last`) follows the host sampler's rule: from
/// the same logits and seed, the same tokens, with temperature, top-k (ties at the cut kept)
/// and top-p, each pick reading back 8 bytes.
#[test]
fn device_sampling_draws_what_the_host_sampler_draws() {
    use pt2web::generate::Sampling;
    let Some(dev) = device() else { return };
    let p = fixture_program("ops/elementwise.pt2", Some("neg_abs_sign"));
    let mut g = GpuSession::new(p, dev).unwrap();
    // 3000 logits with repeated values (ties at the cuts) and a long tail.
    let logits = lcg_logits(3000, 12345, 400, 0.02, -4.0);
    let t = g
        .upload(&Tensor::from_vec(logits.clone(), &[1, 3000]))
        .unwrap();
    let cases = [
        (1.0, None, None),
        (0.7, Some(20), None),
        (1.3, None, Some(0.9)),
        (0.8, Some(50), Some(0.95)),
        (1.0, Some(1), None),
        (2.0, None, Some(0.05)),
        (0.5, Some(5000), Some(1.0)),
    ];
    device_picks_match_host(&mut g, (&t, &logits), &cases, 21, (60, Some(8)));
    let nan = g
        .upload(&Tensor::from_vec(vec![0.0f32, f32::NAN, 1.0], &[1, 3]))
        .unwrap();
    let s = Sampling {
        temperature: 1.0,
        ..Default::default()
    };
    let e = g.sample_last(&nan, &s, 0.5).unwrap_err().to_string();
    assert!(e.contains("NaN"), "{e}");
}

/// A vocabulary past the loop cap of CPU adapters (issue 17: `sample.wgsl`'s 256 invocations
/// each walk 1/256 of the row some 70 times with top-k and top-p; lavapipe stops an
/// invocation's loops after 65,535 steps): 300,000 logits still draw what the host sampler
/// draws, greedy and sampled (on such adapters the row is read back and picked on the host).
#[test]
fn device_sampling_over_a_long_vocabulary() {
    let Some(dev) = device() else { return };
    let p = fixture_program("ops/elementwise.pt2", Some("neg_abs_sign"));
    let mut g = GpuSession::new(p, dev).unwrap();
    let n = 300_000;
    let logits = lcg_logits(n, 777, 1000, 0.01, -5.0);
    let t = g
        .upload(&Tensor::from_vec(logits.clone(), &[1, n]))
        .unwrap();
    // (Few kept tokens: with thousands, f32 sums on the device may place a draw in a
    // neighbouring token where the host's f64 sums do not.)
    let cases = [
        (0.0, None, None),
        (0.8, Some(50), Some(0.9)),
        (0.7, Some(1000), None),
    ];
    device_picks_match_host(&mut g, (&t, &logits), &cases, 5, (8, None));
}

/// PT2E-quantized programs (torchao's convert_pt2e; tests/fixgen/gen_fixtures.py) on the GPU
/// match PyTorch with every node on the device: the static ones' quantize / dequantize (the
/// weights' dequantization folded at load), and the dynamic one's `choose_qparams` too (its
/// scale in float32 after the `qparams` pass).
#[test]
fn pt2e_quantized_programs_match_pytorch_on_the_gpu() {
    let Some(dev) = device() else { return };
    for stem in ["pt2e_static", "pt2e_static_core", "pt2e_dynamic"] {
        let (p, inputs, want) = common::first_io_case(stem);
        let mut g = GpuSession::new(p, dev.clone()).unwrap();
        let got = g
            .run(inputs.into_iter().map(RValue::Tensor).collect())
            .unwrap();
        let (RValue::Tensor(got), want) = (&got[0], &want[0]) else {
            panic!("{stem}: a tensor output")
        };
        let (err, _) = common::metrics(got, want);
        assert!(err < 1e-5, "{stem}: max error {err:.2e} from PyTorch");
        let fallbacks: Vec<_> = g.last_stats.fallbacks.keys().cloned().collect();
        assert!(fallbacks.is_empty(), "{stem}: {fallbacks:?}");
        eprintln!(
            "{stem}: max error {err:.2e} on the GPU, {} GPU nodes, fallbacks {fallbacks:?}",
            g.last_stats.gpu_nodes
        );
    }
}

/// Device loss (issue 17): once the device is lost, through wgpu's device-lost callback
/// (`wgpu::Device::destroy`, as a driver reset would) or `GpuDevice::destroy`, every run and
/// wait on it fails with DEVICE_LOST instead of hanging or answering zeros; a new device
/// and a new session recover and answer PyTorch's values again.
#[test]
fn a_lost_device_fails_every_run_and_a_new_one_recovers() {
    let Some(dev) = device() else { return };
    let (program, inputs, want) = common::first_io_case("mlp_core");
    let inputs: Vec<RValue> = inputs.into_iter().map(RValue::Tensor).collect();
    let answers_pytorch = |s: &mut GpuSession| {
        let out = s.run(inputs.clone()).unwrap();
        let RValue::Tensor(got) = &out[0] else {
            panic!("a tensor output")
        };
        common::compare(got, &want[0], "loose").unwrap();
    };
    let fails_lost = |s: &mut GpuSession, what: &str| {
        let e = s.run(inputs.clone()).unwrap_err();
        assert_eq!(e.code(), "DEVICE_LOST", "{what}: {e}");
        eprintln!("{what}: {e}");
    };
    let mut s = GpuSession::new(program.clone(), dev.clone()).unwrap();
    answers_pytorch(&mut s);
    // wgpu's own destroy: pt2web learns of it through the device-lost callback.
    dev.device.destroy();
    fails_lost(&mut s, "run after wgpu's destroy");
    fails_lost(&mut s, "the next run");
    assert_eq!(dev.synchronize().unwrap_err().code(), "DEVICE_LOST");
    let e = pollster::block_on(dev.synchronize_async()).unwrap_err();
    assert_eq!(e.code(), "DEVICE_LOST");
    let e = GpuSession::new(program.clone(), dev.clone())
        .and_then(|mut s| s.run(inputs.clone()))
        .unwrap_err();
    assert_eq!(
        e.code(),
        "DEVICE_LOST",
        "a new session on the lost device: {e}"
    );

    let dev2 = device().unwrap();
    let mut s2 = GpuSession::new(program, dev2.clone()).unwrap();
    answers_pytorch(&mut s2);
    // pt2web's destroy marks the device lost at once.
    dev2.destroy();
    fails_lost(&mut s2, "run after GpuDevice::destroy");
}

/// A buffer past the device's `max_buffer_size` is a `LIMIT` error naming the tensor, the
/// limit and the size before anything is asked of wgpu (not a validation error), and the
/// device stays usable (issue 17). Kernel outputs past `max_storage_buffer_binding_size`
/// fail the same way in `KernelCtx::new_out`.
#[test]
fn buffers_past_the_device_limits_are_limit_errors() {
    let Some(dev) = device() else {
        return;
    };
    let l = &dev.properties.limits;
    eprintln!(
        "{}: max_buffer_size {} max_storage_buffer_binding_size {}",
        dev.properties.name, l.max_buffer_size, l.max_storage_buffer_binding_size
    );
    let what = "the output of aten.zeros.default (zeros)";
    let Err(e) = dev.alloc_output(l.max_buffer_size + 1, what) else {
        panic!("a buffer past max_buffer_size was allocated");
    };
    let text = e.to_string();
    assert_eq!(e.code(), "LIMIT", "{text}");
    assert!(
        text.contains("max_buffer_size") && text.contains(what),
        "{text}"
    );
    assert!(dev.alloc_output(1024, "a small output").is_ok());
    dev.take_error().unwrap();
}
