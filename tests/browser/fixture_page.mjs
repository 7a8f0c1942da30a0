// Shared by the browser tests: a function that runs in the page (page.evaluate serializes it,
// so it imports what it needs itself).

// Runs in the page: every io case of one fixture through the package API.
export async function runFixtureInPage({ stem, archive, programs, device }) {
  const { load } = await import('/js/index.js');
  const st = await import('/tests/js/st.mjs');
  const bytes = new Uint8Array(await (await fetch(`/fixtures/${archive}`)).arrayBuffer());
  let n = 0;
  for (const [pname, pm] of Object.entries(programs)) {
    for (const c of pm.io_cases ?? []) {
      const io = st.parseSafetensors(new Uint8Array(await (await fetch(`/fixtures/${c.file}`)).arrayBuffer()));
      const model = await load(bytes, { program: pname, device });
      try {
        const [args, kwargs] = st.unflattenSpec(model.info.specs.inSpec, c.inputs.map((i) => io[i.key]));
        const got = st.flattenOut(await model.run({ args, kwargs }));
        if (got.length !== c.outputs.length) throw new Error(`${got.length} outputs, torch gave ${c.outputs.length}`);
        c.outputs.forEach((o, i) => st.assertClose(`${stem}/${pname} ${c.label} ${o.key}`, got[i], io[o.key]));
        // Buffers the run mutated, as they are now (on WebGPU they stay on the GPU and are
        // read back by state.get).
        for (const key of c.buffers_after ?? []) {
          const fqn = key.replace(/^buffer_after\./, '');
          st.assertClose(`${stem}/${pname} ${c.label} ${key}`, await model.state.get(fqn), io[key]);
        }
        n++;
      } finally {
        model.dispose();
      }
    }
  }
  return n;
}
