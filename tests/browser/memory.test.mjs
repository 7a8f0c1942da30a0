// torch.cuda.memory's API on the `gpu` object in Chromium (issue 19 item 3): a memory history
// recorded from before the load, and a snapshot after a run that accounts for every live
// byte and names the program's ops and nodes; statistics under torch's keys that agree with
// the older fields.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chromiumSuite } from './chromium.mjs';

const suite = chromiumSuite();

test('WebGPU memory history: the snapshot accounts for every live byte and names the nodes', async () => {
  const { page, errors } = await suite.newPage();
  const r = await page.evaluate(async () => {
    const { load, gpu, tensor } = await import('/js/index.js');
    await gpu.recordMemoryHistory(true, 100000);
    const m = await load('/fixtures/dyn_batch.pt2', { device: 'webgpu' });
    const x = [tensor(new Float32Array(8 * 16).fill(0.5), [8, 16])];
    await m.run(x);
    await m.run(x);
    await gpu.synchronize();
    const snap = gpu.memorySnapshot();
    const stats = gpu.memoryStats();
    const nested = gpu.memoryStatsAsNestedDict();
    const info = gpu.memGetInfo();
    const reserved = gpu.memoryReserved();
    const maxReserved = gpu.maxMemoryReserved();
    gpu.resetAccumulatedMemoryStats();
    const reset = gpu.memoryStats();
    await gpu.recordMemoryHistory(false);
    return { snap, stats, nested, info, reserved, maxReserved, reset };
  });
  const { snap, stats } = r;
  const blocks = snap.segments.flatMap((s) => s.blocks);
  const active = blocks.filter((b) => b.state === 'active_allocated');
  const activeBytes = active.reduce((a, b) => a + b.size, 0);
  const segBytes = snap.segments.reduce((a, s) => a + s.total_size, 0);
  console.log(`# ${snap.segments.length} segments (${segBytes} B), ${activeBytes} B active, ${snap.device_traces[0].length} actions`);
  assert.ok(activeBytes > 0, 'the weights are live');
  assert.equal(activeBytes, stats.allocated, 'active blocks sum to the allocated bytes');
  assert.equal(segBytes, r.reserved, 'segments sum to memoryReserved()');
  assert.ok(r.maxReserved >= r.reserved);
  assert.equal(stats['allocated_bytes.all.current'], stats.allocated);
  assert.equal(stats['allocated_bytes.all.peak'], stats.peak);
  assert.equal(stats['num_device_alloc'], stats.buffersCreated);
  assert.equal(r.nested.allocated_bytes.all.current, stats.allocated);
  const [free, total] = r.info;
  assert.equal(total, stats.recommendedMax);
  assert.ok(free <= total);
  assert.equal(r.reset['allocated_bytes.all.freed'], 0, 'reset zeroes the accumulated totals');
  assert.equal(r.reset['allocated_bytes.all.current'], stats.allocated);
  // The history: from before the load, so every live block is an alloc not yet freed.
  const trace = snap.device_traces[0];
  const n = (a) => trace.filter((e) => e.action === a).length;
  assert.equal(n('alloc') - n('free_completed'), active.length);
  assert.equal(n('segment_alloc') - n('segment_free'), snap.segments.length);
  const frames = trace.filter((e) => e.action === 'alloc').map((e) => e.frames[0]);
  assert.equal(frames[0].name, '<outside a node>', 'the weights upload before any node runs');
  assert.ok(frames.some((f) => f.name.startsWith('aten.') && f.filename.length > 0), JSON.stringify(frames.slice(0, 8)));
  assert.deepEqual(errors, []);
});
