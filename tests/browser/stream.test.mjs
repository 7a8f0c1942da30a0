// The streaming load of `load(url)` in Chromium (issue 18 item 1), against a server that counts
// the requests and bytes of the archive it serves and answers Range requests or not: with
// ranges the archive is read by range requests (its end, then what the load needs), about its
// size in all, and runs like PyTorch on WebGPU and on the CPU (tests/fixgen/gen_fixtures.py's
// io); without ranges the whole archive is downloaded once, kept in the network's pieces. With the archive cache
// the streamed download is kept, and the second load reads no model bytes from the network.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { WEBGPU_ARGS, chromiumSuite } from './chromium.mjs';
import { sendRanged } from '../../scripts/serve.mjs';
import { FIXTURES } from '../js/helpers.mjs';

// tiny_gpt2_core: 285 KB, so past the 64 KiB tail the first request reads.
const STEM = 'tiny_gpt2_core';
const ARCHIVE = readFileSync(path.join(FIXTURES, `${STEM}.pt2`));
// `failFrom`: range requests from this one on (counted from 1) answer HTTP 500.
const served = { ranges: true, gets: 0, rangeGets: 0, heads: 0, bytes: 0, failFrom: Infinity };

// /model.pt2 (tiny_gpt2_core), or /ranged/NAME.pt2: the fixture NAME.
function archive(req, res) {
  const name = new URL(req.url, 'http://x').pathname;
  const ranged = /^\/ranged\/(\w+)\.pt2$/.exec(name);
  if (name !== '/model.pt2' && !ranged) return false;
  const bytes = ranged ? readFileSync(path.join(FIXTURES, `${ranged[1]}.pt2`)) : ARCHIVE;
  if (req.method === 'HEAD') served.heads += 1;
  else if (served.ranges && req.headers.range) served.rangeGets += 1;
  else served.gets += 1;
  const headers = { 'content-type': 'application/octet-stream', etag: '"v1"', 'cache-control': 'no-store' };
  if (!served.ranges) {
    const body = req.method === 'HEAD' ? Buffer.alloc(0) : bytes;
    res.writeHead(200, { ...headers, 'content-length': bytes.length });
    res.end(body);
    served.bytes += body.length;
    return true;
  }
  if (req.headers.range && served.rangeGets >= served.failFrom) {
    res.writeHead(500);
    res.end();
    return true;
  }
  served.bytes += sendRanged(req, res, bytes, headers);
  return true;
}
// The weights of tiny_gpt2_core past 200 bytes (7 of 16: 1-4 KiB) left to the build's steps
// (the requests before the build not joined across them).
const LAZY_ALL = { small: 0, head: 200, gap: 0 };
const reset = (o = {}) => Object.assign(served, { ranges: true, gets: 0, rangeGets: 0, heads: 0, bytes: 0, failFrom: Infinity }, o);

const suite = chromiumSuite(WEBGPU_ARGS, archive);

// One load of /model.pt2 (or `url`, the fixture `stem`) in the page and a run of the
// fixture's io case against PyTorch's output (st.assertClose throws past its tolerance); the
// phases onProgress saw. `tuning`: the lazy load's sizes (js/index.js LAZY) for this load.
async function loadIn(page, options, { stem = STEM, url = '/model.pt2', tuning } = {}) {
  return page.evaluate(async ({ stem, url, options, tuning }) => {
    const { load, __lazyTuningForTest } = await import('/js/index.js');
    const st = await import('/tests/js/st.mjs');
    const phases = [];
    let downloaded = 0;
    const before = tuning ? __lazyTuningForTest(tuning) : null;
    const m = await load(url, {
      ...options,
      onProgress: (_l, _t, p) => {
        if (phases.at(-1) !== p.phase) phases.push(p.phase);
        if (p.phase === 'download') downloaded = p.loaded;
      },
    }).finally(() => { if (before) __lazyTuningForTest(before); });
    try {
      const io = st.parseSafetensors(new Uint8Array(await (await fetch(`/fixtures/${stem}.io.safetensors`)).arrayBuffer()));
      const got = st.flattenOut(await m.run([io.input_0]));
      st.assertClose(`${stem} streamed on ${m.device}`, got[0], io.output_0);
      return { phases, downloaded, device: m.device };
    } finally {
      m.dispose();
    }
  }, { stem, url, options, tuning });
}

for (const device of ['webgpu', 'cpu']) {
  test(`a server with Range requests: load(url) streams the archive on ${device}, reading about its size once, and runs like PyTorch`, async () => {
    const { page, errors } = await suite.newPage();
    reset();
    const r = await loadIn(page, { device, cache: 'none' });
    assert.equal(r.device, device);
    assert.deepEqual(r.phases, ['download', 'upload']);
    assert.equal(served.gets, 0, 'no request for the whole archive');
    assert.ok(served.rangeGets >= 2, `${served.rangeGets} range requests: the end, then the ranges needed`);
    // The tail and the needed ranges overlap nothing: at most the archive's size, and most of it.
    assert.ok(served.bytes <= ARCHIVE.length && served.bytes > 0.9 * ARCHIVE.length, `${served.bytes} bytes read of a ${ARCHIVE.length}-byte archive`);
    // On WebGPU the weights are read as they are uploaded ('upload' progress); here every
    // record is under the lazy load's 16 KiB, so all is read before.
    assert.equal(r.downloaded, served.bytes, "onProgress's download bytes are the bytes read");
    assert.deepEqual(errors, []);
    await page.context().close();
  });
}

for (const device of ['webgpu', 'cpu']) {
  test(`a server without Range requests on ${device}: the whole archive is downloaded once, in pieces, and loaded from them; with the cache, the second load reads no model bytes`, async () => {
    const { page, errors } = await suite.newPage();
    reset({ ranges: false });
    const r = await loadIn(page, { device, cache: 'none' }, { tuning: LAZY_ALL });
    assert.equal(r.device, device);
    assert.deepEqual(r.phases, ['download', 'upload']);
    assert.deepEqual([served.gets, served.bytes], [1, ARCHIVE.length]);
    reset({ ranges: false });
    const first = await loadIn(page, { device, cache: 'auto' }, { tuning: LAZY_ALL });
    assert.deepEqual(first.phases, ['download', 'upload']);
    assert.deepEqual([served.gets, served.bytes], [1, ARCHIVE.length]);
    const second = await loadIn(page, { device, cache: 'auto' }, { tuning: LAZY_ALL });
    assert.deepEqual(second.phases, ['cache', 'upload']);
    assert.deepEqual([served.gets, served.bytes, served.heads], [1, ARCHIVE.length, 1], 'one HEAD request, no model bytes');
    await page.evaluate(async () => (await import('/js/index.js')).clearCache('/model.pt2'));
    assert.deepEqual(errors, []);
    await page.context().close();
  });
}

for (const [store, device] of [['auto', 'cpu'], ['opfs', 'cpu'], ['auto', 'webgpu'], ['opfs', 'webgpu']]) {
  test(`streamed into the archive cache (${store === 'auto' ? 'Cache API' : 'OPFS'}) on ${device}: the archive read once; the second load reads no model bytes from the network`, async () => {
    const { page, errors } = await suite.newPage();
    reset();
    // The download goes to the cache only, and the build reads each weight from the cached
    // file (every weight left to the steps here).
    const options = { device, cache: store };
    const tuning = LAZY_ALL;
    const first = await loadIn(page, options, { tuning });
    assert.equal(first.device, device);
    assert.deepEqual(first.phases, ['download', 'upload']);
    assert.equal(served.gets, 0);
    // Every byte once for the cache's copy (the first request's 64 KiB tail included).
    assert.equal(served.bytes, ARCHIVE.length);
    const read = [served.rangeGets, served.bytes];
    const second = await loadIn(page, options, { tuning });
    assert.deepEqual(second.phases, ['cache', 'upload']);
    assert.deepEqual([served.rangeGets, served.bytes, served.gets, served.heads], [...read, 0, 1], 'one HEAD request, no model bytes');
    await page.evaluate(async () => (await import('/js/index.js')).clearCache('/model.pt2'));
    assert.deepEqual(errors, []);
    await page.context().close();
  });
}


for (const device of ['webgpu', 'cpu']) {
  test(`${device} on the main thread: each weight read just before the step that takes it (none read ahead, or read ahead), runs like PyTorch`, async () => {
    const { page, errors } = await suite.newPage();
    const counts = [];
    // No read-ahead; 1.5 weights ahead (here less than a step's record at times: the steps
    // overtake the read-ahead, which must not read again what they took); 64 MiB ahead.
    for (const ahead of [{ ahead: 0, aheadWeights: 0 }, { ahead: 0 }, { ahead: 64 * 2 ** 20 }]) {
      reset();
      const r = await loadIn(page, { device, cache: 'none' }, { tuning: { ...LAZY_ALL, ...ahead } });
      assert.equal(r.device, device);
      assert.deepEqual(r.phases, ['download', 'upload']);
      assert.equal(served.gets, 0);
      // Nothing read twice: at most the archive, and the records the heads left, by their own requests.
      assert.ok(served.bytes <= ARCHIVE.length && served.bytes > 0.9 * ARCHIVE.length, `${served.bytes} bytes read of ${ARCHIVE.length}`);
      assert.ok(r.downloaded < served.bytes, 'the weights are read in the upload phase');
      counts.push(served.rangeGets);
    }
    // The 7 weights past the heads: one request each (no read ahead), or a few joined.
    assert.ok(counts[0] >= 2 + 7, `${counts[0]} range requests without read-ahead`);
    assert.deepEqual(errors, []);
    await page.context().close();
  });

  test(`${device} on the main thread: graph passes that read weights (const_fold_core) load lazily and run like PyTorch`, async () => {
    const { page, errors } = await suite.newPage();
    reset();
    const r = await loadIn(page, { device, cache: 'none' }, { stem: 'const_fold_core', url: '/ranged/const_fold_core.pt2', tuning: { small: 0, head: 100, gap: 0, ahead: 0, aheadWeights: 0 } });
    assert.equal(r.device, device);
    const size = readFileSync(path.join(FIXTURES, 'const_fold_core.pt2')).length;
    assert.ok(served.bytes <= size, `${served.bytes} bytes read of ${size}`);
    assert.deepEqual(errors, []);
    await page.context().close();
  });
}

test("a WebGPU build refused as a device problem (float16 on a GPUDevice without shader-f16) falls back to the CPU on the same stream: the archive is not read again", async () => {
  const { page, errors } = await suite.newPage();
  reset();
  const r = await page.evaluate(async ({ tuning }) => {
    const { load, gpu, __lazyTuningForTest } = await import('/js/index.js');
    // The app's own device, made without shader-f16: a float16 build on it is refused.
    const adapter = await navigator.gpu.requestAdapter();
    await gpu.fromExternalDevice(await adapter.requestDevice());
    const before = __lazyTuningForTest(tuning);
    const phases = [];
    let m;
    try {
      m = await load('/model.pt2', { device: 'auto', dtype: 'float16', cache: 'none', onProgress: (_l, _t, p) => { if (phases.at(-1) !== p.phase) phases.push(p.phase); } });
    } finally {
      __lazyTuningForTest(before);
    }
    const st = await import('/tests/js/st.mjs');
    const io = st.parseSafetensors(new Uint8Array(await (await fetch('/fixtures/tiny_gpt2_core.io.safetensors')).arrayBuffer()));
    const got = st.flattenOut(await m.run([io.input_0]))[0];
    const out = { device: m.device, note: m.deviceNote, phases, got: Array.from(got.data) };
    m.dispose();
    // The same program loaded on the CPU directly (from the fixture's bytes): the model the
    // fallback built must be this one.
    const direct = await load(new Uint8Array(await (await fetch('/fixtures/tiny_gpt2_core.pt2')).arrayBuffer()), { device: 'cpu', dtype: 'float16' });
    out.want = Array.from(st.flattenOut(await direct.run([io.input_0]))[0].data);
    direct.dispose();
    return out;
  }, { tuning: LAZY_ALL });
  assert.equal(r.device, 'cpu');
  assert.match(r.note, /fell back to the CPU backend: .*shader-f16/);
  // The WebGPU build was refused before its first step: the CPU build reads each weight once.
  assert.equal(served.gets, 0);
  assert.ok(served.bytes <= ARCHIVE.length, `${served.bytes} bytes read of a ${ARCHIVE.length}-byte archive`);
  assert.deepEqual(r.got, r.want);
  assert.deepEqual(errors, []);
  await page.context().close();
});

test('a range request that fails mid-load rejects with a Pt2WebError (ARCHIVE), and the next load works', async () => {
  const { page, errors } = await suite.newPage();
  // The 6th request (a weight's, read by a step: the tail and the records before the build
  // take fewer) fails.
  for (const [device, failFrom] of [['webgpu', 6], ['cpu', 6]]) {
    reset({ failFrom });
    const err = await page.evaluate(async ({ device, tuning }) => {
      const { load, __lazyTuningForTest } = await import('/js/index.js');
      const before = __lazyTuningForTest(tuning);
      try {
        (await load('/model.pt2', { device, cache: 'none' })).dispose();
        return null;
      } catch (e) {
        return { name: e.name, code: e.code, message: e.message };
      } finally {
        __lazyTuningForTest(before);
      }
    }, { device, tuning: { ...LAZY_ALL, ahead: 0, aheadWeights: 0 } });
    assert.ok(err, `${device}: the load failed`);
    assert.equal(err.name, 'Pt2WebError');
    assert.equal(err.code, 'ARCHIVE', err.message);
    assert.match(err.message, /HTTP 500/);
    reset();
    const r = await loadIn(page, { device, cache: 'none' }, { tuning: LAZY_ALL });
    assert.equal(r.device, device);
  }
  assert.deepEqual(errors, []);
  await page.context().close();
});

test('openArchive(url) / listPrograms(url) read the directory and small records by range requests, not the weights', async () => {
  const { page, errors } = await suite.newPage();
  const meta = (n) => JSON.parse(readFileSync(path.join(FIXTURES, `${n}.meta.json`), 'utf8'));
  for (const name of ['multi_program', 'extra_files']) {
    reset();
    const r = await page.evaluate(async (name) => {
      const { openArchive, listPrograms, load } = await import('/js/index.js');
      const url = `/ranged/${name}.pt2`;
      const names = await listPrograms(url);
      const archive = await openArchive(url, { cache: 'none' });
      const files = Object.fromEntries(Object.entries(archive.extraFiles()).map(([k, v]) => [k, Array.from(v)]));
      const m = await load(archive, { device: 'cpu', cache: 'none', program: names[0] });
      const inputs = m.info.inputs.length;
      m.dispose();
      return { names, files, bytes: archive.bytes, inputs };
    }, name);
    const want = meta(name);
    assert.deepEqual(r.names.sort(), Object.keys(want.programs).sort(), name);
    assert.equal(r.bytes, null, 'opened by ranges: no bytes held');
    const size = readFileSync(path.join(FIXTURES, `${name}.pt2`)).length;
    for (const [f, w] of Object.entries(want.extra_files ?? {})) assert.equal(Buffer.from(r.files[f]).toString(), w.content, f);
    assert.equal(served.gets, 0);
    assert.ok(r.inputs > 0);
    // listPrograms and openArchive: the 64 KiB tail and one request for the small records
    // each; the load by ranges after.
    console.log(`${name}: ${served.rangeGets} range requests, ${served.bytes} bytes of a ${size}-byte archive (two opens and a load)`);
  }
  // decode_mlp's 72 KiB weight (the 64 KiB tail holds part of it) is not read by listPrograms.
  reset();
  const bytes = await page.evaluate(async () => {
    const { listPrograms } = await import('/js/index.js');
    return (await listPrograms('/ranged/decode_mlp.pt2')).length;
  });
  const size = readFileSync(path.join(FIXTURES, 'decode_mlp.pt2')).length;
  assert.equal(bytes, 1);
  assert.ok(served.rangeGets <= 2, `${served.rangeGets} range requests`);
  assert.ok(served.bytes < 0.8 * size, `${served.bytes} bytes read of ${size}: its weight was not`);
  assert.deepEqual(errors, []);
  await page.context().close();
});
