// The streaming load at scale in Chromium (issue 18 item 1), run by scripts/big_archive_browser.sh:
// serves a large archive (tests/fixgen/gen_big_archive.py) with Range requests, loads it in a
// page on WebGPU by `load(url)` (streamed: the directory, then each entry's range), runs it,
// compares with eager PyTorch's output (its .io.safetensors) and prints the load time, the
// bytes served, the page's wasm memory (`wasmMemoryBytes()`) and its JS memory's peak during
// the load (DevTools protocol: V8 heap and ArrayBuffers); then the same on the CPU backend;
// then on WebGPU in a Worker through the archive cache (OPFS), twice (downloaded and cached,
// the second read from the cached file with FileReaderSync). The page reads each weight just
// before the step that takes it and drops it after, so JS memory grows by about the largest
// entry, not the archive, and so does wasm memory (which never shrinks) on WebGPU; on the CPU
// wasm memory holds the weights once. It fails past 2 entries (JS, WebGPU's wasm memory), or
// past the weights and one entry (the CPU's wasm memory).
//   node scripts/big_archive_browser.mjs DIR   (DIR holds big.pt2 and big.io.safetensors)
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, WEBGPU_ARGS, serveFiles } from '../tests/browser/chromium.mjs';
import { route, sendRanged } from './serve.mjs';

const dir = path.resolve(process.argv[2] ?? '.cache/big');
// The package the page loads (PT2WEB_JS: another copy, to compare with an older one).
const JS = process.env.PT2WEB_JS ?? '/js/index.js';
// PT2WEB_LAZY='{"aheadWeights": 1}': the lazy load's sizes (js/index.js LAZY) for the page loads.
const LAZY_TUNING = process.env.PT2WEB_LAZY ? JSON.parse(process.env.PT2WEB_LAZY) : null;
const archive = path.join(dir, 'big.pt2');
const ENTRY = 64 * 2 ** 20; // each table of tests/fixgen/gen_big_archive.py
const served = { requests: 0, bytes: 0 };
const site = await serveFiles(route, (req, res) => {
  const name = new URL(req.url, 'http://x').pathname;
  if (name === '/big_worker.mjs') {
    res.writeHead(200, { 'content-type': 'text/javascript' });
    res.end(readFileSync(new URL('./big_archive_worker.mjs', import.meta.url)));
    return true;
  }
  if (name !== '/big.pt2' && name !== '/big.io.safetensors') return false;
  const bytes = sendRanged(req, res, path.join(dir, name.slice(1)), { 'content-type': 'application/octet-stream', 'cache-control': 'no-store', etag: '"big"' });
  if (name === '/big.pt2') {
    served.requests += 1;
    served.bytes += bytes;
  }
  return true;
});
const browser = await chromium.launch({ executablePath: CHROMIUM, args: WEBGPU_ARGS, headless: true });
const size = statSync(archive).size;
const mib = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;

// One load of the archive on `device` in a new page's main thread, run against PyTorch:
// the load time, the bytes served, wasm memory before and after, and the JS memory peak.
async function pageLoad(device) {
  Object.assign(served, { requests: 0, bytes: 0 });
  const page = await browser.newPage();
  page.on('response', (r) => { if (r.status() >= 400) console.log(`page: HTTP ${r.status()} for ${r.url()}`); });
  await page.goto(`${site.origin}/www/blank.html`);
  // The page's JS memory, from the DevTools protocol: V8's heap and the ArrayBuffers' backing
  // stores (where fetched bytes live), sampled every 20 ms while the load runs (between the
  // main thread's tasks: a weight's upload is one task).
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('HeapProfiler.enable');
  const jsHeap = async () => {
    const h = await cdp.send('Runtime.getHeapUsage');
    return h.usedSize + (h.backingStorageSize ?? 0);
  };
  await page.evaluate(async (js) => {
    const { wasmMemoryBytes, init } = await import(js);
    await init();
    window.wasmMemoryBytes = wasmMemoryBytes;
  }, JS);
  await cdp.send('HeapProfiler.collectGarbage');
  const heapBefore = await jsHeap();
  const wasmBefore = await page.evaluate(() => window.wasmMemoryBytes());
  let heapPeak = heapBefore;
  let sampling = true;
  // Each sample after a full GC: the bytes the load keeps alive (a released piece is garbage
  // until V8 collects it, which it does when it likes).
  const sampler = (async () => {
    while (sampling) {
      await cdp.send('HeapProfiler.collectGarbage').catch(() => {});
      heapPeak = Math.max(heapPeak, await jsHeap().catch(() => 0));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const loadMs = await page.evaluate(async ({ js, device, tuning }) => {
    const { load, __lazyTuningForTest } = await import(js);
    if (tuning) __lazyTuningForTest(tuning);
    const t0 = performance.now();
    window.model = await load('/big.pt2', { device, cache: 'none' });
    return performance.now() - t0;
  }, { js: JS, device, tuning: LAZY_TUNING }).finally(() => { sampling = false; });
  await sampler;
  await cdp.send('HeapProfiler.collectGarbage');
  const heapAfter = await jsHeap();
  const r = await page.evaluate(async () => {
    const st = await import('/tests/js/st.mjs');
    const m = window.model;
    const io = st.parseSafetensors(new Uint8Array(await (await fetch('/big.io.safetensors')).arrayBuffer()));
    const got = st.flattenOut(await m.run([io.input_0]))[0];
    st.assertClose(`big streamed on ${m.device}`, got, io.output_0);
    const maxDiff = Math.max(...Array.from(got.data, (v, i) => Math.abs(v - io.output_0.data[i])));
    const r = { device: m.device, maxDiff, wasmAfter: window.wasmMemoryBytes() };
    m.dispose();
    window.model = null;
    return r;
  });
  await page.close();
  const jsPeak = heapPeak - heapBefore;
  console.log(`${device}, main thread: archive ${mib(size)} loaded on ${r.device} in ${(loadMs / 1000).toFixed(2)} s by ${served.requests} range requests, ${mib(served.bytes)} served`);
  console.log(`${device}: wasm memory ${mib(wasmBefore)} before the load, ${mib(r.wasmAfter)} after the load and run (+${mib(r.wasmAfter - wasmBefore)}; largest entry ${mib(ENTRY)})`);
  console.log(`${device}: output vs PyTorch: max |diff| ${r.maxDiff}`);
  console.log(`${device}: JS memory (V8 heap + ArrayBuffers, live after a GC): peak +${mib(jsPeak)} during the load, +${mib(heapAfter - heapBefore)} after it (largest entry ${mib(ENTRY)})`);
  assert.equal(r.device, device);
  assert.ok(jsPeak <= 2 * ENTRY, `${device}: JS memory grew by more than two entries during the load: the archive was held in JS`);
  return { wasm: r.wasmAfter - wasmBefore };
}

try {
  // On WebGPU wasm memory grows by about one entry (the weights live on the GPU); on the CPU
  // by the weights the session keeps, and no second copy (the archive's bytes on their way).
  const gpu = await pageLoad('webgpu');
  assert.ok(gpu.wasm <= 2 * ENTRY, 'webgpu: wasm memory grew by more than two entries: the archive went through wasm memory');
  const cpu = await pageLoad('cpu');
  assert.ok(cpu.wasm <= size + ENTRY, `cpu: wasm memory grew by ${mib(cpu.wasm)}, more than the weights (${mib(size)}) and one entry: a second copy`);

  // In a Worker, through the archive cache: downloaded, then read from the cached file.
  Object.assign(served, { requests: 0, bytes: 0 });
  const page = await browser.newPage();
  await page.goto(`${site.origin}/www/blank.html`);
  const w = await page.evaluate(() => new Promise((resolve) => {
    const worker = new Worker('/big_worker.mjs', { type: 'module' });
    worker.onmessage = (e) => { resolve(e.data); worker.terminate(); };
    worker.onerror = (e) => resolve({ ok: false, error: e.message });
    worker.postMessage('go');
  }));
  assert.ok(w.ok, w.error);
  // Each load's growth over what the worker had before it (the second load's weights may not
  // fit where the first's went: the first model's own allocations split that space).
  let before = w.before;
  for (const l of w.loads) {
    console.log(`worker, ${l.phases[0]}: loaded on ${l.device} in ${(l.loadMs / 1000).toFixed(2)} s, wasm memory +${mib(l.wasm - before)} (+${mib(l.wasm - w.before)} since the worker's first load)`);
    assert.equal(l.device, 'webgpu');
    assert.ok(l.wasm - before <= 2 * ENTRY, `worker (${l.phases}): wasm memory grew by ${mib(l.wasm - before)} in one load`);
    before = l.wasm;
  }
  assert.deepEqual(w.loads.map((l) => l.phases[0]), ['download', 'cache']);
  console.log(`worker: ${mib(served.bytes)} of the archive served for both loads (the second reads the cache)`);
  assert.ok(served.bytes <= size, 'the cached load read model bytes from the network');
} finally {
  await browser.close();
  site.server.close();
}
