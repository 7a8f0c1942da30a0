// The WebGPU soak of issue 17, run inside a page (`page.evaluate(soakInPage, args)`; so it is
// self-contained): `runs` runs of a model with a dynamic batch and sequence length, each
// with a random shape inside `[1, maxBatch] x [minSeq, maxSeq]` (within the exported range)
// and random token ids. Measured after the first tenth (warm-up) and at the end: the JS
// heap (`performance.memory`, after a GC where the page has `gc`) and pt2web's GPU memory
// (`gpu.memoryStats()`: live bytes, bytes held from the driver). Shared by
// tests/browser/hostile.test.mjs (a small count) and scripts/soak.sh (the full count).
import { WEBGPU_ARGS } from './chromium.mjs';

export async function soakInPage({ url, runs, maxBatch, minSeq, maxSeq, vocab, seed = 1 }) {
  const { load, gpu } = await import('/js/index.js');
  const model = await load(url, { device: 'webgpu' });
  if (model.device !== 'webgpu') throw new Error(`not on WebGPU: ${model.deviceNote}`);
  let s = seed >>> 0;
  const rand = (n) => Math.floor(((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32) * n);
  const measure = async () => {
    await gpu.synchronize();
    globalThis.gc?.();
    const m = gpu.memoryStats();
    return { heap: performance.memory?.usedJSHeapSize ?? NaN, allocated: m.allocated, driver: m.driverAllocated, buffers: m.buffersCreated };
  };
  const shapes = new Set();
  let warm;
  const t0 = performance.now();
  for (let i = 0; i < runs; i++) {
    if (i === Math.floor(runs / 10)) warm = await measure();
    const b = 1 + rand(maxBatch);
    const t = minSeq + rand(maxSeq - minSeq + 1);
    shapes.add(`${b}x${t}`);
    const ids = new BigInt64Array(b * t);
    for (let k = 0; k < ids.length; k++) ids[k] = BigInt(rand(vocab));
    const out = await model.run([{ data: ids, shape: [b, t] }]);
    // The first output (the logits), whatever pytree holds it.
    let logits = out;
    while (logits && !logits.shape) logits = Array.isArray(logits) ? logits[0] : Object.values(logits)[0];
    if (logits.shape[0] !== b || logits.shape[1] !== t || !Number.isFinite(logits.data[logits.data.length - 1])) {
      throw new Error(`run ${i}: [${b}, ${t}] gave shape [${logits.shape}]`);
    }
  }
  const ms = performance.now() - t0;
  const end = await measure();
  model.dispose();
  const MiB = 2 ** 20;
  return {
    runs,
    shapes: shapes.size,
    msPerRun: ms / runs,
    heapDeltaMiB: (end.heap - warm.heap) / MiB,
    gpuAllocatedDeltaMiB: (end.allocated - warm.allocated) / MiB,
    gpuDriverDeltaMiB: (end.driver - warm.driver) / MiB,
    gpuDriverMiB: end.driver / MiB,
    buffersCreatedAfterWarmUp: end.buffers - warm.buffers,
  };
}

/** Chromium's flags (tests/browser's, with SwiftShader WebGPU) plus exact JS heap sizes and a
 * page-visible `gc()` for the measures. */
export const SOAK_ARGS = [...WEBGPU_ARGS, '--enable-precise-memory-info', '--js-flags=--expose-gc'];

/** The soak's model: GPT-2's small test config (scripts/build_models.sh; input_ids [batch
 * 1..32, seq 2..256]), run at batches 1..4 and lengths 2..64 (SwiftShader is slow). */
export const SOAK_MODEL = { url: '/models/gpt2.core.pt2', maxBatch: 4, minSeq: 2, maxSeq: 64, vocab: 1000 };
