#!/usr/bin/env bash
# Build the npm package's WebAssembly: the core crate for wasm32 (profile `wasm-release`:
# opt-level 3, thin LTO; simd128 from .cargo/config.toml), then wasm-bindgen (--target web: one
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
# Which builds besides the plain single-threaded pkg/ (always built; the package's fallback):
# PT2WEB_WASM_BUILDS lists them, all three by default (what the npm package ships). The test
# command builds the two its tests run: pkg/ (Node 20 has no relaxed SIMD) and
# threads-relaxed (Chromium's isolated pages); each build is minutes of compiling.
builds=" ${PT2WEB_WASM_BUILDS:-relaxed threads threads-relaxed} "
for b in $builds; do
  case "$b" in
    relaxed | threads | threads-relaxed) ;;
    *) echo "PT2WEB_WASM_BUILDS: unknown build '$b' (relaxed, threads, threads-relaxed)" >&2; exit 1 ;;
  esac
done
# The older switches: PT2WEB_WASM_RELAXED=0 drops both relaxed builds, PT2WEB_WASM_THREADS=0
# both threaded ones.
if [ "${PT2WEB_WASM_RELAXED:-1}" = "0" ]; then
  builds=${builds// relaxed / }; builds=${builds// threads-relaxed / }
fi
if [ "${PT2WEB_WASM_THREADS:-1}" = "0" ]; then
  builds=${builds// threads / }; builds=${builds// threads-relaxed / }
fi
want() { [[ "$builds" == *" $1 "* ]]; }
cargo build -p pt2web --target wasm32-unknown-unknown --profile "$profile"
rm -rf pkg
wasm-bindgen --target web --out-dir pkg --out-name pt2web \
  "target/wasm32-unknown-unknown/$profile/pt2web.wasm"

# The relaxed-SIMD build (pkg/relaxed/): the GEMM's multiply-adds as f32x4.relaxed_madd (one
# fused instruction where the CPU has FMA). js/index.js loads it where the engine validates
# relaxed SIMD (Chromium since 114), pkg/ elsewhere. Its own target dir: the flags differ.
# `--cfg pt2web_relaxed_simd` selects the relaxed kernel of crates/simd128, the one function
# compiled with relaxed SIMD (that crate says why). PT2WEB_WASM_RELAXED=0 skips these builds.
# No relaxed_min/relaxed_max may appear in them: their NaN results are the engine's choice,
# where torch propagates NaN (binaryen's wasm-dis, from npm, checks).
check_relaxed() { # $1: a relaxed build's .wasm
  if [ ! -x node_modules/.bin/wasm-dis ]; then
    echo "note: no node_modules/.bin/wasm-dis (npm ci): $1 not checked for relaxed_min/max" >&2
    return
  fi
  local n
  n=$(node_modules/.bin/wasm-dis "$1" | grep -cE 'relaxed_(min|max)' || true)
  if [ "$n" != 0 ]; then
    echo "$1: $n relaxed_min/relaxed_max instructions (NaN would not propagate);" \
      "relaxed SIMD must stay in crates/simd128's kernel" >&2
    exit 1
  fi
}
if want relaxed; then
  RUSTFLAGS="-C target-feature=+simd128 --cfg pt2web_relaxed_simd" CARGO_TARGET_DIR=target/wasm-relaxed \
    cargo build -p pt2web --target wasm32-unknown-unknown --profile "$profile"
  wasm-bindgen --target web --out-dir pkg/relaxed --out-name pt2web \
    "target/wasm-relaxed/wasm32-unknown-unknown/$profile/pt2web.wasm"
  check_relaxed pkg/relaxed/pt2web_bg.wasm
fi

# The multi-threaded build (pkg/threads/, feature `threads`): rayon's pool on Web Workers
# over a shared memory, which needs std rebuilt with atomics (the pinned nightly of
# scripts/wasm-threads-toolchain, with rust-src: scripts/setup.sh installs it). Its own
# target dir, so the two builds do not invalidate each other. Profile `release`: opt-level 3
# for speed. PT2WEB_WASM_THREADS=0 skips it (js/index.js then always runs single-threaded).
# With relaxed SIMD too: pkg/threads-relaxed/.
threads_build() { # $1: extra rustc flags, $2: target dir, $3: output dir
  nightly=$(cat scripts/wasm-threads-toolchain)
  RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128$1 \
    -C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296 \
    -C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size \
    -C link-arg=--export=__tls_align -C link-arg=--export=__tls_base" \
    CARGO_TARGET_DIR="$2" \
    cargo "+$nightly" build -p pt2web --target wasm32-unknown-unknown --release \
    --features threads -Z build-std=panic_abort,std
  wasm-bindgen --target web --out-dir "$3" --out-name pt2web \
    "$2/wasm32-unknown-unknown/release/pt2web.wasm"
  echo "$3/pt2web_bg.wasm: $(stat -c %s "$3/pt2web_bg.wasm") bytes raw"
}
if want threads; then
  threads_build "" target/wasm-threads pkg/threads
fi
if want threads-relaxed; then
  threads_build " --cfg pt2web_relaxed_simd" target/wasm-threads-relaxed pkg/threads-relaxed
  check_relaxed pkg/threads-relaxed/pt2web_bg.wasm
fi
# A build left out gets a placeholder glue that throws when imported (js/index.js then takes
# the next build): bundlers resolve every build js/index.js names, so an app using a partly
# built package (tests/apps) still builds.
for b in relaxed threads threads-relaxed; do
  if ! want "$b"; then
    mkdir -p "pkg/$b"
    echo "throw new Error('pkg/$b was not built (scripts/build_wasm.sh: PT2WEB_WASM_BUILDS)');" > "pkg/$b/pt2web.js"
  fi
done
# wasm-opt: npm's binaryen (package.json devDependency), else one on PATH; skipped while
# iterating on the release profile.
wasm_opt=""
if [ -x node_modules/.bin/wasm-opt ]; then
  wasm_opt=node_modules/.bin/wasm-opt
elif command -v wasm-opt >/dev/null 2>&1; then
  wasm_opt=wasm-opt
fi
if [ -n "$wasm_opt" ] && [ "$profile" = wasm-release ]; then
  before=$(stat -c %s pkg/pt2web_bg.wasm)
  # -O1: npm's binaryen is itself WebAssembly and took over 7 minutes at -O3 on this module
  # (LLVM has optimized it already; -O1 still trims 11%).
  "$wasm_opt" -O1 --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue \
    -o pkg/pt2web_bg.wasm pkg/pt2web_bg.wasm
  echo "wasm-opt -O1: $before -> $(stat -c %s pkg/pt2web_bg.wasm) bytes"
fi
raw=$(stat -c %s pkg/pt2web_bg.wasm)
gz=$(gzip -9 -c pkg/pt2web_bg.wasm | wc -c)
echo "pkg/pt2web_bg.wasm: $raw bytes raw, $gz bytes gzipped"
