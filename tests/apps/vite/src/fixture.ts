// The PyTorch side of the checks: tests/fixtures' safetensors (written by tests/fixgen from
// eager PyTorch), served by the test under /fixtures/.
import type { Tensor } from 'pt2web';

/** Parse a float32-only safetensors file into tensors by name. */
export function parseSafetensors(buf: Uint8Array): Record<string, Tensor> {
  const n = Number(new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(buf.subarray(8, 8 + n))) as
    Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const out: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(header)) {
    if (k === '__metadata__' || v.dtype !== 'F32') continue;
    const [a, b] = v.data_offsets;
    const bytes = buf.slice(8 + n + a, 8 + n + b);
    out[k] = { data: new Float32Array(bytes.buffer), shape: v.shape, dtype: 'float32' };
  }
  return out;
}

export async function fetchBytes(url: string): Promise<Uint8Array> {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

/** The largest |a - b| over two float32 tensors of one shape (Infinity when shapes differ). */
export function maxDiff(a: Tensor, b: Tensor): number {
  if (a.shape.join() !== b.shape.join()) return Infinity;
  let d = 0;
  for (let i = 0; i < a.data.length; i++) d = Math.max(d, Math.abs(Number(a.data[i]) - Number(b.data[i])));
  return d;
}
