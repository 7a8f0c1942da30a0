// The archive cache of `load(url, { cache })` in Chromium (issue 18 item 2), against a server
// that counts the requests and bytes of the archive it serves and can change its version
// (ETag): the first load downloads, the second sends one HEAD request and reads no model bytes
// from the network, a changed ETag downloads the new archive, `clearCache` forgets. Both
// stores: the Cache API ('auto' on a page) and the origin private file system ('opfs').
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, WEBGPU_ARGS, serveFiles } from './chromium.mjs';
import { route } from '../../scripts/serve.mjs';
import { FIXTURES } from '../js/helpers.mjs';

// The archive at /model.pt2: mlp_train until `version` changes, then dyn_batch.
const ARCHIVES = { v1: readFileSync(path.join(FIXTURES, 'mlp_train.pt2')), v2: readFileSync(path.join(FIXTURES, 'dyn_batch.pt2')) };
const served = { version: 'v1', gets: 0, heads: 0, bytes: 0 };
let site;
let browser;

function archive(req, res) {
  if (new URL(req.url, 'http://x').pathname !== '/model.pt2') return false;
  const body = ARCHIVES[served.version];
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length, etag: `"${served.version}"`, 'cache-control': 'no-store' });
  if (req.method === 'HEAD') {
    served.heads += 1;
    res.end();
  } else {
    served.gets += 1;
    served.bytes += body.length;
    res.end(body);
  }
  return true;
}

before(async () => {
  site = await serveFiles(route, archive);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: WEBGPU_ARGS, headless: true });
});
after(async () => {
  await browser?.close();
  site?.server.close();
});

// One load of /model.pt2 in the page: the phases onProgress saw, the inputs and output of a run.
async function loadIn(page, options) {
  return page.evaluate(async (options) => {
    const { load } = await import('/js/index.js');
    const phases = [];
    const m = await load('/model.pt2', { device: 'cpu', ...options, onProgress: (_l, _t, p) => { if (phases.at(-1) !== p.phase) phases.push(p.phase); } });
    const st = await import('/tests/js/st.mjs');
    const io = st.parseSafetensors(new Uint8Array(await (await fetch('/fixtures/mlp_train.io.safetensors')).arrayBuffer()));
    const out = m.info.name === 'model' && m.info.inputs[0].shape.join() === '4,16' ? await m.run([io.input_0]) : null;
    const r = { phases, dynamic: m.info.dynamic_symbols.length, diff: out ? Math.max(...Array.from(out.data, (v, i) => Math.abs(v - io.output_0.data[i]))) : null };
    m.dispose();
    return r;
  }, options);
}

for (const store of ['auto', 'opfs']) {
  test(`the archive cache (${store === 'auto' ? 'Cache API' : 'OPFS'}): a second load reads no model bytes from the network; a new ETag downloads again; clearCache forgets`, async () => {
    const page = await (await browser.newContext()).newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${site.origin}/www/blank.html`);
    Object.assign(served, { version: 'v1', gets: 0, heads: 0, bytes: 0 });
    const options = store === 'auto' ? {} : { cache: 'opfs' };
    const size = ARCHIVES.v1.length;

    const first = await loadIn(page, options);
    assert.deepEqual(first.phases, ['download', 'upload']);
    assert.deepEqual([served.gets, served.bytes], [1, size]);
    assert.ok(first.diff <= 1e-5, `output off PyTorch's by ${first.diff}`);

    const second = await loadIn(page, options);
    assert.deepEqual(second.phases, ['cache', 'upload']);
    assert.deepEqual([served.gets, served.bytes, served.heads], [1, size, 1], 'one HEAD request, no model bytes');
    assert.ok(second.diff <= 1e-5, `output from the cached archive off PyTorch's by ${second.diff}`);

    served.version = 'v2';
    const changed = await loadIn(page, options);
    assert.deepEqual(changed.phases, ['download', 'upload']);
    assert.equal(served.gets, 2);
    assert.equal(changed.dynamic, 1, 'the new archive (dyn_batch) was loaded, not the cached one');
    const again = await loadIn(page, options);
    assert.deepEqual([again.phases[0], again.dynamic, served.gets], ['cache', 1, 2]);

    const cleared = await page.evaluate(async () => (await import('/js/index.js')).clearCache('/model.pt2'));
    assert.ok(cleared >= 1, `clearCache removed from ${cleared} stores`);
    const afterClear = await loadIn(page, options);
    assert.deepEqual([afterClear.phases[0], served.gets], ['download', 3]);
    const none = await loadIn(page, { cache: 'none' });
    assert.deepEqual([none.phases[0], served.gets], ['download', 4], "cache: 'none' downloads");
    await page.evaluate(async () => (await import('/js/index.js')).clearCache());
    const afterClearAll = await loadIn(page, options);
    assert.deepEqual([afterClearAll.phases[0], served.gets], ['download', 5]);
    assert.deepEqual(errors, []);
    await page.context().close();
  });
}

test('load with prepare reports the phases in order: download, upload, prepare', async () => {
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${site.origin}/www/blank.html`);
  served.version = 'v1';
  const r = await loadIn(page, { device: 'webgpu', cache: 'none', prepare: true });
  assert.deepEqual(r.phases, ['download', 'upload', 'prepare']);
  assert.ok(r.diff <= 1e-5);
  await page.context().close();
});
