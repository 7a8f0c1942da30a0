#!/usr/bin/env bash
# Build the npm package's WebAssembly: the core crate for wasm32 (size-optimized profile
# `wasm-release`, simd128 from .cargo/config.toml), then wasm-bindgen (--target web: one
# output for browsers, workers and Node) into pkg/. Prints the .wasm size, raw and gzipped.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(grep -A1 'name = "wasm-bindgen"' Cargo.lock | sed -n 's/version = "\(.*\)"/\1/p' | head -1)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')
if [ "$have" != "$want" ]; then
  echo "wasm-bindgen-cli $want is needed (found '${have:-none}'): cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi
# PT2WEB_WASM_PROFILE=release: a faster build (no LTO) while iterating.
profile="${PT2WEB_WASM_PROFILE:-wasm-release}"
cargo build -p pt2web --target wasm32-unknown-unknown --profile "$profile"
rm -rf pkg
wasm-bindgen --target web --out-dir pkg --out-name pt2web \
  "target/wasm32-unknown-unknown/$profile/pt2web.wasm"
if command -v wasm-opt >/dev/null 2>&1; then
  wasm-opt -Oz --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals -o pkg/pt2web_bg.wasm pkg/pt2web_bg.wasm
fi
raw=$(stat -c %s pkg/pt2web_bg.wasm)
gz=$(gzip -9 -c pkg/pt2web_bg.wasm | wc -c)
echo "pkg/pt2web_bg.wasm: $raw bytes raw, $gz bytes gzipped"
