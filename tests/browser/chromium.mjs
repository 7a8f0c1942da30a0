// The Chromium harness of the browser tests: Debian chromium driven by playwright-core, with
// SwiftShader WebGPU (flags from DESIGN.md), and the repo served on a free port.
import { before, after } from 'node:test';
import { createServer } from 'node:http';
import { createReadStream, existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { serve, route } from '../../scripts/serve.mjs';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const WEBGPU_ARGS = ['--no-sandbox', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader', '--disable-background-networking',
  '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'];

/**
 * Start the server and a headless Chromium with `args` before the file's tests, close them
 * after. The returned object holds `origin` and `browser` once started, and `newPage(init)`:
 * a page on a blank document of the server (`init`: a script run before the page's own),
 * with its uncaught errors collected in `errors`. `handle`, when given, sees each request first
 * (as `serveFiles` takes it): a test's own archive route, counting what it serves.
 */
export function chromiumSuite(args = WEBGPU_ARGS, handle = undefined) {
  const suite = {
    origin: null,
    browser: null,
    server: null,
    async newPage(init) {
      const ctx = await suite.browser.newContext();
      if (init) await ctx.addInitScript(init);
      const page = await ctx.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${suite.origin}/www/blank.html`);
      return { page, ctx, errors };
    },
  };
  before(async () => {
    suite.server = handle ? (await serveFiles(route, handle)).server : await serve(0);
    suite.origin = `http://127.0.0.1:${suite.server.address().port}`;
    suite.browser = await chromium.launch({ executablePath: CHROMIUM, args, headless: true });
  });
  after(async () => {
    await suite.browser?.close();
    suite.server?.close();
  });
  return suite;
}

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };

/**
 * A static file server on a free port of 127.0.0.1, as an app's own server would be:
 * `resolve(pathname)` maps a URL path to a file (null: 404); `handle(req, res)`, when given,
 * sees each request first and returns true when it answered it. Resolves to `{server, origin}`.
 */
export async function serveFiles(resolve, handle) {
  const server = createServer((req, res) => {
    if (handle?.(req, res)) return;
    const u = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const file = u.includes('..') ? null : resolve(u.endsWith('/') ? `${u}index.html` : u);
    if (!file || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end(`not found: ${u}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'content-length': statSync(file).size });
    if (req.method === 'HEAD') res.end();
    else createReadStream(file).pipe(res);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}
