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

use super::{open_program, to_js, Loaded, WasmModel};
use crate::archive::stream::{directory_range, StreamingLoad};
use crate::limits::Limits;
use js_sys::{Array, Object, Reflect};
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
