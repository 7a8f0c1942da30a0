// The npm package and the demo page in a real browser: Debian chromium driven by playwright-core.
// WebGPU is SwiftShader (flags from DESIGN.md). Suites run on both devices: 'webgpu' (wgpu's
// WebGPU backend, ops without a GPU kernel on the CPU backend) and 'cpu' (WASM SIMD).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { chromiumSuite } from './chromium.mjs';
import { ROOT, metas } from '../js/helpers.mjs';
import { runFixtureInPage } from './fixture_page.mjs';

const suite = chromiumSuite();
const newPage = (init) => suite.newPage(init);

for (const device of ['webgpu', 'cpu']) {
  test(`the fixture suite runs in Chromium on ${device} and matches PyTorch`, async () => {
    const { page, errors } = await newPage();
    let cases = 0;
    for (const [stem, meta] of metas()) {
      cases += await page.evaluate(runFixtureInPage, { stem, archive: meta.archive, programs: meta.programs, device });
    }
    assert.ok(cases > 30, `${cases} cases`);
    assert.deepEqual(errors, []);
  });

  test(`the op suite runs in Chromium on ${device} (every family, both IRs) and matches PyTorch`, async () => {
    const { page } = await newPage();
    const fams = readdirSync(path.join(ROOT, 'tests', 'fixtures', 'ops')).filter((f) => f.endsWith('.cases.json')).map((f) => f.replace('.cases.json', '')).sort();
    let total = 0;
    for (const fam of fams) {
      const r = await page.evaluate(async ({ fam, device }) => {
        const { load } = await import('/js/index.js');
        const st = await import('/tests/js/st.mjs');
        const fetchBytes = async (rel) => new Uint8Array(await (await fetch(`/fixtures/${rel}`)).arrayBuffer());
        return st.runOpFamily(load, fam, fetchBytes, device);
      }, { fam, device });
      console.log(`# ${device} ${fam}: ${r.passed} passed, ${r.failures.length} failed`);
      assert.deepEqual(r.failures, [], fam);
      total += r.passed;
    }
    assert.ok(total > 900, `${total} op cases`);
  });
}

// PyTorch's OpInfo samples (.cache/opinfo, tests/fixgen/gen_opinfo.py) in Chromium: every
// OPINFO_STRIDE-th entry (sorted by name), all its programs (both IRs) on WebGPU. A pass
// rate with a floor (a ratchet, as tests/opinfo.rs has for the CPU and lavapipe; measured 98.6%).
const OPINFO_STRIDE = 8;
const OPINFO_BROWSER_FLOOR = 0.97;
test('a sample of PyTorch\'s OpInfo programs runs in Chromium on WebGPU and matches PyTorch', async (t) => {
  const dir = path.join(ROOT, '.cache', 'opinfo');
  if (!existsSync(path.join(dir, 'summary.json'))) {
    assert.notEqual(process.env.PT2WEB_REQUIRE_MODELS, '1', `no ${dir}: run scripts/build_models.sh`);
    t.skip(`no ${dir} (run scripts/build_models.sh)`);
    return;
  }
  const entries = readdirSync(dir).filter((f) => f.endsWith('.cases.json')).map((f) => f.replace('.cases.json', '')).sort()
    .filter((_, i) => i % OPINFO_STRIDE === 0);
  const { page } = await newPage();
  let passed = 0;
  let total = 0;
  const failures = [];
  for (const entry of entries) {
    const r = await page.evaluate(async ({ entry }) => {
      const { load } = await import('/js/index.js');
      const st = await import('/tests/js/st.mjs');
      const fetchBytes = async (rel) => new Uint8Array(await (await fetch(`/${rel}`)).arrayBuffer());
      return st.runOpFamily(load, entry, fetchBytes, 'webgpu', 'opinfo');
    }, { entry });
    passed += r.passed;
    total += r.passed + r.failures.length;
    failures.push(...r.failures.map((f) => `${entry}/${f}`));
  }
  const rate = passed / Math.max(total, 1);
  console.log(`# OpInfo in Chromium (WebGPU): ${passed}/${total} programs of ${entries.length} entries match PyTorch (${(100 * rate).toFixed(1)}%)`);
  for (const f of failures) console.log(`#   ${f.slice(0, 200)}`);
  assert.ok(total > 100, `${total} programs`);
  assert.ok(rate >= OPINFO_BROWSER_FLOOR, `pass rate ${(100 * rate).toFixed(1)}% is under the floor ${100 * OPINFO_BROWSER_FLOOR}%`);
});

test('auto picks WebGPU where Chromium has an adapter', async () => {
  const { page, errors } = await newPage();
  const r = await page.evaluate(async () => {
    const { load, gpu } = await import('/js/index.js');
    const m = await load('/fixtures/mlp_train.pt2');
    return { device: m.device, note: m.deviceNote, props: await gpu.properties() };
  });
  assert.equal(r.device, 'webgpu', r.note);
  assert.equal(r.props.backend, 'webgpu');
  console.log(`# adapter: ${JSON.stringify(r.props)}`);
  assert.deepEqual(errors, []);
});

test('WebGPU prepare: pipelines created before the first run, same outputs, clear errors', async () => {
  // Each page has its own WebGPU device (and pipeline cache): one prepares, one does not.
  const input = () => Array.from({ length: 5 * 16 }, (_, i) => Math.cos(i));
  const plainPage = await newPage();
  const plain = await plainPage.page.evaluate(async (xs) => {
    const { load, tensor } = await import('/js/index.js');
    const m = await load('/fixtures/dyn_batch.pt2', { device: 'webgpu' });
    const out = (await m.run([tensor(Float32Array.from(xs), [5, 16])]))[0];
    const stats = m.lastRunStats();
    m.dispose();
    return { data: Array.from(out.data), stats };
  }, input());
  const { page, errors } = await newPage();
  const r = await page.evaluate(async ({ xs, want }) => {
    const { load, tensor, Pt2WebError } = await import('/js/index.js');
    const x = [tensor(Float32Array.from(xs), [5, 16])];
    // Dynamic batch: `prepare: true` cannot guess it and says so; the shapes do.
    let noShape = null;
    try { await load('/fixtures/dyn_batch.pt2', { device: 'webgpu', prepare: true }); } catch (e) { noShape = `${e instanceof Pt2WebError} ${e.code} ${e.message}`; }
    const progress = [];
    const m = await load('/fixtures/dyn_batch.pt2', { device: 'webgpu', prepare: { x: [5, 16] }, onProgress: (a, b) => progress.push([a, b]) });
    const prep = m.prepareStats;
    const got = (await m.run(x))[0];
    const first = m.lastRunStats();
    let guard = null;
    try { await m.prepare({ x: [65, 16] }); } catch (e) { guard = `${e instanceof Pt2WebError} ${e.code}`; }
    const outs = [got];
    const replays = [];
    for (let i = 0; i < 7; i++) { outs.push((await m.run(x))[0]); replays.push(m.lastRunStats().tape); }
    const last = m.lastRunStats();
    const same = outs.every((o) => o.data.every((v, i) => v === want[i]));
    m.dispose();
    return { noShape, prep, first, last, same, guard, replays, lastProgress: progress[progress.length - 1] };
  }, { xs: input(), want: plain.data });
  console.log(`# prepare ${JSON.stringify(r.prep)}; first run ${JSON.stringify(r.first)}; unprepared first run ${JSON.stringify(plain.stats)}; 8th run ${JSON.stringify(r.last)}; replayed ${r.replays}`);
  assert.match(r.noShape, /^true INPUT .*'x'.*dynamic/);
  assert.ok(r.prep.pipelinesCreated > 0 && r.prep.planSteps > 0 && r.prep.stopped === null, JSON.stringify(r.prep));
  assert.equal(r.first.pipelinesCreated, 0, 'the first run after prepare compiles no shader');
  assert.ok(plain.stats.pipelinesCreated > 0, 'an unprepared first run does');
  assert.equal(r.first.planSteps, r.prep.planSteps);
  assert.ok(r.first.hostMs >= 0 && r.first.waitMs >= 0, JSON.stringify(r.first));
  assert.ok(r.same, 'prepared, replayed and unprepared runs give the same outputs');
  assert.equal(r.last.replayed, true, `the last runs replay the recorded dispatches (${r.replays})`);
  assert.equal(r.guard, 'true GUARD');
  assert.deepEqual(r.lastProgress, [1, 1]);
  assert.deepEqual(errors, []);
  assert.deepEqual(plainPage.errors, []);
});

test('WebGPU device API: memory statistics, memory limit, synchronize, dispose frees', async () => {
  const { page, errors } = await newPage();
  const r = await page.evaluate(async () => {
    const { load, gpu, tensor, Pt2WebError } = await import('/js/index.js');
    const m = await load('/fixtures/dyn_batch.pt2', { device: 'webgpu' });
    const afterLoad = gpu.memoryStats();
    const x = [tensor(new Float32Array(64 * 16).fill(0.5), [64, 16])];
    const y1 = (await m.run(x))[0];
    await gpu.synchronize();
    const afterRun = gpu.memoryStats();
    const stats = m.lastRunStats();
    // A limit below what is live: the next allocation fails cleanly, the model stays usable.
    await gpu.setPerProcessMemoryFraction(Math.max(afterRun.allocated, 1) / afterRun.recommendedMax);
    let oom = null;
    try { await m.run(x); } catch (e) { oom = `${e instanceof Pt2WebError} ${e.code}`; }
    await gpu.setPerProcessMemoryFraction(1);
    const y2 = (await m.run(x))[0];
    const same = y1.data.every((v, i) => v === y2.data[i]);
    m.dispose();
    await gpu.synchronize();
    const afterDispose = gpu.memoryStats();
    return { afterLoad, afterRun, afterDispose, oom, same, stats };
  });
  console.log(`# ${JSON.stringify(r)}`);
  assert.ok(r.afterLoad.allocated > 0, 'weights live on the GPU after load');
  assert.ok(r.afterRun.peak >= r.afterRun.allocated);
  assert.equal(r.oom, 'true OUT_OF_MEMORY');
  assert.ok(r.same, 'the model runs after an out-of-memory error with the same result');
  assert.ok(r.afterDispose.allocated < r.afterLoad.allocated, 'dispose releases the weights');
  assert.ok(r.afterDispose.driverAllocated <= r.afterRun.driverAllocated, 'dispose returns cached buffers');
  assert.ok(r.stats.gpuNodes > 0 && r.stats.submits >= 1, JSON.stringify(r.stats));
  assert.deepEqual(errors, []);
});

test('WebGPU: outputs kept on the GPU feed the next run and read back the same values', async () => {
  const { page, errors } = await newPage();
  const r = await page.evaluate(async () => {
    const { load, tensor, GpuTensor } = await import('/js/index.js');
    const bytes = new Uint8Array(await (await fetch('/fixtures/ops/elementwise.pt2')).arrayBuffer());
    const m = await load(bytes, { device: 'webgpu', program: 'unary_trig' });
    const x = [tensor(Float32Array.from({ length: 15 }, (_, i) => Math.sin(i)), [3, 5])];
    const cpuOut = await m.run(x);
    const kept = await m.run(x, { keepOnGpu: true });
    const keptStats = m.lastRunStats();
    const g = kept[0];
    const isGpu = g instanceof GpuTensor;
    const shape = g.shape;
    const buf = g.buffer;
    const back = await g.read();
    const same = back.data.every((v, i) => v === cpuOut[0].data[i]);
    // Fed back without a copy, and the same as feeding its values from the CPU.
    const viaGpu = await m.run([g]);
    const viaCpu = await m.run([back]);
    const chained = viaGpu.every((t, k) => t.data.every((v, i) => v === viaCpu[k].data[i]));
    g.dispose();
    let disposed = null;
    try { await g.read(); } catch (e) { disposed = e.code; }
    return { isGpu, shape, bufIsGpu: buf.constructor.name, same, chained, downloads: keptStats.downloads, disposed };
  });
  assert.ok(r.isGpu);
  assert.deepEqual(r.shape, [3, 5]);
  assert.equal(r.bufIsGpu, 'GPUBuffer');
  assert.ok(r.same, 'a kept output reads back the values of a normal run');
  assert.ok(r.chained, 'a GpuTensor input gives the same outputs as its values from the CPU');
  assert.equal(r.downloads, 0, 'nothing was read back during the keepOnGpu run');
  assert.equal(r.disposed, 'DISPOSED');
  assert.deepEqual(errors, []);
});

test('WebGPU events: elapsed time around real runs (GPU timestamps or the host clock)', async () => {
  const { page, errors } = await newPage();
  const r = await page.evaluate(async () => {
    const { load, gpu, tensor, GpuEvent } = await import('/js/index.js');
    const m = await load('/fixtures/dyn_batch.pt2', { device: 'webgpu' });
    const x = [tensor(Float32Array.from({ length: 64 * 16 }, (_, i) => Math.sin(i)), [64, 16])];
    await m.run(x); // warm-up: pipelines
    const start = new gpu.Event({ enableTiming: true });
    const end = new gpu.Event({ enableTiming: true });
    start.record();
    for (let i = 0; i < 5; i++) await m.run(x);
    end.record();
    await end.synchronize();
    const done = end.query();
    const ms = await start.elapsedTime(end);
    // Nothing in between: a short interval, never negative.
    const a = new gpu.Event({ enableTiming: true });
    const b = new gpu.Event({ enableTiming: true });
    a.record();
    b.record();
    const empty = await a.elapsedTime(b);
    const plain = new gpu.Event();
    plain.record();
    await plain.synchronize();
    let noTiming = null;
    try { await plain.elapsedTime(end); } catch (e) { noTiming = e.code; }
    const props = await gpu.properties();
    return { ms, empty, timing: start.timing, endTiming: end.timing, done, noTiming, timestamps: props.timestamps, isClass: start instanceof GpuEvent, features: props.features };
  });
  console.log(`# events: 5 runs of dyn_batch [64,16] ${r.ms.toFixed(3)} ms, empty interval ${r.empty.toFixed(3)} ms, timing '${r.timing}' (timestamp-query ${r.timestamps ? 'available' : 'not available'}; features ${r.features.join(', ')})`);
  assert.ok(r.isClass);
  assert.equal(r.timing, r.timestamps ? 'gpu' : 'host');
  assert.equal(r.endTiming, r.timing);
  assert.ok(r.done, 'query() after synchronize()');
  assert.ok(r.ms > 0, `elapsed ${r.ms} ms`);
  assert.ok(r.empty >= 0 && r.empty <= r.ms, `empty interval ${r.empty} ms`);
  assert.equal(r.noTiming, 'INPUT');
  assert.deepEqual(errors, []);
});

test('WebGPU compileShader: a user WGSL kernel computes y = 2x + 1; a broken one rejects with its line', async () => {
  const { page, errors } = await newPage();
  const r = await page.evaluate(async () => {
    const { gpu, tensor, Pt2WebError, Shader } = await import('/js/index.js');
    const src = [
      '@group(0) @binding(0) var<storage, read> x: array<f32>;',
      '@group(0) @binding(1) var<storage, read_write> y: array<f32>;',
      '@compute @workgroup_size(64) fn affine(@builtin(global_invocation_id) i: vec3<u32>) {',
      '  if i.x < arrayLength(&y) { y[i.x] = 2.0 * x[i.x] + 1.0; }',
      '}',
    ].join('\n');
    const k = await gpu.compileShader(src);
    const xs = Float32Array.from({ length: 300 }, (_, i) => Math.sin(i) * 10);
    const [xBack, y] = await k.call('affine', [tensor(xs, [300]), { shape: [300], dtype: 'float32' }], { workgroups: [5, 1, 1] });
    // The entry point may be omitted (one entry) and the workgroups default to cover the data.
    const [, y2] = await k.call([tensor(xs.subarray(0, 70), [70]), { shape: [70] }]);
    const want = Array.from(xs, (v) => Math.fround(Math.fround(2 * v) + 1));
    const intK = await gpu.compileShader(`
      @group(0) @binding(0) var<storage, read_write> v: array<i32>;
      @compute @workgroup_size(8) fn inc(@builtin(global_invocation_id) i: vec3<u32>) {
        if i.x < arrayLength(&v) { v[i.x] = v[i.x] * 3 - 1; }
      }`);
    const [iv] = await intK.call('inc', [tensor(new Int32Array([1, -2, 7, 100]), [4])]);
    let bad = null;
    try {
      await gpu.compileShader(src.replace('2.0 * x[i.x] + 1.0;', '2.0 * x[i.x] + 1.0'));
    } catch (e) { bad = { isErr: e instanceof Pt2WebError, code: e.code, message: e.message }; }
    let badType = null;
    try {
      await gpu.compileShader(src.replace('y[i.x] = 2.0 * x[i.x] + 1.0;', 'y[i.x] = 2 * x[i.x] + true;'));
    } catch (e) { badType = { code: e.code, message: e.message }; }
    let wrongArgs = null;
    try { await k.call('affine', [tensor(xs, [300])]); } catch (e) { wrongArgs = `${e.code}: ${e.message}`; }
    let cpu = null;
    try { await gpu.compileShader(src, { device: 'cpu' }); } catch (e) { cpu = `${e.code}: ${e.message}`; }
    return {
      isShader: k instanceof Shader, entries: k.entries, xSame: xBack.data.every((v, i) => v === xs[i]),
      y: Array.from(y.data), y2: Array.from(y2.data), want, iv: Array.from(iv.data), bad, badType, wrongArgs, cpu,
    };
  });
  assert.ok(r.isShader);
  assert.deepEqual(r.entries.map((e) => [e.name, e.workgroupSize, e.bindings.map((b) => `${b.name} ${b.access} ${b.elem}`)]),
    [['affine', [64, 1, 1], ['x storage, read f32', 'y storage, read_write f32']]]);
  assert.ok(r.xSame);
  assert.deepEqual(r.y, r.want);
  assert.deepEqual(r.y2, r.want.slice(0, 70));
  assert.deepEqual(r.iv, [2, -7, 20, 299]);
  console.log(`# broken shader: ${r.bad?.message.split('\n')[0]}`);
  assert.ok(r.bad?.isErr, JSON.stringify(r.bad));
  assert.equal(r.bad.code, 'GPU');
  assert.match(r.bad.message, /line [45]\b/);
  console.log(`# ill-typed shader: ${r.badType?.message.split('\n')[0]}`);
  assert.match(r.badType?.message ?? '', /line 4\b/);
  assert.match(r.wrongArgs, /INPUT|GPU/);
  assert.match(r.wrongArgs, /takes 2 tensors/);
  assert.match(r.cpu, /^DEVICE: .*WebGPU only/);
  assert.deepEqual(errors, []);
});

test('WebGPU profiler: per-kernel GPU times and a Chrome trace with GPU kernel events', async () => {
  const { page, errors } = await newPage();
  const r = await page.evaluate(async () => {
    const { load, tensor } = await import('/js/index.js');
    const m = await load('/fixtures/dyn_batch.pt2', { device: 'webgpu' });
    const x = [tensor(Float32Array.from({ length: 64 * 16 }, (_, i) => Math.cos(i)), [64, 16])];
    await m.run(x);
    m.startProfiler();
    await m.run(x);
    const p = m.stopProfiler();
    return { text: JSON.stringify(p.chromeTrace), gpuTiming: p.gpuTiming, summary: p.summary, nEvents: p.events.length, stats: m.lastRunStats() };
  });
  const trace = JSON.parse(r.text);
  const evs = trace.traceEvents;
  assert.equal(evs.length, r.nEvents);
  assert.ok(evs.every((e) => e.ph === 'X' && Number.isFinite(e.ts) && Number.isFinite(e.dur) && e.dur >= 0 && typeof e.name === 'string'));
  const kernels = evs.filter((e) => e.cat === 'gpu' || e.cat === 'gpu-host');
  const positive = kernels.filter((e) => e.dur > 0).length;
  console.log(`# profiler on WebGPU: GPU kernels timed by '${r.gpuTiming}', ${kernels.length} kernel events (${positive} with positive duration), ${evs.length - kernels.length} other; top ${JSON.stringify(r.summary.slice(0, 3))}`);
  assert.ok(r.gpuTiming === 'timestamp' || r.gpuTiming === 'host');
  assert.equal(trace.otherData.gpuTiming, r.gpuTiming);
  assert.equal(trace.otherData.device, 'webgpu');
  assert.ok(kernels.length >= r.stats.gpuNodes && kernels.length > 0, `${kernels.length} kernel events for ${r.stats.gpuNodes} GPU nodes`);
  assert.ok(kernels.every((e) => e.tid === 2 && e.args.clock === (r.gpuTiming === 'timestamp' ? 'gpu-timestamp' : 'host') && e.cat === (r.gpuTiming === 'timestamp' ? 'gpu' : 'gpu-host')));
  assert.ok(positive > 0, 'some kernel takes time');
  assert.deepEqual(errors, []);
});

// An adapter without timestamp-query (hidden by an init script): events and the profiler
// fall back to the host clock and say so.
test('WebGPU without timestamp-query: events and the profiler use the host clock, flagged', async () => {
  const { page, errors } = await newPage(() => {
    const d = Object.getOwnPropertyDescriptor(GPUAdapter.prototype, 'features');
    Object.defineProperty(GPUAdapter.prototype, 'features', {
      get() { return new Set([...d.get.call(this)].filter((f) => f !== 'timestamp-query')); },
    });
  });
  const r = await page.evaluate(async () => {
    const { load, gpu, tensor } = await import('/js/index.js');
    const m = await load('/fixtures/dyn_batch.pt2', { device: 'webgpu' });
    const x = [tensor(Float32Array.from({ length: 64 * 16 }, (_, i) => Math.sin(i)), [64, 16])];
    await m.run(x);
    const start = new gpu.Event({ enableTiming: true });
    const end = new gpu.Event({ enableTiming: true });
    start.record();
    for (let i = 0; i < 5; i++) await m.run(x);
    end.record();
    const ms = await start.elapsedTime(end);
    m.startProfiler();
    await m.run(x);
    const p = m.stopProfiler();
    const props = await gpu.properties();
    return { ms, timing: end.timing, timestamps: props.timestamps, gpuTiming: p.gpuTiming, trace: JSON.stringify(p.chromeTrace), gpuNodes: m.lastRunStats().gpuNodes };
  });
  const evs = JSON.parse(r.trace).traceEvents;
  const kernels = evs.filter((e) => e.tid === 2);
  console.log(`# no timestamp-query: events ${r.ms.toFixed(3)} ms (timing '${r.timing}'), profiler '${r.gpuTiming}', ${kernels.length} host-timed kernel events`);
  assert.equal(r.timestamps, false);
  assert.equal(r.timing, 'host');
  assert.ok(r.ms > 0, `elapsed ${r.ms} ms`);
  assert.equal(r.gpuTiming, 'host');
  assert.ok(kernels.length >= r.gpuNodes && kernels.length > 0);
  assert.ok(kernels.every((e) => e.cat === 'gpu-host' && e.args.clock === 'host' && e.ph === 'X' && e.dur >= 0));
  assert.deepEqual(errors, []);
});

const MODELS = path.join(ROOT, '.cache', 'models');
for (const device of ['webgpu', 'cpu']) {
  test(`the real models run in Chromium on ${device} and match PyTorch`, { skip: !existsSync(MODELS) && process.env.PT2WEB_REQUIRE_MODELS !== '1' && 'no .cache/models' }, async () => {
    const { page } = await newPage();
    for (const [stem, meta] of metas(MODELS)) {
      // SwiftShader (a CPU emulation of a GPU) is slow: the GPU path runs the training IR of
      // the five models (resnet18_64, resnet18's weights on small images for the native
      // no-leak test, adds nothing there), ViT-B/16 (about a minute per run) without the
      // second, warm run; the CPU path runs all of them.
      if (device === 'webgpu' && (stem.startsWith('resnet18_64') || stem.endsWith('.core'))) continue;
      const warm = !(device === 'webgpu' && stem.startsWith('vit'));
      const rows = await page.evaluate(async ({ stem, meta, device, warm }) => {
        const { load } = await import('/js/index.js');
        const st = await import('/tests/js/st.mjs');
        const fetchBytes = async (rel) => new Uint8Array(await (await fetch(`/models/${rel}`)).arrayBuffer());
        return st.runModel(load, stem, meta, fetchBytes, device, true, warm);
      }, { stem, meta, device, warm });
      for (const r of rows) {
        const s = r.stats ? ` submits ${r.stats.submits} gpu ${r.stats.gpuNodes} fallback ${r.stats.fallbackNodes}` : '';
        console.log(`# ${device.padEnd(6)} ${stem.padEnd(24)} ${r.label.padEnd(8)} ${r.key.padEnd(9)} max_abs_err ${r.max.toExponential(3)} cosine ${r.cos.toFixed(8)} first ${r.ms.toFixed(0)} ms warm ${r.warmMs === null ? '-' : r.warmMs.toFixed(0)} ms${s}`);
        assert.equal(r.device, device);
      }
    }
  });
}

// model.generate over the tiny static-cache LMs (tests/fixgen/gen_lm.py): PyTorch's greedy
// tokens on both backends, with f32 weights, quantized at load (`weights: 'int8' | 'int4'`:
// PyTorch's tokens for the same rounding) and computing in f16 (`dtype: 'float16'`: PyTorch's
// f32 tokens, which these models keep; an adapter without shader-f16 refuses it as a DEVICE
// error); on WebGPU the cache stays on the GPU and a step reads back 8 bytes.
const LM = path.join(ROOT, '.cache', 'models', 'gpt2_static.generate.json');
for (const device of ['webgpu', 'cpu']) {
  test(`model.generate in Chromium on ${device} gives PyTorch's greedy tokens`, { skip: !existsSync(LM) && process.env.PT2WEB_REQUIRE_MODELS !== '1' && 'no .cache/models (scripts/build_models.sh)' }, async () => {
    const { page } = await newPage();
    for (const name of ['llama_static', 'gpt2_static']) {
      const meta = JSON.parse(readFileSync(path.join(ROOT, '.cache', 'models', `${name}.generate.json`), 'utf8'));
      for (const [weights, dtype] of [['f32', 'float32'], ['int8', 'float32'], ['int4', 'float32'], ['f32', 'float16']]) {
        const r = await page.evaluate(async ({ name, meta, device, weights, dtype }) => {
          const { load } = await import('/js/index.js');
          let m;
          try {
            m = await load(`/models/${name}.pt2`, { device, weights, dtype });
          } catch (e) {
            // 'auto' then runs it on the CPU backend and says why.
            const auto = await load(`/models/${name}.pt2`, { device: 'auto', weights, dtype });
            const fallback = { device: auto.device, note: auto.deviceNote };
            auto.dispose();
            return { error: `${e.code}: ${e.message}`, fallback, f16: (await navigator.gpu?.requestAdapter())?.features.has('shader-f16') };
          }
          const seen = [];
          const tokens = await m.generate(meta.prompt, { maxNewTokens: meta.max_new_tokens, onToken: (t) => seen.push(t) });
          const out = { device: m.device, tokens, seen, stats: m.lastGenerateStats };
          m.dispose();
          return out;
        }, { name, meta, device, weights, dtype });
        const label = `${device} ${name} ${weights} ${dtype}`;
        if (r.error) {
          // Only f16 on an adapter without shader-f16 may refuse, and it says why.
          console.log(`# ${label}: refused (${r.error})`);
          assert.ok(device === 'webgpu' && dtype === 'float16' && r.f16 === false, `${label}: ${r.error}`);
          assert.match(r.error, /^DEVICE: .*shader-f16/);
          assert.equal(r.fallback.device, 'cpu');
          assert.match(r.fallback.note, /shader-f16/);
          continue;
        }
        console.log(`# ${label}: ${r.tokens.join(',')} decode ${r.stats.decodeTokS?.toFixed(1)} tok/s, readback ${r.stats.readbackBytesPerToken} B/token`);
        assert.equal(r.device, device);
        assert.deepEqual(r.tokens, weights === 'f32' ? meta.tokens : meta[`tokens_${weights}`], label);
        assert.deepEqual(r.seen, r.tokens);
        assert.equal(r.stats.readbackBytesPerToken, device === 'webgpu' ? 8 : 0);
      }
    }
  });
}

test('without navigator.gpu, auto falls back to the CPU and says so', async () => {
  const { page } = await newPage(() => { delete Navigator.prototype.gpu; });
  const r = await page.evaluate(async () => {
    const { load } = await import('/js/index.js');
    const m = await load('/fixtures/mlp_train.pt2', { device: 'auto' });
    let webgpuError = null;
    try { await load('/fixtures/mlp_train.pt2', { device: 'webgpu' }); } catch (e) { webgpuError = `${e.name} ${e.code}: ${e.message}`; }
    const { gpu, tensor } = await import('/js/index.js');
    let shaderError = null;
    try { await gpu.compileShader('@compute @workgroup_size(1) fn main() {}'); } catch (e) { shaderError = `${e.code}: ${e.message}`; }
    // Events without a device: the host clock (no GPU work can be pending).
    const a = new gpu.Event({ enableTiming: true });
    const b = new gpu.Event({ enableTiming: true });
    a.record();
    await m.run([tensor(new Float32Array(8 * 4).fill(0.1), [8, 4])]).catch(() => null);
    b.record();
    await b.synchronize();
    const hostMs = await a.elapsedTime(b);
    return { device: m.device, note: m.deviceNote, gpu: 'gpu' in navigator, webgpuError, shaderError, timing: a.timing, hostMs };
  });
  assert.match(r.shaderError, /^DEVICE: .*WebGPU/);
  assert.equal(r.timing, 'host');
  assert.ok(r.hostMs >= 0);
  assert.equal(r.gpu, false);
  assert.equal(r.device, 'cpu');
  assert.match(r.note, /navigator.gpu is missing/);
  assert.match(r.webgpuError, /Pt2WebError DEVICE/);
});

test('bad input from JS rejects with a Pt2WebError and the model still runs', async () => {
  const { page } = await newPage();
  const r = await page.evaluate(async () => {
    const { load, tensor, Pt2WebError } = await import('/js/index.js');
    const m = await load('/fixtures/dyn_batch.pt2', { device: 'cpu' });
    const good = async () => (await m.run([tensor(new Float32Array(32), [2, 16])]))[0].shape.join('x');
    const out = [];
    for (const bad of [[tensor(new Float32Array(30), [2, 15])], [tensor(new Int32Array(32), [2, 16])], { nope: 1 }, []]) {
      try { await m.run(bad); out.push('no error'); } catch (e) { out.push(`${e instanceof Pt2WebError} ${e.code} ${await good()}`); }
    }
    let corrupt;
    try { await load(new Uint8Array([80, 75, 3, 4, 1, 2, 3])); } catch (e) { corrupt = `${e instanceof Pt2WebError} ${e.code}`; }
    return { out, corrupt };
  });
  assert.deepEqual(r.out, ['true GUARD 2x8', 'true INPUT 2x8', 'true INPUT 2x8', 'true INPUT 2x8']);
  assert.equal(r.corrupt, 'true ARCHIVE');
});

test('the package works in a module Worker', async () => {
  const { page } = await newPage();
  const meta = JSON.parse(readFileSync(path.join(ROOT, 'tests', 'fixtures', 'dyn_batch.meta.json'), 'utf8'));
  const n = await page.evaluate(async ({ origin, programs }) => {
    const src = `
      import { load } from '${origin}/js/index.js';
      import * as st from '${origin}/tests/js/st.mjs';
      const programs = ${JSON.stringify(programs)};
      try {
        const c = programs.model.io_cases[0];
        const io = st.parseSafetensors(new Uint8Array(await (await fetch('${origin}/fixtures/' + c.file)).arrayBuffer()));
        const m = await load('${origin}/fixtures/dyn_batch.pt2', { device: 'webgpu' });
        const got = st.flattenOut(await m.run([io.input_0]));
        c.outputs.forEach((o, i) => st.assertClose(o.key, got[i], io[o.key]));
        postMessage({ ok: got.length, device: m.device });
      } catch (e) { postMessage({ error: String(e && e.message || e) }); }`;
    const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })), { type: 'module' });
    return new Promise((resolve) => { w.onmessage = (e) => resolve(e.data); w.onerror = (e) => resolve({ error: e.message }); });
  }, { origin: suite.origin, programs: meta.programs });
  assert.equal(n.error, undefined, n.error);
  assert.equal(n.ok, 2);
  assert.equal(n.device, 'webgpu');
});

test('demo page: open any .pt2 runs a fixture', async () => {
  const { page, errors } = await newPage();
  await page.goto(`${suite.origin}/`);
  await page.setInputFiles('#file', path.join(ROOT, 'tests', 'fixtures', 'mlp_train.pt2'));
  await page.waitForSelector('#runBtn:not([disabled])', { timeout: 60000 });
  assert.match(await page.textContent('#info'), /aten\.linear/);
  await page.click('#runBtn');
  await page.waitForSelector('#runStatus[data-done="1"]', { timeout: 60000 });
  assert.match(await page.textContent('#outputs'), /float32\[/);
  const chart = await page.evaluate(() => ({ h: document.getElementById('ops').height, trace: window.pt2webDemo.lastTrace.traceEvents.length }));
  // One chart row per target of the run, one trace event per step: the graph passes make
  // each linear + relu one fused epilogue (two steps of one target).
  assert.ok(chart.h >= 22 + 10 && chart.trace >= 2, JSON.stringify(chart));
  // The memory timeline of the load and the run (gpu.memorySnapshot()) is drawn: on WebGPU
  // (auto picks it here) the canvas shows, with bars painted.
  const mem = await page.evaluate(() => {
    const c = document.getElementById('mem');
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let painted = 0;
    for (let i = 3; i < px.length; i += 4) painted += px[i] > 0;
    return { hidden: c.hidden, painted, device: window.pt2webDemo.other?.device };
  });
  assert.equal(mem.device, 'webgpu');
  assert.ok(!mem.hidden && mem.painted > 500, JSON.stringify(mem));
  assert.deepEqual(errors, []);
});

// A safetensors file built here: an 8-byte little-endian header length, the JSON header, data.
function safetensorsBytes(tensors) {
  const header = {};
  const parts = [];
  let off = 0;
  for (const [k, t] of Object.entries(tensors)) {
    const b = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[k] = { dtype: { float32: 'F32', int64: 'I64', int32: 'I32' }[t.dtype], shape: t.shape, data_offsets: [off, off + b.length] };
    parts.push(b);
    off += b.length;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, Buffer.from(json), ...parts]);
}

function npyBytes(t) {
  const descr = { float32: '<f4', int64: '<i8' }[t.dtype];
  let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${t.shape.join(', ')}${t.shape.length === 1 ? ',' : ''}), }`;
  h += ' '.repeat((64 - ((10 + h.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(pre);
  pre.writeUInt16LE(h.length, 8);
  return Buffer.concat([pre, Buffer.from(h, 'latin1'), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength)]);
}

test('demo page: open any .pt2 with inputs uploaded as .safetensors / .npy shows the right outputs', async () => {
  const st = await import('../js/st.mjs');
  const { page, errors } = await newPage();
  await page.goto(`${suite.origin}/`);
  const readOuts = () => page.evaluate(async () => {
    const st = await import('/tests/js/st.mjs');
    return st.flattenOut(window.pt2webDemo.lastOutputs).map((t) => ({ dtype: t.dtype, shape: t.shape, data: Array.from(t.data, Number) }));
  });
  const check = (got, io, keys, label) => {
    assert.equal(got.length, keys.length, label);
    keys.forEach((k, i) => st.assertClose(`${label} ${k}`, { ...got[i], data: Float32Array.from(got[i].data) }, io[k]));
  };
  // Two inputs, by name, from one safetensors file.
  let io = st.parseSafetensors(new Uint8Array(readFileSync(path.join(ROOT, 'tests', 'fixtures', 'dyn_shared.io.safetensors'))));
  await page.setInputFiles('#file', path.join(ROOT, 'tests', 'fixtures', 'dyn_shared.pt2'));
  await page.waitForSelector('#runBtn:not([disabled])', { timeout: 60000 });
  // A file missing an input: a clear error naming it.
  await page.setInputFiles('#inputsFile', { name: 'only_x.safetensors', mimeType: 'application/octet-stream', buffer: safetensorsBytes({ x: io.input_0 }) });
  await page.waitForFunction(() => /inputs from/.test(document.getElementById('inputsStatus').textContent));
  await page.click('#runBtn');
  await page.waitForSelector('#runStatus[data-done="error"]', { timeout: 60000 });
  assert.match(await page.textContent('#outputs'), /no tensor for 'y'/);
  await page.setInputFiles('#inputsFile', { name: 'inputs.safetensors', mimeType: 'application/octet-stream', buffer: safetensorsBytes({ y: io.input_1, x: io.input_0 }) });
  await page.waitForFunction(() => /y: float32/.test(document.getElementById('inputsStatus').textContent));
  assert.equal(await page.textContent('#runBtn'), 'Run with uploaded inputs');
  await page.click('#runBtn');
  await page.waitForSelector('#runStatus[data-done="1"]', { timeout: 60000 });
  assert.match(await page.textContent('#runStatus'), /uploaded inputs/);
  const meta = JSON.parse(readFileSync(path.join(ROOT, 'tests', 'fixtures', 'dyn_shared.meta.json'), 'utf8'));
  const outKeys = meta.programs.model.io_cases[0].outputs.map((o) => o.key);
  const got = await readOuts();
  check(got, io, outKeys, 'dyn_shared');
  assert.match(await page.textContent('#outputs'), /float32\[3,10\]/);
  // One input from a .npy.
  io = st.parseSafetensors(new Uint8Array(readFileSync(path.join(ROOT, 'tests', 'fixtures', 'dyn_batch.io.safetensors'))));
  await page.setInputFiles('#file', path.join(ROOT, 'tests', 'fixtures', 'dyn_batch.pt2'));
  await page.waitForFunction(() => /nodes/.test(document.getElementById('runStatus').textContent));
  await page.setInputFiles('#inputsFile', { name: 'x.npy', mimeType: 'application/octet-stream', buffer: npyBytes(io.input_0) });
  await page.waitForFunction(() => /x: float32\[4,16\]/.test(document.getElementById('inputsStatus').textContent));
  await page.click('#runBtn');
  await page.waitForSelector('#runStatus[data-done="1"]', { timeout: 60000 });
  check(await readOuts(), io, ['output_0', 'output_1'], 'dyn_batch');
  assert.deepEqual(errors, []);
});

const SIM = path.join(ROOT, '.cache', 'models', 'minilm.similarity.json');
test('demo page: sentence similarity matches PyTorch within 1e-4', { skip: !existsSync(SIM) && process.env.PT2WEB_REQUIRE_MODELS !== '1' && 'no .cache/models (scripts/build_models.sh)' }, async () => {
  const want = JSON.parse(readFileSync(SIM, 'utf8'));
  const { page, errors } = await newPage();
  await page.goto(`${suite.origin}/`);
  await page.waitForSelector('#simBtn:not([disabled])', { timeout: 300000 });
  await page.fill('#sentences', want.sentences.join('\n'));
  await page.click('#simBtn');
  await page.waitForSelector('#simStatus[data-done="1"]', { timeout: 300000 });
  const r = await page.evaluate(async (sentences) => {
    const d = window.pt2webDemo;
    const res = await d.similarity(sentences);
    const px = document.getElementById('heat').getContext('2d').getImageData(0, 0, 360, 360).data;
    const colours = new Set();
    for (let i = 0; i < px.length; i += 4 * 97) colours.add(`${px[i]},${px[i + 1]},${px[i + 2]}`);
    return { matrix: res.matrix, ms: res.ms, colours: colours.size, status: document.getElementById('simStatus').textContent };
  }, want.sentences);
  let max = 0;
  want.similarity.forEach((row, i) => row.forEach((v, j) => { max = Math.max(max, Math.abs(v - r.matrix[i][j])); }));
  console.log(`# similarity: max abs error vs PyTorch ${max.toExponential(2)}; ${r.status}`);
  assert.ok(max < 1e-4, `max abs error ${max}`);
  assert.ok(r.colours >= 4, `the heat map has ${r.colours} colours`);
  mkdirSync(path.join(ROOT, 'target'), { recursive: true });
  await page.screenshot({ path: path.join(ROOT, 'target', 'demo.png'), fullPage: true });
  assert.deepEqual(errors, []);
});
