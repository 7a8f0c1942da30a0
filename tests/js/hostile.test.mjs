// The JS API under hostile use (issue 17): bad input of every kind is a typed Pt2WebError (a
// code, and a message naming the input), never a TypeError from inside the glue and never a
// trap; runs stop on an AbortSignal or a timeout with code CANCELLED; the model keeps
// answering PyTorch's values after each. Expected values: the fixtures PyTorch wrote.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { load, tensor, Pt2WebError, gpu } from '../../js/index.js';
import { FIXTURES, readSafetensors, assertClose } from './helpers.mjs';
import { badCalls, soakNode, dynBatchGoods } from './hostile.mjs';

const bytesOf = (f) => new Uint8Array(readFileSync(path.join(FIXTURES, f)));

// `call` rejects (or throws) a Pt2WebError of `code` whose message matches `re`.
async function rejectsTyped(call, code, re, label) {
  let err;
  try {
    await call();
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${label}: no error`);
  assert.ok(err instanceof Pt2WebError, `${label}: not a Pt2WebError: ${err?.name}: ${err?.message}`);
  assert.equal(err.code, code, `${label}: ${err.message}`);
  if (re) assert.match(err.message, re, label);
}

async function dynBatch() {
  const model = await load(bytesOf('dyn_batch.pt2'), { device: 'cpu' });
  const io = readSafetensors(path.join(FIXTURES, 'dyn_batch.io.safetensors'));
  const good = async (label) => assertClose(`${label}: the next run`, (await model.run([io.input_0]))[0], io.output_0);
  return { model, io, good };
}

test('bad inputs from JS are typed INPUT errors naming the input, and the model keeps working', async () => {
  const { model, io, good } = await dynBatch();
  const cases = badCalls(io.input_0);
  assert.ok(cases.length >= 30, `${cases.length} cases`);
  for (const { label, inputs, options, code, re } of cases) {
    await rejectsTyped(() => model.run(inputs, options), code, re, label);
    await good(label);
  }
  // Accepted forms: BigInt sizes, a view at an offset into a larger buffer.
  const x = io.input_0;
  const big = new Float32Array(x.data.length + 3);
  big.set(x.data, 3);
  const view = new Float32Array(big.buffer, 12, x.data.length);
  assertClose('BigInt sizes', (await model.run([{ data: x.data, shape: x.shape.map(BigInt) }]))[0], io.output_0);
  assertClose('an offset view', (await model.run([tensor(view, x.shape)]))[0], io.output_0);
  model.dispose();
});

test('bad arguments of the other calls are typed errors too', async () => {
  const { model, good } = await dynBatch();
  const bytes = bytesOf('dyn_batch.pt2');
  const calls = [
    ['manualSeed(-1)', () => model.manualSeed(-1), 'INPUT', /seed/],
    ['manualSeed(1.5)', () => model.manualSeed(1.5), 'INPUT', /seed/],
    ['manualSeed("7")', () => model.manualSeed('7'), 'INPUT', /seed/],
    ['manualSeed(2n**64n)', () => model.manualSeed(2n ** 64n), 'INPUT', /seed/],
    ['prepare NaN', () => model.prepare({ x: [NaN, 16] }), 'INPUT', /'x'.*NaN/],
    ['prepare BigInt huge', () => model.prepare({ x: [2n ** 70n, 16] }), 'INPUT', /'x'/],
    ['prepare -1', () => model.prepare([[-1, 16]]), 'INPUT', /'x'/],
    ['generate string', () => model.generate('hello'), 'INPUT', /promptIds/],
    ['generate NaN ids', () => model.generate([1, NaN]), 'INPUT', /prompt/],
    ['state.get(5)', () => model.state.get(5), 'INPUT', /name/],
    ['state.get missing', () => model.state.get('nope'), 'INPUT', /nope/],
    ['tensor(string)', () => tensor('abc', [3]), 'INPUT', /typed array/],
    ['load program 5', () => load(bytes, { device: 'cpu', program: 5 }), 'INPUT', /program/],
    ['load device tpu', () => load(bytes, { device: 'tpu' }), 'INPUT', /device/],
    ['load weights int9', () => load(bytes, { device: 'cpu', weights: 'int9' }), 'INPUT', /weights/],
    ['load dtype 16', () => load(bytes, { device: 'cpu', dtype: 16 }), 'INPUT', /dtype/],
    ['load options string', () => load(bytes, 'cpu'), 'INPUT', /options/],
    ['load a number', () => load(42), 'INPUT', /source/],
    ['gpu fraction string', () => gpu.setPerProcessMemoryFraction('half'), 'INPUT', /fraction/],
  ];
  for (const [label, call, code, re] of calls) {
    await rejectsTyped(call, code, re, label);
    await good(label);
  }
  model.dispose();
});

test('run() stops on an AbortSignal or a timeout with CANCELLED, and the next run answers right', async () => {
  const { model, io, good } = await dynBatch();
  const x = io.input_0;
  // Aborted before the call: rejected at once, nothing runs.
  const before = new AbortController();
  before.abort(new Error('user left'));
  await rejectsTyped(() => model.run([x], { signal: before.signal }), 'CANCELLED', /aborted: user left/, 'aborted before');
  await good('aborted before');
  // Aborted right after the call, before the (synchronous) CPU run starts: the core sees the
  // token before its first node.
  const after = new AbortController();
  const running = model.run([x], { signal: after.signal });
  after.abort();
  await rejectsTyped(() => running, 'CANCELLED', /aborted|cancelled/, 'aborted after the call');
  await good('aborted after the call');
  // A timeout the run cannot meet: the core stops it before a node.
  await rejectsTyped(() => model.run([x], { timeoutMs: 0 }), 'CANCELLED', /timed out after 0 ms\) before node/, 'timeout');
  await good('timeout');
  // A signal that never aborts and a generous timeout change nothing.
  const calm = new AbortController();
  assertClose('calm signal', (await model.run([x], { signal: calm.signal, timeoutMs: 60_000 }))[0], io.output_0);
  model.dispose();
});

test('prepare() takes an AbortSignal as run() does: CANCELLED, and the model keeps answering', async () => {
  const { model, io, good } = await dynBatch();
  const shape = Array.from(io.input_0.shape);
  const before = new AbortController();
  before.abort(new Error('user left'));
  await rejectsTyped(() => model.prepare([shape], { signal: before.signal }), 'CANCELLED', /prepare stopped: .*aborted: user left/, 'prepare aborted before');
  await good('prepare aborted before');
  // Aborted right after the call: rejected at once; the prepare given up finishes first.
  const after = new AbortController();
  const preparing = model.prepare([shape], { signal: after.signal });
  after.abort();
  await rejectsTyped(() => preparing, 'CANCELLED', /prepare stopped/, 'prepare aborted after the call');
  await good('prepare aborted after the call');
  await rejectsTyped(() => model.prepare([shape], { signal: 'stop' }), 'INPUT', /prepare\(\): options.signal must be an AbortSignal/, 'not a signal');
  const calm = new AbortController();
  const stats = await model.prepare([shape], { signal: calm.signal });
  assert.ok(stats.planSteps > 0, JSON.stringify(stats));
  await good('calm signal');
  model.dispose();
});

test('a small soak: mixed good and bad calls, every bad one typed, memory flat', async () => {
  const api = await import('../../js/index.js');
  const { model } = await dynBatch();
  const goods = dynBatchGoods(readSafetensors, FIXTURES);
  // The full count (10,000) runs in scripts/soak.sh.
  const r = await soakNode({ model, api, goods, calls: Number(process.env.PT2WEB_SOAK_CALLS ?? 400) });
  console.log(`# node soak: ${JSON.stringify(r)}`);
  assert.equal(r.typed, r.bad);
  // pt2web's heap is its wasm memory: a leak of even a few hundred bytes per call would grow
  // it by a 64 KiB page well within this count.
  assert.equal(r.wasmDeltaMiB, 0, 'wasm memory grew after the warm-up');
  model.dispose();
});
