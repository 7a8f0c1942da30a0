// Times raw WGSL kernels in headless Chromium's WebGPU (SwiftShader), outside pt2web:
//   node bench/shader_micro.mjs kernels.json
// kernels.json is a list of {name, wgsl, entry, params: [u32 words], floats: [indices of
// params that are f32], bufs: {binding: element count}, grid: [x, y, z], constants, reps};
// each kernel is dispatched `reps` times after a warm-up and its mean time printed, with the time
// its pipeline took to compile (createComputePipelineAsync). Used to
// pick kernel shapes for SwiftShader (see the header of shaders/matmul4.wgsl).
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { serve } from '../scripts/serve.mjs';
const server = await serve(0);
const kernels = JSON.parse(readFileSync(process.argv[2], 'utf8'));
// [{name, wgsl, entry, params: [u32 words], floats: [indices of words that are f32], bufs: {binding: floats}, grid: [x,y,z], constants, reps}]
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader'] });
const page = await browser.newPage();
await page.goto(`http://127.0.0.1:${server.address().port}/www/blank.html`);
page.on('console', (m) => console.log('page:', m.text()));
const r = await page.evaluate(async (kernels) => {
  const a = await navigator.gpu.requestAdapter();
  const dev = await a.requestDevice({ requiredLimits: { maxStorageBufferBindingSize: a.limits.maxStorageBufferBindingSize, maxBufferSize: a.limits.maxBufferSize } });
  const res = [];
  for (const k of kernels) {
    try {
    const mod = dev.createShaderModule({ code: k.wgsl });
    const info = await mod.getCompilationInfo();
    if (info.messages.some((m) => m.type === 'error')) { res.push({ name: k.name, err: info.messages.map((m) => m.message).join(';') }); continue; }
    const tc = performance.now();
    const pipe = await dev.createComputePipelineAsync({ layout: 'auto', compute: { module: mod, entryPoint: k.entry ?? 'main', constants: k.constants ?? {} } });
    const pbuf = dev.createBuffer({ size: Math.max(256, k.params.length * 4), usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    const words = new Uint32Array(Math.max(64, k.params.length)); const fv = new Float32Array(words.buffer);
    k.params.forEach((v, i) => { if ((k.floats ?? []).includes(i)) fv[i] = v; else words[i] = v; });
    dev.queue.writeBuffer(pbuf, 0, words);
    const entries = [{ binding: 0, resource: { buffer: pbuf } }];
    for (const [b, n] of Object.entries(k.bufs)) {
      const buf = dev.createBuffer({ size: Math.max(16, n * 4), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
      const d = new Float32Array(n); for (let i = 0; i < n; i++) d[i] = ((i * 7) % 97) * 0.01 - 0.3;
      dev.queue.writeBuffer(buf, 0, d);
      entries.push({ binding: Number(b), resource: { buffer: buf } });
    }
    const bg = dev.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries });
    const run = async (reps) => {
      const e = dev.createCommandEncoder();
      for (let i = 0; i < reps; i++) { const p = e.beginComputePass(); p.setPipeline(pipe); p.setBindGroup(0, bg); p.dispatchWorkgroups(...k.grid); p.end(); }
      dev.queue.submit([e.finish()]);
      await dev.queue.onSubmittedWorkDone();
    };
    const compileMs = performance.now() - tc;
    await run(1);
    const reps = k.reps ?? 5;
    const t = performance.now(); await run(reps); const ms = (performance.now() - t) / reps;
    res.push({ name: k.name, ms: +ms.toFixed(2), compile_ms: +compileMs.toFixed(1), extra: k.work ? +(k.work / ms / 1e6).toFixed(3) : undefined });
    } catch (e) { res.push({ name: k.name, err: String(e) }); }
  }
  return res;
}, kernels);
for (const x of r) console.log(JSON.stringify(x));
await browser.close(); server.close();
