// The JS API beside the Rust one (issue 18 item 5), in Node on the CPU backend: programs and
// extra files of an archive, the module call graph, expectedOpsetVersion, state.set and the
// backend switches; each value checked against what PyTorch wrote (the fixtures' meta.json,
// state and io safetensors).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { load, openArchive, listPrograms, backends, Archive, tensor } from '../../js/index.js';
import { FIXTURES, readSafetensors } from './helpers.mjs';

const bytesOf = (f) => new Uint8Array(readFileSync(path.join(FIXTURES, f)));
const metaOf = (name) => JSON.parse(readFileSync(path.join(FIXTURES, `${name}.meta.json`), 'utf8'));
const maxDiff = (a, b) => Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i])));

test('listPrograms and archive.extraFiles give what torch saved', async () => {
  const multi = metaOf('multi_program');
  assert.deepEqual((await listPrograms(bytesOf('multi_program.pt2'))).sort(), Object.keys(multi.programs).sort());
  const archive = await openArchive(bytesOf('extra_files.pt2'));
  assert.ok(archive instanceof Archive);
  assert.deepEqual(await listPrograms(archive), ['model']);
  const files = archive.extraFiles();
  const want = metaOf('extra_files').extra_files;
  assert.deepEqual(Object.keys(files).sort(), Object.keys(want).sort());
  for (const [name, w] of Object.entries(want)) {
    assert.equal(files[name].length, w.nbytes, name);
    assert.equal(createHash('sha256').update(files[name]).digest('hex'), w.sha256, name);
    assert.equal(new TextDecoder().decode(files[name]), w.content, name);
  }
  // An Archive loads as its bytes do.
  const m = await load(archive);
  assert.equal(m.info.inputs.length, metaOf('extra_files').programs.model.user_inputs.length);
  m.dispose();
});

test('model.info.moduleCallGraph lists torch\'s module_call_graph', async () => {
  for (const name of ['mlp_train', 'pytree_io']) {
    const want = metaOf(name).programs.model.module_call_graph;
    const m = await load(bytesOf(`${name}.pt2`));
    const got = m.info.moduleCallGraph;
    assert.deepEqual(got.map((e) => e.fqn), want.map((e) => e.fqn), name);
    assert.deepEqual(got.map((e) => e.forwardArgNames), want.map((e) => e.forward_arg_names ?? []), name);
    assert.deepEqual(got[0].inSpec, m.info.specs.inSpec, 'the root entry holds the call spec');
    m.dispose();
  }
});

test('expectedOpsetVersion: a mismatch is a VERSION error, the version torch wrote loads', async () => {
  const bytes = bytesOf('mlp_train.pt2');
  // torch 2.15 writes opset aten 10 into models/model.json.
  (await load(bytes, { expectedOpsetVersion: { aten: 10 } })).dispose();
  await assert.rejects(load(bytes, { expectedOpsetVersion: { aten: 9 } }), (e) => e.code === 'VERSION' && /opset 'aten'/.test(e.message));
  await assert.rejects(load(bytes, { expectedOpsetVersion: { aten: 'ten' } }), (e) => e.code === 'INPUT');
});

test('state.set replaces a parameter for the next run; folded, unread or mismatched state is refused', async () => {
  const io = readSafetensors(path.join(FIXTURES, 'mlp_train.io.safetensors'));
  const state = readSafetensors(path.join(FIXTURES, 'mlp_train.state.safetensors'));
  const m = await load(bytesOf('mlp_train.pt2'));
  const before = await m.run([io.input_0]);
  assert.ok(maxDiff(before.data, io.output_0.data) <= 1e-5);
  // Without fc2's bias, PyTorch's output less that bias.
  const bias = state['fc2.bias'].data;
  m.state.set('fc2.bias', tensor(new Float32Array(bias.length), [bias.length]));
  assert.deepEqual(Array.from((await m.state.get('fc2.bias')).data), Array.from(new Float32Array(bias.length)));
  const after = await m.run([io.input_0]);
  const want = io.output_0.data.map((v, i) => v - bias[i % bias.length]);
  assert.ok(maxDiff(after.data, want) <= 1e-5, `${maxDiff(after.data, want)}`);
  assert.throws(() => m.state.set('fc2.bias', tensor(new Float32Array(3), [3])), (e) => e.code === 'INPUT' && /expected float32 \[8\], got float32 \[3\]/.test(e.message));
  assert.throws(() => m.state.set('nope', tensor(new Float32Array(1), [1])), (e) => e.code === 'INPUT' && /no parameter/.test(e.message));
  m.dispose();
  // Batch norm folded into the convolutions at load: its parameters are no longer read.
  const conv = await load(bytesOf('convnet_train.pt2'));
  assert.throws(() => conv.state.set('bn1.weight', tensor(new Float32Array(8), [8])), (e) => e.code === 'INPUT' && /graphPasses/.test(e.message));
  conv.dispose();
});

test('backends: the switches read and set; graph passes off plan the graph as exported, same outputs', async () => {
  const defaults = await backends.get();
  assert.deepEqual(defaults.built.sort(), ['cpu', 'webgpu']);
  assert.equal(defaults.matmulAlgorithm, 'auto');
  assert.equal(defaults.deterministic, false);
  assert.ok(defaults.graphPasses.includes('fold_bn') && defaults.graphPasses.includes('fuse'));
  assert.equal(await backends.isBuilt('vulkan'), false);
  assert.equal(await backends.isAvailable('cpu'), true);
  assert.equal(await backends.isAvailable('webgpu'), false, 'Node has no navigator.gpu');
  const io = readSafetensors(path.join(FIXTURES, 'convnet_train.io.safetensors'));
  const steps = {};
  try {
    for (const passes of ['all', 'none']) {
      await backends.set({ graphPasses: passes, matmulAlgorithm: 'tiled', deterministic: true });
      const m = await load(bytesOf('convnet_train.pt2'));
      steps[passes] = (await m.prepare([io.input_0])).planSteps;
      assert.ok(maxDiff((await m.run([io.input_0])).data, io.output_0.data) <= 1e-4, passes);
      if (passes === 'none') {
        // Nothing folded: batch-norm state can be set (and is read).
        m.state.set('bn1.bias', await m.state.get('bn1.bias'));
      }
      m.dispose();
    }
    const now = await backends.get();
    assert.deepEqual([now.graphPasses, now.matmulAlgorithm, now.deterministic], [[], 'tiled', true]);
  } finally {
    await backends.set({ graphPasses: 'all', matmulAlgorithm: 'auto', deterministic: false });
  }
  assert.ok(steps.none > steps.all, JSON.stringify(steps));
  assert.deepEqual((await backends.get()).graphPasses, defaults.graphPasses);
  await assert.rejects(backends.set({ matmulAlgorithm: 'fastest' }), (e) => e.code === 'INPUT' && /auto, tiled, blocked/.test(e.message));
  await assert.rejects(backends.set({ warp: true }), (e) => e.code === 'INPUT' && /no switch 'warp'/.test(e.message));
  await assert.rejects(backends.set({ graphPasses: ['dce', 'magic'] }), (e) => e.code === 'INPUT' && /unknown graph pass 'magic'/.test(e.message));
});

test('backends.optEinsum: torch.backends.opt_einsum read and set, bad values rejected', async () => {
  assert.deepEqual(await backends.optEinsum.get(), { enabled: true, strategy: 'auto', isAvailable: true });
  try {
    await backends.optEinsum.set({ strategy: 'greedy' });
    assert.deepEqual(await backends.optEinsum.get(), { enabled: true, strategy: 'greedy', isAvailable: true });
    await backends.set({ optEinsum: { enabled: false, strategy: 'optimal' } });
    assert.deepEqual((await backends.get()).optEinsum, { enabled: false, strategy: 'optimal', isAvailable: true });
    await assert.rejects(backends.optEinsum.set({ strategy: 'dp' }), (e) => e.code === 'INPUT' && /auto, greedy, optimal/.test(e.message));
    await assert.rejects(backends.optEinsum.set({ enabled: 'yes' }), (e) => e.code === 'INPUT' && /optEinsum.enabled/.test(e.message));
    assert.equal((await backends.optEinsum.get()).strategy, 'optimal', 'a rejected set changes nothing');
  } finally {
    await backends.optEinsum.set({ enabled: true, strategy: 'auto' });
  }
});

test('backends.cpu.getCpuCapability: the WebAssembly build running (Node runs pkg/, simd128)', async () => {
  const cap = await backends.cpu.getCpuCapability();
  assert.ok(['WASM_SIMD128', 'WASM_RELAXED_SIMD'].includes(cap), cap);
  assert.equal(cap, 'WASM_SIMD128', 'Node 20 loads the plain build (no relaxed SIMD)');
});
