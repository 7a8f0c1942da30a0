//! CUDA interop (issue 20): fill a CUDA buffer, run a model on it through pt2web's Vulkan
//! device without a host copy, read the result back in CUDA, and compare it with the CPU
//! backend's result on the same input.
//!
//! ```text
//! cargo run --release -p pt2web-native --features cuda --example cuda_interop -- [MODEL.pt2] [BATCH]
//! ```
//! MODEL defaults to tests/fixtures/mlp_core.pt2 (a linear-relu-linear MLP exported with
//! a float32 input of [4, 16]); BATCH (default 4096) sizes a dynamic first dim, if the
//! model has one. Needs Linux, an NVIDIA driver (libcuda) and a Vulkan driver for
//! the same GPU with `VK_KHR_external_memory_fd`; without them it fails with an error
//! naming what is missing. The path, each step timed:
//! 1. `cuMemAlloc` + `cuMemcpyHtoD`: the input, as a torch CUDA tensor would hold it;
//! 2. `GTensor::from_dlpack`: CUDA copies it (`cuMemcpyDtoD`) into Vulkan external memory,
//!    which becomes the GPU tensor's storage;
//! 3. `GpuSession::run_with`: the model on the Vulkan device, its output kept on the GPU;
//! 4. `GTensor::to_dlpack`: the output copied on the GPU into exportable memory CUDA maps;
//! 5. `cuMemcpyDtoH` of that CUDA pointer, to compare on the host with the CPU backend.

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!("error: the CUDA interop example needs Linux (Vulkan opaque fds); Windows handles are not built yet");
    std::process::ExitCode::FAILURE
}

#[cfg(target_os = "linux")]
fn run() -> pt2web::Result<()> {
    use pt2web::archive::pt2::LoadOptions;
    use pt2web::cpu::Tensor;
    use pt2web::dlpack::ffi::*;
    use pt2web::dlpack::{cuda, OwnedDLPack};
    use pt2web::gpu::{external, read_tensor, GTensor, GpuInput, GpuSession, Slot};
    use pt2web::program::graph::{Dim, ValueKind};
    use pt2web::program::Pt2Archive;
    use pt2web::runtime::{RValue, Session};
    use pt2web::{DType, Error, Limits};
    use std::sync::Arc;
    use std::time::Instant;

    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/mlp_core.pt2")
        });
    let batch: usize = match args.next() {
        Some(b) => b
            .parse()
            .map_err(|_| Error::Gpu(format!("batch '{b}': not a number")))?,
        None => 4096,
    };
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;

    // The CUDA driver first: without it there is nothing to show.
    let drv = cuda::driver()?;
    let dev = Arc::new(external::open(None)?);
    let ctx = drv.context_for_uuid(external::device_uuid(&dev)?)?;
    println!(
        "vulkan: {} ({}, driver {} {}); CUDA device {}",
        dev.properties.name,
        dev.properties.device_type,
        dev.properties.driver,
        dev.properties.driver_info,
        ctx.ordinal()
    );

    let archive = Pt2Archive::open_file(&model, Limits::default())?;
    let program = archive.program(None, &LoadOptions::default())?;
    // One float32 input: its exported sizes, with BATCH for a dynamic first dim.
    let inputs = program.user_inputs();
    let value = match inputs.as_slice() {
        [one] => program.input_value(&one.name).map(|v| &v.kind),
        _ => None,
    };
    let sizes: Vec<usize> = match value {
        Some(ValueKind::Tensor {
            dtype: DType::F32,
            sizes,
            ..
        }) => sizes
            .iter()
            .enumerate()
            .map(|(i, d)| match d {
                Dim::Static(n) => Ok(*n as usize),
                Dim::Sym(_) if i == 0 => Ok(batch),
                Dim::Sym(e) => Err(Error::Gpu(format!("input dim {i} is symbolic ({e})"))),
            })
            .collect::<pt2web::Result<_>>()?,
        _ => {
            return Err(Error::Gpu(format!(
                "{}: the example feeds one float32 tensor input, the model takes {} inputs",
                model.display(),
                inputs.len()
            )))
        }
    };
    let n: usize = sizes.iter().product();
    let x: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.37).sin() * 2.0).collect();
    let x_bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();

    // 1. The input in CUDA memory.
    let t = Instant::now();
    let d_x = ctx.alloc(x_bytes.len())?;
    ctx.copy_htod(d_x.ptr(), &x_bytes)?;
    let t_fill = ms(t);
    let mut shape: Vec<i64> = sizes.iter().map(|&d| d as i64).collect();
    let mut managed = Box::new(DLManagedTensor {
        dl_tensor: DLTensor {
            data: d_x.ptr() as usize as *mut std::ffi::c_void,
            device: DLDevice {
                device_type: K_DL_CUDA,
                device_id: ctx.ordinal(),
            },
            ndim: shape.len() as i32,
            dtype: pt2web::dlpack::dl_dtype(DType::F32),
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
        manager_ctx: std::ptr::null_mut(),
        // `d_x` and `managed` are this function's: nothing to delete.
        deleter: None,
    });
    // SAFETY: a live managed tensor without a deleter, over memory and a shape that outlive
    // the holder (dropped below, before them).
    let x_dl = unsafe { OwnedDLPack::from_raw(&mut *managed as *mut DLManagedTensor) }?;

    // 2. CUDA to the Vulkan device, on the GPU.
    let t = Instant::now();
    let x_gpu = GTensor::from_dlpack(&dev, &x_dl)?;
    let t_import = ms(t);
    drop(x_dl);

    // 3. The model on the Vulkan device (a first run plans and compiles; the second is warm).
    let mut gpu = GpuSession::new(program.clone(), dev.clone())?;
    let t = Instant::now();
    pollster::block_on(gpu.run_with(vec![GpuInput::Gpu(x_gpu.clone())], true))?;
    dev.synchronize()?;
    let t_first = ms(t);
    let t = Instant::now();
    let outs = pollster::block_on(gpu.run_with(vec![GpuInput::Gpu(x_gpu)], true))?;
    dev.synchronize()?;
    let t_warm = ms(t);
    let Some(Slot::Tensor(y)) = outs.into_iter().next() else {
        return Err(Error::Gpu(
            "the model's first output is not a tensor".into(),
        ));
    };
    let fallbacks: u64 = gpu.last_stats.fallbacks.values().sum();

    // 4. The output to CUDA, on the GPU.
    let t = Instant::now();
    let y_dl = y.to_dlpack(&dev)?;
    let t_export = ms(t);
    let dl = y_dl.dl_tensor();
    // SAFETY: our own export: ndim int64s of shape.
    let y_sizes: Vec<usize> = unsafe { std::slice::from_raw_parts(dl.shape, dl.ndim as usize) }
        .iter()
        .map(|&d| d as usize)
        .collect();

    // 5. Read back in CUDA (the export is contiguous: a model output).
    let numel: usize = y_sizes.iter().product();
    let mut y_bytes = vec![0u8; numel * 4];
    let t = Instant::now();
    ctx.copy_dtoh(dl.data as u64 + dl.byte_offset, &mut y_bytes)?;
    let t_read = ms(t);
    drop(y_dl);
    let y_cuda: Vec<f32> = y_bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();

    // The CPU backend on the same input; and pt2web's own readback of the GPU output.
    let t = Instant::now();
    let mut cpu = Session::new(program)?;
    let want = cpu.run(vec![RValue::Tensor(Tensor::from_vec(x, &sizes))])?;
    let t_cpu = ms(t);
    let Some(RValue::Tensor(want)) = want.into_iter().next() else {
        return Err(Error::Gpu("the CPU run gave no tensor".into()));
    };
    let want = want.contiguous().to_vec::<f32>();
    let via_wgpu = pollster::block_on(read_tensor(&dev, &y))?.to_vec::<f32>();
    let max_diff = |a: &[f32]| {
        a.iter()
            .zip(&want)
            .map(|(p, q)| (p - q).abs())
            .fold(0f32, f32::max)
    };
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let (diff, diff_wgpu) = (max_diff(&y_cuda), max_diff(&via_wgpu));
    println!(
        "model: {} input {sizes:?} float32, output {y_sizes:?}",
        model.display()
    );
    println!(
        "fill (HtoD) {t_fill:.2} ms | from_dlpack (DtoD into Vulkan memory) {t_import:.2} ms | \
         first run {t_first:.2} ms | warm run {t_warm:.2} ms ({fallbacks} CPU fallbacks) | \
         to_dlpack {t_export:.2} ms | CUDA read (DtoH) {t_read:.2} ms | CPU backend {t_cpu:.2} ms"
    );
    println!(
        "max |CUDA - CPU| = {diff:.3e}, max |wgpu readback - CPU| = {diff_wgpu:.3e} (max |CPU| = {scale:.3e})"
    );
    let tol = 1e-4 * scale.max(1.0);
    if y_cuda.len() != want.len() || diff > tol || diff_wgpu > tol {
        return Err(Error::Gpu(format!(
            "the CUDA result differs from the CPU backend's: {diff:.3e} (tolerance {tol:.1e})"
        )));
    }
    println!("ok: CUDA read the model's output from Vulkan memory; it matches the CPU backend");
    Ok(())
}
