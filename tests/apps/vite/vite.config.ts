import { defineConfig } from 'vite';

// What an app using pt2web sets (the README says why): Workers as ES modules (pt2web loads its
// WebAssembly build with dynamic imports, which classic workers cannot split), and pt2web kept
// out of the dev server's dependency pre-bundling (its .wasm files sit beside its own modules).
export default defineConfig({
  worker: { format: 'es' },
  optimizeDeps: { exclude: ['pt2web'] },
  build: { target: 'es2022', chunkSizeWarningLimit: 20000 },
});
