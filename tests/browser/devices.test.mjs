// Devices and streams of the JS `gpu` object in Chromium (issue 19 items 1 and 2): the current
// device, setDevice and its scope, deviceOf, capability and arch list; streams and events
// ordering two models on one queue, the decoder consuming the encoder's GpuTensor output and
// matching PyTorch's values (multi_program's `chained` case, tests/fixgen/gen_fixtures.py);
// a stream over the app's own GPUDevice whose query turns true after synchronize.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chromiumSuite } from './chromium.mjs';

const suite = chromiumSuite();

test('gpu devices: currentDevice, setDevice and its scope, init, arch list, capability, deviceOf', async () => {
  const { page, errors } = await suite.newPage();
  const r = await page.evaluate(async () => {
    const { gpu } = await import('/js/index.js');
    const code = async (f) => { try { await f(); return null; } catch (e) { return `${e.code} ${e.message}`; } };
    const before = gpu.isInitialized();
    await gpu.init();
    const after = gpu.isInitialized();
    const current = gpu.currentDevice();
    const set0 = await code(() => gpu.setDevice(0));
    const set1 = await code(() => gpu.setDevice(1));
    const inScope = await gpu.device(0, async () => gpu.currentDevice() * 10 + 7);
    const scopeBad = await code(() => gpu.device(2, async () => 1));
    const arch = await gpu.getArchList();
    const cap = await gpu.getDeviceCapability(0);
    const props = await gpu.properties();
    const capBad = await code(() => gpu.getDeviceCapability(1));
    const cpuOf = gpu.deviceOf({ data: new Float32Array(2), shape: [2] });
    const notTensor = await code(() => gpu.deviceOf(3));
    return { before, after, current, set0, set1, inScope, scopeBad, arch, cap, props, capBad, cpuOf, notTensor, afterAll: gpu.currentDevice() };
  });
  console.log(`# devices: arch ${JSON.stringify(r.arch)}, ${Object.keys(r.cap.limits).length} limits, features ${JSON.stringify(r.cap.features)}`);
  assert.equal(r.before, false);
  assert.equal(r.after, true);
  assert.equal(r.current, 0);
  assert.equal(r.set0, null);
  assert.match(r.set1, /^INPUT .*no device 1: 1 GPU device/);
  assert.equal(r.inScope, 7);
  assert.match(r.scopeBad, /^INPUT/);
  assert.equal(r.afterAll, 0);
  assert.deepEqual(r.arch, ['webgpu', 'cpu']);
  assert.equal(r.cap.limits.maxBufferSize, r.props.limits.maxBufferSize);
  assert.equal(r.cap.limits.maxComputeInvocationsPerWorkgroup, r.props.limits.maxComputeInvocationsPerWorkgroup);
  assert.ok(r.cap.limits.maxComputeWorkgroupsPerDimension > 0);
  assert.deepEqual(r.cap.features, r.props.features);
  assert.match(r.capBad, /^INPUT/);
  assert.equal(r.cpuOf, 'cpu');
  assert.match(r.notTensor, /^INPUT/);
  assert.deepEqual(errors, []);
});

test('gpu streams: events order two models on two streams; the decoder reads the encoder GpuTensor and matches PyTorch', async () => {
  const { page, errors } = await suite.newPage();
  const r = await page.evaluate(async () => {
    const { load, gpu } = await import('/js/index.js');
    const st = await import('/tests/js/st.mjs');
    const get = async (f) => st.parseSafetensors(new Uint8Array(await (await fetch(`/fixtures/${f}`)).arrayBuffer()));
    const encIo = await get('multi_program.encoder.io.safetensors');
    const chained = await get('multi_program.decoder.io.chained.safetensors');
    const diff = (a, b) => Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i])));
    const enc = await load('/fixtures/multi_program.pt2', { program: 'encoder', device: 'webgpu' });
    const dec = await load('/fixtures/multi_program.pt2', { program: 'decoder', device: 'webgpu' });
    const s1 = new gpu.Stream();
    const s2 = new gpu.Stream();
    const defaultIsCurrent = gpu.currentStream().equals(gpu.defaultStream());
    // Model A on s1 (a scope), kept on the GPU; model B on s2 (the run option) after s2.waitEvent(e).
    const h = await gpu.stream(s1, async () => {
      const inScope = gpu.currentStream().equals(s1);
      const out = await enc.run([encIo.input_0], { keepOnGpu: true });
      out.inScope = inScope;
      return out;
    });
    const restored = gpu.currentStream().equals(gpu.defaultStream());
    const hDevice = gpu.deviceOf(h);
    const e = s1.recordEvent();
    s2.waitEvent(e);
    const y = await dec.run([h], { stream: s2 });
    await s2.synchronize();
    const queried = [s1.query(), s2.query(), e.query()];
    let badStream = null;
    try { await dec.run([h], { stream: 'fast' }); } catch (err) { badStream = err.code; }
    h.dispose();
    enc.dispose();
    dec.dispose();
    return {
      ids: [gpu.defaultStream().id, s1.id === s2.id], defaultIsCurrent, inScope: h.inScope, restored, hDevice,
      queried, badStream, err: diff(y.data, chained.output_0.data), n: y.data.length,
    };
  });
  console.log(`# streams: decoder after encoder on two streams, max |diff| ${r.err} over ${r.n} values`);
  assert.deepEqual(r.ids, [0, false]);
  assert.equal(r.defaultIsCurrent, true);
  assert.equal(r.inScope, true);
  assert.equal(r.restored, true);
  assert.equal(r.hDevice, 0);
  assert.deepEqual(r.queried, [true, true, true]);
  assert.equal(r.badStream, 'INPUT');
  assert.equal(r.n, 24);
  assert.ok(r.err <= 1e-4, `decoder on the encoder's GPU output: max |diff| ${r.err}`);
  assert.deepEqual(errors, []);
});

test("gpu.getStreamFromExternal over the app's GPUDevice: query false while its work runs, true after synchronize", async () => {
  const { page, errors } = await suite.newPage();
  const r = await page.evaluate(async () => {
    const { load, gpu } = await import('/js/index.js');
    const device = await (await navigator.gpu.requestAdapter()).requestDevice();
    const m = await load('/fixtures/mlp_train.pt2', { device });
    const ext = await gpu.getStreamFromExternal(device.queue);
    let other = null;
    const another = await (await navigator.gpu.requestAdapter()).requestDevice();
    try { await gpu.getStreamFromExternal(another.queue); } catch (e) { other = e.code; }
    // The app's own busy work on its queue.
    const module = device.createShaderModule({ code: `
      @group(0) @binding(0) var<storage, read_write> out: array<f32>;
      @compute @workgroup_size(64) fn busy(@builtin(global_invocation_id) g: vec3<u32>) {
        var x = f32(g.x) * 1e-6;
        for (var k = 0u; k < 20000u; k = k + 1u) { x = x * 0.999 + 0.001; }
        out[g.x] = x;
      }` });
    const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'busy' } });
    const buf = device.createBuffer({ size: 4 << 16, usage: GPUBufferUsage.STORAGE });
    const bind = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, bind);
    pass.dispatchWorkgroups(1024);
    pass.end();
    device.queue.submit([enc.finish()]);
    const busy = ext.query();
    const t0 = performance.now();
    await ext.synchronize();
    const ms = performance.now() - t0;
    const done = ext.query();
    m.dispose();
    return { external: ext.external, other, busy, done, ms };
  });
  console.log(`# external stream: synchronized after ${r.ms.toFixed(1)} ms`);
  assert.deepEqual({ ...r, ms: undefined }, { external: true, other: 'INPUT', busy: false, done: true, ms: undefined });
  assert.deepEqual(errors, []);
});
