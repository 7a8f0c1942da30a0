// Side-by-side browser benchmark: pt2web vs ONNX Runtime Web in the same headless Chromium
// (Debian chromium, SwiftShader WebGPU), same weights (the ONNX files are exported from the very
// .pt2 archives by bench/export_onnx.py), same inputs (the generator's example inputs).
//   cd bench && npm install && cd .. && .venv/bin/python bench/export_onnx.py && node bench/browser_bench.mjs [--runs 5] [--models resnet18,...]
// Prints cold start (load + first run) and the median warm run, and the ratio pt2web / ORT.
// Both run single-threaded on WASM (the page is not cross-origin isolated).
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

async function benchInPage({ name, meta, runs, gpuRuns }) {
  const { load } = await import('/js/index.js');
  const st = await import('/tests/js/st.mjs');
  const ort = await import('/bench/node_modules/onnxruntime-web/dist/ort.all.bundle.min.mjs');
  ort.env.wasm.wasmPaths = '/bench/node_modules/onnxruntime-web/dist/';
  ort.env.wasm.numThreads = 1;
  const get = async (f) => new Uint8Array(await (await fetch(`/models/${f}`)).arrayBuffer());
  const c = meta.programs.model.io_cases[0];
  const io = st.parseSafetensors(await get(c.file));
  const leaves = c.inputs.map((i) => io[i.key]);
  const names = meta.programs.model.input_names;
  const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
  const out = { name, shape: leaves[0].shape.join('x') };

  // pt2web (CPU backend; WebGPU kernels are issue 4).
  {
    const t0 = performance.now();
    const model = await load(`/models/${meta.archive}`, { device: 'cpu' });
    const [args, kwargs] = st.unflattenSpec(model.info.specs.inSpec, [...leaves]);
    await model.run({ args, kwargs });
    out.pt2web_cpu_cold = performance.now() - t0;
    const ts = [];
    for (let i = 0; i < runs; i++) { const t = performance.now(); await model.run({ args, kwargs }); ts.push(performance.now() - t); }
    out.pt2web_cpu_warm = median(ts);
    model.dispose();
  }
  // ONNX Runtime Web: wasm and webgpu execution providers.
  const onnx = await get(`${name}.onnx`);
  for (const ep of ['wasm', 'webgpu']) {
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

const server = await serve(0);
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
    const r = await page.evaluate(benchInPage, { name, meta, runs: RUNS, gpuRuns: GPU_RUNS });
    console.error(JSON.stringify(r));
    rows.push(r);
    await page.close();
  }
} finally {
  await browser.close();
  server.close();
}
const f = (x) => (x === undefined ? '-' : x.toFixed(0));
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) : '-');
console.log(`\n${'model'.padEnd(20)}${'input'.padEnd(12)}${'pt2web cpu cold/warm ms'.padStart(25)}${'ORT wasm cold/warm ms'.padStart(24)}${'warm ratio'.padStart(12)}${'ORT webgpu cold/warm ms'.padStart(26)}   pt2web webgpu`);
for (const r of rows) {
  console.log(`${r.name.padEnd(20)}${r.shape.padEnd(12)}${`${f(r.pt2web_cpu_cold)} / ${f(r.pt2web_cpu_warm)}`.padStart(25)}${`${f(r.ort_wasm_cold)} / ${f(r.ort_wasm_warm)}`.padStart(24)}${ratio(r.pt2web_cpu_warm, r.ort_wasm_warm).padStart(12)}${(r.ort_webgpu_error ? 'error' : `${f(r.ort_webgpu_cold)} / ${f(r.ort_webgpu_warm)}`).padStart(26)}   n/a (issue 4)`);
}
console.log('\nratio = pt2web CPU (WASM SIMD) / ORT Web WASM EP, median warm run, single thread; same Chromium, same inputs.');
