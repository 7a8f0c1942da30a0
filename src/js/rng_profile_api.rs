//! The JS bindings of the device default generators ([`crate::random`]: `gpu.manualSeedAll`,
//! `seedAll`, `getRngStateAll`, `setRngStateAll`) and of profiler scopes
//! ([`crate::profiler`]: `gpu.profile`, `gpu.isCapturing`), wrapped by `js/index.js`.

use super::*;

/// Seed every device's default generator (the CPU's and the WebGPU device's).
#[wasm_bindgen(js_name = gpuManualSeedAll)]
pub fn gpu_manual_seed_all(seed: u64) {
    crate::random::manual_seed_all(seed)
}

/// Seed every device's default generator from the clock; the seed.
#[wasm_bindgen(js_name = gpuSeedAll)]
pub fn gpu_seed_all() -> u64 {
    crate::random::seed_all()
}

/// Every device's default generator state (16 bytes each): the CPU first, then the WebGPU
/// device when it is open.
#[wasm_bindgen(js_name = gpuGetRngStateAll)]
pub fn gpu_get_rng_state_all() -> Array {
    crate::random::get_rng_state_all()
        .iter()
        .map(|s| JsValue::from(Uint8Array::from(s.as_slice())))
        .collect()
}

/// Restore the states [`gpu_get_rng_state_all`] gave (each a `Uint8Array`).
#[wasm_bindgen(js_name = gpuSetRngStateAll)]
pub fn gpu_set_rng_state_all(states: Array) -> Result<(), JsValue> {
    let states = states
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.dyn_into::<Uint8Array>()
                .map(|a| a.to_vec())
                .map_err(|_| js_error("INPUT", &format!("rng_states[{i}]: expected a Uint8Array")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    crate::random::set_rng_state_all(&states).map_err(to_js)
}

/// Open a profiler scope; `profilerEnd(id)` closes it.
#[wasm_bindgen(js_name = profilerBegin)]
pub fn profiler_begin() -> u64 {
    crate::profiler::begin()
}

/// Close a profiler scope: `{events: [{model, device, node, op, start_ms, dur_ms, depth,
/// cat}], summary, chromeTrace}`, or `null` when it is not open.
#[wasm_bindgen(js_name = profilerEnd)]
pub fn profiler_end(id: u64) -> Result<JsValue, JsValue> {
    let Some(p) = crate::profiler::end(id) else {
        return Ok(JsValue::NULL);
    };
    to_js_value(&serde_json::json!({
        "events": p.events,
        "summary": p.summary(),
        "chromeTrace": p.chrome_trace(),
    }))
}

/// Whether a profiler scope is open.
#[wasm_bindgen(js_name = profilerIsCapturing)]
pub fn profiler_is_capturing() -> bool {
    crate::profiler::is_capturing()
}
