// The streaming load through the wasm package's raw API (WasmStreamingLoad; the JS wrapper in
// js/index.js will drive it from HTTP range requests): every committed fixture's first io case,
// its archive handed over as the file's end, its central directory and each needed range in
// pieces, last first, runs on the CPU backend like PyTorch (tests/fixgen/gen_fixtures.py). Bad
// pieces are refused with a clear error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, FIXTURES, metas, readSafetensors, assertClose, flattenOut } from './helpers.mjs';

const glue = await import(path.join(ROOT, 'pkg', 'pt2web.js'));
await glue.default({ module_or_path: readFileSync(path.join(ROOT, 'pkg', 'pt2web_bg.wasm')) });
const { WasmStreamingLoad } = glue;

/** The browser's flow over a file's bytes: tail, directory, then every range in pieces. */
function streamed(bytes, piece = 4093) {
  const size = bytes.length;
  const [at, len] = WasmStreamingLoad.directoryRange(bytes.subarray(Math.max(0, size - 65536)), size);
  const load = new WasmStreamingLoad(bytes.slice(at, at + len), size);
  for (const r of load.neededRanges().reverse()) {
    for (let s = r.offset; s < r.offset + r.len; s += piece) {
      load.pushChunk(r.name, s, bytes.slice(s, Math.min(s + piece, r.offset + r.len)));
    }
  }
  assert.equal(load.neededRanges().length, 0);
  return load;
}

const wire = (t) => ({ dtype: t.dtype, shape: t.shape, bytes: new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength) });

test('every fixture loads from pushed pieces and runs like PyTorch', async () => {
  let cases = 0;
  for (const [stem, meta] of metas()) {
    for (const [pname, pm] of Object.entries(meta.programs)) {
      const c = pm.io_cases?.[0];
      // Plain tensor inputs only (the wrapper flattens pytrees; this is the raw API).
      const io = c && readSafetensors(path.join(FIXTURES, c.file));
      if (!c || c.inputs.some((i) => !io[i.key])) continue;
      const model = streamed(new Uint8Array(readFileSync(path.join(FIXTURES, meta.archive)))).finishCpu(pname);
      try {
        const out = await model.run(c.inputs.map((i) => wire(io[i.key])));
        c.outputs.forEach((o, i) => {
          const t = out[i];
          if (t?.bytes) assertClose(`${stem}/${pname} ${o.key}`, { ...t, data: typedOf(t) }, io[o.key]);
        });
        cases++;
      } finally {
        model.free();
      }
    }
  }
  assert.ok(cases > 20, `only ${cases} cases ran`);
});

function typedOf(t) {
  const C = { float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array, int16: Int16Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array, float16: Uint16Array, bfloat16: Uint16Array }[t.dtype];
  const b = t.bytes;
  return new C(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

test('bad pieces and an unfinished load are refused by name', () => {
  const bytes = new Uint8Array(readFileSync(path.join(FIXTURES, 'convnet_core.pt2')));
  const size = bytes.length;
  const [at, len] = WasmStreamingLoad.directoryRange(bytes, size);
  const load = new WasmStreamingLoad(bytes.slice(at, at + len), size);
  const [first, second] = load.neededRanges();
  assert.throws(() => load.pushChunk(first.name, second.offset, bytes.slice(second.offset, second.offset + 8)), /outside entry/);
  assert.throws(() => load.pushChunk('nope', 0, bytes.slice(0, 4)), /no entry 'nope'/);
  assert.throws(() => load.pushChunk(first.name, -1, bytes.slice(0, 4)), /not a byte offset/);
  assert.throws(() => WasmStreamingLoad.directoryRange(new Uint8Array(100), 1000), /end-of-central-directory/);
  assert.throws(() => load.finishCpu(), /incomplete/);
  assert.throws(() => load.finishCpu(), /already finished/);
});

test("load(url) in Node streams from a server with Range requests (scripts/serve.mjs's sendRanged) and runs like PyTorch", async () => {
  const { createServer } = await import('node:http');
  const { sendRanged } = await import('../../scripts/serve.mjs');
  const { load } = await import('../../js/index.js');
  const bytes = readFileSync(path.join(FIXTURES, 'tiny_gpt2_core.pt2'));
  const seen = [];
  const server = createServer((req, res) => {
    seen.push(req.headers.range ?? 'whole');
    sendRanged(req, res, bytes, { 'content-type': 'application/octet-stream' });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  try {
    const io = readSafetensors(path.join(FIXTURES, 'tiny_gpt2_core.io.safetensors'));
    const model = await load(`http://127.0.0.1:${server.address().port}/m.pt2`, { device: 'cpu' });
    try {
      assertClose('tiny_gpt2_core streamed', flattenOut(await model.run([io.input_0]))[0], io.output_0);
    } finally {
      model.dispose();
    }
    assert.equal(seen[0], 'bytes=-65536', 'the first request asks for the end');
    assert.ok(seen.length >= 2 && !seen.includes('whole'), `requests: ${seen.join(', ')}`);
  } finally {
    server.close();
  }
});
