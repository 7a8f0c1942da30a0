// Issue 17 in Chromium on WebGPU (SwiftShader): a lost device (the page's own
// `GPUDevice.destroy()`, and pt2web's `gpu.destroy()`) rejects pending and later runs with
// DEVICE_LOST and never leaves a promise pending; `gpu.open()` and a reload recover. Runs
// stop on an AbortSignal with CANCELLED, and the next run answers PyTorch's values. A small
// soak (scripts/soak.sh runs the full count). Expected values: PyTorch's fixtures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { chromiumSuite } from './chromium.mjs';
import { ROOT } from '../js/helpers.mjs';
import { soakInPage, SOAK_ARGS, SOAK_MODEL } from './soak_page.mjs';

const suite = chromiumSuite(SOAK_ARGS);

async function newPage() {
  const { page, errors } = await suite.newPage();
  return { page, errors };
}

// In the page: dyn_batch's PyTorch io case, a check against it, and a promise with a deadline
// (so a promise left pending fails the test instead of hanging it).
const PAGE_HELPERS = `
  globalThis.hostile = (async () => {
    const st = await import('/tests/js/st.mjs');
    const io = st.parseSafetensors(new Uint8Array(await (await fetch('/fixtures/dyn_batch.io.safetensors')).arrayBuffer()));
    const bytes = new Uint8Array(await (await fetch('/fixtures/dyn_batch.pt2')).arrayBuffer());
    const answers = async (model, label) => {
      const got = (await model.run([io.input_0]))[0].data;
      const want = io.output_0.data;
      for (let i = 0; i < want.length; i++) {
        if (!(Math.abs(got[i] - want[i]) <= 1e-4 + 1e-4 * Math.abs(want[i]))) throw new Error(label + ': element ' + i + ' is ' + got[i] + ', PyTorch ' + want[i]);
      }
      return true;
    };
    const settles = (p, ms, label) => Promise.race([
      p.then((v) => ({ ok: v }), (e) => ({ name: e?.name, code: e?.code, message: e?.message })),
      new Promise((resolve) => setTimeout(() => resolve({ pending: label }), ms)),
    ]);
    return { io, bytes, answers, settles };
  })();
`;

test('a lost WebGPU device rejects pending and later runs with DEVICE_LOST; gpu.open() and a reload recover', async () => {
  const { page, errors } = await newPage();
  await page.addScriptTag({ content: PAGE_HELPERS });
  const r = await page.evaluate(async () => {
    const { load, gpu } = await import('/js/index.js');
    const { io, bytes, answers, settles } = await globalThis.hostile;
    const out = {};
    let model = await load(bytes, { device: 'webgpu' });
    out.device = model.device;
    out.before = await answers(model, 'before the loss');
    // The page's own GPUDevice.destroy() (as a GPU reset would): pt2web learns it through
    // the device's lost promise. The run was started before it.
    const dev = await gpu.webgpuDevice();
    const pending = model.run([io.input_0]);
    dev.destroy();
    out.pending = await settles(pending, 10000, 'the pending run');
    out.later = await settles(model.run([io.input_0]), 10000, 'a later run');
    out.openAfterLoss = gpu.isOpen();
    await gpu.open();
    out.openAfterOpen = gpu.isOpen();
    out.oldModel = await settles(model.run([io.input_0]), 10000, 'the old model after open');
    model.dispose();
    model = await load(bytes, { device: 'webgpu' });
    out.reloaded = await answers(model, 'reloaded');
    // pt2web's gpu.destroy(): lost at once.
    gpu.destroy();
    out.afterDestroy = await settles(model.run([io.input_0]), 10000, 'a run after gpu.destroy()');
    model.dispose();
    await gpu.open();
    model = await load(bytes, { device: 'webgpu' });
    out.recovered = await answers(model, 'recovered again');
    model.dispose();
    return out;
  });
  assert.equal(r.device, 'webgpu');
  assert.equal(r.before, true);
  for (const k of ['pending', 'later', 'oldModel', 'afterDestroy']) {
    assert.equal(r[k].code, 'DEVICE_LOST', `${k}: ${JSON.stringify(r[k])}`);
    assert.equal(r[k].name, 'Pt2WebError', k);
  }
  console.log(`# device loss: ${r.pending.message}`);
  assert.equal(r.openAfterLoss, false);
  assert.equal(r.openAfterOpen, true);
  assert.equal(r.reloaded, true);
  assert.equal(r.recovered, true);
  assert.deepEqual(errors, []);
});

test('run() on WebGPU stops on an AbortSignal or a timeout with CANCELLED; the next run answers right', async () => {
  const { page, errors } = await newPage();
  await page.addScriptTag({ content: PAGE_HELPERS });
  const r = await page.evaluate(async () => {
    const { load } = await import('/js/index.js');
    const { io, bytes, answers, settles } = await globalThis.hostile;
    const model = await load(bytes, { device: 'webgpu' });
    const out = { device: model.device };
    const aborted = AbortSignal.abort(new Error('user left'));
    out.before = await settles(model.run([io.input_0], { signal: aborted }), 5000, 'aborted before');
    out.next1 = await answers(model, 'after an aborted signal');
    const c = new AbortController();
    const running = model.run([io.input_0], { signal: c.signal });
    c.abort();
    out.during = await settles(running, 5000, 'aborted during');
    out.next2 = await answers(model, 'after an abort during the run');
    out.timeout = await settles(model.run([io.input_0], { timeoutMs: 0 }), 5000, 'timeout');
    out.next3 = await answers(model, 'after a timeout');
    model.dispose();
    return out;
  });
  assert.equal(r.device, 'webgpu');
  for (const k of ['before', 'during', 'timeout']) assert.equal(r[k].code, 'CANCELLED', `${k}: ${JSON.stringify(r[k])}`);
  assert.match(r.before.message, /aborted: user left/);
  assert.match(r.timeout.message, /timed out after 0 ms/);
  assert.deepEqual([r.next1, r.next2, r.next3], [true, true, true]);
  assert.deepEqual(errors, []);
});

test('a small WebGPU soak: random shapes, JS heap and GPU memory flat', async (t) => {
  if (!existsSync(path.join(ROOT, '.cache', 'models', 'gpt2.core.pt2'))) {
    assert.notEqual(process.env.PT2WEB_REQUIRE_MODELS, '1', 'no .cache/models/gpt2.core.pt2: run scripts/build_models.sh');
    t.skip('no .cache/models/gpt2.core.pt2 (run scripts/build_models.sh)');
    return;
  }
  const { page, errors } = await newPage();
  const runs = Number(process.env.PT2WEB_SOAK_RUNS ?? 60);
  const r = await page.evaluate(soakInPage, { ...SOAK_MODEL, runs });
  console.log(`# webgpu soak: ${JSON.stringify(r)}`);
  assert.equal(r.gpuAllocatedDeltaMiB, 0, 'live GPU bytes after the runs differ from after the warm-up');
  assert.deepEqual(errors, []);
});

test('sizes the caller controls past the byte budget are LIMIT errors in wasm and on WebGPU; the model then answers PyTorch', async () => {
  const { page, errors } = await newPage();
  const r = await page.evaluate(async () => {
    const { load } = await import('/js/index.js');
    const st = await import('/tests/js/st.mjs');
    const io = st.parseSafetensors(new Uint8Array(await (await fetch('/fixtures/hostile_alloc.io.safetensors')).arrayBuffer()));
    const bytes = new Uint8Array(await (await fetch('/fixtures/hostile_alloc.pt2')).arrayBuffer());
    const good = [0, 1, 2, 3].map((i) => io[`input_${i}`]);
    const matches = async (model) => {
      const got = await model.run(good);
      for (let k = 0; k < 3; k++) {
        const want = io[`output_${k}`].data;
        for (let i = 0; i < want.length; i++) {
          if (!(Math.abs(got[k].data[i] - want[i]) <= 1e-2 + 1e-4 * Math.abs(want[i]))) return `output ${k}[${i}]: ${got[k].data[i]} vs ${want[i]}`;
        }
      }
      return true;
    };
    // zeros(65536, 65536), expand(2^20, 4096).contiguous(): 16 GiB each.
    const huge = [
      [0, { dtype: 'float32', shape: [65536, 3], data: new Float32Array(65536 * 3) }],
      [1, { dtype: 'float32', shape: [1 << 20, 1], data: new Float32Array(1 << 20) }],
    ];
    const out = {};
    for (const device of ['cpu', 'webgpu']) {
      const model = await load(bytes, { device });
      out[device] = [];
      for (const [i, t] of huge) {
        const call = good.slice();
        call[i] = t;
        try { await model.run(call); out[device].push('no error'); } catch (e) { out[device].push(`${e.code} ${/made by node/.test(e.message)} ${await matches(model)}`); }
      }
      model.dispose();
    }
    return out;
  });
  for (const device of ['cpu', 'webgpu']) assert.deepEqual(r[device], ['LIMIT true true', 'LIMIT true true'], device);
  assert.deepEqual(errors, []);
});
