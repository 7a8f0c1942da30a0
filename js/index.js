// pt2web: run PyTorch torch.export (.pt2) programs in JavaScript.
// The Rust core (compiled to WebAssembly by wasm-bindgen into ../pkg) works on flat lists of
// tensors; this wrapper loads archives (with progress), flattens and unflattens the pytree
// structures torch recorded, maps typed arrays to dtypes, and turns errors into Pt2WebError.
// The archive cache (`load`'s `cache` option) is js/cache.js.
// The wasm-bindgen glue is imported when `init` runs: the multi-threaded build
// (pkg/threads/) on cross-origin isolated pages, the single-threaded one (pkg/) otherwise.
import * as cache from './cache.js';

let initWasm, WasmModel, WasmGpuTensor, wasmIsPt2, wasmProgramNames, gpuDeviceProperties,
  gpuMemoryStats, gpuSetMemoryFraction, gpuEmptyCache, gpuResetPeakMemoryStats, gpuSynchronize,
  gpuDeviceOpen, gpuOpen, gpuCompileShader, WasmEvent, cpuThreads, WasmCancelToken, gpuDestroy,
  gpuWebGpuDevice, panicForTest, wasmExtraFiles, backendsGet, backendsSet, backendsCpuCapability,
  backendsSetVerbose, WasmStreamingLoad;
let gpuManualSeedAll, gpuSeedAll, gpuGetRngStateAll, gpuSetRngStateAll, profilerBegin, profilerEnd,
  profilerIsCapturing;
// The whole glue module, for the bindings used in one place (the device, stream and memory API).
let wasmGlue = null;
function bindGlue(m) {
  wasmGlue = m;
  ({
    default: initWasm, WasmModel, WasmGpuTensor, isPt2Package: wasmIsPt2,
    programNames: wasmProgramNames, gpuDeviceProperties, gpuMemoryStats, gpuSetMemoryFraction,
    gpuEmptyCache, gpuResetPeakMemoryStats, gpuSynchronize, gpuDeviceOpen, gpuOpen,
    gpuCompileShader, WasmEvent, cpuThreads, WasmCancelToken, gpuDestroy, gpuWebGpuDevice,
    __panicForTest: panicForTest, extraFiles: wasmExtraFiles, backendsGet, backendsSet, backendsCpuCapability,
    backendsSetVerbose, WasmStreamingLoad,
  } = m);
  ({
    gpuManualSeedAll, gpuSeedAll, gpuGetRngStateAll, gpuSetRngStateAll, profilerBegin, profilerEnd,
    profilerIsCapturing,
  } = m);
}

/** An error from pt2web: `code` is machine-readable (INPUT, GUARD, OP, ARCHIVE, ...). */
export class Pt2WebError extends Error {
  constructor(message, code = 'INTERNAL') {
    super(message);
    this.name = 'Pt2WebError';
    this.code = code;
  }
}

// A panic traps the WebAssembly instance (panic = abort): its memory may be half-updated, so
// no call may enter it again. The first trap (a WebAssembly.RuntimeError from a call, or the
// panic hook's message, which also reaches panics inside futures the event loop polls)
// poisons pt2web: the calls in flight reject, every later call throws at once.
let poisonedBy = null;
const inFlight = new Set();

function poisonedError() {
  return new Pt2WebError(`pt2web's WebAssembly instance is poisoned (${poisonedBy}) and cannot run anything more: reload pt2web (the page, or a new Worker)`, 'INTERNAL');
}

function poison(why) {
  if (poisonedBy === null) poisonedBy = String(why).replace(/\s*\n\s*/g, ' ');
  const err = poisonedError();
  for (const reject of inFlight) reject(err);
  inFlight.clear();
  return err;
}

// The panic hook's handler: poison, and absorb the trap that follows where no caller catches
// it (a future polled from the event loop): in Node an uncaught exception would end the
// process, in a page it would be reported as an uncaught error. Only that one
// WebAssembly.RuntimeError is absorbed; the calls in flight have already been rejected.
// (wasm-bindgen-futures runs futures from a promise callback: the trap rejects that promise,
// an unhandled rejection; a trap elsewhere may be an uncaught exception: both are armed.)
function onPanic(msg) {
  poison(msg);
  if (isNode) {
    const absorb = (e) => { if (!(e instanceof WebAssembly.RuntimeError)) throw e; };
    process.once('unhandledRejection', absorb);
    process.once('uncaughtException', absorb);
  } else if (globalThis.addEventListener) {
    const absorb = (ev) => { if ((ev.error ?? ev.reason) instanceof WebAssembly.RuntimeError) ev.preventDefault(); };
    globalThis.addEventListener('unhandledrejection', absorb, { once: true });
    globalThis.addEventListener('error', absorb, { once: true });
  }
}

// Throws the poisoned error once the instance trapped.
function usable() {
  if (poisonedBy !== null) throw poisonedError();
}

// A promise from the wasm glue, rejected with the poisoned error if the instance traps
// before it settles (a trap in a future polled from the event loop never settles it).
function track(p) {
  usable();
  return new Promise((resolve, reject) => {
    inFlight.add(reject);
    p.then((v) => { inFlight.delete(reject); resolve(v); }, (e) => { inFlight.delete(reject); reject(wrapError(e)); });
  });
}

function wrapError(e) {
  if (e instanceof WebAssembly.RuntimeError) return poison(e.message);
  if (poisonedBy !== null) return poisonedError();
  if (e instanceof Pt2WebError) return e;
  if (e && e.name === 'Pt2WebError') return new Pt2WebError(e.message, e.code);
  if (e instanceof Error) return new Pt2WebError(e.message, 'INTERNAL');
  return new Pt2WebError(String(e), 'INTERNAL');
}

const isNode = typeof globalThis.process !== 'undefined' && !!globalThis.process.versions?.node;
let ready = null;
let wasmReady = false;
// The instance's exports (its linear memory: `wasmMemoryBytes`).
let wasmExports = null;

// How the CPU backend got its threads and SIMD: { threads, build, reason, simd }.
let threading = { threads: 1, build: 'single', reason: 'not initialized', simd: 'simd128' };

// Whether the engine has relaxed SIMD: it validates a function of one f32x4.relaxed_madd
// (opcode 0xfd 0x105) over three v128 constants.
function hasRelaxedSimd() {
  const v = [0xfd, 0x0c, ...new Array(16).fill(0)];
  const body = [0x00, ...v, ...v, ...v, 0xfd, 0x85, 0x02, 0x0b];
  try {
    return WebAssembly.validate(new Uint8Array([
      0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
      0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
      0x03, 0x02, 0x01, 0x00, // one function of that type
      0x0a, body.length + 2, 0x01, body.length, ...body, // its code
    ]));
  } catch {
    return false;
  }
}

// The builds to try, best first: the relaxed-SIMD one (`dir` + '-relaxed', or pkg/relaxed/
// for the single-threaded build) where the engine has it, then the plain simd128 one.
function variants(dir) {
  const plain = { dir, simd: 'simd128' };
  if (!hasRelaxedSimd()) return [plain];
  return [{ dir: dir ? `${dir}-relaxed` : 'relaxed', simd: 'relaxed' }, plain];
}

// Each build's glue and module, named by literal specifiers so that bundlers (Vite, webpack,
// esbuild) see them and ship them with an app; a computed path would leave them behind. A
// build that scripts/build_wasm.sh skipped has a placeholder glue that throws when imported.
const BUILDS = {
  '': { glue: () => import('../pkg/pt2web.js'), wasm: () => new URL('../pkg/pt2web_bg.wasm', import.meta.url) },
  relaxed: { glue: () => import('../pkg/relaxed/pt2web.js'), wasm: () => new URL('../pkg/relaxed/pt2web_bg.wasm', import.meta.url) },
  threads: { glue: () => import('../pkg/threads/pt2web.js'), wasm: () => new URL('../pkg/threads/pt2web_bg.wasm', import.meta.url) },
  'threads-relaxed': { glue: () => import('../pkg/threads-relaxed/pt2web.js'), wasm: () => new URL('../pkg/threads-relaxed/pt2web_bg.wasm', import.meta.url) },
};

// Node's file reader, imported by a computed name so that bundlers leave it out of web builds.
const NODE_FS = 'node:fs/promises';

// Import and instantiate one build of the glue from pkg/`dir`.
async function loadBuild(dir) {
  const m = await BUILDS[dir].glue();
  bindGlue(m);
  const url = BUILDS[dir].wasm();
  if (isNode && url.protocol === 'file:') {
    const { readFile } = await import(/* @vite-ignore */ NODE_FS);
    wasmExports = await initWasm({ module_or_path: await readFile(url) });
  } else {
    wasmExports = await initWasm({ module_or_path: url });
  }
  m.setPanicHandler(onPanic);
  return m;
}

/**
 * Load the WebAssembly module once (done by `load` on first use; call it first to choose the
 * threads). `options.threads`: the CPU backend's threads, `'auto'` (the default:
 * `navigator.hardwareConcurrency` where the page is cross-origin isolated, else 1) or a
 * number (1: the single-threaded build). Several threads need the multi-threaded build
 * (pkg/threads/, Web Workers over a SharedArrayBuffer memory), which browsers allow only on
 * cross-origin isolated pages (served with `Cross-Origin-Opener-Policy: same-origin` and
 * `Cross-Origin-Embedder-Policy: require-corp`); elsewhere, and in Node, it runs on one.
 */
export function init(options = {}) {
  if (poisonedBy !== null) return Promise.reject(poisonedError());
  if (!ready) {
    ready = (async () => {
      const want = options.threads ?? 'auto';
      if (!(want === 'auto' || (Number.isInteger(want) && want >= 1))) {
        throw new Pt2WebError(`init: threads should be 'auto' or a positive integer, got ${want}`, 'INPUT');
      }
      const hw = globalThis.navigator?.hardwareConcurrency ?? 1;
      const n = want === 'auto' ? hw : want;
      let reason;
      if (n <= 1) reason = want === 'auto' ? 'one hardware thread' : 'threads: 1 asked';
      else if (isNode) reason = 'Node runs the single-threaded build';
      else if (!globalThis.crossOriginIsolated) reason = 'the page is not cross-origin isolated (COOP/COEP headers)';
      if (!reason) {
        for (const { dir, simd } of variants('threads')) {
          try {
            const m = await loadBuild(dir);
            // n − 1 workers: the calling thread takes a share of every split itself.
            await m.initThreadPool(n - 1);
            m.setThreads(n);
            // The count the core's kernels now split over (cpuThreads), not just the one asked.
            threading = { threads: cpuThreads(), build: 'threads', reason: 'cross-origin isolated page', simd };
            wasmReady = true;
            return;
          } catch (e) {
            reason = `the multi-threaded build did not start (${e?.message ?? e})`;
          }
        }
      }
      let failed;
      for (const { dir, simd } of variants('')) {
        try {
          await loadBuild(dir);
          threading = { threads: 1, build: 'single', reason, simd };
          wasmReady = true;
          return;
        } catch (e) {
          // The relaxed build may be missing (PT2WEB_WASM_RELAXED=0): the plain one next.
          failed = e;
        }
      }
      throw failed;
    })();
  }
  return ready;
}

/**
 * Bytes of pt2web's WebAssembly memory (0 before `init`): the high-water mark of the core's
 * heap, which grows and never shrinks; steady over many runs when nothing leaks.
 */
export function wasmMemoryBytes() {
  return wasmExports?.memory?.buffer?.byteLength ?? 0;
}

/**
 * The CPU backend's threads and SIMD: `{ threads, build: 'threads' | 'single', reason, simd:
 * 'relaxed' | 'simd128' }` (`simd`: the relaxed-SIMD build where the engine has relaxed SIMD).
 */
export function cpuThreading() {
  return { ...threading };
}

// dtype <-> typed array. Complex tensors are interleaved (re, im) pairs, as torch stores
// them: complex64 a Float32Array of 2 x numel values, complex128 a Float64Array.
const ARRAY_OF = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, bfloat16: Uint16Array,
  int64: BigInt64Array, int32: Int32Array, int16: Int16Array, int8: Int8Array, uint8: Uint8Array,
  bool: Uint8Array, complex64: Float32Array, complex128: Float64Array,
};
const DEFAULT_DTYPE = new Map([
  [Float32Array, 'float32'], [Float64Array, 'float64'], [BigInt64Array, 'int64'],
  [Int32Array, 'int32'], [Int16Array, 'int16'], [Int8Array, 'int8'], [Uint8Array, 'uint8'],
  [Uint16Array, 'float16'],
]);

function isTensorLike(v) {
  return v !== null && typeof v === 'object' && ((ArrayBuffer.isView(v.data) && Array.isArray(v.shape)) || v instanceof GpuTensor);
}

/**
 * A tensor kept in WebGPU memory: an output of `model.run(inputs, {keepOnGpu: true})`.
 * Pass it as an input of the next run (no copy), bind `buffer` in your own WebGPU code, or
 * `await read()` it. `dispose()` releases it.
 */
export class GpuTensor {
  #w;
  constructor(w) { this.#w = w; }
  #live() {
    usable();
    if (!this.#w) throw new Pt2WebError('the GPU tensor was disposed', 'DISPOSED');
    return this.#w;
  }
  get id() { return this.#live().id; }
  get shape() { return this.#live().shape; }
  get dtype() { return this.#live().dtype; }
  /** Element strides and offset of the tensor inside `buffer` (32-bit words). */
  get strides() { return this.#live().strides; }
  get offset() { return this.#live().offset; }
  /** The GPUBuffer (32-bit words: f32; int64/int32/int16/int8/uint8 as i32; bool as u32). Owned by pt2web. */
  get buffer() {
    try { return this.#live().buffer(); } catch (e) { throw wrapError(e); }
  }
  /** Copy to the CPU: `{data, shape, dtype}`. */
  async read() {
    try { return fromWire(await track(this.#live().read())); } catch (e) { throw wrapError(e); }
  }
  dispose() { if (this.#w && poisonedBy === null) this.#w.free(); this.#w = null; }
}

/** A tensor for `model.run`: `tensor(new Float32Array([...]), [2, 3])`. */
export function tensor(data, shape, dtype) {
  if (!ArrayBuffer.isView(data)) throw new Pt2WebError('tensor(): data must be a typed array', 'INPUT');
  return { data, shape: shape ?? [data.length], ...(dtype ? { dtype } : {}) };
}

// A value as error messages show it (never throws: BigInts, symbols, null prototypes).
function show(v) {
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (v === null || typeof v !== 'object') return String(typeof v === 'symbol' ? v.description : v);
  return Array.isArray(v) ? 'an array' : (v.constructor?.name ?? 'an object');
}

// A tensor's sizes as Numbers: non-negative safe integers (a BigInt size is taken when it
// is one); the core bounds each size and the element count.
function sizesOf(what, shape) {
  if (!Array.isArray(shape)) throw new Pt2WebError(`${what}: shape must be an array of sizes, got ${show(shape)}`, 'INPUT');
  return shape.map((d, i) => {
    const n = typeof d === 'bigint' ? Number(d) : d;
    if (!Number.isSafeInteger(n) || n < 0 || (typeof d === 'bigint' && BigInt(n) !== d)) {
      throw new Pt2WebError(`${what}: size ${show(d)} of dim ${i} is not a non-negative integer`, 'INPUT');
    }
    return n;
  });
}

// A scalar input (SymInt, SymFloat, SymBool): a Number, a BigInt (for integers) or a boolean.
function scalarToWire(name, v, expected) {
  if (typeof v === 'bigint') {
    if (expected !== 'symint' || !Number.isSafeInteger(Number(v))) throw new Pt2WebError(`input '${name}': got the BigInt ${v}n, expected ${expected === 'symint' ? 'an integer within ±2^53' : `a ${expected}`}`, 'INPUT');
    return Number(v);
  }
  if (expected === 'symint' && !Number.isSafeInteger(v)) throw new Pt2WebError(`input '${name}': expected an integer (symint), got ${show(v)}`, 'INPUT');
  if (expected === 'symbool' && typeof v !== 'boolean') throw new Pt2WebError(`input '${name}': expected a boolean (symbool), got ${show(v)}`, 'INPUT');
  if (expected === 'symfloat' && typeof v !== 'number') throw new Pt2WebError(`input '${name}': expected a number (symfloat), got ${show(v)}`, 'INPUT');
  return v;
}

const SCALAR_KINDS = new Set(['symint', 'symfloat', 'symbool']);

// The bytes of a typed array, without copying; a detached buffer (transferred to a Worker
// or to wasm memory that grew) is an INPUT error, not a TypeError.
function bytesOf(name, data) {
  if (data.buffer?.detached) throw new Pt2WebError(`input '${name}': its ${data.constructor.name}'s ArrayBuffer is detached (transferred elsewhere): pass a live copy`, 'INPUT');
  try {
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  } catch (e) {
    throw new Pt2WebError(`input '${name}': its ${data.constructor.name} cannot be read (${e.message}): a detached or resized ArrayBuffer?`, 'INPUT');
  }
}

function toWire(name, t, expected) {
  if (typeof t === 'number' || typeof t === 'boolean' || typeof t === 'bigint') {
    if (expected && !SCALAR_KINDS.has(expected)) throw new Pt2WebError(`input '${name}': expected a tensor of ${expected} {data: TypedArray, shape}, got the ${typeof t} ${show(t)}`, 'INPUT');
    return scalarToWire(name, t, expected ?? (typeof t === 'bigint' ? 'symint' : undefined));
  }
  if (expected && SCALAR_KINDS.has(expected)) throw new Pt2WebError(`input '${name}': expected a ${expected === 'symbool' ? 'boolean' : 'number'} (${expected}), got ${show(t)}`, 'INPUT');
  if (t instanceof GpuTensor) {
    if (expected && expected !== t.dtype) throw new Pt2WebError(`input '${name}': expected dtype ${expected}, got a GPU tensor of ${t.dtype}`, 'INPUT');
    return { gpuId: t.id };
  }
  if (!isTensorLike(t)) {
    if (t !== null && typeof t === 'object' && ArrayBuffer.isView(t.data)) sizesOf(`input '${name}'`, t.shape);
    const why = t !== null && typeof t === 'object' && 'data' in t && !ArrayBuffer.isView(t.data) ? ` with data ${show(t.data)} (not a typed array)` : '';
    throw new Pt2WebError(`input '${name}': expected a tensor {data: TypedArray, shape}, got ${show(t)}${why}`, 'INPUT');
  }
  const ctor = t.data.constructor;
  let dtype = t.dtype;
  if (!dtype) {
    dtype = DEFAULT_DTYPE.get(ctor);
    // Uint8Array is also bool's array, Uint16Array also bfloat16's: follow the program.
    if (expected && ARRAY_OF[expected] === ctor) dtype = expected;
  }
  if (dtype !== undefined && typeof dtype !== 'string') throw new Pt2WebError(`input '${name}': dtype must be a string such as 'float32', got ${show(dtype)}`, 'INPUT');
  if (!dtype || !Object.hasOwn(ARRAY_OF, dtype)) {
    throw new Pt2WebError(`input '${name}': unsupported data type ${ctor.name}${t.dtype ? ` / dtype '${t.dtype}'` : ''}`, 'INPUT');
  }
  if (ARRAY_OF[dtype] !== ctor) {
    throw new Pt2WebError(`input '${name}': dtype ${dtype} needs a ${ARRAY_OF[dtype].name}, got a ${ctor.name}`, 'INPUT');
  }
  if (expected && expected !== dtype) {
    throw new Pt2WebError(`input '${name}': expected dtype ${expected} (${ARRAY_OF[expected]?.name ?? expected}), got ${dtype} (${ctor.name})`, 'INPUT');
  }
  return { dtype, shape: sizesOf(`input '${name}'`, t.shape), bytes: bytesOf(name, t.data) };
}

function fromWire(o) {
  if (o === null || typeof o !== 'object') return o;
  if (o instanceof WasmGpuTensor) return new GpuTensor(o);
  const Ctor = ARRAY_OF[o.dtype];
  const b = o.bytes; // a fresh copy owned by JS, aligned at offset 0
  const data = new Ctor(b.buffer, b.byteOffset, b.byteLength / Ctor.BYTES_PER_ELEMENT);
  return { data, shape: o.shape, dtype: o.dtype };
}

const keyOf = (k) => (typeof k === 'string' ? k : JSON.stringify(k));

// pytree flatten against a serialized TreeSpec ({kind, children, keys?, fields?}).
function flatten(spec, value, path, out) {
  switch (spec.kind) {
    case 'leaf':
      out.push([path || 'input', value]);
      return;
    case 'none':
      return;
    case 'tuple':
    case 'list': {
      if (!Array.isArray(value)) throw new Pt2WebError(`input ${path || '(root)'}: expected an array of ${spec.children.length}, got ${typeof value}`, 'INPUT');
      if (value.length !== spec.children.length) throw new Pt2WebError(`input ${path || '(root)'}: expected ${spec.children.length} items, got ${value.length}`, 'INPUT');
      spec.children.forEach((c, i) => flatten(c, value[i], `${path}[${i}]`, out));
      return;
    }
    case 'dict':
    case 'struct': {
      const keys = spec.kind === 'dict' ? spec.keys.map(keyOf) : spec.fields;
      if (value === null || typeof value !== 'object' || isTensorLike(value)) throw new Pt2WebError(`input ${path || '(root)'}: expected an object with keys ${keys.join(', ')}`, 'INPUT');
      if (Array.isArray(value) && spec.kind === 'struct') {
        spec.children.forEach((c, i) => flatten(c, value[i], `${path}[${i}]`, out));
        return;
      }
      for (const k of Object.keys(value)) {
        if (!keys.includes(k)) throw new Pt2WebError(`input '${path ? `${path}.` : ''}${k}': not an input of the program (expected keys: ${keys.join(', ')})`, 'INPUT');
      }
      spec.children.forEach((c, i) => {
        const k = keys[i];
        if (!(k in value) && c.kind !== 'none') throw new Pt2WebError(`input '${path ? `${path}.` : ''}${k}': missing`, 'INPUT');
        flatten(c, value[k], path ? `${path}.${k}` : k, out);
      });
      return;
    }
    default:
      throw new Pt2WebError(`unknown pytree node kind '${spec.kind}'`, 'INTERNAL');
  }
}

function unflatten(spec, leaves) {
  switch (spec.kind) {
    case 'leaf': return leaves.shift();
    case 'none': return null;
    case 'tuple':
    case 'list': return spec.children.map((c) => unflatten(c, leaves));
    case 'dict':
    case 'struct': {
      const keys = spec.kind === 'dict' ? spec.keys.map(keyOf) : spec.fields;
      const o = {};
      spec.children.forEach((c, i) => { o[keys[i] ?? String(i)] = unflatten(c, leaves); });
      if (spec.kind === 'struct') Object.defineProperty(o, '__type', { value: spec.type_name, enumerable: false });
      return o;
    }
    default: throw new Pt2WebError(`unknown pytree node kind '${spec.kind}'`, 'INTERNAL');
  }
}

// `onProgress` as `load` calls it: `(loaded, total, {phase, loaded, total})`, phase 'download',
// 'cache', 'upload' or 'prepare' (the first two arguments kept for callers written before phases).
function progressOf(onProgress) {
  return (phase, loaded, total) => onProgress?.(loaded, total, { phase, loaded, total });
}

// A Response's body, read in chunks with progress (`total`: its size when known, else 0).
async function readBody(response, phase, total, progress) {
  if (!response.body) {
    const b = new Uint8Array(await response.arrayBuffer());
    progress(phase, b.length, total || b.length);
    return b;
  }
  const reader = response.body.getReader();
  const chunks = [];
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    progress(phase, loaded, total);
  }
  const out = new Uint8Array(loaded);
  let o = 0;
  for (const c of chunks) { out.set(c, o); o += c.length; }
  return out;
}

function okResponse(response) {
  if (!response.ok) throw new Pt2WebError(`fetching the model failed: HTTP ${response.status} ${response.statusText}`, 'ARCHIVE');
  return Number(response.headers.get('content-length')) || 0;
}

// An archive at a URL, through the cache of `load`'s `cache` option (js/cache.js): from the
// store when the server still serves the version cached, else downloaded (and stored).
async function fetchArchive(url, cacheMode, progress) {
  const store = cache.storeFor(cacheMode);
  if (store) {
    const hit = await cache.cachedResponse(store, url.href).catch(() => null);
    if (hit) {
      const bytes = await readBody(hit.body, 'cache', hit.version.size, progress);
      // Checked on read: a store cut short (quota, an interrupted write) is downloaded again.
      if (bytes.length === hit.version.size && wasmIsPt2(bytes)) return bytes;
      await store.delete(url.href).catch(() => {});
    }
  }
  return downloadWhole(await fetch(url), store, url, progress);
}

// A response's whole archive, read (and kept in `store`, when given).
async function downloadWhole(response, store, url, progress) {
  const bytes = await readBody(response, 'download', okResponse(response), progress);
  // A full store or a private window refuses to keep it: the load goes on uncached.
  if (store) await store.put(url.href, cache.versionOf(response.headers, bytes.length), bytes).catch(() => {});
  return bytes;
}

// The streaming load (issue 18): an archive read by byte ranges, from the network (HTTP range
// requests) or from a cached Blob, and pushed piece by piece into the core's WasmStreamingLoad
// (src/js/stream.rs); no buffer of the whole archive is made, in JS or in wasm memory.
const TAIL = 65536; // the file's end, where the central directory's end record is
const REQUEST_MAX = 32 * 1024 * 1024; // the most bytes one range request asks for
const REQUEST_GAP = 65536; // needed ranges this close are read by one request, gap included
const IN_FLIGHT = 4; // range requests at once
// A lazy load (anywhere but a Worker reading a cached file, see `inSteps`): records of
// `small` bytes or less are read before the build (`eager` bytes of them at most), of the
// others the first `head` bytes (requests joined across gaps of `gap` bytes); the weights are
// read at most `ahead` bytes ahead of the step that takes them, or `aheadWeights` times the
// largest weight when that is more (at most `aheadMax`): JS holds about one weight. A 64 MiB
// floor keeps several requests in flight for a model of small weights. Reading 1.5 weights
// ahead (half of the next weight downloads while one is uploaded) loaded 1 GB of 64 MiB
// weights 5-8% faster in Chromium (6.7 and 6.3 s against 7.0 and 6.8 s) for a JS peak of up to
// two weights (+128 MiB against +88 MiB): not worth it.
const LAZY = { small: 16384, eager: 16 * 1024 * 1024, head: 4096, gap: REQUEST_GAP, ahead: 64 * 1024 * 1024, aheadMax: 512 * 1024 * 1024, aheadWeights: 1 };

// The requests that read `ranges` (sorted, [{offset, len}]): neighbours within REQUEST_GAP
// joined, each request at most REQUEST_MAX bytes (a larger range split).
function rangeRequests(ranges, gap = REQUEST_GAP) {
  const out = [];
  for (const { offset, len } of ranges) {
    const end = offset + len;
    let at = offset;
    const last = out.at(-1);
    if (last && offset - last.end <= gap && last.start + REQUEST_MAX > offset) {
      last.end = Math.max(last.end, Math.min(end, last.start + REQUEST_MAX));
      at = Math.max(offset, last.end);
    }
    for (; at < end; at += REQUEST_MAX) out.push({ start: at, end: Math.min(end, at + REQUEST_MAX) });
  }
  return out;
}

// `bytes`, read at file offset `start`, handed to `load` where they overlap each needed range.
function pushOverlaps(load, needed, start, bytes) {
  const end = start + bytes.length;
  for (const r of needed) {
    const a = Math.max(start, r.offset);
    const b = Math.min(end, r.offset + r.len);
    if (a < b) load.pushChunk(r.name, a, bytes.subarray(a - start, b - start));
  }
}

/**
 * The pieces of an archive JS keeps for a streaming load (`holdOutside`): the core reads
 * each weight from here when its session takes it, uploads it (WebGPU) or keeps it in wasm
 * memory (CPU), and releases it, so wasm memory holds no second copy of the weights, and the
 * JS copy goes as the build goes. Pieces do not overlap. A read of bytes not held throws,
 * and is noted in `missed` (`[offset, len]`): the lazy load (`inSteps`) fetches them and
 * tries that step again.
 */
class HeldPieces {
  #starts = [];
  #pieces = new Map();
  /** Bytes held now, and released so far. */
  bytes = 0;
  freed = 0;
  /** Reads that found bytes not held, since the caller last emptied it. */
  missed = [];
  /** Offsets of the records the core released (taken by a session: not read again). */
  taken = new Set();
  put(start, bytes) {
    const i = this.#after(start);
    this.#starts.splice(i, 0, start);
    this.#pieces.set(start, bytes);
    this.bytes += bytes.length;
  }
  // The index of the first piece starting after `offset`.
  #after(offset) {
    let lo = 0;
    let hi = this.#starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.#starts[mid] <= offset) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  readAt(offset, len) {
    let i = this.#after(offset) - 1;
    const first = this.#pieces.get(this.#starts[i]);
    if (first && offset + len <= this.#starts[i] + first.length) return first.subarray(offset - this.#starts[i], offset - this.#starts[i] + len);
    const out = new Uint8Array(len);
    for (let at = offset; at < offset + len; i += 1) {
      const s = this.#starts[i];
      const p = this.#pieces.get(s);
      if (p === undefined || s > at || s + p.length <= at) {
        this.missed.push([offset, len]);
        throw new Error(`bytes at ${at} of the archive are not held`);
      }
      const n = Math.min(p.length - (at - s), offset + len - at);
      out.set(p.subarray(at - s, at - s + n), at - offset);
      at += n;
    }
    return out;
  }
  /** `fn(bytes)` for every piece, in file order. */
  each(fn) {
    for (const s of this.#starts) fn(this.#pieces.get(s));
  }
  /** The parts of `start..end` no piece holds: `[[a, b], ...]`. */
  gaps(start, end) {
    const out = [];
    let at = start;
    for (let i = Math.max(0, this.#after(start) - 1); i < this.#starts.length && at < end; i += 1) {
      const s = this.#starts[i];
      const e = s + this.#pieces.get(s).length;
      if (e <= at) continue;
      if (s >= end) break;
      if (s > at) out.push([at, s]);
      at = Math.max(at, e);
    }
    if (at < end) out.push([at, end]);
    return out;
  }
  /** Drop every piece that overlaps none of `ranges` (flat `[offset, len, ...]`). */
  keepOnly(ranges) {
    const spans = [];
    for (let i = 0; i < ranges.length; i += 2) spans.push([ranges[i], ranges[i] + ranges[i + 1]]);
    spans.sort((a, b) => a[0] - b[0]);
    for (const s of [...this.#starts]) {
      const e = s + this.#pieces.get(s).length;
      // The last span starting before `e` is the only one that can reach past `s`... or an
      // earlier, longer one: spans are records, which do not overlap.
      let lo = 0;
      let hi = spans.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (spans[mid][0] < e) lo = mid + 1; else hi = mid;
      }
      if (lo === 0 || spans[lo - 1][1] <= s) this.release(s, e - s);
    }
  }
  /** Drop the bytes `offset..offset+len`: pieces inside go, pieces across an end keep their
   * part outside (the network's chunks of a whole response straddle records). */
  release(offset, len) {
    const end = offset + len;
    let i = Math.max(0, this.#after(offset) - 1);
    while (i < this.#starts.length && this.#starts[i] < end) {
      const s = this.#starts[i];
      const p = this.#pieces.get(s);
      const e = s + p.length;
      if (e <= offset) {
        i += 1;
        continue;
      }
      this.#pieces.delete(s);
      this.#starts.splice(i, 1);
      const n = Math.min(e, end) - Math.max(s, offset);
      this.bytes -= n;
      this.freed += n;
      if (s < offset) {
        this.#starts.splice(i++, 0, s);
        this.#pieces.set(s, p.subarray(0, offset - s));
      }
      if (e > end) {
        this.#starts.splice(i++, 0, end);
        this.#pieces.set(end, p.subarray(end - s));
      }
    }
  }

}

/**
 * Bytes of an archive fetched into `held` (a HeldPieces) as they are asked for: `ensure`
 * reads what `held` lacks of some ranges (requests of at most REQUEST_MAX bytes), once even
 * when asked again while in flight.
 */
class RangeFetcher {
  /** `read(start, end)`: the bytes, as a promise. */
  read;
  #inFlight = new Map(); // start -> {end, done}
  /** Bytes being read now. */
  pending = 0;
  constructor(read, held) {
    this.read = read;
    this.held = held;
  }
  /** Resolves once `held` has every byte of `ranges` (`[[offset, len], ...]`). */
  async ensure(ranges) {
    const waits = [];
    for (const [offset, len] of ranges) {
      for (const [a, b] of this.held.gaps(offset, offset + len)) {
        let at = a;
        const flying = [...this.#inFlight.entries()].filter(([s, f]) => s < b && f.end > a).sort((x, y) => x[0] - y[0]);
        for (const [s, f] of flying) {
          if (s > at) waits.push(this.#fetch(at, s));
          waits.push(f.done);
          at = Math.max(at, f.end);
        }
        if (at < b) waits.push(this.#fetch(at, b));
      }
    }
    await Promise.all(waits);
  }
  #fetch(start, end) {
    const parts = [];
    for (let at = start; at < end; at += REQUEST_MAX) {
      const e = Math.min(end, at + REQUEST_MAX);
      const done = this.read(at, e).then((bytes) => { this.held.put(at, bytes); }).finally(() => {
        this.#inFlight.delete(at);
        this.pending -= e - at;
      });
      done.catch(() => {}); // awaited by `ensure`; a failure seen there
      this.#inFlight.set(at, { end: e, done });
      this.pending += e - at;
      parts.push(done);
    }
    return Promise.all(parts);
  }
}

// A cached archive's Blob read synchronously (in a Worker, FileReaderSync): the core reads
// each entry straight from the cache's file, so nothing of the archive is held in memory.
function blobHeld(blob) {
  const reader = new FileReaderSync();
  return {
    readAt: (offset, len) => new Uint8Array(reader.readAsArrayBuffer(blob.slice(offset, offset + len))),
    release() {},
  };
}

/**
 * Stream an archive of `size` bytes into a new WasmStreamingLoad: `read(start, end)` gives
 * those bytes; `tail` the file's last bytes when already read. Only the directory and the
 * ranges the load needs are read, except with `sink`: it receives the whole file in order (the
 * archive cache's copy), so every byte is read, once. Progress: `phase`, bytes read of bytes
 * to read. With `hold` and neither `blob` nor `sink`, the load is *lazy*: only the
 * small records and each weight's local header are read now, the weights while the model is
 * built (`inSteps`); the load then has `lazy: {held, fetcher, ranges}`. `whole`: a HeldPieces
 * with every byte of the archive already (a server without range requests), used as the
 * lazy load's. With `only` (a filter of the needed ranges), only those are read (`openArchive`).
 */
async function streamArchive({ read, size, tail, phase, progress, sink, hold, blob, discard, only, whole }) {
  let loaded = tail?.length ?? 0;
  let total = size;
  const checked = (start, end) => read(start, end).then((b) => {
    if (b.length !== end - start) throw new Pt2WebError(`reading the model: bytes ${start}-${end - 1} came back as ${b.length} bytes`, 'ARCHIVE');
    return b;
  });
  const reading = (start, end) => checked(start, end).then((b) => {
    loaded += b.length;
    progress(phase, loaded, Math.max(loaded, total));
    return b;
  });
  tail ??= await reading(Math.max(0, size - TAIL), size);
  const tailAt = size - tail.length;
  let load = null;
  try {
    const [at, len] = WasmStreamingLoad.directoryRange(tail, size);
    const directory = at >= tailAt ? tail.slice(at - tailAt, at - tailAt + len) : await reading(at, at + len);
    load = new WasmStreamingLoad(directory, size);
    const needed = load.neededRanges();
    if (blob) {
      // Every entry read from the cached file when its session takes it: nothing more to read now.
      const held = blobHeld(blob);
      load.holdOutside(held.readAt, held.release);
      for (const r of needed) load.pushHeld(r.name, r.offset, r.len);
      progress(phase, size, size);
      return load;
    }
    if (hold && !discard && !sink) {
      const held = whole ?? new HeldPieces();
      load.holdOutside((o, n) => held.readAt(o, n), (o, n) => { held.taken.add(o); held.release(o, n); });
      for (const r of needed) {
        load.pushHeld(r.name, r.offset, r.len);
        const a = Math.max(tailAt, r.offset);
        const b = Math.min(size, r.offset + r.len);
        if (a < b && !whole) held.put(a, tail.subarray(a - tailAt, b - tailAt));
      }
      // A whole response: what no record needs (the directory, local headers) goes now.
      if (whole) held.keepOnly(needed.flatMap((r) => [r.offset, r.len]));
      const fetcher = new RangeFetcher(reading, held);
      const requests = rangeRequests(eagerRanges(needed), LAZY.gap);
      const gaps = requests.flatMap((r) => held.gaps(r.start, r.end));
      total = loaded + gaps.reduce((n, [a, b]) => n + b - a, 0);
      progress(phase, loaded, total);
      await fetcher.ensure(gaps.map(([a, b]) => [a, b - a]));
      fetcher.read = checked; // the weights' bytes count as the 'upload' phase's
      load.lazy = { held, fetcher, ranges: needed };
      return load;
    }
    // `discard`: the bytes only go to `sink` (the cache), the load reads them from there after.
    const push = discard ? () => {} : (start, bytes) => pushOverlaps(load, needed, start, bytes);
    push(tailAt, tail);
    // What is left before the tail: every byte for the cache's copy, else the needed ranges.
    const before = sink ? [{ offset: 0, len: tailAt }]
      : needed.filter(only ?? (() => true)).map((r) => ({ offset: r.offset, len: Math.min(r.offset + r.len, tailAt) - r.offset })).filter((r) => r.len > 0);
    const requests = rangeRequests(before);
    total = loaded + requests.reduce((n, r) => n + r.end - r.start, 0);
    progress(phase, loaded, total);
    // A few requests in flight, consumed in file order.
    const pending = [];
    let next = 0;
    const startNext = () => {
      if (next >= requests.length) return;
      const r = requests[next++];
      const p = reading(r.start, r.end);
      p.catch(() => {}); // awaited below; a failure after an earlier one is not unhandled
      pending.push(p);
    };
    for (let i = 0; i < IN_FLIGHT; i++) startNext();
    for (const r of requests) {
      const bytes = await pending.shift();
      startNext();
      push(r.start, bytes);
      sink?.(bytes);
    }
    sink?.(tail);
    return load;
  } catch (e) {
    load?.free();
    throw wrapError(e);
  }
}

// What a lazy load reads before the model is built (`[{offset, len}]`, file order): the JSON
// records and the small ones whole (LAZY.small bytes or less, LAZY.eager bytes of them in
// all), and the first LAZY.head bytes of every other (its local header, which the archive
// reads when it opens the program, so that opening it needs no second try).
function eagerRanges(needed) {
  let small = 0;
  return needed.map((r) => {
    const whole = r.name.endsWith('.json') || (r.len <= LAZY.small && (small += r.len) <= LAZY.eager);
    return { offset: r.offset, len: whole ? r.len : Math.min(r.len, LAZY.head) };
  });
}

// The range of `reads` (flat `[offset, len, ...]`) that holds file offset `o`: `[[offset, len]]`, or none.
function recordAt(reads, o) {
  for (let i = 0; i < reads.length; i += 2) if (reads[i] <= o && o < reads[i] + reads[i + 1]) return [[reads[i], reads[i + 1]]];
  return [];
}

/**
 * The WasmModel of a lazy stream (`streamArchive`) on `device` ('webgpu' or 'cpu'), built one
 * weight at a time (`WasmModelBuild`): the weights are read ahead in the order the steps take
 * them, at most LAZY.ahead bytes (or the largest weight) held or in flight beyond what the build
 * started with, and each is released (in JS, after its upload or its copy into wasm memory) by
 * the step that takes it, so that JS holds about one weight, not the archive. Opening the
 * program and the graph passes may read records not held yet (a weight a pass folds, a large
 * JSON record): those reads throw, are noted (`held.missed`), fetched, and the build begins
 * again (then, once more, with everything). The stream stays usable after a failure: a
 * fallback to the CPU builds from it again, fetching only the weights already released.
 */
async function inSteps(stream, device, args, progress) {
  const { held, fetcher, ranges } = stream.lazy;
  const begin = device === 'webgpu' ? () => track(stream.beginGpu(...args))
    : async () => { usable(); return stream.beginCpu(...args); };
  let build = null;
  try {
    for (let attempt = 0; ; attempt += 1) {
      held.missed.length = 0;
      let error = null;
      try { build = await begin(); } catch (e) { error = wrapError(e); }
      if (!held.missed.length) {
        if (error) throw error;
        break;
      }
      build?.free();
      build = null;
      if (attempt === 2) throw error ?? new Pt2WebError('internal: the model read bytes of the archive it was given', 'ARCHIVE');
      // First what it missed (the records whole), then everything.
      const missed = held.missed.splice(0).flatMap(([o]) => ranges.filter((r) => r.offset <= o && o < r.offset + r.len));
      await fetcher.ensure((attempt === 0 ? missed : ranges).map((r) => [r.offset, r.len]));
    }
    const reads = build.nextReads();
    // What the build read to begin (the JSON records, weights a graph pass folded) goes now,
    // unless a step reads it too.
    held.keepOnly(reads);
    let total = 0;
    let largest = 0;
    for (let i = 1; i < reads.length; i += 2) {
      total += reads[i];
      largest = Math.max(largest, reads[i]);
    }
    const ahead = Math.max(LAZY.ahead, Math.min(LAZY.aheadWeights * largest, LAZY.aheadMax));
    progress('upload', 0, total);
    const base = held.bytes;
    const freed = held.freed;
    // Read ahead, in the steps' order, within the budget (a record larger than what is left
    // of it is read in part; its step reads the rest).
    let k = 0;
    let part = 0;
    const readAhead = () => {
      while (k < reads.length) {
        // A record the steps took already (read whole when a step missed it) is not read again.
        if (held.taken.has(reads[k])) {
          k += 2;
          part = 0;
          continue;
        }
        const room = ahead - (held.bytes + fetcher.pending - base);
        if (room <= 0) return;
        const n = Math.min(reads[k + 1] - part, room);
        fetcher.ensure([[reads[k] + part, n]]).catch(() => {}); // a failure is met again by the step
        part += n;
        if (part < reads[k + 1]) return;
        k += 2;
        part = 0;
      }
    };
    for (let misses = 0; !build.done;) {
      readAhead();
      held.missed.length = 0;
      try {
        usable();
        build.step();
      } catch (e) {
        // The step's weight is not all here yet: wait for it (read it whole), then step again.
        const missed = held.missed.splice(0);
        if (!missed.length || ++misses > 3) throw wrapError(e);
        await fetcher.ensure(missed.flatMap(([o, n]) => [[o, n], ...recordAt(reads, o)]));
        continue;
      }
      misses = 0;
      progress('upload', Math.min(held.freed - freed, total), total);
    }
    progress('upload', total, total);
    return build.finish();
  } finally {
    build?.free();
  }
}

// The size of the file a 206 response is part of (its Content-Range `bytes a-b/size`), else null.
function rangeTotal(response) {
  if (response.status !== 206) return null;
  const m = /^bytes \d+-\d+\/(\d+)$/.exec(response.headers.get('content-range') ?? '');
  return m ? Number(m[1]) : null;
}

// A reader of `url`'s bytes by range requests, checked against the file's size.
function rangeReader(url, size) {
  return async (start, end) => {
    const r = await fetch(url, { headers: { range: `bytes=${start}-${end - 1}` } }).catch((e) => { throw fetchFailed(url, e, ` (bytes ${start}-${end - 1})`); });
    if (rangeTotal(r) !== size) {
      throw new Pt2WebError(`fetching the model: the range request for bytes ${start}-${end - 1} got HTTP ${r.status}${r.status === 206 ? ` of a file of ${rangeTotal(r)} bytes, not ${size} (changed on the server?)` : ''}`, 'ARCHIVE');
    }
    try {
      return new Uint8Array(await r.arrayBuffer());
    } catch (e) {
      throw fetchFailed(url, e, ` (bytes ${start}-${end - 1})`);
    }
  };
}

// A request for the model that failed (the network, not an HTTP status), as a Pt2WebError.
function fetchFailed(url, e, what = '') {
  return new Pt2WebError(`fetching the model ${url.href ?? url}${what} failed: ${e?.message ?? e}`, 'ARCHIVE');
}

// A cache entry the download writes as it streams: `write(bytes)` in file order, `end(error?)`.
function cacheWriter(store, url, version) {
  let controller;
  const body = new ReadableStream({ start(c) { controller = c; } });
  const done = store.put(url, version, body).catch(() => {});
  return {
    write: (bytes) => controller.enqueue(bytes),
    async end(error) {
      if (error) controller.error(error);
      else controller.close();
      await done;
    },
  };
}

/**
 * `load`'s way to an archive at a URL: `{stream, size}` (a WasmStreamingLoad, lazy or with
 * every range held, and the archive's size). The first request asks for the
 * file's last 64 KiB (`Range: bytes=-65536`): a server with ranges answers 206 with the size,
 * one without answers 200 with the whole archive, which is read on from there
 * (`streamResponse`: no second download).
 */
async function streamFromUrl(url, cacheMode, progress) {
  // Each weight is read (or held in JS) until the step that takes it (`hold`): a Worker reads
  // a cached file synchronously (FileReaderSync) as the session takes each entry
  // (`blobHeld`); elsewhere each weight is fetched before the step that takes it (a lazy
  // load, `inSteps`), on WebGPU and on the CPU.
  const hold = true;
  const store = cache.storeFor(cacheMode);
  const sync = typeof globalThis.FileReaderSync === 'function';
  if (store) {
    const hit = await cache.cachedResponse(store, url.href).catch(() => null);
    const blob = hit && await hit.blob?.().catch(() => null);
    if (blob && blob.size === hit.version.size) {
      const read = async (start, end) => new Uint8Array(await blob.slice(start, end).arrayBuffer());
      // Checked on read: an entry cut short or damaged is downloaded again.
      try { return { stream: await streamArchive({ read, size: blob.size, phase: 'cache', progress, hold, blob: sync ? blob : undefined }), size: blob.size }; } catch { /* downloaded below */ }
    }
    if (hit) await store.delete(url.href).catch(() => {});
  }
  const first = await fetch(url, { headers: { range: `bytes=-${TAIL}` } }).catch((e) => { throw fetchFailed(url, e); });
  const size = rangeTotal(first);
  if (size === null) return streamResponse(first, store, url, progress);
  const tail = new Uint8Array(await first.arrayBuffer());
  if (tail.length !== Math.min(size, TAIL)) throw new Pt2WebError(`fetching the model: asked for its last ${TAIL} bytes, got ${tail.length} of ${size}`, 'ARCHIVE');
  const writer = store ? cacheWriter(store, url.href, cache.versionOf(first.headers, size)) : null;
  // With a cache, the load keeps no piece: the download goes to the cache only, and the load
  // then reads each entry from the cached file.
  const viaFile = writer !== null;
  let stream;
  try {
    stream = await streamArchive({ read: rangeReader(url, size), size, tail, phase: 'download', progress, sink: writer?.write, hold, discard: viaFile });
    await writer?.end();
  } catch (e) {
    await writer?.end(e);
    throw e;
  }
  if (!viaFile) return { stream, size };
  stream.free();
  const hit = await store.get(url.href).catch(() => null);
  const blob = hit && await hit.blob?.().catch(() => null);
  const read = blob?.size === size ? async (start, end) => new Uint8Array(await blob.slice(start, end).arrayBuffer()) : null;
  if (read) {
    // The download's progress is complete: reading the cached file again reports none.
    try { return { stream: await streamArchive({ read, size, phase: 'download', progress: sync ? progress : () => {}, hold, blob: sync ? blob : undefined }), size }; } catch { /* read again below */ }
  }
  // The store did not keep it (full, or a private context's limit): read again by ranges.
  return { stream: await streamArchive({ read: rangeReader(url, size), size, tail, phase: 'download', progress, hold }), size };
}

/**
 * A server without range requests (it answered the first request with the whole archive):
 * the response is kept in the pieces the network gives (no buffer of the whole file, so
 * past 2 GB too), stored in the archive cache when there is one, and loaded lazily from those
 * pieces, each weight's bytes dropped after the step that takes it.
 */
async function streamResponse(response, store, url, progress) {
  const total = okResponse(response);
  const whole = new HeldPieces();
  const reader = response.body.getReader();
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      whole.put(size, value);
      size += value.length;
      progress('download', size, Math.max(size, total));
    }
  } catch (e) {
    throw fetchFailed(url, e);
  }
  if (store) {
    const pieces = [];
    whole.each((p) => pieces.push(p));
    // A full store or a private window refuses to keep it: the load goes on uncached.
    await store.put(url.href, cache.versionOf(response.headers, size), new Blob(pieces)).catch(() => {});
  }
  const read = async (start, end) => {
    throw new Pt2WebError(`reading the model: ${url.href} answers no range requests, and bytes ${start}-${end - 1} were not kept`, 'ARCHIVE');
  };
  const tail = whole.readAt(Math.max(0, size - TAIL), Math.min(size, TAIL)).slice();
  return { stream: await streamArchive({ read, size, tail, phase: 'download', progress, hold: true, whole }), size };
}

// What a relative URL is relative to: the page (or Worker), in Node the working directory.
function baseUrl() {
  return globalThis.location?.href ?? `file://${globalThis.process?.cwd?.() ?? ''}/`;
}

// The archive's bytes from a URL, a Response or bytes. `options.cache`: see `load`.
async function readSource(source, options = {}) {
  const progress = progressOf(options.onProgress);
  if (source instanceof Archive && source.bytes) return source.bytes;
  if (source instanceof Archive) return readSource(source.url, options);
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  if (typeof source === 'string' || source instanceof URL) {
    const url = new URL(source, baseUrl());
    if (url.protocol === 'file:' && isNode) {
      const { readFile } = await import(/* @vite-ignore */ NODE_FS);
      const b = new Uint8Array(await readFile(url));
      progress('download', b.length, b.length);
      return b;
    }
    return fetchArchive(url, options.cache ?? (isNode ? 'none' : 'auto'), progress);
  }
  if (typeof Response !== 'undefined' && source instanceof Response) {
    return readBody(source, 'download', okResponse(source), progress);
  }
  throw new Pt2WebError('load(): source must be a URL, a Response, an ArrayBuffer or a Uint8Array', 'INPUT');
}

async function pickDevice(device) {
  if (isGpuDevice(device)) {
    await useExternalDevice(device);
    return { device: 'webgpu', reason: "the app's GPUDevice (load option device)" };
  }
  if (device === 'cpu') return { device: 'cpu', reason: 'requested' };
  if (device !== 'auto' && device !== 'webgpu') throw new Pt2WebError(`device must be 'webgpu', 'cpu', 'auto' or a GPUDevice, got ${show(device)}`, 'INPUT');
  if (adapterChoice.device) return { device: 'webgpu', reason: "the app's GPUDevice (gpu.fromExternalDevice)" };
  const gpu = globalThis.navigator?.gpu;
  let reason;
  if (!gpu) reason = 'navigator.gpu is missing (no WebGPU in this environment)';
  else if (!(await gpu.requestAdapter(adapterOptions()).catch(() => null))) reason = 'no WebGPU adapter';
  else return { device: 'webgpu', reason: device === 'auto' ? 'WebGPU adapter found' : 'requested' };
  if (device === 'webgpu') throw new Pt2WebError(`device 'webgpu' is not available: ${reason}`, 'DEVICE');
  return { device: 'cpu', reason: `fell back to the CPU backend: ${reason}` };
}

// How pt2web's shared WebGPU device is chosen when it opens: `powerPreference` (the adapter
// asked for), or `device`, a GPUDevice the app owns (gpu.fromExternalDevice).
const adapterChoice = { powerPreference: undefined, device: null };
const adapterOptions = () => (adapterChoice.powerPreference ? { powerPreference: adapterChoice.powerPreference } : {});
const isGpuDevice = (d) => d !== null && typeof d === 'object' && typeof d.createBuffer === 'function' && typeof d.queue === 'object';

// The adapter pt2web's device opens on: `powerPreference` ('high-performance' or
// 'low-power'), while no device is open (or the open one was chosen so).
async function choosePowerPreference(who, pp) {
  if (pp === undefined || pp === null) return;
  if (pp !== 'high-performance' && pp !== 'low-power') throw new Pt2WebError(`${who}: powerPreference must be 'high-performance' or 'low-power', got ${show(pp)}`, 'INPUT');
  await init();
  if (gpuDeviceOpen() && pp !== adapterChoice.powerPreference) throw new Pt2WebError(`${who}: the WebGPU device is already open (powerPreference ${adapterChoice.powerPreference ?? 'default'}): gpu.destroy() it first to choose another adapter`, 'DEVICE');
  adapterChoice.powerPreference = pp;
}

// An adapter whose requestDevice gives the app's device: wgpu reads an adapter's features,
// limits and info, then asks it for a device with every limit it has (the device's own).
function adapterOf(device) {
  const info = device.adapterInfo ?? { vendor: '', architecture: '', device: '', description: "the app's GPUDevice" };
  return {
    features: device.features, limits: device.limits, info, isFallbackAdapter: false,
    requestAdapterInfo: async () => info,
    requestDevice: async () => device,
  };
}

// Open pt2web's device unless it is open: wgpu (inside the core) asks `navigator.gpu` for an
// adapter, which for this one call answers with the chosen adapter (or the app's device).
// One opening at a time (concurrent loads wait for it), so the answer is put back once.
let opening = null;
async function openDevice() {
  await init();
  const g = globalThis.navigator?.gpu;
  if (!g) throw new Pt2WebError('WebGPU is not available: navigator.gpu is missing', 'DEVICE');
  while (opening) await opening.catch(() => {});
  if (gpuDeviceOpen()) return;
  opening = openWithChoice(g);
  try { await opening; } finally { opening = null; }
}

// The opening itself: while the core opens its device, `navigator.gpu.requestAdapter` gives the
// adapter asked for (or one whose requestDevice gives the app's device).
async function openWithChoice(g) {
  const own = Object.getOwnPropertyDescriptor(g, 'requestAdapter');
  const requestAdapter = g.requestAdapter;
  g.requestAdapter = adapterChoice.device
    ? async () => adapterOf(adapterChoice.device)
    : (options) => requestAdapter.call(g, { ...options, ...adapterOptions() });
  try {
    await track(gpuOpen());
  } catch (e) {
    throw wrapError(e);
  } finally {
    if (own) Object.defineProperty(g, 'requestAdapter', own);
    else delete g.requestAdapter;
  }
}

// Make `device` pt2web's WebGPU device: at once when none is open; an error when another is.
async function useExternalDevice(device) {
  await init();
  if (gpuDeviceOpen() && (await track(gpuWebGpuDevice())) !== device) {
    throw new Pt2WebError("pt2web's WebGPU device is already open and is not this GPUDevice: give the app's device before the first WebGPU load (or gpu.destroy() pt2web's own first)", 'DEVICE');
  }
  adapterChoice.device = device;
  await openDevice();
}

const hostNow = () => globalThis.performance?.now() ?? Date.now();

/**
 * A marker in the WebGPU queue (torch.mps.Event / torch.cuda.Event): `record()` after some
 * work, then `query()`, `await synchronize()`, or `await start.elapsedTime(end)` (ms).
 * `timing` says how the event was timed: `'gpu'` (GPU timestamps, where the adapter has
 * `timestamp-query`) or `'host'` (the host clock when the queue reported the work done; also
 * when no WebGPU device is open yet, since then no GPU work is pending).
 */
export class GpuEvent {
  #w = null;
  #host = null;
  #timing = null;
  constructor(options = {}) {
    /** Whether `elapsedTime` may be used (as in torch, `{enableTiming: true}`). */
    this.enableTiming = !!options.enableTiming;
  }
  /** `'gpu'`, `'host'`, or null before `record()`. */
  get timing() { return this.#timing; }
  /** Mark the point after every piece of GPU work submitted so far. */
  record() {
    this.#w?.free();
    this.#w = null;
    this.#host = null;
    try {
      if (wasmReady && gpuDeviceOpen()) {
        this.#w = new WasmEvent();
        this.#w.record();
        this.#timing = this.#w.timing;
      } else {
        this.#host = hostNow();
        this.#timing = 'host';
      }
    } catch (e) { throw wrapError(e); }
  }
  /** Whether the GPU has reached the event (never waits; true when never recorded). */
  query() { return this.#w ? this.#w.query() : true; }
  /** The binding's event, null before a record on the open device (internal). */
  wasmEvent() { return this.#w; }
  /** Resolves when the GPU has reached the event. */
  async synchronize() {
    if (!this.#w) return;
    try { await this.#w.synchronize(); } catch (e) { throw wrapError(e); }
  }
  /** Milliseconds from this event to `end` (waits for both). */
  async elapsedTime(end) {
    if (!(end instanceof GpuEvent)) throw new Pt2WebError('elapsedTime(end): end must be a gpu.Event', 'INPUT');
    if (!this.enableTiming || !end.enableTiming) throw new Pt2WebError('elapsedTime: both events must be created with {enableTiming: true}', 'INPUT');
    if (!this.#timing || !end.#timing) throw new Pt2WebError('elapsedTime: both events must be recorded first', 'INPUT');
    if (this.#w && end.#w) {
      try { return await this.#w.elapsedTime(end.#w); } catch (e) { throw wrapError(e); }
    }
    if (this.#host !== null && end.#host !== null) return end.#host - this.#host;
    throw new Pt2WebError('elapsedTime: one event was recorded before the WebGPU device was open and the other after; record both after loading a WebGPU model (or after `await gpu.open()`)', 'INPUT');
  }
  /** Release the event's GPU resources. */
  dispose() { this.#w?.free(); this.#w = null; }
}

/**
 * A stream on the WebGPU device (torch.cuda.Stream): an ordering domain over the device's one
 * queue. WebGPU runs a queue's work in submission order, so streams never run kernels side
 * by side on the GPU; they name work so that `query()` / `await synchronize()` ask about one
 * stream's runs, and `waitEvent` / `waitStream` order streams (the queue already runs later
 * submits after the event; the stream's query/synchronize then cover the event too). What
 * overlaps is the host side: one model's encoding, CPU fallbacks and readback with another
 * model's GPU work (runs are async). `new gpu.Stream()` needs the device open
 * (`await gpu.open()` or a WebGPU model loaded); pass it to `run(inputs, {stream})` or make it
 * current with `gpu.setStream(s)` / `gpu.stream(s, async () => ...)`.
 */
export class GpuStream {
  #w;
  constructor(w) {
    usable();
    try { this.#w = w ?? new wasmGlue.WasmStream(); } catch (e) { throw wrapError(e); }
  }
  /** 0 for the default stream. */
  get id() { return this.#w.id; }
  /** Whether this stream covers work the app submits itself (gpu.getStreamFromExternal). */
  get external() { return this.#w.external; }
  /** Whether every run on the stream (and every event it waited on) is done; never waits. */
  query() { return this.#w.query(); }
  /** Resolves when the stream's work is done. */
  async synchronize() {
    try { await track(this.#w.synchronize()); } catch (e) { throw wrapError(e); }
  }
  /** Record `event` (a new gpu.Event when omitted) after the work submitted so far; returns it. */
  recordEvent(event = new GpuEvent()) {
    if (!(event instanceof GpuEvent)) throw new Pt2WebError(`recordEvent(event): expected a gpu.Event, got ${show(event)}`, 'INPUT');
    event.record();
    return event;
  }
  /** Order the stream's later work after `event`. */
  waitEvent(event) {
    if (!(event instanceof GpuEvent)) throw new Pt2WebError(`waitEvent(event): expected a gpu.Event, got ${show(event)}`, 'INPUT');
    const w = event.wasmEvent();
    if (!w) return;
    try { this.#w.waitEvent(w); } catch (e) { throw wrapError(e); }
  }
  /** Order the stream's later work after the work `other` ordered so far. */
  waitStream(other) {
    if (!(other instanceof GpuStream)) throw new Pt2WebError(`waitStream(other): expected a gpu.Stream, got ${show(other)}`, 'INPUT');
    try { this.#w.waitStream(other.wasmStream()); } catch (e) { throw wrapError(e); }
  }
  /** Whether `other` is the same stream. */
  equals(other) { return other instanceof GpuStream && this.#w.same(other.wasmStream()); }
  /** The binding's handle (internal). */
  wasmStream() { return this.#w; }
}

// A dynamic scope over async work: `set(value)` before `fn`, the previous value back after,
// also when `fn` throws. Other tasks running during the await see the value too.
async function scoped(previous, set, fn) {
  if (typeof fn !== 'function') throw new Pt2WebError(`expected an async function to run in the scope, got ${show(fn)}`, 'INPUT');
  try { return await fn(); } finally { set(previous); }
}

/**
 * A WGSL compute shader compiled on the WebGPU device (`gpu.compileShader`), in the spirit of
 * torch.mps.compile_shader. Storage buffers of bind group 0 only: `array<f32>` takes float32
 * tensors, `array<i32>` int32/int64 (as i32), `array<u32>` bool (0/1) or int32/int64 bits.
 */
export class Shader {
  #w;
  #entries;
  constructor(w) {
    this.#w = w;
    this.#entries = w.entries;
  }
  /** The compute entry points: `[{name, workgroupSize, bindings: [{group, binding, name, access, elem}]}]`. */
  get entries() { return this.#entries; }
  /**
   * Run an entry point: `await k.call('main', [x, out], {workgroups: [n, 1, 1]})`.
   * `args` bind the entry point's storage buffers in binding order (inputs and outputs alike);
   * an argument may be `{shape, dtype}` without data (zeros, typically an output). The entry
   * may be omitted when the shader has one. `workgroups` defaults to enough workgroups along
   * x to cover the largest argument. Resolves to every argument's contents afterwards.
   */
  async call(entry, args, options = {}) {
    if (!this.#w) throw new Pt2WebError('the shader was disposed', 'DISPOSED');
    if (typeof entry !== 'string') {
      options = args ?? {};
      args = entry;
      entry = undefined;
    }
    const names = this.#entries.map((e) => e.name);
    if (entry === undefined) {
      if (names.length !== 1) throw new Pt2WebError(`call(): name the entry point (the shader has: ${names.join(', ')})`, 'INPUT');
      entry = names[0];
    }
    const ep = this.#entries.find((e) => e.name === entry);
    if (!ep) throw new Pt2WebError(`call(): no compute entry point '${entry}' (the shader has: ${names.join(', ')})`, 'INPUT');
    if (!Array.isArray(args)) throw new Pt2WebError('call(): args must be an array of tensors, one per binding', 'INPUT');
    let maxNumel = 1;
    const wire = args.map((t, i) => {
      const name = ep.bindings[i]?.name ?? `#${i}`;
      if (t && typeof t === 'object' && !ArrayBuffer.isView(t.data) && Array.isArray(t.shape)) {
        const dtype = t.dtype ?? 'float32';
        const Ctor = ARRAY_OF[dtype];
        if (!Ctor) throw new Pt2WebError(`argument '${name}': unknown dtype '${dtype}'`, 'INPUT');
        t = { data: new Ctor(t.shape.reduce((a, b) => a * b, 1)), shape: t.shape, dtype };
      }
      if (t instanceof GpuTensor) throw new Pt2WebError(`argument '${name}': Shader.call takes CPU tensors for now; read() the GpuTensor first`, 'INPUT');
      const w = toWire(name, t);
      if (typeof w !== 'object' || !w.bytes) throw new Pt2WebError(`argument '${name}': expected a tensor`, 'INPUT');
      maxNumel = Math.max(maxNumel, w.shape.reduce((a, b) => a * b, 1));
      return w;
    });
    let wg = options.workgroups ?? [Math.max(1, Math.ceil(maxNumel / ep.workgroupSize[0])), 1, 1];
    if (typeof wg === 'number') wg = [wg, 1, 1];
    const [x, y = 1, z = 1] = wg;
    try {
      return Array.from(await this.#w.call(entry, wire, x, y, z), fromWire);
    } catch (e) { throw wrapError(e); }
  }
  dispose() { this.#w?.free(); this.#w = null; }
}

/** A seed as the core takes it (a BigInt in [0, 2^64)), or an INPUT error naming `what`. */
function seedOf(what, seed) {
  const ok = (typeof seed === 'bigint' || Number.isSafeInteger(seed)) && BigInt(seed) >= 0n && BigInt(seed) < 2n ** 64n;
  if (!ok) throw new Pt2WebError(`${what}: the seed must be an integer in [0, 2^64), got ${show(seed)}`, 'INPUT');
  return BigInt(seed);
}

/**
 * The WebGPU device every model of this page (or worker) shares, in the spirit of torch.mps.
 * Sizes are in bytes.
 */
export const gpu = {
  /** `true` when `navigator.gpu` gives an adapter. */
  async isAvailable() {
    const g = globalThis.navigator?.gpu;
    return !!g && !!(await g.requestAdapter().catch(() => null));
  },
  /** Adapter and device: `{name, backend, deviceType, driver, features, limits, recommendedMaxMemory}`. */
  async properties() {
    await init();
    // Opened here with the adapter choice (else the core would open its default one).
    if (globalThis.navigator?.gpu) await openDevice();
    try { return await track(gpuDeviceProperties()); } catch (e) { throw wrapError(e); }
  },
  /**
   * `{allocated, peak, driverAllocated, buffersCreated, limit, recommendedMax}` plus torch's
   * keys (torch.cuda.memory_stats: `'allocated_bytes.all.current'`, `'reserved_bytes.all.peak'`,
   * `'num_ooms'`, ...), or null before any WebGPU model loads.
   */
  memoryStats() {
    usable();
    const s = wasmReady ? gpuMemoryStats() : null;
    return s && { ...s, ...wasmGlue.gpuMemoryStatsTorch(false) };
  },
  /** torch's keys nested: `{allocated_bytes: {all: {current, peak, allocated, freed}, small_pool, large_pool}, ...}`. */
  memoryStatsAsNestedDict() { usable(); return wasmReady ? wasmGlue.gpuMemoryStatsTorch(true) : null; },
  /** Zero the statistics' `allocated`/`freed` totals and `num_*` counters (torch.cuda.reset_accumulated_memory_stats). */
  resetAccumulatedMemoryStats() { usable(); if (wasmReady) wasmGlue.gpuResetAccumulatedMemoryStats(); },
  /**
   * `[free, total]` bytes (torch.cuda.mem_get_info), estimated: WebGPU has no memory query, so
   * total is the recommended maximum and free is total less what pt2web holds from the driver.
   */
  memGetInfo() { usable(); return wasmReady ? wasmGlue.gpuMemGetInfo() : null; },
  /** Bytes of pt2web's buffer pool, live plus cached (torch.cuda.memory_reserved). */
  memoryReserved() { usable(); return (wasmReady && wasmGlue.gpuMemoryReserved()?.memoryReserved) || 0; },
  /** The peak of memoryReserved() (torch.cuda.max_memory_reserved). */
  maxMemoryReserved() { usable(); return (wasmReady && wasmGlue.gpuMemoryReserved()?.maxMemoryReserved) || 0; },
  /**
   * Start (a fresh history of the last `maxEntries` actions) or stop recording every
   * allocation and free of the device's pool with the op and node that caused it
   * (torch.cuda.memory._record_memory_history). Started before a load, it includes the
   * weights' upload. Runs are not replayed from a recorded tape while it records.
   */
  async recordMemoryHistory(enabled = true, maxEntries = 1 << 20) {
    await init();
    if (typeof maxEntries !== 'number' || !(maxEntries >= 1)) throw new Pt2WebError(`recordMemoryHistory(): maxEntries must be a number >= 1, got ${show(maxEntries)}`, 'INPUT');
    wasmGlue.gpuRecordMemoryHistory(!!enabled, maxEntries);
  },
  /**
   * The pool and its recorded history in the layout of torch.cuda.memory._snapshot():
   * `{segments: [{address, total_size, allocated_size, blocks: [{size, state, frames}]}],
   * device_traces: [[{action, addr, size, time_us, frames: [{name: op, filename: node}]}]]}`
   * (save it as JSON for torch.cuda._memory_viz), or null before any WebGPU model loads.
   */
  memorySnapshot() { usable(); return wasmReady ? wasmGlue.gpuMemorySnapshot() : null; },
  /** Bytes in buffers holding live tensors (torch.mps.current_allocated_memory). */
  currentAllocatedMemory() { return this.memoryStats()?.allocated ?? 0; },
  /** Bytes pt2web holds from the driver, live plus cached (torch.mps.driver_allocated_memory). */
  driverAllocatedMemory() { return this.memoryStats()?.driverAllocated ?? 0; },
  /** Cap live allocations at `fraction` of the recommended maximum; past it, OUT_OF_MEMORY. */
  async setPerProcessMemoryFraction(fraction) {
    await init();
    if (typeof fraction !== 'number') throw new Pt2WebError(`setPerProcessMemoryFraction(): fraction must be a number in (0, 1], got ${show(fraction)}`, 'INPUT');
    try { await track(gpuSetMemoryFraction(fraction)); } catch (e) { throw wrapError(e); }
  },
  /** Release cached buffers to the driver (torch.mps.empty_cache). */
  emptyCache() { usable(); if (wasmReady) { try { gpuEmptyCache(); } catch (e) { throw wrapError(e); } } },
  /** Reset the peak to the current allocation. */
  resetPeakMemoryStats() { usable(); if (wasmReady) gpuResetPeakMemoryStats(); },
  /** Open the shared WebGPU device now (loading a WebGPU model also opens it). */
  async open(options = {}) {
    await choosePowerPreference('gpu.open()', options?.powerPreference);
    await openDevice();
  },
  /**
   * How many WebGPU adapters pt2web can choose from: 1 where `navigator.gpu` gives an adapter,
   * else 0 (WebGPU hands out one adapter per request, chosen by `powerPreference`).
   */
  async deviceCount() {
    return (await this.isAvailable()) ? 1 : 0;
  },
  /**
   * Run pt2web's WebGPU work on a GPUDevice the app owns (shared with its rendering): call it
   * before the first WebGPU load. GpuTensor buffers are then the app's device's buffers. wgpu
   * sets the device's `onuncapturederror` handler; `gpu.destroy()` refuses (the app destroys it).
   */
  async fromExternalDevice(device) {
    if (!isGpuDevice(device)) throw new Pt2WebError(`gpu.fromExternalDevice(): expected a GPUDevice, got ${show(device)}`, 'INPUT');
    await useExternalDevice(device);
  },
  /** Whether the shared WebGPU device is open (and not lost). */
  isOpen() { usable(); return wasmReady && gpuDeviceOpen(); },
  /**
   * Destroy the shared WebGPU device now (`GPUDevice.destroy()`), e.g. to hand its memory
   * back when a page is done with its models. Every model on it then rejects its runs with
   * code DEVICE_LOST, as after a loss the browser causes (a GPU reset, a driver update);
   * `await gpu.open()` and loading the models again recover.
   */
  destroy() {
    usable();
    if (adapterChoice.device) throw new Pt2WebError("gpu.destroy(): the WebGPU device is the app's (gpu.fromExternalDevice): destroy it yourself; pt2web's models on it then reject with DEVICE_LOST", 'DEVICE');
    if (wasmReady) gpuDestroy();
  },
  /** The shared device's `GPUDevice` (opening it if needed), for a page's own WebGPU work on
   * pt2web's buffers (`GpuTensor.buffer`). Do not destroy it: use `gpu.destroy()`. */
  async webgpuDevice() {
    await openDevice();
    try { return await track(gpuWebGpuDevice()); } catch (e) { throw wrapError(e); }
  },
  /** `new gpu.Event({enableTiming: true})`: see GpuEvent. */
  Event: GpuEvent,
  /** Open the WebGPU device now (torch.cuda.init); rejects with DEVICE without WebGPU. */
  async init() { await openDevice(); },
  /** Whether the WebGPU device was opened (torch.cuda.is_initialized). */
  isInitialized() { usable(); return wasmReady && wasmGlue.gpuIsInitialized(); },
  /** The current device index: 0, the one adapter a browser gives. */
  currentDevice() { usable(); return wasmReady ? wasmGlue.gpuCurrentDevice() : 0; },
  /** `setDevice(0)`; any other index rejects with INPUT (the browser gives one adapter). */
  async setDevice(index) {
    await init();
    try { wasmGlue.gpuSetDevice(index); } catch (e) { throw wrapError(e); }
  },
  /** Run `fn` with device `index` current, the previous one after (torch.cuda.device). */
  async device(index, fn) {
    const previous = this.currentDevice();
    await this.setDevice(index);
    return scoped(previous, (i) => wasmGlue.gpuSetDevice(i), fn);
  },
  /** Where `t` lives: `0` (the WebGPU device) for a GpuTensor, `'cpu'` for a tensor on the host. */
  deviceOf(t) {
    if (t instanceof GpuTensor) return 0;
    if (t !== null && typeof t === 'object' && (ArrayBuffer.isView(t) || ArrayBuffer.isView(t.data))) return 'cpu';
    throw new Pt2WebError(`deviceOf(): expected a tensor or a GpuTensor, got ${show(t)}`, 'INPUT');
  },
  /** `{features, limits}` of device `index` (0; opens it): limits by WebGPU's names. */
  async getDeviceCapability(index = 0) {
    if (index !== 0) throw new Pt2WebError(`getDeviceCapability(${show(index)}): no such device: 1 GPU device (the browser gives one adapter), numbered 0`, 'INPUT');
    await openDevice();
    try { return await track(wasmGlue.gpuDeviceCapability()); } catch (e) { throw wrapError(e); }
  },
  /** The backends this build has: `['webgpu', 'cpu']`. */
  async getArchList() { await init(); return Array.from(wasmGlue.gpuArchList()); },
  /** `new gpu.Stream()`: see GpuStream. */
  Stream: GpuStream,
  /** The current stream (the default one unless setStream / stream chose another). */
  currentStream() { usable(); try { return new GpuStream(wasmGlue.gpuCurrentStream()); } catch (e) { throw wrapError(e); } },
  /** The device's default stream (id 0). */
  defaultStream() { usable(); try { return new GpuStream(wasmGlue.gpuDefaultStream()); } catch (e) { throw wrapError(e); } },
  /** Make `s` the current stream: runs without a `stream` option go on it. */
  setStream(s) {
    if (!(s instanceof GpuStream)) throw new Pt2WebError(`setStream(s): expected a gpu.Stream, got ${show(s)}`, 'INPUT');
    wasmGlue.gpuSetStream(s.wasmStream());
  },
  /** Run `fn` with `s` current, the previous stream after (torch.cuda.stream / StreamContext). */
  async stream(s, fn) {
    const previous = this.currentStream();
    this.setStream(s);
    return scoped(previous, (p) => this.setStream(p), fn);
  },
  /**
   * A stream over the queue of a GPUDevice the app owns and gave pt2web
   * (`gpu.fromExternalDevice` / `load(url, {device})`), for the app's own submits: its
   * query/synchronize cover everything submitted to that queue so far. `queue` is the
   * GPUQueue or its GPUDevice; another device's rejects with INPUT.
   */
  async getStreamFromExternal(queue) {
    const own = await this.webgpuDevice();
    if (queue !== own && queue !== own.queue) throw new Pt2WebError(`getStreamFromExternal(): expected the queue (or the GPUDevice) pt2web runs on: WebGPU has one queue per device, so give pt2web your GPUDevice first (gpu.fromExternalDevice), got ${show(queue)}`, 'INPUT');
    try { return new GpuStream(wasmGlue.gpuStreamFromExternal()); } catch (e) { throw wrapError(e); }
  },
  /**
   * Validate WGSL with naga and compile it on the WebGPU device (torch.mps.compile_shader).
   * A mistake rejects with a Pt2WebError (code GPU) whose message gives the line and column.
   * User shaders run on WebGPU only: with `{device: 'cpu'}` or without WebGPU this rejects
   * with code DEVICE.
   */
  async compileShader(source, options = {}) {
    if (options.device === 'cpu') throw new Pt2WebError('compileShader: user WGSL shaders run on WebGPU only, not on the CPU backend', 'DEVICE');
    if (typeof source !== 'string') throw new Pt2WebError('compileShader: source must be a WGSL string', 'INPUT');
    await init();
    if (!globalThis.navigator?.gpu) throw new Pt2WebError('compileShader: user WGSL shaders need WebGPU, and navigator.gpu is missing (the CPU backend cannot run them)', 'DEVICE');
    await openDevice();
    try { return new Shader(await track(gpuCompileShader(source))); } catch (e) { throw wrapError(e); }
  },
  /**
   * Seed every device's default generator, the CPU's and the WebGPU device's
   * (torch.cuda.manual_seed_all, with the CPU's as torch.manual_seed): models not given their
   * own seed (`model.manualSeed`) draw from their device's default generator, one stream
   * across models, as torch modules share theirs.
   */
  async manualSeedAll(seed) {
    const s = seedOf('gpu.manualSeedAll()', seed);
    await init();
    gpuManualSeedAll(s);
  },
  /** Seed every device's default generator from the clock (torch.cuda.seed_all); the seed (a BigInt). */
  async seedAll() {
    await init();
    return gpuSeedAll();
  },
  /** Every device's default generator state (torch.cuda.get_rng_state_all): Uint8Arrays of 16
   * bytes, the CPU's first, then the WebGPU device's once it is open. */
  async getRngStateAll() {
    await init();
    return gpuGetRngStateAll();
  },
  /** Restore `getRngStateAll()`'s list (torch.cuda.set_rng_state_all): one state per device,
   * else an INPUT error naming the index or the count. */
  async setRngStateAll(states) {
    if (!Array.isArray(states)) throw new Pt2WebError(`gpu.setRngStateAll(): expected the array getRngStateAll() returns, got ${show(states)}`, 'INPUT');
    await init();
    try { gpuSetRngStateAll(states); } catch (e) { throw wrapError(e); }
  },
  /**
   * Profile every model's runs while `fn` (async) runs: `await gpu.profile(async () => {...})`
   * resolves to `{events: [{model, device, node, op, start_ms, dur_ms, depth, cat}], summary,
   * chromeTrace}` (one Chrome trace, one process per model). Scopes nest; a model's own
   * `startProfiler()` keeps working inside one.
   */
  async profile(fn) {
    if (typeof fn !== 'function') throw new Pt2WebError(`gpu.profile(): expected an async function, got ${show(fn)}`, 'INPUT');
    await init();
    const id = profilerBegin();
    let profile = null;
    try {
      await fn();
    } finally {
      profile = profilerEnd(id);
    }
    return profile;
  },
  /** Whether a `gpu.profile` scope is open. */
  isCapturing() { usable(); return wasmReady && profilerIsCapturing(); },
  /** Resolves when all submitted GPU work is done (torch.mps.synchronize). */
  async synchronize() {
    usable();
    if (!wasmReady) return;
    try { await track(gpuSynchronize()); } catch (e) { throw wrapError(e); }
  },
};

const SWITCHES = ['allowF16ReducedPrecision', 'attention', 'attentionKernel', 'convAlgorithm', 'matmulAlgorithm', 'rowAlgorithm', 'autotune', 'deterministic', 'graphPasses', 'optEinsum'];

/**
 * The backend switches of this page or Worker (Rust's `pt2web::backends`, in the spirit of
 * `torch.backends`): the kernel forms and precision the next op uses, and the graph passes of
 * models loaded afterwards.
 */
export const backends = {
  /** Every switch as it is now, and `built`: the backends this build holds. */
  async get() {
    await init();
    try { return backendsGet(); } catch (e) { throw wrapError(e); }
  },
  /** Set switches: `await backends.set({ graphPasses: 'none', matmulAlgorithm: 'tiled' })`. */
  async set(switches) {
    if (switches === null || typeof switches !== 'object') throw new Pt2WebError(`backends.set(): expected an object of switches (${SWITCHES.join(', ')}), got ${show(switches)}`, 'INPUT');
    await init();
    for (const [k, v] of Object.entries(switches)) {
      try { backendsSet(k, v); } catch (e) { throw wrapError(e); }
    }
  },
  /**
   * torch's `torch.backends.opt_einsum`: the order in which einsum contracts 3+ operands, on
   * CPU and WebGPU. `await backends.optEinsum.get()` is `{enabled, strategy, isAvailable}`;
   * `await backends.optEinsum.set({enabled: false})` contracts left to right,
   * `set({strategy: 'greedy'})` ('auto', 'greedy', 'optimal') picks the search.
   */
  /** torch's `torch.backends.cpu`: `await backends.cpu.getCpuCapability()` is the
   * WebAssembly build running, 'WASM_SIMD128' or 'WASM_RELAXED_SIMD'. */
  cpu: {
    async getCpuCapability() {
      await init();
      return backendsCpuCapability();
    },
  },
  /** The verbose kernel log (torch's `mkldnn.verbose`): `await backends.setVerbose(1)` logs
   * one console line per kernel run (op, node, input shapes, variant, time: on WebGPU the
   * shader variants the node dispatched and its GPU time where the device has timestamps);
   * 0: off. */
  async setVerbose(level) {
    if (!Number.isInteger(level) || level < 0) throw new Pt2WebError(`backends.setVerbose(): expected a level >= 0, got ${show(level)}`, 'INPUT');
    await init();
    backendsSetVerbose(level);
  },
  optEinsum: {
    async get() { return (await backends.get()).optEinsum; },
    async set(v) { return backends.set({ optEinsum: v }); },
  },
  /** Whether this build holds the backend ('cpu', 'webgpu', 'vulkan', ...). */
  async isBuilt(name) {
    return (await this.get()).built.includes(name);
  },
  /** Whether the backend is built and usable here ('webgpu': an adapter is available). */
  async isAvailable(name) {
    if (!(await this.isBuilt(name))) return false;
    return name === 'webgpu' ? gpu.isAvailable() : name === 'cpu';
  },
};

/**
 * A `.pt2` archive opened once (`openArchive`) for several questions and loads
 * (`load(archive)`): its programs and extra files, as torch's `PT2ArchiveReader` gives them.
 * Opened from a URL whose server answers range requests, it holds only the small records
 * those questions read (`bytes` is then null, and `load(archive)` streams from `url`).
 */
export class Archive {
  #bytes;
  #records;
  /** The URL it was opened from, when it was. */
  url = null;
  constructor(bytes, { records = null, url = null } = {}) {
    this.#bytes = bytes;
    this.#records = records;
    this.url = url;
  }
  /** The archive's bytes (null when opened by range requests: see the class doc). */
  get bytes() { return this.#bytes; }
  /** The program names (several: `package_pt2(exported_programs=...)`). */
  programs() {
    try { return this.#records ? this.#records.programNames() : wasmProgramNames(this.#bytes); } catch (e) { throw wrapError(e); }
  }
  /** The extra files `torch.export.save(extra_files=...)` stored: `{name: Uint8Array}`. */
  extraFiles() {
    try { return this.#records ? this.#records.extraFiles() : wasmExtraFiles(this.#bytes); } catch (e) { throw wrapError(e); }
  }
}

// The records `Archive` reads by name: the small ones but weights, constants and sample
// inputs (archive_format, archive_version, byteorder, ...), and the extra files.
function listedRecord(r) {
  return /^(extra|extra_files)\//.test(r.name) || (r.len <= LAZY.small && !r.name.startsWith('data/'));
}

/**
 * Open an archive from a URL, Response or bytes (`options`: `cache`, `onProgress`, as `load`).
 * A URL is read by range requests where its server answers them: the directory and the small
 * records (see `Archive`); from the archive cache when it holds the URL; else downloaded whole.
 */
export async function openArchive(source, options = {}) {
  await init();
  if (source instanceof Archive) return source;
  options = loadOptions(options);
  const url = typeof source === 'string' || source instanceof URL ? new URL(source, baseUrl()) : null;
  // A threaded or relaxed build made before this has no programNames on WasmStreamingLoad.
  if (url && url.protocol !== 'file:' && WasmStreamingLoad?.prototype.programNames) {
    const progress = progressOf(options.onProgress);
    const store = cache.storeFor(options.cache ?? (isNode ? 'none' : 'auto'));
    const hit = store && await cache.cachedResponse(store, url.href).catch(() => null);
    const blob = hit && await hit.blob?.().catch(() => null);
    let opened;
    if (blob && blob.size === hit.version.size) {
      const read = async (start, end) => new Uint8Array(await blob.slice(start, end).arrayBuffer());
      opened = { read, size: blob.size, phase: 'cache' };
    } else {
      const first = await fetch(url, { headers: { range: `bytes=-${TAIL}` } }).catch((e) => { throw fetchFailed(url, e); });
      const size = rangeTotal(first);
      // No range requests: the whole archive (kept in the cache, as `load` keeps it).
      if (size === null) return new Archive(await downloadWhole(first, store, url, progress), { url });
      opened = { read: rangeReader(url, size), size, tail: new Uint8Array(await first.arrayBuffer()), phase: 'download' };
    }
    const records = await streamArchive({ ...opened, progress, only: listedRecord });
    return new Archive(null, { records, url });
  }
  return new Archive(await readSource(source, options), { url });
}

/** The program names of an archive (an `Archive`, or what `openArchive` takes). */
export async function listPrograms(archive) {
  return (await openArchive(archive)).programs();
}
/** Named parameters, buffers and constants of a loaded program. */
class StateView {
  #m;
  constructor(m) { this.#m = m; }
  keys() {
    try { return this.#m.model().stateNames(); } catch (e) { throw wrapError(e); }
  }
  has(name) { return this.keys().includes(name); }
  /** The tensor as it is now (a copy). A promise: on WebGPU the state a run updates stays on
   * the GPU and is read back here, only when asked. */
  async get(name) {
    if (typeof name !== 'string') throw new Pt2WebError(`state.get(): name must be a string, got ${show(name)}`, 'INPUT');
    try { return fromWire(await track(this.#m.model().stateTensor(name))); } catch (e) { throw wrapError(e); }
  }
  /**
   * Replace a parameter, buffer or constant with `tensor` (its dtype and shape): the next run
   * reads it (on WebGPU written into the same GPU buffer). Refused, saying why, for state the
   * graph passes folded into constants at load (load after `backends.set({graphPasses:
   * 'none'})` to set it), state the graph does not read, and state sharing its storage.
   */
  set(name, tensor) {
    if (typeof name !== 'string') throw new Pt2WebError(`state.set(): name must be a string, got ${show(name)}`, 'INPUT');
    const wire = toWire(name, tensor);
    if (typeof wire !== 'object' || !wire.bytes) throw new Pt2WebError(`state.set('${name}'): expected a tensor {data, shape, dtype}`, 'INPUT');
    try { this.#m.model().setStateTensor(name, wire); } catch (e) { throw wrapError(e); }
  }
}

// The options of `run`, checked: `{keepOnGpu, signal, timeoutMs}`.
function runOptions(options) {
  if (options === undefined || options === null) return { keepOnGpu: false };
  if (typeof options !== 'object') throw new Pt2WebError(`run(): options must be an object such as {signal, timeoutMs, keepOnGpu}, got ${show(options)}`, 'INPUT');
  const { signal, timeoutMs, stream } = options;
  signalOption('run()', signal);
  if (stream !== undefined && stream !== null && !(stream instanceof GpuStream)) {
    throw new Pt2WebError(`run(): options.stream must be a gpu.Stream, got ${show(stream)}`, 'INPUT');
  }
  if (timeoutMs !== undefined && timeoutMs !== null && !(typeof timeoutMs === 'number' && timeoutMs >= 0)) {
    throw new Pt2WebError(`run(): options.timeoutMs must be a non-negative number of milliseconds, got ${show(timeoutMs)}`, 'INPUT');
  }
  return { signal: signal ?? undefined, timeoutMs: timeoutMs ?? undefined, keepOnGpu: !!options.keepOnGpu, stream: stream ?? undefined };
}

// `options.signal` of `what` ('run()', 'prepare()', 'generate()'), checked: an AbortSignal or nothing.
function signalOption(what, signal) {
  if (signal !== undefined && signal !== null && !(typeof signal === 'object' && typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function')) {
    throw new Pt2WebError(`${what}: options.signal must be an AbortSignal, got ${show(signal)}`, 'INPUT');
  }
  return signal ?? undefined;
}

function cancelled(signal, what = 'run') {
  const why = signal.reason === undefined ? '' : `: ${signal.reason?.message ?? String(signal.reason)}`;
  return new Pt2WebError(`${what} stopped: its AbortSignal was aborted${why}`, 'CANCELLED');
}

/** A loaded program. */
export class Model {
  #wasm;
  #info;
  constructor(wasm, deviceChoice) {
    this.#wasm = wasm;
    const info = wasm.info;
    this.#info = {
      ...info, device: deviceChoice.device, deviceNote: deviceChoice.reason,
      threads: threading.threads, threadsNote: threading.reason, simd: threading.simd,
    };
    this.device = deviceChoice.device;
    this.deviceNote = deviceChoice.reason;
    this.state = new StateView({ model: () => this.#live() });
  }
  #live() {
    usable();
    if (!this.#wasm) throw new Pt2WebError('the model was disposed', 'DISPOSED');
    return this.#wasm;
  }
  #stopping = null;
  // `running`, or CANCELLED as soon as `signal` aborts; the call given up then finishes (at
  // its next node) before the next call starts.
  #untilAbort(running, signal, what) {
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const settled = running.then(() => {}, () => {});
        this.#stopping = settled;
        settled.then(() => { if (this.#stopping === settled) this.#stopping = null; });
        reject(cancelled(signal, what));
      };
      if (signal.aborted) { onAbort(); return; }
      signal.addEventListener('abort', onAbort, { once: true });
      running.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }
  // The wasm call `start(token)` (`run`, `prepare`, `generate`: `what`) under `signal`: CANCELLED
  // at once for a signal already aborted, else as soon as it aborts, the core stopping at its
  // next node (it checks the cancel token `start` is given); a call given up holds the model
  // until it stops.
  async #stoppable(what, signal, start) {
    let token = null;
    const onAbort = () => token?.cancel();
    try {
      if (signal?.aborted) throw cancelled(signal, what);
      if (this.#stopping) await this.#stopping;
      if (signal) {
        token = new WasmCancelToken();
        // It may have aborted while the call before was stopping.
        if (signal.aborted) token.cancel();
        else signal.addEventListener('abort', onAbort, { once: true });
      }
      const running = track(start(token?.share()));
      return await (signal ? this.#untilAbort(running, signal, what) : running);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      token?.free();
    }
  }
  /** Inputs, outputs, dynamic dims and ranges, parameter bytes, op histogram... */
  get info() { return this.#info; }

  #flatInputs(inputs) {
    const specs = this.#info.specs;
    const names = this.#info.inputs.map((i) => i.name);
    let pairs;
    const inSpec = specs.inSpec;
    const argsSpec = inSpec?.kind === 'tuple' && inSpec.children.length === 2 ? inSpec.children[0] : null;
    const kwSpec = argsSpec ? inSpec.children[1] : null;
    if (isTensorLike(inputs) && names.length === 1) {
      pairs = [[names[0], inputs]];
    } else if (Array.isArray(inputs) && argsSpec) {
      pairs = [];
      flatten(argsSpec, inputs, '', pairs);
      if (kwSpec && kwSpec.children.length) throw new Pt2WebError(`the program also takes keyword inputs (${kwSpec.keys.map(keyOf).join(', ')}): pass {args: [...], kwargs: {...}}`, 'INPUT');
    } else if (inputs && typeof inputs === 'object' && ('args' in inputs || 'kwargs' in inputs) && argsSpec) {
      pairs = [];
      flatten(inSpec, [inputs.args ?? [], inputs.kwargs ?? {}], '', pairs);
    } else if (inputs && typeof inputs === 'object' && argsSpec && argsSpec.children.length === 0 && !Object.keys(inputs).every((k) => names.includes(k))) {
      pairs = [];
      flatten(kwSpec, inputs, '', pairs);
    } else if (inputs && typeof inputs === 'object' && !Array.isArray(inputs)) {
      // Flat, by the user-input names `info.inputs` lists (nested inputs flattened: batch_feat).
      for (const k of Object.keys(inputs)) {
        if (!names.includes(k)) throw new Pt2WebError(`input '${k}': not an input of the program (inputs: ${names.join(', ')})`, 'INPUT');
      }
      pairs = names.map((n) => {
        if (!(n in inputs)) throw new Pt2WebError(`input '${n}': missing (inputs: ${names.join(', ')})`, 'INPUT');
        return [n, inputs[n]];
      });
    } else {
      throw new Pt2WebError('run(): inputs must be an array of positional inputs, an object, or {args, kwargs}', 'INPUT');
    }
    if (pairs.length !== names.length) throw new Pt2WebError(`the program takes ${names.length} inputs (${names.join(', ')}), got ${pairs.length}`, 'INPUT');
    return pairs.map(([, v], i) => toWire(names[i], v, this.#info.inputs[i].dtype));
  }

  /**
   * Run the program; `inputs` keep the structure the model was exported with.
   * options: `{keepOnGpu: true}` (WebGPU models) returns tensor outputs as GpuTensors;
   * `stream` (a gpu.Stream) is the stream the run goes on (gpu.currentStream() by default);
   * `signal` (an AbortSignal) and `timeoutMs` stop the run: it rejects with code CANCELLED
   * (at once for a signal already aborted; on WebGPU as soon as the signal aborts, the work
   * itself stopping before its next node), and the model stays usable. A CPU run is one
   * synchronous call: the signal is checked before it starts, `timeoutMs` during it.
   */
  async run(inputs, options = {}) {
    const wasm = this.#live();
    let flat;
    const { signal, timeoutMs, keepOnGpu, stream } = runOptions(options);
    try {
      if (keepOnGpu && this.device !== 'webgpu') throw new Pt2WebError('keepOnGpu needs a model loaded on WebGPU', 'INPUT');
      if (signal?.aborted) throw cancelled(signal);
      const wire = this.#flatInputs(inputs);
      flat = await this.#stoppable('run', signal, (token) => wasm.run(wire, keepOnGpu, token, timeoutMs, stream?.wasmStream().share()));
    } catch (e) {
      throw wrapError(e);
    }
    const leaves = Array.from(flat, fromWire);
    const outSpec = this.#info.specs.outSpec;
    return outSpec ? unflatten(outSpec, leaves) : leaves;
  }

  /**
   * Generate tokens with a language model exported with a static KV cache (transformers'
   * `convert_and_export_with_cache`: inputs `input_ids`, `cache_position`; or ExecuTorch's
   * `tokens`, `input_pos`). Ids in, ids out: tokenize with the model's own tokenizer. The
   * prompt goes in one call where the sequence length is dynamic; then one token per call.
   * Greedy by default (on WebGPU the argmax is taken on the GPU, so a step reads back 8
   * bytes; the cache stays there). `options`: `{maxNewTokens = 32, temperature = 0, topK,
   * topP, seed = 0, eos, onToken(id), signal}` (an AbortSignal: the loop stops with code
   * CANCELLED before the next node of its current call; the cache keeps the positions it
   * filled, so call on from a fresh model or from where it stopped). The cache continues from earlier calls: a freshly
   * loaded model starts at position 0. Resolves to the new ids; `lastGenerateStats` then
   * holds `{prefillMs, decodeTokS, readbackBytesPerToken}`.
   */
  async generate(promptIds, options = {}) {
    const wasm = this.#live();
    const { onToken, signal, ...rest } = options ?? {};
    if (onToken !== undefined && typeof onToken !== 'function') {
      throw new Pt2WebError('generate(): onToken must be a function', 'INPUT');
    }
    let out;
    try {
      signalOption('generate()', signal);
      if (!Array.isArray(promptIds) && !ArrayBuffer.isView(promptIds)) throw new Pt2WebError(`generate(): promptIds must be an array of token ids, got ${show(promptIds)}`, 'INPUT');
      const prompt = Float64Array.from(promptIds, (t) => (typeof t === 'bigint' || typeof t === 'number' ? Number(t) : NaN));
      out = await this.#stoppable('generate', signal ?? undefined, (token) => wasm.generate(prompt, rest, onToken, token));
    } catch (e) {
      throw wrapError(e);
    }
    const { tokens, ...stats } = out;
    this.lastGenerateStats = stats;
    return tokens;
  }

  /**
   * Prepare for inputs of these shapes without running anything: the Plan (inputs checked
   * against the guards once, every value's shape and dtype) and, on WebGPU, every compute
   * pipeline and bind group the run will use, so the first run compiles no shader.
   * `shapes`: an object keyed by the names `info.inputs` lists, or an array in that order,
   * of sizes (`[1, 128]`), tensors (their shape and dtype) or numbers (int inputs); omitted,
   * the declared shapes (every dim static). Resolves to `{prepareMs, planSteps,
   * pipelinesCreated, bindGroupsCreated, autotuned, stopped}`. `options`: `{onProgress(done,
   * total), signal}` (an AbortSignal: CANCELLED as `run` gives it; the model stays usable).
   */
  async prepare(shapes, options = {}) {
    const wasm = this.#live();
    const signal = signalOption('prepare()', options?.signal);
    const inputs = this.#info.inputs;
    const names = inputs.map((i) => i.name);
    let given;
    if (shapes === undefined || shapes === null) {
      given = inputs.map(() => undefined);
    } else if (Array.isArray(shapes)) {
      // One tensor input and a bare list of sizes: its shape.
      const bare = names.length === 1 && inputs[0].dtype !== 'symint' && shapes.every((d) => typeof d === 'number');
      if (bare) given = [shapes];
      else if (shapes.length === names.length) given = shapes;
      else throw new Pt2WebError(`prepare(): the program takes ${names.length} inputs (${names.join(', ')}), got ${shapes.length}`, 'INPUT');
    } else if (typeof shapes === 'object') {
      for (const k of Object.keys(shapes)) {
        if (!names.includes(k)) throw new Pt2WebError(`prepare(): '${k}' is not an input of the program (inputs: ${names.join(', ')})`, 'INPUT');
      }
      given = names.map((n) => shapes[n]);
    } else {
      throw new Pt2WebError('prepare(): shapes must be an object keyed by input name or an array in input order', 'INPUT');
    }
    const wire = inputs.map((inp, i) => {
      const v = given[i];
      if (v === undefined) {
        const dims = inp.shape.map(Number);
        if (inp.dtype === 'symint' || dims.some((d) => !Number.isInteger(d))) {
          throw new Pt2WebError(`prepare(): input '${inp.name}' has dynamic sizes [${inp.shape.join(', ')}]: give its shape`, 'INPUT');
        }
        return { dtype: inp.dtype, shape: dims };
      }
      if (typeof v === 'number' || typeof v === 'boolean') return v;
      if (Array.isArray(v)) return { dtype: inp.dtype, shape: sizesOf(`prepare(): input '${inp.name}'`, v) };
      if (v && Array.isArray(v.shape)) return { dtype: v.dtype ?? inp.dtype, shape: sizesOf(`prepare(): input '${inp.name}'`, v.shape) };
      throw new Pt2WebError(`prepare(): input '${inp.name}': expected its sizes, a tensor or a number`, 'INPUT');
    });
    let stats;
    options.onProgress?.(0, 1);
    try {
      stats = await this.#stoppable('prepare', signal, (token) => wasm.prepare(wire, token));
    } catch (e) {
      throw wrapError(e);
    }
    options.onProgress?.(1, 1);
    return stats;
  }

  /** Start the profiler: per-op wall times of the following runs. */
  startProfiler() {
    try { this.#live().startProfiler(); } catch (e) { throw wrapError(e); }
  }

  /** Stop it: `{events: [{node, target, start_ms, dur_ms, depth, cat}], summary: [{target,
   * count, total_ms}], chromeTrace, gpuTiming}`; `JSON.stringify(chromeTrace)` opens in
   * chrome://tracing or Perfetto. On WebGPU, kernels are events of cat `'gpu'` (GPU
   * timestamps) or, without `timestamp-query`, `'gpu-host'` (host time to encode them);
   * `gpuTiming` is `'timestamp'`, `'host'` or null. */
  stopProfiler() {
    try { return this.#live().stopProfiler(); } catch (e) { throw wrapError(e); }
  }

  /** Seed the program's random generator (rand, randn, bernoulli, dropout in training mode). */
  manualSeed(seed) {
    const s = seedOf('manualSeed()', seed);
    try { this.#live().manualSeed(s); } catch (e) { throw wrapError(e); }
  }

  /** Counters of the last run on WebGPU (`{submits, bufferAllocations, pipelinesCreated,
   * bindGroupsCreated, dispatches, boundBytes, planSteps, hostMs, waitMs, gpuNodes, viewNodes,
   * fallbackNodes, fallbacks, uploads, downloads, uploadBytes, downloadBytes}`), null on the CPU. */
  lastRunStats() {
    try { return this.#live().lastRunStats(); } catch (e) { throw wrapError(e); }
  }

  /** Free the program's memory now, GPU buffers included (the model cannot run afterwards). */
  dispose() {
    if (!this.#wasm) return;
    // A poisoned instance is not entered again, not even to free.
    if (poisonedBy !== null) { this.#wasm = null; return; }
    const onGpu = this.device === 'webgpu';
    this.#wasm.free();
    this.#wasm = null;
    // The weights' buffers went back to the pool: hand the pool's unused buffers to the driver.
    if (onGpu) gpuEmptyCache();
  }
}

/**
 * Panic inside pt2web on purpose, for tests of the poisoned state: at once, or with
 * `{pending: true}` inside a call the event loop runs (a promise nothing else would settle).
 * @internal
 */
export async function __panicForTest(options = {}) {
  await init();
  try { await track(panicForTest(!!options.pending)); } catch (e) { throw wrapError(e); }
}

/**
 * Set the lazy load's sizes (LAZY: `small`, `eager`, `head`, `gap`, `ahead`) for tests, which load
 * archives far smaller than real ones; returns the previous ones.
 * @internal
 */
export function __lazyTuningForTest(o) {
  const before = { ...LAZY };
  Object.assign(LAZY, o);
  return before;
}

/** `true` when the bytes are a PT2 archive. */
export async function isPt2Package(bytes) {
  await init();
  return wasmIsPt2(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes));
}

/** The program names in an archive (read as `openArchive` reads it). */
export async function programNames(source) {
  return (await openArchive(source)).programs();
}

/**
 * Load a `.pt2`: `source` is a URL, Response, ArrayBuffer or Uint8Array.
 * options: {device: 'webgpu'|'cpu'|'auto' (default 'auto'), program,
 * onProgress(loaded, total, {phase, loaded, total}), cache: 'auto'|'none'|'cache-api'|'opfs',
 * prepare: true (the declared shapes) or shapes as `model.prepare` takes them,
 * weights: 'f32' (default) | 'int8' | 'int4' | 'int4:GROUP' (quantized at load)}.
 * `onProgress` phases, in order: 'download' (bytes from the network) or 'cache' (bytes from
 * the archive cache), 'upload' (the weights decoded into the model, on WebGPU uploaded), and
 * with `prepare`, 'prepare' (0 of 1, then 1 of 1); `model.prepareStats` then holds what it did.
 * `cache` (URLs only; default 'auto' in browsers and Workers, 'none' in Node): see js/cache.js.
 */
export async function load(source, options = {}) {
  options = loadOptions(options);
  const model = await loadModel(source, options);
  if (options.prepare) {
    const shapes = options.prepare === true ? undefined : options.prepare;
    const progress = progressOf(options.onProgress);
    try {
      model.prepareStats = await model.prepare(shapes, { onProgress: (done, total) => progress('prepare', done, total) });
    } catch (e) {
      model.dispose();
      throw e;
    }
  }
  return model;
}

/**
 * Forget cached archives (`load`'s `cache`): the one of `url`, or every one when omitted, in
 * every store this context has. Resolves to the number of stores that had something removed.
 */
export async function clearCache(url) {
  if (url !== undefined && typeof url !== 'string' && !(url instanceof URL)) throw new Pt2WebError(`clearCache(): url must be a string or a URL, got ${show(url)}`, 'INPUT');
  const href = url === undefined ? null : new URL(url, globalThis.location?.href).href;
  let removed = 0;
  for (const store of cache.allStores()) {
    if (await (href === null ? store.clear() : store.delete(href))) removed += 1;
  }
  return removed;
}

const CACHE_MODES = ['auto', 'none', 'cache-api', 'opfs'];

// The options of `load`, checked (the glue would coerce or throw a TypeError).
function loadOptions(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw new Pt2WebError(`load(): options must be an object, got ${show(options)}`, 'INPUT');
  for (const k of ['device', 'program', 'weights', 'dtype', 'cache', 'powerPreference']) {
    const v = options[k];
    if (k === 'device' && isGpuDevice(v)) continue;
    if (v !== undefined && v !== null && typeof v !== 'string') throw new Pt2WebError(`load(): options.${k} must be a string, got ${show(v)}`, 'INPUT');
  }
  if (options.cache != null && !CACHE_MODES.includes(options.cache)) throw new Pt2WebError(`load(): options.cache must be one of ${CACHE_MODES.join(', ')}, got ${show(options.cache)}`, 'INPUT');
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') throw new Pt2WebError(`load(): options.onProgress must be a function, got ${show(options.onProgress)}`, 'INPUT');
  const opset = options.expectedOpsetVersion;
  if (opset != null && (typeof opset !== 'object' || Array.isArray(opset) || !Object.values(opset).every(Number.isSafeInteger))) {
    throw new Pt2WebError(`load(): options.expectedOpsetVersion must be an object of integer versions by namespace ({aten: 10}), got ${show(opset)}`, 'INPUT');
  }
  return options;
}

async function loadModel(source, options) {
  await init();
  const wanted = options.device ?? 'auto';
  await choosePowerPreference('load()', options.powerPreference);
  let choice = await pickDevice(wanted);
  // 'auto' falls back when the device cannot be opened or cannot run the model (no
  // shader-f16, say), not when the archive is bad.
  const fallback = (e) => {
    const err = wrapError(e);
    if (wanted !== 'auto' || err.code !== 'DEVICE' || choice.device !== 'webgpu') throw err;
    choice = { device: 'cpu', reason: `fell back to the CPU backend: ${err.message}` };
  };
  const progress = progressOf(options.onProgress);
  const args = [options.program, options.weights, options.dtype, options.expectedOpsetVersion].map((v) => v ?? undefined);
  let opened = await openSource(source, options, progress);
  try {
    if (choice.device === 'webgpu') await openDevice().catch(fallback);
    for (;;) {
      try {
        return await modelOn(choice, opened, args, progress);
      } catch (e) {
        fallback(e);
        // A lazy stream is built again from what JS still holds (the weights a first build
        // released are fetched again); any other stream is spent by its first finish: the
        // archive is read again.
        if (opened.stream && !opened.stream.lazy) {
          opened.stream.free();
          opened = {};
          opened = await openSource(source, options, progress);
        }
      }
    }
  } finally {
    opened.stream?.free();
    // Nothing of the archive is read again: what JS still holds (the small records) goes.
    opened.stream?.lazy?.held.release(0, Number.MAX_SAFE_INTEGER);
  }
}

// The Model of an opened archive (`openSource`: its bytes, or a stream) on `choice`'s device.
// A lazy stream (a page's main thread, where nothing of the archive can be read
// synchronously) is built in steps, each weight read before its step (`inSteps`). Otherwise
// one call for the core (it decodes every weight, and on WebGPU uploads it), which needs
// every byte at hand: a Worker's cached file (read synchronously), bytes given to `load`.
async function modelOn(choice, { bytes, stream, size = bytes?.length }, args, progress) {
  if (stream?.lazy) return new Model(await inSteps(stream, choice.device, args, progress), choice);
  progress('upload', 0, size);
  try {
    let wasm;
    if (choice.device === 'webgpu') {
      wasm = await track(stream ? stream.finishGpu(...args) : WasmModel.loadGpu(bytes, ...args));
    } else {
      wasm = stream ? stream.finishCpu(...args) : new WasmModel(bytes, ...args);
    }
    progress('upload', size, size);
    return new Model(wasm, choice);
  } catch (e) {
    throw wrapError(e);
  }
}

// What `load` reads: a URL (not a file: one in Node) streamed where it can be (see
// `streamFromUrl`), anything else as bytes (`readSource`).
async function openSource(source, options, progress) {
  // An Archive opened by range requests has no bytes: its URL is streamed.
  if (source instanceof Archive && !source.bytes) source = source.url;
  const url = typeof source === 'string' || source instanceof URL ? new URL(source, baseUrl()) : null;
  // A threaded or relaxed build made before the streaming load has no WasmStreamingLoad.
  if (!url || url.protocol === 'file:' || !WasmStreamingLoad) return { bytes: await readSource(source, options) };
  return streamFromUrl(url, options.cache ?? (isNode ? 'none' : 'auto'), progress);
}
