// The op suite (tests/fixtures/ops: every family, both IRs, expected values from PyTorch) through
// the npm package in Node, on the CPU backend compiled to wasm32 with SIMD.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { load } from '../../js/index.js';
import { FIXTURES, runOpFamily } from './helpers.mjs';

const fams = readdirSync(path.join(FIXTURES, 'ops')).filter((f) => f.endsWith('.cases.json')).map((f) => f.replace('.cases.json', '')).sort();
const fetchBytes = async (rel) => new Uint8Array(readFileSync(path.join(FIXTURES, rel)));

for (const fam of fams) {
  test(`op family ${fam} (wasm CPU backend)`, async () => {
    const r = await runOpFamily(load, fam, fetchBytes, 'cpu');
    console.log(`# ${fam}: ${r.passed} passed, ${r.failures.length} failed`);
    assert.deepEqual(r.failures, []);
    assert.ok(r.passed > 0);
  });
}
