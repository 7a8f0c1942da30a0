// The Worker of scripts/big_archive_browser.mjs: loads /big.pt2 on WebGPU through the archive
// cache (the first load downloads and caches it, the second reads the cached file, entry by
// entry, with FileReaderSync), runs each against eager PyTorch's output and posts the load
// times and this Worker's wasm memory. The cache is OPFS: the Cache API of the test's
// ephemeral browser context refuses entries this large ("Unexpected internal error" from put;
// a load then goes on uncached), where a normal profile keeps them.
import { load, wasmMemoryBytes, init, clearCache } from '/js/index.js';
import * as st from '/tests/js/st.mjs';

onmessage = async () => {
  try {
    await init();
    await clearCache('/big.pt2');
    const io = st.parseSafetensors(new Uint8Array(await (await fetch('/big.io.safetensors')).arrayBuffer()));
    const before = wasmMemoryBytes();
    const loads = [];
    for (const expect of ['download', 'cache']) {
      const phases = [];
      const t0 = performance.now();
      const m = await load('/big.pt2', { device: 'webgpu', cache: 'opfs', onProgress: (_l, _t, p) => { if (phases.at(-1) !== p.phase) phases.push(p.phase); } });
      const loadMs = performance.now() - t0;
      const got = st.flattenOut(await m.run([io.input_0]))[0];
      st.assertClose(`big in a Worker (${expect})`, got, io.output_0);
      loads.push({ phases, loadMs, device: m.device, wasm: wasmMemoryBytes() });
      m.dispose();
    }
    await clearCache('/big.pt2');
    postMessage({ ok: true, before, loads });
  } catch (e) {
    postMessage({ ok: false, error: `${e?.code ?? ''} ${e?.message ?? e}` });
  }
};
