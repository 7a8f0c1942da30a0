// The npm package as apps use it (issue 18 item 4): the tarball `npm pack` makes, installed
// into a fresh Vite + TypeScript app (tests/apps/vite: its own package.json and lock file; its
// node_modules is kept between runs and reinstalled when the lock file changes), type-checked
// by `tsc --noEmit --strict`, built by `vite build`, served as static files and run in Chromium
// on WebGPU, on the CPU and in a module Worker; a Node ESM consumer importing it by name; and
// the README's quick start, taken verbatim from the README and served beside the installed
// package. Outputs are compared with PyTorch's (tests/fixtures/mlp_train.*.safetensors).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, WEBGPU_ARGS, serveFiles } from '../browser/chromium.mjs';
import { ROOT, FIXTURES, readSafetensors } from '../js/helpers.mjs';

const APP = path.join(ROOT, 'tests', 'apps', 'vite');
const TOL = 1e-5;
let tmp;
let site;
let browser;

const sh = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });

/** The README's quick start: the html block after its marker comment. */
export function quickStart(readme) {
  const m = readme.match(/<!-- quick start: [^>]*-->\s*```html\n([\s\S]*?)```/);
  assert.ok(m, 'README.md has no quick start block (<!-- quick start: ... --> then ```html)');
  return m[1];
}

before(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'pt2web-apps-'));
  const tarball = path.join(tmp, sh('npm', ['pack', '--silent', '--pack-destination', tmp], ROOT).trim().split('\n').at(-1));
  // vite and typescript from the app's lock file, once per lock file; then the tarball.
  const lock = readFileSync(path.join(APP, 'package-lock.json'), 'utf8');
  const stamp = path.join(APP, 'node_modules', '.pt2web-lock');
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== lock) {
    sh('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], APP);
    writeFileSync(stamp, lock);
  }
  sh('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--loglevel=error', tarball], APP);
  // The quick start's folder: its index.html, the installed package, and model.pt2.
  const qs = path.join(tmp, 'quickstart');
  mkdirSync(path.join(qs, 'node_modules'), { recursive: true });
  writeFileSync(path.join(qs, 'index.html'), quickStart(readFileSync(path.join(ROOT, 'README.md'), 'utf8')));
  symlinkSync(path.join(APP, 'node_modules', 'pt2web'), path.join(qs, 'node_modules', 'pt2web'));
  copyFileSync(path.join(FIXTURES, 'mlp_train.pt2'), path.join(qs, 'model.pt2'));
});

after(async () => {
  await browser?.close();
  site?.server.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('the example touching the whole API type-checks under tsc --strict, and vite builds the app', () => {
  sh(path.join(APP, 'node_modules', '.bin', 'tsc'), ['--noEmit', '--strict', '-p', '.'], APP);
  const out = sh(path.join(APP, 'node_modules', '.bin', 'vite'), ['build', '--logLevel', 'warn'], APP);
  for (const l of out.split('\n').filter(Boolean)) console.log(`# ${l}`);
  assert.ok(existsSync(path.join(APP, 'dist', 'index.html')));
});

test('the Node ESM consumer imports the installed package by name and matches PyTorch', () => {
  const out = JSON.parse(sh('node', ['node.mjs', path.join(FIXTURES, 'mlp_train.pt2')], APP));
  const want = readSafetensors(path.join(FIXTURES, 'mlp_train.io.half.safetensors')).output_0;
  assert.equal(out.device, 'cpu');
  assert.deepEqual(out.shape, want.shape);
  assert.ok(out.data.every((v, i) => Math.abs(v - want.data[i]) <= TOL), JSON.stringify(out));
});

test('the built app, a Worker and the README quick start run in Chromium and match PyTorch', async () => {
  const dist = path.join(APP, 'dist');
  const qs = path.join(tmp, 'quickstart');
  site = await serveFiles((u) => {
    if (u.startsWith('/fixtures/')) return path.join(FIXTURES, u.slice('/fixtures/'.length));
    if (u.startsWith('/quickstart/')) return path.join(qs, u.slice('/quickstart/'.length));
    return path.join(dist, u);
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: WEBGPU_ARGS, headless: true });
  const ctx = await browser.newContext();
  const open = async (url) => {
    const page = await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${site.origin}${url}`);
    return { page, errors };
  };
  // One browser, the pages side by side.
  const runs = await Promise.all(['/?device=webgpu', '/?device=cpu', '/?device=webgpu&worker', '/?device=cpu&worker'].map(async (url) => {
    const { page, errors } = await open(url);
    await page.waitForFunction(() => window.__result, null, { timeout: 120_000 });
    return { url, r: await page.evaluate(() => window.__result), errors };
  }));
  for (const { url, r, errors } of runs) {
    assert.ok(r.ok, `${url}: ${r.error}`);
    const x = r.result;
    console.log(`# ${url}: ${JSON.stringify(x)}`);
    assert.equal(x.device, url.includes('webgpu') ? 'webgpu' : 'cpu', url);
    assert.ok(x.outputDiff <= TOL && x.stateDiff === 0, `${url}: output ${x.outputDiff}, weight ${x.stateDiff}`);
    assert.deepEqual(x.outputShape, [4, 8]);
    assert.deepEqual(x.programs, ['model']);
    const meta = JSON.parse(readFileSync(path.join(FIXTURES, 'mlp_train.meta.json'), 'utf8'));
    assert.deepEqual([x.listed, x.extraFiles, x.moduleCalls], [Object.keys(meta.programs), Object.keys(meta.extra_files), meta.programs.model.module_call_graph.map((e) => e.fqn)]);
    assert.deepEqual(x.backendsBuilt.sort(), ['cpu', 'webgpu']);
    // The pages load side by side in one browser context and each clears the cache first, so a page
    // may find the archive another one just cached: each downloads or reads the cache, never both.
    assert.ok(['download', 'cache'].includes(x.phases[0]), `${url}: ${x.phases}`);
    assert.deepEqual(x.phases.slice(1), ['upload', 'prepare'], url);
    assert.equal(x.isPt2, true);
    assert.equal(x.notPt2, false);
    assert.equal(x.inputError, 'INPUT');
    assert.ok(x.planSteps > 0 && x.profiled > 0, url);
    if (x.device === 'webgpu') {
      assert.ok(x.gpuTensorDiff <= TOL, `${url}: keepOnGpu output ${x.gpuTensorDiff}`);
      assert.equal(x.firstRunPipelines, 0, 'prepared at load: the first run compiles no shader');
    }
    assert.deepEqual(errors, [], url);
  }
  assert.ok(runs.some(({ r }) => r.result.phases[0] === 'download'), 'the first page to ask downloads the archive');
  // The quick start prints "<device>: [<shape>] <values>" for an input of 0.5s.
  const want = readSafetensors(path.join(FIXTURES, 'mlp_train.io.half.safetensors')).output_0;
  const { page, errors } = await open('/quickstart/');
  await page.waitForFunction(() => /^\w+: \[/.test(document.body?.textContent ?? ''), null, { timeout: 60_000 });
  const text = await page.evaluate(() => document.body.textContent);
  console.log(`# quick start: ${text}`);
  const [, device, shape, values] = text.match(/^(\w+): \[([\d,]*)\] (.*)$/);
  assert.equal(device, 'webgpu', 'the quick start takes WebGPU where Chromium has it');
  assert.deepEqual(shape.split(',').map(Number), want.shape);
  const got = values.split(' ').map(Number);
  assert.equal(got.length, want.data.length);
  assert.ok(got.every((v, i) => Math.abs(v - want.data[i]) <= TOL), text);
  assert.deepEqual(errors, []);
});
