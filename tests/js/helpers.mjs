// Test helpers: read the committed fixtures (meta.json + io.safetensors written by the torch
// generator) and compare pt2web's outputs with PyTorch's.
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const FIXTURES = path.join(ROOT, 'tests', 'fixtures');

export * from './st.mjs';
import { parseSafetensors } from './st.mjs';

/** Read a safetensors file: {name: {data, shape, dtype}}. */
export function readSafetensors(file) {
  return parseSafetensors(new Uint8Array(readFileSync(file)));
}

export function metas(dir = FIXTURES) {
  return readdirSync(dir).filter((f) => f.endsWith('.meta.json')).sort()
    .map((f) => [f.replace('.meta.json', ''), JSON.parse(readFileSync(path.join(dir, f), 'utf8'))]);
}

