// Hostile calls and the soak of issue 17, shared by the Node tests (a small count) and
// scripts/soak.sh (the full count). The model: dyn_batch (x: float32 [batch 1..64, 16]).

/** Calls of `model.run` that must reject with a Pt2WebError of `code` whose message matches
 * `re` (every one names the input 'x' where there is one). `x`: a good input tensor. */
export function badCalls(x) {
  const [b] = x.shape;
  const n = x.data.length;
  const f32 = (len) => new Float32Array(len);
  const detached = () => {
    const a = new Float32Array(n);
    structuredClone(a.buffer, { transfer: [a.buffer] });
    return a;
  };
  const shapes = [
    ['NaN size', [NaN, 16]], ['negative size', [-1, 16]], ['fractional size', [1.5, 16]],
    ['Infinity', [Infinity, 16]], ['2^53', [2 ** 53, 16]], ['string size', ['4', 16]],
    ['null size', [null, 16]], ['huge BigInt size', [2n ** 70n, 16]], ['negative BigInt', [-1n, 16]],
  ];
  const cases = [
    ...shapes.map(([label, shape]) => ({ label, inputs: [{ data: x.data, shape }], code: 'INPUT', re: /'x'.*size .* of dim 0/ })),
    { label: 'shape not an array', inputs: [{ data: x.data, shape: 64 }], code: 'INPUT', re: /'x'.*shape must be an array/ },
    { label: 'shape missing', inputs: [{ data: x.data }], code: 'INPUT', re: /'x'.*shape must be an array/ },
    { label: 'huge shape, few bytes', inputs: [{ data: x.data, shape: [2 ** 31, 2 ** 31] }], code: 'INPUT', re: /'x'/ },
    { label: 'short data', inputs: [{ data: f32(n - 1), shape: x.shape }], code: 'INPUT', re: /'x'.*needs \d+ elements/ },
    { label: 'long data', inputs: [{ data: f32(n + 1), shape: x.shape }], code: 'INPUT', re: /'x'.*needs \d+ elements/ },
    { label: 'detached buffer', inputs: [{ data: detached(), shape: x.shape }], code: 'INPUT', re: /'x'.*detached/ },
    { label: 'rank 3', inputs: [{ data: x.data, shape: [b, 4, 4] }], code: 'INPUT', re: /'x'.*rank 2/ },
    { label: 'guard: dim 1', inputs: [{ data: f32(b * 15), shape: [b, 15] }], code: 'GUARD', re: /'x' dimension 1/ },
    { label: 'guard: batch 0', inputs: [{ data: f32(0), shape: [0, 16] }], code: 'GUARD', re: /'x' dimension 0/ },
    { label: 'a Number for a tensor', inputs: [42], code: 'INPUT', re: /'x': expected a tensor of float32.*number 42/ },
    { label: 'a BigInt for a tensor', inputs: [42n], code: 'INPUT', re: /'x': expected a tensor of float32.*bigint 42n/ },
    { label: 'a boolean for a tensor', inputs: [true], code: 'INPUT', re: /'x': expected a tensor/ },
    { label: 'a string', inputs: ['x'], code: 'INPUT', re: /'x': expected a tensor/ },
    { label: 'null', inputs: [null], code: 'INPUT', re: /'x': expected a tensor/ },
    { label: 'a bare typed array', inputs: [x.data], code: 'INPUT', re: /'x': expected a tensor/ },
    { label: 'a plain array of numbers', inputs: [{ data: Array.from(x.data), shape: x.shape }], code: 'INPUT', re: /'x'.*not a typed array/ },
    { label: 'BigInt64Array for float32', inputs: [{ data: new BigInt64Array(n), shape: x.shape }], code: 'INPUT', re: /'x': expected dtype float32/ },
    { label: 'Float64Array for float32', inputs: [{ data: new Float64Array(n), shape: x.shape }], code: 'INPUT', re: /'x': expected dtype float32/ },
    { label: 'a DataView', inputs: [{ data: new DataView(x.data.buffer), shape: x.shape }], code: 'INPUT', re: /'x': unsupported data type DataView/ },
    { label: 'unknown dtype string', inputs: [{ data: x.data, shape: x.shape, dtype: 'float33' }], code: 'INPUT', re: /'x'.*float33/ },
    { label: 'dtype __proto__', inputs: [{ data: x.data, shape: x.shape, dtype: '__proto__' }], code: 'INPUT', re: /'x'.*__proto__/ },
    { label: 'dtype a number', inputs: [{ data: x.data, shape: x.shape, dtype: 32 }], code: 'INPUT', re: /'x': dtype must be a string/ },
    { label: 'dtype against its array', inputs: [{ data: x.data, shape: x.shape, dtype: 'int32' }], code: 'INPUT', re: /'x': dtype int32 needs a Int32Array/ },
    { label: 'missing input', inputs: {}, code: 'INPUT', re: /'x': missing/ },
    { label: 'extra input', inputs: { x, y: x }, code: 'INPUT', re: /'y': not an input/ },
    { label: 'two inputs', inputs: [x, x], code: 'INPUT', re: /expected 1 items, got 2/ },
    { label: 'no inputs', inputs: [], code: 'INPUT', re: /expected 1 items, got 0/ },
    { label: 'inputs a string', inputs: 'x', code: 'INPUT', re: /inputs must be/ },
    { label: 'inputs undefined', inputs: undefined, code: 'INPUT', re: /inputs must be/ },
    { label: 'options a string', inputs: [x], options: 'fast', code: 'INPUT', re: /options must be an object/ },
    { label: 'signal not a signal', inputs: [x], options: { signal: 'stop' }, code: 'INPUT', re: /signal must be an AbortSignal/ },
    { label: 'negative timeout', inputs: [x], options: { timeoutMs: -1 }, code: 'INPUT', re: /timeoutMs/ },
    { label: 'NaN timeout', inputs: [x], options: { timeoutMs: NaN }, code: 'INPUT', re: /timeoutMs/ },
    { label: 'BigInt timeout', inputs: [x], options: { timeoutMs: 5n }, code: 'INPUT', re: /timeoutMs/ },
    { label: 'keepOnGpu on the CPU', inputs: [x], options: { keepOnGpu: true }, code: 'INPUT', re: /keepOnGpu/ },
  ];
  return cases;
}

/** A Pt2WebError INTERNAL saying pt2web's instance is poisoned (it trapped). */
export const isPoisoned = (e) => e?.name === 'Pt2WebError' && e.code === 'INTERNAL' && /poisoned \(.*\) and cannot run anything more: reload pt2web/.test(e.message);

const heapMiB = () => process.memoryUsage().heapUsed / 2 ** 20;
const rssMiB = () => process.memoryUsage().rss / 2 ** 20;

/**
 * `calls` calls of dyn_batch's `run` in Node, mixed: every fourth a good one, with one of
 * `goods` (`[{input, output}]`: PyTorch's io cases, batches 1 to 64) at random, checked
 * against PyTorch's output; the others bad ones from `badCalls`, each of which must reject
 * with its typed error. Memory (JS heap after a GC where `--expose-gc` allows, RSS, pt2web's
 * wasm memory) is measured after the first tenth (warm-up) and at the end. Returns the
 * counts and the deltas (MiB).
 */
export async function soakNode({ model, api, goods, calls, seed = 1 }) {
  const { Pt2WebError, wasmMemoryBytes } = api;
  let s = seed >>> 0;
  const rand = () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
  const cases = badCalls(goods[0].input);
  const counts = { good: 0, bad: 0, typed: 0 };
  const gc = () => globalThis.gc?.();
  let warm;
  const measure = () => { gc(); return { heap: heapMiB(), rss: rssMiB(), wasm: wasmMemoryBytes() / 2 ** 20 }; };
  for (let i = 0; i < calls; i++) {
    if (i === Math.floor(calls / 10)) warm = measure();
    if (i % 4 === 0) {
      const { input, output } = goods[Math.floor(rand() * goods.length)];
      const got = (await model.run([input]))[0].data;
      for (let k = 0; k < output.data.length; k++) {
        const want = output.data[k];
        if (!(Math.abs(got[k] - want) <= 1e-4 + 1e-4 * Math.abs(want))) {
          throw new Error(`call ${i}: batch ${input.shape[0]}: output ${k} is ${got[k]}, PyTorch ${want}`);
        }
      }
      counts.good++;
      continue;
    }
    const c = cases[Math.floor(rand() * cases.length)];
    counts.bad++;
    try {
      await model.run(c.inputs, c.options);
      throw new Error(`call ${i}: ${c.label} did not fail`);
    } catch (e) {
      if (!(e instanceof Pt2WebError) || e.code !== c.code || !c.re.test(e.message)) {
        throw new Error(`call ${i}: ${c.label}: expected a Pt2WebError ${c.code} matching ${c.re}, got ${e?.name} ${e?.code}: ${e?.message}`);
      }
      counts.typed++;
    }
  }
  const end = measure();
  return {
    ...counts,
    calls,
    heapDeltaMiB: end.heap - warm.heap,
    rssDeltaMiB: end.rss - warm.rss,
    wasmDeltaMiB: end.wasm - warm.wasm,
    wasmMiB: end.wasm,
  };
}

/** dyn_batch's io cases from PyTorch: `[{input, output}]` (batches 1, 17, 64 and the example). */
export function dynBatchGoods(readSafetensors, fixtures) {
  return ['', '.b1', '.b17', '.b64'].map((sfx) => {
    const io = readSafetensors(`${fixtures}/dyn_batch.io${sfx}.safetensors`);
    return { input: io.input_0, output: io.output_0 };
  });
}
