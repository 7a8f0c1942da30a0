//! The browser's streaming load ([`crate::archive::stream`]): JS fetches the archive's end,
//! its central directory, then each entry's byte range (HTTP range requests, or slices of a
//! streamed response) and pushes them here; no buffer of the whole file is ever made, in JS
//! or in wasm memory.
//!
//! ```js
//! const tail = await range(url, Math.max(0, size - 65536), size);
//! const [at, len] = WasmStreamingLoad.directoryRange(tail, size);
//! const load = new WasmStreamingLoad(await range(url, at, at + len), size);
//! for (const { name, offset, len } of load.neededRanges())
//!   load.pushChunk(name, offset, await range(url, offset, offset + len)); // or in pieces
//! const model = await load.finishGpu(program, weights, dtype); // or load.finishCpu(...)
//! ```
//!
//! Or JS keeps the bytes (`holdOutside(readAt, release)`, then `pushHeld(name, offset, len)`
//! for each range it has): the core reads each entry from JS when its session takes it and
//! hands it back (`release`), so wasm memory, which never shrinks, holds about one weight at a
//! time. `load()` does this on WebGPU, where the weights' home is the GPU.

use super::{open_program, to_js, Loaded, WasmModel};
use crate::archive::source::ByteSource;
use crate::archive::stream::{directory_range, StreamingLoad};
use crate::gpu::exec::GpuSessionBuild;
use crate::limits::Limits;
use crate::runtime::SessionBuild;
use js_sys::{Array, Function, Object, Reflect, Uint8Array};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

/// A byte offset or length from JS (a Number): a non-negative integer below 2^53.
fn js_u64(what: &str, v: f64) -> Result<u64, JsValue> {
    if v >= 0.0 && v.fract() == 0.0 && v < 9_007_199_254_740_992.0 {
        Ok(v as u64)
    } else {
        Err(to_js(crate::Error::Input {
            input: what.into(),
            msg: format!("{v} is not a byte offset (a non-negative integer)"),
        }))
    }
}

/// An archive arriving in pieces; `finishCpu` / `finishGpu` make the model.
#[wasm_bindgen]
pub struct WasmStreamingLoad(Option<StreamingLoad>);

#[wasm_bindgen]
impl WasmStreamingLoad {
    /// `[offset, len]` of the central directory to the file's end, from the file's last
    /// bytes `tail` (64 KiB is plenty) and its size.
    #[wasm_bindgen(js_name = directoryRange)]
    pub fn directory_range(tail: &[u8], total_len: f64) -> Result<Array, JsValue> {
        let total = js_u64("totalLength", total_len)?;
        let (at, len) = directory_range("model.pt2", tail, total).map_err(to_js)?;
        Ok([at as f64, len as f64]
            .into_iter()
            .map(JsValue::from)
            .collect())
    }

    /// Start from the bytes `directoryRange` named, of a file of `totalLength` bytes.
    #[wasm_bindgen(constructor)]
    pub fn new(directory: Vec<u8>, total_len: f64) -> Result<WasmStreamingLoad, JsValue> {
        let total = js_u64("totalLength", total_len)?;
        let mut load =
            StreamingLoad::open("model.pt2", directory, total, Limits::default()).map_err(to_js)?;
        // One model per load: each weight's pieces go as soon as its session holds it.
        load.free_as_taken();
        Ok(WasmStreamingLoad(Some(load)))
    }

    /// The ranges still to push: `[{name, offset, len}]`, in file order.
    #[wasm_bindgen(js_name = neededRanges)]
    pub fn needed_ranges(&self) -> Result<Array, JsValue> {
        let out = Array::new();
        for r in self.load()?.needed_ranges() {
            let o = Object::new();
            Reflect::set(&o, &"name".into(), &r.name.into())?;
            Reflect::set(&o, &"offset".into(), &(r.offset as f64).into())?;
            Reflect::set(&o, &"len".into(), &(r.len as f64).into())?;
            out.push(&o);
        }
        Ok(out)
    }

    /// Hand over `bytes` found at file offset `offset`, inside entry `name`'s range.
    #[wasm_bindgen(js_name = pushChunk)]
    pub fn push_chunk(&mut self, name: &str, offset: f64, bytes: Vec<u8>) -> Result<(), JsValue> {
        let offset = js_u64("offset", offset)?;
        let load = self.0.as_mut().ok_or_else(finished)?;
        load.push_chunk(name, offset, bytes).map_err(to_js)
    }

    /// Read the ranges given by `pushHeld` from JS: `readAt(offset, len)` returns those bytes
    /// (a Uint8Array of `len` bytes), `release(offset, len)` is told when they will not be
    /// read again.
    #[wasm_bindgen(js_name = holdOutside)]
    pub fn hold_outside(&mut self, read_at: Function, release: Function) -> Result<(), JsValue> {
        let load = self.0.as_mut().ok_or_else(finished)?;
        let id = NEXT_HELD.with(|n| {
            let id = n.get();
            n.set(id.wrapping_add(1));
            id
        });
        HELD.with(|h| h.borrow_mut().insert(id, HeldFns { read_at, release }));
        let len = load.total_len();
        load.hold_outside(Arc::new(JsHeld { id, len }));
        Ok(())
    }

    /// JS holds `len` bytes at file offset `offset` of entry `name` (see `holdOutside`).
    #[wasm_bindgen(js_name = pushHeld)]
    pub fn push_held(&mut self, name: &str, offset: f64, len: f64) -> Result<(), JsValue> {
        let (offset, len) = (js_u64("offset", offset)?, js_u64("len", len)?);
        let load = self.0.as_mut().ok_or_else(finished)?;
        load.push_held(name, offset, len).map_err(to_js)
    }

    /// The model on the CPU backend (see `WasmModel`'s constructor for the options).
    #[wasm_bindgen(js_name = finishCpu)]
    pub fn finish_cpu(
        &mut self,
        program: Option<String>,
        weights: Option<String>,
        dtype: Option<String>,
        opset: JsValue,
    ) -> Result<WasmModel, JsValue> {
        WasmModel::on_cpu(self.take_program(program, weights, dtype, &opset)?)
    }

    /// The model on WebGPU (see `WasmModel.loadGpu` for the options).
    #[wasm_bindgen(js_name = finishGpu)]
    pub async fn finish_gpu(
        &mut self,
        program: Option<String>,
        weights: Option<String>,
        dtype: Option<String>,
        opset: JsValue,
    ) -> Result<WasmModel, JsValue> {
        WasmModel::on_gpu(self.take_program(program, weights, dtype, &opset)?).await
    }

    /// The program names, from the records pushed so far (the archive need not be complete:
    /// `openArchive(url)` pushes only the small records).
    #[wasm_bindgen(js_name = programNames)]
    pub fn program_names(&self) -> Result<Array, JsValue> {
        Ok(super::names_of(&self.load()?.partial().map_err(to_js)?))
    }

    /// The extra files, from the records pushed so far (see `programNames`): `{name: Uint8Array}`.
    #[wasm_bindgen(js_name = extraFiles)]
    pub fn extra_files(&self) -> Result<Object, JsValue> {
        super::extra_files_of(&self.load()?.partial().map_err(to_js)?)
    }

    /// A WebGPU model built in steps (`WasmModelBuild`) on the ranges pushed or held so far;
    /// the load stays, so a caller whose held bytes lacked some (`readAt` threw while the
    /// program was opened and its graph passes read weights) can fetch them and begin again,
    /// and a caller whose WebGPU build failed (a device fallback) can begin on the CPU.
    #[wasm_bindgen(js_name = beginGpu)]
    pub async fn begin_gpu(
        &self,
        program: Option<String>,
        weights: Option<String>,
        dtype: Option<String>,
        opset: JsValue,
    ) -> Result<WasmModelBuild, JsValue> {
        let archive = self.load()?.archive().map_err(to_js)?;
        let loaded = open_program(archive, program, weights, dtype, &opset)?;
        let (build, info, names) = super::gpu_build(loaded).await?;
        Ok(WasmModelBuild {
            build: Some(Build::Gpu(Box::new(build))),
            info,
            names,
        })
    }

    /// [`WasmStreamingLoad::begin_gpu`] for the CPU backend: each step reads one weight from
    /// the held bytes into wasm memory, where the session keeps it.
    #[wasm_bindgen(js_name = beginCpu)]
    pub fn begin_cpu(
        &self,
        program: Option<String>,
        weights: Option<String>,
        dtype: Option<String>,
        opset: JsValue,
    ) -> Result<WasmModelBuild, JsValue> {
        let archive = self.load()?.archive().map_err(to_js)?;
        let (p, info, names) = open_program(archive, program, weights, dtype, &opset)?;
        let set =
            crate::backends::session_graph_passes().map_err(|e| to_js(crate::Error::Verify(e)))?;
        Ok(WasmModelBuild {
            build: Some(Build::Cpu(Box::new(SessionBuild::new(p, set)))),
            info,
            names,
        })
    }
}

/// A model made one weight at a time (`WasmStreamingLoad.beginGpu` / `beginCpu`), for a caller
/// that fetches each weight's bytes between steps: the main thread cannot read the network
/// synchronously, so `load()` there downloads the record the next step reads (`nextReads`),
/// holds it (`holdOutside`), steps (the core reads it, uploads it or keeps it in wasm memory,
/// and releases it), and so on, so that JS holds about one weight, not the archive.
#[wasm_bindgen]
pub struct WasmModelBuild {
    build: Option<Build>,
    info: JsValue,
    names: Vec<String>,
}

enum Build {
    Gpu(Box<GpuSessionBuild>),
    Cpu(Box<SessionBuild>),
}

#[wasm_bindgen]
impl WasmModelBuild {
    /// Whether every weight was made (`finish` next).
    #[wasm_bindgen(getter)]
    pub fn done(&self) -> bool {
        match &self.build {
            Some(Build::Gpu(b)) => b.is_done(),
            Some(Build::Cpu(b)) => b.is_done(),
            None => true,
        }
    }

    /// The file ranges the steps left read, in the order they read them, flat:
    /// `[offset, len, offset, len, ...]` (each record's data, once).
    #[wasm_bindgen(js_name = nextReads)]
    pub fn next_reads(&self) -> Result<Vec<f64>, JsValue> {
        let reads = match self.build.as_ref().ok_or_else(built)? {
            Build::Gpu(b) => b.next_reads(),
            Build::Cpu(b) => b.next_reads(),
        };
        Ok(reads
            .iter()
            .flat_map(|e| [e.offset as f64, e.len as f64])
            .collect())
    }

    /// Make the next weight (and upload it, on WebGPU). A step whose bytes `readAt` could not
    /// give fails before it changes anything: fetch them and step again.
    pub fn step(&mut self) -> Result<(), JsValue> {
        match self.build.as_mut().ok_or_else(built)? {
            Build::Gpu(b) => b.step(),
            Build::Cpu(b) => b.step(&mut |_, _, _| Ok(())),
        }
        .map_err(to_js)
    }

    /// The model, once `done`.
    pub fn finish(&mut self) -> Result<WasmModel, JsValue> {
        let info = self.info.clone();
        let names = std::mem::take(&mut self.names);
        match self.build.take().ok_or_else(built)? {
            Build::Gpu(b) => WasmModel::of_gpu_build(*b, info, names),
            Build::Cpu(b) => WasmModel::of_cpu_session(b.finish().map_err(to_js)?, info, names),
        }
    }
}

fn built() -> JsValue {
    to_js(crate::Error::Input {
        input: "GPU build".into(),
        msg: "already finished: make a new one with WasmStreamingLoad.beginGpu or beginCpu".into(),
    })
}

/// The JS functions of a `holdOutside` source, by id, on the thread that made them (JS values
/// stay on their thread; the source itself is a plain id, so it is `Send`).
#[derive(Clone)]
struct HeldFns {
    read_at: Function,
    release: Function,
}

thread_local! {
    static HELD: RefCell<HashMap<u32, HeldFns>> = RefCell::new(HashMap::new());
    static NEXT_HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Bytes JS holds: `readAt(offset, len)` returns them as a Uint8Array of exactly `len`
/// bytes, `release(offset, len)` says they will not be read again.
struct JsHeld {
    id: u32,
    len: u64,
}

impl JsHeld {
    fn fns(&self) -> std::io::Result<HeldFns> {
        HELD.with(|h| h.borrow().get(&self.id).cloned())
            .ok_or_else(|| {
                std::io::Error::other(
                    "the JS-held bytes of this load are read on another thread than the one that \
                 gave them",
                )
            })
    }
}

impl ByteSource for JsHeld {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        crate::archive::source::checked_range(offset, buf.len(), self.len)?;
        let f = self.fns()?;
        // In parts: JS answers a part inside one of its pieces with a view of it, and one
        // across two pieces with a copy of the part only, not of the whole weight.
        let mut done = 0;
        for part in buf.chunks_mut(JS_READ_MAX) {
            read_part(&f, offset + done, part)?;
            done += part.len() as u64;
        }
        Ok(())
    }
    fn release(&self, offset: u64, len: u64) {
        if let Ok(f) = self.fns() {
            // A failing release only leaves the bytes to JS's garbage collector later.
            let _ = f.release.call2(
                &JsValue::NULL,
                &(offset as f64).into(),
                &(len as f64).into(),
            );
        }
    }
}

/// The most bytes one `readAt` call asks JS for (see `JsHeld::read_at`).
const JS_READ_MAX: usize = 8 << 20;

/// `buf.len()` bytes at `offset` from `readAt`.
fn read_part(f: &HeldFns, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    let got = f
        .read_at
        .call2(
            &JsValue::NULL,
            &(offset as f64).into(),
            &(buf.len() as f64).into(),
        )
        .map_err(|e| {
            std::io::Error::other(format!("readAt({offset}, {}) threw: {e:?}", buf.len()))
        })?;
    let got: Uint8Array = got.dyn_into().map_err(|_| {
        std::io::Error::other(format!(
            "readAt({offset}, {}) did not return a Uint8Array",
            buf.len()
        ))
    })?;
    if got.length() as usize != buf.len() {
        return Err(std::io::Error::other(format!(
            "readAt({offset}, {}) returned {} bytes",
            buf.len(),
            got.length()
        )));
    }
    got.copy_to(buf);
    Ok(())
}

impl Drop for JsHeld {
    fn drop(&mut self) {
        let _ = HELD.try_with(|h| h.borrow_mut().remove(&self.id));
    }
}

impl WasmStreamingLoad {
    fn load(&self) -> Result<&StreamingLoad, JsValue> {
        self.0.as_ref().ok_or_else(finished)
    }

    /// The archive (every range pushed) and its program, once.
    fn take_program(
        &mut self,
        program: Option<String>,
        weights: Option<String>,
        dtype: Option<String>,
        opset: &JsValue,
    ) -> Result<Loaded, JsValue> {
        let archive = self
            .0
            .take()
            .ok_or_else(finished)?
            .finish()
            .map_err(to_js)?;
        open_program(archive, program, weights, dtype, opset)
    }
}

fn finished() -> JsValue {
    to_js(crate::Error::Input {
        input: "streaming load".into(),
        msg: "already finished: make a new WasmStreamingLoad".into(),
    })
}
