// A Worker consumer: the same example in a module Worker (pt2web's WebAssembly runs there).
import { example } from './example';

self.onmessage = async (ev: MessageEvent<{ device: 'webgpu' | 'cpu'; base: string }>) => {
  try {
    self.postMessage({ result: await example(ev.data.device, ev.data.base) });
  } catch (e) {
    self.postMessage({ error: String((e as Error)?.stack ?? e) });
  }
};
