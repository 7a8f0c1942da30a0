// The multi-threaded WebAssembly build (pkg/threads/) in Chromium: on a cross-origin isolated
// page `init` starts its Web Worker pool and the CPU backend splits its kernels over it; the
// fixture suite must still match PyTorch. On a page without the COOP/COEP headers the package
// falls back to the single-threaded build and says why. Chromium has relaxed SIMD: both
// pages get the relaxed-SIMD builds (pkg/threads-relaxed/, pkg/relaxed/) where they are built.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { serve } from '../../scripts/serve.mjs';
import { ROOT, metas } from '../js/helpers.mjs';
import { runFixtureInPage } from './fixture_page.mjs';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update',
  '--no-first-run', '--disable-sync', '--disable-quic'];
const BUILT = ['threads', 'threads-relaxed'].some((d) => existsSync(path.join(ROOT, 'pkg', d, 'pt2web_bg.wasm')));
// The relaxed-SIMD builds (Chromium has relaxed SIMD, so the package picks them when built).
const RELAXED = existsSync(path.join(ROOT, 'pkg', 'threads-relaxed', 'pt2web_bg.wasm')) ? 'relaxed' : 'simd128';
const RELAXED_SINGLE = existsSync(path.join(ROOT, 'pkg', 'relaxed', 'pt2web_bg.wasm')) ? 'relaxed' : 'simd128';
let isolated;
let plain;
let browser;

before(async () => {
  isolated = await serve(0, { isolated: true });
  plain = await serve(0);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});
after(async () => {
  await browser?.close();
  isolated?.close();
  plain?.close();
});

async function open(server) {
  const page = await (await browser.newContext()).newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`http://127.0.0.1:${server.address().port}/www/blank.html`);
  return { page, errors };
}

test('on a cross-origin isolated page the CPU backend runs on 2 threads and matches PyTorch', { skip: !BUILT && 'no threaded build in pkg/ (scripts/build_wasm.sh)' }, async () => {
  const { page, errors } = await open(isolated);
  const threading = await page.evaluate(async () => {
    const { init, cpuThreading } = await import('/js/index.js');
    await init({ threads: 2 });
    return { isolated: globalThis.crossOriginIsolated, ...cpuThreading() };
  });
  assert.deepEqual(threading, { isolated: true, threads: 2, build: 'threads', reason: 'cross-origin isolated page', simd: RELAXED });
  const info = await page.evaluate(async () => {
    const { load } = await import('/js/index.js');
    const model = await load(new Uint8Array(await (await fetch('/fixtures/dyn_batch.pt2')).arrayBuffer()), { device: 'cpu' });
    const { threads, threadsNote, simd } = model.info;
    model.dispose();
    return { threads, threadsNote, simd };
  });
  assert.deepEqual(info, { threads: 2, threadsNote: 'cross-origin isolated page', simd: RELAXED });
  let cases = 0;
  for (const [stem, meta] of metas()) {
    cases += await page.evaluate(runFixtureInPage, { stem, archive: meta.archive, programs: meta.programs, device: 'cpu' });
  }
  assert.ok(cases > 30, `${cases} cases`);
  assert.deepEqual(errors, []);
});

test('without COOP/COEP the package runs single-threaded and says why', async () => {
  const { page, errors } = await open(plain);
  const threading = await page.evaluate(async () => {
    const { init, cpuThreading } = await import('/js/index.js');
    await init({ threads: 2 });
    return cpuThreading();
  });
  assert.deepEqual(threading, { threads: 1, build: 'single', reason: 'the page is not cross-origin isolated (COOP/COEP headers)', simd: RELAXED_SINGLE });
  assert.deepEqual(errors, []);
});
