// Side-by-side browser benchmark: pt2web vs ONNX Runtime Web in the same headless Chromium
// (Debian chromium, SwiftShader WebGPU), same weights (the ONNX files are exported from the very
// .pt2 archives by bench/export_onnx.py), same inputs (the generator's example inputs).
//   cd bench && npm install && cd .. && .venv/bin/python bench/export_onnx.py && node bench/browser_bench.mjs [--runs 5] [--models resnet18,...]
//   node bench/browser_bench.mjs --pt2web-only --models minilm,gpt2   (pt2web alone: no ONNX files needed)
// Prints cold start (load + prepare + first run) and the median warm run, and the ratio pt2web / ORT;
// for pt2web on WebGPU also load / prepare / first-run times, the first run's pipeline count and the
// host time per warm run (`lastRunStats().hostMs`: outside GPU waits).
// WASM threads: `--threads 1` (the default) runs both single-threaded on a page that is not
// cross-origin isolated; `--threads N` serves the page with COOP/COEP, starts pt2web's
// multi-threaded build with N workers (`init({ threads: N })`) and sets ORT Web's
// `numThreads` to N. `--cpu-only` skips both WebGPU columns.
// Then, per model on WebGPU (each in a fresh page: its own device, pipelines and archive cache),
// the cold start of `load(url)` + first run without `prepare` and with `prepare` at load
// (issue 18 item 3), and the load from the archive cache against the download
// (`--no-cold-start` skips this part).
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '../scripts/serve.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (k, d) => { const i = process.argv.indexOf(`--${k}`); return i > 0 ? process.argv[i + 1] : d; };
const RUNS = Number(arg('runs', 5));
const MODELS = arg('models', 'mobilenet_v3_small,resnet18,minilm').split(',');
const GPU_RUNS = Number(arg('gpu-runs', 2));
const PT2WEB_ONLY = process.argv.includes('--pt2web-only');
const NO_PREPARE = process.argv.includes('--no-prepare');
const THREADS = Number(arg('threads', 1));
const CPU_ONLY = process.argv.includes('--cpu-only');
const COLD_START = !process.argv.includes('--no-cold-start') && !CPU_ONLY;

async function benchInPage({ name, meta, runs, gpuRuns, pt2webOnly, noPrepare, threads, cpuOnly }) {
  const { load, init, cpuThreading } = await import('/js/index.js');
  await init({ threads });
  const st = await import('/tests/js/st.mjs');
  const get = async (f) => new Uint8Array(await (await fetch(`/models/${f}`)).arrayBuffer());
  const c = meta.programs.model.io_cases[0];
  const io = st.parseSafetensors(await get(c.file));
  const leaves = c.inputs.map((i) => io[i.key]);
  const names = meta.programs.model.input_names;
  const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
  const out = { name, shape: leaves[0].shape.join('x'), threading: cpuThreading() };

  // pt2web on both kernel sets: WebGPU (SwiftShader here) and the CPU backend (WASM SIMD).
  for (const device of cpuOnly ? ['cpu'] : ['webgpu', 'cpu']) {
    try {
      const t0 = performance.now();
      const model = await load(`/models/${meta.archive}`, { device });
      const tLoad = performance.now();
      // Prepare for the inputs' shapes where the package has it (older builds do not).
      // The page's longest stall during prepare: a 4 ms heartbeat's largest gap (prepare
      // awaits the GPU process's shader compilation instead of blocking the page).
      let longest = 0;
      let beat = performance.now();
      const heart = setInterval(() => {
        const now = performance.now();
        longest = Math.max(longest, now - beat);
        beat = now;
      }, 4);
      let prep = {};
      if (model.prepare && !noPrepare) {
        prep = await model.prepare(leaves.map((t) => ({ shape: t.shape, dtype: t.dtype })));
      }
      const tPrep = performance.now();
      clearInterval(heart);
      longest = Math.max(longest, tPrep - beat);
      const [args, kwargs] = st.unflattenSpec(model.info.specs.inSpec, [...leaves]);
      await model.run({ args, kwargs });
      const tFirst = performance.now();
      out[`pt2web_${device}_cold`] = tFirst - t0;
      if (device === 'webgpu') {
        out.pt2web_webgpu_phases = { load: tLoad - t0, prepare: tPrep - tLoad, first: tFirst - tPrep, prepare_stall: longest, prepare_pipelines: prep.pipelinesMs, prepare_warm_up: prep.warmUpMs, prepare_wait: prep.waitMs };
        out.pt2web_webgpu_first_stats = model.lastRunStats();
      }
      const ts = [];
      const hosts = [];
      for (let i = 0; i < (device === 'webgpu' ? gpuRuns : runs); i++) {
        const t = performance.now();
        await model.run({ args, kwargs });
        ts.push(performance.now() - t);
        if (device === 'webgpu') hosts.push(model.lastRunStats().hostMs);
      }
      out[`pt2web_${device}_warm`] = median(ts);
      if (device === 'webgpu') {
        out.pt2web_webgpu_stats = model.lastRunStats();
        out.pt2web_webgpu_host = hosts.every((h) => typeof h === 'number') ? median(hosts) : undefined;
      }
      model.dispose();
    } catch (e) {
      out[`pt2web_${device}_error`] = String(e.message ?? e).slice(0, 200);
    }
  }
  if (pt2webOnly) return out;
  // ONNX Runtime Web: wasm and webgpu execution providers.
  const ort = await import('/bench/node_modules/onnxruntime-web/dist/ort.all.bundle.min.mjs');
  ort.env.wasm.wasmPaths = '/bench/node_modules/onnxruntime-web/dist/';
  ort.env.wasm.numThreads = threads;
  const onnx = await get(`${name}.onnx`);
  for (const ep of cpuOnly ? ['wasm'] : ['wasm', 'webgpu']) {
    try {
      const t0 = performance.now();
      const s = await ort.InferenceSession.create(onnx, { executionProviders: [ep] });
      const feeds = Object.fromEntries(s.inputNames.map((n) => {
        const t = leaves[names.indexOf(n)];
        if (!t) throw new Error(`ONNX input ${n} is not one of ${names}`);
        return [n, new ort.Tensor(t.dtype === 'int64' ? 'int64' : 'float32', t.data, t.shape)];
      }));
      await s.run(feeds);
      out[`ort_${ep}_cold`] = performance.now() - t0;
      const ts = [];
      for (let i = 0; i < (ep === 'webgpu' ? gpuRuns : runs); i++) { const t = performance.now(); await s.run(feeds); ts.push(performance.now() - t); }
      out[`ort_${ep}_warm`] = median(ts);
      await s.release();
    } catch (e) {
      out[`ort_${ep}_error`] = String(e.message ?? e).slice(0, 200);
    }
  }
  return out;
}

// Cold start on WebGPU in a fresh page: `load(url, {prepare})` (the shapes of the inputs, or
// none) and the first run, with the phases onProgress reports; then, with `cached`, a second
// load of the same URL, which reads the archive cache.
async function coldStartInPage({ meta, prepare, cached }) {
  const { load, clearCache } = await import('/js/index.js');
  const st = await import('/tests/js/st.mjs');
  const c = meta.programs.model.io_cases[0];
  const io = st.parseSafetensors(new Uint8Array(await (await fetch(`/models/${c.file}`)).arrayBuffer()));
  const leaves = c.inputs.map((i) => io[i.key]);
  await clearCache();
  const loadTimed = async (options) => {
    const at = {};
    const t0 = performance.now();
    const model = await load(`/models/${meta.archive}`, { device: 'webgpu', ...options, onProgress: (_l, _t, p) => { at[p.phase] ??= performance.now() - t0; } });
    return { model, ms: performance.now() - t0, at };
  };
  const { model, ms, at } = await loadTimed(prepare ? { prepare: leaves.map((t) => ({ shape: t.shape, dtype: t.dtype })) } : {});
  const [args, kwargs] = st.unflattenSpec(model.info.specs.inSpec, [...leaves]);
  const t1 = performance.now();
  await model.run({ args, kwargs });
  const out = { load: ms, first: performance.now() - t1, prepareMs: at.prepare === undefined ? 0 : ms - at.prepare, pipelinesInFirstRun: model.lastRunStats()?.pipelinesCreated };
  out.downloadLoad = at.prepare ?? ms;
  model.dispose();
  if (cached) {
    const again = await loadTimed({});
    out.cachedLoad = again.ms;
    out.fromCache = 'cache' in again.at && !('download' in again.at);
    again.model.dispose();
  }
  return out;
}

const server = await serve(0, { isolated: THREADS > 1 });
const origin = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader', '--disable-background-networking',
    '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'],
});
const rows = [];
try {
  for (const name of MODELS) {
    const page = await browser.newPage();
    await page.goto(`${origin}/www/blank.html`);
    const meta = JSON.parse(readFileSync(path.join(ROOT, '.cache', 'models', `${name}.meta.json`), 'utf8'));
    const r = await page.evaluate(benchInPage, { name, meta, runs: RUNS, gpuRuns: GPU_RUNS, pt2webOnly: PT2WEB_ONLY, noPrepare: NO_PREPARE, threads: THREADS, cpuOnly: CPU_ONLY });
    await page.close();
    if (COLD_START) {
      for (const prepare of [false, true]) {
        const cold = await browser.newPage();
        await cold.goto(`${origin}/www/blank.html`);
        r[prepare ? 'cold_prepared' : 'cold_unprepared'] = await cold.evaluate(coldStartInPage, { meta, prepare, cached: prepare }).catch((e) => ({ error: String(e.message ?? e).slice(0, 200) }));
        await cold.close();
      }
    }
    console.error(JSON.stringify(r));
    rows.push(r);
  }
} finally {
  await browser.close();
  server.close();
}
const f = (x) => (x === undefined ? '-' : x.toFixed(0));
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) : '-');
const cw = (r, k) => (r[`${k}_error`] ? 'error' : `${f(r[`${k}_cold`])} / ${f(r[`${k}_warm`])}`);
console.log(`\n${'model'.padEnd(20)}${'input'.padEnd(12)}${'pt2web webgpu'.padStart(16)}${'ORT webgpu'.padStart(16)}${'ratio c/w'.padStart(13)}${'pt2web cpu'.padStart(16)}${'ORT wasm'.padStart(16)}${'ratio c/w'.padStart(13)}`);
for (const r of rows) {
  const rw = `${ratio(r.pt2web_webgpu_cold, r.ort_webgpu_cold)}/${ratio(r.pt2web_webgpu_warm, r.ort_webgpu_warm)}`;
  const rc = `${ratio(r.pt2web_cpu_cold, r.ort_wasm_cold)}/${ratio(r.pt2web_cpu_warm, r.ort_wasm_warm)}`;
  console.log(`${r.name.padEnd(20)}${r.shape.padEnd(12)}${cw(r, 'pt2web_webgpu').padStart(16)}${cw(r, 'ort_webgpu').padStart(16)}${rw.padStart(13)}${cw(r, 'pt2web_cpu').padStart(16)}${cw(r, 'ort_wasm').padStart(16)}${rc.padStart(13)}`);
  const ph = r.pt2web_webgpu_phases;
  const fs = r.pt2web_webgpu_first_stats;
  if (ph) console.log(`${''.padEnd(32)}pt2web webgpu cold start: load ${f(ph.load)} + prepare ${f(ph.prepare)} (pipelines ${f(ph.prepare_pipelines)}, warm-up ${f(ph.prepare_warm_up)}, device wait ${f(ph.prepare_wait)}, longest page stall ${f(ph.prepare_stall)}) + first run ${f(ph.first)} ms (${fs?.pipelinesCreated} pipelines created in the first run); warm run ${f(r.pt2web_webgpu_warm)} ms, first/warm ${ratio(ph.first, r.pt2web_webgpu_warm)}; host per warm run ${r.pt2web_webgpu_host === undefined ? '-' : r.pt2web_webgpu_host.toFixed(2)} ms${r.pt2web_webgpu_stats?.replayed ? ' (replayed)' : ''}`);
  const st = r.pt2web_webgpu_stats;
  if (st) console.log(`${''.padEnd(32)}pt2web webgpu per run: ${st.submits} submits, ${st.bufferAllocations} buffer allocations, ${st.pipelinesCreated} pipelines created, ${st.gpuNodes} GPU nodes, ${st.fallbackNodes} CPU fallbacks ${JSON.stringify(st.fallbacks)}`);
  const [cu, cp] = [r.cold_unprepared, r.cold_prepared];
  if (cu && cp) {
    if (cu.error || cp.error) console.log(`${''.padEnd(32)}cold start: ${cu.error ?? cp.error}`);
    else {
      console.log(`${''.padEnd(32)}pt2web webgpu cold start, load(url) + first run: without prepare ${f(cu.load)} + ${f(cu.first)} = ${f(cu.load + cu.first)} ms (${cu.pipelinesInFirstRun} pipelines in the first run); with prepare at load ${f(cp.load)} (prepare ${f(cp.prepareMs)}) + ${f(cp.first)} = ${f(cp.load + cp.first)} ms (${cp.pipelinesInFirstRun})`);
      console.log(`${''.padEnd(32)}pt2web webgpu load(url): downloaded ${f(cp.downloadLoad)} ms, from the archive cache ${f(cp.cachedLoad)} ms${cp.fromCache ? '' : ' (NOT read from the cache)'}`);
    }
  }
  for (const k of ['pt2web_webgpu', 'pt2web_cpu', 'ort_webgpu', 'ort_wasm']) if (r[`${k}_error`]) console.log(`${''.padEnd(32)}${k}: ${r[`${k}_error`]}`);
}
console.log('\ncold = load + first run, warm = median of later runs (ms); ratio = pt2web / ORT Web (below 1: pt2web is faster).');
const th = rows[0]?.threading;
console.log(`Same headless Chromium, same adapter (SwiftShader WebGPU), same weights and inputs; WASM: ORT Web numThreads ${THREADS}, pt2web ${th ? `${th.threads} thread(s), ${th.build} build (${th.reason}), ${th.simd} SIMD` : '-'}.`);
