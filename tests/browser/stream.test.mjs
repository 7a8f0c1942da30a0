// The streaming load of `load(url)` in Chromium (issue 18 item 1), against a server that counts
// the requests and bytes of the archive it serves and answers Range requests or not: with
// ranges the archive is read by range requests (its end, then what the load needs), about its
// size in all, and runs like PyTorch on WebGPU and on the CPU (tests/fixgen/gen_fixtures.py's
// io); without ranges the whole archive is downloaded once, as before. With the archive cache
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
const served = { ranges: true, gets: 0, rangeGets: 0, heads: 0, bytes: 0 };

function archive(req, res) {
  if (new URL(req.url, 'http://x').pathname !== '/model.pt2') return false;
  if (req.method === 'HEAD') served.heads += 1;
  else if (served.ranges && req.headers.range) served.rangeGets += 1;
  else served.gets += 1;
  const headers = { 'content-type': 'application/octet-stream', etag: '"v1"', 'cache-control': 'no-store' };
  if (!served.ranges) {
    const body = req.method === 'HEAD' ? Buffer.alloc(0) : ARCHIVE;
    res.writeHead(200, { ...headers, 'content-length': ARCHIVE.length });
    res.end(body);
    served.bytes += body.length;
    return true;
  }
  served.bytes += sendRanged(req, res, ARCHIVE, headers);
  return true;
}

const suite = chromiumSuite(WEBGPU_ARGS, archive);

// One load of /model.pt2 in the page and a run of the fixture's io case against PyTorch's
// output (st.assertClose throws past its tolerance); the phases onProgress saw.
async function loadIn(page, options) {
  return page.evaluate(async ({ stem, options }) => {
    const { load } = await import('/js/index.js');
    const st = await import('/tests/js/st.mjs');
    const phases = [];
    let downloaded = 0;
    const m = await load('/model.pt2', {
      ...options,
      onProgress: (_l, _t, p) => {
        if (phases.at(-1) !== p.phase) phases.push(p.phase);
        if (p.phase === 'download') downloaded = p.loaded;
      },
    });
    try {
      const io = st.parseSafetensors(new Uint8Array(await (await fetch(`/fixtures/${stem}.io.safetensors`)).arrayBuffer()));
      const got = st.flattenOut(await m.run([io.input_0]));
      st.assertClose(`${stem} streamed on ${m.device}`, got[0], io.output_0);
      return { phases, downloaded, device: m.device };
    } finally {
      m.dispose();
    }
  }, { stem: STEM, options });
}

for (const device of ['webgpu', 'cpu']) {
  test(`a server with Range requests: load(url) streams the archive on ${device}, reading about its size once, and runs like PyTorch`, async () => {
    const { page, errors } = await suite.newPage();
    Object.assign(served, { ranges: true, gets: 0, rangeGets: 0, heads: 0, bytes: 0 });
    const r = await loadIn(page, { device, cache: 'none' });
    assert.equal(r.device, device);
    assert.deepEqual(r.phases, ['download', 'upload']);
    assert.equal(served.gets, 0, 'no request for the whole archive');
    assert.ok(served.rangeGets >= 2, `${served.rangeGets} range requests: the end, then the ranges needed`);
    // The tail and the needed ranges overlap nothing: at most the archive's size, and most of it.
    assert.ok(served.bytes <= ARCHIVE.length && served.bytes > 0.9 * ARCHIVE.length, `${served.bytes} bytes read of a ${ARCHIVE.length}-byte archive`);
    assert.equal(r.downloaded, served.bytes, "onProgress's download bytes are the bytes read");
    assert.deepEqual(errors, []);
    await page.context().close();
  });
}

test('a server without Range requests: the whole archive is downloaded once, as before', async () => {
  const { page, errors } = await suite.newPage();
  Object.assign(served, { ranges: false, gets: 0, rangeGets: 0, heads: 0, bytes: 0 });
  const r = await loadIn(page, { device: 'webgpu', cache: 'none' });
  assert.deepEqual(r.phases, ['download', 'upload']);
  assert.deepEqual([served.gets, served.bytes], [1, ARCHIVE.length]);
  assert.deepEqual(errors, []);
  await page.context().close();
});

for (const store of ['auto', 'opfs']) {
  test(`streamed into the archive cache (${store === 'auto' ? 'Cache API' : 'OPFS'}): the archive read once; the second load reads no model bytes from the network`, async () => {
    const { page, errors } = await suite.newPage();
    Object.assign(served, { ranges: true, gets: 0, rangeGets: 0, heads: 0, bytes: 0 });
    const options = { device: 'cpu', cache: store };
    const first = await loadIn(page, options);
    assert.deepEqual(first.phases, ['download', 'upload']);
    assert.equal(served.gets, 0);
    // Every byte once for the cache's copy (the first request's 64 KiB tail included).
    assert.equal(served.bytes, ARCHIVE.length);
    const read = [served.rangeGets, served.bytes];
    const second = await loadIn(page, options);
    assert.deepEqual(second.phases, ['cache', 'upload']);
    assert.deepEqual([served.rangeGets, served.bytes, served.gets, served.heads], [...read, 0, 1], 'one HEAD request, no model bytes');
    await page.evaluate(async () => (await import('/js/index.js')).clearCache('/model.pt2'));
    assert.deepEqual(errors, []);
    await page.context().close();
  });
}
