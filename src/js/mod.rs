//! JavaScript bindings (wasm32 only), wrapped by `js/index.js` (the npm package's API).
//!
//! The Rust side works on flat lists of tensors in the program's user-input order; the JS
//! wrapper flattens and unflattens the pytree structures (`inSpec`/`outSpec`, serialized
//! [`crate::pytree::TreeSpec`]s) and turns typed arrays into `{dtype, shape, bytes}`.
//! Errors reach JS as `Error` objects whose `name` is `Pt2WebError` and whose `code` is
//! [`crate::Error::code`]; the model stays usable after one.

use crate::archive::pt2::LoadOptions;
use crate::backend::Backend;
use crate::cpu::{Data, Tensor};
use crate::error::Error;
use crate::gpu::exec::GpuSessionBuild;
use crate::gpu::{BackendChoice, Event, GTensor, GpuDevice, GpuInput, Slot, UserShader};
use crate::info::program_info;
use crate::meta::{MValue, MetaTensor};
use crate::program::Pt2Archive;
use crate::runtime::{RValue, Session};
use crate::{DType, Limits};
use js_sys::{Array, Object, Reflect, Uint8Array};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

mod backends_api;
mod device_api;
mod memory_api;
mod rng_profile_api;
mod stream;

/// `initThreadPool(n)` (the multi-threaded build): starts `n` Web Workers sharing this
/// module's memory as rayon's pool; `js/index.js` calls it on cross-origin isolated pages
/// with one worker fewer than the threads wanted (the calling thread is the last), then
/// [`set_threads`].
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

/// Whether this build can run kernels on several threads (the `threads` build).
#[wasm_bindgen(js_name = threadsBuilt)]
pub fn threads_built() -> bool {
    cfg!(feature = "threads")
}

/// Kernels split their work over `n` threads from now on: the calling thread and the
/// `n − 1` workers of `initThreadPool(n - 1)`, once it resolved.
#[cfg(feature = "threads")]
#[wasm_bindgen(js_name = setThreads)]
pub fn set_threads(n: usize) {
    crate::ops::matmul::gemm::set_wasm_threads(n)
}

/// The threads CPU kernels use now (1 until a pool is started).
#[wasm_bindgen(js_name = cpuThreads)]
pub fn cpu_threads() -> usize {
    crate::ops::matmul::gemm::num_threads()
}

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

/// The backend a model runs on: the CPU ([`Session`], WASM SIMD) or WebGPU ([`crate::gpu::GpuSession`],
/// through wgpu, with CPU fallback per op).
type Engine = Box<dyn Backend>;

/// `"webgpu"` or `"cpu"`, as the JS API names the backends.
fn device_name(e: &dyn Backend) -> &'static str {
    if e.gpu().is_some() {
        "webgpu"
    } else {
        "cpu"
    }
}

/// A loaded program, on the CPU backend or on WebGPU.
#[wasm_bindgen]
pub struct WasmModel {
    engine: Rc<RefCell<Engine>>,
    info: JsValue,
    names: Vec<String>,
}

impl WasmModel {
    /// A model on the CPU backend from [`open_program`]'s result.
    fn on_cpu((p, info, names): Loaded) -> Result<WasmModel, JsValue> {
        WasmModel::of_cpu_session(Session::new(p).map_err(to_js)?, info, names)
    }

    /// The model of a CPU session.
    fn of_cpu_session(
        session: Session,
        info: JsValue,
        names: Vec<String>,
    ) -> Result<WasmModel, JsValue> {
        Ok(WasmModel {
            engine: Rc::new(RefCell::new(Box::new(session))),
            info,
            names,
        })
    }

    /// A model on WebGPU from [`open_program`]'s result (each weight uploaded as the
    /// session takes it).
    async fn on_gpu(loaded: Loaded) -> Result<WasmModel, JsValue> {
        let (mut build, info, names) = gpu_build(loaded).await?;
        while !build.is_done() {
            build.step().map_err(to_js)?;
        }
        WasmModel::of_gpu_build(build, info, names)
    }

    /// The model of a [`GpuSessionBuild`] whose steps all ran.
    fn of_gpu_build(
        build: GpuSessionBuild,
        info: JsValue,
        names: Vec<String>,
    ) -> Result<WasmModel, JsValue> {
        let session = build.finish().map_err(to_js)?;
        Ok(WasmModel {
            engine: Rc::new(RefCell::new(Box::new(session))),
            info,
            names,
        })
    }
}

/// The start of a WebGPU model from [`open_program`]'s result: the device opened, the
/// passes run, no weight uploaded yet ([`GpuSessionBuild::step`] does that).
async fn gpu_build(
    (p, info, names): Loaded,
) -> Result<(GpuSessionBuild, JsValue, Vec<String>), JsValue> {
    let dev = device().await?;
    // An adapter without shader-f16 refuses an f16 program as a device problem, so
    // `device: 'auto'` falls back to the CPU backend with the reason.
    let f16 = p.precision == crate::passes::half::Precision::F16 && !dev.f16_enabled();
    let build = GpuSessionBuild::new(p, dev).map_err(|e| {
        if f16 {
            js_error("DEVICE", &e.to_string())
        } else {
            to_js(e)
        }
    })?;
    Ok((build, info, names))
}

thread_local! {
    /// The WebGPU device every model of this page/worker shares (opened on first use).
    static DEVICE: RefCell<Option<Arc<GpuDevice>>> = const { RefCell::new(None) };
}

thread_local! {
    /// GPU-resident tensors handed to JS (kept outputs), by id.
    static GPU_TENSORS: RefCell<HashMap<u32, (GTensor, Arc<GpuDevice>)>> = RefCell::new(HashMap::new());
    static NEXT_GPU_TENSOR: std::cell::Cell<u32> = const { std::cell::Cell::new(1) };
}

/// A tensor that stays in WebGPU memory (a run's output with `keepOnGpu`): pass it to the
/// next `run`, bind its `buffer()` for rendering, or `read()` it. The buffer holds 32-bit
/// words (f32; int64/int32/int16/int8/uint8 as i32; bool as u32) at `offset` with `strides` (elements).
#[wasm_bindgen]
pub struct WasmGpuTensor {
    id: u32,
    dtype: String,
    shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
}

impl WasmGpuTensor {
    fn new(t: GTensor, dev: Arc<GpuDevice>) -> WasmGpuTensor {
        let id = NEXT_GPU_TENSOR.with(|n| {
            let id = n.get();
            n.set(id.wrapping_add(1).max(1));
            id
        });
        let out = WasmGpuTensor {
            id,
            dtype: t.dtype.name().to_string(),
            shape: t.sizes.clone(),
            strides: t.strides.clone(),
            offset: t.offset,
        };
        GPU_TENSORS.with(|m| m.borrow_mut().insert(id, (t, dev)));
        out
    }
    fn get(&self) -> Result<(GTensor, Arc<GpuDevice>), JsValue> {
        lookup_gpu_tensor(self.id)
    }
}

fn lookup_gpu_tensor(id: u32) -> Result<(GTensor, Arc<GpuDevice>), JsValue> {
    GPU_TENSORS
        .with(|m| m.borrow().get(&id).cloned())
        .ok_or_else(|| js_error("DISPOSED", "the GPU tensor was disposed"))
}

impl Drop for WasmGpuTensor {
    fn drop(&mut self) {
        GPU_TENSORS.with(|m| m.borrow_mut().remove(&self.id));
    }
}

fn usize_array(v: &[usize]) -> Array {
    v.iter().map(|&x| JsValue::from(x as f64)).collect()
}

#[wasm_bindgen]
impl WasmGpuTensor {
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> String {
        self.dtype.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Array {
        usize_array(&self.shape)
    }
    #[wasm_bindgen(getter)]
    pub fn strides(&self) -> Array {
        usize_array(&self.strides)
    }
    #[wasm_bindgen(getter)]
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// The `GPUBuffer` holding the tensor (owned by pt2web: do not destroy it).
    pub fn buffer(&self) -> Result<JsValue, JsValue> {
        let (t, _) = self.get()?;
        let s = t.cell.lock().unwrap_or_else(|e| e.into_inner());
        let b = s
            .gpu
            .as_ref()
            .filter(|_| s.gpu_valid)
            .ok_or_else(|| js_error("GPU", "the tensor has no current GPU copy"))?;
        b.buffer()
            .as_webgpu()
            .map(|g| JsValue::from(g.clone()))
            .ok_or_else(|| js_error("GPU", "not a WebGPU buffer"))
    }
    /// Copy to the CPU: resolves to `{dtype, shape, bytes}`.
    pub fn read(&self) -> js_sys::Promise {
        let got = self.get();
        wasm_bindgen_futures::future_to_promise(async move {
            let (t, dev) = got?;
            let c = crate::gpu::read_tensor(&dev, &t).await.map_err(to_js)?;
            tensor_to_js("tensor", &c)
        })
    }
}

/// The shared WebGPU device, requested from `navigator.gpu` on first use.
/// A lost device is replaced (the models on it stay lost: load them again).
async fn device() -> Result<Arc<GpuDevice>, JsValue> {
    if let Some(d) = DEVICE.with(|d| d.borrow().clone()) {
        if d.check_lost().is_ok() {
            return Ok(d);
        }
    }
    let d = Arc::new(
        GpuDevice::request(BackendChoice::WebGpu)
            .await
            .map_err(|e| js_error("DEVICE", &e.to_string()))?,
    );
    DEVICE.with(|slot| *slot.borrow_mut() = Some(d.clone()));
    Ok(d)
}

fn to_js_value<T: serde::Serialize>(v: &T) -> Result<JsValue, JsValue> {
    let ser = serde_wasm_bindgen::Serializer::json_compatible();
    v.serialize(&ser)
        .map_err(|e| js_error("INTERNAL", &e.to_string()))
}

/// The program names in an archive (several programs: `package_pt2(exported_programs=...)`).
#[wasm_bindgen(js_name = programNames)]
pub fn program_names(bytes: &[u8]) -> Result<Array, JsValue> {
    let a = Pt2Archive::open("model.pt2", bytes.to_vec(), Limits::default()).map_err(to_js)?;
    Ok(names_of(&a))
}

/// The extra files `torch.export.save(extra_files=...)` stored, by name: `{name: Uint8Array}`.
#[wasm_bindgen(js_name = extraFiles)]
pub fn extra_files(bytes: &[u8]) -> Result<Object, JsValue> {
    let a = Pt2Archive::open("model.pt2", bytes.to_vec(), Limits::default()).map_err(to_js)?;
    extra_files_of(&a)
}

/// An archive's program names as a JS array.
fn names_of(a: &Pt2Archive) -> Array {
    a.program_names()
        .iter()
        .map(|n| JsValue::from_str(n))
        .collect()
}

/// An archive's extra files as `{name: Uint8Array}`.
fn extra_files_of(a: &Pt2Archive) -> Result<Object, JsValue> {
    let o = Object::new();
    for (name, b) in a.extra_files().map_err(to_js)? {
        Reflect::set(&o, &name.into(), &Uint8Array::from(&b[..]).into())?;
    }
    Ok(o)
}

/// `true` when the bytes look like a PT2 archive (torch's `is_pt2_package`).
#[wasm_bindgen(js_name = isPt2Package)]
pub fn is_pt2_package(bytes: &[u8]) -> bool {
    crate::archive::is_pt2_package(bytes)
}

/// torch's `module_call_graph`: `[{fqn, inSpec, outSpec, forwardArgNames}]`, the root module
/// (fqn "") first, then the submodules export preserved the calling convention of
/// (`preserve_module_call_signature`).
fn module_call_graph(p: &crate::program::Program) -> Result<JsValue, JsValue> {
    let spec = |s: &Option<crate::pytree::TreeSpec>| match s {
        Some(s) => to_js_value(s),
        None => Ok(JsValue::NULL),
    };
    let out = Array::new();
    for m in &p.module_call_graph {
        let o = Object::new();
        Reflect::set(&o, &"fqn".into(), &m.fqn.as_str().into())?;
        Reflect::set(&o, &"inSpec".into(), &spec(&m.in_spec)?)?;
        Reflect::set(&o, &"outSpec".into(), &spec(&m.out_spec)?)?;
        Reflect::set(
            &o,
            &"forwardArgNames".into(),
            &to_js_value(&m.forward_arg_names)?,
        )?;
        out.push(&o);
    }
    Ok(out.into())
}

/// What [`open_program`] gives: the program, its info with `specs`, its input names.
type Loaded = (crate::program::Program, JsValue, Vec<String>);

/// [`open_program`] from the bytes of a whole `.pt2`, with `load`'s options.
fn open_bytes(
    bytes: Vec<u8>,
    program: Option<String>,
    weights: Option<String>,
    dtype: Option<String>,
    opset: &JsValue,
) -> Result<Loaded, JsValue> {
    let archive = Pt2Archive::open("model.pt2", bytes, Limits::default()).map_err(to_js)?;
    open_program(archive, program, weights, dtype, opset)
}

/// Parse the archive and describe the program: (program, info with `specs`, input names).
/// `weights`: `load`'s `weights` option (`'f32'`, `'int8'`, `'int4'`, `'int4:GROUP'`);
/// `dtype`: its `dtype` option (`'float32'`, `'float16'`: [`crate::passes::half`]).
fn open_program(
    archive: Pt2Archive,
    program: Option<String>,
    weights: Option<String>,
    dtype: Option<String>,
    opset: &JsValue,
) -> Result<Loaded, JsValue> {
    // A load option: its default when absent, a clear INPUT error naming it when malformed.
    fn option<T: std::str::FromStr<Err = String> + Default>(
        v: Option<&str>,
        name: &str,
    ) -> Result<T, JsValue> {
        v.map_or(Ok(T::default()), |s| {
            s.parse().map_err(|msg| {
                to_js(crate::Error::Input {
                    input: name.into(),
                    msg,
                })
            })
        })
    }
    let dtype = option(dtype.as_deref(), "dtype")?;
    let weights = option(weights.as_deref(), "weights")?;
    // `expectedOpsetVersion`: `{namespace: version}`, as torch.export.load takes it.
    let expected_opset_version = if opset.is_undefined() || opset.is_null() {
        None
    } else {
        Some(serde_wasm_bindgen::from_value(opset.clone()).map_err(|e| {
            to_js(crate::Error::Input {
                input: "expectedOpsetVersion".into(),
                msg: format!(
                    "expected an object of opset versions by namespace ({{aten: 10}}): {e}"
                ),
            })
        })?)
    };
    let opts = LoadOptions {
        weights,
        dtype,
        expected_opset_version,
        ..Default::default()
    };
    let p = archive.program(program.as_deref(), &opts).map_err(to_js)?;
    let info = program_info(&p);
    let info_js = to_js_value(&info)?;
    let specs = Object::new();
    for (k, s) in [("inSpec", &p.in_spec), ("outSpec", &p.out_spec)] {
        let v = match s {
            Some(s) => to_js_value(s)?,
            None => JsValue::NULL,
        };
        Reflect::set(&specs, &k.into(), &v)?;
    }
    Reflect::set(&info_js, &"specs".into(), &specs)?;
    Reflect::set(&info_js, &"moduleCallGraph".into(), &module_call_graph(&p)?)?;
    let names = p.user_inputs().iter().map(|u| u.name.clone()).collect();
    Ok((p, info_js, names))
}

#[wasm_bindgen]
impl WasmModel {
    /// Load a program (by name, or the only/first one) from the bytes of a `.pt2`, on the
    /// CPU backend; `weights` quantizes at load, `dtype` converts, `opset` is the expected
    /// opset versions (see `open_program`).
    #[wasm_bindgen(constructor)]
    pub fn new(
        bytes: Vec<u8>,
        program: Option<String>,
        weights: Option<String>,
        dtype: Option<String>,
        opset: JsValue,
    ) -> Result<WasmModel, JsValue> {
        WasmModel::on_cpu(open_bytes(bytes, program, weights, dtype, &opset)?)
    }

    /// Load a program on WebGPU (weights uploaded once); ops without a GPU kernel run on
    /// the CPU backend.
    #[wasm_bindgen(js_name = loadGpu)]
    pub async fn load_gpu(
        bytes: Vec<u8>,
        program: Option<String>,
        weights: Option<String>,
        dtype: Option<String>,
        opset: JsValue,
    ) -> Result<WasmModel, JsValue> {
        WasmModel::on_gpu(open_bytes(bytes, program, weights, dtype, &opset)?).await
    }

    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> String {
        device_name(&**self.engine.borrow()).into()
    }

    /// `pt2web info` for this program (plus `specs.inSpec/outSpec`).
    #[wasm_bindgen(getter)]
    pub fn info(&self) -> JsValue {
        self.info.clone()
    }

    /// Run with flat user inputs: an array of `{dtype, shape, bytes}` (little-endian bytes),
    /// `{gpuId}` (a [`WasmGpuTensor`], WebGPU models only) or numbers (SymInt inputs).
    /// Resolves to the flat user outputs in the same form; with `keep` (WebGPU models),
    /// tensor outputs stay on the GPU as [`WasmGpuTensor`]s. `cancel` (cancelled by the JS
    /// `AbortSignal`) and `timeout_ms` stop the run before its next node with a `CANCELLED`
    /// error ([`crate::runtime::RunOptions`]); `stream` (a `WasmStream`) is the stream the
    /// run goes on (the current one when absent).
    // The engine stays borrowed across the GPU wait on purpose: a second run() (or a state
    // read) meanwhile gets a BUSY error instead of seeing a half-run model.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn run(
        &self,
        inputs: Array,
        keep: Option<bool>,
        cancel: Option<WasmCancelToken>,
        timeout_ms: Option<f64>,
        stream: Option<device_api::WasmStream>,
    ) -> js_sys::Promise {
        let keep = keep.unwrap_or(false);
        let flat = match self.flat_inputs(&inputs, gpu_input) {
            Ok(f) => f,
            Err(e) => return js_sys::Promise::reject(&e),
        };
        let options = crate::runtime::RunOptions {
            cancel: cancel.map(|c| c.0),
            timeout_ms,
            stream: stream.map(|s| s.0),
        };
        let engine = self.engine.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut e = borrow_idle(&engine)?;
            e.session_mut().run_state.stop = crate::runtime::Stop::start(&options);
            let outs = e.run_with(flat, keep).await;
            e.session_mut().run_state.stop = Default::default();
            let outs: Vec<Slot> = outs.map_err(to_js)?;
            let dev = e.gpu().map(|g| g.device.clone());
            let arr: Array = outs
                .into_iter()
                .enumerate()
                .map(|(i, s)| match (s, &dev) {
                    (Slot::Value(v), _) => output_value(&format!("output_{i}"), &v),
                    (Slot::Tensor(t), Some(d)) => Ok(WasmGpuTensor::new(t, d.clone()).into()),
                    _ => Err(js_error(
                        "OP",
                        &format!("output_{i}: a list of tensors cannot stay on the GPU"),
                    )),
                })
                .collect::<Result<_, _>>()?;
            Ok(arr.into())
        })
    }

    /// Prepare for user inputs of these dtypes and shapes without running (an array of
    /// `{dtype, shape}` or numbers, flat user-input order): the Plan (guards checked once,
    /// meta pass) and, on WebGPU, every compute pipeline and bind group the run will use, so
    /// the first run compiles no shader. Resolves to `{prepareMs, pipelinesMs, warmUpMs, firstDispatches, waitMs, planSteps,
    /// pipelinesCreated, bindGroupsCreated, stopped}` (`stopped`: where the GPU pass stopped
    /// early, at a readback or a CPU fallback; null when it reached the end).
    /// `cancel` stops the warm-up pass before its next node, as it stops a run.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn prepare(&self, inputs: Array, cancel: Option<WasmCancelToken>) -> js_sys::Promise {
        let metas = match self.flat_inputs(&inputs, meta_input) {
            Ok(m) => m,
            Err(e) => return js_sys::Promise::reject(&e),
        };
        let stop = stop_of(cancel);
        let engine = self.engine.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut e = borrow_idle(&engine)?;
            e.session_mut().run_state.stop = stop;
            let p = e.prepare_with(&metas).await;
            e.session_mut().run_state.stop = Default::default();
            let p = p.map_err(to_js)?;
            let v = serde_json::json!({
                "prepareMs": p.prepare_ms, "pipelinesMs": p.pipelines_ms,
                "warmUpMs": p.warm_up_ms, "firstDispatches": p.first_dispatches, "waitMs": p.wait_ms, "planSteps": p.plan_steps,
                "pipelinesCreated": p.pipelines_created,
                "bindGroupsCreated": p.bind_groups_created, "autotuned": p.autotuned,
                "stopped": p.stopped,
            });
            to_js_value(&v)
        })
    }

    /// Generate tokens after `prompt` with a language model exported with a static KV cache
    /// ([`crate::generate`]). `options`: `{maxNewTokens, temperature, topK, topP, seed, eos}`
    /// (all optional; greedy by default); `on_token(id)` is called as each token arrives (a
    /// throw stops the loop). Resolves to `{tokens, prefillMs, decodeTokS,
    /// readbackBytesPerToken}`. `cancel` stops the loop before the next node of its current
    /// call with a `CANCELLED` error.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn generate(
        &self,
        prompt: Vec<f64>,
        options: JsValue,
        on_token: Option<js_sys::Function>,
        cancel: Option<WasmCancelToken>,
    ) -> js_sys::Promise {
        let parsed = (|| -> Result<(Vec<i64>, crate::generate::GenerateOptions), JsValue> {
            let prompt = prompt
                .iter()
                .map(|&t| {
                    if t.fract() == 0.0 && t >= 0.0 && t <= i64::MAX as f64 {
                        Ok(t as i64)
                    } else {
                        Err(js_error(
                            "INPUT",
                            &format!("prompt: token id {t} is not a non-negative integer"),
                        ))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            let num = |key: &str| -> Result<Option<f64>, JsValue> {
                if options.is_undefined() || options.is_null() {
                    return Ok(None);
                }
                let v = get(&options, key)?;
                if v.is_undefined() || v.is_null() {
                    return Ok(None);
                }
                v.as_f64()
                    .map(Some)
                    .ok_or_else(|| js_error("INPUT", &format!("options.{key}: expected a number")))
            };
            let count = |key: &str, v: Option<f64>| -> Result<Option<u64>, JsValue> {
                v.map(|x| {
                    if x.fract() == 0.0 && x >= 0.0 && x <= u32::MAX as f64 {
                        Ok(x as u64)
                    } else {
                        Err(js_error(
                            "INPUT",
                            &format!("options.{key}: {x} is not a non-negative integer"),
                        ))
                    }
                })
                .transpose()
            };
            Ok((
                prompt,
                crate::generate::GenerateOptions {
                    max_new_tokens: count("maxNewTokens", num("maxNewTokens")?)?.unwrap_or(32)
                        as usize,
                    sampling: crate::generate::Sampling {
                        temperature: num("temperature")?.unwrap_or(0.0),
                        top_k: count("topK", num("topK")?)?.map(|k| k as usize),
                        top_p: num("topP")?,
                        seed: count("seed", num("seed")?)?.unwrap_or(0),
                    },
                    eos: count("eos", num("eos")?)?.map(|e| e as i64),
                },
            ))
        })();
        let (prompt, opts) = match parsed {
            Ok(p) => p,
            Err(e) => return js_sys::Promise::reject(&e),
        };
        let stop = stop_of(cancel);
        let engine = self.engine.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut e = borrow_idle(&engine)?;
            let mut on = |t: i64| -> crate::error::Result<()> {
                if let Some(f) = &on_token {
                    f.call1(&JsValue::NULL, &JsValue::from_f64(t as f64))
                        .map_err(|err| {
                            crate::error::Error::op(
                                "generate",
                                format!(
                                    "onToken threw: {}",
                                    err.as_string().unwrap_or_else(|| format!("{err:?}"))
                                ),
                            )
                        })?;
                }
                Ok(())
            };
            e.session_mut().run_state.stop = stop;
            let out = crate::generate::generate(&mut **e, &prompt, &opts, &mut on).await;
            e.session_mut().run_state.stop = Default::default();
            let out = out.map_err(to_js)?;
            to_js_value(&serde_json::json!({
                "tokens": out.tokens,
                "prefillMs": out.prefill_ms,
                "decodeTokS": out.decode_tok_s,
                "readbackBytesPerToken": out.readback_bytes_per_token,
            }))
        })
    }

    /// Counters of the last run on WebGPU: `{submits, bufferAllocations, pipelinesCreated,
    /// bindGroupsCreated, dispatches, boundBytes, planSteps, hostMs, waitMs, gpuNodes, viewNodes,
    /// fallbackNodes, fallbacks, uploads, downloads, uploadBytes, downloadBytes}` (`hostMs`: host time outside GPU
    /// waits); `null` on the CPU.
    #[wasm_bindgen(js_name = lastRunStats)]
    pub fn last_run_stats(&self) -> Result<JsValue, JsValue> {
        let e = self.busy()?;
        let Some(st) = e.last_stats() else {
            return Ok(JsValue::NULL);
        };
        to_js_value(&serde_json::json!({
            "submits": st.submits, "bufferAllocations": st.buffer_allocations,
            "pipelinesCreated": st.pipelines_created,
            "bindGroupsCreated": st.bind_groups_created, "dispatches": st.dispatches,
            "boundBytes": st.bound_bytes,
            "peakBytes": st.peak_bytes, "workspaceBytes": st.workspace_bytes,
            "gpuNodes": st.gpu_nodes,
            "viewNodes": st.view_nodes, "fallbackNodes": st.fallback_nodes(),
            "fallbacks": st.fallbacks, "uploads": st.uploads, "downloads": st.downloads,
            "uploadBytes": st.upload_bytes, "downloadBytes": st.download_bytes,
            "planSteps": st.plan_steps, "hostMs": st.host_us as f64 / 1e3,
            "waitMs": st.wait_us as f64 / 1e3, "replayed": st.replayed, "tape": st.tape,
        }))
    }

    /// Flat user inputs, each parsed by `parse` with the name of its input.
    fn flat_inputs<T>(
        &self,
        inputs: &Array,
        parse: impl Fn(&str, &JsValue) -> Result<T, JsValue>,
    ) -> Result<Vec<T>, JsValue> {
        inputs
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let name = self
                    .names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("#{i}"));
                parse(&name, &v)
            })
            .collect()
    }

    fn busy(&self) -> Result<std::cell::Ref<'_, Engine>, JsValue> {
        self.engine
            .try_borrow()
            .map_err(|_| js_error("BUSY", "the model is running: await run() first"))
    }
    fn busy_mut(&self) -> Result<std::cell::RefMut<'_, Engine>, JsValue> {
        self.engine
            .try_borrow_mut()
            .map_err(|_| js_error("BUSY", "the model is running: await run() first"))
    }

    /// State tensor names (parameters, buffers, constants), by FQN: the program's own (the
    /// constants the graph passes derive, `pt2web_folded.*`, are not listed).
    #[wasm_bindgen(js_name = stateNames)]
    pub fn state_names(&self) -> Result<Array, JsValue> {
        Ok(self
            .busy()?
            .session()
            .state
            .keys()
            .filter(|k| !k.starts_with(crate::passes::FOLDED_PREFIX))
            .map(|k| JsValue::from_str(k))
            .collect())
    }

    /// One state tensor as `{dtype, shape, bytes}` (a copy, as it is now: buffers reflect
    /// mutations). A promise: on WebGPU the runs update buffers on the GPU, and this reads
    /// the current copy back.
    #[wasm_bindgen(js_name = stateTensor)]
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn state_tensor(&self, name: &str) -> js_sys::Promise {
        let engine = self.engine.clone();
        let name = name.to_string();
        wasm_bindgen_futures::future_to_promise(async move {
            let e = borrow_idle(&engine)?;
            if !e.session().state.contains_key(&name) {
                return Err(js_error(
                    "INPUT",
                    &format!("no parameter, buffer or constant named '{name}'"),
                ));
            }
            let t = match e.gpu() {
                Some(g) => g.state_tensor_async(&name).await.map_err(to_js)?,
                None => e.session().state[&name].clone(),
            };
            tensor_to_js(&name, &t)
        })
    }

    /// Replace the values of a parameter, buffer or constant with `tensor` (`{dtype, shape,
    /// bytes}`, its dtype and shape): the next run reads them, on WebGPU from the same GPU
    /// buffer (written in place). Refused, with the reason, for state the graph passes folded
    /// into constants at load, state that is not read by the graph, and state sharing its
    /// storage with other state.
    #[wasm_bindgen(js_name = setStateTensor)]
    pub fn set_state_tensor(&self, name: &str, tensor: JsValue) -> Result<(), JsValue> {
        let mut e = self.busy_mut()?;
        let data = settable_data(e.session(), name, &tensor)?;
        match e.gpu_mut() {
            Some(g) => g.write_state(name, data).map_err(to_js),
            None => write_cpu_state(e.session(), name, data),
        }
    }

    /// Start recording per-op times (clears an earlier recording).
    #[wasm_bindgen(js_name = startProfiler)]
    pub fn start_profiler(&self) -> Result<(), JsValue> {
        self.busy_mut()?.session_mut().run_state.profiler =
            Some(crate::runtime::Profiler::default());
        Ok(())
    }

    /// Stop recording: `{events, summary, chromeTrace}` (`chromeTrace` is the Chrome trace
    /// event JSON object), or `null` when the profiler was not started.
    #[wasm_bindgen(js_name = stopProfiler)]
    pub fn stop_profiler(&self) -> Result<JsValue, JsValue> {
        let mut e = self.busy_mut()?;
        let dev = device_name(&**e);
        let Some(p) = e.session_mut().run_state.profiler.take() else {
            return Ok(JsValue::NULL);
        };
        to_js_value(&serde_json::json!({
            "events": p.events,
            "summary": p.summary(),
            "chromeTrace": p.chrome_trace(dev),
            "gpuTiming": p.gpu_timing(),
        }))
    }

    /// Seed the program's random generator (rand/randn/dropout in train mode/bernoulli).
    #[wasm_bindgen(js_name = manualSeed)]
    pub fn manual_seed(&self, seed: u64) -> Result<(), JsValue> {
        self.busy_mut()?.session_mut().manual_seed(seed);
        Ok(())
    }
}

/// The checks of a call that `cancel` alone may stop (prepare, generate).
fn stop_of(cancel: Option<WasmCancelToken>) -> crate::runtime::Stop {
    crate::runtime::Stop::start(&crate::runtime::RunOptions {
        cancel: cancel.map(|c| c.0),
        ..Default::default()
    })
}

/// A run's cancel flag, set from JS (`js/index.js` cancels it from the run's `AbortSignal`):
/// the run stops before its next node with a `CANCELLED` error.
#[wasm_bindgen]
pub struct WasmCancelToken(crate::runtime::CancelToken);

impl Default for WasmCancelToken {
    fn default() -> Self {
        WasmCancelToken::new()
    }
}

#[wasm_bindgen]
impl WasmCancelToken {
    #[wasm_bindgen(constructor)]
    pub fn new() -> WasmCancelToken {
        WasmCancelToken(crate::runtime::CancelToken::new())
    }
    /// Stop every run holding this token (or a [`WasmCancelToken::share`] of it).
    pub fn cancel(&self) {
        self.0.cancel()
    }
    /// Another handle on the same flag, for `run` to take (it consumes its argument).
    pub fn share(&self) -> WasmCancelToken {
        WasmCancelToken(self.0.clone())
    }
}

thread_local! {
    /// The JS function told about a panic before the instance traps ([`set_panic_handler`]).
    static ON_PANIC: RefCell<Option<js_sys::Function>> = const { RefCell::new(None) };
}

/// Call `f(message)` when Rust panics, before the instance traps (`panic = abort`: every
/// later call into it is unsafe). `js/index.js` marks pt2web poisoned there and rejects the
/// calls in flight, whose promises would otherwise never settle: a trap inside a future
/// polled from the event loop reaches no caller.
#[wasm_bindgen(js_name = setPanicHandler)]
pub fn set_panic_handler(f: js_sys::Function) {
    ON_PANIC.with(|h| *h.borrow_mut() = Some(f));
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string();
        ON_PANIC.with(|h| {
            if let Ok(h) = h.try_borrow() {
                if let Some(f) = h.as_ref() {
                    let _ = f.call1(&JsValue::NULL, &JsValue::from_str(&msg));
                }
            }
        });
    }));
}

/// Panic on purpose (tests of the poisoned state): at once, or, with `pending`, inside a
/// future polled from the event loop (a promise that never settles by itself).
#[doc(hidden)]
#[wasm_bindgen(js_name = __panicForTest)]
pub fn panic_for_test(pending: bool) -> js_sys::Promise {
    if !pending {
        panic!("pt2web: a panic asked for by a test");
    }
    wasm_bindgen_futures::future_to_promise(async {
        crate::gpu::wait::yield_to_page().await;
        panic!("pt2web: a panic asked for by a test, in a pending call");
    })
}

/// The engine for a run or a prepare: BUSY while another one holds it.
fn borrow_idle(engine: &Rc<RefCell<Engine>>) -> Result<std::cell::RefMut<'_, Engine>, JsValue> {
    engine.try_borrow_mut().map_err(|_| {
        js_error(
            "BUSY",
            "the model is already running: await the previous run() first",
        )
    })
}

/// A flat input: `{gpuId}` names a GPU-resident tensor, anything else is a CPU value.
fn gpu_input(name: &str, v: &JsValue) -> Result<GpuInput, JsValue> {
    if v.is_object() {
        if let Some(id) = get(v, "gpuId")?.as_f64() {
            let (t, _) = lookup_gpu_tensor(id as u32).map_err(|_| {
                js_error(
                    "INPUT",
                    &format!("input '{name}': the GPU tensor was disposed"),
                )
            })?;
            return Ok(GpuInput::Gpu(t));
        }
    }
    input_value(name, v).map(GpuInput::Cpu)
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
    let (dtype, shape) = dtype_and_shape(name, v)?;
    let bytes = get(v, "bytes")?;
    let bytes: Uint8Array = bytes.dyn_into().map_err(|_| {
        js_error(
            "INPUT",
            &format!("input '{name}': data must be a typed array"),
        )
    })?;
    let Some((numel, want)) = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| Some((n, n.checked_mul(dtype.size())?)))
    else {
        return Err(js_error(
            "INPUT",
            &format!("input '{name}': shape {shape:?} of {dtype} has more bytes than this platform can address"),
        ));
    };
    if bytes.length() as usize != want {
        return Err(js_error(
            "INPUT",
            &format!(
                "input '{name}': shape {shape:?} of {dtype} needs {numel} elements ({want} bytes), the data has {} bytes",
                bytes.length()
            ),
        ));
    }
    reserve_input(name, want)?;
    let data = Data::from_le_bytes(dtype, &bytes.to_vec())
        .ok_or_else(|| js_error("INPUT", &format!("input '{name}': bad {dtype} data")))?;
    Ok(RValue::Tensor(Tensor::from_data(data, &shape)))
}

/// Room for an input's two copies (its bytes, then its tensor) before making them: a failed
/// allocation would trap the instance, a refused one is an error naming the input.
fn reserve_input(name: &str, bytes: usize) -> Result<(), JsValue> {
    let max = Limits::default().max_tensor_bytes;
    if bytes as u64 > max {
        return Err(to_js(Error::limit(
            format!("the bytes of input '{name}' (Limits::max_tensor_bytes)"),
            bytes as u64,
            max,
        )));
    }
    let mut probe: Vec<u8> = Vec::new();
    if probe.try_reserve_exact(bytes.saturating_mul(2)).is_err() {
        return Err(js_error(
            "OUT_OF_MEMORY",
            &format!(
                "input '{name}': the instance could not reserve {} bytes for its {bytes} bytes \
                 (and a copy); use smaller inputs, or the GPU",
                bytes.saturating_mul(2)
            ),
        ));
    }
    Ok(())
}

/// A user input of `prepare`: `{dtype, shape}` (no data needed) or a number.
fn meta_input(name: &str, v: &JsValue) -> Result<MValue, JsValue> {
    if v.as_f64().is_some() || v.as_bool().is_some() {
        let sig = crate::plan::signature(&[input_value(name, v)?]);
        return Ok(crate::plan::metas(&sig).remove(0));
    }
    if v.is_null() || v.is_undefined() {
        return Err(js_error(
            "INPUT",
            &format!("input '{name}': missing (got {v:?})"),
        ));
    }
    let (dtype, shape) = dtype_and_shape(name, v)?;
    Ok(MValue::Tensor(MetaTensor::new(dtype, shape)))
}

/// The `dtype` and `shape` of a JS tensor object.
fn dtype_and_shape(name: &str, v: &JsValue) -> Result<(DType, Vec<usize>), JsValue> {
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
    Ok((dtype, shape))
}

/// The data of `tensor` for the state `name`, once checked: `name` is state the graph reads,
/// no state was folded into constants at load (those would keep the old values), and
/// `tensor` has its dtype and shape.
fn settable_data(s: &Session, name: &str, tensor: &JsValue) -> Result<Data, JsValue> {
    let refuse = |why: String| js_error("INPUT", &format!("state.set('{name}'): {why}"));
    let Some(cur) = s
        .state
        .get(name)
        .filter(|_| !name.starts_with(crate::passes::FOLDED_PREFIX))
    else {
        return Err(refuse(
            "no parameter, buffer or constant of that name".into(),
        ));
    };
    if let Some(folded) = s
        .state
        .keys()
        .find(|k| k.starts_with(crate::passes::FOLDED_PREFIX))
    {
        return Err(refuse(format!(
            "the graph passes folded state into constants at load ('{folded}'), which would keep \
             the old values: load the model after backends.set({{graphPasses: 'none'}}) (or without \
             const_fold and fold_bn) to set state"
        )));
    }
    let read = crate::passes::graph_reads_state(&s.program, name);
    if !read {
        return Err(refuse(
            "the graph (after the graph passes) does not read it: batch-norm folding or dead-code \
             elimination removed its uses; load the model after backends.set({graphPasses: 'none'}) \
             to set it"
                .into(),
        ));
    }
    let RValue::Tensor(t) = input_value(name, tensor)? else {
        return Err(refuse("expected a tensor {data, shape, dtype}".into()));
    };
    if t.dtype != cur.dtype || t.sizes != cur.sizes {
        return Err(refuse(format!(
            "expected {} {:?}, got {} {:?}",
            cur.dtype, cur.sizes, t.dtype, t.sizes
        )));
    }
    let data = t.data.read().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(data)
}

/// [`settable_data`]'s data written into a CPU session's state tensor, in place (its Plans
/// hold the same storage), when that tensor owns its whole storage.
fn write_cpu_state(s: &Session, name: &str, data: Data) -> Result<(), JsValue> {
    let cur = &s.state[name];
    let mut d = cur.data.write().unwrap_or_else(|e| e.into_inner());
    if cur.offset != 0 || !cur.is_contiguous() || d.len() != data.len() {
        return Err(js_error(
            "INPUT",
            &format!("state.set('{name}'): it shares its storage with other state (a tied weight or a view): it cannot be set alone"),
        ));
    }
    *d = data;
    Ok(())
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
