// The streaming load at scale in Chromium (issue 18 item 1), run by scripts/big_archive_browser.sh:
// serves a large archive (tests/fixgen/gen_big_archive.py) with Range requests, loads it in a
// page on WebGPU by `load(url)` (streamed: the directory, then each entry's range), runs it,
// compares with eager PyTorch's output (its .io.safetensors) and prints the load time, the
// bytes served and the page's wasm memory (`wasmMemoryBytes()`).
//   node scripts/big_archive_browser.mjs DIR   (DIR holds big.pt2 and big.io.safetensors)
import { statSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, WEBGPU_ARGS, serveFiles } from '../tests/browser/chromium.mjs';
import { route, sendRanged } from './serve.mjs';

const dir = path.resolve(process.argv[2] ?? '.cache/big');
const archive = path.join(dir, 'big.pt2');
const served = { requests: 0, bytes: 0 };
const site = await serveFiles(route, (req, res) => {
  const name = new URL(req.url, 'http://x').pathname;
  if (name !== '/big.pt2' && name !== '/big.io.safetensors') return false;
  const bytes = sendRanged(req, res, path.join(dir, name.slice(1)), { 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
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
  console.log(`wasm memory: ${mib(r.wasmBefore)} before the load, ${mib(r.wasmAfter)} after the load and run`);
  console.log(`output vs PyTorch: max |diff| ${r.maxDiff}`);
} finally {
  await browser.close();
  site.server.close();
}
