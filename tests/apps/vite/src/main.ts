// The page: `?device=webgpu|cpu` runs the example here; `?worker` runs it in a module Worker.
import { example, type ExampleResult } from './example';

declare global {
  interface Window { __result?: { ok: true; result: ExampleResult } | { ok: false; error: string } }
}

const params = new URLSearchParams(location.search);
const device = params.get('device') === 'webgpu' ? 'webgpu' : 'cpu';
const out = document.getElementById('out') as HTMLPreElement;

async function main(): Promise<ExampleResult> {
  if (!params.has('worker')) return example(device);
  const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' });
  return new Promise<ExampleResult>((resolve, reject) => {
    worker.onmessage = (ev: MessageEvent<{ result?: ExampleResult; error?: string }>) => {
      if (ev.data.result) resolve(ev.data.result);
      else reject(new Error(ev.data.error));
    };
    worker.onerror = (ev) => reject(new Error(ev.message));
    worker.postMessage({ device, base: location.origin });
  });
}

main().then(
  (result) => { window.__result = { ok: true, result }; out.textContent = JSON.stringify(result, null, 1); },
  (e: unknown) => { window.__result = { ok: false, error: String((e as Error)?.stack ?? e) }; out.textContent = String(e); },
);
