// A panic in a direct call into the instance: the WebAssembly.RuntimeError its trap throws
// becomes a Pt2WebError INTERNAL saying the instance is poisoned, and so does every later
// call (see poison.test.mjs for a panic inside a pending call).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { load, __panicForTest } from '../../js/index.js';
import { FIXTURES } from './helpers.mjs';
import { isPoisoned } from './hostile.mjs';

test('a panic in a direct call throws INTERNAL (poisoned), and so does every later call', async () => {
  const bytes = new Uint8Array(readFileSync(path.join(FIXTURES, 'dyn_batch.pt2')));
  const model = await load(bytes, { device: 'cpu' });
  await assert.rejects(__panicForTest(), (e) => isPoisoned(e) && /a panic asked for by a test/.test(e.message));
  await assert.rejects(model.run({ x: null }), isPoisoned);
  await assert.rejects(load(bytes, { device: 'cpu' }), isPoisoned);
});
