//! Devices and streams (issue 19 items 1 and 2): the current device, `set_device` and its
//! guard, `device_of`, capability and arch list; streams and events ordering two models' runs
//! on one queue, checked against PyTorch's values (multi_program's `chained` case: the decoder
//! on the encoder's eager output, written by tests/fixgen/gen_fixtures.py). Without a GPU
//! adapter the tests skip with a message, unless PT2WEB_REQUIRE_GPU=1 (CI).

mod common;

use pt2web::archive::pt2::LoadOptions;
use pt2web::backend::Backend;
use pt2web::cpu::Tensor;
use pt2web::gpu::{self, GpuDevice, GpuInput, GpuSession, Slot, Stream, TensorDevice};
use pt2web::runtime::{RValue, RunOptions};
use std::sync::Arc;

/// The current device from the registry, or None (skip) without an adapter.
fn current() -> Option<Arc<GpuDevice>> {
    match gpu::current_gpu_device() {
        Ok(d) => Some(d),
        Err(e) if std::env::var("PT2WEB_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("PT2WEB_REQUIRE_GPU=1 but no GPU device: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: no GPU adapter ({e}); set PT2WEB_REQUIRE_GPU=1 to fail instead");
            None
        }
    }
}

/// `(inputs, outputs)` of multi_program's `<program>` case `file`, from PyTorch.
fn io(file: &str) -> (Tensor, Tensor) {
    let bytes = std::fs::read(common::fixtures().join(file)).unwrap();
    let io = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let read = |k: &str| common::to_tensor(&io.tensor(k).unwrap());
    (read("input_0"), read("output_0"))
}

fn session(program: &str, dev: &Arc<GpuDevice>) -> GpuSession {
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(common::fixtures().join("multi_program.meta.json")).unwrap(),
    )
    .unwrap();
    let p = common::open(&meta)
        .program(Some(program), &LoadOptions::default())
        .unwrap();
    GpuSession::new(p, dev.clone()).unwrap()
}

fn kept(outs: Vec<Slot>) -> pt2web::gpu::GTensor {
    match outs.into_iter().next() {
        Some(Slot::Tensor(t)) => t,
        other => panic!(
            "expected a tensor kept on the GPU, got {:?}",
            other.map(|_| ())
        ),
    }
}

#[test]
fn current_device_set_device_and_guard() {
    let Some(dev) = current() else { return };
    gpu::init().unwrap();
    assert!(gpu::is_initialized());
    let n = gpu::device_count();
    assert!(n >= 1);
    // A new thread starts on device 0, which the registry opened.
    assert_eq!(gpu::current_device(), 0);
    assert_eq!(dev.index(), 0);
    assert!(Arc::ptr_eq(&dev, &gpu::get_device(Some(0)).unwrap()));
    let e = gpu::set_device(n).unwrap_err().to_string();
    assert!(
        e.contains(&format!("no device {n}")) && e.contains(&format!("{n} GPU device(s)")),
        "{e}"
    );
    assert!(gpu::device(n + 3).is_err());
    assert_eq!(gpu::current_device(), 0, "a refused index changes nothing");
    {
        let g = gpu::device(0).unwrap();
        assert_eq!(g.previous(), 0);
        assert_eq!(gpu::current_device(), 0);
    }
    if n >= 2 {
        gpu::set_device(1).unwrap();
        {
            let _g = gpu::device(0).unwrap();
            assert_eq!(gpu::current_device(), 0);
        }
        assert_eq!(
            gpu::current_device(),
            1,
            "the guard restores the device before it"
        );
        assert_eq!(gpu::current_gpu_device().unwrap().index(), 1);
        gpu::set_device(0).unwrap();
    }
    // The current device is per thread, as in torch.
    let other = std::thread::spawn(gpu::current_device).join().unwrap();
    assert_eq!(other, 0);
}

#[test]
fn arch_list_and_capability() {
    let Some(dev) = current() else { return };
    let arch = gpu::get_arch_list();
    eprintln!("arch list: {arch:?}, device 0: {}", dev.properties.backend);
    assert!(
        arch.contains(&dev.properties.backend.as_str()),
        "{arch:?} lacks the backend device 0 runs on ({})",
        dev.properties.backend
    );
    assert_eq!(arch.last(), Some(&"cpu"));
    let cap = gpu::get_device_capability(0).unwrap();
    let l = &dev.properties.limits;
    for (k, v) in [
        ("max_buffer_size", l.max_buffer_size),
        (
            "max_storage_buffer_binding_size",
            l.max_storage_buffer_binding_size,
        ),
        (
            "max_compute_workgroup_storage_size",
            l.max_compute_workgroup_storage_size.into(),
        ),
        (
            "max_compute_invocations_per_workgroup",
            l.max_compute_invocations_per_workgroup.into(),
        ),
    ] {
        assert_eq!(cap.limits.get(k), Some(&v), "capability limit {k}");
    }
    assert!(cap.limits.len() >= 14, "{:?}", cap.limits);
    assert_eq!(cap.features, dev.properties.features);
    let n = gpu::device_count();
    let e = gpu::get_device_capability(n).unwrap_err().to_string();
    assert!(e.contains(&format!("no device {n}")), "{e}");
}

/// `iters` multiply-adds per element of a 2^16-float buffer, submitted and not waited for.
fn submit_busy_work(dev: &GpuDevice, iters: u32) {
    const BUSY: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
override ITERS: u32 = 1u;
@compute @workgroup_size(64)
fn busy(@builtin(global_invocation_id) gid: vec3<u32>) {
    var x = f32(gid.x) * 1e-6;
    for (var k = 0u; k < ITERS; k = k + 1u) {
        x = x * 0.999 + 0.001;
    }
    out[gid.x] = x;
}
"#;
    let d = &dev.device;
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("busy"),
        source: wgpu::ShaderSource::Wgsl(BUSY.into()),
    });
    let pipe = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("busy"),
        layout: None,
        module: &module,
        entry_point: Some("busy"),
        compilation_options: wgpu::PipelineCompilationOptions {
            constants: &[("ITERS", iters as f64)],
            ..Default::default()
        },
        cache: None,
    });
    let n = 1u64 << 16;
    let buf = d.create_buffer(&wgpu::BufferDescriptor {
        label: Some("busy"),
        size: n * 4,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let bind = d.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipe.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: buf.as_entire_binding(),
        }],
    });
    let mut enc = d.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipe);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups((n / 64) as u32, 1, 1);
    }
    dev.queue.submit([enc.finish()]);
}

#[test]
fn stream_query_is_false_until_synchronize() {
    if current().is_none() {
        return;
    }
    // A device of its own: the other tests' runs on the shared device 0 would keep its
    // queue busy, and an external stream's query asks whether the queue is idle.
    let dev = Arc::new(GpuDevice::open(Default::default(), None).unwrap());
    // The app's own work on the queue: an external stream sees it.
    let ext = gpu::get_stream_from_external(&dev);
    assert!(ext.is_external());
    submit_busy_work(&dev, 20_000);
    let t = std::time::Instant::now();
    assert!(!ext.query(), "busy work just submitted");
    ext.synchronize().unwrap();
    assert!(ext.query());
    eprintln!("external stream: synchronized after {:?}", t.elapsed());

    // A pt2web stream with no work is done; after waiting on an event that marks busy work
    // it is not, until synchronized.
    let s = Stream::new(&dev);
    assert!(s.query(), "a stream with no work counts as done");
    submit_busy_work(&dev, 20_000);
    let e = gpu::default_stream(&dev).record_event(None).unwrap();
    s.wait_event(&e).unwrap();
    assert!(!s.query(), "the stream now covers the event's work");
    s.synchronize().unwrap();
    assert!(s.query() && e.query());
    // An unrecorded event is no wait (torch); wait_stream on one device is fine.
    s.wait_event(&pt2web::gpu::Event::new()).unwrap();
    s.wait_stream(&gpu::default_stream(&dev)).unwrap();
}

#[test]
fn events_order_two_models_on_two_streams() {
    let Some(dev) = current() else { return };
    let (mut enc, mut dec) = (session("encoder", &dev), session("decoder", &dev));
    let (x, h_torch) = io("multi_program.encoder.io.safetensors");
    let (h_chained, want) = io("multi_program.decoder.io.chained.safetensors");
    common::compare(&h_chained, &h_torch, "close").unwrap();
    let (s1, s2) = (Stream::new(&dev), Stream::new(&dev));
    assert_ne!(s1, s2);
    assert_eq!(gpu::default_stream(&dev).id(), 0);
    assert_eq!(gpu::current_stream(&dev), gpu::default_stream(&dev));

    // Model A on s1 (a stream scope), its output kept on the GPU.
    let h = {
        let _ctx = gpu::stream(&s1);
        assert_eq!(gpu::current_stream(&dev), s1);
        kept(
            pollster::block_on(enc.run_with(vec![GpuInput::Cpu(RValue::Tensor(x))], true)).unwrap(),
        )
    };
    assert_eq!(
        gpu::current_stream(&dev),
        gpu::default_stream(&dev),
        "the scope restores"
    );
    assert_eq!(gpu::device_of(&h), TensorDevice::Gpu(0));
    assert_eq!(gpu::device_of(&RValue::Int(1)), TensorDevice::Cpu);
    let e = s1.record_event(None).unwrap();

    // Model B on s2 after s2.wait_event(e), consuming A's GPU output (RunOptions::stream).
    s2.wait_event(&e).unwrap();
    let opts = RunOptions {
        stream: Some(s2.clone()),
        ..Default::default()
    };
    let out =
        pollster::block_on(dec.run_with_options(vec![GpuInput::Gpu(h.clone())], false, &opts))
            .unwrap();
    s2.synchronize().unwrap();
    assert!(s1.query() && s2.query() && e.query());
    let got = match out.into_iter().next() {
        Some(Slot::Value(RValue::Tensor(t))) => t,
        _ => panic!("expected a tensor read back"),
    };
    common::compare(&got, &want, "loose").unwrap();

    // The same through Backend::run_options with a CPU input: its stream is checked.
    let other = Arc::new(GpuDevice::open(Default::default(), None).unwrap());
    let mut far = session("decoder", &other);
    let e2 = far
        .run_options(vec![RValue::Tensor(h_chained.clone())], &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e2.contains("stream") && e2.contains("another device"),
        "{e2}"
    );
    let ev = pt2web::gpu::Event::new();
    ev.record(&other).unwrap();
    let e3 = s2.wait_event(&ev).unwrap_err().to_string();
    assert!(e3.contains("another device"), "{e3}");
    let got = far.run(vec![RValue::Tensor(h_chained)]).unwrap();
    match &got[0] {
        RValue::Tensor(t) => common::compare(t, &want, "loose").unwrap(),
        _ => panic!("expected a tensor"),
    }
}
