// The five real models (.cache/models, built by scripts/build_models.sh; both IRs) through the
// npm package in Node on the wasm CPU backend, against eager PyTorch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { load } from '../../js/index.js';
import { ROOT, metas, runModel } from './helpers.mjs';

const DIR = path.join(ROOT, '.cache', 'models');
const required = process.env.PT2WEB_REQUIRE_MODELS === '1';
const fetchBytes = async (rel) => new Uint8Array(readFileSync(path.join(DIR, rel)));

test('real models match PyTorch (wasm CPU backend, Node)', async (t) => {
  if (!existsSync(DIR)) {
    assert.ok(!required, 'PT2WEB_REQUIRE_MODELS=1 but .cache/models is missing');
    t.skip('no .cache/models (scripts/build_models.sh)');
    return;
  }
  const all = metas(DIR);
  assert.ok(all.length >= 10 || !required, `${all.length} model archives`);
  for (const [stem, meta] of all) {
    for (const r of await runModel(load, stem, meta, fetchBytes, 'cpu')) {
      console.log(`# ${stem.padEnd(24)} ${r.label.padEnd(8)} ${r.key.padEnd(9)} max_abs_err ${r.max.toExponential(3)} cosine ${r.cos.toFixed(8)} ${r.ms.toFixed(0)} ms`);
    }
  }
});
