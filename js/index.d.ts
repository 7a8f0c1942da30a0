// Types for the `pt2web` npm package.

export type DType =
  | 'float32' | 'float64' | 'float16' | 'bfloat16'
  | 'int64' | 'int32' | 'int16' | 'int8' | 'uint8' | 'bool' | 'complex64' | 'complex128';

export type TypedArray =
  | Float32Array | Float64Array | BigInt64Array | Int32Array | Int16Array | Int8Array
  | Uint8Array | Uint16Array;

/** A tensor: row-major data and its shape. float16/bfloat16 use Uint16Array (raw bits),
 * int64 BigInt64Array, bool Uint8Array; complex64 / complex128 interleaved (re, im) pairs in a
 * Float32Array / Float64Array of 2 x numel values (give `dtype`: it is not inferred).
 * `dtype` is inferred from the array when omitted. */
export interface Tensor {
  data: TypedArray;
  shape: number[];
  dtype?: DType;
}

/** Inputs in the structure the program was exported with: nested arrays/objects of tensors. */
export type PyTree = Tensor | number | boolean | null | PyTree[] | { [key: string]: PyTree };

export interface TensorInfo { name: string; dtype: DType; shape: string[] }
export interface StateSummary { count: number; numel: number; bytes: number; bytes_by_dtype: Record<string, number> }
export interface ModelInfo {
  name: string;
  ir: string;
  torch_version: string | null;
  inputs: TensorInfo[];
  outputs: TensorInfo[];
  in_spec: string | null;
  out_spec: string | null;
  input_paths: string[];
  output_paths: string[];
  parameters: StateSummary;
  buffers: StateSummary;
  constants: StateSummary;
  buffer_mutations: string[];
  user_input_mutations: string[];
  dynamic_symbols: { name: string; min: number | null; max: number | null }[];
  range_constraints: Record<string, [number | null, number | null]>;
  op_histogram: Record<string, number>;
  num_nodes: number;
  /** The device the model runs on, and why it was chosen. */
  device: 'webgpu' | 'cpu';
  deviceNote: string;
  /** The CPU backend's threads (1 unless the page is cross-origin isolated), and why. */
  threads: number;
  threadsNote: string;
  /** The CPU backend's WebAssembly build: relaxed SIMD (fused multiply-adds) or plain simd128. */
  simd: 'relaxed' | 'simd128';
  specs: { inSpec: unknown; outSpec: unknown };
  /** torch's `module_call_graph`: the root module (fqn '') first, then its submodules; the
   * calling convention (`inSpec`, `outSpec`, `forwardArgNames`) where export kept one. */
  moduleCallGraph: ModuleCallEntry[];
}

export interface ModuleCallEntry {
  fqn: string;
  inSpec: unknown | null;
  outSpec: unknown | null;
  forwardArgNames: string[];
}

export interface LoadOptions {
  /** Default 'auto': WebGPU when available, otherwise the CPU backend (and `deviceNote` says
   * why). A GPUDevice the app owns: WebGPU on that device (as `gpu.fromExternalDevice`). */
  device?: 'webgpu' | 'cpu' | 'auto' | GPUDeviceLike;
  /** The adapter pt2web's WebGPU device opens on, when it is not open yet. */
  powerPreference?: 'high-performance' | 'low-power';
  /** Opset versions the program must have been exported with, by namespace (`{aten: 10}`),
   * as `torch.export.load(expected_opset_version=)`: a mismatch rejects with code VERSION. */
  expectedOpsetVersion?: Record<string, number>;
  /** The program to load from a multi-program archive. */
  program?: string;
  /** Called as loading goes on: `(loaded, total, {phase, loaded, total})`; `total` is 0 when
   * the size is unknown. Phases in order: 'download' (bytes from the network) or 'cache' (bytes
   * from the archive cache), 'upload' (0 then the archive's bytes: the weights decoded, and on
   * WebGPU uploaded), and with `prepare`, 'prepare' (0 of 1, then 1 of 1). */
  onProgress?: (loaded: number, total: number, progress: LoadProgress) => void;
  /** Keep archives loaded from URLs in a cache (default 'auto' in browsers and Workers, 'none'
   * in Node): 'auto' takes the Cache API where the context has one, else the origin private
   * file system (OPFS); 'cache-api' / 'opfs' name one. Keyed by URL and remembered with the
   * server's ETag, Last-Modified and size: a later load sends one HEAD request and, when they
   * still match, reads the bytes from the cache (none from the network); otherwise it downloads
   * again. Without a network, the cached copy is used. `clearCache` forgets. A server that
   * answers Range requests streams the archive: its central directory, then each entry's byte
   * range (requests of at most 32 MiB, a few at once), straight into the model, with no copy of
   * the whole archive in memory; a cached archive is read the same way, by slices. On WebGPU
   * each weight is read just before its upload (at most 64 MiB read ahead) and dropped after
   * it, so JS holds about one weight, not the archive; 'upload' progress then counts those
   * bytes. */
  cache?: 'auto' | 'none' | 'cache-api' | 'opfs';
  /** Prepare before resolving (see `Model.prepare`): `true` for the declared shapes (a
   * program with dynamic dims needs them given), or the shapes themselves. */
  prepare?: true | PrepareShapes;
  /** Quantize the weights of linear layers and embeddings at load, dequantized inside the
   * kernels: 'int8' (a scale per output row, ~0.28x the f32 bytes), 'int4' (a scale per 32
   * inputs, ~0.16x) or 'int4:GROUP'. Default 'f32': as the archive has them. */
  weights?: 'f32' | 'int8' | 'int4' | `int4:${number}`;
  /** Compute in this dtype. 'float16': the program's float32 work runs in float16 (weights
   * converted at load to half their bytes, activations in f16, accumulation, softmax and norm
   * statistics in f32; position math that only integers feed stays f32); inputs and outputs
   * stay float32. On WebGPU the adapter needs 'shader-f16': without it 'webgpu' rejects the
   * load with the reason, 'auto' falls back to the CPU backend (which computes f16 too, with
   * no speed gain). Default 'float32': as exported. */
  dtype?: 'float32' | 'float16' | 'f32' | 'f16';
}

export interface LoadProgress {
  phase: 'download' | 'cache' | 'upload' | 'prepare';
  loaded: number;
  /** 0 when unknown (a download without a Content-Length). */
  total: number;
}

/** Shapes for `Model.prepare`: by input name or in input order; sizes, a tensor (its shape
 * and dtype are used) or a number (int inputs). */
export type PrepareShapes =
  | Record<string, number[] | { shape: number[]; dtype?: DType } | number>
  | Array<number[] | { shape: number[]; dtype?: DType } | number>;

export interface PrepareStats {
  /** Wall time of prepare: the Plan, the meta pass and, on WebGPU, pipeline creation. */
  prepareMs: number;
  /** Of which creating the compute pipelines (WebGPU: until their asynchronous compilation,
   * `createComputePipelineAsync`, is done). */
  pipelinesMs: number;
  /** Of which the warm-up: the run's buffers cleared once and each new pipeline dispatched
   * once (one workgroup), so that the driver's work at a buffer's first use and a kernel's
   * first dispatch happens here, not in the first run. */
  warmUpMs: number;
  /** Pipelines the warm-up dispatched once (0 for a program with in-place ops). */
  firstDispatches: number;
  /** Of which waiting, at the end, for the GPU to finish what prepare created. */
  waitMs: number;
  /** Shapes whose kernel forms prepare timed to keep the fastest (autotuning: on hardware
   * adapters; 0 on software ones and for shapes already tuned on this device). */
  autotuned: number;
  /** Steps of the program's Plan (nodes of its graph). */
  planSteps: number;
  pipelinesCreated: number;
  bindGroupsCreated: number;
  /** Where the WebGPU prepare pass stopped early (a readback or a CPU fallback); null when
   * it reached the end. */
  stopped: string | null;
}

/**
 * An error from pt2web; the message is the one the Rust core wrote. `CANCELLED`: a run's
 * AbortSignal or timeout stopped it (the model stays usable); `DEVICE_LOST`: the WebGPU
 * device was lost (`gpu.open()` and loading the model again recover); `INTERNAL` with a
 * message saying the instance is poisoned: pt2web trapped and must be reloaded.
 */
export class Pt2WebError extends Error {
  readonly code: 'INPUT' | 'GUARD' | 'OP' | 'ARCHIVE' | 'LIMIT' | 'PICKLE' | 'SCHEMA' | 'VERSION'
    | 'TENSOR' | 'VERIFY' | 'SYM' | 'NO_SUCH_PROGRAM' | 'DEVICE' | 'DISPOSED' | 'INTERNAL'
    | 'GPU' | 'OUT_OF_MEMORY' | 'BUSY' | 'CANCELLED' | 'DEVICE_LOST' | string;
}

export interface GenerateOptions {
  /** At most this many new tokens (default 32). */
  maxNewTokens?: number;
  /** 0 (default): the most likely token; otherwise sample from the softmax at this temperature. */
  temperature?: number;
  /** Sample only among the K most likely tokens (and any tied with the K-th). */
  topK?: number;
  /** Sample only among the most likely tokens whose probabilities add up to P. */
  topP?: number;
  /** The sampler's seed: the same seed draws the same tokens (default 0). */
  seed?: number;
  /** Stop after this token id. */
  eos?: number;
  /** Called with each new token id as it arrives; a throw stops the loop. */
  onToken?: (id: number) => void;
  /** Stops the loop with code CANCELLED (before the next node of its current call). */
  signal?: AbortSignal;
}

export interface GenerateStats {
  /** The prompt's calls and the first token. */
  prefillMs: number;
  /** Tokens per second of the one-token calls (null when there were none). */
  decodeTokS: number | null;
  /** Bytes the last call read back from the GPU (0 on the CPU; 8 on WebGPU: the token is picked there). */
  readbackBytesPerToken: number;
}

/** A WebGPU `GPUDevice` (typed by @webgpu/types where installed). */
export type GPUDeviceLike = { createBuffer(...args: any[]): any; queue: object };

export interface StateView {
  keys(): string[];
  has(name: string): boolean;
  /** Replace a parameter, buffer or constant with `tensor` (its dtype and shape); the next run
   * reads it (on WebGPU written into the same GPU buffer). Refused (INPUT, with the reason)
   * for state the graph passes folded into constants at load (load after
   * `backends.set({graphPasses: 'none'})` to set it), state the graph does not read, and
   * state sharing its storage with other state. */
  set(name: string, tensor: Tensor): void;
  /** A copy of a parameter, buffer or constant as it is now: buffers show the mutations made
   * by runs. A promise: on WebGPU the state a run updates stays on the GPU and is read back
   * only when asked. */
  get(name: string): Promise<Tensor & { dtype: DType }>;
}

export interface Profile {
  /** `cat`: 'op' (CPU kernel), 'gpu' (GPU kernel, GPU timestamps), 'gpu-host' (GPU kernel on a
   * device without timestamp-query: the host time to encode it), 'fallback' (a CPU-fallback
   * node of a WebGPU run). */
  events: { node: string; target: string; start_ms: number; dur_ms: number; depth: number; cat: 'op' | 'gpu' | 'gpu-host' | 'fallback' }[];
  /** Time per op target, the most expensive first. */
  summary: { target: string; count: number; total_ms: number }[];
  /** Chrome trace event format (chrome://tracing, Perfetto): JSON.stringify it to a file. */
  chromeTrace: { traceEvents: ChromeTraceEvent[]; displayTimeUnit: 'ms'; otherData: { producer: string; device: string; gpuTiming: 'timestamp' | 'host' | null } };
  /** How GPU kernels were timed: 'timestamp' (GPU timestamps), 'host' (no timestamp-query), null (no GPU kernels). */
  gpuTiming: 'timestamp' | 'host' | null;
}

/** A complete event ("X") in microseconds; GPU kernels are on tid 2, CPU work on tid 1. */
export interface ChromeTraceEvent {
  name: string;
  cat: 'op' | 'gpu' | 'gpu-host' | 'fallback';
  ph: 'X';
  ts: number;
  dur: number;
  pid: number;
  tid: number;
  args: { node: string; depth: number; clock: 'gpu-timestamp' | 'host' };
}

export class Model {
  readonly info: ModelInfo;
  readonly device: 'webgpu' | 'cpu';
  readonly deviceNote: string;
  readonly state: StateView;
  /** Run with inputs in the exported structure: an array of positional inputs, an object of
   * keyword inputs, `{args, kwargs}`, or an object keyed by `info.inputs` names. */
  run(inputs: PyTree | { args?: PyTree[]; kwargs?: Record<string, PyTree> }, options?: RunOptions): Promise<any>;
  manualSeed(seed: number | bigint): void;
  startProfiler(): void;
  stopProfiler(): Profile | null;
  /** Counters of the last run on WebGPU; null for a CPU model. */
  lastRunStats(): RunStats | null;
  /** Generate tokens with a language model exported with a static KV cache (transformers'
   * `convert_and_export_with_cache`: `input_ids` and `cache_position`; or ExecuTorch's `tokens`
   * and `input_pos`). Ids in, ids out. Greedy by default; on WebGPU the argmax is taken on the
   * GPU and the KV cache stays there. Resolves to the new token ids. */
  generate(promptIds: ArrayLike<number>, options?: GenerateOptions): Promise<number[]>;
  /** Set by `generate`. */
  lastGenerateStats?: GenerateStats;
  /** Prepare for inputs of these shapes without running: the Plan and, on WebGPU, every
   * pipeline and bind group, so the first run compiles no shader. Omitted: the declared
   * (static) shapes. */
  prepare(shapes?: PrepareShapes, options?: { onProgress?: (done: number, total: number) => void; signal?: AbortSignal }): Promise<PrepareStats>;
  /** What the `prepare` load option did (set when it was given). */
  prepareStats?: PrepareStats;
  dispose(): void;
}

export interface RunOptions {
  /** WebGPU models: tensor outputs stay on the GPU as GpuTensors (nothing read back). */
  keepOnGpu?: boolean;
  /** Aborting it rejects the run with code CANCELLED (at once when already aborted; on
   * WebGPU as soon as it aborts; a CPU run, one synchronous call, checks it before it starts). */
  signal?: AbortSignal;
  /** Stop the run with code CANCELLED once it has taken this long (milliseconds). */
  timeoutMs?: number;
  /** The stream the run goes on (gpu.currentStream() by default). */
  stream?: GpuStream;
}

/** A tensor kept in WebGPU memory; also accepted as an input of `run`. */
export class GpuTensor {
  readonly id: number;
  readonly shape: number[];
  readonly dtype: DType;
  /** Strides and offset inside `buffer`, in 32-bit words. */
  readonly strides: number[];
  readonly offset: number;
  /** The GPUBuffer holding it (f32; int64/int32/int16/int8/uint8 as i32; bool as u32); owned by pt2web. */
  readonly buffer: any; // GPUBuffer (typed by @webgpu/types where installed)
  read(): Promise<Tensor & { dtype: DType }>;
  dispose(): void;
}

export interface RunStats {
  /** Command buffers submitted (1 when every op ran on the GPU). */
  submits: number;
  /** GPU buffers created from the driver during the run (pool misses). */
  bufferAllocations: number;
  pipelinesCreated: number;
  bindGroupsCreated: number;
  dispatches: number;
  /** Bytes of the storage buffers the dispatches bind, summed over dispatches: an upper
   * bound of what the kernels read and write. */
  boundBytes: number;
  /** Most bytes of pt2web's GPU buffers in use at once (weights included). */
  peakBytes: number;
  /** The largest kernel scratch buffer (a convolution's im2col columns). */
  workspaceBytes: number;
  gpuNodes: number;
  viewNodes: number;
  fallbackNodes: number;
  /** Ops that ran on the CPU backend, by target. */
  fallbacks: Record<string, number>;
  uploads: number;
  downloads: number;
  /** Bytes written to and read back from the GPU. State the run updates stays on the GPU
   * and is not read back (a decode step reads back its logits, not its KV cache). */
  uploadBytes: number;
  downloadBytes: number;
  /** Steps of the Plan the run walked. */
  planSteps: number;
  /** Host time of the run outside waits for the GPU (encoding, uploads, submits). */
  hostMs: number;
  /** Time spent waiting for the GPU (readbacks). */
  waitMs: number;
  /** Whether the run replayed the dispatches recorded from earlier identical runs (no
   * kernel code ran on the host; see the README's GPU backend section). */
  replayed: boolean;
  /** What became of the run for replaying: 'replayed', 'recorded: ...' or why not. */
  tape: string | null;
}

export interface GpuProperties {
  name: string;
  backend: string;
  deviceType: string;
  driver: string;
  driverInfo: string;
  vendor: number;
  features: string[];
  limits: Record<string, number>;
  recommendedMaxMemory: number;
  /** Whether the device was opened with timestamp-query (GPU times for events and the profiler). */
  timestamps: boolean;
}

export interface GpuMemoryStats {
  allocated: number;
  peak: number;
  driverAllocated: number;
  buffersCreated: number;
  limit: number | null;
  recommendedMax: number;
  /** torch.cuda.memory_stats' keys: 'allocated_bytes.all.current', 'num_ooms', ... */
  [torchKey: string]: number | null;
}

/** A frame of a memory history entry: the op (`name`) and node (`filename`); `line` is 0. */
export interface MemoryFrame { name: string; filename: string; line: number }

/** torch.cuda.memory._snapshot()'s layout (one device: device_traces[0]). */
export interface MemorySnapshot {
  segments: {
    device: number; address: number; total_size: number; allocated_size: number;
    active_size: number; requested_size: number; stream: number; segment_type: 'small' | 'large';
    blocks: { address: number; size: number; requested_size: number;
      state: 'active_allocated' | 'inactive'; frames: MemoryFrame[] }[];
  }[];
  device_traces: {
    action: 'alloc' | 'free_requested' | 'free_completed' | 'segment_alloc' | 'segment_free' | 'oom';
    addr: number; size: number; stream: number; time_us: number; frames: MemoryFrame[];
    device_free?: number;
  }[][];
}

/** A marker in the WebGPU queue (torch.mps.Event): `new gpu.Event({enableTiming: true})`. */
export class GpuEvent {
  constructor(options?: { enableTiming?: boolean });
  readonly enableTiming: boolean;
  /** 'gpu' (GPU timestamps), 'host' (host clock: no timestamp-query, or no device open), null before record(). */
  readonly timing: 'gpu' | 'host' | null;
  /** Mark the point after every piece of GPU work submitted so far (a run's work is submitted
   * by the time its promise settles: record after `await model.run(...)`). */
  record(): void;
  /** Whether the GPU has reached the event (never waits). */
  query(): boolean;
  synchronize(): Promise<void>;
  /** Milliseconds from this event to `end`; both need `enableTiming`. */
  elapsedTime(end: GpuEvent): Promise<number>;
  dispose(): void;
}

/** A stream on the WebGPU device (torch.cuda.Stream): an ordering domain over its one queue. */
export class GpuStream {
  constructor();
  /** 0 for the default stream. */
  readonly id: number;
  /** A stream over the app's own submits (gpu.getStreamFromExternal). */
  readonly external: boolean;
  /** Whether the runs on the stream (and the events it waited on) are done; never waits. */
  query(): boolean;
  synchronize(): Promise<void>;
  /** Record `event` (a new one when omitted) after the work submitted so far; returns it. */
  recordEvent(event?: GpuEvent): GpuEvent;
  waitEvent(event: GpuEvent): void;
  waitStream(other: GpuStream): void;
  equals(other: GpuStream): boolean;
}

export interface GpuCapability {
  /** WebGPU feature names pt2web can use ('shader-f16', 'timestamp-query', 'subgroups'). */
  features: string[];
  /** WebGPU limits by their camelCase names (maxBufferSize, maxComputeWorkgroupSizeX, ...). */
  limits: Record<string, number>;
}

export interface ShaderBinding {
  group: number;
  binding: number;
  name: string;
  /** 'storage, read' | 'storage, read_write' | 'uniform' | ... */
  access: string;
  /** Element type of the runtime-sized array: 'f32' | 'i32' | 'u32' | ... */
  elem: string;
}

export interface ShaderEntry {
  name: string;
  workgroupSize: [number, number, number];
  bindings: ShaderBinding[];
}

/** An argument of Shader.call: a tensor, or `{shape, dtype}` for a zero-filled one (an output). */
export type ShaderArg = Tensor | { shape: number[]; dtype?: DType };

export interface ShaderCallOptions {
  /** Workgroup counts [x, y, z] (or x); default: enough along x for the largest argument. */
  workgroups?: number | [number, number?, number?];
}

/** A WGSL compute shader validated by naga and compiled on the WebGPU device. */
export class Shader {
  readonly entries: ShaderEntry[];
  /** Bind `args` to the entry point's storage buffers in binding order and dispatch; resolves
   * to every argument's contents afterwards (outputs included). */
  call(entry: string, args: ShaderArg[], options?: ShaderCallOptions): Promise<(Tensor & { dtype: DType })[]>;
  call(args: ShaderArg[], options?: ShaderCallOptions): Promise<(Tensor & { dtype: DType })[]>;
  dispose(): void;
}

/** The shared WebGPU device (torch.mps-style). */
export const gpu: {
  /** Open the shared device now (loading a WebGPU model also opens it), on the adapter
   * `powerPreference` asks for. */
  open(options?: { powerPreference?: 'high-performance' | 'low-power' }): Promise<void>;
  /** WebGPU adapters pt2web can choose from: 1 where `navigator.gpu` gives one, else 0. */
  deviceCount(): Promise<number>;
  /** Run pt2web's WebGPU work on a GPUDevice the app owns (before the first WebGPU load);
   * `gpu.destroy()` then refuses: the app destroys its device. */
  fromExternalDevice(device: GPUDeviceLike): Promise<void>;
  /** Whether the shared device is open and not lost. */
  isOpen(): boolean;
  /** Destroy the shared device (`GPUDevice.destroy()`): its models reject with DEVICE_LOST;
   * `open()` and loading them again recover. */
  destroy(): void;
  /** The shared device's GPUDevice, for a page's own WebGPU work on pt2web's buffers. */
  webgpuDevice(): Promise<any>; // GPUDevice (typed by @webgpu/types where installed)
  Event: typeof GpuEvent;
  /** Open the WebGPU device now (torch.cuda.init). */
  init(): Promise<void>;
  /** Whether the WebGPU device was opened (torch.cuda.is_initialized). */
  isInitialized(): boolean;
  /** The current device index: 0 (a browser gives one adapter). */
  currentDevice(): number;
  /** 0 is fine; another index rejects with INPUT. */
  setDevice(index: number): Promise<void>;
  /** Run `fn` with device `index` current, the previous one after (torch.cuda.device). */
  device<T>(index: number, fn: () => Promise<T> | T): Promise<T>;
  /** 0 for a GpuTensor, 'cpu' for a host tensor. */
  deviceOf(t: GpuTensor | Tensor): 0 | 'cpu';
  getDeviceCapability(index?: number): Promise<GpuCapability>;
  /** The backends this build has: ['webgpu', 'cpu']. */
  getArchList(): Promise<string[]>;
  Stream: typeof GpuStream;
  currentStream(): GpuStream;
  defaultStream(): GpuStream;
  setStream(s: GpuStream): void;
  /** Run `fn` with `s` current, the previous stream after (torch.cuda.stream). */
  stream<T>(s: GpuStream, fn: () => Promise<T> | T): Promise<T>;
  /** A stream over the queue of the GPUDevice given to pt2web (the queue or the device). */
  getStreamFromExternal(queue: any): Promise<GpuStream>;
  /** Validate WGSL (naga; errors give the line) and compile it; WebGPU only (DEVICE error otherwise). */
  compileShader(source: string, options?: { device?: 'webgpu' | 'cpu' }): Promise<Shader>;
  isAvailable(): Promise<boolean>;
  properties(): Promise<GpuProperties>;
  memoryStats(): GpuMemoryStats | null;
  memoryStatsAsNestedDict(): Record<string, any> | null;
  resetAccumulatedMemoryStats(): void;
  /** [free, total] bytes, estimated (no memory query in WebGPU). */
  memGetInfo(): [number, number] | null;
  memoryReserved(): number;
  maxMemoryReserved(): number;
  recordMemoryHistory(enabled?: boolean, maxEntries?: number): Promise<void>;
  memorySnapshot(): MemorySnapshot | null;
  currentAllocatedMemory(): number;
  driverAllocatedMemory(): number;
  setPerProcessMemoryFraction(fraction: number): Promise<void>;
  emptyCache(): void;
  resetPeakMemoryStats(): void;
  synchronize(): Promise<void>;
  /** Seed every device's default generator, the CPU's and the WebGPU device's (torch.cuda.manual_seed_all). */
  manualSeedAll(seed: number | bigint): Promise<void>;
  /** Seed them from the clock (torch.cuda.seed_all); the seed. */
  seedAll(): Promise<bigint>;
  /** One 16-byte state per device, the CPU's first (torch.cuda.get_rng_state_all). */
  getRngStateAll(): Promise<Uint8Array[]>;
  /** Restore getRngStateAll()'s list (INPUT error naming the index or the count when malformed). */
  setRngStateAll(states: Uint8Array[]): Promise<void>;
  /** Profile every model's runs while `fn` runs (one trace for all models). */
  profile(fn: () => Promise<unknown> | unknown): Promise<ScopeProfile>;
  /** Whether a `profile` scope is open. */
  isCapturing(): boolean;
};

/** What `gpu.profile` captured: every model's kernels, times from the scope's start. */
export interface ScopeProfile {
  events: { model: string; device: 'cpu' | 'gpu'; node: string; op: string; start_ms: number; dur_ms: number; depth: number; cat: 'op' | 'gpu' | 'gpu-host' | 'fallback' }[];
  summary: { target: string; count: number; total_ms: number }[];
  /** One process per model (a `process_name` metadata event names it). */
  chromeTrace: { traceEvents: object[]; displayTimeUnit: 'ms'; otherData: { producer: string; models: string[] } };
}

/**
 * Load the WebAssembly module (`load` does it on first use). `threads`: the CPU backend's
 * threads, 'auto' (default: `navigator.hardwareConcurrency` on cross-origin isolated pages,
 * else 1) or a number; only the first call's options count.
 */
export function init(options?: { threads?: 'auto' | number }): Promise<void>;
/**
 * How the CPU backend got its threads: the multi-threaded build (`'threads'`) or not, and why;
 * and its SIMD: the relaxed-SIMD build where the engine validates relaxed SIMD, else simd128.
 */
export function cpuThreading(): {
  threads: number;
  build: 'threads' | 'single';
  reason: string;
  simd: 'relaxed' | 'simd128';
};
/** Bytes of pt2web's WebAssembly memory (0 before `init`); it grows and never shrinks. */
export function wasmMemoryBytes(): number;
export function load(source: string | URL | Response | ArrayBuffer | Uint8Array | Archive, options?: LoadOptions): Promise<Model>;
/** Forget cached archives (`LoadOptions.cache`): the one of `url`, or all when omitted.
 * Resolves to the number of stores that had something removed. */
export function clearCache(url?: string | URL): Promise<number>;
export type BackendName = 'cpu' | 'vulkan' | 'metal' | 'dx12' | 'gl' | 'webgpu';
export type GraphPass = 'functionalize' | 'noop' | 'dce' | 'attention' | 'cse' | 'qparams' | 'const_fold' | 'fold_bn' | 'fuse' | 'epilogue' | 'reinplace';

/** The backend switches (Rust's `pt2web::backends`); see the README's table. */
export interface BackendSwitches {
  allowF16ReducedPrecision: boolean;
  attention: 'math' | 'streaming';
  attentionKernel: 'auto' | 'row' | 'tiled';
  convAlgorithm: 'auto' | 'tiled' | 'blocked' | 'gemm';
  matmulAlgorithm: 'auto' | 'tiled' | 'blocked';
  rowAlgorithm: 'auto' | 'thread' | 'workgroup' | 'subgroup';
  autotune: 'auto' | 'on' | 'off';
  deterministic: boolean;
  /** The graph passes of models loaded from now on (set: 'all', 'none', a comma-separated
   * string or an array of names). */
  graphPasses: GraphPass[];
  /** torch's `torch.backends.opt_einsum`: the contraction order of einsum with 3+ operands
   * (`enabled: false`: left to right); `isAvailable` is always true (read only). */
  optEinsum: OptEinsum;
}

/** `backends.optEinsum` (torch's `torch.backends.opt_einsum`). */
export interface OptEinsum {
  enabled: boolean;
  /** 'optimal' searches every order (up to 8 operands, greedy beyond), 'greedy' takes the
   * pair that shrinks the operands most first, 'auto' is 'optimal' up to 5 operands. */
  strategy: 'auto' | 'greedy' | 'optimal';
  readonly isAvailable: boolean;
}

export const backends: {
  /** Every switch now, and `built`: the backends this build holds. */
  get(): Promise<BackendSwitches & { built: BackendName[] }>;
  set(switches: Partial<Omit<BackendSwitches, 'graphPasses' | 'optEinsum'>> & { graphPasses?: 'all' | 'none' | string | GraphPass[]; optEinsum?: Partial<Omit<OptEinsum, 'isAvailable'>> }): Promise<void>;
  /** torch's `torch.backends.cpu`: the WebAssembly build running. */
  cpu: { getCpuCapability(): Promise<'WASM_SIMD128' | 'WASM_RELAXED_SIMD' | 'DEFAULT'> };
  /** The verbose kernel log: one console line per kernel run; 0 turns it off. */
  setVerbose(level: number): Promise<void>;
  optEinsum: {
    get(): Promise<OptEinsum>;
    set(v: Partial<Omit<OptEinsum, 'isAvailable'>>): Promise<void>;
  };
  isBuilt(name: BackendName): Promise<boolean>;
  /** Built and usable here ('webgpu': an adapter is available). */
  isAvailable(name: BackendName): Promise<boolean>;
};

/** A `.pt2` archive read once: its programs and extra files (torch's PT2ArchiveReader).
 * Opened from a URL whose server answers Range requests (or from the archive cache), only its
 * directory and small records are read: `bytes` is then null and `load(archive)` streams `url`. */
export class Archive {
  readonly bytes: Uint8Array | null;
  /** The URL it was opened from (null for bytes or a Response). */
  readonly url: URL | null;
  programs(): string[];
  /** The extra files `torch.export.save(extra_files=...)` stored, by name. */
  extraFiles(): Record<string, Uint8Array>;
}
/** Open an archive (`options`: `cache` and `onProgress`, as `load`); `load` takes it too. */
export function openArchive(source: string | URL | Response | ArrayBuffer | Uint8Array | Archive, options?: Pick<LoadOptions, 'cache' | 'onProgress'>): Promise<Archive>;
/** The program names of an archive. */
export function listPrograms(archive: Archive | string | URL | Response | ArrayBuffer | Uint8Array): Promise<string[]>;

export function tensor(data: TypedArray, shape?: number[], dtype?: DType): Tensor;
export function isPt2Package(bytes: ArrayBuffer | Uint8Array): Promise<boolean>;
export function programNames(source: string | URL | Response | ArrayBuffer | Uint8Array): Promise<string[]>;
