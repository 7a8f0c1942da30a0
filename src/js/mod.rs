//! JavaScript bindings (wasm32 only), wrapped by `js/index.js` (the npm package's API).
//!
//! The Rust side works on flat lists of tensors in the program's user-input order; the JS
//! wrapper flattens and unflattens the pytree structures (`inSpec`/`outSpec`, serialized
//! [`crate::pytree::TreeSpec`]s) and turns typed arrays into `{dtype, shape, bytes}`.
//! Errors reach JS as `Error` objects whose `name` is `Pt2WebError` and whose `code` is
//! [`crate::Error::code`]; the model stays usable after one.

use crate::archive::pt2::LoadOptions;
use crate::cpu::{Data, Tensor};
use crate::error::Error;
use crate::info::program_info;
use crate::program::Pt2Archive;
use crate::runtime::{RValue, Session};
use crate::{DType, Limits};
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

fn js_error(code: &str, msg: &str) -> JsValue {
    let e = js_sys::Error::new(msg);
    e.set_name("Pt2WebError");
    let _ = Reflect::set(&e, &"code".into(), &code.into());
    e.into()
}

fn to_js(e: Error) -> JsValue {
    js_error(e.code(), &e.to_string())
}

fn get(o: &JsValue, key: &str) -> Result<JsValue, JsValue> {
    Reflect::get(o, &key.into())
}

/// A loaded program on the CPU backend (WASM SIMD).
#[wasm_bindgen]
pub struct WasmModel {
    session: Session,
    info: JsValue,
    names: Vec<String>,
}

/// The program names in an archive (several programs: `package_pt2(exported_programs=...)`).
#[wasm_bindgen(js_name = programNames)]
pub fn program_names(bytes: &[u8]) -> Result<Array, JsValue> {
    let a = Pt2Archive::open("model.pt2", bytes.to_vec(), Limits::default()).map_err(to_js)?;
    Ok(a.program_names()
        .iter()
        .map(|n| JsValue::from_str(n))
        .collect())
}

/// `true` when the bytes look like a PT2 archive (torch's `is_pt2_package`).
#[wasm_bindgen(js_name = isPt2Package)]
pub fn is_pt2_package(bytes: &[u8]) -> bool {
    crate::archive::is_pt2_package(bytes)
}

#[wasm_bindgen]
impl WasmModel {
    /// Load a program (by name, or the only/first one) from the bytes of a `.pt2`.
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: &[u8], program: Option<String>) -> Result<WasmModel, JsValue> {
        let archive =
            Pt2Archive::open("model.pt2", bytes.to_vec(), Limits::default()).map_err(to_js)?;
        let p = archive
            .program(program.as_deref(), &LoadOptions::default())
            .map_err(to_js)?;
        let info = program_info(&p);
        let ser = serde_wasm_bindgen::Serializer::json_compatible();
        let info_js = serde::Serialize::serialize(&info, &ser)
            .map_err(|e| js_error("INTERNAL", &e.to_string()))?;
        let specs = Object::new();
        for (k, s) in [("inSpec", &p.in_spec), ("outSpec", &p.out_spec)] {
            let v = match s {
                Some(s) => serde::Serialize::serialize(s, &ser)
                    .map_err(|e| js_error("INTERNAL", &e.to_string()))?,
                None => JsValue::NULL,
            };
            Reflect::set(&specs, &k.into(), &v)?;
        }
        Reflect::set(&info_js, &"specs".into(), &specs)?;
        let names = p.user_inputs().iter().map(|u| u.name.clone()).collect();
        let session = Session::new(p).map_err(to_js)?;
        Ok(WasmModel {
            session,
            info: info_js,
            names,
        })
    }

    /// `pt2web info` for this program (plus `specs.inSpec/outSpec`).
    #[wasm_bindgen(getter)]
    pub fn info(&self) -> JsValue {
        self.info.clone()
    }

    /// Run with flat user inputs: an array of `{dtype, shape, bytes}` (little-endian bytes)
    /// or numbers (SymInt inputs). Returns the flat user outputs in the same form.
    pub fn run(&mut self, inputs: Array) -> Result<Array, JsValue> {
        let mut flat = Vec::with_capacity(inputs.length() as usize);
        for (i, v) in inputs.iter().enumerate() {
            let name = self
                .names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("#{i}"));
            flat.push(input_value(&name, &v)?);
        }
        let outs = self.session.run(flat).map_err(to_js)?;
        outs.iter()
            .enumerate()
            .map(|(i, v)| output_value(&format!("output_{i}"), v))
            .collect()
    }

    /// State tensor names (parameters, buffers, constants), by FQN.
    #[wasm_bindgen(js_name = stateNames)]
    pub fn state_names(&self) -> Array {
        self.session
            .state
            .keys()
            .map(|k| JsValue::from_str(k))
            .collect()
    }

    /// One state tensor as `{dtype, shape, bytes}` (a copy; buffers reflect mutations).
    #[wasm_bindgen(js_name = stateTensor)]
    pub fn state_tensor(&self, name: &str) -> Result<JsValue, JsValue> {
        let t = self.session.state.get(name).ok_or_else(|| {
            js_error(
                "INPUT",
                &format!("no parameter, buffer or constant named '{name}'"),
            )
        })?;
        tensor_to_js(name, t)
    }

    /// Start recording per-op times (clears an earlier recording).
    #[wasm_bindgen(js_name = startProfiler)]
    pub fn start_profiler(&mut self) {
        self.session.run_state.profiler = Some(crate::runtime::Profiler::default());
    }

    /// Stop recording: `{events, summary, chromeTrace}` (`chromeTrace` is the Chrome trace
    /// event JSON object), or `null` when the profiler was not started.
    #[wasm_bindgen(js_name = stopProfiler)]
    pub fn stop_profiler(&mut self) -> Result<JsValue, JsValue> {
        let Some(p) = self.session.run_state.profiler.take() else {
            return Ok(JsValue::NULL);
        };
        let ser = serde_wasm_bindgen::Serializer::json_compatible();
        let v = serde_json::json!({
            "events": p.events,
            "summary": p.summary(),
            "chromeTrace": p.chrome_trace("cpu"),
        });
        serde::Serialize::serialize(&v, &ser).map_err(|e| js_error("INTERNAL", &e.to_string()))
    }

    /// Seed the program's random generator (rand/randn/dropout in train mode/bernoulli).
    #[wasm_bindgen(js_name = manualSeed)]
    pub fn manual_seed(&mut self, seed: u64) {
        self.session.run_state.rng = crate::runtime::Rng::new(seed);
    }
}

fn input_value(name: &str, v: &JsValue) -> Result<RValue, JsValue> {
    if let Some(f) = v.as_f64() {
        return Ok(if f.fract() == 0.0 && f.abs() < 9.0e15 {
            RValue::Int(f as i64)
        } else {
            RValue::Float(f)
        });
    }
    if let Some(b) = v.as_bool() {
        return Ok(RValue::Bool(b));
    }
    if v.is_null() || v.is_undefined() {
        return Err(js_error(
            "INPUT",
            &format!("input '{name}': missing (got {v:?})"),
        ));
    }
    let dtype_s = get(v, "dtype")?.as_string().unwrap_or_default();
    let dtype = DType::from_name(&dtype_s).ok_or_else(|| {
        js_error(
            "INPUT",
            &format!("input '{name}': unknown dtype '{dtype_s}'"),
        )
    })?;
    let shape_js = get(v, "shape")?;
    if !Array::is_array(&shape_js) {
        return Err(js_error(
            "INPUT",
            &format!("input '{name}': shape must be an array of sizes"),
        ));
    }
    let mut shape = Vec::new();
    for d in Array::from(&shape_js).iter() {
        match d.as_f64() {
            Some(x) if x >= 0.0 && x.fract() == 0.0 && x < 4.0e9 => shape.push(x as usize),
            _ => {
                return Err(js_error(
                    "INPUT",
                    &format!("input '{name}': bad size {d:?} in shape"),
                ))
            }
        }
    }
    let bytes = get(v, "bytes")?;
    let bytes: Uint8Array = bytes.dyn_into().map_err(|_| {
        js_error(
            "INPUT",
            &format!("input '{name}': data must be a typed array"),
        )
    })?;
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .unwrap_or(usize::MAX);
    let want = numel.saturating_mul(dtype.size());
    if bytes.length() as usize != want {
        return Err(js_error(
            "INPUT",
            &format!(
                "input '{name}': shape {shape:?} of {dtype} needs {numel} elements ({want} bytes), the data has {} bytes",
                bytes.length()
            ),
        ));
    }
    let data = Data::from_le_bytes(dtype, &bytes.to_vec())
        .ok_or_else(|| js_error("INPUT", &format!("input '{name}': bad {dtype} data")))?;
    Ok(RValue::Tensor(Tensor::from_data(data, &shape)))
}

fn tensor_to_js(name: &str, t: &Tensor) -> Result<JsValue, JsValue> {
    let h = t.to_host(name).map_err(to_js)?;
    let o = Object::new();
    Reflect::set(&o, &"dtype".into(), &h.dtype.name().into())?;
    let shape: Array = h.sizes.iter().map(|&s| JsValue::from(s as f64)).collect();
    Reflect::set(&o, &"shape".into(), &shape)?;
    Reflect::set(
        &o,
        &"bytes".into(),
        &Uint8Array::from(h.storage.bytes()).into(),
    )?;
    Ok(o.into())
}

fn output_value(name: &str, v: &RValue) -> Result<JsValue, JsValue> {
    match v {
        RValue::Tensor(t) => tensor_to_js(name, &t.contiguous()),
        RValue::Int(i) => Ok(JsValue::from(*i as f64)),
        RValue::Float(f) => Ok(JsValue::from(*f)),
        RValue::Bool(b) => Ok(JsValue::from(*b)),
        RValue::None => Ok(JsValue::NULL),
        other => Err(js_error(
            "OP",
            &format!("{name}: a {} output cannot be returned to JS", other.kind()),
        )),
    }
}
