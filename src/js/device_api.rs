//! The device API of the JS bindings (`torch.mps` / `torch.xpu`-style, wrapped by
//! `js/index.js`): adapter properties, events, user WGSL shaders, memory statistics and
//! limits, `synchronize`.

use super::*;
use crate::gpu::Stream;

/// The WebGPU adapter and device: `{name, backend, device_type, driver, features, limits,
/// recommended_max_memory}` (opens the device if needed).
#[wasm_bindgen(js_name = gpuDeviceProperties)]
pub async fn gpu_device_properties() -> Result<JsValue, JsValue> {
    let d = device().await?;
    let p = &d.properties;
    to_js_value(&serde_json::json!({
        "name": p.name, "backend": p.backend, "deviceType": p.device_type,
        "driver": p.driver, "driverInfo": p.driver_info, "vendor": p.vendor,
        "features": p.features,
        "limits": {
            "maxBufferSize": p.limits.max_buffer_size,
            "maxStorageBufferBindingSize": p.limits.max_storage_buffer_binding_size,
            "maxStorageBuffersPerShaderStage": p.limits.max_storage_buffers_per_shader_stage,
            "maxComputeWorkgroupStorageSize": p.limits.max_compute_workgroup_storage_size,
            "maxComputeInvocationsPerWorkgroup": p.limits.max_compute_invocations_per_workgroup,
        },
        "recommendedMaxMemory": p.recommended_max_memory,
        "timestamps": d.has_timestamps(),
    }))
}

/// Whether the shared WebGPU device is open (a WebGPU model was loaded, or `gpuOpen`) and
/// not lost.
#[wasm_bindgen(js_name = gpuDeviceOpen)]
pub fn gpu_device_open() -> bool {
    DEVICE.with(|d| d.borrow().as_ref().is_some_and(|d| d.check_lost().is_ok()))
}

/// Destroy the shared WebGPU device now (`GPUDevice.destroy()`): its memory goes back to
/// the browser at once; every model on it rejects its runs with `DEVICE_LOST` from now on.
/// `gpuOpen` (or loading a WebGPU model) opens a new one.
#[wasm_bindgen(js_name = gpuDestroy)]
pub fn gpu_destroy() {
    if let Some(d) = DEVICE.with(|d| d.borrow_mut().take()) {
        d.destroy();
    }
}

/// The shared device's `GPUDevice` (opens it if needed), for a page's own WebGPU work on
/// pt2web's buffers (`GpuTensor.buffer` belongs to this device).
#[wasm_bindgen(js_name = gpuWebGpuDevice)]
pub async fn gpu_webgpu_device() -> Result<JsValue, JsValue> {
    let d = device().await?;
    d.device
        .as_webgpu()
        .map(|g| JsValue::from(g.clone()))
        .ok_or_else(|| js_error("DEVICE", "not a WebGPU device"))
}

/// Open the shared WebGPU device now (otherwise the first WebGPU model opens it).
#[wasm_bindgen(js_name = gpuOpen)]
pub async fn gpu_open() -> Result<(), JsValue> {
    device().await.map(|_| ())
}

/// A marker in the WebGPU queue (`torch.mps.Event`): GPU timestamps where the device has
/// `timestamp-query`, else the host clock when the queue reports the work done.
#[wasm_bindgen]
pub struct WasmEvent {
    ev: Rc<Event>,
}

impl Default for WasmEvent {
    fn default() -> Self {
        WasmEvent::new()
    }
}

#[wasm_bindgen]
impl WasmEvent {
    #[wasm_bindgen(constructor)]
    pub fn new() -> WasmEvent {
        WasmEvent {
            ev: Rc::new(Event::new()),
        }
    }
    /// Mark the point after the GPU work submitted so far (the device must be open).
    pub fn record(&self) -> Result<(), JsValue> {
        let d = DEVICE.with(|d| d.borrow().clone()).ok_or_else(|| {
            js_error(
                "DEVICE",
                "Event.record(): the WebGPU device is not open (load a WebGPU model first)",
            )
        })?;
        self.ev.record(&d).map_err(to_js)
    }
    /// Whether the GPU has reached the event (never waits).
    pub fn query(&self) -> bool {
        self.ev.query()
    }
    /// `"gpu"` (timestamps), `"host"` (host clock), or undefined before `record`.
    #[wasm_bindgen(getter)]
    pub fn timing(&self) -> Option<String> {
        self.ev.timing().map(|t| match t {
            crate::gpu::Timing::GpuTimestamp => "gpu".to_string(),
            crate::gpu::Timing::HostClock => "host".to_string(),
        })
    }
    /// Resolves when the GPU has reached the event.
    pub fn synchronize(&self) -> js_sys::Promise {
        let ev = self.ev.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            ev.synchronize_async().await.map_err(to_js)?;
            Ok(JsValue::UNDEFINED)
        })
    }
    /// Milliseconds from this event to `end` (waits for both).
    #[wasm_bindgen(js_name = elapsedTime)]
    pub fn elapsed_time(&self, end: &WasmEvent) -> js_sys::Promise {
        let (a, b) = (self.ev.clone(), end.ev.clone());
        wasm_bindgen_futures::future_to_promise(async move {
            let ms = a.elapsed_time_async(&b).await.map_err(to_js)?;
            Ok(JsValue::from(ms))
        })
    }
}

/// A user WGSL shader validated by naga and compiled on the WebGPU device.
#[wasm_bindgen]
pub struct WasmShader {
    sh: Rc<UserShader>,
    dev: Arc<GpuDevice>,
}

/// Validate (naga) and compile a WGSL compute shader on the WebGPU device
/// (`torch.mps.compile_shader`); a mistake rejects with naga's message (line and column).
#[wasm_bindgen(js_name = gpuCompileShader)]
pub async fn gpu_compile_shader(src: String) -> Result<WasmShader, JsValue> {
    let dev = device().await?;
    let sh = dev.compile_shader_async(&src).await.map_err(to_js)?;
    Ok(WasmShader {
        sh: Rc::new(sh),
        dev,
    })
}

#[wasm_bindgen]
impl WasmShader {
    /// The compute entry points: `[{name, workgroupSize, bindings: [{group, binding, name,
    /// access, elem}]}]`.
    #[wasm_bindgen(getter)]
    pub fn entries(&self) -> Result<JsValue, JsValue> {
        let v: Vec<serde_json::Value> = self
            .sh
            .entries()
            .iter()
            .map(|e| {
                serde_json::json!({
                    "name": e.name, "workgroupSize": e.workgroup_size,
                    "bindings": e.bindings.iter().map(|b| serde_json::json!({
                        "group": b.group, "binding": b.binding, "name": b.name,
                        "access": b.access, "elem": b.elem,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        to_js_value(&v)
    }
    /// Run `entry` with `args` (`{dtype, shape, bytes}`, one per binding in binding order) on
    /// (x, y, z) workgroups; resolves to every argument's contents afterwards.
    pub fn call(&self, entry: String, args: Array, x: u32, y: u32, z: u32) -> js_sys::Promise {
        let mut ts = Vec::with_capacity(args.length() as usize);
        for (i, v) in args.iter().enumerate() {
            match input_value(&format!("argument #{i}"), &v) {
                Ok(RValue::Tensor(t)) => ts.push(t),
                Ok(_) => {
                    return js_sys::Promise::reject(&js_error(
                        "INPUT",
                        &format!("{entry}: argument #{i} must be a tensor"),
                    ))
                }
                Err(e) => return js_sys::Promise::reject(&e),
            }
        }
        let (sh, dev) = (self.sh.clone(), self.dev.clone());
        wasm_bindgen_futures::future_to_promise(async move {
            let refs: Vec<&Tensor> = ts.iter().collect();
            let outs = sh
                .call_async(&dev, &entry, &refs, (x, y, z))
                .await
                .map_err(to_js)?;
            let arr: Array = outs
                .iter()
                .enumerate()
                .map(|(i, t)| tensor_to_js(&format!("argument #{i}"), t))
                .collect::<Result<_, _>>()?;
            Ok(arr.into())
        })
    }
}

/// Memory statistics of the WebGPU device (bytes): `{allocated, peak, driverAllocated,
/// buffersCreated, limit}`; `null` before the device is opened.
#[wasm_bindgen(js_name = gpuMemoryStats)]
pub fn gpu_memory_stats() -> Result<JsValue, JsValue> {
    let Some(d) = DEVICE.with(|d| d.borrow().clone()) else {
        return Ok(JsValue::NULL);
    };
    let m = d.memory_stats();
    to_js_value(&serde_json::json!({
        "allocated": m.allocated, "peak": m.peak, "driverAllocated": m.driver_allocated,
        "buffersCreated": m.buffers_created, "limit": d.memory_limit(),
        "recommendedMax": d.recommended_max_memory(),
    }))
}

/// Limit live GPU allocations to `fraction` of the recommended maximum; an allocation past
/// it fails with an `OUT_OF_MEMORY` error and the device stays usable.
#[wasm_bindgen(js_name = gpuSetMemoryFraction)]
pub async fn gpu_set_memory_fraction(fraction: f64) -> Result<(), JsValue> {
    device()
        .await?
        .set_per_process_memory_fraction(fraction)
        .map_err(to_js)
}

/// Release cached GPU buffers (torch.mps.empty_cache).
#[wasm_bindgen(js_name = gpuEmptyCache)]
pub fn gpu_empty_cache() -> Result<(), JsValue> {
    match DEVICE.with(|d| d.borrow().clone()) {
        Some(d) => d.empty_cache().map_err(to_js),
        None => Ok(()),
    }
}

/// Reset the peak of the memory statistics to the current allocation.
#[wasm_bindgen(js_name = gpuResetPeakMemoryStats)]
pub fn gpu_reset_peak_memory_stats() {
    if let Some(d) = DEVICE.with(|d| d.borrow().clone()) {
        d.reset_peak_memory_stats();
    }
}

/// Resolves when every piece of GPU work submitted so far has finished.
#[wasm_bindgen(js_name = gpuSynchronize)]
pub async fn gpu_synchronize() -> Result<(), JsValue> {
    let Some(d) = DEVICE.with(|d| d.borrow().clone()) else {
        return Ok(());
    };
    d.synchronize_async().await.map_err(to_js)
}

/// Devices (`gpu.currentDevice`, `gpu.setDevice`, ...): the browser gives one adapter, so
/// device 0 is the only one.
fn current_webgpu_device(who: &str) -> Result<Arc<GpuDevice>, JsValue> {
    DEVICE.with(|d| d.borrow().clone()).ok_or_else(|| {
        js_error(
            "DEVICE",
            &format!("{who}: the WebGPU device is not open (await gpu.open() or load a WebGPU model first)"),
        )
    })
}

/// This page's current device index (always 0: a browser hands out one adapter).
#[wasm_bindgen(js_name = gpuCurrentDevice)]
pub fn gpu_current_device() -> usize {
    crate::gpu::current_device()
}

/// `setDevice(i)`: 0 is fine; any other index is an `INPUT` error naming it and the count.
#[wasm_bindgen(js_name = gpuSetDevice)]
pub fn gpu_set_device(index: f64) -> Result<(), JsValue> {
    if !(index >= 0.0 && index.fract() == 0.0 && index < 4_294_967_296.0) {
        return Err(js_error(
            "INPUT",
            &format!("setDevice({index}): a device index is a non-negative integer"),
        ));
    }
    crate::gpu::devices::select(index as usize, 1).map_err(to_js)
}

/// Whether the WebGPU device was opened at least once (`gpu.isInitialized`).
#[wasm_bindgen(js_name = gpuIsInitialized)]
pub fn gpu_is_initialized() -> bool {
    crate::gpu::is_initialized()
}

/// The backends this build has: `["webgpu", "cpu"]`.
#[wasm_bindgen(js_name = gpuArchList)]
pub fn gpu_arch_list() -> Array {
    crate::gpu::get_arch_list()
        .into_iter()
        .map(JsValue::from_str)
        .collect()
}

/// `{features, limits}` of the WebGPU device (opens it if needed), limits by WebGPU's
/// camelCase names (`maxBufferSize`, ...).
#[wasm_bindgen(js_name = gpuDeviceCapability)]
pub async fn gpu_device_capability() -> Result<JsValue, JsValue> {
    let d = device().await?;
    let c = crate::gpu::devices::capability_of(d.device.features(), &d.device.limits());
    let camel = |k: &str| -> String {
        let mut out = String::with_capacity(k.len());
        let mut up = false;
        for ch in k.chars() {
            match ch {
                '_' => up = true,
                c if up => {
                    out.push(c.to_ascii_uppercase());
                    up = false;
                }
                c => out.push(c),
            }
        }
        out
    };
    let limits: serde_json::Map<String, serde_json::Value> = c
        .limits
        .iter()
        .map(|(k, v)| (camel(k), (*v).into()))
        .collect();
    to_js_value(&serde_json::json!({ "features": c.features, "limits": limits }))
}

/// A stream on the WebGPU device (`gpu.Stream`, see `crate::gpu::stream` for what one queue
/// allows).
#[wasm_bindgen]
pub struct WasmStream(pub(super) Stream);

#[wasm_bindgen]
impl WasmStream {
    /// A new stream on the open WebGPU device.
    #[wasm_bindgen(constructor)]
    pub fn new() -> Result<WasmStream, JsValue> {
        Ok(WasmStream(Stream::new(&current_webgpu_device(
            "new gpu.Stream()",
        )?)))
    }
    /// Another handle on the same stream, for `run` to take (it consumes its argument).
    pub fn share(&self) -> WasmStream {
        WasmStream(self.0.clone())
    }
    /// 0 for the default stream.
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> f64 {
        self.0.id() as f64
    }
    #[wasm_bindgen(getter)]
    pub fn external(&self) -> bool {
        self.0.is_external()
    }
    /// Whether this and `other` are the same stream.
    pub fn same(&self, other: &WasmStream) -> bool {
        self.0 == other.0
    }
    /// Whether the work ordered on the stream has finished (never waits).
    pub fn query(&self) -> bool {
        self.0.query()
    }
    /// Resolves when the work ordered on the stream has finished.
    pub fn synchronize(&self) -> js_sys::Promise {
        let s = self.0.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            s.synchronize_async().await.map_err(to_js)?;
            Ok(JsValue::UNDEFINED)
        })
    }
    /// Record `event` after the work submitted so far.
    #[wasm_bindgen(js_name = recordEvent)]
    pub fn record_event(&self, event: &WasmEvent) -> Result<(), JsValue> {
        self.0.record(&event.ev).map_err(to_js)
    }
    /// Order this stream's later work after `event`.
    #[wasm_bindgen(js_name = waitEvent)]
    pub fn wait_event(&self, event: &WasmEvent) -> Result<(), JsValue> {
        self.0.wait_event(&event.ev).map_err(to_js)
    }
    /// Order this stream's later work after the work `other` ordered so far.
    #[wasm_bindgen(js_name = waitStream)]
    pub fn wait_stream(&self, other: &WasmStream) -> Result<(), JsValue> {
        self.0.wait_stream(&other.0).map_err(to_js)
    }
}

/// The current stream of the WebGPU device (the default one unless `gpuSetStream` chose).
#[wasm_bindgen(js_name = gpuCurrentStream)]
pub fn gpu_current_stream() -> Result<WasmStream, JsValue> {
    let d = current_webgpu_device("gpu.currentStream()")?;
    Ok(WasmStream(crate::gpu::current_stream(&d)))
}

/// The default stream of the WebGPU device.
#[wasm_bindgen(js_name = gpuDefaultStream)]
pub fn gpu_default_stream() -> Result<WasmStream, JsValue> {
    let d = current_webgpu_device("gpu.defaultStream()")?;
    Ok(WasmStream(crate::gpu::default_stream(&d)))
}

/// Make `s` the current stream.
#[wasm_bindgen(js_name = gpuSetStream)]
pub fn gpu_set_stream(s: &WasmStream) {
    crate::gpu::set_stream(&s.0);
}

/// A stream over the WebGPU device's queue for work the page submits itself (the JS
/// wrapper checks the queue is the device's).
#[wasm_bindgen(js_name = gpuStreamFromExternal)]
pub fn gpu_stream_from_external() -> Result<WasmStream, JsValue> {
    let d = current_webgpu_device("gpu.getStreamFromExternal()")?;
    Ok(WasmStream(crate::gpu::get_stream_from_external(&d)))
}
