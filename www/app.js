// The demo page: sentence similarity with MiniLM, and "open any .pt2".
import { load, tensor, gpu } from '../js/index.js';
import { WordPiece, meanPool, cosineMatrix } from './wordpiece.js';
import { readTensorFiles } from './tensorfile.js';

const $ = (id) => document.getElementById(id);
const state = { minilm: null, tok: null, other: null, uploaded: null, lastOutputs: null };
window.pt2webDemo = state; // for tests and the console

function deviceOption() { return $('deviceSel').value; }

async function showDevice(model) {
  let adapter = '';
  if (model.device === 'webgpu') {
    const p = await gpu.properties().catch(() => null);
    if (p) adapter = ` — adapter ${p.name || '(unnamed)'} (${p.backend}, ${p.deviceType}; features: ${p.features.join(', ') || 'none'})`;
  }
  $('device').textContent = `running on ${model.device}: ${model.deviceNote}${adapter}`;
}

async function loadMiniLM() {
  $('simStatus').textContent = 'loading MiniLM…';
  const [tokJson] = await Promise.all([fetch('/models/tokenizer.json').then((r) => r.json())]);
  state.tok = new WordPiece(tokJson);
  state.minilm?.dispose();
  state.minilm = await load('/models/minilm.pt2', {
    device: deviceOption(),
    // Downloaded once, then read from the archive cache (phase 'cache') on later visits.
    onProgress: (l, t, { phase }) => { $('simStatus').textContent = `loading MiniLM (${phase})… ${(l / 1e6).toFixed(1)}${t ? ` / ${(t / 1e6).toFixed(1)}` : ''} MB`; },
  });
  await showDevice(state.minilm);
  $('simStatus').textContent = 'ready';
  $('simBtn').disabled = false;
}

function drawHeat(m, labels) {
  const c = $('heat');
  const g = c.getContext('2d');
  const n = m.length;
  const s = c.width / n;
  g.clearRect(0, 0, c.width, c.height);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const v = Math.max(0, Math.min(1, m[i][j]));
      g.fillStyle = `rgb(${Math.round(255 * (1 - v))}, ${Math.round(120 + 100 * (1 - v))}, 255)`;
      g.fillRect(j * s, i * s, s, s);
      g.fillStyle = v > 0.6 ? '#fff' : '#000';
      g.font = `${Math.min(18, s / 4)}px system-ui`;
      g.fillText(m[i][j].toFixed(3), j * s + s * 0.2, i * s + s * 0.55);
    }
  }
  c.title = labels.join('\n');
}

export async function similarity(sentences) {
  const inputs = state.tok.batch(sentences);
  const t0 = performance.now();
  const out = await state.minilm.run(inputs);
  const ms = performance.now() - t0;
  const hidden = out.last_hidden_state ?? out[0];
  const emb = meanPool(hidden, inputs.attention_mask);
  return { matrix: cosineMatrix(emb), ms, ids: inputs.input_ids };
}
state.similarity = similarity;

$('simBtn').onclick = async () => {
  const sentences = $('sentences').value.split('\n').map((s) => s.trim()).filter(Boolean);
  if (sentences.length < 2) { $('simStatus').textContent = 'enter at least two sentences'; return; }
  $('simBtn').disabled = true;
  try {
    const r = await similarity(sentences);
    drawHeat(r.matrix, sentences);
    $('simOut').textContent = r.matrix.map((row, i) => `${row.map((v) => v.toFixed(4)).join('  ')}   ${sentences[i]}`).join('\n');
    $('simStatus').textContent = `${r.ms.toFixed(1)} ms per run (${sentences.length} sentences, seq ${r.ids.shape[1]})`;
    $('simStatus').dataset.done = '1';
  } catch (e) {
    $('simStatus').innerHTML = `<span class="err">${e.code ?? ''} ${e.message}</span>`;
  } finally {
    $('simBtn').disabled = false;
  }
};

// ---- open any .pt2
function randomFor(inp) {
  const shape = inp.shape.map((d) => (/^\d+$/.test(d) ? Number(d) : 2));
  const n = shape.reduce((a, b) => a * b, 1);
  const Arr = { float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array, uint8: Uint8Array, bool: Uint8Array, int8: Int8Array, int16: Int16Array, float16: Uint16Array, bfloat16: Uint16Array }[inp.dtype];
  const data = new Arr(n);
  for (let i = 0; i < n; i++) {
    if (Arr === BigInt64Array) data[i] = BigInt(Math.floor(Math.random() * 2));
    else if (Arr === Uint16Array) data[i] = 0x3c00; // 1.0
    else if (inp.dtype.startsWith('float')) data[i] = Math.random() * 2 - 1;
    else data[i] = Math.floor(Math.random() * 2);
  }
  return tensor(data, shape, inp.dtype);
}

function summarize(v) {
  if (v && v.shape && ArrayBuffer.isView(v.data)) {
    const head = Array.from(v.data.slice(0, 6), (x) => (typeof x === 'number' ? +x.toFixed(5) : String(x)));
    return `${v.dtype}[${v.shape}] ${head.join(', ')}${v.data.length > 6 ? ', …' : ''}`;
  }
  if (Array.isArray(v)) return v.map(summarize);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, summarize(x)]));
  return v;
}

async function openFile(file) {
  $('runStatus').textContent = `loading ${file.name}…`;
  try {
    state.other?.dispose();
    // The memory timeline below the profile draws this history (from the load on).
    await gpu.recordMemoryHistory(true, 1 << 18);
    state.other = await load(new Uint8Array(await file.arrayBuffer()), { device: deviceOption() });
    const i = state.other.info;
    $('info').textContent = JSON.stringify({
      program: i.name, ir: i.ir, device: state.other.device, inputs: i.inputs, outputs: i.outputs,
      dynamic: i.range_constraints, parameters: i.parameters, buffers: i.buffers, ops: i.op_histogram,
    }, null, 2);
    $('runBtn').disabled = false;
    $('runStatus').textContent = `${i.num_nodes} nodes`;
  } catch (e) {
    $('info').innerHTML = `<span class="err">${e.code ?? ''}: ${e.message}</span>`;
    $('runStatus').textContent = '';
  }
}

// Per-op time chart from the profiler (time per op target, the most expensive first).
function drawOpChart(summary) {
  const c = $('ops');
  const g = c.getContext('2d');
  const rows = summary.slice(0, 14);
  c.height = 22 * rows.length + 10;
  g.clearRect(0, 0, c.width, c.height);
  const max = Math.max(...rows.map((r) => r.total_ms), 1e-6);
  g.font = '12px system-ui';
  rows.forEach((r, i) => {
    const y = 5 + i * 22;
    g.fillStyle = '#3a7bd5';
    g.fillRect(300, y, Math.max(1, (c.width - 420) * r.total_ms / max), 16);
    g.fillStyle = '#000';
    g.fillText(`${r.target} ×${r.count}`, 4, y + 12);
    g.fillText(`${r.total_ms.toFixed(2)} ms`, 306 + (c.width - 420) * r.total_ms / max, y + 12);
  });
  $('traceLink').hidden = false;
}
// Live GPU bytes over the recorded memory history (gpu.memorySnapshot(), in the layout of
// torch.cuda.memory._snapshot()): one bar per allocation or free, colored by the op that made
// it; the legend lists the ops that allocated the most.
function drawMemoryTimeline(snap) {
  const c = $('mem');
  const trace = (snap?.device_traces[0] ?? []).filter((e) => e.action === 'alloc' || e.action === 'free_completed');
  c.hidden = $('memCaption').hidden = !trace.length;
  if (!trace.length) return;
  const g = c.getContext('2d');
  const sign = (e) => (e.action === 'alloc' ? e.size : -e.size);
  // What was live before the history started: live now less the history's net change.
  const liveNow = snap.segments.reduce((a, s) => a + s.allocated_size, 0);
  let live = liveNow - trace.reduce((a, e) => a + sign(e), 0);
  const bars = trace.map((e) => ({ live: (live += sign(e)), op: e.frames[0]?.name ?? '?' }));
  const byOp = new Map();
  for (const e of trace) if (e.action === 'alloc') byOp.set(e.frames[0]?.name ?? '?', (byOp.get(e.frames[0]?.name ?? '?') ?? 0) + e.size);
  const ops = [...byOp.keys()].sort((a, b) => byOp.get(b) - byOp.get(a));
  const color = (op) => `hsl(${(Math.max(0, ops.indexOf(op)) * 137) % 360} 65% 48%)`;
  const max = Math.max(...bars.map((b) => b.live), 1);
  const [x0, top, w, h] = [70, 8, c.width - 80, c.height - 48];
  g.clearRect(0, 0, c.width, c.height);
  g.font = '12px system-ui';
  bars.forEach((b, i) => {
    const bh = (h * Math.max(0, b.live)) / max;
    g.fillStyle = color(b.op);
    g.fillRect(x0 + (i * w) / bars.length, top + h - bh, Math.max(1, w / bars.length), bh);
  });
  g.fillStyle = '#000';
  g.fillText(`${(max / 2 ** 20).toFixed(2)} MiB`, 2, top + 10);
  g.fillText('0', 2, top + h);
  g.fillText(`${trace.length} allocations and frees →`, x0, top + h + 14);
  let x = x0;
  for (const op of ops.slice(0, 6)) {
    const label = `${op} ${(byOp.get(op) / 2 ** 20).toFixed(2)} MiB`;
    g.fillStyle = color(op);
    g.fillRect(x, top + h + 24, 10, 10);
    g.fillStyle = '#000';
    g.fillText(label, x + 14, top + h + 33);
    x += g.measureText(label).width + 28;
  }
}
$('traceLink').onclick = (e) => {
  e.preventDefault();
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([JSON.stringify(state.lastTrace)], { type: 'application/json' }));
  a.download = 'pt2web-trace.json';
  a.click();
};

$('file').onchange = (e) => e.target.files[0] && openFile(e.target.files[0]);
$('drop').ondragover = (e) => { e.preventDefault(); $('drop').classList.add('over'); };
$('drop').ondragleave = () => $('drop').classList.remove('over');
$('drop').ondrop = (e) => { e.preventDefault(); $('drop').classList.remove('over'); if (e.dataTransfer.files[0]) openFile(e.dataTransfer.files[0]); };
// Inputs from user files: safetensors keys (or .npy file names) are the program's input names;
// a program with one input takes the only tensor of the files whatever its name.
function uploadedInputs(m) {
  const up = state.uploaded;
  const names = m.info.inputs.map((i) => i.name);
  const keys = Object.keys(up);
  if (names.length === 1 && keys.length === 1) return { [names[0]]: up[keys[0]] };
  const missing = names.filter((n) => !(n in up));
  if (missing.length) throw Object.assign(new Error(`the input files have no tensor for ${missing.map((n) => `'${n}'`).join(', ')} (they have: ${keys.join(', ') || 'none'}; the program takes: ${names.join(', ')})`), { code: 'INPUT' });
  return Object.fromEntries(names.map((n) => [n, up[n]]));
}

$('inputsFile').onchange = async (e) => {
  const files = [...e.target.files];
  if (!files.length) return;
  try {
    state.uploaded = await readTensorFiles(files);
    const desc = Object.entries(state.uploaded).map(([k, t]) => `${k}: ${t.dtype}[${t.shape}]`).join(', ');
    $('inputsStatus').textContent = `inputs from ${files.map((f) => f.name).join(', ')}: ${desc}`;
    $('runBtn').textContent = 'Run with uploaded inputs';
  } catch (err) {
    state.uploaded = null;
    $('runBtn').textContent = 'Run with random inputs';
    $('inputsStatus').innerHTML = '';
    const s = document.createElement('span');
    s.className = 'err';
    s.textContent = `${files.map((f) => f.name).join(', ')}: ${err.message}`;
    $('inputsStatus').append(s);
  }
};

$('runBtn').onclick = async () => {
  const m = state.other;
  delete $('runStatus').dataset.done;
  const t0 = performance.now();
  try {
    const named = state.uploaded ? uploadedInputs(m)
      : Object.fromEntries(m.info.inputs.map((inp) => [inp.name, randomFor(inp)]));
    m.startProfiler();
    const out = await m.run(named);
    const prof = m.stopProfiler();
    drawOpChart(prof.summary);
    drawMemoryTimeline(m.device === 'webgpu' ? gpu.memorySnapshot() : null);
    state.lastTrace = prof.chromeTrace;
    state.lastOutputs = out;
    $('outputs').textContent = JSON.stringify(summarize(out), null, 2);
    const timing = prof.gpuTiming ? `; GPU kernels timed by ${prof.gpuTiming === 'timestamp' ? 'GPU timestamps' : 'the host clock (no timestamp-query)'}` : '';
    $('runStatus').textContent = `ran in ${(performance.now() - t0).toFixed(1)} ms with ${state.uploaded ? 'uploaded' : 'random'} inputs${timing}`;
    $('runStatus').dataset.done = '1';
  } catch (e) {
    try { m.stopProfiler(); } catch { /* not started or busy */ }
    $('outputs').innerHTML = '';
    const s = document.createElement('span');
    s.className = 'err';
    s.textContent = `${e.code ?? ''}: ${e.message}`;
    $('outputs').append(s);
    $('runStatus').textContent = 'failed';
    $('runStatus').dataset.done = 'error';
  }
};
$('deviceSel').onchange = () => loadMiniLM().catch((e) => { $('simStatus').innerHTML = `<span class="err">${e.message}</span>`; });

loadMiniLM().catch((e) => { $('simStatus').innerHTML = `<span class="err">${e.code ?? ''} ${e.message}</span>`; });
