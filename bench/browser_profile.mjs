// Per-node GPU times of one pt2web WebGPU run in headless Chromium (SwiftShader), from the
// package's profiler: where a browser run spends its time, which the native lavapipe profile
// (`pt2web run --profile`) only approximates.
//   node bench/browser_profile.mjs [--model resnet18] [--top 30] [--trace out.json]
// Chromium is started with timestamp queries allowed (developer features), so kernels are timed
// by GPU timestamps where SwiftShader offers them and by the host clock otherwise (the header
// says which). Prints the time per op target and the most expensive nodes of a warm run.
import { chromium } from 'playwright-core';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '../scripts/serve.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (k, d) => { const i = process.argv.indexOf(`--${k}`); return i > 0 ? process.argv[i + 1] : d; };
const MODEL = arg('model', 'resnet18');
const TOP = Number(arg('top', 30));
const TRACE = arg('trace', '');

async function profileInPage({ meta }) {
  const { load } = await import('/js/index.js');
  const st = await import('/tests/js/st.mjs');
  const get = async (f) => new Uint8Array(await (await fetch(`/models/${f}`)).arrayBuffer());
  const c = meta.programs.model.io_cases[0];
  const io = st.parseSafetensors(await get(c.file));
  const leaves = c.inputs.map((i) => io[i.key]);
  const model = await load(`/models/${meta.archive}`, { device: 'webgpu' });
  const [args, kwargs] = st.unflattenSpec(model.info.specs.inSpec, [...leaves]);
  await model.run({ args, kwargs });
  await model.run({ args, kwargs });
  model.startProfiler();
  const t = performance.now();
  await model.run({ args, kwargs });
  const wall = performance.now() - t;
  const prof = model.stopProfiler();
  const out = { wall, timing: prof.gpuTiming, summary: prof.summary, events: prof.events, trace: prof.chromeTrace, stats: model.lastRunStats() };
  model.dispose();
  return out;
}

const server = await serve(0);
const origin = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader',
    '--enable-dawn-features=allow_unsafe_apis', '--enable-webgpu-developer-features',
    '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'],
});
try {
  const page = await browser.newPage();
  await page.goto(`${origin}/www/blank.html`);
  const meta = JSON.parse(readFileSync(path.join(ROOT, '.cache', 'models', `${MODEL}.meta.json`), 'utf8'));
  const r = await page.evaluate(profileInPage, { meta });
  if (TRACE) writeFileSync(TRACE, JSON.stringify(r.trace));
  const total = r.summary.reduce((a, s) => a + s.total_ms, 0);
  console.log(`${MODEL}: warm run ${r.wall.toFixed(1)} ms wall, kernels ${total.toFixed(1)} ms (timed by ${r.timing}), ${r.stats?.gpuNodes} GPU nodes`);
  for (const s of r.summary) console.log(`${s.total_ms.toFixed(2).padStart(10)} ms ${String(s.count).padStart(4)}x  ${s.target}`);
  console.log(`\nmost expensive nodes:`);
  const ev = r.events.filter((e) => e.depth === 0).sort((a, b) => b.dur_ms - a.dur_ms).slice(0, TOP);
  for (const e of ev) console.log(`${e.dur_ms.toFixed(2).padStart(10)} ms  ${e.node.padEnd(28)} ${e.target}`);
} finally {
  await browser.close();
  server.close();
}
