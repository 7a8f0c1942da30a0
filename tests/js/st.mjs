// Pure helpers shared by the Node tests and the in-browser tests (no Node imports here):
// parse safetensors, compare with PyTorch's values, rebuild pytree structures.
const ARRAYS = {
  F32: [Float32Array, 'float32'], F64: [Float64Array, 'float64'], F16: [Uint16Array, 'float16'],
  BF16: [Uint16Array, 'bfloat16'], I64: [BigInt64Array, 'int64'], I32: [Int32Array, 'int32'],
  I16: [Int16Array, 'int16'], I8: [Int8Array, 'int8'], U8: [Uint8Array, 'uint8'], BOOL: [Uint8Array, 'bool'],
  // complex64: interleaved (re, im) pairs, as the package holds them.
  C64: [Float32Array, 'complex64'],
};

/** Parse safetensors bytes (Uint8Array): {name: {data, shape, dtype}}. */
export function parseSafetensors(buf) {
  const n = Number(new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(buf.subarray(8, 8 + n)));
  const base = 8 + n;
  const out = {};
  for (const [k, v] of Object.entries(header)) {
    if (k === '__metadata__') continue;
    const [Ctor, dtype] = ARRAYS[v.dtype];
    const [a, b] = v.data_offsets;
    const bytes = new Uint8Array(buf.subarray(base + a, base + b)); // aligned copy
    out[k] = { data: new Ctor(bytes.buffer, 0, (b - a) / Ctor.BYTES_PER_ELEMENT), shape: v.shape, dtype };
  }
  return out;
}

function f16ToF32(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
const bf16ToF32 = (h) => new Float32Array(new Uint32Array([h << 16]).buffer)[0];

export function toNumbers(t) {
  if (t.dtype === 'float16') return Array.from(t.data, f16ToF32);
  if (t.dtype === 'bfloat16') return Array.from(t.data, bf16ToF32);
  return Array.from(t.data, Number);
}

/** Max abs error; throws with the first outlier when not within tolerance. */
export function assertClose(label, got, want, tol) {
  if (!got || !got.shape) throw new Error(`${label}: not a tensor: ${JSON.stringify(got)}`);
  // A complex result against torch's view_as_real of it (how the generators store complex
  // outputs): the same interleaved numbers, with a trailing dim of 2.
  if (got.dtype === 'complex64' || got.dtype === 'complex128') {
    got = { data: got.data, shape: [...got.shape, 2], dtype: got.dtype === 'complex64' ? 'float32' : 'float64' };
  }
  if (JSON.stringify(got.shape) !== JSON.stringify(want.shape) || got.dtype !== want.dtype) {
    throw new Error(`${label}: got ${got.dtype}[${got.shape}], expected ${want.dtype}[${want.shape}]`);
  }
  const [atol, rtol] = tol ?? (want.dtype === 'float16' || want.dtype === 'bfloat16' ? [1e-2, 1e-2]
    : want.dtype.startsWith('float') ? [1e-5, 1e-4] : [0, 0]);
  const g = toNumbers(got);
  const w = toNumbers(want);
  let max = 0;
  for (let i = 0; i < w.length; i++) {
    const a = g[i];
    const b = w[i];
    if (Number.isNaN(a) && Number.isNaN(b)) continue;
    if (a === b) continue;
    const d = Math.abs(a - b);
    if (!(d <= atol + rtol * Math.abs(b))) throw new Error(`${label}: first outlier at ${i}: got ${a}, expected ${b}`);
    max = Math.max(max, d);
  }
  return max;
}

/** Rebuild the exported (args, kwargs) structure from flat leaves and a serialized TreeSpec
 * (written here independently of the package's own flattening). */
export function unflattenSpec(spec, leaves) {
  switch (spec.kind) {
    case 'leaf': return leaves.shift();
    case 'none': return null;
    case 'tuple': case 'list': return spec.children.map((c) => unflattenSpec(c, leaves));
    case 'dict': return Object.fromEntries(spec.children.map((c, i) => [String(spec.keys[i]), unflattenSpec(c, leaves)]));
    case 'struct': return Object.fromEntries(spec.children.map((c, i) => [spec.fields[i], unflattenSpec(c, leaves)]));
    default: throw new Error(`spec kind ${spec.kind}`);
  }
}

export function flattenOut(v, out = []) {
  if (v && v.shape && ArrayBuffer.isView(v.data)) out.push(v);
  else if (Array.isArray(v)) v.forEach((x) => flattenOut(x, out));
  else if (v && typeof v === 'object') Object.values(v).forEach((x) => flattenOut(x, out));
  else out.push(v);
  return out;
}

/** (atol, rtol) per named tolerance of the op suite (as tests/ops.rs). */
export const TOL = { exact: [0, 0], close: [1e-5, 1e-5], loose: [1e-4, 1e-4], half: [1e-2, 1e-2], opinfo: [1e-4, 1e-4] };

/** Run one family of the op suite (tests/fixtures/ops/FAM.*) through the package API.
 * `fetchBytes(relPath)` reads a file under tests/fixtures (fs in Node, fetch in a browser);
 * `dir` is the family's folder there (`ops`; the OpInfo cache has the same layout). */
export async function runOpFamily(load, fam, fetchBytes, device = 'auto', dir = 'ops') {
  const cases = JSON.parse(new TextDecoder().decode(await fetchBytes(`${dir}/${fam}.cases.json`)));
  const io = parseSafetensors(await fetchBytes(`${dir}/${fam}.io.safetensors`));
  const bytes = await fetchBytes(`${dir}/${fam}.pt2`);
  let passed = 0;
  const failures = [];
  for (const c of cases.cases) {
    let model;
    try {
      model = await load(bytes, { program: c.program, device });
      const names = model.info.inputs.map((i) => i.name);
      const inputs = Object.fromEntries(names.map((n, i) => [n, io[`${c.program}/input_${i}`]]));
      if (c.error) {
        // torch raised for this case (tests/fixgen/ops/case.py `raises`): the run must fail
        // naming the index torch named (as tests/common/mod.rs `raised`).
        const named = c.error.index != null ? `index ${c.error.index} is out of` : 'is out of';
        let message = null;
        try { await model.run(inputs); } catch (e) { message = String(e?.message); }
        if (message === null) throw new Error(`ran, where torch raised: ${c.error.message}`);
        if (!message.includes(named)) throw new Error(`error ${JSON.stringify(message)} does not say ${JSON.stringify(named)} (torch: ${c.error.message})`);
        passed++;
        continue;
      }
      const got = flattenOut(await model.run(inputs)).filter((v) => v && v.shape);
      let k = 0;
      c.outputs.forEach((o, i) => {
        if (!Array.isArray(o)) return;
        const want = io[`${c.program}/output_${i}`];
        let tol = TOL[c.tol];
        if (want.dtype === 'float16' || want.dtype === 'bfloat16') tol = c.tol === 'exact' ? tol : [Math.max(tol[0], 1e-2), Math.max(tol[1], 1e-2)];
        assertClose(`output ${i}`, got[k++], want, tol);
      });
      passed++;
    } catch (e) {
      failures.push(`${c.program}: ${e.message}`);
    } finally {
      model?.dispose();
    }
  }
  return { passed, failures };
}

/** Max abs error and cosine similarity; throws unless max <= 2e-3 * max|want| and cosine >= 0.99999
 * (the real-model criterion of tests/models.rs). */
export function modelMetrics(label, got, want) {
  if (JSON.stringify(got?.shape) !== JSON.stringify(want.shape) || got.dtype !== want.dtype) {
    throw new Error(`${label}: got ${got?.dtype}[${got?.shape}], expected ${want.dtype}[${want.shape}]`);
  }
  const g = toNumbers(got);
  const w = toNumbers(want);
  let max = 0; let dot = 0; let ng = 0; let nw = 0; let scale = 0;
  for (let i = 0; i < w.length; i++) {
    max = Math.max(max, Math.abs(g[i] - w[i]));
    dot += g[i] * w[i]; ng += g[i] * g[i]; nw += w[i] * w[i];
    scale = Math.max(scale, Math.abs(w[i]));
  }
  const cos = ng === 0 && nw === 0 ? 1 : dot / Math.sqrt(ng * nw);
  if (!want.dtype.startsWith('float')) {
    if (max !== 0) throw new Error(`${label}: integer output differs by ${max}`);
  } else if (!(max <= 2e-3 * scale) || !(cos >= 0.99999)) {
    throw new Error(`${label}: max abs error ${max}, cosine ${cos}`);
  }
  return { max, cos };
}

/** Run a real model's io cases (.cache/models) through the package; returns per-output metrics. */
/** Run a real model's io cases (`warm`: a second run of each, timed separately). */
export async function runModel(load, stem, meta, fetchBytes, device = 'auto', onlyFirst = false, warm = false) {
  const bytes = await fetchBytes(meta.archive);
  const model = await load(bytes, { device });
  const rows = [];
  try {
    const cases = meta.programs.model.io_cases;
    for (const c of onlyFirst ? cases.slice(0, 1) : cases) {
      const io = parseSafetensors(await fetchBytes(c.file));
      const [args, kwargs] = unflattenSpec(model.info.specs.inSpec, c.inputs.map((i) => io[i.key]));
      let t0 = performance.now();
      const got = flattenOut(await model.run({ args, kwargs })).filter((v) => v && v.shape);
      const ms = performance.now() - t0;
      // A second run of the same inputs: warm caches (pipelines, buffers).
      let warmMs = null;
      if (warm) {
        t0 = performance.now();
        await model.run({ args, kwargs });
        warmMs = performance.now() - t0;
      }
      const stats = model.lastRunStats?.() ?? null;
      c.outputs.forEach((o, i) => rows.push({ stem, label: c.label, key: o.key, ms, warmMs, stats, device: model.device, ...modelMetrics(`${stem} ${c.label} ${o.key}`, got[i], io[o.key]) }));
    }
  } finally {
    model.dispose();
  }
  return rows;
}
