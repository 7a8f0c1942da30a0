// The committed fixtures run through the npm package's API in Node (CPU backend, WASM SIMD),
// with inputs in their exported pytree structure, against PyTorch's outputs; bad calls reject
// with a Pt2WebError and the model still runs afterwards.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { clearCache, load, tensor, Pt2WebError, isPt2Package, programNames } from '../../js/index.js';
import { FIXTURES, metas, readSafetensors, assertClose, unflattenSpec, flattenOut } from './helpers.mjs';

const bytesOf = (f) => new Uint8Array(readFileSync(path.join(FIXTURES, f)));

async function runCase(model, pm, c) {
  const io = readSafetensors(path.join(FIXTURES, c.file));
  const leaves = c.inputs.map((i) => io[i.key]);
  const [args, kwargs] = unflattenSpec(model.info.specs.inSpec, leaves);
  const out = await model.run({ args, kwargs });
  const got = flattenOut(out);
  assert.equal(got.length, c.outputs.length, 'output count');
  c.outputs.forEach((o, i) => assertClose(`${c.label} ${o.key}`, got[i], io[o.key]));
  for (const key of c.buffers_after ?? []) {
    const fqn = key.replace(/^buffer_after\./, '');
    assertClose(`${c.label} ${key}`, await model.state.get(fqn), io[key]);
  }
  return got.length;
}

test('every committed fixture program matches PyTorch through the JS API', async () => {
  let cases = 0;
  for (const [stem, meta] of metas()) {
    for (const [pname, pm] of Object.entries(meta.programs)) {
      for (const c of pm.io_cases ?? []) {
        const model = await load(bytesOf(meta.archive), { device: 'cpu', program: pname });
        try {
          await runCase(model, pm, c);
          cases++;
        } catch (e) {
          throw new Error(`${stem}/${pname} ${c.label}: ${e.message}`);
        } finally {
          model.dispose();
        }
      }
    }
  }
  assert.ok(cases > 30, `only ${cases} cases ran`);
});

test('nested inputs and outputs keep their structure', async () => {
  const model = await load(bytesOf('pytree_io.pt2'), { device: 'cpu' });
  const io = readSafetensors(path.join(FIXTURES, 'pytree_io.io.safetensors'));
  const x = (i) => io[`input_${i}`];
  const out = await model.run({
    args: [{ a: x(0), b: x(1) }, [x(2), x(3)], [x(4), x(5)], { x: x(6), y: x(7) }],
    kwargs: { pair: { a: x(8), b: x(9) }, scale: x(10) },
  });
  assert.deepEqual(Object.keys(out), ['sum', 'list', 'tuple', 'point', 'pair']);
  assert.ok(Array.isArray(out.list) && out.list.length === 3);
  assert.deepEqual(Object.keys(out.point), ['x', 'y']);
  assertClose('sum', out.sum, io.output_0);
  // The flat form, by the names info.inputs lists, gives the same answer.
  const named = Object.fromEntries(model.info.inputs.map((inp, i) => [inp.name, x(i)]));
  assertClose('sum (named)', (await model.run(named)).sum, io.output_0);
});

test('bad calls reject with a Pt2WebError and the model keeps working', async () => {
  const model = await load(bytesOf('dyn_batch.pt2'), { device: 'cpu' });
  const io = readSafetensors(path.join(FIXTURES, 'dyn_batch.io.safetensors'));
  const good = async () => assertClose('after error', (await model.run([io.input_0]))[0], io.output_0);
  const bad = [
    [[tensor(new Float32Array(4 * 15), [4, 15])], 'GUARD', /'x' dimension 1/],
    [[tensor(new Float32Array(65 * 16), [65, 16])], 'GUARD', /'x' dimension 0: got 65/],
    [[tensor(new Int32Array(4 * 16), [4, 16])], 'INPUT', /'x': expected dtype float32/],
    [[tensor(new Float32Array(10), [4, 16])], 'INPUT', /'x'.*needs 64 elements/],
    [[tensor(new Float32Array(64), [4, 4, 4])], 'INPUT', /'x'.*rank 2/],
    [[], 'INPUT', /expected 1 items, got 0/],
    [{ y: io.input_0 }, 'INPUT', /'y': not an input/],
    [[{ data: [1, 2, 3], shape: [3] }], 'INPUT', /'x': expected a tensor/],
  ];
  for (const [inputs, code, re] of bad) {
    await assert.rejects(model.run(inputs), (e) => {
      assert.ok(e instanceof Pt2WebError, `not a Pt2WebError: ${e}`);
      assert.equal(e.code, code, e.message);
      assert.match(e.message, re);
      return true;
    });
    await good();
  }
  model.dispose();
  await assert.rejects(model.run([io.input_0]), (e) => e.code === 'DISPOSED');
});

test('a corrupt or foreign file is a clear error', async () => {
  const bytes = bytesOf('mlp_train.pt2');
  assert.equal(await isPt2Package(bytes), true);
  assert.equal(await isPt2Package(new TextEncoder().encode('hello')), false);
  const cut = bytes.slice(0, bytes.length >> 1);
  await assert.rejects(load(cut, { device: 'cpu' }), (e) => e instanceof Pt2WebError && e.code === 'ARCHIVE');
  await assert.rejects(load(new Uint8Array(100), { device: 'cpu' }), (e) => e instanceof Pt2WebError);
  await assert.rejects(load(bytes, { device: 'cpu', program: 'nope' }), (e) => e.code === 'NO_SUCH_PROGRAM');
  const multi = JSON.parse(readFileSync(path.join(FIXTURES, 'multi_program.meta.json'), 'utf8'));
  assert.deepEqual((await programNames(bytesOf('multi_program.pt2'))).sort(), Object.keys(multi.programs).sort());
});

test('buffers mutate across calls and show in model.state', async () => {
  const meta = JSON.parse(readFileSync(path.join(FIXTURES, 'mutate_buffer.meta.json'), 'utf8'));
  const pm = meta.programs.model;
  const model = await load(bytesOf('mutate_buffer.pt2'), { device: 'cpu' });
  const c = pm.io_cases[0];
  const io = readSafetensors(path.join(FIXTURES, c.file));
  const fqn = 'count'; // a stateful counter buffer (see tests/fixgen)
  const before = await model.state.get(fqn);
  await model.run([io.input_0]);
  const after = await model.state.get(fqn);
  assert.notDeepEqual(Array.from(after.data), Array.from(before.data));
  assertClose('buffer after', after, io[`buffer_after.${fqn}`]);
});

test('load() streams a Response with progress, and device auto falls back to CPU in Node', async () => {
  const bytes = bytesOf('mlp_train.pt2');
  const seen = [];
  const resp = new Response(new Blob([bytes]).stream(), { headers: { 'content-length': String(bytes.length) } });
  const model = await load(resp, { onProgress: (l, t) => seen.push([l, t]) });
  assert.equal(model.device, 'cpu');
  assert.match(model.deviceNote, /navigator.gpu is missing/);
  assert.ok(seen.length >= 1 && seen.at(-1)[0] === bytes.length && seen.at(-1)[1] === bytes.length);
  await assert.rejects(load(bytes, { device: 'webgpu' }), (e) => e.code === 'DEVICE');
  assert.ok(model.info.parameters.bytes > 0);
});

test('the profiler records every op with positive times and a Chrome trace', async () => {
  const model = await load(bytesOf('convnet_train.pt2'), { device: 'cpu' });
  const io = readSafetensors(path.join(FIXTURES, 'convnet_train.io.safetensors'));
  // Every node of the graph as planned (after the graph passes: the batch norms are folded).
  const { planSteps } = await model.prepare([io.input_0]);
  assert.ok(planSteps > 0 && planSteps < Object.values(model.info.op_histogram).reduce((a, b) => a + b, 0));
  model.startProfiler();
  await model.run([io.input_0]);
  const p = model.stopProfiler();
  assert.ok(p.events.length >= planSteps - 1);
  assert.ok(p.events.every((e) => e.dur_ms >= 0 && e.start_ms >= 0 && e.target.includes('.')));
  assert.ok(p.summary[0].total_ms >= p.summary.at(-1).total_ms);
  const trace = JSON.parse(JSON.stringify(p.chromeTrace));
  assert.equal(trace.traceEvents.length, p.events.length);
  assert.ok(trace.traceEvents.every((e) => e.ph === 'X' && typeof e.ts === 'number'));
  assert.equal(model.stopProfiler(), null);
});

test('prepare on the CPU: the declared shapes, given shapes, and a guard error', async () => {
  const [, meta] = metas().find(([stem]) => stem === 'convnet_core');
  const pm = meta.programs.model;
  const m = await load(bytesOf('convnet_core.pt2'), { device: 'cpu', prepare: true });
  assert.ok(m.prepareStats.planSteps > 0, JSON.stringify(m.prepareStats));
  assert.equal(m.prepareStats.pipelinesCreated, 0);
  await runCase(m, pm, pm.io_cases[0]);
  const d = await load(bytesOf('dyn_batch.pt2'), { device: 'cpu' });
  await assert.rejects(d.prepare(), (e) => e instanceof Pt2WebError && e.code === 'INPUT' && /'x'.*dynamic/.test(e.message));
  await assert.rejects(d.prepare({ x: [65, 16] }), (e) => e instanceof Pt2WebError && e.code === 'GUARD');
  const st = await d.prepare({ x: [3, 16] });
  assert.ok(st.planSteps > 0);
  const out = await d.run([tensor(new Float32Array(3 * 16).fill(1), [3, 16])]);
  assert.deepEqual(out[0].shape.slice(0, 1), [3]);
  m.dispose();
  d.dispose();
});

test('load() reports its phases; Node keeps no archive cache; bad cache options are INPUT errors', async () => {
  const bytes = bytesOf('mlp_train.pt2');
  const seen = [];
  const file = new URL(`file://${path.join(FIXTURES, 'mlp_train.pt2')}`);
  const model = await load(file, { cache: 'auto', prepare: true, onProgress: (l, t, p) => seen.push([p.phase, l, t]) });
  const phases = seen.map(([p]) => p).filter((p, i, a) => p !== a[i - 1]);
  assert.deepEqual(phases, ['download', 'upload', 'prepare']);
  assert.deepEqual(seen.find(([p]) => p === 'download'), ['download', bytes.length, bytes.length]);
  assert.deepEqual(seen.at(-1), ['prepare', 1, 1]);
  model.dispose();
  assert.equal(await clearCache(), 0, 'Node has neither the Cache API nor OPFS');
  await assert.rejects(load(bytes, { cache: 'disk' }), (e) => e.code === 'INPUT' && /options.cache must be one of auto, none/.test(e.message));
  await assert.rejects(clearCache(42), (e) => e.code === 'INPUT');
});
