#!/usr/bin/env bash
# `npm pack` the package, install the tarball into a fresh temp project, import it by name and
# run a fixture with `node --test` (the CPU backend in Node).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$root"
tarball="$(npm pack --silent --pack-destination "$tmp" | tail -1)"
echo "packed $tarball ($(stat -c %s "$tmp/$tarball") bytes)"
mkdir "$tmp/app"
cd "$tmp/app"
echo '{"name":"app","version":"1.0.0","type":"module","private":true}' > package.json
npm install --silent --no-audit --no-fund "$tmp/$tarball"
cat > app.test.mjs <<JS
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { load, tensor } from 'pt2web';
test('the installed package runs a fixture', async () => {
  const model = await load(new Uint8Array(readFileSync('$root/tests/fixtures/dyn_batch.pt2')));
  assert.equal(model.device, 'cpu');
  const x = new Float32Array(3 * 16).map((_, i) => Math.sin(i));
  const [y, n] = await model.run([tensor(x, [3, 16])]);
  assert.deepEqual(y.shape, [3, 8]);
  assert.ok(y.data instanceof Float32Array && y.data.every(Number.isFinite));
  model.dispose();
});
JS
node --test app.test.mjs
