// The Node ESM consumer: the installed package imported by name, run on the CPU backend.
// `node node.mjs model.pt2` runs an input of 0.5s (as the README's quick start) and prints
// the output as JSON; tests/apps/apps.test.mjs compares it with PyTorch's.
import { readFile } from 'node:fs/promises';
import { load, tensor } from 'pt2web';

const model = await load(new Uint8Array(await readFile(process.argv[2])));
const y = await model.run([tensor(new Float32Array(4 * 16).fill(0.5), [4, 16])]);
console.log(JSON.stringify({ device: model.device, shape: y.shape, data: Array.from(y.data) }));
model.dispose();
