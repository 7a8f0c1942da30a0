// The soak of issue 17 (scripts/soak.sh runs it): `--calls N` mixed good and bad calls in Node
// (every bad one must be a typed Pt2WebError) and `--runs N` WebGPU runs of GPT-2 with random
// shapes in Chromium; prints the memory deltas after the warm-up (a tenth of the count).
// `--calls 0` or `--runs 0` skips a part. Needs pkg/ (npm run build).
import path from 'node:path';
import { existsSync } from 'node:fs';
import { ROOT, FIXTURES, readSafetensors } from '../tests/js/helpers.mjs';
import { soakNode, dynBatchGoods } from '../tests/js/hostile.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? dflt : Number(process.argv[i + 1]);
};
const calls = arg('calls', 10000);
const runs = arg('runs', 1000);

if (calls > 0) {
  const api = await import('../js/index.js');
  const model = await api.load(path.join(FIXTURES, 'dyn_batch.pt2'), { device: 'cpu' });
  const t = performance.now();
  const r = await soakNode({ model, api, goods: dynBatchGoods(readSafetensors, FIXTURES), calls });
  const s = ((performance.now() - t) / 1e3).toFixed(1);
  console.log(`node: ${r.calls} calls (${r.good} good, ${r.bad} bad, ${r.typed} typed Pt2WebErrors) in ${s} s; ` +
    `after the warm-up: JS heap ${r.heapDeltaMiB.toFixed(2)} MiB${globalThis.gc ? '' : ' (no --expose-gc)'}, ` +
    `RSS ${r.rssDeltaMiB.toFixed(2)} MiB, wasm memory ${r.wasmDeltaMiB.toFixed(2)} MiB (${r.wasmMiB.toFixed(1)} MiB)`);
  model.dispose();
  if (r.typed !== r.bad) process.exitCode = 1;
}

if (runs > 0) {
  const { chromium } = await import('playwright-core');
  const { serve } = await import('./serve.mjs');
  const { soakInPage, SOAK_ARGS, SOAK_MODEL } = await import('../tests/browser/soak_page.mjs');
  if (!existsSync(path.join(ROOT, '.cache', 'models', 'gpt2.core.pt2'))) {
    console.error('no .cache/models/gpt2.core.pt2: run scripts/build_models.sh');
    process.exit(1);
  }
  const server = await serve(0);
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: SOAK_ARGS, headless: true });
  try {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`http://127.0.0.1:${server.address().port}/www/blank.html`);
    const r = await page.evaluate(soakInPage, { ...SOAK_MODEL, runs });
    console.log(`chromium webgpu: ${r.runs} runs of ${SOAK_MODEL.url} (${r.shapes} shapes, ${r.msPerRun.toFixed(1)} ms/run); ` +
      `after the warm-up: JS heap ${r.heapDeltaMiB.toFixed(3)} MiB, GPU live ${r.gpuAllocatedDeltaMiB.toFixed(3)} MiB, ` +
      `GPU held from the driver ${r.gpuDriverDeltaMiB.toFixed(3)} MiB (${r.gpuDriverMiB.toFixed(1)} MiB), ` +
      `${r.buffersCreatedAfterWarmUp} buffers created`);
  } finally {
    await browser.close();
    server.close();
  }
}
