// model.generate in Node (wasm CPU backend) over the tiny Llama- and GPT-2-style models with a
// static KV cache (tests/fixgen/gen_lm.py, in .cache/models): the greedy tokens equal PyTorch's
// own loop over the same saved program; onToken sees each token; seeded sampling repeats.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { load, Pt2WebError } from '../../js/index.js';
import { ROOT } from './helpers.mjs';

const DIR = path.join(ROOT, '.cache', 'models');
const required = process.env.PT2WEB_REQUIRE_MODELS === '1';
const MODELS = ['llama_static', 'gpt2_static'];

test('model.generate gives PyTorch\'s greedy tokens (Llama- and GPT-2-style, Node CPU)', async (t) => {
  if (!existsSync(path.join(DIR, 'gpt2_static.generate.json'))) {
    assert.ok(!required, 'PT2WEB_REQUIRE_MODELS=1 but the LM models are missing (scripts/build_models.sh)');
    t.skip('no .cache/models/*_static (scripts/build_models.sh)');
    return;
  }
  for (const name of MODELS) {
    const meta = JSON.parse(readFileSync(path.join(DIR, `${name}.generate.json`), 'utf8'));
    const bytes = new Uint8Array(readFileSync(path.join(DIR, `${name}.pt2`)));
    const model = await load(bytes, { device: 'cpu' });
    const seen = [];
    const tokens = await model.generate(meta.prompt, { maxNewTokens: meta.max_new_tokens, onToken: (id) => seen.push(id) });
    assert.deepEqual(tokens, meta.tokens, name);
    assert.deepEqual(seen, tokens, `${name}: onToken`);
    assert.equal(model.lastGenerateStats.readbackBytesPerToken, 0);
    assert.ok(model.lastGenerateStats.decodeTokS > 0);
    console.log(`# ${name}: ${tokens.join(',')} decode ${model.lastGenerateStats.decodeTokS.toFixed(1)} tok/s`);
    model.dispose();
    // Seeded sampling: a fresh model (its cache at position 0) with the same seed repeats.
    const sample = async (seed) => {
      const m = await load(bytes, { device: 'cpu' });
      try {
        return await m.generate(meta.prompt, { maxNewTokens: 8, temperature: 0.9, topK: 20, topP: 0.95, seed });
      } finally {
        m.dispose();
      }
    };
    const a = await sample(5);
    assert.deepEqual(await sample(5), a, `${name}: same seed, same tokens`);
  }
  // Stopping at eos; clear errors for bad options, and the model still works after them.
  const meta = JSON.parse(readFileSync(path.join(DIR, 'llama_static.generate.json'), 'utf8'));
  const model = await load(new Uint8Array(readFileSync(path.join(DIR, 'llama_static.pt2'))), { device: 'cpu' });
  await assert.rejects(model.generate(meta.prompt, { topP: 0 }), (e) => e instanceof Pt2WebError && /top-p 0/.test(e.message));
  await assert.rejects(model.generate([1.5]), (e) => e instanceof Pt2WebError && /token id 1.5/.test(e.message));
  await assert.rejects(model.generate(meta.prompt, { onToken: () => { throw new Error('stop here'); } }), /stop here/);
  const eos = meta.tokens[2];
  const fresh = await load(new Uint8Array(readFileSync(path.join(DIR, 'llama_static.pt2'))), { device: 'cpu' });
  const stopped = await fresh.generate(meta.prompt, { maxNewTokens: 10, eos });
  assert.deepEqual(stopped, meta.tokens.slice(0, meta.tokens.indexOf(eos) + 1));
  fresh.dispose();
  model.dispose();
});

test('model.generate takes an AbortSignal: CANCELLED before the next call, and the model then gives PyTorch\'s tokens (Node CPU)', async (t) => {
  if (!existsSync(path.join(DIR, 'llama_static.generate.json'))) {
    assert.ok(!required, 'PT2WEB_REQUIRE_MODELS=1 but the LM models are missing (scripts/build_models.sh)');
    t.skip('no .cache/models/*_static (scripts/build_models.sh)');
    return;
  }
  const meta = JSON.parse(readFileSync(path.join(DIR, 'llama_static.generate.json'), 'utf8'));
  const model = await load(new Uint8Array(readFileSync(path.join(DIR, 'llama_static.pt2'))), { device: 'cpu' });
  const cancelled = (e) => e instanceof Pt2WebError && e.code === 'CANCELLED';
  const before = new AbortController();
  before.abort();
  await assert.rejects(model.generate(meta.prompt, { signal: before.signal }), cancelled);
  // Aborted from onToken after two tokens: the next decode call stops before its first node.
  const stop = new AbortController();
  const seen = [];
  const onToken = (id) => { seen.push(id); if (seen.length === 2) stop.abort(); };
  await assert.rejects(model.generate(meta.prompt, { maxNewTokens: meta.max_new_tokens, onToken, signal: stop.signal }), cancelled);
  assert.deepEqual(seen, meta.tokens.slice(0, 2));
  await assert.rejects(model.generate(meta.prompt, { signal: {} }), (e) => e instanceof Pt2WebError && e.code === 'INPUT' && /generate\(\): options.signal/.test(e.message));
  // The same model, a signal that never aborts: PyTorch's greedy tokens.
  const calm = new AbortController();
  assert.deepEqual(await model.generate(meta.prompt, { maxNewTokens: meta.max_new_tokens, signal: calm.signal }), meta.tokens);
  model.dispose();
});

test('load({weights}) quantizes at load, load({dtype: \'float16\'}) computes in f16: PyTorch\'s greedy tokens (Node CPU)', async (t) => {
  if (!existsSync(path.join(DIR, 'gpt2_static.generate.json'))) {
    t.skip('no .cache/models/*_static (scripts/build_models.sh)');
    return;
  }
  for (const name of MODELS) {
    const meta = JSON.parse(readFileSync(path.join(DIR, `${name}.generate.json`), 'utf8'));
    const bytes = new Uint8Array(readFileSync(path.join(DIR, `${name}.pt2`)));
    for (const weights of ['int8', 'int4']) {
      const model = await load(bytes, { device: 'cpu', weights });
      const tokens = await model.generate(meta.prompt, { maxNewTokens: meta.max_new_tokens });
      assert.deepEqual(tokens, meta[`tokens_${weights}`], `${name} ${weights}`);
      assert.ok(model.state.keys().some((k) => k.endsWith('.qweight')), `${name} ${weights}: state`);
      model.dispose();
    }
  }
  // f16 execution (`dtype: 'float16'`): PyTorch's f32 greedy tokens (these models keep them),
  // float32 logits out, the KV cache held in f16.
  for (const name of MODELS) {
    const meta = JSON.parse(readFileSync(path.join(DIR, `${name}.generate.json`), 'utf8'));
    const model = await load(new Uint8Array(readFileSync(path.join(DIR, `${name}.pt2`))), { device: 'cpu', dtype: 'float16' });
    const tokens = await model.generate(meta.prompt, { maxNewTokens: meta.max_new_tokens });
    assert.deepEqual(tokens, meta.tokens, `${name} float16`);
    const cache = model.state.keys().find((k) => /cache/.test(k));
    assert.equal((await model.state.get(cache)).dtype, 'float16', `${name}: ${cache}`);
    model.dispose();
  }
  const bytes = new Uint8Array(readFileSync(path.join(DIR, 'llama_static.pt2')));
  await assert.rejects(load(bytes, { device: 'cpu', dtype: 'float8' }),
    (e) => e instanceof Pt2WebError && e.code === 'INPUT' && /dtype/.test(e.message) && /float8/.test(e.message));
  await assert.rejects(load(bytes, { device: 'cpu', weights: 'int3' }),
    (e) => e instanceof Pt2WebError && e.code === 'INPUT' && /weights/.test(e.message) && /int3/.test(e.message));
});

test('model.generate refuses a program without a static KV cache', async () => {
  const bytes = new Uint8Array(readFileSync(path.join(ROOT, 'tests', 'fixtures', 'mlp_train.pt2')));
  const model = await load(bytes, { device: 'cpu' });
  await assert.rejects(model.generate([1, 2]), (e) => e instanceof Pt2WebError && /static KV cache/.test(e.message));
  model.dispose();
});
