// The streaming load at scale in Chromium (issue 18 item 1), run by scripts/big_archive_browser.sh:
// serves a large archive (tests/fixgen/gen_big_archive.py) with Range requests, loads it in a
// page on WebGPU by `load(url)` (streamed: the directory, then each entry's range), runs it,
// compares with eager PyTorch's output (its .io.safetensors) and prints the load time, the
// bytes served and the page's wasm memory (`wasmMemoryBytes()`); then the same in a Worker
// through the archive cache (OPFS), twice (downloaded and cached, the second read from the cached file
// with FileReaderSync). On WebGPU JS holds each weight until its upload, so wasm memory (which
// never shrinks) grows by about the largest entry, not the archive: it fails past 2 entries.
//   node scripts/big_archive_browser.mjs DIR   (DIR holds big.pt2 and big.io.safetensors)
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, WEBGPU_ARGS, serveFiles } from '../tests/browser/chromium.mjs';
import { route, sendRanged } from './serve.mjs';

const dir = path.resolve(process.argv[2] ?? '.cache/big');
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
try {
  const page = await browser.newPage();
  page.on('response', (r) => { if (r.status() >= 400) console.log(`page: HTTP ${r.status()} for ${r.url()}`); });
  await page.goto(`${site.origin}/www/blank.html`);
  const r = await page.evaluate(async () => {
    const { load, wasmMemoryBytes, init } = await import('/js/index.js');
    const st = await import('/tests/js/st.mjs');
    await init();
    const before = wasmMemoryBytes();
    const t0 = performance.now();
    const m = await load('/big.pt2', { device: 'webgpu', cache: 'none' });
    const loadMs = performance.now() - t0;
    const io = st.parseSafetensors(new Uint8Array(await (await fetch('/big.io.safetensors')).arrayBuffer()));
    const got = st.flattenOut(await m.run([io.input_0]))[0];
    st.assertClose('big streamed on WebGPU', got, io.output_0);
    const maxDiff = Math.max(...Array.from(got.data, (v, i) => Math.abs(v - io.output_0.data[i])));
    const r = { device: m.device, loadMs, maxDiff, wasmBefore: before, wasmAfter: wasmMemoryBytes() };
    m.dispose();
    return r;
  });
  const size = statSync(archive).size;
  const mib = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  console.log(`archive ${mib(size)}: loaded on ${r.device} in ${(r.loadMs / 1000).toFixed(2)} s by ${served.requests} range requests, ${mib(served.bytes)} served`);
  console.log(`wasm memory: ${mib(r.wasmBefore)} before the load, ${mib(r.wasmAfter)} after the load and run (+${mib(r.wasmAfter - r.wasmBefore)}; largest entry ${mib(ENTRY)})`);
  console.log(`output vs PyTorch: max |diff| ${r.maxDiff}`);
  assert.equal(r.device, 'webgpu');
  assert.ok(r.wasmAfter - r.wasmBefore <= 2 * ENTRY, 'wasm memory grew by more than two entries: the archive went through wasm memory');

  // In a Worker, through the archive cache: downloaded, then read from the cached file.
  Object.assign(served, { requests: 0, bytes: 0 });
  const w = await page.evaluate(() => new Promise((resolve) => {
    const worker = new Worker('/big_worker.mjs', { type: 'module' });
    worker.onmessage = (e) => { resolve(e.data); worker.terminate(); };
    worker.onerror = (e) => resolve({ ok: false, error: e.message });
    worker.postMessage('go');
  }));
  assert.ok(w.ok, w.error);
  for (const l of w.loads) {
    console.log(`worker, ${l.phases[0]}: loaded on ${l.device} in ${(l.loadMs / 1000).toFixed(2)} s, wasm memory +${mib(l.wasm - w.before)}`);
    assert.equal(l.device, 'webgpu');
    assert.ok(l.wasm - w.before <= 2 * ENTRY, `worker (${l.phases}): wasm memory grew by ${mib(l.wasm - w.before)}`);
  }
  assert.deepEqual(w.loads.map((l) => l.phases[0]), ['download', 'cache']);
  console.log(`worker: ${mib(served.bytes)} of the archive served for both loads (the second reads the cache)`);
  assert.ok(served.bytes <= size, 'the cached load read model bytes from the network');
} finally {
  await browser.close();
  site.server.close();
}
