#!/usr/bin/env bash
# The test command (README): formatting, lints (native and wasm32), Rust tests, the wasm32
# build of the core, the Python-side round-trip tests against torch, and a short fuzz run.
# Needs: the Rust toolchain with the wasm32 target, and the fixture venv (.venv, made by
# scripts/setup.sh). Real-model tests run when .cache/models exists (scripts/build_models.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's header says how long the command has run so far (where CI's time goes).
t0=$(date +%s)
step() { printf '\n== %s  [%ss]\n' "$*" "$(( $(date +%s) - t0 ))"; }

step "cargo fmt --check"
cargo fmt --all --check

step "generated shaders up to date"
python3 scripts/gen_matmul4.py --check

step "cargo clippy (native)"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo clippy (wasm32, core crate)"
cargo clippy -p pt2web --target wasm32-unknown-unknown -- -D warnings

# macOS (Metal) and Windows (DX12) type-checked with clippy (issue 20); their dependencies are
# kept in a target dir outside the checkout (scripts/check_desktop.sh): ~12 min cold, ~1-2 min warm.
if [ "${PT2WEB_DESKTOP_CHECK:-1}" != "0" ]; then
  step "cargo clippy (desktop targets: aarch64-apple-darwin, x86_64-pc-windows-msvc, Linux with cuda; PT2WEB_DESKTOP_CHECK=0 skips)"
  bash scripts/check_desktop.sh
fi

# The builds the tests run (scripts/build_wasm.sh): the plain single-threaded pkg/ (Node; Chromium
# on pages without COOP/COEP) and the relaxed-SIMD threaded one (Chromium's isolated pages).
# `npm run build` makes all four the package ships.
step "wasm package: wasm32 builds (single-threaded pkg/; multi-threaded relaxed-SIMD pkg/threads-relaxed/) + wasm-bindgen"
PT2WEB_WASM_BUILDS="${PT2WEB_WASM_BUILDS:-threads-relaxed}" bash scripts/build_wasm.sh

step "cargo test"
cargo test --workspace --release 2>&1 | tee target/cargo-test.log
# One closing line for the whole Rust suite (cargo prints one line per test binary).
awk '/^test result:/ {p+=$4; f+=$6} END {printf "rust: %d passed, %d failed\n", p, f}' target/cargo-test.log

if [ -x .venv/bin/python ] && [ "${PT2WEB_BIG_ARCHIVE:-1}" != "0" ]; then
  step "a 2.7 GB archive loaded from its file on the CPU and the GPU, host peak printed (scripts/big_archive.sh), and a 256 MiB one streamed in Chromium (scripts/big_archive_browser.sh; PT2WEB_BIG_ARCHIVE=0 skips both)"
  bash scripts/big_archive.sh
  # In Chromium on WebGPU, a 256 MiB one (4 tables): wasm memory grows by about one entry.
  bash scripts/big_archive_browser.sh 4
fi

if [ -x .venv/bin/python ]; then
  step "python tests (torch round trips)"
  cargo build --release -p pt2web-native
  PT2WEB_BIN="$PWD/target/release/pt2web" .venv/bin/python -m pytest -q tests/py
else
  echo "skipping python tests: no .venv (run scripts/setup.sh)"
fi

step "JS tests in Node (the npm package on the CPU backend)"
node --test tests/js/
bash tests/js/pack_test.sh

step "browser tests (Debian chromium + playwright-core)"
node --test tests/browser/

step "the package as apps use it: packed, in a Vite + TypeScript app (tsc --strict, vite build, Chromium), Node ESM, a Worker, the README quick start"
node --test tests/apps/apps.test.mjs

step "soak (issue 17), a small count: scripts/soak.sh's defaults are the full counts"
PT2WEB_SOAK_CALLS=1000 PT2WEB_SOAK_RUNS=50 bash scripts/soak.sh

if [ "${PT2WEB_FUZZ_SECONDS:-0}" != "0" ] && [ -d fuzz ]; then
  step "fuzz every target (scripts/fuzz.sh) for ${PT2WEB_FUZZ_SECONDS}s each"
  scripts/fuzz.sh "${PT2WEB_FUZZ_SECONDS}"
fi

echo "test command took $(( $(date +%s) - t0 ))s"
