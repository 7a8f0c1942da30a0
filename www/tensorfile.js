// Tensors from files the user picks: safetensors (any number of named tensors) and NumPy .npy
// (one tensor). Both give {name: {data, shape, dtype}} in the package's tensor form.

const ST_DTYPES = {
  F32: [Float32Array, 'float32'], F64: [Float64Array, 'float64'], F16: [Uint16Array, 'float16'],
  BF16: [Uint16Array, 'bfloat16'], I64: [BigInt64Array, 'int64'], I32: [Int32Array, 'int32'],
  I16: [Int16Array, 'int16'], I8: [Int8Array, 'int8'], U8: [Uint8Array, 'uint8'], BOOL: [Uint8Array, 'bool'],
};

function typed(Ctor, bytes) {
  const copy = new Uint8Array(bytes); // aligned copy
  return new Ctor(copy.buffer, 0, copy.byteLength / Ctor.BYTES_PER_ELEMENT);
}

/**
 * safetensors: an 8-byte little-endian header length, a JSON header
 * `{name: {dtype, shape, data_offsets: [begin, end]}, __metadata__?}`, then the data.
 */
export function parseSafetensors(buf) {
  if (buf.byteLength < 8) throw new Error('not a safetensors file: shorter than its 8-byte header length');
  const n = Number(new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getBigUint64(0, true));
  if (n > buf.byteLength - 8) throw new Error(`not a safetensors file: header length ${n} exceeds the file`);
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(buf.subarray(8, 8 + n)));
  } catch (e) {
    throw new Error(`not a safetensors file: the header is not JSON (${e.message})`);
  }
  const base = 8 + n;
  const out = {};
  for (const [k, v] of Object.entries(header)) {
    if (k === '__metadata__') continue;
    const dt = ST_DTYPES[v.dtype];
    if (!dt) throw new Error(`tensor '${k}': unsupported safetensors dtype ${v.dtype}`);
    const [Ctor, dtype] = dt;
    const [a, b] = v.data_offsets;
    const numel = v.shape.reduce((x, y) => x * y, 1);
    if (b - a !== numel * Ctor.BYTES_PER_ELEMENT || base + b > buf.byteLength) {
      throw new Error(`tensor '${k}': data_offsets [${a}, ${b}] do not match ${dtype}[${v.shape}]`);
    }
    out[k] = { data: typed(Ctor, buf.subarray(base + a, base + b)), shape: v.shape, dtype };
  }
  return out;
}

const NPY_DTYPES = {
  f4: [Float32Array, 'float32'], f8: [Float64Array, 'float64'], f2: [Uint16Array, 'float16'],
  i8: [BigInt64Array, 'int64'], i4: [Int32Array, 'int32'], i2: [Int16Array, 'int16'], i1: [Int8Array, 'int8'],
  u1: [Uint8Array, 'uint8'], b1: [Uint8Array, 'bool'],
};

/** NumPy .npy (format 1.0-3.0, little-endian, C order): `{data, shape, dtype}`. */
export function parseNpy(buf) {
  const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
  if (buf.byteLength < 10 || magic.some((m, i) => buf[i] !== m)) throw new Error('not a .npy file (no \\x93NUMPY magic)');
  const major = buf[6];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const hlen = major === 1 ? dv.getUint16(8, true) : dv.getUint32(8, true);
  const hstart = major === 1 ? 10 : 12;
  const header = new TextDecoder().decode(buf.subarray(hstart, hstart + hlen));
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order'\s*:\s*True/.test(header);
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (!descr || shapeText === undefined) throw new Error(`.npy header not understood: ${header}`);
  if (fortran) throw new Error('.npy in Fortran order is not supported (save a C-contiguous array)');
  if (descr[0] === '>') throw new Error(`.npy: big-endian dtype ${descr} is not supported`);
  const dt = NPY_DTYPES[descr.slice(1)];
  if (!dt) throw new Error(`.npy: unsupported dtype ${descr}`);
  const shape = shapeText.split(',').map((x) => x.trim()).filter(Boolean).map(Number);
  const [Ctor, dtype] = dt;
  const numel = shape.reduce((x, y) => x * y, 1);
  const start = hstart + hlen;
  const end = start + numel * Ctor.BYTES_PER_ELEMENT;
  if (end > buf.byteLength) throw new Error(`.npy: ${dtype}[${shape}] needs ${end - start} bytes of data, the file has ${buf.byteLength - start}`);
  return { data: typed(Ctor, buf.subarray(start, end)), shape, dtype };
}

/**
 * Read user-chosen files into named tensors: every tensor of a .safetensors by its key, a .npy
 * by its file name without the extension.
 */
export async function readTensorFiles(files) {
  const out = {};
  for (const f of files) {
    const buf = new Uint8Array(await f.arrayBuffer());
    if (/\.npy$/i.test(f.name)) out[f.name.replace(/\.npy$/i, '')] = parseNpy(buf);
    else Object.assign(out, parseSafetensors(buf));
  }
  return out;
}
