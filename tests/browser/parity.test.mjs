// The JS API beside the Rust one in Chromium (issue 18 item 5): the adapter count and choice
// (`powerPreference`), a GPUDevice the app owns (`load(url, {device})`,
// `gpu.fromExternalDevice`), and `state.set` on WebGPU, whose write lands in the buffer the
// recorded runs bind. Outputs against PyTorch's (mlp_train.io / .state.safetensors).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chromiumSuite } from './chromium.mjs';

// Every requestAdapter call's options, recorded before the page's own scripts run.
const SPY = `(() => {
  const g = navigator.gpu;
  const real = g.requestAdapter.bind(g);
  window.__adapterOptions = [];
  g.requestAdapter = (o) => { window.__adapterOptions.push(o ?? {}); return real(o); };
})();`;

const suite = chromiumSuite();

test('gpu.deviceCount and powerPreference: the adapter pt2web opens is the one asked for', async () => {
  const { page, errors } = await suite.newPage(SPY);
  const r = await page.evaluate(async () => {
    const { gpu } = await import('/js/index.js');
    const count = await gpu.deviceCount();
    await gpu.open({ powerPreference: 'low-power' });
    const asked = window.__adapterOptions.map((o) => o.powerPreference ?? null);
    let again = null;
    try { await gpu.open({ powerPreference: 'high-performance' }); } catch (e) { again = `${e.code} ${e.message}`; }
    let bad = null;
    try { await gpu.open({ powerPreference: 'fast' }); } catch (e) { bad = e.code; }
    return { count, asked, again, bad, props: await gpu.properties() };
  });
  assert.equal(r.count, 1);
  assert.equal(r.asked.at(-1), 'low-power', JSON.stringify(r.asked));
  assert.match(r.again, /^DEVICE .*already open \(powerPreference low-power\)/);
  assert.equal(r.bad, 'INPUT');
  assert.equal(r.props.backend, 'webgpu');
  assert.deepEqual(errors, []);
});

test("the app's GPUDevice: pt2web runs on it, its GpuTensors are the app's buffers, state.set reaches replayed runs", async () => {
  const { page, errors } = await suite.newPage();
  const r = await page.evaluate(async () => {
    const { load, gpu } = await import('/js/index.js');
    const st = await import('/tests/js/st.mjs');
    const get = async (f) => st.parseSafetensors(new Uint8Array(await (await fetch(`/fixtures/${f}`)).arrayBuffer()));
    const io = await get('mlp_train.io.safetensors');
    const state = await get('mlp_train.state.safetensors');
    const diff = (a, b) => Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i])));
    const device = await (await navigator.gpu.requestAdapter()).requestDevice();
    const m = await load('/fixtures/mlp_train.pt2', { device });
    const same = (await gpu.webgpuDevice()) === device;
    // The output kept on the GPU, copied and read back by the app's own commands.
    const y = await m.run([io.input_0], { keepOnGpu: true });
    const bytes = y.shape.reduce((a, b) => a * b, 1) * 4;
    const staging = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(y.buffer, y.offset * 4, staging, 0, bytes);
    device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const appRead = diff(new Float32Array(staging.getMappedRange().slice(0)), io.output_0.data);
    y.dispose();
    // Runs until they replay their recording, then new weights: the next run reads them.
    const tapes = [];
    for (let i = 0; i < 4; i++) { await m.run([io.input_0]); tapes.push(m.lastRunStats().tape); }
    const bias = state['fc2.bias'].data;
    m.state.set('fc2.bias', { data: new Float32Array(bias.length), shape: [bias.length] });
    const after = await m.run([io.input_0]);
    const replayed = m.lastRunStats().replayed;
    const want = io.output_0.data.map((v, i) => v - bias[i % bias.length]);
    let destroy = null;
    try { gpu.destroy(); } catch (e) { destroy = e.code; }
    m.dispose();
    return { same, appRead, tapes, afterSet: diff(after.data, want), replayed, destroy, deviceNote: m.deviceNote };
  });
  console.log(`# external device: ${JSON.stringify(r)}`);
  assert.equal(r.same, true, "gpu.webgpuDevice() is the app's device");
  assert.match(r.deviceNote, /the app's GPUDevice/);
  assert.ok(r.appRead <= 1e-5, `read by the app: ${r.appRead}`);
  assert.equal(r.tapes.at(-1), 'replayed', JSON.stringify(r.tapes));
  assert.ok(r.afterSet <= 1e-5, `after state.set: ${r.afterSet} (replayed ${r.replayed})`);
  assert.equal(r.destroy, 'DEVICE');
  assert.deepEqual(errors, []);
});

test('gpu.fromExternalDevice before loading; another device once one is open is refused', async () => {
  const { page, errors } = await suite.newPage();
  const r = await page.evaluate(async () => {
    const { load, gpu } = await import('/js/index.js');
    const adapter = await navigator.gpu.requestAdapter();
    const device = await adapter.requestDevice();
    await gpu.fromExternalDevice(device);
    const m = await load('/fixtures/mlp_train.pt2');
    const ok = m.device === 'webgpu' && (await gpu.webgpuDevice()) === device;
    let other = null;
    const another = await (await navigator.gpu.requestAdapter()).requestDevice();
    try { await gpu.fromExternalDevice(another); } catch (e) { other = e.code; }
    let notDevice = null;
    try { await gpu.fromExternalDevice({}); } catch (e) { notDevice = e.code; }
    m.dispose();
    return { ok, other, notDevice };
  });
  assert.deepEqual(r, { ok: true, other: 'DEVICE', notDevice: 'INPUT' });
  assert.deepEqual(errors, []);
});
