// model.generate in headless Chromium (Debian chromium; WebGPU on SwiftShader, and the WASM CPU
// backend) over a language model exported with a static KV cache: the browser rows of
// bench/llm_bench.py (`--browser`), which passes the archive, the prompt and the variants.
//   node bench/browser_llm.mjs --model llama_bench.l8h512s128.pt2 --prompt 1,2,3 [--new 32]
//        [--variants f32,int8,int4,f16] [--devices webgpu,cpu] [--threads 1]
// The archive is read from .cache/models. Prints one JSON line per (device, variant) on stdout:
// {device, variant, tokens, prefill_ms, decode_tok_s, readback_bytes_per_token, load_ms} or
// {device, variant, error}. `f16` loads with `dtype: 'float16'` (refused where the adapter has no
// shader-f16: SwiftShader), the others with `weights`. `--threads N` (N > 1) serves the page
// cross-origin isolated and starts the multi-threaded WASM build with N workers.
import { chromium } from 'playwright-core';
import { serve } from '../scripts/serve.mjs';

const arg = (k, d) => { const i = process.argv.indexOf(`--${k}`); return i > 0 ? process.argv[i + 1] : d; };
const MODEL = arg('model');
const PROMPT = (arg('prompt', '') || '').split(',').filter((s) => s !== '').map(Number);
const NEW = Number(arg('new', 32));
const VARIANTS = arg('variants', 'f32,int8,int4,f16').split(',');
const DEVICES = arg('devices', 'webgpu,cpu').split(',');
const THREADS = Number(arg('threads', 1));
if (!MODEL || PROMPT.length === 0) {
  console.error('usage: node bench/browser_llm.mjs --model FILE.pt2 --prompt 1,2,3 [--new 32] [--variants f32,int8,int4,f16] [--devices webgpu,cpu] [--threads 1]');
  process.exit(2);
}

async function inPage({ file, prompt, maxNewTokens, device, variant, threads }) {
  const { load, init } = await import('/js/index.js');
  await init({ threads });
  const opts = variant === 'f16' ? { device, dtype: 'float16' } : { device, weights: variant };
  const t0 = performance.now();
  let m;
  try {
    m = await load(`/models/${file}`, opts);
  } catch (e) {
    return { error: `${e.code ?? ''} ${e.message ?? e}`.slice(0, 300) };
  }
  const loadMs = performance.now() - t0;
  try {
    const tokens = await m.generate(prompt, { maxNewTokens });
    const s = m.lastGenerateStats;
    return { device: m.device, tokens, prefill_ms: s.prefillMs, decode_tok_s: s.decodeTokS, readback_bytes_per_token: s.readbackBytesPerToken, load_ms: loadMs };
  } catch (e) {
    return { error: `${e.code ?? ''} ${e.message ?? e}`.slice(0, 300) };
  } finally {
    m.dispose();
  }
}

const server = await serve(0, { isolated: THREADS > 1 });
const origin = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader', '--disable-background-networking',
    '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'],
});
try {
  for (const device of DEVICES) {
    for (const variant of VARIANTS) {
      // A fresh page each time: one model's memory at a time.
      const page = await browser.newPage();
      await page.goto(`${origin}/www/blank.html`);
      const r = await page.evaluate(inPage, { file: MODEL, prompt: PROMPT, maxNewTokens: NEW, device, variant, threads: THREADS });
      console.log(JSON.stringify({ device, variant, ...r }));
      await page.close();
    }
  }
} finally {
  await browser.close();
  server.close();
}
