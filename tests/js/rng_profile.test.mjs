// The device default generators (gpu.manualSeedAll, seedAll, getRngStateAll, setRngStateAll)
// and profiler scopes (gpu.profile, gpu.isCapturing) through the npm package in Node (CPU
// backend: the generator list holds the CPU's only). The random program is the `factory` op
// case `randn` (its outputs are PyTorch's checks of the draws; the generator state says where
// each run started, and the draws are a function of it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gpu, load, Pt2WebError } from '../../js/index.js';
import { FIXTURES, readSafetensors } from './helpers.mjs';

const bytesOf = (f) => new Uint8Array(readFileSync(path.join(FIXTURES, f)));

test('fresh models continue their device default generator; states round trip', async () => {
  const bytes = bytesOf('ops/factory.pt2');
  const io = readSafetensors(path.join(FIXTURES, 'ops/factory.io.safetensors'));
  const fresh = () => load(bytes, { device: 'cpu', program: 'randn' });
  const x = [io['randn/input_0']];
  await gpu.manualSeedAll(1234);
  const start = await gpu.getRngStateAll();
  assert.equal(start.length, 1, 'the CPU generator (no WebGPU in Node)');
  assert.equal(start[0].length, 16);
  assert.equal(new DataView(start[0].buffer, start[0].byteOffset).getBigUint64(8, true), 1234n);
  const [a, b] = [await fresh(), await fresh()];
  await a.run(x);
  const after1 = await gpu.getRngStateAll();
  assert.notDeepEqual(after1, start, 'the first model drew from the default generator');
  await b.run(x);
  const after2 = await gpu.getRngStateAll();
  assert.notDeepEqual(after2, after1, 'the second model continued it');
  // A model with its own seed leaves the default generator alone.
  const own = await fresh();
  own.manualSeed(1234);
  await own.run(x);
  assert.deepEqual(await gpu.getRngStateAll(), after2);
  // Restored, the default generator draws the same again.
  await gpu.setRngStateAll(after1);
  await (await fresh()).run(x);
  assert.deepEqual(await gpu.getRngStateAll(), after2);
  const seed = await gpu.seedAll();
  assert.equal(typeof seed, 'bigint');
  // Malformed states are INPUT errors naming what is wrong; nothing is set.
  const before = await gpu.getRngStateAll();
  const bad = [
    [[new Uint8Array(3)], /rng_states\[0\].*got 3/],
    [[], /got 0/],
    [[after1[0], after1[0]], /got 2/],
    [['x'], /rng_states\[0\].*Uint8Array/],
    ['x', /array/],
  ];
  for (const [states, msg] of bad) {
    await assert.rejects(gpu.setRngStateAll(states), (e) => e instanceof Pt2WebError && e.code === 'INPUT' && msg.test(e.message), String(states));
  }
  await assert.rejects(gpu.manualSeedAll(-1), (e) => e.code === 'INPUT');
  assert.deepEqual(await gpu.getRngStateAll(), before);
  for (const m of [a, b, own]) m.dispose();
});

test('gpu.profile captures every model run in the scope', async () => {
  const mlp = await load(bytesOf('mlp_core.pt2'), { device: 'cpu' });
  const conv = await load(bytesOf('convnet_core.pt2'), { device: 'cpu' });
  const input = (stem) => [readSafetensors(path.join(FIXTURES, `${stem}.io.safetensors`)).input_0];
  assert.equal(gpu.isCapturing(), false);
  let inside = false;
  const p = await gpu.profile(async () => {
    inside = gpu.isCapturing();
    await mlp.run(input('mlp_core'));
    await conv.run(input('convnet_core'));
  });
  assert.ok(inside);
  assert.equal(gpu.isCapturing(), false);
  const sessions = [...new Set(p.events.map((e) => e.session))];
  assert.equal(sessions.length, 2, JSON.stringify(p.events.slice(0, 3)));
  assert.ok(p.events.every((e) => e.device === 'cpu' && e.op.includes('.') && e.node && e.dur_ms >= 0 && e.start_ms >= 0));
  assert.ok(p.events.some((e) => e.op === 'aten.addmm.default' && e.session === sessions[0]));
  assert.ok(p.events.some((e) => e.op.includes('conv') || e.op.includes('fused')));
  const trace = JSON.parse(JSON.stringify(p.chromeTrace));
  assert.equal(trace.traceEvents.filter((e) => e.name === 'process_name').length, 2);
  assert.equal(trace.traceEvents.length, p.events.length + 2);
  // A scope whose function throws closes anyway.
  await assert.rejects(gpu.profile(async () => { throw new Error('boom'); }), /boom/);
  assert.equal(gpu.isCapturing(), false);
  await assert.rejects(gpu.profile('no'), (e) => e.code === 'INPUT');
  mlp.dispose();
  conv.dispose();
});
