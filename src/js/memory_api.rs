//! torch.cuda.memory's API on the shared WebGPU device (`src/gpu/memory.rs`), wrapped by the
//! `gpu` object of `js/index.js`: `mem_get_info`, the pool's reserved bytes, statistics under
//! torch's keys, memory history and snapshots. Each is `null` (or does nothing) before the
//! device is opened.

use super::*;

/// The shared device, if open.
fn open_device() -> Option<Arc<GpuDevice>> {
    DEVICE.with(|d| d.borrow().clone())
}

/// `[free, total]` bytes (estimated: see `GpuDevice::mem_get_info`), or `null`.
#[wasm_bindgen(js_name = gpuMemGetInfo)]
pub fn gpu_mem_get_info() -> Result<JsValue, JsValue> {
    open_device().map_or(Ok(JsValue::NULL), |d| to_js_value(&d.mem_get_info()))
}

/// `{memoryReserved, maxMemoryReserved}`: bytes of the pool's buffers, live plus cached, now
/// and at their peak; or `null`.
#[wasm_bindgen(js_name = gpuMemoryReserved)]
pub fn gpu_memory_reserved() -> Result<JsValue, JsValue> {
    open_device().map_or(Ok(JsValue::NULL), |d| {
        to_js_value(&serde_json::json!({
            "memoryReserved": d.memory_reserved(),
            "maxMemoryReserved": d.max_memory_reserved(),
        }))
    })
}

/// torch's `memory_stats` (`nested` false: flat keys such as `allocated_bytes.all.current`)
/// or `memory_stats_as_nested_dict` (`nested` true); `null` before the device is open.
#[wasm_bindgen(js_name = gpuMemoryStatsTorch)]
pub fn gpu_memory_stats_torch(nested: bool) -> Result<JsValue, JsValue> {
    let Some(d) = open_device() else {
        return Ok(JsValue::NULL);
    };
    match nested {
        true => to_js_value(&d.memory_stats_as_nested_dict()),
        false => to_js_value(&d.memory_stats_map()),
    }
}

/// Zero the accumulated totals and counters of the statistics.
#[wasm_bindgen(js_name = gpuResetAccumulatedMemoryStats)]
pub fn gpu_reset_accumulated_memory_stats() {
    if let Some(d) = open_device() {
        d.reset_accumulated_memory_stats();
    }
}

/// Start (a fresh history of at most `max_entries` actions) or stop recording the pool's
/// actions, on the open device and on any device opened later (so a history started before
/// the first load includes the weights' upload).
#[wasm_bindgen(js_name = gpuRecordMemoryHistory)]
pub fn gpu_record_memory_history(enabled: bool, max_entries: f64) {
    let n = max_entries.clamp(1.0, usize::MAX as f64) as usize;
    crate::gpu::memory::record_memory_history(enabled, n);
    if let Some(d) = open_device() {
        d.record_memory_history(enabled, n);
    }
}

/// The pool and its history in the layout of `torch.cuda.memory._snapshot()`, or `null`.
#[wasm_bindgen(js_name = gpuMemorySnapshot)]
pub fn gpu_memory_snapshot() -> Result<JsValue, JsValue> {
    open_device().map_or(Ok(JsValue::NULL), |d| to_js_value(&d.memory_snapshot()))
}
