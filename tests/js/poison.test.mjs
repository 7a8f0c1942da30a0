// A panic traps the WebAssembly instance (panic = abort). pt2web then refuses every call with
// a Pt2WebError INTERNAL saying the instance is poisoned, instead of entering a half-updated
// instance or leaving a promise pending forever. The panic is asked for on purpose
// (`__panicForTest`), in a call the event loop runs: its promise would never settle by itself,
// and the trap, which no caller catches, would end the Node process. It runs in a child
// process (a poisoned instance stays poisoned; the test runner reports any uncaught
// exception), which must exit normally. The panic in a direct call: poison_direct.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { ROOT, FIXTURES } from './helpers.mjs';
import { isPoisoned } from './hostile.mjs';

const CHILD = `
  import { readFileSync } from 'node:fs';
  import { load, gpu, __panicForTest } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'js', 'index.js')).href)};
  import { readSafetensors } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'tests', 'js', 'helpers.mjs')).href)};
  const fx = (f) => ${JSON.stringify(FIXTURES)} + '/' + f;
  const bytes = new Uint8Array(readFileSync(fx('dyn_batch.pt2')));
  const io = readSafetensors(fx('dyn_batch.io.safetensors'));
  const model = await load(bytes, { device: 'cpu' });
  const settle = async (f) => { try { await f(); return { ok: true }; } catch (e) { return { name: e.name, code: e.code, message: e.message }; } };
  const out = { before: (await model.run([io.input_0]))[0].data[0] === io.output_0.data[0] };
  out.pending = await settle(() => __panicForTest({ pending: true }));
  await new Promise((r) => setTimeout(r, 50));
  out.run = await settle(() => model.run([io.input_0]));
  out.load = await settle(() => load(bytes, { device: 'cpu' }));
  out.stats = await settle(() => model.lastRunStats());
  out.memory = await settle(() => gpu.memoryStats());
  out.state = await settle(() => model.state.get('x'));
  console.log(JSON.stringify(out));
`;

test('a panic inside a pending call rejects it and poisons pt2web; the process lives on', () => {
  const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', CHILD], { encoding: 'utf8' });
  const r = JSON.parse(stdout.trim().split('\n').pop());
  assert.equal(r.before, true);
  assert.ok(isPoisoned(r.pending), JSON.stringify(r.pending));
  assert.match(r.pending.message, /a panic asked for by a test, in a pending call/);
  for (const k of ['run', 'load', 'stats', 'memory', 'state']) assert.ok(isPoisoned(r[k]), `${k}: ${JSON.stringify(r[k])}`);
});
